/* Network transport of the parameter server (docs/ps.md): ZeroMQ sockets secured with
 * CURVE, a ZAP handler that admits only enrolled client keys, and a small versioned
 * message format validated strictly.
 *
 * Keys are CURVE (Curve25519) key pairs in Z85 text (40 characters). A key file NAME.key
 * holds the secret key (mode 0600), NAME.pub the public key; '#' lines are comments.
 *
 * Messages: one ZeroMQ frame = a 32-byte header (all integers little-endian)
 *   magic "DDPS" (u32 0x53504444), version u8 (1), type u8, flags u16 (0),
 *   seq u64, sender u64, payload length u32, CRC32C of the payload u32
 * followed by exactly `payload length` bytes. dd_net_parse() refuses anything else with a
 * message that says what was wrong (truncated header, bad magic, unknown type, oversized,
 * truncated payload, trailing bytes, CRC mismatch).
 *
 * Test-only fault injection: DD_NET_DROP=P (0 <= P < 1) makes dd_net_send() drop each
 * message with probability P (as ps-lite's PS_DROP_RATE), so that the resend and
 * deduplication paths run; likewise DD_NET_DUP=P sends a message twice, DD_NET_REORDER=P
 * holds it back until after the thread's next message on the same socket (delayed and
 * reordered; lost when the next send goes to another socket), DD_NET_TRUNC=P cuts it to a
 * random shorter length (the receiver's dd_net_parse refuses it). Never set them in
 * production.
 *
 * Thread safety: a socket belongs to one thread (ZeroMQ's rule); the ZAP handler runs its
 * own thread. This module never includes mpi.h. */
#ifndef DISTDPD_NET_H
#define DISTDPD_NET_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_NET_KEY_Z85 40          /* Z85 characters of a CURVE key */
#define DD_NET_MAGIC 0x53504444u   /* "DDPS" read as a little-endian u32 */
#define DD_NET_VERSION 1
#define DD_NET_HEADER 32           /* header bytes */
#define DD_NET_DEFAULT_MAX_MSG (64u << 20) /* payload limit unless configured (64 MiB) */

/* Message types. Requests go client -> server (or server -> replica), replies back. */
typedef enum {
    DD_MSG_PUSH = 1,      /* gradients of blocks: apply with the optimiser */
    DD_MSG_PULL = 2,      /* current values of blocks (unless unchanged since a version) */
    DD_MSG_INIT = 3,      /* create blocks with initial values (first INIT wins) */
    DD_MSG_PING = 4,      /* heartbeat */
    DD_MSG_REPL = 5,      /* server -> replica: full state of blocks (values, optimiser, dedup) */
    DD_MSG_STATE = 6,     /* full state of blocks (values, optimiser state): checkpoints */
    DD_MSG_RESTORE = 7,   /* set blocks to a checkpoint's values, optimiser state and version (resume) */
    DD_MSG_HELLO = 8,     /* worker -> coordinator: join the training (docs/ps.md, phase 2) */
    DD_MSG_LEASE = 9,     /* worker -> coordinator: the next batch to compute */
    DD_MSG_COMMIT = 10,   /* worker -> coordinator: may I push the batch I computed? */
    DD_MSG_DONE = 11,     /* worker -> coordinator: the batch's push was acknowledged */
    DD_MSG_BYE = 12,      /* worker -> coordinator: leaving */
    DD_MSG_STAGE = 13,    /* gradients of blocks held back, not applied, until an APPLY (two-phase push) */
    DD_MSG_APPLY = 14,    /* apply a staged update (its owner and transaction number) with the optimiser */
    DD_MSG_ACK = 16,      /* reply to PUSH / INIT: the blocks' versions */
    DD_MSG_PULL_REP = 17, /* reply to PULL */
    DD_MSG_PONG = 18,     /* reply to PING */
    DD_MSG_REPL_ACK = 19, /* reply to REPL */
    DD_MSG_STATE_REP = 20, /* reply to STATE */
    DD_MSG_WELCOME = 24,  /* reply to HELLO: the run's configuration */
    DD_MSG_LEASE_REP = 25, /* reply to LEASE: a batch, wait, or the end */
    DD_MSG_COMMIT_REP = 26, /* reply to COMMIT: go, or the lease was lost */
    DD_MSG_ERR = 31,      /* refusal: payload is a UTF-8 message */
    /* federated averaging (docs/federated.md, "Protocol"; payloads: distdpd/fednet.h) */
    DD_MSG_FED_HELLO = 40,    /* bench -> coordinator: join (protocol version, training frames) */
    DD_MSG_FED_WELCOME = 41,  /* coordinator -> bench: the training configuration, bench index */
    DD_MSG_FED_ROUND = 42,    /* coordinator -> bench: round, local work, global weights [+ control] */
    DD_MSG_FED_UPDATE = 43,   /* bench -> coordinator: the round's update [+ control delta] */
    DD_MSG_FED_EVAL = 44,     /* coordinator -> bench: evaluate these weights on your test split */
    DD_MSG_FED_EVAL_REP = 45, /* bench -> coordinator: squared-error sums of the test split */
    DD_MSG_FED_END = 46,      /* coordinator -> bench: the federation is over */
    DD_MSG_FED_SECAGG = 47    /* either way, --secure: one secure-aggregation message (secagg.h) */
} dd_msg_type;
#define DD_NET_MAX_TYPE 64 /* message types are below this */

