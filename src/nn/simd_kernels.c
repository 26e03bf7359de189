/* The float32 SIMD kernels of src/nn for x86-64 (see simd.h): each template
 * (gru_fast_impl.h: fused GRU recurrence; gemm_fast_impl.h: long-and-thin products for
 * weight gradients; dense_fast_impl.h: dense layers with few outputs; conv_fast_impl.h:
 * depthwise and small full causal convolutions, ReLU and Hardswish) is compiled once
 * for AVX-512 and once for AVX2+FMA inside a `#pragma GCC target` region, and the
 * dispatchers below pick one by the level of dd_nn_simd_level(). Without GCC on x86-64
 * only the dispatchers remain (the level is then always generic and they fall back to
 * OpenBLAS / plain C, or are never called). */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "distdpd/core.h"
#include "distdpd/nn.h" /* DD_DW_HS_RESID, DD_DW_HS_SET_DIN */
#include "simd.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"

/* Prototypes of one instruction set's kernels (suffix _avx512 / _avx2). */
#define DD_FAST_DECLS(S)                                                                      \
    void dd_nn_gru_fwd_fast##S(float *out, float *hprev, float *gates, float *Sc,             \
                               float *xfm, const float *x, const float *h0,                   \
                               const float *w_ih, const float *w_hh,                          \
                               const float *b_ih, const float *b_hh, size_t B, size_t T,      \
                               size_t D, size_t H);                                           \
    void dd_nn_gru_bwd_fast##S(float *dG, float *dh, const float *dout, size_t ldo,           \
                               const float *gates, const float *hprev, const float *w_hh,     \
                               size_t B, size_t T, size_t H, int want_dh0,                    \
                               const dd_nn_nt_prod *p, int np, float *part);                  \
    void dd_nn_gemm_nt_fast_n##S(const dd_nn_nt_prod *p, int n);                              \
    void dd_nn_gemm_nt_fast##S(size_t M, size_t N, size_t K, const float *A, size_t lda,      \
                               const float *Bm, size_t ldb, float *C, size_t ldc,             \
                               float *rowsum);                                                \
    void dd_nn_dense_small_fwd##S(float *out, const float *in, const float *w, const float *b, \
                                  size_t N, size_t NI, size_t O);                              \
    void dd_nn_dense_small_bwd##S(float *din, float *dw, float *db, const float *dout,        \
                                  const float *in, const float *w, size_t N, size_t NI,        \
                                  size_t O);                                                   \
    void dd_nn_dense_small_din_fm##S(float *din, size_t ld, int set, const float *dout,      \
                                     const float *w, size_t B, size_t T, size_t NI, size_t O); \
    void dd_nn_conv_dw_fwd_fast##S(float *pre, float *out, const float *in, const float *wt,  \
                                   const float *b, size_t B, size_t T, size_t C, size_t K,    \
                                   size_t d, int act);                                        \
    void dd_nn_conv_dw_hs_bwd_fast##S(float *din, float *dwt, float *buf, const float *dout, \
                                      const float *pre, const float *in, const float *wt,     \
                                      size_t B, size_t T, size_t C, size_t K, size_t d,       \
                                      int flags);                                             \
    void dd_nn_conv_dw_bwd_fast##S(float *din, float *dwt, const float *dout, const float *in, \
                                   const float *wt, size_t B, size_t T, size_t C, size_t K,   \
                                   size_t d);                                                 \
    void dd_nn_conv_full_fwd_fast##S(float *out, const float *in, const float *wf,            \
                                     const float *bp, size_t B, size_t T, size_t Ci,          \
                                     size_t Co, size_t K, size_t d);                          \
    void dd_nn_conv_full_bwd_fast##S(float *din, float *dwb, float *db, const float *dout,    \
                                     const float *in, const float *wb, size_t B, size_t T,    \
                                     size_t Ci, size_t Co, size_t K, size_t d);               \
    void dd_nn_act_fwd_fast##S(int a, float *out, const float *in, size_t n);                 \
    void dd_nn_gru_cellfn_fast##S(int f, float *out, const float *in, size_t n);              \
    void dd_nn_act_bwd_fast##S(int a, float *din, const float *dout, const float *in, size_t n);

