/* Runtime SIMD dispatch for the float32 fast paths of src/nn (private).
 *
 * The library is compiled for the baseline x86-64 ISA (SSE2) so that one binary runs
 * everywhere; the hot kernels (fused GRU recurrence, weight-gradient products, small
 * dense layers, depthwise and small full convolutions, ReLU/Hardswish) also exist in
 * AVX2+FMA and AVX-512 versions, compiled with `#pragma GCC target` in simd_kernels.c
 * and selected once per process from the CPU's features:
 *   DD_SIMD_GENERIC  0  portable C + OpenBLAS (the only path off x86-64 or without GCC)
 *   DD_SIMD_AVX2     1  AVX2 + FMA, 8 floats per vector
 *   DD_SIMD_AVX512   2  AVX-512F, 16 floats per vector
 * The environment variable DD_SIMD=generic|avx2|avx512 lowers the level (never above
 * what the CPU supports), for benchmarks and for testing every path on one machine.
 * Forward and backward of one layer must run at the same level (the GRU's workspace is
 * shared between them).
 *
 * Numerics: every fast kernel computes each output with a fixed sequence of operations,
 * so results are reproducible. The GRU recurrence and the convolutions accumulate each
 * dot product in a fixed order (bias first, then the terms in index order, one fused
 * multiply-add each), the same for every column, batch size and vector width: AVX2 and
 * AVX-512 give bit-identical outputs and a frame's GRU output does not depend on the
 * batch it is in. The gradient reductions (gemm_nt, small dense layers) use lane-parallel
 * partial sums and differ in the last bits between the two widths; the generic path
 * rounds differently again (OpenBLAS blocking, separate multiply and add). All paths agree
 * to float rounding (tests/test_nn_simd.c; details in docs/performance.md). */
#ifndef DD_NN_SIMD_H
#define DD_NN_SIMD_H

#include <stddef.h>

#define DD_SIMD_GENERIC 0
#define DD_SIMD_AVX2 1
#define DD_SIMD_AVX512 2

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define DD_NN_HAVE_X86_SIMD 1
#else
#define DD_NN_HAVE_X86_SIMD 0
#endif

/* The level in use: min(CPU support, DD_SIMD); computed once, thread-safe. */
int dd_nn_simd_level(void);
/* The highest level this CPU and build support (ignores DD_SIMD). */
int dd_nn_simd_supported(void);
/* Sets the level for this process (clamped to [0, dd_nn_simd_supported()]); returns the
 * level now in use. For tests and benchmarks; not thread-safe against running kernels. */
int dd_nn_simd_set(int level);
/* "generic", "avx2", "avx512". */
const char *dd_nn_simd_name(int level);

/* ---- routing between the hand-written kernels and OpenBLAS. Where both can run a layer
 * shape (dense layers, full causal convolutions, the GRU recurrence and its weight
 * gradients), the route decides: DD_NN_ROUTE_AUTO (the default) by the thresholds below,
 * measured side by side by bench/bench_nn.c --dispatch (docs/performance.md, "Fast
 * kernels or sgemm"); DD_NN_ROUTE_FAST / DD_NN_ROUTE_BLAS force one side wherever it
 * applies (benchmarks, tests). The environment variable DD_NN_ROUTE=auto|fast|blas sets
 * the initial route. Like the level, the route must not change between a layer's forward
 * and its backward. */
#define DD_NN_ROUTE_AUTO 0
#define DD_NN_ROUTE_FAST 1
#define DD_NN_ROUTE_BLAS 2
int dd_nn_route(void);
/* AUTO thresholds, measured side by side (bench_nn --dispatch; tables in
 * docs/performance.md) on AVX-512 and on AVX2 (DD_SIMD=avx2 with OpenBLAS's Haswell
 * kernels): the hand-written kernel up to the threshold, OpenBLAS sgemm above it.
 *   full conv1d and K = 1 dense layers: the register-blocked channels (Co forward, Ci
 *     backward) in vectors; beyond 4 vectors the kernels' 4-row blocks run out of
 *     registers (64 channels at AVX-512, 32 at AVX2), except for sums of at most 8 terms
 *     (Ci K forward, Co K backward: the stems' 6 features), which are memory-bound and
 *     stay faster in the kernels up to their 6 vectors;
 *   GRU: the fused recurrence up to H = 384 (its 3H x H recurrent weights leave L2 above);
 *   the long-and-thin gradient product C += A B^T: M N up to 3 x 192^2 (AVX-512) or
 *     3 x 24^2 (AVX2; the GRU's dW_hh at H = 192 / 24).
 * Output heads (dense with <= 4 outputs) always take their kernel (faster at every width
 * measured, 8 .. 1024). Depthwise convolutions have no sgemm form. */
