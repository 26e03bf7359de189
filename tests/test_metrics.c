/* Metrics, analytic checks: Welch PSD levels of white and FIR-filtered noise, exact Hann
 * tone values, exact NMSE / spectral EVM / PAPR / CCDF on constructed data, the ACLR
 * slope of a cubic nonlinearity (both definitions), alignment of an injected delay and
 * complex gain (direct and FFT paths), AM/AM-AM/PM of a two-level signal, and invalid
 * arguments. The OpenDPD reference vectors are in test_metrics_ref.c. */
#include "metrics_test_util.h"

#include <pthread.h>

static const double PI = 3.14159265358979323846;

static dd_cf32 *noise(size_t n, double s2, uint64_t seed) {
    dd_rng r;
    dd_rng_seed(&r, seed);
    dd_cf32 *x = malloc(n * sizeof *x);
    double s = sqrt(s2 / 2);
    for (size_t i = 0; i < n; i++)
        x[i] = CMPLXF((float)(s * dd_rng_normal(&r)), (float)(s * dd_rng_normal(&r)));
    return x;
}

/* White noise: density level s2/fs, Parseval, spectrum-scaling sum = 1.5 s2 (Hann). */
static void test_white_noise(void) {
    const size_t np = 256, n = 256 * 400;
    const double fs = 10e6, s2 = 0.37;
    dd_cf32 *x = noise(n, s2, 11);
    double psd[256], fq[256], mean = 0, worst = 0;
    CHECK_OK(dd_welch(x, n, fs, np, DD_PSD_DENSITY, 1, psd, fq));
    for (size_t k = 0; k < np; k++) mean += psd[k] / (double)np;
    for (size_t k = 0; k < np; k++) {
        double d = fabs(psd[k] / (s2 / fs) - 1);
        if (k != np / 2 && d > worst) worst = d; /* DC bin is detrended away */
    }
    /* 256 bins x ~800 averages: the mean is good to ~0.5 %, one bin to ~4 % (1 sigma) */
    CHECK_NEAR(mean * (np - 1) / np / (s2 / fs), 1.0, 0.02);
    CHECK(worst < 0.25, "worst bin deviation %.3f", worst);
    /* mean removal before the window leaves E|sum w (x - mean)|^2 = s2 (sum w^2 -
     * (sum w)^2 / N) = s2 N / 8 in the DC bin: one third of the noise level */
    CHECK_NEAR(psd[np / 2] / (s2 / fs), 1.0 / 3.0, 0.1);
    printf("white noise: mean density / (s2/fs) = %.4f, worst bin %.3f\n",
           mean / (s2 / fs), worst);
    CHECK_NEAR(fq[0], -fs / 2, 1e-6);
    CHECK_NEAR(fq[np / 2], 0.0, 0.0);
    CHECK_NEAR(fq[np - 1], fs / 2 - fs / (double)np, 1e-6);
    /* no detrend: DC bin is a normal noise bin */
    CHECK_OK(dd_welch(x, n, fs, np, DD_PSD_DENSITY, 0, psd, NULL));
    double sum = 0;
    for (size_t k = 0; k < np; k++) sum += psd[k];
    CHECK_NEAR(sum * fs / (double)np / s2, 1.0, 0.02); /* Parseval: integral = power */
    CHECK_OK(dd_welch(x, n, fs, np, DD_PSD_SPECTRUM, 0, psd, NULL));
    sum = 0;
    for (size_t k = 0; k < np; k++) sum += psd[k];
    CHECK_NEAR(sum / s2, 1.5, 0.03); /* N sum w^2 / (sum w)^2 = 1.5 for Hann */
    free(x);
}

/* A complex tone at a bin centre: spectrum peak A^2 exactly, neighbours A^2/4 (the Hann
 * DFT is N/2 at 0 and -N/4 at +-1 bin), zero elsewhere; density peak A^2 2N/(3 fs). */
