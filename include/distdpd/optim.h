/* Optimisers, gradient-norm clipping and learning-rate schedules.
 *
 * Everything here works on flat float32 arenas: a model's parameters w[0..n-1] and
 * gradients g[0..n-1] are each one contiguous array (see param.h), and the optimiser's
 * state (momentum buffer, Adam moments) is one contiguous array owned by the optimiser.
 *
 * Semantics are those of PyTorch 1.13 (torch.optim.SGD / Adam / AdamW,
 * torch.nn.utils.clip_grad_norm_, torch.optim.lr_scheduler), checked against reference
 * vectors made by tools/make_optim_refs.py. The per-element arithmetic follows the order
 * of operations (and the fused multiply-adds) of torch's vectorised CPU kernels, so the
 * results usually agree with torch to the last bit; see docs/optim.md.
 *
 * Determinism: the same inputs give bit-identical outputs on every run and thread count
 * (no reductions in the optimiser; the clipping norm is a sequential double sum).
 * This module never includes mpi.h.
 */
#ifndef DISTDPD_OPTIM_H
#define DISTDPD_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------
 * Optimisers
 * ------------------------------------------------------------------------------------ */

typedef enum {
    DD_OPTIM_SGD = 0,   /* "sgd":   torch.optim.SGD (momentum, dampening, Nesterov, L2) */
    DD_OPTIM_ADAM = 1,  /* "adam":  torch.optim.Adam (L2 weight decay added to the gradient) */
    DD_OPTIM_ADAMW = 2, /* "adamw": torch.optim.AdamW (decoupled weight decay) */
    DD_OPTIM_RMSPROP = 3 /* "rmsprop": torch.optim.RMSprop (not centred, no momentum, L2) */
} dd_optim_kind;

/* Hyper-parameters. Fields an optimiser does not use are ignored (not validated). */
typedef struct {
    double lr;           /* base learning rate, finite, >= 0. Informational: each step takes
                            its own lr (from a schedule); dd_optim_cfg_default sets it. */
    double momentum;     /* SGD: momentum factor in [0, 1); 0 = plain SGD (no state) */
    double dampening;    /* SGD: dampening in [0, 1]; must be 0 when nesterov is set */
    int nesterov;        /* SGD: 0 or 1; Nesterov momentum, needs momentum > 0 */
    double beta1;        /* Adam/AdamW: first-moment decay in [0, 1) */
    double beta2;        /* Adam/AdamW: second-moment decay in [0, 1) */
    double eps;          /* Adam/AdamW: denominator term, finite, >= 0 */
    double weight_decay; /* all: finite, >= 0. SGD/Adam/RMSprop: g += wd*w (L2, coupled);
                            AdamW: w *= 1 - lr*wd before the Adam update (decoupled) */
    double alpha;        /* RMSprop: smoothing constant in [0, 1) of the squared-gradient
                            average (torch's alpha, default 0.99); eps as above */
} dd_optim_cfg;

/* PyTorch's defaults: SGD lr 0.01 (torch has none), momentum 0, dampening 0, no Nesterov,
 * wd 0; Adam lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0; AdamW the same with wd 1e-2;
 * RMSprop lr 1e-2, alpha 0.99, eps 1e-8, wd 0. */
dd_optim_cfg dd_optim_cfg_default(dd_optim_kind kind);

/* "sgd" | "adam" | "adamw" | "rmsprop" (case-sensitive) -> kind. DD_ERR_ARG names the
 * bad string. */
dd_status dd_optim_kind_parse(const char *name, dd_optim_kind *kind);
/* The name of a kind ("sgd", "adam", "adamw", "rmsprop"; "?" for an invalid value). */
const char *dd_optim_kind_name(dd_optim_kind kind);

/* Opaque optimiser: kind, configuration, step count and state arena. */
typedef struct dd_optim dd_optim;

/* Creates an optimiser for arenas of n floats (n >= 1). kind: "sgd", "adam", "adamw",
 * "rmsprop". cfg: validated (ranges above); NULL means dd_optim_cfg_default(kind). The
 * state arena (zeroed) holds n floats for SGD with momentum and for RMSprop (square_avg),
 * 2n for Adam/AdamW (exp_avg then
 * exp_avg_sq), none for plain SGD. On success *out is new and the caller frees it with
 * dd_optim_destroy(); on error *out is NULL. Errors: DD_ERR_ARG (unknown kind, value out
 * of range: the message names the field), DD_ERR_NOMEM. */
