/* Pipeline-parallel schedules as data (src/parallel/pp_schedule.c, pp_split.c): each
 * rank's ordered list of instructions (post a receive, forward, post a send, ...) for
 * GPipe, 1F1B (PipeDream-flush) and interleaved 1F1B (Megatron-LM's virtual stages), a
 * simulator that runs all ranks' lists with the executor's semantics and checks them
 * (deadlock, pairing, order), an ASCII timeline, and the split of a model's stages into
 * contiguous pipeline groups. Pure code: no MPI, no I/O, no global state. See
 * docs/parallel.md, "Pipeline schedules".
 *
 * Model. A model is an ordered list of S stages. With P pipeline ranks and V virtual
 * stages per rank (V = 1 for gpipe and 1f1b) the stages are split into P*V contiguous
 * groups, the virtual stages v = 0..P*V-1 in model order; v lives on rank v % P as its
 * chunk v / P (rank r holds v = r, r+P, r+2P, ...). A global batch is cut into M
 * micro-batches m = 0..M-1. Forward (m, v) needs forward (m, v-1)'s output (v > 0);
 * backward (m, v) needs backward (m, v+1)'s input gradient (v < last) and always
 * forward (m, v) on the same rank; the last virtual stage computes the loss inside its
 * forward, so its backward of m may run right after its forward of m.
 *
 * Instruction semantics (the executor implements exactly these; dd_pp_simulate too):
 *   RECV_ACT  (m, chunk): post a non-blocking receive of m's input activation of this
 *             chunk from `peer` (the rank of vstage - 1). Never blocks.
 *   FWD       (m, chunk): block until that receive has completed (nothing to wait for
 *             at vstage 0 or with P = 1), then compute the forward.
 *   SEND_ACT  (m, chunk): post a non-blocking send of the forward's output to `peer`
 *             (the rank of vstage + 1). Never blocks.
 *   RECV_GRAD (m, chunk): post the receive of dL/d(output) from `peer` (vstage + 1).
 *   BWD       (m, chunk): block until that receive has completed (nothing to wait for at
 *             the last vstage or with P = 1), compute the backward, free m's saved
 *             activations of the chunk.
 *   SEND_GRAD (m, chunk): post the send of dL/d(input) to `peer` (vstage - 1).
 * A message is delivered once both its send and its receive have been posted. Sends
 * and receives are matched by (peer, tag); tags are unique within a step, so no two
 * messages of a step can be confused. With P = 1 there are no messages: virtual stage
 * v's input is v - 1's output on the same rank (and likewise for gradients).
 *
 * Receives are posted one compute instruction ahead: the receive of the k-th FWD/BWD of
 * a rank is posted just before its (k-1)-th FWD/BWD, so the transfer overlaps that
 * compute. At most two receives of a rank are outstanding at any time; each has a
 * buffer `slot` of its (chunk, direction), see dd_pp_schedule_buffers.
 */
#ifndef DISTDPD_PIPELINE_H
#define DISTDPD_PIPELINE_H

#include <stddef.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits, set by the tag layout (dd_pp_tag): micro-batches per step and virtual stages
 * P*V of a pipeline. dd_pp_schedule refuses larger ones with DD_ERR_ARG. */
#define DD_PP_MAX_MICRO 4096
#define DD_PP_MAX_VSTAGES 128

typedef enum {
    DD_PP_GPIPE = 0,      /* all forwards (m = 0..M-1), then all backwards (m = 0..M-1) */
    DD_PP_1F1B = 1,       /* PipeDream-flush: min(M, P-r) forwards, then one backward and
                             one forward alternately, then the remaining backwards */
    DD_PP_INTERLEAVED = 2 /* Megatron-LM's interleaved 1F1B over V chunks per rank */
} dd_pp_kind;

/* "gpipe", "1f1b", "interleaved". Errors: DD_ERR_ARG "unknown pipeline schedule 'X'
 * (choices: gpipe, 1f1b, interleaved)". */
dd_status dd_pp_kind_parse(const char *name, dd_pp_kind *out);
/* The name dd_pp_kind_parse takes; "?" for a value outside the enum. */
const char *dd_pp_kind_name(dd_pp_kind k);

