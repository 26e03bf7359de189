/* libFuzzer target: the federated bench's message loop (dd_fed_client_run, src/fed/client.c:
 * welcome, rounds plain and secure, evaluations, the end, pongs, errors and anything else
 * a coordinator could send), the mirror image of fuzz_fed_server. Per input a real bench
 * runs in a thread (CURVE keys generated at start and enrolled with a ZAP handler, a tiny
 * PA data set of its own, --connect-timeout 2 s, --timeout 0.2 s, times
 * DD_TEST_TIMEOUT_SCALE) against the harness, which plays the coordinator on a CURVE
 * ROUTER bound to an ipc:// endpoint (no loopback port per execution): it waits for the
 * bench's hello, sends the input's messages in one burst, then an honest fed-end (the run
 * is over) unless the input asks for silence, and collects what the bench sent until it
 * returns (and its bye).
 *
 * Input: byte 0 == 0xFF: no fed-end after the messages when they held a welcome the decoder
 * accepts (the bench must time out: 0.2 s; without a welcome it would wait 2 s); then up
 * to 16 messages, each [ctl u8][len u16 LE][len bytes]. ctl & 7 picks the message: 0 the
 * honest welcome (index 0, the model's nparams, the run's configuration), 1 a round
 * (fedavg, 1 local step, the initial weights), 2 a secure round (2 benches, threshold 2,
 * ring 32, range 10), 3 an evaluation of the initial weights, 4 pong, 5 fed-end with the
 * bytes as its reason, 6 the type in the first byte with the rest as payload, 7 the bytes
 * as the raw frame (ctl & 0x10: in two frames). Kinds 0-3 are numbered 1, 2, ... (rounds
 * and evaluations each; ctl & 0x80: the previous number again) and, with len >= 2, are
 * changed at offset (b0 | b1 << 8) % size by the rest of the bytes: XORed in, or written
 * over them (ctl & 0x20), or the payload truncated there (ctl & 0x10). ctl & 0x40 sends
 * the message twice. A round that still decodes is held to at most 4 local steps (the
 * decoder allows a coordinator 10^6 local epochs: a bench's compute is the coordinator's
 * to ask, not a fuzzing matter).
 *
 * Invariants (abort = finding): the bench returns (libFuzzer's -timeout; its own waits are
 * the timeouts above); it said hello first (protocol, its training samples); an error
 * names the coordinator's endpoint; DD_OK only after the harness's first fed-end had no
 * reason and came after a welcome the strict decoder accepts, with every round and
 * evaluation before it decodable and answered in order (an update of that round, nparams
 * and frames right; a fed-secagg for a secure round; an evaluation reply of that round
 * whose error and reference sums are the harness's own evaluation of the same weights on
 * the same test split when the welcome was the honest one: the bench used the model it
 * got), and the bench's bye last; an input of honest messages only (a welcome first, then
 * rounds, evaluations, pongs, unchanged) ends in DD_OK, or with silence in DD_ERR_TIMEOUT.
 * Secure aggregation past the bench's advertisement needs the other benches' keys: its
 * decoder is fuzz_secagg's. */
#define _GNU_SOURCE /* nftw (fuzz_util.h's dd_fuzz_rm_tree) */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <zmq.h>

#include "distdpd/dataset.h"
#include "distdpd/fednet.h"
#include "fuzz_util.h"

#define MAX_MSGS 16
#define MAX_STEPS 4

static char dir[600], endpoint[700], skey[700], bkey[700], data_path[700];
static void *ctx, *router;
static dd_net_zap *zap;
static dd_dataset *ds;
static dd_trainer *ref; /* the harness's trainer of the honest configuration (evaluations) */
static char *cfg_json;
static size_t nparams;
static float *w_init;
static double scale = 1.0;

static void log_stderr(dd_log_level l, const char *m, void *u) {
    (void)l;
    (void)u;
    fprintf(stderr, "%lld %s\n", (long long)dd_net_ms(), m);
}

/* At exit: the scratch directory, and what the harness kept for the session (valgrind's
 * "possibly lost" otherwise; the ZeroMQ context and its ZAP thread stay, as the other
 * socket harnesses leave theirs). */
static void cleanup(void) {
    dd_fuzz_rm_tree(dir);
    dd_trainer_destroy(&ref);
    dd_dataset_free(&ds);
    dd_free(cfg_json);
    cfg_json = NULL;
    free(w_init);
    w_init = NULL;
}

