/* Pipeline parallelism, measured side by side in one run (MPI, P = every rank): the same
 * model trains STEPS steps (after 2 warm-up steps) on the same data on one process (rank
 * 0, the others waiting) and then under each schedule and micro-batch count. Rank 0
 * prints per layout: the median step time and its ratio to one process, the bubble
 * measured on every rank (1 - forward/backward compute time / schedule time, from the
 * strategy's timestamps: mean and largest over the ranks) next to the formula
 * (P-1)/(M+P-1) (interleaved: /V), and the largest rank's activation bytes (arena peak:
 * saved activations, buffers) against one process's.
 *
 * Usage: mpirun -np P bench_pp DATA MODEL HIDDEN LAYERS KERNEL BATCH STEPS MICRO[,MICRO...]
 *   (frame 200, stride 50, AdamW; schedules gpipe, 1f1b and interleaved with V = 2).
 * Output: a Markdown table on rank 0, and one JSON line per layout ("json: {...}"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/dataset.h"
#include "distdpd/parallel.h"
#include "distdpd/train.h"
#include "bench_util.h"

/* WARM untimed steps, then STEPS timed ones: the median step time. NAN on error. */
static double timed_steps(dd_comm *w, dd_trainer *tr, int warm, int steps, int rank) {
    double *t = calloc((size_t)steps, sizeof *t);
    for (int k = 0; t && k < steps + warm; k++) {
        if (w) dd_comm_barrier(w);
        const double t0 = dd_comm_wtime();
        if (dd_trainer_epoch_done(tr)) dd_trainer_end_epoch(tr, NULL);
        if (dd_trainer_step(tr, NULL) != DD_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, dd_last_error());
            free(t);
            return NAN;
        }
        if (k >= warm) t[k - warm] = dd_comm_wtime() - t0;
    }
    qsort(t, (size_t)steps, sizeof *t, bench_cmp_d);
    const double med = t[steps / 2];
    free(t);
    return med;
}

