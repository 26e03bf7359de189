/* Secure aggregation (secagg.h): the sum is exact to the fixed-point resolution, dropouts
 * at every round are recovered while t remain and refused below, every valid and invalid
 * transition of both state machines, tampered and garbled messages refused without
 * changing state, and what the server receives from a client does not depend on its
 * update. Prints (not asserted) bytes and time per client against the plain payload. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "dd_test.h"
#include "distdpd/secagg.h"

enum { MAXN = 16 };

/* drop[i]: the round after which client i stops answering: 0 never, 1 = never
 * advertises, 2 = advertises only, 3 = after ShareKeys, 4 = after MaskedInput */
typedef struct {
    dd_secagg_cfg cfg;
    int n;
    uint32_t ids[MAXN];
    dd_secagg_client *cl[MAXN];
    dd_secagg_server *srv;
    float *x[MAXN];
    size_t up[MAXN], down[MAXN]; /* bytes sent / received by each client */
    uint8_t *masked[MAXN];       /* the MASKED message of each client (kept when keep) */
    size_t masked_len[MAXN];
    uint8_t *other[MAXN][3];     /* ADVERTISE, SHARES, UNMASK of each client (kept when keep) */
    size_t other_len[MAXN][3];
    int keep;
} run_t;

static void run_free(run_t *r) {
    for (int i = 0; i < r->n; i++) {
        dd_secagg_client_free(r->cl[i]);
        free(r->x[i]);
        free(r->masked[i]);
        for (int k = 0; k < 3; k++) free(r->other[i][k]);
    }
    dd_secagg_server_free(r->srv);
    memset(r, 0, sizeof *r);
}

static void keep_msg(run_t *r, int i, int slot, uint8_t *m, size_t len) {
    if (!r->keep) {
        free(m);
        return;
    }
    if (slot < 0) {
        r->masked[i] = m;
        r->masked_len[i] = len;
    } else {
        r->other[i][slot] = m;
        r->other_len[i][slot] = len;
    }
}

/* n clients with ids 1..n (or r->ids when set), updates x uniform in [-range, range]
 * (seeded), quantised to multiples of 2^-q when q > 0 (so their float sum is exact). */
static void run_init(run_t *r, int n, size_t d, int bits, int t, uint64_t seed, int q) {
    memset(r, 0, sizeof *r);
    r->n = n;
    r->cfg.session = 1000 + seed;
    r->cfg.d = d;
    r->cfg.n = n;
    r->cfg.threshold = t;
    r->cfg.ring_bits = bits;
    r->cfg.range = 1.0;
    r->cfg.test_seed = seed;
    dd_rng g;
    dd_rng_seed(&g, seed);
    for (int i = 0; i < n; i++) {
        r->ids[i] = (uint32_t)(3 * i + 2); /* not 1..n: ids are only labels */
        r->x[i] = malloc(d * sizeof(float));
        for (size_t j = 0; j < d; j++) {
            double v = 2 * dd_rng_uniform(&g) - 1;
            r->x[i][j] = (float)(q > 0 ? ldexp(round(ldexp(v, q)), -q) : v);
        }
    }
    CHECK_OK(dd_secagg_resolve(&r->cfg, NULL));
}

/* Runs the protocol; returns the status of the first failing server close (DD_OK when
 * all closed). The server's result is written to sum when it finished. */
static dd_status run_protocol(run_t *r, const int *drop, float *sum, int *n_summed) {
    dd_status st;
    CHECK_OK(dd_secagg_server_new(&r->cfg, r->ids, &r->srv));
    for (int i = 0; i < r->n; i++) CHECK_OK(dd_secagg_client_new(&r->cfg, r->ids[i], &r->cl[i]));
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < r->n; i++) {
            if (drop && drop[i] && drop[i] <= round + 1) continue;
            uint8_t *in = NULL, *out = NULL;
            size_t in_len = 0, out_len = 0;
            if (round > 0) {
                if (dd_secagg_server_message(r->srv, r->ids[i], &in, &in_len) != DD_OK) continue; /* not a member */
                r->down[i] += in_len;
            }
            st = dd_secagg_client_next(r->cl[i], in, in_len, r->x[i], &out, &out_len);
            CHECK(dd_secagg_client_state(r->cl[i]) == (dd_secagg_state)(round + (st == DD_OK)), "client state");
            free(in);
            CHECK(st == DD_OK, "client %u round %d: %s", r->ids[i], round, dd_last_error());
            if (st != DD_OK) continue;
            r->up[i] += out_len;
            CHECK_OK(dd_secagg_server_receive(r->srv, r->ids[i], out, out_len));
            keep_msg(r, i, round == 2 ? -1 : round == 3 ? 2 : round, out, out_len);
        }
        st = dd_secagg_server_close(r->srv);
        if (st != DD_OK) return st;
    }
    CHECK(dd_secagg_server_state(r->srv) == DD_SECAGG_DONE, "server done");
    return dd_secagg_server_result(r->srv, sum, n_summed);
}

