/* Allreduce (sum) algorithms written on MPI point-to-point, as schedules: each algorithm
 * compiles into a list of steps (at most one send and one receive each, then an optional
 * local reduction), and one executor runs a schedule either to completion (blocking) or
 * as far as it can without blocking (dd_comm_test). Blocking and non-blocking calls
 * therefore perform the same additions in the same order: bit-identical results.
 *
 * Summation order (float32 for DD_F32, like NCCL; double for DD_F64) and why every rank
 * ends with the same bits: each element's final sum is computed on exactly one rank and
 * then copied to the others (ring: the allgather phase; tree and hier: the broadcast;
 * rhd: the recursive-doubling phase), and IEEE addition is commutative, so the
 * orientation of an exchange does not matter. See docs/comm.md for the orders.
 * Also: dd_comm_reduce_scatter (ring reduce-scatter phase only). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

enum { SC_MAIN = 0, SC_NODE = 1, SC_LEADER = 2 };

/* One step: post a receive and a send, wait for both, then reduce (optional). */
typedef struct {
    unsigned char comm;   /* SC_MAIN, SC_NODE or SC_LEADER */
    unsigned char reduce; /* 1: receive into scratch, then buf[recv_off..] += scratch */
    int send_peer;        /* rank in that communicator; -1: no send */
    int recv_peer;        /* -1: no receive */
    size_t send_off, send_len; /* elements of buf */
    size_t recv_off, recv_len; /* elements of buf (reduce: received into scratch) */
} ar_step;

typedef struct {
    ar_step *v;   /* steps, n of them, cap allocated */
    size_t n, cap;
    size_t scratch; /* largest reduce receive, elements */
} ar_sched;

struct dd_comm_req {
    dd_comm *c;        /* the communicator (not owned) */
    MPI_Comm mc[3];    /* SC_MAIN, SC_NODE, SC_LEADER communicators */
    char *buf;         /* the user's buffer (not owned) */
    char *sbuf;        /* the work buffer the steps address (buf, or reduce-scatter's copy) */
    dd_dtype dt;       /* element type */
    size_t esz;        /* element size in bytes */
    ar_sched s;        /* the schedule (owned) */
    size_t cur;        /* next step to run */
    int posted;        /* step cur's send/receive are posted */
    MPI_Request rq[2]; /* [0] receive, [1] send */
    void *scratch;     /* receive buffer for reduce steps */
    int scratch_owned; /* 1: allocated for this request; 0: borrowed from c */
    int tag;           /* this call's tag */
    int coll;          /* 1: an MPI non-blocking collective in rq[0] */
    int *iarr;         /* count/displacement arrays of that collective (owned; MPI reads
                          them until it completes) */
    int done;          /* result is in buf */
    int failed;        /* an error happened: the request is dead */
};

/* ---- names ----------------------------------------------------------------------- */

static const char *const k_names[DD_ALLREDUCE_COUNT] = {"ring", "tree", "rhd", "hier", "mpi"};

const char *dd_allreduce_name(dd_allreduce_algo a) {
    return (int)a >= 0 && (int)a < DD_ALLREDUCE_COUNT ? k_names[a] : "?";
}

dd_status dd_allreduce_parse(const char *name, dd_allreduce_algo *out) {
    for (int i = 0; name && i < DD_ALLREDUCE_COUNT; i++)
        if (strcmp(name, k_names[i]) == 0) {
            *out = (dd_allreduce_algo)i;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG, "allreduce algorithm '%s': expected ring, tree, rhd, hier or mpi",
                    name ? name : "(null)");
}

/* ---- schedule building ----------------------------------------------------------- */

static ar_step *sched_add(ar_sched *s, int comm) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        ar_step *v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            dd_error(DD_ERR_NOMEM, "allreduce schedule: out of memory");
            return NULL;
        }
        s->v = v;
        s->cap = cap;
    }
    ar_step *st = &s->v[s->n++];
    memset(st, 0, sizeof *st);
    st->comm = (unsigned char)comm;
    st->send_peer = st->recv_peer = -1;
    return st;
}

