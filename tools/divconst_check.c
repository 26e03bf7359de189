/* Exhaustive check (issue 17) that dividing by a constant d in {3, 6} as a multiply by
 * r = RN(1/d) and one FMA correction gives the bits of the division x / d, for all 2^32
 * float32 bit patterns x, at AVX-512 and at AVX2+FMA (the two instruction sets of the
 * SIMD kernels): the form tried for Hardswish's x (x + 3) / 6 and x / 3 in
 * src/nn/conv_fast_impl.h, bit-identical but not faster there, so not adopted:
 *   q0 = RN(x r);  e = RN(q0 d - x) (one FMA, vfmsub);  q = RN(q0 - e r) (one FMA, vfnmadd)
 * (Brisebarre, Muller, Raina, IEEE TC 53(8), 2004; the signs arranged so that x = -0
 * gives -0 as the division does). The plain Markstein form q0 = x r, e = fma(-q0, d, x),
 * q = fma(e, r, q0) is counted too: it differs from x / d at x = -0 (+0 for -0). Both
 * differ for d = 6 where x / 6 is a tie between two denormals, which the tried form hands to
 * the division (form 0); both give NaN for +-inf (Hardswish's callers discard it: x beyond +-3 is masked).
 * Counts, per form and divisor: inputs whose result bits differ from the division's,
 * split into finite / infinite / NaN inputs (a NaN result counts as equal to a NaN
 * result whatever its payload or sign), and the first differing inputs.
 *
 *   cc -O2 -o divconst_check tools/divconst_check.c && ./divconst_check
 *
 * Runs in seconds (2^32 inputs per divisor, form and instruction set; about 8 s for all
 * 12 sweeps on the AMD Zen 5 machine). Output recorded in docs/performance.md
 * ("Hardswish's divisions by 3 and 6 as a multiply and two FMAs"). */
#include <immintrin.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    uint64_t finite, inf, nan; /* differing inputs by class */
    uint32_t first[4];
    int nfirst;
} diffs;

static float fbits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void note(diffs *s, uint32_t u) {
    const float x = fbits(u);
    if (isnan(x)) s->nan++;
    else if (isinf(x)) s->inf++;
    else s->finite++;
    if (s->nfirst < 4) s->first[s->nfirst++] = u;
}

/* form 0: the tried one (fmsub, fnmadd; d = 6: the division where 0 < |x| < 2^-125);
 * form 1: the same without that fallback; form 2: Markstein's (fnmadd, fmadd) */
__attribute__((target("avx512f"))) static void run512(float d, int form, diffs *s) {
    const __m512 vd = _mm512_set1_ps(d), vr = _mm512_set1_ps(1.0f / d);
    const __m512i step = _mm512_set1_epi32(16);
    __m512i u = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += 16) {
        const __m512 x = _mm512_castsi512_ps(u);
        const __m512 ref = _mm512_div_ps(x, vd);
        const __m512 q0 = _mm512_mul_ps(x, vr);
        __m512 q;
        if (form < 2) q = _mm512_fnmadd_ps(_mm512_fmsub_ps(q0, vd, x), vr, q0);
        else q = _mm512_fmadd_ps(_mm512_fnmadd_ps(q0, vd, x), vr, q0);
        if (form == 0 && d == 6.0f) { /* the division where 0 < |x| < 2^-125 */
            const __m512 ax = _mm512_abs_ps(x);
            const __mmask16 t = _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0x1p-125f), _CMP_LT_OQ),
                                                        ax, _mm512_setzero_ps(), _CMP_GT_OQ);
            if (t) q = _mm512_mask_div_ps(q, t, x, vd);
        }
        /* bits differ, and not both NaN */
        __mmask16 ne = _mm512_cmpneq_epi32_mask(_mm512_castps_si512(q), _mm512_castps_si512(ref));
        ne &= ~(_mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(ref, ref, _CMP_UNORD_Q));
        if (ne)
            for (int l = 0; l < 16; l++)
                if (ne >> l & 1) note(s, (uint32_t)base + (uint32_t)l);
        u = _mm512_add_epi32(u, step);
    }
}

