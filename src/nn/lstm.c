/* LSTM layer (torch.nn.LSTM conventions): forward over a batch of sequences, backward
 * through time, parameter registration and PyTorch default initialisation. The kernels
 * are in lstm_impl.h, instantiated here for float and double. */
#include "distdpd/nn.h"

#include <string.h>

#include "nn_private.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"
#include "lstm_impl.h"
#undef DD_NN_DOUBLE
#define DD_NN_DOUBLE 1
#include "nn_real.h"
#include "lstm_impl.h"

size_t dd_lstm_workspace_size(int B, int T, int D, int H) {
    /* layout in lstm_impl.h: TB (11H + 2D) + 2 H B */
    const size_t TB = (size_t)B * (size_t)T;
    return TB * (11 * (size_t)H + 2 * (size_t)D) + 2 * (size_t)H * (size_t)B;
}

dd_status dd_lstm_layer_add(dd_param_table *t, const char *prefix, int input_size, int hidden_size,
                            int bias, dd_lstm_layer *l) {
    return dd_nn_rnn_layer_add(t, prefix, "LSTM", 4, 0, input_size, hidden_size, bias, l);
}

dd_status dd_lstm_layer_add_l(dd_param_table *t, const char *prefix, int layer, int input_size, int hidden_size,
                              int bias, dd_lstm_layer *l) {
    return dd_nn_rnn_layer_add(t, prefix, "LSTM", 4, layer, input_size, hidden_size, bias, l);
}

void dd_lstm_layer_init(const dd_lstm_layer *l, float *params, dd_rng *rng) {
    dd_nn_rnn_layer_init(l, 4, params, rng);
}
