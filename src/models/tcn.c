/* Model "tcn": the OpenDPD temporal convolutional network, made causal (OpenDPD pads the
 * dilated convolutions on both sides; here tap k reads x(t - (K-1-k) d) only, so the
 * model streams). With f_t = dd_iqfeat(x_t) (6 features), C channels, L layers:
 *   z_0 = Hardswish(Conv1x1_{6->C}(f) + b)
 *   z_i = Hardswish(DepthwiseConv_{K, dilation d_i}(z_{i-1})),   i = 1..L (no bias)
 *   y   = Conv1x1_{C->2}(z_L) + x                                    (no bias)
 * with d_i = 2^((i-1) mod 12): OpenDPD's doubling dilations, repeating after 12 layers so
 * deep stacks keep a bounded receptive field. Stacks deeper than OpenDPD's 12 layers are
 * residual, z_i = z_{i-1} + Hardswish(DepthwiseConv(z_{i-1})), with the depthwise weights
 * starting at zero: a plain stack attenuates its input about 3.5x per layer at PyTorch's
 * init (rms of z_L on DPA_200MHz frames, hidden 96: 1e-3 at 4 layers, 6e-13 at 16,
 * exactly 0 at 64), so deep plain stacks get no gradient. Names follow OpenDPD's nn.Sequential:
 * "network.0.weight/bias", "network.2.weight", ..., "network.<2(L+1)>.weight".
 * 7C + L K C + 2C parameters (2,784 at the defaults C = 96, L = 4, K = 5). History
 * (K-1) sum d_i samples. Stages: "network.0" (features, 1x1, Hardswish), one per
 * depthwise layer ("network.<2i>"), and the head ("head": 1x1 to I/Q plus the input).
 * Tensor-parallel shards split every depthwise layer by channel (one allgather forward,
 * one backward); network.0 and the head are replicated. A plain stack on one shard where
 * the layers keep their convolution (AVX2, generic) moves each Hardswish to the front of
 * the next stage (hs_front, the "front" stages below): the stages pass a_i = the
 * convolutions on, the same floats. */
#include <stdio.h>

#include "models/model_impl.h"

#define TCN_MAX_LAYERS 1024
#define TCN_DIL_CYCLE 12
#define TCN_PLAIN_MAX 12 /* deeper stacks are residual */
#define NF DD_IQFEAT_DIM

typedef struct {
    int C, L, K;            /* channels, dilated layers, kernel */
    int Cl;                 /* a shard's channels of the depthwise layers: C / tensor-parallel size */
    int residual;           /* L > TCN_PLAIN_MAX: z_i = z_{i-1} + Hardswish(conv(z_{i-1})) */
    int keep_pre;           /* the depthwise layers save their convolution for backward */
    int hs_front;           /* each depthwise layer's Hardswish at the front of the next stage */
    dd_conv1d_layer in;     /* network.0: 6 -> C, 1x1, bias */
    dd_conv1d_layer *dw;    /* [L] network.2i: depthwise C, K, dilation d_i (owned) */
    dd_conv1d_layer out;    /* network.2(L+1): C -> 2, 1x1, no bias */
} tcn_impl;

static const dd_model_opt_info tcn_opts[] = {
    {"hidden", "channels", 96, 1, 4096},
    {"layers", "dilated depthwise layers (dilation 2^((i-1) mod 12); residual beyond 12)", 4, 1, TCN_MAX_LAYERS},
    {"kernel", "kernel of the dilated convolutions", 5, 1, 64},
    {NULL, NULL, 0, 0, 0}};

/* PyTorch's default; the depthwise layers of a residual (deep) stack start at zero, so the
 * stack starts as the identity and each layer's weights get the gradient of
 * Hardswish'(0) = 1/2 times what reaches it through the identity paths. The same number
 * of draws is taken from rng either way. */
static void tcn_init(const dd_model *m, float *params, dd_rng *rng) {
    const tcn_impl *g = m->impl;
    dd_conv1d_layer_init(&g->in, params, rng);
    for (int i = 0; i < g->L; i++) {
        const dd_conv1d_layer *l = &g->dw[i];
        dd_conv1d_layer_init(l, params, rng);
        if (g->residual) memset(params + l->w, 0, (size_t)l->c_out * (size_t)l->kernel * sizeof(float));
    }
    dd_conv1d_layer_init(&g->out, params, rng);
}

static void tcn_destroy(dd_model *m) {
    tcn_impl *g = m->impl;
    dd_free(g->dw);
    g->dw = NULL;
}