/* ---- the bench's thread ---- */
typedef struct {
    pthread_t t;
    atomic_int done;
    dd_status st;
    char err[1024];
} bench_t;

static void *bench_main(void *arg) {
    bench_t *b = arg;
    dd_fed_client_opts o = {.server = endpoint, .server_key = skey, .key_path = bkey, .data = data_path,
                            .connect_timeout_s = 2.0 * scale, .timeout_s = 0.2 * scale};
    b->st = dd_fed_client_run(&o);
    snprintf(b->err, sizeof b->err, "%s", b->st ? dd_last_error() : "");
    atomic_store(&b->done, 1);
    return NULL;
}

/* ---- what the harness sent, and what a DD_OK then demands ---- */
typedef struct {
    int type;      /* DD_MSG_FED_UPDATE, DD_MSG_FED_SECAGG or DD_MSG_FED_EVAL_REP */
    uint64_t round;
    int control;   /* an update with the control-variate delta */
    int check_eval;/* the reply's sums must be the harness's evaluation of w */
    float *w;      /* evaluation: the weights sent (owned) */
} expect_t;

typedef struct {
    int ended, end_ok;  /* a fed-end sent; the first one without a reason */
    int welcomed;       /* a welcome the decoder accepts went before (the first fed-end) */
    uint64_t want_n;    /* its nparams */
    int honest_welcome; /* every welcome so far the honest bytes */
    int broken;         /* before the first fed-end: a round or evaluation the bench must refuse */
    int honest;         /* only honest messages, a welcome first */
    expect_t ex[2 * MAX_MSGS];
    int nex;
    uint64_t rounds, evals;
} script_t;

static void send_raw(const uint8_t *rid, size_t rid_n, const uint8_t *p, size_t n, int split) {
    zmq_send(router, rid, rid_n, ZMQ_SNDMORE);
    if (split && n > 1) {
        zmq_send(router, p, n / 2, ZMQ_SNDMORE);
        zmq_send(router, p + n / 2, n - n / 2, 0);
    } else {
        zmq_send(router, p, n, 0);
    }
}

/* The honest payload of kind k (0 welcome, 1 round, 2 secure round, 3 evaluation) into b. */
static void honest_payload(dd_nbuf *b, int k, uint64_t num) {
    if (k == 0) {
        dd_fed_welcome w = {.index = 0, .nparams = nparams, .cfg_json = cfg_json};
        dd_fed_enc_welcome(b, &w);
    } else if (k == 3) {
        dd_fed_eval e = {.round = num, .nparams = nparams};
        dd_fed_enc_eval(b, &e, w_init);
    } else {
        dd_fed_round r = {.round = num, .algo = 0, .local_kind = DD_FED_LOCAL_STEPS, .local_n = 1, .nparams = nparams};
        if (k == 2) {
            r.secure = 1;
            r.sa_n = 2;
            r.sa_threshold = 2;
            r.sa_ring = 32;
            r.sa_range = 10;
        }
        dd_fed_enc_round(b, &r, w_init, NULL);
    }
    if (b->oom) abort();
}

/* A round that decodes asks at most MAX_STEPS local steps (bytes 9..13 of the payload). */
static void hold_local_work(uint8_t *p, size_t n, uint64_t want_n) {
    int na;
    dd_fed_algos(&na);
    dd_fed_round r;
    if (dd_fed_dec_round(p, n, want_n, na, &r) != DD_OK) return;
    if (r.local_kind == DD_FED_LOCAL_STEPS && r.local_n <= MAX_STEPS) return;
    p[9] = DD_FED_LOCAL_STEPS;
    const uint32_t k = 1 + r.local_n % MAX_STEPS;
    memcpy(p + 10, &k, 4);
}

