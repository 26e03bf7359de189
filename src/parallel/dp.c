/* Synchronous data parallelism (parallel.h): a strategy (dd_strategy) on a dd_comm.
 * Parameters are broadcast from rank 0 at setup; each step computes this rank's slice of
 * the global batch with the trainer's blocks; as each stage's backward finishes, its
 * parameter-table entries' gradient ranges (reverse layer order) are grouped into
 * buckets whose non-blocking allreduces start as soon as the bucket is complete and are
 * polled at every stage boundary, so they overlap the backward of the earlier stages;
 * after backward one small float64 reduction (loss sum, stop flags, the previous step's
 * exposed time) joins and everything is polled to completion, timing the part that was
 * not hidden; then every rank clips and steps identically. With --shard zero1 the
 * optimiser state is partitioned: each rank updates its slice of the parameters and the
 * slices are allgathered. See docs/parallel.md. */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "distdpd/ckpt.h"
#include "distdpd/parallel.h"
#include "parallel/cx.h"

#define DP_MAX_VALS 64 /* values of the trainer's reduction (it passes 1) */
#define DP_EXTRA 2     /* appended: stop flag, previous step's exposed seconds */

typedef struct {
    size_t lo, hi; /* gradient floats [lo, hi) */
} dp_bucket;

struct dd_dp {
    dd_comm *c;      /* borrowed */
    dd_dp_cfg cfg;
    int rank, size;
    size_t bucket_floats; /* 0: blocking mode */

    /* bucket layout: learnt on the first step, checked on the next ones */
    dp_bucket *b;
    size_t nb, capb;
    int layout_known;
    size_t layout_n; /* arena length the layout is for */

    /* the step in progress */
    dd_comm_req **req;    /* per bucket (capb entries); NULL when done */
    size_t started;       /* buckets started this step */
    size_t done;          /* buckets completed this step */
    size_t open_hi;       /* top of the bucket being collected; SIZE_MAX: none */
    size_t expect_hi;     /* hi the next after_backward call must have */
    int in_step;          /* after_backward has been called this step */
    float *grads;         /* arena of the step */
    double t_first;       /* first bucket started */
    double t_last_done;   /* when the last completion was seen */
    double step_comm;     /* seconds in comm calls this step */
    uint64_t step_bytes;

    /* stop agreement */
    const volatile int *local_stop;
    volatile int agreed_stop;

    dd_dp_stats st;
    double prev_exposed; /* this rank's exposed time of the last step (sent with the next) */
    uint64_t nsteps;     /* steps since create (for fault injection) */
    int fail_rank;       /* fault injection (DD_DP_FAIL=RANK:STEP): this rank fails ... */
    uint64_t fail_step;  /* ... at this step (1-based); -1 / 0: none */
    uint64_t sent_mark;  /* comm bytes_sent at the start of the step */
    uint64_t step_wire;  /* compression: gradient bytes this rank sent this step (the
                            compressor's wire count: e.g. an allgather's p - 1 copies) */

    /* gradient compression (NULL: none) */
    dd_compressor *cp;
    dd_cx_gathered cst;  /* rank 0 after before_save: every rank's state (cst.ok: of the
                            current step) */
    dd_cx_epoch ep;      /* the epoch's communication figures (section dp.epoch_comm) */

    /* the trainer's layout: bucket ranges are its parameter-table entries */
    const dd_param_table *table;
    dd_trainer *tr;        /* the trainer of the step in progress */
    float *step_grads;     /* its gradient arena */

    /* --shard zero1: the optimiser state of [part[r], part[r + 1]) lives on rank r */
    size_t *part;          /* size + 1 boundaries (NULL: not sharded) */
    size_t *pcount, *pdispl; /* bytes of each rank's slice and its offset, for allgathers */
    void *full_optim;      /* rank 0 after before_save: the whole optimiser-state blob */
    size_t full_optim_bytes;
    int full_ok;           /* full_optim holds the current step's state */
};

void dd_dp_cfg_default(dd_dp_cfg *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->algo = DD_ALLREDUCE_RING;
    c->bucket_mb = 4.0;
    c->shard = DD_SHARD_NONE;
    dd_compress_cfg_default(&c->compress);
}

dd_status dd_dp_cfg_check(const dd_dp_cfg *c) {
    if (!c) return dd_error(DD_ERR_ARG, "data-parallel configuration: NULL");
    if ((int)c->algo < 0 || (int)c->algo >= dd_allreduce_count())
        return dd_error(DD_ERR_ARG, "data-parallel configuration: algo = %d is not an allreduce algorithm", (int)c->algo);
    if (!(c->bucket_mb >= 0.0 && c->bucket_mb <= 4096.0))
        return dd_error(DD_ERR_ARG, "data-parallel configuration: bucket_mb = %g is out of range [0, 4096]", c->bucket_mb);
    if (c->shard != DD_SHARD_NONE && c->shard != DD_SHARD_ZERO1)
        return dd_error(DD_ERR_ARG, "data-parallel configuration: shard = %s is not this strategy's (none or zero1; "
                                    "zero2 and zero3 are the sharded strategy's)",
                        dd_shard_name(c->shard));
    return dd_compress_cfg_check(&c->compress);
}

dd_status dd_dp_create(dd_comm *comm, const dd_dp_cfg *cfg, dd_dp **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_dp_create: NULL output");
    *out = NULL;
    if (!comm) return dd_error(DD_ERR_ARG, "dd_dp_create: NULL communicator");
    dd_dp_cfg def;
    if (!cfg) {
        dd_dp_cfg_default(&def);
        cfg = &def;
    }
    DD_TRY(dd_dp_cfg_check(cfg));
    dd_dp *dp = dd_calloc(1, sizeof *dp);
    if (!dp) return dd_error(DD_ERR_NOMEM, "out of memory for the data-parallel strategy");
    dp->c = comm;
    dp->cfg = *cfg;
    dp->rank = dd_comm_rank(comm);
    dp->size = dd_comm_size(comm);
    double bf = cfg->bucket_mb * 1048576.0 / sizeof(float);
    dp->bucket_floats = cfg->bucket_mb > 0 ? (bf < 1.0 ? 1 : (size_t)bf) : 0;
    dp->open_hi = SIZE_MAX;
    dp->st.prev_exposed_mean_s = NAN;
    dp->fail_rank = -1;
    {
        const char *inj = getenv("DD_DP_FAIL"); /* test-only fault injection: "RANK:STEP" */
        int fr = -1;
        unsigned long long fs = 0;
        if (inj && sscanf(inj, "%d:%llu", &fr, &fs) == 2 && fr >= 0 && fs >= 1) {
            dp->fail_rank = fr;
            dp->fail_step = fs;
        }
    }
    if (strcmp(cfg->compress.name, "none") != 0) {
        dd_status s = dd_compress_create(&cfg->compress, &dp->cp);
        if (s != DD_OK) {
            dd_free(dp);
            return s;
        }
    }
    *out = dp;
    return DD_OK;
}

