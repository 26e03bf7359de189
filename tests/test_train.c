/* Unit tests of the training engine (train.h): framing by index, the epoch sampler
 * (bijection, determinism, rank slices), configuration JSON round trip, the gradient of a
 * whole training step against central finite differences (PA modelling and direct
 * learning through a frozen model), gradients summing across rank slices, two ranks in
 * a two-thread strategy built from the trainer's blocks matching one process, exact resume
 * (2 epochs == 1 epoch + save + load + 1 epoch, also from the middle of an epoch), refusal
 * of truncated, corrupt and incompatible checkpoints, the simulated-PA sidecar, a batch
 * larger than the training frames (memory and time bounded by the data, the same result
 * as batch = frames, a warning), and bounded evaluation memory (the same metrics whatever
 * the evaluation workspace cap; nperseg 2^20 on splits of a few thousand samples
 * evaluates in about 100 MB; at nperseg 32768 the evaluation workspace stays under one
 * segment's forward workspace and the peak RSS near the split copies). */
#include <cblas.h> /* openblas_set_num_threads */
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "dd_test.h"
#include "distdpd/train.h"
#include "probe_test_util.h"
#include "test_train_util.h"
#include "train/train_internal.h"

/* ---------------------------------------------------------------- framing */

static void test_framing(void) {
    dd_framing f;
    CHECK_OK(dd_framing_init(&f, 23040, 200, 1));
    CHECK(f.count == 22841, "DPA frame count %zu", f.count);
    CHECK_OK(dd_framing_init(&f, 10, 3, 4));
    CHECK(f.count == 2, "count %zu (windows at 0, 4; 8 would need 11 samples)", f.count);
    CHECK_OK(dd_framing_init(&f, 11, 3, 4));
    CHECK(f.count == 3, "count %zu", f.count);
    CHECK_OK(dd_framing_init(&f, 2, 3, 1));
    CHECK(f.count == 0, "short split: %zu frames", f.count);
    CHECK_OK(dd_framing_init(&f, 5, 5, 7));
    CHECK(f.count == 1, "exact length: %zu", f.count);
    CHECK_ERR(dd_framing_init(&f, 10, 0, 1), DD_ERR_ARG, "frame length");
    CHECK_ERR(dd_framing_init(&f, 10, 2, 0), DD_ERR_ARG, "stride");

    /* content: frame i is samples [i*S, i*S+F) */
    dd_cf32 x[50];
    for (int i = 0; i < 50; i++) x[i] = (float)i + I * (float)(100 + i);
    CHECK_OK(dd_framing_init(&f, 50, 6, 5));
    CHECK(f.count == 9, "count %zu", f.count);
    uint64_t idx[3] = {8, 0, 3};
    float out[3 * 6 * 2];
    dd_framing_gather(&f, x, idx, 3, 1.0f, out);
    int ok = 1;
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 6; t++) {
            int s = (int)idx[b] * 5 + t;
            ok &= out[(b * 6 + t) * 2] == (float)s && out[(b * 6 + t) * 2 + 1] == (float)(100 + s);
        }
    CHECK(ok, "gathered frames are the right windows");
    dd_framing_gather(&f, x, idx, 3, 0.5f, out);
    CHECK(out[0] == 20.0f && out[1] == 70.0f, "scaled gather: %g %g", out[0], out[1]);
}

/* ---------------------------------------------------------------- sampler */

static void test_sampler(void) {
    const uint64_t sizes[] = {1, 2, 3, 5, 16, 17, 100, 1000, 22841};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint64_t n = sizes[k];
        dd_sampler s;
        CHECK_OK(dd_sampler_init(&s, n, 42, 1));
        unsigned char *seen = calloc(n, 1);
        int bij = 1, differs = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t v = dd_sampler_index(&s, 3, i);
            if (v >= n || seen[v]) bij = 0;
            if (v < n) seen[v] = 1;
            if (v != dd_sampler_index(&s, 3, i)) bij = 0; /* deterministic */
            if (v != dd_sampler_index(&s, 4, i)) differs = 1;
        }
        CHECK(bij, "n = %llu: epoch order is a permutation", (unsigned long long)n);
        if (n >= 16) CHECK(differs, "n = %llu: epochs 3 and 4 have different orders", (unsigned long long)n);
        free(seen);
    }
    /* keyed by the seed too; identity without shuffling */
    dd_sampler a, b, c;
    CHECK_OK(dd_sampler_init(&a, 1000, 1, 1));
    CHECK_OK(dd_sampler_init(&b, 1000, 2, 1));
    CHECK_OK(dd_sampler_init(&c, 1000, 1, 0));
    int same = 1, ident = 1;
    for (uint64_t i = 0; i < 1000; i++) {
        same &= dd_sampler_index(&a, 0, i) == dd_sampler_index(&b, 0, i);
        ident &= dd_sampler_index(&c, 5, i) == i;
    }
    CHECK(!same, "seeds 1 and 2 give different orders");
    CHECK(ident, "shuffle off keeps the order");
    /* rough uniformity: where item 0 lands over 4000 epochs, in 4 quarters */
    int q[4] = {0, 0, 0, 0};
    for (uint64_t e = 0; e < 4000; e++) q[dd_sampler_index(&a, e, 0) * 4 / 1000]++;
    for (int k = 0; k < 4; k++) CHECK(q[k] > 850 && q[k] < 1150, "quarter %d holds %d of 4000 (expect ~1000)", k, q[k]);
    /* mean position of the first half of an epoch ~ n/2 */
    double m = 0;
    for (uint64_t i = 0; i < 500; i++) m += (double)dd_sampler_index(&a, 9, i);
    CHECK(fabs(m / 500 - 499.5) < 40, "mean of the first half %.1f", m / 500);
    CHECK_ERR(dd_sampler_init(&a, 0, 1, 1), DD_ERR_ARG, "n = 0");

    CHECK(dd_sampler_num_batches(22841, 64) == 357, "batches %llu", (unsigned long long)dd_sampler_num_batches(22841, 64));
    /* rank slices: disjoint, cover the global batch, sizes differ by <= 1 */
    for (int p = 1; p <= 5; p++)
        for (uint64_t bt = 0; bt < 3; bt++) {
            uint64_t n = 70, B = 32, prev = bt * B, tot = 0, gsz = 0;
            int ok = 1;
            for (int r = 0; r < p; r++) {
                uint64_t lo, hi, g;
                dd_batch_slice(n, B, bt, r, p, &lo, &hi, &g);
                ok &= lo == prev && hi >= lo;
                prev = hi;
                tot += hi - lo;
                gsz = g;
            }
            uint64_t want = bt < 2 ? 32 : 6;
            CHECK(ok && tot == want && gsz == want, "p = %d batch %llu: slices cover %llu of %llu", p,
                  (unsigned long long)bt, (unsigned long long)tot, (unsigned long long)want);
        }
}

/* ---------------------------------------------------------------- configuration */

static void test_cfg_json(void) {
    dd_train_cfg c, d;
    dd_train_cfg_default(&c, DD_TRAIN_DLA);
    CHECK_OK(dd_train_cfg_check(&c));
    dd_model_cfg_set(&c.model_cfg, "hidden", 17);
    c.frame = 123;
    c.stride = 7;
    c.batch = 33;
    c.lr = 3.3e-3;
    c.clip = 0.0;
    c.seed = 0x8000000000000005ull;
    c.gain = 2.5 / 3.0;
    c.gain_mode = 1;
    c.sched = dd_lr_cfg_default(DD_LR_COSINE, c.lr);
    c.sched.t_max = 1000;
    c.sched.warmup = 10;
    c.ckpt_every = 50;
    char *j1 = NULL, *j2 = NULL;
    CHECK_OK(dd_train_cfg_to_json(&c, &j1));
    CHECK_OK(dd_train_cfg_from_json(j1, "test", &d));
    CHECK_OK(dd_train_cfg_to_json(&d, &j2));
    CHECK(j1 && j2 && strcmp(j1, j2) == 0, "JSON round trip:\n%s\n%s", j1, j2);
    CHECK(d.seed == c.seed && d.lr == c.lr && d.gain == c.gain && d.task == DD_TRAIN_DLA && d.frame == 123 &&
              d.sched.kind == DD_LR_COSINE && d.sched.warmup == 10 && dd_model_cfg_get(&d.model_cfg, "hidden") == 17,
          "fields restored exactly");
    dd_free(j1);
    dd_free(j2);
    CHECK_ERR(dd_train_cfg_from_json("{\"task\":\"pa\",\"frame\":\"x\"}", "cfg.json", &d), DD_ERR_FORMAT, "'frame'");
    CHECK_ERR(dd_train_cfg_from_json("{\"task\":\"pa\",\"batch\":0}", "cfg.json", &d), DD_ERR_ARG, "batch");
    CHECK_ERR(dd_train_cfg_from_json("not json", "cfg.json", &d), DD_ERR_FORMAT, "cfg.json");
    /* found by fuzz_config: 1e999 parses to inf, which to_json wrote back as null */
    CHECK_ERR(dd_train_cfg_from_json("{\"task\":\"pa\",\"eps\":1e999}", "cfg.json", &d), DD_ERR_FORMAT,
              "cfg.json: key 'eps' is not a finite number");
    dd_train_cfg_default(&c, DD_TRAIN_PA);
    snprintf(c.opt, sizeof c.opt, "lion");
    CHECK_ERR(dd_train_cfg_check(&c), DD_ERR_ARG, "lion");
    dd_train_cfg_default(&c, DD_TRAIN_PA);
    c.lr = -1;
    CHECK_ERR(dd_train_cfg_check(&c), DD_ERR_ARG, "lr");
    /* model options: "model_opts" of any name round-trips; a configuration written before
     * models declared their own options (six flat keys, 0 = unused) reads as the options
     * that were set */
    CHECK_OK(dd_train_cfg_from_json("{\"task\":\"pa\",\"model\":\"tcn\",\"model_opts\":{\"hidden\":8,\"kernel\":3}}",
                                    "cfg.json", &d));
    CHECK(d.model_cfg.n == 2 && dd_model_cfg_get(&d.model_cfg, "kernel") == 3, "model_opts read");
    CHECK_OK(dd_train_cfg_from_json("{\"task\":\"pa\",\"model\":\"gru\",\"hidden\":12,\"layers\":0,\"memory\":0,"
                                    "\"order\":0,\"kernel\":0,\"cross\":0}",
                                    "old.json", &d));
    CHECK(d.model_cfg.n == 1 && dd_model_cfg_get(&d.model_cfg, "hidden") == 12, "legacy flat keys read");
    CHECK_ERR(dd_train_cfg_from_json("{\"task\":\"pa\",\"model_opts\":{\"hidden\":1.5}}", "cfg.json", &d), DD_ERR_FORMAT,
              "hidden");
}

