/* The allreduce executor and the step-schedule API (allreduce_impl.h). Every algorithm of
 * the registry (ar_registry.c; one file each: ar_ring.c, ar_tree.c, ar_rhd.c, ar_hier.c,
 * ar_mpi.c) either compiles into a schedule, a list of steps (at most one send and one
 * receive each, then an optional local reduction), or calls the MPI library (native).
 * One executor runs a schedule either to completion (blocking) or as far as it can
 * without blocking (dd_comm_test). Blocking and non-blocking calls therefore perform the
 * same additions in the same order: bit-identical results.
 *
 * Summation order (float32 for DD_F32, like NCCL; double for DD_F64) and why every rank
 * ends with the same bits: each element's final sum is computed on exactly one rank and
 * then copied to the others (ring: the allgather phase; tree and hier: the broadcast;
 * rhd: the recursive-doubling phase), and IEEE addition is commutative, so the
 * orientation of an exchange does not matter. See docs/comm.md for the orders.
 * Also: dd_comm_reduce_scatter (ring reduce-scatter phase only), the non-blocking
 * MPI_Iallgatherv / MPI_Ireduce_scatter requests. */
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce_impl.h"

struct dd_comm_req {
    dd_comm *c;        /* the communicator (not owned) */
    MPI_Comm mc[DD_AR_NCOMM]; /* DD_AR_MAIN, DD_AR_NODE, DD_AR_LEADER communicators */
    char *buf;         /* the user's buffer (not owned) */
    char *sbuf;        /* the work buffer the steps address (buf, or reduce-scatter's copy) */
    dd_dtype dt;       /* element type */
    size_t esz;        /* element size in bytes */
    dd_ar_sched s;     /* the schedule (owned) */
    size_t cur;        /* next step to run */
    int posted;        /* step cur's send/receive are posted */
    MPI_Request rq[2]; /* [0] receive, [1] send */
    void *scratch;     /* receive buffer for reduce steps */
    int scratch_owned; /* 1: allocated for this request; 0: borrowed from c */
    int tag;           /* this call's tag */
    int coll;          /* 1: an MPI non-blocking collective (or point-to-point) in rq[0] */
    int p2p;           /* a point-to-point request (dd_comm_isend / dd_comm_irecv) */
    int p2p_recv;      /* a point-to-point receive: its size is checked on completion */
    int peer;          /* point-to-point: the peer rank */
    size_t bytes;      /* point-to-point: the message size */
    int *iarr;         /* count/displacement arrays of that collective (owned; MPI reads
                          them until it completes) */
    int done;          /* result is in buf */
    int failed;        /* an error happened: the request is dead */
};

/* ---- schedule building (allreduce_impl.h) --------------------------------------- */

static dd_ar_step *sched_add(dd_ar_sched *s, int comm) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        dd_ar_step *v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            dd_error(DD_ERR_NOMEM, "allreduce schedule: out of memory");
            return NULL;
        }
        s->v = v;
        s->cap = cap;
    }
    dd_ar_step *st = &s->v[s->n++];
    memset(st, 0, sizeof *st);
    st->comm = (unsigned char)comm;
    st->send_peer = st->recv_peer = -1;
    return st;
}

dd_status dd_ar_add_send(dd_ar_sched *s, int comm, int peer, size_t off, size_t len) {
    dd_ar_step *st = sched_add(s, comm);
    if (!st) return DD_ERR_NOMEM;
    st->send_peer = peer;
    st->send_off = off;
    st->send_len = len;
    return DD_OK;
}

dd_status dd_ar_add_recv(dd_ar_sched *s, int comm, int peer, size_t off, size_t len, int reduce) {
    dd_ar_step *st = sched_add(s, comm);
    if (!st) return DD_ERR_NOMEM;
    st->recv_peer = peer;
    st->recv_off = off;
    st->recv_len = len;
    st->reduce = (unsigned char)reduce;
    if (reduce && len > s->scratch) s->scratch = len;
    return DD_OK;
}

