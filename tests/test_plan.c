/* Unit test of the planning model (no MPI): the alpha-beta-gamma allreduce formulas
 * against hand-computed values, the bucketed-overlap step model against a brute-force
 * event simulation, the scaling table layout, the recommendation in a latency-bound and
 * a bandwidth-bound case, the presets, argument errors and the JSON document. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/plan.h"

static dd_link mk(double a, double b, double g, double a1, double b1) {
    dd_link l = {a, b, g, a1, b1};
    return l;
}

static void test_formulas(void) {
    dd_link l = mk(1e-6, 1e-9, 2e-10, 3e-6, 0.5e-9), in = mk(0.1e-6, 0.1e-9, 2e-10, 0.2e-6, 0.05e-9);
    double n = 1e6;
    /* ring, p = 4: 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma */
    CHECK_NEAR(dd_plan_allreduce_time(DD_ALLREDUCE_RING, &l, NULL, 1, 4, n),
               6e-6 + 1.5e6 * 1e-9 + 0.75e6 * 2e-10, 1e-15);
    /* tree, p = 5: ceil(log2 5) = 3 levels of one-way transfers, reduce and broadcast */
    CHECK_NEAR(dd_plan_allreduce_time(DD_ALLREDUCE_TREE, &l, NULL, 1, 5, n),
               6 * (3e-6 + n * 0.5e-9) + 3 * n * 2e-10, 1e-15);
    /* rhd, p = 6: q = 4 (2 levels) + fold-in and hand-back of the 2 extra ranks */
    CHECK_NEAR(dd_plan_allreduce_time(DD_ALLREDUCE_RHD, &l, NULL, 1, 6, n),
               4e-6 + 1.5e6 * 1e-9 + 0.75e6 * 2e-10 + 2 * (3e-6 + n * 0.5e-9) + n * 2e-10, 1e-15);
    /* rhd at a power of two has ring's bandwidth term and log latency */
    CHECK_NEAR(dd_plan_allreduce_time(DD_ALLREDUCE_RHD, &l, NULL, 1, 8, n),
               6e-6 + 2 * 7.0 / 8 * n * 1e-9 + 7.0 / 8 * n * 2e-10, 1e-15);
    /* hier, p = 16, 4 per node: binomial inside (2 levels each way) + ring over 4 leaders */
    double hier = 2 * (0.2e-6 + n * 0.05e-9 + n * 2e-10) + 2 * (0.2e-6 + n * 0.05e-9) + 6e-6 +
                  1.5e6 * 1e-9 + 0.75e6 * 2e-10;
    CHECK_NEAR(dd_plan_allreduce_time(DD_ALLREDUCE_HIER, &l, &in, 4, 16, n), hier, 1e-15);
    /* hier with one node = a tree on the intra link */
    CHECK_NEAR(dd_plan_allreduce_time(DD_ALLREDUCE_HIER, &l, &in, 8, 8, n),
               dd_plan_allreduce_time(DD_ALLREDUCE_TREE, &in, NULL, 1, 8, n), 1e-15);
    /* mpi = the fastest of ring, tree, rhd */
    for (int p = 2; p <= 64; p++) {
        double r = dd_plan_allreduce_time(DD_ALLREDUCE_RING, &l, NULL, 1, p, 1e3);
        double t = dd_plan_allreduce_time(DD_ALLREDUCE_TREE, &l, NULL, 1, p, 1e3);
        double h = dd_plan_allreduce_time(DD_ALLREDUCE_RHD, &l, NULL, 1, p, 1e3);
        double m = dd_plan_allreduce_time(DD_ALLREDUCE_MPI, &l, NULL, 1, p, 1e3);
        CHECK(m == fmin(r, fmin(t, h)), "mpi model at p=%d", p);
    }
    for (int a = 0; a < DD_ALLREDUCE_COUNT; a++) {
        CHECK(dd_plan_allreduce_time((dd_allreduce_algo)a, &l, &in, 4, 1, n) == 0, "p = 1 costs 0");
        CHECK(dd_plan_allreduce_time((dd_allreduce_algo)a, &l, &in, 4, 7, 0) == 0, "0 bytes cost 0");
        CHECK(dd_plan_allreduce_time((dd_allreduce_algo)a, &l, &in, 4, 0, n) < 0, "p = 0 invalid");
    }
    dd_link bad = mk(-1, 1e-9, 0, 0, 0);
    CHECK(dd_plan_allreduce_time(DD_ALLREDUCE_RING, &bad, NULL, 1, 4, n) < 0, "negative alpha");
    CHECK(dd_plan_allreduce_time(DD_ALLREDUCE_HIER, &l, NULL, 4, 8, n) < 0, "hier needs intra");
}

