/* Behavioural PA simulator (include/distdpd/pa.h, docs/pa.md): the model table, the
 * parameter defaults and checks, and the block-wise streaming chain
 *   drive -> [IQ in] -> fir_in -> core (NL + cross | GMP) -> long-term gain -> fir_out
 *   -> output gain * drift -> [IQ out] -> AWGN.
 * Every stage with memory keeps its own history so that chunked and whole-signal
 * processing give identical bytes. */
#include <complex.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "distdpd/pa.h"
#include "dsp/gmp_internal.h"

#define PA_BLOCK 1024

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

typedef enum {
    K_SALEH,
    K_RAPP,
    K_GHORBANI,
    K_MP_DING,
    K_MP_WARP,
    K_GMP,
    K_WIENER,
    K_HAMMERSTEIN,
    K_WH,
    K_REALISTIC,
    K_COUNT
} pa_kind;

static const dd_pa_model_info pa_models[K_COUNT] = {
    {"saleh", "Saleh TWTA AM/AM + AM/PM (strong AM/PM), memoryless"},
    {"rapp", "Rapp solid-state AM/AM (G, Vsat, p) with optional AM/PM, memoryless"},
    {"ghorbani", "Ghorbani AM/AM + AM/PM (8 parameters), memoryless"},
    {"mp-ding", "memory polynomial, class-AB set of Ding et al. 2004 (orders 1,3,5 x 3 taps)"},
    {"mp-warp", "memory polynomial, WARP board set (orders 1,3,5,7 x 4 taps)"},
    {"gmp", "generalised memory polynomial with user coefficients (e.g. a fitted dd_gmp)"},
    {"wiener", "Wiener: FIR then static nonlinearity"},
    {"hammerstein", "Hammerstein: static nonlinearity then FIR"},
    {"wiener-hammerstein", "Wiener-Hammerstein: FIR, static nonlinearity, FIR"},
    {"realistic", "calibrated chain: FIR, Rapp+AM/PM, GMP cross term, trapping/thermal, FIR, "
                  "AWGN 45 dB (like measured data: ACLR ~-33 dBc, gain-only NMSE ~-20 dB, MP(7,4) ~-30 dB)"},
};

/* Published memory-polynomial sets (docs/pa.md "Sources"), rows = order, columns = tap. */
static const double ding_coef[9][2] = {
    {1.0513, 0.0904},   {-0.0680, -0.0023}, {0.0289, -0.0054}, /* order 1 */
    {-0.0542, -0.2900}, {0.2234, 0.2317},   {-0.0621, -0.0932}, /* order 3 */
    {-0.9657, -0.7028}, {-0.2451, -0.3735}, {0.1229, 0.1508},  /* order 5 */
};
static const double warp_coef[16][2] = {
    {0.9295, -0.0001}, {0.2939, 0.0005},   {-0.1270, 0.0034},  {0.0741, -0.0018}, /* 1 */
    {0.1419, -0.0008}, {-0.0735, 0.0833},  {-0.0535, 0.0004},  {0.0908, -0.0473}, /* 3 */
    {0.0084, -0.0569}, {-0.4610, 0.0274},  {-0.3011, -0.1403}, {-0.0623, -0.0269}, /* 5 */
    {0.1774, 0.0265},  {0.0848, 0.0613},   {-0.0362, -0.0307}, {0.0415, 0.0429},  /* 7 */
};

/* The realistic chain (calibrated, see docs/pa.md "Calibration"). */
#define REAL_DRIVE_RMS 0.32
#define REAL_AMPM_ALPHA 0.35
#define REAL_AMPM_BETA 1.0
#define REAL_TRAP_KAPPA 0.4
#define REAL_THERMAL_KAPPA 0.5

struct dd_pa {
    pa_kind kind;
    dd_pa_params p;  /* copy; p.gmp points at gmp below (or NULL) */
    dd_gmp *gmp;     /* owned GMP core, or NULL */
    int use_nl;      /* core is a static nonlinearity (else GMP) */
    int noise_on;    /* add noise (p.snr_db configured and not switched off) */
    dd_pa_calib cal; /* calibration */
    /* derived constants */
    double out_gain;        /* 10^(out_gain_db/20) */
    dd_cf64 iq_mu, iq_nu;   /* IQ imbalance: y = mu v + nu conj(v) */
    int iq_on;
    double l_th, l_cap, l_rel; /* one-pole rates */
    int hist_u;             /* core input history length (GMP lag / cross lag) */
    /* state */
    dd_cf64 fir_in_hist[DD_PA_FIR_MAX];
    dd_cf64 fir_out_hist[DD_PA_FIR_MAX];
    dd_cf64 *u_hist; /* hist_u samples, oldest first */
    double pth, strap;
    uint64_t t;      /* samples since reset (drift clock) */
    dd_rng rng;
    /* scratch, PA_BLOCK + history */
    dd_cf64 *s, *ext, *v;
    double *pw, *aext;
    dd_cf64 *row;
};

/* ---- names and defaults ---- */

static int find_kind(const char *name) {
    if (!name) return -1;
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(name, pa_models[k].name) == 0) return k;
    return -1;
}

