/* Planning model parallelism (plan.h, "model parallelism"): for a model, a global batch and
 * a cluster (nodes, ranks per node, links, memory and compute speed per rank), every
 * (tp, pp, dp, shard) layout of the cluster's ranks, its memory per rank and its step
 * time, ranked.
 *   - memory: what the code allocates. Model-parallel layouts follow
 *     src/parallel/pipeline.c exactly (the stage split balanced by the shard's FLOPs, each
 *     rank's parameters, gradients and optimiser state of its stages, nlive micro-batch
 *     workspaces per chunk, receive slots, one send buffer per micro-batch, the step's
 *     inputs and targets, the trainer's evaluation buffers); plain and sharded data
 *     parallelism come from dd_plan_shard_* (plan_shard.c).
 *   - time: forward / backward FLOPs of each pipeline group's stages (the shard's under
 *     tensor parallelism) x samples per micro-batch / speed, plus the tensor-parallel
 *     collectives of those stages (counted by running the shard with counting callbacks,
 *     costed on the tensor-parallel link); the schedule's instruction lists run by an
 *     event simulation with these per-group costs and a delay per pipeline message
 *     (alpha + bytes beta, one way, on the link between the two ranks); then the
 *     replicas' gradient allreduce and the loss reduction, after the schedule.
 * docs/comm.md ("Model-parallel plan", "Cluster file"). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "comm/plan_internal.h"
#include "distdpd/plan.h"

/* ---- cluster file ------------------------------------------------------------------ */

static const char *const k_cluster_fields[] = {"format", "nodes",      "ranks_per_node", "intra_link",
                                               "inter_link", "memory_mib", "gflops",         "comment", NULL};
static const char *const k_link_fields[] = {"latency_us",         "bandwidth_gbps",    "oneway_latency_us",
                                            "oneway_bandwidth_gbps", "gamma_ns_per_byte", "calibration", NULL};

static int in_list(const char *const *list, const char *s) {
    for (; *list; list++)
        if (strcmp(*list, s) == 0) return 1;
    return 0;
}

static void join_list(const char *const *list, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; list[i] && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", list[i]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

/* A number field of obj (named `name` in messages): required or not (*present). */
static dd_status num_field(const cJSON *obj, const char *path, const char *key, const char *name, int required,
                           int *present, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (present) *present = v != NULL;
    if (!v) return required ? dd_error(DD_ERR_FORMAT, "%s: missing field '%s'", path, name) : DD_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be a number", path, name);
    *out = v->valuedouble;
    return DD_OK;
}

static dd_status int_field(const cJSON *obj, const char *path, const char *key, long lo, long hi, int *out) {
    double v = 0;
    DD_TRY(num_field(obj, path, key, key, 1, NULL, &v));
    if (v != floor(v) || v < (double)lo || v > (double)hi)
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be an integer in [%ld, %ld], got %g", path, key, lo, hi, v);
    *out = (int)v;
    return DD_OK;
}

/* A path relative to the cluster file's directory (absolute paths unchanged). */
static void relative_to(const char *file, const char *rel, char *buf, size_t cap) {
    const char *slash = strrchr(file, '/');
    if (rel[0] == '/' || !slash)
        snprintf(buf, cap, "%s", rel);
    else
        snprintf(buf, cap, "%.*s/%s", (int)(slash - file), file, rel);
}

static dd_status link_field(const cJSON *root, const char *path, const char *key, dd_link *out, char *name,
                            size_t ncap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return dd_error(DD_ERR_FORMAT, "%s: missing field '%s'", path, key);
    if (cJSON_IsString(v)) {
        if (dd_plan_link_preset(v->valuestring, out) != DD_OK)
            return dd_error(DD_ERR_FORMAT,
                            "%s: field '%s': unknown link '%s' (expected a preset: ethernet-10g, ethernet-100g, "
                            "infiniband-hdr, nvlink, shm; or an object {\"latency_us\", \"bandwidth_gbps\"} or "
                            "{\"calibration\": FILE})",
                            path, key, v->valuestring);
        snprintf(name, ncap, "%s", v->valuestring);
        return DD_OK;
    }
    if (!cJSON_IsObject(v))
        return dd_error(DD_ERR_FORMAT,
                        "%s: field '%s' must be a preset name or an object {\"latency_us\", \"bandwidth_gbps\"} or "
                        "{\"calibration\": FILE}",
                        path, key);
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!in_list(k_link_fields, it->string)) {
            char list[256];
            join_list(k_link_fields, list, sizeof list);
            return dd_error(DD_ERR_FORMAT, "%s: field '%s': unknown key '%s' (keys: %s)", path, key, it->string, list);
        }
    }
    const cJSON *cal = cJSON_GetObjectItemCaseSensitive(v, "calibration");
    char fname[160];
    if (cal) {
        if (cJSON_GetArraySize(v) != 1)
            return dd_error(DD_ERR_FORMAT,
                            "%s: field '%s': give either \"calibration\" or \"latency_us\" and \"bandwidth_gbps\", not "
                            "both",
                            path, key);
        if (!cJSON_IsString(cal) || !cal->valuestring[0])
            return dd_error(DD_ERR_FORMAT, "%s: field '%s.calibration' must be a file name", path, key);
        char file[4096];
        relative_to(path, cal->valuestring, file, sizeof file);
        dd_plan_calib c;
        dd_status s = dd_plan_calib_load(file, &c);
        if (s != DD_OK) return dd_error_prefix(s, "%s: field '%s.calibration': ", path, key);
        *out = c.link;
        snprintf(name, ncap, "measured (%.80s)", cal->valuestring);
        return DD_OK;
    }
    double lat = 0, bw = 0, lat1 = 0, bw1 = 0, gamma = 0.2;
    int has1 = 0, hasb1 = 0;
    snprintf(fname, sizeof fname, "%s.latency_us", key);
    DD_TRY(num_field(v, path, "latency_us", fname, 1, NULL, &lat));
    if (lat < 0 || lat > 1e6)
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be in [0, 1e6] microseconds, got %g", path, fname, lat);
    snprintf(fname, sizeof fname, "%s.bandwidth_gbps", key);
    DD_TRY(num_field(v, path, "bandwidth_gbps", fname, 1, NULL, &bw));
    if (!(bw > 0) || bw > 1e6)
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be in (0, 1e6] GB/s, got %g", path, fname, bw);
    snprintf(fname, sizeof fname, "%s.oneway_latency_us", key);
    DD_TRY(num_field(v, path, "oneway_latency_us", fname, 0, &has1, &lat1));
    if (has1 && (lat1 < 0 || lat1 > 1e6))
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be in [0, 1e6] microseconds, got %g", path, fname, lat1);
    snprintf(fname, sizeof fname, "%s.oneway_bandwidth_gbps", key);
    DD_TRY(num_field(v, path, "oneway_bandwidth_gbps", fname, 0, &hasb1, &bw1));
    if (hasb1 && (!(bw1 > 0) || bw1 > 1e6))
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be in (0, 1e6] GB/s, got %g", path, fname, bw1);
    snprintf(fname, sizeof fname, "%s.gamma_ns_per_byte", key);
    int hasg = 0;
    DD_TRY(num_field(v, path, "gamma_ns_per_byte", fname, 0, &hasg, &gamma));
    if (gamma < 0 || gamma > 1e6)
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be in [0, 1e6], got %g", path, fname, gamma);
    out->alpha = lat * 1e-6;
    out->beta = 1.0 / (bw * 1e9);
    out->alpha1 = has1 ? lat1 * 1e-6 : out->alpha;
    out->beta1 = hasb1 ? 1.0 / (bw1 * 1e9) : out->beta;
    out->gamma = gamma * 1e-9;
    snprintf(name, ncap, "given");
    return DD_OK;
}

dd_status dd_plan_cluster_parse(const char *text, const char *path, dd_plan_cluster *out) {
    if (!text || !out) return dd_error(DD_ERR_ARG, "dd_plan_cluster_parse: NULL argument");
    if (!path) path = "cluster";
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_Parse(text);
    dd_status s = DD_OK;
    if (!root || !cJSON_IsObject(root)) {
        s = dd_error(DD_ERR_FORMAT, "%s: not a JSON object", path);
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (!in_list(k_cluster_fields, it->string)) {
            char list[256];
            join_list(k_cluster_fields, list, sizeof list);
            s = dd_error(DD_ERR_FORMAT, "%s: unknown field '%s' (fields: %s)", path, it->string, list);
            goto done;
        }
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (fmt && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "distdpd-cluster") != 0)) {
        s = dd_error(DD_ERR_FORMAT, "%s: field 'format' must be \"distdpd-cluster\"", path);
        goto done;
    }
    if ((s = int_field(root, path, "nodes", 1, 1L << 20, &out->nodes)) != DD_OK) goto done;
    if ((s = int_field(root, path, "ranks_per_node", 1, 4096, &out->ranks_per_node)) != DD_OK) goto done;
    if ((double)out->nodes * out->ranks_per_node > (double)(1 << 20)) {
        s = dd_error(DD_ERR_FORMAT, "%s: nodes x ranks_per_node = %.0f ranks: at most 1048576", path,
                     (double)out->nodes * out->ranks_per_node);
        goto done;
    }
    if ((s = link_field(root, path, "intra_link", &out->intra, out->intra_name, sizeof out->intra_name)) != DD_OK)
        goto done;
    if (out->nodes > 1 || cJSON_GetObjectItemCaseSensitive(root, "inter_link")) {
        if ((s = link_field(root, path, "inter_link", &out->inter, out->inter_name, sizeof out->inter_name)) != DD_OK)
            goto done;
    } else {
        out->inter = out->intra; /* one node: never used */
        snprintf(out->inter_name, sizeof out->inter_name, "none (one node)");
    }
    double mib = 0;
    if ((s = num_field(root, path, "memory_mib", "memory_mib", 1, NULL, &mib)) != DD_OK) goto done;
    if (!(mib > 0) || mib > 1e12) {
        s = dd_error(DD_ERR_FORMAT, "%s: field 'memory_mib' must be > 0 (MiB of arena memory per rank), got %g", path,
                     mib);
        goto done;
    }
    out->memory_bytes = mib * 1048576.0;
    int has = 0;
    double g = 0;
    if ((s = num_field(root, path, "gflops", "gflops", 0, &has, &g)) != DD_OK) goto done;
    if (has && (!(g > 0) || g > 1e9)) {
        s = dd_error(DD_ERR_FORMAT, "%s: field 'gflops' must be in (0, 1e9] GFLOP/s per rank, got %g", path, g);
        goto done;
    }
    out->gflops = has ? g : 0;
    const cJSON *cm = cJSON_GetObjectItemCaseSensitive(root, "comment");
    if (cm && !cJSON_IsString(cm)) s = dd_error(DD_ERR_FORMAT, "%s: field 'comment' must be a string", path);
