/* Power spectral density with FFTW: Welch's method over a whole signal (dd_welch) and
 * OpenDPD's per-segment PSD (dd_psd_segmented), plus the shared FFT plumbing of the
 * metric files (planner lock, reusable in-place FFT, Hann window, numpy-exact bin
 * frequencies). Conventions follow scipy.signal.welch: periodic Hann window, 'constant'
 * detrend = subtract the segment mean, two-sided output, scaling 'density' or
 * 'spectrum'. Formulas: docs/metrics.md. */
#include <complex.h>
#include <fftw3.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>

#include "dsp/psd_internal.h"

/* FFTW's planner keeps global state: plan creation and destruction are serialised. */
static pthread_mutex_t fftw_planner_mutex = PTHREAD_MUTEX_INITIALIZER;

void dd_fftw_lock(void) { pthread_mutex_lock(&fftw_planner_mutex); }
void dd_fftw_unlock(void) { pthread_mutex_unlock(&fftw_planner_mutex); }

dd_status dd_fft_create(dd_fft *f, size_t n) {
    f->n = 0;
    f->plan = NULL;
    f->buf = NULL;
    if (n < 1 || n > (size_t)INT_MAX)
        return dd_error(DD_ERR_ARG, "FFT length %zu out of range [1, %d]", n, INT_MAX);
    dd_cf64 *buf = dd_calloc(n, sizeof *buf);
    if (!buf) return DD_ERR_NOMEM;
    dd_fftw_lock();
    fftw_plan p = fftw_plan_dft_1d((int)n, (fftw_complex *)buf, (fftw_complex *)buf,
                                   FFTW_FORWARD, FFTW_ESTIMATE);
    dd_fftw_unlock();
    if (!p) {
        dd_free(buf);
        return dd_error(DD_ERR_NOMEM, "FFTW could not plan a %zu-point FFT", n);
    }
    f->n = n;
    f->plan = p;
    f->buf = buf;
    return DD_OK;
}

void dd_fft_execute(dd_fft *f) { fftw_execute((fftw_plan)f->plan); }

void dd_fft_destroy(dd_fft *f) {
    if (!f) return;
    if (f->plan) {
        dd_fftw_lock();
        fftw_destroy_plan((fftw_plan)f->plan);
        dd_fftw_unlock();
    }
    dd_free(f->buf);
    f->plan = NULL;
    f->buf = NULL;
    f->n = 0;
}

void dd_hann_periodic(double *w, size_t n) {
    const double two_pi = 6.283185307179586476925286766559;
    for (size_t m = 0; m < n; m++) w[m] = 0.5 - 0.5 * cos(two_pi * (double)m / (double)n);
}

double dd_shifted_bin_freq(size_t k, size_t n, double fs) {
    /* numpy: val = 1.0 / (n * d) with d = 1 / fs; freq = integer * val */
    double val = 1.0 / ((double)n * (1.0 / fs));
    long long idx = (long long)k - (long long)(n / 2);
    return (double)idx * val;
}

size_t dd_nseg_padded(size_t n, size_t nperseg) { return n / nperseg + (n % nperseg != 0); }

/* Validates the arguments shared by the two PSD functions. */
static dd_status psd_check(const char *who, const dd_cf32 *x, size_t n, double fs,
                           size_t nperseg, dd_psd_scaling scaling, const double *psd) {
    if (!x) return dd_error(DD_ERR_ARG, "%s: x is NULL", who);
    if (!psd) return dd_error(DD_ERR_ARG, "%s: psd is NULL", who);
    if (!(fs > 0.0) || !isfinite(fs))
        return dd_error(DD_ERR_ARG, "%s: fs = %g must be finite and > 0", who, fs);
    if (nperseg < 2 || nperseg > (size_t)INT_MAX)
        return dd_error(DD_ERR_ARG, "%s: nperseg = %zu must be in [2, %d]", who, nperseg,
                        INT_MAX);
    if (scaling != DD_PSD_DENSITY && scaling != DD_PSD_SPECTRUM)
        return dd_error(DD_ERR_ARG, "%s: scaling = %d is not DD_PSD_DENSITY or DD_PSD_SPECTRUM",
                        who, (int)scaling);
    if (n < 1) return dd_error(DD_ERR_ARG, "%s: n = 0: empty signal", who);
    return DD_OK;
}

/* Adds the (unscaled) windowed periodogram |FFT(w (x - mean))|^2 of one segment of len
 * samples (zero-padded to f->n) to acc, in fftshifted order. */
