/* Unit test of the planning model (no MPI): the alpha-beta-gamma allreduce formulas
 * against hand-computed values, the bucketed-overlap step model against a brute-force
 * event simulation, the scaling table layout, the recommendation in a latency-bound and
 * a bandwidth-bound case, the presets, argument errors and the JSON document; the
 * sharding plan (memory per rank and kind, communication per step of none/zero1/zero2/
 * zero3) in closed form for a small model (tests/test_plan_shard_mpi.c compares it with
 * what the code allocates and sends). */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/parallel.h"
#include "distdpd/plan.h"
#include "test_model_util.h"

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
    for (int a = 0; a < dd_allreduce_count(); a++) {
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
        dd_allreduce_algo a = (dd_allreduce_algo)dd_rng_below(&g, (uint64_t)dd_allreduce_count());
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

/* ---- sharding plan ------------------------------------------------------------------ */

/* gru(hidden=4): table entries (offset, size) weight_ih (0, 24), weight_hh (32, 48),
 * bias_ih (80, 12), bias_hh (96, 12), fc weight (112, 8), fc bias (128, 2): n = 144
 * floats (each entry 16-aligned); stages rnn.l0 [0, 112) and fc_out [112, 144). */
static void test_shard_memory(void) {
    dd_model *m = NULL, *pa = NULL;
    dd_model_cfg mc = tm_mcfg("hidden=4"), pc = tm_mcfg("hidden=2");
    CHECK_OK(dd_model_create("gru", &mc, &m));
    CHECK_OK(dd_model_create("gru", &pc, &pa));
    if (!m || !pa) return;
    CHECK(dd_model_params(m)->total == 144 && dd_model_num_stages(m) == 2, "gru(4): 144 floats, 2 stages");
    dd_plan_shard_cfg c;
    dd_plan_shard_cfg_default(&c);
    CHECK(c.opt == DD_OPTIM_ADAMW && c.batch == 64 && c.frame == 200 && c.eval_batch == 16 && c.nperseg == 2560 &&
              c.algo == DD_ALLREDUCE_RING && c.bucket_mb == 4 && c.shard == DD_SHARD_NONE,
          "defaults");
    c.model = m;
    c.batch = 6;
    c.frame = 10;
    c.eval_batch = 2;
    c.nperseg = 512;
    const size_t ws = dd_model_workspace_size(m, 6, 10), ev = dd_model_infer_workspace(m, 2, 512) + 16;
    size_t b[DD_MEM_KINDS];
    /* one rank, no sharding: 4n, 4n, 2 x 4n (adamw); 4 batch buffers of 6 x 10 x 2 floats,
     * the workspace + 16 and rank 0's evaluation workspace */
    c.ranks = 1;
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    CHECK(b[DD_MEM_PARAMS] == 576 && b[DD_MEM_GRADS] == 576 && b[DD_MEM_OPTIM] == 1152, "none: %zu %zu %zu",
          b[0], b[1], b[2]);
    CHECK(b[DD_MEM_ACTIVATIONS] == 4 * (4 * 120 + ws + 16 + ev), "none: activations %zu", b[3]);
    /* 4 ranks: slices of ceil(144 / 4) = 36 rounded up to 48 floats: [0, 48), [48, 96),
     * [96, 144), [144, 144) (empty: 1 float); batch slices of ceil(6 / 4) = 2 frames */
    c.ranks = 4;
    const size_t ws2 = dd_model_workspace_size(m, 2, 10), act = 4 * (4 * 40 + ws2 + 16);
    c.shard = DD_SHARD_ZERO1;
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    CHECK(b[0] == 576 && b[1] == 576 && b[2] == 2 * 48 * 4 && b[3] == act + 4 * ev, "zero1 rank 0: %zu %zu %zu %zu",
          b[0], b[1], b[2], b[3]);
    CHECK_OK(dd_plan_shard_memory(&c, 3, b));
    CHECK(b[2] == 2 * 1 * 4 && b[3] == act, "zero1 rank 3 (empty slice, no evaluation): %zu %zu", b[2], b[3]);
    c.shard = DD_SHARD_ZERO2; /* + gradients: slice + 2 x the largest stage (112) */
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    CHECK(b[0] == 576 && b[1] == (48 + 224) * 4 && b[2] == 384, "zero2 rank 0: %zu %zu %zu", b[0], b[1], b[2]);
    CHECK_OK(dd_plan_shard_memory(&c, 3, b));
    CHECK(b[1] == (1 + 224) * 4 && b[3] == act, "zero2 rank 3: %zu %zu", b[1], b[3]);
    c.shard = DD_SHARD_ZERO3; /* + parameters likewise; evaluation on every rank */
    CHECK_OK(dd_plan_shard_memory(&c, 3, b));
    CHECK(b[0] == (1 + 224) * 4 && b[1] == (1 + 224) * 4 && b[2] == 8 && b[3] == act + 4 * ev,
          "zero3 rank 3: %zu %zu %zu %zu", b[0], b[1], b[2], b[3]);
    dd_plan_shard_result r;
    CHECK_OK(dd_plan_shard_run(&c, &r));
    CHECK(r.mem[0] == (48 + 224) * 4 && r.mem[2] == 384 && r.mem_total == r.mem[0] + r.mem[1] + r.mem[2] + r.mem[3] &&
              r.slice == 48 && r.stage_max == 112 && r.floats == 144 && r.params == 106 && r.batch_per_rank == 2 &&
              r.eval_batch == 2 && r.report_bytes == 576,
          "zero3 result: rank 0's memory, sizes, the report's whole parameters");
    for (int rk = 1; rk < 4; rk++) {
        CHECK_OK(dd_plan_shard_memory(&c, rk, b));
        for (int k = 0; k < DD_MEM_KINDS; k++) CHECK(b[k] <= r.mem[k], "rank 0 is the largest (rank %d, kind %d)", rk, k);
    }
    /* optimisers: plain sgd keeps nothing, with momentum one array, adam two */
    c.shard = DD_SHARD_NONE;
    c.opt = DD_OPTIM_SGD;
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    CHECK(b[2] == 0, "sgd: no state");
    c.momentum = 0.9;
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    CHECK(b[2] == 576, "sgd momentum: one array");
    c.momentum = 0;
    c.opt = DD_OPTIM_ADAM;
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    CHECK(b[2] == 1152, "adam: two arrays");
    /* a global batch never holds more than the frames there are; evaluation buffers never
     * more segments than there are */
    c.ranks = 2;
    c.frames = 5;
    c.eval_segments = 1;
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    const size_t ws3 = dd_model_workspace_size(m, 3, 10), ev1 = dd_model_infer_workspace(m, 1, 512) + 16;
    CHECK(b[3] == 4 * (4 * 60 + ws3 + 16 + ev1), "frames 5 < batch 6: 3 frames per rank, 1 segment: %zu", b[3]);
    /* direct learning through a PA model: 2 more batch buffers and the PA's workspace;
     * evaluation adds the PA's workspace and one output buffer; ila only the evaluation */
    c.task = DD_TRAIN_DLA;
    c.pa = pa;
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    const size_t pw = dd_model_workspace_size(pa, 3, 10), pe = dd_model_infer_workspace(pa, 1, 512) + 16;
    CHECK(b[3] == 4 * (6 * 60 + ws3 + 16 + pw + 16 + ev1 + pe + 512 * 2), "dla activations %zu", b[3]);
    c.task = DD_TRAIN_ILA;
    CHECK_OK(dd_plan_shard_memory(&c, 0, b));
    CHECK(b[3] == 4 * (4 * 60 + ws3 + 16 + ev1 + pe + 512 * 2), "ila activations %zu", b[3]);

    /* errors name the field */
    CHECK_ERR(dd_plan_shard_memory(&c, 2, b), DD_ERR_ARG, "rank = 2");
    c.pa = NULL;
    CHECK_ERR(dd_plan_shard_run(&c, &r), DD_ERR_ARG, "needs the frozen PA model");
    c.task = DD_TRAIN_PA;
    c.pa = pa;
    CHECK_ERR(dd_plan_shard_run(&c, &r), DD_ERR_ARG, "takes no frozen PA model");
    c.pa = NULL;
    c.momentum = 0.5;
    CHECK_ERR(dd_plan_shard_run(&c, &r), DD_ERR_ARG, "momentum applies to sgd only");
    c.momentum = 0;
    c.batch = 0;
    CHECK_ERR(dd_plan_shard_run(&c, &r), DD_ERR_ARG, "batch = 0");
    c.batch = 1 << 20;
    c.frame = 1 << 10;
    CHECK_ERR(dd_plan_shard_run(&c, &r), DD_ERR_ARG, "frame * batch");
    c.batch = 6;
    c.frame = 10;
    c.ranks = 0;
    CHECK_ERR(dd_plan_shard_run(&c, &r), DD_ERR_ARG, "ranks = 0");
    c.ranks = 2;
    c.model = NULL;
    CHECK_ERR(dd_plan_shard_run(&c, &r), DD_ERR_ARG, "no model");
    dd_model_destroy(&m);
    dd_model_destroy(&pa);
}

static void test_shard_comm(void) {
    dd_model *m = NULL, *m4 = NULL;
    dd_model_cfg mc = tm_mcfg("hidden=4"), mc4 = tm_mcfg("hidden=4,layers=3");
    CHECK_OK(dd_model_create("gru", &mc, &m));
    CHECK_OK(dd_model_create("gru", &mc4, &m4));
    if (!m || !m4) return;
    dd_plan_shard_cfg c;
    dd_plan_shard_cfg_default(&c);
    c.model = m;
    c.link = mk(1e-6, 1e-9, 0, 2e-6, 2e-9);
    c.ranks = 4;
    c.bucket_mb = 0; /* one allreduce of the 576-byte arena */
    const double a = 1e-6, be = 1e-9;
    const double ring24 = 6 * a + 1.5 * 24 * be, ring576 = 6 * a + 1.5 * 576 * be;
    dd_plan_shard_result r;
    /* none: the arena's allreduce 2 (P-1)/P x 576 and the loss's (3 doubles) */
    CHECK_OK(dd_plan_shard_run(&c, &r));
    CHECK(r.collectives == 2 && r.buckets == 1, "none: %d collectives, %zu buckets", r.collectives, r.buckets);
    CHECK_NEAR(r.grad_bytes, 864, 1e-9);
    CHECK_NEAR(r.small_bytes, 36, 1e-9);
    CHECK_NEAR(r.gather_bytes, 0, 0);
    CHECK_NEAR(r.bytes_sent, 900, 1e-9);
    CHECK_NEAR(r.messages, 12, 0); /* ring: 2 (P-1) = 6 steps each */
    CHECK_NEAR(r.time_s, ring576 + ring24, 1e-15);
    /* buckets of one float: one per table entry (6); 4 MiB: one */
    c.bucket_mb = 1e-9;
    CHECK_OK(dd_plan_shard_run(&c, &r));
    CHECK(r.buckets == 6 && r.collectives == 7, "tiny buckets: %zu buckets", r.buckets);
    CHECK_NEAR(r.grad_bytes, 864, 1e-9);
    CHECK_NEAR(r.messages, 7 * 6, 0);
    c.bucket_mb = 4;
    CHECK_OK(dd_plan_shard_run(&c, &r));
    CHECK(r.buckets == 1 && r.collectives == 2, "4 MiB: one bucket");
    /* zero1: + allgather of the slices: (P-1)/P x 576 in ceil(log2 4) = 2 steps */
    c.shard = DD_SHARD_ZERO1;
    CHECK_OK(dd_plan_shard_run(&c, &r));
    CHECK(r.collectives == 3, "zero1 collectives %d", r.collectives);
    CHECK_NEAR(r.gather_bytes, 432, 1e-9);
    CHECK_NEAR(r.messages, 14, 0);
    CHECK_NEAR(r.time_s, ring576 + ring24 + 2 * a + 432 * be, 1e-15);
    /* zero2: a reduce-scatter per stage (448 and 128 bytes), the loss, the allgather */
    c.shard = DD_SHARD_ZERO2;
    CHECK_OK(dd_plan_shard_run(&c, &r));
    CHECK(r.collectives == 4 && r.buckets == 0, "zero2 collectives %d", r.collectives);
    CHECK_NEAR(r.grad_bytes, 432, 1e-9);
    CHECK_NEAR(r.gather_bytes, 432, 1e-9);
    CHECK_NEAR(r.messages, 2 + 2 + 6 + 2, 0);
    CHECK_NEAR(r.time_s, 2 * 2 * a + 432 * be + ring24 + 2 * a + 432 * be, 1e-15);
    c.link.gamma = 1e-10; /* the reduce-scatter sums */
    CHECK_OK(dd_plan_shard_run(&c, &r));
    const double ring24g = ring24 + 0.75 * 24 * 1e-10;
    CHECK_NEAR(r.time_s, 2 * 2 * a + 432 * (be + 1e-10) + ring24g + 2 * a + 432 * be, 1e-15);
    c.link.gamma = 0;
    /* zero3 with 2 stages: both gathered before the forward, still there for backward */
    c.shard = DD_SHARD_ZERO3;
    CHECK_OK(dd_plan_shard_run(&c, &r));
    CHECK(r.collectives == 2 + 1 + 2, "zero3 (2 stages) collectives %d", r.collectives);
    CHECK_NEAR(r.gather_bytes, 432, 1e-9);
    /* gru(4, 3 layers): 4 stages; backward gathers stages 0 and 1 again */
    c.model = m4;
    CHECK_OK(dd_plan_shard_run(&c, &r));
    dd_stage_info s0, s1;
    CHECK_OK(dd_model_stage_info(m4, 0, &s0));
    CHECK_OK(dd_model_stage_info(m4, 1, &s1));
    const double n4 = 4.0 * (double)dd_model_params(m4)->total, again = 4.0 * (double)(s1.hi - s0.lo);
    CHECK(r.stages == 4 && r.collectives == 4 + 1 + 4 + 2, "zero3 (4 stages) collectives %d", r.collectives);
    CHECK_NEAR(r.gather_bytes, 0.75 * (n4 + again), 1e-9);
    CHECK_NEAR(r.grad_bytes, 0.75 * n4, 1e-9);
    /* at most 1.5x the bytes of none (2 (P-1)/P n): gathers 2 (P-1)/P n + reduce-scatter */
    dd_plan_shard_result rn;
    c.shard = DD_SHARD_NONE;
    CHECK_OK(dd_plan_shard_run(&c, &rn));
    CHECK(r.grad_bytes + r.gather_bytes <= 1.5 * rn.grad_bytes + 1e-9, "zero3 <= 1.5x none's gradient bytes");
    /* mpi: the fastest of ring, tree, rhd, and its message count */
    c.algo = DD_ALLREDUCE_MPI;
    c.bucket_mb = 0;
    c.model = m;
    CHECK_OK(dd_plan_shard_run(&c, &r));
    double best = fmin(dd_plan_allreduce_time(DD_ALLREDUCE_RING, &c.link, NULL, 1, 4, 576),
                       fmin(dd_plan_allreduce_time(DD_ALLREDUCE_TREE, &c.link, NULL, 1, 4, 576),
                            dd_plan_allreduce_time(DD_ALLREDUCE_RHD, &c.link, NULL, 1, 4, 576)));
    CHECK_NEAR(r.time_s, best + dd_plan_allreduce_time(DD_ALLREDUCE_MPI, &c.link, NULL, 1, 4, 24), 1e-15);
    CHECK_NEAR(r.messages, 8, 0); /* rhd at 4 ranks: 2 log2 4 = 4 steps each (fastest here) */
    /* one rank: nothing communicated */
    c.ranks = 1;
    for (int md = DD_SHARD_NONE; md <= DD_SHARD_ZERO3; md++) {
        c.shard = (dd_shard_mode)md;
        CHECK_OK(dd_plan_shard_run(&c, &r));
        CHECK(r.collectives == 0 && r.bytes_sent == 0 && r.time_s == 0 && r.messages == 0, "%s at 1 rank",
              dd_shard_name((dd_shard_mode)md));
    }
    /* JSON: rows, memory by kind, the ratio to none at the same rank count */
    c.ranks = 4;
    dd_plan_shard_result rows[2];
    c.shard = DD_SHARD_NONE;
    CHECK_OK(dd_plan_shard_run(&c, &rows[0]));
    c.shard = DD_SHARD_ZERO3;
    CHECK_OK(dd_plan_shard_run(&c, &rows[1]));
    char *js = NULL;
    CHECK_OK(dd_plan_shard_json(&c, rows, 2, "ethernet-10g", &js));
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    CHECK(root != NULL, "shard plan JSON parses");
    if (root) {
        const cJSON *rw = cJSON_GetObjectItem(root, "rows");
        CHECK(cJSON_GetArraySize(rw) == 2, "2 rows");
        const cJSON *z = cJSON_GetArrayItem(rw, 1);
        const cJSON *mem = cJSON_GetObjectItem(z, "memory_bytes");
        CHECK(strcmp(cJSON_GetObjectItem(z, "shard")->valuestring, "zero3") == 0, "row 1 is zero3");
        CHECK(cJSON_GetObjectItem(mem, "params")->valuedouble == (double)rows[1].mem[0], "params bytes");
        CHECK(cJSON_GetObjectItem(mem, "total")->valuedouble == (double)rows[1].mem_total, "total bytes");
        CHECK_NEAR(cJSON_GetObjectItem(z, "memory_ratio_to_none")->valuedouble,
                   (double)rows[1].mem_total / (double)rows[0].mem_total, 1e-12);
        const cJSON *cm = cJSON_GetObjectItem(z, "comm_per_step");
        CHECK(cJSON_GetObjectItem(cm, "collectives")->valuedouble == rows[1].collectives, "collectives");
        CHECK(strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "inputs"), "model")->valuestring, "gru") == 0,
              "inputs.model");
        cJSON_Delete(root);
    }
    free(js);
    dd_model_destroy(&m);
    dd_model_destroy(&m4);
}