done:
    cJSON_Delete(root);
    return s;
}

dd_status dd_plan_cluster_load(const char *path, dd_plan_cluster *out) {
    if (!path || !out) return dd_error(DD_ERR_ARG, "dd_plan_cluster_load: NULL argument");
    char *text = NULL;
    size_t len = 0;
    dd_status s = dd_read_text(path, &text, &len);
    if (s != DD_OK) return s;
    s = dd_plan_cluster_parse(text, path, out);
    free(text);
    return s;
}

/* ---- configuration ----------------------------------------------------------------- */

void dd_plan_mp_cfg_default(dd_plan_mp_cfg *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->task = DD_TRAIN_PA;
    cfg->opt = DD_OPTIM_ADAMW;
    cfg->batch = 64;
    cfg->frame = 200;
    cfg->eval_batch = 16;
    cfg->nperseg = 2560;
    cfg->schedule = DD_PP_1F1B;
    cfg->virt = 1;
    cfg->algo = DD_ALLREDUCE_RING;
    cfg->bucket_mb = 4;
    cfg->cluster.nodes = 1;
    cfg->cluster.ranks_per_node = 1;
    (void)dd_plan_link_preset("shm", &cfg->cluster.intra);
    (void)dd_plan_link_preset("ethernet-10g", &cfg->cluster.inter);
    snprintf(cfg->cluster.intra_name, sizeof cfg->cluster.intra_name, "shm");
    snprintf(cfg->cluster.inter_name, sizeof cfg->cluster.inter_name, "ethernet-10g");
}

static int link_ok(const dd_link *l) {
    return isfinite(l->alpha) && isfinite(l->beta) && isfinite(l->gamma) && isfinite(l->alpha1) &&
           isfinite(l->beta1) && l->alpha >= 0 && l->beta >= 0 && l->gamma >= 0 && l->alpha1 >= 0 && l->beta1 >= 0;
}

static dd_status check_cfg(const dd_plan_mp_cfg *c) {
    if (!c) return dd_error(DD_ERR_ARG, "model-parallel plan: NULL configuration");
    if (!c->model || !c->model[0]) return dd_error(DD_ERR_ARG, "model-parallel plan: no model");
    if (c->task == DD_TRAIN_ILA)
        return dd_error(DD_ERR_ARG, "model-parallel plan: task ila is not planned (pa and dla are)");
    if (c->task != DD_TRAIN_PA && c->task != DD_TRAIN_DLA)
        return dd_error(DD_ERR_ARG, "model-parallel plan: task = %d is not pa or dla", (int)c->task);
    if (c->task == DD_TRAIN_DLA && !c->pa)
        return dd_error(DD_ERR_ARG, "model-parallel plan: task dla needs the frozen PA model (pa)");
    if (c->task == DD_TRAIN_PA && c->pa)
        return dd_error(DD_ERR_ARG, "model-parallel plan: task pa takes no frozen PA model (pa must be NULL)");
    if ((int)c->opt < 0 || (int)c->opt > DD_OPTIM_ADAMW)
        return dd_error(DD_ERR_ARG, "model-parallel plan: opt = %d is not sgd, adam or adamw", (int)c->opt);
    if (!(c->momentum >= 0 && c->momentum < 1) || (c->momentum != 0 && c->opt != DD_OPTIM_SGD))
        return dd_error(DD_ERR_ARG, "model-parallel plan: momentum = %g (sgd only, in [0, 1))", c->momentum);
    const size_t M20 = (size_t)1 << 20;
    if (c->batch < 1 || c->batch > M20 || c->frame < 1 || c->frame > M20 || c->frame * c->batch > ((size_t)1 << 28))
        return dd_error(DD_ERR_ARG, "model-parallel plan: batch = %zu, frame = %zu (each in [1, 2^20], product <= 2^28)",
                        c->batch, c->frame);
    if (c->eval_batch < 1 || c->eval_batch > 4096 || c->nperseg < 1 || c->nperseg > M20)
        return dd_error(DD_ERR_ARG, "model-parallel plan: eval_batch = %zu (in [1, 4096]), nperseg = %zu (in [1, 2^20])",
                        c->eval_batch, c->nperseg);
    if (c->micro < -1 || c->micro > DD_PP_MAX_MICRO)
        return dd_error(DD_ERR_ARG, "model-parallel plan: micro = %d must be -1 (auto), 0 (pp) or in [1, %d]", c->micro,
                        DD_PP_MAX_MICRO);
    if ((int)c->schedule < DD_PP_GPIPE || (int)c->schedule > DD_PP_INTERLEAVED)
        return dd_error(DD_ERR_ARG, "model-parallel plan: schedule = %d is not gpipe, 1f1b or interleaved",
                        (int)c->schedule);
    if (c->virt < 1 || c->virt > DD_PP_MAX_VSTAGES)
        return dd_error(DD_ERR_ARG, "model-parallel plan: virt = %d must be in [1, %d]", c->virt, DD_PP_MAX_VSTAGES);
    if ((int)c->algo < 0 || (int)c->algo >= dd_allreduce_count())
        return dd_error(DD_ERR_ARG, "model-parallel plan: algo = %d is not an allreduce algorithm", (int)c->algo);
    if (!(c->bucket_mb >= 0 && c->bucket_mb <= 4096))
        return dd_error(DD_ERR_ARG, "model-parallel plan: bucket_mb = %g must be in [0, 4096]", c->bucket_mb);
    const dd_plan_cluster *k = &c->cluster;
    if (k->nodes < 1 || k->ranks_per_node < 1 || (double)k->nodes * k->ranks_per_node > (double)(1 << 20))
        return dd_error(DD_ERR_ARG, "model-parallel plan: cluster of %d nodes x %d ranks (each >= 1, at most 2^20 ranks)",
                        k->nodes, k->ranks_per_node);
    if (!link_ok(&k->intra) || !link_ok(&k->inter))
        return dd_error(DD_ERR_ARG, "model-parallel plan: cluster link alpha/beta/gamma must be finite and >= 0");
    if (!(k->memory_bytes >= 0) || !(k->gflops >= 0) || !isfinite(k->memory_bytes) || !isfinite(k->gflops))
        return dd_error(DD_ERR_ARG, "model-parallel plan: cluster memory and gflops must be finite and >= 0");
    return DD_OK;
}

static size_t state_arrays(const dd_plan_mp_cfg *c) {
    if (c->opt == DD_OPTIM_SGD) return c->momentum != 0 ? 1 : 0;
    return 2;
}

static size_t global_batch(const dd_plan_mp_cfg *c) { return c->frames && c->frames < c->batch ? c->frames : c->batch; }

/* ---- counting the tensor-parallel collectives ---------------------------------------- */

typedef struct {
    int T;
    dd_plan_tp_calls *cur; /* where the calls of the running pass go (NULL: nowhere) */
} counter;

static dd_status cnt_allreduce(void *u, float *buf, size_t n) {
    counter *k = u;
    (void)buf;
    if (k->cur) {
        k->cur->allreduce_calls += 1;
        k->cur->allreduce_floats += (double)n;
    }
    return DD_OK;
}

static dd_status cnt_allgather(void *u, const float *send, float *recv, size_t n) {
    counter *k = u;
    for (int r = 0; r < k->T; r++) memmove(recv + (size_t)r * n, send, n * sizeof(float));
    if (k->cur) {
        k->cur->allgather_calls += 1;
        k->cur->allgather_floats += (double)n;
    }
    return DD_OK;
}

static dd_status cnt_reduce_scatter(void *u, const float *send, float *recv, size_t n) {
    counter *k = u;
    memmove(recv, send, n * sizeof(float)); /* rank 0's block */
    if (k->cur) {
        k->cur->reduce_scatter_calls += 1;
        k->cur->reduce_scatter_floats += (double)n;
    }
    return DD_OK;
}

/* A shard (T > 1) or the whole model (T = 1) whose collectives count into *k (which must
 * outlive it). */
static dd_status make_counted(const char *name, const dd_model_cfg *cfg, int T, counter *k, dd_model **out) {
    dd_model_tp tp;
    memset(&tp, 0, sizeof tp);
    k->T = T;
    k->cur = NULL;
    tp.size = T;
    tp.rank = 0;
    tp.user = k;
    tp.allreduce = cnt_allreduce;
    tp.allgather = cnt_allgather;
    tp.reduce_scatter = cnt_reduce_scatter;
    return dd_model_create_tp(name, cfg, &tp, out);
}

typedef struct {
    float *buf; /* a zero stage of parameters, and its gradients */
    float *gbuf;
} zero_src;

static dd_status zs_params(void *u, size_t s, int bwd, const float **p) {
    (void)s, (void)bwd;
    *p = ((zero_src *)u)->buf;
    return DD_OK;
}

static dd_status zs_grads(void *u, size_t s, float **g) {
    (void)s;
    *g = ((zero_src *)u)->gbuf;
    return DD_OK;
}

/* Runs every stage of m once forward and once backward over B frames of T samples,
 * counting each pass's collectives into fwd[s], bwd[s]. */
static dd_status count_run(const dd_model *m, counter *k, int B, int T, dd_plan_tp_calls *fwd, dd_plan_tp_calls *bwd) {
    const size_t S = dd_model_num_stages(m);
    size_t wmax = 2, smax = 1, wsmax = 1;
    for (size_t s = 0; s < S; s++) {
        dd_stage_info si;
        DD_TRY(dd_model_stage_info(m, s, &si));
        if ((size_t)si.in_width > wmax) wmax = (size_t)si.in_width;
        if ((size_t)si.out_width > wmax) wmax = (size_t)si.out_width;
        if (si.hi - si.lo > smax) smax = si.hi - si.lo;
        const size_t w = dd_model_range_workspace(m, s, s + 1, B, T);
        if (w > wsmax) wsmax = w;
    }
    const size_t act = (size_t)B * (size_t)T * wmax;
    float *in = dd_calloc(act, sizeof(float)), *out = dd_calloc(act, sizeof(float));
    float *dout = dd_calloc(act, sizeof(float)), *din = dd_calloc(act, sizeof(float));
    float *x0 = dd_calloc((size_t)B * (size_t)T * 2, sizeof(float)), *ws = dd_calloc(wsmax, sizeof(float));
    zero_src z = {dd_calloc(smax, sizeof(float)), dd_calloc(smax, sizeof(float))};
    dd_status st = DD_OK;
    if (!in || !out || !dout || !din || !x0 || !ws || !z.buf || !z.gbuf) {
        st = dd_error(DD_ERR_NOMEM, "model-parallel plan: out of memory counting the collectives");
        goto done;
    }
    for (size_t i = 0; i < act; i++) {
        in[i] = 0.01f * (float)(i % 7);
        dout[i] = 0.01f * (float)(i % 5);
    }
    for (size_t i = 0; i < (size_t)B * (size_t)T * 2; i++) x0[i] = 0.01f * (float)(i % 3);
    for (size_t s = 0; st == DD_OK && s < S; s++) {
        dd_stage_src src = {NULL, NULL, &z, zs_params, zs_grads, NULL};
        memset(&fwd[s], 0, sizeof fwd[s]);
        memset(&bwd[s], 0, sizeof bwd[s]);
        k->cur = &fwd[s];
        st = dd_model_range_forward(m, s, s + 1, &src, in, x0, out, B, T, ws);
        k->cur = &bwd[s];
        /* training never asks the first stage for its input gradient */
        if (st == DD_OK)
            st = dd_model_range_backward(m, s, s + 1, &src, in, x0, dout, s > 0 ? din : NULL, NULL, B, T, ws);
        k->cur = NULL;
    }
    if (st != DD_OK) st = dd_error_prefix(st, "model-parallel plan: counting the collectives: ");
done:
    dd_free(in);
    dd_free(out);
    dd_free(dout);
    dd_free(din);
    dd_free(x0);
    dd_free(ws);
    dd_free(z.buf);
    dd_free(z.gbuf);
    return st;
}

