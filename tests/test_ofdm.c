/* OFDM generator and demodulating EVM: the private FFT against a direct DFT; the NR
 * frame timing (0.5 ms = 15 N samples at 30 kHz); an independent FFTW rebuild of the
 * frame from the documented recipe; active sub-carriers exact per symbol; QAM grid and
 * normalisation; clean ACLR below -60 dBc for every preset in both definitions (and the
 * raw CP-OFDM well above it); Gaussian amplitude statistics; EVM of clean, AWGN (against
 * the analytic value), FIR-filtered and delayed signals; CFR reaching the target PAPR
 * with the expected EVM; bit-for-bit reproducibility; bad configurations. */
#include <complex.h> /* before fftw3.h: fftw_complex is then double _Complex */
#include <fftw3.h>
#include <math.h>
#include <stdint.h>

#include "distdpd/metrics.h"
#include "distdpd/ofdm.h"
#include "dd_test.h"
#include "dsp/ofdm_fft.h"

static const double PI = 3.14159265358979323846;

static dd_ofdm *make(const char *preset, int n_symbols, double papr) {
    dd_ofdm_cfg c;
    dd_ofdm *s = NULL;
    if (dd_ofdm_cfg_default(&c, preset) != DD_OK) return NULL;
    if (n_symbols > 0) c.n_symbols = n_symbols;
    c.papr_target_db = papr;
    dd_status st = dd_ofdm_create(&c, &s);
    CHECK(st == DD_OK, "create %s: %s", preset, dd_last_error());
    return s;
}

/* ---- the private FFT against a direct DFT (long double accumulation) ---- */
static void test_fft(void) {
    const size_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 12, 60, 61, 64, 67, 97, 128, 202, 210, 1000,
                            3072, 4099};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t];
        dd_ofdm_fft *p = NULL;
        CHECK_OK(dd_ofdm_fft_create(n, &p));
        if (!p) continue;
        CHECK(dd_ofdm_fft_size(p) == n, "size");
        dd_cf64 *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        dd_rng r;
        dd_rng_seed(&r, 100 + n);
        for (size_t i = 0; i < n; i++) x[i] = y[i] = CMPLX(dd_rng_normal(&r), dd_rng_normal(&r));
        dd_ofdm_fft_exec(p, y, 0);
        long double *cs = malloc(2 * n * sizeof *cs);
        for (size_t q = 0; q < n; q++) {
            long double a = -2.0L * 3.141592653589793238462643383279L * q / n;
            cs[2 * q] = cosl(a);
            cs[2 * q + 1] = sinl(a);
        }
        double emax = 0, ymax = 0;
        for (size_t k = 0; k < n; k++) {
            long double re = 0, im = 0;
            size_t q = 0;
            for (size_t i = 0; i < n; i++) {
                re += creal(x[i]) * cs[2 * q] - cimag(x[i]) * cs[2 * q + 1];
                im += creal(x[i]) * cs[2 * q + 1] + cimag(x[i]) * cs[2 * q];
                q += k;
                if (q >= n) q -= n;
            }
            double e = cabs(y[k] - CMPLX((double)re, (double)im));
            if (e > emax) emax = e;
            if (cabs(y[k]) > ymax) ymax = cabs(y[k]);
        }
        CHECK(emax <= 1e-12 * ymax, "n = %zu: max error %.3g of peak %.3g", n, emax, ymax);
        dd_ofdm_fft_exec(p, y, 1); /* inverse without 1/n */
        emax = 0;
        for (size_t i = 0; i < n; i++) {
            double e = cabs(y[i] / (double)n - x[i]);
            if (e > emax) emax = e;
        }
        CHECK(emax < 1e-12, "n = %zu: round trip error %.3g", n, emax);
        free(cs);
        free(x);
        free(y);
        dd_ofdm_fft_destroy(&p);
        CHECK(p == NULL, "destroy NULLs");
    }
}