static void test_tone(void) {
    const size_t np = 64, n = 64 * 5 + 17;
    const double fs = 1.0e6, A = 0.75;
    const long bins[2] = {5, -21};
    for (int t = 0; t < 2; t++) {
        dd_cf32 *x = malloc(n * sizeof *x);
        for (size_t m = 0; m < n; m++) {
            double ph = 2 * PI * (double)bins[t] * (double)(m % np) / (double)np;
            x[m] = (dd_cf32)(A * cexp(I * ph));
        }
        double psd[64], fq[64];
        CHECK_OK(dd_welch(x, n, fs, np, DD_PSD_SPECTRUM, 1, psd, fq));
        size_t kp = (size_t)((long)np / 2 + bins[t]);
        size_t arg = 0;
        for (size_t k = 1; k < np; k++)
            if (psd[k] > psd[arg]) arg = k;
        CHECK(arg == kp, "peak at %zu, want %zu", arg, kp);
        CHECK_NEAR(fq[arg], (double)bins[t] * fs / (double)np, 1e-6);
        CHECK_NEAR(psd[kp], A * A, 2e-6 * A * A);
        CHECK_NEAR(psd[kp - 1], A * A / 4, 1e-6 * A * A);
        CHECK_NEAR(psd[kp + 1], A * A / 4, 1e-6 * A * A);
        double rest = 0;
        for (size_t k = 0; k < np; k++)
            if (k + 1 < kp || k > kp + 1) rest += psd[k];
        CHECK(rest < 1e-10 * A * A, "leakage outside the main lobe %g", rest);
        CHECK_OK(dd_welch(x, n, fs, np, DD_PSD_DENSITY, 1, psd, NULL));
        CHECK_NEAR(psd[kp], A * A * 2.0 * (double)np / (3.0 * fs), 2e-6 * psd[kp]);
        /* OpenDPD segmented PSD: every full segment holds whole cycles -> same peak;
         * the 17-sample padded segment adds a smaller one, so only bound it */
        CHECK_OK(dd_psd_segmented(x, np * 5, fs, np, DD_PSD_SPECTRUM, psd, NULL));
        CHECK_NEAR(psd[kp], A * A, 2e-6 * A * A);
        free(x);
    }
}

/* White noise through a FIR h: PSD = s2 |H(f)|^2 / fs. */
static void test_fir(void) {
    const size_t np = 128, n = 128 * 600;
    const double fs = 1.0, s2 = 2.0;
    const dd_cf64 h[3] = {1.0, 0.6, 0.2 * I};
    dd_cf32 *w = noise(n + 2, s2, 5), *y = malloc(n * sizeof *y);
    for (size_t m = 0; m < n; m++)
        y[m] = (dd_cf32)(h[0] * w[m + 2] + h[1] * w[m + 1] + h[2] * w[m]);
    double psd[128], fq[128], ratio = 0, worst = 0;
    CHECK_OK(dd_welch(y, n, fs, np, DD_PSD_DENSITY, 0, psd, fq));
    for (size_t k = 0; k < np; k++) {
        dd_cf64 H = 0;
        for (int i = 0; i < 3; i++) H += h[i] * cexp(-2 * PI * I * fq[k] * i / fs);
        double want = s2 * creal(H * conj(H)) / fs;
        double r = psd[k] / want;
        ratio += r / (double)np;
        if (fabs(r - 1) > worst) worst = fabs(r - 1);
    }
    CHECK_NEAR(ratio, 1.0, 0.02);
    CHECK(worst < 0.25, "worst bin ratio deviation %.3f", worst);
    printf("FIR: mean PSD / (s2|H|^2/fs) = %.4f, worst bin %.3f\n", ratio, worst);
    free(w);
    free(y);
}

/* NMSE and spectral EVM on data where the exact answer is known. */
static void test_nmse_evm_exact(void) {
    const size_t np = 64, n = 64 + 32; /* one full and one half (padded) segment */
    dd_cf32 *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    dd_rng r;
    dd_rng_seed(&r, 3);
    for (size_t i = 0; i < n; i++) {
        x[i] = CMPLXF(dd_rng_uniform(&r) < 0.5 ? -1.0f : 1.0f, dd_rng_uniform(&r) < 0.5 ? -1.0f : 1.0f);
        y[i] = x[i] + (i < np ? 0.25f : 0.5f); /* exact in float */
    }
    double v;
    CHECK_OK(dd_nmse_db(x, y, n, &v));
    double want = 10 * log10((64 * 0.0625 + 32 * 0.25) / (2.0 * 96));
    CHECK_NEAR(v, want, 1e-12);
    CHECK_OK(dd_nmse_segmented_db(x, y, n, np, &v));
    CHECK_NEAR(v, 0.5 * (10 * log10(0.0625 / 2) + 10 * log10(0.25 / 2)), 1e-12);
    /* one short segment: segmented == pooled */
    double a, b;
    CHECK_OK(dd_nmse_segmented_db(x + np, y + np, 32, np, &a));
    CHECK_OK(dd_nmse_db(x + np, y + np, 32, &b));
    CHECK_NEAR(a, b, 1e-12);
    CHECK_NEAR(a, 10 * log10(0.25 / 2), 1e-12);
    /* test = c * ref exactly: NMSE = 20 log10|c - 1|, spectral EVM = 20 log10|c - 1| */
    dd_spec sp;
    dd_spec_default(&sp);
    size_t m = 3000;
    dd_cf32 *ref = mt_bandlimited_noise(m, sp.fs, 160e6, 0.3, 9), *t = malloc(m * sizeof *t);
    for (size_t i = 0; i < m; i++) t[i] = 0.5f * ref[i];
    CHECK_OK(dd_evm_spectral_db(ref, t, m, &sp, &v));
    CHECK_NEAR(v, 20 * log10(0.5), 1e-9);
    CHECK_OK(dd_nmse_segmented_db(ref, t, m, sp.nperseg, &v));
    CHECK_NEAR(v, 20 * log10(0.5), 1e-9);
    for (size_t i = 0; i < m; i++) t[i] = -1.0f * ref[i];
    CHECK_OK(dd_evm_spectral_db(ref, t, m, &sp, &v));
    CHECK_NEAR(v, 20 * log10(2.0), 1e-9);
    dd_metric_set ms;
    CHECK_OK(dd_metrics_compute(ref, t, m, &sp, DD_ACLR_OPENDPD, 1, &ms));
    CHECK_NEAR(ms.nmse_db, 20 * log10(2.0), 1e-9);
    CHECK_NEAR(ms.evm_db, 20 * log10(2.0), 1e-9);
    dd_aclr_result ar;
    CHECK_OK(dd_aclr(t, m, &sp, DD_ACLR_OPENDPD, &ar));
    CHECK_NEAR(ms.aclr.left_db, ar.left_db, 0.0);
    CHECK_NEAR(ms.aclr.right_db, ar.right_db, 0.0);
    free(x);
    free(y);
    free(ref);
    free(t);
}

