/* MPI tests of sharded data parallelism (--shard zero1/zero2/zero3, parallel.h). ctest
 * runs this at 1, 2, 3 and 4 ranks.
 *
 * - Equivalence: gru, resnet and hammerstein (small), 2 epochs of 6 steps (a last partial
 *   batch, so some ranks have empty slices at N = 3, 4), for shard none, zero1, zero2 and
 *   zero3: the whole parameters (gathered for zero3) are bit-identical on every rank and
 *   within 1e-5 x max |w| of one process; the test NMSE after 2 epochs within 0.01 dB of
 *   one process. Also a DLA DPD through a frozen PA model under zero3, and clipping that
 *   acts on every step under zero2.
 * - Memory: each rank's arenas hold its slice of the optimiser state (zero1..3), of the
 *   gradients (zero2, zero3) and of the parameters (zero3), plus at most two stage buffers
 *   of each (dd_mem_stats, measured).
 * - Checkpoints: a zero3 run on all ranks stopped after epoch 1 and resumed on the same
 *   ranks equals a straight zero3 run bit for bit; resumed on 1 process with no sharding,
 *   and on the first N-1 ranks with zero2 (N -> M, zero3 -> none/zero2), it equals a
 *   straight one-process run within the tolerance.
 * - Stop agreement under zero3; a model mismatch between ranks fails on every rank;
 *   configuration errors. */
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

#define TOL_PARAM 1e-5

static int g_rank, g_size;
static dd_comm *g_world;
static char g_tmp[512];

static int all_ok(int ok) { return tm_all_ok(g_world, ok); }

/* A strategy for mode m on comm c (destroyed by strat_free). */
typedef struct {
    dd_dp *dp;
    dd_zero *z;
    dd_strategy st;
} strat;

static dd_status strat_make(dd_comm *c, dd_shard_mode m, strat *s) {
    memset(s, 0, sizeof *s);
    if (m == DD_SHARD_NONE || m == DD_SHARD_ZERO1) {
        dd_dp_cfg dc;
        dd_dp_cfg_default(&dc);
        dc.shard = m;
        dc.bucket_mb = 1e-4;
        DD_TRY(dd_dp_create(c, &dc, &s->dp));
        dd_dp_strategy(s->dp, &s->st);
    } else {
        dd_zero_cfg zc;
        dd_zero_cfg_default(&zc);
        zc.shard = m;
        DD_TRY(dd_zero_create(c, &zc, &s->z));
        dd_zero_strategy(s->z, &s->st);
    }
    return DD_OK;
}

static void strat_free(strat *s) {
    dd_dp_destroy(&s->dp);
    dd_zero_destroy(&s->z);
}

/* The whole parameter arena of a trainer on every rank (gathered from the slices when
 * they are sharded). Caller frees. */
static float *whole_params(dd_trainer *tr) {
    float *p = NULL;
    size_t lo = 0, hi = 0, n = dd_trainer_num_floats(tr);
    dd_trainer_storage(tr, &p, NULL, &lo, &hi, NULL, NULL);
    float *w = calloc(n, sizeof *w);
    if (lo == 0 && hi == n) {
        memcpy(w, p, n * sizeof *w);
        return w;
    }
    size_t *cnt = calloc(2 * (size_t)g_size, sizeof *cnt), *dsp = cnt + g_size;
    size_t mine[2] = {lo, hi}, *all = calloc(2 * (size_t)g_size, sizeof *all);
    dd_comm_allgather(g_world, mine, sizeof mine, all);
    for (int r = 0; r < g_size; r++) {
        cnt[r] = (all[2 * r + 1] - all[2 * r]) * sizeof(float);
        dsp[r] = all[2 * r] * sizeof(float);
    }
    dd_comm_allgatherv(g_world, p, w, cnt, dsp);
    free(cnt);
    free(all);
    return w;
}

/* ---------------------------------------------------------------- equivalence */

