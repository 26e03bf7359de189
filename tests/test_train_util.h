/* Helpers of the trainer tests (tests/test_train*.c): a small simulated PA data set in
 * memory (band-limited Gaussian test signal through a pa.h model), its spec, and a
 * gain-only baseline. */
#ifndef TEST_TRAIN_UTIL_H
#define TEST_TRAIN_UTIL_H

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "distdpd/ckpt.h"
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

/* max |a - b| / max |b| (max |a - b| when b is all zero). */
static inline double tt_rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

/* Trains `epochs` whole epochs (steps, then the end of each epoch). 0 or -1. */
static inline int tt_train_epochs(dd_trainer *tr, int epochs) {
    for (int e = 0; e < epochs; e++) {
        while (!dd_trainer_epoch_done(tr))
            if (dd_trainer_step(tr, NULL) != DD_OK) return -1;
        if (dd_trainer_end_epoch(tr, NULL) != DD_OK) return -1;
    }
    return 0;
}

/* The small data set of the parallel equivalence tests: 62 frames of 16 (stride 3) in the
 * training split, i.e. 5 batches of 12 and a last one of 2 per epoch. */
static inline dd_dataset *tt_small_data(void) {
    size_t n[3] = {3 * 61 + 16, 512, 512};
    return tt_make_data(n, "wiener-hammerstein", NULL, 0, 0.7, 0, 5, NULL);
}

/* One process's run for a parallel test to equal: the loss and gradient of batch 0 of
 * epoch 0, and the parameters and the test NMSE after 2 epochs. */
typedef struct {
    double loss, nmse;
    float *grad, *params;
    size_t n;
} tt_reference;

/* 0, or -1 with the error message set. Free with tt_reference_free. */
static inline int tt_reference_make(const dd_train_cfg *c, const dd_dataset *ds, const dd_model_ref *pa,
                                    tt_reference *r) {
    memset(r, 0, sizeof *r);
    dd_trainer *one = NULL;
    if (dd_trainer_create(c, ds, pa, NULL, &one) != DD_OK) return -1;
    r->n = dd_trainer_num_floats(one);
    r->grad = calloc(r->n, sizeof(float));
    r->params = calloc(r->n, sizeof(float));
    int ok = r->grad && r->params && dd_trainer_loss_grad(one, 0, 0, &r->loss) == DD_OK;
    if (ok) memcpy(r->grad, dd_trainer_grads(one), r->n * sizeof(float));
    ok = ok && tt_train_epochs(one, 2) == 0;
    if (ok) {
        memcpy(r->params, dd_trainer_params(one), r->n * sizeof(float));
        size_t nh;
        r->nmse = dd_trainer_history(one, &nh)[1].test.nmse_db;
    }
    dd_trainer_destroy(&one);
    return ok ? 0 : -1;
}

static inline void tt_reference_free(tt_reference *r) {
    free(r->grad);
    free(r->params);
    memset(r, 0, sizeof *r);
}

/* Copies checkpoint src to dst, section `name` (NULL: none) replaced by v[0..n) (added
 * when src has none); v NULL: the section left out. */
static inline dd_status tt_ckpt_rewrite(const char *src, const char *dst, const char *name, const void *v, size_t n) {
    dd_ckpt_reader *r = NULL;
    dd_ckpt_writer *w = NULL;
    DD_TRY(dd_ckpt_open(src, &r));
    dd_status st = dd_ckpt_write_begin(dst, &w);
    if (st == DD_OK && name && v && !dd_ckpt_has(r, name)) st = dd_ckpt_add(w, name, v, n);
    for (size_t i = 0; st == DD_OK && i < dd_ckpt_count(r); i++) {
        const char *nm = dd_ckpt_section_name(r, i);
        const void *d;
        size_t bytes;
        if (name && strcmp(nm, name) == 0) {
            if (v) st = dd_ckpt_add(w, nm, v, n);
        } else if ((st = dd_ckpt_get(r, nm, &d, &bytes)) == DD_OK)
            st = dd_ckpt_add(w, nm, d, bytes);
    }
    if (st == DD_OK) st = dd_ckpt_write_commit(&w);
    dd_ckpt_abort(&w);
    dd_ckpt_close(&r);
    return st;
}

/* The size of a file in bytes, -1 when there is none. */
static inline long tt_fsize(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Whether DIR/NAME exists (a run directory's file). */
static inline int tt_has_file(const char *dir, const char *name) {
    char p[900];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0;
}

#endif
