/* Causal conv1d kernels and elementwise activations, written once over the vector
 * vocabulary of simd_vec.h and included by simd_kernels.c once per instruction set.
 * Tensors are (B, T, C) with rows r = b*T + t; tap k reads row r - s_k, s_k = (K-1-k) d,
 * when t >= s_k (zero history before each frame). All loops run over rows in order
 * (sequential memory streams) with channel vectors inside.
 *
 * Depthwise (one channel per group), weights transposed to wt[k][c] on the stack:
 *   forward   out[r, c] = b[c] + sum_k wt[k][c] in[r - s_k, c]              (k ascending)
 *   backward  din[r, c] += sum_k wt[k][c] dout[r + s_k, c]  (t + s_k < T; gather form,
 *             each din row written once); dw[c, k] += sum_r in[r - s_k, c] dout[r, c]
 *             (accumulated in a stack array over all rows, in row order)
 * Full (groups == 1, C_out and C_in <= 6 VW; also the K = 1 dense layers), weights re-laid on the stack, zero-padded to whole
 * vectors:
 *   forward   wf[k][ci][:] = w[:, ci, k]: out[r, :] = b + sum_k sum_ci in[r - s_k, ci] wf[k][ci]
 *   backward  wb[k][co][:] = w[co, :, k]: din[r, :] += sum_k sum_co dout[r + s_k, co] wb[k][co];
 *             dw: for each tap, register accumulators acc[co][:] += dout[r, co] in[r - s_k, :]
 *             over all rows; db: vector sums of dout rows.
 * Activations (float32, same operations as act_impl.h, so bit-identical to the generic
 * path for ReLU and Hardswish): forward and backward of ReLU and Hardswish. */

/* ---------------------------------------------------------------- depthwise */

/* Threads (dd_nn_threads) for depthwise layers of at least DD_NN_CONV_DW_PAR floats per
 * tensor and 2 frames: forward and din by contiguous ranges of frames, dW by ranges of
 * channel vectors (each (k, c) sums every row in row order, as on one thread), so the
 * thread count does not change a number. */
#ifndef DD_NN_CONV_DW_PAR
#define DD_NN_CONV_DW_PAR 32768
#endif

/* Hardswish of a vector and p + g hardswish'(x): the operations of the scalar loops of
 * act_impl.h, so that every float comes out as there (the activations below and the fused
 * depthwise layers use them).
 *
 * Hardswish is 0 for x < -3, x for x >= 3 and h = x (x + 3) * (1/6) between (x = -3 gives
 * h, -0), computed as min(max(x, 0), h) without blends (vblendvps issues where multiplies
 * do, max and min beside them: bench/uarch_probe.c). The divisions by 6 and 3 of the
 * definition are multiplications by the rounded reciprocals (DD_HS_SIXTH, DD_HS_THIRD in
 * simd.h): a division issues once per 2.5 cycles on the AMD Zen 5 guest and tcn's
 * kernels run one per vector (docs/performance.md, "Hardswish by reciprocals"); h is then
 * within 1.8e-7 of the exact value (relative, measured over every float in (-3, 3) by
 * test_nn_vecmath), where the division gave 1.5e-7. min(max(x, 0), h) is exact because
 * the rounded h is never below x for x >= 3, never above it for 0 <= x < 3, not above zero
 * for -3 < x < 0 and not below zero for x <= -3; max and min return their second operand
 * when both are zeros or one is NaN, which gives -0 for x = -0 and x = -3, +0 for x < -3
 * and h's NaN for a NaN. test_nn_vecmath compares it with the scalar loop for all 2^32
 * inputs. */
static inline __attribute__((always_inline)) VF VSUF(hswish_v)(VF x) {
    const VF zero = VZERO(), three = VSET1(3.0f), sixth = VSET1(DD_HS_SIXTH);
    return VMIN(VMAX(x, zero), VMUL(VMUL(x, VADD(x, three)), sixth));
}

static inline __attribute__((always_inline)) VF VSUF(hswish_bwd_v)(VF p, VF x, VF g) {
    const VF three = VSET1(3.0f), mthree = VSET1(-3.0f), half = VSET1(0.5f), third = VSET1(DD_HS_THIRD);
    /* x > 3: p + g;  -3 <= x <= 3: p + g (x (1/3) + 1/2);  else p */
    const VF mid = VADD(p, VMUL(g, VADD(VMUL(x, third), half)));
#if defined(DD_VEC_AVX512)
    VF y = _mm512_mask_mov_ps(p, _mm512_cmp_ps_mask(x, mthree, _CMP_GE_OQ), mid);
    y = _mm512_mask_add_ps(y, _mm512_cmp_ps_mask(x, three, _CMP_GT_OQ), p, g);
#else
    VF y = _mm256_blendv_ps(p, mid, _mm256_cmp_ps(x, mthree, _CMP_GE_OQ));
    y = _mm256_blendv_ps(y, VADD(p, g), _mm256_cmp_ps(x, three, _CMP_GT_OQ));
#endif
    return y;
}

/* acc + sum over taps k = kmin..K-1 (ascending) of wt[k][c..] in[r - s_k][c..] on the
 * masked tail vector, one fused multiply-add each: the depthwise forward's sum. */
static inline __attribute__((always_inline)) VF VSUF(conv_dw_taps)(VF acc, const float *in, const float *wt,
                                                                   size_t r, size_t c, size_t kmin, size_t C,
                                                                   size_t K, size_t d, VM tail) {
    for (size_t k = kmin; k < K; k++) {
        const float *x = in + (r - (K - 1 - k) * d) * C + c, *w = wt + k * C + c;
        acc = VFMA(VLOADM(w, tail), VLOADM(x, tail), acc);
    }
    return acc;
}

/* Register blocks of the depthwise kernels: NB whole channel vectors (at most DW_NB) of
 * R rows (at most DW_R), so each weight vector loaded serves R rows. The remainder blocks
 * of a row (DW_BLOCKS) have up to 5 vectors: the arrays are sized for 6 x 4. */
#undef DW_NB
#undef DW_R
#undef DW_BLOCKS
#if defined(DD_VEC_AVX512)
#define DW_NB 6
#define DW_R 4
#else
#define DW_NB 4
#define DW_R 3
#endif

/* The whole vectors [v0, vf) of a row in blocks of DW_NB and a remainder block:
 * CALL(N) with c_ the block's first channel. */
#define DW_BLOCKS(v0, vf, CALL)                   \
    do {                                          \
        size_t v_ = (v0);                         \
        for (; v_ + DW_NB <= (vf); v_ += DW_NB) { \
            const size_t c_ = v_ * VW;            \
            CALL(DW_NB);                          \
        }                                         \
        const size_t c_ = v_ * VW;                \
        switch ((vf) - v_) {                      \
        case 1: CALL(1); break;                   \
        case 2: CALL(2); break;                   \
        case 3: CALL(3); break;                   \
        case 4: CALL(4); break;                   \
        case 5: CALL(5); break;                   \
        default: break;                           \
        }                                         \
    } while (0)

/* Rows r0 .. r0+R-1 (R, NB constants after inlining) of NB whole channel vectors from
 * channel c, taps kmin..K-1 (the same for the R rows): the sums in registers (tap k outer,
 * then the vectors, then the rows: each element's sum still starts from the bias and adds
 * the taps in ascending k), stored into pre (when not NULL; out when !HS); HS: their
 * Hardswish (+ in when resid) into out from the same registers. */
