/* Payloads of the training coordinator's protocol (ps_msg.h): encoders and strict decoders. */
#include "parallel/ps_msg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) return dd_error(DD_ERR_FORMAT, __VA_ARGS__)

static dd_status end_of(const dd_nrd *r, const char *what) {
    if (r->bad) BAD("%s: truncated payload (%zu bytes)", what, r->n);
    if (r->off != r->n) BAD("%s: %zu trailing bytes after the payload", what, r->n - r->off);
    return DD_OK;
}

static void put_text(dd_nbuf *b, const char *s, size_t n) {
    dd_nbuf_u32(b, (uint32_t)n);
    dd_nbuf_bytes(b, s, n);
}

/* A u32-length text of at most max bytes: *s points into the payload (not terminated). */
static dd_status get_text(dd_nrd *r, const char *what, const char *field, uint32_t max, const uint8_t **s, uint32_t *len) {
    *len = dd_nrd_u32(r);
    if (r->bad) BAD("%s: truncated payload (%zu bytes)", what, r->n);
    if (*len == 0) BAD("%s: %s is empty", what, field);
    if (*len > max) BAD("%s: %s of %u bytes (at most %u)", what, field, *len, max);
    *s = dd_nrd_bytes(r, *len);
    if (!*s) BAD("%s: %s of %u bytes past the end of the payload (%zu bytes)", what, field, *len, r->n);
    if (memchr(*s, 0, *len)) BAD("%s: %s holds a NUL byte", what, field);
    return DD_OK;
}

void dd_pst_enc_hello(dd_nbuf *b, const char *name) {
    b->n = 0;
    put_text(b, name, strlen(name));
}

dd_status dd_pst_dec_hello(const uint8_t *p, size_t n, dd_pst_hello *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    memset(m, 0, sizeof *m);
    const uint8_t *s;
    uint32_t len;
    DD_TRY(get_text(&r, "hello", "the worker's name", DD_PST_NAME_MAX, &s, &len));
    DD_TRY(end_of(&r, "hello"));
    for (uint32_t i = 0; i < len; i++)
        if (s[i] < 0x20 || s[i] == 0x7f) BAD("hello: byte 0x%02x at %u of the worker's name is a control character", s[i], i);
    memcpy(m->name, s, len);
    return DD_OK;
}

dd_status dd_pst_dec_empty(const uint8_t *p, size_t n, const char *what) {
    (void)p;
    if (n) BAD("%s: %zu bytes of payload (it has none)", what, n);
    return DD_OK;
}

void dd_pst_enc_welcome(dd_nbuf *b, const dd_pst_welcome *m) {
    b->n = 0;
    dd_nbuf_u32(b, m->index);
    put_text(b, m->cfg_json, strlen(m->cfg_json));
    dd_nbuf_u64(b, m->staleness);
    dd_nbuf_u8(b, m->stale_lr);
    dd_nbuf_u32(b, m->lease_ms);
}

dd_status dd_pst_dec_welcome(const uint8_t *p, size_t n, dd_pst_welcome *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    memset(m, 0, sizeof *m);
    m->index = dd_nrd_u32(&r);
    const uint8_t *s;
    uint32_t len;
    DD_TRY(get_text(&r, "welcome", "the configuration", DD_PST_CFG_MAX, &s, &len));
    m->staleness = dd_nrd_u64(&r);
    m->stale_lr = dd_nrd_u8(&r);
    m->lease_ms = dd_nrd_u32(&r);
    DD_TRY(end_of(&r, "welcome"));
    if (m->index >= DD_PST_MAX_WORKERS) BAD("welcome: worker index %u outside [0, %d)", m->index, DD_PST_MAX_WORKERS);
    if (m->staleness > INT64_MAX && m->staleness != UINT64_MAX)
        BAD("welcome: staleness %llu is neither a clock count nor inf (2^64-1)", (unsigned long long)m->staleness);
    if (m->stale_lr > 1) BAD("welcome: stale-lr %u is not 0 (off) or 1 (on)", m->stale_lr);
    if (m->lease_ms < DD_PST_LEASE_MS_MIN || m->lease_ms > DD_PST_LEASE_MS_MAX)
        BAD("welcome: lease of %u ms outside [%d, %d]", m->lease_ms, DD_PST_LEASE_MS_MIN, DD_PST_LEASE_MS_MAX);
    if (!(m->cfg_json = dd_nrd_dupz(s, len))) return dd_error(DD_ERR_NOMEM, "welcome");
    return DD_OK;
}

void dd_pst_welcome_free(dd_pst_welcome *m) {
    free(m->cfg_json);
    m->cfg_json = NULL;
}