static void check_mode(const char *model, const dd_model_cfg *mc, const dd_train_cfg *base, const dd_dataset *ds,
                       const dd_model_ref *pa, dd_shard_mode mode, const float *ref, size_t nref, double ref_nmse) {
    dd_train_cfg c = *base;
    snprintf(c.model, sizeof c.model, "%s", model);
    c.model_cfg = *mc;
    strat s;
    CHECK_OK(strat_make(g_world, mode, &s));
    dd_trainer *tr = NULL;
    dd_mem_stats_reset_peaks();
    dd_mem_stats m0;
    dd_mem_stats_get(&m0);
    CHECK_OK(dd_trainer_create(&c, ds, pa, &s.st, &tr));
    int ok = all_ok(tr != NULL && tt_train_epochs(tr, 2) == 0);
    CHECK(ok, "%s %s: training on %d ranks: %s", model, dd_shard_name(mode), g_size, dd_last_error());
    if (ok) {
        const size_t n = dd_trainer_num_floats(tr);
        float *w = whole_params(tr);
        CHECK(tm_same_bytes(g_world, w, n * sizeof(float)), "%s %s: the ranks' parameters differ", model,
              dd_shard_name(mode));
        double d = ref && nref == n ? tt_rel_diff(w, ref, n) : 1.0;
        size_t nh;
        const dd_epoch_record *h = dd_trainer_history(tr, &nh);
        double dn = nh == 2 ? fabs(h[1].test.nmse_db - ref_nmse) : 99;
        if (g_rank == 0)
            printf("%-12s %-5s %d ranks: max rel. parameter difference %.2g, test NMSE %+.4f dB (one process %+.4f)\n",
                   model, dd_shard_name(mode), g_size, d, nh == 2 ? h[1].test.nmse_db : NAN, ref_nmse);
        CHECK(d <= TOL_PARAM, "%s %s: %d ranks vs one process: %.3g", model, dd_shard_name(mode), g_size, d);
        CHECK(dn <= 0.01, "%s %s: test NMSE differs from one process by %.4f dB", model, dd_shard_name(mode), dn);
        /* memory: the slices kept */
        dd_mem_stats m1;
        dd_mem_stats_get(&m1);
        size_t olo, ohi, plo, phi;
        dd_trainer_storage(tr, NULL, NULL, &plo, &phi, &olo, &ohi);
        const size_t slice = ohi - olo, fb = sizeof(float);
        size_t maxst = 0;
        for (size_t k = 0; k < dd_model_num_stages(dd_trainer_model(tr)); k++) {
            dd_stage_info si;
            dd_model_stage_info(dd_trainer_model(tr), k, &si);
            if (si.hi - si.lo > maxst) maxst = si.hi - si.lo;
        }
        const size_t nst = dd_optim_state_arrays(dd_trainer_optim(tr));
        const size_t optim = m1.peak[DD_MEM_OPTIM] - m0.cur[DD_MEM_OPTIM];
        const size_t grads = m1.peak[DD_MEM_GRADS] - m0.cur[DD_MEM_GRADS];
        const size_t params = m1.peak[DD_MEM_PARAMS] - m0.cur[DD_MEM_PARAMS];
        if (mode != DD_SHARD_NONE)
            CHECK(optim <= nst * (slice + 16) * fb, "%s %s: optimiser state %zu bytes for a slice of %zu", model,
                  dd_shard_name(mode), optim, slice);
        if (mode >= DD_SHARD_ZERO2)
            CHECK(grads <= (slice + 16 + 2 * (maxst + 16)) * fb, "%s %s: gradients %zu bytes (slice %zu, stage %zu)",
                  model, dd_shard_name(mode), grads, slice, maxst);
        if (mode == DD_SHARD_ZERO3)
            CHECK(phi - plo == slice && params <= (slice + 16 + 2 * (maxst + 16)) * fb,
                  "%s zero3: parameters %zu bytes (slice %zu, stage %zu)", model, params, slice, maxst);
        else
            CHECK(phi - plo == n, "%s %s: the parameters are whole", model, dd_shard_name(mode));
        free(w);
    }
    dd_trainer_destroy(&tr);
    strat_free(&s);
}

