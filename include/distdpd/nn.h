/* Neural-network layers with hand-written backward passes: dense (nn.Linear), GRU and
 * LSTM (PyTorch equations and weight layouts, so weights map one to one to torch.nn.GRU /
 * torch.nn.LSTM state_dicts), causal dilated / grouped / depthwise conv1d, activations,
 * residual add, channel concatenation and I/Q feature extraction.
 *
 * Conventions (llm.c style; see docs/nn.md):
 * - Tensors are row-major float arrays; shapes are given as comments, e.g. (B, T, C):
 *   batch, time, channels (channels fastest, like PyTorch batch_first=True). Recurrent
 *   layers take D input features and H hidden units (B, T, D, H >= 1).
 * - dd_X_forward(out, in, weights..., dims) writes `out` (it overwrites, never adds).
 * - dd_X_backward(din, dweights..., dout, saved..., dims) ADDS into every gradient it
 *   produces, parameter gradients AND input gradients (din += ...). Zero them once per
 *   step (one memset of the gradient arena / activation-gradient buffer). Any gradient
 *   output may be NULL when it is not needed; the work for it is then skipped (e.g.
 *   training a DPD through a frozen PA model needs din only). Gradient outputs must not
 *   alias inputs of the same call.
 * - Recurrent layers keep what backward needs in a caller-provided workspace of
 *   dd_X_workspace_size() ELEMENTS (floats for the float API, doubles for _f64); forward
 *   fills it, backward reads it (and uses its scratch part), so backward may be called
 *   more than once after one forward. No layer allocates memory.
 * - Every function exists in float32 (plain name, the fast path) and float64 (suffix
 *   _f64, the same code instantiated for double, used by the finite-difference tests).
 * - Dimensions are not checked in the kernels: the model validates its configuration when
 *   it is built (dd_X_layer_add and dd_conv1d_check report errors). All dims are >= 1,
 *   and row counts times widths must stay below 2^31 (BLAS int).
 */
#ifndef DISTDPD_NN_H
#define DISTDPD_NN_H

#include <stddef.h>

#include "distdpd/core.h"
#include "distdpd/param.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------
 * Dense layer (torch.nn.Linear): out = in W^T + b over N rows (N = B*T for sequences).
 * W: (out_dim, in_dim), b: (out_dim) or NULL.
 */
void dd_dense_forward(float *out,      /* (N, out_dim) */
                      const float *in, /* (N, in_dim) */
                      const float *w,  /* (out_dim, in_dim) */
                      const float *b,  /* (out_dim) or NULL */
                      size_t N, int in_dim, int out_dim);
/* din += dout W; dw += dout^T in; db += sum over rows of dout. din, dw, db may be NULL. */
void dd_dense_backward(float *din, float *dw, float *db,
                       const float *dout, /* (N, out_dim) */
                       const float *in,   /* (N, in_dim) (needed when dw != NULL) */
                       const float *w,    /* (out_dim, in_dim) (needed when din != NULL) */
                       size_t N, int in_dim, int out_dim);
void dd_dense_forward_f64(double *out, const double *in, const double *w, const double *b, size_t N,
                          int in_dim, int out_dim);
void dd_dense_backward_f64(double *din, double *dw, double *db, const double *dout, const double *in,
                           const double *w, size_t N, int in_dim, int out_dim);

/* ------------------------------------------------------------------------------------
 * Threads inside a process (docs/performance.md, "Threads inside a rank"). The float32
 * kernels of the GRU (fused recurrence: columns = frames split between threads) and of
 * the weight gradients (output rows split) run on up to n threads (OpenMP). Each output
 * is computed by one thread with the same operations as on one thread, so the thread
 * count never changes a result (bit-identical). Default: the environment variable
 * DD_THREADS, else 1. dd_nn_threads_set clamps to [1, 256] and returns the count in use;
 * not thread-safe against running kernels. Without OpenMP in the build: always 1.
 * The layers' float sgemm calls: dd_nn_threads_set puts OpenBLAS on one thread
 * (openblas_set_num_threads(1)) and a large product (each panel >= 128 rows or columns
 * and 2^23 multiply-adds) is cut into up to dd_nn_sgemm_panels_max() panels of whole
 * rows or columns of C, one single-threaded sgemm each, run on the n threads. The cut
 * depends on the product's shape only (and on the cap: the environment variable
 * DD_GEMM_PANELS, default 2, at most 64), never on n, so the thread count never changes
 * a bit (docs/performance.md, "OpenBLAS's threads and the layers' sgemm panels").
 * OPENBLAS_NUM_THREADS or GOTO_NUM_THREADS set to a positive count: that count stays
 * OpenBLAS's, and with more than one the products run as one call on OpenBLAS's own
 * threads, whose threaded sgemm can change the last bits against one thread (an
 * opt-in). The first-use default (DD_THREADS, else 1) leaves OpenBLAS's count as it is.
 * dd_nn_blas_threads: OpenBLAS's count now; dd_nn_sgemm_panels_max: the cap in use. */
