/* Model parallelism (parallel.h, "Rank grids", "Pipeline parallelism", "Tensor
 * parallelism"): the strategy "model-parallel" of the registry (--tp, --pp and the rest).
 *
 * The world's ranks form a T x P x D grid (dd_grid: ranks of a node fill a tensor-
 * parallel group, then a pipeline; data parallelism across nodes). With T > 1 every rank
 * of a tensor-parallel group trains its shard of the model (the trainer's tp operation,
 * dd_model_create_tp): the group's collectives run inside the stages and its ranks see
 * the same micro-batches.
 *
 * Pipeline: the model's stages (for a DPD trained by direct learning: the DPD's stages,
 * then the frozen PA model's) are split into P V contiguous groups (V chunks per rank with
 * the interleaved schedule); a replica's slice of each global batch is cut into M
 * micro-batches that stream through the groups. Each rank runs its instruction list of
 * the schedule (pipeline.h: post a receive, forward, post a send, ...) in one loop:
 * activations and their gradients travel as non-blocking point-to-point messages on the
 * pipeline communicator, advanced at every stage boundary, and every wait has a time
 * limit that names the peer, the micro-batch and the step. Each rank keeps the
 * parameters, gradients and optimiser state of its own stages only (the trainer's
 * layout_ranges); a checkpoint gathers every rank's storage to rank 0 by its map
 * (whole-model: any layout resumes under any other).
 *
 * After the schedule the gradients of each rank's storage are summed over the D replicas
 * (the configured allreduce; --compress: through the compressor, as data parallelism's
 * buckets; --shard zero1: reduce-scattered, each replica steps its slice of the storage
 * with its slice of the optimiser state and the slices are allgathered); the loss (once per replica), the squared gradient norm
 * (each float once: one replica, replicated shard entries once) and the stop flags travel
 * in one small reduction over the world, and every rank steps its storage. Evaluation
 * runs on every rank together: each stage's parameters are broadcast by the pipeline rank
 * that holds them just before the stage runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "distdpd/ckpt.h"
#include "distdpd/parallel.h"
#include "distdpd/pipeline.h"
#include "parallel/cx.h"

#define PP_WAIT_DEFAULT_S 300.0 /* the time limit of one wait (DD_PP_TIMEOUT overrides) */

/* One chunk of this rank: a contiguous run [s0, s1) of the concatenated stage list (the
 * trained model's stages 0..Sm-1, then the frozen PA model's), i.e. a segment of the
 * trained model [m0, m1) and a segment of the PA model [a0, a1) (either may be empty). */
typedef struct {
    dd_pp_span sp;     /* which stages (pipeline.h) */
    int in_w, out_w;   /* activation widths in and out */
    size_t plo, phi;         /* the trained model's arena floats of the chunk */
    size_t loc;              /* where they start in this rank's storage */
    size_t wsm, wsa;   /* range workspace floats of the two segments (per micro-batch) */
} pp_chunk;

/* What one live micro-batch of a chunk keeps from its forward to its backward. */
typedef struct {
    int micro;          /* -1: free */
    float *in, *u, *mid; /* its input activation, u (PA input) and the DPD output */
    float *wsm, *wsa;   /* the segments' workspaces */
} pp_live;

struct dd_pp {
    dd_comm *world, *pp, *dp; /* world borrowed; pp and dp owned */
    dd_comm *tpc, *rep;       /* the tensor-parallel group; the first replica (checkpoints) */
    dd_tp_group *tpg;         /* the group's collectives (T > 1) */
    int T;
    dd_grid grid;             /* where every rank sits */
    int P, M, V, D;
    dd_pp_kind kind;
    char split_spec[256];
    dd_allreduce_algo algo;
    int prank, drank;
    double wait_s;
    double delay_s;       /* test-only (DD_PP_DELAY=RANK:MS): this rank delays each send */

    dd_trainer *tr;
    const dd_model *m, *pa;
    const float *pa_params;
    size_t Sm, Sa;        /* stages of the trained model and of the PA model */
    size_t *bounds;       /* [P V + 1] group boundaries over the concatenated stages */
    pp_chunk *ch;         /* [V] this rank's chunks */
    size_t rlo[DD_PP_MAX_VSTAGES], rhi[DD_PP_MAX_VSTAGES]; /* its ranges of the trained
                             model's arena (the chunks that hold some), stored one after the
                             other (the trainer's layout_ranges) */
    size_t nrg, nloc;
    /* local storage that every rank of the tensor-parallel group holds alike (replicated
     * entries of the shard): counted once in the gradient norm */
    size_t *replo, *rephi, nrep;
    /* checkpoints: every rank's map (gathered once to rank 0 of the first replica) */
    dd_optim_run *allmap;
    size_t *mapcnt, *loccnt; /* [rep size] */
    dd_pp_instr *ins;
    size_t nins;
    int nlive;            /* live micro-batches per chunk (from the simulation) */
    dd_pp_buffers nbuf;
    size_t F, bmax;       /* frame; largest micro-batch */

    /* buffers */
    pp_live *live;                 /* [V * nlive] */
    float **ract, **rgrad;         /* [V * nbuf.act], [V * nbuf.grad] receive slots */
    dd_comm_req **ractq, **rgradq;
    float **sact, **sgrad;         /* [V * M] send buffers (one per micro-batch) */
    dd_comm_req **sactq, **sgradq;
    float *xin, *tgt, *dpred;      /* the step's inputs and targets (all micro-batches) */
    size_t xcap;
    uint64_t *mlo;                 /* [M + 1] micro-batch boundaries of the step (positions) */

    /* stop agreement */
    const volatile int *local_stop;
    volatile int agreed_stop;

    /* evaluation: stage parameters broadcast from their owners */
    float *ebuf;
    size_t ebuf_n;

    /* checkpoints: the whole state on rank 0 */
    float *full_params;
    void *full_optim;
    size_t full_optim_bytes;
    int full_ok;

    dd_pp_stats st;
    uint64_t step_no;
    double ep_busy0, ep_step0; /* st at the start of the epoch */

    /* the data-parallel dimension: --shard zero1 and --compress */
    dd_shard_mode shard;
    size_t *part;          /* zero1: D + 1 boundaries of the local storage (NULL: none) */
    size_t *pcnt, *pcount, *pdispl; /* [D] floats, bytes, byte offsets of each slice */
    float *olocal;         /* zero1, first replica after before_save: the local optimiser
                              state whole (k arrays of the storage) */
    size_t olocal_n;
    dd_compressor *cp;     /* NULL: plain float32 */
    dd_cx_gathered cst;    /* rank 0 after before_save: every rank's compressor state */
    uint64_t *cpos;        /* rank 0 after before_save: per world rank (tp, pp, dp, storage floats) */
    dd_cx_epoch ep;        /* the epoch's communication figures */
};

/* ---------------------------------------------------------------- configuration */

void dd_pp_cfg_default(dd_pp_cfg *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->pp = 2;
    c->tp = 1;
    c->micro = 0;
    c->kind = DD_PP_1F1B;
    c->virt = 1;
    c->algo = DD_ALLREDUCE_RING;
    c->order[0] = 0; /* tp, pp, dp: fastest first */
    c->order[1] = 1;
    c->order[2] = 2;
    c->shard = DD_SHARD_NONE;
    dd_compress_cfg_default(&c->compress);
}

dd_status dd_pp_cfg_check(const dd_pp_cfg *c, int nranks) {
    if (!c) return dd_error(DD_ERR_ARG, "pipeline: NULL configuration");
    if (c->pp < 1) return dd_error(DD_ERR_ARG, "--pp %d: a pipeline needs at least 1 rank", c->pp);
    if (c->tp < 1) return dd_error(DD_ERR_ARG, "--tp %d: a tensor-parallel group needs at least 1 rank", c->tp);
    if (c->tp == 1 && nranks % c->pp != 0)
        return dd_error(DD_ERR_ARG, "--pp %d does not divide the %d ranks (mpirun -np N with N a multiple of --pp)",
                        c->pp, nranks);
    if (nranks % (c->tp * c->pp) != 0)
        return dd_error(DD_ERR_ARG, "--tp %d x --pp %d = %d does not divide the %d ranks (mpirun -np N with N a multiple "
                                    "of tp x pp)",
                        c->tp, c->pp, c->tp * c->pp, nranks);
    const int M = c->micro > 0 ? c->micro : c->pp;
    DD_TRY(dd_pp_check_args(c->kind, c->pp, M, c->virt));
    if ((int)c->algo < 0 || (int)c->algo >= dd_allreduce_count())
        return dd_error(DD_ERR_ARG, "pipeline: algo = %d is not an allreduce algorithm", (int)c->algo);
    if (c->shard == DD_SHARD_ZERO2)
        return dd_error(DD_ERR_ARG, "--shard zero2 does not apply to a model-parallel grid: a rank's gradients are "
                                    "summed over all micro-batches of the schedule in its whole gradient storage, so "
                                    "keeping only a slice would save nothing (use --shard zero1: the optimiser state "
                                    "partitioned over the replicas)");
    if (c->shard == DD_SHARD_ZERO3)
        return dd_error(DD_ERR_ARG, "--shard zero3 does not apply to a model-parallel grid: each rank keeps only its "
                                    "own stages' parameters already, and gathering them from the replicas for every "
                                    "micro-batch is not implemented (use --shard zero1)");
    if (c->shard != DD_SHARD_NONE && c->shard != DD_SHARD_ZERO1)
        return dd_error(DD_ERR_ARG, "--shard: mode %d is not none or zero1", (int)c->shard);
    return dd_compress_cfg_check(&c->compress);
}

dd_status dd_pp_create(dd_comm *world, const dd_pp_cfg *cfg, dd_pp **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_pp_create: NULL output");
    *out = NULL;
    if (!world || !cfg) return dd_error(DD_ERR_ARG, "dd_pp_create: NULL argument");
    const int N = dd_comm_size(world), r = dd_comm_rank(world);
    DD_TRY(dd_pp_cfg_check(cfg, N));
    dd_pp *z = dd_calloc(1, sizeof *z);
    if (!z) return dd_error(DD_ERR_NOMEM, "out of memory for the pipeline strategy");
    z->world = world;
    z->P = cfg->pp;
    z->M = cfg->micro > 0 ? cfg->micro : cfg->pp;
    z->V = cfg->virt;
    z->T = cfg->tp;
    z->D = N / (cfg->pp * cfg->tp);
    z->kind = cfg->kind;
    z->algo = cfg->algo;
    z->shard = cfg->shard;
    z->ep.ckpt_ok = 0;
    snprintf(z->split_spec, sizeof z->split_spec, "%s", cfg->split ? cfg->split : "");

    z->wait_s = PP_WAIT_DEFAULT_S;
    const char *w = getenv("DD_PP_TIMEOUT"); /* seconds; for tests of the time limit */
    if (w && atof(w) > 0) z->wait_s = atof(w);
    int dr = -1, ms = 0; /* test-only: DD_PP_DELAY=RANK:MS delays world rank RANK's sends */
    const char *dl = getenv("DD_PP_DELAY");
    if (dl && sscanf(dl, "%d:%d", &dr, &ms) == 2 && dr == r && ms > 0) z->delay_s = ms * 1e-3;
    /* the grid (pipelines inside nodes), then the pipeline of this rank's replica and the
     * ranks at its pipeline position in every replica (collectives) */
    dd_status st = dd_grid_make(world, z->T, z->P, cfg->order, &z->grid);
    if (st == DD_OK) {
        z->prank = z->grid.pp;
        z->drank = z->grid.dp;
        st = dd_grid_split(world, &z->grid, 1, &z->pp);
    }
    if (st == DD_OK) st = dd_grid_split(world, &z->grid, 2, &z->dp);
    if (st == DD_OK) st = dd_grid_split(world, &z->grid, 0, &z->tpc);
    if (st == DD_OK) st = dd_comm_split(world, z->drank, r, &z->rep); /* the replica of rank 0 first */
    if (st == DD_OK && z->T > 1) st = dd_tp_group_create(z->tpc, &z->tpg);
    if (st == DD_OK && z->T > 1) st = dd_tp_group_set_allreduce(z->tpg, cfg->algo);
    if (st != DD_OK) {
        dd_pp_destroy(&z);
        return dd_error_prefix(st, "pipeline: splitting the communicator: ");
    }
    if (strcmp(cfg->compress.name, "none") != 0 && (st = dd_compress_create(&cfg->compress, &z->cp)) != DD_OK) {
        dd_pp_destroy(&z);
        return st;
    }
    *out = z;
    return DD_OK;
}