static dd_status add_send(ar_sched *s, int comm, int peer, size_t off, size_t len) {
    ar_step *st = sched_add(s, comm);
    if (!st) return DD_ERR_NOMEM;
    st->send_peer = peer;
    st->send_off = off;
    st->send_len = len;
    return DD_OK;
}

static dd_status add_recv(ar_sched *s, int comm, int peer, size_t off, size_t len, int reduce) {
    ar_step *st = sched_add(s, comm);
    if (!st) return DD_ERR_NOMEM;
    st->recv_peer = peer;
    st->recv_off = off;
    st->recv_len = len;
    st->reduce = (unsigned char)reduce;
    if (reduce && len > s->scratch) s->scratch = len;
    return DD_OK;
}

static dd_status add_xchg(ar_sched *s, int comm, int speer, size_t soff, size_t slen, int rpeer,
                          size_t roff, size_t rlen, int reduce) {
    ar_step *st = sched_add(s, comm);
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

/* Ring over p ranks with block boundaries off[0..p] (off[p] = total). Reduce-scatter:
 * at step k (0..p-2) rank r sends block (r-k-1) mod p to r+1 and receives block
 * (r-k-2) mod p from r-1, adding it to its own; afterwards rank r holds the full sum of
 * block r, accumulated around the ring starting at rank r+1:
 * ((x[r+1] + x[r+2]) + ...) + x[r]. Allgather (if with_ag): at step k rank r sends block
 * (r-k) mod p and receives block (r-k-1) mod p, overwriting. */
static dd_status build_ring(ar_sched *s, int comm, int r, int p, const size_t *off, int with_ag) {
    if (p < 2) return DD_OK;
    int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int k = 0; k < p - 1; k++) {
        int sb = ((r - k - 1) % p + 2 * p) % p, rb = ((r - k - 2) % p + 2 * p) % p;
        DD_TRY(add_xchg(s, comm, right, off[sb], off[sb + 1] - off[sb], left, off[rb],
                        off[rb + 1] - off[rb], 1));
    }
    if (!with_ag) return DD_OK;
    for (int k = 0; k < p - 1; k++) {
        int sb = ((r - k) % p + p) % p, rb = ((r - k - 1) % p + 2 * p) % p;
        DD_TRY(add_xchg(s, comm, right, off[sb], off[sb + 1] - off[sb], left, off[rb],
                        off[rb + 1] - off[rb], 0));
    }
    return DD_OK;
}