/* Brute-force event simulation of the bucket queue, to check the closed form. */
static double brute_exposed(const dd_plan_cfg *cfg, dd_allreduce_algo a, int p, double b) {
    double G = 4 * cfg->params, tb = cfg->compute_s * cfg->backward_frac, done = 0, fin = 0;
    while (done < G) {
        double sz = fmin(b, G - done);
        done += sz;
        double ready = tb * done / G;
        fin = fmax(fin, ready) + dd_plan_allreduce_time(a, &cfg->link, &cfg->intra, cfg->ranks_per_node, p, sz);
    }
    return fmax(0, fin - tb);
}

static void test_step_model(void) {
    dd_plan_cfg c;
    dd_plan_cfg_default(&c);
    c.params = 1e6; /* 4 MB of gradients */
    c.compute_s = 0.030;
    c.link = mk(1e-3, 0, 0, 1e-3, 0); /* latency only: a bucket costs 2 ms on 2 ranks (ring) */
    /* 4 buckets of 1 MB ready at 5, 10, 15, 20 ms, 2 ms each: only the last one shows */
    CHECK_NEAR(dd_plan_exposed_comm(&c, DD_ALLREDUCE_RING, 2, 1e6), 2e-3, 1e-12);
    c.link = mk(4e-3, 0, 0, 4e-3, 0); /* 8 ms per bucket: the queue backs up to 37 ms */
    CHECK_NEAR(dd_plan_exposed_comm(&c, DD_ALLREDUCE_RING, 2, 1e6), 17e-3, 1e-12);
    c.overlap = 0; /* one allreduce of 4 MB after backward */
    CHECK_NEAR(dd_plan_exposed_comm(&c, DD_ALLREDUCE_RING, 2, 1e6), 8e-3, 1e-12);
    c.overlap = 1;
    /* random configurations against the event simulation */
    dd_rng g;
    dd_rng_seed(&g, 11);
    for (int k = 0; k < 300; k++) {
        c.params = 1 + 1e7 * dd_rng_uniform(&g);
        c.compute_s = 1e-3 + dd_rng_uniform(&g);
        c.backward_frac = dd_rng_uniform(&g);
        c.link = mk(1e-6 + 1e-4 * dd_rng_uniform(&g), 1e-10 + 1e-8 * dd_rng_uniform(&g), 1e-10, 2e-6, 1e-9);
        int p = 2 + (int)dd_rng_below(&g, 2000);
        double b = 1e3 + 4e7 * dd_rng_uniform(&g);
        dd_allreduce_algo a = (dd_allreduce_algo)dd_rng_below(&g, DD_ALLREDUCE_COUNT);
        double want = brute_exposed(&c, a, p, b), got = dd_plan_exposed_comm(&c, a, p, b);
        CHECK(fabs(got - want) <= 1e-9 * (1 + want), "case %d: closed form %.12g, simulation %.12g", k, got,
              want);
    }
}

