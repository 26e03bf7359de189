/* 5G NR-like OFDM test-signal generator: configuration, presets, resource layout,
 * QAM symbols, CP-OFDM with WOLA, the frequency-domain band-limiting mask and
 * iterative clip-and-filter crest-factor reduction. The demodulating EVM and the
 * scaling helper are in ofdm_evm.c. Formulas and numbers: docs/signals.md. */
#include "distdpd/ofdm.h"

#include <complex.h>
#include <math.h>
#include <string.h>

#include "dsp/ofdm_fft.h"
#include "dsp/ofdm_internal.h"

#define MAX_SAMPLES ((size_t)1 << 27) /* frame length limit (1 GiB as float32 I/Q) */
#define MAX_FFT ((size_t)1 << 20)

/* 3GPP TS 38.104 table 5.3.2-1 (FR1, 15/30/60 kHz) and TS 38.101-2 / 38.104 FR2
 * (60 kHz at 200 MHz, 120 kHz): maximum transmission bandwidth configuration N_RB. */
static const struct {
    double scs_khz, bw_mhz;
    int nrb;
} nrb_table[] = {
    {15, 5, 25},    {15, 10, 52},   {15, 15, 79},   {15, 20, 106},  {15, 25, 133},
    {15, 30, 160},  {15, 35, 188},  {15, 40, 216},  {15, 45, 242},  {15, 50, 270},
    {30, 5, 11},    {30, 10, 24},   {30, 15, 38},   {30, 20, 51},   {30, 25, 65},
    {30, 30, 78},   {30, 35, 92},   {30, 40, 106},  {30, 45, 119},  {30, 50, 133},
    {30, 60, 162},  {30, 70, 189},  {30, 80, 217},  {30, 90, 245},  {30, 100, 273},
    {60, 10, 11},   {60, 15, 18},   {60, 20, 24},   {60, 25, 31},   {60, 30, 38},
    {60, 35, 44},   {60, 40, 51},   {60, 45, 58},   {60, 50, 65},   {60, 60, 79},
    {60, 70, 93},   {60, 80, 107},  {60, 90, 121},  {60, 100, 135}, {60, 200, 264},
    {120, 50, 32},  {120, 100, 66}, {120, 200, 132}, {120, 400, 264},
};

static int table_nrb(double scs, double bw) {
    for (size_t i = 0; i < sizeof nrb_table / sizeof nrb_table[0]; i++)
        if (fabs(nrb_table[i].scs_khz * 1e3 - scs) < 1e-3 &&
            fabs(nrb_table[i].bw_mhz * 1e6 - bw) < 1.0)
            return nrb_table[i].nrb;
    return 0;
}

/* Everything derived from a configuration. */
typedef struct {
    size_t N;         /* FFT size */
    int mu;           /* numerology, scs = 15 kHz * 2^mu */
    int n_rb;         /* resolved */
    double spacing;   /* resolved carrier spacing, Hz */
    double occ;       /* n_rb * 12 * scs */
    int cp_normal;    /* CP of ordinary symbols */
    int cp_ext;       /* extra CP of the first symbol of each 0.5 ms (0 for cp_len) */
    int sym_per_half; /* symbols per 0.5 ms: 7 * 2^mu */
    int cp_min;       /* shortest CP */
    int wola;         /* WOLA ramp, samples */
    size_t n;         /* frame length */
    int centre[DD_OFDM_MAX_CARRIERS];
    int kmin, kmax;   /* lowest / highest active sub-carrier */
} layout_t;

static int symbol_cp(const layout_t *L, int s) {
    return L->cp_normal + ((s % L->sym_per_half) == 0 ? L->cp_ext : 0);
}

#define ARGERR(...) dd_error(DD_ERR_ARG, __VA_ARGS__)

