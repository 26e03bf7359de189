/* `distdpd demo`: the main job on the embedded default, no data needed. The whole loop:
 *   1. simulate the default realistic PA campaign (default OFDM preset through the
 *      "realistic" PA) into DIR/data (OpenDPD layout + simulation.json + pa.json), read
 *      it back and measure it (ACLR, PAPR, demodulated EVM, gain-only and MP fits);
 *   2. train a PA behavioural model on it (DIR/run-pa, a train-pa run directory);
 *   3. train a DPD by direct learning through that model (DIR/run-dpd);
 *   4. measure the DPD on the TRUE noiseless PA rebuilt from pa.json: ACLR (OpenDPD and
 *      3GPP) on the test split and the demodulated EVM over one whole frame, without and
 *      with the DPD;
 * and writes DIR/report.html (results, learning curves, spectra and AM/AM-AM/PM without
 * and with DPD, then the campaign's own sections) and DIR/summary.json. */
#include <complex.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/model.h"
#include "distdpd/train.h"
#include "rf.h"

static const char *const NAME = "demo";

/* The demo's training recipe (docs/cli.md explains the choice). The PA model needs a
 * few thousand optimiser steps before it learns the trapping memory of the realistic
 * PA (its validation NMSE drops from about -30 dB to below -36 dB then), so small
 * batches with a frame stride: many cheap steps; a cosine schedule settles both models
 * at the end of the run. */
#define PA_MODEL "dgru"
#define PA_STRIDE 4
#define PA_BATCH 16
#define PA_EPOCHS 15
#define DPD_MODEL "gru"
#define DPD_STRIDE 4
#define DPD_BATCH 16
#define DPD_EPOCHS 20
/* --quick (tests): a few epochs with a larger stride */
#define QUICK_PA_EPOCHS 4
#define QUICK_PA_STRIDE 8
#define QUICK_DPD_EPOCHS 4
#define QUICK_DPD_STRIDE 8

static void help(void) {
    printf("usage: distdpd demo --out DIR [options]\n"
           "\n"
           "Runs the whole loop on the embedded default, with no input data:\n"
           "  1. simulates the default PA campaign (OFDM preset 'default' = 1 x 20 MHz NR,\n"
           "     256-QAM, through the 'realistic' PA model at 45 dB SNR) into DIR/data\n"
           "     (OpenDPD layout + simulation.json + pa.json) and measures it;\n"
           "  2. trains a PA model on it (" PA_MODEL ", run directory DIR/run-pa);\n"
           "  3. trains a DPD through that model by direct learning (" DPD_MODEL ", DIR/run-dpd);\n"
           "  4. measures the DPD on the true noiseless PA: ACLR (OpenDPD and 3GPP) on the\n"
           "     test split and the EVM demodulated with the known symbols over one whole\n"
           "     frame, without and with the DPD.\n"
           "Writes\n"
           "  DIR/report.html   results table, learning curves, spectra and AM/AM, AM/PM of\n"
           "                    the true PA without and with DPD, the campaign's ACLR, PAPR,\n"
           "                    EVM, gain-only and MP(7,4) fits, spectra, AM/AM, AM/PM\n"
           "  DIR/summary.json  the numbers, machine-readable (aclr_no_dpd_db, aclr_dpd_db,\n"
           "                    aclr_improvement_db, evm_no_dpd_pct, evm_dpd_pct,\n"
           "                    pa_model_test_nmse_db, times, ...)\n"
           "Takes about half a minute on one core (--quick: a few seconds); progress lines go\n"
           "to stderr, the results to stdout.\n"
           "\n"
           "options:\n"
           "  --out DIR           output directory (created if needed; its data, run-pa and\n"
           "                      run-dpd are replaced)\n"
           "  --pa NAME           simulated PA model (default realistic)\n"
           "  --signal PRESET     OFDM preset (default 'default')\n"
           "  --samples N         samples (default one frame)\n"
           "  --seed S            seed of the symbols, the PA noise (S + 1) and the training\n"
           "                      (initialisation and shuffling) (default 1)\n"
           "  --epochs-pa E       PA model epochs (default %d; --quick %d)\n"
           "  --epochs-dpd E      DPD epochs (default %d; --quick %d)\n"
           "  --pa-model NAME     PA model architecture (default " PA_MODEL "; distdpd models)\n"
           "  --dpd-model NAME    DPD architecture (default " DPD_MODEL ")\n"
           "  --quick             short training (frame stride %d, few epochs), for tests\n"
           "  -q, --quiet         no progress lines, no summary; -v, --verbose: more log output\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage\n",
           PA_EPOCHS, QUICK_PA_EPOCHS, DPD_EPOCHS, QUICK_DPD_EPOCHS, QUICK_PA_STRIDE);
}

/* ================================================================ training progress */

typedef struct {
    const char *what;          /* "PA model" or "DPD" */
    char desc[160];            /* model description */
    int is_dpd;
    dd_epoch_record *rec;      /* one per epoch (capacity cap) */
    size_t n, cap;
} train_log;

static void on_progress(void *user, const dd_train_progress *p) {
    train_log *l = user;
    if (p->phase != 2 || !p->rec) return;
    if (l->n < l->cap) l->rec[l->n++] = *p->rec;
    const dd_epoch_record *r = p->rec;
    char a[32], b[32];
    if (l->is_dpd)
        dd_cli_progress("%s epoch %d/%d: val ACLR through the PA model %s dBc, on the true PA %s dBc (%.1f s)%s", l->what,
                        r->epoch, p->epochs, dd_cli_fmt(a, sizeof a, r->val.aclr.avg_db, 2),
                        dd_cli_fmt(b, sizeof b, r->has_true ? r->true_val.aclr.avg_db : NAN, 2),
                        r->time_s + r->eval_time_s, r->best ? " *" : "");
    else
        dd_cli_progress("%s epoch %d/%d: val NMSE %s dB, test NMSE %s dB (%.1f s)%s", l->what, r->epoch, p->epochs,
                        dd_cli_fmt(a, sizeof a, r->val.nmse_db, 2), dd_cli_fmt(b, sizeof b, r->test.nmse_db, 2),
                        r->time_s + r->eval_time_s, r->best ? " *" : "");
}

/* The record of the best epoch (the last one flagged best), or NULL. */
static const dd_epoch_record *best_record(const train_log *l) {
    const dd_epoch_record *b = NULL;
    for (size_t i = 0; i < l->n; i++)
        if (l->rec[i].best) b = &l->rec[i];
    return b;
}

/* Removes the files of a previous run in dir (the demo replaces its runs; dd_train_run
 * refuses a directory that already holds one). Only the run directory's own files. */
static dd_status clear_run(const char *dir) {
    static const char *const files[] = {"config.json", "metrics.jsonl", "history.csv",
                                        "best.ckpt",   "last.ckpt",     "report.html"};
    char p[4300];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (unlink(p) != 0 && errno != ENOENT)
            return dd_error(DD_ERR_IO, "%s: cannot remove the previous run's file: %s", p, strerror(errno));
    }
    return DD_OK;
}

/* ================================================================ true-PA evaluation */

