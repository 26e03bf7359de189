/* Payloads of the federated-averaging messages (fednet.h): encoders and strict decoders.
 * Vectors are float32 little-endian, copied with memcpy (the hosts are little-endian). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/fednet.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the federated payloads copy float32 vectors as little-endian bytes"
#endif

#define WELCOME_JSON_MAX 65536u

static void vec(dd_nbuf *b, const float *v, uint64_t n) { dd_nbuf_bytes(b, v, (size_t)n * sizeof(float)); }

void dd_fed_enc_hello(dd_nbuf *b, const dd_fed_hello *m) {
    b->n = 0;
    dd_nbuf_u32(b, m->proto);
    dd_nbuf_u64(b, m->samples);
}

void dd_fed_enc_welcome(dd_nbuf *b, const dd_fed_welcome *m) {
    b->n = 0;
    size_t len = m->cfg_json ? strlen(m->cfg_json) : 0;
    dd_nbuf_u32(b, m->index);
    dd_nbuf_u64(b, m->nparams);
    dd_nbuf_u32(b, (uint32_t)len);
    dd_nbuf_bytes(b, m->cfg_json, len);
}

void dd_fed_enc_round(dd_nbuf *b, const dd_fed_round *m, const float *w, const float *c) {
    b->n = 0;
    dd_nbuf_u64(b, m->round);
    dd_nbuf_u8(b, m->algo);
    dd_nbuf_u8(b, m->local_kind);
    dd_nbuf_u32(b, m->local_n);
    dd_nbuf_f64(b, m->mu);
    dd_nbuf_f64(b, m->dp_clip);
    dd_nbuf_u8(b, (uint8_t)((c ? 1 : 0) | (m->secure ? 2 : 0)));
    dd_nbuf_u64(b, m->nparams);
    vec(b, w, m->nparams);
    if (c) vec(b, c, m->nparams);
    if (m->secure) {
        dd_nbuf_u32(b, m->sa_n);
        dd_nbuf_u32(b, m->sa_threshold);
        dd_nbuf_u32(b, m->sa_ring);
        dd_nbuf_f64(b, m->sa_range);
    }
}

size_t dd_fed_update_bytes(uint64_t nparams, int with_dc) {
    return 8 + 8 + 8 + 8 + 1 + 8 + (size_t)nparams * 4 * (with_dc ? 2 : 1);
}
size_t dd_fed_eval_rep_bytes(void) { return 32; }

void dd_fed_enc_update(dd_nbuf *b, const dd_fed_update *m, const float *delta, const float *dc) {
    b->n = 0;
    dd_nbuf_u64(b, m->round);
    dd_nbuf_u64(b, m->frames);
    dd_nbuf_f64(b, m->loss);
    dd_nbuf_f64(b, m->norm);
    dd_nbuf_u8(b, dc ? 1 : 0);
    dd_nbuf_u64(b, m->nparams);
    vec(b, delta, m->nparams);
    if (dc) vec(b, dc, m->nparams);
}

void dd_fed_enc_eval(dd_nbuf *b, const dd_fed_eval *m, const float *w) {
    b->n = 0;
    dd_nbuf_u64(b, m->round);
    dd_nbuf_u64(b, m->nparams);
    vec(b, w, m->nparams);
}

void dd_fed_enc_eval_rep(dd_nbuf *b, const dd_fed_eval_rep *m) {
    b->n = 0;
    dd_nbuf_u64(b, m->round);
    dd_nbuf_f64(b, m->err);
    dd_nbuf_f64(b, m->ref);
    dd_nbuf_u64(b, m->samples);
}

/* ---- decoders ---- */
#define BAD(...) return dd_error(DD_ERR_FORMAT, __VA_ARGS__)

static dd_status done(const dd_nrd *r, const char *what) {
    if (r->bad) BAD("%s: truncated payload (%zu bytes)", what, r->n);
    if (r->off != r->n) BAD("%s: %zu trailing bytes after the payload", what, r->n - r->off);
    return DD_OK;
}

static dd_status nparams_ok(const char *what, uint64_t n, uint64_t want) {
    if (n == 0 || n > DD_FED_MAX_PARAMS) BAD("%s: nparams %llu outside [1, %u]", what, (unsigned long long)n, DD_FED_MAX_PARAMS);
    if (want && n != want)
        BAD("%s: nparams %llu but the model has %llu parameters", what, (unsigned long long)n, (unsigned long long)want);
    return DD_OK;
}