/* tcn's stem kernels (conv_fast_impl.h), declared apart to keep the list above as it is */
#define DD_FAST_DECLS_TCN(S)                                                                  \
    void dd_nn_conv_full_hs_fwd_fast##S(float *pre, float *out, const float *in,             \
                                        const float *wf, const float *bp, size_t B, size_t T, \
                                        size_t Ci, size_t Co, size_t K, size_t d);            \
    void dd_nn_conv1x1_hs_bwd_fast##S(float *dw, float *db, const float *dout,               \
                                      const float *pre, const float *in, size_t N, size_t Ci, \
                                      size_t Co);

#if DD_NN_HAVE_X86_SIMD
#include <immintrin.h>
DD_FAST_DECLS(_avx512)
DD_FAST_DECLS(_avx2)
DD_FAST_DECLS_TCN(_avx512)
DD_FAST_DECLS_TCN(_avx2)

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#define DD_VEC_AVX512
#include "simd_vec.h"
#include "gru_fast_impl.h"
#include "gemm_fast_impl.h"
#include "dense_fast_impl.h"
#include "conv_fast_impl.h"
#undef DD_VEC_AVX512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define DD_VEC_AVX2
#include "simd_vec.h"
#include "gru_fast_impl.h"
#include "gemm_fast_impl.h"
#include "dense_fast_impl.h"
#include "conv_fast_impl.h"
#undef DD_VEC_AVX2
#pragma GCC pop_options

/* Calls name_avx512(args) or name_avx2(args) by level. */
#define DD_DISPATCH(level, name, args)      \
    do {                                    \
        if ((level) >= DD_SIMD_AVX512)      \
            name##_avx512 args;             \
        else                                \
            name##_avx2 args;               \
    } while (0)
#endif

void dd_nn_gru_fwd_fast(int level, float *out, float *hprev, float *gates, float *S, float *xfm,
                        const float *x, const float *h0, const float *w_ih, const float *w_hh,
                        const float *b_ih, const float *b_hh, size_t B, size_t T, size_t D,
                        size_t H) {
#if DD_NN_HAVE_X86_SIMD
    DD_DISPATCH(level, dd_nn_gru_fwd_fast,
                (out, hprev, gates, S, xfm, x, h0, w_ih, w_hh, b_ih, b_hh, B, T, D, H));
#else
    (void)level, (void)out, (void)hprev, (void)gates, (void)S, (void)xfm, (void)w_ih;
    (void)x, (void)h0;
    (void)w_hh, (void)b_ih, (void)b_hh, (void)B, (void)T, (void)D, (void)H;
#endif
}

void dd_nn_gru_bwd_fast(int level, float *dG, float *dh, const float *dout, size_t ldo,
                        const float *gates, const float *hprev, const float *w_hh, size_t B,
                        size_t T, size_t H, int want_dh0, const dd_nn_nt_prod *p, int np,
                        float *part) {
#if DD_NN_HAVE_X86_SIMD
    DD_DISPATCH(level, dd_nn_gru_bwd_fast,
                (dG, dh, dout, ldo, gates, hprev, w_hh, B, T, H, want_dh0, p, np, part));
#else
    (void)level, (void)dG, (void)dh, (void)dout, (void)ldo, (void)gates, (void)hprev, (void)w_hh;
    (void)B, (void)T, (void)H, (void)want_dh0, (void)p, (void)np, (void)part;
#endif
}

void dd_nn_nt_parts_add(const dd_nn_nt_prod *p, int np, const float *part) {
    const size_t per = dd_nn_nt_part_size(p, np);
    size_t off = 0;
    for (int i = 0; i < np; i++) {
        const size_t M = p[i].M, N = p[i].N, nch = (p[i].K + DD_NN_NT_KC - 1) / DD_NN_NT_KC;
        for (size_t c = 0; c < nch; c++) { /* chunk order, as the kernel's single product */
            const float *q = part + c * per + off;
            if (p[i].C && N > 0)
                for (size_t r = 0; r < M; r++)
                    for (size_t j = 0; j < N; j++) p[i].C[r * p[i].ldc + j] += q[r * N + j];
            if (p[i].rowsum)
                for (size_t r = 0; r < M; r++) p[i].rowsum[r] += q[M * N + r];
        }
        off += M * (N + 1);
    }
}

