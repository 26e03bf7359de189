/* Gradient compression for data-parallel training (src/compress): a compressor turns
 * each rank's gradient contribution for a flat bucket into a small payload, exchanges the
 * payloads with the collective that fits them, and leaves on every rank the same sum of
 * the decompressed contributions. Error feedback (EF-SGD) keeps what was not sent in a
 * per-rank residual that is added to the next step's gradient. See docs/compress.md.
 *
 * Compressors (dd_compress_names()):
 *   none      plain float32 through the configured allreduce (the reference)
 *   fp32      identity codec through the quantised ring (tests the ring: bit-identical
 *             to the ring allreduce)
 *   fp16 bf16 IEEE half / bfloat16 (round to nearest even), quantised ring
 *   int8 int4 symmetric integers with one float32 scale per chunk of `chunk` elements
 *             (scale = max|x| / 127 or / 7), round to nearest or stochastic; quantised ring
 *   sign      1 bit per element and one scale per chunk (mean |x| of the chunk); quantised ring
 *   topk      the k = ceil(density n) largest |x|: exact selection, or a threshold
 *             estimated from a random sample (sampled = 1); (index, value) pairs by allgather
 *   randk     k coordinates chosen by a seed shared by all ranks (same on every rank):
 *             the k values by allreduce
 *   powersgd  rank-r approximation P Q^T of the bucket reshaped as a matrix, one power
 *             iteration per step with warm start; P and Q by allreduce
 *   dgc       Deep Gradient Compression: local clipping, momentum correction, top-k by a
 *             sampled threshold, momentum factor masking, density warm-up; pairs by allgather
 *
 * Usage (what the data-parallel strategy does for every bucket of every step):
 *   dd_compress_cfg cc; dd_compress_cfg_default(&cc); dd_compress_parse(&cc, "topk");
 *   dd_compressor *cp; dd_compress_create(&cc, &cp);
 *   dd_compress_begin_step(cp, step, epoch, frac);   // once per step
 *   dd_compress_exchange(cp, comm, grads, lo, hi);   // per bucket, every rank, same order
 *
 * Not thread-safe. Never includes mpi.h.
 */
#ifndef DISTDPD_COMPRESS_H
#define DISTDPD_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/ckpt.h"
#include "distdpd/comm.h"
#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_COMPRESS_NAME_MAX 16

/* Configuration. Start from dd_compress_cfg_default(); every rank must use the same. */
typedef struct {
    char name[DD_COMPRESS_NAME_MAX]; /* a registered compressor (above); default "none" */
    int error_feedback;  /* 1: keep the residual and add it next step; 0: drop it;
                            -1 (default): on for lossy compressors. "none" and "fp32"
                            are lossless and keep no residual either way */
    double density;      /* topk, randk, dgc: fraction of each bucket's elements sent,
                            (0, 1]; default 0.01 (dgc: the final density, default 0.001).
                            k = max(1, ceil(density * n)). 1: all (sent dense, see
                            dd_compress_exchange) */
    size_t chunk;        /* int8, int4, sign: elements per scale, [1, 2^24]; default 256 */
    int stochastic;      /* int8, int4: 1 = stochastic rounding (unbiased), 0 (default) =
                            round to nearest */
    int sampled;         /* topk: 1 = threshold from a sample, 0 (default) = exact k;
                            dgc always samples */
    double sample;       /* fraction of |x| sampled for the threshold, (0, 1]; default
                            0.01 (at least 256 elements, or all) */
    int rank;            /* powersgd: approximation rank r, [1, 256]; default 2 */
    double momentum;     /* dgc: momentum of the correction u = m u + g, [0, 1); default
                            0.9. The optimiser should then run without momentum (sgd) */
    double clip;         /* dgc: local clipping of this rank's contribution to the norm
                            clip / sqrt(ranks) before accumulation; >= 0, 0 = off;
                            default 0 (the trainer's --clip still clips the sum) */
    int masking;         /* dgc: momentum factor masking (zero u and v where sent); 1 */
    double warmup;       /* dgc: warm-up epochs (density 25 % falling exponentially to
                            `density` over this many epochs), >= 0; default 4; 0 = off */
    uint64_t seed;       /* randk indices, stochastic rounding, threshold samples */
} dd_compress_cfg;

void dd_compress_cfg_default(dd_compress_cfg *c);
/* Range checks; the message names the field. DD_ERR_ARG. */
dd_status dd_compress_cfg_check(const dd_compress_cfg *c);

/* Parses a --compress value: a name and optional comma-separated key=value settings,
 * e.g. "topk,density=0.001,sampled=1", "int8,chunk=128,stochastic=1", "powersgd,rank=4",
 * "dgc,density=0.001,momentum=0.9,warmup=1,clip=0,masking=1", "int4,ef=0". Keys: ef,
 * density, chunk, stochastic, sampled, sample, rank, momentum, clip, masking, warmup,
 * seed. Sets c->name and the given fields (and dgc's density default); others keep
 * their values. Values are decimal numbers (no 0x, inf or nan; "010" is ten); an empty
 * setting ("topk," or "topk,,rank=2") is refused. DD_ERR_ARG names the bad key or value
 * and lists the choices. */
dd_status dd_compress_parse(dd_compress_cfg *c, const char *spec);
/* The configuration as a spec with every setting ("int8,ef=1,density=...,seed=0"; "none"),
 * which dd_compress_parse reads back to the same configuration; written into buf (always
 * NUL-terminated when cap > 0). Returns the length it needed, like snprintf. */
