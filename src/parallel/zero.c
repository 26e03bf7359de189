/* Sharded data parallelism, ZeRO stages 2 and 3 (parallel.h). The arena is partitioned
 * over the ranks (dd_shard_partition); rank r keeps the optimiser state and the gradients
 * of its slice (zero2), and the parameters of its slice (zero3). Each step:
 *   - forward (zero3): before each stage, its parameters are gathered from their owners
 *     (MPI_Iallgatherv of every rank's overlap with the stage) into one of two stage
 *     buffers, and the next stage's gather is started at once, so it overlaps the
 *     current stage's compute; backward walks the stages back the same way (the last two
 *     stages are still in the buffers);
 *   - backward: each stage's gradients go to one of two stage gradient buffers and, as
 *     soon as the stage is done, are reduce-scattered (MPI_Ireduce_scatter) into their
 *     owners' slices while earlier stages compute;
 *   - then one small float64 allreduce carries the loss sum, the squared norm of each
 *     slice's gradient (clipping uses the global norm) and the stop flags; each rank
 *     steps its slice; zero2 allgathers the updated slices into every rank's whole
 *     parameter arena, zero3 keeps them sharded.
 * Evaluation under zero3 runs on every rank (the stage gathers are collectives); rank 0
 * computes the metrics. Checkpoints gather the whole parameters and optimiser state to
 * rank 0 (shard-neutral format), so a run resumes on any number of ranks and any
 * --shard. Compression does not apply (there is no compressed reduce-scatter). */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "distdpd/parallel.h"

struct dd_zero {
    dd_comm *c;           /* borrowed */
    dd_zero_cfg cfg;
    int rank, size;
    size_t n;             /* arena floats */
    size_t *part;         /* size + 1 slice boundaries */
    size_t *pcount, *pdispl; /* each rank's slice in bytes and its byte offset */

    /* stages of the trainer's model */
    dd_trainer *tr;       /* the trainer set up (borrowed) */
    size_t S;             /* stages */
    size_t *slo, *shi;    /* [S] arena range of each stage */
    size_t *agc, *agd;    /* [S * size] bytes of each rank's overlap with the stage and their
                             offset in the stage buffer (allgatherv) */
    size_t *rsc;          /* [S * size] floats of each rank's overlap (reduce-scatter) */
    size_t maxst;         /* floats of the largest stage */

    /* zero3: gathered stage parameters, two buffers */
    float *pbuf[2];
    long pst[2];          /* stage each holds (-1: none) */
    dd_comm_req *preq[2]; /* its gather in flight (NULL: complete) */
    /* stage gradients, two buffers */
    float *gbuf[2];
    long gst[2];
    dd_comm_req *greq[2];
    int gnext;            /* buffer for the next stage's gradients */

    /* stop agreement */
    const volatile int *local_stop;
    volatile int agreed_stop;

    dd_zero_stats st;
    dd_zero_stats last; /* st when the last step began (its times: st - last) */
    uint64_t ep_steps0, ep_sent0, sent_mark;

    /* rank 0 after before_save: the whole parameters and optimiser state */
    float *full_params;
    void *full_optim;
    size_t full_optim_bytes;
    int full_ok;
};

void dd_zero_cfg_default(dd_zero_cfg *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->shard = DD_SHARD_ZERO2;
    c->algo = DD_ALLREDUCE_RING;
}

dd_status dd_zero_cfg_check(const dd_zero_cfg *c) {
    if (!c) return dd_error(DD_ERR_ARG, "sharded data parallelism: NULL configuration");
    if (c->shard != DD_SHARD_ZERO2 && c->shard != DD_SHARD_ZERO3)
        return dd_error(DD_ERR_ARG, "sharded data parallelism: shard = %s (this strategy does zero2 and zero3; none "
                                    "and zero1 are plain data parallelism's)",
                        dd_shard_name(c->shard));
    if ((int)c->algo < 0 || (int)c->algo >= dd_allreduce_count())
        return dd_error(DD_ERR_ARG, "sharded data parallelism: algo = %d is not an allreduce algorithm", (int)c->algo);
    return DD_OK;
}

