/* Fused GRU recurrence kernels, written once over the vector vocabulary of simd_vec.h and
 * included by gru_fast.c once per instruction set (AVX-512, AVX2). Layout and contract:
 * simd.h (dd_nn_gru_fwd_fast / dd_nn_gru_bwd_fast) and gru_impl.h.
 *
 * Forward, per step t (columns c0 = tB .. c0+B), for blocks of FJ_OF(NV) hidden units x
 * NV <= FNV vectors of columns, in registers:
 * a_g = (b_hh[g] + b_ih[g]) + W_ih[g] x_t + W_hh[g] h_{t-1} for g = r, z (d = 0..D-1 then
 * k = 0..H-1, in order), hn = b_hn + W_hn h_{t-1}, then the cell: r = sigmoid(a_r),
 * z = sigmoid(a_z), gx_n = b_in + W_in x_t, n = tanh(gx_n + r hn), h = n + z (h_{t-1} - n);
 * stores r, z, n, hn (saved for backward) and h (the next step's input); at the end the
 * outputs h_1..h_T go to (B, T, H) by tile transposes. The gates are step-major here
 * (simd.h): step t's rows [r, z, n, hn] are one 4H x B block at 4HB t, which the backward
 * reads as one piece (as 4H rows TB apart, the cell backward waited on cache misses).
 * Backward, per step t from T-1 down:
 *   1. d = dh + dout_t; the cell backward into dG rows [da_r, da_z, da_n r, da_n] and
 *      dh = d z (elementwise);
 *   2. dh += W_hh^T [da_r, da_z, da_n r] for blocks of BK_OF(NV) output rows x NV vectors
 *      in registers, m = 0..3H-1 in order (skipped at t = 0 unless dL/dh0 is wanted).
 *   3. the weight-gradient products' chunks of DD_NN_NT_KC columns that step t completed
 *      (all their columns >= tB), while dG's chunk is in cache (simd.h: the same floats
 *      as the products after the loop).
 * Rows of xfm, hprev and dG are dd_nn_gru_ld(TB) floats apart (not sharing cache sets).
 * Each dot product runs in the same order for every column, so results do not depend on
 * B, on the column's position or on the vector width. */

/* Register blocks are chosen per column block by its count of vectors NV (<= FNV), so
 * that a block fills the register file also when a thread's columns are few (the
 * trainer's 32-frame batch chunks are 2 vectors at AVX-512, 4 at AVX2): FJ_OF(NV) hidden
 * units forward (3 FJ_OF(NV) NV accumulators), BK_OF(NV) output rows backward (BK_OF(NV)
 * NV accumulators). Blocking changes no sum's order (contract above). */
#if defined(DD_VEC_AVX512)
#define FNV 4 /* column vectors per register block (64 columns), at most */
/* forward: 1-2 vectors: 4 units (24 accumulators at 2); 3-4 vectors: 2 (24 at 4) */
#define FJ_OF(NV) ((NV) <= 2 ? 4 : 2)
/* backward: 1-2 vectors: 12 rows (24 accumulators at 2); 3-4 vectors: 6 (24 at 4) */
#define BK_OF(NV) ((NV) <= 2 ? 12 : 6)
#else
#define FNV 2 /* 16 columns; 16 ymm registers */
/* forward: 1 vector: 4 units (12 accumulators), 2 vectors: 2 (12) */
#define FJ_OF(NV) ((NV) <= 1 ? 4 : 2)
#ifndef BK_AVX2
#define BK_AVX2 6
#endif
/* backward: 1 vector: 12 rows (12 accumulators), 2 vectors: BK_AVX2 (12 + 2 operands + a
 * broadcast) */
#define BK_OF(NV) ((NV) <= 1 ? 12 : BK_AVX2)
#endif
/* accumulators per block, at most: 3 FJ_OF(NV) NV and BK_OF(NV) NV (the arrays are sized
 * to this, not to the largest FJ_OF x FNV: GCC keeps an array of 48 zmm in memory) */
#if defined(DD_VEC_AVX512)
#define NACC 24
#else
#define NACC 12
#endif

#if defined(DD_VEC_AVX512)
/* In-register transpose of a 16 x 16 tile: r[i] lane j <-> r[j] lane i. Four butterfly
 * levels; at level b the off-diagonal b x b blocks of each 2b x 2b block swap. */
static const int dd_nn_tr16_idx[4][2][16] = {
    /* level b: lo[j] = j & b ? 16 + j - b : j;  hi[j] = j & b ? 16 + j : j + b */
    {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
     {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}},
    {{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
     {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}},
    {{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
     {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}},
    {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
     {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}}};
static inline __attribute__((always_inline)) void dd_nn_tr16_avx512(__m512 r[16]) {
#pragma GCC unroll 4
    for (int l = 0; l < 4; l++) {
        const int b = 1 << l;
        const __m512i ilo = _mm512_loadu_si512(dd_nn_tr16_idx[l][0]);
        const __m512i ihi = _mm512_loadu_si512(dd_nn_tr16_idx[l][1]);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i & b) continue;
            const __m512 a = r[i], c = r[i + b];
            r[i] = _mm512_permutex2var_ps(a, ilo, c);
            r[i + b] = _mm512_permutex2var_ps(a, ihi, c);
        }
    }
}

