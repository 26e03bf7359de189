/* Internal model interface (private to src/models): the stages and model-level operations
 * every model file fills in, its registry definition (DD_MODEL_DEFINE), the dd_model struct
 * behind the opaque handle, and small helpers shared by the model files (options,
 * workspace carving).
 * The public contract is include/distdpd/model.h; docs/models.md describes each model. */
#ifndef DD_MODEL_IMPL_H
#define DD_MODEL_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "distdpd/core.h"
#include "distdpd/model.h"
#include "distdpd/nn.h"
#include "distdpd/param.h"

typedef struct dd_stage_def dd_stage_def;

/* A stage's view of its parameters: p[i] (and g[i]) is arena float lo + i, so a layer at
 * arena offset off is DD_SP(sp, off). A stage may be given only its own slice. */
typedef struct {
    const float *p; /* parameters of the stage */
    float *g;       /* gradients of the stage (backward adds into them); NULL: not wanted */
    size_t lo;      /* arena offset of p[0] and g[0] */
    int din_set;    /* backward of a stage with ops->sets_din: din holds garbage and is to be
                     * written, not added into (it is the framework's buffer, never dx0) */
} dd_stage_params;
#define DD_SP(sp, off) ((sp)->p + ((off) - (sp)->lo))
#define DD_SG(sp, off) ((sp)->g ? (sp)->g + ((off) - (sp)->lo) : (float *)0)

/* What a stage implements. B, T >= 1 and the pointers are checked by model.c. Activations
 * are (B, T, width) row-major; x0 is the model input (B, T, 2). */
typedef struct {
    /* Floats the stage keeps from forward to backward (saved activations), and floats it
     * uses only during one call (NULL: none). */
    size_t (*saved)(const dd_model *m, const dd_stage_def *st, int B, int T);
    size_t (*scratch)(const dd_model *m, const dd_stage_def *st, int B, int T);
    /* The first floats of that scratch which forward and forward_state use: all inference
     * gets (dd_model_infer_workspace, streaming). NULL: all of scratch; a stage whose
     * forward uses none says so with dd_stage_no_scratch. */
    size_t (*scratch_fwd)(const dd_model *m, const dd_stage_def *st, int B, int T);
    /* in (B, T, in_w) -> out (B, T, out_w) (overwritten); fills saved. */
    void (*forward)(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                    const float *in, const float *x0, float *out, int B, int T, float *saved,
                    float *scratch);
    /* After forward with the same in, x0, B, T and saved: given dout, ADDS dL/dparams into
     * sp->g (when not NULL), dL/din into din and dL/dx0 into dx0 (each may be NULL; din
     * and dx0 may be the same buffer: both are only added into). Leaves saved intact, so
     * it may run again. */
    void (*backward)(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                     const float *in, const float *x0, const float *dout, float *din, float *dx0,
                     int B, int T, float *saved, float *scratch);
    /* FLOPs per sample of forward (backward = 0) or backward (1). */
    double (*flops)(const dd_model *m, const dd_stage_def *st, int backward);
    /* 1: backward honours sp->din_set (writes din whole, the same floats as adding into
     * zeros), so the framework does not clear its inter-stage gradient buffer first (a
     * memset of B T in_w floats per stage). 0: din is cleared for it. */
    int sets_din;
    /* Recurrent stages only (NULL otherwise): floats of state carried from one chunk of a
     * stream to the next, per frame, and a forward of B frames starting from `state`
     * (B x state_size floats, each part of the state laid out (B, width); zeros at the
     * start of a stream) that leaves the final states in it. The other stages of a
     * recurrent model must be memoryless (streamed by plain forward). */
    size_t (*state_size)(const dd_model *m, const dd_stage_def *st);
    void (*forward_state)(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                          const float *in, const float *x0, float *out, int B, int T, float *state,
                          float *saved, float *scratch);
} dd_stage_ops;

/* scratch_fwd of a stage whose forward uses no scratch (only its backward does). */
size_t dd_stage_no_scratch(const dd_model *m, const dd_stage_def *st, int B, int T);

/* The final step's row of each of B frames of out (B, T, H) into state (B, H). */
static inline void dd_stage_final_rows(float *state, const float *out, int B, int T, size_t H) {
    for (size_t b = 0; b < (size_t)B; b++)
        memcpy(state + b * H, out + (b * (size_t)T + (size_t)(T - 1)) * H, H * sizeof(float));
}

