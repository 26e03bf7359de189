/* Model "resnet": a deep residual time-delay (causal convolution) network. With
 * f_t = dd_iqfeat(x_t) (6 features), C channels, L blocks, kernel K:
 *   h_0     = Conv1x1_{6->C}(f) + b                                   "stem"
 *   h_{i+1} = h_i + Conv1x1_{C->C}(tanh(CausalConv_{C->C, K}(h_i)))  "blocks.i.conv/proj"
 *   y       = Conv1x1_{C->2}(h_L) + b + x                             "head", input added back
 * All convolutions have biases. 7C + L (K C^2 + C^2 + 2C) + 2C + 2 parameters (2,510 at
 * the defaults C = 12, L = 4, K = 3). History L (K-1) samples. */
#include "models/model_impl.h"

#define RES_DEFAULT_HIDDEN 12
#define RES_DEFAULT_LAYERS 4
#define RES_DEFAULT_KERNEL 3
#define RES_MAX_LAYERS 64
#define NF DD_IQFEAT_DIM

typedef struct {
    int C, L, K;                           /* channels, residual blocks, kernel */
    dd_conv1d_layer stem;                  /* 6 -> C, 1x1 */
    dd_conv1d_layer conv[RES_MAX_LAYERS];  /* C -> C, kernel K, causal */
    dd_conv1d_layer proj[RES_MAX_LAYERS];  /* C -> C, 1x1 */
    dd_conv1d_layer head;                  /* C -> 2, 1x1 */
} res_impl;

typedef struct {
    float *feat;                   /* (BT, 6) */
    float *h[RES_MAX_LAYERS + 1];  /* (BT, C) residual stream before block i / after last */
    float *z[RES_MAX_LAYERS];      /* (BT, C) tanh outputs of block i */
    float *tmp;                    /* (BT, C) forward scratch (block output) */
    float *dh, *dz, *da, *dfeat;   /* backward scratch */
} res_ws;

static size_t layout(const res_impl *g, int B, int T, float *base, res_ws *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, C = (size_t)g->C;
    w->feat = dd_ws_take(&c, BT * NF);
    for (int i = 0; i <= g->L; i++) w->h[i] = dd_ws_take(&c, BT * C);
    for (int i = 0; i < g->L; i++) w->z[i] = dd_ws_take(&c, BT * C);
    w->tmp = dd_ws_take(&c, BT * C);
    w->dh = dd_ws_take(&c, BT * C);
    w->dz = dd_ws_take(&c, BT * C);
    w->da = dd_ws_take(&c, BT * C);
    w->dfeat = dd_ws_take(&c, BT * NF);
    return c.used;
}

static size_t res_workspace(const dd_model *m, int B, int T) {
    res_ws w;
    return layout(m->impl, B, T, NULL, &w);
}

static void res_init(const dd_model *m, float *params, dd_rng *rng) {
    const res_impl *g = m->impl;
    dd_conv1d_layer_init(&g->stem, params, rng);
    for (int i = 0; i < g->L; i++) {
        dd_conv1d_layer_init(&g->conv[i], params, rng);
        dd_conv1d_layer_init(&g->proj[i], params, rng);
    }
    dd_conv1d_layer_init(&g->head, params, rng);
}

static void conv_fwd(const dd_conv1d_layer *l, const float *p, float *out, const float *in, int B,
                     int T) {
    dd_conv1d_forward(out, in, p + l->w, p + l->b, B, T, l->c_in, l->c_out, l->kernel,
                      l->dilation, l->groups);
}

static void conv_bwd(const dd_conv1d_layer *l, const float *p, float *gr, float *din,
                     const float *dout, const float *in, int B, int T) {
    dd_conv1d_backward(din, dd_gview(gr, l->w), dd_gview(gr, l->b), dout, in, p + l->w, B, T,
                       l->c_in, l->c_out, l->kernel, l->dilation, l->groups);
}

