/* The training coordinator's payloads (src/parallel/ps_msg.h, docs/ps.md "Coordinator
 * protocol"): each encoder against bytes laid out by hand from the documented layout,
 * each decoder back field for field, and every refusal of the decoders with the field it
 * names (truncated, trailing bytes, empty or over-long text, NUL and control bytes, out
 * of range values, non-finite numbers). Also a parameter server's decoding of its
 * replicas' REPL_ACK (src/ps/ps_internal.h dd_ps_dec_repl_ack): items handed out only
 * when the whole payload is valid. */
#include <math.h>

#include "dd_test.h"
#include "distdpd/core.h"
#include "parallel/ps_msg.h"
#include "ps/ps_internal.h"

/* little-endian writers for the hand-made payloads */
static size_t le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
    return (size_t)n;
}
static size_t lef(uint8_t *p, double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    return le(p, v, 8);
}

static void test_hello(void) {
    dd_nbuf b = {0};
    dd_pst_hello m;
    dd_pst_enc_hello(&b, "w0.key:42@host");
    uint8_t want[4 + 14];
    size_t k = le(want, 14, 4);
    memcpy(want + k, "w0.key:42@host", 14);
    CHECK(b.n == sizeof want && memcmp(b.p, want, sizeof want) == 0, "hello layout: u32 length + name (%zu bytes)", b.n);
    CHECK_OK(dd_pst_dec_hello(b.p, b.n, &m));
    CHECK(strcmp(m.name, "w0.key:42@host") == 0, "hello name '%s'", m.name);
    CHECK_ERR(dd_pst_dec_hello(b.p, 3, &m), DD_ERR_FORMAT, "hello: truncated payload (3 bytes)");
    CHECK_ERR(dd_pst_dec_hello(b.p, b.n - 1, &m), DD_ERR_FORMAT, "hello: the worker's name of 14 bytes past the end");
    uint8_t more[sizeof want + 2] = {0};
    memcpy(more, want, sizeof want);
    CHECK_ERR(dd_pst_dec_hello(more, sizeof more, &m), DD_ERR_FORMAT, "hello: 2 trailing bytes");
    dd_pst_enc_hello(&b, "");
    CHECK_ERR(dd_pst_dec_hello(b.p, b.n, &m), DD_ERR_FORMAT, "hello: the worker's name is empty");
    char big[DD_PST_NAME_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    dd_pst_enc_hello(&b, big);
    CHECK_ERR(dd_pst_dec_hello(b.p, b.n, &m), DD_ERR_FORMAT, "hello: the worker's name of 64 bytes (at most 63)");
    big[DD_PST_NAME_MAX] = 0; /* 63 bytes: the longest accepted */
    dd_pst_enc_hello(&b, big);
    CHECK_OK(dd_pst_dec_hello(b.p, b.n, &m));
    CHECK(strlen(m.name) == DD_PST_NAME_MAX, "a 63-byte name is kept whole");
    dd_pst_enc_hello(&b, "ab\ncd");
    CHECK_ERR(dd_pst_dec_hello(b.p, b.n, &m), DD_ERR_FORMAT, "hello: byte 0x0a at 2 of the worker's name is a control");
    dd_pst_enc_hello(&b, "abcd");
    b.p[5] = 0;
    CHECK_ERR(dd_pst_dec_hello(b.p, b.n, &m), DD_ERR_FORMAT, "hello: the worker's name holds a NUL byte");
    uint8_t huge[4];
    le(huge, 0xFFFFFFFFu, 4);
    CHECK_ERR(dd_pst_dec_hello(huge, 4, &m), DD_ERR_FORMAT, "of 4294967295 bytes (at most 63)");
    CHECK_OK(dd_pst_dec_empty(NULL, 0, "lease"));
    CHECK_ERR(dd_pst_dec_empty(want, 3, "lease"), DD_ERR_FORMAT, "lease: 3 bytes of payload (it has none)");
    dd_nbuf_free(&b);
}

static void test_welcome(void) {
    dd_nbuf b = {0};
    char json[] = "{\"model\": \"gru\"}";
    dd_pst_welcome w = {7, json, UINT64_MAX, 1, 10000}, m;
    dd_pst_enc_welcome(&b, &w);
    uint8_t want[64];
    size_t k = le(want, 7, 4);
    k += le(want + k, strlen(json), 4);
    memcpy(want + k, json, strlen(json));
    k += strlen(json);
    k += le(want + k, UINT64_MAX, 8);
    k += le(want + k, 1, 1);
    k += le(want + k, 10000, 4);
    CHECK(b.n == k && memcmp(b.p, want, k) == 0, "welcome layout (%zu bytes, want %zu)", b.n, k);
    CHECK_OK(dd_pst_dec_welcome(b.p, b.n, &m));
    CHECK(m.index == 7 && strcmp(m.cfg_json, json) == 0 && m.staleness == UINT64_MAX && m.stale_lr == 1 && m.lease_ms == 10000,
          "welcome fields");
    dd_pst_welcome_free(&m);
    CHECK(m.cfg_json == NULL, "welcome freed");
    CHECK_ERR(dd_pst_dec_welcome(b.p, b.n - 1, &m), DD_ERR_FORMAT, "welcome: truncated payload");
    CHECK(m.cfg_json == NULL, "a refused welcome owns nothing");
    CHECK_ERR(dd_pst_dec_welcome(b.p, 6, &m), DD_ERR_FORMAT, "welcome: truncated payload (6 bytes)");
    CHECK_ERR(dd_pst_dec_welcome(b.p, 12, &m), DD_ERR_FORMAT, "welcome: the configuration of 16 bytes past the end");
    memcpy(want, b.p, b.n);
    want[b.n] = 0;
    CHECK_ERR(dd_pst_dec_welcome(want, b.n + 1, &m), DD_ERR_FORMAT, "welcome: 1 trailing bytes");
    struct {
        dd_pst_welcome w;
        const char *needle;
    } bad[] = {
        {{DD_PST_MAX_WORKERS, json, 0, 0, 10000}, "welcome: worker index 256 outside [0, 256)"},
        {{0, json, (uint64_t)INT64_MAX + 1, 0, 10000}, "welcome: staleness 9223372036854775808 is neither"},
        {{0, json, 0, 2, 10000}, "welcome: stale-lr 2 is not 0 (off) or 1 (on)"},
        {{0, json, 0, 0, 99}, "welcome: lease of 99 ms outside [100, 86400000]"},
        {{0, json, 0, 0, 0x80000000u}, "welcome: lease of 2147483648 ms outside"},
        {{0, "", 0, 0, 10000}, "welcome: the configuration is empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dd_pst_enc_welcome(&b, &bad[i].w);
        CHECK_ERR(dd_pst_dec_welcome(b.p, b.n, &m), DD_ERR_FORMAT, bad[i].needle);
        CHECK(m.cfg_json == NULL, "refused welcome %zu owns nothing", i);
    }
    w.staleness = (uint64_t)INT64_MAX; /* the largest finite staleness, and the lease range's ends */
    w.lease_ms = DD_PST_LEASE_MS_MAX;
    dd_pst_enc_welcome(&b, &w);
    CHECK_OK(dd_pst_dec_welcome(b.p, b.n, &m));
    dd_pst_welcome_free(&m);
    w.cfg_json = "{\"a\"}";
    dd_pst_enc_welcome(&b, &w);
    b.p[8 + 2] = 0;
    CHECK_ERR(dd_pst_dec_welcome(b.p, b.n, &m), DD_ERR_FORMAT, "welcome: the configuration holds a NUL byte");
    dd_nbuf_free(&b);
}

static void test_lease(void) {
    dd_nbuf b = {0};
    dd_pst_lease l = {DD_PST_LEASE_BATCH, 2, 5, 80, 96, 16, 0.005, 3}, m;
    dd_pst_enc_lease(&b, &l);
    uint8_t want[57];
    size_t k = le(want, 0, 1);
    k += le(want + k, 2, 8);
    k += le(want + k, 5, 8);
    k += le(want + k, 80, 8);
    k += le(want + k, 96, 8);
    k += le(want + k, 16, 8);
    k += lef(want + k, 0.005);
    k += le(want + k, 3, 8);
    CHECK(b.n == 57 && k == 57 && memcmp(b.p, want, 57) == 0, "lease-reply layout (%zu bytes)", b.n);
    CHECK_OK(dd_pst_dec_lease(b.p, b.n, &m));
    CHECK(m.kind == 0 && m.epoch == 2 && m.batch == 5 && m.lo == 80 && m.hi == 96 && m.global == 16 && m.lr == 0.005 &&
              m.staleness == 3,
          "lease-reply fields");
    for (int kind = DD_PST_LEASE_WAIT; kind <= DD_PST_LEASE_END; kind++) {
        dd_pst_lease s = {.kind = (uint8_t)kind};
        dd_pst_enc_lease(&b, &s);
        CHECK(b.n == 1 && b.p[0] == kind, "lease-reply kind %d is one byte", kind);
        CHECK_OK(dd_pst_dec_lease(b.p, b.n, &m));
        CHECK(m.kind == kind, "kind %u decoded", kind);
        uint8_t two[2] = {kind, 0};
        CHECK_ERR(dd_pst_dec_lease(two, 2, &m), DD_ERR_FORMAT, "lease-reply: 1 trailing bytes");
    }
    const uint8_t three = 3;
    CHECK_ERR(dd_pst_dec_lease(&three, 1, &m), DD_ERR_FORMAT, "lease-reply: kind 3 is not 0 (a batch), 1 (wait) or 2");
    CHECK_ERR(dd_pst_dec_lease(NULL, 0, &m), DD_ERR_FORMAT, "lease-reply: truncated payload (0 bytes)");
    CHECK_ERR(dd_pst_dec_lease(want, 56, &m), DD_ERR_FORMAT, "lease-reply: truncated payload (56 bytes)");
    CHECK_ERR(dd_pst_dec_lease(want, 1, &m), DD_ERR_FORMAT, "lease-reply: truncated payload (1 bytes)");
    struct {
        dd_pst_lease l;
        const char *needle;
    } bad[] = {
        {{0, 0, 0, 96, 96, 16, 0.1, 0}, "lease-reply: frames [96, 96) of batch 1 are empty"},
        {{0, 0, 4, 97, 96, 16, 0.1, 0}, "lease-reply: frames [97, 96) of batch 5 are empty"},
        {{0, 0, 0, 80, 96, 15, 0.1, 0}, "lease-reply: batch size 15 below the 16 frames of [80, 96)"},
        {{0, 0, 0, 80, 96, 16, NAN, 0}, "lease-reply: learning rate nan is not a finite number >= 0"},
        {{0, 0, 0, 80, 96, 16, INFINITY, 0}, "lease-reply: learning rate inf"},
        {{0, 0, 0, 80, 96, 16, -0.001, 0}, "lease-reply: learning rate -0.001"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dd_pst_enc_lease(&b, &bad[i].l);
        CHECK_ERR(dd_pst_dec_lease(b.p, b.n, &m), DD_ERR_FORMAT, bad[i].needle);
    }
    l.lr = 0; /* a learning rate of 0 (the end of a schedule) and a last, short batch */
    l.hi = 90;
    dd_pst_enc_lease(&b, &l);
    CHECK_OK(dd_pst_dec_lease(b.p, b.n, &m));
    dd_nbuf_free(&b);
}

static void test_commit_done(void) {
    dd_nbuf b = {0};
    dd_pst_commit c = {1, 9, 0x1234567890ull, 77}, cm;
    dd_pst_enc_commit(&b, &c);
    uint8_t want[56];
    size_t k = le(want, 1, 8);
    k += le(want + k, 9, 8);
    k += le(want + k, 0x1234567890ull, 8);
    k += le(want + k, 77, 8);
    CHECK(k == 32 && b.n == k && memcmp(b.p, want, k) == 0, "commit layout (%zu bytes)", b.n);
    CHECK_OK(dd_pst_dec_commit(b.p, b.n, &cm));
    CHECK(cm.epoch == 1 && cm.batch == 9 && cm.cid == 0x1234567890ull && cm.txn == 77, "commit fields");
    CHECK_ERR(dd_pst_dec_commit(b.p, 31, &cm), DD_ERR_FORMAT, "commit: truncated payload (31 bytes)");
    CHECK_ERR(dd_pst_dec_commit(want, 33, &cm), DD_ERR_FORMAT, "commit: 1 trailing bytes");

    int ok = -1;
    for (int v = 0; v <= 1; v++) {
        dd_pst_enc_commit_rep(&b, v);
        CHECK(b.n == 1 && b.p[0] == v, "commit-reply %d is one byte", v);
        CHECK_OK(dd_pst_dec_commit_rep(b.p, b.n, &ok));
        CHECK(ok == v, "commit-reply %d decoded as %d", v, ok);
    }
    const uint8_t two[2] = {1, 1};
    CHECK_ERR(dd_pst_dec_commit_rep(two + 1, 0, &ok), DD_ERR_FORMAT, "commit-reply: truncated payload (0 bytes)");
    CHECK_ERR(dd_pst_dec_commit_rep(two, 2, &ok), DD_ERR_FORMAT, "commit-reply: 1 trailing bytes");
    CHECK(ok == 0, "a refused commit-reply is no go");
    const uint8_t v2 = 2;
    CHECK_ERR(dd_pst_dec_commit_rep(&v2, 1, &ok), DD_ERR_FORMAT, "commit-reply: 2 is not 1 (go) or 0 (refused)");
    CHECK(ok == 0, "commit-reply 2 is no go");

    dd_pst_done d = {1, 9, 0.25, 2, 4, 0.5, 3.0}, dm;
    dd_pst_enc_done(&b, &d);
    k = le(want, 1, 8);
    k += le(want + k, 9, 8);
    k += lef(want + k, 0.25);
    k += le(want + k, 2, 8);
    k += le(want + k, 4, 8);
    k += lef(want + k, 0.5);
    k += lef(want + k, 3.0);
    CHECK(b.n == 56 && k == 56 && memcmp(b.p, want, 56) == 0, "done layout (%zu bytes)", b.n);
    CHECK_OK(dd_pst_dec_done(b.p, b.n, &dm));
    CHECK(dm.epoch == 1 && dm.batch == 9 && dm.loss == 0.25 && dm.lag == 2 && dm.resends == 4 && dm.compute_s == 0.5 &&
              dm.grad_norm == 3.0,
          "done fields");
    CHECK_ERR(dd_pst_dec_done(b.p, 55, &dm), DD_ERR_FORMAT, "done: truncated payload (55 bytes)");
    d.loss = NAN; /* a diverged batch's loss is the coordinator's business (counted as lost) */
    dd_pst_enc_done(&b, &d);
    CHECK_OK(dd_pst_dec_done(b.p, b.n, &dm));
    CHECK(isnan(dm.loss), "a NaN loss passes");
    const double badv[] = {NAN, INFINITY, -1e-9};
    for (size_t i = 0; i < 3; i++) {
        d.compute_s = badv[i];
        dd_pst_enc_done(&b, &d);
        CHECK_ERR(dd_pst_dec_done(b.p, b.n, &dm), DD_ERR_FORMAT, "done: compute time");
        d.compute_s = 0;
        d.grad_norm = badv[i];
        dd_pst_enc_done(&b, &d);
        CHECK_ERR(dd_pst_dec_done(b.p, b.n, &dm), DD_ERR_FORMAT, "done: gradient norm");
        d.grad_norm = 1;
    }
    dd_nbuf_free(&b);
}

typedef struct {
    int n;
    char names[4][DD_PS_NAME_MAX];
    uint64_t ver[4];
} acks;

static void ack_item(void *u, const char *name, uint64_t v) {
    acks *a = u;
    if (a->n < 4) {
        snprintf(a->names[a->n], sizeof a->names[0], "%s", name);
        a->ver[a->n] = v;
    }
    a->n++;
}

static void test_repl_ack(void) {
    uint8_t p[128];
    size_t k = le(p, 2, 4);
    k += le(p + k, 3, 2);
    memcpy(p + k, "w#0", 3);
    k += 3;
    k += le(p + k, 42, 8);
    k += le(p + k, 1, 2);
    p[k++] = 'b';
    k += le(p + k, UINT64_MAX, 8);
    acks a = {0};
    CHECK_OK(dd_ps_dec_repl_ack(p, k, ack_item, &a));
    CHECK(a.n == 2 && strcmp(a.names[0], "w#0") == 0 && a.ver[0] == 42 && strcmp(a.names[1], "b") == 0 &&
              a.ver[1] == UINT64_MAX,
          "repl-ack items (%d)", a.n);
    CHECK_OK(dd_ps_dec_repl_ack(p, k, NULL, NULL));
    uint8_t zero[4] = {0};
    a.n = 0;
    CHECK_OK(dd_ps_dec_repl_ack(zero, 4, ack_item, &a));
    CHECK(a.n == 0, "an empty repl-ack has no item");
    struct {
        size_t n;
        const char *needle;
    } cut[] = {
        {3, "repl-ack: truncated payload (3 bytes)"},
        {k - 1, "repl-ack: item 2 ('b'): truncated version"},
        {4 + 2 + 3 + 8 + 2, "repl-ack: 2 items cannot fit in the 19 bytes"},
        {4 + 2 + 3 + 8, "repl-ack: 2 items cannot fit in the 17 bytes"},
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        a.n = 0;
        CHECK_ERR(dd_ps_dec_repl_ack(p, cut[i].n, ack_item, &a), DD_ERR_FORMAT, cut[i].needle);
        CHECK(a.n == 0, "a refused repl-ack hands out no item (cut %zu: %d)", i, a.n);
    }
    p[k] = 0;
    a.n = 0;
    CHECK_ERR(dd_ps_dec_repl_ack(p, k + 1, ack_item, &a), DD_ERR_FORMAT, "repl-ack: 1 trailing bytes after the 2 items");
    CHECK(a.n == 0, "trailing bytes: no item handed out");
    p[4 + 2 + 3 + 8 + 2] = 0x01; /* the second name's byte: a control character */
    CHECK_ERR(dd_ps_dec_repl_ack(p, k, ack_item, &a), DD_ERR_FORMAT, "repl-ack: item 2: the block name at byte 17");
    CHECK(a.n == 0, "a bad second name: the first item was not handed out either");
    le(p + 4 + 2 + 3 + 8, 0, 2); /* an empty name */
    CHECK_ERR(dd_ps_dec_repl_ack(p, k, NULL, NULL), DD_ERR_FORMAT, "item 2: the block name at byte 17");
    uint8_t one[15] = {1, 0, 0, 0, 20, 0, 'w', 'w', 'w', 'w', 'w', 'w', 'w', 'w', 'w'}; /* a name of 20 bytes, 9 there */
    CHECK_ERR(dd_ps_dec_repl_ack(one, sizeof one, NULL, NULL), DD_ERR_FORMAT,
              "repl-ack: item 1: the block name at byte 4 is truncated, empty, longer than 95 bytes or not printable");
    le(p, 0xFFFFFFFFu, 4);
    CHECK_ERR(dd_ps_dec_repl_ack(p, k, NULL, NULL), DD_ERR_FORMAT, "repl-ack: 4294967295 items cannot fit");
}

int main(void) {
    test_repl_ack();
    test_hello();
    test_welcome();
    test_lease();
    test_commit_done();
    return dd_test_done("test_ps_msg");
}
