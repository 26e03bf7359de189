/* The model-agnostic trainer (train.h): batch gathering by frame index, forward, MSE
 * loss, backward (through a frozen PA model for direct-learning DPD), clipping, the
 * optimiser step and the learning-rate schedule as building blocks of a strategy's step
 * (the single-process strategy is here; the others live in src/parallel); per-epoch
 * evaluation on padded nperseg segments with the OpenDPD metrics, and on the true
 * simulated PA for DPDs; best-epoch selection and the epoch history.
 *
 * No allocation happens per step: every buffer is sized at create for the largest
 * local slice of a global batch. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/train.h"
#include "train_internal.h"

/* ---------------------------------------------------------------- helpers */

dd_status dd_train_target_gain(const dd_cf32 *x, const dd_cf32 *y, size_t n, int mode, double *g) {
    if (n == 0) return dd_error(DD_ERR_ARG, "target gain: the training split is empty");
    if (mode == 0) {
        double mx = 0.0, my = 0.0;
        for (size_t i = 0; i < n; i++) {
            double ax = (double)crealf(x[i]) * crealf(x[i]) + (double)cimagf(x[i]) * cimagf(x[i]);
            double ay = (double)crealf(y[i]) * crealf(y[i]) + (double)cimagf(y[i]) * cimagf(y[i]);
            if (ax > mx) mx = ax;
            if (ay > my) my = ay;
        }
        if (!(mx > 0) || !(my > 0))
            return dd_error(DD_ERR_RANGE, "target gain: max|x| or max|y| of the training split is zero");
        *g = sqrt(my) / sqrt(mx);
    } else {
        double re = 0.0, im = 0.0, px = 0.0;
        for (size_t i = 0; i < n; i++) {
            double xr = crealf(x[i]), xi = cimagf(x[i]), yr = crealf(y[i]), yi = cimagf(y[i]);
            re += yr * xr + yi * xi; /* y x* */
            im += yi * xr - yr * xi;
            px += xr * xr + xi * xi;
        }
        if (!(px > 0)) return dd_error(DD_ERR_RANGE, "target gain: the training input has no energy");
        *g = sqrt(re * re + im * im) / px;
        if (!(*g > 0)) return dd_error(DD_ERR_RANGE, "target gain: the least-squares gain is zero");
    }
    return DD_OK;
}

static void metrics_nan(dd_eval_metrics *m) {
    m->loss = m->nmse_db = m->evm_db = NAN;
    m->aclr.left_db = m->aclr.right_db = m->aclr.avg_db = NAN;
}

double dd_rec_select_metric(const dd_train_cfg *cfg, const dd_epoch_record *r) {
    double v;
    if (cfg->task == DD_TRAIN_PA) {
        v = r->val.nmse_db;
        if (isnan(v)) v = r->test.nmse_db;
    } else {
        v = (cfg->select_true && r->has_true) ? r->true_val.aclr.avg_db : r->val.aclr.avg_db;
        if (isnan(v)) v = r->test.aclr.avg_db;
    }
    if (isnan(v)) v = r->train_loss;
    return v;
}

void dd_trainer_set_data_path(dd_trainer *tr, const char *path) {
    snprintf(tr->data_path, sizeof tr->data_path, "%s", path ? path : "");
}

/* ---------------------------------------------------------------- create / destroy */

size_t dd_eval_ws_cap = DD_TRAIN_EVAL_WS_CAP;
size_t dd_eval_chunk = DD_TRAIN_EVAL_CHUNK;

/* Floats of evaluation workspace for eb segments of T samples per forward call, whole
 * (Tc = 0: dd_model_infer) or in chunks of Tc steps (dd_model_infer_chunked), into *wm
 * and *wp (the model's and the PA model's); the total with the buffer between them, 0
 * when chunks are asked of a model that is not recurrent. */
static size_t eval_floats(const dd_model *m, const dd_model *pa, size_t eb, size_t T, size_t Tc, size_t *wm, size_t *wp) {
    if (Tc && (dd_model_history(m) >= 0 || (pa && dd_model_history(pa) >= 0))) return 0;
    *wm = (Tc ? dd_model_infer_chunked_workspace(m, (int)eb, (int)Tc) : dd_model_infer_workspace(m, (int)eb, (int)T)) + 16;
    *wp = !pa ? 0 : (Tc ? dd_model_infer_chunked_workspace(pa, (int)eb, (int)Tc) : dd_model_infer_workspace(pa, (int)eb, (int)T)) + 16;
    return *wm + *wp + (pa ? eb * T * 2 : 0);
}

static int eval_fits(const dd_model *m, const dd_model *pa, size_t eb, size_t T, size_t Tc, size_t cap) {
    size_t wm, wp, f = eval_floats(m, pa, eb, T, Tc, &wm, &wp);
    return f && f <= cap / sizeof(float);
}

void dd_train_eval_fit(const dd_model *m, const dd_model *pa, size_t eb, size_t T, size_t cap, size_t chunk,
                       dd_eval_fit *f) {
    memset(f, 0, sizeof *f);
    if (!m || eb == 0 || T == 0) return;
    size_t wm, wp, Tc = 0;
    if (eval_fits(m, pa, 1, T, 0, cap)) {
        while (eb > 1 && !eval_fits(m, pa, eb, T, 0, cap)) eb--;
    } else {
        Tc = chunk < T ? chunk : T;
        if (Tc == 0) Tc = 1;
        while (Tc >= 2 * DD_TRAIN_EVAL_CHUNK_MIN && !eval_fits(m, pa, eb, T, Tc, cap)) Tc /= 2; /* shorter chunks first */
        while (eb > 1 && !eval_fits(m, pa, eb, T, Tc, cap)) eb--;
        if (!eval_fits(m, pa, eb, T, Tc, cap)) {
            f->eb = 1;
            f->stream = 1;
            f->out1 = pa ? T * 2 : 0;
            return;
        }
    }
    eval_floats(m, pa, eb, T, Tc, &wm, &wp);
    f->eb = eb;
    f->chunk = Tc;
    f->ws_m = wm;
    f->ws_p = pa ? wp : 0;
    f->out1 = pa ? eb * T * 2 : 0;
}

static dd_status setup_eval_split(dd_trainer *tr, dd_eval_split *ev, dd_split s) {
    const dd_dataset *ds = tr->ds;
    const size_t T = ds->spec.nperseg;
    ev->n = ds->n[s];
    metrics_nan(&ev->base);
    metrics_nan(&ev->nodpd);
    tr->nodpd_ok = 0;
    if (ev->n == 0) return DD_OK;
    ev->nseg = (ev->n + T - 1) / T;
    ev->npad = ev->nseg * T;
    ev->nfull = ev->n / T;
    /* the model reads whole segments in place (ds->in[s]); only a partial last one is
     * copied, zero-padded */
    if (ev->nfull < ev->nseg) {
        ev->tail = dd_calloc(T, sizeof(dd_cf32));
        if (!ev->tail) return dd_error(DD_ERR_NOMEM, "out of memory for the %s split", dd_split_name(s));
        memcpy(ev->tail, ds->in[s] + ev->nfull * T, (ev->n - ev->nfull * T) * sizeof(dd_cf32));
    }
    ev->ref = dd_calloc(ev->npad, sizeof(dd_cf32));
    ev->pred = dd_calloc(ev->npad, sizeof(dd_cf32));
    if (!ev->ref || !ev->pred) return dd_error(DD_ERR_NOMEM, "out of memory for the %s split", dd_split_name(s));
    if (tr->cfg.task == DD_TRAIN_PA) {
        memcpy(ev->ref, ds->out[s], ev->n * sizeof(dd_cf32));
    } else {
        const float g = (float)tr->cfg.gain;
        for (size_t i = 0; i < ev->n; i++) ev->ref[i] = ds->in[s][i] * g;
    }
    return DD_OK;
}

static void free_split(dd_eval_split *ev) {
    dd_free(ev->tail);
    dd_free(ev->ref);
    dd_free(ev->pred);
    dd_free(ev->ty);
    memset(ev, 0, sizeof *ev);
}

static dd_status setup_eval_ws(dd_trainer *tr);

/* The validation and test splits as padded segments and the evaluation workspaces, on
 * the ranks that run evaluation forwards. */
static dd_status setup_eval(dd_trainer *tr) {
    if (!tr->eval_here) {
        metrics_nan(&tr->ev[0].base);
        metrics_nan(&tr->ev[1].base);
        return DD_OK;
    }
    DD_TRY(setup_eval_split(tr, &tr->ev[0], DD_SPLIT_VAL));
    if (tr->cfg.eval_test)
        DD_TRY(setup_eval_split(tr, &tr->ev[1], DD_SPLIT_TEST));
    else
        metrics_nan(&tr->ev[1].base);
    return setup_eval_ws(tr);
}

