/* Tests for the quantising codecs (src/compress/quant.c): fp16 / bf16 conversions bit for
 * bit against numpy / torch references (tests/data/quant_refs.txt, tools/make_quant_refs.py)
 * and the half decoder against an independent formula over all 65536 codes; int8 / int4:
 * the payload layout parsed here (scale per chunk, codes), scale = max|x| / qmax, the
 * nearest-rounding error bound |x - dec(enc(x))| <= scale / 2 per element, ties to even,
 * stochastic rounding unbiased (mean of 2000 round trips within 4 sigma) and only ever
 * the two neighbouring codes; chunk boundaries (m not a multiple of chunk, chunk 1,
 * chunk > m), zero and non-finite chunks; sign: scale = mean |x|, zero -> +scale; byte
 * counts = q->bytes = the documented formula, encoders never write past it. Through the
 * public API on the single-process communicator: out == dec(enc(in)) per bucket, the
 * error-feedback residual == in - out exactly (and fed into the next step), lossless
 * none / fp32, accounting. The spec parser: decimal values only (seed=010 is ten, 0x10 /
 * inf / nan refused), an empty setting ("topk,") refused naming the spec, the
 * configuration unchanged on error. Prints encode / decode throughput (1M floats). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compress/compress_impl.h"
#include "dd_test.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static int half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static int bf_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

static void fill_uniform(float *x, size_t n, uint64_t seed, double amp) {
    dd_rng g;
    dd_rng_seed(&g, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(amp * (2 * dd_rng_uniform(&g) - 1));
}

/* ---------------------------------------------------------------- fp16 / bf16 */

static void test_half_refs(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/quant_refs.txt", dd_test_srcdir());
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    char line[256];
    size_t n = 0, bad16 = 0, badbf = 0, sat = 0, nans = 0, subn = 0;
    float v[1024];
    uint16_t r16[1024], rbf[1024];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        unsigned a, b, c;
        if (sscanf(line, "%x %x %x", &a, &b, &c) != 3) {
            CHECK(0, "bad reference line '%s'", line);
            continue;
        }
        const float x = u2f(a);
        const uint16_t h = dd_f32_to_f16(x), bf = dd_f32_to_bf16(x);
        uint16_t want16 = (uint16_t)b;
        if (isfinite(x) && (want16 & 0x7fff) == 0x7c00) { /* numpy overflowed: we saturate */
            want16 = (uint16_t)((want16 & 0x8000) | 0x7bff);
            sat++;
        }
        if (half_is_nan(want16)) {
            nans++;
            if (!half_is_nan(h)) bad16++;
        } else if (h != want16) {
            if (bad16 < 10) fprintf(stderr, "fp16(%08x = %.9g) = %04x, numpy %04x\n", a, (double)x, h, want16);
            bad16++;
        }
        if ((want16 & 0x7c00) == 0 && (want16 & 0x3ff)) subn++;
        if (bf_is_nan((uint16_t)c)) {
            if (!bf_is_nan(bf)) badbf++;
        } else if (bf != (uint16_t)c) {
            if (badbf < 10) fprintf(stderr, "bf16(%08x = %.9g) = %04x, torch %04x\n", a, (double)x, bf, c);
            badbf++;
        }
        if (n < 1024) {
            v[n] = x;
            r16[n] = h;
            rbf[n] = bf;
        }
        n++;
    }
    fclose(f);
    CHECK(n >= 900 && n <= 1024, "%zu reference values", n);
    CHECK(bad16 == 0, "%zu of %zu fp16 conversions differ from numpy", bad16, n);
    CHECK(badbf == 0, "%zu of %zu bf16 conversions differ from torch", badbf, n);
    CHECK(sat >= 4 && nans >= 4 && subn >= 20, "edge cases present: %zu saturated, %zu NaN, %zu subnormal", sat, nans,
          subn);

    /* the element codecs write those bits little-endian, 2 bytes per element */
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    if (n > 1024) n = 1024;
    uint8_t buf[2048 + 8];
    memset(buf, 0xa5, sizeof buf);
    CHECK(dd_qcodec_fp16.bytes(&cfg, n) == 2 * n, "fp16 bytes");
    CHECK(dd_qcodec_bf16.bytes(&cfg, n) == 2 * n, "bf16 bytes");
    dd_qcodec_fp16.enc(&cfg, v, n, buf, NULL);
    size_t badb = 0;
    for (size_t i = 0; i < n; i++) badb += (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8) != r16[i];
    CHECK(badb == 0 && buf[2 * n] == 0xa5, "fp16 payload bytes: %zu differ", badb);
    dd_qcodec_bf16.enc(&cfg, v, n, buf, NULL);
    badb = 0;
    for (size_t i = 0; i < n; i++) badb += (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8) != rbf[i];
    CHECK(badb == 0 && buf[2 * n] == 0xa5, "bf16 payload bytes: %zu differ", badb);
}

