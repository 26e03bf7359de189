/* MPI tests of pipeline parallelism (parallel.h, dd_pp). ctest runs this at 1, 2, 3 and 4
 * ranks; the layouts are every (pp P, replicas D) with P D = N: 1x1 (the executor's
 * micro-batching alone), 2x1, 3x1, 4x1 and 2x2.
 *
 * - Equivalence with one process: resnet, tcn, stacked gru and the Hammerstein cascade
 *   under 1f1b and gpipe with M < P, M not a multiple of P and M = 2P: the loss and the
 *   gradient of one batch (rel. 1e-5), and after 2 epochs every parameter (rel. 1e-5) and
 *   the test NMSE (0.01 dB); every replica bit-identical.
 * - Direct-learning DPD through a frozen PA model whose stages are split across the ranks
 *   (a group starting exactly at the PA model and one starting inside it, so that the PA
 *   input travels with the activations and its gradient back).
 * - Memory: each rank keeps only its stages' parameters, gradients and optimiser state.
 * - Checkpoints: a pipeline run stopped after epoch 1 and resumed on one process, and a
 *   one-process checkpoint resumed under the pipeline, equal the straight run.
 * - A 20 ms delay before every send of one rank (ordering races) changes nothing.
 * - A rank that waits for a message that never comes fails after the time limit, naming
 *   the micro-batch, the peer and the step (no hang); configuration errors; ranks at other
 *   SIMD levels (tcn's stage layout differs) refused on every rank. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/parallel.h"
#include "distdpd/train.h"
#include "nn/simd.h" /* dd_nn_simd_set: ranks at other SIMD levels */
#include "test_model_util.h"
#include "test_mpi_util.h"
#include "test_train_util.h"

#define TOL 1e-5

static int g_rank, g_size;
static int g_first; /* this rank belongs to the first replica (set by pp_make) */
static dd_comm *g_world;
static char g_tmp[512];

static int all_ok(int ok) { return tm_all_ok(g_world, ok); }

static dd_status pp_make(int P, int M, dd_pp_kind kind, const char *split, dd_pp **z, dd_strategy *st) {
    dd_pp_cfg c;
    dd_pp_cfg_default(&c);
    c.pp = P;
    c.micro = M;
    c.kind = kind;
    c.virt = kind == DD_PP_INTERLEAVED ? 2 : 1;
    c.split = split;
    DD_TRY(dd_pp_create(g_world, &c, z));
    dd_pp_strategy(*z, st);
    g_first = dd_pp_grid(*z)->dp == 0;
    return DD_OK;
}

/* A whole arena on every rank from the first replica's storage (each rank holds its
 * ranges one after the other): disjoint pieces summed over the world. */
static float *whole_of(dd_trainer *tr, const float *local, int P) {
    (void)P;
    const size_t n = dd_trainer_num_floats(tr);
    float *w = calloc(n ? n : 1, sizeof *w);
    size_t nr = 0;
    const size_t *lo, *hi;
    dd_trainer_ranges(tr, &nr, &lo, &hi);
    for (size_t k = 0; g_first && k < nr; k++) {
        memcpy(w + lo[k], local, (hi[k] - lo[k]) * sizeof(float));
        local += hi[k] - lo[k];
    }
    dd_comm_allreduce(g_world, DD_ALLREDUCE_RING, w, n, DD_F32); /* x + 0 + ... = x exactly */
    return w;
}

static float *whole_params(dd_trainer *tr, int P) { return whole_of(tr, dd_trainer_params(tr), P); }
static float *whole_grads(dd_trainer *tr, int P) { return whole_of(tr, dd_trainer_grads(tr), P); }

typedef struct {
    const char *name, *opts;
} model_spec;

