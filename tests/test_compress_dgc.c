/* Unit tests of Deep Gradient Compression (dgc in src/compress/sparse.c), one per part,
 * each of which fails when that part is missing:
 *   - momentum correction: at density 1 (dense, masking and clipping off) what is sent
 *     each step is the momentum SGD velocity u = m u + g (float32), bit for bit; with
 *     m = 0 it is g; at density 0.05 the sum sent plus the residual is the sum of u;
 *   - momentum factor masking: after an exchange u and the residual are 0 exactly at the
 *     sent indices and unchanged elsewhere; with masking off u is left as it was;
 *   - local clipping: this rank's contribution after prepare has norm <= clip / sqrt(p)
 *     and the same direction; under the limit or with clip = 0 it is unchanged;
 *   - warm-up: dd_compress_density_now() at epochs 0..4 (warmup 4, density 0.001) is
 *     0.25 (0.004)^(e/4), then 0.001, and the exchange sends ~k of that density;
 *   - accumulation: a coordinate with a small constant gradient is eventually sent with
 *     error feedback (its residual grows), never without.
 * Single-process communicator; the codec is driven by hand (dd_cx) where its momentum u
 * must be read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_impl.h"
#include "dd_test.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"

/* the codec under test, from the registry (compress_impl.h) */
static const dd_codec *dgc_codec(void) { return dd_codec_find("dgc"); }

static dd_comm *g_self;

static dd_compressor *make(const char *spec, dd_compress_cfg *cfg_out) {
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    dd_status s = dd_compress_parse(&cfg, spec);
    CHECK(s == DD_OK, "parse '%s': %s", spec, dd_last_error());
    dd_compressor *c = NULL;
    s = dd_compress_create(&cfg, &c);
    CHECK(s == DD_OK && c, "create '%s': %s", spec, dd_last_error());
    if (cfg_out) *cfg_out = cfg;
    return c;
}

static void fill_normal(float *x, size_t n, uint64_t seed) {
    dd_rng r;
    dd_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)dd_rng_normal(&r);
}

static void exch(dd_compressor *c, uint64_t step, int epoch, float *x, size_t n) {
    dd_compress_begin_step(c, step, epoch, 0.0);
    CHECK_OK(dd_compress_exchange(c, g_self, DD_ALLREDUCE_RING, x, 0, n));
}

/* A hand-driven dgc exchange (prepare, + residual, exchange, finish, residual update),
 * as compress.c runs it, with the momentum u and the residual e in the caller's arrays. */
typedef struct {
    dd_compress_cfg cfg;
    dd_compressor *owner;
    dd_cbucket b;
    float *e, *in, *mine, *out;
    size_t n;
} hand;

static void hand_init(hand *h, const char *spec, size_t n) {
    memset(h, 0, sizeof *h);
    h->owner = make(spec, &h->cfg);
    h->n = n;
    h->b.n = n;
    h->b.npriv = n;
    h->b.priv = calloc(n, sizeof(float));
    h->e = calloc(n, sizeof(float));
    h->in = calloc(n, sizeof(float));
    h->mine = calloc(n, sizeof(float));
    h->out = calloc(n, sizeof(float));
}

static void hand_free(hand *h) {
    free(h->b.priv);
    free(h->e);
    free(h->in);
    free(h->mine);
    free(h->out);
    dd_compress_destroy(&h->owner);
}

static dd_cx hand_cx(hand *h, int size, uint64_t step, double density) {
    dd_cx x;
    memset(&x, 0, sizeof x);
    x.cfg = &h->cfg;
    x.comm = g_self;
    x.algo = DD_ALLREDUCE_RING;
    x.rank = 0;
    x.size = size;
    x.step = step;
    x.density = density;
    x.b = &h->b;
    x.owner = h->owner;
    return x;
}

