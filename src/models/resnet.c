/* Model "resnet": a deep residual time-delay (causal convolution) network. With
 * f_t = dd_iqfeat(x_t) (6 features), C channels, L blocks, kernel K:
 *   h_0     = Conv1x1_{6->C}(f) + b                                   "stem"
 *   h_{i+1} = h_i + Conv1x1_{C->C}(tanh(CausalConv_{C->C, K}(h_i)))  "blocks.i.conv/proj"
 *   y       = Conv1x1_{C->2}(h_L) + b + x                             "head", input added back
 * All convolutions have biases. 7C + L (K C^2 + C^2 + 2C) + 2C + 2 parameters (2,510 at
 * the defaults C = 12, L = 4, K = 3; hidden 1024, layers 12 gives 50.4 M). History
 * L (K-1) samples. Stages: "stem", one per block ("blocks.<i>"), "head".
 * Tensor-parallel shards split each block as a Megatron pair (conv by output channel,
 * proj by input channel: one allreduce forward, one backward); stem and head replicated. */
#include <stdio.h>

#include "models/model_impl.h"

#define RES_MAX_LAYERS 1024
#define NF DD_IQFEAT_DIM

typedef struct {
    int C, L, K;            /* channels, residual blocks, kernel */
    int Cl;                 /* a shard's channels inside each block: C / tensor-parallel size */
    dd_conv1d_layer stem;   /* 6 -> C, 1x1 */
    dd_conv1d_layer *conv;  /* [L] C -> C, kernel K, causal (owned) */
    dd_conv1d_layer *proj;  /* [L] C -> C, 1x1 (owned) */
    dd_conv1d_layer head;   /* C -> 2, 1x1 */
} res_impl;

static const dd_model_opt_info res_opts[] = {
    {"hidden", "channels of the residual stream", 12, 1, 4096},
    {"layers", "residual blocks", 4, 1, RES_MAX_LAYERS},
    {"kernel", "kernel of each block's causal convolution", 3, 1, 64},
    {NULL, NULL, 0, 0, 0}};

/* PyTorch's default for every convolution, then each block's last layer (proj, weight and
 * bias) times min(1, sqrt(RES_INIT_DEPTH / L)): the default 4 blocks (and fewer) keep
 * PyTorch's init exactly; deeper stacks add the residual-stream variance of 4 blocks in
 * total instead of growing like L (rms of h_L at hidden 64 on DPA_200MHz frames: 0.43 at
 * 4 blocks; PyTorch's init 0.84 at 16, 2.4 at 64, 7.2 at 256; scaled 0.47, 0.46, 0.44). */
#define RES_INIT_DEPTH 4

static void res_init(const dd_model *m, float *params, dd_rng *rng) {
    const res_impl *g = m->impl;
    const double s = dd_model_depth_scale(g->L, RES_INIT_DEPTH);
    dd_conv1d_layer_init(&g->stem, params, rng);
    for (int i = 0; i < g->L; i++) {
        const dd_conv1d_layer *pr = &g->proj[i];
        dd_conv1d_layer_init(&g->conv[i], params, rng);
        dd_conv1d_layer_init(pr, params, rng);
        if (s != 1.0) {
            dd_model_scale(params + pr->w, (size_t)pr->c_out * (size_t)pr->c_in * (size_t)pr->kernel, s);
            dd_model_scale(params + pr->b, (size_t)pr->c_out, s);
        }
    }
    dd_conv1d_layer_init(&g->head, params, rng);
}

static void res_destroy(dd_model *m) {
    res_impl *g = m->impl;
    dd_free(g->conv);
    dd_free(g->proj);
    g->conv = g->proj = NULL;
}

static size_t nc(const res_impl *g, int B, int T) { return ((size_t)B * (size_t)T * (size_t)g->C + 15) / 16 * 16; }
static size_t nf(int B, int T) { return ((size_t)B * (size_t)T * NF + 15) / 16 * 16; }

/* ---- stage "stem": saved f (BT, 6); scratch df (BT, 6) ---- */

