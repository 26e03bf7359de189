/* Unit tests of the sparsifying codecs (src/compress/sparse.c) on the single-process
 * communicator, through the public API (dd_compress_create + dd_compress_exchange) and,
 * for the pair allgather, a hand-built dd_cx:
 *   - exact topk selects exactly the k largest |x| (ties to the lower index) against a
 *     full-sort reference, for many (n, density), values with heavy ties;
 *   - sampled topk: count within [k/2, 2k] on Gaussian data, the mean count near k, every
 *     selected |x| >= every unselected one, fallback to exact k under heavy ties;
 *   - randk: the same indices for two compressors with the same seed and step, different
 *     for other steps and seeds, exactly k per step, each index chosen ~k/n of the time;
 *   - error feedback: residual == in - mine exactly, step after step;
 *   - accounting: payload bytes 6k (topk; 8k beyond 65536 elements), 4k (randk), 4n (density 1), ratio;
 *   - pair allgather at size 1: the scatter of the pairs, argument errors.
 * Prints the selection time of 1M floats, exact vs sampled. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_impl.h"
#include "dd_test.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"

static dd_comm *g_self;

static dd_compressor *make(const char *spec) {
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    dd_status s = dd_compress_parse(&cfg, spec);
    CHECK(s == DD_OK, "parse '%s': %s", spec, dd_last_error());
    dd_compressor *c = NULL;
    s = dd_compress_create(&cfg, &c);
    CHECK(s == DD_OK && c, "create '%s': %s", spec, dd_last_error());
    return c;
}

static size_t kof(double d, size_t n) {
    double t = ceil(d * (double)n * (1.0 - 4.0 * 2.220446049250313e-16));
    if (t < 1) t = 1;
    if (t > (double)n) t = (double)n;
    return (size_t)t;
}

/* full-sort reference: order of indices by (|x| descending, index ascending) */
static const float *g_ref_x;
static int cmp_mag(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    float u = fabsf(g_ref_x[i]), v = fabsf(g_ref_x[j]);
    if (u > v) return -1;
    if (u < v) return 1;
    return i < j ? -1 : (i > j);
}

/* values with many ties: +-(1..12)/4, never 0 */
static void fill_ties(float *x, size_t n, uint64_t seed) {
    dd_rng r;
    dd_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        float v = (float)(1 + dd_rng_below(&r, 12)) / 4.0f;
        x[i] = dd_rng_below(&r, 2) ? v : -v;
    }
}

static void fill_normal(float *x, size_t n, uint64_t seed) {
    dd_rng r;
    dd_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)dd_rng_normal(&r);
}

/* One exchange through the public API; returns out in x (in place). */
static void exch(dd_compressor *c, uint64_t step, float *x, size_t n) {
    dd_compress_begin_step(c, step, 0, 0.0);
    CHECK_OK(dd_compress_exchange(c, g_self, DD_ALLREDUCE_RING, x, 0, n));
}

