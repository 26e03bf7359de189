/* Models: PA behavioural models and DPDs built from the layers of nn.h, selected by name
 * from a registry. A model maps a batch of I/Q frames (B, T, 2) to (B, T, 2); it owns a
 * parameter table (param.h) and nothing else: parameters, gradients and optimiser state
 * live in the caller's flat arenas, so the trainer, optimisers, checkpoints and every
 * parallel strategy see a model only through its table and arenas.
 *
 * Adding a model is one file in src/models/ plus one line in the registry
 * (src/models/registry.c); the trainer never names a model.
 */
#ifndef DISTDPD_MODEL_H
#define DISTDPD_MODEL_H

#include <stddef.h>

#include "distdpd/core.h"
#include "distdpd/nn.h"
#include "distdpd/param.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hyper-parameters: named integer options, as many as a model declares (its registry
 * entry lists them, with defaults and ranges: dd_model_info.opts; `distdpd models` shows
 * them). The zero-initialised struct sets none: every option is the model's default.
 * dd_model_create fills in the defaults, so the configuration of a created model
 * (dd_model_config) lists exactly its declared options with the values used, in the
 * order the model declares them. Options a model does not declare are ignored (logged at
 * DD_LOG_WARN). No list of option names is shared between models: a new model declares
 * its own. */
#define DD_MODEL_MAX_OPTS 16     /* options in one configuration */
#define DD_MODEL_OPT_NAME_MAX 24 /* option names are 1..23 characters [a-z0-9_] */
typedef struct {
    char name[DD_MODEL_OPT_NAME_MAX];
    int value;
} dd_model_optval;
typedef struct {
    int n;                                /* options set, [0, DD_MODEL_MAX_OPTS] */
    dd_model_optval v[DD_MODEL_MAX_OPTS]; /* in the order they were set */
} dd_model_cfg;

/* The value of option `name` in c; 0 when it is not set (= the model's default). */
int dd_model_cfg_get(const dd_model_cfg *c, const char *name);
/* Sets option `name` to value (replacing an earlier value; 0 = unset it: the default).
 * Errors: DD_ERR_ARG (name not 1..23 characters of [a-z0-9_], more than
 * DD_MODEL_MAX_OPTS options). */
dd_status dd_model_cfg_set(dd_model_cfg *c, const char *name, int value);
/* Sets the options of a "name=value,name=value" list (decimal integers; "" sets none).
 * Errors: DD_ERR_ARG naming the bad item; c is unchanged on error. */
dd_status dd_model_cfg_parse(dd_model_cfg *c, const char *list);
/* "name=value,name=value" of the options set (always NUL-terminated when size > 0);
 * returns the length it needed, like snprintf. dd_model_cfg_parse reads it back. */
size_t dd_model_cfg_format(const dd_model_cfg *c, char *buf, size_t size);
/* 1 when a and b set the same options to the same values (in any order). */
int dd_model_cfg_equal(const dd_model_cfg *a, const dd_model_cfg *b);

typedef struct dd_model dd_model;

/* One hyper-parameter a model declares (its registry entry lists them): the models read
 * their own options, so adding a model never touches a shared structure. */
typedef struct {
    const char *name;  /* option name, e.g. "hidden" (also the CLI flag --hidden) */
    const char *help;  /* one line for --help / `distdpd models` */
    int def;           /* default, used when the configuration leaves it 0 */
    int lo, hi;        /* valid range [lo, hi], lo >= 1 */
} dd_model_opt_info;

/* Registry entry (one per model file; the registry is one line per model). */
typedef struct {
    const char *name;    /* e.g. "gru" */
    const char *summary; /* one line for --help / `distdpd models` */
    const dd_model_opt_info *opts; /* the options it reads, terminated by {NULL} */
    const void *def;     /* the model's definition (internal to src/models) */
} dd_model_info;

/* Sets the configuration field that holds option `name` (a dd_model_opt_info name:
 * "hidden", "layers", "memory", "order", "kernel", "cross") to value, so that callers
 * (the command line) can fill and read a configuration through a registry entry's opts
 * table without naming the fields. Errors: DD_ERR_ARG (NULL, or a name with no field). */