static size_t stem_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)m, (void)st;
    return nf(B, T);
}

static void stem_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                         const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)st, (void)x0, (void)scratch;
    const res_impl *g = m->impl;
    dd_iqfeat_forward(saved, in, (size_t)B * (size_t)T);
    dd_stage_conv_fwd(&g->stem, sp, out, saved, B, T);
}

static void stem_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                          float *scratch) {
    (void)st, (void)x0, (void)dx0;
    const res_impl *g = m->impl;
    const size_t BT = (size_t)B * (size_t)T;
    if (din) {
        memset(scratch, 0, BT * NF * sizeof(float));
        dd_stage_conv_bwd(&g->stem, sp, scratch, dout, saved, B, T);
        dd_iqfeat_backward(din, scratch, in, BT);
    } else {
        dd_stage_conv_bwd(&g->stem, sp, NULL, dout, saved, B, T);
    }
}

static double stem_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    double f = DD_MAC * NF * (double)((const res_impl *)m->impl)->C + 16;
    return backward ? 2 * f : f;
}

static const dd_stage_ops stem_stage = {
    .saved = stem_saved,
    .scratch = stem_saved,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = stem_forward,
    .backward = stem_backward,
    .flops = stem_flops,
};

/* ---- each block's causal convolution (C -> Cl, kernel K) with the im2col workspace of
 * dd_conv1d_forward_ws (wide layers only; 0 floats otherwise): at the start of the stage's
 * scratch in the forward (its first half, all inference sizes), at the end in the backward: the products' blocks are then allocated once with the model's workspace
 * instead of a 4 MB buffer per call (docs/performance.md, "resnet 512 x 8 on Zen 5") ---- */

static size_t conv_ws(const res_impl *g, int B, int T, int backward) {
    return (dd_conv1d_scratch_floats(B, T, g->C, g->Cl, g->K, 1, backward) + 15) / 16 * 16;
}

static void conv_fwd(const dd_conv1d_layer *l, const dd_stage_params *sp, float *out, const float *in, int B, int T,
                     float *ws) {
    dd_conv1d_forward_ws(out, in, DD_SP(sp, l->w), DD_SP(sp, l->b), B, T, l->c_in, l->c_out, l->kernel, l->dilation,
                         l->groups, ws);
}

static void conv_bwd(const dd_conv1d_layer *l, const dd_stage_params *sp, float *din, const float *dout,
                     const float *in, int B, int T, float *ws) {
    dd_conv1d_backward_ws(din, DD_SG(sp, l->w), DD_SG(sp, l->b), dout, in, DD_SP(sp, l->w), B, T, l->c_in, l->c_out,
                          l->kernel, l->dilation, l->groups, ws);
}

/* ---- stage "blocks.i": h -> h + proj(tanh(conv(h))); saved z = tanh(conv(h)) (BT, C);
 * scratch dz, da (BT, C each), the convolution's workspace (forward: its first half only) ---- */

static size_t block_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return nc(m->impl, B, T);
}

static size_t block_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return 2 * nc(m->impl, B, T) + conv_ws(m->impl, B, T, 1);
}

static size_t block_scratch_fwd(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return conv_ws(m->impl, B, T, 0);
}

static void block_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0;
    const res_impl *g = m->impl;
    const size_t n = (size_t)B * (size_t)T * (size_t)g->C;
    conv_fwd(&g->conv[st->arg], sp, saved, in, B, T, scratch);
    dd_act_forward(DD_ACT_TANH, saved, saved, n);
    dd_stage_conv_fwd(&g->proj[st->arg], sp, out, saved, B, T);
    dd_add_forward(out, in, out, n);
}

