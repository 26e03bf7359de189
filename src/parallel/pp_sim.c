/* The pipeline schedule simulator and checker (pipeline.h): runs every rank's list with
 * the executor's semantics (receives and sends are posted without blocking, FWD/BWD wait
 * for their message), instantaneous messages and fixed compute costs, checks every rule
 * a list must keep, reports a deadlock with what each stuck rank waits for, and measures
 * makespan, bubble, live activations and buffers; plus the ASCII timeline. No MPI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/pipeline.h"

#define MAX_SLOTS 64 /* slots per (rank, chunk, direction) the checker can track */

/* The state of one simulation. Messages are keyed by (direction, micro, receiving
 * vstage); compute results by (micro, vstage). Times are -1 until the event happened. */
typedef struct {
    int P, M, V, VS, last;          /* VS = P*V virtual stages, last = VS - 1 */
    double cf, cb;                  /* cost of one FWD / BWD of a chunk: f/V, b/V */
    const dd_pp_instr *const *lists;
    const size_t *n;
    size_t *pc;                     /* [P] next instruction of each rank */
    double *clock;                  /* [P] each rank's time */
    double *send_t, *recv_t;        /* [2*M*VS] when the send / receive was posted */
    int *recv_slot;                 /* [2*M*VS] the slot the receive was posted with */
    double *fwd_end, *bwd_end;      /* [M*VS] when the FWD / BWD of (m, v) ended */
    unsigned long long *slots;      /* [P*V*2] slots of (rank, chunk, dir) holding receives */
    int *live;                      /* [P*V] live activations per (rank, chunk) */
    int *live_rank, *open_recv;     /* [P] live activations, receives not yet consumed */
    dd_pp_sim *rep;
} pp_sim;

/* Result of running one instruction: done, or blocked waiting for a message. Errors are
 * negative dd_status values. */
enum { RUN_BLOCKED = 0, RUN_DONE = 1 };

static size_t msg_key(const pp_sim *s, int is_grad, int m, int v) {
    return ((size_t)is_grad * (size_t)s->M + (size_t)m) * (size_t)s->VS + (size_t)v;
}
static size_t mv_key(const pp_sim *s, int m, int v) { return (size_t)m * (size_t)s->VS + (size_t)v; }

/* "FWD micro 3 chunk 1, vstage 5" */
static const char *describe(const dd_pp_instr *x, char *buf, size_t cap) {
    snprintf(buf, cap, "%s micro %d chunk %d, vstage %d", dd_pp_op_name(x->op), x->micro, x->chunk, x->vstage);
    return buf;
}

/* DD_ERR_INTERNAL "rank R instruction I (WHAT): PROBLEM". */
static dd_status bad(int r, size_t i, const dd_pp_instr *x, const char *problem) {
    char d[96];
    return dd_error(DD_ERR_INTERNAL, "pipeline schedule: rank %d instruction %zu (%s): %s", r, i, describe(x, d, sizeof d),
                    problem);
}

/* ---- well-formedness ----------------------------------------------------------------- */

/* The message an instruction sends, receives or waits for: direction and the vstage of
 * the other end, or 0 when it has none. */
static int message_of(const pp_sim *s, const dd_pp_instr *x, int *is_grad, int *other) {
    int v = x->vstage, fwd_dir = x->op <= DD_PP_SEND_ACT;
    *is_grad = !fwd_dir;
    switch (x->op) {
    case DD_PP_RECV_ACT: case DD_PP_FWD: case DD_PP_SEND_GRAD: *other = v - 1; break;
    default: *other = v + 1; break;
    }
    return s->P > 1 && *other >= 0 && *other <= s->last;
}

/* The tag of the message x is about: keyed by the receiving vstage. */
static int expected_tag(const dd_pp_instr *x, int is_grad, int other) {
    int sends = x->op == DD_PP_SEND_ACT || x->op == DD_PP_SEND_GRAD;
    return dd_pp_tag(x->micro, sends ? other : x->vstage, is_grad);
}