static _Atomic int gru_wgrad_steps = 1;

int dd_nn_gru_wgrad_steps_set(int on) {
    return atomic_exchange_explicit(&gru_wgrad_steps, on != 0, memory_order_relaxed);
}

int dd_nn_gru_wgrad_steps(void) {
    return atomic_load_explicit(&gru_wgrad_steps, memory_order_relaxed);
}

int dd_nn_gru_fused(int level, size_t H) {
    if (level <= DD_SIMD_GENERIC) return 0;
    const int route = dd_nn_route();
    return route == DD_NN_ROUTE_FAST || (route == DD_NN_ROUTE_AUTO && H <= DD_NN_GRU_FUSED_MAX_H);
}

int dd_nn_conv_full_fast(int level, size_t nvec, size_t nsum) {
    if (level <= DD_SIMD_GENERIC) return 0;
    const int route = dd_nn_route();
    return route == DD_NN_ROUTE_FAST ||
           (route == DD_NN_ROUTE_AUTO && (nvec <= DD_NN_CONV_FAST_MAX_VEC || nsum <= DD_NN_CONV_FAST_SHORT));
}

int dd_nn_gemm_nt_fast(int level, size_t M, size_t N) {
    if (level <= DD_SIMD_GENERIC) return 0;
    const int route = dd_nn_route();
    const size_t max = level >= DD_SIMD_AVX512 ? DD_NN_GEMM_NT_FAST_MAX_AVX512 : DD_NN_GEMM_NT_FAST_MAX_AVX2;
    return route == DD_NN_ROUTE_FAST || (route == DD_NN_ROUTE_AUTO && M * N <= max);
}

void dd_nn_gemm_nt_acc(int level, size_t M, size_t N, size_t K, const float *A, size_t lda,
                       const float *Bm, size_t ldb, float *C, size_t ldc, float *rowsum) {
#if DD_NN_HAVE_X86_SIMD
    if (dd_nn_gemm_nt_fast(level, M, N)) {
        DD_DISPATCH(level, dd_nn_gemm_nt_fast, (M, N, K, A, lda, Bm, ldb, C, ldc, rowsum));
        return;
    }
#else
    (void)level;
#endif
    if (N > 0) dd_nn_gemm(0, 1, M, N, K, 1, A, lda, Bm, ldb, 1, C, ldc);
    if (rowsum) dd_nn_rowsum_add(rowsum, A, M, K, lda);
}

void dd_nn_gemm_nt_acc_n(int level, const dd_nn_nt_prod *p, int n) {
#if DD_NN_HAVE_X86_SIMD
    int fast = 1;
    for (int i = 0; i < n; i++) fast &= dd_nn_gemm_nt_fast(level, p[i].M, p[i].N);
    if (fast) {
        DD_DISPATCH(level, dd_nn_gemm_nt_fast_n, (p, n));
        return;
    }
#endif
    for (int i = 0; i < n; i++)
        dd_nn_gemm_nt_acc(level, p[i].M, p[i].N, p[i].K, p[i].A, p[i].lda, p[i].Bm, p[i].ldb, p[i].C,
                          p[i].ldc, p[i].rowsum);
}

int dd_nn_dense_small_fwd(int level, float *out, const float *in, const float *w, const float *b,
                          size_t N, size_t NI, size_t O) {
#if DD_NN_HAVE_X86_SIMD
    if (level > DD_SIMD_GENERIC && O >= 1 && O <= DD_NN_DENSE_SMALL_MAX && dd_nn_route() != DD_NN_ROUTE_BLAS) {
        DD_DISPATCH(level, dd_nn_dense_small_fwd, (out, in, w, b, N, NI, O));
        return 1;
    }
#endif
    (void)level, (void)out, (void)in, (void)w, (void)b, (void)N, (void)NI, (void)O;
    return 0;
}

