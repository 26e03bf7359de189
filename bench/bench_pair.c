/* Two models' training throughput, side by side in one process: short chunks of steps of
 * model A and model B in turn, so both see the same machine state. On a shared or
 * virtualised machine the speed of one core can change by 20-30 % for seconds at a time
 * (docs/performance.md, "tcn against gru in one process"); two separate processes of a
 * second each then land in different states, and the ratio of their medians says more
 * about the machine than about the models. Here each round times a chunk of A and a chunk
 * of B a fraction of a second apart (the order alternates by round: AB, BA, ...), one
 * untimed step before each chunk reloads the caches the other model used, and the summary
 * is the median of the per-round ratios.
 *
 * Usage: bench_pair DATA CHUNK ROUNDS MODEL_A HIDDEN_A MODEL_B HIDDEN_B
 *   the reference recipe's data handling and optimiser (as bench_train: frames 200,
 *   stride 1, batch 64, AdamW lr 5e-3), one thread unless DD_THREADS is set; CHUNK timed
 *   steps per model per round. A chunk never crosses an epoch's end: the epoch's last
 *   batches run untimed and the epoch is ended (with its evaluation) between chunks.
 * Prints one JSON object per round {"round", "a_gflops", "b_gflops", "ratio"} (GFLOP/s
 * from the process CPU time of the chunk; ratio = A / B) and a summary
 * {"model_a", "hidden_a", "model_b", "hidden_b", "chunk", "rounds", "a_gflops", "b_gflops",
 *  "ratio", "ratio_q1", "ratio_q3"} (medians and the ratio's quartiles). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "distdpd/dataset.h"
#include "distdpd/model.h"
#include "distdpd/nn.h"
#include "distdpd/train.h"

typedef struct {
    dd_trainer *tr;
    double flops_per_step; /* the analytic count of one training step (batch x frame samples) */
} side;

static int side_create(side *s, dd_dataset *ds, const char *model, int hidden) {
    dd_train_cfg cfg;
    dd_train_cfg_default(&cfg, DD_TRAIN_PA);
    snprintf(cfg.model, sizeof cfg.model, "%s", model);
    if (dd_model_cfg_set(&cfg.model_cfg, "hidden", hidden) != DD_OK) return 1;
    cfg.epochs = 100000;
    if (dd_trainer_create(&cfg, ds, NULL, NULL, &s->tr) != DD_OK) return 1;
    const dd_model *m = dd_trainer_model(s->tr);
    s->flops_per_step = (dd_model_flops_per_sample(m, 0) + dd_model_flops_per_sample(m, 1)) * (double)cfg.batch *
                        (double)cfg.frame;
    return 0;
}

/* n steps untimed, ending the epoch first where fewer than `need` batches are left in it. */
static int side_prepare(side *s, uint64_t need, int n) {
    const uint64_t nb = dd_trainer_num_batches(s->tr);
    if (nb < need) {
        dd_error(DD_ERR_ARG, "an epoch has %llu batches, fewer than a chunk and its warm-up step (%llu)",
                 (unsigned long long)nb, (unsigned long long)need);
        return 1;
    }
    uint64_t left = nb * (uint64_t)(dd_trainer_epoch(s->tr) + 1) - dd_trainer_steps(s->tr);
    if (left < need) {
        while (!dd_trainer_epoch_done(s->tr))
            if (dd_trainer_step(s->tr, NULL) != DD_OK) return 1;
        dd_epoch_record r;
        if (dd_trainer_end_epoch(s->tr, &r) != DD_OK) return 1;
    }
    for (int i = 0; i < n; i++)
        if (dd_trainer_step(s->tr, NULL) != DD_OK) return 1;
    return 0;
}

/* GFLOP/s of `chunk` steps (CPU time), after one untimed step; < 0 on error. */
static double side_chunk(side *s, int chunk) {
    if (side_prepare(s, (uint64_t)chunk + 1, 1) != 0) return -1.0;
    const double c0 = bench_cpu_s();
    for (int i = 0; i < chunk; i++)
        if (dd_trainer_step(s->tr, NULL) != DD_OK) return -1.0;
    return s->flops_per_step * chunk / (bench_cpu_s() - c0) * 1e-9;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: bench_pair DATA CHUNK ROUNDS MODEL_A HIDDEN_A MODEL_B HIDDEN_B\n");
        return 2;
    }
    const int chunk = atoi(argv[2]), rounds = atoi(argv[3]);
    if (chunk < 1 || rounds < 1 || rounds > 10000) {
        fprintf(stderr, "bench_pair: CHUNK must be >= 1 and ROUNDS in [1, 10000] (got '%s', '%s')\n", argv[2],
                argv[3]);
        return 2;
    }
    const char *nth = getenv("DD_THREADS");
    if (nth && *nth) dd_nn_threads_set(atoi(nth));
    dd_dataset *ds = NULL;
    side s[2] = {{0}};
    double *ga = calloc((size_t)rounds, sizeof *ga), *gb = calloc((size_t)rounds, sizeof *gb),
           *ra = calloc((size_t)rounds, sizeof *ra);
    int rc = 1;
    if (!ga || !gb || !ra) {
        fprintf(stderr, "bench_pair: out of memory\n");
        goto done;
    }
    if (dd_dataset_load(argv[1], &ds) != DD_OK || side_create(&s[0], ds, argv[4], atoi(argv[5])) != 0 ||
        side_create(&s[1], ds, argv[6], atoi(argv[7])) != 0 || side_prepare(&s[0], 4, 3) != 0 ||
        side_prepare(&s[1], 4, 3) != 0)
        goto fail;
    for (int r = 0; r < rounds; r++) {
        double g[2];
        for (int k = 0; k < 2; k++) {
            const int i = r % 2 ? 1 - k : k;
            if ((g[i] = side_chunk(&s[i], chunk)) < 0) goto fail;
        }
        ga[r] = g[0];
        gb[r] = g[1];
        ra[r] = g[0] / g[1];
        printf("{\"round\": %d, \"a_gflops\": %.3f, \"b_gflops\": %.3f, \"ratio\": %.4f}\n", r + 1, g[0], g[1], ra[r]);
        fflush(stdout);
    }
    const double mr = median(ra, rounds); /* sorts ra: the quartiles below read it sorted */
    printf("{\"model_a\": \"%s\", \"hidden_a\": %d, \"model_b\": \"%s\", \"hidden_b\": %d, \"chunk\": %d, "
           "\"rounds\": %d, \"a_gflops\": %.3f, \"b_gflops\": %.3f, \"ratio\": %.4f, \"ratio_q1\": %.4f, "
           "\"ratio_q3\": %.4f}\n",
           argv[4], dd_model_cfg_get(dd_model_config(dd_trainer_model(s[0].tr)), "hidden"), argv[6],
           dd_model_cfg_get(dd_model_config(dd_trainer_model(s[1].tr)), "hidden"), chunk, rounds, median(ga, rounds),
           median(gb, rounds), mr, ra[rounds / 4], ra[(3 * rounds) / 4]);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "bench_pair: %s\n", dd_last_error());
done:
    dd_trainer_destroy(&s[0].tr);
    dd_trainer_destroy(&s[1].tr);
    dd_dataset_free(&ds);
    free(ga);
    free(gb);
    free(ra);
    return rc;
}
