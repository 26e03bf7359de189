/* Communication layer, handles and plain collectives: MPI initialisation when launched
 * by an MPI launcher, communicator duplicates with MPI_ERRORS_RETURN, the single-process
 * communicator, split / node split, barrier, broadcast, allgather(v), point-to-point
 * send/recv, counters and MPI error mapping. The allreduce algorithms are in
 * allreduce.c (executor) and ar_*.c (one file each, listed by ar_registry.c). */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

static int g_we_initialised; /* dd_comm_init called MPI_Init_thread */

/* ---- errors ---------------------------------------------------------------------- */

dd_status dd_comm_mpi_error(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return DD_OK;
    char text[MPI_MAX_ERROR_STRING + 1];
    char cls_text[MPI_MAX_ERROR_STRING + 1];
    int len = 0, cls = 0, clen = 0;
    text[0] = cls_text[0] = '\0';
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len > 0 ? len : 0] = '\0';
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
    if (MPI_Error_string(cls, cls_text, &clen) != MPI_SUCCESS) clen = 0;
    cls_text[clen > 0 ? clen : 0] = '\0';
    if (strcmp(text, cls_text) == 0 || clen == 0)
        return dd_error(DD_ERR_COMM, "%s: MPI error %d: %s", what, rc, len ? text : "(no text)");
    return dd_error(DD_ERR_COMM, "%s: MPI error %d (%s): %s", what, rc, cls_text,
                    len ? text : "(no text)");
}

#define MPI_TRY(call, what)                                   \
    do {                                                      \
        int mpi_rc_ = (call);                                 \
        if (mpi_rc_ != MPI_SUCCESS) return dd_comm_mpi_error(mpi_rc_, (what)); \
    } while (0)

double dd_comm_timeout(void) {
    static double t = -1.0;
    if (t < 0) {
        const char *e = getenv("DISTDPD_COMM_TIMEOUT");
        char *end = NULL;
        double v = e && *e ? strtod(e, &end) : 1800.0;
        if (e && *e && (!end || *end || !(v >= 0) || v > 1e9)) {
            dd_log(DD_LOG_WARN, "DISTDPD_COMM_TIMEOUT: expected seconds >= 0, got '%s': using 1800", e);
            v = 1800.0;
        }
        t = v;
    }
    return t;
}

dd_status dd_comm_waitall(int n, MPI_Request *rq, MPI_Status *st, const char *what) {
    const double limit = dd_comm_timeout();
    double t0 = 0.0;
    MPI_Status local[8];
    if (!st && n <= 8) st = local;
    for (long k = 0;; k++) {
        int flag = 0;
        /* one request: MPI_Test reports its own error (MPI_Testall would say
         * MPI_ERR_IN_STATUS) */
        int rc = n == 1 ? MPI_Test(rq, &flag, st ? st : MPI_STATUS_IGNORE)
                        : MPI_Testall(n, rq, &flag, st ? st : MPI_STATUSES_IGNORE);
        if (rc == MPI_ERR_IN_STATUS && st)
            for (int i = 0; i < n; i++)
                if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) {
                    rc = st[i].MPI_ERROR;
                    break;
                }
        if (rc != MPI_SUCCESS) return dd_comm_mpi_error(rc, what);
        if (flag) return DD_OK;
        if ((k & 255) == 0) {
            const double t = MPI_Wtime();
            if (k == 0) t0 = t;
            else if (limit > 0 && t - t0 > limit)
                return dd_error(DD_ERR_TIMEOUT,
                                "%s: no answer for %.0f s (DISTDPD_COMM_TIMEOUT): a peer is stopped, hung or "
                                "unreachable",
                                what, t - t0);
        }
        if ((k & 63) == 63) sched_yield();
    }
}