/* ---- NR frame timing and layout ---- */
static void test_layout(void) {
    dd_ofdm *s = make("default", 0, 0);
    if (!s) return;
    dd_ofdm_info in;
    CHECK_OK(dd_ofdm_get_info(s, &in));
    /* 30 kHz, N = 3072: CP 144 N / 2048 = 216, +32 N / 2048 = 48 on symbols 0 and 14;
     * 28 symbols are exactly 1 ms at 92.16 MHz. */
    CHECK(in.fft_size == 3072, "N %zu", in.fft_size);
    CHECK(in.n_samples == 92160, "1 ms = %zu samples", in.n_samples);
    CHECK(in.symbol_cp[0] == 264 && in.symbol_cp[1] == 216 && in.symbol_cp[13] == 216 &&
              in.symbol_cp[14] == 264 && in.symbol_cp[27] == 216,
          "CP %d %d %d %d", in.symbol_cp[0], in.symbol_cp[1], in.symbol_cp[14], in.symbol_cp[27]);
    CHECK(in.symbol_start[0] == 264 && in.symbol_start[1] == 264 + 3072 + 216, "starts");
    CHECK(in.symbol_start[14] == 46080 + 264, "second half-subframe starts at 0.5 ms");
    CHECK(in.n_active == 612 && in.cfg.n_rb == 51, "51 RB = 612 sub-carriers (%zu)",
          in.n_active);
    CHECK(in.active_bin[0] == -306 && in.active_bin[611] == 305, "bins %d..%d",
          in.active_bin[0], in.active_bin[611]);
    CHECK(in.cp_min == 216 && in.wola_len == 54, "cp_min %d wola %d", in.cp_min, in.wola_len);
    CHECK_NEAR(in.occupied_bw, 18.36e6, 1e-3);
    dd_ofdm_destroy(&s);
    CHECK(s == NULL, "destroy NULLs");

    /* 15 kHz at 30.72 MHz: 7 symbols per 0.5 ms, CP 144 (+16 on the first) = 15360. */
    dd_ofdm_cfg c;
    CHECK_OK(dd_ofdm_cfg_default(&c, "1x20"));
    c.scs = 15e3;
    c.fs = 30.72e6;
    c.n_symbols = 14;
    CHECK_OK(dd_ofdm_create(&c, &s));
    if (s) {
        CHECK_OK(dd_ofdm_get_info(s, &in));
        CHECK(in.n_samples == 30720 && in.symbol_cp[7] == 160 && in.symbol_cp[8] == 144,
              "15 kHz: %zu samples, CP %d %d", in.n_samples, in.symbol_cp[7], in.symbol_cp[8]);
        CHECK(in.cfg.n_rb == 106, "n_rb table 20 MHz @ 15 kHz = %d", in.cfg.n_rb);
        dd_ofdm_destroy(&s);
    }

    /* Spec of the presets. */
    dd_spec sp;
    CHECK_OK(dd_ofdm_cfg_default(&c, "default"));
    CHECK_OK(dd_ofdm_spec(&c, &sp));
    CHECK(sp.fs == 92.16e6 && sp.bw_main == 20e6 && sp.bw_sub == 20e6 && sp.n_sub == 1 &&
              sp.nperseg == 3072,
          "default spec");
    CHECK_NEAR(sp.bw_occupied, 18.36e6, 1e-3);
    CHECK_OK(dd_ofdm_cfg_default(&c, "10x20"));
    CHECK_OK(dd_ofdm_spec(&c, &sp));
    CHECK(sp.bw_main == 200e6 && sp.n_sub == 10 && sp.bw_sub == 20e6 && sp.nperseg == 32768,
          "10x20 spec");
    /* centres at round(+-(10..90) MHz / 30 kHz): edge bins -3000-306 .. 3000+305 */
    CHECK_NEAR(sp.bw_occupied, (3305 + 3306 + 1) * 30e3, 1e-3);
}

