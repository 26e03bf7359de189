/* libFuzzer target: the training coordinator's state machine (src/parallel/ps_coord.c,
 * what the "ps" strategy's coordinator runs for every worker message: dd_pst_coord_on_msg,
 * then dd_pst_coord_expire, then its step takes the completed batches off the queue).
 * In-process, no socket: the harness plays up to four workers with a simulated clock and
 * plays the coordinator's step loop (co_step in ps_train.c: the queue of completed
 * batches, the epoch's end, the next epoch, "the end" after the last one).
 *
 * Input: 4 bytes of set-up, then messages of 3 bytes [op][arg][dt] plus what the op reads.
 * Set-up: byte 0: bits 0-1 the staleness (0, 1, 3, inf), bit 2 stale-lr, bits 3-4
 * --ps-min-workers - 1, bit 5 the servers' apply of a silent worker's update fails;
 * byte 1: batches per epoch (1..16); byte 2: frames per batch (1..8, low 3 bits) and how
 * many the last batch lacks (high bits, < frames per batch); byte 3: epochs (1..3).
 * A message: worker arg % 4, then the time advances dt * lease_ms / 64 ms; op % 12:
 * 0 hello, 1 lease, 2 commit of the worker's last granted batch, 3 commit of (epoch, batch)
 * from two more bytes, 4 done of the last granted batch (loss NaN when arg >= 128), 5 done
 * of (epoch, batch) from two more bytes, 6 bye, 7 the worker's last message again with its
 * sequence number (a resend), 8 a message with an old sequence number, 9 a raw message
 * (type and length from two more bytes, then that many bytes of payload), 10 nothing (the
 * time passes), 11 the worker restarts (a new sender id, at most 200 times per input, so
 * that the table of 256 workers never fills) and says hello.
 * After the messages: the time jumps past every lease and one honest worker (a new id,
 * more join and leave when --ps-min-workers needs them) leases, commits and reports
 * batches until it is told "the end".
 *
 * Invariants (abort = finding), after every message: a leased or committed batch belongs
 * to a live worker whose lease it is, and a worker's lease is such a batch (so no batch is
 * leased to two live workers); every frame is committed at most once per epoch and the
 * frames counted are those of the committed and done batches; the queue of completed
 * batches holds one entry per done batch; the counters add up (pushes = the workers'
 * batches, completed + lost = the silent workers' updates applied or failed, the
 * staleness histogram = the leases granted); every answer decodes (ps_msg.h) and is the
 * right one: a welcome with the worker's slot, a lease of a free batch within the
 * staleness bound and with the batch's frames, a commit granted only for the batch the
 * worker was leased, a resend answered byte for byte as the first time, an old request
 * not answered, "the end" once the last epoch is done. At the end the honest worker
 * finishes the run within (batches + 2) x epochs leases (nothing is stuck). */
#include <math.h>

#include "fuzz_util.h"
#include "parallel/ps_coord.h"

#define NW 4
#define MAX_RESTARTS 200 /* per input: the worker table (256) never fills */

static void fail(const char *what) {
    fprintf(stderr, "fuzz_ps_coord: %s\n", what);
    abort();
}

typedef struct {
    uint64_t nb, B, nframes;
    int epochs;
    int apply_fails;
    uint64_t applies_ok, applies_bad; /* this epoch */
    uint64_t granted;                 /* batch leases this epoch */
    uint64_t consumed;                /* queue entries the step took this epoch */
    uint64_t pushes_before;           /* tot_batches at the epoch's start */
} env;

static void slice(void *u, uint64_t k, uint64_t *lo, uint64_t *hi, uint64_t *global) {
    const env *e = u;
    *lo = k * e->B;
    *hi = (k + 1) * e->B < e->nframes ? (k + 1) * e->B : e->nframes;
    *global = e->B;
}

static double lr(void *u) {
    (void)u;
    return 0.01;
}

static dd_status apply(void *u, uint64_t cid, uint64_t txn) {
    env *e = u;
    (void)cid;
    (void)txn;
    if (e->apply_fails) {
        e->applies_bad++;
        return dd_error(DD_ERR_COMM, "the servers are gone (fuzz)");
    }
    e->applies_ok++;
    return DD_OK;
}