/* Gain normalisation: y = g x + w (w white, -40 dB below g x): the least-squares gain
 * recovers g to the noise's share (|dg|/|g| ~ 10^(-40/20) / sqrt(n)) and the NMSE of y / g
 * against x is the noise level; a given real gain |g| leaves the phase error of arg g;
 * no gain gives 20 log10|g - 1| dominated; ACLR does not depend on the gain. */
static void test_gain_normalised(void) {
    dd_spec sp;
    dd_spec_default(&sp);
    const size_t n = 20 * sp.nperseg;
    dd_cf32 *x = mt_bandlimited_noise(n, sp.fs, 160e6, 0.3, 21), *w = noise(n, 1.0, 22);
    dd_cf32 *y = malloc(n * sizeof *y);
    const dd_cf64 g = 3.2 * cexp(I * 0.7);
    double px = 0;
    for (size_t i = 0; i < n; i++) px += creal(x[i] * conj(x[i]));
    px /= (double)n;
    const double sw = sqrt(px) * cabs(g) * 0.01; /* noise power 1e-4 |g|^2 px: -40 dB */
    double pw = 0;
    for (size_t i = 0; i < n; i++) {
        y[i] = (dd_cf32)(g * x[i] + sw * w[i]);
        dd_cf64 e = (dd_cf64)y[i] - g * x[i];
        pw += creal(e * conj(e));
    }
    const double want_nmse = 10 * log10(pw / (cabs(g) * cabs(g) * px * (double)n));
    dd_metric_set m, m0;
    dd_cf64 gu = 0;
    CHECK_OK(dd_metrics_compute_gain(x, y, n, &sp, DD_ACLR_OPENDPD, 1, 1, 0, &gu, &m));
    CHECK(cabs(gu - g) / cabs(g) < 1e-3, "least-squares gain %g%+gi, want %g%+gi", creal(gu), cimag(gu), creal(g),
          cimag(g));
    CHECK_NEAR(m.nmse_db, want_nmse, 0.05); /* the noise level, about -40 dB */
    CHECK_NEAR(m.nmse_db, -40.0, 0.5);
    const dd_cf64 g_auto = gu;
    /* the gain given as |g| (real): the residual is |e^{j0.7} - 1|^2 = 2 - 2 cos 0.7 */
    CHECK_OK(dd_metrics_compute_gain(x, y, n, &sp, DD_ACLR_OPENDPD, 1, 0, cabs(g), &gu, &m0));
    CHECK_NEAR(creal(gu), cabs(g), 0.0);
    CHECK_NEAR(m0.nmse_db, 10 * log10(2 - 2 * cos(0.7) + 1e-4), 0.05);
    /* the exact complex gain: the noise level again */
    CHECK_OK(dd_metrics_compute_gain(x, y, n, &sp, DD_ACLR_OPENDPD, 1, 0, g, NULL, &m0));
    CHECK_NEAR(m0.nmse_db, want_nmse, 0.01);
    /* without normalisation the comparison is meaningless: 20 log10|g - 1| */
    CHECK_OK(dd_metrics_compute(x, y, n, &sp, DD_ACLR_OPENDPD, 1, &m0));
    CHECK_NEAR(m0.nmse_db, 20 * log10(cabs(g - 1.0)), 0.05);
    CHECK_NEAR(m.aclr.avg_db, m0.aclr.avg_db, 1e-3);
    CHECK(m.evm_db < m0.evm_db - 20, "EVM after the gain %.2f dB, without %.2f dB", m.evm_db, m0.evm_db);
    printf("gain auto: g = %.5f%+.5fi (true 3.2 e^j0.7 = %.5f%+.5fi), NMSE %.3f dB (noise %.3f dB), EVM %.2f dB\n",
           creal(g_auto), cimag(g_auto), creal(g), cimag(g), m.nmse_db, want_nmse, m.evm_db);
    /* errors: zero gain, no reference energy */
    CHECK_ERR(dd_metrics_compute_gain(x, y, n, &sp, DD_ACLR_OPENDPD, 1, 0, 0, NULL, &m0), DD_ERR_RANGE, "non-zero");
    memset(w, 0, n * sizeof *w);
    CHECK_ERR(dd_metrics_compute_gain(w, y, n, &sp, DD_ACLR_OPENDPD, 1, 1, 0, NULL, &m0), DD_ERR_RANGE, "energy");
    free(x);
    free(w);
    free(y);
}

