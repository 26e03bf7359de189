/* Trainer checkpoints (train.h, format in docs/training.md): every section needed to
 * continue a run bit for bit - configuration, model name, configuration and parameter
 * table, parameters, optimiser state, schedule, step, epoch, data cursor, RNG, epoch
 * accumulators, best epoch, history and, for DPDs, the frozen PA model - in the
 * sectioned CRC32C container of ckpt.h, written atomically. Loading checks everything
 * before it changes the trainer, so a refused file leaves it untouched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/train.h"
#include "train_internal.h"

/* ---------------------------------------------------------------- records, spec */

void dd_rec_pack(const dd_epoch_record *r, double *v) {
    memset(v, 0, DD_REC_FIELDS * sizeof(double));
    v[0] = r->epoch;
    v[1] = (double)r->step;
    v[2] = r->time_s;
    v[3] = r->eval_time_s;
    v[4] = r->lr;
    v[5] = r->train_loss;
    v[6] = r->has_true;
    v[7] = r->best;
    v[32] = r->grad_norm_max;
    v[33] = r->comm_bytes_per_step;
    v[34] = r->compression_ratio;
    v[35] = r->compress_time_s;
    v[36] = r->world_size;
    v[37] = r->restart;
    v[38] = r->ckpt_stall_s;
    v[39] = r->ckpt_write_s;
    v[DD_REC_FLAGS] = DD_REC_FLAG_COMM_EXACT + DD_REC_FLAG_FT;
    const dd_eval_metrics *ms[4] = {&r->val, &r->test, &r->true_val, &r->true_test};
    for (int k = 0; k < 4; k++) {
        double *p = v + 8 + 6 * k;
        p[0] = ms[k]->loss;
        p[1] = ms[k]->nmse_db;
        p[2] = ms[k]->aclr.left_db;
        p[3] = ms[k]->aclr.right_db;
        p[4] = ms[k]->aclr.avg_db;
        p[5] = ms[k]->evm_db;
    }
}

void dd_rec_unpack(const double *v, dd_epoch_record *r) {
    memset(r, 0, sizeof *r);
    r->epoch = (int)v[0];
    r->step = (uint64_t)v[1];
    r->time_s = v[2];
    r->eval_time_s = v[3];
    r->lr = v[4];
    r->train_loss = v[5];
    r->has_true = (int)v[6];
    r->best = (int)v[7];
    r->grad_norm_max = v[32];
    const double flags = v[DD_REC_FLAGS];
    if (flags == DD_REC_FLAG_COMM_EXACT + DD_REC_FLAG_FT) {
        r->world_size = (int)v[36];
        r->restart = (int)v[37];
        r->ckpt_stall_s = v[38];
        r->ckpt_write_s = v[39];
    } else {
        r->world_size = 0;
        r->restart = 0;
        r->ckpt_stall_s = r->ckpt_write_s = NAN;
    }
    if (flags == DD_REC_FLAG_COMM_EXACT || flags == DD_REC_FLAG_COMM_EXACT + DD_REC_FLAG_FT) {
        /* NaN = not recorded; 0 is a value (one process) */
        r->comm_bytes_per_step = v[33];
        r->compression_ratio = v[34];
        r->compress_time_s = v[35];
    } else { /* checkpoints before these fields hold 0 there: read as "not recorded" */
        r->comm_bytes_per_step = v[33] != 0 ? v[33] : NAN;
        r->compression_ratio = v[34] != 0 ? v[34] : NAN;
        r->compress_time_s = v[35] != 0 ? v[35] : NAN;
    }
    dd_eval_metrics *ms[4] = {&r->val, &r->test, &r->true_val, &r->true_test};
    for (int k = 0; k < 4; k++) {
        const double *p = v + 8 + 6 * k;
        ms[k]->loss = p[0];
        ms[k]->nmse_db = p[1];
        ms[k]->aclr.left_db = p[2];
        ms[k]->aclr.right_db = p[3];
        ms[k]->aclr.avg_db = p[4];
        ms[k]->evm_db = p[5];
    }
}

void dd_spec_pack(const dd_spec *s, double v[9]) {
    v[0] = s->fs;
    v[1] = s->bw_main;
    v[2] = s->bw_sub;
    v[3] = s->n_sub;
    v[4] = (double)s->nperseg;
    v[5] = s->bw_occupied;
    v[6] = s->split[0];
    v[7] = s->split[1];
    v[8] = s->split[2];
}

