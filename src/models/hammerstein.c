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
 * 512, layers 4 gives 1,058,952; hidden 4096, layers 3 gives 50.4 M (the H x H layer
 * dominates, so the stack scales to millions of parameters for model-parallel runs).
 * History L (M - 1) samples. Stages: one per block ("blocks.<i>"). Tensor-parallel shards
 * split each MLP as a Megatron pair (W_0 by output unit, W_1 by input unit: one allreduce
 * of (BT, H) forward, one of BT backward); W_2 and the FIR are replicated. */
#include <math.h>
#include <stdio.h>

#include "models/model_impl.h"

#define HAM_MAX_LAYERS 1024

typedef struct {
    dd_dense_layer nl[3];  /* 1 -> H (tanh), H -> H (tanh), H -> 2 */
    dd_conv1d_layer fir;   /* 4 -> 2, kernel M, no bias */
} ham_block;

typedef struct {
    int H, L, M;     /* MLP width, blocks, FIR taps */
    int Hl;          /* a shard's units of the first MLP layer: H / tensor-parallel size */
    ham_block *blk;  /* [L] (owned) */
} ham_impl;

static const dd_model_opt_info ham_opts[] = {
    {"hidden", "width of each block's nonlinearity (MLP 1 -> H -> H -> 2)", 16, 1, 4096},
    {"layers", "Hammerstein blocks", 2, 1, HAM_MAX_LAYERS},
    {"memory", "FIR taps of each block", 4, 1, 1024},
    {NULL, NULL, 0, 0, 0}};

/* Saved per block: a = |u| (BT), h1 (BT, Hl), h2 (BT, H), g (BT, 2), [v, s] (BT, 4). */
typedef struct {
    float *a, *h1, *h2, *g, *cat;
} ham_saved;
/* Scratch: dL/d[v, s], dL/dg, dL/da, two (BT, H) buffers. */
typedef struct {
    float *dcat, *dg, *da, *dh, *dha;
} ham_scratch;

static size_t saved_layout(const ham_impl *g, int B, int T, float *base, ham_saved *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    w->a = dd_ws_take(&c, BT);
    w->h1 = dd_ws_take(&c, BT * (size_t)g->Hl);
    w->h2 = dd_ws_take(&c, BT * H);
    w->g = dd_ws_take(&c, BT * 2);
    w->cat = dd_ws_take(&c, BT * 4);
    return c.used;
}

static size_t scratch_layout(const ham_impl *g, int B, int T, float *base, ham_scratch *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H;
    w->dcat = dd_ws_take(&c, BT * 4);
    w->dg = dd_ws_take(&c, BT * 2);
    w->da = dd_ws_take(&c, BT);
    w->dh = dd_ws_take(&c, BT * H);
    w->dha = dd_ws_take(&c, BT * H);
    return c.used;
}

static size_t blk_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    ham_saved w;
    return saved_layout(m->impl, B, T, NULL, &w);
}

static size_t blk_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    ham_scratch w;
    return scratch_layout(m->impl, B, T, NULL, &w);
}

/* PyTorch's default for every layer, then each block's FIR (the last layer of its
 * residual branch) times min(1, sqrt(HAM_INIT_DEPTH / L)): the default 2 blocks (and
 * fewer) keep PyTorch's init; without the scaling the blocks' multiplicative branches
 * (v = g u, s = |u| u) blow the stack up (hidden 64 on DPA_200MHz frames: output rms
 * 0.32 at 2 blocks, 3.0e3 at 16, NaN at 64; scaled: 0.25, 0.22, 0.24 at 16, 64, 256). */
#define HAM_INIT_DEPTH 2

static void ham_init(const dd_model *m, float *params, dd_rng *rng) {
    const ham_impl *g = m->impl;
    const double s = dd_model_depth_scale(g->L, HAM_INIT_DEPTH);
    for (int i = 0; i < g->L; i++) {
        const dd_conv1d_layer *f = &g->blk[i].fir;
        for (int k = 0; k < 3; k++) dd_dense_layer_init(&g->blk[i].nl[k], params, rng);
        dd_conv1d_layer_init(f, params, rng);
        if (s != 1.0) dd_model_scale(params + f->w, (size_t)f->c_out * (size_t)f->c_in * (size_t)f->kernel, s);
    }
}

static void ham_destroy(dd_model *m) {
    ham_impl *g = m->impl;
    dd_free(g->blk);
    g->blk = NULL;
}

/* out (BT, C) += b in every row */
static void add_row_bias(float *out, const float *b, size_t rows, size_t C) {
    for (size_t r = 0; r < rows; r++) dd_add_forward(out + r * C, out + r * C, b, C);
}

/* g = W_2 tanh(W_1 tanh(W_0 a + b_0) + b_1) + b_2 into w->g. A tensor-parallel shard holds
 * its Hl units of the first layer (rows of W_0, b_0) and the matching columns of W_1: its
 * partial W_1 h_1 is summed over the group (reduce-from-group) before b_1 is added; W_2 is
 * replicated. Returns 0 after an error of the collective. */
