/* Planning sharded data parallelism (plan.h): the arena bytes each rank allocates and the
 * collectives of one optimiser step for --shard none|zero1|zero2|zero3, predicted from the
 * same sizes the code allocates with:
 *   - parameters, gradients: the model's arena (dd_model_params()->total floats, each
 *     table entry 16-float aligned) or this rank's slice of it (dd_shard_partition; an
 *     empty slice still allocates one float), plus zero2/zero3's two stage gradient
 *     buffers and zero3's two stage parameter buffers of the largest stage
 *     (src/parallel/zero.c build_stages);
 *   - optimiser: dd_optim_state_arrays floats per float of the (sliced) arena;
 *   - activations: the trainer's batch buffers for the largest per-rank slice of a global
 *     batch and the model workspace (dd_trainer_create), plus the evaluation buffers on
 *     rank 0 (on every rank under zero3, whose evaluation is collective);
 *   - communication: the collectives the strategies issue per step (src/parallel/dp.c
 *     stage_done/reduce_step, zero.c z_stage_params/z_stage_done/z_grads/z_step), with
 *     the alpha-beta-gamma model of plan.c.
 * docs/sharding.md ("Planning") and docs/comm.md. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "comm/allreduce_impl.h"
#include "comm/plan_internal.h"
#include "distdpd/plan.h"

void dd_plan_shard_cfg_default(dd_plan_shard_cfg *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->task = DD_TRAIN_PA;
    cfg->opt = DD_OPTIM_ADAMW;
    cfg->batch = 64;
    cfg->frame = 200;
    cfg->eval_batch = 16;
    cfg->nperseg = 2560;
    cfg->ranks = 1;
    cfg->shard = DD_SHARD_NONE;
    cfg->algo = DD_ALLREDUCE_RING;
    cfg->bucket_mb = 4;
    (void)dd_plan_link_preset("ethernet-10g", &cfg->link);
    (void)dd_plan_link_preset("shm", &cfg->intra);
    cfg->ranks_per_node = 8;
}

static int link_valid(const dd_link *l) {
    return isfinite(l->alpha) && isfinite(l->beta) && isfinite(l->gamma) && isfinite(l->alpha1) &&
           isfinite(l->beta1) && l->alpha >= 0 && l->beta >= 0 && l->gamma >= 0 && l->alpha1 >= 0 && l->beta1 >= 0;
}

static dd_status check_cfg(const dd_plan_shard_cfg *c) {
    if (!c) return dd_error(DD_ERR_ARG, "shard plan: NULL configuration");
    if (!c->model) return dd_error(DD_ERR_ARG, "shard plan: no model");
    if ((int)c->task < DD_TRAIN_PA || (int)c->task > DD_TRAIN_ILA)
        return dd_error(DD_ERR_ARG, "shard plan: task = %d is not pa, dla or ila", (int)c->task);
    if (c->task != DD_TRAIN_PA && !c->pa)
        return dd_error(DD_ERR_ARG, "shard plan: task %s needs the frozen PA model (pa)", dd_train_task_name(c->task));
    if (c->task == DD_TRAIN_PA && c->pa)
        return dd_error(DD_ERR_ARG, "shard plan: task pa takes no frozen PA model (pa must be NULL)");
    if ((int)c->opt < 0 || (int)c->opt > DD_OPTIM_ADAMW)
        return dd_error(DD_ERR_ARG, "shard plan: opt = %d is not sgd, adam or adamw", (int)c->opt);
    if (!(c->momentum >= 0 && c->momentum < 1))
        return dd_error(DD_ERR_ARG, "shard plan: momentum = %g must be in [0, 1)", c->momentum);
    if (c->momentum != 0 && c->opt != DD_OPTIM_SGD)
        return dd_error(DD_ERR_ARG, "shard plan: momentum applies to sgd only");
    const size_t M20 = (size_t)1 << 20;
    if (c->batch < 1 || c->batch > M20)
        return dd_error(DD_ERR_ARG, "shard plan: batch = %zu must be in [1, %zu]", c->batch, M20);
    if (c->frame < 1 || c->frame > M20)
        return dd_error(DD_ERR_ARG, "shard plan: frame = %zu must be in [1, %zu]", c->frame, M20);
    if (c->frame * c->batch > ((size_t)1 << 28))
        return dd_error(DD_ERR_ARG, "shard plan: frame * batch = %zu exceeds 2^28 samples per step", c->frame * c->batch);
    if (c->frames > ((size_t)1 << 40))
        return dd_error(DD_ERR_ARG, "shard plan: frames = %zu must be at most 2^40", c->frames);
    if (c->eval_batch < 1 || c->eval_batch > 4096)
        return dd_error(DD_ERR_ARG, "shard plan: eval_batch = %zu must be in [1, 4096]", c->eval_batch);
    if (c->nperseg < 1 || c->nperseg > M20)
        return dd_error(DD_ERR_ARG, "shard plan: nperseg = %zu must be in [1, %zu]", c->nperseg, M20);
    if (c->ranks < 1 || c->ranks > (1 << 24))
        return dd_error(DD_ERR_ARG, "shard plan: ranks = %d must be in [1, 16777216]", c->ranks);
    if ((int)c->shard < DD_SHARD_NONE || (int)c->shard > DD_SHARD_ZERO3)
        return dd_error(DD_ERR_ARG, "shard plan: shard = %d is not none, zero1, zero2 or zero3", (int)c->shard);
    if ((int)c->algo < 0 || (int)c->algo >= dd_allreduce_count())
        return dd_error(DD_ERR_ARG, "shard plan: algo = %d is not an allreduce algorithm", (int)c->algo);
    if (!(c->bucket_mb >= 0 && c->bucket_mb <= 4096))
        return dd_error(DD_ERR_ARG, "shard plan: bucket_mb = %g must be in [0, 4096]", c->bucket_mb);
    if (!link_valid(&c->link)) return dd_error(DD_ERR_ARG, "shard plan: link alpha/beta/gamma must be finite and >= 0");
    if (!link_valid(&c->intra))
        return dd_error(DD_ERR_ARG, "shard plan: intra-node link alpha/beta/gamma must be finite and >= 0");
    if (c->ranks_per_node < 1)
        return dd_error(DD_ERR_ARG, "shard plan: ranks_per_node = %d must be >= 1", c->ranks_per_node);
    return DD_OK;
}

/* Rank r's slice of an arena of n floats over p ranks, as dd_shard_partition (without its
 * p + 1 bounds, so any rank count works). */