static void test_topk_exact(void) {
    const size_t ns[] = {1, 2, 7, 100, 1000, 4097};
    const double ds[] = {0.001, 0.01, 0.07, 0.3, 0.5, 0.99, 1.0};
    int cases = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        for (size_t b = 0; b < sizeof ds / sizeof ds[0]; b++) {
            size_t n = ns[a], k = kof(ds[b], n);
            char spec[64];
            snprintf(spec, sizeof spec, "topk,density=%g,ef=0", ds[b]);
            dd_compressor *c = make(spec);
            float *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
            size_t *ord = malloc(n * sizeof *ord);
            char *want = calloc(n, 1);
            fill_ties(x, n, 1000 * a + b);
            memcpy(g, x, n * sizeof *g);
            for (size_t i = 0; i < n; i++) ord[i] = i;
            g_ref_x = x;
            qsort(ord, n, sizeof *ord, cmp_mag);
            for (size_t j = 0; j < k; j++) want[ord[j]] = 1;
            exch(c, 0, g, n);
            size_t bad = 0, sent = 0;
            for (size_t i = 0; i < n; i++) {
                sent += g[i] != 0.0f;
                if (want[i] ? g[i] != x[i] : g[i] != 0.0f) bad++;
            }
            CHECK(bad == 0 && sent == k, "topk n=%zu density=%g k=%zu: %zu wrong, %zu sent", n, ds[b], k, bad, sent);
            dd_compress_stats st;
            dd_compress_stats_get(c, &st);
            uint64_t want_bytes = k == n ? 4 * (uint64_t)n : (4 + dd_pair_index_bytes(n)) * (uint64_t)k;
            CHECK(st.payload_bytes == want_bytes, "payload %llu, want %llu (n=%zu k=%zu)",
                  (unsigned long long)st.payload_bytes, (unsigned long long)want_bytes, n, k);
            CHECK(st.bytes_sent == 0, "one rank sends nothing, got %llu", (unsigned long long)st.bytes_sent);
            cases++;
            free(x);
            free(g);
            free(ord);
            free(want);
            dd_compress_destroy(&c);
        }
    }
    /* k from decimal densities: 0.07 * 100 is 7.000000000000001 in binary, k must be 7 */
    CHECK(kof(0.07, 100) == 7, "k(0.07, 100) = %zu", kof(0.07, 100));
    {
        dd_compressor *c = make("topk,density=0.07,ef=0");
        float x[100];
        fill_normal(x, 100, 5);
        exch(c, 0, x, 100);
        size_t sent = 0;
        for (int i = 0; i < 100; i++) sent += x[i] != 0.0f;
        CHECK(sent == 7, "density 0.07 of 100 sent %zu", sent);
        dd_compress_destroy(&c);
    }
    /* all zeros and one NaN: selection is total (NaN counts as the largest) */
    {
        dd_compressor *c = make("topk,density=0.01,ef=0");
        float x[300];
        memset(x, 0, sizeof x);
        x[123] = NAN;
        exch(c, 0, x, 300);
        size_t nonzero = 0;
        for (int i = 0; i < 300; i++) nonzero += x[i] != 0.0f;
        CHECK(isnan(x[123]) && nonzero == 1, "NaN must be selected, nonzero %zu", nonzero);
        dd_compress_destroy(&c);
    }
    printf("topk exact: %d cases\n", cases);
}

static void test_topk_sampled(void) {
    const size_t n = 100000;
    float *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
    /* sample 5 %: every step within [k/2, 2k] */
    for (int pass = 0; pass < 2; pass++) {
        dd_compressor *c = make(pass == 0 ? "topk,density=0.01,sampled=1,sample=0.05,ef=0"
                                          : "topk,density=0.01,sampled=1,ef=0");
        size_t k = kof(0.01, n), lo_c = n, hi_c = 0;
        double mean = 0;
        const int steps = 20;
        for (int s = 0; s < steps; s++) {
            fill_normal(x, n, 77 + (uint64_t)s);
            memcpy(g, x, n * sizeof *g);
            exch(c, (uint64_t)s, g, n);
            size_t cnt = 0;
            float min_sel = INFINITY, max_unsel = 0;
            int val_ok = 1;
            for (size_t i = 0; i < n; i++) {
                if (g[i] != 0.0f) {
                    cnt++;
                    if (fabsf(x[i]) < min_sel) min_sel = fabsf(x[i]);
                    if (g[i] != x[i]) val_ok = 0;
                } else if (fabsf(x[i]) > max_unsel) {
                    max_unsel = fabsf(x[i]);
                }
            }
            CHECK(val_ok, "sampled: the sent values must be the inputs");
            CHECK(min_sel >= max_unsel, "sampled step %d: selected min %g < unselected max %g", s, min_sel,
                  max_unsel);
            if (cnt < lo_c) lo_c = cnt;
            if (cnt > hi_c) hi_c = cnt;
            mean += (double)cnt / steps;
        }
        if (pass == 0)
            CHECK(lo_c >= k / 2 && hi_c <= 2 * k, "sample 5%%: counts %zu..%zu, k %zu", lo_c, hi_c, k);
        else
            CHECK(hi_c <= 2 * k, "sample 1%%: max count %zu > 2k", hi_c);
        CHECK(mean > 0.75 * (double)k && mean < 1.33 * (double)k, "sampled mean count %.1f, k %zu", mean, k);
        printf("topk sampled (sample %s): count %zu..%zu, mean %.1f, k %zu\n", pass == 0 ? "5%" : "1%", lo_c, hi_c,
               mean, k);
        dd_compress_destroy(&c);
    }
    /* heavy ties: every |x| equal -> the threshold selects all -> exact fallback, k lowest */
    {
        dd_compressor *c = make("topk,density=0.01,sampled=1,ef=0");
        for (size_t i = 0; i < 5000; i++) g[i] = (i % 3) ? 0.5f : -0.5f;
        exch(c, 3, g, 5000);
        size_t cnt = 0, first_ok = 1;
        for (size_t i = 0; i < 5000; i++) {
            if (g[i] != 0.0f) cnt++;
            if ((i < 50) != (g[i] != 0.0f)) first_ok = 0;
        }
        CHECK(cnt == 50 && first_ok, "ties fallback: %zu sent (want the 50 lowest indices)", cnt);
        dd_compress_destroy(&c);
    }
    free(x);
    free(g);
}

