/* Dense layer kernels, written once for dd_real (see nn_real.h); included by dense.c
 * for float and double. With SIMD (simd.h), float32 layers with at most
 * DD_NN_DENSE_SMALL_MAX outputs (the models' I/Q output heads) use dense_fast_impl.h, and
 * other small ones (in, out <= 6 vectors) the K = 1 case of the conv kernels; the rest
 * OpenBLAS. */

void RFN(dd_dense_forward)(dd_real *out, const dd_real *in, const dd_real *w, const dd_real *b,
                           size_t N, int in_dim, int out_dim) {
    size_t O = (size_t)out_dim, NI = (size_t)in_dim;
#if !DD_NN_DOUBLE
    if (dd_nn_dense_small_fwd(dd_nn_simd_level(), out, in, w, b, N, NI, O)) return;
    if (dd_nn_conv_fast_forward(out, in, w, b, 1, N, NI, O, 1, 1, 1)) return; /* small I, O */
#endif
    if (b) /* every row starts as the bias (row copies: the scalar loop was 3 % of a tcn step at AVX2) */
        for (size_t n = 0; n < N; n++) memcpy(out + n * O, b, O * sizeof(dd_real));
    /* out (N, O) (+)= in (N, I) . W^T (I, O) */
    RFN(dd_nn_gemm)(0, 1, N, O, NI, 1, in, NI, w, NI, b ? 1 : 0, out, O);
}

void RFN(dd_dense_backward)(dd_real *din, dd_real *dw, dd_real *db, const dd_real *dout,
                            const dd_real *in, const dd_real *w, size_t N, int in_dim, int out_dim) {
    size_t O = (size_t)out_dim, NI = (size_t)in_dim;
#if !DD_NN_DOUBLE
    if (dd_nn_dense_small_bwd(dd_nn_simd_level(), din, dw, db, dout, in, w, N, NI, O)) return;
    if (dd_nn_conv_fast_backward(din, dw, db, dout, in, w, 1, N, NI, O, 1, 1, 1)) return;
#endif
    /* din (N, I) += dout (N, O) . W (O, I) */
    if (din) RFN(dd_nn_gemm)(0, 0, N, NI, O, 1, dout, O, w, NI, 1, din, NI);
    /* dW (O, I) += dout^T (O, N) . in (N, I) */
    if (dw) RFN(dd_nn_gemm)(1, 0, O, NI, N, 1, dout, O, in, NI, 1, dw, NI);
    if (db) RFN(dd_nn_colsum_add)(db, dout, N, O, O);
}
