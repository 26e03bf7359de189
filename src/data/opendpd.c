/* OpenDPD dataset directories: spec.json plus either {train,val,test}_{input,output}.csv
 * ("split_csv", header I,Q) or one data.csv ("single_csv", header I_in,Q_in,I_out,Q_out,
 * split in time order by split_ratios: n_train = floor(n r0), n_val = floor(n r1), the
 * rest test). Loading and saving; saves write every file as NAME.tmp and rename them
 * into place only once all are complete. */
#include <math.h>
#include <string.h>

#include "data_internal.h"

static dd_status load_split(const char *dir, dd_dataset *ds) {
    for (int s = 0; s < DD_SPLIT_COUNT; s++) {
        const char *nm = dd_split_name((dd_split)s);
        char fin[64], fout[64], pin[DD_PATH_MAX], pout[DD_PATH_MAX];
        snprintf(fin, sizeof fin, "%s_input.csv", nm);
        snprintf(fout, sizeof fout, "%s_output.csv", nm);
        DD_TRY(dd_path_join(pin, sizeof pin, dir, fin));
        DD_TRY(dd_path_join(pout, sizeof pout, dir, fout));
        size_t ni, no;
        DD_TRY(dd_csv_read_iq(pin, &ds->priv->buf[2 * s], &ni));
        DD_TRY(dd_csv_read_iq(pout, &ds->priv->buf[2 * s + 1], &no));
        if (ni != no)
            return dd_error(DD_ERR_MISMATCH, "%s: %s has %zu samples but %s has %zu", dir, fin, ni,
                            fout, no);
        ds->n[s] = ni;
        ds->in[s] = ds->priv->buf[2 * s];
        ds->out[s] = ds->priv->buf[2 * s + 1];
    }
    return DD_OK;
}

static dd_status load_single(const char *dir, dd_dataset *ds) {
    static const char *const names[4] = {"I_in", "Q_in", "I_out", "Q_out"};
    char path[DD_PATH_MAX];
    DD_TRY(dd_path_join(path, sizeof path, dir, "data.csv"));
    float *v;
    size_t n;
    DD_TRY(dd_csv_parse(path, names, 4, &v, &n));
    dd_cf32 *xi = dd_calloc(n ? n : 1, sizeof *xi), *xo = dd_calloc(n ? n : 1, sizeof *xo);
    if (!xi || !xo) {
        dd_free(xi);
        dd_free(xo);
        dd_free(v);
        return DD_ERR_NOMEM;
    }
    float *fi = (float *)(void *)xi, *fo = (float *)(void *)xo;
    for (size_t i = 0; i < n; i++) {
        fi[2 * i] = v[4 * i];
        fi[2 * i + 1] = v[4 * i + 1];
        fo[2 * i] = v[4 * i + 2];
        fo[2 * i + 1] = v[4 * i + 3];
    }
    dd_free(v);
    ds->priv->buf[0] = xi;
    ds->priv->buf[1] = xo;
    size_t cnt[3], at = 0;
    dd_split_counts(n, ds->spec.split, cnt);
    for (int s = 0; s < 3; s++) {
        ds->n[s] = cnt[s];
        ds->in[s] = xi + at;
        ds->out[s] = xo + at;
        at += cnt[s];
    }
    return DD_OK;
}

dd_status dd_opendpd_load(const char *dir, const dd_spec *spec, const char *format,
                          dd_dataset *ds) {
    ds->spec = *spec;
    if (strcmp(format, "single_csv") == 0) {
        DD_TRY(load_single(dir, ds));
    } else if (strcmp(format, "split_csv") == 0) {
        DD_TRY(load_split(dir, ds));
    } else {
        return dd_error(DD_ERR_UNSUPPORTED, "%s: unknown dataset_format '%s'", dir, format);
    }
    snprintf(ds->format, sizeof ds->format, "%s", format);
    return DD_OK;
}

/* Checks that the dataset's arrays are present. */
static dd_status check_ds(const dd_dataset *ds, const char *where) {
    for (int s = 0; s < 3; s++)
        if (ds->n[s] && (!ds->in[s] || !ds->out[s]))
            return dd_error(DD_ERR_ARG, "%s: split '%s' has %zu samples but NULL arrays", where,
                            dd_split_name((dd_split)s), ds->n[s]);
    return dd_spec_check(&ds->spec, where);
}