static void periodogram_add(dd_fft *f, const double *w, const dd_cf32 *x, size_t len,
                            int detrend, double *acc) {
    size_t n = f->n;
    dd_cf64 mean = 0.0;
    if (detrend) {
        double re = 0.0, im = 0.0;
        for (size_t m = 0; m < len; m++) {
            re += (double)crealf(x[m]);
            im += (double)cimagf(x[m]);
        }
        mean = CMPLX(re / (double)n, im / (double)n);
    }
    for (size_t m = 0; m < n; m++) {
        dd_cf64 v = m < len ? CMPLX((double)crealf(x[m]), (double)cimagf(x[m])) : 0.0;
        f->buf[m] = w[m] * (v - mean);
    }
    dd_fft_execute(f);
    size_t shift = n - n / 2; /* shifted[k] = raw[(k + n - n/2) mod n] */
    for (size_t k = 0; k < n; k++) {
        size_t j = k + shift;
        if (j >= n) j -= n;
        double re = creal(f->buf[j]), im = cimag(f->buf[j]);
        acc[k] += re * re + im * im;
    }
}

/* Shared driver: nseg segments starting at s * step, each of min(nperseg, n - start)
 * real samples (the rest zero), averaged and scaled. */
static dd_status psd_run(const dd_cf32 *x, size_t n, double fs, size_t nperseg, size_t step,
                         size_t nseg, dd_psd_scaling scaling, int detrend, double *psd,
                         double *freq) {
    dd_status st = DD_OK;
    dd_fft f = {0};
    double *w = dd_calloc(nperseg, sizeof *w);
    if (!w) return DD_ERR_NOMEM;
    st = dd_fft_create(&f, nperseg);
    if (st != DD_OK) goto cleanup;
    dd_hann_periodic(w, nperseg);
    for (size_t k = 0; k < nperseg; k++) psd[k] = 0.0;
    for (size_t s = 0; s < nseg; s++) {
        size_t start = s * step;
        size_t len = n - start < nperseg ? n - start : nperseg;
        periodogram_add(&f, w, x + start, len, detrend, psd);
    }
    double sw = 0.0, sw2 = 0.0;
    for (size_t m = 0; m < nperseg; m++) {
        sw += w[m];
        sw2 += w[m] * w[m];
    }
    double scale = scaling == DD_PSD_DENSITY ? 1.0 / (fs * sw2) : 1.0 / (sw * sw);
    for (size_t k = 0; k < nperseg; k++) psd[k] = psd[k] * scale / (double)nseg;
    if (freq)
        for (size_t k = 0; k < nperseg; k++) freq[k] = dd_shifted_bin_freq(k, nperseg, fs);
cleanup:
    dd_fft_destroy(&f);
    dd_free(w);
    return st;
}

dd_status dd_welch(const dd_cf32 *x, size_t n, double fs, size_t nperseg,
                   dd_psd_scaling scaling, int detrend_mean, double *psd, double *freq) {
    DD_TRY(psd_check("dd_welch", x, n, fs, nperseg, scaling, psd));
    if (n < nperseg)
        return dd_error(DD_ERR_ARG, "dd_welch: n = %zu is shorter than nperseg = %zu", n,
                        nperseg);
    /* scipy: noverlap = nperseg // 2, step = nperseg - noverlap,
     * nseg = (n - noverlap) // step (a trailing partial segment is dropped). */
    size_t noverlap = nperseg / 2;
    size_t step = nperseg - noverlap;
    size_t nseg = (n - noverlap) / step;
    return psd_run(x, n, fs, nperseg, step, nseg, scaling, detrend_mean, psd, freq);
}

dd_status dd_psd_segmented(const dd_cf32 *x, size_t n, double fs, size_t nperseg,
                           dd_psd_scaling scaling, double *psd, double *freq) {
    DD_TRY(psd_check("dd_psd_segmented", x, n, fs, nperseg, scaling, psd));
    return psd_run(x, n, fs, nperseg, nperseg, dd_nseg_padded(n, nperseg), scaling, 1, psd,
                   freq);
}

double dd_psd_inband_mean(const dd_spec *spec, const double *psd, const double *freq_hz, size_t n) {
    const double bw = spec->bw_occupied > 0 ? spec->bw_occupied : spec->bw_main;
    double sum = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(freq_hz[i]) < 0.45 * bw) {
            sum += psd[i];
            cnt++;
        }
    return cnt && sum > 0 ? sum / (double)cnt : 1.0;
}
