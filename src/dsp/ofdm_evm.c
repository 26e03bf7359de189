/* Demodulating EVM of a signal derived from a generated OFDM frame (optional circular
 * delay search, FFT window inside the CP, per-sub-carrier zero-forcing equaliser), and
 * the RMS/peak scaling helper. Formulas: docs/signals.md. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "distdpd/ofdm.h"
#include "dsp/ofdm_fft.h"
#include "dsp/ofdm_internal.h"

void dd_ofdm_evm_opts_default(dd_ofdm_evm_opts *o) {
    if (!o) return;
    o->max_lag = 0;
    o->cp_frac = 0.5;
}

/* Integer delay d in [-max_lag, max_lag] maximising |c(d)|, c(d) = sum_k y[(k+d) mod n]
 * conj(x[k]) (circular), through FFTs; ties go to the most negative d. */
static dd_status find_delay(const dd_ofdm *S, const dd_cf32 *y, int max_lag, int *delay) {
    dd_status st = DD_OK;
    size_t n = S->n;
    dd_ofdm_fft *P = NULL;
    dd_cf64 *Y = dd_calloc(n, sizeof(dd_cf64)), *X = dd_calloc(n, sizeof(dd_cf64));
    if (!Y || !X) {
        st = dd_error(DD_ERR_NOMEM, "dd_ofdm_evm: out of memory for the delay search");
        goto cleanup;
    }
    if ((st = dd_ofdm_fft_create(n, &P)) != DD_OK) goto cleanup;
    for (size_t k = 0; k < n; k++) {
        Y[k] = CMPLX((double)crealf(y[k]), (double)cimagf(y[k]));
        X[k] = CMPLX((double)crealf(S->x[k]), (double)cimagf(S->x[k]));
    }
    dd_ofdm_fft_exec(P, Y, 0);
    dd_ofdm_fft_exec(P, X, 0);
    for (size_t k = 0; k < n; k++) Y[k] *= conj(X[k]);
    dd_ofdm_fft_exec(P, Y, 1); /* Y[d] = n * c(d) */
    double best = -1;
    int bd = 0;
    for (int d = -max_lag; d <= max_lag; d++) {
        size_t i = d < 0 ? n - (size_t)(-d) : (size_t)d;
        double v = cabs(Y[i]);
        if (v > best) {
            best = v;
            bd = d;
        }
    }
    *delay = bd;
cleanup:
    dd_ofdm_fft_destroy(&P);
    dd_free(Y);
    dd_free(X);
    return st;
}