dd_status dd_model_cfg_set(dd_model_cfg *cfg, const char *name, int value);
/* The value of that field (0 for NULL or a name with no field). */
int dd_model_cfg_get(const dd_model_cfg *cfg, const char *name);

/* The registered models, in display order (an array of *count pointers). */
const dd_model_info *const *dd_model_registry(size_t *count);
/* The registry entry called name, or NULL. */
const dd_model_info *dd_model_find(const char *name);

/* Builds the model `name` with cfg (NULL = all defaults). Unknown name or invalid cfg:
 * DD_ERR_ARG naming the model and field; *out stays NULL. Caller destroys. */
dd_status dd_model_create(const char *name, const dd_model_cfg *cfg, dd_model **out);
void dd_model_destroy(dd_model **m);

const char *dd_model_name(const dd_model *m);
const dd_model_cfg *dd_model_config(const dd_model *m);
const dd_param_table *dd_model_params(const dd_model *m);
/* Number of parameters (without arena padding). */
size_t dd_model_num_params(const dd_model *m);

/* Initialises params (an arena laid out by the table) deterministically from seed. A
 * tensor-parallel shard gets exactly the whole model's initial values mapped through
 * dd_model_tp_runs: it initialises the whole model into a temporary arena (allocated once
 * per call, freed before returning) and copies its runs. Errors: DD_ERR_NOMEM (a shard's
 * temporary arena; params is then left zero); a whole model always returns DD_OK. */
dd_status dd_model_init(const dd_model *m, float *params, uint64_t seed);

/* Floats of workspace forward+backward need for a batch of B frames of T samples. */
size_t dd_model_workspace_size(const dd_model *m, int B, int T);

/* Forward: x (B, T, 2) I/Q frames -> y (B, T, 2), each frame starting from zero state
 * (zero hidden state, zero history). ws: dd_model_workspace_size(B, T) floats; forward
 * saves in it what backward needs. */
dd_status dd_model_forward(const dd_model *m, const float *params, const float *x, float *y,
                           int B, int T, float *ws);

/* Backward after forward with the same x, B, T, ws: given dy = dL/dy (B, T, 2), ADDS
 * dL/dparams into grads (NULL: skip) and dL/dx into dx (NULL: skip). */
dd_status dd_model_backward(const dd_model *m, const float *params, float *grads,
                            const float *x, const float *dy, float *dx, int B, int T, float *ws);

/* ------------------------------------------------------------------------------------
 * Stages. A model is an ordered list of stages (a layer or a block: a GRU layer, a dense
 * head, a conv block, a residual block, a Hammerstein block). Stage s maps an activation
 * (B, T, in_width) to (B, T, out_width) (stage 0 reads the model input, width 2; the last
 * stage writes the output, width 2) and may also read the model input x0 (B, T, 2) (the
 * input added back by residual models). Each stage owns a contiguous run of parameter-
 * table entries [e0, e1), so a contiguous slice [lo, hi) of every arena; stages follow
 * each other in the table (lo of stage 0 is 0, hi of the last is the table total, each
 * stage's hi is the next one's lo). dd_model_forward/backward run the stages in order;
 * the functions below let a caller run a range of stages with parameters it provides
 * stage by stage (sharded or pipelined training) and learn when each stage's gradients
 * are final (to start their reduction while earlier stages are still in backward).
 * ------------------------------------------------------------------------------------ */

#define DD_MODEL_MAX_STAGES 1026 /* stages of one model, at most (1024 blocks, a stem and a head) */

typedef struct {
    const char *name;      /* e.g. "blocks.3" (owned by the model) */
    int in_width;          /* activation channels in */
    int out_width;         /* activation channels out */
    size_t e0, e1;         /* parameter-table entries [e0, e1) */
    size_t lo, hi;         /* arena floats [lo, hi) (padding included) */
    double flops_fwd;      /* forward FLOPs per sample */
    double flops_bwd;      /* backward FLOPs per sample */
} dd_stage_info;

size_t dd_model_num_stages(const dd_model *m);
/* What crosses the stage boundaries, where that depends on the machine the model was built
 * on: 0 for most models; tcn 1 where each Hardswish runs at the front of the next stage
 * (plain stacks at AVX2 and the generic level: the stages pass pre-activations), 0 where
 * it ends each layer (AVX-512, residual stacks, tensor-parallel shards). The parameters
 * and the numbers are the same either way, but processes that pass activations between
 * stages (pipeline parallelism) must agree on it. */
