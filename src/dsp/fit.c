/* Least-squares fitting of behavioural models: complex gain, memory polynomial and
 * generalised memory polynomial (see include/distdpd/fit.h and docs/pa.md).
 *
 * The GMP solver streams the rows of [A | y] through a blocked Householder QR: the
 * (P+1) x (P+1) triangular factor of everything seen so far is stacked on top of the
 * next block of rows and re-factorised with LAPACKE_zgeqrf. At the end R c = z is
 * solved with LAPACKE_ztrtrs after a rank check (LAPACKE_ztrcon on the column-scaled
 * R). Memory is O(P^2 + block * P) whatever the signal length. */
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "distdpd/fit.h"
#include "dsp/gmp_internal.h"

#define FIT_BLOCK 4096
#define FIT_RCOND_MIN 1e-12

/* ---- shapes ---- */

dd_gmp_shape dd_gmp_shape_mp(int K, int M, int odd_only) {
    dd_gmp_shape s;
    memset(&s, 0, sizeof s);
    s.ka = K;
    s.la = M;
    s.odd_only = odd_only ? 1 : 0;
    return s;
}

/* Number of exponents used: aligned exponents 0..ka-1, cross exponents 1..k. */
static int n_exp_aligned(const dd_gmp_shape *s) { return s->odd_only ? (s->ka + 1) / 2 : s->ka; }
static int n_exp_cross(int k, int odd_only) { return odd_only ? k / 2 : k; }

static dd_status check_range(const char *field, int v, int lo, int hi) {
    if (v < lo || v > hi)
        return dd_error(DD_ERR_ARG, "gmp shape: %s = %d is out of range [%d, %d]", field, v, lo,
                        hi);
    return DD_OK;
}

dd_status dd_gmp_shape_check(const dd_gmp_shape *s) {
    if (!s) return dd_error(DD_ERR_ARG, "gmp shape: NULL");
    DD_TRY(check_range("ka", s->ka, 1, DD_GMP_MAX_K));
    DD_TRY(check_range("la", s->la, 1, DD_GMP_MAX_L));
    DD_TRY(check_range("kb", s->kb, 0, DD_GMP_MAX_K));
    DD_TRY(check_range("kc", s->kc, 0, DD_GMP_MAX_K));
    if (s->kb > 0) {
        DD_TRY(check_range("lb", s->lb, 1, DD_GMP_MAX_L));
        DD_TRY(check_range("mb", s->mb, 1, DD_GMP_MAX_L));
    }
    if (s->kc > 0) {
        DD_TRY(check_range("lc", s->lc, 1, DD_GMP_MAX_L));
        DD_TRY(check_range("mc", s->mc, 1, DD_GMP_MAX_L));
    }
    if (s->odd_only != 0 && s->odd_only != 1)
        return dd_error(DD_ERR_ARG, "gmp shape: odd_only = %d must be 0 or 1", s->odd_only);
    return DD_OK;
}

size_t dd_gmp_ncoef(const dd_gmp_shape *s) {
    if (!s || s->ka < 1 || s->ka > DD_GMP_MAX_K || s->la < 1 || s->la > DD_GMP_MAX_L ||
        s->kb < 0 || s->kb > DD_GMP_MAX_K || s->kc < 0 || s->kc > DD_GMP_MAX_K ||
        (s->kb > 0 && (s->lb < 1 || s->lb > DD_GMP_MAX_L || s->mb < 1 || s->mb > DD_GMP_MAX_L)) ||
        (s->kc > 0 && (s->lc < 1 || s->lc > DD_GMP_MAX_L || s->mc < 1 || s->mc > DD_GMP_MAX_L)) ||
        (s->odd_only != 0 && s->odd_only != 1))
        return 0;
    size_t n = (size_t)n_exp_aligned(s) * (size_t)s->la;
    if (s->kb > 0) n += (size_t)n_exp_cross(s->kb, s->odd_only) * (size_t)s->lb * (size_t)s->mb;
    if (s->kc > 0) n += (size_t)n_exp_cross(s->kc, s->odd_only) * (size_t)s->lc * (size_t)s->mc;
    return n;
}

int dd_gmp_max_lag(const dd_gmp_shape *s) {
    int lag = s->la - 1;
    if (s->kb > 0 && s->lb - 1 + s->mb > lag) lag = s->lb - 1 + s->mb;
    if (s->kc > 0 && s->lc - 1 > lag) lag = s->lc - 1;
    return lag;
}