/* OpenDPD bands on the Welch PSD against aligned segments: plain band-limited noise
 * agrees within a dB (no sentence); a signal made of nperseg-long blocks, each the same
 * cyclically band-limited block scaled by its own complex factor, has no skirts in
 * aligned segments (below -100 dBc) but jumps at every block edge that the 50 %
 * overlapping Welch segments see (above -60 dBc): dd_aclr_disagreement writes one sentence
 * with both numbers and the "repeats in aligned blocks" cause; a small difference gets
 * the other cause; NaN gives none. */
static void test_aclr_welch_disagreement(void) {
    dd_spec sp;
    dd_spec_default(&sp);
    const size_t T = sp.nperseg, nb = 12, n = nb * T;
    dd_cf32 *x = mt_bandlimited_noise(n, sp.fs, 160e6, 0.3, 31);
    dd_aclr_result al, we;
    char buf[1024];
    CHECK_OK(dd_aclr(x, n, &sp, DD_ACLR_OPENDPD, &al));
    CHECK_OK(dd_aclr(x, n, &sp, DD_ACLR_OPENDPD_WELCH, &we));
    CHECK(fabs(al.avg_db - we.avg_db) < 1.0, "noise: aligned %.2f vs Welch %.2f dBc", al.avg_db, we.avg_db);
    CHECK(dd_aclr_disagreement("noise", &al, &we, n, T, DD_ACLR_AGREE_DB, buf, sizeof buf) == 0 && buf[0] == 0,
          "noise: no sentence");
    dd_cf32 *blk = mt_bandlimited_noise(T, sp.fs, 160e6, 0.3, 32), *y = malloc(n * sizeof *y);
    dd_rng r;
    dd_rng_seed(&r, 33);
    for (size_t b = 0; b < nb; b++) {
        const dd_cf32 f = CMPLXF((float)(0.5 + dd_rng_uniform(&r)), (float)(dd_rng_uniform(&r) - 0.5));
        for (size_t i = 0; i < T; i++) y[b * T + i] = f * blk[i];
    }
    CHECK_OK(dd_aclr(y, n, &sp, DD_ACLR_OPENDPD, &al));
    CHECK_OK(dd_aclr(y, n, &sp, DD_ACLR_OPENDPD_WELCH, &we));
    CHECK(al.avg_db < -100 && we.avg_db > -60, "blocks: aligned %.1f dBc, Welch %.1f dBc", al.avg_db, we.avg_db);
    CHECK(dd_aclr_disagreement("the input", &al, &we, n, T, DD_ACLR_AGREE_DB, buf, sizeof buf) == 1, "blocks: a sentence");
    char num[32];
    snprintf(num, sizeof num, "(%.1f dBc", al.avg_db);
    CHECK(strstr(buf, num) && strstr(buf, "repeats in aligned blocks") && strstr(buf, "the input"), "sentence: %s", buf);
    printf("blocks: OpenDPD ACLR %.1f dBc, Welch %.1f dBc\n", al.avg_db, we.avg_db);
    dd_aclr_result a2 = we;
    a2.avg_db = we.avg_db - 5.0;
    CHECK(dd_aclr_disagreement("m", &a2, &we, n, T, DD_ACLR_AGREE_DB, buf, sizeof buf) == 1 && strstr(buf, "block edges") &&
              !strstr(buf, "repeats"),
          "a 5 dB difference: %s", buf);
    /* a split that is not a multiple of nperseg, cut hard: the padded last segment leaks
     * (aligned above Welch) and the sentence names the padding with the counts */
    const size_t m = 2 * T + T / 2;
    CHECK_OK(dd_aclr(x, m, &sp, DD_ACLR_OPENDPD, &al));
    CHECK_OK(dd_aclr(x, m, &sp, DD_ACLR_OPENDPD_WELCH, &we));
    printf("padded: OpenDPD ACLR %.1f dBc, Welch %.1f dBc\n", al.avg_db, we.avg_db);
    CHECK(al.avg_db > we.avg_db + 20, "padded: aligned %.1f dBc not above Welch %.1f dBc", al.avg_db, we.avg_db);
    {
        char want[64];
        snprintf(want, sizeof want, "(%zu samples hold 2 full segments and %zu more)", m, T / 2);
        CHECK(dd_aclr_disagreement("x", &al, &we, m, T, DD_ACLR_AGREE_DB, buf, sizeof buf) == 1 && strstr(buf, want) &&
                  strstr(buf, "zero-pads"),
              "padding sentence: %s", buf);
    }
    a2.avg_db = we.avg_db + 5.0;
    CHECK(dd_aclr_disagreement("m", &a2, &we, 2 * T, T, DD_ACLR_AGREE_DB, buf, sizeof buf) == 1 && !strstr(buf, "zero-pads"),
          "no padding with whole segments: %s", buf);
    a2.avg_db = NAN;
    CHECK(dd_aclr_disagreement("m", &a2, &we, n, T, DD_ACLR_AGREE_DB, buf, sizeof buf) == 0, "NaN: no sentence");
    CHECK_ERR(dd_aclr(y, T - 1, &sp, DD_ACLR_OPENDPD_WELCH, &we), DD_ERR_ARG, "nperseg");
    free(x);
    free(blk);
    free(y);
}

