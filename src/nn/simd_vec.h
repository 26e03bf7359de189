/* Vector vocabulary of the SIMD kernel templates (private to src/nn): after defining
 * DD_VEC_AVX512 or DD_VEC_AVX2 and entering the matching `#pragma GCC target` region,
 * a translation unit includes this header and then its *_fast_impl.h template. It
 * (re)defines:
 *   VF, VM          a vector of VW floats and a lane mask
 *   VW              floats per vector (16 or 8)
 *   VSUF(name)      name##_avx512 / name##_avx2 (function-name suffix)
 *   VLOAD/VSTORE    unaligned load / store; VLOADM/VSTOREM masked (masked-off lanes load 0
 *                   and are not written)
 *   VMASK(n)        mask of the first n lanes (0 < n <= VW)
 *   VSET1, VZERO, VADD, VSUB, VMUL, VDIV, VMIN, VMAX, VFMA(a, b, c) = a*b + c (fused),
 *   VFNMA(a, b, c) = c - a*b (fused)
 *   v_sigmoid, v_tanh: float32 approximations with fused multiply-adds: v_tanh the
 *                   rational function of dd_nn_tanhf (nn_real.h), v_sigmoid a cheaper
 *                   exp than dd_nn_sigmoidf's (see there); NaN propagates (min/max take
 *                   the NaN operand second).
 * Requires <immintrin.h> (included by the caller before the pragma). */
#undef VF
#undef VM
#undef VW
#undef VSUF
#undef VSUF_
#undef VLOAD
#undef VSTORE
#undef VLOADM
#undef VSTOREM
#undef VMASK
#undef VSET1
#undef VZERO
#undef VADD
#undef VSUB
#undef VMUL
#undef VDIV
#undef VMIN
#undef VMAX
#undef VFMA
#undef VFNMA
#undef VI
#undef VI_SLL23
#undef VCAST_I
#undef VCAST_F

#if defined(DD_VEC_AVX512)
#define VF __m512
#define VM __mmask16
#define VW 16
#define VSUF_(name) name##_avx512
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps((p), (v))
#define VLOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define VSTOREM(p, v, m) _mm512_mask_storeu_ps((p), (m), (v))
#define VMASK(n) ((__mmask16)((n) >= 16 ? 0xFFFFu : ((1u << (n)) - 1u)))
#define VSET1(x) _mm512_set1_ps(x)
#define VZERO() _mm512_setzero_ps()
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VDIV _mm512_div_ps
#define VMIN _mm512_min_ps
#define VMAX _mm512_max_ps
#define VFMA _mm512_fmadd_ps
#define VFNMA _mm512_fnmadd_ps
#define VI __m512i
#define VI_SLL23(a) _mm512_slli_epi32((a), 23)
#define VCAST_I _mm512_castps_si512
#define VCAST_F _mm512_castsi512_ps
#elif defined(DD_VEC_AVX2)
#define VF __m256
#define VM __m256i
#define VW 8
#define VSUF_(name) name##_avx2
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps((p), (v))
#define VLOADM(p, m) _mm256_maskload_ps((p), (m))
#define VSTOREM(p, v, m) _mm256_maskstore_ps((p), (m), (v))
#define VMASK(n) _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define VSET1(x) _mm256_set1_ps(x)
#define VZERO() _mm256_setzero_ps()
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VDIV _mm256_div_ps
#define VMIN _mm256_min_ps
#define VMAX _mm256_max_ps
#define VFMA _mm256_fmadd_ps
#define VFNMA _mm256_fnmadd_ps
#define VI __m256i
#define VI_SLL23(a) _mm256_slli_epi32((a), 23)
#define VCAST_I _mm256_castps_si256
#define VCAST_F _mm256_castsi256_ps
#else
#error "define DD_VEC_AVX512 or DD_VEC_AVX2 before including simd_vec.h"
#endif
#define VSUF(name) VSUF_(name)