void dd_spec_unpack(const double v[9], dd_spec *s) {
    memset(s, 0, sizeof *s);
    s->fs = v[0];
    s->bw_main = v[1];
    s->bw_sub = v[2];
    s->n_sub = (int)v[3];
    s->nperseg = (size_t)v[4];
    s->bw_occupied = v[5];
    s->split[0] = v[6];
    s->split[1] = v[7];
    s->split[2] = v[8];
}

/* ---------------------------------------------------------------- identity */

void dd_trainer_set_identity(dd_trainer *tr, const char *run_id, const uint64_t data_id[DD_DATA_ID_N]) {
    if (!tr) return;
    if (run_id) snprintf(tr->run_id, sizeof tr->run_id, "%s", run_id);
    if (data_id) {
        memcpy(tr->data_id, data_id, sizeof tr->data_id);
        tr->has_data_id = 1;
    }
}

void dd_train_data_id(const dd_dataset *ds, uint64_t id[DD_DATA_ID_N]) {
    for (int k = 0; k < 3; k++) {
        const size_t n = ds->n[k];
        uint64_t h = dd_hash64(0x6464706464617461ull + (uint64_t)k, (uint64_t)n);
        for (size_t i = 0; i < n; i++) {
            uint64_t a, b;
            memcpy(&a, &ds->in[k][i], sizeof a);
            memcpy(&b, &ds->out[k][i], sizeof b);
            h = dd_hash64(h ^ a, b);
        }
        id[k] = (uint64_t)n;
        id[3 + k] = h;
    }
}

/* ---------------------------------------------------------------- model sections */

static dd_status get_sized(const dd_ckpt_reader *r, const char *path, const char *name, size_t want, const void **d) {
    size_t bytes;
    DD_TRY(dd_ckpt_get(r, name, d, &bytes));
    if (bytes != want)
        return dd_error(DD_ERR_FORMAT, "%s: section '%s' has %zu bytes, expected %zu", path, name, bytes, want);
    return DD_OK;
}

#define TABLE_ENTRY_BYTES (DD_PARAM_NAME_MAX + 7 * 8)

/* The model's options of a checkpoint: section "<prefix>model_opts" ("name=value,...");
 * checkpoints written before the models declared their own options hold
 * "<prefix>model_cfg" instead: six int64 (hidden, layers, memory, order, kernel, cross;
 * 0 = unused by the model), read here only. */
static dd_status read_model_opts(const dd_ckpt_reader *r, const char *path, const char *prefix, dd_model_cfg *c) {
    char name[64];
    memset(c, 0, sizeof *c);
    snprintf(name, sizeof name, "%smodel_opts", prefix);
    if (dd_ckpt_has(r, name)) {
        const char *txt;
        DD_TRY(dd_ckpt_get_str(r, name, &txt));
        dd_status st = dd_model_cfg_parse(c, txt);
        if (st != DD_OK) return dd_error_prefix(DD_ERR_FORMAT, "%s: section '%s': ", path, name);
        return DD_OK;
    }
    static const char *const legacy[6] = {"hidden", "layers", "memory", "order", "kernel", "cross"};
    const void *d;
    size_t bytes;
    snprintf(name, sizeof name, "%smodel_cfg", prefix);
    DD_TRY(dd_ckpt_get(r, name, &d, &bytes));
    if (bytes != 6 * sizeof(int64_t))
        return dd_error(DD_ERR_FORMAT, "%s: section '%s' has %zu bytes, expected %zu", path, name, bytes,
                        6 * sizeof(int64_t));
    int64_t cv[6];
    memcpy(cv, d, sizeof cv);
    for (int k = 0; k < 6; k++) {
        if (cv[k] < 0 || cv[k] > 1000000000)
            return dd_error(DD_ERR_FORMAT, "%s: section '%s' holds an invalid value %lld", path, name, (long long)cv[k]);
        if (cv[k]) DD_TRY(dd_model_cfg_set(c, legacy[k], (int)cv[k]));
    }
    return DD_OK;
}

