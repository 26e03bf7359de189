/* Helpers of the trainer tests (tests/test_train*.c): a small simulated PA data set in
 * memory (band-limited Gaussian test signal through a pa.h model), its spec, and a
 * gain-only baseline. */
#ifndef TEST_TRAIN_UTIL_H
#define TEST_TRAIN_UTIL_H

#include "distdpd/dataset.h"
#include "distdpd/fit.h"
#include "distdpd/pa.h"
#include "distdpd/train.h"
#include "pa_test_signal.h"

/* 100 MHz sampling, 20 MHz channel in 4 sub-channels, 512-sample segments (195 kHz
 * bins). The test signal occupies 16 MHz of the channel, so the Hann window's leakage
 * stays far below the adjacent bands' distortion. */
static inline void tt_spec(dd_spec *s) {
    dd_spec_default(s);
    s->fs = 100e6;
    s->bw_main = 20e6;
    s->n_sub = 4;
    s->bw_sub = 5e6;
    s->nperseg = 512;
    s->bw_occupied = 0;
}

/* n[0..2] samples of a 16 MHz signal (PAPR ~8 dB, peak `peak`) through PA `pa_name`
 * (params p may be NULL = defaults, then drive_db = drive_db) at snr_db (0 = noiseless). *pa_out (may be NULL)
 * receives the PA (calibrated; caller destroys). Returns NULL on failure. */
static inline dd_dataset *tt_make_data(const size_t n[3], const char *pa_name, const dd_pa_params *p, double snr_db,
                                       double peak, double drive_db, uint64_t seed, dd_pa **pa_out) {
    size_t N = n[0] + n[1] + n[2];
    dd_cf32 *x = dd_calloc(N, sizeof *x), *y = dd_calloc(N, sizeof *y);
    dd_dataset *ds = NULL;
    dd_pa *pa = NULL;
    if (!x || !y) goto done;
    if (pa_test_signal(x, N, 100e6, 16e6, 8.0, seed) != 0) goto done;
    for (size_t i = 0; i < N; i++) x[i] *= (float)peak;
    dd_pa_params q;
    if (p)
        q = *p;
    else if (dd_pa_params_default(pa_name, &q) != DD_OK)
        goto done;
    else
        q.drive_db = drive_db;
    q.fs = 100e6;
    q.snr_db = snr_db;
    q.seed = seed + 7;
    if (dd_pa_create(pa_name, &q, &pa) != DD_OK) goto done;
    if (dd_pa_apply(pa, x, y, N) != DD_OK) goto done;
    dd_spec s;
    tt_spec(&s);
    const dd_cf32 *in[3] = {x, x + n[0], x + n[0] + n[1]};
    const dd_cf32 *out[3] = {y, y + n[0], y + n[0] + n[1]};
    if (dd_dataset_from_arrays(&s, n, in, out, &ds) != DD_OK) ds = NULL;
done:
    if (!ds) fprintf(stderr, "tt_make_data: %s\n", dd_last_error());
    if (pa_out && ds)
        *pa_out = pa;
    else
        dd_pa_destroy(&pa);
    dd_free(x);
    dd_free(y);
    return ds;
}

/* Gain-only NMSE (dB) of split s: the complex LS gain fitted on the train split. */
static inline double tt_gain_only_nmse(const dd_dataset *ds, dd_split s) {
    dd_cf64 g;
    if (dd_fit_gain(ds->in[0], ds->out[0], ds->n[0], &g, NULL) != DD_OK) return NAN;
    double e = 0, r = 0;
    for (size_t i = 0; i < ds->n[s]; i++) {
        dd_cf64 d = (dd_cf64)ds->out[s][i] - g * (dd_cf64)ds->in[s][i];
        e += creal(d * conj(d));
        r += creal((dd_cf64)ds->out[s][i] * conj((dd_cf64)ds->out[s][i]));
    }
    return 10 * log10(e / r);
}

/* A small training configuration for tests. */
static inline void tt_cfg(dd_train_cfg *c, dd_train_task task, int hidden, size_t frame, size_t stride, size_t batch,
                          int epochs) {
    dd_train_cfg_default(c, task);
    dd_model_cfg_set(&c->model_cfg, "hidden", hidden);
    c->frame = frame;
    c->stride = stride;
    c->batch = batch;
    c->epochs = epochs;
    c->eval_batch = 4;
}

#endif
