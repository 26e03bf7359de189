/* The sparsifying codecs of the compression framework (compress_impl.h): topk (the k
 * largest |x|, exact or by a sampled threshold), randk (k coordinates from a seed shared
 * by every rank) and dgc (Deep Gradient Compression, Lin et al. 2018: local clipping,
 * momentum correction, sampled top-k, momentum factor masking; the warm-up schedule is
 * the framework's), plus the (index, value) pair allgather they share. See
 * docs/compress.md ("Sparsification").
 *
 * Wire format of the pair allgather: every rank first contributes its pair count (one
 * uint32, MPI_Allgather), then its pairs as one block of k indices followed by k float32
 * values (MPI_Allgatherv). Indices are uint16 when the bucket has at most 65536 elements
 * (6 bytes per pair), uint32 otherwise (8 bytes per pair); every rank knows n, so all
 * agree on the width. Every rank sums all blocks into a
 * zeroed output in rank order 0..p-1, so the result is bit-identical everywhere.
 *
 * Scratch slots (dd_cx_scratch) used here: 0 indices, 1 values, 2 selection keys / randk
 * bitmap, 3 the dgc record of the sent indices (kept from exchange to finish), 4-6 the
 * pair allgather (counts, send block, receive blocks). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compress/compress_impl.h"

enum { SLOT_IDX = 0, SLOT_VAL = 1, SLOT_KEYS = 2, SLOT_DGC = 3, SLOT_PCNT = 4, SLOT_PSEND = 5, SLOT_PRECV = 6 };

/* rng streams (dd_cx_rng) */
enum { STREAM_TOPK_SAMPLE = 0x746f706b, STREAM_RANDK = 0x72616e64, STREAM_DGC_SAMPLE = 0x64676373 };

/* ---------------------------------------------------------------- helpers */

size_t dd_pair_index_bytes(size_t n) { return n <= 65536 ? 2 : 4; }

/* k = max(1, ceil(density n)), at most n. The product is shrunk by a few ulps first so
 * that a density that is "exactly" j/n in decimal (0.07 * 100 = 7.000000000000001 in
 * binary) gives j, not j + 1. */
size_t dd_cx_sparse_k(double density, size_t n) {
    if (n == 0) return 0;
    double t = ceil(density * (double)n * (1.0 - 4.0 * DBL_EPSILON));
    if (!(t >= 1.0)) return 1;
    if (t >= (double)n) return n;
    return (size_t)t;
}

/* The magnitude of x as an unsigned key: the bits of |x|. For non-negative floats the
 * integer order is the numeric order (+0 < denormals < ... < inf < NaN), so selection is
 * exact, total and never trips over NaN. */
static inline uint32_t abs_key(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u & 0x7fffffffu;
}

static inline uint64_t mix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint32_t med3(uint32_t a, uint32_t b, uint32_t c) {
    if (a > b) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    if (b > c) b = c;
    return a > b ? a : b;
}

/* The k-th largest (1 <= k <= n) of a[0..n) by quickselect with a three-way partition
 * (expected O(n), also with many equal keys: zeros are common in gradients); reorders a.
 * *n_gt = how many of a are strictly greater. Pivots: median of three positions from a
 * fixed pseudo-random sequence (deterministic). */
static uint32_t kth_largest(uint32_t *a, size_t n, size_t k, size_t *n_gt) {
    size_t lo = 0, hi = n, want = k - 1;
    uint64_t s = 0x5eed5eedull ^ n;
    for (;;) {
        /* invariant: a[0..lo) > everything in a[lo..hi) > a[hi..n) */
        size_t m = hi - lo;
        if (m == 1) {
            *n_gt = lo;
            return a[lo];
        }
        /* NOLINTNEXTLINE(clang-analyzer-core.DivideZero): m >= 1: 1 <= k <= n keeps want in [lo, hi) */
        uint32_t p = med3(a[lo + mix64(&s) % m], a[lo + mix64(&s) % m], a[lo + mix64(&s) % m]);
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            uint32_t v = a[i];
            if (v > p) {
                a[i++] = a[lt];
                a[lt++] = v;
            } else if (v < p) {
                a[i] = a[--gt];
                a[gt] = v;
            } else {
                i++;
            }
        }
        /* a[lo..lt) > p, a[lt..gt) == p, a[gt..hi) < p */
        if (want < lt) {
            hi = lt;
        } else if (want < gt) {
            *n_gt = lt;
            return p;
        } else {
            lo = gt;
        }
    }
}

