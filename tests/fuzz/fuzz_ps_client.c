/* libFuzzer target: the parameter-server client's decoding of replies (src/ps/client.c
 * run_op and dd_ps_client_ping: ACK, PULL_REP, STATE_REP, ERR, PONG and anything else a
 * server could send). The harness plays the server: a ROUTER socket on loopback
 * (insecure) in a thread, and one real client (dd_ps_client_open of a one-server cluster
 * file, three blocks) kept for the whole session, as a worker keeps its client.
 *
 * Input: byte 0 picks the client's operation (init, push, pull, pull_state, stage, apply,
 * restore, ping); the rest is up to 16 replies, each [ctl u8][len u16 LE][len bytes]:
 * ctl & 7 picks the type (ACK, PULL_REP, STATE_REP, ERR, PONG, REPL_ACK, PULL, LEASE_REP),
 * 0x08 stamps the previous operation's sequence number (a stale reply), 0x10 sends the
 * bytes raw (no header), 0x20 splits the message into two frames. The fake server sends
 * them, with a valid header and CRC, in answer to the operation's first request and then
 * the honest reply (every block, version 42, values honest(i, j)), so every operation
 * ends at once whatever the input did (no waiting for dead_ms: the client's resend and
 * failover paths are test_ps_*'s). A resend is answered honestly only.
 *
 * Invariants (abort = finding): the operation returns DD_OK, or DD_ERR_COMM naming the
 * server for an ERR reply (never a timeout: the server answered); floats between the
 * blocks of the arena are never written; after pull_state every block has a state blob;
 * and a following honest pull restores exactly the honest values and versions (the
 * input left the client usable). */
#include <errno.h>
#include <pthread.h>
#include <zmq.h>

#include "distdpd/ps.h"
#include "fuzz_util.h"

#define NB 3
#define ARENA 16
#define CANARY -12345.0f
static const dd_ps_block blocks[NB] = {{"w#0", 0, 4}, {"w#1", 6, 4}, {"b", 12, 1}};
static const uint64_t HONEST_VER = 42;
#define SERVER_SENDER 0xFFFF000000000000ull /* a server's sender id (src/ps/ps_internal.h) */

static char cluster[512], addr[64];
static dd_ps_client *cli;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *script; /* the replies still to send (taken by the next new request) */
static size_t script_n;
static int script_set;

static float honest(size_t i, size_t j) { return (float)(i * 10 + j) + 0.5f; }

static void send_msg(void *r, zmq_msg_t *id, const uint8_t *p, size_t n, int split) {
    zmq_send(r, zmq_msg_data(id), zmq_msg_size(id), ZMQ_SNDMORE);
    if (split && n > 1) {
        zmq_send(r, p, n / 2, ZMQ_SNDMORE);
        zmq_send(r, p + n / 2, n - n / 2, 0);
    } else {
        zmq_send(r, p, n, 0);
    }
}

static void send_framed(void *r, zmq_msg_t *id, int type, uint64_t seq, const uint8_t *pl, size_t n, int raw, int split) {
    uint8_t *m = malloc(DD_NET_HEADER + n + 1);
    if (!m) abort();
    size_t len = n;
    if (raw) {
        if (n) memcpy(m, pl, n);
    } else {
        dd_net_hdr_write(m, type, seq, SERVER_SENDER, pl, (uint32_t)n);
        if (n) memcpy(m + DD_NET_HEADER, pl, n);
        len += DD_NET_HEADER;
    }
    send_msg(r, id, m, len, split);
    free(m);
}

/* The honest answer to a request of `type`. */
static void send_honest(void *r, zmq_msg_t *id, int type, uint64_t seq) {
    dd_nbuf b = {0};
    int rt = type == DD_MSG_PING ? DD_MSG_PONG
             : type == DD_MSG_PULL ? DD_MSG_PULL_REP
             : type == DD_MSG_STATE ? DD_MSG_STATE_REP
                                    : DD_MSG_ACK;
    if (rt != DD_MSG_PONG) {
        dd_nbuf_u32(&b, NB);
        for (size_t i = 0; i < NB; i++) {
            dd_nbuf_str(&b, blocks[i].name);
            dd_nbuf_u64(&b, HONEST_VER);
            if (rt == DD_MSG_ACK) continue;
            dd_nbuf_u32(&b, (uint32_t)blocks[i].len);
            for (size_t j = 0; j < blocks[i].len; j++) {
                float v = honest(i, j);
                dd_nbuf_bytes(&b, &v, 4);
            }
            if (rt == DD_MSG_STATE_REP) {
                dd_nbuf_u32(&b, 8);
                dd_nbuf_u64(&b, 0x5354415445ull + i);
            }
        }
        if (b.oom) abort();
    }
    send_framed(r, id, rt, seq, b.p, b.n, 0, 0);
    dd_nbuf_free(&b);
}

static const int reply_types[8] = {DD_MSG_ACK, DD_MSG_PULL_REP, DD_MSG_STATE_REP, DD_MSG_ERR,
                                   DD_MSG_PONG, DD_MSG_REPL_ACK, DD_MSG_PULL, DD_MSG_LEASE_REP};

/* Sends the script's replies for the request numbered seq (prev: the one before). */
static void send_script(void *r, zmq_msg_t *id, uint64_t seq, uint64_t prev, const uint8_t *p, size_t n) {
    for (int k = 0; k < 16 && n >= 3; k++) {
        const uint8_t ctl = p[0];
        size_t len = (size_t)p[1] | (size_t)p[2] << 8;
        p += 3;
        n -= 3;
        if (len > n) len = n;
        send_framed(r, id, reply_types[ctl & 7], ctl & 0x08 ? prev : seq, p, len, ctl & 0x10, ctl & 0x20);
        p += len;
        n -= len;
    }
}

