/* The contract every registered compressor (compress.h) keeps, at 1-4 ranks (ctest runs
 * this under mpiexec at np 1..4; by hand: mpirun -np 3 build/test_compress_contract_mpi):
 *
 * - Exchange: after dd_compress_exchange every rank holds the same bits; the result is the
 *   sum over the ranks of (gradient + old residual - new residual) to float rounding
 *   (1e-5 of the magnitudes), so the residuals keep all that was not delivered (except
 *   the quantised ring's re-encodings of partial sums, bounded in
 *   test_compress_qring_mpi; with one rank there are none); with one rank the
 *   result is this rank's decompressed contribution, so error feedback carries exactly
 *   the residual: residual == (gradient + old residual) - result, bit for bit, and over
 *   several steps sum(results) + final residual == sum(gradients) (float tolerance);
 *   the round trip never increases the norm: ||in - decompressed|| <= ||in|| (every
 *   codec here is a contraction: quantisers' error is below the value, top-k / rand-k /
 *   PowerSGD are projections). Without error feedback no residual is kept.
 * - Lossless settings (fp32; topk, randk and dgc at density 1 with dgc's momentum 0) train
 *   bit for bit like uncompressed data parallelism (same allreduce and buckets), at
 *   every rank count.
 * - Every lossy compressor trains: parameters bit-identical on every rank, finite losses,
 *   the epoch record's compression_ratio equal to the ratio the payload sizes give, and
 *   comm_bytes_per_step / compress_time_s recorded.
 * - Checkpoints: the per-rank state (residual, dgc's momentum, powersgd's Q) survives a
 *   save/load on the same ranks bit for bit; loaded by one rank alone (N -> 1) the state
 *   is the sum of the N ranks' states (the gradient not yet applied is kept).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_impl.h"
#include "dd_test.h"
#include "test_mpi_util.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"
#include "distdpd/parallel.h"
#include "test_train_util.h"

static int g_rank, g_size;
static dd_comm *g_world;
static char g_tmp[512];

static int all_ok(int ok) { return tm_all_ok(g_world, ok); }
static int same_on_all(const void *p, size_t bytes) { return tm_same_bytes(g_world, p, bytes); }

static double norm2(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

/* A test configuration of a compressor: small density so that sparsifiers drop most. */
static void cfg_for(const char *name, dd_compress_cfg *c) {
    dd_compress_cfg_default(c);
    dd_status s = dd_compress_parse(c, name);
    (void)s;
    c->density = 0.05;
    c->warmup = 0;
    c->chunk = 64;
    c->seed = 7;
    c->momentum = 0; /* dgc: the residual contract is on what it sends (u + v); with momentum
                        u is not the gradient (test_compress_dgc checks the momentum) */
}

/* ---------------------------------------------------------------- exchange contract */