#define NFIELD 6
static double *calls_field(dd_plan_tp_calls *c, int f) {
    double *v[NFIELD] = {&c->allreduce_calls,      &c->allreduce_floats,     &c->allgather_calls,
                         &c->allgather_floats,     &c->reduce_scatter_calls, &c->reduce_scatter_floats};
    return v[f];
}

/* Counts for B frames of T samples from the shard m (counting into *k): B = 1 at lengths
 * 2, 3, 4 extrapolated to T (affine), floats scaled by B (checked at B = 2). */
static dd_status count_scaled(const dd_model *m, counter *k, int B, int T, dd_plan_tp_calls *fwd,
                              dd_plan_tp_calls *bwd) {
    const size_t S = dd_model_num_stages(m);
    if (dd_model_tp_size(m) == 1) { /* a whole model: no collectives */
        memset(fwd, 0, S * sizeof *fwd);
        memset(bwd, 0, S * sizeof *bwd);
        return DD_OK;
    }
    dd_plan_tp_calls *r = calloc(8 * S, sizeof *r);
    if (!r) return dd_error(DD_ERR_NOMEM, "model-parallel plan: out of memory");
    dd_plan_tp_calls *f2 = r, *b2 = r + S, *f3 = r + 2 * S, *b3 = r + 3 * S, *f4 = r + 4 * S, *b4 = r + 5 * S;
    dd_plan_tp_calls *fB = r + 6 * S, *bB = r + 7 * S;
    dd_status st = DD_OK;
    int direct = T <= 6, directB = 0;
    if (!direct) {
        st = count_run(m, k, 1, 2, f2, b2);
        if (st == DD_OK) st = count_run(m, k, 1, 3, f3, b3);
        if (st == DD_OK) st = count_run(m, k, 1, 4, f4, b4);
        if (st == DD_OK && B > 1) st = count_run(m, k, 2, 2, fB, bB);
        for (size_t s = 0; st == DD_OK && s < S && !direct; s++)
            for (int f = 0; f < NFIELD; f++) {
                const double a = *calls_field(&f2[s], f), b = *calls_field(&f3[s], f), c = *calls_field(&f4[s], f);
                const double a2 = *calls_field(&b2[s], f), b_ = *calls_field(&b3[s], f), c2 = *calls_field(&b4[s], f);
                if (c - b != b - a || c2 - b_ != b_ - a2) direct = 1;
                if (B > 1) {
                    const double want = f % 2 ? 2 * a : a, want2 = f % 2 ? 2 * a2 : a2;
                    if (*calls_field(&fB[s], f) != want || *calls_field(&bB[s], f) != want2) direct = directB = 1;
                }
            }
    }
    if (st == DD_OK && direct) {
        /* not affine (or short): run at the length itself; at B itself if floats are not
         * proportional to B */
        st = count_run(m, k, directB ? B : 1, T, fwd, bwd);
        for (size_t s = 0; st == DD_OK && !directB && s < S; s++)
            for (int f = 1; f < NFIELD; f += 2) {
                *calls_field(&fwd[s], f) *= B;
                *calls_field(&bwd[s], f) *= B;
            }
    } else if (st == DD_OK) {
        for (size_t s = 0; s < S; s++)
            for (int f = 0; f < NFIELD; f++) {
                const double a = *calls_field(&f2[s], f), b = *calls_field(&f3[s], f);
                const double a2 = *calls_field(&b2[s], f), b2v = *calls_field(&b3[s], f);
                const double scale = f % 2 ? (double)B : 1.0;
                *calls_field(&fwd[s], f) = (a + (b - a) * (T - 2)) * scale;
                *calls_field(&bwd[s], f) = (a2 + (b2v - a2) * (T - 2)) * scale;
            }
    }
    free(r);
    return st;
}

dd_status dd_plan_tp_counts(const char *model, const dd_model_cfg *cfg, int tp, int B, int T, dd_plan_tp_calls *fwd,
                            dd_plan_tp_calls *bwd, size_t cap, size_t *nstages) {
    if (!model || !fwd || !bwd || !nstages) return dd_error(DD_ERR_ARG, "dd_plan_tp_counts: NULL argument");
    if (tp < 1 || B < 1 || T < 1) return dd_error(DD_ERR_ARG, "dd_plan_tp_counts: tp = %d, B = %d, T = %d must be >= 1", tp, B, T);
    counter k;
    dd_model *m = NULL;
    DD_TRY(make_counted(model, cfg, tp, &k, &m));
    const size_t S = dd_model_num_stages(m);
    *nstages = S;
    dd_status st = S > cap ? dd_error(DD_ERR_ARG, "dd_plan_tp_counts: %zu stages, room for %zu", S, cap)
                           : count_scaled(m, &k, B, T, fwd, bwd);
    dd_model_destroy(&m);
    return st;
}

/* ---- one T: the shard, its stages and its collectives ---------------------------------- */

typedef struct {
    int T;
    dd_model *m;            /* the shard (or the whole model) */
    counter *k;             /* its callbacks' counter (heap: outlives the model) */
    size_t Sm, Sa;
    dd_stage_info *si;      /* [Sm + Sa]: the trained model's, then the PA model's */
    dd_plan_tp_calls *fwd, *bwd; /* [Sm] per frame of cfg->frame samples */
} mp_model;

static void mp_model_free(mp_model *x) {
    if (!x) return;
    dd_model_destroy(&x->m);
    free(x->k);
    free(x->si);
    free(x->fwd);
    memset(x, 0, sizeof *x);
}

static dd_status mp_model_make(const dd_plan_mp_cfg *c, int T, int with_counts, mp_model *x) {
    memset(x, 0, sizeof *x);
    x->T = T;
    x->k = calloc(1, sizeof *x->k);
    if (!x->k) return dd_error(DD_ERR_NOMEM, "model-parallel plan: out of memory");
    dd_status st = make_counted(c->model, &c->model_cfg, T, x->k, &x->m);
    if (st != DD_OK) {
        mp_model_free(x);
        return st;
    }
    x->Sm = dd_model_num_stages(x->m);
    x->Sa = c->pa ? dd_model_num_stages(c->pa) : 0;
    x->si = calloc(x->Sm + x->Sa, sizeof *x->si);
    x->fwd = calloc(2 * (x->Sm ? x->Sm : 1), sizeof *x->fwd);
    if (!x->si || !x->fwd) {
        mp_model_free(x);
        return dd_error(DD_ERR_NOMEM, "model-parallel plan: out of memory");
    }
    x->bwd = x->fwd + x->Sm;
    for (size_t s = 0; st == DD_OK && s < x->Sm + x->Sa; s++)
        st = s < x->Sm ? dd_model_stage_info(x->m, s, &x->si[s]) : dd_model_stage_info(c->pa, s - x->Sm, &x->si[s]);
    if (st == DD_OK && with_counts) st = count_scaled(x->m, x->k, 1, (int)c->frame, x->fwd, x->bwd);
    if (st != DD_OK) mp_model_free(x);
    return st;
}

/* ---- a model-parallel layout ------------------------------------------------------------ */

typedef struct {
    const dd_plan_mp_cfg *c;
    const mp_model *x;
    int T, P, M, V, D, N;
    size_t F, bmax;
    double slice;          /* frames of the largest replica's slice of a global batch */
    size_t *bounds;        /* [P V + 1] */
    dd_pp_buffers nbuf;
    int *nlive;            /* [P] */
} mp_layout;

static void mp_layout_free(mp_layout *L) {
    free(L->bounds);
    free(L->nlive);
    L->bounds = NULL;
    L->nlive = NULL;
}

static dd_status mp_layout_make(const dd_plan_mp_cfg *c, const mp_model *x, int P, int M, mp_layout *L) {
    memset(L, 0, sizeof *L);
    L->c = c;
    L->x = x;
    L->T = x->T;
    L->P = P;
    L->M = M > 0 ? M : P;
    L->V = c->virt;
    L->N = c->cluster.nodes * c->cluster.ranks_per_node;
    if (L->N % (L->T * P) != 0)
        return dd_error(DD_ERR_ARG, "model-parallel plan: --tp %d x --pp %d = %d does not divide the %d ranks", L->T, P,
                        L->T * P, L->N);
    L->D = L->N / (L->T * P);
    L->F = c->frame;
    DD_TRY(dd_pp_check_args(c->schedule, P, L->M, L->V));
    const size_t S = x->Sm + x->Sa, G = (size_t)P * (size_t)L->V;
    L->bounds = calloc(G + 1, sizeof *L->bounds);
    L->nlive = calloc((size_t)P, sizeof *L->nlive);
    double *cost = calloc(S ? S : 1, sizeof *cost);
    dd_status st = L->bounds && L->nlive && cost ? DD_OK : dd_error(DD_ERR_NOMEM, "model-parallel plan: out of memory");
    for (size_t s = 0; st == DD_OK && s < S; s++) cost[s] = x->si[s].flops_fwd + x->si[s].flops_bwd;
    if (st == DD_OK) st = dd_pp_split_balanced(cost, S, (int)G, L->bounds);
    free(cost);
    /* pipeline.c s_setup: the largest micro-batch of a replica's slice */
    const size_t bglob = global_batch(c);
    const size_t slice = (bglob + (size_t)L->D - 1) / (size_t)L->D;
    L->slice = (double)slice;
    L->bmax = (slice + (size_t)L->M - 1) / (size_t)L->M;
    if (L->bmax == 0) L->bmax = 1;
    if (st == DD_OK) st = dd_pp_schedule_buffers(c->schedule, P, L->M, L->V, &L->nbuf);
    if (st == DD_OK) {
        dd_pp_sim sim;
        st = dd_pp_simulate(c->schedule, P, L->M, L->V, 1.0, 2.0, &sim);
        for (int q = 0; st == DD_OK && q < P; q++) {
            L->nlive[q] = 1;
            for (int ch = 0; ch < L->V; ch++)
                if (sim.peak_live_chunk[q * L->V + ch] > L->nlive[q]) L->nlive[q] = sim.peak_live_chunk[q * L->V + ch];
        }
        if (st == DD_OK) dd_pp_sim_free(&sim);
    }
    if (st != DD_OK) mp_layout_free(L);
    return st;
}