static int mlp_forward(const dd_model *m, const ham_block *k, const dd_stage_params *sp, const ham_saved *w,
                       size_t BT) {
    const ham_impl *g = m->impl;
    const size_t nh = BT * (size_t)g->H;
    dd_dense_forward(w->h1, w->a, DD_SP(sp, k->nl[0].w), DD_SP(sp, k->nl[0].b), BT, 1, g->Hl);
    dd_act_forward(DD_ACT_TANH, w->h1, w->h1, BT * (size_t)g->Hl);
    if (dd_model_tp_size(m) == 1) {
        dd_dense_forward(w->h2, w->h1, DD_SP(sp, k->nl[1].w), DD_SP(sp, k->nl[1].b), BT, g->H, g->H);
    } else {
        dd_dense_forward(w->h2, w->h1, DD_SP(sp, k->nl[1].w), NULL, BT, g->Hl, g->H);
        if (!dd_model_tp_ok(m, dd_tp_reduce_fwd(dd_model_tp_group(m), w->h2, nh))) return 0;
        add_row_bias(w->h2, DD_SP(sp, k->nl[1].b), BT, (size_t)g->H);
    }
    dd_act_forward(DD_ACT_TANH, w->h2, w->h2, nh);
    dd_dense_forward(w->g, w->h2, DD_SP(sp, k->nl[2].w), DD_SP(sp, k->nl[2].b), BT, g->H, 2);
    return 1;
}

/* From d->dg: the MLP's parameter gradients, and (want_da) its part of dL/da added into
 * d->da; a shard's part is summed over the group first (copy-to-group's dual). Returns 0
 * after an error of the collective. */
static int mlp_backward(const dd_model *m, const ham_block *k, const dd_stage_params *sp, const ham_saved *w,
                        const ham_scratch *d, size_t BT, int want_da) {
    const ham_impl *g = m->impl;
    const size_t nh = BT * (size_t)g->H, nh1 = BT * (size_t)g->Hl;
    memset(d->dh, 0, nh * sizeof(float));
    dd_dense_backward(d->dh, DD_SG(sp, k->nl[2].w), DD_SG(sp, k->nl[2].b), d->dg, w->h2, DD_SP(sp, k->nl[2].w), BT,
                      g->H, 2);
    memset(d->dha, 0, nh * sizeof(float));
    dd_act_backward(DD_ACT_TANH, d->dha, d->dh, NULL, w->h2, nh);
    memset(d->dh, 0, nh1 * sizeof(float));
    dd_dense_backward(d->dh, DD_SG(sp, k->nl[1].w), DD_SG(sp, k->nl[1].b), d->dha, w->h1, DD_SP(sp, k->nl[1].w), BT,
                      g->Hl, g->H);
    memset(d->dha, 0, nh1 * sizeof(float));
    dd_act_backward(DD_ACT_TANH, d->dha, d->dh, NULL, w->h1, nh1);
    const int whole = dd_model_tp_size(m) == 1;
    float *da = !want_da ? NULL : whole ? d->da : d->dh; /* a shard's part first into the dead dh */
    if (da && !whole) memset(da, 0, BT * sizeof(float));
    dd_dense_backward(da, DD_SG(sp, k->nl[0].w), DD_SG(sp, k->nl[0].b), d->dha, w->a, DD_SP(sp, k->nl[0].w), BT, 1,
                      g->Hl);
    if (!da || whole) return 1;
    if (!dd_model_tp_ok(m, dd_tp_copy_bwd(dd_model_tp_group(m), da, BT))) return 0;
    dd_add_forward(d->da, d->da, da, BT);
    return 1;
}

/* u (BT, 2) -> out (BT, 2) through block st->arg. */
static void blk_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *u,
                        const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0, (void)scratch;
    const ham_impl *g = m->impl;
    const ham_block *k = &g->blk[st->arg];
    ham_saved w;
    saved_layout(g, B, T, saved, &w);
    const size_t BT = (size_t)B * (size_t)T;
    float *a = w.a, *gn = w.g, *cat = w.cat;
    for (size_t r = 0; r < BT; r++) a[r] = sqrtf(u[2 * r] * u[2 * r] + u[2 * r + 1] * u[2 * r + 1]);
    if (!mlp_forward(m, k, sp, &w, BT)) return;
    for (size_t r = 0; r < BT; r++) {
        const float ur = u[2 * r], ui = u[2 * r + 1], gr = gn[2 * r], gi = gn[2 * r + 1];
        float *c4 = cat + 4 * r;
        c4[0] = gr * ur - gi * ui;
        c4[1] = gr * ui + gi * ur;
        c4[2] = a[r] * ur;
        c4[3] = a[r] * ui;
    }
    const dd_conv1d_layer *f = &k->fir;
    dd_conv1d_forward(out, cat, DD_SP(sp, f->w), NULL, B, T, 4, 2, f->kernel, 1, 1);
    dd_add_forward(out, out, u, 2 * BT);
}