static dd_status check_fields(const pp_sim *s, int r, size_t i, const dd_pp_instr *x) {
    char why[160];
    if ((int)x->op < 0 || (int)x->op > DD_PP_SEND_GRAD) return bad(r, i, x, "unknown operation");
    if (x->micro < 0 || x->micro >= s->M || x->chunk < 0 || x->chunk >= s->V) {
        snprintf(why, sizeof why, "micro must be in [0, %d) and chunk in [0, %d)", s->M, s->V);
        return bad(r, i, x, why);
    }
    if (x->vstage != x->chunk * s->P + r) {
        snprintf(why, sizeof why, "vstage must be chunk * P + rank = %d", x->chunk * s->P + r);
        return bad(r, i, x, why);
    }
    int is_grad, other, has = message_of(s, x, &is_grad, &other);
    int compute = x->op == DD_PP_FWD || x->op == DD_PP_BWD;
    if (!has && !compute) return bad(r, i, x, "no such message (first or last vstage, or P = 1)");
    int peer = has ? other % s->P : -1, tag = has ? expected_tag(x, is_grad, other) : -1;
    if (x->peer != peer || x->tag != tag) {
        snprintf(why, sizeof why, "peer %d tag %d, expected peer %d (the rank of vstage %d) tag %d", x->peer, x->tag, peer,
                 other, tag);
        return bad(r, i, x, why);
    }
    int wants_slot = has && x->op != DD_PP_SEND_ACT && x->op != DD_PP_SEND_GRAD;
    if (wants_slot ? x->slot < 0 || x->slot >= MAX_SLOTS : x->slot != -1) {
        snprintf(why, sizeof why, "slot %d, expected %s", x->slot, wants_slot ? "a receive buffer in [0, 64)" : "-1");
        return bad(r, i, x, why);
    }
    return DD_OK;
}

/* ---- running one instruction --------------------------------------------------------- */

static unsigned long long *slot_set(pp_sim *s, int r, const dd_pp_instr *x, int is_grad) {
    return &s->slots[((size_t)r * (size_t)s->V + (size_t)x->chunk) * 2 + (size_t)is_grad];
}

static int run_recv(pp_sim *s, int r, size_t i, const dd_pp_instr *x) {
    int is_grad, other;
    message_of(s, x, &is_grad, &other);
    size_t k = msg_key(s, is_grad, x->micro, x->vstage);
    if (s->recv_t[k] >= 0) return bad(r, i, x, "this receive was already posted");
    unsigned long long *set = slot_set(s, r, x, is_grad), bit = 1ULL << x->slot;
    if (*set & bit) return bad(r, i, x, "its slot still holds a receive that no FWD/BWD has consumed");
    *set |= bit;
    s->recv_t[k] = s->clock[r];
    s->recv_slot[k] = x->slot;
    if (++s->open_recv[r] > s->rep->peak_recv[r]) s->rep->peak_recv[r] = s->open_recv[r];
    return RUN_DONE;
}

static int run_send(pp_sim *s, int r, size_t i, const dd_pp_instr *x) {
    int is_grad, other;
    message_of(s, x, &is_grad, &other);
    size_t mv = mv_key(s, x->micro, x->vstage), k = msg_key(s, is_grad, x->micro, other);
    if ((is_grad ? s->bwd_end[mv] : s->fwd_end[mv]) < 0)
        return bad(r, i, x, is_grad ? "sends before its BWD ran" : "sends before its FWD ran");
    if (s->send_t[k] >= 0) return bad(r, i, x, "this message was already sent");
    s->send_t[k] = s->clock[r];
    s->rep->messages[r]++;
    return RUN_DONE;
}

/* When the compute x may start (>= the rank's clock), RUN_BLOCKED while its message is
 * not sent yet, or an error. Consumes the receive (slot) once it can start. */
static int input_ready(pp_sim *s, int r, size_t i, const dd_pp_instr *x, double *ready) {
    int is_grad, other;
    *ready = s->clock[r];
    if (!message_of(s, x, &is_grad, &other)) {
        int local = s->P == 1 && other >= 0 && other <= s->last; /* the neighbour is on this rank */
        if (!local) return RUN_DONE;
        double t = (x->op == DD_PP_FWD ? s->fwd_end : s->bwd_end)[mv_key(s, x->micro, other)];
        if (t < 0)
            return bad(r, i, x, x->op == DD_PP_FWD ? "vstage - 1's FWD of this micro-batch has not run before it "
                                                     "on this rank (it would wait forever)"
                                                   : "vstage + 1's BWD of this micro-batch has not run before it "
                                                     "on this rank (it would wait forever)");
        return RUN_DONE;
    }
    size_t k = msg_key(s, is_grad, x->micro, x->vstage);
    if (s->recv_t[k] < 0 || s->recv_slot[k] != x->slot)
        return bad(r, i, x, s->recv_t[k] < 0 ? "its receive was not posted before it on this rank"
                                             : "its slot is not the one its receive was posted with");
    if (s->send_t[k] < 0) return RUN_BLOCKED;
    if (s->send_t[k] > *ready) *ready = s->send_t[k];
    *slot_set(s, r, x, is_grad) &= ~(1ULL << x->slot);
    s->open_recv[r]--;
    return RUN_DONE;
}