/* dd_model_cfg: named options, parse/format round trip, errors. */
static void test_model_cfg(void) {
    dd_model_cfg c;
    memset(&c, 0, sizeof c);
    CHECK(dd_model_cfg_get(&c, "hidden") == 0, "empty configuration");
    CHECK_OK(dd_model_cfg_set(&c, "hidden", 23));
    CHECK_OK(dd_model_cfg_set(&c, "my_new_option", 7)); /* any name a model may declare */
    CHECK_OK(dd_model_cfg_set(&c, "hidden", 24));
    CHECK(c.n == 2 && dd_model_cfg_get(&c, "hidden") == 24 && dd_model_cfg_get(&c, "my_new_option") == 7, "set");
    char buf[128];
    dd_model_cfg_format(&c, buf, sizeof buf);
    CHECK(strcmp(buf, "hidden=24,my_new_option=7") == 0, "format '%s'", buf);
    dd_model_cfg d;
    memset(&d, 0, sizeof d);
    CHECK_OK(dd_model_cfg_parse(&d, buf));
    CHECK(dd_model_cfg_equal(&c, &d), "parse(format) == original");
    CHECK_OK(dd_model_cfg_set(&d, "hidden", 0)); /* unset: the default */
    CHECK(d.n == 1 && !dd_model_cfg_equal(&c, &d), "unset");
    CHECK_ERR(dd_model_cfg_set(&c, "Hidden", 3), DD_ERR_ARG, "Hidden");
    CHECK_ERR(dd_model_cfg_parse(&c, "hidden=0x10"), DD_ERR_ARG, "decimal");
    CHECK_ERR(dd_model_cfg_parse(&c, "hidden=3,"), DD_ERR_ARG, "empty item");
    CHECK_ERR(dd_model_cfg_parse(&c, "hidden"), DD_ERR_ARG, "name=value");
    CHECK(dd_model_cfg_get(&c, "hidden") == 24, "unchanged after a failed parse");
    for (int k = 0; k < DD_MODEL_MAX_OPTS; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, "o%d", k);
        dd_model_cfg_set(&d, nm, 1);
    }
    CHECK_ERR(dd_model_cfg_set(&d, "one_too_many", 1), DD_ERR_ARG, "more than");
    /* a created model lists exactly its declared options, in their order */
    dd_model *m = NULL;
    memset(&c, 0, sizeof c);
    dd_model_cfg_set(&c, "kernel", 9); /* gru does not declare kernel: ignored */
    CHECK_OK(dd_model_create("gru", &c, &m));
    dd_model_cfg_format(dd_model_config(m), buf, sizeof buf);
    CHECK(strcmp(buf, "hidden=23,layers=1") == 0, "gru's configuration '%s'", buf);
    dd_model_destroy(&m);
}

/* ---------------------------------------------------------------- gradients */

/* Max |fd - analytic| / max |analytic| over all parameters of the trainer's model, with
 * central differences of step h. */
static double fd_check_h(dd_trainer *tr, uint64_t batch, float h) {
    size_t n = dd_trainer_num_floats(tr);
    float *p = dd_trainer_params(tr);
    float *g = malloc(n * sizeof *g);
    double loss;
    if (dd_trainer_loss_grad(tr, 0, batch, &loss) != DD_OK) {
        free(g);
        return INFINITY;
    }
    memcpy(g, dd_trainer_grads(tr), n * sizeof *g);
    const dd_param_table *t = dd_model_params(dd_trainer_model(tr));
    double gmax = 0, emax = 0;
    for (size_t e = 0; e < t->count; e++)
        for (size_t k = 0; k < t->entries[e].size; k++) {
            size_t i = t->entries[e].offset + k;
            float p0 = p[i];
            double lp, lm;
            p[i] = p0 + h;
            float dp = p[i] - p0;
            dd_trainer_loss_grad(tr, 0, batch, &lp);
            p[i] = p0 - h;
            float dm = p0 - p[i];
            dd_trainer_loss_grad(tr, 0, batch, &lm);
            p[i] = p0;
            double fd = (lp - lm) / ((double)dp + (double)dm);
            gmax = fmax(gmax, fabs(g[i]));
            emax = fmax(emax, fabs(fd - g[i]));
        }
    free(g);
    return gmax > 0 ? emax / gmax : INFINITY;
}
static double fd_check(dd_trainer *tr, uint64_t batch) { return fd_check_h(tr, batch, 1e-3f); }

/* L1 loss (OpenDPD --loss_type l1): its hand-written gradient sign(e)/N against central
 * finite differences, and mean|e| <= sqrt(mean e^2) against the L2 loss of the same batch
 * (Cauchy-Schwarz; equality only when every |e| is the same). */
static void test_l1_loss(void) {
    size_t n[3] = {300, 256, 256};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 11, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 3, 12, 5, 8, 1);
    dd_trainer *t2 = NULL, *t1 = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &t2));
    c.loss = 1;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &t1));
    if (t1 && t2) {
        double l1, l2;
        CHECK_OK(dd_trainer_loss_grad(t2, 0, 2, &l2));
        CHECK_OK(dd_trainer_loss_grad(t1, 0, 2, &l1));
        printf("batch 2: L1 loss %.6g, L2 loss %.6g (sqrt %.6g)\n", l1, l2, sqrt(l2));
        /* mean|e| <= sqrt(mean e^2); and with errors of rms 0.3 (mostly |e| < 1, where
         * |e| > e^2) the L1 loss is well above the L2 loss: a trainer that ignored
         * cfg.loss would give l1 == l2 */
        CHECK(l1 > 0 && l1 < sqrt(l2) && l1 > 1.5 * l2, "L1 %g against L2 %g and sqrt(L2) %g", l1, l2, sqrt(l2));
        /* a smaller step than for L2: |e| has a kink at 0, and a step of 1e-3 moves some of
         * the 192 errors across it */
        double e = fd_check_h(t1, 2, 1e-4f);
        printf("finite differences (step 1e-4), PA step with the L1 loss: rel. error %.3g\n", e);
        CHECK(e < 5e-3, "L1 gradient vs finite differences: rel. error %.3g", e);
        /* the loss is part of the configuration's JSON (config.json, checkpoints) */
        char *js = NULL;
        dd_train_cfg back;
        CHECK_OK(dd_train_cfg_to_json(&c, &js));
        CHECK(js && strstr(js, "\"loss\":\"l1\""), "config JSON names the loss: %s", js ? js : "");
        CHECK_OK(dd_train_cfg_from_json(js, "test", &back));
        CHECK(back.loss == 1, "loss l1 read back");
        dd_free(js);
    }
    dd_trainer_destroy(&t1);
    dd_trainer_destroy(&t2);
    dd_dataset_free(&ds);
}

