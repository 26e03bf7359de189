/* MPI tests of synchronous data parallelism (src/parallel, parallel.h). ctest runs this at
 * 1, 2, 3 and 4 ranks (DD_TEST_NP); by hand: mpirun -np 3 build/test_dp_mpi.
 *
 * - Equivalence: for every allreduce algorithm and three bucket settings (one blocking
 *   allreduce, the default 4 MiB bucket, tiny buckets: one per parameter tensor), N ranks
 *   training 12 steps (2 epochs, a last partial batch of 2 frames, so some ranks have
 *   empty slices at N = 3, 4) end with parameters bit-identical on every rank and within
 *   the stated tolerance of one process trained with the same global batch, computed in
 *   this process on rank 0 (at N = 1: bit-identical). Same for a DLA DPD through a frozen
 *   PA model (target gain computed on rank 0 and broadcast).
 * - Clipping that acts on every step (max norm 1e-3) after the allreduce: still equal.
 * - Buckets: reverse layer order, tiling the arena, size rule; timing counters.
 * - Stop agreement: one rank's stop flag stops every rank after the same step.
 * - A model mismatch between ranks fails on every rank (no hang).
 * - Resume N -> M: 2 ranks (or 1 at N = 1) train 1 epoch into a run directory; copies of
 *   it are resumed on M = 1 .. N ranks for a second epoch; each equals a continuous 2-epoch
 *   single-process run within the tolerance.
 * - Binary data set: every rank memory-maps a .ddb file and, after 3 steps, has only the
 *   pages of its own frames resident in its page table (/proc/self/pagemap).
 *
 * Tolerance: float32 sums in a different order (per-rank partial sums of the batch
 * gradient, then the allreduce's order) differ from one process's sum by a few ulps per
 * step; AdamW divides by sqrt(v), so the relative difference of the update is of the order
 * of the gradients' relative rounding (1e-7 .. 1e-6). Measured after 12 steps: max |dw| <
 * 1e-7 x max |w| at N = 2, 3, 4; the test allows 1e-5 x max |w| (TOL_PARAM). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dd_test.h"
#include "distdpd/comm.h"
#include "distdpd/parallel.h"
#include "test_mpi_util.h"
#include "test_train_util.h"

#define TOL_PARAM 1e-5

static int g_rank, g_size;
static dd_comm *g_world;
static char g_tmp[512]; /* shared temporary directory (rank 0 creates it) */

/* 1 if every rank's flag is 1, so that one failing rank fails the check everywhere. */
static int all_ok(int ok) { return tm_all_ok(g_world, ok); }

/* 1 if every rank of c holds the same bytes (CRC32C gathered). */
static int same_on_all(dd_comm *c, const void *p, size_t bytes) {
    uint32_t v = dd_crc32c(0, p, bytes);
    int n = dd_comm_size(c);
    uint32_t *all = calloc((size_t)n, sizeof *all);
    int ok = all != NULL && dd_comm_allgather(c, &v, sizeof v, all) == DD_OK;
    for (int i = 0; ok && i < n; i++) ok = all[i] == v;
    free(all);
    return ok;
}

/* ---------------------------------------------------------------- equivalence */

