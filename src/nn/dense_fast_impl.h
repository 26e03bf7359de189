/* Dense layers with few outputs (O <= DD_NN_DENSE_SMALL_MAX), written once over the vector
 * vocabulary of simd_vec.h and included by simd_kernels.c once per instruction set.
 * Rows are contiguous (N x I input, N x O output), so the kernels vectorise over the I
 * inputs of a row:
 *   forward   out[n, o] = b[o] + sum_i in[n, i] w[o, i]: vector partial sums over i in
 *             order, then a fixed lane reduction;
 *   backward  din[n, :] += sum_o dout[n, o] w[o, :]; dw[o, :] += sum_n dout[n, o] in[n, :]
 *             (register accumulators over all rows, per chunk of 4 vectors of inputs);
 *             db[o] += sum_n dout[n, o] (vector sums over the flat N x O array when O
 *             divides VW, lane l belonging to output l mod O). */

#if defined(DD_VEC_AVX512)
#define DHSUM(v) _mm512_reduce_add_ps(v)
#else
#define DHSUM(v) dd_nn_hsum_avx2(v)
#endif
/* Input vectors per backward chunk: its O x DNV weight vectors and sums, DNV inputs and
 * DNV input gradients stay in registers over every row (O = 2, the heads: 6 DNV vectors,
 * 12 at DNV 2 within AVX2's 16 registers; at DNV 4, 24, GCC kept sums on the stack). */
#if defined(DD_VEC_AVX512)
#define DNV 4
#else
#define DNV 2
#endif

static inline __attribute__((always_inline)) void VSUF(dense_small_fwd_o)(
    const int O, float *out, const float *in, const float *w, const float *b, size_t N, size_t NI) {
    const size_t nf = NI / VW, rem = NI % VW;
    const VM tail = VMASK(rem ? (int)rem : VW);
    for (size_t n = 0; n < N; n++) {
        const float *x = in + n * NI;
        VF acc[DD_NN_DENSE_SMALL_MAX];
#pragma GCC unroll 4
        for (int o = 0; o < O; o++) acc[o] = VZERO();
        for (size_t v = 0; v < nf; v++) {
            const VF xv = VLOAD(x + v * VW);
#pragma GCC unroll 4
            for (int o = 0; o < O; o++) acc[o] = VFMA(xv, VLOAD(w + (size_t)o * NI + v * VW), acc[o]);
        }
        if (rem) {
            const VF xv = VLOADM(x + nf * VW, tail);
#pragma GCC unroll 4
            for (int o = 0; o < O; o++)
                acc[o] = VFMA(xv, VLOADM(w + (size_t)o * NI + nf * VW, tail), acc[o]);
        }
#pragma GCC unroll 4
        for (int o = 0; o < O; o++) out[n * (size_t)O + (size_t)o] = (b ? b[o] : 0.0f) + DHSUM(acc[o]);
    }
}

/* Threads (dd_nn_threads) when the layer has at least DD_NN_DENSE_SMALL_PAR inputs in all:
 * each output and each din row is computed by one thread with the operations of one
 * thread, so the thread count does not change a number. */
#ifndef DD_NN_DENSE_SMALL_PAR
#define DD_NN_DENSE_SMALL_PAR 32768
#endif

/* A thread's share: a contiguous range of rows. */
static void VSUF(dense_small_fwd_team)(float *out, const float *in, const float *w, const float *b, size_t N,
                                       size_t NI, size_t O, int tid, int nt) {
    size_t n0, n1;
    dd_team_share(N, tid, nt, &n0, &n1);
    const size_t n = n1 - n0;
    float *o_ = out + n0 * O;
    const float *i_ = in + n0 * NI;
    switch (O) {
    case 1: VSUF(dense_small_fwd_o)(1, o_, i_, w, b, n, NI); break;
    case 2: VSUF(dense_small_fwd_o)(2, o_, i_, w, b, n, NI); break;
    case 3: VSUF(dense_small_fwd_o)(3, o_, i_, w, b, n, NI); break;
    default: VSUF(dense_small_fwd_o)(4, o_, i_, w, b, n, NI); break;
    }
}

