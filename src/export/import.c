/* Import of PyTorch / OpenDPD weights (an .npz or safetensors file, e.g. from
 * `distdpd export` or tools/opendpd_import.py) into a new run directory whose
 * checkpoints hold them (export.h, docs/deploy.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "distdpd/export.h"
#include "distdpd/train.h"
#include "train/train_internal.h"

/* Fills the options the model declares and cfg leaves unset: "hidden" from the second
 * dimension of rnn.weight_hh_l0, "layers" from the number of rnn.weight_ih_l<k>. */
static void infer_opts(const dd_tensor_set *s, const char *model, dd_model_cfg *cfg) {
    const dd_model_info *info = dd_model_find(model);
    if (!info) return;
    for (const dd_model_opt_info *o = info->opts; o && o->name; o++) {
        if (dd_model_cfg_get(cfg, o->name)) continue;
        int v = 0;
        for (size_t i = 0; i < s->n; i++) {
            const char *nm = s->t[i].name, *p = strstr(nm, "rnn.weight_");
            if (!p || (p != nm && p[-1] != '.')) continue;
            if (strcmp(o->name, "hidden") == 0 && strcmp(p, "rnn.weight_hh_l0") == 0 && s->t[i].ndim == 2)
                v = (int)s->t[i].shape[1];
            if (strcmp(o->name, "layers") == 0 && strncmp(p, "rnn.weight_ih_l", 15) == 0) v++;
        }
        if (v > 0) dd_model_cfg_set(cfg, o->name, v);
    }
}

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

dd_status dd_run_import(const char *tensors, const dd_train_cfg *cfg_in, const char *data, const char *pa_run,
                        const char *out, char *desc, size_t cap) {
    if (!tensors || !cfg_in || !data || !out) return dd_error(DD_ERR_ARG, "dd_run_import: NULL argument");
    if (cfg_in->task != DD_TRAIN_PA && !pa_run)
        return dd_error(DD_ERR_ARG, "import: a DPD (task %s) needs the PA run its PA model comes from",
                        dd_train_task_name(cfg_in->task));
    dd_train_cfg cfg = *cfg_in;
    dd_tensor_set s;
    dd_dataset *ds = NULL;
    dd_run_model pa;
    dd_trainer *tr = NULL;
    dd_run_lock *lk = NULL;
    char path[DD_TRAIN_PATH_MAX + 64];
    memset(&pa, 0, sizeof pa);
    DD_TRY(dd_tensors_read(tensors, &s));
    dd_status st;
    if (!cfg.model[0]) snprintf(cfg.model, sizeof cfg.model, "%.31s", s.meta_model[0] ? s.meta_model : "gru");
    if (cfg.model_cfg.n == 0 && s.meta_opts[0] && strcmp(cfg.model, s.meta_model) == 0 &&
        (st = dd_model_cfg_parse(&cfg.model_cfg, s.meta_opts)) != DD_OK) {
        dd_error_prefix(st, "%s: __metadata__ model_opts: ", tensors);
        goto done;
    }
    infer_opts(&s, cfg.model, &cfg.model_cfg);
    if ((st = dd_train_cfg_check(&cfg)) != DD_OK) goto done;
    if ((st = dd_run_lock_acquire(out, 1, &lk)) != DD_OK) goto done;
    snprintf(path, sizeof path, "%s/best.ckpt", out);
    if (file_exists(path)) {
        st = dd_error(DD_ERR_ARG, "import: %s already holds a run (best.ckpt): choose a new --out", out);
        goto done;
    }
    if ((st = dd_dataset_load(data, &ds)) != DD_OK) goto done;
    dd_model_ref pref, *pp = NULL;
    if (pa_run) {
        if ((st = dd_run_model_load(pa_run, "best", &pa)) != DD_OK) goto done;
        pref.name = dd_model_name(pa.model);
        pref.cfg = *dd_model_config(pa.model);
        pref.params = pa.params;
        pref.n = dd_model_params(pa.model)->total;
        pp = &pref;
    }
    if ((st = dd_trainer_create(&cfg, ds, pp, NULL, &tr)) != DD_OK) goto done;
    dd_trainer_set_data_path(tr, data);
    const dd_model *m = dd_trainer_model(tr);
    if ((st = dd_tensors_to_params(&s, dd_model_params(m), tensors, dd_trainer_params(tr))) != DD_OK) goto done;
    snprintf(path, sizeof path, "%s/last.ckpt", out);
    if ((st = dd_trainer_save(tr, path)) != DD_OK) goto done;
    snprintf(path, sizeof path, "%s/best.ckpt", out);
    if ((st = dd_trainer_save(tr, path)) != DD_OK) goto done;
    {
        cJSON *o = cJSON_CreateObject();
        char opts[256];
        dd_model_cfg_format(dd_model_config(m), opts, sizeof opts);
        cJSON_AddStringToObject(o, "generator", "distdpd " DD_VERSION_STRING " import");
        cJSON_AddStringToObject(o, "source", tensors);
        cJSON_AddStringToObject(o, "data", data);
        cJSON_AddStringToObject(o, "task", dd_train_task_name(cfg.task));
        cJSON_AddStringToObject(o, "model", dd_model_name(m));
        cJSON_AddStringToObject(o, "model_opts", opts);
        if (pa_run) cJSON_AddStringToObject(o, "pa_run", pa_run);
        char *txt = cJSON_Print(o);
        cJSON_Delete(o);
        snprintf(path, sizeof path, "%s/import.json", out);
        st = txt ? dd_train_write_text(path, txt, strlen(txt)) : DD_ERR_NOMEM;
        cJSON_free(txt);
        if (st != DD_OK) goto done;
    }
    if (desc) dd_model_describe(m, desc, cap);
done:
    dd_trainer_destroy(&tr);
    dd_run_model_free(&pa);
    dd_dataset_free(&ds);
    dd_run_lock_release(&lk);
    dd_tensors_free(&s);
    return st;
}