dd_status dd_fed_dec_hello(const uint8_t *p, size_t n, dd_fed_hello *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    m->proto = dd_nrd_u32(&r);
    m->samples = dd_nrd_u64(&r);
    DD_TRY(done(&r, "fed-hello"));
    if (m->proto != DD_FED_PROTO) BAD("fed-hello: protocol version %u, the coordinator speaks %d", m->proto, DD_FED_PROTO);
    if (m->samples == 0 || m->samples > (1ull << 48)) BAD("fed-hello: samples %llu outside [1, 2^48]", (unsigned long long)m->samples);
    return DD_OK;
}

dd_status dd_fed_dec_welcome(const uint8_t *p, size_t n, dd_fed_welcome *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    memset(m, 0, sizeof *m);
    m->index = dd_nrd_u32(&r);
    m->nparams = dd_nrd_u64(&r);
    uint32_t len = dd_nrd_u32(&r);
    if (r.bad) BAD("fed-welcome: truncated payload (%zu bytes)", n);
    if (len == 0 || len > WELCOME_JSON_MAX) BAD("fed-welcome: configuration of %u bytes outside [1, %u]", len, WELCOME_JSON_MAX);
    const uint8_t *s = dd_nrd_bytes(&r, len);
    DD_TRY(done(&r, "fed-welcome"));
    DD_TRY(nparams_ok("fed-welcome", m->nparams, 0));
    if (m->index >= DD_FED_MAX_CLIENTS) BAD("fed-welcome: index %u outside [0, %d)", m->index, DD_FED_MAX_CLIENTS);
    for (uint32_t i = 0; i < len; i++)
        if ((s[i] < 0x20 || s[i] > 0x7e) && s[i] != '\n' && s[i] != '\t' && s[i] != '\r')
            BAD("fed-welcome: byte 0x%02x at %u of the configuration is not printable text", s[i], i);
    if (!(m->cfg_json = dd_nrd_dupz(s, len))) return dd_error(DD_ERR_NOMEM, "fed-welcome");
    return DD_OK;
}

void dd_fed_welcome_free(dd_fed_welcome *m) {
    free(m->cfg_json);
    m->cfg_json = NULL;
}

static int finite_vec(const uint8_t *v, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, v + 4 * i, 4);
        if (!isfinite(f)) return 0;
    }
    return 1;
}

dd_status dd_fed_dec_round(const uint8_t *p, size_t n, uint64_t want_n, int n_algos, dd_fed_round *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    memset(m, 0, sizeof *m);
    m->round = dd_nrd_u64(&r);
    m->algo = dd_nrd_u8(&r);
    m->local_kind = dd_nrd_u8(&r);
    m->local_n = dd_nrd_u32(&r);
    m->mu = dd_nrd_f64(&r);
    m->dp_clip = dd_nrd_f64(&r);
    uint8_t flags = dd_nrd_u8(&r);
    m->nparams = dd_nrd_u64(&r);
    if (r.bad) BAD("fed-round: truncated payload (%zu bytes)", n);
    DD_TRY(nparams_ok("fed-round", m->nparams, want_n));
    if (flags > 3) BAD("fed-round: flags 0x%02x (bit 0 control, bit 1 secure)", flags);
    m->w = dd_nrd_bytes(&r, (size_t)m->nparams * 4);
    if (flags & 1) m->c = dd_nrd_bytes(&r, (size_t)m->nparams * 4);
    if (flags & 2) {
        m->secure = 1;
        m->sa_n = dd_nrd_u32(&r);
        m->sa_threshold = dd_nrd_u32(&r);
        m->sa_ring = dd_nrd_u32(&r);
        m->sa_range = dd_nrd_f64(&r);
    }
    DD_TRY(done(&r, "fed-round"));
    if (m->secure) {
        if (m->sa_n < 2 || m->sa_n > 255) BAD("fed-round: secure benches %u outside [2, 255]", m->sa_n);
        if (m->sa_threshold > m->sa_n) BAD("fed-round: secure threshold %u above the %u benches", m->sa_threshold, m->sa_n);
        if (m->sa_ring != 32 && m->sa_ring != 64) BAD("fed-round: secure ring of %u bits (32 or 64)", m->sa_ring);
        if (!(isfinite(m->sa_range) && m->sa_range > 0)) BAD("fed-round: secure range %g is not finite and > 0", m->sa_range);
    }
    if (m->round == 0) BAD("fed-round: round 0 (rounds count from 1)");
    if (m->algo >= n_algos) BAD("fed-round: algorithm %u outside [0, %d)", m->algo, n_algos);
    if (m->local_kind > DD_FED_LOCAL_EPOCHS) BAD("fed-round: local kind %u is not 0 (steps) or 1 (epochs)", m->local_kind);
    if (m->local_n == 0 || m->local_n > 1000000) BAD("fed-round: local count %u outside [1, 1000000]", m->local_n);
    if (!(isfinite(m->mu) && m->mu >= 0 && m->mu <= 1e6)) BAD("fed-round: mu %g outside [0, 1e6]", m->mu);
    if (!(isfinite(m->dp_clip) && m->dp_clip >= 0 && m->dp_clip <= 1e12)) BAD("fed-round: dp_clip %g outside [0, 1e12]", m->dp_clip);
    if (!finite_vec(m->w, m->nparams)) BAD("fed-round: the global weights are not all finite");
    if (m->c && !finite_vec(m->c, m->nparams)) BAD("fed-round: the control variate is not all finite");
    return DD_OK;
}

