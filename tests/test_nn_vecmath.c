/* The fused GRU cell's vector sigmoid and tanh (src/nn/simd_vec.h, through
 * dd_nn_gru_cellfn) against double libm, exhaustively over float32 inputs:
 * - sigmoid: every float x with 2^-26 <= |x| <= 87 (below 2^-26 every float gives 0.5,
 *   checked on a grid; beyond, the clamp: checked at +-88, +-1e4, +-inf), max relative
 *   error <= 4e-7, <= 2.5e-7 where |x| <= 20 (issue 17: a cheaper exp, see simd_vec.h);
 * - tanh: every float x with 2^-26 <= |x| <= 9 (the rational function of dd_nn_tanhf,
 *   clamped from 7.905 on), max relative error <= 4.5e-7;
 * - AVX2 and AVX-512 give bit-identical results for every one of these inputs (the GRU
 *   kernels' bit-identity rests on it); NaN propagates.
 * The measured errors are printed (docs/performance.md quotes them), also those of the
 * scalar dd_nn_sigmoidf / dd_nn_tanhf of the generic path over the same inputs.
 * - Hardswish (the vector form of src/nn/conv_fast_impl.h, through dd_act_forward and
 *   dd_act_backward) gives the generic loop's bits at AVX2 and AVX-512 for every float32
 *   bit pattern, NaNs included, forward and slope (issue 17: min and max in place of two
 *   blends; -3 gives -0 as the loop); the loop's x (x + 3) / 6 within 2e-7 relative of
 *   the exact value and its slope x / 3 + 1/2 within 1e-7 (issue 17: both divisions are
 *   multiplications by the reciprocals).
 * Unoptimised, sanitizer and valgrind runs check every 61st float only (every 509th for
 * Hardswish). Skips (77) on a CPU without AVX2. */
#include <inttypes.h>
#include <stdint.h>

#include "distdpd/nn.h"
#include "dd_test.h"
#include "nn/simd.h"
#define DD_NN_DOUBLE 0
#include "nn/nn_real.h"

#define CHUNK 65536

