/* Causal 1-D convolution (dilated, grouped, depthwise, pointwise) over (B, T, C) tensors
 * with PyTorch Conv1d weight layout: forward, backward, configuration check, parameter
 * registration and PyTorch default initialisation. Kernels in conv1d_impl.h. */
#include "distdpd/nn.h"

#include <string.h>

#include "nn_private.h"
#include "simd.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"
#include "conv1d_impl.h"
#undef DD_NN_DOUBLE
#define DD_NN_DOUBLE 1
#include "nn_real.h"
#include "conv1d_impl.h"

dd_status dd_conv1d_check(int c_in, int c_out, int kernel, int dilation, int groups) {
    if (c_in < 1) return dd_error(DD_ERR_ARG, "conv1d: c_in = %d must be >= 1", c_in);
    if (c_out < 1) return dd_error(DD_ERR_ARG, "conv1d: c_out = %d must be >= 1", c_out);
    if (kernel < 1) return dd_error(DD_ERR_ARG, "conv1d: kernel = %d must be >= 1", kernel);
    if (dilation < 1) return dd_error(DD_ERR_ARG, "conv1d: dilation = %d must be >= 1", dilation);
    if (groups < 1 || c_in % groups != 0 || c_out % groups != 0)
        return dd_error(DD_ERR_ARG, "conv1d: groups = %d must be >= 1 and divide c_in = %d and c_out = %d",
                        groups, c_in, c_out);
    return DD_OK;
}

dd_status dd_conv1d_layer_add(dd_param_table *t, const char *prefix, int c_in, int c_out,
                              int kernel, int dilation, int groups, int bias, dd_conv1d_layer *l) {
    char name[DD_PARAM_NAME_MAX];
    memset(l, 0, sizeof *l);
    dd_status s = dd_conv1d_check(c_in, c_out, kernel, dilation, groups);
    if (s != DD_OK) return dd_error_prefix(s, "layer '%s': ", prefix ? prefix : "");
    size_t shape[3] = {(size_t)c_out, (size_t)(c_in / groups), (size_t)kernel};
    DD_TRY(dd_nn_param_name(name, prefix, "weight"));
    DD_TRY(dd_param_table_add(t, name, 3, shape, &l->w));
    if (bias) {
        DD_TRY(dd_nn_param_name(name, prefix, "bias"));
        DD_TRY(dd_param_table_add(t, name, 1, shape, &l->b));
    }
    l->c_in = c_in;
    l->c_out = c_out;
    l->kernel = kernel;
    l->dilation = dilation;
    l->groups = groups;
    l->bias = bias ? 1 : 0;
    return DD_OK;
}

void dd_conv1d_layer_init(const dd_conv1d_layer *l, float *params, dd_rng *rng) {
    size_t fan_in = (size_t)(l->c_in / l->groups) * (size_t)l->kernel;
    double k = dd_param_bound(fan_in);
    dd_param_uniform(params + l->w, (size_t)l->c_out * fan_in, k, rng);
    if (l->bias) dd_param_uniform(params + l->b, (size_t)l->c_out, k, rng);
}

/* Layers past the SIMD kernels' reach (6 vectors of 16 floats) always take the im2col
 * products (conv_gemm.c); only they get scratch. */
#define CONV_WS_MIN_CHANNELS 97

static int conv_ws_takes(int c_in, int c_out, int kernel, int groups) {
    return groups == 1 && kernel > 1 && c_in >= CONV_WS_MIN_CHANNELS && c_out >= CONV_WS_MIN_CHANNELS;
}

size_t dd_conv1d_scratch_floats(int B, int T, int c_in, int c_out, int kernel, int groups, int backward) {
    if (B < 1 || T < 1 || !conv_ws_takes(c_in, c_out, kernel, groups)) return 0;
    return dd_nn_conv_gemm_ws_floats((size_t)B, (size_t)T, (size_t)c_in, (size_t)kernel, backward);
}

void dd_conv1d_forward_ws(float *out, const float *in, const float *w, const float *b, int B, int T, int c_in,
                          int c_out, int kernel, int dilation, int groups, float *scratch) {
    if (scratch && conv_ws_takes(c_in, c_out, kernel, groups)) {
        /* dd_conv1d_forward's order: a SIMD kernel first (none takes these shapes today) */
        if (dd_nn_conv_fast_forward(out, in, w, b, (size_t)B, (size_t)T, (size_t)c_in, (size_t)c_out,
                                    (size_t)kernel, (size_t)dilation, 1) ||
            dd_nn_conv_gemm_forward(out, in, w, b, (size_t)B, (size_t)T, (size_t)c_in, (size_t)c_out,
                                    (size_t)kernel, (size_t)dilation, scratch))
            return;
    }
    dd_conv1d_forward(out, in, w, b, B, T, c_in, c_out, kernel, dilation, groups);
}

void dd_conv1d_backward_ws(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                           int B, int T, int c_in, int c_out, int kernel, int dilation, int groups, float *scratch) {
    if (scratch && conv_ws_takes(c_in, c_out, kernel, groups)) {
        if (((din || dw || db) &&
             dd_nn_conv_fast_backward(din, dw, db, dout, in, w, (size_t)B, (size_t)T, (size_t)c_in,
                                      (size_t)c_out, (size_t)kernel, (size_t)dilation, 1)) ||
            dd_nn_conv_gemm_backward(din, dw, db, dout, in, w, (size_t)B, (size_t)T, (size_t)c_in, (size_t)c_out,
                                     (size_t)kernel, (size_t)dilation, scratch))
            return;
    }
    dd_conv1d_backward(din, dw, db, dout, in, w, B, T, c_in, c_out, kernel, dilation, groups);
}

