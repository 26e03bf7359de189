/* Runtime selection of the SIMD level of the float32 fast paths (see simd.h): the CPU's
 * features (GCC's __builtin_cpu_supports, which also checks that the OS saves the vector
 * state), lowered by the environment variable DD_SIMD; the route between kernels and
 * OpenBLAS; the thread count of the kernels (distdpd/nn.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "simd.h"

#include <cblas.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/nn.h"

static _Atomic int simd_level = -1;

int dd_nn_simd_supported(void) {
#if DD_NN_HAVE_X86_SIMD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return DD_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return DD_SIMD_AVX2;
#endif
    return DD_SIMD_GENERIC;
}

const char *dd_nn_simd_name(int level) {
    switch (level) {
    case DD_SIMD_AVX2: return "avx2";
    case DD_SIMD_AVX512: return "avx512";
    default: return "generic";
    }
}

int dd_nn_simd_set(int level) {
    int sup = dd_nn_simd_supported();
    if (level < 0) level = 0;
    if (level > sup) level = sup;
    atomic_store_explicit(&simd_level, level, memory_order_relaxed);
    return level;
}

int dd_nn_simd_level(void) {
    int l = atomic_load_explicit(&simd_level, memory_order_relaxed);
    if (l >= 0) return l;
    l = dd_nn_simd_supported();
    const char *env = getenv("DD_SIMD");
    if (env && *env) {
        int want = l;
        if (strcmp(env, "generic") == 0 || strcmp(env, "0") == 0) want = DD_SIMD_GENERIC;
        else if (strcmp(env, "avx2") == 0) want = DD_SIMD_AVX2;
        else if (strcmp(env, "avx512") == 0) want = DD_SIMD_AVX512;
        if (want < l) l = want;
    }
    atomic_store_explicit(&simd_level, l, memory_order_relaxed);
    return l;
}

static _Atomic int route_cur = -1;

int dd_nn_route_set(int route) {
    if (route != DD_NN_ROUTE_FAST && route != DD_NN_ROUTE_BLAS) route = DD_NN_ROUTE_AUTO;
    atomic_store_explicit(&route_cur, route, memory_order_relaxed);
    return route;
}

int dd_nn_route(void) {
    int r = atomic_load_explicit(&route_cur, memory_order_relaxed);
    if (r >= 0) return r;
    r = DD_NN_ROUTE_AUTO;
    const char *env = getenv("DD_NN_ROUTE");
    if (env && strcmp(env, "fast") == 0) r = DD_NN_ROUTE_FAST;
    else if (env && strcmp(env, "blas") == 0) r = DD_NN_ROUTE_BLAS;
    atomic_store_explicit(&route_cur, r, memory_order_relaxed);
    return r;
}

const char *dd_nn_route_name(int route) {
    switch (route) {
    case DD_NN_ROUTE_FAST: return "fast";
    case DD_NN_ROUTE_BLAS: return "blas";
    default: return "auto";
    }
}

static _Atomic int threads_cur = 0;

/* OPENBLAS_NUM_THREADS or GOTO_NUM_THREADS set to a positive count: OpenBLAS's own
 * thread count is the user's, dd_nn_threads_set leaves it alone */
static int blas_env_threads(void) {
    static const char *const vars[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 0;
}

static int threads_clamp(int n) {
#ifndef _OPENMP
    n = 1;
#endif
    return n < 1 ? 1 : n > 256 ? 256 : n;
}

int dd_nn_threads_set(int n) {
    n = threads_clamp(n);
    atomic_store_explicit(&threads_cur, n, memory_order_relaxed);
    /* OpenBLAS on one thread: the layers' large sgemm calls run in panels on the n threads
     * (gemm_panels.c), bit-identical at any n, where OpenBLAS's own threads are not */
    if (!blas_env_threads()) openblas_set_num_threads(1);
    return n;
}

int dd_nn_blas_threads(void) { return openblas_get_num_threads(); }

int dd_nn_blas_threads_one(void) {
    const int was = openblas_get_num_threads();
    if (was > 1) openblas_set_num_threads(1);
    return was;
}

void dd_nn_blas_threads_restore(int was) {
    if (was > 1) openblas_set_num_threads(was);
}

/* > 0: the layer thread count of the calling thread only (dd_nn_threads_local) */
static _Thread_local int threads_local;

void dd_nn_threads_local(int n) { threads_local = n > 0 ? n : 0; }

int dd_nn_threads(void) {
    if (threads_local > 0) return threads_local;
    int n = atomic_load_explicit(&threads_cur, memory_order_relaxed);
    if (n > 0) return n;
    /* first use (maybe inside a parallel region): DD_THREADS or 1, OpenBLAS untouched */
    const char *env = getenv("DD_THREADS");
    n = threads_clamp(env && *env ? atoi(env) : 1);
    atomic_store_explicit(&threads_cur, n, memory_order_relaxed);
    return n;
}

int dd_nn_threads_owned(void) {
    int cores = 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
    int local = 1;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0) {
            local = atoi(v);
            break;
        }
    }
    const int n = cores / local;
    return n > 0 ? n : 1;
}

void dd_nn_thread_cols(size_t B, size_t vw, int tid, int nth, size_t *cb, size_t *ce) {
    const size_t nv = (B + vw - 1) / vw;
    const size_t lo = nv * (size_t)tid / (size_t)nth, hi = nv * (size_t)(tid + 1) / (size_t)nth;
    *cb = lo * vw < B ? lo * vw : B;
    *ce = hi * vw < B ? hi * vw : B;
}

#define DD_TILE 16

void dd_nn_bth_to_fm(float *dst, size_t ld, const float *src, size_t B, size_t T, size_t C) {
    for (size_t b0 = 0; b0 < B; b0 += DD_TILE) {
        const size_t nb = B - b0 < DD_TILE ? B - b0 : DD_TILE;
        for (size_t t0 = 0; t0 < T; t0 += DD_TILE) {
            const size_t nt = T - t0 < DD_TILE ? T - t0 : DD_TILE;
            for (size_t c = 0; c < C; c++)
                for (size_t t = t0; t < t0 + nt; t++) {
                    float *d = dst + c * ld + t * B + b0;
                    const float *s = src + (b0 * T + t) * C + c;
                    for (size_t bb = 0; bb < nb; bb++) d[bb] = s[bb * T * C];
                }
        }
    }
}

void dd_nn_fm_to_bth(float *dst, const float *src, size_t ld, size_t B, size_t nt, size_t Ts,
                     size_t C) {
    for (size_t b0 = 0; b0 < B; b0 += DD_TILE) {
        const size_t nb = B - b0 < DD_TILE ? B - b0 : DD_TILE;
        for (size_t t0 = 0; t0 < nt; t0 += DD_TILE) {
            const size_t n = nt - t0 < DD_TILE ? nt - t0 : DD_TILE;
            for (size_t bb = 0; bb < nb; bb++)
                for (size_t t = t0; t < t0 + n; t++) {
                    float *d = dst + ((b0 + bb) * Ts + t) * C;
                    const float *s = src + t * B + b0 + bb;
                    for (size_t c = 0; c < C; c++) d[c] = s[c * ld];
                }
        }
    }
}