#define VTRANSPOSE dd_nn_tr16_avx512
#else
/* In-register transpose of an 8 x 8 tile: r[i] lane j <-> r[j] lane i (unpack within
 * 128-bit lanes, shuffle pairs, swap 128-bit halves). */
static inline __attribute__((always_inline)) void dd_nn_tr8_avx2(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

#define VTRANSPOSE dd_nn_tr8_avx2
#endif

/* dd_nn_bth_to_fm / dd_nn_fm_to_bth (simd.h) by VW x VW tiles transposed in registers
 * (AVX2's were the scalar strided loops, 12 % of a gru step at that level). */
/* Frames [bb, be) only (a thread's columns; bb a multiple of VW or be == B). */
static void VSUF(dd_nn_bth_to_fm)(float *dst, size_t ld, const float *src, size_t B, size_t bb,
                                  size_t be, size_t T, size_t C) {
    VF r[VW];
    if (2 * C <= VW && VW % C == 0) {
        /* narrow rows (the GRU's input, C = 2): a tile holds VW / C steps of VW frames, so
         * that every lane is used (one step per tile stored 2 of 16 rows at AVX-512);
         * lane l of a frame's vector is step t0 + l / C, feature l % C */
        const size_t S = VW / C;
        for (size_t b0 = bb; b0 < be; b0 += VW) {
            const size_t nb = be - b0 < VW ? be - b0 : VW;
            const VM bm = VMASK((int)nb);
            for (size_t t0 = 0; t0 < T; t0 += S) {
                const size_t nl = (T - t0 < S ? T - t0 : S) * C;
                const VM lm = VMASK((int)nl);
#pragma GCC unroll 16
                for (size_t i = 0; i < VW; i++)
                    r[i] = i < nb ? VLOADM(src + ((b0 + i) * T + t0) * C, lm) : VZERO();
                VTRANSPOSE(r);
#pragma GCC unroll 16
                for (size_t l = 0; l < VW; l++)
                    if (l < nl) VSTOREM(dst + (l % C) * ld + (t0 + l / C) * B + b0, r[l], bm);
            }
        }
        return;
    }
    for (size_t b0 = bb; b0 < be; b0 += VW) {
        const size_t nb = be - b0 < VW ? be - b0 : VW;
        const VM bm = VMASK((int)nb);
        for (size_t t = 0; t < T; t++)
            for (size_t c0 = 0; c0 < C; c0 += VW) {
                const size_t nc = C - c0 < VW ? C - c0 : VW;
                const VM cm = VMASK((int)nc);
#pragma GCC unroll 16
                for (size_t i = 0; i < VW; i++)
                    r[i] = i < nb ? VLOADM(src + ((b0 + i) * T + t) * C + c0, cm) : VZERO();
                VTRANSPOSE(r);
#pragma GCC unroll 16
                for (size_t i = 0; i < VW; i++)
                    if (i < nc) VSTOREM(dst + (c0 + i) * ld + t * B + b0, r[i], bm);
            }
    }
}

#if defined(DD_VEC_AVX512)
/* The first three butterfly levels of dd_nn_tr16_avx512 on 8 rows: r[i] lane j <-> r[j]
 * lane i within lanes 0-7 and within lanes 8-15 (two 8 x 8 transposes, 24 permutes
 * instead of the 64 of a 16 x 16 tile with 8 rows of zeros). */
static inline __attribute__((always_inline)) void dd_nn_tr8x16_avx512(__m512 r[8]) {
#pragma GCC unroll 3
    for (int l = 0; l < 3; l++) {
        const int b = 1 << l;
        const __m512i ilo = _mm512_loadu_si512(dd_nn_tr16_idx[l][0]);
        const __m512i ihi = _mm512_loadu_si512(dd_nn_tr16_idx[l][1]);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            if (i & b) continue;
            const __m512 a = r[i], c = r[i + b];
            r[i] = _mm512_permutex2var_ps(a, ilo, c);
            r[i + b] = _mm512_permutex2var_ps(a, ihi, c);
        }
    }
}