static void test_randk(void) {
    const size_t n = 200;
    const size_t k = kof(0.1, n);
    dd_compressor *a = make("randk,density=0.1,ef=0,seed=42");
    dd_compressor *b = make("randk,density=0.1,ef=0,seed=42");
    dd_compressor *o = make("randk,density=0.1,ef=0,seed=43");
    float xa[200], xb[200], xo[200], ref[200];
    for (size_t i = 0; i < n; i++) ref[i] = (float)(i + 1);
    unsigned hits[200];
    memset(hits, 0, sizeof hits);
    char prev[200];
    const int steps = 2000;
    int same_ab = 1, differs_step = 0, differs_seed = 0, count_ok = 1, vals_ok = 1;
    for (int s = 0; s < steps; s++) {
        memcpy(xa, ref, sizeof xa);
        memcpy(xb, ref, sizeof xb);
        memcpy(xo, ref, sizeof xo);
        exch(a, (uint64_t)s, xa, n);
        exch(b, (uint64_t)s, xb, n);
        exch(o, (uint64_t)s, xo, n);
        size_t cnt = 0;
        int ds = 0, dseed = 0;
        for (size_t i = 0; i < n; i++) {
            char sel = xa[i] != 0.0f;
            if (sel != (xb[i] != 0.0f)) same_ab = 0;
            if (sel != (xo[i] != 0.0f)) dseed = 1;
            if (s > 0 && sel != prev[i]) ds = 1;
            if (sel && xa[i] != ref[i]) vals_ok = 0;
            prev[i] = sel;
            cnt += (size_t)sel;
            hits[i] += (unsigned)sel;
        }
        if (cnt != k) count_ok = 0;
        differs_step += ds;
        differs_seed += dseed;
    }
    CHECK(same_ab, "randk: same seed and step must give the same indices");
    CHECK(differs_step == steps - 1, "randk: consecutive steps gave the same indices %d times", steps - 1 - differs_step);
    CHECK(differs_seed == steps, "randk: another seed gave the same indices %d times", steps - differs_seed);
    CHECK(count_ok, "randk: exactly k = %zu per step", k);
    CHECK(vals_ok, "randk: sent values must be the inputs (unscaled)");
    /* coverage: each index ~ Binomial(steps, k/n): mean 200, sd 13.4; allow 6 sd */
    double expect = (double)steps * (double)k / (double)n, sd = sqrt(expect * (1 - (double)k / n));
    unsigned mn = UINT32_MAX, mx = 0;
    double chi2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (hits[i] < mn) mn = hits[i];
        if (hits[i] > mx) mx = hits[i];
        chi2 += (hits[i] - expect) * (hits[i] - expect) / (sd * sd);
    }
    CHECK(mn > expect - 6 * sd && mx < expect + 6 * sd, "randk coverage: %u..%u, expected %.0f +- %.1f", mn, mx, expect,
          sd);
    /* chi2 with ~n degrees of freedom: mean 200, sd 20 */
    CHECK(chi2 > 100 && chi2 < 320, "randk coverage chi2 %.1f for %zu indices", chi2, n);
    printf("randk: coverage %u..%u (expected %.0f), chi2 %.1f / %zu\n", mn, mx, expect, chi2, n);
    dd_compress_stats st;
    dd_compress_stats_get(a, &st);
    CHECK(st.payload_bytes == (uint64_t)steps * 4 * k, "randk payload %llu, want %llu",
          (unsigned long long)st.payload_bytes, (unsigned long long)steps * 4 * k);
    CHECK_NEAR(dd_compress_ratio(&st), (double)n / (double)k, 1e-9);
    dd_compress_destroy(&a);
    dd_compress_destroy(&b);
    dd_compress_destroy(&o);
    /* density 1: dense, out = in */
    dd_compressor *d = make("randk,density=1");
    float x[50], y[50];
    fill_normal(x, 50, 9);
    memcpy(y, x, sizeof y);
    exch(d, 0, y, 50);
    CHECK(memcmp(x, y, sizeof x) == 0, "randk density 1 must return the input");
    dd_compress_destroy(&d);
}