/* Validates cfg and derives the layout; every message names the field. */
static dd_status make_layout(const dd_ofdm_cfg *c, layout_t *L) {
    memset(L, 0, sizeof *L);
    if (!c) return ARGERR("dd_ofdm_cfg: cfg is NULL");
    if (!(isfinite(c->fs) && c->fs > 0))
        return ARGERR("dd_ofdm_cfg.fs = %g: must be a finite sample rate > 0 Hz", c->fs);
    int mu = -1;
    for (int m = 0; m <= 4; m++)
        if (fabs(c->scs - 15e3 * (double)(1 << m)) < 1e-6) mu = m;
    if (mu < 0)
        return ARGERR("dd_ofdm_cfg.scs = %g Hz: must be 15e3, 30e3, 60e3, 120e3 or 240e3",
                      c->scs);
    L->mu = mu;
    double r = c->fs / c->scs;
    double rn = floor(r + 0.5);
    if (fabs(r - rn) > 1e-9 * r)
        return ARGERR("dd_ofdm_cfg.fs / dd_ofdm_cfg.scs = %.9g Hz / %.9g Hz = %.6f is not an "
                      "integer FFT size",
                      c->fs, c->scs, r);
    if (rn < 64 || rn > (double)MAX_FFT)
        return ARGERR("dd_ofdm_cfg.fs / dd_ofdm_cfg.scs = %.9g Hz / %.9g Hz = FFT size %.0f, "
                      "outside 64..%zu",
                      c->fs, c->scs, rn, MAX_FFT);
    size_t N = (size_t)rn;
    L->N = N;
    if (c->n_carriers < 1 || c->n_carriers > DD_OFDM_MAX_CARRIERS)
        return ARGERR("dd_ofdm_cfg.n_carriers = %d: must be 1..%d", c->n_carriers,
                      DD_OFDM_MAX_CARRIERS);
    if (!(isfinite(c->carrier_bw) && c->carrier_bw > 0))
        return ARGERR("dd_ofdm_cfg.carrier_bw = %g: must be a finite bandwidth > 0 Hz",
                      c->carrier_bw);
    if (c->n_rb < 0 || c->n_rb > 275)
        return ARGERR("dd_ofdm_cfg.n_rb = %d: must be 0 (3GPP maximum) or 1..275", c->n_rb);
    L->n_rb = c->n_rb;
    if (L->n_rb == 0) {
        L->n_rb = table_nrb(c->scs, c->carrier_bw);
        if (L->n_rb == 0)
            return ARGERR("dd_ofdm_cfg.n_rb = 0 (3GPP maximum): no table entry for "
                          "carrier_bw = %g MHz at scs = %g kHz; set n_rb explicitly",
                          c->carrier_bw / 1e6, c->scs / 1e3);
    }
    L->occ = (double)L->n_rb * 12.0 * c->scs;
    if (L->occ > c->carrier_bw * (1 + 1e-9))
        return ARGERR("dd_ofdm_cfg.n_rb = %d: occupies %g MHz (n_rb * 12 * scs), more than "
                      "carrier_bw = %g MHz",
                      L->n_rb, L->occ / 1e6, c->carrier_bw / 1e6);
    if (!(isfinite(c->carrier_spacing) && c->carrier_spacing >= 0))
        return ARGERR("dd_ofdm_cfg.carrier_spacing = %g: must be 0 (= carrier_bw) or a "
                      "spacing in Hz",
                      c->carrier_spacing);
    L->spacing = c->carrier_spacing > 0 ? c->carrier_spacing : c->carrier_bw;
    if (L->spacing < L->occ * (1 - 1e-9))
        return ARGERR("dd_ofdm_cfg.carrier_spacing = %g MHz: smaller than the occupied "
                      "bandwidth n_rb * 12 * scs = %g MHz, carriers would overlap",
                      L->spacing / 1e6, L->occ / 1e6);
    /* Carrier centres around DC on the sub-carrier grid; sub-carriers centre + [-6 n_rb,
     * 6 n_rb - 1] as in NR (the centre sub-carrier is active). */
    int half = 6 * L->n_rb;
    L->kmin = 0;
    L->kmax = 0;
    for (int k = 0; k < c->n_carriers; k++) {
        double fc = ((double)k - (double)(c->n_carriers - 1) / 2.0) * L->spacing;
        L->centre[k] = (int)lround(fc / c->scs);
        if (k == 0) L->kmin = L->centre[k] - half;
        L->kmax = L->centre[k] + half - 1;
    }
    if (L->kmin <= -(long)(N / 2) || L->kmax >= (long)(N / 2))
        return ARGERR("dd_ofdm_cfg.n_rb = %d: %d carrier(s) occupy sub-carriers %d..%d "
                      "(%g MHz), which does not fit in fs = %g MHz (N = %zu, usable "
                      "%ld..%ld)",
                      L->n_rb, c->n_carriers, L->kmin, L->kmax,
                      (double)(L->kmax - L->kmin + 1) * c->scs / 1e6, c->fs / 1e6, N,
                      -(long)(N / 2) + 1, (long)(N / 2) - 1);
    if (c->qam != 4 && c->qam != 16 && c->qam != 64 && c->qam != 256 && c->qam != 1024)
        return ARGERR("dd_ofdm_cfg.qam = %d: must be 4, 16, 64, 256 or 1024", c->qam);
    if (c->n_symbols < 1 || c->n_symbols > 100000)
        return ARGERR("dd_ofdm_cfg.n_symbols = %d: must be 1..100000", c->n_symbols);
    L->sym_per_half = 7 << mu;
    if (c->cp_len < 0 || (size_t)c->cp_len >= N)
        return ARGERR("dd_ofdm_cfg.cp_len = %d: must be 0 (NR normal CP) or 1..%zu",
                      c->cp_len, N - 1);
    if (c->cp_len == 0) {
        L->cp_normal = (int)((144 * N + 1024) / 2048);
        L->cp_ext = (int)((16 * ((size_t)1 << mu) * N + 1024) / 2048);
    } else {
        L->cp_normal = c->cp_len;
        L->cp_ext = 0;
    }
    L->cp_min = L->cp_normal;
    if (L->cp_min < 1)
        return ARGERR("dd_ofdm_cfg.fs = %g: the NR CP rounds to 0 samples at N = %zu",
                      c->fs, N);
    if (!(isfinite(c->wola_frac) && c->wola_frac >= 0 && c->wola_frac <= 0.5))
        return ARGERR("dd_ofdm_cfg.wola_frac = %g: must be 0..0.5", c->wola_frac);
    L->wola = (int)floor(c->wola_frac * L->cp_min); /* <= cp_min / 2 */
    if (c->band_limit != 0 && c->band_limit != 1)
        return ARGERR("dd_ofdm_cfg.band_limit = %d: must be 0 or 1", c->band_limit);
    if (!(isfinite(c->papr_target_db) &&
          (c->papr_target_db == 0 || (c->papr_target_db >= 3 && c->papr_target_db <= 20))))
        return ARGERR("dd_ofdm_cfg.papr_target_db = %g: must be 0 (off) or 3..20 dB",
                      c->papr_target_db);
    if (c->cfr_iters < 1 || c->cfr_iters > 100)
        return ARGERR("dd_ofdm_cfg.cfr_iters = %d: must be 1..100", c->cfr_iters);
    size_t n = 0;
    for (int s = 0; s < c->n_symbols; s++) {
        n += N + (size_t)symbol_cp(L, s);
        if (n > MAX_SAMPLES)
            return ARGERR("dd_ofdm_cfg.n_symbols = %d: the frame would exceed %zu samples",
                          c->n_symbols, MAX_SAMPLES);
    }
    L->n = n;
    return DD_OK;
}