static void check_layout(const char *what, const dd_train_cfg *c, const dd_dataset *ds, const dd_model_ref *pa, int P,
                         int M, dd_pp_kind kind, const char *split, const tt_reference *ref) {
    dd_pp *z = NULL;
    dd_strategy st;
    dd_trainer *tr = NULL;
    REQUIRE_OK(pp_make(P, M, kind, split, &z, &st));
    if (!z) return;
    CHECK_OK(dd_trainer_create(c, ds, pa, &st, &tr));
    int ok = all_ok(tr != NULL);
    CHECK(ok, "%s pp %d M %d %s: trainer: %s", what, P, M, dd_pp_kind_name(kind), dd_last_error());
    if (ok) {
        /* one batch's loss and gradient */
        double loss = 0;
        ok = all_ok(dd_trainer_loss_grad(tr, 0, 0, &loss) == DD_OK);
        CHECK(ok, "%s: loss_grad: %s", what, dd_last_error());
        if (ok) {
            float *g = whole_grads(tr, P);
            const double dg = tt_rel_diff(g, ref->grad, ref->n), dl = fabs(loss - ref->loss) / fabs(ref->loss);
            CHECK(dg <= TOL && dl <= TOL, "%s pp %d M %d %s: gradient rel. diff %.3g, loss rel. diff %.3g", what, P, M,
                  dd_pp_kind_name(kind), dg, dl);
            free(g);
        }
        /* memory: exactly the parameters of this rank's stages (the split's groups) */
        size_t b[64], nb = 0, nr = 0, hold = 0, olo, ohi;
        const size_t *lo, *hi;
        dd_trainer_ranges(tr, &nr, &lo, &hi);
        dd_trainer_storage(tr, NULL, NULL, NULL, NULL, &olo, &ohi);
        CHECK_OK(dd_pp_split_get(z, b, 64, &nb));
        const dd_model *m = dd_trainer_model(tr);
        const size_t Sm = dd_model_num_stages(m);
        size_t k = 0;
        int same = 1;
        for (size_t v = (size_t)dd_pp_grid(z)->pp; v + 1 < nb; v += (size_t)P) {
            const size_t s0 = b[v], s1 = b[v + 1] < Sm ? b[v + 1] : Sm;
            if (s0 >= s1) continue;
            dd_stage_info x, y;
            dd_model_stage_info(m, s0, &x);
            dd_model_stage_info(m, s1 - 1, &y);
            same = same && k < nr && lo[k] == x.lo && hi[k] == y.hi;
            hold += y.hi - x.lo;
            k++;
        }
        CHECK(same && k == nr, "%s: rank %d keeps %zu ranges, not its stages' %zu", what, g_rank, nr, k);
        CHECK(olo == 0 && ohi == hold, "%s: rank %d's storage holds %zu floats, its stages %zu (of %zu)", what, g_rank,
              ohi - olo, hold, ref->n);
        /* 2 epochs */
        ok = all_ok(tt_train_epochs(tr, 2) == 0);
        CHECK(ok, "%s pp %d M %d %s: training: %s", what, P, M, dd_pp_kind_name(kind), dd_last_error());
    }
    if (ok) {
        float *w = whole_params(tr, P);
        CHECK(tm_same_bytes(g_world, w, ref->n * sizeof(float)), "%s: the replicas' parameters differ", what);
        const double d = tt_rel_diff(w, ref->params, ref->n);
        size_t nh;
        const dd_epoch_record *h = dd_trainer_history(tr, &nh);
        const double dn = nh == 2 ? fabs(h[1].test.nmse_db - ref->nmse) : 99;
        if (g_rank == 0)
            printf("%-24s pp %d x dp %d, %-11s M %2d: max rel. parameter difference %.2g, test NMSE %+.4f dB (one "
                   "process %+.4f)\n",
                   what, P, g_size / P, dd_pp_kind_name(kind), M, d, nh == 2 ? h[1].test.nmse_db : NAN, ref->nmse);
        CHECK(d <= TOL, "%s pp %d M %d: %.3g", what, P, M, d);
        CHECK(dn <= 0.01, "%s pp %d M %d: test NMSE differs by %.4f dB", what, P, M, dn);
        free(w);
    }
    dd_trainer_destroy(&tr);
    dd_pp_destroy(&z);
}