static void test_equivalence(void) {
    dd_dataset *ds = tt_small_data();
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
    struct {
        const char *name;
        const char *mc; /* its options */
    } models[] = {{"gru", "hidden=6,layers=2"},
                  {"resnet", "hidden=8,layers=3,kernel=2"},
                  {"hammerstein", "hidden=8,layers=3,memory=3"}};
    for (size_t k = 0; k < 3; k++) {
        dd_train_cfg cc = c;
        snprintf(cc.model, sizeof cc.model, "%s", models[k].name);
        cc.model_cfg = tm_mcfg(models[k].mc);
        /* the one-process reference, computed on every rank (deterministic) */
        dd_trainer *one = NULL;
        CHECK_OK(dd_trainer_create(&cc, ds, NULL, NULL, &one));
        if (!one || tt_train_epochs(one, 2) != 0) {
            CHECK(0, "%s: one process: %s", models[k].name, dd_last_error());
            dd_trainer_destroy(&one);
            continue;
        }
        size_t nh;
        const dd_epoch_record *h = dd_trainer_history(one, &nh);
        for (int m = DD_SHARD_NONE; m <= DD_SHARD_ZERO3; m++)
            check_mode(models[k].name, &cc.model_cfg, &c, ds, NULL, (dd_shard_mode)m, dd_trainer_params(one),
                       dd_trainer_num_floats(one), h[1].test.nmse_db);
        dd_trainer_destroy(&one);
    }

    /* clipping that acts on every step: the global norm of the reduce-scattered slices */
    {
        dd_train_cfg cc = c;
        cc.clip = 1e-3;
        dd_trainer *one = NULL;
        CHECK_OK(dd_trainer_create(&cc, ds, NULL, NULL, &one));
        if (one && tt_train_epochs(one, 2) == 0) {
            size_t nh;
            const dd_epoch_record *h = dd_trainer_history(one, &nh);
            CHECK(h[0].grad_norm_max > 100 * cc.clip, "clipping acts");
            check_mode("gru", &cc.model_cfg, &cc, ds, NULL, DD_SHARD_ZERO2, dd_trainer_params(one),
                       dd_trainer_num_floats(one), h[1].test.nmse_db);
        }
        dd_trainer_destroy(&one);
    }

    /* a DPD by direct learning through a frozen PA model, zero3 */
    {
        dd_model *pm = NULL;
        dd_model_cfg pc = tm_mcfg("hidden=5");
        CHECK_OK(dd_model_create("gru", &pc, &pm));
        float *pp = pm ? dd_calloc(dd_model_params(pm)->total, sizeof(float)) : NULL;
        if (pm && pp) {
            dd_model_init(pm, pp, 77);
            dd_model_ref pa = {"gru", *dd_model_config(pm), pp, dd_model_params(pm)->total};
            dd_train_cfg cd;
            tt_cfg(&cd, DD_TRAIN_DLA, 4, 16, 3, 12, 2);
            snprintf(cd.model, sizeof cd.model, "resnet");
            dd_model_cfg rc = tm_mcfg("hidden=6,layers=2");
            cd.model_cfg = rc;
            dd_trainer *one = NULL;
            CHECK_OK(dd_trainer_create(&cd, ds, &pa, NULL, &one));
            if (one && tt_train_epochs(one, 2) == 0) {
                size_t nh;
                const dd_epoch_record *h = dd_trainer_history(one, &nh);
                /* DPD runs are compared by the test NMSE of PA_model(DPD(x)) vs G x too */
                check_mode("resnet", &rc, &cd, ds, &pa, DD_SHARD_ZERO3, dd_trainer_params(one),
                           dd_trainer_num_floats(one), h[1].test.nmse_db);
            }
            dd_trainer_destroy(&one);
        }
        dd_free(pp);
        dd_model_destroy(&pm);
    }
    dd_dataset_free(&ds);
}

/* ---------------------------------------------------------------- checkpoints */

/* Trains (or resumes) a run on the first `m` ranks with mode `mode`; the others wait. */
static dd_status run_on(int m, dd_shard_mode mode, const dd_train_cfg *cfg, const char *data, const char *out,
                        int resume, int stop_after) {
    dd_comm *sub = NULL;
    dd_status st = dd_comm_split(g_world, g_rank < m ? 0 : -1, g_rank, &sub);
    if (st != DD_OK) return st;
    if (sub) {
        strat s;
        if ((st = strat_make(sub, mode, &s)) == DD_OK) {
            dd_train_run_opts o;
            memset(&o, 0, sizeof o);
            o.data = resume ? NULL : data;
            o.out = out;
            o.resume = resume;
            o.strategy = &s.st;
            o.stop_after_epochs = stop_after;
            st = dd_train_run(resume ? NULL : cfg, &o);
        }
        strat_free(&s);
        dd_comm_free(&sub);
    }
    return st;
}

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int ok = a && b;
    char buf[65536];
    size_t k;
    while (ok && (k = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, k, b) == k;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = 0;
    return ok;
}