dd_status dd_ofdm_cfg_validate(const dd_ofdm_cfg *cfg) {
    layout_t L;
    return make_layout(cfg, &L);
}

dd_status dd_ofdm_cfg_default(dd_ofdm_cfg *cfg, const char *preset) {
    if (!cfg) return ARGERR("dd_ofdm_cfg_default: cfg is NULL");
    memset(cfg, 0, sizeof *cfg);
    cfg->fs = 92.16e6;
    cfg->scs = 30e3;
    cfg->n_carriers = 1;
    cfg->carrier_bw = 20e6;
    cfg->n_rb = 0;
    cfg->carrier_spacing = 0;
    cfg->qam = 256;
    cfg->n_symbols = 28;
    cfg->cp_len = 0;
    cfg->wola_frac = 0.25;
    cfg->band_limit = 1;
    cfg->papr_target_db = 0;
    cfg->cfr_iters = 4;
    cfg->seed = 1;
    if (!preset || !strcmp(preset, "default") || !strcmp(preset, "1x20")) return DD_OK;
    if (!strcmp(preset, "1x100")) {
        cfg->fs = 491.52e6;
        cfg->carrier_bw = 100e6;
        cfg->n_symbols = 14;
    } else if (!strcmp(preset, "2x100")) {
        cfg->fs = 983.04e6;
        cfg->n_carriers = 2;
        cfg->carrier_bw = 100e6;
        cfg->n_symbols = 14;
    } else if (!strcmp(preset, "5x40")) {
        cfg->fs = 983.04e6;
        cfg->n_carriers = 5;
        cfg->carrier_bw = 40e6;
        cfg->n_symbols = 14;
    } else if (!strcmp(preset, "10x20")) {
        cfg->fs = 983.04e6;
        cfg->n_carriers = 10;
        cfg->carrier_bw = 20e6;
        cfg->n_symbols = 14;
    } else {
        return ARGERR("unknown OFDM preset '%s' (known: default, 1x20, 1x100, 2x100, 5x40, "
                      "10x20)",
                      preset);
    }
    return DD_OK;
}

