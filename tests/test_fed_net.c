/* Federated averaging's protocol and local pieces (fednet.h): every payload encoded and
 * decoded back field for field; every strict refusal of the decoders (truncated,
 * trailing bytes, wrong vector length, out-of-range fields, non-finite weights); the
 * fixed sizes the message audit relies on; the algorithms' gradient terms and SCAFFOLD's
 * control variate, and the server optimisers, against hand-computed values; the
 * algorithm registry. */
#include "dd_test.h"
#include "distdpd/core.h"
#include "distdpd/fednet.h"

static float wv[3] = {1.0f, -2.0f, 0.5f}, cv[3] = {0.25f, 0.0f, -1.0f};

static void test_hello_welcome(void) {
    dd_nbuf b = {0};
    dd_fed_hello h = {.proto = DD_FED_PROTO, .samples = 3600}, h2;
    dd_fed_enc_hello(&b, &h);
    CHECK(b.n == 12, "hello is %zu bytes", b.n);
    CHECK_OK(dd_fed_dec_hello(b.p, b.n, &h2));
    CHECK(h2.proto == DD_FED_PROTO && h2.samples == 3600, "hello round trip");
    CHECK_ERR(dd_fed_dec_hello(b.p, b.n - 1, &h2), DD_ERR_FORMAT, "fed-hello: truncated");
    uint8_t longer[13] = {0};
    memcpy(longer, b.p, 12);
    CHECK_ERR(dd_fed_dec_hello(longer, 13, &h2), DD_ERR_FORMAT, "1 trailing bytes");
    h.proto = 7;
    dd_fed_enc_hello(&b, &h);
    CHECK_ERR(dd_fed_dec_hello(b.p, b.n, &h2), DD_ERR_FORMAT, "protocol version 7");
    h.proto = DD_FED_PROTO;
    h.samples = 0;
    dd_fed_enc_hello(&b, &h);
    CHECK_ERR(dd_fed_dec_hello(b.p, b.n, &h2), DD_ERR_FORMAT, "samples 0");

    char json[] = "{\"model\": \"gru\",\n \"lr\": 0.005}";
    dd_fed_welcome w = {.index = 3, .nparams = 336, .cfg_json = json}, w2;
    dd_fed_enc_welcome(&b, &w);
    CHECK_OK(dd_fed_dec_welcome(b.p, b.n, &w2));
    CHECK(w2.index == 3 && w2.nparams == 336 && w2.cfg_json && strcmp(w2.cfg_json, json) == 0, "welcome round trip");
    dd_fed_welcome_free(&w2);
    json[3] = 0x01; /* a control byte in the configuration */
    dd_fed_enc_welcome(&b, &w);
    CHECK_ERR(dd_fed_dec_welcome(b.p, b.n, &w2), DD_ERR_FORMAT, "not printable text");
    json[3] = 'o';
    w.index = DD_FED_MAX_CLIENTS;
    dd_fed_enc_welcome(&b, &w);
    CHECK_ERR(dd_fed_dec_welcome(b.p, b.n, &w2), DD_ERR_FORMAT, "fed-welcome: index");
    dd_nbuf_free(&b);
}

