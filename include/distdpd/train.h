/* Training engine: the model-agnostic trainer for PA behavioural modelling and DPD
 * (direct learning through a frozen PA model, and indirect learning with a post-inverse),
 * its frame sampler, checkpoints with exact resume, the run directory (configuration,
 * per-epoch metrics, checkpoints, HTML report) and the simulated-PA sidecar that lets a
 * DPD be measured on the true simulated PA.
 *
 * Data: frames of length F cut with stride S from the training split, as OpenDPD does,
 * but by index: frame i is the window [i*S, i*S + F) of the split array and is copied
 * into the (B, F, 2) batch buffer only when its batch is processed. The order of the
 * frames in epoch e is a pseudo-random permutation that depends on (seed, e) only: a
 * keyed Feistel bijection of the frame index (dd_sampler_index), so any rank can compute
 * the position of any sample without materialising the permutation, and results do not
 * depend on the number of ranks. Global batch b of an epoch is the positions
 * [b*B, min((b+1)*B, N)) (the last partial batch is kept, as a PyTorch DataLoader
 * without drop_last); with p ranks, rank r takes a contiguous slice of it
 * (dd_batch_slice) and the loss is normalised by the GLOBAL batch element count, so the
 * summed gradients equal the single-process ones up to rounding.
 *
 * Loss: MSE over all outputs (mean over B*F*2 values, torch's nn.MSELoss), every frame
 * starting from zero state. Evaluation: the validation and test splits are cut into
 * spec.nperseg-long segments (the last zero-padded), each run from zero state, and the
 * outputs compared with dd_metrics_compute (segmented NMSE, OpenDPD ACLR, spectral EVM)
 * exactly as OpenDPD evaluates. Formulas, defaults and formats: docs/training.md.
 *
 * Everything here runs in one process; a strategy (dd_strategy, below) decides which
 * frames this process computes and how gradients and parameters are combined, without
 * touching models or this code. This module never includes mpi.h.
 */
#ifndef DISTDPD_TRAIN_H
#define DISTDPD_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/ckpt.h"
#include "distdpd/core.h"
#include "distdpd/dataset.h"
#include "distdpd/metrics.h"
#include "distdpd/model.h"
#include "distdpd/optim.h"
#include "distdpd/pa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------
 * Framing and sampling
 * ------------------------------------------------------------------------------------ */

/* Frames [i*stride, i*stride + len) of a split of n samples, i = 0..count-1. */
typedef struct {
    size_t n;      /* samples in the split */
    size_t len;    /* frame length F, >= 1 */
    size_t stride; /* frame stride S, >= 1 */
    size_t count;  /* floor((n - F) / S) + 1 frames (0 when n < F) */
} dd_framing;

/* Fills f. Errors: DD_ERR_ARG (len or stride 0). n < len gives count 0 (not an error). */
dd_status dd_framing_init(dd_framing *f, size_t n, size_t len, size_t stride);

/* Copies the frames idx[0..B-1] (each < f->count) of the split x into out, laid out
 * (B, F, 2) as interleaved I, Q floats, each value multiplied by scale (1 = plain copy).
 * One copy of B*F samples; nothing else is read or allocated. */
void dd_framing_gather(const dd_framing *f, const dd_cf32 *x, const uint64_t *idx, size_t B,
                       float scale, float *out);

/* The epoch permutation of n items. Plain data. */
typedef struct {
    uint64_t n;       /* items (frames), >= 1 */
    uint64_t seed;    /* shuffling seed */
    int shuffle;      /* 0: identity order (perm(i) = i) */
    int half_bits;    /* Feistel half width h: 4^h >= n (internal) */
} dd_sampler;

/* Errors: DD_ERR_ARG (n == 0). */
dd_status dd_sampler_init(dd_sampler *s, uint64_t n, uint64_t seed, int shuffle);

/* The item at position i (< n) of epoch `epoch`: perm_{seed,epoch}(i), a bijection of
 * [0, n) (6-round Feistel network keyed by dd_hash64(seed, epoch), cycle-walking into
 * [0, n)). O(1) expected time, no memory. */
uint64_t dd_sampler_index(const dd_sampler *s, uint64_t epoch, uint64_t i);

/* Global batches per epoch: ceil(n / B). */
uint64_t dd_sampler_num_batches(uint64_t n, uint64_t B);

/* Global batch b (< ceil(n/B)) covers positions [b*B, min((b+1)*B, n)); *global
 * receives its size. Rank r (0 <= r < p) of p takes the contiguous slice
 * [*lo, *hi) of those positions, lo = b*B + floor(r*size/p) (slices of all ranks are
 * disjoint and cover the batch; a slice may be empty when size < p). */
void dd_batch_slice(uint64_t n, uint64_t B, uint64_t b, int rank, int nranks, uint64_t *lo,
                    uint64_t *hi, uint64_t *global);

/* ------------------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------------------ */

typedef enum {
    DD_TRAIN_PA = 0,  /* "pa": PA behavioural model x -> y */
    DD_TRAIN_DLA = 1, /* "dla": DPD by direct learning through a frozen PA model */
    DD_TRAIN_ILA = 2  /* "ila": DPD by indirect learning: post-inverse y/G -> x, copied in front */
} dd_train_task;

/* "pa" | "dla" | "ila" (DD_ERR_ARG otherwise) and back ("?" for invalid values). */
dd_status dd_train_task_parse(const char *name, dd_train_task *task);
const char *dd_train_task_name(dd_train_task task);

#define DD_TRAIN_NAME_MAX 32

/* Training configuration. Start from dd_train_cfg_default() and change fields. Every
 * field is stored in the run's config.json and in checkpoints. */
