/* Private interface of the allreduce algorithms (src/comm): the registry entry every
 * algorithm file defines (dd_allreduce_def, DD_ALLREDUCE_DEFINE), the registry
 * (ar_registry.c), the step-schedule API the executor (allreduce.c) runs, and the
 * building blocks the built-in algorithms share (ring steps, binomial tree steps and their
 * costs). Not installed.
 *
 * Adding an algorithm: one file src/comm/ar_NAME.c that ends in
 *   DD_ALLREDUCE_DEFINE(NAME, .summary = "...", .build = NAME_build, .cost = NAME_cost);
 * plus one X(NAME) line in ar_registry.c. Its index (dd_allreduce_algo) is its place in
 * the list; --allreduce NAME, dd_allreduce_parse/name, dd_dp_cfg.algo, parallel.json, the
 * planner's table (plan.c, plan_shard.c) and the tests that loop over
 * dd_allreduce_count() pick it up. docs/comm.md ("Adding an algorithm").
 *
 * How a call runs (allreduce.c): the arguments are checked; setup (if any) runs on an MPI
 * communicator of size > 1 with n > 0; then, unless the communicator is the
 * single-process one, n == 0 or size == 1 (nothing to do; one tag consumed on MPI
 * communicators), either native (the MPI library's collective) or build: the schedule,
 * which one executor runs blocking (dd_comm_allreduce) or step by step
 * (dd_comm_iallreduce + dd_comm_test), so both give the same bits. */
#ifndef DD_ALLREDUCE_IMPL_H
#define DD_ALLREDUCE_IMPL_H

#include <math.h>

#include "comm/comm_internal.h"
#include "distdpd/plan.h"

/* ---- step schedules -------------------------------------------------------------- */

/* The communicators a step can address: the call's own (DD_AR_MAIN) and the node and
 * node-leader communicators of dd_comm_hier_setup (c->node_mc, c->leader_mc). */
enum { DD_AR_MAIN = 0, DD_AR_NODE = 1, DD_AR_LEADER = 2, DD_AR_NCOMM = 3 };

/* One step: post a receive and a send, wait for both, then reduce (optional). Offsets
 * and lengths are in elements of the call's buffer. */
typedef struct {
    unsigned char comm;        /* DD_AR_MAIN, DD_AR_NODE or DD_AR_LEADER */
    unsigned char reduce;      /* 1: receive into scratch, then buf[recv_off..] += scratch */
    int send_peer;             /* rank in that communicator; -1: no send */
    int recv_peer;             /* -1: no receive */
    size_t send_off, send_len; /* elements of buf */
    size_t recv_off, recv_len; /* elements of buf (reduce: received into scratch) */
} dd_ar_step;

typedef struct {
    dd_ar_step *v;  /* steps, n of them, cap allocated */
    size_t n, cap;
    size_t scratch; /* largest reduce receive, elements */
} dd_ar_sched;

/* Append one step: a send of buf[off, off + len) to peer; a receive into buf[off, ..)
 * (reduce = 0) or added to it (reduce = 1) from peer; or both at once (an exchange).
 * DD_ERR_NOMEM (with a message) when the schedule cannot grow. */
dd_status dd_ar_add_send(dd_ar_sched *s, int comm, int peer, size_t off, size_t len);
dd_status dd_ar_add_recv(dd_ar_sched *s, int comm, int peer, size_t off, size_t len, int reduce);
dd_status dd_ar_add_xchg(dd_ar_sched *s, int comm, int speer, size_t soff, size_t slen, int rpeer, size_t roff,
                         size_t rlen, int reduce);

/* Even block boundaries off[0..p] (malloc'ed; caller frees): block i has n/p elements,
 * the first n%p blocks one more. NULL with DD_ERR_NOMEM set on failure. */
size_t *dd_ar_even_blocks(size_t n, int p);

/* ---- the registry entry of an algorithm ------------------------------------------ */