static void free_buffers(dd_pp *z) {
    const size_t V = (size_t)z->V, M = (size_t)z->M;
    for (size_t k = 0; z->ractq && k < V * (size_t)z->nbuf.act; k++) dd_comm_req_cancel(&z->ractq[k]);
    for (size_t k = 0; z->rgradq && k < V * (size_t)z->nbuf.grad; k++) dd_comm_req_cancel(&z->rgradq[k]);
    for (size_t k = 0; z->sactq && k < V * M; k++) dd_comm_req_cancel(&z->sactq[k]);
    for (size_t k = 0; z->sgradq && k < V * M; k++) dd_comm_req_cancel(&z->sgradq[k]);
    for (size_t k = 0; z->live && k < V * (size_t)z->nlive; k++) {
        pp_live *l = &z->live[k];
        dd_arena_free(l->in);
        dd_arena_free(l->u);
        dd_arena_free(l->mid);
        dd_arena_free(l->wsm);
        dd_arena_free(l->wsa);
    }
    for (size_t k = 0; z->ract && k < V * (size_t)z->nbuf.act; k++) dd_arena_free(z->ract[k]);
    for (size_t k = 0; z->rgrad && k < V * (size_t)z->nbuf.grad; k++) dd_arena_free(z->rgrad[k]);
    for (size_t k = 0; z->sact && k < V * M; k++) dd_arena_free(z->sact[k]);
    for (size_t k = 0; z->sgrad && k < V * M; k++) dd_arena_free(z->sgrad[k]);
    free(z->live);
    free(z->ract);  /* one allocation: ract, rgrad, sact, sgrad */
    free(z->ractq); /* likewise for the requests */
    z->live = NULL;
    z->ract = z->rgrad = z->sact = z->sgrad = NULL;
    z->ractq = z->rgradq = z->sactq = z->sgradq = NULL;
    dd_arena_free(z->xin);
    dd_arena_free(z->tgt);
    dd_arena_free(z->dpred);
    z->xin = z->tgt = z->dpred = NULL;
    z->xcap = 0;
    dd_arena_free(z->ebuf);
    z->ebuf = NULL;
    z->ebuf_n = 0;
}

void dd_pp_destroy(dd_pp **zp) {
    if (!zp || !*zp) return;
    dd_pp *z = *zp;
    free_buffers(z);
    free(z->bounds);
    free(z->ch);
    free(z->ins);
    free(z->mlo);
    free(z->full_params);
    free(z->full_optim);
    dd_tp_group_destroy(&z->tpg);
    free(z->part);
    free(z->pcnt);
    free(z->olocal);
    dd_compress_destroy(&z->cp);
    dd_cx_gathered_free(&z->cst);
    free(z->cpos);
    free(z->replo);
    free(z->allmap);
    free(z->mapcnt);
    dd_comm_free(&z->pp);
    dd_comm_free(&z->dp);
    dd_comm_free(&z->tpc);
    dd_comm_free(&z->rep);
    dd_grid_free(&z->grid);
    dd_free(z);
    *zp = NULL;
}

const dd_grid *dd_pp_grid(const dd_pp *z) { return z ? &z->grid : NULL; }
dd_compressor *dd_pp_compressor(const dd_pp *z) { return z ? z->cp : NULL; }

void dd_pp_set_stop_source(dd_pp *z, const volatile int *local) {
    if (z) z->local_stop = local;
}

void dd_pp_stats_get(const dd_pp *z, dd_pp_stats *st) {
    if (!st) return;
    if (!z) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = z->st;
}

/* ---------------------------------------------------------------- stages and split */

/* Stage s of the concatenated list: its info (the PA model's after the trained model's). */
static dd_status stage_info(const dd_pp *z, size_t s, dd_stage_info *si) {
    if (s < z->Sm) return dd_model_stage_info(z->m, s, si);
    return dd_model_stage_info(z->pa, s - z->Sm, si);
}

/* The split of the concatenated stages into P V groups: by hand (--pp-split) or
 * balanced by the stages' forward + backward FLOPs (the PA model's backward runs too). */
static dd_status make_split(dd_pp *z) {
    const size_t S = z->Sm + z->Sa, G = (size_t)z->P * z->V;
    free(z->bounds);
    z->bounds = calloc(G + 1, sizeof *z->bounds);
    double *cost = calloc(S ? S : 1, sizeof *cost);
    if (!z->bounds || !cost) {
        free(cost);
        return dd_error(DD_ERR_NOMEM, "out of memory for the pipeline split");
    }
    dd_status st = DD_OK;
    for (size_t s = 0; st == DD_OK && s < S; s++) {
        dd_stage_info si;
        st = stage_info(z, s, &si);
        cost[s] = si.flops_fwd + si.flops_bwd;
    }
    if (st == DD_OK)
        st = z->split_spec[0] ? dd_pp_split_parse(z->split_spec, S, (int)G, z->bounds)
                              : dd_pp_split_balanced(cost, S, (int)G, z->bounds);
    free(cost);
    return st;
}

/* Pipeline rank q's ranges of the trained model's arena: its chunks' parameters, in
 * chunk order (ascending). Returns how many. */
static size_t rank_ranges(const dd_pp *z, int q, size_t *lo, size_t *hi) {
    size_t n = 0;
    for (int c = 0; c < z->V; c++) {
        const size_t v = (size_t)c * (size_t)z->P + (size_t)q;
        const size_t s0 = z->bounds[v], s1 = z->bounds[v + 1] < z->Sm ? z->bounds[v + 1] : z->Sm;
        if (s0 >= s1) continue;
        dd_stage_info a, b;
        if (dd_model_stage_info(z->m, s0, &a) != DD_OK || dd_model_stage_info(z->m, s1 - 1, &b) != DD_OK) continue;
        lo[n] = a.lo;
        hi[n] = b.hi;
        n++;
    }
    return n;
}

/* The local storage a tensor-parallel shard holds like every rank of its group: the
 * shard's replicated runs inside this rank's chunks, in local coordinates. */
static dd_status replicated_runs(dd_pp *z) {
    const dd_tp_run *runs = NULL;
    size_t nr = 0;
    DD_TRY(dd_model_tp_runs(z->m, &runs, &nr));
    free(z->replo);
    z->replo = calloc(2 * (nr ? nr : 1), sizeof *z->replo);
    if (!z->replo) return dd_error(DD_ERR_NOMEM, "out of memory");
    z->rephi = z->replo + (nr ? nr : 1);
    z->nrep = 0;
    for (int c = 0; c < z->V && z->T > 1; c++) {
        const pp_chunk *k = &z->ch[c];
        for (size_t r = 0; r < nr; r++) {
            if (!runs[r].replicated) continue;
            const size_t a = runs[r].shard > k->plo ? runs[r].shard : k->plo;
            const size_t b = runs[r].shard + runs[r].len < k->phi ? runs[r].shard + runs[r].len : k->phi;
            if (a >= b || z->nrep == nr) continue;
            z->replo[z->nrep] = k->loc + (a - k->plo);
            z->rephi[z->nrep++] = k->loc + (b - k->plo);
        }
    }
    return DD_OK;
}

/* This rank's chunks from the split. */
static dd_status make_chunks(dd_pp *z) {
    free(z->ch);
    z->ch = calloc((size_t)z->V, sizeof *z->ch);
    if (!z->ch) return dd_error(DD_ERR_NOMEM, "out of memory for the pipeline chunks");
    const size_t Sm = z->Sm;
    z->nrg = rank_ranges(z, z->prank, z->rlo, z->rhi);
    size_t loc = 0;
    for (int c = 0; c < z->V; c++) {
        pp_chunk *k = &z->ch[c];
        dd_pp_span_of(z->bounds, z->P, z->V, z->prank, c, Sm, &k->sp);
        dd_stage_info a, b;
        DD_TRY(stage_info(z, k->sp.s0, &a));
        DD_TRY(stage_info(z, k->sp.s1 - 1, &b));
        k->in_w = a.in_width;
        k->out_w = b.out_width;
        k->plo = k->phi = 0;
        k->loc = loc;
        if (k->sp.m1 > k->sp.m0) {
            dd_stage_info x, y;
            DD_TRY(dd_model_stage_info(z->m, k->sp.m0, &x));
            DD_TRY(dd_model_stage_info(z->m, k->sp.m1 - 1, &y));
            k->plo = x.lo;
            k->phi = y.hi;
            loc += k->phi - k->plo;
        }
    }
    z->nloc = loc;
    return replicated_runs(z);
}

/* ---------------------------------------------------------------- layout and setup */

static dd_status s_layout(void *self, const dd_model *m, const dd_model *pa, size_t n, size_t *count,
                         const size_t **lo, const size_t **hi) {
    dd_pp *z = self;
    (void)n;
    z->m = m;
    z->pa = pa;
    z->Sm = dd_model_num_stages(m);
    z->Sa = pa ? dd_model_num_stages(pa) : 0;
    DD_TRY(make_split(z));
    DD_TRY(make_chunks(z));
    *count = z->nrg;
    *lo = z->rlo;
    *hi = z->rhi;
    return DD_OK;
}

/* zero1: the slice of the local storage whose optimiser state this replica keeps
 * (dd_shard_partition over the D replicas of this pipeline/tensor position). */
static dd_status s_layout_optim(void *self, size_t nlocal, size_t *lo, size_t *hi) {
    dd_pp *z = self;
    *lo = 0;
    *hi = nlocal;
    if (z->shard != DD_SHARD_ZERO1) return DD_OK;
    free(z->part);
    free(z->pcnt);
    z->part = calloc((size_t)z->D + 1, sizeof *z->part);
    z->pcnt = calloc(3 * (size_t)z->D, sizeof *z->pcnt);
    if (!z->part || !z->pcnt) return dd_error(DD_ERR_NOMEM, "out of memory");
    z->pcount = z->pcnt + z->D;
    z->pdispl = z->pcount + z->D;
    dd_shard_partition(nlocal, z->D, z->part);
    for (int q = 0; q < z->D; q++) {
        z->pcnt[q] = z->part[q + 1] - z->part[q];
        z->pcount[q] = z->pcnt[q] * sizeof(float);
        z->pdispl[q] = z->part[q] * sizeof(float);
    }
    *lo = z->part[z->drank];
    *hi = z->part[z->drank + 1];
    return DD_OK;
}

static float *act_alloc(size_t n, const char *what) {
    return dd_arena_calloc(DD_MEM_ACTIVATIONS, n ? n : 1, sizeof(float), what);
}

