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
 * L = 2. History M - 1 samples. The gradient of r at x = 0 is defined as zero. One stage
 * ("mlp"): these models are small.
 * Tensor parallelism (T ranks, T divides H): Megatron pairs of dense layers. hidden.0,
 * .2, ... are split by output unit (rows of W and b: H/T units each, the input whole),
 * hidden.1, .3, ... by input unit (columns of W: the partial products summed over the
 * group, then the bias, whole, then tanh); with L odd fc_out is split by input unit too
 * (its 2 outputs summed), with L even it is whole. Per forward ceil(L/2) allreduces of
 * (BT, H) or (BT, 2) floats; per backward one allreduce of each column layer's input
 * gradient that is wanted (floor(L/2) of (BT, H), and (BT, F M) when dx is). */
#include <math.h>

#include "models/model_impl.h"

#define TD_MAX_LAYERS 64

typedef struct {
    int F, M, H, L;                     /* features per tap, taps, width, hidden layers */
    int Hl;                             /* units of a column layer's output here (H / T) */
    dd_dense_layer hid[TD_MAX_LAYERS];  /* hidden.0: F*M -> H, hidden.i: H -> H */
    dd_dense_layer out;                 /* fc_out: H -> 2 */
} td_impl;

static const dd_model_opt_info td_opts[] = {
    {"hidden", "units H of each tanh layer", 32, 1, 4096},
    {"layers", "tanh layers", 2, 1, TD_MAX_LAYERS},
    {"memory", "taps M of the delay line", 8, 1, 1024},
    {NULL, NULL, 0, 0, 0}};

/* Saved: U (BT, F*M) delay-line features, z_i (BT, H) tanh outputs. */
typedef struct {
    float *U;
    float *z[TD_MAX_LAYERS];
} td_saved;
/* Scratch: dz, da (BT, H), dU (BT, F*M). */
typedef struct {
    float *dz, *da, *dU;
} td_scratch;

static size_t saved_layout(const td_impl *g, int B, int T, float *base, td_saved *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H, FM = (size_t)g->F * (size_t)g->M;
    w->U = dd_ws_take(&c, BT * FM);
    for (int i = 0; i < g->L; i++) w->z[i] = dd_ws_take(&c, BT * H);
    return c.used;
}

static size_t scratch_layout(const td_impl *g, int B, int T, float *base, td_scratch *w) {
    dd_ws_carver c = {base, 0};
    size_t BT = (size_t)B * (size_t)T, H = (size_t)g->H, FM = (size_t)g->F * (size_t)g->M;
    w->dz = dd_ws_take(&c, BT * H);
    w->da = dd_ws_take(&c, BT * H);
    w->dU = dd_ws_take(&c, BT * FM);
    return c.used;
}

static size_t mlp_saved(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    td_saved w;
    return saved_layout(m->impl, B, T, NULL, &w);
}

static size_t mlp_scratch(const dd_model *m, const dd_stage_def *st, int B, int T) {
    (void)st;
    td_scratch w;
    return scratch_layout(m->impl, B, T, NULL, &w);
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

/* Layer i (L: fc_out) of a tensor-parallel shard is split by input unit (its input is a
 * previous layer's shard, its output summed over the group). */
static int row_split(const dd_model *m, int i) { return dd_model_tp_size(m) > 1 && i % 2 == 1; }

/* out (rows, C) += b in every row */
static void add_rows(float *out, const float *b, size_t rows, size_t C) {
    for (size_t r = 0; r < rows; r++) dd_add_forward(out + r * C, out + r * C, b, C);
}

static void mlp_forward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *x,
                        const float *x0, float *y, int B, int T, float *saved, float *scratch) {
    (void)st, (void)x0, (void)scratch;
    const td_impl *g = m->impl;
    td_saved w;
    saved_layout(g, B, T, saved, &w);
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)g->H;
    build_taps(g, x, w.U, B, T);
    const float *in = w.U;
    for (int i = 0; i < g->L; i++) {
        const dd_dense_layer *l = &g->hid[i];
        if (!row_split(m, i)) {
            dd_dense_forward(w.z[i], in, DD_SP(sp, l->w), DD_SP(sp, l->b), BT, l->in_dim, l->out_dim);
        } else { /* the partial products summed over the group, then the bias */
            dd_dense_forward(w.z[i], in, DD_SP(sp, l->w), NULL, BT, l->in_dim, l->out_dim);
            if (!dd_model_tp_ok(m, dd_tp_reduce_fwd(dd_model_tp_group(m), w.z[i], n))) return;
            add_rows(w.z[i], DD_SP(sp, l->b), BT, (size_t)g->H);
        }
        dd_act_forward(DD_ACT_TANH, w.z[i], w.z[i], BT * (size_t)l->out_dim);
        in = w.z[i];
    }
    if (!row_split(m, g->L)) {
        dd_dense_forward(y, in, DD_SP(sp, g->out.w), DD_SP(sp, g->out.b), BT, g->out.in_dim, 2);
    } else {
        dd_dense_forward(y, in, DD_SP(sp, g->out.w), NULL, BT, g->out.in_dim, 2);
        if (!dd_model_tp_ok(m, dd_tp_reduce_fwd(dd_model_tp_group(m), y, 2 * BT))) return;
        add_rows(y, DD_SP(sp, g->out.b), BT, 2);
    }
    (void)n;
}

