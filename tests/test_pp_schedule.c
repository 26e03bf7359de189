/* Tests of the pipeline schedules (pipeline.h): over a grid of (P, M, V) with odd shapes
 * (M = 1, M < P, M not a multiple of P) every schedule's lists are checked by a checker
 * written here, independent of the library's simulator: each (micro, vstage) forward and
 * backward once, on its rank, forward first; every send matched by one receive (peer and
 * tag both ways, neighbours in vstage order); receives posted before their consumer and
 * no more outstanding than dd_pp_schedule_buffers; and no deadlock, by a topological sort
 * of the wait-for graph. The simulator then gives the makespan 2(M+P-1) of GPipe and
 * 1F1B, their peak live activations, and the interleaved bubble against the formula.
 * Fixed tables from the literature (PipeDream-flush's figure; Megatron's interleaved
 * algorithm worked by hand), broken lists that must be reported as deadlocks or rule
 * violations by both checkers, the stage split against brute force, --pp-split's
 * messages and the timeline. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/core.h"
#include "distdpd/pipeline.h"

/* ---- helpers ----------------------------------------------------------------------- */

typedef struct {
    int P, M, V;
    dd_pp_instr *l[DD_PP_MAX_VSTAGES];
    size_t n[DD_PP_MAX_VSTAGES];
} lists;

static int make_lists(dd_pp_kind k, int P, int M, int V, lists *ls) {
    memset(ls, 0, sizeof *ls);
    ls->P = P, ls->M = M, ls->V = V;
    for (int r = 0; r < P; r++)
        if (dd_pp_schedule(k, P, M, V, r, &ls->l[r], &ls->n[r]) != DD_OK) return 0;
    return 1;
}

static void free_lists(lists *ls) {
    for (int r = 0; r < ls->P; r++) free(ls->l[r]);
    memset(ls, 0, sizeof *ls);
}

static dd_status simulate(const lists *ls, double f, double b, dd_pp_sim *rep) {
    return dd_pp_simulate_lists(ls->P, ls->M, ls->V, (const dd_pp_instr *const *)ls->l, ls->n, f, b, rep);
}

/* "F0 F1 B0 ..." (V = 1) or "F0c0 ..." of a rank's FWD/BWD in list order. */
static void order_string(const dd_pp_instr *l, size_t n, int V, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len + 16 < cap; i++) {
        if (l[i].op != DD_PP_FWD && l[i].op != DD_PP_BWD) continue;
        char c = l[i].op == DD_PP_FWD ? 'F' : 'B';
        if (V > 1) len += (size_t)snprintf(buf + len, cap - len, "%s%c%dc%d", len ? " " : "", c, l[i].micro, l[i].chunk);
        else len += (size_t)snprintf(buf + len, cap - len, "%s%c%d", len ? " " : "", c, l[i].micro);
    }
}

/* ---- the independent checker ------------------------------------------------------------ */

static int problems_shown;

/* Counts a problem (printing the first few of the whole test). */
static int problem(const lists *ls, const char *fmt, ...) {
    if (problems_shown++ < 12) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "  P=%d M=%d V=%d: ", ls->P, ls->M, ls->V);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    return 1;
}

/* What the checker records per (direction, micro, receiving vstage) message and per
 * (micro, vstage) compute. Positions are indices into the owning rank's list. */
typedef struct {
    int sends, recvs, send_rank, recv_rank, send_pos, recv_pos;
    dd_pp_instr send, recv;
} msg_seen;

typedef struct {
    int fwd, bwd, fpos, bpos;
} compute_seen;

typedef struct {
    const lists *ls;
    int VS;
    msg_seen *msg;      /* [2][M][VS] */
    compute_seen *cmp;  /* [M][VS] */
} checker;

static msg_seen *msg_at(const checker *c, int g, int m, int v) {
    return &c->msg[((size_t)g * c->ls->M + m) * c->VS + v];
}
static compute_seen *cmp_at(const checker *c, int m, int v) { return &c->cmp[(size_t)m * c->VS + v]; }

/* Records one instruction; counts problems with its own fields. */
static int record(checker *c, int r, size_t i) {
    const lists *ls = c->ls;
    const dd_pp_instr *x = &ls->l[r][i];
    if (x->micro < 0 || x->micro >= ls->M || x->chunk < 0 || x->chunk >= ls->V || x->vstage != x->chunk * ls->P + r)
        return problem(ls, "rank %d #%zu: micro %d chunk %d vstage %d out of place", r, i, x->micro, x->chunk, x->vstage);
    int v = x->vstage, m = x->micro, bad = 0;
    compute_seen *cs = cmp_at(c, m, v);
    msg_seen *ms = NULL;
    switch (x->op) {
    case DD_PP_FWD: cs->fwd++, cs->fpos = (int)i; break;
    case DD_PP_BWD: cs->bwd++, cs->bpos = (int)i; break;
    case DD_PP_SEND_ACT: case DD_PP_SEND_GRAD: {
        int g = x->op == DD_PP_SEND_GRAD, to = g ? v - 1 : v + 1;
        if (to < 0 || to >= c->VS) return problem(ls, "rank %d #%zu: send past the pipeline's end", r, i);
        if (x->peer != to % ls->P)
            bad += problem(ls, "rank %d #%zu: %s to rank %d, but vstage %d is on rank %d", r, i, dd_pp_op_name(x->op),
                           x->peer, to, to % ls->P);
        ms = msg_at(c, g, m, to);
        ms->sends++, ms->send_rank = r, ms->send_pos = (int)i, ms->send = *x;
        break;
    }
    case DD_PP_RECV_ACT: case DD_PP_RECV_GRAD: {
        int g = x->op == DD_PP_RECV_GRAD, from = g ? v + 1 : v - 1;
        if (from < 0 || from >= c->VS) return problem(ls, "rank %d #%zu: receive past the pipeline's end", r, i);
        if (x->peer != from % ls->P)
            bad += problem(ls, "rank %d #%zu: %s from rank %d, but vstage %d is on rank %d", r, i,
                           dd_pp_op_name(x->op), x->peer, from, from % ls->P);
        ms = msg_at(c, g, m, v);
        ms->recvs++, ms->recv_rank = r, ms->recv_pos = (int)i, ms->recv = *x;
        break;
    }
    default: return problem(ls, "rank %d #%zu: unknown op %d", r, i, (int)x->op);
    }
    return bad;
}