static void test_gradients(void) {
    size_t n[3] = {300, 256, 256};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 11, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 3, 12, 5, 8, 1); /* 58 frames: 7 batches of 8 and one of 2 */
    dd_trainer *tr = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tr));
    if (tr) {
        CHECK(dd_trainer_num_frames(tr) == 58 && dd_trainer_num_batches(tr) == 8, "frames %llu batches %llu",
              (unsigned long long)dd_trainer_num_frames(tr), (unsigned long long)dd_trainer_num_batches(tr));
        double e0 = fd_check(tr, 0), e7 = fd_check(tr, 7);
        printf("finite differences, PA step: rel. error %.3g (batch 0), %.3g (partial batch)\n", e0, e7);
        CHECK(e0 < 2e-3, "PA step gradient vs finite differences: rel. error %.3g", e0);
        CHECK(e7 < 2e-3, "last partial batch: rel. error %.3g", e7);
        /* the loss is the MSE over the batch: recompute it by hand for batch 7 */
        double loss;
        CHECK_OK(dd_trainer_loss_grad(tr, 0, 7, &loss));
        CHECK(loss > 0 && isfinite(loss), "loss %g", loss);
    }

    /* a step that leaves a parameter non-finite (finite loss and gradient, absurd learning
     * rate) is refused with a message that says so */
    {
        dd_train_cfg cb = c;
        snprintf(cb.opt, sizeof cb.opt, "sgd");
        cb.optim = dd_optim_cfg_default(DD_OPTIM_SGD);
        cb.lr = 1e300;
        cb.sched.base_lr = cb.lr;
        cb.clip = 0;
        dd_trainer *bad = NULL;
        CHECK_OK(dd_trainer_create(&cb, ds, NULL, NULL, &bad));
        if (bad) {
            CHECK_ERR(dd_trainer_step(bad, NULL), DD_ERR_NUMERIC, "is inf after the step at epoch 1, batch 1");
        }
        dd_trainer_destroy(&bad);
    }

    /* worker slices: the gradients of 3 workers' slices (normalised by the global batch),
     * computed with the strategy building blocks, sum to the single-process gradient */
    if (tr) {
        size_t nf = dd_trainer_num_floats(tr);
        double ls, sse[3], emax = 0, gmax = 0;
        float *acc = calloc(nf, sizeof *acc);
        uint64_t glob = 0;
        for (int r = 0; r < 3; r++) {
            uint64_t lo, hi;
            dd_trainer_batch_slice(tr, 3, r, 3, &lo, &hi, &glob);
            CHECK_OK(dd_trainer_compute_grads(tr, 2, lo, hi, glob, NULL, &sse[r]));
            for (size_t i = 0; i < nf; i++) acc[i] += dd_trainer_grads(tr)[i];
        }
        CHECK_OK(dd_trainer_loss_grad(tr, 2, 3, &ls));
        for (size_t i = 0; i < nf; i++) {
            emax = fmax(emax, fabs((double)acc[i] - dd_trainer_grads(tr)[i]));
            gmax = fmax(gmax, fabs(dd_trainer_grads(tr)[i]));
        }
        CHECK(emax <= 1e-5 * gmax, "sum of worker gradients vs one process: %.3g (max %.3g)", emax, gmax);
        CHECK_NEAR((sse[0] + sse[1] + sse[2]) * dd_trainer_loss_scale(tr, glob), ls, 1e-6 * ls);
        uint64_t lo, hi;
        dd_trainer_batch_slice(tr, 3, 0, 1, &lo, &hi, &glob);
        CHECK_ERR(dd_trainer_compute_grads(tr, 2, lo, hi + 1000000, glob, NULL, &sse[0]), DD_ERR_ARG, "frames");
        free(acc);
    }

    /* direct learning: gradient through a frozen PA model into the DPD */
    if (tr) {
        dd_model_ref pa = {"gru", *dd_model_config(dd_trainer_model(tr)), dd_trainer_params(tr), dd_trainer_num_floats(tr)};
        dd_train_cfg cd;
        tt_cfg(&cd, DD_TRAIN_DLA, 2, 12, 5, 8, 1);
        dd_trainer *td = NULL;
        CHECK_OK(dd_trainer_create(&cd, ds, &pa, NULL, &td));
        if (td) {
            double e = fd_check(td, 2);
            printf("finite differences, DLA step: rel. error %.3g\n", e);
            CHECK(e < 2e-3, "DLA step gradient through the frozen PA: rel. error %.3g", e);
            CHECK(dd_trainer_cfg(td)->gain > 0, "target gain resolved: %g", dd_trainer_cfg(td)->gain);
        }
        dd_trainer_destroy(&td);
        CHECK_ERR(dd_trainer_create(&cd, ds, NULL, NULL, &td), DD_ERR_ARG, "frozen PA model");
        CHECK(td == NULL, "no trainer on error");
    }
    dd_trainer_destroy(&tr);
    /* a train split shorter than one frame */
    tt_cfg(&c, DD_TRAIN_PA, 3, 400, 1, 8, 1);
    CHECK_ERR(dd_trainer_create(&c, ds, NULL, NULL, &tr), DD_ERR_ARG, "fewer than one frame");
    tt_cfg(&c, DD_TRAIN_PA, 3, 12, 1, 8, 1);
    snprintf(c.model, sizeof c.model, "nosuchmodel");
    CHECK_ERR(dd_trainer_create(&c, ds, NULL, NULL, &tr), DD_ERR_ARG, "nosuchmodel");
    dd_dataset_free(&ds);
}

/* ---------------------------------------------------------------- resume */

static int run_steps(dd_trainer *tr, int epochs_to_finish, int extra_steps) {
    for (int e = 0; e < epochs_to_finish; e++) {
        while (!dd_trainer_epoch_done(tr))
            if (dd_trainer_step(tr, NULL) != DD_OK) return -1;
        if (dd_trainer_end_epoch(tr, NULL) != DD_OK) return -1;
    }
    for (int s = 0; s < extra_steps; s++)
        if (dd_trainer_step(tr, NULL) != DD_OK) return -1;
    return 0;
}

