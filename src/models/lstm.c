/* Model "lstm": I/Q -> `layers` LSTM layers (PyTorch gate convention i, f, g, o) ->
 * linear to I/Q, the LSTM counterpart of the OpenDPD GRU model:
 *   (h^k_t, c^k_t) = LSTM_k(h^{k-1}_t, h^k_{t-1}, c^k_{t-1}) (h^0 = x),  y_t = W_out h^L_t + b_out.
 * Names "rnn.weight_ih_l0", ..., "fc_out.weight", "fc_out.bias" (OpenDPD backbone
 * state_dict, torch.nn.LSTM(num_layers=L)); 4H^2 + 18H + 2 parameters for one layer
 * (2,738 at the default H = 24), plus 8H^2 + 8H per further layer. PyTorch's default
 * initialisation. Stages: one per LSTM layer ("rnn.l<k>") and the head ("fc_out"). */
#include <stdio.h>

#include "models/model_impl.h"

#define LSTM_MAX_LAYERS 64

typedef struct {
    int H, L;                            /* hidden units, stacked layers */
    dd_lstm_layer rnn[LSTM_MAX_LAYERS];  /* LSTM(2 -> H), LSTM(H -> H), ... */
    dd_dense_layer fc;                   /* Linear(H -> 2) */
    dd_rnn_shard_layer shard[LSTM_MAX_LAYERS]; /* a tensor-parallel shard's layers (H / T units each) */
} lstm_impl;

static const dd_model_opt_info lstm_opts[] = {
    {"hidden", "hidden units of each LSTM layer", 24, 1, 4096},
    {"layers", "stacked LSTM layers", 1, 1, LSTM_MAX_LAYERS},
    {NULL, NULL, 0, 0, 0}};

static void lstm_init(const dd_model *m, float *params, dd_rng *rng) {
    const lstm_impl *g = m->impl;
    for (int k = 0; k < g->L; k++) dd_lstm_layer_init(&g->rnn[k], params, rng);
    dd_dense_layer_init(&g->fc, params, rng);
}

static const dd_model_ops lstm_ops = {.init = lstm_init, .tensor_parallel = 1};

/* Layer k (input 2 for the first, H for the others): the whole layer, or a tensor-parallel
 * shard of it (H / T units of every gate). */
static dd_status add_layer(dd_model *m, int k, const char *name) {
    lstm_impl *g = m->impl;
    const int D = k ? g->H : 2, T = dd_model_tp_size(m);
    if (T == 1) {
        DD_TRY(dd_lstm_layer_add_l(&m->table, "rnn", k, D, g->H, 1, &g->rnn[k]));
        return dd_model_add_stage(m, &dd_stage_lstm, name, k, &g->rnn[k], D, g->H);
    }
    dd_rnn_shard_layer *l = &g->shard[k];
    DD_TRY(dd_model_tp_rnn_add(m, k, 4, D, g->H, l));
    return dd_model_add_stage(m, &dd_stage_lstm_tp, name, k, l, D, g->H);
}

static dd_status lstm_build(dd_model *m) {
    lstm_impl *g = m->impl;
    g->H = dd_model_opt(m, "hidden");
    g->L = dd_model_opt(m, "layers");
    DD_TRY(dd_model_tp_divides(m, "hidden"));
    char name[32];
    for (int k = 0; k < g->L; k++) {
        snprintf(name, sizeof name, "rnn.l%d", k);
        DD_TRY(add_layer(m, k, name));
    }
    DD_TRY(dd_dense_layer_add(&m->table, "fc_out", g->H, 2, 1, &g->fc));
    DD_TRY(dd_model_add_stage(m, &dd_stage_dense, "fc_out", 0, &g->fc, g->H, 2));
    m->history = -1;
    return DD_OK;
}

DD_MODEL_DEFINE(lstm, "I/Q -> LSTM (x layers) -> linear", lstm_opts, &lstm_ops, lstm_impl, lstm_build);