int dd_nn_dense_small_bwd(int level, float *din, float *dw, float *db, const float *dout,
                          const float *in, const float *w, size_t N, size_t NI, size_t O) {
#if DD_NN_HAVE_X86_SIMD
    if (level > DD_SIMD_GENERIC && O >= 1 && O <= DD_NN_DENSE_SMALL_MAX && dd_nn_route() != DD_NN_ROUTE_BLAS) {
        DD_DISPATCH(level, dd_nn_dense_small_bwd, (din, dw, db, dout, in, w, N, NI, O));
        return 1;
    }
#endif
    (void)level, (void)din, (void)dw, (void)db, (void)dout, (void)in, (void)w, (void)N;
    (void)NI, (void)O;
    return 0;
}

int dd_nn_dense_small_din_fm(int level, float *din, size_t ld, int set, const float *dout,
                             const float *w, size_t B, size_t T, size_t NI, size_t O) {
#if DD_NN_HAVE_X86_SIMD
    if (level > DD_SIMD_GENERIC && O >= 1 && O <= DD_NN_DENSE_SMALL_MAX && dd_nn_route() != DD_NN_ROUTE_BLAS) {
        DD_DISPATCH(level, dd_nn_dense_small_din_fm, (din, ld, set, dout, w, B, T, NI, O));
        return 1;
    }
#endif
    (void)level, (void)din, (void)ld, (void)set, (void)dout, (void)w, (void)B, (void)T;
    (void)NI, (void)O;
    return 0;
}

int dd_nn_simd_width(int level) {
    return level >= DD_SIMD_AVX512 ? 16 : level >= DD_SIMD_AVX2 ? 8 : 1;
}

void dd_nn_conv_dw_fwd(int level, float *out, const float *in, const float *wt, const float *b,
                       size_t B, size_t T, size_t C, size_t K, size_t d) {
#if DD_NN_HAVE_X86_SIMD
    DD_DISPATCH(level, dd_nn_conv_dw_fwd_fast, (NULL, out, in, wt, b, B, T, C, K, d, 0));
#else
    (void)level, (void)out, (void)in, (void)wt, (void)b, (void)B, (void)T, (void)C, (void)K, (void)d;
#endif
}

void dd_nn_conv_dw_bwd(int level, float *din, float *dwt, const float *dout, const float *in,
                       const float *wt, size_t B, size_t T, size_t C, size_t K, size_t d) {
#if DD_NN_HAVE_X86_SIMD
    DD_DISPATCH(level, dd_nn_conv_dw_bwd_fast, (din, dwt, dout, in, wt, B, T, C, K, d));
#else
    (void)level, (void)din, (void)dwt, (void)dout, (void)in, (void)wt, (void)B, (void)T;
    (void)C, (void)K, (void)d;
#endif
}

void dd_nn_conv_full_fwd(int level, float *out, const float *in, const float *wf, const float *bp,
                         size_t B, size_t T, size_t Ci, size_t Co, size_t K, size_t d) {
#if DD_NN_HAVE_X86_SIMD
    DD_DISPATCH(level, dd_nn_conv_full_fwd_fast, (out, in, wf, bp, B, T, Ci, Co, K, d));
#else
    (void)level, (void)out, (void)in, (void)wf, (void)bp, (void)B, (void)T, (void)Ci, (void)Co;
    (void)K, (void)d;
#endif
}

void dd_nn_conv_full_bwd(int level, float *din, float *dwb, float *db, const float *dout,
                         const float *in, const float *wb, size_t B, size_t T, size_t Ci,
                         size_t Co, size_t K, size_t d) {
#if DD_NN_HAVE_X86_SIMD
    DD_DISPATCH(level, dd_nn_conv_full_bwd_fast, (din, dwb, db, dout, in, wb, B, T, Ci, Co, K, d));
#else
    (void)level, (void)din, (void)dwb, (void)db, (void)dout, (void)in, (void)wb, (void)B;
    (void)T, (void)Ci, (void)Co, (void)K, (void)d;
#endif
}

int dd_nn_act_fwd(int level, int a, float *out, const float *in, size_t n) {
#if DD_NN_HAVE_X86_SIMD
    if (level > DD_SIMD_GENERIC && (a == 3 || a == 4)) {
        DD_DISPATCH(level, dd_nn_act_fwd_fast, (a, out, in, n));
        return 1;
    }
#endif
    (void)level, (void)a, (void)out, (void)in, (void)n;
    return 0;
}

