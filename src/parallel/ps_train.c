/* Training on the parameter server (docs/ps.md, "Training"): the "ps" strategy.
 *
 * Two roles. The coordinator (--ps-role coordinator) runs dd_train_run with this
 * strategy: it owns the run directory, evaluates the servers' weights after every epoch,
 * writes metrics.jsonl and checkpoints, and hands out the batches of the current epoch
 * to the workers over a ZeroMQ ROUTER socket (CURVE, the allow file's keys). Its "step"
 * waits until the workers completed one more batch and advances the trainer's cursor
 * (dd_trainer_advance): the update itself was applied by the servers. Workers (the
 * default role) never call dd_train_run: the registry's `drive` hook runs their loop
 * (lease a batch, pull the blocks, compute the gradients, clip, stage, commit, apply,
 * report).
 *
 * Exactly-once frames: a batch is leased to one worker with a deadline (--lease-ms); the
 * worker stages its update on the servers and asks to commit before it applies it; the
 * coordinator grants a commit only while the lease is the worker's and counts the batch's
 * frames then. A lease that expires (a killed or stopped worker) goes back to the queue
 * and is redone by another worker; a late commit is refused and its gradient dropped. A
 * worker silent after its commit has its staged update applied by the coordinator, so a
 * committed update reaches every block once (docs/ps.md, "Atomic pushes"). The epoch ends when every batch is
 * done (epoch barrier: the next epoch's batches are handed out after the evaluation and
 * checkpoint, so checkpoints are consistent).
 *
 * Consistency (SSP): a worker's clock is the number of batches it completed in the epoch;
 * a lease goes to a worker only when its clock is at most --staleness clocks ahead of the
 * slowest live worker (0: bulk-synchronous, inf: asynchronous). A lease's staleness is
 * that difference; --stale-lr on divides its learning rate by max(1, staleness). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zmq.h>

#include "distdpd/parallel.h"
#include "distdpd/ps.h"
#include "parallel/ps_coord.h"

#define PS_MAXW DD_PST_MAX_WORKERS
#define PS_HIST DD_PST_HIST

typedef struct {
    /* options */
    const char *cluster_path, *key_path, *allow_path, *out;
    int coordinator;
    int64_t staleness; /* -1: inf */
    int stale_lr;
    int straggle_ms;
    int lease_ms;
    int min_workers; /* --ps-min-workers: no batch is handed out before this many have joined */
    double timeout_s;
    /* coordinator */
    dd_ps_cluster cl;
    void *ctx, *router;
    dd_net_zap *zap;
    dd_ps_client *cli;
    dd_ps_block *blocks;
    size_t nblocks;
    uint64_t *ver;
    char *cfg_json;
    dd_pst_coord c; /* the workers, the batches of the epoch, the counters (ps_coord.c) */
    dd_trainer *tr;
    double last_loss;
    int resuming;       /* --resume: the servers get last.ckpt's state (co_setup after the load) */
    uint64_t *ck_ver;   /* --resume: the blocks' versions from the checkpoint (ps.versions) */
    cJSON *epochs; /* per-epoch records for ps.json */
} ps_t;

/* ------------------------------------------------------------ options */

static const dd_strategy_opt ps_opts[] = {
    {"ps", "FILE", "train on the parameter server of cluster file FILE (docs/ps.md):\n"
                   "one process per worker, started by hand or by distdpd ps-local;\n"
                   "no MPI. The servers apply the optimiser", NULL},
    {"key", "KEY", "--ps: this process's secret key file (distdpd keygen)", NULL},
    {"ps-role", "R", "--ps: worker (default: pull, compute, push) or coordinator (owns RUN,\n"
                     "hands out the batches, evaluates, checkpoints; one per run)", NULL},
    {"allow", "FILE", "--ps-role coordinator: the workers' public keys (allow file)", NULL},
    {"staleness", "S", "--ps: 0 synchronous (default), S bounded staleness (no worker more\n"
                       "than S clocks ahead of the slowest), inf asynchronous", NULL},
    {"stale-lr", "on|off", "--ps: on divides a gradient's learning rate by its staleness", NULL},
    {"straggle", "delay_ms=D", "--ps worker: sleep D ms after each batch (benchmarks)", NULL},
    {"lease-ms", "MS", "--ps: a batch not committed within MS ms goes to another worker; a\n"
                       "worker silent that long has left (default 10000)", NULL},
    {"ps-min-workers", "N", "--ps-role coordinator: hand out the first batch only when N workers\n"
                            "have joined (default 1; distdpd ps-local: its --workers)", NULL},
    {"ps-timeout", "S", "--ps: give up when no batch completes (coordinator) or the\n"
                        "coordinator is silent (worker) for S seconds (default 300)", NULL},
    {NULL, NULL, NULL, NULL}};

static int ps_claims(const dd_strategy_args *a) { return dd_strategy_arg(a, "ps") ? 3 : 0; }

