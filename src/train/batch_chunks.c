/* Batch chunks: the threads inside a rank as data parallelism over a rank's slice of a
 * batch (docs/performance.md, "Threads inside a rank").
 *
 * dd_trainer_compute_grads cuts the slice into chunks whose number and sizes depend only
 * on the slice's frame count and the model's size, never on the thread count: each chunk
 * gathers its frames, runs the whole model forward, the loss, and the model backward
 * into its own gradient buffer (the first chunk into the gradient storage itself) on the
 * workspace of the thread running it, and the chunks' gradients and sums of squared
 * errors are added in chunk order afterwards. One thread runs the chunks one after the other, N threads share them
 * (one parallel region per step), and each number is computed by the same operations in
 * the same order in both cases: the thread count never changes a result. The layers
 * called inside a chunk get threads/chunks threads each (rounded down; more threads than
 * chunks: nested regions, max-active-levels raised to 2 for the step), which does not
 * change a number either (their kernels give each output to one thread). OpenBLAS runs
 * on one thread inside the region (each chunk's sgemm calls on the chunk's thread) and
 * gets its count back after it.
 *
 * Chunks are used where the step is the trainer's own whole-model pass over the whole
 * parameter and gradient storage (the single-process strategy, data parallelism, the
 * parameter server's workers, federated clients); not for sharded storage (zero2/zero3:
 * per-stage parameter and gradient callbacks), a tensor-parallel shard (its stages talk
 * to the other ranks), ranged or mapped storage, data parallelism of models above
 * DD_TRAIN_CHUNK_OVERLAP_FLOATS (its gradient buckets go out during the backward), or
 * when the slice has at most the model's chunk width (dd_model_chunk_frames) in frames:
 * those run the model on the whole slice as before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/train.h"
#include "nn/simd.h"
#include "train_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Frames per chunk: at most the model's width W (dd_model_chunk_frames; a slice's
 * chunks are as equal as they can be, ceil(bl / ceil(bl / W)) frames, the last one
 * fewer): the recipe's batch of 64 is two chunks of 32 (DD_MODEL_CHUNK_FRAMES). Narrower
 * chunks cost the fused GRU kernels their column blocking (one thread, gru 23, AVX-512:
 * 16 frames +60-70 % CPU time per step, 32 frames +4-12 %); tcn's layers, kernels over
 * (frames x 200, 96) arrays, prefer 4, whose arrays stay in L2 (docs/performance.md,
 * "Parallel regions of one thread; tcn in chunks of 4 frames"). */
/* The chunks' extra gradient buffers ((chunks - 1) x the model's floats) stay under
 * this many floats (64 MiB): large models get fewer, larger chunks, or none. */
#define DD_CHUNK_GRAD_FLOATS ((size_t)16 << 20)
/* At most this many chunks (a larger slice gets larger chunks). */
#define DD_CHUNK_MAX 64

size_t dd_train_chunks(size_t n, size_t frames, size_t width, size_t *cf) {
    *cf = frames;
    if (width < 1) width = DD_MODEL_CHUNK_FRAMES;
    if (frames <= width || n == 0) return 1;
    size_t nc = (frames + width - 1) / width;
    const size_t cap = 1 + DD_CHUNK_GRAD_FLOATS / n;
    if (nc > cap) nc = cap;
    if (nc > DD_CHUNK_MAX) nc = DD_CHUNK_MAX;
    if (nc <= 1) return 1;
    *cf = (frames + nc - 1) / nc;
    return (frames + *cf - 1) / *cf;
}

void dd_train_chunks_max(size_t n, size_t bmax, size_t width, size_t *nc, size_t *cf) {
    *nc = *cf = 1;
    for (size_t b = 1; b <= bmax; b++) { /* not monotone in b: take the maxima */
        size_t w, k = dd_train_chunks(n, b, width, &w);
        if (k > 1 && k > *nc) *nc = k;
        if (k > 1 && w > *cf) *cf = w;
    }
}

size_t dd_train_chunk_width(const dd_model *m, const dd_model *pa) {
    const size_t w = (size_t)dd_model_chunk_frames(m);
    if (!pa) return w;
    /* the geometric mean, rounded up to a power of two (within the two widths) */
    const size_t wp = (size_t)dd_model_chunk_frames(pa), lo = w < wp ? w : wp, hi = w < wp ? wp : w;
    size_t p = 1;
    while (p * p < w * wp) p *= 2;
    return p < lo ? lo : p > hi ? hi : p;
}

/* The PA model runs in the step only in direct learning (chunk_run). */
static size_t trainer_chunk_width(const dd_trainer *tr) {
    return dd_train_chunk_width(tr->m, tr->cfg.task == DD_TRAIN_DLA ? tr->pa : NULL);
}