int dd_gmp_max_lead(const dd_gmp_shape *s) {
    int lead = 0;
    if (s->kc > 0) {
        /* x(n-l) |x(n-l+m)|: the furthest future sample is n + mc (l = 0). */
        lead = s->mc;
    }
    return lead;
}

/* ---- basis ---- */

static inline dd_cf64 at_u(const dd_cf64 *u, ptrdiff_t i, ptrdiff_t len) {
    return (i >= 0 && i < len) ? u[i] : 0.0;
}
static inline double at_a(const double *au, ptrdiff_t i, ptrdiff_t len) {
    return (i >= 0 && i < len) ? au[i] : 0.0;
}

/* Fills row[base + kidx*stride + off] with x * env^k for the used cross exponents. */
static void cross_terms(dd_cf64 xv, double env, int kmax, int odd_only, dd_cf64 *row,
                        size_t base, size_t stride, size_t off) {
    double p = env; /* env^k, k = 1.. */
    double env2 = env * env;
    if (odd_only) {
        p = env2; /* exponents 2, 4, ... */
        for (int k = 2, i = 0; k <= kmax; k += 2, i++) {
            row[base + (size_t)i * stride + off] = xv * p;
            p *= env2;
        }
    } else {
        for (int k = 1; k <= kmax; k++) {
            row[base + (size_t)(k - 1) * stride + off] = xv * p;
            p *= env;
        }
    }
}

void dd_gmp_basis_row(const dd_gmp_shape *s, const dd_cf64 *u, const double *au,
                      ptrdiff_t n, ptrdiff_t len, dd_cf64 *row) {
    size_t base = 0;
    /* aligned: x(n-l)|x(n-l)|^k, exponent-major */
    {
        size_t la = (size_t)s->la;
        int step = s->odd_only ? 2 : 1;
        for (int l = 0; l < s->la; l++) {
            dd_cf64 xv = at_u(u, n - l, len);
            double a = at_a(au, n - l, len);
            double a_step = s->odd_only ? a * a : a;
            double p = 1.0;
            for (int k = 0, i = 0; k < s->ka; k += step, i++) {
                row[(size_t)i * la + (size_t)l] = xv * p;
                p *= a_step;
            }
        }
        base += (size_t)n_exp_aligned(s) * la;
    }
    if (s->kb > 0) {
        size_t stride = (size_t)s->lb * (size_t)s->mb;
        for (int l = 0; l < s->lb; l++) {
            dd_cf64 xv = at_u(u, n - l, len);
            for (int m = 1; m <= s->mb; m++) {
                double env = at_a(au, n - l - m, len);
                cross_terms(xv, env, s->kb, s->odd_only, row, base, stride,
                            (size_t)l * (size_t)s->mb + (size_t)(m - 1));
            }
        }
        base += (size_t)n_exp_cross(s->kb, s->odd_only) * stride;
    }
    if (s->kc > 0) {
        size_t stride = (size_t)s->lc * (size_t)s->mc;
        for (int l = 0; l < s->lc; l++) {
            dd_cf64 xv = at_u(u, n - l, len);
            for (int m = 1; m <= s->mc; m++) {
                double env = at_a(au, n - l + m, len);
                cross_terms(xv, env, s->kc, s->odd_only, row, base, stride,
                            (size_t)l * (size_t)s->mc + (size_t)(m - 1));
            }
        }
    }
}

dd_cf64 dd_gmp_eval_at(const dd_gmp *g, const dd_cf64 *u, const double *au, ptrdiff_t n,
                       ptrdiff_t len, dd_cf64 *row) {
    dd_gmp_basis_row(&g->shape, u, au, n, len, row);
    dd_cf64 acc = 0.0;
    for (size_t j = 0; j < g->ncoef; j++) acc += g->coef[j] * row[j];
    return acc;
}

/* ---- models ---- */

dd_status dd_gmp_create(const dd_gmp_shape *shape, const dd_cf64 *coef, dd_gmp **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_gmp_create: out is NULL");
    *out = NULL;
    DD_TRY(dd_gmp_shape_check(shape));
    dd_gmp *g = dd_calloc(1, sizeof *g);
    if (!g) return DD_ERR_NOMEM;
    g->shape = *shape;
    g->ncoef = dd_gmp_ncoef(shape);
    g->coef = dd_calloc(g->ncoef, sizeof *g->coef);
    if (!g->coef) {
        dd_free(g);
        return DD_ERR_NOMEM;
    }
    if (coef) memcpy(g->coef, coef, g->ncoef * sizeof *coef);
    *out = g;
    return DD_OK;
}

