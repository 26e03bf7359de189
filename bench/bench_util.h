/* Shared parts of the C benchmarks (bench/bench_*.c, built by their scripts with cc or
 * mpicc -Iinclude): the process CPU time, a comparison for qsort of doubles (medians), and
 * the set-up of the MPI training benchmarks that take "DATA MODEL HIDDEN LAYERS KERNEL
 * BATCH STEPS" as their first arguments. Header-only. */
#ifndef DD_BENCH_UTIL_H
#define DD_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "distdpd/comm.h"
#include "distdpd/dataset.h"
#include "distdpd/train.h"

/* Seconds of CPU time of this process (steadier than wall time on a shared machine: a
 * preempted process does not count the wait). */
static inline double bench_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* MPI, the world, the data set argv[1] and the training configuration of argv[2..7]
 * (model, hidden, layers, kernel, batch; stride 50, no test split; *steps = argv[7]).
 * 0, or the exit status after a message on stderr naming `name`. */
static inline int bench_train_setup(const char *name, int *argc, char ***argv, dd_comm **w, dd_dataset **ds,
                                    dd_train_cfg *c, int *steps) {
    if (dd_comm_init(argc, argv) != DD_OK) return 1;
    dd_comm_world(w);
    char **a = *argv;
    if (dd_dataset_load(a[1], ds) != DD_OK) {
        fprintf(stderr, "%s: %s\n", name, dd_last_error());
        return 1;
    }
    dd_train_cfg_default(c, DD_TRAIN_PA);
    snprintf(c->model, sizeof c->model, "%s", a[2]);
    dd_model_cfg_set(&c->model_cfg, "hidden", atoi(a[3]));
    dd_model_cfg_set(&c->model_cfg, "layers", atoi(a[4]));
    dd_model_cfg_set(&c->model_cfg, "kernel", atoi(a[5]));
    c->batch = (size_t)atoi(a[6]);
    c->stride = 50;
    c->eval_test = 0;
    *steps = atoi(a[7]);
    return 0;
}

#endif
