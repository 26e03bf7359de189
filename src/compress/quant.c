/* The quantising gradient codecs (compress.h; docs/compress.md "Quantisers and the quantised ring"): none (plain
 * float32 allreduce), and the element codecs that go through the quantised ring of
 * qring.c: fp32 (identity), fp16 and bf16 (round to nearest even), int8 and int4
 * (symmetric, one float32 scale per chunk, nearest or stochastic rounding) and sign (one
 * bit per element, one scale = mean |x| per chunk).
 *
 * Byte layouts (all multi-byte fields little-endian):
 *   fp32        m float32
 *   fp16, bf16  m uint16 (IEEE binary16 / the top 16 bits of float32, rounded)
 *   int8        per chunk of c = min(chunk, left) elements: float32 scale, c int8 codes
 *   int4        per chunk: float32 scale, ceil(c/2) bytes; element 2j in the low nibble,
 *               2j+1 in the high nibble (two's complement; an odd chunk's last high
 *               nibble is 0)
 *   sign        per chunk: float32 scale, ceil(c/8) bytes; bit j%8 of byte j/8 is 1 when
 *               element j < 0 (0 and -0 decode to +scale)
 * Chunks always start at element 0 of the vector given to enc (in the ring: of a block).
 *
 * The scalar conversions and the element codecs are also exported (compress_impl.h) for
 * the tests: dd_f32_to_f16, dd_f16_to_f32, dd_f32_to_bf16, dd_bf16_to_f32,
 * dd_qcodec_fp32 ... dd_qcodec_sign. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "compress/compress_impl.h"

/* ---------------------------------------------------------------- bytes */

static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---------------------------------------------------------------- half and bfloat16 */

/* float32 -> IEEE binary16, round to nearest even; subnormal halves kept; finite values
 * that would round to infinity (|f| >= 65520) saturate to +-65504; inf stays inf, NaN
 * stays NaN (quiet, sign and top payload bits kept). */
uint16_t dd_f32_to_f16(float f) {
    const uint32_t x = f2u(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, NaN */
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u | ((ax >> 13) & 0x3ffu) : 0x7c00u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7bffu); /* >= 65520: saturate */
    if (ax >= 0x38800000u) {                                   /* >= 2^-14: normal half */
        uint32_t m = ax - (112u << 23);                        /* rebias 127 -> 15 */
        m += 0xfffu + ((m >> 13) & 1u);                        /* nearest even (carries into e) */
        return (uint16_t)(sign | (m >> 13));
    }
    if (ax < 0x33000000u) return sign; /* < 2^-25: rounds to (signed) zero */
    /* subnormal half: the value in units of 2^-24 is mant * 2^-(126 - E), shift 14..24 */
    const uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u;
    const unsigned s = 126u - e;
    uint32_t q = mant >> s;
    const uint32_t rem = mant & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++; /* q == 0x400 is the smallest normal */
    return (uint16_t)(sign | q);
}

float dd_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13));
    if (e) return u2f(sign | ((e + 112u) << 23) | (m << 13));
    const float v = (float)m * 0x1p-24f; /* subnormal or zero: exact */
    return sign ? -v : v;
}

/* float32 -> bfloat16: round to nearest even of the top 16 bits (overflow gives inf, as
 * in PyTorch); NaN stays NaN (quiet bit set). */