static dd_status unknown_name(const char *name) {
    char list[256];
    size_t off = 0;
    for (int k = 0; k < K_COUNT; k++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", k ? ", " : "",
                                pa_models[k].name);
    return dd_error(DD_ERR_ARG, "pa: unknown model '%s' (valid: %s)", name ? name : "(null)",
                    list);
}

const dd_pa_model_info *dd_pa_list(size_t *count) {
    if (count) *count = K_COUNT;
    return pa_models;
}

static void set_fir(dd_cf64 *h, int *len, const dd_cf64 *taps, int n) {
    for (int i = 0; i < n; i++) h[i] = taps[i];
    *len = n;
}

dd_status dd_pa_params_default(const char *name, dd_pa_params *p) {
    int k = find_kind(name);
    if (k < 0) return unknown_name(name);
    if (!p) return dd_error(DD_ERR_ARG, "dd_pa_params_default: p is NULL");
    memset(p, 0, sizeof *p);
    p->fs = 800e6;
    p->nl = DD_PA_NL_RAPP;
    p->saleh = (dd_pa_saleh){2.1587, 1.1517, 4.0033, 9.1040};
    p->rapp = (dd_pa_rapp){1.0, 1.0, 2.0, 0.0, 1.0};
    p->ghorbani = (dd_pa_ghorbani){8.1081, 1.5413, 6.5202, -0.0718, 4.6645, 2.0965, 10.88, -0.003};
    p->cross_lag = 1;
    p->seed = 1;
    const dd_cf64 fin[3] = {1.0, 0.10 - 0.04 * I, -0.02 + 0.015 * I};
    const dd_cf64 fout[3] = {1.0, -0.06 + 0.03 * I, 0.015 * I};
    switch ((pa_kind)k) {
    case K_SALEH:
        p->nl = DD_PA_NL_SALEH;
        p->drive_rms = 0.3;
        break;
    case K_RAPP:
        p->drive_rms = 0.35;
        break;
    case K_GHORBANI:
        p->nl = DD_PA_NL_GHORBANI;
        p->drive_rms = 0.3;
        break;
    case K_MP_DING:
        p->drive_rms = 0.2; /* peak <= 0.75 for PAPR up to 11.5 dB */
        break;
    case K_MP_WARP:
        p->drive_rms = 0.25; /* peak <= 0.9 for PAPR up to 11 dB */
        break;
    case K_GMP:
        p->drive_rms = 0.0; /* a fitted model works on absolute levels */
        break;
    case K_WIENER:
        p->drive_rms = 0.35;
        p->rapp.ampm_alpha = REAL_AMPM_ALPHA;
        set_fir(p->fir_in, &p->fir_in_len, fin, 3);
        break;
    case K_HAMMERSTEIN:
        p->drive_rms = 0.35;
        p->rapp.ampm_alpha = REAL_AMPM_ALPHA;
        set_fir(p->fir_out, &p->fir_out_len, fout, 3);
        break;
    case K_WH:
        p->drive_rms = 0.35;
        p->rapp.ampm_alpha = REAL_AMPM_ALPHA;
        set_fir(p->fir_in, &p->fir_in_len, fin, 3);
        set_fir(p->fir_out, &p->fir_out_len, fout, 3);
        break;
    case K_REALISTIC: {
        /* docs/pa.md's realistic chain with the memory taps of both filters x3 (calibrated) */
        const dd_cf64 rin[3] = {1.0, 0.30 - 0.12 * I, -0.06 + 0.045 * I};
        const dd_cf64 rout[3] = {1.0, -0.18 + 0.09 * I, 0.045 * I};
        p->drive_rms = REAL_DRIVE_RMS;
        p->rapp.ampm_alpha = REAL_AMPM_ALPHA;
        p->rapp.ampm_beta = REAL_AMPM_BETA;
        set_fir(p->fir_in, &p->fir_in_len, rin, 3);
        set_fir(p->fir_out, &p->fir_out_len, rout, 3);
        p->cross_coef = 0.03 - 0.02 * I;
        p->cross_lag = 1;
        p->thermal_kappa = REAL_THERMAL_KAPPA;
        p->thermal_tau_s = 10e-6;
        p->trap_kappa = REAL_TRAP_KAPPA;
        p->trap_capture_s = 50e-9;
        p->trap_release_s = 2e-6;
        p->snr_db = 45.0;
        break;
    }
    default:
        break;
    }
    return DD_OK;
}

/* ---- checks ---- */

static int finite_c(dd_cf64 z) { return isfinite(creal(z)) && isfinite(cimag(z)); }

#define NEED(cond, ...)                                         \
    do {                                                        \
        if (!(cond)) return dd_error(DD_ERR_ARG, __VA_ARGS__);  \
    } while (0)

/* lo < v <= hi (open_lo) or lo <= v <= hi */
static dd_status in_range(const char *name, const char *field, double v, double lo, int open_lo,
                          double hi) {
    int ok = isfinite(v) && (open_lo ? v > lo : v >= lo) && v <= hi;
    if (!ok)
        return dd_error(DD_ERR_ARG, "pa '%s': %s = %g is out of range %c%g, %g]", name, field, v,
                        open_lo ? '(' : '[', lo, hi);
    return DD_OK;
}

