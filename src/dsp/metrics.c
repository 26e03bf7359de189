/* Signal-quality metrics on spectra and errors: NMSE (pooled and OpenDPD-segmented),
 * ACLR (OpenDPD definition and a 3GPP-style definition), OpenDPD's spectral EVM proxy
 * and the combined metric set of `distdpd metrics`. The OpenDPD variants reproduce
 * lab-emi/OpenDPD utils/metrics.py bin for bin (see docs/metrics.md). */
#include <complex.h>
#include <math.h>
#include <stdio.h>

#include "dsp/psd_internal.h"

dd_status dd_spec_check_metrics(const dd_spec *spec, const char *who) {
    if (!spec) return dd_error(DD_ERR_ARG, "%s: spec is NULL", who);
    if (!(spec->fs > 0.0) || !isfinite(spec->fs))
        return dd_error(DD_ERR_ARG, "%s: spec->fs = %g must be finite and > 0", who, spec->fs);
    if (!(spec->bw_main > 0.0) || !(spec->bw_main < spec->fs))
        return dd_error(DD_ERR_ARG, "%s: spec->bw_main = %g must be in (0, fs = %g)", who,
                        spec->bw_main, spec->fs);
    if (spec->n_sub < 1)
        return dd_error(DD_ERR_ARG, "%s: spec->n_sub = %d must be >= 1", who, spec->n_sub);
    if (spec->nperseg < 16 || spec->nperseg > DD_NPERSEG_MAX)
        return dd_error(DD_ERR_ARG, "%s: spec->nperseg = %zu must be in [16, 2^20]", who,
                        spec->nperseg);
    return DD_OK;
}

dd_status dd_opendpd_layout(const dd_spec *spec, size_t n, int need_adjacent,
                            const char *who, dd_band_layout *out) {
    double half_bw = spec->bw_main / 2;
    size_t left = n, right = 0;
    int have_right = 0;
    for (size_t k = 0; k < n; k++) {
        double f = dd_shifted_bin_freq(k, n, spec->fs);
        if (f >= -half_bw && left == n) left = k;
        if (f <= half_bw) {
            right = k;
            have_right = 1;
        }
    }
    /* Bin n/2 is 0 Hz, so both exist whenever bw_main > 0; kept as a guard. */
    if (left == n || !have_right || right < left)
        return dd_error(DD_ERR_INTERNAL, "%s: no bin inside the main channel", who);
    size_t sub_len = (right - left) / (size_t)spec->n_sub;
    if (sub_len < 1)
        return dd_error(DD_ERR_ARG,
                        "%s: spec->n_sub = %d: the main channel spans %zu bins of a "
                        "%zu-point spectrum, fewer than one per sub-channel",
                        who, spec->n_sub, right - left, n);
    if (need_adjacent && (left < sub_len || right + sub_len > n))
        return dd_error(DD_ERR_ARG,
                        "%s: spec->bw_main = %g: the adjacent bands (%zu bins each, one "
                        "sub-channel) fall outside [-fs/2, fs/2) (fs = %g)",
                        who, spec->bw_main, sub_len, spec->fs);
    out->left = left;
    out->right = right;
    out->sub_len = sub_len;
    return DD_OK;
}

static double sq_err(dd_cf32 a, dd_cf32 b) {
    double re = (double)crealf(a) - (double)crealf(b);
    double im = (double)cimagf(a) - (double)cimagf(b);
    return re * re + im * im;
}

static double sq_mag(dd_cf32 a) {
    double re = (double)crealf(a), im = (double)cimagf(a);
    return re * re + im * im;
}

dd_status dd_nmse_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n, double *nmse_db) {
    if (!ref) return dd_error(DD_ERR_ARG, "dd_nmse_db: ref is NULL");
    if (!test) return dd_error(DD_ERR_ARG, "dd_nmse_db: test is NULL");
    if (!nmse_db) return dd_error(DD_ERR_ARG, "dd_nmse_db: nmse_db is NULL");
    if (n < 1) return dd_error(DD_ERR_ARG, "dd_nmse_db: n = 0: empty signal");
    double err = 0.0, energy = 0.0;
    for (size_t i = 0; i < n; i++) {
        err += sq_err(test[i], ref[i]);
        energy += sq_mag(ref[i]);
    }
    if (!(energy > 0.0)) return dd_error(DD_ERR_RANGE, "dd_nmse_db: ref has zero energy");
    if (!isfinite(err) || !isfinite(energy))
        return dd_error(DD_ERR_RANGE, "dd_nmse_db: non-finite samples in ref or test");
    *nmse_db = dd_db10(err / energy);
    return DD_OK;
}

