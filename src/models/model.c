/* Generic model layer: creation through the registry, accessors, argument checks around
 * each model's forward/backward, streaming in bounded memory (recurrent state carried, or
 * input history overlapped), least-squares fitting dispatch and configuration helpers.
 * Models themselves live one per file in src/models/ (see model_impl.h). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "models/model_impl.h"

/* Largest B*T accepted (BLAS row counts must stay below 2^31, and the widest layer
 * multiplies them). */
#define MODEL_MAX_ROWS ((size_t)1 << 26)
/* Samples per chunk of dd_model_run_stream. */
#define STREAM_CHUNK 4096

/* ---- creation and configuration ---- */

/* ---- configurations: named options ---- */

static int valid_opt_name(const char *name) {
    size_t n = name ? strlen(name) : 0;
    if (n < 1 || n >= DD_MODEL_OPT_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_')) return 0;
    return 1;
}

static int opt_index(const dd_model_cfg *c, const char *name) {
    for (int i = 0; c && name && i < c->n && i < DD_MODEL_MAX_OPTS; i++)
        if (strcmp(c->v[i].name, name) == 0) return i;
    return -1;
}

int dd_model_cfg_get(const dd_model_cfg *c, const char *name) {
    int i = opt_index(c, name);
    return i < 0 || !c ? 0 : c->v[i].value; /* (opt_index is -1 for c NULL: for the analyzer) */
}

dd_status dd_model_cfg_set(dd_model_cfg *c, const char *name, int value) {
    if (!c) return dd_error(DD_ERR_ARG, "dd_model_cfg_set: NULL configuration");
    if (!valid_opt_name(name))
        return dd_error(DD_ERR_ARG, "model option name '%s': 1 to %d characters of a-z, 0-9 and _",
                        name ? name : "(null)", DD_MODEL_OPT_NAME_MAX - 1);
    int i = opt_index(c, name);
    if (value == 0) { /* unset: the default */
        if (i >= 0) {
            memmove(&c->v[i], &c->v[i + 1], (size_t)(c->n - i - 1) * sizeof c->v[0]);
            c->n--;
        }
        return DD_OK;
    }
    if (i < 0) {
        if (c->n >= DD_MODEL_MAX_OPTS)
            return dd_error(DD_ERR_ARG, "model option %s: more than %d options", name, DD_MODEL_MAX_OPTS);
        i = c->n++;
        snprintf(c->v[i].name, sizeof c->v[i].name, "%s", name);
    }
    c->v[i].value = value;
    return DD_OK;
}

dd_status dd_model_cfg_parse(dd_model_cfg *c, const char *list) {
    if (!c || !list) return dd_error(DD_ERR_ARG, "dd_model_cfg_parse: NULL argument");
    dd_model_cfg t = *c;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item)
            return dd_error(DD_ERR_ARG, "model options '%s': %s item", list, len ? "an overlong" : "an empty");
        memcpy(item, p, len);
        item[len] = '\0';
        char *eq = strchr(item, '=');
        if (!eq) return dd_error(DD_ERR_ARG, "model options '%s': '%s' is not name=value", list, item);
        *eq = '\0';
        const char *v = eq + 1;
        int neg = *v == '-';
        const char *d = v + neg;
        long long x = 0;
        if (!*d) return dd_error(DD_ERR_ARG, "model options '%s': %s has no value", list, item);
        for (; *d; d++) {
            if (*d < '0' || *d > '9' || x > 1000000000LL)
                return dd_error(DD_ERR_ARG, "model options '%s': %s = '%s' is not a decimal integer", list, item, v);
            x = 10 * x + (*d - '0');
        }
        DD_TRY(dd_model_cfg_set(&t, item, (int)(neg ? -x : x)));
        p += len;
        if (*p == ',') {
            p++;
            if (!*p) return dd_error(DD_ERR_ARG, "model options '%s': an empty item", list);
        }
    }
    *c = t;
    return DD_OK;
}

size_t dd_model_cfg_format(const dd_model_cfg *c, char *buf, size_t size) {
    size_t len = 0;
    if (size) buf[0] = '\0';
    for (int i = 0; c && i < c->n && i < DD_MODEL_MAX_OPTS; i++) {
        int w = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%s%s=%d", i ? "," : "",
                         c->v[i].name, c->v[i].value);
        if (w > 0) len += (size_t)w;
    }
    return len;
}

int dd_model_cfg_equal(const dd_model_cfg *a, const dd_model_cfg *b) {
    for (int i = 0; a && i < a->n; i++)
        if (dd_model_cfg_get(b, a->v[i].name) != a->v[i].value) return 0;
    for (int i = 0; b && i < b->n; i++)
        if (dd_model_cfg_get(a, b->v[i].name) != b->v[i].value) return 0;
    return 1;
}

int dd_model_opt(const dd_model *m, const char *name) { return dd_model_cfg_get(&m->cfg, name); }

