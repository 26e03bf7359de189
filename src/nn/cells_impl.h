/* Elementwise array kernels of the recurrent cells and activations, written once for
 * dd_real (see nn_real.h); instantiated by cells.c for float and double.
 *
 * They live in their own translation unit on purpose: compiled standalone, with restrict
 * parameters and main loops over a multiple of 8 elements (plus a scalar tail), GCC
 * vectorises the float versions at -O2 (its "very cheap" cost model refuses loops that
 * need an epilogue or alias checks, and a clamp fused with a polynomial defeats its
 * if-conversion, so the float sigmoid/tanh clamp in one pass and evaluate in a second).
 * Inlined into the layers' loop nests they would not vectorise. */

#if DD_NN_DOUBLE
#define CELL_SIGMOID_INPLACE(y, m)                                        \
    do {                                                                  \
        for (size_t i = 0; i < (m); i++) (y)[i] = 1 / (1 + exp(-(y)[i])); \
    } while (0)
#define CELL_TANH_INPLACE(y, m)                                           \
    do {                                                                  \
        for (size_t i = 0; i < (m); i++) (y)[i] = tanh((y)[i]);           \
    } while (0)
#else
/* y[i] = sigmoid(y[i]) for i < m (m a multiple of 8) */
#define CELL_SIGMOID_INPLACE(y, m)                                             \
    do {                                                                       \
        for (size_t i = 0; i < (m); i++) {                                     \
            float v_ = -(y)[i];                                                \
            v_ = v_ > DD_NN_EXP_HI ? DD_NN_EXP_HI : v_; /* NaN passes */       \
            (y)[i] = v_ < DD_NN_EXP_LO ? DD_NN_EXP_LO : v_;                    \
        }                                                                      \
        for (size_t i = 0; i < (m); i++) (y)[i] = 1.0f / (1.0f + dd_nn_expf_core((y)[i])); \
    } while (0)
#define CELL_TANH_INPLACE(y, m)                                                \
    do {                                                                       \
        for (size_t i = 0; i < (m); i++) {                                     \
            float v_ = (y)[i];                                                 \
            v_ = v_ > DD_NN_TANH_CLAMP ? DD_NN_TANH_CLAMP : v_;                \
            (y)[i] = v_ < -DD_NN_TANH_CLAMP ? -DD_NN_TANH_CLAMP : v_;          \
        }                                                                      \
        for (size_t i = 0; i < (m); i++) (y)[i] = dd_nn_tanhf_core((y)[i]);    \
    } while (0)
#endif

void RFN(dd_nn_vsigmoid)(dd_real *restrict y, size_t n) {
    const size_t m = n & ~(size_t)7;
    CELL_SIGMOID_INPLACE(y, m);
    for (size_t i = m; i < n; i++) y[i] = R_SIGMOID(y[i]);
}

void RFN(dd_nn_vtanh)(dd_real *restrict y, size_t n) {
    const size_t m = n & ~(size_t)7;
    CELL_TANH_INPLACE(y, m);
    for (size_t i = m; i < n; i++) y[i] = R_TANH(y[i]);
}

void RFN(dd_nn_add_sigmoid)(dd_real *restrict y, const dd_real *restrict a, size_t n) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < m; i++) y[i] += a[i];
    CELL_SIGMOID_INPLACE(y, m);
    for (size_t i = m; i < n; i++) y[i] = R_SIGMOID(y[i] + a[i]);
}

void RFN(dd_nn_gru_n)(dd_real *restrict gn, dd_real *restrict ghn, const dd_real *restrict r,
                      const dd_real *restrict s, size_t n) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < m; i++) {
        ghn[i] = s[i];
        gn[i] += r[i] * s[i];
    }
    CELL_TANH_INPLACE(gn, m);
    for (size_t i = m; i < n; i++) {
        ghn[i] = s[i];
        gn[i] = R_TANH(gn[i] + r[i] * s[i]);
    }
}

