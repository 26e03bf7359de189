/* MPI tests of hybrid model parallelism: tensor parallelism (--tp) with pipelines (--pp)
 * and data-parallel replicas, through the model-parallel strategy (dd_pp with tp > 1).
 * ctest runs this at 1, 2, 3 and 4 ranks, and at 8 ranks (label slow) for the 2 x 2 x 2
 * grid. At N ranks every layout (T, P, D) with T >= 2 and T P D = N runs (N = 2: 2x1x1;
 * 3: 3x1x1; 4: 4x1x1, 2x2x1, 2x1x2; 8: 2x2x2).
 *
 * - Equivalence with one process: resnet, tcn, stacked gru and lstm, the Hammerstein
 *   cascade and arvtdnn (dense pairs): the loss and the gradient of one batch (rel. 1e-5, the whole model's arena
 *   rebuilt from every rank's storage map), and after 2 epochs every parameter (rel.
 *   1e-5) and the test NMSE (0.01 dB); every replica and every tensor-parallel copy of
 *   a replicated parameter bit-identical.
 * - A direct-learning DPD (gru) through a frozen PA model under tp 2.
 * - Checkpoints: written under tp x pp and resumed on one process, and the reverse, equal
 *   the straight run.
 * - Errors: a width the group does not divide, a model without a tensor-parallel form,
 *   tp x pp not dividing the ranks. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/parallel.h"
#include "distdpd/train.h"
#include "test_model_util.h"
#include "test_mpi_util.h"
#include "test_train_util.h"

#define TOL 1e-5

static int g_rank, g_size;
static dd_comm *g_world;
static char g_tmp[512];

static int all_ok(int ok) { return tm_all_ok(g_world, ok); }

static float *whole_of(dd_trainer *tr, const float *local, size_t *copies_differ) {
    return tm_whole_of(g_world, tr, local, copies_differ);
}

static dd_status mp_make(int T, int P, int M, dd_pp **z, dd_strategy *st) {
    dd_pp_cfg c;
    dd_pp_cfg_default(&c);
    c.tp = T;
    c.pp = P;
    c.micro = M;
    DD_TRY(dd_pp_create(g_world, &c, z));
    dd_pp_strategy(*z, st);
    return DD_OK;
}

static void check_layout(const char *what, const dd_train_cfg *c, const dd_dataset *ds, const dd_model_ref *pa, int T,
                         int P, const tt_reference *ref) {
    dd_pp *z = NULL;
    dd_strategy st;
    dd_trainer *tr = NULL;
    CHECK_OK(mp_make(T, P, P + 1, &z, &st));
    if (!z) return;
    CHECK_OK(dd_trainer_create(c, ds, pa, &st, &tr));
    int ok = all_ok(tr != NULL);
    CHECK(ok, "%s tp %d pp %d: trainer: %s", what, T, P, dd_last_error());
    if (ok) {
        CHECK(dd_trainer_whole_floats(tr) == ref->n, "%s: whole model %zu floats, one process %zu", what,
              dd_trainer_whole_floats(tr), ref->n);
        double loss = 0;
        ok = all_ok(dd_trainer_loss_grad(tr, 0, 0, &loss) == DD_OK);
        CHECK(ok, "%s: loss_grad: %s", what, dd_last_error());
        if (ok) {
            size_t differ = 0;
            float *g = whole_of(tr, dd_trainer_grads(tr), &differ);
            const double dg = tt_rel_diff(g, ref->grad, ref->n), dl = fabs(loss - ref->loss) / fabs(ref->loss);
            CHECK(dg <= TOL && dl <= TOL, "%s tp %d pp %d: gradient rel. diff %.3g, loss rel. diff %.3g", what, T, P,
                  dg, dl);
            CHECK(differ == 0, "%s: %zu gradient floats differ between the ranks that hold them", what, differ);
            free(g);
        }
        ok = all_ok(tt_train_epochs(tr, 2) == 0);
        CHECK(ok, "%s tp %d pp %d: training: %s", what, T, P, dd_last_error());
    }
    if (ok) {
        size_t differ = 0;
        float *w = whole_of(tr, dd_trainer_params(tr), &differ);
        const double d = tt_rel_diff(w, ref->params, ref->n);
        size_t nh;
        const dd_epoch_record *h = dd_trainer_history(tr, &nh);
        const double dn = nh == 2 ? fabs(h[1].test.nmse_db - ref->nmse) : 99;
        if (g_rank == 0)
            printf("%-22s tp %d x pp %d x dp %d: max rel. parameter difference %.2g, test NMSE %+.4f dB (one process "
                   "%+.4f)\n",
                   what, T, P, g_size / (T * P), d, nh == 2 ? h[1].test.nmse_db : NAN, ref->nmse);
        CHECK(d <= TOL, "%s tp %d pp %d: %.3g", what, T, P, d);
        CHECK(differ == 0, "%s: %zu parameter floats differ between the ranks that hold them", what, differ);
        CHECK(dn <= 0.01, "%s tp %d pp %d: test NMSE differs by %.4f dB", what, T, P, dn);
        free(w);
    }
    dd_trainer_destroy(&tr);
    dd_pp_destroy(&z);
}

static void test_equivalence(void) {
    dd_dataset *ds = tt_small_data();
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    static const struct {
        const char *name, *opts;
    } models[] = {{"resnet", "hidden=12,layers=4,kernel=2"}, {"tcn", "hidden=12,layers=3,kernel=2"},
                  {"gru", "hidden=12,layers=2"},           {"lstm", "hidden=12,layers=2"},
                  {"hammerstein", "hidden=12,layers=3,memory=3"}, {"arvtdnn", "hidden=12,layers=3,memory=4"}};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        if (g_size == 8 && k > 0) break; /* the 2 x 2 x 2 grid: one model (slow label) */
        dd_train_cfg c;
        tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
        snprintf(c.model, sizeof c.model, "%s", models[k].name);
        c.model_cfg = tm_mcfg(models[k].opts);
        tt_reference ref;
        int ok = all_ok(tt_reference_make(&c, ds, NULL, &ref) == 0);
        CHECK(ok, "%s: one-process tt_reference: %s", models[k].name, dd_last_error());
        for (int T = 2; ok && T <= g_size; T++)
            for (int P = 1; T * P <= g_size; P++) {
                if (g_size % (T * P)) continue;
                if (g_size == 8 && !(T == 2 && P == 2)) continue;
                if (P > 1 && !strcmp(models[k].name, "arvtdnn")) continue; /* one stage: no pipeline */
                check_layout(models[k].name, &c, ds, NULL, T, P, &ref);
            }
        tt_reference_free(&ref);
    }
    dd_dataset_free(&ds);
}