/* error feedback: residual == in - mine exactly, with in = g + old residual; at one rank
 * out == mine, so each element is either (sent: out = in, e = 0) or (kept: out = 0, e = in) */
static void test_error_feedback(void) {
    const char *specs[] = {"topk,density=0.02", "topk,density=0.02,sampled=1", "randk,density=0.02"};
    const size_t n = 3000;
    float *g = malloc(n * sizeof *g), *e_old = malloc(n * sizeof *e_old), *in = malloc(n * sizeof *in);
    for (size_t sp = 0; sp < 3; sp++) {
        dd_compressor *c = make(specs[sp]);
        CHECK(dd_compress_has_ef(c), "%s: error feedback on by default", specs[sp]);
        size_t bad = 0, nsent_total = 0;
        double resid_mass = 0;
        for (int s = 0; s < 10; s++) {
            fill_normal(g, n, 500 + (uint64_t)s);
            size_t rn = 0;
            const float *e = dd_compress_residual(c, &rn);
            for (size_t i = 0; i < n; i++) e_old[i] = (e && rn == n) ? e[i] : 0.0f;
            for (size_t i = 0; i < n; i++) in[i] = g[i] + e_old[i];
            exch(c, (uint64_t)s, g, n);
            e = dd_compress_residual(c, &rn);
            CHECK(e && rn == n, "%s: residual of %zu floats", specs[sp], rn);
            if (!e) break;
            for (size_t i = 0; i < n; i++) {
                float mine = g[i]; /* one rank: out = mine */
                if (e[i] != in[i] - mine) bad++;
                int sent = mine != 0.0f;
                if (sent ? (e[i] != 0.0f || mine != in[i]) : (e[i] != in[i])) bad++;
                nsent_total += (size_t)sent;
            }
            resid_mass = 0;
            for (size_t i = 0; i < n; i++) resid_mass += fabs(e[i]);
        }
        CHECK(bad == 0, "%s: %zu elements with residual != in - mine", specs[sp], bad);
        CHECK(nsent_total > 0 && resid_mass > 0, "%s: something sent and kept", specs[sp]);
        dd_compress_destroy(&c);
    }
    /* ef=0 keeps no residual */
    dd_compressor *c = make("topk,density=0.02,ef=0");
    fill_normal(g, n, 1);
    exch(c, 0, g, n);
    size_t rn = 1;
    CHECK(dd_compress_residual(c, &rn) == NULL && rn == 0, "ef=0: no residual");
    dd_compress_destroy(&c);
    free(g);
    free(e_old);
    free(in);
}