/* dd_nn_fm_to_bth for a whole vector of 16 frames (b0): the features in 16 x 16 tiles
 * with unmasked loads and stores, the rest (C % 16, e.g. 7 of gru 23's 23) in tiles of 8
 * rows (dd_nn_tr8x16_avx512: frame i in lanes 0-7 of r[i], frame i + 8 in lanes 8-15).
 * A tail of nc < 8 features is stored as 8 floats, running into the first 8 - nc
 * features of the frame's next step, when this call writes that step later (t + 1 < nt,
 * C >= 8 - nc; the same thread: a frame's steps are one thread's), masked otherwise.
 * Only copies: the floats are those of the masked tiles (perf of gru 23 at AVX-512: this
 * transpose was 9 % of a step, its tail tile a full 16 x 16 transpose of 7 rows). */
static void dd_nn_fm_to_bth16_avx512(float *d0, const float *src, size_t ld, size_t B, size_t b0,
                                     size_t nt, size_t Ts, size_t C) {
    __m512 r[16];
    const size_t fs = Ts * C; /* a frame's floats in dst */
    for (size_t t = 0; t < nt; t++) {
        const float *s = src + t * B + b0;
        float *d = d0 + t * C;
        size_t c0 = 0;
        for (; c0 + 16 <= C; c0 += 16) {
#pragma GCC unroll 16
            for (size_t i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + (c0 + i) * ld);
            dd_nn_tr16_avx512(r);
#pragma GCC unroll 16
            for (size_t i = 0; i < 16; i++) _mm512_storeu_ps(d + i * fs + c0, r[i]);
        }
        for (; c0 < C; c0 += 8) {
            const size_t nc = C - c0 < 8 ? C - c0 : 8;
#pragma GCC unroll 8
            for (size_t i = 0; i < 8; i++) r[i] = i < nc ? _mm512_loadu_ps(s + (c0 + i) * ld) : _mm512_setzero_ps();
            dd_nn_tr8x16_avx512(r);
            if (nc == 8 || (t + 1 < nt && C >= 8 - nc)) {
#pragma GCC unroll 8
                for (size_t i = 0; i < 8; i++) {
                    _mm256_storeu_ps(d + i * fs + c0, _mm512_castps512_ps256(r[i]));
                    _mm256_storeu_ps(d + (i + 8) * fs + c0,
                                     _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r[i]), 1)));
                }
            } else {
                const __mmask16 cm = (__mmask16)((1u << nc) - 1u);
#pragma GCC unroll 8
                for (size_t i = 0; i < 8; i++) {
                    _mm512_mask_storeu_ps(d + i * fs + c0, cm, r[i]);
                    _mm512_mask_storeu_ps(d + (i + 8) * fs + c0, cm, _mm512_shuffle_f32x4(r[i], r[i], 0x4E));
                }
            }
        }
    }
}
#endif

static void VSUF(dd_nn_fm_to_bth)(float *dst, const float *src, size_t ld, size_t B, size_t bb,
                                  size_t be, size_t nt, size_t Ts, size_t C) {
    VF r[VW];
    for (size_t b0 = bb; b0 < be; b0 += VW) {
        const size_t nb = be - b0 < VW ? be - b0 : VW;
#if defined(DD_VEC_AVX512)
        if (nb == VW) {
            dd_nn_fm_to_bth16_avx512(dst + b0 * Ts * C, src, ld, B, b0, nt, Ts, C);
            continue;
        }
#endif
        const VM bm = VMASK((int)nb);
        for (size_t t = 0; t < nt; t++)
            for (size_t c0 = 0; c0 < C; c0 += VW) {
                const size_t nc = C - c0 < VW ? C - c0 : VW;
                const VM cm = VMASK((int)nc);
#pragma GCC unroll 16
                for (size_t i = 0; i < VW; i++)
                    r[i] = i < nc ? VLOADM(src + (c0 + i) * ld + t * B + b0, bm) : VZERO();
                VTRANSPOSE(r);
#pragma GCC unroll 16
                for (size_t i = 0; i < VW; i++)
                    if (i < nb) VSTOREM(dst + ((b0 + i) * Ts + t) * C + c0, r[i], cm);
            }
    }
}
#define VBTH_TO_FM VSUF(dd_nn_bth_to_fm)
#define VFM_TO_BTH VSUF(dd_nn_fm_to_bth)

/* The cell's vector sigmoid (f = 1) or tanh (f = 2) over an array (tests). */
void VSUF(dd_nn_gru_cellfn_fast)(int f, float *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i += VW) {
        const int m = n - i < VW;
        const VM tail = VMASK((int)(m ? n - i : VW));
        const VF x = m ? VLOADM(in + i, tail) : VLOAD(in + i);
        const VF y = f == 1 ? VSUF(v_sigmoid)(x) : VSUF(v_tanh)(x);
        if (m) VSTOREM(out + i, y, tail);
        else VSTORE(out + i, y);
    }
}

/* The column block starting rem columns before the end: its vectors NV (<= FNV), whether
 * the last is partial (mt: masked accesses only then) and that vector's mask. */
