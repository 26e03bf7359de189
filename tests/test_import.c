/* dd_run_import (src/export/import.c) in the unit label: weights written by
 * dd_tensors_write (npz, safetensors with metadata) become a run directory whose best.ckpt
 * holds exactly those values, the options inferred from the tensors' shapes; and each
 * refusal (a DPD without its PA run, a directory that holds a run, bad metadata, a bad
 * configuration, a missing data set or PA run, weights of another shape, a file that is
 * not a tensor file) comes with its status and message, writes no checkpoint, and leaves
 * the directory free for a correct import (the lock released). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dd_test.h"
#include "distdpd/export.h"
#include "distdpd/train.h"
#include "test_train_util.h"

static char data[600], npz[600], st_meta[600], st_badmeta[600];
static const float *src_params;
static size_t src_n;

/* An import that must succeed: best.ckpt holds the source's values, hidden = 4. */
static void imported(const char *tensors, const dd_train_cfg *c, const char *out, const char *what) {
    char desc[256] = "";
    CHECK_OK(dd_run_import(tensors, c, data, NULL, out, desc, sizeof desc));
    dd_run_model rm;
    memset(&rm, 0, sizeof rm);
    CHECK_OK(dd_run_model_load(out, "best", &rm));
    CHECK(rm.model && dd_model_cfg_get(dd_model_config(rm.model), "hidden") == 4 &&
              dd_model_params(rm.model)->total == src_n && memcmp(rm.params, src_params, src_n * sizeof(float)) == 0,
          "%s: best.ckpt holds the source's %zu values (hidden 4)", what, src_n);
    CHECK(tt_has_file(out, "last.ckpt") && tt_has_file(out, "import.json") && strlen(desc) > 0,
          "%s: last.ckpt, import.json", what);
    dd_run_model_free(&rm);
}

static void refused(const char *tensors, const dd_train_cfg *c, const char *d, const char *pa_run, const char *out,
                    dd_status want, const char *needle, const char *what) {
    dd_status st = dd_run_import(tensors, c, d, pa_run, out, NULL, 0);
    const char *msg = dd_last_error();
    CHECK(st == want && strstr(msg, needle) != NULL, "%s: status %s (want %s), message '%s' should say '%s'", what,
          dd_status_str(st), dd_status_str(want), msg, needle);
    CHECK(!tt_has_file(out, "best.ckpt") && !tt_has_file(out, "last.ckpt"), "%s: no checkpoint written", what);
}

int main(void) {
    const char *tmp = dd_test_tmpdir();
    snprintf(data, sizeof data, "%s/data.bin", tmp);
    snprintf(npz, sizeof npz, "%s/w.npz", tmp);
    snprintf(st_meta, sizeof st_meta, "%s/w.safetensors", tmp);
    snprintf(st_badmeta, sizeof st_badmeta, "%s/bad.safetensors", tmp);
    size_t n[3] = {1500, 512, 512};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 50, 0.7, 0, 3, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return dd_test_done("test_import");
    CHECK_OK(dd_dataset_save_bin(ds, data));
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 4, 16, 3, 16, 1);
    c.seed = 11;
    dd_trainer *tr = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tr));
    if (!tr) goto done;
    src_params = dd_trainer_params(tr);
    src_n = dd_trainer_num_floats(tr);
    const dd_param_table *t = dd_model_params(dd_trainer_model(tr));
    CHECK_OK(dd_tensors_write(DD_TENSORS_NPZ, npz, t, src_params, NULL, NULL, 0));
    const char *meta[4] = {"model", "gru", "model_opts", "hidden=4"};
    CHECK_OK(dd_tensors_write(DD_TENSORS_SAFETENSORS, st_meta, t, src_params, NULL, meta, 2));
    const char *badmeta[4] = {"model", "gru", "model_opts", "hidden=four"};
    CHECK_OK(dd_tensors_write(DD_TENSORS_SAFETENSORS, st_badmeta, t, src_params, NULL, badmeta, 2));

    /* the configuration of a user who gives only the file: model and options inferred */
    dd_train_cfg blank;
    tt_cfg(&blank, DD_TRAIN_PA, 0, 16, 3, 16, 1);
    blank.model[0] = '\0';
    memset(&blank.model_cfg, 0, sizeof blank.model_cfg);
    char out[700];
    snprintf(out, sizeof out, "%s/npz", tmp);
    imported(npz, &blank, out, "npz, hidden from rnn.weight_hh_l0");
    snprintf(out, sizeof out, "%s/st", tmp);
    imported(st_meta, &blank, out, "safetensors, options from __metadata__");

    /* refusals, each into a directory that then takes a correct import */
    snprintf(out, sizeof out, "%s/npz", tmp);
    {
        dd_status st = dd_run_import(npz, &blank, data, NULL, out, NULL, 0);
        CHECK(st == DD_ERR_ARG && strstr(dd_last_error(), "already holds a run (best.ckpt): choose a new --out"),
              "a second import into a run: %s", dd_last_error());
    }
    snprintf(out, sizeof out, "%s/r1", tmp);
    dd_train_cfg dpd = blank;
    dpd.task = DD_TRAIN_DLA;
    refused(npz, &dpd, data, NULL, out, DD_ERR_ARG, "a DPD (task dla) needs the PA run", "DPD without PA run");
    refused(st_badmeta, &blank, data, NULL, out, DD_ERR_ARG, "__metadata__ model_opts: ", "bad model_opts");
    dd_train_cfg badcfg = blank;
    badcfg.lr = -1;
    refused(npz, &badcfg, data, NULL, out, DD_ERR_ARG, "lr", "negative learning rate");
    char nodata[700];
    snprintf(nodata, sizeof nodata, "%s/absent.bin", tmp);
    refused(npz, &blank, nodata, NULL, out, DD_ERR_IO, "absent.bin", "missing data set");
    char nopa[700];
    snprintf(nopa, sizeof nopa, "%s/no-pa-run", tmp);
    refused(npz, &dpd, data, nopa, out, DD_ERR_IO, "no-pa-run", "missing PA run");
    dd_train_cfg h5 = blank;
    dd_model_cfg_set(&h5.model_cfg, "hidden", 5);
    refused(npz, &h5, data, NULL, out, DD_ERR_MISMATCH, npz, "weights of hidden 4 into hidden 5");
    refused(data, &blank, data, NULL, out, DD_ERR_FORMAT, data, "a data set given as the weights");
    imported(npz, &blank, out, "after the refusals, the same directory");

done:
    dd_trainer_destroy(&tr);
    dd_dataset_free(&ds);
    return dd_test_done("test_import");
}
