/* Allreduce "hier": binomial reduce inside each node, ring allreduce across one leader
 * per node (local rank 0), binomial broadcast inside the node. The node and leader
 * communicators come from dd_comm_hier_setup (comm.c: MPI_COMM_TYPE_SHARED or blocks of
 * DD_COMM_RANKS_PER_NODE ranks), made by the setup hook on the first call on a
 * communicator and cached in it. docs/comm.md. */
#include <stdlib.h>

#include "comm/allreduce_impl.h"

static dd_status hier_build(dd_comm *c, size_t n, dd_ar_sched *s) {
    int lr = 0, lp = 1;
    MPI_Comm_rank(c->node_mc, &lr);
    MPI_Comm_size(c->node_mc, &lp);
    DD_TRY(dd_ar_tree_reduce_steps(s, DD_AR_NODE, lr, lp, n));
    if (c->leader_mc != MPI_COMM_NULL) {
        int gr = 0, gp = 1;
        MPI_Comm_rank(c->leader_mc, &gr);
        MPI_Comm_size(c->leader_mc, &gp);
        size_t *off = dd_ar_even_blocks(n, gp);
        if (!off) return DD_ERR_NOMEM;
        dd_status st = dd_ar_ring_steps(s, DD_AR_LEADER, gr, gp, off, 1);
        free(off);
        DD_TRY(st);
    }
    return dd_ar_tree_bcast_steps(s, DD_AR_NODE, lr, lp, n);
}

/* tree inside a node of g = min(ranks_per_node, p) ranks on intra, ring across
 * ceil(p / g) leaders on inter; needs intra */
static double hier_cost(const dd_link *inter, const dd_link *intra, int ranks_per_node, int p, double bytes) {
    if (!dd_ar_link_ok(intra) || ranks_per_node < 1) return -1;
    int g = ranks_per_node < p ? ranks_per_node : p;
    int nodes = (p + g - 1) / g;
    return dd_ar_binomial_cost(intra, g, bytes, 1) + dd_ar_ring_cost(inter, nodes, bytes) +
           dd_ar_binomial_cost(intra, g, bytes, 0);
}

DD_ALLREDUCE_DEFINE(hier,
                    .summary = "binomial reduce inside each node, ring across the node leaders, binomial broadcast "
                               "inside the node",
                    .build = hier_build,
                    .setup = dd_comm_hier_setup,
                    .cost = hier_cost);
