/* The payloads of the training coordinator's protocol (docs/ps.md, "Coordinator
 * protocol"): what a worker sends the coordinator (HELLO, LEASE, COMMIT, DONE; BYE is
 * empty) and what the coordinator answers (WELCOME, LEASE_REP, COMMIT_REP). Encoders and
 * strict decoders, pure functions (no socket, no state): the coordinator's
 * dd_pst_coord_on_msg (ps_coord.c) and the worker in ps_train.c call them, test_ps_msg tests every refusal and the libFuzzer target
 * tests/fuzz/fuzz_ps_train.c feeds them random bytes.
 *
 * A decoder returns DD_OK with the struct filled, or DD_ERR_FORMAT with dd_last_error()
 * naming the message and the field ("lease-reply: learning rate nan is not a finite
 * number >= 0"); the caller adds the peer. Integers and floats are little-endian (dd_nbuf /
 * dd_nrd). */
#ifndef DD_PS_MSG_H
#define DD_PS_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"
#include "distdpd/net.h"

#define DD_PST_MAX_WORKERS 256       /* a coordinator's table; WELCOME's index is below this */
#define DD_PST_NAME_MAX 63           /* a worker's name in HELLO: 1..63 bytes, no control byte */
#define DD_PST_CFG_MAX (1u << 24)    /* WELCOME's configuration JSON, bytes */
#define DD_PST_LEASE_MS_MIN 100      /* --lease-ms's range */
#define DD_PST_LEASE_MS_MAX 86400000

typedef struct { /* HELLO: u32 length + the worker's name */
    char name[DD_PST_NAME_MAX + 1];
} dd_pst_hello;

typedef struct { /* WELCOME */
    uint32_t index;     /* the worker's slot in the coordinator's table */
    char *cfg_json;     /* the run's dd_train_cfg_to_json (decoded: owned, dd_pst_welcome_free) */
    uint64_t staleness; /* UINT64_MAX: inf; otherwise <= INT64_MAX */
    uint8_t stale_lr;   /* 0 or 1 */
    uint32_t lease_ms;  /* [DD_PST_LEASE_MS_MIN, DD_PST_LEASE_MS_MAX] */
} dd_pst_welcome;

enum { DD_PST_LEASE_BATCH = 0, DD_PST_LEASE_WAIT = 1, DD_PST_LEASE_END = 2 };

typedef struct { /* LEASE_REP: kind, and for a batch the rest (57 bytes in all) */
    uint8_t kind;
    uint64_t epoch, batch; /* 0-based */
    uint64_t lo, hi;       /* frame positions [lo, hi): lo < hi */
    uint64_t global;       /* the batch size the loss is normalised by: >= hi - lo */
    double lr;             /* finite, >= 0 */
    uint64_t staleness;
} dd_pst_lease;

typedef struct { /* COMMIT: 32 bytes */
    uint64_t epoch, batch, cid, txn;
} dd_pst_commit;

typedef struct { /* DONE: 56 bytes */
    uint64_t epoch, batch;
    double loss; /* any: a non-finite loss counts as a push lost with its worker */
    uint64_t lag, resends;
    double compute_s; /* finite, >= 0 (summed into ps.json) */
    double grad_norm; /* finite, >= 0 */
} dd_pst_done;

/* Encoders: b->n is reset first; b->oom tells an allocation failure. */
void dd_pst_enc_hello(dd_nbuf *b, const char *name);
void dd_pst_enc_welcome(dd_nbuf *b, const dd_pst_welcome *m);
void dd_pst_enc_lease(dd_nbuf *b, const dd_pst_lease *m); /* kind WAIT / END: one byte */
void dd_pst_enc_commit(dd_nbuf *b, const dd_pst_commit *m);
void dd_pst_enc_commit_rep(dd_nbuf *b, int ok);
void dd_pst_enc_done(dd_nbuf *b, const dd_pst_done *m);

/* Decoders of the payload p[0..n). */
dd_status dd_pst_dec_hello(const uint8_t *p, size_t n, dd_pst_hello *m);
dd_status dd_pst_dec_empty(const uint8_t *p, size_t n, const char *what); /* LEASE, BYE */
dd_status dd_pst_dec_welcome(const uint8_t *p, size_t n, dd_pst_welcome *m);
void dd_pst_welcome_free(dd_pst_welcome *m);
dd_status dd_pst_dec_lease(const uint8_t *p, size_t n, dd_pst_lease *m);
dd_status dd_pst_dec_commit(const uint8_t *p, size_t n, dd_pst_commit *m);
dd_status dd_pst_dec_commit_rep(const uint8_t *p, size_t n, int *ok);
dd_status dd_pst_dec_done(const uint8_t *p, size_t n, dd_pst_done *m);

#endif