dd_status dd_comm_sendrecv_bytes(MPI_Comm mc, const void *sbuf, size_t sby, int to, void *rbuf, size_t rby, int from,
                                 int tag, const char *what) {
    if (sby > INT_MAX || rby > INT_MAX) return dd_error(DD_ERR_ARG, "%s: more than INT_MAX bytes", what);
    MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_Irecv(rbuf, (int)rby, MPI_BYTE, from, tag, mc, &rq[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(sbuf, (int)sby, MPI_BYTE, to, tag, mc, &rq[1]);
    if (rc != MPI_SUCCESS) return dd_comm_mpi_error(rc, what);
    return dd_comm_waitall(2, rq, NULL, what);
}

/* A blocking collective as its non-blocking form and a wait with the timeout. */
#define MPI_WAIT_TRY(icall, what)                                        \
    do {                                                                 \
        MPI_Request rq_ = MPI_REQUEST_NULL;                              \
        int mpi_rc_ = (icall);                                           \
        if (mpi_rc_ != MPI_SUCCESS) return dd_comm_mpi_error(mpi_rc_, (what)); \
        DD_TRY(dd_comm_waitall(1, &rq_, NULL, (what)));                  \
    } while (0)

/* ---- process set-up -------------------------------------------------------------- */

static int launched_by_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "PMI_SIZE", "MPI_LOCALNRANKS", NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

dd_status dd_comm_init(int *argc, char ***argv) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited) return DD_OK;
    const char *mode = getenv("DD_COMM");
    int want = launched_by_mpi();
    if (mode && *mode) {
        if (strcmp(mode, "mpi") == 0)
            want = 1;
        else if (strcmp(mode, "self") == 0)
            want = 0;
        else
            return dd_error(DD_ERR_ARG, "DD_COMM='%s': expected 'mpi' or 'self'", mode);
    }
    if (!want) return DD_OK;
    if (finalized) return dd_error(DD_ERR_COMM, "dd_comm_init: MPI was already finalised");
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return dd_error(DD_ERR_COMM, "MPI_Init_thread failed (code %d)", rc);
    g_we_initialised = 1;
    MPI_TRY(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
            "MPI_Comm_set_errhandler(MPI_COMM_WORLD)");
    return DD_OK;
}

int dd_comm_mpi_active(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    return inited && !finalized;
}

dd_status dd_comm_finalize(void) {
    if (!g_we_initialised || !dd_comm_mpi_active()) return DD_OK;
    g_we_initialised = 0;
    MPI_TRY(MPI_Finalize(), "MPI_Finalize");
    return DD_OK;
}

double dd_comm_wtime(void) { return dd_comm_mpi_active() ? MPI_Wtime() : dd_now(); }

/* ---- handles --------------------------------------------------------------------- */

static dd_comm *comm_alloc(void) {
    dd_comm *c = calloc(1, sizeof *c);
    if (!c) {
        dd_error(DD_ERR_NOMEM, "dd_comm: out of memory");
        return NULL;
    }
    c->mc = MPI_COMM_NULL;
    c->node_mc = MPI_COMM_NULL;
    c->leader_mc = MPI_COMM_NULL;
    c->size = 1;
    c->user_tags = DD_COMM_USER_TAGS;
    c->tag_base = DD_COMM_USER_TAGS;
    c->tag_span = DD_COMM_USER_TAGS;
    return c;
}

/* Takes ownership of mc (a fresh communicator): sets MPI_ERRORS_RETURN, reads rank,
 * size and the tag bound. On failure mc is freed. */
static dd_status comm_wrap(MPI_Comm mc, dd_comm **out) {
    dd_status s = DD_OK;
    dd_comm *c = NULL;
    int rc = MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        s = dd_comm_mpi_error(rc, "MPI_Comm_set_errhandler");
        goto cleanup;
    }
    c = comm_alloc();
    if (!c) {
        s = DD_ERR_NOMEM;
        goto cleanup;
    }
    c->is_mpi = 1;
    c->mc = mc;
    if ((rc = MPI_Comm_rank(mc, &c->rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(mc, &c->size)) != MPI_SUCCESS) {
        s = dd_comm_mpi_error(rc, "MPI_Comm_rank/size");
        goto cleanup;
    }
    void *attr = NULL;
    int flag = 0;
    if (MPI_Comm_get_attr(mc, MPI_TAG_UB, &attr, &flag) == MPI_SUCCESS && flag && attr) {
        int ub = *(int *)attr;
        if (ub < 2 * DD_COMM_USER_TAGS - 1) { /* small tag space (MPI guarantees 32767) */
            c->user_tags = ub / 2;
            c->tag_base = ub / 2;
            c->tag_span = ub - ub / 2 + 1;
        }
    }
    *out = c;
    return DD_OK;
cleanup:
    if (c) c->mc = MPI_COMM_NULL;
    free(c);
    MPI_Comm_free(&mc);
    return s;
}

dd_status dd_comm_world(dd_comm **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_comm_world: out is NULL");
    *out = NULL;
    if (!dd_comm_mpi_active()) return dd_comm_self(out);
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup(MPI_COMM_WORLD)");
    return comm_wrap(dup, out);
}

