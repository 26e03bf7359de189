/* Stage kinds shared by several models (model_impl.h): a dense layer, a GRU layer, an
 * LSTM layer and a 1x1-convolution head with the input added back, as stages of their
 * own, each pointing at its layer struct in the model's impl (dd_stage_def.ref). A model
 * made of these needs no stage code of its own. */
#include <string.h>

#include "models/model_impl.h"
#include "nn/nn_fm.h"

/* ---- dense: out = in W^T + b ---- */

static size_t dense_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m, (void)st, (void)B, (void)T;
    return 0;
}

static void dense_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)m, (void)x0, (void)saved, (void)scratch;
    const dd_dense_layer *l = st->ref;
    dd_dense_forward(out, in, DD_SP(sp, l->w), l->bias ? DD_SP(sp, l->b) : NULL, (size_t)B * (size_t)T, l->in_dim,
                     l->out_dim);
}

static void dense_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                           const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                           float *scratch) {
    (void)m, (void)x0, (void)dx0, (void)saved, (void)scratch;
    const dd_dense_layer *l = st->ref;
    dd_dense_backward(din, DD_SG(sp, l->w), l->bias ? DD_SG(sp, l->b) : NULL, dout, in, DD_SP(sp, l->w),
                      (size_t)B * (size_t)T, l->in_dim, l->out_dim);
}

static double dense_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)m;
    const dd_dense_layer *l = st->ref;
    double f = DD_MAC * (double)l->in_dim * l->out_dim;
    return backward ? 2 * f : f;
}

const dd_stage_ops dd_stage_dense = {
    .saved = dense_saved,
    .forward = dense_forward,
    .backward = dense_backward,
    .flops = dense_flops,
};

/* ---- GRU layer: out = h_1..h_T; the layer workspace is kept for backward ---- */

static size_t gru_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m;
    const dd_gru_layer *l = st->ref;
    return dd_gru_workspace_size(B, T, l->input_size, l->hidden_size);
}

static void gru_run(const dd_stage_def *st, const dd_stage_params *sp, const float *in, const float *h0, float *out,
                    int B, int T, float *saved) {
    const dd_gru_layer *l = st->ref;
    dd_gru_forward(out, saved, in, h0, DD_SP(sp, l->w_ih), DD_SP(sp, l->w_hh), l->bias ? DD_SP(sp, l->b_ih) : NULL,
                   l->bias ? DD_SP(sp, l->b_hh) : NULL, B, T, l->input_size, l->hidden_size);
}

static void gru_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                        const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)m, (void)x0, (void)scratch;
    gru_run(st, sp, in, NULL, out, B, T, saved);
}

static void gru_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                         const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                         float *scratch) {
    (void)m, (void)x0, (void)dx0, (void)scratch;
    const dd_gru_layer *l = st->ref;
    dd_gru_backward(din, NULL, DD_SG(sp, l->w_ih), DD_SG(sp, l->w_hh), l->bias ? DD_SG(sp, l->b_ih) : NULL,
                    l->bias ? DD_SG(sp, l->b_hh) : NULL, dout, saved, in, DD_SP(sp, l->w_ih), DD_SP(sp, l->w_hh),
                    B, T, l->input_size, l->hidden_size);
}

static double gru_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)m;
    const dd_gru_layer *l = st->ref;
    double H = l->hidden_size, D = l->input_size;
    /* 3H x (D + H) gate GEMMs, ~12H elementwise (sigmoid/tanh counted as 4) */
    double f = DD_MAC * 3 * H * (D + H) + 12 * H;
    return backward ? 2 * f : f;
}

static size_t gru_state(const dd_model *m, const dd_stage_def *st) {
    (void)m;
    return (size_t)((const dd_gru_layer *)st->ref)->hidden_size;
}

static void gru_forward_state(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                              const float *x0, float *out, int B, int T, float *state, float *saved, float *scratch) {
    (void)m, (void)x0, (void)scratch;
    const size_t H = (size_t)((const dd_gru_layer *)st->ref)->hidden_size;
    gru_run(st, sp, in, state, out, B, T, saved);
    dd_stage_final_rows(state, out, B, T, H);
}