const dd_model_info *dd_model_find(const char *name) {
    size_t n = 0;
    const dd_model_info *const *reg = dd_model_registry(&n);
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(reg[i]->name, name) == 0) return reg[i];
    return NULL;
}

/* Defaults and ranges of the options the model declares; an option it does not declare
 * is logged and dropped. The result lists the declared options in declaration order. */
static dd_status apply_options(dd_model *m) {
    const dd_model_opt_info *o = m->info->opts;
    dd_model_cfg given = m->cfg, out;
    memset(&out, 0, sizeof out);
    for (int i = 0; i < given.n && i < DD_MODEL_MAX_OPTS; i++) {
        int declared = 0;
        for (size_t k = 0; o && o[k].name; k++) declared |= strcmp(o[k].name, given.v[i].name) == 0;
        if (!declared) dd_log(DD_LOG_WARN, "model %s ignores %s = %d", m->name, given.v[i].name, given.v[i].value);
    }
    for (size_t k = 0; o && o[k].name; k++) {
        int v = dd_model_cfg_get(&given, o[k].name);
        if (v == 0) v = o[k].def;
        if (v < o[k].lo || v > o[k].hi)
            return dd_error(DD_ERR_ARG, "model %s: %s = %d is out of range [%d, %d]", m->name, o[k].name, v, o[k].lo,
                            o[k].hi);
        DD_TRY(dd_model_cfg_set(&out, o[k].name, v));
    }
    m->cfg = out;
    return DD_OK;
}

dd_status dd_model_add_stage(dd_model *m, const dd_stage_ops *ops, const char *name, int arg, const void *ref,
                             int in_w, int out_w) {
    if (in_w < 1 || out_w < 1)
        return dd_error(DD_ERR_ARG, "model %s: stage %s has widths %d -> %d", m->name, name, in_w, out_w);
    size_t e0 = m->nstages ? m->stages[m->nstages - 1].e1 : 0;
    int want = m->nstages ? m->stages[m->nstages - 1].out_w : 2;
    if (in_w != want)
        return dd_error(DD_ERR_INTERNAL, "model %s: stage %s reads width %d, the previous stage writes %d", m->name,
                        name, in_w, want);
    if (m->nstages >= DD_MODEL_MAX_STAGES)
        return dd_error(DD_ERR_ARG, "model %s: more than %d stages", m->name, DD_MODEL_MAX_STAGES);
    if (m->nstages == m->capstages) {
        size_t cap = m->capstages ? 2 * m->capstages : 8;
        dd_stage_def *ns = dd_calloc(cap, sizeof *ns);
        if (!ns) return dd_error(DD_ERR_NOMEM, "model %s: out of memory", m->name);
        if (m->nstages) memcpy(ns, m->stages, m->nstages * sizeof *ns);
        dd_free(m->stages);
        m->stages = ns;
        m->capstages = cap;
    }
    dd_stage_def *st = &m->stages[m->nstages++];
    memset(st, 0, sizeof *st);
    st->ops = ops;
    snprintf(st->name, sizeof st->name, "%s", name);
    st->arg = arg;
    st->ref = ref;
    st->in_w = in_w;
    st->out_w = out_w;
    st->e0 = e0;
    st->e1 = m->table.count;
    return DD_OK;
}

/* After build: every entry in a stage, widths end at 2, arena ranges. */
static dd_status finish_stages(dd_model *m) {
    if (m->nstages == 0) return dd_error(DD_ERR_INTERNAL, "model %s has no stages", m->name);
    const dd_stage_def *last = &m->stages[m->nstages - 1];
    if (last->e1 != m->table.count || last->out_w != 2)
        return dd_error(DD_ERR_INTERNAL, "model %s: the stages cover %zu of %zu entries and end at width %d", m->name,
                        last->e1, m->table.count, last->out_w);
    for (size_t s = 0; s < m->nstages; s++) {
        dd_stage_def *st = &m->stages[s];
        st->lo = st->e0 < m->table.count ? m->table.entries[st->e0].offset : m->table.total;
        st->hi = st->e1 < m->table.count ? m->table.entries[st->e1].offset : m->table.total;
        if (s == 0) st->lo = 0;
    }
    return DD_OK;
}

/* The registry entry of name; DD_ERR_ARG listing the known models otherwise. */
static dd_status find_info(const char *name, const dd_model_info **out) {
    *out = dd_model_find(name);
    if (*out) return DD_OK;
    size_t n = 0;
    const dd_model_info *const *reg = dd_model_registry(&n);
    char known[512];
    size_t len = 0;
    known[0] = '\0';
    for (size_t i = 0; i < n && len < sizeof known; i++) {
        int w = snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", reg[i]->name);
        if (w < 0) break;
        len += (size_t)w;
    }
    return dd_error(DD_ERR_ARG, "unknown model '%s' (known: %s)", name, known);
}

