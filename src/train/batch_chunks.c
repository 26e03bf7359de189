/* Batch chunks: the threads inside a rank as data parallelism over a rank's slice of a
 * batch (docs/performance.md, "Threads inside a rank").
 *
 * dd_trainer_compute_grads cuts the slice into chunks whose number and sizes depend only
 * on the slice's frame count and the model's size, never on the thread count: each chunk
 * gathers its frames, runs the whole model forward, the loss, and the model backward
 * into its own gradient buffer (the first chunk into the gradient storage itself) on its
 * own workspace, and the chunks' gradients and sums of squared errors are added in chunk
 * order afterwards. One thread runs the chunks one after the other, N threads share them
 * (the caller and the trainer's helper threads, below), and each number is computed by
 * the same operations in the same order in both cases: the thread count never changes a
 * result. The layers called inside a chunk get threads/chunks threads each (rounded down;
 * more threads than chunks: their own OpenMP regions inside each chunk's thread), which
 * does not change a number either (their kernels give each output to one thread).
 * OpenBLAS runs on one thread during the chunks (each chunk's sgemm calls on the chunk's
 * thread) and gets its count back after them.
 *
 * Chunks are used where the step is the trainer's own whole-model pass over the whole
 * parameter and gradient storage (the single-process strategy, data parallelism, the
 * parameter server's workers, federated clients); not for sharded storage (zero2/zero3:
 * per-stage parameter and gradient callbacks), a tensor-parallel shard (its stages talk
 * to the other ranks), ranged or mapped storage, data parallelism of models above
 * DD_TRAIN_CHUNK_OVERLAP_FLOATS (its gradient buckets go out during the backward), or
 * when the slice has at most DD_CHUNK_FRAMES frames: those run the model on the whole
 * slice as before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/train.h"
#include "nn/simd.h"
#include "train_internal.h"


/* Frames per chunk (at most; a slice's chunks are as equal as they can be,
 * ceil(bl / ceil(bl / 32)) frames, the last one fewer): the recipe's batch of 64 is two
 * chunks of 32. Narrower chunks cost the fused GRU kernels their column blocking (one
 * thread, gru 23, AVX-512: 16 frames +60-70 % CPU time per step, 32 frames +4-12 %). */
#define DD_CHUNK_FRAMES 32
/* The chunks' extra gradient buffers ((chunks - 1) x the model's floats) stay under
 * this many floats (64 MiB): large models get fewer, larger chunks, or none. */
#define DD_CHUNK_GRAD_FLOATS ((size_t)16 << 20)
/* At most this many chunks (a larger slice gets larger chunks). */
#define DD_CHUNK_MAX 64

size_t dd_train_chunks(size_t n, size_t frames, size_t *cf) {
    *cf = frames;
    if (frames <= DD_CHUNK_FRAMES || n == 0) return 1;
    size_t nc = (frames + DD_CHUNK_FRAMES - 1) / DD_CHUNK_FRAMES;
    const size_t cap = 1 + DD_CHUNK_GRAD_FLOATS / n;
    if (nc > cap) nc = cap;
    if (nc > DD_CHUNK_MAX) nc = DD_CHUNK_MAX;
    if (nc <= 1) return 1;
    *cf = (frames + nc - 1) / nc;
    return (frames + *cf - 1) / *cf;
}

void dd_train_chunks_max(size_t n, size_t bmax, size_t *nc, size_t *cf) {
    *nc = *cf = 1;
    for (size_t b = 1; b <= bmax; b++) { /* not monotone in b: take the maxima */
        size_t w, k = dd_train_chunks(n, b, &w);
        if (k > 1 && k > *nc) *nc = k;
        if (k > 1 && w > *cf) *cf = w;
    }
}

size_t dd_trainer_chunk_plan(const dd_trainer *tr, size_t bl, size_t *cf) {
    *cf = bl;
    if (tr->mwhole || tr->mapped || tr->ranged || tr->glo != 0 || tr->ghi != tr->n || tr->plo != 0 ||
        tr->phi != tr->n)
        return 1;
    return dd_train_chunks(tr->n, bl, cf);
}

void dd_trainer_chunks_free(dd_trainer *tr) {
    for (size_t c = 0; tr->cws_m && c < tr->cnc; c++) { /* cws_m NULL: its calloc failed */
        dd_arena_free(tr->cws_m[c]);
        if (tr->cws_p) dd_arena_free(tr->cws_p[c]);
    }
    free(tr->cws_m);
    free(tr->cws_p);
    dd_arena_free(tr->cgrads);
    tr->cws_m = tr->cws_p = NULL;
    tr->cgrads = NULL;
    tr->cnc = tr->ccf = 0;
    dd_trainer_chunk_pool_free(tr);
}

