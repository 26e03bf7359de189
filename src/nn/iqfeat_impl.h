/* I/Q feature extraction kernels, written once for dd_real (see nn_real.h); included by
 * iqfeat.c for float and double. Rows: (I, Q) -> [I, Q, r, r^3, Q/r, I/r]. */

void RFN(dd_iqfeat_forward)(dd_real *out, const dd_real *iq, size_t N) {
    for (size_t n = 0; n < N; n++) {
        const dd_real i = iq[2 * n], q = iq[2 * n + 1];
        const dd_real r = R_SQRT(i * i + q * q);
        dd_real *o = out + n * DD_IQFEAT_DIM;
        o[0] = i;
        o[1] = q;
        o[2] = r;
        o[3] = r * r * r;
        if (r > 0) {
            o[4] = q / r;
            o[5] = i / r;
        } else { /* phase of 0 is atan2(0, 0) = 0 */
            o[4] = 0;
            o[5] = 1;
        }
    }
}

void RFN(dd_iqfeat_backward)(dd_real *diq, const dd_real *dout, const dd_real *iq, size_t N) {
    if (!diq) return;
    for (size_t n = 0; n < N; n++) {
        const dd_real i = iq[2 * n], q = iq[2 * n + 1];
        const dd_real *g = dout + n * DD_IQFEAT_DIM;
        dd_real di = g[0], dq = g[1];
        const dd_real r2 = i * i + q * q;
        const dd_real r = R_SQRT(r2);
        if (r > 0) {
            /* dr = (I, Q)/r; d r^3 = 3 r (I, Q); d(Q/r) = (-IQ, I^2)/r^3; d(I/r) = (Q^2, -IQ)/r^3 */
            const dd_real inv_r = 1 / r, inv_r3 = inv_r / r2;
            const dd_real gr = g[2] * inv_r + g[3] * 3 * r;
            di += gr * i + (g[5] * q * q - g[4] * i * q) * inv_r3;
            dq += gr * q + (g[4] * i * i - g[5] * i * q) * inv_r3;
        }
        diq[2 * n] += di;
        diq[2 * n + 1] += dq;
    }
}