int dd_nn_threads_set(int n);
int dd_nn_threads(void);
int dd_nn_blas_threads(void);
int dd_nn_sgemm_panels_max(void);
/* The cores this process may run on (sched_getaffinity) divided among the ranks of its
 * node (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or SLURM_NTASKS_PER_NODE; 1 when
 * none is set), at least 1: the default of the command's --threads. */
int dd_nn_threads_owned(void);

/* ------------------------------------------------------------------------------------
 * GRU (torch.nn.GRU, one layer, one direction, batch_first). Gate rows in order r, z, n:
 *   r  = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
 *   z  = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
 *   n  = tanh(W_in x + b_in + r * (W_hn h + b_hn))
 *   h' = (1 - z) * n + z * h
 * w_ih: (3H, D) = weight_ih_l0, w_hh: (3H, H) = weight_hh_l0, b_ih, b_hh: (3H) or NULL.
 */
/* Workspace elements for B, T, D, H: B*T*(9H + 2D) + 4*B*H (the forward saves B*T*(5H + D);
 * the rest is scratch). */
size_t dd_gru_workspace_size(int B, int T, int D, int H);
void dd_gru_forward(float *out,        /* (B, T, H): h_1..h_T; out[:, T-1] is the final state */
                    float *ws,         /* dd_gru_workspace_size(B, T, D, H) floats */
                    const float *x,    /* (B, T, D) */
                    const float *h0,   /* (B, H) initial state, or NULL for zeros */
                    const float *w_ih, const float *w_hh, const float *b_ih, const float *b_hh,
                    int B, int T, int D, int H);
/* Backpropagation through time. dout is dL/d(out) for every step (so a loss on the final
 * state only is dout with zeros before T-1). Adds into dx (B,T,D), dh0 (B,H), dw_ih,
 * dw_hh, db_ih, db_hh; each may be NULL. ws must hold the forward's workspace (backward does
 * not change its saved part, so it may run again); x is the forward's input (the current
 * kernels read the copy saved in ws). */
void dd_gru_backward(float *dx, float *dh0, float *dw_ih, float *dw_hh, float *db_ih, float *db_hh,
                     const float *dout, /* (B, T, H) */
                     float *ws, const float *x, const float *w_ih, const float *w_hh,
                     int B, int T, int D, int H);
void dd_gru_forward_f64(double *out, double *ws, const double *x, const double *h0,
                        const double *w_ih, const double *w_hh, const double *b_ih,
                        const double *b_hh, int B, int T, int D, int H);
void dd_gru_backward_f64(double *dx, double *dh0, double *dw_ih, double *dw_hh, double *db_ih,
                         double *db_hh, const double *dout, double *ws, const double *x,
                         const double *w_ih, const double *w_hh, int B, int T, int D, int H);

/* ------------------------------------------------------------------------------------
 * LSTM (torch.nn.LSTM, one layer, one direction, batch_first). Gate rows i, f, g, o:
 *   i = sigmoid(W_ii x + b_ii + W_hi h + b_hi)    f = sigmoid(W_if x + ... )
 *   g = tanh(W_ig x + b_ig + W_hg h + b_hg)       o = sigmoid(W_io x + ... )
 *   c' = f * c + i * g;   h' = o * tanh(c')
 * w_ih: (4H, D), w_hh: (4H, H), b_ih, b_hh: (4H) or NULL.
 */