void VSUF(dd_nn_dense_small_fwd)(float *out, const float *in, const float *w, const float *b,
                                 size_t N, size_t NI, size_t O) {
    DD_TEAM(dd_nn_threads(), N * NI >= DD_NN_DENSE_SMALL_PAR, VSUF(dense_small_fwd_team), out, in, w, b, N, NI, O);
}

/* Inputs [i0, i0 + NV*VW) (the last vector masked by tail) of every row. */
static inline __attribute__((always_inline)) void VSUF(dense_small_bwd_chunk)(
    const int O, const int NV, float *din, float *dw, const float *dout, size_t ldo,
    const float *in, const float *w, size_t N, size_t NI, size_t i0, VM tail) {
    VF wv[DD_NN_DENSE_SMALL_MAX][DNV], acc[DD_NN_DENSE_SMALL_MAX][DNV];
#pragma GCC unroll 4
    for (int o = 0; o < O; o++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            const float *p = w + (size_t)o * NI + i0 + (size_t)v * VW;
            wv[o][v] = v == NV - 1 ? VLOADM(p, tail) : VLOAD(p);
            acc[o][v] = VZERO();
        }
    for (size_t n = 0; n < N; n++) {
        const float *g = dout + n * ldo;
        const float *x = in + n * NI + i0;
        float *dx = din ? din + n * NI + i0 : NULL;
        VF xv[DNV], dv[DNV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            const size_t off = (size_t)v * VW;
            xv[v] = !dw ? VZERO() : v == NV - 1 ? VLOADM(x + off, tail) : VLOAD(x + off);
            dv[v] = !dx ? VZERO() : v == NV - 1 ? VLOADM(dx + off, tail) : VLOAD(dx + off);
        }
#pragma GCC unroll 4
        for (int o = 0; o < O; o++) {
            const VF gv = VSET1(g[o]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                if (dx) dv[v] = VFMA(gv, wv[o][v], dv[v]);
                if (dw) acc[o][v] = VFMA(gv, xv[v], acc[o][v]);
            }
        }
        if (dx) {
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                const size_t off = (size_t)v * VW;
                if (v == NV - 1) VSTOREM(dx + off, dv[v], tail);
                else VSTORE(dx + off, dv[v]);
            }
        }
    }
    if (dw) {
#pragma GCC unroll 4
        for (int o = 0; o < O; o++)
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                float *p = dw + (size_t)o * NI + i0 + (size_t)v * VW;
                if (v == NV - 1) VSTOREM(p, VADD(VLOADM(p, tail), acc[o][v]), tail);
                else VSTORE(p, VADD(VLOAD(p), acc[o][v]));
            }
    }
}

#define DSB_CASE(O, NV)                                                                      \
    case (O) * 8 + (NV):                                                                     \
        VSUF(dense_small_bwd_chunk)((O), (NV), din, dw, dout, ldo, in, w, N, NI, i0, tail);   \
        break;
#if DNV == 4
#define DSB_CASES(O) DSB_CASE(O, 1) DSB_CASE(O, 2) DSB_CASE(O, 3) DSB_CASE(O, 4)
#else
#define DSB_CASES(O) DSB_CASE(O, 1) DSB_CASE(O, 2)
#endif
/* din rows and dw of O outputs (rows of dout ldo apart) over all input chunks. */
static void VSUF(dense_small_bwd_part)(float *din, float *dw, const float *dout, size_t ldo,
                                       const float *in, const float *w, size_t N, size_t NI,
                                       size_t O) {
    for (size_t i0 = 0; i0 < NI; i0 += (size_t)DNV * VW) {
        const size_t r = NI - i0;
        const int NV = r >= (size_t)DNV * VW ? DNV : (int)((r + VW - 1) / VW);
        const VM tail = VMASK((int)(r - (size_t)(NV - 1) * VW));
        switch ((int)O * 8 + NV) {
            DSB_CASES(1)
            DSB_CASES(2)
            DSB_CASES(3)
            DSB_CASES(4)
        default: break;
        }
    }
}

/* A thread's share: din by contiguous ranges of rows (each row sums its O terms in order, as
 * on one thread); dw by outputs (dw[o, :] sums every row in order, as on one thread: the
 * kernel keeps each output's sums apart). One thread: both in one pass. */