static void count_live(pp_sim *s, int r, int chunk, int delta) {
    int *c = &s->live[(size_t)r * (size_t)s->V + (size_t)chunk];
    *c += delta;
    s->live_rank[r] += delta;
    int *pc = &s->rep->peak_live_chunk[(size_t)r * (size_t)s->V + (size_t)chunk];
    if (*c > *pc) *pc = *c;
    if (s->live_rank[r] > s->rep->peak_live[r]) s->rep->peak_live[r] = s->live_rank[r];
}

static int run_compute(pp_sim *s, int r, size_t i, const dd_pp_instr *x, double *start) {
    int fwd = x->op == DD_PP_FWD;
    size_t mv = mv_key(s, x->micro, x->vstage);
    double *end = fwd ? &s->fwd_end[mv] : &s->bwd_end[mv];
    if (*end >= 0) return bad(r, i, x, "runs a second time");
    if (!fwd && s->fwd_end[mv] < 0) return bad(r, i, x, "its FWD has not run before it");
    double ready;
    int res = input_ready(s, r, i, x, &ready);
    if (res != RUN_DONE) return res;
    double cost = fwd ? s->cf : s->cb;
    *start = ready;
    *end = s->clock[r] = ready + cost;
    s->rep->busy[r] += cost;
    count_live(s, r, x->chunk, fwd ? 1 : -1);
    return RUN_DONE;
}

static int run_one(pp_sim *s, int r) {
    size_t i = s->pc[r];
    const dd_pp_instr *x = &s->lists[r][i];
    dd_status st = check_fields(s, r, i, x);
    if (st != DD_OK) return st;
    double start = s->clock[r];
    int res;
    if (x->op == DD_PP_RECV_ACT || x->op == DD_PP_RECV_GRAD) res = run_recv(s, r, i, x);
    else if (x->op == DD_PP_SEND_ACT || x->op == DD_PP_SEND_GRAD) res = run_send(s, r, i, x);
    else res = run_compute(s, r, i, x, &start);
    if (res == RUN_DONE) s->rep->start[r][i] = start;
    return res;
}

/* ---- deadlock and completeness ------------------------------------------------------- */

/* Appends "rank R is stuck at instruction I (...) waiting for SEND_X of micro m by rank
 * Q (vstage w)" for a stuck rank. */
static void describe_stuck(const pp_sim *s, int r, char *buf, size_t cap) {
    const dd_pp_instr *x = &s->lists[r][s->pc[r]];
    int is_grad, other;
    message_of(s, x, &is_grad, &other);
    int q = other % s->P;
    char d[96];
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%srank %d is stuck at instruction %zu (%s) waiting for %s of micro %d by rank %d "
             "(vstage %d)%s", len ? "; " : "", r, s->pc[r], describe(x, d, sizeof d),
             is_grad ? "SEND_GRAD" : "SEND_ACT", x->micro, q, other,
             s->pc[q] == s->n[q] ? ", which has finished its list without it" : "");
}

static dd_status deadlock(const pp_sim *s) {
    char msg[900] = "";
    int shown = 0, stuck = 0;
    for (int r = 0; r < s->P; r++) {
        if (s->pc[r] == s->n[r]) continue;
        if (shown < 4) {
            describe_stuck(s, r, msg, sizeof msg);
            shown++;
        }
        stuck++;
    }
    if (stuck > shown) {
        size_t len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, "; and %d more ranks", stuck - shown);
    }
    return dd_error(DD_ERR_INTERNAL, "pipeline deadlock: %s", msg);
}

/* Every (micro, vstage) computed both ways, every message both sent and received. */
static dd_status check_complete(const pp_sim *s) {
    for (int m = 0; m < s->M; m++)
        for (int v = 0; v < s->VS; v++) {
            size_t k = mv_key(s, m, v);
            if (s->fwd_end[k] < 0 || s->bwd_end[k] < 0)
                return dd_error(DD_ERR_INTERNAL, "pipeline schedule: rank %d's list has no %s of micro %d chunk %d "
                                "(vstage %d)", v % s->P, s->fwd_end[k] < 0 ? "FWD" : "BWD", m, v / s->P, v);
            for (int g = 0; g < 2; g++) {
                size_t q = msg_key(s, g, m, v);
                if ((s->send_t[q] < 0) != (s->recv_t[q] < 0))
                    return dd_error(DD_ERR_INTERNAL, "pipeline schedule: the %s of micro %d to vstage %d (rank %d) is "
                                    "%s", g ? "gradient" : "activation", m, v, v % s->P,
                                    s->send_t[q] < 0 ? "received but never sent" : "sent but never received");
            }
        }
    return DD_OK;
}

