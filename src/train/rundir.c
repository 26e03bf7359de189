/* Run directories (train.h): the training driver dd_train_run (config.json,
 * metrics.jsonl, history.csv, best.ckpt, last.ckpt, report.html; exact resume from
 * last.ckpt), the run directory's owner lock (RUN/.lock) and identity (run id, data set
 * identity: a resume must continue its own run), loading a trained model back from a run,
 * and re-evaluating a run. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "distdpd/train.h"
#include "train_internal.h"

/* ---------------------------------------------------------------- small file helpers */


dd_status dd_train_write_text(const char *path, const char *text, size_t len) {
    char tmp[DD_TRAIN_PATH_MAX + 64];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return dd_error(DD_ERR_ARG, "path too long: %s", path); /* the reason first: the path fills the message */
    FILE *f = fopen(tmp, "wb");
    if (!f) return dd_error(DD_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    /* the first failure is the one reported (a failed flush is not followed by an fsync
     * whose errno would replace it; the stream is closed in any case) */
    int e = 0;
    errno = 0;
    if (fwrite(text, 1, len, f) != len) e = errno ? errno : EIO;
    if (fflush(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && fsync(fileno(f)) != 0) e = errno;
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        unlink(tmp);
        return dd_error(DD_ERR_IO, "%s: write failed: %s; the previous file is untouched", path, strerror(e));
    }
    return DD_OK;
}

dd_status dd_train_mkdirs(const char *path) {
    size_t n = strlen(path);
    if (n == 0) return dd_error(DD_ERR_ARG, "empty run directory name");
    if (n >= DD_TRAIN_PATH_MAX) return dd_error(DD_ERR_ARG, "run directory name too long");
    char tmp[DD_TRAIN_PATH_MAX];
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0') continue;
        char save = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return dd_error(DD_ERR_IO, "%s: cannot create directory: %s", tmp, strerror(errno));
        tmp[i] = save;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return dd_error(DD_ERR_IO, "%s: not a directory", path);
    return DD_OK;
}

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static dd_status join(char *buf, size_t cap, const char *dir, const char *name) {
    if (snprintf(buf, cap, "%s/%s", dir, name) >= (int)cap) /* the reason first: the path fills the message */
        return dd_error(DD_ERR_ARG, "path too long: %s/%s", dir, name);
    return DD_OK;
}

/* ---------------------------------------------------------------- growing text buffer */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} tbuf;