/* Workspace elements: B*T*(11H + 2D) + 2*B*H (the forward saves B*T*(7H + D)). */
size_t dd_lstm_workspace_size(int B, int T, int D, int H);
void dd_lstm_forward(float *out,      /* (B, T, H) */
                     float *cn,       /* (B, H) final cell state, or NULL */
                     float *ws,       /* dd_lstm_workspace_size(B, T, D, H) floats */
                     const float *x,  /* (B, T, D) */
                     const float *h0, /* (B, H) or NULL for zeros */
                     const float *c0, /* (B, H) or NULL for zeros */
                     const float *w_ih, const float *w_hh, const float *b_ih, const float *b_hh,
                     int B, int T, int D, int H);
/* dcn: dL/d(cn) (B, H) or NULL for zero. Adds into dx, dh0, dc0, dw_ih, dw_hh, db_ih,
 * db_hh; each may be NULL. */
void dd_lstm_backward(float *dx, float *dh0, float *dc0, float *dw_ih, float *dw_hh, float *db_ih,
                      float *db_hh, const float *dout, const float *dcn, float *ws, const float *x,
                      const float *w_ih, const float *w_hh, int B, int T, int D, int H);
void dd_lstm_forward_f64(double *out, double *cn, double *ws, const double *x, const double *h0,
                         const double *c0, const double *w_ih, const double *w_hh,
                         const double *b_ih, const double *b_hh, int B, int T, int D, int H);
void dd_lstm_backward_f64(double *dx, double *dh0, double *dc0, double *dw_ih, double *dw_hh,
                          double *db_ih, double *db_hh, const double *dout, const double *dcn,
                          double *ws, const double *x, const double *w_ih, const double *w_hh,
                          int B, int T, int D, int H);

/* ------------------------------------------------------------------------------------
 * Causal 1-D convolution over time (torch.nn.Conv1d with left zero padding
 * (K-1)*dilation, i.e. output t sees inputs t, t-d, ..., t-(K-1)d only):
 *   out[b,t,co] = bias[co] + sum_{k, ci in group(co)} w[co, ci - g*C_in/groups, k]
 *                                                    * in[b, t - (K-1-k)*dilation, ci]
 * weight (C_out, C_in/groups, K) (PyTorch layout), bias (C_out) or NULL.
 * groups == C_in == C_out is depthwise; K == 1 is a pointwise (1x1) conv.
 */
/* c_in, c_out >= 1, kernel >= 1, dilation >= 1, groups >= 1 dividing both c_in and c_out.
 * Errors: DD_ERR_ARG naming the offending value. */
dd_status dd_conv1d_check(int c_in, int c_out, int kernel, int dilation, int groups);
void dd_conv1d_forward(float *out,      /* (B, T, c_out) */
                       const float *in, /* (B, T, c_in) */
                       const float *w,  /* (c_out, c_in/groups, kernel) */
                       const float *b,  /* (c_out) or NULL */
                       int B, int T, int c_in, int c_out, int kernel, int dilation, int groups);
/* Adds into din (B,T,c_in), dw, db; each may be NULL. */
void dd_conv1d_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                        const float *w, int B, int T, int c_in, int c_out, int kernel,
                        int dilation, int groups);
/* The same with caller-owned scratch for a wide layer's im2col blocks (groups 1, kernel > 1,
 * both c_in and c_out > 96, which no SIMD kernel takes: OpenBLAS products of im2col
 * blocks), instead of a buffer allocated per call: dd_conv1d_scratch_floats(..., 1) floats
 * (0 for other layers, whose scratch may then be NULL), any contents, overwritten; the
 * forward uses only the first dd_conv1d_scratch_floats(..., 0) of them (inference needs no
 * more). The same floats as dd_conv1d_forward / _backward. */
size_t dd_conv1d_scratch_floats(int B, int T, int c_in, int c_out, int kernel, int groups, int backward);
void dd_conv1d_forward_ws(float *out, const float *in, const float *w, const float *b, int B, int T, int c_in,
                          int c_out, int kernel, int dilation, int groups, float *scratch);
void dd_conv1d_backward_ws(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                           int B, int T, int c_in, int c_out, int kernel, int dilation, int groups, float *scratch);
/* A depthwise conv1d without bias (C channels, weight (C, 1, kernel)) fused with Hardswish
 * and, when resid, a residual add (tcn's layers): pre = conv(in), out = Hardswish(pre)
 * (+ in); pre may be NULL (not stored: backward recomputes it). The same floats as
 * dd_conv1d_forward, dd_act_forward(DD_ACT_HARDSWISH, out, pre) and
 * dd_add_forward(out, out, in) in turn, in one pass over the rows at the SIMD levels (the
 * generic level runs that sequence). Float32 only: the float64 reference is that
 * sequence. */
