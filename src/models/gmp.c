/* Models "gmp" and "mp": the generalized memory polynomial (Morgan et al. 2006) as a
 * trainable model, causal part only (aligned + lagging terms; the leading terms of
 * fit.h look into the future and would break streaming):
 *   y(n) = sum_{k=0}^{K-1} sum_{l=0}^{M-1} a_kl x(n-l) |x(n-l)|^k
 *        + sum_{k=1}^{Kb} sum_{l=0}^{C-1} sum_{m=1}^{C} b_klm x(n-l) |x(n-l-m)|^k
 * with K = cfg.order (default 5), M = cfg.memory (default 4), C = cfg.cross (default 2),
 * Kb = max(K-1, 1). "mp" is the aligned part alone. Samples before the frame start are
 * zero. The coefficient order is exactly dd_gmp's (fit.h: dd_gmp_shape with ka = K,
 * la = M, kb = Kb, lb = mb = C, kc = 0, odd_only = 0), so dd_model_fit_ls simply calls
 * dd_gmp_fit and the coefficients can be exported to a dd_gmp one to one.
 * Parameters: "aligned" (K, M, 2) and "lagging" (Kb, C, C, 2), the last axis (re, im)
 * of each complex coefficient: 2 (K M + Kb C^2) floats (72 for gmp, 40 for mp at the
 * defaults). Gradients: dL/dc = sum_n g(n) conj(phi(n)) with g = dL/dy as a complex
 * number; the input gradient differentiates the basis, with d|x|/dx defined as 0 at
 * x = 0. Evaluation is in double, results stored as float. One stage ("poly"). */
#include <complex.h>
#include <math.h>

#include "distdpd/fit.h"
#include "models/model_impl.h"

typedef struct {
    dd_gmp_shape s;    /* the fit.h shape (kc = 0, odd_only = 0) */
    size_t off_a;      /* offset of "aligned" (ka, la, 2) */
    size_t off_b;      /* offset of "lagging" (kb, lb, mb, 2), if kb > 0 */
} gmp_impl;

static const dd_model_opt_info gmp_opts[] = {
    {"memory", "memory depth M (taps of the aligned terms)", 4, 1, DD_GMP_MAX_L},
    {"order", "nonlinearity order K", 5, 1, DD_GMP_MAX_K},
    {"cross", "depth C of the lagging cross terms (Lb = Mb = C)", 2, 1, DD_GMP_MAX_L},
    {NULL, NULL, 0, 0, 0}};
static const dd_model_opt_info mp_opts[] = {
    {"memory", "memory depth M", 4, 1, DD_GMP_MAX_L},
    {"order", "nonlinearity order K", 5, 1, DD_GMP_MAX_K},
    {NULL, NULL, 0, 0, 0}};

/* Saved: r = |x| (BT); scratch: dL/d|x| (BT). */
static size_t poly_size(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m, (void)st;
    return ((size_t)B * (size_t)T + 15) / 16 * 16;
}

static size_t ncoef_aligned(const dd_gmp_shape *s) { return (size_t)s->ka * (size_t)s->la; }
static size_t ncoef_lagging(const dd_gmp_shape *s) {
    return s->kb > 0 ? (size_t)s->kb * (size_t)s->lb * (size_t)s->mb : 0;
}

static void gmp_init(const dd_model *m, float *params, dd_rng *rng) {
    const gmp_impl *g = m->impl;
    /* Identity plus small noise: a_00 = 1, every other coefficient uniform(-1e-3, 1e-3). */
    dd_param_uniform(params + g->off_a, 2 * ncoef_aligned(&g->s), 1e-3, rng);
    params[g->off_a] = 1.0f;
    params[g->off_a + 1] = 0.0f;
    if (g->s.kb > 0) dd_param_uniform(params + g->off_b, 2 * ncoef_lagging(&g->s), 1e-3, rng);
}