/* Exact top-k of |in[0..n)|, 1 <= k <= n: writes the k indices in increasing order to idx.
 * Ties at the k-th magnitude go to the lower indices. keys: n uint32 of scratch. */
static void select_exact(const float *in, size_t n, size_t k, uint32_t *keys, uint32_t *idx) {
    for (size_t i = 0; i < n; i++) keys[i] = abs_key(in[i]);
    size_t n_gt = 0;
    uint32_t t = kth_largest(keys, n, k, &n_gt);
    size_t eq_left = k - n_gt, j = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = abs_key(in[i]);
        if (v > t || (v == t && eq_left > 0)) {
            if (v == t) eq_left--;
            idx[j++] = (uint32_t)i;
        }
    }
}

/* Sample size for the threshold estimate: max(256, ceil(frac n), ceil(32 n / k)), or n
 * when that is not smaller than n. The third term keeps at least ~32 sample points above
 * the threshold: with fewer the quantile estimate is too coarse (with 1 point, the
 * sample's maximum, about n / s elements pass whatever k is); 32 puts the count within
 * k (1 +- 0.18) (one standard deviation). */
static size_t sample_size(double frac, size_t n, size_t k) {
    double s = ceil(frac * (double)n);
    if (s < 256.0) s = 256.0;
    double sk = ceil(32.0 * (double)n / (double)(k ? k : 1));
    if (s < sk) s = sk;
    return s >= (double)n ? n : (size_t)s;
}

/* Sampled top-k: the threshold t is the sample's ceil(s k / n)-th largest |x| (its
 * quantile at 1 - k/n) from s elements (sample_size) drawn uniformly with replacement
 * (s = n: all of them, t is then the exact k-th largest); every index with |in| >= t is
 * sent, in increasing order. If that is more than 2k indices (heavy ties, e.g. many zeros, or an unlucky
 * sample) it falls back to the exact top-k. Returns the count; idx holds min(2k, n).
 * keys: max(s, n) uint32 of scratch. *fallback = 1 when the exact path was taken. */
static size_t select_sampled(const dd_cx *x, uint64_t stream, double frac, const float *in, size_t n, size_t k,
                             uint32_t *keys, uint32_t *idx, int *fallback) {
    size_t s = sample_size(frac, n, k), ks;
    *fallback = 0;
    if (s >= n) {
        for (size_t i = 0; i < n; i++) keys[i] = abs_key(in[i]);
        s = n;
        ks = k;
    } else {
        dd_rng r;
        dd_cx_rng(x, &r, stream, 0);
        for (size_t j = 0; j < s; j++) keys[j] = abs_key(in[dd_rng_below(&r, n)]);
        double q = ceil((double)s * (double)k / (double)n);
        ks = q < 1.0 ? 1 : (q > (double)s ? s : (size_t)q);
    }
    size_t n_gt = 0;
    uint32_t t = kth_largest(keys, s, ks, &n_gt);
    size_t cap = 2 * k < n ? 2 * k : n, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (abs_key(in[i]) >= t) {
            if (m == cap) {
                *fallback = 1;
                break;
            }
            idx[m++] = (uint32_t)i;
        }
    }
    if (*fallback) {
        select_exact(in, n, k, keys, idx);
        return k;
    }
    return m;
}

/* Density 1: mine = in, out = the configured float32 allreduce of in (bit-identical to
 * uncompressed training with that algorithm). */
/* Common checks of the sparse codecs' exchange. */
static dd_status check_bucket(const char *who, size_t n) {
    if (n > (size_t)UINT32_MAX)
        return dd_error(DD_ERR_ARG, "%s: bucket of %zu elements is too large for 32-bit indices (at most %u)", who, n,
                        (unsigned)UINT32_MAX);
    return DD_OK;
}

