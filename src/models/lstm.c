/* Model "lstm": I/Q -> one LSTM layer (PyTorch gate convention i, f, g, o) -> linear to
 * I/Q, the LSTM counterpart of the OpenDPD GRU model:
 *   (h_t, c_t) = LSTM(x_t, h_{t-1}, c_{t-1}),  y_t = W_out h_t + b_out.
 * Names "rnn.weight_ih_l0", ..., "fc_out.weight", "fc_out.bias" (OpenDPD backbone
 * state_dict); 4H^2 + 18H + 2 parameters (2,738 at the default H = 24). */
#include "models/model_impl.h"

#define LSTM_DEFAULT_HIDDEN 24

typedef struct {
    int H;              /* hidden units */
    dd_lstm_layer rnn;  /* LSTM(2 -> H) */
    dd_dense_layer fc;  /* Linear(H -> 2) */
} lstm_impl;

typedef struct {
    float *h;   /* (BT, H) hidden states h_1..h_T */
    float *cn;  /* (B, H) final cell states */
    float *lws; /* LSTM layer workspace */
    float *dh;  /* (BT, H) dL/dh (backward) */
} lstm_ws;

static size_t layout(const lstm_impl *g, int B, int T, float *base, lstm_ws *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    w->h = dd_ws_take(&c, BT * H);
    w->cn = dd_ws_take(&c, (size_t)B * H);
    w->lws = dd_ws_take(&c, dd_lstm_workspace_size(B, T, 2, g->H));
    w->dh = dd_ws_take(&c, BT * H);
    return c.used;
}

static size_t lstm_workspace(const dd_model *m, int B, int T) {
    lstm_ws w;
    return layout(m->impl, B, T, NULL, &w);
}

static void lstm_init(const dd_model *m, float *params, dd_rng *rng) {
    const lstm_impl *g = m->impl;
    dd_lstm_layer_init(&g->rnn, params, rng);
    dd_dense_layer_init(&g->fc, params, rng);
}

/* Forward of B frames from (h0, c0) (each (B, H)) or zeros (NULL). */
static void run(const dd_model *m, const float *p, const float *x, float *y, int B, int T,
                const float *h0, const float *c0, float *ws) {
    const lstm_impl *g = m->impl;
    lstm_ws w;
    layout(g, B, T, ws, &w);
    const dd_lstm_layer *r = &g->rnn;
    dd_lstm_forward(w.h, w.cn, w.lws, x, h0, c0, p + r->w_ih, p + r->w_hh, p + r->b_ih,
                    p + r->b_hh, B, T, 2, g->H);
    dd_dense_forward(y, w.h, p + g->fc.w, p + g->fc.b, (size_t)B * (size_t)T, g->H, 2);
}

static void lstm_forward(const dd_model *m, const float *p, const float *x, float *y, int B,
                         int T, float *ws) {
    run(m, p, x, y, B, T, NULL, NULL, ws);
}

static void lstm_backward(const dd_model *m, const float *p, float *gr, const float *x,
                          const float *dy, float *dx, int B, int T, float *ws) {
    const lstm_impl *g = m->impl;
    lstm_ws w;
    layout(g, B, T, ws, &w);
    size_t BT = (size_t)B * (size_t)T;
    const dd_lstm_layer *r = &g->rnn;
    memset(w.dh, 0, BT * (size_t)g->H * sizeof(float));
    dd_dense_backward(w.dh, dd_gview(gr, g->fc.w), dd_gview(gr, g->fc.b), dy, w.h, p + g->fc.w,
                      BT, g->H, 2);
    dd_lstm_backward(dx, NULL, NULL, dd_gview(gr, r->w_ih), dd_gview(gr, r->w_hh),
                     dd_gview(gr, r->b_ih), dd_gview(gr, r->b_hh), w.dh, NULL, w.lws, x,
                     p + r->w_ih, p + r->w_hh, B, T, 2, g->H);
}

/* State: [h (H), c (H)]. */
static size_t lstm_state_size(const dd_model *m) {
    return 2 * (size_t)((const lstm_impl *)m->impl)->H;
}

static void lstm_forward_state(const dd_model *m, const float *p, const float *x, float *y, int T,
                               float *state, float *ws) {
    const lstm_impl *g = m->impl;
    size_t H = (size_t)g->H;
    lstm_ws w;
    layout(g, 1, T, ws, &w);
    run(m, p, x, y, 1, T, state, state + H, ws);
    memcpy(state, w.h + (size_t)(T - 1) * H, H * sizeof(float));
    memcpy(state + H, w.cn, H * sizeof(float));
}

static double lstm_flops(const dd_model *m, int backward) {
    double H = ((const lstm_impl *)m->impl)->H;
    double f = DD_MAC * (4 * H * (2 + H) + 2 * H) + 20 * H;
    return backward ? 2 * f : f;
}

static const dd_model_ops lstm_ops = {
    .init = lstm_init,
    .workspace = lstm_workspace,
    .forward = lstm_forward,
    .backward = lstm_backward,
    .state_size = lstm_state_size,
    .forward_state = lstm_forward_state,
    .flops = lstm_flops,
};

static dd_status lstm_build(dd_model *m) {
    lstm_impl *g = m->impl;
    DD_TRY(dd_model_cfg_field(m, "hidden", &m->cfg.hidden, LSTM_DEFAULT_HIDDEN, 1, 4096));
    dd_model_cfg_unused(m, "layers", &m->cfg.layers);
    dd_model_cfg_unused(m, "memory", &m->cfg.memory);
    dd_model_cfg_unused(m, "order", &m->cfg.order);
    dd_model_cfg_unused(m, "kernel", &m->cfg.kernel);
    dd_model_cfg_unused(m, "cross", &m->cfg.cross);
    g->H = m->cfg.hidden;
    DD_TRY(dd_lstm_layer_add(&m->table, "rnn", 2, g->H, 1, &g->rnn));
    DD_TRY(dd_dense_layer_add(&m->table, "fc_out", g->H, 2, 1, &g->fc));
    m->history = -1;
    return DD_OK;
}

dd_status dd_model_create_lstm(const dd_model_cfg *cfg, dd_model **out) {
    return dd_model_build("lstm", &lstm_ops, cfg, sizeof(lstm_impl), lstm_build, out);
}