/* The planner's model of an algorithm: modelled seconds of one allreduce of `bytes` > 0
 * bytes over p >= 2 ranks, inter a valid link (plan.h dd_plan_allreduce_time: intra and
 * ranks_per_node as given there, intra may be NULL); negative for input the algorithm
 * cannot model (hier without intra). */
typedef double (*dd_ar_cost_fn)(const dd_link *inter, const dd_link *intra, int ranks_per_node, int p, double bytes);

typedef struct {
    const char *name;    /* --allreduce NAME (DD_ALLREDUCE_DEFINE sets it) */
    const char *summary; /* one line (dd_allreduce_describe) */
    /* the schedule: appends this rank's steps of an in-place sum of n >= 1 elements over c
     * (an MPI communicator of size >= 2) to s. Required unless native is set */
    dd_status (*build)(dd_comm *c, size_t n, dd_ar_sched *s);
    /* optional: collective set-up before a call that communicates (hier: the node
     * split, made once per communicator and cached in it) */
    dd_status (*setup)(dd_comm *c);
    /* optional: the MPI library's own collective instead of a schedule, in place on
     * buf[0..n): blocking when rq is NULL, else started into *rq (completed by
     * MPI_Test/MPI_Wait). The executor counts n elements as sent */
    dd_status (*native)(dd_comm *c, void *buf, size_t n, dd_dtype dt, MPI_Request *rq);
    /* the planner's cost model. Required unless model_as is set */
    dd_ar_cost_fn cost;
    /* optional: the algorithm whose model stands in for this one at these inputs (mpi:
     * the fastest of ring, tree and rhd); plan.h times it with that algorithm's cost,
     * and the planner never recommends an algorithm with model_as (it recommends
     * explicit ones) */
    dd_allreduce_algo (*model_as)(const dd_link *inter, const dd_link *intra, int ranks_per_node, int p,
                                  double bytes);
} dd_allreduce_def;

/* Defines the registry entry dd_ar_algo_<NAME> of an algorithm file (ar_registry.c lists
 * it); the arguments are designated initialisers of the other fields. */
#define DD_ALLREDUCE_DEFINE(NAME, ...) const dd_allreduce_def dd_ar_algo_##NAME = {.name = #NAME, __VA_ARGS__}

/* The entry of algorithm a (its index in the registry); NULL when a is out of range. */
const dd_allreduce_def *dd_allreduce_def_of(dd_allreduce_algo a);

/* ---- building blocks of the built-in algorithms ---------------------------------- */

/* ar_ring.c: ring over p ranks (this one r) with block boundaries off[0..p] (off[p] =
 * total): reduce-scatter, then (with_ag) allgather; see the file. */
dd_status dd_ar_ring_steps(dd_ar_sched *s, int comm, int r, int p, const size_t *off, int with_ag);
/* ar_tree.c: binomial reduce of n elements to rank 0 / broadcast from rank 0. */
dd_status dd_ar_tree_reduce_steps(dd_ar_sched *s, int comm, int r, int p, size_t n);
dd_status dd_ar_tree_bcast_steps(dd_ar_sched *s, int comm, int r, int p, size_t n);

/* Their costs (docs/comm.md "Cost model"), n in bytes: the ring allreduce (0 for p < 2),
 * and a binomial reduce (with_sum = 1) or broadcast (0) of ceil(log2 p) one-way steps. */
double dd_ar_ring_cost(const dd_link *l, int p, double n);
double dd_ar_binomial_cost(const dd_link *l, int p, double n, int with_sum);

static inline int dd_ar_ceil_log2(int p) {
    int l = 0;
    while ((1LL << l) < (long long)p) l++;
    return l;
}

/* 1 when every field of l is finite and >= 0 (and l != NULL). */
static inline int dd_ar_link_ok(const dd_link *l) {
    return l && isfinite(l->alpha) && isfinite(l->beta) && isfinite(l->gamma) && isfinite(l->alpha1) &&
           isfinite(l->beta1) && l->alpha >= 0 && l->beta >= 0 && l->gamma >= 0 && l->alpha1 >= 0 && l->beta1 >= 0;
}

#endif