dd_status dd_ar_add_xchg(dd_ar_sched *s, int comm, int speer, size_t soff, size_t slen, int rpeer, size_t roff,
                         size_t rlen, int reduce) {
    dd_ar_step *st = sched_add(s, comm);
    if (!st) return DD_ERR_NOMEM;
    st->send_peer = speer;
    st->send_off = soff;
    st->send_len = slen;
    st->recv_peer = rpeer;
    st->recv_off = roff;
    st->recv_len = rlen;
    st->reduce = (unsigned char)reduce;
    if (reduce && rlen > s->scratch) s->scratch = rlen;
    return DD_OK;
}

size_t *dd_ar_even_blocks(size_t n, int p) {
    size_t *off = malloc(((size_t)p + 1) * sizeof *off);
    if (!off) {
        dd_error(DD_ERR_NOMEM, "allreduce: out of memory");
        return NULL;
    }
    size_t q = n / (size_t)p, rem = n % (size_t)p;
    off[0] = 0;
    for (int i = 0; i < p; i++) off[i + 1] = off[i] + q + ((size_t)i < rem ? 1 : 0);
    return off;
}

/* The schedule of algorithm algo for this rank (an MPI communicator, size >= 2, n >= 1). */
static dd_status build_allreduce(dd_comm *c, dd_allreduce_algo algo, size_t n, dd_ar_sched *s) {
    const dd_allreduce_def *d = dd_allreduce_def_of(algo);
    if (!d || !d->build) return dd_error(DD_ERR_INTERNAL, "allreduce: no schedule for algorithm %d", (int)algo);
    return d->build(c, n, s);
}

/* ---- executor -------------------------------------------------------------------- */

static void add_f32(float *restrict a, const float *restrict b, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] += b[i];
}
static void add_f64(double *restrict a, const double *restrict b, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] += b[i];
}

void dd_comm_sum(void *dst, const void *src, size_t n, dd_dtype dt) {
    if (dt == DD_F32)
        add_f32((float *)dst, (const float *)src, n);
    else
        add_f64((double *)dst, (const double *)src, n);
}

static dd_status req_fail(dd_comm_req *q, int rc, const char *what) {
    q->failed = 1;
    return dd_comm_mpi_error(rc, what);
}

/* Posts step q->cur. */
static dd_status step_post(dd_comm_req *q) {
    const dd_ar_step *st = &q->s.v[q->cur];
    MPI_Comm mc = q->mc[st->comm];
    MPI_Datatype ty = dd_comm_dtype_mpi(q->dt);
    q->rq[0] = q->rq[1] = MPI_REQUEST_NULL;
    int rc;
    if (st->recv_peer >= 0) {
        void *dst = st->reduce ? q->scratch : q->sbuf + st->recv_off * q->esz;
        rc = MPI_Irecv(dst, (int)st->recv_len, ty, st->recv_peer, q->tag, mc, &q->rq[0]);
        if (rc != MPI_SUCCESS) return req_fail(q, rc, "allreduce: MPI_Irecv");
    }
    if (st->send_peer >= 0) {
        rc = MPI_Isend(q->sbuf + st->send_off * q->esz, (int)st->send_len, ty, st->send_peer,
                       q->tag, mc, &q->rq[1]);
        if (rc != MPI_SUCCESS) return req_fail(q, rc, "allreduce: MPI_Isend");
        q->c->stats.bytes_sent += st->send_len * q->esz;
    }
    q->posted = 1;
    return DD_OK;
}

