/* 5G NR-like OFDM test-signal generator and demodulating EVM.
 *
 * The generator builds one frame of CP-OFDM: random square QAM on the active
 * sub-carriers of one or more NR carriers, IFFT at the (oversampled) sample rate, NR
 * cyclic prefixes, windowed overlap-add (WOLA) at the symbol edges, then a
 * frequency-domain mask over the whole frame, so that the clean signal's ACLR is far
 * below -60 dBc. Optional crest-factor reduction (iterative clip and filter) brings the
 * PAPR to a target. The frame is periodic: it is meant to be repeated like a vector
 * signal generator plays it, and every filter in here is circular over the frame.
 * The transmitted QAM symbols are kept, so dd_ofdm_evm() can demodulate any signal
 * derived from the frame (PA output, DPD output) and report a real EVM.
 *
 * Output level: RMS exactly 1 (mean |x|^2 = 1, before rounding to float32). Scale it
 * with dd_ofdm_scale() (e.g. to a peak or an RMS drive level).
 *
 * Reproducibility: the same configuration and seed give the same samples bit for bit,
 * in any process and on any thread (own deterministic FFT, no FFTW plans or wisdom;
 * the only platform dependence is the C library's cos/sin). Formulas, presets and
 * measured numbers: docs/signals.md.
 */
#ifndef DISTDPD_OFDM_H
#define DISTDPD_OFDM_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"
#include "distdpd/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_OFDM_MAX_CARRIERS 16 /* upper limit of dd_ofdm_cfg.n_carriers */

/* Generator configuration. Fill it with dd_ofdm_cfg_default() and change fields. */
typedef struct {
    double fs;              /* sample rate, Hz; fs / scs must be an integer FFT size N,
                               64 <= N <= 2^20 */
    double scs;             /* sub-carrier spacing, Hz: 15e3, 30e3, 60e3, 120e3 or 240e3
                               (NR numerology mu = 0..4) */
    int n_carriers;         /* number of NR carriers, 1..DD_OFDM_MAX_CARRIERS */
    double carrier_bw;      /* channel bandwidth of each carrier, Hz, > 0 */
    int n_rb;               /* resource blocks per carrier (12 sub-carriers each),
                               0..275; 0 = 3GPP maximum for carrier_bw and scs (TS 38.104
                               table 5.3.2-1, see docs/signals.md); n_rb * 12 * scs must
                               not exceed carrier_bw */
    double carrier_spacing; /* centre-to-centre spacing of carriers, Hz; 0 = carrier_bw;
                               >= n_rb * 12 * scs (also for one carrier: it sets
                               the guard band of the mask). Carriers are centred
                               around DC, each centre rounded to the nearest
                               sub-carrier */
    int qam;                /* constellation size: 4, 16, 64, 256 or 1024 (square QAM) */
    int n_symbols;          /* OFDM symbols in the frame, 1..100000 */
    int cp_len;             /* cyclic prefix, samples: 0 = NR normal CP (144 N / 2048,
                               plus 16 * 2^mu * N / 2048 on the first symbol of every
                               0.5 ms, rounded); > 0 = this CP on every symbol, < N */
    double wola_frac;       /* WOLA raised-cosine ramp length as a fraction of the
                               (shortest) CP, 0..0.5; 0 = rectangular symbols */
    int band_limit;         /* 1 = apply the frequency-domain mask to the frame
                               (default); 0 = leave the raw CP-OFDM spectrum (for tests;
                               CFR always filters with the mask) */
    double papr_target_db;  /* crest-factor reduction target PAPR, dB: 0 = off,
                               else 3..20 */
    int cfr_iters;          /* clip-and-filter passes at the target, 1..100 (default
                               4); more follow while they still lower the PAPR, then
                               corrective passes with a lower clip level, until the
                               PAPR is within 0.1 dB of the target (at most
                               6 * cfr_iters passes; docs/signals.md) */
    uint64_t seed;          /* random seed of the QAM symbols */
} dd_ofdm_cfg;

/* Fills cfg with a preset. preset: NULL or "default" (= "1x20"), "1x20", "1x100",
 * "2x100", "5x40", "10x20" (carriers x MHz, all at 30 kHz, 256-QAM, maximum RBs, CFR
 * off, seed 1). Sample rates: 92.16 MHz for 1x20 (N = 3072, 28 symbols = 1 ms =
 * 92160 samples), 491.52 MHz for 1x100 (N = 16384, 14 symbols = 245760 samples),
 * 983.04 MHz for the 200 MHz presets (N = 32768, 14 symbols = 491520 samples).
 * Unknown names return DD_ERR_ARG (cfg is then filled with "default"). */
dd_status dd_ofdm_cfg_default(dd_ofdm_cfg *cfg, const char *preset);

/* Checks every field; the message of a DD_ERR_ARG names the field and its value. */
dd_status dd_ofdm_cfg_validate(const dd_ofdm_cfg *cfg);

/* The metric specification matching cfg: fs, bw_main = n_carriers * carrier_spacing,
 * bw_sub = carrier_spacing, n_sub = n_carriers, nperseg = N (resolution = scs),
 * bw_occupied = span from the lowest to the highest active sub-carrier edge
 * (n_rb * 12 * scs for one carrier), split 0.6/0.2/0.2. Validates cfg. */
dd_status dd_ofdm_spec(const dd_ofdm_cfg *cfg, dd_spec *spec);

/* A generated frame (opaque). */
typedef struct dd_ofdm dd_ofdm;

/* Validates cfg and generates the frame. On error *out is NULL. The caller destroys
 * the result with dd_ofdm_destroy(). */
dd_status dd_ofdm_create(const dd_ofdm_cfg *cfg, dd_ofdm **out);
/* Frees the frame and sets *sig to NULL; NULL and *sig == NULL are fine. */
void dd_ofdm_destroy(dd_ofdm **sig);