static void test_exchange(const char *name) {
    enum { N = 1500, STEPS = 4 };
    const size_t split = 700; /* two buckets: [700, 1500) then [0, 700) */
    dd_compress_cfg cc;
    cfg_for(name, &cc);
    dd_compressor *cp = NULL;
    CHECK_OK(dd_compress_create(&cc, &cp));
    if (!cp) return;
    const int lossy = dd_compress_lossy(cp), ef = dd_compress_has_ef(cp);
    CHECK(ef == lossy, "%s: error feedback on by default exactly for lossy compressors", name);
    float *g = malloc(N * sizeof(float)), *in = malloc(N * sizeof(float)), *gsum = calloc(N, sizeof(float));
    double *osum = calloc(N, sizeof(double)), *gs = calloc(N, sizeof(double));
    float *prev = calloc(N, sizeof(float));
    dd_rng r;
    dd_rng_seed(&r, 1000 + (uint64_t)g_rank);
    int bit_ef = 1, contraction = 1, same = 1, global_ef = 1;
    double global_worst = 0;
    float *allmine = malloc((size_t)g_size * N * sizeof(float)), *allin = malloc((size_t)g_size * N * sizeof(float));
    /* the quantised ring re-encodes at every hop: its result is the sum of the ranks'
     * round trips only within the bound of test_compress_qring_mpi (one rank: exactly) */
    const int ring = dd_codec_find(name)->qring != NULL;
    for (int t = 0; t < STEPS; t++) {
        for (size_t i = 0; i < N; i++) g[i] = (float)(dd_rng_normal(&r) * (1.0 + (double)(i % 7)));
        for (size_t i = 0; i < N; i++) gs[i] += g[i];
        size_t nres = 0;
        const float *res = dd_compress_residual(cp, &nres);
        for (size_t i = 0; i < N; i++) in[i] = g[i] + (res && nres == N ? res[i] : 0.0f);
        memcpy(gsum, g, N * sizeof(float));
        dd_compress_begin_step(cp, (uint64_t)t, 0, 0.0);
        CHECK_OK(dd_compress_exchange(cp, g_world, DD_ALLREDUCE_RING, gsum, split, N));
        CHECK_OK(dd_compress_exchange(cp, g_world, DD_ALLREDUCE_RING, gsum, 0, split));
        same &= same_on_all(gsum, N * sizeof(float));
        res = dd_compress_residual(cp, &nres);
        CHECK(ef ? (res != NULL && nres == N) : res == NULL, "%s: residual kept iff error feedback", name);
        if (res && nres == N) {
            /* this rank's decompressed contribution is in - residual */
            float *mine = prev;
            for (size_t i = 0; i < N; i++) mine[i] = in[i] - res[i];
            contraction &= norm2(res, N) <= norm2(in, N) * (1 + 1e-6) + 1e-30;
            /* error feedback over all ranks: what was delivered (out) is the sum of the
             * ranks' in - residual, so the residuals keep everything not delivered */
            if (allmine && allin && dd_comm_allgather(g_world, mine, N * sizeof(float), allmine) == DD_OK &&
                dd_comm_allgather(g_world, in, N * sizeof(float), allin) == DD_OK)
                for (size_t i = 0; i < N; i++) {
                    double sm = 0, sa = 0; /* rounding is relative to |in| (mine = in - residual) */
                    for (int q = 0; q < g_size; q++) {
                        sm += allmine[(size_t)q * N + i];
                        sa += fabs(allin[(size_t)q * N + i]) + fabs(allmine[(size_t)q * N + i]);
                    }
                    double d = fabs(sm - gsum[i]) / (sa + 1e-30);
                    if (d > global_worst) global_worst = d;
                    if (d > 1e-5) global_ef = 0;
                }
            if (g_size == 1)
                for (size_t i = 0; i < N; i++)
                    if (res[i] != in[i] - gsum[i]) {
                        bit_ef = 0;
                        break;
                    }
        }
        for (size_t i = 0; i < N; i++) osum[i] += gsum[i];
    }
    CHECK(same, "%s: the result is bit-identical on every rank", name);
    if (ef && (!ring || g_size == 1))
        CHECK(all_ok(global_ef), "%s: result == sum over ranks of (gradient + old residual - residual) (worst %.3g)", name,
              global_worst);
    free(allmine);
    free(allin);
    if (ef) {
        CHECK(contraction, "%s: ||residual|| <= ||gradient + old residual|| every step", name);
        if (g_size == 1) {
            CHECK(bit_ef, "%s: residual == gradient + old residual - result, bit for bit", name);
            size_t nres = 0;
            const float *res = dd_compress_residual(cp, &nres);
            double worst = 0, scale = 0;
            for (size_t i = 0; i < N; i++) {
                worst = fmax(worst, fabs(osum[i] + res[i] - gs[i]));
                scale = fmax(scale, fabs(gs[i]));
            }
            CHECK(worst <= 1e-5 * scale, "%s: sum of results + residual == sum of gradients (%.3g of %.3g)", name,
                  worst, scale);
        }
    } else if (g_size == 1 && !lossy) {
        CHECK(memcmp(gsum, g, N * sizeof(float)) == 0, "%s: lossless round trip on one rank", name);
    }
    dd_compress_stats st;
    dd_compress_stats_get(cp, &st);
    CHECK(st.exchanges == 2 * STEPS && st.elements == (uint64_t)STEPS * N, "%s: %llu exchanges, %llu elements counted",
          name, (unsigned long long)st.exchanges, (unsigned long long)st.elements);
    CHECK(st.payload_bytes > 0, "%s: payload bytes counted", name);
    if (!lossy) CHECK(fabs(dd_compress_ratio(&st) - 1.0) < 1e-12, "%s: lossless ratio 1", name);
    else CHECK(dd_compress_ratio(&st) > 1.0, "%s: ratio %.2f > 1", name, dd_compress_ratio(&st));
    if (g_size > 1) CHECK(st.bytes_sent > 0, "%s: bytes sent counted", name);
    dd_compress_destroy(&cp);

    if (lossy) { /* error feedback off: nothing kept */
        cfg_for(name, &cc);
        cc.error_feedback = 0;
        CHECK_OK(dd_compress_create(&cc, &cp));
        for (size_t i = 0; i < N; i++) g[i] = (float)dd_rng_normal(&r);
        dd_compress_begin_step(cp, 0, 0, 0.0);
        CHECK_OK(dd_compress_exchange(cp, g_world, DD_ALLREDUCE_RING, g, 0, N));
        size_t nres = 1;
        CHECK(!dd_compress_has_ef(cp) && dd_compress_residual(cp, &nres) == NULL && nres == 0,
              "%s: ef=0 keeps no residual", name);
        dd_compress_destroy(&cp);
    }
    free(g);
    free(in);
    free(gsum);
    free(osum);
    free(gs);
    free(prev);
}

