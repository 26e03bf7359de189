/* Helpers shared by the MPI tests (tests/test_*_mpi.c): agreement checks over a
 * communicator, so that one failing rank fails a check on every rank (and no rank goes on
 * into a collective the others skip). Header-only. */
#ifndef DD_TEST_MPI_UTIL_H
#define DD_TEST_MPI_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/comm.h"
#include "distdpd/core.h"
#include "distdpd/train.h"

/* 1 if every rank of c passed ok == 1 (the flags gathered; 0 if the gather fails). */
static inline int tm_gather_all_one(dd_comm *c, int ok) {
    int n = dd_comm_size(c);
    int *all = calloc((size_t)n, sizeof *all);
    int res = all != NULL && dd_comm_allgather(c, &ok, sizeof ok, all) == DD_OK;
    for (int i = 0; res && i < n; i++) res = all[i] == 1;
    free(all);
    return res;
}

/* 1 if every rank of c passed ok == 1. This rank's own flag, one of those gathered, is
 * tested here as well: the static analyzer does not follow the gather's loop, and so
 * knows that a rank that passed 0 gets 0 (and does not go on with its NULL results). */
static inline int tm_all_ok(dd_comm *c, int ok) {
    const int all = tm_gather_all_one(c, ok);
    return all && ok == 1;
}

/* 1 if every rank of c passed the same 32-bit value. */
static inline int tm_same_u32(dd_comm *c, uint32_t v) {
    int n = dd_comm_size(c);
    uint32_t *all = calloc((size_t)n, sizeof *all);
    int ok = all != NULL && dd_comm_allgather(c, &v, sizeof v, all) == DD_OK;
    for (int i = 0; ok && i < n; i++) ok = all[i] == v;
    free(all);
    return ok;
}

/* 1 if p[0..bytes) holds the same bytes on every rank of c (compared whole, not by a
 * checksum), agreed by all ranks. */
static inline int tm_same_bytes(dd_comm *c, const void *p, size_t bytes) {
    if (bytes == 0) return 1;
    int n = dd_comm_size(c);
    char *all = malloc(bytes * (size_t)n);
    int ok = all != NULL && dd_comm_allgather(c, p, bytes, all) == DD_OK;
    for (int q = 0; ok && q < n; q++) ok = memcmp(all + (size_t)q * bytes, p, bytes) == 0;
    free(all);
    return tm_all_ok(c, ok);
}

/* The whole model's arena on every rank of world from each rank's local storage (params
 * or grads: the whole local storage, also under zero1) and map (dd_trainer_map);
 * *differ_out (may be NULL) counts floats held by several ranks (replicated entries,
 * replicas) that are not bit-identical; the lowest rank's copy is kept. Caller frees. */
static inline float *tm_whole_of(dd_comm *world, dd_trainer *tr, const float *local, size_t *differ_out) {
    const int g_size = dd_comm_size(world);
    const size_t n = dd_trainer_whole_floats(tr);
    const dd_optim_run *map = NULL;
    size_t nmap = 0, lo = 0, hi = 0;
    dd_trainer_map(tr, &map, &nmap);
    dd_trainer_storage(tr, NULL, NULL, &lo, &hi, NULL, NULL);
    const dd_optim_run one = {0, 0, hi - lo};
    if (!map) {
        map = &one;
        nmap = 1;
    }
    size_t mine[2] = {nmap, hi - lo}, *all = calloc(2 * (size_t)g_size, sizeof *all);
    dd_comm_allgather(world, mine, sizeof mine, all);
    size_t *cnt = calloc(4 * (size_t)g_size, sizeof *cnt), tm = 0, td = 0;
    for (int r = 0; r < g_size; r++) {
        cnt[r] = all[2 * r] * sizeof(dd_optim_run);
        cnt[g_size + r] = tm * sizeof(dd_optim_run);
        cnt[2 * g_size + r] = all[2 * r + 1] * sizeof(float);
        cnt[3 * g_size + r] = td * sizeof(float);
        tm += all[2 * r];
        td += all[2 * r + 1];
    }
    dd_optim_run *maps = calloc(tm ? tm : 1, sizeof *maps);
    float *data = calloc(td ? td : 1, sizeof *data), *w = calloc(n ? n : 1, sizeof *w);
    unsigned char *seen = calloc(n ? n : 1, 1);
    dd_comm_allgatherv(world, map, maps, cnt, cnt + g_size);
    dd_comm_allgatherv(world, local, data, cnt + 2 * g_size, cnt + 3 * g_size);
    size_t differ = 0;
    const dd_optim_run *m = maps;
    for (int r = 0; r < g_size; r++) {
        const float *src = data + cnt[3 * g_size + r] / sizeof(float);
        for (size_t k = 0; k < all[2 * r]; k++, m++)
            for (size_t i = 0; i < m->len; i++) {
                const float v = src[m->dst + i];
                if (seen[m->src + i] && memcmp(&w[m->src + i], &v, sizeof v) != 0) differ++;
                if (!seen[m->src + i]) w[m->src + i] = v; /* the lowest world rank's: tensor rank 0 */
                seen[m->src + i] = 1;
            }
    }
    if (differ_out) *differ_out = differ;
    free(all);
    free(cnt);
    free(maps);
    free(data);
    free(seen);
    return w;
}

/* The start of an MPI test's main: MPI and the world (*world NULL when there is none:
 * return dd_test_done then), rank 0's temporary directory into tmp on every rank; returns
 * the start time. */
static inline double tm_begin(int *argc, char ***argv, dd_comm **world, char *tmp, size_t cap) {
    CHECK_OK(dd_comm_init(argc, argv));
    CHECK_OK(dd_comm_world(world));
    if (!*world) return 0.0;
    if (dd_comm_rank(*world) == 0) snprintf(tmp, cap, "%s", dd_test_tmpdir());
    dd_comm_bcast(*world, tmp, cap, 0);
    return dd_comm_wtime();
}

/* Its end: every rank's verdict agreed (one failing rank fails all), a summary line on
 * rank 0, MPI finalised; the exit status. */
static inline int tm_end(dd_comm **world, const char *name, double t0) {
    const int ok = tm_all_ok(*world, dd_t_fail == 0);
    if (dd_comm_rank(*world) == 0)
        printf("%s: %d ranks, %.2f s, all ranks %s\n", name, dd_comm_size(*world), dd_comm_wtime() - t0,
               ok ? "passed" : "NOT all passed");
    dd_comm_free(world);
    CHECK_OK(dd_comm_finalize());
    if (!ok && dd_t_fail == 0) dd_t_fail = 1;
    return dd_test_done(name);
}

#endif
