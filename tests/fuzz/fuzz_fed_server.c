/* libFuzzer target: the federated coordinator's message handling beyond the payload
 * decoders (pump in src/fed/server.c: the type dispatch, hello / update / eval-reply /
 * secagg against the round in progress, late and second updates, benches leaving and
 * joining again). A real dd_fed_server_run runs in a thread for the whole session (CURVE
 * keys generated at start, the default PA configuration, rounds of 100 ms, no evaluation);
 * the harness plays two benches (DEALERs with enrolled keys): b0 sends the input, b1 joins
 * once and never answers, so every round runs to its timeout whatever b0 does (b0 leaving
 * and coming back does not start a round each time) and b0's update alone is aggregated
 * (--min-completion 0.5). 10^5 rounds of 100 ms: about 2.7 hours of fuzzing.
 *
 * Input: up to 16 messages, each [sel u8][len u16 LE][len bytes]; sel % 8: 0 fed-hello,
 * 1 fed-update, 2 fed-eval-reply, 3 fed-secagg, 4 ping, 5 bye (payloads as given; a
 * first byte c > 0 adds c times hello + bye, at most 300 per input), 6 the
 * type in the first payload byte with the rest, 7 a well-formed update of the round in
 * progress (frames from the first byte, the values the payload's floats repeated, each
 * outside [-1e-3, 1e-3] or NaN replaced by 1e-3: a non-finite or huge update makes the
 * mean diverge and the coordinator stop, as documented in docs/federated.md).
 * After them the harness says hello again and pings.
 *
 * Invariants (abort = finding): the coordinator answers the ping within 10 s after every
 * input (a pong: nothing it received made it hang or leave its loop), and its thread never
 * returns (it would only at the end of its 10^5 rounds). */
#define _GNU_SOURCE /* nftw (fuzz_util.h's dd_fuzz_rm_tree) */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <sys/stat.h>
#include <zmq.h>

#include "distdpd/fednet.h"
#include "fuzz_util.h"

static char dir[600], addr[64];
static void *ctx, *sock, *quiet; /* the fuzzed bench b0, and b1, which never answers */
static uint64_t nparams, round_seen, seq;
static volatile int server_ended, exiting;
static dd_fed_server_opts so;

static void log_stderr(dd_log_level l, const char *m, void *u) {
    (void)l;
    (void)u;
    fprintf(stderr, "%lld %s\n", (long long)dd_net_ms(), m);
}

static void *server_main(void *arg) {
    (void)arg;
    dd_status st = dd_fed_server_run(&so);
    if (exiting) return NULL; /* its run directory went with cleanup() at exit */
    fprintf(stderr, "fuzz_fed_server: the coordinator returned %d: %s\n", (int)st, st ? dd_last_error() : "");
    server_ended = 1;
    abort();
    return NULL;
}

/* A message from b0. The dealer's queue refuses a message when full (its high-water mark:
 * an input's hundreds of hello / bye cycles go out faster than the coordinator, one message
 * per poll, takes them): wait up to 5 s for room, as a blocking send would, then count it
 * refused (before 2026-12-02 the harness dropped it silently, and a dropped final ping
 * failed the run as "no pong" on a loaded machine). */
static long refused_sends;
static void send_msg(int type, const void *p, size_t n) {
    ++seq;
    for (int i = 0; i < 50; i++) {
        if (dd_net_send(sock, NULL, 0, type, seq, 1, p, (uint32_t)n)) return;
        zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLOUT};
        zmq_poll(&it, 1, 100);
    }
    refused_sends++;
}

static void hello(void) {
    dd_nbuf b = {0};
    dd_fed_hello h = {DD_FED_PROTO, 1000};
    dd_fed_enc_hello(&b, &h);
    send_msg(DD_MSG_FED_HELLO, b.p, b.n);
    dd_nbuf_free(&b);
}

/* Reads the coordinator's messages until a pong (1) or 10 s without one (0; times
 * DD_TEST_TIMEOUT_SCALE, as tests/dd_test.h: valgrind sets 20); notes the round in
 * progress (the header's sequence number of a round) and the model's size. Every 2 s
 * without a pong it says hello and pings again, as a bench retries: on a machine starved
 * of CPU a connection can miss its heartbeats (DD_NET_HEARTBEAT_TIMEOUT, 2 s) and be
 * dropped with the messages in flight, and the dealer's reconnection is a new peer to the
 * coordinator; what is checked is that the coordinator answers, not that TCP never
 * drops. resends counts these (printed at exit). */
