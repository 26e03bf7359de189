/* Resuming a trainer from a checkpoint it must refuse (src/train/train_ckpt.c, load_checked
 * and dd_train_ckpt_check_model): each mismatch of the run's configuration, data set or
 * model, and each malformed trainer section, is refused with its own message and status,
 * and the refused load leaves the trainer exactly as it was (parameters, epoch, batch).
 * The checkpoints are real ones (dd_trainer_save) with one section rewritten
 * (tt_ckpt_rewrite), or written by a trainer of another configuration. Also the
 * refusals of dd_run_model_load (a DPD checkpoint without its PA model, trainer sections
 * of a newer version) and of dd_train_run without a data set (src/train/rundir.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/ckpt.h"
#include "distdpd/train.h"
#include "test_train_util.h"

static dd_dataset *ds, *ds_long;
static char good[600], bad[600], dla_ckpt[600];
static dd_train_cfg base;

/* Creates a trainer of configuration c (on data set d, PA model pm for a DPD), loads `path`
 * into it and checks the refusal (status, message part); then that nothing changed. */
static void refused(const dd_train_cfg *c, dd_dataset *d, const dd_model_ref *pm, const char *path, dd_status want,
                    const char *needle, const char *what) {
    dd_trainer *t = NULL;
    CHECK_OK(dd_trainer_create(c, d, pm, NULL, &t));
    if (!t) return;
    const size_t nf = dd_trainer_num_floats(t);
    float *keep = malloc(nf * sizeof *keep);
    if (keep) memcpy(keep, dd_trainer_params(t), nf * sizeof *keep);
    dd_status st = dd_trainer_load(t, path, 0);
    const char *msg = dd_last_error();
    CHECK(st == want && strstr(msg, needle) != NULL && strstr(msg, path) != NULL,
          "%s: status %s (want %s), message '%s' should name the file and say '%s'", what, dd_status_str(st),
          dd_status_str(want), msg, needle);
    CHECK(keep && memcmp(keep, dd_trainer_params(t), nf * sizeof *keep) == 0 && dd_trainer_epoch(t) == 0 &&
              dd_trainer_batch(t) == 0,
          "%s: the refused load changed nothing", what);
    free(keep);
    dd_trainer_destroy(&t);
}

/* `good` with section `name` replaced by v[0..n) (NULL: left out), into `bad`. */
static int rewrite(const char *name, const void *v, size_t n) {
    dd_status st = tt_ckpt_rewrite(good, bad, name, v, n);
    CHECK(st == DD_OK, "rewrite section %s: %s", name, dd_last_error());
    return st == DD_OK;
}

/* A copy of section `name` of checkpoint `path` (caller frees; NUL-terminated), its size in *n. */
static void *section(const char *path, const char *name, size_t *n) {
    dd_ckpt_reader *r = NULL;
    const void *d;
    void *out = NULL;
    *n = 0;
    if (dd_ckpt_open(path, &r) == DD_OK && dd_ckpt_get(r, name, &d, n) == DD_OK && (out = malloc(*n + 1))) {
        memcpy(out, d, *n);
        ((char *)out)[*n] = '\0';
    }
    CHECK(out != NULL, "section %s of %s: %s", name, path, dd_last_error());
    dd_ckpt_close(&r);
    return out;
}