/* y = x + a x|x|^2 on a band-limited x: adjacent power ~ a^2, so ACLR rises 6.02 dB per
 * doubling of a (20 dB per decade) while the out-of-band floor of x is negligible. */
static void test_cubic_aclr_slope(void) {
    dd_spec sp;
    dd_spec_default(&sp);
    sp.bw_occupied = 180e6;
    const size_t n = 2560 * 8;
    dd_cf32 *x = mt_bandlimited_noise(n, sp.fs, 180e6, 0.25, 21), *y = malloc(n * sizeof *y);
    const double as[4] = {0.005, 0.01, 0.02, 0.05};
    double aclr[2][4];
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < 4; i++) {
            for (size_t m = 0; m < n; m++) {
                dd_cf64 v = x[m];
                y[m] = (dd_cf32)(v + as[i] * v * creal(v * conj(v)));
            }
            dd_aclr_result r;
            CHECK_OK(dd_aclr(y, n, &sp, (dd_aclr_def)d, &r));
            aclr[d][i] = r.avg_db;
            CHECK_NEAR(r.avg_db, 0.5 * (r.left_db + r.right_db), 1e-12);
            CHECK(fabs(r.left_db - r.right_db) < 3, "L %g R %g", r.left_db, r.right_db);
        }
        printf("cubic ACLR (%s): a=0.005 %.2f, 0.01 %.2f, 0.02 %.2f, 0.05 %.2f dB\n",
               d ? "3GPP" : "OpenDPD", aclr[d][0], aclr[d][1], aclr[d][2], aclr[d][3]);
        CHECK_NEAR(aclr[d][1] - aclr[d][0], 20 * log10(2.0), 0.3);
        CHECK_NEAR(aclr[d][2] - aclr[d][1], 20 * log10(2.0), 0.3);
        CHECK_NEAR(aclr[d][3] - aclr[d][0], 20.0, 0.6);
    }
    /* the 3GPP adjacent channel is as wide as the channel, OpenDPD's one sub-channel
     * next to the edge: both are finite, different numbers */
    CHECK(aclr[0][1] > -80 && aclr[1][1] > -80, "%g %g", aclr[0][1], aclr[1][1]);
    free(x);
    free(y);
}

static void test_papr_ccdf(void) {
    const size_t n = 1000;
    dd_cf32 *x = malloc(n * sizeof *x);
    dd_rng r;
    dd_rng_seed(&r, 1);
    for (size_t i = 0; i < n; i++) x[i] = (dd_cf32)cexp(I * 2 * PI * dd_rng_uniform(&r));
    double v;
    CHECK_OK(dd_papr_db(x, n, &v));
    CHECK_NEAR(v, 0.0, 1e-5);
    for (size_t i = 0; i < n; i++) x[i] = i % 4 == 1 ? CMPLXF(0.0f, -2.0f) : 1.0f;
    CHECK_OK(dd_papr_db(x, n, &v));
    CHECK_NEAR(v, 10 * log10(4.0 / 1.75), 1e-12);
    /* CCDF: powers 1, 4, 9, 16 (mean 7.5) in equal shares */
    for (size_t i = 0; i < n; i++) x[i] = CMPLXF((float)(i % 4 + 1), 0.0f);
    double thr[6] = {-INFINITY, 10 * log10(0.5 / 7.5), 10 * log10(3 / 7.5),
                     10 * log10(10 / 7.5), 10 * log10(20 / 7.5), 0.0};
    double p[6];
    CHECK_OK(dd_ccdf(x, n, thr, 6, p));
    CHECK_NEAR(p[0], 1.0, 0);
    CHECK_NEAR(p[1], 1.0, 0);
    CHECK_NEAR(p[2], 0.75, 0);
    CHECK_NEAR(p[3], 0.25, 0);
    CHECK_NEAR(p[4], 0.0, 0);
    CHECK_NEAR(p[5], 0.5, 0); /* power > mean 7.5: 9 and 16 */
    free(x);
}