typedef struct {
    dd_train_task task;          /* what is trained */
    char model[DD_TRAIN_NAME_MAX]; /* model name from the registry (model.h), e.g. "gru" */
    dd_model_cfg model_cfg;      /* hyper-parameters; 0 = the model's default */
    size_t frame;                /* frame length F, [1, 2^20]; default 200 */
    size_t stride;               /* frame stride S, [1, 2^20]; default 1 */
    size_t batch;                /* global batch B (frames), [1, 2^20]; default 64 */
    int epochs;                  /* total epochs, [1, 100000]; default 20 */
    char opt[16];                /* "sgd" | "adam" | "adamw" (default) | "rmsprop" */
    dd_optim_cfg optim;          /* optimiser hyper-parameters (torch defaults; lr below) */
    double lr;                   /* base learning rate, finite, > 0; default 5e-3 */
    dd_lr_cfg sched;             /* schedule, indexed by global step (warm-up, step_size and
                                    t_max count steps); plateau is fed the validation
                                    selection metric once per epoch. Default: plateau,
                                    factor 0.5, patience 5, threshold 1e-4 rel, min_lr
                                    5e-5 (OpenDPD's ReduceLROnPlateau); base_lr = lr */
    double clip;                 /* gradient-norm clipping max_norm, >= 0; 0 = off;
                                    default 200 (OpenDPD's grad_clip_val) */
    uint64_t seed;               /* seeds parameter initialisation and shuffling; default 0 */
    int shuffle;                 /* 1 (default): shuffle frames each epoch; 0: in order */
    size_t eval_batch;           /* evaluation segments per forward call, [1, 4096]; 16 */
    double gain;                 /* DPD target gain G (PA(DPD(x)) = G x): > 0 fixed; 0 = from
                                    the training split by gain_mode (resolved at create) */
    int gain_mode;               /* 0: G = max|y| / max|x| (OpenDPD); 1: G = |LS gain|,
                                    |sum y x* / sum |x|^2| */
    uint64_t ckpt_every;         /* also write last.ckpt every this many steps inside an
                                    epoch; 0 (default) = at the end of each epoch only */
    double ckpt_every_s;         /* also write last.ckpt when this many seconds of wall time
                                    have passed since the last checkpoint (checked after
                                    each step; rank 0 decides for every rank); finite,
                                    [0, 1e9]; 0 (default) = off */
    size_t keep_last;            /* checkpoints kept, [1, 1000000]: 1 (default) = last.ckpt
                                    only (and best.ckpt); K > 1: each checkpoint is written
                                    as RUN/ckpt/step-%010llu.ckpt (global step), last.ckpt
                                    is a hard link to the newest and the newest K step
                                    files are kept */
    int eval_test;               /* 1 (default): evaluate the test split every epoch */
    int select_true;             /* DPD with a true PA: 1 = pick the best epoch by the true
                                    PA's validation ACLR; 0 (default) = by the PA model's */
    int loss;                    /* training loss: 0 (default) "l2" = mean squared error
                                    (torch MSELoss), 1 "l1" = mean absolute error (torch
                                    L1Loss, gradient sign(e)/N with sign(0) = 0); the
                                    evaluation metrics (NMSE, ACLR, EVM) are the same for both */
} dd_train_cfg;

/* Bytes one evaluation forward call may use for its workspaces (16 MiB): the trainer
 * runs fewer segments per call to fit, and streams a segment that does not fit alone
 * (4096-sample chunks, about 2 MB for GRU hidden 23; same numbers either way). */
#define DD_TRAIN_EVAL_WS_CAP ((size_t)16 << 20)
/* Steps per chunk when the segments of a recurrent model are run in chunks because one
 * segment's whole workspace would pass the cap (dd_model_infer_chunked: eval_batch
 * segments per call still, each stage's state carried between chunks): at most 4096,
 * halved down to 256 to fit the cap before the segments per call are lowered. */
#define DD_TRAIN_EVAL_CHUNK 4096
#define DD_TRAIN_EVAL_CHUNK_MIN 256

/* How evaluation runs eval_batch segments of T samples within cap bytes of workspace per
 * call (chunk: DD_TRAIN_EVAL_CHUNK): the trainer's choice, and the planner's prediction. */
typedef struct {
    size_t eb;    /* segments per forward call (>= 1; 0 when eval_batch or T is 0) */
    size_t chunk; /* > 0: in chunks of this many steps (dd_model_infer_chunked) */
    int stream;   /* 1: one segment at a time, streamed (dd_model_run_stream; no arena) */
    size_t ws_m;  /* floats of the model's workspace (0 when streamed) */
    size_t ws_p;  /* floats of the PA model's (0 when streamed or without one) */
    size_t out1;  /* floats of the buffer between the model and the PA model (0 without) */
} dd_eval_fit;
void dd_train_eval_fit(const dd_model *m, const dd_model *pa, size_t eval_batch, size_t T, size_t cap, size_t chunk,
                       dd_eval_fit *f);

/* Batch chunks of a training step (docs/performance.md, "Threads inside a rank"): a
 * slice of `frames` frames of a model of n floats whose chunks are at most `width` frames
 * wide (dd_model_chunk_frames; 0: DD_MODEL_CHUNK_FRAMES), with whole parameter and gradient storage, runs in the
 * returned number of chunks of *cf frames each (the last fewer; 1: unchunked, *cf =
 * frames); never depends on the thread count. dd_train_chunks_max: the most chunks and
 * the widest chunk over slices of 1..bmax frames (what the trainer allocates: *nc
 * workspaces of *cf frames and *nc - 1 gradient copies when *nc > 1). The trainer's
 * choice, and the planner's prediction. */
size_t dd_train_chunks(size_t n, size_t frames, size_t width, size_t *cf);
/* A step whose source has stage_done callbacks (data parallelism, which sends gradient
 * buckets while the backward runs) is chunked only for models of at most this many
 * floats (one default 4 MiB bucket: nothing to overlap); chunks would send every bucket
 * after the chunks' sum. */
#define DD_TRAIN_CHUNK_OVERLAP_FLOATS ((size_t)1 << 20)
void dd_train_chunks_max(size_t n, size_t bmax, size_t width, size_t *nc, size_t *cf);
/* The chunk width of a step training m (dd_model_chunk_frames), or, through the frozen
 * PA model pa in direct learning (else pa = NULL; the PA runs in the same chunks), the
 * geometric mean of the two widths rounded up to a power of two: a tcn (4) with a gru (32)
 * 16, the best of 4, 8, 16 and 32 measured either way round (docs/performance.md,
 * "Parallel regions of one thread; tcn in chunks of 4 frames"). */
size_t dd_train_chunk_width(const dd_model *m, const dd_model *pa);

