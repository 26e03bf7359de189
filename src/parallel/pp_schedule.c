/* Pipeline schedules as data (pipeline.h): the per-rank instruction lists of GPipe,
 * 1F1B and interleaved 1F1B, the receive-buffer count they need, and the textbook bubble
 * formula. The simulator that checks the lists is pp_sim.c; the stage split pp_split.c.
 * Pure code: no MPI. See docs/parallel.md, "Pipeline schedules". */
#include <stdlib.h>
#include <string.h>

#include "distdpd/pipeline.h"

static const char *const kind_names[] = {"gpipe", "1f1b", "interleaved"};
static const char *const op_names[] = {"RECV_ACT", "FWD", "SEND_ACT", "RECV_GRAD", "BWD", "SEND_GRAD"};

dd_status dd_pp_kind_parse(const char *name, dd_pp_kind *out) {
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (dd_pp_kind)i;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG, "unknown pipeline schedule '%s' (choices: gpipe, 1f1b, interleaved)",
                    name ? name : "(null)");
}

const char *dd_pp_kind_name(dd_pp_kind k) {
    return (int)k >= 0 && (int)k < 3 ? kind_names[k] : "?";
}

const char *dd_pp_op_name(dd_pp_op op) {
    return (int)op >= 0 && (int)op < 6 ? op_names[op] : "?";
}

int dd_pp_tag(int micro, int vstage, int is_grad) {
    if (micro < 0 || micro >= DD_PP_MAX_MICRO || vstage < 0 || vstage >= DD_PP_MAX_VSTAGES) return -1;
    return micro * 256 + vstage * 2 + (is_grad != 0);
}

dd_status dd_pp_check_args(dd_pp_kind kind, int P, int M, int V) {
    if ((int)kind < 0 || (int)kind > 2) return dd_error(DD_ERR_ARG, "unknown pipeline schedule %d", (int)kind);
    if (P < 1) return dd_error(DD_ERR_ARG, "--pp %d: a pipeline needs at least 1 rank", P);
    if (M < 1) return dd_error(DD_ERR_ARG, "--micro %d: a step needs at least 1 micro-batch", M);
    if (V < 1) return dd_error(DD_ERR_ARG, "--virtual %d: each rank needs at least 1 virtual stage", V);
    if (V != 1 && kind != DD_PP_INTERLEAVED)
        return dd_error(DD_ERR_ARG,
                        "--virtual %d needs --schedule interleaved (gpipe and 1f1b hold one stage group per rank)", V);
    if (M > DD_PP_MAX_MICRO)
        return dd_error(DD_ERR_ARG, "--micro %d: at most %d micro-batches per step (the message tag's limit)", M,
                        DD_PP_MAX_MICRO);
    if ((long)P * V > DD_PP_MAX_VSTAGES)
        return dd_error(DD_ERR_ARG, "--pp %d x --virtual %d = %ld virtual stages: at most %d (the message tag's limit)",
                        P, V, (long)P * V, DD_PP_MAX_VSTAGES);
    return DD_OK;
}

double dd_pp_bubble_formula(dd_pp_kind kind, int P, int M, int V) {
    if (P < 1 || M < 1 || V < 1 || (int)kind < 0 || (int)kind > 2) return -1.0;
    double warm = (double)(P - 1);
    if (kind == DD_PP_INTERLEAVED) warm /= V;
    return warm / (M + warm);
}

/* ---- compute order ----------------------------------------------------------------- */

/* One FWD or BWD of a rank's compute order. */
typedef struct {
    int fwd;   /* 1: FWD, 0: BWD */
    int micro; /* m */
    int chunk; /* the rank's chunk */
} pp_step;

/* The largest group of the interleaved table: P, all M when M < 2P, or P + M % P (the
 * last group takes the remainder, see interleaved_table). */
static int largest_group(int P, int M) { return M < 2 * P ? M : P + M % P; }

/* Megatron's schedule table: the k-th forward of every rank is (micro, chunk) of entry k:
 * micro-batches in groups of P, each group through chunk 0, 1, .., V-1. When P does not
 * divide M the last group takes the remainder too (P + M % P micro-batches): a group
 * smaller than P would bring chunk c+1 of a micro-batch round before the rank that
 * computes chunk c can deliver it, and deadlock (found by the simulator). Fills
 * tab[0 .. M*V). */