static void tb_printf(tbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#include <stdarg.h>
static void tb_printf(tbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        size_t room = b->cap - b->n;
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && (size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 8192;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

/* A number for JSON: %.10g, or null when not finite. */
static void tb_num(tbuf *b, const char *key, double v, int comma) {
    if (isfinite(v))
        tb_printf(b, "%s\"%s\":%.10g", comma ? "," : "", key, v);
    else
        tb_printf(b, "%s\"%s\":null", comma ? "," : "", key);
}

static void tb_csvnum(tbuf *b, double v) {
    if (isfinite(v))
        tb_printf(b, ",%.10g", v);
    else
        tb_printf(b, ",");
}

static void json_metrics(tbuf *b, const char *pfx, const dd_eval_metrics *m) {
    char k[64];
    snprintf(k, sizeof k, "%s_loss", pfx);
    tb_num(b, k, m->loss, 1);
    snprintf(k, sizeof k, "%s_nmse_db", pfx);
    tb_num(b, k, m->nmse_db, 1);
    snprintf(k, sizeof k, "%s_aclr_l_db", pfx);
    tb_num(b, k, m->aclr.left_db, 1);
    snprintf(k, sizeof k, "%s_aclr_r_db", pfx);
    tb_num(b, k, m->aclr.right_db, 1);
    snprintf(k, sizeof k, "%s_aclr_avg_db", pfx);
    tb_num(b, k, m->aclr.avg_db, 1);
    snprintf(k, sizeof k, "%s_evm_db", pfx);
    tb_num(b, k, m->evm_db, 1);
}

void dd_eval_no_dpd_keys(const char *split, const dd_eval_metrics *no_dpd, const dd_eval_metrics *dpd,
                         char keys[DD_NO_DPD_KEYS][48], double vals[DD_NO_DPD_KEYS]) {
    static const char *const nm[DD_NO_DPD_KEYS] = {"nmse_no_dpd",     "aclr_l_no_dpd",     "aclr_r_no_dpd",
                                                   "aclr_avg_no_dpd", "evm_no_dpd",        "nmse_improvement",
                                                   "aclr_improvement", "evm_improvement"};
    const double v[DD_NO_DPD_KEYS] = {no_dpd->nmse_db,
                                      no_dpd->aclr.left_db,
                                      no_dpd->aclr.right_db,
                                      no_dpd->aclr.avg_db,
                                      no_dpd->evm_db,
                                      no_dpd->nmse_db - dpd->nmse_db,
                                      no_dpd->aclr.avg_db - dpd->aclr.avg_db,
                                      no_dpd->evm_db - dpd->evm_db};
    for (int i = 0; i < DD_NO_DPD_KEYS; i++) {
        snprintf(keys[i], 48, "%.20s_%s_db", split, nm[i]);
        vals[i] = v[i];
    }
}

static void json_no_dpd(tbuf *b, const char *split, const dd_eval_metrics *no_dpd, const dd_eval_metrics *dpd) {
    char k[DD_NO_DPD_KEYS][48];
    double v[DD_NO_DPD_KEYS];
    dd_eval_no_dpd_keys(split, no_dpd, dpd, k, v);
    for (int i = 0; i < DD_NO_DPD_KEYS; i++) tb_num(b, k[i], v[i], 1);
}

dd_status dd_run_write_metrics(const char *dir, const dd_train_cfg *cfg, size_t nparams, const dd_epoch_record *rec,
                               size_t n) {
    char path[DD_TRAIN_PATH_MAX + 32];
    tbuf j = {0}, c = {0};
    /* the overall best: the last record flagged best */
    size_t best = (size_t)-1;
    for (size_t i = 0; i < n; i++)
        if (rec[i].best) best = i;
    int any_true = 0;
    for (size_t i = 0; i < n; i++) any_true |= rec[i].has_true;
    /* OpenDPD's header exactly: its log dict has the key "TIME:" (modules/paths.py gen_log_stat) */
    tb_printf(&c, "EPOCH,N_EPOCH,TIME:,LR,BATCH_SIZE,N_PARAM,FRAME_LENGTH,BACKBONE,HIDDEN_SIZE,TRAIN_LOSS,"
                  "VAL_LOSS,VAL_NMSE,VAL_EVM,VAL_ACLR_L,VAL_ACLR_R,VAL_ACLR_AVG,"
                  "TEST_LOSS,TEST_NMSE,TEST_EVM,TEST_ACLR_L,TEST_ACLR_R,TEST_ACLR_AVG");
    if (any_true)
        tb_printf(&c, ",TRUE_VAL_NMSE,TRUE_VAL_EVM,TRUE_VAL_ACLR_L,TRUE_VAL_ACLR_R,TRUE_VAL_ACLR_AVG,"
                      "TRUE_TEST_NMSE,TRUE_TEST_EVM,TRUE_TEST_ACLR_L,TRUE_TEST_ACLR_R,TRUE_TEST_ACLR_AVG");
    tb_printf(&c, ",BEST\n");
    double minutes = 0.0;
    for (size_t i = 0; i < n; i++) {
        const dd_epoch_record *r = &rec[i];
        tb_printf(&j, "{\"epoch\":%d,\"step\":%llu", r->epoch, (unsigned long long)r->step);
        tb_num(&j, "time_s", r->time_s, 1);
        tb_num(&j, "eval_time_s", r->eval_time_s, 1);
        tb_num(&j, "lr", r->lr, 1);
        tb_num(&j, "train_loss", r->train_loss, 1);
        tb_num(&j, "grad_norm_max", r->grad_norm_max, 1);
        if (!isnan(r->comm_bytes_per_step)) tb_num(&j, "comm_bytes_per_step", r->comm_bytes_per_step, 1);
        if (!isnan(r->compression_ratio)) tb_num(&j, "compression_ratio", r->compression_ratio, 1);
        if (!isnan(r->compress_time_s)) tb_num(&j, "compress_time_s", r->compress_time_s, 1);
        json_metrics(&j, "val", &r->val);
        json_metrics(&j, "test", &r->test);
        if (r->has_true) {
            json_metrics(&j, "true_val", &r->true_val);
            json_metrics(&j, "true_test", &r->true_test);
        }
        if (r->has_no_dpd) {
            json_no_dpd(&j, "val", &r->no_dpd_val, &r->val);
            json_no_dpd(&j, "test", &r->no_dpd_test, &r->test);
        }
        tb_printf(&j, ",\"restart\":%d", r->restart);
        if (r->world_size > 0)
            tb_printf(&j, ",\"world_size\":%d", r->world_size);
        else
            tb_printf(&j, ",\"world_size\":null");
        /* timing of the epoch's checkpoints (null: none, or the write is not known) */
        tb_num(&j, "ckpt_stall_s", r->ckpt_stall_s, 1);
        tb_num(&j, "ckpt_write_s", r->ckpt_write_s, 1);
        if (r->extra_json[0]) tb_printf(&j, ",%s", r->extra_json);
        tb_printf(&j, ",\"best\":%s}\n", i == best ? "true" : "false");

        minutes += (r->time_s + r->eval_time_s) / 60.0;
        tb_printf(&c, "%d,%d,%.10g,%.10g,%zu,%zu,%zu,%s,%d", r->epoch - 1, cfg->epochs, minutes, r->lr, cfg->batch,
                  nparams, cfg->frame, cfg->model, dd_model_cfg_get(&cfg->model_cfg, "hidden"));
        tb_csvnum(&c, r->train_loss);
        const dd_eval_metrics *ms[2] = {&r->val, &r->test};
        for (int k = 0; k < 2; k++) {
            tb_csvnum(&c, ms[k]->loss);
            tb_csvnum(&c, ms[k]->nmse_db);
            tb_csvnum(&c, ms[k]->evm_db);
            tb_csvnum(&c, ms[k]->aclr.left_db);
            tb_csvnum(&c, ms[k]->aclr.right_db);
            tb_csvnum(&c, ms[k]->aclr.avg_db);
        }
        if (any_true) {
            const dd_eval_metrics *ts[2] = {&r->true_val, &r->true_test};
            for (int k = 0; k < 2; k++) {
                tb_csvnum(&c, r->has_true ? ts[k]->nmse_db : NAN);
                tb_csvnum(&c, r->has_true ? ts[k]->evm_db : NAN);
                tb_csvnum(&c, r->has_true ? ts[k]->aclr.left_db : NAN);
                tb_csvnum(&c, r->has_true ? ts[k]->aclr.right_db : NAN);
                tb_csvnum(&c, r->has_true ? ts[k]->aclr.avg_db : NAN);
            }
        }
        tb_printf(&c, ",%d\n", i == best ? 1 : 0);
    }
    dd_status st = DD_OK;
    if (j.oom || c.oom) st = dd_error(DD_ERR_NOMEM, "out of memory writing the metrics");
    if (st == DD_OK && (st = join(path, sizeof path, dir, "metrics.jsonl")) == DD_OK)
        st = dd_train_write_text(path, j.p ? j.p : "", j.n);
    if (st == DD_OK && (st = join(path, sizeof path, dir, "history.csv")) == DD_OK)
        st = dd_train_write_text(path, c.p ? c.p : "", c.n);
    free(j.p);
    free(c.p);
    return st;
}

/* ---------------------------------------------------------------- config.json */

static dd_status write_config_json(const char *dir, dd_trainer *tr, const char *data, const char *pa_run,
                                   const char *command, int true_found) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return DD_ERR_NOMEM;
    cJSON_AddStringToObject(root, "generator", "distdpd " DD_VERSION_STRING);
    if (tr->run_id[0]) cJSON_AddStringToObject(root, "run_id", tr->run_id);
    if (command) cJSON_AddStringToObject(root, "command", command);
    cJSON_AddStringToObject(root, "data", data ? data : "");
    if (pa_run) cJSON_AddStringToObject(root, "pa_run", pa_run);
    dd_train_provenance(root, data);
    const dd_train_cfg *cfg = dd_trainer_cfg(tr);
    cJSON_AddItemToObject(root, "config", dd_train_cfg_json_obj(cfg));
    const dd_spec *sp = &tr->ds->spec;
    cJSON *s = cJSON_AddObjectToObject(root, "spec");
    if (s) {
        cJSON_AddNumberToObject(s, "input_signal_fs", sp->fs);
        cJSON_AddNumberToObject(s, "bw_main_ch", sp->bw_main);
        cJSON_AddNumberToObject(s, "bw_sub_ch", sp->bw_sub);
        cJSON_AddNumberToObject(s, "n_sub_ch", sp->n_sub);
        cJSON_AddNumberToObject(s, "nperseg", (double)sp->nperseg);
        cJSON_AddNumberToObject(s, "bw_occupied", sp->bw_occupied);
    }
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    if (m) {
        cJSON_AddStringToObject(m, "name", dd_model_name(tr->m));
        cJSON_AddNumberToObject(m, "n_params", (double)dd_model_num_params(tr->m));
        cJSON_AddNumberToObject(m, "arena_floats", (double)tr->n);
        cJSON_AddNumberToObject(m, "flops_per_sample_fwd", dd_model_flops_per_sample(tr->m, 0));
        cJSON_AddNumberToObject(m, "flops_per_sample_bwd", dd_model_flops_per_sample(tr->m, 1));
    }
    if (tr->pa) {
        cJSON *p = cJSON_AddObjectToObject(root, "pa_model");
        if (p) {
            cJSON_AddStringToObject(p, "name", dd_model_name(tr->pa));
            const dd_model_cfg *pc = dd_model_config(tr->pa);
            cJSON *po = cJSON_AddObjectToObject(p, "model_opts");
            for (int i = 0; po && i < pc->n; i++) cJSON_AddNumberToObject(po, pc->v[i].name, pc->v[i].value);
            cJSON_AddNumberToObject(p, "n_params", (double)dd_model_num_params(tr->pa));
        }
        cJSON_AddNumberToObject(root, "target_gain", cfg->gain);
    }
    cJSON *t = cJSON_AddObjectToObject(root, "data_stats");
    if (t) {
        cJSON_AddNumberToObject(t, "train_samples", (double)tr->ds->n[0]);
        cJSON_AddNumberToObject(t, "val_samples", (double)tr->ds->n[1]);
        cJSON_AddNumberToObject(t, "test_samples", (double)tr->ds->n[2]);
        cJSON_AddNumberToObject(t, "train_frames", (double)tr->fr.count);
        cJSON_AddNumberToObject(t, "batches_per_epoch", (double)tr->nbatches);
        if (tr->has_data_id) {
            char fp[3 * 17 + 1];
            snprintf(fp, sizeof fp, "%016llx-%016llx-%016llx", (unsigned long long)tr->data_id[3],
                     (unsigned long long)tr->data_id[4], (unsigned long long)tr->data_id[5]);
            cJSON_AddStringToObject(t, "fingerprint", fp);
        }
    }
    if (cfg->task != DD_TRAIN_PA) {
        cJSON *tp = cJSON_AddObjectToObject(root, "true_pa");
        if (tp) {
            cJSON_AddBoolToObject(tp, "available", true_found && tr->true_pa);
            if (tr->true_pa) {
                cJSON_AddStringToObject(tp, "name", dd_pa_name(tr->true_pa));
                for (int k = 0; k < 2; k++) {
                    const dd_eval_metrics *b = &tr->ev[k].base;
                    if (!tr->ev[k].n) continue;
                    cJSON *o = cJSON_AddObjectToObject(tp, k == 0 ? "no_dpd_val" : "no_dpd_test");
                    if (!o) continue;
                    cJSON_AddNumberToObject(o, "nmse_db", b->nmse_db);
                    cJSON_AddNumberToObject(o, "aclr_l_db", b->aclr.left_db);
                    cJSON_AddNumberToObject(o, "aclr_r_db", b->aclr.right_db);
                    cJSON_AddNumberToObject(o, "aclr_avg_db", b->aclr.avg_db);
                    cJSON_AddNumberToObject(o, "evm_db", b->evm_db);
                }
            }
        }
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return dd_error(DD_ERR_NOMEM, "out of memory writing config.json");
    char path[DD_TRAIN_PATH_MAX + 32];
    dd_status st = join(path, sizeof path, dir, "config.json");
    if (st == DD_OK) {
        size_t l = strlen(txt);
        char *t2 = malloc(l + 2);
        if (!t2) {
            st = DD_ERR_NOMEM;
        } else {
            memcpy(t2, txt, l);
            t2[l] = '\n';
            t2[l + 1] = '\0';
            st = dd_train_write_text(path, t2, l + 1);
            free(t2);
        }
    }
    cJSON_free(txt);
    return st;
}

/* ---------------------------------------------------------------- loading a run */

void dd_run_model_free(dd_run_model *m) {
    if (!m) return;
    dd_model_destroy(&m->model);
    dd_free(m->params);
    dd_model_destroy(&m->pa_model);
    dd_free(m->pa_params);
    memset(m, 0, sizeof *m);
}

static dd_status ckpt_path(const char *run, const char *which, char *buf, size_t cap) {
    struct stat sb;
    if (stat(run, &sb) != 0) return dd_error(DD_ERR_IO, "%s: no such run directory or checkpoint", run);
    if (S_ISDIR(sb.st_mode)) {
        const char *w = which && *which ? which : "best";
        if (strcmp(w, "best") != 0 && strcmp(w, "last") != 0)
            return dd_error(DD_ERR_ARG, "checkpoint choice '%s' (expected best or last)", w);
        if (snprintf(buf, cap, "%s/%s.ckpt", run, w) >= (int)cap) return dd_error(DD_ERR_ARG, "%s: path too long", run);
        if (!file_exists(buf))
            return dd_error(DD_ERR_IO, "%s: no %s.ckpt: not a finished training run (train it with distdpd train-pa/train-dpd)",
                            run, w);
    } else {
        if (snprintf(buf, cap, "%s", run) >= (int)cap) return dd_error(DD_ERR_ARG, "%s: path too long", run);
    }
    return DD_OK;
}

dd_status dd_run_model_load(const char *run, const char *which, dd_run_model *out) {
    if (!run || !out) return dd_error(DD_ERR_ARG, "dd_run_model_load: NULL argument");
    memset(out, 0, sizeof *out);
    char path[DD_TRAIN_PATH_MAX + 32];
    DD_TRY(ckpt_path(run, which, path, sizeof path));
    dd_ckpt_reader *r = NULL;
    DD_TRY(dd_ckpt_open(path, &r));
    dd_status st;
    const char *s;
    uint64_t ver, ep;
    if ((st = dd_ckpt_get_u64(r, "trainer", &ver)) != DD_OK) goto fail;
    if (ver == 0 || ver > DD_TRAIN_CKPT_VERSION) {
        st = dd_error(DD_ERR_FORMAT, "%s: trainer sections of version %llu, this build reads <= %u", path,
                      (unsigned long long)ver, DD_TRAIN_CKPT_VERSION);
        goto fail;
    }
    if ((st = dd_ckpt_get_str(r, "config", &s)) != DD_OK) goto fail;
    if ((st = dd_train_cfg_from_json(s, path, &out->cfg)) != DD_OK) goto fail;
    if ((st = dd_ckpt_get_str(r, "data", &s)) != DD_OK) goto fail;
    snprintf(out->data, sizeof out->data, "%s", s);
    {
        const void *d;
        size_t bytes;
        if (dd_ckpt_get(r, "spec", &d, &bytes) == DD_OK && bytes == 9 * sizeof(double)) {
            double v[9];
            memcpy(v, d, sizeof v);
            dd_spec_unpack(v, &out->spec);
            out->has_spec = dd_spec_check(&out->spec, path) == DD_OK;
        }
        dd_error_clear();
    }
    if ((st = dd_ckpt_get_u64(r, "epoch", &ep)) != DD_OK) goto fail;
    out->epoch = (int)ep;
    if ((st = dd_train_ckpt_read_model(r, path, "", &out->model, &out->params)) != DD_OK) goto fail;
    if (dd_ckpt_has(r, "pa.model")) {
        if ((st = dd_train_ckpt_read_model(r, path, "pa.", &out->pa_model, &out->pa_params)) != DD_OK) goto fail;
    } else if (out->cfg.task != DD_TRAIN_PA) {
        st = dd_error(DD_ERR_FORMAT, "%s: a DPD checkpoint without its PA model", path);
        goto fail;
    }
    dd_ckpt_close(&r);
    return DD_OK;
fail:
    dd_ckpt_close(&r);
    dd_run_model_free(out);
    return st;
}

dd_status dd_run_evaluate(const char *run, const char *which, const dd_dataset *ds, const dd_pa *true_pa,
                          dd_epoch_record *rec, dd_eval_metrics *base) {
    if (!run || !ds || !rec) return dd_error(DD_ERR_ARG, "dd_run_evaluate: NULL argument");
    dd_run_model rm;
    DD_TRY(dd_run_model_load(run, which, &rm));
    dd_trainer *tr = NULL;
    dd_status st;
    dd_model_ref pref, *pp = NULL;
    if (rm.pa_model) {
        pref.name = dd_model_name(rm.pa_model);
        pref.cfg = *dd_model_config(rm.pa_model);
        pref.params = rm.pa_params;
        pref.n = dd_model_params(rm.pa_model)->total;
        pp = &pref;
    }
    dd_train_cfg cfg = rm.cfg;
    cfg.eval_test = 1;
    if ((st = dd_trainer_create(&cfg, ds, pp, NULL, &tr)) != DD_OK) goto done;
    memcpy(tr->params, rm.params, tr->n * sizeof(float));
    if (true_pa && cfg.task != DD_TRAIN_PA && (st = dd_trainer_set_true_pa(tr, true_pa)) != DD_OK) goto done;
    memset(rec, 0, sizeof *rec);
    rec->epoch = rm.epoch;
    rec->train_loss = NAN;
    rec->lr = NAN;
    {
        double t0 = dd_now();
        dd_eval_metrics *ms[4] = {&rec->val, &rec->test, &rec->true_val, &rec->true_test};
        for (int k = 0; k < 4; k++) ms[k]->loss = ms[k]->nmse_db = ms[k]->evm_db = ms[k]->aclr.left_db =
            ms[k]->aclr.right_db = ms[k]->aclr.avg_db = NAN;
        if (base) base[0] = base[1] = rec->val;
        rec->no_dpd_val = rec->no_dpd_test = rec->val;
        if (tr->pa) {
            rec->has_no_dpd = 1;
            if (ds->n[DD_SPLIT_VAL] && (st = dd_trainer_no_dpd_baseline(tr, DD_SPLIT_VAL, &rec->no_dpd_val)) != DD_OK)
                goto done;
            if (ds->n[DD_SPLIT_TEST] && (st = dd_trainer_no_dpd_baseline(tr, DD_SPLIT_TEST, &rec->no_dpd_test)) != DD_OK)
                goto done;
        }
        if (ds->n[DD_SPLIT_VAL] && (st = dd_trainer_evaluate(tr, DD_SPLIT_VAL, &rec->val, NULL, NULL)) != DD_OK) goto done;
        if (ds->n[DD_SPLIT_TEST] && (st = dd_trainer_evaluate(tr, DD_SPLIT_TEST, &rec->test, NULL, NULL)) != DD_OK) goto done;
        if (tr->true_pa) {
            rec->has_true = 1;
            if (base) {
                base[0] = tr->ev[0].base;
                base[1] = tr->ev[1].base;
            }
            if (ds->n[DD_SPLIT_VAL] && (st = dd_trainer_evaluate_true(tr, DD_SPLIT_VAL, &rec->true_val, NULL, NULL)) != DD_OK)
                goto done;
            if (ds->n[DD_SPLIT_TEST] && (st = dd_trainer_evaluate_true(tr, DD_SPLIT_TEST, &rec->true_test, NULL, NULL)) != DD_OK)
                goto done;
        }
        rec->eval_time_s = dd_now() - t0;
    }
done:
    dd_trainer_destroy(&tr);
    dd_run_model_free(&rm);
    return st;
}

/* ---------------------------------------------------------------- the driver */

static void progress(const dd_train_run_opts *o, const dd_trainer *tr, int phase, double running, const dd_epoch_record *rec) {
    if (!o->progress) return;
    dd_train_progress p;
    p.phase = phase;
    p.epoch = phase == 2 ? tr->epoch : tr->epoch + 1;
    p.epochs = tr->cfg.epochs;
    p.batch = phase == 2 ? tr->nbatches : tr->batch;
    p.nbatches = tr->nbatches;
    p.loss = running;
    p.epoch_elapsed = phase == 2 && rec ? rec->time_s : tr->ep_time;
    p.rec = rec;
    o->progress(o->progress_user, &p);
}

/* Directory holding a data set path (the path itself when it is a directory). */
static void data_dir(const char *data, char *buf, size_t cap) {
    struct stat sb;
    snprintf(buf, cap, "%s", data);
    if (stat(data, &sb) == 0 && S_ISDIR(sb.st_mode)) return;
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(buf, cap, ".");
}

/* The strategy's collective before rank 0 writes a checkpoint (every rank calls it). */
static dd_status before_save(const dd_train_run_opts *o, dd_trainer *tr) {
    const dd_strategy *st = dd_trainer_strategy(tr);
    (void)o;
    if (st->ops && st->ops->before_save) return st->ops->before_save(st->self, tr);
    return DD_OK;
}

/* Whether to stop after this step: the stop every rank agreed on (a strategy's), else
 * the caller's flag. */
static int stop_now(const dd_train_run_opts *o, const dd_trainer *tr) {
    const dd_strategy *st = dd_trainer_strategy(tr);
    if (st->ops && st->ops->stop_agreed) return st->ops->stop_agreed(st->self);
    return o->stop && *o->stop;
}

/* ---------------------------------------------------------------- checkpoints of a run */

/* The run driver's checkpoints: rank 0 snapshots the state in the step loop and a
 * background writer (dd_ckpt_async) commits it; one write in flight at a time. */
typedef struct {
    const dd_train_run_opts *o;
    int root;
    dd_ckpt_async *aw;                  /* rank 0 */
    char last[DD_TRAIN_PATH_MAX + 32];  /* RUN/last.ckpt */
    char best[DD_TRAIN_PATH_MAX + 32];  /* RUN/best.ckpt */
    char dir[DD_TRAIN_PATH_MAX + 32];   /* RUN/ckpt (keep_last > 1) */
    size_t keep;                        /* cfg.keep_last */
    double last_t;                      /* dd_now() of the last checkpoint (or the start) */
    double ep_stall, ep_write;          /* the current epoch's checkpoints so far (NaN none) */
} run_saver;

static double max_nan(double a, double b) { return isnan(a) ? b : isnan(b) ? a : a > b ? a : b; }

/* A finished write's seconds go to the record its checkpoint belongs to (tag: the
 * history index; the epoch in progress when it is not in the history yet). */
static void saver_note_write(run_saver *s, dd_trainer *tr, double write_s, long tag) {
    if (isnan(write_s) || tag < 0) return;
    if ((size_t)tag < tr->nhist)
        tr->hist[tag].ckpt_write_s = max_nan(tr->hist[tag].ckpt_write_s, write_s);
    else
        s->ep_write = max_nan(s->ep_write, write_s);
    dd_log(DD_LOG_DEBUG, "checkpoint write finished in the background: %.6f s", write_s);
}

/* Waits for the write in flight (rank 0); its error, naming the file. */
static dd_status saver_join(run_saver *s, dd_trainer *tr, double *wait_s) {
    double w = 0.0, ws = NAN;
    long tag = -1;
    dd_status st = dd_ckpt_async_join(s->aw, &w, &ws, &tag);
    if (wait_s) *wait_s = w;
    if (st == DD_OK) {
        saver_note_write(s, tr, ws, tag);
    } else if (tag >= 0 && (size_t)tag < tr->nhist) {
        /* the end-of-epoch checkpoint of record `tag` failed (the run ends with this
         * error): metrics.jsonl and history.csv, written while it was in flight, list that
         * epoch; rewritten to list only the epochs last.ckpt holds (a resume retrains
         * the rest and writes them again) */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", dd_last_error());
        if (dd_run_write_metrics(s->o->out, &tr->cfg, dd_model_num_params(tr->m), tr->hist, (size_t)tag) != DD_OK)
            dd_log(DD_LOG_WARN, "%s", dd_last_error());
        st = dd_error(st, "%s", msg);
    }
    return st;
}

/* The strategy's collective before rank 0 writes a checkpoint (every rank calls it). */
static dd_status before_save(const dd_train_run_opts *o, dd_trainer *tr);

/* A checkpoint, on every rank (the strategy's before_save is a collective): rank 0 joins
 * the previous write, snapshots the state (best.ckpt too when best) and hands it to the
 * writer. end_of_epoch: the record just appended to the history gets the stall. */
static dd_status take_ckpt(run_saver *s, dd_trainer *tr, int end_of_epoch, int best) {
    double t0 = dd_now(), wait_s = 0.0;
    dd_status st;
    if (s->root && (st = saver_join(s, tr, &wait_s)) != DD_OK) return st;
    if ((st = before_save(s->o, tr)) != DD_OK) return st;
    if (s->root) {
        dd_ckpt_job job;
        memset(&job, 0, sizeof job);
        if (best && (st = dd_trainer_snapshot(tr, s->best, &job.w[job.nw++])) != DD_OK) goto fail;
        if (s->keep > 1) {
            char path[DD_TRAIN_PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/step-%010llu.ckpt", s->dir, (unsigned long long)tr->step);
            if ((st = dd_trainer_snapshot(tr, path, &job.w[job.nw++])) != DD_OK) goto fail;
            snprintf(job.link_to, sizeof job.link_to, "%s", s->last);
            snprintf(job.prune_dir, sizeof job.prune_dir, "%s", s->dir);
            job.keep = s->keep;
        } else if ((st = dd_trainer_snapshot(tr, s->last, &job.w[job.nw++])) != DD_OK) {
            goto fail;
        }
        job.tag = end_of_epoch ? (long)tr->nhist - 1 : (long)tr->nhist;
        if ((st = dd_ckpt_async_submit(s->aw, &job)) != DD_OK) return st;
        goto ok;
    fail:
        if (job.nw > 0 && !job.w[job.nw - 1]) job.nw--; /* the snapshot that failed left no writer */
        dd_ckpt_job_abort(&job);
        return st;
    }
ok:;
    const double now = dd_now(), stall = now - t0;
    s->last_t = now;
    if (end_of_epoch && tr->nhist > 0)
        tr->hist[tr->nhist - 1].ckpt_stall_s = max_nan(tr->hist[tr->nhist - 1].ckpt_stall_s, stall);
    else
        s->ep_stall = max_nan(s->ep_stall, stall);
    if (s->root) {
        dd_log(DD_LOG_DEBUG, "checkpoint at step %llu: the step loop waited %.6f s (%.6f s for the previous write)",
               (unsigned long long)tr->step, stall, wait_s);
        dd_heartbeat_write(s->o->heartbeat, tr->step, tr->epoch, "checkpoint");
    }
    return DD_OK;
}

/* Whether a periodic checkpoint is due after this step: every cfg.ckpt_every steps, or
 * cfg.ckpt_every_s seconds after the last one by rank 0's clock (broadcast, so that every
 * rank takes it: a checkpoint needs every rank's before_save). */
static dd_status periodic_due(const run_saver *s, dd_trainer *tr, int *due) {
    *due = tr->cfg.ckpt_every && tr->step % tr->cfg.ckpt_every == 0;
    if (tr->cfg.ckpt_every_s > 0) {
        double v = s->root && dd_now() - s->last_t >= tr->cfg.ckpt_every_s ? 1.0 : 0.0;
        if (tr->nranks > 1) {
            if (!tr->st.ops->bcast)
                return dd_error(DD_ERR_UNSUPPORTED, "strategy %s cannot agree on --ckpt-every-s (no broadcast)",
                                tr->st.ops->name);
            DD_TRY(tr->st.ops->bcast(tr->st.self, &v, 1));
        }
        if (v > 0) *due = 1;
    }
    return DD_OK;
}

/* ---------------------------------------------------------------- the owner's lock */

/* How long a second writer waits for the lock holder's "pid host" line before naming
 * "another process" instead (the holder writes it right after taking the lock). */
#define DD_RUN_LOCK_WHO_S 3.0

struct dd_run_lock {
    int fd;      /* RUN/.lock, flock(LOCK_EX) held (-1 after release) */
    int locked;  /* 0: the file system has no locks (warned) */
};

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

dd_status dd_run_lock_acquire(const char *run, int create, dd_run_lock **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_run_lock_acquire: NULL output");
    *out = NULL;
    if (!run || !*run) return dd_error(DD_ERR_ARG, "dd_run_lock_acquire: no run directory");
    if (create) {
        DD_TRY(dd_train_mkdirs(run));
    } else if (!is_dir(run)) {
        return dd_error(DD_ERR_IO, "%s: no such run directory", run);
    }
    char path[DD_TRAIN_PATH_MAX + 32];
    DD_TRY(join(path, sizeof path, run, ".lock"));
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return dd_error(DD_ERR_IO, "%s: cannot open the run directory's lock: %s", path, strerror(errno));
    int locked = 1;
    double deadline = -1.0;
    char host_here[256] = "";
    if (gethostname(host_here, sizeof host_here - 1) != 0) host_here[0] = '\0';
    host_here[sizeof host_here - 1] = '\0';
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EINTR) continue;
        if (e == EWOULDBLOCK) {
            /* The holder writes "pid host" right after taking the lock, but a loaded machine
             * can keep it from running for a while: wait up to DD_RUN_LOCK_WHO_S for the
             * line, retrying the lock meanwhile (the holder may also end). A line naming a
             * dead process of this host is a killed holder's, not yet overwritten. */
            if (deadline < 0) deadline = dd_now() + DD_RUN_LOCK_WHO_S;
            char who[256] = "";
            ssize_t k = pread(fd, who, sizeof who - 1, 0);
            who[k > 0 ? k : 0] = '\0';
            long pid = 0;
            char host[200] = "";
            int complete = k > 0 && strchr(who, '\n') && sscanf(who, "%ld %199s", &pid, host) == 2 && pid > 0;
            if (complete && strcmp(host, host_here) == 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) complete = 0;
            if (complete) {
                close(fd);
                return dd_error(DD_ERR_ARG, "%s is in use by pid %ld on host %s (%s): wait for that run to end or choose "
                                            "another --out",
                                run, pid, host, path);
            }
            if (dd_now() >= deadline) {
                close(fd);
                return dd_error(DD_ERR_ARG, "%s is in use by another process (%s): wait for that run to end or choose "
                                            "another --out",
                                run, path);
            }
            usleep(10000);
            continue;
        }
        if (e == ENOLCK || e == EOPNOTSUPP || e == EINVAL || e == ENOSYS) {
            dd_log(DD_LOG_WARN, "%s: the file system cannot lock files (%s): nothing stops a second run from writing into %s",
                   path, strerror(e), run);
            locked = 0;
            break;
        }
        close(fd);
        return dd_error(DD_ERR_IO, "%s: cannot lock: %s", path, strerror(e));
    }
    dd_run_lock *lk = calloc(1, sizeof *lk);
    if (!lk) {
        close(fd);
        return dd_error(DD_ERR_NOMEM, "out of memory");
    }
    lk->fd = fd;
    lk->locked = locked;
    /* the holder, for the message a second writer gets */
    char who[320];
    int n = snprintf(who, sizeof who, "%ld %s\n", (long)getpid(), host_here[0] ? host_here : "?");
    ssize_t wr = -1;
    if (ftruncate(fd, 0) != 0 || (wr = pwrite(fd, who, (size_t)n, 0)) != n) {
        /* a part of the line (a full disk, a file size limit) would name a wrong host:
         * an empty file says "another process" instead */
        dd_log(DD_LOG_WARN, "%s: cannot write the owner's pid into the lock file: %s", path,
               wr >= 0 ? "short write" : strerror(errno));
        if (wr > 0 && ftruncate(fd, 0) != 0) { /* nothing more to do: the file holds a partial line */ }
    }
    *out = lk;
    return DD_OK;
}

void dd_run_lock_release(dd_run_lock **lk) {
    if (!lk || !*lk) return;
    if ((*lk)->fd >= 0) {
        if ((*lk)->locked && ftruncate((*lk)->fd, 0) != 0) { /* nothing to do: the pid is stale */ }
        close((*lk)->fd); /* drops the flock */
    }
    free(*lk);
    *lk = NULL;
}

/* Removes the temporary files of the run's own atomic writers (NAME.tmp.PID and the
 * checkpoints' NAME.tmp.PID.K) that a killed owner left behind, in RUN and in RUN/ckpt
 * (the step files of --keep-last, step-NNNNNNNNNN.ckpt). Called by the lock holder
 * only: every writer of these files is the owner of the run, so none of them is alive. */
static void remove_stale_tmp_in(const char *dir, int steps);
static void remove_stale_tmp(const char *dir) {
    remove_stale_tmp_in(dir, 0);
    char sub[DD_TRAIN_PATH_MAX + 32];
    if (join(sub, sizeof sub, dir, "ckpt") == DD_OK && is_dir(sub)) remove_stale_tmp_in(sub, 1);
    dd_error_clear();
}

static void remove_stale_tmp_in(const char *dir, int steps) {
    static const char *const names[] = {"last.ckpt",     "best.ckpt",   "config.json", "metrics.jsonl",
                                        "history.csv",   "report.html", "parallel.json", NULL};
    DIR *d = opendir(dir);
    if (!d) return;
    int removed = 0;
    char first[256] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        int match = 0;
        char step_name[32] = "";
        if (steps && strncmp(nm, "step-", 5) == 0 && strlen(nm) > 15 && strncmp(nm + 15, ".ckpt", 5) == 0) {
            int digits = 1;
            for (int i = 5; i < 15; i++) digits &= nm[i] >= '0' && nm[i] <= '9';
            if (digits) memcpy(step_name, nm, 20); /* "step-NNNNNNNNNN.ckpt" */
        }
        const char *const one[2] = {step_name, NULL};
        const char *const *list = steps ? one : names;
        for (int k = 0; list[k] && list[k][0] && !match; k++) {
            size_t l = strlen(list[k]);
            if (strncmp(nm, list[k], l) != 0 || strncmp(nm + l, ".tmp.", 5) != 0) continue;
            const char *p = nm + l + 5;
            int digits = 0, dots = 0;
            for (; *p; p++) {
                if (*p >= '0' && *p <= '9') {
                    digits++;
                } else if (*p == '.' && digits && dots == 0) {
                    dots++;
                    digits = 0;
                } else {
                    break;
                }
            }
            match = *p == '\0' && digits > 0;
        }
        if (!match) continue;
        char path[DD_TRAIN_PATH_MAX + 300];
        if (snprintf(path, sizeof path, "%s/%s", dir, nm) >= (int)sizeof path) continue;
        if (unlink(path) == 0) {
            if (!removed) snprintf(first, sizeof first, "%s", nm);
            removed++;
        } else {
            dd_log(DD_LOG_WARN, "%s: cannot remove this stale temporary file: %s", path, strerror(errno));
        }
    }
    closedir(d);
    if (removed)
        dd_log(DD_LOG_INFO, "%s: removed %d stale temporary file%s of a process that was killed while writing (%s%s)", dir,
               removed, removed == 1 ? "" : "s", first, removed > 1 ? ", ..." : "");
}

/* ---------------------------------------------------------------- identity */

/* A new run id: 128 random bits as 32 hex digits. */
static void new_run_id(char id[DD_RUN_ID_LEN + 1]) {
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t k = getrandom(b + got, sizeof b - got, 0);
        if (k > 0) {
            got += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        break;
    }
    if (got < sizeof b) { /* no getrandom: /dev/urandom, else time and pid */
        FILE *f = fopen("/dev/urandom", "rb");
        if (f) {
            got = fread(b, 1, sizeof b, f);
            fclose(f);
        }
        if (got < sizeof b) {
            uint64_t h0 = dd_hash64((uint64_t)(dd_now() * 1e9), (uint64_t)getpid());
            uint64_t h1 = dd_hash64(h0, (uint64_t)(uintptr_t)&got);
            memcpy(b, &h0, 8);
            memcpy(b + 8, &h1, 8);
        }
    }
    for (int i = 0; i < 16; i++) snprintf(id + 2 * i, 3, "%02x", b[i]);
}

static int run_id_ok(const char *s) {
    if (strlen(s) != DD_RUN_ID_LEN) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

/* What a checkpoint says about the run it belongs to. */
typedef struct {
    char run_id[DD_RUN_ID_LEN + 1]; /* "" = none (an earlier version's checkpoint) */
    uint64_t data_id[DD_DATA_ID_N];
    int has_data_id;
    double spec[9];
    int has_spec;
    uint64_t num_frames;
} ckpt_ident;

static dd_status read_ckpt_ident(const char *path, ckpt_ident *id) {
    memset(id, 0, sizeof *id);
    dd_ckpt_reader *r = NULL;
    DD_TRY(dd_ckpt_open(path, &r));
    dd_status st = DD_OK;
    const void *d;
    size_t bytes;
    if (dd_ckpt_has(r, "run_id")) {
        const char *s;
        if ((st = dd_ckpt_get_str(r, "run_id", &s)) != DD_OK) goto done;
        if (!run_id_ok(s)) {
            st = dd_error(DD_ERR_FORMAT, "%s: section 'run_id' is not a run id (32 hex digits): '%.40s'", path, s);
            goto done;
        }
        snprintf(id->run_id, sizeof id->run_id, "%s", s);
    }
    if (dd_ckpt_has(r, "data_id")) {
        if ((st = dd_ckpt_get(r, "data_id", &d, &bytes)) != DD_OK) goto done;
        if (bytes != sizeof id->data_id) {
            st = dd_error(DD_ERR_FORMAT, "%s: section 'data_id' has %zu bytes, expected %zu", path, bytes, sizeof id->data_id);
            goto done;
        }
        memcpy(id->data_id, d, sizeof id->data_id);
        id->has_data_id = 1;
    }
    if (dd_ckpt_has(r, "spec") && dd_ckpt_get(r, "spec", &d, &bytes) == DD_OK && bytes == sizeof id->spec) {
        memcpy(id->spec, d, sizeof id->spec);
        id->has_spec = 1;
    }
    if (dd_ckpt_has(r, "num_frames")) st = dd_ckpt_get_u64(r, "num_frames", &id->num_frames);
done:
    dd_ckpt_close(&r);
    return st;
}

/* A JSON value as text for a message (strings without quotes). */
static void json_val(const cJSON *v, char *buf, size_t cap) {
    if (!v) {
        snprintf(buf, cap, "(none)");
    } else if (cJSON_IsString(v)) {
        snprintf(buf, cap, "%s", v->valuestring);
    } else {
        char *t = cJSON_PrintUnformatted(v);
        snprintf(buf, cap, "%s", t ? t : "?");
        cJSON_free(t);
    }
}

static double json_number(const cJSON *o, const char *k) {
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* a == b k up to rounding */
static int same_ratio(double a, double b, double k) { return fabs(a - b * k) <= 1e-9 * fabs(a) + 1e-300; }

/* Checks that the checkpoint `last` (prev, ck) belongs to the run of RUN/config.json (cj,
 * NULL when there is none): run id, task, model and every configuration field except the
 * number of epochs, the frozen PA model, and the data set's split lengths, frames and
 * fingerprint. Lists every difference. run_id receives the id the resumed run keeps. */
static dd_status check_run_identity(const char *out, const char *last, const dd_run_model *prev, const ckpt_ident *ck,
                                    const cJSON *cj, char run_id[DD_RUN_ID_LEN + 1]) {
    if (!cj) {
        dd_log(DD_LOG_WARN, "%s has no config.json: resuming from %s alone (its configuration is written anew)", out, last);
        if (ck->run_id[0])
            snprintf(run_id, DD_RUN_ID_LEN + 1, "%s", ck->run_id);
        else
            new_run_id(run_id);
        return DD_OK;
    }
    char cpath[DD_TRAIN_PATH_MAX + 32];
    DD_TRY(join(cpath, sizeof cpath, out, "config.json"));
    tbuf diff = {0};
    int ndiff = 0;
#define DIFF(...)                                         \
    do {                                                  \
        tb_printf(&diff, "%s", ndiff++ ? ", " : "");      \
        tb_printf(&diff, __VA_ARGS__);                    \
    } while (0)
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(cj, "run_id");
    const char *cj_id = cJSON_IsString(rid) ? rid->valuestring : NULL;
    if (cj_id && !run_id_ok(cj_id)) {
        free(diff.p);
        return dd_error(DD_ERR_FORMAT, "%s: \"run_id\" is not a run id (32 hex digits): '%.40s'", cpath, cj_id);
    }
    /* the configuration, field by field (epochs may change on resume) */
    const cJSON *cc = cJSON_GetObjectItemCaseSensitive(cj, "config");
    dd_train_cfg jc;
    if (!cJSON_IsObject(cc)) {
        DIFF("configuration present (config.json: none)");
    } else {
        dd_status s2 = dd_train_cfg_from_obj(cc, cpath, &jc);
        if (s2 != DD_OK) {
            free(diff.p);
            return dd_error_prefix(s2, "cannot check that %s belongs to this run: ", last);
        }
        cJSON *a = dd_train_cfg_json_obj(&prev->cfg), *b = dd_train_cfg_json_obj(&jc);
        /* a rescale (dd_trainer_rescale) changes the batch and the learning rates by one
         * factor; config.json is rewritten after the checkpoint that first holds it, so
         * a crash between the two leaves them apart by exactly that factor */
        const double k = (double)prev->cfg.batch / (double)jc.batch;
        const int rescaled = prev->cfg.batch != jc.batch && same_ratio(prev->cfg.lr, jc.lr, k) &&
                             same_ratio(prev->cfg.sched.min_lr, jc.sched.min_lr, k) &&
                             same_ratio(prev->cfg.sched.eta_min, jc.sched.eta_min, k);
        for (const cJSON *x = a ? a->child : NULL; x && b; x = x->next) {
            if (strcmp(x->string, "epochs") == 0) continue;
            if (rescaled && (strcmp(x->string, "batch") == 0 || strcmp(x->string, "lr") == 0 ||
                             strcmp(x->string, "min_lr") == 0 || strcmp(x->string, "eta_min") == 0))
                continue;
            if (strcmp(x->string, "model_opts") == 0) {
                /* the model's options one by one (an option one side lacks: none) */
                const cJSON *mb = cJSON_GetObjectItemCaseSensitive(b, "model_opts");
                for (const cJSON *u = x->child; u; u = u->next) {
                    const cJSON *v = mb ? cJSON_GetObjectItemCaseSensitive(mb, u->string) : NULL;
                    if (v && cJSON_Compare(u, v, 1)) continue;
                    char va[128], vb[128];
                    json_val(u, va, sizeof va);
                    json_val(v, vb, sizeof vb);
                    DIFF("%s %s (config.json: %s)", u->string, va, vb);
                }
                for (const cJSON *v = mb ? mb->child : NULL; v; v = v->next)
                    if (!cJSON_GetObjectItemCaseSensitive(x, v->string)) {
                        char vb[128];
                        json_val(v, vb, sizeof vb);
                        DIFF("%s none (config.json: %s)", v->string, vb);
                    }
                continue;
            }
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (y && cJSON_Compare(x, y, 1)) continue;
            char va[128], vb[128];
            json_val(x, va, sizeof va);
            json_val(y, vb, sizeof vb);
            DIFF("%s %s (config.json: %s)", x->string, va, vb);
        }
        cJSON_Delete(a);
        cJSON_Delete(b);
    }
    /* the frozen PA model of a DPD */
    const cJSON *pm = cJSON_GetObjectItemCaseSensitive(cj, "pa_model");
    const cJSON *pn = pm ? cJSON_GetObjectItemCaseSensitive(pm, "name") : NULL;
    if (prev->pa_model || pm) {
        const char *mine = prev->pa_model ? dd_model_name(prev->pa_model) : "none";
        const char *theirs = cJSON_IsString(pn) ? pn->valuestring : "none";
        if (strcmp(mine, theirs) != 0) {
            DIFF("PA model %s (config.json: %s)", mine, theirs);
        } else if (prev->pa_model) {
            const dd_model_cfg *pc = dd_model_config(prev->pa_model);
            const cJSON *po = cJSON_GetObjectItemCaseSensitive(pm, "model_opts");
            for (int i = 0; i < pc->n; i++) {
                /* config.json of an earlier version holds "hidden" only */
                double h = po ? json_number(po, pc->v[i].name)
                              : strcmp(pc->v[i].name, "hidden") == 0 ? json_number(pm, "hidden") : NAN;
                if (!isnan(h) && h != pc->v[i].value)
                    DIFF("PA model %s %d (config.json: %.0f)", pc->v[i].name, pc->v[i].value, h);
            }
            double np = json_number(pm, "n_params");
            if (!isnan(np) && np != (double)dd_model_num_params(prev->pa_model))
                DIFF("PA model parameters %zu (config.json: %.0f)", dd_model_num_params(prev->pa_model), np);
        }
    }
    /* the data set */
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(cj, "data_stats");
    if (ds) {
        static const char *const keys[3] = {"train_samples", "val_samples", "test_samples"};
        for (int k = 0; k < 3 && ck->has_data_id; k++) {
            double v = json_number(ds, keys[k]);
            if (!isnan(v) && v != (double)ck->data_id[k])
                DIFF("%s %llu (config.json: %.0f)", keys[k], (unsigned long long)ck->data_id[k], v);
        }
        double fr = json_number(ds, "train_frames");
        if (!isnan(fr) && ck->num_frames && fr != (double)ck->num_frames)
            DIFF("train_frames %llu (config.json: %.0f)", (unsigned long long)ck->num_frames, fr);
        const cJSON *fp = cJSON_GetObjectItemCaseSensitive(ds, "fingerprint");
        if (cJSON_IsString(fp) && ck->has_data_id) {
            char mine[3 * 17 + 1];
            snprintf(mine, sizeof mine, "%016llx-%016llx-%016llx", (unsigned long long)ck->data_id[3],
                     (unsigned long long)ck->data_id[4], (unsigned long long)ck->data_id[5]);
            if (strcmp(mine, fp->valuestring) != 0) DIFF("data fingerprint %s (config.json: %s)", mine, fp->valuestring);
        }
    }
    /* last: the run id (an earlier version's files have none) */
    if (cj_id || ck->run_id[0]) {
        if (!cj_id || !ck->run_id[0] || strcmp(cj_id, ck->run_id) != 0)
            DIFF("run id %s (config.json: %s)", ck->run_id[0] ? ck->run_id : "none (an earlier distdpd's checkpoint)",
                 cj_id ? cj_id : "none");
    }
#undef DIFF
    if (diff.oom) {
        free(diff.p);
        return dd_error(DD_ERR_NOMEM, "out of memory");
    }
    if (ndiff) {
        dd_status st = dd_error(DD_ERR_MISMATCH,
                                "%s belongs to another run: %s; nothing was written (put the run's own last.ckpt back, or "
                                "train the other one with a new --out)",
                                last, diff.p);
        free(diff.p);
        return st;
    }
    free(diff.p);
    if (ck->run_id[0]) {
        snprintf(run_id, DD_RUN_ID_LEN + 1, "%s", ck->run_id);
    } else {
        new_run_id(run_id);
        dd_log(DD_LOG_WARN,
               "%s has no run id (written by an earlier distdpd): resuming after checking its task, model, "
               "configuration and data only; the run gets run id %s",
               last, run_id);
    }
    return DD_OK;
}

/* Checks that the data set about to be trained on is the one the checkpoint was made on:
 * split lengths and content (data_id), and the spec fields the metrics use. */
static dd_status check_data_identity(const char *last, const char *data, const ckpt_ident *ck, const dd_dataset *ds,
                                     const uint64_t id[DD_DATA_ID_N]) {
    tbuf diff = {0};
    int ndiff = 0;
    static const char *const split[3] = {"train", "val", "test"};
    for (int k = 0; k < 3 && ck->has_data_id; k++) {
        if (id[k] != ck->data_id[k])
            tb_printf(&diff, "%sthe %s split has %llu samples (%s: %llu)", ndiff++ ? ", " : "", split[k],
                      (unsigned long long)id[k], "last.ckpt", (unsigned long long)ck->data_id[k]);
        else if (id[3 + k] != ck->data_id[3 + k])
            tb_printf(&diff, "%sthe %s split holds other samples (hash %016llx, last.ckpt: %016llx)", ndiff++ ? ", " : "",
                      split[k], (unsigned long long)id[3 + k], (unsigned long long)ck->data_id[3 + k]);
    }
    if (ck->has_spec) {
        dd_spec cs;
        dd_spec_unpack(ck->spec, &cs);
        const dd_spec *sp = &ds->spec;
        const char *names[6] = {"input_signal_fs", "bw_main_ch", "bw_sub_ch", "n_sub_ch", "nperseg", "bw_occupied"};
        double a[6] = {sp->fs, sp->bw_main, sp->bw_sub, sp->n_sub, (double)sp->nperseg, sp->bw_occupied};
        double b[6] = {cs.fs, cs.bw_main, cs.bw_sub, cs.n_sub, (double)cs.nperseg, cs.bw_occupied};
        for (int k = 0; k < 6; k++)
            if (a[k] != b[k] && !(isnan(a[k]) && isnan(b[k])))
                tb_printf(&diff, "%sspec %s %.10g (last.ckpt: %.10g)", ndiff++ ? ", " : "", names[k], a[k], b[k]);
    }
    if (diff.oom) {
        free(diff.p);
        return dd_error(DD_ERR_NOMEM, "out of memory");
    }
    if (ndiff) {
        dd_status st = dd_error(DD_ERR_MISMATCH,
                                "%s was made on another data set than %s: %s; nothing was written (give the run's own "
                                "data set with --data, or start a new run)",
                                last, data, diff.p);
        free(diff.p);
        return st;
    }
    free(diff.p);
    return DD_OK;
}

/* A new run must not go into a directory that holds one. */
static dd_status check_no_run(const char *out) {
    static const char *const marks[] = {"config.json", "last.ckpt", "best.ckpt", "metrics.jsonl", NULL};
    char found[128] = "", p[DD_TRAIN_PATH_MAX + 32];
    size_t n = 0;
    int has_last = 0;
    for (int k = 0; marks[k]; k++) {
        if (join(p, sizeof p, out, marks[k]) != DD_OK || !file_exists(p)) continue;
        n += (size_t)snprintf(found + n, sizeof found - n, "%s%s", n ? ", " : "", marks[k]);
        if (k == 1) has_last = 1;
    }
    if (!n) return DD_OK;
    if (has_last)
        return dd_error(DD_ERR_ARG, "%s already holds a run (%s): continue it with --resume or choose another --out", out,
                        found);
    return dd_error(DD_ERR_ARG,
                    "%s already holds a run (%s) without a last.ckpt to --resume from (its owner was killed before the "
                    "first checkpoint): remove the directory or choose another --out",
                    out, found);
}

/* RUN/config.json parsed, or *cj = NULL when there is none. */
static dd_status read_config_json(const char *out, cJSON **cj) {
    *cj = NULL;
    char cpath[DD_TRAIN_PATH_MAX + 32], *txt = NULL;
    DD_TRY(join(cpath, sizeof cpath, out, "config.json"));
    if (!file_exists(cpath)) return DD_OK;
    DD_TRY(dd_read_text(cpath, &txt, NULL));
    *cj = cJSON_Parse(txt);
    free(txt);
    if (!*cj || !cJSON_IsObject(*cj)) {
        cJSON_Delete(*cj);
        *cj = NULL;
        return dd_error(DD_ERR_FORMAT,
                        "%s: not a JSON object, so last.ckpt cannot be checked against the run (remove config.json to "
                        "resume from last.ckpt alone)",
                        cpath);
    }
    return DD_OK;
}

dd_status dd_train_run(const dd_train_cfg *cfg_in, const dd_train_run_opts *o) {
    if (!o || !o->out) return dd_error(DD_ERR_ARG, "dd_train_run: no run directory");
    if (!o->resume && !cfg_in) return dd_error(DD_ERR_ARG, "dd_train_run: no configuration");
    const int root = !o->strategy || o->strategy->rank == 0;
    char last[DD_TRAIN_PATH_MAX + 32], best[DD_TRAIN_PATH_MAX + 32], dir[DD_TRAIN_PATH_MAX];
    DD_TRY(join(last, sizeof last, o->out, "last.ckpt"));
    DD_TRY(join(best, sizeof best, o->out, "best.ckpt"));
    dd_run_model prev, parun;
    memset(&prev, 0, sizeof prev);
    memset(&parun, 0, sizeof parun);
    dd_dataset *ds = NULL;
    dd_trainer *tr = NULL;
    dd_pa *tpa = NULL;
    dd_run_lock *own_lock = NULL;
    cJSON *cj = NULL;
    dd_status st = DD_OK;
    dd_train_cfg cfg;
    const char *data = o->data;
    const char *pa_run = o->pa_run;
    char pa_run_buf[DD_TRAIN_PATH_MAX];
    char run_id[DD_RUN_ID_LEN + 1] = "";
    uint64_t data_id[DD_DATA_ID_N];
    ckpt_ident ck;
    memset(&ck, 0, sizeof ck);
    dd_model_ref pref, *pp = NULL;
    run_saver saver;
    memset(&saver, 0, sizeof saver);

    if (o->resume) {
        if (!is_dir(o->out)) return dd_error(DD_ERR_IO, "%s: nothing to resume: no such run directory", o->out);
        /* the owner's lock first: a run that is still training is not resumed */
        if (root && !o->lock && (st = dd_run_lock_acquire(o->out, 0, &own_lock)) != DD_OK) return st;
        if (root) remove_stale_tmp(o->out);
        if (!file_exists(last)) {
            st = dd_error(DD_ERR_IO, "%s: nothing to resume: no last.ckpt in the run directory", o->out);
            goto done;
        }
        if ((st = dd_run_model_load(o->out, "last", &prev)) != DD_OK) goto done;
        if (root) { /* is last.ckpt this run's? (refused before anything is written) */
            if ((st = read_ckpt_ident(last, &ck)) != DD_OK) goto done;
            if ((st = read_config_json(o->out, &cj)) != DD_OK) goto done;
            if ((st = check_run_identity(o->out, last, &prev, &ck, cj, run_id)) != DD_OK) goto done;
        }
        cfg = prev.cfg;
        if (o->epochs_override > 0) {
            if (o->epochs_override < prev.epoch) {
                st = dd_error(DD_ERR_ARG, "%s: the run has already trained %d epochs, more than --epochs %d", o->out,
                              prev.epoch, o->epochs_override);
                goto done;
            }
            cfg.epochs = o->epochs_override;
        }
        if (!data) data = prev.data;
        if (!pa_run && cj) { /* keep the PA run recorded in config.json */
            const cJSON *pr = cJSON_GetObjectItemCaseSensitive(cj, "pa_run");
            if (cJSON_IsString(pr)) {
                snprintf(pa_run_buf, sizeof pa_run_buf, "%s", pr->valuestring);
                pa_run = pa_run_buf;
            }
        }
        if (prev.pa_model) {
            pref.name = dd_model_name(prev.pa_model);
            pref.cfg = *dd_model_config(prev.pa_model);
            pref.params = prev.pa_params;
            pref.n = dd_model_params(prev.pa_model)->total;
            pp = &pref;
        }
    } else {
        cfg = *cfg_in;
        DD_TRY(dd_train_cfg_check(&cfg));
        if (cfg.task != DD_TRAIN_PA) {
            if (!pa_run) return dd_error(DD_ERR_ARG, "DPD training needs the PA model run (--pa-run)");
            if ((st = dd_run_model_load(pa_run, "best", &parun)) != DD_OK) goto done;
            if (parun.cfg.task != DD_TRAIN_PA) {
                st = dd_error(DD_ERR_ARG, "%s is a DPD run (%s), not a PA model run", pa_run, dd_train_task_name(parun.cfg.task));
                goto done;
            }
            pref.name = dd_model_name(parun.model);
            pref.cfg = *dd_model_config(parun.model);
            pref.params = parun.params;
            pref.n = dd_model_params(parun.model)->total;
            pp = &pref;
            if (!data) data = parun.data;
        }
        if (root) {
            /* claim the directory: the lock, then (only then, so that two simultaneous
             * starts cannot both pass) the check that it holds no run yet */
            if (!o->lock && (st = dd_run_lock_acquire(o->out, 1, &own_lock)) != DD_OK) goto done;
            if (o->lock && (st = dd_train_mkdirs(o->out)) != DD_OK) goto done;
            remove_stale_tmp(o->out);
            if ((st = check_no_run(o->out)) != DD_OK) goto done;
            new_run_id(run_id);
        }
    }
    if (!data || !*data) {
        st = dd_error(DD_ERR_ARG, "no data set given (--data)");
        goto done;
    }
    if ((st = dd_dataset_load(data, &ds)) != DD_OK) goto done;
    if (root) {
        dd_train_data_id(ds, data_id);
        if (o->resume && (st = check_data_identity(last, data, &ck, ds, data_id)) != DD_OK) goto done;
    }
    if ((st = dd_trainer_create(&cfg, ds, pp, o->strategy, &tr)) != DD_OK) goto done;
    {
        /* checkpoints record the absolute path, so a resume works from any directory */
        char *abs = realpath(data, NULL);
        dd_trainer_set_data_path(tr, abs ? abs : data);
        free(abs);
    }
    if (root) dd_trainer_set_identity(tr, run_id, data_id);
    int true_found = 0;
    if (cfg.task != DD_TRAIN_PA) {
        data_dir(data, dir, sizeof dir);
        if ((st = dd_sim_pa_load(dir, ds, &tpa, &true_found)) != DD_OK) {
            dd_error_prefix(st, "true PA of the simulated data set: ");
            goto done;
        }
        if (tpa && (st = dd_trainer_set_true_pa(tr, tpa)) != DD_OK) goto done;
    }
    if (o->resume && (st = dd_trainer_load(tr, last, 0)) != DD_OK) goto done;
    if (o->rescale_batch && (st = dd_trainer_rescale(tr, o->rescale_batch, o->rescale_warmup)) != DD_OK) goto done;
    (void)dd_trainer_rescaled(tr); /* config.json below holds it */
    if (root && (st = write_config_json(o->out, tr, data, pa_run, o->command, true_found)) != DD_OK) goto done;

    int done_epochs = 0, stopped = 0;
    if (o->interrupted) *o->interrupted = 0;
    saver.o = o;
    saver.root = root;
    saver.keep = tr->cfg.keep_last;
    saver.ep_stall = saver.ep_write = NAN;
    snprintf(saver.last, sizeof saver.last, "%s", last);
    snprintf(saver.best, sizeof saver.best, "%s", best);
    if ((st = join(saver.dir, sizeof saver.dir, o->out, "ckpt")) != DD_OK) goto done;
    if (root && saver.keep > 1 && (st = dd_train_mkdirs(saver.dir)) != DD_OK) goto done;
    if (root && (st = dd_ckpt_async_create(o->ckpt_sync, &saver.aw)) != DD_OK) goto done;
    saver.last_t = dd_now();
    while (tr->epoch < tr->cfg.epochs) {
        while (!dd_trainer_epoch_done(tr)) {
            const double ts = dd_now();
            if ((st = dd_trainer_step(tr, NULL)) != DD_OK) goto done;
            if (root) dd_heartbeat_step(o->heartbeat, tr->step, tr->epoch, dd_now() - ts);
            progress(o, tr, 0, tr->ep_loss_sum / (double)tr->batch, NULL);
            if (dd_trainer_epoch_done(tr)) break;
            if (stop_now(o, tr)) {
                if ((st = take_ckpt(&saver, tr, 0, 0)) != DD_OK) goto done;
                stopped = 1;
                goto finish;
            }
            int due = 0;
            if ((st = periodic_due(&saver, tr, &due)) != DD_OK) goto done;
            if (due && (st = take_ckpt(&saver, tr, 0, 0)) != DD_OK) goto done;
        }
        if (root) dd_heartbeat_write(o->heartbeat, tr->step, tr->epoch, "train");
        progress(o, tr, 1, tr->ep_loss_sum / (double)tr->nbatches, NULL);
        dd_epoch_record rec;
        if ((st = dd_trainer_end_epoch(tr, &rec)) != DD_OK) goto done;
        {
            /* the driver's fields of the record: this process's restart count, the
             * epoch's checkpoints so far (the end-of-epoch one adds its stall below) */
            dd_epoch_record *hr = &tr->hist[tr->nhist - 1];
            hr->restart = o->restart;
            hr->ckpt_stall_s = saver.ep_stall;
            hr->ckpt_write_s = saver.ep_write;
            saver.ep_stall = saver.ep_write = NAN;
        }
        if ((st = take_ckpt(&saver, tr, 1, rec.best)) != DD_OK) goto done;
        /* a rescale applied at this epoch boundary changed the batch and learning rate */
        if (dd_trainer_rescaled(tr) && root &&
            (st = write_config_json(o->out, tr, data, pa_run, o->command, true_found)) != DD_OK)
            goto done;
        rec = tr->hist[tr->nhist - 1];
        if (root && (st = dd_run_write_metrics(o->out, &tr->cfg, dd_model_num_params(tr->m), tr->hist, tr->nhist)) != DD_OK)
            goto done;
        progress(o, tr, 2, rec.train_loss, &rec);
        done_epochs++;
        if (stop_now(o, tr) && tr->epoch < tr->cfg.epochs) {
            stopped = 1;
            goto finish;
        }
        if (o->stop_after_epochs > 0 && done_epochs >= o->stop_after_epochs) break;
    }
finish:
    /* training stops here (the end, or a signal): the last write must be complete, and
     * metrics.jsonl gets the write times of the last checkpoints */
    if (root) {
        if ((st = saver_join(&saver, tr, NULL)) != DD_OK) goto done;
        if (tr->nhist > 0 &&
            (st = dd_run_write_metrics(o->out, &tr->cfg, dd_model_num_params(tr->m), tr->hist, tr->nhist)) != DD_OK)
            goto done;
    }
    if (stopped) {
        if (o->interrupted) *o->interrupted = 1;
        goto done;
    }
    if (root && tr->nhist > 0 && !file_exists(best)) st = dd_error(DD_ERR_INTERNAL, "%s: best.ckpt is missing", o->out);
    if (o->mem) dd_mem_stats_get(o->mem);
    if (st == DD_OK && root && o->write_report && tr->nhist > 0) {
        if (dd_trainer_unshard_params(tr) != DD_OK) {
            dd_log(DD_LOG_WARN, "%s: no report.html: %s", o->out, dd_last_error());
            st = DD_OK;
            goto done;
        }
        if ((st = dd_trainer_load(tr, best, 1)) != DD_OK) goto done;
        st = dd_train_write_report(tr, o->out, o->command);
    }
done:
    dd_ckpt_async_destroy(&saver.aw); /* after an error: the write in flight ends first */
    dd_trainer_destroy(&tr);
    dd_pa_destroy(&tpa);
    dd_dataset_free(&ds);
    dd_run_model_free(&prev);
    dd_run_model_free(&parun);
    cJSON_Delete(cj);
    dd_run_lock_release(&own_lock);
    return st;
}