static dd_status parse_opts(const dd_strategy_args *a, ps_t *p) {
    memset(p, 0, sizeof *p);
    p->cluster_path = dd_strategy_arg(a, "ps");
    p->key_path = dd_strategy_arg(a, "key");
    p->allow_path = dd_strategy_arg(a, "allow");
    p->out = a->out;
    p->lease_ms = 10000;
    p->timeout_s = 300;
    p->min_workers = 1;
    p->c.ep = -1;
    const char *v;
    if (!p->cluster_path) return dd_error(DD_ERR_ARG, "--ps: missing (the cluster file)");
    if (!p->key_path) return dd_error(DD_ERR_ARG, "--ps needs --key KEY (this process's secret key file)");
    if (a->nranks > 1)
        return dd_error(DD_ERR_ARG, "--ps runs one process per worker without MPI (started under a launcher with %d ranks)",
                        a->nranks);
    p->resuming = a->resume != NULL;
    if ((v = dd_strategy_arg(a, "ps-role"))) {
        if (strcmp(v, "coordinator") == 0) p->coordinator = 1;
        else if (strcmp(v, "worker") != 0) return dd_error(DD_ERR_ARG, "--ps-role: expected worker or coordinator, got '%s'", v);
    }
    if (p->coordinator && !p->allow_path) return dd_error(DD_ERR_ARG, "--ps-role coordinator needs --allow FILE (the workers' keys)");
    if (!p->coordinator && p->allow_path) return dd_error(DD_ERR_ARG, "--allow applies to --ps-role coordinator only");
    if ((v = dd_strategy_arg(a, "staleness"))) {
        char *end;
        if (strcmp(v, "inf") == 0) p->staleness = -1;
        else {
            errno = 0;
            long long s = strtoll(v, &end, 10);
            if (errno || *end || end == v || s < 0 || s > 1000000)
                return dd_error(DD_ERR_ARG, "--staleness: expected an integer in [0, 1000000] or inf, got '%s'", v);
            p->staleness = s;
        }
    }
    if ((v = dd_strategy_arg(a, "stale-lr"))) {
        if (strcmp(v, "on") == 0) p->stale_lr = 1;
        else if (strcmp(v, "off") != 0) return dd_error(DD_ERR_ARG, "--stale-lr: expected on or off, got '%s'", v);
    }
    if ((v = dd_strategy_arg(a, "straggle"))) {
        char *end;
        long d = strncmp(v, "delay_ms=", 9) == 0 ? strtol(v + 9, &end, 10) : -1;
        if (d < 0 || d > 3600000 || *end) return dd_error(DD_ERR_ARG, "--straggle: expected delay_ms=D (0..3600000), got '%s'", v);
        p->straggle_ms = (int)d;
    }
    if ((v = dd_strategy_arg(a, "lease-ms"))) {
        char *end;
        long d = strtol(v, &end, 10);
        if (*end || end == v || d < 100 || d > 86400000) return dd_error(DD_ERR_ARG, "--lease-ms: expected 100..86400000, got '%s'", v);
        p->lease_ms = (int)d;
    }
    if ((v = dd_strategy_arg(a, "ps-min-workers"))) {
        char *end;
        long d = strtol(v, &end, 10);
        if (*end || end == v || d < 1 || d > PS_MAXW)
            return dd_error(DD_ERR_ARG, "--ps-min-workers: expected 1..%d, got '%s'", PS_MAXW, v);
        if (!p->coordinator) return dd_error(DD_ERR_ARG, "--ps-min-workers applies to --ps-role coordinator only");
        p->min_workers = (int)d;
    }
    if ((v = dd_strategy_arg(a, "ps-timeout"))) {
        char *end;
        double d = strtod(v, &end);
        if (*end || end == v || !(d >= 1 && d <= 1e7)) return dd_error(DD_ERR_ARG, "--ps-timeout: expected 1..1e7 seconds, got '%s'", v);
        p->timeout_s = d;
    }
    return DD_OK;
}

static dd_status ps_check(const dd_strategy_args *a) {
    ps_t p;
    return parse_opts(a, &p);
}

/* ------------------------------------------------------------ payload helpers */

static int hist_json(char *buf, size_t cap, const uint64_t *h) {
    int last = 0;
    for (int i = 0; i < PS_HIST; i++)
        if (h[i]) last = i;
    int n = snprintf(buf, cap, "[");
    for (int i = 0; i <= last && n < (int)cap; i++) n += snprintf(buf + n, cap - (size_t)n, "%s%llu", i ? "," : "", (unsigned long long)h[i]);
    if (n < (int)cap) n += snprintf(buf + n, cap - (size_t)n, "]");
    return n;
}

/* ------------------------------------------------------------ coordinator */

/* Serves the router for up to wait_ms; returns after the first message handled. */
static dd_status serve(ps_t *p, long wait_ms) {
    dd_net_msg m;
    int r = dd_net_recv(p->router, 1, wait_ms, 1u << 24, &m);
    if (r < 0) return dd_error_prefix(DD_ERR_COMM, "ps-coordinator: ");
    if (r == 0) return DD_OK;
    dd_pst_reply rep = {0};
    if (!m.ok) dd_pst_coord_refuse(&rep, m.peer, "%s", m.err);
    else dd_pst_coord_on_msg(&p->c, &m.h, m.payload, m.peer, dd_net_ms(), &rep);
    if (rep.send) dd_net_send(p->router, m.rid, m.rid_n, rep.type, m.ok ? m.h.seq : 0, 0, rep.p, rep.n);
    dd_net_msg_free(&m);
    return DD_OK;
}

