/* libFuzzer target: the training coordinator's protocol (src/parallel/ps_msg.h, the
 * decoders the coordinator's on_msg and the worker in src/parallel/ps_train.c call): what
 * a worker sends (HELLO, COMMIT, DONE; LEASE and BYE are empty) and what the coordinator
 * answers (WELCOME, LEASE_REP, COMMIT_REP).
 *
 * Input: byte 0 picks the decoder (hello, welcome, lease-reply, commit, commit-reply,
 * done, an empty lease / bye), the rest is the payload.
 *
 * Invariants (abort = finding): an accepted payload re-encodes with the matching encoder
 * to exactly the same bytes, and its fields are in the ranges ps_msg.h promises (a name
 * of 1..63 bytes without control bytes, a welcome's index, staleness, stale-lr and lease
 * in range, a lease's frames non-empty within its batch size and a finite learning rate,
 * a done's finite compute time and gradient norm); a refusal is DD_ERR_FORMAT with a
 * message that starts with the message's name, and a refused welcome owns nothing. */
#include <math.h>

#include "fuzz_util.h"
#include "parallel/ps_msg.h"

static void same(const dd_nbuf *b, const uint8_t *p, size_t n) {
    if (b->oom || b->n != n || (n && memcmp(b->p, p, n) != 0)) {
        fprintf(stderr, "fuzz_ps_train: re-encoded %zu bytes differ from the %zu accepted\n", b->n, n);
        abort();
    }
}

static void refused(dd_status st, const char *what) {
    if (st != DD_ERR_FORMAT || strncmp(dd_last_error(), what, strlen(what)) != 0 || dd_last_error()[strlen(what)] != ':') {
        fprintf(stderr, "fuzz_ps_train: %s refused with status %d: '%s'\n", what, (int)st, dd_last_error());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    const size_t n = size - 1;
    dd_nbuf b = {0};
    dd_status st;
    switch (data[0] % 7) {
    case 0: {
        dd_pst_hello m;
        if ((st = dd_pst_dec_hello(p, n, &m)) != DD_OK) {
            refused(st, "hello");
            break;
        }
        const size_t len = strlen(m.name);
        if (len == 0 || len > DD_PST_NAME_MAX) abort();
        for (size_t i = 0; i < len; i++)
            if ((uint8_t)m.name[i] < 0x20 || m.name[i] == 0x7f) abort();
        dd_pst_enc_hello(&b, m.name);
        same(&b, p, n);
        break;
    }
    case 1: {
        dd_pst_welcome m;
        if ((st = dd_pst_dec_welcome(p, n, &m)) != DD_OK) {
            refused(st, "welcome");
            if (m.cfg_json) abort();
            break;
        }
        if (m.index >= DD_PST_MAX_WORKERS || (m.staleness > INT64_MAX && m.staleness != UINT64_MAX) || m.stale_lr > 1 ||
            m.lease_ms < DD_PST_LEASE_MS_MIN || m.lease_ms > DD_PST_LEASE_MS_MAX || !m.cfg_json || !m.cfg_json[0])
            abort();
        dd_pst_enc_welcome(&b, &m);
        same(&b, p, n);
        dd_pst_welcome_free(&m);
        break;
    }
    case 2: {
        dd_pst_lease m;
        if ((st = dd_pst_dec_lease(p, n, &m)) != DD_OK) {
            refused(st, "lease-reply");
            break;
        }
        if (m.kind > DD_PST_LEASE_END) abort();
        if (m.kind == DD_PST_LEASE_BATCH && (m.lo >= m.hi || m.global < m.hi - m.lo || !isfinite(m.lr) || m.lr < 0)) abort();
        dd_pst_enc_lease(&b, &m);
        same(&b, p, n);
        break;
    }
    case 3: {
        dd_pst_commit m;
        if ((st = dd_pst_dec_commit(p, n, &m)) != DD_OK) {
            refused(st, "commit");
            break;
        }
        dd_pst_enc_commit(&b, &m);
        same(&b, p, n);
        break;
    }
    case 4: {
        int ok = -1;
        if ((st = dd_pst_dec_commit_rep(p, n, &ok)) != DD_OK) {
            refused(st, "commit-reply");
            if (ok != 0) abort(); /* a refusal never reads as go */
            break;
        }
        if (ok != 0 && ok != 1) abort();
        dd_pst_enc_commit_rep(&b, ok);
        same(&b, p, n);
        break;
    }
    case 5: {
        dd_pst_done m;
        if ((st = dd_pst_dec_done(p, n, &m)) != DD_OK) {
            refused(st, "done");
            break;
        }
        if (!isfinite(m.compute_s) || m.compute_s < 0 || !isfinite(m.grad_norm) || m.grad_norm < 0) abort();
        dd_pst_enc_done(&b, &m);
        same(&b, p, n);
        break;
    }
    default:
        if ((st = dd_pst_dec_empty(p, n, "lease")) != DD_OK) refused(st, "lease");
        else if (n) abort();
        break;
    }
    dd_nbuf_free(&b);
    dd_error_clear();
    return 0;
}