typedef struct {
    uint64_t id, seq;
    int have_grant;
    uint64_t g_epoch, g_batch;
    /* the last message answered (not refused) and its answer */
    int have_last;
    int last_type;
    uint64_t last_seq;
    uint8_t last_pl[64];
    uint32_t last_pl_n;
    int rep_type;
    uint8_t rep[64];
    uint32_t rep_n;
} player;

static int slot_of(const dd_pst_coord *c, uint64_t id) {
    for (int i = 0; i < c->nw; i++)
        if (c->w[i].id == id) return i;
    return -1;
}

static void check(const dd_pst_coord *c, const env *e) {
    if (c->nw < 0 || c->nw > DD_PST_MAX_WORKERS) fail("worker count out of range");
    uint64_t done = 0, frames = 0, batches = 0, hist = 0;
    for (uint64_t k = 0; k < c->nb; k++) {
        const uint8_t s = c->bstate[k];
        if (s > DD_PST_DONE) fail("a batch state out of range");
        if (s == DD_PST_LEASED || s == DD_PST_COMMITTED) {
            const int o = c->bowner[k];
            if (o < 0 || o >= c->nw) fail("a held batch's owner is not in the table");
            if (!c->w[o].alive) fail("a leased or committed batch belongs to a worker that left or is dead (it can never be done)");
            if (c->w[o].lease != (int64_t)k) fail("a leased or committed batch is not its owner's lease (it can never be done)");
        }
        if (s == DD_PST_DONE) done++;
        if (s >= DD_PST_COMMITTED) {
            uint64_t lo, hi, g;
            slice((void *)e, k, &lo, &hi, &g);
            frames += hi - lo;
        }
    }
    uint64_t counted = 0;
    for (uint64_t f = 0; f < c->nframes; f++) {
        if (c->fcount[f] > 1) fail("a frame was committed twice in one epoch");
        counted += c->fcount[f];
    }
    if (counted != frames) fail("the frames counted differ from the committed batches' frames");
    for (int i = 0; i < c->nw; i++) {
        const dd_pst_worker *w = &c->w[i];
        if (w->dead && w->alive) fail("a worker is dead and alive");
        if (w->lease >= 0) {
            if (!w->alive) fail("a worker that left holds a lease");
            if ((uint64_t)w->lease >= c->nb) fail("a lease outside the epoch's batches");
            const uint8_t s = c->bstate[w->lease];
            if ((s != DD_PST_LEASED && s != DD_PST_COMMITTED) || c->bowner[w->lease] != i)
                fail("a worker's lease is not a batch it holds");
        } else if (w->lease != -1) {
            fail("a negative lease other than -1");
        }
        batches += w->batches;
    }
    if (c->ftail > c->nb || c->fhead > c->ftail) fail("the queue of completed batches out of range");
    if (c->ftail != done) fail("the queue holds another number of entries than the done batches");
    if (batches != c->tot_batches) fail("pushes differ from the sum of the workers' batches");
    if (c->tot_batches - e->pushes_before + c->ep_completed + c->ep_lost != c->ftail)
        fail("done batches differ from the reported plus the silent workers' completed and lost");
    if (c->ep_completed != e->applies_ok || c->ep_lost != e->applies_bad) fail("completed / lost differ from the applies");
    for (int i = 0; i < DD_PST_HIST; i++) hist += c->hist[i];
    if (hist != e->granted) fail("the staleness histogram differs from the leases granted");
}

/* The coordinator's step loop (co_step): takes the completed batches; at the epoch's end
 * the next epoch or, after the last, the end. */
static void step(dd_pst_coord *c, env *e) {
    while (c->fhead < c->ftail) {
        c->fhead++;
        e->consumed++;
        if (e->consumed >= c->nb) {
            if (c->ep + 1 >= e->epochs) {
                c->finished = 1;
                return;
            }
            e->applies_ok = e->applies_bad = e->granted = e->consumed = 0;
            e->pushes_before = c->tot_batches;
            if (dd_pst_coord_start_epoch(c, c->ep + 1, c->nb, c->nframes, 0) != DD_OK) fail("start_epoch failed");
            return;
        }
    }
}

