/* Allreduce "ring": reduce-scatter + allgather around a ring of the p ranks, on even
 * blocks (dd_ar_even_blocks): 2(p-1) messages of n/p elements. Also the ring steps that
 * hier (across node leaders), dd_comm_reduce_scatter (the reduce-scatter phase with
 * caller-given blocks) and the quantised ring of src/compress/qring.c (same blocks and
 * order) follow, and the ring's cost. docs/comm.md. */
#include <stdlib.h>

#include "comm/allreduce_impl.h"

/* Ring over p ranks with block boundaries off[0..p] (off[p] = total). Reduce-scatter:
 * at step k (0..p-2) rank r sends block (r-k-1) mod p to r+1 and receives block
 * (r-k-2) mod p from r-1, adding it to its own; afterwards rank r holds the full sum of
 * block r, accumulated around the ring starting at rank r+1:
 * ((x[r+1] + x[r+2]) + ...) + x[r]. Allgather (if with_ag): at step k rank r sends block
 * (r-k) mod p and receives block (r-k-1) mod p, overwriting. */
dd_status dd_ar_ring_steps(dd_ar_sched *s, int comm, int r, int p, const size_t *off, int with_ag) {
    if (p < 2) return DD_OK;
    int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int k = 0; k < p - 1; k++) {
        int sb = ((r - k - 1) % p + 2 * p) % p, rb = ((r - k - 2) % p + 2 * p) % p;
        DD_TRY(dd_ar_add_xchg(s, comm, right, off[sb], off[sb + 1] - off[sb], left, off[rb], off[rb + 1] - off[rb],
                              1));
    }
    if (!with_ag) return DD_OK;
    for (int k = 0; k < p - 1; k++) {
        int sb = ((r - k) % p + p) % p, rb = ((r - k - 1) % p + 2 * p) % p;
        DD_TRY(dd_ar_add_xchg(s, comm, right, off[sb], off[sb + 1] - off[sb], left, off[rb], off[rb + 1] - off[rb],
                              0));
    }
    return DD_OK;
}

static dd_status ring_build(dd_comm *c, size_t n, dd_ar_sched *s) {
    size_t *off = dd_ar_even_blocks(n, c->size);
    if (!off) return DD_ERR_NOMEM;
    dd_status st = dd_ar_ring_steps(s, DD_AR_MAIN, c->rank, c->size, off, 1);
    free(off);
    return st;
}

/* 2(p-1) exchange steps; each rank sends and sums (p-1)/p of the buffer in each phase. */
double dd_ar_ring_cost(const dd_link *l, int p, double n) {
    if (p < 2) return 0;
    double f = (double)(p - 1) / p;
    return 2.0 * (p - 1) * l->alpha + 2.0 * f * n * l->beta + f * n * l->gamma;
}

static double ring_cost(const dd_link *inter, const dd_link *intra, int ranks_per_node, int p, double bytes) {
    (void)intra;
    (void)ranks_per_node;
    return dd_ar_ring_cost(inter, p, bytes);
}

DD_ALLREDUCE_DEFINE(ring,
                    .summary = "reduce-scatter + allgather around a ring: 2(p-1) messages of n/p (bandwidth-optimal)",
                    .build = ring_build,
                    .cost = ring_cost);