dd_compressor *dd_dp_compressor(const dd_dp *dp) { return dp ? dp->cp : NULL; }

static void free_requests(dd_dp *dp) {
    for (size_t i = 0; dp->req && i < dp->capb; i++) dd_comm_req_free(&dp->req[i]);
}

static void step_reset(dd_dp *dp) {
    free_requests(dp);
    dp->started = dp->done = 0;
    dp->open_hi = SIZE_MAX;
    dp->in_step = 0;
    dp->grads = NULL;
    dp->step_comm = 0;
    dp->step_bytes = 0;
}

void dd_dp_destroy(dd_dp **dpp) {
    if (!dpp || !*dpp) return;
    dd_dp *dp = *dpp;
    free_requests(dp);
    free(dp->req);
    free(dp->b);
    dd_compress_destroy(&dp->cp);
    dd_cx_gathered_free(&dp->cst);
    free(dp->part);
    free(dp->pcount);
    free(dp->full_optim);
    dd_free(dp);
    *dpp = NULL;
}

int dd_dp_rank(const dd_dp *dp) { return dp ? dp->rank : 0; }
int dd_dp_size(const dd_dp *dp) { return dp ? dp->size : 1; }

void dd_dp_set_stop_source(dd_dp *dp, const volatile int *local) {
    if (dp) dp->local_stop = local;
}
const volatile int *dd_dp_stop_flag(const dd_dp *dp) { return dp ? &dp->agreed_stop : NULL; }

size_t dd_dp_num_buckets(const dd_dp *dp) { return dp && dp->layout_known ? dp->nb : 0; }

dd_status dd_dp_bucket(const dd_dp *dp, size_t i, size_t *lo, size_t *hi) {
    if (!dp || !lo || !hi) return dd_error(DD_ERR_ARG, "dd_dp_bucket: NULL argument");
    if (!dp->layout_known || i >= dp->nb)
        return dd_error(DD_ERR_ARG, "dd_dp_bucket: bucket %zu is out of range [0, %zu)", i, dd_dp_num_buckets(dp));
    *lo = dp->b[i].lo;
    *hi = dp->b[i].hi;
    return DD_OK;
}

void dd_dp_stats_get(const dd_dp *dp, dd_dp_stats *st) {
    if (!st) return;
    if (!dp) {
        memset(st, 0, sizeof *st);
        st->prev_exposed_mean_s = NAN;
        return;
    }
    *st = dp->st;
}

void dd_dp_stats_reset(dd_dp *dp) {
    if (!dp) return;
    memset(&dp->st, 0, sizeof dp->st);
    dp->st.prev_exposed_mean_s = NAN;
}

/* ---------------------------------------------------------------- buckets */

/* Polls every bucket in flight once. */
static dd_status poll_all(dd_dp *dp) {
    double t0 = dd_comm_wtime();
    dd_status s = DD_OK;
    for (size_t i = 0; i < dp->started && s == DD_OK; i++) {
        if (!dp->req[i]) continue;
        int fin = 0;
        if ((s = dd_comm_test(dp->req[i], &fin)) != DD_OK) break;
        if (fin) {
            dd_comm_req_free(&dp->req[i]);
            dp->done++;
            dp->t_last_done = dd_comm_wtime();
        }
    }
    dp->step_comm += dd_comm_wtime() - t0;
    return s;
}

/* Records bucket k = [lo, hi) of this step (learning the layout on the first step,
 * checking it afterwards: every rank must start the same buckets in the same order). */
static dd_status layout_bucket(dd_dp *dp, size_t k, size_t lo, size_t hi) {
    if (!dp->layout_known) {
        if (k >= dp->capb) {
            size_t cap = dp->capb ? 2 * dp->capb : 8;
            dp_bucket *nb = realloc(dp->b, cap * sizeof *nb);
            if (!nb) return dd_error(DD_ERR_NOMEM, "out of memory for the gradient buckets");
            dp->b = nb;
            dd_comm_req **nr = realloc(dp->req, cap * sizeof *nr);
            if (!nr) return dd_error(DD_ERR_NOMEM, "out of memory for the gradient buckets");
            for (size_t i = dp->capb; i < cap; i++) nr[i] = NULL;
            dp->req = nr;
            dp->capb = cap;
        }
        dp->b[k].lo = lo;
        dp->b[k].hi = hi;
        dp->nb = k + 1;
        return DD_OK;
    }
    if (k >= dp->nb || dp->b[k].lo != lo || dp->b[k].hi != hi)
        return dd_error(DD_ERR_INTERNAL,
                        "data parallel: bucket %zu of this step is [%zu, %zu), the layout has %s: the trainer's "
                        "gradient ranges changed between steps",
                        k, lo, hi, k < dp->nb ? "another range" : "fewer buckets");
    return DD_OK;
}

/* Starts the reduction of bucket [lo, hi) of grads. */
static dd_status start_bucket(dd_dp *dp, float *grads, size_t lo, size_t hi) {
    size_t k = dp->started;
    DD_TRY(layout_bucket(dp, k, lo, hi));
    double t0 = dd_comm_wtime();
    if (k == 0) dp->t_first = t0;
    dd_status s = dd_comm_iallreduce(dp->c, dp->cfg.algo, grads + lo, hi - lo, DD_F32, &dp->req[k]);
    dp->step_comm += dd_comm_wtime() - t0;
    if (s != DD_OK) return dd_error_prefix(s, "data parallel: gradient bucket %zu [%zu, %zu): ", k, lo, hi);
    dp->started++;
    dp->step_bytes += (uint64_t)(hi - lo) * sizeof(float);
    return DD_OK;
}