/* Sends one message of player p (seq: its own), checks the answer. */
static void send(dd_pst_coord *c, env *e, player *p, int type, uint64_t seq, const uint8_t *pl, uint32_t n, int64_t now) {
    const int slot = slot_of(c, p->id);
    const uint64_t cached_seq = slot >= 0 ? c->w[slot].last_seq : 0;
    const int64_t lease_before = slot >= 0 ? c->w[slot].lease : -1;
    dd_net_hdr h = {0};
    h.type = (uint8_t)type;
    h.seq = seq;
    h.sender = p->id;
    h.len = n;
    dd_pst_reply r;
    dd_pst_coord_on_msg(c, &h, pl, "fuzz-peer", now, &r);
    const int s2 = slot_of(c, p->id);
    if (type != DD_MSG_HELLO && slot >= 0 && seq == cached_seq) { /* a resend */
        if (!r.send) fail("a resend was not answered");
        if (p->have_last && p->last_seq == seq &&
            (r.type != p->rep_type || r.n != p->rep_n || (r.n && memcmp(r.p, p->rep, r.n) != 0)))
            fail("a resend was answered otherwise than the first time");
        return;
    }
    if (type != DD_MSG_HELLO && slot >= 0 && seq < cached_seq) {
        if (r.send) fail("an old request was answered");
        return;
    }
    if (!r.send) fail("a request was not answered");
    if (r.type == DD_MSG_ERR) {
        if (r.n == 0 || r.n >= sizeof r.err) fail("an empty or unterminated refusal");
        if (type == DD_MSG_HELLO || slot >= 0) {
            /* refused: malformed, a full table or not a request; nothing changed for the worker */
            if (s2 >= 0 && c->w[s2].lease != lease_before && type != DD_MSG_HELLO) fail("a refused message moved a lease");
        }
        return;
    }
    if (s2 < 0) fail("an answer to a worker not in the table");
    const dd_pst_worker *w = &c->w[s2];
    if (!w->alive && type != DD_MSG_BYE) fail("a worker answered (not bye) is not alive");
    dd_status st = DD_OK;
    switch (type) {
    case DD_MSG_HELLO: {
        if (r.type != DD_MSG_WELCOME) fail("hello not answered with welcome");
        dd_pst_welcome wm;
        if ((st = dd_pst_dec_welcome(r.p, r.n, &wm)) != DD_OK) fail("a welcome that does not decode");
        if ((int)wm.index != s2 || strcmp(wm.cfg_json, c->cfg_json) != 0 || wm.lease_ms != (uint32_t)c->lease_ms)
            fail("a welcome with another slot, configuration or lease");
        dd_pst_welcome_free(&wm);
        break;
    }
    case DD_MSG_LEASE: {
        if (r.type != DD_MSG_LEASE_REP) fail("lease not answered with lease-reply");
        dd_pst_lease lm;
        if ((st = dd_pst_dec_lease(r.p, r.n, &lm)) != DD_OK) fail("a lease-reply that does not decode");
        if (c->finished && lm.kind != DD_PST_LEASE_END) fail("a lease after the end");
        if (!c->finished && lm.kind == DD_PST_LEASE_END) fail("the end before the last epoch is done");
        if (lm.kind == DD_PST_LEASE_BATCH) {
            uint64_t lo, hi, g;
            e->granted++;
            if ((int64_t)lm.epoch != c->ep || lm.batch >= c->nb) fail("a lease of another epoch or past the batches");
            slice(e, lm.batch, &lo, &hi, &g);
            if (lm.lo != lo || lm.hi != hi || lm.global != g || lm.lr != 0.01) fail("a lease with other frames or rate");
            if (c->bstate[lm.batch] != DD_PST_LEASED || c->bowner[lm.batch] != s2 || w->lease != (int64_t)lm.batch)
                fail("a lease not recorded as the worker's");
            if (c->staleness >= 0 && lm.staleness > (uint64_t)c->staleness) fail("a lease beyond the staleness bound");
            if (c->nw < c->min_workers) fail("a lease before --ps-min-workers joined");
            p->have_grant = 1;
            p->g_epoch = lm.epoch;
            p->g_batch = lm.batch;
        } else {
            p->have_grant = 0;
        }
        break;
    }
    case DD_MSG_COMMIT: {
        if (r.type != DD_MSG_COMMIT_REP) fail("commit not answered with commit-reply");
        int ok = 0;
        if ((st = dd_pst_dec_commit_rep(r.p, r.n, &ok)) != DD_OK) fail("a commit-reply that does not decode");
        dd_pst_commit cm;
        if (dd_pst_dec_commit(pl, n, &cm) != DD_OK) fail("a commit accepted that does not decode");
        if (ok) {
            if (!p->have_grant || cm.epoch != p->g_epoch || cm.batch != p->g_batch || lease_before != (int64_t)cm.batch)
                fail("a commit granted for a batch the worker was not leased");
            if (c->bstate[cm.batch] != DD_PST_COMMITTED) fail("a granted commit not recorded");
        }
        break;
    }
    case DD_MSG_DONE:
    case DD_MSG_BYE:
        if (r.type != DD_MSG_ACK || r.n != 0) fail("done / bye not answered with an empty ack");
        if (type == DD_MSG_BYE && (w->alive || w->lease != -1)) fail("a worker that said bye is alive or holds a lease");
        break;
    default:
        fail("a message of another type was answered without a refusal");
    }
    p->have_last = 1;
    p->last_type = type;
    p->last_seq = seq;
    p->last_pl_n = n <= sizeof p->last_pl ? n : 0;
    if (n && n <= sizeof p->last_pl) memcpy(p->last_pl, pl, n);
    p->rep_type = r.type;
    p->rep_n = r.n <= sizeof p->rep ? r.n : 0;
    if (r.n <= sizeof p->rep && r.n) memcpy(p->rep, r.p, r.n);
    if (r.n > sizeof p->rep) p->have_last = 0;
}