static void interleaved_table(int P, int M, int V, pp_step *tab) {
    size_t k = 0;
    for (int g0 = 0; g0 < M;) {
        int g1 = g0 + P;
        if (g1 > M || M - g1 < P) g1 = M;
        for (int c = 0; c < V; c++)
            for (int m = g0; m < g1; m++) tab[k++] = (pp_step){1, m, c};
        g0 = g1;
    }
}

/* Forward k (0-based) and backward k of the table order: backwards take the chunks in
 * reverse (V-1 first). */
static pp_step table_fwd(const pp_step *tab, size_t k) { return tab[k]; }
static pp_step table_bwd(const pp_step *tab, size_t k, int V) {
    return (pp_step){0, tab[k].micro, V - 1 - tab[k].chunk};
}

/* The warm-up forwards of rank r before its first backward (or first F,B pair). */
static size_t warmup(dd_pp_kind kind, int P, int M, int V, int r) {
    long total = (long)M * V, w;
    if (kind == DD_PP_GPIPE) w = total;
    else if (kind == DD_PP_1F1B) w = P - r;
    else w = 2L * (P - r - 1) + (long)(V - 1) * largest_group(P, M);
    return (size_t)(w < total ? w : total);
}

/* The rank's FWD/BWD order (2*M*V steps into s) for the kind: w warm-up forwards; then
 * pairs (1f1b: B(k) then F(w+k); interleaved: F(w+k) then B(k)); then the backwards left.
 * GPipe is the case w = M. */
static void compute_order(dd_pp_kind kind, int P, int M, int V, int r, const pp_step *tab, pp_step *s) {
    size_t total = (size_t)M * (size_t)V, w = warmup(kind, P, M, V, r), n = 0;
    for (size_t k = 0; k < w; k++) s[n++] = table_fwd(tab, k);
    for (size_t k = 0; k + w < total; k++) {
        if (kind == DD_PP_INTERLEAVED) {
            s[n++] = table_fwd(tab, w + k);
            s[n++] = table_bwd(tab, k, V);
        } else {
            s[n++] = table_bwd(tab, k, V);
            s[n++] = table_fwd(tab, w + k);
        }
    }
    for (size_t k = total - w; k < total; k++) s[n++] = table_bwd(tab, k, V);
}

/* ---- instructions ------------------------------------------------------------------ */

/* State while a rank's list is written: the output and the receive slots in use per
 * (chunk, direction). */
typedef struct {
    int P, V, rank, last; /* last: the last vstage, P*V - 1 */
    dd_pp_instr *out;
    size_t n;
    unsigned *busy;  /* [V * 2] bit i: slot i of (chunk, dir) holds a posted receive */
    int *slot_of;    /* [steps] the slot of step i's receive, -1 none */
} pp_emit;

static int step_vstage(const pp_emit *e, pp_step s) { return s.chunk * e->P + e->rank; }

/* Whether step s waits for a message: a FWD past vstage 0, a BWD before the last vstage,
 * and only when the neighbour is on another rank (P > 1). */
static int needs_recv(const pp_emit *e, pp_step s) {
    int v = step_vstage(e, s);
    return e->P > 1 && (s.fwd ? v > 0 : v < e->last);
}
/* Whether step s sends its result: a FWD sends unless it is the last vstage, a BWD unless
 * it is vstage 0, which is exactly when the opposite step of the same vstage receives. */
static int has_send(const pp_emit *e, pp_step s) { return needs_recv(e, (pp_step){!s.fwd, s.micro, s.chunk}); }

static void put(pp_emit *e, dd_pp_op op, pp_step s, int peer, int tag, int slot) {
    e->out[e->n++] = (dd_pp_instr){op, s.micro, s.chunk, step_vstage(e, s), peer, tag, slot};
}

/* The receive step s needs: (peer, tag) from the neighbour in the data's direction. */
static void recv_of(const pp_emit *e, pp_step s, int *peer, int *tag) {
    int v = step_vstage(e, s), from = s.fwd ? v - 1 : v + 1;
    *peer = from % e->P;
    *tag = dd_pp_tag(s.micro, v, !s.fwd);
}

static void post_recv(pp_emit *e, const pp_step *s, size_t i) {
    e->slot_of[i] = -1;
    if (!needs_recv(e, s[i])) return;
    unsigned *busy = &e->busy[s[i].chunk * 2 + !s[i].fwd];
    int slot = 0;
    while (*busy & (1u << slot)) slot++;
    *busy |= 1u << slot;
    e->slot_of[i] = slot;
    int peer, tag;
    recv_of(e, s[i], &peer, &tag);
    put(e, s[i].fwd ? DD_PP_RECV_ACT : DD_PP_RECV_GRAD, s[i], peer, tag, slot);
}