dd_status dd_gmp_copy(const dd_gmp *src, dd_gmp **out) {
    if (!src) {
        if (out) *out = NULL;
        return dd_error(DD_ERR_ARG, "dd_gmp_copy: src is NULL");
    }
    return dd_gmp_create(&src->shape, src->coef, out);
}

void dd_gmp_free(dd_gmp **g) {
    if (!g || !*g) return;
    dd_free((*g)->coef);
    dd_free(*g);
    *g = NULL;
}

/* Converts x to double with magnitudes; checks finiteness (what names the argument). */
static dd_status to_double(const char *fn, const char *what, const dd_cf32 *x, size_t n,
                           dd_cf64 **u, double **au) {
    *u = NULL;
    if (au) *au = NULL;
    dd_cf64 *uu = dd_calloc(n, sizeof *uu);
    double *aa = au ? dd_calloc(n, sizeof *aa) : NULL;
    if (!uu || (au && !aa)) {
        dd_free(uu);
        dd_free(aa);
        return DD_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        float re = crealf(x[i]), im = cimagf(x[i]);
        if (!isfinite(re) || !isfinite(im)) {
            dd_free(uu);
            dd_free(aa);
            return dd_error(DD_ERR_RANGE, "%s: %s[%zu] is not finite", fn, what, i);
        }
        uu[i] = (double)re + (double)im * I;
        if (aa) aa[i] = cabs(uu[i]);
    }
    *u = uu;
    if (au) *au = aa;
    return DD_OK;
}

static dd_status check_model(const char *fn, const dd_gmp *g) {
    if (!g || !g->coef) return dd_error(DD_ERR_ARG, "%s: model is NULL", fn);
    DD_TRY(dd_gmp_shape_check(&g->shape));
    if (g->ncoef != dd_gmp_ncoef(&g->shape))
        return dd_error(DD_ERR_MISMATCH, "%s: model has ncoef = %zu, its shape needs %zu", fn,
                        g->ncoef, dd_gmp_ncoef(&g->shape));
    return DD_OK;
}

dd_status dd_gmp_apply(const dd_gmp *g, const dd_cf32 *x, dd_cf32 *y, size_t n) {
    DD_TRY(check_model("dd_gmp_apply", g));
    if (n == 0) return DD_OK;
    if (!x || !y) return dd_error(DD_ERR_ARG, "dd_gmp_apply: x or y is NULL");
    dd_cf64 *u = NULL, *row = NULL;
    double *au = NULL;
    dd_status st = to_double("dd_gmp_apply", "x", x, n, &u, &au);
    if (st != DD_OK) return st;
    row = dd_calloc(g->ncoef, sizeof *row);
    if (!row) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        dd_cf64 v = dd_gmp_eval_at(g, u, au, (ptrdiff_t)i, (ptrdiff_t)n, row);
        y[i] = (float)creal(v) + (float)cimag(v) * I;
    }
cleanup:
    dd_free(row);
    dd_free(u);
    dd_free(au);
    return st;
}

/* sum|y - G(u)|^2 and sum|y|^2 with the model in double. */
static dd_status residual(const dd_gmp *g, const dd_cf64 *u, const double *au,
                          const dd_cf64 *yy, size_t n, double *err, double *ref) {
    dd_cf64 *row = dd_calloc(g->ncoef, sizeof *row);
    if (!row) return DD_ERR_NOMEM;
    double e = 0.0, r = 0.0;
    for (size_t i = 0; i < n; i++) {
        dd_cf64 d = yy[i] - dd_gmp_eval_at(g, u, au, (ptrdiff_t)i, (ptrdiff_t)n, row);
        e += creal(d) * creal(d) + cimag(d) * cimag(d);
        r += creal(yy[i]) * creal(yy[i]) + cimag(yy[i]) * cimag(yy[i]);
    }
    dd_free(row);
    *err = e;
    *ref = r;
    return DD_OK;
}

static double nmse_from(double err, double ref) {
    if (ref <= 0.0) return err > 0.0 ? 400.0 : -400.0;
    return dd_db10(err / ref);
}