/* The evaluation workspaces for the trainer's model (the splits are set up). */
static dd_status setup_eval_ws(dd_trainer *tr) {
    size_t maxseg = tr->ev[0].nseg > tr->ev[1].nseg ? tr->ev[0].nseg : tr->ev[1].nseg;
    tr->eb = tr->cfg.eval_batch < maxseg ? tr->cfg.eval_batch : maxseg;
    tr->estream = 0;
    tr->echunk = 0;
    if (tr->eb > 0) {
        /* workspace per forward call capped: fewer segments per call, down to one; when
         * one segment is too large alone, recurrent models run the segments in chunks
         * (dd_model_infer_chunked), other models stream one segment at a time in bounded
         * chunks (all give the same numbers) */
        dd_eval_fit f;
        dd_train_eval_fit(tr->m, tr->pa, tr->eb, tr->ds->spec.nperseg, dd_eval_ws_cap, dd_eval_chunk, &f);
        tr->eb = f.eb;
        tr->echunk = f.chunk;
        tr->estream = f.stream;
        const int T = (int)tr->ds->spec.nperseg;
        int ok = 1;
        if (!tr->estream) {
            tr->ews_m = dd_arena_calloc(DD_MEM_ACTIVATIONS, f.ws_m, sizeof(float), "the evaluation workspace");
            ok = tr->ews_m != NULL;
            if (ok && tr->pa) {
                tr->ews_p = dd_arena_calloc(DD_MEM_ACTIVATIONS, f.ws_p, sizeof(float), "the PA model's evaluation workspace");
                ok = tr->ews_p != NULL;
            }
        }
        if (ok && tr->pa) {
            tr->eout1 = dd_arena_calloc(DD_MEM_ACTIVATIONS, tr->eb * (size_t)T * 2, sizeof(float),
                                        "the evaluation buffers");
            ok = tr->eout1 != NULL;
        }
        if (!ok) return DD_ERR_NOMEM; /* dd_arena_calloc said what and how much */
    }
    return DD_OK;
}

static void free_eval_ws(dd_trainer *tr) {
    dd_arena_free(tr->ews_m);
    dd_arena_free(tr->ews_p);
    dd_arena_free(tr->eout1);
    tr->ews_m = tr->ews_p = tr->eout1 = NULL;
}

static void free_eval(dd_trainer *tr) {
    free_eval_ws(tr);
    free_split(&tr->ev[0]);
    free_split(&tr->ev[1]);
}

static dd_status single_step(void *self, dd_trainer *tr, double *loss);
static dd_status single_loss_grad(void *self, dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss);

const dd_strategy_ops dd_strategy_single_ops = {
    .name = "single",
    .step = single_step,
    .loss_grad = single_loss_grad,
};

/* A strategy's ranges of the arena (layout_ranges): checked and kept; the storage is then
 * their concatenation, in local coordinates. */
static dd_status take_ranges(dd_trainer *tr) {
    size_t count = 0;
    const size_t *lo = NULL, *hi = NULL;
    DD_TRY(tr->st.ops->layout_ranges(tr->st.self, tr->m, tr->pa, tr->n, &count, &lo, &hi));
    size_t total = 0;
    for (size_t k = 0; k < count; k++) {
        if (lo[k] > hi[k] || hi[k] > tr->n || (k > 0 && lo[k] < hi[k - 1]))
            return dd_error(DD_ERR_ARG, "strategy %s: range %zu [%zu, %zu) of %zu floats is not ascending and disjoint",
                            tr->st.ops->name, k, lo[k], hi[k], tr->n);
        total += hi[k] - lo[k];
    }
    tr->rlo = calloc(2 * (count ? count : 1), sizeof *tr->rlo);
    if (!tr->rlo) return dd_error(DD_ERR_NOMEM, "out of memory");
    tr->rhi = tr->rlo + (count ? count : 1);
    memcpy(tr->rlo, lo, count * sizeof *lo);
    memcpy(tr->rhi, hi, count * sizeof *hi);
    tr->nrg = count;
    tr->ranged = 1;
    tr->plo = tr->glo = tr->olo = 0;
    tr->phi = tr->ghi = tr->ohi = total;
    return DD_OK;
}

void dd_trainer_take_params(dd_trainer *tr, const float *full) {
    if (!tr->mapped) {
        if (tr->phi > tr->plo) memcpy(tr->params, full + tr->plo, (tr->phi - tr->plo) * sizeof(float));
        return;
    }
    memset(tr->params, 0, (tr->phi - tr->plo) * sizeof(float));
    for (size_t k = 0; k < tr->nmap; k++)
        memcpy(tr->params + tr->map[k].dst, full + tr->map[k].src, tr->map[k].len * sizeof(float));
}

dd_status dd_trainer_take_optim(dd_trainer *tr, const void *blob, size_t bytes) {
    /* (a rank with no parameters has a one-float optimiser that never steps anything:
     * it takes the step count and element 0, like a slice) */
    if (tr->mapped && tr->ohi > tr->olo) return dd_optim_state_load_map(tr->opt, blob, bytes, tr->omap, tr->nomap);
    if (!tr->mapped && tr->olo == 0 && tr->ohi == tr->n) return dd_optim_state_load(tr->opt, blob, bytes);
    return dd_optim_state_load_slice(tr->opt, blob, bytes, tr->mapped ? 0 : tr->olo);
}

/* The map of mapped storage: the local pieces (the strategy's ranges of the trained
 * model's arena, or all of it) through the shard's runs into the whole model's arena. */
static dd_status build_map(dd_trainer *tr) {
    const dd_tp_run *runs = NULL;
    size_t nruns = 0;
    DD_TRY(dd_model_tp_runs(tr->m, &runs, &nruns));
    const size_t whole_lo = 0, whole_hi = tr->n;
    const size_t np = tr->ranged ? tr->nrg : 1;
    const size_t *plo = tr->ranged ? tr->rlo : &whole_lo, *phi = tr->ranged ? tr->rhi : &whole_hi;
    tr->map = calloc(nruns + np + 1, sizeof *tr->map);
    if (!tr->map) return dd_error(DD_ERR_NOMEM, "out of memory for the parameter map");
    size_t base = 0, n = 0;
    for (size_t k = 0; k < np; k++) {
        for (size_t r = 0; r < nruns; r++) {
            const size_t a = runs[r].shard > plo[k] ? runs[r].shard : plo[k];
            const size_t b = runs[r].shard + runs[r].len < phi[k] ? runs[r].shard + runs[r].len : phi[k];
            if (a >= b) continue;
            if (n == nruns + np) return dd_error(DD_ERR_INTERNAL, "parameter map: more pieces than runs");
            tr->map[n++] = (dd_optim_run){runs[r].full + (a - runs[r].shard), base + (a - plo[k]), b - a};
        }
        base += phi[k] - plo[k];
    }
    tr->nmap = n;
    tr->mapped = 1;
    tr->plo = tr->glo = tr->olo = 0;
    tr->phi = tr->ghi = tr->ohi = base;
    return DD_OK;
}

/* Mapped storage: the strategy's optimiser slice of it (layout_optim), and the map of
 * that slice for loading the optimiser state of a whole-model checkpoint. */
static dd_status optim_slice(dd_trainer *tr) {
    size_t lo = 0, hi = tr->phi;
    if (tr->st.ops->layout_optim) {
        DD_TRY(tr->st.ops->layout_optim(tr->st.self, tr->phi, &lo, &hi));
        if (lo > hi || hi > tr->phi)
            return dd_error(DD_ERR_ARG, "strategy %s: optimiser slice [%zu, %zu) of %zu local floats", tr->st.ops->name,
                            lo, hi, tr->phi);
    }
    tr->olo = lo;
    tr->ohi = hi;
    if (lo == 0 && hi == tr->phi) {
        tr->omap = tr->map;
        tr->nomap = tr->nmap;
        return DD_OK;
    }
    tr->omap = calloc(tr->nmap ? tr->nmap : 1, sizeof *tr->omap);
    if (!tr->omap) return dd_error(DD_ERR_NOMEM, "out of memory for the optimiser map");
    size_t n = 0;
    for (size_t k = 0; k < tr->nmap; k++) {
        const dd_optim_run *r = &tr->map[k];
        const size_t a = r->dst > lo ? r->dst : lo, b = r->dst + r->len < hi ? r->dst + r->len : hi;
        if (a < b) tr->omap[n++] = (dd_optim_run){r->src + (a - r->dst), a - lo, b - a};
    }
    tr->nomap = n;
    return DD_OK;
}

void dd_trainer_map(const dd_trainer *tr, const dd_optim_run **runs, size_t *count) {
    if (runs) *runs = tr && tr->mapped ? tr->map : NULL;
    if (count) *count = tr && tr->mapped ? tr->nmap : 0;
}

size_t dd_trainer_whole_floats(const dd_trainer *tr) { return tr ? tr->nwhole : 0; }

