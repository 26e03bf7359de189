/* Rank grids of model parallelism (parallel.h, "Rank grids"): the world's ranks as a T x P
 * x D grid of tensor-parallel, pipeline and data-parallel coordinates. Ranks are first
 * ordered by node (the processor name, dd_comm_node_ids) and rank, then numbered along
 * the grid order, fastest dimension first (default tp, pp, dp): consecutive positions,
 * i.e. the ranks of one node, fill a tensor-parallel group, then a pipeline, so tensor
 * and pipeline parallelism stay inside a node and data parallelism goes across nodes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/parallel.h"

static const char *const dim_names[3] = {"tp", "pp", "dp"};

dd_status dd_grid_parse_order(const char *s, int order[3]) {
    if (!s) return dd_error(DD_ERR_ARG, "--grid-order: NULL");
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0, seen[3] = {0, 0, 0};
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int d = -1;
        for (int k = 0; k < 3; k++)
            if (strcmp(tok, dim_names[k]) == 0) d = k;
        if (d < 0 || n >= 3 || seen[d])
            return dd_error(DD_ERR_ARG, "--grid-order '%s': expected tp, pp and dp once each, fastest first (e.g. "
                                        "tp,pp,dp)",
                            s);
        seen[d] = 1;
        order[n++] = d;
    }
    if (n != 3)
        return dd_error(DD_ERR_ARG, "--grid-order '%s': expected tp, pp and dp once each, fastest first (e.g. tp,pp,dp)",
                        s);
    return DD_OK;
}

size_t dd_grid_order_name(const int order[3], char *buf, size_t cap) {
    return (size_t)snprintf(buf, cap, "%s,%s,%s", dim_names[order[0]], dim_names[order[1]], dim_names[order[2]]);
}

/* 1 when every group along dimension d (ranks that differ only in d) lies on one node. */
static int intra_node(const dd_grid *g, const int *node, int d) {
    const int N = g->T * g->P * g->D;
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) {
            int same = 1;
            for (int k = 0; k < 3; k++)
                if (k != d && g->coord[3 * a + k] != g->coord[3 * b + k]) same = 0;
            if (same && node[a] != node[b]) return 0;
        }
    return 1;
}

dd_status dd_grid_make(dd_comm *world, int T, int P, const int order[3], dd_grid *g) {
    if (!world || !g || !order) return dd_error(DD_ERR_ARG, "dd_grid_make: NULL argument");
    memset(g, 0, sizeof *g);
    const int N = dd_comm_size(world), r = dd_comm_rank(world);
    if (T < 1 || P < 1 || N % (T * P) != 0)
        return dd_error(DD_ERR_ARG, "--tp %d x --pp %d = %d does not divide the %d ranks (mpirun -np N with N a multiple "
                                    "of tp x pp)",
                        T, P, T * P, N);
    g->T = T;
    g->P = P;
    g->D = N / (T * P);
    memcpy(g->order, order, sizeof g->order);
    int *node = calloc((size_t)N, sizeof *node), *by = calloc((size_t)N, sizeof *by);
    g->coord = calloc(3 * (size_t)N, sizeof *g->coord);
    if (!node || !by || !g->coord) {
        free(node);
        free(by);
        dd_grid_free(g);
        return dd_error(DD_ERR_NOMEM, "out of memory for the rank grid");
    }
    dd_status st = dd_comm_node_ids(world, node);
    if (st == DD_OK) {
        /* positions: ranks ordered by node, then rank (a stable counting pass per node) */
        int pos = 0;
        for (int nd = 0; pos < N; nd++)
            for (int q = 0; q < N; q++)
                if (node[q] == nd) by[pos++] = q;
        const int size[3] = {T, P, g->D};
        for (int p = 0; p < N; p++) {
            int rest = p, *c = g->coord + 3 * by[p];
            for (int k = 0; k < 3; k++) {
                c[order[k]] = rest % size[order[k]];
                rest /= size[order[k]];
            }
        }
        g->tp = g->coord[3 * r];
        g->pp = g->coord[3 * r + 1];
        g->dp = g->coord[3 * r + 2];
        g->nodes = 0;
        for (int q = 0; q < N; q++)
            if (node[q] + 1 > g->nodes) g->nodes = node[q] + 1;
        g->tp_intra = intra_node(g, node, 0);
        g->pp_intra = intra_node(g, node, 1);
        if (g->coord[0] || g->coord[1] || g->coord[2])
            st = dd_error(DD_ERR_INTERNAL, "rank grid: world rank 0 is not at (0, 0, 0)");
    }
    free(node);
    free(by);
    if (st != DD_OK) dd_grid_free(g);
    return st;
}

int dd_grid_rank_of(const dd_grid *g, int tp, int pp, int dp) {
    const int N = g->T * g->P * g->D;
    for (int q = 0; q < N; q++)
        if (g->coord[3 * q] == tp && g->coord[3 * q + 1] == pp && g->coord[3 * q + 2] == dp) return q;
    return -1;
}

dd_status dd_grid_split(dd_comm *world, const dd_grid *g, int dim, dd_comm **out) {
    /* the group of ranks that differ only along dim; ordered by their coordinate on it */
    const int a = dim == 0 ? 1 : 0, b = dim == 2 ? 1 : 2;
    const int c[3] = {g->tp, g->pp, g->dp};
    const int sz[3] = {g->T, g->P, g->D};
    const int color = c[a] + sz[a] * c[b];
    return dd_comm_split(world, color, c[dim], out);
}

void dd_grid_free(dd_grid *g) {
    if (!g) return;
    free(g->coord);
    g->coord = NULL;
}