/* The chunk buffers for any slice of at most bmax frames (allocated once). */
static dd_status chunk_buffers(dd_trainer *tr) {
    if (tr->cws_m) return DD_OK;
    size_t ncmax, cfmax;
    dd_train_chunks_max(tr->n, tr->bmax, &ncmax, &cfmax);
    const int F = (int)tr->cfg.frame, dla = tr->cfg.task == DD_TRAIN_DLA; /* the PA model runs in the step */
    tr->cws_m = calloc(ncmax, sizeof(float *));
    if (tr->cws_m && dla) tr->cws_p = calloc(ncmax, sizeof(float *));
    if (!tr->cws_m || (dla && !tr->cws_p)) {
        dd_trainer_chunks_free(tr);
        return dd_error(DD_ERR_NOMEM, "out of memory for the batch chunks' workspaces");
    }
    tr->cnc = ncmax;
    tr->ccf = cfmax;
    for (size_t c = 0; c < ncmax; c++) {
        tr->cws_m[c] = dd_arena_calloc(DD_MEM_ACTIVATIONS, dd_model_workspace_size(tr->m, (int)cfmax, F) + 16,
                                       sizeof(float), "a batch chunk's activations");
        if (tr->cws_m[c] && dla)
            tr->cws_p[c] = dd_arena_calloc(DD_MEM_ACTIVATIONS, dd_model_workspace_size(tr->pa, (int)cfmax, F) + 16,
                                           sizeof(float), "a batch chunk's PA activations");
        if (!tr->cws_m[c] || (dla && !tr->cws_p[c])) {
            dd_trainer_chunks_free(tr);
            return DD_ERR_NOMEM; /* dd_arena_calloc said what and how much */
        }
    }
    tr->cgrads = dd_arena_calloc(DD_MEM_GRADS, (ncmax - 1) * tr->n, sizeof(float), "the batch chunks' gradients");
    if (!tr->cgrads) {
        dd_trainer_chunks_free(tr);
        return DD_ERR_NOMEM;
    }
    return DD_OK;
}

/* Chunk c: frames [a, b) of the slice starting at position lo; gradients added into g. */
static dd_status chunk_run(dd_trainer *tr, size_t c, uint64_t epoch, uint64_t lo, size_t a, size_t b,
                           uint64_t global, const float *params, float *g, double *sse) {
    const size_t F = tr->cfg.frame, off = a * F * 2, nv = (b - a) * F * 2, S = dd_model_num_stages(tr->m);
    const int bc = (int)(b - a);
    const dd_stage_src src = {params, g, NULL, NULL, NULL, NULL};
    float *x = tr->xin + off, *out1 = tr->out1 + off, *dout = tr->dout + off;
    DD_TRY(dd_trainer_gather(tr, epoch, lo + a, lo + b, x, tr->tgt + off));
    DD_TRY(dd_model_range_forward(tr->m, 0, S, &src, x, x, out1, bc, (int)F, tr->cws_m[c]));
    const float *pred = out1;
    if (tr->cfg.task == DD_TRAIN_DLA) {
        DD_TRY(dd_model_forward(tr->pa, tr->pa_params, out1, tr->out2 + off, bc, (int)F, tr->cws_p[c]));
        pred = tr->out2 + off;
    }
    *sse = dd_trainer_mse_grad(tr, pred, tr->tgt + off, nv, global, dout);
    const float *dy = dout;
    if (tr->cfg.task == DD_TRAIN_DLA) {
        float *du = tr->du + off;
        memset(du, 0, nv * sizeof(float));
        DD_TRY(dd_model_backward(tr->pa, tr->pa_params, NULL, out1, dout, du, bc, (int)F, tr->cws_p[c]));
        dy = du;
    }
    return dd_model_range_backward(tr->m, 0, S, &src, x, x, dy, NULL, NULL, bc, (int)F, tr->cws_m[c]);
}

/* ---------------------------------------------------------------- the chunks' threads
 *
 * The chunks of a step run on the calling thread and nth - 1 helper threads of the
 * trainer's own (created on first use, joined by dd_trainer_chunks_free), not in an
 * OpenMP parallel region: a recipe step is about 1 ms on 2 threads, and with
 * OMP_WAIT_POLICY=passive libgomp puts its threads to sleep at every region's end, so each
 * step paid a futex wake-up of the helper at the fork (its chunk starts late) and often
 * one of the caller at the join (tens of us each in a KVM guest). Between two steps (the
 * gradient sum, clipping, the optimiser: a few us) the helpers here spin on the next
 * job for at most DD_THREADS_SPIN_US (default 100 us; 0: sleep at once) before they
 * sleep on a condition variable, and the caller spins as long on the chunks' completion;
 * no spinning at all when the process runs more threads than the cores it owns
 * (dd_nn_threads_owned: its cores divided among the ranks of its node), so oversubscribed
 * runs (ranks x threads > cores) sleep at once as before. Which thread runs which chunk
 * changes no number (each chunk has its own workspace and gradient buffer, summed in
 * chunk order afterwards). */
