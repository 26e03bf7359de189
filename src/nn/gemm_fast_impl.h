/* "Long and thin" matrix products of the backward passes, written once over the vector
 * vocabulary of simd_vec.h and included by gemm_fast.c once per instruction set:
 *   C (M x N) += A (M x K) B (N x K)^T,   rowsum[i] += sum_k A[i, k]  (rowsum may be NULL)
 * with small M and N and a long K (the B*T columns of a batch): the weight and bias
 * gradients of a recurrent layer, dW = dG hprev^T and db = dG 1. Blocks of GM rows of A x
 * NB rows of B (NB <= GN; plus GM row-sum accumulators) stay in registers over a chunk of
 * KC columns (L1-resident), then are reduced across lanes and added to C. The order of
 * every sum is fixed by (K, KC, VW), not by the blocking, so results are reproducible
 * (and the same for any GM, GN). The block fits the register file: 4 x 5 (+4 +9 operands)
 * in AVX-512's 32 registers, 3 x 3 (+3 +4) in AVX2's 16 (4 x 5 there spilled to the stack
 * in the inner loop). */

#define GKC DD_NN_NT_KC /* columns per chunk (simd.h) */
#if defined(DD_VEC_AVX512)
#define GM 4       /* rows of A per block */
#define GN 5       /* rows of B per block, at most */
#else
#ifndef GM_AVX2
#define GM_AVX2 3
#define GN_AVX2 3
#endif
#define GM GM_AVX2
#define GN GN_AVX2
#endif

#if defined(DD_VEC_AVX512)
#define VHSUM(v) _mm512_reduce_add_ps(v)
#else
static inline float dd_nn_hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
#define VHSUM(v) dd_nn_hsum_avx2(v)
#endif

/* One block over columns [k0, k0 + kn): rows a[0..MR-1] (MR <= GM; pointers at column k0),
 * b[0..NBc-1]. The last block of rows has MR = M % GM (M = 69, gru 23's 3H: one row, which
 * a GM-row block computed four times over). */
static inline __attribute__((always_inline)) void VSUF(gemm_nt_block)(
    const int MR, const int NBc, const int SUM, const float *const *a, const float *const *b, size_t kn,
    float *C, size_t ldc, float *rowsum) {
    VF acc[GM][GN], sacc[GM];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        sacc[i] = VZERO();
#pragma GCC unroll 8
        for (int j = 0; j < NBc; j++) acc[i][j] = VZERO();
    }
    const size_t kf = kn / VW * VW;
    size_t k = 0;
    for (; k < kf; k += VW) {
        VF av[GM], bv[GN];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) av[i] = VLOAD(a[i] + k);
#pragma GCC unroll 8
        for (int j = 0; j < NBc; j++) bv[j] = VLOAD(b[j] + k);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
#pragma GCC unroll 8
            for (int j = 0; j < NBc; j++) acc[i][j] = VFMA(av[i], bv[j], acc[i][j]);
            if (SUM) sacc[i] = VADD(sacc[i], av[i]);
        }
    }
    if (k < kn) {
        const VM m = VMASK((int)(kn - k));
        VF av[GM], bv[GN];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) av[i] = VLOADM(a[i] + k, m);
#pragma GCC unroll 8
        for (int j = 0; j < NBc; j++) bv[j] = VLOADM(b[j] + k, m);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
#pragma GCC unroll 8
            for (int j = 0; j < NBc; j++) acc[i][j] = VFMA(av[i], bv[j], acc[i][j]);
            if (SUM) sacc[i] = VADD(sacc[i], av[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
#pragma GCC unroll 8
        for (int j = 0; j < NBc; j++) C[(size_t)i * ldc + (size_t)j] += VHSUM(acc[i][j]);
        if (SUM) rowsum[i] += VHSUM(sacc[i]);
    }
}

#define NT_CASE(MR, NB, S)                                                                \
    case (NB) * 2 + (S):                                                                  \
        VSUF(gemm_nt_block)((MR), (NB), (S), a, b, kn, C ? C + i0 * ldc + j0 : C, ldc,    \
                            rowsum ? rowsum + i0 : NULL);                                 \
        break;
