/* Tests of the PA simulator (include/distdpd/pa.h): closed forms of the static
 * nonlinearities, the published MP sets against a direct evaluation, every default
 * model against the independent numpy reference (tools/pa_reference.py ->
 * tests/data/pa_reference.csv), Wiener vs Hammerstein order, noise SNR, IQ image
 * rejection, long-term memory time constants, drift, determinism and streaming,
 * parameter checks, and the calibration of the "realistic" PA on the default OFDM
 * signal (ACLR, gain-only NMSE, MP(7,4) NMSE). */
#include <complex.h>

#include "dd_test.h"
#include "distdpd/fit.h"
#include "distdpd/metrics.h"
#include "distdpd/ofdm.h"
#include "distdpd/pa.h"
#include "pa_test_signal.h"

#define PI 3.14159265358979323846

static dd_pa *make(const char *name, const dd_pa_params *p) {
    dd_pa *pa = NULL;
    dd_status st = dd_pa_create(name, p, &pa);
    CHECK(st == DD_OK && pa, "create %s: %s", name, dd_last_error());
    return pa;
}

/* Params with a fixed 0 dB drive and no noise: the model sees x as it is. */
static dd_pa_params fixed(const char *name) {
    dd_pa_params p;
    dd_status st = dd_pa_params_default(name, &p);
    CHECK(st == DD_OK, "defaults of %s", name);
    p.drive_rms = 0.0;
    p.drive_db = 0.0;
    p.snr_db = 0.0;
    return p;
}

static double nmse_db(const dd_cf32 *ref, const dd_cf32 *y, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        e += pow(cabs((dd_cf64)y[i] - (dd_cf64)ref[i]), 2);
        r += pow(cabs((dd_cf64)ref[i]), 2);
    }
    return 10 * log10(e / r);
}

/* ---- static nonlinearities against their closed forms ---- */

static void test_static(void) {
    const double amps[] = {0.05, 0.3, 0.7, 1.0, 1.6, 3.0};
    const size_t na = sizeof amps / sizeof amps[0];
    dd_cf32 x[6], y[6];
    for (size_t i = 0; i < na; i++) x[i] = (float)amps[i] * cexpf(I * (float)(0.4 + i));

    /* Saleh with the published parameters */
    dd_pa_params p = fixed("saleh");
    dd_pa *pa = make("saleh", &p);
    CHECK_OK(dd_pa_apply(pa, x, y, na));
    for (size_t i = 0; i < na; i++) {
        double r = cabsf(x[i]);
        double A = 2.1587 * r / (1 + 1.1517 * r * r), Phi = 4.0033 * r * r / (1 + 9.1040 * r * r);
        CHECK_NEAR(cabsf(y[i]), A, 2e-6 * A);
        CHECK_NEAR(carg((dd_cf64)y[i] * conj((dd_cf64)x[i])), Phi, 2e-6);
    }
    /* AM/PM at r = 1 is about 23 degrees (docs/pa.md "Sources") */
    CHECK_NEAR(4.0033 / (1 + 9.1040) * 180 / PI, 22.7, 0.1);
    dd_pa_destroy(&pa);
    CHECK(pa == NULL, "destroy NULLs");

    /* Rapp: small-signal gain G, saturation at vsat, half-power point, AM/PM */
    p = fixed("rapp");
    p.rapp = (dd_pa_rapp){.gain = 2.0, .vsat = 1.5, .p = 3.0, .ampm_alpha = 0.3, .ampm_beta = 2.0};
    pa = make("rapp", &p);
    dd_cf32 xr[4] = {1e-4f, 0.75f * cexpf(0.3f * I), 500.0f * I, 0.2f};
    dd_cf32 yr[4];
    CHECK_OK(dd_pa_apply(pa, xr, yr, 4));
    CHECK_NEAR(cabsf(yr[0]) / 1e-4, 2.0, 1e-6);                     /* gain G */
    CHECK_NEAR(cabsf(yr[1]), 1.5 / pow(2.0, 1.0 / 6.0), 1e-6);       /* G r = vsat */
    CHECK_NEAR(cabsf(yr[2]), 1.5, 1e-5);                            /* saturation */
    CHECK(cabsf(yr[2]) <= 1.5f * (1 + 1e-6f), "never above vsat: %g", cabsf(yr[2]));
    CHECK_NEAR(carg((dd_cf64)yr[3] / (dd_cf64)xr[3]), 0.3 * 0.04 / (1 + 2.0 * 0.04), 1e-6);
    CHECK_NEAR(carg((dd_cf64)yr[2] / (dd_cf64)xr[2]), 0.3 / 2.0, 1e-4); /* alpha/beta limit */
    dd_pa_destroy(&pa);
    /* a sharp knee (p = 50) and a huge input: still vsat, no overflow to 0 */
    p.rapp.p = 50.0;
    pa = make("rapp", &p);
    dd_cf32 xh[2] = {1e6f, 0.5f}, yh[2];
    CHECK_OK(dd_pa_apply(pa, xh, yh, 2));
    CHECK_NEAR(cabsf(yh[0]), 1.5, 1e-6);
    CHECK_NEAR(cabsf(yh[1]), 1.0 / pow(1 + pow(2.0 * 0.5 / 1.5, 100), 0.01), 1e-6);
    dd_pa_destroy(&pa);

    /* Ghorbani with the published parameters */
    p = fixed("ghorbani");
    pa = make("ghorbani", &p);
    CHECK_OK(dd_pa_apply(pa, x, y, na));
    for (size_t i = 0; i < na; i++) {
        double r = cabsf(x[i]);
        double A = 8.1081 * pow(r, 1.5413) / (1 + 6.5202 * pow(r, 1.5413)) - 0.0718 * r;
        double Phi = 4.6645 * pow(r, 2.0965) / (1 + 10.88 * pow(r, 2.0965)) - 0.003 * r;
        CHECK_NEAR(cabsf(y[i]), A, 2e-6 * A);
        CHECK_NEAR(carg((dd_cf64)y[i] * conj((dd_cf64)x[i])), Phi, 2e-6);
    }
    dd_pa_destroy(&pa);
}