/* ---- an independent rebuild of the frame (FFTW, the recipe in docs/signals.md) ---- */
static void test_rebuild(void) {
    dd_ofdm_cfg c;
    CHECK_OK(dd_ofdm_cfg_default(&c, "default"));
    c.n_symbols = 5;
    c.qam = 64;
    c.seed = 77;
    dd_ofdm *s = NULL;
    CHECK_OK(dd_ofdm_create(&c, &s));
    if (!s) return;
    dd_ofdm_info in;
    dd_ofdm_get_info(s, &in);
    size_t n, N = in.fft_size, K = in.n_active;
    const dd_cf32 *x = dd_ofdm_samples(s, &n);
    fftw_complex *u = fftw_malloc(N * sizeof *u), *f = fftw_malloc(n * sizeof *f);
    fftw_plan pu = fftw_plan_dft_1d((int)N, u, u, FFTW_BACKWARD, FFTW_ESTIMATE);
    fftw_plan pf = fftw_plan_dft_1d((int)n, f, f, FFTW_FORWARD, FFTW_ESTIMATE);
    fftw_plan pb = fftw_plan_dft_1d((int)n, f, f, FFTW_BACKWARD, FFTW_ESTIMATE);
    double complex *ref = calloc(n, sizeof *ref);
    size_t t = 0;
    int W = in.wola_len;
    for (int sy = 0; sy < in.n_symbols; sy++) {
        memset(u, 0, N * sizeof *u);
        for (size_t j = 0; j < K; j++) {
            int k = in.active_bin[j];
            dd_cf32 v = in.symbols[(size_t)sy * K + j];
            size_t b = (size_t)(k < 0 ? k + (int)N : k);
            u[b] = CMPLX(crealf(v), cimagf(v));
        }
        fftw_execute(pu);
        int cp = in.symbol_cp[sy];
        for (size_t j = 0; j < (size_t)cp + N + (size_t)W; j++) {
            size_t i = (j + N - (size_t)cp) % N;
            double w = 1;
            if (j < (size_t)W) w = pow(sin(PI * (j + 0.5) / (2.0 * W)), 2);
            if (j >= (size_t)cp + N) w = pow(cos(PI * (j - cp - N + 0.5) / (2.0 * W)), 2);
            ref[(t + j) % n] += w * u[i];
        }
        t += (size_t)cp + N;
    }
    CHECK(t == n, "frame length %zu vs %zu", t, n);
    /* mask: guard g = (20 - 18.36) / 2 MHz, margin = 0.4 g, roll-off to 0.95 g */
    double g = (20e6 - 18.36e6) / 2, margin = 0.4 * g, trans = 0.95 * g - margin;
    double lo = -306.5 * 30e3, hi = 305.5 * 30e3;
    for (size_t j = 0; j < n; j++) f[j] = ref[j];
    fftw_execute(pf);
    for (size_t j = 0; j < n; j++) {
        double fr = (j < (n + 1) / 2 ? (double)j : (double)j - (double)n) * c.fs / (double)n;
        double d = fmax(lo - fr, fr - hi) - margin;
        double m = d <= 0 ? 1 : d >= trans ? 0 : 0.5 + 0.5 * cos(PI * d / trans);
        f[j] *= m / (double)n;
    }
    fftw_execute(pb);
    double p = 0, e = 0;
    for (size_t j = 0; j < n; j++) p += pow(cabs(f[j]), 2);
    double sc = 1 / sqrt(p / (double)n);
    CHECK_NEAR(sc, in.scale, 1e-9 * sc);
    p = 0;
    for (size_t j = 0; j < n; j++) {
        double complex r = sc * f[j];
        e += pow(cabs(r - x[j]), 2);
        p += pow(cabs(r), 2);
    }
    double nmse = 10 * log10(e / p);
    CHECK(nmse < -130, "rebuild NMSE %.1f dB", nmse);
    printf("independent rebuild: NMSE %.1f dB (float32 rounding)\n", nmse);
    fftw_destroy_plan(pu);
    fftw_destroy_plan(pf);
    fftw_destroy_plan(pb);
    fftw_free(u);
    fftw_free(f);
    free(ref);
    dd_ofdm_destroy(&s);
}

/* ---- active sub-carriers exact: FFT (FFTW) of one symbol's window ---- */
static void check_bins(const char *preset, int nsym) {
    dd_ofdm *s = make(preset, nsym, 0);
    if (!s) return;
    dd_ofdm_info in;
    dd_ofdm_get_info(s, &in);
    size_t n, N = in.fft_size;
    const dd_cf32 *x = dd_ofdm_samples(s, &n);
    size_t a = in.symbol_start[1] - (size_t)in.cp_min / 2;
    REQUIRE(N > 0 && a + N <= n, "%s: FFT size %zu, window at %zu of %zu samples", preset, N, a, n);
    fftw_complex *u = fftw_malloc(N * sizeof *u);
    fftw_plan p = fftw_plan_dft_1d((int)N, u, u, FFTW_FORWARD, FFTW_ESTIMATE);
    for (size_t i = 0; i < N; i++) u[i] = x[a + i];
    fftw_execute(p);
    /* expected per-bin power: (N * scale)^2 * |X|^2, |X|^2 >= 2 / (2 (M-1) / 3) */
    char *act = calloc(N, 1);
    for (size_t j = 0; j < in.n_active; j++) {
        int k = in.active_bin[j];
        act[k < 0 ? k + (int)N : k] = 1;
    }
    double unit = pow((double)N * in.scale, 2), minsym = 3.0 / (in.cfg.qam - 1);
    size_t count = 0, wrong = 0;
    double min_on = 1e30, max_off = 0;
    for (size_t k = 0; k < N; k++) {
        double pw = pow(cabs(u[k]), 2) / unit;
        int on = pw > 0.1 * minsym;
        count += (size_t)on;
        if (on != act[k]) wrong++;
        if (act[k]) min_on = fmin(min_on, pw / minsym);
        else max_off = fmax(max_off, pw);
    }
    printf("%s: weakest active bin %.4f x min |X|^2, strongest inactive bin %.1f dB\n", preset,
           min_on, 10 * log10(max_off));
    size_t want = (size_t)in.cfg.n_carriers * 12 * (size_t)in.cfg.n_rb;
    CHECK(count == want && wrong == 0, "%s: %zu active bins (want %zu), %zu misplaced", preset,
          count, want, wrong);
    /* each carrier: 12 n_rb bins at centre + [-6 n_rb, 6 n_rb - 1] */
    for (int c = 0; c < in.cfg.n_carriers; c++) {
        int lo = in.carrier_centre[c] - 6 * in.cfg.n_rb, hi = in.carrier_centre[c] + 6 * in.cfg.n_rb - 1;
        CHECK(act[lo < 0 ? lo + (int)N : lo] && act[hi < 0 ? hi + (int)N : hi], "edges");
        int below = lo - 1, above = hi + 1;
        CHECK(!act[below < 0 ? below + (int)N : below] && !act[above < 0 ? above + (int)N : above],
              "%s carrier %d: edge neighbours inactive", preset, c);
        double want_centre = (c - (in.cfg.n_carriers - 1) / 2.0) * in.cfg.carrier_spacing / 30e3;
        CHECK(fabs(in.carrier_centre[c] - want_centre) <= 0.5, "centre %d vs %.2f",
              in.carrier_centre[c], want_centre);
    }
    fftw_destroy_plan(p);
    fftw_free(u);
    free(act);
    dd_ofdm_destroy(&s);
}