static void test_equivalence(void) {
    dd_dataset *ds = tt_small_data();
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 16, 3, 12, 2);
    /* the single-process reference, on rank 0 */
    dd_trainer *one = NULL;
    float *ref = NULL;
    size_t nf = 0;
    double ref_loss[2] = {0, 0};
    if (g_rank == 0) {
        CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &one));
        if (one) {
            CHECK(dd_trainer_num_batches(one) == 6, "6 batches per epoch, got %llu",
                  (unsigned long long)dd_trainer_num_batches(one));
            CHECK(tt_train_epochs(one, 2) == 0, "one process: %s", dd_last_error());
            nf = dd_trainer_num_floats(one);
            ref = dd_trainer_params(one);
            size_t nh;
            const dd_epoch_record *h = dd_trainer_history(one, &nh);
            for (size_t i = 0; i < nh && i < 2; i++) ref_loss[i] = h[i].train_loss;
        }
    }
    static const double buckets[3] = {0.0, 4.0, 1e-9}; /* 1e-9 MiB: one float, so one bucket per tensor */
    double worst = 0;
    for (int a = 0; a < dd_allreduce_count(); a++) {
        for (int k = 0; k < 3; k++) {
            dd_dp_cfg dc;
            dd_dp_cfg_default(&dc);
            dc.algo = (dd_allreduce_algo)a;
            dc.bucket_mb = buckets[k];
            dd_dp *dp = NULL;
            CHECK_OK(dd_dp_create(g_world, &dc, &dp));
            dd_strategy h;
            dd_dp_strategy(dp, &h);
            dd_trainer *tr = NULL;
            CHECK_OK(dd_trainer_create(&c, ds, NULL, &h, &tr));
            int ok = tr != NULL && tt_train_epochs(tr, 2) == 0;
            CHECK(ok, "%s, bucket %g MB: training failed: %s", dd_allreduce_name(dc.algo), dc.bucket_mb, dd_last_error());
            ok = all_ok(ok);
            if (ok) {
                size_t n = dd_trainer_num_floats(tr);
                CHECK(same_on_all(g_world, dd_trainer_params(tr), n * sizeof(float)),
                      "%s: every rank has the same parameters", dd_allreduce_name(dc.algo));
                size_t nh;
                const dd_epoch_record *hh = dd_trainer_history(tr, &nh);
                double hv[4] = {NAN, NAN, NAN, NAN};
                for (size_t i = 0; i < nh && i < 2; i++) {
                    hv[2 * i] = hh[i].train_loss;
                    hv[2 * i + 1] = hh[i].val.nmse_db;
                }
                CHECK(nh == 2, "2 epoch records, got %zu", nh);
                CHECK(same_on_all(g_world, hv, sizeof hv), "every rank has the same losses and metrics");
                if (g_rank == 0 && one) {
                    double d = tt_rel_diff(dd_trainer_params(tr), ref, nf);
                    worst = fmax(worst, d);
                    if (g_size == 1)
                        CHECK(d == 0, "%s: one rank is the single-process trainer bit for bit (%.3g)",
                              dd_allreduce_name(dc.algo), d);
                    CHECK(d <= TOL_PARAM, "%s, bucket %g MB: %d ranks vs one process: max rel. difference %.3g",
                          dd_allreduce_name(dc.algo), dc.bucket_mb, g_size, d);
                    for (size_t i = 0; i < nh && i < 2; i++)
                        CHECK(fabs(hh[i].train_loss - ref_loss[i]) <= 1e-5 * ref_loss[i],
                              "epoch %zu loss %.9g vs %.9g", i + 1, hh[i].train_loss, ref_loss[i]);
                }
                /* buckets and counters */
                dd_dp_stats st;
                dd_dp_stats_get(dp, &st);
                CHECK(st.steps == 12, "12 steps counted, got %llu", (unsigned long long)st.steps);
                CHECK(st.exposed_s >= 0 && st.hidden_s >= 0 && st.comm_s >= 0, "timings");
                if (g_size > 1) {
                    CHECK(st.bytes == 12 * (uint64_t)n * sizeof(float), "bytes reduced %llu",
                          (unsigned long long)st.bytes);
                    CHECK(st.exposed_s > 0, "exposed time measured");
                    CHECK(!isnan(st.prev_exposed_mean_s) && st.prev_exposed_mean_s >= 0, "mean over ranks");
                    size_t nb = dd_dp_num_buckets(dp), top = n, lo = 0, hi = 0;
                    const dd_param_table *t = dd_model_params(dd_trainer_model(tr));
                    CHECK(nb >= 1, "buckets known");
                    for (size_t i = 0; i < nb; i++) {
                        CHECK_OK(dd_dp_bucket(dp, i, &lo, &hi));
                        CHECK(hi == top && lo < hi, "bucket %zu [%zu, %zu) follows %zu", i, lo, hi, top);
                        top = lo;
                    }
                    CHECK(top == 0, "buckets tile the arena");
                    if (k == 0 || k == 1) CHECK(nb == 1, "%s: one bucket, got %zu", k ? "4 MB" : "blocking", nb);
                    if (k == 2) {
                        CHECK(nb == t->count, "tiny buckets: one per tensor (%zu), got %zu", t->count, nb);
                        CHECK_OK(dd_dp_bucket(dp, 0, &lo, &hi));
                        CHECK(lo == t->entries[t->count - 1].offset, "bucket 0 is the last layer's tensor");
                        CHECK(k != 2 || st.hidden_s >= 0, "hidden time");
                    }
                    CHECK_ERR(dd_dp_bucket(dp, nb, &lo, &hi), DD_ERR_ARG, "out of range");
                }
            }
            dd_trainer_destroy(&tr);
            dd_dp_destroy(&dp);
        }
    }
    if (g_rank == 0)
        printf("equivalence: %d ranks vs one process after 12 AdamW steps, all algorithms and buckets: max rel. "
               "parameter difference %.3g (tolerance %.1g)\n",
               g_size, worst, TOL_PARAM);
    dd_trainer_destroy(&one);

    /* clipping that acts on every step (max norm 1e-3): the ranks clip the REDUCED
     * gradient by its global norm, so N ranks still equal one process */
    {
        dd_train_cfg cc = c;
        cc.clip = 1e-3;
        cc.epochs = 1;
        dd_trainer *o1 = NULL, *tr = NULL;
        if (g_rank == 0) {
            CHECK_OK(dd_trainer_create(&cc, ds, NULL, NULL, &o1));
            CHECK(o1 && tt_train_epochs(o1, 1) == 0, "clipped, one process: %s", dd_last_error());
        }
        dd_dp *dp = NULL;
        CHECK_OK(dd_dp_create(g_world, NULL, &dp));
        dd_strategy h;
        dd_dp_strategy(dp, &h);
        CHECK_OK(dd_trainer_create(&cc, ds, NULL, &h, &tr));
        int ok = all_ok(tr != NULL && tt_train_epochs(tr, 1) == 0);
        CHECK(ok, "clipped, %d ranks: %s", g_size, dd_last_error());
        if (ok && g_rank == 0 && o1) {
            size_t nh;
            const dd_epoch_record *hh = dd_trainer_history(tr, &nh);
            CHECK(nh == 1 && hh[0].grad_norm_max > 100 * cc.clip, "clipping acted (max norm %g)", hh[0].grad_norm_max);
            double d = tt_rel_diff(dd_trainer_params(tr), dd_trainer_params(o1), dd_trainer_num_floats(o1));
            printf("clip 1e-3 on every step: %d ranks vs one process: %.3g\n", g_size, d);
            CHECK(d <= TOL_PARAM, "clipped: %d ranks vs one process: %.3g", g_size, d);
        }
        dd_trainer_destroy(&tr);
        dd_trainer_destroy(&o1);
        dd_dp_destroy(&dp);
    }

    /* a DPD by direct learning through a frozen PA model; the target gain is computed on
     * rank 0 only and broadcast */
    {
        dd_model *pm = NULL;
        dd_model_cfg pc;
        memset(&pc, 0, sizeof pc);
        dd_model_cfg_set(&pc, "hidden", 5);
        CHECK_OK(dd_model_create("gru", &pc, &pm));
        float *pp = pm ? dd_calloc(dd_model_params(pm)->total, sizeof(float)) : NULL;
        if (pm && pp) {
            dd_model_init(pm, pp, 77);
            dd_model_ref pa = {"gru", *dd_model_config(pm), pp, dd_model_params(pm)->total};
            dd_train_cfg cd;
            tt_cfg(&cd, DD_TRAIN_DLA, 4, 16, 3, 12, 1);
            dd_trainer *o1 = NULL, *tr = NULL;
            if (g_rank == 0) {
                CHECK_OK(dd_trainer_create(&cd, ds, &pa, NULL, &o1));
                CHECK(o1 && tt_train_epochs(o1, 1) == 0, "DLA one process: %s", dd_last_error());
            }
            dd_dp *dp = NULL;
            dd_dp_cfg dc;
            dd_dp_cfg_default(&dc);
            dc.bucket_mb = 1e-4;
            CHECK_OK(dd_dp_create(g_world, &dc, &dp));
            dd_strategy h;
            dd_dp_strategy(dp, &h);
            CHECK_OK(dd_trainer_create(&cd, ds, &pa, &h, &tr));
            int ok = all_ok(tr != NULL && tt_train_epochs(tr, 1) == 0);
            CHECK(ok, "DLA %d ranks: %s", g_size, dd_last_error());
            if (ok) {
                double g = dd_trainer_cfg(tr)->gain;
                CHECK(same_on_all(g_world, &g, sizeof g), "every rank has rank 0's target gain");
                CHECK(same_on_all(g_world, dd_trainer_params(tr), dd_trainer_num_floats(tr) * sizeof(float)),
                      "DLA: identical parameters on every rank");
                if (g_rank == 0 && o1) {
                    CHECK(g == dd_trainer_cfg(o1)->gain, "gain %.17g vs %.17g", g, dd_trainer_cfg(o1)->gain);
                    double d = tt_rel_diff(dd_trainer_params(tr), dd_trainer_params(o1), dd_trainer_num_floats(o1));
                    printf("DLA through a frozen GRU: %d ranks vs one process after 6 steps: %.3g\n", g_size, d);
                    CHECK(d <= TOL_PARAM, "DLA: %d ranks vs one process: %.3g", g_size, d);
                }
            }
            dd_trainer_destroy(&tr);
            dd_trainer_destroy(&o1);
            dd_dp_destroy(&dp);
        }
        dd_free(pp);
        dd_model_destroy(&pm);
    }
    dd_dataset_free(&ds);
}

