/* Message framing of the parameter-server transport: the 32-byte header, strict
 * validation, payload encoding helpers, sending with the test-only drop rate. net.h. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "distdpd/net.h"

static const char *const type_names[DD_NET_MAX_TYPE] = {
    [DD_MSG_PUSH] = "push", [DD_MSG_PULL] = "pull", [DD_MSG_INIT] = "init",
    [DD_MSG_PING] = "ping", [DD_MSG_REPL] = "repl", [DD_MSG_ACK] = "ack",
    [DD_MSG_PULL_REP] = "pull-reply", [DD_MSG_PONG] = "pong", [DD_MSG_REPL_ACK] = "repl-ack",
    [DD_MSG_STATE] = "state", [DD_MSG_RESTORE] = "restore", [DD_MSG_STATE_REP] = "state-reply", [DD_MSG_HELLO] = "hello",
    [DD_MSG_LEASE] = "lease", [DD_MSG_COMMIT] = "commit", [DD_MSG_DONE] = "done", [DD_MSG_BYE] = "bye",
    [DD_MSG_STAGE] = "stage", [DD_MSG_APPLY] = "apply",
    [DD_MSG_WELCOME] = "welcome", [DD_MSG_LEASE_REP] = "lease-reply", [DD_MSG_COMMIT_REP] = "commit-reply",
    [DD_MSG_ERR] = "error", [DD_MSG_FED_HELLO] = "fed-hello", [DD_MSG_FED_WELCOME] = "fed-welcome",
    [DD_MSG_FED_ROUND] = "fed-round", [DD_MSG_FED_UPDATE] = "fed-update", [DD_MSG_FED_EVAL] = "fed-eval",
    [DD_MSG_FED_EVAL_REP] = "fed-eval-reply", [DD_MSG_FED_END] = "fed-end", [DD_MSG_FED_SECAGG] = "fed-secagg"};

const char *dd_msg_type_name(int t) {
    return (t >= 0 && t < DD_NET_MAX_TYPE && type_names[t]) ? type_names[t] : "?";
}
int dd_msg_type_known(int t) { return t >= 0 && t < DD_NET_MAX_TYPE && type_names[t] != NULL; }

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void dd_net_hdr_write(uint8_t *o, int type, uint64_t seq, uint64_t sender, const void *payload,
                      uint32_t len) {
    put32(o, DD_NET_MAGIC);
    o[4] = DD_NET_VERSION;
    o[5] = (uint8_t)type;
    put16(o + 6, 0);
    put64(o + 8, seq);
    put64(o + 16, sender);
    put32(o + 24, len);
    put32(o + 28, dd_crc32c(0, payload, len));
}

dd_status dd_net_parse(const void *msg, size_t n, uint32_t max_payload, dd_net_hdr *h,
                       const uint8_t **payload) {
    const uint8_t *m = msg;
    if (n < DD_NET_HEADER)
        return dd_error(DD_ERR_FORMAT, "truncated header: %zu bytes, need %d", n, DD_NET_HEADER);
    uint32_t magic = get32(m);
    if (magic != DD_NET_MAGIC) return dd_error(DD_ERR_FORMAT, "bad magic 0x%08x (not a distdpd message)", magic);
    if (m[4] != DD_NET_VERSION)
        return dd_error(DD_ERR_FORMAT, "unsupported version %u (this side speaks %d)", m[4], DD_NET_VERSION);
    h->type = m[5];
    if (!dd_msg_type_known(h->type)) return dd_error(DD_ERR_FORMAT, "unknown message type %u", h->type);
    h->flags = get16(m + 6);
    if (h->flags != 0) return dd_error(DD_ERR_FORMAT, "reserved flags 0x%04x are not 0", h->flags);
    h->seq = get64(m + 8);
    h->sender = get64(m + 16);
    h->len = get32(m + 24);
    h->crc = get32(m + 28);
    if (h->len > max_payload)
        return dd_error(DD_ERR_FORMAT, "oversized: payload %u bytes over the limit of %u", h->len, max_payload);
    size_t have = n - DD_NET_HEADER;
    if (have < h->len)
        return dd_error(DD_ERR_FORMAT, "truncated: header says %u payload bytes, message has %zu", h->len, have);
    if (have > h->len)
        return dd_error(DD_ERR_FORMAT, "%zu trailing bytes after the payload", have - h->len);
    if (dd_crc32c(0, m + DD_NET_HEADER, h->len) != h->crc)
        return dd_error(DD_ERR_FORMAT, "payload CRC32C mismatch");
    *payload = m + DD_NET_HEADER;
    return DD_OK;
}

/* ---- buffer ---- */
void dd_nbuf_free(dd_nbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
static uint8_t *grow(dd_nbuf *b, size_t k) {
    if (b->oom) return NULL;
    if (b->n + k > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + k) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return NULL;
        }
        b->p = q;
        b->cap = c;
    }
    uint8_t *r = b->p + b->n;
    b->n += k;
    return r;
}
void dd_nbuf_u8(dd_nbuf *b, uint8_t v) {
    uint8_t *p = grow(b, 1);
    if (p) *p = v;
}
void dd_nbuf_u16(dd_nbuf *b, uint16_t v) {
    uint8_t *p = grow(b, 2);
    if (p) put16(p, v);
}
void dd_nbuf_u32(dd_nbuf *b, uint32_t v) {
    uint8_t *p = grow(b, 4);
    if (p) put32(p, v);
}
void dd_nbuf_u64(dd_nbuf *b, uint64_t v) {
    uint8_t *p = grow(b, 8);
    if (p) put64(p, v);
}
void dd_nbuf_f64(dd_nbuf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    dd_nbuf_u64(b, u);
}
void dd_nbuf_bytes(dd_nbuf *b, const void *src, size_t n) {
    if (!n) return;
    uint8_t *p = grow(b, n);
    if (p) memcpy(p, src, n);
}
uint8_t *dd_nbuf_room(dd_nbuf *b, size_t n) {
    uint8_t *p = grow(b, n);
    if (p) memset(p, 0, n);
    return p;
}
void dd_nbuf_str(dd_nbuf *b, const char *s) {
    size_t n = strlen(s);
    dd_nbuf_u16(b, (uint16_t)n);
    dd_nbuf_bytes(b, s, n);
}

