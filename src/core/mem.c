/* Arena memory accounting (core.h): every parameter, gradient, optimiser-state and
 * activation buffer of training goes through dd_arena_calloc, which keeps a 64-byte
 * header (kind, size) in front of the block, counts current and peak bytes per kind and
 * enforces the process's budget (--mem-limit-mb), so that what parallel.json reports is
 * what was allocated, not an estimate. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "distdpd/core.h"

#define HDR 64 /* header bytes: keeps the block 64-byte aligned */
#define MAGIC 0x41524E41u /* "ARNA" */
#define THP ((uintptr_t)2 << 20) /* the huge page size of x86-64 */
#define THP_MIN ((size_t)4 << 20) /* blocks given huge pages: at least one whole one inside */

typedef struct {
    uint32_t magic;
    uint32_t kind;
    size_t bytes; /* the block's size as counted */
    void *raw;    /* what calloc returned (free it) */
} arena_hdr;

static dd_mem_stats g_mem;

const char *dd_mem_kind_name(dd_mem_kind k) {
    static const char *const names[DD_MEM_KINDS] = {"params", "grads", "optim", "activations"};
    return (int)k >= 0 && k < DD_MEM_KINDS ? names[k] : "?";
}

static size_t total_now(void) {
    size_t t = 0;
    for (int k = 0; k < DD_MEM_KINDS; k++) t += g_mem.cur[k];
    return t;
}

/* Transparent huge pages for a block of THP_MIN bytes or more, before its first touch:
 * madvise(MADV_HUGEPAGE) over the 2 MiB-aligned pages inside it (the kernel's default
 * here, "madvise", gives huge pages only to regions asking for them), so a workspace
 * costs a page fault per 2 MiB instead of per 4 KiB: on the AMD EPYC Zen 5 KVM guest a
 * 4 KiB fault costs about 12 us, and tcn's first epoch (stride 50) went from 0.11 to
 * 0.05 s (docs/performance.md, "Huge pages"). DD_HUGEPAGES=0 turns it off. A refusal
 * (no THP in the kernel) changes nothing, so it is not an error. */
static void huge_pages(char *p, size_t bytes) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("DD_HUGEPAGES");
        on = !(e && strcmp(e, "0") == 0);
    }
    if (!on) return;
    uintptr_t a = ((uintptr_t)p + THP - 1) & ~(THP - 1), b = ((uintptr_t)p + bytes) & ~(THP - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
}

static void mib(char *buf, size_t cap, size_t bytes) { snprintf(buf, cap, "%.1f MiB", (double)bytes / 1048576.0); }

void *dd_arena_calloc(dd_mem_kind kind, size_t count, size_t size, const char *what) {
    if ((int)kind < 0 || kind >= DD_MEM_KINDS) kind = DD_MEM_ACTIVATIONS;
    if (size != 0 && count > (SIZE_MAX - 2 * HDR) / size) {
        dd_error(DD_ERR_NOMEM, "%s: allocation of %zu x %zu bytes overflows", what ? what : "arena", count, size);
        return NULL;
    }
    const size_t bytes = count * size;
    const size_t now = total_now();
    if (g_mem.limit && (bytes > g_mem.limit || now > g_mem.limit - bytes)) {
        char a[32], b[32], c[32];
        mib(a, sizeof a, bytes);
        mib(b, sizeof b, now);
        mib(c, sizeof c, g_mem.limit);
        dd_error(DD_ERR_NOMEM,
                 "memory budget exceeded: allocating %s for %s (%s) with %s of arenas already allocated would pass "
                 "the limit of %s per rank (--mem-limit-mb)",
                 a, what ? what : "an arena", dd_mem_kind_name(kind), b, c);
        return NULL;
    }
    /* calloc, not dd_calloc (aligned_alloc + memset): glibc's calloc hands out a large
     * block (one it maps) as the kernel's zero pages without writing them, so a
     * workspace costs its page faults where it is first used and no memset pass on
     * top (2.4 % of a one-epoch gru 23 run on the AMD EPYC Zen 5 guest, perf), and
     * pages never touched stay out of the RSS. The block is aligned to 64 bytes inside:
     * header at [p, p + HDR), data at p + HDR, p + HDR - raw in [HDR, 2 HDR). */
    char *raw = calloc(1, 2 * HDR + bytes);
    if (!raw) {
        char a[32];
        mib(a, sizeof a, bytes);
        dd_error(DD_ERR_NOMEM, "out of memory allocating %s for %s (%s)", a, what ? what : "an arena",
                 dd_mem_kind_name(kind));
        return NULL;
    }
    char *p = (char *)(((uintptr_t)raw + HDR + (HDR - 1)) & ~(uintptr_t)(HDR - 1)) - HDR;
    if (bytes >= THP_MIN) huge_pages(p + HDR, bytes);
    arena_hdr *h = (arena_hdr *)p;
    h->magic = MAGIC;
    h->kind = (uint32_t)kind;
    h->bytes = bytes;
    h->raw = raw;
    g_mem.cur[kind] += bytes;
    if (g_mem.cur[kind] > g_mem.peak[kind]) g_mem.peak[kind] = g_mem.cur[kind];
    if (now + bytes > g_mem.peak_total) g_mem.peak_total = now + bytes;
    return p + HDR;
}

void dd_arena_free(void *p) {
    if (!p) return;
    arena_hdr *h = (arena_hdr *)(void *)((char *)p - HDR);
    if (h->magic == MAGIC && h->kind < DD_MEM_KINDS) {
        g_mem.cur[h->kind] -= h->bytes <= g_mem.cur[h->kind] ? h->bytes : g_mem.cur[h->kind];
        h->magic = 0;
    }
    free(h->raw);
}

void dd_mem_set_limit(size_t bytes) { g_mem.limit = bytes; }

void dd_mem_stats_get(dd_mem_stats *s) {
    if (s) *s = g_mem;
}

void dd_mem_stats_reset_peaks(void) {
    for (int k = 0; k < DD_MEM_KINDS; k++) g_mem.peak[k] = g_mem.cur[k];
    g_mem.peak_total = total_now();
}

size_t dd_mem_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* kilobytes on Linux */
}