/* Every buffer of the step, sized for the largest micro-batch. */
static dd_status alloc_buffers(dd_pp *z) {
    const size_t V = (size_t)z->V, M = (size_t)z->M, BF = z->bmax * z->F;
    z->live = calloc(V * (size_t)z->nlive, sizeof *z->live);
    z->ract = calloc(V * ((size_t)z->nbuf.act + (size_t)z->nbuf.grad + 2 * M) + 1, sizeof *z->ract);
    z->ractq = calloc(V * ((size_t)z->nbuf.act + (size_t)z->nbuf.grad + 2 * M) + 1, sizeof *z->ractq);
    if (!z->live || !z->ract || !z->ractq) return dd_error(DD_ERR_NOMEM, "out of memory for the pipeline buffers");
    z->rgrad = z->ract + V * (size_t)z->nbuf.act;
    z->sact = z->rgrad + V * (size_t)z->nbuf.grad;
    z->sgrad = z->sact + V * M;
    z->rgradq = z->ractq + V * (size_t)z->nbuf.act;
    z->sactq = z->rgradq + V * (size_t)z->nbuf.grad;
    z->sgradq = z->sactq + V * M;
    for (size_t c = 0; c < V; c++) {
        const pp_chunk *k = &z->ch[c];
        const size_t win = (size_t)k->in_w + (k->sp.u_in ? 2 : 0), wout = (size_t)k->out_w + (k->sp.u_out ? 2 : 0);
        for (int j = 0; j < z->nlive; j++) {
            pp_live *l = &z->live[c * (size_t)z->nlive + (size_t)j];
            l->micro = -1;
            if (!k->sp.first && !(l->in = act_alloc(BF * (size_t)k->in_w, "a pipeline stage's input"))) return DD_ERR_NOMEM;
            if (k->sp.u_in && !(l->u = act_alloc(BF * 2, "a pipeline stage's PA input"))) return DD_ERR_NOMEM;
            if (k->sp.m1 > k->sp.m0 && k->sp.a1 > k->sp.a0 && !(l->mid = act_alloc(BF * 2, "the DPD output in a pipeline stage")))
                return DD_ERR_NOMEM;
            if (k->sp.m1 > k->sp.m0 && !(l->wsm = act_alloc(k->wsm, "a pipeline stage's activations"))) return DD_ERR_NOMEM;
            if (k->sp.a1 > k->sp.a0 && !(l->wsa = act_alloc(k->wsa, "a pipeline stage's PA activations"))) return DD_ERR_NOMEM;
        }
        for (int j = 0; j < z->nbuf.act; j++)
            if (!(z->ract[c * (size_t)z->nbuf.act + (size_t)j] = act_alloc(BF * win, "a pipeline receive buffer")))
                return DD_ERR_NOMEM;
        for (int j = 0; j < z->nbuf.grad; j++)
            if (!(z->rgrad[c * (size_t)z->nbuf.grad + (size_t)j] = act_alloc(BF * wout, "a pipeline receive buffer")))
                return DD_ERR_NOMEM;
        for (size_t m = 0; m < M; m++) {
            if (!k->sp.last && !(z->sact[c * M + m] = act_alloc(BF * wout, "a pipeline send buffer"))) return DD_ERR_NOMEM;
            if (!k->sp.first && !(z->sgrad[c * M + m] = act_alloc(BF * win, "a pipeline send buffer"))) return DD_ERR_NOMEM;
        }
    }
    /* the step's frames: every micro-batch's inputs (all ranks: stages read x0) and
     * targets (the last virtual stage), and the DPD-output gradient scratch */
    z->xcap = z->bmax * M * z->F * 2;
    z->xin = act_alloc(z->xcap, "the pipeline step's inputs");
    z->tgt = z->xin ? act_alloc(z->xcap, "the pipeline step's targets") : NULL;
    z->dpred = z->tgt ? act_alloc(z->xcap + BF * 4, "the pipeline step's output gradients") : NULL;
    return z->dpred ? DD_OK : DD_ERR_NOMEM;
}

static dd_status eval_stage_params(void *self, size_t s, int bwd, const float **p);

static dd_status s_setup(void *self, dd_trainer *tr) {
    dd_pp *z = self;
    const int N = dd_comm_size(z->world);
    if (N > 1) {
        /* every rank must hold the same model, passing the same activations between stages
         * (dd_model_stage_layout: tcn's depends on the SIMD level) */
        const dd_model *pm = dd_trainer_pa_model(tr, NULL);
        uint64_t mine[2] = {(uint64_t)dd_trainer_num_floats(tr),
                            dd_model_stage_layout(dd_trainer_model(tr)) | (uint64_t)dd_model_stage_layout(pm) << 16};
        uint64_t *all = calloc(2 * (size_t)N, sizeof *all);
        if (!all) return dd_error(DD_ERR_NOMEM, "out of memory");
        dd_status s = dd_comm_allgather(z->world, mine, sizeof mine, all);
        for (int r = 1; s == DD_OK && r < N; r++)
            if (all[2 * r] != all[0])
                s = dd_error(DD_ERR_MISMATCH,
                             "pipeline: rank %d has %llu parameter floats, rank 0 has %llu: every rank must train the "
                             "same model",
                             r, (unsigned long long)all[2 * r], (unsigned long long)all[0]);
            else if (all[2 * r + 1] != all[1])
                s = dd_error(DD_ERR_MISMATCH,
                             "pipeline: rank %d's model passes other activations between its stages than rank 0's "
                             "(stage layouts %#llx against %#llx, the DPD's in the low 16 bits, the PA model's above; "
                             "tcn: 1 at AVX2 and the generic level, 0 at AVX-512): run every rank at the same SIMD "
                             "level (DD_SIMD=avx2 on all, or avx512 on all)",
                             r, (unsigned long long)all[2 * r + 1], (unsigned long long)all[1]);
        free(all);
        DD_TRY(s);
    }
    if (!z->m || z->m != dd_trainer_model(tr))
        return dd_error(DD_ERR_INTERNAL, "pipeline: the trainer was not laid out by this strategy");
    z->full_ok = 0;
    if (z->tr == tr) return DD_OK; /* after a checkpoint load: the buffers stay */
    z->tr = tr;
    z->pa_params = NULL;
    dd_trainer_pa_model(tr, &z->pa_params);
    const dd_train_cfg *cfg = dd_trainer_cfg(tr);
    z->F = cfg->frame;
    /* the largest micro-batch: a replica's slice of a global batch cut into M */
    const uint64_t frames = dd_trainer_num_frames(tr);
    const uint64_t bglob = cfg->batch < frames ? cfg->batch : frames;
    const uint64_t slice = (bglob + (uint64_t)z->D - 1) / (uint64_t)z->D;
    z->bmax = (size_t)((slice + (uint64_t)z->M - 1) / (uint64_t)z->M);
    if (z->bmax == 0) z->bmax = 1;
    free(z->ins);
    z->ins = NULL;
    DD_TRY(dd_pp_schedule(z->kind, z->P, z->M, z->V, z->prank, &z->ins, &z->nins));
    DD_TRY(dd_pp_schedule_buffers(z->kind, z->P, z->M, z->V, &z->nbuf));
    dd_pp_sim sim;
    DD_TRY(dd_pp_simulate(z->kind, z->P, z->M, z->V, 1.0, 2.0, &sim));
    z->nlive = 1;
    for (int c = 0; c < z->V; c++)
        if (sim.peak_live_chunk[z->prank * z->V + c] > z->nlive) z->nlive = sim.peak_live_chunk[z->prank * z->V + c];
    dd_pp_sim_free(&sim);
    for (int c = 0; c < z->V; c++) {
        pp_chunk *k = &z->ch[c];
        k->wsm = k->sp.m1 > k->sp.m0 ? dd_model_range_workspace(z->m, k->sp.m0, k->sp.m1, (int)z->bmax, (int)z->F) + 16 : 0;
        k->wsa = k->sp.a1 > k->sp.a0 ? dd_model_range_workspace(z->pa, k->sp.a0, k->sp.a1, (int)z->bmax, (int)z->F) + 16 : 0;
    }
    free(z->mlo);
    z->mlo = calloc((size_t)z->M + 1, sizeof *z->mlo);
    if (!z->mlo) return dd_error(DD_ERR_NOMEM, "out of memory");
    DD_TRY(alloc_buffers(z));
    if (z->P > 1 || z->T > 1) { /* every rank evaluates (stage gathers, tensor collectives) */
        dd_stage_src src = {NULL, NULL, z, eval_stage_params, NULL, NULL};
        dd_trainer_set_param_source(tr, &src, 1);
    }
    return DD_OK;
}

/* ---------------------------------------------------------------- stage sources */

/* Where the trained model's stage s starts in this rank's storage (it holds it). */
static size_t local_of(const dd_pp *z, size_t s, const dd_stage_info *si) {
    for (int c = 0; c < z->V; c++)
        if (s >= z->ch[c].sp.m0 && s < z->ch[c].sp.m1) return z->ch[c].loc + (si->lo - z->ch[c].plo);
    return 0; /* not reached: the executor only runs its own stages */
}

/* The trained model's stage s: its parameters and gradients in this rank's storage. */
static dd_status own_params(void *self, size_t s, int bwd, const float **p) {
    dd_pp *z = self;
    (void)bwd;
    dd_stage_info si;
    DD_TRY(dd_model_stage_info(z->m, s, &si));
    *p = dd_trainer_params(z->tr) + local_of(z, s, &si);
    return DD_OK;
}

static dd_status own_grads(void *self, size_t s, float **g) {
    dd_pp *z = self;
    dd_stage_info si;
    DD_TRY(dd_model_stage_info(z->m, s, &si));
    *g = dd_trainer_grads(z->tr) + local_of(z, s, &si);
    return DD_OK;
}

/* Evaluation (every rank together): stage s's parameters broadcast by the pipeline rank
 * that holds them. */
static dd_status eval_stage_params(void *self, size_t s, int bwd, const float **p) {
    dd_pp *z = self;
    (void)bwd;
    dd_stage_info si;
    DD_TRY(dd_model_stage_info(z->m, s, &si));
    int owner = -1;
    for (size_t v = 0; v < (size_t)z->P * z->V && owner < 0; v++)
        if (s >= z->bounds[v] && s < z->bounds[v + 1]) owner = (int)(v % (size_t)z->P);
    const size_t n = si.hi - si.lo;
    if (owner == z->prank) {
        *p = dd_trainer_params(z->tr) + local_of(z, s, &si);
    } else {
        if (z->ebuf_n < n) {
            dd_arena_free(z->ebuf);
            z->ebuf = dd_arena_calloc(DD_MEM_PARAMS, n, sizeof(float), "a stage's parameters (pipeline evaluation)");
            z->ebuf_n = z->ebuf ? n : 0;
            if (!z->ebuf) return DD_ERR_NOMEM;
        }
        *p = z->ebuf;
    }
    dd_status st = dd_comm_bcast(z->pp, (void *)*p, n * sizeof(float), owner);
    if (st != DD_OK) return dd_error_prefix(st, "pipeline evaluation: stage %zu's parameters from rank %d: ", s, owner);
    return DD_OK;
}

/* ---------------------------------------------------------------- the schedule */

typedef struct {
    dd_pp *z;
    uint64_t epoch, lo, global;
    double sse;
} pp_step;

