/* Model "tcn": the OpenDPD temporal convolutional network, made causal (OpenDPD pads the
 * dilated convolutions on both sides; here tap k reads x(t - (K-1-k) d) only, so the
 * model streams). With f_t = dd_iqfeat(x_t) (6 features), C channels, L layers:
 *   z_0 = Hardswish(Conv1x1_{6->C}(f) + b)
 *   z_i = Hardswish(DepthwiseConv_{K, dilation 2^(i-1)}(z_{i-1})),   i = 1..L (no bias)
 *   y   = Conv1x1_{C->2}(z_L) + x                                    (no bias)
 * Names follow OpenDPD's nn.Sequential: "network.0.weight/bias", "network.2.weight", ...,
 * "network.<2(L+1)>.weight". 7C + L K C + 2C parameters (2,784 at the defaults C = 96,
 * L = 4, K = 5). History (K-1)(2^L - 1) samples. */
#include "models/model_impl.h"

#define TCN_DEFAULT_HIDDEN 96
#define TCN_DEFAULT_LAYERS 4
#define TCN_DEFAULT_KERNEL 5
#define TCN_MAX_LAYERS 12
#define NF DD_IQFEAT_DIM

typedef struct {
    int C, L, K;                            /* channels, dilated layers, kernel */
    dd_conv1d_layer in;                     /* network.0: 6 -> C, 1x1, bias */
    dd_conv1d_layer dw[TCN_MAX_LAYERS];     /* network.2i: depthwise C, K, dilation 2^(i-1) */
    dd_conv1d_layer out;                    /* network.2(L+1): C -> 2, 1x1, no bias */
} tcn_impl;

typedef struct {
    float *feat;                    /* (BT, 6) */
    float *a[TCN_MAX_LAYERS + 1];   /* (BT, C) pre-activations of layers 0..L */
    float *z[TCN_MAX_LAYERS + 1];   /* (BT, C) activations of layers 0..L */
    float *dz, *da, *dfeat;         /* backward scratch (BT, C), (BT, C), (BT, 6) */
} tcn_ws;

static size_t layout(const tcn_impl *g, int B, int T, float *base, tcn_ws *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, C = (size_t)g->C;
    w->feat = dd_ws_take(&c, BT * NF);
    for (int i = 0; i <= g->L; i++) {
        w->a[i] = dd_ws_take(&c, BT * C);
        w->z[i] = dd_ws_take(&c, BT * C);
    }
    w->dz = dd_ws_take(&c, BT * C);
    w->da = dd_ws_take(&c, BT * C);
    w->dfeat = dd_ws_take(&c, BT * NF);
    return c.used;
}

static size_t tcn_workspace(const dd_model *m, int B, int T) {
    tcn_ws w;
    return layout(m->impl, B, T, NULL, &w);
}

static void tcn_init(const dd_model *m, float *params, dd_rng *rng) {
    const tcn_impl *g = m->impl;
    dd_conv1d_layer_init(&g->in, params, rng);
    for (int i = 0; i < g->L; i++) dd_conv1d_layer_init(&g->dw[i], params, rng);
    dd_conv1d_layer_init(&g->out, params, rng);
}

static void conv_fwd(const dd_conv1d_layer *l, const float *p, float *out, const float *in, int B,
                     int T) {
    dd_conv1d_forward(out, in, p + l->w, l->bias ? p + l->b : NULL, B, T, l->c_in, l->c_out,
                      l->kernel, l->dilation, l->groups);
}

static void conv_bwd(const dd_conv1d_layer *l, const float *p, float *gr, float *din,
                     const float *dout, const float *in, int B, int T) {
    dd_conv1d_backward(din, dd_gview(gr, l->w), l->bias ? dd_gview(gr, l->b) : NULL, dout, in,
                       p + l->w, B, T, l->c_in, l->c_out, l->kernel, l->dilation, l->groups);
}

