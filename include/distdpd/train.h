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
 * Everything here runs in one process; data parallelism plugs in through
 * dd_train_hooks without touching models or this code. This module never includes mpi.h.
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
    char opt[16];                /* "sgd" | "adam" | "adamw" (default) */
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
    int eval_test;               /* 1 (default): evaluate the test split every epoch */
    int select_true;             /* DPD with a true PA: 1 = pick the best epoch by the true
                                    PA's validation ACLR; 0 (default) = by the PA model's */
} dd_train_cfg;

/* Defaults for a task (the reference recipe: gru, hidden 23, F 200, S 1, B 64, AdamW
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
 * Hooks: where a parallel strategy plugs in (issue 4). All members may be NULL/0: the
 * zero-initialised struct (or a NULL pointer) is the single-process trainer.
 * ------------------------------------------------------------------------------------ */
typedef struct {
    void *user;  /* passed to every hook */
    int rank;    /* this process's rank, [0, nranks) */
    int nranks;  /* processes sharing each global batch; 0 or 1 = one process */
    /* After parameters are initialised (end of dd_trainer_create) or fully loaded
     * (dd_trainer_load with params_only = 0), before the first step: e.g. broadcast
     * params[0..n) from rank 0 so that every rank starts equal. A collective: every rank
     * creates and loads in the same order. */
    dd_status (*setup)(void *user, float *params, size_t n);
    /* After backward: gradients [lo, hi) of the arena are final on this rank (bucketed
     * strategies start their reductions here). Called once per parameter-table entry (its
     * range including the padding after it), in reverse layer order: the ranges descend,
     * hi of the first call is n, lo of the last is 0, each call's hi is the previous lo.
     * Every rank makes the same calls (also a rank whose slice of the batch is empty). */
    dd_status (*after_backward)(void *user, float *grads, size_t lo, size_t hi);
    /* Sums grads[0..n) and vals[0..nv) over all ranks, in place (vals: loss sum). Must
     * leave the same values on every rank. */
    dd_status (*allreduce)(void *user, float *grads, size_t n, double *vals, int nv);
    /* Broadcasts vals[0..nv) from rank 0 (evaluation metrics: only rank 0 evaluates;
     * the DPD target gain: only rank 0 reads the whole training split for it). */
    dd_status (*bcast)(void *user, double *vals, int nv);
    /* Extra checkpoint sections (e.g. per-rank state) and their restoration. on_save runs
     * on rank 0 only (the writer); on_load on every rank (each reads the checkpoint). */
    dd_status (*on_save)(void *user, dd_ckpt_writer *w);
    dd_status (*on_load)(void *user, const dd_ckpt_reader *r);
    /* Before each optimiser step, on every rank: the global step about to run (0-based),
     * its epoch (0-based), its batch in the epoch and the batches per epoch. */
    dd_status (*begin_step)(void *user, uint64_t step, int epoch, uint64_t batch, uint64_t nbatches);
    /* On every rank before rank 0 writes a checkpoint (dd_train_run): a collective, e.g.
     * gathering per-rank state to rank 0 for on_save. */
    dd_status (*before_save)(void *user);
    /* At the end of each epoch, on every rank (a collective): the epoch's communication
     * figures for its record (dd_epoch_record comm_*): out[0] bytes sent per rank per
     * step, out[1] compression ratio against dense float32, out[2] seconds spent
     * compressing and decompressing in the epoch (NaN where not applicable). */
    dd_status (*epoch_comm)(void *user, double out[3]);
} dd_train_hooks;

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
    dd_eval_metrics true_val, true_test; /* true noiseless PA driven by the DPD (as one
                                            stream over the split) vs G x */
    int best;               /* 1 if this epoch is the best so far (best.ckpt) */
    double comm_bytes_per_step; /* parallel strategy (hooks.epoch_comm): bytes each rank
                                   sent per step, mean over ranks; NaN without one */
    double compression_ratio;   /* dense float32 gradient bytes / compressed payload
                                   bytes (1 uncompressed); NaN without a strategy */
    double compress_time_s;     /* seconds compressing + decompressing in the epoch
                                   (mean over ranks); NaN without a strategy */
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

typedef struct dd_trainer dd_trainer;