int main(int argc, char **argv) {
    if (argc < 9) {
        fprintf(stderr, "usage: bench_pp DATA MODEL HIDDEN LAYERS KERNEL BATCH STEPS MICRO[,MICRO...]\n");
        return 2;
    }
    dd_comm *w = NULL;
    dd_dataset *ds = NULL;
    dd_train_cfg c;
    int steps = 0, rc = bench_train_setup("bench_pp", &argc, &argv, &w, &ds, &c, &steps);
    if (rc) return rc;
    const int rank = dd_comm_rank(w), P = dd_comm_size(w);
    const double MB = 1048576.0; /* MiB */

    /* one process: rank 0 alone */
    double one[2] = {0, 0}; /* step s, activation bytes */
    if (rank == 0) {
        dd_mem_stats m0, m1;
        dd_mem_stats_get(&m0);
        dd_mem_stats_reset_peaks();
        dd_trainer *tr = NULL;
        if (dd_trainer_create(&c, ds, NULL, NULL, &tr) != DD_OK) {
            fprintf(stderr, "bench_pp: %s\n", dd_last_error());
            return 1;
        }
        one[0] = timed_steps(NULL, tr, 2, steps, rank);
        dd_mem_stats_get(&m1);
        one[1] = (double)(m1.peak[DD_MEM_ACTIVATIONS] - m0.cur[DD_MEM_ACTIVATIONS]);
        char desc[256];
        dd_model_describe(dd_trainer_model(tr), desc, sizeof desc);
        printf("%s, %d pipeline ranks, batch %zu x frame %zu, AdamW, %d timed steps (+2 warm-up)\n", desc, P, c.batch,
               c.frame, steps);
        printf("one process: %.4f s per step, activations %.1f MiB\n\n", one[0], one[1] / MB);
        printf("| schedule | M | V | step s | vs one process | bubble measured (mean / max rank) | formula | "
               "activations MiB (largest rank) | vs one process |\n|---|---|---|---|---|---|---|---|---|\n");
        fflush(stdout);
        dd_trainer_destroy(&tr);
    }
    dd_comm_bcast(w, one, sizeof one, 0);

    const dd_pp_kind kinds[3] = {DD_PP_GPIPE, DD_PP_1F1B, DD_PP_INTERLEAVED};
    char list[256];
    snprintf(list, sizeof list, "%s", argv[8]);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        const int M = atoi(tok);
        for (int k = 0; k < 3; k++) {
            dd_pp_cfg pc;
            dd_pp_cfg_default(&pc);
            pc.pp = P;
            pc.micro = M;
            pc.kind = kinds[k];
            pc.virt = kinds[k] == DD_PP_INTERLEAVED ? 2 : 1;
            dd_pp *z = NULL;
            dd_strategy st;
            if (dd_pp_create(w, &pc, &z) != DD_OK) {
                fprintf(stderr, "rank %d: %s\n", rank, dd_last_error());
                return 1;
            }
            dd_pp_strategy(z, &st);
            dd_mem_stats m0, m1;
            dd_mem_stats_get(&m0);
            dd_mem_stats_reset_peaks();
            dd_trainer *tr = NULL;
            if (dd_trainer_create(&c, ds, NULL, &st, &tr) != DD_OK) {
                fprintf(stderr, "rank %d: %s\n", rank, dd_last_error());
                return 1;
            }
            dd_pp_stats s0, s1;
            for (int k = 0; k < 2; k++) /* warm-up */
                if (dd_trainer_step(tr, NULL) != DD_OK) {
                    fprintf(stderr, "rank %d: %s\n", rank, dd_last_error());
                    return 1;
                }
            dd_pp_stats_get(z, &s0); /* the bubble of the timed steps only */
            const double med = timed_steps(w, tr, 0, steps, rank);
            dd_pp_stats_get(z, &s1);
            dd_mem_stats_get(&m1);
            double v[3] = {s1.step_s - s0.step_s > 0 ? 1.0 - (s1.busy_s - s0.busy_s) / (s1.step_s - s0.step_s) : NAN,
                           (double)(m1.peak[DD_MEM_ACTIVATIONS] - m0.cur[DD_MEM_ACTIVATIONS]), med};
            double *all = calloc(3 * (size_t)P, sizeof *all);
            dd_comm_allgather(w, v, sizeof v, all);
            if (rank == 0) {
                double mean = 0, mx = 0, act = 0;
                for (int r = 0; r < P; r++) {
                    mean += all[3 * r] / P;
                    mx = fmax(mx, all[3 * r]);
                    act = fmax(act, all[3 * r + 1]);
                }
                const double f = dd_pp_bubble_formula(kinds[k], P, M, pc.virt);
                printf("| %s | %d | %d | %.4f | %.2fx | %.1f %% / %.1f %% | %.1f %% | %.1f | %.2fx |\n",
                       dd_pp_kind_name(kinds[k]), M, pc.virt, med, med / one[0], 100 * mean, 100 * mx, 100 * f,
                       act / MB, act / one[1]);
                printf("json: {\"schedule\":\"%s\",\"pp\":%d,\"micro\":%d,\"virtual\":%d,\"step_s\":%.6f,"
                       "\"one_process_step_s\":%.6f,\"bubble_mean\":%.4f,\"bubble_max\":%.4f,\"bubble_formula\":%.4f,"
                       "\"activations_bytes\":%.0f,\"one_process_activations_bytes\":%.0f}\n",
                       dd_pp_kind_name(kinds[k]), P, M, pc.virt, med, one[0], mean, mx, f, act, one[1]);
                fflush(stdout);
            }
            free(all);
            dd_trainer_destroy(&tr);
            dd_pp_destroy(&z);
        }
    }
    dd_dataset_free(&ds);
    dd_comm_free(&w);
    dd_comm_finalize();
    return 0;
}