void dd_conv1d_dw_hswish_forward(float *pre, float *out, const float *in, const float *w, int B, int T,
                                 int C, int kernel, int dilation, int resid);
/* Its backward, with pre from forward or NULL (then recomputed from in, the same floats):
 * din += dout (resid) + the convolution's dL/din of da = dout Hardswish'(pre), dw += its
 * dL/dw (din, dw may be NULL). The same floats as dd_add_backward(din, NULL, dout),
 * dd_act_backward into zeroed scratch and dd_conv1d_backward in turn, with da kept only in
 * one frame's rows of scratch at the SIMD levels. scratch: B T C floats, twice that when
 * pre is NULL.
 * flags: DD_DW_HS_RESID (the residual layer: resid above), DD_DW_HS_SET_DIN (din's
 * contents are ignored and it is written, the same floats as adding into zeros: the
 * caller need not clear it). */
#define DD_DW_HS_RESID 1
#define DD_DW_HS_SET_DIN 2
void dd_conv1d_dw_hswish_backward(float *din, float *dw, const float *dout, const float *pre, const float *in,
                                  const float *w, int B, int T, int C, int kernel, int dilation, int flags,
                                  float *scratch);
/* Whether the backward above runs faster with forward's pre than recomputing it (pre NULL)
 * at the SIMD level now in use: 1 at AVX2 and the generic level, 0 at AVX-512, measured on
 * AMD Zen 5 (docs/performance.md, "tcn's depthwise layers keep their pre-activation at
 * AVX2"). Either way the numbers are the same; a model decides once and sizes its saved
 * area by it. */
int dd_conv1d_dw_hswish_keeps_pre(void);
/* A depthwise conv1d without bias (as above) whose input is Hardswish(ain): the layer with
 * its activation in front (tcn's plain stacks, whose stages pass each layer's convolution
 * on, so that one pass forms the gradient of the layer below's convolution). Forward:
 * z = Hardswish(ain) (kept for backward), out = conv(z); the same floats as
 * dd_act_forward then dd_conv1d_forward. Backward: dw += the convolution's dL/dw,
 * din += Hardswish'(ain) times the convolution's dL/dz (din, dw may be NULL; flags:
 * DD_DW_HS_SET_DIN as above); the same floats as dd_conv1d_backward's din into zeroed
 * scratch then dd_act_backward into din; at the SIMD levels a dW pass and a din pass per
 * frame and block of channel vectors, Hardswish' applied before din's store. scratch: B T C floats
 * (the generic level's and K > 64's; the SIMD kernels use none). */
void dd_conv1d_dw_hsin_forward(float *z, float *out, const float *ain, const float *w, int B, int T, int C,
                               int kernel, int dilation);
void dd_conv1d_dw_hsin_backward(float *din, float *dw, const float *dout, const float *ain, const float *z,
                                const float *w, int B, int T, int C, int kernel, int dilation, int flags,
                                float *scratch);
/* A convolution followed by Hardswish (tcn's stem, a 1x1 convolution): pre = the
 * convolution (kept for backward), out = Hardswish(pre); the same floats as
 * dd_conv1d_forward then dd_act_forward, in one pass where the convolution runs in the
 * small-convolution kernel. */
void dd_conv1d_hswish_forward(float *pre, float *out, const float *in, const float *w, const float *b, int B, int T,
                              int c_in, int c_out, int kernel, int dilation, int groups);
/* Its backward: din, dw, db (each may be NULL) += the convolution's gradients of
 * da = dout Hardswish'(pre); the same floats as dd_act_backward into a cleared scratch
 * then dd_conv1d_backward. A 1x1 layer of at most 8 inputs whose din is not wanted never
 * stores da (where its backward runs in the small-convolution kernel); otherwise da goes
 * through scratch (B T c_out floats). */
void dd_conv1d_hswish_backward(float *din, float *dw, float *db, const float *dout, const float *pre, const float *in,
                               const float *w, int B, int T, int c_in, int c_out, int kernel, int dilation,
                               int groups, float *scratch);
void dd_conv1d_forward_f64(double *out, const double *in, const double *w, const double *b, int B,
                           int T, int c_in, int c_out, int kernel, int dilation, int groups);