dd_status dd_optim_create(const char *kind, const dd_optim_cfg *cfg, size_t n, dd_optim **out);
/* Frees the optimiser and sets *opt to NULL. Safe on NULL and on *opt == NULL. */
void dd_optim_destroy(dd_optim **opt);

/* One optimisation step over all n elements with learning rate lr (finite, >= 0):
 * w[i] is updated in place from g[i] (g is not modified; w and g must not overlap).
 * Equivalent to dd_optim_step_range(opt, w, g, lr, 0, n) + dd_optim_step_end(opt).
 * Non-finite gradients are not checked here (check the norm from dd_clip_grad_norm);
 * they propagate into w as in torch. Errors: DD_ERR_ARG (NULL pointer, bad lr). */
dd_status dd_optim_step(dd_optim *opt, float *w, const float *g, double lr);

/* Updates only the elements [lo, hi) (0 <= lo <= hi <= n) of the step that is in
 * progress: w and g are the BASE pointers of the full arenas (element i is w[i]), so a
 * caller can update bucket by bucket (e.g. as each allreduce finishes). Every range
 * update of one step uses the same step number t = dd_optim_steps(opt) + 1; after all
 * ranges of a step have been updated (each element at most once), call
 * dd_optim_step_end() to advance the step count. Errors: DD_ERR_ARG. */
dd_status dd_optim_step_range(dd_optim *opt, float *w, const float *g, double lr, size_t lo,
                              size_t hi);
/* Ends the step in progress: the step count goes up by one. */
void dd_optim_step_end(dd_optim *opt);

/* Accessors (opt must be a valid optimiser, except for _steps/_size which return 0 for
 * NULL). Completed steps (torch's state['step']); 0 after create. */
uint64_t dd_optim_steps(const dd_optim *opt);
/* Arena length n given to create. */
size_t dd_optim_size(const dd_optim *opt);
dd_optim_kind dd_optim_get_kind(const dd_optim *opt);
/* The validated configuration (a copy is kept; the pointer lives as long as opt). */
const dd_optim_cfg *dd_optim_get_cfg(const dd_optim *opt);

/* The state arena: *count receives its length in floats (0, n or 2n; may be NULL).
 * Layout: SGD with momentum: momentum_buffer[n]; RMSprop: square_avg[n]; Adam/AdamW:
 * exp_avg[n] then exp_avg_sq[n]. Owned by opt (NULL when there is no state). A caller may read or write
 * it (e.g. to shard it), but the usual way to save it is dd_optim_state_save(). */
float *dd_optim_state(dd_optim *opt, size_t *count);

/* Resets step count and state to those of a new optimiser. */
void dd_optim_reset(dd_optim *opt);

/* Serialised state, for checkpoints: a 64-byte header (magic "DDOPTST1", version, kind,
 * n, step count, state length; host byte order) followed by the state arena.
 * dd_optim_state_bytes gives the exact size of the blob. */
size_t dd_optim_state_bytes(const dd_optim *opt);
/* Writes the blob into buf (bytes must equal dd_optim_state_bytes). Errors: DD_ERR_ARG. */
dd_status dd_optim_state_save(const dd_optim *opt, void *buf, size_t bytes);
/* Restores step count and state from a blob written by dd_optim_state_save for an
 * optimiser of the same kind, n and momentum use. The hyper-parameters (lr, betas, weight
 * decay) are NOT part of the blob: the new configuration applies from the next step.
 * On error opt is unchanged. Errors: DD_ERR_FORMAT (bad magic/version/size, with what was
 * expected), DD_ERR_MISMATCH (other kind or n: both named). */
dd_status dd_optim_state_load(dd_optim *opt, const void *buf, size_t bytes);

/* Sharded optimisers (ZeRO): an optimiser of n elements may own the slice [lo, lo + n)
 * of a model of n_total parameters; its checkpoint is still the blob of the whole model.
 * The blob's data (after the DD_OPTIM_STATE_HEADER-byte header) holds
 * dd_optim_state_arrays() arrays of n_total floats each (SGD momentum, RMSprop: 1; Adam/AdamW:
 * exp_avg then exp_avg_sq: 2; plain SGD: 0); element i of array j is float
 * j * n_total + i, so each slice's part can be placed by its owner. */