const dd_stage_ops dd_stage_gru = {
    .saved = gru_saved,
    .forward = gru_forward,
    .backward = gru_backward,
    .flops = gru_flops,
    .state_size = gru_state,
    .forward_state = gru_forward_state,
};

/* ---- The same GRU layer and dense layer as a pair whose gradient between them is
 * feature-major (nn/nn_fm.h): the dense stage writes dL/dh_t as H rows of T B (no memset of
 * the buffer, no (B, T, H) layout), the GRU stage reads it there (no transpose). Activations
 * stay (B, T, H); a model uses both or neither (the gru model's last layer and head). ---- */

static void gru_dfm_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                             const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                             float *scratch) {
    (void)m, (void)x0, (void)dx0, (void)scratch, (void)in;
    const dd_gru_layer *l = st->ref;
    dd_gru_backward_dfm(din, NULL, DD_SG(sp, l->w_ih), DD_SG(sp, l->w_hh), l->bias ? DD_SG(sp, l->b_ih) : NULL,
                        l->bias ? DD_SG(sp, l->b_hh) : NULL, dout, saved, DD_SP(sp, l->w_ih), DD_SP(sp, l->w_hh), B,
                        T, l->input_size, l->hidden_size);
}

const dd_stage_ops dd_stage_gru_dfm = {
    .saved = gru_saved,
    .forward = gru_forward,
    .backward = gru_dfm_backward,
    .flops = gru_flops,
    .state_size = gru_state,
    .forward_state = gru_forward_state,
};

static void dense_dfm_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                               const float *in, const float *x0, const float *dout, float *din, float *dx0, int B,
                               int T, float *saved, float *scratch) {
    (void)m, (void)x0, (void)dx0, (void)saved;
    const dd_dense_layer *l = st->ref;
    dd_dense_backward_dfm(din, sp->din_set, DD_SG(sp, l->w), l->bias ? DD_SG(sp, l->b) : NULL, dout, in,
                          DD_SP(sp, l->w), B, T, l->in_dim, l->out_dim, scratch);
}

/* the input gradient in (B, T, in_dim) where the small kernels do not take the shape */
static size_t dense_dfm_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m;
    const dd_dense_layer *l = st->ref;
    return (size_t)B * (size_t)T * (size_t)l->in_dim;
}

const dd_stage_ops dd_stage_dense_dfm = {
    .saved = dense_saved,
    .scratch = dense_dfm_scratch,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = dense_forward,
    .backward = dense_dfm_backward,
    .flops = dense_flops,
    .sets_din = 1,
};

/* ---- LSTM layer: out = h_1..h_T; saved = final cell states (B, H), then the layer
 * workspace ---- */

static size_t lstm_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m;
    const dd_lstm_layer *l = st->ref;
    dd_ws_carver c = {NULL, 0};
    dd_ws_take(&c, (size_t)B * (size_t)l->hidden_size);
    dd_ws_take(&c, dd_lstm_workspace_size(B, T, l->input_size, l->hidden_size));
    return c.used;
}

static void lstm_run(const dd_stage_def *st, const dd_stage_params *sp, const float *in, const float *h0,
                     const float *c0, float *out, int B, int T, float *saved) {
    const dd_lstm_layer *l = st->ref;
    dd_ws_carver c = {saved, 0};
    float *cn = dd_ws_take(&c, (size_t)B * (size_t)l->hidden_size);
    float *lws = dd_ws_take(&c, 0);
    dd_lstm_forward(out, cn, lws, in, h0, c0, DD_SP(sp, l->w_ih), DD_SP(sp, l->w_hh),
                    l->bias ? DD_SP(sp, l->b_ih) : NULL, l->bias ? DD_SP(sp, l->b_hh) : NULL, B, T, l->input_size,
                    l->hidden_size);
}

static void lstm_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                         const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)m, (void)x0, (void)scratch;
    lstm_run(st, sp, in, NULL, NULL, out, B, T, saved);
}

