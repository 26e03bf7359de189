/* Behavioural power-amplifier simulator: named PA models with memory (Saleh, Rapp with
 * AM/PM, Ghorbani, memory polynomials with published coefficients, user GMP, Wiener,
 * Hammerstein, Wiener-Hammerstein and a calibrated "realistic" chain), plus the
 * long-term memory (thermal, trapping) and measurement impairments (AWGN at a given
 * SNR, IQ imbalance, gain drift) that make simulated data look measured.
 * Formulas, defaults and the calibration: docs/pa.md.
 *
 * Every model is the same chain with some stages switched off:
 *
 *   x -> drive gain -> [IQ imbalance, modulator] -> FIR fir_in -> core
 *     -> long-term gain modulation -> FIR fir_out -> output gain * drift
 *     -> [IQ imbalance, receiver] -> + AWGN -> y
 *
 *   core = static nonlinearity NL(u) (+ cross term c u(n)|u(n-lag)|^2), or a GMP G(u).
 *
 * Models (dd_pa_list(); defaults and calibration in docs/pa.md):
 *   saleh, rapp, ghorbani        static nonlinearity (NL) only
 *   mp-ding, mp-warp             memory polynomials with the published coefficient sets
 *   gmp                          user GMP (params.gmp), e.g. from dd_gmp_fit()
 *   wiener / hammerstein         fir_in + NL / NL + fir_out
 *   wiener-hammerstein           fir_in + NL + fir_out
 *   realistic                    fir_in + Rapp/AM-PM + cross term + trapping/thermal
 *                                + fir_out + AWGN 45 dB, calibrated to look measured
 * The long-term memory, noise, IQ imbalance, drift and drive options apply to all.
 *
 * Usage:
 *   dd_pa *pa;
 *   if (dd_pa_create("realistic", NULL, &pa) != DD_OK) ... dd_last_error() ...
 *   dd_pa_apply(pa, x, y, n);                  // first call calibrates drive and noise
 *   dd_pa *clean; dd_pa_clone(pa, 0, &clean);  // the same PA without noise
 *   dd_pa_destroy(&pa); dd_pa_destroy(&clean);
 *
 * Streaming: the state (filter histories, long-term memory, noise RNG, drift clock)
 * persists between dd_pa_apply() calls, so applying a signal in chunks gives the same
 * bytes as applying it at once (once calibrated). dd_pa_reset() returns to the initial
 * state. A dd_pa is not thread-safe; use one per thread (dd_pa_clone).
 */
#ifndef DISTDPD_PA_H
#define DISTDPD_PA_H

#include <stdint.h>

#include "distdpd/core.h"
#include "distdpd/fit.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_PA_FIR_MAX 16   /* longest fir_in / fir_out */
#define DD_PA_CROSS_LAG_MAX 64

typedef struct dd_pa dd_pa;

/* Static (memoryless) nonlinearities. r = |u| is the input amplitude. */
typedef enum {
    DD_PA_NL_RAPP = 0,    /* Rapp + optional AM/PM */
    DD_PA_NL_SALEH = 1,   /* Saleh TWTA */
    DD_PA_NL_GHORBANI = 2 /* Ghorbani */
} dd_pa_nl;

/* Saleh: A(r) = alpha_a r / (1 + beta_a r^2), Phi(r) = alpha_p r^2 / (1 + beta_p r^2).
 * Defaults (Saleh 1981): 2.1587, 1.1517, 4.0033, 9.1040. */
typedef struct {
    double alpha_a; /* AM/AM gain; (0, 100] */
    double beta_a;  /* AM/AM compression; [0, 100] */
    double alpha_p; /* AM/PM, rad; [-100, 100] */
    double beta_p;  /* AM/PM compression; [0, 100] */
} dd_pa_saleh;

/* Rapp: A(r) = G r / (1 + (G r / vsat)^(2p))^(1/(2p)),
 *       Phi(r) = ampm_alpha r^2 / (1 + ampm_beta r^2).
 * Small-signal gain G, output saturates at vsat. Defaults: G 1, vsat 1, p 2, AM/PM off
 * (alpha 0, beta 1). */
typedef struct {
    double gain;       /* small-signal gain G (linear); (0, 1000] */
    double vsat;       /* saturated output amplitude; (0, 1000] */
    double p;          /* smoothness; (0, 50]; 2..3 for class AB */
    double ampm_alpha; /* AM/PM scale, rad; [-10, 10]; 0 = no AM/PM */
    double ampm_beta;  /* AM/PM compression; [0, 1000] */
} dd_pa_rapp;