static int same_state(dd_trainer *a, dd_trainer *b) {
    size_t n = dd_trainer_num_floats(a);
    if (n != dd_trainer_num_floats(b)) return 0;
    if (memcmp(dd_trainer_params(a), dd_trainer_params(b), n * sizeof(float)) != 0) return 0;
    if (dd_trainer_steps(a) != dd_trainer_steps(b) || dd_trainer_epoch(a) != dd_trainer_epoch(b)) return 0;
    if (dd_trainer_lr(a) != dd_trainer_lr(b)) return 0;
    size_t na, nb;
    const dd_epoch_record *ha = dd_trainer_history(a, &na), *hb = dd_trainer_history(b, &nb);
    if (na != nb) return 0;
    for (size_t i = 0; i < na; i++)
        if (ha[i].train_loss != hb[i].train_loss || ha[i].val.nmse_db != hb[i].val.nmse_db || ha[i].best != hb[i].best)
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- batch above the frames */

static long peak_rss_kib(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* CPU seconds of this process (user + system: page faults count), not disturbed by
 * other jobs on the machine as wall time is */
static double cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static char logged[512];
static void capture_log(dd_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == DD_LOG_WARN) snprintf(logged, sizeof logged, "%s", msg);
}

/* A global batch never holds more frames than there are: a batch of 2^17 on 495 frames
 * (issue 10: --batch 1048576 on 1,494 frames allocated > 9.3 GB for the batch) must
 * cost what batch 495 costs in memory (peak RSS, getrusage) and time, train bit for bit
 * like it (one batch per epoch), and say so once. PA modelling and direct learning
 * through a frozen model (its buffers too). */
static void test_batch_above_frames(void) {
    size_t n[3] = {1500, 512, 512};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 50, 0.7, 0, 3, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    const size_t big = (size_t)1 << 17;
    for (int task = 0; task < 2; task++) {
        dd_train_cfg c;
        tt_cfg(&c, task ? DD_TRAIN_DLA : DD_TRAIN_PA, 4, 16, 3, 495, 2); /* 495 frames */
        dd_trainer *pa = NULL, *a = NULL, *b = NULL;
        dd_model_ref ref, *pr = NULL;
        if (task) { /* a frozen PA model: a briefly trained one */
            dd_train_cfg cp;
            tt_cfg(&cp, DD_TRAIN_PA, 4, 16, 3, 64, 1);
            CHECK_OK(dd_trainer_create(&cp, ds, NULL, NULL, &pa));
            if (!pa || run_steps(pa, 1, 0) != 0) {
                CHECK(0, "PA model for the DLA case: %s", dd_last_error());
                dd_trainer_destroy(&pa);
                break;
            }
            ref = (dd_model_ref){"gru", *dd_model_config(dd_trainer_model(pa)), dd_trainer_params(pa),
                                 dd_trainer_num_floats(pa)};
            pr = &ref;
        }
        double t0 = cpu_s();
        CHECK_OK(dd_trainer_create(&c, ds, pr, NULL, &a));
        CHECK(a && run_steps(a, 2, 0) == 0, "batch 495: %s", dd_last_error());
        const double ta = cpu_s() - t0;

        dd_train_cfg cb = c;
        cb.batch = big;
        logged[0] = '\0';
        dd_log_set(capture_log, NULL, DD_LOG_WARN);
        const long rss0 = peak_rss_kib();
        t0 = cpu_s();
        CHECK_OK(dd_trainer_create(&cb, ds, pr, NULL, &b));
        dd_log_set(NULL, NULL, DD_LOG_ERROR);
        CHECK(b && run_steps(b, 2, 0) == 0, "batch %zu: %s", big, dd_last_error());
        const double tb = cpu_s() - t0;
        const long grow = peak_rss_kib() - rss0;
        printf("%s: batch 495: %.3f CPU s; batch %zu: %.3f CPU s, peak RSS +%ld KiB\n", task ? "DLA" : "PA", ta, big, tb, grow);
        /* the data set is 2.5 k samples and the buffers of 495 frames of 16 samples a few
         * MB; the batch as asked would be 2 M samples per buffer (hundreds of MB) */
        CHECK(grow >= 0 && grow < 48 * 1024, "batch %zu on 495 frames: peak RSS grew by %ld KiB", big, grow);
        CHECK(tb < 10 * ta + 0.05, "batch %zu took %.3f CPU s, batch 495 %.3f CPU s", big, tb, ta);
        CHECK(strstr(logged, "batch 131072 is larger than the 495 training frames") != NULL, "warning: '%s'", logged);
        if (a && b) {
            CHECK(dd_trainer_num_batches(b) == 1 && dd_trainer_num_batches(a) == 1, "one batch per epoch: %llu",
                  (unsigned long long)dd_trainer_num_batches(b));
            CHECK(same_state(a, b), "batch %zu trains bit for bit as batch 495 (%s)", big, task ? "DLA" : "PA");
            CHECK(dd_trainer_cfg(b)->batch == big, "the configuration keeps the batch asked for");
        }
        dd_trainer_destroy(&a);
        dd_trainer_destroy(&b);
        dd_trainer_destroy(&pa);
    }
    dd_dataset_free(&ds);
}

static void test_resume(const char *tmp) {
    size_t n[3] = {1500, 512, 512};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 50, 0.7, 0, 3, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 4, 16, 3, 16, 3); /* 495 frames, 31 batches (last of 15) */
    dd_trainer *a = NULL, *b = NULL, *cc = NULL, *d = NULL, *e = NULL, *x = NULL;
    char p1[600], p2[600], p3[600];
    snprintf(p1, sizeof p1, "%s/one.ckpt", tmp);
    snprintf(p2, sizeof p2, "%s/mid.ckpt", tmp);
    snprintf(p3, sizeof p3, "%s/bad.ckpt", tmp);
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &a));
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &b));
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &cc));
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &d));
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &e));
    if (!a || !b || !cc || !d || !e) goto done;
    CHECK(run_steps(a, 2, 0) == 0, "A: 2 epochs: %s", dd_last_error());
    CHECK(run_steps(b, 1, 0) == 0, "B: 1 epoch");
    CHECK_OK(dd_trainer_save(b, p1));
    CHECK_OK(dd_trainer_load(cc, p1, 0));
    CHECK(dd_trainer_epoch(cc) == 1 && dd_trainer_batch(cc) == 0, "resumed at epoch %d batch %llu", dd_trainer_epoch(cc),
          (unsigned long long)dd_trainer_batch(cc));
    CHECK(run_steps(cc, 1, 0) == 0, "C: 1 more epoch");
    CHECK(same_state(a, cc), "2 epochs == 1 epoch + save + load + 1 epoch, bit for bit");
    /* from the middle of an epoch */
    CHECK(run_steps(d, 1, 11) == 0, "D: 1 epoch + 11 steps");
    CHECK_OK(dd_trainer_save(d, p2));
    CHECK_OK(dd_trainer_load(e, p2, 0));
    CHECK(dd_trainer_batch(e) == 11, "resumed at batch %llu", (unsigned long long)dd_trainer_batch(e));
    while (!dd_trainer_epoch_done(e)) CHECK_OK(dd_trainer_step(e, NULL));
    CHECK_OK(dd_trainer_end_epoch(e, NULL));
    CHECK(same_state(a, e), "mid-epoch checkpoint resumes bit for bit");
    /* a checkpoint written before models declared their own options (section model_cfg:
     * six int64 hidden, layers, memory, order, kernel, cross; 0 = unused) resumes the same */
    {
        char p4[620];
        snprintf(p4, sizeof p4, "%s/legacy.ckpt", tmp);
        dd_ckpt_reader *r = NULL;
        dd_ckpt_writer *w = NULL;
        CHECK_OK(dd_ckpt_open(p2, &r));
        CHECK_OK(dd_ckpt_write_begin(p4, &w));
        for (size_t i = 0; r && w && i < dd_ckpt_count(r); i++) {
            const char *nm = dd_ckpt_section_name(r, i);
            const void *dat;
            size_t bytes;
            if (strcmp(nm, "model_opts") == 0) {
                int64_t legacy[6] = {4, 0, 0, 0, 0, 0};
                CHECK_OK(dd_ckpt_add(w, "model_cfg", legacy, sizeof legacy));
                continue;
            }
            CHECK_OK(dd_ckpt_get(r, nm, &dat, &bytes));
            CHECK_OK(dd_ckpt_add(w, nm, dat, bytes));
        }
        dd_ckpt_close(&r);
        CHECK_OK(dd_ckpt_write_commit(&w));
        dd_trainer *f = NULL;
        CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &f));
        if (f) {
            CHECK_OK(dd_trainer_load(f, p4, 0));
            while (!dd_trainer_epoch_done(f)) CHECK_OK(dd_trainer_step(f, NULL));
            CHECK_OK(dd_trainer_end_epoch(f, NULL));
            CHECK(same_state(a, f), "a checkpoint of the earlier format resumes bit for bit");
        }
        dd_trainer_destroy(&f);
        dd_run_model rm;
        CHECK_OK(dd_run_model_load(p4, "last", &rm));
        CHECK(rm.model && dd_model_cfg_get(dd_model_config(rm.model), "hidden") == 4 &&
                  dd_model_cfg_get(dd_model_config(rm.model), "layers") == 1,
              "the earlier format's model loads with today's options");
        dd_run_model_free(&rm);
    }
    {
        size_t nh;
        const dd_epoch_record *h = dd_trainer_history(a, &nh);
        CHECK(nh == 2 && h[1].train_loss < h[0].train_loss, "loss goes down: %g -> %g", nh ? h[0].train_loss : 0,
              nh > 1 ? h[1].train_loss : 0);
    }
    /* refused checkpoints leave the trainer unchanged */
    {
        size_t nf = dd_trainer_num_floats(e);
        float *keep = malloc(nf * sizeof(float));
        REQUIRE(keep, "out of memory");
        memcpy(keep, dd_trainer_params(e), nf * sizeof(float));
        size_t sz = 0;
        unsigned char *buf = dd_test_slurp(p1, &sz);
        REQUIRE(sz > 100, "%s: %zu bytes", p1, sz);
        dd_test_write_bytes(p3, buf, sz - 100);
        CHECK_ERR(dd_trainer_load(e, p3, 0), DD_ERR_CORRUPT, "truncated");
        buf[sz / 2] ^= 0x10;
        dd_test_write_bytes(p3, buf, sz);
        CHECK_ERR(dd_trainer_load(e, p3, 0), DD_ERR_CORRUPT, "CRC");
        dd_test_write(p3, "I,Q\n1,2\n");
        CHECK_ERR(dd_trainer_load(e, p3, 0), DD_ERR_FORMAT, "not a distdpd checkpoint");
        CHECK(memcmp(keep, dd_trainer_params(e), nf * sizeof(float)) == 0, "refused loads changed nothing");
        CHECK(dd_trainer_epoch(e) == 2, "epoch unchanged");
        free(buf);
        free(keep);
        /* incompatible: another hidden size, another stride */
        dd_train_cfg c2 = c;
        dd_model_cfg_set(&c2.model_cfg, "hidden", 5);
        CHECK_OK(dd_trainer_create(&c2, ds, NULL, NULL, &x));
        if (x) CHECK_ERR(dd_trainer_load(x, p1, 0), DD_ERR_MISMATCH, "hidden = 4");
        dd_trainer_destroy(&x);
        c2 = c;
        c2.stride = 4;
        CHECK_OK(dd_trainer_create(&c2, ds, NULL, NULL, &x));
        if (x) {
            CHECK_ERR(dd_trainer_load(x, p1, 0), DD_ERR_MISMATCH, "stride");
            CHECK_OK(dd_trainer_load(x, p1, 1)); /* parameters only: fine */
            CHECK(memcmp(dd_trainer_params(x), dd_trainer_params(b), dd_trainer_num_floats(b) * sizeof(float)) == 0,
                  "params-only load");
        }
        dd_trainer_destroy(&x);
        /* a PA checkpoint is not a DPD */
        dd_model_ref pa = {"gru", *dd_model_config(dd_trainer_model(a)), dd_trainer_params(a), dd_trainer_num_floats(a)};
        dd_train_cfg c3;
        tt_cfg(&c3, DD_TRAIN_DLA, 4, 16, 3, 16, 3);
        CHECK_OK(dd_trainer_create(&c3, ds, &pa, NULL, &x));
        if (x) CHECK_ERR(dd_trainer_load(x, p1, 0), DD_ERR_MISMATCH, "'pa' run");
        dd_trainer_destroy(&x);
    }
