/* Security and robustness of `distdpd ps-server` (issue 14): an unenrolled key, a client
 * with the wrong server key, garbage bytes, oversized, truncated, multi-frame and
 * malformed messages, and a plain-TCP connection sending junk: each refused with a log
 * line naming the peer (and an error reply carrying the reason where the peer is
 * authenticated); the server keeps serving: a good client's pushes still sum exactly
 * afterwards. One server process on loopback, --max-msg 4096. */
#include <zmq.h>

#include "ps_test_util.h"

static ps_cluster C;

/* Sends raw bytes (one or two frames) from an enrolled DEALER; returns the reply text of
 * an ERR reply ("" when none came in 2 s). */
static void raw_exchange(const void *a, size_t na, const void *b, size_t nb, char *reply, size_t cap) {
    char key[600], sec[41], pub[41];
    snprintf(key, sizeof key, "%s/worker0.key", C.dir);
    dd_net_key_read(key, 1, sec);
    dd_net_key_public(sec, pub);
    void *ctx = zmq_ctx_new(), *d = NULL;
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", C.port[0]);
    reply[0] = 0;
    if (dd_net_dealer(ctx, ep, sec, pub, C.pub[0], &d) == DD_OK) {
        zmq_send(d, a, na, b ? ZMQ_SNDMORE : 0);
        if (b) zmq_send(d, b, nb, 0);
        zmq_pollitem_t it = {d, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 2000) > 0) {
            uint8_t buf[2048];
            int n = zmq_recv(d, buf, sizeof buf, 0);
            dd_net_hdr h;
            const uint8_t *pl;
            if (n > 0 && dd_net_parse(buf, (size_t)n, sizeof buf, &h, &pl) == DD_OK && h.type == DD_MSG_ERR)
                snprintf(reply, cap, "%.*s", (int)h.len, (const char *)pl);
        }
        zmq_close(d);
    }
    zmq_ctx_term(ctx);
}

static void expect_refusal(const char *what, const char *reply, const char *needle) {
    CHECK(strstr(reply, needle) != NULL, "%s: error reply '%s' lacks '%s'", what, reply, needle);
    usleep(100000);
    char *log = ps_server_log(&C, 0);
    char want[400];
    snprintf(want, sizeof want, "refused message from 127.0.0.1 (worker0): %s", needle);
    CHECK(strstr(log, want) != NULL, "%s: server log lacks '%s':\n%s", what, want, log);
    free(log);
}

/* init + 5 pushes + pull with a good client: exact. */
static void good_client(const char *when) {
    char key[600];
    snprintf(key, sizeof key, "%s/worker1.key", C.dir);
    dd_ps_client_opts o = {.key_path = key, .resend_ms = 50, .dead_ms = 3000};
    dd_ps_client *c = NULL;
    dd_ps_block b = {.name = "w", .offset = 0, .len = 4};
    float w[4] = {0}, g[4] = {1, 2, 3, 4};
    uint64_t v = UINT64_MAX;
    CHECK_OK(dd_ps_client_open(C.cluster, &o, &c));
    CHECK_OK(dd_ps_client_set_blocks(c, &b, 1));
    CHECK_OK(dd_ps_client_init(c, w, NULL));
    for (int i = 0; i < 5; i++) CHECK_OK(dd_ps_client_push(c, g, 0.5, NULL));
    CHECK_OK(dd_ps_client_pull(c, w, &v));
    static float expect = 0;
    expect -= 2.5f; /* w[0] -= 0.5 * 1 five times per call */
    CHECK(w[0] == expect && w[3] == 4 * expect, "%s: good client reads w[0] = %g (want %g), w[3] = %g", when, w[0], expect,
          w[3]);
    dd_ps_client_close(&c);
}

/* The two-phase push (docs/ps.md, "Atomic pushes"), on block "w" (SGD, lr 0.5) after
 * good_client: a staged update changes nothing until applied; applied once whoever sends
 * the apply and however often; an apply of an update never staged, or replaced by a newer
 * stage, is refused and changes nothing. */
