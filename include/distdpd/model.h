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
#include "distdpd/param.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hyper-parameters. Each model reads the fields it needs; 0 means "the model's default"
 * (dd_model_create fills them in, so cfg of a created model shows the values used). */
typedef struct {
    int hidden;   /* hidden units (gru, dgru, lstm), channels (tcn, resnet), width
                     (rvtdnn, arvtdnn, hammerstein nonlinearity); >= 1 */
    int layers;   /* stacked layers / residual blocks / Hammerstein blocks; >= 1 */
    int memory;   /* memory depth in samples: taps (rvtdnn, arvtdnn, gmp M, FIR length) */
    int order;    /* nonlinearity order K (gmp/mp); >= 1 */
    int kernel;   /* convolution kernel (tcn, resnet); >= 1 */
    int cross;    /* gmp only: depth of the lagging cross terms, Lb = Mb (taps l < cross,
                     envelope lags m = 1..cross); >= 1. mp is gmp without cross terms. */
} dd_model_cfg;
/* Valid ranges (checked by dd_model_create; 0 = the model's default, see docs/models.md):
 * hidden [1, 4096], layers [1, 64] (tcn [1, 12]), memory [1, 1024] (gmp/mp [1, 64]),
 * order [1, 16], kernel [1, 64], cross [1, 64]. Fields a model does not use are ignored
 * (logged at DD_LOG_WARN when non-zero) and read back as 0. */

typedef struct dd_model dd_model;

/* Registry entry. */
typedef struct {
    const char *name;    /* e.g. "gru" */
    const char *summary; /* one line for --help / `distdpd models` */
    dd_status (*create)(const dd_model_cfg *cfg, dd_model **out);
} dd_model_info;

/* The registered models, in display order; *count receives their number. */
const dd_model_info *dd_model_registry(size_t *count);

/* Builds the model `name` with cfg (NULL = all defaults). Unknown name or invalid cfg:
 * DD_ERR_ARG naming the model and field; *out stays NULL. Caller destroys. */
dd_status dd_model_create(const char *name, const dd_model_cfg *cfg, dd_model **out);
void dd_model_destroy(dd_model **m);

const char *dd_model_name(const dd_model *m);
const dd_model_cfg *dd_model_config(const dd_model *m);
const dd_param_table *dd_model_params(const dd_model *m);
/* Number of parameters (without arena padding). */
size_t dd_model_num_params(const dd_model *m);

/* Initialises params (an arena laid out by the table) deterministically from seed. */
void dd_model_init(const dd_model *m, float *params, uint64_t seed);

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

/* One line "name(field=value, ...): N parameters" into buf (always NUL-terminated when
 * size > 0); returns the length it needed, like snprintf. */
size_t dd_model_describe(const dd_model *m, char *buf, size_t size);

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