static dd_status bucket_range(dd_dp *dp, float *grads, size_t lo, size_t hi) {
    if (dp->bucket_floats == 0 || (dp->size == 1 && !dp->cp)) return DD_OK; /* blocking mode / alone */
    if (!dp->in_step) {
        step_reset(dp);
        dp->in_step = 1;
        dp->grads = grads;
        dp->expect_hi = hi;
    }
    if (grads != dp->grads || hi != dp->expect_hi || lo > hi)
        return dd_error(DD_ERR_INTERNAL, "data parallel: after_backward ranges must descend contiguously "
                                         "(got [%zu, %zu), expected hi = %zu)",
                        lo, hi, dp->expect_hi);
    if (dp->open_hi == SIZE_MAX) dp->open_hi = hi;
    dp->expect_hi = lo;
    if (dp->open_hi - lo >= dp->bucket_floats || lo == 0) {
        if (dp->open_hi > lo) {
            if (dp->cp) { /* compression: the buckets are exchanged after backward */
                DD_TRY(layout_bucket(dp, dp->started, lo, dp->open_hi));
                dp->started++;
            } else {
                DD_TRY(start_bucket(dp, grads, lo, dp->open_hi));
            }
        }
        dp->open_hi = SIZE_MAX;
    }
    return dp->cp ? DD_OK : poll_all(dp);
}

/* Compression: exchanges every bucket of the step (last layer first) through the
 * compressor, blocking. The layout comes from this step's after_backward calls (one bucket
 * [0, n) without them or with bucket_mb = 0). */
static dd_status compressed_step(dd_dp *dp, float *grads, size_t n, double t_end_bwd) {
    dd_status s = DD_OK;
    if (dp->bucket_floats == 0 || !dp->in_step) {
        step_reset(dp);
        DD_TRY(layout_bucket(dp, 0, 0, n));
        dp->started = 1;
        dp->expect_hi = 0;
        dp->grads = grads;
    }
    if (dp->expect_hi != 0 || grads != dp->grads)
        return dd_error(DD_ERR_INTERNAL, "data parallel: the gradient ranges of this step stop at %zu, not 0",
                        dp->expect_hi);
    if (!dp->layout_known) {
        dp->layout_known = 1;
        dp->layout_n = n;
    } else if (dp->started != dp->nb) {
        return dd_error(DD_ERR_INTERNAL, "data parallel: %zu buckets this step, the layout has %zu", dp->started, dp->nb);
    }
    dp->t_first = t_end_bwd;
    dd_compress_stats a, b;
    dd_compress_stats_get(dp->cp, &a);
    for (size_t k = 0; k < dp->nb; k++) {
        s = dd_compress_exchange(dp->cp, dp->c, dp->cfg.algo, grads, dp->b[k].lo, dp->b[k].hi);
        if (s != DD_OK)
            return dd_error_prefix(s, "data parallel: compressed bucket %zu [%zu, %zu): ", k, dp->b[k].lo, dp->b[k].hi);
        dp->step_bytes += (uint64_t)(dp->b[k].hi - dp->b[k].lo) * sizeof(float);
    }
    dd_compress_stats_get(dp->cp, &b);
    dp->step_wire = b.bytes_sent - a.bytes_sent;
    dp->done = dp->started;
    return DD_OK;
}

