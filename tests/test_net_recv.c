/* dd_net_recv (src/net/recv.c: one validated message from a ROUTER or DEALER socket, the
 * federated coordinator's and the benches' receive) through its refusals, the paths
 * `make coverage` showed untested by the unit label (docs/testing.md "Coverage"), over
 * real ZeroMQ sockets (inproc, no mock):
 * - a valid message both ways: the routing id of the peer (ROUTER), header fields and
 *   payload; nothing waiting: 0;
 * - a message of two frames: refused "more than one frame", the extra frame read and
 *   dropped (the next message comes out whole);
 * - bytes that are no message (5 bytes; a payload over the limit): dd_net_parse's reason;
 * - a single-frame message read as a ROUTER's (no frame after the routing id): "empty
 *   message";
 * - the context shut down under the socket: -1 with DD_ERR_COMM naming zmq_poll. */
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "dd_test.h"
#include "distdpd/net.h"

static long wait_ms(void) { return (long)(5000 * dd_test_timeout_scale()); }

/* Receives one message on sock; REQUIREs that one came. */
static void recv_one(void *sock, int router, uint32_t max_payload, dd_net_msg *m) {
    int rc = dd_net_recv(sock, router, wait_ms(), max_payload, m);
    REQUIRE(rc == 1, "dd_net_recv: %d (%s)", rc, dd_last_error());
}

int main(void) {
    void *ctx = zmq_ctx_new();
    REQUIRE(ctx != NULL, "zmq_ctx_new");
    void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
    REQUIRE(router && dealer, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    REQUIRE(zmq_setsockopt(dealer, ZMQ_ROUTING_ID, "bench7", 6) == 0, "routing id");
    REQUIRE(zmq_bind(router, "inproc://recv") == 0 && zmq_connect(dealer, "inproc://recv") == 0, "bind/connect: %s",
            zmq_strerror(zmq_errno()));
    dd_net_msg m;

    /* nothing waiting */
    CHECK(dd_net_recv(router, 1, 0, 1024, &m) == 0, "no message: 0");
    CHECK(m.frame == NULL && strcmp(m.peer, "?") == 0, "nothing filled in");

    /* a valid message, DEALER -> ROUTER */
    CHECK(dd_net_send(dealer, NULL, 0, DD_MSG_PING, 9, 3, "abc", 3) == 1, "sent");
    recv_one(router, 1, 1024, &m);
    CHECK(m.ok && m.err[0] == '\0', "accepted: %s", m.err);
    CHECK(m.rid_n == 6 && memcmp(m.rid, "bench7", 6) == 0, "routing id of %zu bytes", m.rid_n);
    CHECK(m.h.type == DD_MSG_PING && m.h.seq == 9 && m.h.sender == 3 && m.h.len == 3 && m.payload &&
              memcmp(m.payload, "abc", 3) == 0,
          "header: type %d seq %llu sender %llu len %u", m.h.type, (unsigned long long)m.h.seq,
          (unsigned long long)m.h.sender, m.h.len);
    CHECK(m.n == DD_NET_HEADER + 3, "frame of %zu bytes", m.n);
    dd_net_msg_free(&m);
    CHECK(m.frame == NULL && m.payload == NULL && m.n == 0, "freed");
    dd_net_msg_free(&m); /* twice: a no-op */
    dd_net_msg_free(NULL);

    /* ROUTER -> DEALER: no routing id */
    CHECK(dd_net_send(router, "bench7", 6, DD_MSG_PING, 10, 0, "reply", 5) == 1, "sent back");
    recv_one(dealer, 0, 1024, &m);
    CHECK(m.ok && m.rid_n == 0 && m.h.seq == 10 && m.h.len == 5, "dealer side: ok %d rid %zu seq %llu (%s)", m.ok,
          m.rid_n, (unsigned long long)m.h.seq, m.err);
    dd_net_msg_free(&m);

    /* two frames: the first kept, refused, the second read and dropped */
    uint8_t frame[DD_NET_HEADER + 4];
    dd_net_hdr_write(frame, DD_MSG_PING, 11, 3, "wxyz", 4);
    memcpy(frame + DD_NET_HEADER, "wxyz", 4);
    REQUIRE(zmq_send(dealer, frame, sizeof frame, ZMQ_SNDMORE) == (int)sizeof frame &&
                zmq_send(dealer, "extra", 5, 0) == 5,
            "zmq_send: %s", zmq_strerror(zmq_errno()));
    recv_one(router, 1, 1024, &m);
    CHECK(!m.ok && strcmp(m.err, "more than one frame") == 0 && m.n == sizeof frame && m.rid_n == 6,
          "two frames: ok %d, err '%s', %zu bytes", m.ok, m.err, m.n);
    dd_net_msg_free(&m);
    CHECK(dd_net_send(dealer, NULL, 0, DD_MSG_PING, 12, 3, NULL, 0) == 1, "sent");
    recv_one(router, 1, 1024, &m);
    CHECK(m.ok && m.h.seq == 12, "the next message whole: ok %d seq %llu (%s)", m.ok, (unsigned long long)m.h.seq,
          m.err);
    dd_net_msg_free(&m);

    /* bytes that are no message */
    REQUIRE(zmq_send(dealer, "short", 5, 0) == 5, "zmq_send");
    recv_one(router, 1, 1024, &m);
    CHECK(!m.ok && strstr(m.err, "truncated header: 5 bytes, need 32"), "5 bytes: '%s'", m.err);
    dd_net_msg_free(&m);
    static uint8_t big[DD_NET_HEADER + 100];
    dd_net_hdr_write(big, DD_MSG_PING, 13, 3, big + DD_NET_HEADER, 100);
    REQUIRE(zmq_send(dealer, big, sizeof big, 0) == (int)sizeof big, "zmq_send");
    recv_one(router, 1, 10, &m);
    CHECK(!m.ok && strstr(m.err, "oversized: payload 100 bytes over the limit of 10"), "over the limit: '%s'", m.err);
    dd_net_msg_free(&m);

    /* a single frame read as a ROUTER's message: the routing id and nothing after it */
    CHECK(dd_net_send(router, "bench7", 6, DD_MSG_PING, 14, 0, NULL, 0) == 1, "sent");
    recv_one(dealer, 1, 1024, &m);
    CHECK(!m.ok && strcmp(m.err, "empty message") == 0 && m.frame == NULL, "empty: ok %d, err '%s'", m.ok, m.err);
    dd_net_msg_free(&m);

    /* the context shut down: the socket refuses */
    REQUIRE(zmq_ctx_shutdown(ctx) == 0, "zmq_ctx_shutdown");
    dd_error_clear();
    CHECK(dd_net_recv(router, 1, wait_ms(), 1024, &m) == -1, "a terminated context: -1");
    CHECK(strstr(dd_last_error(), "zmq_poll: ") && strstr(dd_last_error(), zmq_strerror(ETERM)), "message: %s",
          dd_last_error());
    dd_net_msg_free(&m);
    zmq_close(router);
    zmq_close(dealer);
    zmq_ctx_term(ctx);
    return dd_test_done("test_net_recv");
}