static void tcn_forward(const dd_model *m, const float *p, const float *x, float *y, int B, int T,
                        float *ws) {
    const tcn_impl *g = m->impl;
    tcn_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)g->C;
    dd_iqfeat_forward(w.feat, x, BT);
    conv_fwd(&g->in, p, w.a[0], w.feat, B, T);
    dd_act_forward(DD_ACT_HARDSWISH, w.z[0], w.a[0], n);
    for (int i = 1; i <= g->L; i++) {
        conv_fwd(&g->dw[i - 1], p, w.a[i], w.z[i - 1], B, T);
        dd_act_forward(DD_ACT_HARDSWISH, w.z[i], w.a[i], n);
    }
    conv_fwd(&g->out, p, y, w.z[g->L], B, T);
    dd_add_forward(y, y, x, 2 * BT);
}

static void tcn_backward(const dd_model *m, const float *p, float *gr, const float *x,
                         const float *dy, float *dx, int B, int T, float *ws) {
    const tcn_impl *g = m->impl;
    tcn_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)g->C;
    memset(w.dz, 0, n * sizeof(float));
    conv_bwd(&g->out, p, gr, w.dz, dy, w.z[g->L], B, T);
    for (int i = g->L; i >= 0; i--) {
        memset(w.da, 0, n * sizeof(float));
        dd_act_backward(DD_ACT_HARDSWISH, w.da, w.dz, w.a[i], w.z[i], n);
        if (i > 0) {
            memset(w.dz, 0, n * sizeof(float));
            conv_bwd(&g->dw[i - 1], p, gr, w.dz, w.da, w.z[i - 1], B, T);
        }
    }
    if (dx) {
        memset(w.dfeat, 0, BT * NF * sizeof(float));
        conv_bwd(&g->in, p, gr, w.dfeat, w.da, w.feat, B, T);
        dd_iqfeat_backward(dx, w.dfeat, x, BT);
        dd_add_backward(dx, NULL, dy, 2 * BT);
    } else {
        conv_bwd(&g->in, p, gr, NULL, w.da, w.feat, B, T);
    }
}

static double tcn_flops(const dd_model *m, int backward) {
    const tcn_impl *g = m->impl;
    double C = g->C;
    double f = DD_MAC * (NF * C + g->L * g->K * C + 2 * C) + 4 * C * (g->L + 1) + 14;
    return backward ? 2 * f : f;
}

static const dd_model_ops tcn_ops = {
    .init = tcn_init,
    .workspace = tcn_workspace,
    .forward = tcn_forward,
    .backward = tcn_backward,
    .flops = tcn_flops,
};

static dd_status tcn_build(dd_model *m) {
    tcn_impl *g = m->impl;
    DD_TRY(dd_model_cfg_field(m, "hidden", &m->cfg.hidden, TCN_DEFAULT_HIDDEN, 1, 4096));
    DD_TRY(dd_model_cfg_field(m, "layers", &m->cfg.layers, TCN_DEFAULT_LAYERS, 1, TCN_MAX_LAYERS));
    DD_TRY(dd_model_cfg_field(m, "kernel", &m->cfg.kernel, TCN_DEFAULT_KERNEL, 1, 64));
    dd_model_cfg_unused(m, "memory", &m->cfg.memory);
    dd_model_cfg_unused(m, "order", &m->cfg.order);
    dd_model_cfg_unused(m, "cross", &m->cfg.cross);
    g->C = m->cfg.hidden;
    g->L = m->cfg.layers;
    g->K = m->cfg.kernel;
    char name[32];
    DD_TRY(dd_conv1d_layer_add(&m->table, "network.0", NF, g->C, 1, 1, 1, 1, &g->in));
    long hist = 0;
    for (int i = 0; i < g->L; i++) {
        int d = 1 << i;
        snprintf(name, sizeof name, "network.%d", 2 * (i + 1));
        DD_TRY(dd_conv1d_layer_add(&m->table, name, g->C, g->C, g->K, d, g->C, 0, &g->dw[i]));
        hist += (long)(g->K - 1) * d;
    }
    snprintf(name, sizeof name, "network.%d", 2 * (g->L + 1));
    DD_TRY(dd_conv1d_layer_add(&m->table, name, g->C, 2, 1, 1, 1, 0, &g->out));
    m->history = hist;
    return DD_OK;
}

dd_status dd_model_create_tcn(const dd_model_cfg *cfg, dd_model **out) {
    return dd_model_build("tcn", &tcn_ops, cfg, sizeof(tcn_impl), tcn_build, out);
}