unsigned dd_model_stage_layout(const dd_model *m);
/* Fills *info for stage s. Errors: DD_ERR_ARG (s out of range). */
dd_status dd_model_stage_info(const dd_model *m, size_t s, dd_stage_info *info);

/* Where a range run takes parameters and puts gradients. With params set, every stage
 * reads params + its lo; with params NULL, stage_params supplies stage s's slice before
 * its forward (bwd = 0) and its backward (bwd = 1): (*p)[i] is arena float lo + i. With
 * grads set (and params), backward adds into grads + its lo; else stage_grads (may be
 * NULL) gives the slice its backward adds into (*g = NULL: none). stage_done (may be NULL) is called
 * after each stage's forward (bwd = 0) and backward (bwd = 1): after a backward, the
 * stage's gradient slice is final. An error from a callback stops the run and is
 * returned. */
typedef struct {
    const float *params;
    float *grads;
    void *user;
    dd_status (*stage_params)(void *user, size_t s, int bwd, const float **p);
    dd_status (*stage_grads)(void *user, size_t s, float **g);
    dd_status (*stage_done)(void *user, size_t s, int bwd);
} dd_stage_src;

/* Workspace floats for running stages [s0, s1) over B frames of T samples: what the
 * stages save from forward to backward, the activations between them and scratch. */
size_t dd_model_range_workspace(const dd_model *m, size_t s0, size_t s1, int B, int T);
/* Floats of that workspace a stage range keeps from forward to backward (saved
 * activations, the boundaries between the stages), i.e. without the scratch. */
size_t dd_model_range_saved(const dd_model *m, size_t s0, size_t s1, int B, int T);

/* Forward of stages [s0, s1) (0 <= s0 < s1 <= stages): in (B, T, in_width of s0) ->
 * out (B, T, out_width of s1 - 1); x0 (B, T, 2) is the model input (== in when s0 = 0).
 * ws: dd_model_range_workspace(m, s0, s1, B, T) floats; in must stay unchanged until
 * the matching backward. */
dd_status dd_model_range_forward(const dd_model *m, size_t s0, size_t s1, const dd_stage_src *src,
                                 const float *in, const float *x0, float *out, int B, int T,
                                 float *ws);
/* Backward after that forward: dout (B, T, out_width of s1 - 1) -> din += dL/din (NULL:
 * not wanted) and dx0 += dL/dx0 through the stages' reads of x0 (NULL: not wanted; may
 * equal din when s0 = 0), parameter gradients added as src says, stages in reverse
 * order. */
dd_status dd_model_range_backward(const dd_model *m, size_t s0, size_t s1, const dd_stage_src *src,
                                  const float *in, const float *x0, const float *dout, float *din,
                                  float *dx0, int B, int T, float *ws);

/* Forward only (evaluation, inference): the same output as dd_model_forward, in a
 * workspace of dd_model_infer_workspace(m, B, T) floats, which keeps nothing for a
 * backward (the stages share one saved area and the activations between them alternate
 * between two buffers), so it grows with the widest stage, not with the depth. Parameters
 * from a stage source (its callbacks are made for every stage, in order). */
size_t dd_model_infer_workspace(const dd_model *m, int B, int T);
dd_status dd_model_infer(const dd_model *m, const dd_stage_src *src, const float *x, float *y, int B, int T,
                         float *ws);

/* dd_model_infer of B frames of a recurrent model (dd_model_history < 0) in chunks of Tc
 * steps, each stage's state carried from one chunk to the next: the same output as
 * dd_model_infer(x, y, B, T), in dd_model_infer_chunked_workspace(m, B, Tc) floats (0 for
 * a model that is not recurrent), which grows with B x Tc, not with T (evaluation on long
 * segments). Errors: DD_ERR_ARG (not recurrent, dimensions, NULL). */
size_t dd_model_infer_chunked_workspace(const dd_model *m, int B, int Tc);
dd_status dd_model_infer_chunked(const dd_model *m, const dd_stage_src *src, const float *x, float *y, int B, int T,
                                 int Tc, float *ws);