static void test_dla(void) {
    if (g_size % 2 || g_size > 4) return;
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    dd_model_cfg pc = tm_mcfg("hidden=6,layers=2,kernel=2");
    dd_model *pm = NULL;
    CHECK_OK(dd_model_create("resnet", &pc, &pm));
    if (!pm) return;
    const size_t pn = dd_model_params(pm)->total;
    float *pp = calloc(pn, sizeof *pp);
    CHECK_OK(dd_model_init(pm, pp, 11));
    dd_model_ref pa = {"resnet", pc, pp, pn};
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_DLA, 6, 16, 3, 12, 2);
    snprintf(c.model, sizeof c.model, "gru");
    c.model_cfg = tm_mcfg("hidden=6,layers=2");
    tt_reference ref;
    if (all_ok(tt_reference_make(&c, ds, &pa, &ref) == 0))
        check_layout("dla gru -> PA", &c, ds, &pa, 2, g_size / 2, &ref);
    tt_reference_free(&ref); /* also what it made when another rank failed */
    free(pp);
    dd_model_destroy(&pm);
    dd_dataset_free(&ds);
}

/* Epoch 1 under tp x pp, epoch 2 on one process, and the reverse. */
static void test_resume(void) {
    if (g_size != 4) return;
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
    snprintf(c.model, sizeof c.model, "resnet");
    c.model_cfg = tm_mcfg("hidden=12,layers=4,kernel=2");
    tt_reference ref;
    int ok = all_ok(tt_reference_make(&c, ds, NULL, &ref) == 0);
    char path[700];
    snprintf(path, sizeof path, "%s/hy.ckpt", g_tmp);
    for (int dir = 0; ok && dir < 2; dir++) {
        dd_pp *z = NULL;
        dd_strategy st;
        dd_trainer *tr = NULL;
        if (dir == 0) {
            REQUIRE_OK(mp_make(2, 2, 3, &z, &st));
            CHECK_OK(dd_trainer_create(&c, ds, NULL, &st, &tr));
            ok = all_ok(tr && tt_train_epochs(tr, 1) == 0);
            ok = ok && all_ok(st.ops->before_save(st.self, tr) == DD_OK);
        } else {
            CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tr));
            ok = all_ok(tr && tt_train_epochs(tr, 1) == 0);
        }
        if (ok && g_rank == 0) ok = dd_trainer_save(tr, path) == DD_OK;
        ok = all_ok(ok);
        CHECK(ok, "resume %d: first epoch and checkpoint: %s", dir, dd_last_error());
        dd_trainer_destroy(&tr);
        dd_pp_destroy(&z);
        if (!ok) break;
        if (dir == 0) {
            CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tr));
        } else {
            REQUIRE_OK(mp_make(2, 2, 2, &z, &st));
            CHECK_OK(dd_trainer_create(&c, ds, NULL, &st, &tr));
        }
        ok = all_ok(tr && dd_trainer_load(tr, path, 0) == DD_OK && tt_train_epochs(tr, 1) == 0);
        CHECK(ok, "resume %d: second epoch: %s", dir, dd_last_error());
        if (ok) {
            float *w = whole_of(tr, dd_trainer_params(tr), NULL);
            const double d = tt_rel_diff(w, ref.params, ref.n);
            if (g_rank == 0)
                printf("resume: epoch 1 %s, epoch 2 %s: max rel. parameter difference %.2g\n",
                       dir == 0 ? "tp 2 x pp 2" : "one process", dir == 0 ? "one process" : "tp 2 x pp 2", d);
            CHECK(d <= TOL, "resume %d: %.3g", dir, d);
            free(w);
        }
        dd_trainer_destroy(&tr);
        dd_pp_destroy(&z);
    }
    tt_reference_free(&ref);
    dd_dataset_free(&ds);
}

