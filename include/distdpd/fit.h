/* Least-squares behavioural model fitting: a complex gain (y ~ g x), the memory
 * polynomial MP(K, M) and the generalised memory polynomial GMP (Morgan et al. 2006).
 * Used by `distdpd inspect` (how nonlinear is a data set?), by the PA simulator (the
 * "mp-ding", "mp-warp" and "gmp" models evaluate a dd_gmp) and by GMP baselines.
 * Formulas, basis order and the solver: docs/pa.md, section "Fitting".
 *
 * Conventions
 * - Samples before the start of the signal count as zero (zero initial state, like the
 *   PA simulator), and so do samples after its end (leading GMP terms). Every sample
 *   n = 0..N-1 is a row of the least-squares problem.
 * - Coefficients are double complex; signals are float32 complex (dd_cf32) and every
 *   sum is accumulated in double.
 * - The solver is a blocked Householder QR (LAPACKE zgeqrf) of [A | y], 4096 rows at a
 *   time, so memory stays O(P^2) for P unknowns whatever the signal length. It never
 *   forms A^H A.
 */
#ifndef DISTDPD_FIT_H
#define DISTDPD_FIT_H

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits on GMP shapes. */
#define DD_GMP_MAX_K 16 /* largest ka, kb, kc */
#define DD_GMP_MAX_L 64 /* largest la, lb, lc, mb, mc */

/* The shape of a GMP model (Morgan, Ma, Kim, Zierdt, Pastalan 2006 indexing):
 *
 *   y(n) =   sum_{k=0}^{ka-1} sum_{l=0}^{la-1}  a_kl  x(n-l) |x(n-l)|^k          aligned
 *          + sum_{k=1}^{kb}   sum_{l=0}^{lb-1} sum_{m=1}^{mb} b_klm x(n-l) |x(n-l-m)|^k  lagging
 *          + sum_{k=1}^{kc}   sum_{l=0}^{lc-1} sum_{m=1}^{mc} c_klm x(n-l) |x(n-l+m)|^k  leading
 *
 * So ka is the largest nonlinear ORDER of the aligned terms (orders 1..ka) and kb, kc
 * are the largest EXPONENTS of the cross terms. odd_only keeps only even exponents
 * (odd orders: x|x|^0, x|x|^2, ...), everywhere.
 * The memory polynomial MP(K, M) is the aligned part alone: ka = K, la = M (M taps,
 * i.e. memory depth M-1), kb = kc = 0. "MP(7,4)" in this project means orders 1..7,
 * all of them (odd_only = 0), and 4 taps: 28 coefficients.
 *
 * Coefficient order (the layout of dd_gmp.coef): aligned terms first, exponent-major
 * (for each used k ascending, l = 0..la-1), then lagging (k ascending, then l, then m),
 * then leading (same). For MP that is "rows = order, columns = tap", as the published
 * sets in docs/pa.md ("Sources") are written. */
typedef struct {
    int ka;       /* aligned: orders 1..ka; [1, 16] */
    int la;       /* aligned: taps 0..la-1; [1, 64] */
    int kb;       /* lagging: exponents 1..kb; [0, 16], 0 disables the lagging terms */
    int lb;       /* lagging: taps 0..lb-1; [1, 64] when kb > 0, ignored otherwise */
    int mb;       /* lagging: lags 1..mb of the envelope; [1, 64] when kb > 0 */
    int kc;       /* leading: exponents 1..kc; [0, 16], 0 disables (non-causal terms) */
    int lc;       /* leading: taps 0..lc-1; [1, 64] when kc > 0 */
    int mc;       /* leading: leads 1..mc of the envelope; [1, 64] when kc > 0 */
    int odd_only; /* 0: all orders/exponents; 1: odd orders only (even exponents) */
} dd_gmp_shape;

/* The MP(K, M) shape: orders 1..K (all, or odd only), M taps. */
dd_gmp_shape dd_gmp_shape_mp(int K, int M, int odd_only);