/* Each (micro, vstage) forward and backward exactly once, forward first. */
static int check_computes(const checker *c) {
    int bad = 0;
    for (int m = 0; m < c->ls->M; m++)
        for (int v = 0; v < c->VS; v++) {
            const compute_seen *cs = cmp_at(c, m, v);
            if (cs->fwd != 1 || cs->bwd != 1)
                bad += problem(c->ls, "micro %d vstage %d: %d FWD, %d BWD", m, v, cs->fwd, cs->bwd);
            else if (cs->bpos < cs->fpos)
                bad += problem(c->ls, "micro %d vstage %d: BWD at #%d before FWD at #%d", m, v, cs->bpos, cs->fpos);
            else if (c->ls->P == 1 && v > 0 && cmp_at(c, m, v - 1)->fpos > cs->fpos)
                bad += problem(c->ls, "micro %d: vstage %d's FWD before vstage %d's on the one rank", m, v, v - 1);
            else if (c->ls->P == 1 && v > 0 && cmp_at(c, m, v - 1)->bpos < cs->bpos)
                bad += problem(c->ls, "micro %d: vstage %d's BWD before vstage %d's on the one rank", m, v - 1, v);
        }
    return bad;
}

/* One message: sent once after its producer, received once before its consumer, peers
 * and tags agreeing both ways; the consumer names the same receive. */
static int check_message(const checker *c, int g, int m, int v, int *tags) {
    const lists *ls = c->ls;
    const msg_seen *ms = msg_at(c, g, m, v);
    int from = g ? v + 1 : v - 1, needed = ls->P > 1 && from >= 0 && from < c->VS, bad = 0;
    if (!needed) return ms->sends || ms->recvs ? problem(ls, "dir %d micro %d vstage %d: unexpected message", g, m, v) : 0;
    if (ms->sends != 1 || ms->recvs != 1)
        return problem(ls, "dir %d micro %d to vstage %d: %d sends, %d receives", g, m, v, ms->sends, ms->recvs);
    if (ms->send.peer != ms->recv_rank || ms->recv.peer != ms->send_rank || ms->send.tag != ms->recv.tag)
        bad += problem(ls, "dir %d micro %d to vstage %d: send (peer %d tag %d) and receive (peer %d tag %d) disagree",
                       g, m, v, ms->send.peer, ms->send.tag, ms->recv.peer, ms->recv.tag);
    const compute_seen *prod = cmp_at(c, m, from), *cons = cmp_at(c, m, v);
    int prod_pos = g ? prod->bpos : prod->fpos, cons_pos = g ? cons->bpos : cons->fpos;
    if (ms->send_pos < prod_pos) bad += problem(ls, "dir %d micro %d to vstage %d: sent before computed", g, m, v);
    if (ms->recv_pos > cons_pos) bad += problem(ls, "dir %d micro %d to vstage %d: received after its consumer", g, m, v);
    const dd_pp_instr *use = &ls->l[ms->recv_rank][cons_pos];
    if (use->peer != ms->recv.peer || use->tag != ms->recv.tag || use->slot != ms->recv.slot)
        bad += problem(ls, "dir %d micro %d to vstage %d: consumer names another receive", g, m, v);
    if (ms->send.tag < 0 || ms->send.tag >= (1 << 20) || tags[ms->send.tag]++)
        bad += problem(ls, "tag %d out of range or used twice", ms->send.tag);
    return bad;
}

/* Outstanding receives per (rank, chunk, direction): at most the buffers the library
 * names, each in a slot below it that no other open receive holds; peak[] gets the most
 * seen (the grid checks the bound is reached, so it is not generous). */
static int check_buffers(const lists *ls, dd_pp_buffers buf, int peak[2]) {
    int bad = 0, open[DD_PP_MAX_VSTAGES][2];
    unsigned used[DD_PP_MAX_VSTAGES][2];
    peak[0] = peak[1] = 0;
    for (int r = 0; r < ls->P; r++) {
        memset(open, 0, sizeof open);
        memset(used, 0, sizeof used);
        for (size_t i = 0; i < ls->n[r]; i++) {
            const dd_pp_instr *x = &ls->l[r][i];
            int g = x->op == DD_PP_RECV_GRAD || x->op == DD_PP_BWD, lim = g ? buf.grad : buf.act;
            unsigned bit = x->slot >= 0 && x->slot < 32 ? 1u << x->slot : 0;
            if (x->op == DD_PP_RECV_ACT || x->op == DD_PP_RECV_GRAD) {
                int k = ++open[x->chunk][g];
                if (k > peak[g]) peak[g] = k;
                if (k > lim || x->slot < 0 || x->slot >= lim || (used[x->chunk][g] & bit))
                    bad += problem(ls, "rank %d #%zu: %d receives open, slot %d (busy %d), buffers %d", r, i, k, x->slot,
                                   (used[x->chunk][g] & bit) != 0, lim);
                used[x->chunk][g] |= bit;
            } else if ((x->op == DD_PP_FWD || x->op == DD_PP_BWD) && x->peer >= 0) {
                open[x->chunk][g]--;
                used[x->chunk][g] &= ~bit;
            }
        }
    }
    return bad;
}

/* Deadlock freedom without simulating: the wait-for graph (each instruction after its
 * predecessor on the rank; a FWD/BWD after the send it waits for) must be acyclic
 * (Kahn's topological sort reaches every instruction). Returns the instructions that
 * can never run. */
static size_t unreachable(const lists *ls) {
    size_t total = 0, off[DD_PP_MAX_VSTAGES + 1];
    for (int r = 0; r < ls->P; r++) off[r] = total, total += ls->n[r];
    off[ls->P] = total;
    int *indeg = calloc(total + 1, sizeof *indeg);
    size_t *wake = malloc((total + 1) * sizeof *wake), *queue = malloc((total + 1) * sizeof *queue);
    for (size_t k = 0; k < total; k++) wake[k] = (size_t)-1;
    /* a send wakes the FWD/BWD with its (peer, tag) on the receiving rank */
    for (int r = 0; r < ls->P; r++)
        for (size_t i = 0; i < ls->n[r]; i++) {
            const dd_pp_instr *x = &ls->l[r][i];
            if (i > 0) indeg[off[r] + i]++;
            if (x->op != DD_PP_SEND_ACT && x->op != DD_PP_SEND_GRAD) continue;
            int q = x->peer;
            if (q < 0 || q >= ls->P) continue;
            dd_pp_op want = x->op == DD_PP_SEND_ACT ? DD_PP_FWD : DD_PP_BWD;
            for (size_t j = 0; j < ls->n[q]; j++)
                if (ls->l[q][j].op == want && ls->l[q][j].tag == x->tag && ls->l[q][j].peer == r) {
                    wake[off[r] + i] = off[q] + j;
                    indeg[off[q] + j]++;
                }
        }
    size_t head = 0, tail = 0, seen = 0;
    for (int r = 0; r < ls->P; r++)
        if (ls->n[r] && indeg[off[r]] == 0) queue[tail++] = off[r];
    while (head < tail) {
        size_t k = queue[head++];
        seen++;
        int r = 0;
        while (off[r + 1] <= k) r++;
        size_t next[2] = {k + 1 < off[r + 1] ? k + 1 : (size_t)-1, wake[k]};
        for (int e = 0; e < 2; e++)
            if (next[e] != (size_t)-1 && --indeg[next[e]] == 0) queue[tail++] = next[e];
    }
    free(indeg);
    free(wake);
    free(queue);
    return total - seen;
}