dd_status dd_zero_create(dd_comm *comm, const dd_zero_cfg *cfg, dd_zero **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_zero_create: NULL output");
    *out = NULL;
    if (!comm) return dd_error(DD_ERR_ARG, "dd_zero_create: NULL communicator");
    dd_zero_cfg def;
    if (!cfg) {
        dd_zero_cfg_default(&def);
        cfg = &def;
    }
    DD_TRY(dd_zero_cfg_check(cfg));
    dd_zero *z = dd_calloc(1, sizeof *z);
    if (!z) return dd_error(DD_ERR_NOMEM, "out of memory for the sharded strategy");
    z->c = comm;
    z->cfg = *cfg;
    z->rank = dd_comm_rank(comm);
    z->size = dd_comm_size(comm);
    z->pst[0] = z->pst[1] = z->gst[0] = z->gst[1] = -1;
    *out = z;
    return DD_OK;
}

/* Waits for *req politely: tests it and gives the core away between tests (with more
 * ranks than free cores, a spinning MPI_Wait slows down the ranks still computing), at
 * most dd_comm_timeout() seconds, then frees it. */
static dd_status wait_req(dd_comm_req **req) {
    dd_status st = dd_comm_wait_timeout(req, dd_comm_timeout(), "a sharded gather or reduction (DISTDPD_COMM_TIMEOUT)");
    dd_comm_req_free(req);
    return st;
}

static void wait_all(dd_zero *z) {
    for (int k = 0; k < 2; k++) {
        (void)wait_req(&z->preq[k]);
        (void)wait_req(&z->greq[k]);
    }
}

static void free_stages(dd_zero *z) {
    wait_all(z);
    for (int k = 0; k < 2; k++) {
        dd_arena_free(z->pbuf[k]);
        dd_arena_free(z->gbuf[k]);
        z->pbuf[k] = z->gbuf[k] = NULL;
        z->pst[k] = z->gst[k] = -1;
    }
    free(z->slo);
    free(z->agc);
    z->slo = z->shi = NULL;
    z->agc = z->agd = z->rsc = NULL;
    z->S = 0;
    z->tr = NULL;
}

void dd_zero_destroy(dd_zero **zp) {
    if (!zp || !*zp) return;
    dd_zero *z = *zp;
    free_stages(z);
    free(z->part);
    free(z->pcount);
    free(z->full_params);
    free(z->full_optim);
    dd_free(z);
    *zp = NULL;
}

int dd_zero_rank(const dd_zero *z) { return z ? z->rank : 0; }
int dd_zero_size(const dd_zero *z) { return z ? z->size : 1; }
void dd_zero_set_stop_source(dd_zero *z, const volatile int *local) {
    if (z) z->local_stop = local;
}
void dd_zero_stats_get(const dd_zero *z, dd_zero_stats *st) {
    if (!st) return;
    if (!z) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = z->st;
}

/* ---------------------------------------------------------------- layout and setup */

static dd_status z_layout(void *self, const dd_model *m, const dd_model *pa, size_t n, size_t *lo, size_t *hi,
                         int *grads, int *params) {
    (void)m, (void)pa;
    dd_zero *z = self;
    if (!z->part || z->n != n) {
        free(z->part);
        free(z->pcount);
        z->part = calloc((size_t)z->size + 1, sizeof *z->part);
        z->pcount = calloc(2 * (size_t)z->size, sizeof *z->pcount);
        if (!z->part || !z->pcount) return dd_error(DD_ERR_NOMEM, "out of memory");
        z->pdispl = z->pcount + z->size;
        z->n = n;
        dd_shard_partition(n, z->size, z->part);
        for (int r = 0; r < z->size; r++) {
            z->pcount[r] = (z->part[r + 1] - z->part[r]) * sizeof(float);
            z->pdispl[r] = z->part[r] * sizeof(float);
        }
    }
    *lo = z->part[z->rank];
    *hi = z->part[z->rank + 1];
    *grads = 1;
    *params = z->cfg.shard == DD_SHARD_ZERO3;
    return DD_OK;
}