dd_status dd_ofdm_spec(const dd_ofdm_cfg *cfg, dd_spec *spec) {
    layout_t L;
    if (!spec) return ARGERR("dd_ofdm_spec: spec is NULL");
    DD_TRY(make_layout(cfg, &L));
    dd_spec_default(spec);
    spec->fs = cfg->fs;
    spec->bw_main = cfg->n_carriers * L.spacing;
    spec->bw_sub = L.spacing;
    spec->n_sub = cfg->n_carriers;
    spec->nperseg = L.N;
    spec->bw_occupied = (double)(L.kmax - L.kmin + 1) * cfg->scs;
    return DD_OK;
}

/* The band-limiting mask over the frame's n-point FFT (bin j at signed frequency
 * (j or j - n) * fs / n): per carrier 1 up to `margin` beyond the occupied edges, a
 * raised-cosine roll-off over `trans`, 0 beyond; the maximum over carriers. margin and
 * trans come from the guard band g = (spacing - occupied) / 2:
 * margin = min(0.4 g, 16 scs), trans = clamp(0.95 g - margin, 2 scs, 16 scs). */
static void make_mask(const dd_ofdm_cfg *c, const layout_t *L, size_t n, double *mask) {
    double scs = c->scs;
    double g = (L->spacing - L->occ) / 2;
    if (g < 0) g = 0;
    double margin = fmin(0.4 * g, 16 * scs);
    double trans = fmin(fmax(0.95 * g - margin, 2 * scs), 16 * scs);
    int half = 6 * L->n_rb;
    for (size_t j = 0; j < n; j++) {
        double sj = j < (n + 1) / 2 ? (double)j : (double)j - (double)n;
        double f = sj * c->fs / (double)n, m = 0;
        for (int k = 0; k < c->n_carriers; k++) {
            double lo = ((double)(L->centre[k] - half) - 0.5) * scs;
            double hi = ((double)(L->centre[k] + half - 1) + 0.5) * scs;
            double d = fmax(lo - f, f - hi) - margin;
            double v = d <= 0 ? 1.0 : d >= trans ? 0.0 : 0.5 + 0.5 * cos(M_PI * d / trans);
            if (v > m) m = v;
        }
        mask[j] = m;
    }
}