/* With T > 1: the shard's state, or DD_ERR_UNSUPPORTED for a model without that form. */
static dd_status attach_tp(dd_model *m, const dd_model_tp *tp) {
    if (!tp || tp->size <= 1) return DD_OK;
    if (!m->ops->tensor_parallel) {
        char with[256];
        size_t n = 0, len = 0;
        const dd_model_info *const *reg = dd_model_registry(&n);
        with[0] = '\0';
        for (size_t i = 0; i < n && len < sizeof with; i++) {
            const dd_model_def *d = reg[i]->def;
            if (!d->ops->tensor_parallel) continue;
            int w = snprintf(with + len, sizeof with - len, "%s%s", len ? ", " : "", reg[i]->name);
            if (w > 0) len += (size_t)w;
        }
        return dd_error(DD_ERR_UNSUPPORTED, "model %s has no tensor-parallel form (models with one: %s)", m->name,
                        with);
    }
    if (!(m->tpx = dd_calloc(1, sizeof *m->tpx))) return dd_error(DD_ERR_NOMEM, "model %s: out of memory", m->name);
    m->tpx->tp = *tp;
    return DD_OK;
}

dd_status dd_model_create_with(const char *name, const dd_model_cfg *cfg, const dd_model_tp *tp, dd_model **out) {
    const dd_model_info *info = NULL;
    DD_TRY(find_info(name, &info));
    const dd_model_def *def = info->def;
    dd_model *m = dd_calloc(1, sizeof *m);
    if (!m) return dd_error(DD_ERR_NOMEM, "model %s: out of memory", name);
    m->ops = def->ops;
    m->info = info;
    m->name = info->name;
    if (cfg) m->cfg = *cfg;
    dd_param_table_init(&m->table);
    dd_status s = DD_OK;
    if (def->impl_size && !(m->impl = dd_calloc(1, def->impl_size)))
        s = dd_error(DD_ERR_NOMEM, "model %s: out of memory", name);
    if (s == DD_OK) s = apply_options(m);
    if (s == DD_OK) s = attach_tp(m, tp);
    if (s == DD_OK) s = def->build(m);
    if (s == DD_OK) s = finish_stages(m);
    if (s == DD_OK) s = dd_model_tp_finish(m);
    if (s != DD_OK) {
        dd_model_destroy(&m);
        return s;
    }
    *out = m;
    return DD_OK;
}

dd_status dd_model_create(const char *name, const dd_model_cfg *cfg, dd_model **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_model_create: out is NULL");
    *out = NULL;
    if (!name) return dd_error(DD_ERR_ARG, "dd_model_create: model name is NULL");
    return dd_model_create_with(name, cfg, NULL, out);
}

void dd_model_destroy(dd_model **mp) {
    if (!mp || !*mp) return;
    dd_model *m = *mp;
    if (m->ops && m->ops->destroy && m->impl) m->ops->destroy(m);
    dd_model_tp_free(m);
    dd_param_table_free(&m->table);
    dd_free(m->stages);
    dd_free(m->impl);
    dd_free(m);
    *mp = NULL;
}

/* ---- accessors ---- */

const char *dd_model_name(const dd_model *m) { return m ? m->name : "(null)"; }
const dd_model_cfg *dd_model_config(const dd_model *m) { return m ? &m->cfg : NULL; }
const dd_param_table *dd_model_params(const dd_model *m) { return m ? &m->table : NULL; }
size_t dd_model_num_params(const dd_model *m) { return m ? m->table.nparams : 0; }
long dd_model_history(const dd_model *m) { return m ? m->history : 0; }

int dd_model_chunk_frames(const dd_model *m) {
    return m && m->ops && m->ops->chunk_frames > 0 ? m->ops->chunk_frames : DD_MODEL_CHUNK_FRAMES;
}

dd_status dd_model_init(const dd_model *m, float *params, uint64_t seed) {
    if (!m || !params) return dd_error(DD_ERR_ARG, "dd_model_init: %s is NULL", !m ? "model" : "params");
    if (m->tpx) return dd_model_tp_init(m, params, seed);
    dd_rng rng;
    dd_rng_seed(&rng, seed);
    memset(params, 0, m->table.total * sizeof *params);
    m->ops->init(m, params, &rng);
    return DD_OK;
}

size_t dd_model_workspace_size(const dd_model *m, int B, int T) {
    if (!m || B < 1 || T < 1) return 0;
    return dd_model_range_workspace(m, 0, m->nstages, B, T);
}

double dd_model_flops_per_sample(const dd_model *m, int backward) {
    if (!m) return 0.0;
    double f = 0.0;
    for (size_t s = 0; s < m->nstages; s++) f += m->stages[s].ops->flops(m, &m->stages[s], backward ? 1 : 0);
    return f;
}

