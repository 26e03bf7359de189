/* Model "dgru": the OpenDPD DGRU. Per step
 *   f_t = [I, Q, |x|, |x|^3, sin(phi), cos(phi)]         (dd_iqfeat, 6 features)
 *   h_t = GRU(f_t, h_{t-1})                               (6 -> H)
 *   r_t = ReLU(W_hid h_t + b_hid)                         (H -> H)
 *   y_t = W_out [r_t, f_t] + b_out                        (H + 6 -> 2)
 * Names as OpenDPD's backbone state_dict, in its module order: "rnn.*", "fc_out.*",
 * "fc_hid.*". 4H^2 + 27H + 14 parameters (2,751 at the default H = 23). Stages: "rnn"
 * (features and GRU: entries rnn.*) and "head" (fc_out, fc_hid: the head recomputes the
 * features from the model input for its skip path). */
#include <string.h>

#include "models/model_impl.h"

#define NF DD_IQFEAT_DIM

typedef struct {
    int H;                  /* hidden units */
    dd_gru_layer rnn;       /* GRU(6 -> H) */
    dd_dense_layer fc_out;  /* Linear(H + 6 -> 2) */
    dd_dense_layer fc_hid;  /* Linear(H -> H), ReLU */
} dgru_impl;

static const dd_model_opt_info dgru_opts[] = {{"hidden", "hidden units of the GRU and of fc_hid", 23, 1, 4096},
                                              {NULL, NULL, 0, 0, 0}};

static void dgru_init(const dd_model *m, float *params, dd_rng *rng) {
    const dgru_impl *g = m->impl;
    dd_gru_layer_init(&g->rnn, params, rng);
    dd_dense_layer_init(&g->fc_out, params, rng);
    dd_dense_layer_init(&g->fc_hid, params, rng);
}

/* ---- stage "rnn": x -> f -> h; saved: f (BT, 6), then the GRU workspace ---- */

static size_t rnn_layout(const dgru_impl *g, int B, int T, float *base, float **feat, float **gws) {
    dd_ws_carver c = {base, 0};
    *feat = dd_ws_take(&c, (size_t)B * (size_t)T * NF);
    *gws = dd_ws_take(&c, dd_gru_workspace_size(B, T, NF, g->H));
    return c.used;
}

static size_t rnn_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    float *a, *b;
    return rnn_layout(m->impl, B, T, NULL, &a, &b);
}

static size_t rnn_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m, (void)st;
    return (size_t)B * (size_t)T * NF; /* dL/df */
}

static void rnn_run(const dd_model *m, const dd_stage_params *sp, const float *in, const float *h0, float *out,
                    int B, int T, float *saved) {
    const dgru_impl *g = m->impl;
    const dd_gru_layer *r = &g->rnn;
    float *feat, *gws;
    rnn_layout(g, B, T, saved, &feat, &gws);
    dd_iqfeat_forward(feat, in, (size_t)B * (size_t)T);
    dd_gru_forward(out, gws, feat, h0, DD_SP(sp, r->w_ih), DD_SP(sp, r->w_hh), DD_SP(sp, r->b_ih), DD_SP(sp, r->b_hh),
                   B, T, NF, g->H);
}

static void rnn_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                        const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)st, (void)x0, (void)scratch;
    rnn_run(m, sp, in, NULL, out, B, T, saved);
}

static void rnn_forward_state(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                              const float *x0, float *out, int B, int T, float *state, float *saved,
                              float *scratch) {
    (void)st, (void)x0, (void)scratch;
    const size_t H = (size_t)((const dgru_impl *)m->impl)->H;
    rnn_run(m, sp, in, state, out, B, T, saved);
    dd_stage_final_rows(state, out, B, T, H);
}

static size_t rnn_state(const dd_model *m, const dd_stage_def *st) {
    (void)st;
    return (size_t)((const dgru_impl *)m->impl)->H;
}

static void rnn_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                         const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                         float *scratch) {
    (void)st, (void)x0, (void)dx0;
    const dgru_impl *g = m->impl;
    const dd_gru_layer *r = &g->rnn;
    const size_t BT = (size_t)B * (size_t)T;
    float *feat, *gws, *dfeat = din ? scratch : NULL;
    rnn_layout(g, B, T, saved, &feat, &gws);
    if (dfeat) memset(dfeat, 0, BT * NF * sizeof(float));
    dd_gru_backward(dfeat, NULL, DD_SG(sp, r->w_ih), DD_SG(sp, r->w_hh), DD_SG(sp, r->b_ih), DD_SG(sp, r->b_hh), dout,
                    gws, feat, DD_SP(sp, r->w_ih), DD_SP(sp, r->w_hh), B, T, NF, g->H);
    if (din) dd_iqfeat_backward(din, dfeat, in, BT);
}

static double rnn_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    double H = ((const dgru_impl *)m->impl)->H;
    double f = DD_MAC * 3 * H * (NF + H) + 12 * H + 12;
    return backward ? 2 * f : f;
}

static const dd_stage_ops rnn_stage = {
    .saved = rnn_saved,
    .scratch = rnn_scratch,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = rnn_forward,
    .backward = rnn_backward,
    .flops = rnn_flops,
    .state_size = rnn_state,
    .forward_state = rnn_forward_state,
};

