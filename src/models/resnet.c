/* Model "resnet": a deep residual time-delay (causal convolution) network. With
 * f_t = dd_iqfeat(x_t) (6 features), C channels, L blocks, kernel K:
 *   h_0     = Conv1x1_{6->C}(f) + b                                   "stem"
 *   h_{i+1} = h_i + Conv1x1_{C->C}(tanh(CausalConv_{C->C, K}(h_i)))  "blocks.i.conv/proj"
 *   y       = Conv1x1_{C->2}(h_L) + b + x                             "head", input added back
 * All convolutions have biases. 7C + L (K C^2 + C^2 + 2C) + 2C + 2 parameters (2,510 at
 * the defaults C = 12, L = 4, K = 3; hidden 1024, layers 12 gives 50.4 M). History
 * L (K-1) samples. Stages: "stem", one per block ("blocks.<i>"), "head". */
#include <stdio.h>

#include "models/model_impl.h"

#define RES_MAX_LAYERS 1024
#define NF DD_IQFEAT_DIM

typedef struct {
    int C, L, K;            /* channels, residual blocks, kernel */
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
    .forward = stem_forward,
    .backward = stem_backward,
    .flops = stem_flops,
};

/* ---- stage "blocks.i": h -> h + proj(tanh(conv(h))); saved z = tanh(conv(h)) (BT, C);
 * scratch dz, da (BT, C each) ---- */

static size_t block_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return nc(m->impl, B, T);
}

static size_t block_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    return 2 * nc(m->impl, B, T);
}

static void block_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *in,
                          const float *x0, float *out, int B, int T, float *saved, float *scratch) {
    (void)x0, (void)scratch;
    const res_impl *g = m->impl;
    const size_t n = (size_t)B * (size_t)T * (size_t)g->C;
    dd_stage_conv_fwd(&g->conv[st->arg], sp, saved, in, B, T);
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
    dd_stage_conv_bwd(&g->conv[st->arg], sp, din, da, in, B, T);
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
    .forward = block_forward,
    .backward = block_backward,
    .flops = block_flops,
};

static const dd_model_ops res_ops = {.init = res_init, .destroy = res_destroy};

static dd_status res_build(dd_model *m) {
    res_impl *g = m->impl;
    g->C = dd_model_opt(m, "hidden");
    g->L = dd_model_opt(m, "layers");
    g->K = dd_model_opt(m, "kernel");
    g->conv = dd_calloc((size_t)g->L, sizeof *g->conv);
    g->proj = dd_calloc((size_t)g->L, sizeof *g->proj);
    if (!g->conv || !g->proj) return dd_error(DD_ERR_NOMEM, "model resnet: out of memory");
    char name[40];
    DD_TRY(dd_conv1d_layer_add(&m->table, "stem", NF, g->C, 1, 1, 1, 1, &g->stem));
    DD_TRY(dd_model_add_stage(m, &stem_stage, "stem", 0, NULL, 2, g->C));
    for (int i = 0; i < g->L; i++) {
        snprintf(name, sizeof name, "blocks.%d.conv", i);
        DD_TRY(dd_conv1d_layer_add(&m->table, name, g->C, g->C, g->K, 1, 1, 1, &g->conv[i]));
        snprintf(name, sizeof name, "blocks.%d.proj", i);
        DD_TRY(dd_conv1d_layer_add(&m->table, name, g->C, g->C, 1, 1, 1, 1, &g->proj[i]));
        snprintf(name, sizeof name, "blocks.%d", i);
        DD_TRY(dd_model_add_stage(m, &block_stage, name, i, NULL, g->C, g->C));
    }
    DD_TRY(dd_conv1d_layer_add(&m->table, "head", g->C, 2, 1, 1, 1, 1, &g->head));
    DD_TRY(dd_model_add_stage(m, &dd_stage_skip_head, "head", 0, &g->head, g->C, 2));
    m->history = (long)g->L * (g->K - 1);
    return DD_OK;
}

DD_MODEL_DEFINE(resnet, "deep residual time-delay conv network, + input", res_opts, &res_ops, res_impl, res_build);