void RFN(dd_nn_gru_h)(dd_real *restrict h, const dd_real *restrict z, const dd_real *restrict nv,
                      const dd_real *restrict hp, size_t n) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < m; i++) h[i] = nv[i] + z[i] * (hp[i] - nv[i]);
    for (size_t i = m; i < n; i++) h[i] = nv[i] + z[i] * (hp[i] - nv[i]);
}

#define GRU_BWD_BODY                                           \
    {                                                          \
        dd_real dd = d[i];                                     \
        dd_real an = dd * (1 - z[i]) * (1 - nv[i] * nv[i]);    \
        dar[i] = an * hn[i] * r[i] * (1 - r[i]);               \
        daz[i] = dd * (hp[i] - nv[i]) * z[i] * (1 - z[i]);     \
        danr[i] = an * r[i];                                   \
        dan[i] = an;                                           \
        d[i] = dd * z[i];                                      \
    }
void RFN(dd_nn_gru_bwd)(dd_real *restrict dar, dd_real *restrict daz, dd_real *restrict danr,
                        dd_real *restrict dan, dd_real *restrict d, const dd_real *restrict r,
                        const dd_real *restrict z, const dd_real *restrict nv,
                        const dd_real *restrict hn, const dd_real *restrict hp, size_t n) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < m; i++) GRU_BWD_BODY
    for (size_t i = m; i < n; i++) GRU_BWD_BODY
}
#undef GRU_BWD_BODY

void RFN(dd_nn_lstm_c)(dd_real *restrict c, dd_real *restrict tc, const dd_real *restrict ig,
                       const dd_real *restrict fg, const dd_real *restrict gg,
                       const dd_real *restrict cp, size_t n) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < m; i++) {
        c[i] = fg[i] * cp[i] + ig[i] * gg[i];
        tc[i] = c[i];
    }
    CELL_TANH_INPLACE(tc, m);
    for (size_t i = m; i < n; i++) {
        c[i] = fg[i] * cp[i] + ig[i] * gg[i];
        tc[i] = R_TANH(c[i]);
    }
}

void RFN(dd_nn_lstm_h)(dd_real *restrict h, const dd_real *restrict og, const dd_real *restrict tc,
                       size_t n) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < m; i++) h[i] = og[i] * tc[i];
    for (size_t i = m; i < n; i++) h[i] = og[i] * tc[i];
}

#define LSTM_BWD_BODY                                          \
    {                                                          \
        dd_real dd = dh[i];                                    \
        dd_real dct = dc[i] + dd * og[i] * (1 - tc[i] * tc[i]); \
        dai[i] = dct * gg[i] * ig[i] * (1 - ig[i]);            \
        daf[i] = dct * cp[i] * fg[i] * (1 - fg[i]);            \
        dag[i] = dct * ig[i] * (1 - gg[i] * gg[i]);            \
        dao[i] = dd * tc[i] * og[i] * (1 - og[i]);             \
        dc[i] = dct * fg[i];                                   \
    }
void RFN(dd_nn_lstm_bwd)(dd_real *restrict dai, dd_real *restrict daf, dd_real *restrict dag,
                         dd_real *restrict dao, const dd_real *restrict dh, dd_real *restrict dc,
                         const dd_real *restrict ig, const dd_real *restrict fg,
                         const dd_real *restrict gg, const dd_real *restrict og,
                         const dd_real *restrict tc, const dd_real *restrict cp, size_t n) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < m; i++) LSTM_BWD_BODY
    for (size_t i = m; i < n; i++) LSTM_BWD_BODY
}
#undef LSTM_BWD_BODY
void RFN(dd_nn_vmul_add)(dd_real *restrict y, const dd_real *restrict a, const dd_real *restrict x,
                         size_t n) {
    const size_t m = n & ~(size_t)7;
    for (size_t i = 0; i < m; i++) y[i] += a[i] * x[i];
    for (size_t i = m; i < n; i++) y[i] += a[i] * x[i];
}

#undef CELL_SIGMOID_INPLACE
#undef CELL_TANH_INPLACE
