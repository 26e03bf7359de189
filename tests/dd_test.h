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

static int dd_t_pass, dd_t_fail;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            dd_t_pass++;                                                   \
        } else {                                                           \
            dd_t_fail++;                                                   \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
        }                                                                  \
    } while (0)

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

static inline void dd_test_skip(const char *why) {
    printf("SKIP: %s\n", why);
    exit(77);
}

/* Source tree root (tests run from it; DD_SOURCE_DIR set by ctest). */
static inline const char *dd_test_srcdir(void) {
    const char *s = getenv("DD_SOURCE_DIR");
    return s ? s : ".";
}

/* A fresh temporary directory (under $TMPDIR or /tmp); the path is static storage. */
static inline const char *dd_test_tmpdir(void) {
    static char buf[512];
    const char *base = getenv("TMPDIR");
    snprintf(buf, sizeof buf, "%s/ddtest.XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        exit(2);
    }
    return buf;
}

/* Writes text to a file, for building bad-input fixtures. */
static inline void dd_test_write(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

#endif