static dd_status reduce_step(dd_dp *dp, float *grads, size_t n, double *vals, int nv) {
    const double t_end_bwd = dd_comm_wtime();
    dd_status s = DD_OK;
    dd_comm_req *vreq = NULL;
    double v[DP_MAX_VALS + DP_EXTRA];
    if (nv < 0 || nv > DP_MAX_VALS)
        return dd_error(DD_ERR_ARG, "data parallel: %d values to reduce (at most %d)", nv, DP_MAX_VALS);
    dp->nsteps++;
    if (dp->fail_rank == dp->rank && dp->nsteps == dp->fail_step) {
        step_reset(dp);
        return dd_error(DD_ERR_INTERNAL, "injected failure on rank %d at step %llu (fault injection for tests)",
                        dp->rank, (unsigned long long)dp->nsteps);
    }
    if (nv > 0) memcpy(v, vals, (size_t)nv * sizeof(double));
    v[nv] = dp->local_stop && *dp->local_stop ? 1.0 : 0.0;
    v[nv + 1] = dp->prev_exposed;
    const size_t nvv = (size_t)nv + DP_EXTRA;

    if (dp->cp) {
        if ((s = compressed_step(dp, grads, n, t_end_bwd)) != DD_OK) goto fail;
        if (dp->size > 1 && (s = dd_comm_allreduce(dp->c, dp->cfg.algo, v, nvv, DD_F64)) != DD_OK) {
            dd_error_prefix(s, "data parallel: loss allreduce: ");
            goto fail;
        }
        dp->t_last_done = dd_comm_wtime();
        dp->step_comm = dp->t_last_done - t_end_bwd;
    } else if (dp->size == 1) { /* alone: nothing to reduce, still count steps and honour stop */
        step_reset(dp);
    } else if (dp->bucket_floats == 0) { /* blocking mode: one allreduce after backward */
        step_reset(dp);
        dp->t_first = t_end_bwd;
        if ((s = layout_bucket(dp, 0, 0, n)) != DD_OK) goto fail;
        dp->layout_known = 1;
        dp->layout_n = n;
        s = dd_comm_allreduce(dp->c, dp->cfg.algo, grads, n, DD_F32);
        if (s != DD_OK) {
            dd_error_prefix(s, "data parallel: gradient allreduce: ");
            goto fail;
        }
        dp->step_bytes = (uint64_t)n * sizeof(float);
        s = dd_comm_allreduce(dp->c, dp->cfg.algo, v, nvv, DD_F64);
        if (s != DD_OK) {
            dd_error_prefix(s, "data parallel: loss allreduce: ");
            goto fail;
        }
        dp->t_last_done = dd_comm_wtime();
        dp->step_comm = dp->t_last_done - t_end_bwd;
    } else {
        if (!dp->in_step) { /* the trainer made no after_backward call: one bucket */
            step_reset(dp);
            dp->in_step = 1;
            dp->grads = grads;
            dp->expect_hi = 0;
            if (n > 0 && (s = start_bucket(dp, grads, 0, n)) != DD_OK) goto fail;
        }
        if (dp->expect_hi != 0 || grads != dp->grads) {
            s = dd_error(DD_ERR_INTERNAL, "data parallel: the gradient ranges of this step stop at %zu, not 0",
                         dp->expect_hi);
            goto fail;
        }
        if (!dp->layout_known) {
            dp->layout_known = 1;
            dp->layout_n = n;
        } else if (dp->started != dp->nb) {
            s = dd_error(DD_ERR_INTERNAL, "data parallel: %zu buckets this step, the layout has %zu", dp->started,
                         dp->nb);
            goto fail;
        }
        double t0 = dd_comm_wtime();
        s = dd_comm_iallreduce(dp->c, dp->cfg.algo, v, nvv, DD_F64, &vreq);
        dp->step_comm += dd_comm_wtime() - t0;
        if (s != DD_OK) {
            dd_error_prefix(s, "data parallel: loss allreduce: ");
            goto fail;
        }
        int vdone = 0;
        const double limit = dd_comm_timeout(), tw = dd_comm_wtime();
        for (int spins = 0; dp->done < dp->started || !vdone; spins++) {
            /* a rank that waits gives its core away between polls: with more processes
             * than free cores (oversubscription, other jobs) spinning would slow down the
             * ranks still computing; on an idle core sched_yield returns at once */
            if (spins > 0) sched_yield();
            if (limit > 0 && (spins & 255) == 255 && dd_comm_wtime() - tw > limit) {
                s = dd_error(DD_ERR_TIMEOUT,
                             "data parallel: step reduction: no answer for %.0f s (DISTDPD_COMM_TIMEOUT): a peer is "
                             "stopped, hung or unreachable (%zu of %zu buckets done)",
                             dd_comm_wtime() - tw, dp->done, dp->started);
                goto fail;
            }
            if ((s = poll_all(dp)) != DD_OK) {
                dd_error_prefix(s, "data parallel: gradient allreduce: ");
                goto fail;
            }
            if (!vdone) {
                t0 = dd_comm_wtime();
                s = dd_comm_test(vreq, &vdone);
                dp->step_comm += dd_comm_wtime() - t0;
                if (s != DD_OK) {
                    dd_error_prefix(s, "data parallel: loss allreduce: ");
                    goto fail;
                }
            }
        }
        dd_comm_req_free(&vreq);
    }
    {
        const double t_done = dd_comm_wtime();
        const double exposed = dp->size == 1 && !dp->cp ? 0.0 : t_done - t_end_bwd;
        double hidden = 0.0;
        if (dp->size > 1 && dp->bucket_floats > 0 && dp->started > 0 && !dp->cp) {
            double until = t_end_bwd < t_done ? t_end_bwd : t_done;
            hidden = until > dp->t_first ? until - dp->t_first : 0.0;
        }
        if (nv > 0) memcpy(vals, v, (size_t)nv * sizeof(double));
        if (v[nv] > 0) dp->agreed_stop = 1;
        dp->st.steps++;
        dp->st.comm_s += dp->step_comm;
        dp->st.exposed_s += exposed;
        dp->st.hidden_s += hidden;
        if (exposed > dp->st.max_exposed_s) dp->st.max_exposed_s = exposed;
        dp->st.last_comm_s = dp->step_comm;
        dp->st.last_exposed_s = exposed;
        dp->st.last_hidden_s = hidden;
        dp->st.prev_exposed_mean_s = dp->nsteps > 1 ? v[nv + 1] / (double)dp->size : NAN;
        dp->st.bytes += dp->step_bytes;
        dd_comm_stats cs;
        dd_comm_stats_get(dp->c, &cs);
        /* with compression the compressor's wire count (MPI collectives count only their
         * buffer in the handle's counters); the small loss reduction is left out then */
        dp->st.bytes_sent += dp->cp ? dp->step_wire : cs.bytes_sent - dp->sent_mark;
        dp->sent_mark = cs.bytes_sent;
        dp->prev_exposed = exposed;
        dp->cst.ok = 0;
        dp->ep.ckpt_ok = 0;
    }
    dp->in_step = 0;
    dp->grads = NULL;
    return DD_OK;
fail:
    dd_comm_req_free(&vreq);
    step_reset(dp);
    return s;
}

/* ---------------------------------------------------------------- strategy operations */

static dd_status s_setup(void *self, dd_trainer *tr) {
    dd_dp *dp = self;
    step_reset(dp);
    float *params = NULL;
    size_t plo = 0, phi = 0;
    dd_trainer_storage(tr, &params, NULL, &plo, &phi, NULL, NULL);
    const size_t n = dd_trainer_num_floats(tr);
    if (plo != 0 || phi != n) return dd_error(DD_ERR_ARG, "data parallel: the trainer's parameters are sharded");
    if (dp->size > 1) {
        /* every rank must hold the same model: compare the arena lengths first, so that a
         * mismatch fails on every rank instead of corrupting a broadcast */
        uint64_t mine = (uint64_t)n, *all = calloc((size_t)dp->size, sizeof *all);
        if (!all) return dd_error(DD_ERR_NOMEM, "out of memory");
        dd_status s = dd_comm_allgather(dp->c, &mine, sizeof mine, all);
        if (s == DD_OK) {
            for (int r = 1; r < dp->size; r++)
                if (all[r] != all[0]) {
                    s = dd_error(DD_ERR_MISMATCH,
                                 "data parallel: rank %d has %llu parameter floats, rank 0 has %llu: every rank must "
                                 "train the same model",
                                 r, (unsigned long long)all[r], (unsigned long long)all[0]);
                    break;
                }
        }
        free(all);
        if (s != DD_OK) return s;
    }
    if (dp->layout_known && dp->layout_n != n) { /* another model: learn the layout again */
        dp->layout_known = 0;
        dp->nb = 0;
    }
    dp->table = dd_model_params(dd_trainer_model(tr));
    if (dp->size > 1) {
        dd_status s = dd_comm_bcast(dp->c, params, n * sizeof(float), 0);
        if (s != DD_OK) return dd_error_prefix(s, "data parallel: broadcast of the parameters: ");
    }
    return DD_OK;
}

static dd_status s_bcast(void *self, double *vals, int nv) {
    dd_dp *dp = self;
    if (dp->size == 1 || nv <= 0) return DD_OK;
    dd_status s = dd_comm_bcast(dp->c, vals, (size_t)nv * sizeof(double), 0);
    if (s != DD_OK) return dd_error_prefix(s, "data parallel: broadcast from rank 0: ");
    return DD_OK;
}

/* Sums the epoch's figures so far over the ranks for the checkpoint (rank 0 writes them in
 * save), then gathers every rank's compression state to rank 0 (all ranks call it). */
