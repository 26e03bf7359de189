/* Minimal test harness for distdpd's C tests: checks that record failures with file
 * and line, a summary line "NAME: N passed, N failed", skip support (exit code 77,
 * which ctest reports as skipped), and helpers for temporary directories and paths. */
#ifndef DD_TEST_H
#define DD_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>

#include "distdpd/core.h"

static int dd_t_pass, dd_t_fail;

/* A check that records its result; on failure prints file, line, the condition and the
 * message, then runs `on_fail` (nothing for CHECK, dd_test_stop() for REQUIRE). */
#define DD_T_CHECK(on_fail, cond, ...)                                     \
    do {                                                                   \
        if (cond) {                                                        \
            dd_t_pass++;                                                   \
        } else {                                                           \
            dd_t_fail++;                                                   \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            on_fail;                                                       \
        }                                                                  \
    } while (0)

#define CHECK(cond, ...) DD_T_CHECK((void)0, cond, __VA_ARGS__)

/* Ends the test after a failed REQUIRE (exit status 1, the counts so far printed). */
_Noreturn static inline void dd_test_stop(void) {
    printf("STOPPED after a failed REQUIRE: %d passed, %d failed\n", dd_t_pass, dd_t_fail);
    fflush(stdout);
    exit(1);
}

/* Like CHECK, but a failure ends the test at once: for a value the rest of the test needs
 * (an allocation, a file read, a created object), where going on after the failure would
 * only dereference NULL or read garbage (and the static analyzer, `make lint`, follows
 * that path). In an MPI test the launcher ends the other ranks when one exits non-zero. */
#define REQUIRE(cond, ...) DD_T_CHECK(dd_test_stop(), cond, __VA_ARGS__)