/* ---- memory polynomials: direct evaluation of the published sets ---- */

static void test_mp_sets(void) {
    static const double ding[3][3][2] = {
        {{1.0513, 0.0904}, {-0.0680, -0.0023}, {0.0289, -0.0054}},
        {{-0.0542, -0.2900}, {0.2234, 0.2317}, {-0.0621, -0.0932}},
        {{-0.9657, -0.7028}, {-0.2451, -0.3735}, {0.1229, 0.1508}}};
    static const double warp[4][4][2] = {
        {{0.9295, -0.0001}, {0.2939, 0.0005}, {-0.1270, 0.0034}, {0.0741, -0.0018}},
        {{0.1419, -0.0008}, {-0.0735, 0.0833}, {-0.0535, 0.0004}, {0.0908, -0.0473}},
        {{0.0084, -0.0569}, {-0.4610, 0.0274}, {-0.3011, -0.1403}, {-0.0623, -0.0269}},
        {{0.1774, 0.0265}, {0.0848, 0.0613}, {-0.0362, -0.0307}, {0.0415, 0.0429}}};
    enum { N = 64 };
    dd_cf32 x[N], y[N];
    pa_test_signal(x, N, 800e6, 200e6, 0.0, 21);
    for (int i = 0; i < N; i++) x[i] *= 0.7f; /* peak 0.7 <= 0.75 */
    for (int set = 0; set < 2; set++) {
        const char *name = set ? "mp-warp" : "mp-ding";
        int K = set ? 4 : 3, M = set ? 4 : 3;
        dd_pa_params p = fixed(name);
        dd_pa *pa = make(name, &p);
        CHECK_OK(dd_pa_apply(pa, x, y, N));
        double worst = 0;
        for (int n = 0; n < N; n++) {
            dd_cf64 acc = 0;
            for (int i = 0; i < K; i++) /* order 2i+1 */
                for (int m = 0; m < M && m <= n; m++) {
                    double re = set ? warp[i][m][0] : ding[i][m][0];
                    double im = set ? warp[i][m][1] : ding[i][m][1];
                    dd_cf64 v = x[n - m];
                    acc += (re + im * I) * v * pow(cabs(v), 2 * i);
                }
            worst = fmax(worst, cabs(acc - (dd_cf64)y[n]));
        }
        CHECK(worst < 1e-6, "%s differs from the direct evaluation by %g", name, worst);
        dd_pa_destroy(&pa);
    }
}

/* ---- every default model against the numpy reference ---- */

static void test_reference(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/pa_reference.csv", dd_test_srcdir());
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    char head[2048];
    CHECK(fgets(head, sizeof head, f) != NULL, "header");
    /* column names: I_in,Q_in,I_<model>,Q_<model>,... */
    char names[16][32];
    int nm = 0;
    for (char *tok = strtok(head, ",\n"); tok; tok = strtok(NULL, ",\n")) {
        if (tok[0] == 'I' && tok[1] == '_' && strcmp(tok, "I_in") != 0 && nm < 16)
            snprintf(names[nm++], sizeof names[0], "%s", tok + 2);
    }
    CHECK(nm == 9, "models in the reference: %d", nm);
    enum { N = 512 };
    static dd_cf32 x[N], ref[16][N], y[N];
    size_t n = 0;
    for (; n < N; n++) {
        double re, im;
        if (fscanf(f, "%lf,%lf", &re, &im) != 2) break;
        x[n] = (float)re + (float)im * I;
        for (int m = 0; m < nm; m++) {
            CHECK(fscanf(f, ",%lf,%lf", &re, &im) == 2, "row %zu", n);
            ref[m][n] = (float)re + (float)im * I;
        }
    }
    fclose(f);
    CHECK(n == N, "rows %zu", n);
    for (int m = 0; m < nm; m++) {
        dd_pa_params p;
        CHECK_OK(dd_pa_params_default(names[m], &p));
        p.snr_db = 0.0; /* the reference is noiseless */
        dd_pa *pa = make(names[m], &p);
        if (!pa) continue;
        CHECK_OK(dd_pa_apply(pa, x, y, N));
        double e = nmse_db(ref[m], y, N);
        printf("reference %-20s NMSE %.1f dB\n", names[m], e);
        CHECK(e < -110.0, "model %s differs from tools/pa_reference.py: %.1f dB", names[m], e);
        dd_pa_destroy(&pa);
    }
}