static void mlp_backward(const dd_model *m, const dd_stage_def *st, const dd_stage_params *sp, const float *x,
                         const float *x0, const float *dy, float *dx, float *dx0, int B, int T, float *saved,
                         float *scratch) {
    (void)st, (void)x0, (void)dx0;
    const td_impl *g = m->impl;
    td_saved w;
    td_scratch d;
    saved_layout(g, B, T, saved, &w);
    scratch_layout(g, B, T, scratch, &d);
    const size_t BT = (size_t)B * (size_t)T;
    /* a row-split layer's input gradient is this rank's shard (no collective); a
     * column-split layer's is a partial sum over the group (copy-to-group's dual) */
    memset(d.dz, 0, BT * (size_t)g->out.in_dim * sizeof(float));
    dd_dense_backward(d.dz, DD_SG(sp, g->out.w), DD_SG(sp, g->out.b), dy, w.z[g->L - 1], DD_SP(sp, g->out.w), BT,
                      g->out.in_dim, 2);
    for (int i = g->L - 1; i >= 0; i--) {
        const dd_dense_layer *l = &g->hid[i];
        const size_t no = BT * (size_t)l->out_dim, ni = BT * (size_t)l->in_dim;
        memset(d.da, 0, no * sizeof(float));
        dd_act_backward(DD_ACT_TANH, d.da, d.dz, NULL, w.z[i], no);
        float *din = NULL;
        if (i > 0) {
            memset(d.dz, 0, ni * sizeof(float));
            din = d.dz;
        } else if (dx) {
            memset(d.dU, 0, ni * sizeof(float));
            din = d.dU;
        }
        /* NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): w.z[i - 1] was set by the forward pass (a path with no layers) */
        dd_dense_backward(din, DD_SG(sp, l->w), DD_SG(sp, l->b), d.da, i > 0 ? w.z[i - 1] : w.U, DD_SP(sp, l->w), BT,
                          l->in_dim, l->out_dim);
        if (din && dd_model_tp_size(m) > 1 && !row_split(m, i) &&
            !dd_model_tp_ok(m, dd_tp_copy_bwd(dd_model_tp_group(m), din, ni)))
            return;
    }
    if (dx) scatter_taps(g, x, d.dU, dx, B, T);
}

static double mlp_flops(const dd_model *m, const dd_stage_def *st, int backward) {
    (void)st;
    const td_impl *g = m->impl;
    double mac = 0, act = 0;
    for (int i = 0; i < g->L; i++) {
        mac += (double)g->hid[i].in_dim * g->hid[i].out_dim;
        act += g->hid[i].out_dim;
    }
    mac += (double)g->out.in_dim * 2;
    double f = DD_MAC * mac + 4 * act + (g->F == 5 ? 8.0 * g->M : 0.0);
    return backward ? 2 * f : f;
}

static const dd_stage_ops mlp_stage = {
    .saved = mlp_saved,
    .scratch = mlp_scratch,
    .scratch_fwd = dd_stage_no_scratch,
    .forward = mlp_forward,
    .backward = mlp_backward,
    .flops = mlp_flops,
};

static const dd_model_ops td_ops = {.init = td_init, .tensor_parallel = 1};

static dd_status td_build(dd_model *m, int F) {
    td_impl *g = m->impl;
    g->F = F;
    g->M = dd_model_opt(m, "memory");
    g->H = dd_model_opt(m, "hidden");
    g->L = dd_model_opt(m, "layers");
    DD_TRY(dd_model_tp_divides(m, "hidden"));
    g->Hl = g->H / dd_model_tp_size(m);
    char name[40];
    for (int i = 0; i < g->L; i++) { /* a shard: column layers H -> Hl, row layers Hl -> H */
        snprintf(name, sizeof name, "hidden.%d", i);
        const int in = i == 0 ? g->F * g->M : row_split(m, i) ? g->Hl : g->H;
        const int out = row_split(m, i) || dd_model_tp_size(m) == 1 ? g->H : g->Hl;
        DD_TRY(dd_dense_layer_add(&m->table, name, in, out, 1, &g->hid[i]));
        if (dd_model_tp_size(m) > 1 && !row_split(m, i)) {
            DD_TRY(dd_model_tp_split(m, g->hid[i].w, 0, 1));
            DD_TRY(dd_model_tp_split(m, g->hid[i].b, 0, 1));
        } else if (dd_model_tp_size(m) > 1) {
            DD_TRY(dd_model_tp_split(m, g->hid[i].w, 1, 1));
        }
    }
    DD_TRY(dd_dense_layer_add(&m->table, "fc_out", row_split(m, g->L) ? g->Hl : g->H, 2, 1, &g->out));
    if (row_split(m, g->L)) DD_TRY(dd_model_tp_split(m, g->out.w, 1, 1));
    DD_TRY(dd_model_add_stage(m, &mlp_stage, "mlp", 0, NULL, 2, 2));
    m->history = g->M - 1;
    return DD_OK;
}

static dd_status rvtdnn_build(dd_model *m) { return td_build(m, 2); }
static dd_status arvtdnn_build(dd_model *m) { return td_build(m, 5); }

DD_MODEL_DEFINE(rvtdnn, "real-valued time-delay MLP on I/Q taps (Liu 2004)", td_opts, &td_ops, td_impl,
                rvtdnn_build);
DD_MODEL_DEFINE(arvtdnn, "augmented RVTDNN: I/Q taps plus |x|, |x|^2, |x|^3 (Wang 2019)", td_opts, &td_ops,
                td_impl, arvtdnn_build);