void dd_conv1d_backward_f64(double *din, double *dw, double *db, const double *dout,
                            const double *in, const double *w, int B, int T, int c_in, int c_out,
                            int kernel, int dilation, int groups);

/* ------------------------------------------------------------------------------------
 * Elementwise activations. Forward may run in place (out == in). Backward adds
 * din += dout * f'(x); it reads `in` (ReLU, Hardswish) or `out` (tanh, sigmoid), so pass
 * both when available (the one not needed may be NULL). din must not alias dout.
 *   tanh; sigmoid 1/(1+e^-x); ReLU max(x,0) with f'(0) = 0 (as torch);
 *   Hardswish x*relu6(x+3)/6 with f' = 0 (x < -3), x/3 + 1/2 (-3 <= x <= 3), 1 (x > 3)
 *   (torch's hardswish_backward convention at the kinks); in floats 0 (x < -3), x (x >= 3),
 *   x*(x+3)/6 otherwise (-0 at x = -3), at every SIMD level.
 */
typedef enum {
    DD_ACT_IDENTITY = 0,
    DD_ACT_TANH = 1,
    DD_ACT_SIGMOID = 2,
    DD_ACT_RELU = 3,
    DD_ACT_HARDSWISH = 4
} dd_act;
/* "identity", "tanh", "sigmoid", "relu", "hardswish"; "?" for an unknown value. */
const char *dd_act_name(dd_act a);
/* Parses a name as above (case-sensitive). Errors: DD_ERR_ARG naming the string. */
dd_status dd_act_parse(const char *name, dd_act *a);
void dd_act_forward(dd_act a, float *out, const float *in, size_t n);
void dd_act_backward(dd_act a, float *din, const float *dout, const float *in, const float *out,
                     size_t n);
void dd_act_forward_f64(dd_act a, double *out, const double *in, size_t n);
void dd_act_backward_f64(dd_act a, double *din, const double *dout, const double *in,
                         const double *out, size_t n);

/* Residual add: out = a + b (out may alias a or b). Backward: da += dout, db += dout
 * (either may be NULL). */
void dd_add_forward(float *out, const float *a, const float *b, size_t n);
void dd_add_backward(float *da, float *db, const float *dout, size_t n);
void dd_add_forward_f64(double *out, const double *a, const double *b, size_t n);
void dd_add_backward_f64(double *da, double *db, const double *dout, size_t n);

/* Channel concatenation of two (N, ca) and (N, cb) tensors into (N, ca+cb).
 * Backward: da += dout[:, :ca], db += dout[:, ca:] (either may be NULL). */
void dd_concat_forward(float *out, const float *a, const float *b, size_t N, int ca, int cb);
void dd_concat_backward(float *da, float *db, const float *dout, size_t N, int ca, int cb);
void dd_concat_forward_f64(double *out, const double *a, const double *b, size_t N, int ca, int cb);
void dd_concat_backward_f64(double *da, double *db, const double *dout, size_t N, int ca, int cb);

/* ------------------------------------------------------------------------------------
 * I/Q feature extraction: (N, 2) rows (I, Q) -> (N, 6) rows
 *   [I, Q, r, r^3, sin(phi), cos(phi)],  r = |x| = sqrt(I^2 + Q^2), phi = atan2(Q, I),
 * computed as sin = Q/r, cos = I/r. At r == 0: features [I, Q, 0, 0, 0, 1] (atan2(0, 0) =
 * 0, as numpy/torch), and the gradient of r, sin and cos there is DEFINED AS ZERO (the
 * subgradient torch uses for abs/norm at 0); only the identity features pass gradient.
 */
#define DD_IQFEAT_DIM 6
void dd_iqfeat_forward(float *out, const float *iq, size_t N);
/* diq (N, 2) += J^T dout. */
void dd_iqfeat_backward(float *diq, const float *dout, const float *iq, size_t N);
void dd_iqfeat_forward_f64(double *out, const double *iq, size_t N);
void dd_iqfeat_backward_f64(double *diq, const double *dout, const double *iq, size_t N);

/* ------------------------------------------------------------------------------------
 * Registering a layer's parameters in a table, with PyTorch state_dict names, and the
 * PyTorch default initialisation. The structs record the dims and arena offsets; a view
 * is arena + offset. prefix: 1..40 characters, e.g. "gru", "fc_out", "tcn.0.dw".
 */