/* ---- Wiener vs Hammerstein ---- */

static void test_wiener_hammerstein(void) {
    enum { N = 2048 };
    static dd_cf32 x[N], yw[N], yh[N], ywh[N], yd[N];
    pa_test_signal(x, N, 800e6, 200e6, 0.0, 31);
    const dd_cf64 h[3] = {0.9, 0.3 - 0.2 * I, 0.1 * I};
    dd_pa_params pw = fixed("wiener"), ph = fixed("hammerstein"), pwh = fixed("wiener-hammerstein");
    pw.fir_in_len = 3;
    ph.fir_out_len = 3;
    pwh.fir_in_len = 3;
    pwh.fir_out_len = 1;
    pwh.fir_out[0] = 1.0;
    for (int k = 0; k < 3; k++) pw.fir_in[k] = ph.fir_out[k] = pwh.fir_in[k] = h[k];
    dd_pa *w = make("wiener", &pw), *hm = make("hammerstein", &ph), *wh = make("wiener-hammerstein", &pwh);
    CHECK_OK(dd_pa_apply(w, x, yw, N));
    CHECK_OK(dd_pa_apply(hm, x, yh, N));
    CHECK_OK(dd_pa_apply(wh, x, ywh, N));
    double d = nmse_db(yw, yh, N);
    CHECK(d > -30.0, "Wiener and Hammerstein should differ for a non-trivial FIR: %.1f dB", d);
    CHECK(nmse_db(yw, ywh, N) < -120.0, "W-H with fir_out = [1] equals Wiener");
    /* Wiener = NL(FIR(x)), evaluated here: Rapp p=2, G=1, vsat=1, AM/PM 0.35 r^2/(1+r^2) */
    for (int n = 0; n < N; n++) {
        dd_cf64 u = 0;
        for (int k = 0; k < 3 && k <= n; k++) u += h[k] * (dd_cf64)x[n - k];
        double r = cabs(u);
        dd_cf64 v = u / pow(1 + pow(r, 4), 0.25) * cexp(I * 0.35 * r * r / (1 + r * r));
        yd[n] = (dd_cf32)v;
    }
    CHECK(nmse_db(yd, yw, N) < -120.0, "Wiener vs direct: %.1f dB", nmse_db(yd, yw, N));
    /* Hammerstein = FIR(NL(x)) */
    for (int n = 0; n < N; n++) {
        dd_cf64 acc = 0;
        for (int k = 0; k < 3 && k <= n; k++) {
            dd_cf64 u = x[n - k];
            double r = cabs(u);
            acc += h[k] * u / pow(1 + pow(r, 4), 0.25) * cexp(I * 0.35 * r * r / (1 + r * r));
        }
        yd[n] = (dd_cf32)acc;
    }
    CHECK(nmse_db(yd, yh, N) < -120.0, "Hammerstein vs direct: %.1f dB", nmse_db(yd, yh, N));
    dd_pa_destroy(&w);
    dd_pa_destroy(&hm);
    dd_pa_destroy(&wh);
    /* FIR = [1]: the two agree exactly */
    pw.fir_in_len = 1;
    pw.fir_in[0] = 1.0;
    ph.fir_out_len = 1;
    ph.fir_out[0] = 1.0;
    w = make("wiener", &pw);
    hm = make("hammerstein", &ph);
    CHECK_OK(dd_pa_apply(w, x, yw, N));
    CHECK_OK(dd_pa_apply(hm, x, yh, N));
    CHECK(memcmp(yw, yh, sizeof yw) == 0, "Wiener == Hammerstein for FIR = [1]");
    dd_pa_destroy(&w);
    dd_pa_destroy(&hm);
}

/* A linear PA y = x (a one-coefficient GMP), plus options. */
static dd_pa *linear_pa(dd_gmp **g, void (*tweak)(dd_pa_params *)) {
    dd_cf64 one = 1.0;
    dd_gmp_shape s = dd_gmp_shape_mp(1, 1, 0);
    CHECK_OK(dd_gmp_create(&s, &one, g));
    dd_pa_params p = fixed("gmp");
    p.gmp = *g;
    if (tweak) tweak(&p);
    return make("gmp", &p);
}

/* ---- noise at a given SNR ---- */

