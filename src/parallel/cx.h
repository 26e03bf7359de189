/* Gradient compression inside the strategies (internal to src/parallel): what data
 * parallelism (dp.c) and the data-parallel dimension of a model-parallel grid
 * (model_parallel.c) share about their compressor: the --compress / --error-feedback
 * options, the configuration checkpointed beside the state, each rank's state gathered
 * for a checkpoint, and the epoch's communication figures (comm_bytes_per_step,
 * compression_ratio, compress_time_s) that survive a mid-epoch resume. See
 * docs/compress.md. */
#ifndef DD_PARALLEL_CX_H
#define DD_PARALLEL_CX_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "distdpd/ckpt.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"
#include "distdpd/parallel.h"

/* --compress and --error-feedback into *c (DD_ERR_ARG naming the option); c keeps its
 * other fields. */
dd_status dd_cx_parse_args(const dd_strategy_args *a, dd_compress_cfg *c);

/* The compressor's settings as numbers (checkpoint section PREFIX.cfg). */
#define DD_CX_CFG_N 12
void dd_cx_cfg_pack(const dd_compressor *cp, double *v);

/* Writes PREFIX.name, PREFIX.cfg and compress.spec (what --resume without --compress
 * continues with). */
dd_status dd_cx_save_cfg(dd_ckpt_writer *w, const dd_compressor *cp, const char *prefix);
/* *same = 1 when the checkpoint has PREFIX.name and PREFIX.cfg of this compressor and
 * settings; otherwise 0 and, on rank 0 (log = 1), a note that the state starts at zero. */
dd_status dd_cx_cfg_match(const dd_ckpt_reader *r, const dd_compressor *cp, const char *prefix, int log, int *same);

/* Every rank's per-rank state (dd_compress_state_export) and shared state on rank 0 of
 * c, in rank order: cnt[q] / scnt[q] floats of rank q at st + off[q] / sh + soff[q]. */
typedef struct {
    float *st, *sh;
    size_t *cnt, *off, *scnt, *soff; /* [size] each, one allocation */
    size_t total, stotal;
    int ok; /* holds the current step's state */
} dd_cx_gathered;
dd_status dd_cx_gather(const dd_compressor *cp, dd_comm *c, dd_cx_gathered *g);
void dd_cx_gathered_free(dd_cx_gathered *g);

/* The epoch's communication figures: `sent` is the caller's count of gradient bytes this
 * rank sent, `steps` its optimiser steps, both since it was created. */
typedef struct {
    uint64_t steps0, sent0, elem0, payload0;
    double ctime0;
    uint64_t prev_steps; /* the part of the epoch before the checkpoint resumed from */
    double prev[4];      /* rank 0: its sums over every rank, scaled to this many ranks */
    double ckpt[6];      /* before_save: the epoch so far summed over the ranks */
    int ckpt_ok;
} dd_cx_epoch;
/* A new epoch starts (or a checkpoint without figures was loaded). */
void dd_cx_epoch_start(dd_cx_epoch *e, uint64_t steps, uint64_t sent, const dd_compressor *cp);
/* before_save, every rank of c: the epoch so far summed over the ranks (once per step). */
dd_status dd_cx_epoch_gather(dd_cx_epoch *e, dd_comm *c, uint64_t steps, uint64_t sent, const dd_compressor *cp);
/* save on rank 0: section dp.epoch_comm (ranks, steps, bytes, elements, payload, s). */
dd_status dd_cx_epoch_save(const dd_cx_epoch *e, dd_ckpt_writer *w);
/* load on every rank: the part of the epoch the checkpoint had done. */
dd_status dd_cx_epoch_load(dd_cx_epoch *e, const dd_ckpt_reader *r, dd_comm *c, uint64_t steps, uint64_t sent,
                           const dd_compressor *cp);
/* epoch_stats, every rank of c: out[0] bytes per rank per step, out[1] the compression
 * ratio (1 without a compressor), out[2] compression seconds (mean over ranks); then a
 * new epoch starts. */
dd_status dd_cx_epoch_end(dd_cx_epoch *e, dd_comm *c, uint64_t steps, uint64_t sent, const dd_compressor *cp,
                          double out[3]);

/* Reporting: "compress" (the spec) and "rank0_compression" in parallel.json; the
 * summary line (steps: this run's optimiser steps) and the epoch line (nothing without
 * a compressor). */
dd_status dd_cx_report(const dd_compressor *cp, cJSON *o);
void dd_cx_print_summary(const dd_compressor *cp, double steps, FILE *f);
void dd_cx_print_epoch(const dd_compressor *cp, const dd_epoch_record *rec, uint64_t steps, FILE *f);

#endif