static size_t micro_frames(const dd_pp *z, int m) { return (size_t)(z->mlo[m + 1] - z->mlo[m]); }
static float *micro_x(const dd_pp *z, float *base, int m) { return base + (size_t)(z->mlo[m] - z->mlo[0]) * z->F * 2; }

static pp_live *live_get(dd_pp *z, int c, int m, int take) {
    pp_live *L = &z->live[(size_t)c * (size_t)z->nlive];
    for (int j = 0; j < z->nlive; j++)
        if (L[j].micro == m) return &L[j];
    if (!take) return NULL;
    for (int j = 0; j < z->nlive; j++)
        if (L[j].micro < 0) {
            L[j].micro = m;
            return &L[j];
        }
    return NULL;
}

/* Waits for a receive with the time limit, naming what and from whom. */
static dd_status wait_msg(dd_pp *z, dd_comm_req **q, const char *what, int micro, int peer) {
    char desc[160];
    snprintf(desc, sizeof desc, "the %s of micro-batch %d from pipeline rank %d (world rank %d, step %llu)", what, micro,
             peer, dd_grid_rank_of(&z->grid, 0, peer, z->drank), (unsigned long long)z->step_no + 1);
    const double t0 = dd_comm_wtime();
    dd_status st = dd_comm_wait_timeout(q, z->wait_s, desc);
    z->st.wait_s += dd_comm_wtime() - t0;
    if (st != DD_OK) return dd_error_prefix(st, "pipeline rank %d: ", z->prank);
    return DD_OK;
}

static dd_status post(dd_pp *z, int recv, float *buf, size_t floats, int peer, int tag, dd_comm_req **q) {
    if (!recv && z->delay_s > 0) { /* exposes ordering races (test-only) */
        struct timespec ts = {(time_t)z->delay_s, (long)((z->delay_s - (double)(time_t)z->delay_s) * 1e9)};
        nanosleep(&ts, NULL);
    }
    dd_status st = recv ? dd_comm_irecv(z->pp, buf, floats * sizeof(float), peer, tag, q)
                        : dd_comm_isend(z->pp, buf, floats * sizeof(float), peer, tag, q);
    if (st != DD_OK) return dd_error_prefix(st, "pipeline rank %d: %s rank %d (tag %d): ", z->prank, recv ? "receive from" : "send to", peer, tag);
    if (!recv) {
        z->st.messages++;
        z->st.bytes_sent += floats * sizeof(float);
    }
    return DD_OK;
}

/* Advances every message in flight (Open MPI has no progress thread: a large message,
 * sent in fragments, moves only while both sides call MPI). Called at every stage
 * boundary of the forward and backward passes; completed sends are released. */
static dd_status progress_all(dd_pp *z) {
    const size_t V = (size_t)z->V, M = (size_t)z->M, na = V * (size_t)z->nbuf.act, ng = V * (size_t)z->nbuf.grad;
    const size_t total = na + ng + 2 * V * M;
    for (size_t k = 0; k < total; k++) {
        dd_comm_req **q = &z->ractq[k]; /* ractq, rgradq, sactq, sgradq: one array */
        if (!*q) continue;
        int done = 0;
        dd_status st = dd_comm_test(*q, &done);
        if (st != DD_OK) return dd_error_prefix(st, "pipeline rank %d: a message in flight: ", z->prank);
        if (done && k >= na + ng) dd_comm_req_free(q);
    }
    return DD_OK;
}

static dd_status stage_progress(void *self, size_t s, int bwd) {
    (void)s, (void)bwd;
    return progress_all(self);
}

static dd_status fwd(pp_step *ps, const dd_pp_instr *I) {
    dd_pp *z = ps->z;
    const pp_chunk *k = &z->ch[I->chunk];
    const int m = I->micro;
    const size_t B = micro_frames(z, m), BF = B * z->F;
    pp_live *l = live_get(z, I->chunk, m, 1);
    if (!l) return dd_error(DD_ERR_INTERNAL, "pipeline: no free activation buffer for micro-batch %d", m);
    if (!k->sp.first) {
        /* from the previous virtual stage: a message, or with P = 1 its output right here */
        const float *slot;
        if (I->peer >= 0) {
            const size_t q = (size_t)I->chunk * (size_t)z->nbuf.act + (size_t)I->slot;
            DD_TRY(wait_msg(z, &z->ractq[q], "activation", m, I->peer));
            slot = z->ract[q];
        } else {
            slot = z->sact[(size_t)(I->chunk - 1) * (size_t)z->M + (size_t)m];
        }
        memcpy(l->in, slot, BF * (size_t)k->in_w * sizeof(float));
        if (k->sp.u_in) memcpy(l->u, slot + BF * (size_t)k->in_w, BF * 2 * sizeof(float));
    }
    float *x0 = micro_x(z, z->xin, m);
    float *send = k->sp.last ? NULL : z->sact[(size_t)I->chunk * (size_t)z->M + (size_t)m];
    float *pred = k->sp.last ? micro_x(z, z->dpred, (int)z->M) : NULL; /* scratch after the gradients */
    float *out = k->sp.last ? pred : send;
    if (B == 0) return DD_OK;
    const double t0 = dd_comm_wtime();
    const float *cur = k->sp.first ? x0 : l->in;
    if (k->sp.m1 > k->sp.m0) {
        dd_stage_src src = {NULL, NULL, z, own_params, NULL, stage_progress};
        float *o = k->sp.a1 > k->sp.a0 ? l->mid : out;
        DD_TRY(dd_model_range_forward(z->m, k->sp.m0, k->sp.m1, &src, cur, x0, o, (int)B, (int)z->F, l->wsm));
        cur = o;
    }
    if (k->sp.a1 > k->sp.a0) {
        dd_stage_src src = {z->pa_params, NULL, z, NULL, NULL, stage_progress};
        const float *u = k->sp.a0 == 0 ? cur : l->u;
        DD_TRY(dd_model_range_forward(z->pa, k->sp.a0, k->sp.a1, &src, cur, u, out, (int)B, (int)z->F, l->wsa));
        /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): u is cur or l->u, both set when the stage has PA layers */
        if (k->sp.u_out) memcpy(send + BF * (size_t)k->out_w, u, BF * 2 * sizeof(float));
    }
    if (k->sp.last)
        ps->sse += dd_trainer_mse_grad(z->tr, pred, micro_x(z, z->tgt, m), BF * 2, ps->global, micro_x(z, z->dpred, m));
    z->st.busy_s += dd_comm_wtime() - t0;
    return DD_OK;
}

static dd_status bwd(pp_step *ps, const dd_pp_instr *I) {
    dd_pp *z = ps->z;
    const pp_chunk *k = &z->ch[I->chunk];
    const int m = I->micro;
    const size_t B = micro_frames(z, m), BF = B * z->F;
    pp_live *l = live_get(z, I->chunk, m, 0);
    if (!l) return dd_error(DD_ERR_INTERNAL, "pipeline: backward of micro-batch %d before its forward", m);
    const float *dout, *du_in = NULL;
    if (k->sp.last) {
        dout = micro_x(z, z->dpred, m);
    } else {
        /* from the next virtual stage: a message, or with P = 1 its input gradient right here */
        const float *slot;
        if (I->peer >= 0) {
            const size_t q = (size_t)I->chunk * (size_t)z->nbuf.grad + (size_t)I->slot;
            DD_TRY(wait_msg(z, &z->rgradq[q], "gradient", m, I->peer));
            slot = z->rgrad[q];
        } else {
            slot = z->sgrad[(size_t)(I->chunk + 1) * (size_t)z->M + (size_t)m];
        }
        dout = slot;
        if (k->sp.u_out) du_in = slot + BF * (size_t)k->out_w;
    }
    float *send = k->sp.first ? NULL : z->sgrad[(size_t)I->chunk * (size_t)z->M + (size_t)m];
    if (send) memset(send, 0, BF * ((size_t)k->in_w + (k->sp.u_in ? 2 : 0)) * sizeof(float));
    if (B > 0) {
        const double t0 = dd_comm_wtime();
        float *x0 = micro_x(z, z->xin, m);
        const float *cur = k->sp.first ? x0 : l->in; /* the trained segment's input */
        float *dcur = send;                       /* dL/d(chunk input) */
        if (k->sp.a1 > k->sp.a0) {
            dd_stage_src src = {z->pa_params, NULL, z, NULL, NULL, stage_progress};
            const float *pin = k->sp.m1 > k->sp.m0 ? l->mid : cur;
            float *dpin = k->sp.m1 > k->sp.m0 ? micro_x(z, z->dpred, (int)z->M) + BF * 2 : dcur;
            if (k->sp.m1 > k->sp.m0) memset(dpin, 0, BF * 2 * sizeof(float));
            if (k->sp.a0 == 0) { /* the PA input is u: its gradient collects both */
                if (du_in && dpin)
                    for (size_t i = 0; i < BF * 2; i++) dpin[i] += du_in[i];
                DD_TRY(dd_model_range_backward(z->pa, k->sp.a0, k->sp.a1, &src, pin, pin, dout, dpin, dpin, (int)B,
                                               (int)z->F, l->wsa));
            } else { /* inside the PA model: u travels beside the activation */
                float *du = send + BF * (size_t)k->in_w;
                /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): send holds the stage's outgoing buffer when du_in is set */
                if (du_in) memcpy(du, du_in, BF * 2 * sizeof(float));
                DD_TRY(dd_model_range_backward(z->pa, k->sp.a0, k->sp.a1, &src, pin, l->u, dout, dpin, du, (int)B, (int)z->F,
                                               l->wsa));
            }
            dout = dpin;
        }
        if (k->sp.m1 > k->sp.m0) {
            dd_stage_src src = {NULL, NULL, z, own_params, own_grads, stage_progress};
            DD_TRY(dd_model_range_backward(z->m, k->sp.m0, k->sp.m1, &src, cur, x0, dout, dcur, NULL, (int)B, (int)z->F,
                                           l->wsm));
        }
        z->st.busy_s += dd_comm_wtime() - t0;
    }
    l->micro = -1;
    return DD_OK;
}

static size_t act_floats(const dd_pp *z, const pp_chunk *k, int m, int in) {
    const size_t BF = micro_frames(z, m) * z->F;
    return in ? BF * ((size_t)k->in_w + (k->sp.u_in ? 2 : 0)) : BF * ((size_t)k->out_w + (k->sp.u_out ? 2 : 0));
}

static dd_status run_instr(pp_step *ps, const dd_pp_instr *I) {
    dd_pp *z = ps->z;
    const pp_chunk *k = &z->ch[I->chunk];
    const size_t c = (size_t)I->chunk, M = (size_t)z->M, m = (size_t)I->micro;
    switch (I->op) {
    case DD_PP_RECV_ACT:
        return post(z, 1, z->ract[c * (size_t)z->nbuf.act + (size_t)I->slot], act_floats(z, k, I->micro, 1), I->peer,
                    I->tag, &z->ractq[c * (size_t)z->nbuf.act + (size_t)I->slot]);
    case DD_PP_RECV_GRAD:
        return post(z, 1, z->rgrad[c * (size_t)z->nbuf.grad + (size_t)I->slot], act_floats(z, k, I->micro, 0),
                    I->peer, I->tag, &z->rgradq[c * (size_t)z->nbuf.grad + (size_t)I->slot]);
    case DD_PP_SEND_ACT:
        return post(z, 0, z->sact[c * M + m], act_floats(z, k, I->micro, 0), I->peer, I->tag, &z->sactq[c * M + m]);
    case DD_PP_SEND_GRAD:
        return post(z, 0, z->sgrad[c * M + m], act_floats(z, k, I->micro, 1), I->peer, I->tag, &z->sgradq[c * M + m]);
    case DD_PP_FWD: return fwd(ps, I);
    case DD_PP_BWD: return bwd(ps, I);
    }
    return dd_error(DD_ERR_INTERNAL, "pipeline: unknown instruction %d", (int)I->op);
}