static void test_momentum_correction(void) {
    const size_t n = 500;
    float *g = malloc(n * sizeof *g), *x = malloc(n * sizeof *x), *u = calloc(n, sizeof *u);
    const double ms[] = {0.9, 0.0};
    for (int mi = 0; mi < 2; mi++) {
        char spec[128];
        snprintf(spec, sizeof spec, "dgc,density=1,warmup=0,masking=0,clip=0,momentum=%g", ms[mi]);
        dd_compressor *c = make(spec, NULL);
        memset(u, 0, n * sizeof *u);
        const float m = (float)ms[mi];
        size_t bad = 0, bad_g = 0;
        for (int s = 0; s < 8; s++) {
            fill_normal(g, n, 100 + (uint64_t)s);
            for (size_t i = 0; i < n; i++) u[i] = m * u[i] + g[i];
            memcpy(x, g, n * sizeof *x);
            exch(c, (uint64_t)s, 0, x, n);
            for (size_t i = 0; i < n; i++) {
                bad += x[i] != u[i];
                bad_g += x[i] != g[i];
            }
        }
        CHECK(bad == 0, "dgc density 1, m = %g: %zu elements differ from the velocity u = m u + g", ms[mi], bad);
        if (mi == 0) CHECK(bad_g > 0, "with m = 0.9 what is sent must differ from g");
        if (mi == 1) CHECK(bad_g == 0, "with m = 0 what is sent must be g");
        dd_compress_destroy(&c);
    }
    /* sparse: what was sent over the steps plus the residual = the sum of u (masking off,
     * so u is the plain velocity) */
    {
        dd_compressor *c = make("dgc,density=0.05,warmup=0,masking=0,clip=0,momentum=0.9", NULL);
        double *sent = calloc(n, sizeof *sent), *usum = calloc(n, sizeof *usum);
        memset(u, 0, n * sizeof *u);
        for (int s = 0; s < 30; s++) {
            fill_normal(g, n, 300 + (uint64_t)s);
            for (size_t i = 0; i < n; i++) {
                u[i] = 0.9f * u[i] + g[i];
                usum[i] += u[i];
            }
            memcpy(x, g, n * sizeof *x);
            exch(c, (uint64_t)s, 0, x, n);
            for (size_t i = 0; i < n; i++) sent[i] += x[i];
        }
        size_t rn = 0;
        const float *e = dd_compress_residual(c, &rn);
        double worst = 0;
        for (size_t i = 0; e && i < n; i++) {
            double d = fabs(sent[i] + e[i] - usum[i]) / (1 + fabs(usum[i]));
            if (d > worst) worst = d;
        }
        CHECK(e && rn == n && worst < 1e-4, "sum sent + residual vs sum of u: worst rel %.3g", worst);
        free(sent);
        free(usum);
        dd_compress_destroy(&c);
    }
    free(g);
    free(x);
    free(u);
}