/* Builds a trainer for cfg on ds (borrowed: must outlive the trainer). pa: the frozen PA
 * model for DD_TRAIN_DLA / DD_TRAIN_ILA (required there, must be NULL for DD_TRAIN_PA;
 * its parameters are copied). hooks may be NULL (copied). The model is created from the
 * registry and initialised from cfg->seed; cfg->gain == 0 is resolved from the training
 * split (dd_trainer_cfg shows the resolved configuration). Errors: DD_ERR_ARG (bad
 * configuration; train split shorter than one frame; a spec the metrics reject),
 * DD_ERR_NOMEM. The caller destroys the trainer. */
dd_status dd_trainer_create(const dd_train_cfg *cfg, const dd_dataset *ds, const dd_model_ref *pa,
                            const dd_train_hooks *hooks, dd_trainer **out);
/* Frees everything and sets *tr to NULL. Safe on NULL. */
void dd_trainer_destroy(dd_trainer **tr);

/* DPD on simulated data: evaluate also on this true PA (a noiseless clone is kept; the
 * caller keeps ownership of pa). Computes the no-DPD baseline at once. */
dd_status dd_trainer_set_true_pa(dd_trainer *tr, const dd_pa *pa);
/* Baseline of the true PA without DPD (PA(x) vs G x) for a split; DD_ERR_ARG if no true
 * PA is set. */
dd_status dd_trainer_true_baseline(const dd_trainer *tr, dd_split s, dd_eval_metrics *m);

/* One optimiser step on the next global batch of the current epoch: gather, forward,
 * loss, backward, hooks, clip, step. *loss (may be NULL) receives the batch loss.
 * Errors: DD_ERR_ARG when the epoch is complete (call dd_trainer_end_epoch) or all
 * epochs are done; DD_ERR_NUMERIC when the loss or gradient is not finite. */
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
 * A trainer whose hooks give it a rank other than 0 keeps no validation/test data and
 * answers DD_ERR_ARG ("... not evaluated"): rank 0 evaluates for all ranks. */
dd_status dd_trainer_evaluate(dd_trainer *tr, dd_split s, dd_eval_metrics *m,
                              const dd_cf32 **pred, size_t *npred);
/* The same for the true PA driven by the DPD (as one stream over the split). */
dd_status dd_trainer_evaluate_true(dd_trainer *tr, dd_split s, dd_eval_metrics *m,
                                   const dd_cf32 **pred, size_t *npred);

/* Loss and gradient of global batch `batch` of epoch `epoch` (0-based) at the current
 * parameters, without stepping: fills the gradient arena (after the allreduce hook,
 * before clipping) and *loss. For tests and diagnostics. */
dd_status dd_trainer_loss_grad(dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss);

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
    const dd_train_hooks *hooks; /* NULL = one process */
    void (*progress)(void *user, const dd_train_progress *p); /* may be NULL */
    void *progress_user;
    int stop_after_epochs; /* > 0: stop (as if interrupted) after this many epochs of this
                              call, leaving last.ckpt to resume from; 0 = run to the end */
    const volatile int *stop; /* may be NULL; when *stop becomes non-zero (e.g. set by a
                                 SIGINT/SIGTERM handler) training stops after the current
                                 step, writes last.ckpt (mid-epoch cursor) and returns
                                 DD_OK with *interrupted = 1 */
    int *interrupted;         /* may be NULL; receives 1 when stopped by *stop, else 0 */
    dd_run_lock *lock;        /* rank 0: the lock of `out` the caller already holds
                                 (dd_run_lock_acquire, e.g. to keep it while it writes
                                 files of its own after the run), or NULL: dd_train_run
                                 takes it itself and releases it before returning */
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

/* Re-evaluates a run on a data set: the trainer of the run's configuration on ds with the
 * checkpoint's parameters; val and test metrics (and, for a DPD run with true_pa not
 * NULL, the true PA's with the DPD in rec->true_* and without it in base[0] (val) and
 * base[1] (test); base may be NULL). *rec: epoch = the checkpoint's, train fields NaN. */
dd_status dd_run_evaluate(const char *run, const char *which, const dd_dataset *ds,
                          const dd_pa *true_pa, dd_epoch_record *rec, dd_eval_metrics *base);

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