/* Completes every send of the step (the receivers have posted them all by the end of
 * their own lists). */
static dd_status finish_sends(dd_pp *z) {
    const size_t n = (size_t)z->V * (size_t)z->M;
    for (size_t k = 0; k < 2 * n; k++) {
        dd_comm_req **q = k < n ? &z->sactq[k] : &z->sgradq[k - n];
        if (!*q) continue;
        char desc[128];
        snprintf(desc, sizeof desc, "a pipeline send of step %llu to be received", (unsigned long long)z->step_no + 1);
        dd_status st = dd_comm_wait_timeout(q, z->wait_s, desc);
        if (st != DD_OK) return dd_error_prefix(st, "pipeline rank %d: ", z->prank);
    }
    return DD_OK;
}

/* The replicated entries of this rank's storage from tensor rank 0 of its group. */
static dd_status share_replicated(dd_pp *z, float *grads) {
    size_t n = 0;
    for (size_t k = 0; k < z->nrep; k++) n += z->rephi[k] - z->replo[k];
    dd_status s = DD_OK;
    float *buf = malloc((n ? n : 1) * sizeof *buf);
    if (!buf) return dd_error(DD_ERR_NOMEM, "out of memory");
    size_t o = 0;
    for (size_t k = 0; k < z->nrep; k++) {
        const size_t len = z->rephi[k] - z->replo[k];
        memcpy(buf + o, grads + z->replo[k], len * sizeof *buf);
        o += len;
    }
    if (s == DD_OK) s = dd_comm_bcast(z->tpc, buf, n * sizeof *buf, 0);
    o = 0;
    for (size_t k = 0; s == DD_OK && k < z->nrep; k++) {
        const size_t len = z->rephi[k] - z->replo[k];
        memcpy(grads + z->replo[k], buf + o, len * sizeof *buf);
        o += len;
    }
    free(buf);
    if (s != DD_OK) return dd_error_prefix(s, "pipeline: the tensor group's replicated gradients (%zu floats): ", n);
    return DD_OK;
}

/* The reduced loss sum, squared gradient norm and stop flags of a step. */
static dd_status pp_grads(dd_pp *z, dd_trainer *tr, uint64_t epoch, uint64_t batch, double v[3]) {
    uint64_t lo, hi, bg;
    dd_trainer_batch_slice(tr, batch, z->drank, z->D, &lo, &hi, &bg);
    const uint64_t n = hi - lo;
    for (int m = 0; m <= z->M; m++) z->mlo[m] = lo + n * (uint64_t)m / (uint64_t)z->M;
    if ((size_t)n * z->F * 2 > z->xcap)
        return dd_error(DD_ERR_INTERNAL, "pipeline: %llu frames in a step, buffers for %zu", (unsigned long long)n,
                        z->xcap / (z->F * 2));
    DD_TRY(dd_trainer_gather(tr, epoch, lo, hi, z->xin, z->tgt));
    float *grads = NULL;
    size_t glo = 0, ghi = 0;
    dd_trainer_storage(tr, NULL, &grads, &glo, &ghi, NULL, NULL); /* the whole local storage */
    memset(grads, 0, (ghi - glo) * sizeof(float));
    pp_step ps = {z, epoch, lo, bg, 0.0};
    const double t0 = dd_comm_wtime(), busy0 = z->st.busy_s;
    dd_status st = DD_OK;
    for (size_t i = 0; st == DD_OK && i < z->nins; i++) st = run_instr(&ps, &z->ins[i]);
    if (st == DD_OK) st = finish_sends(z);
    z->st.last_step_s = dd_comm_wtime() - t0;
    z->st.last_busy_s = z->st.busy_s - busy0;
    z->st.step_s += z->st.last_step_s;
    DD_TRY(st);
    /* data parallelism: each stage group's gradients summed over the replicas (through
     * the compressor; reduce-scattered under zero1) */
    const double t1 = dd_comm_wtime();
    const size_t nl = ghi - glo;
    dd_comm_stats c0, c1;
    dd_comm_stats_get(z->dp, &c0);
    if (z->cp && nl > 0) {
        dd_compress_stats a, b;
        dd_compress_stats_get(z->cp, &a);
        st = dd_compress_exchange(z->cp, z->dp, z->algo, grads, 0, nl);
        if (st != DD_OK) return dd_error_prefix(st, "pipeline: compressed gradient exchange over the replicas: ");
        dd_compress_stats_get(z->cp, &b);
        z->st.dp_bytes_sent += b.bytes_sent - a.bytes_sent;
        /* each rank of a tensor-parallel group compresses its own storage, so a lossy
         * compressor delivers the group's replicated entries differently on each: tensor
         * rank 0's are taken (as the norm counts them), so the copies stay identical */
        if (z->T > 1 && dd_compress_lossy(z->cp)) DD_TRY(share_replicated(z, grads));
    } else if (z->D > 1 && nl > 0) {
        if (z->part)
            st = dd_comm_reduce_scatter(z->dp, grads, grads + z->part[z->drank], z->pcnt, DD_F32);
        else
            st = dd_comm_allreduce(z->dp, z->algo, grads, nl, DD_F32);
        if (st != DD_OK) return dd_error_prefix(st, "pipeline: gradient %s over the replicas: ", z->part ? "reduce-scatter" : "allreduce");
        dd_comm_stats_get(z->dp, &c1);
        z->st.dp_bytes_sent += c1.bytes_sent - c0.bytes_sent;
    }
    /* the loss once per replica (a tensor-parallel group's outputs are whole on each of
     * its ranks); each gradient once: one replica (zero1: each replica its slice),
     * replicated shard entries once */
    v[0] = z->grid.tp == 0 ? ps.sse : 0.0;
    double sq = 0.0;
    const size_t sa = z->part ? z->part[z->drank] : 0, sb = z->part ? z->part[z->drank + 1] : nl;
    if (z->part || z->drank == 0) {
        sq = dd_grad_sumsq(grads + sa, sb - sa);
        for (size_t k = 0; z->grid.tp != 0 && k < z->nrep; k++) {
            const size_t a = z->replo[k] > sa ? z->replo[k] : sa, b = z->rephi[k] < sb ? z->rephi[k] : sb;
            if (a < b) sq -= dd_grad_sumsq(grads + a, b - a);
        }
    }
    v[1] = sq;
    v[2] = z->local_stop && *z->local_stop ? 1.0 : 0.0;
    if (dd_comm_size(z->world) > 1) {
        st = dd_comm_allreduce(z->world, z->algo, v, 3, DD_F64);
        if (st != DD_OK) return dd_error_prefix(st, "pipeline: loss reduction: ");
    }
    z->st.reduce_s += dd_comm_wtime() - t1;
    v[0] *= dd_trainer_loss_scale(tr, bg);
    return DD_OK;
}

static dd_status s_loss_grad(void *self, dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss) {
    double v[3];
    DD_TRY(pp_grads(self, tr, epoch, batch, v));
    *loss = v[0];
    return DD_OK;
}

static dd_status s_step(void *self, dd_trainer *tr, double *loss) {
    dd_pp *z = self;
    double v[3];
    const uint64_t batch = dd_trainer_batch(tr), nb = dd_trainer_num_batches(tr);
    if (z->cp) dd_compress_begin_step(z->cp, dd_trainer_steps(tr), dd_trainer_epoch(tr), nb ? (double)batch / (double)nb : 0.0);
    DD_TRY(pp_grads(z, tr, (uint64_t)dd_trainer_epoch(tr), batch, v));
    *loss = v[0];
    if (v[2] > 0) z->agreed_stop = 1;
    DD_TRY(dd_trainer_apply_update(tr, v[0], v[1]));
    z->full_ok = 0;
    z->cst.ok = 0;
    z->ep.ckpt_ok = 0;
    if (z->part && z->D > 1 && z->part[z->D] > 0) { /* zero1: every replica's updated slice */
        float *params = NULL;
        dd_trainer_storage(tr, &params, NULL, NULL, NULL, NULL, NULL);
        const double t0 = dd_comm_wtime();
        dd_comm_stats a, b;
        dd_comm_stats_get(z->dp, &a);
        dd_status s = dd_comm_allgatherv(z->dp, (char *)params + z->pdispl[z->drank], params, z->pcount, z->pdispl);
        dd_comm_stats_get(z->dp, &b);
        z->st.dp_bytes_sent += b.bytes_sent - a.bytes_sent;
        z->st.reduce_s += dd_comm_wtime() - t0;
        if (s != DD_OK) return dd_error_prefix(s, "pipeline (zero1): gathering the updated parameters from the replicas: ");
    }
    z->st.steps++;
    z->step_no++;
    return DD_OK;
}

/* ---------------------------------------------------------------- other operations */

static dd_status s_bcast(void *self, double *vals, int nv) {
    dd_pp *z = self;
    if (dd_comm_size(z->world) == 1 || nv <= 0) return DD_OK;
    dd_status s = dd_comm_bcast(z->world, vals, (size_t)nv * sizeof(double), 0);
    if (s != DD_OK) return dd_error_prefix(s, "pipeline: broadcast from rank 0: ");
    return DD_OK;
}

/* Every rank's map (dd_trainer_map: local floats -> the whole model's), gathered once to
 * rank 0 over the first replica (every pipeline and tensor-parallel rank). */
static dd_status gather_maps(dd_pp *z, dd_trainer *tr) {
    if (z->mapcnt) return DD_OK;
    const int R = dd_comm_size(z->rep), me = dd_comm_rank(z->rep);
    const dd_optim_run *map = NULL;
    size_t nmap = 0, lo = 0, hi = 0;
    dd_trainer_map(tr, &map, &nmap);
    dd_trainer_storage(tr, NULL, NULL, &lo, &hi, NULL, NULL); /* the whole local storage */
    z->mapcnt = calloc(2 * (size_t)R, sizeof *z->mapcnt);
    size_t *cnt = calloc(2 * (size_t)R, sizeof *cnt);
    if (!z->mapcnt || !cnt) {
        free(cnt);
        return dd_error(DD_ERR_NOMEM, "out of memory");
    }
    z->loccnt = z->mapcnt + R;
    size_t mine[2] = {nmap, hi - lo}, *all = calloc(2 * (size_t)R, sizeof *all);
    dd_status s = all ? dd_comm_allgather(z->rep, mine, sizeof mine, all) : DD_ERR_NOMEM;
    size_t total = 0;
    for (int q = 0; s == DD_OK && q < R; q++) {
        z->mapcnt[q] = all[2 * q];
        z->loccnt[q] = all[2 * q + 1];
        cnt[q] = z->mapcnt[q] * sizeof(dd_optim_run);
        cnt[R + q] = total * sizeof(dd_optim_run);
        total += z->mapcnt[q];
    }
    free(all);
    if (s == DD_OK && me == 0 && !(z->allmap = calloc(total ? total : 1, sizeof *z->allmap))) s = DD_ERR_NOMEM;
    if (s == DD_OK) s = dd_comm_gatherv(z->rep, map, z->allmap, cnt, cnt + R, 0);
    free(cnt);
    return s;
}

