/* Runs a model exported by `distdpd export --format c --prefix m --out DIR/m` over an
 * I/Q file, as firmware would: one sample at a time with the state carried in m_state
 * (docs/deploy.md). Build: cc -std=c99 -O2 -I DIR main.c DIR/m.c -lm
 *
 *   main IN.csv OUT.cf32 [REF.cf32]   IN: CSV "I,Q" with a header line; OUT: float32 I, Q
 *                                     interleaved; REF: prints max |OUT - REF| and the
 *                                     NMSE of OUT against REF in dB
 *   main --bench N IN.csv             runs N samples (IN repeated) and prints samples/s
 *
 * Checks that m_reset restarts the stream: the first samples after it equal the first
 * samples of the run (exit 3 otherwise). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime (the example only; the exported code is plain C99) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "m.h"

static float *read_csv(const char *path, size_t *n) {
    FILE *f = fopen(path, "r");
    char line[256];
    size_t cap = 1024;
    float *x = malloc(2 * cap * sizeof *x);
    *n = 0;
    if (!f || !x || !fgets(line, sizeof line, f)) {
        fprintf(stderr, "%s: cannot read\n", path);
        exit(2);
    }
    while (fgets(line, sizeof line, f)) {
        if (*n == cap) {
            cap *= 2;
            x = realloc(x, 2 * cap * sizeof *x);
            if (!x) exit(2);
        }
        if (sscanf(line, "%f,%f", &x[2 * *n], &x[2 * *n + 1]) != 2) {
            fprintf(stderr, "%s: bad line %zu\n", path, *n + 2);
            exit(2);
        }
        (*n)++;
    }
    fclose(f);
    return x;
}

int main(int argc, char **argv) {
    m_state s;
    if (argc == 4 && strcmp(argv[1], "--bench") == 0) {
        const size_t total = (size_t)atof(argv[2]);
        size_t n;
        float *x = read_csv(argv[3], &n), y[2], acc = 0;
        struct timespec t0, t1;
        m_init(&s);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t i = 0; i < total; i++) {
            m_step(&s, x + 2 * (i % n), y);
            acc += y[0];
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("samples_per_s %.6g (%zu samples in %.3f s; checksum %g)\n", (double)total / dt, total, dt, (double)acc);
        free(x);
        return 0;
    }
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: main IN.csv OUT.cf32 [REF.cf32] | main --bench N IN.csv\n");
        return 2;
    }
    size_t n;
    float *x = read_csv(argv[1], &n), *y = malloc(2 * n * sizeof *y);
    if (!y) return 2;
    m_init(&s);
    m_run(&s, x, y, n);
    m_reset(&s); /* a new stream: the same first samples again */
    for (size_t i = 0; i < n && i < 100; i++) {
        float z[2];
        m_step(&s, x + 2 * i, z);
        if (z[0] != y[2 * i] || z[1] != y[2 * i + 1]) {
            fprintf(stderr, "sample %zu after m_reset differs from the first run\n", i);
            return 3;
        }
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(y, sizeof *y, 2 * n, f) != 2 * n || fclose(f) != 0) return 2;
    if (argc == 4) {
        FILE *r = fopen(argv[3], "rb");
        float *ref = malloc(2 * n * sizeof *ref);
        if (!r || !ref || fread(ref, sizeof *ref, 2 * n, r) != 2 * n) {
            fprintf(stderr, "%s: cannot read %zu samples\n", argv[3], n);
            return 2;
        }
        fclose(r);
        double md = 0, e = 0, p = 0;
        for (size_t i = 0; i < 2 * n; i++) {
            const double d = (double)y[i] - (double)ref[i];
            md = fmax(md, fabs(d));
            e += d * d;
            p += (double)ref[i] * (double)ref[i];
        }
        printf("max_abs_diff %.6g nmse_db %.4f\n", md, 10 * log10(e / p));
        free(ref);
    }
    free(x);
    free(y);
    return 0;
}