/* Defaults for a task (the published OpenDPD GRU recipe as measured here, not OpenDPD's
 * arguments.py defaults: docs/opendpd.md; gru, hidden 23, F 200, S 1, B 64, AdamW
 * lr 5e-3, plateau schedule, clip 200, seed 0, 20 epochs). */
void dd_train_cfg_default(dd_train_cfg *c, dd_train_task task);

/* Range checks; the message names the field and its range. Errors: DD_ERR_ARG. */
dd_status dd_train_cfg_check(const dd_train_cfg *c);

/* The configuration as a JSON object text (caller dd_free()s *json); every double is
 * written with 17 significant digits, so dd_train_cfg_from_json restores it exactly. */
dd_status dd_train_cfg_to_json(const dd_train_cfg *c, char **json);
/* Parses a JSON object written by dd_train_cfg_to_json (other keys are ignored); starts
 * from the task's defaults for missing keys. `where` names the source in messages.
 * Errors: DD_ERR_FORMAT (not JSON, wrong type: names the key), DD_ERR_ARG (bad values). */
dd_status dd_train_cfg_from_json(const char *json, const char *where, dd_train_cfg *c);

/* ------------------------------------------------------------------------------------
 * Strategies: who computes what in a training step. A strategy owns the step and builds
 * it from the trainer's blocks (dd_trainer_batch_slice: this worker's frames of a global
 * batch; dd_trainer_compute_grads: their loss and gradients, stage by stage;
 * dd_trainer_apply_update: clipping, the optimiser step and the cursor). The trainer
 * never names a strategy; without one it runs the trivial single-process strategy.
 * Synchronous data parallelism, sharded data parallelism (ZeRO) and the strategies of
 * later issues (pipeline, parameter server, federated averaging) live in src/parallel,
 * one file each (parallel.h).
 * ------------------------------------------------------------------------------------ */

typedef struct dd_trainer dd_trainer;

typedef struct {
    const char *name; /* e.g. "single", "dp", "zero" */
    /* Sharding strategies (NULL otherwise): called first by dd_trainer_create with the
     * trained model m (its arena has n floats) and the frozen PA model of a DPD (NULL for
     * PA training). *lo, *hi: the slice this rank keeps the optimiser state of (and
     * updates); *grads = 1: it keeps only that slice of the gradients; *params = 1: only
     * that slice of the parameters too (every forward then takes them from the source
     * given with dd_trainer_set_param_source). The other arenas are never allocated
     * whole; the initial parameters are computed whole once, in a temporary buffer. */
    dd_status (*layout)(void *self, const dd_model *m, const dd_model *pa, size_t n, size_t *lo, size_t *hi,
                        int *grads, int *params);
    /* Instead of layout, for strategies whose ranks keep several ranges of the arena (a
     * pipeline's interleaved stage groups): *count ranges [lo[k], hi[k]) (ascending,
     * disjoint; the arrays stay owned by the strategy) whose parameters, gradients and
     * optimiser state this rank keeps, stored one after the other; dd_trainer_storage
     * then answers in those local coordinates ([0, sum of the lengths)) and
     * dd_trainer_ranges gives the ranges. */
    dd_status (*layout_ranges)(void *self, const dd_model *m, const dd_model *pa, size_t n, size_t *count,
                               const size_t **lo, const size_t **hi);
    /* With mapped storage (layout_ranges or a tensor-parallel shard; NULL otherwise or
     * for all of it): called once the local storage of nlocal floats is known; [*lo, *hi)
     * of it is the slice whose optimiser state this rank keeps and updates (ZeRO-1 over
     * the data-parallel replicas of a model-parallel grid). Parameters and gradients stay
     * whole; the strategy gives apply_update the norm and shares the updated slices. */
    dd_status (*layout_optim)(void *self, size_t nlocal, size_t *lo, size_t *hi);
    /* Tensor-parallel strategies (NULL otherwise): called first by dd_trainer_create;
     * fills *tp with the group (dd_model_tp, model.h). With tp->size > 1 the trainer
     * trains this rank's shard of the model (dd_model_create_tp): layout_ranges then
     * speaks of the shard's arena, and the storage is mapped onto the whole model's
     * (dd_trainer_map) for initialisation and checkpoints, which stay whole-model. */
    dd_status (*tp)(void *self, dd_model_tp *tp);
    /* After the trainer's model, arenas and optimiser exist with initialised parameters
     * (end of dd_trainer_create), and after a full checkpoint load (dd_trainer_load, every
     * rank loads the same file): e.g. check that every rank holds the same model,
     * broadcast the parameters. A collective. */
    dd_status (*setup)(void *self, dd_trainer *tr);
    /* One optimiser step on the trainer's next global batch; *loss receives the batch loss
     * (the same on every rank). Must end with dd_trainer_apply_update. */
    dd_status (*step)(void *self, dd_trainer *tr, double *loss);
    /* Loss and gradient of global batch `batch` of epoch `epoch` at the current parameters,
     * without stepping: the reduced gradient in the trainer's gradient storage (for tests
     * and diagnostics; dd_trainer_loss_grad). NULL: not offered. */
    dd_status (*loss_grad)(void *self, dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss);
    /* Broadcasts vals[0..nv) from rank 0 (evaluation metrics; the DPD target gain that only
     * rank 0 computes). */
    dd_status (*bcast)(void *self, double *vals, int nv);
    /* Checkpoints. before_save: on every rank before rank 0 writes (a collective: gather
     * per-rank state). save: extra sections, on rank 0 (the writer). load: restores them,
     * on every rank (each reads the checkpoint). Any may be NULL. */
    dd_status (*before_save)(void *self, dd_trainer *tr);
    dd_status (*save)(void *self, dd_trainer *tr, dd_ckpt_writer *w);
    dd_status (*load)(void *self, dd_trainer *tr, const dd_ckpt_reader *r);
    /* Strategies that shard the parameters or the optimiser state (NULL otherwise): after
     * before_save, the whole parameter arena and the whole optimiser-state blob for rank
     * 0's checkpoint (owned by the strategy, valid until the next call). */
    dd_status (*full_state)(void *self, dd_trainer *tr, const float **params, const void **optim,
                            size_t *optim_bytes);
    /* Stop agreement: 1 once every rank agreed to stop after the last step (a signal seen
     * by any rank). NULL: the caller's own flag decides. */
    int (*stop_agreed)(void *self);
    /* At the end of each epoch, on every rank (a collective): out[0] bytes sent per rank
     * per step, out[1] compression ratio against dense float32, out[2] seconds spent
     * compressing in the epoch (NaN where not applicable). NULL: all NaN. */
    dd_status (*epoch_stats)(void *self, double out[3]);
    /* Optional, at the end of each epoch (rank 0): the strategy's own fields of the
     * epoch's metrics.jsonl line, as JSON members without braces ("\"a\":1,\"b\":[2]"),
     * into buf[0..cap) (dd_epoch_record.extra_json); "" for none. */
    dd_status (*epoch_json)(void *self, char *buf, size_t cap);
} dd_strategy_ops;

