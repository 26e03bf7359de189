/* Model "hammerstein": a residual stack of neural augmented-Hammerstein blocks (after the
 * augmented Hammerstein model of Liu, Boumaiza and Ghannouchi 2006: a Hammerstein branch
 * plus a parallel FIR branch driven by an |x|-weighted signal for nonlinear memory).
 * Block i maps the complex signal u_i (u_0 = x) to u_{i+1}:
 *   a   = |u_i|                                          envelope (gradient 0 at 0)
 *   g   = W_2 tanh(W_1 tanh(W_0 a + b_0) + b_1) + b_2     learned static nonlinearity:
 *                                                        an MLP 1 -> H -> H -> 2 giving a
 *                                                        complex gain g = g_I + j g_Q
 *   v   = g u_i                                          Hammerstein branch input
 *   s   = a u_i                                          |x|-weighted branch input
 *   u_{i+1} = u_i + FIR([v, s])                          FIR: causal conv 4 -> 2, M taps,
 *                                                        no bias (a widely-linear complex
 *                                                        FIR on v plus one on s)
 * and y = u_L. Names "blocks.<i>.nl.{0,1,2}.weight/bias", "blocks.<i>.fir.weight".
 * L (H^2 + 5H + 2 + 8M) parameters: 740 at the defaults H = 16, L = 2, M = 4; hidden
 * 512, layers 4 gives 1,058,952 (the H x H layer dominates, so the stack scales to
 * millions of parameters for model-parallel runs). History L (M - 1) samples. */
#include <math.h>

#include "models/model_impl.h"

#define HAM_DEFAULT_HIDDEN 16
#define HAM_DEFAULT_LAYERS 2
#define HAM_DEFAULT_MEMORY 4
#define HAM_MAX_LAYERS 64

typedef struct {
    dd_dense_layer nl[3];  /* 1 -> H (tanh), H -> H (tanh), H -> 2 */
    dd_conv1d_layer fir;   /* 4 -> 2, kernel M, no bias */
} ham_block;

typedef struct {
    int H, L, M;                    /* MLP width, blocks, FIR taps */
    ham_block blk[HAM_MAX_LAYERS];
} ham_impl;

typedef struct {
    float *u[HAM_MAX_LAYERS];   /* (BT, 2) input of block i (u[0] unused: x) */
    float *a[HAM_MAX_LAYERS];   /* (BT) envelope */
    float *h1[HAM_MAX_LAYERS];  /* (BT, H) */
    float *h2[HAM_MAX_LAYERS];  /* (BT, H) */
    float *g[HAM_MAX_LAYERS];   /* (BT, 2) complex gain */
    float *cat[HAM_MAX_LAYERS]; /* (BT, 4) [v, s] */
    float *du, *dcat, *dg, *da, *dh, *dha; /* backward scratch */
} ham_ws;

static size_t layout(const ham_impl *g, int B, int T, float *base, ham_ws *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    for (int i = 0; i < g->L; i++) {
        w->u[i] = i ? dd_ws_take(&c, BT * 2) : NULL;
        w->a[i] = dd_ws_take(&c, BT);
        w->h1[i] = dd_ws_take(&c, BT * H);
        w->h2[i] = dd_ws_take(&c, BT * H);
        w->g[i] = dd_ws_take(&c, BT * 2);
        w->cat[i] = dd_ws_take(&c, BT * 4);
    }
    w->du = dd_ws_take(&c, BT * 2);
    w->dcat = dd_ws_take(&c, BT * 4);
    w->dg = dd_ws_take(&c, BT * 2);
    w->da = dd_ws_take(&c, BT);
    w->dh = dd_ws_take(&c, BT * H);
    w->dha = dd_ws_take(&c, BT * H);
    return c.used;
}

static size_t ham_workspace(const dd_model *m, int B, int T) {
    ham_ws w;
    return layout(m->impl, B, T, NULL, &w);
}

static void ham_init(const dd_model *m, float *params, dd_rng *rng) {
    const ham_impl *g = m->impl;
    for (int i = 0; i < g->L; i++) {
        for (int k = 0; k < 3; k++) dd_dense_layer_init(&g->blk[i].nl[k], params, rng);
        dd_conv1d_layer_init(&g->blk[i].fir, params, rng);
    }
}