static void *server_main(void *arg) {
    (void)arg;
    void *ctx = zmq_ctx_new();
    void *r = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(r, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(r, addr) != 0) {
        fprintf(stderr, "fuzz_ps_client: bind %s: %s\n", addr, zmq_strerror(zmq_errno()));
        abort();
    }
    uint64_t last = 0, prev = 0;
    for (;;) {
        zmq_msg_t id, m;
        zmq_msg_init(&id);
        zmq_msg_init(&m);
        if (zmq_msg_recv(&id, r, 0) < 0 || !zmq_msg_more(&id) || zmq_msg_recv(&m, r, 0) < 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&m);
            continue; /* EINTR */
        }
        dd_net_hdr h;
        const uint8_t *pl;
        if (dd_net_parse(zmq_msg_data(&m), zmq_msg_size(&m), UINT32_MAX, &h, &pl) != DD_OK) abort(); /* the client's own */
        pthread_mutex_lock(&mu);
        if (h.seq > last && script_set) { /* a new operation: the input's replies first */
            prev = last;
            last = h.seq;
            send_script(r, &id, h.seq, prev, script, script_n);
            script_set = 0;
        }
        pthread_mutex_unlock(&mu);
        send_honest(r, &id, h.type, h.seq);
        zmq_msg_close(&id);
        zmq_msg_close(&m);
    }
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    dd_fuzz_init();
    snprintf(cluster, sizeof cluster, "%s", dd_fuzz_ps_cluster("client-cluster.json", "", addr, sizeof addr));
    pthread_t t;
    if (pthread_create(&t, NULL, server_main, NULL) != 0) abort();
    pthread_detach(t);
    dd_ps_client_opts o = {.insecure = 1, .resend_ms = 200, .dead_ms = 10000, .id = 99};
    if (dd_ps_client_open(cluster, &o, &cli) != DD_OK || dd_ps_client_set_blocks(cli, blocks, NB) != DD_OK) {
        fprintf(stderr, "fuzz_ps_client: %s\n", dd_last_error());
        abort();
    }
    return 0;
}

static int is_pad(size_t k) {
    for (size_t i = 0; i < NB; i++)
        if (k >= blocks[i].offset && k < blocks[i].offset + blocks[i].len) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int op = data[0] % 8;
    pthread_mutex_lock(&mu);
    free(script);
    script = malloc(size);
    if (!script) abort();
    memcpy(script, data + 1, size - 1);
    script_n = size - 1;
    script_set = 1;
    pthread_mutex_unlock(&mu);

    float arena[ARENA], grad[ARENA];
    for (size_t k = 0; k < ARENA; k++) {
        arena[k] = is_pad(k) ? CANARY : 1.0f;
        grad[k] = 0.125f;
    }
    uint64_t ver[NB] = {HONEST_VER, UINT64_MAX, 7}, txn = 0;
    static const uint64_t st_blob = 0;
    const void *states[NB] = {&st_blob, &st_blob, &st_blob};
    const size_t sbytes[NB] = {8, 8, 8};
    const uint64_t rver[NB] = {3, 3, 3};
    dd_status st;
    switch (op) {
    case 0: st = dd_ps_client_init(cli, arena, ver); break;
    case 1: st = dd_ps_client_push(cli, grad, 0.01, ver); break;
    case 2: st = dd_ps_client_pull(cli, arena, ver); break;
    case 3: st = dd_ps_client_pull_state(cli, arena, ver); break;
    case 4: st = dd_ps_client_stage(cli, grad, 0.01, &txn); break;
    case 5: st = dd_ps_client_apply(cli, 0, 5, ver); break;
    case 6: st = dd_ps_client_restore(cli, arena, states, sbytes, rver); break;
    default: st = dd_ps_client_ping(cli); break;
    }
    if (getenv("DD_FUZZ_VERBOSE")) fprintf(stderr, "op %d: status %d %s\n", op, (int)st, st ? dd_last_error() : "");
    if (st != DD_OK && (st != DD_ERR_COMM || strncmp(dd_last_error(), "server s0 (tcp://127.0.0.1:", 27) != 0)) {
        fprintf(stderr, "fuzz_ps_client: op %d: status %d: %s\n", op, (int)st, dd_last_error());
        abort();
    }
    for (size_t k = 0; k < ARENA; k++)
        if (is_pad(k) && arena[k] != CANARY) abort();
    if (op == 3 && st == DD_OK)
        for (size_t i = 0; i < NB; i++) {
            size_t nbytes = 0;
            if (!dd_ps_client_block_state(cli, i, &nbytes)) abort();
        }
    /* the client is still usable: an honest pull of everything gives the honest state */
    pthread_mutex_lock(&mu);
    script_set = 0;
    pthread_mutex_unlock(&mu);
    uint64_t all[NB] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
    if (dd_ps_client_pull(cli, arena, all) != DD_OK) {
        fprintf(stderr, "fuzz_ps_client: honest pull after op %d: %s\n", op, dd_last_error());
        abort();
    }
    for (size_t i = 0; i < NB; i++) {
        if (all[i] != HONEST_VER) abort();
        for (size_t j = 0; j < blocks[i].len; j++)
            if (arena[blocks[i].offset + j] != honest(i, j)) abort();
    }
    for (size_t k = 0; k < ARENA; k++)
        if (is_pad(k) && arena[k] != CANARY) abort();
    dd_error_clear();
    return 0;
}