/* ---------------------------------------------------------------- training */

static dd_dataset *small_data(void) {
    size_t n[3] = {3 * 61 + 16, 512, 512};
    return tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 5, NULL);
}

static int train_epochs(dd_trainer *tr, int epochs, dd_epoch_record *last) {
    for (int e = 0; e < epochs; e++) {
        while (!dd_trainer_epoch_done(tr))
            if (dd_trainer_step(tr, NULL) != DD_OK) return -1;
        if (dd_trainer_end_epoch(tr, last) != DD_OK) return -1;
    }
    return 0;
}

/* Trains 2 epochs with compressor spec (NULL: none) on the world; returns the parameters
 * (caller frees) and the last epoch record. */
static float *train_with(dd_dataset *ds, const char *spec, dd_allreduce_algo algo, double bucket_mb, size_t *nf,
                         dd_epoch_record *rec) {
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
    dd_dp_cfg dc;
    dd_dp_cfg_default(&dc);
    dc.algo = algo;
    dc.bucket_mb = bucket_mb;
    if (spec && dd_compress_parse(&dc.compress, spec) != DD_OK) return NULL;
    dd_dp *dp = NULL;
    dd_trainer *tr = NULL;
    float *out = NULL;
    if (dd_dp_create(g_world, &dc, &dp) != DD_OK) return NULL;
    dd_strategy h;
    dd_dp_strategy(dp, &h);
    if (dd_trainer_create(&c, ds, NULL, &h, &tr) == DD_OK && train_epochs(tr, 2, rec) == 0) {
        *nf = dd_trainer_num_floats(tr);
        out = malloc(*nf * sizeof(float));
        if (out) memcpy(out, dd_trainer_params(tr), *nf * sizeof(float));
    }
    dd_trainer_destroy(&tr);
    dd_dp_destroy(&dp);
    return out;
}

static void test_lossless_training(dd_dataset *ds) {
    static const char *const specs[] = {"fp32", "topk,density=1", "randk,density=1",
                                        "dgc,density=1,momentum=0,warmup=0", "topk,density=1,sampled=1"};
    static const double buckets[2] = {0.0, 1e-9};
    static const dd_allreduce_algo algos[2] = {DD_ALLREDUCE_RING, DD_ALLREDUCE_TREE};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            size_t nref = 0, nf = 0;
            dd_epoch_record rec;
            float *ref = train_with(ds, NULL, algos[a], buckets[b], &nref, &rec);
            CHECK(all_ok(ref != NULL), "uncompressed training: %s", dd_last_error());
            for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
                if (a == 1 && s == 0) continue; /* the quantised ring is the ring's order only */
                float *p = train_with(ds, specs[s], algos[a], buckets[b], &nf, &rec);
                int ok = p != NULL && ref != NULL && nf == nref && memcmp(p, ref, nf * sizeof(float)) == 0;
                CHECK(all_ok(ok), "%s (%s, bucket %g MB) trains bit for bit like uncompressed data parallelism at %d "
                      "ranks%s%s", specs[s], dd_allreduce_name(algos[a]), buckets[b], g_size, p ? "" : ": ",
                      p ? "" : dd_last_error());
                if (p) CHECK(fabs(rec.compression_ratio - 1.0) < 1e-12 || s > 0, "%s: ratio %.3f", specs[s],
                             rec.compression_ratio);
                free(p);
            }
            free(ref);
        }
}