/* Problems found in P lists by the rules above (0 = valid); peak: as check_buffers. */
static int check_lists(const lists *ls, dd_pp_buffers buf, int peak[2]) {
    checker c = {ls, ls->P * ls->V, NULL, NULL};
    c.msg = calloc(2 * (size_t)ls->M * (size_t)c.VS, sizeof *c.msg);
    c.cmp = calloc((size_t)ls->M * (size_t)c.VS, sizeof *c.cmp);
    int *tags = calloc(1 << 20, sizeof *tags), bad = 0;
    for (int r = 0; r < ls->P; r++)
        for (size_t i = 0; i < ls->n[r]; i++) bad += record(&c, r, i);
    if (!bad) bad += check_computes(&c);
    for (int g = 0; g < 2 && !bad; g++)
        for (int m = 0; m < ls->M; m++)
            for (int v = 0; v < c.VS; v++) bad += check_message(&c, g, m, v, tags);
    if (!bad) bad += check_buffers(ls, buf, peak);
    size_t stuck = bad ? 0 : unreachable(ls);
    if (stuck) bad += problem(ls, "deadlock: %zu instructions can never run", stuck);
    free(c.msg);
    free(c.cmp);
    free(tags);
    return bad;
}

/* ---- the grid ------------------------------------------------------------------------------- */

static int largest_group(int P, int M) { return M < 2 * P ? M : P + M % P; }

/* Simulated figures against the expectations of the docs, f = b = 1 (and f = 1, b = 2
 * for the makespans). */
static void check_sim(dd_pp_kind k, const lists *ls) {
    int P = ls->P, M = ls->M, V = ls->V;
    dd_pp_sim s, s2;
    CHECK_OK(simulate(ls, 1, 1, &s));
    CHECK_OK(simulate(ls, 1, 2, &s2));
    if (!s.P || !s2.P) return;
    double formula = dd_pp_bubble_formula(k, P, M, V);
    int rows_ok = 1;
    for (int r = 0; r < P; r++) {
        int want = k == DD_PP_GPIPE ? M : k == DD_PP_1F1B || V == 1 ? (M < P - r ? M : P - r) : 0;
        if (k == DD_PP_INTERLEAVED && V > 1) {
            int w = 2 * (P - r - 1) + (V - 1) * largest_group(P, M) + 1;
            want = w < M * V ? w : M * V;
        }
        int sends = 0;
        for (int c = 0; c < V; c++) sends += P > 1 ? M * ((c * P + r > 0) + (c * P + r < P * V - 1)) : 0;
        /* sends posted before their receive: none but for interleaved, and there at most the largest group */
        int pending = k == DD_PP_INTERLEAVED && V > 1 ? largest_group(P, M) : 0;
        if (s.peak_live[r] != want || s.messages[r] != sends || fabs(s.busy[r] - 2.0 * M) > 1e-9 ||
            s.peak_sends[r] > pending || s.peak_recv[r] > 2)
            rows_ok = 0;
    }
    CHECK(rows_ok, "%s P=%d M=%d V=%d: peak live, messages, busy time or open sends/receives differ from the expectation", dd_pp_kind_name(k),
          P, M, V);
    if (k != DD_PP_INTERLEAVED || V == 1) {
        CHECK(s.makespan == 2.0 * (M + P - 1) && s2.makespan == 3.0 * (M + P - 1), "%s P=%d M=%d: makespan %g, %g",
              dd_pp_kind_name(k), P, M, s.makespan, s2.makespan);
        CHECK(fabs(s.bubble_mean - formula) < 1e-12, "bubble %g formula %g", s.bubble_mean, formula);
    } else if (M >= P) { /* the formula, exactly: (f + b)(M + (P-1)/V) */
        CHECK(fabs(s.makespan - 2.0 * (M + (P - 1.0) / V)) < 1e-9 && fabs(s2.makespan - 3.0 * (M + (P - 1.0) / V)) < 1e-9,
              "interleaved P=%d M=%d V=%d: makespan %g, %g", P, M, V, s.makespan, s2.makespan);
        CHECK(fabs(s.bubble_mean - formula) < 1e-9, "interleaved P=%d M=%d V=%d: bubble %.12g formula %.12g", P, M, V,
              s.bubble_mean, formula);
    } else { /* M < P: one micro-batch's round trip, P(f + b), plus (f + b)/V per further one */
        CHECK(fabs(s.makespan - 2.0 * (P + (M - 1.0) / V)) < 1e-9 && fabs(s2.makespan - 3.0 * (P + (M - 1.0) / V)) < 1e-9,
              "interleaved P=%d M=%d V=%d: makespan %g, %g", P, M, V, s.makespan, s2.makespan);
        CHECK(s.bubble_mean > formula, "interleaved P=%d M=%d V=%d: bubble %g below the formula %g", P, M, V,
              s.bubble_mean, formula);
    }
    dd_pp_sim_free(&s);
    dd_pp_sim_free(&s2);
}