static inline __attribute__((always_inline)) void VSUF(conv_dw_fwd_blk)(
    const int NB, const int R, const int HS, float *pre, float *out, const float *in, const float *wt,
    const float *b, size_t r0, size_t c, size_t kmin, size_t C, size_t K, size_t d, int resid) {
    VF acc[4][6];
#pragma GCC unroll 6
    for (int j = 0; j < NB; j++) {
        const VF b0 = b ? VLOAD(b + c + (size_t)j * VW) : VZERO();
#pragma GCC unroll 4
        for (int q = 0; q < R; q++) acc[q][j] = b0;
    }
    for (size_t k = kmin; k < K; k++) {
        const float *x = in + (r0 - (K - 1 - k) * d) * C + c, *w = wt + k * C + c;
#pragma GCC unroll 6
        for (int j = 0; j < NB; j++) {
            const VF wv = VLOAD(w + j * VW);
#pragma GCC unroll 4
            for (int q = 0; q < R; q++) acc[q][j] = VFMA(wv, VLOAD(x + (size_t)q * C + (size_t)j * VW), acc[q][j]);
        }
    }
    float *a = HS ? pre : out;
#pragma GCC unroll 4
    for (int q = 0; q < R; q++) {
        const size_t o = (r0 + (size_t)q) * C + c;
        if (a)
#pragma GCC unroll 6
            for (int j = 0; j < NB; j++) VSTORE(a + o + (size_t)j * VW, acc[q][j]);
        if (!HS) continue;
#pragma GCC unroll 6
        for (int j = 0; j < NB; j++) {
            VF y = VSUF(hswish_v)(acc[q][j]);
            if (resid) y = VADD(y, VLOAD(in + o + (size_t)j * VW));
            VSTORE(out + o + (size_t)j * VW, y);
        }
    }
}

/* Rows r0 .. r0+R-1 (taps kmin..K-1) of the whole vectors and the masked tail vector. */
static inline __attribute__((always_inline)) void VSUF(conv_dw_fwd_rows)(
    const int R, const int HS, float *pre, float *out, const float *in, const float *wt, const float *b, size_t r0,
    size_t kmin, size_t nf, size_t rem, VM tail, size_t C, size_t K, size_t d, int resid) {
#define DW_FWD(N) VSUF(conv_dw_fwd_blk)(N, R, HS, pre, out, in, wt, b, r0, c_, kmin, C, K, d, resid)
    DW_BLOCKS(0, nf, DW_FWD);
#undef DW_FWD
    if (!rem) return;
    const size_t c = nf * VW;
    for (int q = 0; q < R; q++) {
        const size_t r = r0 + (size_t)q;
        VF acc = b ? VLOADM(b + c, tail) : VZERO();
        acc = VSUF(conv_dw_taps)(acc, in, wt, r, c, kmin, C, K, d, tail);
        if (!HS || pre) VSTOREM((HS ? pre : out) + r * C + c, acc, tail);
        if (!HS) continue;
        VF y = VSUF(hswish_v)(acc);
        if (resid) y = VADD(y, VLOADM(in + r * C + c, tail));
        VSTOREM(out + r * C + c, y, tail);
    }
}

/* Frames [b0, b1). HS = 0: out = the convolution. HS = 1 (the fused layer): pre = the
 * convolution (not stored when NULL), out = Hardswish(pre) (+ in when resid), in the same
 * pass over each row. The frame's first (K-1) d rows (taps before the frame) one at a
 * time, then blocks of DW_R rows, then the last rows one at a time. */
static inline __attribute__((always_inline)) void VSUF(conv_dw_fwd_body)(
    const int HS, float *pre, float *out, const float *in, const float *wt, const float *b, size_t b0,
    size_t b1, size_t T, size_t C, size_t K, size_t d, int resid) {
    const size_t nf = C / VW, rem = C % VW, span = (K - 1) * d;
    const VM tail = VMASK(rem ? (int)rem : VW);
    for (size_t bb = b0; bb < b1; bb++) {
        size_t t = 0;
        for (; t < T && t < span; t++) /* taps k >= K-1 - t/d are inside the frame */
            VSUF(conv_dw_fwd_rows)(1, HS, pre, out, in, wt, b, bb * T + t, K - 1 - t / d, nf, rem, tail, C, K, d,
                                   resid);
        for (; t + DW_R <= T; t += DW_R)
            VSUF(conv_dw_fwd_rows)(DW_R, HS, pre, out, in, wt, b, bb * T + t, 0, nf, rem, tail, C, K, d, resid);
        for (; t < T; t++)
            VSUF(conv_dw_fwd_rows)(1, HS, pre, out, in, wt, b, bb * T + t, 0, nf, rem, tail, C, K, d, resid);
    }
}

static void VSUF(conv_dw_fwd_frames)(float *pre, float *out, const float *in, const float *wt, const float *b,
                                     size_t b0, size_t b1, size_t T, size_t C, size_t K, size_t d, int act) {
    if (act) VSUF(conv_dw_fwd_body)(1, pre, out, in, wt, b, b0, b1, T, C, K, d, act == 2);
    else VSUF(conv_dw_fwd_body)(0, NULL, out, in, wt, b, b0, b1, T, C, K, d, 0);
}

/* A thread's share: a contiguous range of frames. */
static void VSUF(conv_dw_fwd_team)(float *pre, float *out, const float *in, const float *wt, const float *b,
                                   size_t B, size_t T, size_t C, size_t K, size_t d, int act, int tid, int nt) {
    size_t f0, f1;
    dd_team_share(B, tid, nt, &f0, &f1);
    VSUF(conv_dw_fwd_frames)(pre, out, in, wt, b, f0, f1, T, C, K, d, act);
}

/* act 0: the convolution into out (pre unused); 1: fused with Hardswish (pre = the
 * convolution, out = Hardswish(pre)); 2: as 1, plus in (a residual layer). */
void VSUF(dd_nn_conv_dw_fwd_fast)(float *pre, float *out, const float *in, const float *wt, const float *b,
                                  size_t B, size_t T, size_t C, size_t K, size_t d, int act) {
    DD_TEAM(dd_nn_threads(), B > 1 && B * T * C >= DD_NN_CONV_DW_PAR,
            VSUF(conv_dw_fwd_team), pre, out, in, wt, b, B, T, C, K, d, act);
}

/* din of frames [b0, b1) (din != NULL) and dwt of channel vectors [v0, v1) (dwt != NULL). */
static void VSUF(conv_dw_bwd_part)(float *din, float *dwt, const float *dout, const float *in,
                                   const float *wt, size_t b0, size_t b1, size_t v0, size_t v1,
                                   size_t T, size_t C, size_t K, size_t d) {
    const size_t nf = C / VW, rem = C % VW;
    const VM tail = VMASK(rem ? (int)rem : VW);
    for (size_t bb = b0; bb < b1; bb++)
        for (size_t t = 0; t < T; t++) {
            const size_t r = bb * T + t;
            const size_t kmin = (K - 1) * d <= t ? 0 : K - 1 - t / d;
            /* din: taps with t + s_k < T, i.e. s_k <= T-1-t */
            const size_t up = T - 1 - t;
            const size_t kmin_in = (K - 1) * d <= up ? 0 : K - 1 - up / d;
            for (size_t v = v0; v < v1; v++) {
                if (v == nf && !rem) break;
                const size_t c = v * VW;
                const int m = v == nf;
                if (din) {
                    float *p = din + r * C + c;
                    VF acc = m ? VLOADM(p, tail) : VLOAD(p);
                    for (size_t k = kmin_in; k < K; k++) {
                        const float *g = dout + (r + (K - 1 - k) * d) * C + c, *w = wt + k * C + c;
                        acc = m ? VFMA(VLOADM(w, tail), VLOADM(g, tail), acc) : VFMA(VLOAD(w), VLOAD(g), acc);
                    }
                    if (m) VSTOREM(p, acc, tail);
                    else VSTORE(p, acc);
                }
                if (dwt) {
                    const VF g = m ? VLOADM(dout + r * C + c, tail) : VLOAD(dout + r * C + c);
                    for (size_t k = kmin; k < K; k++) {
                        const float *x = in + (r - (K - 1 - k) * d) * C + c;
                        float *a = dwt + k * C + c;
                        if (m) VSTOREM(a, VFMA(VLOADM(x, tail), g, VLOADM(a, tail)), tail);
                        else VSTORE(a, VFMA(VLOAD(x), g, VLOAD(a)));
                    }
                }
            }
        }
}