static void test_equivalence(void) {
    dd_dataset *ds = tt_small_data();
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    const model_spec models[] = {{"resnet", "hidden=8,layers=6,kernel=2"},
                                 {"tcn", "hidden=6,layers=3,kernel=2"},
                                 {"gru", "hidden=6,layers=3"},
                                 {"hammerstein", "hidden=8,layers=4,memory=3"}};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        dd_train_cfg c;
        tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
        snprintf(c.model, sizeof c.model, "%s", models[k].name);
        c.model_cfg = tm_mcfg(models[k].opts);
        tt_reference ref;
        int ok = all_ok(tt_reference_make(&c, ds, NULL, &ref) == 0);
        CHECK(ok, "%s: one-process tt_reference: %s", models[k].name, dd_last_error());
        for (int P = 1; ok && P <= g_size; P++) {
            if (g_size % P) continue;
            if (g_size > 1 && P == 1) continue; /* data parallelism alone: test_dp_mpi */
            check_layout(models[k].name, &c, ds, NULL, P, P + 1, DD_PP_1F1B, NULL, &ref); /* not a multiple of P */
            check_layout(models[k].name, &c, ds, NULL, P, 1, DD_PP_GPIPE, NULL, &ref);     /* M < P */
            if (k == 0) {
                check_layout(models[k].name, &c, ds, NULL, P, 2 * P, DD_PP_GPIPE, NULL, &ref);
                /* interleaved, 2 virtual stages per rank (8 stages: P <= 4) */
                check_layout(models[k].name, &c, ds, NULL, P, 2 * P, DD_PP_INTERLEAVED, NULL, &ref);
                check_layout(models[k].name, &c, ds, NULL, P, P + 1, DD_PP_INTERLEAVED, NULL, &ref);
            }
        }
        tt_reference_free(&ref);
    }
    dd_dataset_free(&ds);
}

/* A DPD (gru) through a frozen PA model (resnet, 4 stages): groups that start exactly at
 * the PA model and inside it. */
static void test_dla(void) {
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    /* the frozen PA model: a resnet with fixed random parameters */
    dd_model_cfg pc = tm_mcfg("hidden=6,layers=2,kernel=2");
    dd_model *pm = NULL;
    CHECK_OK(dd_model_create("resnet", &pc, &pm));
    if (!pm) return;
    const size_t pn = dd_model_params(pm)->total;
    float *pp = calloc(pn, sizeof *pp);
    dd_model_init(pm, pp, 11);
    dd_model_ref pa = {"resnet", pc, pp, pn};
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_DLA, 5, 16, 3, 12, 2);
    snprintf(c.model, sizeof c.model, "gru");
    c.model_cfg = tm_mcfg("hidden=5,layers=2"); /* 3 stages, then the PA model's 4 */
    tt_reference ref;
    int ok = all_ok(tt_reference_make(&c, ds, &pa, &ref) == 0);
    CHECK(ok, "dla: one-process tt_reference: %s", dd_last_error());
    const char *splits[5] = {NULL, "7", "4,3", "3,1,3", "2,2,2,1"};
    if (ok && g_size >= 2) {
        const int P = g_size == 4 ? 4 : g_size;
        check_layout("dla (split inside PA)", &c, ds, &pa, P, 3, DD_PP_1F1B, splits[P], &ref);
        if (g_size == 4) check_layout("dla (split inside PA)", &c, ds, &pa, 2, 3, DD_PP_GPIPE, "5,2", &ref);
    } else if (ok) {
        check_layout("dla", &c, ds, &pa, 1, 3, DD_PP_1F1B, NULL, &ref);
    }
    tt_reference_free(&ref);
    free(pp);
    dd_model_destroy(&pm);
    dd_dataset_free(&ds);
}

/* ---------------------------------------------------------------- checkpoints */

/* Epoch 1 under the pipeline, epoch 2 on one process (and the reverse): = 2 epochs on
 * one process. */