static dd_status gather_compress_state(dd_dp *dp) {
    dd_status s = dd_cx_epoch_gather(&dp->ep, dp->c, dp->st.steps, dp->st.bytes_sent, dp->cp);
    if (s != DD_OK) return dd_error_prefix(s, "data parallel: ");
    if (!dp->cp || dp->cst.ok) return DD_OK;
    s = dd_cx_gather(dp->cp, dp->c, &dp->cst);
    if (s == DD_OK && dp->rank == 0)
        for (int q = 1; q < dp->size; q++)
            if (dp->cst.cnt[q] != dp->cst.cnt[0])
                s = dd_error(DD_ERR_INTERNAL, "rank %d has %zu floats of compression state, rank 0 %zu", q,
                             dp->cst.cnt[q], dp->cst.cnt[0]);
    if (s != DD_OK) return dd_error_prefix(s, "data parallel: ");
    return DD_OK;
}

static dd_status s_save(void *self, dd_trainer *tr, dd_ckpt_writer *w) {
    dd_dp *dp = self;
    (void)tr;
    DD_TRY(dd_ckpt_add_u64(w, "dp", (uint64_t)dp->size));
    DD_TRY(dd_cx_epoch_save(&dp->ep, w));
    if (!dp->cp) return DD_OK;
    if (!dp->cst.ok)
        return dd_error(DD_ERR_INTERNAL, "data parallel: the compression state was not gathered before the checkpoint "
                                         "(before_save hook not called)");
    DD_TRY(dd_cx_save_cfg(w, dp->cp, "compress"));
    size_t nb = 0;
    DD_TRY(dd_compress_layout_export(dp->cp, NULL, &nb));
    uint64_t *lay = malloc((2 * nb + 1) * sizeof *lay);
    if (!lay) return dd_error(DD_ERR_NOMEM, "out of memory");
    dd_compress_layout_export(dp->cp, lay, &nb);
    dd_status s = dd_ckpt_add(w, "compress.layout", lay, 2 * nb * sizeof *lay);
    free(lay);
    DD_TRY(s);
    DD_TRY(dd_ckpt_add_u64(w, "compress.ranks", (uint64_t)dp->size));
    DD_TRY(dd_ckpt_add(w, "compress.state", dp->cst.st, dp->cst.total * sizeof(float)));
    /* powersgd's Q is the same on every rank: rank 0's */
    return dd_ckpt_add(w, "compress.shared", dp->cst.sh, dp->cst.scnt[0] * sizeof(float));
}

/* Restores the compression state of a checkpoint written by the same compressor. */
static dd_status load_compress(dd_dp *dp, const dd_ckpt_reader *r) {
    int same = 0;
    DD_TRY(dd_cx_cfg_match(r, dp->cp, "compress", dp->rank == 0, &same));
    if (!same) return DD_OK;
    const void *d = NULL;
    size_t bytes = 0;
    DD_TRY(dd_ckpt_get(r, "compress.layout", &d, &bytes));
    if (bytes % (2 * sizeof(uint64_t)))
        return dd_error(DD_ERR_FORMAT, "checkpoint section compress.layout: %zu bytes is not a list of (lo, n) pairs", bytes);
    size_t nb = bytes / (2 * sizeof(uint64_t));
    uint64_t *lay = malloc((2 * nb + 1) * sizeof *lay);
    if (!lay) return dd_error(DD_ERR_NOMEM, "out of memory");
    if (nb) memcpy(lay, d, bytes);
    size_t arena = nb ? (size_t)(lay[2 * (nb - 1)] + lay[2 * (nb - 1) + 1]) : 0;
    dd_status s = dd_compress_layout_import(dp->cp, arena, lay, nb);
    free(lay);
    DD_TRY(s);
    uint64_t N = 0;
    DD_TRY(dd_ckpt_get_u64(r, "compress.ranks", &N));
    size_t m = 0;
    DD_TRY(dd_compress_state_export(dp->cp, NULL, &m));
    DD_TRY(dd_ckpt_get(r, "compress.state", &d, &bytes));
    if (N < 1 || N > (1u << 24) || bytes != (size_t)N * m * sizeof(float))
        return dd_error(DD_ERR_FORMAT, "checkpoint section compress.state: %zu bytes for %llu ranks of %zu floats", bytes,
                        (unsigned long long)N, m);
    float *st = malloc((m ? m : 1) * sizeof(float));
    if (!st) return dd_error(DD_ERR_NOMEM, "out of memory");
    const float *all = d;
    if (N == (uint64_t)dp->size) {
        if (m) memcpy(st, all + (size_t)dp->rank * m, m * sizeof(float));
    } else { /* keep the sum over ranks: every rank gets the mean */
        for (size_t i = 0; i < m; i++) {
            double acc = 0.0;
            for (uint64_t q = 0; q < N; q++) acc += all[q * m + i];
            st[i] = (float)(acc / (double)dp->size);
        }
    }
    s = dd_compress_state_import(dp->cp, st, m);
    free(st);
    DD_TRY(s);
    DD_TRY(dd_ckpt_get(r, "compress.shared", &d, &bytes));
    if (bytes % sizeof(float)) return dd_error(DD_ERR_FORMAT, "checkpoint section compress.shared: %zu bytes", bytes);
    return dd_compress_shared_import(dp->cp, d, bytes / sizeof(float));
}

static dd_status s_load(void *self, dd_trainer *tr, const dd_ckpt_reader *r) {
    dd_dp *dp = self;
    (void)tr;
    uint64_t n = 1;
    if (dd_ckpt_has(r, "dp")) {
        DD_TRY(dd_ckpt_get_u64(r, "dp", &n));
    }
    if (dp->rank == 0 && n != (uint64_t)dp->size)
        dd_log(DD_LOG_INFO, "checkpoint written by %llu rank%s, resuming on %d", (unsigned long long)n, n == 1 ? "" : "s",
               dp->size);
    /* the epoch's communication figures continue from the checkpoint's */
    dd_status s = dd_cx_epoch_load(&dp->ep, r, dp->c, dp->st.steps, dp->st.bytes_sent, dp->cp);
    if (s != DD_OK) return dd_error_prefix(s, "data parallel: ");
    if (dp->cp) {
        s = load_compress(dp, r);
        if (s != DD_OK) return dd_error_prefix(s, "data parallel: compression state: ");
    }
    return DD_OK;
}