/* Selects (exact or sampled), fills idx/val and mine, and runs the pair allgather. *m_out
 * = the number of pairs sent (for dgc's record). */
static dd_status sparse_select_send(dd_cx *x, int sampled, uint64_t stream, const float *in, size_t n, size_t k,
                                    float *mine, float *out, uint32_t **idx_out, size_t *m_out) {
    double t0 = dd_cx_now();
    size_t cap = 2 * k < n ? 2 * k : n;
    size_t nkeys = n;
    if (sampled) {
        size_t s = sample_size(x->cfg->sample, n, k);
        if (s > nkeys) nkeys = s;
    }
    uint32_t *idx = dd_cx_scratch(x, SLOT_IDX, cap * sizeof(uint32_t));
    float *val = dd_cx_scratch(x, SLOT_VAL, cap * sizeof(float));
    uint32_t *keys = dd_cx_scratch(x, SLOT_KEYS, nkeys * sizeof(uint32_t));
    if (!idx || !val || !keys) return DD_ERR_NOMEM;
    size_t m;
    if (sampled) {
        int fb = 0;
        m = select_sampled(x, stream, x->cfg->sample, in, n, k, keys, idx, &fb);
    } else {
        select_exact(in, n, k, keys, idx);
        m = k;
    }
    memset(mine, 0, n * sizeof(float));
    for (size_t j = 0; j < m; j++) {
        val[j] = in[idx[j]];
        mine[idx[j]] = val[j];
    }
    x->compress_s += dd_cx_now() - t0;
    *idx_out = idx;
    *m_out = m;
    return dd_cx_pairs_allgather(x, idx, val, m, n, out);
}

/* ---------------------------------------------------------------- pair allgather */

/* The count a rank with bad arguments contributes (never a valid count: k <= n <= 2^32 - 1
 * and a bucket of 2^32 - 1 elements would need 32 GiB of pairs, over the 2 GiB limit). */
#define POISON UINT32_MAX