/* The samples (RMS 1), owned by sig, valid until dd_ofdm_destroy(); *n = length. */
const dd_cf32 *dd_ofdm_samples(const dd_ofdm *sig, size_t *n);

/* Description of a generated frame. Every pointer is owned by the frame and valid
 * until dd_ofdm_destroy(). Sub-carrier k (signed, -N/2 <= k < N/2) is at k * scs Hz. */
typedef struct {
    dd_ofdm_cfg cfg;             /* the configuration (n_rb and carrier_spacing
                                    resolved: never 0) */
    size_t n_samples;            /* frame length */
    size_t fft_size;             /* N = fs / scs */
    size_t n_active;             /* active sub-carriers per symbol, all carriers */
    int n_symbols;               /* = cfg.n_symbols */
    int cp_min;                  /* shortest cyclic prefix, samples */
    int wola_len;                /* WOLA ramp length, samples */
    double occupied_bw;          /* n_rb * 12 * scs, Hz, per carrier */
    double scale;                /* s: x(t) = s * sum_k X_k exp(2 pi i k t / N) inside
                                    a symbol of the clean (pre-CFR) frame */
    double papr_raw_db;          /* PAPR of the band-limited frame before CFR */
    double papr_db;              /* PAPR of the output frame */
    int cfr_iters_done;          /* clip-and-filter passes run (0 if CFR is off) */
    const int *carrier_centre;   /* [n_carriers] centre sub-carrier of each carrier */
    const int *active_bin;       /* [n_active] signed sub-carrier index, ascending */
    const int *active_carrier;   /* [n_active] carrier (0-based) of each active bin */
    const size_t *symbol_start;  /* [n_symbols] first sample after each symbol's CP */
    const int *symbol_cp;        /* [n_symbols] CP length of each symbol */
    const dd_cf32 *symbols;      /* [n_symbols][n_active] transmitted QAM symbols,
                                    mean |X|^2 = 1 over the constellation */
} dd_ofdm_info;

/* Fills *info. */
dd_status dd_ofdm_get_info(const dd_ofdm *sig, dd_ofdm_info *info);

/* Options of dd_ofdm_evm(). */
typedef struct {
    int max_lag;    /* 0 = y is time-aligned with the frame; > 0 = first find the
                       integer delay d in [-max_lag, max_lag] maximising the circular
                       cross-correlation |sum_k y[(k+d) mod n] x*[k]| and read y from
                       there; max_lag < n / 2 */
    double cp_frac; /* FFT window start, as a fraction of the shortest CP before the
                       end of each symbol's CP: 0 = right after the CP, 0.5 = CP middle
                       (default); 0..1. Must stay clear of the WOLA ramp
                       (cp_frac * cp_min <= cp_min - wola_len) */
} dd_ofdm_evm_opts;
/* Defaults: max_lag 0, cp_frac 0.5. */
void dd_ofdm_evm_opts_default(dd_ofdm_evm_opts *o);

/* Result of dd_ofdm_evm(). EVM = sqrt(sum |Y/H - X|^2 / sum |X|^2), dB = 20 log10. */
typedef struct {
    double evm_pct;                              /* all carriers, percent */
    double evm_db;                               /* all carriers, dB */
    double carrier_evm_pct[DD_OFDM_MAX_CARRIERS]; /* per carrier, percent */
    double carrier_evm_db[DD_OFDM_MAX_CARRIERS];  /* per carrier, dB */
    int n_carriers;                              /* entries used in carrier_evm_* */
    int delay;                                   /* integer delay applied (0 if
                                                    max_lag == 0) */
    dd_cf64 gain;  /* mean over active sub-carriers of the equaliser H_k, relative to
                      the clean frame (1 for y == frame; the LS gain of y on x) */
    size_t n_points; /* demodulated points used: n_symbols * n_active */
} dd_ofdm_evm_result;

/* Demodulates y (n samples, n must equal the frame length; y is read circularly, as
 * one period of the repeated frame) and computes the EVM against the transmitted
 * symbols: per symbol an N-point FFT window starting cp_frac * cp_min samples before
 * the end of the CP (its known phase ramp removed), the active sub-carriers taken,
 * per sub-carrier zero-forcing equaliser H_k = sum_s Y X* / sum_s |X|^2 over all
 * symbols (absorbs complex gain, fractional delay and any linear filter shorter than
 * the CP margin), then the EVM overall and per carrier. With S symbols the
 * equaliser absorbs a fraction 1/S of white noise: EVM^2 = (S-1)/S * noise/signal;
 * S >= 2 is required (DD_ERR_ARG). DD_ERR_MISMATCH if n differs from the frame,
 * DD_ERR_NUMERIC if y has no energy on some active sub-carrier. opts may be NULL
 * (defaults). */
dd_status dd_ofdm_evm(const dd_ofdm *sig, const dd_cf32 *y, size_t n,
                      const dd_ofdm_evm_opts *opts, dd_ofdm_evm_result *res);

/* Scaling of a signal in place. */
typedef enum {
    DD_OFDM_SCALE_RMS = 0, /* make sqrt(mean |x|^2) = value */
    DD_OFDM_SCALE_PEAK = 1 /* make max |x| = value */
} dd_ofdm_scale_mode;
/* Scales x[0..n-1] so that its RMS or peak equals value (> 0, finite); *gain (may be
 * NULL) receives the factor applied. DD_ERR_RANGE if x is all zero. */
dd_status dd_ofdm_scale(dd_cf32 *x, size_t n, dd_ofdm_scale_mode mode, double value,
                        double *gain);

#ifdef __cplusplus
}
#endif
#endif
