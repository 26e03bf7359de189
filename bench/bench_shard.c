/* Sharded data parallelism, measured side by side in one run (MPI): for each --shard mode
 * (none, zero1, zero2, zero3) the same model trains STEPS steps on the same data, and
 * every rank reports its arena peaks (dd_mem_stats: parameters, gradients, optimiser
 * state, activations); rank 0 prints, per mode, the largest rank's model-state bytes
 * (parameters + gradients + optimiser state) and their ratio to none, the median step
 * time and its ratio to none, the bytes sent per step, and, for none, the share of the
 * gradient allreduce hidden behind backward (dd_dp_stats: hidden / (hidden + exposed)).
 *
 * Usage: mpirun -np P bench_shard DATA MODEL HIDDEN LAYERS KERNEL BATCH STEPS [BUCKET_MB [LAST]]
 *   (frame 200, stride 50, AdamW; HIDDEN/LAYERS/KERNEL 0 = the model's defaults; LAST: the
 *   last mode measured, 0 none .. 3 zero3, default 3).
 * Output: a Markdown table on rank 0, and one JSON line per mode ("json: {...}"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/dataset.h"
#include "distdpd/parallel.h"
#include "distdpd/train.h"
#include "bench_util.h"

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: bench_shard DATA MODEL HIDDEN LAYERS KERNEL BATCH STEPS [BUCKET_MB [LAST]]\n");
        return 2;
    }
    dd_comm *w = NULL;
    dd_dataset *ds = NULL;
    dd_train_cfg c;
    int steps = 0, rc = bench_train_setup("bench_shard", &argc, &argv, &w, &ds, &c, &steps);
    if (rc) return rc;
    const int rank = dd_comm_rank(w), size = dd_comm_size(w);
    const double bucket = argc > 8 ? atof(argv[8]) : 4.0;
    const int last = argc > 9 ? atoi(argv[9]) : DD_SHARD_ZERO3;
    double base_state = 0, base_step = 0;
    if (rank == 0) {
        char desc[256];
        dd_model *m = NULL;
        dd_model_create(c.model, &c.model_cfg, &m);
        dd_model_describe(m, desc, sizeof desc);
        printf("%s, %d ranks, batch %zu x frame %zu, AdamW, %d timed steps (+2 warm-up), bucket %g MiB\n\n", desc, size,
               c.batch, c.frame, steps, bucket);
        printf("| shard | params MiB | grads MiB | optim MiB | model state MiB | vs none | activations MiB | step s | vs none "
               "| MiB sent/step | hidden |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        dd_model_destroy(&m);
    }
    for (int mode = DD_SHARD_NONE; mode <= last && mode <= DD_SHARD_ZERO3; mode++) {
        dd_dp *dp = NULL;
        dd_zero *z = NULL;
        dd_strategy st;
        if (mode <= DD_SHARD_ZERO1) {
            dd_dp_cfg dc;
            dd_dp_cfg_default(&dc);
            dc.shard = (dd_shard_mode)mode;
            dc.bucket_mb = bucket;
            dd_dp_create(w, &dc, &dp);
            dd_dp_strategy(dp, &st);
        } else {
            dd_zero_cfg zc;
            dd_zero_cfg_default(&zc);
            zc.shard = (dd_shard_mode)mode;
            dd_zero_create(w, &zc, &z);
            dd_zero_strategy(z, &st);
        }
        dd_mem_stats m0, m1;
        dd_mem_stats_get(&m0);
        dd_mem_stats_reset_peaks();
        dd_trainer *tr = NULL;
        if (dd_trainer_create(&c, ds, NULL, &st, &tr) != DD_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, dd_last_error());
            dd_comm_finalize();
            return 1;
        }
        double *t = calloc((size_t)steps, sizeof *t);
        for (int k = 0; k < steps + 2; k++) {
            dd_comm_barrier(w);
            double t0 = dd_comm_wtime();
            if (dd_trainer_epoch_done(tr)) dd_trainer_end_epoch(tr, NULL);
            if (dd_trainer_step(tr, NULL) != DD_OK) {
                fprintf(stderr, "rank %d: %s\n", rank, dd_last_error());
                dd_comm_finalize();
                return 1;
            }
            if (k >= 2) t[k - 2] = dd_comm_wtime() - t0;
        }
        qsort(t, (size_t)steps, sizeof *t, bench_cmp_d);
        double v[8];
        dd_mem_stats_get(&m1);
        for (int k = 0; k < DD_MEM_KINDS; k++) v[k] = (double)(m1.peak[k] - m0.cur[k]);
        v[4] = (double)(m1.peak[DD_MEM_PARAMS] + m1.peak[DD_MEM_GRADS] + m1.peak[DD_MEM_OPTIM]) -
               (double)(m0.cur[DD_MEM_PARAMS] + m0.cur[DD_MEM_GRADS] + m0.cur[DD_MEM_OPTIM]);
        v[5] = t[steps / 2];
        double hidden = NAN, sent = 0;
        if (dp) {
            dd_dp_stats s;
            dd_dp_stats_get(dp, &s);
            hidden = s.hidden_s + s.exposed_s > 0 ? s.hidden_s / (s.hidden_s + s.exposed_s) : NAN;
            sent = (double)s.bytes_sent / (double)s.steps;
        } else {
            dd_zero_stats s;
            dd_zero_stats_get(z, &s);
            sent = (double)s.bytes_sent / (double)s.steps;
        }
        v[6] = sent;
        v[7] = hidden;
        double *all = calloc(8 * (size_t)size, sizeof *all);
        dd_comm_allgather(w, v, sizeof v, all);
        if (rank == 0) {
            double mx[8] = {0}, hs = 0;
            for (int r = 0; r < size; r++) {
                for (int k = 0; k < 7; k++) mx[k] = fmax(mx[k], all[8 * r + k]);
                hs += all[8 * r + 7];
            }
            hs /= size;
            if (mode == DD_SHARD_NONE) {
                base_state = mx[4];
                base_step = mx[5];
            }
            const double MB = 1048576.0; /* MiB */
            char hid[32] = "";
            if (!isnan(hs)) snprintf(hid, sizeof hid, "%.0f %%", 100 * hs);
            printf("| %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.1f | %.3f | %.2fx | %.1f | %s |\n",
                   dd_shard_name((dd_shard_mode)mode), mx[0] / MB, mx[1] / MB, mx[2] / MB, mx[4] / MB,
                   mx[4] / base_state, mx[3] / MB, mx[5], mx[5] / base_step, mx[6] / MB, hid);
            printf("json: {\"shard\":\"%s\",\"ranks\":%d,\"params_bytes\":%.0f,\"grads_bytes\":%.0f,\"optim_bytes\":%.0f,"
                   "\"activations_bytes\":%.0f,\"state_bytes\":%.0f,\"step_s\":%.6f,\"sent_per_step\":%.0f,"
                   "\"hidden_share\":%.4f}\n",
                   dd_shard_name((dd_shard_mode)mode), size, mx[0], mx[1], mx[2], mx[3], mx[4], mx[5], mx[6], hs);
            fflush(stdout);
        }
        free(all);
        free(t);
        dd_trainer_destroy(&tr);
        dd_dp_destroy(&dp);
        dd_zero_destroy(&z);
    }
    dd_dataset_free(&ds);
    dd_comm_free(&w);
    dd_comm_finalize();
    return 0;
}
