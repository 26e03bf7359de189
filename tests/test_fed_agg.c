/* Robust aggregation (fed.h) on hand-computable cases, and update clipping. */
#include <math.h>

#include "dd_test.h"
#include "distdpd/fed.h"

static dd_agg_cfg cfg_of(dd_agg_kind k, int trim, int f, int multi) {
    dd_agg_cfg c = {k, trim, f, multi};
    return c;
}

static void test_names(void) {
    dd_agg_cfg c;
    const char *names[] = {"mean", "median", "trimmed", "krum", "multikrum"};
    for (int i = 0; i < 5; i++) {
        c.trim = 7;
        CHECK_OK(dd_agg_parse(names[i], &c));
        CHECK(c.kind == (dd_agg_kind)i && c.trim == 0 && c.byzantine == 0 && c.multi == 0, "%s", names[i]);
        CHECK(strcmp(dd_agg_name(c.kind), names[i]) == 0, "%s", dd_agg_name(c.kind));
    }
    CHECK_ERR(dd_agg_parse("average", &c), DD_ERR_ARG, "'average' (valid: mean, median");
    CHECK_ERR(dd_agg_parse(NULL, &c), DD_ERR_ARG, "unknown aggregation");
}

static void test_check(void) {
    dd_agg_cfg k = cfg_of(DD_AGG_KRUM, 0, 2, 0);
    CHECK_ERR(dd_agg_check(&k, 5), DD_ERR_ARG, "krum with --byzantine 2 needs more than 6 clients, have 5");
    CHECK_ERR(dd_agg_check(&k, 6), DD_ERR_ARG, "more than 6 clients, have 6");
    CHECK_OK(dd_agg_check(&k, 7));
    k.kind = DD_AGG_MULTIKRUM;
    CHECK_ERR(dd_agg_check(&k, 6), DD_ERR_ARG, "multikrum with --byzantine 2");
    k.multi = 8;
    CHECK_ERR(dd_agg_check(&k, 7), DD_ERR_ARG, "must be in [1, 7]");
    k.byzantine = -1;
    CHECK_ERR(dd_agg_check(&k, 7), DD_ERR_ARG, "--byzantine must be >= 0");
    dd_agg_cfg t = cfg_of(DD_AGG_TRIMMED, 2, 0, 0);
    CHECK_ERR(dd_agg_check(&t, 4), DD_ERR_ARG, "trimmed mean with --trim 2 needs more than 4 clients, have 4");
    CHECK_OK(dd_agg_check(&t, 5));
    dd_agg_cfg m = cfg_of(DD_AGG_MEAN, 0, 0, 0);
    CHECK_ERR(dd_agg_check(&m, 0), DD_ERR_ARG, "at least 1 update");
}

/* Flower's krum_test.py: [0.2], [0.7], [1.0] with f = 1 give [0.7]. Flower scores with
 * max(1, n - f - 2) = 1 neighbour and does not refuse n = 3; Blanchard's condition n > 2f + 2
 * (which fed.h enforces) refuses f = 1 with 3 clients. With f = 0 the neighbour count is
 * the same, n - 0 - 2 = 1: scores 0.25, 0.09, 0.09, the tie going to the lower index. */
static void test_krum_flower(void) {
    float a[] = {0.2f}, b[] = {0.7f}, c[] = {1.0f}, out[1];
    const float *u[] = {a, b, c};
    int sel[3] = {-1, -1, -1};
    dd_agg_cfg k = cfg_of(DD_AGG_KRUM, 0, 1, 0);
    CHECK_ERR(dd_agg_run(&k, 3, 1, u, NULL, out, sel), DD_ERR_ARG, "needs more than 4 clients, have 3");
    k.byzantine = 0;
    CHECK_OK(dd_agg_run(&k, 3, 1, u, NULL, out, sel));
    CHECK(out[0] == 0.7f, "krum gave %g", out[0]);
    CHECK(sel[0] == 0 && sel[1] == 1 && sel[2] == 0, "selected %d %d %d", sel[0], sel[1], sel[2]);
}

/* Five 2-d updates, f = 1 (n = 5 > 4): each scored on its n - f - 2 = 2 nearest.
 * x0 (0,0), x1 (1,0), x2 (0,1), x3 (1,1), x4 (10,10) (the Byzantine one).
 * squared distances: d01 = d02 = d13 = d23 = 1, d03 = d12 = 2, d4* = 200, 181, 181, 162.
 * scores: x0: 1+1 = 2, x1: 1+1 = 2, x2: 2, x3: 2, x4: 162+181 = 343 -> Krum picks x0
 * (first of the tie); multi-Krum with m = n - f = 4 averages x0..x3 = (0.5, 0.5). */