#define DD_NN_CONV_FAST_MAX_VEC 4
#define DD_NN_CONV_FAST_SHORT 8
#define DD_NN_GRU_FUSED_MAX_H 384
#define DD_NN_GEMM_NT_FAST_MAX_AVX512 ((size_t)3 * 192 * 192)
#define DD_NN_GEMM_NT_FAST_MAX_AVX2 ((size_t)3 * 24 * 24)
/* Whether the route gives a full convolution whose register-blocked side has nvec vectors
 * and whose sums have nsum terms to the conv kernel; the GRU layer of H units to the fused
 * recurrence (forward and backward decide alike); gemm_nt of M x N to its kernel. Each
 * applies the FAST / BLAS routes too and is 0 at the generic level. */
int dd_nn_conv_full_fast(int level, size_t nvec, size_t nsum);
int dd_nn_gemm_nt_fast(int level, size_t M, size_t N);
int dd_nn_gru_fused(int level, size_t H);
/* Sets the route for this process (out-of-range values: AUTO); returns it. Not
 * thread-safe against running kernels. */
int dd_nn_route_set(int route);
/* "auto", "fast", "blas". */
const char *dd_nn_route_name(int route);

/* Columns [*cb, *ce) of B for thread tid of nth: whole vectors of vw columns, the tail
 * vector with the last thread that has any (threads past the vectors get empty ranges). */
void dd_nn_thread_cols(size_t B, size_t vw, int tid, int nth, size_t *cb, size_t *ce);
/* DD_TEAM(n, cond, fn, args...): fn(args..., tid, nt) on each thread of a new team of n
 * threads when n > 1 and cond, else fn(args..., 0, 1) directly on the calling thread; fn
 * takes its share from tid and nt alone (no omp_get_thread_num, no orphaned `omp for` or
 * barrier without nt > 1: in a batch chunk's thread the enclosing team is not its own).
 * Not a region's `if` clause: with one, libgomp still starts and ends a team of one (on
 * the Zen 5 KVM guest 1.1-1.5 us and a futex system call per region). Per training step
 * on one thread there: gru 23 1.07-1.12x at AVX-512, 1.04-1.05x at AVX2; tcn in chunks of
 * 16 frames 1.08-1.18x at AVX-512 (docs/performance.md, "Parallel regions of one thread;
 * tcn in chunks of 4 frames"). */
#ifdef _OPENMP
#include <omp.h>
#define DD_TEAM(n, cond, fn, ...)                                             \
    do {                                                                      \
        const int dd_team_n_ = (n);                                           \
        if (dd_team_n_ > 1 && (cond)) {                                       \
            _Pragma("omp parallel num_threads(dd_team_n_)")                   \
                fn(__VA_ARGS__, omp_get_thread_num(), omp_get_num_threads()); \
        } else {                                                              \
            fn(__VA_ARGS__, 0, 1);                                            \
        }                                                                     \
    } while (0)
#else
#define DD_TEAM(n, cond, fn, ...)  \
    do {                           \
        (void)(n), (void)(cond);   \
        fn(__VA_ARGS__, 0, 1);     \
    } while (0)
#endif
/* [*lo, *hi): the contiguous share of n items of thread tid of nt (DD_TEAM's functions). */
static inline void dd_team_share(size_t n, int tid, int nt, size_t *lo, size_t *hi) {
    *lo = n * (size_t)tid / (size_t)nt;
    *hi = n * (size_t)(tid + 1) / (size_t)nt;
}
int dd_nn_threads(void); /* distdpd/nn.h */
/* n > 0: dd_nn_threads() returns n on the calling thread (a batch chunk's thread:
 * src/train/batch_chunks.c); 0: the global count again. */
void dd_nn_threads_local(int n);
/* OpenBLAS's thread count to 1 for a parallel region whose threads call sgemm each (batch
 * chunks): returns the count before, for dd_nn_blas_threads_restore. Outside parallel regions. */
int dd_nn_blas_threads_one(void);
void dd_nn_blas_threads_restore(int was);