dd_status dd_nmse_segmented_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                               size_t nperseg, double *nmse_db) {
    if (!ref) return dd_error(DD_ERR_ARG, "dd_nmse_segmented_db: ref is NULL");
    if (!test) return dd_error(DD_ERR_ARG, "dd_nmse_segmented_db: test is NULL");
    if (!nmse_db) return dd_error(DD_ERR_ARG, "dd_nmse_segmented_db: nmse_db is NULL");
    if (n < 1) return dd_error(DD_ERR_ARG, "dd_nmse_segmented_db: n = 0: empty signal");
    if (nperseg < 1)
        return dd_error(DD_ERR_ARG, "dd_nmse_segmented_db: nperseg = 0 must be >= 1");
    size_t nseg = dd_nseg_padded(n, nperseg);
    double acc = 0.0;
    for (size_t s = 0; s < nseg; s++) {
        size_t a = s * nperseg, b = a + nperseg < n ? a + nperseg : n;
        double err = 0.0, energy = 0.0; /* zero padding adds nothing to either sum */
        for (size_t i = a; i < b; i++) {
            err += sq_err(test[i], ref[i]);
            energy += sq_mag(ref[i]);
        }
        if (!(energy > 0.0))
            return dd_error(DD_ERR_RANGE,
                            "dd_nmse_segmented_db: segment %zu (samples %zu..%zu) of ref has "
                            "zero energy",
                            s, a, b - 1);
        if (!isfinite(err) || !isfinite(energy))
            return dd_error(DD_ERR_RANGE,
                            "dd_nmse_segmented_db: non-finite samples in segment %zu", s);
        acc += dd_db10(err / energy); /* the means over nperseg cancel in the ratio */
    }
    *nmse_db = acc / (double)nseg;
    return DD_OK;
}

static double sum_range(const double *p, size_t a, size_t b) {
    double s = 0.0;
    for (size_t k = a; k < b; k++) s += p[k];
    return s;
}

/* OpenDPD ACLR on the segment-averaged 'spectrum' PSD (welch = 0), or the same bands on
 * the Welch PSD of the whole signal (welch = 1). */
static dd_status aclr_opendpd(const dd_cf32 *x, size_t n, const dd_spec *spec, int welch,
                              dd_aclr_result *out) {
    dd_status st;
    size_t np = spec->nperseg;
    dd_band_layout lay;
    DD_TRY(dd_opendpd_layout(spec, np, 1, "dd_aclr", &lay));
    if (welch && n < np)
        return dd_error(DD_ERR_ARG, "dd_aclr: n = %zu is shorter than spec->nperseg = %zu (the Welch ACLR needs "
                                    "at least one segment)", n, np);
    double *psd = dd_calloc(np, sizeof *psd);
    if (!psd) return DD_ERR_NOMEM;
    if (welch)
        st = dd_welch(x, n, spec->fs, np, DD_PSD_SPECTRUM, 1, psd, NULL);
    else
        st = dd_psd_segmented(x, n, spec->fs, np, DD_PSD_SPECTRUM, psd, NULL);
    if (st != DD_OK) goto cleanup;
    double max_sub = 0.0;
    for (int c = 0; c < spec->n_sub; c++) {
        size_t a = lay.left + (size_t)c * lay.sub_len;
        double p = sum_range(psd, a, a + lay.sub_len);
        if (p > max_sub) max_sub = p;
    }
    if (!(max_sub > 0.0) || !isfinite(max_sub)) {
        st = dd_error(DD_ERR_RANGE, "dd_aclr: the signal has no (finite) power in the main "
                                    "channel");
        goto cleanup;
    }
    double pl = sum_range(psd, lay.left - lay.sub_len, lay.left);
    double pr = sum_range(psd, lay.right, lay.right + lay.sub_len);
    out->left_db = dd_db10(pl / max_sub);
    out->right_db = dd_db10(pr / max_sub);
    out->avg_db = 0.5 * (out->left_db + out->right_db);
cleanup:
    dd_free(psd);
    return st;
}

