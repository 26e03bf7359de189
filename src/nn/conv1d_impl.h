/* Causal dilated / grouped conv1d kernels on (B, T, C) tensors, written once for dd_real
 * (see nn_real.h); included by conv1d.c for float and double.
 * Tap k of the kernel reads input step t - (K-1-k)*dilation (zero before the start).
 * groups == 1 with K == 1 is a dense layer over all B*T rows and goes through GEMM.
 * Depthwise (one input and one output channel per group) with C*K <= DD_CONV_DW_MAX
 * transposes the weights to (K, C) on the stack and runs vectorised channel loops. */
#ifndef DD_CONV_DW_MAX
#define DD_CONV_DW_MAX 1024 /* floats or doubles: at most 16 KB of stack */
#endif

/* Float32 with SIMD (simd.h, conv_fast_impl.h): depthwise convolutions and small full ones
 * (groups 1) run in vectorised kernels over whole rows (dd_nn_conv_fast_forward /
 * _backward in simd_kernels.c); other full ones with K > 1 (any level) as im2col blocks
 * times the weights through OpenBLAS (conv_gemm.c). The plain loops below are the
 * float64 path (the reference) and the fallback. */

/* Depthwise forward: out[bt, c] = b[c] + sum_k w[c, k] in[bt - s_k, c]. */
static void RFN(dd_conv1d_dw_forward)(dd_real *out, const dd_real *in, const dd_real *w,
                                      const dd_real *b, size_t BT, size_t T, size_t C, size_t K,
                                      size_t d) {
    dd_real wt[DD_CONV_DW_MAX];
    for (size_t c = 0; c < C; c++)
        for (size_t k = 0; k < K; k++) wt[k * C + c] = w[c * K + k];
    for (size_t bt = 0; bt < BT; bt++) {
        const size_t t = bt % T;
        dd_real *o = out + bt * C;
        for (size_t c = 0; c < C; c++) o[c] = b ? b[c] : 0;
        for (size_t k = 0; k < K; k++) {
            const size_t s = (K - 1 - k) * d;
            if (s <= t) RFN(dd_nn_vmul_add)(o, wt + k * C, in + (bt - s) * C, C);
        }
    }
}

/* Depthwise backward: din[bt - s_k, c] += w[c, k] dout[bt, c]; dw[c, k] += in[bt - s_k, c]
 * dout[bt, c] (accumulated transposed on the stack, then added). */
static void RFN(dd_conv1d_dw_backward)(dd_real *din, dd_real *dw, const dd_real *dout,
                                       const dd_real *in, const dd_real *w, size_t BT, size_t T,
                                       size_t C, size_t K, size_t d) {
    dd_real wt[DD_CONV_DW_MAX], dwt[DD_CONV_DW_MAX];
    for (size_t c = 0; c < C; c++)
        for (size_t k = 0; k < K; k++) {
            wt[k * C + c] = w[c * K + k];
            dwt[k * C + c] = 0;
        }
    for (size_t bt = 0; bt < BT; bt++) {
        const size_t t = bt % T;
        const dd_real *go = dout + bt * C;
        for (size_t k = 0; k < K; k++) {
            const size_t s = (K - 1 - k) * d;
            if (s > t) continue;
            if (din) RFN(dd_nn_vmul_add)(din + (bt - s) * C, wt + k * C, go, C);
            if (dw) RFN(dd_nn_vmul_add)(dwt + k * C, in + (bt - s) * C, go, C);
        }
    }
    if (dw)
        for (size_t c = 0; c < C; c++)
            for (size_t k = 0; k < K; k++) dw[c * K + k] += dwt[k * C + c];
}