/* x <- IFFT(mask .* FFT(x)) / n, circular over the frame. */
static void apply_mask(dd_ofdm_fft *P, dd_cf64 *x, const double *mask, size_t n) {
    dd_ofdm_fft_exec(P, x, 0);
    double inv = 1.0 / (double)n;
    for (size_t j = 0; j < n; j++) x[j] *= mask[j] * inv;
    dd_ofdm_fft_exec(P, x, 1);
}

static double mean_power(const dd_cf64 *x, size_t n) {
    double s = 0;
    for (size_t j = 0; j < n; j++) s += creal(x[j]) * creal(x[j]) + cimag(x[j]) * cimag(x[j]);
    return s / (double)n;
}

static double papr_db64(const dd_cf64 *x, size_t n) {
    double s = 0, pk = 0;
    for (size_t j = 0; j < n; j++) {
        double p = creal(x[j]) * creal(x[j]) + cimag(x[j]) * cimag(x[j]);
        s += p;
        if (p > pk) pk = p;
    }
    return s > 0 ? 10 * log10(pk * (double)n / s) : 0;
}

/* One clip-and-filter pass: clip |x| to sqrt(10^(t/10) * mean |x|^2), then the mask. */
static void clip_filter(dd_ofdm_fft *P, dd_cf64 *x, const double *mask, size_t n, double t) {
    double a = sqrt(pow(10.0, t / 10.0) * mean_power(x, n));
    for (size_t j = 0; j < n; j++) {
        double m = cabs(x[j]);
        if (m > a) x[j] *= a / m;
    }
    apply_mask(P, x, mask, n);
}

void dd_ofdm_destroy(dd_ofdm **sig) {
    if (!sig || !*sig) return;
    dd_ofdm *s = *sig;
    dd_free(s->bin);
    dd_free(s->car);
    dd_free(s->sym_start);
    dd_free(s->sym_cp);
    dd_free(s->X);
    dd_free(s->x);
    dd_free(s);
    *sig = NULL;
}

