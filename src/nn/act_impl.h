/* Elementwise kernels (activations, residual add, channel concat), written once for
 * dd_real (see nn_real.h); included by act.c for float and double. */

/* Hardswish's middle piece x (x + 3) / 6 and its slope x / 3 + 1/2: float32 multiplies by
 * the rounded reciprocals (as the SIMD kernels, simd.h), float64 divides. */
#undef HS_MID
#undef HS_SLOPE
#if DD_NN_DOUBLE
#define HS_MID(x) ((x) * ((x) + 3) / 6)
#define HS_SLOPE(x) ((x) / 3 + 0.5)
#else
#define HS_MID(x) dd_hs_mid_f(x)
#define HS_SLOPE(x) dd_hs_slope_f(x)
#endif

void RFN(dd_act_forward)(dd_act a, dd_real *out, const dd_real *in, size_t n) {
#if !DD_NN_DOUBLE
    if (dd_nn_act_fwd(dd_nn_simd_level(), (int)a, out, in, n)) return; /* ReLU, Hardswish */
#endif
    switch (a) {
    case DD_ACT_TANH:
        if (out != in) memmove(out, in, n * sizeof(dd_real));
        RFN(dd_nn_vtanh)(out, n);
        break;
    case DD_ACT_SIGMOID:
        if (out != in) memmove(out, in, n * sizeof(dd_real));
        RFN(dd_nn_vsigmoid)(out, n);
        break;
    case DD_ACT_RELU:
        for (size_t i = 0; i < n; i++) out[i] = in[i] > 0 ? in[i] : 0;
        break;
    case DD_ACT_HARDSWISH:
        for (size_t i = 0; i < n; i++) {
            dd_real x = in[i];
            out[i] = x < -3 ? 0 : x >= 3 ? x : HS_MID(x); /* -3: -0 */
        }
        break;
    case DD_ACT_IDENTITY:
    default:
        if (out != in) memmove(out, in, n * sizeof(dd_real));
        break;
    }
}

void RFN(dd_act_backward)(dd_act a, dd_real *din, const dd_real *dout, const dd_real *in,
                          const dd_real *out, size_t n) {
    if (!din) return;
#if !DD_NN_DOUBLE
    if (dd_nn_act_bwd(dd_nn_simd_level(), (int)a, din, dout, in, n)) return; /* ReLU, Hardswish */
#endif
    switch (a) {
    case DD_ACT_TANH:
        for (size_t i = 0; i < n; i++) din[i] += dout[i] * (1 - out[i] * out[i]);
        break;
    case DD_ACT_SIGMOID:
        for (size_t i = 0; i < n; i++) din[i] += dout[i] * out[i] * (1 - out[i]);
        break;
    case DD_ACT_RELU:
        for (size_t i = 0; i < n; i++)
            if (in[i] > 0) din[i] += dout[i];
        break;
    case DD_ACT_HARDSWISH:
        for (size_t i = 0; i < n; i++) {
            dd_real x = in[i];
            if (x > 3)
                din[i] += dout[i];
            else if (x >= -3)
                din[i] += dout[i] * HS_SLOPE(x);
        }
        break;
    case DD_ACT_IDENTITY:
    default:
        for (size_t i = 0; i < n; i++) din[i] += dout[i];
        break;
    }
}

void RFN(dd_add_forward)(dd_real *out, const dd_real *a, const dd_real *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void RFN(dd_add_backward)(dd_real *da, dd_real *db, const dd_real *dout, size_t n) {
    if (da)
        for (size_t i = 0; i < n; i++) da[i] += dout[i];
    if (db)
        for (size_t i = 0; i < n; i++) db[i] += dout[i];
}

void RFN(dd_concat_forward)(dd_real *out, const dd_real *a, const dd_real *b, size_t N, int ca,
                            int cb) {
    const size_t A = (size_t)ca, Bc = (size_t)cb, C = A + Bc;
    for (size_t r = 0; r < N; r++) {
        memcpy(out + r * C, a + r * A, A * sizeof(dd_real));
        memcpy(out + r * C + A, b + r * Bc, Bc * sizeof(dd_real));
    }
}

void RFN(dd_concat_backward)(dd_real *da, dd_real *db, const dd_real *dout, size_t N, int ca,
                             int cb) {
    const size_t A = (size_t)ca, Bc = (size_t)cb, C = A + Bc;
    for (size_t r = 0; r < N; r++) {
        if (da)
            for (size_t j = 0; j < A; j++) da[r * A + j] += dout[r * C + j];
        if (db)
            for (size_t j = 0; j < Bc; j++) db[r * Bc + j] += dout[r * C + A + j];
    }
}
