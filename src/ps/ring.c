/* Consistent-hash ring with virtual nodes, and the cutting of a parameter table into
 * blocks. ps.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/ps.h"

uint64_t dd_ps_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    /* splitmix64 finaliser: FNV alone clusters similar names */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

typedef struct {
    uint64_t h;
    int server;
} point;

struct dd_ps_ring {
    point *pts;
    size_t npts;
    int nservers;
};

static int cmp_point(const void *a, const void *b) {
    const point *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return x->server - y->server; /* equal hashes (never seen): a fixed order */
}

dd_status dd_ps_ring_create(const char *const *names, size_t n, int vnodes, dd_ps_ring **out) {
    *out = NULL;
    if (n == 0 || n > DD_PS_MAX_SERVERS) return dd_error(DD_ERR_ARG, "ring: %zu servers (need 1..%d)", n, DD_PS_MAX_SERVERS);
    if (vnodes < 1) return dd_error(DD_ERR_ARG, "ring: vnodes must be >= 1, got %d", vnodes);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0) return dd_error(DD_ERR_ARG, "ring: server name '%s' twice", names[i]);
    dd_ps_ring *r = calloc(1, sizeof *r);
    if (!r) return dd_error(DD_ERR_NOMEM, "ring");
    r->npts = n * (size_t)vnodes;
    r->pts = malloc(r->npts * sizeof *r->pts);
    if (!r->pts) {
        free(r);
        return dd_error(DD_ERR_NOMEM, "ring");
    }
    r->nservers = (int)n;
    char buf[512];
    for (size_t i = 0; i < n; i++)
        for (int v = 0; v < vnodes; v++) {
            snprintf(buf, sizeof buf, "%s#%d", names[i], v);
            r->pts[i * (size_t)vnodes + (size_t)v] = (point){dd_ps_hash(buf), (int)i};
        }
    qsort(r->pts, r->npts, sizeof *r->pts, cmp_point);
    *out = r;
    return DD_OK;
}

void dd_ps_ring_free(dd_ps_ring **r) {
    if (!r || !*r) return;
    free((*r)->pts);
    free(*r);
    *r = NULL;
}

int dd_ps_ring_place(const dd_ps_ring *r, const char *block, const unsigned char *alive, int *out, int k) {
    uint64_t h = dd_ps_hash(block);
    size_t lo = 0, hi = r->npts; /* first point with hash >= h */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->pts[mid].h < h) lo = mid + 1;
        else hi = mid;
    }
    int found = 0;
    for (size_t i = 0; i < r->npts && found < k; i++) {
        int s = r->pts[(lo + i) % r->npts].server;
        if (alive && !alive[s]) continue;
        int dup = 0;
        for (int j = 0; j < found; j++) dup |= out[j] == s;
        if (!dup) out[found++] = s;
    }
    return found;
}

dd_status dd_ps_blocks_from_table(const dd_param_table *t, size_t block_floats, dd_ps_block **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!t || t->count == 0) return dd_error(DD_ERR_ARG, "blocks: empty parameter table");
    if (block_floats == 0) return dd_error(DD_ERR_ARG, "blocks: block size must be >= 1 float");
    size_t count = 0;
    for (size_t i = 0; i < t->count; i++) count += (t->entries[i].size + block_floats - 1) / block_floats;
    dd_ps_block *b = calloc(count, sizeof *b);
    if (!b) return dd_error(DD_ERR_NOMEM, "blocks");
    size_t k = 0;
    for (size_t i = 0; i < t->count; i++) {
        const dd_param_entry *e = &t->entries[i];
        size_t parts = (e->size + block_floats - 1) / block_floats;
        for (size_t p = 0; p < parts; p++, k++) {
            int w = parts == 1 ? snprintf(b[k].name, sizeof b[k].name, "%s", e->name)
                               : snprintf(b[k].name, sizeof b[k].name, "%s#%zu", e->name, p);
            if (w < 0 || (size_t)w >= sizeof b[k].name) {
                free(b);
                return dd_error(DD_ERR_ARG, "blocks: name of entry '%s' part %zu too long", e->name, p);
            }
            b[k].offset = e->offset + p * block_floats;
            b[k].len = p + 1 < parts ? block_floats : e->size - p * block_floats;
        }
    }
    *out = b;
    *n = count;
    return DD_OK;
}
