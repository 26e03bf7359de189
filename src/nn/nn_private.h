/* Helpers shared by the layer files of src/nn (not part of the public API). */
#ifndef DD_NN_PRIVATE_H
#define DD_NN_PRIVATE_H

#include <stdio.h>
#include <string.h>

#include "distdpd/core.h"
#include "distdpd/nn.h"
#include "distdpd/param.h"


/* name = "<prefix>.<leaf>" (or "<leaf>" for an empty prefix); DD_ERR_ARG when the prefix
 * is NULL, longer than 40 characters, or the result does not fit a parameter name. */
static inline dd_status dd_nn_param_name(char name[DD_PARAM_NAME_MAX], const char *prefix,
                                         const char *leaf) {
    if (!prefix) return dd_error(DD_ERR_ARG, "layer prefix is NULL");
    if (strlen(prefix) > 40)
        return dd_error(DD_ERR_ARG, "layer prefix '%s' is longer than 40 characters", prefix);
    int n = prefix[0] ? snprintf(name, DD_PARAM_NAME_MAX, "%s.%s", prefix, leaf)
                      : snprintf(name, DD_PARAM_NAME_MAX, "%s", leaf);
    if (n < 0 || n >= DD_PARAM_NAME_MAX)
        return dd_error(DD_ERR_ARG, "parameter name '%s.%s' is too long", prefix, leaf);
    return DD_OK;
}

/* GRU (gates = 3) and LSTM (gates = 4) parameter registration and initialisation
 * (gru.c); `kind` names the layer in messages. */
dd_status dd_nn_rnn_layer_add(dd_param_table *t, const char *prefix, const char *kind, int gates, int layer,
                              int input_size, int hidden_size, int bias, dd_gru_layer *l);
/* The tensors alone, with `rows` gate rows (gates x units: tensor-parallel shards). */
dd_status dd_nn_rnn_tensors_add(dd_param_table *t, const char *prefix, const char *kind, int layer, size_t rows,
                                int input_size, int hidden_size, int bias, size_t off[4]);
void dd_nn_rnn_layer_init(const dd_gru_layer *l, int gates, float *params, dd_rng *rng);

/* Out-of-line elementwise kernels (cells.c / cells_impl.h). Float names plain, double
 * names with _f64; all arrays have n elements and must not overlap. */
/* NOLINTBEGIN(bugprone-macro-parentheses): T is a type name, which parentheses would break */
#define DD_NN_CELL_DECLS(T, S)                                                               \
    void dd_nn_vsigmoid##S(T *restrict y, size_t n);        /* y = sigmoid(y) */             \
    void dd_nn_vtanh##S(T *restrict y, size_t n);           /* y = tanh(y) */                \
    void dd_nn_add_sigmoid##S(T *restrict y, const T *restrict a, size_t n); /* sig(y+a) */  \
    /* ghn = s; gn = tanh(gn + r s) */                                                       \
    void dd_nn_gru_n##S(T *restrict gn, T *restrict ghn, const T *restrict r,               \
                        const T *restrict s, size_t n);                                      \
    /* h = nv + z (hp - nv) */                                                               \
    void dd_nn_gru_h##S(T *restrict h, const T *restrict z, const T *restrict nv,           \
                        const T *restrict hp, size_t n);                                     \
    /* GRU cell backward: pre-activation gradients from d = dL/dh (d becomes d z) */        \
    void dd_nn_gru_bwd##S(T *restrict dar, T *restrict daz, T *restrict danr, T *restrict dan, \
                          T *restrict d, const T *restrict r, const T *restrict z,          \
                          const T *restrict nv, const T *restrict hn, const T *restrict hp, \
                          size_t n);                                                         \
    /* c = f cp + i g; tc = tanh(c) */                                                       \
    void dd_nn_lstm_c##S(T *restrict c, T *restrict tc, const T *restrict ig,               \
                         const T *restrict fg, const T *restrict gg, const T *restrict cp,  \
                         size_t n);                                                          \
    void dd_nn_lstm_h##S(T *restrict h, const T *restrict og, const T *restrict tc, size_t n); \
    /* LSTM cell backward from dh (read) and dc (updated to dL/dc_{t-1}) */                  \
    void dd_nn_lstm_bwd##S(T *restrict dai, T *restrict daf, T *restrict dag, T *restrict dao, \
                           const T *restrict dh, T *restrict dc, const T *restrict ig,      \
                           const T *restrict fg, const T *restrict gg, const T *restrict og, \
                           const T *restrict tc, const T *restrict cp, size_t n);          \
    /* y += a * x */                                                                         \
    void dd_nn_vmul_add##S(T *restrict y, const T *restrict a, const T *restrict x, size_t n);
/* NOLINTEND(bugprone-macro-parentheses) */
DD_NN_CELL_DECLS(float, )
DD_NN_CELL_DECLS(double, _f64)
#undef DD_NN_CELL_DECLS

#endif