static void test_bins(void) {
    check_bins("default", 4);
    check_bins("2x100", 2);
    check_bins("10x20", 2);
}

/* ---- QAM: grid points and mean |X|^2 = 1 ---- */
static void test_qam(void) {
    const int qs[] = {4, 16, 64, 256, 1024};
    for (int t = 0; t < 5; t++) {
        dd_ofdm_cfg c;
        dd_ofdm_cfg_default(&c, "default");
        c.qam = qs[t];
        c.n_symbols = 14;
        dd_ofdm *s = NULL;
        CHECK_OK(dd_ofdm_create(&c, &s));
        if (!s) continue;
        dd_ofdm_info in;
        dd_ofdm_get_info(s, &in);
        size_t np = in.n_active * 14, off = 0;
        int m = (int)lround(sqrt(qs[t]));
        double a = sqrt(2.0 * (qs[t] - 1) / 3.0), mean = 0;
        int *used = calloc((size_t)m, sizeof(int));
        for (size_t i = 0; i < np; i++) {
            double re = crealf(in.symbols[i]) * a, im = cimagf(in.symbols[i]) * a;
            mean += pow(cabs(in.symbols[i]), 2) / (double)np;
            long ri = lround((re + m - 1) / 2), ii = lround((im + m - 1) / 2);
            if (fabs(re - (2 * ri - m + 1)) > 1e-4 || fabs(im - (2 * ii - m + 1)) > 1e-4 ||
                ri < 0 || ri >= m || ii < 0 || ii >= m)
                off++;
            else
                used[ri]++, used[ii]++;
        }
        CHECK(off == 0, "qam %d: %zu points off the grid", qs[t], off);
        int unused = 0;
        for (int l = 0; l < m; l++) unused += used[l] == 0;
        CHECK(unused == 0, "qam %d: %d levels never drawn", qs[t], unused);
        /* E|X|^4 = (7M - 13) / (5 (M - 1)) for square M-QAM at unit power */
        double var = (7.0 * qs[t] - 13) / (5.0 * (qs[t] - 1)) - 1;
        CHECK_NEAR(mean, 1.0, 5 * sqrt(var / (double)np) + 1e-6);
        free(used);
        dd_ofdm_destroy(&s);
    }
}

