/* Internals of the training engine shared by the files of src/train: the trainer struct, the
 * checkpoint section names and helpers for the run directory. Not installed. */
#ifndef DD_TRAIN_INTERNAL_H
#define DD_TRAIN_INTERNAL_H

#include <string.h>

#include <cjson/cJSON.h>

#include "distdpd/param.h"
#include "distdpd/train.h"

#define DD_TRAIN_CKPT_VERSION 1u /* layout of the trainer's sections (section "trainer") */
#define DD_TRAIN_PATH_MAX 4096
#define DD_RUN_ID_LEN 32 /* hex digits of a run id (128 bits) */
#define DD_DATA_ID_N 6   /* data set identity: n[train, val, test], hash[train, val, test] */

/* Bytes one evaluation forward call may use for the model workspaces (and a DPD's
 * intermediate output): 256 MiB. dd_trainer_create lowers the segments per call to fit
 * (the metrics do not depend on it); when a single nperseg segment does not fit, each
 * segment is streamed through dd_model_run_stream in bounded chunks instead (same
 * outputs). A variable so that tests can lower it. */
extern size_t dd_eval_ws_cap; /* DD_TRAIN_EVAL_WS_CAP unless a test lowers it */
extern size_t dd_eval_chunk;  /* DD_TRAIN_EVAL_CHUNK unless a test changes it */

/* One evaluation split cut into padded segments. */
typedef struct {
    size_t n;        /* samples in the split (0 = not evaluated) */
    size_t nseg;     /* ceil(n / nperseg) */
    size_t npad;     /* nseg * nperseg */
    size_t nfull;    /* whole segments, read in place from the data set */
    dd_cf32 *tail;   /* the last, partial segment's input, zero-padded to nperseg
                        (owned; NULL when n is a multiple of nperseg) */
    dd_cf32 *ref;    /* reference output, padded (owned) */
    dd_cf32 *pred;   /* last prediction (owned) */
    /* true PA evaluation (DPD with a simulated PA; the reference is ref's first n
     * samples, G x, and the DPD's output goes through pred) */
    dd_cf32 *ty;     /* true PA output (n) */
    dd_eval_metrics base; /* true PA without DPD */
    dd_eval_metrics nodpd; /* the PA model without DPD (dd_trainer_no_dpd_baseline) */
} dd_eval_split;

struct dd_trainer {
    dd_train_cfg cfg;      /* resolved configuration */
    const dd_dataset *ds;  /* borrowed */
    dd_strategy st;        /* copy; ops NULL = single process; rank/nranks normalised */
    int rank, nranks;
    char data_path[DD_TRAIN_PATH_MAX]; /* recorded in checkpoints (may be empty) */

    dd_model *m;           /* trained model */
    size_t n;              /* arena floats (the model's table total) */
    /* parameter and gradient storage: element i of the arena, plo <= i < phi, is
     * params[i - plo] (all of [0, n) unless sharded; dd_arena_calloc, owned) */
    float *params, *grads;
    size_t plo, phi;       /* parameter slice kept */
    size_t glo, ghi;       /* gradient slice kept */
    size_t olo, ohi;       /* optimiser range: the slice this process updates */
    /* ranged storage (a strategy's layout_ranges, e.g. a pipeline's interleaved stage
     * groups): parameters, gradients and optimiser state hold the arena's ranges
     * [rlo[k], rhi[k]) one after the other, and plo/phi, glo/ghi, olo/ohi are the local
     * range [0, sum of the lengths) */
    int ranged;            /* the storage is ranged (even with no range: a rank without
                              parameters of its own) */
    size_t nrg;
    size_t *rlo, *rhi;
    /* tensor parallelism (a strategy's tp op with size > 1): m is this rank's shard of the
     * model, mwhole the whole model (its tables: checkpoints, the report); NULL otherwise */
    dd_model *mwhole;
    size_t nwhole;         /* the whole model's arena floats (n when not a shard) */
    /* mapped storage (ranged or a shard): local floats [dst, dst + len) of the parameters,
     * gradients and optimiser state are the whole model's [src, src + len); floats no run
     * covers (a shard's padding) stay zero */
    int mapped;
    dd_optim_run *map;
    size_t nmap;
    /* the map restricted to the optimiser's slice [olo, ohi) of the local storage and
     * shifted to it (layout_optim); == map when the optimiser holds all of it */
    dd_optim_run *omap;
    size_t nomap;
    dd_optim *opt;         /* optimiser of ohi - olo floats */
    dd_stage_src psrc;     /* sharded parameters: where forwards take them */
    int has_psrc;          /* psrc is set */
    int collective_eval;   /* every rank runs the evaluation forwards (sharded params) */
    dd_lr_sched sched;
    dd_rng rng;            /* trainer RNG (checkpointed; reserved for stochastic features) */

    dd_model *pa;          /* frozen PA model (DLA/ILA), else NULL */
    float *pa_params;      /* owned */
    size_t pa_n;

    /* training data */
    dd_framing fr;
    dd_sampler smp;
    uint64_t nbatches;
    const dd_cf32 *src, *dst; /* model input / target arrays of the train split (borrowed) */
    float src_scale, dst_scale; /* applied while gathering (DLA target G x, ILA input y/G) */