/* Even block boundaries: block i has n/p elements, the first n%p blocks one more. */
static size_t *even_blocks(size_t n, int p) {
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

/* Binomial reduce of n elements to rank 0: at distance 1, 2, 4, ... a rank whose bit is
 * set sends its partial sum to rank - distance and stops; the others add the partial sum
 * of rank + distance (if it exists). Rank 0 ends with (x0 + x1) + (x2 + x3) + ... */
static dd_status build_tree_reduce(ar_sched *s, int comm, int r, int p, size_t n) {
    for (int mask = 1; mask < p; mask <<= 1) {
        if (r & mask) return add_send(s, comm, r - mask, 0, n);
        if (r + mask < p) DD_TRY(add_recv(s, comm, r + mask, 0, n, 1));
    }
    return DD_OK;
}

/* Binomial broadcast of n elements from rank 0: a rank receives from rank - lowbit(rank),
 * then sends to rank + m for the smaller powers of two m (largest first). */
static dd_status build_tree_bcast(ar_sched *s, int comm, int r, int p, size_t n) {
    if (p < 2) return DD_OK;
    int top = 1;
    while (top < p) top <<= 1;
    int low = top;
    if (r != 0) {
        low = r & -r;
        DD_TRY(add_recv(s, comm, r - low, 0, n, 0));
    }
    for (int m = low >> 1; m >= 1; m >>= 1)
        if (r + m < p) DD_TRY(add_send(s, comm, r + m, 0, n));
    return DD_OK;
}

/* Recursive halving / doubling (Rabenseifner) for any p. With q the largest power of two
 * <= p and e = p - q: ranks 0..2e-1 first pair up (even sends everything to odd, odd adds:
 * x[2i] + x[2i+1]); even ones then wait. The q remaining ranks (new rank v) halve: at
 * distance 1, 2, ..., q/2 partners v and v^d split their common range [lo, hi) at
 * mid = lo + (hi-lo)/2, the lower rank keeps [lo, mid), sends the other half and adds the
 * partner's half of its own. Then doubling in reverse gathers the ranges back, and the
 * odd ranks of the first step send the result to their even partner. */
static int rhd_real(int v, int e) { return v < e ? 2 * v + 1 : v + e; }

static dd_status build_rhd(ar_sched *s, int comm, int r, int p, size_t n) {
    if (p < 2) return DD_OK;
    int q = 1;
    while (q * 2 <= p) q *= 2;
    int e = p - q, v;
    if (r < 2 * e) {
        if (r % 2 == 0) {
            DD_TRY(add_send(s, comm, r + 1, 0, n));
            return add_recv(s, comm, r + 1, 0, n, 0);
        }
        DD_TRY(add_recv(s, comm, r - 1, 0, n, 1));
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
            DD_TRY(add_xchg(s, comm, peer, mid, hi - mid, peer, lo, mid - lo, 1));
            hi = mid;
        } else {
            DD_TRY(add_xchg(s, comm, peer, lo, mid - lo, peer, mid, hi - mid, 1));
            lo = mid;
        }
    }
    for (int l = levels - 1; l >= 0; l--) {
        int d = 1 << l, pv = v ^ d, peer = rhd_real(pv, e);
        size_t plo = lo_stack[l], phi = hi_stack[l];
        size_t mid = plo + (phi - plo) / 2;
        /* my range is [lo, hi); the partner's is the other half of [plo, phi) */
        size_t olo = (v < pv) ? mid : plo, ohi = (v < pv) ? phi : mid;
        DD_TRY(add_xchg(s, comm, peer, lo, hi - lo, peer, olo, ohi - olo, 0));
        lo = plo;
        hi = phi;
    }
    if (r < 2 * e) DD_TRY(add_send(s, comm, r - 1, 0, n));
    return DD_OK;
}