void dd_trainer_ranges(const dd_trainer *tr, size_t *count, const size_t **lo, const size_t **hi) {
    if (count) *count = tr ? tr->nrg : 0;
    if (lo) *lo = tr ? tr->rlo : NULL;
    if (hi) *hi = tr ? tr->rhi : NULL;
}

dd_status dd_trainer_create(const dd_train_cfg *cfg, const dd_dataset *ds, const dd_model_ref *pa,
                            const dd_strategy *st_in, dd_trainer **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_trainer_create: NULL output");
    *out = NULL;
    if (!cfg || !ds) return dd_error(DD_ERR_ARG, "dd_trainer_create: NULL configuration or data set");
    DD_TRY(dd_train_cfg_check(cfg));
    if (cfg->task == DD_TRAIN_PA && pa)
        return dd_error(DD_ERR_ARG, "PA model training takes no frozen PA model");
    if (cfg->task != DD_TRAIN_PA && (!pa || !pa->name || !pa->params))
        return dd_error(DD_ERR_ARG, "DPD training (%s) needs the frozen PA model (a PA run)", dd_train_task_name(cfg->task));
    dd_status st = DD_OK;
    dd_trainer *tr = dd_calloc(1, sizeof *tr);
    if (!tr) return DD_ERR_NOMEM;
    tr->cfg = *cfg;
    tr->ds = ds;
    if (st_in) tr->st = *st_in;
    tr->nranks = tr->st.nranks > 1 ? tr->st.nranks : 1;
    tr->rank = tr->st.rank;
    if (tr->rank < 0 || tr->rank >= tr->nranks) {
        st = dd_error(DD_ERR_ARG, "strategy: rank %d is out of range [0, %d)", tr->rank, tr->nranks);
        goto fail;
    }
    if (!tr->st.ops) {
        if (tr->nranks > 1) {
            st = dd_error(DD_ERR_ARG, "strategy: %d ranks train together but the strategy has no operations", tr->nranks);
            goto fail;
        }
        tr->st.ops = &dd_strategy_single_ops;
    }
    if (!tr->st.ops->step) {
        st = dd_error(DD_ERR_ARG, "strategy %s has no step", tr->st.ops->name ? tr->st.ops->name : "?");
        goto fail;
    }
    if (tr->nranks > 1 && !tr->st.ops->bcast) {
        st = dd_error(DD_ERR_ARG, "strategy %s: %d ranks but no broadcast for the evaluation metrics",
                      tr->st.ops->name ? tr->st.ops->name : "?", tr->nranks);
        goto fail;
    }
    tr->eval_here = tr->rank == 0;
    tr->best_metric = INFINITY;
    dd_rng_seed(&tr->rng, dd_hash64(cfg->seed, 0x747261696E6572ull));

    /* the model, its parameters and gradients (a sharding strategy's slices), the
     * optimiser */
    {
        dd_model_tp tp;
        memset(&tp, 0, sizeof tp);
        if (tr->st.ops->tp && (st = tr->st.ops->tp(tr->st.self, &tp)) != DD_OK) goto fail;
        if ((st = dd_model_create(cfg->model, &cfg->model_cfg, &tr->m)) != DD_OK) goto fail;
        tr->cfg.model_cfg = *dd_model_config(tr->m);
        tr->nwhole = dd_model_params(tr->m)->total;
        if (tp.size > 1) { /* this rank trains its shard; the whole model keeps the tables */
            tr->mwhole = tr->m;
            tr->m = NULL;
            if ((st = dd_model_create_tp(cfg->model, &cfg->model_cfg, &tp, &tr->m)) != DD_OK) goto fail;
        }
    }
    /* the frozen PA model */
    if (pa) {
        if ((st = dd_model_create(pa->name, &pa->cfg, &tr->pa)) != DD_OK) {
            dd_error_prefix(st, "frozen PA model: ");
            goto fail;
        }
        tr->pa_n = dd_model_params(tr->pa)->total;
        if (pa->n != tr->pa_n) {
            st = dd_error(DD_ERR_MISMATCH, "frozen PA model '%s': %zu parameter floats given, the model has %zu",
                          pa->name, pa->n, tr->pa_n);
            goto fail;
        }
        tr->pa_params = dd_calloc(tr->pa_n, sizeof(float));
        if (!tr->pa_params) {
            st = DD_ERR_NOMEM;
            goto fail;
        }
        memcpy(tr->pa_params, pa->params, tr->pa_n * sizeof(float));
    }

    tr->n = dd_model_params(tr->m)->total;
    tr->plo = tr->glo = tr->olo = 0;
    tr->phi = tr->ghi = tr->ohi = tr->n;
    {
        int sg = 0, spar = 0;
        if (tr->st.ops->layout_ranges) {
            if ((st = take_ranges(tr)) != DD_OK) goto fail;
            sg = spar = 1;
        } else if (tr->st.ops->layout && !tr->mwhole) {
            size_t lo = 0, hi = tr->n;
            if ((st = tr->st.ops->layout(tr->st.self, tr->m, tr->pa, tr->n, &lo, &hi, &sg, &spar)) != DD_OK) goto fail;
            if (lo > hi || hi > tr->n || (spar && !sg)) {
                st = dd_error(DD_ERR_ARG, "strategy %s: slice [%zu, %zu) of %zu floats (params %d, grads %d)",
                              tr->st.ops->name, lo, hi, tr->n, spar, sg);
                goto fail;
            }
            tr->olo = lo;
            tr->ohi = hi;
            if (sg) tr->glo = lo, tr->ghi = hi;
            if (spar) tr->plo = lo, tr->phi = hi;
        }
        if ((tr->ranged || tr->mwhole) && (st = build_map(tr)) != DD_OK) goto fail;
        if (tr->mapped && (st = optim_slice(tr)) != DD_OK) goto fail;
        spar = sg = spar || tr->mapped;
        const size_t np = tr->phi - tr->plo, ng = tr->ghi - tr->glo, no = tr->ohi - tr->olo;
        tr->params = dd_arena_calloc(DD_MEM_PARAMS, np ? np : 1, sizeof(float),
                                     spar ? "the parameter partition" : "the parameters");
        tr->grads = tr->params ? dd_arena_calloc(DD_MEM_GRADS, ng ? ng : 1, sizeof(float),
                                                 sg ? "the gradient partition" : "the gradients")
                               : NULL;
        if (!tr->params || !tr->grads) {
            st = DD_ERR_NOMEM; /* dd_arena_calloc said what and how much */
            goto fail;
        }
        if (!spar) {
            dd_model_init(tr->m, tr->params, cfg->seed);
        } else {
            /* the initial parameters are one random stream over the whole model: computed
             * whole once, in a temporary buffer, and this rank keeps its slice */
            const dd_model *whole = tr->mwhole ? tr->mwhole : tr->m;
            float *full = dd_calloc(tr->nwhole, sizeof(float));
            if (!full) {
                st = dd_error(DD_ERR_NOMEM, "out of memory initialising %zu parameters", tr->nwhole);
                goto fail;
            }
            st = dd_model_init(whole, full, cfg->seed);
            if (st == DD_OK) dd_trainer_take_params(tr, full);
            dd_free(full);
            if (st != DD_OK) goto fail;
        }
        dd_optim_cfg oc = cfg->optim;
        oc.lr = cfg->lr;
        /* an empty slice still gets a one-float optimiser (it never steps anything) */
        if ((st = dd_optim_create(cfg->opt, &oc, no ? no : 1, &tr->opt)) != DD_OK) goto fail;
    }

    /* training data */
    const size_t ntr = ds->n[DD_SPLIT_TRAIN];
    if ((st = dd_framing_init(&tr->fr, ntr, cfg->frame, cfg->stride)) != DD_OK) goto fail;
    if (tr->fr.count == 0) {
        st = dd_error(DD_ERR_ARG, "the training split has %zu samples, fewer than one frame of %zu", ntr, cfg->frame);
        goto fail;
    }
    if (cfg->task != DD_TRAIN_PA && tr->cfg.gain == 0.0) {
        /* one pass over the whole training split: with several ranks only rank 0 reads it
         * and broadcasts the gain (a rank maps but never reads frames it does not train on) */
        const int many = tr->nranks > 1;
        if (!many || tr->rank == 0)
            if ((st = dd_train_target_gain(ds->in[0], ds->out[0], ntr, cfg->gain_mode, &tr->cfg.gain)) != DD_OK) goto fail;
        if (many && (st = tr->st.ops->bcast(tr->st.self, &tr->cfg.gain, 1)) != DD_OK) goto fail;
    }
    /* the split arrays are used in place (a memory-mapped binary data set is only read
     * where a frame of this rank's slices lies); DPD targets and ILA inputs are scaled
     * while gathering (the same float product as a scaled copy of the split) */
    tr->src_scale = tr->dst_scale = 1.0f;
    if (cfg->task == DD_TRAIN_PA) {
        tr->src = ds->in[0];
        tr->dst = ds->out[0];
    } else if (cfg->task == DD_TRAIN_DLA) {
        tr->src = ds->in[0];
        tr->dst = ds->in[0];
        tr->dst_scale = (float)tr->cfg.gain;
    } else { /* ILA: post-inverse y/G -> x */
        tr->src = ds->out[0];
        tr->src_scale = (float)(1.0 / tr->cfg.gain);
        tr->dst = ds->in[0];
    }
    if ((st = dd_sampler_init(&tr->smp, tr->fr.count, cfg->seed, cfg->shuffle)) != DD_OK) goto fail;
    tr->nbatches = dd_sampler_num_batches(tr->fr.count, cfg->batch);

    /* schedule (indexed by global step) */
    tr->cfg.sched.base_lr = cfg->lr;
    if (tr->cfg.sched.t_max == 0) tr->cfg.sched.t_max = (int64_t)(tr->nbatches * (uint64_t)cfg->epochs);
    if ((st = dd_lr_sched_init(&tr->sched, &tr->cfg.sched)) != DD_OK) goto fail;
    tr->last_lr = dd_lr_sched_lr(&tr->sched, 0);

    /* step buffers: a global batch never holds more than the frames there are, so a batch
     * above the frame count trains exactly as batch = count (one batch per epoch) and
     * the buffers are sized by the data, not by the batch asked for */
    {
        const size_t bglob = cfg->batch < tr->fr.count ? cfg->batch : (size_t)tr->fr.count;
        if (cfg->batch > bglob && tr->rank == 0)
            dd_log(DD_LOG_WARN, "batch %zu is larger than the %zu training frames: each step takes all %zu frames "
                                "(as batch %zu)", cfg->batch, bglob, bglob, bglob);
        tr->bmax = (bglob + (size_t)tr->nranks - 1) / (size_t)tr->nranks;
    }
    /* the step buffers are allocated by the first dd_trainer_compute_grads (a strategy
     * that runs the stages itself, e.g. a pipeline, never needs the whole model's) */

    /* evaluation: metrics must accept the spec; padded segments of val and test (only
     * rank 0 evaluates: the metrics reach the others through the strategy's broadcast) */
    if ((st = dd_spec_check(&ds->spec, "data set spec")) != DD_OK) goto fail;
    if ((st = setup_eval(tr)) != DD_OK) goto fail;

    if (tr->st.ops->setup && (st = tr->st.ops->setup(tr->st.self, tr)) != DD_OK) goto fail;
    *out = tr;
    return DD_OK;
fail:
    dd_trainer_destroy(&tr);
    return st;
}