static void test_noise(void) {
    enum { N = 65536 };
    static dd_cf32 x[N], y[N], yc[N];
    pa_test_signal(x, N, 800e6, 200e6, 9.0, 41);
    const double snrs[] = {20.0, 45.0};
    for (int i = 0; i < 2; i++) {
        dd_pa_params p;
        CHECK_OK(dd_pa_params_default("rapp", &p));
        p.snr_db = snrs[i];
        p.seed = 99 + (uint64_t)i;
        dd_pa *pa = make("rapp", &p), *clean = NULL;
        CHECK_OK(dd_pa_apply(pa, x, y, N));
        CHECK_OK(dd_pa_clone(pa, 0, &clean));
        CHECK_OK(dd_pa_apply(clean, x, yc, N));
        double ps = 0, pn = 0;
        dd_cf64 corr = 0;
        for (int k = 0; k < N; k++) {
            dd_cf64 e = (dd_cf64)y[k] - (dd_cf64)yc[k];
            ps += pow(cabs((dd_cf64)yc[k]), 2);
            pn += pow(cabs(e), 2);
            corr += e * conj((dd_cf64)yc[k]);
        }
        double snr = 10 * log10(ps / pn);
        printf("noise: configured SNR %.1f dB, measured %.3f dB\n", snrs[i], snr);
        CHECK_NEAR(snr, snrs[i], 0.3);
        CHECK(cabs(corr) < 0.02 * sqrt(ps * pn), "noise correlated with the signal");
        dd_pa_calib c;
        dd_pa_get_calib(pa, &c);
        CHECK_NEAR(c.noise_var, c.out_power / pow(10, snrs[i] / 10), 1e-12);
        /* set_noise(0) on the noisy PA after a reset reproduces the clean output */
        dd_pa_reset(pa);
        dd_pa_set_noise(pa, 0);
        CHECK_OK(dd_pa_apply(pa, x, y, N));
        CHECK(memcmp(y, yc, sizeof y) == 0, "set_noise(0) == clean clone");
        dd_pa_destroy(&pa);
        dd_pa_destroy(&clean);
    }
}

/* ---- IQ imbalance: image rejection ratio of a tone ---- */

static double iq_amp = 0.8, iq_ph = 4.0;
static int iq_in = 0;
static void set_iq(dd_pa_params *p) {
    p->iq_amp_db = iq_amp;
    p->iq_phase_deg = iq_ph;
    p->iq_at_input = iq_in;
}

static void test_iq(void) {
    enum { N = 4096 };
    static dd_cf32 x[N], y[N];
    const double w = 2 * PI * 37.0 / N; /* bin-centred tone */
    for (int n = 0; n < N; n++) x[n] = (dd_cf32)(0.5 * cexp(I * w * n));
    for (iq_in = 0; iq_in < 2; iq_in++) {
        dd_gmp *g = NULL;
        dd_pa *pa = linear_pa(&g, set_iq);
        CHECK_OK(dd_pa_apply(pa, x, y, N));
        dd_cf64 cp = 0, cm = 0;
        for (int n = 0; n < N; n++) {
            cp += (dd_cf64)y[n] * cexp(-I * w * n);
            cm += (dd_cf64)y[n] * cexp(I * w * n);
        }
        double irr = 20 * log10(cabs(cp) / cabs(cm));
        double gg = pow(10, iq_amp / 20), ph = iq_ph * PI / 180;
        double want = 10 * log10((1 + 2 * gg * cos(ph) + gg * gg) / (1 - 2 * gg * cos(ph) + gg * gg));
        printf("IQ imbalance (%s): IRR %.3f dB, closed form %.3f dB\n", iq_in ? "input" : "output",
               irr, want);
        CHECK_NEAR(irr, want, 0.05);
        /* sample by sample, the I/Q definition: I' = I, Q' = g (Q cos phi - I sin phi) */
        double worst = 0;
        for (int n = 0; n < N; n++) {
            double re = crealf(x[n]), im = cimagf(x[n]);
            dd_cf64 e = re + I * gg * (im * cos(ph) - re * sin(ph));
            worst = fmax(worst, cabs(e - (dd_cf64)y[n]));
        }
        CHECK(worst < 1e-6, "IQ imbalance differs from its I/Q definition by %g", worst);
        dd_pa_destroy(&pa);
        dd_gmp_free(&g);
    }
}

/* ---- long-term memory: power steps ---- */

static double th_tau = 1e-6, tr_cap = 20e-9, tr_rel = 500e-9;
static void set_thermal(dd_pa_params *p) {
    p->thermal_kappa = 0.5;
    p->thermal_tau_s = th_tau;
}
static void set_trap(dd_pa_params *p) {
    p->trap_kappa = 0.3;
    p->trap_capture_s = tr_cap;
    p->trap_release_s = tr_rel;
}

/* Gain |y/x| at sample n. */
static double gain_at(const dd_cf32 *x, const dd_cf32 *y, size_t n) { return cabsf(y[n]) / cabsf(x[n]); }