static void align_case(size_t n, int max_lag, int D, dd_cf64 g, uint64_t seed) {
    dd_cf32 *x = noise(n, 1.0, seed), *y = calloc(n, sizeof *y);
    for (size_t k = 0; k < n; k++) {
        long s = (long)k - D;
        if (s >= 0 && s < (long)n) y[k] = (dd_cf32)(g * x[s]);
    }
    int lag = 999;
    dd_cf64 ge = 0;
    CHECK_OK(dd_align(x, y, n, max_lag, &lag, &ge));
    CHECK(lag == D, "n %zu max_lag %d: lag %d, want %d", n, max_lag, lag, D);
    CHECK(cabs(ge - g) < 1e-6 * cabs(g), "gain %g%+gi, want %g%+gi", creal(ge), cimag(ge),
          creal(g), cimag(g));
    free(x);
    free(y);
}

static void test_align(void) {
    align_case(4096, 40, 17, 0.7 - 1.3 * I, 2);
    align_case(4096, 40, -5, -0.2 + 0.1 * I, 3);
    align_case(4096, 0, 0, 2.5, 4);
    align_case(50000, 100, 63, 1.1 + 0.4 * I, 5);  /* FFT path (n (2 max_lag + 1) > 4e6) */
    align_case(50000, 100, -99, 0.3 - 0.9 * I, 6); /* FFT path, negative lag at the edge */
}

/* Two amplitude levels: r = 1 with y = g x, r = 1/8 with y = 2 g x e^{j30deg}. The LS
 * gain is g_ls = g (1 + (1/64) 2 e^{j30}) / (1 + 1/64) for equal counts. */
static void test_amam(void) {
    const size_t n = 400;
    dd_cf32 *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    const dd_cf64 g = 0.8 + 0.6 * I, rot = cexp(I * PI / 6);
    for (size_t i = 0; i < n; i++) {
        dd_cf64 u = cexp(I * 0.37 * (double)i);
        if (i % 2 == 0) {
            x[i] = (dd_cf32)u;
            y[i] = (dd_cf32)(g * u);
        } else {
            x[i] = (dd_cf32)(0.125 * u);
            y[i] = (dd_cf32)(2 * g * rot * 0.125 * u);
        }
    }
    dd_amam_curve c;
    CHECK_OK(dd_amam_ampm(x, y, n, 40, 40.0, &c));
    CHECK(c.nbins == 40, "nbins %zu", c.nbins);
    dd_cf64 gls = g * (1 + 2 * rot / 64) / (1 + 1.0 / 64);
    size_t hi = 39, lo = (size_t)floor((20 * log10(0.125) + 40) / 1.0); /* 21 */
    CHECK(c.count[hi] == n / 2 && c.count[lo] == n / 2, "counts %zu %zu", c.count[hi],
          c.count[lo]);
    CHECK_NEAR(c.in_db[hi], -0.5, 1e-12);
    CHECK_NEAR(c.in_db[lo], -40 + 21.5, 1e-12);
    CHECK_NEAR(c.gain_db[hi], 20 * log10(cabs(g) / cabs(gls)), 1e-5);
    CHECK_NEAR(c.gain_db[lo], 20 * log10(2 * cabs(g) / cabs(gls)), 1e-5);
    CHECK_NEAR(c.phase_deg[hi], carg(g / gls) * 180 / PI, 1e-4);
    CHECK_NEAR(c.phase_deg[lo], carg(g * rot / gls) * 180 / PI, 1e-4);
    size_t empty = 0;
    for (size_t b = 0; b < c.nbins; b++)
        if (c.count[b] == 0) empty += isnan(c.gain_db[b]) && isnan(c.phase_deg[b]);
    CHECK(empty == 38, "empty NaN bins %zu", empty);
    dd_amam_free(&c);
    CHECK(c.in_db == NULL && c.nbins == 0, "dd_amam_free resets the curve");
    dd_amam_free(&c); /* twice is safe */
    /* samples below -lo_db are left out */
    CHECK_OK(dd_amam_ampm(x, y, n, 10, 10.0, &c));
    size_t tot = 0;
    for (size_t b = 0; b < c.nbins; b++) tot += c.count[b];
    CHECK(tot == n / 2, "in range: %zu", tot);
    dd_amam_free(&c);
    free(x);
    free(y);
}