done:
    dd_trainer_destroy(&a);
    dd_trainer_destroy(&b);
    dd_trainer_destroy(&cc);
    dd_trainer_destroy(&d);
    dd_trainer_destroy(&e);
    dd_dataset_free(&ds);
}

/* ---------------------------------------------------------------- a strategy, 2 threads */

/* A 2-rank data-parallel strategy between threads, built from the trainer's blocks: what
 * the MPI strategy does, without MPI (strategies plug in without touching the trainer). */
typedef struct {
    pthread_barrier_t bar;
    float *g[2];
    double v[2];
    double bv[64];
    float *sum;
    size_t n;
} shared2;
typedef struct {
    shared2 *sh;
    int rank;
    dd_trainer *tr;
    int rc;
} rank_ctx;

/* Sums each rank's gradient arena and one value between the two threads. */
static void thread_allreduce(rank_ctx *c, float *grads, size_t n, double *val) {
    shared2 *s = c->sh;
    s->g[c->rank] = grads;
    s->v[c->rank] = *val;
    pthread_barrier_wait(&s->bar);
    if (c->rank == 0)
        for (size_t i = 0; i < n; i++) s->sum[i] = s->g[0][i] + s->g[1][i];
    pthread_barrier_wait(&s->bar);
    memcpy(grads, s->sum, n * sizeof(float));
    *val = s->v[0] + s->v[1];
    pthread_barrier_wait(&s->bar);
}

static dd_status t_step(void *self, dd_trainer *tr, double *loss) {
    rank_ctx *c = self;
    uint64_t lo, hi, bg;
    dd_trainer_batch_slice(tr, dd_trainer_batch(tr), c->rank, 2, &lo, &hi, &bg);
    double sse = 0;
    DD_TRY(dd_trainer_compute_grads(tr, (uint64_t)dd_trainer_epoch(tr), lo, hi, bg, NULL, &sse));
    thread_allreduce(c, dd_trainer_grads(tr), dd_trainer_num_floats(tr), &sse);
    *loss = sse * dd_trainer_loss_scale(tr, bg);
    return dd_trainer_apply_update(tr, *loss, NAN);
}

static dd_status t_bcast(void *self, double *vals, int nv) {
    rank_ctx *c = self;
    shared2 *s = c->sh;
    if (c->rank == 0) memcpy(s->bv, vals, (size_t)nv * sizeof(double));
    pthread_barrier_wait(&s->bar);
    if (c->rank != 0) memcpy(vals, s->bv, (size_t)nv * sizeof(double));
    pthread_barrier_wait(&s->bar);
    return DD_OK;
}

static const dd_strategy_ops thread_ops = {.name = "threads", .step = t_step, .bcast = t_bcast};

static void *rank_main(void *arg) {
    rank_ctx *c = arg;
    c->rc = run_steps(c->tr, 1, 0);
    return NULL;
}

static void test_strategy_threads(void) {
    size_t n[3] = {1200, 512, 512};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 9, NULL);
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 5, 16, 3, 15, 1); /* 395 frames: 26 batches of 15 + 5: odd slices */
    dd_trainer *one = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &one));
    shared2 sh;
    memset(&sh, 0, sizeof sh);
    pthread_barrier_init(&sh.bar, NULL, 2);
    rank_ctx rc[2];
    dd_strategy hk[2];
    for (int r = 0; r < 2; r++) {
        rc[r].sh = &sh;
        rc[r].rank = r;
        rc[r].tr = NULL;
        rc[r].rc = -1;
        hk[r] = (dd_strategy){&thread_ops, &rc[r], r, 2};
        CHECK_OK(dd_trainer_create(&c, ds, NULL, &hk[r], &rc[r].tr));
    }
    if (one && rc[0].tr && rc[1].tr) {
        sh.n = dd_trainer_num_floats(one);
        sh.sum = calloc(sh.n, sizeof(float));
        pthread_t th[2];
        for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, rank_main, &rc[r]);
        for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
        CHECK(run_steps(one, 1, 0) == 0, "one process");
        CHECK(rc[0].rc == 0 && rc[1].rc == 0, "both ranks trained: %s", dd_last_error());
        size_t nf = sh.n;
        CHECK(memcmp(dd_trainer_params(rc[0].tr), dd_trainer_params(rc[1].tr), nf * sizeof(float)) == 0,
              "the ranks stay identical");
        double dmax = 0, pmax = 0;
        for (size_t i = 0; i < nf; i++) {
            dmax = fmax(dmax, fabs(dd_trainer_params(rc[0].tr)[i] - dd_trainer_params(one)[i]));
            pmax = fmax(pmax, fabs(dd_trainer_params(one)[i]));
        }
        printf("2 ranks vs 1 process after one epoch: max parameter difference %.3g (max |p| %.3g)\n", dmax, pmax);
        CHECK(dmax < 1e-3 * pmax, "2 ranks == 1 process up to rounding: %.3g", dmax);
        size_t n0, n1, n2;
        const dd_epoch_record *h0 = dd_trainer_history(rc[0].tr, &n0), *h1 = dd_trainer_history(rc[1].tr, &n1),
                              *h2 = dd_trainer_history(one, &n2);
        CHECK(n0 == 1 && n1 == 1 && n2 == 1 && h0[0].val.nmse_db == h1[0].val.nmse_db &&
                  fabs(h0[0].val.nmse_db - h2[0].val.nmse_db) < 0.01 && fabs(h0[0].train_loss - h2[0].train_loss) < 1e-6 * h2[0].train_loss + 1e-12,
              "rank 1 receives rank 0's metrics; losses agree with one process");
        free(sh.sum);
    }
    for (int r = 0; r < 2; r++) dd_trainer_destroy(&rc[r].tr);
    pthread_barrier_destroy(&sh.bar);
    /* more than one rank without operations, or without a broadcast, is refused */
    dd_strategy bad = {NULL, NULL, 0, 2};
    dd_trainer *tb = NULL;
    CHECK_ERR(dd_trainer_create(&c, ds, NULL, &bad, &tb), DD_ERR_ARG, "no operations");
    static const dd_strategy_ops nobcast = {.name = "nobcast", .step = t_step};
    bad = (dd_strategy){&nobcast, NULL, 0, 2};
    CHECK_ERR(dd_trainer_create(&c, ds, NULL, &bad, &tb), DD_ERR_ARG, "broadcast");
    CHECK(tb == NULL, "refused trainer returned");
    dd_trainer_destroy(&one);
    dd_dataset_free(&ds);
}

/* ---------------------------------------------------------------- sidecar */

static void test_sim_pa(const char *tmp) {
    size_t N = 3000;
    dd_cf32 *x = dd_calloc(N, sizeof *x), *y1 = dd_calloc(N, sizeof *x), *y2 = dd_calloc(N, sizeof *x);
    pa_test_signal(x, N, 100e6, 20e6, 8.0, 5);
    const char *names[3] = {"realistic", "saleh", "gmp"};
    dd_gmp *g = NULL;
    dd_gmp_shape sh = dd_gmp_shape_mp(3, 2, 0);
    dd_cf64 coef[6] = {1.0, 0.05 - 0.02 * I, 0.01 * I, -0.1 + 0.05 * I, 0.02, -0.03};
    CHECK_OK(dd_gmp_create(&sh, coef, &g));
    for (int k = 0; k < 3; k++) {
        dd_pa_params p;
        CHECK_OK(dd_pa_params_default(names[k], &p));
        p.snr_db = 40;
        p.drive_db = 1.5;
        p.fs = 100e6;
        if (k == 2) p.gmp = g;
        dd_pa *pa = NULL, *clean = NULL, *back = NULL;
        CHECK_OK(dd_pa_create(names[k], &p, &pa));
        if (!pa) continue;
        CHECK_OK(dd_pa_apply(pa, x, y1, N)); /* calibrates */
        char path[600];
        snprintf(path, sizeof path, "%s/pa_%s.json", tmp, names[k]);
        CHECK_OK(dd_sim_pa_save(pa, path));
        int found = 0;
        CHECK_OK(dd_sim_pa_load(path, NULL, &back, &found));
        CHECK(found == 1, "found");
        CHECK_OK(dd_pa_clone(pa, 0, &clean));
        if (back && clean) {
            dd_pa_reset(clean);
            dd_pa_reset(back);
            CHECK_OK(dd_pa_apply(clean, x, y1, N));
            CHECK_OK(dd_pa_apply(back, x, y2, N));
            CHECK(memcmp(y1, y2, N * sizeof *y1) == 0, "%s: the rebuilt PA is the noiseless original, bit for bit", names[k]);
        }
        dd_pa_destroy(&pa);
        dd_pa_destroy(&clean);
        dd_pa_destroy(&back);
    }
    dd_gmp_free(&g);
    dd_pa *none = NULL;
    int found = 1;
    CHECK_OK(dd_sim_pa_load(tmp, NULL, &none, &found));
    CHECK(found == 0 && none == NULL, "no sidecar: found = 0");
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad_pa.json", tmp);
    dd_test_write(bad, "{\"format\": 1, \"model\": \"nosuchpa\", \"params\": {}, \"calib\": {}}");
    CHECK_ERR(dd_sim_pa_load(bad, NULL, &none, &found), DD_ERR_ARG, "nosuchpa");
    dd_free(x);
    dd_free(y1);
    dd_free(y2);
}