/* The float sum over the clients whose masked input was sent (drop 0 or 4), in double. */
static void plain_sum(const run_t *r, const int *drop, double *s) {
    for (size_t j = 0; j < r->cfg.d; j++) s[j] = 0;
    for (int i = 0; i < r->n; i++)
        if (!drop || drop[i] == 0 || drop[i] == 4)
            for (size_t j = 0; j < r->cfg.d; j++) s[j] += r->x[i][j];
}

/* max |got - want| against the bound n 2^-(k+1) + the float rounding of the result */
static void check_sum(const run_t *r, const int *drop, const float *got, const char *what) {
    int k;
    dd_secagg_cfg c = r->cfg;
    CHECK_OK(dd_secagg_resolve(&c, &k));
    double *want = malloc(r->cfg.d * sizeof *want), worst = 0, excess = 0;
    plain_sum(r, drop, want);
    for (size_t j = 0; j < r->cfg.d; j++) {
        double e = fabs((double)got[j] - want[j]), tol = r->n * ldexp(1, -(k + 1)) + fabs(want[j]) * 0x1p-24;
        if (e > worst) worst = e;
        if (e - tol > excess) excess = e - tol;
    }
    CHECK(excess == 0, "%s: error %.3g above the resolution bound (2^-%d per client)", what, worst, k + 1);
    free(want);
}

static void test_exact(void) {
    for (int n = 5; n <= 8; n++)
        for (int bits = 32; bits <= 64; bits += 32) {
            run_t r;
            run_init(&r, n, 1000, bits, 0, 10 * (uint64_t)n + (uint64_t)bits, 0);
            float *sum = malloc(1000 * sizeof *sum);
            int ns = -1;
            REQUIRE_OK(run_protocol(&r, NULL, sum, &ns)); /* sum is read below */
            CHECK(ns == n, "n_summed %d", ns);
            char what[64];
            snprintf(what, sizeof what, "n %d ring 2^%d", n, bits);
            check_sum(&r, NULL, sum, what);
            run_free(&r);
            /* values on a 2^-10 grid: the fixed point holds them exactly, so must the sum */
            run_init(&r, n, 1000, bits, 0, 10 * (uint64_t)n + (uint64_t)bits + 1, 10);
            REQUIRE_OK(run_protocol(&r, NULL, sum, &ns)); /* sum is read below */
            REQUIRE(r.cfg.d == 1000, "run_init: %zu values", (size_t)r.cfg.d);
            double *want = malloc(1000 * sizeof *want);
            plain_sum(&r, NULL, want);
            int same = 1;
            for (int j = 0; j < 1000; j++) same &= sum[j] == (float)want[j];
            CHECK(same, "grid values: sum not exact (n %d, ring 2^%d)", n, bits);
            free(want);
            free(sum);
            run_free(&r);
        }
}