static void res_forward(const dd_model *m, const float *p, const float *x, float *y, int B, int T,
                        float *ws) {
    const res_impl *g = m->impl;
    res_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)g->C;
    dd_iqfeat_forward(w.feat, x, BT);
    conv_fwd(&g->stem, p, w.h[0], w.feat, B, T);
    for (int i = 0; i < g->L; i++) {
        conv_fwd(&g->conv[i], p, w.z[i], w.h[i], B, T);
        dd_act_forward(DD_ACT_TANH, w.z[i], w.z[i], n);
        conv_fwd(&g->proj[i], p, w.tmp, w.z[i], B, T);
        dd_add_forward(w.h[i + 1], w.h[i], w.tmp, n);
    }
    conv_fwd(&g->head, p, y, w.h[g->L], B, T);
    dd_add_forward(y, y, x, 2 * BT);
}

static void res_backward(const dd_model *m, const float *p, float *gr, const float *x,
                         const float *dy, float *dx, int B, int T, float *ws) {
    const res_impl *g = m->impl;
    res_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)g->C;
    memset(w.dh, 0, n * sizeof(float));
    conv_bwd(&g->head, p, gr, w.dh, dy, w.h[g->L], B, T);
    for (int i = g->L - 1; i >= 0; i--) {
        /* dh holds dL/dh_{i+1}; the identity path keeps it, the block adds its part. */
        memset(w.dz, 0, n * sizeof(float));
        conv_bwd(&g->proj[i], p, gr, w.dz, w.dh, w.z[i], B, T);
        memset(w.da, 0, n * sizeof(float));
        dd_act_backward(DD_ACT_TANH, w.da, w.dz, NULL, w.z[i], n);
        conv_bwd(&g->conv[i], p, gr, w.dh, w.da, w.h[i], B, T);
    }
    if (dx) {
        memset(w.dfeat, 0, BT * NF * sizeof(float));
        conv_bwd(&g->stem, p, gr, w.dfeat, w.dh, w.feat, B, T);
        dd_iqfeat_backward(dx, w.dfeat, x, BT);
        dd_add_backward(dx, NULL, dy, 2 * BT);
    } else {
        conv_bwd(&g->stem, p, gr, NULL, w.dh, w.feat, B, T);
    }
}

static double res_flops(const dd_model *m, int backward) {
    const res_impl *g = m->impl;
    double C = g->C;
    double f = DD_MAC * (NF * C + g->L * (g->K + 1) * C * C + 2 * C) + g->L * 6 * C + 16;
    return backward ? 2 * f : f;
}

static const dd_model_ops res_ops = {
    .init = res_init,
    .workspace = res_workspace,
    .forward = res_forward,
    .backward = res_backward,
    .flops = res_flops,
};

static dd_status res_build(dd_model *m) {
    res_impl *g = m->impl;
    DD_TRY(dd_model_cfg_field(m, "hidden", &m->cfg.hidden, RES_DEFAULT_HIDDEN, 1, 4096));
    DD_TRY(dd_model_cfg_field(m, "layers", &m->cfg.layers, RES_DEFAULT_LAYERS, 1, RES_MAX_LAYERS));
    DD_TRY(dd_model_cfg_field(m, "kernel", &m->cfg.kernel, RES_DEFAULT_KERNEL, 1, 64));
    dd_model_cfg_unused(m, "memory", &m->cfg.memory);
    dd_model_cfg_unused(m, "order", &m->cfg.order);
    dd_model_cfg_unused(m, "cross", &m->cfg.cross);
    g->C = m->cfg.hidden;
    g->L = m->cfg.layers;
    g->K = m->cfg.kernel;
    char name[40];
    DD_TRY(dd_conv1d_layer_add(&m->table, "stem", NF, g->C, 1, 1, 1, 1, &g->stem));
    for (int i = 0; i < g->L; i++) {
        snprintf(name, sizeof name, "blocks.%d.conv", i);
        DD_TRY(dd_conv1d_layer_add(&m->table, name, g->C, g->C, g->K, 1, 1, 1, &g->conv[i]));
        snprintf(name, sizeof name, "blocks.%d.proj", i);
        DD_TRY(dd_conv1d_layer_add(&m->table, name, g->C, g->C, 1, 1, 1, 1, &g->proj[i]));
    }
    DD_TRY(dd_conv1d_layer_add(&m->table, "head", g->C, 2, 1, 1, 1, 1, &g->head));
    m->history = (long)g->L * (g->K - 1);
    return DD_OK;
}

dd_status dd_model_create_resnet(const dd_model_cfg *cfg, dd_model **out) {
    return dd_model_build("resnet", &res_ops, cfg, sizeof(res_impl), res_build, out);
}