/* The epoch's communication figures, averaged over the ranks (all ranks call it). */
static dd_status s_epoch_stats(void *self, double out[3]) {
    dd_dp *dp = self;
    dd_status s = dd_cx_epoch_end(&dp->ep, dp->c, dp->st.steps, dp->st.bytes_sent, dp->cp, out);
    if (s != DD_OK) return dd_error_prefix(s, "data parallel: ");
    return DD_OK;
}

/* ---------------------------------------------------------------- the step */

/* After stage s's backward: its parameter-table entries' gradient ranges, last entry
 * first (the ranges descend and tile [0, n) over the stages), go to the buckets. */
static dd_status stage_done(void *self, size_t s, int bwd) {
    dd_dp *dp = self;
    if (!bwd) return DD_OK;
    dd_stage_info si;
    DD_TRY(dd_model_stage_info(dd_trainer_model(dp->tr), s, &si));
    size_t top = si.hi;
    for (size_t e = si.e1; e-- > si.e0;) {
        size_t bot = e == 0 ? 0 : dp->table->entries[e].offset;
        if (bot > top) bot = top; /* offsets ascend in layer order (param.h); defensive */
        DD_TRY(bucket_range(dp, dp->step_grads, bot, top));
        top = bot;
    }
    return DD_OK;
}

/* This rank's slice of global batch `batch`: gradients, bucketed reductions, the loss. */
static dd_status dp_grads(dd_dp *dp, dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss) {
    float *grads = NULL;
    dd_trainer_storage(tr, NULL, &grads, NULL, NULL, NULL, NULL);
    const size_t n = dd_trainer_num_floats(tr);
    uint64_t lo, hi, bg;
    dd_trainer_batch_slice(tr, batch, dp->rank, dp->size, &lo, &hi, &bg);
    dp->tr = tr;
    dp->step_grads = grads;
    memset(grads, 0, n * sizeof(float));
    /* a step's bytes are those sent from here to the end of its reductions: what went
     * between steps (the parameter broadcast of a setup, the evaluation's broadcast, the
     * epoch statistics, a checkpoint's gathers) is not gradient traffic, and counting it
     * made the first epoch after a resume differ from a straight run's */
    dd_comm_stats cs;
    dd_comm_stats_get(dp->c, &cs);
    dp->sent_mark = cs.bytes_sent;
    dd_stage_src src = {dd_trainer_params(tr), grads, dp, NULL, NULL, stage_done};
    double v[1] = {0.0};
    dd_status s = dd_trainer_compute_grads(tr, epoch, lo, hi, bg, &src, &v[0]);
    if (s != DD_OK) {
        step_reset(dp);
        return s;
    }
    DD_TRY(reduce_step(dp, grads, n, v, 1));
    *loss = v[0] * dd_trainer_loss_scale(tr, bg);
    return DD_OK;
}

static dd_status s_loss_grad(void *self, dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss) {
    return dp_grads(self, tr, epoch, batch, loss);
}

static dd_status s_step(void *self, dd_trainer *tr, double *loss) {
    dd_dp *dp = self;
    const uint64_t batch = dd_trainer_batch(tr), nb = dd_trainer_num_batches(tr);
    if (dp->cp) dd_compress_begin_step(dp->cp, dd_trainer_steps(tr), dd_trainer_epoch(tr), nb ? (double)batch / (double)nb : 0.0);
    DD_TRY(dp_grads(dp, tr, (uint64_t)dd_trainer_epoch(tr), batch, loss));
    if (!dp->part) return dd_trainer_apply_update(tr, *loss, NAN);
    /* zero1: the whole (reduced) gradient is on every rank, so its norm is too; each rank
     * steps its slice, then the slices are gathered */
    float *params = NULL, *grads = NULL;
    dd_trainer_storage(tr, &params, &grads, NULL, NULL, NULL, NULL);
    DD_TRY(dd_trainer_apply_update(tr, *loss, dd_grad_sumsq(grads, dd_trainer_num_floats(tr))));
    dp->full_ok = 0;
    if (dp->size == 1) return DD_OK;
    const double t0 = dd_comm_wtime();
    dd_comm_stats a, b;
    dd_comm_stats_get(dp->c, &a);
    dd_status s = dd_comm_allgatherv(dp->c, (char *)params + dp->pdispl[dp->rank], params, dp->pcount, dp->pdispl);
    dd_comm_stats_get(dp->c, &b);
    dp->st.comm_s += dd_comm_wtime() - t0;
    dp->st.bytes_sent += b.bytes_sent - a.bytes_sent;
    dp->sent_mark = b.bytes_sent;
    if (s != DD_OK) return dd_error_prefix(s, "data parallel (zero1): gathering the updated parameters: ");
    return DD_OK;
}

/* zero1: the optimiser state of this rank's slice only (parameters and gradients stay
 * whole). Slices are multiples of 16 floats, in rank order. */
static dd_status s_layout(void *self, const dd_model *m, const dd_model *pa, size_t n, size_t *lo, size_t *hi,
                         int *grads, int *params) {
    (void)m, (void)pa;
    dd_dp *dp = self;
    *grads = *params = 0;
    *lo = 0;
    *hi = n;
    if (dp->cfg.shard != DD_SHARD_ZERO1) return DD_OK;
    if (!dp->part || dp->part[dp->size] != n) {
        free(dp->part);
        free(dp->pcount);
        dp->part = calloc((size_t)dp->size + 1, sizeof *dp->part);
        dp->pcount = calloc(2 * (size_t)dp->size, sizeof *dp->pcount);
        if (!dp->part || !dp->pcount) return dd_error(DD_ERR_NOMEM, "out of memory");
        dp->pdispl = dp->pcount + dp->size;
        dd_shard_partition(n, dp->size, dp->part);
        for (int r = 0; r < dp->size; r++) {
            dp->pcount[r] = (dp->part[r + 1] - dp->part[r]) * sizeof(float);
            dp->pdispl[r] = dp->part[r] * sizeof(float);
        }
    }
    *lo = dp->part[dp->rank];
    *hi = dp->part[dp->rank + 1];
    return DD_OK;
}

