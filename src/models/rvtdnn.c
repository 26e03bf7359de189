/* Models "rvtdnn" and "arvtdnn": tapped-delay-line MLPs (one file, two registry entries;
 * they differ only in the per-tap features).
 * RVTDNN (Liu, Boumaiza, Ghannouchi 2004): per tap m = 0..M-1 the features
 *   u_m = [I(t-m), Q(t-m)]                                   (F = 2)
 * ARVTDNN (Wang et al. 2019) adds the envelope terms of every tap:
 *   u_m = [I(t-m), Q(t-m), r(t-m), r(t-m)^2, r(t-m)^3],  r = |x|   (F = 5)
 * (samples before the frame start are zero). The delay line U = [u_0, ..., u_{M-1}]
 * (F*M inputs) feeds L tanh layers of H units and a linear output:
 *   z_1 = tanh(W_0 U + b_0), z_{i+1} = tanh(W_i z_i + b_i), y = W_out z_L + b_out.
 * Names "hidden.<i>.weight/bias", "fc_out.weight/bias". (F M + 1) H + (L-1)(H + 1) H
 * + 2H + 2 parameters: 1,666 (rvtdnn) and 2,434 (arvtdnn) at the defaults M = 8, H = 32,
 * L = 2. History M - 1 samples. The gradient of r at x = 0 is defined as zero. */
#include <math.h>

#include "models/model_impl.h"

#define TD_DEFAULT_MEMORY 8
#define TD_DEFAULT_HIDDEN 32
#define TD_DEFAULT_LAYERS 2
#define TD_MAX_LAYERS 64

typedef struct {
    int F, M, H, L;                     /* features per tap, taps, width, hidden layers */
    dd_dense_layer hid[TD_MAX_LAYERS];  /* hidden.0: F*M -> H, hidden.i: H -> H */
    dd_dense_layer out;                 /* fc_out: H -> 2 */
} td_impl;

typedef struct {
    float *U;                    /* (BT, F*M) delay-line features */
    float *z[TD_MAX_LAYERS];     /* (BT, H) tanh outputs */
    float *dz, *da, *dU;         /* backward scratch (BT, H), (BT, H), (BT, F*M) */
} td_ws;

static size_t layout(const td_impl *g, int B, int T, float *base, td_ws *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H, FM = (size_t)g->F * (size_t)g->M;
    w->U = dd_ws_take(&c, BT * FM);
    for (int i = 0; i < g->L; i++) w->z[i] = dd_ws_take(&c, BT * H);
    w->dz = dd_ws_take(&c, BT * H);
    w->da = dd_ws_take(&c, BT * H);
    w->dU = dd_ws_take(&c, BT * FM);
    return c.used;
}

static size_t td_workspace(const dd_model *m, int B, int T) {
    td_ws w;
    return layout(m->impl, B, T, NULL, &w);
}

static void td_init(const dd_model *m, float *params, dd_rng *rng) {
    const td_impl *g = m->impl;
    for (int i = 0; i < g->L; i++) dd_dense_layer_init(&g->hid[i], params, rng);
    dd_dense_layer_init(&g->out, params, rng);
}

/* U[b, t, m*F + f] = feature f of x[b, t-m] (zero for t < m). */
static void build_taps(const td_impl *g, const float *x, float *U, int B, int T) {
    const size_t F = (size_t)g->F, M = (size_t)g->M, FM = F * M;
    for (size_t b = 0; b < (size_t)B; b++)
        for (size_t t = 0; t < (size_t)T; t++) {
            float *u = U + (b * (size_t)T + t) * FM;
            for (size_t k = 0; k < M; k++) {
                float *v = u + k * F;
                if (k > t) {
                    for (size_t f = 0; f < F; f++) v[f] = 0;
                    continue;
                }
                const float *s = x + 2 * (b * (size_t)T + t - k);
                v[0] = s[0];
                v[1] = s[1];
                if (F == 5) {
                    float r = sqrtf(s[0] * s[0] + s[1] * s[1]);
                    v[2] = r;
                    v[3] = r * r;
                    v[4] = r * r * r;
                }
            }
        }
}

/* dx += the delay-line features' Jacobian^T dU. */
static void scatter_taps(const td_impl *g, const float *x, const float *dU, float *dx, int B,
                         int T) {
    const size_t F = (size_t)g->F, M = (size_t)g->M, FM = F * M;
    for (size_t b = 0; b < (size_t)B; b++)
        for (size_t t = 0; t < (size_t)T; t++) {
            const float *du = dU + (b * (size_t)T + t) * FM;
            for (size_t k = 0; k < M && k <= t; k++) {
                const float *d = du + k * F;
                const size_t row = b * (size_t)T + t - k;
                float *o = dx + 2 * row;
                o[0] += d[0];
                o[1] += d[1];
                if (F == 5) {
                    const float *s = x + 2 * row;
                    float r = sqrtf(s[0] * s[0] + s[1] * s[1]);
                    if (r > 0) {
                        float dr = d[2] + 2 * r * d[3] + 3 * r * r * d[4];
                        o[0] += dr * s[0] / r;
                        o[1] += dr * s[1] / r;
                    }
                }
            }
        }
}