static dd_status add_model(dd_ckpt_writer *w, const char *prefix, const dd_model *m, const float *params) {
    char name[64], opts[1024];
    const dd_param_table *t = dd_model_params(m);
    snprintf(name, sizeof name, "%smodel", prefix);
    DD_TRY(dd_ckpt_add_str(w, name, dd_model_name(m)));
    if (dd_model_cfg_format(dd_model_config(m), opts, sizeof opts) >= sizeof opts)
        return dd_error(DD_ERR_INTERNAL, "model %s: its options do not fit %zu characters", dd_model_name(m), sizeof opts);
    snprintf(name, sizeof name, "%smodel_opts", prefix);
    DD_TRY(dd_ckpt_add_str(w, name, opts));
    size_t bytes = 16 + t->count * TABLE_ENTRY_BYTES;
    unsigned char *buf = calloc(1, bytes);
    if (!buf) return dd_error(DD_ERR_NOMEM, "out of memory serialising the parameter table");
    uint64_t hdr[2] = {t->count, t->total};
    memcpy(buf, hdr, 16);
    for (size_t i = 0; i < t->count; i++) {
        const dd_param_entry *e = &t->entries[i];
        unsigned char *p = buf + 16 + i * TABLE_ENTRY_BYTES;
        memcpy(p, e->name, DD_PARAM_NAME_MAX);
        uint64_t v[7] = {(uint64_t)e->ndim, e->shape[0], e->shape[1], e->shape[2], e->shape[3], e->offset, e->size};
        memcpy(p + DD_PARAM_NAME_MAX, v, sizeof v);
    }
    snprintf(name, sizeof name, "%sparam_table", prefix);
    dd_status st = dd_ckpt_add(w, name, buf, bytes);
    free(buf);
    DD_TRY(st);
    snprintf(name, sizeof name, "%sparams", prefix);
    return dd_ckpt_add(w, name, params, t->total * sizeof(float));
}

/* Checks that the model sections under prefix describe model m exactly. */
dd_status dd_train_ckpt_check_model(const dd_ckpt_reader *r, const char *path, const char *prefix, const dd_model *m,
                                    const float **params) {
    char name[64];
    const char *mname;
    snprintf(name, sizeof name, "%smodel", prefix);
    DD_TRY(dd_ckpt_get_str(r, name, &mname));
    if (strcmp(mname, dd_model_name(m)) != 0)
        return dd_error(DD_ERR_MISMATCH, "%s: the checkpoint holds a '%s' %s, not '%s'", path, mname,
                        *prefix ? "PA model" : "model", dd_model_name(m));
    const void *d;
    size_t bytes;
    /* every option the model declares: the checkpoint's value, or the model's default
     * where the checkpoint predates the option */
    dd_model_cfg cc;
    DD_TRY(read_model_opts(r, path, prefix, &cc));
    const dd_model_info *info = dd_model_find(dd_model_name(m));
    const dd_model_cfg *mc = dd_model_config(m);
    for (size_t k = 0; info && info->opts && info->opts[k].name; k++) {
        const char *o = info->opts[k].name;
        int fv = dd_model_cfg_get(&cc, o), mv = dd_model_cfg_get(mc, o);
        if (fv == 0) fv = info->opts[k].def;
        if (fv != mv)
            return dd_error(DD_ERR_MISMATCH, "%s: %s '%s' was saved with %s = %d, this one has %s = %d", path,
                            *prefix ? "PA model" : "model", mname, o, fv, o, mv);
    }
    for (int i = 0; i < cc.n; i++)
        if (dd_model_cfg_get(mc, cc.v[i].name) == 0)
            return dd_error(DD_ERR_MISMATCH, "%s: %s '%s' was saved with option %s = %d, which this one does not have",
                            path, *prefix ? "PA model" : "model", mname, cc.v[i].name, cc.v[i].value);
    const dd_param_table *t = dd_model_params(m);
    snprintf(name, sizeof name, "%sparam_table", prefix);
    DD_TRY(dd_ckpt_get(r, name, &d, &bytes));
    uint64_t hdr[2];
    if (bytes < 16) return dd_error(DD_ERR_FORMAT, "%s: section '%s' is too short", path, name);
    memcpy(hdr, d, 16);
    if (hdr[0] != t->count || bytes != 16 + hdr[0] * TABLE_ENTRY_BYTES)
        return dd_error(DD_ERR_MISMATCH, "%s: the parameter table has %llu entries, the model has %zu", path,
                        (unsigned long long)hdr[0], t->count);
    for (size_t i = 0; i < t->count; i++) {
        const unsigned char *p = (const unsigned char *)d + 16 + i * TABLE_ENTRY_BYTES;
        char en[DD_PARAM_NAME_MAX];
        memcpy(en, p, DD_PARAM_NAME_MAX);
        en[DD_PARAM_NAME_MAX - 1] = '\0';
        uint64_t v[7];
        memcpy(v, p + DD_PARAM_NAME_MAX, sizeof v);
        const dd_param_entry *e = &t->entries[i];
        if (strcmp(en, e->name) != 0 || v[0] != (uint64_t)e->ndim || v[1] != e->shape[0] || v[2] != e->shape[1] ||
            v[3] != e->shape[2] || v[4] != e->shape[3] || v[5] != e->offset || v[6] != e->size)
            return dd_error(DD_ERR_MISMATCH,
                            "%s: parameter %zu is '%s' (%llu x %llu x %llu x %llu at %llu) in the checkpoint but '%s' "
                            "(%zu x %zu x %zu x %zu at %zu) in the model",
                            path, i, en, (unsigned long long)v[1], (unsigned long long)v[2], (unsigned long long)v[3],
                            (unsigned long long)v[4], (unsigned long long)v[5], e->name, e->shape[0], e->shape[1],
                            e->shape[2], e->shape[3], e->offset);
    }
    if (hdr[1] != t->total)
        return dd_error(DD_ERR_MISMATCH, "%s: the parameter arena has %llu floats, the model %zu", path,
                        (unsigned long long)hdr[1], t->total);
    snprintf(name, sizeof name, "%sparams", prefix);
    DD_TRY(dd_ckpt_get(r, name, &d, &bytes));
    if (bytes != t->total * sizeof(float))
        return dd_error(DD_ERR_MISMATCH, "%s: section '%s' has %zu bytes, expected %zu", path, name, bytes,
                        t->total * sizeof(float));
    for (size_t i = 0; i < t->total; i++) {
        float f;
        memcpy(&f, (const char *)d + i * sizeof(float), sizeof f);
        if (!isfinite(f)) return dd_error(DD_ERR_RANGE, "%s: parameter %zu of '%s' is not finite", path, i, name);
    }
    *params = d;
    return DD_OK;
}

