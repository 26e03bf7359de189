/* report.html of a training run: summary of the best epoch, learning curves (loss, NMSE,
 * ACLR per epoch), time per epoch, the per-epoch table, and the spectra of the best
 * model on the test split (PA model: measured output, prediction and error; DPD: the
 * target G x and the PA model's output without and with the DPD, plus the true PA's
 * when the data set is simulated). A DPD run's baseline (the same PA model without the
 * DPD) is in the summary with the improvement in dB and drawn as reference lines in the
 * NMSE and ACLR curves. Spectra are in dB relative to the reference's in-band mean. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/metrics.h"
#include "distdpd/report.h"
#include "distdpd/train.h"
#include "train_internal.h"

static double db(double v) { return v > 0 ? 10.0 * log10(v) : NAN; }

static const char *fmt(char *buf, size_t n, double v, int dec) {
    if (!isfinite(v))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, "%.*f", dec, v);
    return buf;
}

/* One plot of up to 6 per-epoch series. */
static dd_status epoch_plot(dd_report *r, const char *title, const char *ylabel, const double *x, double *const *ys,
                            const char *const *labels, int ns, size_t n) {
    dd_series s[6];
    memset(s, 0, sizeof s);
    int k = 0;
    for (int i = 0; i < ns && i < 6; i++) {
        int any = 0;
        for (size_t j = 0; j < n; j++) any |= isfinite(ys[i][j]);
        if (!any) continue;
        s[k].label = labels[i];
        s[k].x = x;
        s[k].y = ys[i];
        s[k].n = n;
        s[k].style = DD_SERIES_BOTH;
        k++;
    }
    if (k == 0) return DD_OK;
    dd_plot_opts o;
    dd_plot_opts_default(&o);
    o.title = title;
    o.xlabel = "epoch";
    o.ylabel = ylabel;
    return dd_report_plot(r, &o, s, (size_t)k);
}

/* PSD (segmented, OpenDPD's) of up to 4 signals of n samples, in dB relative to the
 * in-band mean of the first (dd_psd_inband_mean). */
static dd_status psd_plot(dd_report *r, const dd_spec *sp, const char *title, const dd_cf32 *const *sig,
                          const size_t *ns, const char *const *labels, int nsig) {
    const size_t T = sp->nperseg;
    double *freq = calloc(T, sizeof(double));
    double *psd = calloc((size_t)nsig * T, sizeof(double));
    dd_status st = DD_OK;
    if (!freq || !psd) {
        st = dd_error(DD_ERR_NOMEM, "out of memory for the report spectra");
        goto done;
    }
    dd_series s[4];
    memset(s, 0, sizeof s);
    double ref = 1.0;
    for (int i = 0; i < nsig; i++) {
        if ((st = dd_psd_segmented(sig[i], ns[i], sp->fs, T, DD_PSD_SPECTRUM, psd + (size_t)i * T, freq)) != DD_OK) goto done;
        /* dB relative to the in-band mean of the first (reference) signal, as every report */
        if (i == 0) ref = dd_psd_inband_mean(sp, psd, freq, T);
        for (size_t k = 0; k < T; k++) psd[(size_t)i * T + k] = db(psd[(size_t)i * T + k] / ref);
        s[i].label = labels[i];
        s[i].x = freq;
        s[i].y = psd + (size_t)i * T;
        s[i].n = T;
        s[i].style = DD_SERIES_LINE;
    }
    for (size_t k = 0; k < T; k++) freq[k] /= 1e6;
    dd_plot_opts o;
    dd_plot_opts_default(&o);
    o.title = title;
    o.xlabel = "frequency (MHz)";
    o.ylabel = "PSD (dB rel. in-band mean)";
    o.y_span_max = 100.0;
    o.reduce = DD_PLOT_REDUCE_MAX;
    st = dd_report_plot(r, &o, s, (size_t)nsig);
done:
    free(freq);
    free(psd);
    return st;
}

/* AM/AM and AM/PM of the model against the measured output, each in one plot: binned
 * medians of gain and phase against the input level (dd_amam_ampm, each normalised by its
 * own least-squares gain), x the PA input, y the measured and m the model output. */