/* One chunk of pipeline rank q (pipeline.c make_chunks). */
typedef struct {
    dd_pp_span sp; /* which stages */
    int in_w, out_w;
    size_t plo, phi;
} chunk;

static void chunk_of(const mp_layout *L, int q, int c, chunk *k) {
    dd_pp_span_of(L->bounds, L->P, L->V, q, c, L->x->Sm, &k->sp);
    k->in_w = L->x->si[k->sp.s0].in_width;
    k->out_w = L->x->si[k->sp.s1 - 1].out_width;
    k->plo = k->phi = 0;
    if (k->sp.m1 > k->sp.m0) {
        k->plo = L->x->si[k->sp.m0].lo;
        k->phi = L->x->si[k->sp.m1 - 1].hi;
    }
}

/* Storage floats (parameters = gradients) of pipeline rank q. */
static size_t rank_storage(const mp_layout *L, int q) {
    size_t n = 0;
    for (int c = 0; c < L->V; c++) {
        chunk k;
        chunk_of(L, q, c, &k);
        n += k.phi - k.plo;
    }
    return n;
}

/* dd_arena_calloc of zero floats still takes one (pipeline.c act_alloc). */
static size_t one_least(size_t n) { return n ? n : 1; }

/* Floats per kind of world rank r, and the evaluation's stage buffer. */
static void layout_memory(const mp_layout *L, int r, size_t fl[DD_MEM_KINDS], size_t *eval_fl) {
    const dd_plan_mp_cfg *c = L->c;
    const int q = (r / L->T) % L->P;
    const size_t np = rank_storage(L, q), one = np ? np : 1;
    fl[DD_MEM_PARAMS] = one;
    fl[DD_MEM_GRADS] = one;
    fl[DD_MEM_OPTIM] = state_arrays(c) * one;
    const size_t BF = L->bmax * L->F, M = (size_t)L->M;
    size_t act = 0;
#define A(n) (act += one_least(n))
    for (int ch = 0; ch < L->V; ch++) {
        chunk k;
        chunk_of(L, q, ch, &k);
        const size_t win = (size_t)k.in_w + (k.sp.u_in ? 2 : 0), wout = (size_t)k.out_w + (k.sp.u_out ? 2 : 0);
        const size_t wsm =
            k.sp.m1 > k.sp.m0 ? dd_model_range_workspace(L->x->m, k.sp.m0, k.sp.m1, (int)L->bmax, (int)L->F) + 16 : 0;
        const size_t wsa = k.sp.a1 > k.sp.a0 ? dd_model_range_workspace(c->pa, k.sp.a0, k.sp.a1, (int)L->bmax, (int)L->F) + 16 : 0;
        for (int j = 0; j < L->nlive[q]; j++) {
            if (!k.sp.first) A(BF * (size_t)k.in_w);
            if (k.sp.u_in) A(BF * 2);
            if (k.sp.m1 > k.sp.m0 && k.sp.a1 > k.sp.a0) A(BF * 2);
            if (k.sp.m1 > k.sp.m0) A(wsm);
            if (k.sp.a1 > k.sp.a0) A(wsa);
        }
        for (int j = 0; j < L->nbuf.act; j++) A(BF * win);
        for (int j = 0; j < L->nbuf.grad; j++) A(BF * wout);
        for (size_t m = 0; m < M; m++) {
            if (!k.sp.last) A(BF * wout);
            if (!k.sp.first) A(BF * win);
        }
    }
    const size_t xcap = L->bmax * M * L->F * 2;
    A(xcap);
    A(xcap);
    A(xcap + BF * 4);
#undef A
    /* the trainer's evaluation buffers: every rank evaluates under tp or pp */
    if (r == 0 || L->P > 1 || L->T > 1) act += dd_plan_eval_floats(L->x->m, c->pa, c->eval_batch, c->eval_segments, c->nperseg);
    fl[DD_MEM_ACTIVATIONS] = act;
    /* evaluation receives the stages of other pipeline ranks in one buffer, grown to the
     * largest (pipeline.c eval_stage_params) */
    size_t ev = 0;
    for (size_t v = 0; L->P > 1 && v < (size_t)L->P * (size_t)L->V; v++) {
        if ((int)(v % (size_t)L->P) == q) continue;
        for (size_t s = L->bounds[v]; s < L->bounds[v + 1] && s < L->x->Sm; s++)
            if (L->x->si[s].hi - L->x->si[s].lo > ev) ev = L->x->si[s].hi - L->x->si[s].lo;
    }
    *eval_fl = ev;
}

dd_status dd_plan_mp_memory(const dd_plan_mp_cfg *cfg, int tp, int pp, int micro, int rank,
                            size_t bytes[DD_MEM_KINDS], size_t *eval_params) {
    DD_TRY(check_cfg(cfg));
    if (!bytes) return dd_error(DD_ERR_ARG, "dd_plan_mp_memory: NULL output");
    const int N = cfg->cluster.nodes * cfg->cluster.ranks_per_node;
    if (tp < 1 || pp < 1) return dd_error(DD_ERR_ARG, "model-parallel plan: tp = %d, pp = %d must be >= 1", tp, pp);
    if (rank < 0 || rank >= N) return dd_error(DD_ERR_ARG, "model-parallel plan: rank = %d must be in [0, %d)", rank, N);
    if (N % (tp * pp) != 0)
        return dd_error(DD_ERR_ARG, "model-parallel plan: --tp %d x --pp %d = %d does not divide the %d ranks", tp, pp,
                        tp * pp, N);
    mp_model x;
    DD_TRY(mp_model_make(cfg, tp, 0, &x));
    mp_layout L;
    dd_status st = mp_layout_make(cfg, &x, pp, micro, &L);
    if (st == DD_OK) {
        size_t fl[DD_MEM_KINDS], ev = 0;
        layout_memory(&L, rank, fl, &ev);
        for (int k = 0; k < DD_MEM_KINDS; k++) bytes[k] = fl[k] * sizeof(float);
        if (eval_params) *eval_params = ev * sizeof(float);
        mp_layout_free(&L);
    }
    mp_model_free(&x);
    return st;
}

/* ---- placement ------------------------------------------------------------------------ */

/* Ranks fill nodes in order; the grid numbers positions tp fastest, then pp, then dp. */
static int node_of(const dd_plan_mp_cfg *c, long pos) { return (int)(pos / c->cluster.ranks_per_node); }

/* 1 when some group along the dimension of stride `stride` and size n spans nodes. */
static int spans_nodes(const dd_plan_mp_cfg *c, int N, int stride, int n) {
    if (n <= 1 || N <= c->cluster.ranks_per_node) return 0;
    for (long base = 0; base < N; base++) {
        if ((base / stride) % n != 0) continue; /* not the group's first member */
        if (node_of(c, base) != node_of(c, base + (long)(n - 1) * stride)) return 1;
    }
    return 0;
}

/* The link of a group that spans nodes, with the node's inter-node bandwidth shared by k
 * streams that cross it at once. */
static dd_link shared_link(const dd_link *l, int k) {
    dd_link s = *l;
    if (k > 1) {
        s.beta *= k;
        s.beta1 *= k;
    }
    return s;
}

/* ---- costs ------------------------------------------------------------------------------- */

/* Seconds of the collectives `calls` (their floats already for the micro-batch) on a group
 * of T ranks over link l (ring formulas; the allreduce by the configured algorithm). */
static double tp_time(const dd_plan_mp_cfg *c, const dd_plan_tp_calls *k, double scale, int T, const dd_link *l) {
    if (T < 2) return 0;
    double t = 0;
    if (k->allreduce_calls > 0) {
        const double bytes = 4.0 * k->allreduce_floats * scale / k->allreduce_calls;
        t += k->allreduce_calls * dd_plan_allreduce_time(c->algo, l, &c->cluster.intra, c->cluster.ranks_per_node, T, bytes);
    }
    if (k->allgather_calls > 0) {
        const double bytes = 4.0 * k->allgather_floats * scale / k->allgather_calls;
        t += k->allgather_calls * (T - 1) * (l->alpha + bytes * l->beta);
    }
    if (k->reduce_scatter_calls > 0) {
        const double bytes = 4.0 * k->reduce_scatter_floats * scale / k->reduce_scatter_calls;
        t += k->reduce_scatter_calls * (T - 1) * (l->alpha + bytes * (l->beta + l->gamma));
    }
    return t;
}

static double tp_bytes_sent(const dd_plan_tp_calls *k, double scale, int T) {
    if (T < 2) return 0;
    const double f = (double)(T - 1) / T;
    return 4.0 * scale * (2 * f * k->allreduce_floats + (T - 1) * k->allgather_floats + (T - 1) * k->reduce_scatter_floats);
}

/* The schedule run with per-virtual-stage costs f[v], b[v] and message delays act[v]
 * (v -> v+1) and grad[v] (v+1 -> v): a message is delivered at max(send posted, receive
 * posted) + its delay; FWD/BWD start when their message has arrived and the rank is
 * free. busy[q]: compute of rank q. Returns the makespan, or a negative value on error. */