static dd_status z_stage_params(void *self, size_t s, int bwd, const float **p);
static dd_status z_stage_done(void *self, size_t s, int bwd);

/* The stage table and the stage buffers for tr's model. */
static dd_status build_stages(dd_zero *z, dd_trainer *tr) {
    const dd_model *m = dd_trainer_model(tr);
    const size_t S = dd_model_num_stages(m), P = (size_t)z->size;
    z->slo = calloc(2 * S, sizeof *z->slo);
    z->agc = calloc(3 * S * P, sizeof *z->agc);
    if (!z->slo || !z->agc) return dd_error(DD_ERR_NOMEM, "out of memory for the stage table");
    z->shi = z->slo + S;
    z->agd = z->agc + S * P;
    z->rsc = z->agc + 2 * S * P;
    z->S = S;
    z->maxst = 0;
    for (size_t s = 0; s < S; s++) {
        dd_stage_info si;
        DD_TRY(dd_model_stage_info(m, s, &si));
        z->slo[s] = si.lo;
        z->shi[s] = si.hi;
        if (si.hi - si.lo > z->maxst) z->maxst = si.hi - si.lo;
        for (size_t r = 0; r < P; r++) {
            size_t a = si.lo > z->part[r] ? si.lo : z->part[r], b = si.hi < z->part[r + 1] ? si.hi : z->part[r + 1];
            size_t cnt = b > a ? b - a : 0;
            z->rsc[s * P + r] = cnt;
            z->agc[s * P + r] = cnt * sizeof(float);
            z->agd[s * P + r] = (cnt ? a - si.lo : 0) * sizeof(float);
        }
    }
    const size_t mx = z->maxst ? z->maxst : 1;
    for (int k = 0; k < 2; k++) {
        z->gbuf[k] = dd_arena_calloc(DD_MEM_GRADS, mx, sizeof(float), "a stage's gradients (sharded)");
        if (!z->gbuf[k]) return DD_ERR_NOMEM; /* dd_arena_calloc said what and how much */
        if (z->cfg.shard == DD_SHARD_ZERO3) {
            z->pbuf[k] = dd_arena_calloc(DD_MEM_PARAMS, mx, sizeof(float), "a stage's gathered parameters (zero3)");
            if (!z->pbuf[k]) return DD_ERR_NOMEM;
        }
    }
    return DD_OK;
}

static dd_status z_setup(void *self, dd_trainer *tr) {
    dd_zero *z = self;
    const size_t n = dd_trainer_num_floats(tr);
    if (z->size > 1) {
        /* every rank must hold the same model */
        uint64_t mine = (uint64_t)n, *all = calloc((size_t)z->size, sizeof *all);
        if (!all) return dd_error(DD_ERR_NOMEM, "out of memory");
        dd_status s = dd_comm_allgather(z->c, &mine, sizeof mine, all);
        for (int r = 1; s == DD_OK && r < z->size; r++)
            if (all[r] != all[0])
                s = dd_error(DD_ERR_MISMATCH,
                             "sharded data parallelism: rank %d has %llu parameter floats, rank 0 has %llu: every rank "
                             "must train the same model",
                             r, (unsigned long long)all[r], (unsigned long long)all[0]);
        free(all);
        DD_TRY(s);
    }
    if (!z->part || z->n != n)
        return dd_error(DD_ERR_INTERNAL, "sharded data parallelism: the trainer was not laid out by this strategy");
    if (z->tr != tr) {
        free_stages(z);
        DD_TRY(build_stages(z, tr));
        z->tr = tr;
    } else {
        wait_all(z); /* after a checkpoint load: the gathered stages are stale */
        z->pst[0] = z->pst[1] = -1;
    }
    z->full_ok = 0;
    if (z->cfg.shard == DD_SHARD_ZERO3) {
        dd_stage_src src = {NULL, NULL, z, z_stage_params, NULL, z_stage_done};
        dd_trainer_set_param_source(tr, &src, 1);
    }
    return DD_OK;
}

