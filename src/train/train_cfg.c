/* Training configuration (train.h): defaults (distdpd's GRU recipe, docs/training.md), range checks
 * and the JSON form stored in config.json and in checkpoints (exact round trip). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "distdpd/train.h"
#include "train_internal.h"

static const char *const k_tasks[] = {"pa", "dla", "ila"};

dd_status dd_train_task_parse(const char *name, dd_train_task *task) {
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, k_tasks[i]) == 0) {
            *task = (dd_train_task)i;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG, "unknown training task '%s' (expected pa, dla or ila)", name ? name : "(null)");
}

const char *dd_train_task_name(dd_train_task task) {
    return (int)task >= 0 && (int)task < 3 ? k_tasks[task] : "?";
}

void dd_train_cfg_default(dd_train_cfg *c, dd_train_task task) {
    memset(c, 0, sizeof *c);
    c->task = task;
    snprintf(c->model, sizeof c->model, "gru");
    /* model_cfg all 0: the model's defaults (gru: hidden 23) */
    c->frame = 200;
    c->stride = 1;
    c->batch = 64;
    c->epochs = 20;
    snprintf(c->opt, sizeof c->opt, "adamw");
    c->optim = dd_optim_cfg_default(DD_OPTIM_ADAMW);
    c->lr = 5e-3;
    c->optim.lr = c->lr;
    c->sched = dd_lr_cfg_default(DD_LR_PLATEAU, c->lr);
    c->sched.factor = 0.5;
    c->sched.patience = 5;
    c->sched.min_lr = 5e-5;
    c->sched.t_max = 0; /* cosine: 0 = the whole run (resolved at create) */
    c->clip = 200.0;
    c->seed = 0;
    c->shuffle = 1;
    c->eval_batch = 16;
    c->gain = 0.0;
    c->gain_mode = 0;
    c->ckpt_every = 0;
    c->ckpt_every_s = 0.0;
    c->keep_last = 1;
    c->eval_test = 1;
    c->select_true = 0;
}

static dd_status bad_size(const char *field, size_t v, size_t lo, size_t hi) {
    return dd_error(DD_ERR_ARG, "training config: %s = %zu is out of range [%zu, %zu]", field, v, lo, hi);
}