static void test_dropouts(void) {
    float sum[300];
    int ns;
    /* n 8, t = floor(16/3) + 1 = 6 */
    const int cases[][8] = {
        {1, 0, 0, 0, 0, 0, 0, 0}, /* never advertises */
        {0, 2, 0, 0, 0, 0, 0, 0}, /* advertises, never shares */
        {0, 0, 3, 0, 0, 0, 0, 0}, /* after ShareKeys: its mask key is reconstructed */
        {0, 0, 0, 4, 0, 0, 0, 0}, /* after MaskedInput: its self mask is reconstructed */
        {0, 3, 0, 4, 0, 0, 0, 0}, /* both */
        {3, 0, 0, 0, 0, 0, 3, 0}, /* two after ShareKeys: 6 = t remain */
        {0, 4, 0, 0, 0, 4, 0, 0}, /* two after MaskedInput: 6 = t unmask */
    };
    const int expect_n[] = {7, 7, 7, 8, 7, 6, 8};
    for (int c = 0; c < 7; c++) {
        run_t r;
        run_init(&r, 8, 300, 32, 0, 500 + (uint64_t)c, 0);
        CHECK(r.cfg.threshold == 6, "default threshold %d", r.cfg.threshold);
        CHECK_OK(run_protocol(&r, cases[c], sum, &ns));
        CHECK(ns == expect_n[c], "case %d: summed %d", c, ns);
        char what[32];
        snprintf(what, sizeof what, "dropout case %d", c);
        check_sum(&r, cases[c], sum, what);
        run_free(&r);
    }
    /* below t: refused, with the round and the counts in the message, state unchanged */
    const int below[][8] = {{0, 2, 0, 2, 0, 2, 0, 0}, {3, 0, 3, 0, 3, 0, 0, 0}, {4, 0, 4, 0, 4, 0, 0, 0}};
    const char *msg[] = {"5 clients answered in round ShareKeys, the threshold is 6",
                         "5 clients answered in round MaskedInput, the threshold is 6",
                         "5 clients answered in round Unmasking, the threshold is 6"};
    const dd_secagg_state at[] = {DD_SECAGG_SHARE, DD_SECAGG_MASKED, DD_SECAGG_UNMASK};
    for (int c = 0; c < 3; c++) {
        run_t r;
        run_init(&r, 8, 300, 32, 0, 600 + (uint64_t)c, 0);
        CHECK_ERR(run_protocol(&r, below[c], sum, &ns), DD_ERR_ARG, msg[c]);
        CHECK(dd_secagg_server_state(r.srv) == at[c], "state after refusal %s",
              dd_secagg_state_name(dd_secagg_server_state(r.srv)));
        CHECK_ERR(dd_secagg_server_result(r.srv, sum, &ns), DD_ERR_ARG, "available after round Unmasking");
        run_free(&r);
    }
    /* a late answer after a refused close: the round closes and the sum is right (client
     * 1 drops after MaskedInput, 2 are late in Unmasking: close refused, then one arrives) */
    {
        run_t r;
        run_init(&r, 8, 300, 32, 0, 700, 0);
        CHECK_OK(dd_secagg_server_new(&r.cfg, r.ids, &r.srv));
        uint8_t *unmask_late[2] = {0};
        size_t late_len[2] = {0};
        for (int i = 0; i < 8; i++) CHECK_OK(dd_secagg_client_new(&r.cfg, r.ids[i], &r.cl[i]));
        for (int round = 0; round < 4; round++) {
            for (int i = 0; i < 8; i++) {
                uint8_t *in = NULL, *out = NULL;
                size_t il = 0, ol = 0;
                if (round > 0 && dd_secagg_server_message(r.srv, r.ids[i], &in, &il) != DD_OK) continue;
                CHECK_OK(dd_secagg_client_next(r.cl[i], in, il, r.x[i], &out, &ol));
                free(in);
                if (round == 3 && (i == 1 || i == 2 || i == 3)) {
                    if (i == 1) free(out); /* client 1 never arrives */
                    else unmask_late[i - 2] = out, late_len[i - 2] = ol;
                    continue;
                }
                CHECK_OK(dd_secagg_server_receive(r.srv, r.ids[i], out, ol));
                free(out);
            }
            if (round == 3) {
                CHECK_ERR(dd_secagg_server_close(r.srv), DD_ERR_ARG, "5 clients answered in round Unmasking");
                CHECK_OK(dd_secagg_server_receive(r.srv, r.ids[2], unmask_late[0], late_len[0]));
            }
            CHECK_OK(dd_secagg_server_close(r.srv));
        }
        CHECK_OK(dd_secagg_server_result(r.srv, sum, &ns));
        CHECK(ns == 8, "late: summed %d", ns);
        check_sum(&r, NULL, sum, "late answer");
        /* the other late one arrives after the end */
        CHECK_ERR(dd_secagg_server_receive(r.srv, r.ids[3], unmask_late[1], late_len[1]), DD_ERR_ARG,
                  "after the aggregation finished");
        free(unmask_late[0]), free(unmask_late[1]);
        run_free(&r);
    }
}

/* Every call of each state machine in every state: the right one advances, the others
 * are refused naming the round and leave the state as it was. */