/* "1234567" -> "1,234,567" */
static void group_digits(size_t v, char *buf, size_t size) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%zu", v);
    size_t o = 0;
    for (int i = 0; i < n && o + 1 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0 && o + 2 < size) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
}

size_t dd_model_describe(const dd_model *m, char *buf, size_t size) {
    char tmp[512], num[40];
    if (!m) {
        int w = snprintf(buf, size, "(null)");
        return w < 0 ? 0 : (size_t)w;
    }
    size_t len = 0;
    int w = snprintf(tmp, sizeof tmp, "%s(", m->name);
    len = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < m->cfg.n && len < sizeof tmp; i++) {
        w = snprintf(tmp + len, sizeof tmp - len, "%s%s=%d", i ? ", " : "", m->cfg.v[i].name, m->cfg.v[i].value);
        if (w > 0) len += (size_t)w;
    }
    group_digits(m->table.nparams, num, sizeof num);
    if (len < sizeof tmp) snprintf(tmp + len, sizeof tmp - len, "): %s parameters", num);
    len = strlen(tmp);
    if (m->tpx && len < sizeof tmp)
        snprintf(tmp + len, sizeof tmp - len, " (tensor-parallel shard, rank %d of %d)", m->tpx->tp.rank,
                 m->tpx->tp.size);
    w = snprintf(buf, size, "%s", tmp);
    return w < 0 ? 0 : (size_t)w;
}

/* ---- stages ---- */

size_t dd_model_num_stages(const dd_model *m) { return m ? m->nstages : 0; }

unsigned dd_model_stage_layout(const dd_model *m) { return m ? m->layout : 0; }

dd_status dd_model_stage_info(const dd_model *m, size_t s, dd_stage_info *info) {
    if (!m || !info) return dd_error(DD_ERR_ARG, "dd_model_stage_info: NULL argument");
    if (s >= m->nstages)
        return dd_error(DD_ERR_ARG, "model %s: stage %zu is out of range [0, %zu)", m->name, s, m->nstages);
    const dd_stage_def *st = &m->stages[s];
    info->name = st->name;
    info->in_width = st->in_w;
    info->out_width = st->out_w;
    info->e0 = st->e0;
    info->e1 = st->e1;
    info->lo = st->lo;
    info->hi = st->hi;
    info->flops_fwd = st->ops->flops(m, st, 0);
    info->flops_bwd = st->ops->flops(m, st, 1);
    return DD_OK;
}

/* Workspace of a stage range: the activations between the stages (kept), each stage's
 * saved part (kept), then one scratch area (the largest stage's) and two gradient buffers
 * for the activations between stages (used by backward only). */
static size_t range_layout(const dd_model *m, size_t s0, size_t s1, int B, int T, float *base, float **act,
                           float **saved, float **scratch, float **dbuf, size_t *kept) {
    dd_ws_carver c = {base, 0};
    const size_t BT = (size_t)B * (size_t)T;
    size_t maxw = 0, maxs = 0;
    for (size_t s = s0 + 1; s < s1; s++) {
        float *p = dd_ws_take(&c, BT * (size_t)m->stages[s].in_w);
        if (act) act[s - s0] = p;
        if ((size_t)m->stages[s].in_w > maxw) maxw = (size_t)m->stages[s].in_w;
    }
    for (size_t s = s0; s < s1; s++) {
        const dd_stage_def *st = &m->stages[s];
        float *p = dd_ws_take(&c, st->ops->saved(m, st, B, T));
        if (saved) saved[s - s0] = p;
        size_t k = st->ops->scratch ? st->ops->scratch(m, st, B, T) : 0;
        if (k > maxs) maxs = k;
    }
    if (kept) *kept = c.used;
    float *p = dd_ws_take(&c, maxs);
    if (scratch) *scratch = p;
    for (int k = 0; k < 2; k++) {
        p = dd_ws_take(&c, BT * maxw);
        if (dbuf) dbuf[k] = p;
    }
    return c.used;
}

size_t dd_model_range_workspace(const dd_model *m, size_t s0, size_t s1, int B, int T) {
    if (!m || B < 1 || T < 1 || s0 >= s1 || s1 > m->nstages) return 0;
    return range_layout(m, s0, s1, B, T, NULL, NULL, NULL, NULL, NULL, NULL);
}

size_t dd_model_range_saved(const dd_model *m, size_t s0, size_t s1, int B, int T) {
    if (!m || B < 1 || T < 1 || s0 >= s1 || s1 > m->nstages) return 0;
    size_t kept = 0;
    range_layout(m, s0, s1, B, T, NULL, NULL, NULL, NULL, NULL, &kept);
    return kept;
}

static dd_status check_dims(const dd_model *m, const char *fn, int B, int T) {
    if (B < 1 || T < 1)
        return dd_error(DD_ERR_ARG, "%s (model %s): B = %d and T = %d must be >= 1", fn, m->name,
                        B, T);
    if ((size_t)B * (size_t)T > MODEL_MAX_ROWS)
        return dd_error(DD_ERR_ARG, "%s (model %s): B*T = %zu exceeds %zu", fn, m->name,
                        (size_t)B * (size_t)T, MODEL_MAX_ROWS);
    return DD_OK;
}