static void lstm_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                          float *scratch) {
    (void)m, (void)x0, (void)dx0, (void)scratch;
    const dd_lstm_layer *l = st->ref;
    dd_ws_carver c = {saved, 0};
    dd_ws_take(&c, (size_t)B * (size_t)l->hidden_size);
    float *lws = dd_ws_take(&c, 0);
    dd_lstm_backward(din, NULL, NULL, DD_SG(sp, l->w_ih), DD_SG(sp, l->w_hh), l->bias ? DD_SG(sp, l->b_ih) : NULL,
                     l->bias ? DD_SG(sp, l->b_hh) : NULL, dout, NULL, lws, in, DD_SP(sp, l->w_ih),
                     DD_SP(sp, l->w_hh), B, T, l->input_size, l->hidden_size);
}

static double lstm_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)m;
    const dd_lstm_layer *l = st->ref;
    double H = l->hidden_size, D = l->input_size;
    double f = DD_MAC * 4 * H * (D + H) + 20 * H;
    return backward ? 2 * f : f;
}

/* State: [h (H), c (H)]. */
static size_t lstm_state(const dd_model *m, const dd_stage_def *st) {
    (void)m;
    return 2 * (size_t)((const dd_lstm_layer *)st->ref)->hidden_size;
}

static void lstm_forward_state(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                               const float *in, const float *x0, float *out, int B, int T, float *state,
                               float *saved, float *scratch) {
    (void)m, (void)x0, (void)scratch;
    const size_t H = (size_t)((const dd_lstm_layer *)st->ref)->hidden_size, BH = (size_t)B * H;
    lstm_run(st, sp, in, state, state + BH, out, B, T, saved);
    dd_stage_final_rows(state, out, B, T, H);
    memcpy(state + BH, saved, BH * sizeof(float)); /* the frames' cn (B, H), first in saved */
}

const dd_stage_ops dd_stage_lstm = {
    .saved = lstm_saved,
    .forward = lstm_forward,
    .backward = lstm_backward,
    .flops = lstm_flops,
    .state_size = lstm_state,
    .forward_state = lstm_forward_state,
};

/* ---- convolutions of a stage's parameters ---- */

void dd_stage_conv_fwd(const dd_conv1d_layer *l, const dd_stage_params *sp, float *out, const float *in, int B,
                       int T) {
    dd_conv1d_forward(out, in, DD_SP(sp, l->w), l->bias ? DD_SP(sp, l->b) : NULL, B, T, l->c_in, l->c_out, l->kernel,
                      l->dilation, l->groups);
}

void dd_stage_conv_bwd(const dd_conv1d_layer *l, const dd_stage_params *sp, float *din, const float *dout,
                       const float *in, int B, int T) {
    dd_conv1d_backward(din, DD_SG(sp, l->w), l->bias ? DD_SG(sp, l->b) : NULL, dout, in, DD_SP(sp, l->w), B, T,
                       l->c_in, l->c_out, l->kernel, l->dilation, l->groups);
}

/* ---- skip head: y = Conv1x1_{C->2}(in) + x0 (the model input added back) ---- */

static size_t skip_head_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m, (void)st, (void)B, (void)T;
    return 0;
}

static void skip_head_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                              const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)m, (void)saved, (void)scratch;
    dd_stage_conv_fwd(st->ref, sp, out, in, B, T);
    dd_add_forward(out, out, x0, 2 * (size_t)B * (size_t)T);
}

static void skip_head_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                               const float *x0, const float *dout, float *din, float *dx0, int B, int T,
                               float *saved, float *scratch) {
    (void)m, (void)x0, (void)saved, (void)scratch;
    dd_stage_conv_bwd(st->ref, sp, din, dout, in, B, T);
    if (dx0) dd_add_backward(dx0, NULL, dout, 2 * (size_t)B * (size_t)T);
}

static double skip_head_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)m;
    const dd_conv1d_layer *l = st->ref;
    double f = DD_MAC * 2 * (double)l->c_in;
    return backward ? 2 * f : f;
}

const dd_stage_ops dd_stage_skip_head = {
    .saved = skip_head_saved,
    .forward = skip_head_forward,
    .backward = skip_head_backward,
    .flops = skip_head_flops,
};