static dd_status s_before_save(void *self, dd_trainer *tr) {
    dd_dp *dp = self;
    DD_TRY(gather_compress_state(dp));
    if (!dp->part || dp->full_ok) return DD_OK;
    /* zero1: the whole optimiser state to rank 0, array by array */
    const size_t n = dd_trainer_num_floats(tr);
    dd_optim *opt = dd_trainer_optim(tr);
    const int k = dd_optim_state_arrays(opt);
    const size_t bytes = dd_optim_state_bytes_for(opt, n);
    if (dp->rank == 0 && dp->full_optim_bytes != bytes) {
        free(dp->full_optim);
        dp->full_optim = calloc(1, bytes);
        dp->full_optim_bytes = dp->full_optim ? bytes : 0;
        if (!dp->full_optim) return dd_error(DD_ERR_NOMEM, "out of memory for the optimiser state (%zu bytes)", bytes);
    }
    size_t cnt = 0;
    float *mine = dd_optim_state(opt, &cnt);
    const size_t m = dp->part[dp->rank + 1] - dp->part[dp->rank];
    for (int j = 0; j < k; j++) {
        float *dst = dp->rank == 0 ? (float *)(void *)((char *)dp->full_optim + DD_OPTIM_STATE_HEADER) + (size_t)j * n : NULL;
        dd_status s = dd_comm_gatherv(dp->c, mine + (size_t)j * m, dst, dp->pcount, dp->pdispl, 0);
        if (s != DD_OK) return dd_error_prefix(s, "data parallel (zero1): gathering the optimiser state: ");
    }
    if (dp->rank == 0) DD_TRY(dd_optim_state_header(opt, n, dp->full_optim));
    dp->full_ok = 1;
    return DD_OK;
}

static dd_status s_full_state(void *self, dd_trainer *tr, const float **params, const void **optim, size_t *bytes) {
    dd_dp *dp = self;
    if (!dp->full_ok || !dp->full_optim)
        return dd_error(DD_ERR_INTERNAL, "data parallel (zero1): the optimiser state was not gathered before the "
                                         "checkpoint");
    *params = dd_trainer_params(tr);
    *optim = dp->full_optim;
    *bytes = dp->full_optim_bytes;
    return DD_OK;
}

static int s_stop_agreed(void *self) { return ((dd_dp *)self)->agreed_stop != 0; }

static const dd_strategy_ops dp_ops = {
    .name = "dp",
    .layout = s_layout,
    .setup = s_setup,
    .step = s_step,
    .loss_grad = s_loss_grad,
    .bcast = s_bcast,
    .before_save = s_before_save,
    .save = s_save,
    .load = s_load,
    .full_state = s_full_state,
    .stop_agreed = s_stop_agreed,
    .epoch_stats = s_epoch_stats,
};

void dd_dp_strategy(dd_dp *dp, dd_strategy *st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!dp) return;
    st->ops = &dp_ops;
    st->self = dp;
    st->rank = dp->rank;
    st->nranks = dp->size;
}

/* ---------------------------------------------------------------- registry entry */

/* The compressor names of the registry, "none, fp32, ..." */
static size_t compress_choices(char *buf, size_t cap) {
    size_t len = 0;
    if (cap) buf[0] = '\0';
    const char *const *names = dd_compress_names();
    for (size_t i = 0; names && names[i]; i++) {
        int w = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, "%s%s", i ? ", " : "", names[i]);
        if (w > 0) len += (size_t)w;
    }
    return len;
}

static const dd_strategy_opt dp_opts[] = {
    {"allreduce", "A", "gradient allreduce algorithm (default ring)", dd_allreduce_choices},
    {"bucket-mb", "X",
     "gradient bucket size in MiB, last layer first; each bucket's\n"
     "reduction starts when its gradients are final (default 4;\n"
     "0: one blocking allreduce after backward)",
     NULL},
    {"compress", "SPEC",
     "gradient compression: NAME[,key=value...] (default none); keys\n"
     "density, chunk, stochastic, sampled, sample, rank, momentum,\n"
     "clip, masking, warmup, seed, ef (see docs/compress.md), e.g.\n"
     "dgc,density=0.001 or int8; also on one process (the\n"
     "compression error alone; with --tp/--pp: the replicas'\n"
     "exchange of each rank's storage); metrics.jsonl gets\n"
     "comm_bytes_per_step, compression_ratio and compress_time_s;\n"
     "distdpd compressors describes them",
     compress_choices},
    {"error-feedback", "on|off",
     "keep what compression dropped and add it next step\n"
     "(default on; only with a lossy --compress)",
     NULL},
    {"shard", "MODE",
     "sharded data parallelism (docs/sharding.md): none (default),\n"
     "zero1 (optimiser state partitioned over the ranks), zero2\n"
     "(+ gradients reduce-scattered), zero3 (+ parameters gathered\n"
     "stage by stage); same result as none up to float rounding;\n"
     "--compress with none and zero1 only; a checkpoint resumes\n"
     "with any --shard on any number of ranks; with --tp/--pp:\n"
     "none or zero1 over each position's replicas",
     NULL},
    {NULL, NULL, NULL, NULL},
};

/* The configuration the options give (DD_ERR_ARG naming the option). */
static dd_status dp_cfg_from_args(const dd_strategy_args *a, dd_dp_cfg *c) {
    dd_dp_cfg_default(c);
    const char *v;
    if ((v = dd_strategy_arg(a, "allreduce")) && dd_allreduce_parse(v, &c->algo) != DD_OK)
        return dd_error_prefix(DD_ERR_ARG, "--allreduce: ");
    if ((v = dd_strategy_arg(a, "bucket-mb"))) DD_TRY(dd_parse_number("--bucket-mb", v, 0.0, 4096.0, 0, &c->bucket_mb));
    if ((v = dd_strategy_arg(a, "shard"))) {
        if (dd_shard_parse(v, &c->shard) != DD_OK) return dd_error_prefix(DD_ERR_ARG, "--shard: ");
        if (c->shard > DD_SHARD_ZERO1)
            return dd_error(DD_ERR_ARG, "--shard %s is not plain data parallelism's (none or zero1)", v);
    }
    DD_TRY(dd_cx_parse_args(a, &c->compress));
    return dd_dp_cfg_check(c);
}

/* Any parallel option, or more than one process. */
static int dp_claims(const dd_strategy_args *a) { return a->nranks > 1 || a->n > 0 ? 1 : 0; }

/* --resume without --compress: the compressor recorded in RUN/last.ckpt (section
 * compress.spec; it is the state resumed), else in RUN/parallel.json (written when a run
 * ends: after a crash it may be an earlier run's). */