static void test_long_term(void) {
    enum { N = 12000, STEP = 4000, DOWN = 8000 };
    static dd_cf32 x[N], y[N];
    const double a1 = 0.2, a2 = 0.8; /* power 0.04 -> 0.64 -> 0.04 */
    for (int n = 0; n < N; n++) x[n] = (float)((n >= STEP && n < DOWN) ? a2 : a1) * cexpf(0.01f * I * (float)n);
    const double fs = 800e6;
    /* thermal: g = 1 - kappa (P - P0), one pole with tau = 1 us = 800 samples */
    dd_gmp *g = NULL;
    dd_pa *pa = linear_pa(&g, set_thermal);
    CHECK_OK(dd_pa_apply(pa, x, y, N));
    dd_pa_calib c;
    dd_pa_get_calib(pa, &c);
    double p0 = (2.0 * a1 * a1 * STEP + a2 * a2 * (DOWN - STEP)) / N;
    CHECK_NEAR(c.p0, p0, 1e-6);
    CHECK_NEAR(gain_at(x, y, 10), 1.0 - 0.5 * (a1 * a1 - p0) * (1 - exp(-11.0 / 800)), 1e-5);
    double g_lo = 1 - 0.5 * (a1 * a1 - p0), g_hi = 1 - 0.5 * (a2 * a2 - p0);
    double g_start = gain_at(x, y, STEP - 1);
    int tau_n = (int)lround(th_tau * fs);
    double frac = (gain_at(x, y, STEP - 1 + tau_n) - g_hi) / (g_start - g_hi);
    printf("thermal: gain %.4f -> %.4f, after one tau %.4f of the step left (e^-1 = %.4f)\n",
           g_start, g_hi, frac, exp(-1.0));
    CHECK_NEAR(frac, exp(-1.0), 1e-4);
    CHECK_NEAR(gain_at(x, y, DOWN - 1), g_hi + (g_start - g_hi) * exp(-(double)(DOWN - STEP) / tau_n), 1e-5);
    CHECK(g_start > g_lo - 0.05 && g_start < g_lo + 0.05, "started warm at P0");
    dd_pa_destroy(&pa);
    dd_gmp_free(&g);

    /* trapping: fast capture (step up), slow release (step down) */
    pa = linear_pa(&g, set_trap);
    CHECK_OK(dd_pa_apply(pa, x, y, N));
    double s_lo = a1 * a1, s_hi = a2 * a2;
    double gl = 1 - 0.3 * s_lo, gh = 1 - 0.3 * s_hi;
    CHECK_NEAR(gain_at(x, y, STEP - 1), gl, 1e-5);
    int cap_n = (int)lround(tr_cap * fs), rel_n = (int)lround(tr_rel * fs);
    double fc = (gain_at(x, y, STEP - 1 + cap_n) - gh) / (gl - gh);
    double fr = (gain_at(x, y, DOWN - 1 + rel_n) - gl) / (gh - gl);
    printf("trapping: capture %d samples left %.4f, release %d samples left %.4f (e^-1)\n", cap_n,
           fc, rel_n, fr);
    CHECK_NEAR(fc, exp(-1.0), 1e-4);
    CHECK_NEAR(fr, exp(-1.0), 1e-4);
    /* the release is much slower than the capture */
    double fr_cap = (gain_at(x, y, DOWN - 1 + cap_n) - gl) / (gh - gl);
    CHECK(fr_cap > 0.9, "release after one capture time constant: %.3f left", fr_cap);
    dd_pa_destroy(&pa);
    dd_gmp_free(&g);
}

/* ---- gain drift ---- */

static void set_drift(dd_pa_params *p) {
    p->fs = 1e6; /* 1000 samples per ms */
    p->drift_db_per_ms = 0.5;
    p->drift_deg_per_ms = 10.0;
}

static void test_drift(void) {
    enum { N = 3001 };
    static dd_cf32 x[N], y[N];
    for (int n = 0; n < N; n++) x[n] = 0.3f * cexpf(0.2f * I * (float)n);
    dd_gmp *g = NULL;
    dd_pa *pa = linear_pa(&g, set_drift);
    CHECK_OK(dd_pa_apply(pa, x, y, N));
    dd_cf64 r = (dd_cf64)y[3000] / (dd_cf64)x[3000];
    CHECK_NEAR(20 * log10(cabs(r)), 1.5, 1e-4);
    CHECK_NEAR(carg(r) * 180 / PI, 30.0, 1e-3);
    dd_cf64 r0 = (dd_cf64)y[0] / (dd_cf64)x[0];
    CHECK_NEAR(cabs(r0), 1.0, 1e-6);
    dd_pa_destroy(&pa);
    dd_gmp_free(&g);
}

/* ---- determinism, streaming, clone, calibration ---- */