/* Notes one message of type `type` and payload p[0..n) sent before the first fed-end. */
static void note(script_t *s, int type, const uint8_t *p, size_t n, int unchanged) {
    if (s->ended) return;
    int na;
    const dd_fed_algo *const *algos = dd_fed_algos(&na);
    switch (type) {
    case DD_MSG_FED_WELCOME: {
        dd_fed_welcome w;
        dd_status st = dd_fed_dec_welcome(p, n, &w);
        dd_fed_welcome_free(&w);
        if (st == DD_OK && !s->welcomed) {
            s->welcomed = 1;
            s->want_n = w.nparams;
        }
        if (!unchanged) s->honest_welcome = 0;
        break;
    }
    case DD_MSG_FED_ROUND: {
        dd_fed_round r;
        if (!s->welcomed || dd_fed_dec_round(p, n, s->want_n, na, &r) != DD_OK) {
            s->broken = 1;
            break;
        }
        expect_t *e = &s->ex[s->nex++];
        *e = (expect_t){.type = r.secure ? DD_MSG_FED_SECAGG : DD_MSG_FED_UPDATE, .round = r.round,
                        .control = algos[r.algo]->control};
        break;
    }
    case DD_MSG_FED_EVAL: {
        dd_fed_eval ev;
        if (!s->welcomed || dd_fed_dec_eval(p, n, s->want_n, &ev) != DD_OK) {
            s->broken = 1;
            break;
        }
        expect_t *e = &s->ex[s->nex++];
        *e = (expect_t){.type = DD_MSG_FED_EVAL_REP, .round = ev.round, .check_eval = s->honest_welcome};
        if (e->check_eval) {
            if (!(e->w = malloc(ev.nparams * sizeof(float)))) abort();
            memcpy(e->w, ev.w, ev.nparams * sizeof(float));
        }
        break;
    }
    case DD_MSG_FED_END:
        s->ended = 1;
        s->end_ok = n == 0;
        break;
    default: break;
    }
}

/* Sends the input's messages to the bench rid[0..rid_n). */
static void play(script_t *s, const uint8_t *p, size_t n, const uint8_t *rid, size_t rid_n) {
    dd_nbuf b = {0};
    for (int k = 0; k < MAX_MSGS && n >= 3; k++) {
        const uint8_t ctl = p[0];
        size_t len = (size_t)p[1] | (size_t)p[2] << 8;
        p += 3;
        n -= 3;
        if (len > n) len = n;
        const int kind = ctl & 7, times = ctl & 0x40 ? 2 : 1;
        for (int t = 0; t < times; t++) {
            if (kind <= 3) {
                static const int types[4] = {DD_MSG_FED_WELCOME, DD_MSG_FED_ROUND, DD_MSG_FED_ROUND, DD_MSG_FED_EVAL};
                uint64_t *ctr = kind == 3 ? &s->evals : &s->rounds;
                if (kind && !(ctl & 0x80 && *ctr)) ++*ctr;
                honest_payload(&b, kind, kind ? *ctr : 0);
                int unchanged = 1;
                if (len >= 2) {
                    const size_t off = ((size_t)p[0] | (size_t)p[1] << 8) % b.n;
                    if (ctl & 0x10) {
                        b.n = off;
                    } else {
                        for (size_t i = 2; i < len && off + i - 2 < b.n; i++)
                            b.p[off + i - 2] = ctl & 0x20 ? p[i] : b.p[off + i - 2] ^ p[i];
                    }
                    unchanged = 0;
                }
                if (kind == 1 || kind == 2) hold_local_work(b.p, b.n, s->welcomed ? s->want_n : nparams);
                if (!unchanged || (ctl & 0x80) || (kind && !s->welcomed)) s->honest = 0;
                note(s, types[kind], b.p, b.n, unchanged);
                dd_net_send(router, rid, rid_n, types[kind], kind ? *ctr : 0, 0, b.p, (uint32_t)b.n);
            } else if (kind == 4) {
                dd_net_send(router, rid, rid_n, DD_MSG_PONG, 0, 0, NULL, 0);
            } else if (kind == 5) {
                s->honest = 0;
                note(s, DD_MSG_FED_END, p, len, 0);
                dd_net_send(router, rid, rid_n, DD_MSG_FED_END, 0, 0, p, (uint32_t)len);
            } else if (kind == 6) {
                s->honest = 0;
                if (!len) continue;
                note(s, p[0], p + 1, len - 1, 0);
                dd_net_send(router, rid, rid_n, p[0], 0, 0, p + 1, (uint32_t)(len - 1));
            } else { /* a raw frame that happens to parse is a message like any other */
                s->honest = 0;
                dd_net_hdr h;
                const uint8_t *pl;
                if (!(ctl & 0x10) && dd_net_parse(p, len, UINT32_MAX, &h, &pl) == DD_OK) note(s, h.type, pl, h.len, 0);
                send_raw(rid, rid_n, p, len, ctl & 0x10);
            }
        }
        p += len;
        n -= len;
    }
    dd_nbuf_free(&b);
}