#define DD_OPTIM_STATE_HEADER 64
int dd_optim_state_arrays(const dd_optim *opt);
/* Bytes of the blob of a model of n_total parameters for this optimiser's kind. */
size_t dd_optim_state_bytes_for(const dd_optim *opt, size_t n_total);
/* Writes the header of that blob (this optimiser's kind and step count). */
dd_status dd_optim_state_header(const dd_optim *opt, size_t n_total, void *buf);
/* Restores the step count and this optimiser's slice [lo, lo + n) of every state array
 * from a blob of any n_total >= lo + n (resharding on load). On error opt is unchanged.
 * Errors: as dd_optim_state_load. */
dd_status dd_optim_state_load_slice(dd_optim *opt, const void *buf, size_t bytes, size_t lo);
/* The same for several ranges [lo[r], hi[r]) of the blob's arrays, stored one after the
 * other in this optimiser (their lengths sum to its size). Errors: as above; DD_ERR_ARG
 * when the lengths do not add up. */
dd_status dd_optim_state_load_ranges(dd_optim *opt, const void *buf, size_t bytes, const size_t *lo, const size_t *hi,
                                     size_t count);
/* The general form: floats [dst, dst + len) of each of this optimiser's state arrays take
 * floats [src, src + len) of the blob's (a tensor-parallel shard's parameters come from
 * scattered places of the whole model's); floats no run covers are zero. Errors: as
 * above; DD_ERR_ARG for a run outside this optimiser. */
typedef struct {
    size_t src, dst, len;
} dd_optim_run;
dd_status dd_optim_state_load_map(dd_optim *opt, const void *buf, size_t bytes, const dd_optim_run *runs, size_t count);

/* ------------------------------------------------------------------------------------
 * Gradient-norm clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2)
 * ------------------------------------------------------------------------------------ */

/* Sum of squares of g[0..n-1] accumulated in double, in index order (deterministic).
 * For distributed clipping: allreduce the partial sums, then dd_clip_coef(sqrt(total)). */
double dd_grad_sumsq(const float *g, size_t n);

/* torch's clip coefficient min(1, max_norm / (norm + 1e-6)), computed in double. */
double dd_clip_coef(double norm, double max_norm);

/* Scales g[0..n-1] by (float)coef (no-op when coef == 1). */
void dd_grad_scale(float *g, size_t n, double coef);

/* Clips the gradient so that its L2 norm is at most max_norm (finite, > 0): computes
 * norm = sqrt(sum g^2) in double; when max_norm / (norm + 1e-6) < 1, multiplies every
 * g[i] by that coefficient (as torch, which scales whenever norm + 1e-6 > max_norm).
 * *norm_before (may be NULL) receives the norm before clipping.
 * Unlike torch, a non-finite norm (NaN/Inf in g) leaves g unchanged and returns
 * DD_ERR_RANGE ("gradient norm is nan") so the caller can skip the step.
 * Errors: DD_ERR_ARG (NULL g with n > 0, bad max_norm), DD_ERR_RANGE. */
dd_status dd_clip_grad_norm(float *g, size_t n, double max_norm, double *norm_before);

/* ------------------------------------------------------------------------------------
 * Learning-rate schedules
 *
 * lr(t) for a step or epoch index t >= 0 (the caller chooses the unit; warm-up is usually
 * counted in steps, the others in epochs or steps):
 *   constant: main(t) = base_lr
 *   step:     main(t) = base_lr * gamma^floor(t / step_size)          (StepLR)
 *   cosine:   main(t) = eta_min + (base_lr - eta_min) (1 + cos(pi t / t_max)) / 2
 *             (CosineAnnealingLR's closed form; periodic beyond t_max like torch)
 *   plateau:  main(t) = the current plateau lr, which starts at base_lr and is multiplied
 *             by factor (not below min_lr) by dd_lr_sched_plateau() when the metric has
 *             not improved for more than `patience` epochs (ReduceLROnPlateau).
 * Linear warm-up over W = warmup steps (W >= 1), as torch's
 *   SequentialLR([LinearLR(start_factor=s, total_iters=W), main], milestones=[W]):
 *   t <  W: lr(t) = main(0) * (s + (1 - s) t / W)
 *   t >= W: lr(t) = main(t - W)
 *
 * dd_lr_sched is plain data (int64 and double fields, no pointers, no padding): checkpoint
 * it by copying its bytes, and check a restored copy with dd_lr_sched_check().
 * ------------------------------------------------------------------------------------ */

