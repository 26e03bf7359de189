/* The layers' threaded sgemm (src/nn/gemm_panels.c, dd_nn_sgemm): a large product is cut
 * into panels of whole rows or columns of C by its shape alone, one single-threaded
 * cblas_sgemm per panel, the panels on the library's threads. Checked:
 * - dd_nn_sgemm at 1, 2, 3 and 4 threads gives, bit for bit (memcmp over C with its
 *   padding), the panels computed here one by one with cblas_sgemm at the documented
 *   starts (floor(D i / p) rounded down to a multiple of 64): so the thread count never
 *   changes a bit. Over the large models' layer shapes (resnet 512 / 256 x 8 on 4 x 200
 *   frames: forward, input and weight gradients; the Hammerstein cascade's 1024 dense
 *   layers) and odd ones, K up to 4096, the four transposes, beta 0 and 1, alpha 1 and
 *   0.7, leading dimensions larger than the rows; the large ones are checked to be cut;
 * - dd_nn_sgemm_split forced by rows and by columns into 2, 3 and 5 panels on 1-3
 *   threads, against the same reference (both cuts' pointer arithmetic, every transpose);
 * - small products (a panel under 2^23 multiply-adds or 128 rows / columns) are one
 *   cblas_sgemm call, bit for bit, at any thread count (the small models' numbers);
 * - the panel count: the DD_GEMM_PANELS cap (default 2), by rows when M > N; with
 *   OpenBLAS's own threads (its count > 1) dd_nn_sgemm is one call.
 * All of it on the OpenBLAS core this CPU gets, then (OPENBLAS_CORETYPE unset, an AVX2
 * CPU) once more on OpenBLAS's Haswell kernel (the process runs itself again with
 * OPENBLAS_CORETYPE=Haswell), where a panel's bits differ from one call's.
 * Under valgrind (DD_TEST_VALGRIND, tests/valgrind.sh; about 50x slower) the same checks
 * run on products just above the cutting threshold instead of the model shapes, at 1 and
 * 2 threads, with one forced cut (3 panels on 2 threads) per product (the full set: over
 * 900 s there), and not again on the Haswell kernel (valgrind hides AVX-512, so OpenBLAS
 * already picks its Haswell kernel under it). */
#include <cblas.h>
#include <stdint.h>

#include "distdpd/nn.h"
#include "dd_test.h"
#include "nn/simd.h"