/* ---- the layers' float sgemm (gemm_panels.c; dd_nn_gemm of nn_real.h): row-major
 * C (M x N) = alpha op(A) op(B) + beta C, ta/tb 0 plain, 1 transposed, dimensions > 0.
 * While OpenBLAS runs on one thread, a large product runs as dd_nn_sgemm_panels(M, N, K)
 * panels of C (whole rows or columns), one single-threaded cblas_sgemm each, on up to
 * dd_nn_threads() OpenMP threads; the cut depends on the shape only, so the thread count
 * never changes a bit. OpenBLAS with threads of its own (OPENBLAS_NUM_THREADS > 1): one call. */
void dd_nn_sgemm(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
                 const float *B, size_t ldb, float beta, float *C, size_t ldc);
/* the panels of a product (1: one call): up to dd_nn_sgemm_panels_max() (DD_GEMM_PANELS,
 * default 2), each at least 128 rows or columns and 2^23 multiply-adds; by rows of C when
 * M > N, else by columns. Independent of the thread count. */
int dd_nn_sgemm_panels(size_t M, size_t N, size_t K, int *by_rows);
int dd_nn_sgemm_panels_set_max(int n); /* clamps to [1, 64]; returns the cap in use */
/* C in p panels of rows (by_rows) or columns, starts floor(D i / p) rounded down to a
 * multiple of 64, on min(nth, p) threads; no size check (the tests') */
void dd_nn_sgemm_split(int by_rows, int p, int nth, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                       const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);

/* ---- layout changes between (B, T, C) tensors and feature-major rows over time-major
 * columns (row c, column t*B + b; rows ld apart), in tiles of 16 frames x 16 steps so that
 * whole cache lines are read and written (simd.c; plain C).
 * dst[c*ld + t*B + b] = src[(b*T + t)*C + c] for b < B, t < T, c < C: */
void dd_nn_bth_to_fm(float *dst, size_t ld, const float *src, size_t B, size_t T, size_t C);
/* dst[(b*Ts + t)*C + c] = src[c*ld + t*B + b] for b < B, t < nt, c < C (dst frames have Ts
 * steps; t counts from dst's first step): */
void dd_nn_fm_to_bth(float *dst, const float *src, size_t ld, size_t B, size_t nt, size_t Ts,
                     size_t C);

/* ---- fused GRU recurrence (gru_fast.c), float32, level >= DD_SIMD_AVX2 only.
 * Layout as gru_impl.h: feature-major rows over time-major columns c = t*B + b, TB = T*B.
 * Forward: hprev (H x TB) holds h0 in columns [0, B); for every step t the function
 * computes the gates [r, z, n, hn] of columns [tB, tB+B) into gates + 4HBt, step-major
 * (4H x B per step, unlike gru_impl.h's 4H x TB rows: only dd_nn_gru_bwd_fast reads them,
 * so a backward runs at the level and route of its forward), h_t into
 * hprev columns [(t+1)B, ...) (t < T-1) and into out (B, T, H). It first writes xfm (D x TB),
 * the input x (B, T, D) feature-major, and h0 (B, H; NULL: zeros) into hprev columns
 * [0, B), each thread for its own frames. S (>= H x B floats) is scratch. */
void dd_nn_gru_fwd_fast(int level, float *out, float *hprev, float *gates, float *S, float *xfm,
                        const float *x, const float *h0, const float *w_ih, const float *w_hh,
                        const float *b_ih, const float *b_hh, size_t B, size_t T, size_t D,
                        size_t H);
typedef struct { /* one product of dd_nn_gemm_nt_acc_n */
    size_t M, N, K;
    const float *A;
    size_t lda;
    const float *Bm;
    size_t ldb;
    float *C;
    size_t ldc;
    float *rowsum;
} dd_nn_nt_prod;
/* The fused GRU's row stride (floats) for rows of TB columns (xfm, hprev, dG): TB rounded
 * up to whole cache lines, an odd count of them, so that rows one stride apart fall into
 * different cache sets (with TB = 6400, 25.6 KB rows, every 4th row shared L1 sets and every
 * 5th L2 sets, and a step's 4H dG rows missed). */