static void test_grid(void) {
    int shapes = 0;
    for (int k = 0; k < 3; k++)
        for (int P = 1; P <= 8; P++)
            for (int M = 1; M <= 17; M++)
                for (int V = 1; V <= (k == DD_PP_INTERLEAVED ? 4 : 1); V++) {
                    lists ls;
                    dd_pp_buffers buf;
                    CHECK(make_lists(k, P, M, V, &ls), "%s P=%d M=%d V=%d: %s", dd_pp_kind_name(k), P, M, V,
                          dd_last_error());
                    CHECK_OK(dd_pp_schedule_buffers(k, P, M, V, &buf));
                    int peak[2] = {-1, -1};
                    CHECK(check_lists(&ls, buf, peak) == 0, "%s P=%d M=%d V=%d breaks the rules", dd_pp_kind_name(k), P,
                          M, V);
                    CHECK(peak[0] == buf.act && peak[1] == buf.grad && buf.act <= 2 && buf.grad <= 2,
                          "%s P=%d M=%d V=%d: receives open at most %d/%d, buffers %d/%d", dd_pp_kind_name(k), P, M, V,
                          peak[0], peak[1], buf.act, buf.grad);
                    check_sim(k, &ls);
                    free_lists(&ls);
                    shapes++;
                }
    CHECK(shapes == 8 * 17 * 6, "%d shapes", shapes);
}

/* ---- fixed tables ----------------------------------------------------------------------------- */

/* 1F1B (PipeDream-flush), P = 4, M = 8: Narayanan et al. 2021 (Megatron-LM at scale),
 * Figure 4 top, devices 1..4, micro-batches renumbered from 0. */
static void test_table_1f1b(void) {
    static const char *const want[4] = {
        "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7",
    };
    for (int r = 0; r < 4; r++) {
        dd_pp_instr *l;
        size_t n;
        char got[512];
        CHECK_OK(dd_pp_schedule(DD_PP_1F1B, 4, 8, 1, r, &l, &n));
        order_string(l, n, 1, got, sizeof got);
        CHECK(strcmp(got, want[r]) == 0, "1f1b rank %d: %s", r, got);
        free(l);
    }
}

/* GPipe, P = 4, M = 4: all forwards, then all backwards in micro-batch order (torch's
 * ScheduleGPipe; Huang et al. 2019, Fig. 2c, draws the backwards in reverse). */
static void test_table_gpipe(void) {
    for (int r = 0; r < 4; r++) {
        dd_pp_instr *l;
        size_t n;
        char got[512];
        CHECK_OK(dd_pp_schedule(DD_PP_GPIPE, 4, 4, 1, r, &l, &n));
        order_string(l, n, 1, got, sizeof got);
        CHECK(strcmp(got, "F0 F1 F2 F3 B0 B1 B2 B3") == 0, "gpipe rank %d: %s", r, got);
        free(l);
    }
}

/* Interleaved, P = 4, M = 8, V = 2, worked by hand from Megatron-LM's
 * forward_backward_pipelining_with_interleaving: forward k is (micro, chunk) of the table
 * (0..3 c0) (0..3 c1) (4..7 c0) (4..7 c1), backward k the same with the chunk reversed;
 * rank r runs (P-r-1)*2 + (V-1)*P warm-up forwards (10 on rank 0, 4 on rank 3), then
 * forward k+w and backward k alternately, then the remaining backwards. */
static void test_table_interleaved(void) {
    static const char *const want0 =
        "F0c0 F1c0 F2c0 F3c0 F0c1 F1c1 F2c1 F3c1 F4c0 F5c0 "
        "F6c0 B0c1 F7c0 B1c1 F4c1 B2c1 F5c1 B3c1 F6c1 B0c0 F7c1 B1c0 "
        "B2c0 B3c0 B4c1 B5c1 B6c1 B7c1 B4c0 B5c0 B6c0 B7c0";
    static const char *const want3 =
        "F0c0 F1c0 F2c0 F3c0 "
        "F0c1 B0c1 F1c1 B1c1 F2c1 B2c1 F3c1 B3c1 F4c0 B0c0 F5c0 B1c0 F6c0 B2c0 F7c0 B3c0 "
        "F4c1 B4c1 F5c1 B5c1 F6c1 B6c1 F7c1 B7c1 B4c0 B5c0 B6c0 B7c0";
    const char *want[2] = {want0, want3};
    for (int i = 0; i < 2; i++) {
        dd_pp_instr *l;
        size_t n;
        char got[1024];
        CHECK_OK(dd_pp_schedule(DD_PP_INTERLEAVED, 4, 8, 2, i * 3, &l, &n));
        order_string(l, n, 2, got, sizeof got);
        CHECK(strcmp(got, want[i]) == 0, "interleaved rank %d: %s", i * 3, got);
        free(l);
    }
    /* bubble: 1.5 / 9.5 of the 19 time units (f = b = 1) */
    dd_pp_sim s;
    CHECK_OK(dd_pp_simulate(DD_PP_INTERLEAVED, 4, 8, 2, 1, 1, &s));
    CHECK(s.makespan == 19.0 && fabs(s.bubble_mean - 1.5 / 9.5) < 1e-12, "makespan %g bubble %g", s.makespan,
          s.bubble_mean);
    dd_pp_sim_free(&s);
}

#define I(op, m, c, v, peer, tag, slot) {DD_PP_##op, m, c, v, peer, tag, slot}

static int same_instr(dd_pp_instr a, dd_pp_instr b) {
    return a.op == b.op && a.micro == b.micro && a.chunk == b.chunk && a.vstage == b.vstage && a.peer == b.peer &&
           a.tag == b.tag && a.slot == b.slot;
}

/* The whole lists of 1F1B, P = 2, M = 2, from the documented policy: each receive just
 * before the compute ahead of its consumer, each send right after its compute. Tags:
 * micro * 256 + receiving vstage * 2 + is_grad. */