dd_status dd_train_cfg_check(const dd_train_cfg *c) {
    if (!c) return dd_error(DD_ERR_ARG, "training config: NULL");
    if ((int)c->task < 0 || (int)c->task > 2)
        return dd_error(DD_ERR_ARG, "training config: task = %d is not pa, dla or ila", (int)c->task);
    if (c->model[0] == '\0' || memchr(c->model, '\0', sizeof c->model) == NULL)
        return dd_error(DD_ERR_ARG, "training config: model name is empty or too long");
    if (c->frame < 1 || c->frame > ((size_t)1 << 20)) return bad_size("frame", c->frame, 1, (size_t)1 << 20);
    if (c->stride < 1 || c->stride > ((size_t)1 << 20)) return bad_size("stride", c->stride, 1, (size_t)1 << 20);
    if (c->batch < 1 || c->batch > ((size_t)1 << 20)) return bad_size("batch", c->batch, 1, (size_t)1 << 20);
    if (c->frame * c->batch > ((size_t)1 << 28))
        return dd_error(DD_ERR_ARG, "training config: frame * batch = %zu exceeds 2^28 samples per step",
                        c->frame * c->batch);
    if (c->epochs < 1 || c->epochs > 100000)
        return dd_error(DD_ERR_ARG, "training config: epochs = %d is out of range [1, 100000]", c->epochs);
    dd_optim_kind k;
    DD_TRY(dd_optim_kind_parse(c->opt, &k));
    if (!isfinite(c->lr) || c->lr <= 0)
        return dd_error(DD_ERR_ARG, "training config: lr = %g must be finite and > 0", c->lr);
    if (!isfinite(c->clip) || c->clip < 0)
        return dd_error(DD_ERR_ARG, "training config: clip = %g must be finite and >= 0 (0 = off)", c->clip);
    if (c->eval_batch < 1 || c->eval_batch > 4096) return bad_size("eval_batch", c->eval_batch, 1, 4096);
    if (!isfinite(c->gain) || c->gain < 0)
        return dd_error(DD_ERR_ARG, "training config: gain = %g must be finite and >= 0 (0 = automatic)", c->gain);
    if (!isfinite(c->ckpt_every_s) || c->ckpt_every_s < 0 || c->ckpt_every_s > 1e9)
        return dd_error(DD_ERR_ARG, "training config: ckpt_every_s = %g must be in [0, 1e9] seconds (0 = off)",
                        c->ckpt_every_s);
    if (c->keep_last < 1 || c->keep_last > 1000000) return bad_size("keep_last", c->keep_last, 1, 1000000);
    if (c->loss != 0 && c->loss != 1)
        return dd_error(DD_ERR_ARG, "training config: loss = %d (expected 0 = l2, 1 = l1)", c->loss);
    if (c->gain_mode != 0 && c->gain_mode != 1)
        return dd_error(DD_ERR_ARG, "training config: gain_mode = %d (expected 0 = max, 1 = ls)", c->gain_mode);
    /* optimiser and schedule: validated by their own modules */
    dd_optim_cfg oc = c->optim;
    oc.lr = c->lr;
    dd_optim *o = NULL;
    dd_status st = dd_optim_create(c->opt, &oc, 1, &o);
    dd_optim_destroy(&o);
    if (st != DD_OK) return dd_error_prefix(st, "training config: ");
    dd_lr_cfg sc = c->sched;
    sc.base_lr = c->lr;
    if (sc.t_max == 0) sc.t_max = 1;
    dd_lr_sched s;
    if ((st = dd_lr_sched_init(&s, &sc)) != DD_OK) return dd_error_prefix(st, "training config: ");
    return DD_OK;
}

/* ---------------------------------------------------------------- JSON */

static void add_num(cJSON *o, const char *k, double v) {
    /* cJSON prints with up to 17 digits when 15 do not round-trip */
    cJSON_AddNumberToObject(o, k, v);
}

static void add_u64(cJSON *o, const char *k, uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    cJSON_AddStringToObject(o, k, buf);
}

cJSON *dd_train_cfg_json_obj(const dd_train_cfg *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "task", dd_train_task_name(c->task));
    cJSON_AddStringToObject(o, "model", c->model);
    cJSON *mo = cJSON_AddObjectToObject(o, "model_opts"); /* the options the model declares */
    for (int i = 0; mo && i < c->model_cfg.n; i++) add_num(mo, c->model_cfg.v[i].name, c->model_cfg.v[i].value);
    add_num(o, "frame", (double)c->frame);
    add_num(o, "stride", (double)c->stride);
    add_num(o, "batch", (double)c->batch);
    add_num(o, "epochs", c->epochs);
    cJSON_AddStringToObject(o, "opt", c->opt);
    add_num(o, "lr", c->lr);
    add_num(o, "momentum", c->optim.momentum);
    add_num(o, "dampening", c->optim.dampening);
    add_num(o, "nesterov", c->optim.nesterov);
    add_num(o, "beta1", c->optim.beta1);
    add_num(o, "beta2", c->optim.beta2);
    add_num(o, "eps", c->optim.eps);
    add_num(o, "alpha", c->optim.alpha);
    add_num(o, "weight_decay", c->optim.weight_decay);
    cJSON_AddStringToObject(o, "lr_schedule", dd_lr_kind_name((dd_lr_kind)c->sched.kind));
    add_num(o, "warmup", (double)c->sched.warmup);
    add_num(o, "warmup_start", c->sched.warmup_start);
    add_num(o, "step_size", (double)c->sched.step_size);
    add_num(o, "gamma", c->sched.gamma);
    add_num(o, "t_max", (double)c->sched.t_max);
    add_num(o, "eta_min", c->sched.eta_min);
    add_num(o, "plateau_mode_max", (double)c->sched.mode_max);
    add_num(o, "plateau_threshold_abs", (double)c->sched.threshold_abs);
    add_num(o, "plateau_factor", c->sched.factor);
    add_num(o, "plateau_patience", (double)c->sched.patience);
    add_num(o, "plateau_threshold", c->sched.threshold);
    add_num(o, "plateau_cooldown", (double)c->sched.cooldown);
    add_num(o, "min_lr", c->sched.min_lr);
    add_num(o, "plateau_eps", c->sched.plateau_eps);
    add_num(o, "clip", c->clip);
    add_u64(o, "seed", c->seed);
    add_num(o, "shuffle", c->shuffle);
    add_num(o, "eval_batch", (double)c->eval_batch);
    add_num(o, "gain", c->gain);
    cJSON_AddStringToObject(o, "gain_mode", c->gain_mode ? "ls" : "max");
    add_u64(o, "ckpt_every", c->ckpt_every);
    add_num(o, "ckpt_every_s", c->ckpt_every_s);
    add_num(o, "keep_last", (double)c->keep_last);
    add_num(o, "eval_test", c->eval_test);
    add_num(o, "select_true", c->select_true);
    cJSON_AddStringToObject(o, "loss", c->loss ? "l1" : "l2");
    return o;
}