static void test_run(void) {
    dd_plan_cfg c;
    dd_plan_cfg_default(&c);
    dd_plan_result r;
    c.params = 0;
    CHECK_ERR(dd_plan_run(&c, &r), DD_ERR_ARG, "params = 0");
    c.params = 1000;
    CHECK_ERR(dd_plan_run(&c, &r), DD_ERR_ARG, "compute time");
    c.compute_s = 0.01;
    c.ranks_per_node = 0;
    CHECK_ERR(dd_plan_run(&c, &r), DD_ERR_ARG, "ranks_per_node");
    c.ranks_per_node = 8;

    /* layout: 8..4096 plus the target */
    c.ranks = 64;
    CHECK_OK(dd_plan_run(&c, &r));
    CHECK(r.nrows == 10 && r.target_row == 3 && r.rows[3].ranks == 64 && r.rows[9].ranks == 4096,
          "rows %d target %d", r.nrows, r.target_row);
    c.ranks = 6;
    CHECK_OK(dd_plan_run(&c, &r));
    CHECK(r.nrows == 11 && r.target_row == 0 && r.rows[0].ranks == 6 && r.rows[1].ranks == 8, "rows for 6");
    c.ranks = 100000;
    CHECK_OK(dd_plan_run(&c, &r));
    CHECK(r.nrows == 11 && r.target_row == 10 && r.rows[10].ranks == 100000, "rows for 100000");
    c.ranks = 300;
    CHECK_OK(dd_plan_run(&c, &r));
    CHECK(r.nrows == 11 && r.rows[r.target_row].ranks == 300 && r.rows[r.target_row - 1].ranks == 256 &&
              r.rows[r.target_row + 1].ranks == 512,
          "rows for 300");

    /* a small DPD model (4 KB of gradients) on 10 GbE at 4096 ranks: latency-bound, a
     * log-latency algorithm, compression cannot help (needs ratio 0) */
    dd_plan_cfg_default(&c);
    c.params = 1000;
    c.compute_s = 0.005;
    c.ranks = 4096;
    CHECK_OK(dd_plan_run(&c, &r));
    CHECK(r.latency_bound == 1, "small model must be latency-bound");
    CHECK(r.algo == DD_ALLREDUCE_TREE || r.algo == DD_ALLREDUCE_RHD || r.algo == DD_ALLREDUCE_HIER,
          "latency-bound: recommended %s", dd_allreduce_name((dd_allreduce_algo)r.algo));
    const dd_plan_row *t = &r.rows[r.target_row];
    CHECK(t->allreduce_s[DD_ALLREDUCE_RING] > 10 * t->allreduce_s[DD_ALLREDUCE_RHD], "ring latency 2(p-1) alpha");
    /* weak scaling: the best efficiency never rises with p */
    for (int i = 1; i < r.nrows; i++)
        CHECK(r.rows[i].efficiency[r.rows[i].best] <= r.rows[i - 1].efficiency[r.rows[i - 1].best] + 1e-12,
              "efficiency rises from %d to %d ranks", r.rows[i - 1].ranks, r.rows[i].ranks);

    /* a 100 M parameter model (400 MB) on 10 GbE, 1 s compute, 64 ranks: bandwidth-bound,
     * a bandwidth-optimal algorithm, compression needed */
    dd_plan_cfg_default(&c);
    c.params = 1e8;
    c.compute_s = 1.0;
    c.ranks = 64;
    CHECK_OK(dd_plan_run(&c, &r));
    CHECK(!r.latency_bound, "large model is bandwidth-bound");
    CHECK(r.algo == DD_ALLREDUCE_RING || r.algo == DD_ALLREDUCE_RHD || r.algo == DD_ALLREDUCE_HIER,
          "bandwidth-bound: recommended %s", dd_allreduce_name((dd_allreduce_algo)r.algo));
    CHECK(r.efficiency < 0.9 && r.compression_ratio >= 2, "efficiency %.3f ratio %g", r.efficiency,
          r.compression_ratio);
    /* the efficiency is compute / (compute + exposed) of the chosen bucket */
    double ex = dd_plan_exposed_comm(&c, (dd_allreduce_algo)r.algo, 64, r.bucket_bytes);
    CHECK_NEAR(r.efficiency, 1.0 / (1.0 + ex), 1e-12);
    CHECK_NEAR(r.step_s, 1.0 + ex, 1e-9);

    /* JSON */
    char *js = NULL;
    CHECK_OK(dd_plan_json(&r, "ethernet-10g", "shm", &js));
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    CHECK(root != NULL, "plan JSON parses");
    if (root) {
        const cJSON *tab = cJSON_GetObjectItem(root, "table");
        const cJSON *rec = cJSON_GetObjectItem(root, "recommendation");
        CHECK(cJSON_GetArraySize(tab) == r.nrows, "table rows");
        const cJSON *al = rec ? cJSON_GetObjectItem(rec, "allreduce") : NULL;
        CHECK(al && cJSON_IsString(al) && strcmp(al->valuestring, dd_allreduce_name((dd_allreduce_algo)r.algo)) == 0,
              "recommendation.allreduce");
        const cJSON *ln = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "inputs"), "link");
        CHECK(ln && strcmp(cJSON_GetObjectItem(ln, "name")->valuestring, "ethernet-10g") == 0, "link name");
        cJSON_Delete(root);
    }
    free(js);
}

static void test_presets(void) {
    const char *const *names = dd_plan_link_names();
    int k = 0;
    for (; names[k]; k++) {
        dd_link l;
        CHECK_OK(dd_plan_link_preset(names[k], &l));
        CHECK(l.alpha > 0 && l.beta > 0 && l.gamma > 0 && l.alpha1 > 0 && l.beta1 > 0, "%s values", names[k]);
        CHECK(strlen(dd_plan_link_source(names[k])) > 20, "%s has a source", names[k]);
    }
    CHECK(k == 5, "5 presets, got %d", k);
    dd_link a, b;
    CHECK_OK(dd_plan_link_preset("ethernet-10g", &a));
    CHECK_OK(dd_plan_link_preset("infiniband-hdr", &b));
    CHECK(a.alpha > b.alpha && a.beta > b.beta, "10 GbE slower than HDR");
    CHECK_ERR(dd_plan_link_preset("token-ring", &a), DD_ERR_ARG, "link 'token-ring'");
}

int main(void) {
    test_formulas();
    test_step_model();
    test_run();
    test_presets();
    return dd_test_done("test_plan");
}
