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
 * Needs n >= nperseg. psd and freq (freq may be NULL) hold nperseg doubles. */
dd_status dd_welch(const dd_cf32 *x, size_t n, double fs, size_t nperseg,
                   dd_psd_scaling scaling, int detrend_mean, double *psd, double *freq);

/* Pooled NMSE in dB: 10 log10(sum|test-ref|^2 / sum|ref|^2). */
dd_status dd_nmse_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n, double *nmse_db);
/* OpenDPD NMSE: mean over nperseg segments (last zero-padded) of each segment's NMSE
 * in dB. */
dd_status dd_nmse_segmented_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                               size_t nperseg, double *nmse_db);

typedef enum {
    DD_ACLR_OPENDPD = 0, /* adjacent sub-channel-wide bands vs max sub-channel power */
    DD_ACLR_3GPP = 1     /* adjacent channels at +-bw_main, measured over bw_occupied */
} dd_aclr_def;

typedef struct {
    double left_db, right_db, avg_db; /* avg = (left + right) / 2 */
} dd_aclr_result;

/* ACLR of x. OpenDPD definition: per-segment spectrum PSD (scipy welch with
 * nperseg = spec->nperseg on each segment, mean-detrended, Hann), averaged over
 * segments; the main channel [-bw_main/2, bw_main/2] is split into n_sub sub-bands;
 * each adjacent band is one sub-band wide next to the channel edge. 3GPP: Welch PSD
 * of the whole signal, adjacent channel centred at +-bw_main, rectangular measurement
 * bandwidth bw_occupied (or bw_main), ratio to the main channel power. */
dd_status dd_aclr(const dd_cf32 *x, size_t n, const dd_spec *spec, dd_aclr_def def,
                  dd_aclr_result *out);

/* OpenDPD's spectral "EVM" proxy in dB (per segment FFT, per sub-channel mean
 * |X_test - X_ref| / mean |X_ref|, averaged over sub-channels, mean over segments,
 * 20 log10). */
dd_status dd_evm_spectral_db(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                             const dd_spec *spec, double *evm_db);

/* The OpenDPD-compatible metric set of `distdpd metrics`. */
typedef struct {
    double nmse_db;
    dd_aclr_result aclr;
    double evm_db;
} dd_metric_set;
dd_status dd_metrics_compute(const dd_cf32 *ref, const dd_cf32 *test, size_t n,
                             const dd_spec *spec, dd_aclr_def aclr_def, int nmse_pooled,
                             dd_metric_set *out);

/* Alignment: integer delay d in [-max_lag, max_lag] maximising |sum y(k+d) x*(k)|, and
 * the least-squares complex gain g with y(k+d) ~ g x(k). */
dd_status dd_align(const dd_cf32 *x, const dd_cf32 *y, size_t n, int max_lag, int *lag,
                   dd_cf64 *gain);

/* AM/AM and AM/PM: bins of |x| in dB (relative to max |x|) from -lo_db..0; per bin the
 * median gain |y|/(|g||x|) in dB and median phase angle(y x* / g) in degrees, where g
 * is the least-squares gain. Bins with no samples get count 0 and NaN values. */
typedef struct {
    size_t nbins;
    double *in_db;     /* bin centres, dB relative to max |x| */
    double *gain_db;   /* AM/AM: normalised gain, dB */
    double *phase_deg; /* AM/PM: degrees */
    size_t *count;
} dd_amam_curve;
dd_status dd_amam_ampm(const dd_cf32 *x, const dd_cf32 *y, size_t n, size_t nbins,
                       double lo_db, dd_amam_curve *out);
void dd_amam_free(dd_amam_curve *c);

/* Peak-to-average power ratio, dB. */
dd_status dd_papr_db(const dd_cf32 *x, size_t n, double *papr_db);
/* CCDF: prob[i] = P(|x|^2 / mean|x|^2 > 10^(thr_db[i]/10)). */
dd_status dd_ccdf(const dd_cf32 *x, size_t n, const double *thr_db, size_t nthr,
                  double *prob);

#ifdef __cplusplus
}
#endif
#endif
