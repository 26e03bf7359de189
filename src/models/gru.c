/* Model "gru": the OpenDPD GRU PA/DPD model. Per step the raw (I, Q) pair goes through one
 * GRU layer (PyTorch gate convention) and a linear layer back to (I, Q):
 *   h_t = GRU(x_t, h_{t-1}),  y_t = W_out h_t + b_out.
 * Parameter names follow OpenDPD's backbone state_dict ("rnn.weight_ih_l0", ...,
 * "fc_out.weight", "fc_out.bias"); 3H^2 + 14H + 2 parameters (1,911 at H = 23, 2,746 at
 * H = 28). */
#include <string.h>

#include "models/model_impl.h"

#define GRU_DEFAULT_HIDDEN 23

typedef struct {
    int H;              /* hidden units */
    dd_gru_layer rnn;   /* GRU(2 -> H) */
    dd_dense_layer fc;  /* Linear(H -> 2) */
} gru_impl;

typedef struct {
    float *h;   /* (BT, H) hidden states h_1..h_T */
    float *gws; /* GRU layer workspace */
    float *dh;  /* (BT, H) dL/dh (backward) */
} gru_ws;

static size_t layout(const gru_impl *g, int B, int T, float *base, gru_ws *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    w->h = dd_ws_take(&c, BT * H);
    w->gws = dd_ws_take(&c, dd_gru_workspace_size(B, T, 2, g->H));
    w->dh = dd_ws_take(&c, BT * H);
    return c.used;
}

static size_t gru_workspace(const dd_model *m, int B, int T) {
    gru_ws w;
    return layout(m->impl, B, T, NULL, &w);
}

/* OpenDPD's GRU.reset_parameters(): biases zero; each gate block (H x H) of weight_hh
 * orthogonal; each gate block (H x 2) of weight_ih Xavier-uniform; fc_out Xavier-uniform
 * with zero bias. With it the reference recipe follows OpenDPD's learning curve (PyTorch's
 * default uniform init starts about 0.6 dB worse after one epoch). */
static void gru_init(const dd_model *m, float *params, dd_rng *rng) {
    const gru_impl *g = m->impl;
    size_t H = (size_t)g->H;
    for (int gate = 0; gate < 3; gate++) {
        float *whh = params + g->rnn.w_hh + (size_t)gate * H * H;
        if (dd_param_orthogonal(whh, H, H, rng) != DD_OK) {
            /* Only an allocation failure gets here: keep PyTorch's default instead. */
            dd_log(DD_LOG_WARN, "gru: orthogonal init failed (%s); using uniform init", dd_last_error());
            dd_gru_layer_init(&g->rnn, params, rng);
            dd_dense_layer_init(&g->fc, params, rng);
            return;
        }
    }
    for (int gate = 0; gate < 3; gate++)
        dd_param_xavier_uniform(params + g->rnn.w_ih + (size_t)gate * H * 2, H, 2, rng);
    if (g->rnn.bias) {
        memset(params + g->rnn.b_ih, 0, 3 * H * sizeof(float));
        memset(params + g->rnn.b_hh, 0, 3 * H * sizeof(float));
    }
    dd_param_xavier_uniform(params + g->fc.w, 2, H, rng);
    if (g->fc.bias) memset(params + g->fc.b, 0, 2 * sizeof(float));
}

/* Forward of B frames from initial states h0 (B, H) or zeros (h0 == NULL). */
static void run(const dd_model *m, const float *p, const float *x, float *y, int B, int T,
                const float *h0, float *ws) {
    const gru_impl *g = m->impl;
    gru_ws w;
    layout(g, B, T, ws, &w);
    const dd_gru_layer *r = &g->rnn;
    dd_gru_forward(w.h, w.gws, x, h0, p + r->w_ih, p + r->w_hh, p + r->b_ih, p + r->b_hh, B, T, 2,
                   g->H);
    dd_dense_forward(y, w.h, p + g->fc.w, p + g->fc.b, (size_t)B * (size_t)T, g->H, 2);
}

static void gru_forward(const dd_model *m, const float *p, const float *x, float *y, int B,
                        int T, float *ws) {
    run(m, p, x, y, B, T, NULL, ws);
}

static void gru_backward(const dd_model *m, const float *p, float *gr, const float *x,
                         const float *dy, float *dx, int B, int T, float *ws) {
    const gru_impl *g = m->impl;
    gru_ws w;
    layout(g, B, T, ws, &w);
    size_t BT = (size_t)B * (size_t)T;
    const dd_gru_layer *r = &g->rnn;
    memset(w.dh, 0, BT * (size_t)g->H * sizeof(float));
    dd_dense_backward(w.dh, dd_gview(gr, g->fc.w), dd_gview(gr, g->fc.b), dy, w.h, p + g->fc.w,
                      BT, g->H, 2);
    dd_gru_backward(dx, NULL, dd_gview(gr, r->w_ih), dd_gview(gr, r->w_hh), dd_gview(gr, r->b_ih),
                    dd_gview(gr, r->b_hh), w.dh, w.gws, x, p + r->w_ih, p + r->w_hh, B, T, 2, g->H);
}

static size_t gru_state_size(const dd_model *m) { return (size_t)((const gru_impl *)m->impl)->H; }

static void gru_forward_state(const dd_model *m, const float *p, const float *x, float *y, int T,
                              float *state, float *ws) {
    const gru_impl *g = m->impl;
    gru_ws w;
    layout(g, 1, T, ws, &w);
    run(m, p, x, y, 1, T, state, ws);
    memcpy(state, w.h + (size_t)(T - 1) * (size_t)g->H, (size_t)g->H * sizeof(float));
}

static double gru_flops(const dd_model *m, int backward) {
    double H = ((const gru_impl *)m->impl)->H;
    /* 3H x (2 + H) gate GEMMs, ~12H elementwise (sigmoid/tanh counted as 4), 2H output */
    double f = DD_MAC * (3 * H * (2 + H) + 2 * H) + 12 * H;
    return backward ? 2 * f : f;
}

static const dd_model_ops gru_ops = {
    .init = gru_init,
    .workspace = gru_workspace,
    .forward = gru_forward,
    .backward = gru_backward,
    .state_size = gru_state_size,
    .forward_state = gru_forward_state,
    .flops = gru_flops,
};

static dd_status gru_build(dd_model *m) {
    gru_impl *g = m->impl;
    DD_TRY(dd_model_cfg_field(m, "hidden", &m->cfg.hidden, GRU_DEFAULT_HIDDEN, 1, 4096));
    dd_model_cfg_unused(m, "layers", &m->cfg.layers);
    dd_model_cfg_unused(m, "memory", &m->cfg.memory);
    dd_model_cfg_unused(m, "order", &m->cfg.order);
    dd_model_cfg_unused(m, "kernel", &m->cfg.kernel);
    dd_model_cfg_unused(m, "cross", &m->cfg.cross);
    g->H = m->cfg.hidden;
    DD_TRY(dd_gru_layer_add(&m->table, "rnn", 2, g->H, 1, &g->rnn));
    DD_TRY(dd_dense_layer_add(&m->table, "fc_out", g->H, 2, 1, &g->fc));
    m->history = -1;
    return DD_OK;
}

dd_status dd_model_create_gru(const dd_model_cfg *cfg, dd_model **out) {
    return dd_model_build("gru", &gru_ops, cfg, sizeof(gru_impl), gru_build, out);
}