/* "push", "pull", ... ; "?" for an unknown value. 1 when t is a known type. */
const char *dd_msg_type_name(int t);
int dd_msg_type_known(int t);

typedef struct {
    uint8_t type;
    uint16_t flags;
    uint64_t seq;
    uint64_t sender;
    uint32_t len; /* payload bytes */
    uint32_t crc; /* CRC32C of the payload */
} dd_net_hdr;

/* Writes a header for payload[0..len) into out[0..DD_NET_HEADER). */
void dd_net_hdr_write(uint8_t *out, int type, uint64_t seq, uint64_t sender, const void *payload,
                      uint32_t len);
/* Validates a received message msg[0..n): header fields, payload length against max_payload
 * and against n, CRC. On success *h is filled and *payload points into msg. Errors:
 * DD_ERR_FORMAT with the reason ("truncated header: 7 bytes, need 32", "bad magic
 * 0x...", "unsupported version 9", "unknown message type 77", "oversized: payload 2000000
 * bytes over the limit of 1048576", "truncated: header says 4096 payload bytes, message
 * has 100", "6 trailing bytes after the payload", "payload CRC32C mismatch"). */
dd_status dd_net_parse(const void *msg, size_t n, uint32_t max_payload, dd_net_hdr *h,
                       const uint8_t **payload);

/* ---- growing byte buffer and bounds-checked reader (payload encoding) ---- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom; /* an allocation failed: the content is incomplete */
} dd_nbuf;
void dd_nbuf_free(dd_nbuf *b);
void dd_nbuf_u8(dd_nbuf *b, uint8_t v);
void dd_nbuf_u16(dd_nbuf *b, uint16_t v);
void dd_nbuf_u32(dd_nbuf *b, uint32_t v);
void dd_nbuf_u64(dd_nbuf *b, uint64_t v);
void dd_nbuf_f64(dd_nbuf *b, double v);
void dd_nbuf_bytes(dd_nbuf *b, const void *p, size_t n);
void dd_nbuf_str(dd_nbuf *b, const char *s); /* u16 length + bytes */
/* Appends n zero bytes and returns where they start (for the caller to fill), or NULL
 * (b->oom) when the buffer cannot grow. The pointer is valid until the next append. */
uint8_t *dd_nbuf_room(dd_nbuf *b, size_t n);

typedef struct {
    const uint8_t *p;
    size_t n, off;
    int bad; /* a read ran past the end: every later read returns 0 */
} dd_nrd;
void dd_nrd_init(dd_nrd *r, const void *p, size_t n);
uint8_t dd_nrd_u8(dd_nrd *r);
uint16_t dd_nrd_u16(dd_nrd *r);
uint32_t dd_nrd_u32(dd_nrd *r);
uint64_t dd_nrd_u64(dd_nrd *r);
double dd_nrd_f64(dd_nrd *r);
/* A pointer to the next n bytes (NULL and r->bad when fewer remain). */
const uint8_t *dd_nrd_bytes(dd_nrd *r, size_t n);
/* A u16-length string into out[0..cap) (NUL-terminated). Refuses (r->bad) a length >=
 * cap, an empty string, or bytes outside printable ASCII. */
void dd_nrd_str(dd_nrd *r, char *out, size_t cap);
/* A NUL-terminated heap copy of n bytes already read and checked (a message's text
 * field), for the caller to free; NULL when out of memory. */
char *dd_nrd_dupz(const uint8_t *s, size_t n);

/* ---- keys ---- */
/* Generates a CURVE key pair and writes base.key (secret, mode 0600, written atomically)
 * and base.pub (public). Errors: DD_ERR_IO naming the file, DD_ERR_UNSUPPORTED (libzmq
 * without CURVE). Refuses to overwrite existing files (DD_ERR_IO) unless force. */
/* A free loopback TCP port: bound to port 0, read, released (a server binds it right
 * after; ps-local, fed-sim and the tests), never one of the last 64 this process was
 * given (the kernel can give the same free port twice in a row). -1 when the system
 * gives none. */
int dd_net_free_port(void);

dd_status dd_net_keygen(const char *base, int force, char pub_z85[DD_NET_KEY_Z85 + 1]);
/* Reads a Z85 key (the first line that is not a comment) from path. When secret, the file
 * must not be readable by group or others (mode 0600 or stricter). Errors: DD_ERR_IO,
 * DD_ERR_FORMAT ("PATH: expected a 40-character Z85 key ...") */
dd_status dd_net_key_read(const char *path, int secret, char z85[DD_NET_KEY_Z85 + 1]);
/* The public key of a secret key (both Z85). */
dd_status dd_net_key_public(const char *secret_z85, char pub_z85[DD_NET_KEY_Z85 + 1]);
/* 1 when s is 40 characters of the Z85 alphabet that decode to 32 bytes. */
int dd_net_key_valid(const char *s);