static size_t slice_len(size_t n, int p, int r) {
    size_t per = (n + (size_t)p - 1) / (size_t)p;
    per = (per + 15) / 16 * 16;
    size_t lo = (size_t)r * per, hi = lo + per;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    return hi - lo;
}

static size_t largest_stage(const dd_model *m) {
    size_t mx = 0;
    for (size_t s = 0; s < dd_model_num_stages(m); s++) {
        dd_stage_info si;
        if (dd_model_stage_info(m, s, &si) == DD_OK && si.hi - si.lo > mx) mx = si.hi - si.lo;
    }
    return mx;
}

static size_t state_arrays(const dd_plan_shard_cfg *c) {
    if (c->opt == DD_OPTIM_SGD) return c->momentum != 0 ? 1 : 0;
    return 2;
}

/* Frames in the largest per-rank slice of a global batch (dd_trainer_create's bmax). */
static size_t batch_per_rank(const dd_plan_shard_cfg *c) {
    size_t bg = c->frames && c->frames < c->batch ? c->frames : c->batch;
    return (bg + (size_t)c->ranks - 1) / (size_t)c->ranks;
}

static size_t eval_segments(const dd_plan_shard_cfg *c) {
    return c->eval_segments && c->eval_segments < c->eval_batch ? c->eval_segments : c->eval_batch;
}

size_t dd_plan_eval_floats(const dd_model *m, const dd_model *pa, size_t eval_batch, size_t eval_segments,
                           size_t nperseg) {
    size_t eb = eval_segments && eval_segments < eval_batch ? eval_segments : eval_batch;
    dd_eval_fit f; /* as the trainer */
    dd_train_eval_fit(m, pa, eb, nperseg, DD_TRAIN_EVAL_WS_CAP, DD_TRAIN_EVAL_CHUNK, &f);
    return f.ws_m + f.ws_p + f.out1;
}

