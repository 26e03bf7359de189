/* Allreduce "tree": binomial reduce to rank 0, then binomial broadcast: 2 ceil(log2 p)
 * messages of n. Also the binomial steps hier uses inside a node, and their cost.
 * docs/comm.md. */
#include "comm/allreduce_impl.h"

/* Binomial reduce of n elements to rank 0: at distance 1, 2, 4, ... a rank whose bit is
 * set sends its partial sum to rank - distance and stops; the others add the partial sum
 * of rank + distance (if it exists). Rank 0 ends with (x0 + x1) + (x2 + x3) + ... */
dd_status dd_ar_tree_reduce_steps(dd_ar_sched *s, int comm, int r, int p, size_t n) {
    for (int mask = 1; mask < p; mask <<= 1) {
        if (r & mask) return dd_ar_add_send(s, comm, r - mask, 0, n);
        if (r + mask < p) DD_TRY(dd_ar_add_recv(s, comm, r + mask, 0, n, 1));
    }
    return DD_OK;
}

/* Binomial broadcast of n elements from rank 0: a rank receives from rank - lowbit(rank),
 * then sends to rank + m for the smaller powers of two m (largest first). */
dd_status dd_ar_tree_bcast_steps(dd_ar_sched *s, int comm, int r, int p, size_t n) {
    if (p < 2) return DD_OK;
    int top = 1;
    while (top < p) top <<= 1;
    int low = top;
    if (r != 0) {
        low = r & -r;
        DD_TRY(dd_ar_add_recv(s, comm, r - low, 0, n, 0));
    }
    for (int m = low >> 1; m >= 1; m >>= 1)
        if (r + m < p) DD_TRY(dd_ar_add_send(s, comm, r + m, 0, n));
    return DD_OK;
}

static dd_status tree_build(dd_comm *c, size_t n, dd_ar_sched *s) {
    DD_TRY(dd_ar_tree_reduce_steps(s, DD_AR_MAIN, c->rank, c->size, n));
    return dd_ar_tree_bcast_steps(s, DD_AR_MAIN, c->rank, c->size, n);
}

/* binomial reduce (with sums) or broadcast (without) of n bytes over p ranks: one-way
 * transfers */
double dd_ar_binomial_cost(const dd_link *l, int p, double n, int with_sum) {
    int L = dd_ar_ceil_log2(p);
    return L * (l->alpha1 + n * l->beta1 + (with_sum ? n * l->gamma : 0.0));
}

static double tree_cost(const dd_link *inter, const dd_link *intra, int ranks_per_node, int p, double bytes) {
    (void)intra;
    (void)ranks_per_node;
    return dd_ar_binomial_cost(inter, p, bytes, 1) + dd_ar_binomial_cost(inter, p, bytes, 0);
}

DD_ALLREDUCE_DEFINE(tree,
                    .summary = "binomial reduce to rank 0 + binomial broadcast: 2 ceil(log2 p) messages of n",
                    .build = tree_build,
                    .cost = tree_cost);