static void test_invalid(void) {
    dd_spec sp;
    dd_spec_default(&sp);
    const size_t n = 3000;
    dd_cf32 *x = noise(n, 1, 1);
    double psd[2560], v;
    dd_aclr_result ar;
    dd_metric_set ms;
    int lag;
    dd_cf64 g;
    dd_amam_curve c;
    CHECK_ERR(dd_welch(NULL, n, 1, 256, DD_PSD_DENSITY, 1, psd, NULL), DD_ERR_ARG, "x is NULL");
    CHECK_ERR(dd_welch(x, n, 1, 256, DD_PSD_DENSITY, 1, NULL, NULL), DD_ERR_ARG, "psd");
    CHECK_ERR(dd_welch(x, 100, 1, 256, DD_PSD_DENSITY, 1, psd, NULL), DD_ERR_ARG, "nperseg");
    CHECK_ERR(dd_welch(x, n, 0, 256, DD_PSD_DENSITY, 1, psd, NULL), DD_ERR_ARG, "fs");
    CHECK_ERR(dd_welch(x, n, NAN, 256, DD_PSD_DENSITY, 1, psd, NULL), DD_ERR_ARG, "fs");
    CHECK_ERR(dd_welch(x, n, 1, 1, DD_PSD_DENSITY, 1, psd, NULL), DD_ERR_ARG, "nperseg");
    CHECK_ERR(dd_welch(x, n, 1, 256, (dd_psd_scaling)7, 1, psd, NULL), DD_ERR_ARG, "scaling");
    CHECK_ERR(dd_psd_segmented(x, 0, 1, 256, DD_PSD_DENSITY, psd, NULL), DD_ERR_ARG, "n = 0");
    CHECK_ERR(dd_nmse_db(NULL, x, n, &v), DD_ERR_ARG, "ref");
    CHECK_ERR(dd_nmse_db(x, NULL, n, &v), DD_ERR_ARG, "test");
    CHECK_ERR(dd_nmse_db(x, x, n, NULL), DD_ERR_ARG, "nmse_db");
    CHECK_ERR(dd_nmse_segmented_db(x, x, n, 0, &v), DD_ERR_ARG, "nperseg");
    CHECK_ERR(dd_aclr(NULL, n, &sp, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "x is NULL");
    CHECK_ERR(dd_aclr(x, n, NULL, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "spec");
    CHECK_ERR(dd_aclr(x, n, &sp, DD_ACLR_OPENDPD, NULL), DD_ERR_ARG, "out");
    CHECK_ERR(dd_aclr(x, n, &sp, (dd_aclr_def)5, &ar), DD_ERR_ARG, "def");
    CHECK_ERR(dd_aclr(x, 2000, &sp, DD_ACLR_3GPP, &ar), DD_ERR_ARG, "nperseg");
    dd_spec bad = sp;
    bad.n_sub = 0;
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "n_sub");
    CHECK_ERR(dd_evm_spectral_db(x, x, n, &bad, &v), DD_ERR_ARG, "n_sub");
    bad.n_sub = 1000; /* 640 bins in the channel: fewer than one per sub-channel */
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "n_sub");
    bad = sp;
    bad.bw_main = sp.fs;
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "bw_main");
    CHECK_ERR(dd_metrics_compute(x, x, n, &bad, DD_ACLR_OPENDPD, 0, &ms), DD_ERR_ARG, "bw_main");
    bad.bw_main = -1;
    CHECK_ERR(dd_evm_spectral_db(x, x, n, &bad, &v), DD_ERR_ARG, "bw_main");
    bad.bw_main = 600e6; /* 3GPP: adjacent channel centred at 600 MHz, past fs/2 */
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_3GPP, &ar), DD_ERR_ARG, "bw_main");
    CHECK_OK(dd_aclr(x, n, &bad, DD_ACLR_OPENDPD, &ar)); /* 60 MHz bands still fit */
    bad.bw_main = 700e6; /* OpenDPD: 70 MHz adjacent bands past -400 MHz */
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "bw_main");
    bad = sp;
    bad.fs = 0;
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "fs");
    bad = sp;
    bad.nperseg = 8;
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "nperseg");
    bad.nperseg = DD_NPERSEG_MAX * 2; /* an nperseg-point FFT per segment: capped */
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_OPENDPD, &ar), DD_ERR_ARG, "spec->nperseg = 2097152 must be in [16, 2^20]");
    CHECK_ERR(dd_evm_spectral_db(x, x, n, &bad, &v), DD_ERR_ARG, "must be in [16, 2^20]");
    CHECK_ERR(dd_metrics_compute(x, x, n, &bad, DD_ACLR_OPENDPD, 0, &ms), DD_ERR_ARG, "must be in [16, 2^20]");
    bad = sp;
    bad.bw_occupied = 300e6;
    CHECK_ERR(dd_aclr(x, n, &bad, DD_ACLR_3GPP, &ar), DD_ERR_ARG, "bw_occupied");
    CHECK_ERR(dd_evm_spectral_db(NULL, x, n, &sp, &v), DD_ERR_ARG, "ref");
    CHECK_ERR(dd_evm_spectral_db(x, x, n, &sp, NULL), DD_ERR_ARG, "evm_db");
    CHECK_ERR(dd_metrics_compute(x, NULL, n, &sp, DD_ACLR_OPENDPD, 0, &ms), DD_ERR_ARG, "test");
    CHECK_ERR(dd_metrics_compute(x, x, n, &sp, DD_ACLR_OPENDPD, 0, NULL), DD_ERR_ARG, "out");
    CHECK_ERR(dd_align(x, x, n, -1, &lag, &g), DD_ERR_ARG, "max_lag");
    CHECK_ERR(dd_align(x, x, 10, 10, &lag, &g), DD_ERR_ARG, "max_lag");
    CHECK_ERR(dd_align(x, NULL, n, 3, &lag, &g), DD_ERR_ARG, "y");
    CHECK_ERR(dd_align(x, x, n, 3, NULL, &g), DD_ERR_ARG, "lag");
    CHECK_ERR(dd_amam_ampm(x, x, n, 0, 30, &c), DD_ERR_ARG, "nbins");
    CHECK_ERR(dd_amam_ampm(x, x, n, 10, 0, &c), DD_ERR_ARG, "lo_db");
    CHECK(c.in_db == NULL, "failed dd_amam_ampm leaves no arrays");
    CHECK_ERR(dd_papr_db(NULL, n, &v), DD_ERR_ARG, "x");
    CHECK_ERR(dd_papr_db(x, 0, &v), DD_ERR_ARG, "n");
    double thr = NAN, p;
    CHECK_ERR(dd_ccdf(x, n, &thr, 1, &p), DD_ERR_ARG, "thr_db[0]");
    CHECK_ERR(dd_ccdf(x, n, NULL, 1, &p), DD_ERR_ARG, "thr_db");
    /* range errors: zero reference energy */
    dd_cf32 *z = calloc(n, sizeof *z);
    CHECK_ERR(dd_nmse_db(z, x, n, &v), DD_ERR_RANGE, "zero energy");
    CHECK_ERR(dd_nmse_segmented_db(z, x, n, 256, &v), DD_ERR_RANGE, "segment 0");
    CHECK_ERR(dd_aclr(z, n, &sp, DD_ACLR_OPENDPD, &ar), DD_ERR_RANGE, "no (finite) power");
    CHECK_ERR(dd_papr_db(z, n, &v), DD_ERR_RANGE, "zero");
    CHECK_ERR(dd_align(z, x, n, 3, &lag, &g), DD_ERR_RANGE, "zero");
    CHECK_ERR(dd_evm_spectral_db(z, x, n, &sp, &v), DD_ERR_RANGE, "reference spectrum");
    free(z);
    free(x);
}

