/* The training coordinator's book-keeping (docs/ps.md, "Training"): the worker table, the
 * batches of the epoch being served (free, leased, committed, done), the queue of
 * completed batches' losses, and the per-epoch counters; and the state machine that
 * answers one worker's message (HELLO, LEASE, COMMIT, DONE, BYE) at a given time and
 * expires leases. No socket, no clock, no trainer: the caller (the "ps" strategy in
 * ps_train.c) passes the message, the time and the peer's name, sends the reply this
 * returns, and supplies the batches' frame ranges, the learning rate and the
 * completion of a silent worker's staged update through callbacks. The libFuzzer target
 * tests/fuzz/fuzz_ps_coord.c drives it with sequences of messages of several workers. */
#ifndef DD_PS_COORD_H
#define DD_PS_COORD_H

#include <stdint.h>

#include "parallel/ps_msg.h"

#define DD_PST_HIST 64 /* histogram buckets; the last counts everything >= 63 */

enum { DD_PST_FREE = 0, DD_PST_LEASED = 1, DD_PST_COMMITTED = 2, DD_PST_DONE = 3 }; /* a batch's state */

typedef struct {
    uint64_t id; /* the header's sender */
    char name[64];
    int alive;     /* 0: left (bye) or dead */
    int dead;      /* declared dead (lease expired or silent) */
    int64_t heard; /* ms of the last message */
    int64_t clock; /* batches completed in this epoch */
    int64_t lease; /* batch held, -1 none */
    int64_t deadline;
    uint64_t last_seq;
    int last_type;
    dd_nbuf last_reply;
    uint64_t batches, refused, resends, expired;
    double compute_s;
    uint64_t cid, txn; /* the committed batch's staged update: its owner (the worker's client id) and transaction */
} dd_pst_worker;

typedef struct {
    /* configuration (set by the caller before the first message) */
    int64_t staleness; /* -1: inf */
    int stale_lr;
    int lease_ms;
    int min_workers;
    char *cfg_json; /* WELCOME's configuration (borrowed) */
    void *u;              /* the callbacks' argument */
    /* frames [lo, hi) of batch k of the epoch being served and the batch size */
    void (*slice)(void *u, uint64_t k, uint64_t *lo, uint64_t *hi, uint64_t *global);
    double (*lr)(void *u); /* the learning rate of the next lease */
    /* applies a silent worker's staged update (client id cid, transaction txn); NULL or
     * an error: the update is lost */
    dd_status (*apply)(void *u, uint64_t cid, uint64_t txn);
    /* state */
    dd_pst_worker w[DD_PST_MAX_WORKERS];
    int nw;
    int ep; /* epoch being served (0-based), -1 none */
    uint64_t nb, nframes;
    uint8_t *bstate; /* DD_PST_FREE ... DD_PST_DONE */
    int *bowner;
    uint8_t *fcount; /* commits per frame (saturating at 255) */
    double *fifo;    /* completed batches' losses, in order (NAN: lost with its worker) */
    double *gfifo;   /* their gradient norms (before clipping), NAN: not known */
    size_t fhead, ftail;
    uint64_t hist[DD_PST_HIST], lag[DD_PST_HIST];
    uint64_t ep_expired, ep_refused, ep_lost, ep_redone, ep_completed;
    uint8_t *bwas; /* batch was leased before (redone) */
    int finished;  /* every lease request is answered "the end" */
    uint64_t tot_batches;
} dd_pst_coord;

/* What to send back to the message's peer (its routing id), with the request's seq. */
typedef struct {
    int send; /* 0: nothing (an old request) */
    int type;
    const uint8_t *p; /* the payload: the worker's cached reply, or err */
    uint32_t n;
    char err[512];
} dd_pst_reply;

/* A new epoch: nb batches over nframes frames; batches [0, done) were stepped already (a
 * resumed cursor) and count as done. Every worker's clock and lease are reset. */
dd_status dd_pst_coord_start_epoch(dd_pst_coord *c, int ep, uint64_t nb, uint64_t nframes, uint64_t done);
/* One message of the peer named `peer` (for the log and the refusals) at time now_ms. */
void dd_pst_coord_on_msg(dd_pst_coord *c, const dd_net_hdr *h, const uint8_t *pl, const char *peer, int64_t now_ms,
                         dd_pst_reply *r);
/* Expired leases go back to the queue (a committed one is completed with c->apply);
 * silent workers leave the membership. */
void dd_pst_coord_expire(dd_pst_coord *c, int64_t now_ms);
/* An error reply to peer (logged as a warning naming it). */
void dd_pst_coord_refuse(dd_pst_reply *r, const char *peer, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The minimum clock of the live workers (0 with none). */
int64_t dd_pst_coord_min_clock(const dd_pst_coord *c);
void dd_pst_coord_free(dd_pst_coord *c);

#endif