static void test_transitions(void) {
    run_t r;
    run_init(&r, 5, 16, 32, 0, 900, 0);
    CHECK_OK(dd_secagg_server_new(&r.cfg, r.ids, &r.srv));
    for (int i = 0; i < 5; i++) CHECK_OK(dd_secagg_client_new(&r.cfg, r.ids[i], &r.cl[i]));
    dd_secagg_client *c = r.cl[0];
    uint8_t *out = NULL, *in = NULL, junk[64] = {0};
    size_t ol, il;
    uint8_t *keep[4][5] = {{0}};
    size_t keep_len[4][5] = {{0}};
    float sum[16];
    for (int round = 0; round <= 4; round++) {
        /* client: the four calls, all but the one of this round refused */
        for (int call = 0; call < 4; call++) {
            if (call == round) continue;
            dd_status st = call == 0   ? dd_secagg_client_advertise(c, &out, &ol)
                           : call == 1 ? dd_secagg_client_share_keys(c, junk, sizeof junk, &out, &ol)
                           : call == 2 ? dd_secagg_client_masked_input(c, junk, sizeof junk, r.x[0], &out, &ol)
                                       : dd_secagg_client_unmask(c, junk, sizeof junk, &out, &ol);
            CHECK(st == DD_ERR_ARG && strstr(dd_last_error(), "is a call of round"), "client call %d in round %d: %s",
                  call, round, dd_last_error());
            CHECK(dd_secagg_client_state(c) == (dd_secagg_state)round, "client state changed");
        }
        /* server: message/result outside their rounds */
        if (round == 0 || round == 4)
            CHECK_ERR(dd_secagg_server_message(r.srv, r.ids[0], &out, &ol), DD_ERR_ARG, "no message to send");
        if (round < 4) CHECK_ERR(dd_secagg_server_result(r.srv, sum, NULL), DD_ERR_ARG, "available after");
        if (round == 4) {
            CHECK_ERR(dd_secagg_client_next(c, junk, sizeof junk, r.x[0], &out, &ol), DD_ERR_ARG, "no call left");
            break;
        }
        /* close before anyone answered: refused */
        CHECK_ERR(dd_secagg_server_close(r.srv), DD_ERR_ARG, "0 clients answered");
        /* the valid step for every client */
        for (int i = 0; i < 5; i++) {
            in = NULL, il = 0;
            if (round > 0) CHECK_OK(dd_secagg_server_message(r.srv, r.ids[i], &in, &il));
            dd_status st = dd_secagg_client_next(r.cl[i], in, il, r.x[i], &out, &ol);
            CHECK_OK(st);
            CHECK(dd_secagg_client_state(r.cl[i]) == (dd_secagg_state)(round + 1), "client advanced");
            free(in);
            keep[round][i] = out;
            keep_len[round][i] = ol;
        }
        /* a message of an earlier round, in this round: refused by type */
        if (round > 0)
            CHECK_ERR(dd_secagg_server_receive(r.srv, r.ids[0], keep[round - 1][0], keep_len[round - 1][0]),
                      DD_ERR_FORMAT, "expected");
        /* from an id not invited; claiming another sender; then the valid one; duplicate */
        CHECK_ERR(dd_secagg_server_receive(r.srv, 99, keep[round][0], keep_len[round][0]), DD_ERR_ARG,
                  "client 99: not invited");
        CHECK_ERR(dd_secagg_server_receive(r.srv, r.ids[1], keep[round][0], keep_len[round][0]), DD_ERR_FORMAT,
                  "field sender is 2, expected 5");
        for (int i = 0; i < 5; i++) CHECK_OK(dd_secagg_server_receive(r.srv, r.ids[i], keep[round][i], keep_len[round][i]));
        CHECK_ERR(dd_secagg_server_receive(r.srv, r.ids[4], keep[round][4], keep_len[round][4]), DD_ERR_ARG,
                  "client 14: a second");
        /* a message for a client that is not invited */
        CHECK_OK(dd_secagg_server_close(r.srv));
        CHECK(dd_secagg_server_state(r.srv) == (dd_secagg_state)(round + 1), "server advanced");
        if (round < 3) CHECK_ERR(dd_secagg_server_message(r.srv, 99, &out, &ol), DD_ERR_ARG, "client 99: not a member");
    }
    CHECK_ERR(dd_secagg_server_close(r.srv), DD_ERR_ARG, "after the aggregation finished");
    CHECK_OK(dd_secagg_server_result(r.srv, sum, NULL));
    check_sum(&r, NULL, sum, "transitions run");
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < 5; i++) free(keep[a][i]);
    run_free(&r);

    /* a client that dropped after ShareKeys (not in U2) sending its masked input late */
    run_init(&r, 5, 16, 32, 0, 901, 0);
    const int drop[5] = {0, 0, 0, 0, 3};
    CHECK_OK(run_protocol(&r, drop, sum, NULL));
    run_free(&r);
    {
        run_t q;
        run_init(&q, 5, 16, 32, 0, 902, 0);
        CHECK_OK(dd_secagg_server_new(&q.cfg, q.ids, &q.srv));
        for (int i = 0; i < 5; i++) CHECK_OK(dd_secagg_client_new(&q.cfg, q.ids[i], &q.cl[i]));
        for (int round = 0; round < 3; round++) {
            uint8_t *late = NULL;
            size_t late_len = 0;
            for (int i = 0; i < 5; i++) {
                in = NULL, il = 0;
                if (round > 0 && dd_secagg_server_message(q.srv, q.ids[i], &in, &il) != DD_OK) continue;
                CHECK_OK(dd_secagg_client_next(q.cl[i], in, il, q.x[i], &out, &ol));
                free(in);
                if (round == 1 && i == 4) { /* SHARES of client 14 arrive after the close */
                    late = out, late_len = ol;
                    continue;
                }
                CHECK_OK(dd_secagg_server_receive(q.srv, q.ids[i], out, ol));
                free(out);
            }
            CHECK_OK(dd_secagg_server_close(q.srv));
            if (late) {
                CHECK_ERR(dd_secagg_server_receive(q.srv, q.ids[4], late, late_len), DD_ERR_ARG,
                          "client 14: not in the set of round MaskedInput");
                CHECK_ERR(dd_secagg_server_message(q.srv, q.ids[4], &out, &ol), DD_ERR_ARG, "not a member");
                free(late);
            }
        }
        run_free(&q);
    }

    /* configurations refused */
    dd_secagg_cfg bad = {.session = 1, .d = 10, .n = 5, .threshold = 2, .range = 1};
    CHECK_ERR(dd_secagg_resolve(&bad, NULL), DD_ERR_ARG, "threshold must be in (n/2, n]");
    bad.threshold = 6;
    CHECK_ERR(dd_secagg_resolve(&bad, NULL), DD_ERR_ARG, "threshold must be in (n/2, n]");
    bad.threshold = 0, bad.ring_bits = 16;
    CHECK_ERR(dd_secagg_resolve(&bad, NULL), DD_ERR_ARG, "ring_bits must be 32 or 64");
    bad.ring_bits = 32, bad.range = 1e9;
    CHECK_ERR(dd_secagg_resolve(&bad, NULL), DD_ERR_ARG, "does not fit the ring");
    bad.range = 1e9, bad.ring_bits = 64;
    int k;
    CHECK_OK(dd_secagg_resolve(&bad, &k));
    CHECK(bad.threshold == 4 && k == 30, "t %d, k %d (5 (1e9 2^k + 1) < 2^63: 2^k < 1.84e9)", bad.threshold, k);
    /* a tiny range (a coordinator's fed-round may carry any finite range > 0): the
     * largest k with n (range 2^k + 1) < 2^31, where lim / n / range overflowed to inf
     * and was cast to int before 2026-12-02 (UBSan; fuzz_fed_client) */
    static const double tiny[3] = {1e-300, 4.9e-324, 1e-200};
    for (int i = 0; i < 3; i++) {
        dd_secagg_cfg t = {.session = 1, .d = 10, .n = 2, .range = tiny[i]};
        int kt;
        CHECK_OK(dd_secagg_resolve(&t, &kt));
        CHECK(t.n * (ldexp(t.range, kt) + 1) < 0x1p31 && t.n * (ldexp(t.range, kt + 1) + 1) >= 0x1p31,
              "range %g: k %d is not the largest with n (range 2^k + 1) < 2^31", t.range, kt);
    }
    bad.n = 1;
    CHECK_ERR(dd_secagg_resolve(&bad, NULL), DD_ERR_ARG, "n (clients invited) must be in [2, 255]");
    dd_secagg_client *cc;
    dd_secagg_cfg ok = {.session = 1, .d = 10, .n = 5, .range = 1};
    CHECK_ERR(dd_secagg_client_new(&ok, 0, &cc), DD_ERR_ARG, "client id must be in [1, 255]");
    uint32_t dup[5] = {1, 2, 3, 2, 5};
    dd_secagg_server *ss;
    CHECK_ERR(dd_secagg_server_new(&ok, dup, &ss), DD_ERR_ARG, "client id 2 is invited twice");
    /* an update outside the range: refused, naming the coordinate, client state unchanged */
    {
        run_t q;
        run_init(&q, 5, 16, 32, 0, 903, 0);
        q.x[0][7] = 1.5f;
        CHECK_OK(dd_secagg_server_new(&q.cfg, q.ids, &q.srv));
        for (int i = 0; i < 5; i++) {
            CHECK_OK(dd_secagg_client_new(&q.cfg, q.ids[i], &q.cl[i]));
            CHECK_OK(dd_secagg_client_advertise(q.cl[i], &out, &ol));
            CHECK_OK(dd_secagg_server_receive(q.srv, q.ids[i], out, ol));
            free(out);
        }
        CHECK_OK(dd_secagg_server_close(q.srv));
        for (int i = 0; i < 5; i++) {
            CHECK_OK(dd_secagg_server_message(q.srv, q.ids[i], &in, &il));
            CHECK_OK(dd_secagg_client_share_keys(q.cl[i], in, il, &out, &ol));
            free(in);
            CHECK_OK(dd_secagg_server_receive(q.srv, q.ids[i], out, ol));
            free(out);
        }
        CHECK_OK(dd_secagg_server_close(q.srv));
        CHECK_OK(dd_secagg_server_message(q.srv, q.ids[0], &in, &il));
        CHECK_ERR(dd_secagg_client_masked_input(q.cl[0], in, il, q.x[0], &out, &ol), DD_ERR_RANGE,
                  "update coordinate 7 is 1.5");
        CHECK(dd_secagg_client_state(q.cl[0]) == DD_SECAGG_MASKED, "state unchanged");
        q.x[0][7] = NAN;
        CHECK_ERR(dd_secagg_client_masked_input(q.cl[0], in, il, q.x[0], &out, &ol), DD_ERR_RANGE, "is nan");
        q.x[0][7] = 0.5f;
        CHECK_OK(dd_secagg_client_masked_input(q.cl[0], in, il, q.x[0], &out, &ol));
        free(in), free(out);
        run_free(&q);
    }
}

