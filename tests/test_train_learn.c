/* Learning tests of the training engine on small simulated data sets (pa.h models on a
 * band-limited test signal, a few thousand samples):
 * - PA modelling with a small GRU lowers the training loss and reaches a validation NMSE
 *   well below the gain-only fit;
 * - direct learning (DLA) of a GRU DPD through the frozen learned PA model improves the
 *   ACLR measured on the TRUE (noiseless) simulated PA by a clear margin, and the
 *   indirect learning (ILA) DPD improves it too (both by > 6 dB).
 * DD_TEST_LEARN_SMALL=1 (and DD_TEST_VALGRIND=1, set by tests/valgrind.sh) selects a
 * smaller configuration (2000 training samples, a third of the frames, 4/4/3 epochs: 0.2 s
 * natively, about 60 s of CPU under valgrind, where the full one takes over 900 s;
 * docs/testing.md, "valgrind") with the same checks at weaker margins: the val NMSE within
 * 1 dB of the gain-only fit (not 10 dB below it), the true ACLR better by > 2.5 dB (not 6). */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/train.h"
#include "test_train_util.h"

static int train_all(dd_trainer *tr, int verbose, const char *what) {
    while (dd_trainer_epoch(tr) < dd_trainer_cfg(tr)->epochs) {
        while (!dd_trainer_epoch_done(tr))
            if (dd_trainer_step(tr, NULL) != DD_OK) return -1;
        dd_epoch_record r;
        if (dd_trainer_end_epoch(tr, &r) != DD_OK) return -1;
        if (verbose)
            printf("%s epoch %2d: loss %.3e val NMSE %7.2f dB, val ACLR %7.2f, true val ACLR %7.2f dBc, %.3f s\n", what,
                   r.epoch, r.train_loss, r.val.nmse_db, r.val.aclr.avg_db, r.has_true ? r.true_val.aclr.avg_db : NAN,
                   r.time_s);
    }
    return 0;
}

/* The sizes of a run: samples per split, frame stride, epochs of PA, DLA and ILA. */
typedef struct {
    size_t n[3], stride;
    int ep_pa, ep_dla, ep_ila;
    double nmse_margin, aclr_margin; /* dB below the gain-only NMSE, the baseline ACLR */
} learn_size;

