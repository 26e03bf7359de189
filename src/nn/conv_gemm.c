/* Causal conv1d with groups == 1 and kernel K > 1 as OpenBLAS matrix products (float32;
 * simd.h, dd_nn_conv_gemm_forward / _backward). With s_k = (K-1-k) d, the im2col matrix
 *   X (B T, Ci K),  X[r, ci K + k] = in[r - s_k, ci]   (0 when t < s_k: zero history)
 * makes the convolution one product with the weights as stored, W = w as (Co, Ci K):
 *   forward   out = b + X W^T
 *   backward  dW += dout^T X;  dX = dout W, scattered back (col2im:
 *             din[r - s_k, ci] += dX[r, ci K + k]);  db += column sums of dout
 * X (and dX) are built a block of rows at a time (about DD_NN_IM2COL_FLOATS floats, at
 * least 64 rows), so the extra memory stays bounded whatever B T is. The blocks live in the
 * caller's workspace (dd_nn_conv_gemm_ws_floats, e.g. a model stage's scratch) or, without
 * one, in a buffer allocated per call: at resnet 512's shapes a 4 MB calloc per call whose
 * pages glibc hands back to the kernel on free, so every call paid its page faults and
 * zeroing again (38 % of resnet 512 x 8's training time on the Zen 5 machine, perf
 * 2026-12-02). Both give the same floats: every float of X and dX is written before it
 * is read. */
#include <stdint.h>
#include <string.h>

#include "distdpd/core.h"
#include "simd.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"

#define DD_NN_IM2COL_FLOATS ((size_t)1 << 20) /* 4 MB per buffer */
#define DD_NN_IM2COL_MIN_ROWS 64

/* Rows per block for an (BT, CK) im2col matrix. */
static size_t block_rows(size_t BT, size_t CK) {
    size_t nr = DD_NN_IM2COL_FLOATS / CK;
    if (nr < DD_NN_IM2COL_MIN_ROWS) nr = DD_NN_IM2COL_MIN_ROWS;
    return nr < BT ? nr : BT;
}

/* X rows [r0, r0 + nr): X[r - r0, ci K + k] = in[r - s_k, ci] or 0. */
static void im2col(float *X, const float *in, size_t r0, size_t nr, size_t T, size_t Ci, size_t K, size_t d) {
    const size_t CK = Ci * K;
    for (size_t q = 0; q < nr; q++) {
        const size_t r = r0 + q, t = r % T;
        float *row = X + q * CK;
        for (size_t k = 0; k < K; k++) {
            const size_t s = (K - 1 - k) * d;
            if (s > t) {
                for (size_t ci = 0; ci < Ci; ci++) row[ci * K + k] = 0.0f;
            } else {
                const float *src = in + (r - s) * Ci;
                for (size_t ci = 0; ci < Ci; ci++) row[ci * K + k] = src[ci];
            }
        }
    }
}

/* din[r - s_k, ci] += dX[r - r0, ci K + k] for rows [r0, r0 + nr) with t >= s_k. */
static void col2im_add(float *din, const float *dX, size_t r0, size_t nr, size_t T, size_t Ci, size_t K,
                       size_t d) {
    const size_t CK = Ci * K;
    for (size_t q = 0; q < nr; q++) {
        const size_t r = r0 + q, t = r % T;
        const float *row = dX + q * CK;
        for (size_t k = 0; k < K; k++) {
            const size_t s = (K - 1 - k) * d;
            if (s > t) continue;
            float *dst = din + (r - s) * Ci;
            for (size_t ci = 0; ci < Ci; ci++) dst[ci] += row[ci * K + k];
        }
    }
}

size_t dd_nn_conv_gemm_ws_floats(size_t B, size_t T, size_t Ci, size_t K, int backward) {
    const size_t BT = B * T, CK = Ci * K;
    return BT == 0 || CK == 0 ? 0 : (backward ? 2 : 1) * block_rows(BT, CK) * CK;
}

int dd_nn_conv_gemm_forward(float *out, const float *in, const float *w, const float *b, size_t B, size_t T,
                            size_t Ci, size_t Co, size_t K, size_t d, float *ws) {
    const size_t BT = B * T, CK = Ci * K;
    if (BT == 0 || Co == 0) return 1;
    const size_t nr = block_rows(BT, CK);
    float *X = ws ? ws : dd_calloc(nr * CK, sizeof(float));
    if (!X) return 0;
    for (size_t r0 = 0; r0 < BT; r0 += nr) {
        const size_t n = BT - r0 < nr ? BT - r0 : nr;
        float *o = out + r0 * Co;
        if (b)
            for (size_t q = 0; q < n; q++) memcpy(o + q * Co, b, Co * sizeof(float));
        im2col(X, in, r0, n, T, Ci, K, d);
        dd_nn_gemm(0, 1, n, Co, CK, 1.0f, X, CK, w, CK, b ? 1.0f : 0.0f, o, Co);
    }
    if (!ws) dd_free(X);
    return 1;
}

int dd_nn_conv_gemm_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                             size_t B, size_t T, size_t Ci, size_t Co, size_t K, size_t d, float *ws) {
    const size_t BT = B * T, CK = Ci * K;
    if (BT == 0 || Co == 0) return 1;
    if (!din && !dw) {
        if (db) dd_nn_colsum_add(db, dout, BT, Co, Co);
        return 1;
    }
    const size_t nr = block_rows(BT, CK);
    float *X = !dw ? NULL : ws ? ws : dd_calloc(nr * CK, sizeof(float));
    float *dX = !din ? NULL : ws ? ws + nr * CK : dd_calloc(nr * CK, sizeof(float));
    if ((dw && !X) || (din && !dX)) {
        dd_free(X);
        dd_free(dX);
        return 0;
    }
    for (size_t r0 = 0; r0 < BT; r0 += nr) {
        const size_t n = BT - r0 < nr ? BT - r0 : nr;
        const float *g = dout + r0 * Co;
        if (dw) {
            im2col(X, in, r0, n, T, Ci, K, d);
            dd_nn_gemm(1, 0, Co, CK, n, 1.0f, g, Co, X, CK, 1.0f, dw, CK);
        }
        if (din) {
            dd_nn_gemm(0, 0, n, CK, Co, 1.0f, g, Co, w, CK, 0.0f, dX, CK);
            col2im_add(din, dX, r0, n, T, Ci, K, d);
        }
    }
    if (db) dd_nn_colsum_add(db, dout, BT, Co, Co);
    if (!ws) {
        dd_free(X);
        dd_free(dX);
    }
    return 1;
}
