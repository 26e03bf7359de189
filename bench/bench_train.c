/* Training throughput of one model through the library's trainer (the code path of
 * `distdpd train-pa`, without the run directory): the reference recipe's data handling
 * (frames F 200, stride 1, batch 64, AdamW lr 5e-3, clip 200), one process, one thread.
 *
 * Usage: bench_train DATA MODEL HIDDEN [STEPS [EPOCHS [BATCH [FRAME [KEY=VALUE...]]]]]
 *   DATA    a data set path (dd_dataset_load)
 *   MODEL   registry name (gru, dgru, tcn, ...); HIDDEN 0 = the model's default
 *   STEPS   > 0: time this many optimiser steps after 3 warm-up steps and stop;
 *           0 (default): train EPOCHS (default 1) whole epochs with evaluation
 *   BATCH, FRAME  frames per batch and samples per frame (0 or absent: 64, 200)
 *   KEY=VALUE     more model settings (layers=8, kernel=3, ...: large models); lr=V sets
 *                 the learning rate instead (wide layers diverge at the recipe's 5e-3)
 * Prints one JSON object per line:
 *   steps mode:  {"model", "hidden", "params", "steps", "samples", "time_s", "cpu_s",
 *                 "msamples_per_s", "flops_per_sample", "gflops"}
 *   epoch mode:  one line per epoch {"epoch", "time_s", "eval_time_s", "train_loss",
 *                 "val_nmse_db", "test_nmse_db", ...} then a summary line with the
 *                 peak RSS ("maxrss_kb").
 * DD_THREADS=N set: dd_nn_threads_set(N) as the command's --threads N does (the batch
 * chunks, the layer kernels, and OpenBLAS's threads unless OPENBLAS_NUM_THREADS is set).
 * flops_per_sample is dd_model_flops_per_sample(forward) + (backward): the analytic
 * count of one training step per sample (the optimiser step, O(params) per batch, is
 * not counted). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "distdpd/dataset.h"
#include "distdpd/model.h"
#include "distdpd/nn.h"
#include "distdpd/train.h"

static long maxrss_kb(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    return ru.ru_maxrss;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_train DATA MODEL HIDDEN [STEPS [EPOCHS [BATCH [FRAME [KEY=VALUE...]]]]]\n");
        return 2;
    }
    const char *data = argv[1], *model = argv[2];
    int hidden = atoi(argv[3]);
    long steps = argc > 4 ? atol(argv[4]) : 0;
    int epochs = argc > 5 ? atoi(argv[5]) : 1;
    const char *nth = getenv("DD_THREADS");
    if (nth && *nth) dd_nn_threads_set(atoi(nth));
    dd_dataset *ds = NULL;
    dd_trainer *tr = NULL;
    int rc = 1;
    if (dd_dataset_load(data, &ds) != DD_OK) {
        fprintf(stderr, "bench_train: %s\n", dd_last_error());
        return 1;
    }
    dd_train_cfg cfg;
    dd_train_cfg_default(&cfg, DD_TRAIN_PA);
    snprintf(cfg.model, sizeof cfg.model, "%s", model);
    dd_model_cfg_set(&cfg.model_cfg, "hidden", hidden);
    cfg.epochs = epochs < 1 ? 1 : epochs;
    if (argc > 6 && atoi(argv[6]) > 0) cfg.batch = (size_t)atoi(argv[6]);
    if (argc > 7 && atoi(argv[7]) > 0) cfg.frame = (size_t)atoi(argv[7]);
    for (int a = 8; a < argc; a++) {
        char key[64];
        const char *eq = strchr(argv[a], '=');
        if (!eq || (size_t)(eq - argv[a]) >= sizeof key) {
            fprintf(stderr, "bench_train: '%s': expected KEY=VALUE\n", argv[a]);
            goto done;
        }
        memcpy(key, argv[a], (size_t)(eq - argv[a]));
        key[eq - argv[a]] = 0;
        if (strcmp(key, "lr") == 0) {
            cfg.lr = atof(eq + 1);
            continue;
        }
        if (dd_model_cfg_set(&cfg.model_cfg, key, atoi(eq + 1)) != DD_OK) {
            fprintf(stderr, "bench_train: %s\n", dd_last_error());
            goto done;
        }
    }
    if (dd_trainer_create(&cfg, ds, NULL, NULL, &tr) != DD_OK) {
        fprintf(stderr, "bench_train: %s\n", dd_last_error());
        goto done;
    }
    const dd_model *m = dd_trainer_model(tr);
    const double fps = dd_model_flops_per_sample(m, 0) + dd_model_flops_per_sample(m, 1);
    const int H = dd_model_cfg_get(dd_model_config(m), "hidden");
    const size_t np = dd_model_num_params(m);
    if (steps > 0) {
        const uint64_t nb = dd_trainer_num_batches(tr);
        if ((uint64_t)steps + 3 > nb) steps = (long)nb - 3;
        if (steps < 1) {
            fprintf(stderr, "bench_train: the epoch has too few batches (%llu)\n", (unsigned long long)nb);
            goto done;
        }
        double loss;
        for (int i = 0; i < 3; i++)
            if (dd_trainer_step(tr, &loss) != DD_OK) goto fail;
        double t0 = dd_now(), c0 = bench_cpu_s();
        for (long i = 0; i < steps; i++)
            if (dd_trainer_step(tr, &loss) != DD_OK) goto fail;
        double dt = dd_now() - t0, dc = bench_cpu_s() - c0;
        double samples = (double)steps * (double)cfg.batch * (double)cfg.frame;
        printf("{\"model\": \"%s\", \"hidden\": %d, \"params\": %zu, \"steps\": %ld, \"samples\": %.0f, "
               "\"time_s\": %.4f, \"cpu_s\": %.4f, \"msamples_per_s\": %.4f, \"flops_per_sample\": %.1f, "
               "\"gflops\": %.3f}\n",
               model, H, np, steps, samples, dt, dc, samples / dt * 1e-6, fps, samples * fps / dt * 1e-9);
    } else {
        const double samples = (double)dd_trainer_num_frames(tr) * (double)cfg.frame;
        for (int e = 0; e < cfg.epochs; e++) {
            while (!dd_trainer_epoch_done(tr))
                if (dd_trainer_step(tr, NULL) != DD_OK) goto fail;
            dd_epoch_record r;
            if (dd_trainer_end_epoch(tr, &r) != DD_OK) goto fail;
            printf("{\"epoch\": %d, \"time_s\": %.4f, \"eval_time_s\": %.4f, \"train_loss\": %.8g, "
                   "\"val_nmse_db\": %.4f, \"test_nmse_db\": %.4f, \"msamples_per_s\": %.4f, "
                   "\"gflops\": %.3f}\n",
                   r.epoch, r.time_s, r.eval_time_s, r.train_loss, r.val.nmse_db, r.test.nmse_db,
                   samples / r.time_s * 1e-6, samples * fps / r.time_s * 1e-9);
            fflush(stdout);
        }
        printf("{\"model\": \"%s\", \"hidden\": %d, \"params\": %zu, \"flops_per_sample\": %.1f, "
               "\"samples_per_epoch\": %.0f, \"maxrss_kb\": %ld}\n",
               model, H, np, fps, samples, maxrss_kb());
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "bench_train: %s\n", dd_last_error());
done:
    dd_trainer_destroy(&tr);
    dd_dataset_free(&ds);
    return rc;
}
