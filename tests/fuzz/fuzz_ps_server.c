/* libFuzzer target: the parameter server's payload decoders (src/ps/server.c: INIT,
 * PUSH, RESTORE, PULL, STATE, PING, REPL and the refusal of replies sent as requests),
 * through the real server: one dd_ps_server_run (insecure, loopback, Adam optimiser, no
 * replicas) runs in a thread for the whole session; each input is sent on a DEALER
 * socket and must be answered within 5 s (a missing answer is a hang: abort).
 * Input: byte 0 picks the message type (bit 7 set: the rest is sent as raw bytes, no
 * header, for the server's dd_net_parse); the rest is the payload, framed with a valid
 * header and CRC so that the decoders see it. Blocks persist between inputs (an INIT
 * then a PUSH), as on a real server. */
#include <errno.h>
#include <pthread.h>
#include <zmq.h>

#include "distdpd/ps.h"
#include "fuzz_util.h"

static void *ctx, *sock;
static uint64_t seq;
static volatile int stop_flag;
static dd_ps_server_opts opts;
static char cluster[512], bind_addr[64];

static void *server_main(void *arg) {
    (void)arg;
    dd_ps_server_stats st;
    if (dd_ps_server_run(&opts, &st) != DD_OK) {
        fprintf(stderr, "fuzz_ps_server: the server did not start: %s\n", dd_last_error());
        abort();
    }
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    dd_fuzz_init();
    snprintf(cluster, sizeof cluster, "%s",
             dd_fuzz_ps_cluster("cluster.json", "\"optimizer\": {\"kind\": \"adam\"}, ", bind_addr, sizeof bind_addr));
    opts = (dd_ps_server_opts){.cluster_path = cluster, .bind = bind_addr, .name = "s0", .insecure = 1, .replicas = -1,
                               .max_msg = 1 << 20, .stop = &stop_flag};
    pthread_t t;
    if (pthread_create(&t, NULL, server_main, NULL) != 0) abort();
    pthread_detach(t);
    ctx = zmq_ctx_new();
    sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0, tmo = 5000;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    if (zmq_connect(sock, bind_addr) != 0) abort();
    return 0;
}

static const int types[] = {DD_MSG_INIT, DD_MSG_PUSH, DD_MSG_RESTORE, DD_MSG_PULL, DD_MSG_STATE,
                            DD_MSG_PING, DD_MSG_REPL, DD_MSG_ACK};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t sel = data[0];
    const uint8_t *pl = data + 1;
    size_t n = size - 1;
    uint8_t *msg = malloc(DD_NET_HEADER + n + 1);
    if (!msg) abort();
    size_t len;
    if (sel & 0x80) {
        memcpy(msg, pl, n);
        len = n;
    } else {
        int type = types[sel % (sizeof types / sizeof types[0])];
        dd_net_hdr_write(msg, type, ++seq, 7, pl, (uint32_t)n);
        memcpy(msg + DD_NET_HEADER, pl, n);
        len = DD_NET_HEADER + n;
    }
    if (zmq_send(sock, msg, len, 0) != (int)len) abort();
    free(msg);
    /* the answer (ack, reply or refusal) */
    zmq_msg_t m;
    zmq_msg_init(&m);
    int64_t t0 = dd_net_ms();
    while (zmq_msg_recv(&m, sock, 0) < 0) { /* EINTR: libFuzzer's SIGALRM (-timeout) */
        if (zmq_errno() != EINTR || dd_net_ms() - t0 > 5000) {
            fprintf(stderr, "fuzz_ps_server: no answer in 5 s (%s)\n", zmq_strerror(zmq_errno()));
            abort();
        }
    }
    dd_net_hdr h;
    const uint8_t *rp;
    if (dd_net_parse(zmq_msg_data(&m), zmq_msg_size(&m), UINT32_MAX, &h, &rp) != DD_OK) abort();
    zmq_msg_close(&m);
    dd_error_clear();
    return 0;
}
