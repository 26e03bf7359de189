/* Allreduce "rhd": recursive halving (reduce-scatter) + recursive doubling (allgather),
 * Rabenseifner's algorithm, for any p (the ranks beyond the largest power of two fold in
 * first). docs/comm.md. */
#include "comm/allreduce_impl.h"

/* Recursive halving / doubling (Rabenseifner) for any p. With q the largest power of two
 * <= p and e = p - q: ranks 0..2e-1 first pair up (even sends everything to odd, odd adds:
 * x[2i] + x[2i+1]); even ones then wait. The q remaining ranks (new rank v) halve: at
 * distance 1, 2, ..., q/2 partners v and v^d split their common range [lo, hi) at
 * mid = lo + (hi-lo)/2, the lower rank keeps [lo, mid), sends the other half and adds the
 * partner's half of its own. Then doubling in reverse gathers the ranges back, and the
 * odd ranks of the first step send the result to their even partner. */
static int rhd_real(int v, int e) { return v < e ? 2 * v + 1 : v + e; }

static dd_status rhd_build(dd_comm *c, size_t n, dd_ar_sched *s) {
    const int comm = DD_AR_MAIN, r = c->rank, p = c->size;
    if (p < 2) return DD_OK;
    int q = 1;
    while (q * 2 <= p) q *= 2;
    int e = p - q, v;
    if (r < 2 * e) {
        if (r % 2 == 0) {
            DD_TRY(dd_ar_add_send(s, comm, r + 1, 0, n));
            return dd_ar_add_recv(s, comm, r + 1, 0, n, 0);
        }
        DD_TRY(dd_ar_add_recv(s, comm, r - 1, 0, n, 1));
        v = r / 2;
    } else {
        v = r - e;
    }
    int levels = 0;
    while ((1 << levels) < q) levels++;
    size_t lo_stack[32], hi_stack[32];
    size_t lo = 0, hi = n;
    for (int l = 0; l < levels; l++) {
        int d = 1 << l, pv = v ^ d, peer = rhd_real(pv, e);
        size_t mid = lo + (hi - lo) / 2;
        lo_stack[l] = lo;
        hi_stack[l] = hi;
        if (v < pv) { /* keep the lower half */
            DD_TRY(dd_ar_add_xchg(s, comm, peer, mid, hi - mid, peer, lo, mid - lo, 1));
            hi = mid;
        } else {
            DD_TRY(dd_ar_add_xchg(s, comm, peer, lo, mid - lo, peer, mid, hi - mid, 1));
            lo = mid;
        }
    }
    for (int l = levels - 1; l >= 0; l--) {
        int d = 1 << l, pv = v ^ d, peer = rhd_real(pv, e);
        size_t plo = lo_stack[l], phi = hi_stack[l];
        size_t mid = plo + (phi - plo) / 2;
        /* my range is [lo, hi); the partner's is the other half of [plo, phi) */
        size_t olo = (v < pv) ? mid : plo, ohi = (v < pv) ? phi : mid;
        DD_TRY(dd_ar_add_xchg(s, comm, peer, lo, hi - lo, peer, olo, ohi - olo, 0));
        lo = plo;
        hi = phi;
    }
    if (r < 2 * e) DD_TRY(dd_ar_add_send(s, comm, r - 1, 0, n));
    return DD_OK;
}

/* 2 log2(q) exchange steps moving and summing (q-1)/q of the buffer, plus the fold-in and
 * hand-back (one-way transfers of the whole buffer, one sum) when p > q. */
static double rhd_cost(const dd_link *inter, const dd_link *intra, int ranks_per_node, int p, double n) {
    (void)intra;
    (void)ranks_per_node;
    const dd_link *l = inter;
    if (p < 2) return 0;
    int q = 1;
    while (2 * q <= p) q *= 2;
    int L = dd_ar_ceil_log2(q);
    double f = (double)(q - 1) / q;
    double t = 2.0 * L * l->alpha + 2.0 * f * n * l->beta + f * n * l->gamma;
    if (p > q) t += 2.0 * (l->alpha1 + n * l->beta1) + n * l->gamma; /* fold in, hand back */
    return t;
}

DD_ALLREDUCE_DEFINE(rhd,
                    .summary = "recursive halving + doubling (Rabenseifner): 2 log2 p exchanges, bandwidth-optimal; "
                               "any p (extra ranks fold in first)",
                    .build = rhd_build,
                    .cost = rhd_cost);
