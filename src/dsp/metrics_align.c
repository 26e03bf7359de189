/* Time-domain metrics: delay and complex-gain alignment (dd_align), AM/AM and AM/PM
 * curves as binned medians (dd_amam_ampm), PAPR and CCDF. Double accumulation over
 * float32 samples. Formulas: docs/metrics.md. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "dsp/psd_internal.h"

static dd_cf64 up(dd_cf32 v) { return CMPLX((double)crealf(v), (double)cimagf(v)); }

/* Direct cross-correlation sum_k y(k+d) x*(k) over the overlap of the two signals. */
static dd_cf64 xcorr_at(const dd_cf32 *x, const dd_cf32 *y, size_t n, long d) {
    size_t k0 = d < 0 ? (size_t)(-d) : 0;
    size_t k1 = d > 0 ? n - (size_t)d : n;
    double re = 0.0, im = 0.0;
    for (size_t k = k0; k < k1; k++) {
        double yr = (double)crealf(y[(size_t)((long)k + d)]);
        double yi = (double)cimagf(y[(size_t)((long)k + d)]);
        double xr = (double)crealf(x[k]), xi = (double)cimagf(x[k]);
        re += yr * xr + yi * xi; /* y * conj(x) */
        im += yi * xr - yr * xi;
    }
    return CMPLX(re, im);
}

/* FFT length >= m with only the factors 2, 3 and 5. */
static size_t smooth_len(size_t m) {
    for (size_t l = m;; l++) {
        size_t r = l;
        while (r % 2 == 0) r /= 2;
        while (r % 3 == 0) r /= 3;
        while (r % 5 == 0) r /= 5;
        if (r == 1) return l;
    }
}

/* |c(d)|^2 for d = -max_lag..max_lag into mag[d + max_lag], by FFT: with both signals
 * zero-padded to N >= n + max_lag the circular correlation equals the linear one. */
static dd_status xcorr_fft(const dd_cf32 *x, const dd_cf32 *y, size_t n, long max_lag,
                           double *mag) {
    dd_status st;
    size_t nfft = smooth_len(n + (size_t)max_lag);
    dd_fft fx = {0}, fy = {0};
    st = dd_fft_create(&fx, nfft);
    if (st != DD_OK) return st;
    st = dd_fft_create(&fy, nfft);
    if (st != DD_OK) goto cleanup;
    for (size_t k = 0; k < n; k++) {
        fx.buf[k] = up(x[k]);
        fy.buf[k] = up(y[k]);
    }
    dd_fft_execute(&fx);
    dd_fft_execute(&fy);
    /* c(d) = IFFT(Y conj(X))[d mod N]; IFFT(Z) = conj(FFT(conj(Z))) / N */
    for (size_t k = 0; k < nfft; k++) fy.buf[k] = conj(fy.buf[k] * conj(fx.buf[k]));
    dd_fft_execute(&fy);
    for (long d = -max_lag; d <= max_lag; d++) {
        size_t j = d < 0 ? nfft - (size_t)(-d) : (size_t)d;
        double a = cabs(fy.buf[j]) / (double)nfft;
        mag[d + max_lag] = a * a;
    }
cleanup:
    dd_fft_destroy(&fx);
    dd_fft_destroy(&fy);
    return st;
}

dd_status dd_align(const dd_cf32 *x, const dd_cf32 *y, size_t n, int max_lag, int *lag,
                   dd_cf64 *gain) {
    if (!x) return dd_error(DD_ERR_ARG, "dd_align: x is NULL");
    if (!y) return dd_error(DD_ERR_ARG, "dd_align: y is NULL");
    if (!lag) return dd_error(DD_ERR_ARG, "dd_align: lag is NULL");
    if (!gain) return dd_error(DD_ERR_ARG, "dd_align: gain is NULL");
    if (n < 1) return dd_error(DD_ERR_ARG, "dd_align: n = 0: empty signal");
    if (max_lag < 0 || (size_t)max_lag >= n)
        return dd_error(DD_ERR_ARG, "dd_align: max_lag = %d must be in [0, n - 1 = %zu]",
                        max_lag, n - 1);
    long L = max_lag;
    double *mag = dd_calloc((size_t)(2 * L + 1), sizeof *mag);
    if (!mag) return DD_ERR_NOMEM;
    dd_status st = DD_OK;
    if ((double)n * (double)(2 * L + 1) > 4e6) {
        st = xcorr_fft(x, y, n, L, mag);
        if (st != DD_OK) goto cleanup;
    } else {
        for (long d = -L; d <= L; d++) {
            dd_cf64 c = xcorr_at(x, y, n, d);
            mag[d + L] = creal(c) * creal(c) + cimag(c) * cimag(c);
        }
    }
    /* Maximum; ties go to the smallest |d|, then to the negative lag. */
    long best = 0;
    for (long a = 1; a <= L; a++) {
        if (mag[-a + L] > mag[best + L]) best = -a;
        if (mag[a + L] > mag[best + L]) best = a;
    }
    {
        dd_cf64 c = xcorr_at(x, y, n, best);
        size_t k0 = best < 0 ? (size_t)(-best) : 0, k1 = best > 0 ? n - (size_t)best : n;
        double px = 0.0;
        for (size_t k = k0; k < k1; k++) {
            double xr = (double)crealf(x[k]), xi = (double)cimagf(x[k]);
            px += xr * xr + xi * xi;
        }
        if (!(px > 0.0) || !isfinite(px) || !isfinite(creal(c)) || !isfinite(cimag(c))) {
            st = dd_error(DD_ERR_RANGE,
                          "dd_align: x has zero or non-finite energy over the overlap at "
                          "lag %ld",
                          best);
            goto cleanup;
        }
        *lag = (int)best;
        *gain = c / px;
    }
cleanup:
    dd_free(mag);
    return st;
}

