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
 *   v_exp_core, v_sigmoid, v_tanh: the float32 approximations of nn_real.h
 *                   (dd_nn_expf_core, dd_nn_sigmoidf, dd_nn_tanhf) with fused
 *                   multiply-adds; NaN propagates (min/max take the NaN operand second).
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
#undef VI_SET1
#undef VI_SUB
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
#define VI_SET1 _mm512_set1_epi32
#define VI_SUB _mm512_sub_epi32
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
#define VI_SET1 _mm256_set1_epi32
#define VI_SUB _mm256_sub_epi32
#define VI_SLL23(a) _mm256_slli_epi32((a), 23)
#define VCAST_I _mm256_castps_si256
#define VCAST_F _mm256_castsi256_ps
#else
#error "define DD_VEC_AVX512 or DD_VEC_AVX2 before including simd_vec.h"
#endif
#define VSUF(name) VSUF_(name)

/* exp(x) for x in [DD_NN_EXP_LO, DD_NN_EXP_HI] (dd_nn_expf_core). */
static inline VF VSUF(v_exp_core)(VF x) {
    const VF magic = VSET1(12582912.0f);
    VF n = VSUB(VFMA(x, VSET1(1.44269504088896341f), magic), magic);
    VF r = VFNMA(n, VSET1(0.693359375f), x);
    r = VFNMA(n, VSET1(-2.12194440e-4f), r);
    VF p = VSET1(1.9875691500e-4f);
    p = VFMA(p, r, VSET1(1.3981999507e-3f));
    p = VFMA(p, r, VSET1(8.3334519073e-3f));
    p = VFMA(p, r, VSET1(4.1665795894e-2f));
    p = VFMA(p, r, VSET1(1.6666665459e-1f));
    p = VFMA(p, r, VSET1(5.0000001201e-1f));
    p = VADD(VFMA(VMUL(p, r), r, r), VSET1(1.0f));
    VI e = VI_SLL23(VI_SUB(VCAST_I(VADD(n, VSET1(8388735.0f))), VI_SET1(0x4B000000)));
    return VMUL(p, VCAST_F(e));
}

/* 1 / (1 + exp(-x)), clamped like dd_nn_sigmoidf. */
static inline VF VSUF(v_sigmoid)(VF x) {
    VF v = VSUB(VZERO(), x);
    v = VMIN(VSET1(DD_NN_EXP_HI), v);
    v = VMAX(VSET1(DD_NN_EXP_LO), v);
    return VDIV(VSET1(1.0f), VADD(VSET1(1.0f), VSUF(v_exp_core)(v)));
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