static dd_status check_range(const dd_model *m, const char *fn, size_t s0, size_t s1, const dd_stage_src *src) {
    if (s0 >= s1 || s1 > m->nstages)
        return dd_error(DD_ERR_ARG, "%s (model %s): stages [%zu, %zu) are not a range of [0, %zu)", fn, m->name, s0,
                        s1, m->nstages);
    if (!src || (!src->params && !src->stage_params))
        return dd_error(DD_ERR_ARG, "%s (model %s): no parameters", fn, m->name);
    if (src->grads && !src->params)
        return dd_error(DD_ERR_ARG, "%s (model %s): a gradient arena needs a parameter arena", fn, m->name);
    return DD_OK;
}

/* The parameter view of stage s for forward (bwd 0) or backward (1). */
static dd_status stage_view(const dd_model *m, const dd_stage_src *src, size_t s, int bwd, dd_stage_params *sp) {
    const dd_stage_def *st = &m->stages[s];
    sp->lo = st->lo;
    sp->g = NULL;
    sp->p = NULL;
    sp->din_set = 0;
    if (src->params) {
        sp->p = src->params + st->lo;
    } else {
        DD_TRY(src->stage_params(src->user, s, bwd, &sp->p));
        if (!sp->p) return dd_error(DD_ERR_INTERNAL, "model %s: no parameters for stage %s", m->name, st->name);
    }
    if (bwd) {
        if (src->grads)
            sp->g = src->grads + st->lo;
        else if (src->stage_grads)
            DD_TRY(src->stage_grads(src->user, s, &sp->g));
    }
    return DD_OK;
}

dd_status dd_model_range_forward(const dd_model *m, size_t s0, size_t s1, const dd_stage_src *src,
                                 const float *in, const float *x0, float *out, int B, int T, float *ws) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_range_forward: model is NULL");
    DD_TRY(check_range(m, "dd_model_range_forward", s0, s1, src));
    if (!in || !x0 || !out || !ws)
        return dd_error(DD_ERR_ARG, "dd_model_range_forward (model %s): %s is NULL", m->name,
                        !in ? "in" : !x0 ? "x0" : !out ? "out" : "ws");
    DD_TRY(check_dims(m, "dd_model_range_forward", B, T));
    float *act[DD_MODEL_MAX_STAGES], *saved[DD_MODEL_MAX_STAGES], *scratch = NULL, *dbuf[2];
    range_layout(m, s0, s1, B, T, ws, act, saved, &scratch, dbuf, NULL);
    for (size_t s = s0; s < s1; s++) {
        const dd_stage_def *st = &m->stages[s];
        dd_stage_params sp;
        DD_TRY(stage_view(m, src, s, 0, &sp));
        const float *x = s == s0 ? in : act[s - s0];
        float *y = s + 1 == s1 ? out : act[s + 1 - s0];
        st->ops->forward(m, st, &sp, x, x0, y, B, T, saved[s - s0], scratch);
        DD_TRY(dd_model_tp_take_error(m));
        if (src->stage_done) DD_TRY(src->stage_done(src->user, s, 0));
    }
    return DD_OK;
}

dd_status dd_model_range_backward(const dd_model *m, size_t s0, size_t s1, const dd_stage_src *src,
                                  const float *in, const float *x0, const float *dout, float *din, float *dx0,
                                  int B, int T, float *ws) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_range_backward: model is NULL");
    DD_TRY(check_range(m, "dd_model_range_backward", s0, s1, src));
    if (!in || !x0 || !dout || !ws)
        return dd_error(DD_ERR_ARG, "dd_model_range_backward (model %s): %s is NULL", m->name,
                        !in ? "in" : !x0 ? "x0" : !dout ? "dout" : "ws");
    DD_TRY(check_dims(m, "dd_model_range_backward", B, T));
    float *act[DD_MODEL_MAX_STAGES], *saved[DD_MODEL_MAX_STAGES], *scratch = NULL, *dbuf[2];
    range_layout(m, s0, s1, B, T, ws, act, saved, &scratch, dbuf, NULL);
    const size_t BT = (size_t)B * (size_t)T;
    const float *dcur = dout;
    for (size_t s = s1; s-- > s0;) {
        const dd_stage_def *st = &m->stages[s];
        dd_stage_params sp;
        DD_TRY(stage_view(m, src, s, 1, &sp));
        float *dprev = din;
        if (s > s0) { /* the inter-stage buffer: cleared, or written whole by the stage */
            dprev = dbuf[s & 1];
            if (st->ops->sets_din) sp.din_set = 1;
            else memset(dprev, 0, BT * (size_t)st->in_w * sizeof(float));
        }
        st->ops->backward(m, st, &sp, s == s0 ? in : act[s - s0], x0, dcur, dprev, dx0, B, T, saved[s - s0],
                          scratch);
        DD_TRY(dd_model_tp_take_error(m));
        if (src->stage_done) DD_TRY(src->stage_done(src->user, s, 1));
        dcur = dprev;
    }
    return DD_OK;
}