/* Runs steps until done or (blocking == 0) a step is not complete yet. */
static dd_status req_progress(dd_comm_req *q, int blocking) {
    if (q->failed) return dd_error(DD_ERR_COMM, "allreduce: request failed earlier");
    if (q->done) return DD_OK;
    if (q->coll) {
        int flag = 0, rc;
        MPI_Status ms;
        if (blocking) {
            dd_status ws = dd_comm_waitall(1, &q->rq[0], &ms, q->p2p ? "point-to-point message" : "non-blocking collective");
            if (ws != DD_OK) {
                q->failed = 1;
                return ws;
            }
            rc = MPI_SUCCESS;
            flag = 1;
        } else {
            rc = MPI_Test(&q->rq[0], &flag, &ms);
        }
        if (rc != MPI_SUCCESS) return req_fail(q, rc, blocking ? "MPI_Wait (non-blocking collective)" : "MPI_Test (non-blocking collective)");
        if (flag && q->p2p_recv) {
            int got = 0;
            MPI_Get_count(&ms, MPI_BYTE, &got);
            if ((size_t)got != q->bytes) {
                q->failed = 1;
                return dd_error(DD_ERR_COMM, "receive from rank %d: expected %zu bytes, got %d", q->peer, q->bytes, got);
            }
        }
        if (flag) q->done = 1;
        return DD_OK;
    }
    while (q->cur < q->s.n) {
        if (!q->posted) DD_TRY(step_post(q));
        int flag = 0, rc;
        if (blocking) {
            char what[96];
            const dd_ar_step *sp = &q->s.v[q->cur];
            snprintf(what, sizeof what, "allreduce step %zu of %zu (send to rank %d, receive from rank %d)", q->cur + 1,
                     q->s.n, sp->send_peer, sp->recv_peer);
            dd_status ws = dd_comm_waitall(2, q->rq, NULL, what);
            if (ws != DD_OK) {
                q->failed = 1;
                return ws;
            }
            rc = MPI_SUCCESS;
            flag = 1;
        } else {
            /* statuses into an array: MPICH's MPI_STATUSES_IGNORE ((MPI_Status *)1) passed
             * for an array parameter trips gcc 12's -Wstringop-overflow */
            MPI_Status st2[2];
            rc = MPI_Testall(2, q->rq, &flag, st2);
        }
        if (rc != MPI_SUCCESS) return req_fail(q, rc, blocking ? "allreduce: MPI_Waitall" : "allreduce: MPI_Testall");
        if (!flag) return DD_OK;
        const dd_ar_step *st = &q->s.v[q->cur];
        if (st->reduce && st->recv_len)
            dd_comm_sum(q->sbuf + st->recv_off * q->esz, q->scratch, st->recv_len, q->dt);
        q->posted = 0;
        q->cur++;
    }
    q->done = 1;
    return DD_OK;
}

static void req_release(dd_comm_req *q) {
    if (!q) return;
    if (q->scratch_owned)
        free(q->scratch);
    else if (q->scratch && q->c)
        q->c->scratch_busy = 0;
    if (q->sbuf != q->buf) free(q->sbuf);
    free(q->s.v);
    free(q->iarr);
    free(q);
}

/* Allocates a request with its schedule built and scratch attached. */
static dd_status req_create(dd_comm *c, dd_allreduce_algo algo, void *buf, size_t n,
                            dd_dtype dt, dd_comm_req **out) {
    dd_status s = DD_OK;
    dd_comm_req *q = calloc(1, sizeof *q);
    if (!q) return dd_error(DD_ERR_NOMEM, "allreduce: out of memory");
    q->c = c;
    q->buf = q->sbuf = buf;
    q->dt = dt;
    q->esz = dd_comm_dtype_size(dt);
    q->rq[0] = q->rq[1] = MPI_REQUEST_NULL;
    q->mc[DD_AR_MAIN] = c->mc;
    q->mc[DD_AR_NODE] = c->node_mc;
    q->mc[DD_AR_LEADER] = c->leader_mc;
    if (!c->is_mpi || n == 0 || c->size == 1) {
        q->done = 1; /* nothing to exchange; consume no tag on the self comm */
        if (c->is_mpi) q->tag = dd_comm_next_tag(c);
        *out = q;
        return DD_OK;
    }
    q->tag = dd_comm_next_tag(c);
    const dd_allreduce_def *d = dd_allreduce_def_of(algo);
    if (d && d->native) {
        q->coll = 1;
        if ((s = d->native(c, buf, n, dt, &q->rq[0])) != DD_OK) goto cleanup;
        c->stats.bytes_sent += n * q->esz;
        *out = q;
        return DD_OK;
    }
    if ((s = build_allreduce(c, algo, n, &q->s)) != DD_OK) goto cleanup;
    size_t need = q->s.scratch * q->esz;
    if (need) {
        if (!c->scratch_busy && c->scratch_cap >= need) {
            q->scratch = c->scratch;
            c->scratch_busy = 1;
        } else if (!c->scratch_busy) {
            void *p = realloc(c->scratch, need);
            if (!p) {
                s = dd_error(DD_ERR_NOMEM, "allreduce: out of memory (%zu bytes scratch)", need);
                goto cleanup;
            }
            c->scratch = q->scratch = p;
            c->scratch_cap = need;
            c->scratch_busy = 1;
        } else {
            q->scratch = malloc(need);
            if (!q->scratch) {
                s = dd_error(DD_ERR_NOMEM, "allreduce: out of memory (%zu bytes scratch)", need);
                goto cleanup;
            }
            q->scratch_owned = 1;
        }
    }
    *out = q;
    return DD_OK;
cleanup:
    req_release(q);
    return s;
}