/* Snaps v to the nearest integer when within rounding noise of it. */
static double snap(double v) {
    double r = nearbyint(v);
    return fabs(v - r) <= 1e-9 * fmax(1.0, fabs(v)) ? r : v;
}

/* Sum of psd over the bins whose centre f_k = (k - n/2) fs / n lies in the half-open
 * band [fc - bw/2, fc + bw/2). */
static double band_power(const double *psd, size_t n, double fs, double fc, double bw) {
    double df = fs / (double)n;
    double lo = ceil(snap((fc - bw / 2) / df)); /* first relative bin index inside */
    double hi = ceil(snap((fc + bw / 2) / df)); /* first relative bin index past the band */
    /* NOLINTNEXTLINE(bugprone-integer-division): n / 2 floors on purpose (bins -n/2 .. n-n/2-1) */
    double kmin = -(double)(n / 2), kmax = (double)(n - n / 2); /* valid: [kmin, kmax) */
    if (lo < kmin) lo = kmin;
    if (hi > kmax) hi = kmax;
    double s = 0.0;
    if (!(lo < hi)) return s; /* an empty band, or NaN */
    for (size_t i = (size_t)(lo - kmin), end = (size_t)(hi - kmin); i < end; i++) s += psd[i];
    return s;
}

static dd_status aclr_3gpp(const dd_cf32 *x, size_t n, const dd_spec *spec,
                           dd_aclr_result *out) {
    dd_status st;
    size_t np = spec->nperseg;
    if (!(spec->bw_occupied >= 0.0) || !(spec->bw_occupied <= spec->bw_main))
        return dd_error(DD_ERR_ARG,
                        "dd_aclr: spec->bw_occupied = %g must be in [0, bw_main = %g] (0 "
                        "means bw_main)",
                        spec->bw_occupied, spec->bw_main);
    double bw = spec->bw_occupied > 0.0 ? spec->bw_occupied : spec->bw_main;
    if (spec->bw_main + bw / 2 > spec->fs / 2 * (1 + 1e-12))
        return dd_error(DD_ERR_ARG,
                        "dd_aclr: spec->bw_main = %g: the adjacent channel at +-bw_main with "
                        "measurement bandwidth %g extends past fs/2 = %g",
                        spec->bw_main, bw, spec->fs / 2);
    if (n < np)
        return dd_error(DD_ERR_ARG,
                        "dd_aclr: n = %zu is shorter than spec->nperseg = %zu (3GPP ACLR "
                        "needs at least one Welch segment)",
                        n, np);
    double *psd = dd_calloc(np, sizeof *psd);
    if (!psd) return DD_ERR_NOMEM;
    st = dd_welch(x, n, spec->fs, np, DD_PSD_DENSITY, 0, psd, NULL);
    if (st != DD_OK) goto cleanup;
    double pm = band_power(psd, np, spec->fs, 0.0, bw);
    double pl = band_power(psd, np, spec->fs, -spec->bw_main, bw);
    double pr = band_power(psd, np, spec->fs, spec->bw_main, bw);
    if (!(pm > 0.0) || !isfinite(pm)) {
        st = dd_error(DD_ERR_RANGE, "dd_aclr: the signal has no (finite) power in the main "
                                    "channel");
        goto cleanup;
    }
    out->left_db = dd_db10(pl / pm);
    out->right_db = dd_db10(pr / pm);
    out->avg_db = 0.5 * (out->left_db + out->right_db);
cleanup:
    dd_free(psd);
    return st;
}