uint16_t dd_f32_to_bf16(float f) {
    uint32_t x = f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float dd_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* ---------------------------------------------------------------- element codecs */

static size_t fp32_bytes(const dd_compress_cfg *cfg, size_t m) {
    (void)cfg;
    return 4 * m;
}
static void fp32_enc(const dd_compress_cfg *cfg, const float *v, size_t m, uint8_t *out, dd_rng *rng) {
    (void)cfg;
    (void)rng;
    for (size_t i = 0; i < m; i++) put_u32(out + 4 * i, f2u(v[i]));
}
static void fp32_dec(const dd_compress_cfg *cfg, const uint8_t *in, size_t m, float *v) {
    (void)cfg;
    for (size_t i = 0; i < m; i++) v[i] = u2f(get_u32(in + 4 * i));
}

static size_t half_bytes(const dd_compress_cfg *cfg, size_t m) {
    (void)cfg;
    return 2 * m;
}
static void fp16_enc(const dd_compress_cfg *cfg, const float *v, size_t m, uint8_t *out, dd_rng *rng) {
    (void)cfg;
    (void)rng;
    for (size_t i = 0; i < m; i++) {
        uint16_t h = dd_f32_to_f16(v[i]);
        out[2 * i] = (uint8_t)h;
        out[2 * i + 1] = (uint8_t)(h >> 8);
    }
}
static void fp16_dec(const dd_compress_cfg *cfg, const uint8_t *in, size_t m, float *v) {
    (void)cfg;
    for (size_t i = 0; i < m; i++) v[i] = dd_f16_to_f32((uint16_t)(in[2 * i] | in[2 * i + 1] << 8));
}
static void bf16_enc(const dd_compress_cfg *cfg, const float *v, size_t m, uint8_t *out, dd_rng *rng) {
    (void)cfg;
    (void)rng;
    for (size_t i = 0; i < m; i++) {
        uint16_t h = dd_f32_to_bf16(v[i]);
        out[2 * i] = (uint8_t)h;
        out[2 * i + 1] = (uint8_t)(h >> 8);
    }
}
static void bf16_dec(const dd_compress_cfg *cfg, const uint8_t *in, size_t m, float *v) {
    (void)cfg;
    for (size_t i = 0; i < m; i++) v[i] = dd_bf16_to_f32((uint16_t)(in[2 * i] | in[2 * i + 1] << 8));
}

/* Bytes of m elements in chunks of c: per chunk 4 (scale) + ceil(len * bits / 8). */
static size_t chunked_bytes(size_t c, size_t m, unsigned bits) {
    if (c == 0) c = 1;
    const size_t full = m / c, rem = m % c;
    size_t b = full * (4 + (c * bits + 7) / 8);
    if (rem) b += 4 + (rem * bits + 7) / 8;
    return b;
}

/* The scale of a chunk for codes in [-qmax, qmax]: s = max|v| / qmax rounded, moved one
 * ulp up when s * qmax < max|v| (so that |v / s| <= qmax; never 0 for a non-zero chunk,
 * also in the subnormal range), except where qmax * s would overflow; 0 for an all-zero
 * chunk; NaN when the chunk holds inf or NaN (the whole chunk then decodes to NaN, so
 * divergence is not hidden). */
static float chunk_scale(const float *v, size_t len, float qmax) {
    float amax = 0.0f, z = 0.0f;
    for (size_t i = 0; i < len; i++) {
        const float a = fabsf(v[i]);
        amax = a > amax ? a : amax;
        z += v[i] * 0.0f; /* NaN iff some v[i] is inf or NaN */
    }
    if (z != 0.0f) return NAN; /* also true for NaN */
    if (amax == 0.0f) return 0.0f;
    float s = amax / qmax;
    if (!(s * qmax <= FLT_MAX)) { /* qmax * s overflows (max|v| near FLT_MAX): one step down */
        s = nextafterf(s, 0.0f);
    } else if (s * qmax < amax) { /* one step up, unless that overflows (then codes clamp) */
        const float up = nextafterf(s, INFINITY);
        if (up * qmax <= FLT_MAX) s = up;
    }
    return s;
}

/* Symmetric integer codes of len elements with scale s > 0: nearest:
 * q = round-half-even(v / s); stochastic (cfg->stochastic and rng): q = floor(v / s + u),
 * u uniform in [0, 1) (53 bits). Codes are clamped to [-qmax, qmax] (a no-op but for
 * safety: |v / s| <= qmax by chunk_scale). */
static void int_codes(const dd_compress_cfg *cfg, const float *v, size_t len, float s, int qmax, dd_rng *rng,
                      int8_t *codes) {
    if (cfg->stochastic && rng) {
        const double ds = (double)s;
        for (size_t i = 0; i < len; i++) {
            /* t > 0 since |v / s| <= qmax <= 127: truncation is floor */
            const double t = (double)v[i] / ds + dd_rng_uniform(rng) + 128.0;
            int q = (int)t - 128;
            q = q > qmax ? qmax : q < -qmax ? -qmax : q;
            codes[i] = (int8_t)q;
        }
    } else {
        const float magic = 0x1.8p23f; /* adding and subtracting rounds |t| < 2^22 to nearest even */
        for (size_t i = 0; i < len; i++) {
            const float t = v[i] / s;
            const float a = t + magic;
            const float r = a - magic;
            int q = (int)r;
            q = q > qmax ? qmax : q < -qmax ? -qmax : q;
            codes[i] = (int8_t)q;
        }
    }
}

static size_t int8_bytes(const dd_compress_cfg *cfg, size_t m) { return chunked_bytes(cfg->chunk, m, 8); }
static size_t int4_bytes(const dd_compress_cfg *cfg, size_t m) { return chunked_bytes(cfg->chunk, m, 4); }
static size_t sign_bytes(const dd_compress_cfg *cfg, size_t m) { return chunked_bytes(cfg->chunk, m, 1); }

static void int8_enc(const dd_compress_cfg *cfg, const float *v, size_t m, uint8_t *out, dd_rng *rng) {
    const size_t c = cfg->chunk ? cfg->chunk : 1;
    for (size_t i0 = 0; i0 < m; i0 += c) {
        const size_t len = m - i0 < c ? m - i0 : c;
        const float s = chunk_scale(v + i0, len, 127.0f);
        put_u32(out, f2u(s));
        int8_t *codes = (int8_t *)(void *)(out + 4);
        if (s > 0.0f)
            int_codes(cfg, v + i0, len, s, 127, rng, codes);
        else /* zero chunk, or non-finite (NaN scale) */
            memset(codes, 0, len);
        out += 4 + len;
    }
}
static void int8_dec(const dd_compress_cfg *cfg, const uint8_t *in, size_t m, float *v) {
    const size_t c = cfg->chunk ? cfg->chunk : 1;
    for (size_t i0 = 0; i0 < m; i0 += c) {
        const size_t len = m - i0 < c ? m - i0 : c;
        const float s = u2f(get_u32(in));
        const int8_t *q = (const int8_t *)(const void *)(in + 4);
        for (size_t i = 0; i < len; i++) v[i0 + i] = (float)q[i] * s;
        in += 4 + len;
    }
}

/* int4: codes of a chunk are made in pieces of 256 in a staging area, then packed. */
static void int4_enc(const dd_compress_cfg *cfg, const float *v, size_t m, uint8_t *out, dd_rng *rng) {
    const size_t c = cfg->chunk ? cfg->chunk : 1;
    int8_t stage[256];
    for (size_t i0 = 0; i0 < m; i0 += c) {
        const size_t len = m - i0 < c ? m - i0 : c;
        const float s = chunk_scale(v + i0, len, 7.0f);
        put_u32(out, f2u(s));
        uint8_t *pk = out + 4;
        for (size_t j0 = 0; j0 < len; j0 += 256) {
            const size_t l2 = len - j0 < 256 ? len - j0 : 256;
            if (s > 0.0f)
                int_codes(cfg, v + i0 + j0, l2, s, 7, rng, stage);
            else
                memset(stage, 0, l2);
            /* j0 is even, so pairs never straddle pieces */
            for (size_t i = 0; i < l2; i += 2) {
                const unsigned lo = (unsigned)stage[i] & 0xfu;
                const unsigned hi = i + 1 < l2 ? (unsigned)stage[i + 1] & 0xfu : 0u;
                pk[(j0 + i) / 2] = (uint8_t)(lo | hi << 4);
            }
        }
        out += 4 + (len + 1) / 2;
    }
}
static void int4_dec(const dd_compress_cfg *cfg, const uint8_t *in, size_t m, float *v) {
    const size_t c = cfg->chunk ? cfg->chunk : 1;
    for (size_t i0 = 0; i0 < m; i0 += c) {
        const size_t len = m - i0 < c ? m - i0 : c;
        const float s = u2f(get_u32(in));
        const uint8_t *pk = in + 4;
        for (size_t i = 0; i < len; i++) {
            const unsigned nib = (i & 1) ? (unsigned)pk[i / 2] >> 4 : (unsigned)pk[i / 2] & 0xfu;
            const int q = (int)nib - ((nib & 8u) ? 16 : 0);
            v[i0 + i] = (float)q * s;
        }
        in += 4 + (len + 1) / 2;
    }
}

/* sign: scale = mean |v| of the chunk (double accumulation, rounded to float32) */
static void sign_enc(const dd_compress_cfg *cfg, const float *v, size_t m, uint8_t *out, dd_rng *rng) {
    (void)rng;
    const size_t c = cfg->chunk ? cfg->chunk : 1;
    for (size_t i0 = 0; i0 < m; i0 += c) {
        const size_t len = m - i0 < c ? m - i0 : c;
        double sum = 0.0;
        for (size_t i = 0; i < len; i++) sum += fabs((double)v[i0 + i]);
        put_u32(out, f2u((float)(sum / (double)len)));
        uint8_t *bits = out + 4;
        memset(bits, 0, (len + 7) / 8);
        for (size_t i = 0; i < len; i++)
            if (v[i0 + i] < 0.0f) bits[i / 8] = (uint8_t)(bits[i / 8] | 1u << (i % 8));
        out += 4 + (len + 7) / 8;
    }
}
static void sign_dec(const dd_compress_cfg *cfg, const uint8_t *in, size_t m, float *v) {
    const size_t c = cfg->chunk ? cfg->chunk : 1;
    for (size_t i0 = 0; i0 < m; i0 += c) {
        const size_t len = m - i0 < c ? m - i0 : c;
        const float s = u2f(get_u32(in));
        const uint8_t *bits = in + 4;
        for (size_t i = 0; i < len; i++) v[i0 + i] = ((bits[i / 8] >> (i % 8)) & 1u) ? -s : s;
        in += 4 + (len + 7) / 8;
    }
}

const dd_qcodec dd_qcodec_fp32 = {fp32_bytes, fp32_enc, fp32_dec};
const dd_qcodec dd_qcodec_fp16 = {half_bytes, fp16_enc, fp16_dec};
const dd_qcodec dd_qcodec_bf16 = {half_bytes, bf16_enc, bf16_dec};
const dd_qcodec dd_qcodec_int8 = {int8_bytes, int8_enc, int8_dec};
const dd_qcodec dd_qcodec_int4 = {int4_bytes, int4_enc, int4_dec};
const dd_qcodec dd_qcodec_sign = {sign_bytes, sign_enc, sign_dec};

/* ---------------------------------------------------------------- codecs */

DD_CODEC_DEFINE(none,
                .summary = "no compression: float32 through the configured allreduce (4 bytes/element)",
                .lossy = 0,
                .exchange = dd_cx_send_dense);
DD_CODEC_DEFINE(fp32,
                .summary = "float32 through the quantised ring (lossless; equals the ring allreduce bit for bit)",
                .lossy = 0,
                .qring = &dd_qcodec_fp32);
DD_CODEC_DEFINE(fp16,
                .summary = "IEEE half, round to nearest even, saturating at +-65504 (2 bytes/element), quantised ring",
                .lossy = 1,
                .qring = &dd_qcodec_fp16);
DD_CODEC_DEFINE(bf16,
                .summary = "bfloat16, round to nearest even (2 bytes/element), quantised ring",
                .lossy = 1,
                .qring = &dd_qcodec_bf16);
DD_CODEC_DEFINE(int8,
                .summary = "int8 codes, scale max|x|/127 per chunk; nearest or stochastic rounding; quantised ring",
                .lossy = 1,
                .qring = &dd_qcodec_int8);
DD_CODEC_DEFINE(int4,
                .summary = "int4 codes (2 per byte), scale max|x|/7 per chunk; nearest or stochastic; quantised ring",
                .lossy = 1,
                .qring = &dd_qcodec_int4);
DD_CODEC_DEFINE(sign,
                .summary = "1 bit per element, scale mean|x| per chunk (signSGD with a scale), quantised ring",
                .lossy = 1,
                .qring = &dd_qcodec_sign);
