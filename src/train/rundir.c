/* Run directories (train.h): the training driver dd_train_run (config.json,
 * metrics.jsonl, history.csv, best.ckpt, last.ckpt, report.html; exact resume from
 * last.ckpt), loading a trained model back from a run, and re-evaluating a run. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "distdpd/train.h"
#include "train_internal.h"

/* ---------------------------------------------------------------- small file helpers */

dd_status dd_train_read_text(const char *path, char **text, size_t *len) {
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return dd_error(DD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 4097 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r < 4096) break;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return dd_error(DD_ERR_NOMEM, "%s: out of memory reading the file", path);
    if (err) {
        free(buf);
        return dd_error(DD_ERR_IO, "%s: read error", path);
    }
    buf[n] = '\0';
    *text = buf;
    if (len) *len = n;
    return DD_OK;
}

dd_status dd_train_write_text(const char *path, const char *text, size_t len) {
    char tmp[DD_TRAIN_PATH_MAX + 64];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return dd_error(DD_ERR_ARG, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return dd_error(DD_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    int ok = fwrite(text, 1, len, f) == len;
    ok = (fflush(f) == 0) && ok;
    ok = (fsync(fileno(f)) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return dd_error(DD_ERR_IO, "%s: write failed: %s", path, strerror(e));
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
    if (snprintf(buf, cap, "%s/%s", dir, name) >= (int)cap) return dd_error(DD_ERR_ARG, "%s: path too long", dir);
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
    tb_printf(&c, "EPOCH,N_EPOCH,TIME,LR,BATCH_SIZE,N_PARAM,FRAME_LENGTH,BACKBONE,HIDDEN_SIZE,TRAIN_LOSS,"
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
        tb_printf(&j, ",\"best\":%s}\n", i == best ? "true" : "false");

        minutes += (r->time_s + r->eval_time_s) / 60.0;
        tb_printf(&c, "%d,%d,%.10g,%.10g,%zu,%zu,%zu,%s,%d", r->epoch - 1, cfg->epochs, minutes, r->lr, cfg->batch,
                  nparams, cfg->frame, cfg->model, cfg->model_cfg.hidden);
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
    if (command) cJSON_AddStringToObject(root, "command", command);
    cJSON_AddStringToObject(root, "data", data ? data : "");
    if (pa_run) cJSON_AddStringToObject(root, "pa_run", pa_run);
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
            cJSON_AddNumberToObject(p, "hidden", dd_model_config(tr->pa)->hidden);
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

dd_status dd_train_run(const dd_train_cfg *cfg_in, const dd_train_run_opts *o) {
    if (!o || !o->out) return dd_error(DD_ERR_ARG, "dd_train_run: no run directory");
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
    dd_status st = DD_OK;
    dd_train_cfg cfg;
    const char *data = o->data;
    const char *pa_run = o->pa_run;
    char pa_run_buf[DD_TRAIN_PATH_MAX];
    dd_model_ref pref, *pp = NULL;

    if (o->resume) {
        if (!file_exists(last)) return dd_error(DD_ERR_IO, "%s: nothing to resume: no last.ckpt in the run directory", o->out);
        if ((st = dd_run_model_load(o->out, "last", &prev)) != DD_OK) goto done;
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
        if (!pa_run) { /* keep the PA run recorded in config.json */
            char cpath[DD_TRAIN_PATH_MAX + 32], *txt = NULL;
            if (join(cpath, sizeof cpath, o->out, "config.json") == DD_OK && file_exists(cpath) &&
                dd_train_read_text(cpath, &txt, NULL) == DD_OK) {
                cJSON *cj = cJSON_Parse(txt);
                const cJSON *pr = cj ? cJSON_GetObjectItemCaseSensitive(cj, "pa_run") : NULL;
                if (cJSON_IsString(pr)) {
                    snprintf(pa_run_buf, sizeof pa_run_buf, "%s", pr->valuestring);
                    pa_run = pa_run_buf;
                }
                cJSON_Delete(cj);
            }
            free(txt);
            dd_error_clear();
        }
        if (prev.pa_model) {
            pref.name = dd_model_name(prev.pa_model);
            pref.cfg = *dd_model_config(prev.pa_model);
            pref.params = prev.pa_params;
            pref.n = dd_model_params(prev.pa_model)->total;
            pp = &pref;
        }
    } else {
        if (!cfg_in) return dd_error(DD_ERR_ARG, "dd_train_run: no configuration");
        cfg = *cfg_in;
        DD_TRY(dd_train_cfg_check(&cfg));
        if (file_exists(last))
            return dd_error(DD_ERR_ARG, "%s already holds a run (last.ckpt): continue it with --resume or choose another --out",
                            o->out);
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
    }
    if (!data || !*data) {
        st = dd_error(DD_ERR_ARG, "no data set given (--data)");
        goto done;
    }
    if (root && (st = dd_train_mkdirs(o->out)) != DD_OK) goto done;
    if ((st = dd_dataset_load(data, &ds)) != DD_OK) goto done;
    if ((st = dd_trainer_create(&cfg, ds, pp, o->strategy, &tr)) != DD_OK) goto done;
    {
        /* checkpoints record the absolute path, so a resume works from any directory */
        char *abs = realpath(data, NULL);
        dd_trainer_set_data_path(tr, abs ? abs : data);
        free(abs);
    }
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
    if (root && (st = write_config_json(o->out, tr, data, pa_run, o->command, true_found)) != DD_OK) goto done;

    int done_epochs = 0;
    if (o->interrupted) *o->interrupted = 0;
    while (tr->epoch < tr->cfg.epochs) {
        while (!dd_trainer_epoch_done(tr)) {
            if ((st = dd_trainer_step(tr, NULL)) != DD_OK) goto done;
            progress(o, tr, 0, tr->ep_loss_sum / (double)tr->batch, NULL);
            if (stop_now(o, tr) && !dd_trainer_epoch_done(tr)) {
                if ((st = before_save(o, tr)) != DD_OK) goto done;
                if (root && (st = dd_trainer_save(tr, last)) != DD_OK) goto done;
                if (o->interrupted) *o->interrupted = 1;
                goto done;
            }
            if (tr->cfg.ckpt_every && tr->step % tr->cfg.ckpt_every == 0 && !dd_trainer_epoch_done(tr)) {
                if ((st = before_save(o, tr)) != DD_OK) goto done;
                if (root && (st = dd_trainer_save(tr, last)) != DD_OK) goto done;
            }
        }
        progress(o, tr, 1, tr->ep_loss_sum / (double)tr->nbatches, NULL);
        dd_epoch_record rec;
        if ((st = dd_trainer_end_epoch(tr, &rec)) != DD_OK) goto done;
        if ((st = before_save(o, tr)) != DD_OK) goto done;
        if (root) {
            if (rec.best && (st = dd_trainer_save(tr, best)) != DD_OK) goto done;
            if ((st = dd_trainer_save(tr, last)) != DD_OK) goto done;
            if ((st = dd_run_write_metrics(o->out, &tr->cfg, dd_model_num_params(tr->m), tr->hist, tr->nhist)) != DD_OK)
                goto done;
        }
        progress(o, tr, 2, rec.train_loss, &rec);
        done_epochs++;
        if (stop_now(o, tr) && tr->epoch < tr->cfg.epochs) {
            if (o->interrupted) *o->interrupted = 1;
            goto done;
        }
        if (o->stop_after_epochs > 0 && done_epochs >= o->stop_after_epochs) break;
    }
    if (root && tr->nhist > 0 && !file_exists(best)) st = dd_error(DD_ERR_INTERNAL, "%s: best.ckpt is missing", o->out);
    if (st == DD_OK && root && o->write_report && tr->nhist > 0) {
        if ((st = dd_trainer_unshard_params(tr)) != DD_OK) {
            dd_log(DD_LOG_WARN, "%s: no report.html: %s", o->out, dd_last_error());
            st = DD_OK;
            goto done;
        }
        if ((st = dd_trainer_load(tr, best, 1)) != DD_OK) goto done;
        st = dd_train_write_report(tr, o->out, o->command);
    }
done:
    dd_trainer_destroy(&tr);
    dd_pa_destroy(&tpa);
    dd_dataset_free(&ds);
    dd_run_model_free(&prev);
    dd_run_model_free(&parun);
    return st;
}