void dd_nrd_init(dd_nrd *r, const void *p, size_t n) {
    r->p = p;
    r->n = n;
    r->off = 0;
    r->bad = 0;
}
const uint8_t *dd_nrd_bytes(dd_nrd *r, size_t n) {
    if (r->bad || n > r->n - r->off) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}
uint8_t dd_nrd_u8(dd_nrd *r) {
    const uint8_t *p = dd_nrd_bytes(r, 1);
    return p ? *p : 0;
}
uint16_t dd_nrd_u16(dd_nrd *r) {
    const uint8_t *p = dd_nrd_bytes(r, 2);
    return p ? get16(p) : 0;
}
uint32_t dd_nrd_u32(dd_nrd *r) {
    const uint8_t *p = dd_nrd_bytes(r, 4);
    return p ? get32(p) : 0;
}
uint64_t dd_nrd_u64(dd_nrd *r) {
    const uint8_t *p = dd_nrd_bytes(r, 8);
    return p ? get64(p) : 0;
}
double dd_nrd_f64(dd_nrd *r) {
    uint64_t u = dd_nrd_u64(r);
    double d;
    memcpy(&d, &u, 8);
    return d;
}
char *dd_nrd_dupz(const uint8_t *s, size_t n) {
    char *z = malloc(n + 1);
    if (!z) return NULL;
    if (n) memcpy(z, s, n);
    z[n] = 0;
    return z;
}

void dd_nrd_str(dd_nrd *r, char *out, size_t cap) {
    out[0] = 0;
    uint16_t n = dd_nrd_u16(r);
    if (r->bad) return;
    if (n == 0 || n >= cap) {
        r->bad = 1;
        return;
    }
    const uint8_t *p = dd_nrd_bytes(r, n);
    if (!p) return;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] > 0x7e) {
            r->bad = 1;
            out[0] = 0;
            return;
        }
        out[i] = (char)p[i];
    }
    out[n] = 0;
}

/* ---- sending, test-only network faults ---- */
/* DD_NET_DROP, DD_NET_DUP, DD_NET_REORDER, DD_NET_TRUNC (net.h): probabilities read once. */
enum { F_DROP, F_DUP, F_REORDER, F_TRUNC, F_KINDS };
static const char *const fault_env[F_KINDS] = {"DD_NET_DROP", "DD_NET_DUP", "DD_NET_REORDER", "DD_NET_TRUNC"};
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static double fault_p[F_KINDS];
static atomic_uint_fast64_t fault_n[F_KINDS];
static _Thread_local uint64_t fault_state;

static void fault_init(void) {
    for (int k = 0; k < F_KINDS; k++) {
        const char *e = getenv(fault_env[k]);
        if (!e || !*e) continue;
        char *end;
        double p = strtod(e, &end);
        if (*end == 0 && isfinite(p) && p >= 0 && p < 1) fault_p[k] = p;
        else dd_log(DD_LOG_WARN, "%s='%s' ignored: expected a probability in [0, 1)", fault_env[k], e);
        if (fault_p[k] > 0) dd_log(DD_LOG_WARN, "%s=%g: disturbing messages on purpose (test only)", fault_env[k], fault_p[k]);
    }
}
double dd_net_drop_rate(void) {
    pthread_once(&fault_once, fault_init);
    return fault_p[F_DROP];
}
uint64_t dd_net_dropped(void) { return atomic_load(&fault_n[F_DROP]); }
void dd_net_fault_counts(uint64_t *dropped, uint64_t *duplicated, uint64_t *reordered, uint64_t *truncated) {
    if (dropped) *dropped = atomic_load(&fault_n[F_DROP]);
    if (duplicated) *duplicated = atomic_load(&fault_n[F_DUP]);
    if (reordered) *reordered = atomic_load(&fault_n[F_REORDER]);
    if (truncated) *truncated = atomic_load(&fault_n[F_TRUNC]);
}