static void test_table_instructions(void) {
    static const dd_pp_instr want0[] = {
        I(FWD, 0, 0, 0, -1, -1, -1),     I(SEND_ACT, 0, 0, 0, 1, 2, -1), I(RECV_GRAD, 0, 0, 0, 1, 1, 0),
        I(FWD, 1, 0, 0, -1, -1, -1),     I(SEND_ACT, 1, 0, 0, 1, 258, -1), I(RECV_GRAD, 1, 0, 0, 1, 257, 1),
        I(BWD, 0, 0, 0, 1, 1, 0),        I(BWD, 1, 0, 0, 1, 257, 1),
    };
    static const dd_pp_instr want1[] = {
        I(RECV_ACT, 0, 0, 1, 0, 2, 0), I(FWD, 0, 0, 1, 0, 2, 0),        I(RECV_ACT, 1, 0, 1, 0, 258, 0),
        I(BWD, 0, 0, 1, -1, -1, -1),   I(SEND_GRAD, 0, 0, 1, 0, 1, -1), I(FWD, 1, 0, 1, 0, 258, 0),
        I(BWD, 1, 0, 1, -1, -1, -1),   I(SEND_GRAD, 1, 0, 1, 0, 257, -1),
    };
    const dd_pp_instr *want[2] = {want0, want1};
    for (int r = 0; r < 2; r++) {
        dd_pp_instr *l;
        size_t n;
        CHECK_OK(dd_pp_schedule(DD_PP_1F1B, 2, 2, 1, r, &l, &n));
        CHECK(n == 8, "rank %d: %zu instructions", r, n);
        for (size_t i = 0; i < n && i < 8; i++)
            CHECK(same_instr(l[i], want[r][i]), "rank %d #%zu: %s micro %d peer %d tag %d slot %d", r, i,
                  dd_pp_op_name(l[i].op), l[i].micro, l[i].peer, l[i].tag, l[i].slot);
        free(l);
    }
    dd_pp_buffers b;
    CHECK_OK(dd_pp_schedule_buffers(DD_PP_1F1B, 2, 2, 1, &b));
    CHECK(b.act == 1 && b.grad == 2, "buffers %d %d", b.act, b.grad);
    CHECK_OK(dd_pp_schedule_buffers(DD_PP_INTERLEAVED, 1, 5, 3, &b));
    CHECK(b.act == 0 && b.grad == 0, "P = 1: buffers %d %d", b.act, b.grad);
    /* interleaved with V = 1 is 1f1b */
    lists a, c;
    REQUIRE(make_lists(DD_PP_1F1B, 3, 5, 1, &a) && make_lists(DD_PP_INTERLEAVED, 3, 5, 1, &c), "%s", dd_last_error());
    for (int r = 0; r < 3; r++)
        CHECK(a.n[r] == c.n[r] && memcmp(a.l[r], c.l[r], a.n[r] * sizeof *a.l[r]) == 0, "rank %d differs", r);
    free_lists(&a);
    free_lists(&c);
}

/* ---- broken lists: both checkers must refuse them ----------------------------------------------- */

static void expect_broken(lists *ls, const char *needle) {
    dd_pp_sim s;
    dd_pp_buffers big = {2, 2};
    CHECK_ERR(simulate(ls, 1, 1, &s), DD_ERR_INTERNAL, needle);
    int shown = problems_shown;
    problems_shown = 1000; /* quiet: these problems are expected */
    int peak[2];
    CHECK(check_lists(ls, big, peak) > 0, "the test's checker accepts a list the simulator refuses (%s)", needle);
    problems_shown = shown;
}

static void set_list(lists *ls, int r, const dd_pp_instr *l, size_t n) {
    free(ls->l[r]);
    ls->l[r] = malloc(n * sizeof *l);
    memcpy(ls->l[r], l, n * sizeof *l);
    ls->n[r] = n;
}

static size_t find(const lists *ls, int r, dd_pp_op op, int micro, int chunk) {
    for (size_t i = 0; i < ls->n[r]; i++)
        if (ls->l[r][i].op == op && ls->l[r][i].micro == micro && ls->l[r][i].chunk == chunk) return i;
    return ls->n[r];
}

static void test_deadlocks(void) {
    /* Rank 0 sends its activation only after its backward, which waits for rank 1. */
    static const dd_pp_instr r0[] = {I(FWD, 0, 0, 0, -1, -1, -1), I(RECV_GRAD, 0, 0, 0, 1, 1, 0),
                                     I(BWD, 0, 0, 0, 1, 1, 0), I(SEND_ACT, 0, 0, 0, 1, 2, -1)};
    static const dd_pp_instr r1[] = {I(RECV_ACT, 0, 0, 1, 0, 2, 0), I(FWD, 0, 0, 1, 0, 2, 0),
                                     I(BWD, 0, 0, 1, -1, -1, -1), I(SEND_GRAD, 0, 0, 1, 0, 1, -1)};
    lists ls = {.P = 2, .M = 1, .V = 1};
    set_list(&ls, 0, r0, 4);
    set_list(&ls, 1, r1, 4);
    expect_broken(&ls, "pipeline deadlock: rank 0 is stuck at instruction 2 (BWD micro 0 chunk 0, vstage 0) waiting "
                       "for SEND_GRAD of micro 0 by rank 1 (vstage 1); rank 1 is stuck at instruction 1 (FWD micro 0 "
                       "chunk 0, vstage 1) waiting for SEND_ACT of micro 0 by rank 0 (vstage 0)");
    /* Rank 0 stops after its forward: rank 1 waits for a send that never comes. */
    set_list(&ls, 0, r0, 1);
    expect_broken(&ls, "pipeline deadlock: rank 1 is stuck at instruction 1 (FWD micro 0 chunk 0, vstage 1) waiting "
                       "for SEND_ACT of micro 0 by rank 0 (vstage 0), which has finished its list without it");
    free_lists(&ls);

    /* A valid GPipe list with one send moved to the end: a crossing of the two ranks. */
    CHECK(make_lists(DD_PP_GPIPE, 2, 2, 1, &ls), "%s", dd_last_error());
    size_t k = find(&ls, 0, DD_PP_SEND_ACT, 1, 0), n = ls.n[0];
    dd_pp_instr moved = ls.l[0][k];
    memmove(&ls.l[0][k], &ls.l[0][k + 1], (n - k - 1) * sizeof moved);
    ls.l[0][n - 1] = moved;
    expect_broken(&ls, "rank 0 is stuck at instruction 5 (BWD micro 0 chunk 0, vstage 0) waiting for SEND_GRAD of "
                       "micro 0 by rank 1 (vstage 1); rank 1 is stuck at instruction 3 (FWD micro 1 chunk 0, vstage 1) "
                       "waiting for SEND_ACT of micro 1 by rank 0 (vstage 0)");
    free_lists(&ls);
}