static dd_status check_fir(const char *name, const char *field, const dd_cf64 *h, int len,
                           int allowed) {
    if (!allowed) {
        NEED(len == 0, "pa '%s': %s_len = %d but model '%s' has no %s filter (use wiener, "
             "hammerstein, wiener-hammerstein or realistic)", name, field, len, name, field);
        return DD_OK;
    }
    NEED(len >= 0 && len <= DD_PA_FIR_MAX, "pa '%s': %s_len = %d is out of range [0, %d]", name,
         field, len, DD_PA_FIR_MAX);
    double e = 0.0;
    for (int i = 0; i < len; i++) {
        NEED(finite_c(h[i]), "pa '%s': %s[%d] is not finite", name, field, i);
        e += creal(h[i]) * creal(h[i]) + cimag(h[i]) * cimag(h[i]);
    }
    NEED(len == 0 || e > 0.0, "pa '%s': %s is all zero", name, field);
    return DD_OK;
}

dd_status dd_pa_params_check(const char *name, const dd_pa_params *p) {
    int k = find_kind(name);
    if (k < 0) return unknown_name(name);
    NEED(p != NULL, "pa '%s': params is NULL", name);
    DD_TRY(in_range(name, "fs", p->fs, 0.0, 1, 1e12));
    DD_TRY(in_range(name, "drive_rms", p->drive_rms, 0.0, 0, 100.0));
    DD_TRY(in_range(name, "drive_db", p->drive_db, -100.0, 0, 60.0));
    DD_TRY(in_range(name, "out_gain_db", p->out_gain_db, -100.0, 0, 100.0));

    int uses_nl = !(k == K_MP_DING || k == K_MP_WARP || k == K_GMP);
    if (uses_nl) {
        dd_pa_nl want = k == K_SALEH ? DD_PA_NL_SALEH
                        : k == K_GHORBANI ? DD_PA_NL_GHORBANI
                        : k == K_RAPP ? DD_PA_NL_RAPP : p->nl;
        NEED(p->nl == DD_PA_NL_RAPP || p->nl == DD_PA_NL_SALEH || p->nl == DD_PA_NL_GHORBANI,
             "pa '%s': nl = %d is not a nonlinearity (0 rapp, 1 saleh, 2 ghorbani)", name,
             (int)p->nl);
        NEED(p->nl == want, "pa '%s': nl = %d does not match the model (use %d or another model)",
             name, (int)p->nl, (int)want);
        if (p->nl == DD_PA_NL_SALEH) {
            DD_TRY(in_range(name, "saleh.alpha_a", p->saleh.alpha_a, 0.0, 1, 100.0));
            DD_TRY(in_range(name, "saleh.beta_a", p->saleh.beta_a, 0.0, 0, 100.0));
            DD_TRY(in_range(name, "saleh.alpha_p", p->saleh.alpha_p, -100.0, 0, 100.0));
            DD_TRY(in_range(name, "saleh.beta_p", p->saleh.beta_p, 0.0, 0, 100.0));
        } else if (p->nl == DD_PA_NL_RAPP) {
            DD_TRY(in_range(name, "rapp.gain", p->rapp.gain, 0.0, 1, 1000.0));
            DD_TRY(in_range(name, "rapp.vsat", p->rapp.vsat, 0.0, 1, 1000.0));
            DD_TRY(in_range(name, "rapp.p", p->rapp.p, 0.0, 1, 50.0));
            DD_TRY(in_range(name, "rapp.ampm_alpha", p->rapp.ampm_alpha, -10.0, 0, 10.0));
            DD_TRY(in_range(name, "rapp.ampm_beta", p->rapp.ampm_beta, 0.0, 0, 1000.0));
        } else {
            const dd_pa_ghorbani *g = &p->ghorbani;
            DD_TRY(in_range(name, "ghorbani.x1", g->x1, -1000.0, 0, 1000.0));
            DD_TRY(in_range(name, "ghorbani.x2", g->x2, 0.0, 1, 20.0));
            DD_TRY(in_range(name, "ghorbani.x3", g->x3, 0.0, 0, 1000.0));
            DD_TRY(in_range(name, "ghorbani.x4", g->x4, -1000.0, 0, 1000.0));
            DD_TRY(in_range(name, "ghorbani.y1", g->y1, -1000.0, 0, 1000.0));
            DD_TRY(in_range(name, "ghorbani.y2", g->y2, 0.0, 1, 20.0));
            DD_TRY(in_range(name, "ghorbani.y3", g->y3, 0.0, 0, 1000.0));
            DD_TRY(in_range(name, "ghorbani.y4", g->y4, -1000.0, 0, 1000.0));
        }
        NEED(finite_c(p->cross_coef) && cabs(p->cross_coef) <= 100.0,
             "pa '%s': cross_coef is not finite or |cross_coef| > 100", name);
        NEED(p->cross_lag >= 0 && p->cross_lag <= DD_PA_CROSS_LAG_MAX,
             "pa '%s': cross_lag = %d is out of range [0, %d]", name, p->cross_lag,
             DD_PA_CROSS_LAG_MAX);
    } else {
        NEED(p->cross_coef == 0.0, "pa '%s': cross_coef must be 0 for a GMP model (put the "
             "term in the GMP)", name);
    }
    DD_TRY(check_fir(name, "fir_in", p->fir_in, p->fir_in_len,
                     k == K_WIENER || k == K_WH || k == K_REALISTIC));
    DD_TRY(check_fir(name, "fir_out", p->fir_out, p->fir_out_len,
                     k == K_HAMMERSTEIN || k == K_WH || k == K_REALISTIC));
    if (k == K_GMP) {
        NEED(p->gmp != NULL, "pa 'gmp': gmp is NULL (give a dd_gmp model)");
        dd_status st = dd_gmp_shape_check(&p->gmp->shape);
        if (st != DD_OK) return dd_error_prefix(st, "pa 'gmp': ");
        NEED(p->gmp->coef && p->gmp->ncoef == dd_gmp_ncoef(&p->gmp->shape),
             "pa 'gmp': gmp has ncoef = %zu, its shape needs %zu", p->gmp->ncoef,
             dd_gmp_ncoef(&p->gmp->shape));
        NEED(p->gmp->shape.kc == 0, "pa 'gmp': gmp shape has leading terms (kc = %d): a PA "
             "is causal, use kc = 0", p->gmp->shape.kc);
        for (size_t j = 0; j < p->gmp->ncoef; j++)
            NEED(finite_c(p->gmp->coef[j]), "pa 'gmp': gmp coefficient %zu is not finite", j);
    } else {
        NEED(p->gmp == NULL, "pa '%s': gmp must be NULL (only model 'gmp' takes user "
             "coefficients)", name);
    }
    DD_TRY(in_range(name, "thermal_kappa", p->thermal_kappa, 0.0, 0, 10.0));
    if (p->thermal_kappa > 0.0) DD_TRY(in_range(name, "thermal_tau_s", p->thermal_tau_s, 0.0, 1, 10.0));
    DD_TRY(in_range(name, "trap_kappa", p->trap_kappa, 0.0, 0, 10.0));
    if (p->trap_kappa > 0.0) {
        DD_TRY(in_range(name, "trap_capture_s", p->trap_capture_s, 0.0, 1, 1.0));
        DD_TRY(in_range(name, "trap_release_s", p->trap_release_s, p->trap_capture_s, 0, 10.0));
    }
    NEED(p->snr_db == 0.0 || p->snr_db == INFINITY || (p->snr_db > 0.0 && p->snr_db <= 200.0),
         "pa '%s': snr_db = %g is out of range: 0 or inf (off), or (0, 200]", name, p->snr_db);
    DD_TRY(in_range(name, "iq_amp_db", p->iq_amp_db, -6.0, 0, 6.0));
    DD_TRY(in_range(name, "iq_phase_deg", p->iq_phase_deg, -45.0, 0, 45.0));
    NEED(p->iq_at_input == 0 || p->iq_at_input == 1, "pa '%s': iq_at_input = %d must be 0 or 1",
         name, p->iq_at_input);
    DD_TRY(in_range(name, "drift_db_per_ms", p->drift_db_per_ms, -1000.0, 0, 1000.0));
    DD_TRY(in_range(name, "drift_deg_per_ms", p->drift_deg_per_ms, -1e5, 0, 1e5));
    return DD_OK;
}