/* The whole arena of the first replica's local arrays `mine` (each rank's storage) on its
 * rank 0 (world rank 0): gathered in rank order into tmp, then placed by each map. */
static dd_status gather_whole(dd_pp *z, const float *mine, float *whole, float *tmp) {
    const int R = dd_comm_size(z->rep), me = dd_comm_rank(z->rep);
    size_t *cnt = calloc(2 * (size_t)R, sizeof *cnt), off = 0;
    if (!cnt) return dd_error(DD_ERR_NOMEM, "out of memory");
    for (int q = 0; q < R; q++) {
        cnt[q] = z->loccnt[q] * sizeof(float);
        cnt[R + q] = off * sizeof(float);
        off += z->loccnt[q];
    }
    dd_status s = dd_comm_gatherv(z->rep, mine, tmp, cnt, cnt + R, 0);
    if (s == DD_OK && me == 0) {
        const dd_optim_run *m = z->allmap;
        for (int q = 0; q < R; q++) {
            const float *src = tmp + cnt[R + q] / sizeof(float);
            /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): rank 0 has whole and tmp (allocated above) */
            for (size_t k = 0; k < z->mapcnt[q]; k++, m++) memcpy(whole + m->src, src + m->dst, m->len * sizeof(float));
        }
    }
    free(cnt);
    return s;
}

/* The whole parameters and optimiser state on rank 0: the first replica's ranks send
 * their storage (a collective of that replica). */
/* zero1: the local optimiser state whole on the first replica's rank of each position
 * (the replicas' slices gathered over dp), array by array. */
static dd_status gather_optim_slices(dd_pp *z, dd_optim *opt, size_t nl) {
    const int k = dd_optim_state_arrays(opt);
    if (z->drank == 0 && z->olocal_n != (size_t)k * nl) {
        free(z->olocal);
        z->olocal = calloc((size_t)k * nl + 1, sizeof(float));
        z->olocal_n = z->olocal ? (size_t)k * nl : 0;
        if (!z->olocal) return dd_error(DD_ERR_NOMEM, "out of memory for the optimiser state (%zu floats)", (size_t)k * nl);
    }
    size_t cnt = 0;
    float *mine = dd_optim_state(opt, &cnt);
    const size_t m = z->pcnt[z->drank];
    for (int j = 0; j < k; j++) {
        dd_status s = dd_comm_gatherv(z->dp, mine + (size_t)j * m, z->drank == 0 ? z->olocal + (size_t)j * nl : NULL,
                                      z->pcount, z->pdispl, 0);
        if (s != DD_OK) return dd_error_prefix(s, "pipeline (zero1): gathering the optimiser state from the replicas: ");
    }
    return DD_OK;
}

/* Every rank's compressor state on rank 0, with where each rank sits (tp, pp, dp) and its
 * storage length (the checkpoint's mp.compress sections). */
static dd_status gather_cx(dd_pp *z, size_t nl) {
    if (!z->cp || z->cst.ok) return DD_OK;
    const int N = dd_comm_size(z->world);
    uint64_t mine[4] = {(uint64_t)z->grid.tp, (uint64_t)z->prank, (uint64_t)z->drank, (uint64_t)nl};
    uint64_t *all = calloc(4 * (size_t)N, sizeof *all);
    if (!all) return dd_error(DD_ERR_NOMEM, "out of memory");
    dd_status s = N > 1 ? dd_comm_allgather(z->world, mine, sizeof mine, all) : DD_OK;
    if (N == 1) memcpy(all, mine, sizeof mine);
    if (s == DD_OK) s = dd_cx_gather(z->cp, z->world, &z->cst);
    if (s != DD_OK) {
        free(all);
        return dd_error_prefix(s, "pipeline: ");
    }
    free(z->cpos);
    z->cpos = all;
    return DD_OK;
}

/* The whole parameters and optimiser state on rank 0: the first replica's ranks send
 * their storage (a collective of that replica; zero1: first the replicas' optimiser
 * slices to the first replica); the compressor state and the epoch's figures too. Every
 * rank calls it. */
static dd_status s_before_save(void *self, dd_trainer *tr) {
    dd_pp *z = self;
    if (z->full_ok) return DD_OK;
    size_t plo = 0, phi = 0;
    dd_trainer_storage(tr, NULL, NULL, &plo, &phi, NULL, NULL);
    const size_t nl = phi - plo;
    dd_status s = dd_cx_epoch_gather(&z->ep, z->world, z->st.steps, z->st.bytes_sent + z->st.dp_bytes_sent, z->cp);
    if (s != DD_OK) return dd_error_prefix(s, "pipeline: ");
    DD_TRY(gather_cx(z, nl));
    dd_optim *opt = dd_trainer_optim(tr);
    if (z->part) DD_TRY(gather_optim_slices(z, opt, nl));
    if (z->drank != 0) {
        z->full_ok = 1;
        return DD_OK;
    }
    const size_t n = dd_trainer_whole_floats(tr);
    const int k = dd_optim_state_arrays(opt);
    const size_t ob = dd_optim_state_bytes_for(opt, n);
    const int me = dd_comm_rank(z->rep);
    s = gather_maps(z, tr);
    size_t total = 0;
    for (int q = 0; s == DD_OK && q < dd_comm_size(z->rep); q++) total += z->loccnt[q];
    float *tmp = NULL;
    if (s == DD_OK && me == 0) {
        if (z->full_optim_bytes != ob) {
            free(z->full_optim);
            z->full_optim = calloc(1, ob);
            z->full_optim_bytes = z->full_optim ? ob : 0;
        }
        if (!z->full_params) z->full_params = calloc(n ? n : 1, sizeof(float));
        tmp = calloc(total ? total : 1, sizeof(float));
        if (!z->full_optim || !z->full_params || !tmp)
            s = dd_error(DD_ERR_NOMEM, "out of memory for the model state (%zu floats)", n);
    }
    if (s == DD_OK) s = gather_whole(z, dd_trainer_params(tr), z->full_params, tmp);
    size_t m = 0;
    float *mine = dd_optim_state(opt, &m);
    m = nl; /* the local optimiser's length (a rank without parameters has a dummy float) */
    if (z->part) mine = z->olocal;
    for (int j = 0; s == DD_OK && j < k; j++) {
        float *dst = me == 0 ? (float *)(void *)((char *)z->full_optim + DD_OPTIM_STATE_HEADER) + (size_t)j * n : NULL;
        s = gather_whole(z, mine + (size_t)j * m, dst, tmp);
    }
    free(tmp);
    if (s != DD_OK) return dd_error_prefix(s, "model parallelism: gathering the model state: ");
    if (me == 0) DD_TRY(dd_optim_state_header(opt, n, z->full_optim));
    z->full_ok = 1;
    return DD_OK;
}

static dd_status s_full_state(void *self, dd_trainer *tr, const float **params, const void **optim, size_t *bytes) {
    dd_pp *z = self;
    (void)tr;
    if (!z->full_ok || !z->full_params)
        return dd_error(DD_ERR_INTERNAL, "pipeline: the model state was not gathered before the checkpoint");
    *params = z->full_params;
    *optim = z->full_optim;
    *bytes = z->full_optim_bytes;
    return DD_OK;
}

/* What identifies a position's storage: T, P, V and the split (the compressor state of
 * a position is in the coordinates of its storage). */
static size_t grid_id(const dd_pp *z, uint64_t *id) {
    const size_t G = (size_t)z->P * z->V;
    if (id) {
        id[0] = (uint64_t)z->T;
        id[1] = (uint64_t)z->P;
        id[2] = (uint64_t)z->V;
        for (size_t g = 0; g <= G; g++) id[3 + g] = z->bounds ? (uint64_t)z->bounds[g] : 0;
    }
    return 3 + G + 1;
}

static dd_status s_save(void *self, dd_trainer *tr, dd_ckpt_writer *w) {
    dd_pp *z = self;
    (void)tr;
    char desc[160];
    snprintf(desc, sizeof desc, "tp=%d,pp=%d,dp=%d,micro=%d,schedule=%s,virtual=%d,shard=%s", z->T, z->P, z->D, z->M,
             dd_pp_kind_name(z->kind), z->V, dd_shard_name(z->shard));
    DD_TRY(dd_ckpt_add_str(w, "layout", desc)); /* informative: any layout resumes under any */
    DD_TRY(dd_cx_epoch_save(&z->ep, w));
    if (!z->cp) return DD_OK;
    if (!z->cst.ok || !z->cpos)
        return dd_error(DD_ERR_INTERNAL, "pipeline: the compression state was not gathered before the checkpoint");
    /* the compressor state of every rank, with its position: mp.compress.* (data
     * parallelism's compress.state is one arena for every rank; here each position has
     * its own storage) */
    DD_TRY(dd_cx_save_cfg(w, z->cp, "mp.compress"));
    const size_t ni = grid_id(z, NULL), N = (size_t)dd_comm_size(z->world);
    uint64_t *id = calloc(ni + 4 * N + 2 * N, sizeof *id);
    if (!id) return dd_error(DD_ERR_NOMEM, "out of memory");
    grid_id(z, id);
    uint64_t *pos = id + ni, *cnt = pos + 4 * N;
    memcpy(pos, z->cpos, 4 * N * sizeof *pos);
    for (size_t q = 0; q < N; q++) {
        cnt[2 * q] = z->cst.cnt[q];
        cnt[2 * q + 1] = z->cst.scnt[q];
    }
    dd_status s = dd_ckpt_add(w, "mp.compress.grid", id, ni * sizeof *id);
    if (s == DD_OK) s = dd_ckpt_add(w, "mp.compress.ranks", pos, 4 * N * sizeof *pos);
    if (s == DD_OK) s = dd_ckpt_add(w, "mp.compress.counts", cnt, 2 * N * sizeof *cnt);
    if (s == DD_OK) s = dd_ckpt_add(w, "mp.compress.state", z->cst.st, z->cst.total * sizeof(float));
    if (s == DD_OK) s = dd_ckpt_add(w, "mp.compress.shared", z->cst.sh, z->cst.stotal * sizeof(float));
    free(id);
    return s;
}

static dd_status get_u64s(const dd_ckpt_reader *r, const char *name, size_t n, const uint64_t **out) {
    const void *d = NULL;
    size_t bytes = 0;
    DD_TRY(dd_ckpt_get(r, name, &d, &bytes));
    if (bytes != n * sizeof(uint64_t))
        return dd_error(DD_ERR_FORMAT, "checkpoint section %s: %zu bytes, expected %zu", name, bytes, n * sizeof(uint64_t));
    *out = d;
    return DD_OK;
}

/* The compressor state of this rank's position: its own with the same grid (bit for
 * bit), the mean over the written replicas with another number of replicas (their sum,
 * the gradient not yet applied, kept), none under another tp/pp/split (logged). */