typedef enum {
    DD_PP_RECV_ACT = 0,
    DD_PP_FWD = 1,
    DD_PP_SEND_ACT = 2,
    DD_PP_RECV_GRAD = 3,
    DD_PP_BWD = 4,
    DD_PP_SEND_GRAD = 5
} dd_pp_op;

/* "RECV_ACT", "FWD", "SEND_ACT", "RECV_GRAD", "BWD", "SEND_GRAD"; "?" otherwise. */
const char *dd_pp_op_name(dd_pp_op op);

/* One instruction of a rank's list. */
typedef struct {
    dd_pp_op op;
    int micro;  /* micro-batch m, 0..M-1 */
    int chunk;  /* the rank's chunk, 0..V-1 */
    int vstage; /* chunk * P + rank: the virtual stage the instruction belongs to */
    int peer;   /* RECV_*: the sending rank; SEND_*: the receiving rank; FWD/BWD: the
                   rank whose message they wait for; -1 when there is none (vstage 0's
                   FWD, the last vstage's BWD, every FWD/BWD with P = 1) */
    int tag;    /* the message's dd_pp_tag (FWD/BWD: of the receive they wait for);
                   -1 when there is no message */
    int slot;   /* RECV_* and the FWD/BWD that consumes the receive: the receive buffer,
                   0..n-1 of this rank, chunk and direction (n from
                   dd_pp_schedule_buffers), lowest free one when the receive is posted,
                   free again once the consuming FWD/BWD has run (an executor that keeps
                   the received input for the backward copies it there); -1 otherwise */
} dd_pp_instr;

/* The tag of the message that virtual stage `vstage` RECEIVES for micro-batch `micro`:
 * is_grad = 0 for an activation (sent by vstage - 1), 1 for a gradient (sent by
 * vstage + 1). tag = micro * 256 + vstage * 2 + is_grad: unique per (micro, receiving
 * vstage, direction), in [0, 2^20) for micro < 4096 and vstage < 128. MPI guarantees
 * only MPI_TAG_UB >= 32767: the executor checks MPI_TAG_UB >= 2^20 - 1 (Open MPI and
 * MPICH allow 2^31 - 1 or more than 2^20). Returns -1 outside those ranges. */
int dd_pp_tag(int micro, int vstage, int is_grad);

/* Checks (kind, P, M, V) as dd_pp_schedule does (same messages). Errors DD_ERR_ARG:
 *   "--pp 0: a pipeline needs at least 1 rank"
 *   "--micro 0: a step needs at least 1 micro-batch"
 *   "--virtual 0: each rank needs at least 1 virtual stage"
 *   "--virtual 2 needs --schedule interleaved (gpipe and 1f1b hold one stage group per
 *    rank)"
 *   "--micro 5000: at most 4096 micro-batches per step (the message tag's limit)"
 *   "--pp 64 x --virtual 4 = 256 virtual stages: at most 128 (the message tag's limit)"
 *   "unknown pipeline schedule 7" for a kind outside the enum. */
dd_status dd_pp_check_args(dd_pp_kind kind, int P, int M, int V);

/* Rank `rank`'s instruction list for (kind, P, M, V): 2*M*V FWD/BWD plus their
 * messages (at most 6*M*V instructions). The order of the FWD/BWD:
 *   gpipe        F0 .. F(M-1), B0 .. B(M-1) (backwards in micro-batch order, as in
 *                torch's ScheduleGPipe; the GPipe paper's figure draws them reversed:
 *                same makespan, same memory);
 *   1f1b         w = min(M, P - rank) forwards, then B(k), F(w + k) for k = 0..M-w-1,
 *                then the last w backwards: at most min(M, P - rank) micro-batches live;
 *   interleaved  forwards in the order of Megatron's schedule table: micro-batches in
 *                groups of P (the last group also takes the M % P left over: a smaller
 *                group of its own deadlocks), each group through chunk 0, 1, .., V-1;
 *                backwards in the same order with the chunks reversed (V-1 .. 0). Rank r
 *                runs w = min(M*V, 2(P-r-1) + (V-1)G) warm-up forwards, G the largest
 *                group (P, or P + M % P, or M when M < 2P), then F(w + k),
 *                B(k) alternately, then the remaining backwards. Any M >= 1 works
 *                (checked deadlock-free over P <= 8, M <= 17, V <= 4 by the tests);
 *                with V = 1 the list is 1f1b's (Megatron's warm-up of 2(P-r-1) would
 *                keep more micro-batches alive for the same makespan).
 * On success *out is a new array of *n instructions; the caller frees it with free().
 * Errors: those of dd_pp_check_args; DD_ERR_ARG "rank 4 is not in [0, --pp 4)";
 * DD_ERR_NOMEM. On error *out = NULL, *n = 0. */
