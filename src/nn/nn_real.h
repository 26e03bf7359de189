/* Type-generic scaffolding for the layer templates (private to src/nn).
 *
 * Each layer's .c file includes its *_impl.h twice: once after
 *   #define DD_NN_DOUBLE 0   (dd_real = float,  RFN(dd_x) = dd_x,     the fast path)
 * and once after
 *   #define DD_NN_DOUBLE 1   (dd_real = double, RFN(dd_x) = dd_x_f64, for the
 *                             finite-difference checks),
 * each time including this header first. It (re)defines the element type, the name
 * suffix, the libm functions and the BLAS GEMM of that precision, plus a few small
 * shared kernels (bias fill, column sums). */
#ifndef DD_NN_DOUBLE
#error "define DD_NN_DOUBLE to 0 or 1 before including nn_real.h"
#endif

#include <cblas.h>
#include <math.h>
#include <stddef.h>

#include "simd.h" /* dd_nn_sgemm */

#undef dd_real
#undef RFN
#undef RFN_
#undef R_EXP
#undef R_TANH
#undef R_SIGMOID
#undef R_SQRT
#undef R_GEMM

#if DD_NN_DOUBLE
#define dd_real double
#define RFN_(name) name##_f64
#define R_EXP exp
#define R_TANH tanh
#define R_SIGMOID(x) (1 / (1 + exp(-(x))))
#define R_SQRT sqrt
#define R_GEMM cblas_dgemm
#else
#define dd_real float
#define RFN_(name) name
#define R_EXP expf
#define R_TANH dd_nn_tanhf
#define R_SIGMOID dd_nn_sigmoidf
#define R_SQRT sqrtf
#define R_GEMM cblas_sgemm /* dd_nn_gemm: dd_nn_sgemm, below */
#endif
#define RFN(name) RFN_(name)

#ifndef DD_NN_FAST_FLOAT_DONE
#define DD_NN_FAST_FLOAT_DONE
#include <stdint.h>
/* Float32 exp, sigmoid and tanh for the layers' fast path: branch-free polynomial code
 * (no libm call), measured against double libm on a 1e-5 grid over [-20, 20]: exp max rel
 * err 8.1e-8 (1.4 ulp); sigmoid max rel err 1.5e-7 (same as 1/(1+expf(-x))); tanh max
 * abs and rel err 4.0e-7 (libm tanhf: 1.6e-7, but 5x slower). NaN propagates. The
 * float64 path keeps libm.
 * The array kernels built on them are in cells_impl.h. */
#define DD_NN_EXP_HI 88.0f  /* exp(88) = 1.65e38 < FLT_MAX: the 2^n scale stays finite */
#define DD_NN_EXP_LO (-87.0f) /* exp(-87) = 1.6e-38 > FLT_MIN */
#define DD_NN_TANH_CLAMP 7.90531110763549805f

/* exp(x) for x already in [DD_NN_EXP_LO, DD_NN_EXP_HI]. */
static inline float dd_nn_expf_core(float x) {
    /* x = n ln2 + r, |r| <= ln2/2; n rounded to nearest by the 1.5*2^23 trick */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    /* Cephes expf polynomial */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n from the bits of 2^23 + 127 + n (exact for n in [-126, 127]); unsigned, so a NaN
     * n gives defined garbage and the NaN of p propagates */
    union {
        float f;
        uint32_t i;
    } u, e;
    u.f = n + 8388735.0f; /* 2^23 + 127 */
    e.i = (u.i - 0x4B000000u) << 23;
    return p * e.f;
}
static inline float dd_nn_expf(float x) {
    x = x > DD_NN_EXP_HI ? DD_NN_EXP_HI : x; /* clamps written so that NaN passes */
    x = x < DD_NN_EXP_LO ? DD_NN_EXP_LO : x;
    return dd_nn_expf_core(x);
}
static inline float dd_nn_sigmoidf(float x) { return 1.0f / (1.0f + dd_nn_expf(-x)); }
/* tanh(x) for |x| <= DD_NN_TANH_CLAMP: odd rational approximation x P(x^2) / Q(x^2), the
 * coefficients Eigen uses for its float tanh. */
static inline float dd_nn_tanhf_core(float x) {
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}
static inline float dd_nn_tanhf(float x) {
    x = x > DD_NN_TANH_CLAMP ? DD_NN_TANH_CLAMP : x;
    x = x < -DD_NN_TANH_CLAMP ? -DD_NN_TANH_CLAMP : x;
    return dd_nn_tanhf_core(x);
}
#endif

#if DD_NN_DOUBLE
#ifndef DD_NN_REAL_DOUBLE_DONE
#define DD_NN_REAL_DOUBLE_DONE
#define DD_NN_REAL_EMIT
#endif
#else
#ifndef DD_NN_REAL_FLOAT_DONE
#define DD_NN_REAL_FLOAT_DONE
#define DD_NN_REAL_EMIT
#endif
#endif


#ifdef DD_NN_REAL_EMIT
#undef DD_NN_REAL_EMIT
/* C (M, N) = alpha * op(A) op(B) + beta * C, row-major; ta/tb: 0 plain, 1 transposed.
 * Does nothing when a dimension is zero. */
static inline void RFN(dd_nn_gemm)(int ta, int tb, size_t M, size_t N, size_t K, dd_real alpha,
                                   const dd_real *A, size_t lda, const dd_real *Bm, size_t ldb,
                                   dd_real beta, dd_real *C, size_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
        return;
    }
#if DD_NN_DOUBLE
    R_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M,
           (int)N, (int)K, alpha, A, (int)lda, Bm, (int)ldb, beta, C, (int)ldc);
#else /* large products in panels on the library's threads (cut by shape: any thread count, the same bits) */
    dd_nn_sgemm(ta, tb, M, N, K, alpha, A, lda, Bm, ldb, beta, C, ldc);
#endif
}

static inline dd_real RFN(dd_nn_sigmoid)(dd_real x) { return R_SIGMOID(x); }

/* db[i] += sum_j A[i*lda + j], i < rows, j < n (row sums; 8 interleaved partial sums). */
static inline void RFN(dd_nn_rowsum_add)(dd_real *db, const dd_real *A, size_t rows, size_t n,
                                         size_t lda) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < rows; i++) {
        const dd_real *a = A + i * lda;
        dd_real acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s = 0;
        for (size_t j = 0; j < m; j += 8)
            for (size_t k = 0; k < 8; k++) acc[k] += a[j + k];
        for (size_t j = m; j < n; j++) s += a[j];
        db[i] += s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
}

/* db[j] += sum_i A[i*lda + j], j < n, i < rows. */
static inline void RFN(dd_nn_colsum_add)(dd_real *db, const dd_real *A, size_t rows, size_t n,
                                         size_t lda) {
    for (size_t i = 0; i < rows; i++) {
        const dd_real *a = A + i * lda;
        for (size_t j = 0; j < n; j++) db[j] += a[j];
    }
}
#endif