/* The size of an activation (BT, C) and of the features (BT, 6), 64-byte rounded. */
static size_t nc(const tcn_impl *g, int B, int T) { return ((size_t)B * (size_t)T * (size_t)g->C + 15) / 16 * 16; }
static size_t nf(int B, int T) { return ((size_t)B * (size_t)T * NF + 15) / 16 * 16; }

/* ---- stage "network.0": saved [f (BT, 6), a_0 (BT, C)]; scratch [da (BT, C), df (BT, 6)].
 * The 1x1 convolution and Hardswish run fused (dd_conv1d_hswish_forward / _backward: the
 * same floats as the two layers in turn). ---- */

static size_t stem_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    const tcn_impl *g = m->impl;
    return nf(B, T) + (g->hs_front ? 0 : nc(g, B, T));
}

static void stem_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                         const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)st, (void)x0, (void)scratch;
    const tcn_impl *g = m->impl;
    const size_t BT = (size_t)B * (size_t)T;
    float *feat = saved, *a = saved + nf(B, T);
    const dd_conv1d_layer *l = &g->in;
    dd_iqfeat_forward(feat, in, BT);
    if (g->hs_front) dd_conv1d_forward(out, feat, DD_SP(sp, l->w), DD_SP(sp, l->b), B, T, NF, g->C, 1, 1, 1);
    else dd_conv1d_hswish_forward(a, out, feat, DD_SP(sp, l->w), DD_SP(sp, l->b), B, T, NF, g->C, 1, 1, 1);
}

static void stem_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                          float *scratch) {
    (void)st, (void)x0, (void)dx0;
    const tcn_impl *g = m->impl;
    const size_t BT = (size_t)B * (size_t)T;
    const dd_conv1d_layer *l = &g->in;
    float *feat = saved, *a = saved + nf(B, T), *da = scratch, *dfeat = din ? scratch + nc(g, B, T) : NULL;
    if (dfeat) memset(dfeat, 0, BT * NF * sizeof(float));
    /* without din (training the model itself), da = dout Hardswish'(a) is never stored */
    if (g->hs_front)
        dd_conv1d_backward(dfeat, DD_SG(sp, l->w), DD_SG(sp, l->b), dout, feat, DD_SP(sp, l->w), B, T, NF, g->C, 1, 1,
                           1);
    else
        dd_conv1d_hswish_backward(dfeat, DD_SG(sp, l->w), DD_SG(sp, l->b), dout, a, feat, DD_SP(sp, l->w), B, T, NF,
                              g->C, 1, 1, 1, da);
    if (din) dd_iqfeat_backward(din, dfeat, in, BT);
}

static size_t stem_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return nc(m->impl, B, T) + nf(B, T);
}

static double stem_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    const tcn_impl *g = m->impl;
    double C = g->C;
    double f = DD_MAC * NF * C + (g->hs_front ? 0 : 4 * C) + 14;
    return backward ? 2 * f : f;
}

static const dd_stage_ops stem_stage = {
    .saved = stem_saved,
    .scratch = stem_scratch,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = stem_forward,
    .backward = stem_backward,
    .flops = stem_flops,
};

/* ---- stage "network.2i" (layer st->arg): saved the convolution a_i (BT, C) where
 * keep_pre, else nothing; scratch (BT, C) (the fused kernels use one frame's rows of it),
 * twice that without keep_pre (the generic level recomputes the convolution into its second
 * half). Without keep_pre, backward recomputes a_i from the input, which it reads for the
 * weight gradient anyway (pre = NULL: the same floats): at AVX-512 on the AMD Zen 5 machine
 * that was 1.15x per training step (a write and a read of (BT, C) per layer for K more
 * fused multiply-adds per element), but at AVX2, whose 16 registers cannot hold the
 * recomputation's weights and the dW sums at once, keeping a_i is faster since tcn runs in
 * chunks of 4 frames (docs/performance.md, "tcn's convolution recomputed in backward" and
 * "tcn's depthwise layers keep their pre-activation at AVX2"). keep_pre is
 * dd_conv1d_dw_hswish_keeps_pre() when the model is built. The flop count stays the
 * model's (not the recomputation's). ---- */

static size_t layer_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    const tcn_impl *g = m->impl;
    return g->keep_pre ? nc(g, B, T) : 0;
}

static size_t layer_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    const tcn_impl *g = m->impl;
    return (g->keep_pre ? 1 : 2) * nc(g, B, T);
}

/* One pass per layer (dd_conv1d_dw_hswish_forward / _backward: the convolution, Hardswish
 * and the residual add fused, the same floats as the three layers in turn). */
