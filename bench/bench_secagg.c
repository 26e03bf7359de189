/* Secure aggregation (secagg.h) against plain aggregation, side by side in one run: per
 * client, the time of its four calls and the bytes it sends and receives; for the
 * coordinator, the time of receive + close + messages; against the plain round (a client
 * copies its d floats into a message, the coordinator averages n of them with
 * dd_agg_run). n clients, no dropouts, and n - 2 when two drop after ShareKeys (the
 * coordinator then reconstructs their mask keys). Median of reps.
 *
 * Build (from the source root, after the library is built in build/):
 *   mpicc -O2 -Iinclude bench/bench_secagg.c -Lbuild -ldistdpd -ldistdpd_rf -Wl,-rpath,$PWD/build -lsodium -lm -o bench_secagg
 * Run:  ./bench_secagg [n reps]      (default 8 5; d = 1e4 and 1e5, rings 2^32 and 2^64) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "bench_util.h"
#include "distdpd/fed.h"
#include "distdpd/secagg.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "bench_secagg: %s: %s\n", what, dd_last_error());
    exit(1);
}

/* One secure round; adds the client (all clients) and server seconds and client 0's bytes. */
static void secure_round(int n, size_t d, int bits, int drops, float **x, double *t_cl, double *t_srv, size_t *up,
                         size_t *down) {
    dd_secagg_cfg cfg = {.session = 1, .d = d, .n = n, .ring_bits = bits, .range = 1};
    uint32_t ids[64];
    dd_secagg_client *cl[64];
    dd_secagg_server *s;
    for (int i = 0; i < n; i++) ids[i] = (uint32_t)(i + 1);
    double t0 = now();
    if (dd_secagg_server_new(&cfg, ids, &s) != DD_OK) die("server");
    *t_srv += now() - t0;
    *up = *down = 0;
    for (int i = 0; i < n; i++) {
        t0 = now();
        if (dd_secagg_client_new(&cfg, ids[i], &cl[i]) != DD_OK) die("client");
        *t_cl += now() - t0;
    }
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < n; i++) {
            if (round >= 2 && i >= n - drops) continue; /* the last `drops` clients drop after ShareKeys */
            uint8_t *in = NULL, *out = NULL;
            size_t il = 0, ol = 0;
            t0 = now();
            if (round > 0 && dd_secagg_server_message(s, ids[i], &in, &il) != DD_OK) die("message");
            double t1 = now();
            if (dd_secagg_client_next(cl[i], in, il, x[i], &out, &ol) != DD_OK) die("client round");
            double t2 = now();
            if (dd_secagg_server_receive(s, ids[i], out, ol) != DD_OK) die("receive");
            double t3 = now();
            *t_cl += t2 - t1;
            *t_srv += (t1 - t0) + (t3 - t2);
            if (i == 0) *up += ol, *down += il;
            free(in), free(out);
        }
        t0 = now();
        if (dd_secagg_server_close(s) != DD_OK) die("close");
        *t_srv += now() - t0;
    }
    float *sum = malloc(d * sizeof *sum);
    if (dd_secagg_server_result(s, sum, NULL) != DD_OK) die("result");
    free(sum);
    for (int i = 0; i < n; i++) dd_secagg_client_free(cl[i]);
    dd_secagg_server_free(s);
}

static void plain_round(int n, size_t d, float **x, double *t_cl, double *t_srv) {
    float **msg = malloc((size_t)n * sizeof *msg), *out = malloc(d * sizeof *out);
    double t0 = now();
    for (int i = 0; i < n; i++) {
        msg[i] = malloc(d * sizeof(float));
        memcpy(msg[i], x[i], d * sizeof(float));
    }
    double t1 = now();
    dd_agg_cfg a = {DD_AGG_MEAN, 0, 0, 0};
    if (dd_agg_run(&a, n, d, (const float *const *)msg, NULL, out, NULL) != DD_OK) die("mean");
    double t2 = now();
    *t_cl += t1 - t0;
    *t_srv += t2 - t1;
    for (int i = 0; i < n; i++) free(msg[i]);
    free(msg), free(out);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8, reps = argc > 2 ? atoi(argv[2]) : 5;
    if (n < 3 || n > 64 || reps < 1) {
        fprintf(stderr, "usage: bench_secagg [n (3..64) reps]\n");
        return 2;
    }
    if (sodium_init() < 0) return 1;
    char cpu[128] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) snprintf(cpu, sizeof cpu, "%s", c + 2);
                cpu[strcspn(cpu, "\n")] = 0;
                break;
            }
        fclose(f);
    }
    printf("# secure aggregation vs plain, n = %d, median of %d; processor %s; libsodium %s, ChaCha20 path %s\n", n,
           reps, cpu, sodium_version_string(), sodium_runtime_has_avx2() ? "AVX2" : sodium_runtime_has_ssse3() ? "SSSE3" : "portable");
    printf("%-8s %-5s %-6s %12s %12s %10s %12s %12s %10s %12s %12s %9s\n", "d", "ring", "drops", "client_s",
           "plain_cl_s", "cl_ratio", "server_s", "plain_srv_s", "srv_ratio", "bytes_up", "bytes_down", "expansion");
    const size_t ds[] = {10000, 100000};
    dd_rng g;
    dd_rng_seed(&g, 1);
    for (int a = 0; a < 2; a++)
        for (int bits = 32; bits <= 64; bits += 32)
            for (int drops = 0; drops <= 2; drops += 2) {
                size_t d = ds[a];
                float **x = malloc((size_t)n * sizeof *x);
                for (int i = 0; i < n; i++) {
                    x[i] = malloc(d * sizeof(float));
                    for (size_t j = 0; j < d; j++) x[i][j] = (float)(2 * dd_rng_uniform(&g) - 1);
                }
                double *tc = calloc((size_t)reps, sizeof *tc), *ts = calloc((size_t)reps, sizeof *ts);
                double *pc = calloc((size_t)reps, sizeof *pc), *ps = calloc((size_t)reps, sizeof *ps);
                size_t up = 0, down = 0;
                for (int r = 0; r < reps; r++) { /* alternating, so that load changes hit both */
                    secure_round(n, d, bits, drops, x, &tc[r], &ts[r], &up, &down);
                    plain_round(n, d, x, &pc[r], &ps[r]);
                }
                qsort(tc, (size_t)reps, sizeof *tc, bench_cmp_d);
                qsort(ts, (size_t)reps, sizeof *ts, bench_cmp_d);
                qsort(pc, (size_t)reps, sizeof *pc, bench_cmp_d);
                qsort(ps, (size_t)reps, sizeof *ps, bench_cmp_d);
                double c = tc[reps / 2] / n, s = ts[reps / 2], p = pc[reps / 2] / n, q = ps[reps / 2];
                printf("%-8zu 2^%-3d %-6d %12.6f %12.6f %10.1f %12.6f %12.6f %10.1f %12zu %12zu %9.4f\n", d, bits,
                       drops, c, p, c / p, s, q, s / q, up, down, (double)up / (4.0 * (double)d));
                for (int i = 0; i < n; i++) free(x[i]);
                free(x), free(tc), free(ts), free(pc), free(ps);
            }
    printf("# client_s: one client's four calls; plain_cl_s: copying its update into a message; server_s: "
           "receive + close + messages for all; plain_srv_s: the weighted mean of n updates; bytes: client 0, "
           "excluding the global model; expansion: bytes_up / (4 d)\n");
    return 0;
}