static long resends;
static int until_pong(void) {
    const char *sc = getenv("DD_TEST_TIMEOUT_SCALE");
    const double f = sc && atof(sc) >= 1.0 && atof(sc) <= 1000.0 ? atof(sc) : 1.0;
    const int64_t end = dd_net_ms() + (int64_t)(10000 * f);
    int64_t again = dd_net_ms() + 2000;
    while (dd_net_ms() < end) {
        if (dd_net_ms() > again) {
            resends++;
            fprintf(stderr, "fuzz_fed_server: no pong for 2 s: hello and ping again (%ld so far; %ld sends refused by the dealer's queue)\n",
                    resends, refused_sends);
            hello();
            send_msg(DD_MSG_PING, NULL, 0);
            again = dd_net_ms() + 2000;
        }
        dd_net_msg m;
        int r = dd_net_recv(sock, 0, 100, 1u << 26, &m);
        if (r < 0) abort();
        if (r == 0) continue;
        int pong = m.ok && m.h.type == DD_MSG_PONG;
        if (m.ok && m.h.type == DD_MSG_FED_ROUND) round_seen = m.h.seq;
        if (m.ok && m.h.type == DD_MSG_FED_WELCOME && !nparams) {
            dd_fed_welcome w;
            if (dd_fed_dec_welcome(m.payload, m.h.len, &w) == DD_OK) nparams = w.nparams;
            dd_fed_welcome_free(&w);
        }
        dd_net_msg_free(&m);
        for (;;) { /* b1's rounds, dropped */
            zmq_msg_t q;
            zmq_msg_init(&q);
            int got = zmq_msg_recv(&q, quiet, ZMQ_DONTWAIT);
            zmq_msg_close(&q);
            if (got < 0) break;
        }
        if (pong) return 1;
    }
    return 0;
}

/* The keys and the coordinator's run directory (metrics.jsonl grows a line a round). */
static void cleanup(void) {
    exiting = 1;
    fprintf(stderr, "fuzz_fed_server: %ld pings sent again after 2 s without a pong; %ld sends refused by the dealer's queue\n",
            resends, refused_sends);
    dd_fuzz_rm_tree(dir);
}

/* The directories of earlier processes that are gone (a crash, or libFuzzer's exit,
 * skip cleanup()): next to dir, "ddfuzz-PID-fed-MS" with no process PID. */
