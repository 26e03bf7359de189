/* Metrics RF engineers report: Welch PSD, NMSE, ACLR (OpenDPD-compatible and 3GPP
 * style), spectral EVM (OpenDPD-compatible), alignment, AM/AM and AM/PM, PAPR, CCDF.
 * Formulas: docs/metrics.md. The demodulated OFDM EVM lives in ofdm.h because it
 * needs the transmitted symbols.
 *
 * "Segmented" evaluation (OpenDPD): the signal is cut into spec->nperseg-long
 * segments, the last one zero-padded, and each metric is computed as OpenDPD does
 * on that batch of segments.
 */
#ifndef DISTDPD_METRICS_H
#define DISTDPD_METRICS_H

#include "distdpd/core.h"
#include "distdpd/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DD_PSD_DENSITY = 0, /* power per Hz: |X|^2 / (fs * sum w^2) */
    DD_PSD_SPECTRUM = 1 /* power per bin: |X|^2 / (sum w)^2 (scipy scaling='spectrum') */
} dd_psd_scaling;

/* Welch PSD: periodic Hann window of nperseg samples, 50 % overlap (step nperseg/2),
 * two-sided, averaged over all full segments, returned fftshifted: psd[k] is at
 * frequency freq[k] = (k - nperseg/2) * fs / nperseg (k = 0..nperseg-1).
 * detrend_mean != 0 subtracts each segment's mean first (scipy's default).
 * Equals scipy.signal.welch(x, fs, 'hann', nperseg, return_onesided=False) (step
 * nperseg - nperseg/2, (n - nperseg/2) / step segments) after fftshift.
 * Ranges: fs finite > 0; 2 <= nperseg <= INT_MAX; n >= nperseg (DD_ERR_ARG otherwise).
 * psd and freq (freq may be NULL) hold nperseg doubles, caller-owned. */
dd_status dd_welch(const dd_cf32 *x, size_t n, double fs, size_t nperseg,
                   dd_psd_scaling scaling, int detrend_mean, double *psd, double *freq);

/* OpenDPD's PSD, the one behind its ACLR: x cut into ceil(n / nperseg) segments of
 * nperseg samples, the last zero-padded; per segment the mean is subtracted and one
 * Hann-windowed periodogram taken (scipy welch of a segment of exactly nperseg samples
 * is a single window), and the periodograms are averaged over segments. Same scaling,
 * window and fftshifted layout as dd_welch. n >= 1, nperseg >= 2, fs > 0.
 * psd and freq (may be NULL) hold nperseg doubles, caller-owned. */
dd_status dd_psd_segmented(const dd_cf32 *x, size_t n, double fs, size_t nperseg,
                           dd_psd_scaling scaling, double *psd, double *freq);

/* The reference level of the reports' spectra: the mean of psd[k] over the bins with
 * |freq_hz[k]| < 0.45 x the occupied bandwidth (spec->bw_occupied, or bw_main when it
 * is 0), i.e. inside 0.9 x the occupied band. Every report plots a PSD as
 * 10 log10(psd / this mean of the reference signal) ("dB relative to the in-band mean").
 * Returns 1.0 when no bin is in the band or their mean is not > 0. */
double dd_psd_inband_mean(const dd_spec *spec, const double *psd, const double *freq_hz, size_t n);

/* Pooled NMSE in dB: 10 log10(sum|test-ref|^2 / sum|ref|^2). n >= 1; DD_ERR_RANGE if
 * ref has zero energy; test == ref gives the -400 dB floor of dd_db10. */
dd_status dd_nmse_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n, double *nmse_db);
/* OpenDPD NMSE: mean over nperseg segments (last zero-padded) of each segment's NMSE
 * in dB. n >= 1 (n < nperseg is one padded segment), nperseg >= 1; DD_ERR_RANGE names
 * the first segment whose ref has zero energy. */
dd_status dd_nmse_segmented_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                               size_t nperseg, double *nmse_db);

typedef enum {
    DD_ACLR_OPENDPD = 0, /* adjacent sub-channel-wide bands vs max sub-channel power */
    DD_ACLR_3GPP = 1,    /* adjacent channels at +-bw_main, measured over bw_occupied */
    DD_ACLR_OPENDPD_WELCH = 2 /* OpenDPD's bands on the Welch PSD of the whole signal
                               * (50 % overlapping Hann segments, mean removed), not on
                               * segments aligned to multiples of nperseg; n >= nperseg */
} dd_aclr_def;

typedef struct {
    double left_db, right_db, avg_db; /* avg = (left + right) / 2 */
} dd_aclr_result;

/* ACLR of x. OpenDPD definition: per-segment spectrum PSD (scipy welch with
 * nperseg = spec->nperseg on each segment, mean-detrended, Hann), averaged over
 * segments; the main channel [-bw_main/2, bw_main/2] is split into n_sub sub-bands;
 * each adjacent band is one sub-band wide next to the channel edge. 3GPP: Welch PSD
 * of the whole signal, adjacent channel centred at +-bw_main, rectangular measurement
 * bandwidth bw_occupied (or bw_main), ratio to the main channel power.
 * Results are in dB relative to the reference power (negative = below, "dBc"); a
 * band with no power gives the -400 dB floor. spec: fs > 0, 0 < bw_main < fs,
 * n_sub >= 1, 16 <= nperseg; OpenDPD: the channel must span >= n_sub bins and the
 * adjacent bands must fit in [-fs/2, fs/2), n >= 1; 3GPP: 0 <= bw_occupied <= bw_main,
 * bw_main + B/2 <= fs/2 (B the measurement bandwidth), n >= nperseg. Violations are
 * DD_ERR_ARG naming the field; DD_ERR_RANGE if the main channel holds no power. */