dd_status dd_pp_schedule(dd_pp_kind kind, int P, int M, int V, int rank, dd_pp_instr **out, size_t *n);

/* Receive buffers the executor needs per rank, chunk and direction: the most receives
 * of one (rank, chunk, direction) posted and not yet consumed at once, over every rank's
 * list (every `slot` is below it). act: activations (RECV_ACT), grad: gradients
 * (RECV_GRAD). Both are at most 2 (receives are posted one compute ahead) and 0 when
 * P = 1. */
typedef struct {
    int act;
    int grad;
} dd_pp_buffers;
/* Errors: those of dd_pp_schedule. */
dd_status dd_pp_schedule_buffers(dd_pp_kind kind, int P, int M, int V, dd_pp_buffers *out);

/* The bubble share (idle share of each rank) of the textbook formula:
 * (P-1)/(M+P-1) for gpipe and 1f1b, ((P-1)/V) / (M + (P-1)/V) for interleaved (Narayanan
 * et al. 2021). -1 for P, M or V below 1 or an unknown kind. */
double dd_pp_bubble_formula(dd_pp_kind kind, int P, int M, int V);

/* What dd_pp_simulate found. Arrays are owned by the report (dd_pp_sim_free). */
typedef struct {
    int P, M, V;
    double f, b;            /* forward and backward cost of one micro-batch through one
                               rank's share of the model (a chunk costs f/V, b/V) */
    double makespan;        /* time from the first instruction to the last compute's end */
    double bubble_mean;     /* mean of bubble[] over the ranks */
    double *busy;           /* [P] compute time of each rank (M*(f+b) when complete) */
    double *bubble;         /* [P] idle share of each rank: 1 - busy[r] / makespan */
    int *peak_live;         /* [P] most micro-batch activations alive at once on the rank
                               (FWD done, BWD not yet run; all chunks together) */
    int *peak_live_chunk;   /* [P*V] the same per chunk: rank r, chunk c at r*V + c */
    int *messages;          /* [P] sends the rank posted (SEND_ACT + SEND_GRAD); as many
                               receives were posted, since each send is matched */
    int *peak_recv;         /* [P] most receives posted and not yet consumed at once */
    int *peak_sends;        /* [P] most sends posted and not yet delivered (their receive
                               not yet posted) at one time: the output buffers an executor
                               that completes delivered sends each instruction keeps */
    dd_pp_instr **lists;    /* [P] each rank's list (copied) */
    size_t *n;              /* [P] their lengths */
    double **start;         /* [P][n[r]] when each instruction ran (FWD/BWD: when the
                               compute began, after any wait); for the timeline */
} dd_pp_sim;

/* Generates all P ranks' lists with dd_pp_schedule and runs dd_pp_simulate_lists on
 * them. Errors: those of dd_pp_schedule; DD_ERR_ARG for f or b not finite or <= 0; those
 * of dd_pp_simulate_lists. On error the report holds nothing. */
dd_status dd_pp_simulate(dd_pp_kind kind, int P, int M, int V, double f, double b, dd_pp_sim *report);

/* Runs any P lists (lists[r], n[r] for rank r; copied) with the semantics above,
 * messages instantaneous, FWD costing f/V and BWD b/V, and checks them:
 *   - each instruction well formed: micro in [0, M), chunk in [0, V), vstage = chunk*P
 *     + rank, peer the rank of the neighbouring vstage (vstage - 1 for RECV_ACT and
 *     SEND_GRAD, vstage + 1 for SEND_ACT and RECV_GRAD), tag = dd_pp_tag of the receiving
 *     vstage, no message at vstage 0 backwards / the last vstage forwards or with P = 1,
 *     slots as described for dd_pp_instr;
 *   - FWD and BWD of each (micro, vstage) exactly once, on its rank, FWD first; a FWD/BWD
 *     that needs a message has its receive posted before it on that rank; a SEND after
 *     the FWD/BWD whose result it sends; each message sent and received exactly once;
 *   - no deadlock: when no rank can move, DD_ERR_INTERNAL "pipeline deadlock: rank R is
 *     stuck at instruction I (FWD micro m chunk c, vstage v) waiting for SEND_ACT of
 *     micro m by rank Q (vstage v-1); ..." for every stuck rank (the first four).
 * Errors: DD_ERR_ARG (P, M, V out of the limits, NULL lists, f or b not finite or
 * <= 0), DD_ERR_INTERNAL naming the rank, the instruction index and what is wrong (a
 * list that breaks a rule or deadlocks), DD_ERR_NOMEM. On error the report holds
 * nothing; on success free it with dd_pp_sim_free. */