static double simulate(const mp_layout *L, const double *f, const double *b, const double *act, const double *grad,
                       double *busy) {
    const int P = L->P, M = L->M, V = L->V, G = P * V;
    dd_pp_instr **lists = calloc((size_t)P, sizeof *lists);
    size_t *n = calloc((size_t)P, sizeof *n), *pc = calloc((size_t)P, sizeof *pc);
    double *clock = calloc((size_t)P, sizeof *clock);
    const size_t nmsg = (size_t)M * (size_t)G * 2;
    double *sent = malloc(nmsg * sizeof *sent), *posted = malloc(nmsg * sizeof *posted);
    double makespan = -1;
    if (!lists || !n || !pc || !clock || !sent || !posted) goto done;
    for (size_t i = 0; i < nmsg; i++) sent[i] = posted[i] = -1;
    for (int q = 0; q < P; q++)
        if (dd_pp_schedule(L->c->schedule, P, M, V, q, &lists[q], &n[q]) != DD_OK) goto done;
    for (int q = 0; q < P; q++) busy[q] = 0;
#define MSG(m, v, g) (((size_t)(m) * (size_t)G + (size_t)(v)) * 2 + (size_t)(g))
    for (;;) {
        int moved = 0, done_all = 1;
        for (int q = 0; q < P; q++) {
            while (pc[q] < n[q]) {
                const dd_pp_instr *I = &lists[q][pc[q]];
                const int v = I->vstage, m = I->micro;
                if (I->op == DD_PP_RECV_ACT) {
                    posted[MSG(m, v, 0)] = clock[q];
                } else if (I->op == DD_PP_RECV_GRAD) {
                    posted[MSG(m, v, 1)] = clock[q];
                } else if (I->op == DD_PP_SEND_ACT) {
                    sent[MSG(m, v + 1, 0)] = clock[q];
                } else if (I->op == DD_PP_SEND_GRAD) {
                    sent[MSG(m, v - 1, 1)] = clock[q];
                } else {
                    const int g = I->op == DD_PP_BWD;
                    double start = clock[q];
                    if (I->peer >= 0) {
                        const size_t k = MSG(m, v, g);
                        if (sent[k] < 0) break; /* not sent yet: wait */
                        const double d = g ? grad[v] : act[v - 1];
                        const double arrive = fmax(sent[k], posted[k]) + d;
                        if (arrive > start) start = arrive;
                    }
                    const double cost = g ? b[v] : f[v];
                    clock[q] = start + cost;
                    busy[q] += cost;
                }
                pc[q]++;
                moved = 1;
            }
            if (pc[q] < n[q]) done_all = 0;
        }
        if (done_all) break;
        if (!moved) goto done; /* a deadlock: dd_pp_schedule's lists never do this */
    }
#undef MSG
    makespan = 0;
    for (int q = 0; q < P; q++) makespan = fmax(makespan, clock[q]);
done:
    for (int q = 0; lists && q < P; q++) free(lists[q]);
    free(lists);
    free(n);
    free(pc);
    free(clock);
    free(sent);
    free(posted);
    return makespan;
}

/* Time of the model-parallel layout L (cfg checked, gflops > 0) into *o. */
static dd_status layout_time(const mp_layout *L, dd_plan_mp_layout *o) {
    const dd_plan_mp_cfg *c = L->c;
    const mp_model *x = L->x;
    const int P = L->P, V = L->V, G = P * V, T = L->T, D = L->D, N = L->N, rpn = c->cluster.ranks_per_node;
    const double speed = c->cluster.gflops * 1e9, Bm = L->slice / L->M, samples = Bm * (double)L->F;
    double *buf = calloc(8 * (size_t)G + 2 * (size_t)P, sizeof *buf);
    if (!buf) return dd_error(DD_ERR_NOMEM, "model-parallel plan: out of memory");
    double *fc = buf, *bc = buf + G, *ft = buf + 2 * G, *bt = buf + 3 * G, *act = buf + 4 * G, *grad = buf + 5 * G;
    double *f = buf + 6 * G, *b = buf + 7 * G, *busy = buf + 8 * G, *busy0 = busy + P;
    o->tp_inter = spans_nodes(c, N, 1, T);
    o->pp_inter = 0;
    o->dp_inter = spans_nodes(c, N, T * P, D);
    const dd_link tpl = o->tp_inter ? c->cluster.inter : c->cluster.intra;
    double tp_calls = 0, tp_bytes = 0;
    for (int v = 0; v < G; v++) {
        for (size_t s = L->bounds[v]; s < L->bounds[v + 1]; s++) {
            fc[v] += x->si[s].flops_fwd * samples / speed;
            bc[v] += x->si[s].flops_bwd * samples / speed;
            if (s < x->Sm) {
                ft[v] += tp_time(c, &x->fwd[s], Bm, T, &tpl);
                bt[v] += tp_time(c, &x->bwd[s], Bm, T, &tpl);
            }
        }
        f[v] = fc[v] + ft[v];
        b[v] = bc[v] + bt[v];
    }
    /* pipeline messages: activation of v -> v + 1 and its gradient back */
    for (int v = 0; v + 1 < G; v++) {
        chunk k;
        chunk_of(L, v % P, v / P, &k);
        const double bytes = 4.0 * Bm * (double)L->F * ((double)k.out_w + (k.sp.u_out ? 2 : 0));
        const int q0 = v % P, q1 = (v + 1) % P;
        int inter = 0;
        for (int d = 0; d < D && !inter && N > rpn; d++)
            for (int t = 0; t < T && !inter; t++) {
                const long p0 = t + (long)T * (q0 + (long)P * d), p1 = t + (long)T * (q1 + (long)P * d);
                if (node_of(c, p0) != node_of(c, p1)) inter = 1;
            }
        if (inter) o->pp_inter = 1;
        const dd_link l = inter ? shared_link(&c->cluster.inter, T) : c->cluster.intra;
        act[v] = grad[v] = l.alpha1 + bytes * l.beta1;
        /* rank 0's sends: the activation of a boundary it starts, the gradient of one it ends */
        if (q0 == 0) o->msg_bytes += L->M * bytes;
        if (q1 == 0) o->msg_bytes += L->M * bytes;
    }
    dd_status st = DD_OK;
    const double span = simulate(L, f, b, act, grad, busy);
    double *zero = calloc((size_t)G, sizeof *zero);
    const double span0 = zero ? simulate(L, f, b, zero, zero, busy0) : -1;
    free(zero);
    if (span < 0 || span0 < 0) {
        st = dd_error(DD_ERR_INTERNAL, "model-parallel plan: the schedule simulation failed");
        goto done;
    }
    /* the busiest rank: its compute and collectives */
    int qb = 0;
    for (int q = 1; q < P; q++)
        if (busy[q] > busy[qb]) qb = q;
    double comp = 0, tpt = 0, mean_busy = 0;
    for (int v = qb; v < G; v += P) {
        comp += L->M * (fc[v] + bc[v]);
        tpt += L->M * (ft[v] + bt[v]);
        for (size_t s = L->bounds[v]; s < L->bounds[v + 1] && s < x->Sm; s++) {
            const dd_plan_tp_calls *kf = &x->fwd[s], *kb = &x->bwd[s];
            tp_calls += L->M * (kf->allreduce_calls + kf->allgather_calls + kf->reduce_scatter_calls +
                                kb->allreduce_calls + kb->allgather_calls + kb->reduce_scatter_calls);
            tp_bytes += L->M * (tp_bytes_sent(kf, Bm, T) + tp_bytes_sent(kb, Bm, T));
        }
    }
    for (int q = 0; q < P; q++) mean_busy += busy[q] / P;
    o->compute_s = comp;
    o->tp_s = tpt;
    o->tp_calls = T > 1 ? tp_calls : 0;
    o->tp_bytes = tp_bytes;
    o->bubble_s = fmax(0.0, span0 - busy0[qb]);
    o->msg_s = fmax(0.0, span - span0);
    o->bubble = P > 1 ? 1.0 - mean_busy / span : 0.0;
    o->bubble_formula = P > 1 ? dd_pp_bubble_formula(c->schedule, P, L->M, V) : 0.0;
    /* the replicas' allreduce of each pipeline rank's gradients, after the schedule */
    o->dp_s = 0;
    if (D > 1) {
        const int share = o->dp_inter ? (T * P < rpn ? T * P : rpn) : 1;
        const dd_link dl = o->dp_inter ? shared_link(&c->cluster.inter, share) : c->cluster.intra;
        for (int q = 0; q < P; q++) {
            const double bytes = 4.0 * (double)rank_storage(L, q);
            const double t = dd_plan_allreduce_time(c->algo, &dl, &c->cluster.intra, rpn, D, bytes);
            if (t > o->dp_s) o->dp_s = t;
            if (bytes > o->dp_bytes) o->dp_bytes = bytes;
        }
    }
    {
        const dd_link wl = N > rpn ? c->cluster.inter : c->cluster.intra;
        o->small_s = N > 1 ? dd_plan_allreduce_time(c->algo, &wl, &c->cluster.intra, rpn, N, 3 * sizeof(double)) : 0;
    }
    o->step_s = o->compute_s + o->tp_s + o->bubble_s + o->msg_s + o->dp_s + o->small_s;
done:
    free(buf);
    return st;
}

/* ---- plain data parallelism (plan_shard.c) ----------------------------------------------- */

static double flops_sample(const dd_model *m, const dd_model *pa, double *bwd) {
    double f = 0, b = 0;
    for (int w = 0; w < 2; w++) {
        const dd_model *x = w ? pa : m;
        for (size_t s = 0; x && s < dd_model_num_stages(x); s++) {
            dd_stage_info si;
            if (dd_model_stage_info(x, s, &si) != DD_OK) continue;
            f += si.flops_fwd;
            b += si.flops_bwd;
        }
    }
    if (bwd) *bwd = b;
    return f + b;
}

static void shard_cfg(const dd_plan_mp_cfg *c, const dd_model *whole, int N, dd_shard_mode mode, dd_plan_shard_cfg *s) {
    dd_plan_shard_cfg_default(s);
    s->model = whole;
    s->pa = c->pa;
    s->task = c->task;
    s->opt = c->opt;
    s->momentum = c->momentum;
    s->batch = c->batch;
    s->frame = c->frame;
    s->frames = c->frames;
    s->eval_batch = c->eval_batch;
    s->nperseg = c->nperseg;
    s->eval_segments = c->eval_segments;
    s->ranks = N;
    s->shard = mode;
    s->algo = c->algo;
    s->bucket_mb = c->bucket_mb;
    s->link = N > c->cluster.ranks_per_node ? c->cluster.inter : c->cluster.intra;
    s->intra = c->cluster.intra;
    s->ranks_per_node = c->cluster.ranks_per_node;
}

