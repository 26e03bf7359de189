/* Internal helpers shared by the metric files of src/dsp (not installed): the FFTW
 * planner lock, a reusable forward FFT of fixed length, the periodic Hann window, the
 * numpy-exact frequency of an fftshifted bin and the spec checks the metrics need.
 *
 * FFTW's planner (fftw_plan_*, fftw_destroy_plan) is not thread safe, fftw_execute is.
 * Every plan creation or destruction in libdistdpd should go through dd_fftw_lock() /
 * dd_fftw_unlock() (or dd_fft_create()/dd_fft_destroy(), which take the lock). */
#ifndef DD_DSP_PSD_INTERNAL_H
#define DD_DSP_PSD_INTERNAL_H

#include "distdpd/metrics.h"

void dd_fftw_lock(void);
void dd_fftw_unlock(void);

/* A forward, unnormalised, in-place complex FFT of n points (numpy's sign convention:
 * X[k] = sum x[m] exp(-2 pi i k m / n)). */
typedef struct {
    size_t n;    /* transform length */
    void *plan;  /* fftw_plan (kept opaque here so callers need not include fftw3.h) */
    dd_cf64 *buf; /* n samples, in and out; owned */
} dd_fft;

/* Creates the plan (FFTW_ESTIMATE) and the buffer; on error *f is left empty. */
dd_status dd_fft_create(dd_fft *f, size_t n);
/* Transforms f->buf in place. Thread safe for distinct dd_fft objects. */
void dd_fft_execute(dd_fft *f);
/* Frees plan and buffer; safe on a zeroed or already destroyed object. */
void dd_fft_destroy(dd_fft *f);

/* Periodic ("fftbins") Hann window of n points: w[m] = 0.5 - 0.5 cos(2 pi m / n). */
void dd_hann_periodic(double *w, size_t n);

/* Frequency, Hz, of bin k (0..n-1) of an fftshifted n-point spectrum, computed with the
 * same floating-point operations as numpy.fft.fftfreq (integer * (1.0 / (n * (1/fs)))),
 * so that band-edge comparisons select exactly the bins OpenDPD selects. */
double dd_shifted_bin_freq(size_t k, size_t n, double fs);

/* Number of nperseg-long segments of an n-sample signal when the last one is
 * zero-padded (OpenDPD's split_segments): ceil(n / nperseg). */
size_t dd_nseg_padded(size_t n, size_t nperseg);

/* Checks the fields of a spec that every metric uses: fs, bw_main, n_sub, nperseg.
 * `who` names the calling function in the message. */
dd_status dd_spec_check_metrics(const dd_spec *spec, const char *who);

/* OpenDPD band layout on an n-point fftshifted axis: index_left = first bin with
 * freq >= -bw_main/2, index_right = last bin with freq <= bw_main/2, sub_len =
 * int((index_right - index_left) / n_sub). Fails (DD_ERR_ARG) if sub_len < 1 or, when
 * need_adjacent, if the adjacent bands [left - sub_len, left) and
 * [right, right + sub_len) do not fit on the axis. */
typedef struct {
    size_t left, right, sub_len;
} dd_band_layout;
dd_status dd_opendpd_layout(const dd_spec *spec, size_t n, int need_adjacent,
                            const char *who, dd_band_layout *out);

#endif