dd_status dd_pp_simulate_lists(int P, int M, int V, const dd_pp_instr *const *lists, const size_t *n, double f,
                               double b, dd_pp_sim *report);

/* Frees what the report holds and zeroes it (harmless on a zeroed report). */
void dd_pp_sim_free(dd_pp_sim *report);

/* ASCII timeline of a simulation: one row per rank, "rank R | " then one cell per time
 * unit (min(f, b) / V): "F3" / "B3" (V = 1) or "F3c1" / "B3c1" (micro 3, chunk 1) in
 * every cell whose middle falls in that compute, "." while the rank is idle; cells
 * right-aligned to the widest label and separated by one blank; each row ends in '\n'. Writes at most cap bytes including the
 * terminating NUL (nothing when cap = 0) and returns the length of the whole timeline
 * (snprintf semantics: a result >= cap means it was cut). */
size_t dd_pp_timeline(const dd_pp_sim *r, char *buf, size_t cap);

/* ---- stage split (pp_split.c) -------------------------------------------------------
 * bounds has G + 1 entries: group g holds stages [bounds[g], bounds[g+1]), bounds[0] = 0,
 * bounds[G] = S, every group at least one stage. */

/* The contiguous split of S stages with costs cost[0..S) (finite, >= 0; NULL: every
 * stage costs 1) into G groups that minimises the largest group cost, exactly (dynamic
 * programming over prefix sums, O(G S^2)); among those, the one with the smallest sum of
 * squared group costs (the most even). Errors DD_ERR_ARG:
 *   "cannot split 5 stages into 8 pipeline groups: each group needs at least one stage
 *    (at most 5 groups: lower --pp or --virtual)"
 *   "0 pipeline groups: expected at least 1", "a model of 0 stages cannot be split",
 *   "stage 3's cost -1 is not a finite number >= 0";
 * DD_ERR_NOMEM. */
dd_status dd_pp_split_balanced(const double *cost, size_t S, int G, size_t *bounds);

/* Chunk c of pipeline rank q: virtual stage v = c P + q covers stages [s0, s1) of the
 * concatenated list split by bounds (G + 1 entries, G = P V): the trained model's stages
 * [m0, m1) (its Sm stages come first) and the frozen PA model's [a0, a1) (either may be
 * empty); the activation message in / out also carries u, the PA model's input, when
 * the chunk / the next one starts strictly inside the PA model. */
typedef struct {
    size_t s0, s1, m0, m1, a0, a1;
    int vstage, first, last, u_in, u_out;
} dd_pp_span;
void dd_pp_span_of(const size_t *bounds, int P, int V, int q, int c, size_t Sm, dd_pp_span *out);

/* A hand-made split ("--pp-split 3,3,4"): G decimal stage counts separated by commas
 * (blanks around a count are ignored), each at least 1, summing to S. Errors DD_ERR_ARG,
 * in this order, items numbered from 1:
 *   "--pp-split: empty list (expected 4 stage counts such as 3,3,2,2)"
 *   "--pp-split: item 2 is empty"
 *   "--pp-split: item 2 ('x') is not a decimal count"
 *   "--pp-split: item 2 ('0') must be at least 1"
 *   "--pp-split: item 2 ('11') is more than the model's 10 stages"
 *   "--pp-split: 3 counts for 4 pipeline groups"
 *   "--pp-split: sum 9 is not the model's 10 stages"
 *   and G < 1 or S < 1 as for dd_pp_split_balanced. */
dd_status dd_pp_split_parse(const char *list, size_t S, int G, size_t *bounds);

#ifdef __cplusplus
}
#endif

#endif
