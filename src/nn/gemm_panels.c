/* The layers' float sgemm (dd_nn_gemm of nn_real.h) with the library's threads: a large
 * product is cut into panels of whole rows or whole columns of C (never along K), each
 * panel one single-threaded cblas_sgemm, the panels on the OpenMP threads of
 * dd_nn_threads(). The cut depends on the shape only (and on DD_GEMM_PANELS), never on
 * the thread count: one thread runs the same panel calls one after the other, so the
 * thread count never changes a bit, on any OpenBLAS kernel (docs/performance.md,
 * "OpenBLAS's threads and the layers' sgemm panels"). OpenBLAS's own threads do not give
 * that: its threaded driver splits K differently from its one-thread driver, and on its
 * Haswell kernel every threaded call differs.
 *
 * Why not cut by the thread count and rely on a panel giving one call's bits? Measured
 * here (2026-12-02, OpenBLAS 0.3.21, /tmp scan of model shapes up to K 4096, the four
 * transposes, beta 0 and 1): on the SkylakeX kernel every cut whose panels keep
 * M N K > 1e6 gives one call's bits (smaller panels take its small-matrix kernels), but on
 * the Haswell kernel (AVX2 machines, AMD Zen) nearly every cut differs from one call,
 * panels of 64, 128 or 192 rows or columns included: its register tiles depend on where
 * the call's blocks start and end. So the cut is fixed per shape, and a product that is
 * cut costs one thread a little (each panel packs the shared operand again: about 3 % at
 * 2 panels, 10-13 % at 4 for resnet 512's products, single core, CPU time). */
#include <cblas.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include "distdpd/nn.h"
#include "simd.h"

#define PANEL_ALIGN 64      /* panel starts: whole cache lines, whole kernel tiles */
#define PANEL_MIN_WIDTH 128 /* rows or columns per panel, at least */
#define PANEL_MIN_MNK 8388608.0 /* 2^23 multiply-adds per panel at least: smaller products
                                 * stay one call (the small models' numbers unchanged) */
#define PANELS_DEFAULT 2
#define PANELS_MAX 64

static void one_call(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
                     const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* start of panel i of p over D rows or columns: a multiple of PANEL_ALIGN (D at i = p) */
static size_t panel_start(size_t D, int i, int p) {
    return i >= p ? D : D * (size_t)i / (size_t)p / PANEL_ALIGN * PANEL_ALIGN;
}

/* Thread tid of nt: a contiguous range of the p panels. */
static void split_team(int by_rows, int p, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                       const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
                       int tid, int nt) {
    const size_t D = by_rows ? M : N;
    size_t i0, i1;
    dd_team_share((size_t)p, tid, nt, &i0, &i1);
    for (int i = (int)i0; i < (int)i1; i++) {
        const size_t a = panel_start(D, i, p), w = panel_start(D, i + 1, p) - a;
        if (w == 0) continue;
        if (by_rows) /* rows a .. a + w of C and of op(A) */
            one_call(ta, tb, w, N, K, alpha, ta ? A + a : A + a * lda, lda, B, ldb, beta, C + a * ldc, ldc);
        else /* columns a .. a + w of C and of op(B) */
            one_call(ta, tb, M, w, K, alpha, A, lda, tb ? B + a * ldb : B + a, ldb, beta, C + a, ldc);
    }
}

void dd_nn_sgemm_split(int by_rows, int p, int nth, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                       const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    DD_TEAM(nth < p ? nth : p, 1, split_team, by_rows, p, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static _Atomic int panels_cap = 0;

int dd_nn_sgemm_panels_max(void) {
    int c = atomic_load_explicit(&panels_cap, memory_order_relaxed);
    if (c > 0) return c;
    const char *env = getenv("DD_GEMM_PANELS");
    c = env && *env ? atoi(env) : PANELS_DEFAULT;
    c = c < 1 ? 1 : c > PANELS_MAX ? PANELS_MAX : c;
    atomic_store_explicit(&panels_cap, c, memory_order_relaxed);
    return c;
}

int dd_nn_sgemm_panels_set_max(int n) {
    n = n < 1 ? 1 : n > PANELS_MAX ? PANELS_MAX : n;
    atomic_store_explicit(&panels_cap, n, memory_order_relaxed);
    return n;
}

int dd_nn_sgemm_panels(size_t M, size_t N, size_t K, int *by_rows) {
    const int rows = M > N;
    const size_t D = rows ? M : N, other = rows ? N : M;
    const int cap = dd_nn_sgemm_panels_max();
    int p = (size_t)cap < D / PANEL_MIN_WIDTH ? cap : (int)(D / PANEL_MIN_WIDTH);
    for (; p > 1; p--) { /* the most panels whose narrowest stays above the minimum */
        size_t wmin = D;
        for (int i = 0; i < p; i++) {
            const size_t w = panel_start(D, i + 1, p) - panel_start(D, i, p);
            if (w < wmin) wmin = w;
        }
        if ((double)wmin * (double)other * (double)K >= PANEL_MIN_MNK) break;
    }
    if (by_rows) *by_rows = rows;
    return p > 1 ? p : 1;
}

void dd_nn_sgemm(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
                 const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    int rows = 0, p = 1, nth = 1;
    if (openblas_get_num_threads() == 1) { /* else OpenBLAS's own threads (OPENBLAS_NUM_THREADS > 1) */
        p = dd_nn_sgemm_panels(M, N, K, &rows);
#ifdef _OPENMP
        if (omp_get_level() < omp_get_max_active_levels()) nth = dd_nn_threads();
#endif
    }
    if (p > 1) dd_nn_sgemm_split(rows, p, nth, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else one_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
