/* Non-IID test benches for federated learning (`distdpd simulate --benches N`) and the
 * split of a measured data set into benches (`distdpd split`): docs/data.md "Benches".
 *
 * A bench preset is one simulated measurement campaign: a PA model family with perturbed
 * parameters, a drive level, a temperature (static gain offset, saturation level and a
 * warm-up gain drift), a bandwidth / carrier layout (carriers x MHz at a sample rate, so
 * the occupied fraction of the band differs), a crest-factor target, a measurement SNR
 * and a size. Every numeric property is drawn stratified over its range (bench k gets
 * stratum perm[k] of N, a random permutation, plus a uniform jitter inside it), so even
 * a few benches span the range, and the draws depend only on (N, heterogeneity, seed). */
#ifndef DD_CLI_BENCHES_H
#define DD_CLI_BENCHES_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"
#include "distdpd/ofdm.h"
#include "distdpd/pa.h"

#define DD_BENCHES_MAX 64

typedef enum { DD_HET_LOW = 0, DD_HET_HIGH = 1 } dd_het;

typedef struct {
    char name[16];          /* "bench-07" */
    const char *family;     /* PA model name (pa.h; static storage) */
    const char *layout;     /* carrier layout name, e.g. "2x20@92.16" (static) */
    dd_ofdm_cfg ofdm;       /* the signal (layout, CFR target, symbols, QAM seed) */
    dd_pa_params pa;        /* the PA's parameters (perturbed; drive and SNR included) */
    double drive_db;        /* drive offset added to the family's default, dB */
    double temperature_c;   /* case temperature, degrees C */
    double snr_db;          /* measurement SNR, dB */
    double papr_target_db;  /* CFR target, dB (0 = off) */
    double vsat_scale;      /* saturation / compression point scale (1 = the family's) */
    double p_shift;         /* Rapp smoothness shift (rapp-based families) */
    double ampm_scale;      /* AM/PM scale (1 = the family's) */
    size_t samples;         /* data set length */
    uint64_t seed;          /* QAM seed; the PA noise uses seed + 1 */
} dd_bench_preset;

/* Fills out[0..n) (1 <= n <= DD_BENCHES_MAX) with the presets of n benches of the given
 * heterogeneity around base_samples samples:
 *  low:  the realistic PA for all, parameters within a few %, drive -1..+1 dB,
 *        20..30 C, SNR 42..48 dB, one layout (1x20 MHz at 92.16 MHz), CFR off, sizes
 *        base x 2^(-1/4..1/4);
 *  high: PA families cycled over 8 (realistic, Wiener-Hammerstein, Rapp, Saleh,
 *        mp-ding, mp-warp, Ghorbani, Hammerstein), parameters within 20-50 %, drive
 *        -4..+3 dB (capped for the memory polynomials, which diverge past their input
 *        peak), -20..85 C, SNR 35..55 dB, 8 layouts (occupied fraction 0.2..0.63),
 *        CFR off/10/9/8 dB, sizes base x 2^(-1..1) (up to 4x apart). */
dd_status dd_bench_presets(int n, dd_het het, uint64_t seed, size_t base_samples, dd_bench_preset *out);

/* Writes the presets' benches: DIR/bench-00 .. as simulate data sets (format 0 opendpd,
 * 1 bin, 2 sigmf), each with its preset in spec.json (opendpd; key "bench") and in
 * simulation.json, then DIR/benches.json; prints one line per bench unless verbosity < 0. */
dd_status dd_benches_simulate(const char *dir, int n, dd_het het, uint64_t seed, size_t base_samples,
                              int format, int force, int verbosity);

/* Adds obj (taken over, also on error; NULL = out of memory) as key "bench" of the JSON
 * object in the file at path (spec.json, simulation.json), replacing one there. */
struct cJSON;
dd_status dd_bench_annotate(const char *path, struct cJSON *obj);

/* In cmd_simulate.c: lists (up to 3) files of a simulate data set present in dir into
 * buf and returns how many exist; removes them all (--force). */
int dd_sim_existing_dataset(const char *dir, char *buf, size_t cap);
dd_status dd_sim_remove_dataset(const char *dir);

#endif