static void td_forward(const dd_model *m, const float *p, const float *x, float *y, int B, int T,
                       float *ws) {
    const td_impl *g = m->impl;
    td_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)g->H;
    build_taps(g, x, w.U, B, T);
    const float *in = w.U;
    for (int i = 0; i < g->L; i++) {
        const dd_dense_layer *l = &g->hid[i];
        dd_dense_forward(w.z[i], in, p + l->w, p + l->b, BT, l->in_dim, l->out_dim);
        dd_act_forward(DD_ACT_TANH, w.z[i], w.z[i], n);
        in = w.z[i];
    }
    dd_dense_forward(y, in, p + g->out.w, p + g->out.b, BT, g->H, 2);
}

static void td_backward(const dd_model *m, const float *p, float *gr, const float *x,
                        const float *dy, float *dx, int B, int T, float *ws) {
    const td_impl *g = m->impl;
    td_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)g->H;
    memset(w.dz, 0, n * sizeof(float));
    dd_dense_backward(w.dz, dd_gview(gr, g->out.w), dd_gview(gr, g->out.b), dy, w.z[g->L - 1],
                      p + g->out.w, BT, g->H, 2);
    for (int i = g->L - 1; i >= 0; i--) {
        const dd_dense_layer *l = &g->hid[i];
        memset(w.da, 0, n * sizeof(float));
        dd_act_backward(DD_ACT_TANH, w.da, w.dz, NULL, w.z[i], n);
        float *din = NULL;
        if (i > 0) {
            memset(w.dz, 0, n * sizeof(float));
            din = w.dz;
        } else if (dx) {
            memset(w.dU, 0, BT * (size_t)l->in_dim * sizeof(float));
            din = w.dU;
        }
        dd_dense_backward(din, dd_gview(gr, l->w), dd_gview(gr, l->b), w.da,
                          i > 0 ? w.z[i - 1] : w.U, p + l->w, BT, l->in_dim, l->out_dim);
    }
    if (dx) scatter_taps(g, x, w.dU, dx, B, T);
}

static double td_flops(const dd_model *m, int backward) {
    const td_impl *g = m->impl;
    double H = g->H;
    double f = DD_MAC * ((double)g->F * g->M * H + (g->L - 1) * H * H + 2 * H) + 4 * H * g->L +
               (g->F == 5 ? 8.0 * g->M : 0.0);
    return backward ? 2 * f : f;
}

static const dd_model_ops td_ops = {
    .init = td_init,
    .workspace = td_workspace,
    .forward = td_forward,
    .backward = td_backward,
    .flops = td_flops,
};

static dd_status td_build(dd_model *m, int F) {
    td_impl *g = m->impl;
    DD_TRY(dd_model_cfg_field(m, "memory", &m->cfg.memory, TD_DEFAULT_MEMORY, 1, 1024));
    DD_TRY(dd_model_cfg_field(m, "hidden", &m->cfg.hidden, TD_DEFAULT_HIDDEN, 1, 4096));
    DD_TRY(dd_model_cfg_field(m, "layers", &m->cfg.layers, TD_DEFAULT_LAYERS, 1, TD_MAX_LAYERS));
    dd_model_cfg_unused(m, "order", &m->cfg.order);
    dd_model_cfg_unused(m, "kernel", &m->cfg.kernel);
    dd_model_cfg_unused(m, "cross", &m->cfg.cross);
    g->F = F;
    g->M = m->cfg.memory;
    g->H = m->cfg.hidden;
    g->L = m->cfg.layers;
    char name[40];
    for (int i = 0; i < g->L; i++) {
        snprintf(name, sizeof name, "hidden.%d", i);
        DD_TRY(dd_dense_layer_add(&m->table, name, i ? g->H : g->F * g->M, g->H, 1, &g->hid[i]));
    }
    DD_TRY(dd_dense_layer_add(&m->table, "fc_out", g->H, 2, 1, &g->out));
    m->history = g->M - 1;
    return DD_OK;
}

static dd_status rvtdnn_build(dd_model *m) { return td_build(m, 2); }
static dd_status arvtdnn_build(dd_model *m) { return td_build(m, 5); }

dd_status dd_model_create_rvtdnn(const dd_model_cfg *cfg, dd_model **out) {
    return dd_model_build("rvtdnn", &td_ops, cfg, sizeof(td_impl), rvtdnn_build, out);
}

dd_status dd_model_create_arvtdnn(const dd_model_cfg *cfg, dd_model **out) {
    return dd_model_build("arvtdnn", &td_ops, cfg, sizeof(td_impl), arvtdnn_build, out);
}
