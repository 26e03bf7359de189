/* Private interface between the compression framework (compress.c: configuration,
 * error feedback, per-bucket state, accounting, checkpoint state), the registry
 * (registry.c: the one list of codecs) and the codecs (quant.c, sparse.c, powersgd.c),
 * plus the collectives the codecs share (qring.c: quantised ring reduce-scatter/allgather;
 * sparse.c: (index, value) pair allgather). Not installed.
 *
 * Adding a compressor: one file in src/compress/ that ends in
 *   DD_CODEC_DEFINE(NAME, .summary = "...", .lossy = 1, .exchange = my_exchange);
 * (or .qring = &my_element_codec for the quantised ring) plus one X(NAME) line in
 * registry.c. Nothing else names a codec: dd_compress_names(), --compress, `distdpd
 * compressors`, the contract test (tests/test_compress_contract_mpi.c) all go through the
 * registry. docs/compress.md ("Adding a compressor").
 *
 * One exchange of a bucket [lo, lo + n) of the arena, as compress.c runs it:
 *   g     = grads[lo..)                      this rank's contribution
 *   codec->prepare(x, g, n)                  optional, in place (dgc: clip, momentum)
 *   in    = g + e  (e = residual, if error feedback; else in = g)
 *   codec->exchange(x, in, n, mine, out)     mine = this rank's decompressed contribution
 *     (or dd_cx_qring(x, codec->qring, ...))  out  = sum over ranks of every rank's mine
 *                                                   (bit-identical on every rank)
 *   codec->finish(x, in, mine, n)            optional (dgc: momentum factor masking)
 *   e     = in - mine  (if error feedback)
 *   grads[lo..) = out
 */
#ifndef DD_COMPRESS_IMPL_H
#define DD_COMPRESS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/compress.h"

/* A bucket's codec state, kept by the framework (keyed by lo, created on first use). */
typedef struct {
    size_t lo, n;     /* the range [lo, lo + n) of the arena */
    float *priv;      /* per-rank codec state, npriv floats, zeroed at creation (dgc: u) */
    size_t npriv;
    float *shared;    /* codec state identical on every rank, nshared floats, zeroed at
                         creation (powersgd: the warm-start Q) */
    size_t nshared;
    uint64_t uses;    /* exchanges of this bucket so far (0 on the first: e.g. powersgd
                         initialises Q then) */
} dd_cbucket;

/* The context of one exchange, handed to the codec. */
typedef struct {
    const dd_compress_cfg *cfg;  /* the configuration (density: use `density` below) */
    dd_comm *comm;               /* the communicator (size 1: the codec still round-trips) */
    dd_allreduce_algo algo;      /* the configured float32 allreduce (none, density 1) */
    int rank, size;              /* of comm */
    uint64_t step;               /* dd_compress_begin_step calls so far (same on all ranks) */
    double density;              /* topk/randk/dgc: the density to use now, (0, 1] */
    dd_cbucket *b;               /* this bucket's state */
    struct dd_compressor *owner; /* for dd_cx_scratch */
    /* accounting: the codec adds to these */
    uint64_t payload_bytes;      /* bytes of this rank's compressed contribution */
    uint64_t bytes_sent;         /* bytes this rank sent in the collective(s) */
    double compress_s;           /* seconds encoding / selecting */
    double decompress_s;         /* seconds decoding / summing */
    double comm_s;               /* seconds in communication calls */
} dd_cx;

/* A fixed-size element codec for the quantised ring (dd_cx_qring below): m elements
 * always encode into bytes(m) bytes. */
typedef struct {
    size_t (*bytes)(const dd_compress_cfg *cfg, size_t m);
    /* encodes v[0..m) (rng: stochastic rounding; may be ignored) */
    void (*enc)(const dd_compress_cfg *cfg, const float *v, size_t m, uint8_t *out, dd_rng *rng);
    /* decodes into v[0..m) (overwrites) */
    void (*dec)(const dd_compress_cfg *cfg, const uint8_t *in, size_t m, float *v);
} dd_qcodec;

/* A codec (a registry entry). Functions return dd_status and set dd_error() messages. */
typedef struct {
    const char *name;     /* registry name (DD_CODEC_DEFINE sets it) */
    const char *summary;  /* one line for --help and `distdpd compressors` */
    int lossy;            /* 0 for none and fp32 */
    /* per-rank / shared state floats for a bucket of n elements (NULL: none) */
    size_t (*priv_floats)(const dd_compress_cfg *cfg, size_t n);
    size_t (*shared_floats)(const dd_compress_cfg *cfg, size_t n);
    /* optional: transforms this rank's contribution g[0..n) in place before error
     * feedback is added */
    dd_status (*prepare)(dd_cx *x, float *g, size_t n);
    /* see the top of this file. in, mine and out do not overlap. Required unless qring
     * is set */
    dd_status (*exchange)(dd_cx *x, const float *in, size_t n, float *mine, float *out);
    /* optional: after the exchange, before the residual update */
    void (*finish)(dd_cx *x, const float *in, const float *mine, size_t n);
    /* an element codec sent through the quantised ring: the exchange is
     * dd_cx_qring(x, qring, in, n, mine, out) (exchange unused). NULL: exchange */
    const dd_qcodec *qring;
    /* 1: sends ceil(density n) of the n elements (cfg->density; dd_compress_density_now
     * reports it, the contract test sets it) */
    int uses_density;
    /* 1: the density warms up over cfg->warmup epochs (dgc; dd_compress_density_now) */
    int density_warmup;
    /* the density when the spec sets none (dgc: 0.001); 0: the configuration's */
    double default_density;
} dd_codec;