static dd_status check_args(dd_comm *c, dd_allreduce_algo algo, const void *buf, size_t n,
                            dd_dtype dt, const char *fn) {
    if (!c) return dd_error(DD_ERR_ARG, "%s: communicator is NULL", fn);
    const dd_allreduce_def *d = dd_allreduce_def_of(algo);
    if (!d) return dd_error(DD_ERR_ARG, "%s: unknown algorithm %d", fn, (int)algo);
    if (dt != DD_F32 && dt != DD_F64)
        return dd_error(DD_ERR_ARG, "%s: unknown datatype %d", fn, (int)dt);
    if (n > INT_MAX) return dd_error(DD_ERR_ARG, "%s: n = %zu > INT_MAX", fn, n);
    if (n && !buf) return dd_error(DD_ERR_ARG, "%s: buf is NULL with n = %zu", fn, n);
    if (d->setup && c->is_mpi && c->size > 1 && n > 0) DD_TRY(d->setup(c));
    return DD_OK;
}

dd_status dd_comm_iallreduce(dd_comm *c, dd_allreduce_algo algo, void *buf, size_t n,
                             dd_dtype dt, dd_comm_req **req) {
    if (!req) return dd_error(DD_ERR_ARG, "dd_comm_iallreduce: req is NULL");
    *req = NULL;
    double t0 = dd_comm_wtime();
    DD_TRY(check_args(c, algo, buf, n, dt, "dd_comm_iallreduce"));
    c->stats.calls++;
    dd_status s = req_create(c, algo, buf, n, dt, req);
    if (s == DD_OK && !(*req)->done && !(*req)->coll) s = req_progress(*req, 0);
    c->stats.seconds += dd_comm_wtime() - t0;
    if (s != DD_OK) dd_comm_req_free(req);
    return s;
}

/* A request for an MPI non-blocking collective started by `start` (NULL when the
 * communicator is not MPI or has one rank: done at once). */
static dd_status coll_req(dd_comm *c, dd_comm_req **out) {
    dd_comm_req *q = calloc(1, sizeof *q);
    if (!q) return dd_error(DD_ERR_NOMEM, "out of memory for a collective request");
    q->c = c;
    q->rq[0] = q->rq[1] = MPI_REQUEST_NULL;
    q->coll = 1;
    q->iarr = malloc(2 * (size_t)(c->size > 0 ? c->size : 1) * sizeof(int));
    if (!q->iarr) {
        free(q);
        return dd_error(DD_ERR_NOMEM, "out of memory for a collective request");
    }
    *out = q;
    return DD_OK;
}

dd_status dd_comm_iallgatherv(dd_comm *c, const void *send, void *recv, const size_t *counts, const size_t *displs,
                              dd_comm_req **req) {
    if (!req) return dd_error(DD_ERR_ARG, "dd_comm_iallgatherv: req is NULL");
    *req = NULL;
    if (!c) return dd_error(DD_ERR_ARG, "dd_comm_iallgatherv: communicator is NULL");
    if (!counts || !displs) return dd_error(DD_ERR_ARG, "dd_comm_iallgatherv: counts or displs is NULL");
    for (int r = 0; r < c->size; r++) {
        if (counts[r] > INT_MAX || displs[r] > INT_MAX)
            return dd_error(DD_ERR_ARG, "dd_comm_iallgatherv: counts[%d] = %zu or displs[%d] = %zu > INT_MAX", r,
                            counts[r], r, displs[r]);
        if (counts[r] && !recv) return dd_error(DD_ERR_ARG, "dd_comm_iallgatherv: recv is NULL");
    }
    const size_t mine = counts[c->rank];
    if (mine && !send) return dd_error(DD_ERR_ARG, "dd_comm_iallgatherv: send is NULL");
    double t0 = dd_comm_wtime();
    DD_TRY(coll_req(c, req));
    dd_comm_req *q = *req;
    c->stats.calls++;
    if (!c->is_mpi || c->size == 1) {
        if (mine && (const char *)recv + displs[c->rank] != (const char *)send)
            memmove((char *)recv + displs[c->rank], send, mine);
        q->done = 1;
        return DD_OK;
    }
    for (int r = 0; r < c->size; r++) {
        q->iarr[r] = (int)counts[r];
        q->iarr[c->size + r] = (int)displs[r];
    }
    const void *sb = (const char *)recv + displs[c->rank] == (const char *)send ? MPI_IN_PLACE : send;
    int rc = MPI_Iallgatherv(sb, (int)mine, MPI_BYTE, recv, q->iarr, q->iarr + c->size, MPI_BYTE, c->mc, &q->rq[0]);
    c->stats.seconds += dd_comm_wtime() - t0;
    if (rc != MPI_SUCCESS) {
        dd_comm_req_free(req);
        return dd_comm_mpi_error(rc, "MPI_Iallgatherv");
    }
    c->stats.bytes_sent += mine;
    return DD_OK;
}