/* ---- create / destroy ---- */

static double one_pole(double tau_s, double fs) { return -expm1(-1.0 / (tau_s * fs)); }

void dd_pa_destroy(dd_pa **pa) {
    if (!pa || !*pa) return;
    dd_pa *q = *pa;
    dd_gmp_free(&q->gmp);
    dd_free(q->u_hist);
    dd_free(q->s);
    dd_free(q->ext);
    dd_free(q->v);
    dd_free(q->pw);
    dd_free(q->aext);
    dd_free(q->row);
    dd_free(q);
    *pa = NULL;
}

void dd_pa_reset(dd_pa *pa) {
    if (!pa) return;
    memset(pa->fir_in_hist, 0, sizeof pa->fir_in_hist);
    memset(pa->fir_out_hist, 0, sizeof pa->fir_out_hist);
    if (pa->u_hist) memset(pa->u_hist, 0, (size_t)pa->hist_u * sizeof *pa->u_hist);
    pa->pth = pa->cal.calibrated ? pa->cal.p0 : 0.0;
    pa->strap = 0.0;
    pa->t = 0;
    dd_rng_seed(&pa->rng, pa->p.seed);
}

static dd_status build(pa_kind kind, const dd_pa_params *p, const dd_gmp *gmp_src, dd_pa **out) {
    dd_status st = DD_OK;
    dd_pa *pa = dd_calloc(1, sizeof *pa);
    if (!pa) return DD_ERR_NOMEM;
    pa->kind = kind;
    pa->p = *p;
    pa->p.gmp = NULL;
    pa->use_nl = !(kind == K_MP_DING || kind == K_MP_WARP || kind == K_GMP);
    if (kind == K_MP_DING || kind == K_MP_WARP) {
        int ding = kind == K_MP_DING;
        dd_gmp_shape s = dd_gmp_shape_mp(ding ? 5 : 7, ding ? 3 : 4, 1);
        dd_cf64 c[16];
        int nc = ding ? 9 : 16;
        for (int i = 0; i < nc; i++)
            c[i] = ding ? ding_coef[i][0] + ding_coef[i][1] * I : warp_coef[i][0] + warp_coef[i][1] * I;
        st = dd_gmp_create(&s, c, &pa->gmp);
    } else if (gmp_src) {
        st = dd_gmp_copy(gmp_src, &pa->gmp);
    }
    if (st != DD_OK) goto fail;
    pa->p.gmp = pa->gmp;

    pa->hist_u = pa->use_nl ? p->cross_lag : dd_gmp_max_lag(&pa->gmp->shape);
    size_t ext_len = (size_t)PA_BLOCK + (size_t)(pa->hist_u > DD_PA_FIR_MAX ? pa->hist_u : DD_PA_FIR_MAX);
    pa->u_hist = dd_calloc((size_t)(pa->hist_u > 0 ? pa->hist_u : 1), sizeof *pa->u_hist);
    pa->s = dd_calloc(PA_BLOCK, sizeof *pa->s);
    pa->v = dd_calloc(PA_BLOCK, sizeof *pa->v);
    pa->pw = dd_calloc(PA_BLOCK, sizeof *pa->pw);
    pa->ext = dd_calloc(ext_len, sizeof *pa->ext);
    pa->aext = dd_calloc(ext_len, sizeof *pa->aext);
    pa->row = dd_calloc(pa->gmp ? pa->gmp->ncoef : 1, sizeof *pa->row);
    if (!pa->u_hist || !pa->s || !pa->v || !pa->pw || !pa->ext || !pa->aext || !pa->row) {
        st = DD_ERR_NOMEM;
        goto fail;
    }

    pa->noise_on = p->snr_db > 0.0 && isfinite(p->snr_db);
    pa->out_gain = pow(10.0, p->out_gain_db / 20.0);
    {
        double g = pow(10.0, p->iq_amp_db / 20.0), ph = p->iq_phase_deg * M_PI / 180.0;
        pa->iq_mu = (1.0 + g * cexp(-I * ph)) / 2.0;
        pa->iq_nu = (1.0 - g * cexp(I * ph)) / 2.0;
        pa->iq_on = p->iq_amp_db != 0.0 || p->iq_phase_deg != 0.0;
    }
    pa->l_th = p->thermal_kappa > 0.0 ? one_pole(p->thermal_tau_s, p->fs) : 0.0;
    pa->l_cap = p->trap_kappa > 0.0 ? one_pole(p->trap_capture_s, p->fs) : 0.0;
    pa->l_rel = p->trap_kappa > 0.0 ? one_pole(p->trap_release_s, p->fs) : 0.0;
    dd_pa_reset(pa);
    *out = pa;
    return DD_OK;
fail:
    dd_pa_destroy(&pa);
    return st;
}