dd_status dd_comm_self(dd_comm **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_comm_self: out is NULL");
    *out = comm_alloc();
    return *out ? DD_OK : DD_ERR_NOMEM;
}

void dd_comm_free(dd_comm **cp) {
    if (!cp || !*cp) return;
    dd_comm *c = *cp;
    if (c->is_mpi && dd_comm_mpi_active()) {
        if (c->leader_mc != MPI_COMM_NULL) MPI_Comm_free(&c->leader_mc);
        if (c->node_mc != MPI_COMM_NULL) MPI_Comm_free(&c->node_mc);
        if (c->mc != MPI_COMM_NULL) MPI_Comm_free(&c->mc);
    }
    free(c->scratch);
    free(c);
    *cp = NULL;
}

int dd_comm_rank(const dd_comm *c) { return c ? c->rank : 0; }
int dd_comm_size(const dd_comm *c) { return c ? c->size : 1; }
int dd_comm_is_mpi(const dd_comm *c) { return c ? c->is_mpi : 0; }
MPI_Comm dd_comm_mpi_comm(const dd_comm *c) { return c && c->is_mpi ? c->mc : MPI_COMM_NULL; }

int dd_comm_next_tag(dd_comm *c) {
    int t = c->tag_base + (int)(c->seq % (uint64_t)c->tag_span);
    c->seq++;
    return t;
}

size_t dd_comm_dtype_size(dd_dtype dt) { return dt == DD_F64 ? sizeof(double) : sizeof(float); }
MPI_Datatype dd_comm_dtype_mpi(dd_dtype dt) { return dt == DD_F64 ? MPI_DOUBLE : MPI_FLOAT; }

void dd_comm_stats_get(const dd_comm *c, dd_comm_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (c) *out = c->stats;
}

void dd_comm_stats_reset(dd_comm *c) {
    if (c) memset(&c->stats, 0, sizeof c->stats);
}

#define CHECK_COMM(c, fn)                                                  \
    do {                                                                   \
        if (!(c)) return dd_error(DD_ERR_ARG, "%s: communicator is NULL", fn); \
    } while (0)

/* ---- split ----------------------------------------------------------------------- */

dd_status dd_comm_split(dd_comm *c, int color, int key, dd_comm **out) {
    CHECK_COMM(c, "dd_comm_split");
    if (!out) return dd_error(DD_ERR_ARG, "dd_comm_split: out is NULL");
    *out = NULL;
    c->stats.calls++;
    if (!c->is_mpi) return color < 0 ? DD_OK : dd_comm_self(out);
    MPI_Comm nc = MPI_COMM_NULL;
    double t0 = MPI_Wtime();
    MPI_TRY(MPI_Comm_split(c->mc, color < 0 ? MPI_UNDEFINED : color, key, &nc), "MPI_Comm_split");
    c->stats.seconds += MPI_Wtime() - t0;
    if (nc == MPI_COMM_NULL) return DD_OK;
    return comm_wrap(nc, out);
}

dd_status dd_comm_ranks_per_node(int *k) {
    *k = 0;
    const char *v = getenv("DD_COMM_RANKS_PER_NODE");
    if (!v || !*v) return DD_OK;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (*end != '\0' || x < 1 || x > INT_MAX)
        return dd_error(DD_ERR_ARG, "DD_COMM_RANKS_PER_NODE='%s': expected a positive integer", v);
    *k = (int)x;
    return DD_OK;
}