int dd_nn_gru_cellfn(int level, int f, float *out, const float *in, size_t n) {
#if DD_NN_HAVE_X86_SIMD
    if (level > DD_SIMD_GENERIC && (f == 1 || f == 2)) {
        DD_DISPATCH(level, dd_nn_gru_cellfn_fast, (f, out, in, n));
        return 1;
    }
#endif
    (void)level, (void)f, (void)out, (void)in, (void)n;
    return 0;
}

int dd_nn_act_bwd(int level, int a, float *din, const float *dout, const float *in, size_t n) {
#if DD_NN_HAVE_X86_SIMD
    if (level > DD_SIMD_GENERIC && (a == 3 || a == 4)) {
        DD_DISPATCH(level, dd_nn_act_bwd_fast, (a, din, dout, in, n));
        return 1;
    }
#endif
    (void)level, (void)a, (void)din, (void)dout, (void)in, (void)n;
    return 0;
}

/* ---- causal conv1d and small dense layers: weights re-laid on the stack for the kernels */

static size_t dd_conv_roundup(size_t n, size_t w) { return (n + w - 1) / w * w; }

/* ---- depthwise layers: weights transposed to wt (K x C) on the stack up to
 * DD_NN_CONV_DW_MAX floats, on the heap above (0, nothing done, when that fails) */

/* act as dd_nn_conv_dw_fwd_fast. */
static int dw_forward(int level, float *pre, float *out, const float *in, const float *w, const float *b,
                      size_t B, size_t T, size_t C, size_t K, size_t d, int act) {
    _Alignas(64) float ws[DD_NN_CONV_DW_MAX]; /* 64-byte aligned: whole-line vector loads */
    float *wt = C * K <= DD_NN_CONV_DW_MAX ? ws : dd_calloc(C * K, sizeof(float));
    if (!wt) return 0;
    for (size_t c = 0; c < C; c++)
        for (size_t k = 0; k < K; k++) wt[k * C + c] = w[c * K + k];
#if DD_NN_HAVE_X86_SIMD
    DD_DISPATCH(level, dd_nn_conv_dw_fwd_fast, (pre, out, in, wt, b, B, T, C, K, d, act));
#else
    (void)level, (void)pre, (void)out, (void)in, (void)b, (void)B, (void)T, (void)d, (void)act;
#endif
    if (wt != ws) dd_free(wt);
    return 1;
}

/* buf == NULL and no DD_NN_DW_HSIN in flags: dout is the convolution's output gradient
 * (dd_nn_conv_dw_bwd); else dd_nn_conv_dw_hs_bwd_fast (pre, buf, flags): the layer fused
 * with Hardswish, or with DD_NN_DW_HSIN the layer whose input is Hardswish(pre). */
static int dw_backward(int level, float *din, float *dw, float *buf, const float *dout, const float *pre,
                       const float *in, const float *w, size_t B, size_t T, size_t C, size_t K, size_t d,
                       int flags) {
    _Alignas(64) float ws[DD_NN_CONV_DW_MAX], dws[DD_NN_CONV_DW_MAX];
    const int heap = C * K > DD_NN_CONV_DW_MAX;
    float *wt = heap ? dd_calloc(C * K, sizeof(float)) : ws;
    float *dwt = heap && dw ? dd_calloc(C * K, sizeof(float)) : dws;
    int done = 0;
    if (wt && dwt) {
        for (size_t c = 0; c < C; c++)
            for (size_t k = 0; k < K; k++) wt[k * C + c] = w[c * K + k];
        if (dw) memset(dwt, 0, C * K * sizeof(float));
        if (!buf && !(flags & DD_NN_DW_HSIN)) {
            dd_nn_conv_dw_bwd(level, din, dw ? dwt : NULL, dout, in, wt, B, T, C, K, d);
        } else {
#if DD_NN_HAVE_X86_SIMD
            DD_DISPATCH(level, dd_nn_conv_dw_hs_bwd_fast,
                        (din, dw ? dwt : NULL, buf, dout, pre, in, wt, B, T, C, K, d, flags));
#else
            (void)pre, (void)flags;
#endif
        }
        if (dw)
            for (size_t c = 0; c < C; c++)
                for (size_t k = 0; k < K; k++) dw[c * K + k] += dwt[k * C + c];
        done = 1;
    }
    if (heap) {
        dd_free(wt);
        if (dw) dd_free(dwt);
    }
    return done;
}