typedef struct {
    int in_dim, out_dim; /* >= 1 */
    int bias;            /* 1: has "<prefix>.bias" */
    size_t w, b;         /* offsets of "<prefix>.weight" (out_dim, in_dim) and bias */
} dd_dense_layer;
dd_status dd_dense_layer_add(dd_param_table *t, const char *prefix, int in_dim, int out_dim,
                             int bias, dd_dense_layer *l);
/* uniform(-1/sqrt(in_dim), +) for weight and bias, as torch.nn.Linear. */
void dd_dense_layer_init(const dd_dense_layer *l, float *params, dd_rng *rng);

typedef struct {
    int input_size, hidden_size; /* D, H >= 1 */
    int bias;                    /* 1: has bias_ih_l0 / bias_hh_l0 */
    size_t w_ih, w_hh, b_ih, b_hh; /* offsets of <prefix>.weight_ih_l0 (3H, D), weight_hh_l0
                                      (3H, H), bias_ih_l0 (3H), bias_hh_l0 (3H) */
} dd_gru_layer;
dd_status dd_gru_layer_add(dd_param_table *t, const char *prefix, int input_size, int hidden_size,
                           int bias, dd_gru_layer *l);
/* Layer `layer` (0..999) of a stacked GRU: names "<prefix>.weight_ih_l<layer>", ..., as
 * torch.nn.GRU(num_layers > 1) names them. dd_gru_layer_add is layer 0. */
dd_status dd_gru_layer_add_l(dd_param_table *t, const char *prefix, int layer, int input_size,
                             int hidden_size, int bias, dd_gru_layer *l);
/* uniform(-1/sqrt(H), +) for all four tensors, as torch.nn.GRU. */
void dd_gru_layer_init(const dd_gru_layer *l, float *params, dd_rng *rng);

/* Same as GRU with 4H gate rows (i, f, g, o). */
typedef dd_gru_layer dd_lstm_layer;
dd_status dd_lstm_layer_add(dd_param_table *t, const char *prefix, int input_size, int hidden_size,
                            int bias, dd_lstm_layer *l);
dd_status dd_lstm_layer_add_l(dd_param_table *t, const char *prefix, int layer, int input_size,
                              int hidden_size, int bias, dd_lstm_layer *l);
void dd_lstm_layer_init(const dd_lstm_layer *l, float *params, dd_rng *rng);

typedef struct {
    int c_in, c_out, kernel, dilation, groups; /* as dd_conv1d_check */
    int bias;                                  /* 1: has "<prefix>.bias" */
    size_t w, b; /* offsets of "<prefix>.weight" (c_out, c_in/groups, kernel) and bias */
} dd_conv1d_layer;
dd_status dd_conv1d_layer_add(dd_param_table *t, const char *prefix, int c_in, int c_out,
                              int kernel, int dilation, int groups, int bias, dd_conv1d_layer *l);
/* uniform(-1/sqrt(c_in/groups*kernel), +), as torch.nn.Conv1d. */
void dd_conv1d_layer_init(const dd_conv1d_layer *l, float *params, dd_rng *rng);

/* ------------------------------------------------------------------------------------
 * Tensor parallelism (docs/models.md, "Tensor parallelism"). A group of `size` ranks runs
 * one layer together, each holding its shard of the weights; the layers exchange
 * activations through the group's callbacks, so that nothing here depends on MPI
 * (src/parallel/tp.c implements them on a communicator; model.h calls this struct
 * dd_model_tp). Every rank of the group makes the same calls in the same order with the
 * same n. Each callback returns DD_OK or the error of its collective.
 */
typedef struct {
    int size, rank; /* ranks in the group (>= 1) and this one's place, 0 <= rank < size */
    void *user;     /* passed to the callbacks (must outlive whatever keeps this struct) */
    /* In-place sum of buf (n floats) over the group; every rank ends with the same bits. */
    dd_status (*allreduce)(void *user, float *buf, size_t n);
    /* n floats from every rank -> recv (size * n floats, rank order). */
    dd_status (*allgather)(void *user, const float *send, float *recv, size_t n);
    /* Optional (NULL: an allreduce of size * n floats stands in): send holds size * n
     * floats on every rank; rank r receives the sum of block r (n floats) in recv. */
    dd_status (*reduce_scatter)(void *user, const float *send, float *recv, size_t n);
} dd_tp_ops;