/* ---- clean ACLR (both definitions) and EVM per preset ---- */
static void test_clean_presets(void) {
    const char *ps[] = {"default", "1x100", "2x100", "5x40", "10x20"};
    for (int i = 0; i < 5; i++) {
        dd_ofdm_cfg c;
        dd_ofdm_cfg_default(&c, ps[i]);
        dd_ofdm *s = make(ps[i], 0, 0);
        if (!s) continue;
        size_t n;
        const dd_cf32 *x = dd_ofdm_samples(s, &n);
        dd_spec sp;
        CHECK_OK(dd_ofdm_spec(&c, &sp));
        dd_aclr_result a3 = {0, 0, 0}, ao = {0, 0, 0};
        CHECK_OK(dd_aclr(x, n, &sp, DD_ACLR_3GPP, &a3));
        CHECK_OK(dd_aclr(x, n, &sp, DD_ACLR_OPENDPD, &ao));
        CHECK(a3.left_db < -60 && a3.right_db < -60, "%s 3GPP ACLR %.1f / %.1f dBc", ps[i],
              a3.left_db, a3.right_db);
        CHECK(ao.left_db < -60 && ao.right_db < -60, "%s OpenDPD ACLR %.1f / %.1f dBc", ps[i],
              ao.left_db, ao.right_db);
        dd_ofdm_evm_result r;
        CHECK_OK(dd_ofdm_evm(s, x, n, NULL, &r));
        CHECK(r.evm_db < -60, "%s clean EVM %.1f dB", ps[i], r.evm_db);
        for (int k = 0; k < r.n_carriers; k++)
            CHECK(r.carrier_evm_db[k] < -60, "%s carrier %d EVM %.1f dB", ps[i], k,
                  r.carrier_evm_db[k]);
        CHECK(r.n_carriers == c.n_carriers, "carriers");
        CHECK(cabs(r.gain - 1) < 1e-3, "%s clean gain %g%+gi", ps[i], creal(r.gain),
              cimag(r.gain));
        double papr = 0;
        CHECK_OK(dd_papr_db(x, n, &papr));
        dd_ofdm_info in;
        dd_ofdm_get_info(s, &in);
        CHECK_NEAR(papr, in.papr_db, 1e-3);
        CHECK(papr > 9 && papr < 13, "%s raw PAPR %.2f dB", ps[i], papr);
        printf("%-7s n %7zu: ACLR 3GPP %.1f/%.1f, OpenDPD %.1f/%.1f dBc, EVM %.1f dB, PAPR %.2f dB\n",
               ps[i], n, a3.left_db, a3.right_db, ao.left_db, ao.right_db, r.evm_db, papr);
        dd_ofdm_destroy(&s);
    }
    /* Without WOLA and mask, CP-OFDM splatters: ACLR far above -60 dBc. */
    dd_ofdm_cfg c;
    dd_ofdm_cfg_default(&c, "default");
    c.band_limit = 0;
    c.wola_frac = 0;
    dd_ofdm *s = NULL;
    CHECK_OK(dd_ofdm_create(&c, &s));
    if (s) {
        size_t n;
        const dd_cf32 *x = dd_ofdm_samples(s, &n);
        dd_spec sp;
        dd_ofdm_spec(&c, &sp);
        dd_aclr_result a3 = {0, 0, 0}, ao = {0, 0, 0};
        CHECK_OK(dd_aclr(x, n, &sp, DD_ACLR_3GPP, &a3));
        CHECK_OK(dd_aclr(x, n, &sp, DD_ACLR_OPENDPD, &ao));
        CHECK(a3.avg_db > -50 && ao.avg_db > -50, "raw ACLR %.1f / %.1f dBc", a3.avg_db,
              ao.avg_db);
        dd_ofdm_evm_result r;
        CHECK_OK(dd_ofdm_evm(s, x, n, NULL, &r));
        CHECK(r.evm_db < -100, "raw frame demodulates exactly: %.1f dB", r.evm_db);
        printf("raw CP-OFDM (no WOLA, no mask): ACLR 3GPP %.1f, OpenDPD %.1f dBc, EVM %.1f dB\n",
               a3.avg_db, ao.avg_db, r.evm_db);
        dd_ofdm_destroy(&s);
    }
    /* Fixed odd CP with the longest WOLA ramp: the default window still fits. */
    dd_ofdm_cfg_default(&c, "default");
    c.cp_len = 215;
    c.wola_frac = 0.5;
    c.n_symbols = 6;
    CHECK_OK(dd_ofdm_create(&c, &s));
    if (s) {
        size_t n;
        const dd_cf32 *x = dd_ofdm_samples(s, &n);
        dd_ofdm_info in;
        dd_ofdm_get_info(s, &in);
        CHECK(n == 6 * (3072 + 215) && in.wola_len == 107, "fixed CP: n %zu, W %d", n,
              in.wola_len);
        dd_ofdm_evm_result r;
        CHECK_OK(dd_ofdm_evm(s, x, n, NULL, &r));
        CHECK(r.evm_db < -60, "odd CP, WOLA 0.5: EVM %.1f dB", r.evm_db);
        dd_ofdm_destroy(&s);
    }
}

/* ---- amplitude statistics: band-limited OFDM is complex Gaussian,
 *      P(|x|^2 / mean > g) = exp(-g) ---- */
static void test_gaussian(void) {
    dd_ofdm *s = make("1x100", 0, 0);
    if (!s) return;
    size_t n;
    const dd_cf32 *x = dd_ofdm_samples(s, &n);
    const double thr_db[3] = {0, 3, 6};
    for (int i = 0; i < 3; i++) {
        double g = pow(10, thr_db[i] / 10);
        size_t cnt = 0;
        for (size_t j = 0; j < n; j++) cnt += (double)(crealf(x[j]) * crealf(x[j]) + cimagf(x[j]) * cimagf(x[j])) > g;
        double p = (double)cnt / (double)n, want = exp(-g);
        CHECK(fabs(p / want - 1) < 0.12, "CCDF at %g dB: %.4g, Gaussian %.4g", thr_db[i], p, want);
    }
    dd_ofdm_destroy(&s);
}

/* ---- EVM of AWGN at known SNR: EVM^2 = sigma^2 / (N scale^2 |g|^2) * (S-1)/S
 *      (~ K / (N SNR) (S-1)/S, K/N = in-band noise fraction) ---- */