/* A thread's share: din of its frames, dwt of its channel vectors (one thread: both in one
 * pass over the rows). */
static void VSUF(conv_dw_bwd_team)(float *din, float *dwt, const float *dout, const float *in, const float *wt,
                                   size_t B, size_t T, size_t C, size_t K, size_t d, int tid, int nt) {
    const size_t nv = (C + VW - 1) / VW;
    if (nt == 1) {
        VSUF(conv_dw_bwd_part)(din, dwt, dout, in, wt, 0, B, 0, nv, T, C, K, d);
        return;
    }
    size_t f0, f1, v0, v1;
    dd_team_share(B, tid, nt, &f0, &f1);
    dd_team_share(nv, tid, nt, &v0, &v1);
    if (din) VSUF(conv_dw_bwd_part)(din, NULL, dout, in, wt, f0, f1, 0, nv, T, C, K, d);
    if (dwt) VSUF(conv_dw_bwd_part)(NULL, dwt, dout, in, wt, 0, B, v0, v1, T, C, K, d);
}

/* dwt (K x C, zero on entry) receives the weight gradient in the transposed layout. */
void VSUF(dd_nn_conv_dw_bwd_fast)(float *din, float *dwt, const float *dout, const float *in,
                                  const float *wt, size_t B, size_t T, size_t C, size_t K,
                                  size_t d) {
    DD_TEAM(dd_nn_threads(), B > 1 && B * T * C >= DD_NN_CONV_DW_PAR,
            VSUF(conv_dw_bwd_team), din, dwt, dout, in, wt, B, T, C, K, d);
}

/* The backward of a depthwise layer fused with Hardswish (pre: the convolution, kept by
 * forward; NULL: recomputed from in with forward's operations) on NB (1 or 2, a constant
 * after inlining) channel vectors from channel c (M: the masked tail vector, NB = 1), KC
 * taps (a constant after inlining; 0: K at run time), channel vector by channel vector:
 * the block's weights and its dW sums stay in registers over every row of every frame,
 * where a row-major pass re-loaded the K weight vectors and loaded and stored the K dW
 * vectors at every row. Per frame, pass 1 runs the rows u ascending: a = pre (or the
 * convolution again, from zero, taps ascending), da = dout hardswish'(a) (as
 * dd_act_backward adds it into zeros) into row u of buf (T rows C floats apart, when din
 * is wanted), then dW[k] += in[u - s_k] da (rows in ascending order over the frames: the
 * order of conv_dw_bwd_part). Pass 2, row t: din = (0 or din) (+ dout) + the gather sum
 * over taps k ascending of w[k] da[t + s_k] (flags: DD_DW_HS_RESID, DD_DW_HS_SET_DIN:
 * into zeros, not din's contents). Every float is formed by the same operations in the
 * same order as before (row-major, one vector at a time). FULL: every tap inside the
 * frame (no test per tap). */
#define DWB_LD(p) (M ? VLOADM((p), tail) : VLOAD(p))
#define DWB_ST(p, v)                    \
    do {                                \
        if (M) VSTOREM((p), (v), tail); \
        else VSTORE((p), (v));          \
    } while (0)

/* dW[k] += in[o - s_k] a over the taps k >= kmn (pass 1's second half; the split block's B). */
static inline __attribute__((always_inline)) void VSUF(conv_dw_hs_dw_taps)(const int NB, const int M, const size_t K,
                                                                          const int FULL, VF (*acc)[2], const VF *a,
                                                                          const float *in, size_t o, size_t kmn,
                                                                          size_t dC, VM tail) {
#pragma GCC unroll 16
    for (size_t k = 0; k < K; k++) {
        if (!FULL && k < kmn) continue;
        const float *x = in + o - (K - 1 - k) * dC;
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) acc[k][j] = VFMA(DWB_LD(x + (size_t)j * VW), a[j], acc[k][j]);
    }
}

/* Pass 1, row o (element offset of the block's first channel), taps k >= kmn. */
static inline __attribute__((always_inline)) void VSUF(conv_dw_hs_bwd_da)(
    const int NB, const int M, const size_t K, const int FULL, VF (*acc)[2], VF (*wv)[2], float *brow,
    const float *dout, const float *pre, const float *in, size_t o, size_t kmn, size_t dC, VM tail, int want_dw) {
    VF a[2];
    if (pre) {
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) a[j] = DWB_LD(pre + o + (size_t)j * VW);
    } else {
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) a[j] = VZERO();
#pragma GCC unroll 16
        for (size_t k = 0; k < K; k++) {
            if (!FULL && k < kmn) continue;
            const float *x = in + o - (K - 1 - k) * dC;
#pragma GCC unroll 2
            for (int j = 0; j < NB; j++) a[j] = VFMA(wv[k][j], DWB_LD(x + (size_t)j * VW), a[j]);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < NB; j++) a[j] = VSUF(hswish_bwd_v)(VZERO(), a[j], DWB_LD(dout + o + (size_t)j * VW));
    if (brow)
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) DWB_ST(brow + (size_t)j * VW, a[j]);
    if (want_dw) VSUF(conv_dw_hs_dw_taps)(NB, M, K, FULL, acc, a, in, o, kmn, dC, tail);
}

/* Pass 2, row o of din, da rows from bt (the frame's row t in buf), taps k >= kmin_in. */
static inline __attribute__((always_inline)) void VSUF(conv_dw_hs_bwd_din)(
    const int NB, const int M, const size_t K, const int FULL, VF (*wv)[2], float *din, const float *bt,
    const float *dout, size_t o, size_t kmin_in, size_t dC, VM tail, int resid, int set) {
    VF s[2];
#pragma GCC unroll 2
    for (int j = 0; j < NB; j++) s[j] = set ? VZERO() : DWB_LD(din + o + (size_t)j * VW);
    if (resid)
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) s[j] = VADD(s[j], DWB_LD(dout + o + (size_t)j * VW));
#pragma GCC unroll 16
    for (size_t k = 0; k < K; k++) {
        if (!FULL && k < kmin_in) continue;
        const float *g = bt + (K - 1 - k) * dC;
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) s[j] = VFMA(wv[k][j], DWB_LD(g + (size_t)j * VW), s[j]);
    }
#pragma GCC unroll 2
    for (int j = 0; j < NB; j++) DWB_ST(din + o + (size_t)j * VW, s[j]);
}

/* Pass 2 over frame rows from r0 (the block's first channel): din of rows [0, T) from the
 * frame's da in buf, rows [e2, T) missing taps. */