/* ---------------------------------------------------------------- evaluation memory */

/* Bytes of one forward call's evaluation workspace for one segment (as trainer.c). */
static size_t one_segment_bytes(const dd_trainer *tr, size_t T) {
    const float *pp;
    const dd_model *pa = dd_trainer_pa_model(tr, &pp);
    size_t f = dd_model_infer_workspace(dd_trainer_model(tr), 1, (int)T) + 16;
    if (pa) f += dd_model_infer_workspace(pa, 1, (int)T) + 16 + 2 * T;
    return f * sizeof(float);
}

static int same_metrics(const dd_eval_metrics *a, const dd_eval_metrics *b) {
    return a->loss == b->loss && a->nmse_db == b->nmse_db && a->evm_db == b->evm_db && a->aclr.left_db == b->aclr.left_db &&
           a->aclr.right_db == b->aclr.right_db && a->aclr.avg_db == b->aclr.avg_db;
}

/* The no-DPD baseline of a DPD trainer against an independent computation: the PA
 * model run as a stream over each zero-padded nperseg segment from a zero state
 * (dd_model_run_stream), against G x, with dd_metrics_compute. Also: the metrics.jsonl
 * keys of dd_eval_no_dpd_keys and their improvements; a PA trainer has no baseline. */
static void check_no_dpd(dd_trainer *td, const dd_dataset *ds, const dd_model *pm, const float *pp) {
    const size_t T = ds->spec.nperseg;
    const double g = dd_trainer_cfg(td)->gain;
    for (int s = 1; s <= 2; s++) {
        const size_t n = ds->n[s], npad = (n + T - 1) / T * T;
        dd_cf32 *ref = calloc(npad, sizeof *ref), *in = calloc(npad, sizeof *in), *y = calloc(npad, sizeof *y);
        for (size_t i = 0; i < n; i++) {
            in[i] = ds->in[s][i];
            ref[i] = (float)g * ds->in[s][i];
        }
        for (size_t c = 0; c < npad; c += T) CHECK_OK(dd_model_run_stream(pm, pp, in + c, y + c, T));
        dd_metric_set want;
        CHECK_OK(dd_metrics_compute(ref, y, npad, &ds->spec, DD_ACLR_OPENDPD, 0, &want));
        dd_eval_metrics b, w;
        CHECK_OK(dd_trainer_no_dpd_baseline(td, (dd_split)s, &b));
        CHECK_NEAR(b.nmse_db, want.nmse_db, 1e-3);
        CHECK_NEAR(b.aclr.avg_db, want.aclr.avg_db, 1e-3);
        CHECK_NEAR(b.evm_db, want.evm_db, 1e-3);
        CHECK(b.nmse_db > -60 && b.nmse_db < 10, "baseline NMSE %.2f dB", b.nmse_db);
        CHECK_OK(dd_trainer_evaluate(td, (dd_split)s, &w, NULL, NULL));
        char keys[DD_NO_DPD_KEYS][48];
        double v[DD_NO_DPD_KEYS];
        dd_eval_no_dpd_keys(dd_split_name((dd_split)s), &b, &w, keys, v);
        char k0[48];
        snprintf(k0, sizeof k0, "%s_aclr_avg_no_dpd_db", dd_split_name((dd_split)s));
        CHECK(strcmp(keys[3], k0) == 0 && v[3] == b.aclr.avg_db, "key %s = %g", keys[3], v[3]);
        CHECK(strstr(keys[5], "_nmse_improvement_db") && v[5] == b.nmse_db - w.nmse_db, "key %s = %g", keys[5], v[5]);
        CHECK(strstr(keys[6], "_aclr_improvement_db") && v[6] == b.aclr.avg_db - w.aclr.avg_db, "key %s", keys[6]);
        free(ref);
        free(in);
        free(y);
    }
}

/* Trainers that differ only in the evaluation workspace cap (so in the segments per
 * forward call, or streamed segments) give bit-identical predictions and metrics. */
static void eval_cap_case(const char *what, const dd_train_cfg *c, const dd_dataset *ds, const dd_model_ref *pa,
                          int recurrent) {
    const size_t T = ds->spec.nperseg, keep = dd_eval_ws_cap, keep_chunk = dd_eval_chunk;
    dd_trainer *tr[4] = {NULL, NULL, NULL, NULL};
    CHECK_OK(dd_trainer_create(c, ds, pa, NULL, &tr[0])); /* default cap: eval_batch segments per call */
    if (!tr[0]) return;
    dd_eval_ws_cap = one_segment_bytes(tr[0], T); /* exactly one segment per call */
    CHECK_OK(dd_trainer_create(c, ds, pa, NULL, &tr[1]));
    dd_eval_ws_cap = 1; /* not even one: streamed */
    CHECK_OK(dd_trainer_create(c, ds, pa, NULL, &tr[2]));
    /* one segment does not fit, chunks of 100 steps of every segment do (recurrent
     * models; 100 does not divide the 512-step segments: a partial last chunk) */
    dd_eval_ws_cap = one_segment_bytes(tr[0], T) - 1;
    dd_eval_chunk = 100;
    CHECK_OK(dd_trainer_create(c, ds, pa, NULL, &tr[3]));
    dd_eval_ws_cap = keep;
    dd_eval_chunk = keep_chunk;
    if (tr[1] && tr[2] && tr[3]) {
        CHECK(tr[0]->eb > 1 && !tr[0]->estream, "%s: default: %zu segments per call, streamed %d", what, tr[0]->eb, tr[0]->estream);
        CHECK(tr[1]->eb == 1 && !tr[1]->estream, "%s: cap of one segment: %zu per call, streamed %d", what, tr[1]->eb, tr[1]->estream);
        CHECK(tr[2]->eb == 1 && tr[2]->estream && !tr[2]->ews_m && !tr[2]->ews_p, "%s: tiny cap: streamed", what);
        if (recurrent)
            CHECK(tr[3]->eb == tr[0]->eb && tr[3]->echunk == 100 && !tr[3]->estream,
                  "%s: below one segment: %zu segments per call (default %zu) in chunks of %zu, streamed %d", what,
                  tr[3]->eb, tr[0]->eb, tr[3]->echunk, tr[3]->estream);
        else
            CHECK(tr[3]->eb == 1 && tr[3]->estream && tr[3]->echunk == 0, "%s: below one segment: streamed", what);
        for (int s = 0; s < 2; s++) {
            dd_split sp = s ? DD_SPLIT_TEST : DD_SPLIT_VAL;
            dd_eval_metrics m[4];
            const dd_cf32 *p[4];
            size_t np[4];
            for (int k = 0; k < 4; k++) CHECK_OK(dd_trainer_evaluate(tr[k], sp, &m[k], &p[k], &np[k]));
            for (int k = 1; k < 4; k++) {
                CHECK(np[k] == np[0] && memcmp(p[k], p[0], np[0] * sizeof *p[0]) == 0,
                      "%s, %s split: predictions with cap %d differ from the default", what, dd_split_name(sp), k);
                CHECK(same_metrics(&m[k], &m[0]), "%s, %s split: metrics with cap %d differ: NMSE %.17g vs %.17g", what,
                      dd_split_name(sp), k, m[k].nmse_db, m[0].nmse_db);
            }
            if (pa) { /* the no-DPD baseline too (the PA model alone, batched or streamed) */
                dd_eval_metrics b[3];
                for (int k = 0; k < 3; k++) CHECK_OK(dd_trainer_no_dpd_baseline(tr[k], sp, &b[k]));
                for (int k = 1; k < 3; k++)
                    CHECK(same_metrics(&b[k], &b[0]), "%s, %s split: the no-DPD baseline with cap %d differs", what,
                          dd_split_name(sp), k);
            }
        }
    }
    for (int k = 0; k < 4; k++) dd_trainer_destroy(&tr[k]);
}

typedef struct {
    const dd_dataset *ds;
    const dd_train_cfg *cfg;
    dd_eval_metrics val;
} eval_probe_arg;