static void test_awgn_evm(void) {
    dd_ofdm *s = make("default", 0, 0);
    if (!s) return;
    dd_ofdm_info in;
    dd_ofdm_get_info(s, &in);
    size_t n;
    const dd_cf32 *x = dd_ofdm_samples(s, &n);
    dd_cf32 *y = malloc(n * sizeof *y);
    const double snr_db[2] = {20, 35};
    const dd_cf64 g = 0.6 * cexp(I * 0.7);
    for (int t = 0; t < 2; t++) {
        double s2 = pow(10, -snr_db[t] / 10) * pow(cabs(g), 2), sd = sqrt(s2 / 2);
        dd_rng r;
        dd_rng_seed(&r, 5 + (uint64_t)t);
        for (size_t i = 0; i < n; i++) {
            dd_cf64 v = g * x[i] + sd * CMPLX(dd_rng_normal(&r), dd_rng_normal(&r));
            y[i] = CMPLXF((float)creal(v), (float)cimag(v));
        }
        dd_ofdm_evm_result res;
        CHECK_OK(dd_ofdm_evm(s, y, n, NULL, &res));
        double S = in.n_symbols, N = (double)in.fft_size, K = (double)in.n_active;
        double e2 = s2 / (N * in.scale * in.scale * pow(cabs(g), 2)) * (S - 1) / S;
        double approx = sqrt(K / N * pow(10, -snr_db[t] / 10) * (S - 1) / S);
        /* ~17000 error points: the EVM estimate is good to ~0.5 % (1 sigma) */
        CHECK_NEAR(res.evm_pct / (100 * sqrt(e2)), 1.0, 0.03);
        CHECK_NEAR(res.evm_pct / (100 * approx), 1.0, 0.05);
        CHECK(cabs(res.gain - g) < 0.02, "gain %g%+gi", creal(res.gain), cimag(res.gain));
        printf("AWGN SNR %g dB: EVM %.3f %% (analytic %.3f %%, K/(N SNR) %.3f %%)\n", snr_db[t],
               res.evm_pct, 100 * sqrt(e2), 100 * approx);
    }
    free(y);
    dd_ofdm_destroy(&s);
}

/* ---- linear filter and delays are equalised away ---- */
static void test_linear_evm(void) {
    dd_ofdm *s = make("default", 0, 0);
    if (!s) return;
    size_t n;
    const dd_cf32 *x = dd_ofdm_samples(s, &n);
    dd_cf32 *y = malloc(n * sizeof *y);
    const dd_cf64 h[4] = {0.9, 0.2 - 0.1 * I, 0.05 * I, -0.03};
    for (size_t i = 0; i < n; i++) { /* causal FIR from rest (not circular) */
        dd_cf64 v = 0;
        for (size_t m = 0; m < 4 && m <= i; m++) v += h[m] * x[i - m];
        y[i] = CMPLXF((float)creal(v), (float)cimag(v));
    }
    dd_ofdm_evm_result r;
    CHECK_OK(dd_ofdm_evm(s, y, n, NULL, &r));
    CHECK(r.evm_db < -60, "FIR EVM %.1f dB", r.evm_db);
    printf("4-tap FIR: EVM %.1f dB after equalisation\n", r.evm_db);

    /* circular delays: inside the CP margin nothing is needed; beyond it, the search */
    const int delays[3] = {9, 700, -400};
    for (int t = 0; t < 3; t++) {
        int d = delays[t];
        for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[((long)i - d + (long)n) % (long)n];
        dd_ofdm_evm_opts o;
        dd_ofdm_evm_opts_default(&o);
        CHECK_OK(dd_ofdm_evm(s, y, n, &o, &r));
        if (t == 0)
            CHECK(r.evm_db < -60, "delay %d inside CP: EVM %.1f dB", d, r.evm_db);
        else
            CHECK(r.evm_db > -20, "delay %d without search: EVM %.1f dB", d, r.evm_db);
        o.max_lag = 1000;
        CHECK_OK(dd_ofdm_evm(s, y, n, &o, &r));
        CHECK(r.delay == d && r.evm_db < -60, "delay %d: found %d, EVM %.1f dB", d, r.delay,
              r.evm_db);
        CHECK(cabs(r.gain - 0.5) < 1e-3, "gain %g", cabs(r.gain));
    }
    free(y);
    dd_ofdm_destroy(&s);
}

