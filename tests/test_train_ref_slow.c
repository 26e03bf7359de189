/* The reference recipe on the measured DPA_200MHz data set (skipped when absent): GRU
 * hidden 23, frame 200, stride 1, batch 64, AdamW lr 5e-3, seed 0, two epochs. OpenDPD's
 * PyTorch run reaches -27.1 dB test NMSE after 1 epoch; we require < -25.5 dB after 1
 * and < -27 dB after 2 epochs (the full 20-epoch comparison is bench/ref_recipe.sh), and
 * a time per epoch reported in the record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dd_test.h"
#include "distdpd/train.h"

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/../shared/data/opendpd/DPA_200MHz", dd_test_srcdir());
    FILE *f;
    char spec[1100];
    snprintf(spec, sizeof spec, "%s/spec.json", path);
    if (!(f = fopen(spec, "r"))) dd_test_skip("DPA_200MHz data set not found at ../shared/data/opendpd");
    fclose(f);
    dd_dataset *ds = NULL;
    CHECK_OK(dd_dataset_load(path, &ds));
    if (!ds) return dd_test_done("test_train_ref_slow");
    dd_train_cfg c;
    dd_train_cfg_default(&c, DD_TRAIN_PA);
    c.epochs = 2;
    dd_trainer *tr = NULL;
    CHECK_OK(dd_trainer_create(&c, ds, NULL, NULL, &tr));
    if (tr) {
        CHECK(dd_model_num_params(dd_trainer_model(tr)) == 1911, "1,911 parameters");
        CHECK(dd_trainer_num_frames(tr) == 22841 && dd_trainer_num_batches(tr) == 357, "frames and batches");
        dd_epoch_record r[2];
        for (int e = 0; e < 2; e++) {
            while (!dd_trainer_epoch_done(tr)) CHECK_OK(dd_trainer_step(tr, NULL));
            CHECK_OK(dd_trainer_end_epoch(tr, &r[e]));
            printf("epoch %d: test NMSE %.2f dB, val NMSE %.2f dB, %.2f s + %.3f s eval\n", r[e].epoch,
                   r[e].test.nmse_db, r[e].val.nmse_db, r[e].time_s, r[e].eval_time_s);
        }
        CHECK(r[0].test.nmse_db < -25.5, "after 1 epoch: %.2f dB", r[0].test.nmse_db);
        CHECK(r[1].test.nmse_db < -27.0, "after 2 epochs: %.2f dB", r[1].test.nmse_db);
        CHECK(r[0].time_s > 0 && isfinite(r[0].test.aclr.avg_db) && isfinite(r[0].test.evm_db), "time and metrics");
    }
    dd_trainer_destroy(&tr);
    dd_dataset_free(&ds);
    return dd_test_done("test_train_ref_slow");
}