/* ---- inference: forward only, buffers shared between the stages ---- */

size_t dd_stage_no_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m, (void)st, (void)B, (void)T;
    return 0;
}

/* Floats of scratch a stage's forward uses. */
static size_t fwd_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    if (st->ops->scratch_fwd) return st->ops->scratch_fwd(m, st, B, T);
    return st->ops->scratch ? st->ops->scratch(m, st, B, T) : 0;
}

/* Nothing is kept for a backward: one saved area and one scratch area (the largest stage's
 * forward part, scratch_fwd) serve every stage in turn, and the activations between stages
 * alternate between two buffers. */
static size_t infer_layout(const dd_model *m, int B, int T, float *base, float **act, float **saved, float **scratch) {
    dd_ws_carver c = {base, 0};
    const size_t BT = (size_t)B * (size_t)T;
    size_t maxw = 0, maxs = 0, maxk = 0;
    for (size_t s = 0; s < m->nstages; s++) {
        const dd_stage_def *st = &m->stages[s];
        if (s > 0 && (size_t)st->in_w > maxw) maxw = (size_t)st->in_w;
        size_t v = st->ops->saved(m, st, B, T), k = fwd_scratch(m, st, B, T);
        if (v > maxs) maxs = v;
        if (k > maxk) maxk = k;
    }
    float *p0 = dd_ws_take(&c, BT * maxw), *p1 = dd_ws_take(&c, BT * maxw);
    if (act) act[0] = p0, act[1] = p1;
    float *sv = dd_ws_take(&c, maxs), *sc = dd_ws_take(&c, maxk);
    if (saved) *saved = sv;
    if (scratch) *scratch = sc;
    return c.used;
}

size_t dd_model_infer_workspace(const dd_model *m, int B, int T) {
    if (!m || B < 1 || T < 1) return 0;
    return infer_layout(m, B, T, NULL, NULL, NULL, NULL);
}

dd_status dd_model_infer(const dd_model *m, const dd_stage_src *src, const float *x, float *y, int B, int T,
                         float *ws) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_infer: model is NULL");
    DD_TRY(check_range(m, "dd_model_infer", 0, m->nstages, src));
    if (!x || !y || !ws)
        return dd_error(DD_ERR_ARG, "dd_model_infer (model %s): %s is NULL", m->name, !x ? "x" : !y ? "y" : "ws");
    DD_TRY(check_dims(m, "dd_model_infer", B, T));
    float *act[2], *saved = NULL, *scratch = NULL;
    infer_layout(m, B, T, ws, act, &saved, &scratch);
    for (size_t s = 0; s < m->nstages; s++) {
        const dd_stage_def *st = &m->stages[s];
        dd_stage_params sp;
        DD_TRY(stage_view(m, src, s, 0, &sp));
        const float *in = s == 0 ? x : act[s & 1];
        float *out = s + 1 == m->nstages ? y : act[(s + 1) & 1];
        st->ops->forward(m, st, &sp, in, x, out, B, T, saved, scratch);
        DD_TRY(dd_model_tp_take_error(m));
        if (src->stage_done) DD_TRY(src->stage_done(src->user, s, 0));
    }
    return DD_OK;
}

/* ---- forward / backward of the whole model ---- */

dd_status dd_model_forward(const dd_model *m, const float *params, const float *x, float *y,
                           int B, int T, float *ws) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_forward: model is NULL");
    if (!params || !x || !y || !ws)
        return dd_error(DD_ERR_ARG, "dd_model_forward (model %s): %s is NULL", m->name,
                        !params ? "params" : !x ? "x" : !y ? "y" : "ws");
    dd_stage_src src = {params, NULL, NULL, NULL, NULL, NULL};
    return dd_model_range_forward(m, 0, m->nstages, &src, x, x, y, B, T, ws);
}

typedef struct {
    const dd_model *m;
    dd_status (*done)(void *user, size_t lo, size_t hi);
    void *user;
} done_adapter;

static dd_status stage_done_adapter(void *user, size_t s, int bwd) {
    done_adapter *a = user;
    if (!bwd) return DD_OK;
    return a->done(a->user, a->m->stages[s].lo, a->m->stages[s].hi);
}