static void test_config_mismatch(void) {
    dd_train_cfg c = base;
    c.frame = 20;
    refused(&c, ds, NULL, good, DD_ERR_MISMATCH, "frame = 16, this run has 20", "frame");
    c = base;
    c.batch = 8;
    refused(&c, ds, NULL, good, DD_ERR_MISMATCH, "batch = 16, this run has 8", "batch");
    c = base;
    c.shuffle = 0;
    refused(&c, ds, NULL, good, DD_ERR_MISMATCH, "shuffle = 1, this run has 0", "shuffle");
    c = base;
    c.seed = 7;
    refused(&c, ds, NULL, good, DD_ERR_MISMATCH, "seed 0, this run has 7", "seed");
    c = base;
    snprintf(c.opt, sizeof c.opt, "sgd");
    refused(&c, ds, NULL, good, DD_ERR_MISMATCH, "optimiser adamw, this run uses sgd", "optimiser");
    /* the same configuration on a longer data set: another frame count */
    refused(&base, ds_long, NULL, good, DD_ERR_MISMATCH, "made on 495 training frames, this data set has 662",
            "data set");
    /* another model, another option of the same model */
    c = base;
    snprintf(c.model, sizeof c.model, "lstm");
    refused(&c, ds, NULL, good, DD_ERR_MISMATCH, "holds a 'gru' model, not 'lstm'", "model");
    c = base;
    dd_model_cfg_set(&c.model_cfg, "layers", 2);
    refused(&c, ds, NULL, good, DD_ERR_MISMATCH, "'gru' was saved with layers = 1, this one has layers = 2",
            "layers");
}

static void test_model_sections(void) {
    size_t n;
    char *opts = section(good, "model_opts", &n);
    if (opts) {
        char more[1200];
        snprintf(more, sizeof more, "%s,kernel=3", opts);
        if (rewrite("model_opts", more, strlen(more) + 1))
            refused(&base, ds, NULL, bad, DD_ERR_MISMATCH, "saved with option kernel = 3, which this one does not have",
                    "an option gru lacks");
        if (rewrite("model_opts", "hidden=x", 9))
            refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "section 'model_opts': ", "unreadable model_opts");
    }
    free(opts);
    unsigned char *tab = section(good, "param_table", &n);
    if (tab && n > 16) {
        uint64_t hdr[2];
        memcpy(hdr, tab, sizeof hdr);
        if (rewrite("param_table", tab, 15))
            refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "section 'param_table' is too short", "short table");
        uint64_t h2[2] = {hdr[0] + 1, hdr[1]};
        memcpy(tab, h2, sizeof h2);
        if (rewrite("param_table", tab, n))
            refused(&base, ds, NULL, bad, DD_ERR_MISMATCH, "the parameter table has", "table count");
        h2[0] = hdr[0];
        h2[1] = hdr[1] + 4;
        memcpy(tab, h2, sizeof h2);
        if (rewrite("param_table", tab, n))
            refused(&base, ds, NULL, bad, DD_ERR_MISMATCH, "the parameter arena has", "arena size");
        memcpy(tab, hdr, sizeof hdr);
        tab[16] ^= 0x20; /* the first entry's name, one letter changed in case */
        if (rewrite("param_table", tab, n))
            refused(&base, ds, NULL, bad, DD_ERR_MISMATCH, "parameter 0 is", "entry name");
    }
    free(tab);
    float *p = section(good, "params", &n);
    if (p && n >= 2 * sizeof(float)) {
        if (rewrite("params", p, n - sizeof(float)))
            refused(&base, ds, NULL, bad, DD_ERR_MISMATCH, "section 'params' has", "params size");
        p[1] = NAN;
        if (rewrite("params", p, n)) refused(&base, ds, NULL, bad, DD_ERR_RANGE, "parameter 1 of 'params' is not finite", "NaN");
    }
    free(p);
}