dd_status dd_comm_ireduce_scatter(dd_comm *c, const float *send, float *recv, const size_t *counts,
                                  dd_comm_req **req) {
    if (!req) return dd_error(DD_ERR_ARG, "dd_comm_ireduce_scatter: req is NULL");
    *req = NULL;
    if (!c) return dd_error(DD_ERR_ARG, "dd_comm_ireduce_scatter: communicator is NULL");
    if (!counts) return dd_error(DD_ERR_ARG, "dd_comm_ireduce_scatter: counts is NULL");
    size_t total = 0;
    for (int r = 0; r < c->size; r++) {
        if (counts[r] > INT_MAX)
            return dd_error(DD_ERR_ARG, "dd_comm_ireduce_scatter: counts[%d] = %zu > INT_MAX", r, counts[r]);
        total += counts[r];
    }
    if (total && !send) return dd_error(DD_ERR_ARG, "dd_comm_ireduce_scatter: send is NULL");
    if (counts[c->rank] && !recv) return dd_error(DD_ERR_ARG, "dd_comm_ireduce_scatter: recv is NULL");
    double t0 = dd_comm_wtime();
    DD_TRY(coll_req(c, req));
    dd_comm_req *q = *req;
    c->stats.calls++;
    if (!c->is_mpi || c->size == 1) {
        if (counts[c->rank] && recv != send) memmove(recv, send, counts[c->rank] * sizeof(float));
        q->done = 1;
        return DD_OK;
    }
    for (int r = 0; r < c->size; r++) q->iarr[r] = (int)counts[r];
    int rc = MPI_Ireduce_scatter(send, recv, q->iarr, MPI_FLOAT, MPI_SUM, c->mc, &q->rq[0]);
    c->stats.seconds += dd_comm_wtime() - t0;
    if (rc != MPI_SUCCESS) {
        dd_comm_req_free(req);
        return dd_comm_mpi_error(rc, "MPI_Ireduce_scatter");
    }
    c->stats.bytes_sent += (total - counts[c->rank]) * sizeof(float);
    return DD_OK;
}

dd_status dd_comm_test(dd_comm_req *req, int *done) {
    if (done) *done = 0;
    if (!req || !done) return dd_error(DD_ERR_ARG, "dd_comm_test: req or done is NULL");
    if (req->done) {
        *done = 1;
        return DD_OK;
    }
    double t0 = dd_comm_wtime();
    dd_status s = req_progress(req, 0);
    req->c->stats.seconds += dd_comm_wtime() - t0;
    *done = req->done;
    return s;
}

dd_status dd_comm_wait(dd_comm_req **req) {
    if (!req) return dd_error(DD_ERR_ARG, "dd_comm_wait: req is NULL");
    if (!*req) return DD_OK;
    dd_comm_req *q = *req;
    dd_status s = DD_OK;
    if (!q->done) {
        double t0 = dd_comm_wtime();
        s = req_progress(q, 1);
        q->c->stats.seconds += dd_comm_wtime() - t0;
    }
    req_release(q);
    *req = NULL;
    return s;
}