dd_status dd_ofdm_evm(const dd_ofdm *S, const dd_cf32 *y, size_t n, const dd_ofdm_evm_opts *opts,
                      dd_ofdm_evm_result *res) {
    dd_status st = DD_OK;
    dd_ofdm_evm_opts o;
    dd_ofdm_fft *P = NULL;
    dd_cf64 *buf = NULL, *sxy = NULL;
    double *syy = NULL, *sxx = NULL;
    if (!S || !y || !res) return dd_error(DD_ERR_ARG, "dd_ofdm_evm: sig, y or res is NULL");
    memset(res, 0, sizeof *res);
    if (n != S->n)
        return dd_error(DD_ERR_MISMATCH,
                        "dd_ofdm_evm: y has n = %zu samples, the OFDM frame has %zu", n, S->n);
    if (S->cfg.n_symbols < 2)
        return dd_error(DD_ERR_ARG,
                        "dd_ofdm_evm: the frame has 1 OFDM symbol; the per-sub-carrier "
                        "equaliser needs n_symbols >= 2 (with 1 the EVM is always 0)");
    if (opts)
        o = *opts;
    else
        dd_ofdm_evm_opts_default(&o);
    if (o.max_lag < 0 || (size_t)o.max_lag >= n / 2)
        return dd_error(DD_ERR_ARG, "dd_ofdm_evm_opts.max_lag = %d: must be 0..%zu", o.max_lag,
                        n / 2 - 1);
    if (!(isfinite(o.cp_frac) && o.cp_frac >= 0 && o.cp_frac <= 1))
        return dd_error(DD_ERR_ARG, "dd_ofdm_evm_opts.cp_frac = %g: must be 0..1", o.cp_frac);
    const long off = lround(o.cp_frac * S->cp_min);
    if (off > (long)S->cp_min - S->wola)
        return dd_error(DD_ERR_ARG,
                        "dd_ofdm_evm_opts.cp_frac = %g: the FFT window would start %ld samples "
                        "into the CP, inside the %d-sample WOLA ramp of a %d-sample CP",
                        o.cp_frac, off, S->wola, S->cp_min);

    int delay = 0;
    if (o.max_lag > 0) {
        st = find_delay(S, y, o.max_lag, &delay);
        if (st != DD_OK) return st;
    }

    const size_t N = S->N, K = S->K;
    const int ns = S->cfg.n_symbols;
    buf = dd_calloc(N, sizeof(dd_cf64));
    sxy = dd_calloc(K, sizeof(dd_cf64));
    syy = dd_calloc(K, sizeof(double));
    sxx = dd_calloc(K, sizeof(double));
    if (!buf || !sxy || !syy || !sxx) {
        st = dd_error(DD_ERR_NOMEM, "dd_ofdm_evm: out of memory");
        goto cleanup;
    }
    if ((st = dd_ofdm_fft_create(N, &P)) != DD_OK) goto cleanup;

    /* Per symbol: window [start - off + delay, +N) read circularly; bin k of its FFT is
     * N * scale * X_k * exp(-2 pi i k off / N) for the clean frame, so multiplying by
     * exp(+2 pi i k off / N) / (N * scale) gives H_k X_k with H_k = 1 for y == frame.
     * Accumulate per sub-carrier sum |Y|^2, sum Y X*, sum |X|^2. */
    const double norm = 1.0 / ((double)N * S->scale);
    for (int s = 0; s < ns; s++) {
        long long a = (long long)S->sym_start[s] - off + delay;
        a %= (long long)n;
        if (a < 0) a += (long long)n;
        for (size_t i = 0; i < N; i++) {
            dd_cf32 v = y[((size_t)a + i) % n];
            buf[i] = CMPLX((double)crealf(v), (double)cimagf(v));
        }
        dd_ofdm_fft_exec(P, buf, 0);
        for (size_t j = 0; j < K; j++) {
            long k = S->bin[j];
            size_t idx = (size_t)(k < 0 ? k + (long)N : k);
            size_t ph = (size_t)(((unsigned long long)idx * (unsigned long long)off) % N);
            double ang = 2.0 * M_PI * (double)ph / (double)N;
            dd_cf64 Y = buf[idx] * CMPLX(cos(ang), sin(ang)) * norm;
            dd_cf32 x32 = S->X[(size_t)s * K + j];
            dd_cf64 X = CMPLX((double)crealf(x32), (double)cimagf(x32));
            sxy[j] += Y * conj(X);
            syy[j] += creal(Y) * creal(Y) + cimag(Y) * cimag(Y);
            sxx[j] += creal(X) * creal(X) + cimag(X) * cimag(X);
        }
    }

    /* With H = sum Y X* / sum |X|^2 per sub-carrier:
     * sum_s |Y/H - X|^2 = (sum |Y|^2 - |sum Y X*|^2 / sum |X|^2) / |H|^2. */
    double err_c[DD_OFDM_MAX_CARRIERS] = {0}, ref_c[DD_OFDM_MAX_CARRIERS] = {0};
    double err = 0, ref = 0;
    dd_cf64 hsum = 0;
    for (size_t j = 0; j < K; j++) {
        dd_cf64 H = sxy[j] / sxx[j];
        double h2 = creal(H) * creal(H) + cimag(H) * cimag(H);
        if (!(h2 > 0) || !isfinite(h2)) {
            st = dd_error(DD_ERR_NUMERIC,
                          "dd_ofdm_evm: y carries no usable signal on sub-carrier %d "
                          "(equaliser gain %g)",
                          S->bin[j], sqrt(h2));
            goto cleanup;
        }
        double a2 = creal(sxy[j]) * creal(sxy[j]) + cimag(sxy[j]) * cimag(sxy[j]);
        double e = (syy[j] - a2 / sxx[j]) / h2;
        if (e < 0) e = 0; /* rounding of a (near) perfect match */
        err += e;
        ref += sxx[j];
        err_c[S->car[j]] += e;
        ref_c[S->car[j]] += sxx[j];
        hsum += H;
    }
    res->evm_pct = 100.0 * sqrt(err / ref);
    res->evm_db = 10.0 * log10(fmax(err / ref, 1e-40));
    res->n_carriers = S->cfg.n_carriers;
    for (int c = 0; c < S->cfg.n_carriers; c++) {
        res->carrier_evm_pct[c] = 100.0 * sqrt(err_c[c] / ref_c[c]);
        res->carrier_evm_db[c] = 10.0 * log10(fmax(err_c[c] / ref_c[c], 1e-40));
    }
    res->delay = delay;
    res->gain = hsum / (double)K;
    res->n_points = (size_t)ns * K;
cleanup:
    dd_ofdm_fft_destroy(&P);
    dd_free(buf);
    dd_free(sxy);
    dd_free(syy);
    dd_free(sxx);
    return st;
}

dd_status dd_ofdm_scale(dd_cf32 *x, size_t n, dd_ofdm_scale_mode mode, double value,
                        double *gain) {
    if (!x || n == 0) return dd_error(DD_ERR_ARG, "dd_ofdm_scale: x is NULL or n = 0");
    if (mode != DD_OFDM_SCALE_RMS && mode != DD_OFDM_SCALE_PEAK)
        return dd_error(DD_ERR_ARG, "dd_ofdm_scale: mode = %d is not RMS (0) or PEAK (1)",
                        (int)mode);
    if (!(isfinite(value) && value > 0))
        return dd_error(DD_ERR_ARG, "dd_ofdm_scale: value = %g must be finite and > 0", value);
    double s = 0, pk = 0;
    for (size_t k = 0; k < n; k++) {
        double re = crealf(x[k]), im = cimagf(x[k]);
        double p = re * re + im * im;
        s += p;
        if (p > pk) pk = p;
    }
    double cur = mode == DD_OFDM_SCALE_RMS ? sqrt(s / (double)n) : sqrt(pk);
    if (!(cur > 0) || !isfinite(cur))
        return dd_error(DD_ERR_RANGE, "dd_ofdm_scale: the signal is all zero or not finite");
    double g = value / cur;
    for (size_t k = 0; k < n; k++)
        x[k] = CMPLXF((float)(crealf(x[k]) * g), (float)(cimagf(x[k]) * g));
    if (gain) *gain = g;
    return DD_OK;
}