/* A strategy instance: its operations and state, and where this process stands. The
 * zero-initialised struct (or a NULL pointer) is one process. */
typedef struct {
    const dd_strategy_ops *ops; /* NULL: the single-process strategy */
    void *self;                 /* passed to every operation */
    int rank;                   /* this process, [0, nranks); rank 0 evaluates and writes */
    int nranks;                 /* processes training together; 0 or 1 = one process */
} dd_strategy;

/* The single-process strategy's operations (all frames, one update). */
extern const dd_strategy_ops dd_strategy_single_ops;

/* ------------------------------------------------------------------------------------
 * The trainer
 * ------------------------------------------------------------------------------------ */

/* A model with its parameters, e.g. the frozen PA model of a DPD. */
typedef struct {
    const char *name;      /* registry name */
    dd_model_cfg cfg;      /* its configuration (as created: dd_model_config) */
    const float *params;   /* arena laid out by its table (borrowed; copied by users) */
    size_t n;              /* floats in params = table total */
} dd_model_ref;

/* Metrics of one split (OpenDPD-compatible definitions; NaN when not computed). */
typedef struct {
    double loss;                 /* MSE over the padded segments (as OpenDPD's val loss) */
    double nmse_db;              /* segmented NMSE of the prediction vs the reference */
    dd_aclr_result aclr;         /* OpenDPD ACLR of the prediction */
    double evm_db;               /* spectral EVM of the prediction vs the reference */
} dd_eval_metrics;

/* One epoch's record (metrics.jsonl line, history.csv row). */
typedef struct {
    int epoch;              /* 1-based: the record after the first epoch has epoch 1 */
    int best;               /* 1 if this epoch is the best so far (best.ckpt) */
    uint64_t step;          /* optimiser steps done at the end of the epoch */
    double time_s;          /* seconds of training (steps) in this epoch */
    double eval_time_s;     /* seconds of evaluation after it */
    double lr;              /* learning rate used in this epoch (its last step) */
    double train_loss;      /* mean of the batch losses (OpenDPD's train loss) */
    double grad_norm_max;   /* largest gradient L2 norm (before clipping) of the epoch */
    dd_eval_metrics val;    /* validation split (PA: model vs measured output; DPD:
                               PA_model(DPD(x)) vs G x) */
    dd_eval_metrics test;   /* test split, same definitions */
    int has_true;           /* DPD on simulated data: the true-PA fields below are set */
    int has_no_dpd;         /* DPD runs: the baseline no_dpd fields below are set */
    dd_eval_metrics true_val, true_test; /* true noiseless PA driven by the DPD (as one
                                            stream over the split) vs G x */
    dd_eval_metrics no_dpd_val, no_dpd_test; /* the same PA model without the DPD:
                               PA_model(x) vs G x, evaluated like val/test (a constant of
                               the run; metrics.jsonl *_no_dpd_db keys) */
    double comm_bytes_per_step; /* parallel strategy (epoch_stats): bytes each rank
                                   sent per step, mean over ranks; NaN without one */
    double compression_ratio;   /* dense float32 gradient bytes / compressed payload
                                   bytes (1 uncompressed); NaN without a strategy */
    double compress_time_s;     /* seconds compressing + decompressing in the epoch
                                   (mean over ranks); NaN without a strategy */
    int world_size;             /* ranks that trained the epoch (0: not recorded, a record
                                   of an earlier version) */
    int restart;                /* the run driver's restart count (DISTDPD_RESTART) of the
                                   process that finished the epoch; 0 by default */
    double ckpt_stall_s;        /* run driver: the longest time the step loop was blocked
                                   by one of the epoch's checkpoints (snapshot + waiting
                                   for the previous write); NaN = none recorded */
    double ckpt_write_s;        /* run driver: the longest background write (temporary
                                   file, fsync, rename, directory fsync) of them; NaN =
                                   not known (yet) */
    char extra_json[1024];      /* the strategy's fields of this epoch's metrics.jsonl
                                   line (epoch_json), e.g. a parameter server's staleness
                                   histogram; "" none. Not kept in checkpoints */
} dd_epoch_record;

/* Progress report, for a progress bar or log lines. */
typedef struct {
    int phase;             /* 0: a step finished; 1: evaluating; 2: an epoch finished */
    int epoch;             /* current epoch, 1-based */
    int epochs;            /* total */
    uint64_t batch;        /* batches done in this epoch */
    uint64_t nbatches;     /* batches per epoch */
    double loss;           /* running mean batch loss of this epoch */
    double epoch_elapsed;  /* seconds spent in this epoch's steps so far */
    const dd_epoch_record *rec; /* phase 2: the epoch's record; else NULL */
} dd_train_progress;

/* Builds a trainer for cfg on ds (borrowed: must outlive the trainer). pa: the frozen PA
 * model for DD_TRAIN_DLA / DD_TRAIN_ILA (required there, must be NULL for DD_TRAIN_PA;
 * its parameters are copied). st may be NULL (one process; copied; the strategy's state
 * must outlive the trainer). The model is created from the registry and initialised from
 * cfg->seed; cfg->gain == 0 is resolved from the training split (dd_trainer_cfg shows the
 * resolved configuration); the strategy's setup runs last. Errors: DD_ERR_ARG (bad
 * configuration; train split shorter than one frame; a spec the metrics reject),
 * DD_ERR_NOMEM (also an arena beyond the memory budget). The caller destroys the
 * trainer. */
