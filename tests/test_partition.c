/* dd_dataset_partition (dataset.h): hand-computable cases. A train split of 10 frames of
 * 2 samples whose input powers are known (frame i has amplitude a[i]), a val split of a
 * few samples and an empty test split:
 * - drive, 3 parts: frames ranked by power into bands of floor(p F / P) .. : ranks
 *   [0,3), [3,6), [6,10); each band's frames in time order, adjacent ones merged;
 * - time, 3 parts: segments [0,6), [6,13), [13,20) of train and [0,3), [3,6), [6,9) of
 *   a 9-sample val;
 * - the last frame takes the remainder (21 samples, frame 2 -> 10 frames, the last 3);
 * - too few frames / samples, bad arguments: errors naming the split. */
#include "dd_test.h"

#include <complex.h>

#include "distdpd/dataset.h"

static dd_dataset *make(const double *amp, size_t nf, size_t frame, size_t extra, size_t nval) {
    size_t n = nf * frame + extra;
    dd_cf32 *x = calloc(n, sizeof *x), *y = calloc(n, sizeof *y), *v = calloc(nval + 1, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        size_t f = i / frame < nf ? i / frame : nf - 1;
        x[i] = (float)amp[f] + 0.0f * I;
        y[i] = (float)i + 1.0f * I; /* identifies the sample */
    }
    for (size_t i = 0; i < nval; i++) v[i] = (float)(i + 1) + 0.5f * I;
    dd_spec sp;
    dd_spec_default(&sp);
    size_t cnt[3] = {n, nval, 0};
    const dd_cf32 *in[3] = {x, v, NULL}, *out[3] = {y, v, NULL};
    dd_dataset *ds = NULL;
    CHECK_OK(dd_dataset_from_arrays(&sp, cnt, in, out, &ds));
    free(x);
    free(y);
    free(v);
    return ds;
}