/* ---------------------------------------------------------------- stage callbacks */

/* Starts gathering stage s's parameters into buffer k. */
static dd_status start_gather(dd_zero *z, size_t s, int k) {
    DD_TRY(wait_req(&z->preq[k])); /* a gather not consumed: finish it first */
    float *params = NULL;
    size_t plo = 0;
    dd_trainer_storage(z->tr, &params, NULL, &plo, NULL, NULL, NULL);
    const size_t P = (size_t)z->size;
    const size_t a = z->slo[s] > plo ? z->slo[s] : plo;
    const float *send = z->rsc[s * P + (size_t)z->rank] ? params + (a - plo) : NULL;
    double t0 = dd_comm_wtime();
    dd_status st = dd_comm_iallgatherv(z->c, send, z->pbuf[k], z->agc + s * P, z->agd + s * P, &z->preq[k]);
    z->st.comm_s += dd_comm_wtime() - t0;
    z->pst[k] = st == DD_OK ? (long)s : -1;
    if (st != DD_OK) return dd_error_prefix(st, "zero3: gathering the parameters of stage %zu: ", s);
    return DD_OK;
}

static dd_status z_stage_params(void *self, size_t s, int bwd, const float **p) {
    dd_zero *z = self;
    int k = z->pst[0] == (long)s ? 0 : z->pst[1] == (long)s ? 1 : -1;
    if (k < 0) {
        k = z->preq[0] ? 1 : 0; /* prefer a buffer with nothing in flight */
        DD_TRY(start_gather(z, s, k));
    }
    if (z->preq[k]) {
        double t0 = dd_comm_wtime();
        dd_status st = wait_req(&z->preq[k]);
        z->st.comm_s += dd_comm_wtime() - t0;
        z->st.wait_s += dd_comm_wtime() - t0;
        if (st != DD_OK) {
            z->pst[k] = -1;
            return dd_error_prefix(st, "zero3: gathering the parameters of stage %zu: ", s);
        }
    }
    /* prefetch the stage that comes next, into the other buffer */
    const long nxt = bwd ? (long)s - 1 : (long)s + 1;
    if (nxt >= 0 && nxt < (long)z->S && z->pst[k ^ 1] != nxt) DD_TRY(start_gather(z, (size_t)nxt, k ^ 1));
    *p = z->pbuf[k];
    return DD_OK;
}

static dd_status z_stage_grads(void *self, size_t s, float **g) {
    dd_zero *z = self;
    const int k = z->gnext;
    if (z->greq[k]) {
        double t0 = dd_comm_wtime();
        dd_status st = wait_req(&z->greq[k]);
        z->st.comm_s += dd_comm_wtime() - t0;
        z->st.wait_s += dd_comm_wtime() - t0;
        if (st != DD_OK) return dd_error_prefix(st, "reduce-scatter of the gradients of stage %ld: ", z->gst[k]);
    }
    memset(z->gbuf[k], 0, (z->shi[s] - z->slo[s]) * sizeof(float));
    z->gst[k] = (long)s;
    *g = z->gbuf[k];
    return DD_OK;
}