static dd_status dp_layout(const dd_plan_mp_cfg *c, const dd_model *whole, dd_shard_mode mode, int timed,
                           dd_plan_mp_layout *o) {
    const int N = c->cluster.nodes * c->cluster.ranks_per_node, rpn = c->cluster.ranks_per_node;
    memset(o, 0, sizeof *o);
    dd_plan_shard_cfg sc;
    shard_cfg(c, whole, N, mode, &sc);
    dd_plan_shard_result r;
    DD_TRY(dd_plan_shard_run(&sc, &r));
    o->tp = o->pp = 1;
    o->dp = N;
    o->micro = 0;
    o->virt = 1;
    o->shard = mode;
    o->strategy = N == 1 ? "single" : mode <= DD_SHARD_ZERO1 ? "dp" : "zero";
    memcpy(o->mem, r.mem, sizeof o->mem);
    o->mem_total = r.mem_total;
    o->mem_peak = r.mem_total + r.report_bytes;
    o->mem_rank = 0;
    o->rank_params = mode == DD_SHARD_ZERO3 ? r.slice : r.floats;
    o->dp_inter = N > rpn;
    if (!timed) return DD_OK;
    double fb = 0;
    const double fs = flops_sample(whole, c->pa, &fb);
    o->compute_s = fs * (double)r.batch_per_rank * (double)c->frame / (c->cluster.gflops * 1e9);
    if (N < 2) {
        o->step_s = o->compute_s;
        return DD_OK;
    }
    const dd_link wl = sc.link;
    o->small_s = dd_plan_allreduce_time(c->algo, &wl, &c->cluster.intra, rpn, N, 3 * sizeof(double));
    o->dp_bytes = 4.0 * (double)r.floats;
    /* none and zero1: bucket allreduces behind the backward pass (plan.c's queue model) */
    dd_plan_cfg pc;
    dd_plan_cfg_default(&pc);
    pc.params = (double)r.floats;
    pc.ranks = N;
    pc.link = wl;
    pc.intra = c->cluster.intra;
    pc.ranks_per_node = rpn;
    pc.compute_s = o->compute_s > 0 ? o->compute_s : 1e-12;
    pc.backward_frac = fs > 0 ? fb / fs : 2.0 / 3.0;
    pc.overlap = c->bucket_mb > 0;
    const double G = 4.0 * (double)r.floats, bucket = c->bucket_mb > 0 ? fmin(c->bucket_mb * 1048576.0, G) : G;
    const double exposed = dd_plan_exposed_comm(&pc, c->algo, N, bucket);
    if (mode == DD_SHARD_NONE) {
        o->dp_s = exposed;
    } else if (mode == DD_SHARD_ZERO1) {
        dd_plan_shard_cfg nc = sc;
        nc.shard = DD_SHARD_NONE;
        dd_plan_shard_result nr;
        DD_TRY(dd_plan_shard_run(&nc, &nr));
        o->dp_s = exposed + fmax(0.0, r.time_s - nr.time_s); /* + the parameter allgather */
    } else {
        /* zero2, zero3: their collectives one after another (an upper bound: they overlap
         * compute in part) */
        o->dp_s = fmax(0.0, r.time_s - o->small_s);
    }
    o->step_s = o->compute_s + o->dp_s + o->small_s;
    return DD_OK;
}

/* ---- layouts ---------------------------------------------------------------------------- */

static int fits(const dd_plan_mp_cfg *c, const dd_plan_mp_layout *o) {
    return c->cluster.memory_bytes <= 0 || (double)o->mem_peak <= c->cluster.memory_bytes;
}

/* Memory of the largest rank of a model-parallel layout. */
static void mp_layout_mem(const mp_layout *L, dd_plan_mp_layout *o) {
    o->mem_total = 0;
    o->mem_peak = 0;
    for (int q = 0; q < L->P; q++) {
        /* pipeline position q of replica 0 (tp rank 0; every rank of a group allocates
         * alike); rank 0 itself when q = 0 */
        const int r = q * L->T;
        size_t fl[DD_MEM_KINDS], ev = 0, tot = 0;
        layout_memory(L, r, fl, &ev);
        for (int k = 0; k < DD_MEM_KINDS; k++) tot += fl[k] * sizeof(float);
        if (q == 0 || tot + ev * sizeof(float) > o->mem_peak) {
            for (int k = 0; k < DD_MEM_KINDS; k++) o->mem[k] = fl[k] * sizeof(float);
            o->mem_total = tot;
            o->mem_peak = tot + ev * sizeof(float);
            o->mem_rank = r;
            o->rank_params = rank_storage(L, q);
        }
    }
}

static dd_status eval_mp(const dd_plan_mp_cfg *c, const mp_model *x, int P, int M, dd_plan_mp_layout *o) {
    mp_layout L;
    DD_TRY(mp_layout_make(c, x, P, M, &L));
    memset(o, 0, sizeof *o);
    o->tp = L.T;
    o->pp = P;
    o->dp = L.D;
    o->micro = L.M;
    o->virt = L.V;
    o->shard = DD_SHARD_NONE;
    o->strategy = "model-parallel";
    mp_layout_mem(&L, o);
    o->fits = fits(c, o);
    dd_status st = c->cluster.gflops > 0 ? layout_time(&L, o) : DD_OK;
    mp_layout_free(&L);
    return st;
}

/* The micro-batch counts tried by micro = -1: P x 1, 2, 4, 8 up to the replica's slice. */
static int micro_candidates(const dd_plan_mp_cfg *c, int T, int P, int *out) {
    const int N = c->cluster.nodes * c->cluster.ranks_per_node, D = N / (T * P);
    const size_t slice = (global_batch(c) + (size_t)D - 1) / (size_t)D;
    int n = 0;
    for (int k = 1; k <= 8; k *= 2) {
        const long m = (long)P * k;
        if (m > DD_PP_MAX_MICRO || (n > 0 && (size_t)m > slice)) break;
        out[n++] = (int)m;
    }
    return n;
}

/* Layout (T, P, micro) of the model-parallel strategy with shard x (micro -1: auto). */
static dd_status eval_mp_micro(const dd_plan_mp_cfg *c, const mp_model *x, int P, int micro, dd_plan_mp_layout *o) {
    if (micro >= 0) return eval_mp(c, x, P, micro, o);
    int cand[8];
    const int n = micro_candidates(c, x->T, P, cand);
    dd_plan_mp_layout best, cur;
    int have = 0;
    for (int i = 0; i < n; i++) {
        DD_TRY(eval_mp(c, x, P, cand[i], &cur));
        if (!have) {
            best = cur;
            have = 1;
            continue;
        }
        /* a fitting layout beats one that does not; among fitting ones the faster, unless
         * the one with fewer micro-batches is within 2 % of it; among the others the smaller */
        if (cur.fits && !best.fits) { /* NOLINT(bugprone-branch-clone): one rule a branch, as the comment reads */
            best = cur;
        } else if (cur.fits && best.fits) {
            if (cur.step_s < best.step_s / 1.02) best = cur;
        } else if (!cur.fits && !best.fits && cur.mem_peak < best.mem_peak) {
            best = cur;
        }
    }
    if (!have) return dd_error(DD_ERR_ARG, "model-parallel plan: no micro-batch count to try");
    *o = best;
    return DD_OK;
}

dd_status dd_plan_mp_layout_eval(const dd_plan_mp_cfg *cfg, int tp, int pp, int micro, dd_shard_mode shard,
                                 dd_plan_mp_layout *out) {
    DD_TRY(check_cfg(cfg));
    if (!out) return dd_error(DD_ERR_ARG, "dd_plan_mp_layout_eval: NULL output");
    if (!(cfg->cluster.gflops > 0))
        return dd_error(DD_ERR_ARG, "model-parallel plan: no compute speed (gflops): give it in the cluster file, with "
                                    "--gflops or --measure-compute");
    memset(out, 0, sizeof *out);
    const int N = cfg->cluster.nodes * cfg->cluster.ranks_per_node;
    if (tp < 1 || pp < 1 || N % (tp * pp) != 0)
        return dd_error(DD_ERR_ARG, "model-parallel plan: --tp %d x --pp %d does not divide the %d ranks", tp, pp, N);
    if (shard != DD_SHARD_NONE && (tp > 1 || pp > 1))
        return dd_error(DD_ERR_ARG, "model-parallel plan: --shard %s applies to plain data parallelism (tp = pp = 1)",
                        dd_shard_name(shard));
    dd_status st;
    if (tp == 1 && pp == 1) {
        dd_model *whole = NULL;
        DD_TRY(dd_model_create(cfg->model, &cfg->model_cfg, &whole));
        st = dp_layout(cfg, whole, shard, 1, out);
        dd_model_destroy(&whole);
    } else {
        mp_model x;
        DD_TRY(mp_model_make(cfg, tp, 1, &x));
        st = eval_mp_micro(cfg, &x, pp, micro, out);
        mp_model_free(&x);
    }
    out->fits = fits(cfg, out);
    return st;
}

static int cmp_rows(const void *a, const void *b) {
    const dd_plan_mp_layout *x = a, *y = b;
    if (x->fits != y->fits) return x->fits ? -1 : 1;
    if (x->fits) {
        if (x->step_s != y->step_s) return x->step_s < y->step_s ? -1 : 1;
    } else if (x->mem_peak != y->mem_peak) {
        return x->mem_peak < y->mem_peak ? -1 : 1;
    }
    /* ties: fewer model-parallel ranks first, then by grid */
    if (x->tp * x->pp != y->tp * y->pp) return x->tp * x->pp < y->tp * y->pp ? -1 : 1;
    if (x->tp != y->tp) return x->tp < y->tp ? -1 : 1;
    return (int)x->shard - (int)y->shard;
}

static void skip(dd_plan_mp_result *r, const char *fmt, const char *msg, int tp, int pp) {
    char line[192];
    snprintf(line, sizeof line, fmt, tp, pp, msg);
    for (int i = 0; i < r->nskipped && i < 8; i++)
        if (strcmp(r->skipped[i], line) == 0) return;
    if (r->nskipped < 8) snprintf(r->skipped[r->nskipped], sizeof r->skipped[0], "%s", line);
    r->nskipped++;
}

void dd_plan_mp_result_free(dd_plan_mp_result *r) {
    if (!r) return;
    free(r->rows);
    r->rows = NULL;
    r->nrows = 0;
}