    /* per-step buffers, sized for the largest local slice */
    size_t bmax;
    float *xin, *tgt, *out1, *out2, *dout, *du;
    float *ws_m, *ws_p;
    /* batch chunks (batch_chunks.c): cnc workspaces of ccf frames each (of the model,
     * and of the PA model for DLA), (cnc - 1) x n gradient floats; allocated on first use */
    size_t cnc, ccf;
    float **cws_m, **cws_p, *cgrads;

    /* evaluation */
    int eval_here;         /* this rank runs evaluation forwards (rank 0, or every rank
                              with collective evaluation) */
    size_t eb;             /* segments per forward (cfg.eval_batch, lowered to fit dd_eval_ws_cap) */
    int estream;           /* 1: one segment's workspace exceeds the cap and the models are not
                              all recurrent (or eb chunks do not fit): segments are streamed */
    size_t echunk;         /* > 0: eb segments per call in chunks of echunk steps
                              (dd_model_infer_chunked: recurrent models, long segments) */
    float *ews_m, *ews_p, *eout1;
    dd_eval_split ev[2];   /* [0] val, [1] test */
    dd_pa *true_pa;        /* noiseless clone (owned) or NULL */
    int nodpd_ok;          /* ev[].nodpd holds the baseline of the current PA parameters */

    /* cursor and accumulators */
    int epoch;             /* completed epochs */
    uint64_t batch;        /* batches done in the current epoch */
    uint64_t step;         /* optimiser steps */
    double ep_loss_sum;    /* sum of batch losses in the current epoch */
    double ep_time;        /* seconds of steps in the current epoch */
    double last_lr;        /* lr of the last step */
    double ep_gnorm_max;   /* largest gradient norm in the current epoch */

    /* rescaling (dd_trainer_rescale): a new global batch waiting for the epoch boundary,
     * and the linear warm-up of the learning rate after it was applied */
    uint64_t rs_batch;     /* pending new batch; 0 = none */
    int64_t rs_warmup;     /* warm-up steps of the pending rescale */
    int64_t rs_start;      /* step the last rescale was applied at */
    int64_t rs_len;        /* its warm-up steps (0 = none) */
    double rs_from;        /* lr factor at rs_start (old lr / new lr), rising to 1 */
    int rs_applied;        /* set when a rescale was applied; cleared by the caller */

    int best_epoch;        /* 0 = none */
    double best_metric;

    dd_epoch_record *hist;
    size_t nhist, caphist;

    /* identity of the run (written into checkpoints when set; dd_train_run sets them) */
    char run_id[DD_RUN_ID_LEN + 1]; /* 32 hex digits, "" = none */
    uint64_t data_id[DD_DATA_ID_N]; /* split lengths and content hashes (dd_train_data_id) */
    int has_data_id;
};

/* Fields of one serialised epoch record (doubles). The last one holds flags:
 * DD_REC_FLAG_COMM_EXACT = the communication fields (33..35) are stored as they are (NaN:
 * not recorded); records without it hold 0 for "not recorded" there. */
#define DD_REC_FIELDS 48
#define DD_REC_FLAGS 47
#define DD_REC_FLAG_COMM_EXACT 1.0
/* Flags 2 (added to the value above): fields 36..39 hold world_size, restart,
 * ckpt_stall_s and ckpt_write_s (NaN: none); records without it have world_size 0 (not
 * recorded), restart 0 and no checkpoint times. */
#define DD_REC_FLAG_FT 2.0
void dd_rec_pack(const dd_epoch_record *r, double *v);
void dd_rec_unpack(const double *v, dd_epoch_record *r);

/* The selection metric of a record (lower is better) under cfg. */
double dd_rec_select_metric(const dd_train_cfg *cfg, const dd_epoch_record *r);

/* Adds "build" (git commit and build type at configure time, SIMD path, BLAS and its core
 * type) and "data_checksum" (CRC32C of each file of the data set `data` and of all of
 * them in name order; "error" instead when one cannot be read) to config.json's root. */
void dd_train_provenance(cJSON *root, const char *data);

/* Configuration as a cJSON object (caller cJSON_Delete) / from one. */
cJSON *dd_train_cfg_json_obj(const dd_train_cfg *c);
dd_status dd_train_cfg_from_obj(const cJSON *o, const char *where, dd_train_cfg *c);

/* Sharded parameters back to a whole parameter arena (this rank alone, after training:
 * the report of rank 0); the parameter source is cleared. Errors: DD_ERR_NOMEM. */
dd_status dd_trainer_unshard_params(dd_trainer *tr);
/* The storage this trainer keeps of a whole parameter arena `full` (a checkpoint's, the
 * initial values) into its parameter storage: its slice or its ranges. */
void dd_trainer_take_params(dd_trainer *tr, const float *full);
/* Its optimiser's part of a whole optimiser-state blob (any checkpoint, any layout). */
dd_status dd_trainer_take_optim(dd_trainer *tr, const void *blob, size_t bytes);