dd_status dd_pa_create(const char *name, const dd_pa_params *p, dd_pa **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_pa_create: out is NULL");
    *out = NULL;
    int k = find_kind(name);
    if (k < 0) return unknown_name(name);
    dd_pa_params def = {0};
    if (!p) {
        DD_TRY(dd_pa_params_default(name, &def));
        p = &def;
    }
    DD_TRY(dd_pa_params_check(name, p));
    return build((pa_kind)k, p, p->gmp, out);
}

dd_status dd_pa_clone(const dd_pa *src, int keep_noise, dd_pa **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_pa_clone: out is NULL");
    *out = NULL;
    if (!src) return dd_error(DD_ERR_ARG, "dd_pa_clone: src is NULL");
    dd_pa_params p = src->p;
    p.gmp = src->kind == K_GMP ? src->gmp : NULL;
    dd_pa *c = NULL;
    DD_TRY(build(src->kind, &p, p.gmp, &c));
    c->cal = src->cal;
    c->noise_on = keep_noise ? src->noise_on : 0;
    dd_pa_reset(c);
    *out = c;
    return DD_OK;
}

void dd_pa_set_noise(dd_pa *pa, int on) {
    if (!pa) return;
    pa->noise_on = on && pa->p.snr_db > 0.0 && isfinite(pa->p.snr_db);
}

const char *dd_pa_name(const dd_pa *pa) { return pa ? pa_models[pa->kind].name : ""; }
const dd_pa_params *dd_pa_get_params(const dd_pa *pa) { return pa ? &pa->p : NULL; }

void dd_pa_get_calib(const dd_pa *pa, dd_pa_calib *c) {
    if (!c) return;
    if (!pa) {
        memset(c, 0, sizeof *c);
        return;
    }
    *c = pa->cal;
}

dd_status dd_pa_set_calib(dd_pa *pa, const dd_pa_calib *c) {
    if (!pa || !c) return dd_error(DD_ERR_ARG, "dd_pa_set_calib: NULL argument");
    if (!(isfinite(c->in_gain) && c->in_gain > 0.0))
        return dd_error(DD_ERR_ARG, "dd_pa_set_calib: in_gain = %g must be > 0", c->in_gain);
    if (!(isfinite(c->p0) && c->p0 >= 0.0))
        return dd_error(DD_ERR_ARG, "dd_pa_set_calib: p0 = %g must be >= 0", c->p0);
    if (!(isfinite(c->out_power) && c->out_power >= 0.0))
        return dd_error(DD_ERR_ARG, "dd_pa_set_calib: out_power = %g must be >= 0", c->out_power);
    if (!(isfinite(c->noise_var) && c->noise_var >= 0.0))
        return dd_error(DD_ERR_ARG, "dd_pa_set_calib: noise_var = %g must be >= 0", c->noise_var);
    pa->cal = *c;
    pa->cal.calibrated = 1;
    dd_pa_reset(pa);
    return DD_OK;
}