/* Decoders against an independent formula, and encode(decode(h)) == h for every code. */
static void test_half_all_codes(void) {
    size_t bad = 0, badrt = 0, badbf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const int e = (int)((h >> 10) & 31), m = (int)(h & 1023);
        const double sgn = (h & 0x8000) ? -1.0 : 1.0;
        const float got = dd_f16_to_f32((uint16_t)h);
        if (e == 31) {
            if (m ? !isnan(got) : !(isinf(got) && (got < 0) == (sgn < 0))) bad++;
            continue;
        }
        const double want = e ? sgn * ldexp(1.0 + m / 1024.0, e - 15) : sgn * ldexp((double)m, -24);
        if ((double)got != want || !signbit(got) != !signbit(want)) bad++;
        if (dd_f32_to_f16(got) != h) badrt++;
        const float gb = dd_bf16_to_f32((uint16_t)h);
        if (f2u(gb) != (h << 16)) badbf++;
        if (!isnan(gb) && dd_f32_to_bf16(gb) != h) badbf++;
    }
    CHECK(bad == 0, "%zu half codes decode wrongly", bad);
    CHECK(badrt == 0, "%zu half codes do not round-trip", badrt);
    CHECK(badbf == 0, "%zu bfloat16 codes do not round-trip", badbf);
    /* the documented saturation and specials */
    CHECK(dd_f32_to_f16(1e5f) == 0x7bff && dd_f32_to_f16(-1e30f) == 0xfbff, "saturation to +-65504");
    CHECK(dd_f32_to_f16(INFINITY) == 0x7c00 && dd_f32_to_f16(-INFINITY) == 0xfc00, "inf stays inf");
    CHECK(half_is_nan(dd_f32_to_f16(NAN)) && bf_is_nan(dd_f32_to_bf16(NAN)), "NaN stays NaN");
    CHECK(dd_f32_to_f16(-0.0f) == 0x8000 && dd_f32_to_bf16(-0.0f) == 0x8000, "negative zero kept");
}

/* ---------------------------------------------------------------- int8 / int4 */

static size_t expect_bytes(size_t m, size_t c, unsigned bits) {
    size_t b = 0;
    for (size_t i0 = 0; i0 < m; i0 += c) {
        size_t len = m - i0 < c ? m - i0 : c;
        b += 4 + (len * bits + 7) / 8;
    }
    return b;
}

/* Code j of an int chunk payload (after the 4-byte scale). */
static int int_code(const uint8_t *codes, size_t j, unsigned bits) {
    if (bits == 8) return (int)(int8_t)codes[j];
    unsigned nib = (j & 1) ? codes[j / 2] >> 4 : codes[j / 2] & 0xfu;
    return (int)nib - ((nib & 8u) ? 16 : 0);
}

/* Encodes x[0..m) with chunk c (nearest), parses the payload by the documented layout
 * and checks scale, codes, the decoded values and the error bound. Returns the largest
 * error in units of the chunk's scale. */