dd_status dd_cx_pairs_allgather(dd_cx *x, const uint32_t *idx, const float *val, size_t k, size_t n, float *out) {
    if (!x) return dd_error(DD_ERR_ARG, "dd_cx_pairs_allgather: NULL context");
    /* Bad arguments on one rank must not leave the others waiting in the collective: the
     * rank records its message, then still takes part in the count exchange with a
     * poison count, so that every rank returns an error. */
    dd_status bad = DD_OK;
    if (k > n)
        bad = dd_error(DD_ERR_ARG, "dd_cx_pairs_allgather: k = %zu pairs > n = %zu", k, n);
    else if (k && (!idx || !val))
        bad = dd_error(DD_ERR_ARG, "dd_cx_pairs_allgather: NULL idx or val");
    else if (n && !out)
        bad = dd_error(DD_ERR_ARG, "dd_cx_pairs_allgather: NULL out");
    else
        bad = check_bucket("dd_cx_pairs_allgather", n);
    for (size_t j = 0; bad == DD_OK && j < k; j++)
        if (idx[j] >= n) bad = dd_error(DD_ERR_ARG, "dd_cx_pairs_allgather: idx[%zu] = %u >= n = %zu", j, idx[j], n);
    const int p = x->size;
    if (bad != DD_OK && p <= 1) return bad;
    const size_t iw = dd_pair_index_bytes(n), pb = iw + 4; /* index width, bytes per pair */
    if (bad == DD_OK) x->payload_bytes += pb * (uint64_t)k;
    if (p <= 1) {
        double t0 = dd_cx_now();
        if (n) memset(out, 0, n * sizeof(float));
        for (size_t j = 0; j < k; j++) out[idx[j]] += val[j];
        x->decompress_s += dd_cx_now() - t0;
        return DD_OK;
    }
    const size_t np = (size_t)p;
    /* slot 4: byte counts and displacements (size_t) then the pair counts (uint32) */
    size_t *bytes = dd_cx_scratch(x, SLOT_PCNT, np * (2 * sizeof(size_t) + sizeof(uint32_t)));
    if (!bytes) return DD_ERR_NOMEM;
    size_t *displs = bytes + np;
    uint32_t *cnt = (uint32_t *)(void *)(displs + np);
    uint32_t k32 = bad != DD_OK ? POISON : (uint32_t)k;
    double t0 = dd_cx_now();
    dd_status s = dd_comm_allgather(x->comm, &k32, sizeof k32, cnt);
    x->comm_s += dd_cx_now() - t0;
    if (bad != DD_OK) return bad;
    if (s != DD_OK) return dd_error_prefix(s, "pair allgather (counts): ");
    uint64_t total = 0;
    for (size_t r = 0; r < np; r++) {
        if (cnt[r] == POISON)
            return dd_error(DD_ERR_ARG, "pair allgather: rank %zu passed invalid pairs (see its message)", r);
        if (cnt[r] > n)
            return dd_error(DD_ERR_COMM, "pair allgather: rank %zu sends %u pairs for a bucket of %zu", r, cnt[r], n);
        displs[r] = (size_t)(pb * total);
        bytes[r] = pb * (size_t)cnt[r];
        total += cnt[r];
    }
    if (pb * total > (uint64_t)INT32_MAX)
        return dd_error(DD_ERR_ARG,
                        "pair allgather: %llu pairs in all (%llu bytes) exceed the 2 GiB an MPI count can hold: use "
                        "smaller buckets or a lower density",
                        (unsigned long long)total, (unsigned long long)pb * total);
    uint8_t *send = dd_cx_scratch(x, SLOT_PSEND, pb * k);
    uint8_t *recv = dd_cx_scratch(x, SLOT_PRECV, (size_t)(pb * total));
    if (!send || !recv) return DD_ERR_NOMEM;
    if (k) {
        if (iw == 2) {
            for (size_t j = 0; j < k; j++) {
                uint16_t v16 = (uint16_t)idx[j];
                memcpy(send + 2 * j, &v16, 2);
            }
        } else {
            memcpy(send, idx, 4 * k);
        }
        memcpy(send + iw * k, val, 4 * k);
    }
    t0 = dd_cx_now();
    s = dd_comm_allgatherv(x->comm, send, recv, bytes, displs);
    x->comm_s += dd_cx_now() - t0;
    if (s != DD_OK) return dd_error_prefix(s, "pair allgather (pairs): ");
    /* on the wire: this rank's count (4 bytes) and block (pb k bytes) reach p - 1 ranks */
    x->bytes_sent += (uint64_t)(p - 1) * (4 + pb * (uint64_t)k);

    t0 = dd_cx_now();
    if (n) memset(out, 0, n * sizeof(float));
    for (size_t r = 0; r < np; r++) {
        const uint8_t *ri = recv + displs[r], *rv = recv + displs[r] + iw * (size_t)cnt[r];
        for (size_t j = 0; j < cnt[r]; j++) {
            uint32_t ix;
            float v;
            if (iw == 2) {
                uint16_t v16;
                memcpy(&v16, ri + 2 * j, 2);
                ix = v16;
            } else {
                memcpy(&ix, ri + 4 * j, 4);
            }
            memcpy(&v, rv + 4 * j, 4);
            if (ix >= n) {
                x->decompress_s += dd_cx_now() - t0;
                return dd_error(DD_ERR_COMM, "pair allgather: rank %zu sent index %u >= n = %zu", r, ix, n);
            }
            out[ix] += v;
        }
    }
    x->decompress_s += dd_cx_now() - t0;
    return DD_OK;
}

/* ---------------------------------------------------------------- topk */

static dd_status topk_exchange(dd_cx *x, const float *in, size_t n, float *mine, float *out) {
    if (n == 0) return DD_OK;
    DD_TRY(check_bucket("topk", n));
    size_t k = dd_cx_sparse_k(x->density, n);
    if (k >= n) return dd_cx_send_dense(x, in, n, mine, out);
    uint32_t *idx = NULL;
    size_t m = 0;
    return sparse_select_send(x, x->cfg->sampled, STREAM_TOPK_SAMPLE, in, n, k, mine, out, &idx, &m);
}

