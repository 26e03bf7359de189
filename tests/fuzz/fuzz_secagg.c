/* libFuzzer target: the secure-aggregation messages (include/distdpd/secagg.h).
 * Three clients and the server run the protocol with fixed keys (test_seed); before the
 * honest messages of round k (byte 0 % 4: advertise, share keys, masked input, unmask)
 * the rest of the input is injected once, either into the server as client `who`'s
 * message or into client `who` as the server's message (byte 0 picks who and which).
 * Invariants: a refused message leaves the receiver's state unchanged and no trace, so
 * the honest run then completes with the exact sum (to the fixed-point resolution); a
 * refusal says why. An accepted injection ends the input (it may legitimately change
 * the outcome). */
#include "distdpd/secagg.h"
#include "fuzz_util.h"

#define NC 3
#define D 3

static int inject(dd_secagg_server *s, dd_secagg_client *const *c, int to_client, uint32_t who, const uint8_t *p,
                  size_t n, const float *x) {
    if (to_client) {
        dd_secagg_state before = dd_secagg_client_state(c[who - 1]);
        uint8_t *out = NULL;
        size_t len = 0;
        if (dd_secagg_client_next(c[who - 1], p, n, x, &out, &len) == DD_OK) {
            free(out);
            return 1; /* accepted: nothing more to check */
        }
        if (dd_secagg_client_state(c[who - 1]) != before || dd_last_error()[0] == 0) abort();
    } else {
        dd_secagg_state before = dd_secagg_server_state(s);
        if (dd_secagg_server_receive(s, who, p, n) == DD_OK) return 1;
        if (dd_secagg_server_state(s) != before || dd_last_error()[0] == 0) abort();
    }
    dd_error_clear();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    if (size < 1) return 0;
    const int at = data[0] % 4, to_client = (data[0] / 12) % 2;
    const uint32_t who = 1 + (uint32_t)(data[0] / 4) % NC;
    const uint8_t *p = data + 1;
    const size_t n = size - 1;
    static const float x[NC][D] = {{0.5f, -1, 2}, {1, 1, 1}, {-0.25f, 0, 3}};
    dd_secagg_cfg cfg = {.session = 7, .d = D, .n = NC, .threshold = 2, .ring_bits = 32, .range = 4, .test_seed = 42};
    int k = 0;
    if (dd_secagg_resolve(&cfg, &k) != DD_OK) abort();
    const uint32_t ids[NC] = {1, 2, 3};
    dd_secagg_server *s = NULL;
    dd_secagg_client *c[NC] = {NULL};
    if (dd_secagg_server_new(&cfg, ids, &s) != DD_OK) abort();
    for (int i = 0; i < NC; i++)
        if (dd_secagg_client_new(&cfg, ids[i], &c[i]) != DD_OK) abort();
    int done = 0;
    for (int round = 0; round < 4 && !done; round++) {
        if (round == at && inject(s, c, to_client, who, p, n, x[who - 1])) {
            done = 1;
            break;
        }
        for (int i = 0; i < NC; i++) {
            uint8_t *in = NULL, *out = NULL;
            size_t in_len = 0, len = 0;
            if (round > 0 && dd_secagg_server_message(s, ids[i], &in, &in_len) != DD_OK) abort();
            if (dd_secagg_client_next(c[i], in, in_len, x[i], &out, &len) != DD_OK) abort();
            if (dd_secagg_server_receive(s, ids[i], out, len) != DD_OK) abort();
            free(in);
            free(out);
        }
        if (dd_secagg_server_close(s) != DD_OK) abort();
    }
    if (!done) { /* every injection refused: the honest run's exact sum */
        float sum[D];
        int ns = 0;
        if (dd_secagg_server_state(s) != DD_SECAGG_DONE || dd_secagg_server_result(s, sum, &ns) != DD_OK || ns != NC)
            abort();
        const double tol = NC * ldexp(1.0, -k);
        for (int j = 0; j < D; j++)
            if (fabs((double)sum[j] - ((double)x[0][j] + x[1][j] + x[2][j])) > tol) abort();
    }
    for (int i = 0; i < NC; i++) dd_secagg_client_free(c[i]);
    dd_secagg_server_free(s);
    dd_error_clear();
    return 0;
}
