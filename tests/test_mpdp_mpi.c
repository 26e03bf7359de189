/* MPI tests of the data-parallel dimension of a model-parallel grid (--pp / --tp with
 * replicas): --compress and --shard zero1 (dd_pp_cfg.compress / .shard). ctest runs this
 * at 1-4 ranks; the grids run where there are replicas: np 4 as pp 2 x dp 2 and tp 2 x
 * dp 2, np 2 as pp 1 x dp 2, np 3 as pp 1 x dp 3 (np 1: the compressor's round trip
 * alone).
 *
 * - fp32 compression (the quantised ring, lossless) gives the same gradient and the same
 *   parameters after 2 epochs as the plain exchange, bit for bit.
 * - Lossy compressors (int8, topk) with error feedback: over two exchanges of the same
 *   batch, exchanged sum + sum over the replicas of (new residual - old residual) equals
 *   the uncompressed sum (rel. 1e-5): nothing is lost, only delayed; they train (finite,
 *   test NMSE within 1 dB of one process after 2 epochs).
 * - zero1: the parameters after 2 epochs equal one process (rel. 1e-5), the test NMSE
 *   within 0.01 dB, the replicas bit-identical; each rank's optimiser state is exactly its
 *   slice of its storage (dd_shard_partition over the D replicas: 1/D, dd_mem_stats).
 * - Checkpoints: int8 stopped after epoch 1 and resumed with the same layout equals the
 *   straight compressed run bit for bit (residuals restored per rank); zero1 (+ int8)
 *   under pp 2 x dp 2 resumed under tp 2 x dp 2 zero1 and on one process equals one process
 *   (rel. 1e-5; the residuals of another layout start at zero, so the run with int8 is
 *   compared loosely). */
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

static float *whole_of(dd_trainer *tr, const float *local, size_t *differ) {
    return tm_whole_of(g_world, tr, local, differ);
}

static dd_status mp_make(int T, int P, const char *compress, dd_shard_mode shard, dd_pp **z, dd_strategy *st) {
    dd_pp_cfg c;
    dd_pp_cfg_default(&c);
    c.tp = T;
    c.pp = P;
    c.micro = 2;
    c.shard = shard;
    if (compress) DD_TRY(dd_compress_parse(&c.compress, compress));
    DD_TRY(dd_pp_create(g_world, &c, z));
    dd_pp_strategy(*z, st);
    return DD_OK;
}

/* The layouts (T, P) with D = N / (T P) >= 2 replicas tested at this size. */
static int layouts(int T[2], int P[2]) {
    if (g_size == 4) {
        T[0] = 1, P[0] = 2; /* pp 2 x dp 2 */
        T[1] = 2, P[1] = 1; /* tp 2 x dp 2 */
        return 2;
    }
    if (g_size >= 2) {
        T[0] = 1, P[0] = 1; /* dp N through the grid */
        return 1;
    }
    T[0] = 1, P[0] = 1; /* one rank: the compressor's round trip alone */
    return 1;
}