/* ---- the chain ---- */

static dd_cf64 nl_eval(const dd_pa_params *p, dd_cf64 u) {
    double r = cabs(u);
    if (r == 0.0) return 0.0;
    dd_cf64 ph = u / r;
    double a, phi;
    switch (p->nl) {
    case DD_PA_NL_SALEH:
        a = p->saleh.alpha_a * r / (1.0 + p->saleh.beta_a * r * r);
        phi = p->saleh.alpha_p * r * r / (1.0 + p->saleh.beta_p * r * r);
        break;
    case DD_PA_NL_GHORBANI: {
        const dd_pa_ghorbani *g = &p->ghorbani;
        double rx = pow(r, g->x2), ry = pow(r, g->y2);
        a = g->x1 * rx / (1.0 + g->x3 * rx) + g->x4 * r;
        phi = g->y1 * ry / (1.0 + g->y3 * ry) + g->y4 * r;
        break;
    }
    default: {
        const dd_pa_rapp *q = &p->rapp;
        /* A = vsat t / (1 + t^2p)^(1/2p), t = G r / vsat; written for t > 1 so that
         * t^2p cannot overflow (a huge input saturates at vsat instead of giving 0) */
        double t = q->gain * r / q->vsat, e = 2.0 * q->p;
        a = t <= 1.0 ? q->vsat * t / pow(1.0 + pow(t, e), 1.0 / e)
                     : q->vsat / pow(pow(t, -e) + 1.0, 1.0 / e);
        phi = q->ampm_alpha * r * r / (1.0 + q->ampm_beta * r * r);
        break;
    }
    }
    return a * ph * cexp(I * phi);
}

/* In-place FIR on buf[0..b-1] with history hist[0..len-2] (oldest first). */
static void fir_block(const dd_cf64 *h, int len, dd_cf64 *hist, dd_cf64 *ext, dd_cf64 *buf,
                      size_t b) {
    if (len <= 0) return;
    size_t H = (size_t)(len - 1);
    for (size_t i = 0; i < H; i++) ext[i] = hist[i];
    for (size_t i = 0; i < b; i++) ext[H + i] = buf[i];
    for (size_t i = 0; i < b; i++) {
        dd_cf64 acc = 0.0;
        for (size_t k = 0; k < (size_t)len; k++) acc += h[k] * ext[H + i - k];
        buf[i] = acc;
    }
    for (size_t i = 0; i < H; i++) hist[i] = ext[b + i];
}

static void iq_block(const dd_pa *pa, dd_cf64 *buf, size_t b) {
    for (size_t i = 0; i < b; i++) buf[i] = pa->iq_mu * buf[i] + pa->iq_nu * conj(buf[i]);
}

/* Runs the noiseless chain on x into y, advancing the state. */
static void run_chain(dd_pa *pa, const dd_cf32 *x, dd_cf32 *y, size_t n) {
    const dd_pa_params *p = &pa->p;
    const double g_in = pa->cal.in_gain;
    const int ltm = p->thermal_kappa > 0.0 || p->trap_kappa > 0.0;
    const int drift = p->drift_db_per_ms != 0.0 || p->drift_deg_per_ms != 0.0;
    const size_t H = (size_t)pa->hist_u;
    for (size_t off = 0; off < n; off += PA_BLOCK) {
        size_t b = n - off < PA_BLOCK ? n - off : PA_BLOCK;
        dd_cf64 *s = pa->s, *v = pa->v, *ext = pa->ext;
        for (size_t i = 0; i < b; i++) {
            dd_cf64 xi = (double)crealf(x[off + i]) + (double)cimagf(x[off + i]) * I;
            s[i] = g_in * xi;
            pa->pw[i] = creal(s[i]) * creal(s[i]) + cimag(s[i]) * cimag(s[i]);
        }
        if (pa->iq_on && p->iq_at_input) iq_block(pa, s, b);
        fir_block(p->fir_in, p->fir_in_len, pa->fir_in_hist, ext, s, b);
        /* core: s is u; history of u in u_hist */
        for (size_t i = 0; i < H; i++) ext[i] = pa->u_hist[i];
        for (size_t i = 0; i < b; i++) ext[H + i] = s[i];
        if (pa->use_nl) {
            for (size_t i = 0; i < b; i++) {
                dd_cf64 val = nl_eval(p, s[i]);
                if (p->cross_coef != 0.0) {
                    dd_cf64 lagged = ext[H + i - (size_t)p->cross_lag];
                    double e2 = creal(lagged) * creal(lagged) + cimag(lagged) * cimag(lagged);
                    val += p->cross_coef * s[i] * e2;
                }
                v[i] = val;
            }
        } else {
            size_t len = H + b;
            for (size_t i = 0; i < len; i++) pa->aext[i] = cabs(ext[i]);
            for (size_t i = 0; i < b; i++)
                v[i] = dd_gmp_eval_at(pa->gmp, ext, pa->aext, (ptrdiff_t)(H + i), (ptrdiff_t)len,
                                      pa->row);
        }
        for (size_t i = 0; i < H; i++) pa->u_hist[i] = ext[b + i];
        if (ltm) {
            for (size_t i = 0; i < b; i++) {
                double pwi = pa->pw[i];
                pa->pth += pa->l_th * (pwi - pa->pth);
                pa->strap += (pwi > pa->strap ? pa->l_cap : pa->l_rel) * (pwi - pa->strap);
                double g = 1.0 - p->thermal_kappa * (pa->pth - pa->cal.p0) - p->trap_kappa * pa->strap;
                v[i] *= g > 0.0 ? g : 0.0;
            }
        }
        fir_block(p->fir_out, p->fir_out_len, pa->fir_out_hist, ext, v, b);
        for (size_t i = 0; i < b; i++) {
            dd_cf64 g = pa->out_gain;
            if (drift) {
                double t_ms = (double)(pa->t + i) / p->fs * 1e3;
                g *= cexp(M_LN10 / 20.0 * p->drift_db_per_ms * t_ms +
                          I * (p->drift_deg_per_ms * M_PI / 180.0) * t_ms);
            }
            v[i] *= g;
        }
        if (pa->iq_on && !p->iq_at_input) iq_block(pa, v, b);
        for (size_t i = 0; i < b; i++) y[off + i] = (float)creal(v[i]) + (float)cimag(v[i]) * I;
        pa->t += b;
    }
}