/* The parameter-server step model in closed form (docs/ps.md, Throughput). */
static void test_ps_model(void) {
    dd_plan_ps_cfg c = {.params = 250000, .workers = 4, .servers = 2, .replicas = 0, .repl_floats = 1};
    c.link = (dd_link){0, 0, 0, 0, 1e-9}; /* alpha1 = 0, B = 1 GB/s one way */
    dd_plan_ps_result r;
    CHECK_OK(dd_plan_ps(&c, &r));
    const double M = 1e6; /* 4 P bytes */
    /* alpha = 0, R = 0: step = 2 max(M/B, n M/(k B)) = 2 x 2 ms */
    CHECK_NEAR(r.model_bytes, M, 0);
    CHECK_NEAR(r.worker_s, 1e-3, 1e-15);
    CHECK_NEAR(r.server_pull_s, 2e-3, 1e-15);
    CHECK_NEAR(r.server_push_s, 2e-3, 1e-15);
    CHECK_NEAR(r.comm_s, 2 * fmax(M * 1e-9, 4 * M / 2 * 1e-9), 1e-15);
    CHECK_NEAR(r.pushes_per_s_server, 4 / 4e-3, 1e-9);
    CHECK(r.server_bound == 1, "4 workers on 2 servers: server-bound");
    CHECK_NEAR(r.worker_bytes_step, 2 * M, 0);
    CHECK_NEAR(r.server_bytes_step, 2 * 4 * M / 2, 0);
    /* k >= n: the workers' links bound it, more servers change nothing */
    c.servers = 8;
    CHECK_OK(dd_plan_ps(&c, &r));
    CHECK_NEAR(r.comm_s, 2e-3, 1e-15);
    CHECK(r.server_bound == 0, "4 workers on 8 servers: worker-bound");
    c.servers = 4;
    CHECK_OK(dd_plan_ps(&c, &r));
    CHECK_NEAR(r.comm_s, 2e-3, 1e-15); /* n = k: both equal */
    /* latency and replication: alpha1 = 10 us, R = 1, f = 3 (adam), compute 5 ms */
    c.servers = 2;
    c.replicas = 1;
    c.repl_floats = 3;
    c.compute_s = 5e-3;
    c.link.alpha1 = 10e-6;
    CHECK_OK(dd_plan_ps(&c, &r));
    const double share = 4 * M / 2 * 1e-9; /* n M / (k B) = 2 ms */
    CHECK_NEAR(r.server_push_s, share * (1 + 3), 1e-15);
    CHECK_NEAR(r.push_s, 4 * 10e-6 + share * 4, 1e-15);
    CHECK_NEAR(r.pull_s, 2 * 10e-6 + share, 1e-15);
    CHECK_NEAR(r.latency_s, 6 * 10e-6, 1e-18);
    CHECK_NEAR(r.step_s, 5e-3 + 6 * 10e-6 + 5 * share, 1e-15);
    CHECK_NEAR(r.pushes_per_s_server, 4 / r.step_s, 1e-9);
    CHECK_NEAR(r.server_bytes_step, 2 * 2 * M + 2 * 1 * 3 * 2 * M, 0);
    /* one worker, one server, no replica: 4 alpha + 2 M beta (the bench's fit) */
    dd_plan_ps_cfg one = {.params = 1000, .workers = 1, .servers = 1, .repl_floats = 1};
    one.link = (dd_link){0, 0, 0, 50e-6, 2e-9};
    CHECK_OK(dd_plan_ps(&one, &r));
    CHECK_NEAR(r.comm_s, 4 * 50e-6 + 2 * 4000 * 2e-9, 1e-15);
    /* refusals name the field */
    one.replicas = 1;
    CHECK_ERR(dd_plan_ps(&one, &r), DD_ERR_ARG, "replicas must be in [0, servers - 1 = 0]");
    one.replicas = 0;
    one.workers = 0;
    CHECK_ERR(dd_plan_ps(&one, &r), DD_ERR_ARG, "workers must be >= 1");
    one.workers = 1;
    one.params = 0;
    CHECK_ERR(dd_plan_ps(&one, &r), DD_ERR_ARG, "params must be >= 1");
}

int main(void) {
    test_formulas();
    test_step_model();
    test_run();
    test_presets();
    test_shard_memory();
    test_shard_comm();
    test_ps_model();
    return dd_test_done("test_plan");
}