int dd_nn_conv_dw_hsin_backward(float *din, float *dw, const float *dout, const float *ain, const float *z,
                                const float *w, size_t B, size_t T, size_t C, size_t K, size_t d, int set) {
    const int level = dd_nn_simd_level();
    if (level == DD_SIMD_GENERIC || K > DD_NN_CONV_DW_KMAX) return 0;
    return dw_backward(level, din, dw, NULL, dout, ain, z, w, B, T, C, K, d,
                       DD_NN_DW_HSIN | (set ? DD_DW_HS_SET_DIN : 0));
}

int dd_nn_conv_dw_hs_forward(float *pre, float *out, const float *in, const float *w, size_t B, size_t T,
                             size_t C, size_t K, size_t d, int resid) {
    const int level = dd_nn_simd_level();
    if (level == DD_SIMD_GENERIC) return 0;
    return dw_forward(level, pre, out, in, w, NULL, B, T, C, K, d, resid ? 2 : 1);
}

int dd_nn_conv_dw_hs_backward(float *din, float *dw, float *buf, const float *dout, const float *pre,
                              const float *in, const float *w, size_t B, size_t T, size_t C, size_t K, size_t d,
                              int flags) {
    const int level = dd_nn_simd_level();
    if (level == DD_SIMD_GENERIC || K > DD_NN_CONV_DW_KMAX) return 0;
    return dw_backward(level, din, dw, buf, dout, pre, in, w, B, T, C, K, d, flags);
}

/* The full (groups 1) forward through the kernels when the route gives it to them (else 0,
 * nothing done); pre != NULL: fused with Hardswish (dd_nn_conv_full_hs_fwd_fast). */
static int full_forward(int level, float *pre, float *out, const float *in, const float *w, const float *b,
                        size_t B, size_t T, size_t Ci, size_t Co, size_t K, size_t d, size_t G) {
    const size_t vw = (size_t)dd_nn_simd_width(level);
    const size_t lo = dd_conv_roundup(Co, vw);
    if (G == 1 && lo <= 6 * vw && dd_nn_conv_full_fast(level, lo / vw, Ci * K)) {
        float ws[DD_NN_CONV_FULL_MAX], bp[96];
        const size_t nw = K * Ci * lo;
        float *wf = nw <= DD_NN_CONV_FULL_MAX ? ws : dd_calloc(nw, sizeof(float));
        if (!wf) return 0;
        memset(wf, 0, nw * sizeof(float));
        memset(bp, 0, lo * sizeof(float));
        for (size_t co = 0; co < Co; co++)
            for (size_t ci = 0; ci < Ci; ci++)
                for (size_t k = 0; k < K; k++) wf[(k * Ci + ci) * lo + co] = w[(co * Ci + ci) * K + k];
        if (b) memcpy(bp, b, Co * sizeof(float));
        if (pre) {
#if DD_NN_HAVE_X86_SIMD
            DD_DISPATCH(level, dd_nn_conv_full_hs_fwd_fast, (pre, out, in, wf, bp, B, T, Ci, Co, K, d));
#endif
        } else {
            dd_nn_conv_full_fwd(level, out, in, wf, bp, B, T, Ci, Co, K, d);
        }
        if (wf != ws) dd_free(wf);
        return 1;
    }
    return 0;
}

int dd_nn_conv_fast_forward(float *out, const float *in, const float *w, const float *b,
                            size_t B, size_t T, size_t Ci, size_t Co, size_t K, size_t d,
                            size_t G) {
    const int level = dd_nn_simd_level();
    if (level == DD_SIMD_GENERIC) return 0;
    /* depthwise: no matrix product to hand to OpenBLAS */
    if (G == Ci && G == Co) return dw_forward(level, NULL, out, in, w, b, B, T, Ci, K, d, 0);
    return full_forward(level, NULL, out, in, w, b, B, T, Ci, Co, K, d, G);
}

/* A 1x1 convolution goes through dd_dense_forward / _backward, which give outputs up to
 * DD_NN_DENSE_SMALL_MAX to the small dense kernel (except on the BLAS route) */