static inline __attribute__((always_inline)) int VSUF(gru_col_block)(size_t rem, int *mt,
                                                                     VM *tail) {
    const int NV = rem >= (size_t)FNV * VW ? FNV : (int)((rem + VW - 1) / VW);
    *mt = rem < (size_t)NV * VW;
    *tail = VMASK((int)(rem - (size_t)(NV - 1) * VW));
    return NV;
}

typedef struct {
    size_t B, T, TB, D, H, c0, cb, ce; /* [cb, ce): this thread's columns of a step */
    float *hprev, *gates, *S;
    const float *xfm, *w_ih, *w_hh, *b_ih, *b_hh;
    int last; /* t == T - 1: h_t is not stored into hprev */
} VSUF(gru_fctx);

/* One forward block: hidden units j0 .. j0+J-1, columns col .. col + NV*VW (the last
 * vector masked by tail). J and NV are compile-time constants after inlining. */
static inline __attribute__((always_inline)) void VSUF(gru_fwd_block)(const VSUF(gru_fctx) *x,
                                                                      const int J, const int NV,
                                                                      const int MT, size_t j0,
                                                                      size_t col, VM tail) {
    const size_t H = x->H, TB = x->TB, D = x->D, c = x->c0 + col;
    VF acc[NACC];
    /* r, z: (b_hh + b_ih) + W_i x_t + W_h h_{t-1};  hn: b_hn + W_hn h_{t-1} */
#pragma GCC unroll 16
    for (int g = 0; g < 3; g++)
#pragma GCC unroll 16
        for (int jj = 0; jj < J; jj++) {
            const size_t row = (size_t)g * H + j0 + (size_t)jj;
            float b = x->b_hh ? x->b_hh[row] : 0.0f;
            if (g < 2 && x->b_ih) b += x->b_ih[row];
            const VF b0 = VSET1(b);
#pragma GCC unroll 16
            for (int v = 0; v < NV; v++) acc[(g * J + jj) * NV + v] = b0;
        }
    for (size_t d = 0; d < D; d++) {
        const float *xd = x->xfm + d * TB + c;
        VF xv[FNV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++)
            xv[v] = MT && v == NV - 1 ? VLOADM(xd + (size_t)v * VW, tail) : VLOAD(xd + (size_t)v * VW);
#pragma GCC unroll 16
        for (int g = 0; g < 2; g++)
#pragma GCC unroll 16
            for (int jj = 0; jj < J; jj++) {
                const VF w = VSET1(x->w_ih[((size_t)g * H + j0 + (size_t)jj) * D + d]);
#pragma GCC unroll 16
                for (int v = 0; v < NV; v++) {
                    VF *a = &acc[(g * J + jj) * NV + v];
                    *a = VFMA(w, xv[v], *a);
                }
            }
    }
    for (size_t k = 0; k < H; k++) {
        const float *hk = x->hprev + k * TB + c;
        VF hv[FNV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++)
            hv[v] = MT && v == NV - 1 ? VLOADM(hk + (size_t)v * VW, tail) : VLOAD(hk + (size_t)v * VW);
#pragma GCC unroll 16
        for (int g = 0; g < 3; g++)
#pragma GCC unroll 16
            for (int jj = 0; jj < J; jj++) {
                const VF w = VSET1(x->w_hh[((size_t)g * H + j0 + (size_t)jj) * H + k]);
#pragma GCC unroll 16
                for (int v = 0; v < NV; v++) {
                    VF *a = &acc[(g * J + jj) * NV + v];
                    *a = VFMA(w, hv[v], *a);
                }
            }
    }
#pragma GCC unroll 16
    for (int jj = 0; jj < J; jj++) {
        const size_t j = j0 + (size_t)jj;
        /* gates step-major: rows [r, z, n, hn] of step t at 4 H B t (4 H B floats) */
        float *gr = x->gates + 4 * H * x->c0 + j * x->B + col, *gz = gr + H * x->B;
        float *gn = gz + H * x->B, *ghn = gn + H * x->B;
        const float *hp = x->hprev + j * TB + c;
        /* h_t: the next step's h_{t-1} (hprev column block t+1), or S after the last step */
        float *hd = x->last ? x->S + j * x->B + col : x->hprev + j * TB + c + x->B;
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) {
            const size_t o = (size_t)v * VW;
            const int m = MT && v == NV - 1;
            /* gx_n = b_in + W_in x_t */
            VF gxn = VSET1(x->b_ih ? x->b_ih[2 * H + j] : 0.0f);
            for (size_t d = 0; d < D; d++) {
                const float *xd = x->xfm + d * TB + c + o;
                gxn = VFMA(VSET1(x->w_ih[(2 * H + j) * D + d]), m ? VLOADM(xd, tail) : VLOAD(xd), gxn);
            }
            VF r = VSUF(v_sigmoid)(acc[jj * NV + v]);
            VF z = VSUF(v_sigmoid)(acc[(J + jj) * NV + v]);
            VF hn = acc[(2 * J + jj) * NV + v];
            VF n = VSUF(v_tanh)(VFMA(r, hn, gxn));
            VF hpv = m ? VLOADM(hp + o, tail) : VLOAD(hp + o);
            VF h = VFMA(z, VSUB(hpv, n), n);
            if (m) {
                VSTOREM(gr + o, r, tail);
                VSTOREM(gz + o, z, tail);
                VSTOREM(gn + o, n, tail);
                VSTOREM(ghn + o, hn, tail);
                VSTOREM(hd + o, h, tail);
            } else {
                VSTORE(gr + o, r);
                VSTORE(gz + o, z);
                VSTORE(gn + o, n);
                VSTORE(ghn + o, hn);
                VSTORE(hd + o, h);
            }
        }
    }
}