static dd_status check_optimizer(const ps_t *p, const dd_train_cfg *cfg) {
    dd_optim_kind k;
    DD_TRY(dd_optim_kind_parse(cfg->opt, &k));
    const dd_optim_cfg *a = &cfg->optim, *b = &p->cl.optim_cfg;
    if (k != p->cl.optim)
        return dd_error(DD_ERR_MISMATCH, "%s: optimizer.kind is %s but the run trains with --opt %s: the servers apply the "
                                         "optimiser, so they must agree", p->cluster_path, dd_optim_kind_name(p->cl.optim), cfg->opt);
    struct { const char *n; double x, y; } f[] = {{"momentum", a->momentum, b->momentum}, {"dampening", a->dampening, b->dampening},
                                                 {"beta1", a->beta1, b->beta1}, {"beta2", a->beta2, b->beta2},
                                                 {"eps", a->eps, b->eps}, {"weight_decay", a->weight_decay, b->weight_decay}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (fabs(f[i].x - f[i].y) > 1e-12 * fabs(f[i].x))
            return dd_error(DD_ERR_MISMATCH, "%s: optimizer.%s is %g but the run's is %g: the servers apply the optimiser, so "
                                             "they must agree", p->cluster_path, f[i].n, f[i].y, f[i].x);
    if (a->nesterov != b->nesterov) return dd_error(DD_ERR_MISMATCH, "%s: optimizer.nesterov differs from the run's", p->cluster_path);
    return DD_OK;
}

static dd_status blocks_of(dd_trainer *tr, dd_ps_block **b, size_t *n) {
    return dd_ps_blocks_from_table(dd_model_params(dd_trainer_model(tr)), DD_PS_DEFAULT_BLOCK, b, n);
}

static dd_status restore_servers(ps_t *p, dd_trainer *tr);

/* The coordinator's callbacks (ps_coord.h): the trainer's batches and learning rate, the
 * servers' apply. */
static void co_slice(void *u, uint64_t k, uint64_t *lo, uint64_t *hi, uint64_t *global) {
    dd_trainer_batch_slice(((ps_t *)u)->tr, k, 0, 1, lo, hi, global);
}

static double co_lr(void *u) { return dd_trainer_lr(((ps_t *)u)->tr); }

static dd_status co_apply(void *u, uint64_t cid, uint64_t txn) {
    ps_t *p = u;
    return p->cli ? dd_ps_client_apply(p->cli, cid, txn, NULL) : dd_error(DD_ERR_INTERNAL, "no parameter-server client");
}

static dd_status co_setup(void *self, dd_trainer *tr) {
    ps_t *p = self;
    p->tr = tr;
    if (p->cli) return p->resuming ? restore_servers(p, tr) : DD_OK; /* after a checkpoint load */
    DD_TRY(dd_ps_cluster_read(p->cluster_path, 0, &p->cl));
    if (!p->cl.coord_address[0])
        return dd_error(DD_ERR_ARG, "%s: no \"coordinator\" entry: workers find the coordinator there (docs/ps.md)", p->cluster_path);
    DD_TRY(check_optimizer(p, dd_trainer_cfg(tr)));
    DD_TRY(dd_train_cfg_to_json(dd_trainer_cfg(tr), &p->cfg_json));
    p->c.staleness = p->staleness;
    p->c.stale_lr = p->stale_lr;
    p->c.lease_ms = p->lease_ms;
    p->c.min_workers = p->min_workers;
    p->c.cfg_json = p->cfg_json;
    p->c.u = p;
    p->c.slice = co_slice;
    p->c.lr = co_lr;
    p->c.apply = co_apply;
    DD_TRY(blocks_of(tr, &p->blocks, &p->nblocks));
    p->ver = malloc(p->nblocks * sizeof *p->ver);
    if (!p->ver) return dd_error(DD_ERR_NOMEM, "ps");
    dd_ps_client_opts co = {.key_path = p->key_path, .dead_ms = 3000};
    DD_TRY(dd_ps_client_open(p->cluster_path, &co, &p->cli));
    DD_TRY(dd_ps_client_set_blocks(p->cli, p->blocks, p->nblocks));
    /* the servers start from this run's initial parameters (a block that exists keeps its
     * values: then every process pulls those); on --resume from last.ckpt's state, after
     * dd_train_run loaded it (restore_servers) */
    for (size_t i = 0; i < p->nblocks; i++) p->ver[i] = UINT64_MAX;
    if (!p->resuming) {
        DD_TRY(dd_ps_client_init(p->cli, dd_trainer_params(tr), NULL));
        DD_TRY(dd_ps_client_pull(p->cli, dd_trainer_params(tr), p->ver));
    }
    /* the workers' endpoint */
    char sec[DD_NET_KEY_Z85 + 1];
    DD_TRY(dd_net_key_read(p->key_path, 1, sec));
    dd_net_allow *allow = NULL;
    DD_TRY(dd_net_allow_load(p->allow_path, &allow));
    p->ctx = zmq_ctx_new();
    if (!p->ctx) return dd_error(DD_ERR_NOMEM, "zmq context");
    DD_TRY(dd_net_zap_start(p->ctx, allow, p->allow_path, "ps-coordinator", &p->zap));
    dd_status st = dd_net_router(p->ctx, p->cl.coord_address, sec, 1 << 24, &p->router);
    memset(sec, 0, sizeof sec);
    if (st) return st;
    p->epochs = cJSON_CreateArray();
    dd_log(DD_LOG_INFO, "ps-coordinator: %zu blocks on %zu servers, workers at %s", p->nblocks, p->cl.n, p->cl.coord_address);
    return DD_OK;
}

/* --resume (docs/ps.md, "Resuming"): the checkpoint's whole-model parameters and
 * optimiser state (dd_trainer_load put them into the trainer) cut into the blocks and
 * restored on the servers with the blocks' version clocks; then pulled back, so that the
 * run goes on from what the servers hold. */
static dd_status restore_servers(ps_t *p, dd_trainer *tr) {
    if (!p->ck_ver)
        return dd_error(DD_ERR_FORMAT, "%s/last.ckpt: no ps.versions section: not the checkpoint of a --ps run (resume it "
                                       "without --ps)", p->out ? p->out : "RUN");
    dd_optim *opt = dd_trainer_optim(tr);
    const size_t n = dd_trainer_num_floats(tr), whole = dd_optim_state_bytes(opt);
    const int arrays = dd_optim_state_arrays(opt);
    uint8_t *blob = malloc(whole ? whole : 1);
    void **bs = calloc(p->nblocks, sizeof *bs);
    size_t *bb = calloc(p->nblocks, sizeof *bb);
    dd_status st = blob && bs && bb ? dd_optim_state_save(opt, blob, whole) : dd_error(DD_ERR_NOMEM, "ps: restore");
    const float *arr = (const float *)(const void *)(blob + DD_OPTIM_STATE_HEADER);
    for (size_t i = 0; st == DD_OK && i < p->nblocks; i++) {
        const size_t len = p->blocks[i].len;
        bb[i] = dd_optim_state_bytes_for(opt, len);
        if (!(bs[i] = calloc(1, bb[i]))) {
            st = dd_error(DD_ERR_NOMEM, "ps: restore");
            break;
        }
        if ((st = dd_optim_state_header(opt, len, bs[i]))) break;
        float *dst = (float *)(void *)((uint8_t *)bs[i] + DD_OPTIM_STATE_HEADER);
        for (int j = 0; j < arrays; j++) memcpy(dst + (size_t)j * len, arr + (size_t)j * n + p->blocks[i].offset, len * 4);
    }
    if (st == DD_OK) st = dd_ps_client_restore(p->cli, dd_trainer_params(tr), (const void *const *)bs, bb, p->ck_ver);
    for (size_t i = 0; bs && i < p->nblocks; i++) free(bs[i]);
    free(bs);
    free(bb);
    free(blob);
    if (st) return st;
    for (size_t i = 0; i < p->nblocks; i++) p->ver[i] = UINT64_MAX;
    DD_TRY(dd_ps_client_pull(p->cli, dd_trainer_params(tr), p->ver));
    p->resuming = 0;
    dd_log(DD_LOG_INFO, "ps-coordinator: %zu blocks restored on the servers from %s/last.ckpt (epoch %d, batch %llu)",
           p->nblocks, p->out ? p->out : "RUN", dd_trainer_epoch(tr) + 1, (unsigned long long)dd_trainer_batch(tr));
    return DD_OK;
}

/* --resume: the blocks' version clocks of the checkpoint (co_save's ps.versions). */
static dd_status co_load(void *self, dd_trainer *tr, const dd_ckpt_reader *r) {
    ps_t *p = self;
    (void)tr;
    const void *d;
    size_t bytes;
    if (dd_ckpt_get(r, "ps.versions", &d, &bytes) != DD_OK) {
        dd_error_clear();
        return DD_OK; /* restore_servers names it */
    }
    if (!p->blocks || bytes != p->nblocks * sizeof *p->ck_ver)
        return dd_error(DD_ERR_MISMATCH, "%s/last.ckpt: ps.versions has %zu blocks, the model %zu", p->out ? p->out : "RUN",
                        bytes / sizeof *p->ck_ver, p->nblocks);
    free(p->ck_ver);
    if (!(p->ck_ver = malloc(bytes))) return dd_error(DD_ERR_NOMEM, "ps");
    memcpy(p->ck_ver, d, bytes);
    return DD_OK;
}

static dd_status co_step(void *self, dd_trainer *tr, double *loss) {
    ps_t *p = self;
    if (p->c.ep != dd_trainer_epoch(tr))
        DD_TRY(dd_pst_coord_start_epoch(&p->c, dd_trainer_epoch(tr), dd_trainer_num_batches(tr), dd_trainer_num_frames(tr),
                                        dd_trainer_batch(tr)));
    int64_t t0 = dd_net_ms();
    for (;;) {
        if (p->c.fhead < p->c.ftail) {
            const double gn = p->c.gfifo[p->c.fhead];
            double l = p->c.fifo[p->c.fhead++];
            if (!isfinite(l)) l = p->last_loss; /* a push lost with its worker */
            p->last_loss = l;
            DD_TRY(dd_trainer_advance(tr, l, gn));
            if (loss) *loss = l;
            if (dd_trainer_batch(tr) >= p->c.nb) {
                /* the epoch is complete (every push acknowledged): evaluation and the
                 * checkpoint see the servers' weights */
                DD_TRY(dd_ps_client_pull(p->cli, dd_trainer_params(tr), p->ver));
                if (dd_trainer_epoch(tr) + 1 >= dd_trainer_cfg(tr)->epochs) p->c.finished = 1;
            }
            return DD_OK;
        }
        DD_TRY(serve(p, 20));
        dd_pst_coord_expire(&p->c, dd_net_ms());
        if (p->c.fhead < p->c.ftail) t0 = dd_net_ms();
        if ((double)(dd_net_ms() - t0) > 1e3 * p->timeout_s) {
            int live = 0;
            for (int i = 0; i < p->c.nw; i++) live += p->c.w[i].alive;
            return dd_error(DD_ERR_TIMEOUT, "ps-coordinator: no batch completed in %g s (--ps-timeout; %d live workers, %d joined, "
                                            "--ps-min-workers %d): start workers with --ps %s", p->timeout_s, live, p->c.nw,
                            p->min_workers, p->cluster_path);
        }
    }
}

static dd_status co_bcast(void *self, double *vals, int nv) {
    (void)self;
    (void)vals;
    (void)nv;
    return DD_OK;
}

/* The servers' blocks with their optimiser state into the trainer (its optimiser holds
 * the whole model's state, assembled from the blocks), so that the checkpoint dd_train_run
 * writes next is the servers' state. */
static dd_status co_before_save(void *self, dd_trainer *tr) {
    ps_t *p = self;
    if (!p->cli) return DD_OK;
    DD_TRY(dd_ps_client_pull_state(p->cli, dd_trainer_params(tr), p->ver));
    dd_optim *opt = dd_trainer_optim(tr);
    size_t n = dd_trainer_num_floats(tr), cnt = 0;
    const int arrays = dd_optim_state_arrays(opt);
    size_t sb0 = 0;
    const void *b0 = dd_ps_client_block_state(p->cli, 0, &sb0);
    dd_optim *tmp = NULL;
    DD_TRY(dd_optim_create(dd_trainer_cfg(tr)->opt, &dd_trainer_cfg(tr)->optim, p->blocks[0].len, &tmp));
    dd_status st = dd_optim_state_load(tmp, b0, sb0);
    size_t bytes = dd_optim_state_bytes_for(opt, n);
    uint8_t *blob = st == DD_OK ? calloc(1, bytes) : NULL;
    if (st == DD_OK && !blob) st = dd_error(DD_ERR_NOMEM, "ps: optimiser state");
    if (st == DD_OK) st = dd_optim_state_header(tmp, n, blob);
    float *arr = (float *)(void *)(blob + DD_OPTIM_STATE_HEADER);
    for (size_t i = 0; st == DD_OK && i < p->nblocks; i++) {
        size_t sb = 0;
        const uint8_t *s = dd_ps_client_block_state(p->cli, i, &sb);
        const size_t len = p->blocks[i].len;
        if (!s || sb != DD_OPTIM_STATE_HEADER + (size_t)arrays * len * 4) {
            st = dd_error(DD_ERR_FORMAT, "ps: block '%s': optimiser state of %zu bytes, expected %zu", p->blocks[i].name, sb,
                          DD_OPTIM_STATE_HEADER + (size_t)arrays * len * 4);
            break;
        }
        for (int j = 0; j < arrays; j++)
            memcpy(arr + (size_t)j * n + p->blocks[i].offset, s + DD_OPTIM_STATE_HEADER + (size_t)j * len * 4, len * 4);
        if (p->ver[i] != p->ver[0]) cnt++;
    }
    if (st == DD_OK) st = dd_optim_state_load(opt, blob, bytes);
    if (cnt) dd_log(DD_LOG_WARN, "ps-coordinator: checkpoint with %zu blocks at another version than the first (pushes in flight)", cnt);
    free(blob);
    dd_optim_destroy(&tmp);
    return st;
}

static dd_status co_save(void *self, dd_trainer *tr, dd_ckpt_writer *w) {
    ps_t *p = self;
    (void)tr;
    if (!p->ver) return DD_OK;
    return dd_ckpt_add(w, "ps.versions", p->ver, p->nblocks * sizeof *p->ver);
}

static dd_status co_epoch_json(void *self, char *buf, size_t cap) {
    ps_t *p = self;
    uint64_t once = 0, more = 0, missed = 0;
    for (uint64_t f = 0; f < p->c.nframes; f++) {
        once += p->c.fcount[f] == 1;
        more += p->c.fcount[f] > 1;
        missed += p->c.fcount[f] == 0;
    }
    int live = 0;
    for (int i = 0; i < p->c.nw; i++) live += p->c.w[i].alive;
    char hs[600], hl[600];
    hist_json(hs, sizeof hs, p->c.hist);
    hist_json(hl, sizeof hl, p->c.lag);
    snprintf(buf, cap,
             "\"ps_workers\":%d,\"ps_staleness\":%lld,\"ps_staleness_hist\":%s,\"ps_update_lag_hist\":%s,"
             "\"ps_frames_once\":%llu,\"ps_frames_repeated\":%llu,\"ps_frames_missed\":%llu,\"ps_leases_expired\":%llu,"
             "\"ps_batches_redone\":%llu,\"ps_commits_refused\":%llu,\"ps_pushes_completed\":%llu,"
             "\"ps_pushes_lost\":%llu",
             live, (long long)p->staleness, hs, hl, (unsigned long long)once, (unsigned long long)more,
             (unsigned long long)missed, (unsigned long long)p->c.ep_expired, (unsigned long long)p->c.ep_redone,
             (unsigned long long)p->c.ep_refused, (unsigned long long)p->c.ep_completed, (unsigned long long)p->c.ep_lost);
    if (p->epochs) {
        char obj[2300];
        snprintf(obj, sizeof obj, "{\"epoch\":%d,\"frames\":%llu,%s}", p->c.ep + 1, (unsigned long long)p->c.nframes, buf);
        cJSON *o = cJSON_Parse(obj);
        if (o) cJSON_AddItemToArray(p->epochs, o);
    }
    return DD_OK;
}

static const dd_strategy_ops co_ops = {
    .name = "ps",
    .setup = co_setup,
    .step = co_step,
    .bcast = co_bcast,
    .before_save = co_before_save,
    .save = co_save,
    .load = co_load,
    .epoch_json = co_epoch_json,
};

/* ps.json (coordinator, after training) and parallel.json's "ps" fields. */
static dd_status ps_report(const void *self, cJSON *pj) {
    const ps_t *p = self;
    if (!p->coordinator) return DD_OK;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cluster", p->cluster_path);
    cJSON_AddStringToObject(o, "staleness", p->staleness < 0 ? "inf" : "");
    if (p->staleness >= 0) cJSON_ReplaceItemInObject(o, "staleness", cJSON_CreateNumber((double)p->staleness));
    cJSON_AddBoolToObject(o, "stale_lr", p->stale_lr);
    cJSON_AddNumberToObject(o, "lease_ms", p->lease_ms);
    cJSON *sv = cJSON_AddArrayToObject(o, "servers");
    for (size_t i = 0; i < p->cl.n; i++) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "name", p->cl.servers[i].name);
        cJSON_AddStringToObject(s, "address", p->cl.servers[i].address);
        cJSON_AddItemToArray(sv, s);
    }
    cJSON_AddNumberToObject(o, "replicas", p->cl.replicas);
    cJSON *bl = cJSON_AddArrayToObject(o, "blocks");
    dd_ps_ring *ring = NULL;
    const char *names[DD_PS_MAX_SERVERS];
    for (size_t i = 0; i < p->cl.n; i++) names[i] = p->cl.servers[i].name;
    if (p->cl.n && dd_ps_ring_create(names, p->cl.n, p->cl.vnodes, &ring) == DD_OK) {
        for (size_t i = 0; i < p->nblocks; i++) {
            int pl[DD_PS_MAX_SERVERS];
            int k = dd_ps_ring_place(ring, p->blocks[i].name, NULL, pl, 1 + p->cl.replicas);
            cJSON *b = cJSON_CreateObject();
            cJSON_AddStringToObject(b, "name", p->blocks[i].name);
            cJSON_AddNumberToObject(b, "floats", (double)p->blocks[i].len);
            cJSON_AddNumberToObject(b, "version", p->ver ? (double)p->ver[i] : 0);
            cJSON *on = cJSON_AddArrayToObject(b, "servers");
            for (int j = 0; j < k; j++) cJSON_AddItemToArray(on, cJSON_CreateString(p->cl.servers[pl[j]].name));
            cJSON_AddItemToArray(bl, b);
        }
        dd_ps_ring_free(&ring);
    }
    cJSON *wa = cJSON_AddArrayToObject(o, "workers");
    uint64_t resends = 0;
    for (int i = 0; i < p->c.nw; i++) {
        const dd_pst_worker *w = &p->c.w[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", w->name);
        cJSON_AddNumberToObject(x, "batches", (double)w->batches);
        cJSON_AddNumberToObject(x, "compute_s", w->compute_s);
        cJSON_AddNumberToObject(x, "commits_refused", (double)w->refused);
        cJSON_AddNumberToObject(x, "leases_expired", (double)w->expired);
        cJSON_AddNumberToObject(x, "resends", (double)w->resends);
        cJSON_AddStringToObject(x, "state", w->dead ? "dead" : w->alive ? "running" : "left");
        cJSON_AddItemToArray(wa, x);
        resends += w->resends;
    }
    cJSON_AddNumberToObject(o, "pushes", (double)p->c.tot_batches);
    dd_ps_client_stats cs = {0};
    if (p->cli) dd_ps_client_get_stats(p->cli, &cs);
    cJSON_AddNumberToObject(o, "resends", (double)(resends + cs.resends));
    if (p->epochs) cJSON_AddItemToObject(o, "epochs", cJSON_Duplicate(p->epochs, 1));
    dd_status st = DD_OK;
    if (p->out) {
        char *txt = cJSON_Print(o), path[4200];
        snprintf(path, sizeof path, "%s/ps.json", p->out);
        FILE *f = txt ? fopen(path, "w") : NULL;
        if (!f || fprintf(f, "%s\n", txt) < 0) st = dd_error(DD_ERR_IO, "%s: cannot write", path);
        if (f && fclose(f) != 0 && st == DD_OK) st = dd_error(DD_ERR_IO, "%s: cannot write", path);
        cJSON_free(txt);
    }
    cJSON_AddNumberToObject(pj, "ps_workers", p->c.nw);
    cJSON_AddNumberToObject(pj, "ps_pushes", (double)p->c.tot_batches);
    cJSON_Delete(o);
    return st;
}