dd_status dd_trainer_create(const dd_train_cfg *cfg, const dd_dataset *ds, const dd_model_ref *pa,
                            const dd_strategy *st, dd_trainer **out);
/* Frees everything and sets *tr to NULL. Safe on NULL. */
void dd_trainer_destroy(dd_trainer **tr);

/* DPD on simulated data: evaluate also on this true PA (a noiseless clone is kept; the
 * caller keeps ownership of pa). Computes the no-DPD baseline at once. */
dd_status dd_trainer_set_true_pa(dd_trainer *tr, const dd_pa *pa);
/* Baseline of the true PA without DPD (PA(x) vs G x) for a split; DD_ERR_ARG if no true
 * PA is set. */
dd_status dd_trainer_true_baseline(const dd_trainer *tr, dd_split s, dd_eval_metrics *m);
/* DPD runs: the baseline of the trained-on data without the DPD, through the same frozen
 * PA model (PA_model(x) vs G x on split s, the same padded segments and metrics as
 * dd_trainer_evaluate). Computed once per PA model parameters (rank 0 of the ranks that
 * evaluate). DD_ERR_ARG for a PA-model run or a split not evaluated here. */
dd_status dd_trainer_no_dpd_baseline(dd_trainer *tr, dd_split s, dd_eval_metrics *m);

/* One optimiser step on the next global batch of the current epoch, made by the strategy
 * (gather, forward, loss, backward, reduction, clip, step). *loss (may be NULL) receives
 * the batch loss. Errors: DD_ERR_ARG when the epoch is complete (call
 * dd_trainer_end_epoch) or all epochs are done; DD_ERR_NUMERIC when the loss, the
 * gradient or a parameter after the step is not finite. */
dd_status dd_trainer_step(dd_trainer *tr, double *loss);
/* 1 when every batch of the current epoch has been stepped. */
int dd_trainer_epoch_done(const dd_trainer *tr);
/* Ends the epoch: evaluates (val, test, and the true PA when set), picks the best epoch
 * (PA: lowest validation NMSE; DPD: lowest validation ACLR_AVG), feeds the plateau
 * schedule, advances the cursor and appends the record to the history. */
dd_status dd_trainer_end_epoch(dd_trainer *tr, dd_epoch_record *rec);
/* Evaluates the current parameters on split s (val or test), as dd_trainer_end_epoch
 * does. pred (may be NULL) receives a pointer to the prediction (owned by the trainer,
 * valid until the next evaluation) and *npred its length (the padded segments).
 * Rank 0 evaluates for all ranks: a trainer of another rank keeps no validation/test data
 * and answers DD_ERR_ARG ("... not evaluated"), unless its parameters are sharded
 * (dd_trainer_set_param_source with collective = 1): then every rank runs the forward
 * passes together and only rank 0 computes the metrics. */
dd_status dd_trainer_evaluate(dd_trainer *tr, dd_split s, dd_eval_metrics *m,
                              const dd_cf32 **pred, size_t *npred);
/* The same for the true PA driven by the DPD (as one stream over the split; the DPD's
 * output goes through the buffer of dd_trainer_evaluate's prediction, which it
 * overwrites). */
dd_status dd_trainer_evaluate_true(dd_trainer *tr, dd_split s, dd_eval_metrics *m,
                                   const dd_cf32 **pred, size_t *npred);

/* Loss and gradient of global batch `batch` of epoch `epoch` (0-based) at the current
 * parameters, without stepping: fills the gradient storage (reduced over the ranks by
 * the strategy, before clipping) and *loss. For tests and diagnostics. */
dd_status dd_trainer_loss_grad(dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss);

/* ---- building blocks of a step, for strategies ---- */

/* Worker w of nw (0 <= w < nw) takes positions [*lo, *hi) of global batch `batch` of an
 * epoch's frame order (dd_batch_slice); *global receives the global batch's frames. */
void dd_trainer_batch_slice(const dd_trainer *tr, uint64_t batch, int w, int nw, uint64_t *lo, uint64_t *hi,
                            uint64_t *global);
/* The loss and gradients of positions [lo, hi) of epoch `epoch`'s frame order at the
 * current parameters, normalised by `global` frames (the mean over a global batch of
 * that many frames, so that slices of different workers add up): gathers the frames,
 * runs the model's stages forward (and the frozen PA model for direct learning), the MSE
 * loss, and the stages backward. src NULL: parameters from the trainer's arena and
 * gradients into its gradient arena (zeroed first); else the stage source supplies each
 * stage's parameters and gradient slice (which the strategy zeroes) and its stage_done
 * is called after each stage's forward and backward: with an empty slice (lo == hi) every
 * stage callback is still made, in the same order, so that collectives stay matched.
 * A slice of more than 32 frames whose source gives whole parameter and gradient arrays
 * (no stage_params / stage_grads; with stage_done only for models of at most
 * DD_TRAIN_CHUNK_OVERLAP_FLOATS) runs in batch chunks on the rank's threads
 * (dd_nn_threads; docs/performance.md, "Threads inside a rank"): ceil(frames / 32)
 * chunks (fewer for models whose chunk gradients would exceed 16 M floats), their
 * gradients and sums added in chunk order, so the thread count never changes a number;
 * its stage_done calls then come, in the same order, after all chunks are summed.
 * *sse receives the sum of squared errors of these frames (loss = sse / (global F 2)).
 * Errors: DD_ERR_ARG (bad range), the model's and the source's errors. */
dd_status dd_trainer_compute_grads(dd_trainer *tr, uint64_t epoch, uint64_t lo, uint64_t hi, uint64_t global,
                                   const dd_stage_src *src, double *sse);
/* The loss normaliser (the mean of MSE or L1) of a global batch of `global` frames:
 * 1 / (global F 2). */
double dd_trainer_loss_scale(const dd_trainer *tr, uint64_t global);
/* The inputs and targets of positions [lo, hi) of epoch `epoch`'s frame order, each
 * (hi - lo, F, 2) floats (DPD: the targets scaled by the gain, ILA: the inputs scaled),
 * for strategies that run the stages themselves (pipelines). Errors: DD_ERR_ARG. */