static void test_trainer_sections(void) {
    if (rewrite("trainer", &(uint64_t){99}, sizeof(uint64_t)))
        refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "trainer sections of version 99, this build reads", "version");
    if (rewrite("trainer", &(uint64_t){0}, sizeof(uint64_t)))
        refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "trainer sections of version 0", "version 0");
    size_t n;
    unsigned char *sched = section(good, "lr_sched", &n);
    if (sched) {
        if (rewrite("lr_sched", sched, n - 1))
            refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "section 'lr_sched' has", "lr_sched size");
        memset(sched, 0xff, n); /* a NaN learning rate, an unknown kind */
        if (rewrite("lr_sched", sched, n)) refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "section 'lr_sched': ", "lr_sched");
    }
    free(sched);
    const double rs[3] = {0, 10, -1}; /* `good` has none: added */
    if (rewrite("rescale", rs, sizeof rs))
        refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "section 'rescale' holds (0, 10, -1): not a warm-up", "rescale");
    uint64_t cur[2] = {2, 0}; /* epoch 1 in the 'epoch' section */
    if (rewrite("cursor", cur, sizeof cur))
        refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "bad data cursor (epoch 2, batch 0 of 31)", "cursor epoch");
    cur[0] = 1;
    cur[1] = 32;
    if (rewrite("cursor", cur, sizeof cur))
        refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "bad data cursor (epoch 1, batch 32 of 31)", "cursor batch");
    if (rewrite("best_epoch", &(uint64_t){3}, sizeof(uint64_t)))
        refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "best epoch 3 after the last epoch", "best epoch");
    double *h = section(good, "history", &n);
    if (h && n >= 2 * sizeof(double)) {
        if (rewrite("history", h, n - sizeof(double)))
            refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "section 'history' is malformed", "history length");
        h[0] += 1; /* another field count */
        if (rewrite("history", h, n)) refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "section 'history' is malformed", "fields");
        h[0] -= 1;
        if (rewrite("history", h, sizeof(double))) /* no epoch, the cursor says 1 */
            refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "the history holds 0 epochs, the cursor says 1", "history count");
    }
    free(h);
    if (rewrite("epoch_acc", NULL, 0)) refused(&base, ds, NULL, bad, DD_ERR_FORMAT, "no section 'epoch_acc'", "missing section");
}

/* A DLA checkpoint: resumed as ILA, with another gain, another PA model. */
static void test_dpd(dd_trainer *pa_tr) {
    dd_model_ref pm = {"gru", *dd_model_config(dd_trainer_model(pa_tr)), dd_trainer_params(pa_tr),
                       dd_trainer_num_floats(pa_tr)};
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_DLA, 4, 16, 3, 16, 3);
    c.gain = 1.5;
    dd_trainer *t = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, &pm, NULL, &t));
    if (!t) return;
    CHECK_OK(dd_trainer_step(t, NULL));
    CHECK_OK(dd_trainer_save(t, dla_ckpt));
    dd_trainer_destroy(&t);
    dd_train_cfg c2 = c;
    c2.task = DD_TRAIN_ILA;
    refused(&c2, ds, &pm, dla_ckpt, DD_ERR_MISMATCH, "task dla, this trainer ila", "DLA as ILA");
    c2 = c;
    c2.gain = 2.0;
    refused(&c2, ds, &pm, dla_ckpt, DD_ERR_MISMATCH, "target gain 1.5, this run uses 2", "gain");
    /* the frozen PA model of another size */
    dd_train_cfg cp;
    tt_cfg(&cp, DD_TRAIN_PA, 5, 16, 3, 16, 3);
    dd_trainer *p5 = NULL;
    CHECK_OK(dd_trainer_create(&cp, ds, NULL, NULL, &p5));
    if (p5) {
        dd_model_ref pm5 = {"gru", *dd_model_config(dd_trainer_model(p5)), dd_trainer_params(p5),
                            dd_trainer_num_floats(p5)};
        refused(&c, ds, &pm5, dla_ckpt, DD_ERR_MISMATCH, "PA model 'gru' was saved with hidden = 4, this one has hidden = 5",
                "PA model");
    }
    dd_trainer_destroy(&p5);
    /* dd_run_model_load (src/train/rundir.c, what eval / export / run read): the DLA
     * checkpoint without its frozen PA model, and trainer sections of a newer version */
    dd_run_model rm;
    memset(&rm, 0, sizeof rm);
    CHECK_OK(dd_run_model_load(dla_ckpt, "best", &rm));
    CHECK(rm.model && rm.pa_model, "the DLA checkpoint loads with its PA model");
    dd_run_model_free(&rm);
    CHECK_OK(tt_ckpt_rewrite(dla_ckpt, bad, "pa.model", NULL, 0));
    CHECK_ERR(dd_run_model_load(bad, "best", &rm), DD_ERR_FORMAT, "a DPD checkpoint without its PA model");
    CHECK(rm.model == NULL && rm.pa_model == NULL, "nothing returned on a refusal");
    CHECK_OK(tt_ckpt_rewrite(dla_ckpt, bad, "trainer", &(uint64_t){99}, sizeof(uint64_t)));
    CHECK_ERR(dd_run_model_load(bad, "best", &rm), DD_ERR_FORMAT, "trainer sections of version 99, this build reads");
    /* the DLA checkpoint resumes as it is (the refusals above are not the check's noise) */
    CHECK_OK(dd_trainer_create(&c, ds, &pm, NULL, &t));
    if (t) {
        CHECK_OK(dd_trainer_load(t, dla_ckpt, 0));
        CHECK(dd_trainer_batch(t) == 1, "DLA resumed at batch %llu", (unsigned long long)dd_trainer_batch(t));
    }
    dd_trainer_destroy(&t);
}

