/* The model-parallel plan's memory (plan.h dd_plan_mp_memory) against what the
 * model-parallel strategy and the trainer allocate. ctest runs this at 1, 2, 3 and 4
 * ranks.
 *
 * At N ranks every grid T x P with T P dividing N (T > 1 only for models with a
 * tensor-parallel form whose width T divides), with M = P and M = P + 2 micro-batches
 * under 1f1b and gpipe (and interleaved with 2 virtual stages where the stages allow),
 * for resnet, gru (2 layers), hammerstein, tcn, plain SGD, a global batch above the
 * training frames, and a direct-learning DPD through a frozen PA model: the trainer is
 * created with the strategy on every rank and takes two steps; the arena bytes each rank
 * allocated (dd_mem_stats peaks since before the trainer, less what was allocated before)
 * must EQUAL the prediction for that rank, per kind (params, grads, optim,
 * activations). Then the epoch ends (an evaluation): the parameter peak must equal the
 * prediction plus the evaluation's stage buffer (*eval_params), the other kinds
 * unchanged. The layout's largest rank (dd_plan_mp_layout_eval's memory) must equal the
 * maximum over the ranks. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/parallel.h"
#include "distdpd/plan.h"
#include "distdpd/train.h"
#include "test_model_util.h"
#include "test_mpi_util.h"
#include "test_train_util.h"

static int g_rank, g_size, g_cases;
static dd_comm *g_world;

static int all_ok(int ok) { return tm_all_ok(g_world, ok); }

static dd_dataset *small_data(void) {
    size_t n[3] = {3 * 61 + 16, 512, 512};
    return tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 5, NULL);
}

static size_t max_over_ranks(size_t v) {
    uint64_t mine = v, *all = calloc((size_t)g_size, sizeof *all);
    size_t mx = v;
    if (all && dd_comm_allgather(g_world, &mine, sizeof mine, all) == DD_OK)
        for (int r = 0; r < g_size; r++)
            if (all[r] > mx) mx = (size_t)all[r];
    free(all);
    return mx;
}

/* v of rank r (every rank gets it). */
static size_t value_of_rank(size_t v, int r) {
    uint64_t mine = v, *all = calloc((size_t)g_size, sizeof *all);
    size_t out = 0;
    if (all && r >= 0 && r < g_size && dd_comm_allgather(g_world, &mine, sizeof mine, all) == DD_OK) out = (size_t)all[r];
    free(all);
    return out;
}

static void plan_cfg(const dd_train_cfg *c, const dd_dataset *ds, const dd_model *pa, dd_plan_mp_cfg *pc) {
    dd_plan_mp_cfg_default(pc);
    pc->model = c->model;
    pc->model_cfg = c->model_cfg;
    pc->pa = pa;
    pc->task = c->task;
    dd_optim_kind_parse(c->opt, &pc->opt);
    pc->momentum = c->optim.momentum;
    pc->batch = c->batch;
    pc->frame = c->frame;
    pc->frames = (ds->n[DD_SPLIT_TRAIN] - c->frame) / c->stride + 1;
    pc->eval_batch = c->eval_batch;
    pc->nperseg = ds->spec.nperseg;
    const size_t nv = (ds->n[DD_SPLIT_VAL] + pc->nperseg - 1) / pc->nperseg;
    const size_t nt = (ds->n[DD_SPLIT_TEST] + pc->nperseg - 1) / pc->nperseg;
    pc->eval_segments = nv > nt ? nv : nt;
    pc->cluster.nodes = 1;
    pc->cluster.ranks_per_node = g_size;
    pc->cluster.gflops = 1.0;
}