typedef struct {
    /* test split, true noiseless PA from its reset state, [0] without DPD, [1] with */
    size_t n;                      /* test samples */
    dd_aclr_result aclr[2][2];     /* [no DPD / DPD][DD_ACLR_OPENDPD / DD_ACLR_3GPP] */
    dd_aclr_result aclr_in[2];     /* of the PA input (the test split of x) */
    double nmse_db[2];             /* NMSE of the PA output against G x */
    double papr_db[2];             /* PAPR of the PA output */
    double papr_in_db;
    double gain;                   /* target gain G of the DPD */
    /* one whole frame in the steady state (second period of two) */
    int evm_ok;
    double evm_pct[2], evm_db[2];
    char evm_note[200];
    /* plots */
    size_t npsd;
    double *freq_mhz, *psd_in, *psd[2];
    dd_amam_curve curve[2];
    size_t nsc[2];
    double *sc_in[2], *sc_gain[2], *sc_phase[2];
    double seconds;
} dpd_eval;

static void dpd_eval_free(dpd_eval *e) {
    dd_free(e->freq_mhz);
    dd_free(e->psd_in);
    for (int k = 0; k < 2; k++) {
        dd_free(e->psd[k]);
        dd_amam_free(&e->curve[k]);
        dd_free(e->sc_in[k]);
        dd_free(e->sc_gain[k]);
        dd_free(e->sc_phase[k]);
    }
    memset(e, 0, sizeof *e);
}

static double nmse_vs_gx(const dd_cf32 *x, const dd_cf32 *y, size_t n, double G) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double complex t = G * (double complex)x[i];
        double complex d = (double complex)y[i] - t;
        e += creal(d) * creal(d) + cimag(d) * cimag(d);
        r += creal(t) * creal(t) + cimag(t) * cimag(t);
    }
    return r > 0 ? 10.0 * log10(e / r) : NAN;
}

/* Per-sample AM/AM and AM/PM dots (about `want` of them) of y against x, with the
 * least-squares gain g: input level in dB relative to max|x|, gain |y|/(|g||x|) in dB,
 * phase of y x* / g in degrees. */
static dd_status scatter(const dd_cf32 *x, const dd_cf32 *y, size_t n, size_t want, double **sin, double **sg,
                         double **sp, size_t *ns) {
    *ns = 0;
    size_t stride = n / (want ? want : 1);
    if (stride < 1) stride = 1;
    size_t cap = n / stride + 1;
    *sin = dd_calloc(cap, sizeof(double));
    *sg = dd_calloc(cap, sizeof(double));
    *sp = dd_calloc(cap, sizeof(double));
    if (!*sin || !*sg || !*sp) return dd_error(DD_ERR_NOMEM, "out of memory");
    double complex num = 0;
    double den = 0, peak = 0;
    for (size_t i = 0; i < n; i++) {
        num += (double complex)y[i] * conj((double complex)x[i]);
        den += (double)crealf(x[i]) * crealf(x[i]) + (double)cimagf(x[i]) * cimagf(x[i]);
        peak = fmax(peak, cabsf(x[i]));
    }
    if (!(den > 0) || !(peak > 0)) return DD_OK;
    double complex g = num / den;
    double gabs = cabs(g);
    if (!(gabs > 0)) return DD_OK;
    for (size_t i = 0; i < n && *ns < cap; i += stride) {
        double ax = cabsf(x[i]);
        if (!(ax > 0)) continue;
        double in_db = 20.0 * log10(ax / peak);
        if (in_db < -40.0) continue;
        double complex r = (double complex)y[i] * conj((double complex)x[i]) / g;
        (*sin)[*ns] = in_db;
        (*sg)[*ns] = 20.0 * log10(cabsf(y[i]) / (gabs * ax));
        (*sp)[*ns] = carg(r) * 180.0 / 3.14159265358979323846;
        (*ns)++;
    }
    return DD_OK;
}

/* Runs the DPD (as one stream) and the true PA (from its reset state) over the test
 * split and over two periods of the frame, and measures both without and with DPD. */
static dd_status evaluate_true(const dd_dataset *ds, const dd_sim *sim, dd_pa *tpa, const dd_run_model *dpd,
                               dpd_eval *e) {
    dd_status st = DD_OK;
    double t0 = dd_now();
    const dd_spec *sp = &ds->spec;
    dd_cf32 *u = NULL, *y = NULL, *xx = NULL, *uu = NULL, *yy = NULL;
    const dd_cf32 *x = ds->in[DD_SPLIT_TEST];
    size_t n = ds->n[DD_SPLIT_TEST];
    e->n = n;
    e->gain = dpd->cfg.gain;
    if (n == 0) return dd_error(DD_ERR_ARG, "the data set has no test split to measure the DPD on");
    u = dd_calloc(n, sizeof *u);
    y = dd_calloc(2 * n, sizeof *y);
    if (!u || !y) {
        st = dd_error(DD_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = dd_model_run_stream(dpd->model, dpd->params, x, u, n)) != DD_OK) goto done;
    dd_pa_reset(tpa);
    if ((st = dd_pa_apply(tpa, x, y, n)) != DD_OK) goto done;
    dd_pa_reset(tpa);
    if ((st = dd_pa_apply(tpa, u, y + n, n)) != DD_OK) goto done;
    for (int d = 0; d < 2; d++)
        if ((st = dd_aclr(x, n, sp, (dd_aclr_def)d, &e->aclr_in[d])) != DD_OK) goto done;
    if ((st = dd_papr_db(x, n, &e->papr_in_db)) != DD_OK) goto done;
    for (int k = 0; k < 2; k++) {
        const dd_cf32 *yk = y + (size_t)k * n;
        for (int d = 0; d < 2; d++)
            if ((st = dd_aclr(yk, n, sp, (dd_aclr_def)d, &e->aclr[k][d])) != DD_OK) goto done;
        e->nmse_db[k] = nmse_vs_gx(x, yk, n, e->gain);
        if ((st = dd_papr_db(yk, n, &e->papr_db[k])) != DD_OK) goto done;
    }

    /* plots: PSD of the input and of both outputs, AM/AM and AM/PM */
    size_t nper = sp->nperseg;
    if (nper > n) {
        nper = 16;
        while (nper * 2 <= n) nper *= 2;
    }
    e->npsd = nper;
    e->freq_mhz = dd_calloc(nper, sizeof(double));
    e->psd_in = dd_calloc(nper, sizeof(double));
    e->psd[0] = dd_calloc(nper, sizeof(double));
    e->psd[1] = dd_calloc(nper, sizeof(double));
    if (!e->freq_mhz || !e->psd_in || !e->psd[0] || !e->psd[1]) {
        st = dd_error(DD_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = dd_rf_psd_rel(sp, x, n, nper, e->freq_mhz, e->psd_in)) != DD_OK) goto done;
    for (int k = 0; k < 2; k++) {
        if ((st = dd_rf_psd_rel(sp, y + (size_t)k * n, n, nper, e->freq_mhz, e->psd[k])) != DD_OK) goto done;
        if ((st = dd_amam_ampm(x, y + (size_t)k * n, n, 60, 40.0, &e->curve[k])) != DD_OK) goto done;
        if ((st = scatter(x, y + (size_t)k * n, n, 2500, &e->sc_in[k], &e->sc_gain[k], &e->sc_phase[k], &e->nsc[k])) !=
            DD_OK)
            goto done;
    }

    /* EVM: the demodulator needs one whole frame; run two periods of the (periodic)
     * frame through the DPD and the PA and demodulate the second, in the steady state */
    size_t L = sim->frame_len;
    const dd_cf32 *fr = dd_ofdm_samples(sim->frame, &L);
    xx = dd_calloc(2 * L, sizeof *xx);
    uu = dd_calloc(2 * L, sizeof *uu);
    yy = dd_calloc(2 * L, sizeof *yy);
    if (!xx || !uu || !yy) {
        st = dd_error(DD_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < 2 * L; i++) xx[i] = fr[i % L];
    if ((st = dd_model_run_stream(dpd->model, dpd->params, xx, uu, 2 * L)) != DD_OK) goto done;
    dd_ofdm_evm_opts eo;
    dd_ofdm_evm_opts_default(&eo);
    eo.max_lag = 8;
    e->evm_ok = 1;
    for (int k = 0; k < 2 && e->evm_ok; k++) {
        dd_pa_reset(tpa);
        if ((st = dd_pa_apply(tpa, k ? uu : xx, yy, 2 * L)) != DD_OK) goto done;
        dd_ofdm_evm_result r;
        if (dd_ofdm_evm(sim->frame, yy + L, L, &eo, &r) != DD_OK) {
            e->evm_ok = 0;
            snprintf(e->evm_note, sizeof e->evm_note, "demodulation failed: %s", dd_last_error());
            dd_log(DD_LOG_WARN, "EVM of the true PA %s DPD not measured: %s", k ? "with" : "without", dd_last_error());
            break;
        }
        e->evm_pct[k] = r.evm_pct;
        e->evm_db[k] = r.evm_db;
    }
    e->seconds = dd_now() - t0;
done:
    if (st != DD_OK) dd_error_prefix(st, "measuring the DPD on the true PA (test split, %zu samples): ", n);
    dd_free(u);
    dd_free(y);
    dd_free(xx);
    dd_free(uu);
    dd_free(yy);
    return st;
}

/* ================================================================ report */

#define TRY_R(expr)                            \
    do {                                       \
        if ((st = (expr)) != DD_OK) goto done; \
    } while (0)

typedef struct {
    const char *out, *data_path, *run_pa, *run_dpd;
    const dd_sim_cfg *sim_cfg;
    const dd_rf_analysis *an;
    const char *format;
    const char *sim_desc;
    const train_log *pa_log, *dpd_log;
    const dd_train_cfg *pa_cfg, *dpd_cfg;
    double pa_nmse_db;            /* PA model, best epoch, test split */
    dd_eval_metrics base_val;     /* true PA without DPD, validation split */
    const dpd_eval *ev;
    double t_sim, t_pa, t_dpd, t_eval, t_total;
} demo_result;

static const char *f2(char *b, double v) { return dd_cli_fmt(b, 32, v, 2); }

static dd_status row5(dd_report *r, const char *a, const char *b, const char *c, const char *d, const char *e) {
    const char *cells[5] = {a, b, c, d, e};
    return dd_report_table_row(r, cells);
}

static dd_status aclr_rows(dd_report *r, const char *def, const dd_aclr_result *a0, const dd_aclr_result *a1) {
    dd_status st = DD_OK;
    char n[96], b1[32], b2[32], b3[32];
    const char *side[3] = {"left", "right", "average"};
    double v0[3] = {a0->left_db, a0->right_db, a0->avg_db}, v1[3] = {a1->left_db, a1->right_db, a1->avg_db};
    for (int i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "ACLR (%s) %s", def, side[i]);
        TRY_R(row5(r, n, f2(b1, v0[i]), f2(b2, v1[i]), f2(b3, v0[i] - v1[i]), "dBc"));
    }
done:
    return st;
}