typedef enum {
    DD_LR_CONSTANT = 0, /* "constant" */
    DD_LR_STEP = 1,     /* "step" */
    DD_LR_COSINE = 2,   /* "cosine" */
    DD_LR_PLATEAU = 3   /* "plateau" */
} dd_lr_kind;

typedef struct {
    int64_t kind;          /* dd_lr_kind */
    double base_lr;        /* finite, >= 0 */
    int64_t warmup;        /* warm-up length W in steps, >= 0 (0 = no warm-up) */
    double warmup_start;   /* warm-up start factor s in [0, 1] (lr(0) = s * main(0)) */
    int64_t step_size;     /* step: >= 1 */
    double gamma;          /* step: finite, > 0 */
    int64_t t_max;         /* cosine: >= 1 */
    double eta_min;        /* cosine: finite, >= 0 */
    int64_t mode_max;      /* plateau: 0 = "min" (lower metric is better), 1 = "max" */
    int64_t threshold_abs; /* plateau: 0 = relative threshold ("rel"), 1 = absolute ("abs") */
    double factor;         /* plateau: reduction factor in (0, 1) */
    int64_t patience;      /* plateau: bad epochs tolerated before a reduction, >= 0 */
    double threshold;      /* plateau: improvement threshold, finite, >= 0 (1e-4) */
    int64_t cooldown;      /* plateau: epochs after a reduction that count as good, >= 0 */
    double min_lr;         /* plateau: lower bound of the lr, finite, >= 0 */
    double plateau_eps;    /* plateau: reductions smaller than this are skipped, >= 0 (1e-8) */
} dd_lr_cfg;

/* Schedule = configuration + state. Initialise with dd_lr_sched_init(). */
typedef struct {
    uint64_t magic;           /* DD_LR_SCHED_MAGIC when initialised */
    dd_lr_cfg cfg;            /* validated copy of the configuration */
    double plateau_lr;        /* plateau: current lr (starts at base_lr) */
    double best;              /* plateau: best metric so far (+inf for min, -inf for max) */
    int64_t num_bad_epochs;   /* plateau: consecutive epochs without improvement */
    int64_t cooldown_counter; /* plateau: epochs of cooldown left */
    int64_t epochs;           /* plateau: metrics received so far (torch last_epoch) */
    int64_t reductions;       /* plateau: number of lr reductions so far */
} dd_lr_sched;

#define DD_LR_SCHED_MAGIC 0x444C52534348ED01ull /* "DLRSCH" + layout version 1 */

/* Defaults as torch: step gamma 0.1, step_size 1; cosine t_max 1, eta_min 0; plateau
 * mode min, factor 0.1, patience 10, threshold 1e-4 rel, cooldown 0, min_lr 0, eps 1e-8;
 * no warm-up (warmup 0, warmup_start 1/3 as torch's LinearLR default). */
dd_lr_cfg dd_lr_cfg_default(dd_lr_kind kind, double base_lr);
/* "constant" | "step" | "cosine" | "plateau" -> kind. DD_ERR_ARG names the bad string. */
dd_status dd_lr_kind_parse(const char *name, dd_lr_kind *kind);
const char *dd_lr_kind_name(dd_lr_kind kind);

/* Validates cfg and initialises s. Errors: DD_ERR_ARG naming the field and its range. */
dd_status dd_lr_sched_init(dd_lr_sched *s, const dd_lr_cfg *cfg);
/* Validates a schedule restored from bytes (magic, configuration, state ranges).
 * Errors: DD_ERR_FORMAT. */
dd_status dd_lr_sched_check(const dd_lr_sched *s);
/* The learning rate at index t (t < 0 counts as 0). Pure: does not change s. */
double dd_lr_sched_lr(const dd_lr_sched *s, int64_t t);
/* Feeds one epoch's validation metric (ReduceLROnPlateau.step). Only plateau schedules
 * react; for the others this is a no-op. A NaN metric counts as "not better" (as torch).
 * *reduced (may be NULL) is set to 1 when this call lowered the lr, else 0. */
void dd_lr_sched_plateau(dd_lr_sched *s, double metric, int *reduced);

#ifdef __cplusplus
}
#endif
#endif