/* ---- crest-factor reduction ---- */
static void test_cfr(void) {
    const double tgt[2] = {8, 7};
    const double lo[2] = {1.0, 2.5}, hi[2] = {3.0, 5.0}; /* domain.md: ~1.9 %, ~3.2 % */
    for (int t = 0; t < 2; t++) {
        dd_ofdm_cfg c;
        dd_ofdm_cfg_default(&c, "default");
        c.papr_target_db = tgt[t];
        dd_ofdm *s = make("default", 0, tgt[t]);
        if (!s) continue;
        size_t n;
        const dd_cf32 *x = dd_ofdm_samples(s, &n);
        dd_ofdm_info in;
        dd_ofdm_get_info(s, &in);
        double papr = 0, rms = 0;
        CHECK_OK(dd_papr_db(x, n, &papr));
        CHECK(fabs(papr - tgt[t]) <= 0.3, "CFR %g dB: PAPR %.2f dB", tgt[t], papr);
        CHECK(in.papr_raw_db > tgt[t] + 1.5, "raw PAPR %.2f", in.papr_raw_db);
        for (size_t i = 0; i < n; i++) rms += pow(cabsf(x[i]), 2) / (double)n;
        CHECK_NEAR(rms, 1.0, 1e-5);
        dd_ofdm_evm_result r;
        CHECK_OK(dd_ofdm_evm(s, x, n, NULL, &r));
        CHECK(r.evm_pct > lo[t] && r.evm_pct < hi[t], "CFR %g dB: EVM %.2f %%", tgt[t],
              r.evm_pct);
        dd_spec sp;
        dd_ofdm_spec(&c, &sp);
        dd_aclr_result a3 = {0, 0, 0}, ao = {0, 0, 0};
        CHECK_OK(dd_aclr(x, n, &sp, DD_ACLR_3GPP, &a3));
        CHECK_OK(dd_aclr(x, n, &sp, DD_ACLR_OPENDPD, &ao));
        CHECK(fmax(a3.left_db, a3.right_db) < -60 && fmax(ao.left_db, ao.right_db) < -60,
              "CFR ACLR %.1f / %.1f", a3.avg_db, ao.avg_db);
        printf("CFR target %g dB: PAPR %.2f -> %.2f dB in %d passes, EVM %.2f %%, ACLR %.1f dBc\n",
               tgt[t], in.papr_raw_db, papr, in.cfr_iters_done, r.evm_pct, a3.avg_db);
        dd_ofdm_destroy(&s);
    }
}

/* ---- reproducibility ---- */
static void test_repro(void) {
    dd_ofdm_cfg c;
    dd_ofdm_cfg_default(&c, "2x100");
    c.n_symbols = 3;
    c.papr_target_db = 8;
    dd_ofdm *a = NULL, *b = NULL, *d = NULL;
    CHECK_OK(dd_ofdm_create(&c, &a));
    CHECK_OK(dd_ofdm_create(&c, &b));
    c.seed = 2;
    CHECK_OK(dd_ofdm_create(&c, &d));
    if (a && b && d) {
        size_t na, nb, nd;
        const dd_cf32 *xa = dd_ofdm_samples(a, &na), *xb = dd_ofdm_samples(b, &nb),
                      *xd = dd_ofdm_samples(d, &nd);
        dd_ofdm_info ia, ib;
        dd_ofdm_get_info(a, &ia);
        dd_ofdm_get_info(b, &ib);
        CHECK(na == nb && memcmp(xa, xb, na * sizeof *xa) == 0, "same seed: samples differ");
        CHECK(memcmp(ia.symbols, ib.symbols, ia.n_active * 3 * sizeof(dd_cf32)) == 0,
              "same seed: symbols differ");
        CHECK(nd == na && memcmp(xa, xd, na * sizeof *xa) != 0, "other seed: same samples");
    }
    dd_ofdm_destroy(&a);
    dd_ofdm_destroy(&b);
    dd_ofdm_destroy(&d);
}

/* ---- scaling ---- */
static void test_scale(void) {
    dd_ofdm *s = make("default", 2, 0);
    if (!s) return;
    size_t n;
    const dd_cf32 *x0 = dd_ofdm_samples(s, &n);
    dd_cf32 *x = malloc(n * sizeof *x);
    memcpy(x, x0, n * sizeof *x);
    double g = 0, rms = 0, pk = 0;
    CHECK_OK(dd_ofdm_scale(x, n, DD_OFDM_SCALE_RMS, 0.3, &g));
    for (size_t i = 0; i < n; i++) rms += pow(cabsf(x[i]), 2) / (double)n;
    CHECK_NEAR(sqrt(rms), 0.3, 1e-6);
    CHECK_NEAR(g, 0.3, 1e-5); /* the frame has RMS 1 */
    CHECK_OK(dd_ofdm_scale(x, n, DD_OFDM_SCALE_PEAK, 0.75, NULL));
    for (size_t i = 0; i < n; i++) pk = fmax(pk, cabsf(x[i]));
    CHECK_NEAR(pk, 0.75, 1e-6);
    memset(x, 0, n * sizeof *x);
    CHECK_ERR(dd_ofdm_scale(x, n, DD_OFDM_SCALE_RMS, 1, NULL), DD_ERR_RANGE, "zero");
    CHECK_ERR(dd_ofdm_scale(x, n, DD_OFDM_SCALE_RMS, -1, NULL), DD_ERR_ARG, "value");
    free(x);
    dd_ofdm_destroy(&s);
}