/* ---------------------------------------------------------------- stop, mismatch */

static void test_stop_and_mismatch(void) {
    dd_dataset *ds = tt_small_data();
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 4, 16, 3, 12, 1);
    dd_dp *dp = NULL;
    CHECK_OK(dd_dp_create(g_world, NULL, &dp));
    volatile int mine = 0;
    dd_dp_set_stop_source(dp, &mine);
    dd_strategy h;
    dd_dp_strategy(dp, &h);
    CHECK(h.rank == g_rank && h.nranks == g_size, "the strategy carries rank %d of %d", h.rank, h.nranks);
    dd_trainer *tr = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, &h, &tr));
    if (tr) {
        const volatile int *agreed = dd_dp_stop_flag(dp);
        CHECK_OK(dd_trainer_step(tr, NULL));
        CHECK(*agreed == 0, "no stop yet");
        if (g_rank == g_size - 1) mine = 1; /* e.g. SIGTERM reached the last rank only */
        CHECK_OK(dd_trainer_step(tr, NULL));
        CHECK(all_ok(*agreed == 1), "after the same step every rank agrees to stop");
    }
    dd_trainer_destroy(&tr);
    dd_dp_destroy(&dp);

    /* ranks with different models: the setup hook fails on every rank */
    if (g_size > 1) {
        dd_train_cfg cm = c;
        dd_model_cfg_set(&cm.model_cfg, "hidden", g_rank == 0 ? 4 : 5);
        CHECK_OK(dd_dp_create(g_world, NULL, &dp));
        dd_dp_strategy(dp, &h);
        CHECK_ERR(dd_trainer_create(&cm, ds, NULL, &h, &tr), DD_ERR_MISMATCH, "same model");
        CHECK(tr == NULL, "no trainer");
        dd_dp_destroy(&dp);
    }
    /* configuration checks */
    dd_dp_cfg bad;
    dd_dp_cfg_default(&bad);
    bad.bucket_mb = -1;
    CHECK_ERR(dd_dp_create(g_world, &bad, &dp), DD_ERR_ARG, "bucket_mb");
    dd_dp_cfg_default(&bad);
    bad.algo = (dd_allreduce_algo)17;
    CHECK_ERR(dd_dp_cfg_check(&bad), DD_ERR_ARG, "algo");
    CHECK_ERR(dd_dp_create(NULL, NULL, &dp), DD_ERR_ARG, "communicator");
    dd_dataset_free(&ds);
}

