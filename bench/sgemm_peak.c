/* Single-core float32 GEMM peak of this machine as the BLAS in use sees it: the best of
 * REPS calls of cblas_sgemm (N x N times N x N, row-major, N default 2048), in GFLOP/s
 * (2 N^3 / time), plus the name of the OpenBLAS kernel it picked. The reference line for
 * "distance to the hardware limit" in bench/run.sh; run it with OPENBLAS_NUM_THREADS=1
 * (set by run.sh). OPENBLAS_CORETYPE=SkylakeX (etc.) overrides OpenBLAS's CPU detection.
 *
 * gflops_cpu: the same from the process CPU time (less sensitive to other jobs taking the
 * core away; a shared machine). Usage: sgemm_peak [N [REPS]] ->
 * {"n": N, "gflops": G, "gflops_cpu": Gc, "core": "Haswell"} */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

char *openblas_get_corename(void);

static double clk(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double now(void) { return clk(CLOCK_MONOTONIC); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2048, reps = argc > 2 ? atoi(argv[2]) : 5;
    if (n < 16 || reps < 1) {
        fprintf(stderr, "usage: sgemm_peak [N >= 16 [REPS >= 1]]\n");
        return 2;
    }
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    if (!a || !b || !c) return 1;
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((i * 7 + 3) % 17) / 17.0f - 0.5f;
        b[i] = (float)((i * 5 + 1) % 13) / 13.0f - 0.5f;
        c[i] = 0;
    }
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < reps + 1; r++) { /* the first call warms up */
        double t0 = now(), c0 = clk(CLOCK_PROCESS_CPUTIME_ID);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = now() - t0, dc = clk(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (r > 0 && dt < best) best = dt;
        if (r > 0 && dc < best_cpu) best_cpu = dc;
    }
    printf("{\"n\": %d, \"gflops\": %.2f, \"gflops_cpu\": %.2f, \"core\": \"%s\", \"check\": %.3g}\n", n,
           2.0 * n * (double)n * n / best * 1e-9, 2.0 * n * (double)n * n / best_cpu * 1e-9,
           openblas_get_corename(), (double)c[nn / 2]);
    free(a), free(b), free(c);
    return 0;
}