static void test_determinism(void) {
    enum { N = 20000 };
    static dd_cf32 x[N], y1[N], y2[N], y3[N];
    pa_test_signal(x, N, 800e6, 200e6, 9.0, 51);
    dd_pa_params p;
    CHECK_OK(dd_pa_params_default("realistic", &p));
    p.seed = 5;
    p.iq_amp_db = 0.3;
    p.iq_phase_deg = 2.0;
    p.drift_db_per_ms = 100.0;
    dd_pa *a = make("realistic", &p), *b = make("realistic", &p);
    CHECK_OK(dd_pa_apply(a, x, y1, N));
    CHECK_OK(dd_pa_apply(b, x, y2, N));
    CHECK(memcmp(y1, y2, sizeof y1) == 0, "same seed, same bytes");
    /* chunked (on a calibrated clone with noise) == whole */
    dd_pa *c = NULL;
    CHECK_OK(dd_pa_clone(a, 1, &c));
    size_t off = 0, chunk = 1;
    while (off < N) {
        size_t m = off + chunk > N ? N - off : chunk;
        CHECK_OK(dd_pa_apply(c, x + off, y3 + off, m));
        off += m;
        chunk = chunk * 3 + 1;
    }
    CHECK(memcmp(y1, y3, sizeof y1) == 0, "chunked processing == whole signal");
    /* reset replays, also in place (x and y the same array) */
    dd_pa_reset(a);
    memcpy(y2, x, sizeof x);
    CHECK_OK(dd_pa_apply(a, y2, y2, N));
    CHECK(memcmp(y1, y2, sizeof y1) == 0, "reset replays the same bytes, in place");
    /* another seed differs only by the noise */
    dd_pa_destroy(&b);
    p.seed = 6;
    b = make("realistic", &p);
    CHECK_OK(dd_pa_apply(b, x, y2, N));
    CHECK(memcmp(y1, y2, sizeof y1) != 0, "another seed, other bytes");
    double d = nmse_db(y1, y2, N);
    CHECK(d > -45.0 && d < -39.0, "two seeds differ by two noise draws at 45 dB SNR: %.1f dB", d);
    /* RMS drive is scale-free */
    for (int i = 0; i < N; i++) y3[i] = x[i] * 7.0f;
    dd_pa_params q = p;
    q.snr_db = 0;
    dd_pa *e = make("realistic", &q), *f = make("realistic", &q);
    CHECK_ERR(dd_pa_set_calib(e, &(dd_pa_calib){0}), DD_ERR_ARG, "in_gain");
    CHECK_OK(dd_pa_apply(e, x, y1, N));
    CHECK_OK(dd_pa_apply(f, y3, y2, N));
    CHECK(nmse_db(y1, y2, N) < -100.0, "RMS drive ignores the input scale: %.1f", nmse_db(y1, y2, N));
    /* get/set calibration round trip: a PA given e's calibration reproduces e */
    dd_pa_calib cal;
    dd_pa_get_calib(e, &cal);
    CHECK(cal.calibrated == 1 && cal.in_gain > 0, "calibrated");
    dd_pa *h = make("realistic", &q);
    CHECK_OK(dd_pa_set_calib(h, &cal));
    CHECK_OK(dd_pa_apply(h, x, y2, N));
    CHECK(memcmp(y1, y2, sizeof y1) == 0, "set_calib reproduces the calibrated PA");
    /* ... and keeps the gain for another input instead of recalibrating */
    dd_pa_reset(h);
    CHECK_OK(dd_pa_apply(h, y3, y2, N));
    CHECK(nmse_db(y1, y2, N) > -10.0, "x*7 through a calibrated PA is not scaled back");
    /* explicit calibrate == implicit */
    dd_pa_destroy(&h);
    h = make("realistic", &q);
    CHECK_OK(dd_pa_calibrate(h, x, N));
    CHECK_OK(dd_pa_apply(h, x, y2, N));
    CHECK(memcmp(y1, y2, sizeof y1) == 0, "dd_pa_calibrate + apply == first apply");
    dd_pa_destroy(&a);
    dd_pa_destroy(&b);
    dd_pa_destroy(&c);
    dd_pa_destroy(&e);
    dd_pa_destroy(&f);
    dd_pa_destroy(&h);
}

/* ---- parameters ---- */