dd_status dd_gmp_nmse_db(const dd_gmp *g, const dd_cf32 *x, const dd_cf32 *y, size_t n,
                         double *nmse_db) {
    DD_TRY(check_model("dd_gmp_nmse_db", g));
    if (!x || !y || !nmse_db) return dd_error(DD_ERR_ARG, "dd_gmp_nmse_db: NULL argument");
    if (n == 0) return dd_error(DD_ERR_RANGE, "dd_gmp_nmse_db: n = 0");
    dd_cf64 *u = NULL, *yy = NULL;
    double *au = NULL, e = 0.0, r = 0.0;
    dd_status st = to_double("dd_gmp_nmse_db", "x", x, n, &u, &au);
    if (st != DD_OK) return st;
    st = to_double("dd_gmp_nmse_db", "y", y, n, &yy, NULL);
    if (st == DD_OK) st = residual(g, u, au, yy, n, &e, &r);
    if (st == DD_OK) {
        if (r <= 0.0) st = dd_error(DD_ERR_RANGE, "dd_gmp_nmse_db: y is all zero");
        else *nmse_db = nmse_from(e, r);
    }
    dd_free(u);
    dd_free(au);
    dd_free(yy);
    return st;
}

/* Re-factorises W (m x q, leading dimension ld) and copies its R into r (q x q). */
static dd_status qr_step(dd_cf64 *w, int m, int q, int ld, dd_cf64 *tau, dd_cf64 *r) {
    lapack_int info = LAPACKE_zgeqrf(LAPACK_COL_MAJOR, m, q, w, ld, tau);
    if (info != 0)
        return dd_error(DD_ERR_NUMERIC, "dd_gmp_fit: LAPACKE_zgeqrf failed (info %d)", (int)info);
    for (int j = 0; j < q; j++)
        for (int i = 0; i < q; i++) r[i + (size_t)j * q] = i <= j ? w[i + (size_t)j * ld] : 0.0;
    return DD_OK;
}

/* A human name of basis column j, for error messages. */
static void column_name(const dd_gmp_shape *s, size_t j, char *buf, size_t cap) {
    size_t na = (size_t)n_exp_aligned(s) * (size_t)s->la;
    int step = s->odd_only ? 2 : 1;
    if (j < na) {
        int k = (int)(j / (size_t)s->la) * step, l = (int)(j % (size_t)s->la);
        snprintf(buf, cap, "aligned order %d tap %d", k + 1, l);
        return;
    }
    j -= na;
    size_t nb = s->kb > 0 ? (size_t)n_exp_cross(s->kb, s->odd_only) * (size_t)s->lb * (size_t)s->mb : 0;
    const char *kind = "lagging";
    int L = s->lb, M = s->mb;
    if (j >= nb) {
        j -= nb;
        kind = "leading";
        L = s->lc;
        M = s->mc;
    }
    size_t per = (size_t)L * (size_t)M;
    int ki = (int)(j / per), rest = (int)(j % per);
    int k = s->odd_only ? 2 * (ki + 1) : ki + 1;
    snprintf(buf, cap, "%s exponent %d tap %d lag %d", kind, k, rest / M, rest % M + 1);
}