static double check_int_nearest(const dd_qcodec *q, unsigned bits, const float *x, size_t m, size_t c,
                                const char *what) {
    const int qmax = bits == 8 ? 127 : 7;
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    cfg.chunk = c;
    const size_t nb = q->bytes(&cfg, m);
    CHECK(nb == expect_bytes(m, c, bits), "%s m=%zu chunk=%zu: bytes %zu, expected %zu", what, m, c, nb,
          expect_bytes(m, c, bits));
    uint8_t *buf = malloc(nb + 16);
    float *y = malloc((m ? m : 1) * sizeof *y);
    if (!buf || !y) {
        CHECK(0, "out of memory");
        free(buf);
        free(y);
        return 0;
    }
    memset(buf, 0xa5, nb + 16);
    q->enc(&cfg, x, m, buf, NULL);
    int guard = 1;
    for (size_t i = nb; i < nb + 16; i++) guard &= buf[i] == 0xa5;
    CHECK(guard, "%s: encoder wrote past q->bytes = %zu", what, nb);
    q->dec(&cfg, buf, m, y);
    size_t badscale = 0, badcode = 0, baddec = 0, badbound = 0, badmax = 0;
    double worst = 0;
    const uint8_t *p = buf;
    for (size_t i0 = 0; i0 < m; i0 += c) {
        const size_t len = m - i0 < c ? m - i0 : c;
        const float s = u2f(rd32(p));
        float amax = 0;
        size_t imax = 0;
        for (size_t i = 0; i < len; i++)
            if (fabsf(x[i0 + i]) > amax) {
                amax = fabsf(x[i0 + i]);
                imax = i;
            }
        /* scale: the smallest float >= amax / qmax (within one ulp), s * qmax >= amax */
        const double want = (double)amax / qmax;
        const double tol = fmax(want * 2.5e-7, 0x1.8p-149); /* one ulp, or one subnormal step */
        if (amax == 0 ? s != 0 : !((double)s >= want * (1 - 1e-7) && (double)s <= want + tol)) badscale++;
        for (size_t i = 0; i < len; i++) {
            const int k = int_code(p + 4, i, bits);
            if (k < -qmax || k > qmax) badcode++;
            if (f2u(y[i0 + i]) != f2u((float)k * s) && !(y[i0 + i] == 0 && k == 0)) baddec++;
            if (s > 0) {
                const double err = fabs((double)x[i0 + i] - (double)y[i0 + i]) / s;
                if (err > worst) worst = err;
                if (err > 0.5 * (1 + 1e-4)) badbound++;
            } else if (y[i0 + i] != 0) {
                badbound++;
            }
        }
        if (s >= FLT_MIN && abs(int_code(p + 4, imax, bits)) != qmax) badmax++;
        p += 4 + (len * bits + 7) / 8;
    }
    CHECK(badscale == 0, "%s m=%zu chunk=%zu: %zu scales are not max|x|/%d", what, m, c, badscale, qmax);
    CHECK(badcode == 0, "%s: %zu codes out of range", what, badcode);
    CHECK(baddec == 0, "%s: %zu decoded values are not code * scale", what, baddec);
    CHECK(badbound == 0, "%s m=%zu chunk=%zu: %zu errors above scale/2 (worst %.6f scale)", what, m, c, badbound,
          worst);
    CHECK(badmax == 0, "%s: %zu chunks whose largest element is not coded +-%d", what, badmax, qmax);
    free(buf);
    free(y);
    return worst;
}