static void block_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                           const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                           float *scratch) {
    (void)x0, (void)dx0;
    const res_impl *g = m->impl;
    const size_t n = (size_t)B * (size_t)T * (size_t)g->C;
    float *dz = scratch, *da = scratch + nc(g, B, T);
    /* the identity path passes dout to din; the block adds its part */
    if (din) dd_add_backward(din, NULL, dout, n);
    memset(dz, 0, n * sizeof(float));
    dd_stage_conv_bwd(&g->proj[st->arg], sp, dz, dout, saved, B, T);
    memset(da, 0, n * sizeof(float));
    dd_act_backward(DD_ACT_TANH, da, dz, NULL, saved, n);
    conv_bwd(&g->conv[st->arg], sp, din, da, in, B, T, da + nc(g, B, T));
}

static double block_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    const res_impl *g = m->impl;
    double C = g->C;
    double f = DD_MAC * (g->K + 1) * C * C + 6 * C;
    return backward ? 2 * f : f;
}

static const dd_stage_ops block_stage = {
    .saved = block_saved,
    .scratch = block_scratch,
    .scratch_fwd = block_scratch_fwd,
    .forward = block_forward,
    .backward = block_backward,
    .flops = block_flops,
};

/* ---- stage "blocks.i" of a tensor-parallel shard (T ranks, Cl = C / T): conv holds output
 * channels [r Cl, (r+1) Cl) (weight rows and bias), proj the same input channels (its
 * weight columns; its bias is replicated). Forward: a = conv_r(h) (BT, Cl), z = tanh(a),
 * p = proj_r(z) without bias (BT, C), reduce-from-group (allreduce of p), out = h + p + b.
 * Backward: dz = proj_r^T dout, da = tanh'(z) dz, the conv's partial dL/dh reduced by
 * copy-to-group's dual (allreduce of BT C floats) and added to dout (identity path).
 * Saved z (BT, Cl); scratch dz, da (BT, Cl), dh (BT, C), the convolution's workspace
 * (forward: the workspace's first half only, at the start). ---- */

static size_t ncl(const res_impl *g, int B, int T) { return ((size_t)B * (size_t)T * (size_t)g->Cl + 15) / 16 * 16; }

static size_t tp_block_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return ncl(m->impl, B, T);
}

static size_t tp_block_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return 2 * ncl(m->impl, B, T) + nc(m->impl, B, T) + conv_ws(m->impl, B, T, 1);
}

static size_t tp_block_scratch_fwd(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return conv_ws(m->impl, B, T, 0);
}

/* out (BT, C) += bias of every row */
static void add_row_bias(float *out, const float *b, size_t rows, size_t C) {
    for (size_t r = 0; r < rows; r++) dd_add_forward(out + r * C, out + r * C, b, C);
}

static void tp_block_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                             const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0;
    const res_impl *g = m->impl;
    const dd_conv1d_layer *pr = &g->proj[st->arg];
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)g->C;
    conv_fwd(&g->conv[st->arg], sp, saved, in, B, T, scratch);
    dd_act_forward(DD_ACT_TANH, saved, saved, BT * (size_t)g->Cl);
    dd_conv1d_forward(out, saved, DD_SP(sp, pr->w), NULL, B, T, pr->c_in, pr->c_out, 1, 1, 1);
    if (!dd_model_tp_ok(m, dd_tp_reduce_fwd(dd_model_tp_group(m), out, n))) return;
    add_row_bias(out, DD_SP(sp, pr->b), BT, (size_t)g->C);
    dd_add_forward(out, in, out, n);
}

static void tp_block_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                              const float *x0, const float *dout, float *din, float *dx0, int B, int T, float *saved,
                              float *scratch) {
    (void)x0, (void)dx0;
    const res_impl *g = m->impl;
    const size_t nl = (size_t)B * (size_t)T * (size_t)g->Cl, n = (size_t)B * (size_t)T * (size_t)g->C;
    float *dz = scratch, *da = scratch + ncl(g, B, T), *dh = din ? da + ncl(g, B, T) : NULL;
    /* reduce-from-group's dual is the identity: dL/dp = dout on every rank */
    memset(dz, 0, nl * sizeof(float));
    dd_stage_conv_bwd(&g->proj[st->arg], sp, dz, dout, saved, B, T);
    memset(da, 0, nl * sizeof(float));
    dd_act_backward(DD_ACT_TANH, da, dz, NULL, saved, nl);
    if (dh) memset(dh, 0, n * sizeof(float));
    conv_bwd(&g->conv[st->arg], sp, dh, da, in, B, T, scratch + 2 * ncl(g, B, T) + nc(g, B, T));
    if (!din || !dd_model_tp_ok(m, dd_tp_copy_bwd(dd_model_tp_group(m), dh, n))) return;
    dd_add_backward(din, NULL, dout, n);
    dd_add_forward(din, din, dh, n);
}