static void test_errors(void) {
    if (g_size < 2) return;
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 1);
    dd_pp *z = NULL;
    dd_strategy st;
    dd_trainer *tr = NULL;
    const int T = g_size == 3 ? 3 : 2;
    CHECK_OK(mp_make(T, 1, 1, &z, &st));
    snprintf(c.model, sizeof c.model, "resnet");
    c.model_cfg = tm_mcfg(T == 3 ? "hidden=8" : "hidden=7");
    char want[80];
    snprintf(want, sizeof want, "resnet --hidden %d is not divisible by --tp %d", T == 3 ? 8 : 7, T);
    CHECK_ERR(dd_trainer_create(&c, ds, NULL, &st, &tr), DD_ERR_ARG, want);
    snprintf(c.model, sizeof c.model, "gmp");
    c.model_cfg = tm_mcfg("");
    CHECK_ERR(dd_trainer_create(&c, ds, NULL, &st, &tr), DD_ERR_UNSUPPORTED, "model gmp has no tensor-parallel form");
    dd_pp_destroy(&z);
    if (g_size == 3 || g_size == 4) {
        dd_pp_cfg pc;
        dd_pp_cfg_default(&pc);
        pc.tp = 2;
        pc.pp = g_size == 3 ? 1 : 3;
        char msg[96];
        snprintf(msg, sizeof msg, "--tp 2 x --pp %d = %d does not divide the %d ranks", pc.pp, 2 * pc.pp, g_size);
        CHECK_ERR(dd_pp_create(g_world, &pc, &z), DD_ERR_ARG, msg);
    }
    dd_dataset_free(&ds);
}

int main(int argc, char **argv) {
    const double t0 = tm_begin(&argc, &argv, &g_world, g_tmp, sizeof g_tmp);
    if (!g_world) return dd_test_done("test_hybrid_mpi");
    g_rank = dd_comm_rank(g_world);
    g_size = dd_comm_size(g_world);

    test_equivalence();
    test_dla();
    test_resume();
    test_errors();

    return tm_end(&g_world, "test_hybrid_mpi", t0);
}