static void blk_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *u,
                         const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                         float *scratch) {
    (void)x0, (void)dx0;
    const ham_impl *g = m->impl;
    const ham_block *k = &g->blk[st->arg];
    ham_saved w;
    ham_scratch d;
    saved_layout(g, B, T, saved, &w);
    scratch_layout(g, B, T, scratch, &d);
    const size_t BT = (size_t)B * (size_t)T;
    const float *a = w.a, *gn = w.g;
    const dd_conv1d_layer *f = &k->fir;
    /* the identity path passes dout = dL/du_{i+1} to u_i; the branches add their parts */
    if (din) dd_add_backward(din, NULL, dout, 2 * BT);
    memset(d.dcat, 0, 4 * BT * sizeof(float));
    dd_conv1d_backward(d.dcat, DD_SG(sp, f->w), NULL, dout, w.cat, DD_SP(sp, f->w), B, T, 4, 2, f->kernel, 1, 1);
    memset(d.da, 0, BT * sizeof(float));
    for (size_t r = 0; r < BT; r++) {
        const float ur = u[2 * r], ui = u[2 * r + 1], g_r = gn[2 * r], g_i = gn[2 * r + 1];
        const float *d4 = d.dcat + 4 * r;
        /* v = g u: du += conj(g) dv, dg = conj(u) dv */
        if (din) {
            din[2 * r] += g_r * d4[0] + g_i * d4[1];
            din[2 * r + 1] += g_r * d4[1] - g_i * d4[0];
        }
        d.dg[2 * r] = ur * d4[0] + ui * d4[1];
        d.dg[2 * r + 1] = ur * d4[1] - ui * d4[0];
        /* s = a u: du += a ds, da += Re(conj(ds) u) */
        if (din) {
            din[2 * r] += a[r] * d4[2];
            din[2 * r + 1] += a[r] * d4[3];
        }
        d.da[r] = d4[2] * ur + d4[3] * ui;
    }
    if (!mlp_backward(m, k, sp, &w, &d, BT, din != NULL)) return;
    /* a = |u|: du += da u / a (zero at a = 0) */
    if (din)
        for (size_t r = 0; r < BT; r++)
            if (a[r] > 0) {
                din[2 * r] += d.da[r] * u[2 * r] / a[r];
                din[2 * r + 1] += d.da[r] * u[2 * r + 1] / a[r];
            }
}

static double blk_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    const ham_impl *g = m->impl;
    double H = g->H, Hl = g->Hl;
    double f = DD_MAC * (Hl + H * Hl + 2 * H + 8.0 * g->M) + 4 * (H + Hl) + 20;
    return backward ? 2 * f : f;
}

static const dd_stage_ops blk_stage = {
    .saved = blk_saved,
    .scratch = blk_scratch,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = blk_forward,
    .backward = blk_backward,
    .flops = blk_flops,
};

static const dd_model_ops ham_ops = {.init = ham_init, .destroy = ham_destroy, .tensor_parallel = 1};

/* Block i's layers (a shard's first MLP layer holds Hl units, the second their columns). */
static dd_status add_block(dd_model *m, int i) {
    ham_impl *g = m->impl;
    ham_block *k = &g->blk[i];
    char name[40];
    snprintf(name, sizeof name, "blocks.%d.nl.0", i);
    DD_TRY(dd_dense_layer_add(&m->table, name, 1, g->Hl, 1, &k->nl[0]));
    snprintf(name, sizeof name, "blocks.%d.nl.1", i);
    DD_TRY(dd_dense_layer_add(&m->table, name, g->Hl, g->H, 1, &k->nl[1]));
    snprintf(name, sizeof name, "blocks.%d.nl.2", i);
    DD_TRY(dd_dense_layer_add(&m->table, name, g->H, 2, 1, &k->nl[2]));
    snprintf(name, sizeof name, "blocks.%d.fir", i);
    DD_TRY(dd_conv1d_layer_add(&m->table, name, 4, 2, g->M, 1, 1, 0, &k->fir));
    if (dd_model_tp_size(m) > 1) {
        DD_TRY(dd_model_tp_split(m, k->nl[0].w, 0, 1));
        DD_TRY(dd_model_tp_split(m, k->nl[0].b, 0, 1));
        DD_TRY(dd_model_tp_split(m, k->nl[1].w, 1, 1));
    }
    snprintf(name, sizeof name, "blocks.%d", i);
    return dd_model_add_stage(m, &blk_stage, name, i, NULL, 2, 2);
}

static dd_status ham_build(dd_model *m) {
    ham_impl *g = m->impl;
    g->H = dd_model_opt(m, "hidden");
    g->L = dd_model_opt(m, "layers");
    g->M = dd_model_opt(m, "memory");
    DD_TRY(dd_model_tp_divides(m, "hidden"));
    g->Hl = g->H / dd_model_tp_size(m);
    g->blk = dd_calloc((size_t)g->L, sizeof *g->blk);
    if (!g->blk) return dd_error(DD_ERR_NOMEM, "model hammerstein: out of memory");
    for (int i = 0; i < g->L; i++) DD_TRY(add_block(m, i));
    m->history = (long)g->L * (g->M - 1);
    return DD_OK;
}

DD_MODEL_DEFINE(hammerstein, "stacked neural augmented-Hammerstein blocks (scales to millions)", ham_opts, &ham_ops,
                ham_impl, ham_build);