/* Floats, per kind, of rank r (cfg checked). */
static void memory_floats(const dd_plan_shard_cfg *c, int r, size_t fl[DD_MEM_KINDS]) {
    const dd_model *m = c->model;
    const size_t n = dd_model_params(m)->total;
    const size_t sl = slice_len(n, c->ranks, r), one = sl ? sl : 1;
    size_t st = largest_stage(m);
    if (st == 0) st = 1;
    /* dd_trainer_create: the parameter and gradient arenas, whole or this rank's slice */
    fl[DD_MEM_PARAMS] = c->shard == DD_SHARD_ZERO3 ? one + 2 * st : n;
    fl[DD_MEM_GRADS] = c->shard >= DD_SHARD_ZERO2 ? one + 2 * st : n;
    /* batch chunks (whole storage: none, zero1; data parallelism's bucket callbacks: models
     * of at most DD_TRAIN_CHUNK_OVERLAP_FLOATS): nc - 1 gradient copies, nc workspaces */
    const size_t b = batch_per_rank(c);
    size_t nc = 1, cf = 1;
    if (c->shard <= DD_SHARD_ZERO1 && n <= DD_TRAIN_CHUNK_OVERLAP_FLOATS)
        dd_train_chunks_max(n, b, dd_train_chunk_width(m, c->task == DD_TRAIN_DLA ? c->pa : NULL), &nc, &cf);
    if (nc > 1) fl[DD_MEM_GRADS] += (nc - 1) * n;
    /* dd_optim_create over the slice (zero1..3) or the whole arena */
    fl[DD_MEM_OPTIM] = state_arrays(c) * (c->shard == DD_SHARD_NONE ? n : one);
    /* batch buffers: input, target, output, output gradient (+ the PA's output and input
     * gradient for direct learning), the model workspace (+ the PA model's), 16 floats of
     * slack each */
    size_t act = 0;
    if (b > 0) {
        const size_t f = b * c->frame * 2, wb = nc > 1 ? cf : b, k = nc > 1 ? nc : 1;
        act += 4 * f + k * (dd_model_workspace_size(m, (int)wb, (int)c->frame) + 16);
        if (c->task == DD_TRAIN_DLA) act += 2 * f + k * (dd_model_workspace_size(c->pa, (int)wb, (int)c->frame) + 16);
    }
    /* evaluation buffers where evaluation forwards run */
    if (r == 0 || c->shard == DD_SHARD_ZERO3) act += dd_plan_eval_floats(m, c->pa, c->eval_batch, c->eval_segments, c->nperseg);
    fl[DD_MEM_ACTIVATIONS] = act;
}

dd_status dd_plan_shard_memory(const dd_plan_shard_cfg *cfg, int rank, size_t bytes[DD_MEM_KINDS]) {
    DD_TRY(check_cfg(cfg));
    if (!bytes) return dd_error(DD_ERR_ARG, "dd_plan_shard_memory: NULL output");
    if (rank < 0 || rank >= cfg->ranks)
        return dd_error(DD_ERR_ARG, "shard plan: rank = %d must be in [0, %d)", rank, cfg->ranks);
    size_t fl[DD_MEM_KINDS];
    memory_floats(cfg, rank, fl);
    for (int k = 0; k < DD_MEM_KINDS; k++) bytes[k] = fl[k] * sizeof(float);
    return DD_OK;
}

/* ---- communication --------------------------------------------------------------- */

/* Time and latency steps of the collectives (P > 1, bytes > 0). */
typedef struct {
    double t, msgs, sent;
    int calls;
} tally;

static const dd_link k_unit = {1, 0, 0, 1, 0}; /* counts alpha terms */

static void add_allreduce(const dd_plan_shard_cfg *c, double bytes, tally *x) {
    const int p = c->ranks;
    x->calls++;
    if (bytes <= 0) return;
    /* the algorithm's model, or the one that stands in for it here (mpi: the fastest of
     * ring, tree, rhd), whose messages are counted */
    dd_allreduce_algo a = c->algo;
    const dd_allreduce_def *d = dd_allreduce_def_of(a);
    if (d && d->model_as) a = d->model_as(&c->link, &c->intra, c->ranks_per_node, p, bytes);
    x->t += dd_plan_allreduce_time(a, &c->link, &c->intra, c->ranks_per_node, p, bytes);
    x->msgs += dd_plan_allreduce_time(a, &k_unit, &k_unit, c->ranks_per_node, p, 1.0);
    /* every algorithm here sends 2 (P - 1) copies of the buffer in all (ring: (P - 1) / P
     * of it per rank in each half; tree, rhd, hier: each non-root once up, once down) */
    x->sent += 2.0 * (p - 1) / p * bytes;
}