static void test_rule_violations(void) {
    lists ls;
    /* interleaved P = 3, V = 2: rank 2's chunk 0 (vstage 2) must send to vstage 3, rank 0;
     * sending to rank 1 (vstage 1) is the send-next/send-prev mix-up of Megatron #750 */
    CHECK(make_lists(DD_PP_INTERLEAVED, 3, 3, 2, &ls), "%s", dd_last_error());
    size_t k = find(&ls, 2, DD_PP_SEND_ACT, 0, 0);
    ls.l[2][k].peer = 1;
    char needle[200];
    snprintf(needle, sizeof needle, "rank 2 instruction %zu (SEND_ACT micro 0 chunk 0, vstage 2): peer 1 tag 6, "
             "expected peer 0 (the rank of vstage 3) tag 6", k);
    expect_broken(&ls, needle);
    free_lists(&ls);

    /* a forward whose receive was never posted */
    CHECK(make_lists(DD_PP_1F1B, 2, 1, 1, &ls), "%s", dd_last_error());
    memmove(&ls.l[1][0], &ls.l[1][1], (ls.n[1] - 1) * sizeof *ls.l[1]);
    ls.n[1]--;
    expect_broken(&ls, "rank 1 instruction 0 (FWD micro 0 chunk 0, vstage 1): its receive was not posted before it on "
                       "this rank");
    free_lists(&ls);

    /* a backward missing from the list */
    CHECK(make_lists(DD_PP_1F1B, 2, 1, 1, &ls), "%s", dd_last_error());
    CHECK(ls.l[0][ls.n[0] - 1].op == DD_PP_BWD, "rank 0 ends with %s", dd_pp_op_name(ls.l[0][ls.n[0] - 1].op));
    ls.n[0]--;
    expect_broken(&ls, "pipeline schedule: rank 0's list has no BWD of micro 0 chunk 0 (vstage 0)");
    free_lists(&ls);

    /* two outstanding receives in one slot */
    CHECK(make_lists(DD_PP_GPIPE, 2, 2, 1, &ls), "%s", dd_last_error());
    size_t r1 = find(&ls, 1, DD_PP_RECV_ACT, 1, 0), f1 = find(&ls, 1, DD_PP_FWD, 1, 0);
    ls.l[1][r1].slot = ls.l[1][f1].slot = 0;
    snprintf(needle, sizeof needle, "rank 1 instruction %zu (RECV_ACT micro 1 chunk 0, vstage 1): its slot still holds "
             "a receive that no FWD/BWD has consumed", r1);
    expect_broken(&ls, needle);
    free_lists(&ls);

    /* one rank: backward before forward, a forward twice, chunk 1 before chunk 0 */
    static const dd_pp_instr bf[] = {I(BWD, 0, 0, 0, -1, -1, -1), I(FWD, 0, 0, 0, -1, -1, -1)};
    static const dd_pp_instr ff[] = {I(FWD, 0, 0, 0, -1, -1, -1), I(FWD, 0, 0, 0, -1, -1, -1),
                                     I(BWD, 0, 0, 0, -1, -1, -1)};
    static const dd_pp_instr c10[] = {I(FWD, 0, 1, 1, -1, -1, -1), I(FWD, 0, 0, 0, -1, -1, -1),
                                      I(BWD, 0, 1, 1, -1, -1, -1), I(BWD, 0, 0, 0, -1, -1, -1)};
    ls = (lists){.P = 1, .M = 1, .V = 1};
    set_list(&ls, 0, bf, 2);
    expect_broken(&ls, "rank 0 instruction 0 (BWD micro 0 chunk 0, vstage 0): its FWD has not run before it");
    set_list(&ls, 0, ff, 3);
    expect_broken(&ls, "rank 0 instruction 1 (FWD micro 0 chunk 0, vstage 0): runs a second time");
    ls.V = 2;
    set_list(&ls, 0, c10, 4);
    expect_broken(&ls, "rank 0 instruction 0 (FWD micro 0 chunk 1, vstage 1): vstage - 1's FWD of this micro-batch "
                       "has not run before it on this rank (it would wait forever)");
    free_lists(&ls);
}

/* ---- arguments, tags, formula --------------------------------------------------------------------- */

static void test_args(void) {
    dd_pp_kind k = DD_PP_GPIPE;
    CHECK_OK(dd_pp_kind_parse("interleaved", &k));
    CHECK(k == DD_PP_INTERLEAVED && strcmp(dd_pp_kind_name(DD_PP_1F1B), "1f1b") == 0, "parse/name");
    CHECK_ERR(dd_pp_kind_parse("1F1B", &k), DD_ERR_ARG,
              "unknown pipeline schedule '1F1B' (choices: gpipe, 1f1b, interleaved)");
    dd_pp_instr *l = (dd_pp_instr *)&k;
    size_t n = 7;
    CHECK_ERR(dd_pp_schedule(DD_PP_1F1B, 0, 4, 1, 0, &l, &n), DD_ERR_ARG, "--pp 0: a pipeline needs at least 1 rank");
    CHECK(l == NULL && n == 0, "outputs cleared on error");
    CHECK_ERR(dd_pp_schedule(DD_PP_1F1B, 2, 0, 1, 0, &l, &n), DD_ERR_ARG, "--micro 0: a step needs at least 1 micro-batch");
    CHECK_ERR(dd_pp_schedule(DD_PP_INTERLEAVED, 2, 4, 0, 0, &l, &n), DD_ERR_ARG,
              "--virtual 0: each rank needs at least 1 virtual stage");
    CHECK_ERR(dd_pp_schedule(DD_PP_GPIPE, 2, 4, 2, 0, &l, &n), DD_ERR_ARG,
              "--virtual 2 needs --schedule interleaved (gpipe and 1f1b hold one stage group per rank)");
    CHECK_ERR(dd_pp_schedule(DD_PP_1F1B, 2, 4097, 1, 0, &l, &n), DD_ERR_ARG,
              "--micro 4097: at most 4096 micro-batches per step (the message tag's limit)");
    CHECK_ERR(dd_pp_schedule(DD_PP_INTERLEAVED, 64, 8, 3, 0, &l, &n), DD_ERR_ARG,
              "--pp 64 x --virtual 3 = 192 virtual stages: at most 128 (the message tag's limit)");
    CHECK_ERR(dd_pp_schedule(DD_PP_1F1B, 4, 8, 1, 4, &l, &n), DD_ERR_ARG, "rank 4 is not in [0, --pp 4)");
    CHECK_ERR(dd_pp_schedule((dd_pp_kind)3, 4, 8, 1, 0, &l, &n), DD_ERR_ARG, "unknown pipeline schedule 3");
    dd_pp_sim s;
    CHECK_ERR(dd_pp_simulate(DD_PP_GPIPE, 2, 2, 1, 1, 0, &s), DD_ERR_ARG, "costs f = 1 and b = 0 must be finite and > 0");
    CHECK_ERR(dd_pp_simulate(DD_PP_GPIPE, 2, 2, 1, NAN, 1, &s), DD_ERR_ARG, "must be finite and > 0");
    CHECK(s.P == 0 && s.lists == NULL, "report empty after an error");
    /* the limits themselves work */
    CHECK_OK(dd_pp_schedule(DD_PP_INTERLEAVED, 64, 1, 2, 63, &l, &n));
    free(l);
    CHECK_OK(dd_pp_schedule(DD_PP_1F1B, 2, 4096, 1, 1, &l, &n));
    CHECK(n == 4 * 4096, "%zu instructions", n); /* last vstage: M RECV_ACT, M FWD, M BWD, M SEND_GRAD */
    free(l);
}