/* One block with compile-time J, NV and MT (masked last vector). */
/* each (J, NV, MT) its own function: inlined into one loop nest, the blocks' register
 * allocation suffered from the others' (spilled accumulators) */
#define FWD_FN(J, NV, MT)                                                                   \
    static __attribute__((noinline)) void VSUF(gru_fwd_##J##_##NV##_##MT)(                  \
        const VSUF(gru_fctx) *x, size_t j0, size_t col, VM tail) {                          \
        VSUF(gru_fwd_block)(x, (J), (NV), (MT), j0, col, tail);                             \
    }
#define FWD_FNS(J, NV) FWD_FN(J, NV, 0) FWD_FN(J, NV, 1)
FWD_FNS(1, 1)
FWD_FNS(2, 1)
FWD_FNS(1, 2)
FWD_FNS(2, 2)
#if FJ_OF(1) > 2
FWD_FNS(3, 1)
FWD_FNS(4, 1)
#endif
#if FJ_OF(2) > 2
FWD_FNS(3, 2)
FWD_FNS(4, 2)
#endif
#if FNV > 2
FWD_FNS(1, 3)
FWD_FNS(2, 3)
FWD_FNS(1, 4)
FWD_FNS(2, 4)
#endif
#define FWD_CASE(J, NV)                                                     \
    case (J) * 8 + (NV):                                                    \
        if (mt) VSUF(gru_fwd_##J##_##NV##_1)(x, j0, col, tail);            \
        else VSUF(gru_fwd_##J##_##NV##_0)(x, j0, col, tail);               \
        break;
static void VSUF(gru_fwd_blocks)(const VSUF(gru_fctx) *x) {
    const size_t B = x->ce, H = x->H;
    for (size_t col = x->cb; col < B; col += (size_t)FNV * VW) {
        int mt;
        VM tail;
        const int NV = VSUF(gru_col_block)(B - col, &mt, &tail);
        const int fj = FJ_OF(NV);
        for (size_t j0 = 0; j0 < H; j0 += (size_t)fj) {
            const int J = H - j0 >= (size_t)fj ? fj : (int)(H - j0);
            switch (J * 8 + NV) {
                FWD_CASE(1, 1)
                FWD_CASE(2, 1)
                FWD_CASE(1, 2)
                FWD_CASE(2, 2)
#if FJ_OF(1) > 2
                FWD_CASE(3, 1)
                FWD_CASE(4, 1)
#endif
#if FJ_OF(2) > 2
                FWD_CASE(3, 2)
                FWD_CASE(4, 2)
#endif
#if FNV > 2
                FWD_CASE(1, 3)
                FWD_CASE(2, 3)
                FWD_CASE(1, 4)
                FWD_CASE(2, 4)
#endif
            default: break;
            }
        }
    }
}
#undef FWD_CASE
#undef FWD_FN
#undef FWD_FNS

/* A thread's share: whole vectors of columns (frames) for all T steps; a column's
 * recurrence needs only its own column, so no step waits for another thread. */
static void VSUF(gru_fwd_team)(float *out, float *hprev, float *gates, float *S, float *xfm, const float *xin,
                               const float *h0, const float *w_ih, const float *w_hh, const float *b_ih,
                               const float *b_hh, size_t B, size_t T, size_t D, size_t H, int tid, int nt) {
    const size_t TB = dd_nn_gru_ld(T * B); /* the rows' stride (TB columns used) */
    VSUF(gru_fctx) x = {B, T, TB, D, H, 0, 0, B, hprev, gates, S, xfm, w_ih, w_hh, b_ih, b_hh, 0};
    dd_nn_thread_cols(B, VW, tid, nt, &x.cb, &x.ce);
    /* this thread's frames of the input, feature-major, and of h0 (column block 0) */
    if (x.cb < x.ce) {
        VBTH_TO_FM(xfm, TB, xin, B, x.cb, x.ce, T, D);
        for (size_t j = 0; j < H; j++)
            for (size_t b = x.cb; b < x.ce; b++) hprev[j * TB + b] = h0 ? h0[b * H + j] : 0.0f;
    }
    for (size_t t = 0; t < T && x.cb < x.ce; t++) {
        /* input and recurrent products and the cell, in registers */
        x.c0 = t * B;
        x.last = t + 1 == T;
        VSUF(gru_fwd_blocks)(&x);
    }
    /* 3. h_1..h_T of this thread's frames to out (B, T, H): h_t is hprev column block
     * t+1 (t < T-1), S (t = T-1) */
    if (x.cb < x.ce) {
        if (T > 1) VFM_TO_BTH(out, hprev + B, TB, B, x.cb, x.ce, T - 1, T, H);
        VFM_TO_BTH(out + (T - 1) * H, S, B, B, x.cb, x.ce, 1, T, H);
    }
}

void VSUF(dd_nn_gru_fwd_fast)(float *out, float *hprev, float *gates, float *S, float *xfm,
                              const float *xin, const float *h0, const float *w_ih,
                              const float *w_hh, const float *b_ih, const float *b_hh, size_t B,
                              size_t T, size_t D, size_t H) {
    DD_TEAM(dd_nn_threads(), B > VW,
            VSUF(gru_fwd_team), out, hprev, gates, S, xfm, xin, h0, w_ih, w_hh, b_ih, b_hh, B, T, D, H);
}

typedef struct {
    size_t B, TB, H, c0, cb, ce; /* [cb, ce): this thread's columns */
    float *dG, *dh;
    const float *w_hh;
} VSUF(gru_bctx);

/* dh[k0 .. k0+K-1, col .. col + NV*VW] += sum_m W_hh[m, k] dG[m, c0 + col ...], m < 3H. */
static inline __attribute__((always_inline)) void VSUF(gru_bwd_block)(const VSUF(gru_bctx) *x,
                                                                      const int K, const int NV,
                                                                      const int MT, size_t k0,
                                                                      size_t col, VM tail) {
    const size_t B = x->B, TB = x->TB, H = x->H, M = 3 * H;
    VF acc[NACC];
#pragma GCC unroll 16
    for (int kk = 0; kk < K; kk++) {
        const float *d = x->dh + (k0 + (size_t)kk) * B + col;
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++)
            acc[kk * NV + v] =
                MT && v == NV - 1 ? VLOADM(d + (size_t)v * VW, tail) : VLOAD(d + (size_t)v * VW);
    }
    const float *g = x->dG + x->c0 + col;
    const float *w = x->w_hh + k0;
    for (size_t m = 0; m < M; m++, g += TB, w += H) {
        VF gv[FNV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++)
            gv[v] = MT && v == NV - 1 ? VLOADM(g + (size_t)v * VW, tail) : VLOAD(g + (size_t)v * VW);
#pragma GCC unroll 16
        for (int kk = 0; kk < K; kk++) {
            const VF wv = VSET1(w[kk]);
#pragma GCC unroll 16
            for (int v = 0; v < NV; v++) acc[kk * NV + v] = VFMA(wv, gv[v], acc[kk * NV + v]);
        }
    }
#pragma GCC unroll 16
    for (int kk = 0; kk < K; kk++) {
        float *d = x->dh + (k0 + (size_t)kk) * B + col;
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) {
            if (MT && v == NV - 1) VSTOREM(d + (size_t)v * VW, acc[kk * NV + v], tail);
            else VSTORE(d + (size_t)v * VW, acc[kk * NV + v]);
        }
    }
}