/* One frame: x, y (T, 2); r (T) = |x| precomputed. */
static void frame_forward(const gmp_impl *g, const dd_stage_params *sp, const float *x, const float *r,
                          float *y, size_t T) {
    const dd_gmp_shape *s = &g->s;
    const float *A = DD_SP(sp, g->off_a), *Bc = s->kb > 0 ? DD_SP(sp, g->off_b) : NULL;
    for (size_t t = 0; t < T; t++) {
        double yr = 0, yi = 0;
        for (size_t l = 0; l < (size_t)s->la && l <= t; l++) {
            const double ur = x[2 * (t - l)], ui = x[2 * (t - l) + 1], a = r[t - l];
            double pw = 1;
            for (size_t k = 0; k < (size_t)s->ka; k++) {
                const float *c = A + 2 * (k * (size_t)s->la + l);
                yr += pw * (c[0] * ur - c[1] * ui);
                yi += pw * (c[0] * ui + c[1] * ur);
                pw *= a;
            }
        }
        for (size_t l = 0; s->kb > 0 && l < (size_t)s->lb && l <= t; l++) {
            const double ur = x[2 * (t - l)], ui = x[2 * (t - l) + 1];
            for (size_t m = 1; m <= (size_t)s->mb && l + m <= t; m++) {
                const double env = r[t - l - m];
                double pw = env;
                for (size_t k = 0; k < (size_t)s->kb; k++) {
                    const float *c = Bc + 2 * ((k * (size_t)s->lb + l) * (size_t)s->mb + m - 1);
                    yr += pw * (c[0] * ur - c[1] * ui);
                    yi += pw * (c[0] * ui + c[1] * ur);
                    pw *= env;
                }
            }
        }
        y[2 * t] = (float)yr;
        y[2 * t + 1] = (float)yi;
    }
}

/* Term c * u * e^k with u = x(a) (complex), e = |x(b)|, upstream g = dL/dy(t):
 *   dc += g conj(u) e^k;  du += conj(c) g e^k;  de += k e^(k-1) Re(conj(g) c u). */
static void frame_backward(const gmp_impl *g, const dd_stage_params *sp, const float *x,
                           const float *r, const float *dy, float *dx, float *dr, size_t T) {
    const dd_gmp_shape *s = &g->s;
    const float *A = DD_SP(sp, g->off_a), *Bc = s->kb > 0 ? DD_SP(sp, g->off_b) : NULL;
    float *gA = DD_SG(sp, g->off_a), *gB = s->kb > 0 ? DD_SG(sp, g->off_b) : NULL;
    if (dx) memset(dr, 0, T * sizeof *dr);
    for (size_t t = 0; t < T; t++) {
        const double gre = dy[2 * t], gim = dy[2 * t + 1];
        for (size_t l = 0; l < (size_t)s->la && l <= t; l++) {
            const size_t ia = t - l;
            const double ur = x[2 * ia], ui = x[2 * ia + 1], a = r[ia];
            double pw = 1, pwm1 = 0, dur = 0, dui = 0, da = 0;
            for (size_t k = 0; k < (size_t)s->ka; k++) {
                const size_t j = 2 * (k * (size_t)s->la + l);
                const double cr = A[j], ci = A[j + 1];
                if (gA) {
                    gA[j] += (float)(pw * (gre * ur + gim * ui));
                    gA[j + 1] += (float)(pw * (gim * ur - gre * ui));
                }
                if (dx) {
                    dur += pw * (cr * gre + ci * gim);
                    dui += pw * (cr * gim - ci * gre);
                    /* Re(conj(g) c u) with c u = (cr ur - ci ui) + j (cr ui + ci ur) */
                    if (k > 0)
                        da += (double)k * pwm1 *
                              (gre * (cr * ur - ci * ui) + gim * (cr * ui + ci * ur));
                }
                pwm1 = pw;
                pw *= a;
            }
            if (dx) {
                dx[2 * ia] += (float)dur;
                dx[2 * ia + 1] += (float)dui;
                dr[ia] += (float)da;
            }
        }
        for (size_t l = 0; s->kb > 0 && l < (size_t)s->lb && l <= t; l++) {
            const size_t ia = t - l;
            const double ur = x[2 * ia], ui = x[2 * ia + 1];
            double dur = 0, dui = 0;
            for (size_t m = 1; m <= (size_t)s->mb && l + m <= t; m++) {
                const size_t ib = t - l - m;
                const double env = r[ib];
                double pw = env, pwm1 = 1, de = 0;
                for (size_t k = 0; k < (size_t)s->kb; k++) {
                    const size_t j = 2 * ((k * (size_t)s->lb + l) * (size_t)s->mb + m - 1);
                    const double cr = Bc[j], ci = Bc[j + 1];
                    if (gB) {
                        gB[j] += (float)(pw * (gre * ur + gim * ui));
                        gB[j + 1] += (float)(pw * (gim * ur - gre * ui));
                    }
                    if (dx) {
                        dur += pw * (cr * gre + ci * gim);
                        dui += pw * (cr * gim - ci * gre);
                        de += (double)(k + 1) * pwm1 *
                              (gre * (cr * ur - ci * ui) + gim * (cr * ui + ci * ur));
                    }
                    pwm1 = pw;
                    pw *= env;
                }
                if (dx) dr[ib] += (float)de;
            }
            if (dx) {
                dx[2 * ia] += (float)dur;
                dx[2 * ia + 1] += (float)dui;
            }
        }
    }
    if (dx)
        for (size_t t = 0; t < T; t++)
            if (r[t] > 0) {
                dx[2 * t] += dr[t] * x[2 * t] / r[t];
                dx[2 * t + 1] += dr[t] * x[2 * t + 1] / r[t];
            }
}