static void ham_forward(const dd_model *m, const float *p, const float *x, float *y, int B, int T,
                        float *ws) {
    const ham_impl *g = m->impl;
    ham_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, nh = BT * (size_t)g->H;
    for (int i = 0; i < g->L; i++) {
        const ham_block *k = &g->blk[i];
        const float *u = i ? w.u[i] : x;
        float *out = i + 1 < g->L ? w.u[i + 1] : y;
        float *a = w.a[i], *gn = w.g[i], *cat = w.cat[i];
        for (size_t r = 0; r < BT; r++) a[r] = sqrtf(u[2 * r] * u[2 * r] + u[2 * r + 1] * u[2 * r + 1]);
        dd_dense_forward(w.h1[i], a, p + k->nl[0].w, p + k->nl[0].b, BT, 1, g->H);
        dd_act_forward(DD_ACT_TANH, w.h1[i], w.h1[i], nh);
        dd_dense_forward(w.h2[i], w.h1[i], p + k->nl[1].w, p + k->nl[1].b, BT, g->H, g->H);
        dd_act_forward(DD_ACT_TANH, w.h2[i], w.h2[i], nh);
        dd_dense_forward(gn, w.h2[i], p + k->nl[2].w, p + k->nl[2].b, BT, g->H, 2);
        for (size_t r = 0; r < BT; r++) {
            const float ur = u[2 * r], ui = u[2 * r + 1], gr = gn[2 * r], gi = gn[2 * r + 1];
            float *c4 = cat + 4 * r;
            c4[0] = gr * ur - gi * ui;
            c4[1] = gr * ui + gi * ur;
            c4[2] = a[r] * ur;
            c4[3] = a[r] * ui;
        }
        const dd_conv1d_layer *f = &k->fir;
        dd_conv1d_forward(out, cat, p + f->w, NULL, B, T, 4, 2, f->kernel, 1, 1);
        dd_add_forward(out, out, u, 2 * BT);
    }
}

static void ham_backward(const dd_model *m, const float *p, float *gr, const float *x,
                         const float *dy, float *dx, int B, int T, float *ws) {
    const ham_impl *g = m->impl;
    ham_ws w;
    layout(g, B, T, ws, &w);
    const size_t BT = (size_t)B * (size_t)T, nh = BT * (size_t)g->H;
    float *du = w.du;
    memcpy(du, dy, 2 * BT * sizeof(float));
    for (int i = g->L - 1; i >= 0; i--) {
        const ham_block *k = &g->blk[i];
        const float *u = i ? w.u[i] : x;
        const float *a = w.a[i], *gn = w.g[i];
        const dd_conv1d_layer *f = &k->fir;
        /* du = dL/du_{i+1}; the identity path passes it to u_i unchanged. */
        memset(w.dcat, 0, 4 * BT * sizeof(float));
        dd_conv1d_backward(w.dcat, dd_gview(gr, f->w), NULL, du, w.cat[i], p + f->w, B, T, 4, 2,
                           f->kernel, 1, 1);
        memset(w.da, 0, BT * sizeof(float));
        for (size_t r = 0; r < BT; r++) {
            const float ur = u[2 * r], ui = u[2 * r + 1], g_r = gn[2 * r], g_i = gn[2 * r + 1];
            const float *d4 = w.dcat + 4 * r;
            /* v = g u: du += conj(g) dv, dg = conj(u) dv */
            du[2 * r] += g_r * d4[0] + g_i * d4[1];
            du[2 * r + 1] += g_r * d4[1] - g_i * d4[0];
            w.dg[2 * r] = ur * d4[0] + ui * d4[1];
            w.dg[2 * r + 1] = ur * d4[1] - ui * d4[0];
            /* s = a u: du += a ds, da += Re(conj(ds) u) */
            du[2 * r] += a[r] * d4[2];
            du[2 * r + 1] += a[r] * d4[3];
            w.da[r] = d4[2] * ur + d4[3] * ui;
        }
        memset(w.dh, 0, nh * sizeof(float));
        dd_dense_backward(w.dh, dd_gview(gr, k->nl[2].w), dd_gview(gr, k->nl[2].b), w.dg, w.h2[i],
                          p + k->nl[2].w, BT, g->H, 2);
        memset(w.dha, 0, nh * sizeof(float));
        dd_act_backward(DD_ACT_TANH, w.dha, w.dh, NULL, w.h2[i], nh);
        memset(w.dh, 0, nh * sizeof(float));
        dd_dense_backward(w.dh, dd_gview(gr, k->nl[1].w), dd_gview(gr, k->nl[1].b), w.dha,
                          w.h1[i], p + k->nl[1].w, BT, g->H, g->H);
        memset(w.dha, 0, nh * sizeof(float));
        dd_act_backward(DD_ACT_TANH, w.dha, w.dh, NULL, w.h1[i], nh);
        dd_dense_backward(w.da, dd_gview(gr, k->nl[0].w), dd_gview(gr, k->nl[0].b), w.dha, a,
                          p + k->nl[0].w, BT, 1, g->H);
        /* a = |u|: du += da u / a (zero at a = 0) */
        for (size_t r = 0; r < BT; r++)
            if (a[r] > 0) {
                du[2 * r] += w.da[r] * u[2 * r] / a[r];
                du[2 * r + 1] += w.da[r] * u[2 * r + 1] / a[r];
            }
    }
    if (dx)
        for (size_t r = 0; r < 2 * BT; r++) dx[r] += du[r];
}