static void add_noise(dd_pa *pa, dd_cf32 *y, size_t n) {
    double sd = sqrt(pa->cal.noise_var / 2.0);
    for (size_t i = 0; i < n; i++) {
        double re = crealf(y[i]) + sd * dd_rng_normal(&pa->rng);
        double im = cimagf(y[i]) + sd * dd_rng_normal(&pa->rng);
        y[i] = (float)re + (float)im * I;
    }
}

static double mean_power32(const dd_cf32 *y, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double re = crealf(y[i]), im = cimagf(y[i]);
        s += re * re + im * im;
    }
    return n ? s / (double)n : 0.0;
}

/* Sets in_gain and p0 from x; does not touch out_power / noise_var. */
static dd_status calib_input(dd_pa *pa, const char *fn, const dd_cf32 *x, size_t n) {
    double px = mean_power32(x, n);
    double g = pow(10.0, pa->p.drive_db / 20.0);
    if (pa->p.drive_rms > 0.0) {
        if (!(px > 0.0))
            return dd_error(DD_ERR_RANGE, "%s: cannot calibrate the RMS drive (drive_rms = %g) on "
                            "an all-zero input", fn, pa->p.drive_rms);
        g *= pa->p.drive_rms / sqrt(px);
    }
    pa->cal.in_gain = g;
    pa->cal.p0 = g * g * px;
    return DD_OK;
}

static void calib_noise(dd_pa *pa, double out_power) {
    pa->cal.out_power = out_power;
    double snr = pa->p.snr_db;
    pa->cal.noise_var = (snr > 0.0 && isfinite(snr)) ? out_power / pow(10.0, snr / 10.0) : 0.0;
}

static dd_status check_finite32(const char *fn, const dd_cf32 *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(crealf(x[i])) || !isfinite(cimagf(x[i])))
            return dd_error(DD_ERR_RANGE, "%s: x[%zu] is not finite", fn, i);
    return DD_OK;
}

dd_status dd_pa_apply(dd_pa *pa, const dd_cf32 *x, dd_cf32 *y, size_t n) {
    if (!pa) return dd_error(DD_ERR_ARG, "dd_pa_apply: pa is NULL");
    if (n == 0) return DD_OK;
    if (!x || !y) return dd_error(DD_ERR_ARG, "dd_pa_apply: x or y is NULL");
    DD_TRY(check_finite32("dd_pa_apply", x, n));
    int calibrating = !pa->cal.calibrated;
    if (calibrating) {
        DD_TRY(calib_input(pa, "dd_pa_apply", x, n));
        pa->cal.calibrated = 1;
        dd_pa_reset(pa);
    }
    run_chain(pa, x, y, n);
    if (calibrating) calib_noise(pa, mean_power32(y, n));
    if (pa->noise_on && pa->cal.noise_var > 0.0) add_noise(pa, y, n);
    return DD_OK;
}

dd_status dd_pa_calibrate(dd_pa *pa, const dd_cf32 *x, size_t n) {
    if (!pa) return dd_error(DD_ERR_ARG, "dd_pa_calibrate: pa is NULL");
    if (!x || n == 0) return dd_error(DD_ERR_ARG, "dd_pa_calibrate: empty input");
    DD_TRY(check_finite32("dd_pa_calibrate", x, n));
    dd_cf32 *tmp = dd_calloc(n, sizeof *tmp);
    if (!tmp) return DD_ERR_NOMEM;
    dd_status st = calib_input(pa, "dd_pa_calibrate", x, n);
    if (st == DD_OK) {
        pa->cal.calibrated = 1;
        dd_pa_reset(pa);
        run_chain(pa, x, tmp, n);
        calib_noise(pa, mean_power32(tmp, n));
        dd_pa_reset(pa);
    }
    dd_free(tmp);
    return st;
}