static int copy_run(const char *from, const char *to) {
    static const char *const files[] = {"last.ckpt", "best.ckpt", "config.json", "metrics.jsonl", "history.csv"};
    char a[800], b[800];
    int ok = mkdir(to, 0777) == 0;
    for (int i = 0; ok && i < 5; i++) {
        snprintf(a, sizeof a, "%s/%s", from, files[i]);
        snprintf(b, sizeof b, "%s/%s", to, files[i]);
        ok = copy_file(a, b);
    }
    return ok;
}

static void test_resume(void) {
    char data[600], straight[600], zstraight[600], first[600], dir[600];
    snprintf(data, sizeof data, "%s/data.ddb", g_tmp);
    snprintf(straight, sizeof straight, "%s/straight", g_tmp);
    snprintf(zstraight, sizeof zstraight, "%s/zero3_straight", g_tmp);
    snprintf(first, sizeof first, "%s/zero3_first", g_tmp);
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 5, 16, 3, 12, 2);
    snprintf(c.model, sizeof c.model, "resnet");
    c.model_cfg = tm_mcfg("hidden=6,layers=3,kernel=2");
    int ok = 1;
    if (g_rank == 0) {
        dd_dataset *ds = tt_small_data();
        ok = ds && dd_dataset_save_bin(ds, data) == DD_OK;
        dd_dataset_free(&ds);
        dd_train_run_opts o;
        memset(&o, 0, sizeof o);
        o.data = data;
        o.out = straight;
        ok = ok && dd_train_run(&c, &o) == DD_OK;
        CHECK(ok, "one-process straight run: %s", dd_last_error());
    }
    if (!all_ok(ok)) return;
    CHECK_OK(run_on(g_size, DD_SHARD_ZERO3, &c, data, zstraight, 0, 0));
    CHECK_OK(run_on(g_size, DD_SHARD_ZERO3, &c, data, first, 0, 1));
    dd_run_model ref, zref;
    memset(&ref, 0, sizeof ref);
    memset(&zref, 0, sizeof zref);
    if (g_rank == 0) {
        CHECK_OK(dd_run_model_load(straight, "last", &ref));
        CHECK_OK(dd_run_model_load(zstraight, "last", &zref));
    }
    struct {
        int m;
        dd_shard_mode mode;
        const char *what;
        int exact;
    } cases[] = {{g_size, DD_SHARD_ZERO3, "zero3 -> zero3, same ranks", 1},
                 {1, DD_SHARD_NONE, "zero3 -> one process, no sharding", 0},
                 {g_size > 1 ? g_size - 1 : 1, DD_SHARD_ZERO2, "zero3 -> zero2 on N-1 ranks", 0},
                 {g_size, DD_SHARD_ZERO1, "zero3 -> zero1", 0}};
    for (int k = 0; k < 4; k++) {
        snprintf(dir, sizeof dir, "%s/resume_%d", g_tmp, k);
        ok = g_rank != 0 || copy_run(first, dir);
        if (!all_ok(ok)) return;
        dd_status st = run_on(cases[k].m, cases[k].mode, NULL, NULL, dir, 1, 0);
        CHECK(st == DD_OK, "%s: %s", cases[k].what, dd_last_error());
        if (g_rank == 0 && st == DD_OK && ref.params && zref.params) {
            dd_run_model rm;
            CHECK_OK(dd_run_model_load(dir, "last", &rm));
            if (rm.params) {
                size_t n = dd_model_params(rm.model)->total;
                double dz = tt_rel_diff(rm.params, zref.params, n), d1 = tt_rel_diff(rm.params, ref.params, n);
                printf("resume %s: vs straight zero3 %.3g, vs one process %.3g\n", cases[k].what, dz, d1);
                if (cases[k].exact)
                    CHECK(dz == 0, "%s: differs from the straight zero3 run (%.3g)", cases[k].what, dz);
                CHECK(d1 <= TOL_PARAM, "%s: %.3g from one process", cases[k].what, d1);
                CHECK(rm.epoch == 2, "%s: %d epochs", cases[k].what, rm.epoch);
            }
            dd_run_model_free(&rm);
        }
    }
    dd_run_model_free(&ref);
    dd_run_model_free(&zref);
}

/* ---------------------------------------------------------------- stop, mismatch */