dd_status dd_aclr(const dd_cf32 *x, size_t n, const dd_spec *spec, dd_aclr_def def,
                  dd_aclr_result *out);

/* The reports' sentence for an OpenDPD ACLR (aligned segments) that disagrees with the
 * same bands on the Welch PSD: when |aligned.avg - welch.avg| > tol_db, writes one
 * sentence naming both numbers and the likely cause, found from the numbers: aligned far
 * below Welch (> 20 dB) = a signal repeating in aligned nperseg-sample blocks; aligned
 * below Welch = changes at the block edges; aligned above Welch with n (the samples
 * measured, the shortest split) not a multiple of nperseg = the zero-padded last segment;
 * into buf, and returns 1; else returns 0 with buf "". what names the signal. */
#define DD_ACLR_AGREE_DB 3.0 /* "a few dB": the reports' tol_db */
int dd_aclr_disagreement(const char *what, const dd_aclr_result *aligned, const dd_aclr_result *welch, size_t n,
                         size_t nperseg, double tol_db, char *buf, size_t cap);

/* OpenDPD's spectral "EVM" proxy in dB (per segment FFT, per sub-channel mean
 * |X_test - X_ref| / mean |X_ref|, averaged over sub-channels, mean over segments,
 * 20 log10). Same spec ranges as dd_aclr (OpenDPD); n >= 1; DD_ERR_RANGE if a
 * sub-channel of a reference segment spectrum is all zero. */
dd_status dd_evm_spectral_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                             const dd_spec *spec, double *evm_db);

/* The OpenDPD-compatible metric set of `distdpd metrics`: NMSE of test against ref
 * (segmented, or pooled when nmse_pooled != 0), ACLR of test with aclr_def, spectral
 * EVM of test against ref. *out is written only on success. */
typedef struct {
    double nmse_db;
    dd_aclr_result aclr;
    double evm_db;
} dd_metric_set;
dd_status dd_metrics_compute(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                             const dd_spec *spec, dd_aclr_def aclr_def, int nmse_pooled,
                             dd_metric_set *out);

/* The same after normalising TEST by a complex gain g (test / g), so that a signal at
 * another level (a PA output against its input) is compared in shape: auto_gain != 0
 * takes the least-squares gain of test ~ g ref, g = sum test ref* / sum |ref|^2 (no
 * delay search: align first), else g = gain (finite, |g| > 0). *gain_used (may be
 * NULL) receives g. ACLR does not depend on the scale. DD_ERR_RANGE when ref has no
 * energy or g is zero/not finite. */
dd_status dd_metrics_compute_gain(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                                  const dd_spec *spec, dd_aclr_def aclr_def, int nmse_pooled,
                                  int auto_gain, dd_cf64 gain, dd_cf64 *gain_used,
                                  dd_metric_set *out);

/* Alignment: integer delay d in [-max_lag, max_lag] maximising |sum y(k+d) x*(k)|, and
 * the least-squares complex gain g with y(k+d) ~ g x(k). Sums run over the overlap
 * 0 <= k, k + d < n (no wrap-around). y(k) = g x(k - D) gives lag D. Ties go to the
 * smallest |d|. 0 <= max_lag < n. Direct sums for small problems, FFT correlation when
 * n (2 max_lag + 1) > 4e6. DD_ERR_RANGE if x has no energy on the overlap. */
dd_status dd_align(const dd_cf32 *x, const dd_cf32 *y, size_t n, int max_lag, int *lag,
                   dd_cf64 *gain);

/* AM/AM and AM/PM: bins of |x| in dB (relative to max |x|) from -lo_db..0; per bin the
 * median gain |y|/(|g||x|) in dB and median phase angle(y x* / g) in degrees, where g
 * is the least-squares gain. Bins with no samples get count 0 and NaN values.
 * x and y must already be time-aligned (dd_align). Bin b covers
 * [-lo_db + b w, -lo_db + (b+1) w), w = lo_db / nbins, the last one includes 0 dB;
 * samples below -lo_db or with x = 0 are left out. 1 <= nbins <= 1e6, lo_db > 0.
 * The arrays are allocated here; the caller frees them with dd_amam_free() (on error
 * nothing is left allocated and *out is zeroed). */
typedef struct {
    size_t nbins;
    double *in_db;     /* bin centres, dB relative to max |x| */
    double *gain_db;   /* AM/AM: normalised gain, dB */
    double *phase_deg; /* AM/PM: degrees */
    size_t *count;
} dd_amam_curve;
dd_status dd_amam_ampm(const dd_cf32 *x, const dd_cf32 *y, size_t n, size_t nbins,
                       double lo_db, dd_amam_curve *out);
/* Frees the arrays of c and zeroes it; safe on a zeroed curve and on NULL. */
void dd_amam_free(dd_amam_curve *c);

/* Peak-to-average power ratio, dB: 10 log10(max|x|^2 / mean|x|^2). n >= 1;
 * DD_ERR_RANGE for an all-zero signal. */
dd_status dd_papr_db(const dd_cf32 *x, size_t n, double *papr_db);
/* CCDF: prob[i] = P(|x|^2 / mean|x|^2 > 10^(thr_db[i]/10)) (strictly greater, the
 * fraction of the n samples). thr_db[i] not NaN (-inf gives P(|x| > 0)); prob holds
 * nthr doubles, caller-owned. */
dd_status dd_ccdf(const dd_cf32 *x, size_t n, const double *thr_db, size_t nthr,
                  double *prob);

#ifdef __cplusplus
}
#endif
#endif