int main(void) {
    const char *small_env = getenv("DD_TEST_LEARN_SMALL"), *vg_env = getenv("DD_TEST_VALGRIND");
    const int small = (small_env && *small_env == '1') || (vg_env && *vg_env == '1');
    const learn_size z = small ? (learn_size){{2000, 1024, 1024}, 4, 4, 4, 3, -1.0, 2.5}
                               : (learn_size){{6000, 2048, 2048}, 2, 12, 18, 10, 10.0, 6.0};
    printf("%s configuration: %zu/%zu/%zu samples, stride %zu, epochs PA %d DLA %d ILA %d\n", small ? "small" : "full",
           z.n[0], z.n[1], z.n[2], z.stride, z.ep_pa, z.ep_dla, z.ep_ila);
    const size_t *n = z.n;
    dd_pa *pa = NULL;
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 1.0, 3.0, 21, &pa);
    CHECK(ds != NULL && pa != NULL, "data set");
    if (!ds) return dd_test_done("test_train_learn");
    double g_val = tt_gain_only_nmse(ds, DD_SPLIT_VAL);

    /* ---- PA model */
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 12, 64, z.stride, 32, z.ep_pa);
    c.lr = 1e-2;
    dd_trainer *tp = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tp));
    if (!tp) goto done;
    CHECK(train_all(tp, 1, "PA ") == 0, "PA training: %s", dd_last_error());
    {
        size_t nh;
        const dd_epoch_record *h = dd_trainer_history(tp, &nh);
        double best;
        int be = dd_trainer_best_epoch(tp, &best);
        printf("gain-only val NMSE %.2f dB; best epoch %d: val NMSE %.2f dB\n", g_val, be, best);
        CHECK(nh == (size_t)z.ep_pa && h[nh - 1].train_loss < 0.2 * h[0].train_loss, "training loss falls: %g -> %g",
              h[0].train_loss, h[nh - 1].train_loss);
        CHECK(best < g_val - z.nmse_margin, "val NMSE %.2f dB should be %.0f dB below the gain-only fit %.2f dB", best,
              z.nmse_margin, g_val);
        CHECK(be >= 1 && h[be - 1].best && h[be - 1].val.nmse_db == best, "best epoch flagged");
        for (size_t i = 0; i < nh; i++)
            CHECK(h[i].val.nmse_db >= best && isfinite(h[i].test.nmse_db) && isfinite(h[i].test.evm_db),
                  "epoch %zu metrics", i + 1);
    }

    /* ---- DPD by direct learning through the frozen PA model */
    {
        dd_model_ref pm = {"gru", *dd_model_config(dd_trainer_model(tp)), dd_trainer_params(tp), dd_trainer_num_floats(tp)};
        dd_train_cfg cd;
        tt_cfg(&cd, DD_TRAIN_DLA, 12, 64, z.stride, 32, z.ep_dla);
        cd.lr = 2e-2;
        dd_trainer *td = NULL;
        CHECK_OK(dd_trainer_create(&cd, ds, &pm, NULL, &td));
        if (td) {
            CHECK_OK(dd_trainer_set_true_pa(td, pa));
            dd_eval_metrics base;
            CHECK_OK(dd_trainer_true_baseline(td, DD_SPLIT_TEST, &base));
            CHECK(train_all(td, 1, "DLA") == 0, "DLA training: %s", dd_last_error());
            int be = dd_trainer_best_epoch(td, NULL);
            size_t nh;
            const dd_epoch_record *h = dd_trainer_history(td, &nh);
            if (be >= 1) {
                const dd_epoch_record *b = &h[be - 1];
                printf("DLA: true PA test ACLR %.2f -> %.2f dBc, EVM %.2f -> %.2f dB (PA model: %.2f dBc)\n",
                       base.aclr.avg_db, b->true_test.aclr.avg_db, base.evm_db, b->true_test.evm_db, b->test.aclr.avg_db);
                CHECK(b->has_true && b->true_test.aclr.avg_db < base.aclr.avg_db - z.aclr_margin,
                      "DLA improves the true PA's ACLR by > %.1f dB: %.2f -> %.2f", z.aclr_margin, base.aclr.avg_db,
                      b->true_test.aclr.avg_db);
                CHECK(b->true_test.evm_db < base.evm_db - 3.0, "and its EVM: %.2f -> %.2f", base.evm_db, b->true_test.evm_db);
            }
        }
        dd_trainer_destroy(&td);

        /* ---- indirect learning */
        cd.task = DD_TRAIN_ILA;
        cd.epochs = z.ep_ila;
        CHECK_OK(dd_trainer_create(&cd, ds, &pm, NULL, &td));
        if (td) {
            CHECK_OK(dd_trainer_set_true_pa(td, pa));
            dd_eval_metrics base;
            CHECK_OK(dd_trainer_true_baseline(td, DD_SPLIT_TEST, &base));
            CHECK(train_all(td, 1, "ILA") == 0, "ILA training: %s", dd_last_error());
            int be = dd_trainer_best_epoch(td, NULL);
            size_t nh;
            const dd_epoch_record *h = dd_trainer_history(td, &nh);
            if (be >= 1) {
                printf("ILA: true PA test ACLR %.2f -> %.2f dBc\n", base.aclr.avg_db, h[be - 1].true_test.aclr.avg_db);
                CHECK(h[be - 1].true_test.aclr.avg_db < base.aclr.avg_db - z.aclr_margin,
                      "ILA improves the true PA's ACLR by > %.1f dB: %.2f -> %.2f", z.aclr_margin, base.aclr.avg_db,
                      h[be - 1].true_test.aclr.avg_db);
            }
        }
        dd_trainer_destroy(&td);
    }
done:
    dd_trainer_destroy(&tp);
    dd_pa_destroy(&pa);
    dd_dataset_free(&ds);
    return dd_test_done("test_train_learn");
}