static void test_stop_and_errors(void) {
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 4, 16, 3, 12, 1);
    dd_zero *z = NULL;
    dd_zero_cfg zc;
    dd_zero_cfg_default(&zc);
    zc.shard = DD_SHARD_ZERO3;
    CHECK_OK(dd_zero_create(g_world, &zc, &z));
    volatile int mine = 0;
    dd_zero_set_stop_source(z, &mine);
    dd_strategy st;
    dd_zero_strategy(z, &st);
    CHECK(st.rank == g_rank && st.nranks == g_size, "the strategy carries rank %d of %d", st.rank, st.nranks);
    dd_trainer *tr = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, &st, &tr));
    if (tr) {
        CHECK_OK(dd_trainer_step(tr, NULL));
        CHECK(st.ops->stop_agreed(st.self) == 0, "no stop yet");
        if (g_rank == g_size - 1) mine = 1;
        CHECK_OK(dd_trainer_step(tr, NULL));
        CHECK(all_ok(st.ops->stop_agreed(st.self) == 1), "after the same step every rank agrees to stop");
    }
    dd_trainer_destroy(&tr);
    dd_zero_destroy(&z);
    if (g_size > 1) {
        dd_train_cfg cm = c;
        dd_model_cfg_set(&cm.model_cfg, "hidden", g_rank == 0 ? 4 : 5);
        CHECK_OK(dd_zero_create(g_world, &zc, &z));
        dd_zero_strategy(z, &st);
        CHECK_ERR(dd_trainer_create(&cm, ds, NULL, &st, &tr), DD_ERR_MISMATCH, "same model");
        CHECK(tr == NULL, "no trainer");
        dd_zero_destroy(&z);
    }
    zc.shard = DD_SHARD_ZERO1;
    CHECK_ERR(dd_zero_create(g_world, &zc, &z), DD_ERR_ARG, "zero2 and zero3");
    dd_dp_cfg dc;
    dd_dp_cfg_default(&dc);
    dc.shard = DD_SHARD_ZERO3;
    dd_dp *dp = NULL;
    CHECK_ERR(dd_dp_create(g_world, &dc, &dp), DD_ERR_ARG, "none or zero1");
    dd_shard_mode sm;
    CHECK_ERR(dd_shard_parse("zero4", &sm), DD_ERR_ARG, "zero4");
    CHECK_OK(dd_shard_parse("zero3", &sm));
    CHECK(sm == DD_SHARD_ZERO3 && strcmp(dd_shard_name(sm), "zero3") == 0, "shard names");
    size_t b[5];
    dd_shard_partition(100, 4, b);
    CHECK(b[0] == 0 && b[1] == 32 && b[2] == 64 && b[3] == 96 && b[4] == 100, "partition %zu %zu %zu %zu %zu", b[0],
          b[1], b[2], b[3], b[4]);
    dd_shard_partition(20, 4, b);
    CHECK(b[1] == 16 && b[2] == 20 && b[3] == 20 && b[4] == 20, "partition with empty slices");
    dd_dataset_free(&ds);
}

int main(int argc, char **argv) {
    if (dd_comm_init(&argc, &argv) != DD_OK || dd_comm_world(&g_world) != DD_OK) {
        fprintf(stderr, "test_shard_mpi: %s\n", dd_last_error());
        return 1;
    }
    g_rank = dd_comm_rank(g_world);
    g_size = dd_comm_size(g_world);
    memset(g_tmp, 0, sizeof g_tmp);
    if (g_rank == 0) snprintf(g_tmp, sizeof g_tmp, "%s", dd_test_tmpdir());
    dd_comm_bcast(g_world, g_tmp, sizeof g_tmp, 0);
    double t0 = dd_now();
    test_equivalence();
    double t1 = dd_now();
    test_resume();
    double t2 = dd_now();
    test_stop_and_errors();
    if (g_rank == 0) printf("times: equivalence %.1f s, resume %.1f s\n", t1 - t0, t2 - t1);
    int ok = all_ok(dd_t_fail == 0);
    dd_comm_barrier(g_world);
    char name[64];
    snprintf(name, sizeof name, "test_shard_mpi (rank %d of %d)", g_rank, g_size);
    int rc = dd_test_done(name);
    if (!ok && rc == 0) rc = 1;
    dd_comm_free(&g_world);
    dd_comm_finalize();
    return rc;
}