static void test_tags(void) {
    /* unique over the whole range, below 2^20 */
    unsigned char *seen = calloc(1 << 20, 1);
    int ok = 1;
    for (int m = 0; m < DD_PP_MAX_MICRO; m++)
        for (int v = 0; v < DD_PP_MAX_VSTAGES; v++)
            for (int g = 0; g < 2; g++) {
                int t = dd_pp_tag(m, v, g);
                if (t < 0 || t >= (1 << 20) || seen[t]++) ok = 0;
            }
    CHECK(ok, "tags not unique or out of [0, 2^20)");
    free(seen);
    CHECK(dd_pp_tag(3, 5, 1) == 3 * 256 + 11, "tag layout");
    CHECK(dd_pp_tag(4096, 0, 0) == -1 && dd_pp_tag(0, 128, 0) == -1 && dd_pp_tag(-1, 0, 0) == -1, "out of range");
    CHECK_NEAR(dd_pp_bubble_formula(DD_PP_GPIPE, 8, 32, 1), 7.0 / 39.0, 1e-15); /* 18 % (GPipe paper) */
    CHECK_NEAR(dd_pp_bubble_formula(DD_PP_1F1B, 4, 8, 1), 3.0 / 11.0, 1e-15);
    CHECK_NEAR(dd_pp_bubble_formula(DD_PP_INTERLEAVED, 4, 8, 2), 1.5 / 9.5, 1e-15);
    CHECK(dd_pp_bubble_formula(DD_PP_1F1B, 0, 8, 1) == -1.0, "invalid P");
}

/* ---- timeline ---------------------------------------------------------------------------------------- */

static void test_timeline(void) {
    dd_pp_sim s;
    char buf[256];
    CHECK_OK(dd_pp_simulate(DD_PP_1F1B, 2, 2, 1, 1, 1, &s));
    const char *want = "rank 0 | F0 F1  . B0  . B1\nrank 1 |  . F0 B0 F1 B1  .\n";
    size_t len = dd_pp_timeline(&s, buf, sizeof buf);
    CHECK(len == strlen(want) && strcmp(buf, want) == 0, "timeline:\n%s", buf);
    CHECK(dd_pp_timeline(&s, buf, 10) == len && strcmp(buf, "rank 0 | ") == 0, "cut: '%s'", buf);
    CHECK(dd_pp_timeline(&s, NULL, 0) == len, "length only");
    CHECK(s.peak_sends[0] == 0 && s.peak_recv[0] == 2 && s.messages[1] == 2, "sends %d recv %d messages %d",
          s.peak_sends[0], s.peak_recv[0], s.messages[1]);
    dd_pp_sim_free(&s);
    dd_pp_sim_free(&s); /* harmless twice */
    CHECK_OK(dd_pp_simulate(DD_PP_1F1B, 1, 1, 1, 1, 2, &s));
    dd_pp_timeline(&s, buf, sizeof buf);
    CHECK(strcmp(buf, "rank 0 | F0 B0 B0\n") == 0, "b = 2f: %s", buf);
    dd_pp_sim_free(&s);
    CHECK_OK(dd_pp_simulate(DD_PP_INTERLEAVED, 1, 1, 2, 1, 1, &s));
    dd_pp_timeline(&s, buf, sizeof buf);
    CHECK(strcmp(buf, "rank 0 | F0c0 F0c1 B0c1 B0c0\n") == 0, "chunks: %s", buf);
    CHECK(s.start[0][1] == 0.5 && s.makespan == 2.0, "start %g makespan %g", s.start[0][1], s.makespan);
    dd_pp_sim_free(&s);
}

/* ---- stage split ------------------------------------------------------------------------------------- */

typedef struct {
    double max, sumsq;
} split_cost;

static split_cost cost_of(const double *c, const size_t *bounds, int G) {
    split_cost s = {0, 0};
    for (int g = 0; g < G; g++) {
        double sum = 0;
        for (size_t i = bounds[g]; i < bounds[g + 1]; i++) sum += c ? c[i] : 1.0;
        if (sum > s.max) s.max = sum;
        s.sumsq += sum * sum;
    }
    return s;
}

/* The best (largest group, then sum of squares) over every split of S stages into G
 * non-empty groups, by enumerating the G-1 cut positions. */
static split_cost brute_force(const double *c, size_t S, int G) {
    size_t b[12];
    split_cost best = {INFINITY, INFINITY};
    for (int g = 0; g <= G; g++) b[g] = (size_t)g; /* first combination: cuts at 1..G-1 */
    b[G] = S;
    for (;;) {
        split_cost s = cost_of(c, b, G);
        if (s.max < best.max - 1e-12 || (fabs(s.max - best.max) <= 1e-12 && s.sumsq < best.sumsq)) best = s;
        int g = G - 1; /* next combination of cuts b[1..G-1] in [1, S-1] */
        while (g >= 1 && b[g] == S - (size_t)(G - g)) g--;
        if (g < 1) break;
        b[g]++;
        for (int h = g + 1; h < G; h++) b[h] = b[h - 1] + 1;
    }
    return best;
}

static int valid_bounds(const size_t *b, size_t S, int G) {
    if (b[0] != 0 || b[G] != S) return 0;
    for (int g = 0; g < G; g++)
        if (b[g + 1] <= b[g]) return 0;
    return 1;
}