dd_status dd_aclr(const dd_cf32 *x, size_t n, const dd_spec *spec, dd_aclr_def def,
                  dd_aclr_result *out) {
    if (!x) return dd_error(DD_ERR_ARG, "dd_aclr: x is NULL");
    if (!out) return dd_error(DD_ERR_ARG, "dd_aclr: out is NULL");
    if (n < 1) return dd_error(DD_ERR_ARG, "dd_aclr: n = 0: empty signal");
    DD_TRY(dd_spec_check_metrics(spec, "dd_aclr"));
    switch (def) {
    case DD_ACLR_OPENDPD: return aclr_opendpd(x, n, spec, 0, out);
    case DD_ACLR_3GPP: return aclr_3gpp(x, n, spec, out);
    case DD_ACLR_OPENDPD_WELCH: return aclr_opendpd(x, n, spec, 1, out);
    }
    return dd_error(DD_ERR_ARG, "dd_aclr: def = %d is not DD_ACLR_OPENDPD, DD_ACLR_3GPP or DD_ACLR_OPENDPD_WELCH",
                    (int)def);
}

/* Loads segment s (zero-padded) of x into f->buf and transforms it. */
static void segment_fft(dd_fft *f, const dd_cf32 *x, size_t n, size_t s) {
    size_t np = f->n, a = s * np;
    for (size_t m = 0; m < np; m++)
        f->buf[m] = a + m < n ? CMPLX((double)crealf(x[a + m]), (double)cimagf(x[a + m]))
                              : 0.0;
    dd_fft_execute(f);
}

dd_status dd_evm_spectral_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                             const dd_spec *spec, double *evm_db) {
    const char *who = "dd_evm_spectral_db";
    if (!ref) return dd_error(DD_ERR_ARG, "%s: ref is NULL", who);
    if (!test) return dd_error(DD_ERR_ARG, "%s: test is NULL", who);
    if (!evm_db) return dd_error(DD_ERR_ARG, "%s: evm_db is NULL", who);
    if (n < 1) return dd_error(DD_ERR_ARG, "%s: n = 0: empty signal", who);
    DD_TRY(dd_spec_check_metrics(spec, who));
    size_t np = spec->nperseg;
    dd_band_layout lay;
    DD_TRY(dd_opendpd_layout(spec, np, 0, who, &lay));
    dd_status st = DD_OK;
    dd_fft fr = {0}, ft = {0};
    double *xr = dd_calloc(np, sizeof *xr);   /* |X_ref|, shifted */
    double *dif = dd_calloc(np, sizeof *dif); /* |X_test - X_ref|, shifted */
    if (!xr || !dif) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }
    st = dd_fft_create(&fr, np);
    if (st != DD_OK) goto cleanup;
    st = dd_fft_create(&ft, np);
    if (st != DD_OK) goto cleanup;
    size_t nseg = dd_nseg_padded(n, np), shift = np - np / 2;
    double acc = 0.0;
    for (size_t s = 0; s < nseg; s++) {
        segment_fft(&fr, ref, n, s);
        segment_fft(&ft, test, n, s);
        for (size_t k = 0; k < np; k++) {
            size_t j = k + shift >= np ? k + shift - np : k + shift;
            xr[k] = cabs(fr.buf[j]);
            dif[k] = cabs(ft.buf[j] - fr.buf[j]);
        }
        double seg = 0.0;
        for (int c = 0; c < spec->n_sub; c++) {
            size_t a = lay.left + (size_t)c * lay.sub_len, b = a + lay.sub_len;
            double num = sum_range(dif, a, b), den = sum_range(xr, a, b);
            if (!(den > 0.0) || !isfinite(den) || !isfinite(num)) {
                st = dd_error(DD_ERR_RANGE,
                              "%s: segment %zu, sub-channel %d: reference spectrum is zero "
                              "or not finite",
                              who, s, c);
                goto cleanup;
            }
            seg += num / den; /* the means over sub_len bins cancel */
        }
        acc += seg / (double)spec->n_sub;
    }
    *evm_db = acc > 0.0 ? 20.0 * log10(acc / (double)nseg) : -400.0;
cleanup:
    dd_fft_destroy(&fr);
    dd_fft_destroy(&ft);
    dd_free(xr);
    dd_free(dif);
    return st;
}

