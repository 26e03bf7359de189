/* Model "dgru": the OpenDPD DGRU. Per step
 *   f_t = [I, Q, |x|, |x|^3, sin(phi), cos(phi)]         (dd_iqfeat, 6 features)
 *   h_t = GRU(f_t, h_{t-1})                               (6 -> H)
 *   r_t = ReLU(W_hid h_t + b_hid)                         (H -> H)
 *   y_t = W_out [r_t, f_t] + b_out                        (H + 6 -> 2)
 * Names as OpenDPD's backbone state_dict, in its module order: "rnn.*", "fc_out.*",
 * "fc_hid.*". 4H^2 + 27H + 14 parameters (2,751 at the default H = 23). */
#include "models/model_impl.h"

#define DGRU_DEFAULT_HIDDEN 23
#define NF DD_IQFEAT_DIM

typedef struct {
    int H;                  /* hidden units */
    dd_gru_layer rnn;       /* GRU(6 -> H) */
    dd_dense_layer fc_out;  /* Linear(H + 6 -> 2) */
    dd_dense_layer fc_hid;  /* Linear(H -> H), ReLU */
} dgru_impl;

typedef struct {
    float *feat, *h, *gws, *a, *r, *cat;   /* forward: (BT,6) (BT,H) gru (BT,H) (BT,H) (BT,H+6) */
    float *dcat, *dr, *da, *dh, *dfeat;    /* backward scratch, same shapes */
} dgru_ws;

static size_t layout(const dgru_impl *g, int B, int T, float *base, dgru_ws *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    w->feat = dd_ws_take(&c, BT * NF);
    w->h = dd_ws_take(&c, BT * H);
    w->gws = dd_ws_take(&c, dd_gru_workspace_size(B, T, NF, g->H));
    w->a = dd_ws_take(&c, BT * H);
    w->r = dd_ws_take(&c, BT * H);
    w->cat = dd_ws_take(&c, BT * (H + NF));
    w->dcat = dd_ws_take(&c, BT * (H + NF));
    w->dr = dd_ws_take(&c, BT * H);
    w->da = dd_ws_take(&c, BT * H);
    w->dh = dd_ws_take(&c, BT * H);
    w->dfeat = dd_ws_take(&c, BT * NF);
    return c.used;
}

static size_t dgru_workspace(const dd_model *m, int B, int T) {
    dgru_ws w;
    return layout(m->impl, B, T, NULL, &w);
}

static void dgru_init(const dd_model *m, float *params, dd_rng *rng) {
    const dgru_impl *g = m->impl;
    dd_gru_layer_init(&g->rnn, params, rng);
    dd_dense_layer_init(&g->fc_out, params, rng);
    dd_dense_layer_init(&g->fc_hid, params, rng);
}

static void run(const dd_model *m, const float *p, const float *x, float *y, int B, int T,
                const float *h0, float *ws) {
    const dgru_impl *g = m->impl;
    dgru_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T;
    const int H = g->H;
    const dd_gru_layer *r = &g->rnn;
    dd_iqfeat_forward(w.feat, x, BT);
    dd_gru_forward(w.h, w.gws, w.feat, h0, p + r->w_ih, p + r->w_hh, p + r->b_ih, p + r->b_hh, B,
                   T, NF, H);
    dd_dense_forward(w.a, w.h, p + g->fc_hid.w, p + g->fc_hid.b, BT, H, H);
    dd_act_forward(DD_ACT_RELU, w.r, w.a, BT * (size_t)H);
    dd_concat_forward(w.cat, w.r, w.feat, BT, H, NF);
    dd_dense_forward(y, w.cat, p + g->fc_out.w, p + g->fc_out.b, BT, H + NF, 2);
}

static void dgru_forward(const dd_model *m, const float *p, const float *x, float *y, int B,
                         int T, float *ws) {
    run(m, p, x, y, B, T, NULL, ws);
}

