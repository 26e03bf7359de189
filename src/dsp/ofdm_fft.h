/* A small deterministic complex FFT (double precision) used by the OFDM generator and
 * its EVM demodulator. Private to libdistdpd (not installed).
 *
 * Why not FFTW here: the OFDM test signal must be reproducible bit for bit for a
 * given configuration and seed, in any process, on any rank. FFTW's plans depend on
 * array alignment, on the CPU's SIMD set and on accumulated wisdom (an FFTW_ESTIMATE
 * plan may reuse FFTW_MEASURE wisdom left by other code), so two generations of the
 * same signal could differ in the last bits. This FFT always performs the same
 * operations in the same order: mixed radix (4, 2, 3, 5 and a generic odd radix,
 * decimation in time, after kissfft's structure) with Bluestein's algorithm for
 * lengths that have a prime factor above 61. Twiddles come from cos/sin of exact
 * integer fractions. Any length n >= 1 works.
 */
#ifndef DISTDPD_DSP_OFDM_FFT_H
#define DISTDPD_DSP_OFDM_FFT_H

#include <stddef.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dd_ofdm_fft dd_ofdm_fft;

/* A plan for length n (1 <= n <= 2^30). *out is NULL on failure. Caller destroys. */
dd_status dd_ofdm_fft_create(size_t n, dd_ofdm_fft **out);
/* Frees the plan and NULLs *p; NULL and *p == NULL are fine. */
void dd_ofdm_fft_destroy(dd_ofdm_fft **p);
/* Length of the plan. */
size_t dd_ofdm_fft_size(const dd_ofdm_fft *p);
/* In-place unnormalised transform of data[0..n-1]:
 * forward  (inverse == 0): X[k] = sum_n x[n] exp(-2 pi i k n / N)
 * inverse  (inverse != 0): x[n] = sum_k X[k] exp(+2 pi i k n / N)  (no 1/N)
 * Not thread-safe on one plan (the plan owns scratch memory); use a plan per thread. */
void dd_ofdm_fft_exec(dd_ofdm_fft *p, dd_cf64 *data, int inverse);

#ifdef __cplusplus
}
#endif
#endif