/* Ghorbani: A(r) = x1 r^x2 / (1 + x3 r^x2) + x4 r, Phi(r) = y1 r^y2 / (1 + y3 r^y2) + y4 r.
 * Defaults (Ghorbani and Sheikhan 1991): x = 8.1081, 1.5413, 6.5202, -0.0718;
 * y = 4.6645, 2.0965, 10.88, -0.003. */
typedef struct {
    double x1, x2, x3, x4; /* x1, x4 in [-1000, 1000]; x2 in (0, 20]; x3 in [0, 1000] */
    double y1, y2, y3, y4; /* same ranges */
} dd_pa_ghorbani;

/* Parameters of every model. Start from dd_pa_params_default(name, &p) and change what
 * you need: a field that the named model does not use must keep its default (zero,
 * empty or NULL), otherwise dd_pa_create() refuses it rather than silently ignoring it.
 * Which model uses which field is listed per field ("used by"). */
typedef struct {
    /* -- operating point (all models) -- */
    double fs;          /* sample rate, Hz, for time constants and drift; (0, 1e12].
                           Default 800e6 */
    double drive_rms;   /* > 0: "RMS drive": at calibration the input gain is chosen so that
                           the model input has RMS drive_rms * 10^(drive_db/20) (scale-free:
                           the caller's normalisation does not matter). 0: fixed input gain
                           10^(drive_db/20). [0, 100] */
    double drive_db;    /* drive offset in dB (power sweeps); [-100, 60]; default 0 */
    double out_gain_db; /* output gain, dB; [-100, 100]; default 0 */

    /* -- static nonlinearity: saleh, rapp, ghorbani (must match the name), wiener,
          hammerstein, wiener-hammerstein, realistic (any) -- */
    dd_pa_nl nl;
    dd_pa_saleh saleh;       /* used when nl == DD_PA_NL_SALEH */
    dd_pa_rapp rapp;         /* used when nl == DD_PA_NL_RAPP */
    dd_pa_ghorbani ghorbani; /* used when nl == DD_PA_NL_GHORBANI */

    /* -- cross term v += cross_coef * u(n) |u(n - cross_lag)|^2 (a GMP lagging term)
          next to the nonlinearity; used by the NL models; 0 = off -- */
    dd_cf64 cross_coef; /* |cross_coef| <= 100 */
    int cross_lag;      /* [0, 64] */

    /* -- linear filters y(n) = sum_k h[k] u(n-k); length 0 = identity.
          fir_in: wiener, wiener-hammerstein, realistic.
          fir_out: hammerstein, wiener-hammerstein, realistic. -- */
    int fir_in_len;                  /* [0, 16] */
    dd_cf64 fir_in[DD_PA_FIR_MAX];   /* finite, not all zero */
    int fir_out_len;                 /* [0, 16] */
    dd_cf64 fir_out[DD_PA_FIR_MAX];  /* finite, not all zero */

    /* -- GMP core: "gmp" only (required); "mp-ding"/"mp-warp" use their built-in
          published sets and need NULL. Borrowed: dd_pa_create() copies it. The PA is
          causal, so leading terms (kc > 0) are refused. -- */
    const dd_gmp *gmp;

    /* -- long-term memory (all models; 0 = off). The state is driven by the input power
          p(n) = |s(n)|^2 after the drive gain and multiplies the core's output by
          g(n) = max(0, 1 - thermal_kappa (P(n) - P0) - trap_kappa S(n)), where
          P(n) = P(n-1) + l (p(n) - P(n-1)), l = 1 - exp(-1 / (thermal_tau_s fs)),
          P starts at P0 = mean input power at calibration (a warm PA), and S is the
          trapping state: S(n) = S(n-1) + l_c/l_r (p(n) - S(n-1)), with the capture rate
          l_c when p(n) > S(n-1) and the release rate l_r otherwise; S starts at 0. -- */
    double thermal_kappa;  /* gain change per unit input power; [0, 10] */
    double thermal_tau_s;  /* thermal time constant, s; (0, 10] when thermal_kappa > 0 */
    double trap_kappa;     /* gain reduction per unit trapped power; [0, 10] */
    double trap_capture_s; /* capture time constant, s; (0, 1] when trap_kappa > 0 */
    double trap_release_s; /* release time constant, s; [trap_capture_s, 10] */

    /* -- measurement impairments (all models) -- */
    double snr_db;     /* complex AWGN at this SNR relative to the noiseless output power
                          measured at calibration; 0 or +INFINITY = off; else (0, 200] */
    uint64_t seed;     /* noise seed; same seed, same bytes */
    double iq_amp_db;  /* IQ imbalance amplitude (Q branch gain), dB; [-6, 6]; 0 = off */
    double iq_phase_deg; /* IQ imbalance phase, degrees; [-45, 45]; 0 = off */
    int iq_at_input;   /* 0: in the observation receiver (after the PA); 1: in the
                          modulator (before the PA) */
    double drift_db_per_ms;  /* linear output gain drift from the last reset; [-1000, 1000] */
    double drift_deg_per_ms; /* linear output phase drift; [-1e5, 1e5] */
} dd_pa_params;