void dd_amam_free(dd_amam_curve *c) {
    if (!c) return;
    dd_free(c->in_db);
    dd_free(c->gain_db);
    dd_free(c->phase_deg);
    dd_free(c->count);
    c->in_db = c->gain_db = c->phase_deg = NULL;
    c->count = NULL;
    c->nbins = 0;
}

static int cmp_double(const void *a, const void *b) {
    double u = *(const double *)a, v = *(const double *)b;
    return (u > v) - (u < v);
}

/* numpy-style median of v[0..m-1] (sorts v): the middle value, or the mean of the two
 * middle values when m is even. */
static double median(double *v, size_t m) {
    qsort(v, m, sizeof *v, cmp_double);
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

dd_status dd_amam_ampm(const dd_cf32 *x, const dd_cf32 *y, size_t n, size_t nbins,
                       double lo_db, dd_amam_curve *out) {
    const char *who = "dd_amam_ampm";
    if (!out) return dd_error(DD_ERR_ARG, "%s: out is NULL", who);
    out->nbins = 0;
    out->in_db = out->gain_db = out->phase_deg = NULL;
    out->count = NULL;
    if (!x) return dd_error(DD_ERR_ARG, "%s: x is NULL", who);
    if (!y) return dd_error(DD_ERR_ARG, "%s: y is NULL", who);
    if (n < 1) return dd_error(DD_ERR_ARG, "%s: n = 0: empty signal", who);
    if (nbins < 1 || nbins > 1000000)
        return dd_error(DD_ERR_ARG, "%s: nbins = %zu must be in [1, 1e6]", who, nbins);
    if (!(lo_db > 0.0) || !isfinite(lo_db))
        return dd_error(DD_ERR_ARG, "%s: lo_db = %g must be finite and > 0", who, lo_db);

    dd_status st = DD_OK;
    size_t *bin = NULL, *start = NULL;
    double *gv = NULL, *pv = NULL;
    /* LS gain and peak input magnitude */
    double px = 0.0, xmax = 0.0, cre = 0.0, cim = 0.0;
    for (size_t i = 0; i < n; i++) {
        double xr = (double)crealf(x[i]), xi = (double)cimagf(x[i]);
        double yr = (double)crealf(y[i]), yi = (double)cimagf(y[i]);
        px += xr * xr + xi * xi;
        cre += yr * xr + yi * xi;
        cim += yi * xr - yr * xi;
        double a = hypot(xr, xi);
        if (a > xmax) xmax = a;
    }
    if (!(px > 0.0) || !isfinite(px) || !isfinite(cre) || !isfinite(cim))
        return dd_error(DD_ERR_RANGE, "%s: x has zero or non-finite energy", who);
    dd_cf64 g = CMPLX(cre, cim) / px;
    double ga = cabs(g);
    if (!(ga > 0.0))
        return dd_error(DD_ERR_RANGE, "%s: the least-squares gain from x to y is zero", who);

    out->in_db = dd_calloc(nbins, sizeof(double));
    out->gain_db = dd_calloc(nbins, sizeof(double));
    out->phase_deg = dd_calloc(nbins, sizeof(double));
    out->count = dd_calloc(nbins, sizeof(size_t));
    bin = dd_calloc(n, sizeof *bin);
    start = dd_calloc(nbins + 1, sizeof *start);
    gv = dd_calloc(n, sizeof *gv);
    pv = dd_calloc(n, sizeof *pv);
    if (!out->in_db || !out->gain_db || !out->phase_deg || !out->count || !bin || !start ||
        !gv || !pv) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }
    out->nbins = nbins;
    double width = lo_db / (double)nbins;
    for (size_t b = 0; b < nbins; b++) out->in_db[b] = -lo_db + ((double)b + 0.5) * width;
    /* pass 1: bin of each sample (nbins = excluded) and counts */
    for (size_t i = 0; i < n; i++) {
        double a = cabs(up(x[i]));
        bin[i] = nbins;
        if (!(a > 0.0)) continue;
        double in = 20.0 * log10(a / xmax);
        if (in < -lo_db) continue;
        double fb = floor((in + lo_db) / width);
        size_t b = fb >= (double)nbins ? nbins - 1 : (size_t)fb;
        bin[i] = b;
        out->count[b]++;
    }
    for (size_t b = 0; b < nbins; b++) start[b + 1] = start[b] + out->count[b];
    /* pass 2: scatter the per-sample gain and phase into their bins */
    {
        size_t *fill = bin; /* reuse: write positions come from a running copy of start */
        size_t *pos = dd_calloc(nbins, sizeof *pos);
        if (!pos) {
            st = DD_ERR_NOMEM;
            goto cleanup;
        }
        for (size_t b = 0; b < nbins; b++) pos[b] = start[b];
        for (size_t i = 0; i < n; i++) {
            size_t b = fill[i];
            if (b == nbins) continue;
            dd_cf64 xi = up(x[i]), yi = up(y[i]);
            double gain = cabs(yi) / (ga * cabs(xi));
            gv[pos[b]] = gain > 0.0 ? fmax(20.0 * log10(gain), -400.0) : -400.0;
            pv[pos[b]] = carg(yi * conj(xi) / g) * (180.0 / 3.14159265358979323846);
            pos[b]++;
        }
        dd_free(pos);
    }
    for (size_t b = 0; b < nbins; b++) {
        size_t m = out->count[b];
        if (m == 0) {
            out->gain_db[b] = NAN;
            out->phase_deg[b] = NAN;
            continue;
        }
        out->gain_db[b] = median(gv + start[b], m);
        out->phase_deg[b] = median(pv + start[b], m);
    }
cleanup:
    if (st != DD_OK) dd_amam_free(out);
    dd_free(bin);
    dd_free(start);
    dd_free(gv);
    dd_free(pv);
    return st;
}