/* ---- pending sends --------------------------------------------------------------------- */

typedef struct {
    int rank;
    double t;
    int delta; /* +1 send posted, -1 delivered */
} send_event;

static int cmp_event(const void *pa, const void *pb) {
    const send_event *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return a->delta - b->delta; /* deliveries first at equal times */
}

/* peak_sends: the most sends of a rank posted before their receive, at one time. */
static dd_status count_pending_sends(const pp_sim *s) {
    size_t keys = 2 * (size_t)s->M * (size_t)s->VS, ne = 0;
    send_event *ev = malloc(2 * keys * sizeof *ev);
    if (!ev) return dd_error(DD_ERR_NOMEM, "pipeline simulation: out of memory");
    for (size_t k = 0; k < keys; k++) {
        if (s->send_t[k] < 0 || s->recv_t[k] <= s->send_t[k]) continue;
        int v = (int)(k % (size_t)s->VS), is_grad = k >= keys / 2, from = is_grad ? v + 1 : v - 1;
        ev[ne++] = (send_event){from % s->P, s->send_t[k], 1};
        ev[ne++] = (send_event){from % s->P, s->recv_t[k], -1};
    }
    qsort(ev, ne, sizeof *ev, cmp_event);
    int cur = 0;
    for (size_t e = 0; e < ne; e++) {
        if (e > 0 && ev[e].rank != ev[e - 1].rank) cur = 0;
        cur += ev[e].delta;
        if (cur > s->rep->peak_sends[ev[e].rank]) s->rep->peak_sends[ev[e].rank] = cur;
    }
    free(ev);
    return DD_OK;
}

/* ---- set-up, loop, report -------------------------------------------------------------- */

static void sim_free(pp_sim *s) {
    free(s->pc);
    free(s->clock);
    free(s->send_t);
    free(s->recv_t);
    free(s->recv_slot);
    free(s->fwd_end);
    free(s->bwd_end);
    free(s->slots);
    free(s->live);
    free(s->live_rank);
    free(s->open_recv);
}

static double *filled(size_t n, double v) {
    double *a = malloc((n ? n : 1) * sizeof *a);
    for (size_t i = 0; a && i < n; i++) a[i] = v;
    return a;
}

static dd_status sim_alloc(pp_sim *s) {
    size_t P = (size_t)s->P, keys = 2 * (size_t)s->M * (size_t)s->VS, mv = keys / 2;
    s->pc = calloc(P, sizeof *s->pc);
    s->clock = calloc(P, sizeof *s->clock);
    s->send_t = filled(keys, -1);
    s->recv_t = filled(keys, -1);
    s->recv_slot = calloc(keys, sizeof *s->recv_slot);
    s->fwd_end = filled(mv, -1);
    s->bwd_end = filled(mv, -1);
    s->slots = calloc(P * (size_t)s->V * 2, sizeof *s->slots);
    s->live = calloc(P * (size_t)s->V, sizeof *s->live);
    s->live_rank = calloc(P, sizeof *s->live_rank);
    s->open_recv = calloc(P, sizeof *s->open_recv);
    if (s->pc && s->clock && s->send_t && s->recv_t && s->recv_slot && s->fwd_end && s->bwd_end && s->slots && s->live &&
        s->live_rank && s->open_recv)
        return DD_OK;
    return dd_error(DD_ERR_NOMEM, "pipeline simulation: out of memory");
}

