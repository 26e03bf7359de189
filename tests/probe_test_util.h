/* Resource probes for the tests that bound memory and time (tests/test_dataset.c,
 * tests/test_train.c): probe_run() runs a callback in a forked child with a wall-clock
 * limit (alarm) and, outside AddressSanitizer builds, an address-space limit, and
 * reports its status, error message, wall time and peak resident memory (getrusage
 * ru_maxrss in the child: a fresh process, so the peak is the callback's own). A hang
 * or a crash in the callback shows as exited == 0 instead of taking the test down. */
#ifndef PROBE_TEST_UTIL_H
#define PROBE_TEST_UTIL_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dd_test.h"
#include "distdpd/core.h"

#if defined(__SANITIZE_ADDRESS__)
#define PROBE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PROBE_ASAN 1
#endif
#endif
#ifndef PROBE_ASAN
#define PROBE_ASAN 0
#endif

/* Whether peak RSS and an address-space limit mean anything here: not under ASan (its
 * allocator keeps freed memory and it reserves terabytes of address space), nor under
 * valgrind (DD_TEST_VALGRIND, set by tests/valgrind.sh: valgrind's own memory and
 * address-space layout are in the process's figures). */
static inline int probe_rss_meaningful(void) { return !PROBE_ASAN && !getenv("DD_TEST_VALGRIND"); }

typedef struct {
    int exited;       /* 1 if the child returned normally */
    int sig;          /* signal that ended it (SIGALRM: the time limit), else 0 */
    dd_status status; /* the callback's status */
    double secs;      /* wall time of the callback */
    long rss_kb;      /* peak RSS growth during the callback, KiB (ru_maxrss after - before) */
    char msg[1024];   /* dd_last_error() after a failure, else "" */
} probe_res;

static long probe_maxrss_kb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

/* Current virtual size in bytes (from /proc/self/statm), 0 if unknown. */
static size_t probe_vsize(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f) return 0;
    if (fscanf(f, "%lu", &pages) != 1) pages = 0;
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Runs fn(arg) in a child limited to timeout_s seconds (times DD_TEST_TIMEOUT_SCALE) and
 * (when probe_rss_meaningful()) to its current address space + as_extra_mb MiB,
 * so that a regression fails the test with DD_ERR_NOMEM or SIGALRM instead of eating
 * the machine. Returns 0 if the result arrived (check r->exited). */
static int probe_run(dd_status (*fn)(void *), void *arg, int timeout_s, size_t as_extra_mb,
                     probe_res *r) {
    memset(r, 0, sizeof *r);
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        alarm((unsigned)(timeout_s * dd_test_timeout_scale()));
        if (probe_rss_meaningful() && as_extra_mb) {
            size_t lim = probe_vsize() + (as_extra_mb << 20);
            struct rlimit rl = {lim, lim};
            setrlimit(RLIMIT_AS, &rl);
        }
        probe_res c;
        memset(&c, 0, sizeof c);
        long base = probe_maxrss_kb();
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        c.status = fn(arg);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        c.rss_kb = probe_maxrss_kb() - base;
        c.secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        c.exited = 1;
        if (c.status != DD_OK) snprintf(c.msg, sizeof c.msg, "%s", dd_last_error());
        ssize_t w = write(fds[1], &c, sizeof c);
        (void)w;
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < sizeof *r) {
        ssize_t k = read(fds[0], (char *)r + got, sizeof *r - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fds[0]);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0) {
    }
    if (got != sizeof *r) {
        memset(r, 0, sizeof *r);
        r->sig = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
        snprintf(r->msg, sizeof r->msg, "child ended without a result (%s %d)",
                 WIFSIGNALED(ws) ? "signal" : "exit status",
                 WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
    }
    return 0;
}

#endif