/* One layout: create, two steps, compare; then an evaluation. */
static void check_case(const char *label, const dd_train_cfg *c, const dd_dataset *ds, const dd_model_ref *pa, int T,
                       int P, int M, dd_pp_kind kind, int V) {
    dd_model *pm = NULL;
    if (pa) CHECK_OK(dd_model_create(pa->name, &pa->cfg, &pm));
    dd_plan_mp_cfg pc;
    plan_cfg(c, ds, pm, &pc);
    pc.schedule = kind;
    pc.virt = V;
    size_t pred[DD_MEM_KINDS] = {0}, ev = 0;
    dd_status ps = dd_plan_mp_memory(&pc, T, P, M, g_rank, pred, &ev);
    CHECK(ps == DD_OK, "%s tp %d pp %d M %d: prediction: %s", label, T, P, M, dd_last_error());
    dd_plan_mp_layout lay;
    memset(&lay, 0, sizeof lay);
    /* tp = pp = 1 is planned as plain data parallelism (another strategy): not compared */
    dd_status ls = T * P > 1 ? dd_plan_mp_layout_eval(&pc, T, P, M, DD_SHARD_NONE, &lay) : DD_ERR_ARG;
    CHECK(ls == DD_OK || T * P == 1, "%s tp %d pp %d M %d: layout: %s", label, T, P, M, dd_last_error());

    dd_pp_cfg cc;
    dd_pp_cfg_default(&cc);
    cc.tp = T;
    cc.pp = P;
    cc.micro = M;
    cc.kind = kind;
    cc.virt = V;
    dd_pp *z = NULL;
    dd_strategy st;
    memset(&st, 0, sizeof st);
    CHECK_OK(dd_pp_create(g_world, &cc, &z));
    if (z) dd_pp_strategy(z, &st);
    dd_trainer *tr = NULL;
    dd_mem_stats m0, m1, m2;
    dd_mem_stats_reset_peaks();
    dd_mem_stats_get(&m0);
    int ok = z != NULL && dd_trainer_create(c, ds, pa, &st, &tr) == DD_OK;
    ok = ok && dd_trainer_num_frames(tr) == pc.frames;
    /* two steps (one when a batch takes the whole epoch), no evaluation yet */
    for (int k = 0; ok && k < 2 && !dd_trainer_epoch_done(tr); k++) ok = dd_trainer_step(tr, NULL) == DD_OK;
    ok = all_ok(ok);
    CHECK(ok, "%s tp %d pp %d M %d: two steps on %d ranks: %s", label, T, P, M, g_size, dd_last_error());
    dd_mem_stats_get(&m1);
    if (ok && ps == DD_OK) {
        g_cases++;
        size_t meas[DD_MEM_KINDS];
        for (int k = 0; k < DD_MEM_KINDS; k++) {
            meas[k] = m1.peak[k] - m0.cur[k];
            CHECK(pred[k] == meas[k], "%s tp %d pp %d M %d %s V %d rank %d of %d: %s predicted %zu bytes, allocated %zu",
                  label, T, P, M, dd_pp_kind_name(kind), V, g_rank, g_size, dd_mem_kind_name((dd_mem_kind)k), pred[k],
                  meas[k]);
        }
        /* the layout's figure: the total of its largest rank (by the peak, below) */
        size_t tot = 0;
        for (int k = 0; k < DD_MEM_KINDS; k++) tot += meas[k];
        const size_t at = value_of_rank(tot, ls == DD_OK ? lay.mem_rank : 0);
        CHECK(ls != DD_OK || lay.mem_total == at, "%s tp %d pp %d M %d: rank %d predicted %zu bytes, allocated %zu",
              label, T, P, M, lay.mem_rank, lay.mem_total, at);
        if (g_rank == 0)
            printf("%-16s tp %d pp %d dp %d M %d %-11s V %d: rank 0 params %zu grads %zu optim %zu activations %zu "
                   "(predicted %zu %zu %zu %zu)\n",
                   label, T, P, g_size / (T * P), M, dd_pp_kind_name(kind), V, meas[0], meas[1], meas[2], meas[3],
                   pred[0], pred[1], pred[2], pred[3]);
        /* the end of the epoch evaluates: a buffer for other pipeline ranks' stages */
        while (ok && !dd_trainer_epoch_done(tr)) ok = dd_trainer_step(tr, NULL) == DD_OK;
        ok = all_ok(ok && dd_trainer_end_epoch(tr, NULL) == DD_OK);
        CHECK(ok, "%s: the rest of the epoch: %s", label, dd_last_error());
        dd_mem_stats_get(&m2);
        if (ok) {
            const size_t pk = m2.peak[DD_MEM_PARAMS] - m0.cur[DD_MEM_PARAMS];
            CHECK(pk == pred[DD_MEM_PARAMS] + ev,
                  "%s tp %d pp %d rank %d: parameter peak after evaluation %zu, predicted %zu + %zu", label, T, P,
                  g_rank, pk, pred[DD_MEM_PARAMS], ev);
            for (int k = 1; k < DD_MEM_KINDS; k++)
                CHECK(m2.peak[k] == m1.peak[k], "%s tp %d pp %d rank %d: %s grew during evaluation (%zu -> %zu)", label,
                      T, P, g_rank, dd_mem_kind_name((dd_mem_kind)k), m1.peak[k] - m0.cur[k], m2.peak[k] - m0.cur[k]);
            size_t pk_tot = pk;
            for (int k = 1; k < DD_MEM_KINDS; k++) pk_tot += m2.peak[k] - m0.cur[k];
            CHECK(ls != DD_OK || lay.mem_peak == max_over_ranks(pk_tot),
                  "%s tp %d pp %d: largest rank's peak predicted %zu, measured %zu", label, T, P, lay.mem_peak,
                  max_over_ranks(pk_tot));
        }
    }
    dd_trainer_destroy(&tr);
    dd_pp_destroy(&z);
    dd_model_destroy(&pm);
}

/* Every T x P grid of this rank count for one model (T dividing its width, P at most its
 * stages and the PA model's). */
