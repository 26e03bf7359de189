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

dd_status dd_model_alloc(const char *name, const dd_model_ops *ops, const dd_model_cfg *cfg,
                         size_t impl_size, dd_model **out) {
    *out = NULL;
    dd_model *m = dd_calloc(1, sizeof *m);
    if (!m) return dd_error(DD_ERR_NOMEM, "model %s: out of memory", name);
    m->ops = ops;
    m->name = name;
    if (cfg) m->cfg = *cfg;
    dd_param_table_init(&m->table);
    if (impl_size) {
        m->impl = dd_calloc(1, impl_size);
        if (!m->impl) {
            dd_free(m);
            return dd_error(DD_ERR_NOMEM, "model %s: out of memory", name);
        }
    }
    *out = m;
    return DD_OK;
}

dd_status dd_model_build(const char *name, const dd_model_ops *ops, const dd_model_cfg *cfg,
                         size_t impl_size, dd_status (*build)(dd_model *m), dd_model **out) {
    if (!out) return dd_error(DD_ERR_ARG, "model %s: out is NULL", name);
    dd_model *m = NULL;
    DD_TRY(dd_model_alloc(name, ops, cfg, impl_size, &m));
    dd_status s = build(m);
    if (s != DD_OK) {
        dd_model_destroy(&m);
        return s;
    }
    *out = m;
    return DD_OK;
}

dd_status dd_model_cfg_field(const dd_model *m, const char *field, int *v, int def, int lo,
                             int hi) {
    if (*v == 0) *v = def;
    if (*v < lo || *v > hi)
        return dd_error(DD_ERR_ARG, "model %s: %s = %d is out of range [%d, %d]", m->name, field,
                        *v, lo, hi);
    return DD_OK;
}

void dd_model_cfg_unused(const dd_model *m, const char *field, int *v) {
    if (*v != 0) dd_log(DD_LOG_WARN, "model %s ignores %s = %d", m->name, field, *v);
    *v = 0;
}

dd_status dd_model_create(const char *name, const dd_model_cfg *cfg, dd_model **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_model_create: out is NULL");
    *out = NULL;
    if (!name) return dd_error(DD_ERR_ARG, "dd_model_create: model name is NULL");
    size_t n = 0;
    const dd_model_info *reg = dd_model_registry(&n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(reg[i].name, name) != 0) continue;
        dd_model *m = NULL;
        dd_status s = reg[i].create(cfg, &m);
        if (s != DD_OK) {
            dd_model_destroy(&m);
            return s;
        }
        *out = m;
        return DD_OK;
    }
    char known[512];
    size_t len = 0;
    known[0] = '\0';
    for (size_t i = 0; i < n && len < sizeof known; i++) {
        int w = snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", reg[i].name);
        if (w < 0) break;
        len += (size_t)w;
    }
    return dd_error(DD_ERR_ARG, "unknown model '%s' (known: %s)", name, known);
}

void dd_model_destroy(dd_model **mp) {
    if (!mp || !*mp) return;
    dd_model *m = *mp;
    if (m->ops && m->ops->destroy && m->impl) m->ops->destroy(m);
    dd_param_table_free(&m->table);
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

void dd_model_init(const dd_model *m, float *params, uint64_t seed) {
    if (!m || !params) return;
    dd_rng rng;
    dd_rng_seed(&rng, seed);
    memset(params, 0, m->table.total * sizeof *params);
    m->ops->init(m, params, &rng);
}

size_t dd_model_workspace_size(const dd_model *m, int B, int T) {
    if (!m || B < 1 || T < 1) return 0;
    return m->ops->workspace(m, B, T);
}

double dd_model_flops_per_sample(const dd_model *m, int backward) {
    return m ? m->ops->flops(m, backward ? 1 : 0) : 0.0;
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
    char tmp[256], num[40];
    if (!m) {
        int w = snprintf(buf, size, "(null)");
        return w < 0 ? 0 : (size_t)w;
    }
    static const char *names[] = {"hidden", "layers", "memory", "order", "kernel", "cross"};
    const int vals[] = {m->cfg.hidden, m->cfg.layers, m->cfg.memory,
                        m->cfg.order,  m->cfg.kernel, m->cfg.cross};
    size_t len = 0;
    int w = snprintf(tmp, sizeof tmp, "%s(", m->name);
    len = w > 0 ? (size_t)w : 0;
    int first = 1;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        if (!vals[i] || len >= sizeof tmp) continue;
        w = snprintf(tmp + len, sizeof tmp - len, "%s%s=%d", first ? "" : ", ", names[i], vals[i]);
        if (w > 0) len += (size_t)w;
        first = 0;
    }
    group_digits(m->table.nparams, num, sizeof num);
    if (len < sizeof tmp) snprintf(tmp + len, sizeof tmp - len, "): %s parameters", num);
    w = snprintf(buf, size, "%s", tmp);
    return w < 0 ? 0 : (size_t)w;
}

