/* Framing by index and the epoch sampler of the trainer (train.h): frames are windows of
 * the split array addressed by index and copied only into the batch buffer; the epoch
 * order is a keyed Feistel bijection of the index, a pure function of (seed, epoch,
 * position), so no permutation is ever stored and every rank agrees on it. */
#include <string.h>

#include "distdpd/train.h"

dd_status dd_framing_init(dd_framing *f, size_t n, size_t len, size_t stride) {
    if (!f) return dd_error(DD_ERR_ARG, "framing: NULL argument");
    if (len == 0) return dd_error(DD_ERR_ARG, "framing: frame length must be >= 1, got 0");
    if (stride == 0) return dd_error(DD_ERR_ARG, "framing: frame stride must be >= 1, got 0");
    f->n = n;
    f->len = len;
    f->stride = stride;
    f->count = n < len ? 0 : (n - len) / stride + 1;
    return DD_OK;
}

void dd_framing_gather(const dd_framing *f, const dd_cf32 *x, const uint64_t *idx, size_t B,
                       float scale, float *out) {
    const size_t F = f->len;
    for (size_t b = 0; b < B; b++) {
        const float *src = (const float *)(x + idx[b] * f->stride); /* (F, 2) */
        float *dst = out + b * F * 2;
        if (scale == 1.0f) {
            memcpy(dst, src, F * 2 * sizeof(float));
        } else {
            for (size_t k = 0; k < 2 * F; k++) dst[k] = src[k] * scale;
        }
    }
}

dd_status dd_sampler_init(dd_sampler *s, uint64_t n, uint64_t seed, int shuffle) {
    if (!s) return dd_error(DD_ERR_ARG, "sampler: NULL argument");
    if (n == 0) return dd_error(DD_ERR_ARG, "sampler: no items to sample (n = 0)");
    s->n = n;
    s->seed = seed;
    s->shuffle = shuffle ? 1 : 0;
    int bits = 0;
    while (bits < 64 && (n - 1) >> bits) bits++; /* bits needed for n-1 */
    int h = (bits + 1) / 2;
    if (h < 1) h = 1;
    s->half_bits = h;
    return DD_OK;
}

#define FEISTEL_ROUNDS 6

/* One pass of the balanced Feistel network on 2h bits. */
static uint64_t feistel(uint64_t key, int h, uint64_t v) {
    const uint64_t mask = (h >= 32) ? 0xFFFFFFFFull : ((1ull << h) - 1);
    uint64_t l = (v >> h) & mask, r = v & mask;
    for (int k = 0; k < FEISTEL_ROUNDS; k++) {
        uint64_t f = dd_hash64(key + 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1), r) & mask;
        uint64_t nl = r;
        r = l ^ f;
        l = nl;
    }
    return (l << h) | r;
}

uint64_t dd_sampler_index(const dd_sampler *s, uint64_t epoch, uint64_t i) {
    if (!s->shuffle || s->n <= 1) return i;
    const uint64_t key = dd_hash64(s->seed, epoch);
    uint64_t v = i;
    do {
        v = feistel(key, s->half_bits, v);
    } while (v >= s->n); /* cycle walking: a bijection of [0, n) */
    return v;
}

uint64_t dd_sampler_num_batches(uint64_t n, uint64_t B) { return B ? (n + B - 1) / B : 0; }

void dd_batch_slice(uint64_t n, uint64_t B, uint64_t b, int rank, int nranks, uint64_t *lo,
                    uint64_t *hi, uint64_t *global) {
    uint64_t start = b * B;
    uint64_t end = start + B < n ? start + B : n;
    if (start > n) start = end = n;
    uint64_t size = end - start;
    if (nranks < 1) nranks = 1;
    if (rank < 0) rank = 0;
    if (rank >= nranks) rank = nranks - 1;
    /* floor(r * size / p) without overflow for realistic sizes (size <= 2^20 batches) */
    uint64_t a = size * (uint64_t)rank / (uint64_t)nranks;
    uint64_t c = size * (uint64_t)(rank + 1) / (uint64_t)nranks;
    if (lo) *lo = start + a;
    if (hi) *hi = start + c;
    if (global) *global = size;
}