dd_status dd_gmp_fit(const dd_gmp_shape *shape, const dd_cf32 *x, const dd_cf32 *y,
                     size_t n, double ridge, dd_gmp **out, double *nmse_db) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_gmp_fit: out is NULL");
    *out = NULL;
    DD_TRY(dd_gmp_shape_check(shape));
    if (!x || !y) return dd_error(DD_ERR_ARG, "dd_gmp_fit: x or y is NULL");
    if (!(ridge >= 0.0 && ridge <= 1.0))
        return dd_error(DD_ERR_ARG, "dd_gmp_fit: ridge = %g is out of range [0, 1]", ridge);
    size_t P = dd_gmp_ncoef(shape);
    if (n < P)
        return dd_error(DD_ERR_RANGE,
                        "dd_gmp_fit: n = %zu samples is fewer than the %zu unknowns of the model",
                        n, P);
    if (P + 1 > 20000)
        return dd_error(DD_ERR_RANGE, "dd_gmp_fit: %zu unknowns is too many", P);

    dd_status st = DD_OK;
    dd_cf64 *u = NULL, *yy = NULL, *w = NULL, *r = NULL, *tau = NULL, *row = NULL;
    dd_cf64 *rs = NULL, *z = NULL;
    double *au = NULL, *cn = NULL;
    dd_gmp *g = NULL;
    int q = (int)P + 1;
    int blk = (int)(n < FIT_BLOCK ? n : FIT_BLOCK);
    int ldw = q + (blk > (int)P ? blk : (int)P);

    st = to_double("dd_gmp_fit", "x", x, n, &u, &au);
    if (st != DD_OK) goto cleanup;
    st = to_double("dd_gmp_fit", "y", y, n, &yy, NULL);
    if (st != DD_OK) goto cleanup;
    w = dd_calloc((size_t)ldw * (size_t)q, sizeof *w);
    r = dd_calloc((size_t)q * (size_t)q, sizeof *r);
    tau = dd_calloc((size_t)q, sizeof *tau);
    row = dd_calloc(P, sizeof *row);
    rs = dd_calloc(P * P, sizeof *rs);
    z = dd_calloc(P, sizeof *z);
    cn = dd_calloc(P, sizeof *cn);
    if (!w || !r || !tau || !row || !rs || !z || !cn) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }

    for (size_t start = 0; start < n; start += (size_t)blk) {
        int rows = (int)((n - start) < (size_t)blk ? (n - start) : (size_t)blk);
        for (int j = 0; j < q; j++)
            for (int i = 0; i < q; i++) w[i + (size_t)j * ldw] = r[i + (size_t)j * q];
        for (int i = 0; i < rows; i++) {
            size_t t = start + (size_t)i;
            dd_gmp_basis_row(shape, u, au, (ptrdiff_t)t, (ptrdiff_t)n, row);
            for (size_t j = 0; j < P; j++) w[(size_t)(q + i) + j * (size_t)ldw] = row[j];
            w[(size_t)(q + i) + P * (size_t)ldw] = yy[t];
        }
        st = qr_step(w, q + rows, q, ldw, tau, r);
        if (st != DD_OK) goto cleanup;
    }

    /* Column norms of A are the column norms of R. */
    for (size_t j = 0; j < P; j++) {
        double s2 = 0.0;
        for (size_t i = 0; i <= j; i++) {
            dd_cf64 v = r[i + j * (size_t)q];
            s2 += creal(v) * creal(v) + cimag(v) * cimag(v);
        }
        cn[j] = sqrt(s2);
        if (!(cn[j] > 0.0)) {
            char name[96];
            column_name(shape, j, name, sizeof name);
            st = dd_error(DD_ERR_NUMERIC,
                          "dd_gmp_fit: basis column %zu (%s) is all zero for this input: the "
                          "basis is rank deficient; use a shorter model or a longer input",
                          j, name);
            goto cleanup;
        }
    }
    if (ridge > 0.0) {
        for (int j = 0; j < q; j++)
            for (int i = 0; i < q; i++) w[i + (size_t)j * ldw] = r[i + (size_t)j * q];
        for (size_t j = 0; j < (size_t)q; j++)
            for (size_t i = 0; i < P; i++)
                w[(size_t)q + i + j * (size_t)ldw] = (i == j) ? sqrt(ridge) * cn[j] : 0.0;
        st = qr_step(w, q + (int)P, q, ldw, tau, r);
        if (st != DD_OK) goto cleanup;
    }

    /* Rank check on the column-scaled triangle. */
    for (size_t j = 0; j < P; j++)
        for (size_t i = 0; i < P; i++) rs[i + j * P] = r[i + j * (size_t)q] / cn[j];
    double rcond = 0.0;
    lapack_int info = LAPACKE_ztrcon(LAPACK_COL_MAJOR, '1', 'U', 'N', (lapack_int)P, rs,
                                     (lapack_int)P, &rcond);
    if (info != 0) {
        st = dd_error(DD_ERR_NUMERIC, "dd_gmp_fit: LAPACKE_ztrcon failed (info %d)", (int)info);
        goto cleanup;
    }
    if (ridge == 0.0 && !(rcond >= FIT_RCOND_MIN)) {
        st = dd_error(DD_ERR_NUMERIC,
                      "dd_gmp_fit: the basis of %zu terms is rank deficient for this input "
                      "(reciprocal condition number %.3g < %.0e); use fewer terms, a richer "
                      "input, or ridge > 0",
                      P, rcond, FIT_RCOND_MIN);
        goto cleanup;
    }
    for (size_t i = 0; i < P; i++) z[i] = r[i + P * (size_t)q];
    for (size_t j = 0; j < P; j++)
        for (size_t i = 0; i < P; i++) rs[i + j * P] = r[i + j * (size_t)q];
    info = LAPACKE_ztrtrs(LAPACK_COL_MAJOR, 'U', 'N', 'N', (lapack_int)P, 1, rs, (lapack_int)P,
                          z, (lapack_int)P);
    if (info != 0) {
        st = dd_error(DD_ERR_NUMERIC, "dd_gmp_fit: triangular solve failed (info %d): the "
                      "basis is singular", (int)info);
        goto cleanup;
    }
    for (size_t j = 0; j < P; j++) {
        if (!isfinite(creal(z[j])) || !isfinite(cimag(z[j]))) {
            st = dd_error(DD_ERR_NUMERIC, "dd_gmp_fit: coefficient %zu is not finite", j);
            goto cleanup;
        }
    }
    st = dd_gmp_create(shape, z, &g);
    if (st != DD_OK) goto cleanup;
    if (nmse_db) {
        double e = 0.0, rr = 0.0;
        st = residual(g, u, au, yy, n, &e, &rr);
        if (st != DD_OK) goto cleanup;
        *nmse_db = nmse_from(e, rr);
    }
    *out = g;
    g = NULL;