#define BWD_FN(K, NV, MT)                                                                   \
    static __attribute__((noinline)) void VSUF(gru_bwd_##K##_##NV##_##MT)(                  \
        const VSUF(gru_bctx) *x, size_t k0, size_t col, VM tail) {                          \
        VSUF(gru_bwd_block)(x, (K), (NV), (MT), k0, col, tail);                             \
    }
#define BWD_FNS(K, NV) BWD_FN(K, NV, 0) BWD_FN(K, NV, 1)
#define BWD_FNS6(NV) BWD_FNS(1, NV) BWD_FNS(2, NV) BWD_FNS(3, NV) BWD_FNS(4, NV) BWD_FNS(5, NV) \
    BWD_FNS(6, NV)
#define BWD_FNS12(NV) BWD_FNS6(NV) BWD_FNS(7, NV) BWD_FNS(8, NV) BWD_FNS(9, NV) BWD_FNS(10, NV) \
    BWD_FNS(11, NV) BWD_FNS(12, NV)
BWD_FNS12(1)
#if BK_OF(2) > 6
BWD_FNS12(2)
#else
BWD_FNS6(2)
#endif
#if FNV > 2
BWD_FNS6(3)
BWD_FNS6(4)
#endif
#define BWD_CASE(K, NV)                                                     \
    case (K) * 8 + (NV):                                                    \
        if (mt) VSUF(gru_bwd_##K##_##NV##_1)(x, k0, col, tail);            \
        else VSUF(gru_bwd_##K##_##NV##_0)(x, k0, col, tail);               \
        break;
#define BWD_CASES6(NV) BWD_CASE(1, NV) BWD_CASE(2, NV) BWD_CASE(3, NV) \
    BWD_CASE(4, NV) BWD_CASE(5, NV) BWD_CASE(6, NV)
#define BWD_CASES12(NV) BWD_CASES6(NV) BWD_CASE(7, NV) BWD_CASE(8, NV) BWD_CASE(9, NV) \
    BWD_CASE(10, NV) BWD_CASE(11, NV) BWD_CASE(12, NV)
static void VSUF(gru_bwd_blocks)(const VSUF(gru_bctx) *x) {
    const size_t B = x->ce, H = x->H;
    for (size_t col = x->cb; col < B; col += (size_t)FNV * VW) {
        int mt;
        VM tail;
        const int NV = VSUF(gru_col_block)(B - col, &mt, &tail);
        const int bk = BK_OF(NV);
        for (size_t k0 = 0; k0 < H; k0 += (size_t)bk) {
            const int K = H - k0 >= (size_t)bk ? bk : (int)(H - k0);
            switch (K * 8 + NV) {
                BWD_CASES12(1)
#if BK_OF(2) > 6
                BWD_CASES12(2)
#else
                BWD_CASES6(2)
#endif
#if FNV > 2
                BWD_CASES6(3)
                BWD_CASES6(4)
#endif
            default: break;
            }
        }
    }
}
#undef BWD_CASE
#undef BWD_FN
#undef BWD_FNS
#undef BWD_FNS6
#undef BWD_FNS12
#undef BWD_CASES6
#undef BWD_CASES12

/* The cell backward prefetches the dG lines it will write GPF steps later: the 3H rows
 * [da_r, da_z, da_n r] hold stale values from the last batch, and their lines were read for
 * ownership at the stores (3H rows LD apart, 3H streams the hardware prefetchers did not
 * follow). Prefetching the rows it reads too (dout in dG's last H rows, h_{t-1}) measured
 * 2 % slower; distances of 1 to 8 steps alike (docs/performance.md). */
#define GPF 2
/* gemm_fast_impl.h (included after this file): one product's chunks */
static void VSUF(gemm_nt_run)(const dd_nn_nt_prod *p, int tid, int nt);

/* The weight-gradient products' chunks [lo, hi) into part (dd_nn_gru_bwd_fast, simd.h):
 * each chunk as the single product runs it (gemm_nt_run over its kn columns, thread tid of
 * nt taking its share of the row blocks). */
static void VSUF(gru_wgrad_chunks)(const dd_nn_nt_prod *p, int np, float *part, size_t lo,
                                   size_t hi, int tid, int nt) {
    const size_t per = dd_nn_nt_part_size(p, np);
    for (size_t c = hi; c-- > lo;) {
        size_t off = 0;
        for (int i = 0; i < np; i++) {
            const size_t k0 = c * DD_NN_NT_KC, M = p[i].M, N = p[i].N;
            dd_nn_nt_prod q = p[i];
            q.K = p[i].K - k0 < DD_NN_NT_KC ? p[i].K - k0 : DD_NN_NT_KC;
            q.A = p[i].A + k0;
            q.Bm = p[i].Bm + k0;
            q.C = p[i].C ? part + c * per + off : NULL;
            q.ldc = N;
            q.rowsum = p[i].rowsum ? part + c * per + off + M * N : NULL;
            VSUF(gemm_nt_run)(&q, tid, nt);
            off += M * (N + 1);
        }
    }
}

/* A thread's share: whole vectors of columns, all steps (as forward). */
static void VSUF(gru_bwd_team)(float *dG, float *dh, const float *dout, size_t ldo, const float *gates,
                               const float *hprev, const float *w_hh, size_t B, size_t T, size_t H, int want_dh0,
                               const dd_nn_nt_prod *p, int np, float *part, int tid, int nt) {
    const size_t TB = dd_nn_gru_ld(T * B); /* the rows' stride (T B columns used) */
    const VF one = VSET1(1.0f);
    VSUF(gru_bctx) x = {B, TB, H, 0, 0, B, dG, dh, w_hh};
    dd_nn_thread_cols(B, VW, tid, nt, &x.cb, &x.ce);
    const size_t cb = x.cb, ce = x.ce;
    /* the weight-gradient chunks [0, nxt) are still to run (np > 0) */
    size_t nxt = np > 0 ? (T * B + DD_NN_NT_KC - 1) / DD_NN_NT_KC : 0;
    /* dout (B, T, H) of this thread's frames feature-major into dG rows [3H, 4H) (step t
     * reads its columns there before it overwrites them with da_n); a feature-major dout
     * (ldo > 0) is read where it is */
    if (cb < ce && !ldo) VBTH_TO_FM(dG + 3 * H * TB, TB, dout, B, cb, ce, T, H);
    const float *const dq = ldo ? dout : dG + 3 * H * TB;
    const size_t ldq = ldo ? ldo : TB;
    const VM tail = VMASK((ce - cb) % VW ? (int)((ce - cb) % VW) : VW);
    /* without weight-gradient chunks a thread with no columns has nothing to do; with
     * them every thread runs every step (the barriers below) */
    for (size_t t = T; (cb < ce || nxt > 0) && t-- > 0;) {
        const size_t c0 = t * B;
        /* 1. cell backward, d = dh + dout_t */
        for (size_t j = 0; j < H && cb < ce; j++) {
            const size_t cr = j * TB + c0, cz = (H + j) * TB + c0, cn = (2 * H + j) * TB + c0;
            const size_t ch = (3 * H + j) * TB + c0;
            const float *dqj = dq + j * ldq + c0;
            const float *gr = gates + 4 * H * c0 + j * B, *gz = gr + H * B, *gn = gz + H * B;
            const float *ghn = gn + H * B;
            float *d = dh + j * B;
            for (size_t o = cb; o < ce; o += VW) {
                const int m = ce - o < VW;
                if (t >= GPF) { /* step t - GPF's rows da_r, da_z, da_n r (see GPF) */
                    _mm_prefetch((const char *)(dG + cr - GPF * B + o), _MM_HINT_T0);
                    _mm_prefetch((const char *)(dG + cz - GPF * B + o), _MM_HINT_T0);
                    _mm_prefetch((const char *)(dG + cn - GPF * B + o), _MM_HINT_T0);
                }
                VF dd = VADD(m ? VLOADM(d + o, tail) : VLOAD(d + o),
                             m ? VLOADM(dqj + o, tail) : VLOAD(dqj + o));
                VF r = m ? VLOADM(gr + o, tail) : VLOAD(gr + o);
                VF z = m ? VLOADM(gz + o, tail) : VLOAD(gz + o);
                VF nv = m ? VLOADM(gn + o, tail) : VLOAD(gn + o);
                VF hn = m ? VLOADM(ghn + o, tail) : VLOAD(ghn + o);
                VF hp = m ? VLOADM(hprev + j * TB + c0 + o, tail) : VLOAD(hprev + j * TB + c0 + o);
                VF an = VMUL(VMUL(dd, VSUB(one, z)), VFNMA(nv, nv, one));
                VF dar = VMUL(VMUL(VMUL(an, hn), r), VSUB(one, r));
                VF daz = VMUL(VMUL(VMUL(dd, VSUB(hp, nv)), z), VSUB(one, z));
                VF danr = VMUL(an, r);
                VF dz = VMUL(dd, z);
                if (m) {
                    VSTOREM(dG + cr + o, dar, tail);
                    VSTOREM(dG + cz + o, daz, tail);
                    VSTOREM(dG + cn + o, danr, tail);
                    VSTOREM(dG + ch + o, an, tail);
                    VSTOREM(d + o, dz, tail);
                } else {
                    VSTORE(dG + cr + o, dar);
                    VSTORE(dG + cz + o, daz);
                    VSTORE(dG + cn + o, danr);
                    VSTORE(dG + ch + o, an);
                    VSTORE(d + o, dz);
                }
            }
        }
        /* 2. dh_{t-1} = d z + W_hh^T [da_r, da_z, da_n r] */
        if (t > 0 || want_dh0) {
            x.c0 = c0;
            VSUF(gru_bwd_blocks)(&x);
        }
        /* 3. the weight-gradient chunks whose columns are all final now (>= c0), while
         * they are in cache; every thread of the team comes here at the same steps */
        size_t lo = nxt;
        while (lo > 0 && (lo - 1) * DD_NN_NT_KC >= c0) lo--;
        if (lo < nxt) {
#ifdef _OPENMP
            if (nt > 1) {
#pragma omp barrier
            }
#endif
            VSUF(gru_wgrad_chunks)(p, np, part, lo, nxt, tid, nt);
            nxt = lo;
        }
    }
}

void VSUF(dd_nn_gru_bwd_fast)(float *dG, float *dh, const float *dout, size_t ldo,
                              const float *gates, const float *hprev, const float *w_hh, size_t B,
                              size_t T, size_t H, int want_dh0, const dd_nn_nt_prod *p, int np,
                              float *part) {
    DD_TEAM(dd_nn_threads(), B > VW,
            VSUF(gru_bwd_team), dG, dh, dout, ldo, gates, hprev, w_hh, B, T, H, want_dh0, p, np, part);
}

#undef FNV
#undef GPF
#undef NACC
#undef FJ_OF
#undef BK_OF
#undef VBTH_TO_FM
#undef VFM_TO_BTH
#undef VTRANSPOSE