/* After stage s's backward its gradients go to their owners at once. */
static dd_status z_stage_done(void *self, size_t s, int bwd) {
    dd_zero *z = self;
    if (!bwd) return DD_OK;
    const int k = z->gnext;
    if (z->gst[k] != (long)s)
        return dd_error(DD_ERR_INTERNAL, "sharded data parallelism: stage %zu finished, buffer %d holds stage %ld", s, k,
                        z->gst[k]);
    float *grads = NULL;
    size_t glo = 0;
    dd_trainer_storage(z->tr, NULL, &grads, NULL, NULL, &glo, NULL);
    const size_t P = (size_t)z->size;
    const size_t a = z->slo[s] > glo ? z->slo[s] : glo;
    float *recv = z->rsc[s * P + (size_t)z->rank] ? grads + (a - glo) : NULL;
    double t0 = dd_comm_wtime();
    dd_status st = dd_comm_ireduce_scatter(z->c, z->gbuf[k], recv, z->rsc + s * P, &z->greq[k]);
    z->st.comm_s += dd_comm_wtime() - t0;
    if (st != DD_OK) return dd_error_prefix(st, "reduce-scatter of the gradients of stage %zu: ", s);
    /* progress whatever is in flight (Open MPI has no progress thread) */
    for (int j = 0; j < 2; j++) {
        int done = 0;
        if (z->greq[j] && dd_comm_test(z->greq[j], &done) == DD_OK && done) dd_comm_req_free(&z->greq[j]);
        if (z->preq[j] && dd_comm_test(z->preq[j], &done) == DD_OK && done) dd_comm_req_free(&z->preq[j]);
    }
    z->gnext ^= 1;
    return DD_OK;
}

/* ---------------------------------------------------------------- the step */

/* This rank's slice: gradients reduce-scattered into the owners' slices; the loss, the
 * squared gradient norm and the stop flags summed. v[0] loss, v[1] |g|^2, v[2] stops. */
static dd_status z_grads(dd_zero *z, dd_trainer *tr, uint64_t epoch, uint64_t batch, double v[3]) {
    uint64_t lo, hi, bg;
    dd_trainer_batch_slice(tr, batch, z->rank, z->size, &lo, &hi, &bg);
    /* a step's bytes are those sent from here to its end (not the broadcasts between steps) */
    dd_comm_stats cs;
    dd_comm_stats_get(z->c, &cs);
    z->sent_mark = cs.bytes_sent;
    dd_stage_src src = {NULL, NULL, z, NULL, z_stage_grads, z_stage_done};
    if (z->cfg.shard == DD_SHARD_ZERO3) src.stage_params = z_stage_params;
    else src.params = dd_trainer_params(tr); /* zero2: the whole parameters */
    double sse = 0.0;
    dd_status st = dd_trainer_compute_grads(tr, epoch, lo, hi, bg, &src, &sse);
    double t0 = dd_comm_wtime();
    for (int k = 0; k < 2; k++) {
        dd_status s2 = wait_req(&z->greq[k]);
        if (st == DD_OK && s2 != DD_OK) st = dd_error_prefix(s2, "reduce-scatter of the gradients: ");
        if (s2 == DD_OK) s2 = wait_req(&z->preq[k]); /* no gather may read the slice while it is updated */
        if (st == DD_OK && s2 != DD_OK) st = dd_error_prefix(s2, "gathering parameters: ");
    }
    z->st.exposed_s += dd_comm_wtime() - t0;
    DD_TRY(st);
    float *grads = NULL;
    size_t olo = 0, ohi = 0;
    dd_trainer_storage(tr, NULL, &grads, NULL, NULL, &olo, &ohi);
    v[0] = sse;
    v[1] = dd_grad_sumsq(grads, ohi - olo);
    v[2] = z->local_stop && *z->local_stop ? 1.0 : 0.0;
    if (z->size > 1) {
        t0 = dd_comm_wtime();
        st = dd_comm_allreduce(z->c, z->cfg.algo, v, 3, DD_F64);
        z->st.comm_s += dd_comm_wtime() - t0;
        z->st.exposed_s += dd_comm_wtime() - t0;
        if (st != DD_OK) return dd_error_prefix(st, "sharded data parallelism: loss allreduce: ");
    }
    v[0] *= dd_trainer_loss_scale(tr, bg);
    return DD_OK;
}

static dd_status z_loss_grad(void *self, dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss) {
    double v[3];
    DD_TRY(z_grads(self, tr, epoch, batch, v));
    *loss = v[0];
    return DD_OK;
}

