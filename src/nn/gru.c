/* GRU layer (torch.nn.GRU conventions): forward over a batch of sequences, backward
 * through time, parameter registration and PyTorch default initialisation. The kernels
 * are in gru_impl.h, instantiated here for float and double. */
#include "distdpd/nn.h"

#include <stdlib.h>
#include <string.h>

#include "nn_fm.h"
#include "nn_private.h"
#include "simd.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"
#include "gru_impl.h"
#undef DD_NN_DOUBLE
#define DD_NN_DOUBLE 1
#include "nn_real.h"
#include "gru_impl.h"

size_t dd_gru_workspace_size(int B, int T, int D, int H) {
    /* layout in gru_impl.h: LD (9H + 2D) + 4 H B with rows up to LD = dd_nn_gru_ld(TB)
     * apart, then the weight-gradient partials: a chunk of DD_NN_NT_KC columns holds at most
     * 3H (H + 1) (W_hh and b_hh) + 3H (D + 1) (W_ih and b_ih) floats */
    const size_t TB = (size_t)B * (size_t)T, LD = dd_nn_gru_ld(TB), h = (size_t)H, d = (size_t)D;
    const size_t parts = (TB + DD_NN_NT_KC - 1) / DD_NN_NT_KC * 3 * h * (h + d + 2);
    return LD * (9 * h + 2 * d) + 4 * h * (size_t)B + parts;
}

/* Registers the four tensors of layer `layer` of a GRU/LSTM: weight_ih (rows, D),
 * weight_hh (rows, H) and, with bias, both biases (rows); off[0..3] receive their offsets. */
dd_status dd_nn_rnn_tensors_add(dd_param_table *t, const char *prefix, const char *kind, int layer, size_t rows,
                                int input_size, int hidden_size, int bias, size_t off[4]) {
    char name[DD_PARAM_NAME_MAX], sfx[32];
    if (layer < 0 || layer > 999)
        return dd_error(DD_ERR_ARG, "%s layer '%s': layer index %d is out of range [0, 999]", kind,
                        prefix ? prefix : "", layer);
    if (input_size < 1 || hidden_size < 1)
        return dd_error(DD_ERR_ARG, "%s layer '%s': input_size %d and hidden_size %d must be >= 1",
                        kind, prefix ? prefix : "", input_size, hidden_size);
    size_t s_ih[2] = {rows, (size_t)input_size}, s_hh[2] = {rows, (size_t)hidden_size}, s_b[1] = {rows};
    snprintf(sfx, sizeof sfx, "weight_ih_l%d", layer);
    DD_TRY(dd_nn_param_name(name, prefix, sfx));
    DD_TRY(dd_param_table_add(t, name, 2, s_ih, &off[0]));
    snprintf(sfx, sizeof sfx, "weight_hh_l%d", layer);
    DD_TRY(dd_nn_param_name(name, prefix, sfx));
    DD_TRY(dd_param_table_add(t, name, 2, s_hh, &off[1]));
    if (bias) {
        snprintf(sfx, sizeof sfx, "bias_ih_l%d", layer);
        DD_TRY(dd_nn_param_name(name, prefix, sfx));
        DD_TRY(dd_param_table_add(t, name, 1, s_b, &off[2]));
        snprintf(sfx, sizeof sfx, "bias_hh_l%d", layer);
        DD_TRY(dd_nn_param_name(name, prefix, sfx));
        DD_TRY(dd_param_table_add(t, name, 1, s_b, &off[3]));
    }
    return DD_OK;
}

/* Registers the four tensors of layer `layer` of a GRU/LSTM with `gates` gate blocks. */
dd_status dd_nn_rnn_layer_add(dd_param_table *t, const char *prefix, const char *kind, int gates, int layer,
                              int input_size, int hidden_size, int bias, dd_gru_layer *l) {
    size_t off[4] = {0, 0, 0, 0};
    memset(l, 0, sizeof *l);
    DD_TRY(dd_nn_rnn_tensors_add(t, prefix, kind, layer, (size_t)gates * (size_t)(hidden_size > 0 ? hidden_size : 0),
                                 input_size, hidden_size, bias, off));
    l->w_ih = off[0];
    l->w_hh = off[1];
    l->b_ih = off[2];
    l->b_hh = off[3];
    l->input_size = input_size;
    l->hidden_size = hidden_size;
    l->bias = bias ? 1 : 0;
    return DD_OK;
}

void dd_nn_rnn_layer_init(const dd_gru_layer *l, int gates, float *params, dd_rng *rng) {
    double k = dd_param_bound((size_t)l->hidden_size);
    size_t G = (size_t)gates * (size_t)l->hidden_size;
    dd_param_uniform(params + l->w_ih, G * (size_t)l->input_size, k, rng);
    dd_param_uniform(params + l->w_hh, G * (size_t)l->hidden_size, k, rng);
    if (l->bias) {
        dd_param_uniform(params + l->b_ih, G, k, rng);
        dd_param_uniform(params + l->b_hh, G, k, rng);
    }
}

dd_status dd_gru_layer_add(dd_param_table *t, const char *prefix, int input_size, int hidden_size,
                           int bias, dd_gru_layer *l) {
    return dd_nn_rnn_layer_add(t, prefix, "GRU", 3, 0, input_size, hidden_size, bias, l);
}

dd_status dd_gru_layer_add_l(dd_param_table *t, const char *prefix, int layer, int input_size, int hidden_size,
                             int bias, dd_gru_layer *l) {
    return dd_nn_rnn_layer_add(t, prefix, "GRU", 3, layer, input_size, hidden_size, bias, l);
}

void dd_gru_layer_init(const dd_gru_layer *l, float *params, dd_rng *rng) {
    dd_nn_rnn_layer_init(l, 3, params, rng);
}
