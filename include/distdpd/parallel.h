/* Synchronous data-parallel training (src/parallel): a strategy (dd_strategy, train.h)
 * on a dd_comm (comm.h). Every rank holds the whole model;
 * rank 0's initial (or loaded) parameters are broadcast; each rank trains on its disjoint
 * slice of every global batch (dd_batch_slice); gradients are summed over the ranks in
 * buckets (non-blocking allreduces in reverse layer order, started as each bucket's
 * gradients become final and progressed by polling); the loss sum and a stop flag travel
 * in one small double reduction; every rank then clips and steps identically. With the
 * global sampler, N ranks with global batch B equal one process with batch B up to float
 * rounding (tested). See docs/parallel.md.
 *
 * Usage (what `mpirun -np N distdpd train-pa ...` does):
 *   dd_comm_init(&argc, &argv); dd_comm_world(&world);
 *   dd_dp_cfg dc; dd_dp_cfg_default(&dc); dc.algo = DD_ALLREDUCE_RING;
 *   dd_dp *dp = NULL; dd_dp_create(world, &dc, &dp);
 *   dd_strategy st; dd_dp_strategy(dp, &st);
 *   opts.strategy = &st;                                  // all ranks stop together
 *   dd_train_run(&cfg, &opts);                            // rank 0 writes the files
 *   dd_dp_destroy(&dp); dd_comm_free(&world); dd_comm_finalize();
 *
 * Not thread-safe (one strategy per trainer, used from one thread). Never includes mpi.h.
 */