/* |a - b| <= tol */
#define CHECK_NEAR(a, b, tol)                                                        \
    do {                                                                             \
        double dd_a_ = (double)(a), dd_b_ = (double)(b), dd_tol_ = (double)(tol);    \
        CHECK(fabs(dd_a_ - dd_b_) <= dd_tol_, "%s = %.10g, %s = %.10g, tol %.3g", #a, \
              dd_a_, #b, dd_b_, dd_tol_);                                           \
    } while (0)

/* A call that must return DD_OK; prints dd_last_error() otherwise. */
#define CHECK_OK(expr)                                                             \
    do {                                                                           \
        dd_status dd_s_ = (expr);                                                  \
        CHECK(dd_s_ == DD_OK, "%s -> %s: %s", #expr, dd_status_str(dd_s_), dd_last_error()); \
    } while (0)

/* A call that must return DD_OK, else the test ends (REQUIRE). */
#define REQUIRE_OK(expr)                                                           \
    do {                                                                           \
        dd_status dd_s_ = (expr);                                                  \
        REQUIRE(dd_s_ == DD_OK, "%s -> %s: %s", #expr, dd_status_str(dd_s_), dd_last_error()); \
    } while (0)

/* A call that must fail with the given status and a message containing `needle`. */
#define CHECK_ERR(expr, status, needle)                                            \
    do {                                                                           \
        dd_status dd_s_ = (expr);                                                  \
        CHECK(dd_s_ == (status), "%s -> %s (want %s): %s", #expr, dd_status_str(dd_s_), \
              dd_status_str(status), dd_last_error());                             \
        CHECK(strstr(dd_last_error(), (needle)) != NULL,                           \
              "message '%s' lacks '%s'", dd_last_error(), (needle));               \
    } while (0)

static inline int dd_test_done(const char *name) {
    printf("%s: %d passed, %d failed\n", name, dd_t_pass, dd_t_fail);
    return dd_t_fail ? 1 : 0;
}

_Noreturn static inline void dd_test_skip(const char *why) {
    printf("SKIP: %s\n", why);
    exit(77);
}

/* Factor for the deadlines of waits in tests (an event that should come within a few
 * seconds): DD_TEST_TIMEOUT_SCALE (tests/valgrind.sh sets 20: code under valgrind runs
 * 20-50x slower), default 1. Never a timed assertion: only how long to wait. */
static inline double dd_test_timeout_scale(void) {
    const char *s = getenv("DD_TEST_TIMEOUT_SCALE");
    double v = s ? atof(s) : 1.0;
    return v >= 1.0 && v <= 1000.0 ? v : 1.0;
}

/* Source tree root (tests run from it; DD_SOURCE_DIR set by ctest). */
static inline const char *dd_test_srcdir(void) {
    const char *s = getenv("DD_SOURCE_DIR");
    return s ? s : ".";
}

/* Temporary directories made by dd_test_tmpdir(), removed at exit unless DD_KEEP_TMP is
 * set (then their paths are printed, for debugging a failure). */
static char dd_t_tmp[16][512];
static int dd_t_ntmp;

/* Removes path and, for a directory, everything below it (no symlinks followed). */
static void dd_t_rm(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
                char child[1024];
                snprintf(child, sizeof child, "%s/%s", path, e->d_name);
                dd_t_rm(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void dd_t_cleanup(void) {
    for (int i = 0; i < dd_t_ntmp; i++) {
        if (getenv("DD_KEEP_TMP")) printf("kept %s\n", dd_t_tmp[i]);
        else dd_t_rm(dd_t_tmp[i]);
    }
}

/* A fresh temporary directory (under $TMPDIR or /tmp), removed with its contents when
 * the test exits. The returned path stays valid until exit (at most 16 per test). */
static inline const char *dd_test_tmpdir(void) {
    static char buf[512];
    const char *base = getenv("TMPDIR");
    snprintf(buf, sizeof buf, "%s/ddtest.XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        exit(2);
    }
    if (dd_t_ntmp < 16) {
        if (dd_t_ntmp == 0) atexit(dd_t_cleanup);
        memcpy(dd_t_tmp[dd_t_ntmp++], buf, sizeof buf);
    }
    return buf;
}

/* Reads a whole file (binary safe, NUL-terminated, through the library's dd_read_text);
 * *n (may be NULL) its size. Exits with status 2 when it cannot be read. Caller frees. */
static inline unsigned char *dd_test_slurp(const char *path, size_t *n) {
    char *t = NULL;
    size_t len = 0;
    if (dd_read_text(path, &t, &len) != DD_OK) {
        fprintf(stderr, "%s\n", dd_last_error());
        exit(2);
    }
    if (n) *n = len;
    return (unsigned char *)t;
}

/* Reads a whole file as NUL-terminated text; NULL when it cannot be read (the caller's
 * CHECK reports it). */
static inline char *dd_test_read(const char *path) {
    char *t = NULL;
    size_t len = 0;
    return dd_read_text(path, &t, &len) == DD_OK ? t : NULL;
}

/* Writes n bytes to a file (for building bad-input fixtures); exits with status 2 when it
 * cannot. */
static inline void dd_test_write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

/* Writes text to a file, for building bad-input fixtures. */
static inline void dd_test_write(const char *path, const char *text) {
    dd_test_write_bytes(path, text, strlen(text));
}

/* Entries of dir (not "." / "..") whose name holds `part` (e.g. ".tmp.": an atomic
 * writer's temporary files left behind); -1 when dir cannot be listed. */
static inline int dd_test_count_names(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* Warnings logged through dd_log between dd_test_warn_start() and dd_test_warn_stop():
 * their count and their text, one per line (a writer thread may log them: read them
 * after joining it). */
static char dd_t_warned[4096];
static int dd_t_nwarn;

static inline void dd_t_warn_capture(dd_log_level level, const char *msg, void *user) {
    (void)user;
    if (level != DD_LOG_WARN) return;
    dd_t_nwarn++;
    size_t used = strlen(dd_t_warned);
    snprintf(dd_t_warned + used, sizeof dd_t_warned - used, "%s\n", msg);
}

static inline void dd_test_warn_start(void) {
    dd_t_nwarn = 0;
    dd_t_warned[0] = '\0';
    dd_log_set(dd_t_warn_capture, NULL, DD_LOG_WARN);
}

static inline void dd_test_warn_stop(void) { dd_log_set(NULL, NULL, DD_LOG_WARN); }

#endif