/* dd_model_run_stream with parameters from a stage source: its callbacks are made for
 * every stage of every chunk, in order, so ranks streaming the same length keep their
 * collectives matched. */
dd_status dd_model_run_stream_src(const dd_model *m, const dd_stage_src *src, const dd_cf32 *x, dd_cf32 *y,
                                  size_t n);

/* dd_model_backward with a callback after each stage's backward (last stage first):
 * done(user, lo, hi) says gradients [lo, hi) of the arena are final. The ranges descend
 * and tile [0, total). */
dd_status dd_model_backward_cb(const dd_model *m, const float *params, float *grads,
                               const float *x, const float *dy, float *dx, int B, int T, float *ws,
                               dd_status (*done)(void *user, size_t lo, size_t hi), void *user);

/* Runs the model over one continuous stream x (n samples) -> y, as if it were one frame
 * of length n starting from zero state, in bounded memory (chunks, carrying recurrent
 * state or input history between chunks). */
dd_status dd_model_run_stream(const dd_model *m, const float *params, const dd_cf32 *x,
                              dd_cf32 *y, size_t n);

/* Approximate floating-point operations of forward (and of backward) per sample,
 * for throughput reports. */
double dd_model_flops_per_sample(const dd_model *m, int backward);

/* Input history an output sample depends on, in samples (receptive field - 1) for
 * feed-forward models (0: memoryless); -1 for recurrent models (unbounded memory). */
long dd_model_history(const dd_model *m);

/* The widest batch chunk, in frames, that a training step runs the model on
 * (dd_train_chunks): DD_MODEL_CHUNK_FRAMES unless the model's kernels prefer narrower
 * chunks (tcn: 16, whose activations then stay in the last-level cache). */
#define DD_MODEL_CHUNK_FRAMES 32
int dd_model_chunk_frames(const dd_model *m);

/* One line "name(field=value, ...): N parameters" into buf (always NUL-terminated when
 * size > 0); returns the length it needed, like snprintf. */
size_t dd_model_describe(const dd_model *m, char *buf, size_t size);

/* ------------------------------------------------------------------------------------
 * Tensor parallelism (Megatron-style; docs/models.md, "Tensor parallelism"). A group of
 * T ranks runs one model together: each rank creates its shard with dd_model_create_tp
 * and holds only the shard's parameters (and gradients, optimiser state); every stage
 * computes its part and calls the group's collectives through the callbacks below, so
 * models never depend on MPI (src/parallel/tp.c implements the callbacks on a dd_comm:
 * dd_tp_group_create, parallel.h). A shard has the whole model's stages with the same
 * names and widths, the same parameter names with the shard's shapes, and at its stage
 * boundaries the whole model's semantics: every stage's input and output activation
 * (B, T, width) are whole on every rank of the group (replicated), so pipeline stages and
 * data parallelism compose with tensor parallelism unchanged. The parameter gradients of
 * a shard are the shard of the whole model's gradients (a replicated entry: the whole
 * gradient, the same bits on every rank).
 * Every rank of the group calls forward/backward/infer/range runs and streams together
 * with the same B, T (and stage ranges); the collectives happen inside the stages. An
 * error of a collective ends the stage's communication and is returned after the stage
 * (the group cannot be used afterwards: the other ranks may wait in a collective).
 * ------------------------------------------------------------------------------------ */

/* The group's callbacks (the struct is nn.h's dd_tp_ops): size T >= 1, rank in [0, T),
 * user, allreduce (in-place sum), allgather (n floats per rank -> T n, rank order) and
 * the optional reduce_scatter (NULL: an allreduce stands in; the GRU and LSTM shards
 * reduce-scatter dL/dh every step when it is set). */
typedef dd_tp_ops dd_model_tp;

/* Rank tp->rank's shard of model `name` (same stages and stage names, same parameter
 * names in the same order, the shard's shapes). tp->size == 1 is the whole model
 * (dd_model_create, bit for bit). The struct is copied; tp->user must outlive the model.
 * Errors: DD_ERR_ARG (unknown model or bad option, as dd_model_create; tp NULL, size < 1,
 * rank out of range, size > 1 without allreduce or allgather; a width the group does not
 * divide: "resnet --hidden 10 is not divisible by --tp 4"), DD_ERR_UNSUPPORTED ("model
 * gmp has no tensor-parallel form (models with one: ...)"). Tensor-parallel forms:
 * resnet, tcn, hammerstein, gru, lstm; what each splits is in docs/models.md. */