static void layer_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0, (void)scratch;
    const tcn_impl *g = m->impl;
    const dd_conv1d_layer *l = &g->dw[st->arg];
    float *pre = g->keep_pre ? saved : NULL;
    dd_conv1d_dw_hswish_forward(pre, out, in, DD_SP(sp, l->w), B, T, l->c_in, l->kernel, l->dilation, g->residual);
}

static void layer_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                           const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                           float *scratch) {
    (void)x0, (void)dx0;
    const tcn_impl *g = m->impl;
    const dd_conv1d_layer *l = &g->dw[st->arg];
    /* a residual layer's identity path passes dout to din; din is written whole when the
     * framework has not cleared it (sets_din); the convolution saved or recomputed from in */
    const int flags = (g->residual ? DD_DW_HS_RESID : 0) | (sp->din_set ? DD_DW_HS_SET_DIN : 0);
    const float *pre = g->keep_pre ? saved : NULL;
    dd_conv1d_dw_hswish_backward(din, DD_SG(sp, l->w), dout, pre, in, DD_SP(sp, l->w), B, T, l->c_in, l->kernel,
                                 l->dilation, flags, scratch);
}

static double layer_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    const tcn_impl *g = m->impl;
    double f = DD_MAC * g->K * (double)g->C + 4.0 * g->C + (g->residual ? (double)g->C : 0.0);
    return backward ? 2 * f : f;
}

static const dd_stage_ops layer_stage = {
    .saved = layer_saved,
    .scratch = layer_scratch,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = layer_forward,
    .backward = layer_backward,
    .flops = layer_flops,
    .sets_din = 1,
};

/* ---- the same stages with each Hardswish at the front of the next stage (hs_front: a plain
 * stack on one shard). The stem passes on its convolution a_0, each layer i takes a_{i-1},
 * forms z_{i-1} = Hardswish(a_{i-1}) (saved, for dW) and passes on its convolution a_i, and
 * the head takes a_L. A layer's backward then forms the gradient of a_{i-1} in its din
 * pass, where the fused layer formed that of z_{i-1} and the layer below took another pass
 * for its da (dd_conv1d_dw_hsin_backward). Every float is formed as in the stages above:
 * the operations are the same, only the stage that runs them changes. ---- */

static size_t front_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return nc(m->impl, B, T);
}

static void front_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0, (void)scratch;
    const dd_conv1d_layer *l = &((const tcn_impl *)m->impl)->dw[st->arg];
    dd_conv1d_dw_hsin_forward(saved, out, in, DD_SP(sp, l->w), B, T, l->c_in, l->kernel, l->dilation);
}

static void front_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                           const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                           float *scratch) {
    (void)x0, (void)dx0;
    const dd_conv1d_layer *l = &((const tcn_impl *)m->impl)->dw[st->arg];
    dd_conv1d_dw_hsin_backward(din, DD_SG(sp, l->w), dout, in, saved, DD_SP(sp, l->w), B, T, l->c_in, l->kernel,
                               l->dilation, sp->din_set ? DD_DW_HS_SET_DIN : 0, scratch);
}

static const dd_stage_ops front_stage = {
    .saved = front_saved,
    .scratch = front_saved, /* the generic level's (BT, C) */
    .scratch_fwd = dd_stage_no_scratch,
    .forward = front_forward,
    .backward = front_backward,
    .flops = layer_flops,
    .sets_din = 1,
};

/* The head: z_L = Hardswish(a_L) (saved), then the skip head on it; scratch (BT, C): the
 * gradient of z_L before Hardswish' makes it that of a_L. */
static void front_head_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                               const float *in, const float *x0, float *out, int B, int T, float *saved,
                               float *scratch) {
    const tcn_impl *g = m->impl;
    dd_act_forward(DD_ACT_HARDSWISH, saved, in, (size_t)B * (size_t)T * (size_t)g->C);
    dd_stage_skip_head.forward(m, st, sp, saved, x0, out, B, T, NULL, scratch);
}

static void front_head_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp,
                                const float *in, const float *x0, const float *dout, float *din, float *dx0, int B,
                                int T, float *saved, float *scratch) {
    const size_t n = (size_t)B * (size_t)T * (size_t)((const tcn_impl *)m->impl)->C;
    if (din) memset(scratch, 0, n * sizeof(float));
    dd_stage_skip_head.backward(m, st, sp, saved, x0, dout, din ? scratch : NULL, dx0, B, T, NULL, NULL);
    if (din) dd_act_backward(DD_ACT_HARDSWISH, din, scratch, in, NULL, n);
}

