/* Tensor-parallel group on a communicator (parallel.h, "Tensor parallelism"): the
 * callbacks a model shard calls (dd_model_tp, model.h) run the collectives of comm.h and
 * count their calls, floats and bytes. */
#include <string.h>

#include "distdpd/comm.h"
#include "distdpd/parallel.h"

struct dd_tp_group {
    dd_comm *comm;          /* borrowed */
    dd_allreduce_algo algo; /* of the allreduce callback */
    size_t *counts;         /* size entries, for dd_comm_reduce_scatter */
    dd_tp_group_stats st;
};

dd_status dd_tp_group_create(dd_comm *comm, dd_tp_group **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_tp_group_create: out is NULL");
    *out = NULL;
    if (!comm) return dd_error(DD_ERR_ARG, "dd_tp_group_create: comm is NULL");
    dd_tp_group *g = dd_calloc(1, sizeof *g);
    if (g) g->counts = dd_calloc((size_t)dd_comm_size(comm), sizeof *g->counts);
    if (!g || !g->counts) {
        dd_tp_group_destroy(&g);
        return dd_error(DD_ERR_NOMEM, "dd_tp_group_create: out of memory");
    }
    g->comm = comm;
    g->algo = DD_ALLREDUCE_RING;
    *out = g;
    return DD_OK;
}

void dd_tp_group_destroy(dd_tp_group **g) {
    if (!g || !*g) return;
    dd_free((*g)->counts);
    dd_free(*g);
    *g = NULL;
}

dd_status dd_tp_group_set_allreduce(dd_tp_group *g, dd_allreduce_algo algo) {
    if (!g) return dd_error(DD_ERR_ARG, "dd_tp_group_set_allreduce: group is NULL");
    if ((int)algo < 0 || (int)algo >= dd_allreduce_count())
        return dd_error(DD_ERR_ARG, "dd_tp_group_set_allreduce: allreduce algorithm %d is not registered", (int)algo);
    g->algo = algo;
    return DD_OK;
}

/* Before and after one collective: the time and the communicator's bytes. */
typedef struct {
    double t0;
    uint64_t sent0;
} call_mark;

static call_mark call_start(const dd_tp_group *g) {
    dd_comm_stats cs;
    dd_comm_stats_get(g->comm, &cs);
    return (call_mark){dd_comm_wtime(), cs.bytes_sent};
}

static dd_status call_end(dd_tp_group *g, call_mark mk, dd_status s) {
    dd_comm_stats cs;
    dd_comm_stats_get(g->comm, &cs);
    g->st.bytes_sent += cs.bytes_sent - mk.sent0;
    g->st.seconds += dd_comm_wtime() - mk.t0;
    return s;
}

static dd_status tp_allreduce(void *user, float *buf, size_t n) {
    dd_tp_group *g = user;
    g->st.allreduce_calls++;
    g->st.allreduce_floats += n;
    call_mark mk = call_start(g);
    return call_end(g, mk, dd_comm_allreduce(g->comm, g->algo, buf, n, DD_F32));
}

static dd_status tp_allgather(void *user, const float *send, float *recv, size_t n) {
    dd_tp_group *g = user;
    g->st.allgather_calls++;
    g->st.allgather_floats += n;
    call_mark mk = call_start(g);
    return call_end(g, mk, dd_comm_allgather(g->comm, send, n * sizeof(float), recv));
}

static dd_status tp_reduce_scatter(void *user, const float *send, float *recv, size_t n) {
    dd_tp_group *g = user;
    g->st.reduce_scatter_calls++;
    g->st.reduce_scatter_floats += n;
    for (int r = 0; r < dd_comm_size(g->comm); r++) g->counts[r] = n;
    call_mark mk = call_start(g);
    return call_end(g, mk, dd_comm_reduce_scatter(g->comm, send, recv, g->counts, DD_F32));
}

void dd_tp_group_model_tp(dd_tp_group *g, dd_model_tp *tp) {
    memset(tp, 0, sizeof *tp);
    if (!g) return;
    tp->size = dd_comm_size(g->comm);
    tp->rank = dd_comm_rank(g->comm);
    tp->user = g;
    tp->allreduce = tp_allreduce;
    tp->allgather = tp_allgather;
    tp->reduce_scatter = tp_reduce_scatter;
}

void dd_tp_group_stats_get(const dd_tp_group *g, dd_tp_group_stats *st) {
    if (!st) return;
    if (g) *st = g->st;
    else memset(st, 0, sizeof *st);
}

void dd_tp_group_stats_reset(dd_tp_group *g) {
    if (g) memset(&g->st, 0, sizeof g->st);
}