dd_status dd_ofdm_create(const dd_ofdm_cfg *cfg, dd_ofdm **out) {
    dd_status st = DD_OK;
    dd_ofdm *S = NULL;
    dd_ofdm_fft *pN = NULL, *pL = NULL;
    dd_cf64 *buf = NULL, *x = NULL;
    double *mask = NULL;
    layout_t L;
    if (!out) return ARGERR("dd_ofdm_create: out is NULL");
    *out = NULL;
    DD_TRY(make_layout(cfg, &L));
    const size_t N = L.N, n = L.n;
    const int ns = cfg->n_symbols, half = 6 * L.n_rb;
    const size_t K = (size_t)cfg->n_carriers * 12 * (size_t)L.n_rb;

    S = dd_calloc(1, sizeof *S);
    if (!S) return DD_ERR_NOMEM;
    S->cfg = *cfg;
    S->cfg.n_rb = L.n_rb;
    S->cfg.carrier_spacing = L.spacing;
    S->n = n;
    S->N = N;
    S->K = K;
    S->cp_min = L.cp_min;
    S->wola = L.wola;
    S->occ = L.occ;
    memcpy(S->centre, L.centre, sizeof S->centre);
    S->bin = dd_calloc(K, sizeof(int));
    S->car = dd_calloc(K, sizeof(int));
    S->sym_start = dd_calloc((size_t)ns, sizeof(size_t));
    S->sym_cp = dd_calloc((size_t)ns, sizeof(int));
    S->X = dd_calloc((size_t)ns * K, sizeof(dd_cf32));
    S->x = dd_calloc(n, sizeof(dd_cf32));
    buf = dd_calloc(N, sizeof(dd_cf64));
    x = dd_calloc(n, sizeof(dd_cf64));
    mask = dd_calloc(n, sizeof(double));
    if (!S->bin || !S->car || !S->sym_start || !S->sym_cp || !S->X || !S->x || !buf || !x ||
        !mask) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }
    if ((st = dd_ofdm_fft_create(N, &pN)) != DD_OK) goto cleanup;
    if ((st = dd_ofdm_fft_create(n, &pL)) != DD_OK) goto cleanup;

    /* Active sub-carriers, ascending (carrier 0 is the lowest). */
    size_t a = 0;
    for (int c = 0; c < cfg->n_carriers; c++)
        for (int k = -half; k < half; k++) {
            S->bin[a] = L.centre[c] + k;
            S->car[a] = c;
            a++;
        }

    /* QAM symbols: one dd_rng_below(qam) draw per point, symbol-major, bins ascending;
     * I level = idx % m, Q level = idx / m, level l -> (2 l - m + 1) / sqrt(2 (M-1) / 3). */
    {
        dd_rng rng;
        dd_rng_seed(&rng, cfg->seed);
        int m = (int)lround(sqrt((double)cfg->qam));
        double norm = 1.0 / sqrt(2.0 * (cfg->qam - 1) / 3.0);
        for (size_t j = 0; j < (size_t)ns * K; j++) {
            int idx = (int)dd_rng_below(&rng, (uint64_t)cfg->qam);
            /* NOLINTNEXTLINE(bugprone-integer-division): idx / m is the row of the square QAM grid */
            double re = (2 * (idx % m) - m + 1) * norm, im = (2 * (idx / m) - m + 1) * norm;
            S->X[j] = CMPLXF((float)re, (float)im);
        }
    }

    /* CP-OFDM with WOLA: symbol s occupies [t, t + cp + N) plus a cyclic suffix of W
     * samples that overlaps the next symbol's CP start; ramps r(j) = sin^2(pi (j + 0.5)
     * / (2W)) up over the first W samples and 1 - r(j) down over the suffix. The last
     * suffix wraps onto the frame start (periodic frame). */
    {
        size_t t = 0;
        const int W = L.wola;
        for (int s = 0; s < ns; s++) {
            int cp = symbol_cp(&L, s);
            memset(buf, 0, N * sizeof(dd_cf64));
            for (size_t j = 0; j < K; j++) {
                long k = S->bin[j];
                size_t idx = (size_t)(k < 0 ? k + (long)N : k);
                dd_cf32 v = S->X[(size_t)s * K + j];
                buf[idx] = CMPLX((double)crealf(v), (double)cimagf(v));
            }
            dd_ofdm_fft_exec(pN, buf, 1);
            size_t len = (size_t)cp + N + (size_t)W;
            for (size_t j = 0; j < len; j++) {
                size_t ui = (j + N - (size_t)cp) % N;
                double w = 1.0;
                if (W > 0 && j < (size_t)W) {
                    double q = sin(M_PI * ((double)j + 0.5) / (2.0 * W));
                    w = q * q;
                } else if (W > 0 && j >= (size_t)cp + N) {
                    double q = sin(M_PI * ((double)(j - (size_t)cp - N) + 0.5) / (2.0 * W));
                    w = 1.0 - q * q;
                }
                x[(t + j) % n] += w * buf[ui];
            }
            S->sym_cp[s] = cp;
            S->sym_start[s] = t + (size_t)cp;
            t += (size_t)cp + N;
        }
    }

    make_mask(cfg, &L, n, mask);
    if (cfg->band_limit) apply_mask(pL, x, mask, n);
    {
        double p = mean_power(x, n);
        if (!(p > 0)) {
            st = dd_error(DD_ERR_INTERNAL, "dd_ofdm_create: the frame has no power");
            goto cleanup;
        }
        double g = 1.0 / sqrt(p);
        for (size_t j = 0; j < n; j++) x[j] *= g;
        S->scale = g;
    }
    S->papr_raw = papr_db64(x, n);

    /* Crest-factor reduction (iterative clip and filter at the target PAPR):
     * 1. cfr_iters passes with the clip level at the target;
     * 2. further passes at the target while each lowers the PAPR by >= 0.02 dB and the
     *    PAPR is above target + 0.1 dB (at most 4 * cfr_iters passes in all);
     * 3. if still above target + 0.1 dB, up to 2 * cfr_iters passes that lower the clip
     *    level by half the remaining excess each.
     * Plain passes cost the least EVM per dB of PAPR; step 3 only closes the gap that
     * filtering keeps regrowing. */
    if (cfg->papr_target_db > 0) {
        const double tgt = cfg->papr_target_db, tol = 0.1;
        double thr = tgt, p;
        int done = 0;
        for (int i = 0; i < cfg->cfr_iters; i++, done++) clip_filter(pL, x, mask, n, thr);
        p = papr_db64(x, n);
        while (p > tgt + tol && done < 4 * cfg->cfr_iters) {
            clip_filter(pL, x, mask, n, thr);
            done++;
            double q = papr_db64(x, n);
            int stalled = p - q < 0.02;
            p = q;
            if (stalled) break;
        }
        for (int i = 0; i < 2 * cfg->cfr_iters && p > tgt + tol; i++) {
            thr -= 0.5 * (p - tgt);
            clip_filter(pL, x, mask, n, thr);
            done++;
            p = papr_db64(x, n);
        }
        S->cfr_done = done;
        double g = 1.0 / sqrt(mean_power(x, n));
        for (size_t j = 0; j < n; j++) x[j] *= g;
        S->scale *= g;
    }

    {
        double s = 0, pk = 0;
        for (size_t j = 0; j < n; j++) {
            S->x[j] = CMPLXF((float)creal(x[j]), (float)cimag(x[j]));
            double re = crealf(S->x[j]), im = cimagf(S->x[j]);
            double p = re * re + im * im;
            s += p;
            if (p > pk) pk = p;
        }
        S->papr = 10 * log10(pk * (double)n / s);
    }
    *out = S;
    S = NULL;