static void test_masking(void) {
    const size_t n = 2000;
    float *g = malloc(n * sizeof *g), *u_before = malloc(n * sizeof *u_before),
          *e_before = malloc(n * sizeof *e_before);
    for (int masking = 1; masking >= 0; masking--) {
        hand h;
        hand_init(&h, masking ? "dgc,density=0.01,momentum=0.9" : "dgc,density=0.01,momentum=0.9,masking=0", n);
        size_t bad_u = 0, bad_e = 0, kept_u_nonzero = 0, sent_total = 0;
        for (int s = 0; s < 6; s++) {
            fill_normal(g, n, 900 + (uint64_t)s);
            dd_cx x = hand_cx(&h, 1, (uint64_t)s, 0.01);
            CHECK_OK(dgc_codec()->prepare(&x, g, n));
            memcpy(u_before, h.b.priv, n * sizeof(float));
            for (size_t i = 0; i < n; i++) h.in[i] = g[i] + h.e[i];
            memcpy(e_before, h.e, n * sizeof(float));
            CHECK_OK(dgc_codec()->exchange(&x, h.in, n, h.mine, h.out));
            dgc_codec()->finish(&x, h.in, h.mine, n);
            for (size_t i = 0; i < n; i++) h.e[i] = h.in[i] - h.mine[i];
            const float *u = h.b.priv;
            for (size_t i = 0; i < n; i++) {
                int sent = h.out[i] != 0.0f; /* one rank: out = mine; inputs are never 0 */
                sent_total += (size_t)sent;
                if (sent) {
                    if (masking ? u[i] != 0.0f : u[i] != u_before[i]) bad_u++;
                    if (h.e[i] != 0.0f) bad_e++;
                    kept_u_nonzero += u[i] != 0.0f;
                } else {
                    if (u[i] != u_before[i]) bad_u++;
                    if (h.e[i] != h.in[i]) bad_e++;
                }
            }
        }
        CHECK(sent_total > 0, "something must be sent");
        CHECK(bad_u == 0, "masking=%d: %zu momentum entries wrong", masking, bad_u);
        CHECK(bad_e == 0, "masking=%d: %zu residual entries wrong", masking, bad_e);
        if (!masking) CHECK(kept_u_nonzero > 0, "without masking u stays nonzero at sent indices");
        hand_free(&h);
    }
    /* through the public API: the residual is 0 exactly where sent */
    {
        dd_compressor *c = make("dgc,density=0.01,warmup=0", NULL);
        size_t bad = 0;
        for (int s = 0; s < 4; s++) {
            fill_normal(g, n, 40 + (uint64_t)s);
            exch(c, (uint64_t)s, 0, g, n);
            size_t rn = 0;
            const float *e = dd_compress_residual(c, &rn);
            for (size_t i = 0; e && i < n; i++)
                if (g[i] != 0.0f && e[i] != 0.0f) bad++;
        }
        CHECK(bad == 0, "public API: residual nonzero at %zu sent indices", bad);
        dd_compress_destroy(&c);
    }
    free(g);
    free(u_before);
    free(e_before);
}

static double norm2(const float *v, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

static void test_clipping(void) {
    const size_t n = 1000;
    float *g = malloc(n * sizeof *g), *g0 = malloc(n * sizeof *g0);
    const int sizes[] = {1, 4};
    for (int si = 0; si < 2; si++) {
        hand h;
        hand_init(&h, "dgc,density=0.01,momentum=0,clip=2", n);
        fill_normal(g0, n, 7); /* norm ~ 31.6 */
        memcpy(g, g0, n * sizeof *g);
        dd_cx x = hand_cx(&h, sizes[si], 0, 0.01);
        CHECK_OK(dgc_codec()->prepare(&x, g, n));
        double lim = 2.0 / sqrt((double)sizes[si]), nn = norm2(g, n), n0 = norm2(g0, n);
        CHECK(nn <= lim * (1 + 1e-6) && nn >= lim * (1 - 1e-6), "p = %d: clipped norm %.9g, limit %.9g", sizes[si], nn,
              lim);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)g[i] - (double)g0[i] * lim / n0);
            if (d > worst) worst = d;
        }
        CHECK(worst < 1e-6 * lim, "p = %d: direction changed by %.3g", sizes[si], worst);
        /* under the limit: unchanged */
        for (size_t i = 0; i < n; i++) g[i] = g0[i] * 1e-3f;
        float *gs = malloc(n * sizeof *gs);
        memcpy(gs, g, n * sizeof *gs);
        memset(h.b.priv, 0, n * sizeof(float));
        CHECK_OK(dgc_codec()->prepare(&x, g, n));
        CHECK(memcmp(g, gs, n * sizeof *g) == 0, "p = %d: a small gradient must not be clipped", sizes[si]);
        free(gs);
        hand_free(&h);
    }
    /* off: unchanged */
    {
        hand h;
        hand_init(&h, "dgc,density=0.01,momentum=0,clip=0", n);
        fill_normal(g0, n, 7);
        memcpy(g, g0, n * sizeof *g);
        dd_cx x = hand_cx(&h, 4, 0, 0.01);
        CHECK_OK(dgc_codec()->prepare(&x, g, n));
        CHECK(memcmp(g, g0, n * sizeof *g) == 0, "clip = 0 must leave g unchanged");
        hand_free(&h);
    }
    /* public API, one rank, density 1: what is sent is the clipped gradient */
    {
        dd_compressor *c = make("dgc,density=1,warmup=0,momentum=0,clip=0.5", NULL);
        fill_normal(g0, n, 8);
        memcpy(g, g0, n * sizeof *g);
        exch(c, 0, 0, g, n);
        double nn = norm2(g, n);
        CHECK(nn <= 0.5 * (1 + 1e-6) && nn > 0.49, "public API: sent norm %.9g, clip 0.5", nn);
        dd_compress_destroy(&c);
    }
    free(g);
    free(g0);
}