/* The harness's evaluation of w on the test split, as the bench computes its reply. */
static void ref_eval(const float *w, double *err, double *refsum, uint64_t *samples) {
    memcpy(dd_trainer_params(ref), w, nparams * sizeof(float));
    dd_eval_metrics em;
    const dd_cf32 *pred = NULL;
    size_t np = 0;
    if (dd_trainer_evaluate(ref, DD_SPLIT_TEST, &em, &pred, &np) != DD_OK) abort();
    const dd_cf32 *y = ds->out[DD_SPLIT_TEST];
    const size_t ny = ds->n[DD_SPLIT_TEST] < np ? ds->n[DD_SPLIT_TEST] : np;
    *err = *refsum = 0;
    for (size_t i = 0; i < ny; i++) {
        const dd_cf64 d = (dd_cf64)pred[i] - (dd_cf64)y[i];
        *err += creal(d * conj(d));
        *refsum += creal((dd_cf64)y[i] * conj((dd_cf64)y[i]));
    }
    *samples = ny;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-30; }

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        fprintf(stderr, "fuzz_fed_client: " __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                                           \
        abort();                                                                                                       \
    } while (0)

/* A DD_OK's demands: got[0..ng) the bench's updates, secure-aggregation messages and
 * evaluation replies in order, bye its last message. */