static dd_status amam_plots(dd_report *r, const dd_cf32 *x, const dd_cf32 *y, const dd_cf32 *m, size_t n) {
    dd_amam_curve cy, cm;
    memset(&cy, 0, sizeof cy);
    memset(&cm, 0, sizeof cm);
    dd_status st = dd_amam_ampm(x, y, n, 60, 30.0, &cy);
    if (st == DD_OK) st = dd_amam_ampm(x, m, n, 60, 30.0, &cm);
    if (st != DD_OK) { /* e.g. a split too short: no plot, the report goes on */
        dd_error_clear();
        st = DD_OK;
        goto done;
    }
    dd_series s[2];
    memset(s, 0, sizeof s);
    s[0] = (dd_series){"measured PA output", cy.in_db, cy.gain_db, cy.nbins, DD_SERIES_BOTH, "#d62728"};
    s[1] = (dd_series){"model output", cm.in_db, cm.gain_db, cm.nbins, DD_SERIES_BOTH, "#1f77b4"};
    dd_plot_opts o;
    dd_plot_opts_default(&o);
    o.title = "AM/AM: model against the measured output (test split)";
    o.xlabel = "input level (dB rel. peak)";
    o.ylabel = "gain (dB rel. linear fit)";
    o.caption = "Median of |y| / (|g| |x|) per 0.5 dB bin of the input level, g each signal's least-squares gain.";
    if ((st = dd_report_plot(r, &o, s, 2)) != DD_OK) goto done;
    s[0].y = cy.phase_deg;
    s[1].y = cm.phase_deg;
    o.title = "AM/PM: model against the measured output (test split)";
    o.ylabel = "phase (degrees)";
    o.caption = "Median of the phase of y x* / g per 0.5 dB bin of the input level.";
    st = dd_report_plot(r, &o, s, 2);
done:
    dd_amam_free(&cy);
    dd_amam_free(&cm);
    return st;
}