/* 1 / (1 + exp(-x)) with exp(-x) = 2^n p(r), -x = n ln2 + r, |r| <= ln2/2 (issue 17:
 * 13 floating-point operations and one integer shift per vector; with the Cephes exp of
 * the scalar dd_nn_sigmoidf it took 19 and two integer operations):
 * - n = round(-x log2 e) by the 1.5*2^23 trick, with 127 added to the magic constant so
 *   that the low bits of t are n + 127: 2^n is t's bits shifted left by 23 (no
 *   float->int round trip, no bias add);
 * - one-constant reduction s = x + n ln2 = -r in one FMA (the float ln2 is off by 1.9e-9,
 *   so r is off by at most 2.4e-7 n / 127 relative to exp);
 * - p(r) = q(s), q the degree-5 minimax polynomial of exp on [-ln2/2, ln2/2] (relative
 *   error 7.5e-8, Remez in mpmath) with the odd coefficients negated, by Horner (5 FMAs;
 *   Cephes: degree 7, 8 operations).
 * x is clamped to [-DD_NN_EXP_HI, -DD_NN_EXP_LO] like dd_nn_sigmoidf (n in [-126, 127]:
 * 2^n stays normal). Max relative error over every float32 input, measured by
 * tests/test_nn_vecmath.c: 2.3e-7 for |x| <= 20, 3.7e-7 for |x| <= 87 (the scalar
 * dd_nn_sigmoidf: 1.5e-7); NaN propagates (min/max take the NaN operand second). */
static inline VF VSUF(v_sigmoid)(VF x) {
    const VF magic = VSET1(12583039.0f); /* 1.5 * 2^23 + 127 */
    x = VMIN(VSET1(-DD_NN_EXP_LO), x);
    x = VMAX(VSET1(-DD_NN_EXP_HI), x);
    const VF t = VFMA(x, VSET1(-1.44269504088896341f), magic);
    const VF n = VSUB(t, magic);
    const VF s = VFMA(n, VSET1(0.693147180559945309f), x);
    VF q = VSET1(-8.2976551982714186e-3f);
    q = VFMA(q, s, VSET1(4.1915381977922723e-2f));
    q = VFMA(q, s, VSET1(-1.6667574726749988e-1f));
    q = VFMA(q, s, VSET1(4.9998894851472441e-1f));
    q = VFMA(q, s, VSET1(-9.9999969199228336e-1f));
    q = VFMA(q, s, VSET1(1.0000000716546416f));
    const VF e = VMUL(q, VCAST_F(VI_SLL23(VCAST_I(t))));
    return VDIV(VSET1(1.0f), VADD(VSET1(1.0f), e));
}

/* tanh(x), the rational approximation of dd_nn_tanhf. */
static inline VF VSUF(v_tanh)(VF x) {
    x = VMIN(VSET1(DD_NN_TANH_CLAMP), x);
    x = VMAX(VSET1(-DD_NN_TANH_CLAMP), x);
    VF x2 = VMUL(x, x);
    VF p = VSET1(-2.76076847742355e-16f);
    p = VFMA(p, x2, VSET1(2.00018790482477e-13f));
    p = VFMA(p, x2, VSET1(-8.60467152213735e-11f));
    p = VFMA(p, x2, VSET1(5.12229709037114e-08f));
    p = VFMA(p, x2, VSET1(1.48572235717979e-05f));
    p = VFMA(p, x2, VSET1(6.37261928875436e-04f));
    p = VFMA(p, x2, VSET1(4.89352455891786e-03f));
    VF q = VSET1(1.19825839466702e-06f);
    q = VFMA(q, x2, VSET1(1.18534705686654e-04f));
    q = VFMA(q, x2, VSET1(2.26843463243900e-03f));
    q = VFMA(q, x2, VSET1(4.89352518554385e-03f));
    return VDIV(VMUL(x, p), q);
}