static void compute(pp_emit *e, const pp_step *s, size_t i) {
    int peer = -1, tag = -1, slot = e->slot_of[i];
    if (slot >= 0) {
        recv_of(e, s[i], &peer, &tag);
        e->busy[s[i].chunk * 2 + !s[i].fwd] &= ~(1u << slot);
    }
    put(e, s[i].fwd ? DD_PP_FWD : DD_PP_BWD, s[i], peer, tag, slot);
    if (!has_send(e, s[i])) return;
    int v = step_vstage(e, s[i]), to = s[i].fwd ? v + 1 : v - 1;
    put(e, s[i].fwd ? DD_PP_SEND_ACT : DD_PP_SEND_GRAD, s[i], to % e->P, dd_pp_tag(s[i].micro, to, !s[i].fwd), -1);
}

/* Writes the list: each receive one compute ahead (the receive of step i + 1 is posted
 * before step i), each send right after the compute whose result it carries. */
static void emit(pp_emit *e, const pp_step *s, size_t steps) {
    if (steps) post_recv(e, s, 0);
    for (size_t i = 0; i < steps; i++) {
        if (i + 1 < steps) post_recv(e, s, i + 1);
        compute(e, s, i);
    }
}

dd_status dd_pp_schedule(dd_pp_kind kind, int P, int M, int V, int rank, dd_pp_instr **out, size_t *n) {
    *out = NULL;
    *n = 0;
    DD_TRY(dd_pp_check_args(kind, P, M, V));
    if (rank < 0 || rank >= P) return dd_error(DD_ERR_ARG, "rank %d is not in [0, --pp %d)", rank, P);
    if (kind == DD_PP_INTERLEAVED && V == 1) kind = DD_PP_1F1B; /* the same schedule, fewer live activations */
    size_t total = (size_t)M * (size_t)V, steps = 2 * total;
    pp_step *tab = malloc(total * sizeof *tab), *s = malloc(steps * sizeof *s);
    unsigned *busy = calloc(2 * (size_t)V, sizeof *busy);
    int *slot_of = malloc(steps * sizeof *slot_of);
    dd_pp_instr *list = malloc(3 * steps * sizeof *list);
    dd_status st = DD_OK;
    if (!tab || !s || !busy || !slot_of || !list) {
        st = dd_error(DD_ERR_NOMEM, "pipeline schedule: out of memory for %zu instructions", 3 * steps);
        free(list);
        goto cleanup;
    }
    interleaved_table(P, M, V, tab);
    compute_order(kind, P, M, V, rank, tab, s);
    pp_emit e = {P, V, rank, P * V - 1, list, 0, busy, slot_of};
    emit(&e, s, steps);
    *out = list;
    *n = e.n;
cleanup:
    free(tab);
    free(s);
    free(busy);
    free(slot_of);
    return st;
}

/* Raises b to the most receives of one (chunk, direction) outstanding in the list;
 * open: 2*V counters, zeroed here. */
static void count_buffers(const dd_pp_instr *l, size_t n, int V, int *open, dd_pp_buffers *b) {
    memset(open, 0, 2 * (size_t)V * sizeof *open);
    for (size_t i = 0; i < n; i++) {
        int d = l[i].op == DD_PP_RECV_GRAD || l[i].op == DD_PP_BWD, *k = &open[l[i].chunk * 2 + d];
        if (l[i].op == DD_PP_RECV_ACT || l[i].op == DD_PP_RECV_GRAD) {
            ++*k;
            if (d && *k > b->grad) b->grad = *k;
            if (!d && *k > b->act) b->act = *k;
        } else if ((l[i].op == DD_PP_FWD || l[i].op == DD_PP_BWD) && l[i].slot >= 0) {
            --*k;
        }
    }
}

dd_status dd_pp_schedule_buffers(dd_pp_kind kind, int P, int M, int V, dd_pp_buffers *out) {
    *out = (dd_pp_buffers){0, 0};
    DD_TRY(dd_pp_check_args(kind, P, M, V));
    int *open = malloc(2 * (size_t)V * sizeof *open);
    if (!open) return dd_error(DD_ERR_NOMEM, "pipeline schedule: out of memory");
    dd_status st = DD_OK;
    for (int r = 0; r < P && st == DD_OK; r++) {
        dd_pp_instr *l;
        size_t n;
        st = dd_pp_schedule(kind, P, M, V, r, &l, &n);
        if (st == DD_OK) count_buffers(l, n, V, open, out);
        free(l);
    }
    free(open);
    return st;
}
