/* Tensor parallelism of the models (model.h, "Tensor parallelism"; docs/models.md):
 * creating a shard, the runs that map it onto the whole model's arena, its
 * initialisation, the error of a stage's collectives, and Megatron's four mappings
 * between whole and sharded tensors. What each model splits is in its own file. */
#include <string.h>

#include "models/model_impl.h"

/* ---- creation ---- */

static dd_status check_group(const dd_model_tp *tp, const char *fn) {
    if (!tp) return dd_error(DD_ERR_ARG, "%s: the tensor-parallel group is NULL", fn);
    if (tp->size < 1 || tp->rank < 0 || tp->rank >= tp->size)
        return dd_error(DD_ERR_ARG, "%s: tensor-parallel rank %d of size %d (want size >= 1, rank in [0, size))", fn,
                        tp->rank, tp->size);
    if (tp->size > 1 && (!tp->allreduce || !tp->allgather))
        return dd_error(DD_ERR_ARG, "%s: a tensor-parallel group of %d ranks needs allreduce and allgather", fn,
                        tp->size);
    return DD_OK;
}

dd_status dd_model_create_tp(const char *name, const dd_model_cfg *cfg, const dd_model_tp *tp, dd_model **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_model_create_tp: out is NULL");
    *out = NULL;
    if (!name) return dd_error(DD_ERR_ARG, "dd_model_create_tp: model name is NULL");
    DD_TRY(check_group(tp, "dd_model_create_tp"));
    return dd_model_create_with(name, cfg, tp->size > 1 ? tp : NULL, out);
}

int dd_model_tp_size(const dd_model *m) { return m && m->tpx ? m->tpx->tp.size : 1; }
int dd_model_tp_rank(const dd_model *m) { return m && m->tpx ? m->tpx->tp.rank : 0; }

dd_status dd_model_tp_runs(const dd_model *m, const dd_tp_run **runs, size_t *n) {
    if (!m || !runs || !n) return dd_error(DD_ERR_ARG, "dd_model_tp_runs: NULL argument");
    *runs = m->runs;
    *n = m->nruns;
    return DD_OK;
}

dd_status dd_model_tp_divides(const dd_model *m, const char *opt) {
    const int T = dd_model_tp_size(m), v = dd_model_opt(m, opt);
    if (v % T == 0) return DD_OK;
    return dd_error(DD_ERR_ARG, "%s --%s %d is not divisible by --tp %d", m->name, opt, v, T);
}

dd_status dd_model_tp_split(dd_model *m, size_t offset, int axis, int groups) {
    dd_model_tpx *x = m->tpx;
    if (!x) return DD_OK; /* a whole model: nothing is split */
    size_t e = m->table.count;
    while (e-- > 0 && m->table.entries[e].offset != offset) {}
    if (e >= m->table.count || axis < 0 || axis >= m->table.entries[e].ndim || groups < 1)
        return dd_error(DD_ERR_INTERNAL, "model %s: no entry at offset %zu to split along %d", m->name, offset, axis);
    if (x->nsplit == x->capsplit) {
        size_t cap = x->capsplit ? 2 * x->capsplit : 16;
        dd_tp_split *ns = dd_calloc(cap, sizeof *ns);
        if (!ns) return dd_error(DD_ERR_NOMEM, "model %s: out of memory", m->name);
        if (x->nsplit) memcpy(ns, x->split, x->nsplit * sizeof *ns);
        dd_free(x->split);
        x->split = ns;
        x->capsplit = cap;
    }
    x->split[x->nsplit++] = (dd_tp_split){e, axis, groups};
    return DD_OK;
}

dd_status dd_model_tp_rnn_add(dd_model *m, int k, int gates, int input_size, int hidden, dd_rnn_shard_layer *l) {
    DD_TRY(dd_rnn_shard_layer_add(&m->table, "rnn", k, gates, input_size, hidden, dd_model_tp_size(m), 1, l));
    DD_TRY(dd_model_tp_split(m, l->w_ih, 0, gates));
    DD_TRY(dd_model_tp_split(m, l->w_hh, 0, gates));
    DD_TRY(dd_model_tp_split(m, l->b_ih, 0, gates));
    return dd_model_tp_split(m, l->b_hh, 0, gates);
}

void dd_model_tp_free(dd_model *m) {
    if (m->tpx) {
        dd_model_destroy(&m->tpx->whole);
        dd_free(m->tpx->split);
        dd_free(m->tpx);
        m->tpx = NULL;
    }
    dd_free(m->runs);
    m->runs = NULL;
    m->nruns = 0;
}

/* ---- runs ---- */

static const dd_tp_split *split_of(const dd_model_tpx *x, size_t entry) {
    for (size_t i = 0; i < x->nsplit; i++)
        if (x->split[i].entry == entry) return &x->split[i];
    return NULL;
}

/* Whether the shard's entry e has the whole entry w's shape, except that dimension
 * `axis` (when >= 0) is T times smaller and divisible into `groups` blocks. */