static double ham_flops(const dd_model *m, int backward) {
    const ham_impl *g = m->impl;
    double H = g->H;
    double f = g->L * (DD_MAC * (H + H * H + 2 * H + 8.0 * g->M) + 8 * H + 20);
    return backward ? 2 * f : f;
}

static const dd_model_ops ham_ops = {
    .init = ham_init,
    .workspace = ham_workspace,
    .forward = ham_forward,
    .backward = ham_backward,
    .flops = ham_flops,
};

static dd_status ham_build(dd_model *m) {
    ham_impl *g = m->impl;
    DD_TRY(dd_model_cfg_field(m, "hidden", &m->cfg.hidden, HAM_DEFAULT_HIDDEN, 1, 4096));
    DD_TRY(dd_model_cfg_field(m, "layers", &m->cfg.layers, HAM_DEFAULT_LAYERS, 1, HAM_MAX_LAYERS));
    DD_TRY(dd_model_cfg_field(m, "memory", &m->cfg.memory, HAM_DEFAULT_MEMORY, 1, 1024));
    dd_model_cfg_unused(m, "order", &m->cfg.order);
    dd_model_cfg_unused(m, "kernel", &m->cfg.kernel);
    dd_model_cfg_unused(m, "cross", &m->cfg.cross);
    g->H = m->cfg.hidden;
    g->L = m->cfg.layers;
    g->M = m->cfg.memory;
    char name[40];
    for (int i = 0; i < g->L; i++) {
        ham_block *k = &g->blk[i];
        snprintf(name, sizeof name, "blocks.%d.nl.0", i);
        DD_TRY(dd_dense_layer_add(&m->table, name, 1, g->H, 1, &k->nl[0]));
        snprintf(name, sizeof name, "blocks.%d.nl.1", i);
        DD_TRY(dd_dense_layer_add(&m->table, name, g->H, g->H, 1, &k->nl[1]));
        snprintf(name, sizeof name, "blocks.%d.nl.2", i);
        DD_TRY(dd_dense_layer_add(&m->table, name, g->H, 2, 1, &k->nl[2]));
        snprintf(name, sizeof name, "blocks.%d.fir", i);
        DD_TRY(dd_conv1d_layer_add(&m->table, name, 4, 2, g->M, 1, 1, 0, &k->fir));
    }
    m->history = (long)g->L * (g->M - 1);
    return DD_OK;
}

dd_status dd_model_create_hammerstein(const dd_model_cfg *cfg, dd_model **out) {
    return dd_model_build("hammerstein", &ham_ops, cfg, sizeof(ham_impl), ham_build, out);
}