static dd_status z_step(void *self, dd_trainer *tr, double *loss) {
    dd_zero *z = self;
    z->last = z->st;
    double v[3];
    DD_TRY(z_grads(z, tr, (uint64_t)dd_trainer_epoch(tr), dd_trainer_batch(tr), v));
    *loss = v[0];
    if (v[2] > 0) z->agreed_stop = 1;
    DD_TRY(dd_trainer_apply_update(tr, v[0], v[1]));
    z->full_ok = 0;
    z->pst[0] = z->pst[1] = -1; /* the gathered stages are stale */
    if (z->cfg.shard == DD_SHARD_ZERO2 && z->size > 1) {
        float *params = dd_trainer_params(tr);
        double t0 = dd_comm_wtime();
        dd_status st =
            dd_comm_allgatherv(z->c, (char *)params + z->pdispl[z->rank], params, z->pcount, z->pdispl);
        z->st.comm_s += dd_comm_wtime() - t0;
        z->st.exposed_s += dd_comm_wtime() - t0;
        if (st != DD_OK) return dd_error_prefix(st, "zero2: gathering the updated parameters: ");
    }
    dd_comm_stats cs;
    dd_comm_stats_get(z->c, &cs);
    z->st.steps++;
    z->st.bytes_sent += cs.bytes_sent - z->sent_mark;
    z->sent_mark = cs.bytes_sent;
    return DD_OK;
}

/* ---------------------------------------------------------------- other operations */

static dd_status z_bcast(void *self, double *vals, int nv) {
    dd_zero *z = self;
    if (z->size == 1 || nv <= 0) return DD_OK;
    dd_status s = dd_comm_bcast(z->c, vals, (size_t)nv * sizeof(double), 0);
    if (s != DD_OK) return dd_error_prefix(s, "sharded data parallelism: broadcast from rank 0: ");
    return DD_OK;
}

/* The whole parameters (zero3) and optimiser state to rank 0 (collective). */
static dd_status z_before_save(void *self, dd_trainer *tr) {
    dd_zero *z = self;
    if (z->full_ok) return DD_OK;
    wait_all(z);
    const size_t n = z->n;
    dd_optim *opt = dd_trainer_optim(tr);
    const int k = dd_optim_state_arrays(opt);
    const size_t ob = dd_optim_state_bytes_for(opt, n);
    if (z->rank == 0) {
        if (z->full_optim_bytes != ob) {
            free(z->full_optim);
            z->full_optim = calloc(1, ob);
            z->full_optim_bytes = z->full_optim ? ob : 0;
            if (!z->full_optim) return dd_error(DD_ERR_NOMEM, "out of memory for the optimiser state (%zu bytes)", ob);
        }
        if (z->cfg.shard == DD_SHARD_ZERO3 && !z->full_params) {
            z->full_params = calloc(n ? n : 1, sizeof(float));
            if (!z->full_params) return dd_error(DD_ERR_NOMEM, "out of memory for the parameters (%zu floats)", n);
        }
    }
    dd_status s = DD_OK;
    if (z->cfg.shard == DD_SHARD_ZERO3)
        s = dd_comm_gatherv(z->c, dd_trainer_params(tr), z->full_params, z->pcount, z->pdispl, 0);
    size_t cnt = 0;
    float *mine = dd_optim_state(opt, &cnt);
    const size_t m = z->part[z->rank + 1] - z->part[z->rank];
    for (int j = 0; s == DD_OK && j < k; j++) {
        float *dst = z->rank == 0 ? (float *)(void *)((char *)z->full_optim + DD_OPTIM_STATE_HEADER) + (size_t)j * n : NULL;
        s = dd_comm_gatherv(z->c, mine + (size_t)j * m, dst, z->pcount, z->pdispl, 0);
    }
    if (s != DD_OK) return dd_error_prefix(s, "sharded data parallelism: gathering the model state: ");
    if (z->rank == 0) DD_TRY(dd_optim_state_header(opt, n, z->full_optim));
    z->full_ok = 1;
    return DD_OK;
}