dd_status dd_model_backward_cb(const dd_model *m, const float *params, float *grads, const float *x,
                               const float *dy, float *dx, int B, int T, float *ws,
                               dd_status (*done)(void *user, size_t lo, size_t hi), void *user) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_backward: model is NULL");
    if (!params || !x || !dy || !ws)
        return dd_error(DD_ERR_ARG, "dd_model_backward (model %s): %s is NULL", m->name,
                        !params ? "params" : !x ? "x" : !dy ? "dy" : "ws");
    DD_TRY(check_dims(m, "dd_model_backward", B, T));
    if (!grads && !dx && !done) return DD_OK;
    done_adapter a = {m, done, user};
    dd_stage_src src = {params, grads, &a, NULL, NULL, done ? stage_done_adapter : NULL};
    return dd_model_range_backward(m, 0, m->nstages, &src, x, x, dy, dx, dx, B, T, ws);
}

dd_status dd_model_backward(const dd_model *m, const float *params, float *grads,
                            const float *x, const float *dy, float *dx, int B, int T, float *ws) {
    return dd_model_backward_cb(m, params, grads, x, dy, dx, B, T, ws, NULL, NULL);
}

/* ---- streaming ---- */

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + nb && pb < pa + na;
}

/* One chunk of B recurrent streams through every stage (ws: dd_model_infer_workspace for
 * (B, T) or more; state: B x the stages' state sizes). */
static dd_status stream_chunk(const dd_model *m, const dd_stage_src *src, const float *x, float *y, int B, int T,
                              float *state, float *ws) {
    float *act[2], *saved = NULL, *scratch = NULL;
    infer_layout(m, B, T, ws, act, &saved, &scratch);
    for (size_t s = 0; s < m->nstages; s++) {
        const dd_stage_def *st = &m->stages[s];
        dd_stage_params sp;
        DD_TRY(stage_view(m, src, s, 0, &sp));
        const float *in = s == 0 ? x : act[s & 1];
        float *out = s + 1 == m->nstages ? y : act[(s + 1) & 1];
        if (st->ops->forward_state) {
            st->ops->forward_state(m, st, &sp, in, x, out, B, T, state, saved, scratch);
            state += (size_t)B * st->ops->state_size(m, st);
        } else {
            st->ops->forward(m, st, &sp, in, x, out, B, T, saved, scratch);
        }
        DD_TRY(dd_model_tp_take_error(m));
        if (src->stage_done) DD_TRY(src->stage_done(src->user, s, 0));
    }
    return DD_OK;
}

/* Floats of state one recurrent stream carries between chunks. */
static size_t state_floats(const dd_model *m) {
    size_t ns = 0;
    for (size_t k = 0; k < m->nstages; k++)
        if (m->stages[k].ops->state_size) ns += m->stages[k].ops->state_size(m, &m->stages[k]);
    return ns;
}

size_t dd_model_infer_chunked_workspace(const dd_model *m, int B, int Tc) {
    if (!m || B < 1 || Tc < 1 || m->history >= 0) return 0;
    const size_t ns = state_floats(m), io = (size_t)B * (size_t)Tc * 2;
    return infer_layout(m, B, Tc, NULL, NULL, NULL, NULL) + 2 * io + (size_t)B * (ns ? ns : 1);
}

dd_status dd_model_infer_chunked(const dd_model *m, const dd_stage_src *src, const float *x, float *y, int B, int T,
                                 int Tc, float *ws) {
    const char *who = "dd_model_infer_chunked";
    if (!m) return dd_error(DD_ERR_ARG, "%s: model is NULL", who);
    if (m->history >= 0) return dd_error(DD_ERR_ARG, "%s (model %s): not a recurrent model", who, m->name);
    DD_TRY(check_range(m, who, 0, m->nstages, src));
    if (!x || !y || !ws) return dd_error(DD_ERR_ARG, "%s (model %s): %s is NULL", who, m->name, !x ? "x" : !y ? "y" : "ws");
    DD_TRY(check_dims(m, who, B, T));
    if (Tc < 1) return dd_error(DD_ERR_ARG, "%s (model %s): chunk Tc = %d must be >= 1", who, m->name, Tc);
    if (Tc > T) Tc = T;
    const size_t ns = state_floats(m), io = (size_t)B * (size_t)Tc * 2;
    float *xb = ws + infer_layout(m, B, Tc, NULL, NULL, NULL, NULL), *yb = xb + io, *state = yb + io;
    memset(state, 0, (size_t)B * ns * sizeof(float));
    for (int t0 = 0; t0 < T; t0 += Tc) {
        const size_t c = (size_t)(T - t0 < Tc ? T - t0 : Tc);
        for (size_t b = 0; b < (size_t)B; b++) /* (B, c, 2) from rows [t0, t0 + c) of each frame */
            memcpy(xb + b * c * 2, x + (b * (size_t)T + (size_t)t0) * 2, c * 2 * sizeof(float));
        DD_TRY(stream_chunk(m, src, xb, yb, B, (int)c, state, ws));
        for (size_t b = 0; b < (size_t)B; b++)
            memcpy(y + (b * (size_t)T + (size_t)t0) * 2, yb + b * c * 2, c * 2 * sizeof(float));
    }
    return DD_OK;
}