static void test_params(void) {
    size_t cnt = 0;
    const dd_pa_model_info *list = dd_pa_list(&cnt);
    CHECK(cnt == 10, "models %zu", cnt);
    dd_gmp *g = NULL;
    dd_cf64 c2[2] = {1.0, -0.1};
    CHECK_OK(dd_gmp_create(&(dd_gmp_shape){.ka = 2, .la = 1}, c2, &g));
    for (size_t i = 0; i < cnt; i++) {
        CHECK(list[i].name && list[i].summary && strlen(list[i].summary) > 10, "entry %zu", i);
        dd_pa_params p;
        CHECK_OK(dd_pa_params_default(list[i].name, &p));
        if (!strcmp(list[i].name, "gmp")) p.gmp = g;
        dd_pa *pa = make(list[i].name, &p);
        char buf[2048];
        size_t len = dd_pa_describe(pa, buf, sizeof buf);
        CHECK(len > 20 && len < sizeof buf && strstr(buf, list[i].name), "describe %s", list[i].name);
        char tiny[8];
        CHECK(dd_pa_describe(pa, tiny, sizeof tiny) == len && strlen(tiny) == 7, "truncation");
        CHECK(!strcmp(dd_pa_name(pa), list[i].name), "name");
        dd_pa_destroy(&pa);
    }
    dd_pa *pa = (dd_pa *)&cnt; /* must become NULL */
    CHECK_ERR(dd_pa_create("klystron", NULL, &pa), DD_ERR_ARG, "unknown model 'klystron'");
    CHECK(pa == NULL, "out NULL after unknown name");
    CHECK_ERR(dd_pa_create(NULL, NULL, &pa), DD_ERR_ARG, "unknown model");
    dd_pa_params p;
    CHECK_ERR(dd_pa_params_default("twt", &p), DD_ERR_ARG, "valid: saleh, rapp");

#define BAD(model, field_expr, needle)                             \
    do {                                                           \
        CHECK_OK(dd_pa_params_default(model, &p));                 \
        field_expr;                                                \
        pa = (dd_pa *)&cnt;                                        \
        CHECK_ERR(dd_pa_create(model, &p, &pa), DD_ERR_ARG, needle); \
        CHECK(pa == NULL, "out NULL after %s", needle);            \
    } while (0)
    BAD("rapp", p.rapp.p = 0.0, "rapp.p = 0");
    BAD("rapp", p.rapp.p = -2.0, "rapp.p");
    BAD("rapp", p.rapp.vsat = 0.0, "rapp.vsat");
    BAD("rapp", p.rapp.gain = NAN, "rapp.gain");
    BAD("saleh", p.saleh.alpha_a = 0.0, "saleh.alpha_a");
    BAD("ghorbani", p.ghorbani.x2 = 0.0, "ghorbani.x2");
    BAD("realistic", p.snr_db = -5.0, "snr_db = -5");
    BAD("realistic", p.snr_db = NAN, "snr_db");
    BAD("realistic", p.drive_rms = -1.0, "drive_rms");
    BAD("realistic", p.fs = 0.0, "fs = 0");
    BAD("realistic", p.trap_release_s = 1e-9, "trap_release_s");
    BAD("realistic", p.thermal_tau_s = 0.0, "thermal_tau_s");
    BAD("realistic", p.iq_amp_db = 10.0, "iq_amp_db");
    BAD("realistic", p.iq_phase_deg = -50.0, "iq_phase_deg");
    BAD("realistic", p.iq_at_input = 2, "iq_at_input");
    BAD("realistic", p.fir_in_len = 17, "fir_in_len = 17");
    BAD("realistic", (p.fir_out[0] = 0, p.fir_out[1] = 0, p.fir_out[2] = 0), "fir_out is all zero");
    BAD("realistic", p.cross_lag = 65, "cross_lag");
    BAD("realistic", p.gmp = g, "gmp must be NULL");
    BAD("saleh", p.fir_in_len = 2, "fir_in");
    BAD("wiener", p.fir_out_len = 2, "fir_out");
    BAD("saleh", p.nl = DD_PA_NL_RAPP, "does not match");
    BAD("wiener", p.nl = (dd_pa_nl)7, "nl = 7");
    BAD("gmp", (void)0, "gmp is NULL");
    BAD("mp-ding", p.cross_coef = 0.1, "cross_coef");
    BAD("realistic", p.drift_db_per_ms = 1e6, "drift_db_per_ms");
    dd_gmp *lead = NULL;
    CHECK_OK(dd_gmp_create(&(dd_gmp_shape){.ka = 1, .la = 1, .kc = 1, .lc = 1, .mc = 1}, NULL, &lead));
    BAD("gmp", p.gmp = lead, "leading terms");
    dd_gmp_free(&lead);
    /* a GMP core copies the model: freeing the caller's copy is fine */
    CHECK_OK(dd_pa_params_default("gmp", &p));
    p.gmp = g;
    pa = make("gmp", &p);
    dd_gmp_free(&g);
    dd_cf32 x[3] = {0.5f, 0.5f * I, -0.25f}, y[3];
    CHECK_OK(dd_pa_apply(pa, x, y, 3));
    CHECK_NEAR(crealf(y[2]), -0.25 + 0.1 * 0.25 * 0.25, 1e-7); /* x - 0.1 x|x| */
    CHECK_ERR(dd_pa_apply(pa, NULL, y, 3), DD_ERR_ARG, "NULL");
    x[1] = NAN;
    CHECK_ERR(dd_pa_apply(pa, x, y, 3), DD_ERR_RANGE, "x[1]");
    dd_pa_destroy(&pa);
    /* RMS drive cannot calibrate on silence */
    pa = make("rapp", NULL);
    dd_cf32 z[4] = {0};
    CHECK_ERR(dd_pa_apply(pa, z, y, 3), DD_ERR_RANGE, "all-zero input");
    dd_pa_destroy(&pa);
    dd_pa_destroy(&pa);
#undef BAD
}

