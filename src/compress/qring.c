/* The quantised ring (compress_impl.h dd_cx_qring): a ring reduce-scatter in which every
 * hop carries an encoded partial sum (decoded, added to the receiver's own contribution
 * in float32, encoded again), then a ring allgather of each block's final encoding, which
 * every rank decodes. Blocks, message order and summation order are those of the ring
 * allreduce of src/comm/ar_ring.c (dd_ar_ring_steps, dd_ar_even_blocks): block b (n/p
 * elements, the first n%p blocks one more) is owned by rank b and summed as
 * ((x[b+1] + x[b+2]) + ...) + x[b] (indices mod p), each addition "own + received". With
 * the identity codec the result is therefore bit-identical to
 * dd_comm_allreduce(DD_ALLREDUCE_RING). See docs/compress.md. */
#include <limits.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "compress/compress_impl.h"

/* Scratch slots used here (the codecs that call dd_cx_qring use no others). */
enum { QS_MINE = 0, QS_OFF = 1, QS_SEND = 2, QS_RECV = 3, QS_WORK = 4, QS_FINAL = 5 };

static int mod(int a, int p) { return ((a % p) + p) % p; }

dd_status dd_cx_qring(dd_cx *x, const dd_qcodec *q, const float *in, size_t n, float *mine, float *out) {
    if (!x || !q || !q->bytes || !q->enc || !q->dec) return dd_error(DD_ERR_ARG, "dd_cx_qring: NULL argument");
    if (n && (!in || !mine || !out)) return dd_error(DD_ERR_ARG, "dd_cx_qring: NULL buffer with n = %zu", n);
    const dd_compress_cfg *cfg = x->cfg;
    const int p = x->size, r = x->rank;
    const int use_mpi = x->comm && dd_comm_is_mpi(x->comm) && p > 1;
    if (p < 1 || r < 0 || r >= p) return dd_error(DD_ERR_ARG, "dd_cx_qring: rank %d of %d", r, p);

    /* this rank's round trip: mine = dec(enc(in)) */
    const size_t nbytes = q->bytes(cfg, n);
    double t0 = dd_cx_now();
    uint8_t *enc = dd_cx_scratch(x, QS_MINE, nbytes);
    if (!enc) return DD_ERR_NOMEM;
    dd_rng rng;
    dd_cx_rng(x, &rng, 0, 0);
    q->enc(cfg, in, n, enc, &rng);
    double t1 = dd_cx_now();
    x->compress_s += t1 - t0;
    q->dec(cfg, enc, n, mine);
    x->decompress_s += dd_cx_now() - t1;
    x->payload_bytes += nbytes;

    if (!use_mpi || n == 0) {
        /* one rank: the sum is this rank's round trip. Consume the tag an MPI
         * communicator's collective would, like dd_comm_allreduce does. */
        if (x->comm && dd_comm_is_mpi(x->comm)) (void)dd_comm_next_tag(x->comm);
        if (n) memcpy(out, mine, n * sizeof(float));
        return DD_OK;
    }

    /* blocks (dd_ar_even_blocks of the ring allreduce) and their encoded sizes */
    size_t *off = dd_cx_scratch(x, QS_OFF, 2 * ((size_t)p + 1) * sizeof(size_t));
    if (!off) return DD_ERR_NOMEM;
    size_t *boff = off + p + 1; /* byte offset of block b's final encoding */
    const size_t qb = n / (size_t)p, rem = n % (size_t)p;
    off[0] = boff[0] = 0;
    size_t maxlen = 0, maxbytes = 0;
    for (int b = 0; b < p; b++) {
        const size_t len = qb + ((size_t)b < rem ? 1 : 0), by = q->bytes(cfg, len);
        off[b + 1] = off[b] + len;
        boff[b + 1] = boff[b] + by;
        if (len > maxlen) maxlen = len;
        if (by > maxbytes) maxbytes = by;
    }
    if (maxbytes > INT_MAX)
        return dd_error(DD_ERR_ARG, "quantised ring: a block of %zu elements encodes into %zu bytes > INT_MAX", maxlen,
                        maxbytes);
    uint8_t *sbuf = dd_cx_scratch(x, QS_SEND, maxbytes);
    uint8_t *rbuf = dd_cx_scratch(x, QS_RECV, maxbytes);
    float *work = dd_cx_scratch(x, QS_WORK, maxlen * sizeof(float));
    uint8_t *fin = dd_cx_scratch(x, QS_FINAL, boff[p]);
    if (!sbuf || !rbuf || !work || !fin) return DD_ERR_NOMEM;

    MPI_Comm mc = dd_comm_mpi_comm(x->comm);
    const int tag = dd_comm_next_tag(x->comm);
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    dd_rng hop;
    dd_cx_rng(x, &hop, 1, 0);

    /* reduce-scatter: at step k rank r sends block (r-k-1) mod p and receives block
     * (r-k-2) mod p; the block it sends at step k >= 1 is the one it summed at k-1 */
    for (int k = 0; k < p - 1; k++) {
        const int sb = mod(r - k - 1, p), rb = mod(r - k - 2, p);
        const size_t slen = off[sb + 1] - off[sb], rlen = off[rb + 1] - off[rb];
        const size_t sby = q->bytes(cfg, slen), rby = q->bytes(cfg, rlen);
        t0 = dd_cx_now();
        q->enc(cfg, k == 0 ? mine + off[sb] : work, slen, sbuf, &hop);
        t1 = dd_cx_now();
        x->compress_s += t1 - t0;
        DD_TRY(dd_comm_sendrecv_bytes(mc, sbuf, sby, right, rbuf, rby, left, tag, "quantised ring (reduce-scatter)"));
        t0 = dd_cx_now();
        x->comm_s += t0 - t1;
        x->bytes_sent += sby;
        x->comm->stats.bytes_sent += sby; /* the handle's counters see the ring too */
        q->dec(cfg, rbuf, rlen, work);
        const float *own = mine + off[rb];
        for (size_t i = 0; i < rlen; i++) work[i] = own[i] + work[i]; /* own + received */
        x->decompress_s += dd_cx_now() - t0;
    }
    /* the last block received is r's own: encode its full sum once */
    t0 = dd_cx_now();
    q->enc(cfg, work, off[r + 1] - off[r], fin + boff[r], &hop);
    x->compress_s += dd_cx_now() - t0;

    /* allgather of the final encodings: at step k send block (r-k), receive (r-k-1) */
    for (int k = 0; k < p - 1; k++) {
        const int sb = mod(r - k, p), rb = mod(r - k - 1, p);
        const size_t sby = boff[sb + 1] - boff[sb], rby = boff[rb + 1] - boff[rb];
        t0 = dd_cx_now();
        DD_TRY(dd_comm_sendrecv_bytes(mc, fin + boff[sb], sby, right, fin + boff[rb], rby, left, tag,
                                      "quantised ring (allgather)"));
        x->comm_s += dd_cx_now() - t0;
        x->bytes_sent += sby;
        x->comm->stats.bytes_sent += sby; /* the handle's counters see the ring too */
    }

    /* every rank decodes every block, its own included */
    t0 = dd_cx_now();
    for (int b = 0; b < p; b++) q->dec(cfg, fin + boff[b], off[b + 1] - off[b], out + off[b]);
    x->decompress_s += dd_cx_now() - t0;
    return DD_OK;
}
