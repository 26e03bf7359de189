/* Secure aggregation (secagg.h; Bonawitz et al. CCS'17, semi-honest server, dropouts):
 * the client and server state machines, the message encoders and strict decoders,
 * Shamir sharing over GF(2^8), fixed-point encoding and ChaCha20 mask expansion.
 *
 * Message bodies after the 20-byte header (all integers little-endian):
 *   ADVERTISE  client -> server  c_pk[32] s_pk[32]
 *   KEYS       server -> all     t u32, d u64, bits u8, k i16 (scale 2^k), m u32,
 *                                m x (id u32, c_pk[32], s_pk[32]), ids increasing (U1)
 *   SHARES     client -> server  m u32, m x (to u32, box[120]) for every v in U1 \ {u},
 *                                increasing; box = nonce[24] || crypto_box_easy of
 *                                (from u32, to u32, session u64, s_sk share[32], b share[32])
 *   ROUTED     server -> v       m u32, m x (from u32, box[120]) for every u in U2 \ {v}
 *   MASKED     client -> server  d ring elements of bits/8 bytes
 *   SURVIVORS  server -> all     m u32, m x id u32 (U3), increasing
 *   UNMASK     client -> server  m u32, m x (id u32, kind u8, share[32]) for every v in U2,
 *                                increasing; kind 0: share of b_v (v in U3), 1: of s_sk_v */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "distdpd/secagg.h"

#define HDR 20
#define KEY 32
#define PT_LEN (4 + 4 + 8 + KEY + KEY)
#define BOX_LEN (crypto_box_NONCEBYTES + crypto_box_MACBYTES + PT_LEN)
#define KEYS_FIXED (4 + 8 + 1 + 2 + 4)
#define KEYS_ENTRY (4 + KEY + KEY)
#define SHARE_ENTRY (4 + BOX_LEN)
#define UNMASK_ENTRY (4 + 1 + KEY)
#define MAXC DD_SECAGG_MAX_ID

enum { T_ADVERTISE = 1, T_KEYS, T_SHARES, T_ROUTED, T_MASKED, T_SURVIVORS, T_UNMASK };
static const char *const type_names[] = {"?", "ADVERTISE", "KEYS", "SHARES", "ROUTED", "MASKED", "SURVIVORS", "UNMASK"};
static const char *const round_names[] = {"AdvertiseKeys", "ShareKeys", "MaskedInput", "Unmasking", "done"};

const char *dd_secagg_state_name(dd_secagg_state s) {
    return (unsigned)s <= DD_SECAGG_DONE ? round_names[s] : "unknown";
}

/* ---------------------------------------------------------------- bytes */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint8_t *msg_new(size_t body, int type, uint64_t session, uint32_t sender, size_t *len) {
    uint8_t *m = calloc(1, HDR + body);
    if (!m) {
        dd_error(DD_ERR_NOMEM, "secure aggregation: a %s message of %zu bytes", type_names[type], HDR + body);
        return NULL;
    }
    memcpy(m, "DDSA", 4);
    m[4] = 1;
    m[5] = (uint8_t)type;
    put_u64(m + 8, session);
    put_u32(m + 16, sender);
    *len = HDR + body;
    return m;
}

/* Checks the header: `who` names the peer in messages. want_sender: the authenticated
 * sender (0 = the server). */
static dd_status check_hdr(const uint8_t *m, size_t len, const char *who, uint64_t session, int want_type,
                           uint32_t want_sender) {
    if (!m || len < HDR)
        return dd_error(DD_ERR_FORMAT, "%s: %zu bytes, shorter than the %d-byte header", who, m ? len : 0, HDR);
    if (memcmp(m, "DDSA", 4) != 0) return dd_error(DD_ERR_FORMAT, "%s: field magic is not DDSA", who);
    if (m[4] != 1) return dd_error(DD_ERR_FORMAT, "%s: field version is %u, expected 1", who, m[4]);
    if (m[5] != want_type)
        return dd_error(DD_ERR_FORMAT, "%s: field type is %s, expected %s in this round", who,
                        m[5] >= T_ADVERTISE && m[5] <= T_UNMASK ? type_names[m[5]] : "unknown", type_names[want_type]);
    if (m[6] || m[7]) return dd_error(DD_ERR_FORMAT, "%s: reserved header bytes are not zero", who);
    if (get_u64(m + 8) != session)
        return dd_error(DD_ERR_FORMAT, "%s: field session is %llu, this aggregation is session %llu", who,
                        (unsigned long long)get_u64(m + 8), (unsigned long long)session);
    if (get_u32(m + 16) != want_sender)
        return dd_error(DD_ERR_FORMAT, "%s: field sender is %u, expected %u", who, get_u32(m + 16), want_sender);
    return DD_OK;
}

/* ---------------------------------------------------------------- configuration */

dd_status dd_secagg_resolve(dd_secagg_cfg *cfg, int *scale_log2) {
    if (!cfg) return dd_error(DD_ERR_ARG, "secure aggregation: cfg is NULL");
    if (cfg->n < 2 || cfg->n > MAXC)
        return dd_error(DD_ERR_ARG, "secure aggregation: n (clients invited) must be in [2, %d], got %d", MAXC, cfg->n);
    if (cfg->threshold == 0) cfg->threshold = 2 * cfg->n / 3 + 1;
    if (cfg->threshold > cfg->n || 2 * cfg->threshold <= cfg->n)
        return dd_error(DD_ERR_ARG, "secure aggregation: threshold must be in (n/2, n] = (%d/2, %d], got %d", cfg->n,
                        cfg->n, cfg->threshold);
    if (cfg->ring_bits == 0) cfg->ring_bits = 32;
    if (cfg->ring_bits != 32 && cfg->ring_bits != 64)
        return dd_error(DD_ERR_ARG, "secure aggregation: ring_bits must be 32 or 64, got %d", cfg->ring_bits);
    if (cfg->d < 1 || cfg->d > ((size_t)1 << 31))
        return dd_error(DD_ERR_ARG, "secure aggregation: d must be in [1, 2^31], got %zu", cfg->d);
    if (!(cfg->range > 0) || !isfinite(cfg->range))
        return dd_error(DD_ERR_ARG, "secure aggregation: range must be finite and > 0, got %g", cfg->range);
    /* the largest k with n (range 2^k + 1) < 2^(bits-1); the first guess as a difference of
     * logarithms: lim / n / range overflows to inf for a range below about 1e-290 (a
     * coordinator's fed-round may say 1e-300), and (int)inf is undefined (found by the
     * fed_client fuzz target). log2 of a positive finite double is in [-1074, 1024). */
    double lim = ldexp(1.0, cfg->ring_bits - 1);
    int k = (int)floor(log2(lim / cfg->n) - log2(cfg->range)) + 1;
    while (k > -1100 && cfg->n * (ldexp(cfg->range, k) + 1) >= lim) k--;
    if (k < 0)
        return dd_error(DD_ERR_ARG,
                        "secure aggregation: range %g with %d clients does not fit the ring Z_2^%d with a resolution "
                        "of 1 or finer; use ring_bits 64 or a smaller range",
                        cfg->range, cfg->n, cfg->ring_bits);
    if (scale_log2) *scale_log2 = k;
    return DD_OK;
}