static void test_warmup(void) {
    dd_compressor *c = make("dgc,density=0.001,warmup=4", NULL);
    for (int e = 0; e <= 6; e++) {
        dd_compress_begin_step(c, (uint64_t)e * 10, e, 0.0);
        double want = e < 4 ? 0.25 * pow(0.004, e / 4.0) : 0.001;
        CHECK_NEAR(dd_compress_density_now(c), want, 1e-12 * want);
    }
    /* the fraction of an epoch does not move the density inside it (whole epochs) */
    dd_compress_begin_step(c, 15, 1, 0.5);
    CHECK_NEAR(dd_compress_density_now(c), 0.25 * pow(0.004, 0.25), 1e-12);
    /* the expected values, spelled out: 25 %, 6.29 %, 1.58 %, 0.40 %, 0.1 % */
    const double table[] = {0.25, 0.0628716714, 0.0158113883, 0.0039763536, 0.001};
    for (int e = 0; e <= 4; e++) {
        dd_compress_begin_step(c, (uint64_t)e, e, 0.0);
        CHECK_NEAR(dd_compress_density_now(c), table[e], 1e-9);
    }
    /* the exchange uses it: epoch 0 sends ~25 % of the bucket */
    const size_t n = 20000;
    float *g = malloc(n * sizeof *g);
    fill_normal(g, n, 3);
    exch(c, 0, 0, g, n);
    dd_compress_stats st;
    dd_compress_stats_get(c, &st);
    double pairs = (double)st.payload_bytes / 8.0;
    CHECK(pairs >= 0.5 * 5000 && pairs <= 2 * 5000, "epoch 0: %.0f pairs sent, k = 5000", pairs);
    dd_compress_stats_reset(c);
    fill_normal(g, n, 4);
    exch(c, 100, 5, g, n);
    dd_compress_stats_get(c, &st);
    pairs = (double)st.payload_bytes / 8.0;
    CHECK(pairs >= 10 && pairs <= 40, "epoch 5: %.0f pairs sent, k = 20", pairs);
    free(g);
    dd_compress_destroy(&c);
    /* warmup 0: the final density at once; topk/randk never warm up; others report 1 */
    dd_compressor *d = make("dgc,density=0.001,warmup=0", NULL);
    dd_compress_begin_step(d, 0, 0, 0.0);
    CHECK_NEAR(dd_compress_density_now(d), 0.001, 1e-15);
    dd_compress_destroy(&d);
    d = make("topk,density=0.001", NULL);
    dd_compress_begin_step(d, 0, 0, 0.0);
    CHECK_NEAR(dd_compress_density_now(d), 0.001, 1e-15);
    dd_compress_destroy(&d);
    d = make("none", NULL);
    CHECK_NEAR(dd_compress_density_now(d), 1.0, 0);
    dd_compress_destroy(&d);
}

/* 10 coordinates with gradient 1 each step fill k = 10; coordinate 500 has gradient 0.001.
 * Its u tends to 0.01 < 1: sent only once the accumulated residual v exceeds 1 (about
 * step 109 with m = 0.9); without error feedback never. sample=1: the exact threshold,
 * so the test is deterministic. */