dd_status dd_dataset_save_opendpd(const dd_dataset *ds, const char *dir) {
    if (!ds || !dir) return dd_error(DD_ERR_ARG, "dd_dataset_save_opendpd: NULL argument");
    DD_TRY(check_ds(ds, dir));
    DD_TRY(dd_mkdir_p(dir));
    dd_afile f[7];
    int nopen = 0;
    dd_status st = DD_OK;
    char path[DD_PATH_MAX];
    for (int s = 0; s < 3 && st == DD_OK; s++) {
        for (int k = 0; k < 2 && st == DD_OK; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s_%s.csv", dd_split_name((dd_split)s), k ? "output" : "input");
            if ((st = dd_path_join(path, sizeof path, dir, name)) != DD_OK) break;
            if ((st = dd_afile_open(&f[nopen], path)) != DD_OK) break;
            nopen++;
            const dd_cf32 *col[1] = {k ? ds->out[s] : ds->in[s]};
            if ((st = dd_csv_write_cols(&f[nopen - 1], "I,Q", col, 1, ds->n[s])) != DD_OK) break;
            st = dd_afile_close(&f[nopen - 1]);
        }
    }
    if (st == DD_OK) {
        /* spec.json last: written through its own atomic path, after all CSVs exist. */
        for (int i = 0; i < nopen && st == DD_OK; i++) st = dd_afile_rename(&f[i]);
        if (st == DD_OK && (st = dd_path_join(path, sizeof path, dir, "spec.json")) == DD_OK)
            st = dd_spec_write_json(path, &ds->spec, "split_csv");
        if (st == DD_OK) dd_fsync_parent(path);
    }
    for (int i = 0; i < nopen; i++) dd_afile_abort(&f[i]);
    return st;
}

dd_status dd_spec_ratios_for_counts(dd_spec *spec, const size_t n[3], const char *where) {
    size_t total = n[0] + n[1] + n[2], cnt[3];
    dd_split_counts(total, spec->split, cnt);
    if (total > 0 && (cnt[0] != n[0] || cnt[1] != n[1])) {
        for (int s = 0; s < 3; s++) spec->split[s] = (double)n[s] / (double)total;
        dd_split_counts(total, spec->split, cnt);
        if (cnt[0] != n[0] || cnt[1] != n[1])
            return dd_error(DD_ERR_INTERNAL, "%s: split counts not representable as ratios", where);
    }
    return DD_OK;
}

dd_status dd_dataset_save_opendpd_single(const dd_dataset *ds, const char *dir) {
    if (!ds || !dir) return dd_error(DD_ERR_ARG, "dd_dataset_save_opendpd_single: NULL argument");
    DD_TRY(check_ds(ds, dir));
    DD_TRY(dd_mkdir_p(dir));
    dd_spec spec = ds->spec;
    DD_TRY(dd_spec_ratios_for_counts(&spec, ds->n, dir));
    char path[DD_PATH_MAX];
    DD_TRY(dd_path_join(path, sizeof path, dir, "data.csv"));
    dd_afile a;
    DD_TRY(dd_afile_open(&a, path));
    dd_status st = DD_OK;
    dd_cloc loc;
    dd_cloc_push(&loc);
    if (fprintf(a.f, "I_in,Q_in,I_out,Q_out\n") < 0) st = dd_afile_werr(&a);
    for (int s = 0; s < 3 && st == DD_OK; s++) {
        const dd_cf32 *col[2] = {ds->in[s], ds->out[s]};
        for (size_t i = 0; i < ds->n[s] && st == DD_OK; i++) {
            const float *a0 = (const float *)(const void *)(col[0] + i);
            const float *a1 = (const float *)(const void *)(col[1] + i);
            if (!isfinite(a0[0]) || !isfinite(a0[1]) || !isfinite(a1[0]) || !isfinite(a1[1]))
                st = dd_error(DD_ERR_RANGE, "%s: split '%s' sample %zu is NaN/Inf; refusing to write it",
                              path, dd_split_name((dd_split)s), i);
            else if (fprintf(a.f, "%.9g,%.9g,%.9g,%.9g\n", (double)a0[0], (double)a0[1],
                             (double)a1[0], (double)a1[1]) < 0)
                st = dd_afile_werr(&a);
        }
    }
    dd_cloc_pop(&loc);
    if (st == DD_OK) st = dd_afile_close(&a);
    if (st == DD_OK) st = dd_afile_rename(&a);
    if (st == DD_OK && (st = dd_path_join(path, sizeof path, dir, "spec.json")) == DD_OK)
        st = dd_spec_write_json(path, &spec, "single_csv");
    dd_afile_abort(&a);
    return st;
}