/* ---------------------------------------------------------------- Shamir over GF(2^8) */

static uint8_t gf_mul(uint8_t a, uint8_t b) {
    uint8_t p = 0;
    while (b) {
        if (b & 1) p ^= a;
        a = (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1b : 0)); /* x^8 + x^4 + x^3 + x + 1 */
        b >>= 1;
    }
    return p;
}
static uint8_t gf_inv(uint8_t a) { /* a^254 */
    uint8_t r = 1, x = a;
    for (int e = 254; e; e >>= 1) {
        if (e & 1) r = gf_mul(r, x);
        x = gf_mul(x, x);
    }
    return r;
}

/* coef: t - 1 random bytes per secret byte, coef[(c - 1) * KEY + i] the degree-c coefficient */
static void shamir_share(const uint8_t secret[KEY], const uint8_t *coef, int t, uint8_t x, uint8_t out[KEY]) {
    for (int i = 0; i < KEY; i++) {
        uint8_t y = 0; /* Horner from the highest degree */
        for (int c = t - 1; c >= 1; c--) y = gf_mul((uint8_t)(y ^ coef[(size_t)(c - 1) * KEY + i]), x);
        out[i] = (uint8_t)(y ^ secret[i]);
    }
}

/* Lagrange interpolation at 0 of the t points (xs[j], ys[j]). */
static void shamir_combine(const uint8_t *xs, const uint8_t *const *ys, int t, uint8_t out[KEY]) {
    memset(out, 0, KEY);
    for (int j = 0; j < t; j++) {
        uint8_t l = 1;
        for (int m = 0; m < t; m++)
            if (m != j) l = gf_mul(l, gf_mul(xs[m], gf_inv((uint8_t)(xs[m] ^ xs[j]))));
        for (int i = 0; i < KEY; i++) out[i] ^= gf_mul(l, ys[j][i]);
    }
}

/* ---------------------------------------------------------------- masks */

/* The pairwise seed of a and b (ids ida < idb after ordering): BLAKE2b of the X25519 point,
 * the session and both public keys; -1 when the point is degenerate. */
static int pair_key(const uint8_t sk[KEY], const uint8_t pk_other[KEY], const uint8_t pk_self[KEY], uint32_t self,
                    uint32_t other, uint64_t session, uint8_t out[KEY]) {
    uint8_t shared[KEY], in[KEY + 8 + 2 * KEY];
    if (crypto_scalarmult(shared, sk, pk_other) != 0) return -1;
    memcpy(in, shared, KEY);
    put_u64(in + KEY, session);
    memcpy(in + KEY + 8, self < other ? pk_self : pk_other, KEY);
    memcpy(in + 2 * KEY + 8, self < other ? pk_other : pk_self, KEY);
    crypto_generichash(out, KEY, in, sizeof in, NULL, 0);
    sodium_memzero(shared, sizeof shared);
    sodium_memzero(in, sizeof in);
    return 0;
}

/* acc[j] += sign * PRG(key)[j] for j < d, elements of elem bytes (ChaCha20, nonce `which`:
 * 0 pairwise, 1 self mask), in chunks so that no d-sized buffer is needed. */
static void add_stream(uint64_t *acc, size_t d, int elem, const uint8_t key[KEY], uint8_t which, int sign) {
    uint8_t nonce[crypto_stream_chacha20_NONCEBYTES] = {which};
    enum { CHUNK = 16384 }; /* a multiple of the 64-byte block */
    uint8_t buf[CHUNK];
    static const uint8_t zero[CHUNK];
    size_t per = CHUNK / (size_t)elem, j = 0;
    uint64_t block = 0;
    while (j < d) {
        size_t cnt = d - j < per ? d - j : per, nb = cnt * (size_t)elem;
        crypto_stream_chacha20_xor_ic(buf, zero, nb, nonce, block, key);
        block += CHUNK / 64;
        for (size_t e = 0; e < cnt; e++) {
            uint64_t v = elem == 4 ? get_u32(buf + 4 * e) : get_u64(buf + 8 * e);
            acc[j + e] = sign > 0 ? acc[j + e] + v : acc[j + e] - v;
        }
        j += cnt;
    }
    sodium_memzero(buf, sizeof buf);
}

/* ---------------------------------------------------------------- randomness */

static void rand_bytes(const dd_secagg_cfg *cfg, uint32_t id, uint64_t *ctr, uint8_t *buf, size_t len) {
    if (cfg->test_seed == 0) {
        randombytes_buf(buf, len);
        return;
    }
    uint8_t in[20], seed[randombytes_SEEDBYTES];
    put_u64(in, cfg->test_seed);
    put_u32(in + 8, id);
    put_u64(in + 12, (*ctr)++);
    crypto_generichash(seed, sizeof seed, in, sizeof in, NULL, 0);
    randombytes_buf_deterministic(buf, len, seed);
}

/* ---------------------------------------------------------------- client */

struct dd_secagg_client {
    dd_secagg_cfg cfg;
    int k;
    uint32_t id;
    dd_secagg_state st;
    uint64_t ctr;
    uint8_t c_pk[KEY], c_sk[KEY], s_pk[KEY], s_sk[KEY], b[KEY];
    int n1;                    /* U1: the clients of KEYS, increasing */
    uint32_t ids1[MAXC];
    uint8_t spk1[MAXC][KEY], cpk1[MAXC][KEY];
    uint8_t pkey[MAXC][KEY];   /* pairwise mask seed with each member of U1 (self: unused) */
    uint8_t in2[MAXC];         /* 1 for the members of U1 in U2 */
    uint8_t sh_s[MAXC][KEY], sh_b[MAXC][KEY]; /* the shares held of each member of U1 (own included) */
};