static void test_int_nearest(void) {
    enum { M = 1000 };
    float *x = malloc(M * sizeof *x);
    if (!x) return;
    const size_t chunks[] = {256, 64, 1, 3, 1000, 4096, 999, 7};
    double worst8 = 0, worst4 = 0;
    for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
        fill_uniform(x, M, 100 + ci, ci % 2 ? 1e-4 : 3.0);
        /* a few chunks with very different magnitudes and an all-zero stretch */
        for (size_t i = 300; i < 340; i++) x[i] *= 1e-20f;
        for (size_t i = 500; i < 600; i++) x[i] = 0.0f;
        x[777] = 1e30f;
        double w = check_int_nearest(&dd_qcodec_int8, 8, x, M, chunks[ci], "int8");
        if (w > worst8) worst8 = w;
        w = check_int_nearest(&dd_qcodec_int4, 4, x, M, chunks[ci], "int4");
        if (w > worst4) worst4 = w;
        /* prefixes: m not a multiple of the chunk, m < chunk, m = 0, 1 */
        check_int_nearest(&dd_qcodec_int8, 8, x, 257, chunks[ci], "int8 m=257");
        check_int_nearest(&dd_qcodec_int4, 4, x, 5, chunks[ci], "int4 m=5");
        check_int_nearest(&dd_qcodec_int4, 4, x, 1, chunks[ci], "int4 m=1");
        check_int_nearest(&dd_qcodec_int8, 8, x, 0, chunks[ci], "int8 m=0");
    }
    printf("int8 nearest: worst error %.6f scale; int4 %.6f scale\n", worst8, worst4);
    CHECK(worst8 > 0.45 && worst4 > 0.45, "the error bound is nearly reached on random data (%g, %g)", worst8,
          worst4);

    /* subnormal-range chunks keep the bound (scale rounded up, never 0) */
    float tiny[6] = {1e-45f, -3e-45f, 2e-44f, 0.0f, 7e-41f, -1e-42f};
    check_int_nearest(&dd_qcodec_int8, 8, tiny, 6, 6, "int8 subnormal");
    check_int_nearest(&dd_qcodec_int4, 4, tiny, 6, 2, "int4 subnormal");
    check_int_nearest(&dd_qcodec_int8, 8, (const float[]){FLT_MAX, -FLT_MAX, 1.0f}, 3, 3, "int8 FLT_MAX");
    check_int_nearest(&dd_qcodec_int4, 4, (const float[]){-FLT_MAX, 3e38f, 1.0f}, 3, 3, "int4 FLT_MAX");

    /* ties go to even: scale exactly 1 */
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    cfg.chunk = 8;
    const float t8[8] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f};
    const int w8[8] = {127, 0, 2, 2, 0, -2, -2, 126};
    uint8_t b[64];
    float y[8];
    dd_qcodec_int8.enc(&cfg, t8, 8, b, NULL);
    CHECK(u2f(rd32(b)) == 1.0f, "int8 scale of the tie vector = %g", (double)u2f(rd32(b)));
    for (int i = 0; i < 8; i++) CHECK(int_code(b + 4, (size_t)i, 8) == w8[i], "int8 tie %g -> %d", (double)t8[i], int_code(b + 4, (size_t)i, 8));
    const float t4[8] = {7.0f, 0.5f, 1.5f, 2.5f, 3.5f, -2.5f, -6.5f, -5.5f};
    const int w4[8] = {7, 0, 2, 2, 4, -2, -6, -6};
    dd_qcodec_int4.enc(&cfg, t4, 8, b, NULL);
    dd_qcodec_int4.dec(&cfg, b, 8, y);
    for (int i = 0; i < 8; i++) CHECK(y[i] == (float)w4[i], "int4 tie %g -> %g", (double)t4[i], (double)y[i]);

    /* non-finite chunks decode to NaN (divergence is not hidden); other chunks are fine */
    cfg.chunk = 4;
    float nf[12] = {1, 2, 3, 4, 1, INFINITY, 3, 4, NAN, 1, 1, 1};
    float yn[12];
    uint8_t bn[64];
    const dd_qcodec *qs[2] = {&dd_qcodec_int8, &dd_qcodec_int4};
    for (int k = 0; k < 2; k++) {
        qs[k]->enc(&cfg, nf, 12, bn, NULL);
        qs[k]->dec(&cfg, bn, 12, yn);
        int ok = 1;
        for (int i = 0; i < 4; i++) ok &= isfinite(yn[i]) && fabsf(yn[i] - nf[i]) <= 0.5f * 4.0f / (k ? 7 : 127);
        for (int i = 4; i < 12; i++) ok &= isnan(yn[i]) != 0;
        CHECK(ok, "%s: non-finite chunks -> NaN, finite chunk intact", k ? "int4" : "int8");
    }
    free(x);
}