static void test_resume(void) {
    if (g_size < 2) return;
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
    snprintf(c.model, sizeof c.model, "resnet");
    c.model_cfg = tm_mcfg("hidden=8,layers=3,kernel=2");
    tt_reference ref;
    int ok = all_ok(tt_reference_make(&c, ds, NULL, &ref) == 0);
    char path[700];
    snprintf(path, sizeof path, "%s/pp.ckpt", g_tmp);
    const int P = g_size;
    for (int dir = 0; ok && dir < 2; dir++) {
        /* first epoch: dir 0 under the pipeline, dir 1 on one process (rank 0 writes) */
        dd_pp *z = NULL;
        dd_strategy st;
        dd_trainer *tr = NULL;
        if (dir == 0) {
            REQUIRE_OK(pp_make(P, 3, DD_PP_1F1B, NULL, &z, &st));
            CHECK_OK(dd_trainer_create(&c, ds, NULL, &st, &tr));
            ok = all_ok(tr && tt_train_epochs(tr, 1) == 0);
            const dd_strategy_ops *ops = st.ops;
            ok = ok && all_ok(ops->before_save(st.self, tr) == DD_OK);
            if (ok && g_rank == 0) ok = dd_trainer_save(tr, path) == DD_OK;
        } else {
            CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tr));
            ok = all_ok(tr && tt_train_epochs(tr, 1) == 0);
            if (ok && g_rank == 0) ok = dd_trainer_save(tr, path) == DD_OK;
        }
        ok = all_ok(ok);
        CHECK(ok, "resume %d: first epoch and checkpoint: %s", dir, dd_last_error());
        dd_trainer_destroy(&tr);
        dd_pp_destroy(&z);
        if (!ok) break;
        /* second epoch: the other way */
        if (dir == 0) {
            CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tr));
        } else {
            REQUIRE_OK(pp_make(P, 2, DD_PP_GPIPE, NULL, &z, &st));
            CHECK_OK(dd_trainer_create(&c, ds, NULL, &st, &tr));
        }
        ok = all_ok(tr && dd_trainer_load(tr, path, 0) == DD_OK && tt_train_epochs(tr, 1) == 0);
        CHECK(ok, "resume %d: second epoch: %s", dir, dd_last_error());
        if (ok) {
            float *w = dir == 0 ? NULL : whole_params(tr, P);
            const double d = tt_rel_diff(w ? w : dd_trainer_params(tr), ref.params, ref.n);
            if (g_rank == 0)
                printf("resume: epoch 1 %s, epoch 2 %s: max rel. parameter difference %.2g\n",
                       dir == 0 ? "pipeline" : "one process", dir == 0 ? "one process" : "pipeline", d);
            CHECK(d <= TOL, "resume %d: %.3g", dir, d);
            free(w);
        }
        dd_trainer_destroy(&tr);
        dd_pp_destroy(&z);
    }
    tt_reference_free(&ref);
    dd_dataset_free(&ds);
}

/* ---------------------------------------------------------------- races and time limits */

static void test_delay(void) {
    if (g_size < 2) return;
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 1);
    snprintf(c.model, sizeof c.model, "hammerstein");
    c.model_cfg = tm_mcfg("hidden=8,layers=4,memory=3");
    float *w[2] = {NULL, NULL};
    for (int delayed = 0; delayed < 2; delayed++) {
        char v[32];
        snprintf(v, sizeof v, "%d:20", g_size - 1); /* the last rank: 20 ms before each send */
        if (delayed) setenv("DD_PP_DELAY", v, 1);
        dd_pp *z = NULL;
        dd_strategy st;
        dd_trainer *tr = NULL;
        REQUIRE_OK(pp_make(g_size, 5, DD_PP_1F1B, NULL, &z, &st));
        unsetenv("DD_PP_DELAY");
        CHECK_OK(dd_trainer_create(&c, ds, NULL, &st, &tr));
        /* 4 steps: enough for every message kind, quick despite the delays */
        int ok = tr != NULL;
        for (int k = 0; ok && k < 4; k++) ok = dd_trainer_step(tr, NULL) == DD_OK;
        ok = all_ok(ok);
        CHECK(ok, "delay %d: %s", delayed, dd_last_error());
        if (ok) w[delayed] = whole_params(tr, g_size);
        dd_trainer_destroy(&tr);
        dd_pp_destroy(&z);
    }
    if (w[0] && w[1]) {
        dd_model *m = NULL;
        dd_model_create("hammerstein", &c.model_cfg, &m);
        const size_t n = m ? dd_model_params(m)->total : 0;
        CHECK(n > 0 && memcmp(w[0], w[1], n * sizeof(float)) == 0,
              "a 20 ms delay on rank %d's sends changed the parameters", g_size - 1);
        dd_model_destroy(&m);
    }
    free(w[0]);
    free(w[1]);
    dd_dataset_free(&ds);
}