static uint64_t fault_rand(void) {
    if (!fault_state) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        fault_state = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&fault_state;
        if (!fault_state) fault_state = 1;
    }
    /* xorshift64* */
    fault_state ^= fault_state >> 12;
    fault_state ^= fault_state << 25;
    fault_state ^= fault_state >> 27;
    return fault_state * 2685821657736338717ull;
}
static int fault_now(int k) {
    pthread_once(&fault_once, fault_init);
    if (fault_p[k] <= 0) return 0;
    if ((double)(fault_rand() >> 11) * 0x1.0p-53 >= fault_p[k]) return 0;
    atomic_fetch_add(&fault_n[k], 1);
    return 1;
}

/* One frame (after the routing id, if any); 0 when the queue refuses it. Takes m. */
static int send_frame(void *sock, const void *rid, size_t rid_n, zmq_msg_t *m) {
    if ((rid && zmq_send(sock, rid, rid_n, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) || zmq_msg_send(m, sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(m);
        return 0;
    }
    return 1;
}

/* DD_NET_REORDER: one message per thread held back and sent after the next message on
 * the same socket (delayed and reordered); a send on another socket first drops it (the
 * held socket may be closed by then), as does a thread's exit (a loss, which the
 * protocol recovers from like a drop). */
static _Thread_local struct {
    void *sock;
    uint8_t rid[256];
    size_t rid_n;
    int has_rid, held;
    zmq_msg_t m;
} held;

int dd_net_send(void *sock, const void *rid, size_t rid_n, int type, uint64_t seq, uint64_t sender,
                const void *payload, uint32_t len) {
    if (fault_now(F_DROP)) return 0;
    zmq_msg_t m;
    size_t n = DD_NET_HEADER + (size_t)len;
    if (zmq_msg_init_size(&m, n) != 0) return 0;
    uint8_t *d = zmq_msg_data(&m);
    dd_net_hdr_write(d, type, seq, sender, payload, len);
    if (len) memcpy(d + DD_NET_HEADER, payload, len);
    if (fault_now(F_TRUNC)) { /* the receiver sees a cut message */
        zmq_msg_t t;
        size_t cut = (size_t)(fault_rand() % n);
        if (zmq_msg_init_size(&t, cut) == 0) {
            if (cut) memcpy(zmq_msg_data(&t), d, cut);
            zmq_msg_close(&m);
            m = t;
        }
    }
    if (held.held && held.sock != sock) {
        zmq_msg_close(&held.m);
        held.held = 0;
    }
    if (!held.held && rid_n <= sizeof held.rid && fault_now(F_REORDER)) {
        held.sock = sock;
        held.has_rid = rid != NULL;
        held.rid_n = rid_n;
        if (rid && rid_n) memcpy(held.rid, rid, rid_n);
        held.m = m;
        held.held = 1;
        return 1;
    }
    zmq_msg_t dup;
    int twice = fault_now(F_DUP) && zmq_msg_init(&dup) == 0 && zmq_msg_copy(&dup, &m) == 0;
    int ok = send_frame(sock, rid, rid_n, &m);
    if (twice) send_frame(sock, rid, rid_n, &dup);
    if (held.held) { /* after the newer message: reordered */
        held.held = 0;
        send_frame(sock, held.has_rid ? held.rid : NULL, held.rid_n, &held.m);
    }
    return ok;
}

int64_t dd_net_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One probe: a port the kernel gives for port 0 on loopback, released at once. */
static int probe_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    int p = ntohs(a.sin_port);
    close(fd);
    return p;
}

/* The port is free when probed, not reserved: two calls in a row can get the same one
 * from the kernel (seen in CI: two servers of one cluster file on one port). So the last
 * ports this process was given are remembered and not given again. */
int dd_net_free_port(void) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int recent[64], nrecent;
    pthread_mutex_lock(&mu);
    int p = -1;
    for (int tries = 0; tries < 64; tries++) {
        p = probe_port();
        if (p < 0) break;
        int dup = 0;
        for (int i = 0; i < nrecent && i < 64 && !dup; i++) dup = recent[i] == p;
        if (!dup) break;
        p = -1;
    }
    if (p > 0) recent[nrecent++ % 64] = p;
    pthread_mutex_unlock(&mu);
    return p;
}
