/* The DPD half of `distdpd run`: --dpd-out writes OpenDPD's run_dpd layout (the test
 * split's input and the DPD's output as CSV columns I,Q,I_dpd,Q_dpd; lab-emi/OpenDPD
 * steps/run_dpd.py), and every DPD result run produces is printed with its baseline, the
 * run's PA model without the DPD, against G x. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_train.h"
#include "distdpd/dataset.h"
#include "distdpd/metrics.h"
#include "distdpd/model.h"
#include "rf.h"

dd_status dd_cli_dpd_baseline(FILE *f, const dd_run_model *rm, const dd_spec *spec, const dd_cf32 *x,
                              const dd_cf32 *u, size_t n) {
    dd_cf32 *gx = dd_calloc(n, sizeof *gx), *y0 = dd_calloc(n, sizeof *y0), *y1 = dd_calloc(n, sizeof *y1);
    dd_status st = DD_OK;
    if (!gx || !y0 || !y1) {
        st = dd_error(DD_ERR_NOMEM, "out of memory for %zu samples", n);
        goto done;
    }
    const float g = (float)rm->cfg.gain;
    for (size_t i = 0; i < n; i++) gx[i] = g * x[i];
    if ((st = dd_model_run_stream(rm->pa_model, rm->pa_params, x, y0, n)) != DD_OK) goto done;
    if ((st = dd_model_run_stream(rm->pa_model, rm->pa_params, u, y1, n)) != DD_OK) goto done;
    dd_metric_set m0, m1;
    if ((st = dd_metrics_compute(gx, y0, n, spec, DD_ACLR_OPENDPD, 0, &m0)) != DD_OK ||
        (st = dd_metrics_compute(gx, y1, n, spec, DD_ACLR_OPENDPD, 0, &m1)) != DD_OK)
        goto done;
    char a[6][32];
    fprintf(f, "PA model, one stream vs G x (G = %.6g): NMSE %s dB, ACLR %s dBc, EVM %s dB with the DPD\n", rm->cfg.gain,
            dd_cli_fmt(a[0], 32, m1.nmse_db, 2), dd_cli_fmt(a[1], 32, m1.aclr.avg_db, 2), dd_cli_fmt(a[2], 32, m1.evm_db, 2));
    fprintf(f, "baseline:   the PA model without the DPD: NMSE %s dB, ACLR %s dBc, EVM %s dB; the DPD improves NMSE by "
               "%s dB, ACLR by %s dB, EVM by %s dB\n",
            dd_cli_fmt(a[0], 32, m0.nmse_db, 2), dd_cli_fmt(a[1], 32, m0.aclr.avg_db, 2), dd_cli_fmt(a[2], 32, m0.evm_db, 2),
            dd_cli_fmt(a[3], 32, m0.nmse_db - m1.nmse_db, 2), dd_cli_fmt(a[4], 32, m0.aclr.avg_db - m1.aclr.avg_db, 2),
            dd_cli_fmt(a[5], 32, m0.evm_db - m1.evm_db, 2));
done:
    dd_free(gx);
    dd_free(y0);
    dd_free(y1);
    return st;
}

int dd_cli_run_dpd_out(const char *name, const dd_run_model *rm, const char *run, const char *data, const char *path,
                       int verbosity) {
    if (!rm->pa_model) return dd_cli_usage(name, "--dpd-out needs a DPD run; %s is a PA model run", run);
    char databuf[4200];
    data = dd_rf_resolve_dataset(data && *data ? data : rm->data, databuf, sizeof databuf);
    dd_dataset *ds = NULL;
    dd_cf32 *u = NULL;
    double t0 = dd_now();
    dd_status st = dd_dataset_load(data, &ds);
    if (st != DD_OK) return dd_cli_fail(name, st);
    const size_t n = ds->n[DD_SPLIT_TEST];
    const dd_cf32 *x = ds->in[DD_SPLIT_TEST];
    if (n == 0) {
        st = dd_error(DD_ERR_ARG, "%s: the test split is empty: nothing for --dpd-out", data);
        goto fail;
    }
    u = dd_calloc(n, sizeof *u);
    if (!u) {
        st = dd_error(DD_ERR_NOMEM, "out of memory for %zu samples", n);
        goto fail;
    }
    /* as OpenDPD's run_dpd: the whole test split as one sequence from a zero state */
    if ((st = dd_model_run_stream(rm->model, rm->params, x, u, n)) != DD_OK) goto fail;
    const dd_cf32 *cols[2] = {x, u};
    if ((st = dd_csv_write_columns(path, "I,Q,I_dpd,Q_dpd", cols, 2, n)) != DD_OK) goto fail;
    if (verbosity >= 0) {
        printf("%s: the test split of %s (%zu samples) and its predistorted version as I,Q,I_dpd,Q_dpd (OpenDPD "
               "run_dpd), DPD %s of epoch %d, %.3f s\n",
               path, data, n, dd_model_name(rm->model), rm->epoch, dd_now() - t0);
        if (dd_cli_dpd_baseline(stdout, rm, &ds->spec, x, u, n) != DD_OK)
            printf("baseline not measured: %s\n", dd_last_error());
    }
    dd_free(u);
    dd_dataset_free(&ds);
    return DD_EXIT_OK;
fail:
    dd_free(u);
    dd_dataset_free(&ds);
    return dd_cli_fail(name, st);
}