dd_status dd_train_cfg_to_json(const dd_train_cfg *c, char **json) {
    *json = NULL;
    cJSON *o = dd_train_cfg_json_obj(c);
    if (!o) return dd_error(DD_ERR_NOMEM, "out of memory building the configuration JSON");
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!txt) return dd_error(DD_ERR_NOMEM, "out of memory printing the configuration JSON");
    size_t n = strlen(txt);
    *json = dd_calloc(n + 1, 1);
    if (*json) memcpy(*json, txt, n + 1);
    cJSON_free(txt);
    return *json ? DD_OK : DD_ERR_NOMEM;
}

/* Readers: a missing key keeps the default; a present key of the wrong type is an error. */
static dd_status get_num(const cJSON *o, const char *where, const char *k, double *v) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!j) return DD_OK;
    if (!cJSON_IsNumber(j)) return dd_error(DD_ERR_FORMAT, "%s: key '%s' is not a number", where, k);
    *v = j->valuedouble;
    return DD_OK;
}

static dd_status get_int(const cJSON *o, const char *where, const char *k, int *v) {
    double d = *v;
    DD_TRY(get_num(o, where, k, &d));
    if (!(d >= -2147483648.0 && d <= 2147483647.0) || d != floor(d))
        return dd_error(DD_ERR_FORMAT, "%s: key '%s' = %g is not an integer", where, k, d);
    *v = (int)d;
    return DD_OK;
}

static dd_status get_i64(const cJSON *o, const char *where, const char *k, int64_t *v) {
    double d = (double)*v;
    DD_TRY(get_num(o, where, k, &d));
    if (!(d >= -9e15 && d <= 9e15) || d != floor(d))
        return dd_error(DD_ERR_FORMAT, "%s: key '%s' = %g is not an integer", where, k, d);
    *v = (int64_t)d;
    return DD_OK;
}

static dd_status get_size(const cJSON *o, const char *where, const char *k, size_t *v) {
    double d = (double)*v;
    DD_TRY(get_num(o, where, k, &d));
    if (!(d >= 0 && d <= 9e15) || d != floor(d))
        return dd_error(DD_ERR_FORMAT, "%s: key '%s' = %g is not a non-negative integer", where, k, d);
    *v = (size_t)d;
    return DD_OK;
}

static dd_status get_str(const cJSON *o, const char *where, const char *k, const char **v) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!j) return DD_OK;
    if (!cJSON_IsString(j)) return dd_error(DD_ERR_FORMAT, "%s: key '%s' is not a string", where, k);
    *v = j->valuestring;
    return DD_OK;
}