static dd_status write_report(const demo_result *d, const char *path) {
    dd_report *r = NULL;
    dd_status st;
    char txt[16384], b1[32], b2[32], b3[32], b4[32];
    const dpd_eval *e = d->ev;
    const dd_rf_analysis *a = d->an;
    DD_TRY(dd_report_create("distdpd demo: PA model and DPD on a simulated PA", &r));

    double impr = e->aclr[0][0].avg_db - e->aclr[1][0].avg_db;
    char evm0[48] = "n/a", evm1[48] = "n/a";
    if (e->evm_ok) {
        snprintf(evm0, sizeof evm0, "%.2f %%", e->evm_pct[0]);
        snprintf(evm1, sizeof evm1, "%.2f %%", e->evm_pct[1]);
    }
    snprintf(txt, sizeof txt,
             "The whole loop on the embedded default: %s was simulated (%zu samples at %.6g MHz), a PA model "
             "(%s) was trained on it (test NMSE %s dB against the measured output), then a DPD (%s) by "
             "direct learning through that model. On the true noiseless PA, test split, the DPD takes the "
             "ACLR (OpenDPD, average) from %s dBc to %s dBc (%s dB better) and the demodulated EVM from %s "
             "to %s. Total time %.1f s.",
             d->sim_desc, a->n, a->spec.fs / 1e6, d->pa_log->desc, f2(b1, d->pa_nmse_db), d->dpd_log->desc,
             f2(b2, e->aclr[0][0].avg_db), f2(b3, e->aclr[1][0].avg_db), f2(b4, impr), evm0, evm1, d->t_total);
    TRY_R(dd_report_paragraph(r, txt));

    /* ---- results */
    TRY_R(dd_report_heading(r, "DPD on the true PA"));
    const char *rh[5] = {"Metric (true noiseless PA)", "Without DPD", "With DPD", "Improvement (dB)", "Unit"};
    snprintf(txt, sizeof txt, "True PA output without and with the DPD: test split (%zu samples), except EVM", e->n);
    TRY_R(dd_report_table_begin(r, txt, 5, rh));
    TRY_R(aclr_rows(r, "OpenDPD", &e->aclr[0][0], &e->aclr[1][0]));
    TRY_R(aclr_rows(r, "3GPP", &e->aclr[0][1], &e->aclr[1][1]));
    if (e->evm_ok) {
        TRY_R(row5(r, "EVM (demodulated, one whole frame)", f2(b1, e->evm_pct[0]), f2(b2, e->evm_pct[1]), "-", "%"));
        TRY_R(row5(r, "EVM (demodulated, one whole frame)", f2(b1, e->evm_db[0]), f2(b2, e->evm_db[1]),
                   f2(b3, e->evm_db[0] - e->evm_db[1]), "dB"));
    } else {
        TRY_R(row5(r, "EVM (demodulated)", "n/a", "n/a", "-", "%"));
    }
    snprintf(txt, sizeof txt, "NMSE of the PA output against G x (G = %.4g)", e->gain);
    TRY_R(row5(r, txt, f2(b1, e->nmse_db[0]), f2(b2, e->nmse_db[1]), f2(b3, e->nmse_db[0] - e->nmse_db[1]), "dB"));
    TRY_R(row5(r, "PAPR of the PA output", f2(b1, e->papr_db[0]), f2(b2, e->papr_db[1]), "-", "dB"));
    TRY_R(dd_report_table_end(r));
    if (!e->evm_ok) {
        snprintf(txt, sizeof txt, "EVM not available: %s.", e->evm_note);
        TRY_R(dd_report_paragraph(r, txt));
    }

    const char *th[4] = {"Step", "Model / setting", "Result", "Time (s)"};
    TRY_R(dd_report_table_begin(r, "Training", 4, th));
    {
        const char *c4[4];
        char m[1024], res[1024], t[32];
        snprintf(m, sizeof m, "%s; %d epochs, frame %zu, stride %zu, batch %zu, %s lr %g", d->pa_log->desc,
                 d->pa_cfg->epochs, d->pa_cfg->frame, d->pa_cfg->stride, d->pa_cfg->batch, d->pa_cfg->opt, d->pa_cfg->lr);
        const dd_epoch_record *bp = best_record(d->pa_log), *bd = best_record(d->dpd_log);
        snprintf(res, sizeof res, "best epoch %d: test NMSE %s dB, val NMSE %s dB (MP(%d,%d) LS fit: %s dB)",
                 bp ? bp->epoch : 0, f2(b1, d->pa_nmse_db), f2(b2, bp ? bp->val.nmse_db : NAN), a->mp_K, a->mp_M,
                 f2(b3, a->mp_ok ? a->mp_nmse_test_db : NAN));
        snprintf(t, sizeof t, "%.1f", d->t_pa);
        c4[0] = "PA model (train-pa)";
        c4[1] = m;
        c4[2] = res;
        c4[3] = t;
        TRY_R(dd_report_table_row(r, c4));
        snprintf(m, sizeof m, "%s; direct learning, G = %.4g; %d epochs, frame %zu, stride %zu, batch %zu, %s lr %g",
                 d->dpd_log->desc, d->dpd_cfg->gain, d->dpd_cfg->epochs, d->dpd_cfg->frame, d->dpd_cfg->stride,
                 d->dpd_cfg->batch, d->dpd_cfg->opt, d->dpd_cfg->lr);
        snprintf(res, sizeof res, "best epoch %d: val ACLR through the PA model %s dBc, on the true PA %s dBc",
                 bd ? bd->epoch : 0, f2(b1, bd ? bd->val.aclr.avg_db : NAN),
                 f2(b2, bd && bd->has_true ? bd->true_val.aclr.avg_db : NAN));
        snprintf(t, sizeof t, "%.1f", d->t_dpd);
        c4[0] = "DPD (train-dpd)";
        TRY_R(dd_report_table_row(r, c4));
        snprintf(res, sizeof res, "simulation and measurement %.1f s, true-PA evaluation %.2f s", d->t_sim, d->t_eval);
        snprintf(t, sizeof t, "%.1f", d->t_total);
        c4[0] = "Total";
        c4[1] = "one process";
        TRY_R(dd_report_table_row(r, c4));
    }
    TRY_R(dd_report_table_end(r));
    snprintf(txt, sizeof txt,
             "Run directories (config.json, metrics.jsonl, history.csv, checkpoints, report.html): %s and %s. "
             "Re-evaluate with: distdpd eval --run %s.",
             d->run_pa, d->run_dpd, d->run_dpd);
    TRY_R(dd_report_paragraph(r, txt));

    /* ---- learning curves */
    dd_plot_opts po;
    TRY_R(dd_report_heading(r, "Learning curves"));
    {
        size_t np = d->pa_log->n, nd = d->dpd_log->n;
        size_t nmax = np > nd ? np : nd;
        double *ep = dd_calloc(nmax + 1, sizeof(double)), *v1 = dd_calloc(nmax + 1, sizeof(double));
        double *v2 = dd_calloc(nmax + 1, sizeof(double)), *v3 = dd_calloc(nmax + 1, sizeof(double));
        if (!ep || !v1 || !v2 || !v3) {
            st = dd_error(DD_ERR_NOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < np; i++) {
                ep[i] = d->pa_log->rec[i].epoch;
                v1[i] = d->pa_log->rec[i].val.nmse_db;
                v2[i] = d->pa_log->rec[i].test.nmse_db;
                v3[i] = a->mp_ok ? a->mp_nmse_test_db : NAN;
            }
            dd_series s[3] = {{"validation NMSE", ep, v1, np, DD_SERIES_BOTH, "#1f77b4"},
                              {"test NMSE", ep, v2, np, DD_SERIES_BOTH, "#ff7f0e"},
                              {"MP(7,4) LS fit, test", ep, v3, np, DD_SERIES_LINE, "#7f7f7f"}};
            dd_plot_opts_default(&po);
            po.width = 900;
            po.height = 340;
            po.title = "PA model: NMSE against the measured PA output, per epoch";
            po.xlabel = "Epoch";
            po.ylabel = "NMSE (dB)";
            po.reduce = DD_PLOT_REDUCE_NONE;
            snprintf(txt, sizeof txt,
                     "%s trained on the training split; NMSE (OpenDPD's segmented definition) of the model's "
                     "prediction against the measured (noisy, 45 dB SNR) PA output after each epoch. The grey line is "
                     "the least-squares MP(%d,%d) fit for comparison.",
                     d->pa_log->desc, a->mp_K, a->mp_M);
            po.caption = txt;
            st = dd_report_plot(r, &po, s, a->mp_ok ? 3 : 2);
            if (st == DD_OK) {
                for (size_t i = 0; i < nd; i++) {
                    ep[i] = d->dpd_log->rec[i].epoch;
                    v1[i] = d->dpd_log->rec[i].val.aclr.avg_db;
                    v2[i] = d->dpd_log->rec[i].has_true ? d->dpd_log->rec[i].true_val.aclr.avg_db : NAN;
                    v3[i] = d->base_val.aclr.avg_db;
                }
                dd_series s2[3] = {{"true PA without DPD", ep, v3, nd, DD_SERIES_LINE, "#d62728"},
                                   {"PA model with DPD", ep, v1, nd, DD_SERIES_BOTH, "#1f77b4"},
                                   {"true PA with DPD", ep, v2, nd, DD_SERIES_BOTH, "#2ca02c"}};
                po.title = "DPD: ACLR (OpenDPD, average) on the validation split, per epoch";
                po.ylabel = "ACLR (dBc)";
                snprintf(txt, sizeof txt,
                         "%s trained through the frozen PA model (direct learning, target G x). Blue: the PA model "
                         "driven by the DPD (the training objective's view); green: the true noiseless PA driven by "
                         "the DPD, run as one stream over the split; red: the true PA without DPD.",
                         d->dpd_log->desc);
                po.caption = txt;
                st = dd_report_plot(r, &po, s2, 3);
            }
        }
        dd_free(ep);
        dd_free(v1);
        dd_free(v2);
        dd_free(v3);
        if (st != DD_OK) goto done;
    }

    /* ---- spectra */
    TRY_R(dd_report_heading(r, "Spectrum of the true PA without and with DPD"));
    {
        const dd_spec *sp = &a->spec;
        dd_series s[3] = {{"PA input", e->freq_mhz, e->psd_in, e->npsd, DD_SERIES_LINE, "#7f7f7f"},
                          {"true PA output, no DPD", e->freq_mhz, e->psd[0], e->npsd, DD_SERIES_LINE, "#d62728"},
                          {"true PA output, with DPD", e->freq_mhz, e->psd[1], e->npsd, DD_SERIES_LINE, "#2ca02c"}};
        dd_plot_opts_default(&po);
        po.width = 900;
        po.title = "Power spectral density, test split";
        po.xlabel = "Frequency (MHz)";
        po.ylabel = "PSD (dB rel. in-band mean)";
        po.reduce = DD_PLOT_REDUCE_MAX;
        po.y_span_max = 90.0;
        po.xmin = -sp->fs / 2e6;
        po.xmax = sp->fs / 2e6;
        snprintf(txt, sizeof txt,
                 "Welch PSD (Hann, %zu-sample segments, 50 %% overlap) of the test split: the PA input, and the "
                 "true noiseless PA's output without and with the DPD, each normalised to its mean level inside "
                 "the occupied band, max-hold per pixel column. ACLR (OpenDPD) %s dBc without, %s dBc with DPD.",
                 e->npsd, f2(b1, e->aclr[0][0].avg_db), f2(b2, e->aclr[1][0].avg_db));
        po.caption = txt;
        TRY_R(dd_report_plot(r, &po, s, 3));
    }

    /* ---- AM/AM, AM/PM */
    TRY_R(dd_report_heading(r, "AM/AM and AM/PM of the true PA without and with DPD"));
    {
        dd_series s[4] = {
            {"", e->sc_in[0], e->sc_gain[0], e->nsc[0], DD_SERIES_POINTS, "rgba(214,39,40,0.18)"},
            {"", e->sc_in[1], e->sc_gain[1], e->nsc[1], DD_SERIES_POINTS, "rgba(44,160,44,0.18)"},
            {"no DPD (median)", e->curve[0].in_db, e->curve[0].gain_db, e->curve[0].nbins, DD_SERIES_LINE, "#d62728"},
            {"with DPD (median)", e->curve[1].in_db, e->curve[1].gain_db, e->curve[1].nbins, DD_SERIES_LINE,
             "#2ca02c"}};
        double lo0, hi0, lo1, hi1;
        dd_plot_opts_default(&po);
        po.width = 900;
        po.title = "AM/AM of the whole chain (DPD + true PA), test split";
        po.xlabel = "Input power (dB rel. peak)";
        po.ylabel = "Gain (dB rel. linear fit)";
        po.xmin = DD_RF_AM_XMIN;
        po.xmax = 0.0;
        dd_rf_am_limits(e->sc_in[0], e->sc_gain[0], e->nsc[0], e->curve[0].in_db, e->curve[0].gain_db,
                        e->curve[0].nbins, &lo0, &hi0);
        dd_rf_am_limits(e->sc_in[1], e->sc_gain[1], e->nsc[1], e->curve[1].in_db, e->curve[1].gain_db,
                        e->curve[1].nbins, &lo1, &hi1);
        po.ymin = fmin(lo0, lo1);
        po.ymax = fmax(hi0, hi1);
        po.caption = "Instantaneous gain |y| / (|g| |x|) of the true PA output y against the DPD's input x (g: "
                     "least-squares gain), without (red) and with (green) the DPD: dots per sample (thinned), lines "
                     "the median per 0.67 dB bin. With the DPD the chain is close to linear: a flat line at 0 dB.";
        TRY_R(dd_report_plot(r, &po, s, 4));
        s[0].y = e->sc_phase[0];
        s[1].y = e->sc_phase[1];
        s[2].y = e->curve[0].phase_deg;
        s[3].y = e->curve[1].phase_deg;
        dd_rf_am_limits(e->sc_in[0], e->sc_phase[0], e->nsc[0], e->curve[0].in_db, e->curve[0].phase_deg,
                        e->curve[0].nbins, &lo0, &hi0);
        dd_rf_am_limits(e->sc_in[1], e->sc_phase[1], e->nsc[1], e->curve[1].in_db, e->curve[1].phase_deg,
                        e->curve[1].nbins, &lo1, &hi1);
        po.ymin = fmin(lo0, lo1);
        po.ymax = fmax(hi0, hi1);
        po.title = "AM/PM of the whole chain (DPD + true PA), test split";
        po.ylabel = "Phase (degrees)";
        po.caption = "Phase of y x* / g against input level, without (red) and with (green) the DPD.";
        TRY_R(dd_report_plot(r, &po, s, 4));
    }

    /* ---- the campaign itself */
    {
        const char *details[] = {"Simulation", d->sim_desc, NULL, NULL};
        TRY_R(dd_report_heading(r, "The simulated campaign (the PA without DPD)"));
        TRY_R(dd_rf_report_sections(r, a, d->data_path, d->format, details, " of the campaign"));
    }
    TRY_R(dd_rf_report_definitions(r, a));
    TRY_R(dd_report_paragraph(
        r, "DPD: direct learning. The PA model (trained on the measured input/output pairs) is frozen and the DPD "
           "d is trained so that PA_model(d(x)) = G x, with G = the largest PA output of the training split "
           "over the largest input amplitude of the whole transmitted signal (OpenDPD's rule takes max|x| of "
           "the training split only; the frame's highest peaks are in the test split, where that G would ask "
           "the PA for more output than it ever delivered). The DPD is then measured on the true PA of the simulation (rebuilt from pa.json with "
           "its calibration, without noise, from its reset state), which the training never saw. EVM needs one "
           "whole OFDM frame, so it is measured over a whole frame (all splits) in the steady state: two periods "
           "of the frame through the DPD and the PA, the second demodulated."));
    TRY_R(dd_report_write(r, path));
done:
    dd_report_free(&r);
    return st;
}

