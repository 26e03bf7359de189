/* The parameter server's transport (net.h): message header validation, payload
 * reader bounds, key files, allow files, and the ZAP handler over real CURVE sockets
 * on loopback (an enrolled key gets through, an unenrolled one is refused with a log
 * line naming its key). */
#include <pthread.h>
#include <sys/stat.h>
#include <zmq.h>

#include "dd_test.h"
#include "distdpd/core.h"
#include "distdpd/net.h"

static char logbuf[8192];
static pthread_mutex_t logmu = PTHREAD_MUTEX_INITIALIZER;
static void log_fn(dd_log_level l, const char *msg, void *u) {
    (void)l;
    (void)u;
    pthread_mutex_lock(&logmu);
    size_t n = strlen(logbuf);
    snprintf(logbuf + n, sizeof logbuf - n, "%s\n", msg);
    pthread_mutex_unlock(&logmu);
}
static int log_has(const char *s) {
    pthread_mutex_lock(&logmu);
    int r = strstr(logbuf, s) != NULL;
    pthread_mutex_unlock(&logmu);
    return r;
}

static void test_header(void) {
    uint8_t m[64];
    const char pl[] = "hello";
    dd_net_hdr_write(m, DD_MSG_PUSH, 42, 7, pl, 5);
    memcpy(m + DD_NET_HEADER, pl, 5);
    dd_net_hdr h;
    const uint8_t *p;
    CHECK_OK(dd_net_parse(m, DD_NET_HEADER + 5, 100, &h, &p));
    CHECK(h.type == DD_MSG_PUSH && h.seq == 42 && h.sender == 7 && h.len == 5 && memcmp(p, "hello", 5) == 0, "fields");
    CHECK_ERR(dd_net_parse(m, 7, 100, &h, &p), DD_ERR_FORMAT, "truncated header: 7 bytes, need 32");
    CHECK_ERR(dd_net_parse(m, DD_NET_HEADER + 3, 100, &h, &p), DD_ERR_FORMAT,
              "truncated: header says 5 payload bytes, message has 3");
    CHECK_ERR(dd_net_parse(m, DD_NET_HEADER + 7, 100, &h, &p), DD_ERR_FORMAT, "2 trailing bytes after the payload");
    CHECK_ERR(dd_net_parse(m, DD_NET_HEADER + 5, 4, &h, &p), DD_ERR_FORMAT, "oversized: payload 5 bytes over the limit of 4");
    uint8_t b[64];
    memcpy(b, m, sizeof b);
    b[0] ^= 1;
    CHECK_ERR(dd_net_parse(b, DD_NET_HEADER + 5, 100, &h, &p), DD_ERR_FORMAT, "bad magic");
    memcpy(b, m, sizeof b);
    b[4] = 9;
    CHECK_ERR(dd_net_parse(b, DD_NET_HEADER + 5, 100, &h, &p), DD_ERR_FORMAT, "unsupported version 9");
    memcpy(b, m, sizeof b);
    b[5] = 77;
    CHECK_ERR(dd_net_parse(b, DD_NET_HEADER + 5, 100, &h, &p), DD_ERR_FORMAT, "unknown message type 77");
    memcpy(b, m, sizeof b);
    b[6] = 1;
    CHECK_ERR(dd_net_parse(b, DD_NET_HEADER + 5, 100, &h, &p), DD_ERR_FORMAT, "reserved flags");
    memcpy(b, m, sizeof b);
    b[DD_NET_HEADER] = 'j';
    CHECK_ERR(dd_net_parse(b, DD_NET_HEADER + 5, 100, &h, &p), DD_ERR_FORMAT, "payload CRC32C mismatch");
}

static void test_payload(void) {
    dd_nbuf b = {0};
    dd_nbuf_u32(&b, 0xdeadbeef);
    dd_nbuf_str(&b, "gru.weight#0");
    dd_nbuf_f64(&b, 0.25);
    dd_nbuf_u64(&b, 1ull << 40);
    dd_nrd r;
    dd_nrd_init(&r, b.p, b.n);
    char name[32];
    CHECK(dd_nrd_u32(&r) == 0xdeadbeef, "u32");
    dd_nrd_str(&r, name, sizeof name);
    CHECK(strcmp(name, "gru.weight#0") == 0, "str '%s'", name);
    CHECK(dd_nrd_f64(&r) == 0.25, "f64");
    CHECK(dd_nrd_u64(&r) == (1ull << 40) && !r.bad && r.off == b.n, "u64 and end");
    CHECK(dd_nrd_u8(&r) == 0 && r.bad, "read past the end is refused");
    dd_nrd_init(&r, b.p, b.n);
    dd_nrd_u32(&r);
    dd_nrd_str(&r, name, 5); /* too long for the buffer */
    CHECK(r.bad, "over-long string refused");
    uint8_t ctl[] = {3, 0, 'a', 1, 'b'};
    dd_nrd_init(&r, ctl, sizeof ctl);
    dd_nrd_str(&r, name, sizeof name);
    CHECK(r.bad, "control bytes in a name refused");
    dd_nbuf_free(&b);
}