void dd_trainer_destroy(dd_trainer **trp) {
    if (!trp || !*trp) return;
    dd_trainer *tr = *trp;
    dd_model_destroy(&tr->m);
    dd_model_destroy(&tr->mwhole);
    if (tr->omap != tr->map) free(tr->omap);
    free(tr->map);
    free(tr->rlo);
    dd_arena_free(tr->params);
    dd_arena_free(tr->grads);
    dd_optim_destroy(&tr->opt);
    dd_model_destroy(&tr->pa);
    dd_free(tr->pa_params);
    dd_arena_free(tr->xin);
    dd_arena_free(tr->tgt);
    dd_arena_free(tr->out1);
    dd_arena_free(tr->out2);
    dd_arena_free(tr->dout);
    dd_arena_free(tr->du);
    dd_arena_free(tr->ws_m);
    dd_arena_free(tr->ws_p);
    dd_trainer_chunks_free(tr);
    free_eval(tr);
    dd_pa_destroy(&tr->true_pa);
    free(tr->hist);
    dd_free(tr);
    *trp = NULL;
}

/* ---------------------------------------------------------------- sharding */

void dd_trainer_storage(dd_trainer *tr, float **params, float **grads, size_t *lo, size_t *hi, size_t *olo,
                        size_t *ohi) {
    if (params) *params = tr->params;
    if (grads) *grads = tr->grads;
    if (lo) *lo = tr->plo;
    if (hi) *hi = tr->phi;
    if (olo) *olo = tr->olo;
    if (ohi) *ohi = tr->ohi;
}

void dd_trainer_set_param_source(dd_trainer *tr, const dd_stage_src *src, int collective) {
    if (!tr) return;
    tr->has_psrc = src != NULL;
    if (src) tr->psrc = *src;
    const int here = tr->rank == 0 || (src && collective);
    tr->collective_eval = src && collective;
    if (here != tr->eval_here) {
        free_eval(tr);
        tr->eval_here = here;
        if (setup_eval(tr) != DD_OK) {
            dd_log(DD_LOG_WARN, "rank %d: no evaluation buffers (%s)", tr->rank, dd_last_error());
            free_eval(tr);
        }
    }
}

dd_status dd_trainer_unshard_params(dd_trainer *tr) {
    if (!tr->mapped && tr->plo == 0 && tr->phi == tr->n) return DD_OK;
    float *p = dd_arena_calloc(DD_MEM_PARAMS, tr->nwhole, sizeof(float), "the whole parameter arena (report)");
    if (!p) return DD_ERR_NOMEM; /* dd_arena_calloc said what and how much */
    if (tr->mapped) {
        for (size_t k = 0; k < tr->nmap; k++)
            memcpy(p + tr->map[k].src, tr->params + tr->map[k].dst, tr->map[k].len * sizeof(float));
    } else if (tr->phi > tr->plo) {
        memcpy(p + tr->plo, tr->params, (tr->phi - tr->plo) * sizeof(float));
    }
    dd_arena_free(tr->params);
    tr->params = p;
    if (tr->mwhole) { /* from here on the whole model (a report forward on rank 0 alone) */
        dd_model_destroy(&tr->m);
        tr->m = tr->mwhole;
        tr->mwhole = NULL;
        tr->n = tr->nwhole;
        free_eval_ws(tr); /* the splits (and the true PA's) stay: only the workspaces change */
        if (tr->eval_here) {
            dd_status st = setup_eval_ws(tr);
            if (st != DD_OK) return st;
        }
    }
    tr->mapped = tr->ranged = 0;
    tr->nrg = tr->nmap = 0;
    tr->plo = 0;
    tr->phi = tr->n;
    dd_trainer_set_param_source(tr, NULL, 0);
    return DD_OK;
}

dd_optim *dd_trainer_optim(dd_trainer *tr) { return tr ? tr->opt : NULL; }

const dd_strategy *dd_trainer_strategy(const dd_trainer *tr) { return tr ? &tr->st : NULL; }

/* Where forwards take the parameters: the source when sharded, else the arena. */
static dd_stage_src param_src(const dd_trainer *tr) {
    if (tr->has_psrc) return tr->psrc;
    dd_stage_src s = {tr->params, NULL, NULL, NULL, NULL, NULL};
    return s;
}

/* ---------------------------------------------------------------- training step */

void dd_trainer_batch_slice(const dd_trainer *tr, uint64_t batch, int w, int nw, uint64_t *lo, uint64_t *hi,
                            uint64_t *global) {
    dd_batch_slice(tr->fr.count, tr->cfg.batch, batch, w, nw, lo, hi, global);
}

double dd_trainer_loss_scale(const dd_trainer *tr, uint64_t global) {
    return 1.0 / ((double)global * (double)tr->cfg.frame * 2.0);
}

/* An empty slice, or one whose batch chunks ran without callbacks: every stage callback
 * of a forward and a backward, in order. */
static dd_status walk_stages(dd_trainer *tr, const dd_stage_src *src) {
    const size_t S = dd_model_num_stages(tr->m);
    for (size_t s = 0; s < S; s++) {
        const float *p = NULL;
        if (src->stage_params) DD_TRY(src->stage_params(src->user, s, 0, &p));
        if (src->stage_done) DD_TRY(src->stage_done(src->user, s, 0));
    }
    for (size_t s = S; s-- > 0;) {
        const float *p = NULL;
        float *g = NULL;
        if (src->stage_params) DD_TRY(src->stage_params(src->user, s, 1, &p));
        if (src->stage_grads) DD_TRY(src->stage_grads(src->user, s, &g));
        if (src->stage_done) DD_TRY(src->stage_done(src->user, s, 1));
    }
    return DD_OK;
}

/* The step buffers of dd_trainer_compute_grads for this rank's largest slice of a
 * batch, on first use; with `whole`, also the whole model's workspace (a slice run
 * without batch chunks). */