static void test_pairs_self(void) {
    dd_compressor *c = make("topk");
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    dd_cbucket b;
    memset(&b, 0, sizeof b);
    b.n = 10;
    dd_cx x;
    memset(&x, 0, sizeof x);
    x.cfg = &cfg;
    x.comm = g_self;
    x.algo = DD_ALLREDUCE_RING;
    x.rank = 0;
    x.size = 1;
    x.density = 0.5;
    x.b = &b;
    x.owner = c;
    uint32_t idx[3] = {7, 2, 9};
    float val[3] = {1.5f, -2.0f, 3.25f}, out[10];
    for (int i = 0; i < 10; i++) out[i] = 99.0f;
    CHECK_OK(dd_cx_pairs_allgather(&x, idx, val, 3, 10, out));
    float want[10] = {0, 0, -2.0f, 0, 0, 0, 0, 1.5f, 0, 3.25f};
    CHECK(memcmp(out, want, sizeof want) == 0, "pairs at size 1: the scatter of the pairs");
    CHECK(x.payload_bytes == 18 && x.bytes_sent == 0, "pairs accounting (3 pairs x 6 bytes): payload %llu sent %llu",
          (unsigned long long)x.payload_bytes, (unsigned long long)x.bytes_sent);
    CHECK_OK(dd_cx_pairs_allgather(&x, NULL, NULL, 0, 10, out));
    int zero = 1;
    for (int i = 0; i < 10; i++) zero &= out[i] == 0.0f;
    CHECK(zero, "no pairs: out all zero");
    idx[1] = 10;
    CHECK_ERR(dd_cx_pairs_allgather(&x, idx, val, 3, 10, out), DD_ERR_ARG, "idx[1] = 10");
    CHECK_ERR(dd_cx_pairs_allgather(&x, idx, val, 11, 10, out), DD_ERR_ARG, "k = 11");
    dd_compress_destroy(&c);
}

/* selection time for 1M floats: exact vs sampled (printed, not asserted) */
static void bench_1m(void) {
    const size_t n = 1u << 20;
    float *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
    fill_normal(x, n, 3);
    const char *specs[] = {"topk,density=0.001,ef=0", "topk,density=0.001,sampled=1,ef=0", "randk,density=0.001,ef=0",
                           "dgc,density=0.001,warmup=0,ef=0"};
    double t[4];
    for (int s = 0; s < 4; s++) {
        dd_compressor *c = make(specs[s]);
        double best = 1e9;
        for (int r = 0; r < 3; r++) {
            memcpy(g, x, n * sizeof *g);
            dd_compress_stats_reset(c);
            exch(c, (uint64_t)r, g, n);
            dd_compress_stats st;
            dd_compress_stats_get(c, &st);
            if (st.compress_s < best) best = st.compress_s;
        }
        t[s] = best;
        dd_compress_destroy(&c);
    }
    printf("selection of k = 1049 of 1M floats (compress_s, best of 3): exact %.2f ms, sampled %.2f ms, randk %.2f ms, "
           "dgc %.2f ms\n",
           1e3 * t[0], 1e3 * t[1], 1e3 * t[2], 1e3 * t[3]);
    free(x);
    free(g);
}

int main(void) {
    CHECK_OK(dd_comm_self(&g_self));
    double t0 = dd_now();
    test_topk_exact();
    test_topk_sampled();
    test_randk();
    test_error_feedback();
    test_pairs_self();
    bench_1m();
    printf("test_compress_sparse: %.2f s\n", dd_now() - t0);
    dd_comm_free(&g_self);
    return dd_test_done("test_compress_sparse");
}