/* ---------------------------------------------------------------- garbled messages */

typedef dd_status (*feed_fn)(void *ctx, const uint8_t *m, size_t len);

/* Feeds variants of a valid message: every truncation, one extension, every header byte
 * flipped, `flip_all`: bits 0, 3, 6 of every byte too, random garbage (`opaque`: never
 * a valid header with a random body of the exact length, which a server cannot tell from
 * a real key or masked value). Each must be refused
 * (returns the number of variants accepted, which the caller checks). */
static int garble(feed_fn feed, void *ctx, const uint8_t *m, size_t len, int flip_all, int opaque, uint64_t seed) {
    int accepted = 0;
    uint8_t *b = malloc(len + 64);
    for (size_t l = 0; l < len; l += (l < 64 ? 1 : len / 50 + 1)) {
        memcpy(b, m, l);
        accepted += feed(ctx, b, l) == DD_OK;
    }
    memcpy(b, m, len);
    b[len] = 0;
    accepted += feed(ctx, b, len + 1) == DD_OK;
    size_t nflip = flip_all ? len : 20;
    for (size_t p = 0; p < nflip; p++)
        for (int bit = 0; bit < 8; bit += flip_all ? 3 : 1) {
            memcpy(b, m, len);
            b[p] ^= (uint8_t)(1u << bit);
            accepted += feed(ctx, b, len) == DD_OK;
        }
    dd_rng g;
    dd_rng_seed(&g, seed);
    for (int k = 0; k < 200; k++) {
        size_t l = (size_t)dd_rng_below(&g, len + 64);
        for (size_t j = 0; j < l; j++) b[j] = (uint8_t)dd_rng_u64(&g);
        if (k % 2 && l >= 20) memcpy(b, m, 20); /* half with a valid header */
        if (k % 2 && l == len && opaque) l--;  /* a random body of the right length is a valid key or value */
        accepted += feed(ctx, b, l) == DD_OK;
    }
    free(b);
    return accepted;
}