int main(void) {
    /* frame powers: amplitudes 5 1 4 9 2 8 3 7 6 0.5 -> ranks (low to high):
     * 9(0.5) 1(1) 4(2) | 6(3) 2(4) 0(5) | 8(6) 7(7) 5(8) 3(9) */
    const double amp[10] = {5, 1, 4, 9, 2, 8, 3, 7, 6, 0.5};
    dd_dataset *ds = make(amp, 10, 2, 0, 6);
    if (!ds) return dd_test_done("test_partition");
    dd_part pt[6];
    CHECK_OK(dd_dataset_partition(ds, DD_PART_DRIVE, 3, 2, pt));
    /* band 0: frames 1, 4, 9 -> samples [2,4) [8,10) [18,20) */
    CHECK(pt[0].n_ranges[0] == 3, "band 0 ranges %zu", pt[0].n_ranges[0]);
    CHECK(pt[0].start[0][0] == 2 && pt[0].start[0][1] == 8 && pt[0].start[0][2] == 18, "band 0 starts %zu %zu %zu",
          pt[0].start[0][0], pt[0].start[0][1], pt[0].start[0][2]);
    CHECK(pt[0].ds->n[0] == 6 && pt[0].frames[0] == 3, "band 0: %zu samples, %zu frames", pt[0].ds->n[0], pt[0].frames[0]);
    CHECK_NEAR(pt[0].power_lo_db[0], 10 * log10(0.25), 1e-9);
    CHECK_NEAR(pt[0].power_hi_db[0], 10 * log10(4.0), 1e-9);
    /* band 1: frames 0, 2, 6 -> [0,2) [4,6) [12,14); the data follow the ranges */
    CHECK(pt[1].n_ranges[0] == 3 && pt[1].start[0][1] == 4 && pt[1].start[0][2] == 12, "band 1 ranges");
    CHECK(crealf(pt[1].ds->out[0][2]) == 4.0f && crealf(pt[1].ds->in[0][2]) == 4.0f, "band 1 sample 2 is source 4");
    /* band 2: frames 3, 5, 7, 8 -> [6,8) [10,12) [14,18): 7 and 8 merged */
    CHECK(pt[2].n_ranges[0] == 3 && pt[2].len[0][2] == 4 && pt[2].start[0][2] == 14, "band 2: 7 and 8 merged");
    CHECK(pt[2].ds->n[0] == 8 && pt[2].frames[0] == 4, "band 2 has 4 frames");
    CHECK_NEAR(pt[2].power_lo_db[0], 10 * log10(36.0), 1e-9);
    CHECK(pt[0].ds->n[1] == 2 && pt[2].ds->n[1] == 2, "val: 3 frames, one per band");
    dd_part_free(pt, 3);
    dd_dataset_free(&ds);

    ds = make(amp, 10, 2, 0, 9); /* val: 4 frames, the last of 3 samples */
    CHECK_OK(dd_dataset_partition(ds, DD_PART_DRIVE, 3, 2, pt));
    size_t total = 0;
    for (int p = 0; p < 3; p++) total += pt[p].ds->n[1];
    CHECK(total == 9, "val samples over the parts %zu, want 9", total);
    /* every val sample once: the outputs 1..9 each appear once */
    int seen[10] = {0};
    for (int p = 0; p < 3; p++)
        for (size_t i = 0; i < pt[p].ds->n[1]; i++) seen[(int)crealf(pt[p].ds->out[1][i])]++;
    int once = 1;
    for (int i = 1; i <= 9; i++) once &= seen[i] == 1;
    CHECK(once, "every val sample in exactly one part");
    CHECK(pt[0].ds->n[2] == 0 && isnan(pt[0].power_lo_db[2]), "empty test split stays empty");
    dd_part_free(pt, 3);

    CHECK_OK(dd_dataset_partition(ds, DD_PART_TIME, 3, 0, pt));
    CHECK(pt[0].start[0][0] == 0 && pt[0].len[0][0] == 6, "time part 0 [0,6)");
    CHECK(pt[1].start[0][0] == 6 && pt[1].len[0][0] == 7, "time part 1 [6,13)");
    CHECK(pt[2].start[0][0] == 13 && pt[2].len[0][0] == 7, "time part 2 [13,20)");
    CHECK(pt[1].start[1][0] == 3 && pt[1].len[1][0] == 3, "time part 1 of val [3,6)");
    CHECK(crealf(pt[2].ds->out[0][0]) == 13.0f, "time part 2 starts at source sample 13");
    dd_part_free(pt, 3);
    dd_dataset_free(&ds);

    /* 21 samples, frame 2: 10 frames, the last of 3 samples */
    ds = make(amp, 10, 2, 1, 5);
    CHECK_OK(dd_dataset_partition(ds, DD_PART_DRIVE, 2, 2, pt));
    CHECK(pt[0].ds->n[0] + pt[1].ds->n[0] == 21, "remainder kept: %zu + %zu", pt[0].ds->n[0], pt[1].ds->n[0]);
    /* frame 9 (amplitude 0.5, lowest) holds samples 18..20 */
    CHECK(pt[0].start[0][pt[0].n_ranges[0] - 1] == 18 && pt[0].len[0][pt[0].n_ranges[0] - 1] == 3, "last frame of 3");
    dd_part_free(pt, 2);

    CHECK_ERR(dd_dataset_partition(ds, DD_PART_DRIVE, 3, 2, pt), DD_ERR_RANGE,
              "split 'val' has 2 frames of 2 samples, fewer than the 3 parts");
    dd_part_free(pt, 3);
    CHECK_ERR(dd_dataset_partition(ds, DD_PART_TIME, 6, 0, pt), DD_ERR_RANGE,
              "split 'val' has 5 samples, fewer than the 6 parts");
    dd_part_free(pt, 6);
    CHECK_ERR(dd_dataset_partition(ds, DD_PART_TIME, 1, 0, pt), DD_ERR_ARG, "1 parts, expected 2..1024");
    CHECK_ERR(dd_dataset_partition(ds, DD_PART_DRIVE, 2, 0, pt), DD_ERR_ARG, "frame length 0");
    dd_dataset_free(&ds);
    return dd_test_done("test_partition");
}