static int ceil_log2(int p) {
    int l = 0;
    while ((1LL << l) < (long long)p) l++;
    return l;
}

/* MPI_Allgatherv (sum = 0) or MPI_Reduce_scatter (sum = 1) of `bytes` in all: ceil(log2 P)
 * exchange steps (Bruck / recursive doubling or halving, the MPI library's choice for
 * latency) and the bandwidth lower bound (P - 1) / P of the bytes through each rank. */
static void add_scatter_gather(const dd_plan_shard_cfg *c, double bytes, int sum, tally *x) {
    const int p = c->ranks;
    x->calls++;
    if (bytes <= 0) return;
    const double f = (double)(p - 1) / p;
    const int L = ceil_log2(p);
    x->t += L * c->link.alpha + f * bytes * (c->link.beta + (sum ? c->link.gamma : 0.0));
    x->msgs += L;
    x->sent += f * bytes;
}

static void stage_bytes(const dd_model *m, size_t s, double *b) {
    dd_stage_info si;
    *b = dd_model_stage_info(m, s, &si) == DD_OK ? 4.0 * (double)(si.hi - si.lo) : 0.0;
}

static void comm_step(const dd_plan_shard_cfg *c, dd_plan_shard_result *r) {
    if (c->ranks < 2) return; /* one rank: the strategies communicate nothing */
    const dd_model *m = c->model;
    const dd_param_table *tb = dd_model_params(m);
    const size_t n = tb->total, S = dd_model_num_stages(m);
    tally g = {0, 0, 0, 0}, a = {0, 0, 0, 0}, s = {0, 0, 0, 0};
    if (c->shard <= DD_SHARD_ZERO1) {
        /* dp.c: buckets of parameter-table entries, last first, closed when they hold at
         * least bucket_mb or reach float 0; bucket_mb 0: one allreduce of the arena */
        if (c->bucket_mb > 0) {
            double bf = c->bucket_mb * 1048576.0 / sizeof(float);
            const size_t bfl = bf < 1.0 ? 1 : (size_t)bf;
            size_t open = SIZE_MAX;
            for (size_t st = S; st-- > 0;) {
                dd_stage_info si;
                if (dd_model_stage_info(m, st, &si) != DD_OK) continue;
                size_t top = si.hi;
                for (size_t e = si.e1; e-- > si.e0;) {
                    size_t bot = e == 0 ? 0 : tb->entries[e].offset;
                    if (bot > top) bot = top;
                    if (open == SIZE_MAX) open = top;
                    if (open - bot >= bfl || bot == 0) {
                        if (open > bot) {
                            add_allreduce(c, 4.0 * (double)(open - bot), &g);
                            r->buckets++;
                        }
                        open = SIZE_MAX;
                    }
                    top = bot;
                }
            }
        } else {
            add_allreduce(c, 4.0 * (double)n, &g);
            r->buckets = 1;
        }
        add_allreduce(c, 3 * sizeof(double), &s); /* loss, stop flag, exposed time */
        if (c->shard == DD_SHARD_ZERO1) add_scatter_gather(c, 4.0 * (double)n, 0, &a);
    } else {
        /* zero.c: each stage's gradients reduce-scattered after its backward */
        for (size_t st = 0; st < S; st++) {
            double b;
            stage_bytes(m, st, &b);
            add_scatter_gather(c, b, 1, &g);
        }
        add_allreduce(c, 3 * sizeof(double), &s); /* loss, |g|^2, stop flags */
        if (c->shard == DD_SHARD_ZERO2) {
            add_scatter_gather(c, 4.0 * (double)n, 0, &a); /* the updated slices */
        } else {
            /* zero3: every stage gathered before its forward; backward finds the last two
             * still in the two buffers and gathers stages S-3 .. 0 again */
            for (size_t st = 0; st < S; st++) {
                double b;
                stage_bytes(m, st, &b);
                add_scatter_gather(c, b, 0, &a);
            }
            for (size_t st = 0; st + 2 < S; st++) {
                double b;
                stage_bytes(m, st, &b);
                add_scatter_gather(c, b, 0, &a);
            }
        }
    }
    r->collectives = g.calls + a.calls + s.calls;
    r->grad_bytes = g.sent;
    r->gather_bytes = a.sent;
    r->small_bytes = s.sent;
    r->bytes_sent = g.sent + a.sent + s.sent;
    r->messages = g.msgs + a.msgs + s.msgs;
    r->time_s = g.t + a.t + s.t;
}

