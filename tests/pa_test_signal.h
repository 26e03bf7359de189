/* Test helper for the PA and fit tests: a band-limited complex Gaussian test signal
 * (OFDM-like statistics) made with an FFTW frequency mask, with optional crest-factor
 * reduction (clip, re-filter, 4 iterations), normalised to peak amplitude 1. */
#ifndef PA_TEST_SIGNAL_H
#define PA_TEST_SIGNAL_H

#include <complex.h>
#include <fftw3.h>
#include <math.h>

#include "distdpd/core.h"

/* Keeps only |f| <= bw/2 (circular, over the whole signal). */
static void pa_ts_mask(fftw_complex *buf, size_t n, double fs, double bw) {
    fftw_plan fwd = fftw_plan_dft_1d((int)n, buf, buf, FFTW_FORWARD, FFTW_ESTIMATE);
    fftw_plan inv = fftw_plan_dft_1d((int)n, buf, buf, FFTW_BACKWARD, FFTW_ESTIMATE);
    fftw_execute(fwd);
    for (size_t k = 0; k < n; k++) {
        double f = (k < n / 2 ? (double)k : (double)k - (double)n) * fs / (double)n;
        if (fabs(f) > bw / 2) buf[k] = 0.0;
        else buf[k] /= (double)n;
    }
    fftw_execute(inv);
    fftw_destroy_plan(fwd);
    fftw_destroy_plan(inv);
}

/* x: n samples; papr_db <= 0 skips the crest-factor reduction. Returns 0 on success. */
static int pa_test_signal(dd_cf32 *x, size_t n, double fs, double bw, double papr_db,
                          uint64_t seed) {
    fftw_complex *buf = fftw_malloc(n * sizeof *buf);
    if (!buf) return -1;
    dd_rng r;
    dd_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        double re = dd_rng_normal(&r), im = dd_rng_normal(&r);
        buf[i] = re + im * I;
    }
    pa_ts_mask(buf, n, fs, bw);
    for (int it = 0; papr_db > 0 && it < 4; it++) {
        double p = 0.0;
        for (size_t i = 0; i < n; i++) p += creal(buf[i] * conj(buf[i]));
        double thr = sqrt(p / (double)n * pow(10.0, papr_db / 10.0));
        for (size_t i = 0; i < n; i++) {
            double a = cabs(buf[i]);
            if (a > thr) buf[i] *= thr / a;
        }
        pa_ts_mask(buf, n, fs, bw);
    }
    double pk = 0.0;
    for (size_t i = 0; i < n; i++) pk = fmax(pk, cabs(buf[i]));
    for (size_t i = 0; i < n; i++) x[i] = (float)(creal(buf[i]) / pk) + (float)(cimag(buf[i]) / pk) * I;
    fftw_free(buf);
    return 0;
}

#endif