static double front_head_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    double f = 4.0 * ((const tcn_impl *)m->impl)->C;
    return dd_stage_skip_head.flops(m, st, backward) + (backward ? 2 * f : f);
}

static const dd_stage_ops front_head_stage = {
    .saved = front_saved,
    .scratch = front_saved,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = front_head_forward,
    .backward = front_head_backward,
    .flops = front_head_flops,
};

/* ---- stage "network.2i" of a tensor-parallel shard (Cl = C / T channels [r Cl, (r+1) Cl)).
 * A depthwise layer is channel-wise, so the rank runs its channels alone: scatter-to-group
 * keeps its channels of z_{i-1} (no message), it computes its channels of z_i and
 * gather-from-group (an allgather of BT Cl floats per rank) makes z_i whole. Backward:
 * gather's dual keeps the own channels of dout, scatter's dual allgathers the own
 * channels of dL/dz_{i-1} (BT Cl floats per rank). Saved a (BT, Cl); scratch zl, ol (BT,
 * Cl each) and tmp (BT, C), all the forward uses, then dl (BT, Cl) and dz (BT, C). ---- */

typedef struct {
    float *zl, *ol, *dl, *tmp, *dz;
} tp_scratch;

/* Returns the floats of the whole scratch; *fwd (when not NULL): those of the forward's part. */
static size_t tp_layout(const tcn_impl *g, int B, int T, float *base, tp_scratch *w, size_t *fwd) {
    dd_ws_carver c = {base, 0};
    const size_t nl = (size_t)B * (size_t)T * (size_t)g->Cl, n = (size_t)B * (size_t)T * (size_t)g->C;
    w->zl = dd_ws_take(&c, nl);
    w->ol = dd_ws_take(&c, nl);
    w->tmp = dd_ws_take(&c, n);
    if (fwd) *fwd = c.used;
    w->dl = dd_ws_take(&c, nl);
    w->dz = dd_ws_take(&c, n);
    return c.used;
}

static size_t tp_layer_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    const tcn_impl *g = m->impl;
    return ((size_t)B * (size_t)T * (size_t)g->Cl + 15) / 16 * 16;
}

static size_t tp_layer_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    tp_scratch w;
    return tp_layout(m->impl, B, T, NULL, &w, NULL);
}

static size_t tp_layer_scratch_fwd(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    tp_scratch w;
    size_t fwd = 0;
    tp_layout(m->impl, B, T, NULL, &w, &fwd);
    return fwd;
}

static void tp_layer_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                             const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0;
    const tcn_impl *g = m->impl;
    const dd_model_tp *tp = dd_model_tp_group(m);
    const size_t BT = (size_t)B * (size_t)T;
    tp_scratch w;
    tp_layout(g, B, T, scratch, &w, NULL);
    if (!dd_model_tp_ok(m, dd_tp_scatter_fwd(tp, in, w.zl, BT, (size_t)g->C))) return;
    const dd_conv1d_layer *l = &g->dw[st->arg];
    dd_conv1d_dw_hswish_forward(saved, w.ol, w.zl, DD_SP(sp, l->w), B, T, l->c_in, l->kernel, l->dilation,
                                g->residual);
    dd_model_tp_ok(m, dd_tp_gather_fwd(tp, w.ol, out, BT, (size_t)g->C, w.tmp));
}

static void tp_layer_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                              const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                              float *scratch) {
    (void)x0, (void)dx0;
    const tcn_impl *g = m->impl;
    const dd_model_tp *tp = dd_model_tp_group(m);
    const size_t BT = (size_t)B * (size_t)T, nl = BT * (size_t)g->Cl, n = BT * (size_t)g->C;
    tp_scratch w;
    tp_layout(g, B, T, scratch, &w, NULL);
    /* own channels of dout, and the conv's own input again */
    if (!dd_model_tp_ok(m, dd_tp_gather_bwd(tp, dout, w.ol, BT, (size_t)g->C)) ||
        !dd_model_tp_ok(m, dd_tp_scatter_fwd(tp, in, w.zl, BT, (size_t)g->C)))
        return;
    /* dl = dL/dz_{i-1} of the own channels: the identity path of a residual layer, then the conv */
    if (g->residual) memcpy(w.dl, w.ol, nl * sizeof(float));
    else memset(w.dl, 0, nl * sizeof(float));
    const dd_conv1d_layer *l = &g->dw[st->arg];
    dd_conv1d_dw_hswish_backward(din ? w.dl : NULL, DD_SG(sp, l->w), w.ol, saved, w.zl, DD_SP(sp, l->w), B, T,
                                 l->c_in, l->kernel, l->dilation, 0, w.tmp);
    if (!din || !dd_model_tp_ok(m, dd_tp_scatter_bwd(tp, w.dl, w.dz, BT, (size_t)g->C, w.tmp))) return;
    dd_add_forward(din, din, w.dz, n);
}