static float fbits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t bitsf(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

typedef struct {
    double vec, scal; /* max relative error: vector (the top level), scalar */
    double vec20;     /* vector, |x| <= 20 */
    float at;         /* where the vector maximum is */
    size_t n, ndiff;  /* inputs; inputs where the levels differ in any bit */
} errs;

/* All floats x = +-|x| with bits of |x| in [lo, hi]: f = 1 sigmoid, 2 tanh. */
static void sweep(int f, uint32_t lo, uint32_t hi, uint32_t step, const int *levels, int nl,
                  errs *e) {
    static float in[CHUNK], out[2][CHUNK];
    for (uint32_t b0 = lo; b0 <= hi;) {
        size_t n = 0;
        for (; n < CHUNK / 2 && b0 <= hi; b0 += step, n += 2) {
            in[n] = fbits(b0);
            in[n + 1] = -fbits(b0);
        }
        for (int l = 0; l < nl; l++) dd_nn_gru_cellfn(levels[l], f, out[l], in, n);
        for (size_t i = 0; i < n; i += 2) {
            const double a = in[i];
            double ref[2], sc[2];
            if (f == 1) { /* one exp for both signs: s(-a) = e / (1 + e) */
                const double ex = exp(-a);
                ref[0] = 1 / (1 + ex);
                ref[1] = ex / (1 + ex);
                sc[0] = dd_nn_sigmoidf(in[i]);
                sc[1] = dd_nn_sigmoidf(in[i + 1]);
            } else {
                ref[0] = tanh(a);
                ref[1] = -ref[0];
                sc[0] = dd_nn_tanhf(in[i]);
                sc[1] = dd_nn_tanhf(in[i + 1]);
            }
            for (int s = 0; s < 2; s++) {
                const double ev = fabs(out[0][i + s] - ref[s]) / fabs(ref[s]);
                const double es = fabs(sc[s] - ref[s]) / fabs(ref[s]);
                if (!(ev <= e->vec)) {
                    e->vec = ev;
                    e->at = in[i + s];
                }
                if (es > e->scal) e->scal = es;
                if (fabs(a) <= 20 && ev > e->vec20) e->vec20 = ev;
                if (nl > 1 && bitsf(out[0][i + s]) != bitsf(out[1][i + s])) e->ndiff++;
            }
        }
        e->n += n;
    }
}

/* Hardswish at each level against the generic loop over the bit patterns 0, step, 2 step,
 * ... (all 2^32 for step 1), forward and backward (dout 1 into din 0: the slope); returns
 * the inputs tried, *ndiff those whose output bits differ at some level, *first the first
 * of them. The generic loop's float32 against the exact definition in double: *fwd_rel the
 * largest relative error of x (x + 3) / 6 for -3 < x < 3 (|x| >= 2^-120: below, the
 * result is subnormal), *slope_abs the largest absolute error of x / 3 + 1/2 for
 * -3 <= x <= 3. */
static uint64_t hswish_sweep(uint32_t step, const int *levels, int nl, uint64_t *ndiff, uint32_t *first,
                             double *fwd_rel, double *slope_abs) {
    static union {
        uint32_t u[CHUNK];
        float f[CHUNK];
    } x;
    static float ref[CHUNK], out[CHUNK], dref[CHUNK], dout[CHUNK], ones[CHUNK];
    const float *in = x.f;
    uint64_t n_all = 0;
    *ndiff = 0;
    *fwd_rel = *slope_abs = 0;
    for (size_t i = 0; i < CHUNK; i++) ones[i] = 1.0f;
    for (uint64_t b0 = 0; b0 < ((uint64_t)1 << 32); b0 += (uint64_t)CHUNK * step) {
        const uint64_t left = (((uint64_t)1 << 32) - b0 + step - 1) / step;
        const size_t n = left < CHUNK ? (size_t)left : CHUNK;
        for (size_t i = 0; i < n; i++) x.u[i] = (uint32_t)b0 + (uint32_t)i * step;
        dd_nn_simd_set(DD_SIMD_GENERIC);
        dd_act_forward(DD_ACT_HARDSWISH, ref, in, n);
        memset(dref, 0, n * sizeof(float));
        dd_act_backward(DD_ACT_HARDSWISH, dref, ones, in, NULL, n);
        for (size_t i = 0; i < n; i++) {
            const double xd = in[i];
            if (xd > -3 && xd < 3 && fabs(xd) >= 0x1p-120) {
                const double e = fabs((ref[i] - xd * (xd + 3) / 6) / (xd * (xd + 3) / 6));
                if (e > *fwd_rel) *fwd_rel = e;
            }
            if (xd >= -3 && xd <= 3) {
                const double e = fabs(dref[i] - (xd / 3 + 0.5));
                if (e > *slope_abs) *slope_abs = e;
            }
        }
        for (int l = 0; l < nl; l++) {
            dd_nn_simd_set(levels[l]);
            dd_act_forward(DD_ACT_HARDSWISH, out, in, n);
            memset(dout, 0, n * sizeof(float));
            dd_act_backward(DD_ACT_HARDSWISH, dout, ones, in, NULL, n);
            if (memcmp(out, ref, n * sizeof(float)) != 0 || memcmp(dout, dref, n * sizeof(float)) != 0)
                for (size_t i = 0; i < n; i++)
                    if ((bitsf(out[i]) != bitsf(ref[i]) || bitsf(dout[i]) != bitsf(dref[i])) && (*ndiff)++ == 0)
                        *first = bitsf(in[i]);
        }
        n_all += n;
    }
    dd_nn_simd_set(levels[0]);
    return n_all;
}

int main(void) {
    int levels[2], nl = 0;
    if (dd_nn_simd_supported() >= DD_SIMD_AVX512) levels[nl++] = DD_SIMD_AVX512;
    if (dd_nn_simd_supported() >= DD_SIMD_AVX2) levels[nl++] = DD_SIMD_AVX2;
    if (!nl) dd_test_skip("no AVX2 on this CPU (the vector cell runs at AVX2 and AVX-512)");

    /* every 61st float only in unoptimised or sanitizer builds and under valgrind
     * (DD_TEST_TIMEOUT_SCALE > 1): 20-50x slower there (the Debug+ASan build took 6 min
     * on a loaded machine for the whole sweep) */
#if !defined(__OPTIMIZE__) || defined(__SANITIZE_ADDRESS__)
    const uint32_t step = 61;
#else
    const uint32_t step = dd_test_timeout_scale() > 1 ? 61 : 1;
#endif
    const uint32_t tiny = bitsf(0x1p-26f);
    errs es = {0, 0, 0, 0, 0, 0}, et = {0, 0, 0, 0, 0, 0};
    sweep(1, tiny, bitsf(-DD_NN_EXP_LO), step, levels, nl, &es);
    sweep(2, tiny, bitsf(9.0f), step, levels, nl, &et);
    printf("sigmoid over %zu floats, 2^-26 <= |x| <= 87: max rel err %.3g at x = %.9g, %.3g "
           "for |x| <= 20 (scalar dd_nn_sigmoidf: %.3g); levels differ at %zu\n",
           es.n, es.vec, (double)es.at, es.vec20, es.scal, es.ndiff);
    printf("tanh over %zu floats, 2^-26 <= |x| <= 9: max rel err %.3g at x = %.9g (scalar "
           "dd_nn_tanhf: %.3g); levels differ at %zu\n",
           et.n, et.vec, (double)et.at, et.scal, et.ndiff);
    CHECK(es.vec <= 4e-7 && es.vec20 <= 2.5e-7, "sigmoid max rel err %g, %g for |x| <= 20", es.vec, es.vec20);
    CHECK(et.vec <= 4.5e-7, "tanh max rel err %g", et.vec);
    CHECK(es.ndiff == 0 && et.ndiff == 0, "AVX2 and AVX-512 differ at %zu + %zu inputs", es.ndiff,
          et.ndiff);
    CHECK(es.n * step > 500000000u && et.n * step > 400000000u, "sweeps too short: %zu %zu", es.n,
          et.n);

    /* Hardswish: every float (every 509th in the slow builds) */
    uint64_t hdiff = 0;
    uint32_t hfirst = 0;
    const uint32_t hstep = step == 1 ? 1 : 509;
    double hrel = 0, hslope = 0;
    const uint64_t hn = hswish_sweep(hstep, levels, nl, &hdiff, &hfirst, &hrel, &hslope);
    printf("hardswish over %" PRIu64 " floats: %" PRIu64 " differ from the generic loop (forward or slope); "
           "max rel err %.3g (-3 < x < 3), slope max abs err %.3g\n",
           hn, hdiff, hrel, hslope);
    CHECK(hdiff == 0, "hardswish: %" PRIu64 " outputs differ from the generic loop, first at x = %a (bits %08" PRIx32
          ")", hdiff, (double)fbits(hfirst), hfirst);
    /* the reciprocals of 6 and 3 (simd.h): 1.79e-7 and 7.95e-8 measured over every float */
    CHECK(hrel <= 2e-7 && hslope <= 1e-7, "hardswish: max rel err %g, slope max abs err %g", hrel, hslope);
    CHECK(hn * hstep >= ((uint64_t)1 << 32) - hstep, "hardswish sweep too short: %" PRIu64, hn);
    /* the kinks by the definition, in whole vectors at every level */
    const float hv[4] = {-3.0f, -3.0000002f, 3.0f, 2.9999998f};
    float hx[16], hy[16];
    for (int i = 0; i < 16; i++) hx[i] = hv[i % 4];
    for (int l = 0; l < nl; l++) {
        dd_nn_simd_set(levels[l]);
        dd_act_forward(DD_ACT_HARDSWISH, hy, hx, 16);
        for (int i = 0; i < 16; i += 4)
            CHECK(hy[i] == 0 && signbit(hy[i]) && hy[i + 1] == 0 && !signbit(hy[i + 1]) && hy[i + 2] == 3.0f &&
                      hy[i + 3] == 2.9999998f * (2.9999998f + 3) * (1.0f / 6),
                  "hardswish(-3, -3-, 3, 3-) = %a %a %a %a", (double)hy[i], (double)hy[i + 1], (double)hy[i + 2],
                  (double)hy[i + 3]);
    }
    dd_nn_simd_set(levels[0]);

    /* tiny inputs, the clamps and NaN, at every level */
    float x[12] = {0.0f, -0.0f, 0x1p-27f, -0x1p-100f, 88.0f, -88.0f, 1e4f, -1e4f,
                   INFINITY, -INFINITY, NAN, 1e-30f};
    for (int l = 0; l < nl; l++) {
        float s[12], t[12];
        dd_nn_gru_cellfn(levels[l], 1, s, x, 12);
        dd_nn_gru_cellfn(levels[l], 2, t, x, 12);
        for (int i = 0; i < 4; i++) CHECK(s[i] == 0.5f, "sigmoid(%g) = %.9g", (double)x[i], (double)s[i]);
        CHECK(s[11] == 0.5f && fabsf(t[11] / 1e-30f - 1) < 4.5e-7f, "tiny x: %.9g %.9g", (double)s[11],
              (double)t[11]);
        for (int i = 4; i < 10; i += 2) { /* +big: 1; -big: the clamp, 1 / (1 + exp(88)) */
            CHECK(s[i] == 1.0f, "sigmoid(%g) = %.9g", (double)x[i], (double)s[i]);
            CHECK(s[i + 1] > 0 && fabs(s[i + 1] * (1 + exp(88.0)) - 1) < 4e-7, "sigmoid(%g) = %.9g",
                  (double)x[i + 1], (double)s[i + 1]);
            CHECK(fabsf(t[i] - 1.0f) <= 4.5e-7f && t[i + 1] == -t[i], "tanh(+-%g) = %.9g %.9g",
                  (double)x[i], (double)t[i], (double)t[i + 1]);
        }
        CHECK(t[0] == 0.0f && fabsf(t[2] / 0x1p-27f - 1) < 4.5e-7f, "tanh(0) = %g, tanh(2^-27) = %g",
              (double)t[0], (double)t[2]);
        CHECK(isnan(s[10]) && isnan(t[10]), "NaN: %g %g", (double)s[10], (double)t[10]);
    }
    /* the generic level has no vector cell */
    float y = 0;
    CHECK(dd_nn_gru_cellfn(DD_SIMD_GENERIC, 1, &y, x, 1) == 0, "generic level ran the vector cell");
    return dd_test_done("test_nn_vecmath");
}