/* Defines the registry entry dd_codec_<NAME> of a codec file (registry.c lists it); the
 * arguments are designated initialisers of the other fields. */
#define DD_CODEC_DEFINE(NAME, ...) const dd_codec dd_codec_##NAME = {.name = #NAME, __VA_ARGS__}

/* --- The registry (registry.c) ----------------------------------------------------------- */

/* The registered codecs in registry order (the order of dd_compress_names(), which
 * registry.c also defines). */
const dd_codec *const *dd_codec_registry(size_t *count);
/* The codec of that name; NULL for an unknown name (or NULL). */
const dd_codec *dd_codec_find(const char *name);

/* --- Services of the framework (compress.c) for codecs --------------------------------- */

/* A scratch buffer of at least `bytes` bytes, slot 0..7, owned by the compressor, reused
 * across calls (contents undefined). NULL (with dd_error NOMEM) on failure. Two slots
 * never alias. */
void *dd_cx_scratch(dd_cx *x, int slot, size_t bytes);

/* Seeds r for this exchange: from (cfg->seed, step, b->lo, stream) and, when shared = 0,
 * this rank (shared = 1: every rank draws the same numbers). */
void dd_cx_rng(const dd_cx *x, dd_rng *r, uint64_t stream, int shared);

/* In-place float32 sum of buf[0..n) over the ranks with x->algo (no-op at size 1);
 * accounts comm_s and bytes_sent (the allreduce algorithm's own count). */
dd_status dd_cx_allreduce(dd_cx *x, float *buf, size_t n);

/* Sends this rank's contribution uncompressed: mine = in, out = the float32 sum of in over
 * the ranks with x->algo (dd_cx_allreduce); payload 4n bytes. For none and for the
 * sparsifiers at density 1 (pairs would be twice the size). */
dd_status dd_cx_send_dense(dd_cx *x, const float *in, size_t n, float *mine, float *out);

/* Wall-clock seconds (dd_comm_wtime). */
double dd_cx_now(void);

/* --- Quantised ring (qring.c) ------------------------------------------------------------ */

/* The quantised ring: mine = dec(enc(in)) (this rank's round trip); out = the sum of the
 * ranks' mine by a ring reduce-scatter that, at every hop, decodes the partial sum it
 * receives, adds its own mine (float32) and encodes again, followed by a ring allgather
 * of each block's final encoding, which every rank (the owner too) decodes: identical
 * bits everywhere. Blocks and the summation order are those of the ring allreduce
 * (comm.h), so the identity codec gives exactly dd_comm_allreduce(RING). */
dd_status dd_cx_qring(dd_cx *x, const dd_qcodec *q, const float *in, size_t n, float *mine, float *out);

/* The element codecs of quant.c (used by its dd_codec entries through dd_cx_qring) and
 * its scalar conversions (round to nearest even; fp16 saturates at +-65504). */
extern const dd_qcodec dd_qcodec_fp32, dd_qcodec_fp16, dd_qcodec_bf16, dd_qcodec_int8, dd_qcodec_int4, dd_qcodec_sign;
uint16_t dd_f32_to_f16(float x);
float dd_f16_to_f32(uint16_t h);
uint16_t dd_f32_to_bf16(float x);
float dd_bf16_to_f32(uint16_t h);

/* --- Pair allgather (sparse.c) ------------------------------------------------------------ */

/* Bytes of one index on the wire for a bucket of n elements: 2 (uint16) when n <= 65536,
 * else 4; a pair is that plus a float32 value. */
size_t dd_pair_index_bytes(size_t n);

/* The values a density compressor sends of a bucket of n: max(1, ceil(density n)), at
 * most n (the product shrunk by a few ulps, so 0.07 x 100 is 7). */
size_t dd_cx_sparse_k(double density, size_t n);
/* Below this many values a step (at the final density), dd_compress_exchange warns once
 * (rank 0) that the compressor cannot train the model: docs/compress.md "Too sparse". */
#define DD_CX_MIN_KEPT 8

/* Every rank contributes k_r (index, value) pairs (indices < n, distinct); out[0..n) =
 * for every index, the sum over ranks in rank order (0 first) of the values sent for it
 * (0 where none). Exchanges the counts, then the pairs (allgatherv); bit-identical on
 * every rank. */
dd_status dd_cx_pairs_allgather(dd_cx *x, const uint32_t *idx, const float *val, size_t k, size_t n, float *out);

#endif