/* ---------------------------------------------------------------- resume N -> M */

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

/* Trains (or resumes) a run on the first `m` ranks of the world; the others wait. */
static dd_status run_on(int m, const dd_train_cfg *cfg, const char *data, const char *out, int resume, int stop_after) {
    dd_comm *sub = NULL;
    dd_status st = dd_comm_split(g_world, g_rank < m ? 0 : -1, g_rank, &sub);
    if (st != DD_OK) return st;
    if (sub) {
        dd_dp *dp = NULL;
        dd_dp_cfg dc;
        dd_dp_cfg_default(&dc);
        dc.bucket_mb = 1e-4;
        if ((st = dd_dp_create(sub, &dc, &dp)) == DD_OK) {
            dd_strategy h;
            dd_dp_strategy(dp, &h);
            dd_train_run_opts o;
            memset(&o, 0, sizeof o);
            o.data = resume ? NULL : data;
            o.out = out;
            o.resume = resume;
            o.strategy = &h;
            o.stop_after_epochs = stop_after;
            st = dd_train_run(resume ? NULL : cfg, &o);
        }
        dd_dp_destroy(&dp);
        dd_comm_free(&sub);
    }
    return st;
}

static void test_resume(void) {
    char data[600], cont[600], first[600];
    snprintf(data, sizeof data, "%s/data.ddb", g_tmp);
    snprintf(cont, sizeof cont, "%s/continuous", g_tmp);
    snprintf(first, sizeof first, "%s/first", g_tmp);
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 5, 16, 3, 12, 2);
    int ok = 1;
    if (g_rank == 0) {
        dd_dataset *ds = tt_small_data();
        ok = ds && dd_dataset_save_bin(ds, data) == DD_OK;
        dd_dataset_free(&ds);
        CHECK(ok, "binary data set written: %s", dd_last_error());
        dd_train_run_opts o;
        memset(&o, 0, sizeof o);
        o.data = data;
        o.out = cont;
        dd_status st = dd_train_run(&c, &o); /* continuous, one process, 2 epochs */
        CHECK(st == DD_OK, "continuous run: %s", dd_last_error());
        ok = ok && st == DD_OK;
    }
    if (!all_ok(ok)) return;
    const int n_first = g_size >= 2 ? 2 : 1;
    dd_status st = run_on(n_first, &c, data, first, 0, 1);
    CHECK(st == DD_OK, "epoch 1 on %d ranks: %s", n_first, dd_last_error());
    if (!all_ok(st == DD_OK)) return;
    dd_run_model ref;
    memset(&ref, 0, sizeof ref);
    if (g_rank == 0) CHECK_OK(dd_run_model_load(cont, "last", &ref));
    for (int m = 1; m <= g_size; m++) {
        char dir[700], a[800], b[800];
        snprintf(dir, sizeof dir, "%s/resume_%d", g_tmp, m);
        ok = 1;
        if (g_rank == 0) {
            static const char *const files[] = {"last.ckpt", "best.ckpt", "config.json", "metrics.jsonl", "history.csv"};
            ok = mkdir(dir, 0777) == 0;
            for (int i = 0; ok && i < 5; i++) {
                snprintf(a, sizeof a, "%s/%s", first, files[i]);
                snprintf(b, sizeof b, "%s/%s", dir, files[i]);
                ok = copy_file(a, b);
            }
            CHECK(ok, "copy of the run to %s", dir);
        }
        if (!all_ok(ok)) return;
        st = run_on(m, NULL, NULL, dir, 1, 0);
        CHECK(st == DD_OK, "resume on %d ranks: %s", m, dd_last_error());
        if (!all_ok(st == DD_OK)) return;
        if (g_rank == 0 && ref.params) {
            dd_run_model rm;
            CHECK_OK(dd_run_model_load(dir, "last", &rm));
            if (rm.params) {
                size_t n = dd_model_params(rm.model)->total;
                double d = tt_rel_diff(rm.params, ref.params, n);
                printf("resume: epoch 1 on %d rank%s, epoch 2 on %d: vs 2 epochs on one process: max rel. difference "
                       "%.3g\n",
                       n_first, n_first > 1 ? "s" : "", m, d);
                CHECK(rm.epoch == 2, "two epochs done (%d)", rm.epoch);
                CHECK(d <= TOL_PARAM, "resume %d -> %d ranks: %.3g", n_first, m, d);
                if (n_first == 1 && m == 1) CHECK(d == 0, "1 -> 1 rank resume is exact");
            }
            dd_run_model_free(&rm);
        }
    }
    dd_run_model_free(&ref);
}