static void dgru_backward(const dd_model *m, const float *p, float *gr, const float *x,
                          const float *dy, float *dx, int B, int T, float *ws) {
    const dgru_impl *g = m->impl;
    dgru_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    const dd_gru_layer *r = &g->rnn;
    float *dfeat = dx ? w.dfeat : NULL;
    memset(w.dcat, 0, BT * (H + NF) * sizeof(float));
    memset(w.dr, 0, BT * H * sizeof(float));
    memset(w.da, 0, BT * H * sizeof(float));
    memset(w.dh, 0, BT * H * sizeof(float));
    memset(w.dfeat, 0, BT * NF * sizeof(float));
    dd_dense_backward(w.dcat, dd_gview(gr, g->fc_out.w), dd_gview(gr, g->fc_out.b), dy, w.cat,
                      p + g->fc_out.w, BT, (int)H + NF, 2);
    dd_concat_backward(w.dr, dfeat, w.dcat, BT, (int)H, NF);
    dd_act_backward(DD_ACT_RELU, w.da, w.dr, w.a, w.r, BT * H);
    dd_dense_backward(w.dh, dd_gview(gr, g->fc_hid.w), dd_gview(gr, g->fc_hid.b), w.da, w.h,
                      p + g->fc_hid.w, BT, (int)H, (int)H);
    dd_gru_backward(dfeat, NULL, dd_gview(gr, r->w_ih), dd_gview(gr, r->w_hh),
                    dd_gview(gr, r->b_ih), dd_gview(gr, r->b_hh), w.dh, w.gws, w.feat,
                    p + r->w_ih, p + r->w_hh, B, T, NF, (int)H);
    if (dx) dd_iqfeat_backward(dx, w.dfeat, x, BT);
}

static size_t dgru_state_size(const dd_model *m) {
    return (size_t)((const dgru_impl *)m->impl)->H;
}

static void dgru_forward_state(const dd_model *m, const float *p, const float *x, float *y, int T,
                               float *state, float *ws) {
    const dgru_impl *g = m->impl;
    dgru_ws w;
    layout(g, 1, T, ws, &w);
    run(m, p, x, y, 1, T, state, ws);
    memcpy(state, w.h + (size_t)(T - 1) * (size_t)g->H, (size_t)g->H * sizeof(float));
}

static double dgru_flops(const dd_model *m, int backward) {
    double H = ((const dgru_impl *)m->impl)->H;
    double f = DD_MAC * (3 * H * (NF + H) + H * H + 2 * (H + NF)) + 14 * H + 12;
    return backward ? 2 * f : f;
}

static const dd_model_ops dgru_ops = {
    .init = dgru_init,
    .workspace = dgru_workspace,
    .forward = dgru_forward,
    .backward = dgru_backward,
    .state_size = dgru_state_size,
    .forward_state = dgru_forward_state,
    .flops = dgru_flops,
};

static dd_status dgru_build(dd_model *m) {
    dgru_impl *g = m->impl;
    DD_TRY(dd_model_cfg_field(m, "hidden", &m->cfg.hidden, DGRU_DEFAULT_HIDDEN, 1, 4096));
    dd_model_cfg_unused(m, "layers", &m->cfg.layers);
    dd_model_cfg_unused(m, "memory", &m->cfg.memory);
    dd_model_cfg_unused(m, "order", &m->cfg.order);
    dd_model_cfg_unused(m, "kernel", &m->cfg.kernel);
    dd_model_cfg_unused(m, "cross", &m->cfg.cross);
    g->H = m->cfg.hidden;
    DD_TRY(dd_gru_layer_add(&m->table, "rnn", NF, g->H, 1, &g->rnn));
    DD_TRY(dd_dense_layer_add(&m->table, "fc_out", g->H + NF, 2, 1, &g->fc_out));
    DD_TRY(dd_dense_layer_add(&m->table, "fc_hid", g->H, g->H, 1, &g->fc_hid));
    m->history = -1;
    return DD_OK;
}

dd_status dd_model_create_dgru(const dd_model_cfg *cfg, dd_model **out) {
    return dd_model_build("dgru", &dgru_ops, cfg, sizeof(dgru_impl), dgru_build, out);
}