/* ---- invalid configurations ---- */
static void bad(dd_ofdm_cfg c, const char *needle) {
    dd_ofdm *s = (dd_ofdm *)&c; /* any non-NULL value: create must reset it */
    CHECK_ERR(dd_ofdm_create(&c, &s), DD_ERR_ARG, needle);
    CHECK(s == NULL, "create left *out non-NULL for '%s'", needle);
    CHECK_ERR(dd_ofdm_cfg_validate(&c), DD_ERR_ARG, needle);
    dd_spec sp;
    CHECK_ERR(dd_ofdm_spec(&c, &sp), DD_ERR_ARG, needle);
}

static void test_bad_cfg(void) {
    dd_ofdm_cfg d, c;
    dd_ofdm_cfg_default(&d, "default");
    CHECK_OK(dd_ofdm_cfg_validate(&d));
    c = d, c.qam = 8, bad(c, "qam");
    c = d, c.fs = 100e6, bad(c, "fs / dd_ofdm_cfg.scs");
    c = d, c.scs = 25e3, bad(c, "scs");
    c = d, c.fs = 15.36e6, bad(c, "n_rb"); /* N = 512 < 612 sub-carriers */
    c = d, c.fs = 15.36e6, bad(c, "fs = 15.36 MHz");
    c = d, c.n_symbols = -3, bad(c, "n_symbols");
    c = d, c.n_symbols = 0, bad(c, "n_symbols");
    c = d, c.n_rb = 60, bad(c, "carrier_bw");
    c = d, c.n_rb = -1, bad(c, "n_rb");
    c = d, c.carrier_bw = 17e6, bad(c, "no table entry");
    c = d, c.n_carriers = 2, c.carrier_spacing = 15e6, bad(c, "carrier_spacing");
    c = d, c.carrier_spacing = 18e6, bad(c, "carrier_spacing");
    c = d, c.n_carriers = 0, bad(c, "n_carriers");
    c = d, c.n_carriers = 17, bad(c, "n_carriers");
    c = d, c.papr_target_db = 1, bad(c, "papr_target_db");
    c = d, c.papr_target_db = NAN, bad(c, "papr_target_db");
    c = d, c.cfr_iters = 0, bad(c, "cfr_iters");
    c = d, c.wola_frac = 0.6, bad(c, "wola_frac");
    c = d, c.cp_len = 3072, bad(c, "cp_len");
    c = d, c.fs = -1, bad(c, "fs");
    c = d, c.band_limit = 2, bad(c, "band_limit");
    CHECK_ERR(dd_ofdm_cfg_default(&c, "3x7"), DD_ERR_ARG, "3x7");
    CHECK(c.fs == d.fs && c.qam == d.qam, "unknown preset leaves the default");
    CHECK_ERR(dd_ofdm_create(NULL, NULL), DD_ERR_ARG, "out");

    dd_ofdm *s = make("default", 2, 0);
    if (!s) return;
    size_t n;
    const dd_cf32 *x = dd_ofdm_samples(s, &n);
    dd_ofdm_evm_result r;
    dd_ofdm_evm_opts o;
    CHECK_ERR(dd_ofdm_evm(s, x, n - 1, NULL, &r), DD_ERR_MISMATCH, "n = ");
    dd_ofdm_evm_opts_default(&o);
    o.cp_frac = 0.9;
    CHECK_ERR(dd_ofdm_evm(s, x, n, &o, &r), DD_ERR_ARG, "cp_frac");
    dd_ofdm_evm_opts_default(&o);
    o.max_lag = (int)n;
    CHECK_ERR(dd_ofdm_evm(s, x, n, &o, &r), DD_ERR_ARG, "max_lag");
    dd_cf32 *z = calloc(n, sizeof *z);
    CHECK_ERR(dd_ofdm_evm(s, z, n, NULL, &r), DD_ERR_NUMERIC, "sub-carrier");
    free(z);
    dd_ofdm_destroy(&s);
    s = make("default", 1, 0);
    if (s) {
        x = dd_ofdm_samples(s, &n);
        CHECK_ERR(dd_ofdm_evm(s, x, n, NULL, &r), DD_ERR_ARG, "n_symbols >= 2");
        dd_ofdm_destroy(&s);
    }
    dd_ofdm_destroy(&s); /* twice is fine */
    dd_ofdm_destroy(NULL);
}

int main(void) {
    test_fft();
    test_layout();
    test_rebuild();
    test_bins();
    test_qam();
    test_clean_presets();
    test_gaussian();
    test_awgn_evm();
    test_linear_evm();
    test_cfr();
    test_repro();
    test_scale();
    test_bad_cfg();
    return dd_test_done("test_ofdm");
}