static void test_keys(const char *dir) {
    char base[512], path[600], pub[41], pub2[41], sec[41], derived[41];
    snprintf(base, sizeof base, "%s/k", dir);
    CHECK_OK(dd_net_keygen(base, 0, pub));
    CHECK_ERR(dd_net_keygen(base, 0, pub2), DD_ERR_IO, "exists: not overwriting");
    snprintf(path, sizeof path, "%s.key", base);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "secret key mode %o", (unsigned)(st.st_mode & 0777));
    CHECK_OK(dd_net_key_read(path, 1, sec));
    CHECK_OK(dd_net_key_public(sec, derived));
    CHECK(strcmp(derived, pub) == 0, "public key derived from the secret");
    snprintf(path, sizeof path, "%s.pub", base);
    CHECK_OK(dd_net_key_read(path, 0, pub2));
    CHECK(strcmp(pub2, pub) == 0, "NAME.pub holds the public key");
    snprintf(path, sizeof path, "%s.key", base);
    chmod(path, 0644);
    CHECK_ERR(dd_net_key_read(path, 1, sec), DD_ERR_IO, "must not be readable by others (mode 644");
    snprintf(path, sizeof path, "%s/bad.pub", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "# comment\nnot-a-key\n");
    fclose(f);
    CHECK_ERR(dd_net_key_read(path, 0, pub2), DD_ERR_FORMAT, "expected a 40-character Z85 key, got 'not-a-key'");
    snprintf(path, sizeof path, "%s/allow", dir);
    f = fopen(path, "w");
    fprintf(f, "# enrolled workers\n%s worker-0\n\n%.39s\n", pub, pub);
    fclose(f);
    dd_net_allow *a = NULL;
    CHECK_ERR(dd_net_allow_load(path, &a), DD_ERR_FORMAT, "allow:4: expected a 40-character Z85 public key, got");
    CHECK(a == NULL, "no list on error");
}

/* A CURVE ROUTER with the ZAP handler; one enrolled and one unenrolled DEALER. */
static void test_zap(const char *dir) {
    char spub[41], ssec[41], gpub[41], gsec[41], bpub[41], bsec[41], path[600];
    CHECK(zmq_curve_keypair(spub, ssec) == 0 && zmq_curve_keypair(gpub, gsec) == 0 && zmq_curve_keypair(bpub, bsec) == 0,
          "keypairs");
    snprintf(path, sizeof path, "%s/allow2", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s good-worker # the enrolled one\n", gpub);
    fclose(f);
    dd_net_allow *a = NULL;
    CHECK_OK(dd_net_allow_load(path, &a));
    CHECK(dd_net_allow_count(a) == 1, "one key");
    void *ctx = zmq_ctx_new();
    dd_net_zap *z = NULL;
    CHECK_OK(dd_net_zap_start(ctx, a, path, "test-server", &z));
    void *r = NULL, *good = NULL, *bad = NULL;
    CHECK_OK(dd_net_router(ctx, "tcp://127.0.0.1:*", ssec, 1 << 20, &r));
    char ep[256];
    size_t epn = sizeof ep;
    zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep, &epn);
    CHECK_OK(dd_net_dealer(ctx, ep, gsec, gpub, spub, &good));
    CHECK_OK(dd_net_dealer(ctx, ep, bsec, bpub, spub, &bad));
    dd_net_send(bad, NULL, 0, DD_MSG_PING, 1, 2, NULL, 0);
    dd_net_send(good, NULL, 0, DD_MSG_PING, 5, 9, "x", 1);
    int got_good = 0, got_bad = 0;
    int64_t t0 = dd_net_ms(), wait_ms = (int64_t)(1500 * dd_test_timeout_scale());
    /* until the enrolled message came and the unenrolled handshake was refused (after
     * which its message cannot come), or the deadline (stretched under valgrind) */
    while (dd_net_ms() - t0 < wait_ms) {
        uint64_t adm0, ref0;
        dd_net_zap_counts(z, &adm0, &ref0);
        if (got_good && ref0 >= 1) break;
        zmq_pollitem_t it = {r, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0) continue;
        zmq_msg_t id, m;
        zmq_msg_init(&id);
        zmq_msg_init(&m);
        zmq_msg_recv(&id, r, 0);
        zmq_msg_recv(&m, r, 0);
        dd_net_hdr h;
        const uint8_t *p;
        if (dd_net_parse(zmq_msg_data(&m), zmq_msg_size(&m), 100, &h, &p) == DD_OK) {
            const char *uid = zmq_msg_gets(&m, "User-Id");
            if (h.sender == 9 && uid && strcmp(uid, "good-worker") == 0) got_good++;
            if (h.sender == 2) got_bad++;
        }
        zmq_msg_close(&id);
        zmq_msg_close(&m);
    }
    CHECK(got_good == 1, "enrolled client's message arrived with its label as User-Id (%d)", got_good);
    CHECK(got_bad == 0, "unenrolled client's message did not arrive (%d)", got_bad);
    uint64_t adm, ref;
    dd_net_zap_counts(z, &adm, &ref);
    CHECK(adm >= 1 && ref >= 1, "zap counts admitted %llu refused %llu", (unsigned long long)adm, (unsigned long long)ref);
    char want[200];
    snprintf(want, sizeof want, "test-server: refused CURVE client 127.0.0.1 key %s: not in the allow file", bpub);
    CHECK(log_has(want), "refusal logged with address and key: %s", logbuf);
    zmq_close(good);
    zmq_close(bad);
    zmq_close(r);
    dd_net_zap_stop(&z);
    zmq_ctx_term(ctx);
}

int main(void) {
    dd_log_set(log_fn, NULL, DD_LOG_WARN);
    char dir[] = "/tmp/ddnet.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_header();
    test_payload();
    test_keys(dir);
    test_zap(dir);
    dd_t_rm(dir); /* tests/dd_test.h: no shell (the path was unquoted) */
    return dd_test_done("test_net");
}