static inline __attribute__((always_inline)) void VSUF(conv_dw_hs_bwd_din_frame)(
    const int NB, const int M, const size_t K, VF (*wv)[2], float *din, const float *buf, const float *dout,
    size_t r0, size_t c, size_t C, size_t T, size_t e2, size_t d, size_t dC, VM tail, int resid, int set) {
    size_t t = 0;
    for (; t < e2; t++)
        VSUF(conv_dw_hs_bwd_din)(NB, M, K, 1, wv, din, buf + t * C + c, dout, r0 + t * C, 0, dC, tail, resid, set);
    for (; t < T; t++)
        VSUF(conv_dw_hs_bwd_din)(NB, M, K, 0, wv, din, buf + t * C + c, dout, r0 + t * C, K - 1 - (T - 1 - t) / d,
                                 dC, tail, resid, set);
}

/* The split form (DWB_SPLIT; used when the convolution is recomputed and dW is wanted).
 * The fused block keeps the K x NB weight vectors (din's gather and the recomputation) and
 * the K x NB dW sums live together over every row: with NB = 2, K = 5 that is 20 vectors,
 * more than AVX2's 16 registers, and GCC kept some of the dW sums on the stack, each row a
 * load, a multiply-add and a store into the next row's load (perf, 2026-12-03). The split
 * block makes three passes over each frame, each holding only its own vectors: A forms da
 * into buf (the weights, for the recomputation), C din (the same weights), B the dW
 * sums (reloaded from dwt and stored back once per frame). Every float is formed by the
 * same operations in the same order as the fused block's. With AVX-512's 32 registers the
 * fused block fits and is kept: the split one measured 0.96-1.05x there (tcn training
 * steps), against 1.00-1.06x at AVX2. */
#if defined(DD_VEC_AVX512)
#define DWB_SPLIT 0
#else
#define DWB_SPLIT 1
#endif

/* Split pass B, row o: acc[k] += in[o - s_k] da, da from brow (taps k >= kmn). */
static inline __attribute__((always_inline)) void VSUF(conv_dw_hs_bwd_dw)(const int NB, const int M, const size_t K,
                                                                         const int FULL, VF (*acc)[2],
                                                                         const float *brow, const float *in,
                                                                         size_t o, size_t kmn, size_t dC, VM tail) {
    VF a[2];
#pragma GCC unroll 2
    for (int j = 0; j < NB; j++) a[j] = DWB_LD(brow + (size_t)j * VW);
    VSUF(conv_dw_hs_dw_taps)(NB, M, K, FULL, acc, a, in, o, kmn, dC, tail);
}

/* v[k][j] = the NB vectors from p + k C (K rows of a K x C array: weights or dW sums). */
static inline __attribute__((always_inline)) void VSUF(conv_dw_load_kc)(const int NB, const int M, const size_t K,
                                                                       VF (*v)[2], const float *p, size_t C,
                                                                       VM tail) {
#pragma GCC unroll 16
    for (size_t k = 0; k < K; k++)
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) v[k][j] = DWB_LD(p + k * C + (size_t)j * VW);
}

/* One frame's dW: the block's sums loaded from dwt (K x C), acc[k] += in[o - s_k] da over
 * the frame's rows ascending (da's rows from da0, C floats apart; rows [0, e1) miss taps),
 * stored back. */
static inline __attribute__((always_inline)) void VSUF(conv_dw_frame_dw)(const int NB, const int M, const size_t K,
                                                                        float *dwt, const float *da0,
                                                                        const float *in, size_t r0, size_t c,
                                                                        size_t C, size_t T, size_t e1, size_t d,
                                                                        size_t dC, VM tail) {
    VF acc[DD_NN_CONV_DW_KMAX][2];
    VSUF(conv_dw_load_kc)(NB, M, K, acc, dwt + c, C, tail);
    size_t u = 0;
    for (; u < e1; u++)
        VSUF(conv_dw_hs_bwd_dw)(NB, M, K, 0, acc, da0 + u * C, in, r0 + u * C, K - 1 - u / d, dC, tail);
    for (; u < T; u++) VSUF(conv_dw_hs_bwd_dw)(NB, M, K, 1, acc, da0 + u * C, in, r0 + u * C, 0, dC, tail);
#pragma GCC unroll 16
    for (size_t k = 0; k < K; k++)
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) DWB_ST(dwt + k * C + c + (size_t)j * VW, acc[k][j]);
}

static inline __attribute__((always_inline)) void VSUF(conv_dw_hs_bwd_blk_split)(
    const int NB, const int M, const size_t KC, float *din, float *dwt, float *buf, const float *dout, const float *in,
    const float *wt, size_t c, VM tail, size_t B, size_t T, size_t C, size_t Kr, size_t d, int resid, int set) {
    const size_t K = KC ? KC : Kr, span = (K - 1) * d, dC = d * C;
    const size_t e1 = span < T ? span : T;     /* A and B: rows [0, e1) miss taps */
    const size_t e2 = span < T ? T - span : 0; /* C: rows [e2, T) miss taps */
    for (size_t bb = 0; bb < B; bb++) {
        const size_t r0 = bb * T * C + c;
        VF wv[DD_NN_CONV_DW_KMAX][2];
        VSUF(conv_dw_load_kc)(NB, M, K, wv, wt + c, C, tail);
        size_t u = 0;
        for (; u < e1; u++)
            VSUF(conv_dw_hs_bwd_da)(NB, M, K, 0, NULL, wv, buf + u * C + c, dout, NULL, in, r0 + u * C,
                                    K - 1 - u / d, dC, tail, 0);
        for (; u < T; u++)
            VSUF(conv_dw_hs_bwd_da)(NB, M, K, 1, NULL, wv, buf + u * C + c, dout, NULL, in, r0 + u * C, 0, dC, tail,
                                    0);
        if (din) VSUF(conv_dw_hs_bwd_din_frame)(NB, M, K, wv, din, buf, dout, r0, c, C, T, e2, d, dC, tail, resid, set);
        VSUF(conv_dw_frame_dw)(NB, M, K, dwt, buf + c, in, r0, c, C, T, e1, d, dC, tail);
    }
}

static inline __attribute__((always_inline)) void VSUF(conv_dw_hs_bwd_blk)(
    const int NB, const int M, const size_t KC, float *din, float *dwt, float *buf, const float *dout,
    const float *pre, const float *in, const float *wt, size_t c, VM tail, size_t B, size_t T, size_t C, size_t Kr,
    size_t d, int resid, int set) {
    const size_t K = KC ? KC : Kr, span = (K - 1) * d, dC = d * C;
    VF wv[DD_NN_CONV_DW_KMAX][2], acc[DD_NN_CONV_DW_KMAX][2];
#pragma GCC unroll 16
    for (size_t k = 0; k < K; k++)
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) {
            wv[k][j] = DWB_LD(wt + k * C + c + (size_t)j * VW);
            acc[k][j] = dwt ? DWB_LD(dwt + k * C + c + (size_t)j * VW) : VZERO();
        }
    const size_t e1 = span < T ? span : T;   /* pass 1: rows [0, e1) miss taps */
    const size_t e2 = span < T ? T - span : 0; /* pass 2: rows [e2, T) miss taps */
    for (size_t bb = 0; bb < B; bb++) {
        const size_t r0 = bb * T * C + c;
        size_t u = 0;
        for (; u < e1; u++)
            VSUF(conv_dw_hs_bwd_da)(NB, M, K, 0, acc, wv, din ? buf + u * C + c : NULL, dout, pre, in,
                                    r0 + u * C, K - 1 - u / d, dC, tail, dwt != NULL);
        for (; u < T; u++)
            VSUF(conv_dw_hs_bwd_da)(NB, M, K, 1, acc, wv, din ? buf + u * C + c : NULL, dout, pre, in,
                                    r0 + u * C, 0, dC, tail, dwt != NULL);
        if (din) VSUF(conv_dw_hs_bwd_din_frame)(NB, M, K, wv, din, buf, dout, r0, c, C, T, e2, d, dC, tail, resid, set);
    }
    if (dwt)