#define CERR(c, st, ...) client_err((c), (st), __VA_ARGS__)
#if defined(__clang_analyzer__) /* make lint: it returns st (the analyzer does not follow variadic calls) */
#undef CERR
#define CERR(c, st, ...) ((void)client_err((c), (st), __VA_ARGS__), (st))
#endif
static dd_status client_err(const dd_secagg_client *c, dd_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static dd_status client_err(const dd_secagg_client *c, dd_status s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dd_error(s, "secure aggregation client %u (session %llu, round %s): %s", c->id,
                    (unsigned long long)c->cfg.session, dd_secagg_state_name(c->st), msg);
}

static int find_id(const uint32_t *ids, int n, uint32_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return i;
    return -1;
}

dd_status dd_secagg_client_new(const dd_secagg_cfg *cfg, uint32_t id, dd_secagg_client **out) {
    if (!out) return dd_error(DD_ERR_ARG, "secure aggregation: out is NULL");
    *out = NULL;
    dd_secagg_cfg c = cfg ? *cfg : (dd_secagg_cfg){0};
    int k;
    DD_TRY(dd_secagg_resolve(&c, &k));
    if (id < 1 || id > MAXC) return dd_error(DD_ERR_ARG, "secure aggregation: client id must be in [1, %d], got %u", MAXC, id);
    if (sodium_init() < 0) return dd_error(DD_ERR_INTERNAL, "secure aggregation: libsodium failed to initialise");
    dd_secagg_client *cl = calloc(1, sizeof *cl);
    if (!cl) return dd_error(DD_ERR_NOMEM, "secure aggregation: client state");
    cl->cfg = c;
    cl->k = k;
    cl->id = id;
    cl->st = DD_SECAGG_ADVERTISE;
    *out = cl;
    return DD_OK;
}

void dd_secagg_client_free(dd_secagg_client *c) {
    if (!c) return;
    sodium_memzero(c, sizeof *c);
    free(c);
}

dd_secagg_state dd_secagg_client_state(const dd_secagg_client *c) { return c ? c->st : DD_SECAGG_ADVERTISE; }

static dd_status client_in_state(const dd_secagg_client *c, dd_secagg_state want, const char *call) {
    if (!c) return dd_error(DD_ERR_ARG, "secure aggregation: %s on a NULL client", call);
    if (c->st != want)
        return CERR(c, DD_ERR_ARG, "%s is a call of round %s", call, dd_secagg_state_name(want));
    return DD_OK;
}

/* The start of the calls that read a server message: the round, the output pointers, the
 * header of `in` (of type `type`, from the server). */
static dd_status client_begin(const dd_secagg_client *c, dd_secagg_state want, const char *call, const uint8_t *in,
                              size_t in_len, int type, uint8_t **out, size_t *out_len) {
    DD_TRY(client_in_state(c, want, call));
    if (!out || !out_len) return CERR(c, DD_ERR_ARG, "out is NULL");
    char who[64];
    snprintf(who, sizeof who, "%s from the server", type_names[type]);
    if (check_hdr(in, in_len, who, c->cfg.session, type, 0) != DD_OK)
        return CERR(c, DD_ERR_FORMAT, "%s", dd_last_error());
    if (in_len < HDR + 4) return CERR(c, DD_ERR_FORMAT, "%s: %zu bytes, no body", who, in_len);
    return DD_OK;
}

dd_status dd_secagg_client_advertise(dd_secagg_client *c, uint8_t **out, size_t *out_len) {
    DD_TRY(client_in_state(c, DD_SECAGG_ADVERTISE, "advertise"));
    if (!out || !out_len) return CERR(c, DD_ERR_ARG, "out is NULL");
    uint8_t seed[crypto_box_SEEDBYTES];
    uint8_t *m = msg_new(2 * KEY, T_ADVERTISE, c->cfg.session, c->id, out_len);
    if (!m) return DD_ERR_NOMEM;
    rand_bytes(&c->cfg, c->id, &c->ctr, seed, sizeof seed);
    crypto_box_seed_keypair(c->c_pk, c->c_sk, seed);
    rand_bytes(&c->cfg, c->id, &c->ctr, seed, sizeof seed);
    crypto_box_seed_keypair(c->s_pk, c->s_sk, seed);
    rand_bytes(&c->cfg, c->id, &c->ctr, c->b, KEY);
    sodium_memzero(seed, sizeof seed);
    memcpy(m + HDR, c->c_pk, KEY);
    memcpy(m + HDR + KEY, c->s_pk, KEY);
    *out = m;
    c->st = DD_SECAGG_SHARE;
    return DD_OK;
}

dd_status dd_secagg_client_share_keys(dd_secagg_client *c, const uint8_t *in, size_t in_len, uint8_t **out,
                                      size_t *out_len) {
    DD_TRY(client_begin(c, DD_SECAGG_SHARE, "share_keys", in, in_len, T_KEYS, out, out_len));
    if (in_len < HDR + KEYS_FIXED)
        return CERR(c, DD_ERR_FORMAT, "KEYS from the server: %zu bytes, shorter than its fixed part", in_len);
    const uint8_t *p = in + HDR;
    uint32_t t = get_u32(p), m = get_u32(p + 13 + 2);
    uint64_t d = get_u64(p + 4);
    int bits = p[12], k = (int16_t)(uint16_t)(p[13] | (p[14] << 8));
    if ((int)t != c->cfg.threshold || d != c->cfg.d || bits != c->cfg.ring_bits || k != c->k)
        return CERR(c, DD_ERR_FORMAT,
                    "KEYS from the server: fields threshold/d/ring_bits/scale are %u/%llu/%d/2^%d, this client has "
                    "%d/%zu/%d/2^%d",
                    t, (unsigned long long)d, bits, k, c->cfg.threshold, c->cfg.d, c->cfg.ring_bits, c->k);
    if (m < t || m > (uint32_t)c->cfg.n)
        return CERR(c, DD_ERR_FORMAT, "KEYS from the server: field count is %u, must be in [threshold %u, n %d]", m, t,
                    c->cfg.n);
    if (in_len != HDR + KEYS_FIXED + (size_t)m * KEYS_ENTRY)
        return CERR(c, DD_ERR_FORMAT, "KEYS from the server: %zu bytes, expected %zu for %u clients", in_len,
                    (size_t)HDR + KEYS_FIXED + (size_t)m * KEYS_ENTRY, m);
    const uint8_t *e = p + KEYS_FIXED;
    uint32_t ids[MAXC];
    int self = -1;
    for (uint32_t i = 0; i < m; i++) {
        const uint8_t *ei = e + (size_t)i * KEYS_ENTRY;
        ids[i] = get_u32(ei);
        if (ids[i] < 1 || ids[i] > MAXC || (i > 0 && ids[i] <= ids[i - 1]))
            return CERR(c, DD_ERR_FORMAT, "KEYS from the server: client id %u at position %u is out of range or not "
                        "increasing", ids[i], i);
        if (ids[i] == c->id) {
            self = (int)i;
            if (sodium_memcmp(ei + 4, c->c_pk, KEY) != 0 || sodium_memcmp(ei + 4 + KEY, c->s_pk, KEY) != 0)
                return CERR(c, DD_ERR_FORMAT, "KEYS from the server: the keys listed for client %u are not its own", c->id);
        }
        for (uint32_t j = 0; j < i; j++) {
            const uint8_t *ej = e + (size_t)j * KEYS_ENTRY;
            for (int a = 0; a < 2; a++)
                for (int b2 = 0; b2 < 2; b2++)
                    if (sodium_memcmp(ei + 4 + a * KEY, ej + 4 + b2 * KEY, KEY) == 0)
                        return CERR(c, DD_ERR_FORMAT, "KEYS from the server: clients %u and %u advertise the same key",
                                    ids[j], ids[i]);
        }
        if (sodium_memcmp(ei + 4, ei + 4 + KEY, KEY) == 0)
            return CERR(c, DD_ERR_FORMAT, "KEYS from the server: client %u advertises one key twice", ids[i]);
    }
    if (self < 0) return CERR(c, DD_ERR_FORMAT, "KEYS from the server: client %u is not in the list", c->id);

    /* pairwise seeds (refusing degenerate public keys), Shamir shares, boxes: all into
     * temporaries, committed only when everything succeeded */
    uint8_t(*pkey)[KEY] = calloc(m, KEY);
    uint8_t *coef = malloc(2 * (size_t)(t > 1 ? t - 1 : 1) * KEY);
    uint8_t *msg = msg_new(4 + (size_t)(m - 1) * SHARE_ENTRY, T_SHARES, c->cfg.session, c->id, out_len);
    if (!pkey || !coef || !msg) {
        free(pkey), free(coef), free(msg);
        return CERR(c, DD_ERR_NOMEM, "shares for %u clients", m);
    }
    dd_status st = DD_OK;
    for (uint32_t i = 0; i < m && st == DD_OK; i++) {
        if ((int)i == self) continue;
        const uint8_t *ei = e + (size_t)i * KEYS_ENTRY;
        uint8_t probe[KEY];
        if (pair_key(c->s_sk, ei + 4 + KEY, c->s_pk, c->id, ids[i], c->cfg.session, pkey[i]) != 0 ||
            crypto_scalarmult(probe, c->c_sk, ei + 4) != 0)
            st = CERR(c, DD_ERR_FORMAT, "KEYS from the server: a public key of client %u is degenerate", ids[i]);
        sodium_memzero(probe, sizeof probe);
    }
    uint64_t ctr = c->ctr;
    if (st == DD_OK) {
        rand_bytes(&c->cfg, c->id, &ctr, coef, 2 * (size_t)(t > 1 ? t - 1 : 1) * KEY);
        const uint8_t *cs = coef, *cb = coef + (size_t)(t > 1 ? t - 1 : 1) * KEY;
        uint8_t *w = msg + HDR;
        put_u32(w, m - 1);
        w += 4;
        for (uint32_t i = 0; i < m; i++) {
            uint8_t pt[PT_LEN];
            put_u32(pt, c->id);
            put_u32(pt + 4, ids[i]);
            put_u64(pt + 8, c->cfg.session);
            shamir_share(c->s_sk, cs, (int)t, (uint8_t)ids[i], pt + 16);
            shamir_share(c->b, cb, (int)t, (uint8_t)ids[i], pt + 16 + KEY);
            if ((int)i == self) {
                memcpy(c->sh_s[i], pt + 16, KEY);
                memcpy(c->sh_b[i], pt + 16 + KEY, KEY);
            } else {
                const uint8_t *ei = e + (size_t)i * KEYS_ENTRY;
                put_u32(w, ids[i]);
                rand_bytes(&c->cfg, c->id, &ctr, w + 4, crypto_box_NONCEBYTES);
                if (crypto_box_easy(w + 4 + crypto_box_NONCEBYTES, pt, PT_LEN, w + 4, ei + 4, c->c_sk) != 0)
                    st = CERR(c, DD_ERR_FORMAT, "KEYS from the server: no box for client %u's key", ids[i]);
                w += SHARE_ENTRY;
            }
            sodium_memzero(pt, sizeof pt);
        }
    }
    if (st == DD_OK) {
        c->ctr = ctr;
        c->n1 = (int)m;
        for (uint32_t i = 0; i < m; i++) {
            const uint8_t *ei = e + (size_t)i * KEYS_ENTRY;
            c->ids1[i] = ids[i];
            memcpy(c->cpk1[i], ei + 4, KEY);
            memcpy(c->spk1[i], ei + 4 + KEY, KEY);
            memcpy(c->pkey[i], pkey[i], KEY);
        }
        *out = msg;
        msg = NULL;
        c->st = DD_SECAGG_MASKED;
    }
    sodium_memzero(pkey, (size_t)m * KEY);
    sodium_memzero(coef, 2 * (size_t)(t > 1 ? t - 1 : 1) * KEY);
    free(pkey), free(coef), free(msg);
    return st;
}

/* Encodes x (d floats, |x_j| <= range) as ring elements round(x 2^k) into acc. */
static dd_status encode(const dd_secagg_client *c, const float *x, uint64_t *acc) {
    for (size_t j = 0; j < c->cfg.d; j++) {
        double v = (double)x[j];
        if (!isfinite(v) || fabs(v) > c->cfg.range)
            return CERR(c, DD_ERR_RANGE, "update coordinate %zu is %g, outside [-%g, %g] (clip the update first)", j,
                        v, c->cfg.range, c->cfg.range);
        acc[j] = (uint64_t)llround(ldexp(v, c->k));
    }
    return DD_OK;
}

dd_status dd_secagg_client_masked_input(dd_secagg_client *c, const uint8_t *in, size_t in_len, const float *x,
                                        uint8_t **out, size_t *out_len) {
    DD_TRY(client_begin(c, DD_SECAGG_MASKED, "masked_input", in, in_len, T_ROUTED, out, out_len));
    if (!x) return CERR(c, DD_ERR_ARG, "x is NULL");
    uint32_t m = get_u32(in + HDR), t = (uint32_t)c->cfg.threshold;
    if (m + 1 < t || m + 1 > (uint32_t)c->n1)
        return CERR(c, DD_ERR_FORMAT, "ROUTED from the server: field count is %u, must be in [%u, %d] (threshold - 1, "
                    "|U1| - 1)", m, t - 1, c->n1 - 1);
    if (in_len != HDR + 4 + (size_t)m * SHARE_ENTRY)
        return CERR(c, DD_ERR_FORMAT, "ROUTED from the server: %zu bytes, expected %zu for %u senders", in_len,
                    (size_t)HDR + 4 + (size_t)m * SHARE_ENTRY, m);
    uint8_t in2[MAXC] = {0};
    uint8_t(*ss)[KEY] = calloc((size_t)c->n1, KEY), (*sb)[KEY] = calloc((size_t)c->n1, KEY);
    uint64_t *acc = calloc(c->cfg.d, sizeof *acc);
    int elem = c->cfg.ring_bits / 8;
    uint8_t *msg = msg_new(c->cfg.d * (size_t)elem, T_MASKED, c->cfg.session, c->id, out_len);
    dd_status st = DD_OK;
    if (!ss || !sb || !acc || !msg) st = CERR(c, DD_ERR_NOMEM, "masked input of %zu values", c->cfg.d);
    uint32_t prev = 0;
    for (uint32_t i = 0; i < m && st == DD_OK; i++) {
        const uint8_t *ei = in + HDR + 4 + (size_t)i * SHARE_ENTRY;
        uint32_t from = get_u32(ei);
        int pos = find_id(c->ids1, c->n1, from);
        if (from <= prev || pos < 0 || from == c->id) {
            st = CERR(c, DD_ERR_FORMAT, "ROUTED from the server: sender %u at position %u is not a member of U1 other "
                      "than this client, or not increasing", from, i);
            break;
        }
        prev = from;
        uint8_t pt[PT_LEN];
        if (crypto_box_open_easy(pt, ei + 4 + crypto_box_NONCEBYTES, BOX_LEN - crypto_box_NONCEBYTES, ei + 4,
                                 c->cpk1[pos], c->c_sk) != 0) {
            st = CERR(c, DD_ERR_FORMAT, "ROUTED from the server: the shares from client %u do not decrypt (tampered, "
                      "or not for client %u)", from, c->id);
            break;
        }
        if (get_u32(pt) != from || get_u32(pt + 4) != c->id || get_u64(pt + 8) != c->cfg.session)
            st = CERR(c, DD_ERR_FORMAT, "ROUTED from the server: the shares from client %u name sender %u, recipient "
                      "%u, session %llu", from, get_u32(pt), get_u32(pt + 4), (unsigned long long)get_u64(pt + 8));
        memcpy(ss[pos], pt + 16, KEY);
        memcpy(sb[pos], pt + 16 + KEY, KEY);
        in2[pos] = 1;
        sodium_memzero(pt, sizeof pt);
    }
    if (st == DD_OK) st = encode(c, x, acc);
    if (st == DD_OK) {
        int self = find_id(c->ids1, c->n1, c->id);
        in2[self] = 1;
        add_stream(acc, c->cfg.d, elem, c->b, 1, +1);
        for (int i = 0; i < c->n1; i++)
            if (in2[i] && i != self) add_stream(acc, c->cfg.d, elem, c->pkey[i], 0, c->id < c->ids1[i] ? +1 : -1);
        uint8_t *w = msg + HDR;
        for (size_t j = 0; j < c->cfg.d; j++) {
            if (elem == 4) put_u32(w + 4 * j, (uint32_t)acc[j]);
            else put_u64(w + 8 * j, acc[j]);
        }
        for (int i = 0; i < c->n1; i++) {
            c->in2[i] = in2[i];
            if (i != self && in2[i]) {
                memcpy(c->sh_s[i], ss[i], KEY);
                memcpy(c->sh_b[i], sb[i], KEY);
            }
        }
        *out = msg;
        msg = NULL;
        c->st = DD_SECAGG_UNMASK;
    }
    if (ss) sodium_memzero(ss, (size_t)c->n1 * KEY);
    if (sb) sodium_memzero(sb, (size_t)c->n1 * KEY);
    if (acc) sodium_memzero(acc, c->cfg.d * sizeof *acc);
    free(ss), free(sb), free(acc), free(msg);
    return st;
}

dd_status dd_secagg_client_unmask(dd_secagg_client *c, const uint8_t *in, size_t in_len, uint8_t **out,
                                  size_t *out_len) {
    DD_TRY(client_begin(c, DD_SECAGG_UNMASK, "unmask", in, in_len, T_SURVIVORS, out, out_len));
    int n2 = 0;
    for (int i = 0; i < c->n1; i++) n2 += c->in2[i];
    uint32_t m = get_u32(in + HDR);
    if (m < (uint32_t)c->cfg.threshold || m > (uint32_t)n2)
        return CERR(c, DD_ERR_FORMAT, "SURVIVORS from the server: field count is %u, must be in [threshold %d, |U2| %d]",
                    m, c->cfg.threshold, n2);
    if (in_len != HDR + 4 + (size_t)m * 4)
        return CERR(c, DD_ERR_FORMAT, "SURVIVORS from the server: %zu bytes, expected %zu for %u clients", in_len,
                    (size_t)HDR + 4 + (size_t)m * 4, m);
    uint8_t in3[MAXC] = {0};
    uint32_t prev = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t id = get_u32(in + HDR + 4 + 4 * (size_t)i);
        int pos = find_id(c->ids1, c->n1, id);
        if (id <= prev || pos < 0 || !c->in2[pos])
            return CERR(c, DD_ERR_FORMAT, "SURVIVORS from the server: client %u at position %u is not in U2 or not "
                        "increasing", id, i);
        in3[pos] = 1;
        prev = id;
    }
    int self = find_id(c->ids1, c->n1, c->id);
    if (!in3[self]) return CERR(c, DD_ERR_FORMAT, "SURVIVORS from the server: client %u is not listed", c->id);
    uint8_t *msg = msg_new(4 + (size_t)n2 * UNMASK_ENTRY, T_UNMASK, c->cfg.session, c->id, out_len);
    if (!msg) return CERR(c, DD_ERR_NOMEM, "unmask message");
    uint8_t *w = msg + HDR;
    put_u32(w, (uint32_t)n2);
    w += 4;
    for (int i = 0; i < c->n1; i++) {
        if (!c->in2[i]) continue;
        put_u32(w, c->ids1[i]);
        w[4] = in3[i] ? 0 : 1; /* a survivor's self-mask seed, a dropped client's mask key: never both */
        memcpy(w + 5, in3[i] ? c->sh_b[i] : c->sh_s[i], KEY);
        w += UNMASK_ENTRY;
    }
    *out = msg;
    c->st = DD_SECAGG_DONE;
    return DD_OK;
}

