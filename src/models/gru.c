/* Model "gru": the OpenDPD GRU PA/DPD model, optionally stacked. Per step the raw (I, Q)
 * pair goes through `layers` GRU layers (PyTorch gate convention) and a linear layer back
 * to (I, Q):
 *   h^1_t = GRU_1(x_t, h^1_{t-1}),  h^k_t = GRU_k(h^{k-1}_t, h^k_{t-1}),  y_t = W_out h^L_t + b_out.
 * Parameter names follow OpenDPD's backbone state_dict and torch.nn.GRU(num_layers=L)
 * ("rnn.weight_ih_l0", ..., "rnn.bias_hh_l<L-1>", "fc_out.weight", "fc_out.bias");
 * 3H^2 + 14H + 2 parameters for one layer (1,911 at H = 23, 2,746 at H = 28), plus
 * 6H^2 + 6H per further layer. Stages: one per GRU layer ("rnn.l<k>") and the head
 * ("fc_out"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_impl.h"

#define GRU_MAX_LAYERS 64

typedef struct {
    int H, L;                         /* hidden units, stacked layers */
    dd_gru_layer rnn[GRU_MAX_LAYERS]; /* GRU(2 -> H), GRU(H -> H), ... */
    dd_dense_layer fc;                /* Linear(H -> 2) */
    dd_rnn_shard_layer shard[GRU_MAX_LAYERS]; /* a tensor-parallel shard's layers (H / T units each) */
} gru_impl;

static const dd_model_opt_info gru_opts[] = {
    {"hidden", "hidden units of each GRU layer", 23, 1, 4096},
    {"layers", "stacked GRU layers", 1, 1, GRU_MAX_LAYERS},
    {NULL, NULL, 0, 0, 0}};

/* OpenDPD's GRU.reset_parameters(): biases zero; each gate block (H x H) of weight_hh
 * orthogonal; each gate block (H x D) of weight_ih Xavier-uniform; fc_out Xavier-uniform
 * with zero bias (for every layer of a stack, in layer order). With it the reference
 * recipe follows OpenDPD's learning curve (PyTorch's default uniform init starts about
 * 0.6 dB worse after one epoch). */
static void gru_init(const dd_model *m, float *params, dd_rng *rng) {
    const gru_impl *g = m->impl;
    size_t H = (size_t)g->H;
    for (int k = 0; k < g->L; k++) {
        const dd_gru_layer *r = &g->rnn[k];
        for (int gate = 0; gate < 3; gate++) {
            float *whh = params + r->w_hh + (size_t)gate * H * H;
            if (dd_param_orthogonal(whh, H, H, rng) != DD_OK) {
                /* Only an allocation failure gets here: keep PyTorch's default instead. */
                dd_log(DD_LOG_WARN, "gru: orthogonal init failed (%s); using uniform init", dd_last_error());
                for (int j = 0; j < g->L; j++) dd_gru_layer_init(&g->rnn[j], params, rng);
                dd_dense_layer_init(&g->fc, params, rng);
                return;
            }
        }
        const size_t D = (size_t)r->input_size;
        for (int gate = 0; gate < 3; gate++)
            dd_param_xavier_uniform(params + r->w_ih + (size_t)gate * H * D, H, D, rng);
        if (r->bias) {
            memset(params + r->b_ih, 0, 3 * H * sizeof(float));
            memset(params + r->b_hh, 0, 3 * H * sizeof(float));
        }
    }
    dd_param_xavier_uniform(params + g->fc.w, 2, H, rng);
    if (g->fc.bias) memset(params + g->fc.b, 0, 2 * sizeof(float));
}

static const dd_model_ops gru_ops = {.init = gru_init, .tensor_parallel = 1};

/* Layer k (input 2 for the first, H for the others): the whole layer, or a tensor-parallel
 * shard of it (H / T units of every gate). */
static dd_status add_layer(dd_model *m, int k, const char *name) {
    gru_impl *g = m->impl;
    const int D = k ? g->H : 2, T = dd_model_tp_size(m);
    if (T == 1) {
        DD_TRY(dd_gru_layer_add_l(&m->table, "rnn", k, D, g->H, 1, &g->rnn[k]));
        /* the last layer hands its output gradient over feature-major with the head */
        const dd_stage_ops *ops = k + 1 == g->L ? &dd_stage_gru_dfm : &dd_stage_gru;
        return dd_model_add_stage(m, ops, name, k, &g->rnn[k], D, g->H);
    }
    dd_rnn_shard_layer *l = &g->shard[k];
    DD_TRY(dd_model_tp_rnn_add(m, k, 3, D, g->H, l));
    return dd_model_add_stage(m, &dd_stage_gru_tp, name, k, l, D, g->H);
}

static dd_status gru_build(dd_model *m) {
    gru_impl *g = m->impl;
    g->H = dd_model_opt(m, "hidden");
    g->L = dd_model_opt(m, "layers");
    DD_TRY(dd_model_tp_divides(m, "hidden"));
    char name[32];
    for (int k = 0; k < g->L; k++) {
        snprintf(name, sizeof name, "rnn.l%d", k);
        DD_TRY(add_layer(m, k, name));
    }
    DD_TRY(dd_dense_layer_add(&m->table, "fc_out", g->H, 2, 1, &g->fc));
    /* with the last GRU stage's dfm kind (no tensor parallelism): the head's din feature-major */
    DD_TRY(dd_model_add_stage(m, dd_model_tp_size(m) == 1 ? &dd_stage_dense_dfm : &dd_stage_dense, "fc_out", 0,
                              &g->fc, g->H, 2));
    m->history = -1;
    return DD_OK;
}

DD_MODEL_DEFINE(gru, "OpenDPD GRU: I/Q -> GRU (x layers) -> linear (1,911 parameters at hidden 23)", gru_opts,
                &gru_ops, gru_impl, gru_build);