void RFN(dd_conv1d_forward)(dd_real *out, const dd_real *in, const dd_real *w, const dd_real *b,
                            int B_, int T_, int c_in, int c_out, int K_, int dilation, int groups) {
    const size_t T = (size_t)T_, Ci = (size_t)c_in, Co = (size_t)c_out, K = (size_t)K_;
    const size_t G = (size_t)groups, cig = Ci / G, cog = Co / G, d = (size_t)dilation;
    const size_t BT = (size_t)B_ * T;
    if (K == 1 && G == 1) {
        RFN(dd_dense_forward)(out, in, w, b, BT, c_in, c_out);
        return;
    }
#if !DD_NN_DOUBLE
    if (dd_nn_conv_fast_forward(out, in, w, b, (size_t)B_, T, Ci, Co, K, d, G)) return;
    if (G == 1 && dd_nn_conv_gemm_forward(out, in, w, b, (size_t)B_, T, Ci, Co, K, d, NULL)) return;
#endif
    if (cig == 1 && cog == 1 && Ci * K <= DD_CONV_DW_MAX) {
        RFN(dd_conv1d_dw_forward)(out, in, w, b, BT, T, Ci, K, d);
        return;
    }
    for (size_t bt = 0; bt < BT; bt++) {
        const size_t t = bt % T;
        dd_real *o = out + bt * Co;
        for (size_t co = 0; co < Co; co++) o[co] = b ? b[co] : 0;
        for (size_t k = 0; k < K; k++) {
            const size_t s = (K - 1 - k) * d;
            if (s > t) continue;
            const dd_real *src = in + (bt - s) * Ci;
            for (size_t co = 0; co < Co; co++) {
                const dd_real *wr = w + co * cig * K + k; /* w[co, ci_l, k], stride K */
                const dd_real *sg = src + (co / cog) * cig;
                dd_real acc = 0;
                for (size_t ci = 0; ci < cig; ci++) acc += wr[ci * K] * sg[ci];
                o[co] += acc;
            }
        }
    }
}

void RFN(dd_conv1d_backward)(dd_real *din, dd_real *dw, dd_real *db, const dd_real *dout,
                             const dd_real *in, const dd_real *w, int B_, int T_, int c_in,
                             int c_out, int K_, int dilation, int groups) {
    const size_t T = (size_t)T_, Ci = (size_t)c_in, Co = (size_t)c_out, K = (size_t)K_;
    const size_t G = (size_t)groups, cig = Ci / G, cog = Co / G, d = (size_t)dilation;
    const size_t BT = (size_t)B_ * T;
    if (K == 1 && G == 1) {
#if !DD_NN_DOUBLE
        /* without din, the 1x1 kernel that keeps dW's sums in registers (its floats are
         * dd_dense_backward's) */
        if (!din && dd_nn_conv1x1_hs_fast_backward(dw, db, dout, NULL, in, BT, Ci, Co)) return;
#endif
        RFN(dd_dense_backward)(din, dw, db, dout, in, w, BT, c_in, c_out);
        return;
    }
#if !DD_NN_DOUBLE
    if ((din || dw || db) && dd_nn_conv_fast_backward(din, dw, db, dout, in, w, (size_t)B_, T, Ci, Co, K, d, G))
        return;
    if (G == 1 && dd_nn_conv_gemm_backward(din, dw, db, dout, in, w, (size_t)B_, T, Ci, Co, K, d, NULL)) return;
#endif
    if (db) RFN(dd_nn_colsum_add)(db, dout, BT, Co, Co);
    if (!din && !dw) return;
    if (cig == 1 && cog == 1 && Ci * K <= DD_CONV_DW_MAX) {
        RFN(dd_conv1d_dw_backward)(din, dw, dout, in, w, BT, T, Ci, K, d);
        return;
    }
    for (size_t bt = 0; bt < BT; bt++) {
        const size_t t = bt % T;
        const dd_real *go = dout + bt * Co;
        for (size_t k = 0; k < K; k++) {
            const size_t s = (K - 1 - k) * d;
            if (s > t) continue;
            const size_t src_row = (bt - s) * Ci;
            for (size_t co = 0; co < Co; co++) {
                const dd_real gco = go[co];
                const size_t c0 = (co / cog) * cig;
                if (din) {
                    const dd_real *wr = w + co * cig * K + k;
                    dd_real *di = din + src_row + c0;
                    for (size_t ci = 0; ci < cig; ci++) di[ci] += wr[ci * K] * gco;
                }
                if (dw) {
                    dd_real *dwr = dw + co * cig * K + k;
                    const dd_real *si = in + src_row + c0;
                    for (size_t ci = 0; ci < cig; ci++) dwr[ci * K] += si[ci] * gco;
                }
            }
        }
    }
}