static void remove_stale(void) {
    char parent[600];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (!slash) return;
    *slash = 0;
    DIR *d = opendir(parent);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid;
        char tail[8];
        if (sscanf(e->d_name, "ddfuzz-%ld-fed-%7s", &pid, tail) != 2 || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char path[900];
        snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        dd_fuzz_rm_tree(path);
    }
    closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    dd_fuzz_init();
    if (getenv("DD_FUZZ_VERBOSE")) dd_log_set(log_stderr, NULL, DD_LOG_DEBUG);
    snprintf(dir, sizeof dir, "%s-%lld", dd_fuzz_path("fed"), (long long)dd_net_ms());
    remove_stale();
    if (mkdir(dir, 0700) != 0) abort();
    atexit(cleanup);
    char base[700], allow[700], run[700], spub[41], bpub[41], bsec[41], key[720];
    snprintf(base, sizeof base, "%s/server", dir);
    if (dd_net_keygen(base, 1, spub) != DD_OK) abort();
    snprintf(base, sizeof base, "%s/bench", dir);
    if (dd_net_keygen(base, 1, bpub) != DD_OK) abort();
    snprintf(key, sizeof key, "%s/bench.key", dir);
    if (dd_net_key_read(key, 1, bsec) != DD_OK) abort();
    snprintf(allow, sizeof allow, "%s/allow", dir);
    FILE *f = fopen(allow, "w");
    if (!f) abort();
    fprintf(f, "%s b0\n", bpub);
    char qpub[41], qsec[41];
    snprintf(base, sizeof base, "%s/quiet", dir);
    if (dd_net_keygen(base, 1, qpub) != DD_OK) abort();
    snprintf(key, sizeof key, "%s/quiet.key", dir);
    if (dd_net_key_read(key, 1, qsec) != DD_OK) abort();
    fprintf(f, "%s b1\n", qpub);
    if (fclose(f) != 0) abort();
    snprintf(run, sizeof run, "%s/run", dir);
    int port = dd_net_free_port();
    if (port < 0) abort();
    snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", port);
    static char skey[720], sallow[700], srun[700];
    snprintf(skey, sizeof skey, "%s/server.key", dir);
    snprintf(sallow, sizeof sallow, "%s", allow);
    snprintf(srun, sizeof srun, "%s", run);
    dd_fed_server_defaults(&so);
    so.bind = addr;
    so.key_path = skey;
    so.allow_path = sallow;
    so.out = srun;
    so.rounds = 100000;
    so.wait_s = 1e7;
    so.round_timeout_s = 0.1;
    so.eval_every = 100000;
    so.dead_ms = 3600000;
    so.start_clients = 2;     /* b1 joins and stays: rounds end on their timeout, whatever b0 does */
    so.min_completion = 0.5;  /* b0's update alone is aggregated */
    pthread_t t;
    if (pthread_create(&t, NULL, server_main, NULL) != 0) abort();
    pthread_detach(t);
    ctx = zmq_ctx_new();
    if (dd_net_dealer(ctx, addr, bsec, bpub, spub, &sock) != DD_OK || dd_net_dealer(ctx, addr, qsec, qpub, spub, &quiet) != DD_OK)
        abort();
    {
        dd_nbuf b = {0};
        dd_fed_hello h = {DD_FED_PROTO, 1000};
        dd_fed_enc_hello(&b, &h);
        dd_net_send(quiet, NULL, 0, DD_MSG_FED_HELLO, 1, 2, b.p, (uint32_t)b.n);
        dd_nbuf_free(&b);
    }
    for (int i = 0; i < 30 && !nparams; i++) { /* the coordinator starts: hello until welcomed */
        hello();
        send_msg(DD_MSG_PING, NULL, 0);
        until_pong();
    }
    if (!nparams) {
        fprintf(stderr, "fuzz_fed_server: no welcome from the coordinator at %s\n", addr);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data;
    size_t n = size;
    dd_nbuf b = {0};
    int cycles = 0; /* at most 300 bye / hello per input: their welcomes stay below the sockets' high-water marks */
    for (int k = 0; k < 16 && n >= 3; k++) {
        const uint8_t sel = p[0];
        size_t len = (size_t)p[1] | (size_t)p[2] << 8;
        p += 3;
        n -= 3;
        if (len > n) len = n;
        static const int types[6] = {DD_MSG_FED_HELLO, DD_MSG_FED_UPDATE, DD_MSG_FED_EVAL_REP, DD_MSG_FED_SECAGG,
                                     DD_MSG_PING, DD_MSG_BYE};
        switch (sel % 8) {
        case 6:
            if (len) send_msg(p[0], p + 1, len - 1);
            break;
        case 7: {
            float *d = malloc(nparams * sizeof *d);
            if (!d) abort();
            const size_t nf = len > 1 ? (len - 1) / 4 : 0;
            for (uint64_t i = 0; i < nparams; i++) {
                d[i] = 0.001f;
                if (nf) memcpy(&d[i], p + 1 + 4 * (i % nf), 4);
                if (!(d[i] >= -1e-3f && d[i] <= 1e-3f)) d[i] = 1e-3f; /* a NaN or huge update ends a mean by design */
            }
            dd_fed_update u = {.round = round_seen, .frames = 1 + (len ? p[0] : 0), .loss = 0.5, .norm = 1.0,
                               .nparams = nparams};
            dd_fed_enc_update(&b, &u, d, NULL);
            send_msg(DD_MSG_FED_UPDATE, b.p, b.n);
            free(d);
            break;
        }
        case 5: /* bye, and with a count byte c > 0: c times bye then hello (a bench that comes back) */
            send_msg(DD_MSG_BYE, p, len);
            for (int c = len ? p[0] : 0; c > 0 && cycles < 300; c--, cycles++) {
                hello();
                send_msg(DD_MSG_BYE, NULL, 0);
            }
            break;
        default: send_msg(types[sel % 8], p, len); break;
        }
        p += len;
        n -= len;
    }
    dd_nbuf_free(&b);
    hello();
    send_msg(DD_MSG_PING, NULL, 0);
    if (!until_pong() || server_ended) {
        fprintf(stderr, "fuzz_fed_server: the coordinator did not answer a ping in time (10 s x DD_TEST_TIMEOUT_SCALE)\n");
        abort();
    }
    dd_error_clear();
    return 0;
}