/* Mean of many stochastic round trips -> x; every draw is one of the two neighbours. */
static void test_int_stochastic(const dd_qcodec *q, int qmax, const char *what) {
    enum { M = 96, T = 2000 };
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    cfg.chunk = 40; /* chunks of 40, 40, 16 */
    cfg.stochastic = 1;
    float x[M], y[M];
    double sum[M];
    fill_uniform(x, M, 7, 1.0);
    x[5] = 0.0f;
    memset(sum, 0, sizeof sum);
    uint8_t buf[256];
    float scale[3];
    size_t badnb = 0, nonint = 0;
    for (int t = 0; t < T; t++) {
        dd_rng g;
        dd_rng_seed(&g, dd_hash64(99, (uint64_t)t));
        q->enc(&cfg, x, M, buf, &g);
        q->dec(&cfg, buf, M, y);
        const uint8_t *p = buf;
        for (int ch = 0; ch < 3; ch++) {
            scale[ch] = u2f(rd32(p));
            p += 4 + (size_t)((ch < 2 ? 40 : 16) * (qmax == 127 ? 8 : 4) + 7) / 8;
        }
        for (int i = 0; i < M; i++) {
            const double s = scale[i / 40];
            const double v = (double)x[i] / s, k = nearbyint((double)y[i] / s);
            if (f2u(y[i]) != f2u((float)k * (float)s) && !(k == 0 && y[i] == 0)) nonint++;
            if (!(k == floor(v) || k == ceil(v))) badnb++;
            sum[i] += y[i];
        }
    }
    size_t bad = 0;
    double worst = 0, var_seen = 0;
    for (int i = 0; i < M; i++) {
        const double s = scale[i / 40];
        const double mean = sum[i] / T, sigma = 0.5 * s / sqrt((double)T); /* sqrt(f(1-f)) <= 1/2 */
        const double z = fabs(mean - x[i]) / sigma;
        if (z > worst) worst = z;
        if (z > 4.0) bad++;
        const double f = (double)x[i] / s - floor((double)x[i] / s);
        var_seen += f * (1 - f);
    }
    printf("%s stochastic: worst |mean - x| = %.2f sigma over %d elements, %d draws\n", what, worst, M, T);
    CHECK(nonint == 0, "%s: %zu decoded values are not integer multiples of the scale", what, nonint);
    CHECK(badnb == 0, "%s: %zu draws are not a neighbouring code", what, badnb);
    CHECK(bad == 0, "%s: %zu elements' means are more than 4 sigma from x (worst %.2f)", what, bad, worst);
    CHECK(var_seen > 1.0, "%s: the test vector has fractional parts", what);

    /* stochastic rounding must actually be random, and differ from nearest */
    dd_rng g1, g2;
    dd_rng_seed(&g1, 1);
    dd_rng_seed(&g2, 2);
    uint8_t b1[256], b2[256];
    q->enc(&cfg, x, M, b1, &g1);
    q->enc(&cfg, x, M, b2, &g2);
    CHECK(memcmp(b1, b2, q->bytes(&cfg, M)) != 0, "%s: two seeds give the same stochastic encoding", what);
}

/* ---------------------------------------------------------------- sign */

static void test_sign(void) {
    const size_t ms[] = {1000, 17, 1, 8, 9};
    const size_t cs[] = {256, 8, 1, 1000, 3};
    for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
        for (size_t b = 0; b < sizeof cs / sizeof *cs; b++) {
            const size_t m = ms[a], c = cs[b];
            dd_compress_cfg cfg;
            dd_compress_cfg_default(&cfg);
            cfg.chunk = c;
            float *x = malloc(m * sizeof *x), *y = malloc(m * sizeof *y);
            const size_t nb = dd_qcodec_sign.bytes(&cfg, m);
            uint8_t *buf = malloc(nb + 8);
            if (!x || !y || !buf) {
                free(x);
                free(y);
                free(buf);
                CHECK(0, "out of memory");
                return;
            }
            fill_uniform(x, m, 300 + a * 10 + b, 2.0);
            for (size_t i = 0; i < m; i += 7) x[i] = (i % 14) ? -0.0f : 0.0f;
            CHECK(nb == expect_bytes(m, c, 1), "sign m=%zu chunk=%zu: bytes %zu, expected %zu", m, c, nb,
                  expect_bytes(m, c, 1));
            memset(buf, 0xa5, nb + 8);
            dd_qcodec_sign.enc(&cfg, x, m, buf, NULL);
            dd_qcodec_sign.dec(&cfg, buf, m, y);
            CHECK(buf[nb] == 0xa5, "sign: encoder wrote past q->bytes");
            size_t badscale = 0, badval = 0, badbit = 0;
            const uint8_t *p = buf;
            for (size_t i0 = 0; i0 < m; i0 += c) {
                const size_t len = m - i0 < c ? m - i0 : c;
                double sa = 0;
                for (size_t i = 0; i < len; i++) sa += fabs((double)x[i0 + i]);
                const float s = u2f(rd32(p));
                if (s != (float)(sa / (double)len)) badscale++;
                for (size_t i = 0; i < len; i++) {
                    const int bit = (p[4 + i / 8] >> (i % 8)) & 1;
                    if (bit != (x[i0 + i] < 0)) badbit++;
                    const float want = x[i0 + i] < 0 ? -s : s; /* 0 and -0 -> +scale */
                    if (f2u(y[i0 + i]) != f2u(want)) badval++;
                }
                /* unused bits of the last byte are zero */
                if (len % 8 && (p[4 + len / 8] >> (len % 8)) != 0) badbit++;
                p += 4 + (len + 7) / 8;
            }
            CHECK(badscale == 0, "sign m=%zu chunk=%zu: %zu scales are not mean|x|", m, c, badscale);
            CHECK(badbit == 0, "sign m=%zu chunk=%zu: %zu sign bits wrong", m, c, badbit);
            CHECK(badval == 0, "sign m=%zu chunk=%zu: %zu decoded values are not sign * scale", m, c, badval);
            free(x);
            free(y);
            free(buf);
        }
}

