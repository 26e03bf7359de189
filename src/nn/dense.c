/* Dense (fully connected, torch.nn.Linear) layer: forward, backward, parameter
 * registration and PyTorch default initialisation. */
#include "distdpd/nn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_fm.h"
#include "nn_private.h"
#include "simd.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"
#include "dense_impl.h"
#undef DD_NN_DOUBLE
#define DD_NN_DOUBLE 1
#include "nn_real.h"
#include "dense_impl.h"

dd_status dd_dense_layer_add(dd_param_table *t, const char *prefix, int in_dim, int out_dim,
                             int bias, dd_dense_layer *l) {
    char name[DD_PARAM_NAME_MAX];
    memset(l, 0, sizeof *l);
    if (in_dim < 1 || out_dim < 1)
        return dd_error(DD_ERR_ARG, "dense layer '%s': in_dim %d and out_dim %d must be >= 1",
                        prefix ? prefix : "", in_dim, out_dim);
    DD_TRY(dd_nn_param_name(name, prefix, "weight"));
    size_t shape[2] = {(size_t)out_dim, (size_t)in_dim};
    DD_TRY(dd_param_table_add(t, name, 2, shape, &l->w));
    if (bias) {
        DD_TRY(dd_nn_param_name(name, prefix, "bias"));
        DD_TRY(dd_param_table_add(t, name, 1, shape, &l->b));
    }
    l->in_dim = in_dim;
    l->out_dim = out_dim;
    l->bias = bias ? 1 : 0;
    return DD_OK;
}

void dd_dense_layer_init(const dd_dense_layer *l, float *params, dd_rng *rng) {
    double k = dd_param_bound((size_t)l->in_dim);
    dd_param_uniform(params + l->w, (size_t)l->out_dim * (size_t)l->in_dim, k, rng);
    if (l->bias) dd_param_uniform(params + l->b, (size_t)l->out_dim, k, rng);
}

void dd_dense_backward_dfm(float *din_fm, int set, float *dw, float *db, const float *dout, const float *in,
                           const float *w, int B_, int T_, int in_dim, int out_dim, float *tmp) {
    const size_t B = (size_t)B_, T = (size_t)T_, NI = (size_t)in_dim, O = (size_t)out_dim, N = B * T;
    if (dw || db) dd_dense_backward(NULL, dw, db, dout, in, w, N, in_dim, out_dim); /* din apart: same dw, db */
    if (!din_fm) return;
    if (dd_nn_dense_small_din_fm(dd_nn_simd_level(), din_fm, N, set, dout, w, B, T, NI, O)) return;
    /* other levels and routes (sgemm): dd_dense_backward's din in (B, T, in_dim), moved over */
    float *own = tmp ? NULL : dd_calloc(N * NI, sizeof(float));
    if (!tmp) tmp = own;
    if (tmp) {
        if (!set)
            for (size_t b = 0; b < B; b++)
                for (size_t t = 0; t < T; t++)
                    for (size_t i = 0; i < NI; i++) tmp[(b * T + t) * NI + i] = din_fm[i * N + t * B + b];
        else memset(tmp, 0, N * NI * sizeof(float));
        dd_dense_backward(tmp, NULL, NULL, dout, in, w, N, in_dim, out_dim);
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < T; t++)
                for (size_t i = 0; i < NI; i++) din_fm[i * N + t * B + b] = tmp[(b * T + t) * NI + i];
        dd_free(own);
        return;
    }
    /* out of memory: the sums in place, in order (as the small kernels form them) */
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < NI; i++) {
                float *d = &din_fm[i * N + t * B + b];
                float v = set ? 0.0f : *d;
                for (size_t o = 0; o < O; o++) v = fmaf(dout[(b * T + t) * O + o], w[o * NI + i], v);
                *d = v;
            }
}