/* ---- description ---- */

typedef struct {
    char *buf;
    size_t cap, len;
} sbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_add(sbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = sb->buf && sb->len < sb->cap ? sb->buf + sb->len : NULL;
    size_t room = dst ? sb->cap - sb->len : 0;
    int w = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (w > 0) sb->len += (size_t)w;
}

static void sb_fir(sbuf *sb, const char *name, const dd_cf64 *h, int len) {
    sb_add(sb, "  %s = [", name);
    for (int i = 0; i < len; i++)
        sb_add(sb, "%s%.4g%+.4gj", i ? ", " : "", creal(h[i]), cimag(h[i]));
    sb_add(sb, "]\n");
}

size_t dd_pa_describe(const dd_pa *pa, char *buf, size_t cap) {
    sbuf sb = {buf, cap, 0};
    if (buf && cap) buf[0] = '\0';
    if (!pa) return 0;
    const dd_pa_params *p = &pa->p;
    sb_add(&sb, "pa model '%s': %s\n", pa_models[pa->kind].name, pa_models[pa->kind].summary);
    sb_add(&sb, "  fs = %g Hz, ", p->fs);
    if (p->drive_rms > 0.0) sb_add(&sb, "drive: RMS %g at the model input", p->drive_rms);
    else sb_add(&sb, "drive: fixed input gain");
    sb_add(&sb, ", drive_db = %g, out_gain_db = %g\n", p->drive_db, p->out_gain_db);
    if (p->fir_in_len > 0) sb_fir(&sb, "fir_in", p->fir_in, p->fir_in_len);
    if (pa->use_nl) {
        if (p->nl == DD_PA_NL_SALEH)
            sb_add(&sb, "  saleh: alpha_a %g, beta_a %g, alpha_p %g rad, beta_p %g\n",
                   p->saleh.alpha_a, p->saleh.beta_a, p->saleh.alpha_p, p->saleh.beta_p);
        else if (p->nl == DD_PA_NL_GHORBANI)
            sb_add(&sb, "  ghorbani: x = %g %g %g %g, y = %g %g %g %g\n", p->ghorbani.x1,
                   p->ghorbani.x2, p->ghorbani.x3, p->ghorbani.x4, p->ghorbani.y1, p->ghorbani.y2,
                   p->ghorbani.y3, p->ghorbani.y4);
        else
            sb_add(&sb, "  rapp: G %g, vsat %g, p %g, AM/PM alpha %g rad, beta %g\n", p->rapp.gain,
                   p->rapp.vsat, p->rapp.p, p->rapp.ampm_alpha, p->rapp.ampm_beta);
        if (p->cross_coef != 0.0)
            sb_add(&sb, "  cross term: (%.4g%+.4gj) u(n)|u(n-%d)|^2\n", creal(p->cross_coef),
                   cimag(p->cross_coef), p->cross_lag);
    } else {
        const dd_gmp_shape *s = &pa->gmp->shape;
        sb_add(&sb, "  gmp: ka %d la %d kb %d lb %d mb %d%s, %zu coefficients\n", s->ka, s->la,
               s->kb, s->lb, s->mb, s->odd_only ? ", odd orders only" : "", pa->gmp->ncoef);
    }
    if (p->thermal_kappa > 0.0)
        sb_add(&sb, "  thermal: kappa %g, tau %g s\n", p->thermal_kappa, p->thermal_tau_s);
    if (p->trap_kappa > 0.0)
        sb_add(&sb, "  trapping: kappa %g, capture %g s, release %g s\n", p->trap_kappa,
               p->trap_capture_s, p->trap_release_s);
    if (p->fir_out_len > 0) sb_fir(&sb, "fir_out", p->fir_out, p->fir_out_len);
    if (p->drift_db_per_ms != 0.0 || p->drift_deg_per_ms != 0.0)
        sb_add(&sb, "  drift: %g dB/ms, %g deg/ms\n", p->drift_db_per_ms, p->drift_deg_per_ms);
    if (pa->iq_on)
        sb_add(&sb, "  IQ imbalance (%s): %g dB, %g deg\n", p->iq_at_input ? "modulator" : "receiver",
               p->iq_amp_db, p->iq_phase_deg);
    if (p->snr_db > 0.0 && isfinite(p->snr_db))
        sb_add(&sb, "  noise: SNR %g dB, seed %llu%s\n", p->snr_db, (unsigned long long)p->seed,
               pa->noise_on ? "" : " (switched off)");
    else
        sb_add(&sb, "  noise: off\n");
    if (pa->cal.calibrated)
        sb_add(&sb, "  calibration: input gain %.6g, P0 %.6g, output power %.6g, noise variance %.4g\n",
               pa->cal.in_gain, pa->cal.p0, pa->cal.out_power, pa->cal.noise_var);
    else
        sb_add(&sb, "  calibration: on the first dd_pa_apply()\n");
    return sb.len;
}