#ifdef _OPENMP
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

typedef struct chunk_job {
    dd_trainer *tr;
    uint64_t epoch, lo, global;
    size_t bl, nc, cf;
    const dd_stage_src *src;
    int inner;
    double *part;
    dd_status *st;
    char (*msg)[256];
} chunk_job;

struct dd_chunk_pool {
    pthread_t *th;
    int nh;         /* helper threads */
    long spin_ns;   /* the most a thread spins before it sleeps */
    pthread_mutex_t mu;
    pthread_cond_t go, fin;
    /* the job's generation (bits 32-63), its chunk count (16-31) and the next chunk to
     * take (0-15): a thread takes a chunk only of the generation it woke for */
    _Atomic uint64_t next;
    atomic_size_t done; /* chunks of the current job done */
    atomic_int sleep_go, sleep_fin, quit;
    _Atomic(const chunk_job *) job;
};
#endif

/* Chunk c of a step (on whichever thread). */
static void chunk_one(dd_trainer *tr, size_t c, uint64_t epoch, uint64_t lo, size_t bl, size_t cf, uint64_t global,
                      const dd_stage_src *src, double *part, dd_status *st, char (*msg)[256]) {
    const size_t n = tr->n, a = c * cf, b = a + cf < bl ? a + cf : bl;
    float *g = src->grads;
    if (c > 0) {
        g = tr->cgrads + (c - 1) * n;
        memset(g, 0, n * sizeof(float));
    }
    part[c] = 0.0;
    st[c] = chunk_run(tr, c, epoch, lo, a, b, global, src->params, g, &part[c]);
    msg[c][0] = '\0';
    if (st[c] != DD_OK) snprintf(msg[c], sizeof msg[c], "%s", dd_last_error()); /* the thread's own message */
}

#ifdef _OPENMP
static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Take and run the chunks of generation gen until none is left. The chunk count is in
 * the word itself: the job is read only after a chunk of it was taken (its caller waits
 * for that chunk, so the job is still there). */
static void pool_work(struct dd_chunk_pool *p, uint32_t gen) {
    uint64_t v = atomic_load(&p->next);
    for (;;) {
        const size_t c = (size_t)(v & 0xffffu), nc = (size_t)((v >> 16) & 0xffffu);
        if ((uint32_t)(v >> 32) != gen || c >= nc) return;
        if (!atomic_compare_exchange_weak(&p->next, &v, v + 1)) continue;
        const chunk_job *j = atomic_load(&p->job);
        dd_nn_threads_local(j->inner); /* the layers of this chunk: all / nth threads (nested) */
        chunk_one(j->tr, c, j->epoch, j->lo, j->bl, j->cf, j->global, j->src, j->part, j->st, j->msg);
        dd_nn_threads_local(0);
        v = atomic_load(&p->next); /* read before this chunk counts as done */
        if (atomic_fetch_add(&p->done, 1) + 1 == nc && atomic_load(&p->sleep_fin) > 0) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_broadcast(&p->fin);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void *pool_main(void *arg) {
    struct dd_chunk_pool *p = arg;
    uint32_t seen = (uint32_t)(atomic_load(&p->next) >> 32);
    for (;;) {
        uint32_t gen = (uint32_t)(atomic_load(&p->next) >> 32);
        if (gen == seen && !atomic_load(&p->quit) && p->spin_ns > 0) {
            const double t0 = now_ns();
            for (unsigned k = 1;; k++) {
                cpu_relax();
                gen = (uint32_t)(atomic_load_explicit(&p->next, memory_order_acquire) >> 32);
                if (gen != seen || atomic_load_explicit(&p->quit, memory_order_relaxed)) break;
                if (k % 64 == 0 && now_ns() - t0 > (double)p->spin_ns) break;
            }
        }
        if (gen == seen && !atomic_load(&p->quit)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleep_go, 1);
            while ((gen = (uint32_t)(atomic_load(&p->next) >> 32)) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->go, &p->mu);
            atomic_fetch_sub(&p->sleep_go, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = gen;
        pool_work(p, gen);
    }
}

static void pool_free(struct dd_chunk_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    atomic_fetch_add(&p->next, (uint64_t)1 << 32);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nh; i++) pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->fin);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p);
}