/* One stage of a built model (model.h, "Stages"). */
struct dd_stage_def {
    const dd_stage_ops *ops; /* its implementation (static) */
    char name[32];           /* e.g. "blocks.3" */
    int arg;                 /* the model's own index for it (block or layer number) */
    const void *ref;         /* the model's own data for it (e.g. its layer in m->impl) */
    int in_w, out_w;         /* activation widths */
    size_t e0, e1;           /* table entries [e0, e1) */
    size_t lo, hi;           /* arena floats [lo, hi), set when the model is complete */
};

/* What a model implements beyond its stages. */
typedef struct {
    /* Fills every parameter of the arena (padding stays zero) from rng. */
    void (*init)(const dd_model *m, float *params, dd_rng *rng);
    /* Optional (NULL: DD_ERR_UNSUPPORTED): least-squares fit, see dd_model_fit_ls. */
    dd_status (*fit_ls)(const dd_model *m, float *params, const dd_cf32 *x, const dd_cf32 *y,
                        size_t n, double *nmse_db);
    /* Optional: frees what m->impl points to (m->impl itself is freed by model.c). */
    void (*destroy)(dd_model *m);
    /* 1: build() also makes tensor-parallel shards (dd_model_tp_size(m) > 1: the shard's
     * shapes, dd_model_tp_split for every split entry, stages that call the group);
     * 0: dd_model_create_tp refuses T > 1 with DD_ERR_UNSUPPORTED. */
    int tensor_parallel;
    /* Frames per batch chunk of a training step at most (dd_model_chunk_frames); 0: the
     * default, DD_MODEL_CHUNK_FRAMES. */
    int chunk_frames;
} dd_model_ops;

/* A model's definition, behind its registry entry (dd_model_info.def). */
typedef struct {
    const dd_model_ops *ops; /* model-level operations */
    size_t impl_size;        /* bytes of m->impl (zeroed) */
    /* Builds the model: reads its options (dd_model_opt), adds its parameters and stages
     * (dd_model_add_stage after each stage's entries) and sets m->history. The options
     * have been defaulted and range-checked before. */
    dd_status (*build)(dd_model *m);
} dd_model_def;

/* Defines the registry entry dd_model_<NAME> of a model file (registry.c lists it). */
#define DD_MODEL_DEFINE(NAME, SUMMARY, OPTS, OPS, IMPL, BUILD)                  \
    static const dd_model_def dd_model_def_##NAME = {OPS, sizeof(IMPL), BUILD}; \
    const dd_model_info dd_model_##NAME = {#NAME, SUMMARY, OPTS, &dd_model_def_##NAME}

/* The model handle. */
struct dd_model {
    const dd_model_ops *ops;   /* the model's implementation (static) */
    const dd_model_info *info; /* its registry entry */
    const char *name;          /* registry name (static string) */
    dd_model_cfg cfg;          /* configuration with defaults filled in, unused fields 0 */
    dd_param_table table;      /* parameter layout (owned) */
    long history;              /* receptive field - 1 (feed-forward), -1 (recurrent) */
    unsigned layout;           /* dd_model_stage_layout: 0, or the model's own value when what
                                * crosses its stage boundaries depends on the machine */
    dd_stage_def *stages;      /* nstages stages in order (owned) */
    size_t nstages, capstages;
    void *impl;                /* model-specific data (owned; impl_size zeroed bytes) */
    struct dd_model_tpx *tpx;  /* tensor-parallel shard state (owned); NULL: whole model */
    dd_tp_run *runs;           /* dd_model_tp_runs (owned) */
    size_t nruns;
};

/* The value of option `name` of a model (after defaults). 0 for an option it lacks. */
int dd_model_opt(const dd_model *m, const char *name);

/* Appends a stage owning the table entries added since the previous stage (or since the
 * start). name is copied (<= 31 characters). Errors: DD_ERR_ARG (widths < 1, widths that
 * do not chain), DD_ERR_NOMEM. */
dd_status dd_model_add_stage(dd_model *m, const dd_stage_ops *ops, const char *name, int arg,
                             const void *ref, int in_w, int out_w);

/* Shared stage kinds (stages.c); ref points at the layer in m->impl:
 *   dd_stage_dense  a dd_dense_layer, linear (in_dim -> out_dim)
 *   dd_stage_gru    a dd_gru_layer (input_size -> hidden_size), recurrent (streams)
 *   dd_stage_lstm   a dd_lstm_layer, recurrent (streams)
 *   dd_stage_skip_head  a dd_conv1d_layer 1x1 C -> 2, plus the model input x0 (the
 *                   output head of resnet and tcn) */
extern const dd_stage_ops dd_stage_dense;
extern const dd_stage_ops dd_stage_gru;
extern const dd_stage_ops dd_stage_lstm;
extern const dd_stage_ops dd_stage_skip_head;
/*   dd_stage_gru_dfm, dd_stage_dense_dfm  dd_stage_gru / dd_stage_dense whose gradient
 *                   between them is feature-major (stages.c): used together only */