static dd_status eval_probe_fn(void *arg) {
    eval_probe_arg *a = arg;
    dd_trainer *tr = NULL;
    DD_TRY(dd_trainer_create(a->cfg, a->ds, NULL, NULL, &tr));
    dd_eval_metrics t;
    dd_status st = dd_trainer_evaluate(tr, DD_SPLIT_VAL, &a->val, NULL, NULL);
    if (st == DD_OK) st = dd_trainer_evaluate(tr, DD_SPLIT_TEST, &t, NULL, NULL);
    if (st == DD_OK && !isfinite(a->val.nmse_db)) st = dd_error(DD_ERR_NUMERIC, "val NMSE %g", a->val.nmse_db);
    dd_trainer_destroy(&tr);
    return st;
}

/* Activation-arena bytes dd_trainer_create allocates (dd_mem_stats). */
static size_t create_activations(const dd_train_cfg *c, const dd_dataset *ds, dd_trainer **tr) {
    dd_mem_stats m0, m1;
    dd_mem_stats_get(&m0);
    CHECK_OK(dd_trainer_create(c, ds, NULL, NULL, tr));
    dd_mem_stats_get(&m1);
    return m1.cur[DD_MEM_ACTIVATIONS] - m0.cur[DD_MEM_ACTIVATIONS];
}

/* (c) nperseg 32768, the simulated presets': the evaluation workspace is the forward
 * pass of a bounded number of samples, not eval_batch x 32768 columns (GRU hidden 23:
 * about 1 KB per column, 0.55 KB of it touched: 290 MB at 16 segments before): all 8
 * segments per call, in chunks of steps. Evaluating splits of 8 and 2
 * segments grows the peak RSS by little more than their padded reference and
 * prediction copies (16 bytes a sample; the input is read in place). */
static void test_eval_nperseg_32768(void) {
    const size_t T = 32768;
    size_t n[3] = {6000, 8 * T - 1000, 2 * T}, none[3] = {n[0], 0, 0};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 13, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    dd_spec sp = ds->spec;
    sp.nperseg = T;
    dd_dataset *big = NULL, *train_only = NULL;
    const dd_cf32 *in[3] = {ds->in[0], ds->in[1], ds->in[2]}, *out[3] = {ds->out[0], ds->out[1], ds->out[2]};
    CHECK_OK(dd_dataset_from_arrays(&sp, n, in, out, &big));
    CHECK_OK(dd_dataset_from_arrays(&sp, none, in, out, &train_only));
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 23, 200, 200, 16, 1);
    c.eval_batch = 16;
    if (big && train_only) {
        dd_trainer *a = NULL, *b = NULL;
        size_t with = create_activations(&c, big, &a), without = create_activations(&c, train_only, &b);
        size_t eval_bytes = with - without, one_seg = 0;
        if (a) one_seg = (dd_model_infer_workspace(dd_trainer_model(a), 1, (int)T) + 16) * sizeof(float);
        printf("nperseg %zu, GRU hidden 23, eval_batch 16, val 8 segments: evaluation arena %.1f MiB (one "
               "segment's forward workspace: %.1f MiB; the segments run in chunks above the cap)\n",
               T, (double)eval_bytes / 1048576.0, (double)one_seg / 1048576.0);
        CHECK(a && b && with >= without, "activations: %zu with evaluation, %zu without", with, without);
        CHECK(eval_bytes <= ((size_t)16 << 20) && eval_bytes <= one_seg,
              "evaluation workspace %zu bytes at nperseg %zu: above 16 MiB or one segment's %zu", eval_bytes, T,
              one_seg);
        CHECK(a && a->eb == 8 && a->echunk >= DD_TRAIN_EVAL_CHUNK_MIN && !a->estream,
              "nperseg 32768: %zu segments per call in chunks of %zu (want 8, chunked)", a ? a->eb : 0,
              a ? a->echunk : 0);
        dd_trainer_destroy(&a);
        dd_trainer_destroy(&b);
    }
    if (!probe_rss_meaningful()) {
        printf("skipped under ASan or valgrind: evaluation RSS at nperseg 32768\n");
    } else if (big) {
        eval_probe_arg a = {.ds = big, .cfg = &c};
        probe_res r;
        const long copies_kb = (long)((n[1] + T - 1) / T + n[2] / T) * (long)T * 16 / 1024;
        if (probe_run(eval_probe_fn, &a, 300, 1024, &r) == 0) {
            printf("evaluation at nperseg 32768 (val %zu, test %zu samples): %s, %.2f s, peak RSS +%ld KiB "
                   "(padded reference and prediction: %ld KiB)%s%s\n",
                   n[1], n[2], r.exited ? dd_status_str(r.status) : "killed", r.secs, r.rss_kb, copies_kb,
                   r.msg[0] ? ": " : "", r.msg);
            CHECK(r.exited && r.status == DD_OK, "evaluation at nperseg 32768: %s", r.msg);
            CHECK(r.rss_kb <= copies_kb + 24 * 1024, "evaluation at nperseg 32768: peak RSS grew by %ld KiB (limit %ld KiB)",
                  r.rss_kb, copies_kb + 24 * 1024);
        }
    }
    dd_dataset_free(&big);
    dd_dataset_free(&train_only);
    dd_dataset_free(&ds);
}

static void test_eval_bounded(void) {
    /* (a) the workspace cap changes how segments are batched, never the numbers:
     * recurrent and feed-forward PA models, and a DPD through a frozen PA model */
    size_t n[3] = {1500, 1100, 700}; /* nperseg 512: val 3 segments, test 2, both padded */
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 11, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    static const char *const models[5] = {"gru", "tcn", "rvtdnn", "lstm", "dgru"};
    for (int k = 0; k < 5; k++) {
        dd_train_cfg c;
        tt_cfg(&c, DD_TRAIN_PA, 4, 40, 20, 8, 1);
        snprintf(c.model, sizeof c.model, "%s", models[k]);
        eval_cap_case(models[k], &c, ds, NULL, k == 0 || k >= 3);
    }
    {
        dd_train_cfg cp, cd;
        tt_cfg(&cp, DD_TRAIN_PA, 3, 40, 20, 8, 1);
        dd_trainer *pt = NULL;
        CHECK_OK(dd_trainer_create(&cp, ds, NULL, NULL, &pt));
        if (pt) {
            dd_model_ref pa = {"gru", *dd_model_config(dd_trainer_model(pt)), dd_trainer_params(pt), dd_trainer_num_floats(pt)};
            tt_cfg(&cd, DD_TRAIN_DLA, 3, 40, 20, 8, 1);
            eval_cap_case("DPD through a frozen PA", &cd, ds, &pa, 1);
            dd_trainer *td = NULL;
            CHECK_OK(dd_trainer_create(&cd, ds, &pa, NULL, &td));
            if (td) check_no_dpd(td, ds, dd_trainer_model(pt), dd_trainer_params(pt));
            dd_trainer_destroy(&td);
            dd_eval_metrics nb;
            CHECK_ERR(dd_trainer_no_dpd_baseline(pt, DD_SPLIT_TEST, &nb), DD_ERR_ARG, "PA-model run");
        }
        dd_trainer_destroy(&pt);
    }

    /* (b) a legal but huge nperseg (2^20) on splits of a few thousand samples: the
     * evaluation allocates the padded split buffers (3 x 8 MiB per split at most) and
     * the metrics' 2^20-point FFTs, not a 2^20-step model workspace (GRU hidden 8:
     * about 0.5 GB before). Run in a child limited to 1 GiB more address space. */
    if (!probe_rss_meaningful()) {
        printf("skipped under ASan or valgrind: evaluation memory at nperseg 2^20 (RSS is not meaningful there)\n");
    } else {
        dd_spec sp = ds->spec;
        sp.nperseg = DD_NPERSEG_MAX;
        dd_dataset *big = NULL;
        const dd_cf32 *in[3] = {ds->in[0], ds->in[1], ds->in[2]}, *out[3] = {ds->out[0], ds->out[1], ds->out[2]};
        CHECK_OK(dd_dataset_from_arrays(&sp, n, in, out, &big));
        dd_train_cfg c;
        tt_cfg(&c, DD_TRAIN_PA, 8, 40, 20, 8, 1);
        c.eval_batch = 16;
        eval_probe_arg a = {.ds = big, .cfg = &c};
        probe_res r;
        if (big && probe_run(eval_probe_fn, &a, 120, 1024, &r) == 0) {
            printf("evaluation at nperseg 2^20 (val %zu, test %zu samples): %s, %.2f s, peak RSS +%ld KiB%s%s\n", n[1], n[2],
                   r.exited ? dd_status_str(r.status) : "killed", r.secs, r.rss_kb, r.msg[0] ? ": " : "", r.msg);
            CHECK(r.exited && r.status == DD_OK, "evaluation at nperseg 2^20: %s", r.msg);
            CHECK(r.rss_kb <= 200 * 1024, "evaluation at nperseg 2^20: peak RSS grew by %ld KiB (limit 200 MiB)", r.rss_kb);
        }
        dd_dataset_free(&big);
    }
    dd_dataset_free(&ds);
    test_eval_nperseg_32768();
}