dd_status dd_comm_node_ids(dd_comm *c, int *ids) {
    CHECK_COMM(c, "dd_comm_node_ids");
    if (!ids) return dd_error(DD_ERR_ARG, "dd_comm_node_ids: ids is NULL");
    int k = 0;
    DD_TRY(dd_comm_ranks_per_node(&k));
    const char *map = getenv("DD_COMM_NODE_OF"); /* test-only: "n0,n1,..." a node per rank */
    if (map && *map) {
        const char *p = map;
        for (int r = 0; r < c->size; r++) {
            char *end = NULL;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v > INT_MAX || (*end != ',' && *end != '\0') || (*end == '\0' && r + 1 < c->size))
                return dd_error(DD_ERR_ARG, "DD_COMM_NODE_OF='%s': expected %d node numbers separated by commas", map,
                                c->size);
            ids[r] = (int)v;
            p = *end ? end + 1 : end;
        }
    } else if (k > 0 || !c->is_mpi) {
        for (int r = 0; r < c->size; r++) ids[r] = k > 0 ? r / k : 0;
    } else {
        /* the processor names, numbered in the order of their first rank */
        char name[MPI_MAX_PROCESSOR_NAME + 1];
        int len = 0;
        memset(name, 0, sizeof name);
        MPI_TRY(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
        char *all = calloc(c->size > 0 ? (size_t)c->size : 1, sizeof name);
        if (!all) return dd_error(DD_ERR_NOMEM, "dd_comm_node_ids: out of memory");
        int rc = MPI_Allgather(name, (int)sizeof name, MPI_CHAR, all, (int)sizeof name, MPI_CHAR, c->mc);
        if (rc != MPI_SUCCESS) {
            free(all);
            return dd_comm_mpi_error(rc, "MPI_Allgather (processor names)");
        }
        for (int r = 0; r < c->size; r++) {
            ids[r] = r;
            for (int q = 0; q < r; q++)
                if (strcmp(all + (size_t)q * sizeof name, all + (size_t)r * sizeof name) == 0) {
                    ids[r] = ids[q];
                    break;
                }
        }
        free(all);
    }
    /* renumber 0, 1, ... in the order of first appearance */
    const size_t nr = c->size > 0 ? (size_t)c->size : 1;
    int *seen = calloc(nr, sizeof *seen);
    if (!seen) return dd_error(DD_ERR_NOMEM, "dd_comm_node_ids: out of memory");
    int nn = 0;
    for (int r = 0; r < c->size; r++) {
        int j = 0;
        while (j < nn && seen[j] != ids[r]) j++;
        if (j == nn) seen[nn++] = ids[r];
        ids[r] = j;
    }
    free(seen);
    return DD_OK;
}

/* A node communicator of c's MPI communicator (not wrapped). */
static dd_status node_split_raw(dd_comm *c, MPI_Comm *out) {
    int k = 0;
    DD_TRY(dd_comm_ranks_per_node(&k));
    if (k > 0) {
        MPI_TRY(MPI_Comm_split(c->mc, c->rank / k, c->rank, out), "MPI_Comm_split (nodes)");
    } else {
        MPI_TRY(MPI_Comm_split_type(c->mc, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, out),
                "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    }
    int rc = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(out);
        return dd_comm_mpi_error(rc, "MPI_Comm_set_errhandler");
    }
    return DD_OK;
}

dd_status dd_comm_split_node(dd_comm *c, dd_comm **out) {
    CHECK_COMM(c, "dd_comm_split_node");
    if (!out) return dd_error(DD_ERR_ARG, "dd_comm_split_node: out is NULL");
    *out = NULL;
    c->stats.calls++;
    if (!c->is_mpi) {
        int k = 0;
        DD_TRY(dd_comm_ranks_per_node(&k));
        return dd_comm_self(out);
    }
    MPI_Comm nc = MPI_COMM_NULL;
    DD_TRY(node_split_raw(c, &nc));
    return comm_wrap(nc, out);
}

dd_status dd_comm_hier_setup(dd_comm *c) {
    if (c->hier_ready || !c->is_mpi) return DD_OK;
    MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    DD_TRY(node_split_raw(c, &node));
    int lr = 0, rc = MPI_Comm_rank(node, &lr);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_split(c->mc, lr == 0 ? 0 : MPI_UNDEFINED, c->rank, &leaders);
    if (rc == MPI_SUCCESS && leaders != MPI_COMM_NULL)
        rc = MPI_Comm_set_errhandler(leaders, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&node);
        if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
        return dd_comm_mpi_error(rc, "hier: MPI_Comm_split (leaders)");
    }
    c->node_mc = node;
    c->leader_mc = leaders;
    c->hier_ready = 1;
    return DD_OK;
}

/* ---- plain collectives ----------------------------------------------------------- */

dd_status dd_comm_barrier(dd_comm *c) {
    CHECK_COMM(c, "dd_comm_barrier");
    c->stats.calls++;
    if (!c->is_mpi) return DD_OK;
    double t0 = MPI_Wtime();
    MPI_WAIT_TRY(MPI_Ibarrier(c->mc, &rq_), "MPI_Ibarrier");
    c->stats.seconds += MPI_Wtime() - t0;
    return DD_OK;
}