static dd_status get_u64s(const cJSON *o, const char *where, const char *k, uint64_t *v) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!j) return DD_OK;
    if (cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= 9e15 && j->valuedouble == floor(j->valuedouble)) {
        *v = (uint64_t)j->valuedouble;
        return DD_OK;
    }
    if (cJSON_IsString(j)) {
        char *end;
        unsigned long long u = strtoull(j->valuestring, &end, 10);
        if (end != j->valuestring && *end == '\0' && j->valuestring[0] != '-') {
            *v = (uint64_t)u;
            return DD_OK;
        }
    }
    return dd_error(DD_ERR_FORMAT, "%s: key '%s' is not a non-negative integer", where, k);
}

dd_status dd_train_cfg_from_obj(const cJSON *o, const char *where, dd_train_cfg *c) {
    if (!cJSON_IsObject(o)) return dd_error(DD_ERR_FORMAT, "%s: the configuration is not a JSON object", where);
    const char *s = NULL;
    DD_TRY(get_str(o, where, "task", &s));
    dd_train_task task = DD_TRAIN_PA;
    if (s && dd_train_task_parse(s, &task) != DD_OK) return dd_error(DD_ERR_FORMAT, "%s: key 'task': unknown task '%s'", where, s);
    dd_train_cfg_default(c, task);
    s = NULL;
    DD_TRY(get_str(o, where, "model", &s));
    if (s) {
        if (strlen(s) >= sizeof c->model) return dd_error(DD_ERR_FORMAT, "%s: key 'model' is too long", where);
        snprintf(c->model, sizeof c->model, "%s", s);
    }
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(o, "model_opts");
    if (mo) {
        if (!cJSON_IsObject(mo)) return dd_error(DD_ERR_FORMAT, "%s: key 'model_opts' is not an object", where);
        for (const cJSON *x = mo->child; x; x = x->next) {
            int v = 0;
            DD_TRY(get_int(mo, where, x->string, &v));
            if (dd_model_cfg_set(&c->model_cfg, x->string, v) != DD_OK)
                return dd_error_prefix(DD_ERR_FORMAT, "%s: key 'model_opts': ", where);
        }
    } else {
        /* written before models declared their own options: six flat keys, 0 = unused */
        static const char *const legacy[] = {"hidden", "layers", "memory", "order", "kernel", "cross"};
        for (size_t k = 0; k < sizeof legacy / sizeof legacy[0]; k++) {
            int v = 0;
            DD_TRY(get_int(o, where, legacy[k], &v));
            if (v) DD_TRY(dd_model_cfg_set(&c->model_cfg, legacy[k], v));
        }
    }
    DD_TRY(get_size(o, where, "frame", &c->frame));
    DD_TRY(get_size(o, where, "stride", &c->stride));
    DD_TRY(get_size(o, where, "batch", &c->batch));
    DD_TRY(get_int(o, where, "epochs", &c->epochs));
    s = NULL;
    DD_TRY(get_str(o, where, "opt", &s));
    if (s) {
        dd_optim_kind k;
        if (dd_optim_kind_parse(s, &k) != DD_OK) return dd_error(DD_ERR_FORMAT, "%s: key 'opt': unknown optimiser '%s'", where, s);
        snprintf(c->opt, sizeof c->opt, "%s", s);
        c->optim = dd_optim_cfg_default(k);
    }
    DD_TRY(get_num(o, where, "lr", &c->lr));
    c->optim.lr = c->lr;
    DD_TRY(get_num(o, where, "momentum", &c->optim.momentum));
    DD_TRY(get_num(o, where, "dampening", &c->optim.dampening));
    DD_TRY(get_int(o, where, "nesterov", &c->optim.nesterov));
    DD_TRY(get_num(o, where, "beta1", &c->optim.beta1));
    DD_TRY(get_num(o, where, "beta2", &c->optim.beta2));
    DD_TRY(get_num(o, where, "eps", &c->optim.eps));
    DD_TRY(get_num(o, where, "alpha", &c->optim.alpha));
    DD_TRY(get_num(o, where, "weight_decay", &c->optim.weight_decay));
    s = NULL;
    DD_TRY(get_str(o, where, "lr_schedule", &s));
    if (s) {
        dd_lr_kind k;
        if (dd_lr_kind_parse(s, &k) != DD_OK) return dd_error(DD_ERR_FORMAT, "%s: key 'lr_schedule': unknown schedule '%s'", where, s);
        c->sched.kind = k;
    }
    DD_TRY(get_i64(o, where, "warmup", &c->sched.warmup));
    DD_TRY(get_num(o, where, "warmup_start", &c->sched.warmup_start));
    DD_TRY(get_i64(o, where, "step_size", &c->sched.step_size));
    DD_TRY(get_num(o, where, "gamma", &c->sched.gamma));
    DD_TRY(get_i64(o, where, "t_max", &c->sched.t_max));
    DD_TRY(get_num(o, where, "eta_min", &c->sched.eta_min));
    DD_TRY(get_i64(o, where, "plateau_mode_max", &c->sched.mode_max));
    DD_TRY(get_i64(o, where, "plateau_threshold_abs", &c->sched.threshold_abs));
    DD_TRY(get_num(o, where, "plateau_factor", &c->sched.factor));
    DD_TRY(get_i64(o, where, "plateau_patience", &c->sched.patience));
    DD_TRY(get_num(o, where, "plateau_threshold", &c->sched.threshold));
    DD_TRY(get_i64(o, where, "plateau_cooldown", &c->sched.cooldown));
    DD_TRY(get_num(o, where, "min_lr", &c->sched.min_lr));
    DD_TRY(get_num(o, where, "plateau_eps", &c->sched.plateau_eps));
    c->sched.base_lr = c->lr;
    DD_TRY(get_num(o, where, "clip", &c->clip));
    DD_TRY(get_u64s(o, where, "seed", &c->seed));
    DD_TRY(get_int(o, where, "shuffle", &c->shuffle));
    DD_TRY(get_size(o, where, "eval_batch", &c->eval_batch));
    DD_TRY(get_num(o, where, "gain", &c->gain));
    s = NULL;
    DD_TRY(get_str(o, where, "gain_mode", &s));
    if (s) {
        if (strcmp(s, "max") == 0) c->gain_mode = 0;
        else if (strcmp(s, "ls") == 0) c->gain_mode = 1;
        else return dd_error(DD_ERR_FORMAT, "%s: key 'gain_mode': expected max or ls, got '%s'", where, s);
    }
    s = NULL;
    DD_TRY(get_str(o, where, "loss", &s)); /* absent (older runs): l2 */
    if (s) {
        if (strcmp(s, "l2") == 0) c->loss = 0;
        else if (strcmp(s, "l1") == 0) c->loss = 1;
        else return dd_error(DD_ERR_FORMAT, "%s: key 'loss': expected l2 or l1, got '%s'", where, s);
    }
    DD_TRY(get_u64s(o, where, "ckpt_every", &c->ckpt_every));
    DD_TRY(get_num(o, where, "ckpt_every_s", &c->ckpt_every_s));
    DD_TRY(get_size(o, where, "keep_last", &c->keep_last));
    DD_TRY(get_int(o, where, "eval_test", &c->eval_test));
    DD_TRY(get_int(o, where, "select_true", &c->select_true));
    dd_status st = dd_train_cfg_check(c);
    if (st != DD_OK) return dd_error_prefix(st, "%s: ", where);
    return DD_OK;
}

dd_status dd_train_cfg_from_json(const char *json, const char *where, dd_train_cfg *c) {
    if (!json) return dd_error(DD_ERR_ARG, "%s: no configuration text", where);
    cJSON *o = cJSON_Parse(json);
    if (!o) return dd_error(DD_ERR_FORMAT, "%s: the configuration is not valid JSON", where);
    dd_train_cfg tmp;
    dd_status st = dd_train_cfg_from_obj(o, where, &tmp);
    cJSON_Delete(o);
    if (st == DD_OK) *c = tmp;
    return st;
}