/* ---- forward / backward ---- */

static dd_status check_dims(const dd_model *m, const char *fn, int B, int T) {
    if (B < 1 || T < 1)
        return dd_error(DD_ERR_ARG, "%s (model %s): B = %d and T = %d must be >= 1", fn, m->name,
                        B, T);
    if ((size_t)B * (size_t)T > MODEL_MAX_ROWS)
        return dd_error(DD_ERR_ARG, "%s (model %s): B*T = %zu exceeds %zu", fn, m->name,
                        (size_t)B * (size_t)T, MODEL_MAX_ROWS);
    return DD_OK;
}

dd_status dd_model_forward(const dd_model *m, const float *params, const float *x, float *y,
                           int B, int T, float *ws) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_forward: model is NULL");
    if (!params || !x || !y || !ws)
        return dd_error(DD_ERR_ARG, "dd_model_forward (model %s): %s is NULL", m->name,
                        !params ? "params" : !x ? "x" : !y ? "y" : "ws");
    DD_TRY(check_dims(m, "dd_model_forward", B, T));
    m->ops->forward(m, params, x, y, B, T, ws);
    return DD_OK;
}

dd_status dd_model_backward(const dd_model *m, const float *params, float *grads,
                            const float *x, const float *dy, float *dx, int B, int T, float *ws) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_backward: model is NULL");
    if (!params || !x || !dy || !ws)
        return dd_error(DD_ERR_ARG, "dd_model_backward (model %s): %s is NULL", m->name,
                        !params ? "params" : !x ? "x" : !dy ? "dy" : "ws");
    DD_TRY(check_dims(m, "dd_model_backward", B, T));
    if (!grads && !dx) return DD_OK;
    m->ops->backward(m, params, grads, x, dy, dx, B, T, ws);
    return DD_OK;
}

/* ---- streaming ---- */

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + nb && pb < pa + na;
}

dd_status dd_model_run_stream(const dd_model *m, const float *params, const dd_cf32 *x,
                              dd_cf32 *y, size_t n) {
    if (!m) return dd_error(DD_ERR_ARG, "dd_model_run_stream: model is NULL");
    if (n == 0) return DD_OK;
    if (!params || !x || !y)
        return dd_error(DD_ERR_ARG, "dd_model_run_stream (model %s): %s is NULL", m->name,
                        !params ? "params" : !x ? "x" : "y");
    if (overlaps(x, n * sizeof *x, y, n * sizeof *y))
        return dd_error(DD_ERR_ARG, "dd_model_run_stream (model %s): x and y overlap", m->name);
    dd_status s = DD_OK;
    float *ws = NULL, *state = NULL, *ybuf = NULL;
    if (m->history < 0) {
        /* Recurrent: chunks of STREAM_CHUNK samples, state carried between them. */
        int Tc = n < STREAM_CHUNK ? (int)n : STREAM_CHUNK;
        size_t ns = m->ops->state_size(m);
        ws = dd_calloc(m->ops->workspace(m, 1, Tc), sizeof *ws);
        state = dd_calloc(ns ? ns : 1, sizeof *state);
        if (!ws || !state) {
            s = dd_error(DD_ERR_NOMEM, "dd_model_run_stream (model %s): out of memory", m->name);
            goto cleanup;
        }
        for (size_t s0 = 0; s0 < n; s0 += (size_t)Tc) {
            size_t c = n - s0 < (size_t)Tc ? n - s0 : (size_t)Tc;
            m->ops->forward_state(m, params, (const float *)(x + s0), (float *)(y + s0), (int)c,
                                  state, ws);
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
        ws = dd_calloc(m->ops->workspace(m, 1, (int)Tmax), sizeof *ws);
        ybuf = dd_calloc(2 * Tmax, sizeof *ybuf);
        if (!ws || !ybuf) {
            s = dd_error(DD_ERR_NOMEM, "dd_model_run_stream (model %s): out of memory", m->name);
            goto cleanup;
        }
        for (size_t s0 = 0; s0 < n; s0 += chunk) {
            size_t c = n - s0 < chunk ? n - s0 : chunk;
            size_t f = s0 >= R ? s0 - R : 0;
            size_t len = s0 + c - f;
            m->ops->forward(m, params, (const float *)(x + f), ybuf, 1, (int)len, ws);
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