/* ---------------------------------------------------------------- binary data: per-rank pages */

/* Present bits (this process's page table) of the pages of [p, p + bytes): out[i] for page
 * i of the page-aligned range starting at p's page. Returns the page count, 0 on error. */
static size_t resident_pages(const void *p, size_t bytes, unsigned char **out) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a0 = (uintptr_t)p / pg * pg, a1 = ((uintptr_t)p + bytes + pg - 1) / pg * pg;
    size_t np = (a1 - a0) / pg;
    *out = calloc(np, 1);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0 || !*out) {
        if (fd >= 0) close(fd);
        free(*out);
        *out = NULL;
        return 0;
    }
    uint64_t e;
    for (size_t i = 0; i < np; i++) {
        if (pread(fd, &e, sizeof e, (off_t)((a0 / pg + i) * sizeof e)) != (ssize_t)sizeof e) {
            close(fd);
            free(*out);
            *out = NULL;
            return 0;
        }
        (*out)[i] = (unsigned char)((e >> 63) & 1u);
    }
    close(fd);
    return np;
}

static void test_bin_slices(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/big.ddb", g_tmp);
    const size_t ntr = 600000, F = 32; /* 4.8 MB per array; frames of 32 with stride 32 */
    int ok = 1;
    if (g_rank == 0) {
        dd_spec s;
        tt_spec(&s);
        size_t n[3] = {ntr, 1024, 1024};
        dd_bin_writer *w = NULL;
        ok = dd_bin_writer_open(path, &s, n, &w) == DD_OK;
        dd_cf32 *x = dd_calloc(65536, sizeof *x), *y = dd_calloc(65536, sizeof *y);
        ok = ok && x && y;
        dd_rng g;
        dd_rng_seed(&g, 3);
        for (int sp = 0; sp < 3 && ok; sp++) {
            for (size_t done = 0; done < n[sp] && ok;) {
                size_t k = n[sp] - done < 65536 ? n[sp] - done : 65536;
                for (size_t i = 0; i < k; i++) {
                    x[i] = (float)(0.3 * (dd_rng_uniform(&g) - 0.5)) + I * (float)(0.3 * (dd_rng_uniform(&g) - 0.5));
                    y[i] = x[i] * (1.0f - 0.2f * (crealf(x[i]) * crealf(x[i]) + cimagf(x[i]) * cimagf(x[i])));
                }
                ok = dd_bin_writer_append(w, (dd_split)sp, x, y, k) == DD_OK;
                done += k;
            }
        }
        ok = ok && dd_bin_writer_commit(&w) == DD_OK;
        if (!ok) dd_bin_writer_abort(&w);
        /* drop the file from the page cache, so that pages appear only when a rank reads them */
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            (void)fdatasync(fd);
            (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
        dd_free(x);
        dd_free(y);
        CHECK(ok, "big binary data set: %s", dd_last_error());
    }
    if (!all_ok(ok)) return;
    dd_dataset *ds = NULL;
    CHECK_OK(dd_dataset_load(path, &ds));
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 3, F, F, 8, 1);
    c.eval_test = 0;
    dd_dp *dp = NULL;
    dd_trainer *tr = NULL;
    CHECK_OK(dd_dp_create(g_world, NULL, &dp));
    dd_strategy h;
    dd_dp_strategy(dp, &h);
    if (ds) {
        /* no read-around (MADV_RANDOM), so that the pages resident in this process are those
         * of its frames, up to the kernel's fault-around window */
        const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        for (int arr = 0; arr < 2; arr++) {
            uintptr_t a = (uintptr_t)(arr ? ds->out[0] : ds->in[0]), e = a + ds->n[0] * sizeof(dd_cf32);
            a = (a + pg - 1) / pg * pg;
            e = e / pg * pg;
            if (e > a) (void)posix_madvise((void *)a, e - a, POSIX_MADV_RANDOM);
        }
        CHECK_OK(dd_trainer_create(&c, ds, NULL, &h, &tr));
    }
    ok = tr != NULL;
    for (int s = 0; s < 3 && ok; s++) ok = dd_trainer_step(tr, NULL) == DD_OK;
    CHECK(ok, "3 steps on the mapped data set: %s", dd_last_error());
    if (all_ok(ok)) {
        /* pages this rank needed: its slice of global batches 0..2 of epoch 0 */
        const size_t pg = (size_t)sysconf(_SC_PAGESIZE), win = 65536; /* fault-around window */
        const float *in0 = (const float *)ds->in[0], *out0 = (const float *)ds->out[0];
        dd_sampler smp;
        dd_sampler_init(&smp, ntr / F, c.seed, 1);
        int pass = 1;
        size_t tot_res = 0, tot_need = 0, np = 0;
        for (int arr = 0; arr < 2; arr++) {
            const char *base = arr ? (const char *)out0 : (const char *)in0;
            unsigned char *res = NULL;
            np = resident_pages(base, ntr * sizeof(dd_cf32), &res);
            if (!np) {
                if (g_rank == 0) printf("binary slices: /proc/self/pagemap unreadable: page check skipped\n");
                pass = -1;
                break;
            }
            const uintptr_t a0 = (uintptr_t)base / pg * pg;
            unsigned char *need = calloc(np, 1), *blk = calloc(np, 1);
            for (uint64_t b = 0; b < 3; b++) {
                uint64_t lo, hi, gsz;
                dd_batch_slice(ntr / F, c.batch, b, g_rank, g_size, &lo, &hi, &gsz);
                for (uint64_t j = lo; j < hi; j++) {
                    uint64_t fi = dd_sampler_index(&smp, 0, j);
                    uintptr_t s0 = (uintptr_t)(base + fi * F * sizeof(dd_cf32)), s1 = s0 + F * sizeof(dd_cf32);
                    for (uintptr_t q = s0 / pg * pg; q < s1; q += pg) need[(q - a0) / pg] = 1;
                    for (uintptr_t q = s0 / win * win; q < (s1 + win - 1) / win * win; q += pg)
                        if (q >= a0 && (q - a0) / pg < np) blk[(q - a0) / pg] = 1;
                }
            }
            blk[0] = 1; /* the page shared with the header or the other array */
            blk[np - 1] = 1;
            for (size_t i = 0; i < np; i++) {
                tot_res += res[i];
                tot_need += need[i];
                if (need[i] && !res[i]) pass = 0;  /* a page we read must be present */
                if (res[i] && !blk[i]) pass = 0;   /* nothing outside our frames' windows */
            }
            free(need);
            free(blk);
            free(res);
        }
        if (pass >= 0) {
            printf("binary slices: rank %d of %d: %zu of %zu pages of the training split resident (%zu needed)\n",
                   g_rank, g_size, tot_res, 2 * np, tot_need);
            CHECK(pass == 1, "rank %d touched only the pages of its own frames", g_rank);
            CHECK(tot_res <= 16 * tot_need + 4 && tot_res < 2 * np / 4,
                  "rank %d: at most one fault-around window (16 pages) per page read", g_rank);
        }
    }
    dd_trainer_destroy(&tr);
    dd_dp_destroy(&dp);
    dd_dataset_free(&ds);
}

