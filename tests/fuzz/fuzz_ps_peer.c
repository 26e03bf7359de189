/* libFuzzer target: a parameter server's decoding of its replicas' REPL_ACK
 * (dd_ps_dec_repl_ack, src/ps/ps_internal.h; on_peer in src/ps/server.c calls it with the
 * replica's answer to a REPL before it moves any block's acknowledged version). The input
 * is the bare payload.
 *
 * Invariants (abort = finding): the validation-only call and the call with a callback
 * agree; an accepted payload's items (each name 1..95 printable bytes) re-encode as u32
 * count + (dd_nbuf_str name, u64 version) to exactly the input, and there are at most
 * (n - 4) / 11 of them; a refused one is DD_ERR_FORMAT with a "repl-ack:" message and the
 * callback saw no item. */
#include "fuzz_util.h"
#include "ps/ps_internal.h"

typedef struct {
    dd_nbuf b;
    uint32_t n;
} seen;

static void item(void *u, const char *name, uint64_t v) {
    seen *s = u;
    const size_t len = strlen(name);
    if (len == 0 || len >= DD_PS_NAME_MAX) abort();
    for (size_t i = 0; i < len; i++)
        if (name[i] < 0x20 || name[i] > 0x7e) abort();
    dd_nbuf_str(&s->b, name);
    dd_nbuf_u64(&s->b, v);
    s->n++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    seen s = {{0}, 0};
    dd_nbuf_u32(&s.b, 0);
    const dd_status v = dd_ps_dec_repl_ack(data, size, NULL, NULL);
    const dd_status st = dd_ps_dec_repl_ack(data, size, item, &s);
    if (v != st) abort();
    if (st != DD_OK) {
        if (st != DD_ERR_FORMAT || strncmp(dd_last_error(), "repl-ack: ", 10) != 0 || s.n != 0) {
            fprintf(stderr, "fuzz_ps_peer: refusal %d '%s' after %u items\n", (int)st, dd_last_error(), s.n);
            abort();
        }
    } else {
        if (s.b.oom || s.n > (size - 4) / 11) abort();
        for (int i = 0; i < 4; i++) s.b.p[i] = (uint8_t)(s.n >> (8 * i));
        if (s.b.n != size || memcmp(s.b.p, data, size) != 0) {
            fprintf(stderr, "fuzz_ps_peer: %u items re-encode to %zu bytes, the input has %zu\n", s.n, s.b.n, size);
            abort();
        }
    }
    dd_nbuf_free(&s.b);
    dd_error_clear();
    return 0;
}