static dd_status load_cx(dd_pp *z, dd_trainer *tr, const dd_ckpt_reader *r) {
    const int log = dd_comm_rank(z->world) == 0;
    int same = 0;
    DD_TRY(dd_cx_cfg_match(r, z->cp, "mp.compress", log, &same));
    if (!same) return DD_OK;
    const size_t ni = grid_id(z, NULL);
    uint64_t *id = calloc(ni, sizeof *id);
    if (!id) return dd_error(DD_ERR_NOMEM, "out of memory");
    grid_id(z, id);
    const void *d = NULL;
    size_t bytes = 0;
    dd_status s = dd_ckpt_get(r, "mp.compress.grid", &d, &bytes);
    const int same_grid = s == DD_OK && bytes == ni * sizeof *id && memcmp(d, id, bytes) == 0;
    free(id);
    DD_TRY(s);
    if (!same_grid) {
        if (log)
            dd_log(DD_LOG_WARN, "the checkpoint's compression state belongs to another tp x pp layout or stage split: "
                   "%s starts with a zero residual", dd_compress_config(z->cp)->name);
        return DD_OK;
    }
    const uint64_t *cnt = NULL, *pos = NULL;
    DD_TRY(dd_ckpt_get(r, "mp.compress.counts", &d, &bytes));
    if (bytes % (2 * sizeof(uint64_t)) || bytes == 0)
        return dd_error(DD_ERR_FORMAT, "checkpoint section mp.compress.counts: %zu bytes", bytes);
    const size_t N = bytes / (2 * sizeof(uint64_t));
    cnt = d;
    DD_TRY(get_u64s(r, "mp.compress.ranks", 4 * N, &pos));
    const float *st = NULL, *sh = NULL;
    size_t total = 0, stotal = 0;
    for (size_t q = 0; q < N; q++) total += cnt[2 * q], stotal += cnt[2 * q + 1];
    DD_TRY(dd_ckpt_get(r, "mp.compress.state", &d, &bytes));
    if (bytes != total * sizeof(float))
        return dd_error(DD_ERR_FORMAT, "checkpoint section mp.compress.state: %zu bytes, the counts say %zu floats", bytes, total);
    st = d;
    DD_TRY(dd_ckpt_get(r, "mp.compress.shared", &d, &bytes));
    if (bytes != stotal * sizeof(float))
        return dd_error(DD_ERR_FORMAT, "checkpoint section mp.compress.shared: %zu bytes, the counts say %zu floats", bytes, stotal);
    sh = d;
    /* this position's entries; the written number of replicas */
    size_t plo = 0, phi = 0, D0 = 0, m = 0, ns = 0, mine = N;
    dd_trainer_storage(tr, NULL, NULL, &plo, &phi, NULL, NULL);
    for (size_t q = 0; q < N; q++) {
        if (pos[4 * q] != (uint64_t)z->grid.tp || pos[4 * q + 1] != (uint64_t)z->prank) continue;
        if (pos[4 * q + 3] != phi - plo)
            return dd_error(DD_ERR_FORMAT, "checkpoint section mp.compress.ranks: %llu storage floats at tp %d, pp %d; "
                                           "this rank has %zu", (unsigned long long)pos[4 * q + 3], z->grid.tp, z->prank,
                            phi - plo);
        if (D0 == 0) m = cnt[2 * q], ns = cnt[2 * q + 1];
        if (cnt[2 * q] != m || cnt[2 * q + 1] != ns)
            return dd_error(DD_ERR_FORMAT, "checkpoint section mp.compress.counts: replicas of tp %d, pp %d differ", z->grid.tp, z->prank);
        D0++;
        if (pos[4 * q + 2] == (uint64_t)z->drank) mine = q;
    }
    if (D0 == 0 || m == 0) return DD_OK; /* nothing exchanged yet */
    float *buf = calloc(m, sizeof *buf);
    if (!buf) return dd_error(DD_ERR_NOMEM, "out of memory");
    const float *shared = NULL;
    if (D0 == (size_t)z->D && mine < N) { /* the same replicas: this rank's own, bit for bit */
        size_t off = 0, soff = 0;
        for (size_t q = 0; q < mine; q++) off += cnt[2 * q], soff += cnt[2 * q + 1];
        memcpy(buf, st + off, m * sizeof *buf);
        shared = sh + soff;
    } else { /* another number of replicas: the mean keeps their sum */
        double *acc = calloc(m, sizeof *acc);
        if (!acc) {
            free(buf);
            return dd_error(DD_ERR_NOMEM, "out of memory");
        }
        for (size_t q = 0, off = 0, soff = 0; q < N; off += cnt[2 * q], soff += cnt[2 * q + 1], q++) {
            if (pos[4 * q] != (uint64_t)z->grid.tp || pos[4 * q + 1] != (uint64_t)z->prank) continue;
            for (size_t i = 0; i < m; i++) acc[i] += st[off + i];
            if (!shared) shared = sh + soff;
        }
        for (size_t i = 0; i < m; i++) buf[i] = (float)(acc[i] / (double)z->D);
        free(acc);
        if (log)
            dd_log(DD_LOG_INFO, "compression state written by %zu replicas, resuming with %d: each gets their mean (the "
                   "sum is kept)", D0, z->D);
    }
    const uint64_t lay[2] = {0, (uint64_t)(phi - plo)};
    s = dd_compress_layout_import(z->cp, phi - plo, lay, 1);
    if (s == DD_OK) s = dd_compress_state_import(z->cp, buf, m);
    if (s == DD_OK) s = dd_compress_shared_import(z->cp, shared, ns);
    free(buf);
    return s;
}

static dd_status s_load(void *self, dd_trainer *tr, const dd_ckpt_reader *r) {
    dd_pp *z = self;
    const char *was = "one process or data parallelism";
    if (dd_ckpt_has(r, "layout")) DD_TRY(dd_ckpt_get_str(r, "layout", &was));
    if (dd_comm_rank(z->world) == 0)
        dd_log(DD_LOG_INFO, "checkpoint written under %s, resuming with tp=%d, pp=%d, dp=%d", was, z->T, z->P, z->D);
    dd_status s = dd_cx_epoch_load(&z->ep, r, z->world, z->st.steps, z->st.bytes_sent + z->st.dp_bytes_sent, z->cp);
    if (s == DD_OK && z->cp) s = load_cx(z, tr, r);
    if (s != DD_OK) return dd_error_prefix(s, "pipeline: compression state: ");
    return DD_OK;
}

static int s_stop_agreed(void *self) { return ((dd_pp *)self)->agreed_stop != 0; }

static dd_status s_epoch_stats(void *self, double out[3]) {
    dd_pp *z = self;
    /* per rank: busy and schedule time of the epoch, gathered for the bubble report */
    double v[2] = {z->st.busy_s - z->ep_busy0, z->st.step_s - z->ep_step0};
    z->ep_busy0 = z->st.busy_s;
    z->ep_step0 = z->st.step_s;
    const int N = dd_comm_size(z->world);
    double *all = calloc(2 * (size_t)N, sizeof *all);
    if (!all) return dd_error(DD_ERR_NOMEM, "out of memory");
    dd_status s = N > 1 ? dd_comm_allgather(z->world, v, sizeof v, all) : DD_OK;
    if (N == 1) memcpy(all, v, sizeof v);
    double bub = 0.0;
    for (int r = 0; s == DD_OK && r < N; r++) bub += all[2 * r + 1] > 0 ? 1.0 - all[2 * r] / all[2 * r + 1] : 0.0;
    free(all);
    /* bytes: the pipeline's messages and the replicas' gradient exchange, per rank and
     * step over the whole epoch (also across a mid-epoch resume) */
    if (s == DD_OK) s = dd_cx_epoch_end(&z->ep, z->world, z->st.steps, z->st.bytes_sent + z->st.dp_bytes_sent, z->cp, out);
    if (s != DD_OK) return dd_error_prefix(s, "pipeline: epoch statistics: ");
    z->st.epoch_bubble = bub / N;
    if (!z->cp) out[2] = NAN;
    return DD_OK;
}

static dd_status s_tp(void *self, dd_model_tp *tp) {
    dd_pp *z = self;
    memset(tp, 0, sizeof *tp);
    tp->size = 1;
    if (z->tpg) dd_tp_group_model_tp(z->tpg, tp);
    return DD_OK;
}

static const dd_strategy_ops pp_ops = {
    .name = "model-parallel",
    .layout_ranges = s_layout,
    .layout_optim = s_layout_optim,
    .tp = s_tp,
    .setup = s_setup,
    .step = s_step,
    .loss_grad = s_loss_grad,
    .bcast = s_bcast,
    .before_save = s_before_save,
    .save = s_save,
    .load = s_load,
    .full_state = s_full_state,
    .stop_agreed = s_stop_agreed,
    .epoch_stats = s_epoch_stats,
};

void dd_pp_strategy(dd_pp *z, dd_strategy *st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!z) return;
    st->ops = &pp_ops;
    st->self = z;
    st->rank = dd_comm_rank(z->world);
    st->nranks = dd_comm_size(z->world);
}

dd_status dd_pp_split_get(const dd_pp *z, size_t *bounds, size_t cap, size_t *n) {
    if (!z || !n) return dd_error(DD_ERR_ARG, "dd_pp_split_get: NULL argument");
    if (!z->bounds) return dd_error(DD_ERR_ARG, "dd_pp_split_get: the split is known once a trainer is laid out");
    *n = (size_t)(z->P * z->V) + 1;
    for (size_t i = 0; bounds && i < *n && i < cap; i++) bounds[i] = z->bounds[i];
    return DD_OK;
}

/* ---------------------------------------------------------------- registry entry */

static size_t schedule_choices(char *buf, size_t cap) {
    return (size_t)snprintf(buf, cap, "%s, %s, %s (with --virtual V)", dd_pp_kind_name(DD_PP_GPIPE),
                            dd_pp_kind_name(DD_PP_1F1B), dd_pp_kind_name(DD_PP_INTERLEAVED));
}

static const dd_strategy_opt pp_opts[] = {
    {"tp", "T",
     "tensor parallelism over T ranks (Megatron-style: each rank holds\n"
     "its shard of every layer; resnet, tcn, hammerstein, gru, lstm,\n"
     "rvtdnn, arvtdnn; docs/models.md), inside a node; with --pp:\n"
     "T x P ranks per replica",
     NULL},
    {"pp", "P",
     "pipeline parallelism over P ranks: the model's stages (a DPD's\n"
     "then the frozen PA model's) split into P contiguous groups,\n"
     "balanced by FLOPs; mpirun -np N with N a multiple of P gives\n"
     "N / P data-parallel replicas of the pipeline",
     NULL},
    {"micro", "M", "micro-batches per global batch (default: --pp)", NULL},
    {"schedule", "S", "pipeline schedule (default 1f1b)", schedule_choices},
    {"virtual", "V", "virtual stages per rank (interleaved schedule; default 1)", NULL},
    {"pp-split", "LIST",
     "stage counts per pipeline rank, e.g. 3,3,4 (default: balanced\n"
     "by FLOPs; the split is printed at the start)",
     NULL},
    {"grid-order", "ORDER",
     "how the ranks form the grid, fastest dimension first (default\n"
     "tp,pp,dp: the ranks of a node form pipelines; data parallelism\n"
     "across nodes; nodes told apart by processor name)",
     NULL},
    {"allreduce", NULL, NULL, NULL}, /* the replicas' gradient allreduce */
    {"shard", NULL, NULL, NULL},     /* zero1 over the replicas */
    {"compress", NULL, NULL, NULL},  /* the replicas' gradient exchange */
    {"error-feedback", NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL},
};

static int pp_claims(const dd_strategy_args *a) {
    for (const dd_strategy_opt *o = pp_opts; o->name; o++)
        if (o->metavar && dd_strategy_arg(a, o->name)) return 3;
    return 0;
}