__attribute__((target("avx2,fma"))) static void run256(float d, int form, diffs *s) {
    const __m256 vd = _mm256_set1_ps(d), vr = _mm256_set1_ps(1.0f / d);
    const __m256i step = _mm256_set1_epi32(8);
    __m256i u = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += 8) {
        const __m256 x = _mm256_castsi256_ps(u);
        const __m256 ref = _mm256_div_ps(x, vd);
        const __m256 q0 = _mm256_mul_ps(x, vr);
        __m256 q;
        if (form < 2) q = _mm256_fnmadd_ps(_mm256_fmsub_ps(q0, vd, x), vr, q0);
        else q = _mm256_fmadd_ps(_mm256_fnmadd_ps(q0, vd, x), vr, q0);
        if (form == 0 && d == 6.0f) { /* the division where 0 < |x| < 2^-125 */
            const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
            const __m256 t = _mm256_and_ps(_mm256_cmp_ps(ax, _mm256_set1_ps(0x1p-125f), _CMP_LT_OQ),
                                           _mm256_cmp_ps(ax, _mm256_setzero_ps(), _CMP_GT_OQ));
            if (_mm256_movemask_ps(t)) q = _mm256_blendv_ps(q, _mm256_div_ps(x, vd), t);
        }
        const __m256 nan2 = _mm256_and_ps(_mm256_cmp_ps(q, q, _CMP_UNORD_Q), _mm256_cmp_ps(ref, ref, _CMP_UNORD_Q));
        const __m256i eq = _mm256_cmpeq_epi32(_mm256_castps_si256(q), _mm256_castps_si256(ref));
        const int ne = ~(_mm256_movemask_ps(_mm256_castsi256_ps(eq)) | _mm256_movemask_ps(nan2)) & 0xFF;
        if (ne)
            for (int l = 0; l < 8; l++)
                if (ne >> l & 1) note(s, (uint32_t)base + (uint32_t)l);
        u = _mm256_add_epi32(u, step);
    }
}

int main(void) {
    static const char *forms[3] = {"q0 = x r; e = fma(q0, d, -x); q = fma(-e, r, q0), d=6: x/d if 0<|x|<2^-125  [tried]",
                                   "q0 = x r; e = fma(q0, d, -x); q = fma(-e, r, q0)  [no fallback]",
                                   "q0 = x r; e = fma(-q0, d, x); q = fma(e, r, q0)   [Markstein]"};
    const float ds[2] = {3.0f, 6.0f};
    int bad = 0;
    __builtin_cpu_init();
    const int have512 = __builtin_cpu_supports("avx512f"), have256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    for (int isa = 0; isa < 2; isa++) {
        if (isa == 0 ? !have512 : !have256) {
            printf("%s: not supported by this CPU, skipped\n", isa == 0 ? "avx512" : "avx2");
            continue;
        }
        for (int form = 0; form < 3; form++)
            for (int k = 0; k < 2; k++) {
                diffs s = {0};
                if (isa == 0) run512(ds[k], form, &s);
                else run256(ds[k], form, &s);
                printf("%s d=%g r=%a  %s\n  differing inputs: %" PRIu64 " finite, %" PRIu64 " inf, %" PRIu64
                       " NaN (of 2^32)",
                       isa == 0 ? "avx512" : "avx2  ", ds[k], 1.0f / ds[k], forms[form], s.finite, s.inf, s.nan);
                for (int i = 0; i < s.nfirst; i++) {
                    const float x = fbits(s.first[i]);
                    printf("%s 0x%08" PRIx32 " (%a: %a / d = %a)", i ? "," : ";", s.first[i], x, x, x / ds[k]);
                }
                printf("\n");
                if (form == 0 && s.finite + s.nan) bad = 1; /* +-inf: NaN, discarded by the callers */
            }
    }
    printf("%s\n", bad ? "FAIL: the tried form differs from the division" : "OK: the tried form gives the division's bits for every finite or NaN input");
    return bad;
}