static void envelope(const float *x, float *r, size_t n) {
    for (size_t i = 0; i < n; i++) r[i] = sqrtf(x[2 * i] * x[2 * i] + x[2 * i + 1] * x[2 * i + 1]);
}

static void poly_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *x,
                         const float *x0, float *y, int B, int T, float *saved, float *scratch) {
    (void)st, (void)x0, (void)scratch;
    const gmp_impl *g = m->impl;
    const size_t Tn = (size_t)T;
    envelope(x, saved, (size_t)B * Tn);
    for (size_t b = 0; b < (size_t)B; b++) frame_forward(g, sp, x + 2 * b * Tn, saved + b * Tn, y + 2 * b * Tn, Tn);
}

static void poly_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *x,
                          const float *x0, const float *dy, float *dx, float *dx0, int B, int T, float *saved,
                          float *scratch) {
    (void)st, (void)x0, (void)dx0;
    const gmp_impl *g = m->impl;
    const size_t Tn = (size_t)T;
    for (size_t b = 0; b < (size_t)B; b++)
        frame_backward(g, sp, x + 2 * b * Tn, saved + b * Tn, dy + 2 * b * Tn, dx ? dx + 2 * b * Tn : NULL,
                       scratch + b * Tn, Tn);
}

static double poly_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    const gmp_impl *g = m->impl;
    double P = (double)(ncoef_aligned(&g->s) + ncoef_lagging(&g->s));
    double f = 9 * P + 4; /* complex MAC (8) + power update per term, envelope */
    return backward ? 2 * f : f;
}

static const dd_stage_ops poly_stage = {
    .saved = poly_size,
    .scratch = poly_size,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = poly_forward,
    .backward = poly_backward,
    .flops = poly_flops,
};

static dd_status gmp_fit_ls(const dd_model *m, float *params, const dd_cf32 *x, const dd_cf32 *y,
                            size_t n, double *nmse_db) {
    const gmp_impl *g = m->impl;
    dd_gmp *fit = NULL;
    dd_status s = dd_gmp_fit(&g->s, x, y, n, 0.0, &fit, nmse_db);
    if (s != DD_OK) return dd_error_prefix(s, "model %s: least-squares fit: ", m->name);
    size_t na = ncoef_aligned(&g->s), nb = ncoef_lagging(&g->s);
    for (size_t j = 0; j < na + nb; j++) {
        float *c = params + (j < na ? g->off_a + 2 * j : g->off_b + 2 * (j - na));
        c[0] = (float)creal(fit->coef[j]);
        c[1] = (float)cimag(fit->coef[j]);
    }
    dd_gmp_free(&fit);
    return DD_OK;
}

static const dd_model_ops gmp_ops = {
    .init = gmp_init,
    .fit_ls = gmp_fit_ls,
};

static dd_status build(dd_model *m, int cross) {
    gmp_impl *g = m->impl;
    memset(&g->s, 0, sizeof g->s);
    g->s.ka = dd_model_opt(m, "order");
    g->s.la = dd_model_opt(m, "memory");
    if (cross) {
        g->s.kb = g->s.ka > 1 ? g->s.ka - 1 : 1;
        g->s.lb = g->s.mb = dd_model_opt(m, "cross");
    }
    DD_TRY(dd_gmp_shape_check(&g->s));
    size_t sa[3] = {(size_t)g->s.ka, (size_t)g->s.la, 2};
    DD_TRY(dd_param_table_add(&m->table, "aligned", 3, sa, &g->off_a));
    if (g->s.kb > 0) {
        size_t sb[4] = {(size_t)g->s.kb, (size_t)g->s.lb, (size_t)g->s.mb, 2};
        DD_TRY(dd_param_table_add(&m->table, "lagging", 4, sb, &g->off_b));
    }
    DD_TRY(dd_model_add_stage(m, &poly_stage, "poly", 0, NULL, 2, 2));
    m->history = dd_gmp_max_lag(&g->s);
    return DD_OK;
}

static dd_status gmp_build(dd_model *m) { return build(m, 1); }
static dd_status mp_build(dd_model *m) { return build(m, 0); }

DD_MODEL_DEFINE(gmp, "generalized memory polynomial (aligned + lagging cross terms), LS-fittable", gmp_opts,
                &gmp_ops, gmp_impl, gmp_build);
DD_MODEL_DEFINE(mp, "memory polynomial (gmp without cross terms), LS-fittable", mp_opts, &gmp_ops, gmp_impl,
                mp_build);