static dd_status report_alloc(dd_pp_sim *rep, int P, int V, const dd_pp_instr *const *lists, const size_t *n) {
    size_t p = (size_t)P;
    rep->busy = calloc(p, sizeof *rep->busy);
    rep->bubble = calloc(p, sizeof *rep->bubble);
    rep->peak_live = calloc(p, sizeof *rep->peak_live);
    rep->peak_live_chunk = calloc(p * (size_t)V, sizeof *rep->peak_live_chunk);
    rep->messages = calloc(p, sizeof *rep->messages);
    rep->peak_recv = calloc(p, sizeof *rep->peak_recv);
    rep->peak_sends = calloc(p, sizeof *rep->peak_sends);
    rep->lists = calloc(p, sizeof *rep->lists);
    rep->n = calloc(p, sizeof *rep->n);
    rep->start = calloc(p, sizeof *rep->start);
    if (!rep->busy || !rep->bubble || !rep->peak_live || !rep->peak_live_chunk || !rep->messages || !rep->peak_recv ||
        !rep->peak_sends || !rep->lists || !rep->n || !rep->start)
        return dd_error(DD_ERR_NOMEM, "pipeline simulation: out of memory");
    for (size_t r = 0; r < p; r++) {
        size_t k = n[r] ? n[r] : 1;
        rep->lists[r] = malloc(k * sizeof **rep->lists);
        rep->start[r] = calloc(k, sizeof **rep->start);
        if (!rep->lists[r] || !rep->start[r]) return dd_error(DD_ERR_NOMEM, "pipeline simulation: out of memory");
        if (n[r]) memcpy(rep->lists[r], lists[r], n[r] * sizeof **rep->lists);
        rep->n[r] = n[r];
    }
    return DD_OK;
}

/* Runs every rank as far as it can, sweep after sweep, until all are done or none can
 * move (a deadlock). */
static dd_status run_all(pp_sim *s) {
    for (;;) {
        int progress = 0, done = 1;
        for (int r = 0; r < s->P; r++) {
            while (s->pc[r] < s->n[r]) {
                int res = run_one(s, r);
                if (res < 0) return (dd_status)res;
                if (res == RUN_BLOCKED) break;
                s->pc[r]++;
                progress = 1;
            }
            if (s->pc[r] < s->n[r]) done = 0;
        }
        if (done) return DD_OK;
        if (!progress) return deadlock(s);
    }
}

static void summarise(const pp_sim *s, dd_pp_sim *rep) {
    rep->makespan = 0;
    for (int r = 0; r < s->P; r++)
        if (s->clock[r] > rep->makespan) rep->makespan = s->clock[r];
    rep->bubble_mean = 0;
    for (int r = 0; r < s->P; r++) {
        rep->bubble[r] = rep->makespan > 0 ? 1.0 - rep->busy[r] / rep->makespan : 0.0;
        rep->bubble_mean += rep->bubble[r] / s->P;
    }
}

static dd_status check_sim_args(int P, int M, int V, const dd_pp_instr *const *lists, const size_t *n, double f,
                                double b) {
    if (P < 1 || M < 1 || V < 1 || M > DD_PP_MAX_MICRO || (long)P * V > DD_PP_MAX_VSTAGES)
        return dd_error(DD_ERR_ARG, "pipeline simulation: P = %d, M = %d, V = %d outside P, M, V >= 1, M <= %d, "
                        "P*V <= %d", P, M, V, DD_PP_MAX_MICRO, DD_PP_MAX_VSTAGES);
    if (!lists || !n) return dd_error(DD_ERR_ARG, "pipeline simulation: no lists");
    for (int r = 0; r < P; r++)
        if (!lists[r] && n[r]) return dd_error(DD_ERR_ARG, "pipeline simulation: rank %d's list is NULL", r);
    if (!isfinite(f) || !isfinite(b) || f <= 0 || b <= 0)
        return dd_error(DD_ERR_ARG, "pipeline simulation: costs f = %g and b = %g must be finite and > 0", f, b);
    return DD_OK;
}

dd_status dd_pp_simulate_lists(int P, int M, int V, const dd_pp_instr *const *lists, const size_t *n, double f,
                               double b, dd_pp_sim *report) {
    memset(report, 0, sizeof *report);
    DD_TRY(check_sim_args(P, M, V, lists, n, f, b));
    *report = (dd_pp_sim){.P = P, .M = M, .V = V, .f = f, .b = b};
    pp_sim s = {.P = P, .M = M, .V = V, .VS = P * V, .last = P * V - 1, .cf = f / V, .cb = b / V,
                .lists = lists, .n = n, .rep = report};
    dd_status st = report_alloc(report, P, V, lists, n);
    if (st == DD_OK) st = sim_alloc(&s);
    if (st == DD_OK) st = run_all(&s);
    if (st == DD_OK) st = check_complete(&s);
    if (st == DD_OK) st = count_pending_sends(&s);
    if (st == DD_OK) summarise(&s, report);
    sim_free(&s);
    if (st != DD_OK) dd_pp_sim_free(report);
    return st;
}