dd_status dd_train_ckpt_read_model(const dd_ckpt_reader *r, const char *path, const char *prefix, dd_model **m,
                                   float **params) {
    *m = NULL;
    *params = NULL;
    char name[64];
    const char *mname;
    snprintf(name, sizeof name, "%smodel", prefix);
    DD_TRY(dd_ckpt_get_str(r, name, &mname));
    dd_model_cfg c;
    DD_TRY(read_model_opts(r, path, prefix, &c));
    dd_status st = dd_model_create(mname, &c, m);
    if (st != DD_OK) return dd_error_prefix(st, "%s: ", path);
    const float *p;
    if ((st = dd_train_ckpt_check_model(r, path, prefix, *m, &p)) != DD_OK) goto fail;
    size_t n = dd_model_params(*m)->total;
    *params = dd_calloc(n, sizeof(float));
    if (!*params) {
        st = DD_ERR_NOMEM;
        goto fail;
    }
    memcpy(*params, p, n * sizeof(float));
    return DD_OK;
fail:
    dd_model_destroy(m);
    return st;
}

/* ---------------------------------------------------------------- save */

dd_status dd_run_model_save(const char *path, const dd_train_cfg *cfg, const char *data, const dd_spec *spec,
                            int epoch, const dd_model *m, const float *params) {
    if (!path || !cfg || !m || !params) return dd_error(DD_ERR_ARG, "dd_run_model_save: NULL argument");
    if (cfg->task != DD_TRAIN_PA) return dd_error(DD_ERR_ARG, "dd_run_model_save: PA models only");
    dd_ckpt_writer *w = NULL;
    DD_TRY(dd_ckpt_write_begin(path, &w));
    char *cj = NULL;
    dd_status st = dd_ckpt_add_u64(w, "trainer", DD_TRAIN_CKPT_VERSION);
    if (!st) st = dd_ckpt_add_str(w, "task", dd_train_task_name(cfg->task));
    if (!st) st = dd_train_cfg_to_json(cfg, &cj);
    if (!st) st = dd_ckpt_add_str(w, "config", cj);
    if (!st) st = dd_ckpt_add_str(w, "data", data ? data : "");
    if (!st && spec) {
        double sv[9];
        dd_spec_pack(spec, sv);
        st = dd_ckpt_add(w, "spec", sv, sizeof sv);
    }
    if (!st) st = dd_ckpt_add_u64(w, "epoch", (uint64_t)(epoch < 0 ? 0 : epoch));
    if (!st) st = add_model(w, "", m, params);
    dd_free(cj);
    if (st) {
        dd_ckpt_abort(&w);
        return st;
    }
    return dd_ckpt_write_commit(&w);
}