/* ---------------------------------------------------------------- batch chunks */

/* A slice of more than W frames (the model's chunk width: 32, tcn 4) is computed in
 * batch chunks (src/train/batch_chunks.c): ceil(bl / W) chunks of ceil(bl / chunks)
 * frames, the last one fewer, gradients and sums of squared errors added in chunk order.
 * The result must be, bit for bit, the in-order sum of the chunks' slices computed one by
 * one (each <= W frames: the whole path, checked by finite differences in
 * test_gradients), at 1, 2, 3 and 4 threads; for PA modelling and for direct learning
 * through a frozen PA (its own chunk workspaces), on a full batch of 100 (4 chunks of 25;
 * tcn 25 of 4), the last partial one of 95 (32, 32, 31; tcn 23 of 4 and one of 3) and a
 * slice of 40 (2 x 20: at 4 threads each chunk's layers get 2 threads, nested; tcn 10 of
 * 4). */
static void test_batch_chunks(void) {
    size_t n[3] = {1200, 512, 512};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 13, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return;
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 5, 16, 3, 100, 1); /* 395 frames: 3 batches of 100 and one of 95 */
    dd_trainer *tp = NULL, *td = NULL, *tt = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tp));
    /* tcn: its depthwise layers write their input gradient into the framework's buffer
     * without it being cleared (sets_din), and one thread runs every chunk on one
     * workspace: what a chunk leaves there must not reach the next one */
    dd_train_cfg ct;
    tt_cfg(&ct, DD_TRAIN_PA, 8, 16, 3, 100, 1);
    snprintf(ct.model, sizeof ct.model, "tcn");
    dd_model_cfg_set(&ct.model_cfg, "layers", 3);
    CHECK_OK(dd_trainer_create(&ct, ds, NULL, NULL, &tt));
    if (tp) {
        dd_model_ref pa = {"gru", *dd_model_config(dd_trainer_model(tp)), dd_trainer_params(tp),
                           dd_trainer_num_floats(tp)};
        dd_train_cfg cd;
        tt_cfg(&cd, DD_TRAIN_DLA, 4, 16, 3, 100, 1);
        CHECK_OK(dd_trainer_create(&cd, ds, &pa, NULL, &td));
    }
    CHECK(tt && dd_model_chunk_frames(dd_trainer_model(tt)) == 4 && tp &&
              dd_model_chunk_frames(dd_trainer_model(tp)) == DD_MODEL_CHUNK_FRAMES,
          "chunk widths: tcn 4, gru %d", DD_MODEL_CHUNK_FRAMES);
    /* direct learning runs the PA in the trained model's chunks: the geometric mean of the
     * two widths, rounded up to a power of two (4 and 32: 16) */
    if (tt && tp) {
        const dd_model *mt = dd_trainer_model(tt), *mg = dd_trainer_model(tp);
        CHECK(dd_train_chunk_width(mt, NULL) == 4 && dd_train_chunk_width(mt, mt) == 4 &&
                  dd_train_chunk_width(mt, mg) == 16 && dd_train_chunk_width(mg, mt) == 16 &&
                  dd_train_chunk_width(mg, mg) == 32 && dd_train_chunk_width(mg, NULL) == 32,
              "step chunk widths: tcn %zu, tcn through gru %zu, gru through tcn %zu, gru through gru %zu",
              dd_train_chunk_width(mt, NULL), dd_train_chunk_width(mt, mg), dd_train_chunk_width(mg, mt),
              dd_train_chunk_width(mg, mg));
    }
    dd_trainer *trs[3] = {tp, td, tt};
    const char *what[3] = {"PA", "DLA", "tcn"};
    for (int k = 0; k < 3; k++) {
        dd_trainer *tr = trs[k];
        if (!tr) continue;
        CHECK(dd_trainer_num_batches(tr) == 4, "batches %llu", (unsigned long long)dd_trainer_num_batches(tr));
        const size_t nf = dd_trainer_num_floats(tr);
        float *ref = calloc(nf, sizeof *ref);
        const uint64_t batches[3] = {0, 3, 1};
        for (int bi = 0; bi < 3 && ref; bi++) {
            uint64_t lo, hi, glob;
            dd_trainer_batch_slice(tr, batches[bi], 0, 1, &lo, &hi, &glob);
            if (bi == 2) hi = lo + 40; /* 2 chunks of 20: 4 threads run them 2 x 2 (nested) */
            const size_t W = (size_t)dd_model_chunk_frames(dd_trainer_model(tr));
            const size_t bl = (size_t)(hi - lo), nc = (bl + W - 1) / W, cf = (bl + nc - 1) / nc;
            CHECK(nc > 1, "the slice of %zu frames is chunked", bl);
            double ssum = 0.0, s;
            for (size_t ch = 0; ch < nc; ch++) {
                const uint64_t a = lo + ch * cf, b = a + cf < hi ? a + cf : hi;
                CHECK_OK(dd_trainer_compute_grads(tr, 1, a, b, glob, NULL, &s));
                const float *g = dd_trainer_grads(tr);
                for (size_t i = 0; i < nf; i++) ref[i] = ch ? ref[i] + g[i] : g[i];
                ssum += s;
            }
            for (int nt = 1; nt <= 4 && dd_nn_threads_set(nt) == nt; nt++) {
                double sse = -1.0;
                CHECK_OK(dd_trainer_compute_grads(tr, 1, lo, hi, glob, NULL, &sse));
                CHECK(memcmp(dd_trainer_grads(tr), ref, nf * sizeof(float)) == 0,
                      "%s, batch %llu (%zu frames, %zu chunks), %d threads: the gradient is the in-order sum of the "
                      "chunks' bit for bit",
                      what[k], (unsigned long long)batches[bi], bl, nc, nt);
                CHECK(sse == ssum, "%s, %zu frames, %d threads: sse %.17g, the chunks' sum %.17g", what[k], bl,
                      nt, sse, ssum);
            }
            dd_nn_threads_set(1);
            if (bi == 0 && k == 0) {
                /* dd_nn_threads_set puts OpenBLAS on one thread when OPENBLAS_NUM_THREADS is
                 * unset (ctest sets it; the layers' large sgemm calls then run in panels on
                 * the library's threads), the numbers unchanged; OPENBLAS_NUM_THREADS set:
                 * its count left alone, one inside the chunks' region, back after it */
                const char *env = getenv("OPENBLAS_NUM_THREADS");
                char saved[32] = "";
                if (env) snprintf(saved, sizeof saved, "%s", env);
                unsetenv("OPENBLAS_NUM_THREADS");
                openblas_set_num_threads(2);
                if (dd_nn_threads_set(2) == 2) {
                    CHECK(dd_nn_blas_threads() == 1, "dd_nn_threads_set(2): OpenBLAS %d thread(s)", dd_nn_blas_threads());
                    double sse = -1.0;
                    CHECK_OK(dd_trainer_compute_grads(tr, 1, lo, hi, glob, NULL, &sse));
                    CHECK(memcmp(dd_trainer_grads(tr), ref, nf * sizeof(float)) == 0 && sse == ssum,
                          "2 threads, OpenBLAS 1: the chunks' gradient and sse bit for bit");
                    setenv("OPENBLAS_NUM_THREADS", "3", 1);
                    openblas_set_num_threads(3);
                    dd_nn_threads_set(2);
                    CHECK(dd_nn_blas_threads() == 3, "OPENBLAS_NUM_THREADS set: OpenBLAS's count left at %d",
                          dd_nn_blas_threads());
                    sse = -1.0;
                    CHECK_OK(dd_trainer_compute_grads(tr, 1, lo, hi, glob, NULL, &sse));
                    CHECK(memcmp(dd_trainer_grads(tr), ref, nf * sizeof(float)) == 0 && sse == ssum,
                          "2 threads, OpenBLAS 3 (one inside the chunks): the chunks' gradient and sse bit for bit");
                    CHECK(dd_nn_blas_threads() == 3, "OpenBLAS's count back after the chunks: %d", dd_nn_blas_threads());
                    openblas_set_num_threads(1);
                }
                if (*saved) setenv("OPENBLAS_NUM_THREADS", saved, 1);
                else unsetenv("OPENBLAS_NUM_THREADS");
                dd_nn_threads_set(1);
            }
        }
        free(ref);
    }
    dd_trainer_destroy(&tt);
    dd_trainer_destroy(&td);
    dd_trainer_destroy(&tp);
    dd_dataset_free(&ds);
}

int main(void) {
    const char *tmp = dd_test_tmpdir();
    test_framing();
    test_sampler();
    test_cfg_json();
    test_model_cfg();
    test_batch_above_frames();
    test_gradients();
    test_batch_chunks();
    test_l1_loss();
    test_resume(tmp);
    test_strategy_threads();
    test_sim_pa(tmp);
    test_eval_bounded();
    return dd_test_done("test_train");
}