static void two_phase(void) {
    char key[600];
    dd_ps_client_opts o = {.resend_ms = 50, .dead_ms = 3000};
    dd_ps_client *c = NULL, *other = NULL;
    dd_ps_block b = {.name = "w", .offset = 0, .len = 4};
    float w0[4], w[4], g[4] = {1, 2, 3, 4}, g2[4] = {10, 10, 10, 10};
    snprintf(key, sizeof key, "%s/worker1.key", C.dir);
    o.key_path = key;
    CHECK_OK(dd_ps_client_open(C.cluster, &o, &c));
    CHECK_OK(dd_ps_client_set_blocks(c, &b, 1));
    CHECK_OK(dd_ps_client_pull(c, w0, NULL));
    uint64_t txn = 0, old;
    CHECK_OK(dd_ps_client_stage(c, g, 0.5, &txn));
    CHECK(txn != 0, "stage returns a transaction number");
    CHECK_OK(dd_ps_client_pull(c, w, NULL));
    CHECK(w[0] == w0[0] && w[3] == w0[3], "a staged update is not applied (w[0] %g, was %g)", w[0], w0[0]);
    CHECK_OK(dd_ps_client_apply(c, 0, txn, NULL));
    CHECK_OK(dd_ps_client_pull(c, w, NULL));
    CHECK(w[0] == w0[0] - 0.5f && w[3] == w0[3] - 2.0f, "applied once: w[0] %g (want %g)", w[0], w0[0] - 0.5f);
    /* the same apply again, and from another client on the owner's behalf: duplicates */
    CHECK_OK(dd_ps_client_apply(c, 0, txn, NULL));
    snprintf(key, sizeof key, "%s/worker0.key", C.dir);
    o.key_path = key;
    CHECK_OK(dd_ps_client_open(C.cluster, &o, &other));
    CHECK_OK(dd_ps_client_set_blocks(other, &b, 1));
    CHECK_OK(dd_ps_client_apply(other, dd_ps_client_id(c), txn, NULL));
    /* staged again under the applied number (a retry after a failover): ignored */
    CHECK_OK(dd_ps_client_stage(c, g2, 0.5, &txn));
    CHECK_OK(dd_ps_client_apply(c, 0, txn, NULL));
    CHECK_OK(dd_ps_client_pull(c, w, NULL));
    CHECK(w[0] == w0[0] - 0.5f, "repeated applies and a restage of an applied update change nothing: w[0] %g", w[0]);
    /* never staged: refused */
    CHECK_ERR(dd_ps_client_apply(other, 0, 12345, NULL), DD_ERR_COMM, "holds no staged update 12345 of client");
    /* a newer stage replaces an older one that was never applied */
    old = 0;
    CHECK_OK(dd_ps_client_stage(c, g2, 0.5, &old));
    txn = 0;
    CHECK_OK(dd_ps_client_stage(c, g, 0.5, &txn));
    CHECK_ERR(dd_ps_client_apply(c, 0, old, NULL), DD_ERR_COMM, "holds no staged update");
    CHECK_OK(dd_ps_client_apply(other, dd_ps_client_id(c), txn, NULL));
    CHECK_OK(dd_ps_client_pull(c, w, NULL));
    CHECK(w[0] == w0[0] - 1.0f && w[3] == w0[3] - 4.0f, "the newer stage applied, the replaced one not: w[0] %g (want %g)",
          w[0], w0[0] - 1.0f);
    float undo[4] = {-2, -4, -6, -8}; /* back to w0 for good_client's running expectation */
    CHECK_OK(dd_ps_client_push(c, undo, 0.5, NULL));
    dd_ps_client_close(&other);
    dd_ps_client_close(&c);
}

