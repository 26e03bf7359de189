/* Run directories (train.h): dd_train_run writes config.json, metrics.jsonl (one object per
 * epoch, exactly one "best": true), history.csv, best.ckpt, last.ckpt and report.html;
 * stopping after 1 epoch and resuming gives the same run as training straight through,
 * bit for bit; a second run into the same directory is refused; dd_run_evaluate
 * reproduces the best epoch's metrics; a DLA run on simulated data reads the PA sidecar
 * (pa.json) and reports the true PA's metrics; dd_run_model_load restores the models. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/ckpt.h"
#include "distdpd/train.h"
#include "test_train_util.h"

static int exists(const char *dir, const char *name) {
    char p[800];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0 && sb.st_size > 0;
}

static int count_lines(const char *s, const char *needle, int *nneedle) {
    int n = 0;
    *nneedle = 0;
    for (const char *p = s; p && *p; p++)
        if (*p == '\n') n++;
    for (const char *p = s; p && (p = strstr(p, needle)); p++) (*nneedle)++;
    return n;
}

static int progress_calls, epoch_calls;
static volatile int stop_now;
static int steps_seen;
/* Requests a stop after the 40th step (in the middle of epoch 2). */
static void stop_at_40(void *user, const dd_train_progress *p) {
    (void)user;
    if (p->phase == 0 && ++steps_seen == 40) stop_now = 1;
}
static void on_progress(void *user, const dd_train_progress *p) {
    (void)user;
    progress_calls++;
    if (p->phase == 2 && p->rec) epoch_calls++;
}