static void cfg_resnet(dd_train_cfg *c) {
    tt_cfg(c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
    snprintf(c->model, sizeof c->model, "resnet");
    c->model_cfg = tm_mcfg("hidden=12,layers=4,kernel=2");
}

/* A trainer on the grid; NULL (and a failed check) if it could not be made on every rank. */
static dd_trainer *grid_trainer(const dd_train_cfg *c, const dd_dataset *ds, int T, int P, const char *cx,
                                dd_shard_mode shard, dd_pp **z) {
    dd_strategy st;
    dd_trainer *tr = NULL;
    dd_status s = mp_make(T, P, cx, shard, z, &st);
    if (s == DD_OK) s = dd_trainer_create(c, ds, NULL, &st, &tr);
    int ok = all_ok(s == DD_OK && tr);
    CHECK(ok, "tp %d pp %d %s %s: trainer: %s", T, P, cx ? cx : "none", dd_shard_name(shard), dd_last_error());
    if (!ok) {
        dd_trainer_destroy(&tr);
        dd_pp_destroy(z);
    }
    return tr;
}

/* fp32 equals the plain exchange bit for bit (gradient of a batch, parameters after 2 epochs). */
static void test_fp32(const dd_dataset *ds) {
    if (g_size < 2) return;
    dd_train_cfg c;
    cfg_resnet(&c);
    int T[2], P[2];
    const int nl = layouts(T, P);
    for (int l = 0; l < nl; l++) {
        float *g[2] = {NULL, NULL}, *w[2] = {NULL, NULL};
        double loss[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            dd_pp *z = NULL;
            dd_trainer *tr = grid_trainer(&c, ds, T[l], P[l], k ? "fp32" : NULL, DD_SHARD_NONE, &z);
            if (!tr) break;
            int ok = all_ok(dd_trainer_loss_grad(tr, 0, 0, &loss[k]) == DD_OK);
            if (ok) g[k] = whole_of(tr, dd_trainer_grads(tr), NULL);
            ok = ok && all_ok(tt_train_epochs(tr, 2) == 0);
            CHECK(ok, "fp32 tp %d pp %d: %s", T[l], P[l], dd_last_error());
            size_t differ = 0;
            if (ok) w[k] = whole_of(tr, dd_trainer_params(tr), &differ);
            CHECK(differ == 0, "%s tp %d pp %d: %zu parameter floats differ between the ranks that hold them",
                  k ? "fp32" : "plain", T[l], P[l], differ);
            dd_trainer_destroy(&tr);
            dd_pp_destroy(&z);
        }
        if (w[0] && w[1] && g[0] && g[1]) {
            dd_pp *z = NULL;
            dd_trainer *tr = grid_trainer(&c, ds, T[l], P[l], NULL, DD_SHARD_NONE, &z);
            const size_t nw = tr ? dd_trainer_whole_floats(tr) : 0;
            dd_trainer_destroy(&tr);
            dd_pp_destroy(&z);
            const int gs = memcmp(g[0], g[1], nw * sizeof(float)) == 0, ws = memcmp(w[0], w[1], nw * sizeof(float)) == 0;
            if (g_rank == 0)
                printf("fp32 tp %d x pp %d x dp %d: gradient %s, parameters after 2 epochs %s (rel. %.2g)\n", T[l], P[l],
                       g_size / (T[l] * P[l]), gs ? "bit-identical" : "differ", ws ? "bit-identical" : "differ",
                       tt_rel_diff(w[1], w[0], nw));
            CHECK(nw > 0 && gs && loss[0] == loss[1], "fp32 tp %d pp %d: gradient and loss bit-identical to the plain exchange",
                  T[l], P[l]);
            CHECK(ws, "fp32 tp %d pp %d: parameters after 2 epochs bit-identical to the plain exchange", T[l], P[l]);
        }
        for (int k = 0; k < 2; k++) free(g[k]), free(w[k]);
    }
}

/* The sum over the D replicas of this rank's position of n floats (in place). */
static dd_status replica_sum(dd_pp *z, float *v, size_t n) {
    const dd_grid *gr = dd_pp_grid(z);
    dd_comm *dpc = NULL;
    DD_TRY(dd_comm_split(g_world, gr->tp + 1024 * gr->pp, gr->dp, &dpc));
    dd_status s = dd_comm_allreduce(dpc, DD_ALLREDUCE_RING, v, n, DD_F32);
    dd_comm_free(&dpc);
    return s;
}

/* Lossy compressors: the error-feedback invariant over two exchanges, then training. */
static void test_lossy(const dd_dataset *ds, const tt_reference *ref) {
    dd_train_cfg c;
    cfg_resnet(&c);
    int T[2], P[2];
    const int nl = layouts(T, P);
    static const char *const cx[] = {"int8", "topk,density=0.1"};
    for (int l = 0; l < nl; l++)
        for (int k = 0; k < 2; k++) {
            dd_pp *z = NULL;
            dd_trainer *tr = grid_trainer(&c, ds, T[l], P[l], cx[k], DD_SHARD_NONE, &z);
            if (!tr) continue;
            size_t lo = 0, hi = 0;
            dd_trainer_storage(tr, NULL, NULL, &lo, &hi, NULL, NULL);
            const size_t nloc = hi - lo;
            float *prev = calloc(nloc + 1, sizeof *prev), *v = calloc(nloc + 1, sizeof *v);
            double worst = 0;
            int ok = 1;
            for (int rep = 0; ok && rep < 2; rep++) {
                double loss = 0;
                ok = all_ok(dd_trainer_loss_grad(tr, 0, 0, &loss) == DD_OK);
                if (!ok) break;
                size_t nres = 0;
                const float *res = dd_compress_residual(dd_pp_compressor(z), &nres);
                ok = all_ok(nloc == 0 || (res && nres == nloc));
                CHECK(ok, "%s: a residual of the rank's storage (%zu floats, storage %zu)", cx[k], nres, nloc);
                if (!ok) break;
                /* exchanged sum + sum over the replicas of (new - old residual) */
                for (size_t i = 0; i < nloc; i++) v[i] = res[i] - prev[i];
                if (nloc) memcpy(prev, res, nloc * sizeof *prev);
                ok = all_ok(replica_sum(z, v, nloc) == DD_OK);
                const float *g = dd_trainer_grads(tr);
                for (size_t i = 0; i < nloc; i++) v[i] += g[i];
                float *w = whole_of(tr, v, NULL);
                double num = 0, den = 0;
                for (size_t i = 0; i < ref->n; i++) {
                    num = fmax(num, fabs(w[i] - ref->grad[i]));
                    den = fmax(den, fabs(ref->grad[i]));
                }
                worst = fmax(worst, den > 0 ? num / den : num);
                free(w);
            }
            /* topk: exact to float rounding; int8 goes through the quantised ring, whose
             * re-encodings of partial sums at each hop are not in any residual (bounded by
             * test_compress_qring_mpi): within a few quantisation steps (1/127 of a chunk's
             * largest value); exact with one replica */
            const double tol = k == 0 && g_size / (T[l] * P[l]) > 1 ? 2e-2 : TOL;
            CHECK(ok && worst <= tol, "%s tp %d pp %d: exchanged + replicas' residual change == plain sum (worst rel. %.3g, "
                  "allowed %.3g)", cx[k], T[l], P[l], worst, tol);
            free(prev);
            free(v);
            dd_trainer_destroy(&tr);
            dd_pp_destroy(&z);
            /* training */
            tr = grid_trainer(&c, ds, T[l], P[l], cx[k], DD_SHARD_NONE, &z);
            if (!tr) continue;
            ok = all_ok(tt_train_epochs(tr, 2) == 0);
            CHECK(ok, "%s tp %d pp %d: training: %s", cx[k], T[l], P[l], dd_last_error());
            if (ok) {
                size_t differ = 0;
                free(whole_of(tr, dd_trainer_params(tr), &differ));
                CHECK(differ == 0, "%s tp %d pp %d: %zu parameter floats differ between the ranks that hold them (replicas, "
                      "tensor-parallel copies)", cx[k], T[l], P[l], differ);
                size_t nh;
                const dd_epoch_record *h = dd_trainer_history(tr, &nh);
                const double dn = nh == 2 ? h[1].test.nmse_db - ref->nmse : 99;
                if (g_rank == 0)
                    printf("%-16s tp %d x pp %d x dp %d: residual invariant worst rel. %.2g; test NMSE %+.4f dB (one "
                           "process %+.4f), ratio %.2f, %.0f bytes/rank/step\n",
                           cx[k], T[l], P[l], g_size / (T[l] * P[l]), worst, nh == 2 ? h[1].test.nmse_db : NAN, ref->nmse,
                           nh == 2 ? h[1].compression_ratio : NAN, nh == 2 ? h[1].comm_bytes_per_step : NAN);
                /* int8 trains like one process; top-k at 10 % learns more slowly (12 steps) */
                if (k == 0) CHECK(fabs(dn) <= 1.0, "%s: test NMSE %.3f dB from one process", cx[k], dn);
                else CHECK(nh == 2 && h[1].test.nmse_db < -2.0, "%s: test NMSE %.3f dB: it did not learn", cx[k], h[1].test.nmse_db);
                CHECK(nh == 2 && h[1].compression_ratio > (k ? 3.0 : 2.0), "%s: compression ratio %.2f", cx[k],
                      nh == 2 ? h[1].compression_ratio : NAN);
                CHECK(nh == 2 && h[1].compress_time_s >= 0, "%s: compress_time_s reported", cx[k]);
            }
            dd_trainer_destroy(&tr);
            dd_pp_destroy(&z);
        }
}

/* zero1: equal to one process, replicas identical, optimiser state 1/D. */
static void test_zero1(const dd_dataset *ds, const tt_reference *ref) {
    if (g_size < 2) return;
    dd_train_cfg c;
    cfg_resnet(&c);
    int T[2], P[2];
    const int nl = layouts(T, P);
    for (int l = 0; l < nl; l++)
        for (int k = 0; k < 2; k++) { /* plain, then with int8 compression */
            const char *cx = k ? "int8" : NULL;
            dd_mem_stats m0, m1;
            dd_mem_stats_get(&m0);
            dd_pp *z = NULL;
            dd_trainer *tr = grid_trainer(&c, ds, T[l], P[l], cx, DD_SHARD_ZERO1, &z);
            if (!tr) continue;
            dd_mem_stats_get(&m1);
            const int D = g_size / (T[l] * P[l]);
            size_t lo = 0, hi = 0, olo = 0, ohi = 0;
            dd_trainer_storage(tr, NULL, NULL, &lo, &hi, &olo, &ohi);
            size_t *part = calloc((size_t)D + 1, sizeof *part);
            dd_shard_partition(hi - lo, D, part);
            const int dr = dd_pp_grid(z)->dp;
            const size_t slice = part[dr + 1] - part[dr];
            const size_t kst = (size_t)dd_optim_state_arrays(dd_trainer_optim(tr));
            const size_t got = (m1.cur[DD_MEM_OPTIM] - m0.cur[DD_MEM_OPTIM]) / sizeof(float);
            const size_t want = kst * (slice ? slice : 1);
            CHECK(all_ok(olo == part[dr] && ohi == part[dr + 1] && got == want),
                  "zero1 tp %d pp %d: optimiser slice [%zu, %zu) of %zu, %zu state floats (expected %zu = %zu x 1/%d of "
                  "the storage)",
                  T[l], P[l], olo, ohi, hi - lo, got, want, kst, D);
            if (g_rank == 0 && k == 0)
                printf("zero1 tp %d x pp %d x dp %d: rank 0 keeps %zu of %zu optimiser floats (storage %zu floats)\n",
                       T[l], P[l], D, got, kst * (hi - lo), hi - lo);
            free(part);
            int ok = all_ok(tt_train_epochs(tr, 2) == 0);
            CHECK(ok, "zero1 tp %d pp %d: training: %s", T[l], P[l], dd_last_error());
            if (ok) {
                size_t differ = 0;
                float *w = whole_of(tr, dd_trainer_params(tr), &differ);
                const double d = tt_rel_diff(w, ref->params, ref->n);
                size_t nh;
                const dd_epoch_record *h = dd_trainer_history(tr, &nh);
                const double dn = nh == 2 ? fabs(h[1].test.nmse_db - ref->nmse) : 99;
                if (g_rank == 0)
                    printf("zero1%s tp %d x pp %d x dp %d: max rel. parameter difference %.2g, test NMSE %+.4f dB (one "
                           "process %+.4f)\n",
                           k ? "+int8" : "", T[l], P[l], D, d, nh == 2 ? h[1].test.nmse_db : NAN, ref->nmse);
                CHECK(differ == 0, "zero1%s tp %d pp %d: %zu parameter floats differ between the ranks that hold them", k ? "+int8" : "",
                      T[l], P[l], differ);
                if (!k) {
                    CHECK(d <= TOL, "zero1 tp %d pp %d: parameters %.3g from one process", T[l], P[l], d);
                    CHECK(dn <= 0.01, "zero1 tp %d pp %d: test NMSE %.4f dB from one process", T[l], P[l], dn);
                } else {
                    CHECK(dn <= 1.0, "zero1+int8 tp %d pp %d: test NMSE %.4f dB from one process", T[l], P[l], dn);
                }
                free(w);
            }
            dd_trainer_destroy(&tr);
            dd_pp_destroy(&z);
        }
}

/* Trains epoch 1 on (T1, P1, cx1, shard1) and writes the checkpoint. T1 = 0: one process. */
static int first_half(const dd_train_cfg *c, const dd_dataset *ds, int T, int P, const char *cx, dd_shard_mode sh,
                      const char *path) {
    dd_pp *z = NULL;
    dd_strategy st;
    dd_trainer *tr = NULL;
    int ok;
    if (T) {
        tr = grid_trainer(c, ds, T, P, cx, sh, &z);
        dd_pp_strategy(z, &st);
        ok = all_ok(tr && tt_train_epochs(tr, 1) == 0);
        ok = ok && all_ok(st.ops->before_save(st.self, tr) == DD_OK);
    } else {
        ok = dd_trainer_create(c, ds, NULL, NULL, &tr) == DD_OK && tt_train_epochs(tr, 1) == 0;
        ok = all_ok(ok);
    }
    if (ok && g_rank == 0) ok = dd_trainer_save(tr, path) == DD_OK;
    ok = all_ok(ok);
    dd_trainer_destroy(&tr);
    dd_pp_destroy(&z);
    return ok;
}

/* Epoch 2 from the checkpoint; returns the whole parameters (every rank) or NULL. */
static float *second_half(const dd_train_cfg *c, const dd_dataset *ds, int T, int P, const char *cx, dd_shard_mode sh,
                          const char *path, double *nmse) {
    dd_pp *z = NULL;
    dd_trainer *tr = NULL;
    if (T) tr = grid_trainer(c, ds, T, P, cx, sh, &z);
    else all_ok(dd_trainer_create(c, ds, NULL, NULL, &tr) == DD_OK);
    int ok = all_ok(tr && dd_trainer_load(tr, path, 0) == DD_OK && tt_train_epochs(tr, 1) == 0);
    float *w = NULL;
    if (ok) {
        w = whole_of(tr, dd_trainer_params(tr), NULL);
        size_t nh;
        const dd_epoch_record *h = dd_trainer_history(tr, &nh);
        *nmse = nh == 2 ? h[1].test.nmse_db : NAN;
    }
    CHECK(ok, "second epoch (tp %d pp %d %s %s): %s", T, P, cx ? cx : "none", dd_shard_name(sh), dd_last_error());
    dd_trainer_destroy(&tr);
    dd_pp_destroy(&z);
    return w;
}

static void test_resume(const dd_dataset *ds, const tt_reference *ref) {
    if (g_size != 4) return;
    dd_train_cfg c;
    cfg_resnet(&c);
    char path[700];
    snprintf(path, sizeof path, "%s/mpdp.ckpt", g_tmp);
    double nm = 0;
    /* int8, same layout: bit for bit against the straight compressed run */
    {
        dd_pp *z = NULL;
        dd_trainer *tr = grid_trainer(&c, ds, 1, 2, "int8", DD_SHARD_ZERO1, &z);
        float *straight = NULL;
        if (tr && all_ok(tt_train_epochs(tr, 2) == 0)) straight = whole_of(tr, dd_trainer_params(tr), NULL);
        dd_trainer_destroy(&tr);
        dd_pp_destroy(&z);
        float *w = NULL;
        if (straight && first_half(&c, ds, 1, 2, "int8", DD_SHARD_ZERO1, path))
            w = second_half(&c, ds, 1, 2, "int8", DD_SHARD_ZERO1, path, &nm);
        CHECK(w && straight && memcmp(w, straight, ref->n * sizeof(float)) == 0,
              "pp 2 zero1 int8: resumed with the same layout == straight run, bit for bit (residuals restored)");
        if (g_rank == 0 && w && straight)
            printf("resume pp 2 zero1 int8 -> same: max rel. difference to the straight run %.2g\n",
                   tt_rel_diff(w, straight, ref->n));
        free(w);
        /* the same checkpoint under another layout (tp 2): residuals start at zero */
        w = second_half(&c, ds, 2, 1, "int8", DD_SHARD_ZERO1, path, &nm);
        CHECK(w != NULL && isfinite(nm), "pp 2 int8 -> tp 2 int8 resumes");
        free(w);
        free(straight);
    }
    /* zero1 pp 2 -> zero1 tp 2, -> one process; one process -> zero1 pp 2 */
    static const struct {
        int T1, P1, T2, P2;
    } legs[] = {{1, 2, 2, 1}, {1, 2, 0, 0}, {0, 0, 1, 2}};
    for (size_t k = 0; k < sizeof legs / sizeof legs[0]; k++) {
        if (!first_half(&c, ds, legs[k].T1, legs[k].P1, NULL, DD_SHARD_ZERO1, path)) {
            CHECK(0, "resume leg %zu: first epoch: %s", k, dd_last_error());
            continue;
        }
        float *w = second_half(&c, ds, legs[k].T2, legs[k].P2, NULL, DD_SHARD_ZERO1, path, &nm);
        if (!w) continue;
        const double d = tt_rel_diff(w, ref->params, ref->n);
        if (g_rank == 0)
            printf("resume epoch 1 %s, epoch 2 %s: max rel. parameter difference %.2g, test NMSE %+.4f (one process "
                   "%+.4f)\n",
                   legs[k].T1 ? (legs[k].P1 == 2 ? "pp 2 zero1" : "tp 2 zero1") : "one process",
                   legs[k].T2 ? (legs[k].P2 == 2 ? "pp 2 zero1" : "tp 2 zero1") : "one process", d, nm, ref->nmse);
        CHECK(d <= TOL && fabs(nm - ref->nmse) <= 0.01, "resume leg %zu: %.3g, NMSE %.4f dB off", k, d,
              fabs(nm - ref->nmse));
        free(w);
    }
}

static void test_errors(void) {
    dd_pp_cfg c;
    dd_pp_cfg_default(&c);
    c.pp = 1;
    c.shard = DD_SHARD_ZERO2;
    CHECK_ERR(dd_pp_cfg_check(&c, 1), DD_ERR_ARG, "--shard zero2 does not apply to a model-parallel grid");
    c.shard = DD_SHARD_ZERO3;
    CHECK_ERR(dd_pp_cfg_check(&c, 1), DD_ERR_ARG, "--shard zero3 does not apply to a model-parallel grid");
}

int main(int argc, char **argv) {
    const double t0 = tm_begin(&argc, &argv, &g_world, g_tmp, sizeof g_tmp);
    if (!g_world) return dd_test_done("test_mpdp_mpi");
    g_rank = dd_comm_rank(g_world);
    g_size = dd_comm_size(g_world);

    dd_dataset *ds = tt_small_data();
    CHECK(ds != NULL, "data set");
    dd_train_cfg c;
    cfg_resnet(&c);
    tt_reference ref = {0};
    int ok = ds && all_ok(tt_reference_make(&c, ds, NULL, &ref) == 0);
    CHECK(ok, "one-process reference: %s", dd_last_error());
    if (ok) {
        test_fp32(ds);
        test_lossy(ds, &ref);
        test_zero1(ds, &ref);
        test_resume(ds, &ref);
    }
    tt_reference_free(&ref); /* also what it made when another rank failed */
    test_errors();
    dd_dataset_free(&ds);

    return tm_end(&g_world, "test_mpdp_mpi", t0);
}