dd_status dd_papr_db(const dd_cf32 *x, size_t n, double *papr_db) {
    if (!x) return dd_error(DD_ERR_ARG, "dd_papr_db: x is NULL");
    if (!papr_db) return dd_error(DD_ERR_ARG, "dd_papr_db: papr_db is NULL");
    if (n < 1) return dd_error(DD_ERR_ARG, "dd_papr_db: n = 0: empty signal");
    double sum = 0.0, peak = 0.0;
    for (size_t i = 0; i < n; i++) {
        double xr = (double)crealf(x[i]), xi = (double)cimagf(x[i]);
        double p = xr * xr + xi * xi;
        sum += p;
        if (p > peak) peak = p;
    }
    if (!(sum > 0.0) || !isfinite(sum))
        return dd_error(DD_ERR_RANGE, "dd_papr_db: x has zero or non-finite power");
    *papr_db = 10.0 * log10(peak / (sum / (double)n));
    return DD_OK;
}

dd_status dd_ccdf(const dd_cf32 *x, size_t n, const double *thr_db, size_t nthr,
                  double *prob) {
    if (!x) return dd_error(DD_ERR_ARG, "dd_ccdf: x is NULL");
    if (!thr_db && nthr) return dd_error(DD_ERR_ARG, "dd_ccdf: thr_db is NULL");
    if (!prob && nthr) return dd_error(DD_ERR_ARG, "dd_ccdf: prob is NULL");
    if (n < 1) return dd_error(DD_ERR_ARG, "dd_ccdf: n = 0: empty signal");
    for (size_t i = 0; i < nthr; i++)
        if (isnan(thr_db[i]))
            return dd_error(DD_ERR_ARG, "dd_ccdf: thr_db[%zu] is NaN", i);
    double *p = dd_calloc(n, sizeof *p);
    if (!p) return DD_ERR_NOMEM;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        double xr = (double)crealf(x[i]), xi = (double)cimagf(x[i]);
        p[i] = xr * xr + xi * xi;
        sum += p[i];
    }
    if (!(sum > 0.0) || !isfinite(sum)) {
        dd_free(p);
        return dd_error(DD_ERR_RANGE, "dd_ccdf: x has zero or non-finite power");
    }
    double mean = sum / (double)n;
    qsort(p, n, sizeof *p, cmp_double);
    for (size_t i = 0; i < nthr; i++) {
        double t = pow(10.0, thr_db[i] / 10.0) * mean;
        /* first index with p > t (p ascending) */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (p[mid] > t)
                hi = mid;
            else
                lo = mid + 1;
        }
        prob[i] = (double)(n - lo) / (double)n;
    }
    dd_free(p);
    return DD_OK;
}