static dd_status pp_cfg_from_args(const dd_strategy_args *a, dd_pp_cfg *c, int nranks) {
    dd_pp_cfg_default(c);
    const char *v;
    double x;
    if ((v = dd_strategy_arg(a, "tp"))) {
        DD_TRY(dd_parse_number("--tp", v, 1, 1024, 1, &x));
        c->tp = (int)x;
        c->pp = 1;
    }
    if (!(v = dd_strategy_arg(a, "pp")) && !dd_strategy_arg(a, "tp"))
        return dd_error(DD_ERR_ARG, "--%s needs --pp P (the pipeline's ranks)",
                        dd_strategy_arg(a, "micro")      ? "micro"
                        : dd_strategy_arg(a, "schedule") ? "schedule"
                        : dd_strategy_arg(a, "virtual")  ? "virtual"
                        : dd_strategy_arg(a, "pp-split") ? "pp-split"
                                                         : "grid-order");
    if (v) {
        DD_TRY(dd_parse_number("--pp", v, 1, 1024, 1, &x));
        c->pp = (int)x;
    }
    if ((v = dd_strategy_arg(a, "micro"))) {
        DD_TRY(dd_parse_number("--micro", v, 1, DD_PP_MAX_MICRO, 1, &x));
        c->micro = (int)x;
    }
    if ((v = dd_strategy_arg(a, "virtual"))) {
        DD_TRY(dd_parse_number("--virtual", v, 1, DD_PP_MAX_VSTAGES, 1, &x));
        c->virt = (int)x;
    }
    if ((v = dd_strategy_arg(a, "schedule")) && dd_pp_kind_parse(v, &c->kind) != DD_OK)
        return dd_error_prefix(DD_ERR_ARG, "--schedule: ");
    if ((v = dd_strategy_arg(a, "allreduce")) && dd_allreduce_parse(v, &c->algo) != DD_OK)
        return dd_error_prefix(DD_ERR_ARG, "--allreduce: ");
    if ((v = dd_strategy_arg(a, "shard")) && dd_shard_parse(v, &c->shard) != DD_OK)
        return dd_error_prefix(DD_ERR_ARG, "--shard: ");
    DD_TRY(dd_cx_parse_args(a, &c->compress));
    c->split = dd_strategy_arg(a, "pp-split");
    if ((v = dd_strategy_arg(a, "grid-order"))) DD_TRY(dd_grid_parse_order(v, c->order));
    return dd_pp_cfg_check(c, nranks > 0 ? nranks : c->pp * c->tp);
}

static dd_status pp_check(const dd_strategy_args *a) {
    dd_pp_cfg c;
    /* before MPI starts the number of ranks is not known: checked again at create */
    return pp_cfg_from_args(a, &c, 0);
}

static dd_status pp_def_create(dd_comm *comm, const dd_strategy_args *a, void **self) {
    dd_pp_cfg c;
    DD_TRY(pp_cfg_from_args(a, &c, dd_comm_size(comm)));
    return dd_pp_create(comm, &c, (dd_pp **)self);
}

static void pp_def_destroy(void *self) {
    dd_pp *z = self;
    dd_pp_destroy(&z);
}

static void pp_def_strategy(void *self, dd_strategy *st) { dd_pp_strategy(self, st); }
static void pp_def_stop_source(void *self, const volatile int *local) { dd_pp_set_stop_source(self, local); }

static void pp_last_step(const void *self, dd_strategy_step_times *t) {
    const dd_pp *z = self;
    t->comm_s = z->st.last_step_s - z->st.last_busy_s;
    t->exposed_s = t->comm_s; /* the schedule's time not spent computing: bubble and waits */
    t->hidden_s = NAN;
    t->prev_exposed_mean_s = NAN;
}

static dd_status pp_report(const void *self, cJSON *o) {
    const dd_pp *z = self;
    cJSON_AddStringToObject(o, "shard", dd_shard_name(z->shard));
    cJSON_AddStringToObject(o, "allreduce", dd_allreduce_name(z->algo));
    DD_TRY(dd_cx_report(z->cp, o));
    cJSON *g = cJSON_AddObjectToObject(o, "grid");
    if (g) {
        cJSON_AddNumberToObject(g, "tp", z->T);
        cJSON_AddNumberToObject(g, "pp", z->P);
        cJSON_AddNumberToObject(g, "dp", z->D);
        cJSON_AddBoolToObject(g, "tensor_groups_within_a_node", z->grid.tp_intra);
    }
    if (z->tpg) {
        dd_tp_group_stats t;
        dd_tp_group_stats_get(z->tpg, &t);
        const double ns = z->st.steps ? (double)z->st.steps : 1.0;
        cJSON *tj = cJSON_AddObjectToObject(o, "tensor_parallel");
        if (tj) {
            cJSON_AddNumberToObject(tj, "tp", z->T);
            cJSON_AddNumberToObject(tj, "rank0_allreduce_calls_per_step", (double)t.allreduce_calls / ns);
            cJSON_AddNumberToObject(tj, "rank0_allgather_calls_per_step", (double)t.allgather_calls / ns);
            cJSON_AddNumberToObject(tj, "rank0_reduce_scatter_calls_per_step", (double)t.reduce_scatter_calls / ns);
            cJSON_AddNumberToObject(tj, "rank0_bytes_sent_per_step", (double)t.bytes_sent / ns);
            cJSON_AddNumberToObject(tj, "rank0_seconds_per_step", t.seconds / ns);
        }
    }
    cJSON *p = cJSON_AddObjectToObject(o, "pipeline");
    if (!p) return DD_ERR_NOMEM;
    cJSON_AddNumberToObject(p, "pp", z->P);
    cJSON_AddNumberToObject(p, "dp", z->D);
    cJSON_AddNumberToObject(p, "micro", z->M);
    cJSON_AddNumberToObject(p, "virtual", z->V);
    cJSON_AddStringToObject(p, "schedule", dd_pp_kind_name(z->kind));
    char ord[32];
    dd_grid_order_name(z->grid.order, ord, sizeof ord);
    cJSON_AddStringToObject(p, "grid_order", ord);
    cJSON_AddNumberToObject(p, "nodes", z->grid.nodes);
    cJSON_AddBoolToObject(p, "pipelines_within_a_node", z->grid.pp_intra);
    cJSON *b = cJSON_AddArrayToObject(p, "split");
    for (int i = 0; b && z->bounds && i <= z->P * z->V; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((double)z->bounds[i]));
    const double n = z->st.steps ? (double)z->st.steps : 1.0;
    cJSON_AddNumberToObject(p, "bubble_formula", dd_pp_bubble_formula(z->kind, z->P, z->M, z->V));
    cJSON_AddNumberToObject(p, "bubble_measured_last_epoch", z->st.epoch_bubble);
    cJSON_AddNumberToObject(p, "rank0_schedule_s_per_step", z->st.step_s / n);
    cJSON_AddNumberToObject(p, "rank0_busy_s_per_step", z->st.busy_s / n);
    cJSON_AddNumberToObject(p, "rank0_wait_s_per_step", z->st.wait_s / n);
    cJSON_AddNumberToObject(p, "rank0_reduce_s_per_step", z->st.reduce_s / n);
    cJSON_AddNumberToObject(p, "rank0_messages_per_step", (double)z->st.messages / n);
    cJSON_AddNumberToObject(p, "rank0_bytes_sent_per_step", (double)z->st.bytes_sent / n);
    return DD_OK;
}

static void pp_print_epoch(const void *self, const dd_epoch_record *rec, uint64_t steps, FILE *f) {
    dd_cx_print_epoch(((const dd_pp *)self)->cp, rec, steps, f);
}

static void pp_print_summary(const void *self, FILE *f) {
    const dd_pp *z = self;
    const double n = z->st.steps ? (double)z->st.steps : 1.0;
    dd_cx_print_summary(z->cp, (double)z->st.steps, f);
    fprintf(f, "parallel:   %d ranks = tp %d x pp %d x dp %d (%s, %d micro-batches): schedule %.3f ms/step, "
               "compute %.3f, waiting %.3f; bubble %.1f %% (formula %.1f %%); replicas' reduction %.3f ms/step "
               "(rank 0)\n",
            z->T * z->P * z->D, z->T, z->P, z->D, dd_pp_kind_name(z->kind), z->M, 1e3 * z->st.step_s / n,
            1e3 * z->st.busy_s / n, 1e3 * z->st.wait_s / n, 100.0 * z->st.epoch_bubble,
            100.0 * dd_pp_bubble_formula(z->kind, z->P, z->M, z->V), 1e3 * z->st.reduce_s / n);
    if (z->tpg) {
        dd_tp_group_stats t;
        dd_tp_group_stats_get(z->tpg, &t);
        fprintf(f, "tensor:     %.0f allreduces, %.0f allgathers, %.0f reduce-scatters and %.0f bytes sent per step, "
                   "%.3f ms/step in them (rank 0, evaluation included)\n",
                (double)t.allreduce_calls / n, (double)t.allgather_calls / n, (double)t.reduce_scatter_calls / n,
                (double)t.bytes_sent / n, 1e3 * t.seconds / n);
    }
}

/* The split: each rank's stages with their parameters and FLOPs. */
static void pp_describe(const void *self, FILE *f) {
    const dd_pp *z = self;
    if (!z->bounds) return;
    char ord[32];
    dd_grid_order_name(z->grid.order, ord, sizeof ord);
    fprintf(f, "parallel:   tp %d x pp %d x dp %d; pipeline schedule %s, %d micro-batch%s; bubble by the formula %.1f %%\n",
            z->T, z->P, z->D, dd_pp_kind_name(z->kind), z->M, z->M == 1 ? "" : "es",
            100.0 * dd_pp_bubble_formula(z->kind, z->P, z->M, z->V));
    fprintf(f, "            grid %s over %d node%s: tensor-parallel groups %s, pipelines %s\n", ord, z->grid.nodes,
            z->grid.nodes == 1 ? "" : "s", z->grid.tp_intra ? "within a node" : "SPAN NODES",
            z->grid.pp_intra ? "within a node" : "SPAN NODES (check --grid-order and the ranks per node)");
    for (int v = 0; v < z->P * z->V; v++) {
        size_t params = 0;
        double flops = 0;
        char first[40] = "", last[40] = "";
        for (size_t s = z->bounds[v]; s < z->bounds[v + 1]; s++) {
            dd_stage_info si;
            if (stage_info(z, s, &si) != DD_OK) continue;
            if (s < z->Sm) params += si.hi - si.lo;
            flops += si.flops_fwd + si.flops_bwd;
            snprintf(s == z->bounds[v] ? first : last, sizeof first, "%s%s", s < z->Sm ? "" : "PA ", si.name);
        }
        fprintf(f, "            pipeline rank %d: stages %zu-%zu (%s%s%s): %zu parameter floats%s, %.3g FLOP per sample "
                   "(fwd+bwd%s)\n",
                v % z->P, z->bounds[v], z->bounds[v + 1] - 1, first, last[0] ? " .. " : "", last, params,
                z->T > 1 ? " per tensor-parallel rank" : "", flops, z->T > 1 ? ", one shard" : "");
    }
}

const dd_strategy_def dd_strategy_def_model_parallel = {
    .name = "model-parallel",
    .title = "model-parallel (tensor x pipeline, with data-parallel replicas)",
    .when = "--tp T and/or --pp P (and --micro, --schedule, --virtual, --pp-split, --grid-order)",
    .opts = pp_opts,
    .claims = pp_claims,
    .check = pp_check,
    .create = pp_def_create,
    .destroy = pp_def_destroy,
    .strategy = pp_def_strategy,
    .set_stop_source = pp_def_stop_source,
    .last_step = pp_last_step,
    .report = pp_report,
    .print_summary = pp_print_summary,
    .print_epoch = pp_print_epoch,
    .describe = pp_describe,
};