static dd_status build_allreduce(dd_comm *c, dd_allreduce_algo algo, size_t n, ar_sched *s) {
    int r = c->rank, p = c->size;
    switch (algo) {
    case DD_ALLREDUCE_RING: {
        size_t *off = even_blocks(n, p);
        if (!off) return DD_ERR_NOMEM;
        dd_status st = build_ring(s, SC_MAIN, r, p, off, 1);
        free(off);
        return st;
    }
    case DD_ALLREDUCE_TREE:
        DD_TRY(build_tree_reduce(s, SC_MAIN, r, p, n));
        return build_tree_bcast(s, SC_MAIN, r, p, n);
    case DD_ALLREDUCE_RHD:
        return build_rhd(s, SC_MAIN, r, p, n);
    case DD_ALLREDUCE_HIER: {
        int lr = 0, lp = 1;
        MPI_Comm_rank(c->node_mc, &lr);
        MPI_Comm_size(c->node_mc, &lp);
        DD_TRY(build_tree_reduce(s, SC_NODE, lr, lp, n));
        if (c->leader_mc != MPI_COMM_NULL) {
            int gr = 0, gp = 1;
            MPI_Comm_rank(c->leader_mc, &gr);
            MPI_Comm_size(c->leader_mc, &gp);
            size_t *off = even_blocks(n, gp);
            if (!off) return DD_ERR_NOMEM;
            dd_status st = build_ring(s, SC_LEADER, gr, gp, off, 1);
            free(off);
            DD_TRY(st);
        }
        return build_tree_bcast(s, SC_NODE, lr, lp, n);
    }
    default:
        return dd_error(DD_ERR_INTERNAL, "allreduce: no schedule for algorithm %d", (int)algo);
    }
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
    const ar_step *st = &q->s.v[q->cur];
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
        if (blocking) {
            rc = MPI_Wait(&q->rq[0], MPI_STATUS_IGNORE);
            flag = 1;
        } else {
            rc = MPI_Test(&q->rq[0], &flag, MPI_STATUS_IGNORE);
        }
        if (rc != MPI_SUCCESS) return req_fail(q, rc, blocking ? "MPI_Wait (non-blocking collective)" : "MPI_Test (non-blocking collective)");
        if (flag) q->done = 1;
        return DD_OK;
    }
    while (q->cur < q->s.n) {
        if (!q->posted) DD_TRY(step_post(q));
        int flag = 0, rc;
        if (blocking) {
            rc = MPI_Waitall(2, q->rq, MPI_STATUSES_IGNORE);
            flag = 1;
        } else {
            rc = MPI_Testall(2, q->rq, &flag, MPI_STATUSES_IGNORE);
        }
        if (rc != MPI_SUCCESS) return req_fail(q, rc, blocking ? "allreduce: MPI_Waitall" : "allreduce: MPI_Testall");
        if (!flag) return DD_OK;
        const ar_step *st = &q->s.v[q->cur];
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
    q->mc[SC_MAIN] = c->mc;
    q->mc[SC_NODE] = c->node_mc;
    q->mc[SC_LEADER] = c->leader_mc;
    if (!c->is_mpi || n == 0 || c->size == 1) {
        q->done = 1; /* nothing to exchange; consume no tag on the self comm */
        if (c->is_mpi) q->tag = dd_comm_next_tag(c);
        *out = q;
        return DD_OK;
    }
    q->tag = dd_comm_next_tag(c);
    if (algo == DD_ALLREDUCE_MPI) {
        q->coll = 1;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dd_comm_dtype_mpi(dt), MPI_SUM, c->mc,
                                &q->rq[0]);
        if (rc != MPI_SUCCESS) {
            s = dd_comm_mpi_error(rc, "MPI_Iallreduce");
            goto cleanup;
        }
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
    if ((int)algo < 0 || (int)algo >= DD_ALLREDUCE_COUNT)
        return dd_error(DD_ERR_ARG, "%s: unknown algorithm %d", fn, (int)algo);
    if (dt != DD_F32 && dt != DD_F64)
        return dd_error(DD_ERR_ARG, "%s: unknown datatype %d", fn, (int)dt);
    if (n > INT_MAX) return dd_error(DD_ERR_ARG, "%s: n = %zu > INT_MAX", fn, n);
    if (n && !buf) return dd_error(DD_ERR_ARG, "%s: buf is NULL with n = %zu", fn, n);
    if (algo == DD_ALLREDUCE_HIER && c->is_mpi && c->size > 1 && n > 0)
        DD_TRY(dd_comm_hier_setup(c));
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
    if (algo == DD_ALLREDUCE_MPI) {
        (void)dd_comm_next_tag(c);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, dd_comm_dtype_mpi(dt), MPI_SUM, c->mc);
        c->stats.seconds += dd_comm_wtime() - t0;
        c->stats.bytes_sent += n * dd_comm_dtype_size(dt);
        return dd_comm_mpi_error(rc, "MPI_Allreduce");
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
    q->mc[SC_MAIN] = c->mc;
    q->mc[SC_NODE] = q->mc[SC_LEADER] = MPI_COMM_NULL;
    q->tag = dd_comm_next_tag(c);
    if ((s = build_ring(&q->s, SC_MAIN, r, p, off, 0)) != DD_OK) goto cleanup;
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