static void enc_commit(dd_nbuf *b, uint64_t ep, uint64_t k, uint64_t id) {
    const dd_pst_commit cm = {ep, k, id, id * 7 + k};
    dd_pst_enc_commit(b, &cm);
}

static void enc_done(dd_nbuf *b, uint64_t ep, uint64_t k, double loss) {
    const dd_pst_done dm = {ep, k, loss, 1, 0, 0.5, 1.0};
    dd_pst_enc_done(b, &dm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    if (size < 4) return 0;
    static char cfg[] = "{\"fuzz\": 1}";
    env e = {0};
    dd_pst_coord *c = calloc(1, sizeof *c);
    if (!c) abort();
    const int stal[4] = {0, 1, 3, -1};
    c->staleness = stal[data[0] & 3];
    c->stale_lr = (data[0] >> 2) & 1;
    c->min_workers = 1 + ((data[0] >> 3) & 3);
    e.apply_fails = (data[0] >> 5) & 1;
    c->lease_ms = 1000;
    c->cfg_json = cfg;
    c->u = &e;
    c->slice = slice;
    c->lr = lr;
    c->apply = apply;
    c->ep = -1;
    e.nb = 1 + data[1] % 16;
    e.B = 1 + (data[2] & 7);
    e.nframes = e.nb * e.B - (uint64_t)((data[2] >> 3) % e.B);
    e.epochs = 1 + data[3] % 3;
    if (dd_pst_coord_start_epoch(c, 0, e.nb, e.nframes, 0) != DD_OK) fail("start_epoch failed");
    player pl[NW];
    memset(pl, 0, sizeof pl);
    for (int i = 0; i < NW; i++) pl[i].id = 100 + (uint64_t)i;
    uint64_t next_id = 1000;
    int64_t now = 1000000;
    dd_nbuf b = {0};
    size_t i = 4;
    while (i + 3 <= size) {
        const uint8_t op = data[i] % 12, arg = data[i + 1], dt = data[i + 2];
        i += 3;
        player *p = &pl[arg % NW];
        now += (int64_t)dt * c->lease_ms / 64;
        b.n = 0;
        switch (op) {
        case 0:
        case 11: {
            if (op == 11) {
                if (next_id >= 1000 + MAX_RESTARTS) break;
                memset(p, 0, sizeof *p);
                p->id = next_id++;
            }
            char name[16];
            snprintf(name, sizeof name, "w%d", arg % NW);
            dd_pst_enc_hello(&b, name);
            send(c, &e, p, DD_MSG_HELLO, ++p->seq, b.p, (uint32_t)b.n, now);
            break;
        }
        case 1:
            send(c, &e, p, DD_MSG_LEASE, ++p->seq, NULL, 0, now);
            break;
        case 2:
        case 3:
        case 5: {
            uint64_t ep = p->g_epoch, k = p->g_batch;
            if (op != 2) {
                if (i + 2 > size) break;
                ep = data[i] % 4;
                k = data[i + 1] % 20;
                i += 2;
            }
            if (op == 5) enc_done(&b, ep, k, 0.25);
            else enc_commit(&b, ep, k, p->id);
            send(c, &e, p, op == 5 ? DD_MSG_DONE : DD_MSG_COMMIT, ++p->seq, b.p, (uint32_t)b.n, now);
            break;
        }
        case 4:
            enc_done(&b, p->g_epoch, p->g_batch, arg >= 128 ? NAN : 0.5);
            send(c, &e, p, DD_MSG_DONE, ++p->seq, b.p, (uint32_t)b.n, now);
            break;
        case 6:
            send(c, &e, p, DD_MSG_BYE, ++p->seq, NULL, 0, now);
            break;
        case 7:
            if (p->have_last) send(c, &e, p, p->last_type, p->last_seq, p->last_pl, p->last_pl_n, now);
            break;
        case 8:
            if (p->seq > 1) send(c, &e, p, DD_MSG_LEASE, p->seq - 1 - arg % p->seq, NULL, 0, now);
            break;
        case 9: {
            if (i + 2 > size) break;
            const int type = data[i];
            size_t n = data[i + 1];
            i += 2;
            if (n > size - i) n = size - i;
            send(c, &e, p, type, ++p->seq, data + i, (uint32_t)n, now);
            i += n;
            break;
        }
        default:
            break;
        }
        dd_pst_coord_expire(c, now);
        step(c, &e);
        check(c, &e);
        dd_error_clear();
    }
    /* every lease runs out; an honest worker finishes the run */
    now += 3 * (int64_t)c->lease_ms + 1;
    dd_pst_coord_expire(c, now);
    step(c, &e);
    check(c, &e);
    player h = {.id = next_id++};
    dd_pst_enc_hello(&b, "honest");
    send(c, &e, &h, DD_MSG_HELLO, ++h.seq, b.p, (uint32_t)b.n, now);
    while (c->nw < c->min_workers) { /* --ps-min-workers: more join, and leave */
        player x = {.id = next_id++};
        dd_pst_enc_hello(&b, "extra");
        send(c, &e, &x, DD_MSG_HELLO, ++x.seq, b.p, (uint32_t)b.n, now);
        send(c, &e, &x, DD_MSG_BYE, ++x.seq, NULL, 0, now);
    }
    int ended = 0;
    for (uint64_t it = 0; it < (e.nb + 2) * (uint64_t)e.epochs && !ended; it++) {
        send(c, &e, &h, DD_MSG_LEASE, ++h.seq, NULL, 0, now);
        dd_pst_lease lm;
        if (dd_pst_dec_lease(h.rep, h.rep_n, &lm) != DD_OK) fail("the honest worker's lease-reply does not decode");
        if (lm.kind == DD_PST_LEASE_END) {
            ended = 1;
            break;
        }
        if (lm.kind == DD_PST_LEASE_WAIT) fail("the honest worker, alone, was told to wait (a batch is stuck)");
        enc_commit(&b, lm.epoch, lm.batch, h.id);
        send(c, &e, &h, DD_MSG_COMMIT, ++h.seq, b.p, (uint32_t)b.n, now);
        int ok = 0;
        if (dd_pst_dec_commit_rep(h.rep, h.rep_n, &ok) != DD_OK || !ok) fail("the honest worker's commit was refused");
        enc_done(&b, lm.epoch, lm.batch, 0.5);
        send(c, &e, &h, DD_MSG_DONE, ++h.seq, b.p, (uint32_t)b.n, now);
        step(c, &e);
        check(c, &e);
        dd_error_clear();
    }
    if (!ended) fail("the honest worker did not reach the end of the run");
    dd_nbuf_free(&b);
    dd_pst_coord_free(c);
    free(c);
    dd_error_clear();
    return 0;
}