size_t dd_trainer_chunk_plan(const dd_trainer *tr, size_t bl, size_t *cf) {
    *cf = bl;
    if (tr->mwhole || tr->mapped || tr->ranged || tr->glo != 0 || tr->ghi != tr->n || tr->plo != 0 ||
        tr->phi != tr->n)
        return 1;
    return dd_train_chunks(tr->n, bl, trainer_chunk_width(tr), cf);
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
}

/* The chunk buffers for any slice of at most bmax frames (allocated once). */
static dd_status chunk_buffers(dd_trainer *tr) {
    if (tr->cws_m) return DD_OK;
    size_t ncmax, cfmax;
    dd_train_chunks_max(tr->n, tr->bmax, trainer_chunk_width(tr), &ncmax, &cfmax);
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

/* Chunk: frames [a, b) of the slice starting at position lo, on workspace c; gradients
 * added into g. */
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

/* What every chunk of one call shares (dd_trainer_chunk_grads). */
typedef struct {
    dd_trainer *tr;
    uint64_t epoch, lo;
    size_t bl, cf;
    uint64_t global;
    const dd_stage_src *src;
    int inner;
    double *part;
    dd_status *st;
    char (*msg)[256];
} chunk_job;

/* Chunk c on workspace w: its gradients into the model's (c = 0) or its own buffer. */
static void chunk_slot(const chunk_job *j, size_t c, size_t w) {
    dd_trainer *tr = j->tr;
    dd_nn_threads_local(j->inner); /* the layers of this chunk: all / nth threads (nested) */
    const size_t a = c * j->cf, b = a + j->cf < j->bl ? a + j->cf : j->bl;
    float *g = j->src->grads;
    if (c > 0) {
        g = tr->cgrads + (c - 1) * tr->n;
        memset(g, 0, tr->n * sizeof(float));
    }
    j->part[c] = 0.0;
    /* the workspace of the running thread, not of the chunk: one thread runs every chunk
     * on one workspace, which stays in the last-level cache (tcn, one thread, AVX-512:
     * two 32-frame chunks on two workspaces ran its depthwise layers at the speed of
     * one 64-frame call; docs/performance.md, "one workspace per thread"). A chunk's
     * numbers never depend on what its workspace held before (forward writes every
     * activation and saved float backward reads). */
    j->st[c] = chunk_run(tr, w, j->epoch, j->lo, a, b, j->global, j->src->params, g, &j->part[c]);
    j->msg[c][0] = '\0';
    if (j->st[c] != DD_OK) snprintf(j->msg[c], sizeof j->msg[c], "%s", dd_last_error()); /* the thread's own */
    dd_nn_threads_local(0);
}

/* The chunks' sums in chunk order, elements [n tid / nt, n (tid + 1) / nt): each element
 * by one thread. */
static void chunk_sums(float *g, const float *cg, size_t n, size_t nc, int tid, int nt) {
    size_t i0, i1;
    dd_team_share(n, tid, nt, &i0, &i1);
    for (size_t i = i0; i < i1; i++) {
        float v = g[i];
        for (size_t c = 1; c < nc; c++) v += cg[(c - 1) * n + i];
        g[i] = v;
    }
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
    const int nth = (size_t)all > nc ? (int)nc : all, inner = all / nth;
    /* the chunks' sgemm calls (LSTM steps, im2col convolutions) on their own thread each:
     * OpenBLAS's threads would oversubscribe the cores (and its pthread build serialises
     * concurrent threaded calls) */
    const int blas = nth > 1 ? dd_nn_blas_threads_one() : 1;
    const chunk_job job = {tr, epoch, lo, bl, cf, global, src, inner, part, st, msg};
#ifdef _OPENMP
    const int levels = omp_get_max_active_levels();
    if (inner > 1 && levels < 2) omp_set_max_active_levels(2);
    if (nth > 1) {
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
        for (size_t c = 0; c < nc; c++) chunk_slot(&job, c, (size_t)omp_get_thread_num()); /* < nth <= nc */
    } else
#endif
    {
        for (size_t c = 0; c < nc; c++) chunk_slot(&job, c, 0);
    }
#ifdef _OPENMP
    if (inner > 1 && levels < 2) omp_set_max_active_levels(levels);
#endif
    dd_nn_blas_threads_restore(blas);
    for (size_t c = 0; c < nc; c++)
        if (st[c] != DD_OK) return dd_error(st[c], "%s", msg[c]);
    DD_TEAM(nth, n >= 65536, chunk_sums, src->grads, tr->cgrads, n, nc);
    double sum = 0.0;
    for (size_t c = 0; c < nc; c++) sum += part[c];
    *sse = sum;
    return DD_OK;
}