dd_status dd_pp_simulate(dd_pp_kind kind, int P, int M, int V, double f, double b, dd_pp_sim *report) {
    memset(report, 0, sizeof *report);
    DD_TRY(dd_pp_check_args(kind, P, M, V));
    dd_pp_instr **lists = calloc((size_t)P, sizeof *lists);
    size_t *n = calloc((size_t)P, sizeof *n);
    dd_status st = lists && n ? DD_OK : dd_error(DD_ERR_NOMEM, "pipeline simulation: out of memory");
    for (int r = 0; r < P && st == DD_OK; r++) st = dd_pp_schedule(kind, P, M, V, r, &lists[r], &n[r]);
    if (st == DD_OK) st = dd_pp_simulate_lists(P, M, V, (const dd_pp_instr *const *)lists, n, f, b, report);
    for (int r = 0; lists && r < P; r++) free(lists[r]);
    free(lists);
    free(n);
    return st;
}

void dd_pp_sim_free(dd_pp_sim *r) {
    for (int i = 0; i < r->P; i++) {
        if (r->lists) free(r->lists[i]);
        if (r->start) free(r->start[i]);
    }
    free(r->busy);
    free(r->bubble);
    free(r->peak_live);
    free(r->peak_live_chunk);
    free(r->messages);
    free(r->peak_recv);
    free(r->peak_sends);
    free(r->lists);
    free(r->n);
    free(r->start);
    memset(r, 0, sizeof *r);
}

/* ---- timeline ---------------------------------------------------------------------------- */

/* Text with snprintf semantics: what does not fit in cap - 1 bytes is counted, not written. */
typedef struct {
    char *buf;
    size_t cap, len;
} text;

/* Appends s right-aligned in width columns (rows then end without blanks). */
static void add(text *t, const char *s, int width) {
    int k = (int)strlen(s), pad = width > k ? width - k : 0;
    for (int i = 0; i < pad + k; i++) {
        char c = i < pad ? ' ' : s[i - pad];
        if (t->len + 1 < t->cap) t->buf[t->len] = c;
        t->len++;
    }
}

static void label(const dd_pp_sim *r, const dd_pp_instr *x, char *buf, size_t cap) {
    char op = x->op == DD_PP_FWD ? 'F' : 'B';
    if (r->V > 1) snprintf(buf, cap, "%c%dc%d", op, x->micro, x->chunk);
    else snprintf(buf, cap, "%c%d", op, x->micro);
}

static int label_width(const dd_pp_sim *r) {
    char l[32];
    dd_pp_instr x = {DD_PP_FWD, r->M - 1, r->V - 1, 0, -1, -1, -1};
    label(r, &x, l, sizeof l);
    return (int)strlen(l);
}

/* One rank's row: each cell shows the compute that covers its middle. */
static void timeline_row(const dd_pp_sim *r, int rank, size_t cells, double q, int w, text *t) {
    char head[32], l[32];
    int digits = r->P > 100 ? 3 : r->P > 10 ? 2 : 1; /* P <= DD_PP_MAX_VSTAGES */
    snprintf(head, sizeof head, "rank %*d |", digits, rank % 1000);
    add(t, head, 0);
    const dd_pp_instr *l0 = r->lists[rank];
    size_t i = 0;
    for (size_t c = 0; c < cells; c++) {
        double mid = (c + 0.5) * q;
        const char *cell = ".";
        for (; i < r->n[rank]; i++) {
            const dd_pp_instr *x = &l0[i];
            if (x->op != DD_PP_FWD && x->op != DD_PP_BWD) continue;
            double end = r->start[rank][i] + (x->op == DD_PP_FWD ? r->f : r->b) / r->V;
            if (end <= mid) continue;
            if (r->start[rank][i] <= mid) {
                label(r, x, l, sizeof l);
                cell = l;
            }
            break;
        }
        add(t, " ", 0);
        add(t, cell, w);
    }
    add(t, "\n", 0);
}

size_t dd_pp_timeline(const dd_pp_sim *r, char *buf, size_t cap) {
    text t = {buf, cap, 0};
    if (r && r->P > 0 && r->lists && r->makespan > 0) {
        double q = (r->f < r->b ? r->f : r->b) / r->V;
        size_t cells = (size_t)ceil(r->makespan / q - 1e-9);
        int w = label_width(r);
        for (int rank = 0; rank < r->P; rank++) timeline_row(r, rank, cells, q, w, &t);
    }
    if (cap) buf[t.len < cap ? t.len : cap - 1] = '\0';
    return t.len;
}
