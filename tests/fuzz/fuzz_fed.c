/* libFuzzer target: the federated-averaging payload decoders (include/distdpd/fednet.h),
 * the bytes a coordinator gets from benches and a bench from its coordinator.
 * Input: byte 0 picks the decoder (hello, welcome, round, update, eval, eval-reply), byte 1
 * the expected parameter count (0..63), byte 2 bit 0 whether a control variate is expected
 * (scaffold); the rest is the payload. Invariant: a payload a decoder accepts re-encodes
 * with the matching encoder to exactly the same bytes (no accepted input carries anything
 * the decoder did not read), and a refusal leaves an error message. */
#include "distdpd/fednet.h"
#include "fuzz_util.h"

static void same(const dd_nbuf *b, const uint8_t *p, size_t n) {
    if (b->oom) return;
    if (b->n != n || memcmp(b->p, p, n) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    if (size < 3) return 0;
    const int which = data[0] % 6;
    const uint64_t want_n = data[1] % 64;
    const int want_dc = data[2] & 1;
    const uint8_t *p = data + 3;
    const size_t n = size - 3;
    dd_nbuf b = {0};
    dd_status st = DD_OK;
    switch (which) {
    case 0: {
        dd_fed_hello m;
        if ((st = dd_fed_dec_hello(p, n, &m)) == DD_OK) {
            dd_fed_enc_hello(&b, &m);
            same(&b, p, n);
        }
        break;
    }
    case 1: {
        dd_fed_welcome m;
        memset(&m, 0, sizeof m);
        if ((st = dd_fed_dec_welcome(p, n, &m)) == DD_OK) {
            dd_fed_enc_welcome(&b, &m);
            same(&b, p, n);
        }
        dd_fed_welcome_free(&m);
        break;
    }
    case 2: {
        dd_fed_round m;
        if ((st = dd_fed_dec_round(p, n, want_n, 3, &m)) == DD_OK) {
            float *w = malloc((m.nparams ? m.nparams : 1) * sizeof *w), *c = NULL;
            if (!w) abort();
            memcpy(w, m.w, m.nparams * sizeof *w);
            if (m.c) {
                c = malloc((m.nparams ? m.nparams : 1) * sizeof *c);
                if (!c) abort();
                memcpy(c, m.c, m.nparams * sizeof *c);
            }
            dd_fed_enc_round(&b, &m, w, c);
            same(&b, p, n);
            free(w);
            free(c);
        }
        break;
    }
    case 3: {
        dd_fed_update m;
        if ((st = dd_fed_dec_update(p, n, want_n, want_dc, &m)) == DD_OK) {
            float *d = malloc((m.nparams ? m.nparams : 1) * sizeof *d), *dc = NULL;
            if (!d) abort();
            memcpy(d, m.delta, m.nparams * sizeof *d);
            if (m.dc) {
                dc = malloc((m.nparams ? m.nparams : 1) * sizeof *dc);
                if (!dc) abort();
                memcpy(dc, m.dc, m.nparams * sizeof *dc);
            }
            dd_fed_enc_update(&b, &m, d, dc);
            same(&b, p, n);
            free(d);
            free(dc);
        }
        break;
    }
    case 4: {
        dd_fed_eval m;
        if ((st = dd_fed_dec_eval(p, n, want_n, &m)) == DD_OK) {
            float *w = malloc((m.nparams ? m.nparams : 1) * sizeof *w);
            if (!w) abort();
            memcpy(w, m.w, m.nparams * sizeof *w);
            dd_fed_enc_eval(&b, &m, w);
            same(&b, p, n);
            free(w);
        }
        break;
    }
    default: {
        dd_fed_eval_rep m;
        if ((st = dd_fed_dec_eval_rep(p, n, &m)) == DD_OK) {
            dd_fed_enc_eval_rep(&b, &m);
            same(&b, p, n);
        }
    }
    }
    if (st != DD_OK && dd_last_error()[0] == 0) abort(); /* a refusal says why */
    dd_nbuf_free(&b);
    dd_error_clear();
    return 0;
}