static inline size_t dd_nn_gru_ld(size_t TB) {
    size_t ld = (TB + 15) / 16 * 16;
    if (!(ld / 16 & 1)) ld += 16;
    return ld;
}
/* The kernels' products sum K in chunks of DD_NN_NT_KC columns: register accumulators per
 * chunk, lane-reduced and added to C chunk by chunk in column order. */
#define DD_NN_NT_KC 1024
/* Floats of one chunk's partial results of n products (M (N + 1) each: C, then rowsum). */
static inline size_t dd_nn_nt_part_size(const dd_nn_nt_prod *p, int n) {
    size_t s = 0;
    for (int i = 0; i < n; i++) s += p[i].M * (p[i].N + 1);
    return s;
}
/* Backward through time: dG (4H x TB) receives rows [da_r, da_z, da_n * r, da_n] of every
 * column; dh (H x B) must be zero on entry and holds dL/dh0 on return when want_dh0 (else
 * garbage). dout is dL/dh_t: (B, T, H) when ldo == 0, else feature-major (row j, column
 * tB + b, rows ldo apart; read in place, no copy). With np > 0 it also runs the np weight-gradient
 * products p (A and Bm over the TB columns, A in dG) chunk by chunk inside the time loop, as
 * soon as a chunk's columns of dG are final (still in cache): chunk c's results (C and
 * rowsum, lane-reduced as the kernel does) go to part + c dd_nn_nt_part_size(p, np), which
 * must hold ceil(TB / DD_NN_NT_KC) chunks filled with -0.0f (the exact additive identity);
 * dd_nn_nt_parts_add then adds them to p's C and rowsum in chunk order: the same floats as
 * dd_nn_gemm_nt_acc_n(level, p, np) after the backward. Every p must be on the kernel
 * (dd_nn_gemm_nt_fast). */
void dd_nn_gru_bwd_fast(int level, float *dG, float *dh, const float *dout, size_t ldo,
                        const float *gates, const float *hprev, const float *w_hh, size_t B,
                        size_t T, size_t H, int want_dh0, const dd_nn_nt_prod *p, int np,
                        float *part);
void dd_nn_nt_parts_add(const dd_nn_nt_prod *p, int np, const float *part);
/* Whether dd_gru_backward runs its weight gradients inside the fused time loop (default 1;
 * 0: after it, as one product; the same floats: tests); returns the previous setting. Not
 * thread-safe against running kernels. */
int dd_nn_gru_wgrad_steps_set(int on);
int dd_nn_gru_wgrad_steps(void);

/* ---- C (M x N, ldc) += A (M x K, lda) B (N x K, ldb)^T and, when rowsum != NULL,
 * rowsum[i] += sum_k A[i, k] (gemm_fast.c). Any level (generic, and M N above the AUTO
 * threshold: OpenBLAS). N may be 0. */
/* n independent products of dd_nn_gemm_nt_acc (their C and rowsum do not overlap), the
 * same numbers as n calls; on the kernels they share one parallel region. */
void dd_nn_gemm_nt_acc_n(int level, const dd_nn_nt_prod *p, int n);
void dd_nn_gemm_nt_acc(int level, size_t M, size_t N, size_t K, const float *A, size_t lda,
                       const float *Bm, size_t ldb, float *C, size_t ldc, float *rowsum);

/* ---- dense layers with few outputs (O <= DD_NN_DENSE_SMALL_MAX), e.g. the models' output
 * heads H -> 2, where GEMM libraries are slow: same contract as dd_dense_forward /
 * dd_dense_backward (backward adds; any of din, dw, db may be NULL). They return 0, doing
 * nothing, when the level is generic or O is out of range; then use OpenBLAS. Each output
 * is a fixed-order sum (vector partial sums over the inputs, a fixed lane reduction). */
#define DD_NN_DENSE_SMALL_MAX 4
int dd_nn_dense_small_fwd(int level, float *out, const float *in, const float *w, const float *b,
                          size_t N, size_t NI, size_t O);
int dd_nn_dense_small_bwd(int level, float *din, float *dw, float *db, const float *dout,
                          const float *in, const float *w, size_t N, size_t NI, size_t O);
/* dd_nn_dense_small_bwd's din alone, written feature-major for an input of B frames x T
 * steps: din[i*ld + t*B + b] (set: starting from +0, else adding) with the same float
 * operations as the (B, T, NI) din; the same conditions and return. */
int dd_nn_dense_small_din_fm(int level, float *din, size_t ld, int set, const float *dout,
                             const float *w, size_t B, size_t T, size_t NI, size_t O);