dd_status dd_metrics_compute(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                             const dd_spec *spec, dd_aclr_def aclr_def, int nmse_pooled,
                             dd_metric_set *out) {
    const char *who = "dd_metrics_compute";
    if (!ref) return dd_error(DD_ERR_ARG, "%s: ref is NULL", who);
    if (!test) return dd_error(DD_ERR_ARG, "%s: test is NULL", who);
    if (!out) return dd_error(DD_ERR_ARG, "%s: out is NULL", who);
    DD_TRY(dd_spec_check_metrics(spec, who));
    dd_metric_set m;
    if (nmse_pooled)
        DD_TRY(dd_nmse_db(ref, test, n, &m.nmse_db));
    else
        DD_TRY(dd_nmse_segmented_db(ref, test, n, spec->nperseg, &m.nmse_db));
    DD_TRY(dd_aclr(test, n, spec, aclr_def, &m.aclr));
    DD_TRY(dd_evm_spectral_db(ref, test, n, spec, &m.evm_db));
    *out = m;
    return DD_OK;
}

dd_status dd_metrics_compute_gain(const dd_cf32 *ref, const dd_cf32 *test, size_t n, const dd_spec *spec,
                                  dd_aclr_def aclr_def, int nmse_pooled, int auto_gain, dd_cf64 gain,
                                  dd_cf64 *gain_used, dd_metric_set *out) {
    const char *who = "dd_metrics_compute_gain";
    if (!ref || !test || !out) return dd_error(DD_ERR_ARG, "%s: NULL argument", who);
    if (n == 0) return dd_error(DD_ERR_ARG, "%s: no samples", who);
    dd_cf64 g = gain;
    if (auto_gain) {
        int lag;
        DD_TRY(dd_align(ref, test, n, 0, &lag, &g));
    }
    if (!isfinite(creal(g)) || !isfinite(cimag(g)) || !(cabs(g) > 0))
        return dd_error(DD_ERR_RANGE, "%s: the gain (%g%+gi) must be finite and non-zero", who, creal(g), cimag(g));
    dd_cf32 *t = dd_calloc(n, sizeof(dd_cf32));
    if (!t) return dd_error(DD_ERR_NOMEM, "%s: out of memory for %zu samples", who, n);
    const dd_cf64 inv = 1.0 / g;
    for (size_t i = 0; i < n; i++) t[i] = (dd_cf32)((dd_cf64)test[i] * inv);
    dd_status st = dd_metrics_compute(ref, t, n, spec, aclr_def, nmse_pooled, out);
    dd_free(t);
    if (st == DD_OK && gain_used) *gain_used = g;
    return st;
}

int dd_aclr_disagreement(const char *what, const dd_aclr_result *aligned, const dd_aclr_result *welch, size_t n,
                         size_t nperseg, double tol_db, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    if (!aligned || !welch || !isfinite(aligned->avg_db) || !isfinite(welch->avg_db) || nperseg == 0) return 0;
    const double d = welch->avg_db - aligned->avg_db;
    if (!(fabs(d) > tol_db)) return 0;
    char cause[400];
    if (d > 20)
        snprintf(cause, sizeof cause,
                 "the signal most likely repeats in aligned blocks of the segment length, so each aligned segment "
                 "holds whole blocks and shows no skirts while segments at other offsets do; the Welch figure is the "
                 "one a spectrum analyser would see.");
    else if (d > 0)
        snprintf(cause, sizeof cause,
                 "segments straddling the block edges see more out-of-band power than the aligned ones (the signal "
                 "changes at the edges, e.g. blocks processed from a zero state); the Welch figure is the one a "
                 "spectrum analyser would see.");
    else if (n % nperseg != 0)
        snprintf(cause, sizeof cause,
                 "OpenDPD zero-pads the last segment (%zu samples hold %zu full segments and %zu more), and the cut "
                 "at the end of the data leaks into the adjacent bands; the Welch PSD uses full segments only.",
                 n, n / nperseg, n % nperseg);
    else
        snprintf(cause, sizeof cause,
                 "the aligned segments see more out-of-band power than the overlapping ones (a transient at the "
                 "block edges); compare the spectra before quoting either.");
    snprintf(buf, cap,
             "The OpenDPD ACLR of %s (%.1f dBc, periodograms of segments aligned to multiples of %zu samples) and the "
             "same bands on the Welch PSD (%.1f dBc, 50 %% overlapping segments) differ by %.1f dB: %s",
             what, aligned->avg_db, nperseg, welch->avg_db, fabs(d), cause);
    return 1;
}