static int shapes_match(const dd_param_entry *e, const dd_param_entry *w, int axis, int groups, int T) {
    if (strcmp(e->name, w->name) != 0 || e->ndim != w->ndim) return 0;
    for (int k = 0; k < e->ndim; k++) {
        if (k != axis && e->shape[k] != w->shape[k]) return 0;
        if (k == axis && (e->shape[k] * (size_t)T != w->shape[k] || e->shape[k] % (size_t)groups)) return 0;
    }
    return 1;
}

/* The runs of shard entry e (whole entry w), appended at m->runs + *n. */
static void entry_runs(dd_model *m, const dd_param_entry *e, const dd_param_entry *w, const dd_tp_split *sp,
                       size_t *n) {
    if (!sp) {
        m->runs[(*n)++] = (dd_tp_run){w->offset, e->offset, e->size, 1};
        return;
    }
    size_t outer = 1, inner = 1;
    for (int k = 0; k < sp->axis; k++) outer *= e->shape[k];
    for (int k = sp->axis + 1; k < e->ndim; k++) inner *= e->shape[k];
    const size_t G = (size_t)sp->groups, nl = e->shape[sp->axis] / G, nw = w->shape[sp->axis] / G;
    const size_t r = (size_t)m->tpx->tp.rank;
    size_t shard = e->offset;
    for (size_t o = 0; o < outer; o++)
        for (size_t g = 0; g < G; g++) {
            m->runs[(*n)++] = (dd_tp_run){w->offset + ((o * G + g) * nw + r * nl) * inner, shard, nl * inner, 0};
            shard += nl * inner;
        }
}

/* Runs of entry e: 1 when replicated, outer x groups when split. */
static size_t count_runs(const dd_param_entry *e, const dd_tp_split *sp) {
    if (!sp) return 1;
    size_t outer = 1;
    for (int k = 0; k < sp->axis; k++) outer *= e->shape[k];
    return outer * (size_t)sp->groups;
}

static dd_status shard_runs(dd_model *m) {
    dd_model_tpx *x = m->tpx;
    DD_TRY(dd_model_create_with(m->name, &m->cfg, NULL, &x->whole));
    const dd_param_table *wt = &x->whole->table;
    if (wt->count != m->table.count)
        return dd_error(DD_ERR_INTERNAL, "model %s: the shard has %zu entries, the whole model %zu", m->name,
                        m->table.count, wt->count);
    size_t total = 0;
    for (size_t i = 0; i < m->table.count; i++) {
        const dd_tp_split *sp = split_of(x, i);
        if (!shapes_match(&m->table.entries[i], &wt->entries[i], sp ? sp->axis : -1, sp ? sp->groups : 1,
                          x->tp.size))
            return dd_error(DD_ERR_INTERNAL, "model %s: shard entry %s does not match the whole model's",
                            m->name, m->table.entries[i].name);
        total += count_runs(&m->table.entries[i], sp);
    }
    if (!(m->runs = dd_calloc(total ? total : 1, sizeof *m->runs)))
        return dd_error(DD_ERR_NOMEM, "model %s: out of memory", m->name);
    for (size_t i = 0; i < m->table.count; i++)
        entry_runs(m, &m->table.entries[i], &wt->entries[i], split_of(x, i), &m->nruns);
    return DD_OK;
}

dd_status dd_model_tp_finish(dd_model *m) {
    if (m->tpx) return shard_runs(m);
    if (!(m->runs = dd_calloc(m->table.count ? m->table.count : 1, sizeof *m->runs)))
        return dd_error(DD_ERR_NOMEM, "model %s: out of memory", m->name);
    for (size_t i = 0; i < m->table.count; i++) {
        const dd_param_entry *e = &m->table.entries[i];
        m->runs[m->nruns++] = (dd_tp_run){e->offset, e->offset, e->size, 1};
    }
    return DD_OK;
}

dd_status dd_model_tp_init(const dd_model *m, float *params, uint64_t seed) {
    const dd_model *w = m->tpx->whole;
    memset(params, 0, m->table.total * sizeof *params);
    float *full = dd_calloc(w->table.total, sizeof *full);
    if (!full) return dd_error(DD_ERR_NOMEM, "model %s: no memory for the whole arena to initialise a shard", m->name);
    dd_status s = dd_model_init(w, full, seed);
    for (size_t i = 0; s == DD_OK && i < m->nruns; i++)
        memcpy(params + m->runs[i].shard, full + m->runs[i].full, m->runs[i].len * sizeof *params);
    dd_free(full);
    return s;
}

/* ---- errors of the stages' collectives ---- */

int dd_model_tp_ok(const dd_model *m, dd_status s) {
    dd_model_tpx *x = m->tpx;
    if (x->err == DD_OK) x->err = s;
    return x->err == DD_OK;
}

dd_status dd_model_tp_take_error(const dd_model *m) {
    if (!m->tpx) return DD_OK;
    dd_status s = m->tpx->err;
    m->tpx->err = DD_OK;
    return s;
}

