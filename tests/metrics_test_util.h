/* Helpers for the metrics tests: a tiny "I,Q" CSV reader (the dataset module is
 * developed separately, so the metric tests do not depend on it), a JSON file loader
 * on cJSON, and band-limited complex noise made with FFTW. Test-only code. */
#ifndef DD_METRICS_TEST_UTIL_H
#define DD_METRICS_TEST_UTIL_H

#include <complex.h>
#include <fftw3.h>
#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/metrics.h"

/* rel prefixed with the source root (DD_SOURCE_DIR); static storage, two slots used in
 * turn so that two results can be live at once. */
static inline const char *mt_src_path(const char *rel) {
    static char buf[2][1024];
    static int slot;
    slot ^= 1;
    snprintf(buf[slot], sizeof buf[slot], "%s/%s", dd_test_srcdir(), rel);
    return buf[slot];
}

/* Reads an "I,Q" CSV (one header line) into a malloc'ed dd_cf32 array; exits the test
 * with status 2 on a malformed file. Caller frees. */
static inline dd_cf32 *mt_read_iq_csv(const char *path, size_t *n_out) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t cap = 4096, n = 0, line = 0;
    dd_cf32 *v = malloc(cap * sizeof *v);
    char buf[256];
    while (v && fgets(buf, sizeof buf, f)) {
        line++;
        if (line == 1 && (buf[0] == 'I' || buf[0] == 'i')) continue;
        char *end;
        float re = strtof(buf, &end);
        if (end == buf || *end != ',') {
            fprintf(stderr, "%s:%zu: not 'I,Q'\n", path, line);
            exit(2);
        }
        char *p = end + 1;
        float im = strtof(p, &end);
        if (end == p) {
            fprintf(stderr, "%s:%zu: bad Q value\n", path, line);
            exit(2);
        }
        if (n == cap) {
            cap *= 2;
            dd_cf32 *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                v = NULL;
                break;
            }
            v = nv;
        }
        v[n++] = CMPLXF(re, im);
    }
    fclose(f);
    if (!v) {
        fprintf(stderr, "%s: out of memory\n", path);
        exit(2);
    }
    *n_out = n;
    return v;
}

/* Parses a JSON file; exits with status 2 when unreadable. Caller cJSON_Delete()s. */
static inline cJSON *mt_load_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "%s: read failed\n", path);
        exit(2);
    }
    text[len] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) {
        fprintf(stderr, "%s: invalid JSON\n", path);
        exit(2);
    }
    return j;
}

/* Number member `key` of object o; exits if missing. */
static inline double mt_num(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it)) {
        fprintf(stderr, "reference JSON: missing number '%s'\n", key);
        exit(2);
    }
    return it->valuedouble;
}

/* Complex white Gaussian noise of E|x|^2 = 1, ideally band-limited to |f| < bw/2 by an
 * FFT mask over the whole record, scaled to the given rms. Caller frees. */
static inline dd_cf32 *mt_bandlimited_noise(size_t n, double fs, double bw, double rms,
                                            uint64_t seed) {
    dd_rng r;
    dd_rng_seed(&r, seed);
    fftw_complex *b = fftw_malloc(n * sizeof *b);
    dd_cf32 *x = malloc(n * sizeof *x);
    if (!b || !x) exit(2);
    for (size_t i = 0; i < n; i++) b[i] = dd_rng_normal(&r) + I * dd_rng_normal(&r);
    fftw_plan fwd = fftw_plan_dft_1d((int)n, b, b, FFTW_FORWARD, FFTW_ESTIMATE);
    fftw_plan inv = fftw_plan_dft_1d((int)n, b, b, FFTW_BACKWARD, FFTW_ESTIMATE);
    fftw_execute(fwd);
    for (size_t k = 0; k < n; k++) {
        double f = (k < (n + 1) / 2 ? (double)k : (double)k - (double)n) * fs / (double)n;
        if (fabs(f) > bw / 2) b[k] = 0;
    }
    fftw_execute(inv);
    double p = 0;
    for (size_t i = 0; i < n; i++) p += creal(b[i] * conj(b[i]));
    double sc = rms / sqrt(p / (double)n);
    for (size_t i = 0; i < n; i++) x[i] = (dd_cf32)(b[i] * sc);
    fftw_destroy_plan(fwd);
    fftw_destroy_plan(inv);
    fftw_free(b);
    return x;
}

#endif