static void test_split_balanced(void) {
    dd_rng rng;
    dd_rng_seed(&rng, 12);
    int cases = 0, ok = 1;
    for (size_t S = 1; S <= 10; S++)
        for (int G = 1; G <= (int)S; G++)
            for (int trial = 0; trial < 4; trial++) {
                double c[10];
                for (size_t i = 0; i < S; i++) /* some zero-cost stages, some equal ones */
                    c[i] = trial == 3 ? 1.0 : dd_rng_uniform(&rng) < 0.2 ? 0.0 : floor(dd_rng_uniform(&rng) * 8) / 2;
                size_t b[11];
                if (dd_pp_split_balanced(c, S, G, b) != DD_OK || !valid_bounds(b, S, G)) {
                    ok = 0;
                    continue;
                }
                split_cost got = cost_of(c, b, G), want = brute_force(c, S, G);
                if (fabs(got.max - want.max) > 1e-12 || fabs(got.sumsq - want.sumsq) > 1e-9) {
                    ok = 0;
                    fprintf(stderr, "  S=%zu G=%d: max %g sumsq %g, brute force %g %g\n", S, G, got.max, got.sumsq,
                            want.max, want.sumsq);
                }
                cases++;
            }
    CHECK(ok && cases == 4 * 55, "balanced split against brute force (%d cases)", cases);
    size_t b[11];
    CHECK_OK(dd_pp_split_balanced(NULL, 10, 4, b)); /* unit costs: 3,3,2,2 in some order */
    split_cost u = cost_of(NULL, b, 4);
    CHECK(u.max == 3 && u.sumsq == 26, "unit costs: max %g sumsq %g", u.max, u.sumsq);
    CHECK_OK(dd_pp_split_balanced(NULL, 5, 5, b));
    CHECK(b[0] == 0 && b[1] == 1 && b[2] == 2 && b[3] == 3 && b[4] == 4 && b[5] == 5, "G = S: one stage each");
    double c[5] = {1, 9, 1, 1, 1};
    CHECK_OK(dd_pp_split_balanced(c, 5, 1, b));
    CHECK(b[0] == 0 && b[1] == 5, "G = 1");
    CHECK_OK(dd_pp_split_balanced(c, 5, 3, b));
    CHECK(b[1] == 1 && b[2] == 2 && b[3] == 5, "the heavy stage alone: %zu %zu", b[1], b[2]);
    CHECK_ERR(dd_pp_split_balanced(c, 5, 8, b), DD_ERR_ARG,
              "cannot split 5 stages into 8 pipeline groups: each group needs at least one stage (at most 5 groups: "
              "lower --pp or --virtual)");
    CHECK_ERR(dd_pp_split_balanced(c, 5, 0, b), DD_ERR_ARG, "0 pipeline groups: expected at least 1");
    CHECK_ERR(dd_pp_split_balanced(c, 0, 1, b), DD_ERR_ARG, "a model of 0 stages cannot be split");
    c[3] = -1;
    CHECK_ERR(dd_pp_split_balanced(c, 5, 2, b), DD_ERR_ARG, "stage 3's cost -1 is not a finite number >= 0");
    c[3] = NAN;
    CHECK_ERR(dd_pp_split_balanced(c, 5, 2, b), DD_ERR_ARG, "stage 3's cost nan is not a finite number >= 0");
    /* a deep model is quick: 400 stages into 32 groups */
    double *big = malloc(400 * sizeof *big);
    size_t *bb = malloc(33 * sizeof *bb);
    for (int i = 0; i < 400; i++) big[i] = 1 + (i % 7);
    CHECK_OK(dd_pp_split_balanced(big, 400, 32, bb));
    CHECK(valid_bounds(bb, 400, 32), "400 stages");
    free(big);
    free(bb);
}

static void test_split_parse(void) {
    size_t b[5];
    CHECK_OK(dd_pp_split_parse("3,3,4", 10, 3, b));
    CHECK(b[0] == 0 && b[1] == 3 && b[2] == 6 && b[3] == 10, "3,3,4: %zu %zu %zu %zu", b[0], b[1], b[2], b[3]);
    CHECK_OK(dd_pp_split_parse(" 1 ,\t2, 7 ", 10, 3, b));
    CHECK(b[1] == 1 && b[2] == 3 && b[3] == 10, "blanks");
    CHECK_ERR(dd_pp_split_parse("", 10, 4, b), DD_ERR_ARG,
              "--pp-split: empty list (expected 4 stage counts such as 3,3,2,2)");
    CHECK_ERR(dd_pp_split_parse(NULL, 10, 4, b), DD_ERR_ARG, "--pp-split: empty list");
    CHECK_ERR(dd_pp_split_parse("3,,4", 10, 3, b), DD_ERR_ARG, "--pp-split: item 2 is empty");
    CHECK_ERR(dd_pp_split_parse("3,3,", 10, 3, b), DD_ERR_ARG, "--pp-split: item 3 is empty");
    CHECK_ERR(dd_pp_split_parse("3,x,4", 10, 3, b), DD_ERR_ARG, "--pp-split: item 2 ('x') is not a decimal count");
    CHECK_ERR(dd_pp_split_parse("3,-1,8", 10, 3, b), DD_ERR_ARG, "--pp-split: item 2 ('-1') is not a decimal count");
    CHECK_ERR(dd_pp_split_parse("3,1.5,4", 10, 3, b), DD_ERR_ARG, "--pp-split: item 2 ('1.5') is not a decimal count");
    CHECK_ERR(dd_pp_split_parse("3,0,7", 10, 3, b), DD_ERR_ARG, "--pp-split: item 2 ('0') must be at least 1");
    CHECK_ERR(dd_pp_split_parse("3,11", 10, 2, b), DD_ERR_ARG,
              "--pp-split: item 2 ('11') is more than the model's 10 stages");
    CHECK_ERR(dd_pp_split_parse("3,99999999999999999999999", 10, 2, b), DD_ERR_ARG,
              "--pp-split: item 2 ('99999999999999999999999') is more than the model's 10 stages");
    CHECK_ERR(dd_pp_split_parse("5,5", 10, 3, b), DD_ERR_ARG, "--pp-split: 2 counts for 3 pipeline groups");
    CHECK_ERR(dd_pp_split_parse("2,2,2,2", 10, 3, b), DD_ERR_ARG, "--pp-split: 4 counts for 3 pipeline groups");
    CHECK_ERR(dd_pp_split_parse("3,3,3", 10, 3, b), DD_ERR_ARG, "--pp-split: sum 9 is not the model's 10 stages");
    CHECK_ERR(dd_pp_split_parse("1,1,1,1,1,1,1,1", 5, 8, b), DD_ERR_ARG, "cannot split 5 stages into 8 pipeline groups");
}

int main(void) {
    test_args();
    test_tags();
    test_table_1f1b();
    test_table_gpipe();
    test_table_interleaved();
    test_table_instructions();
    test_grid();
    test_deadlocks();
    test_rule_violations();
    test_timeline();
    test_split_balanced();
    test_split_parse();
    return dd_test_done("test_pp_schedule");
}