int main(void) {
    const char *tmp = dd_test_tmpdir();
    snprintf(good, sizeof good, "%s/good.ckpt", tmp);
    snprintf(bad, sizeof bad, "%s/bad.ckpt", tmp);
    snprintf(dla_ckpt, sizeof dla_ckpt, "%s/dla.ckpt", tmp);
    size_t n[3] = {1500, 512, 512}, nl[3] = {2000, 512, 512};
    ds = tt_make_data(n, "wiener-hammerstein", NULL, 50, 0.7, 0, 3, NULL);
    ds_long = tt_make_data(nl, "wiener-hammerstein", NULL, 50, 0.7, 0, 3, NULL);
    CHECK(ds && ds_long, "data sets");
    tt_cfg(&base, DD_TRAIN_PA, 4, 16, 3, 16, 3); /* 495 frames, 31 batches */
    dd_trainer *a = NULL;
    if (ds && ds_long) CHECK_OK(dd_trainer_create(&base, ds, NULL, NULL, &a));
    if (a) {
        while (!dd_trainer_epoch_done(a)) CHECK_OK(dd_trainer_step(a, NULL));
        CHECK_OK(dd_trainer_end_epoch(a, NULL));
        CHECK_OK(dd_trainer_save(a, good));
        /* the unmodified checkpoint resumes: the refusals come from the change alone */
        dd_trainer *b = NULL;
        CHECK_OK(dd_trainer_create(&base, ds, NULL, NULL, &b));
        if (b) {
            CHECK_OK(dd_trainer_load(b, good, 0));
            CHECK(dd_trainer_epoch(b) == 1, "resumed at epoch %d", dd_trainer_epoch(b));
            CHECK_OK(tt_ckpt_rewrite(good, bad, NULL, NULL, 0));
            CHECK_OK(dd_trainer_load(b, bad, 0));
        }
        dd_trainer_destroy(&b);
        test_config_mismatch();
        test_model_sections();
        test_trainer_sections();
        test_dpd(a);
        /* dd_train_run without a data set (src/train/rundir.c): refused before anything */
        char out[700];
        snprintf(out, sizeof out, "%s/run-nodata", tmp);
        dd_train_run_opts o;
        memset(&o, 0, sizeof o);
        o.out = out;
        CHECK_ERR(dd_train_run(&base, &o), DD_ERR_ARG, "no data set given (--data)");
        snprintf(bad, sizeof bad, "%s/run-nodata/last.ckpt", tmp);
        FILE *f = fopen(bad, "rb");
        CHECK(f == NULL, "no checkpoint written without a data set");
        if (f) fclose(f);
    }
    dd_trainer_destroy(&a);
    dd_dataset_free(&ds);
    dd_dataset_free(&ds_long);
    return dd_test_done("test_train_ckpt");
}