void dd_conv1d_dw_hswish_forward(float *pre, float *out, const float *in, const float *w, int B, int T, int C,
                                 int kernel, int dilation, int resid) {
    const size_t n = (size_t)B * (size_t)T * (size_t)C;
    if (dd_nn_conv_dw_hs_forward(pre, out, in, w, (size_t)B, (size_t)T, (size_t)C, (size_t)kernel,
                                 (size_t)dilation, resid))
        return;
    float *a = pre ? pre : out;
    dd_conv1d_forward(a, in, w, NULL, B, T, C, C, kernel, dilation, C);
    dd_act_forward(DD_ACT_HARDSWISH, out, a, n);
    if (resid) dd_add_forward(out, out, in, n);
}

int dd_conv1d_dw_hswish_keeps_pre(void) { return dd_nn_simd_level() != DD_SIMD_AVX512; }

void dd_conv1d_dw_hsin_forward(float *z, float *out, const float *ain, const float *w, int B, int T, int C,
                               int kernel, int dilation) {
    dd_act_forward(DD_ACT_HARDSWISH, z, ain, (size_t)B * (size_t)T * (size_t)C);
    dd_conv1d_forward(out, z, w, NULL, B, T, C, C, kernel, dilation, C);
}

void dd_conv1d_dw_hsin_backward(float *din, float *dw, const float *dout, const float *ain, const float *z,
                                const float *w, int B, int T, int C, int kernel, int dilation, int flags,
                                float *scratch) {
    const size_t n = (size_t)B * (size_t)T * (size_t)C;
    const int set = (flags & DD_DW_HS_SET_DIN) != 0;
    if (dd_nn_conv_dw_hsin_backward(din, dw, dout, ain, z, w, (size_t)B, (size_t)T, (size_t)C, (size_t)kernel,
                                    (size_t)dilation, set))
        return;
    if (din) memset(scratch, 0, n * sizeof(float));
    dd_conv1d_backward(din ? scratch : NULL, dw, NULL, dout, z, w, B, T, C, C, kernel, dilation, C);
    if (!din) return;
    if (set) memset(din, 0, n * sizeof(float));
    dd_act_backward(DD_ACT_HARDSWISH, din, scratch, ain, NULL, n);
}

void dd_conv1d_dw_hswish_backward(float *din, float *dw, const float *dout, const float *pre, const float *in,
                                  const float *w, int B, int T, int C, int kernel, int dilation, int flags,
                                  float *scratch) {
    const size_t n = (size_t)B * (size_t)T * (size_t)C;
    const int resid = flags & DD_DW_HS_RESID;
    if (dd_nn_conv_dw_hs_backward(din, dw, scratch, dout, pre, in, w, (size_t)B, (size_t)T, (size_t)C,
                                  (size_t)kernel, (size_t)dilation, flags & (DD_DW_HS_RESID | DD_DW_HS_SET_DIN)))
        return;
    if (din && (flags & DD_DW_HS_SET_DIN)) memset(din, 0, n * sizeof(float));
    if (!pre) {
        dd_conv1d_forward(scratch + n, in, w, NULL, B, T, C, C, kernel, dilation, C);
        pre = scratch + n;
    }
    if (resid && din) dd_add_backward(din, NULL, dout, n);
    memset(scratch, 0, n * sizeof(float));
    dd_act_backward(DD_ACT_HARDSWISH, scratch, dout, pre, NULL, n);
    dd_conv1d_backward(din, dw, NULL, scratch, in, w, B, T, C, C, kernel, dilation, C);
}

void dd_conv1d_hswish_forward(float *pre, float *out, const float *in, const float *w, const float *b, int B, int T,
                              int c_in, int c_out, int kernel, int dilation, int groups) {
    if (dd_nn_conv_hs_fast_forward(pre, out, in, w, b, (size_t)B, (size_t)T, (size_t)c_in, (size_t)c_out,
                                   (size_t)kernel, (size_t)dilation, (size_t)groups))
        return;
    dd_conv1d_forward(pre, in, w, b, B, T, c_in, c_out, kernel, dilation, groups);
    dd_act_forward(DD_ACT_HARDSWISH, out, pre, (size_t)B * (size_t)T * (size_t)c_out);
}

void dd_conv1d_hswish_backward(float *din, float *dw, float *db, const float *dout, const float *pre, const float *in,
                               const float *w, int B, int T, int c_in, int c_out, int kernel, int dilation,
                               int groups, float *scratch) {
    const size_t n = (size_t)B * (size_t)T * (size_t)c_out;
    if (!din && kernel == 1 && groups == 1 &&
        dd_nn_conv1x1_hs_fast_backward(dw, db, dout, pre, in, (size_t)B * (size_t)T, (size_t)c_in, (size_t)c_out))
        return;
    memset(scratch, 0, n * sizeof(float));
    dd_act_backward(DD_ACT_HARDSWISH, scratch, dout, pre, NULL, n);
    dd_conv1d_backward(din, dw, db, scratch, in, w, B, T, c_in, c_out, kernel, dilation, groups);
}