dd_status dd_plan_mp_run(const dd_plan_mp_cfg *cfg, dd_plan_mp_result *out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_plan_mp_run: NULL output");
    memset(out, 0, sizeof *out);
    out->best = -1;
    DD_TRY(check_cfg(cfg));
    if (!(cfg->cluster.gflops > 0))
        return dd_error(DD_ERR_ARG, "model-parallel plan: no compute speed (gflops): give it in the cluster file, with "
                                    "--gflops or --measure-compute");
    out->cfg = *cfg;
    const int N = cfg->cluster.nodes * cfg->cluster.ranks_per_node;
    out->ranks = N;
    dd_model *whole = NULL;
    DD_TRY(dd_model_create(cfg->model, &cfg->model_cfg, &whole));
    out->params = dd_model_num_params(whole);
    out->floats = dd_model_params(whole)->total;
    out->stages = dd_model_num_stages(whole);
    out->flops_sample = flops_sample(whole, cfg->pa, NULL);
    const size_t S = out->stages + (cfg->pa ? dd_model_num_stages(cfg->pa) : 0);
    size_t cap = 64;
    out->rows = calloc(cap, sizeof *out->rows);
    dd_status st = out->rows ? DD_OK : dd_error(DD_ERR_NOMEM, "model-parallel plan: out of memory");
    /* plain data parallelism: every sharding mode (one mode at one rank) */
    for (int md = DD_SHARD_NONE; st == DD_OK && md <= (N > 1 ? DD_SHARD_ZERO3 : DD_SHARD_NONE); md++) {
        st = dp_layout(cfg, whole, (dd_shard_mode)md, 1, &out->rows[out->nrows]);
        if (st == DD_OK) out->rows[out->nrows].fits = fits(cfg, &out->rows[out->nrows]), out->nrows++;
    }
    dd_model_destroy(&whole);
    /* model parallelism: every T x P dividing N (not 1 x 1) */
    for (int T = 1; st == DD_OK && T <= N; T++) {
        if (N % T) continue;
        mp_model x;
        int have = 0;
        for (int P = 1; st == DD_OK && T * P <= N; P++) {
            if ((N / T) % P || (T == 1 && P == 1)) continue;
            if ((size_t)P * (size_t)cfg->virt > S) {
                skip(out, "tp %d x pp %d: %s", "more pipeline groups than stages", T, P);
                continue;
            }
            if (!have) {
                dd_status ms = mp_model_make(cfg, T, 1, &x);
                if (ms != DD_OK) {
                    skip(out, "tp %d (pp %d): %s", dd_last_error(), T, P);
                    break; /* this T has no shard: every P alike */
                }
                have = 1;
            }
            if (out->nrows == cap) {
                dd_plan_mp_layout *nr = realloc(out->rows, 2 * cap * sizeof *nr);
                if (!nr) {
                    st = dd_error(DD_ERR_NOMEM, "model-parallel plan: out of memory");
                    break;
                }
                out->rows = nr;
                cap *= 2;
            }
            dd_status ls = eval_mp_micro(cfg, &x, P, cfg->micro, &out->rows[out->nrows]);
            if (ls == DD_ERR_NOMEM) st = ls;
            else if (ls != DD_OK) skip(out, "tp %d x pp %d: %s", dd_last_error(), T, P);
            else out->nrows++;
        }
        if (have) mp_model_free(&x);
    }
    if (st != DD_OK) {
        dd_plan_mp_result_free(out);
        return st;
    }
    qsort(out->rows, out->nrows, sizeof *out->rows, cmp_rows);
    int place = 0;
    for (size_t i = 0; i < out->nrows; i++) out->rows[i].rank = out->rows[i].fits ? ++place : 0;
    out->best = out->nrows && out->rows[0].fits ? 0 : -1;
    return DD_OK;
}

/* ---- explanation and JSON -------------------------------------------------------------- */

static void fmt_t(char *b, size_t n, double s) {
    if (s < 1e-3) snprintf(b, n, "%.1f us", s * 1e6);
    else if (s < 1) snprintf(b, n, "%.1f ms", s * 1e3);
    else snprintf(b, n, "%.3f s", s);
}

static void fmt_mib(char *b, size_t n, double bytes) {
    if (bytes >= 1024.0 * 1048576.0) snprintf(b, n, "%.2f GiB", bytes / (1024.0 * 1048576.0));
    else if (bytes >= 1048576.0) snprintf(b, n, "%.1f MiB", bytes / 1048576.0);
    else if (bytes >= 1024.0) snprintf(b, n, "%.1f KiB", bytes / 1024.0);
    else snprintf(b, n, "%.0f B", bytes);
}