extern const dd_stage_ops dd_stage_gru_dfm;
extern const dd_stage_ops dd_stage_dense_dfm;
/* Tensor-parallel shards (stages_tp.c); ref points at a dd_rnn_shard_layer:
 *   dd_stage_gru_tp, dd_stage_lstm_tp  a GRU / LSTM layer's shard (recurrent, streams) */
extern const dd_stage_ops dd_stage_gru_tp;
extern const dd_stage_ops dd_stage_lstm_tp;
/* A convolution layer's forward / backward (adding into the gradients of sp, when kept)
 * with the stage's parameters. */
void dd_stage_conv_fwd(const dd_conv1d_layer *l, const dd_stage_params *sp, float *out, const float *in, int B,
                       int T);
void dd_stage_conv_bwd(const dd_conv1d_layer *l, const dd_stage_params *sp, float *din, const float *dout,
                       const float *in, int B, int T);

/* ---- tensor parallelism (tp.c; model.h "Tensor parallelism", docs/models.md) ---- */

/* An entry split over the group: the shard holds, of every one of `groups` equal blocks
 * along dimension `axis` (gate blocks; 1 for a plain split), the rank's 1/T of it. */
typedef struct {
    size_t entry;
    int axis, groups;
} dd_tp_split;

typedef struct dd_model_tpx {
    dd_model_tp tp;     /* the group (size > 1) */
    dd_status err;      /* first error of a collective in the running stage (model.c
                           returns it after the stage and clears it) */
    dd_model *whole;    /* the whole model (its table and init), owned */
    dd_tp_split *split; /* split entries; the others are replicated */
    size_t nsplit, capsplit;
} dd_model_tpx;

/* The group of a shard (only for dd_model_tp_size(m) > 1). */
static inline const dd_model_tp *dd_model_tp_group(const dd_model *m) { return &m->tpx->tp; }
/* Records s when it is the first error of the running stage's collectives; returns 1
 * when the stage may go on (no error so far), 0 otherwise. */
int dd_model_tp_ok(const dd_model *m, dd_status s);
/* The recorded error (DD_OK if none), cleared; for model.c after every stage. */
dd_status dd_model_tp_take_error(const dd_model *m);
/* Marks the entry at arena offset `offset` (just added by build) as split (see
 * dd_tp_split); nothing for a whole model. Errors: DD_ERR_INTERNAL (no entry there),
 * DD_ERR_NOMEM. */
dd_status dd_model_tp_split(dd_model *m, size_t offset, int axis, int groups);
/* The shard of recurrent layer k ("rnn" layer k: H / T units of each of `gates` gate
 * blocks, GRU 3, LSTM 4) added to the table, its weights and biases split along axis 0
 * in `gates` groups (dd_model_tp_split). Errors: those of dd_rnn_shard_layer_add. */
dd_status dd_model_tp_rnn_add(dd_model *m, int k, int gates, int input_size, int hidden, dd_rnn_shard_layer *l);
/* DD_ERR_ARG "NAME --OPT V is not divisible by --tp T" unless T divides option opt. */
dd_status dd_model_tp_divides(const dd_model *m, const char *opt);
/* After build and the stages: the runs (one per entry for a whole model; for a shard the
 * whole model is built and every entry checked against its whole counterpart). */
dd_status dd_model_tp_finish(dd_model *m);
void dd_model_tp_free(dd_model *m);
/* dd_model_init of a shard. */
dd_status dd_model_tp_init(const dd_model *m, float *params, uint64_t seed);
/* dd_model_create with a group (NULL or size 1: the whole model); model.c. */
dd_status dd_model_create_with(const char *name, const dd_model_cfg *cfg, const dd_model_tp *tp, dd_model **out);

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

/* Depth scaling of residual branches (docs/models.md, "Initialisation of deep models"):
 * min(1, sqrt(L0 / L)) for L blocks where L0 is the model's default depth, so that up to
 * L0 blocks keep PyTorch's initialisation and deeper stacks add to the residual stream the
 * variance that L0 blocks add. */
static inline double dd_model_depth_scale(int L, int L0) { return L > L0 ? sqrt((double)L0 / (double)L) : 1.0; }

/* p[0..n-1] *= s. */
static inline void dd_model_scale(float *p, size_t n, double s) {
    for (size_t i = 0; i < n; i++) p[i] = (float)(p[i] * s);
}

/* Floats per flop counting: a multiply-add is 2 flops. */
#define DD_MAC 2.0

#endif
