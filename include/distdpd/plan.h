/* distdpd planning at scale: an alpha-beta-gamma cost model of the allreduce algorithms
 * of comm.h, link presets, a data-parallel step model with bucketed overlap, the
 * scaling table at 8..4096 ranks with a recommendation, the calibration of alpha,
 * beta and gamma by measurement on the machine it runs on (stored as JSON), and the
 * memory per rank and communication per step of the sharding modes (ZeRO) for a model.
 * Formulas and preset sources: docs/comm.md, docs/sharding.md (Planning).
 *
 * Units: seconds, bytes. alpha = seconds per message, beta = seconds per byte on the
 * link, gamma = seconds per byte of float32 summed locally. */
#ifndef DISTDPD_PLAN_H
#define DISTDPD_PLAN_H

#include <stddef.h>

#include "distdpd/comm.h"
#include "distdpd/core.h"
#include "distdpd/model.h"
#include "distdpd/optim.h"
#include "distdpd/parallel.h"
#include "distdpd/pipeline.h"
#include "distdpd/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One link (or the calibrated machine). Two kinds of steps: an exchange, where every
 * active rank sends and receives at once (ring, rhd), and a one-way transfer, where a
 * rank only sends or only receives (binomial tree, broadcast, rhd's fold-in). On a
 * full-duplex network both cost the same; through shared memory an exchange makes two
 * copies compete for the same cores and memory, and costs about twice as much per byte
 * (measured here: docs/comm.md). */
typedef struct {
    double alpha;  /* s per message of an exchange step, >= 0 */
    double beta;   /* s per byte of an exchange step, >= 0 */
    double gamma;  /* s per byte reduced (float32 add), >= 0 */
    double alpha1; /* s per message of a one-way transfer, >= 0 */
    double beta1;  /* s per byte of a one-way transfer, >= 0 */
} dd_link;

/* Link presets: "ethernet-10g", "ethernet-100g", "infiniband-hdr", "nvlink", "shm"
 * (shared memory inside a node). DD_ERR_ARG naming the choices for another name. */
dd_status dd_plan_link_preset(const char *name, dd_link *out);
/* The preset names, NULL-terminated. */
const char *const *dd_plan_link_names(void);
/* One line: where a preset's numbers come from ("" for an unknown name). */
const char *dd_plan_link_source(const char *name);

/* Modelled time of one allreduce of `bytes` bytes over p >= 1 ranks: the cost model of
 * algorithm a's registry entry (src/comm/ar_*.c; docs/comm.md, "Cost model").
 * inter: the link between ranks (between nodes for HIER). intra and ranks_per_node
 * (>= 1) are used by HIER only: reduce and broadcast inside each node of ranks_per_node
 * ranks on `intra`, ring across ceil(p / ranks_per_node) leaders on `inter`; intra may
 * be NULL for other algorithms. MPI is modelled as the fastest of ring, tree and rhd
 * (the MPI library's tuned choice, assumed near-optimal). Returns 0 for p == 1 or
 * bytes == 0; a negative value for invalid input (an unknown algorithm among it). */
double dd_plan_allreduce_time(dd_allreduce_algo a, const dd_link *inter, const dd_link *intra,
                              int ranks_per_node, int p, double bytes);

/* ---- data-parallel step model ------------------------------------------------------ */

typedef struct {
    double params;         /* parameters (float32 gradient elements), >= 1 */
    int ranks;             /* target rank count for the recommendation, >= 1 */
    dd_link link;          /* link between nodes */
    dd_link intra;         /* link inside a node (HIER) */
    int ranks_per_node;    /* ranks per node, >= 1 (HIER; default 8) */
    double compute_s;      /* forward + backward time per step and rank, > 0 */
    double backward_frac;  /* part of compute_s in the backward pass (overlap window),
                              in [0, 1]; default 2/3 */
    double bucket_bytes;   /* gradient bucket size; 0: choose the best of a candidate
                              list (64 KB .. 64 MB and "one bucket") */
    int overlap;           /* 1: bucket reductions overlap the backward pass; 0: one
                              allreduce after backward */
} dd_plan_cfg;

/* Defaults: ranks 64, ethernet-10g between nodes, shm inside, 8 ranks per node,
 * backward_frac 2/3, bucket 0 (auto), overlap 1; params and compute_s 0 (must be set). */
void dd_plan_cfg_default(dd_plan_cfg *cfg);

/* Exposed (non-hidden) communication time of one step with algorithm a at p ranks and
 * bucket size bucket_bytes (> 0): gradients become final uniformly during the
 * backward pass in buckets, bucket k's reduction starts when it is final and the link
 * is free; what runs past the end of backward is exposed. Without overlap the whole
 * allreduce is exposed. */
double dd_plan_exposed_comm(const dd_plan_cfg *cfg, dd_allreduce_algo a, int p,
                            double bucket_bytes);

#define DD_PLAN_MAX_ROWS 16

/* One rank count of the scaling table: entry a (0 .. dd_allreduce_count() - 1) for every
 * registered algorithm. */
typedef struct {
    int ranks;                                  /* p */
    double allreduce_s[DD_ALLREDUCE_MAX];       /* one allreduce of all gradients */
    double efficiency[DD_ALLREDUCE_MAX];        /* compute / (compute + exposed comm), at
                                                   each algorithm's best bucket size */
    double bucket_bytes[DD_ALLREDUCE_MAX];      /* that bucket size */
    int best;                                   /* algorithm with the highest efficiency
                                                   (of those modelled in their own right:
                                                   not mpi, whose model is another's) */
} dd_plan_row;

typedef struct {
    dd_plan_cfg cfg;             /* the inputs (bucket_bytes as given) */
    double grad_bytes;           /* 4 * params */
    int nrows;                   /* rows: 8, 16, ..., 4096, plus cfg.ranks if not among them */
    dd_plan_row rows[DD_PLAN_MAX_ROWS];
    int target_row;              /* index of the row with cfg.ranks */
    /* recommendation at cfg.ranks */
    int algo;                    /* best algorithm */
    double bucket_bytes;         /* its bucket size */
    double efficiency;           /* its efficiency */
    double step_s;               /* compute + exposed comm */
    int latency_bound;           /* 1 if the alpha terms are most of its allreduce time */
    double compression_ratio;    /* smallest ratio in 2, 4, ..., 1024 that lifts
                                    efficiency to >= 0.9 (gradient bytes / ratio); 1 if
                                    already >= 0.9; 0 if no ratio reaches 0.9 */
    int max_ranks_90;            /* largest table rank count with efficiency >= 0.9 (0: none) */
    int max_ranks_50;            /* likewise >= 0.5 */
} dd_plan_result;

/* Fills the table and the recommendation. DD_ERR_ARG naming the field for invalid
 * inputs (params < 1, compute_s <= 0 or not finite, ranks < 1, negative link values...). */
dd_status dd_plan_run(const dd_plan_cfg *cfg, dd_plan_result *out);

/* The result as a JSON document (with link names given by the caller, may be NULL).
 * *json is allocated; caller frees with free(). */
dd_status dd_plan_json(const dd_plan_result *r, const char *link_name, const char *intra_name,
                       char **json);

/* ---- calibration ------------------------------------------------------------------- */

#define DD_CALIB_MAX_POINTS 16

typedef struct {
    dd_link link;       /* fitted alpha, beta, alpha1, beta1 and measured gamma */
    double latency_s;   /* time of an 8-byte exchange step (small-message latency) */
    int ranks;          /* ranks the measurement ran on (>= 2) */
    double fit_rel_rms; /* relative RMS error of the alpha-beta fit over the points */
    double fit1_rel_rms; /* likewise for the one-way fit */
    double fit_min_bytes; /* the fits use the points of at least this size */
    int npoints;        /* measured message sizes */
    double bytes[DD_CALIB_MAX_POINTS];    /* message size of each point */
    double seconds[DD_CALIB_MAX_POINTS];  /* time of one exchange step */
    double seconds1[DD_CALIB_MAX_POINTS]; /* time of one one-way transfer */
    char host[64];      /* host name of rank 0 */
    char date[32];      /* UTC time of the measurement, ISO 8601 */
} dd_plan_calib;

/* Measures on c (collective, size >= 2), at 8 B .. 4 MB: steps chained 4 at a time
 * after a barrier (each timed chain right after an untimed one of the same size and
 * kind), repeats interleaved over sizes, the maximum over ranks of each repeat,
 * then the lower quartile over repeats (timing noise from other jobs is one-sided).
 *  - exchange step: every rank sends n bytes to its right neighbour while receiving n
 *    from its left, then sums the received float32 data into another buffer (as every
 *    ring and rhd step does): alpha, beta, and gamma from the timed sums;
 *  - one-way transfer: ranks paired (0,1), (2,3), ... ping-pong n bytes (as the steps of
 *    a binomial tree): alpha1, beta1.
 * Fits t = alpha + n beta by least squares on relative error over the points >= 16 KB
 * (smaller messages go eagerly, with another latency, reported as latency_s) and
 * gamma n through the origin likewise. reps_scale (> 0, default 1) scales the repeat
 * counts. Every rank gets the same result. DD_ERR_ARG if size < 2 ("needs at least 2
 * ranks: run under mpirun -np 2 or more"). */
dd_status dd_plan_calibrate(dd_comm *c, double reps_scale, dd_plan_calib *out);

/* Writes / reads the calibration JSON file (docs/comm.md). Load: DD_ERR_IO if the file
 * cannot be read, DD_ERR_FORMAT naming the file and field if it is malformed. */
dd_status dd_plan_calib_save(const dd_plan_calib *cal, const char *path);
dd_status dd_plan_calib_load(const char *path, dd_plan_calib *out);

/* Measured time of blocking float32 allreduces: for every algorithm algos[a] (nalgo of
 * them) and size bytes[i] (nsizes), the lower quartile over `reps` repeats (>= 1, after one
 * warm-up) of the maximum over ranks, each repeat right after an untimed call of the same
 * algorithm and size (as one gradient bucket's allreduce follows another's), started
 * together (barrier) on a buffer refilled before it (as fresh gradients are). Repeats are interleaved over
 * algorithms and sizes, so that a burst of background load does not hit one entry
 * only. seconds[a * nsizes + i] receives the result on every rank. Collective. */
dd_status dd_plan_measure(dd_comm *c, const dd_allreduce_algo *algos, int nalgo,
                          const size_t *bytes, int nsizes, int reps, double *seconds);

/* ---- sharded data parallelism: memory and communication per rank (plan_shard.c) ---- */

/* What a run of `mpirun -np ranks distdpd train-pa|train-dpd --shard MODE` allocates and
 * communicates, predicted from the code's own sizes: the model's parameter table (arena
 * padding included), its stages, dd_model_workspace_size, dd_shard_partition and the
 * trainer's and strategies' buffers (docs/sharding.md, "Planning"). Start from
 * dd_plan_shard_cfg_default(). */
typedef struct {
    const dd_model *model;     /* the model trained (required) */
    const dd_model *pa;        /* the frozen PA model of a DPD task (dla, ila), else NULL */
    dd_train_task task;        /* DD_TRAIN_PA (default), DD_TRAIN_DLA or DD_TRAIN_ILA */
    dd_optim_kind opt;         /* optimiser (default adamw): adamw and adam keep 2 state
                                  arrays, sgd with momentum 1, plain sgd none */
    double momentum;           /* sgd only (default 0) */
    size_t batch;              /* global batch in frames, [1, 2^20] (default 64) */
    size_t frame;              /* frame length in samples, [1, 2^20] (default 200);
                                  frame * batch <= 2^28 */
    size_t frames;             /* training frames in the data set (0, the default: at least
                                  batch); a global batch never holds more */
    size_t eval_batch;         /* evaluation segments per forward, [1, 4096] (default 16) */
    size_t nperseg;            /* evaluation segment length, [1, 2^20] (default 2560) */
    size_t eval_segments;      /* segments of the larger of the validation and test splits
                                  (0, the default: at least eval_batch; evaluation buffers
                                  hold min(eval_batch, eval_segments) segments) */
    int ranks;                 /* P, [1, 2^24] */
    dd_shard_mode shard;       /* none (default), zero1, zero2, zero3 */
    dd_allreduce_algo algo;    /* --allreduce of none/zero1 and of the small reductions
                                  (default ring) */
    double bucket_mb;          /* none/zero1 gradient buckets in MiB as dd_dp_cfg.bucket_mb
                                  (default 4; 0: one allreduce after backward) */
    dd_link link;              /* between ranks (default ethernet-10g) */
    dd_link intra;             /* inside a node, for hier (default shm) */
    int ranks_per_node;        /* for hier (default 8) */
} dd_plan_shard_cfg;

void dd_plan_shard_cfg_default(dd_plan_shard_cfg *cfg);

/* Arena bytes rank `rank` (0 <= rank < ranks) allocates, per dd_mem_kind, as
 * dd_mem_stats counts them after the trainer and the strategy are set up (they stay so
 * through every step). Errors: DD_ERR_ARG naming the field. */
dd_status dd_plan_shard_memory(const dd_plan_shard_cfg *cfg, int rank, size_t bytes[DD_MEM_KINDS]);

typedef struct {
    dd_shard_mode shard;
    int ranks;
    size_t floats;             /* parameter arena length n (padding included) */
    size_t params;             /* parameters (no padding) */
    size_t stages;             /* the model's stages */
    size_t stage_max;          /* floats of the largest stage */
    size_t slice;              /* floats of rank 0's slice (the largest; n when unsharded) */
    size_t batch_per_rank;     /* frames of the largest slice of a global batch */
    size_t eval_batch;         /* segments of the evaluation buffers (0: none) */
    /* memory: rank 0's, the largest of every kind (it has the first, never shorter,
       slice and the evaluation buffers) */
    size_t mem[DD_MEM_KINDS];  /* bytes per kind */
    size_t mem_total;          /* their sum */
    size_t report_bytes;       /* zero3: the whole parameter arena rank 0 allocates after
                                  training for report.html (kind params, while the slice
                                  is still held: the run's peak params are mem[params] +
                                  this); 0 for the other modes */
    /* communication per optimiser step; at one rank nothing is communicated (all 0) */
    int collectives;           /* collective calls per step (every rank makes the same) */
    size_t buckets;            /* none/zero1: gradient allreduces (buckets) per step */
    double grad_bytes;         /* bytes a rank sends, averaged over the ranks, for the
                                  gradients: allreduce 2(P-1)/P, reduce-scatter (P-1)/P of
                                  4 n */
    double gather_bytes;       /* likewise for the parameter allgathers: (P-1)/P of the
                                  bytes gathered */
    double small_bytes;        /* likewise for the reduction of the loss, norm and flags */
    double bytes_sent;         /* their sum */
    double messages;           /* latency steps (alpha terms) a rank goes through */
    double time_s;             /* modelled time of the step's collectives one after
                                  another (an upper bound on the exposed time: bucket
                                  allreduces, reduce-scatters and zero3's gathers overlap
                                  compute) */
} dd_plan_shard_result;

/* Memory and communication of one mode at cfg->ranks. Errors: DD_ERR_ARG naming the
 * field (no model, a DPD task without its PA model, ranges above). */
dd_status dd_plan_shard_run(const dd_plan_shard_cfg *cfg, dd_plan_shard_result *out);

/* Results of dd_plan_shard_run with cfg (any mix of modes and rank counts) as a JSON
 * document: {"inputs": {...}, "rows": [{"ranks", "shard", "memory_bytes": {"params",
 * "grads", "optim", "activations", "total"}, "memory_ratio_to_none", "comm_per_step":
 * {...}}, ...]}; the ratios are to mode none at the row's rank count. link_name may be
 * NULL. *json is allocated; caller frees with free(). */
dd_status dd_plan_shard_json(const dd_plan_shard_cfg *cfg, const dd_plan_shard_result *rows, size_t nrows,
                             const char *link_name, char **json);


/* ---- model parallelism: ranking the layouts of a cluster (plan_mp.c) ----------------
 * Which (tp, pp, dp, shard) layout of a cluster's ranks trains a model fastest while each
 * rank's arenas fit its memory: the memory of every layout from the sizes the code
 * allocates (the model-parallel strategy, src/parallel/pipeline.c; plain and sharded data
 * parallelism through dd_plan_shard_*), its step time from the model's stage FLOPs and a
 * compute speed, the pipeline schedule run over per-stage costs and message delays, the
 * tensor-parallel collectives counted by running the shard once, and the alpha-beta
 * model of the replicas' gradient allreduce. Formulas: docs/comm.md ("Model-parallel
 * plan"). */

/* A cluster (the --cluster FILE of `distdpd plan`, docs/comm.md "Cluster file"). */
typedef struct {
    int nodes;             /* >= 1 */
    int ranks_per_node;    /* >= 1; ranks fill nodes in order (mpirun's default mapping) */
    dd_link intra;         /* link between two ranks of a node */
    dd_link inter;         /* link between nodes (each node's share: see docs) */
    char intra_name[96];   /* preset name, "measured (FILE)" or "given" */
    char inter_name[96];
    double memory_bytes;   /* arena budget per rank (memory_mib x 2^20; what train-pa's
                              --mem-limit-mb enforces); 0: no limit */
    double gflops;         /* sustained GFLOP/s of one rank for forward + backward; 0: not given */
} dd_plan_cluster;

/* Parses a cluster file's text; `path` names it in messages and anchors relative
 * calibration paths. Errors DD_ERR_FORMAT "PATH: ..." naming the field and what is wrong
 * (docs/comm.md lists them), DD_ERR_IO for a calibration file that cannot be read. */
dd_status dd_plan_cluster_parse(const char *text, const char *path, dd_plan_cluster *out);
/* Reads and parses the file. Errors: DD_ERR_IO "PATH: cannot open: ...", those of parse. */
dd_status dd_plan_cluster_load(const char *path, dd_plan_cluster *out);

typedef struct {
    const char *model;         /* registry name of the trained model (required: the planner
                                  creates its tensor-parallel shards) */
    dd_model_cfg model_cfg;    /* its options */
    const dd_model *pa;        /* the frozen PA model of task dla, else NULL */
    dd_train_task task;        /* DD_TRAIN_PA (default) or DD_TRAIN_DLA */
    dd_optim_kind opt;         /* default adamw */
    double momentum;           /* sgd only */
    size_t batch, frame;       /* global batch (frames) and frame length (default 64, 200) */
    size_t frames;             /* training frames (0: at least batch) */
    size_t eval_batch, nperseg, eval_segments; /* as dd_plan_shard_cfg (16, 2560, 0) */
    int micro;                 /* micro-batches M; 0: pp (train-pa's default); -1: auto
                                  (the fastest of pp x 1, 2, 4, 8 that fits; a smaller M
                                  within 2 % of it wins) */
    dd_pp_kind schedule;       /* default 1f1b */
    int virt;                  /* virtual stages per rank (interleaved; default 1) */
    dd_allreduce_algo algo;    /* --allreduce of every layout (default ring) */
    double bucket_mb;          /* plain data parallelism's buckets (MiB, default 4) */
    dd_plan_cluster cluster;   /* nodes, links, memory, gflops (> 0 required) */
} dd_plan_mp_cfg;

void dd_plan_mp_cfg_default(dd_plan_mp_cfg *cfg);

/* Collectives of one tensor-parallel shard per stage pass (dd_plan_tp_counts). */
typedef struct {
    double allreduce_calls, allreduce_floats;           /* floats summed over the calls */
    double allgather_calls, allgather_floats;           /* floats each rank sends, summed */
    double reduce_scatter_calls, reduce_scatter_floats; /* floats of a rank's block, summed */
} dd_plan_tp_calls;

/* The collectives rank 0 of a tp-rank shard of model `model` makes in each stage's
 * forward (fwd[s]) and backward (bwd[s]) for B frames of T samples, counted by running
 * the shard with callbacks that only count (stage by stage, zero parameters; the input
 * gradient wanted for every stage but the first, as in training). The run is made at
 * B = 1 and three short lengths and extrapolated (counts affine in T, floats linear in B:
 * checked, else it runs at length T). fwd and bwd have room for cap stages; *nstages
 * receives the model's stage count. Errors: those of dd_model_create_tp, DD_ERR_ARG
 * (cap too small, tp < 1, B or T < 1), DD_ERR_NOMEM. */
dd_status dd_plan_tp_counts(const char *model, const dd_model_cfg *cfg, int tp, int B, int T, dd_plan_tp_calls *fwd,
                            dd_plan_tp_calls *bwd, size_t cap, size_t *nstages);

/* Arena bytes world rank `rank` allocates per dd_mem_kind under the model-parallel
 * strategy (train-pa --tp tp --pp pp --micro micro, ranks = nodes x ranks_per_node, grid
 * order tp,pp,dp), as dd_mem_stats counts them once the trainer is set up; micro 0 = pp.
 * *eval_params (may be NULL) receives the parameter bytes its first evaluation adds (the
 * buffer that receives another pipeline rank's stage; 0 when pp = 1). Errors: DD_ERR_ARG
 * naming the field (tp x pp not dividing the ranks, ...), those of the shard. */
dd_status dd_plan_mp_memory(const dd_plan_mp_cfg *cfg, int tp, int pp, int micro, int rank,
                            size_t bytes[DD_MEM_KINDS], size_t *eval_params);

/* One layout, predicted. Times are per optimiser step; step_s = compute_s + tp_s +
 * bubble_s + msg_s + dp_s + small_s. */
typedef struct {
    int tp, pp, dp;            /* grid: T x P x D = the cluster's ranks */
    int micro;                 /* M (0 for plain data parallelism) */
    int virt;
    dd_shard_mode shard;       /* none unless tp = pp = 1 */
    const char *strategy;      /* "single", "dp", "zero" or "model-parallel" */
    size_t mem[DD_MEM_KINDS];  /* arena bytes per kind of the largest rank, after set-up */
    size_t mem_total;          /* their sum */
    size_t mem_peak;           /* + what evaluation (a pipeline stage's parameters) or
                                  zero3's report adds later: what must fit */
    int mem_rank;              /* that rank */
    size_t rank_params;        /* parameter floats it holds */
    int fits;                  /* mem_peak <= the cluster's memory (1 without a limit) */
    double step_s;
    double compute_s;          /* forward + backward FLOPs / speed, the busiest rank */
    double tp_s;               /* its tensor-parallel collectives */
    double bubble_s;           /* pipeline idle time on the critical path */
    double msg_s;              /* pipeline messages on the critical path */
    double dp_s;               /* the replicas' gradient communication not hidden */
    double small_s;            /* the loss / norm / stop-flag reduction */
    double bubble;             /* mean idle share of the schedule (0 without a pipeline) */
    double bubble_formula;     /* dd_pp_bubble_formula (0 without a pipeline) */
    double tp_calls, tp_bytes; /* tensor-parallel calls and bytes a rank sends per step */
    double msg_bytes;          /* pipeline bytes rank 0 sends per step (activations and
                                  gradients; parallel.json's rank0_bytes_sent_per_step) */
    double dp_bytes;           /* gradient bytes reduced per rank and step */
    int tp_inter, pp_inter, dp_inter; /* 1: groups of that dimension span nodes */
    int rank;                  /* place in the ranking (1 = best); 0: does not fit */
} dd_plan_mp_layout;

typedef struct {
    dd_plan_mp_cfg cfg;        /* the inputs (pointers borrowed) */
    int ranks;                 /* nodes x ranks_per_node */
    size_t params, floats, stages; /* the whole model's */
    double flops_sample;       /* forward + backward FLOPs per sample (DPD + PA for dla) */
    dd_plan_mp_layout *rows;   /* fitting layouts by step time, then the others by memory */
    size_t nrows;
    int best;                  /* index of the best row; -1: none fits */
    int nskipped;              /* layouts not planned, and why (first 8 reasons) */
    char skipped[8][192];
} dd_plan_mp_result;

/* One layout (shard: plain data parallelism only; micro -1: auto, 0: pp). Errors:
 * DD_ERR_ARG naming what makes the layout impossible, those of the shard. */
dd_status dd_plan_mp_layout_eval(const dd_plan_mp_cfg *cfg, int tp, int pp, int micro, dd_shard_mode shard,
                                 dd_plan_mp_layout *out);
/* Every layout of the cluster's ranks, ranked. Free with dd_plan_mp_result_free. Errors:
 * DD_ERR_ARG naming the field, DD_ERR_NOMEM. */
dd_status dd_plan_mp_run(const dd_plan_mp_cfg *cfg, dd_plan_mp_result *out);
void dd_plan_mp_result_free(dd_plan_mp_result *r);
/* Why the best layout wins, as lines of text ("best: ...", "why: ..."); snprintf
 * semantics. */
size_t dd_plan_mp_explain(const dd_plan_mp_result *r, char *buf, size_t cap);
/* {"inputs", "cluster", "layouts": [...], "best", "explanation"}; caller frees. */
dd_status dd_plan_mp_json(const dd_plan_mp_result *r, char **json);

/* Times forward + backward of model m over B frames of T samples on this process (random
 * parameters and data; one warm-up, then the median of reps >= 1 passes) and returns the
 * seconds of one pass and the sustained GFLOP/s (the stages' FLOPs per sample x B T /
 * seconds). Errors: DD_ERR_ARG, DD_ERR_NOMEM (the workspace). */
dd_status dd_plan_measure_compute(const dd_model *m, int B, int T, int reps, double *seconds, double *gflops);

/* ---- parameter-server step model (docs/ps.md, "Throughput") ---------------------- */

/* One synchronous step of parameter-server training (src/parallel/ps_train.c, every
 * worker pushes its gradient of M = 4 P bytes, then pulls the M bytes of weights; the
 * blocks are spread evenly over k servers, so each server receives n M / k bytes of
 * pushes and sends n M / k bytes of pulls per step). One-way transfers (alpha1, beta1 of
 * the link), full duplex:
 *   push = 2 alpha1 + max(M, (n M / k)(1 + R f)) beta1   (+ 2 alpha1 if R > 0)
 *   pull = 2 alpha1 + max(M, n M / k) beta1
 * (request and reply: two one-way latencies each; with R replicas a primary sends every
 * pushed block's state, f floats per parameter, to R successors and waits for their
 * acknowledgement, and receives as much from the servers it is a replica for). With
 * alpha = 0 and R = 0: step = 2 max(M/B, n M/(k B)), the max(M/B, nM/(kB)) per
 * direction. */
typedef struct {
    double params;      /* P >= 1 (float32 elements) */
    int workers;        /* n >= 1 */
    int servers;        /* k >= 1 */
    int replicas;       /* R in [0, k - 1] */
    double repl_floats; /* f: floats per parameter a replication message carries: values +
                           optimiser state (sgd 1, sgd with momentum 2, adam/adamw 3); >= 1 */
    dd_link link;       /* its alpha1, beta1 */
    double compute_s;   /* a worker's forward + backward per step (>= 0; 0: comm only) */
} dd_plan_ps_cfg;

typedef struct {
    double model_bytes;      /* M = 4 P */
    double worker_s;         /* M beta1: a worker's link, one direction */
    double server_push_s;    /* (n M / k)(1 + R f) beta1: a server's link during pushes */
    double server_pull_s;    /* (n M / k) beta1 */
    double latency_s;        /* the alpha1 terms of a step: 4 alpha1 (+ 2 alpha1 if R > 0) */
    double push_s, pull_s;   /* as above */
    double comm_s;           /* push + pull */
    double step_s;           /* compute + comm (no overlap: a worker pushes after its backward) */
    int server_bound;        /* 1 if a server's link is the bottleneck (n (1 + R f) > k) */
    double pushes_per_s_server; /* push messages each server receives per second: n / step */
    double worker_bytes_step;   /* bytes a worker sends + receives per step: 2 M */
    double server_bytes_step;   /* bytes a server sends + receives per step:
                                   2 n M / k + 2 R f n M / k (replication out and in) */
} dd_plan_ps_result;

/* DD_ERR_ARG naming the field for invalid inputs. */
dd_status dd_plan_ps(const dd_plan_ps_cfg *cfg, dd_plan_ps_result *out);

#ifdef __cplusplus
}
#endif
#endif