/* Records the data set path stored in checkpoints. */
void dd_trainer_set_data_path(dd_trainer *tr, const char *path);
/* Records the run id and the data set identity written into checkpoints (sections
 * run_id and data_id; either may be NULL = none). */
void dd_trainer_set_identity(dd_trainer *tr, const char *run_id, const uint64_t data_id[DD_DATA_ID_N]);
/* The identity of a data set: split lengths and a 64-bit hash of each split's input and
 * output samples (their bits). */
void dd_train_data_id(const dd_dataset *ds, uint64_t id[DD_DATA_ID_N]);

/* Spec <-> 9 doubles. */
void dd_spec_pack(const dd_spec *s, double v[9]);
void dd_spec_unpack(const double v[9], dd_spec *s);

/* Writes text atomically (tmp, fsync, rename). */
dd_status dd_train_write_text(const char *path, const char *text, size_t len);

/* The checkpoint dd_trainer_save would write to path, in memory: every section copied
 * into a writer (*out, the caller commits or aborts it). The snapshot of the state at
 * this moment; the trainer may go on at once. */
dd_status dd_trainer_snapshot(const dd_trainer *tr, const char *path, dd_ckpt_writer **out);

/* Background checkpoint writing (src/train/ckpt_async.c): a job commits its writers in
 * order (dd_ckpt_write_commit: temporary file, fsync, rename, directory fsync), then,
 * when link_to is set, makes link_to a hard link to the last writer's file (a link under
 * a temporary name renamed over link_to, then a directory fsync), then, when prune_dir is
 * set, removes all but the newest `keep` files step-NNNNNNNNNN.ckpt of prune_dir. At
 * most one job is in flight: submitting joins the previous one first. */
#define DD_CKPT_JOB_MAX 2
typedef struct {
    dd_ckpt_writer *w[DD_CKPT_JOB_MAX]; /* owned by the job once submitted */
    int nw;
    char link_to[DD_TRAIN_PATH_MAX + 32];   /* "" = none */
    char prune_dir[DD_TRAIN_PATH_MAX + 32]; /* "" = none */
    size_t keep;
    long tag;                               /* the caller's (e.g. the epoch record) */
} dd_ckpt_job;
typedef struct dd_ckpt_async dd_ckpt_async;
/* sync = 1: jobs run inside submit (no thread). */
dd_status dd_ckpt_async_create(int sync, dd_ckpt_async **out);
/* Starts the job (*job is taken over and cleared). A job still in flight is joined
 * first (callers join before, to get its times): its error is returned and this job is
 * discarded. Errors: DD_ERR_INTERNAL (no thread), the previous job's. */
dd_status dd_ckpt_async_submit(dd_ckpt_async *a, dd_ckpt_job *job);
/* Waits for the job in flight; returns its error (the message names the file). *wait_s:
 * seconds waited; *write_s, *tag: the job's write seconds and tag (NaN / -1 when no job
 * finished since the last join). Any output may be NULL. */
dd_status dd_ckpt_async_join(dd_ckpt_async *a, double *wait_s, double *write_s, long *tag);
/* Joins (an error is dropped: the caller joined first if it cared) and frees. */
void dd_ckpt_async_destroy(dd_ckpt_async **a);
/* Frees a job's writers without writing. */
void dd_ckpt_job_abort(dd_ckpt_job *job);

/* HTML report of a finished run (src/train/train_report.c). */
dd_status dd_train_write_report(dd_trainer *tr, const char *dir, const char *title_extra);

/* Checks that the model sections under prefix ("" or "pa.") of a checkpoint describe m
 * exactly; *params points into the reader. */
dd_status dd_train_ckpt_check_model(const dd_ckpt_reader *r, const char *path, const char *prefix,
                                    const dd_model *m, const float **params);
/* Creates the model described by the sections under prefix and copies its parameters
 * into a new arena (*params, dd_free). */
dd_status dd_train_ckpt_read_model(const dd_ckpt_reader *r, const char *path, const char *prefix,
                                   dd_model **m, float **params);
/* mkdir -p. */
dd_status dd_train_mkdirs(const char *path);

/* Batch chunks (batch_chunks.c). The chunk count for a slice of bl frames (1: the
 * slice runs whole) and *cf, frames per chunk (the last may have fewer); it depends on
 * bl and the model's size and storage, never on the thread count. */
size_t dd_trainer_chunk_plan(const dd_trainer *tr, size_t bl, size_t *cf);
/* dd_trainer_compute_grads for a slice of bl frames at position lo in nc chunks of cf
 * frames (dd_trainer_chunk_plan): src->params and src->grads (whole storage) are used,
 * its callbacks are not (the caller makes them). Adds into src->grads; *sse: the sum. */
dd_status dd_trainer_chunk_grads(dd_trainer *tr, uint64_t epoch, uint64_t lo, size_t bl, size_t nc, size_t cf,
                                 uint64_t global, const dd_stage_src *src, double *sse);
/* Frees the chunk buffers (allocated again on next use). */
void dd_trainer_chunks_free(dd_trainer *tr);

/* Signal helpers. */
dd_status dd_train_target_gain(const dd_cf32 *x, const dd_cf32 *y, size_t n, int mode, double *g);

#endif