static void test_lossy_training(dd_dataset *ds) {
    const char *const *names = dd_compress_names();
    for (size_t i = 0; names[i]; i++) {
        dd_compress_cfg cc;
        cfg_for(names[i], &cc);
        dd_compressor *probe = NULL;
        if (dd_compress_create(&cc, &probe) != DD_OK) continue;
        int lossy = dd_compress_lossy(probe);
        dd_compress_destroy(&probe);
        if (!lossy) continue;
        const dd_codec *codec = dd_codec_find(names[i]);
        char spec[128];
        snprintf(spec, sizeof spec, "%s%s%s", names[i], codec->uses_density ? ",density=0.05" : "",
                 codec->density_warmup ? ",warmup=1" : "");
        size_t nf = 0;
        dd_epoch_record rec;
        memset(&rec, 0, sizeof rec);
        float *p = train_with(ds, spec, DD_ALLREDUCE_RING, 1e-9, &nf, &rec);
        int ok = p != NULL;
        CHECK(all_ok(ok), "%s: training at %d ranks: %s", spec, g_size, ok ? "ok" : dd_last_error());
        if (p) {
            int fin = 1;
            for (size_t k = 0; k < nf; k++) fin &= isfinite(p[k]);
            CHECK(fin && isfinite(rec.train_loss), "%s: finite parameters and loss", spec);
            CHECK(same_on_all(p, nf * sizeof(float)), "%s: parameters bit-identical on every rank", spec);
            CHECK(rec.compression_ratio > 1.0 && isfinite(rec.compression_ratio), "%s: compression ratio %.2f > 1", spec,
                  rec.compression_ratio);
            CHECK(rec.compress_time_s > 0 && rec.comm_bytes_per_step >= 0, "%s: compress time %.3g s, %.0f bytes/step",
                  spec, rec.compress_time_s, rec.comm_bytes_per_step);
            if (g_size > 1) CHECK(rec.comm_bytes_per_step > 0, "%s: bytes sent per step recorded", spec);
            if (g_rank == 0)
                printf("  %-28s ratio %8.2f  %8.0f bytes/step/rank  train loss %.4e\n", spec, rec.compression_ratio,
                       rec.comm_bytes_per_step, rec.train_loss);
        }
        free(p);
    }
}

/* ---------------------------------------------------------------- checkpoints */

static void test_checkpoint(dd_dataset *ds, const char *spec) {
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 3);
    dd_dp_cfg dc;
    dd_dp_cfg_default(&dc);
    dc.bucket_mb = 1e-9;
    CHECK_OK(dd_compress_parse(&dc.compress, spec));
    char path[700];
    snprintf(path, sizeof path, "%s/%s.ckpt", g_tmp, dc.compress.name);
    dd_dp *dp = NULL;
    dd_trainer *tr = NULL;
    dd_strategy h;
    CHECK_OK(dd_dp_create(g_world, &dc, &dp));
    dd_dp_strategy(dp, &h);
    CHECK_OK(dd_trainer_create(&c, ds, NULL, &h, &tr));
    int ok = tr && train_epochs(tr, 1, NULL) == 0;
    /* a few steps into epoch 2 */
    for (int k = 0; ok && k < 2; k++) ok = dd_trainer_step(tr, NULL) == DD_OK;
    ok = ok && h.ops->before_save(h.self, tr) == DD_OK;
    if (ok && g_rank == 0) ok = dd_trainer_save(tr, path) == DD_OK;
    CHECK(all_ok(ok), "%s: train and save: %s", spec, dd_last_error());
    size_t m = 0, ms = 0;
    dd_compress_state_export(dd_dp_compressor(dp), NULL, &m);
    dd_compress_shared_export(dd_dp_compressor(dp), NULL, &ms);
    float *mine = calloc(m + 1, sizeof(float)), *sh = calloc(ms + 1, sizeof(float));
    float *all = calloc((m + 1) * (size_t)g_size, sizeof(float));
    dd_compress_state_export(dd_dp_compressor(dp), mine, &m);
    dd_compress_shared_export(dd_dp_compressor(dp), sh, &ms);
    dd_comm_allgather(g_world, mine, m * sizeof(float), all);
    CHECK(m > 0, "%s: per-rank state kept (%zu floats)", spec, m);
    dd_trainer_destroy(&tr);
    dd_dp_destroy(&dp);

    /* same ranks: each gets its own state back */
    CHECK_OK(dd_dp_create(g_world, &dc, &dp));
    dd_dp_strategy(dp, &h);
    CHECK_OK(dd_trainer_create(&c, ds, NULL, &h, &tr));
    CHECK_OK(dd_trainer_load(tr, path, 0));
    size_t m2 = 0, ms2 = 0;
    float *back = calloc(m + 1, sizeof(float)), *sh2 = calloc(ms + 1, sizeof(float));
    dd_compress_state_export(dd_dp_compressor(dp), NULL, &m2);
    if (m2 == m) dd_compress_state_export(dd_dp_compressor(dp), back, &m2);
    dd_compress_shared_export(dd_dp_compressor(dp), NULL, &ms2);
    if (ms2 == ms) dd_compress_shared_export(dd_dp_compressor(dp), sh2, &ms2);
    CHECK(m2 == m && memcmp(back, mine, m * sizeof(float)) == 0, "%s: state restored bit for bit on rank %d", spec,
          g_rank);
    CHECK(ms2 == ms && memcmp(sh2, sh, ms * sizeof(float)) == 0, "%s: shared state restored", spec);
    /* training continues */
    CHECK(dd_trainer_step(tr, NULL) == DD_OK, "%s: a step after the resume: %s", spec, dd_last_error());
    dd_trainer_destroy(&tr);
    dd_dp_destroy(&dp);

    /* N -> 1: one rank alone gets the sum of the N states */
    dd_comm *self = NULL;
    CHECK_OK(dd_comm_self(&self));
    dd_dp_cfg d1 = dc;
    CHECK_OK(dd_dp_create(self, &d1, &dp));
    dd_dp_strategy(dp, &h);
    CHECK_OK(dd_trainer_create(&c, ds, NULL, &h, &tr));
    CHECK_OK(dd_trainer_load(tr, path, 0));
    dd_compress_state_export(dd_dp_compressor(dp), NULL, &m2);
    CHECK(m2 == m, "%s: N -> 1 state size %zu vs %zu", spec, m2, m);
    if (m2 == m) {
        dd_compress_state_export(dd_dp_compressor(dp), back, &m2);
        double worst = 0, scale = 0;
        for (size_t i = 0; i < m; i++) {
            double s = 0;
            for (int q = 0; q < g_size; q++) s += all[(size_t)q * m + i];
            worst = fmax(worst, fabs(back[i] - s));
            scale = fmax(scale, fabs(s));
        }
        CHECK(worst <= 1e-6 * (scale + 1e-30), "%s: %d -> 1 ranks: the state is the sum of the ranks' (%.3g)", spec,
              g_size, worst);
    }
    dd_trainer_destroy(&tr);
    dd_dp_destroy(&dp);
    dd_comm_free(&self);
    free(mine);
    free(sh);
    free(all);
    free(back);
    free(sh2);
}