/* A point-to-point request (MPI_Isend / MPI_Irecv in rq[0]). */
static dd_status p2p_req(dd_comm *c, void *buf, size_t bytes, int peer, int tag, int recv, dd_comm_req **req) {
    const char *fn = recv ? "dd_comm_irecv" : "dd_comm_isend";
    if (!req) return dd_error(DD_ERR_ARG, "%s: req is NULL", fn);
    *req = NULL;
    DD_TRY(dd_comm_p2p_check(c, buf, bytes, peer, tag, fn));
    double t0 = dd_comm_wtime();
    DD_TRY(coll_req(c, req));
    dd_comm_req *q = *req;
    q->p2p = 1;
    q->p2p_recv = recv;
    q->peer = peer;
    q->bytes = bytes;
    c->stats.calls++;
    int rc = recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->mc, &q->rq[0])
                  : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->mc, &q->rq[0]);
    c->stats.seconds += dd_comm_wtime() - t0;
    if (rc != MPI_SUCCESS) {
        dd_comm_req_free(req);
        return dd_comm_mpi_error(rc, recv ? "MPI_Irecv" : "MPI_Isend");
    }
    if (!recv) c->stats.bytes_sent += bytes;
    return DD_OK;
}

dd_status dd_comm_isend(dd_comm *c, const void *buf, size_t bytes, int peer, int tag, dd_comm_req **req) {
    return p2p_req(c, (void *)buf, bytes, peer, tag, 0, req);
}

dd_status dd_comm_irecv(dd_comm *c, void *buf, size_t bytes, int peer, int tag, dd_comm_req **req) {
    return p2p_req(c, buf, bytes, peer, tag, 1, req);
}

dd_status dd_comm_wait_timeout(dd_comm_req **req, double timeout_s, const char *what) {
    if (!req) return dd_error(DD_ERR_ARG, "dd_comm_wait_timeout: req is NULL");
    if (!*req) return DD_OK;
    const double t0 = dd_comm_wtime();
    int done = 0;
    for (long spins = 0;; spins++) {
        dd_status s = dd_comm_test(*req, &done);
        if (s != DD_OK || done) {
            dd_comm_req_free(req);
            return s;
        }
        const double waited = dd_comm_wtime() - t0;
        if (timeout_s > 0 && waited > timeout_s)
            return dd_error(DD_ERR_TIMEOUT, "waited %.1f s for %s: no answer", waited, what ? what : "a message");
        if (spins > 0) sched_yield(); /* give the core to a rank still computing */
    }
}

void dd_comm_req_cancel(dd_comm_req **req) {
    if (!req || !*req) return;
    dd_comm_req *q = *req;
    if (q->p2p && !q->done && q->rq[0] != MPI_REQUEST_NULL && dd_comm_mpi_active()) {
        if (q->p2p_recv) { /* a receive cancels at once (or completes) */
            MPI_Cancel(&q->rq[0]);
            MPI_Wait(&q->rq[0], MPI_STATUS_IGNORE);
        } else { /* a send to a peer that never receives: let MPI finish or drop it */
            MPI_Request_free(&q->rq[0]);
        }
        q->done = 1;
    }
    dd_comm_req_free(req);
}

void dd_comm_req_free(dd_comm_req **req) {
    if (!req || !*req) return;
    dd_comm_req *q = *req;
    if (!q->done && !q->failed && dd_comm_mpi_active()) {
        (void)req_progress(q, 1);
    } else if (q->failed && dd_comm_mpi_active()) {
        /* outstanding requests after an error: cancel what can be cancelled */
        for (int i = 0; i < 2; i++)
            if (q->rq[i] != MPI_REQUEST_NULL && !q->coll) {
                MPI_Cancel(&q->rq[i]);
                MPI_Request_free(&q->rq[i]);
            }
    }
    req_release(q);
    *req = NULL;
}

dd_status dd_comm_allreduce(dd_comm *c, dd_allreduce_algo algo, void *buf, size_t n,
                            dd_dtype dt) {
    double t0 = dd_comm_wtime();
    DD_TRY(check_args(c, algo, buf, n, dt, "dd_comm_allreduce"));
    c->stats.calls++;
    if (!c->is_mpi || n == 0 || c->size == 1) {
        if (c->is_mpi) (void)dd_comm_next_tag(c);
        return DD_OK;
    }
    const dd_allreduce_def *d = dd_allreduce_def_of(algo);
    if (d->native) {
        (void)dd_comm_next_tag(c);
        dd_status s = d->native(c, buf, n, dt, NULL);
        c->stats.seconds += dd_comm_wtime() - t0;
        c->stats.bytes_sent += n * dd_comm_dtype_size(dt);
        return s;
    }
    dd_comm_req *q = NULL;
    dd_status s = req_create(c, algo, buf, n, dt, &q);
    if (s == DD_OK) s = req_progress(q, 1);
    if (s == DD_OK) {
        req_release(q);
    } else {
        dd_comm_req_free(&q);
    }
    c->stats.seconds += dd_comm_wtime() - t0;
    return s;
}