static void test_round(void) {
    dd_nbuf b = {0};
    dd_fed_round r = {.round = 5, .algo = 2, .local_kind = DD_FED_LOCAL_STEPS, .local_n = 10, .mu = 0.1, .dp_clip = 0.5,
                      .nparams = 3},
                 r2;
    dd_fed_enc_round(&b, &r, wv, cv);
    CHECK(b.n == 39 + 2 * 3 * 4, "round is %zu bytes", b.n);
    CHECK_OK(dd_fed_dec_round(b.p, b.n, 3, 3, &r2));
    float w[3], c[3];
    memcpy(w, r2.w, sizeof w);
    memcpy(c, r2.c, sizeof c);
    CHECK(r2.round == 5 && r2.algo == 2 && r2.local_n == 10 && r2.mu == 0.1 && r2.dp_clip == 0.5, "round fields");
    CHECK(memcmp(w, wv, sizeof w) == 0 && memcmp(c, cv, sizeof c) == 0, "round vectors");
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 4, 3, &r2), DD_ERR_FORMAT, "nparams 3 but the model has 4 parameters");
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 2, &r2), DD_ERR_FORMAT, "algorithm 2 outside [0, 2)");
    CHECK_ERR(dd_fed_dec_round(b.p, b.n - 4, 3, 3, &r2), DD_ERR_FORMAT, "truncated");
    dd_fed_round x = r;
    x.round = 0;
    dd_fed_enc_round(&b, &x, wv, NULL);
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 3, &r2), DD_ERR_FORMAT, "round 0");
    x = r;
    x.local_kind = 2;
    dd_fed_enc_round(&b, &x, wv, NULL);
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 3, &r2), DD_ERR_FORMAT, "local kind 2");
    x = r;
    x.local_n = 0;
    dd_fed_enc_round(&b, &x, wv, NULL);
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 3, &r2), DD_ERR_FORMAT, "local count 0");
    x = r;
    x.mu = NAN;
    dd_fed_enc_round(&b, &x, wv, NULL);
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 3, &r2), DD_ERR_FORMAT, "mu nan");
    x = r;
    x.dp_clip = -1;
    dd_fed_enc_round(&b, &x, wv, NULL);
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 3, &r2), DD_ERR_FORMAT, "dp_clip -1");
    float inf3[3] = {0, INFINITY, 0};
    dd_fed_enc_round(&b, &r, inf3, NULL);
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 3, &r2), DD_ERR_FORMAT, "global weights are not all finite");
    dd_fed_enc_round(&b, &r, wv, NULL);
    CHECK_OK(dd_fed_dec_round(b.p, b.n, 3, 3, &r2));
    CHECK(r2.c == NULL, "no control variate");
    b.p[31] = 5; /* the low byte of nparams: 5 floats announced, 3 sent */
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 0, 3, &r2), DD_ERR_FORMAT, "fed-round: truncated");
    b.p[31] = 3;
    b.p[30] = 4; /* the flags */
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 0, 3, &r2), DD_ERR_FORMAT, "flags 0x04");
    b.p[30] = 2; /* secure, without its block */
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 0, 3, &r2), DD_ERR_FORMAT, "fed-round: truncated");
    x = r;
    x.secure = 1;
    x.sa_n = 4;
    x.sa_threshold = 3;
    x.sa_ring = 32;
    x.sa_range = 2.5;
    dd_fed_enc_round(&b, &x, wv, NULL);
    CHECK(b.n == 39 + 12 + 20, "secure round is %zu bytes", b.n);
    CHECK_OK(dd_fed_dec_round(b.p, b.n, 3, 3, &r2));
    CHECK(r2.secure && r2.sa_n == 4 && r2.sa_threshold == 3 && r2.sa_ring == 32 && r2.sa_range == 2.5, "secure fields");
    x.sa_ring = 16;
    dd_fed_enc_round(&b, &x, wv, NULL);
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 3, &r2), DD_ERR_FORMAT, "ring of 16 bits");
    x.sa_ring = 32;
    x.sa_n = 1;
    x.sa_threshold = 1;
    dd_fed_enc_round(&b, &x, wv, NULL);
    CHECK_ERR(dd_fed_dec_round(b.p, b.n, 3, 3, &r2), DD_ERR_FORMAT, "secure benches 1");
    dd_nbuf_free(&b);
}