dd_status dd_train_write_report(dd_trainer *tr, const char *dir, const char *command) {
    const dd_train_cfg *cfg = &tr->cfg;
    const size_t n = tr->nhist;
    const dd_epoch_record *h = tr->hist;
    dd_report *r = NULL;
    char title[256], buf[1024], a[32], b[32], c[32], d[32];
    double *arr = NULL;
    dd_cf32 *tmp = NULL, *tmp2 = NULL;
    dd_status st;
    snprintf(title, sizeof title, "distdpd %s run: %s (%zu parameters)",
             cfg->task == DD_TRAIN_PA ? "PA model" : cfg->task == DD_TRAIN_DLA ? "DPD (direct learning)" : "DPD (indirect learning)",
             cfg->model, dd_model_num_params(tr->m));
    DD_TRY(dd_report_create(title, &r));
    if (command && (st = dd_report_pre(r, command)) != DD_OK) goto done;

    /* summary */
    int be = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i].best) be = h[i].epoch;
    const dd_epoch_record *bestr = be ? &h[be - 1] : NULL;
    double ttrain = 0, teval = 0;
    for (size_t i = 0; i < n; i++) {
        ttrain += h[i].time_s;
        teval += h[i].eval_time_s;
    }
    if ((st = dd_report_heading(r, "Summary")) != DD_OK) goto done;
    {
        const char *hd[2] = {"quantity", "value"};
        if ((st = dd_report_table_begin(r, NULL, 2, hd)) != DD_OK) goto done;
        char v[320];
#define ROW(k, ...)                                                        \
    do {                                                                   \
        snprintf(v, sizeof v, __VA_ARGS__);                                \
        const char *cells[2] = {k, v};                                     \
        if ((st = dd_report_table_row(r, cells)) != DD_OK) goto done;      \
    } while (0)
        {
            char desc[256];
            dd_model_describe(tr->m, desc, sizeof desc);
            ROW("model", "%s", desc);
        }
        ROW("frames", "length %zu, stride %zu: %llu frames, %llu batches of %zu per epoch", cfg->frame, cfg->stride,
            (unsigned long long)tr->fr.count, (unsigned long long)tr->nbatches, cfg->batch);
        ROW("optimiser", "%s, lr %g, schedule %s, clip %g, seed %llu", cfg->opt, cfg->lr,
            dd_lr_kind_name((dd_lr_kind)cfg->sched.kind), cfg->clip, (unsigned long long)cfg->seed);
        if (cfg->task != DD_TRAIN_PA) ROW("target gain G", "%.6g (PA model %s)", cfg->gain, dd_model_name(tr->pa));
        ROW("epochs", "%zu of %d", n, cfg->epochs);
        ROW("training time", "%.2f s (%.3f s per epoch), evaluation %.2f s", ttrain, n ? ttrain / (double)n : 0.0, teval);
        if (bestr) {
            ROW("best epoch", "%d (by validation %s)", be, cfg->task == DD_TRAIN_PA ? "NMSE" : "ACLR");
            ROW("test NMSE (best)", "%s dB", fmt(a, sizeof a, bestr->test.nmse_db, 2));
            ROW("test ACLR L/R/avg (best)", "%s / %s / %s dBc", fmt(a, sizeof a, bestr->test.aclr.left_db, 2),
                fmt(b, sizeof b, bestr->test.aclr.right_db, 2), fmt(c, sizeof c, bestr->test.aclr.avg_db, 2));
            ROW("test spectral EVM (best)", "%s dB", fmt(a, sizeof a, bestr->test.evm_db, 2));
            if (bestr->has_no_dpd) {
                const dd_eval_metrics *nd = &bestr->no_dpd_test, *wd = &bestr->test;
                ROW("PA model without DPD, test NMSE / ACLR avg / EVM", "%s dB / %s dBc / %s dB",
                    fmt(a, sizeof a, nd->nmse_db, 2), fmt(b, sizeof b, nd->aclr.avg_db, 2), fmt(c, sizeof c, nd->evm_db, 2));
                ROW("improvement by the DPD (test NMSE / ACLR / EVM)", "%s / %s / %s dB",
                    fmt(a, sizeof a, nd->nmse_db - wd->nmse_db, 2), fmt(b, sizeof b, nd->aclr.avg_db - wd->aclr.avg_db, 2),
                    fmt(c, sizeof c, nd->evm_db - wd->evm_db, 2));
            }
            if (bestr->has_true) {
                ROW("true PA without DPD, test ACLR avg / EVM", "%s dBc / %s dB", fmt(a, sizeof a, tr->ev[1].base.aclr.avg_db, 2),
                    fmt(b, sizeof b, tr->ev[1].base.evm_db, 2));
                ROW("true PA with DPD, test ACLR avg / EVM", "%s dBc / %s dB", fmt(a, sizeof a, bestr->true_test.aclr.avg_db, 2),
                    fmt(b, sizeof b, bestr->true_test.evm_db, 2));
            }
        }
#undef ROW
        if ((st = dd_report_table_end(r)) != DD_OK) goto done;
    }

    /* learning curves */
    if (n > 0) {
        arr = calloc(18 * n, sizeof(double));
        if (!arr) {
            st = DD_ERR_NOMEM;
            goto done;
        }
        double *x = arr, *y[17];
        for (int k = 0; k < 17; k++) y[k] = arr + (size_t)(k + 1) * n;
        /* PA runs: the measured output's ACLR (the same OpenDPD definition on the same
         * padded segments) as the reference the model's ACLR should reach */
        double meas[2] = {NAN, NAN};
        for (int k = 0; cfg->task == DD_TRAIN_PA && k < 2; k++) {
            dd_aclr_result ar;
            if (tr->ev[k].n && dd_aclr(tr->ev[k].ref, tr->ev[k].npad, &tr->ds->spec, DD_ACLR_OPENDPD, &ar) == DD_OK)
                meas[k] = ar.avg_db;
            dd_error_clear();
        }
        for (size_t i = 0; i < n; i++) {
            x[i] = h[i].epoch;
            y[0][i] = db(h[i].train_loss);
            y[1][i] = db(h[i].val.loss);
            y[2][i] = db(h[i].test.loss);
            y[3][i] = h[i].val.nmse_db;
            y[4][i] = h[i].test.nmse_db;
            y[5][i] = h[i].val.aclr.avg_db;
            y[6][i] = h[i].test.aclr.avg_db;
            y[7][i] = h[i].has_true ? h[i].true_val.aclr.avg_db : NAN;
            y[8][i] = h[i].has_true ? h[i].true_test.aclr.avg_db : NAN;
            y[9][i] = h[i].time_s;
            y[10][i] = h[i].eval_time_s;
            /* reference lines: the PA model without the DPD (constant over the epochs) */
            y[11][i] = h[i].has_no_dpd ? h[i].no_dpd_val.nmse_db : NAN;
            y[12][i] = h[i].has_no_dpd ? h[i].no_dpd_test.nmse_db : NAN;
            y[13][i] = h[i].has_no_dpd ? h[i].no_dpd_val.aclr.avg_db : NAN;
            y[14][i] = h[i].has_no_dpd ? h[i].no_dpd_test.aclr.avg_db : NAN;
            y[15][i] = meas[0];
            y[16][i] = meas[1];
        }
        if ((st = dd_report_heading(r, "Learning curves")) != DD_OK) goto done;
        const char *l1[3] = {"train loss", "val loss", "test loss"};
        if ((st = epoch_plot(r, "MSE loss per epoch", "loss (dB)", x, y, l1, 3, n)) != DD_OK) goto done;
        double *y2[4] = {y[3], y[4], y[11], y[12]};
        const char *l2[4] = {"val NMSE", "test NMSE", "val, PA model without DPD", "test, PA model without DPD"};
        if ((st = epoch_plot(r, cfg->task == DD_TRAIN_PA ? "NMSE of the PA model" : "NMSE of PA_model(DPD(x)) vs G x",
                             "NMSE (dB)", x, y2, l2, 4, n)) != DD_OK)
            goto done;
        double *y3[6] = {y[5], y[6], y[7], y[8], y[13], y[14]};
        const char *l3[6] = {"val ACLR",         "test ACLR", "true PA val ACLR", "true PA test ACLR", "val, PA model without DPD",
                             "test, PA model without DPD"};
        if (cfg->task == DD_TRAIN_PA) { /* the model's ACLR against the measured output's */
            y3[2] = y[15];
            y3[3] = y[16];
            l3[2] = "val, measured PA output";
            l3[3] = "test, measured PA output";
        }
        if ((st = epoch_plot(r, "ACLR (OpenDPD definition, average of left and right)", "ACLR (dBc)", x, y3, l3, 6, n)) != DD_OK)
            goto done;
        const char *l4[2] = {"training", "evaluation"};
        if ((st = epoch_plot(r, "Time per epoch", "seconds", x, y + 9, l4, 2, n)) != DD_OK) goto done;
    }

    /* spectra of the best model (the trainer holds the best parameters now) */
    if (tr->ev[1].n > 0) {
        dd_eval_metrics m;
        const dd_cf32 *pred;
        size_t np;
        const dd_eval_split *ev = &tr->ev[1];
        if ((st = dd_trainer_evaluate(tr, DD_SPLIT_TEST, &m, &pred, &np)) != DD_OK) goto done;
        if ((st = dd_report_heading(r, "Spectra of the best model (test split)")) != DD_OK) goto done;
        tmp = dd_calloc(np, sizeof(dd_cf32));
        tmp2 = dd_calloc(np, sizeof(dd_cf32));
        if (!tmp || !tmp2) {
            st = DD_ERR_NOMEM;
            goto done;
        }
        if (cfg->task == DD_TRAIN_PA) {
            for (size_t i = 0; i < np; i++) tmp[i] = ev->ref[i] - pred[i];
            const dd_cf32 *sig[3] = {ev->ref, pred, tmp};
            size_t ns[3] = {np, np, np};
            const char *lab[3] = {"measured PA output", "model output", "error"};
            if ((st = psd_plot(r, &tr->ds->spec, "PA output vs model", sig, ns, lab, 3)) != DD_OK) goto done;
            if ((st = amam_plots(r, tr->ds->in[DD_SPLIT_TEST], ev->ref, pred, ev->n)) != DD_OK) goto done;
        } else {
            if ((st = dd_model_run_stream(tr->pa, tr->pa_params, tr->ds->in[DD_SPLIT_TEST], tmp, ev->n)) != DD_OK) goto done;
            const dd_cf32 *sig[3] = {ev->ref, tmp, pred};
            size_t ns[3] = {np, ev->n, np};
            const char *lab[3] = {"target G x", "PA model, no DPD", "PA model with DPD"};
            if ((st = psd_plot(r, &tr->ds->spec, "DPD through the PA model", sig, ns, lab, 3)) != DD_OK) goto done;
            if (tr->true_pa) {
                dd_eval_metrics tm;
                const dd_cf32 *ty;
                size_t nt;
                if ((st = dd_trainer_evaluate_true(tr, DD_SPLIT_TEST, &tm, &ty, &nt)) != DD_OK) goto done;
                memcpy(tmp2, ty, nt * sizeof(dd_cf32));
                dd_pa_reset(tr->true_pa);
                if ((st = dd_pa_apply(tr->true_pa, tr->ds->in[DD_SPLIT_TEST], tmp, nt)) != DD_OK) goto done;
                const dd_cf32 *s2[3] = {ev->ref, tmp, tmp2};
                size_t n2[3] = {nt, nt, nt};
                const char *l2[3] = {"target G x", "true PA, no DPD", "true PA with DPD"};
                if ((st = psd_plot(r, &tr->ds->spec, "DPD on the true (simulated, noiseless) PA", s2, n2, l2, 3)) != DD_OK)
                    goto done;
                snprintf(buf, sizeof buf,
                         "True PA, test split: ACLR %s -> %s dBc, spectral EVM %s -> %s dB without -> with the DPD.",
                         fmt(a, sizeof a, ev->base.aclr.avg_db, 2), fmt(b, sizeof b, tm.aclr.avg_db, 2),
                         fmt(c, sizeof c, ev->base.evm_db, 2), fmt(d, sizeof d, tm.evm_db, 2));
                if ((st = dd_report_paragraph(r, buf)) != DD_OK) goto done;
            }
        }
    }

    /* the aligned-segment ACLR against the Welch one (test split): one sentence each when
     * they disagree by more than a few dB */
    if (tr->ev[1].n >= tr->ds->spec.nperseg) {
        const dd_eval_split *ev = &tr->ev[1];
        const dd_cf32 *sig[2] = {ev->ref, ev->pred};
        const char *what[2] = {cfg->task == DD_TRAIN_PA ? "the measured PA output (test split)" : "the target G x (test split)",
                               cfg->task == DD_TRAIN_PA ? "the model output (test split)" : "PA_model(DPD(x)) (test split)"};
        for (int k = 0; k < 2; k++) {
            dd_aclr_result al, we;
            if (dd_aclr(sig[k], ev->npad, &tr->ds->spec, DD_ACLR_OPENDPD, &al) != DD_OK ||
                dd_aclr(sig[k], ev->npad, &tr->ds->spec, DD_ACLR_OPENDPD_WELCH, &we) != DD_OK) {
                dd_error_clear();
                continue;
            }
            if (dd_aclr_disagreement(what[k], &al, &we, ev->n, tr->ds->spec.nperseg, DD_ACLR_AGREE_DB, buf, sizeof buf) &&
                (st = dd_report_paragraph(r, buf)) != DD_OK)
                goto done;
        }
    }

    /* per-epoch table */
    if (n > 0) {
        if ((st = dd_report_heading(r, "Per epoch")) != DD_OK) goto done;
        /* a DPD run adds what the DPD gains over the PA model alone, per epoch */
        const int nd = cfg->task != DD_TRAIN_PA && h[0].has_no_dpd;
        const char *hd[12] = {"epoch",     "time (s)",  "eval (s)", "lr",   "train loss", "val NMSE", "test NMSE",
                              "val ACLR", "test ACLR", "best",     "test NMSE gain vs no DPD (dB)",
                              "test ACLR gain vs no DPD (dB)"};
        if (nd) {
            hd[9] = hd[10];
            hd[10] = hd[11];
            hd[11] = "best";
        }
        const size_t nc = nd ? 12 : 10;
        if ((st = dd_report_table_begin(r, NULL, nc, hd)) != DD_OK) goto done;
        for (size_t i = 0; i < n; i++) {
            char e[16], t1[32], t2[32], lr[32], tl[32], v1[32], v2[32], v3[32], v4[32], g1[32], g2[32];
            snprintf(e, sizeof e, "%d", h[i].epoch);
            snprintf(lr, sizeof lr, "%.3g", h[i].lr);
            snprintf(tl, sizeof tl, "%.4g", h[i].train_loss);
            const char *best = h[i].epoch == be ? "best" : "";
            const char *cells[12] = {e,
                                     fmt(t1, sizeof t1, h[i].time_s, 3),
                                     fmt(t2, sizeof t2, h[i].eval_time_s, 3),
                                     lr,
                                     tl,
                                     fmt(v1, sizeof v1, h[i].val.nmse_db, 2),
                                     fmt(v2, sizeof v2, h[i].test.nmse_db, 2),
                                     fmt(v3, sizeof v3, h[i].val.aclr.avg_db, 2),
                                     fmt(v4, sizeof v4, h[i].test.aclr.avg_db, 2),
                                     best,
                                     NULL,
                                     NULL};
            if (nd) {
                cells[9] = fmt(g1, sizeof g1, h[i].no_dpd_test.nmse_db - h[i].test.nmse_db, 2);
                cells[10] = fmt(g2, sizeof g2, h[i].no_dpd_test.aclr.avg_db - h[i].test.aclr.avg_db, 2);
                cells[11] = best;
            }
            if ((st = dd_report_table_row(r, cells)) != DD_OK) goto done;
        }
        if ((st = dd_report_table_end(r)) != DD_OK) goto done;
    }
    {
        char path[DD_TRAIN_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/report.html", dir);
        st = dd_report_write(r, path);
    }
done:
    free(arr);
    dd_free(tmp);
    dd_free(tmp2);
    dd_report_free(&r);
    return st;
}