/* ---- stage "head": h (and x0) -> y; saved: f, a = W_hid h + b, r = ReLU(a), [r, f] ---- */

typedef struct {
    float *feat, *a, *r, *cat;  /* saved */
} head_saved_ws;
typedef struct {
    float *dcat, *dr, *da, *dfeat; /* scratch */
} head_scratch_ws;

static size_t head_saved_layout(const dgru_impl *g, int B, int T, float *base, head_saved_ws *w) {
    dd_ws_carver c = {base, 0};
    const size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    w->feat = dd_ws_take(&c, BT * NF);
    w->a = dd_ws_take(&c, BT * H);
    w->r = dd_ws_take(&c, BT * H);
    w->cat = dd_ws_take(&c, BT * (H + NF));
    return c.used;
}

static size_t head_scratch_layout(const dgru_impl *g, int B, int T, float *base, head_scratch_ws *w) {
    dd_ws_carver c = {base, 0};
    const size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    w->dcat = dd_ws_take(&c, BT * (H + NF));
    w->dr = dd_ws_take(&c, BT * H);
    w->da = dd_ws_take(&c, BT * H);
    w->dfeat = dd_ws_take(&c, BT * NF);
    return c.used;
}

static size_t head_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    head_saved_ws w;
    return head_saved_layout(m->impl, B, T, NULL, &w);
}

static size_t head_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    head_scratch_ws w;
    return head_scratch_layout(m->impl, B, T, NULL, &w);
}

static void head_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                         const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)st, (void)scratch;
    const dgru_impl *g = m->impl;
    const size_t BT = (size_t)B * (size_t)T;
    const int H = g->H;
    head_saved_ws w;
    head_saved_layout(g, B, T, saved, &w);
    dd_iqfeat_forward(w.feat, x0, BT);
    dd_dense_forward(w.a, in, DD_SP(sp, g->fc_hid.w), DD_SP(sp, g->fc_hid.b), BT, H, H);
    dd_act_forward(DD_ACT_RELU, w.r, w.a, BT * (size_t)H);
    dd_concat_forward(w.cat, w.r, w.feat, BT, H, NF);
    dd_dense_forward(out, w.cat, DD_SP(sp, g->fc_out.w), DD_SP(sp, g->fc_out.b), BT, H + NF, 2);
}

static void head_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                          float *scratch) {
    (void)st;
    const dgru_impl *g = m->impl;
    const size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    head_saved_ws w;
    head_scratch_ws d;
    head_saved_layout(g, B, T, saved, &w);
    head_scratch_layout(g, B, T, scratch, &d);
    float *dfeat = dx0 ? d.dfeat : NULL;
    memset(d.dcat, 0, BT * (H + NF) * sizeof(float));
    memset(d.dr, 0, BT * H * sizeof(float));
    memset(d.da, 0, BT * H * sizeof(float));
    if (dfeat) memset(dfeat, 0, BT * NF * sizeof(float));
    dd_dense_backward(d.dcat, DD_SG(sp, g->fc_out.w), DD_SG(sp, g->fc_out.b), dout, w.cat, DD_SP(sp, g->fc_out.w), BT,
                      (int)H + NF, 2);
    dd_concat_backward(d.dr, dfeat, d.dcat, BT, (int)H, NF);
    dd_act_backward(DD_ACT_RELU, d.da, d.dr, w.a, w.r, BT * H);
    dd_dense_backward(din, DD_SG(sp, g->fc_hid.w), DD_SG(sp, g->fc_hid.b), d.da, in, DD_SP(sp, g->fc_hid.w), BT,
                      (int)H, (int)H);
    if (dfeat) dd_iqfeat_backward(dx0, dfeat, x0, BT);
}

static double head_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    double H = ((const dgru_impl *)m->impl)->H;
    double f = DD_MAC * (H * H + 2 * (H + NF)) + 2 * H;
    return backward ? 2 * f : f;
}

static const dd_stage_ops head_stage = {
    .saved = head_saved,
    .scratch = head_scratch,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = head_forward,
    .backward = head_backward,
    .flops = head_flops,
};

static const dd_model_ops dgru_ops = {.init = dgru_init};

static dd_status dgru_build(dd_model *m) {
    dgru_impl *g = m->impl;
    g->H = dd_model_opt(m, "hidden");
    DD_TRY(dd_gru_layer_add(&m->table, "rnn", NF, g->H, 1, &g->rnn));
    DD_TRY(dd_model_add_stage(m, &rnn_stage, "rnn", 0, NULL, 2, g->H));
    DD_TRY(dd_dense_layer_add(&m->table, "fc_out", g->H + NF, 2, 1, &g->fc_out));
    DD_TRY(dd_dense_layer_add(&m->table, "fc_hid", g->H, g->H, 1, &g->fc_hid));
    DD_TRY(dd_model_add_stage(m, &head_stage, "head", 0, NULL, g->H, 2));
    m->history = -1;
    return DD_OK;
}

DD_MODEL_DEFINE(dgru, "OpenDPD DGRU: I/Q features -> GRU -> ReLU dense, skip features -> linear", dgru_opts,
                &dgru_ops, dgru_impl, dgru_build);