/* ------------------------------------------------------------ worker */

typedef struct {
    void *ctx, *sock;
    uint64_t id, seq;
    const char *addr;
    double timeout_s;
} coord_link;

/* One request to the coordinator, resent until answered; an error reply or silence for
 * timeout_s seconds fails. *reply (caller frees with zmq_msg_close) holds the answer. */
static dd_status coord_req(coord_link *l, int type, const dd_nbuf *pl, int want, zmq_msg_t *reply, const uint8_t **rp,
                           uint32_t *rn) {
    uint64_t seq = ++l->seq;
    int64_t t0 = dd_net_ms(), sent = t0, rto = 200;
    dd_net_send(l->sock, NULL, 0, type, seq, l->id, pl ? pl->p : NULL, pl ? (uint32_t)pl->n : 0);
    for (;;) {
        zmq_pollitem_t it = {l->sock, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, 20);
        if (rc < 0 && errno != EINTR) return dd_error(DD_ERR_COMM, "zmq_poll: %s", zmq_strerror(errno));
        while (rc > 0) {
            zmq_msg_init(reply);
            if (zmq_msg_recv(reply, l->sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(reply);
                break;
            }
            dd_net_hdr h;
            const uint8_t *p;
            if (!zmq_msg_more(reply) && dd_net_parse(zmq_msg_data(reply), zmq_msg_size(reply), 1u << 24, &h, &p) == DD_OK &&
                h.seq == seq) {
                if (h.type == DD_MSG_ERR) {
                    dd_status e = dd_error(DD_ERR_COMM, "the coordinator (%s) refused the %s: %.*s", l->addr,
                                           dd_msg_type_name(type), (int)(h.len < 400 ? h.len : 400), (const char *)p);
                    zmq_msg_close(reply);
                    return e;
                }
                if (h.type == want) {
                    *rp = p;
                    *rn = h.len;
                    return DD_OK;
                }
            }
            zmq_msg_close(reply);
        }
        int64_t now = dd_net_ms();
        if ((double)(now - t0) > 1e3 * l->timeout_s)
            return dd_error(DD_ERR_TIMEOUT, "the coordinator %s did not answer a %s in %g s (--ps-timeout; wrong key?)", l->addr,
                            dd_msg_type_name(type), l->timeout_s);
        if (now - sent > rto) {
            dd_net_send(l->sock, NULL, 0, type, seq, l->id, pl ? pl->p : NULL, pl ? (uint32_t)pl->n : 0);
            sent = now;
            rto = rto * 2 > 2000 ? 2000 : rto * 2;
        }
    }
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static dd_status worker_run(ps_t *p, const char *data, const char *pa_run, const volatile int *stop) {
    dd_status st;
    dd_ps_cluster cl;
    DD_TRY(dd_ps_cluster_read(p->cluster_path, 0, &cl));
    coord_link l = {0};
    l.timeout_s = p->timeout_s;
    char addr[256];
    snprintf(addr, sizeof addr, "%s", cl.coord_address);
    l.addr = addr;
    dd_trainer *tr = NULL;
    dd_dataset *ds = NULL;
    dd_run_model parun;
    int have_parun = 0;
    dd_ps_client *cli = NULL;
    dd_ps_block *blocks = NULL;
    size_t nb = 0;
    uint64_t *ver = NULL, *ver2 = NULL;
    char *json = NULL, sec[41] = "", pub[41] = "";
    zmq_msg_t rep;
    const uint8_t *rp;
    uint32_t rn;
    int have_rep = 0;
    uint64_t batches = 0, refused = 0;
    if (!cl.coord_address[0]) {
        st = dd_error(DD_ERR_ARG, "%s: no \"coordinator\" entry: a worker needs it (docs/ps.md)", p->cluster_path);
        goto done;
    }
    if ((st = dd_net_key_read(p->key_path, 1, sec)) || (st = dd_net_key_public(sec, pub))) goto done;
    l.ctx = zmq_ctx_new();
    if ((st = dd_net_dealer(l.ctx, cl.coord_address, sec, pub, cl.coord_key, &l.sock))) goto done;
    {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&l.id, sizeof l.id, 1, f) != 1) l.id = (uint64_t)getpid() * 2654435761u ^ (uint64_t)dd_net_ms();
        if (f) fclose(f);
        l.id &= ~0xFFFF000000000000ull;
    }
    char name[64], host[32] = "?";
    gethostname(host, sizeof host - 1);
    const char *kb = strrchr(p->key_path, '/');
    snprintf(name, sizeof name, "%.20s:%d@%.20s", kb ? kb + 1 : p->key_path, (int)getpid(), host);
    /* Test-only fault injection (docs/ps.md, "Atomic pushes"): DD_PS_KILL_AFTER_COMMIT=K:N
     * makes the worker whose key file's name starts with "K." exit at once after its N-th
     * granted commit, between its stage and its apply. */
    long kill_after = 0, commits = 0;
    const char *ka = getenv("DD_PS_KILL_AFTER_COMMIT"), *kc = ka ? strrchr(ka, ':') : NULL;
    const char *kn = kb ? kb + 1 : p->key_path;
    if (kc && (size_t)(kc - ka) > 0 && strncmp(kn, ka, (size_t)(kc - ka)) == 0 && kn[kc - ka] == '.')
        kill_after = strtol(kc + 1, NULL, 10);
    {
        dd_nbuf b = {0};
        dd_pst_enc_hello(&b, name);
        st = coord_req(&l, DD_MSG_HELLO, &b, DD_MSG_WELCOME, &rep, &rp, &rn);
        dd_nbuf_free(&b);
        if (st) goto done;
        dd_pst_welcome wm;
        st = dd_pst_dec_welcome(rp, rn, &wm);
        zmq_msg_close(&rep);
        if (st) {
            st = dd_error_prefix(st, "the coordinator %s sent a malformed ", addr);
            goto done;
        }
        json = wm.cfg_json;
        p->stale_lr = wm.stale_lr;
        p->lease_ms = (int)wm.lease_ms;
        p->staleness = wm.staleness == UINT64_MAX ? -1 : (int64_t)wm.staleness;
    }
    dd_train_cfg cfg;
    if ((st = dd_train_cfg_from_json(json, "the coordinator's configuration", &cfg))) goto done;
    dd_model_ref pref, *pp = NULL;
    if (cfg.task != DD_TRAIN_PA) {
        if (!pa_run) {
            st = dd_error(DD_ERR_ARG, "a DPD worker needs --pa-run (the PA run the coordinator trains through)");
            goto done;
        }
        if ((st = dd_run_model_load(pa_run, "best", &parun))) goto done;
        have_parun = 1;
        pref.name = dd_model_name(parun.model);
        pref.cfg = *dd_model_config(parun.model);
        pref.params = parun.params;
        pref.n = dd_model_params(parun.model)->total;
        pp = &pref;
        if (!data) data = parun.data;
    }
    if (!data) {
        st = dd_error(DD_ERR_ARG, "a worker needs --data (the coordinator's data set)");
        goto done;
    }
    if ((st = dd_dataset_load(data, &ds))) goto done;
    if ((st = dd_trainer_create(&cfg, ds, pp, NULL, &tr))) goto done;
    if ((st = blocks_of(tr, &blocks, &nb))) goto done;
    ver = malloc(nb * sizeof *ver);
    ver2 = malloc(nb * sizeof *ver2);
    if (!ver || !ver2) {
        st = dd_error(DD_ERR_NOMEM, "worker");
        goto done;
    }
    for (size_t i = 0; i < nb; i++) ver[i] = UINT64_MAX;
    dd_ps_client_opts co = {.key_path = p->key_path, .dead_ms = 3000};
    if ((st = dd_ps_client_open(p->cluster_path, &co, &cli)) || (st = dd_ps_client_set_blocks(cli, blocks, nb))) goto done;
    dd_log(DD_LOG_INFO, "ps worker %s: joined (staleness %lld, %zu blocks)", name, (long long)p->staleness, nb);
    float *g = dd_trainer_grads(tr);
    const size_t n = dd_trainer_num_floats(tr);
    for (;;) {
        if (stop && *stop) break;
        if ((st = coord_req(&l, DD_MSG_LEASE, NULL, DD_MSG_LEASE_REP, &rep, &rp, &rn))) goto done;
        dd_pst_lease lm;
        st = dd_pst_dec_lease(rp, rn, &lm);
        zmq_msg_close(&rep);
        if (st) {
            st = dd_error_prefix(st, "the coordinator %s sent a malformed ", addr);
            goto done;
        }
        const uint64_t e = lm.epoch, b = lm.batch, lo = lm.lo, hi = lm.hi, gl = lm.global, stal = lm.staleness;
        double lr = lm.lr;
        if (lm.kind == DD_PST_LEASE_END) break;
        if (lm.kind == DD_PST_LEASE_WAIT) {
            sleep_ms(2);
            continue;
        }
        double t0 = dd_now();
        if ((st = dd_ps_client_pull(cli, dd_trainer_params(tr), ver))) goto done;
        uint64_t v_pull = ver[0];
        double sse = 0;
        if ((st = dd_trainer_compute_grads(tr, e, lo, hi, gl, NULL, &sse))) goto done;
        double loss = sse * dd_trainer_loss_scale(tr, gl), norm;
        if (cfg.clip > 0) {
            if ((st = dd_clip_grad_norm(g, n, cfg.clip, &norm))) goto done;
        } else if (!isfinite(norm = sqrt(dd_grad_sumsq(g, n)))) {
            st = dd_error(DD_ERR_NUMERIC, "training diverged: the gradient is not finite at epoch %llu, batch %llu",
                          (unsigned long long)e + 1, (unsigned long long)b + 1);
            goto done;
        }
        if (p->straggle_ms) sleep_ms(p->straggle_ms);
        double cs = dd_now() - t0;
        if (p->stale_lr && stal > 1) lr /= (double)stal;
        /* two-phase push: stage on the servers, commit (the coordinator decides), apply */
        uint64_t txn = 0;
        if ((st = dd_ps_client_stage(cli, g, lr, &txn))) goto done;
        dd_nbuf cb = {0};
        const dd_pst_commit cm = {e, b, dd_ps_client_id(cli), txn};
        dd_pst_enc_commit(&cb, &cm);
        st = coord_req(&l, DD_MSG_COMMIT, &cb, DD_MSG_COMMIT_REP, &rep, &rp, &rn);
        dd_nbuf_free(&cb);
        if (st) goto done;
        int ok = 0;
        st = dd_pst_dec_commit_rep(rp, rn, &ok);
        zmq_msg_close(&rep);
        if (st) {
            st = dd_error_prefix(st, "the coordinator %s sent a malformed ", addr);
            goto done;
        }
        if (!ok) { /* the lease was lost (we were too slow): another worker does the batch */
            refused++;
            continue;
        }
        if (kill_after && ++commits == kill_after) { /* test-only: die between commit and apply */
            dd_log(DD_LOG_WARN, "ps worker %s: DD_PS_KILL_AFTER_COMMIT: exiting after commit %ld", name, kill_after);
            _exit(137);
        }
        /* a server that died after the stage took its staged blocks with it: stage again
         * under the same transaction (blocks that applied it ignore it) and apply again */
        for (int attempt = 0; (st = dd_ps_client_apply(cli, 0, txn, ver2)) != DD_OK; attempt++) {
            if (st != DD_ERR_COMM || attempt == 2) goto done;
            dd_log(DD_LOG_WARN, "ps worker %s: %s: staging batch %llu again", name, dd_last_error(),
                   (unsigned long long)b + 1);
            if ((st = dd_ps_client_stage(cli, g, lr, &txn))) goto done;
        }
        uint64_t lag = ver2[0] > v_pull + 1 ? ver2[0] - v_pull - 1 : 0;
        dd_ps_client_stats cst;
        dd_ps_client_get_stats(cli, &cst);
        dd_nbuf db = {0};
        const dd_pst_done dm = {e, b, loss, lag, cst.resends, cs, norm};
        dd_pst_enc_done(&db, &dm);
        st = coord_req(&l, DD_MSG_DONE, &db, DD_MSG_ACK, &rep, &rp, &rn);
        dd_nbuf_free(&db);
        if (st) goto done;
        zmq_msg_close(&rep);
        batches++;
    }
    {
        /* leaving: tell the coordinator (its answer is not needed: a short wait) */
        double keep = l.timeout_s;
        l.timeout_s = 1;
        if (coord_req(&l, DD_MSG_BYE, NULL, DD_MSG_ACK, &rep, &rp, &rn) == DD_OK) zmq_msg_close(&rep);
        dd_error_clear();
        l.timeout_s = keep;
    }
    dd_log(DD_LOG_INFO, "ps worker %s: %llu batches, %llu commits refused", name, (unsigned long long)batches,
           (unsigned long long)refused);
done:
    (void)have_rep;
    memset(sec, 0, sizeof sec);
    dd_ps_client_close(&cli);
    free(blocks);
    free(ver);
    free(ver2);
    free(json);
    dd_trainer_destroy(&tr);
    dd_dataset_free(&ds);
    if (have_parun) dd_run_model_free(&parun);
    if (l.sock) {
        int z = 0;
        zmq_setsockopt(l.sock, ZMQ_LINGER, &z, sizeof z);
        zmq_close(l.sock);
    }
    if (l.ctx) zmq_ctx_term(l.ctx);
    dd_ps_cluster_free(&cl);
    return st;
}