static uint64_t seed = 0x9e3779b97f4a7c15ull;
/* under valgrind (DD_TEST_VALGRIND): fewer thread counts and forced cuts per product */
static int vg;
static float rnd(void) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (float)((seed >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

typedef struct {
    size_t M, N, K;
} shape;

static void call(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda, const float *B,
                 size_t ldb, float beta, float *C, size_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* the documented cut, computed independently: p panels of rows or columns */
static void ref_panels(int by_rows, int p, int ta, int tb, shape s, float alpha, const float *A, size_t lda,
                       const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    const size_t D = by_rows ? s.M : s.N;
    for (int i = 0; i < p; i++) {
        const size_t a = D * (size_t)i / (size_t)p / 64 * 64, b = i + 1 == p ? D : D * (size_t)(i + 1) / (size_t)p / 64 * 64;
        if (by_rows)
            call(ta, tb, b - a, s.N, s.K, alpha, ta ? A + a : A + a * lda, lda, B, ldb, beta, C + a * ldc, ldc);
        else
            call(ta, tb, s.M, b - a, s.K, alpha, A, lda, tb ? B + a * ldb : B + a, ldb, beta, C + a, ldc);
    }
}

/* one product; expect_split: dd_nn_sgemm must cut it (then the forced cuts run too) */
static void check_shape(shape s, int ta, int tb, float alpha, float beta, int expect_split) {
    const size_t lda = (ta ? s.M : s.K) + 5, ldb = (tb ? s.K : s.N) + 3, ldc = s.N + 7;
    const size_t na = (ta ? s.K : s.M) * lda, nb = (tb ? s.N : s.K) * ldb, nc = s.M * ldc;
    float *A = dd_calloc(na, sizeof *A), *B = dd_calloc(nb, sizeof *B), *C0 = dd_calloc(nc, sizeof *C0),
          *ref = dd_calloc(nc, sizeof *ref), *C = dd_calloc(nc, sizeof *C);
    for (size_t i = 0; i < na; i++) A[i] = rnd();
    for (size_t i = 0; i < nb; i++) B[i] = rnd();
    for (size_t i = 0; i < nc; i++) C0[i] = rnd(); /* the padding columns too: must survive */
    char what[160];
    snprintf(what, sizeof what, "%zu x %zu x %zu, ta %d tb %d, alpha %g beta %g", s.M, s.N, s.K, ta, tb, alpha, beta);
    int rows = -1;
    const int p = dd_nn_sgemm_panels(s.M, s.N, s.K, &rows);
    if (expect_split) CHECK(p > 1 && rows == (s.M > s.N), "%s: %d panels by %s", what, p, rows ? "rows" : "columns");
    else CHECK(p == 1, "%s: one call, not %d panels", what, p);
    memcpy(ref, C0, nc * sizeof *ref);
    ref_panels(rows, p, ta, tb, s, alpha, A, lda, B, ldb, beta, ref, ldc);
    for (int nt = 1; nt <= (vg ? 2 : 4) && dd_nn_threads_set(nt) == nt; nt++) {
        memcpy(C, C0, nc * sizeof *C);
        dd_nn_sgemm(ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, beta, C, ldc);
        CHECK(memcmp(C, ref, nc * sizeof *C) == 0, "%s, %d threads (%d panels): the panels' bits", what, nt, p);
    }
    dd_nn_threads_set(1);
    for (int by_rows = 0; by_rows <= 1 && expect_split; by_rows++)
        for (int q = vg ? 3 : 2; q <= (vg ? 3 : 5); q += q == 2 ? 1 : 2) {
            memcpy(ref, C0, nc * sizeof *ref);
            ref_panels(by_rows, q, ta, tb, s, alpha, A, lda, B, ldb, beta, ref, ldc);
            for (int nth = vg ? 2 : 1; nth <= (vg ? 2 : 3); nth++) {
                memcpy(C, C0, nc * sizeof *C);
                dd_nn_sgemm_split(by_rows, q, nth, ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, beta, C, ldc);
                CHECK(memcmp(C, ref, nc * sizeof *C) == 0, "%s, %d panels by %s on %d threads: the panels' bits", what,
                      q, by_rows ? "rows" : "columns", nth);
            }
        }
    free(A);
    free(B);
    free(C0);
    free(ref);
    free(C);
}

int main(int argc, char **argv) {
    (void)argc;
    if (dd_nn_threads_set(2) != 2) {
        printf("test_nn_gemm_panels: SKIP: no OpenMP in this build (one thread only)\n");
        return 77;
    }
    dd_nn_threads_set(1);
    printf("OpenBLAS core %s, OpenBLAS %d thread(s)\n", openblas_get_corename(), openblas_get_num_threads());
    unsetenv("DD_GEMM_PANELS");
    /* the panel count: the shape and the cap only */
    int rows = -1;
    CHECK(dd_nn_sgemm_panels_max() == 2, "DD_GEMM_PANELS unset: at most 2 panels (%d)", dd_nn_sgemm_panels_max());
    CHECK(dd_nn_sgemm_panels(800, 512, 1536, &rows) == 2 && rows == 1, "resnet 512's forward: 2 panels of rows");
    CHECK(dd_nn_sgemm_panels(512, 1536, 800, &rows) == 2 && rows == 0, "its weight gradient: 2 panels of columns");
    CHECK(dd_nn_sgemm_panels(200, 200, 200, &rows) == 1, "8 M multiply-adds: one call (panels under 2^23)");
    CHECK(dd_nn_sgemm_panels(256, 256, 256, &rows) == 2, "16.8 M: 2 panels of 8.4 M");
    CHECK(dd_nn_sgemm_panels(255, 100, 100000, &rows) == 1, "under 2 x 128 rows and columns: one call");
    CHECK(dd_nn_sgemm_panels_set_max(4) == 4, "cap 4");
    CHECK(dd_nn_sgemm_panels(512, 1536, 800, &rows) == 4, "cap 4: 4 panels of 384 columns");
    CHECK(dd_nn_sgemm_panels(256, 256, 256, &rows) == 2, "cap 4, 16.8 M: still 2 (panels of 2^23)");
    CHECK(dd_nn_sgemm_panels(100, 100000, 4000, &rows) == 4, "wide: 4 panels");
    CHECK(dd_nn_sgemm_panels_set_max(0) == 1 && dd_nn_sgemm_panels(800, 512, 1536, &rows) == 1, "cap 1: one call");
    CHECK(dd_nn_sgemm_panels_set_max(1000) == 64, "cap clamped to 64");

    /* resnet 512 x 8 / 256 x 8 on 4 x 200 frames (forward, input and weight gradients),
     * the Hammerstein cascade's 1024 dense layers, odd sizes, K up to 4096; caps 2 and 3 */
    const shape big[] = {{800, 512, 1536}, {512, 1536, 800}, {800, 1536, 512}, {800, 256, 768}, {256, 768, 800},
                         {800, 1024, 1024}, {1024, 1024, 800}, {333, 517, 1000}, {130, 1000, 4096}, {1001, 131, 700},
                         {600, 512, 1536}, {257, 1023, 449}};
    /* valgrind: just above the threshold, by columns, by rows, square (each panel >= 2^23) */
    const shape vgbig[] = {{260, 300, 300}, {300, 260, 257}, {256, 256, 256}};
    vg = getenv("DD_TEST_VALGRIND") != NULL;
    const shape *cases = vg ? vgbig : big;
    const size_t ncases = vg ? sizeof vgbig / sizeof vgbig[0] : sizeof big / sizeof big[0];
    for (int cap = 2; cap <= (vg ? 2 : 3); cap++) {
        dd_nn_sgemm_panels_set_max(cap);
        for (size_t i = 0; i < ncases; i++)
            for (int t = 0; t < 4; t++)
                if (cap == 2 || (t + (int)i) % 3 == 0) /* cap 3: a third of the cases */
                    check_shape(cases[i], t & 1, t >> 1, i % 2 ? 0.7f : 1.0f, (float)((t + (int)i) % 2), 1);
    }
    dd_nn_sgemm_panels_set_max(2);
    /* too small to cut: one call's bits at any thread count */
    const shape small[] = {{64, 64, 64}, {200, 200, 200}, {129, 200, 300}, {3, 1000, 5000}, {1000, 3, 5000}};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        for (int t = 0; t < 4; t++) check_shape(small[i], t & 1, t >> 1, 1.0f, (float)(t % 2), 0);

    /* OpenBLAS's own threads: one (threaded) call, the panels not used */
    dd_nn_threads_set(2);
    openblas_set_num_threads(2); /* after dd_nn_threads_set, which puts OpenBLAS on one thread */
    if (openblas_get_num_threads() == 2) {
        const shape s = cases[0];
        float *A = dd_calloc(s.M * s.K, 4), *B = dd_calloc(s.K * s.N, 4), *C = dd_calloc(s.M * s.N, 4),
              *R = dd_calloc(s.M * s.N, 4);
        for (size_t i = 0; i < s.M * s.K; i++) A[i] = rnd();
        for (size_t i = 0; i < s.K * s.N; i++) B[i] = rnd();
        call(0, 1, s.M, s.N, s.K, 1.0f, A, s.K, B, s.K, 0.0f, R, s.N);
        dd_nn_sgemm(0, 1, s.M, s.N, s.K, 1.0f, A, s.K, B, s.K, 0.0f, C, s.N);
        CHECK(memcmp(C, R, s.M * s.N * 4) == 0, "OpenBLAS with 2 threads: dd_nn_sgemm is its one call");
        free(A);
        free(B);
        free(C);
        free(R);
    }
    openblas_set_num_threads(1);
    dd_nn_threads_set(1);
    const int rc = dd_test_done("test_nn_gemm_panels");
    /* once more on OpenBLAS's Haswell kernel (AVX2 machines), whose panels differ from one
     * call in the last bits (SkylakeX's mostly do not), when this CPU can run it */
    __builtin_cpu_init();
    if (rc == 0 && !vg && !getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma")) {
        fflush(stdout);
        setenv("OPENBLAS_CORETYPE", "Haswell", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    return rc;
}