static dd_status dp_resume_args(dd_strategy_args *a) {
    if (dd_strategy_arg(a, "compress") || a->nrecorded >= sizeof a->recorded / sizeof a->recorded[0]) return DD_OK;
    char *buf = a->recorded[a->nrecorded];
    const size_t cap = sizeof a->recorded[0];
    char path[4200];
    int found = 0;
    snprintf(path, sizeof path, "%s/last.ckpt", a->resume);
    dd_ckpt_reader *r = NULL;
    if (dd_ckpt_open(path, &r) == DD_OK) {
        const char *spec = NULL;
        if (dd_ckpt_has(r, "compress.spec") && dd_ckpt_get_str(r, "compress.spec", &spec) == DD_OK &&
            strlen(spec) < cap) {
            snprintf(buf, cap, "%s", spec);
            found = 1;
        }
        dd_ckpt_close(&r);
    }
    dd_error_clear(); /* a missing or bad checkpoint is the trainer's to report */
    if (!found) {
        snprintf(path, sizeof path, "%s/parallel.json", a->resume);
        char *txt = NULL; /* the whole file: its "hosts" list grows with the ranks */
        if (dd_read_text(path, &txt, NULL) != DD_OK) dd_error_clear();
        cJSON *j = txt ? cJSON_Parse(txt) : NULL;
        free(txt);
        const cJSON *c = j ? cJSON_GetObjectItemCaseSensitive(j, "compress") : NULL;
        if (cJSON_IsString(c) && strlen(c->valuestring) < cap) {
            snprintf(buf, cap, "%s", c->valuestring);
            found = 1;
        }
        cJSON_Delete(j);
    }
    if (!found || strncmp(buf, "none", 4) == 0) return DD_OK;
    a->nrecorded++;
    return dd_strategy_arg_set(a, "compress", buf);
}

static dd_status dp_check(const dd_strategy_args *a) {
    dd_dp_cfg c;
    return dp_cfg_from_args(a, &c);
}

static dd_status dp_def_create(dd_comm *comm, const dd_strategy_args *a, void **self) {
    dd_dp_cfg c;
    DD_TRY(dp_cfg_from_args(a, &c));
    return dd_dp_create(comm, &c, (dd_dp **)self);
}

static void dp_def_destroy(void *self) {
    dd_dp *dp = self;
    dd_dp_destroy(&dp);
}

static void dp_def_strategy(void *self, dd_strategy *st) { dd_dp_strategy(self, st); }
static void dp_def_stop_source(void *self, const volatile int *local) { dd_dp_set_stop_source(self, local); }

static void dp_last_step(const void *self, dd_strategy_step_times *t) {
    const dd_dp *dp = self;
    t->comm_s = dp->st.last_comm_s;
    t->exposed_s = dp->st.last_exposed_s;
    t->hidden_s = dp->st.last_hidden_s;
    t->prev_exposed_mean_s = dp->st.prev_exposed_mean_s;
}

static dd_status dp_report(const void *self, cJSON *o) {
    const dd_dp *dp = self;
    const dd_dp_cfg *dc = &dp->cfg;
    cJSON_AddStringToObject(o, "shard", dd_shard_name(dc->shard));
    cJSON_AddStringToObject(o, "allreduce", dd_allreduce_name(dc->algo));
    cJSON_AddNumberToObject(o, "bucket_mb", dc->bucket_mb);
    DD_TRY(dd_cx_report(dp->cp, o));
    cJSON_AddNumberToObject(o, "buckets", (double)dd_dp_num_buckets(dp));
    cJSON *b = cJSON_AddArrayToObject(o, "bucket_ranges");
    for (size_t i = 0; b && i < dd_dp_num_buckets(dp); i++) {
        size_t lo = 0, hi = 0;
        dd_dp_bucket(dp, i, &lo, &hi);
        cJSON *r = cJSON_CreateArray();
        cJSON_AddItemToArray(r, cJSON_CreateNumber((double)lo));
        cJSON_AddItemToArray(r, cJSON_CreateNumber((double)hi));
        cJSON_AddItemToArray(b, r);
    }
    const dd_dp_stats *st = &dp->st;
    double n = st->steps ? (double)st->steps : 1.0;
    cJSON *t = cJSON_AddObjectToObject(o, "rank0_timing");
    if (t) {
        cJSON_AddNumberToObject(t, "steps", (double)st->steps);
        cJSON_AddNumberToObject(t, "comm_s_per_step", st->comm_s / n);
        cJSON_AddNumberToObject(t, "exposed_s_per_step", st->exposed_s / n);
        cJSON_AddNumberToObject(t, "hidden_s_per_step", st->hidden_s / n);
        cJSON_AddNumberToObject(t, "max_exposed_s", st->max_exposed_s);
        cJSON_AddNumberToObject(t, "gradient_bytes_per_step", (double)st->bytes / n);
        cJSON_AddNumberToObject(t, "bytes_sent_per_step", (double)st->bytes_sent / n);
    }
    return DD_OK;
}

static void dp_print_summary(const void *self, FILE *f) {
    const dd_dp *dp = self;
    const dd_dp_stats *ds = &dp->st;
    double n = ds->steps ? (double)ds->steps : 1.0;
    fprintf(f, "parallel:   %d ranks, allreduce %s, %zu bucket%s: communication %.3f ms/step, not hidden %.3f "
               "ms/step (rank 0)\n",
            dp->size, dd_allreduce_name(dp->cfg.algo), dd_dp_num_buckets(dp), dd_dp_num_buckets(dp) == 1 ? "" : "s",
            1e3 * ds->comm_s / n, 1e3 * ds->exposed_s / n);
    dd_cx_print_summary(dp->cp, n, f);
}

static void dp_print_epoch(const void *self, const dd_epoch_record *rec, uint64_t steps, FILE *f) {
    dd_cx_print_epoch(((const dd_dp *)self)->cp, rec, steps, f);
}

const dd_strategy_def dd_strategy_def_dp = {
    .name = "dp",
    .title = "data-parallel (synchronous)",
    .when = "more than one process, or any parallel option on one",
    .opts = dp_opts,
    .claims = dp_claims,
    .resume_args = dp_resume_args,
    .check = dp_check,
    .create = dp_def_create,
    .destroy = dp_def_destroy,
    .strategy = dp_def_strategy,
    .set_stop_source = dp_def_stop_source,
    .last_step = dp_last_step,
    .report = dp_report,
    .print_summary = dp_print_summary,
    .print_epoch = dp_print_epoch,
};
