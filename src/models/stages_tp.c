/* Tensor-parallel stage kinds shared by the recurrent models (model_impl.h): a shard of a
 * GRU layer and of an LSTM layer (nn.h, "Tensor-parallel shards"), each pointing at its
 * dd_rnn_shard_layer in the model's impl. Input and output are the whole layer's
 * activations on every rank; the collectives run inside the layers, and their first error
 * is recorded for model.c (dd_model_tp_ok). */
#include <string.h>

#include "models/model_impl.h"

static double rnn_tp_flops(const dd_rnn_shard_layer *l, double cell, int backward) {
    double U = l->units, D = l->input_size, H = l->hidden_size;
    double f = DD_MAC * l->gates * U * (D + H) + cell * U;
    return backward ? 2 * f : f;
}

/* ---- GRU shard: saved = the layer's workspace; state = the whole h (H) ---- */

static size_t gru_tp_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m;
    const dd_rnn_shard_layer *l = st->ref;
    return dd_gru_shard_workspace_size(B, T, l->input_size, l->hidden_size, l->units);
}

static void gru_tp_run(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                       const float *h0, float *out, int B, int T, float *saved) {
    const dd_rnn_shard_layer *l = st->ref;
    dd_model_tp_ok(m, dd_gru_shard_forward(dd_model_tp_group(m), out, saved, in, h0, DD_SP(sp, l->w_ih),
                                           DD_SP(sp, l->w_hh), l->bias ? DD_SP(sp, l->b_ih) : NULL,
                                           l->bias ? DD_SP(sp, l->b_hh) : NULL, B, T, l->input_size,
                                           l->hidden_size));
}

static void gru_tp_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                           const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0, (void)scratch;
    gru_tp_run(m, st, sp, in, NULL, out, B, T, saved);
}

static void gru_tp_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                            const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                            float *scratch) {
    (void)in, (void)x0, (void)dx0, (void)scratch;
    const dd_rnn_shard_layer *l = st->ref;
    dd_model_tp_ok(m, dd_gru_shard_backward(dd_model_tp_group(m), din, DD_SG(sp, l->w_ih), DD_SG(sp, l->w_hh),
                                            l->bias ? DD_SG(sp, l->b_ih) : NULL, l->bias ? DD_SG(sp, l->b_hh) : NULL,
                                            dout, saved, DD_SP(sp, l->w_ih), DD_SP(sp, l->w_hh), B, T,
                                            l->input_size, l->hidden_size));
}

static double gru_tp_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)m;
    return rnn_tp_flops(st->ref, 12, backward);
}

static size_t gru_tp_state(const dd_model *m, const dd_stage_def *st) {
    (void)m;
    return (size_t)((const dd_rnn_shard_layer *)st->ref)->hidden_size;
}

static void gru_tp_forward_state(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                                 const float *in, const float *x0, float *out, int B, int T, float *state,
                                 float *saved, float *scratch) {
    (void)x0, (void)scratch;
    const size_t H = (size_t)((const dd_rnn_shard_layer *)st->ref)->hidden_size;
    gru_tp_run(m, st, sp, in, state, out, B, T, saved);
    dd_stage_final_rows(state, out, B, T, H);
}

const dd_stage_ops dd_stage_gru_tp = {
    .saved = gru_tp_saved,
    .forward = gru_tp_forward,
    .backward = gru_tp_backward,
    .flops = gru_tp_flops,
    .state_size = gru_tp_state,
    .forward_state = gru_tp_forward_state,
};

/* ---- LSTM shard: saved = [final cell state of the shard's units (B, U), the layer's
 * workspace]; state = [the whole h (H), the shard's c (U)] ---- */

static size_t lstm_tp_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m;
    const dd_rnn_shard_layer *l = st->ref;
    dd_ws_carver c = {NULL, 0};
    dd_ws_take(&c, (size_t)B * (size_t)l->units);
    dd_ws_take(&c, dd_lstm_shard_workspace_size(B, T, l->input_size, l->hidden_size, l->units));
    return c.used;
}

static void lstm_tp_run(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                        const float *h0, const float *c0, float *out, int B, int T, float *saved) {
    const dd_rnn_shard_layer *l = st->ref;
    dd_ws_carver c = {saved, 0};
    float *cn = dd_ws_take(&c, (size_t)B * (size_t)l->units), *lws = dd_ws_take(&c, 0);
    dd_model_tp_ok(m, dd_lstm_shard_forward(dd_model_tp_group(m), out, cn, lws, in, h0, c0, DD_SP(sp, l->w_ih),
                                            DD_SP(sp, l->w_hh), l->bias ? DD_SP(sp, l->b_ih) : NULL,
                                            l->bias ? DD_SP(sp, l->b_hh) : NULL, B, T, l->input_size,
                                            l->hidden_size));
}

static void lstm_tp_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                            const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0, (void)scratch;
    lstm_tp_run(m, st, sp, in, NULL, NULL, out, B, T, saved);
}

static void lstm_tp_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                             const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                             float *scratch) {
    (void)in, (void)x0, (void)dx0, (void)scratch;
    const dd_rnn_shard_layer *l = st->ref;
    dd_ws_carver c = {saved, 0};
    dd_ws_take(&c, (size_t)B * (size_t)l->units);
    float *lws = dd_ws_take(&c, 0);
    dd_model_tp_ok(m, dd_lstm_shard_backward(dd_model_tp_group(m), din, DD_SG(sp, l->w_ih), DD_SG(sp, l->w_hh),
                                             l->bias ? DD_SG(sp, l->b_ih) : NULL, l->bias ? DD_SG(sp, l->b_hh) : NULL,
                                             dout, lws, DD_SP(sp, l->w_ih), DD_SP(sp, l->w_hh), B, T,
                                             l->input_size, l->hidden_size));
}

static double lstm_tp_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)m;
    return rnn_tp_flops(st->ref, 20, backward);
}

static size_t lstm_tp_state(const dd_model *m, const dd_stage_def *st) {
    (void)m;
    const dd_rnn_shard_layer *l = st->ref;
    return (size_t)l->hidden_size + (size_t)l->units;
}

static void lstm_tp_forward_state(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                                  const float *in, const float *x0, float *out, int B, int T, float *state,
                                  float *saved, float *scratch) {
    (void)x0, (void)scratch;
    const dd_rnn_shard_layer *l = st->ref;
    const size_t H = (size_t)l->hidden_size, U = (size_t)l->units, BH = (size_t)B * H;
    lstm_tp_run(m, st, sp, in, state, state + BH, out, B, T, saved);
    dd_stage_final_rows(state, out, B, T, H);
    memcpy(state + BH, saved, (size_t)B * U * sizeof(float)); /* the shard's cn (B, U), first in saved */
}

const dd_stage_ops dd_stage_lstm_tp = {
    .saved = lstm_tp_saved,
    .forward = lstm_tp_forward,
    .backward = lstm_tp_backward,
    .flops = lstm_tp_flops,
    .state_size = lstm_tp_state,
    .forward_state = lstm_tp_forward_state,
};