typedef struct {
    dd_secagg_server *s;
    uint32_t from;
} srv_ctx;
static dd_status feed_server(void *ctx, const uint8_t *m, size_t len) {
    srv_ctx *c = ctx;
    dd_secagg_state before = dd_secagg_server_state(c->s);
    dd_status st = dd_secagg_server_receive(c->s, c->from, m, len);
    if (dd_secagg_server_state(c->s) != before) dd_t_fail++;
    return st;
}

typedef struct {
    dd_secagg_client *c;
    const float *x;
} cl_ctx;
static dd_status feed_client(void *ctx, const uint8_t *m, size_t len) {
    cl_ctx *c = ctx;
    uint8_t *out = NULL;
    size_t ol;
    dd_status st = dd_secagg_client_next(c->c, m, len, c->x, &out, &ol);
    if (st == DD_OK) free(out);
    return st;
}

/* A full run in which, before every valid message is delivered, garbled copies of it are
 * fed to its receiver: all refused (the server-side bodies it cannot check are kept out:
 * SHARES boxes and MASKED values are opaque to it), and the run still ends with the
 * exact sum, so no refusal changed any state. */
static void test_garbled(void) {
    run_t r;
    run_init(&r, 5, 40, 32, 0, 1200, 0);
    CHECK_OK(dd_secagg_server_new(&r.cfg, r.ids, &r.srv));
    for (int i = 0; i < 5; i++) CHECK_OK(dd_secagg_client_new(&r.cfg, r.ids[i], &r.cl[i]));
    int acc_srv = 0, acc_cl = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 5; i++) {
            uint8_t *in = NULL, *out = NULL;
            size_t il = 0, ol = 0;
            if (round > 0) {
                CHECK_OK(dd_secagg_server_message(r.srv, r.ids[i], &in, &il));
                cl_ctx cc = {r.cl[i], r.x[i]};
                /* ROUTED: every bit position class of every byte (boxes are authenticated);
                 * KEYS and SURVIVORS: header, lengths and garbage (a flipped public key of
                 * another client is a valid, different key) */
                acc_cl += garble(feed_client, &cc, in, il, round == 2, 0, (uint64_t)round * 10 + (uint64_t)i);
                CHECK(dd_secagg_client_state(r.cl[i]) == (dd_secagg_state)round, "client state after garbage");
            }
            dd_status st = dd_secagg_client_next(r.cl[i], in, il, r.x[i], &out, &ol);
            CHECK_OK(st);
            free(in);
            srv_ctx sc = {r.srv, r.ids[i]};
            acc_srv += garble(feed_server, &sc, out, ol, 0, 1, 100 + (uint64_t)round * 10 + (uint64_t)i);
            CHECK_OK(dd_secagg_server_receive(r.srv, r.ids[i], out, ol));
            free(out);
        }
        CHECK_OK(dd_secagg_server_close(r.srv));
    }
    CHECK(acc_srv == 0, "%d garbled messages accepted by the server", acc_srv);
    CHECK(acc_cl == 0, "%d garbled messages accepted by clients", acc_cl);
    float sum[40];
    CHECK_OK(dd_secagg_server_result(r.srv, sum, NULL));
    check_sum(&r, NULL, sum, "after garbage");
    run_free(&r);

    /* UNMASK with a wrong share: the reconstructed mask key of a dropped client does not
     * match its advertised key -> refused naming it; the round stays open */
    run_init(&r, 5, 8, 32, 0, 1300, 0);
    CHECK_OK(dd_secagg_server_new(&r.cfg, r.ids, &r.srv));
    for (int i = 0; i < 5; i++) CHECK_OK(dd_secagg_client_new(&r.cfg, r.ids[i], &r.cl[i]));
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 5; i++) {
            if (i == 4 && round >= 2) continue; /* client 14 drops after ShareKeys */
            uint8_t *in = NULL, *out = NULL;
            size_t il = 0, ol = 0;
            if (round > 0) CHECK_OK(dd_secagg_server_message(r.srv, r.ids[i], &in, &il));
            dd_status st = dd_secagg_client_next(r.cl[i], in, il, r.x[i], &out, &ol);
            CHECK_OK(st);
            free(in);
            if (round == 3 && i == 0) out[ol - 1] ^= 1; /* the last entry: client 14's mask-key share */
            CHECK_OK(dd_secagg_server_receive(r.srv, r.ids[i], out, ol));
            free(out);
        }
        if (round < 3) CHECK_OK(dd_secagg_server_close(r.srv));
    }
    /* t = 4 = responders, so the bad share is found by the key check */
    CHECK_ERR(dd_secagg_server_close(r.srv), DD_ERR_FORMAT, "client 14: the shares of its mask key");
    CHECK(dd_secagg_server_state(r.srv) == DD_SECAGG_UNMASK, "state unchanged");
    run_free(&r);

    /* a wrong share of a survivor's self-mask seed with 5 responders > t = 4: the first and
     * the last 4 responders reconstruct different seeds -> refused naming the survivor */
    run_init(&r, 5, 8, 32, 0, 1400, 0);
    CHECK_OK(dd_secagg_server_new(&r.cfg, r.ids, &r.srv));
    for (int i = 0; i < 5; i++) CHECK_OK(dd_secagg_client_new(&r.cfg, r.ids[i], &r.cl[i]));
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 5; i++) {
            uint8_t *in = NULL, *out = NULL;
            size_t il = 0, ol = 0;
            if (round > 0) CHECK_OK(dd_secagg_server_message(r.srv, r.ids[i], &in, &il));
            CHECK_OK(dd_secagg_client_next(r.cl[i], in, il, r.x[i], &out, &ol));
            free(in);
            if (round == 3 && i == 0) out[20 + 4 + 2 * 37 + 5] ^= 0x40; /* entry 2: client 8's b share */
            CHECK_OK(dd_secagg_server_receive(r.srv, r.ids[i], out, ol));
            free(out);
        }
        if (round < 3) CHECK_OK(dd_secagg_server_close(r.srv));
    }
    CHECK_ERR(dd_secagg_server_close(r.srv), DD_ERR_FORMAT, "client 8: the shares of its self-mask seed held by "
              "different clients disagree");
    CHECK(dd_secagg_server_state(r.srv) == DD_SECAGG_UNMASK, "state unchanged");
    run_free(&r);
}

