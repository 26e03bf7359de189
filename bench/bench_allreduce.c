/* Allreduce benchmark: latency and bus bandwidth of every algorithm of comm.h (ring, tree,
 * rhd, hier) next to MPI_Allreduce ("mpi"), float32 sums of 4 B .. 64 MB, in one run.
 * busbw = algbw * 2(p-1)/p with algbw = bytes / time (the nccl-tests definition), so that
 * a bandwidth-optimal allreduce shows the link's bandwidth whatever p is.
 *
 * Each cell: one warm-up, then `reps` repeats (about 0.15 s worth, 5 .. 200), each
 * started together after a barrier on a buffer refilled from a pristine copy; the time of
 * a repeat is the maximum over ranks; the table shows the median. Every result is also
 * checked against the exact sum (the inputs are small integers, so float32 sums are
 * exact): a wrong result aborts the run.
 *
 * Build and run both rank counts with bench/allreduce.sh, or by hand (source root, library
 * built in build/):
 *   mpicc -O2 -Iinclude bench/bench_allreduce.c -Lbuild -ldistdpd -ldistdpd_rf -Wl,-rpath,$PWD/build -o bench_allreduce
 *   mpirun -np 2 ./bench_allreduce [max_bytes]          (default 67108864)
 * HIER uses the node split (MPI_Comm_split_type); set DD_COMM_RANKS_PER_NODE=k to
 * simulate nodes of k ranks on one machine. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/comm.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (dd_comm_init(&argc, &argv) != DD_OK) {
        fprintf(stderr, "bench_allreduce: %s\n", dd_last_error());
        return 1;
    }
    dd_comm *c = NULL;
    if (dd_comm_world(&c) != DD_OK) {
        fprintf(stderr, "bench_allreduce: %s\n", dd_last_error());
        return 1;
    }
    int rank = dd_comm_rank(c), p = dd_comm_size(c);
    size_t maxb = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)64 << 20;
    if (maxb < 4) maxb = 4;
    size_t maxn = maxb / sizeof(float);
    float *buf = malloc(maxn * sizeof *buf), *orig = malloc(maxn * sizeof *orig);
    double *t = malloc(256 * sizeof *t);
    if (!buf || !orig || !t) {
        fprintf(stderr, "bench_allreduce: out of memory\n");
        return 1;
    }
    /* small integers: every partial sum is exact in float32, whatever the order */
    for (size_t i = 0; i < maxn; i++) orig[i] = (float)((i * 7 + (size_t)rank * 13) % 64);

    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int len = 0;
        if (dd_comm_mpi_active()) MPI_Get_library_version(ver, &len);
        char *nl = strchr(ver, '\n');
        if (nl) *nl = '\0';
        const char *rpn = getenv("DD_COMM_RANKS_PER_NODE");
        printf("allreduce (float32 sum), %d ranks; %s\n", p, dd_comm_mpi_active() ? ver : "no MPI (self)");
        if (rpn)
            printf("hier nodes: blocks of %s ranks (DD_COMM_RANKS_PER_NODE)", rpn);
        else
            printf("hier nodes: MPI_COMM_TYPE_SHARED");
        printf("; time = median over repeats of the slowest rank;\n"
               "busbw in GB/s = bytes/time * 2(p-1)/p\n\n");
        printf("%10s", "bytes");
        for (int a = 0; a < dd_allreduce_count(); a++) {
            char h[32];
            snprintf(h, sizeof h, "%s us", dd_allreduce_name((dd_allreduce_algo)a));
            printf(" | %10s %7s", h, "busbw");
        }
        printf("\n");
    }
    double busf = p > 1 ? 2.0 * (p - 1) / p : 1.0;
    for (size_t bytes = 4; bytes <= maxb; bytes *= 4) {
        size_t n = bytes / sizeof(float);
        if (rank == 0) printf("%10zu", bytes);
        for (int a = 0; a < dd_allreduce_count(); a++) {
            dd_allreduce_algo al = (dd_allreduce_algo)a;
            /* warm-up (and a first estimate of the time) + correctness check */
            memcpy(buf, orig, n * sizeof *buf);
            dd_comm_barrier(c);
            double t0 = dd_comm_wtime();
            if (dd_comm_allreduce(c, al, buf, n, DD_F32) != DD_OK) {
                fprintf(stderr, "bench_allreduce: %s: %s\n", dd_allreduce_name(al), dd_last_error());
                return 1;
            }
            double first = dd_comm_wtime() - t0;
            for (size_t i = 0; i < n; i++) {
                double want = 0;
                for (int q = 0; q < p; q++) want += (double)((i * 7 + (size_t)q * 13) % 64);
                if ((double)buf[i] != want) {
                    fprintf(stderr, "bench_allreduce: %s, %zu bytes: element %zu = %g, want %g\n",
                            dd_allreduce_name(al), bytes, i, (double)buf[i], want);
                    return 1;
                }
            }
            int reps = first > 0 ? (int)(0.15 / first) : 200;
            if (reps < 5) reps = 5;
            if (reps > 200) reps = 200;
            dd_comm_bcast(c, &reps, sizeof reps, 0);
            for (int r = 0; r < reps; r++) {
                memcpy(buf, orig, n * sizeof *buf);
                dd_comm_barrier(c);
                t0 = dd_comm_wtime();
                dd_comm_allreduce(c, al, buf, n, DD_F32);
                t[r] = dd_comm_wtime() - t0;
            }
            if (dd_comm_mpi_active() && p > 1)
                MPI_Allreduce(MPI_IN_PLACE, t, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            qsort(t, (size_t)reps, sizeof *t, cmp);
            double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
            double busbw = med > 0 ? (double)bytes / med * busf / 1e9 : 0;
            if (rank == 0) printf(" | %10.1f %7.3f", med * 1e6, busbw);
        }
        if (rank == 0) {
            printf("\n");
            fflush(stdout);
        }
    }
    free(buf);
    free(orig);
    free(t);
    dd_comm_free(&c);
    dd_comm_finalize();
    return 0;
}