void dd_pst_enc_lease(dd_nbuf *b, const dd_pst_lease *m) {
    b->n = 0;
    dd_nbuf_u8(b, m->kind);
    if (m->kind != DD_PST_LEASE_BATCH) return;
    dd_nbuf_u64(b, m->epoch);
    dd_nbuf_u64(b, m->batch);
    dd_nbuf_u64(b, m->lo);
    dd_nbuf_u64(b, m->hi);
    dd_nbuf_u64(b, m->global);
    dd_nbuf_f64(b, m->lr);
    dd_nbuf_u64(b, m->staleness);
}

dd_status dd_pst_dec_lease(const uint8_t *p, size_t n, dd_pst_lease *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    memset(m, 0, sizeof *m);
    m->kind = dd_nrd_u8(&r);
    if (r.bad) BAD("lease-reply: truncated payload (%zu bytes)", n);
    if (m->kind > DD_PST_LEASE_END) BAD("lease-reply: kind %u is not 0 (a batch), 1 (wait) or 2 (the end)", m->kind);
    if (m->kind == DD_PST_LEASE_BATCH) {
        m->epoch = dd_nrd_u64(&r);
        m->batch = dd_nrd_u64(&r);
        m->lo = dd_nrd_u64(&r);
        m->hi = dd_nrd_u64(&r);
        m->global = dd_nrd_u64(&r);
        m->lr = dd_nrd_f64(&r);
        m->staleness = dd_nrd_u64(&r);
    }
    DD_TRY(end_of(&r, "lease-reply"));
    if (m->kind != DD_PST_LEASE_BATCH) return DD_OK;
    if (m->lo >= m->hi)
        BAD("lease-reply: frames [%llu, %llu) of batch %llu are empty", (unsigned long long)m->lo, (unsigned long long)m->hi,
            (unsigned long long)m->batch + 1);
    if (m->global < m->hi - m->lo)
        BAD("lease-reply: batch size %llu below the %llu frames of [%llu, %llu)", (unsigned long long)m->global,
            (unsigned long long)(m->hi - m->lo), (unsigned long long)m->lo, (unsigned long long)m->hi);
    if (!isfinite(m->lr) || m->lr < 0) BAD("lease-reply: learning rate %g is not a finite number >= 0", m->lr);
    return DD_OK;
}

void dd_pst_enc_commit(dd_nbuf *b, const dd_pst_commit *m) {
    b->n = 0;
    dd_nbuf_u64(b, m->epoch);
    dd_nbuf_u64(b, m->batch);
    dd_nbuf_u64(b, m->cid);
    dd_nbuf_u64(b, m->txn);
}

dd_status dd_pst_dec_commit(const uint8_t *p, size_t n, dd_pst_commit *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    m->epoch = dd_nrd_u64(&r);
    m->batch = dd_nrd_u64(&r);
    m->cid = dd_nrd_u64(&r);
    m->txn = dd_nrd_u64(&r);
    return end_of(&r, "commit");
}

void dd_pst_enc_commit_rep(dd_nbuf *b, int ok) {
    b->n = 0;
    dd_nbuf_u8(b, ok ? 1 : 0);
}

dd_status dd_pst_dec_commit_rep(const uint8_t *p, size_t n, int *ok) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    const uint8_t v = dd_nrd_u8(&r);
    *ok = 0;
    DD_TRY(end_of(&r, "commit-reply"));
    if (v > 1) BAD("commit-reply: %u is not 1 (go) or 0 (refused)", v);
    *ok = v;
    return DD_OK;
}

void dd_pst_enc_done(dd_nbuf *b, const dd_pst_done *m) {
    b->n = 0;
    dd_nbuf_u64(b, m->epoch);
    dd_nbuf_u64(b, m->batch);
    dd_nbuf_f64(b, m->loss);
    dd_nbuf_u64(b, m->lag);
    dd_nbuf_u64(b, m->resends);
    dd_nbuf_f64(b, m->compute_s);
    dd_nbuf_f64(b, m->grad_norm);
}

dd_status dd_pst_dec_done(const uint8_t *p, size_t n, dd_pst_done *m) {
    dd_nrd r;
    dd_nrd_init(&r, p, n);
    m->epoch = dd_nrd_u64(&r);
    m->batch = dd_nrd_u64(&r);
    m->loss = dd_nrd_f64(&r);
    m->lag = dd_nrd_u64(&r);
    m->resends = dd_nrd_u64(&r);
    m->compute_s = dd_nrd_f64(&r);
    m->grad_norm = dd_nrd_f64(&r);
    DD_TRY(end_of(&r, "done"));
    if (!isfinite(m->compute_s) || m->compute_s < 0) BAD("done: compute time %g s is not a finite number >= 0", m->compute_s);
    if (!isfinite(m->grad_norm) || m->grad_norm < 0) BAD("done: gradient norm %g is not a finite number >= 0", m->grad_norm);
    return DD_OK;
}