dd_status dd_trainer_gather(dd_trainer *tr, uint64_t epoch, uint64_t lo, uint64_t hi, float *x, float *tgt);
/* The training loss (cfg.loss: MSE, or L1) of nv floats of pred against tgt for a global
 * batch of `global` frames: writes dL/dpred into dpred and returns the sum of squared
 * errors (L1: of absolute errors); the loss is that times dd_trainer_loss_scale. */
double dd_trainer_mse_grad(const dd_trainer *tr, const float *pred, const float *tgt, size_t nv, uint64_t global,
                           float *dpred);
/* Ends a step after the gradients are reduced: clips with the global gradient norm
 * sqrt(grad_sumsq) (NaN: computed from the trainer's gradient storage over the
 * optimiser's range), steps the optimiser over its range of the parameters, checks that
 * the loss, the norm and the updated parameters are finite, and advances the cursor and
 * the epoch's accumulators (loss: the global batch loss). Errors: DD_ERR_NUMERIC
 * ("training diverged: ..."), DD_ERR_ARG (epoch complete). */
dd_status dd_trainer_apply_update(dd_trainer *tr, double loss, double grad_sumsq);

/* Ends a step whose update was applied elsewhere (a parameter server: the strategy puts
 * the parameters into the arena itself): advances the cursor, the step count and the
 * epoch's loss accumulator as dd_trainer_apply_update does, without clipping or an
 * optimiser step; grad_norm (the step's gradient L2 norm before clipping, as computed
 * where the gradient was; NAN: not known) enters the epoch's grad_norm_max.
 * Errors: DD_ERR_NUMERIC (loss not finite), DD_ERR_ARG (epoch complete). */
dd_status dd_trainer_advance(dd_trainer *tr, double loss, double grad_norm);

/* Where the parameter and gradient storage starts: element i of the arena (lo <= i < hi,
 * the slice kept by a sharding strategy's layout, or all of it) is params[i - lo] /
 * grads[i - lo] (the gradient slice is [olo, ohi) when gradients are sharded); [*olo,
 * *ohi) is the optimiser's slice. A full checkpoint load restores the slices from any
 * checkpoint, written with any sharding. */
void dd_trainer_storage(dd_trainer *tr, float **params, float **grads, size_t *lo, size_t *hi, size_t *olo,
                        size_t *ohi);
/* A strategy's ranges (layout_ranges; *count = 0 otherwise). */
void dd_trainer_ranges(const dd_trainer *tr, size_t *count, const size_t **lo, const size_t **hi);
/* Mapped storage (layout_ranges or a tensor-parallel shard): local floats [dst, dst + len)
 * of the parameters, gradients and optimiser state are the whole model's [src, src + len)
 * (*count = 0 and NULL otherwise). The whole model's arena has dd_trainer_whole_floats()
 * floats (dd_trainer_num_floats() when the trainer holds the whole model). */
void dd_trainer_map(const dd_trainer *tr, const dd_optim_run **runs, size_t *count);
size_t dd_trainer_whole_floats(const dd_trainer *tr);
/* With sharded parameters: the stage source every forward (evaluation included) takes
 * its parameters from (copied); collective = 1: evaluation runs on every rank together
 * (the source's gathers are collectives). NULL clears it. */
void dd_trainer_set_param_source(dd_trainer *tr, const dd_stage_src *src, int collective);
/* The trainer's optimiser (of its optimiser range: dd_trainer_storage). */
dd_optim *dd_trainer_optim(dd_trainer *tr);
/* The strategy the trainer runs with (a copy; dd_strategy_single_ops for one process). */
const dd_strategy *dd_trainer_strategy(const dd_trainer *tr);

/* Checkpoints (format: docs/training.md). save writes every section needed to continue
 * exactly (parameters, optimiser state, schedule, step, epoch, cursor, RNG, history,
 * configuration, frozen PA model) atomically. load with params_only = 0 restores all of
 * it (resume: the configuration must describe the same model, data framing and optimiser:
 * otherwise DD_ERR_MISMATCH naming the field; epochs may differ); params_only = 1 loads
 * the parameters only. A truncated, corrupt or incompatible file is refused
 * (DD_ERR_CORRUPT, DD_ERR_FORMAT, DD_ERR_MISMATCH) with the path in the message and the
 * trainer unchanged. */
dd_status dd_trainer_save(const dd_trainer *tr, const char *path);
dd_status dd_trainer_load(dd_trainer *tr, const char *path, int params_only);

/* State. */
const dd_train_cfg *dd_trainer_cfg(const dd_trainer *tr); /* resolved configuration */
const dd_model *dd_trainer_model(const dd_trainer *tr);   /* the trained model */
float *dd_trainer_params(dd_trainer *tr);                 /* its parameter arena */
float *dd_trainer_grads(dd_trainer *tr);                  /* its gradient arena */
size_t dd_trainer_num_floats(const dd_trainer *tr);       /* arena length */
int dd_trainer_epoch(const dd_trainer *tr);               /* completed epochs */
uint64_t dd_trainer_batch(const dd_trainer *tr);          /* batches done in this epoch */
uint64_t dd_trainer_num_batches(const dd_trainer *tr);    /* per epoch */
uint64_t dd_trainer_num_frames(const dd_trainer *tr);     /* training frames */
uint64_t dd_trainer_steps(const dd_trainer *tr);          /* optimiser steps done */
double dd_trainer_lr(const dd_trainer *tr);               /* lr of the next step */
/* Rescaling for a new world size (Goyal et al.'s linear scaling rule): from the next
 * epoch boundary (at once when the cursor is at one) the global batch becomes `batch`
 * and the learning rate (base, plateau's current, min_lr, cosine's eta_min) is
 * multiplied by batch / the current batch, reached by a linear warm-up over `warmup`
 * steps from the old rate (0: at once). The rest of the epoch in progress keeps the
 * old batch, so the frames of an epoch are each seen once. The warm-up state is part of
 * the checkpoint. A batch equal to the current one does nothing. Errors: DD_ERR_ARG
 * (batch 0 or above 2^20, warmup < 0). */