dd_status dd_model_run_stream(const dd_model *m, const float *params, const dd_cf32 *x,
                              dd_cf32 *y, size_t n) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_run_stream: model is NULL");
    if (n == 0) return DD_OK;
    if (!params) return dd_error(DD_ERR_ARG, "dd_model_run_stream (model %s): params is NULL", m->name);
    dd_stage_src src = {params, NULL, NULL, NULL, NULL, NULL};
    return dd_model_run_stream_src(m, &src, x, y, n);
}

dd_status dd_model_run_stream_src(const dd_model *m, const dd_stage_src *src, const dd_cf32 *x, dd_cf32 *y,
                                  size_t n) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_run_stream: model is NULL");
    if (n == 0) return DD_OK;
    if (!src || (!src->params && !src->stage_params) || !x || !y)
        return dd_error(DD_ERR_ARG, "dd_model_run_stream (model %s): %s is NULL", m->name,
                        !src || (!src->params && !src->stage_params) ? "params" : !x ? "x" : "y");
    if (overlaps(x, n * sizeof *x, y, n * sizeof *y))
        return dd_error(DD_ERR_ARG, "dd_model_run_stream (model %s): x and y overlap", m->name);
    dd_status s = DD_OK;
    float *ws = NULL, *state = NULL, *ybuf = NULL;
    if (m->history < 0) {
        /* Recurrent: chunks of STREAM_CHUNK samples through the stages, each recurrent
         * stage carrying its state from one chunk to the next. */
        int Tc = n < STREAM_CHUNK ? (int)n : STREAM_CHUNK;
        size_t ns = state_floats(m);
        ws = dd_calloc(dd_model_infer_workspace(m, 1, Tc), sizeof *ws);
        state = dd_calloc(ns ? ns : 1, sizeof *state);
        if (!ws || !state) {
            s = dd_error(DD_ERR_NOMEM, "dd_model_run_stream (model %s): out of memory", m->name);
            goto cleanup;
        }
        for (size_t s0 = 0; s0 < n; s0 += (size_t)Tc) {
            size_t c = n - s0 < (size_t)Tc ? n - s0 : (size_t)Tc;
            if ((s = stream_chunk(m, src, (const float *)(x + s0), (float *)(y + s0), 1, (int)c, state, ws)) != DD_OK)
                goto cleanup;
        }
    } else {
        /* Feed-forward with receptive field R + 1: each chunk is run as a frame that starts
         * R samples earlier (or at the stream start), whose first outputs are discarded;
         * every output kept then sees exactly the inputs it sees in one long frame. */
        size_t R = (size_t)m->history;
        size_t chunk = STREAM_CHUNK > 4 * R ? STREAM_CHUNK : 4 * R;
        size_t Tmax = chunk + R < n ? chunk + R : n;
        if (Tmax > MODEL_MAX_ROWS) {
            s = dd_error(DD_ERR_ARG, "dd_model_run_stream (model %s): history %ld too long",
                         m->name, m->history);
            goto cleanup;
        }
        ws = dd_calloc(dd_model_infer_workspace(m, 1, (int)Tmax), sizeof *ws);
        ybuf = dd_calloc(2 * Tmax, sizeof *ybuf);
        if (!ws || !ybuf) {
            s = dd_error(DD_ERR_NOMEM, "dd_model_run_stream (model %s): out of memory", m->name);
            goto cleanup;
        }
        for (size_t s0 = 0; s0 < n; s0 += chunk) {
            size_t c = n - s0 < chunk ? n - s0 : chunk;
            size_t f = s0 >= R ? s0 - R : 0;
            size_t len = s0 + c - f;
            if ((s = dd_model_infer(m, src, (const float *)(x + f), ybuf, 1, (int)len, ws)) != DD_OK)
                goto cleanup;
            memcpy(y + s0, ybuf + 2 * (s0 - f), c * sizeof *y);
        }
    }
cleanup:
    dd_free(ws);
    dd_free(state);
    dd_free(ybuf);
    return s;
}

/* ---- least squares ---- */

dd_status dd_model_fit_ls(const dd_model *m, float *params, const dd_cf32 *x, const dd_cf32 *y,
                          size_t n, double *nmse_db) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_fit_ls: model is NULL");
    if (!m->ops->fit_ls)
        return dd_error(DD_ERR_UNSUPPORTED,
                        "model %s is not linear in its parameters: no least-squares fit (use "
                        "gmp or mp)",
                        m->name);
    if (!params || !x || !y)
        return dd_error(DD_ERR_ARG, "dd_model_fit_ls (model %s): %s is NULL", m->name,
                        !params ? "params" : !x ? "x" : "y");
    return m->ops->fit_ls(m, params, x, y, n, nmse_db);
}