/* ---------------------------------------------------------------- independence */

static double chi2_top4(const uint32_t *counts, double total) {
    double e = total / 16, s = 0;
    for (int b = 0; b < 16; b++) s += (counts[b] - e) * (counts[b] - e) / e;
    return s;
}

/* What the server receives from client 0 with update x = -range everywhere and with
 * x' = +range: the MASKED values' top 4 bits are uniform for both (chi-square, 15 degrees
 * of freedom, 0.1 % critical value 37.7) and the two samples are homogeneous (2 x 16
 * table, same critical value); the plain encoding fails the same test (the control). With
 * the same seed every other message of client 0 is byte for byte the same for x and x'. */
static void test_independence(void) {
    enum { D = 1000, DRAWS = 24 };
    uint32_t cnt[2][16] = {{0}};
    for (int draw = 0; draw < DRAWS; draw++)
        for (int which = 0; which < 2; which++) {
            run_t r;
            run_init(&r, 5, D, 32, 0, 5000 + 2000 * (uint64_t)which + (uint64_t)draw, 0); /* independent keys */
            r.keep = 1;
            for (int j = 0; j < D; j++) r.x[0][j] = which ? 1.0f : -1.0f;
            float sum[D];
            CHECK_OK(run_protocol(&r, NULL, sum, NULL));
            const uint8_t *v = r.masked[0] + 20;
            for (int j = 0; j < D; j++) cnt[which][v[4 * j + 3] >> 4]++;
            if (draw == 0 && which == 0) {
                /* the other messages: rerun with x' and compare */
                run_t q;
                run_init(&q, 5, D, 32, 0, 5000, 0);
                q.keep = 1;
                for (int j = 0; j < D; j++) q.x[0][j] = 1.0f;
                CHECK_OK(run_protocol(&q, NULL, sum, NULL));
                for (int k = 0; k < 3; k++)
                    CHECK(r.other_len[0][k] == q.other_len[0][k] &&
                              memcmp(r.other[0][k], q.other[0][k], r.other_len[0][k]) == 0,
                          "message %d of client 0 depends on its update", k);
                CHECK(memcmp(r.masked[0], q.masked[0], r.masked_len[0]) != 0, "masked inputs differ");
                run_free(&q);
            }
            run_free(&r);
        }
    double n = (double)D * DRAWS;
    double c0 = chi2_top4(cnt[0], n), c1 = chi2_top4(cnt[1], n), hom = 0;
    for (int b = 0; b < 16; b++) {
        double e = (cnt[0][b] + cnt[1][b]) / 2.0;
        if (e > 0) hom += (cnt[0][b] - e) * (cnt[0][b] - e) / e + (cnt[1][b] - e) * (cnt[1][b] - e) / e;
    }
    printf("independence: chi2 top 4 bits x = -1: %.1f, x = +1: %.1f, homogeneity: %.1f (15 dof, 0.1%% critical "
           "37.7)\n", c0, c1, hom);
    CHECK(c0 < 37.7 && c1 < 37.7, "masked values not uniform: %.1f %.1f", c0, c1);
    CHECK(hom < 37.7, "masked values for x and x' distinguishable: %.1f", hom);
    /* control: the unmasked encodings of x and x' (round(x 2^k) mod 2^32) fail it */
    dd_secagg_cfg c = {.session = 1, .d = D, .n = 5, .range = 1};
    int k;
    CHECK_OK(dd_secagg_resolve(&c, &k));
    uint32_t plain[16] = {0};
    for (int which = 0; which < 2; which++) {
        uint32_t e = (uint32_t)(int64_t)llround(ldexp(which ? 1.0 : -1.0, k));
        plain[e >> 28] += D * DRAWS / 2;
    }
    double cp = chi2_top4(plain, n);
    CHECK(cp > 1000, "control: plain encoding chi2 %.1f", cp);
}

/* ---------------------------------------------------------------- cost (printed) */

static void report_cost(void) {
    const size_t ds[] = {10000, 100000, 10000, 100000};
    for (int a = 0; a < 4; a++) {
        run_t r;
        int bits = a < 2 ? 32 : 64;
        run_init(&r, 8, ds[a], bits, 0, 77, 0);
        float *sum = malloc(ds[a] * sizeof *sum);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_OK(run_protocol(&r, NULL, sum, NULL));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("cost n 8, d %zu, ring 2^%d: client 0 sends %zu bytes, receives %zu (plain update %zu bytes): "
               "expansion %.4f up, %.4f up+down; whole protocol (8 clients + server, one thread) %.3f s\n",
               ds[a], bits, r.up[0], r.down[0], 4 * ds[a], (double)r.up[0] / (4.0 * ds[a]),
               (double)(r.up[0] + r.down[0]) / (4.0 * ds[a]), s);
        free(sum);
        run_free(&r);
    }
}

int main(void) {
    test_exact();
    test_dropouts();
    test_transitions();
    test_garbled();
    test_independence();
    report_cost();
    return dd_test_done("test_secagg");
}
