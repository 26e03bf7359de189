/* Internal model interface (private to src/models): the vtable every model file fills in,
 * the dd_model struct behind the opaque handle, and small helpers shared by the model
 * files (configuration defaults and range checks, workspace carving, gradient views).
 * The public contract is include/distdpd/model.h; docs/models.md describes each model. */
#ifndef DD_MODEL_IMPL_H
#define DD_MODEL_IMPL_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "distdpd/core.h"
#include "distdpd/model.h"
#include "distdpd/nn.h"
#include "distdpd/param.h"

/* What a model implements. Dimensions and pointers have been checked by model.c before
 * any of these is called (B, T >= 1; x, y, ws, params non-NULL). */
typedef struct {
    /* Fills every parameter of the arena (padding stays zero) from rng. */
    void (*init)(const dd_model *m, float *params, dd_rng *rng);
    /* Floats of workspace for forward + backward over B frames of T samples. */
    size_t (*workspace)(const dd_model *m, int B, int T);
    /* x (B, T, 2) -> y (B, T, 2), zero state at each frame start; saves into ws. */
    void (*forward)(const dd_model *m, const float *params, const float *x, float *y, int B,
                    int T, float *ws);
    /* After forward with the same x, B, T, ws: grads += dL/dparams (grads may be NULL),
     * dx += dL/dx (dx may be NULL). */
    void (*backward)(const dd_model *m, const float *params, float *grads, const float *x,
                     const float *dy, float *dx, int B, int T, float *ws);
    /* Recurrent models only (NULL otherwise): floats of carried state of one frame, and a
     * forward of ONE frame (B = 1) of T samples starting from `state` (zero-filled at the
     * start of a stream) that leaves the final state in `state`. ws is sized by
     * workspace(m, 1, T). Feed-forward models stream by overlapping their history
     * (m->history samples) instead, see dd_model_run_stream in model.c. */
    size_t (*state_size)(const dd_model *m);
    void (*forward_state)(const dd_model *m, const float *params, const float *x, float *y,
                          int T, float *state, float *ws);
    /* FLOPs of forward (backward = 0) or backward (1) per sample. */
    double (*flops)(const dd_model *m, int backward);
    /* Optional (NULL: DD_ERR_UNSUPPORTED): least-squares fit, see dd_model_fit_ls. */
    dd_status (*fit_ls)(const dd_model *m, float *params, const dd_cf32 *x, const dd_cf32 *y,
                        size_t n, double *nmse_db);
    /* Optional: frees what m->impl points to (m->impl itself is freed by model.c). */
    void (*destroy)(dd_model *m);
} dd_model_ops;

/* The model handle. */
struct dd_model {
    const dd_model_ops *ops; /* the model's implementation (static) */
    const char *name;        /* registry name (static string) */
    dd_model_cfg cfg;        /* configuration with defaults filled in, unused fields 0 */
    dd_param_table table;    /* parameter layout (owned) */
    long history;            /* receptive field - 1 (feed-forward), -1 (recurrent) */
    void *impl;              /* model-specific data (owned; dd_calloc'ed impl_size bytes) */
};

/* Allocates a model with an empty table and a zeroed impl of impl_size bytes; cfg may be
 * NULL (all zero). Caller fills table/history and, on any later error, calls
 * dd_model_destroy. */
dd_status dd_model_alloc(const char *name, const dd_model_ops *ops, const dd_model_cfg *cfg,
                         size_t impl_size, dd_model **out);

/* Allocates the model as dd_model_alloc, then runs build(m) (defaults, checks, table,
 * history); on any error the model is destroyed and *out stays NULL. */
dd_status dd_model_build(const char *name, const dd_model_ops *ops, const dd_model_cfg *cfg,
                         size_t impl_size, dd_status (*build)(dd_model *m), dd_model **out);

/* Applies the default to one configuration field and checks its range:
 * *v == 0 -> def; then lo <= *v <= hi or DD_ERR_ARG "model <name>: <field> = <v> is out of
 * range [lo, hi]". */
dd_status dd_model_cfg_field(const dd_model *m, const char *field, int *v, int def, int lo,
                             int hi);
/* A field this model does not use: logs a warning when non-zero and sets it to 0. */
void dd_model_cfg_unused(const dd_model *m, const char *field, int *v);

/* Registry entries (one per model file). */
dd_status dd_model_create_gmp(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_mp(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_rvtdnn(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_arvtdnn(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_gru(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_dgru(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_lstm(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_tcn(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_resnet(const dd_model_cfg *cfg, dd_model **out);
dd_status dd_model_create_hammerstein(const dd_model_cfg *cfg, dd_model **out);

/* ---- workspace carving: one layout function serves both sizing and pointer setup ---- */

/* Bump allocator over a workspace; base == NULL only counts. Every block starts at a
 * multiple of 16 floats (64 bytes). */
typedef struct {
    float *base;  /* workspace or NULL (sizing pass) */
    size_t used;  /* floats handed out so far, padding included */
} dd_ws_carver;

static inline float *dd_ws_take(dd_ws_carver *c, size_t n) {
    float *p = c->base ? c->base + c->used : NULL;
    c->used += (n + 15) / 16 * 16;
    return p;
}

/* arena + off, or NULL when arena is NULL (gradient outputs that are not wanted). */
static inline float *dd_gview(float *arena, size_t off) { return arena ? arena + off : NULL; }

/* Floats per flop counting: a multiply-add is 2 flops. */
#define DD_MAC 2.0

#endif