dd_status dd_trainer_save(const dd_trainer *tr, const char *path) {
    if (!tr || !path) return dd_error(DD_ERR_ARG, "dd_trainer_save: NULL argument");
    dd_ckpt_writer *w = NULL;
    DD_TRY(dd_trainer_snapshot(tr, path, &w));
    return dd_ckpt_write_commit(&w);
}

dd_status dd_trainer_snapshot(const dd_trainer *tr, const char *path, dd_ckpt_writer **out) {
    if (!tr || !path || !out) return dd_error(DD_ERR_ARG, "dd_trainer_snapshot: NULL argument");
    *out = NULL;
    dd_ckpt_writer *w = NULL;
    DD_TRY(dd_ckpt_write_begin(path, &w));
    dd_status st;
    char *cfg = NULL;
    double *hist = NULL;
    void *ost = NULL;
    if ((st = dd_ckpt_add_u64(w, "trainer", DD_TRAIN_CKPT_VERSION)) != DD_OK) goto fail;
    if ((st = dd_ckpt_add_str(w, "task", dd_train_task_name(tr->cfg.task))) != DD_OK) goto fail;
    if ((st = dd_train_cfg_to_json(&tr->cfg, &cfg)) != DD_OK) goto fail;
    if ((st = dd_ckpt_add_str(w, "config", cfg)) != DD_OK) goto fail;
    if ((st = dd_ckpt_add_str(w, "data", tr->data_path)) != DD_OK) goto fail;
    {
        double sv[9];
        dd_spec_pack(&tr->ds->spec, sv);
        if ((st = dd_ckpt_add(w, "spec", sv, sizeof sv)) != DD_OK) goto fail;
    }
    if (!tr->mapped && tr->plo == 0 && tr->phi == tr->n && tr->olo == 0 && tr->ohi == tr->n) {
        if ((st = add_model(w, "", tr->m, tr->params)) != DD_OK) goto fail;
        size_t ob = dd_optim_state_bytes(tr->opt);
        ost = malloc(ob ? ob : 1);
        if (!ost) {
            st = DD_ERR_NOMEM;
            goto fail;
        }
        if ((st = dd_optim_state_save(tr->opt, ost, ob)) != DD_OK) goto fail;
        if ((st = dd_ckpt_add(w, "optim_state", ost, ob)) != DD_OK) goto fail;
    } else {
        /* sharded: the strategy gathered the whole model's state (shard-neutral format) */
        const float *fp = NULL;
        const void *fo = NULL;
        size_t ob = 0;
        if (!tr->st.ops->full_state) {
            st = dd_error(DD_ERR_INTERNAL, "strategy %s shards the trainer but gives no full state to save",
                          tr->st.ops->name);
            goto fail;
        }
        if ((st = tr->st.ops->full_state(tr->st.self, (dd_trainer *)tr, &fp, &fo, &ob)) != DD_OK) goto fail;
        if ((st = add_model(w, "", tr->mwhole ? tr->mwhole : tr->m, fp)) != DD_OK) goto fail;
        if ((st = dd_ckpt_add(w, "optim_state", fo, ob)) != DD_OK) goto fail;
    }
    if ((st = dd_ckpt_add(w, "lr_sched", &tr->sched, sizeof tr->sched)) != DD_OK) goto fail;
    if (tr->rs_len > 0) { /* the warm-up of a rescale (dd_trainer_rescale) */
        const double rs[3] = {(double)tr->rs_start, (double)tr->rs_len, tr->rs_from};
        if ((st = dd_ckpt_add(w, "rescale", rs, sizeof rs)) != DD_OK) goto fail;
    }
    if ((st = dd_ckpt_add_u64(w, "step", tr->step)) != DD_OK) goto fail;
    if ((st = dd_ckpt_add_u64(w, "epoch", (uint64_t)tr->epoch)) != DD_OK) goto fail;
    {
        uint64_t cur[2] = {(uint64_t)tr->epoch, tr->batch};
        if ((st = dd_ckpt_add(w, "cursor", cur, sizeof cur)) != DD_OK) goto fail;
        if ((st = dd_ckpt_add_u64(w, "num_frames", tr->fr.count)) != DD_OK) goto fail;
        uint64_t rv[6];
        memcpy(rv, tr->rng.s, 4 * sizeof(uint64_t));
        rv[4] = (uint64_t)tr->rng.has_spare;
        memcpy(&rv[5], &tr->rng.spare, sizeof(double));
        if ((st = dd_ckpt_add(w, "rng", rv, sizeof rv)) != DD_OK) goto fail;
        double acc[4] = {tr->ep_loss_sum, tr->ep_time, tr->last_lr, tr->ep_gnorm_max};
        if ((st = dd_ckpt_add(w, "epoch_acc", acc, sizeof acc)) != DD_OK) goto fail;
        if ((st = dd_ckpt_add_f64(w, "best_metric", tr->best_metric)) != DD_OK) goto fail;
        if ((st = dd_ckpt_add_u64(w, "best_epoch", (uint64_t)tr->best_epoch)) != DD_OK) goto fail;
        if ((st = dd_ckpt_add_f64(w, "gain", tr->cfg.gain)) != DD_OK) goto fail;
    }
    {
        size_t nh = 1 + tr->nhist * DD_REC_FIELDS;
        hist = calloc(nh, sizeof(double));
        if (!hist) {
            st = DD_ERR_NOMEM;
            goto fail;
        }
        hist[0] = DD_REC_FIELDS;
        for (size_t i = 0; i < tr->nhist; i++) dd_rec_pack(&tr->hist[i], hist + 1 + i * DD_REC_FIELDS);
        if ((st = dd_ckpt_add(w, "history", hist, nh * sizeof(double))) != DD_OK) goto fail;
    }
    if (tr->pa && (st = add_model(w, "pa.", tr->pa, tr->pa_params)) != DD_OK) goto fail;
    /* the run's identity (optional sections: checkpoints of earlier versions lack them) */
    if (tr->run_id[0] && (st = dd_ckpt_add_str(w, "run_id", tr->run_id)) != DD_OK) goto fail;
    if (tr->has_data_id && (st = dd_ckpt_add(w, "data_id", tr->data_id, sizeof tr->data_id)) != DD_OK) goto fail;
    if (tr->st.ops->save && (st = tr->st.ops->save(tr->st.self, (dd_trainer *)tr, w)) != DD_OK) goto fail;
    dd_free(cfg);
    free(hist);
    free(ost);
    *out = w;
    return DD_OK;
fail:
    dd_ckpt_abort(&w);
    dd_free(cfg);
    free(hist);
    free(ost);
    return st;
}