#pragma GCC unroll 16
        for (size_t k = 0; k < K; k++)
#pragma GCC unroll 2
            for (int j = 0; j < NB; j++) DWB_ST(dwt + k * C + c + (size_t)j * VW, acc[k][j]);
}

/* Row o of din: taps k >= kmin_in. */
static inline __attribute__((always_inline)) void VSUF(conv_dw_hsin_din_row)(
    const int NB, const int M, const size_t K, const int FULL, VF (*wv)[2], float *din, const float *dout,
    const float *ain, size_t o, size_t kmin_in, size_t dC, VM tail, int set) {
    VF s[2];
#pragma GCC unroll 2
    for (int j = 0; j < NB; j++) s[j] = VZERO();
#pragma GCC unroll 16
    for (size_t k = 0; k < K; k++) {
        if (!FULL && k < kmin_in) continue;
        const float *g = dout + o + (K - 1 - k) * dC;
#pragma GCC unroll 2
        for (int j = 0; j < NB; j++) s[j] = VFMA(wv[k][j], DWB_LD(g + (size_t)j * VW), s[j]);
    }
#pragma GCC unroll 2
    for (int j = 0; j < NB; j++) {
        const VF p = set ? VZERO() : DWB_LD(din + o + (size_t)j * VW);
        DWB_ST(din + o + (size_t)j * VW, VSUF(hswish_bwd_v)(p, DWB_LD(ain + o + (size_t)j * VW), s[j]));
    }
}

/* The backward of a depthwise layer without bias whose input is z = Hardswish(ain) (tcn with
 * each layer's Hardswish at the front of its stage: the stage's input is the layer below's
 * convolution ain, z kept by forward): dW[k] += z[u - s_k] dout[u] over the rows u in
 * ascending order over the frames (conv_dw_bwd_part's order), then din = (0 or din) +
 * Hardswish'(ain) s with s = the gather sum over taps k ascending of w[k] dout[t + s_k]
 * from zero (set: din's contents ignored). The same floats as dd_conv1d_backward's din into
 * zeros (at the SIMD levels, the fused kernel's din pass) then dd_act_backward into din:
 * what the fused form (conv_dw_hs_bwd_blk) formed in two passes of two layers (a layer's
 * din pass, then the lower layer's da pass) now comes from one. Frame by frame: the dW
 * rows (conv_dw_frame_dw), then the din rows (the weights loaded again), so the frame's
 * dout rows are still in L1 for the second pass and neither pass holds the other's
 * vectors (no spill at AVX2). */
static inline __attribute__((always_inline)) void VSUF(conv_dw_hsin_blk)(
    const int NB, const int M, const size_t KC, float *din, float *dwt, const float *dout, const float *ain,
    const float *z, const float *wt, size_t c, VM tail, size_t B, size_t T, size_t C, size_t Kr, size_t d, int set) {
    const size_t K = KC ? KC : Kr, span = (K - 1) * d, dC = d * C;
    const size_t e1 = span < T ? span : T;     /* dW: rows [0, e1) miss taps */
    const size_t e2 = span < T ? T - span : 0; /* din: rows [e2, T) miss taps */
    for (size_t bb = 0; bb < B; bb++) {
        const size_t r0 = bb * T * C + c;
        if (dwt) VSUF(conv_dw_frame_dw)(NB, M, K, dwt, dout + r0, z, r0, c, C, T, e1, d, dC, tail);
        if (din) {
            VF wv[DD_NN_CONV_DW_KMAX][2];
            VSUF(conv_dw_load_kc)(NB, M, K, wv, wt + c, C, tail);
            size_t t = 0;
            for (; t < e2; t++)
                VSUF(conv_dw_hsin_din_row)(NB, M, K, 1, wv, din, dout, ain, r0 + t * C, 0, dC, tail, set);
            for (; t < T; t++)
                VSUF(conv_dw_hsin_din_row)(NB, M, K, 0, wv, din, dout, ain, r0 + t * C, K - 1 - (T - 1 - t) / d, dC,
                                           tail, set);
        }
    }
}

/* Channel vectors [v0, v1): pairs of whole vectors, then a single one, then the masked tail;
 * K = 5 (tcn's default) with the taps unrolled, other K at run time. flags DD_NN_DW_HSIN:
 * the layer whose input is Hardswish(pre) (in = that input), its dW pass then its din
 * pass per block. */
static void VSUF(conv_dw_hs_bwd_part)(float *din, float *dwt, float *buf, const float *dout, const float *pre,
                                      const float *in, const float *wt, size_t v0, size_t v1, size_t B, size_t T,
                                      size_t C, size_t K, size_t d, int flags) {
    const int resid = flags & DD_DW_HS_RESID, set = flags & DD_DW_HS_SET_DIN, hsin = flags & DD_NN_DW_HSIN;
    const size_t nf = C / VW, rem = C % VW;
    const VM tail = VMASK(rem ? (int)rem : VW);
    if (v1 > nf + (rem ? 1 : 0)) v1 = nf + (rem ? 1 : 0);
    const size_t vf = v1 < nf ? v1 : nf;
#define DWB(NB, M, KC, c)                                                                                           \
    do {                                                                                                            \
        if (hsin)                                                                                                   \
            VSUF(conv_dw_hsin_blk)(NB, M, KC, din, dwt, dout, pre, in, wt, c, tail, B, T, C, K, d, set);            \
        else if (DWB_SPLIT && !pre && dwt)                                                                        \
            VSUF(conv_dw_hs_bwd_blk_split)(NB, M, KC, din, dwt, buf, dout, in, wt, c, tail, B, T, C, K, d, resid,   \
                                           set);                                                                    \
        else                                                                                                        \
            VSUF(conv_dw_hs_bwd_blk)(NB, M, KC, din, dwt, buf, dout, pre, in, wt, c, tail, B, T, C, K, d, resid,    \
                                     set);                                                                          \
    } while (0)
    size_t v = v0;
    if (K == 5) {
        for (; v + 2 <= vf; v += 2) DWB(2, 0, 5, v * VW);
        if (v < vf) DWB(1, 0, 5, v * VW); /* the odd whole vector */
        if (v1 > nf && v0 <= nf) DWB(1, 1, 5, nf * VW);
    } else {
        for (; v < vf; v++) DWB(1, 0, 0, v * VW);
        if (v1 > nf && v0 <= nf) DWB(1, 1, 0, nf * VW);
    }
#undef DWB
}
#undef DWB_LD
#undef DWB_ST
#undef DWB_SPLIT

static void VSUF(conv_dw_hs_bwd_team)(float *din, float *dwt, float *buf, const float *dout, const float *pre,
                                      const float *in, const float *wt, size_t B, size_t T, size_t C, size_t K,
                                      size_t d, int flags, int tid, int nt) {
    size_t v0, v1;
    dd_team_share((C + VW - 1) / VW, tid, nt, &v0, &v1);
    VSUF(conv_dw_hs_bwd_part)(din, dwt, buf, dout, pre, in, wt, v0, v1, B, T, C, K, d, flags);
}