#ifndef DISTDPD_PARALLEL_H
#define DISTDPD_PARALLEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "distdpd/comm.h"
#include "distdpd/compress.h"
#include "distdpd/core.h"
#include "distdpd/pipeline.h"
#include "distdpd/model.h"
#include "distdpd/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sharded data parallelism (ZeRO). none: every rank keeps everything. zero1: the
 * optimiser state is partitioned over the ranks (each rank updates its slice of the
 * parameters; the slices are allgathered). zero2: also the gradients (reduce-scattered
 * into their owner's slice instead of allreduced). zero3: also the parameters (each
 * stage's parameters gathered just before its forward and its backward, the next stage's
 * gather overlapping the current stage's compute). none and zero1 are this file's
 * strategy (dd_dp); zero2 and zero3 are dd_zero's (zero.h part of this header). */
typedef enum { DD_SHARD_NONE = 0, DD_SHARD_ZERO1 = 1, DD_SHARD_ZERO2 = 2, DD_SHARD_ZERO3 = 3 } dd_shard_mode;
/* "none", "zero1", "zero2", "zero3" (DD_ERR_ARG naming the string otherwise) and back. */
dd_status dd_shard_parse(const char *name, dd_shard_mode *mode);
const char *dd_shard_name(dd_shard_mode mode);
/* The partition of an arena of n floats over p ranks: rank r owns [bounds[r], bounds[r+1])
 * (bounds has p + 1 entries), slices of equal length rounded up to 16 floats (64 bytes),
 * in rank order (the last ones may be shorter or empty). */
void dd_shard_partition(size_t n, int p, size_t *bounds);

/* Configuration. Start from dd_dp_cfg_default(). */
typedef struct {
    dd_allreduce_algo algo; /* gradient allreduce: ring (default), tree, rhd, hier, mpi */
    double bucket_mb;       /* bucket size in MiB (2^20 bytes), [0, 4096]; default 4.
                               Parameter-table entries are grouped, last layer first, until
                               a bucket holds at least this much (an entry is never split).
                               0: no buckets, one blocking allreduce of the whole gradient
                               arena after backward (the reference for the overlap) */
    dd_compress_cfg compress; /* gradient compression (compress.h). "none" (the default):
                               float32 buckets reduced with `algo`, overlapped with the
                               backward pass. Any other compressor: after backward, each
                               bucket (last layer first) is compressed, exchanged with the
                               collective that fits its payload and decompressed, with
                               error feedback per rank; this also runs with one rank (the
                               round trip alone), so single-process runs see the same
                               compression error */
    dd_shard_mode shard;    /* DD_SHARD_NONE (default) or DD_SHARD_ZERO1 (dd_dp); zero2 and
                               zero3 are dd_zero's */
} dd_dp_cfg;

void dd_dp_cfg_default(dd_dp_cfg *c);
/* Range checks (message names the field). Errors: DD_ERR_ARG. */
dd_status dd_dp_cfg_check(const dd_dp_cfg *c);

typedef struct dd_dp dd_dp;

/* A strategy on comm (borrowed: must outlive the strategy; all of comm's ranks train
 * together). Errors: DD_ERR_ARG (bad configuration), DD_ERR_NOMEM. Caller destroys. Not a
 * collective: nothing is communicated before the trainer's first hook call. */
dd_status dd_dp_create(dd_comm *comm, const dd_dp_cfg *cfg, dd_dp **out);
/* Frees the strategy (finishing any reduction still in flight) and sets *dp = NULL. */
void dd_dp_destroy(dd_dp **dp);

/* Fills *st for dd_trainer_create / dd_train_run (dd_train_run_opts.strategy): rank
 * and nranks of the comm and the operations
 *   layout         with zero1: the optimiser state of this rank's slice only
 *                  (dd_shard_partition);
 *   setup          checks that every rank has the same arena length (DD_ERR_MISMATCH on
 *                  all ranks otherwise), broadcasts the parameters from rank 0;
 *   step           this rank's slice of the global batch (dd_trainer_batch_slice) through
 *                  dd_trainer_compute_grads; as each stage's backward finishes, its
 *                  parameter-table entries' gradient ranges are grouped into buckets whose
 *                  non-blocking allreduces (dd_comm_iallreduce) start as soon as the
 *                  bucket is complete and are polled at every stage boundary; then the
 *                  loss sum (with the stop flags and the previous step's exposed time)
 *                  is reduced, everything polled to completion and the time spent there
 *                  recorded (communication not hidden); dd_trainer_apply_update; with
 *                  zero1 each rank steps its slice and the slices are allgathered;
 *   bcast          dd_comm_bcast from rank 0;
 *   before_save    gathers every rank's compression state (and, with zero1, the
 *                  optimiser state) to rank 0 (collective);
 *   save           adds section "dp" (u64 ranks that wrote the checkpoint) (informative:
 *                  a checkpoint written by N ranks resumes on any M); with compression
 *                  also "compress.name", "compress.spec", "compress.cfg", "compress.layout",
 *                  "compress.ranks", "compress.state" and "compress.shared";
 *   load           logs (info) "checkpoint written by N ranks, resuming on M"; restores
 *                  the compression state: each rank its own when N == M, otherwise every
 *                  rank the mean of the N states (so their sum, the gradient not yet
 *                  applied, is kept); a checkpoint of another compressor starts it fresh;
 *   stop_agreed    the stop every rank agreed on (dd_dp_set_stop_source);
 *   epoch_stats    bytes sent per rank per step, compression ratio and compression time
 *                  of the epoch, averaged over the ranks (collective).
 * The strategy keeps pointers to dp: dp must outlive the trainer. Fault injection for
 * tests: the environment variable DD_DP_FAIL=RANK:STEP makes rank RANK's STEP-th step
 * (1-based, counted from create) fail with DD_ERR_INTERNAL "injected failure". */
void dd_dp_strategy(dd_dp *dp, dd_strategy *st);

int dd_dp_rank(const dd_dp *dp);
int dd_dp_size(const dd_dp *dp);

/* Stopping together (a signal forwarded to every rank, e.g. SIGUSR1 by mpirun or SIGTERM
 * by Slurm, reaches the ranks at different steps):
 * *local (e.g. a signal handler's flag; NULL = none) is sampled on every step and summed
 * over the ranks with the loss; the flag returned by dd_dp_stop_flag() becomes 1 on every
 * rank after the same step once any rank's *local was non-zero. Pass that flag as
 * dd_train_run_opts.stop so that all ranks stop after the same step. */
void dd_dp_set_stop_source(dd_dp *dp, const volatile int *local);
const volatile int *dd_dp_stop_flag(const dd_dp *dp);

/* Bucket layout (known after the first step; 0 buckets before it, and in the blocking
 * mode bucket_mb = 0 one bucket [0, n)). Bucket i (0 = the first started: the last layer)
 * covers gradient floats [*lo, *hi); buckets descend and tile the arena. Errors:
 * DD_ERR_ARG (i out of range). */
size_t dd_dp_num_buckets(const dd_dp *dp);
dd_status dd_dp_bucket(const dd_dp *dp, size_t i, size_t *lo, size_t *hi);

/* Per-step timing, accumulated since create or the last dd_dp_stats_reset. */
typedef struct {
    uint64_t steps;          /* allreduce hook calls (optimiser steps) */
    double comm_s;           /* wall time inside communication calls of the steps (starting,
                                polling, waiting; setup and bcast excluded) */
    double exposed_s;        /* wall time from the end of backward (allreduce hook entry)
                                until every reduction of the step had completed: the
                                communication the backward pass did not hide */
    double hidden_s;         /* reduction time that overlapped the backward pass: from the
                                first bucket's start to the end of backward, capped by
                                when the last bucket completed */
    double max_exposed_s;    /* largest exposed time of one step */
    double last_comm_s;      /* the last step's comm_s */
    double last_exposed_s;   /* the last step's exposed time on this rank */
    double last_hidden_s;    /* the last step's hidden time on this rank */
    double prev_exposed_mean_s; /* the step before the last: exposed time averaged over all
                                   ranks (carried in the last step's reduction; NaN before
                                   the second step) */
    uint64_t bytes;          /* gradient bytes reduced (this rank's buffers, float32) */
    uint64_t bytes_sent;     /* bytes this rank sent for the gradients (the algorithm's
                                own count, compressed payloads with compression) */
} dd_dp_stats;

void dd_dp_stats_get(const dd_dp *dp, dd_dp_stats *st);
void dd_dp_stats_reset(dd_dp *dp);

/* The compressor (NULL for "none"), for its stats and state. Owned by dp. */
dd_compressor *dd_dp_compressor(const dd_dp *dp);

/* ------------------------------------------------------------------------------------
 * Sharded data parallelism, ZeRO stages 2 and 3 (src/parallel/zero.c): the arena is
 * partitioned over the ranks (dd_shard_partition); rank r keeps the optimiser state and
 * the gradients of its slice (zero2) and the parameters of its slice (zero3). Gradients
 * are reduce-scattered stage by stage while earlier stages are still in backward;
 * zero3 gathers each stage's parameters just before its forward and its backward (two
 * stage buffers: the next stage's gather overlaps the current stage's compute) and runs
 * evaluation on every rank together. Checkpoints are shard-neutral (gathered to rank 0),
 * so any run resumes on any number of ranks and any --shard. No compression. See
 * docs/sharding.md.
 * ------------------------------------------------------------------------------------ */

typedef struct {
    dd_shard_mode shard;    /* DD_SHARD_ZERO2 (default) or DD_SHARD_ZERO3 */
    dd_allreduce_algo algo; /* the small reduction of the loss, gradient norm and stop
                               flags (default ring) */
} dd_zero_cfg;

void dd_zero_cfg_default(dd_zero_cfg *c);
dd_status dd_zero_cfg_check(const dd_zero_cfg *c);

typedef struct dd_zero dd_zero;

/* A sharded strategy on comm (borrowed, must outlive it). Errors: DD_ERR_ARG,
 * DD_ERR_NOMEM. Caller destroys. Not a collective. */
dd_status dd_zero_create(dd_comm *comm, const dd_zero_cfg *cfg, dd_zero **out);
void dd_zero_destroy(dd_zero **z);
/* Fills *st: layout (the rank's slice), setup (same model on every rank; the stage
 * tables and buffers; zero3: the parameter source, collective evaluation), step,
 * loss_grad (the reduced gradient of the rank's slice), bcast, before_save (gathers the
 * whole parameters and optimiser state to rank 0), full_state, save ("dp" ranks and
 * "shard" mode sections, informative), load (logs a change of ranks or mode),
 * stop_agreed, epoch_stats. z must outlive the trainer. */
void dd_zero_strategy(dd_zero *z, dd_strategy *st);
int dd_zero_rank(const dd_zero *z);
int dd_zero_size(const dd_zero *z);
/* As dd_dp_set_stop_source: every rank stops after the step in which any rank's *local
 * was non-zero. */
void dd_zero_set_stop_source(dd_zero *z, const volatile int *local);

typedef struct {
    uint64_t steps;      /* optimiser steps */
    double comm_s;       /* seconds in communication calls (starting, waiting) */
    double wait_s;       /* of which waiting for a stage's gather or a buffer's reduce-scatter
                            during forward/backward (communication not hidden there) */
    double exposed_s;    /* waiting after backward (reductions still in flight, the loss
                            reduction, zero2's parameter allgather) */
    uint64_t bytes_sent; /* bytes this rank sent (the algorithms' own counts) */
} dd_zero_stats;
void dd_zero_stats_get(const dd_zero *z, dd_zero_stats *st);


/* ------------------------------------------------------------------------------------
 * Rank grids (src/parallel/grid.c): the world's N ranks as a T x P x D grid of tensor-
 * parallel (tp), pipeline (pp) and data-parallel (dp) coordinates, D = N / (T P). Ranks
 * are ordered by node (dd_comm_node_ids: the processor name) and rank, then numbered
 * along `order`, fastest dimension first (default tp, pp, dp): the ranks of one node fill
 * a tensor-parallel group, then a pipeline, so tensor and pipeline parallelism stay inside
 * a node and data parallelism goes across nodes. World rank 0 is at (0, 0, 0).
 * ------------------------------------------------------------------------------------ */
typedef struct {
    int T, P, D;         /* sizes */
    int order[3];        /* dimensions fastest first: 0 tp, 1 pp, 2 dp */
    int tp, pp, dp;      /* this rank's coordinates */
    int *coord;          /* [3 N]: every world rank's (tp, pp, dp) */
    int nodes;           /* distinct nodes */
    int tp_intra, pp_intra; /* 1: every tensor-parallel group / pipeline lies on one node */
} dd_grid;
/* "tp,pp,dp" and its permutations (fastest first). Errors: DD_ERR_ARG naming the value. */
dd_status dd_grid_parse_order(const char *s, int order[3]);
size_t dd_grid_order_name(const int order[3], char *buf, size_t cap);
/* A collective of world. Errors: DD_ERR_ARG ("--tp 2 x --pp 2 = 4 does not divide the 6
 * ranks ..."), those of dd_comm_node_ids. Free with dd_grid_free. */
dd_status dd_grid_make(dd_comm *world, int T, int P, const int order[3], dd_grid *g);
/* The world rank at (tp, pp, dp); -1 when outside the grid. */
int dd_grid_rank_of(const dd_grid *g, int tp, int pp, int dp);
/* The communicator of this rank's group along dimension dim (0 tp, 1 pp, 2 dp), ranked by
 * the coordinate on it. A collective of world. Caller frees. */
dd_status dd_grid_split(dd_comm *world, const dd_grid *g, int dim, dd_comm **out);
void dd_grid_free(dd_grid *g);

/* ------------------------------------------------------------------------------------
 * Pipeline parallelism (src/parallel/model_parallel.c): the model's stages (a DPD's, then the
 * frozen PA model's for direct learning) split into `pp` contiguous groups, balanced by
 * FLOPs (or by hand), one per pipeline rank; each global batch cut into `micro`
 * micro-batches run by a schedule (pipeline.h: gpipe, 1f1b) with non-blocking
 * point-to-point messages, every wait limited in time (DD_PP_TIMEOUT seconds, default
 * 300) and named. The world is a grid (dd_grid) of N / pp data-parallel replicas of the
 * pipeline whose gradients are summed after the schedule (dd_pp_cfg.compress: through a
 * compressor; dd_pp_cfg.shard = zero1: reduce-scattered, each replica stepping its slice
 * of the optimiser state, then allgathered). Each rank
 * keeps the parameters, gradients and optimiser state of its own stages; checkpoints are
 * shard-neutral (gathered to rank 0). See docs/parallel.md, "Pipeline parallelism".
 * ------------------------------------------------------------------------------------ */

typedef struct {
    int pp;                 /* pipeline ranks P >= 1 */
    int tp;                 /* tensor-parallel ranks T >= 1 (T P divides the world size) */
    int micro;              /* micro-batches per global batch (0: pp) */
    dd_pp_kind kind;        /* DD_PP_GPIPE or DD_PP_1F1B (default) */
    int virt;               /* virtual stages per rank (interleaved; 1) */
    const char *split;      /* "--pp-split a,b,...": stage counts per group (NULL: balanced) */
    int order[3];           /* the rank grid's order (dd_grid; default tp, pp, dp) */
    dd_allreduce_algo algo; /* the replicas' gradient allreduce and the loss reduction */
    dd_shard_mode shard;    /* DD_SHARD_NONE (default) or DD_SHARD_ZERO1: the optimiser
                               state of each rank's storage partitioned over its replicas */
    dd_compress_cfg compress; /* the replicas' gradient exchange (default "none") */
} dd_pp_cfg;

void dd_pp_cfg_default(dd_pp_cfg *c);
/* Errors: DD_ERR_ARG naming the option (as dd_pp_check_args; pp not dividing nranks). */
dd_status dd_pp_cfg_check(const dd_pp_cfg *c, int nranks);

typedef struct dd_pp dd_pp;
/* A pipeline strategy on world (borrowed; a collective: the pipeline and replica
 * communicators are split from it). Caller destroys. */
dd_status dd_pp_create(dd_comm *world, const dd_pp_cfg *cfg, dd_pp **out);
void dd_pp_destroy(dd_pp **z);
/* The rank grid of z (its coordinates, nodes, order). */
const dd_grid *dd_pp_grid(const dd_pp *z);
/* Fills *st: layout (the stage split and this rank's slice: needs the trainer's models),
 * setup (same model everywhere, the schedule and buffers, collective evaluation with each
 * stage's parameters broadcast by their owner), step, loss_grad, bcast, before_save and
 * full_state (the whole state gathered to rank 0), save ("layout", informative), load,
 * stop_agreed, epoch_stats. z must outlive the trainer. */
void dd_pp_strategy(dd_pp *z, dd_strategy *st);
void dd_pp_set_stop_source(dd_pp *z, const volatile int *local);
/* The split (known after the trainer's layout): bounds[0..P V] over the concatenated
 * stages (the trained model's, then the PA model's); *n = P V + 1. */
dd_status dd_pp_split_get(const dd_pp *z, size_t *bounds, size_t cap, size_t *n);

typedef struct {
    uint64_t steps;       /* optimiser steps */
    double step_s;        /* wall time inside the schedules (this rank) */
    double busy_s;        /* of which forward/backward compute */
    double wait_s;        /* of which waiting for a message */
    double reduce_s;      /* after the schedule: the replicas' allreduce and the loss */
    double last_step_s, last_busy_s; /* the last step's schedule and compute time */
    double epoch_bubble;  /* the last epoch's idle share, 1 - busy / schedule time,
                             averaged over every rank (epoch_stats) */
    uint64_t messages;    /* point-to-point messages sent */
    uint64_t bytes_sent;  /* their bytes */
    uint64_t dp_bytes_sent; /* bytes sent to the other replicas: the gradient exchange
                               (the compressor's wire count with --compress) and, with
                               zero1, the gather of the updated parameters */
} dd_pp_stats;
void dd_pp_stats_get(const dd_pp *z, dd_pp_stats *st);
/* The replicas' gradient compressor (--compress; NULL without one). */
dd_compressor *dd_pp_compressor(const dd_pp *z);

/* ------------------------------------------------------------------------------------
 * Tensor parallelism (src/parallel/tp.c): a group of ranks that run one model together,
 * each holding its shard (dd_model_create_tp, model.h; what each model splits and the
 * collectives per stage are in docs/models.md, "Tensor parallelism"). A dd_tp_group
 * implements the group's callbacks (dd_model_tp) on a communicator: allreduce with a
 * dd_comm_allreduce algorithm (ring by default: bit-identical results on every rank),
 * allgather with dd_comm_allgather and reduce-scatter with dd_comm_reduce_scatter
 * (ring), and counts the calls, floats and bytes of each.
 * ------------------------------------------------------------------------------------ */

typedef struct dd_tp_group dd_tp_group;

/* A group over all ranks of comm (borrowed: it must outlive the group and every model
 * made with it; for hybrid grids pass a sub-communicator, dd_comm_split). Not a
 * collective. Errors: DD_ERR_ARG (NULL), DD_ERR_NOMEM. Caller destroys. */
dd_status dd_tp_group_create(dd_comm *comm, dd_tp_group **out);
void dd_tp_group_destroy(dd_tp_group **g);
/* The allreduce algorithm of the group's allreduce callback (default DD_ALLREDUCE_RING).
 * Errors: DD_ERR_ARG (not a registered algorithm). */
dd_status dd_tp_group_set_allreduce(dd_tp_group *g, dd_allreduce_algo algo);
/* Fills *tp with the group's size, rank and callbacks (user = g), for
 * dd_model_create_tp. g must outlive every model created with it. */
void dd_tp_group_model_tp(dd_tp_group *g, dd_model_tp *tp);

/* Counters since create or the last reset. n is what the callback was given: floats
 * reduced (allreduce), floats this rank contributed (allgather), floats this rank
 * received (reduce-scatter: its block). */
typedef struct {
    uint64_t allreduce_calls, allgather_calls, reduce_scatter_calls;
    uint64_t allreduce_floats, allgather_floats, reduce_scatter_floats;
    uint64_t bytes_sent; /* bytes this rank sent (the communicator's own count) */
    double seconds;      /* wall time inside the callbacks */
} dd_tp_group_stats;
void dd_tp_group_stats_get(const dd_tp_group *g, dd_tp_group_stats *st);
void dd_tp_group_stats_reset(dd_tp_group *g);

/* ------------------------------------------------------------------------------------
 * The strategy registry (src/parallel/registry.c): how a program chooses, configures,
 * runs and reports a strategy without knowing any. A strategy is one file in
 * src/parallel defining a dd_strategy_def, plus one X(name) line in registry.c; its
 * command-line options are its own (declared here, parsed by the strategy).
 * ------------------------------------------------------------------------------------ */

/* An option of a strategy: the command line's --NAME VALUE. metavar NULL: the option is
 * declared (with its help) by an earlier strategy of the registry and accepted here too,
 * with the same meaning. */
typedef struct {
    const char *name;    /* "allreduce" */
    const char *metavar; /* "A" */
    const char *help;    /* lines separated by '\n', without indentation */
    /* optional: writes the values the option takes ("ring, tree, ...": a registry's
     * names), shown after the help; returns the length needed like snprintf */
    size_t (*choices)(char *buf, size_t cap);
} dd_strategy_opt;

#define DD_STRATEGY_MAX_ARGS 32

/* The options given (names without "--", values as typed) and the context. Values are
 * borrowed. */
typedef struct {
    size_t n;
    const char *name[DD_STRATEGY_MAX_ARGS];
    const char *value[DD_STRATEGY_MAX_ARGS];
    int nranks;          /* processes in the run */
    const char *out;     /* the run directory (--out, or --resume's), NULL when not given */
    const char *resume;  /* the run directory being resumed, NULL for a new run */
    /* filled by dd_strategy_args_resume: options a strategy took from the run directory
     * (e.g. the compressor recorded in last.ckpt), kept here */
    char recorded[4][512];
    size_t nrecorded;
} dd_strategy_args;

/* The value of --name (the last one given), NULL when not given. */
const char *dd_strategy_arg(const dd_strategy_args *a, const char *name);
/* Adds (or replaces) --name value. Errors: DD_ERR_ARG (more than DD_STRATEGY_MAX_ARGS). */
dd_status dd_strategy_arg_set(dd_strategy_args *a, const char *name, const char *value);

/* Per-step times of the last step, for RUN/dp_steps.csv (NaN where a strategy has no
 * such figure). */
typedef struct {
    double comm_s;              /* in communication calls */
    double exposed_s;           /* waiting for communication that compute did not hide */
    double hidden_s;            /* communication that overlapped compute */
    double prev_exposed_mean_s; /* the step before: exposed time averaged over the ranks */
} dd_strategy_step_times;

struct cJSON; /* cJSON's object type (report) */

typedef struct dd_strategy_def {
    const char *name;    /* registry name: "dp", "zero" */
    const char *title;   /* for people and parallel.json "strategy" */
    const char *when;    /* for people: the options that choose it */
    const dd_strategy_opt *opts; /* its options, ended by an entry with name NULL */
    /* Its priority for these options: 0 does not run them; the strategy with the highest
     * runs (none: one process without a strategy). No errors: invalid values are
     * check's. */
    int (*claims)(const dd_strategy_args *a);
    /* Optional, before claims on --resume: adds to a (dd_strategy_arg_set, values kept
     * in a->recorded) the options the run recorded that were not given again. */
    dd_status (*resume_args)(dd_strategy_args *a);
    /* Validates the options without communicating (it sees every option given, also
     * those it does not take, and may refuse one with a reason). Errors: DD_ERR_ARG
     * naming the option (a usage error). */
    dd_status (*check)(const dd_strategy_args *a);
    /* Creates the strategy on comm (borrowed, must outlive it); not a collective. */
    dd_status (*create)(dd_comm *comm, const dd_strategy_args *a, void **self);
    void (*destroy)(void *self);
    /* Fills *st for the trainer (self must outlive the trainer). */
    void (*strategy)(void *self, dd_strategy *st);
    /* Every rank stops after the step in which any rank's *local was non-zero. */
    void (*set_stop_source)(void *self, const volatile int *local);
    /* Optional: the last step's times. */
    void (*last_step)(const void *self, dd_strategy_step_times *t);
    /* Optional: its fields of RUN/parallel.json (rank 0, after training). */
    dd_status (*report)(const void *self, struct cJSON *parallel_json);
    /* Optional: lines for people after training (rank 0), each starting with the label
     * column ("parallel:   ..."), and after each epoch (steps: of the epoch, rank 0). */
    void (*print_summary)(const void *self, FILE *f);
    void (*print_epoch)(const void *self, const dd_epoch_record *rec, uint64_t steps, FILE *f);
    /* Optional: lines describing the layout once the trainer is set up (rank 0, before
     * the first step's progress), e.g. a pipeline's split. */
    void (*describe)(const void *self, FILE *f);
    /* Optional: strategies whose processes do not all run dd_train_run (a parameter
     * server's workers pull, compute and push in a loop of their own while a
     * coordinator runs dd_train_run). Called after create, before the run directory is
     * touched: *drove = 1 when this process trained with its own loop (the caller then
     * neither locks nor writes the run directory), 0 when it should run dd_train_run
     * with the strategy as usual. cfg: the parsed configuration (NULL on --resume);
     * data / pa_run as given (may be NULL); stop: the signal flag. */
    dd_status (*drive)(void *self, const dd_train_cfg *cfg, const char *data, const char *pa_run,
                       const volatile int *stop, int *drove);
} dd_strategy_def;

/* The registry, in the order of the command line's help. */
const dd_strategy_def *const *dd_strategy_registry(size_t *n);
/* By name; NULL (DD_ERR_ARG set) when unknown. */
const dd_strategy_def *dd_strategy_find(const char *name);
/* Whether some strategy declares --name (for the command line's option table). */
int dd_strategy_opt_known(const char *name);
/* On --resume (a->resume set): every strategy's resume_args. */
dd_status dd_strategy_args_resume(dd_strategy_args *a);
/* The strategy that claims a (NULL: one process, and then no option may be given), after
 * its check and checking that it takes every option given (DD_ERR_ARG naming the first
 * it does not take and the strategy chosen). */
dd_status dd_strategy_choose(const dd_strategy_args *a, const dd_strategy_def **out);

/* A running strategy chosen from the registry: its definition, instance and dd_strategy. */
typedef struct {
    const dd_strategy_def *def;
    void *self;
    dd_strategy st;
} dd_strategy_run;
/* def->create then def->strategy. */
dd_status dd_strategy_start(const dd_strategy_def *def, dd_comm *comm, const dd_strategy_args *a,
                            dd_strategy_run *out);
void dd_strategy_stop(dd_strategy_run *r);

#ifdef __cplusplus
}
#endif
#endif