static void test_krum_hand(void) {
    float x[5][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {10, 10}}, out[2];
    const float *u[] = {x[0], x[1], x[2], x[3], x[4]};
    int sel[5];
    dd_agg_cfg k = cfg_of(DD_AGG_KRUM, 0, 1, 0);
    CHECK_OK(dd_agg_run(&k, 5, 2, u, NULL, out, sel));
    CHECK(out[0] == 0 && out[1] == 0, "krum (%g, %g)", out[0], out[1]);
    CHECK(sel[0] == 1 && sel[1] + sel[2] + sel[3] + sel[4] == 0, "krum selected");
    k.kind = DD_AGG_MULTIKRUM;
    CHECK_OK(dd_agg_run(&k, 5, 2, u, NULL, out, sel));
    CHECK(out[0] == 0.5f && out[1] == 0.5f, "multikrum (%g, %g)", out[0], out[1]);
    CHECK(sel[0] && sel[1] && sel[2] && sel[3] && !sel[4], "multikrum selected %d %d %d %d %d", sel[0], sel[1],
          sel[2], sel[3], sel[4]);
    /* m = 2: the two best of the tie at 2 in index order, x0 and x1 -> (0.5, 0) */
    k.multi = 2;
    CHECK_OK(dd_agg_run(&k, 5, 2, u, NULL, out, sel));
    CHECK(out[0] == 0.5f && out[1] == 0, "multikrum m=2 (%g, %g)", out[0], out[1]);
    CHECK(sel[0] && sel[1] && !sel[2] && !sel[3] && !sel[4], "multikrum m=2 selected");
    /* x3 NaN instead: its distances are +inf, so its score is; x4's neighbours are now
     * x1, x2 (181 each) = 362; x0: d01 + d02 = 2 -> Krum picks x0; multi-Krum m = 4 takes x0,
     * x1, x2 (scores 2, 3, 3) and x4 (362) -> ((0+1+0+10)/4, (0+0+1+10)/4). */
    x[3][1] = NAN;
    k.multi = 0;
    CHECK_OK(dd_agg_run(&k, 5, 2, u, NULL, out, sel));
    CHECK(out[0] == 2.75f && out[1] == 2.75f, "multikrum with NaN (%g, %g)", out[0], out[1]);
    CHECK(!sel[3] && sel[4], "the NaN update is left out");
    k.kind = DD_AGG_KRUM;
    CHECK_OK(dd_agg_run(&k, 5, 2, u, NULL, out, sel));
    CHECK(out[0] == 0 && out[1] == 0 && sel[0] == 1, "krum with NaN (%g, %g)", out[0], out[1]);
}

static void test_median_trimmed(void) {
    /* per coordinate: {3, 1, 2, 100, -5} -> sorted -5 1 2 3 100 */
    float a[] = {3, 1}, b[] = {1, 2}, c[] = {2, 3}, dd[] = {100, 4}, e[] = {-5, 5}, out[2];
    const float *u[] = {a, b, c, dd, e};
    int sel[5];
    dd_agg_cfg m = cfg_of(DD_AGG_MEDIAN, 0, 0, 0);
    CHECK_OK(dd_agg_run(&m, 5, 2, u, NULL, out, sel));
    CHECK(out[0] == 2 && out[1] == 3, "odd median (%g, %g)", out[0], out[1]);
    CHECK(sel[0] + sel[1] + sel[2] + sel[3] + sel[4] == 5, "median selects all");
    CHECK_OK(dd_agg_run(&m, 4, 2, u, NULL, out, NULL)); /* {3,1,2,100} -> (2+3)/2; {1,2,3,4} -> 2.5 */
    CHECK(out[0] == 2.5f && out[1] == 2.5f, "even median (%g, %g)", out[0], out[1]);
    dd_agg_cfg t = cfg_of(DD_AGG_TRIMMED, 1, 0, 0);
    CHECK_OK(dd_agg_run(&t, 5, 2, u, NULL, out, NULL)); /* (1+2+3)/3 = 2, (2+3+4)/3 = 3 */
    CHECK(out[0] == 2 && out[1] == 3, "trimmed (%g, %g)", out[0], out[1]);
    t.trim = 0; /* trim 0 = the mean: (3+1+2+100-5)/5 = 20.2 */
    CHECK_OK(dd_agg_run(&t, 5, 2, u, NULL, out, NULL));
    CHECK_NEAR(out[0], 20.2, 1e-5);
    /* NaN orders above +inf: {NaN, 1, 2, 100, -5} -> -5 1 2 100 NaN: median 2, trim 1 -> (1+2+100)/3 */
    a[0] = NAN;
    CHECK_OK(dd_agg_run(&m, 5, 2, u, NULL, out, NULL));
    CHECK(out[0] == 2, "median with NaN %g", out[0]);
    t.trim = 1;
    CHECK_OK(dd_agg_run(&t, 5, 2, u, NULL, out, NULL));
    CHECK_NEAR(out[0], 103.0 / 3, 1e-5);
    b[0] = INFINITY; /* {NaN, inf, 2, 100, -5} -> -5 2 100 inf NaN: median 100 */
    CHECK_OK(dd_agg_run(&m, 5, 2, u, NULL, out, NULL));
    CHECK(out[0] == 100, "median with NaN and inf %g", out[0]);
}