static double tp_block_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    const res_impl *g = m->impl;
    double C = g->C, Cl = g->Cl;
    double f = DD_MAC * (g->K + 1) * C * Cl + 4 * Cl + 2 * C;
    return backward ? 2 * f : f;
}

static const dd_stage_ops tp_block_stage = {
    .saved = tp_block_saved,
    .scratch = tp_block_scratch,
    .scratch_fwd = tp_block_scratch_fwd,
    .forward = tp_block_forward,
    .backward = tp_block_backward,
    .flops = tp_block_flops,
};

static const dd_model_ops res_ops = {.init = res_init, .destroy = res_destroy, .tensor_parallel = 1};

/* Block i's layers: conv C -> Cl (kernel K), proj Cl -> C (1x1); split over the group
 * when it has more than one rank. */
static dd_status add_block(dd_model *m, int i) {
    res_impl *g = m->impl;
    char name[40];
    snprintf(name, sizeof name, "blocks.%d.conv", i);
    DD_TRY(dd_conv1d_layer_add(&m->table, name, g->C, g->Cl, g->K, 1, 1, 1, &g->conv[i]));
    snprintf(name, sizeof name, "blocks.%d.proj", i);
    DD_TRY(dd_conv1d_layer_add(&m->table, name, g->Cl, g->C, 1, 1, 1, 1, &g->proj[i]));
    snprintf(name, sizeof name, "blocks.%d", i);
    if (dd_model_tp_size(m) == 1) return dd_model_add_stage(m, &block_stage, name, i, NULL, g->C, g->C);
    DD_TRY(dd_model_tp_split(m, g->conv[i].w, 0, 1));
    DD_TRY(dd_model_tp_split(m, g->conv[i].b, 0, 1));
    DD_TRY(dd_model_tp_split(m, g->proj[i].w, 1, 1));
    return dd_model_add_stage(m, &tp_block_stage, name, i, NULL, g->C, g->C);
}

static dd_status res_build(dd_model *m) {
    res_impl *g = m->impl;
    g->C = dd_model_opt(m, "hidden");
    g->L = dd_model_opt(m, "layers");
    g->K = dd_model_opt(m, "kernel");
    DD_TRY(dd_model_tp_divides(m, "hidden"));
    g->Cl = g->C / dd_model_tp_size(m);
    g->conv = dd_calloc((size_t)g->L, sizeof *g->conv);
    g->proj = dd_calloc((size_t)g->L, sizeof *g->proj);
    if (!g->conv || !g->proj) return dd_error(DD_ERR_NOMEM, "model resnet: out of memory");
    DD_TRY(dd_conv1d_layer_add(&m->table, "stem", NF, g->C, 1, 1, 1, 1, &g->stem));
    DD_TRY(dd_model_add_stage(m, &stem_stage, "stem", 0, NULL, 2, g->C));
    for (int i = 0; i < g->L; i++) DD_TRY(add_block(m, i));
    DD_TRY(dd_conv1d_layer_add(&m->table, "head", g->C, 2, 1, 1, 1, 1, &g->head));
    DD_TRY(dd_model_add_stage(m, &dd_stage_skip_head, "head", 0, &g->head, g->C, 2));
    m->history = (long)g->L * (g->K - 1);
    return DD_OK;
}

DD_MODEL_DEFINE(resnet, "deep residual time-delay conv network, + input", res_opts, &res_ops, res_impl, res_build);