int main(void) {
    if (!getenv("DD_CLI")) {
        dd_test_skip("DD_CLI not set (run through ctest)");
        return 77;
    }
    if (ps_cluster_setup(&C, 1, 2, 0, "{\"kind\": \"sgd\"}") != 0) return 1;
    ps_server_start(&C, 0, "--max-msg 4096");
    good_client("before");
    two_phase();

    /* an unenrolled key */
    char base[600], pub[41];
    snprintf(base, sizeof base, "%s/stranger", C.dir);
    CHECK_OK(dd_net_keygen(base, 0, pub));
    snprintf(base, sizeof base, "%s/stranger.key", C.dir);
    dd_ps_client_opts o = {.key_path = base, .resend_ms = 50, .dead_ms = 1000};
    dd_ps_client *c = NULL;
    dd_ps_block b = {.name = "w", .offset = 0, .len = 4};
    float w[4] = {0};
    CHECK_OK(dd_ps_client_open(C.cluster, &o, &c));
    CHECK_OK(dd_ps_client_set_blocks(c, &b, 1));
    CHECK_ERR(dd_ps_client_pull(c, w, NULL), DD_ERR_TIMEOUT, "no live server left for block 'w'");
    dd_ps_client_close(&c);
    char *log = ps_server_log(&C, 0);
    char want[300];
    snprintf(want, sizeof want, "ps-server s0: refused CURVE client 127.0.0.1 key %s: not in the allow file", pub);
    CHECK(strstr(log, want) != NULL, "unenrolled key: log lacks '%s':\n%s", want, log);
    free(log);

    /* a client with the wrong server key: the handshake fails */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/wrong-cluster.json", C.dir);
    FILE *f = fopen(bad, "w");
    char wpub[41], wsec[41];
    zmq_curve_keypair(wpub, wsec);
    fprintf(f, "{\"replicas\": 0, \"servers\": [{\"name\": \"s0\", \"address\": \"tcp://127.0.0.1:%d\", \"public_key\": \"%s\"}]}",
            C.port[0], wpub);
    fclose(f);
    snprintf(base, sizeof base, "%s/worker1.key", C.dir);
    o.key_path = base;
    CHECK_OK(dd_ps_client_open(bad, &o, &c));
    CHECK_OK(dd_ps_client_set_blocks(c, &b, 1));
    CHECK_ERR(dd_ps_client_pull(c, w, NULL), DD_ERR_TIMEOUT, "no live server left");
    dd_ps_client_close(&c);
    log = ps_server_log(&C, 0);
    CHECK(strstr(log, "refused a connection (latest accepted: 127.0.0.1:") && strstr(log, "CURVE handshake failed"),
          "wrong server key: log lacks the handshake failure:\n%s", log);
    free(log);

    /* garbage, bad magic, oversized, truncated, two frames, malformed payload */
    char reply[1024];
    raw_exchange("garbage!", 8, NULL, 0, reply, sizeof reply);
    expect_refusal("garbage", reply, "truncated header: 8 bytes, need 32");
    uint8_t m[8192];
    memset(m, 'x', sizeof m);
    raw_exchange(m, 64, NULL, 0, reply, sizeof reply);
    expect_refusal("bad magic", reply, "bad magic 0x78787878");
    dd_net_hdr_write(m, DD_MSG_PUSH, 1, 5, m + DD_NET_HEADER, 5000);
    raw_exchange(m, DD_NET_HEADER + 5000, NULL, 0, reply, sizeof reply);
    expect_refusal("oversized", reply, "oversized: payload 5000 bytes over the limit of 4096");
    dd_net_hdr_write(m, DD_MSG_PUSH, 1, 5, m + DD_NET_HEADER, 100);
    raw_exchange(m, DD_NET_HEADER + 10, NULL, 0, reply, sizeof reply);
    expect_refusal("truncated", reply, "truncated: header says 100 payload bytes, message has 10");
    raw_exchange("a", 1, "b", 1, reply, sizeof reply);
    expect_refusal("two frames", reply, "expected 1 frame, got 2");
    uint8_t pl[12] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 1, 0, 0, 0}; /* lr 1.0, 1 item, nothing after */
    dd_net_hdr_write(m, DD_MSG_PUSH, 1, 5, pl, sizeof pl);
    memcpy(m + DD_NET_HEADER, pl, sizeof pl);
    raw_exchange(m, DD_NET_HEADER + sizeof pl, NULL, 0, reply, sizeof reply);
    expect_refusal("malformed", reply, "malformed push: item 0 (name, length, values) runs past the payload");
    uint8_t pl2[] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 1, 0, 0, 0, 3, 0, 'z', 'z', 'z', 1, 0, 0, 0, 0, 0, 0x80, 0x3f};
    dd_net_hdr_write(m, DD_MSG_PUSH, 1, 5, pl2, sizeof pl2);
    memcpy(m + DD_NET_HEADER, pl2, sizeof pl2);
    raw_exchange(m, DD_NET_HEADER + sizeof pl2, NULL, 0, reply, sizeof reply);
    expect_refusal("unknown block", reply, "push: unknown block 'zzz' (init it first)");

    /* junk on a plain TCP connection (not even ZMTP) */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)C.port[0]);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        CHECK(write(fd, m, 4096) > 0, "junk written");
        usleep(200000);
    }
    if (fd >= 0) close(fd);

    /* still serving */
    CHECK(kill(C.pid[0], 0) == 0, "server still running");
    good_client("after");
    uint8_t ap[] = {1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}; /* owner 1, txn 7, 1 item, no name */
    dd_net_hdr_write(m, DD_MSG_APPLY, 2, 5, ap, sizeof ap);
    memcpy(m + DD_NET_HEADER, ap, sizeof ap);
    raw_exchange(m, DD_NET_HEADER + sizeof ap, NULL, 0, reply, sizeof reply);
    expect_refusal("malformed apply", reply, "malformed apply: item 0 runs past the payload");
    ps_cluster_stop(&C);
    log = ps_server_log(&C, 0);
    CHECK(strstr(log, "stopped after") != NULL, "server stopped cleanly on SIGTERM:\n%s", log);
    if (getenv("DD_PS_SHOW_LOG")) fputs(log, stdout);
    free(log);
    ps_cluster_remove(&C);
    return dd_test_done("test_ps_security_cli");
}