static dd_status step_buffers(dd_trainer *tr, int whole) {
    if (tr->bmax == 0) return DD_OK;
    const size_t fl = tr->bmax * tr->cfg.frame * 2;
    const char *what = "the batch buffers";
    if (!tr->xin) tr->xin = dd_arena_calloc(DD_MEM_ACTIVATIONS, fl, sizeof(float), what);
    if (tr->xin && !tr->tgt) tr->tgt = dd_arena_calloc(DD_MEM_ACTIVATIONS, fl, sizeof(float), what);
    if (tr->tgt && !tr->out1) tr->out1 = dd_arena_calloc(DD_MEM_ACTIVATIONS, fl, sizeof(float), what);
    if (tr->out1 && !tr->dout) tr->dout = dd_arena_calloc(DD_MEM_ACTIVATIONS, fl, sizeof(float), what);
    if (!tr->dout) return DD_ERR_NOMEM; /* dd_arena_calloc said what and how much */
    if (tr->cfg.task == DD_TRAIN_DLA) {
        if (!tr->out2) tr->out2 = dd_arena_calloc(DD_MEM_ACTIVATIONS, fl, sizeof(float), what);
        if (tr->out2 && !tr->du) tr->du = dd_arena_calloc(DD_MEM_ACTIVATIONS, fl, sizeof(float), what);
        if (!tr->du) return DD_ERR_NOMEM;
        if (whole && !tr->ws_p)
            tr->ws_p = dd_arena_calloc(DD_MEM_ACTIVATIONS,
                                       dd_model_workspace_size(tr->pa, (int)tr->bmax, (int)tr->cfg.frame) + 16,
                                       sizeof(float), "the PA model's activations");
        if (whole && !tr->ws_p) return DD_ERR_NOMEM;
    }
    if (whole && !tr->ws_m)
        tr->ws_m = dd_arena_calloc(DD_MEM_ACTIVATIONS,
                                   dd_model_workspace_size(tr->m, (int)tr->bmax, (int)tr->cfg.frame) + 16,
                                   sizeof(float), "the model's activations");
    return !whole || tr->ws_m ? DD_OK : DD_ERR_NOMEM;
}

dd_status dd_trainer_gather(dd_trainer *tr, uint64_t epoch, uint64_t lo, uint64_t hi, float *x, float *tgt) {
    if (!tr || (hi > lo && (!x || !tgt))) return dd_error(DD_ERR_ARG, "dd_trainer_gather: NULL argument");
    if (lo > hi || hi > tr->fr.count)
        return dd_error(DD_ERR_ARG, "dd_trainer_gather: frames [%llu, %llu) of %llu", (unsigned long long)lo,
                        (unsigned long long)hi, (unsigned long long)tr->fr.count);
    uint64_t idx[64];
    for (uint64_t a = lo; a < hi; a += 64) { /* in chunks: no buffer sized by the caller's range */
        const size_t k = (size_t)(hi - a < 64 ? hi - a : 64), off = (size_t)(a - lo) * tr->cfg.frame * 2;
        for (size_t j = 0; j < k; j++) idx[j] = dd_sampler_index(&tr->smp, epoch, a + j);
        dd_framing_gather(&tr->fr, tr->src, idx, k, tr->src_scale, x + off);
        dd_framing_gather(&tr->fr, tr->dst, idx, k, tr->dst_scale, tgt + off);
    }
    return DD_OK;
}

double dd_trainer_mse_grad(const dd_trainer *tr, const float *pred, const float *tgt, size_t nv, uint64_t global,
                           float *dpred) {
    double sum = 0.0;
    if (tr->cfg.loss == 1) { /* L1: mean |pred - tgt|, dL/dpred = sign(e) / N (torch: sign(0) = 0) */
        const float finv = (float)dd_trainer_loss_scale(tr, global);
        for (size_t k = 0; k < nv; k++) {
            float e = pred[k] - tgt[k];
            sum += fabs((double)e);
            dpred[k] = e > 0 ? finv : e < 0 ? -finv : 0.0f;
        }
        return sum;
    }
    const float finv2 = (float)(2.0 * dd_trainer_loss_scale(tr, global));
    for (size_t k = 0; k < nv; k++) {
        float e = pred[k] - tgt[k];
        sum += (double)e * (double)e;
        dpred[k] = e * finv2; /* dL/dpred of mean((pred - tgt)^2) over the global batch */
    }
    return sum;
}

dd_status dd_trainer_compute_grads(dd_trainer *tr, uint64_t epoch, uint64_t lo, uint64_t hi, uint64_t global,
                                   const dd_stage_src *src, double *sse) {
    if (!tr || !sse) return dd_error(DD_ERR_ARG, "dd_trainer_compute_grads: NULL argument");
    *sse = 0.0;
    if (lo > hi || hi - lo > tr->bmax || hi > tr->fr.count || global == 0)
        return dd_error(DD_ERR_ARG, "dd_trainer_compute_grads: frames [%llu, %llu) of %llu (at most %zu, global %llu)",
                        (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)tr->fr.count, tr->bmax,
                        (unsigned long long)global);
    dd_stage_src own;
    if (!src) {
        if (tr->mapped || tr->glo != 0 || tr->ghi != tr->n || tr->plo != 0 || tr->phi != tr->n)
            return dd_error(DD_ERR_ARG, "dd_trainer_compute_grads: sharded storage needs a stage source");
        own = (dd_stage_src){tr->params, tr->grads, NULL, NULL, NULL, NULL};
        memset(tr->grads, 0, tr->n * sizeof(float));
        src = &own;
    }
    const size_t F = tr->cfg.frame, bl = (size_t)(hi - lo);
    if (bl == 0) return walk_stages(tr, src);
    size_t cf, nc = dd_trainer_chunk_plan(tr, bl, &cf);
    if (nc > 1 && src->params && src->grads && !src->stage_params && !src->stage_grads &&
        (!src->stage_done || tr->n <= DD_TRAIN_CHUNK_OVERLAP_FLOATS)) {
        /* batch chunks (batch_chunks.c), then the stage callbacks in their order */
        DD_TRY(step_buffers(tr, 0));
        DD_TRY(dd_trainer_chunk_grads(tr, epoch, lo, bl, nc, cf, global, src, sse));
        return walk_stages(tr, src);
    }
    DD_TRY(step_buffers(tr, 1));
    const size_t S = dd_model_num_stages(tr->m);
    DD_TRY(dd_trainer_gather(tr, epoch, lo, hi, tr->xin, tr->tgt)); /* (bl, F, 2) each */
    DD_TRY(dd_model_range_forward(tr->m, 0, S, src, tr->xin, tr->xin, tr->out1, (int)bl, (int)F, tr->ws_m));
    const float *pred = tr->out1;
    if (tr->cfg.task == DD_TRAIN_DLA) {
        DD_TRY(dd_model_forward(tr->pa, tr->pa_params, tr->out1, tr->out2, (int)bl, (int)F, tr->ws_p));
        pred = tr->out2;
    }
    const size_t nv = bl * F * 2;
    const double sum = dd_trainer_mse_grad(tr, pred, tr->tgt, nv, global, tr->dout);
    const float *dy = tr->dout;
    if (tr->cfg.task == DD_TRAIN_DLA) {
        memset(tr->du, 0, nv * sizeof(float));
        DD_TRY(dd_model_backward(tr->pa, tr->pa_params, NULL, tr->out1, tr->dout, tr->du, (int)bl, (int)F, tr->ws_p));
        dy = tr->du;
    }
    DD_TRY(dd_model_range_backward(tr->m, 0, S, src, tr->xin, tr->xin, dy, NULL, NULL, (int)bl, (int)F, tr->ws_m));
    *sse = sum;
    return DD_OK;
}

