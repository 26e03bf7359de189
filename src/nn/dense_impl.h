/* Dense layer kernels, written once for dd_real (see nn_real.h); included by dense.c
 * for float and double. */

void RFN(dd_dense_forward)(dd_real *out, const dd_real *in, const dd_real *w, const dd_real *b,
                           size_t N, int in_dim, int out_dim) {
    size_t O = (size_t)out_dim, NI = (size_t)in_dim;
    if (b) {
        for (size_t n = 0; n < N; n++)
            for (size_t o = 0; o < O; o++) out[n * O + o] = b[o];
    }
    /* out (N, O) (+)= in (N, I) . W^T (I, O) */
    RFN(dd_nn_gemm)(0, 1, N, O, NI, 1, in, NI, w, NI, b ? 1 : 0, out, O);
}

void RFN(dd_dense_backward)(dd_real *din, dd_real *dw, dd_real *db, const dd_real *dout,
                            const dd_real *in, const dd_real *w, size_t N, int in_dim, int out_dim) {
    size_t O = (size_t)out_dim, NI = (size_t)in_dim;
    /* din (N, I) += dout (N, O) . W (O, I) */
    if (din) RFN(dd_nn_gemm)(0, 0, N, NI, O, 1, dout, O, w, NI, 1, din, NI);
    /* dW (O, I) += dout^T (O, N) . in (N, I) */
    if (dw) RFN(dd_nn_gemm)(1, 0, O, NI, N, 1, dout, O, in, NI, 1, dw, NI);
    if (db) RFN(dd_nn_colsum_add)(db, dout, N, O, O);
}