/* ---- causal conv1d (conv_fast_impl.h), level > generic only. Floats per vector: */
int dd_nn_simd_width(int level);
/* Depthwise, wt = weights transposed to (K, C). dwt (K x C, zeroed by the caller) receives
 * dW in the same layout; din and dwt may be NULL. */
void dd_nn_conv_dw_fwd(int level, float *out, const float *in, const float *wt, const float *b,
                       size_t B, size_t T, size_t C, size_t K, size_t d);
void dd_nn_conv_dw_bwd(int level, float *din, float *dwt, const float *dout, const float *in,
                       const float *wt, size_t B, size_t T, size_t C, size_t K, size_t d);
/* groups == 1, Co (forward) / Ci (backward) <= 6 vectors. With L(n) = n rounded up to dd_nn_simd_width(level):
 * wf = K x Ci rows of L(Co) floats, row (k, ci) = w[:, ci, k] zero-padded; bp = L(Co)
 * floats (bias or zeros). wb = K x Co rows of L(Ci) floats, row (k, co) = w[co, :, k];
 * dwb (same layout, zeroed by the caller) receives dW; din, dwb, db may be NULL. */
void dd_nn_conv_full_fwd(int level, float *out, const float *in, const float *wf, const float *bp,
                         size_t B, size_t T, size_t Ci, size_t Co, size_t K, size_t d);
void dd_nn_conv_full_bwd(int level, float *din, float *dwb, float *db, const float *dout,
                         const float *in, const float *wb, size_t B, size_t T, size_t Ci,
                         size_t Co, size_t K, size_t d);
/* Causal conv1d (contract of dd_conv1d_forward / _backward, float32, G groups) through the
 * kernels above when the level is not generic and the layer fits: depthwise (any C K), or
 * groups == 1 with L(Co) (forward) / L(Ci) (backward) <= 6 vectors that the route gives to
 * the kernels (dd_nn_conv_full_fast). K == 1, B == 1, T == N makes it a dense layer.
 * Return 1 if done, 0 (nothing done) otherwise. Weights are re-laid on the stack up to
 * DD_NN_CONV_DW_MAX (depthwise) / DD_NN_CONV_FULL_MAX floats, on the heap above (0 when
 * that allocation fails). */
#define DD_NN_CONV_DW_MAX 1024
#define DD_NN_CONV_FULL_MAX 4096
/* tcn's stem (a 1x1 convolution, then Hardswish), fused where the convolution would run in
 * the kernels above anyway (so the floats are those of dd_conv1d_forward then
 * dd_act_forward, and of dd_act_backward into zeros then dd_conv1d_backward): forward
 * pre = the convolution, out = Hardswish(pre) (any K, groups 1); backward (K = 1, groups
 * 1, no din, Ci <= DD_NN_CONV1X1_HS_CIMAX) dw (not NULL) and db (may be NULL) added into,
 * da never stored; pre NULL: no Hardswish (dout is the convolution's gradient: the floats of
 * dd_conv1d_backward, which takes it for 1x1 convolutions without din). Return 1 if done,
 * 0 (nothing done) otherwise. */
#define DD_NN_CONV1X1_HS_CIMAX 8
int dd_nn_conv_hs_fast_forward(float *pre, float *out, const float *in, const float *w, const float *b, size_t B,
                               size_t T, size_t Ci, size_t Co, size_t K, size_t d, size_t G);
int dd_nn_conv1x1_hs_fast_backward(float *dw, float *db, const float *dout, const float *pre, const float *in,
                                   size_t N, size_t Ci, size_t Co);
int dd_nn_conv_fast_forward(float *out, const float *in, const float *w, const float *b, size_t B,
                            size_t T, size_t Ci, size_t Co, size_t K, size_t d, size_t G);
int dd_nn_conv_fast_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                             const float *w, size_t B, size_t T, size_t Ci, size_t Co, size_t K,
                             size_t d, size_t G);

/* Depthwise layer without bias fused with Hardswish (dd_conv1d_dw_hswish_forward /
 * _backward, contract in distdpd/nn.h; the same floats as the unfused sequence). Forward
 * writes pre = the convolution (unless NULL) and out = Hardswish(pre) (+ in when resid) in
 * one pass over the rows; backward computes da = dout Hardswish'(pre) (pre NULL: the
 * convolution again, its operations in forward's order) into buf (T x C floats: one
 * frame's da) before the convolution's backward of the frame reads it, channel vector by
 * channel vector (threads split the channel vectors). Return 0, doing nothing, at the
 * generic level, for K > DD_NN_CONV_DW_KMAX (backward) or when the weights' heap copy
 * fails. */