dd_status dd_model_create_tp(const char *name, const dd_model_cfg *cfg, const dd_model_tp *tp, dd_model **out);
/* The group's size and this shard's rank (1 and 0 for a whole model; 1 and 0 for NULL). */
int dd_model_tp_size(const dd_model *m);
int dd_model_tp_rank(const dd_model *m);

/* Where a shard's floats come from in the whole model's arena: floats [shard, shard +
 * len) of the shard's arena are floats [full, full + len) of the whole model's (the
 * dd_model_create arena of the same name and configuration). Runs ascend in shard
 * offset, lie inside one table entry each and cover every parameter (not the padding).
 * replicated = 1: every rank of the group holds these floats, and their gradients are
 * the same on every rank (a global gradient norm counts them once); 0: this rank's part
 * of a split entry. A whole model returns one run per entry (full == shard, replicated). */
typedef struct {
    size_t full, shard, len;
    int replicated;
} dd_tp_run;
/* *runs stays valid while m lives. Errors: DD_ERR_ARG (NULL arguments). */
dd_status dd_model_tp_runs(const dd_model *m, const dd_tp_run **runs, size_t *n);

/* Megatron's four mappings between a tensor that is whole on every rank and its shards
 * (tensor_parallel/mappings.py), each a forward and its backward (the dual), on float32
 * row-major tensors; every rank of the group calls them together. "x" is the whole
 * tensor, (rows, cols) or n floats; "xl" a rank's slice of its last dimension, (rows,
 * cols / T): columns [rank cols/T, (rank+1) cols/T). Outputs are overwritten.
 *   copy-to-group      fwd: identity              bwd: allreduce (sum of the ranks' dx)
 *   reduce-from-group  fwd: allreduce             bwd: identity
 *   scatter-to-group   fwd: keep own slice        bwd: allgather along the last dimension
 *   gather-from-group  fwd: allgather (last dim)  bwd: keep own slice
 * tmp: rows * cols floats for the allgathers when rows > 1 and T > 1 (else may be NULL).
 * Errors: DD_ERR_ARG (NULL, a bad group, cols not divisible by T, tmp missing), or the
 * collective's error. */
dd_status dd_tp_copy_fwd(const dd_model_tp *tp, float *x, size_t n);
dd_status dd_tp_copy_bwd(const dd_model_tp *tp, float *dx, size_t n);
dd_status dd_tp_reduce_fwd(const dd_model_tp *tp, float *x, size_t n);
dd_status dd_tp_reduce_bwd(const dd_model_tp *tp, float *dx, size_t n);
dd_status dd_tp_scatter_fwd(const dd_model_tp *tp, const float *x, float *xl, size_t rows, size_t cols);
dd_status dd_tp_scatter_bwd(const dd_model_tp *tp, const float *dxl, float *dx, size_t rows, size_t cols,
                            float *tmp);
dd_status dd_tp_gather_fwd(const dd_model_tp *tp, const float *xl, float *x, size_t rows, size_t cols, float *tmp);
dd_status dd_tp_gather_bwd(const dd_model_tp *tp, const float *dx, float *dxl, size_t rows, size_t cols);

/* Least-squares fit of the model's parameters to y ~ model(x) over one continuous
 * recording (n samples, zero history before x[0]), written into params (an arena laid
 * out by the table; other entries untouched). Linear-in-parameters models only (gmp,
 * mp); others: DD_ERR_UNSUPPORTED. nmse_db (may be NULL) receives the fit's NMSE on its
 * own data. Errors as dd_gmp_fit (fit.h): DD_ERR_RANGE (n too small, non-finite data),
 * DD_ERR_NUMERIC (rank-deficient basis). */
dd_status dd_model_fit_ls(const dd_model *m, float *params, const dd_cf32 *x, const dd_cf32 *y,
                          size_t n, double *nmse_db);

#ifdef __cplusplus
}
#endif
#endif
