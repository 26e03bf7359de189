/* Helpers shared by the MPI tests (tests/test_*_mpi.c): agreement checks over a
 * communicator, so that one failing rank fails a check on every rank (and no rank goes on
 * into a collective the others skip). Header-only. */
#ifndef DD_TEST_MPI_UTIL_H
#define DD_TEST_MPI_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/comm.h"
#include "distdpd/core.h"

/* 1 if every rank of c passed ok == 1. */
static inline int tm_all_ok(dd_comm *c, int ok) {
    int n = dd_comm_size(c);
    int *all = calloc((size_t)n, sizeof *all);
    int res = all != NULL && dd_comm_allgather(c, &ok, sizeof ok, all) == DD_OK;
    for (int i = 0; res && i < n; i++) res = all[i] == 1;
    free(all);
    return res;
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

#endif