/* Rank 1 steps alone: it waits for rank 0's activation, which never comes. */
static void test_timeout(void) {
    if (g_size != 2) return;
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 1);
    snprintf(c.model, sizeof c.model, "resnet");
    c.model_cfg = tm_mcfg("hidden=8,layers=3,kernel=2");
    setenv("DD_PP_TIMEOUT", "0.5", 1);
    dd_pp *z = NULL;
    dd_strategy st;
    dd_trainer *tr = NULL;
    REQUIRE_OK(pp_make(2, 2, DD_PP_1F1B, NULL, &z, &st));
    unsetenv("DD_PP_TIMEOUT");
    CHECK_OK(dd_trainer_create(&c, ds, NULL, &st, &tr));
    if (g_rank == 1 && tr) {
        const double t0 = dd_comm_wtime();
        dd_status s = dd_trainer_step(tr, NULL);
        const double t = dd_comm_wtime() - t0;
        CHECK(s == DD_ERR_TIMEOUT, "a lone rank's step: %s (%s)", dd_status_str(s), dd_last_error());
        CHECK(strstr(dd_last_error(), "activation of micro-batch 0 from pipeline rank 0") &&
                  strstr(dd_last_error(), "step 1") && strstr(dd_last_error(), "no answer"),
              "timeout message: %s", dd_last_error());
        CHECK(t < 10.0, "the wait took %.2f s (limit 0.5 s)", t);
    }
    dd_trainer_destroy(&tr);
    dd_pp_destroy(&z);
    CHECK_OK(dd_comm_barrier(g_world));
    dd_dataset_free(&ds);
}

/* The grid follows the nodes: with nodes {0, 2} and {1, 3} (DD_COMM_NODE_OF), --pp 2
 * makes the pipelines {0, 2} and {1, 3}, and training on that grid equals one process;
 * dp fastest puts the pipelines across the nodes. */
static void test_grid(void) {
    if (g_size != 4) return;
    dd_dataset *ds = tt_small_data();
    dd_train_cfg tc;
    tt_cfg(&tc, DD_TRAIN_PA, 6, 16, 3, 12, 2);
    snprintf(tc.model, sizeof tc.model, "resnet");
    tc.model_cfg = tm_mcfg("hidden=8,layers=6,kernel=2");
    tt_reference ref;
    if (ds && all_ok(tt_reference_make(&tc, ds, NULL, &ref) == 0)) {
        setenv("DD_COMM_NODE_OF", "0,1,0,1", 1);
        check_layout("resnet, nodes {0,2} {1,3}", &tc, ds, NULL, 2, 3, DD_PP_1F1B, NULL, &ref);
        unsetenv("DD_COMM_NODE_OF");
        tt_reference_free(&ref);
    }
    dd_dataset_free(&ds);
    setenv("DD_COMM_NODE_OF", "0,1,0,1", 1);
    dd_pp_cfg c;
    dd_pp_cfg_default(&c);
    c.pp = 2;
    dd_pp *z = NULL;
    CHECK_OK(dd_pp_create(g_world, &c, &z));
    const dd_grid *g = dd_pp_grid(z);
    const int want_pp[4] = {0, 0, 1, 1}, want_dp[4] = {0, 1, 0, 1};
    CHECK(g && g->nodes == 2 && g->pp_intra == 1 && g->pp == want_pp[g_rank] && g->dp == want_dp[g_rank],
          "rank %d: nodes %d, pipelines within a node %d, (pp %d, dp %d)", g_rank, g ? g->nodes : -1,
          g ? g->pp_intra : -1, g ? g->pp : -1, g ? g->dp : -1);
    dd_pp_destroy(&z);
    CHECK_OK(dd_grid_parse_order("dp,tp,pp", c.order));
    CHECK_OK(dd_pp_create(g_world, &c, &z));
    g = dd_pp_grid(z);
    CHECK(g && g->pp_intra == 0 && g->pp == (g_rank & 1) && g->dp == (g_rank >> 1),
          "dp fastest: rank %d at (pp %d, dp %d), pipelines within a node %d", g_rank, g ? g->pp : -1,
          g ? g->dp : -1, g ? g->pp_intra : -1);
    dd_pp_destroy(&z);
    unsetenv("DD_COMM_NODE_OF");
    int order[3];
    CHECK_ERR(dd_grid_parse_order("tp,pp", order), DD_ERR_ARG, "expected tp, pp and dp once each");
    CHECK_ERR(dd_grid_parse_order("tp,tp,dp", order), DD_ERR_ARG, "--grid-order 'tp,tp,dp'");
    setenv("DD_COMM_NODE_OF", "0,1", 1);
    CHECK_ERR(dd_pp_create(g_world, &c, &z), DD_ERR_ARG, "DD_COMM_NODE_OF='0,1': expected 4 node numbers");
    unsetenv("DD_COMM_NODE_OF");
}