static void test_update_eval(void) {
    dd_nbuf b = {0};
    dd_fed_update u = {.round = 2, .frames = 3551, .loss = 0.25, .norm = NAN, .nparams = 3}, u2;
    float nanv[3] = {NAN, 1, 2};
    dd_fed_enc_update(&b, &u, nanv, NULL);
    CHECK(b.n == dd_fed_update_bytes(3, 0) && b.n == 41 + 12, "update is %zu bytes", b.n);
    CHECK_OK(dd_fed_dec_update(b.p, b.n, 3, 0, &u2)); /* a NaN update is the aggregation's business */
    CHECK(u2.round == 2 && u2.frames == 3551 && u2.loss == 0.25 && isnan(u2.norm) && u2.dc == NULL, "update fields");
    CHECK_ERR(dd_fed_dec_update(b.p, b.n, 3, 1, &u2), DD_ERR_FORMAT, "no control-variate delta (the algorithm needs one)");
    CHECK_ERR(dd_fed_dec_update(b.p, b.n, 2, 0, &u2), DD_ERR_FORMAT, "nparams 3 but the model has 2");
    CHECK_ERR(dd_fed_dec_update(b.p, 20, 3, 0, &u2), DD_ERR_FORMAT, "fed-update: truncated");
    dd_fed_enc_update(&b, &u, wv, cv);
    CHECK(b.n == dd_fed_update_bytes(3, 1), "update with dc is %zu bytes", b.n);
    CHECK_OK(dd_fed_dec_update(b.p, b.n, 3, 1, &u2));
    float dc[3];
    memcpy(dc, u2.dc, sizeof dc);
    CHECK(memcmp(dc, cv, sizeof dc) == 0, "dc round trip");
    CHECK_ERR(dd_fed_dec_update(b.p, b.n, 3, 0, &u2), DD_ERR_FORMAT, "a control-variate delta (the algorithm takes no");
    u.frames = 0;
    dd_fed_enc_update(&b, &u, wv, NULL);
    CHECK_ERR(dd_fed_dec_update(b.p, b.n, 3, 0, &u2), DD_ERR_FORMAT, "frames 0");

    dd_fed_eval e = {.round = 4, .nparams = 3}, e2;
    dd_fed_enc_eval(&b, &e, wv);
    CHECK(b.n == 16 + 12, "eval is %zu bytes", b.n);
    CHECK_OK(dd_fed_dec_eval(b.p, b.n, 3, &e2));
    CHECK(e2.round == 4 && memcmp(e2.w, wv, 12) == 0, "eval round trip");
    dd_fed_enc_eval(&b, &e, nanv);
    CHECK_ERR(dd_fed_dec_eval(b.p, b.n, 3, &e2), DD_ERR_FORMAT, "weights are not all finite");

    dd_fed_eval_rep r = {.round = 4, .err = 1.5, .ref = 100, .samples = 1200}, r2;
    dd_fed_enc_eval_rep(&b, &r);
    CHECK(b.n == dd_fed_eval_rep_bytes() && b.n == 32, "eval reply is %zu bytes", b.n);
    CHECK_OK(dd_fed_dec_eval_rep(b.p, b.n, &r2));
    CHECK(r2.round == 4 && r2.err == 1.5 && r2.ref == 100 && r2.samples == 1200, "eval reply fields");
    r.err = -1;
    dd_fed_enc_eval_rep(&b, &r);
    CHECK_ERR(dd_fed_dec_eval_rep(b.p, b.n, &r2), DD_ERR_FORMAT, "error sum -1");
    r.err = 1;
    r.ref = 0;
    dd_fed_enc_eval_rep(&b, &r);
    CHECK_ERR(dd_fed_dec_eval_rep(b.p, b.n, &r2), DD_ERR_FORMAT, "reference energy 0");
    dd_nbuf_free(&b);
}