static dd_status z_full_state(void *self, dd_trainer *tr, const float **params, const void **optim, size_t *bytes) {
    dd_zero *z = self;
    if (!z->full_ok || !z->full_optim)
        return dd_error(DD_ERR_INTERNAL, "sharded data parallelism: the model state was not gathered before the "
                                         "checkpoint");
    *params = z->cfg.shard == DD_SHARD_ZERO3 ? z->full_params : dd_trainer_params(tr);
    *optim = z->full_optim;
    *bytes = z->full_optim_bytes;
    return DD_OK;
}

static dd_status z_save(void *self, dd_trainer *tr, dd_ckpt_writer *w) {
    dd_zero *z = self;
    (void)tr;
    DD_TRY(dd_ckpt_add_u64(w, "dp", (uint64_t)z->size));
    return dd_ckpt_add_str(w, "shard", dd_shard_name(z->cfg.shard));
}

static dd_status z_load(void *self, dd_trainer *tr, const dd_ckpt_reader *r) {
    dd_zero *z = self;
    (void)tr;
    uint64_t n = 1;
    const char *was = "none";
    if (dd_ckpt_has(r, "dp")) DD_TRY(dd_ckpt_get_u64(r, "dp", &n));
    if (dd_ckpt_has(r, "shard")) DD_TRY(dd_ckpt_get_str(r, "shard", &was));
    if (z->rank == 0 && (n != (uint64_t)z->size || strcmp(was, dd_shard_name(z->cfg.shard)) != 0))
        dd_log(DD_LOG_INFO, "checkpoint written by %llu rank%s with --shard %s, resuming on %d with --shard %s",
               (unsigned long long)n, n == 1 ? "" : "s", was, z->size, dd_shard_name(z->cfg.shard));
    return DD_OK;
}

static int z_stop_agreed(void *self) { return ((dd_zero *)self)->agreed_stop != 0; }

static dd_status z_epoch_stats(void *self, double out[3]) {
    dd_zero *z = self;
    const double steps = (double)(z->st.steps - z->ep_steps0);
    double v = steps > 0 ? (double)(z->st.bytes_sent - z->ep_sent0) / steps : 0.0;
    z->ep_steps0 = z->st.steps;
    z->ep_sent0 = z->st.bytes_sent;
    if (z->size > 1) {
        dd_status s = dd_comm_allreduce(z->c, DD_ALLREDUCE_RING, &v, 1, DD_F64);
        if (s != DD_OK) return dd_error_prefix(s, "sharded data parallelism: epoch statistics: ");
    }
    out[0] = v / z->size;
    out[1] = 1.0;
    out[2] = NAN;
    return DD_OK;
}

static const dd_strategy_ops zero_ops = {
    .name = "zero",
    .layout = z_layout,
    .setup = z_setup,
    .step = z_step,
    .loss_grad = z_loss_grad,
    .bcast = z_bcast,
    .before_save = z_before_save,
    .save = z_save,
    .load = z_load,
    .full_state = z_full_state,
    .stop_agreed = z_stop_agreed,
    .epoch_stats = z_epoch_stats,
};

void dd_zero_strategy(dd_zero *z, dd_strategy *st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!z) return;
    st->ops = &zero_ops;
    st->self = z;
    st->rank = z->rank;
    st->nranks = z->size;
}

/* ---------------------------------------------------------------- registry entry */

static const dd_strategy_opt zero_opts[] = {
    {"shard", NULL, NULL, NULL},     /* zero2 and zero3 choose this strategy */
    {"allreduce", NULL, NULL, NULL}, /* the loss reduction */
    {NULL, NULL, NULL, NULL},
};

static int zero_claims(const dd_strategy_args *a) {
    const char *v = dd_strategy_arg(a, "shard");
    dd_shard_mode m;
    if (!v || dd_shard_parse(v, &m) != DD_OK) {
        dd_error_clear();
        return 0;
    }
    return m >= DD_SHARD_ZERO2 ? 2 : 0;
}