/* ------------------------------------------------------------ the registry entry */

static dd_status ps_create(dd_comm *comm, const dd_strategy_args *a, void **self) {
    (void)comm;
    ps_t *p = calloc(1, sizeof *p);
    if (!p) return dd_error(DD_ERR_NOMEM, "ps");
    dd_status st = parse_opts(a, p);
    if (st) {
        free(p);
        return st;
    }
    *self = p;
    return DD_OK;
}

static void ps_destroy(void *self) {
    ps_t *p = self;
    if (!p) return;
    if (p->router) {
        /* the end: every worker that asks for a batch is told so (a short while) */
        p->c.finished = 1;
        int64_t t0 = dd_net_ms();
        while (dd_net_ms() - t0 < 3000) {
            int live = 0;
            for (int i = 0; i < p->c.nw; i++) live += p->c.w[i].alive && !p->c.w[i].dead;
            if (!live) break;
            if (serve(p, 20) != DD_OK) break;
        }
        dd_error_clear();
        int z = 0;
        zmq_setsockopt(p->router, ZMQ_LINGER, &z, sizeof z);
        zmq_close(p->router);
    }
    dd_net_zap_stop(&p->zap);
    if (p->ctx) zmq_ctx_term(p->ctx);
    dd_ps_client_close(&p->cli);
    dd_ps_cluster_free(&p->cl);
    free(p->blocks);
    free(p->ver);
    free(p->ck_ver);
    free(p->cfg_json);
    dd_pst_coord_free(&p->c);
    cJSON_Delete(p->epochs);
    free(p);
}