/* ---- the calibrated realistic PA on the default OFDM signal ---- */

static void test_realistic(void) {
    dd_ofdm_cfg oc;
    dd_spec spec;
    dd_ofdm *fr = NULL;
    CHECK_OK(dd_ofdm_cfg_default(&oc, NULL));
    CHECK_OK(dd_ofdm_create(&oc, &fr));
    CHECK_OK(dd_ofdm_spec(&oc, &spec));
    if (!fr) return;
    size_t n = 0;
    const dd_cf32 *x = dd_ofdm_samples(fr, &n);
    dd_cf32 *y = calloc(n, sizeof *y), *yc = calloc(n, sizeof *yc), *yg = calloc(n, sizeof *yg);
    dd_pa_params p;
    CHECK_OK(dd_pa_params_default("realistic", &p));
    p.fs = spec.fs;
    dd_pa *pa = make("realistic", &p), *clean = NULL;
    CHECK_OK(dd_pa_apply(pa, x, y, n));
    CHECK_OK(dd_pa_clone(pa, 0, &clean));
    CHECK_OK(dd_pa_apply(clean, x, yc, n));

    dd_aclr_result ain, aout;
    CHECK_OK(dd_aclr(x, n, &spec, DD_ACLR_OPENDPD, &ain));
    CHECK_OK(dd_aclr(y, n, &spec, DD_ACLR_OPENDPD, &aout));
    dd_cf64 g;
    double gain_nmse = 0, gain_nmse2 = 0, mp_nmse = 0, mp_clean = 0, snr;
    CHECK_OK(dd_fit_gain(x, y, n, &g, &gain_nmse));
    for (size_t i = 0; i < n; i++) yg[i] = (dd_cf32)(g * (dd_cf64)x[i]);
    CHECK_OK(dd_nmse_db(y, yg, n, &gain_nmse2));
    dd_gmp *mp = NULL;
    CHECK_OK(dd_mp_fit(7, 4, 0, x, y, n, &mp, &mp_nmse));
    dd_gmp_free(&mp);
    CHECK_OK(dd_mp_fit(7, 4, 0, x, yc, n, &mp, &mp_clean));
    dd_gmp_free(&mp);
    CHECK_OK(dd_nmse_db(yc, y, n, &snr));
    printf("realistic PA, default OFDM (%zu samples at %.2f MHz, %g MHz channel):\n"
           "  input ACLR %.1f dBc; output ACLR (OpenDPD) L %.2f R %.2f avg %.2f dBc\n"
           "  gain-only fit NMSE %.2f dB (dd_nmse_db %.2f), MP(7,4) fit NMSE %.2f dB "
           "(noiseless %.2f), noise floor %.2f dB\n",
           n, spec.fs / 1e6, spec.bw_main / 1e6, ain.avg_db, aout.left_db, aout.right_db,
           aout.avg_db, gain_nmse, gain_nmse2, mp_nmse, mp_clean, snr);
    CHECK(ain.avg_db < -60.0, "clean input ACLR %.1f", ain.avg_db);
    CHECK(aout.avg_db >= -36.0 && aout.avg_db <= -29.0, "ACLR %.2f dBc not in [-36, -29]", aout.avg_db);
    CHECK(aout.left_db <= -28.0 && aout.right_db <= -28.0, "each side below -28 dBc");
    CHECK(gain_nmse >= -23.0 && gain_nmse <= -17.0, "gain-only NMSE %.2f not in [-23, -17]", gain_nmse);
    CHECK_NEAR(gain_nmse, gain_nmse2, 0.01);
    CHECK(mp_nmse <= gain_nmse - 5.0, "MP(7,4) %.2f not 5 dB better than gain-only %.2f", mp_nmse, gain_nmse);
    CHECK(mp_nmse >= -p.snr_db + 8.0, "MP(7,4) %.2f within 8 dB of the noise floor -%.0f", mp_nmse, p.snr_db);
    CHECK(mp_clean >= -p.snr_db + 8.0, "noiseless MP(7,4) %.2f: the model must not be an MP", mp_clean);
    CHECK_NEAR(snr, -p.snr_db, 0.3);
    dd_pa_destroy(&pa);
    dd_pa_destroy(&clean);
    dd_ofdm_destroy(&fr);
    free(y);
    free(yc);
    free(yg);
}

int main(void) {
    test_static();
    test_mp_sets();
    test_reference();
    test_wiener_hammerstein();
    test_noise();
    test_iq();
    test_long_term();
    test_drift();
    test_determinism();
    test_params();
    test_realistic();
    return dd_test_done("test_pa");
}