int main(int argc, char **argv) {
    if (dd_comm_init(&argc, &argv) != DD_OK || dd_comm_world(&g_world) != DD_OK) {
        fprintf(stderr, "test_compress_contract_mpi: %s\n", dd_last_error());
        return 1;
    }
    g_rank = dd_comm_rank(g_world);
    g_size = dd_comm_size(g_world);
    memset(g_tmp, 0, sizeof g_tmp);
    if (g_rank == 0) snprintf(g_tmp, sizeof g_tmp, "%s", dd_test_tmpdir());
    dd_comm_bcast(g_world, g_tmp, sizeof g_tmp, 0);

    /* every registered compressor (registry.c), the 11 built-in ones among them */
    const char *const *names = dd_compress_names();
    size_t count = 0;
    dd_codec_registry(&count);
    size_t listed = 0;
    for (size_t i = 0; names[i]; i++, listed++) {
        CHECK(dd_codec_find(names[i]) != NULL, "%s: a registered name has a codec", names[i]);
        if (dd_codec_find(names[i])) test_exchange(names[i]);
    }
    CHECK(listed == count, "dd_compress_names lists the %zu registered compressors, got %zu", count, listed);
    static const char *const builtin[] = {"none", "fp32", "fp16", "bf16", "int8", "int4",
                                          "sign", "topk", "randk", "powersgd", "dgc"};
    const size_t nb = sizeof builtin / sizeof builtin[0];
    size_t j = 0;
    for (size_t i = 0; names[i] && j < nb; i++)
        if (!strcmp(names[i], builtin[j])) j++;
    CHECK(j == nb, "the %zu built-in compressors are registered in their order (missing or moved: %s)", nb,
          j < nb ? builtin[j] : "-");
    dd_dataset *ds = small_data();
    CHECK(ds != NULL, "data set");
    if (ds) {
        test_lossless_training(ds);
        if (g_rank == 0) printf("lossy compressors, 2 epochs at %d ranks:\n", g_size);
        test_lossy_training(ds);
        test_checkpoint(ds, "topk,density=0.05");
        test_checkpoint(ds, "dgc,density=0.05,warmup=1");
        test_checkpoint(ds, "powersgd,rank=2");
        dd_dataset_free(&ds);
    }
    int ok = all_ok(dd_t_fail == 0);
    dd_comm_barrier(g_world);
    if (g_rank == 0) {
        dd_t_rm(g_tmp); /* tests/dd_test.h: no shell */
    }
    char name[80];
    snprintf(name, sizeof name, "test_compress_contract_mpi (rank %d of %d)", g_rank, g_size);
    int rc = dd_test_done(name);
    if (!ok && rc == 0) rc = 1;
    dd_comm_free(&g_world);
    dd_comm_finalize();
    return rc;
}