/* Fills *p with the defaults of the named model. Errors: unknown name (DD_ERR_ARG, the
 * message lists the valid names). */
dd_status dd_pa_params_default(const char *name, dd_pa_params *p);

/* Checks p for the named model; the message names the offending parameter, e.g.
 * "pa 'rapp': rapp.p = 0 is out of range (0, 50]". */
dd_status dd_pa_params_check(const char *name, const dd_pa_params *p);

/* Creates a PA. p == NULL means the defaults of the model. On error *out is NULL.
 * The caller destroys *out with dd_pa_destroy(). */
dd_status dd_pa_create(const char *name, const dd_pa_params *p, dd_pa **out);

/* A copy of src with its calibration and a fresh (reset) state. keep_noise = 0 gives the
 * noiseless "true" PA; 1 keeps src's noise setting. The caller destroys *out. */
dd_status dd_pa_clone(const dd_pa *src, int keep_noise, dd_pa **out);

/* Destroys *pa and sets it to NULL; NULL is fine. */
void dd_pa_destroy(dd_pa **pa);

/* Processes n samples x -> y (x and y may be the same array). The first call after
 * create (unless dd_pa_calibrate() or dd_pa_set_calib() came first) calibrates on this
 * x: input gain (RMS drive), P0 and the noise power; later calls reuse them.
 * Errors: NULL arrays, a non-finite sample, an all-zero first input with RMS drive. */
dd_status dd_pa_apply(dd_pa *pa, const dd_cf32 *x, dd_cf32 *y, size_t n);

/* Calibrates on x like the first dd_pa_apply() would (input gain, P0, noiseless output
 * power and noise power; nothing is written out) and resets the state, noise RNG
 * included. Use it to fix the operating point on a reference signal before streaming. */
dd_status dd_pa_calibrate(dd_pa *pa, const dd_cf32 *x, size_t n);

/* Returns to the initial state: zero filter histories, P = P0, S = 0, drift clock 0,
 * noise RNG reseeded. Keeps the calibration. */
void dd_pa_reset(dd_pa *pa);

/* Turns the configured noise on (1) or off (0) for later calls. */
void dd_pa_set_noise(dd_pa *pa, int on);

/* The calibration: what the first dd_pa_apply() measured. */
typedef struct {
    int calibrated;   /* 0 until calibrated */
    double in_gain;   /* linear input gain applied to x */
    double p0;        /* mean input power after the gain (thermal reference) */
    double out_power; /* mean noiseless output power at calibration */
    double noise_var; /* complex noise variance per sample (0 = no noise) */
} dd_pa_calib;
void dd_pa_get_calib(const dd_pa *pa, dd_pa_calib *c);
/* Sets the calibration (e.g. to reproduce a saved one) and resets the state. Errors:
 * a non-finite or negative value, or in_gain <= 0. */
dd_status dd_pa_set_calib(dd_pa *pa, const dd_pa_calib *c);

/* The model name and parameters the PA was created with. */
const char *dd_pa_name(const dd_pa *pa);
const dd_pa_params *dd_pa_get_params(const dd_pa *pa);

/* Writes a human-readable multi-line description (model, stages, parameter values,
 * calibration) into buf (cap bytes, NUL-terminated, truncated if needed) and returns
 * the length the full text needs, like snprintf. buf may be NULL when cap is 0. */
size_t dd_pa_describe(const dd_pa *pa, char *buf, size_t cap);

/* The models: name and one-line description, for `distdpd pa list`. */
typedef struct {
    const char *name;
    const char *summary;
} dd_pa_model_info;
/* Returns the table (static storage) and its length in *count. */
const dd_pa_model_info *dd_pa_list(size_t *count);

#ifdef __cplusplus
}
#endif
#endif