static int dense_small_takes(size_t K, size_t G, size_t Co) {
    return K == 1 && G == 1 && Co <= DD_NN_DENSE_SMALL_MAX && dd_nn_route() != DD_NN_ROUTE_BLAS;
}

int dd_nn_conv_hs_fast_forward(float *pre, float *out, const float *in, const float *w, const float *b, size_t B,
                               size_t T, size_t Ci, size_t Co, size_t K, size_t d, size_t G) {
    const int level = dd_nn_simd_level();
    if (level == DD_SIMD_GENERIC || G != 1 || !pre || dense_small_takes(K, G, Co) || (Ci == 1 && Co == 1))
        return 0; /* (1 -> 1 channel: the depthwise kernel's) */
    return full_forward(level, pre, out, in, w, b, B, T, Ci, Co, K, d, G);
}

int dd_nn_conv1x1_hs_fast_backward(float *dw, float *db, const float *dout, const float *pre, const float *in,
                                   size_t N, size_t Ci, size_t Co) {
    const int level = dd_nn_simd_level();
    if (level == DD_SIMD_GENERIC || !dw || Ci < 1 || Ci > DD_NN_CONV1X1_HS_CIMAX || dense_small_takes(1, 1, Co))
        return 0;
    /* only where dd_nn_conv_fast_backward would run dd_nn_conv_full_bwd_fast (its floats) */
    const size_t vw = (size_t)dd_nn_simd_width(level), li = dd_conv_roundup(Ci, vw);
    if (li > 6 * vw || !dd_nn_conv_full_fast(level, li / vw, Co)) return 0;
#if DD_NN_HAVE_X86_SIMD
    DD_DISPATCH(level, dd_nn_conv1x1_hs_bwd_fast, (dw, db, dout, pre, in, N, Ci, Co));
    return 1;
#else
    (void)db, (void)dout, (void)pre, (void)in, (void)N;
    return 0;
#endif
}

int dd_nn_conv_fast_backward(float *din, float *dw, float *db, const float *dout,
                                 const float *in, const float *w, size_t B, size_t T, size_t Ci,
                                 size_t Co, size_t K, size_t d, size_t G) {
    const int level = dd_nn_simd_level();
    if (level == DD_SIMD_GENERIC) return 0;
    const size_t vw = (size_t)dd_nn_simd_width(level);
    if (G == Ci && G == Co) {
        if (!dw_backward(level, din, dw, NULL, dout, NULL, in, w, B, T, Ci, K, d, 0)) return 0;
        if (db) dd_nn_colsum_add(db, dout, B * T, Co, Co);
        return 1;
    }
    const size_t li = dd_conv_roundup(Ci, vw);
    if (G == 1 && li <= 6 * vw && dd_nn_conv_full_fast(level, li / vw, Co * K)) {
        float ws[DD_NN_CONV_FULL_MAX], dws[DD_NN_CONV_FULL_MAX];
        const size_t nw = K * Co * li;
        const int heap = nw > DD_NN_CONV_FULL_MAX;
        float *wb = heap ? dd_calloc(nw, sizeof(float)) : ws;
        float *dwb = heap && dw ? dd_calloc(nw, sizeof(float)) : dws;
        if (!wb || !dwb) {
            if (heap) {
                dd_free(wb);
                if (dw) dd_free(dwb);
            }
            return 0;
        }
        memset(wb, 0, nw * sizeof(float));
        for (size_t co = 0; co < Co; co++)
            for (size_t ci = 0; ci < Ci; ci++)
                for (size_t k = 0; k < K; k++) wb[(k * Co + co) * li + ci] = w[(co * Ci + ci) * K + k];
        if (dw) memset(dwb, 0, nw * sizeof(float));
        dd_nn_conv_full_bwd(level, din, dw ? dwb : NULL, db, dout, in, wb, B, T, Ci, Co, K, d);
        if (dw)
            for (size_t co = 0; co < Co; co++)
                for (size_t ci = 0; ci < Ci; ci++)
                    for (size_t k = 0; k < K; k++) dw[(co * Ci + ci) * K + k] += dwb[(k * Co + co) * li + ci];
        if (heap) {
            dd_free(wb);
            if (dw) dd_free(dwb);
        }
        return 1;
    }
    return 0;
}