dd_status dd_secagg_client_next(dd_secagg_client *c, const uint8_t *in, size_t in_len, const float *x, uint8_t **out,
                                size_t *out_len) {
    if (!c) return dd_error(DD_ERR_ARG, "secure aggregation: next on a NULL client");
    switch (c->st) {
    case DD_SECAGG_ADVERTISE: return dd_secagg_client_advertise(c, out, out_len);
    case DD_SECAGG_SHARE: return dd_secagg_client_share_keys(c, in, in_len, out, out_len);
    case DD_SECAGG_MASKED: return dd_secagg_client_masked_input(c, in, in_len, x, out, out_len);
    case DD_SECAGG_UNMASK: return dd_secagg_client_unmask(c, in, in_len, out, out_len);
    default: return CERR(c, DD_ERR_ARG, "no call left: the aggregation is finished for this client");
    }
}

/* ---------------------------------------------------------------- server */

struct dd_secagg_server {
    dd_secagg_cfg cfg;
    int k, n;
    dd_secagg_state st;
    uint32_t ids[MAXC];          /* invited, increasing */
    uint8_t in1[MAXC], in2[MAXC], in3[MAXC], in4[MAXC]; /* membership of U1..U4 */
    uint8_t got[MAXC];           /* answered in the open round */
    uint8_t cpk[MAXC][KEY], spk[MAXC][KEY];
    uint8_t *box;                /* n x n x BOX_LEN: box[from][to] */
    uint8_t *share;              /* n x n x KEY: share[responder][of], with kind */
    uint64_t *acc;               /* d: the sum of the masked inputs of U3 */
    float *result;
    int n_summed;
};