DD_CODEC_DEFINE(topk,
                .summary = "the k = ceil(density n) largest |x| (exact, or sampled=1: a threshold from a sample), "
                           "(index, value) pairs by allgather",
                .lossy = 1,
                .exchange = topk_exchange,
                .uses_density = 1);

/* ---------------------------------------------------------------- randk */

/* k distinct indices of [0, n) from a generator shared by all ranks (Floyd's algorithm on
 * a bitmap), written in increasing order to idx. bits: ceil(n / 64) words of scratch. */
static void draw_indices(dd_rng *r, size_t n, size_t k, uint64_t *bits, uint32_t *idx) {
    size_t words = (n + 63) / 64;
    memset(bits, 0, words * sizeof *bits);
    for (size_t j = n - k; j < n; j++) {
        size_t t = (size_t)dd_rng_below(r, (uint64_t)j + 1);
        if (bits[t >> 6] >> (t & 63) & 1u) t = j;
        bits[t >> 6] |= (uint64_t)1 << (t & 63);
    }
    size_t m = 0;
    for (size_t w = 0; w < words; w++) {
        uint64_t b = bits[w];
        while (b) {
            int z = __builtin_ctzll(b);
            idx[m++] = (uint32_t)(w * 64 + (size_t)z);
            b &= b - 1;
        }
    }
}

static dd_status randk_exchange(dd_cx *x, const float *in, size_t n, float *mine, float *out) {
    if (n == 0) return DD_OK;
    DD_TRY(check_bucket("randk", n));
    size_t k = dd_cx_sparse_k(x->density, n);
    if (k >= n) return dd_cx_send_dense(x, in, n, mine, out);
    double t0 = dd_cx_now();
    uint32_t *idx = dd_cx_scratch(x, SLOT_IDX, k * sizeof(uint32_t));
    float *val = dd_cx_scratch(x, SLOT_VAL, k * sizeof(float));
    uint64_t *bits = dd_cx_scratch(x, SLOT_KEYS, (n + 63) / 64 * sizeof(uint64_t));
    if (!idx || !val || !bits) return DD_ERR_NOMEM;
    dd_rng r;
    dd_cx_rng(x, &r, STREAM_RANDK, 1);
    draw_indices(&r, n, k, bits, idx);
    memset(mine, 0, n * sizeof(float));
    for (size_t j = 0; j < k; j++) {
        val[j] = in[idx[j]];
        mine[idx[j]] = val[j];
    }
    x->payload_bytes += 4 * (uint64_t)k;
    x->compress_s += dd_cx_now() - t0;
    DD_TRY(dd_cx_allreduce(x, val, k));
    t0 = dd_cx_now();
    memset(out, 0, n * sizeof(float));
    for (size_t j = 0; j < k; j++) out[idx[j]] = val[j];
    x->decompress_s += dd_cx_now() - t0;
    return DD_OK;
}

DD_CODEC_DEFINE(randk,
                .summary = "k = ceil(density n) coordinates drawn from a seed shared by all ranks (unscaled), the k "
                           "values by allreduce",
                .lossy = 1,
                .exchange = randk_exchange,
                .uses_density = 1);

/* ---------------------------------------------------------------- dgc */

/* What dgc's exchange sent, kept in scratch slot 3 for finish (momentum factor masking);
 * the indices themselves stay in slot 0. */
typedef struct {
    uint64_t magic; /* DGC_MAGIC when valid */
    size_t lo, n;   /* the bucket */
    uint64_t step;  /* the step */
    size_t m;       /* indices sent (in slot 0) */
    int dense;      /* 1: everything was sent */
} dgc_record;

#define DGC_MAGIC 0x6467632d73656e74ull

static size_t dgc_priv_floats(const dd_compress_cfg *cfg, size_t n) {
    (void)cfg;
    return n;
}