static void test_errors(void) {
    dd_pp_cfg c;
    dd_pp_cfg_default(&c);
    dd_pp *z = NULL;
    if (g_size == 3) {
        c.pp = 2;
        CHECK_ERR(dd_pp_create(g_world, &c, &z), DD_ERR_ARG, "--pp 2 does not divide the 3 ranks");
    }
    c.pp = g_size;
    c.micro = 0;
    c.virt = 2;
    CHECK_ERR(dd_pp_cfg_check(&c, g_size), DD_ERR_ARG, "--virtual 2 needs --schedule interleaved");
    c.virt = 1;
    c.micro = 5000;
    CHECK_ERR(dd_pp_cfg_check(&c, g_size), DD_ERR_ARG, "at most 4096 micro-batches");
    /* more pipeline ranks than stages: a clear error at the trainer's layout */
    if (g_size >= 4) {
        dd_dataset *ds = tt_small_data();
        dd_train_cfg tc;
        tt_cfg(&tc, DD_TRAIN_PA, 6, 16, 3, 12, 1);
        snprintf(tc.model, sizeof tc.model, "hammerstein");
        tc.model_cfg = tm_mcfg("hidden=8,layers=3,memory=3"); /* 3 stages */
        dd_strategy st;
        REQUIRE_OK(pp_make(g_size, 4, DD_PP_1F1B, NULL, &z, &st));
        dd_trainer *tr = NULL;
        CHECK_ERR(dd_trainer_create(&tc, ds, NULL, &st, &tr), DD_ERR_ARG, "cannot split 3 stages into 4 pipeline groups");
        dd_pp_destroy(&z);
        dd_dataset_free(&ds);
    }
}

/* Ranks at other SIMD levels build tcn with other stage layouts (AVX2 and the generic level
 * pass pre-activations between its stages, AVX-512 Hardswish's outputs): the pipeline
 * refuses on every rank instead of training on mixed activations. */
static void test_mixed_simd(void) {
    if (g_size < 2 || dd_nn_simd_supported() < DD_SIMD_AVX512) {
        if (g_rank == 0)
            printf("mixed SIMD levels: skipped (%s)\n", g_size < 2 ? "one rank" : "no AVX-512 on this machine");
        return;
    }
    const int was = dd_nn_simd_level();
    dd_nn_simd_set(g_rank == 1 ? DD_SIMD_AVX2 : DD_SIMD_AVX512);
    dd_dataset *ds = tt_small_data();
    dd_train_cfg tc;
    tt_cfg(&tc, DD_TRAIN_PA, 6, 16, 3, 12, 1);
    snprintf(tc.model, sizeof tc.model, "tcn");
    tc.model_cfg = tm_mcfg("hidden=6,layers=3,kernel=2");
    dd_pp *z = NULL;
    dd_strategy st;
    REQUIRE_OK(pp_make(g_size, 2, DD_PP_1F1B, NULL, &z, &st));
    dd_trainer *tr = NULL;
    CHECK_ERR(dd_trainer_create(&tc, ds, NULL, &st, &tr), DD_ERR_MISMATCH,
              "rank 1's model passes other activations between its stages than rank 0's");
    dd_trainer_destroy(&tr);
    dd_pp_destroy(&z);
    dd_dataset_free(&ds);
    dd_nn_simd_set(was);
}

int main(int argc, char **argv) {
    const double t0 = tm_begin(&argc, &argv, &g_world, g_tmp, sizeof g_tmp);
    if (!g_world) return dd_test_done("test_pp_mpi");
    g_rank = dd_comm_rank(g_world);
    g_size = dd_comm_size(g_world);

    test_equivalence();
    test_dla();
    test_resume();
    test_delay();
    test_timeout();
    test_grid();
    test_errors();
    test_mixed_simd();

    return tm_end(&g_world, "test_pp_mpi", t0);
}