#if GN >= 5
#define NT_CASES45(MR) NT_CASE(MR, 4, 0) NT_CASE(MR, 4, 1) NT_CASE(MR, 5, 0) NT_CASE(MR, 5, 1)
#elif GN >= 4
#define NT_CASES45(MR) NT_CASE(MR, 4, 0) NT_CASE(MR, 4, 1)
#else
#define NT_CASES45(MR)
#endif
#define NT_ROWS(MR)                                                                        \
    case (MR):                                                                             \
        switch (nb * 2 + s) {                                                              \
            NT_CASE(MR, 0, 1)                                                              \
            NT_CASE(MR, 1, 0)                                                              \
            NT_CASE(MR, 1, 1)                                                              \
            NT_CASE(MR, 2, 0)                                                              \
            NT_CASE(MR, 2, 1)                                                              \
            NT_CASE(MR, 3, 0)                                                              \
            NT_CASE(MR, 3, 1)                                                              \
            NT_CASES45(MR)                                                                 \
        default: break;                                                                    \
        }                                                                                  \
        break;
/* One product's chunks; thread tid of nt runs a contiguous range of its row blocks (the
 * same blocks for every chunk). */
static void VSUF(gemm_nt_run)(const dd_nn_nt_prod *p, int tid, int nt) {
    const size_t M = p->M, N = p->N, K = p->K, lda = p->lda, ldb = p->ldb, ldc = p->ldc;
    const float *const A = p->A, *const Bm = p->Bm;
    float *const C = p->C, *const rowsum = p->rowsum;
    if (M == 0) return;
    const size_t nblk = (M + GM - 1) / GM;
    size_t ib0, ib1;
    dd_team_share(nblk, tid, nt, &ib0, &ib1);
    for (size_t k0 = 0; k0 < K; k0 += GKC) {
        const size_t kn = K - k0 < GKC ? K - k0 : GKC;
        /* a group of GN rows of B (GN KC floats, 20 KB at AVX-512: L1) against every block
         * of A rows, streamed from L2 (rows of A outside, B's 23 rows, 92 KB, came from L2
         * once per block of A: about 10 % slower for gru 23's dW_hh); the row sums ride
         * along with the first group (or alone if N == 0) */
        for (size_t j0 = 0; j0 < N || (j0 == 0 && rowsum); j0 += GN) {
            const int nb = N - j0 < GN ? (int)(N - j0) : GN;
            const int s = j0 == 0 && rowsum;
            const float *b[GN];
            for (int j = 0; j < nb; j++) b[j] = Bm + (j0 + (size_t)j) * ldb + k0;
            /* the same blocks of rows for every group and chunk: every element of C and
             * rowsum is summed by one thread, in chunk order */
            for (size_t ib = ib0; ib < ib1; ib++) {
                const size_t i0 = ib * GM;
                const int mrows = M - i0 < GM ? (int)(M - i0) : GM;
                const float *a[GM];
                for (int i = 0; i < mrows; i++) a[i] = A + (i0 + (size_t)i) * lda + k0;
                switch (mrows) {
                    NT_ROWS(1)
                    NT_ROWS(2)
                    NT_ROWS(3)
#if GM >= 4
                    NT_ROWS(4)
#endif
                default: break;
                }
            }
            if (N == 0) break;
        }
    }
}

/* n independent products in one parallel region (the GRU's dW_hh and two dW_ih parts:
 * one thread wake-up instead of three); threads: ranges of blocks of GM rows of each C
 * (the same blocks for every chunk), so every element is summed by one thread in chunk
 * order, as on one thread. */
static void VSUF(gemm_nt_team)(const dd_nn_nt_prod *p, int n, int tid, int nt) {
    for (int i = 0; i < n; i++) VSUF(gemm_nt_run)(&p[i], tid, nt);
}

void VSUF(dd_nn_gemm_nt_fast_n)(const dd_nn_nt_prod *p, int n) {
    int par = 0;
    for (int i = 0; i < n; i++) par |= p[i].M > GM && p[i].K >= 2 * GKC;
    DD_TEAM(dd_nn_threads(), par, VSUF(gemm_nt_team), p, n);
}

void VSUF(dd_nn_gemm_nt_fast)(size_t M, size_t N, size_t K, const float *A, size_t lda,
                              const float *Bm, size_t ldb, float *C, size_t ldc, float *rowsum) {
    const dd_nn_nt_prod p = {M, N, K, A, lda, Bm, ldb, C, ldc, rowsum};
    VSUF(dd_nn_gemm_nt_fast_n)(&p, 1);
}
#undef NT_CASE
#undef NT_CASES45
#undef NT_ROWS
#undef VHSUM
#undef GM
#undef GN
#undef GKC