static void test_algos(void) {
    int n;
    const dd_fed_algo *const *a = dd_fed_algos(&n);
    CHECK(n == 3 && a[n] == NULL, "%d algorithms", n);
    CHECK(dd_fed_algo_find("fedavg") == 0 && dd_fed_algo_find("scaffold") == 2, "lookup");
    CHECK(dd_fed_algo_find("fedsgd") == -1, "unknown");
    CHECK(strstr(dd_last_error(), "valid: fedavg, fedprox, scaffold") != NULL, "%s", dd_last_error());
    CHECK(dd_fed_algo_fedavg.grad == NULL && !dd_fed_algo_fedavg.control, "fedavg adds nothing");
    /* fedprox: g += mu (w - w0) */
    float w0[2] = {1, 1}, w[2] = {3, 4}, g[2] = {1, 2};
    dd_fed_local L = {.n = 2, .w0 = w0, .mu = 0.5, .lr = 0.1};
    dd_fed_algo_fedprox.grad(&L, w, g);
    CHECK(g[0] == 2.0f && g[1] == 3.5f, "fedprox gradient %g %g", g[0], g[1]);
    /* scaffold: g += c - ci; ci+ = ci - c + (w0 - w) / (K lr) */
    float c[2] = {0.3f, 0}, ci[2] = {0.1f, 0.5f}, cn[2];
    L.c = c;
    L.ci = ci;
    g[0] = 1;
    g[1] = 2;
    dd_fed_algo_scaffold.grad(&L, w, g);
    CHECK_NEAR(g[0], 1.2, 1e-6);
    CHECK_NEAR(g[1], 1.5, 1e-6);
    float ws[2] = {0.5f, 2.0f};
    L.steps = 5;
    dd_fed_algo_scaffold.control_end(&L, ws, cn);
    CHECK_NEAR(cn[0], 0.1 - 0.3 + 0.5 / 0.5, 1e-6);
    CHECK_NEAR(cn[1], 0.5 - 0 + (1 - 2.0) / 0.5, 1e-6);
}

static void test_sopt(void) {
    dd_fed_sopt *s = NULL;
    float w[1], d[1] = {2};
    dd_fed_sopt_cfg cfg = {.kind = 0, .lr = 0.5, .momentum = 0.5, .beta2 = 0.99, .eps = 1e-3};
    CHECK_OK(dd_fed_sopt_create(&cfg, 1, &s));
    w[0] = 1;
    dd_fed_sopt_step(s, w, d);
    CHECK_NEAR(w[0], 2.0, 1e-7);
    dd_fed_sopt_destroy(&s);
    cfg.kind = 1; /* FedAvgM: v = b v + d, w += lr v */
    cfg.lr = 1;
    CHECK_OK(dd_fed_sopt_create(&cfg, 1, &s));
    w[0] = 1;
    dd_fed_sopt_step(s, w, d);
    CHECK_NEAR(w[0], 3.0, 1e-7);
    dd_fed_sopt_step(s, w, d);
    CHECK_NEAR(w[0], 6.0, 1e-6);
    dd_fed_sopt_destroy(&s);
    cfg.kind = 2; /* FedAdam: m = 0.2, v = 0.04, w += 0.1 * 0.2 / (0.2 + 1e-3) */
    cfg.lr = 0.1;
    cfg.momentum = 0.9;
    CHECK_OK(dd_fed_sopt_create(&cfg, 1, &s));
    w[0] = 1;
    dd_fed_sopt_step(s, w, d);
    CHECK_NEAR(w[0], 1.0 + 0.1 * 0.2 / (0.2 + 1e-3), 1e-6);
    dd_fed_sopt_destroy(&s);
    cfg.lr = 0;
    CHECK_ERR(dd_fed_sopt_create(&cfg, 1, &s), DD_ERR_ARG, "lr 0 must be > 0");
    CHECK(s == NULL, "nothing created");
    CHECK(strcmp(dd_fed_sopt_names[2], "adam") == 0 && dd_fed_sopt_names[3] == NULL, "names");
}

static void test_types(void) {
    CHECK(strcmp(dd_msg_type_name(DD_MSG_FED_UPDATE), "fed-update") == 0, "type name");
    for (int t = DD_MSG_FED_HELLO; t <= DD_MSG_FED_SECAGG; t++) CHECK(dd_msg_type_known(t), "type %d known", t);
    CHECK(!dd_msg_type_known(48) && !dd_msg_type_known(DD_NET_MAX_TYPE), "unknown types");
}

int main(void) {
    test_hello_welcome();
    test_round();
    test_update_eval();
    test_algos();
    test_sopt();
    test_types();
    return dd_test_done("test_fed_net");
}