#define SERR(s, from, st, ...) server_err((s), (from), (st), __VA_ARGS__)
#if defined(__clang_analyzer__) /* make lint: it returns st, as CERR */
#undef SERR
#define SERR(s, from, st, ...) ((void)server_err((s), (from), (st), __VA_ARGS__), (st))
#endif
static dd_status server_err(const dd_secagg_server *s, uint32_t from, dd_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static dd_status server_err(const dd_secagg_server *s, uint32_t from, dd_status st, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (from)
        return dd_error(st, "secure aggregation server (session %llu, round %s): client %u: %s",
                        (unsigned long long)s->cfg.session, dd_secagg_state_name(s->st), from, msg);
    return dd_error(st, "secure aggregation server (session %llu, round %s): %s", (unsigned long long)s->cfg.session,
                    dd_secagg_state_name(s->st), msg);
}

dd_status dd_secagg_server_new(const dd_secagg_cfg *cfg, const uint32_t *ids, dd_secagg_server **out) {
    if (!out) return dd_error(DD_ERR_ARG, "secure aggregation: out is NULL");
    *out = NULL;
    dd_secagg_cfg c = cfg ? *cfg : (dd_secagg_cfg){0};
    int k;
    DD_TRY(dd_secagg_resolve(&c, &k));
    if (!ids) return dd_error(DD_ERR_ARG, "secure aggregation: the invited ids are NULL");
    uint32_t sorted[MAXC] = {0}; /* (the first c.n are set; initialised for the analyzer) */
    for (int i = 0; i < c.n; i++) {
        uint32_t v = ids[i];
        if (v < 1 || v > MAXC) return dd_error(DD_ERR_ARG, "secure aggregation: client id %u is outside [1, %d]", v, MAXC);
        int j = i;
        while (j > 0 && sorted[j - 1] > v) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = v;
    }
    for (int i = 1; i < c.n; i++)
        if (sorted[i] == sorted[i - 1])
            return dd_error(DD_ERR_ARG, "secure aggregation: client id %u is invited twice", sorted[i]);
    if (sodium_init() < 0) return dd_error(DD_ERR_INTERNAL, "secure aggregation: libsodium failed to initialise");
    dd_secagg_server *s = calloc(1, sizeof *s);
    if (!s) return dd_error(DD_ERR_NOMEM, "secure aggregation: server state");
    s->box = malloc((size_t)c.n * c.n * BOX_LEN);
    s->share = malloc((size_t)c.n * c.n * KEY);
    s->acc = calloc(c.d, sizeof *s->acc);
    if (!s->box || !s->share || !s->acc) {
        dd_secagg_server_free(s);
        return dd_error(DD_ERR_NOMEM, "secure aggregation: server buffers for %d clients and d = %zu", c.n, c.d);
    }
    s->cfg = c;
    s->k = k;
    s->n = c.n;
    memcpy(s->ids, sorted, (size_t)c.n * sizeof *sorted);
    s->st = DD_SECAGG_ADVERTISE;
    *out = s;
    return DD_OK;
}

void dd_secagg_server_free(dd_secagg_server *s) {
    if (!s) return;
    free(s->box);
    free(s->share);
    free(s->acc);
    free(s->result);
    free(s);
}

dd_secagg_state dd_secagg_server_state(const dd_secagg_server *s) { return s ? s->st : DD_SECAGG_ADVERTISE; }

/* the set whose messages the open round expects */
static const uint8_t *expected_set(const dd_secagg_server *s) {
    switch (s->st) {
    case DD_SECAGG_SHARE: return s->in1;
    case DD_SECAGG_MASKED: return s->in2;
    case DD_SECAGG_UNMASK: return s->in3;
    default: return NULL;
    }
}

dd_status dd_secagg_server_receive(dd_secagg_server *s, uint32_t from, const uint8_t *msg, size_t len) {
    if (!s) return dd_error(DD_ERR_ARG, "secure aggregation: receive on a NULL server");
    if (s->st == DD_SECAGG_DONE) return SERR(s, from, DD_ERR_ARG, "a message after the aggregation finished");
    int pos = find_id(s->ids, s->n, from);
    if (pos < 0) return SERR(s, from, DD_ERR_ARG, "not invited to this aggregation");
    const uint8_t *set = expected_set(s);
    if (set && !set[pos])
        return SERR(s, from, DD_ERR_ARG, "not in the set of round %s (dropped or never answered)",
                    dd_secagg_state_name(s->st));
    static const int want[] = {T_ADVERTISE, T_SHARES, T_MASKED, T_UNMASK};
    char who[64];
    snprintf(who, sizeof who, "%s message", type_names[want[s->st]]);
    if (check_hdr(msg, len, who, s->cfg.session, want[s->st], from) != DD_OK)
        return SERR(s, from, DD_ERR_FORMAT, "%s", dd_last_error());
    if (s->got[pos]) return SERR(s, from, DD_ERR_ARG, "a second %s message (duplicate)", type_names[want[s->st]]);
    const uint8_t *b = msg + HDR;
    size_t blen = len - HDR;
    switch (s->st) {
    case DD_SECAGG_ADVERTISE: {
        if (blen != 2 * KEY)
            return SERR(s, from, DD_ERR_FORMAT, "ADVERTISE body is %zu bytes, expected %d", blen, 2 * KEY);
        if (sodium_memcmp(b, b + KEY, KEY) == 0) return SERR(s, from, DD_ERR_FORMAT, "ADVERTISE: c_pk equals s_pk");
        for (int i = 0; i < s->n; i++)
            if (s->got[i])
                for (int a = 0; a < 2; a++)
                    if (sodium_memcmp(b + a * KEY, s->cpk[i], KEY) == 0 || sodium_memcmp(b + a * KEY, s->spk[i], KEY) == 0)
                        return SERR(s, from, DD_ERR_FORMAT, "ADVERTISE: field %s repeats a key of client %u",
                                    a ? "s_pk" : "c_pk", s->ids[i]);
        uint8_t probe[KEY], one[KEY] = {1};
        for (int a = 0; a < 2; a++) /* a low-order point would make every shared secret known */
            if (crypto_scalarmult(probe, one, b + a * KEY) != 0)
                return SERR(s, from, DD_ERR_FORMAT, "ADVERTISE: field %s is a degenerate X25519 key", a ? "s_pk" : "c_pk");
        memcpy(s->cpk[pos], b, KEY);
        memcpy(s->spk[pos], b + KEY, KEY);
        break;
    }
    case DD_SECAGG_SHARE: {
        int m1 = 0;
        for (int i = 0; i < s->n; i++) m1 += s->in1[i];
        if (blen != 4 + (size_t)(m1 - 1) * SHARE_ENTRY || get_u32(b) != (uint32_t)(m1 - 1))
            return SERR(s, from, DD_ERR_FORMAT, "SHARES: %zu bytes with count %u, expected %d boxes (|U1| - 1) in %zu "
                        "bytes", blen, blen >= 4 ? get_u32(b) : 0, m1 - 1, 4 + (size_t)(m1 - 1) * SHARE_ENTRY);
        const uint8_t *e = b + 4;
        for (int i = 0; i < s->n; i++) { /* recipients: U1 \ {from}, increasing */
            if (!s->in1[i] || i == pos) continue;
            if (get_u32(e) != s->ids[i])
                return SERR(s, from, DD_ERR_FORMAT, "SHARES: a recipient field is %u, expected %u", get_u32(e), s->ids[i]);
            e += SHARE_ENTRY;
        }
        e = b + 4;
        for (int i = 0; i < s->n; i++) {
            if (!s->in1[i] || i == pos) continue;
            memcpy(s->box + ((size_t)pos * s->n + i) * BOX_LEN, e + 4, BOX_LEN);
            e += SHARE_ENTRY;
        }
        break;
    }
    case DD_SECAGG_MASKED: {
        size_t elem = (size_t)s->cfg.ring_bits / 8;
        if (blen != s->cfg.d * elem)
            return SERR(s, from, DD_ERR_FORMAT, "MASKED body is %zu bytes, expected %zu (d = %zu x %zu)", blen,
                        s->cfg.d * elem, s->cfg.d, elem);
        for (size_t j = 0; j < s->cfg.d; j++) s->acc[j] += elem == 4 ? get_u32(b + 4 * j) : get_u64(b + 8 * j);
        break;
    }
    case DD_SECAGG_UNMASK: {
        int m2 = 0;
        for (int i = 0; i < s->n; i++) m2 += s->in2[i];
        if (blen != 4 + (size_t)m2 * UNMASK_ENTRY || get_u32(b) != (uint32_t)m2)
            return SERR(s, from, DD_ERR_FORMAT, "UNMASK: %zu bytes with count %u, expected %d shares (|U2|) in %zu bytes",
                        blen, blen >= 4 ? get_u32(b) : 0, m2, 4 + (size_t)m2 * UNMASK_ENTRY);
        const uint8_t *e = b + 4;
        for (int i = 0; i < s->n; i++) {
            if (!s->in2[i]) continue;
            if (get_u32(e) != s->ids[i])
                return SERR(s, from, DD_ERR_FORMAT, "UNMASK: a client field is %u, expected %u", get_u32(e), s->ids[i]);
            if (e[4] != (s->in3[i] ? 0 : 1))
                return SERR(s, from, DD_ERR_FORMAT, "UNMASK: the kind of the share of client %u is %u, expected %u (%s)",
                            s->ids[i], e[4], s->in3[i] ? 0 : 1,
                            s->in3[i] ? "a survivor: its self-mask seed" : "dropped: its mask key");
            e += UNMASK_ENTRY;
        }
        e = b + 4;
        for (int i = 0; i < s->n; i++) {
            if (!s->in2[i]) continue;
            memcpy(s->share + ((size_t)pos * s->n + i) * KEY, e + 5, KEY);
            e += UNMASK_ENTRY;
        }
        break;
    }
    default:
        break;
    }
    s->got[pos] = 1;
    return DD_OK;
}

/* The secret of client `of` from the shares of the first t responders; when more than t
 * responded, the last t must give the same secret. */
static dd_status reconstruct(const dd_secagg_server *s, int of, const char *what, uint8_t out[KEY]) {
    int t = s->cfg.threshold, r[MAXC], nr = 0;
    for (int i = 0; i < s->n; i++)
        if (s->in4[i]) r[nr++] = i;
    if (nr < t) /* never: close() checks the threshold of the round */
        return SERR(s, 0, DD_ERR_INTERNAL, "%d unmasking answers for %s, fewer than the threshold %d", nr, what, t);
    uint8_t xs[MAXC] = {0}, check[KEY];
    const uint8_t *ys[MAXC] = {0};
    for (int j = 0; j < t; j++) {
        xs[j] = (uint8_t)s->ids[r[j]];
        ys[j] = s->share + ((size_t)r[j] * s->n + of) * KEY;
    }
    shamir_combine(xs, ys, t, out);
    if (nr > t) {
        for (int j = 0; j < t; j++) {
            xs[j] = (uint8_t)s->ids[r[nr - t + j]];
            ys[j] = s->share + ((size_t)r[nr - t + j] * s->n + of) * KEY;
        }
        shamir_combine(xs, ys, t, check);
        int same = sodium_memcmp(out, check, KEY) == 0;
        sodium_memzero(check, sizeof check);
        if (!same)
            return SERR(s, s->ids[of], DD_ERR_FORMAT, "the shares of its %s held by different clients disagree", what);
    }
    return DD_OK;
}

static dd_status unmask_sum(dd_secagg_server *s) {
    int elem = s->cfg.ring_bits / 8, n = s->n;
    uint8_t(*sec)[KEY] = calloc((size_t)n, KEY);          /* b_v (v in U3) or s_sk_v (v dropped) */
    uint8_t(*pk)[KEY] = calloc((size_t)n * n, KEY);       /* pair seeds (dropped v, survivor w) */
    float *res = malloc(s->cfg.d * sizeof *res);
    dd_status st = DD_OK;
    if (!sec || !pk || !res) st = SERR(s, 0, DD_ERR_NOMEM, "unmasking buffers");
    for (int v = 0; v < n && st == DD_OK; v++) {
        if (!s->in2[v]) continue;
        if (s->in3[v]) {
            st = reconstruct(s, v, "self-mask seed", sec[v]);
            continue;
        }
        st = reconstruct(s, v, "mask key", sec[v]);
        if (st != DD_OK) break;
        uint8_t pub[KEY];
        crypto_scalarmult_base(pub, sec[v]);
        if (sodium_memcmp(pub, s->spk[v], KEY) != 0) {
            st = SERR(s, s->ids[v], DD_ERR_FORMAT, "the shares of its mask key do not reconstruct its advertised s_pk");
            break;
        }
        for (int w = 0; w < n && st == DD_OK; w++)
            if (s->in3[w] && pair_key(sec[v], s->spk[w], s->spk[v], s->ids[v], s->ids[w], s->cfg.session,
                                      pk[(size_t)v * n + w]) != 0)
                st = SERR(s, s->ids[w], DD_ERR_FORMAT, "a degenerate key agreement with dropped client %u", s->ids[v]);
    }
    if (st == DD_OK) { /* nothing below can fail: the sum is unmasked in place */
        for (int v = 0; v < n; v++) {
            if (!s->in2[v]) continue;
            if (s->in3[v]) {
                add_stream(s->acc, s->cfg.d, elem, sec[v], 1, -1);
                continue;
            }
            /* survivor w added +PRG(s_wv) when w < v and subtracted it when w > v */
            for (int w = 0; w < n; w++)
                if (s->in3[w]) add_stream(s->acc, s->cfg.d, elem, pk[(size_t)v * n + w], 0, s->ids[w] < s->ids[v] ? -1 : +1);
        }
        int bits = s->cfg.ring_bits;
        for (size_t j = 0; j < s->cfg.d; j++) {
            uint64_t u = bits == 32 ? s->acc[j] & 0xffffffffu : s->acc[j];
            uint64_t half = (uint64_t)1 << (bits - 1);
            double v = u >= half ? -(double)((bits == 32 ? ((uint64_t)1 << 32) : 0) - u) : (double)u;
            res[j] = (float)ldexp(v, -s->k);
        }
        s->result = res;
        res = NULL;
        s->n_summed = 0;
        for (int i = 0; i < n; i++) s->n_summed += s->in3[i];
    }
    if (sec) sodium_memzero(sec, (size_t)n * KEY);
    if (pk) sodium_memzero(pk, (size_t)n * n * KEY);
    free(sec), free(pk), free(res);
    return st;
}

dd_status dd_secagg_server_close(dd_secagg_server *s) {
    if (!s) return dd_error(DD_ERR_ARG, "secure aggregation: close on a NULL server");
    if (s->st == DD_SECAGG_DONE) return SERR(s, 0, DD_ERR_ARG, "close after the aggregation finished");
    int cnt = 0;
    for (int i = 0; i < s->n; i++) cnt += s->got[i];
    if (cnt < s->cfg.threshold)
        return SERR(s, 0, DD_ERR_ARG, "%d clients answered in round %s, the threshold is %d", cnt,
                    dd_secagg_state_name(s->st), s->cfg.threshold);
    uint8_t *set = s->st == DD_SECAGG_ADVERTISE ? s->in1 : s->st == DD_SECAGG_SHARE ? s->in2
                 : s->st == DD_SECAGG_MASKED    ? s->in3 : s->in4;
    memcpy(set, s->got, sizeof s->got);
    if (s->st == DD_SECAGG_UNMASK) {
        dd_status st = unmask_sum(s);
        if (st != DD_OK) {
            memset(s->in4, 0, sizeof s->in4);
            return st;
        }
    }
    memset(s->got, 0, sizeof s->got);
    s->st = (dd_secagg_state)(s->st + 1);
    return DD_OK;
}

int dd_secagg_server_members(const dd_secagg_server *s, uint32_t *ids, int cap) {
    if (!s) return 0;
    const uint8_t *set = s->st == DD_SECAGG_ADVERTISE ? NULL : s->st == DD_SECAGG_SHARE ? s->in1
                       : s->st == DD_SECAGG_MASKED    ? s->in2 : s->in3; /* DONE: U3, the clients summed */
    int m = 0;
    for (int i = 0; i < s->n; i++)
        if (!set || set[i]) {
            if (ids && m < cap) ids[m] = s->ids[i];
            m++;
        }
    return m;
}

dd_status dd_secagg_server_message(const dd_secagg_server *s, uint32_t to, uint8_t **out, size_t *out_len) {
    if (!s || !out || !out_len) return dd_error(DD_ERR_ARG, "secure aggregation: message with a NULL argument");
    int pos = find_id(s->ids, s->n, to);
    const uint8_t *set = expected_set(s);
    if (!set) return SERR(s, to, DD_ERR_ARG, "no message to send in round %s", dd_secagg_state_name(s->st));
    if (pos < 0 || !set[pos]) return SERR(s, to, DD_ERR_ARG, "not a member of the round's set: no message for it");
    uint8_t *m;
    if (s->st == DD_SECAGG_SHARE) { /* KEYS */
        int m1 = 0;
        for (int i = 0; i < s->n; i++) m1 += s->in1[i];
        m = msg_new(KEYS_FIXED + (size_t)m1 * KEYS_ENTRY, T_KEYS, s->cfg.session, 0, out_len);
        if (!m) return DD_ERR_NOMEM;
        uint8_t *w = m + HDR;
        put_u32(w, (uint32_t)s->cfg.threshold);
        put_u64(w + 4, s->cfg.d);
        w[12] = (uint8_t)s->cfg.ring_bits;
        w[13] = (uint8_t)((uint16_t)(int16_t)s->k & 0xff);
        w[14] = (uint8_t)((uint16_t)(int16_t)s->k >> 8);
        put_u32(w + 15, (uint32_t)m1);
        w += KEYS_FIXED;
        for (int i = 0; i < s->n; i++) {
            if (!s->in1[i]) continue;
            put_u32(w, s->ids[i]);
            memcpy(w + 4, s->cpk[i], KEY);
            memcpy(w + 4 + KEY, s->spk[i], KEY);
            w += KEYS_ENTRY;
        }
    } else if (s->st == DD_SECAGG_MASKED) { /* ROUTED */
        int m2 = 0;
        for (int i = 0; i < s->n; i++) m2 += s->in2[i];
        m = msg_new(4 + (size_t)(m2 - 1) * SHARE_ENTRY, T_ROUTED, s->cfg.session, 0, out_len);
        if (!m) return DD_ERR_NOMEM;
        uint8_t *w = m + HDR;
        put_u32(w, (uint32_t)(m2 - 1));
        w += 4;
        for (int i = 0; i < s->n; i++) {
            if (!s->in2[i] || i == pos) continue;
            put_u32(w, s->ids[i]);
            memcpy(w + 4, s->box + ((size_t)i * s->n + pos) * BOX_LEN, BOX_LEN);
            w += SHARE_ENTRY;
        }
    } else { /* SURVIVORS */
        int m3 = 0;
        for (int i = 0; i < s->n; i++) m3 += s->in3[i];
        m = msg_new(4 + (size_t)m3 * 4, T_SURVIVORS, s->cfg.session, 0, out_len);
        if (!m) return DD_ERR_NOMEM;
        uint8_t *w = m + HDR;
        put_u32(w, (uint32_t)m3);
        w += 4;
        for (int i = 0; i < s->n; i++)
            if (s->in3[i]) {
                put_u32(w, s->ids[i]);
                w += 4;
            }
    }
    *out = m;
    return DD_OK;
}

dd_status dd_secagg_server_result(const dd_secagg_server *s, float *sum, int *n_summed) {
    if (!s || !sum) return dd_error(DD_ERR_ARG, "secure aggregation: result with a NULL argument");
    if (s->st != DD_SECAGG_DONE)
        return SERR(s, 0, DD_ERR_ARG, "the sum is available after round Unmasking closes");
    memcpy(sum, s->result, s->cfg.d * sizeof *sum);
    if (n_summed) *n_summed = s->n_summed;
    return DD_OK;
}