static void ps_strategy(void *self, dd_strategy *st) {
    memset(st, 0, sizeof *st);
    st->ops = &co_ops;
    st->self = self;
    st->rank = 0;
    st->nranks = 1;
}

static void ps_set_stop_source(void *self, const volatile int *local) {
    (void)self;
    (void)local; /* the coordinator stops on dd_train_run's own flag */
}

static dd_status ps_drive(void *self, const dd_train_cfg *cfg, const char *data, const char *pa_run, const volatile int *stop,
                          int *drove) {
    ps_t *p = self;
    (void)cfg;
    *drove = 0;
    if (p->coordinator) return DD_OK;
    *drove = 1;
    return worker_run(p, data, pa_run, stop);
}

static void ps_summary(const void *self, FILE *f) {
    const ps_t *p = self;
    if (!p->coordinator) return;
    char s[32];
    if (p->staleness < 0) snprintf(s, sizeof s, "inf");
    else snprintf(s, sizeof s, "%lld", (long long)p->staleness);
    fprintf(f, "ps:         %d workers joined, %llu pushes, staleness %s\n", p->c.nw, (unsigned long long)p->c.tot_batches, s);
}

const dd_strategy_def dd_strategy_def_ps = {
    .name = "ps",
    .title = "parameter server",
    .when = "--ps CLUSTER_FILE",
    .opts = ps_opts,
    .claims = ps_claims,
    .check = ps_check,
    .create = ps_create,
    .destroy = ps_destroy,
    .strategy = ps_strategy,
    .set_stop_source = ps_set_stop_source,
    .report = ps_report,
    .print_summary = ps_summary,
    .drive = ps_drive,
};