/* Checks a shape; on error the message names the field, e.g. "gmp shape: la = 0 is out
 * of range [1, 64]". */
dd_status dd_gmp_shape_check(const dd_gmp_shape *s);

/* Number of coefficients of a (valid) shape; 0 if the shape is invalid. */
size_t dd_gmp_ncoef(const dd_gmp_shape *s);

/* Largest look-back (samples into the past) and look-ahead of the shape's basis. */
int dd_gmp_max_lag(const dd_gmp_shape *s);
int dd_gmp_max_lead(const dd_gmp_shape *s);

/* A GMP (or MP) model: shape plus coefficients. */
typedef struct {
    dd_gmp_shape shape;
    size_t ncoef;  /* dd_gmp_ncoef(&shape) */
    dd_cf64 *coef; /* ncoef coefficients in the order above; owned by the model */
} dd_gmp;

/* Creates a model with the given shape; coef (ncoef values, copied) may be NULL for
 * all-zero coefficients. The caller frees *out with dd_gmp_free(). */
dd_status dd_gmp_create(const dd_gmp_shape *shape, const dd_cf64 *coef, dd_gmp **out);
/* Deep copy; the caller frees *out. */
dd_status dd_gmp_copy(const dd_gmp *src, dd_gmp **out);
/* Frees *g and sets it to NULL; NULL and *g == NULL are fine. */
void dd_gmp_free(dd_gmp **g);

/* Evaluates the model on x (n samples, zero before and after) into y (n samples).
 * x and y must not overlap. */
dd_status dd_gmp_apply(const dd_gmp *g, const dd_cf32 *x, dd_cf32 *y, size_t n);

/* Validation NMSE in dB of the model on (x, y): 10 log10(sum|y - G(x)|^2 / sum|y|^2),
 * model output kept in double. */
dd_status dd_gmp_nmse_db(const dd_gmp *g, const dd_cf32 *x, const dd_cf32 *y, size_t n,
                         double *nmse_db);

/* Least-squares GMP fit of y ~ G(x) over all n rows.
 * ridge: 0 for plain least squares; > 0 adds Tikhonov regularisation relative to the
 *   column norms: minimise |A c - y|^2 + ridge * sum_j |A_j|^2 |c_j|^2; [0, 1].
 * Errors: DD_ERR_ARG for an invalid shape, NULL pointers or ridge out of range;
 *   DD_ERR_RANGE when n < number of unknowns or a sample is not finite;
 *   DD_ERR_NUMERIC when the basis is rank deficient (reciprocal condition number of the
 *   column-scaled R below 1e-12; only with ridge == 0), the message says what to do.
 * On success *out is a new model (the caller frees it with dd_gmp_free()) and, if
 * nmse_db is not NULL, *nmse_db is the NMSE (dB) of the fit on its own data. */
dd_status dd_gmp_fit(const dd_gmp_shape *shape, const dd_cf32 *x, const dd_cf32 *y,
                     size_t n, double ridge, dd_gmp **out, double *nmse_db);

/* MP(K, M) fit: dd_gmp_fit with dd_gmp_shape_mp(K, M, odd_only) and ridge 0.
 * K in [1, 16], M in [1, 64]. */
dd_status dd_mp_fit(int K, int M, int odd_only, const dd_cf32 *x, const dd_cf32 *y,
                    size_t n, dd_gmp **out, double *nmse_db);

/* Gain-only complex least-squares fit y ~ g x: g = sum y x* / sum |x|^2, and the NMSE
 * (dB) of that fit. Either output may be NULL. Errors: n == 0, an all-zero x, or a
 * non-finite sample. */
dd_status dd_fit_gain(const dd_cf32 *x, const dd_cf32 *y, size_t n, dd_cf64 *g,
                      double *nmse_db);

#ifdef __cplusplus
}
#endif
#endif