dd_status dd_trainer_rescale(dd_trainer *tr, uint64_t batch, int64_t warmup);
/* 1 once when a rescale has been applied since the last call (the configuration changed:
 * the caller rewrites config.json), else 0. */
int dd_trainer_rescaled(dd_trainer *tr);
/* Best epoch so far (0 = none) and its selection metric. */
int dd_trainer_best_epoch(const dd_trainer *tr, double *metric);
/* The epoch records so far (owned by the trainer); *n receives their number. */
const dd_epoch_record *dd_trainer_history(const dd_trainer *tr, size_t *n);
/* The frozen PA model of a DPD trainer (NULL for PA training) and its parameters. */
const dd_model *dd_trainer_pa_model(const dd_trainer *tr, const float **params);

/* ------------------------------------------------------------------------------------
 * Run directories
 *
 * RUN/config.json   resolved configuration, data set, spec, model size, command line
 * RUN/metrics.jsonl one JSON object per epoch (dd_epoch_record; "best": true on the best)
 * RUN/history.csv   the same in OpenDPD's history columns
 * RUN/best.ckpt     checkpoint of the best epoch; RUN/last.ckpt of the last
 * RUN/report.html   learning curves, time per epoch, spectra of the best model
 * RUN/.lock         the owner's lock (flock) and its "pid host"
 *
 * A run directory has one owner: the process (rank 0) that trains it holds an exclusive
 * flock on RUN/.lock for the whole run. The kernel drops the lock when the process ends,
 * however it ends (a kill -9 leaves the file but no lock), so a second writer is refused
 * while the owner lives and never by a stale lock. Every run gets a random 128-bit run id
 * at creation, written into config.json and every checkpoint; --resume refuses a
 * last.ckpt whose run id, task, model, configuration or data set differ from the run's.
 * ------------------------------------------------------------------------------------ */

typedef struct dd_run_lock dd_run_lock;

/* Heartbeat file: one line of JSON that rank 0 rewrites (temporary file + rename, no
 * fsync) so that a supervisor can tell a live job from a hung one:
 *   {"pid":P,"step":S,"epoch":E,"time":UNIX_SECONDS,"step_s":MEAN_STEP_SECONDS,
 *    "world_size":N,"state":"train"|"checkpoint"|"done"|"preempted"|"failed"}
 * step: optimiser steps done (global); epoch: epochs completed; time: wall clock of the
 * write (seconds since 1970, microseconds); step_s: mean seconds per step over the steps
 * of this process (0 before the first). dd_train_run writes it after the first step of
 * the process, after a step when 0.2 s have passed since the last write, after each
 * checkpoint and at the start of each epoch's evaluation; the caller writes the final
 * state. A write that fails is logged once as a warning (naming the file). A state is
 * written as a word: letters, digits and '-' kept, other characters as '_', at most 31. */
typedef struct dd_heartbeat dd_heartbeat;
/* Checks that the directory of path exists and is writable; nothing is written yet.
 * Errors: DD_ERR_IO (naming path), DD_ERR_NOMEM. */
dd_status dd_heartbeat_open(const char *path, int world_size, dd_heartbeat **out);
/* Records a step (its wall time step_s) and writes "train" when due (the first step, or
 * 0.2 s since the last write). Safe on NULL. */
void dd_heartbeat_step(dd_heartbeat *hb, uint64_t step, int epoch, double step_s);
/* Records the position and writes `state` now. Safe on NULL. */
void dd_heartbeat_write(dd_heartbeat *hb, uint64_t step, int epoch, const char *state);
/* Writes `state` now with the last position recorded. Safe on NULL. */
void dd_heartbeat_final(dd_heartbeat *hb, const char *state);
/* Frees the handle (the file stays); sets *hb to NULL. Safe on NULL. */
void dd_heartbeat_close(dd_heartbeat **hb);

/* Takes the exclusive lock of run directory `run` (RUN/.lock, created; with create = 1
 * the directory is created first, else it must exist) without waiting, and writes this
 * process's "pid host" into the lock file. Errors: DD_ERR_ARG when another process holds
 * it ("RUN is in use by pid P on host H (RUN/.lock): ..."), DD_ERR_IO. On a file system
 * without locks (ENOLCK, EOPNOTSUPP) a warning is logged and an unlocked handle returned.
 * Release with dd_run_lock_release (the process's end releases it too). */
dd_status dd_run_lock_acquire(const char *run, int create, dd_run_lock **out);
/* Empties the lock file, releases the lock and frees the handle; sets *lk to NULL. Safe
 * on NULL. */
void dd_run_lock_release(dd_run_lock **lk);

typedef struct {
    const char *data;    /* data set path (dd_dataset_load); NULL on resume = the run's */
    const char *out;     /* run directory (created) */
    const char *pa_run;  /* DLA/ILA: the PA run directory (its best.ckpt is frozen) */
    int resume;          /* 1: continue out/last.ckpt exactly (cfg is then ignored except
                            epochs when epochs_override is set) */
    int epochs_override; /* resume: new total epochs; 0 = keep */
    const char *command; /* command line, stored in config.json (may be NULL) */
    int write_report;    /* 1: write report.html at the end */
    const dd_strategy *strategy; /* NULL = one process; rank 0 writes the files */
    void (*progress)(void *user, const dd_train_progress *p); /* may be NULL */
    void *progress_user;
    int stop_after_epochs; /* > 0: stop (as if interrupted) after this many epochs of this
                              call, leaving last.ckpt to resume from; 0 = run to the end */
    const volatile int *stop; /* may be NULL; when *stop becomes non-zero (e.g. set by a
                                 SIGINT/SIGTERM handler) training stops after the current
                                 step, writes last.ckpt (mid-epoch cursor) and returns
                                 DD_OK with *interrupted = 1. A strategy with a stop
                                 agreement (stop_agreed) decides instead, so that every
                                 rank stops after the same step */
    int *interrupted;         /* may be NULL; receives 1 when stopped by *stop, else 0 */
    dd_mem_stats *mem;        /* may be NULL; receives this process's arena accounting
                                 (dd_mem_stats) at the end of training, before the report
                                 (whose forward passes are not training's memory) */
    dd_run_lock *lock;        /* rank 0: the lock of `out` the caller already holds
                                 (dd_run_lock_acquire, e.g. to keep it while it writes
                                 files of its own after the run), or NULL: dd_train_run
                                 takes it itself and releases it before returning */
    int restart;              /* >= 0: recorded as "restart" in every epoch record this
                                 call makes (a supervisor's restart count) */
    dd_heartbeat *heartbeat;  /* rank 0: progress file written after steps and checkpoints
                                 (dd_heartbeat_open), or NULL */
    uint64_t rescale_batch;   /* resume: > 0 rescales to this global batch with the linear
                                 learning-rate rule from the next epoch boundary
                                 (dd_trainer_rescale); 0 = keep */
    int64_t rescale_warmup;   /* its warm-up steps */
    int ckpt_sync;            /* 1: rank 0 writes checkpoints in the step loop instead of
                                 in a background thread (for benchmarks) */
} dd_train_run_opts;