dd_status dd_comm_reduce_scatter(dd_comm *c, const void *send, void *recv,
                                 const size_t *counts, dd_dtype dt) {
    if (!c) return dd_error(DD_ERR_ARG, "dd_comm_reduce_scatter: communicator is NULL");
    if (!counts) return dd_error(DD_ERR_ARG, "dd_comm_reduce_scatter: counts is NULL");
    if (dt != DD_F32 && dt != DD_F64)
        return dd_error(DD_ERR_ARG, "dd_comm_reduce_scatter: unknown datatype %d", (int)dt);
    int p = c->size, r = c->rank;
    size_t total = 0;
    for (int i = 0; i < p; i++) {
        if (counts[i] > INT_MAX)
            return dd_error(DD_ERR_ARG, "dd_comm_reduce_scatter: counts[%d] = %zu > INT_MAX", i,
                            counts[i]);
        total += counts[i];
    }
    size_t esz = dd_comm_dtype_size(dt);
    if (total && !send) return dd_error(DD_ERR_ARG, "dd_comm_reduce_scatter: send is NULL");
    if (counts[r] && !recv) return dd_error(DD_ERR_ARG, "dd_comm_reduce_scatter: recv is NULL");
    double t0 = dd_comm_wtime();
    c->stats.calls++;
    size_t mine_off = 0;
    for (int i = 0; i < r; i++) mine_off += counts[i];
    if (!c->is_mpi || p == 1 || total == 0) {
        if (c->is_mpi) (void)dd_comm_next_tag(c);
        if (counts[r]) memmove(recv, (const char *)send + mine_off * esz, counts[r] * esz);
        return DD_OK;
    }
    dd_status s = DD_OK;
    dd_comm_req *q = NULL;
    size_t *off = malloc(((size_t)p + 1) * sizeof *off);
    char *work = malloc(total * esz);
    if (!off || !work) {
        s = dd_error(DD_ERR_NOMEM, "dd_comm_reduce_scatter: out of memory (%zu bytes)", total * esz);
        goto cleanup;
    }
    memcpy(work, send, total * esz);
    off[0] = 0;
    for (int i = 0; i < p; i++) off[i + 1] = off[i] + counts[i];
    q = calloc(1, sizeof *q);
    if (!q) {
        s = dd_error(DD_ERR_NOMEM, "dd_comm_reduce_scatter: out of memory");
        goto cleanup;
    }
    q->c = c;
    q->buf = NULL;
    q->sbuf = work;
    work = NULL; /* owned by q now (sbuf != buf) */
    q->dt = dt;
    q->esz = esz;
    q->rq[0] = q->rq[1] = MPI_REQUEST_NULL;
    q->mc[DD_AR_MAIN] = c->mc;
    q->mc[DD_AR_NODE] = q->mc[DD_AR_LEADER] = MPI_COMM_NULL;
    q->tag = dd_comm_next_tag(c);
    if ((s = dd_ar_ring_steps(&q->s, DD_AR_MAIN, r, p, off, 0)) != DD_OK) goto cleanup;
    if (q->s.scratch) {
        q->scratch = malloc(q->s.scratch * esz);
        q->scratch_owned = 1;
        if (!q->scratch) {
            s = dd_error(DD_ERR_NOMEM, "dd_comm_reduce_scatter: out of memory");
            goto cleanup;
        }
    }
    if ((s = req_progress(q, 1)) != DD_OK) goto cleanup;
    if (counts[r]) memcpy(recv, q->sbuf + mine_off * esz, counts[r] * esz);
cleanup:
    if (q) {
        if (s != DD_OK && !q->done) q->failed = 1;
        req_release(q);
    }
    free(work);
    free(off);
    c->stats.seconds += dd_comm_wtime() - t0;
    return s;
}