static void VSUF(dense_small_bwd_team)(float *din, float *dw, const float *dout, const float *in, const float *w,
                                       size_t N, size_t NI, size_t O, int tid, int nt) {
    if (nt == 1) {
        VSUF(dense_small_bwd_part)(din, dw, dout, O, in, w, N, NI, O);
        return;
    }
    if (din) {
        size_t n0, n1;
        dd_team_share(N, tid, nt, &n0, &n1);
        VSUF(dense_small_bwd_part)(din + n0 * NI, NULL, dout + n0 * O, O, in + n0 * NI, w, n1 - n0, NI, O);
    }
    if (dw)
        for (size_t o = (size_t)tid; o < O; o += (size_t)nt)
            VSUF(dense_small_bwd_part)(NULL, dw + o * NI, dout + o, O, in, w + o * NI, N, NI, 1);
}

void VSUF(dd_nn_dense_small_bwd)(float *din, float *dw, float *db, const float *dout,
                                 const float *in, const float *w, size_t N, size_t NI, size_t O) {
    if (din || dw)
        DD_TEAM(dd_nn_threads(), N * NI >= DD_NN_DENSE_SMALL_PAR,
                VSUF(dense_small_bwd_team), din, dw, dout, in, w, N, NI, O);
    if (db) {
        const size_t len = N * O;
        size_t k = 0;
        if (VW % O == 0) {
            VF s = VZERO();
            for (; k + VW <= len; k += VW) s = VADD(s, VLOAD(dout + k));
            float lanes[VW];
            VSTORE(lanes, s);
            for (int l = 0; l < VW; l++) db[(size_t)l % O] += lanes[l];
        }
        for (; k < len; k++) db[k % O] += dout[k];
    }
}

/* The input gradient alone, written feature-major (row i, column t B + b, rows ld apart)
 * for a layer whose input is a recurrent layer's output (B frames of T steps, dout
 * (B, T, O)): din[i, tB + b] = (set ? +0 : din[i, tB + b]) (+ dout[n, o] w[o, i] for
 * o = 0..O-1, each a fused multiply-add), n = b T + t: the same operations per element as
 * dense_small_bwd_chunk's din. Threads: ranges of steps (each element by one thread). */
static void VSUF(dense_small_din_fm_team)(float *din, size_t ld, int set, const float *dout, const float *w,
                                          size_t B, size_t T, size_t NI, size_t O, int tid, int nt) {
    size_t t0, t1;
    dd_team_share(T, tid, nt, &t0, &t1);
    float g[DD_NN_DENSE_SMALL_MAX][VW] __attribute__((aligned(64)));
    for (size_t t = t0; t < t1; t++)
        for (size_t b0 = 0; b0 < B; b0 += VW) {
            const size_t nb = B - b0 < VW ? B - b0 : VW;
            const VM bm = VMASK((int)nb);
            for (size_t o = 0; o < O; o++)
                for (size_t i = 0; i < VW; i++)
                    g[o][i] = i < nb ? dout[((b0 + i) * T + t) * O + o] : 0.0f;
            VF gv[DD_NN_DENSE_SMALL_MAX];
            for (size_t o = 0; o < O; o++) gv[o] = VLOAD(g[o]);
            float *dst = din + t * B + b0;
            for (size_t i = 0; i < NI; i++, dst += ld) {
                VF dv = set ? VZERO() : nb < VW ? VLOADM(dst, bm) : VLOAD(dst);
                for (size_t o = 0; o < O; o++) dv = VFMA(gv[o], VSET1(w[o * NI + i]), dv);
                if (nb < VW) VSTOREM(dst, dv, bm);
                else VSTORE(dst, dv);
            }
        }
}

void VSUF(dd_nn_dense_small_din_fm)(float *din, size_t ld, int set, const float *dout,
                                    const float *w, size_t B, size_t T, size_t NI, size_t O) {
    DD_TEAM(dd_nn_threads(), B * T * NI >= DD_NN_DENSE_SMALL_PAR,
            VSUF(dense_small_din_fm_team), din, ld, set, dout, w, B, T, NI, O);
}
#undef DSB_CASE
#undef DSB_CASES
#undef DHSUM
#undef DNV