dd_status dd_trainer_apply_update(dd_trainer *tr, double loss, double grad_sumsq) {
    if (!tr) return dd_error(DD_ERR_ARG, "dd_trainer_apply_update: NULL trainer");
    if (tr->batch >= tr->nbatches)
        return dd_error(DD_ERR_ARG, "epoch %d is complete: end it before the next step", tr->epoch + 1);
    if (!isfinite(loss))
        return dd_error(DD_ERR_NUMERIC,
                        "training diverged: the loss is %g at epoch %d, batch %llu (step %llu); try a lower "
                        "learning rate",
                        loss, tr->epoch + 1, (unsigned long long)tr->batch + 1, (unsigned long long)tr->step + 1);
    /* the gradient of the optimiser's range, in the gradient storage */
    if (tr->olo < tr->glo || tr->ohi > tr->ghi || tr->olo < tr->plo || tr->ohi > tr->phi)
        return dd_error(DD_ERR_INTERNAL, "the optimiser range [%zu, %zu) is not in the storage kept", tr->olo, tr->ohi);
    const size_t m = tr->ohi - tr->olo;
    float *g = tr->grads + (tr->olo - tr->glo), *w = tr->params + (tr->olo - tr->plo);
    double gnorm;
    if (isnan(grad_sumsq)) {
        if (tr->cfg.clip > 0) {
            dd_status st = dd_clip_grad_norm(g, m, tr->cfg.clip, &gnorm);
            if (st == DD_ERR_RANGE) gnorm = NAN;
            else DD_TRY(st);
        } else {
            gnorm = sqrt(dd_grad_sumsq(g, m));
        }
    } else {
        gnorm = sqrt(grad_sumsq);
        if (tr->cfg.clip > 0 && isfinite(gnorm)) dd_grad_scale(g, m, dd_clip_coef(gnorm, tr->cfg.clip));
    }
    if (!isfinite(gnorm))
        return dd_error(DD_ERR_NUMERIC, "training diverged: the gradient is not finite at epoch %d, batch %llu",
                        tr->epoch + 1, (unsigned long long)tr->batch + 1);
    if (gnorm > tr->ep_gnorm_max) tr->ep_gnorm_max = gnorm;
    double lr = dd_trainer_lr(tr);
    if (m) DD_TRY(dd_optim_step(tr->opt, w, g, lr));
    else dd_optim_step_end(tr->opt);
    /* a finite loss and gradient can still step the parameters out of range (a huge
     * learning rate, a compressor's burst): say so here rather than let the next
     * evaluation fail on a NaN spectrum */
    for (size_t i = 0; i < m; i++)
        if (!isfinite(w[i]))
            return dd_error(DD_ERR_NUMERIC,
                            "training diverged: parameter %zu is %g after the step at epoch %d, batch %llu (step %llu); "
                            "try a lower learning rate",
                            tr->olo + i, (double)w[i], tr->epoch + 1, (unsigned long long)tr->batch + 1,
                            (unsigned long long)tr->step + 1);
    tr->last_lr = lr;
    tr->step++;
    tr->batch++;
    tr->ep_loss_sum += loss;
    return DD_OK;
}

dd_status dd_trainer_advance(dd_trainer *tr, double loss, double grad_norm) {
    if (!tr) return dd_error(DD_ERR_ARG, "dd_trainer_advance: NULL trainer");
    if (tr->batch >= tr->nbatches)
        return dd_error(DD_ERR_ARG, "epoch %d is complete: end it before the next step", tr->epoch + 1);
    if (!isfinite(loss))
        return dd_error(DD_ERR_NUMERIC, "training diverged: the loss is %g at epoch %d, batch %llu (step %llu)", loss,
                        tr->epoch + 1, (unsigned long long)tr->batch + 1, (unsigned long long)tr->step + 1);
    tr->last_lr = dd_trainer_lr(tr);
    tr->step++;
    tr->batch++;
    tr->ep_loss_sum += loss;
    if (grad_norm > tr->ep_gnorm_max) tr->ep_gnorm_max = grad_norm; /* NAN: not known */
    return DD_OK;
}

/* The single-process strategy: every frame of the batch, one update. */
static dd_status single_loss_grad(void *self, dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss) {
    (void)self;
    uint64_t lo, hi, bg;
    dd_trainer_batch_slice(tr, batch, 0, 1, &lo, &hi, &bg);
    double sse = 0.0;
    DD_TRY(dd_trainer_compute_grads(tr, epoch, lo, hi, bg, NULL, &sse));
    *loss = sse * dd_trainer_loss_scale(tr, bg);
    return DD_OK;
}

static dd_status single_step(void *self, dd_trainer *tr, double *loss) {
    DD_TRY(single_loss_grad(self, tr, (uint64_t)tr->epoch, tr->batch, loss));
    return dd_trainer_apply_update(tr, *loss, NAN);
}

dd_status dd_trainer_loss_grad(dd_trainer *tr, uint64_t epoch, uint64_t batch, double *loss) {
    if (!tr || !loss) return dd_error(DD_ERR_ARG, "dd_trainer_loss_grad: NULL argument");
    if (batch >= tr->nbatches)
        return dd_error(DD_ERR_ARG, "batch %llu is out of range [0, %llu)", (unsigned long long)batch,
                        (unsigned long long)tr->nbatches);
    if (!tr->st.ops->loss_grad)
        return dd_error(DD_ERR_UNSUPPORTED, "strategy %s does not compute a gradient without a step", tr->st.ops->name);
    return tr->st.ops->loss_grad(tr->st.self, tr, epoch, batch, loss);
}

int dd_trainer_epoch_done(const dd_trainer *tr) { return tr->batch >= tr->nbatches; }

dd_status dd_trainer_step(dd_trainer *tr, double *loss_out) {
    if (!tr) return dd_error(DD_ERR_ARG, "dd_trainer_step: NULL trainer");
    if (tr->epoch >= tr->cfg.epochs) return dd_error(DD_ERR_ARG, "all %d epochs are done", tr->cfg.epochs);
    if (tr->batch >= tr->nbatches)
        return dd_error(DD_ERR_ARG, "epoch %d is complete: end it before the next step", tr->epoch + 1);
    const uint64_t step0 = tr->step;
    double t0 = dd_now(), loss = 0.0;
    DD_TRY(tr->st.ops->step(tr->st.self, tr, &loss));
    if (tr->step != step0 + 1)
        return dd_error(DD_ERR_INTERNAL, "strategy %s: its step made %llu updates, not one", tr->st.ops->name,
                        (unsigned long long)(tr->step - step0));
    tr->ep_time += dd_now() - t0;
    if (loss_out) *loss_out = loss;
    return DD_OK;
}

/* ---------------------------------------------------------------- evaluation */

static dd_status compute_metrics(const dd_trainer *tr, const dd_cf32 *ref, const dd_cf32 *pred, size_t n,
                                 dd_eval_metrics *m) {
    double se = 0.0;
    for (size_t i = 0; i < n; i++) {
        double er = (double)crealf(pred[i]) - crealf(ref[i]), ei = (double)cimagf(pred[i]) - cimagf(ref[i]);
        se += er * er + ei * ei;
    }
    m->loss = se / (2.0 * (double)n);
    dd_metric_set ms;
    DD_TRY(dd_metrics_compute(ref, pred, n, &tr->ds->spec, DD_ACLR_OPENDPD, 0, &ms));
    m->nmse_db = ms.nmse_db;
    m->aclr = ms.aclr;
    m->evm_db = ms.evm_db;
    return DD_OK;
}

/* One evaluation forward of k whole segments (chunked when setup_eval_ws chose so). */
static dd_status eval_forward(const dd_trainer *tr, const dd_model *mod, const dd_stage_src *src, const float *x,
                              float *y, size_t k, size_t T, float *ws) {
    if (tr->echunk) return dd_model_infer_chunked(mod, src, x, y, (int)k, (int)T, (int)tr->echunk, ws);
    return dd_model_infer(mod, src, x, y, (int)k, (int)T, ws);
}

/* The split's padded segments through m1 (then m2 when not NULL, through tr->eout1) into
 * ev->pred, each segment from zero state, in the mode setup_eval_ws chose: whole segments
 * read in place (the padded last one in a call of its own: a segment's output does not
 * depend on the others of its call), in chunks of steps, or streamed one at a time. */
static dd_status eval_segments(dd_trainer *tr, dd_split s, dd_eval_split *ev, const dd_model *m1,
                               const dd_stage_src *s1, float *w1, const dd_model *m2, const dd_stage_src *s2, float *w2) {
    const size_t T = tr->ds->spec.nperseg;
    const dd_cf32 *din = tr->ds->in[s];
    size_t k = 1;
    for (size_t c = 0; c < ev->nseg; c += k) {
        k = tr->estream || c >= ev->nfull ? 1 : (ev->nfull - c < tr->eb ? ev->nfull - c : tr->eb);
        const dd_cf32 *in = c < ev->nfull ? din + c * T : ev->tail; /* (k, T) */
        dd_cf32 *out = ev->pred + c * T, *u = m2 ? (dd_cf32 *)(void *)tr->eout1 : out;
        if (tr->estream) {
            DD_TRY(dd_model_run_stream_src(m1, s1, in, u, T));
            if (m2) DD_TRY(dd_model_run_stream_src(m2, s2, u, out, T));
        } else {
            DD_TRY(eval_forward(tr, m1, s1, (const float *)in, (float *)u, k, T, w1));
            if (m2) DD_TRY(eval_forward(tr, m2, s2, (const float *)u, (float *)out, k, T, w2));
        }
    }
    return DD_OK;
}