/* ================================================================ summary.json */

static cJSON *aclr_obj(const dd_aclr_result *in, const dd_aclr_result *out) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const dd_aclr_result *r[2] = {in, out};
    const char *nm[2] = {"in", "out"};
    for (int k = 0; k < 2; k++) {
        cJSON *a = cJSON_AddObjectToObject(o, nm[k]);
        if (!a) continue;
        cJSON_AddNumberToObject(a, "left_db", r[k]->left_db);
        cJSON_AddNumberToObject(a, "right_db", r[k]->right_db);
        cJSON_AddNumberToObject(a, "avg_db", r[k]->avg_db);
    }
    return o;
}

/* cJSON writes non-finite numbers as null. */
static void add_num(cJSON *o, const char *k, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static dd_status write_summary(const char *path, const demo_result *d, const char *report_path) {
    const dd_rf_analysis *a = d->an;
    const dpd_eval *e = d->ev;
    cJSON *o = cJSON_CreateObject();
    if (!o) return dd_error(DD_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(o, "generator", "distdpd demo " DD_VERSION_STRING);
    cJSON_AddStringToObject(o, "report", report_path);
    cJSON_AddStringToObject(o, "dataset", d->data_path);
    cJSON_AddStringToObject(o, "signal", d->sim_cfg->signal);
    cJSON_AddStringToObject(o, "pa", d->sim_cfg->pa);
    cJSON_AddNumberToObject(o, "samples", (double)a->n);
    cJSON_AddNumberToObject(o, "fs_hz", a->spec.fs);
    cJSON_AddNumberToObject(o, "bw_main_hz", a->spec.bw_main);
    /* the campaign (PA input vs measured output) */
    cJSON_AddNumberToObject(o, "papr_in_db", a->papr_in_db);
    cJSON_AddNumberToObject(o, "papr_out_db", a->papr_out_db);
    cJSON_AddItemToObject(o, "aclr_opendpd", aclr_obj(&a->aclr_in[0], &a->aclr_out[0]));
    cJSON_AddItemToObject(o, "aclr_3gpp", aclr_obj(&a->aclr_in[1], &a->aclr_out[1]));
    if (a->evm_ok) {
        cJSON_AddNumberToObject(o, "evm_in_pct", a->evm_in_pct);
        cJSON_AddNumberToObject(o, "evm_in_db", a->evm_in_db);
        cJSON_AddNumberToObject(o, "evm_out_pct", a->evm_out_pct);
        cJSON_AddNumberToObject(o, "evm_out_db", a->evm_out_db);
    }
    cJSON_AddNumberToObject(o, "gain_nmse_db", a->gain_nmse_db);
    if (a->mp_ok) {
        cJSON *m = cJSON_AddObjectToObject(o, "mp_fit");
        if (m) {
            cJSON_AddNumberToObject(m, "K", a->mp_K);
            cJSON_AddNumberToObject(m, "M", a->mp_M);
            cJSON_AddNumberToObject(m, "ncoef", (double)a->mp_ncoef);
            cJSON_AddNumberToObject(m, "nmse_train_db", a->mp_nmse_train_db);
            cJSON_AddNumberToObject(m, "nmse_test_db", a->mp_nmse_test_db);
        }
    }
    /* the PA model and the DPD on the true PA (test split; EVM over one frame) */
    cJSON_AddStringToObject(o, "pa_model", d->pa_log->desc);
    cJSON_AddNumberToObject(o, "pa_model_epochs", d->pa_cfg->epochs);
    add_num(o, "pa_model_test_nmse_db", d->pa_nmse_db);
    cJSON_AddStringToObject(o, "dpd_model", d->dpd_log->desc);
    cJSON_AddNumberToObject(o, "dpd_epochs", d->dpd_cfg->epochs);
    add_num(o, "dpd_target_gain", e->gain);
    cJSON_AddNumberToObject(o, "test_samples", (double)e->n);
    add_num(o, "aclr_no_dpd_db", e->aclr[0][0].avg_db);
    add_num(o, "aclr_dpd_db", e->aclr[1][0].avg_db);
    add_num(o, "aclr_improvement_db", e->aclr[0][0].avg_db - e->aclr[1][0].avg_db);
    add_num(o, "aclr_no_dpd_l_db", e->aclr[0][0].left_db);
    add_num(o, "aclr_no_dpd_r_db", e->aclr[0][0].right_db);
    add_num(o, "aclr_dpd_l_db", e->aclr[1][0].left_db);
    add_num(o, "aclr_dpd_r_db", e->aclr[1][0].right_db);
    add_num(o, "aclr_3gpp_no_dpd_db", e->aclr[0][1].avg_db);
    add_num(o, "aclr_3gpp_dpd_db", e->aclr[1][1].avg_db);
    add_num(o, "aclr_3gpp_improvement_db", e->aclr[0][1].avg_db - e->aclr[1][1].avg_db);
    if (e->evm_ok) {
        cJSON_AddNumberToObject(o, "evm_no_dpd_pct", e->evm_pct[0]);
        cJSON_AddNumberToObject(o, "evm_dpd_pct", e->evm_pct[1]);
        cJSON_AddNumberToObject(o, "evm_no_dpd_db", e->evm_db[0]);
        cJSON_AddNumberToObject(o, "evm_dpd_db", e->evm_db[1]);
    } else {
        cJSON_AddNullToObject(o, "evm_no_dpd_pct");
        cJSON_AddNullToObject(o, "evm_dpd_pct");
    }
    add_num(o, "nmse_gx_no_dpd_db", e->nmse_db[0]);
    add_num(o, "nmse_gx_dpd_db", e->nmse_db[1]);
    cJSON *runs = cJSON_AddObjectToObject(o, "runs");
    if (runs) {
        cJSON_AddStringToObject(runs, "pa", d->run_pa);
        cJSON_AddStringToObject(runs, "dpd", d->run_dpd);
    }
    cJSON *t = cJSON_AddObjectToObject(o, "times");
    if (t) {
        cJSON_AddNumberToObject(t, "simulate_s", d->t_sim);
        cJSON_AddNumberToObject(t, "train_pa_s", d->t_pa);
        cJSON_AddNumberToObject(t, "train_dpd_s", d->t_dpd);
        cJSON_AddNumberToObject(t, "evaluate_s", d->t_eval);
        cJSON_AddNumberToObject(t, "total_s", d->t_total);
    }
    cJSON_AddNumberToObject(o, "seconds", d->t_total);
    return dd_cli_write_json(path, o);
}

/* ================================================================ the command */

static int check_model(const char *opt, const char *name) {
    dd_model *m = NULL;
    if (dd_model_create(name, NULL, &m) != DD_OK)
        return dd_cli_usage(NAME, "%s: unknown model '%s' (distdpd models lists them)", opt, name);
    dd_model_destroy(&m);
    if (strlen(name) >= DD_TRAIN_NAME_MAX) return dd_cli_usage(NAME, "%s: name too long", opt);
    return 0;
}

/* A cosine learning-rate schedule over the whole run, from cfg->lr to 0. */
static void cosine(dd_train_cfg *cfg) {
    dd_lr_cfg base = cfg->sched;
    cfg->sched = dd_lr_cfg_default(DD_LR_COSINE, cfg->lr);
    cfg->sched.t_max = 0; /* = the whole run, resolved by the trainer */
    cfg->sched.factor = base.factor;
    cfg->sched.patience = base.patience;
    cfg->sched.min_lr = base.min_lr;
    cfg->sched.base_lr = cfg->lr;
}

/* The DPD's target gain: the largest PA output of the training split over the largest
 * input amplitude of the whole transmitted signal, G = max|y_train| / max|x|. OpenDPD's
 * rule divides by max|x| of the training split instead; when a later part of the
 * signal has higher peaks (the default frame's test split peaks 0.5 dB above its
 * training split) that asks the PA for more output at those peaks than it delivered in
 * the whole measurement, and the DPD clips there. The transmitter knows its signal's
 * peak, so this G keeps every peak of the signal inside the PA's measured range. */
static double target_gain(const dd_dataset *ds) {
    double my = 0, mx = 0;
    for (size_t i = 0; i < ds->n[DD_SPLIT_TRAIN]; i++) my = fmax(my, cabsf(ds->out[DD_SPLIT_TRAIN][i]));
    for (int k = 0; k < DD_SPLIT_COUNT; k++)
        for (size_t i = 0; i < ds->n[k]; i++) mx = fmax(mx, cabsf(ds->in[k][i]));
    return mx > 0 && my > 0 ? my / mx : 0.0; /* 0 = the trainer's default rule */
}

/* Trains one run with the demo's progress display and record log. */
static dd_status train(const dd_train_cfg *cfg, const char *data, const char *out, const char *pa_run,
                       const char *command, train_log *log) {
    dd_model *m = NULL;
    DD_TRY(dd_model_create(cfg->model, &cfg->model_cfg, &m));
    dd_model_describe(m, log->desc, sizeof log->desc);
    dd_model_destroy(&m);
    log->cap = (size_t)cfg->epochs;
    log->n = 0;
    log->rec = dd_calloc(log->cap, sizeof *log->rec);
    if (!log->rec) return dd_error(DD_ERR_NOMEM, "out of memory");
    DD_TRY(dd_cli_mkdirs(out));
    DD_TRY(clear_run(out));
    dd_train_run_opts o;
    memset(&o, 0, sizeof o);
    o.data = data;
    o.out = out;
    o.pa_run = pa_run;
    o.command = command;
    o.write_report = 1;
    o.progress = on_progress;
    o.progress_user = log;
    return dd_train_run(cfg, &o);
}

int dd_cmd_demo(int argc, char **argv) {
    enum { O_OUT = 256, O_PA, O_SIGNAL, O_SAMPLES, O_SEED, O_QUICK, O_EPA, O_EDPD, O_PAMODEL, O_DPDMODEL };
    static const struct option longopts[] = {
        {"out", required_argument, NULL, O_OUT},          {"pa", required_argument, NULL, O_PA},
        {"signal", required_argument, NULL, O_SIGNAL},    {"samples", required_argument, NULL, O_SAMPLES},
        {"seed", required_argument, NULL, O_SEED},        {"quick", no_argument, NULL, O_QUICK},
        {"epochs-pa", required_argument, NULL, O_EPA},    {"epochs-dpd", required_argument, NULL, O_EDPD},
        {"pa-model", required_argument, NULL, O_PAMODEL}, {"dpd-model", required_argument, NULL, O_DPDMODEL},
        {"verbose", no_argument, NULL, 'v'},              {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},                 {NULL, 0, NULL, 0}};
    dd_sim_cfg cfg;
    dd_sim_cfg_default(&cfg);
    const char *out = NULL, *pa_model = PA_MODEL, *dpd_model = DPD_MODEL;
    int verbosity = 0, c, rc, quick = 0;
    size_t epochs_pa = 0, epochs_dpd = 0;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_OUT: out = optarg; break;
        case O_PA: cfg.pa = optarg; break;
        case O_SIGNAL: cfg.signal = optarg; break;
        case O_SAMPLES:
            if ((rc = dd_cli_parse_size(NAME, "--samples", optarg, 1, (size_t)1 << 34, &cfg.samples))) return rc;
            break;
        case O_SEED:
            if ((rc = dd_cli_parse_u64(NAME, "--seed", optarg, &cfg.seed))) return rc;
            break;
        case O_QUICK: quick = 1; break;
        case O_EPA:
            if ((rc = dd_cli_parse_size(NAME, "--epochs-pa", optarg, 1, 100000, &epochs_pa))) return rc;
            break;
        case O_EDPD:
            if ((rc = dd_cli_parse_size(NAME, "--epochs-dpd", optarg, 1, 100000, &epochs_dpd))) return rc;
            break;
        case O_PAMODEL: pa_model = optarg; break;
        case O_DPDMODEL: dpd_model = optarg; break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!out) return dd_cli_usage(NAME, "missing --out DIR");
    if ((rc = check_model("--pa-model", pa_model))) return rc;
    if ((rc = check_model("--dpd-model", dpd_model))) return rc;
    dd_cli_log_init(verbosity);
    dd_cli_progress_quiet(verbosity < 0);

    /* the training recipes */
    dd_train_cfg pcfg, dcfg;
    dd_train_cfg_default(&pcfg, DD_TRAIN_PA);
    snprintf(pcfg.model, sizeof pcfg.model, "%s", pa_model);
    pcfg.stride = quick ? QUICK_PA_STRIDE : PA_STRIDE;
    pcfg.batch = PA_BATCH;
    pcfg.epochs = epochs_pa ? (int)epochs_pa : quick ? QUICK_PA_EPOCHS : PA_EPOCHS;
    pcfg.seed = cfg.seed;
    cosine(&pcfg);
    dd_train_cfg_default(&dcfg, DD_TRAIN_DLA);
    snprintf(dcfg.model, sizeof dcfg.model, "%s", dpd_model);
    dcfg.stride = quick ? QUICK_DPD_STRIDE : DPD_STRIDE;
    dcfg.batch = DPD_BATCH;
    dcfg.epochs = epochs_dpd ? (int)epochs_dpd : quick ? QUICK_DPD_EPOCHS : DPD_EPOCHS;
    dcfg.seed = cfg.seed;
    cosine(&dcfg);

    double t0 = dd_now();
    dd_sim sim;
    memset(&sim, 0, sizeof sim);
    dd_dataset *ds = NULL, *back = NULL;
    dd_rf_analysis an;
    memset(&an, 0, sizeof an);
    train_log plog, dlog;
    memset(&plog, 0, sizeof plog);
    memset(&dlog, 0, sizeof dlog);
    plog.what = "PA model";
    dlog.what = "DPD";
    dlog.is_dpd = 1;
    dd_pa *tpa = NULL;
    dd_run_model dpd;
    memset(&dpd, 0, sizeof dpd);
    dpd_eval ev;
    memset(&ev, 0, sizeof ev);
    dd_status st;
    int ret = DD_EXIT_OK;
    char data_dir[4200], report_path[4200], summary_path[4200], run_pa[4200], run_dpd[4200], command[512];
    const char *data_path = NULL;
    snprintf(data_dir, sizeof data_dir, "%s/data", out);
    snprintf(report_path, sizeof report_path, "%s/report.html", out);
    snprintf(summary_path, sizeof summary_path, "%s/summary.json", out);
    snprintf(run_pa, sizeof run_pa, "%s/run-pa", out);
    snprintf(run_dpd, sizeof run_dpd, "%s/run-dpd", out);

    /* ---- 1. simulate and measure */
    dd_cli_progress("simulating: OFDM preset '%s' through PA model '%s' (seed %llu)", cfg.signal, cfg.pa,
                    (unsigned long long)cfg.seed);
    if ((st = dd_sim_run(&cfg, &sim)) != DD_OK) goto fail;
    dd_cli_progress("simulated %zu samples at %g MHz", sim.n, sim.spec.fs / 1e6);
    if ((st = dd_sim_dataset(&sim, &ds)) != DD_OK) goto fail;
    if ((st = dd_cli_mkdirs(out)) != DD_OK) goto fail;
    if ((st = dd_sim_save(&cfg, &sim, ds, data_dir, 0, &data_path)) != DD_OK) goto fail;
    snprintf(data_dir, sizeof data_dir, "%s", data_path);
    data_path = data_dir;
    dd_cli_progress("wrote the data set to %s (OpenDPD layout + simulation.json + pa.json)", data_path);
    if ((st = dd_dataset_load(data_path, &back)) != DD_OK) goto fail;
    dd_cli_progress("read it back: train %zu, val %zu, test %zu samples; measuring", back->n[0], back->n[1],
                    back->n[2]);
    dd_rf_opts ro;
    dd_rf_opts_default(&ro);
    if ((st = dd_rf_analyze(back, sim.frame, &ro, &an)) != DD_OK) goto fail;
    dd_cli_progress("measured: ACLR, PAPR, EVM, gain-only and MP(%d,%d) fits in %.2f s", ro.mp_K, ro.mp_M, an.seconds);
    double t_sim = dd_now() - t0;

    char desc[512];
    dd_ofdm_info info;
    dd_ofdm_get_info(sim.frame, &info);
    snprintf(desc, sizeof desc, "OFDM preset %s (%d x %.0f MHz, %d-QAM, %d symbols, seed %llu) through PA model %s",
             cfg.signal, info.cfg.n_carriers, info.cfg.carrier_bw / 1e6, info.cfg.qam, info.n_symbols,
             (unsigned long long)cfg.seed, cfg.pa);

    /* ---- 2. the PA model */
    double t1 = dd_now();
    snprintf(command, sizeof command, "distdpd demo (PA model: %s, %d epochs)", pcfg.model, pcfg.epochs);
    dd_cli_progress("training the PA model: %s, %d epochs, frame %zu, stride %zu, batch %zu -> %s", pcfg.model,
                    pcfg.epochs, pcfg.frame, pcfg.stride, pcfg.batch, run_pa);
    if ((st = train(&pcfg, data_path, run_pa, NULL, command, &plog)) != DD_OK) goto fail;
    double t_pa = dd_now() - t1;
    const dd_epoch_record *bp = best_record(&plog);
    double pa_nmse = bp ? bp->test.nmse_db : NAN;

    /* ---- 3. the DPD */
    t1 = dd_now();
    dcfg.gain = target_gain(back);
    snprintf(command, sizeof command, "distdpd demo (DPD: %s, direct learning, %d epochs)", dcfg.model, dcfg.epochs);
    dd_cli_progress("training the DPD through the PA model: %s, %d epochs, stride %zu, batch %zu -> %s", dcfg.model,
                    dcfg.epochs, dcfg.stride, dcfg.batch, run_dpd);
    if ((st = train(&dcfg, data_path, run_dpd, run_pa, command, &dlog)) != DD_OK) goto fail;
    double t_dpd = dd_now() - t1;

    /* ---- 4. the DPD on the true PA */
    t1 = dd_now();
    int found = 0;
    if ((st = dd_sim_pa_load(data_path, back, &tpa, &found)) != DD_OK) goto fail;
    if (!found || !tpa) {
        st = dd_error(DD_ERR_IO, "%s: no pa.json: the true PA cannot be rebuilt", data_path);
        goto fail;
    }
    if ((st = dd_run_model_load(run_dpd, "best", &dpd)) != DD_OK) goto fail;
    dd_epoch_record erec;
    dd_eval_metrics base[2];
    if ((st = dd_run_evaluate(run_dpd, "best", back, tpa, &erec, base)) != DD_OK) goto fail;
    if ((st = evaluate_true(back, &sim, tpa, &dpd, &ev)) != DD_OK) goto fail;
    double t_eval = dd_now() - t1;
    dd_cli_progress("true PA, test split: ACLR (OpenDPD) %.2f dBc without DPD, %.2f dBc with DPD (%.2f s)",
                    ev.aclr[0][0].avg_db, ev.aclr[1][0].avg_db, t_eval);
    if (fabs(erec.true_test.aclr.avg_db - ev.aclr[1][0].avg_db) > 0.01)
        dd_log(DD_LOG_WARN, "the trainer's true-PA test ACLR (%.3f dBc) differs from the demo's (%.3f dBc)",
               erec.true_test.aclr.avg_db, ev.aclr[1][0].avg_db);

    demo_result dr;
    memset(&dr, 0, sizeof dr);
    dr.out = out;
    dr.data_path = data_path;
    dr.run_pa = run_pa;
    dr.run_dpd = run_dpd;
    dr.sim_cfg = &cfg;
    dr.an = &an;
    dr.format = back->format;
    dr.sim_desc = desc;
    dr.pa_log = &plog;
    dr.dpd_log = &dlog;
    dr.pa_cfg = &pcfg;
    dr.dpd_cfg = &dpd.cfg;
    dr.pa_nmse_db = pa_nmse;
    dr.base_val = base[0];
    dr.ev = &ev;
    dr.t_sim = t_sim;
    dr.t_pa = t_pa;
    dr.t_dpd = t_dpd;
    dr.t_eval = t_eval;
    dr.t_total = dd_now() - t0;
    if ((st = write_report(&dr, report_path)) != DD_OK) goto fail;
    dd_cli_progress("wrote %s", report_path);
    dr.t_total = dd_now() - t0;
    if ((st = write_summary(summary_path, &dr, report_path)) != DD_OK) goto fail;
    dd_cli_progress("wrote %s", summary_path);

    if (verbosity >= 0) {
        char a1[32], a2[32];
        printf("distdpd demo: %s, %zu samples at %g MHz\n", desc, an.n, an.spec.fs / 1e6);
        printf("campaign (PA input vs measured output):\n");
        printf("  ACLR (OpenDPD) input %.2f dBc, output %.2f dBc (left %.2f, right %.2f)\n", an.aclr_in[0].avg_db,
               an.aclr_out[0].avg_db, an.aclr_out[0].left_db, an.aclr_out[0].right_db);
        printf("  ACLR (3GPP)    input %.2f dBc, output %.2f dBc\n", an.aclr_in[1].avg_db, an.aclr_out[1].avg_db);
        printf("  PAPR           input %.2f dB, output %.2f dB\n", an.papr_in_db, an.papr_out_db);
        if (an.evm_ok)
            printf("  EVM            input %.2f %%, output %.2f %% (%.2f dB)\n", an.evm_in_pct, an.evm_out_pct,
                   an.evm_out_db);
        printf("  NMSE           gain-only fit %.2f dB", an.gain_nmse_db);
        if (an.mp_ok) printf(", MP(%d,%d) fit %.2f dB (test split)", an.mp_K, an.mp_M, an.mp_nmse_test_db);
        printf("\nPA model: %s, %d epochs in %.1f s: test NMSE %s dB\n", plog.desc, pcfg.epochs, t_pa,
               dd_cli_fmt(a1, sizeof a1, pa_nmse, 2));
        printf("DPD:      %s, %d epochs in %.1f s, target gain G = %.4g\n", dlog.desc, dpd.cfg.epochs, t_dpd, ev.gain);
        printf("true PA, test split (%zu samples), without -> with DPD:\n", ev.n);
        printf("  ACLR (OpenDPD) %.2f -> %.2f dBc (left %.2f -> %.2f, right %.2f -> %.2f): %.2f dB better\n",
               ev.aclr[0][0].avg_db, ev.aclr[1][0].avg_db, ev.aclr[0][0].left_db, ev.aclr[1][0].left_db,
               ev.aclr[0][0].right_db, ev.aclr[1][0].right_db, ev.aclr[0][0].avg_db - ev.aclr[1][0].avg_db);
        printf("  ACLR (3GPP)    %.2f -> %.2f dBc: %.2f dB better\n", ev.aclr[0][1].avg_db, ev.aclr[1][1].avg_db,
               ev.aclr[0][1].avg_db - ev.aclr[1][1].avg_db);
        if (ev.evm_ok)
            printf("  EVM            %.2f %% -> %.2f %% (%.2f -> %.2f dB; demodulated, one whole frame)\n", ev.evm_pct[0],
                   ev.evm_pct[1], ev.evm_db[0], ev.evm_db[1]);
        else
            printf("  EVM            n/a (%s)\n", ev.evm_note);
        printf("  NMSE vs G x    %s -> %s dB\n", dd_cli_fmt(a1, sizeof a1, ev.nmse_db[0], 2),
               dd_cli_fmt(a2, sizeof a2, ev.nmse_db[1], 2));
        printf("time:     %.1f s (simulate %.1f, PA model %.1f, DPD %.1f, evaluate %.1f)\n", dr.t_total, t_sim, t_pa,
               t_dpd, t_eval);
        printf("report:  %s\nsummary: %s\ndata:    %s\nruns:    %s, %s\n", report_path, summary_path, data_path, run_pa,
               run_dpd);
    }
    goto cleanup;
fail:
    ret = dd_cli_fail(NAME, st);
cleanup:
    dpd_eval_free(&ev);
    dd_run_model_free(&dpd);
    dd_pa_destroy(&tpa);
    dd_free(plog.rec);
    dd_free(dlog.rec);
    dd_rf_free(&an);
    dd_dataset_free(&back);
    dd_dataset_free(&ds);
    dd_sim_free(&sim);
    return ret;
}