/* ---- the ZAP handler ---- */
/* Allowed client keys: an allow file is one Z85 public key per line ('#' starts a
 * comment, anything after the key on its line is a label, blank lines are skipped). */
typedef struct dd_net_allow dd_net_allow;
/* Errors: DD_ERR_IO, DD_ERR_FORMAT naming file and line. */
dd_status dd_net_allow_load(const char *path, dd_net_allow **out);
/* Adds one key (e.g. the other servers of a cluster) with a label for the logs. */
dd_status dd_net_allow_add(dd_net_allow *a, const char *z85, const char *label);
size_t dd_net_allow_count(const dd_net_allow *a);
void dd_net_allow_free(dd_net_allow **a);

/* Starts a ZAP handler on inproc://zeromq.zap.01 in the ZeroMQ context ctx. It admits
 * CURVE clients whose public key is in allow (the label becomes the connection's
 * User-Id) and refuses the others with a warning naming the peer address and key
 * ("refused CURVE client 127.0.0.1 key Z85...: not in the allow file FILE"); NULL allow
 * admits nothing. Takes ownership of allow. Stop with dd_net_zap_stop before closing ctx.
 * `who` prefixes the log lines (e.g. "ps-server s0"). */
typedef struct dd_net_zap dd_net_zap;
dd_status dd_net_zap_start(void *ctx, dd_net_allow *allow, const char *allow_path, const char *who,
                           dd_net_zap **out);
/* Admitted and refused handshakes so far. */
void dd_net_zap_counts(const dd_net_zap *z, uint64_t *admitted, uint64_t *refused);
void dd_net_zap_stop(dd_net_zap **z);

/* ---- sockets ---- */
/* Heartbeats set on every socket (ZMQ_HEARTBEAT_IVL / _TIMEOUT / _TTL), milliseconds. */
#define DD_NET_HEARTBEAT_IVL 500
#define DD_NET_HEARTBEAT_TIMEOUT 2000

/* A ROUTER socket bound to endpoint. secret_z85 NULL = insecure (plain TCP; the caller
 * warns). With a key: CURVE server, ZAP domain "distdpd" (start the ZAP handler first).
 * max_msg: ZMQ_MAXMSGSIZE (a larger message makes libzmq close the connection). */
dd_status dd_net_router(void *ctx, const char *endpoint, const char *secret_z85, int64_t max_msg,
                        void **out);
/* A DEALER socket connected to endpoint. secret_z85/public_z85: this side's key pair;
 * server_z85: the server's public key (all NULL = insecure). */
dd_status dd_net_dealer(void *ctx, const char *endpoint, const char *secret_z85,
                        const char *public_z85, const char *server_z85, void **out);

/* Sends header + payload as one frame (after an optional routing-id frame for ROUTER
 * sockets: rid[0..rid_n), rid NULL for DEALER). Never blocks (ZMQ_DONTWAIT); a full queue
 * or the test-only drop counts as dropped (the request/resend protocol recovers).
 * Returns 1 sent, 0 dropped. */
int dd_net_send(void *sock, const void *rid, size_t rid_n, int type, uint64_t seq, uint64_t sender,
                const void *payload, uint32_t len);
/* The drop probability DD_NET_DROP (read once; 0 without it) and messages dropped by it. */
double dd_net_drop_rate(void);
uint64_t dd_net_dropped(void);
/* Messages this process disturbed on purpose so far (each pointer may be NULL). */
void dd_net_fault_counts(uint64_t *dropped, uint64_t *duplicated, uint64_t *reordered, uint64_t *truncated);

/* ---- receiving ---- */
/* One received message: the routing id of its peer (ROUTER sockets; rid_n = 0 on a
 * DEALER), the peer as "LABEL@ADDRESS" (the allow file's label of its CURVE key and its
 * address; "?" where unknown), the frame (owned) and, when it parsed, its header and
 * payload. */
typedef struct {
    uint8_t rid[256];
    size_t rid_n;
    char peer[192];
    uint8_t *frame; /* the message bytes (malloc'd; dd_net_msg_free) */
    size_t n;
    int ok;         /* 1: one frame that dd_net_parse accepted; 0: refused, err says why */
    char err[256];
    dd_net_hdr h;   /* ok: the header */
    const uint8_t *payload; /* ok: h.len bytes inside frame */
} dd_net_msg;
/* Waits up to wait_ms (0: do not wait) for one message on sock (ROUTER: routing-id frame
 * first; DEALER: none) and validates it with dd_net_parse against max_payload. Returns 1
 * with *m filled (m->ok 0 for a malformed one: several frames, an empty message, a parse
 * error), 0 when none came in time, -1 on a socket error (dd_last_error says it). Free
 * with dd_net_msg_free. */
int dd_net_recv(void *sock, int router, long wait_ms, uint32_t max_payload, dd_net_msg *m);
void dd_net_msg_free(dd_net_msg *m);

/* Milliseconds of a monotonic clock. */
int64_t dd_net_ms(void);

#ifdef __cplusplus
}
#endif
#endif