static void test_accumulation(void) {
    const size_t n = 1000, target = 500;
    float *g = malloc(n * sizeof *g);
    for (int ef = 1; ef >= 0; ef--) {
        char spec[128];
        snprintf(spec, sizeof spec, "dgc,density=0.01,warmup=0,momentum=0.9,sample=1,ef=%d", ef);
        dd_compressor *c = make(spec, NULL);
        int first = -1;
        float first_val = 0;
        for (int s = 0; s < 300 && first < 0; s++) {
            memset(g, 0, n * sizeof *g);
            for (size_t i = 0; i < 10; i++) g[i] = 1.0f;
            g[target] = 0.001f;
            exch(c, (uint64_t)s, 0, g, n);
            if (g[target] != 0.0f) {
                first = s;
                first_val = g[target];
            }
        }
        if (ef) {
            CHECK(first > 50 && first < 200, "with error feedback the small coordinate must be sent (step %d)", first);
            CHECK(first_val > 1.0f, "it is sent with its accumulated value %g > 1", first_val);
            size_t rn = 0;
            const float *e = dd_compress_residual(c, &rn);
            CHECK(e && e[target] == 0.0f, "residual cleared at the sent coordinate");
            printf("accumulation: 0.001 per step sent at step %d with %.4f\n", first, first_val);
        } else {
            CHECK(first < 0, "without error feedback the small coordinate is never sent (step %d)", first);
        }
        dd_compress_destroy(&c);
    }
    free(g);
}

/* Too sparse to train: dgc at its default density 0.001 on a 1,911-value gradient (the
 * gru's) sends 2 values a step, and the first exchange warns once naming both numbers and
 * a density that sends 8; density 0.01 (20 values) and a 100,000-value bucket at 0.001
 * (100 values) do not warn. */
static char g_warned[1024];
static int g_nwarn;
static void capture(dd_log_level level, const char *msg, void *user) {
    (void)user;
    if (level != DD_LOG_WARN) return;
    g_nwarn++;
    snprintf(g_warned, sizeof g_warned, "%s", msg);
}
static void test_too_sparse_warning(void) {
    static float x[100000];
    const struct {
        const char *spec;
        size_t n;
        int warns;
    } cases[] = {{"dgc", 1911, 1}, {"topk,density=0.002", 1911, 1}, {"dgc,density=0.01", 1911, 0}, {"dgc", 100000, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g_nwarn = 0;
        g_warned[0] = '\0';
        dd_log_set(capture, NULL, DD_LOG_WARN);
        dd_compressor *c = make(cases[i].spec, NULL);
        fill_normal(x, cases[i].n, 3 + i);
        if (c) {
            exch(c, 1, 0, x, cases[i].n);
            exch(c, 2, 0, x, cases[i].n);
        }
        dd_log_set(NULL, NULL, DD_LOG_WARN);
        CHECK(g_nwarn == cases[i].warns, "%s on %zu values: %d warnings, want %d (%s)", cases[i].spec, cases[i].n,
              g_nwarn, cases[i].warns, g_warned);
        dd_compress_destroy(&c);
    }
    /* the message of the first case, again, to check its numbers */
    dd_log_set(capture, NULL, DD_LOG_WARN);
    dd_compressor *c = make("dgc", NULL);
    fill_normal(x, 1911, 3);
    if (c) exch(c, 1, 0, x, 1911);
    dd_log_set(NULL, NULL, DD_LOG_WARN);
    CHECK(strstr(g_warned, "sends 2 of the 1911 gradient values") && strstr(g_warned, "once every 956 steps") &&
              strstr(g_warned, "at least 0.005"),
          "warning text: %s", g_warned);
    dd_compress_destroy(&c);
}

int main(void) {
    CHECK_OK(dd_comm_self(&g_self));
    test_too_sparse_warning();
    double t0 = dd_now();
    test_momentum_correction();
    test_masking();
    test_clipping();
    test_warmup();
    test_accumulation();
    printf("test_compress_dgc: %.2f s\n", dd_now() - t0);
    dd_comm_free(&g_self);
    return dd_test_done("test_compress_dgc");
}