dd_status dd_comm_bcast(dd_comm *c, void *buf, size_t bytes, int root) {
    CHECK_COMM(c, "dd_comm_bcast");
    if (root < 0 || root >= c->size)
        return dd_error(DD_ERR_ARG, "dd_comm_bcast: root %d out of range [0, %d)", root, c->size);
    if (!buf && bytes) return dd_error(DD_ERR_ARG, "dd_comm_bcast: buf is NULL");
    if (bytes > INT_MAX)
        return dd_error(DD_ERR_ARG, "dd_comm_bcast: %zu bytes > INT_MAX", bytes);
    c->stats.calls++;
    if (!c->is_mpi || bytes == 0) return DD_OK;
    double t0 = MPI_Wtime();
    MPI_WAIT_TRY(MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, c->mc, &rq_), "MPI_Ibcast");
    c->stats.seconds += MPI_Wtime() - t0;
    if (c->rank == root) c->stats.bytes_sent += bytes;
    return DD_OK;
}

dd_status dd_comm_allgather(dd_comm *c, const void *send, size_t bytes, void *recv) {
    CHECK_COMM(c, "dd_comm_allgather");
    if (bytes && (!send || !recv))
        return dd_error(DD_ERR_ARG, "dd_comm_allgather: send or recv is NULL");
    if (bytes > INT_MAX)
        return dd_error(DD_ERR_ARG, "dd_comm_allgather: %zu bytes > INT_MAX", bytes);
    c->stats.calls++;
    if (bytes == 0) return DD_OK;
    if (!c->is_mpi) {
        memmove(recv, send, bytes);
        return DD_OK;
    }
    double t0 = MPI_Wtime();
    MPI_WAIT_TRY(MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, c->mc, &rq_),
                 "MPI_Iallgather");
    c->stats.seconds += MPI_Wtime() - t0;
    c->stats.bytes_sent += bytes;
    return DD_OK;
}

/* The checks of a variable-size gather (recv needed on every rank, or on root only when
 * root >= 0) and, for MPI, the counts and displacements as ints (*ic: size counts then
 * size displacements; caller frees). */
static dd_status v_args(dd_comm *c, const void *send, const void *recv, const size_t *counts, const size_t *displs,
                        int root, const char *fn, int **ic) {
    *ic = NULL;
    if (!counts || !displs) return dd_error(DD_ERR_ARG, "%s: counts or displs is NULL", fn);
    for (int r = 0; r < c->size; r++) {
        if (counts[r] > INT_MAX || displs[r] > INT_MAX)
            return dd_error(DD_ERR_ARG, "%s: counts[%d] = %zu or displs[%d] = %zu > INT_MAX", fn, r, counts[r], r,
                            displs[r]);
        if (counts[r] && !recv && (root < 0 || c->rank == root)) return dd_error(DD_ERR_ARG, "%s: recv is NULL", fn);
    }
    if (counts[c->rank] && !send) return dd_error(DD_ERR_ARG, "%s: send is NULL", fn);
    if (!c->is_mpi) return DD_OK;
    *ic = malloc(2 * (size_t)c->size * sizeof(int));
    if (!*ic) return dd_error(DD_ERR_NOMEM, "%s: out of memory", fn);
    for (int r = 0; r < c->size; r++) {
        (*ic)[r] = (int)counts[r];
        (*ic)[c->size + r] = (int)displs[r];
    }
    return DD_OK;
}

dd_status dd_comm_allgatherv(dd_comm *c, const void *send, void *recv, const size_t *counts,
                             const size_t *displs) {
    CHECK_COMM(c, "dd_comm_allgatherv");
    int *ic = NULL;
    DD_TRY(v_args(c, send, recv, counts, displs, -1, "dd_comm_allgatherv", &ic));
    size_t mine = counts[c->rank];
    c->stats.calls++;
    if (!c->is_mpi) {
        if (mine) memmove((char *)recv + displs[0], send, mine);
        return DD_OK;
    }
    dd_status s = DD_OK;
    double t0 = MPI_Wtime();
    MPI_Request rq = MPI_REQUEST_NULL;
    /* this rank's block already in place: MPI_IN_PLACE (aliased send and receive buffers
     * are erroneous MPI; MPICH refuses them, "Buffers must not be aliased") */
    const void *sb = (const char *)recv + displs[c->rank] == (const char *)send ? MPI_IN_PLACE : send;
    int rc = MPI_Iallgatherv(sb, (int)mine, MPI_BYTE, recv, ic, ic + c->size, MPI_BYTE, c->mc, &rq);
    if (rc != MPI_SUCCESS) s = dd_comm_mpi_error(rc, "MPI_Iallgatherv");
    else s = dd_comm_waitall(1, &rq, NULL, "MPI_Iallgatherv");
    c->stats.seconds += MPI_Wtime() - t0;
    c->stats.bytes_sent += mine;
    free(ic);
    return s;
}