size_t dd_compress_spec(const dd_compress_cfg *c, char *buf, size_t cap);

/* The registered names, NULL-terminated, and a one-line description of each. */
const char *const *dd_compress_names(void);
const char *dd_compress_describe(const char *name);

typedef struct dd_compressor dd_compressor;

/* Errors: DD_ERR_ARG (bad configuration or unknown name), DD_ERR_NOMEM. Caller destroys. */
dd_status dd_compress_create(const dd_compress_cfg *cfg, dd_compressor **out);
void dd_compress_destroy(dd_compressor **c);

const dd_compress_cfg *dd_compress_config(const dd_compressor *c);
/* 1 if the compressor can change the values (everything but none and fp32). */
int dd_compress_lossy(const dd_compressor *c);
/* 1 if a residual is kept (error_feedback resolved). */
int dd_compress_has_ef(const dd_compressor *c);

/* Tells the compressor where training is: the global optimiser step (0-based; seeds the
 * shared and per-rank random numbers, so a resumed run draws the same), the epoch
 * (0-based) and the fraction of it done (dgc's warm-up). Call once per optimiser step on
 * every rank, before the step's exchanges. */
void dd_compress_begin_step(dd_compressor *c, uint64_t step, int epoch, double frac);

/* The density dgc/topk/randk use this step (dgc: after warm-up); 1 for the others. */
double dd_compress_density_now(const dd_compressor *c);

/* Compresses this rank's contribution grads[lo, hi) (plus the residual kept for that
 * range when error feedback is on), exchanges it over comm and overwrites grads[lo, hi)
 * with the sum over the ranks of the decompressed contributions: bit-identical on every
 * rank. The residual becomes (contribution + old residual) - this rank's decompressed
 * contribution. Collective: every rank calls it with the same ranges in the same order
 * (the same [lo, hi) on every step: buckets are fixed). `grads` is the whole arena (so
 * that state is kept per range); the arena length is fixed at the first call's
 * dd_compress_bind (below) or grows on demand. With one rank the round trip still
 * happens (compression error and residual are the same as with many).
 * Sparse compressors at density 1 and "none" send float32 with `algo` (the configured
 * allreduce); the quantised ring and the pair allgather ignore algo.
 * Errors: DD_ERR_ARG, DD_ERR_NOMEM, DD_ERR_COMM. */
dd_status dd_compress_exchange(dd_compressor *c, dd_comm *comm, dd_allreduce_algo algo, float *grads, size_t lo,
                               size_t hi);

/* Sizes the per-rank state for an arena of n floats (residual, dgc momentum; zeroed).
 * Optional: dd_compress_exchange binds on first use. Errors: DD_ERR_NOMEM, DD_ERR_ARG
 * (already bound to another length). */
dd_status dd_compress_bind(dd_compressor *c, size_t n);

/* This rank's residual (n floats, NULL before bind or without error feedback). */
const float *dd_compress_residual(const dd_compressor *c, size_t *n);

/* Accounting since create or the last reset. */
typedef struct {
    uint64_t steps;          /* dd_compress_begin_step calls */
    uint64_t exchanges;      /* dd_compress_exchange calls */
    uint64_t elements;       /* gradient elements exchanged (sum of hi - lo) */
    uint64_t payload_bytes;  /* compressed bytes of this rank's contributions (what a
                                compressed message of it holds) */
    uint64_t bytes_sent;     /* bytes this rank actually sent in the collectives */
    double compress_s;       /* wall time encoding (incl. error feedback, selection) */
    double decompress_s;     /* wall time decoding and summing */
    double comm_s;           /* wall time inside the collectives */
} dd_compress_stats;

void dd_compress_stats_get(const dd_compressor *c, dd_compress_stats *st);
void dd_compress_stats_reset(dd_compressor *c);
/* Compression ratio of the stats: 4 * elements / payload_bytes (dense float32 over
 * compressed payload); 1 when nothing was exchanged. */
double dd_compress_ratio(const dd_compress_stats *st);

/* --- Checkpointing the per-rank state ----------------------------------------------- */

/* Buckets are created on their first exchange. The layout (nb buckets as (lo, n) pairs in
 * ascending lo, 2 * nb values) is exported with the state, and imported into a fresh
 * compressor (bound to an arena of arena_n floats) before the state: import creates the
 * buckets. *nb only when lo_n == NULL. Errors: DD_ERR_ARG (ranges not ascending, beyond
 * the arena, or a compressor that already has other buckets). */
dd_status dd_compress_layout_export(const dd_compressor *c, uint64_t *lo_n, size_t *nb);
dd_status dd_compress_layout_import(dd_compressor *c, size_t arena_n, const uint64_t *lo_n, size_t nb);

/* The per-rank state (residual and codec state such as dgc's momentum) as floats:
 * *n floats (0 when the compressor keeps none). Fills buf when buf != NULL (buf holds
 * *n floats). The order is fixed for a given configuration and arena. */
dd_status dd_compress_state_export(const dd_compressor *c, float *buf, size_t *n);
/* Replaces the per-rank state by buf[0..n) (n as export reports). DD_ERR_MISMATCH if n
 * differs. */
dd_status dd_compress_state_import(dd_compressor *c, const float *buf, size_t n);
/* State that is the same on every rank (powersgd's warm-start Q): exported and imported
 * likewise; *n = 0 when none. */
dd_status dd_compress_shared_export(const dd_compressor *c, float *buf, size_t *n);
dd_status dd_compress_shared_import(dd_compressor *c, const float *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