static dd_status zero_cfg_from_args(const dd_strategy_args *a, dd_zero_cfg *c) {
    dd_zero_cfg_default(c);
    const char *v = dd_strategy_arg(a, "shard");
    if (v && dd_shard_parse(v, &c->shard) != DD_OK) return dd_error_prefix(DD_ERR_ARG, "--shard: ");
    if ((v = dd_strategy_arg(a, "allreduce")) && dd_allreduce_parse(v, &c->algo) != DD_OK)
        return dd_error_prefix(DD_ERR_ARG, "--allreduce: ");
    /* not an option here; said with the reason (check runs before the registry's "does
     * not apply") */
    if ((v = dd_strategy_arg(a, "compress")) && strncmp(v, "none", 4) != 0)
        return dd_error(DD_ERR_ARG, "--compress works with --shard none or zero1 (the gradients are allreduced); %s "
                                    "reduce-scatters them and no compressor has a reduce-scatter form",
                        dd_shard_name(c->shard));
    return dd_zero_cfg_check(c);
}

static dd_status zero_check(const dd_strategy_args *a) {
    dd_zero_cfg c;
    return zero_cfg_from_args(a, &c);
}

static dd_status zero_def_create(dd_comm *comm, const dd_strategy_args *a, void **self) {
    dd_zero_cfg c;
    DD_TRY(zero_cfg_from_args(a, &c));
    return dd_zero_create(comm, &c, (dd_zero **)self);
}

static void zero_def_destroy(void *self) {
    dd_zero *z = self;
    dd_zero_destroy(&z);
}

static void zero_def_strategy(void *self, dd_strategy *st) { dd_zero_strategy(self, st); }
static void zero_def_stop_source(void *self, const volatile int *local) { dd_zero_set_stop_source(self, local); }

static void zero_last_step(const void *self, dd_strategy_step_times *t) {
    const dd_zero *z = self;
    t->comm_s = z->st.comm_s - z->last.comm_s;
    t->exposed_s = (z->st.wait_s - z->last.wait_s) + (z->st.exposed_s - z->last.exposed_s);
    t->hidden_s = NAN;
    t->prev_exposed_mean_s = NAN;
}

static dd_status zero_report(const void *self, cJSON *o) {
    const dd_zero *z = self;
    cJSON_AddStringToObject(o, "shard", dd_shard_name(z->cfg.shard));
    cJSON_AddStringToObject(o, "allreduce", dd_allreduce_name(z->cfg.algo));
    double nz = z->st.steps ? (double)z->st.steps : 1.0;
    cJSON *t = cJSON_AddObjectToObject(o, "rank0_timing");
    if (t) {
        cJSON_AddNumberToObject(t, "steps", (double)z->st.steps);
        cJSON_AddNumberToObject(t, "comm_s_per_step", z->st.comm_s / nz);
        cJSON_AddNumberToObject(t, "wait_s_per_step", z->st.wait_s / nz);
        cJSON_AddNumberToObject(t, "exposed_s_per_step", z->st.exposed_s / nz);
        cJSON_AddNumberToObject(t, "bytes_sent_per_step", (double)z->st.bytes_sent / nz);
    }
    return DD_OK;
}

static void zero_print_summary(const void *self, FILE *f) {
    const dd_zero *z = self;
    double n = z->st.steps ? (double)z->st.steps : 1.0;
    fprintf(f, "parallel:   %d ranks, --shard %s: communication %.3f ms/step, of which waiting %.3f ms/step in "
               "backward/forward and %.3f ms/step after backward (rank 0)\n",
            z->size, dd_shard_name(z->cfg.shard), 1e3 * z->st.comm_s / n, 1e3 * z->st.wait_s / n,
            1e3 * z->st.exposed_s / n);
}

const dd_strategy_def dd_strategy_def_zero = {
    .name = "zero",
    .title = "sharded data-parallel (ZeRO)",
    .when = "--shard zero2 or zero3",
    .opts = zero_opts,
    .claims = zero_claims,
    .check = zero_check,
    .create = zero_def_create,
    .destroy = zero_def_destroy,
    .strategy = zero_def_strategy,
    .set_stop_source = zero_def_stop_source,
    .last_step = zero_last_step,
    .report = zero_report,
    .print_summary = zero_print_summary,
};