dd_status dd_plan_shard_run(const dd_plan_shard_cfg *cfg, dd_plan_shard_result *out) {
    DD_TRY(check_cfg(cfg));
    if (!out) return dd_error(DD_ERR_ARG, "dd_plan_shard_run: NULL output");
    memset(out, 0, sizeof *out);
    const dd_model *m = cfg->model;
    out->shard = cfg->shard;
    out->ranks = cfg->ranks;
    out->floats = dd_model_params(m)->total;
    out->params = dd_model_num_params(m);
    out->stages = dd_model_num_stages(m);
    out->stage_max = largest_stage(m);
    out->slice = cfg->shard == DD_SHARD_NONE ? out->floats : slice_len(out->floats, cfg->ranks, 0);
    out->batch_per_rank = batch_per_rank(cfg);
    out->eval_batch = eval_segments(cfg);
    size_t fl[DD_MEM_KINDS];
    memory_floats(cfg, 0, fl);
    for (int k = 0; k < DD_MEM_KINDS; k++) {
        out->mem[k] = fl[k] * sizeof(float);
        out->mem_total += out->mem[k];
    }
    /* src/train/rundir.c: report.html of a zero3 run needs the whole parameters on rank 0
     * (dd_trainer_unshard_params) */
    if (cfg->shard == DD_SHARD_ZERO3) out->report_bytes = out->floats * sizeof(float);
    comm_step(cfg, out);
    return DD_OK;
}

/* ---- JSON ------------------------------------------------------------------------ */