dd_status dd_comm_gatherv(dd_comm *c, const void *send, void *recv, const size_t *counts, const size_t *displs,
                          int root) {
    CHECK_COMM(c, "dd_comm_gatherv");
    if (root < 0 || root >= c->size) return dd_error(DD_ERR_ARG, "dd_comm_gatherv: root %d of %d ranks", root, c->size);
    int *ic = NULL;
    DD_TRY(v_args(c, send, recv, counts, displs, root, "dd_comm_gatherv", &ic));
    size_t mine = counts[c->rank];
    c->stats.calls++;
    if (!c->is_mpi) {
        if (mine) memmove((char *)recv + displs[0], send, mine);
        return DD_OK;
    }
    dd_status s = DD_OK;
    double t0 = MPI_Wtime();
    MPI_Request rq = MPI_REQUEST_NULL;
    int rc = MPI_Igatherv(send, (int)mine, MPI_BYTE, recv, ic, ic + c->size, MPI_BYTE, root, c->mc, &rq);
    if (rc != MPI_SUCCESS) s = dd_comm_mpi_error(rc, "MPI_Igatherv");
    else s = dd_comm_waitall(1, &rq, NULL, "MPI_Igatherv");
    c->stats.seconds += MPI_Wtime() - t0;
    if (c->rank != root) c->stats.bytes_sent += mine;
    free(ic);
    return s;
}

/* ---- point-to-point -------------------------------------------------------------- */

dd_status dd_comm_p2p_check(dd_comm *c, const void *buf, size_t bytes, int peer, int tag, const char *fn) {
    CHECK_COMM(c, fn);
    if (!buf && bytes) return dd_error(DD_ERR_ARG, "%s: buf is NULL", fn);
    if (bytes > INT_MAX) return dd_error(DD_ERR_ARG, "%s: %zu bytes > INT_MAX", fn, bytes);
    if (peer < 0 || peer >= c->size || peer == c->rank)
        return dd_error(DD_ERR_ARG, "%s: peer %d must be in [0, %d) and not this rank (%d)", fn,
                        peer, c->size, c->rank);
    if (tag < 0 || tag >= c->user_tags)
        return dd_error(DD_ERR_ARG, "%s: tag %d out of range [0, %d)", fn, tag, c->user_tags);
    return DD_OK;
}

dd_status dd_comm_send(dd_comm *c, const void *buf, size_t bytes, int peer, int tag) {
    DD_TRY(dd_comm_p2p_check(c, buf, bytes, peer, tag, "dd_comm_send"));
    c->stats.calls++;
    double t0 = MPI_Wtime();
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_TRY(MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->mc, &rq), "MPI_Isend");
    dd_status ws = dd_comm_waitall(1, &rq, NULL, "MPI_Send");
    if (ws == DD_ERR_TIMEOUT) return dd_error_prefix(ws, "send to rank %d: ", peer);
    DD_TRY(ws);
    c->stats.seconds += MPI_Wtime() - t0;
    c->stats.bytes_sent += bytes;
    return DD_OK;
}

dd_status dd_comm_recv(dd_comm *c, void *buf, size_t bytes, int peer, int tag) {
    DD_TRY(dd_comm_p2p_check(c, buf, bytes, peer, tag, "dd_comm_recv"));
    c->stats.calls++;
    MPI_Status st;
    double t0 = MPI_Wtime();
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_TRY(MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->mc, &rq), "MPI_Irecv");
    dd_status ws = dd_comm_waitall(1, &rq, &st, "MPI_Recv");
    if (ws == DD_ERR_TIMEOUT) return dd_error_prefix(ws, "receive from rank %d: ", peer);
    DD_TRY(ws);
    c->stats.seconds += MPI_Wtime() - t0;
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if ((size_t)got != bytes)
        return dd_error(DD_ERR_COMM, "dd_comm_recv: expected %zu bytes from rank %d, got %d", bytes,
                        peer, got);
    return DD_OK;
}