/* ------------------------------------------------------------------------------------
 * Tensor-parallel shards of the GRU and LSTM layers (float32 only: they run the model
 * shards). A group of P ranks runs one layer of D inputs and H units (P divides H); rank
 * p owns the U = H / P units [p U, (p+1) U) of every gate: those rows of w_ih (G U, D),
 * w_hh (G U, H) and both biases (G U), G = 3 (GRU: r, z, n) or 4 (LSTM: i, f, g, o), in
 * that gate order. Input x (B, T, D) and output out (B, T, H) are the whole layer's,
 * identical on every rank. Per step each rank computes its units' gates from the whole
 * h_{t-1} and the group's allgather of the units' h_t (U x B floats each) gives every
 * rank the whole h_t (T allgathers per forward). Backward, per step, the partial sums of
 * dL/dh_{t-1} over each rank's gate rows (H x B) are reduce-scattered so that each rank
 * receives its units' rows (T - 1 reduce-scatters; the LSTM's cell state never leaves its
 * rank), and dL/dx (B T D floats) is allreduced once at the end when wanted. The weight
 * gradients (the rank's rows of the whole layer's) are added like dd_gru_backward's.
 * The recurrence runs step by step through OpenBLAS and the cell kernels of the whole
 * layers (the fused whole-sequence kernels cannot exchange h_t between steps).
 */
typedef struct {
    int input_size, hidden_size; /* D, H of the whole layer */
    int units;                   /* U = H / shards: this shard's units of every gate */
    int gates;                   /* 3 (GRU) or 4 (LSTM) */
    int bias;                    /* 1: has both biases */
    size_t w_ih, w_hh, b_ih, b_hh; /* offsets of (G U, D), (G U, H), (G U), (G U) */
} dd_rnn_shard_layer;
/* Registers a shard of layer `layer` of a stacked GRU (gates 3) or LSTM (gates 4) under
 * the whole layer's names ("<prefix>.weight_ih_l<layer>", ...) with the shard's shapes.
 * Errors: DD_ERR_ARG (dims < 1, shards not dividing H, names as dd_gru_layer_add_l). */
dd_status dd_rnn_shard_layer_add(dd_param_table *t, const char *prefix, int layer, int gates, int input_size,
                                 int hidden_size, int shards, int bias, dd_rnn_shard_layer *l);

/* Workspace floats of a GRU shard (forward saves what backward reads). */
size_t dd_gru_shard_workspace_size(int B, int T, int D, int H, int U);
/* h0: the whole initial state (B, H), or NULL for zeros. Returns the first error of a
 * collective (then out is incomplete). */
dd_status dd_gru_shard_forward(const dd_tp_ops *tp, float *out, float *ws, const float *x, const float *h0,
                               const float *w_ih, const float *w_hh, const float *b_ih, const float *b_hh, int B,
                               int T, int D, int H);
/* After that forward: adds dL/dx into dx (NULL: not wanted, no allreduce) and the shard's
 * weight gradients into dw_ih, dw_hh, db_ih, db_hh (each may be NULL). */
dd_status dd_gru_shard_backward(const dd_tp_ops *tp, float *dx, float *dw_ih, float *dw_hh, float *db_ih,
                                float *db_hh, const float *dout, float *ws, const float *w_ih, const float *w_hh,
                                int B, int T, int D, int H);
/* The same for an LSTM shard; c0 (B, U) is this shard's units of the initial cell state
 * (NULL: zeros) and cn (B, U) receives their final cell state (NULL: not wanted). */
size_t dd_lstm_shard_workspace_size(int B, int T, int D, int H, int U);
dd_status dd_lstm_shard_forward(const dd_tp_ops *tp, float *out, float *cn, float *ws, const float *x,
                                const float *h0, const float *c0, const float *w_ih, const float *w_hh,
                                const float *b_ih, const float *b_hh, int B, int T, int D, int H);
dd_status dd_lstm_shard_backward(const dd_tp_ops *tp, float *dx, float *dw_ih, float *dw_hh, float *db_ih,
                                 float *db_hh, const float *dout, float *ws, const float *w_ih, const float *w_hh,
                                 int B, int T, int D, int H);

#ifdef __cplusplus
}
#endif
#endif