static void fmt_b(char *b, size_t n, double bytes) {
    if (bytes >= 1e9) snprintf(b, n, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(b, n, "%.2f MB", bytes / 1e6);
    else if (bytes >= 1e3) snprintf(b, n, "%.1f KB", bytes / 1e3);
    else snprintf(b, n, "%.0f B", bytes);
}

static void layout_name(const dd_plan_mp_layout *o, char *b, size_t n) {
    if (o->tp == 1 && o->pp == 1)
        snprintf(b, n, "tp 1 x pp 1 x dp %d (%s%s)", o->dp, o->dp == 1 ? "one process" : "data parallelism",
                 o->shard != DD_SHARD_NONE ? o->shard == DD_SHARD_ZERO1   ? ", zero1"
                                             : o->shard == DD_SHARD_ZERO2 ? ", zero2"
                                                                          : ", zero3"
                                           : "");
    else
        snprintf(b, n, "tp %d x pp %d x dp %d (%d micro-batch%s)", o->tp, o->pp, o->dp, o->micro,
                 o->micro == 1 ? "" : "es");
}

typedef struct {
    char *buf;
    size_t cap, len;
} sbuf;

static void put(sbuf *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void put(sbuf *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = s->len < s->cap ? s->buf + s->len : NULL;
    const size_t room = s->len < s->cap ? s->cap - s->len : 0;
    int w = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (w > 0) s->len += (size_t)w;
}

/* The component of b that exceeds a's most: a phrase. */
static void why_slower(const dd_plan_mp_layout *best, const dd_plan_mp_layout *o, char *b, size_t n) {
    const double d[6] = {o->compute_s - best->compute_s, o->tp_s - best->tp_s, o->bubble_s - best->bubble_s,
                         o->msg_s - best->msg_s,         o->dp_s - best->dp_s, o->small_s - best->small_s};
    int k = 0;
    for (int i = 1; i < 6; i++)
        if (d[i] > d[k]) k = i;
    char t[32], x[32], y[32];
    switch (k) {
    case 0:
        fmt_t(t, sizeof t, o->compute_s);
        fmt_t(x, sizeof x, best->compute_s);
        snprintf(b, n, "its busiest rank computes %s per step (the best: %s)", t, x);
        break;
    case 1:
        fmt_t(t, sizeof t, o->tp_s);
        fmt_b(y, sizeof y, o->tp_bytes);
        snprintf(b, n, "its tensor-parallel collectives cost %s per step (%.0f calls, %s sent per rank, %s)", t,
                 o->tp_calls, y, o->tp_inter ? "across nodes" : "inside a node");
        break;
    case 2:
        fmt_t(t, sizeof t, o->bubble_s);
        snprintf(b, n, "its pipeline bubble costs %s (%.1f %% idle)", t, 100 * o->bubble);
        break;
    case 3:
        fmt_t(t, sizeof t, o->msg_s);
        snprintf(b, n, "its pipeline messages add %s (%s)", t, o->pp_inter ? "across nodes" : "inside a node");
        break;
    case 4:
        fmt_t(t, sizeof t, o->dp_s);
        fmt_b(y, sizeof y, o->dp_bytes);
        snprintf(b, n, "its gradient %s of %s per rank over %d replicas %s costs %s not hidden",
                 o->shard >= DD_SHARD_ZERO2 ? "reduce-scatter and gathers" : "allreduce", y, o->dp,
                 o->dp_inter ? "across nodes" : "inside a node", t);
        break;
    default:
        fmt_t(t, sizeof t, o->small_s);
        snprintf(b, n, "its loss reduction costs %s", t);
    }
}

size_t dd_plan_mp_explain(const dd_plan_mp_result *r, char *buf, size_t cap) {
    sbuf s = {buf, cap, 0};
    if (buf && cap) buf[0] = '\0';
    if (!r) return 0;
    char nm[96], t1[32], t2[32], t3[32], m1[32], m2[32];
    const double lim = r->cfg.cluster.memory_bytes;
    fmt_mib(m2, sizeof m2, lim);
    if (r->best < 0) {
        const dd_plan_mp_layout *o = r->nrows ? &r->rows[0] : NULL;
        if (o) {
            layout_name(o, nm, sizeof nm);
            fmt_mib(m1, sizeof m1, (double)o->mem_peak);
            put(&s, "no layout fits %s per rank: the smallest, %s, needs %s (rank %d)\n", m2, nm, m1, o->mem_rank);
        } else {
            put(&s, "no layout could be planned\n");
        }
        return s.len;
    }
    const dd_plan_mp_layout *b = &r->rows[r->best];
    layout_name(b, nm, sizeof nm);
    fmt_t(t1, sizeof t1, b->step_s);
    put(&s, "best: %s: %s per step predicted\n", nm, t1);
    fmt_t(t1, sizeof t1, b->compute_s);
    put(&s, "  compute %s on the busiest rank", t1);
    if (b->tp > 1) {
        fmt_t(t2, sizeof t2, b->tp_s);
        put(&s, "; tensor-parallel collectives %s (%.0f calls, %s)", t2, b->tp_calls,
            b->tp_inter ? "across nodes" : "inside a node");
    }
    if (b->pp > 1) {
        fmt_t(t2, sizeof t2, b->bubble_s);
        fmt_t(t3, sizeof t3, b->msg_s);
        put(&s, "; pipeline bubble %.1f %% (formula %.1f %%, %s on the critical path); messages %s (%s)",
            100 * b->bubble, 100 * b->bubble_formula, t2, t3, b->pp_inter ? "across nodes" : "inside a node");
    }
    if (b->dp > 1) {
        fmt_t(t2, sizeof t2, b->dp_s);
        fmt_b(t3, sizeof t3, b->dp_bytes);
        put(&s, "; the %s across the %d replicas (%s per rank, %s) costs %s%s",
            b->shard >= DD_SHARD_ZERO2 ? "gradient reduce-scatter and gathers" : "gradient allreduce", b->dp, t3,
            b->dp_inter ? "across nodes" : "inside a node", t2,
            b->tp == 1 && b->pp == 1 && b->shard <= DD_SHARD_ZERO1 ? " not hidden behind backward" : "");
    }
    fmt_mib(m1, sizeof m1, (double)b->mem_peak);
    if (lim > 0)
        put(&s, "; memory %s of %s per rank\n", m1, m2);
    else
        put(&s, "; memory %s per rank (no limit)\n", m1);
    /* why: plain data parallelism first (the layout one would try first), then the runner-up */
    const dd_plan_mp_layout *dp = NULL, *next = NULL;
    for (size_t i = 0; i < r->nrows; i++) {
        const dd_plan_mp_layout *o = &r->rows[i];
        if (o->tp == 1 && o->pp == 1 && o->shard == DD_SHARD_NONE) dp = o;
        if (!next && (int)i != r->best && o->fits) next = o;
    }
    if (dp && dp != b) {
        char nd[96];
        layout_name(dp, nd, sizeof nd);
        if (!dp->fits) {
            fmt_mib(m1, sizeof m1, (double)dp->mem_peak);
            char pb[32], pa[32];
            fmt_mib(pb, sizeof pb, (double)(dp->mem[DD_MEM_PARAMS] + dp->mem[DD_MEM_GRADS] + dp->mem[DD_MEM_OPTIM]));
            fmt_mib(pa, sizeof pa, (double)(b->mem[DD_MEM_PARAMS] + b->mem[DD_MEM_GRADS] + b->mem[DD_MEM_OPTIM]));
            char ba[32], bb[32];
            fmt_mib(ba, sizeof ba, (double)dp->mem[DD_MEM_ACTIVATIONS]);
            fmt_mib(bb, sizeof bb, (double)b->mem[DD_MEM_ACTIVATIONS]);
            put(&s, "why: %s does not fit: %s per rank (model state %s, activations %s) above the %s limit; %s "
                    "holds %s of model state and %s of activations per rank\n",
                nd, m1, pb, ba, m2, b->tp > 1 && b->pp > 1 ? "splitting layers and stages"
                                    : b->tp > 1          ? "splitting every layer (tensor parallelism)"
                                    : b->pp > 1          ? "splitting the stages (pipeline)"
                                                         : "sharding",
                pa, bb);
        } else {
            char w[200];
            why_slower(b, dp, w, sizeof w);
            fmt_t(t1, sizeof t1, dp->step_s);
            put(&s, "why: %s takes %s (+%.1f %%): %s\n", nd, t1, 100 * (dp->step_s / b->step_s - 1), w);
        }
    }
    if (next && next != dp) {
        char nn[96], w[200];
        layout_name(next, nn, sizeof nn);
        why_slower(b, next, w, sizeof w);
        fmt_t(t1, sizeof t1, next->step_s);
        put(&s, "next: %s takes %s (+%.1f %%): %s\n", nn, t1, 100 * (next->step_s / b->step_s - 1), w);
    }
    int nofit = 0;
    for (size_t i = 0; i < r->nrows; i++) nofit += !r->rows[i].fits;
    if (nofit) put(&s, "%d layout%s do%s not fit %s per rank\n", nofit, nofit == 1 ? "" : "s", nofit == 1 ? "es" : "", m2);
    return s.len;
}

dd_status dd_plan_mp_json(const dd_plan_mp_result *r, char **json) {
    if (!r || !json) return dd_error(DD_ERR_ARG, "dd_plan_mp_json: NULL argument");
    *json = NULL;
    const dd_plan_mp_cfg *c = &r->cfg;
    cJSON *root = cJSON_CreateObject(), *in = NULL, *cl = NULL, *arr = NULL, *ex = NULL;
    if (!root) goto nomem;
    in = cJSON_AddObjectToObject(root, "inputs");
    cl = cJSON_AddObjectToObject(root, "cluster");
    arr = cJSON_AddArrayToObject(root, "layouts");
    ex = cJSON_AddArrayToObject(root, "explanation");
    if (!in || !cl || !arr || !ex) goto nomem;
    cJSON_AddStringToObject(in, "model", c->model);
    cJSON_AddNumberToObject(in, "params", (double)r->params);
    cJSON_AddNumberToObject(in, "floats", (double)r->floats);
    cJSON_AddNumberToObject(in, "stages", (double)r->stages);
    cJSON_AddNumberToObject(in, "flops_per_sample", r->flops_sample);
    cJSON_AddStringToObject(in, "task", dd_train_task_name(c->task));
    cJSON_AddStringToObject(in, "opt", dd_optim_kind_name(c->opt));
    cJSON_AddNumberToObject(in, "batch", (double)c->batch);
    cJSON_AddNumberToObject(in, "frame", (double)c->frame);
    cJSON_AddNumberToObject(in, "frames", (double)c->frames);
    if (c->micro < 0) cJSON_AddStringToObject(in, "micro", "auto");
    else cJSON_AddNumberToObject(in, "micro", c->micro);
    cJSON_AddStringToObject(in, "schedule", dd_pp_kind_name(c->schedule));
    cJSON_AddNumberToObject(in, "virtual", c->virt);
    cJSON_AddStringToObject(in, "allreduce", dd_allreduce_name(c->algo));
    cJSON_AddNumberToObject(in, "bucket_mb", c->bucket_mb);
    cJSON_AddNumberToObject(cl, "nodes", c->cluster.nodes);
    cJSON_AddNumberToObject(cl, "ranks_per_node", c->cluster.ranks_per_node);
    cJSON_AddNumberToObject(cl, "ranks", r->ranks);
    cJSON_AddNumberToObject(cl, "memory_bytes", c->cluster.memory_bytes);
    cJSON_AddNumberToObject(cl, "gflops", c->cluster.gflops);
    for (int w = 0; w < 2; w++) {
        const dd_link *l = w ? &c->cluster.inter : &c->cluster.intra;
        cJSON *o = cJSON_AddObjectToObject(cl, w ? "inter_link" : "intra_link");
        if (!o) goto nomem;
        cJSON_AddStringToObject(o, "name", w ? c->cluster.inter_name : c->cluster.intra_name);
        cJSON_AddNumberToObject(o, "alpha_s", l->alpha);
        cJSON_AddNumberToObject(o, "beta_s_per_byte", l->beta);
        cJSON_AddNumberToObject(o, "alpha_oneway_s", l->alpha1);
        cJSON_AddNumberToObject(o, "beta_oneway_s_per_byte", l->beta1);
        cJSON_AddNumberToObject(o, "gamma_s_per_byte", l->gamma);
    }
    for (size_t i = 0; i < r->nrows; i++) {
        const dd_plan_mp_layout *o = &r->rows[i];
        cJSON *j = cJSON_CreateObject(), *mem;
        if (!j) goto nomem;
        cJSON_AddItemToArray(arr, j);
        cJSON_AddNumberToObject(j, "rank", o->rank);
        cJSON_AddNumberToObject(j, "tp", o->tp);
        cJSON_AddNumberToObject(j, "pp", o->pp);
        cJSON_AddNumberToObject(j, "dp", o->dp);
        cJSON_AddStringToObject(j, "shard", dd_shard_name(o->shard));
        cJSON_AddNumberToObject(j, "micro", o->micro);
        cJSON_AddStringToObject(j, "strategy", o->strategy ? o->strategy : "");
        cJSON_AddBoolToObject(j, "fits", o->fits != 0);
        cJSON_AddNumberToObject(j, "step_s", o->step_s);
        cJSON_AddNumberToObject(j, "compute_s", o->compute_s);
        cJSON_AddNumberToObject(j, "tp_s", o->tp_s);
        cJSON_AddNumberToObject(j, "bubble_s", o->bubble_s);
        cJSON_AddNumberToObject(j, "msg_s", o->msg_s);
        cJSON_AddNumberToObject(j, "dp_s", o->dp_s);
        cJSON_AddNumberToObject(j, "small_s", o->small_s);
        cJSON_AddNumberToObject(j, "bubble", o->bubble);
        cJSON_AddNumberToObject(j, "bubble_formula", o->bubble_formula);
        cJSON_AddNumberToObject(j, "tp_calls", o->tp_calls);
        cJSON_AddNumberToObject(j, "tp_bytes", o->tp_bytes);
        cJSON_AddNumberToObject(j, "msg_bytes", o->msg_bytes);
        cJSON_AddNumberToObject(j, "dp_bytes", o->dp_bytes);
        cJSON_AddBoolToObject(j, "tp_across_nodes", o->tp_inter != 0);
        cJSON_AddBoolToObject(j, "pp_across_nodes", o->pp_inter != 0);
        cJSON_AddBoolToObject(j, "dp_across_nodes", o->dp_inter != 0);
        cJSON_AddNumberToObject(j, "rank_params", (double)o->rank_params);
        mem = cJSON_AddObjectToObject(j, "memory_bytes");
        if (!mem) goto nomem;
        cJSON_AddNumberToObject(mem, "world_rank", o->mem_rank);
        for (int k = 0; k < DD_MEM_KINDS; k++) cJSON_AddNumberToObject(mem, dd_mem_kind_name((dd_mem_kind)k), (double)o->mem[k]);
        cJSON_AddNumberToObject(mem, "total", (double)o->mem_total);
        cJSON_AddNumberToObject(mem, "peak", (double)o->mem_peak);
    }
    cJSON_AddNumberToObject(root, "best", r->best);
    {
        cJSON *sk = cJSON_AddArrayToObject(root, "skipped");
        for (int i = 0; sk && i < r->nskipped && i < 8; i++) cJSON_AddItemToArray(sk, cJSON_CreateString(r->skipped[i]));
        const size_t n = dd_plan_mp_explain(r, NULL, 0) + 1;
        char *text = malloc(n), *line, *save = NULL;
        if (!text) goto nomem;
        dd_plan_mp_explain(r, text, n);
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            cJSON_AddItemToArray(ex, cJSON_CreateString(line));
        free(text);
    }
    *json = cJSON_Print(root);
    cJSON_Delete(root);
    if (!*json) return dd_error(DD_ERR_NOMEM, "dd_plan_mp_json: out of memory");
    return DD_OK;
nomem:
    cJSON_Delete(root);
    return dd_error(DD_ERR_NOMEM, "dd_plan_mp_json: out of memory");
}

/* ---- measuring the compute speed -------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

dd_status dd_plan_measure_compute(const dd_model *m, int B, int T, int reps, double *seconds, double *gflops) {
    if (!m || !seconds || !gflops) return dd_error(DD_ERR_ARG, "dd_plan_measure_compute: NULL argument");
    if (B < 1 || T < 1 || reps < 1 || reps > 1000)
        return dd_error(DD_ERR_ARG, "dd_plan_measure_compute: B = %d, T = %d (>= 1), reps = %d (in [1, 1000])", B, T, reps);
    const size_t n = dd_model_params(m)->total, io = (size_t)B * (size_t)T * 2;
    const size_t wsn = dd_model_workspace_size(m, B, T);
    float *p = dd_calloc(n, sizeof(float)), *g = dd_calloc(n, sizeof(float)), *ws = dd_calloc(wsn ? wsn : 1, sizeof(float));
    float *x = dd_calloc(io, sizeof(float)), *y = dd_calloc(io, sizeof(float)), *dy = dd_calloc(io, sizeof(float));
    double *t = calloc((size_t)reps, sizeof *t);
    dd_status st = DD_OK;
    if (!p || !g || !ws || !x || !y || !dy || !t) {
        st = dd_error(DD_ERR_NOMEM, "measuring the compute: out of memory for %zu parameters and a workspace of %zu floats",
                      n, wsn);
        goto done;
    }
    st = dd_model_init(m, p, 1);
    dd_rng rng;
    dd_rng_seed(&rng, 12345);
    for (size_t i = 0; st == DD_OK && i < io; i++) {
        x[i] = (float)(0.3 * dd_rng_normal(&rng));
        dy[i] = (float)(1e-3 * dd_rng_normal(&rng));
    }
    for (int k = -1; st == DD_OK && k < reps; k++) {
        const double t0 = now_s();
        st = dd_model_forward(m, p, x, y, B, T, ws);
        if (st == DD_OK) st = dd_model_backward(m, p, g, x, dy, NULL, B, T, ws);
        if (k >= 0) t[k] = now_s() - t0;
    }
    if (st == DD_OK) {
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        *seconds = t[reps / 2];
        *gflops = flops_sample(m, NULL, NULL) * (double)B * (double)T / *seconds / 1e9;
    } else {
        st = dd_error_prefix(st, "measuring the compute: ");
    }
done:
    dd_free(p);
    dd_free(g);
    dd_free(ws);
    dd_free(x);
    dd_free(y);
    dd_free(dy);
    free(t);
    return st;
}