static void test_mean(void) {
    float a[] = {1, 10}, b[] = {4, -2}, c[] = {NAN, 0}, out[2];
    const float *u[] = {a, b, c};
    int sel[3];
    double w[] = {1, 3, 0};
    dd_agg_cfg m = cfg_of(DD_AGG_MEAN, 0, 0, 0);
    /* (1*1 + 3*4)/4 = 3.25, (10 - 6)/4 = 1; the zero-weight NaN does not enter */
    CHECK_OK(dd_agg_run(&m, 3, 2, u, w, out, sel));
    CHECK(out[0] == 3.25f && out[1] == 1, "weighted mean (%g, %g)", out[0], out[1]);
    CHECK(sel[0] == 1 && sel[1] == 1 && sel[2] == 0, "zero weight not selected");
    CHECK_OK(dd_agg_run(&m, 2, 2, u, NULL, out, NULL)); /* equal weights */
    CHECK(out[0] == 2.5f && out[1] == 4, "mean (%g, %g)", out[0], out[1]);
    w[2] = 1; /* the mean of a NaN is NaN */
    CHECK_OK(dd_agg_run(&m, 3, 2, u, w, out, NULL));
    CHECK(isnan(out[0]) && out[1] == 0.8f, "mean with NaN (%g, %g)", out[0], out[1]);
    w[1] = -1;
    CHECK_ERR(dd_agg_run(&m, 3, 2, u, w, out, NULL), DD_ERR_ARG, "weight (sample count) of update 1 is -1");
    double z[] = {0, 0, 0};
    CHECK_ERR(dd_agg_run(&m, 3, 2, u, z, out, NULL), DD_ERR_ARG, "all 3 weights");
}

/* The result depends only on the inputs: two runs on a larger random set agree bit for
 * bit, and the median of n copies of one vector is that vector. */
static void test_determinism(void) {
    enum { N = 9, D = 500 };
    static float x[N][D], o1[D], o2[D];
    const float *u[N];
    dd_rng r;
    dd_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) {
        u[i] = x[i];
        for (int j = 0; j < D; j++) x[i][j] = (float)dd_rng_normal(&r);
    }
    for (int k = 0; k <= DD_AGG_MULTIKRUM; k++) {
        dd_agg_cfg c = cfg_of((dd_agg_kind)k, 2, 2, 0);
        CHECK_OK(dd_agg_run(&c, N, D, u, NULL, o1, NULL));
        CHECK_OK(dd_agg_run(&c, N, D, u, NULL, o2, NULL));
        CHECK(memcmp(o1, o2, sizeof o1) == 0, "%s not deterministic", dd_agg_name(c.kind));
    }
    for (int i = 0; i < N; i++) u[i] = x[0];
    dd_agg_cfg m = cfg_of(DD_AGG_MEDIAN, 0, 0, 0);
    CHECK_OK(dd_agg_run(&m, N, D, u, NULL, o1, NULL));
    CHECK(memcmp(o1, x[0], sizeof o1) == 0, "median of copies");
}

static void test_clip(void) {
    float v[] = {3, 4};
    CHECK_NEAR(dd_fed_clip(v, 2, 10), 5, 1e-12);
    CHECK(v[0] == 3 && v[1] == 4, "under the bound: unchanged");
    CHECK_NEAR(dd_fed_clip(v, 2, 1), 5, 1e-12);
    CHECK_NEAR(v[0], 0.6, 1e-7);
    CHECK_NEAR(v[1], 0.8, 1e-7);
    CHECK_NEAR(sqrt((double)v[0] * v[0] + (double)v[1] * v[1]), 1, 1e-7);
    float w[] = {1, NAN, 2};
    CHECK(isnan(dd_fed_clip(w, 3, 1)), "NaN norm returned");
    CHECK(w[0] == 0 && w[1] == 0 && w[2] == 0, "non-finite update zeroed");
    float big[] = {3e38f, 3e38f}; /* the norm overflows float, not double */
    double nb = dd_fed_clip(big, 2, 1);
    CHECK_NEAR(nb / 3e38, sqrt(2.0), 1e-6);
    CHECK_NEAR(big[0], M_SQRT1_2, 1e-6);
}

int main(void) {
    test_names();
    test_check();
    test_krum_flower();
    test_krum_hand();
    test_median_trimmed();
    test_mean();
    test_determinism();
    test_clip();
    return dd_test_done("test_fed_agg");
}