cleanup:
    if (st == DD_ERR_NOMEM) dd_error(st, "dd_ofdm_create: out of memory (frame of %zu samples)", n);
    dd_ofdm_destroy(&S);
    dd_ofdm_fft_destroy(&pN);
    dd_ofdm_fft_destroy(&pL);
    dd_free(buf);
    dd_free(x);
    dd_free(mask);
    return st;
}

const dd_cf32 *dd_ofdm_samples(const dd_ofdm *sig, size_t *n) {
    if (n) *n = sig ? sig->n : 0;
    return sig ? sig->x : NULL;
}

dd_status dd_ofdm_get_info(const dd_ofdm *sig, dd_ofdm_info *info) {
    if (!sig || !info) return ARGERR("dd_ofdm_get_info: sig or info is NULL");
    memset(info, 0, sizeof *info);
    info->cfg = sig->cfg;
    info->n_samples = sig->n;
    info->fft_size = sig->N;
    info->n_active = sig->K;
    info->n_symbols = sig->cfg.n_symbols;
    info->cp_min = sig->cp_min;
    info->wola_len = sig->wola;
    info->occupied_bw = sig->occ;
    info->scale = sig->scale;
    info->papr_raw_db = sig->papr_raw;
    info->papr_db = sig->papr;
    info->cfr_iters_done = sig->cfr_done;
    info->carrier_centre = sig->centre;
    info->active_bin = sig->bin;
    info->active_carrier = sig->car;
    info->symbol_start = sig->sym_start;
    info->symbol_cp = sig->sym_cp;
    info->symbols = sig->X;
    return DD_OK;
}