/* ---------------------------------------------------------------- load */

static dd_status load_checked(dd_trainer *tr, const dd_ckpt_reader *r, const char *path, int params_only) {
    uint64_t ver;
    DD_TRY(dd_ckpt_get_u64(r, "trainer", &ver));
    if (ver == 0 || ver > DD_TRAIN_CKPT_VERSION)
        return dd_error(DD_ERR_FORMAT, "%s: trainer sections of version %llu, this build reads <= %u", path,
                        (unsigned long long)ver, DD_TRAIN_CKPT_VERSION);
    const char *task;
    DD_TRY(dd_ckpt_get_str(r, "task", &task));
    const int want_dpd = tr->cfg.task != DD_TRAIN_PA;
    if ((strcmp(task, "pa") == 0) == want_dpd)
        return dd_error(DD_ERR_MISMATCH, "%s: the checkpoint is a '%s' run, this trainer trains %s", path, task,
                        dd_train_task_name(tr->cfg.task));
    const float *params;
    DD_TRY(dd_train_ckpt_check_model(r, path, "", tr->mwhole ? tr->mwhole : tr->m, &params));
    if (params_only) {
        dd_trainer_take_params(tr, params);
        return DD_OK;
    }

    /* full resume: everything is checked before anything changes */
    const char *cfgtxt;
    DD_TRY(dd_ckpt_get_str(r, "config", &cfgtxt));
    dd_train_cfg cc;
    DD_TRY(dd_train_cfg_from_json(cfgtxt, path, &cc));
    if (cc.task != tr->cfg.task)
        return dd_error(DD_ERR_MISMATCH, "%s: task %s, this trainer %s", path, dd_train_task_name(cc.task),
                        dd_train_task_name(tr->cfg.task));
#define SAME_SZ(f)                                                                                              \
    if (cc.f != tr->cfg.f)                                                                                      \
        return dd_error(DD_ERR_MISMATCH, "%s: the checkpoint was made with " #f " = %zu, this run has %zu", path, \
                        (size_t)cc.f, (size_t)tr->cfg.f);
    SAME_SZ(frame)
    SAME_SZ(stride)
    SAME_SZ(batch)
    SAME_SZ(shuffle)
#undef SAME_SZ
    if (cc.seed != tr->cfg.seed)
        return dd_error(DD_ERR_MISMATCH, "%s: the checkpoint was made with seed %llu, this run has %llu", path,
                        (unsigned long long)cc.seed, (unsigned long long)tr->cfg.seed);
    if (strcmp(cc.opt, tr->cfg.opt) != 0)
        return dd_error(DD_ERR_MISMATCH, "%s: the checkpoint was made with optimiser %s, this run uses %s", path, cc.opt,
                        tr->cfg.opt);
    uint64_t nfr;
    DD_TRY(dd_ckpt_get_u64(r, "num_frames", &nfr));
    if (nfr != tr->fr.count)
        return dd_error(DD_ERR_MISMATCH, "%s: the checkpoint was made on %llu training frames, this data set has %llu",
                        path, (unsigned long long)nfr, (unsigned long long)tr->fr.count);
    const void *d;
    DD_TRY(get_sized(r, path, "lr_sched", sizeof(dd_lr_sched), &d));
    dd_lr_sched sched;
    memcpy(&sched, d, sizeof sched);
    if (dd_lr_sched_check(&sched) != DD_OK) return dd_error_prefix(DD_ERR_FORMAT, "%s: section 'lr_sched': ", path);
    double rs[3] = {0.0, 0.0, 1.0}; /* optional: the warm-up of a rescale */
    if (dd_ckpt_has(r, "rescale")) {
        DD_TRY(get_sized(r, path, "rescale", sizeof rs, &d));
        memcpy(rs, d, sizeof rs);
        if (!(rs[0] >= 0 && rs[0] < 9e15 && rs[1] >= 0 && rs[1] < 9e15 && rs[2] > 0 && rs[2] < 1e12))
            return dd_error(DD_ERR_FORMAT, "%s: section 'rescale' holds (%g, %g, %g): not a warm-up", path, rs[0], rs[1],
                            rs[2]);
    }
    uint64_t step, epoch;
    DD_TRY(dd_ckpt_get_u64(r, "step", &step));
    DD_TRY(dd_ckpt_get_u64(r, "epoch", &epoch));
    DD_TRY(get_sized(r, path, "cursor", 2 * sizeof(uint64_t), &d));
    uint64_t cur[2];
    memcpy(cur, d, sizeof cur);
    if (cur[0] != epoch || cur[1] > tr->nbatches || epoch > 100000)
        return dd_error(DD_ERR_FORMAT, "%s: bad data cursor (epoch %llu, batch %llu of %llu)", path,
                        (unsigned long long)cur[0], (unsigned long long)cur[1], (unsigned long long)tr->nbatches);
    DD_TRY(get_sized(r, path, "rng", 6 * sizeof(uint64_t), &d));
    uint64_t rv[6];
    memcpy(rv, d, sizeof rv);
    DD_TRY(get_sized(r, path, "epoch_acc", 4 * sizeof(double), &d));
    double acc[4];
    memcpy(acc, d, sizeof acc);
    double best_metric, gain;
    uint64_t best_epoch;
    DD_TRY(dd_ckpt_get_f64(r, "best_metric", &best_metric));
    DD_TRY(dd_ckpt_get_u64(r, "best_epoch", &best_epoch));
    DD_TRY(dd_ckpt_get_f64(r, "gain", &gain));
    if (tr->cfg.task != DD_TRAIN_PA && gain != tr->cfg.gain)
        return dd_error(DD_ERR_MISMATCH, "%s: the DPD was trained for target gain %.17g, this run uses %.17g", path,
                        gain, tr->cfg.gain);
    if (best_epoch > epoch) return dd_error(DD_ERR_FORMAT, "%s: best epoch %llu after the last epoch", path, (unsigned long long)best_epoch);
    size_t hbytes;
    DD_TRY(dd_ckpt_get(r, "history", &d, &hbytes));
    double nf = 0.0;
    if (hbytes >= sizeof(double)) memcpy(&nf, d, sizeof nf);
    if (hbytes < sizeof(double) || nf != DD_REC_FIELDS || (hbytes / sizeof(double) - 1) % DD_REC_FIELDS != 0 ||
        hbytes % sizeof(double) != 0)
        return dd_error(DD_ERR_FORMAT, "%s: section 'history' is malformed", path);
    size_t nhist = (hbytes / sizeof(double) - 1) / DD_REC_FIELDS;
    if (nhist != epoch)
        return dd_error(DD_ERR_FORMAT, "%s: the history holds %zu epochs, the cursor says %llu", path, nhist,
                        (unsigned long long)epoch);
    const float *pa_params = NULL;
    if (tr->pa) DD_TRY(dd_train_ckpt_check_model(r, path, "pa.", tr->pa, &pa_params));
    size_t ob;
    DD_TRY(dd_ckpt_get(r, "optim_state", &d, &ob));

    /* commit: the optimiser first (the only step that can still refuse); a sharded
     * trainer takes its slice of the whole model's state (any checkpoint, any sharding) */
    dd_status st = dd_trainer_take_optim(tr, d, ob);
    if (st != DD_OK) return dd_error_prefix(st, "%s: ", path);
    dd_epoch_record *h = NULL;
    if (nhist) {
        h = malloc(nhist * sizeof *h);
        if (!h) return dd_error(DD_ERR_NOMEM, "out of memory loading the history");
        const double *hv;
        DD_TRY(dd_ckpt_get(r, "history", (const void **)&hv, &hbytes));
        for (size_t i = 0; i < nhist; i++) {
            double tmp[DD_REC_FIELDS];
            memcpy(tmp, (const char *)hv + (1 + i * DD_REC_FIELDS) * sizeof(double), sizeof tmp);
            dd_rec_unpack(tmp, &h[i]);
        }
    }
    dd_trainer_take_params(tr, params);
    if (pa_params) memcpy(tr->pa_params, pa_params, tr->pa_n * sizeof(float));
    tr->sched = sched;
    tr->rs_start = (int64_t)rs[0];
    tr->rs_len = (int64_t)rs[1];
    tr->rs_from = rs[2];
    tr->step = step;
    tr->epoch = (int)epoch;
    tr->batch = cur[1];
    memcpy(tr->rng.s, rv, 4 * sizeof(uint64_t));
    tr->rng.has_spare = (int)rv[4];
    memcpy(&tr->rng.spare, &rv[5], sizeof(double));
    tr->ep_loss_sum = acc[0];
    tr->ep_time = acc[1];
    tr->last_lr = acc[2];
    tr->ep_gnorm_max = acc[3];
    tr->best_metric = best_metric;
    tr->best_epoch = (int)best_epoch;
    free(tr->hist);
    tr->hist = h;
    tr->nhist = tr->caphist = nhist;
    tr->nodpd_ok = 0; /* the PA model's parameters may have changed */
    if (tr->pa && tr->eval_here && tr->rank == 0) {
        /* the records of the checkpoint do not hold the no-DPD baseline (a constant of
         * the run): the resumed run's metrics.jsonl gets it from this PA model */
        dd_eval_metrics b[2];
        int ok = 1;
        for (int k = 0; k < 2 && ok; k++) {
            b[k] = (dd_eval_metrics){NAN, NAN, {NAN, NAN, NAN}, NAN};
            if (tr->ev[k].n && dd_trainer_no_dpd_baseline(tr, k == 0 ? DD_SPLIT_VAL : DD_SPLIT_TEST, &b[k]) != DD_OK) {
                /* the commit is done: a baseline that cannot be measured is left out */
                dd_log(DD_LOG_WARN, "%s: no baseline without the DPD: %s", path, dd_last_error());
                ok = 0;
            }
        }
        for (size_t i = 0; ok && i < nhist; i++) {
            h[i].has_no_dpd = 1;
            h[i].no_dpd_val = b[0];
            h[i].no_dpd_test = b[1];
        }
    }
    return DD_OK;
}

dd_status dd_trainer_load(dd_trainer *tr, const char *path, int params_only) {
    if (!tr || !path) return dd_error(DD_ERR_ARG, "dd_trainer_load: NULL argument");
    dd_ckpt_reader *r = NULL;
    DD_TRY(dd_ckpt_open(path, &r));
    dd_status st = load_checked(tr, r, path, params_only);
    if (st == DD_OK && !params_only && tr->st.ops->load) st = tr->st.ops->load(tr->st.self, tr, r);
    /* the strategy's setup (a collective: every rank loads the same checkpoint) runs after
     * a full load only; a parameters-only load may be made by one rank alone (rank 0
     * loading best.ckpt for the report) */
    if (st == DD_OK && !params_only && tr->st.ops->setup) st = tr->st.ops->setup(tr->st.self, tr);
    dd_ckpt_close(&r);
    return st;
}