/* A pool of nh helpers, or NULL (the chunks then run on the calling thread). */
static struct dd_chunk_pool *pool_new(int nh, int threads) {
    struct dd_chunk_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->th = calloc((size_t)nh, sizeof *p->th);
    if (!p->th || pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p->th);
        free(p);
        return NULL;
    }
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->fin, NULL);
    const char *env = getenv("DD_THREADS_SPIN_US");
    const long us = env && *env ? atol(env) : 100;
    p->spin_ns = threads > dd_nn_threads_owned() || us <= 0 ? 0 : (us > 100000 ? 100000 : us) * 1000;
    /* the helpers take no signals: the command's handlers (SIGINT, SIGTERM) run on the
     * threads that expect them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (; p->nh < nh; p->nh++)
        if (pthread_create(&p->th[p->nh], NULL, pool_main, p) != 0) break;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (p->nh < nh) {
        pool_free(p);
        return NULL;
    }
    return p;
}

/* The chunks of job j on the pool's helpers and the calling thread. */
static void pool_run(struct dd_chunk_pool *p, const chunk_job *j) {
    atomic_store(&p->job, j);
    atomic_store(&p->done, 0);
    const uint32_t gen = (uint32_t)(atomic_load(&p->next) >> 32) + 1;
    atomic_store(&p->next, (uint64_t)gen << 32 | (uint64_t)j->nc << 16); /* publishes the job */
    if (atomic_load(&p->sleep_go) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->go);
        pthread_mutex_unlock(&p->mu);
    }
    pool_work(p, gen);
    if (atomic_load(&p->done) == j->nc) return;
    if (p->spin_ns > 0) {
        const double t0 = now_ns();
        for (unsigned k = 1; atomic_load_explicit(&p->done, memory_order_acquire) != j->nc; k++) {
            cpu_relax();
            if (k % 64 == 0 && now_ns() - t0 > (double)p->spin_ns) break;
        }
    }
    if (atomic_load(&p->done) != j->nc) {
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->sleep_fin, 1);
        while (atomic_load(&p->done) != j->nc) pthread_cond_wait(&p->fin, &p->mu);
        atomic_fetch_sub(&p->sleep_fin, 1);
        pthread_mutex_unlock(&p->mu);
    }
}
#endif

void dd_trainer_chunk_pool_free(dd_trainer *tr) {
#ifdef _OPENMP
    pool_free(tr->cpool);
#endif
    tr->cpool = NULL;
}

dd_status dd_trainer_chunk_grads(dd_trainer *tr, uint64_t epoch, uint64_t lo, size_t bl, size_t nc, size_t cf,
                                 uint64_t global, const dd_stage_src *src, double *sse) {
    DD_TRY(chunk_buffers(tr));
    if (nc > tr->cnc || cf > tr->ccf)
        return dd_error(DD_ERR_INTERNAL, "batch chunks: %zu x %zu frames planned, buffers for %zu x %zu", nc, cf,
                        tr->cnc, tr->ccf);
    const size_t n = tr->n;
    double part[DD_CHUNK_MAX];
    dd_status st[DD_CHUNK_MAX];
    char msg[DD_CHUNK_MAX][256];
    const int all = dd_nn_threads();
    int nth = (size_t)all > nc ? (int)nc : all;
    const int inner = all / nth;
#ifdef _OPENMP
    if (nth > 1 && (!tr->cpool || tr->cpool->nh != nth - 1)) {
        dd_trainer_chunk_pool_free(tr);
        tr->cpool = pool_new(nth - 1, all);
    }
    if (nth > 1 && !tr->cpool) nth = 1; /* no helper threads: the chunks one after the other */
#endif
    /* the chunks' sgemm calls (LSTM steps, im2col convolutions) on their own thread each:
     * OpenBLAS's threads would oversubscribe the cores (and its pthread build serialises
     * concurrent threaded calls) */
    const int blas = nth > 1 ? dd_nn_blas_threads_one() : 1;
#ifdef _OPENMP
    if (nth > 1) {
        const chunk_job job = {tr, epoch, lo, global, bl, nc, cf, src, inner, part, st, msg};
        pool_run(tr->cpool, &job);
    } else
#endif
    {
        dd_nn_threads_local(inner);
        for (size_t c = 0; c < nc; c++) chunk_one(tr, c, epoch, lo, bl, cf, global, src, part, st, msg);
        dd_nn_threads_local(0);
    }
    dd_nn_blas_threads_restore(blas);
    for (size_t c = 0; c < nc; c++)
        if (st[c] != DD_OK) return dd_error(st[c], "%s", msg[c]);
    /* the chunks' sums in chunk order: each element by one thread */
    const float *cg = tr->cgrads;
    float *g = src->grads;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nth) schedule(static) if (nth > 1 && n >= 65536)
#endif
    for (size_t i = 0; i < n; i++) {
        float v = g[i];
        for (size_t c = 1; c < nc; c++) v += cg[(c - 1) * n + i];
        g[i] = v;
    }
    double sum = 0.0;
    for (size_t c = 0; c < nc; c++) sum += part[c];
    *sse = sum;
    return DD_OK;
}