#define DD_NN_CONV_DW_KMAX 64
int dd_nn_conv_dw_hs_forward(float *pre, float *out, const float *in, const float *w, size_t B, size_t T,
                             size_t C, size_t K, size_t d, int resid);
/* flags: DD_DW_HS_RESID, DD_DW_HS_SET_DIN (distdpd/nn.h, dd_conv1d_dw_hswish_backward). */
int dd_nn_conv_dw_hs_backward(float *din, float *dw, float *buf, const float *dout, const float *pre,
                              const float *in, const float *w, size_t B, size_t T, size_t C, size_t K, size_t d,
                              int flags);
/* The backward of a depthwise layer without bias whose input is z = Hardswish(ain)
 * (dd_conv1d_dw_hsin_backward, contract in distdpd/nn.h): dw += the convolution's weight
 * gradient, din = (set ? 0 : din) + Hardswish'(ain) (the convolution's dL/dz): a dW pass
 * then a din pass per frame and block of channel vectors (threads split the blocks). Return 0, doing
 * nothing, where dd_nn_conv_dw_hs_backward would. */
#define DD_NN_DW_HSIN 4 /* dd_nn_conv_dw_hs_bwd_fast's flag for the kernel of the backward below */
int dd_nn_conv_dw_hsin_backward(float *din, float *dw, const float *dout, const float *ain, const float *z,
                                const float *w, size_t B, size_t T, size_t C, size_t K, size_t d, int set);

/* ---- causal conv1d with groups == 1, K > 1 through OpenBLAS (conv_gemm.c): im2col blocks
 * of rows times the weights as stored (Co x Ci K). Same contract as dd_conv1d_forward /
 * _backward (float32, groups 1); ws: dd_nn_conv_gemm_ws_floats(B, T, Ci, K, 1) floats of
 * workspace (any contents), or NULL: the blocks are allocated per call; return 0, doing
 * nothing, when they cannot be. The forward uses only the first
 * dd_nn_conv_gemm_ws_floats(B, T, Ci, K, 0) of them (X; the backward's dX follows). Any
 * level. */
size_t dd_nn_conv_gemm_ws_floats(size_t B, size_t T, size_t Ci, size_t K, int backward);
int dd_nn_conv_gemm_forward(float *out, const float *in, const float *w, const float *b, size_t B,
                            size_t T, size_t Ci, size_t Co, size_t K, size_t d, float *ws);
int dd_nn_conv_gemm_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                             const float *w, size_t B, size_t T, size_t Ci, size_t Co, size_t K,
                             size_t d, float *ws);

/* Float32 Hardswish divides by 6 and 3 as multiplications by these rounded reciprocals,
 * in the generic loops (act_impl.h) and the SIMD kernels alike; the float64 layers keep
 * the divisions (conv_fast_impl.h, hswish_v, says why and how close). */
#define DD_HS_SIXTH (1.0f / 6.0f)
#define DD_HS_THIRD (1.0f / 3.0f)
/* Float32 Hardswish's middle piece x (x + 3) / 6 and slope x / 3 + 1/2 for the scalar loops
 * (the generic level and the SIMD kernels' tails: one expression, the same floats). */
static inline float dd_hs_mid_f(float x) { return x * (x + 3) * DD_HS_SIXTH; }
static inline float dd_hs_slope_f(float x) { return x * DD_HS_THIRD + 0.5f; }

/* ReLU (a = 3) and Hardswish (a = 4) forward / backward (dd_act contract; bit-identical to
 * the generic loops). Return 0, doing nothing, for other activations or the generic level. */
int dd_nn_act_fwd(int level, int a, float *out, const float *in, size_t n);
int dd_nn_act_bwd(int level, int a, float *din, const float *dout, const float *in, size_t n);
/* The fused GRU cell's vector sigmoid (f = 1) or tanh (f = 2) (simd_vec.h) over n floats,
 * for tests; returns 0, doing nothing, at the generic level. */
int dd_nn_gru_cellfn(int level, int f, float *out, const float *in, size_t n);

#endif
