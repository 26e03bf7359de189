/* The counters of tests/fault/fault.h (DD_FAULT=ON builds only). */
#define DD_FAULT_IMPL
#include "fault.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#undef malloc
#undef calloc
#undef realloc
#undef aligned_alloc
#undef strdup
#undef fopen
#undef fwrite
#undef fclose
#undef write
#undef fsync
#undef rename

static atomic_ulong n_alloc, n_io;
static atomic_int fired;
static unsigned long at_alloc, at_io;
static int armed;

static void report(void) {
    const char *p = getenv("DD_FAULT_REPORT");
    if (!p) return;
    FILE *f = fopen(p, "w");
    if (!f) return;
    fprintf(f, "%lu %lu %d\n", (unsigned long)atomic_load(&n_alloc), (unsigned long)atomic_load(&n_io),
            atomic_load(&fired));
    fclose(f);
}

static void arm(void) {
    if (armed) return;
    armed = 1; /* racing first calls both set the same values */
    const char *a = getenv("DD_FAULT_ALLOC"), *b = getenv("DD_FAULT_IO");
    at_alloc = a ? strtoul(a, NULL, 10) : 0;
    at_io = b ? strtoul(b, NULL, 10) : 0;
    atexit(report);
}

/* 1 when this call (counted in *calls) is the at-th: the one to fail, with errno err. */
static int fail_nth(atomic_ulong *calls, const unsigned long *at, int err) {
    arm();
    unsigned long k = atomic_fetch_add(calls, 1) + 1;
    if (*at && k == *at) {
        atomic_store(&fired, 1);
        errno = err;
        return 1;
    }
    return 0;
}
static int fail_alloc(void) { return fail_nth(&n_alloc, &at_alloc, ENOMEM); }
static int fail_io(void) { return fail_nth(&n_io, &at_io, EIO); }

void *dd_fault_malloc(size_t n) { return fail_alloc() ? NULL : malloc(n); }
void *dd_fault_calloc(size_t a, size_t b) { return fail_alloc() ? NULL : calloc(a, b); }
void *dd_fault_realloc(void *p, size_t n) { return fail_alloc() ? NULL : realloc(p, n); }
void *dd_fault_aligned_alloc(size_t al, size_t n) { return fail_alloc() ? NULL : aligned_alloc(al, n); }
char *dd_fault_strdup(const char *s) { return fail_alloc() ? NULL : strdup(s); }

FILE *dd_fault_fopen(const char *path, const char *mode) {
    if (strpbrk(mode, "wa+") && fail_io()) return NULL;
    return fopen(path, mode);
}
size_t dd_fault_fwrite(const void *p, size_t s, size_t n, FILE *f) { return fail_io() ? 0 : fwrite(p, s, n, f); }
int dd_fault_fclose(FILE *f) {
    int bad = fail_io(); /* a write-back error surfacing at close: the stream is closed all the same */
    int rc = fclose(f);
    if (bad) {
        errno = EIO;
        return EOF;
    }
    return rc;
}
ssize_t dd_fault_write(int fd, const void *p, size_t n) { return fail_io() ? -1 : write(fd, p, n); }
int dd_fault_fsync(int fd) { return fail_io() ? -1 : fsync(fd); }
int dd_fault_rename(const char *a, const char *b) { return fail_io() ? -1 : rename(a, b); }