static void grids(const char *label, const dd_train_cfg *c, const dd_dataset *ds, const dd_model_ref *pa) {
    dd_model *m = NULL, *pm = NULL;
    CHECK_OK(dd_model_create(c->model, &c->model_cfg, &m));
    if (pa) CHECK_OK(dd_model_create(pa->name, &pa->cfg, &pm));
    const size_t S = (m ? dd_model_num_stages(m) : 0) + (pm ? dd_model_num_stages(pm) : 0);
    const int width = dd_model_cfg_get(&c->model_cfg, "hidden");
    dd_model_destroy(&m);
    dd_model_destroy(&pm);
    for (int T = 1; T <= g_size; T++) {
        if (g_size % T || width % T) continue;
        for (int P = 1; T * P <= g_size; P++) {
            if ((g_size / T) % P || (size_t)P > S) continue;
            check_case(label, c, ds, pa, T, P, P, DD_PP_1F1B, 1);
            check_case(label, c, ds, pa, T, P, P + 2, DD_PP_GPIPE, 1);
        }
    }
}

static void test_models(void) {
    dd_dataset *ds = small_data();
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
    static const struct {
        const char *name, *opts;
    } models[] = {{"resnet", "hidden=12,layers=4,kernel=2"},
                  {"gru", "hidden=12,layers=2"},
                  {"hammerstein", "hidden=12,layers=3,memory=3"},
                  {"tcn", "hidden=12,layers=3,kernel=2"}};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        dd_train_cfg cc = c;
        snprintf(cc.model, sizeof cc.model, "%s", models[k].name);
        cc.model_cfg = tm_mcfg(models[k].opts);
        grids(models[k].name, &cc, ds, NULL);
    }
    /* interleaved, 2 virtual stages per rank (resnet: 6 stages) */
    {
        dd_train_cfg cc = c;
        snprintf(cc.model, sizeof cc.model, "resnet");
        cc.model_cfg = tm_mcfg("hidden=12,layers=4,kernel=2");
        if (g_size <= 3) check_case("resnet interl.", &cc, ds, NULL, 1, g_size, 2 * g_size, DD_PP_INTERLEAVED, 2);
        if (g_size == 4) check_case("resnet interl.", &cc, ds, NULL, 2, 2, 4, DD_PP_INTERLEAVED, 2);
    }
    /* plain SGD (no optimiser state) and a global batch above the 62 training frames */
    {
        dd_train_cfg cc = c;
        snprintf(cc.model, sizeof cc.model, "hammerstein");
        cc.model_cfg = tm_mcfg("hidden=12,layers=4,memory=3");
        cc.batch = 100;
        snprintf(cc.opt, sizeof cc.opt, "sgd");
        cc.optim = dd_optim_cfg_default(DD_OPTIM_SGD);
        check_case("hammer. sgd b>n", &cc, ds, NULL, 1, g_size, g_size + 1, DD_PP_1F1B, 1);
        if (g_size > 1) check_case("hammer. sgd b>n", &cc, ds, NULL, g_size, 1, 2, DD_PP_1F1B, 1);
    }
    /* a DPD (gru) by direct learning through a frozen resnet PA model: the PA's stages
     * join the pipeline */
    {
        dd_model_cfg pcfg = tm_mcfg("hidden=6,layers=2,kernel=2");
        dd_model *pm = NULL;
        CHECK_OK(dd_model_create("resnet", &pcfg, &pm));
        float *pp = pm ? dd_calloc(dd_model_params(pm)->total, sizeof(float)) : NULL;
        if (pm && pp) {
            dd_model_init(pm, pp, 11);
            dd_model_ref pa = {"resnet", pcfg, pp, dd_model_params(pm)->total};
            dd_train_cfg cd;
            tt_cfg(&cd, DD_TRAIN_DLA, 6, 16, 3, 12, 2);
            snprintf(cd.model, sizeof cd.model, "gru");
            cd.model_cfg = tm_mcfg("hidden=6,layers=2");
            grids("gru dla", &cd, ds, &pa);
        }
        dd_free(pp);
        dd_model_destroy(&pm);
    }
    dd_dataset_free(&ds);
}

int main(int argc, char **argv) {
    if (dd_comm_init(&argc, &argv) != DD_OK || dd_comm_world(&g_world) != DD_OK) {
        fprintf(stderr, "test_plan_mp_mpi: %s\n", dd_last_error());
        return 1;
    }
    g_rank = dd_comm_rank(g_world);
    g_size = dd_comm_size(g_world);
    test_models();
    CHECK(g_cases > 0, "no layout was compared");
    if (g_rank == 0) printf("%d layouts compared at %d ranks\n", g_cases, g_size);
    int ok = all_ok(dd_t_fail == 0);
    dd_comm_barrier(g_world);
    char name[64];
    snprintf(name, sizeof name, "test_plan_mp_mpi (rank %d of %d)", g_rank, g_size);
    int rc = dd_test_done(name);
    if (!ok && rc == 0) rc = 1;
    dd_comm_free(&g_world);
    dd_comm_finalize();
    return rc;
}