/* ---------------------------------------------------------------- public API */

/* The element codec a registered compressor sends through the quantised ring (NULL for
 * none and the others). */
static const dd_qcodec *qcodec_of(const char *name) {
    const dd_codec *c = dd_codec_find(name);
    return c ? c->qring : NULL;
}

/* One compressor over an arena of N floats in buckets [0, B) and [B, N), two steps. */
static void test_api(const char *spec) {
    enum { N = 1000, B = 384 };
    dd_comm *self = NULL;
    CHECK_OK(dd_comm_self(&self));
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    CHECK_OK(dd_compress_parse(&cfg, spec));
    dd_compressor *cp = NULL;
    CHECK_OK(dd_compress_create(&cfg, &cp));
    if (!cp || !self) {
        dd_comm_free(&self);
        return;
    }
    CHECK_OK(dd_compress_bind(cp, N));
    const char *name = cfg.name;
    const dd_qcodec *q = qcodec_of(name);
    const int lossless = !strcmp(name, "none") || !strcmp(name, "fp32");
    CHECK(dd_compress_lossy(cp) == !lossless, "%s: lossy = %d", spec, dd_compress_lossy(cp));
    const int ef = dd_compress_has_ef(cp);
    CHECK(ef == (!lossless && cfg.error_feedback != 0), "%s: has_ef = %d", spec, ef);
    float g[N], in[N], want[N], resid[N];
    uint8_t *enc = malloc(8 * N + 64);
    if (!enc) return;
    memset(resid, 0, sizeof resid);
    const size_t lo[2] = {0, B}, hi[2] = {B, N};
    uint64_t want_payload = 0;
    for (int step = 0; step < 2; step++) {
        dd_compress_begin_step(cp, (uint64_t)step, 0, 0.5 * step);
        fill_uniform(g, N, 500 + (uint64_t)step, 0.01);
        for (int i = 0; i < N; i++) in[i] = ef ? g[i] + resid[i] : g[i];
        for (int k = 0; k < 2; k++) {
            const size_t m = hi[k] - lo[k];
            if (q) {
                q->enc(&cfg, in + lo[k], m, enc, NULL);
                q->dec(&cfg, enc, m, want + lo[k]);
                want_payload += q->bytes(&cfg, m);
            } else {
                memcpy(want + lo[k], in + lo[k], m * sizeof(float));
                want_payload += 4 * m;
            }
            CHECK_OK(dd_compress_exchange(cp, self, DD_ALLREDUCE_RING, g, lo[k], hi[k]));
        }
        size_t bad = 0, badres = 0;
        size_t nres = 0;
        const float *res = dd_compress_residual(cp, &nres);
        for (int i = 0; i < N; i++) {
            if (f2u(g[i]) != f2u(want[i])) bad++;
            if (ef) {
                const float e = in[i] - g[i];
                if (!res || f2u(res[i]) != f2u(e)) badres++;
                resid[i] = e;
            }
        }
        CHECK(bad == 0, "%s step %d: %zu of %d outputs differ from dec(enc(in))", spec, step, bad, N);
        if (ef) {
            CHECK(nres == N, "%s: residual of %zu floats", spec, nres);
            CHECK(badres == 0, "%s step %d: %zu residuals differ from in - out", spec, step, badres);
        } else {
            CHECK(res == NULL, "%s: no residual expected", spec);
        }
    }
    dd_compress_stats st;
    dd_compress_stats_get(cp, &st);
    CHECK(st.exchanges == 4 && st.elements == 2 * N && st.steps == 2, "%s: counters", spec);
    CHECK(st.payload_bytes == want_payload, "%s: payload %llu bytes, expected %llu", spec,
          (unsigned long long)st.payload_bytes, (unsigned long long)want_payload);
    CHECK(st.bytes_sent == 0, "%s: one rank sends nothing (%llu)", spec, (unsigned long long)st.bytes_sent);
    printf("%-28s ratio %.2f\n", spec, dd_compress_ratio(&st));
    free(enc);
    dd_compress_destroy(&cp);
    dd_comm_free(&self);
}