int main(void) {
    const char *tmp = dd_test_tmpdir();
    char data[600], run1[600], run2[600], run3[600], path[800];
    snprintf(data, sizeof data, "%s/data", tmp);
    snprintf(run1, sizeof run1, "%s/pa1", tmp);
    snprintf(run2, sizeof run2, "%s/pa2", tmp);
    snprintf(run3, sizeof run3, "%s/dpd", tmp);
    size_t n[3] = {2000, 1024, 1024};
    dd_pa *pa = NULL;
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 1.0, 3.0, 5, &pa);
    CHECK(ds != NULL, "data set");
    if (!ds) return dd_test_done("test_train_rundir");
    CHECK_OK(dd_dataset_save_opendpd(ds, data));
    snprintf(path, sizeof path, "%s/%s", data, DD_SIM_PA_FILE);
    CHECK_OK(dd_sim_pa_save(pa, path));

    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 32, 2, 32, 3);
    dd_train_run_opts o;
    memset(&o, 0, sizeof o);
    o.data = data;
    o.out = run1;
    o.write_report = 1;
    o.command = "test_train_rundir pa1";
    o.progress = on_progress;
    CHECK_OK(dd_train_run(&c, &o));
    const char *files[6] = {"config.json", "metrics.jsonl", "history.csv", "best.ckpt", "last.ckpt", "report.html"};
    for (int k = 0; k < 6; k++) CHECK(exists(run1, files[k]), "%s/%s exists", run1, files[k]);
    CHECK(epoch_calls == 3 && progress_calls > 3 * 31, "progress: %d calls, %d epochs", progress_calls, epoch_calls);

    snprintf(path, sizeof path, "%s/metrics.jsonl", run1);
    char *m1 = dd_test_read(path);
    int nbest = 0, lines = count_lines(m1, "\"best\":true", &nbest);
    CHECK(lines == 3 && nbest == 1, "metrics.jsonl: %d lines, %d best", lines, nbest);
    /* every line is a JSON object with the documented keys */
    const char *keys[] = {"epoch", "time_s", "eval_time_s", "lr", "train_loss", "val_nmse_db", "test_nmse_db",
                          "val_aclr_avg_db", "test_aclr_avg_db", "val_evm_db", "test_evm_db", "best"};
    double best_test_nmse = NAN;
    for (char *line = m1, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) break;
        *nl = '\0';
        cJSON *j = cJSON_Parse(line);
        CHECK(j != NULL, "line parses: %s", line);
        for (size_t k = 0; j && k < sizeof keys / sizeof keys[0]; k++)
            CHECK(cJSON_GetObjectItemCaseSensitive(j, keys[k]) != NULL, "key %s", keys[k]);
        if (j && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "best")))
            best_test_nmse = cJSON_GetObjectItemCaseSensitive(j, "test_nmse_db")->valuedouble;
        cJSON_Delete(j);
    }
    free(m1);
    snprintf(path, sizeof path, "%s/history.csv", run1);
    char *h1 = dd_test_read(path);
    /* OpenDPD's columns to the letter (its time column is called "TIME:") */
    CHECK(h1 && strncmp(h1, "EPOCH,N_EPOCH,TIME:,LR,BATCH_SIZE,N_PARAM,FRAME_LENGTH,BACKBONE,HIDDEN_SIZE,TRAIN_LOSS,VAL_LOSS,", 96) == 0,
          "history.csv header: %.100s", h1 ? h1 : "");
    lines = count_lines(h1, "\n", &nbest);
    CHECK(lines == 4, "history.csv: %d lines", lines);
    free(h1);
    snprintf(path, sizeof path, "%s/report.html", run1);
    char *rep = dd_test_read(path);
    CHECK(rep && strstr(rep, "<svg") && strstr(rep, "Learning curves") && strstr(rep, "Spectra"), "report has plots");
    free(rep);
    snprintf(path, sizeof path, "%s/config.json", run1);
    char *cj = dd_test_read(path);
    cJSON *cjo = cj ? cJSON_Parse(cj) : NULL;
    CHECK(cjo && cJSON_GetObjectItemCaseSensitive(cjo, "config") && cJSON_GetObjectItemCaseSensitive(cjo, "spec"),
          "config.json has config and spec");
    cJSON_Delete(cjo);
    free(cj);

    /* a second run into the same directory is refused */
    CHECK_ERR(dd_train_run(&c, &o), DD_ERR_ARG, "--resume");

    /* stop after 1 epoch, resume: same as straight through */
    o.out = run2;
    o.progress = NULL;
    o.stop_after_epochs = 1;
    CHECK_OK(dd_train_run(&c, &o));
    dd_run_model ra, rb;
    CHECK_OK(dd_run_model_load(run2, "last", &rb));
    CHECK(rb.epoch == 1, "stopped after epoch %d", rb.epoch);
    dd_run_model_free(&rb);
    o.stop_after_epochs = 0;
    o.resume = 1;
    o.data = NULL; /* from the checkpoint */
    CHECK_OK(dd_train_run(NULL, &o));
    CHECK_OK(dd_run_model_load(run1, "last", &ra));
    CHECK_OK(dd_run_model_load(run2, "last", &rb));
    CHECK(ra.model && rb.model && ra.epoch == 3 && rb.epoch == 3, "both runs at epoch 3");
    if (ra.model && rb.model)
        CHECK(memcmp(ra.params, rb.params, dd_model_params(ra.model)->total * sizeof(float)) == 0,
              "1 epoch + resume + 2 epochs == 3 epochs, bit for bit");
    dd_run_model_free(&ra);
    dd_run_model_free(&rb);
    snprintf(path, sizeof path, "%s/metrics.jsonl", run2);
    char *m2 = dd_test_read(path);
    lines = count_lines(m2, "\"best\":true", &nbest);
    CHECK(lines == 3 && nbest == 1, "resumed metrics.jsonl: %d lines, %d best", lines, nbest);
    free(m2);
    /* resuming a finished run with more epochs continues it; fewer is refused */
    o.epochs_override = 2;
    CHECK_ERR(dd_train_run(NULL, &o), DD_ERR_ARG, "already trained 3 epochs");
    o.epochs_override = 0;
    /* a last.ckpt whose identity sections are malformed, or none: refused with the exact
     * reason before anything is written (metrics.jsonl keeps its 3 lines; the original
     * checkpoint, put back, resumes as before) */
    {
        char last[800], keep[800], want[900];
        snprintf(last, sizeof last, "%s/last.ckpt", run2);
        snprintf(keep, sizeof keep, "%s/last.keep", run2);
        CHECK_OK(tt_ckpt_rewrite(last, keep, NULL, NULL, 0));
        static const uint8_t three[3] = {1, 2, 3};
        CHECK_OK(tt_ckpt_rewrite(keep, last, "run_id", "xyz", 4));
        snprintf(want, sizeof want, "%s: section 'run_id' is not a run id (32 hex digits): 'xyz'", last);
        CHECK_ERR(dd_train_run(NULL, &o), DD_ERR_FORMAT, want);
        CHECK_OK(tt_ckpt_rewrite(keep, last, "data_id", three, sizeof three));
        snprintf(want, sizeof want, "%s: section 'data_id' has 3 bytes, expected", last);
        CHECK_ERR(dd_train_run(NULL, &o), DD_ERR_FORMAT, want);
        CHECK(remove(last) == 0, "remove last.ckpt");
        snprintf(want, sizeof want, "%s: nothing to resume: no last.ckpt in the run directory", run2);
        CHECK_ERR(dd_train_run(NULL, &o), DD_ERR_IO, want);
        CHECK(rename(keep, last) == 0, "put last.ckpt back");
        snprintf(path, sizeof path, "%s/metrics.jsonl", run2);
        char *m5 = (char *)dd_test_slurp(path, NULL);
        CHECK(count_lines(m5, "\"best\":true", &nbest) == 3 && nbest == 1, "metrics.jsonl untouched by the refusals");
        free(m5);
        o.epochs_override = 2;
        CHECK_ERR(dd_train_run(NULL, &o), DD_ERR_ARG, "already trained 3 epochs"); /* the original resumes as before */
        o.epochs_override = 0;
    }
    o.resume = 0;
    o.data = data;

    /* interrupted in the middle of an epoch (as by SIGINT), then resumed: same run */
    char run4[600];
    snprintf(run4, sizeof run4, "%s/pa4", tmp);
    int interrupted = -1;
    o.out = run4;
    o.stop = &stop_now;
    o.interrupted = &interrupted;
    o.progress = stop_at_40;
    CHECK_OK(dd_train_run(&c, &o));
    CHECK(interrupted == 1, "interrupted: %d", interrupted);
    CHECK_OK(dd_run_model_load(run4, "last", &rb));
    CHECK(rb.epoch == 1, "interrupted in epoch 2: checkpoint epoch %d", rb.epoch);
    dd_run_model_free(&rb);
    stop_now = 0;
    o.resume = 1;
    o.progress = NULL;
    CHECK_OK(dd_train_run(NULL, &o));
    CHECK(interrupted == 0, "resumed to the end");
    CHECK_OK(dd_run_model_load(run1, "last", &ra));
    CHECK_OK(dd_run_model_load(run4, "last", &rb));
    if (ra.model && rb.model)
        CHECK(ra.epoch == 3 && rb.epoch == 3 &&
                  memcmp(ra.params, rb.params, dd_model_params(ra.model)->total * sizeof(float)) == 0,
              "interrupted mid-epoch + resumed == straight, bit for bit");
    dd_run_model_free(&ra);
    dd_run_model_free(&rb);
    o.stop = NULL;
    o.interrupted = NULL;
    o.resume = 0;

    /* re-evaluation reproduces the best epoch */
    dd_epoch_record rec;
    CHECK_OK(dd_run_evaluate(run1, "best", ds, NULL, &rec, NULL));
    CHECK(fabs(rec.test.nmse_db - best_test_nmse) < 1e-6, "re-evaluated test NMSE %.9g vs metrics.jsonl %.9g",
          rec.test.nmse_db, best_test_nmse);

    /* DLA through the PA run, measured on the true PA from pa.json */
    dd_train_cfg cd;
    tt_cfg(&cd, DD_TRAIN_DLA, 6, 32, 2, 32, 2);
    o.out = run3;
    o.pa_run = run1;
    o.data = NULL; /* the PA run's data set */
    CHECK_OK(dd_train_run(&cd, &o));
    snprintf(path, sizeof path, "%s/metrics.jsonl", run3);
    char *m3 = dd_test_read(path);
    CHECK(m3 && strstr(m3, "\"true_test_aclr_avg_db\":-"), "true PA metrics in metrics.jsonl");
    free(m3);
    snprintf(path, sizeof path, "%s/config.json", run3);
    cj = dd_test_read(path);
    CHECK(cj && strstr(cj, "\"available\":\ttrue") && strstr(cj, "no_dpd_test"), "config.json: true PA baseline");
    free(cj);
    dd_run_model dm;
    CHECK_OK(dd_run_model_load(run3, "best", &dm));
    CHECK(dm.pa_model != NULL && dm.cfg.task == DD_TRAIN_DLA && dm.cfg.gain > 0, "DPD run holds its PA model");
    dd_run_model_free(&dm);
    dd_eval_metrics base[2];
    CHECK_OK(dd_run_evaluate(run3, "best", ds, pa, &rec, base));
    CHECK(rec.has_true && isfinite(rec.true_test.aclr.avg_db) && isfinite(base[1].aclr.avg_db),
          "DPD re-evaluation on the true PA");
    /* a DPD run is not a PA run */
    o.out = run2;
    o.pa_run = run3;
    snprintf(run2, sizeof run2, "%s/dpd2", tmp);
    CHECK_ERR(dd_train_run(&cd, &o), DD_ERR_ARG, "not a PA model run");
    /* bad inputs */
    CHECK_ERR(dd_run_model_load(tmp, "best", &dm), DD_ERR_IO, "no best.ckpt");
    CHECK_ERR(dd_run_model_load(run1, "worst", &dm), DD_ERR_ARG, "worst");

    dd_pa_destroy(&pa);
    dd_dataset_free(&ds);
    return dd_test_done("test_train_rundir");
}
