/* Metrics against independent reference values: tests/data/metrics_ref.json, made by
 * tools/make_metric_refs.py with numpy and scipy.signal.welch following OpenDPD's
 * utils/metrics.py (segmented NMSE, ACLR, spectral EVM), plus pooled NMSE, the 3GPP-style
 * ACLR and Welch / segmented PSD values at a few bins. Prints the worst agreement. */
#include "metrics_test_util.h"
#include "dsp/psd_internal.h"

static double worst_db = 0, worst_rel = 0;

static void near_db(double got, double want, const char *what, const char *cname) {
    double d = fabs(got - want);
    if (d > worst_db) worst_db = d;
    CHECK(d <= 1e-8, "%s %s: got %.10f want %.10f (diff %.3g dB)", cname, what, got, want, d);
}

static void near_rel(double got, double want, const char *what, const char *cname) {
    double d = fabs(got - want) / fabs(want);
    if (d > worst_rel) worst_rel = d;
    CHECK(d <= 1e-9, "%s %s: got %.12g want %.12g (rel %.3g)", cname, what, got, want, d);
}

static void check_aclr(const cJSON *o, const dd_aclr_result *r, const char *what,
                       const char *cname) {
    char buf[96];
    snprintf(buf, sizeof buf, "%s left", what);
    near_db(r->left_db, mt_num(o, "left_db"), buf, cname);
    snprintf(buf, sizeof buf, "%s right", what);
    near_db(r->right_db, mt_num(o, "right_db"), buf, cname);
    snprintf(buf, sizeof buf, "%s avg", what);
    near_db(r->avg_db, mt_num(o, "avg_db"), buf, cname);
}

static void check_psd(const cJSON *c, const char *key, const double *psd, const char *cname) {
    const cJSON *bins = cJSON_GetObjectItemCaseSensitive(c, "psd_bins");
    const cJSON *vals = cJSON_GetObjectItemCaseSensitive(c, key);
    CHECK(cJSON_IsArray(bins) && cJSON_IsArray(vals) &&
              cJSON_GetArraySize(bins) == cJSON_GetArraySize(vals) && cJSON_GetArraySize(bins) > 0,
          "%s: %s missing", cname, key);
    for (int i = 0; i < cJSON_GetArraySize(bins); i++) {
        int b = cJSON_GetArrayItem(bins, i)->valueint;
        char what[96];
        snprintf(what, sizeof what, "%s[bin %d]", key, b);
        near_rel(psd[b], cJSON_GetArrayItem(vals, i)->valuedouble, what, cname);
    }
}

static void spec_from_json(const cJSON *js, dd_spec *sp) {
    dd_spec_default(sp);
    sp->fs = mt_num(js, "fs");
    sp->bw_main = mt_num(js, "bw_main");
    sp->n_sub = (int)mt_num(js, "n_sub");
    sp->nperseg = (size_t)mt_num(js, "nperseg");
    sp->bw_occupied = mt_num(js, "bw_occupied");
    sp->bw_sub = sp->bw_main / sp->n_sub;
}

static void run_case(const cJSON *c) {
    const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
    dd_spec sp;
    spec_from_json(cJSON_GetObjectItemCaseSensitive(c, "spec"), &sp);
    size_t nr, nt;
    dd_cf32 *ref = mt_read_iq_csv(mt_src_path(cJSON_GetObjectItemCaseSensitive(c, "ref_csv")->valuestring), &nr);
    dd_cf32 *tst = mt_read_iq_csv(mt_src_path(cJSON_GetObjectItemCaseSensitive(c, "test_csv")->valuestring), &nt);
    size_t n = (size_t)mt_num(c, "n");
    CHECK(nr == n && nt == n, "%s: %zu / %zu samples, want %zu", name, nr, nt, n);
    CHECK(n % sp.nperseg != 0, "%s: length must exercise padding", name);

    double v;
    CHECK_OK(dd_nmse_segmented_db(ref, tst, n, sp.nperseg, &v));
    near_db(v, mt_num(c, "nmse_segmented_db"), "nmse_segmented", name);
    CHECK_OK(dd_nmse_db(ref, tst, n, &v));
    near_db(v, mt_num(c, "nmse_pooled_db"), "nmse_pooled", name);
    CHECK_OK(dd_evm_spectral_db(ref, tst, n, &sp, &v));
    near_db(v, mt_num(c, "evm_spectral_db"), "evm_spectral", name);

    const cJSON *ao = cJSON_GetObjectItemCaseSensitive(c, "aclr_opendpd");
    dd_aclr_result r;
    CHECK_OK(dd_aclr(tst, n, &sp, DD_ACLR_OPENDPD, &r));
    check_aclr(ao, &r, "aclr_opendpd", name);
    dd_band_layout lay;
    CHECK_OK(dd_opendpd_layout(&sp, sp.nperseg, 1, "test", &lay));
    CHECK(lay.left == (size_t)mt_num(ao, "index_left") &&
              lay.right == (size_t)mt_num(ao, "index_right") &&
              lay.sub_len == (size_t)mt_num(ao, "sub_len"),
          "%s: layout %zu %zu %zu", name, lay.left, lay.right, lay.sub_len);
    CHECK_OK(dd_aclr(tst, n, &sp, DD_ACLR_3GPP, &r));
    check_aclr(cJSON_GetObjectItemCaseSensitive(c, "aclr_3gpp"), &r, "aclr_3gpp", name);

    dd_metric_set ms;
    CHECK_OK(dd_metrics_compute(ref, tst, n, &sp, DD_ACLR_OPENDPD, 0, &ms));
    near_db(ms.nmse_db, mt_num(c, "nmse_segmented_db"), "set.nmse", name);
    near_db(ms.evm_db, mt_num(c, "evm_spectral_db"), "set.evm", name);
    check_aclr(ao, &ms.aclr, "set.aclr", name);
    CHECK_OK(dd_metrics_compute(ref, tst, n, &sp, DD_ACLR_3GPP, 1, &ms));
    near_db(ms.nmse_db, mt_num(c, "nmse_pooled_db"), "set.nmse_pooled", name);
    check_aclr(cJSON_GetObjectItemCaseSensitive(c, "aclr_3gpp"), &ms.aclr, "set.aclr3gpp", name);

    double *psd = calloc(sp.nperseg, sizeof *psd);
    CHECK_OK(dd_welch(tst, n, sp.fs, sp.nperseg, DD_PSD_DENSITY, 1, psd, NULL));
    check_psd(c, "welch_density_detrend", psd, name);
    CHECK_OK(dd_welch(tst, n, sp.fs, sp.nperseg, DD_PSD_DENSITY, 0, psd, NULL));
    check_psd(c, "welch_density_nodetrend", psd, name);
    CHECK_OK(dd_psd_segmented(tst, n, sp.fs, sp.nperseg, DD_PSD_SPECTRUM, psd, NULL));
    check_psd(c, "psd_segmented_spectrum", psd, name);
    CHECK_OK(dd_psd_segmented(tst, n, sp.fs, sp.nperseg, DD_PSD_DENSITY, psd, NULL));
    check_psd(c, "psd_segmented_density", psd, name);
    free(psd);
    free(ref);
    free(tst);
}

int main(void) {
    cJSON *j = mt_load_json(mt_src_path("tests/data/metrics_ref.json"));
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(j, "cases");
    CHECK(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) >= 2, "reference cases missing");
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) run_case(c);
    printf("worst agreement with numpy/scipy: %.3g dB on dB metrics, %.3g relative on PSD "
           "values\n",
           worst_db, worst_rel);
    cJSON_Delete(j);
    return dd_test_done("test_metrics_ref");
}