/* stochastic through the API: the bound |in - out| < scale and residual == in - out */
static void test_api_stochastic(void) {
    enum { N = 600 };
    dd_comm *self = NULL;
    CHECK_OK(dd_comm_self(&self));
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    CHECK_OK(dd_compress_parse(&cfg, "int8,chunk=100,stochastic=1,seed=5"));
    dd_compressor *cp = NULL;
    CHECK_OK(dd_compress_create(&cfg, &cp));
    if (!cp || !self) return;
    float g[N], in[N], g2[N];
    fill_uniform(g, N, 42, 1.0);
    memcpy(in, g, sizeof in);
    memcpy(g2, g, sizeof g2);
    dd_compress_begin_step(cp, 0, 0, 0);
    CHECK_OK(dd_compress_exchange(cp, self, DD_ALLREDUCE_RING, g, 0, N));
    const float *res = dd_compress_residual(cp, NULL);
    size_t bad = 0, badres = 0, same = 0;
    for (int c0 = 0; c0 < N; c0 += 100) {
        float amax = 0;
        for (int i = c0; i < c0 + 100; i++) amax = fmaxf(amax, fabsf(in[i]));
        const float s = amax / 127 * (1 + 1e-6f);
        for (int i = c0; i < c0 + 100; i++) {
            if (!(fabsf(in[i] - g[i]) < s)) bad++;
            if (!res || f2u(res[i]) != f2u(in[i] - g[i])) badres++;
        }
    }
    CHECK(bad == 0, "stochastic int8: %zu errors >= one scale", bad);
    CHECK(badres == 0, "stochastic int8: %zu residuals differ from in - out", badres);
    /* a second compressor with another seed rounds differently */
    dd_compress_cfg cfg2 = cfg;
    cfg2.seed = 6;
    dd_compressor *cp2 = NULL;
    CHECK_OK(dd_compress_create(&cfg2, &cp2));
    if (cp2) {
        dd_compress_begin_step(cp2, 0, 0, 0);
        CHECK_OK(dd_compress_exchange(cp2, self, DD_ALLREDUCE_RING, g2, 0, N));
        for (int i = 0; i < N; i++) same += g2[i] == g[i];
        CHECK(same < N, "stochastic int8: seeds 5 and 6 gave the same rounding");
    }
    dd_compress_destroy(&cp2);
    dd_compress_destroy(&cp);
    dd_comm_free(&self);
}

/* ---------------------------------------------------------------- throughput */