/* Local gradient clipping (this rank's contribution to ||g|| <= clip / sqrt(p), per
 * bucket), then momentum correction u = m u + g; g <- u. */
static dd_status dgc_prepare(dd_cx *x, float *g, size_t n) {
    if (n == 0) return DD_OK;
    float *u = x->b->priv;
    if (!u || x->b->npriv < n)
        return dd_error(DD_ERR_ARG, "dgc: the bucket at %zu has no momentum state for %zu elements", x->b->lo, n);
    double t0 = dd_cx_now();
    if (x->cfg->clip > 0.0) {
        double ss = 0.0;
        for (size_t i = 0; i < n; i++) ss += (double)g[i] * (double)g[i];
        double norm = sqrt(ss);
        double lim = x->cfg->clip / sqrt((double)(x->size > 1 ? x->size : 1));
        if (isfinite(norm) && norm > lim) {
            double sc = lim / norm;
            for (size_t i = 0; i < n; i++) g[i] = (float)((double)g[i] * sc);
        }
    }
    const float m = (float)x->cfg->momentum;
    for (size_t i = 0; i < n; i++) {
        u[i] = m * u[i] + g[i];
        g[i] = u[i];
    }
    x->compress_s += dd_cx_now() - t0;
    return DD_OK;
}

static dd_status dgc_exchange(dd_cx *x, const float *in, size_t n, float *mine, float *out) {
    dgc_record *rec = dd_cx_scratch(x, SLOT_DGC, sizeof(dgc_record));
    if (!rec) return DD_ERR_NOMEM;
    rec->magic = 0;
    if (n == 0) return DD_OK;
    DD_TRY(check_bucket("dgc", n));
    size_t k = dd_cx_sparse_k(x->density, n), m = 0;
    uint32_t *idx = NULL;
    int dense = k >= n;
    if (dense)
        DD_TRY(dd_cx_send_dense(x, in, n, mine, out));
    else
        DD_TRY(sparse_select_send(x, 1, STREAM_DGC_SAMPLE, in, n, k, mine, out, &idx, &m));
    rec->magic = DGC_MAGIC;
    rec->lo = x->b->lo;
    rec->n = n;
    rec->step = x->step;
    rec->m = m;
    rec->dense = dense;
    return DD_OK;
}

/* Momentum factor masking: u = 0 at the indices sent (the framework's residual, in -
 * mine, is 0 there already). */
static void dgc_finish(dd_cx *x, const float *in, const float *mine, size_t n) {
    (void)in;
    if (!x->cfg->masking || n == 0) return;
    float *u = x->b->priv;
    if (!u) return;
    double t0 = dd_cx_now();
    dgc_record *rec = dd_cx_scratch(x, SLOT_DGC, sizeof(dgc_record));
    if (rec && rec->magic == DGC_MAGIC && rec->lo == x->b->lo && rec->n == n && rec->step == x->step) {
        if (rec->dense) {
            memset(u, 0, n * sizeof(float));
        } else {
            const uint32_t *idx = dd_cx_scratch(x, SLOT_IDX, (rec->m ? rec->m : 1) * sizeof(uint32_t));
            for (size_t j = 0; idx && j < rec->m; j++) u[idx[j]] = 0.0f;
        }
        rec->magic = 0;
    } else {
        /* not reached through dd_compress_exchange; best effort */
        for (size_t i = 0; i < n; i++)
            if (mine[i] != 0.0f) u[i] = 0.0f;
    }
    x->compress_s += dd_cx_now() - t0;
}

DD_CODEC_DEFINE(dgc,
                .summary = "Deep Gradient Compression: local clipping, momentum correction, sampled top-k, momentum "
                           "factor masking, density warm-up; pairs by allgather",
                .lossy = 1,
                .priv_floats = dgc_priv_floats,
                .prepare = dgc_prepare,
                .exchange = dgc_exchange,
                .finish = dgc_finish,
                .uses_density = 1,
                .density_warmup = 1,
                .default_density = 0.001);