/* Trains cfg on o->data into the run directory o->out (see above). On success the run
 * directory is complete. Rank 0 holds the directory's lock throughout and, once it holds
 * it, removes the temporary files (NAME.tmp.PID[.K]) a killed owner left behind. A new
 * run is refused (DD_ERR_ARG) when out already holds a run (config.json, last.ckpt,
 * best.ckpt or metrics.jsonl); a resume is refused (DD_ERR_MISMATCH, naming every field
 * that differs) when last.ckpt does not belong to the run of config.json or was made on
 * another data set, before anything is written. Errors from every layer, each naming the
 * file involved. */
dd_status dd_train_run(const dd_train_cfg *cfg, const dd_train_run_opts *o);

/* A trained model loaded from a run directory (or a checkpoint file). */
typedef struct {
    dd_train_cfg cfg;     /* the run's configuration */
    dd_spec spec;         /* the data set's spec recorded in config.json */
    int has_spec;         /* spec valid */
    char data[4096];      /* the data set path the run was trained on */
    int epoch;            /* epoch of the loaded checkpoint */
    dd_model *model;      /* the trained model (PA model or DPD) (owned) */
    float *params;        /* its parameters (owned, dd_free) */
    dd_model *pa_model;   /* DPD runs: the frozen PA model (owned), else NULL */
    float *pa_params;     /* its parameters (owned) */
} dd_run_model;

/* Loads RUN/best.ckpt (which = "best"), RUN/last.ckpt ("last"), or the checkpoint file
 * `run` itself when it is a file. The caller frees with dd_run_model_free. */
dd_status dd_run_model_load(const char *run, const char *which, dd_run_model *out);
void dd_run_model_free(dd_run_model *m);
/* Writes a parameters-only checkpoint that dd_run_model_load reads (and so `distdpd eval
 * --run`), for models trained outside a trainer (federated averaging's coordinator): the
 * configuration, data label, spec (NULL: none), epoch and the PA model m's parameters,
 * atomically. It cannot be resumed by dd_trainer_load. */
dd_status dd_run_model_save(const char *path, const dd_train_cfg *cfg, const char *data, const dd_spec *spec,
                            int epoch, const dd_model *m, const float *params);

/* Re-evaluates a run on a data set: the trainer of the run's configuration on ds with the
 * checkpoint's parameters; val and test metrics (and, for a DPD run with true_pa not
 * NULL, the true PA's with the DPD in rec->true_* and without it in base[0] (val) and
 * base[1] (test); base may be NULL). *rec: epoch = the checkpoint's, train fields NaN. */
dd_status dd_run_evaluate(const char *run, const char *which, const dd_dataset *ds,
                          const dd_pa *true_pa, dd_epoch_record *rec, dd_eval_metrics *base);

/* The keys of a DPD result's baseline for one split (split = "val" or "test"):
 * SPLIT_nmse_no_dpd_db, SPLIT_aclr_l_no_dpd_db, SPLIT_aclr_r_no_dpd_db,
 * SPLIT_aclr_avg_no_dpd_db, SPLIT_evm_no_dpd_db (no_dpd's values) and the improvements
 * SPLIT_nmse_improvement_db, SPLIT_aclr_improvement_db (average), SPLIT_evm_improvement_db
 * = the value without minus the value with the DPD (positive: the DPD helps). keys
 * receive DD_NO_DPD_KEYS names, vals their values (NaN when either side is missing). */
#define DD_NO_DPD_KEYS 8
void dd_eval_no_dpd_keys(const char *split, const dd_eval_metrics *no_dpd, const dd_eval_metrics *dpd,
                         char keys[DD_NO_DPD_KEYS][48], double vals[DD_NO_DPD_KEYS]);

/* Writes metrics.jsonl and history.csv of `n` records into dir (atomically). */
dd_status dd_run_write_metrics(const char *dir, const dd_train_cfg *cfg, size_t nparams,
                               const dd_epoch_record *rec, size_t n);

/* ------------------------------------------------------------------------------------
 * Simulated-PA sidecar (DIR/pa.json): how a simulated data set's PA can be rebuilt, so
 * that a DPD is measured on the true (noiseless) PA.
 * ------------------------------------------------------------------------------------ */

#define DD_SIM_PA_FILE "pa.json"

/* Writes the PA's model name, every dd_pa_params field (GMP coefficients included) and
 * its calibration (dd_pa_get_calib) as JSON to path, atomically. */
dd_status dd_sim_pa_save(const dd_pa *pa, const char *path);
/* Rebuilds the PA from a file written by dd_sim_pa_save, calibrated as saved, with the
 * noise turned off. dir_or_path: the file, or a data set directory holding pa.json.
 * When the directory has no pa.json but a simulation.json of `distdpd simulate`, the PA
 * is rebuilt from it (model defaults with the recorded drive, sample rate and
 * calibration; the thermal reference P0 taken as in_gain^2 times the mean input power
 * of ds, which may be NULL only with pa.json). *found = 0 and DD_OK when neither file
 * exists. The caller destroys *pa. */
dd_status dd_sim_pa_load(const char *dir_or_path, const dd_dataset *ds, dd_pa **pa, int *found);

#ifdef __cplusplus
}
#endif
#endif