static double tp_layer_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    const tcn_impl *g = m->impl;
    double f = DD_MAC * g->K * (double)g->Cl + 4.0 * g->Cl + (g->residual ? (double)g->Cl : 0.0);
    return backward ? 2 * f : f;
}

static const dd_stage_ops tp_layer_stage = {
    .saved = tp_layer_saved,
    .scratch = tp_layer_scratch,
    .scratch_fwd = tp_layer_scratch_fwd,
    .forward = tp_layer_forward,
    .backward = tp_layer_backward,
    .flops = tp_layer_flops,
};

/* Batch chunks of 4 frames: a chunk's activations (4 x 200 rows of 96 channels, 300 KB
 * each) stay in the core's 1 MB L2 between a layer's input and output (at 16 frames they
 * came from the shared L3). On the AMD Zen 5 machine, with one-thread kernels called
 * directly (DD_TEAM), 4 frames measured 94-96 GFLOP/s per training step at AVX-512, 8
 * frames 89-90, 16 frames 85-89; without DD_TEAM, chunks of 4 gained nothing
 * (docs/performance.md, "Parallel regions of one thread; tcn in chunks of 4 frames"). */
static const dd_model_ops tcn_ops = {
    .init = tcn_init, .destroy = tcn_destroy, .tensor_parallel = 1, .chunk_frames = 4};

/* Depthwise layer i (a shard: its Cl channels), dilation d. */
static dd_status add_layer(dd_model *m, int i, int d) {
    tcn_impl *g = m->impl;
    char name[32];
    snprintf(name, sizeof name, "network.%d", 2 * (i + 1));
    DD_TRY(dd_conv1d_layer_add(&m->table, name, g->Cl, g->Cl, g->K, d, g->Cl, 0, &g->dw[i]));
    if (dd_model_tp_size(m) == 1)
        return dd_model_add_stage(m, g->hs_front ? &front_stage : &layer_stage, name, i, NULL, g->C, g->C);
    DD_TRY(dd_model_tp_split(m, g->dw[i].w, 0, 1));
    return dd_model_add_stage(m, &tp_layer_stage, name, i, NULL, g->C, g->C);
}

static dd_status tcn_build(dd_model *m) {
    tcn_impl *g = m->impl;
    g->C = dd_model_opt(m, "hidden");
    g->L = dd_model_opt(m, "layers");
    g->K = dd_model_opt(m, "kernel");
    g->residual = g->L > TCN_PLAIN_MAX;
    g->keep_pre = dd_conv1d_dw_hswish_keeps_pre();
    g->hs_front = g->keep_pre && !g->residual && dd_model_tp_size(m) == 1;
    DD_TRY(dd_model_tp_divides(m, "hidden"));
    g->Cl = g->C / dd_model_tp_size(m);
    g->dw = dd_calloc((size_t)g->L, sizeof *g->dw);
    if (!g->dw) return dd_error(DD_ERR_NOMEM, "model tcn: out of memory");
    char name[32];
    DD_TRY(dd_conv1d_layer_add(&m->table, "network.0", NF, g->C, 1, 1, 1, 1, &g->in));
    DD_TRY(dd_model_add_stage(m, &stem_stage, "network.0", 0, NULL, 2, g->C));
    long hist = 0;
    for (int i = 0; i < g->L; i++) {
        int d = 1 << (i % TCN_DIL_CYCLE);
        DD_TRY(add_layer(m, i, d));
        hist += (long)(g->K - 1) * d;
    }
    snprintf(name, sizeof name, "network.%d", 2 * (g->L + 1));
    DD_TRY(dd_conv1d_layer_add(&m->table, name, g->C, 2, 1, 1, 1, 0, &g->out));
    DD_TRY(dd_model_add_stage(m, g->hs_front ? &front_head_stage : &dd_stage_skip_head, "head", 0, &g->out, g->C, 2));
    m->history = hist;
    m->layout = g->hs_front ? 1 : 0; /* what crosses the stages: pipeline ranks must agree */
    return DD_OK;
}

DD_MODEL_DEFINE(tcn, "temporal conv net: 1x1, dilated depthwise convs (Hardswish), 1x1, + input", tcn_opts,
                &tcn_ops, tcn_impl, tcn_build);