dd_status dd_plan_shard_json(const dd_plan_shard_cfg *cfg, const dd_plan_shard_result *rows, size_t nrows,
                             const char *link_name, char **json) {
    if (!cfg || !json || (!rows && nrows)) return dd_error(DD_ERR_ARG, "dd_plan_shard_json: NULL argument");
    *json = NULL;
    DD_TRY(check_cfg(cfg));
    cJSON *root = cJSON_CreateObject(), *in = NULL, *arr = NULL;
    if (!root) goto nomem;
    in = cJSON_AddObjectToObject(root, "inputs");
    if (!in) goto nomem;
    {
        char desc[256];
        dd_model_describe(cfg->model, desc, sizeof desc);
        cJSON_AddStringToObject(in, "model", dd_model_name(cfg->model));
        cJSON_AddStringToObject(in, "describe", desc);
        const dd_model_cfg *mc = dd_model_config(cfg->model);
        cJSON *o = cJSON_AddObjectToObject(in, "model_cfg");
        if (!o) goto nomem;
        for (int i = 0; i < mc->n; i++) cJSON_AddNumberToObject(o, mc->v[i].name, mc->v[i].value);
        cJSON_AddNumberToObject(in, "params", (double)dd_model_num_params(cfg->model));
        cJSON_AddNumberToObject(in, "floats", (double)dd_model_params(cfg->model)->total);
        cJSON_AddNumberToObject(in, "stages", (double)dd_model_num_stages(cfg->model));
        cJSON_AddNumberToObject(in, "stage_max_floats", (double)largest_stage(cfg->model));
        cJSON_AddStringToObject(in, "task", dd_train_task_name(cfg->task));
        if (cfg->pa) {
            dd_model_describe(cfg->pa, desc, sizeof desc);
            cJSON_AddStringToObject(in, "pa_model", desc);
        }
        cJSON_AddStringToObject(in, "opt", dd_optim_kind_name(cfg->opt));
        cJSON_AddNumberToObject(in, "momentum", cfg->momentum);
        cJSON_AddNumberToObject(in, "optim_state_arrays", (double)state_arrays(cfg));
        cJSON_AddNumberToObject(in, "batch", (double)cfg->batch);
        cJSON_AddNumberToObject(in, "frame", (double)cfg->frame);
        cJSON_AddNumberToObject(in, "frames", (double)cfg->frames);
        cJSON_AddNumberToObject(in, "eval_batch", (double)cfg->eval_batch);
        cJSON_AddNumberToObject(in, "nperseg", (double)cfg->nperseg);
        cJSON_AddNumberToObject(in, "eval_segments", (double)cfg->eval_segments);
        cJSON_AddStringToObject(in, "allreduce", dd_allreduce_name(cfg->algo));
        cJSON_AddNumberToObject(in, "bucket_mb", cfg->bucket_mb);
        if (link_name) cJSON_AddStringToObject(in, "link", link_name);
        cJSON_AddNumberToObject(in, "alpha_s", cfg->link.alpha);
        cJSON_AddNumberToObject(in, "beta_s_per_byte", cfg->link.beta);
        cJSON_AddNumberToObject(in, "gamma_s_per_byte", cfg->link.gamma);
    }
    arr = cJSON_AddArrayToObject(root, "rows");
    if (!arr) goto nomem;
    for (size_t i = 0; i < nrows; i++) {
        const dd_plan_shard_result *r = &rows[i];
        /* the reference: mode none at the row's rank count */
        dd_plan_shard_cfg nc = *cfg;
        nc.ranks = r->ranks;
        nc.shard = DD_SHARD_NONE;
        dd_plan_shard_result nr;
        const dd_plan_shard_result *none = dd_plan_shard_run(&nc, &nr) == DD_OK ? &nr : NULL;
        cJSON *o = cJSON_CreateObject();
        if (!o) goto nomem;
        cJSON_AddItemToArray(arr, o);
        cJSON_AddNumberToObject(o, "ranks", r->ranks);
        cJSON_AddStringToObject(o, "shard", dd_shard_name(r->shard));
        cJSON_AddNumberToObject(o, "slice_floats", (double)r->slice);
        cJSON_AddNumberToObject(o, "batch_per_rank", (double)r->batch_per_rank);
        cJSON_AddNumberToObject(o, "eval_batch", (double)r->eval_batch);
        cJSON *mem = cJSON_AddObjectToObject(o, "memory_bytes");
        if (!mem) goto nomem;
        for (int k = 0; k < DD_MEM_KINDS; k++)
            cJSON_AddNumberToObject(mem, dd_mem_kind_name((dd_mem_kind)k), (double)r->mem[k]);
        cJSON_AddNumberToObject(mem, "total", (double)r->mem_total);
        cJSON_AddNumberToObject(mem, "report_params", (double)r->report_bytes);
        if (none && none->mem_total > 0)
            cJSON_AddNumberToObject(o, "memory_ratio_to_none", (double)r->mem_total / (double)none->mem_total);
        cJSON *cm = cJSON_AddObjectToObject(o, "comm_per_step");
        if (!cm) goto nomem;
        cJSON_AddNumberToObject(cm, "bytes_sent", r->bytes_sent);
        cJSON_AddNumberToObject(cm, "grad_bytes", r->grad_bytes);
        cJSON_AddNumberToObject(cm, "gather_bytes", r->gather_bytes);
        cJSON_AddNumberToObject(cm, "small_bytes", r->small_bytes);
        cJSON_AddNumberToObject(cm, "collectives", r->collectives);
        cJSON_AddNumberToObject(cm, "buckets", (double)r->buckets);
        cJSON_AddNumberToObject(cm, "messages", r->messages);
        cJSON_AddNumberToObject(cm, "time_s", r->time_s);
        if (none && none->bytes_sent > 0)
            cJSON_AddNumberToObject(cm, "bytes_ratio_to_none", r->bytes_sent / none->bytes_sent);
    }
    *json = cJSON_Print(root);
    cJSON_Delete(root);
    if (!*json) return dd_error(DD_ERR_NOMEM, "dd_plan_shard_json: out of memory");
    return DD_OK;
nomem:
    cJSON_Delete(root);
    return dd_error(DD_ERR_NOMEM, "dd_plan_shard_json: out of memory");
}