static void bench(void) {
    enum { N = 1 << 20, REPS = 3 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *buf = malloc(4 * N + 4096);
    if (!x || !y || !buf) {
        free(x);
        free(y);
        free(buf);
        return;
    }
    fill_uniform(x, N, 11, 1e-2);
    const char *names[] = {"fp16", "bf16", "int8", "int4", "sign"};
    for (int k = 0; k < 5; k++) {
        const dd_qcodec *q = qcodec_of(names[k]);
        for (int st = 0; st < (k == 2 || k == 3 ? 2 : 1); st++) {
            dd_compress_cfg cfg;
            dd_compress_cfg_default(&cfg);
            cfg.stochastic = st;
            dd_rng g;
            dd_rng_seed(&g, 1);
            double te = 1e30, td = 1e30;
            for (int r = 0; r < REPS; r++) {
                double t0 = dd_now();
                q->enc(&cfg, x, N, buf, &g);
                double t1 = dd_now();
                q->dec(&cfg, buf, N, y);
                double t2 = dd_now();
                te = fmin(te, t1 - t0);
                td = fmin(td, t2 - t1);
            }
            double se = 0, sx = 0;
            for (int i = 0; i < N; i++) {
                se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
                sx += (double)x[i] * x[i];
            }
            printf("%s%s: 1M floats: encode %.2f GB/s, decode %.2f GB/s (of float32 input), %zu bytes, "
                   "relative rms error %.3g\n",
                   names[k], st ? " stochastic" : "", 4.0 * N / te / 1e9, 4.0 * N / td / 1e9, q->bytes(&cfg, N),
                   sqrt(se / sx));
        }
    }
    free(x);
    free(y);
    free(buf);
}

/* ---------------------------------------------------------------- spec parser */

static void test_parse_spec(void) {
    dd_compress_cfg c, d;
    dd_compress_cfg_default(&c);
    CHECK_OK(dd_compress_parse(&c, "int8,chunk=0128,seed=010"));
    CHECK(c.chunk == 128 && c.seed == 10, "decimal with leading zeros: chunk %zu, seed %llu", c.chunk,
          (unsigned long long)c.seed);
    CHECK_OK(dd_compress_parse(&c, "topk,density=5e-2"));
    CHECK(c.density == 0.05, "density %g", c.density);
    d = c;
    /* strtok skipped empty fields: 'topk,' passed as 'topk' */
    CHECK_ERR(dd_compress_parse(&c, "topk,"), DD_ERR_ARG, "--compress 'topk,': empty setting after ','");
    CHECK_ERR(dd_compress_parse(&c, "topk,,density=0.1"), DD_ERR_ARG, "--compress 'topk,,density=0.1': empty setting");
    CHECK_ERR(dd_compress_parse(&c, "int8,chunk=64,"), DD_ERR_ARG, "empty setting after ','");
    CHECK_ERR(dd_compress_parse(&c, ",topk"), DD_ERR_ARG, "no compressor name");
    CHECK_ERR(dd_compress_parse(&c, ""), DD_ERR_ARG, "no compressor name");
    /* strtod read 0x10 as 16 */
    CHECK_ERR(dd_compress_parse(&c, "int8,chunk=0x10"), DD_ERR_ARG, "chunk = '0x10' is not a number");
    CHECK_ERR(dd_compress_parse(&c, "topk,density=0x1p-4"), DD_ERR_ARG, "density = '0x1p-4' is not a number");
    CHECK_ERR(dd_compress_parse(&c, "topk,density=inf"), DD_ERR_ARG, "density = 'inf' is not a number");
    CHECK_ERR(dd_compress_parse(&c, "dgc,warmup=nan"), DD_ERR_ARG, "warmup = 'nan' is not a number");
    CHECK_ERR(dd_compress_parse(&c, "int8,chunk= 8"), DD_ERR_ARG, "chunk = ' 8' is not a number");
    CHECK_ERR(dd_compress_parse(&c, "int8,chunk=1e"), DD_ERR_ARG, "chunk = '1e' is not a number");
    CHECK(memcmp(&c, &d, sizeof c) == 0, "a refused spec leaves the configuration unchanged");
}

int main(void) {
    test_parse_spec();
    test_half_refs();
    test_half_all_codes();
    test_int_nearest();
    test_int_stochastic(&dd_qcodec_int8, 127, "int8");
    test_int_stochastic(&dd_qcodec_int4, 7, "int4");
    test_sign();
    const char *specs[] = {"none", "fp32", "fp16", "bf16", "int8", "int8,chunk=100", "int4,chunk=33",
                           "sign,chunk=64", "int8,ef=0", "fp16,ef=1", "sign,ef=0"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) test_api(specs[i]);
    test_api_stochastic();
    if (!getenv("DD_TEST_NO_BENCH")) bench();
    return dd_test_done("test_compress_quant");
}