static void check_ok(const script_t *s, dd_net_msg *got, int ng, int bye) {
    if (!s->ended || !s->end_ok) FAIL("DD_OK without the harness's fed-end (or after one with a reason)");
    if (!s->welcomed) FAIL("DD_OK without a welcome the decoder accepts");
    if (s->broken) FAIL("DD_OK after a round or evaluation it should have refused");
    if (!bye) FAIL("DD_OK without a bye as the bench's last message");
    int k = 0;
    for (int i = 0; i < s->nex; i++) {
        const expect_t *e = &s->ex[i];
        while (k < ng && got[k].h.type == DD_MSG_FED_SECAGG && e->type != DD_MSG_FED_SECAGG) k++; /* replies to fed-secagg */
        if (k >= ng) FAIL("reply %d of %d missing (type %s, round %llu)", i + 1, s->nex, dd_msg_type_name(e->type),
                          (unsigned long long)e->round);
        const dd_net_msg *m = &got[k++];
        if ((int)m->h.type != e->type) FAIL("reply %d: %s, expected %s", i + 1, dd_msg_type_name(m->h.type), dd_msg_type_name(e->type));
        if (e->type == DD_MSG_FED_UPDATE) {
            dd_fed_update u;
            if (dd_fed_dec_update(m->payload, m->h.len, s->want_n, e->control, &u) != DD_OK) FAIL("update: %s", dd_last_error());
            if (u.round != e->round) FAIL("update of round %llu for round %llu", (unsigned long long)u.round, (unsigned long long)e->round);
            if (s->honest_welcome && u.frames != dd_trainer_num_frames(ref)) FAIL("update: %llu frames", (unsigned long long)u.frames);
        } else if (e->type == DD_MSG_FED_EVAL_REP) {
            dd_fed_eval_rep r;
            if (dd_fed_dec_eval_rep(m->payload, m->h.len, &r) != DD_OK) FAIL("eval reply: %s", dd_last_error());
            if (r.round != e->round) FAIL("eval reply of round %llu for %llu", (unsigned long long)r.round, (unsigned long long)e->round);
            if (e->check_eval) {
                double err, rs;
                uint64_t ns;
                ref_eval(e->w, &err, &rs, &ns);
                if (!close_to(r.err, err) || !close_to(r.ref, rs) || r.samples != ns)
                    FAIL("eval reply %.17g / %.17g / %llu, the weights sent give %.17g / %.17g / %llu", r.err, r.ref,
                         (unsigned long long)r.samples, err, rs, (unsigned long long)ns);
            }
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    dd_fuzz_init();
    if (getenv("DD_FUZZ_VERBOSE")) dd_log_set(log_stderr, NULL, DD_LOG_DEBUG);
    const char *sc = getenv("DD_TEST_TIMEOUT_SCALE");
    if (sc && atof(sc) >= 1.0 && atof(sc) <= 1000.0) scale = atof(sc);
    snprintf(dir, sizeof dir, "%s-%lld", dd_fuzz_path("fedc"), (long long)dd_net_ms());
    if (mkdir(dir, 0700) != 0) abort();
    atexit(cleanup);
    char base[700], allow[700], bpub[41], spub[41], ssec[41];
    snprintf(base, sizeof base, "%s/server", dir);
    if (dd_net_keygen(base, 1, spub) != DD_OK) abort();
    snprintf(skey, sizeof skey, "%s/server.pub", dir);
    snprintf(base, sizeof base, "%s/server.key", dir);
    if (dd_net_key_read(base, 1, ssec) != DD_OK) abort();
    snprintf(base, sizeof base, "%s/bench", dir);
    if (dd_net_keygen(base, 1, bpub) != DD_OK) abort();
    snprintf(bkey, sizeof bkey, "%s/bench.key", dir);
    snprintf(allow, sizeof allow, "%s/allow", dir);
    FILE *f = fopen(allow, "w");
    if (!f) abort();
    fprintf(f, "%s b0\n", bpub);
    if (fclose(f) != 0) abort();
    /* the bench's data: 960 / 320 / 320 samples of three tones through a cubic PA
     * (y = x (1 - 0.2 |x|^2)), 100 MHz sampling, a 20 MHz channel */
    enum { NS = 1600 };
    static dd_cf32 x[NS], y[NS];
    for (size_t i = 0; i < NS; i++) {
        const double t = (double)i;
        x[i] = (dd_cf32)(0.3 * cexp(I * 0.11 * t) + 0.2 * cexp(-I * 0.37 * t + 0.5 * I) + 0.1 * cexp(I * 0.73 * t + 1.0 * I));
        y[i] = x[i] * (1.0f - 0.2f * (crealf(x[i]) * crealf(x[i]) + cimagf(x[i]) * cimagf(x[i])));
    }
    const size_t n[3] = {960, 320, 320};
    const dd_cf32 *in[3] = {x, x + 960, x + 1280}, *out[3] = {y, y + 960, y + 1280};
    dd_spec sp;
    dd_spec_default(&sp);
    sp.fs = 100e6;
    sp.bw_main = 20e6;
    sp.n_sub = 4;
    sp.bw_sub = 5e6;
    sp.nperseg = 512;
    sp.bw_occupied = 0;
    if (dd_dataset_from_arrays(&sp, n, in, out, &ds) != DD_OK) abort();
    snprintf(data_path, sizeof data_path, "%s/data.ddb", dir);
    if (dd_dataset_save_bin(ds, data_path) != DD_OK) abort();
    dd_dataset_free(&ds);
    if (dd_dataset_load(data_path, &ds) != DD_OK) abort(); /* what the bench reads */
    /* the run: a small GMP, 32-sample frames, batches of 8 */
    dd_train_cfg cfg;
    dd_train_cfg_default(&cfg, DD_TRAIN_PA);
    snprintf(cfg.model, sizeof cfg.model, "gmp");
    cfg.frame = 32;
    cfg.batch = 8;
    cfg.eval_batch = 4;
    if (dd_train_cfg_to_json(&cfg, &cfg_json) != DD_OK) abort();
    dd_train_cfg rc;
    if (dd_train_cfg_from_json(cfg_json, "fuzz_fed_client", &rc) != DD_OK) abort();
    rc.epochs = 100000; /* as the bench sets them */
    rc.eval_test = 1;
    if (dd_trainer_create(&rc, ds, NULL, NULL, &ref) != DD_OK) {
        fprintf(stderr, "fuzz_fed_client: %s\n", dd_last_error());
        abort();
    }
    nparams = dd_trainer_num_floats(ref);
    if (!(w_init = malloc(nparams * sizeof(float)))) abort();
    memcpy(w_init, dd_trainer_params(ref), nparams * sizeof(float));
    /* the coordinator's socket */
    snprintf(endpoint, sizeof endpoint, "ipc://%s/coord", dir);
    dd_net_allow *al = NULL;
    if (!(ctx = zmq_ctx_new()) || dd_net_allow_load(allow, &al) != DD_OK ||
        dd_net_zap_start(ctx, al, allow, "fuzz_fed_client", &zap) != DD_OK ||
        dd_net_router(ctx, endpoint, ssec, 1 << 22, &router) != DD_OK) {
        fprintf(stderr, "fuzz_fed_client: %s\n", dd_last_error());
        abort();
    }
    if (getenv("DD_FUZZ_VERBOSE"))
        fprintf(stderr, "fuzz_fed_client: %zu parameters, %llu training frames, %s\n", nparams,
                (unsigned long long)dd_trainer_num_frames(ref), endpoint);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const int silent = size > 0 && data[0] == 0xFF;
    script_t s = {.honest = 1, .honest_welcome = 1};
    dd_net_msg got[4 * MAX_MSGS];
    int ng = 0, bye = 0, hello = 0, after_bye = 0, joined = 0;
    uint8_t rid[256];
    size_t rid_n = 0;
    static uint8_t old_rid[256]; /* the last input's bench (messages still in flight when it returned) */
    static size_t old_rid_n;
    bench_t *b = calloc(1, sizeof *b);
    if (!b || pthread_create(&b->t, NULL, bench_main, b) != 0) abort();
    const int64_t limit = dd_net_ms() + (int64_t)(20000 * scale);
    for (;;) {
        const int done = atomic_load(&b->done);
        dd_net_msg m;
        if (bye && !done) pthread_join(b->t, NULL), joined = 1; /* the bench returns right after its bye */
        const int r = dd_net_recv(router, 1, done || bye ? 0 : 2, 1u << 22, &m);
        if (r < 0) FAIL("recv: %s", dd_last_error());
        if (r == 0) {
            if ((done || joined) && (bye || b->st != DD_OK || dd_net_ms() > limit)) break;
            if (dd_net_ms() > limit) FAIL("the bench has not returned after %g s", 20 * scale);
            continue;
        }
        if (m.rid_n == old_rid_n && memcmp(m.rid, old_rid, old_rid_n) == 0) { /* the last bench's, late */
            dd_net_msg_free(&m);
            continue;
        }
        if (!m.ok) FAIL("a malformed message from the bench: %s", m.err);
        if (!hello) { /* its first message: the hello */
            dd_fed_hello h;
            if (m.h.type != DD_MSG_FED_HELLO || dd_fed_dec_hello(m.payload, m.h.len, &h) != DD_OK ||
                h.samples != ds->n[DD_SPLIT_TRAIN])
                FAIL("the bench's first message is %s, not its hello", dd_msg_type_name(m.h.type));
            hello = 1;
            memcpy(rid, m.rid, m.rid_n);
            rid_n = m.rid_n;
            play(&s, data + (size > 0), size - (size > 0), rid, rid_n);
            if (!silent || !s.welcomed) { /* silence before a welcome would only wait for --connect-timeout */
                note(&s, DD_MSG_FED_END, NULL, 0, 1);
                dd_net_send(router, rid, rid_n, DD_MSG_FED_END, 0, 0, NULL, 0);
            }
        } else if (m.rid_n != rid_n || memcmp(m.rid, rid, rid_n) != 0) {
            FAIL("a message from another connection");
        }
        after_bye |= bye;
        if (m.h.type == DD_MSG_BYE) bye = 1;
        if ((m.h.type == DD_MSG_FED_UPDATE || m.h.type == DD_MSG_FED_SECAGG || m.h.type == DD_MSG_FED_EVAL_REP) &&
            ng < (int)(sizeof got / sizeof got[0])) {
            got[ng++] = m;
            continue;
        }
        dd_net_msg_free(&m);
    }
    if (!joined) pthread_join(b->t, NULL);
    memcpy(old_rid, rid, rid_n);
    old_rid_n = rid_n;
    if (getenv("DD_FUZZ_VERBOSE")) fprintf(stderr, "fuzz_fed_client: status %d: %s\n", (int)b->st, b->err);
    if (b->st == DD_OK) {
        if (after_bye) FAIL("a message after the bye");
        check_ok(&s, got, ng, bye);
    } else {
        if (!strstr(b->err, endpoint)) FAIL("status %s does not name the coordinator: %s", dd_status_str(b->st), b->err);
        if (s.honest && s.welcomed && (s.ended || b->st != DD_ERR_TIMEOUT)) /* honest: DD_OK, or silence's timeout */
            FAIL("honest messages only, and status %s: %s", dd_status_str(b->st), b->err);
    }
    for (int i = 0; i < ng; i++) dd_net_msg_free(&got[i]);
    for (int i = 0; i < s.nex; i++) free(s.ex[i].w);
    free(b);
    dd_error_clear();
    return 0;
}