/* Several threads planning, running and destroying FFTs at once (the planner lock):
 * every thread must get the single-threaded answer. */
typedef struct {
    const dd_cf32 *x;
    size_t n;
    dd_aclr_result r[2];
    double evm;
    dd_status st;
} mt_job;

static void *thread_job(void *arg) {
    mt_job *j = arg;
    dd_spec sp;
    dd_spec_default(&sp);
    j->st = DD_OK;
    for (int rep = 0; rep < 5 && j->st == DD_OK; rep++) {
        j->st = dd_aclr(j->x, j->n, &sp, DD_ACLR_OPENDPD, &j->r[0]);
        if (j->st == DD_OK) j->st = dd_aclr(j->x, j->n, &sp, DD_ACLR_3GPP, &j->r[1]);
        if (j->st == DD_OK) j->st = dd_evm_spectral_db(j->x + 1, j->x, j->n - 1, &sp, &j->evm);
    }
    return NULL;
}

static void test_threads(void) {
    dd_spec sp;
    dd_spec_default(&sp);
    const size_t n = 2560 * 3;
    dd_cf32 *x = mt_bandlimited_noise(n, sp.fs, 150e6, 0.3, 77);
    mt_job one;
    memset(&one, 0, sizeof one);
    one.x = x;
    one.n = n;
    thread_job(&one);
    CHECK_OK(one.st);
    mt_job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].x = x;
        jobs[t].n = n;
        CHECK(pthread_create(&th[t], NULL, thread_job, &jobs[t]) == 0, "pthread_create");
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_OK(jobs[t].st);
        CHECK(jobs[t].r[0].avg_db == one.r[0].avg_db && jobs[t].r[1].avg_db == one.r[1].avg_db &&
                  jobs[t].evm == one.evm,
              "thread %d differs", t);
    }
    free(x);
}

int main(void) {
    test_white_noise();
    test_tone();
    test_fir();
    test_nmse_evm_exact();
    test_gain_normalised();
    test_aclr_welch_disagreement();
    test_cubic_aclr_slope();
    test_papr_ccdf();
    test_align();
    test_amam();
    test_invalid();
    test_threads();
    return dd_test_done("test_metrics");
}