dd_status dd_trainer_evaluate(dd_trainer *tr, dd_split s, dd_eval_metrics *m, const dd_cf32 **pred, size_t *npred) {
    if (!tr || !m) return dd_error(DD_ERR_ARG, "dd_trainer_evaluate: NULL argument");
    if (s != DD_SPLIT_VAL && s != DD_SPLIT_TEST) return dd_error(DD_ERR_ARG, "evaluation is on the val or test split");
    dd_eval_split *ev = &tr->ev[s == DD_SPLIT_VAL ? 0 : 1];
    metrics_nan(m);
    if (ev->n == 0) return dd_error(DD_ERR_ARG, "the %s split is empty or not evaluated", dd_split_name(s));
    const dd_stage_src ps = param_src(tr), pas = {tr->pa_params, NULL, NULL, NULL, NULL, NULL};
    if (tr->pa)
        DD_TRY(eval_segments(tr, s, ev, tr->m, &ps, tr->ews_m, tr->pa, &pas, tr->ews_p));
    else
        DD_TRY(eval_segments(tr, s, ev, tr->m, &ps, tr->ews_m, NULL, NULL, NULL));
    if (tr->rank != 0) return DD_OK; /* collective evaluation: rank 0 computes the metrics */
    dd_status st = compute_metrics(tr, ev->ref, ev->pred, ev->npad, m);
    if (st != DD_OK) return dd_error_prefix(st, "%s split: ", dd_split_name(s));
    if (pred) *pred = ev->pred;
    if (npred) *npred = ev->npad;
    return DD_OK;
}

/* The PA model alone on the split's padded input segments (zero state per segment, as
 * dd_trainer_evaluate runs PA_model(DPD(x))) into ev->pred. */
static dd_status pa_only_forward(dd_trainer *tr, dd_eval_split *ev) {
    const dd_stage_src pas = {tr->pa_params, NULL, NULL, NULL, NULL, NULL};
    return eval_segments(tr, ev == &tr->ev[0] ? DD_SPLIT_VAL : DD_SPLIT_TEST, ev, tr->pa, &pas, tr->ews_p, NULL, NULL, NULL);
}

dd_status dd_trainer_no_dpd_baseline(dd_trainer *tr, dd_split s, dd_eval_metrics *m) {
    if (!tr || !m) return dd_error(DD_ERR_ARG, "dd_trainer_no_dpd_baseline: NULL argument");
    metrics_nan(m);
    if (!tr->pa) return dd_error(DD_ERR_ARG, "a PA-model run has no no-DPD baseline");
    if (s != DD_SPLIT_VAL && s != DD_SPLIT_TEST) return dd_error(DD_ERR_ARG, "evaluation is on the val or test split");
    dd_eval_split *ev = &tr->ev[s == DD_SPLIT_VAL ? 0 : 1];
    if (ev->n == 0 || !tr->eval_here || tr->rank != 0)
        return dd_error(DD_ERR_ARG, "the %s split is empty or not evaluated", dd_split_name(s));
    if (!tr->nodpd_ok) {
        for (int k = 0; k < 2; k++) {
            dd_eval_split *e = &tr->ev[k];
            metrics_nan(&e->nodpd);
            if (e->n == 0) continue;
            DD_TRY(pa_only_forward(tr, e));
            dd_status st = compute_metrics(tr, e->ref, e->pred, e->npad, &e->nodpd);
            if (st != DD_OK) return dd_error_prefix(st, "%s split without DPD: ", k == 0 ? "val" : "test");
        }
        tr->nodpd_ok = 1;
    }
    *m = ev->nodpd;
    return DD_OK;
}

dd_status dd_trainer_set_true_pa(dd_trainer *tr, const dd_pa *pa) {
    if (!tr || !pa) return dd_error(DD_ERR_ARG, "dd_trainer_set_true_pa: NULL argument");
    if (tr->cfg.task == DD_TRAIN_PA) return dd_error(DD_ERR_ARG, "a true PA is only used to measure DPDs");
    dd_pa_destroy(&tr->true_pa);
    DD_TRY(dd_pa_clone(pa, 0, &tr->true_pa));
    dd_status st = DD_OK;
    for (int k = 0; k < 2 && st == DD_OK; k++) {
        dd_eval_split *ev = &tr->ev[k];
        if (ev->n == 0) continue;
        dd_split s = k == 0 ? DD_SPLIT_VAL : DD_SPLIT_TEST;
        dd_free(ev->ty);
        ev->ty = dd_calloc(ev->n, sizeof(dd_cf32));
        if (!ev->ty) {
            st = DD_ERR_NOMEM;
            break;
        }
        /* baseline: the true PA without DPD, against G x (a DPD's ev->ref: its first n
         * samples) */
        dd_pa_reset(tr->true_pa);
        if ((st = dd_pa_apply(tr->true_pa, tr->ds->in[s], ev->ty, ev->n)) != DD_OK) break;
        if ((st = compute_metrics(tr, ev->ref, ev->ty, ev->n, &ev->base)) != DD_OK) break;
    }
    if (st != DD_OK) dd_pa_destroy(&tr->true_pa);
    return st;
}

dd_status dd_trainer_true_baseline(const dd_trainer *tr, dd_split s, dd_eval_metrics *m) {
    if (!tr || !m || !tr->true_pa) return dd_error(DD_ERR_ARG, "no true PA is set");
    if (s != DD_SPLIT_VAL && s != DD_SPLIT_TEST) return dd_error(DD_ERR_ARG, "evaluation is on the val or test split");
    *m = tr->ev[s == DD_SPLIT_VAL ? 0 : 1].base;
    return DD_OK;
}

dd_status dd_trainer_evaluate_true(dd_trainer *tr, dd_split s, dd_eval_metrics *m, const dd_cf32 **pred,
                                   size_t *npred) {
    if (!tr || !m) return dd_error(DD_ERR_ARG, "dd_trainer_evaluate_true: NULL argument");
    metrics_nan(m);
    if (!tr->true_pa) return dd_error(DD_ERR_ARG, "no true PA is set");
    if (s != DD_SPLIT_VAL && s != DD_SPLIT_TEST) return dd_error(DD_ERR_ARG, "evaluation is on the val or test split");
    dd_eval_split *ev = &tr->ev[s == DD_SPLIT_VAL ? 0 : 1];
    if (ev->n == 0) return dd_error(DD_ERR_ARG, "the %s split is empty or not evaluated", dd_split_name(s));
    const dd_stage_src ps = param_src(tr);
    dd_cf32 *tu = ev->pred; /* the DPD's output, in the buffer of the last prediction (npad >= n) */
    DD_TRY(dd_model_run_stream_src(tr->m, &ps, tr->ds->in[s], tu, ev->n));
    if (tr->rank != 0) return DD_OK; /* collective evaluation: rank 0 computes the metrics */
    dd_pa_reset(tr->true_pa);
    DD_TRY(dd_pa_apply(tr->true_pa, tu, ev->ty, ev->n));
    dd_status st = compute_metrics(tr, ev->ref, ev->ty, ev->n, m);
    if (st != DD_OK) return dd_error_prefix(st, "true PA, %s split: ", dd_split_name(s));
    if (pred) *pred = ev->ty;
    if (npred) *npred = ev->n;
    return DD_OK;
}

/* Metrics of a record as a flat array, for the strategy's broadcast. */
#define EVAL_VALS 36
static void pack_eval(const dd_epoch_record *r, double *v) {
    const dd_eval_metrics *ms[6] = {&r->val, &r->test, &r->true_val, &r->true_test, &r->no_dpd_val, &r->no_dpd_test};
    for (int k = 0; k < 6; k++) {
        v[6 * k + 0] = ms[k]->loss;
        v[6 * k + 1] = ms[k]->nmse_db;
        v[6 * k + 2] = ms[k]->aclr.left_db;
        v[6 * k + 3] = ms[k]->aclr.right_db;
        v[6 * k + 4] = ms[k]->aclr.avg_db;
        v[6 * k + 5] = ms[k]->evm_db;
    }
}
static void unpack_eval(const double *v, dd_epoch_record *r) {
    dd_eval_metrics *ms[6] = {&r->val, &r->test, &r->true_val, &r->true_test, &r->no_dpd_val, &r->no_dpd_test};
    for (int k = 0; k < 6; k++) {
        ms[k]->loss = v[6 * k + 0];
        ms[k]->nmse_db = v[6 * k + 1];
        ms[k]->aclr.left_db = v[6 * k + 2];
        ms[k]->aclr.right_db = v[6 * k + 3];
        ms[k]->aclr.avg_db = v[6 * k + 4];
        ms[k]->evm_db = v[6 * k + 5];
    }
}

static dd_status evaluate_all(dd_trainer *tr, dd_epoch_record *r) {
    metrics_nan(&r->val);
    metrics_nan(&r->test);
    metrics_nan(&r->true_val);
    metrics_nan(&r->true_test);
    metrics_nan(&r->no_dpd_val);
    metrics_nan(&r->no_dpd_test);
    r->has_true = tr->true_pa != NULL;
    r->has_no_dpd = tr->pa != NULL;
    if (tr->pa && tr->eval_here && tr->rank == 0) {
        if (tr->ev[0].n) DD_TRY(dd_trainer_no_dpd_baseline(tr, DD_SPLIT_VAL, &r->no_dpd_val));
        if (tr->ev[1].n) DD_TRY(dd_trainer_no_dpd_baseline(tr, DD_SPLIT_TEST, &r->no_dpd_test));
    }
    if (tr->eval_here) {
        if (tr->ev[0].n) DD_TRY(dd_trainer_evaluate(tr, DD_SPLIT_VAL, &r->val, NULL, NULL));
        if (tr->ev[1].n) DD_TRY(dd_trainer_evaluate(tr, DD_SPLIT_TEST, &r->test, NULL, NULL));
        if (tr->true_pa) {
            if (tr->ev[0].n) DD_TRY(dd_trainer_evaluate_true(tr, DD_SPLIT_VAL, &r->true_val, NULL, NULL));
            if (tr->ev[1].n) DD_TRY(dd_trainer_evaluate_true(tr, DD_SPLIT_TEST, &r->true_test, NULL, NULL));
        }
    }
    if (tr->nranks > 1) {
        double v[EVAL_VALS];
        pack_eval(r, v);
        DD_TRY(tr->st.ops->bcast(tr->st.self, v, EVAL_VALS));
        unpack_eval(v, r);
    }
    return DD_OK;
}