int main(int argc, char **argv) {
    if (dd_comm_init(&argc, &argv) != DD_OK || dd_comm_world(&g_world) != DD_OK) {
        fprintf(stderr, "test_dp_mpi: %s\n", dd_last_error());
        return 1;
    }
    g_rank = dd_comm_rank(g_world);
    g_size = dd_comm_size(g_world);
    const char *np = getenv("DD_TEST_NP");
    if (np && g_rank == 0 && atoi(np) != g_size)
        printf("note: DD_TEST_NP=%s but %d rank(s) (not started by mpiexec?)\n", np, g_size);
    memset(g_tmp, 0, sizeof g_tmp);
    if (g_rank == 0) snprintf(g_tmp, sizeof g_tmp, "%s", dd_test_tmpdir());
    dd_comm_bcast(g_world, g_tmp, sizeof g_tmp, 0);

    double t0 = dd_now();
    test_equivalence();
    double t1 = dd_now();
    test_stop_and_mismatch();
    test_resume();
    double t2 = dd_now();
    test_bin_slices();
    if (g_rank == 0) printf("times: equivalence %.1f s, resume %.1f s, binary %.1f s\n", t1 - t0, t2 - t1, dd_now() - t2);

    /* every rank's verdict */
    int ok = all_ok(dd_t_fail == 0);
    dd_comm_barrier(g_world);
    if (g_rank == 0) {
        dd_t_rm(g_tmp); /* tests/dd_test.h: no shell */
    }
    char name[64];
    snprintf(name, sizeof name, "test_dp_mpi (rank %d of %d)", g_rank, g_size);
    int rc = dd_test_done(name);
    if (!ok && rc == 0) rc = 1;
    dd_comm_free(&g_world);
    dd_comm_finalize();
    return rc;
}
