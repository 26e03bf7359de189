/* Shared set-up of the libFuzzer harnesses (tests/fuzz/fuzz_*.c, built by `make fuzz`
 * with -DDD_FUZZ=ON; docs/testing.md): silence the library's log, and hand file readers
 * the fuzz input as a file (the readers take paths). Files live in /dev/shm (or $TMPDIR)
 * under a per-process name, so parallel fuzzers do not collide. */
#ifndef DD_FUZZ_UTIL_H
#define DD_FUZZ_UTIL_H

#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "distdpd/core.h"
#include "distdpd/net.h"

static void dd_fuzz_log_drop(dd_log_level l, const char *m, void *u) {
    (void)l;
    (void)m;
    (void)u;
}

#ifdef _GNU_SOURCE /* nftw: harnesses that define it before their includes (the socket ones) */
#include <errno.h>
#include <ftw.h>
static int dd_fuzz_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) != 0 && errno != ENOENT;
}
/* Removes the tree at path (a harness's scratch directory), depth first, not following links. */
static inline void dd_fuzz_rm_tree(const char *path) { nftw(path, dd_fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS); }
#endif

/* Once per process: no log output (refusals are the expected outcome of most inputs). */
static inline void dd_fuzz_init(void) {
    static int done;
    if (done) return;
    done = 1;
    dd_log_set(dd_fuzz_log_drop, NULL, DD_LOG_ERROR);
}

/* The path of this process's scratch file `name` (e.g. "x.csv"). */
static inline const char *dd_fuzz_path(const char *name) {
    static char buf[8][512];
    static int k;
    struct stat sb;
    const char *dir = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : getenv("TMPDIR");
    if (!dir) dir = "/tmp";
    char *p = buf[k++ & 7];
    snprintf(p, sizeof buf[0], "%s/ddfuzz-%ld-%s", dir, (long)getpid(), name);
    return p;
}

/* Writes data[0..n) to the scratch file `name`; returns its path (aborts on I/O failure:
 * that is the harness's machine, not a finding). */
static inline const char *dd_fuzz_file(const char *name, const uint8_t *data, size_t n) {
    const char *p = dd_fuzz_path(name);
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(p);
        abort();
    }
    return p;
}

/* Splits the input at the first occurrence of the 4-byte separator "\n###" (for targets
 * that read two files, e.g. SigMF meta + data): part 0 before, part 1 after. Without a
 * separator the whole input is part 0 and part 1 is empty. */
static inline void dd_fuzz_split(const uint8_t *d, size_t n, const uint8_t **a, size_t *na, const uint8_t **b,
                                 size_t *nb) {
    static const uint8_t sep[4] = {'\n', '#', '#', '#'};
    *a = d;
    *na = n;
    *b = d + n;
    *nb = 0;
    for (size_t i = 0; i + 4 <= n; i++)
        if (memcmp(d + i, sep, 4) == 0) {
            *na = i;
            *b = d + i + 4;
            *nb = n - i - 4;
            return;
        }
}

/* The check of the sample readers' results: on success n finite samples (then freed), on
 * failure *x left NULL. Aborts (a finding) otherwise. */
static inline void dd_fuzz_check_samples(dd_status st, dd_cf32 *x, size_t n) {
    if (st == DD_OK) {
        for (size_t i = 0; i < n; i++)
            if (!isfinite(crealf(x[i])) || !isfinite(cimagf(x[i]))) abort();
        dd_free(x);
    } else if (x != NULL) {
        abort();
    }
}

/* A NUL-terminated copy of the input (string parsers); caller free()s. */
static inline char *dd_fuzz_str(const uint8_t *d, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, d, n);
    s[n] = 0;
    return s;
}

/* A one-server parameter-server cluster file for the harnesses that run a server or play
 * one: a free loopback port into addr ("tcp://127.0.0.1:PORT", cap bytes) and the scratch
 * file `name` holding {"replicas": 0, EXTRA"servers": [{"name": "s0", "address": ADDR}]}
 * (extra: "" or more keys ending in ", "). Returns its path (valid as dd_fuzz_path's). */
static inline const char *dd_fuzz_ps_cluster(const char *name, const char *extra, char *addr, size_t cap) {
    int port = dd_net_free_port();
    if (port < 0) abort();
    snprintf(addr, cap, "tcp://127.0.0.1:%d", port);
    const char *path = dd_fuzz_path(name);
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fprintf(f, "{\"replicas\": 0, %s\"servers\": [{\"name\": \"s0\", \"address\": \"%s\"}]}\n", extra, addr);
    if (fclose(f) != 0) abort();
    return path;
}

#endif