static dd_status hist_append(dd_trainer *tr, const dd_epoch_record *r) {
    if (tr->nhist == tr->caphist) {
        size_t cap = tr->caphist ? 2 * tr->caphist : 32;
        dd_epoch_record *h = realloc(tr->hist, cap * sizeof *h);
        if (!h) return dd_error(DD_ERR_NOMEM, "out of memory for the epoch history");
        tr->hist = h;
        tr->caphist = cap;
    }
    tr->hist[tr->nhist++] = *r;
    return DD_OK;
}

static void rescale_apply(dd_trainer *tr);

dd_status dd_trainer_end_epoch(dd_trainer *tr, dd_epoch_record *rec) {
    if (!tr) return dd_error(DD_ERR_ARG, "dd_trainer_end_epoch: NULL trainer");
    if (tr->epoch >= tr->cfg.epochs) return dd_error(DD_ERR_ARG, "all %d epochs are done", tr->cfg.epochs);
    if (tr->batch < tr->nbatches)
        return dd_error(DD_ERR_ARG, "epoch %d is not complete: %llu of %llu batches done", tr->epoch + 1,
                        (unsigned long long)tr->batch, (unsigned long long)tr->nbatches);
    dd_epoch_record r;
    memset(&r, 0, sizeof r);
    r.epoch = tr->epoch + 1;
    r.step = tr->step;
    r.time_s = tr->ep_time;
    r.lr = tr->last_lr;
    r.train_loss = tr->ep_loss_sum / (double)tr->nbatches;
    r.grad_norm_max = tr->ep_gnorm_max;
    r.comm_bytes_per_step = r.compression_ratio = r.compress_time_s = NAN;
    r.world_size = tr->nranks;
    r.restart = 0;
    r.ckpt_stall_s = r.ckpt_write_s = NAN;
    if (tr->st.ops->epoch_stats) {
        double cv[3] = {NAN, NAN, NAN};
        DD_TRY(tr->st.ops->epoch_stats(tr->st.self, cv));
        r.comm_bytes_per_step = cv[0];
        r.compression_ratio = cv[1];
        r.compress_time_s = cv[2];
    }
    if (tr->st.ops->epoch_json) DD_TRY(tr->st.ops->epoch_json(tr->st.self, r.extra_json, sizeof r.extra_json));
    double t0 = dd_now();
    DD_TRY(evaluate_all(tr, &r));
    r.eval_time_s = dd_now() - t0;
    double metric = dd_rec_select_metric(&tr->cfg, &r);
    if (!isnan(metric) && (tr->best_epoch == 0 || metric < tr->best_metric)) {
        tr->best_metric = metric;
        tr->best_epoch = r.epoch;
        r.best = 1;
    }
    dd_lr_sched_plateau(&tr->sched, metric, NULL);
    DD_TRY(hist_append(tr, &r));
    tr->epoch++;
    tr->batch = 0;
    if (tr->rs_batch) rescale_apply(tr);
    tr->ep_loss_sum = 0.0;
    tr->ep_time = 0.0;
    tr->ep_gnorm_max = 0.0;
    if (rec) *rec = r;
    return DD_OK;
}

/* ---------------------------------------------------------------- accessors */

const dd_train_cfg *dd_trainer_cfg(const dd_trainer *tr) { return &tr->cfg; }
const dd_model *dd_trainer_model(const dd_trainer *tr) { return tr->m; }
float *dd_trainer_params(dd_trainer *tr) { return tr->params; }
float *dd_trainer_grads(dd_trainer *tr) { return tr->grads; }
size_t dd_trainer_num_floats(const dd_trainer *tr) { return tr->n; }
int dd_trainer_epoch(const dd_trainer *tr) { return tr->epoch; }
uint64_t dd_trainer_batch(const dd_trainer *tr) { return tr->batch; }
uint64_t dd_trainer_num_batches(const dd_trainer *tr) { return tr->nbatches; }
uint64_t dd_trainer_num_frames(const dd_trainer *tr) { return tr->fr.count; }
uint64_t dd_trainer_steps(const dd_trainer *tr) { return tr->step; }
/* The warm-up factor of the last rescale at step t (1 outside it). */
static double rescale_ramp(const dd_trainer *tr, int64_t t) {
    if (tr->rs_len <= 0 || t >= tr->rs_start + tr->rs_len || t < tr->rs_start) return 1.0;
    return tr->rs_from + (1.0 - tr->rs_from) * (double)(t - tr->rs_start) / (double)tr->rs_len;
}

double dd_trainer_lr(const dd_trainer *tr) {
    return dd_lr_sched_lr(&tr->sched, (int64_t)tr->step) * rescale_ramp(tr, (int64_t)tr->step);
}

/* Applies the pending rescale (at an epoch boundary). */
static void rescale_apply(dd_trainer *tr) {
    const uint64_t nb = tr->rs_batch;
    tr->rs_batch = 0;
    if (nb == tr->cfg.batch) return;
    const double k = (double)nb / (double)tr->cfg.batch;
    tr->cfg.batch = nb;
    tr->nbatches = dd_sampler_num_batches(tr->fr.count, nb);
    tr->cfg.lr *= k;
    tr->cfg.sched.base_lr *= k;
    tr->cfg.sched.min_lr *= k;
    tr->cfg.sched.eta_min *= k;
    tr->sched.cfg.base_lr *= k;
    tr->sched.cfg.min_lr *= k;
    tr->sched.cfg.eta_min *= k;
    tr->sched.plateau_lr *= k;
    tr->rs_start = (int64_t)tr->step;
    tr->rs_len = tr->rs_warmup;
    tr->rs_from = 1.0 / k;
    tr->rs_applied = 1;
    /* a larger slice per rank: the step buffers are allocated again on first use */
    const size_t bglob = nb < tr->fr.count ? (size_t)nb : (size_t)tr->fr.count;
    const size_t bmax = (bglob + (size_t)tr->nranks - 1) / (size_t)tr->nranks;
    if (bmax > tr->bmax) {
        float **bufs[] = {&tr->xin, &tr->tgt, &tr->out1, &tr->dout, &tr->out2, &tr->du, &tr->ws_p, &tr->ws_m};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
            dd_arena_free(*bufs[i]);
            *bufs[i] = NULL;
        }
        dd_trainer_chunks_free(tr);
        tr->bmax = bmax;
    }
    if (tr->rank == 0)
        dd_log(DD_LOG_INFO, "rescaled at step %llu: global batch %llu, learning rate x%.4g (warm-up %lld steps)",
               (unsigned long long)tr->step, (unsigned long long)nb, k, (long long)tr->rs_len);
}

dd_status dd_trainer_rescale(dd_trainer *tr, uint64_t batch, int64_t warmup) {
    if (!tr) return dd_error(DD_ERR_ARG, "dd_trainer_rescale: NULL trainer");
    if (batch < 1 || batch > ((uint64_t)1 << 20))
        return dd_error(DD_ERR_ARG, "rescale: batch must be in [1, 1048576], got %llu", (unsigned long long)batch);
    if (warmup < 0) return dd_error(DD_ERR_ARG, "rescale: warm-up must be >= 0 steps, got %lld", (long long)warmup);
    tr->rs_batch = batch;
    tr->rs_warmup = warmup;
    if (tr->batch == 0) rescale_apply(tr); /* at an epoch boundary now */
    return DD_OK;
}

int dd_trainer_rescaled(dd_trainer *tr) {
    const int r = tr && tr->rs_applied;
    if (tr) tr->rs_applied = 0;
    return r;
}
int dd_trainer_best_epoch(const dd_trainer *tr, double *metric) {
    if (metric) *metric = tr->best_metric;
    return tr->best_epoch;
}
const dd_epoch_record *dd_trainer_history(const dd_trainer *tr, size_t *n) {
    if (n) *n = tr->nhist;
    return tr->hist;
}
const dd_model *dd_trainer_pa_model(const dd_trainer *tr, const float **params) {
    if (params) *params = tr->pa_params;
    return tr->pa;
}