dd_status dd_fed_dec_update(const uint8_t *p, size_t n, uint64_t want_n, int want_dc, dd_fed_update *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    memset(m, 0, sizeof *m);
    m->round = dd_nrd_u64(&r);
    m->frames = dd_nrd_u64(&r);
    m->loss = dd_nrd_f64(&r);
    m->norm = dd_nrd_f64(&r);
    uint8_t has_dc = dd_nrd_u8(&r);
    m->nparams = dd_nrd_u64(&r);
    if (r.bad) BAD("fed-update: truncated payload (%zu bytes)", n);
    DD_TRY(nparams_ok("fed-update", m->nparams, want_n));
    if (has_dc > 1) BAD("fed-update: control flag %u is not 0 or 1", has_dc);
    if (has_dc != (want_dc ? 1 : 0))
        BAD("fed-update: %s control-variate delta (the algorithm %s one)", has_dc ? "a" : "no", want_dc ? "needs" : "takes no");
    m->delta = dd_nrd_bytes(&r, (size_t)m->nparams * 4);
    if (has_dc) m->dc = dd_nrd_bytes(&r, (size_t)m->nparams * 4);
    DD_TRY(done(&r, "fed-update"));
    if (m->round == 0) BAD("fed-update: round 0");
    if (m->frames == 0 || m->frames > (1ull << 48)) BAD("fed-update: frames %llu outside [1, 2^48]", (unsigned long long)m->frames);
    /* loss and norm may be NaN/inf (a diverged or Byzantine bench): the vectors are the
     * aggregation's business, the coordinator logs these */
    return DD_OK;
}

dd_status dd_fed_dec_eval(const uint8_t *p, size_t n, uint64_t want_n, dd_fed_eval *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    memset(m, 0, sizeof *m);
    m->round = dd_nrd_u64(&r);
    m->nparams = dd_nrd_u64(&r);
    if (r.bad) BAD("fed-eval: truncated payload (%zu bytes)", n);
    DD_TRY(nparams_ok("fed-eval", m->nparams, want_n));
    m->w = dd_nrd_bytes(&r, (size_t)m->nparams * 4);
    DD_TRY(done(&r, "fed-eval"));
    if (!finite_vec(m->w, m->nparams)) BAD("fed-eval: the weights are not all finite");
    return DD_OK;
}

dd_status dd_fed_dec_eval_rep(const uint8_t *p, size_t n, dd_fed_eval_rep *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    m->round = dd_nrd_u64(&r);
    m->err = dd_nrd_f64(&r);
    m->ref = dd_nrd_f64(&r);
    m->samples = dd_nrd_u64(&r);
    DD_TRY(done(&r, "fed-eval-reply"));
    if (!(m->err >= 0) || isinf(m->err)) BAD("fed-eval-reply: error sum %g is not a finite number >= 0", m->err);
    if (!(m->ref > 0) || isinf(m->ref)) BAD("fed-eval-reply: reference energy %g is not a finite number > 0", m->ref);
    if (m->samples == 0 || m->samples > (1ull << 48)) BAD("fed-eval-reply: samples %llu outside [1, 2^48]", (unsigned long long)m->samples);
    return DD_OK;
}