/* ---- Megatron's mappings ---- */

/* The slice width cols / T; DD_ERR_ARG unless the group is valid and T divides cols. */
static dd_status slice_width(const dd_model_tp *tp, const char *fn, size_t cols, size_t *cl) {
    DD_TRY(check_group(tp, fn));
    if (cols % (size_t)tp->size)
        return dd_error(DD_ERR_ARG, "%s: %zu columns are not divisible by the group's %d ranks", fn, cols, tp->size);
    *cl = cols / (size_t)tp->size;
    return DD_OK;
}

dd_status dd_tp_copy_fwd(const dd_model_tp *tp, float *x, size_t n) {
    (void)x, (void)n;
    return check_group(tp, "dd_tp_copy_fwd");
}

dd_status dd_tp_copy_bwd(const dd_model_tp *tp, float *dx, size_t n) {
    DD_TRY(check_group(tp, "dd_tp_copy_bwd"));
    return tp->size > 1 ? tp->allreduce(tp->user, dx, n) : DD_OK;
}

dd_status dd_tp_reduce_fwd(const dd_model_tp *tp, float *x, size_t n) {
    DD_TRY(check_group(tp, "dd_tp_reduce_fwd"));
    return tp->size > 1 ? tp->allreduce(tp->user, x, n) : DD_OK;
}

dd_status dd_tp_reduce_bwd(const dd_model_tp *tp, float *dx, size_t n) {
    (void)dx, (void)n;
    return check_group(tp, "dd_tp_reduce_bwd");
}

/* xl (rows, cl) = columns [rank cl, (rank+1) cl) of x (rows, cols). */
static void own_slice(const dd_model_tp *tp, const float *x, float *xl, size_t rows, size_t cols, size_t cl) {
    for (size_t r = 0; r < rows; r++) memcpy(xl + r * cl, x + r * cols + (size_t)tp->rank * cl, cl * sizeof *x);
}

/* x (rows, cols) = every rank's xl (rows, cl) side by side, through tmp (rank-major). */
static dd_status gather_cols(const dd_model_tp *tp, const float *xl, float *x, size_t rows, size_t cols, size_t cl,
                             float *tmp) {
    if (tp->size == 1) {
        memcpy(x, xl, rows * cols * sizeof *x);
        return DD_OK;
    }
    if (rows == 1) return tp->allgather(tp->user, xl, x, cl);
    DD_TRY(tp->allgather(tp->user, xl, tmp, rows * cl));
    for (size_t q = 0; q < (size_t)tp->size; q++)
        for (size_t r = 0; r < rows; r++) memcpy(x + r * cols + q * cl, tmp + (q * rows + r) * cl, cl * sizeof *x);
    return DD_OK;
}

dd_status dd_tp_scatter_fwd(const dd_model_tp *tp, const float *x, float *xl, size_t rows, size_t cols) {
    size_t cl = 0;
    DD_TRY(slice_width(tp, "dd_tp_scatter_fwd", cols, &cl));
    if (!x || !xl) return dd_error(DD_ERR_ARG, "dd_tp_scatter_fwd: %s is NULL", !x ? "x" : "xl");
    own_slice(tp, x, xl, rows, cols, cl);
    return DD_OK;
}

dd_status dd_tp_gather_bwd(const dd_model_tp *tp, const float *dx, float *dxl, size_t rows, size_t cols) {
    size_t cl = 0;
    DD_TRY(slice_width(tp, "dd_tp_gather_bwd", cols, &cl));
    if (!dx || !dxl) return dd_error(DD_ERR_ARG, "dd_tp_gather_bwd: %s is NULL", !dx ? "dx" : "dxl");
    own_slice(tp, dx, dxl, rows, cols, cl);
    return DD_OK;
}

static dd_status gather_checked(const dd_model_tp *tp, const char *fn, const float *xl, float *x, size_t rows,
                                size_t cols, float *tmp) {
    size_t cl = 0;
    DD_TRY(slice_width(tp, fn, cols, &cl));
    if (!xl || !x) return dd_error(DD_ERR_ARG, "%s: an input or output is NULL", fn);
    if (!tmp && rows > 1 && tp->size > 1)
        return dd_error(DD_ERR_ARG, "%s: %zu rows need tmp (rows * cols floats)", fn, rows);
    return gather_cols(tp, xl, x, rows, cols, cl, tmp);
}

dd_status dd_tp_gather_fwd(const dd_model_tp *tp, const float *xl, float *x, size_t rows, size_t cols, float *tmp) {
    return gather_checked(tp, "dd_tp_gather_fwd", xl, x, rows, cols, tmp);
}

dd_status dd_tp_scatter_bwd(const dd_model_tp *tp, const float *dxl, float *dx, size_t rows, size_t cols,
                            float *tmp) {
    return gather_checked(tp, "dd_tp_scatter_bwd", dxl, dx, rows, cols, tmp);
}