cleanup:
    dd_gmp_free(&g);
    dd_free(u);
    dd_free(au);
    dd_free(yy);
    dd_free(w);
    dd_free(r);
    dd_free(tau);
    dd_free(row);
    dd_free(rs);
    dd_free(z);
    dd_free(cn);
    return st;
}

dd_status dd_mp_fit(int K, int M, int odd_only, const dd_cf32 *x, const dd_cf32 *y,
                    size_t n, dd_gmp **out, double *nmse_db) {
    dd_gmp_shape s = dd_gmp_shape_mp(K, M, odd_only);
    if (out) *out = NULL;
    if (K < 1 || K > DD_GMP_MAX_K)
        return dd_error(DD_ERR_ARG, "dd_mp_fit: K = %d is out of range [1, %d]", K, DD_GMP_MAX_K);
    if (M < 1 || M > DD_GMP_MAX_L)
        return dd_error(DD_ERR_ARG, "dd_mp_fit: M = %d is out of range [1, %d]", M, DD_GMP_MAX_L);
    return dd_gmp_fit(&s, x, y, n, 0.0, out, nmse_db);
}

dd_status dd_fit_gain(const dd_cf32 *x, const dd_cf32 *y, size_t n, dd_cf64 *g,
                      double *nmse_db) {
    if (!x || !y) return dd_error(DD_ERR_ARG, "dd_fit_gain: x or y is NULL");
    if (n == 0) return dd_error(DD_ERR_RANGE, "dd_fit_gain: n = 0");
    dd_cf64 num = 0.0;
    double den = 0.0, yy = 0.0;
    for (size_t i = 0; i < n; i++) {
        dd_cf64 xv = (double)crealf(x[i]) + (double)cimagf(x[i]) * I;
        dd_cf64 yv = (double)crealf(y[i]) + (double)cimagf(y[i]) * I;
        if (!isfinite(creal(xv)) || !isfinite(cimag(xv)))
            return dd_error(DD_ERR_RANGE, "dd_fit_gain: x[%zu] is not finite", i);
        if (!isfinite(creal(yv)) || !isfinite(cimag(yv)))
            return dd_error(DD_ERR_RANGE, "dd_fit_gain: y[%zu] is not finite", i);
        num += yv * conj(xv);
        den += creal(xv) * creal(xv) + cimag(xv) * cimag(xv);
        yy += creal(yv) * creal(yv) + cimag(yv) * cimag(yv);
    }
    if (!(den > 0.0)) return dd_error(DD_ERR_RANGE, "dd_fit_gain: x is all zero");
    dd_cf64 gg = num / den;
    if (nmse_db) {
        if (!(yy > 0.0)) return dd_error(DD_ERR_RANGE, "dd_fit_gain: y is all zero");
        double e = 0.0;
        for (size_t i = 0; i < n; i++) {
            dd_cf64 xv = (double)crealf(x[i]) + (double)cimagf(x[i]) * I;
            dd_cf64 yv = (double)crealf(y[i]) + (double)cimagf(y[i]) * I;
            dd_cf64 d = yv - gg * xv;
            e += creal(d) * creal(d) + cimag(d) * cimag(d);
        }
        *nmse_db = nmse_from(e, yy);
    }
    if (g) *g = gg;
    return DD_OK;
}
