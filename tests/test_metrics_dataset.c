/* Metrics on the real OpenDPD DPA_200MHz measurement (test split): ACLR of the PA output
 * (both definitions), the integer lag and the gain-only linear fit y ~ g x with its NMSE
 * (segmented and pooled) and spectral EVM, compared with the values that
 * tools/make_metric_refs.py computed with numpy/scipy ("dataset" in
 * tests/data/metrics_ref.json) and with the levels quoted in docs (ACLR about -34/-32 dBc
 * 3GPP-style, gain-only fit about -20 dB). Skips when the data set is absent. */
#include "metrics_test_util.h"

#include <sys/stat.h>

static void near_db(double got, double want, double tol, const char *what) {
    CHECK(fabs(got - want) <= tol, "%s: got %.8f want %.8f (diff %.3g)", what, got, want,
          fabs(got - want));
}

static void check_aclr(const cJSON *o, const dd_aclr_result *r, const char *what) {
    char b[64];
    snprintf(b, sizeof b, "%s left", what);
    near_db(r->left_db, mt_num(o, "left_db"), 1e-6, b);
    snprintf(b, sizeof b, "%s right", what);
    near_db(r->right_db, mt_num(o, "right_db"), 1e-6, b);
    snprintf(b, sizeof b, "%s avg", what);
    near_db(r->avg_db, mt_num(o, "avg_db"), 1e-6, b);
}

int main(void) {
    char dir[1024], pin[1100], pout[1100];
    snprintf(dir, sizeof dir, "%s/../shared/data/opendpd/DPA_200MHz", dd_test_srcdir());
    snprintf(pin, sizeof pin, "%s/test_input.csv", dir);
    snprintf(pout, sizeof pout, "%s/test_output.csv", dir);
    struct stat st;
    if (stat(pin, &st) != 0 || stat(pout, &st) != 0) {
        char why[1200];
        snprintf(why, sizeof why, "OpenDPD data set not found at %s", dir);
        dd_test_skip(why);
    }
    cJSON *j = mt_load_json(mt_src_path("tests/data/metrics_ref.json"));
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(j, "dataset");
    if (!cJSON_IsObject(ds)) {
        cJSON_Delete(j);
        dd_test_skip("tests/data/metrics_ref.json has no 'dataset' entry (generated without "
                     "the data set)");
    }
    size_t nx, ny;
    dd_cf32 *x = mt_read_iq_csv(pin, &nx), *y = mt_read_iq_csv(pout, &ny);
    REQUIRE(nx == ny && nx == (size_t)mt_num(ds, "n") && nx > 0, "lengths %zu %zu", nx, ny);
    size_t n = nx < ny ? nx : ny;
    dd_spec sp;
    dd_spec_default(&sp); /* DPA_200MHz spec.json: 800 MHz, 200 MHz = 10 x 20, nperseg 2560 */
    dd_aclr_result r;
    CHECK_OK(dd_aclr(y, n, &sp, DD_ACLR_OPENDPD, &r));
    check_aclr(cJSON_GetObjectItemCaseSensitive(ds, "aclr_opendpd"), &r, "aclr_opendpd");
    printf("DPA_200MHz test_output ACLR (OpenDPD): L %.3f R %.3f avg %.3f dBc\n", r.left_db,
           r.right_db, r.avg_db);
    CHECK_OK(dd_aclr(y, n, &sp, DD_ACLR_3GPP, &r));
    check_aclr(cJSON_GetObjectItemCaseSensitive(ds, "aclr_3gpp"), &r, "aclr_3gpp");
    printf("DPA_200MHz test_output ACLR (3GPP-style): L %.3f R %.3f avg %.3f dBc\n", r.left_db,
           r.right_db, r.avg_db);
    near_db(r.left_db, -34, 1.0, "3GPP ACLR left vs the documented -34 dBc");
    near_db(r.right_db, -32, 1.0, "3GPP ACLR right vs the documented -32 dBc");

    int lag = 99;
    dd_cf64 g = 0;
    CHECK_OK(dd_align(x, y, n, 32, &lag, &g));
    CHECK(lag == (int)mt_num(ds, "lag"), "lag %d", lag);
    CHECK(cabs(g - (mt_num(ds, "gain_re") + I * mt_num(ds, "gain_im"))) < 1e-9 * cabs(g),
          "gain %.12g%+.12gi", creal(g), cimag(g));
    dd_cf32 *gx = malloc(n * sizeof *gx);
    for (size_t i = 0; i < n; i++) gx[i] = (dd_cf32)(g * x[i]);
    double v;
    CHECK_OK(dd_nmse_segmented_db(y, gx, n, sp.nperseg, &v));
    near_db(v, mt_num(ds, "nmse_gain_segmented_db"), 1e-5, "gain-only NMSE segmented");
    printf("DPA_200MHz gain-only fit: lag %d, g = %.6f%+.3gi, NMSE segmented %.3f dB", lag,
           creal(g), cimag(g), v);
    near_db(v, -19.9, 0.5, "gain-only NMSE vs the documented -19.9 dB");
    CHECK_OK(dd_nmse_db(y, gx, n, &v));
    near_db(v, mt_num(ds, "nmse_gain_pooled_db"), 1e-5, "gain-only NMSE pooled");
    printf(", pooled %.3f dB", v);
    CHECK_OK(dd_evm_spectral_db(y, gx, n, &sp, &v));
    near_db(v, mt_num(ds, "evm_gain_db"), 1e-5, "gain-only spectral EVM");
    printf(", spectral EVM %.3f dB\n", v);
    free(gx);
    free(x);
    free(y);
    cJSON_Delete(j);
    return dd_test_done("test_metrics_dataset");
}