/* Threads split the channel vectors (every (k, c) of dW and every din element is summed as on
 * one thread). dwt (K x C) adds as in dd_nn_conv_dw_bwd_fast; buf: T x C floats (da of one
 * frame; each thread its own channels). */
void VSUF(dd_nn_conv_dw_hs_bwd_fast)(float *din, float *dwt, float *buf, const float *dout, const float *pre,
                                     const float *in, const float *wt, size_t B, size_t T, size_t C, size_t K,
                                     size_t d, int flags) {
    DD_TEAM(dd_nn_threads(), C > VW && B * T * C >= DD_NN_CONV_DW_PAR,
            VSUF(conv_dw_hs_bwd_team), din, dwt, buf, dout, pre, in, wt, B, T, C, K, d, flags);
}

/* ---------------------------------------------------------------- full (groups == 1) */

#define CNV 6 /* output (forward) / input (backward) channel vectors at most */
/* Every loop over NV or NCO below carries `#pragma GCC unroll 6` (pragmas take no macro
 * names): unrolled only partly (it was 4 until 2026-12-03), a loop up to 6 indexes the
 * accumulator arrays at run time and GCC keeps them in memory, not in registers (tcn's
 * stem forward at AVX-512: 1.05-1.11x per training step when fixed). */
_Static_assert(CNV == 6, "the unroll pragmas of the full-convolution kernels say 6");

/* Rows r0 .. r0+R-1 of one frame (R independent accumulator chains), taps kmin..K-1. */
static inline __attribute__((always_inline)) void VSUF(conv_full_fwd_rows)(
    const int HS, const int NV, const int R, float *pre, float *out, const float *in, const float *wf,
    const VF *bias, size_t r0, size_t kmin, size_t Ci, size_t Co, size_t K, size_t d, VM tail) {
    const size_t ld = (size_t)NV * VW; /* floats per wf row */
    VF acc[4][CNV];
#pragma GCC unroll 4
    for (int q = 0; q < R; q++)
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++) acc[q][v] = bias[v];
    for (size_t k = kmin; k < K; k++) {
        const float *x = in + (r0 - (K - 1 - k) * d) * Ci;
        const float *w = wf + k * Ci * ld;
        for (size_t ci = 0; ci < Ci; ci++, w += ld) {
            VF wv[CNV];
#pragma GCC unroll 6
            for (int v = 0; v < NV; v++) wv[v] = VLOAD(w + (size_t)v * VW);
#pragma GCC unroll 4
            for (int q = 0; q < R; q++) {
                const VF xb = VSET1(x[(size_t)q * Ci + ci]);
#pragma GCC unroll 6
                for (int v = 0; v < NV; v++) acc[q][v] = VFMA(xb, wv[v], acc[q][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < R; q++) {
        float *o = out + (r0 + (size_t)q) * Co, *a = HS ? pre + (r0 + (size_t)q) * Co : NULL;
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++) {
            /* HS: the sum into pre, its Hardswish into out (the operations of act_fwd) */
            const VF y = HS ? VSUF(hswish_v)(acc[q][v]) : acc[q][v];
            if (HS && v == NV - 1) VSTOREM(a + (size_t)v * VW, acc[q][v], tail);
            else if (HS) VSTORE(a + (size_t)v * VW, acc[q][v]);
            if (v == NV - 1) VSTOREM(o + (size_t)v * VW, y, tail);
            else VSTORE(o + (size_t)v * VW, y);
        }
    }
}

static inline __attribute__((always_inline)) void VSUF(conv_full_fwd_nv)(
    const int HS, const int NV, float *pre, float *out, const float *in, const float *wf, const float *bp,
    size_t B, size_t T, size_t Ci, size_t Co, size_t K, size_t d) {
    const VM tail = VMASK((int)(Co - (size_t)(NV - 1) * VW));
    const size_t full = (K - 1) * d; /* rows with t >= full see every tap */
    VF bias[CNV];
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++) bias[v] = VLOAD(bp + (size_t)v * VW);
    for (size_t bb = 0; bb < B; bb++) {
        size_t t = 0;
        for (; t < T && t < full; t++) /* the frame's first rows: taps kmin..K-1 */
            VSUF(conv_full_fwd_rows)(HS, NV, 1, pre, out, in, wf, bias, bb * T + t, K - 1 - t / d, Ci, Co, K, d,
                                     tail);
        for (; t + 4 <= T; t += 4)
            VSUF(conv_full_fwd_rows)(HS, NV, 4, pre, out, in, wf, bias, bb * T + t, 0, Ci, Co, K, d, tail);
        for (; t < T; t++)
            VSUF(conv_full_fwd_rows)(HS, NV, 1, pre, out, in, wf, bias, bb * T + t, 0, Ci, Co, K, d, tail);
    }
}

/* HS 0: out = the convolution (pre unused); 1: pre = the convolution, out = Hardswish(pre). */
static inline __attribute__((always_inline)) void VSUF(conv_full_fwd_hs)(
    const int HS, float *pre, float *out, const float *in, const float *wf, const float *bp, size_t B, size_t T,
    size_t Ci, size_t Co, size_t K, size_t d) {
    switch ((Co + VW - 1) / VW) {
    case 1: VSUF(conv_full_fwd_nv)(HS, 1, pre, out, in, wf, bp, B, T, Ci, Co, K, d); break;
    case 2: VSUF(conv_full_fwd_nv)(HS, 2, pre, out, in, wf, bp, B, T, Ci, Co, K, d); break;
    case 3: VSUF(conv_full_fwd_nv)(HS, 3, pre, out, in, wf, bp, B, T, Ci, Co, K, d); break;
    case 4: VSUF(conv_full_fwd_nv)(HS, 4, pre, out, in, wf, bp, B, T, Ci, Co, K, d); break;
    case 5: VSUF(conv_full_fwd_nv)(HS, 5, pre, out, in, wf, bp, B, T, Ci, Co, K, d); break;
    default: VSUF(conv_full_fwd_nv)(HS, 6, pre, out, in, wf, bp, B, T, Ci, Co, K, d); break;
    }
}

/* wf: K x Ci rows of NV*VW floats (w[:, ci, k], zero-padded); bp: NV*VW floats (bias or 0). */
void VSUF(dd_nn_conv_full_fwd_fast)(float *out, const float *in, const float *wf, const float *bp,
                                    size_t B, size_t T, size_t Ci, size_t Co, size_t K, size_t d) {
    VSUF(conv_full_fwd_hs)(0, NULL, out, in, wf, bp, B, T, Ci, Co, K, d);
}

/* As dd_nn_conv_full_fwd_fast, fused with Hardswish: pre = the convolution, out =
 * Hardswish(pre), stored from the same registers (tcn's stem). */
void VSUF(dd_nn_conv_full_hs_fwd_fast)(float *pre, float *out, const float *in, const float *wf, const float *bp,
                                       size_t B, size_t T, size_t Ci, size_t Co, size_t K, size_t d) {
    VSUF(conv_full_fwd_hs)(1, pre, out, in, wf, bp, B, T, Ci, Co, K, d);
}

/* din rows r0 .. r0+R-1 of one frame += taps kmin..K-1 (gather form). */
static inline __attribute__((always_inline)) void VSUF(conv_full_din_rows)(
    const int NV, const int R, float *din, const float *dout, const float *wb, size_t r0,
    size_t kmin, size_t Ci, size_t Co, size_t K, size_t d, VM tail) {
    const size_t ld = (size_t)NV * VW;
    VF acc[4][CNV];
#pragma GCC unroll 4
    for (int q = 0; q < R; q++) {
        const float *p = din + (r0 + (size_t)q) * Ci;
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++)
            acc[q][v] = v == NV - 1 ? VLOADM(p + (size_t)v * VW, tail) : VLOAD(p + (size_t)v * VW);
    }
    for (size_t k = kmin; k < K; k++) {
        const float *g = dout + (r0 + (K - 1 - k) * d) * Co;
        const float *w = wb + k * Co * ld;
        for (size_t co = 0; co < Co; co++, w += ld) {
            VF wv[CNV];
#pragma GCC unroll 6
            for (int v = 0; v < NV; v++) wv[v] = VLOAD(w + (size_t)v * VW);
#pragma GCC unroll 4
            for (int q = 0; q < R; q++) {
                const VF gb = VSET1(g[(size_t)q * Co + co]);
#pragma GCC unroll 6
                for (int v = 0; v < NV; v++) acc[q][v] = VFMA(gb, wv[v], acc[q][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < R; q++) {
        float *p = din + (r0 + (size_t)q) * Ci;
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++) {
            if (v == NV - 1) VSTOREM(p + (size_t)v * VW, acc[q][v], tail);
            else VSTORE(p + (size_t)v * VW, acc[q][v]);
        }
    }
}

static inline __attribute__((always_inline)) void VSUF(conv_full_din_nv)(
    const int NV, float *din, const float *dout, const float *wb, size_t B, size_t T, size_t Ci,
    size_t Co, size_t K, size_t d) {
    const VM tail = VMASK((int)(Ci - (size_t)(NV - 1) * VW));
    const size_t full = (K - 1) * d; /* rows with T-1-t >= full receive every tap */
    for (size_t bb = 0; bb < B; bb++) {
        const size_t tend = T > full ? T - full : 0; /* t < tend: all taps */
        size_t t = 0;
        for (; t + 4 <= tend; t += 4)
            VSUF(conv_full_din_rows)(NV, 4, din, dout, wb, bb * T + t, 0, Ci, Co, K, d, tail);
        for (; t < tend; t++)
            VSUF(conv_full_din_rows)(NV, 1, din, dout, wb, bb * T + t, 0, Ci, Co, K, d, tail);
        for (; t < T; t++)
            VSUF(conv_full_din_rows)(NV, 1, din, dout, wb, bb * T + t, K - 1 - (T - 1 - t) / d, Ci,
                                     Co, K, d, tail);
    }
}

/* dW of tap k for output channels co0 .. co0+NCO-1, input vectors NV: acc[j][v] +=
 * dout[r, co0+j] in[r - s_k, v] over the rows with t >= s_k; added into dwk (Co x ld,
 * row co = dw[co, :, k] zero-padded). */
static inline __attribute__((always_inline)) void VSUF(conv_full_dw_blk)(
    const int NCO, const int NV, float *dwk, const float *dout, const float *in, size_t B,
    size_t T, size_t Ci, size_t Co, size_t s, size_t co0) {
    const VM tail = VMASK((int)(Ci - (size_t)(NV - 1) * VW));
    const size_t ld = (size_t)NV * VW;
    VF acc[6][CNV];
#pragma GCC unroll 6
    for (int j = 0; j < NCO; j++)
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++) acc[j][v] = VZERO();
    for (size_t bb = 0; bb < B; bb++)
        for (size_t t = s; t < T; t++) {
            const size_t r = bb * T + t;
            const float *x = in + (r - s) * Ci, *g = dout + r * Co + co0;
            VF xv[CNV];
#pragma GCC unroll 6
            for (int v = 0; v < NV; v++)
                xv[v] = v == NV - 1 ? VLOADM(x + (size_t)v * VW, tail) : VLOAD(x + (size_t)v * VW);
#pragma GCC unroll 6
            for (int j = 0; j < NCO; j++) {
                const VF gb = VSET1(g[j]);
#pragma GCC unroll 6
                for (int v = 0; v < NV; v++) acc[j][v] = VFMA(gb, xv[v], acc[j][v]);
            }
        }
#pragma GCC unroll 6
    for (int j = 0; j < NCO; j++)
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++) {
            float *p = dwk + (co0 + (size_t)j) * ld + (size_t)v * VW;
            VSTORE(p, VADD(VLOAD(p), acc[j][v]));
        }
}

#define CFD_CASE(NCO, NV)                                                                  \
    case (NCO) * 8 + (NV):                                                                 \
        VSUF(conv_full_dw_blk)((NCO), (NV), dwk, dout, in, B, T, Ci, Co, s, co0);          \
        break;
#define CFD_CASES(NCO) CFD_CASE(NCO, 1) CFD_CASE(NCO, 2) CFD_CASE(NCO, 3) CFD_CASE(NCO, 4) \
    CFD_CASE(NCO, 5) CFD_CASE(NCO, 6)
/* din (may be NULL) += ...; dwb (K x Co x NV*VW, zero on entry; may be NULL) receives dW
 * re-laid as wb; db (may be NULL) += column sums of dout. */
void VSUF(dd_nn_conv_full_bwd_fast)(float *din, float *dwb, float *db, const float *dout,
                                    const float *in, const float *wb, size_t B, size_t T,
                                    size_t Ci, size_t Co, size_t K, size_t d) {
    const int NV = (int)((Ci + VW - 1) / VW);
    if (din) switch (NV) {
        case 1: VSUF(conv_full_din_nv)(1, din, dout, wb, B, T, Ci, Co, K, d); break;
        case 2: VSUF(conv_full_din_nv)(2, din, dout, wb, B, T, Ci, Co, K, d); break;
        case 3: VSUF(conv_full_din_nv)(3, din, dout, wb, B, T, Ci, Co, K, d); break;
        case 4: VSUF(conv_full_din_nv)(4, din, dout, wb, B, T, Ci, Co, K, d); break;
        case 5: VSUF(conv_full_din_nv)(5, din, dout, wb, B, T, Ci, Co, K, d); break;
        default: VSUF(conv_full_din_nv)(6, din, dout, wb, B, T, Ci, Co, K, d); break;
        }
    if (dwb) {
        /* register budget: ncob * NV accumulators, 10..15 */
        const int ncob = NV == 1 ? 6 : NV == 2 ? 5 : NV <= 4 ? 3 : 2;
        for (size_t k = 0; k < K; k++) {
            const size_t s = (K - 1 - k) * d;
            if (s >= T) continue;
            float *dwk = dwb + k * Co * (size_t)NV * VW;
            for (size_t co0 = 0; co0 < Co; co0 += (size_t)ncob) {
                const int nco = Co - co0 < (size_t)ncob ? (int)(Co - co0) : ncob;
                switch (nco * 8 + NV) {
                    CFD_CASES(1)
                    CFD_CASES(2)
                    CFD_CASES(3)
                    CFD_CASES(4)
                    CFD_CASES(5)
                    CFD_CASES(6)
                default: break;
                }
            }
        }
    }
    if (db) {
        const size_t nf = Co / VW, rem = Co % VW;
        const VM tail = VMASK(rem ? (int)rem : VW);
        for (size_t v = 0; v <= nf; v++) {
            if (v == nf && !rem) break;
            const int m = v == nf;
            VF acc = VZERO();
            for (size_t r = 0; r < B * T; r++) {
                const float *g = dout + r * Co + v * VW;
                acc = VADD(acc, m ? VLOADM(g, tail) : VLOAD(g));
            }
            float lanes[VW];
            VSTORE(lanes, acc);
            const size_t nl = m ? rem : VW;
            for (size_t l = 0; l < nl; l++) db[v * VW + l] += lanes[l];
        }
    }
}
#undef CFD_CASE
#undef CFD_CASES
#undef CNV

/* A 1x1 convolution (dense layer, Ci <= DD_NN_CONV1X1_HS_CIMAX inputs, any Co) fused with
 * Hardswish, backward without din (tcn's stem): da = dout hardswish'(pre) (as
 * dd_nn_act_bwd_fast adds it into zeros) is formed in registers, never stored;
 * dw[co, ci] += 0 + sum over rows (in order, from zero) of da[r, co] in[r, ci] and
 * db[co] += sum over rows of da[r, co]: the operations of dd_nn_conv_full_bwd_fast's dW
 * and db loops on a stored da (the same products, fused multiply-adds and additions in
 * the same order), with the output channels as vector lanes instead of broadcasts. One
 * pass over the rows per NVB output vectors (accumulators CI NVB + NVB). */
#if defined(DD_VEC_AVX512)
#define C1H_NVB 3
#else
#define C1H_NVB 2
#endif
_Static_assert(DD_NN_CONV1X1_HS_CIMAX <= 8, "conv1x1_hs_bwd_blk's unroll pragmas say 8");
static inline __attribute__((always_inline)) void VSUF(conv1x1_hs_bwd_blk)(
    const int HS, const int CI, const int NVB, float *dw, float *db, const float *dout, const float *pre,
    const float *in, size_t N, size_t Co, size_t v0) {
    const size_t nf = Co / VW, rem = Co % VW;
    const VM tail = VMASK(rem ? (int)rem : VW);
    VF acc[DD_NN_CONV1X1_HS_CIMAX][C1H_NVB], sb[C1H_NVB];
#pragma GCC unroll 4
    for (int j = 0; j < NVB; j++) {
        sb[j] = VZERO();
#pragma GCC unroll 8
        for (int ci = 0; ci < CI; ci++) acc[ci][j] = VZERO();
    }
    for (size_t n = 0; n < N; n++) {
        const float *x = in + n * (size_t)CI, *p = HS ? pre + n * Co : NULL, *g = dout + n * Co;
        VF da[C1H_NVB];
#pragma GCC unroll 4
        for (int j = 0; j < NVB; j++) {
            const size_t c = (v0 + (size_t)j) * VW;
            const int m = v0 + (size_t)j == nf;
            const VF gv = m ? VLOADM(g + c, tail) : VLOAD(g + c);
            da[j] = HS ? VSUF(hswish_bwd_v)(VZERO(), m ? VLOADM(p + c, tail) : VLOAD(p + c), gv) : gv;
            sb[j] = VADD(sb[j], da[j]);
        }
#pragma GCC unroll 8
        for (int ci = 0; ci < CI; ci++) {
            const VF xb = VSET1(x[ci]);
#pragma GCC unroll 4
            for (int j = 0; j < NVB; j++) acc[ci][j] = VFMA(da[j], xb, acc[ci][j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < NVB; j++) {
        const size_t c = (v0 + (size_t)j) * VW, nl = v0 + (size_t)j == nf ? rem : VW;
        float lanes[VW];
        /* unrolled whole (CI <= 8): left rolled, it indexed acc at run time and GCC kept acc
         * in memory, stored at every row of the loop above (2026-12-03) */
#pragma GCC unroll 8
        for (int ci = 0; ci < CI; ci++) {
            VSTORE(lanes, VADD(VZERO(), acc[ci][j])); /* as the kernel's zeroed dwb + acc */
            for (size_t l = 0; l < nl; l++) dw[(c + l) * (size_t)CI + (size_t)ci] += lanes[l];
        }
        if (db) {
            VSTORE(lanes, sb[j]);
            for (size_t l = 0; l < nl; l++) db[c + l] += lanes[l];
        }
    }
}

#define C1H_CASE(CI, NVB)                                                                   \
    case (CI) * 8 + (NVB):                                                                  \
        if (pre) VSUF(conv1x1_hs_bwd_blk)(1, (CI), (NVB), dw, db, dout, pre, in, N, Co, v0); \
        else VSUF(conv1x1_hs_bwd_blk)(0, (CI), (NVB), dw, db, dout, NULL, in, N, Co, v0);    \
        break;
#if C1H_NVB == 3
#define C1H_CASES(CI) C1H_CASE(CI, 1) C1H_CASE(CI, 2) C1H_CASE(CI, 3)
#else
#define C1H_CASES(CI) C1H_CASE(CI, 1) C1H_CASE(CI, 2)
#endif
void VSUF(dd_nn_conv1x1_hs_bwd_fast)(float *dw, float *db, const float *dout, const float *pre, const float *in,
                                     size_t N, size_t Ci, size_t Co) {
    const size_t nv = (Co + VW - 1) / VW;
    for (size_t v0 = 0; v0 < nv; v0 += C1H_NVB) {
        const int nvb = nv - v0 < C1H_NVB ? (int)(nv - v0) : C1H_NVB;
        switch ((int)Ci * 8 + nvb) {
            C1H_CASES(1)
            C1H_CASES(2)
            C1H_CASES(3)
            C1H_CASES(4)
            C1H_CASES(5)
            C1H_CASES(6)
            C1H_CASES(7)
            C1H_CASES(8)
        default: break;
        }
    }
}
#undef C1H_CASE
#undef C1H_CASES
#undef C1H_NVB

/* ---------------------------------------------------------------- activations */

/* a: 3 = ReLU, 4 = Hardswish (dd_act values). out may alias in. */
void VSUF(dd_nn_act_fwd_fast)(int a, float *out, const float *in, size_t n) {
    const size_t nf = n / VW * VW;
    const VF zero = VZERO();
    size_t i = 0;
    if (a == 3) {
        for (; i < nf; i += VW) VSTORE(out + i, VMAX(VLOAD(in + i), zero));
        for (; i < n; i++) out[i] = in[i] > 0 ? in[i] : 0;
    } else {
        for (; i < nf; i += VW) VSTORE(out + i, VSUF(hswish_v)(VLOAD(in + i)));
        for (; i < n; i++) {
            const float x = in[i];
            out[i] = x < -3 ? 0 : x >= 3 ? x : dd_hs_mid_f(x);
        }
    }
}

/* din += dout f'(in); a as above. */
void VSUF(dd_nn_act_bwd_fast)(int a, float *din, const float *dout, const float *in, size_t n) {
    const size_t nf = n / VW * VW;
    const VF zero = VZERO();
    size_t i = 0;
    if (a == 3) {
        for (; i < nf; i += VW) {
            const VF x = VLOAD(in + i), g = VLOAD(dout + i), p = VLOAD(din + i);
#if defined(DD_VEC_AVX512)
            VSTORE(din + i, _mm512_mask_add_ps(p, _mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ), p, g));
#else
            VSTORE(din + i, _mm256_blendv_ps(p, VADD(p, g), _mm256_cmp_ps(x, zero, _CMP_GT_OQ)));
#endif
        }
        for (; i < n; i++)
            if (in[i] > 0) din[i] += dout[i];
    } else {
        for (; i < nf; i += VW)
            VSTORE(din + i, VSUF(hswish_bwd_v)(VLOAD(din + i), VLOAD(in + i), VLOAD(dout + i)));
        for (; i < n; i++) {
            const float x = in[i];
            if (x > 3)
                din[i] += dout[i];
            else if (x >= -3)
                din[i] += dout[i] * dd_hs_slope_f(x);
        }
    }
}
