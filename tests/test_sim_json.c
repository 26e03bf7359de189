/* The refusals of a simulated data set's pa.json (dd_sim_pa_load, src/train/sim_json.c),
 * the error paths `make coverage` showed untested: each bad file is refused with the
 * exact message naming file and field, *pa stays NULL, and the valid file next to it
 * still loads (nothing is lost). Non-finite numbers (cJSON reads 1e999 as inf) and
 * integers out of range used to reach casts to int (undefined behaviour) and dd_pa_create.
 * The fallback to `distdpd simulate`'s simulation.json (a data set directory without
 * pa.json): the PA rebuilt from it reproduces the data set's output (made by the real PA,
 * calibrated on the same input) to float precision; each bad file is refused naming the
 * file and the field; a directory with neither file is "not found", and a directory path
 * too long for the file names is refused with the reason first. */
#include <complex.h>

#include "distdpd/pa.h"
#include "distdpd/train.h"
#include "dd_test.h"
#include "test_train_util.h"

#define CAL "\"calib\": {\"calibrated\": 1, \"in_gain\": 1, \"p0\": 1, \"out_power\": 1, \"noise_var\": 0}"

/* The fallback to simulation.json ("pa": model, drive_db, in_gain, out_power). */
static void test_simulation_json(void) {
    const char *dir = dd_test_tmpdir();
    char sim[700];
    snprintf(sim, sizeof sim, "%s/simulation.json", dir);
    const size_t n[3] = {3000, 500, 500};
    dd_pa *truth = NULL;
    dd_dataset *ds = tt_make_data(n, "saleh", NULL, 0.0, 0.5, -3.0, 11, &truth);
    REQUIRE(ds && truth, "data set: %s", dd_last_error());
    dd_pa_calib cal;
    dd_pa_get_calib(truth, &cal);
    char txt[600];
    snprintf(txt, sizeof txt,
             "{\"pa\": {\"model\": \"saleh\", \"drive_db\": -3, \"snr_db\": null, \"in_gain\": %.17g, "
             "\"out_power\": %.17g, \"noise_var\": 0}}",
             cal.in_gain, cal.out_power);
    dd_test_write(sim, txt);

    /* the rebuilt PA on the recorded input gives the recorded output */
    int found = 0;
    dd_pa *pa = NULL;
    CHECK_OK(dd_sim_pa_load(dir, ds, &pa, &found));
    REQUIRE(pa != NULL && found == 1, "simulation.json found (%d)", found);
    size_t N = n[0] + n[1] + n[2], k = 0;
    dd_cf32 *x = dd_calloc(N, sizeof *x), *y = dd_calloc(N, sizeof *y), *ref = dd_calloc(N, sizeof *ref);
    REQUIRE(x && y && ref, "out of memory");
    for (int s = 0; s < DD_SPLIT_COUNT; s++)
        for (size_t i = 0; i < ds->n[s]; i++, k++) {
            x[k] = ds->in[s][i];
            ref[k] = ds->out[s][i];
        }
    CHECK_OK(dd_pa_apply(pa, x, y, N));
    double err = 0, pw = 0;
    for (size_t i = 0; i < N; i++) {
        err += (double)cabsf(y[i] - ref[i]) * cabsf(y[i] - ref[i]);
        pw += (double)cabsf(ref[i]) * cabsf(ref[i]);
    }
    CHECK(pw > 0 && err / pw < 1e-10, "rebuilt PA vs the data set's output: relative error %.3g", pw > 0 ? err / pw : -1);
    dd_pa_calib back;
    dd_pa_get_calib(pa, &back);
    CHECK(back.calibrated && back.noise_var == 0 && fabs(back.p0 / cal.p0 - 1) < 1e-9,
          "calibration: p0 %.17g, the true PA's %.17g", back.p0, cal.p0);
    dd_pa_destroy(&pa);
    dd_free(x);
    dd_free(y);
    dd_free(ref);

    /* the data set is needed */
    pa = (dd_pa *)&pa;
    CHECK_ERR(dd_sim_pa_load(dir, NULL, &pa, &found), DD_ERR_ARG,
              "simulation.json: the data set is needed to rebuild the PA");
    CHECK(pa == NULL, "refused: *pa is NULL");

    static const struct {
        const char *json, *msg;
        dd_status st;
    } cases[] = {
        {"{\"pa\": {\"model\": ", "simulation.json: invalid JSON", DD_ERR_FORMAT},
        {"{\"pa\": {\"drive_db\": 0}}", "simulation.json: missing 'pa.model'", DD_ERR_FORMAT},
        {"{\"pa\": {\"model\": 3}}", "simulation.json: missing 'pa.model'", DD_ERR_FORMAT},
        {"{\"pa\": {\"model\": \"nosuch\", \"drive_db\": 0, \"in_gain\": 1, \"out_power\": 1}}",
         "simulation.json: pa: unknown model 'nosuch' (valid: ", DD_ERR_ARG},
        {"{\"pa\": {\"model\": \"saleh\", \"in_gain\": 1, \"out_power\": 1}}",
         "simulation.json: missing field 'drive_db'", DD_ERR_FORMAT},
        {"{\"pa\": {\"model\": \"saleh\", \"drive_db\": 0, \"in_gain\": 1e999, \"out_power\": 1}}",
         "simulation.json: field 'in_gain' is not a finite number", DD_ERR_FORMAT},
        {"{\"pa\": {\"model\": \"saleh\", \"drive_db\": 0, \"in_gain\": 1, \"out_power\": \"1\"}}",
         "simulation.json: field 'out_power' is not a number", DD_ERR_FORMAT},
        {"{\"pa\": {\"model\": \"saleh\", \"drive_db\": 99, \"in_gain\": 1, \"out_power\": 1}}",
         "simulation.json: pa 'saleh': drive_db = 99 is out of range", DD_ERR_ARG},
        {"{\"pa\": {\"model\": \"saleh\", \"drive_db\": 0, \"in_gain\": null, \"out_power\": 1}}",
         "simulation.json: dd_pa_set_calib: in_gain = 0 must be > 0", DD_ERR_ARG},
        {"{\"pa\": {\"model\": \"saleh\", \"drive_db\": 0, \"in_gain\": 1, \"out_power\": -1}}",
         "simulation.json: dd_pa_set_calib: out_power = -1 must be >= 0", DD_ERR_ARG},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        dd_test_write(sim, cases[c].json);
        pa = (dd_pa *)&pa;
        found = -1;
        dd_status st = dd_sim_pa_load(dir, ds, &pa, &found);
        CHECK(st == cases[c].st && strstr(dd_last_error(), cases[c].msg) != NULL,
              "case %zu: %s '%s', want %s '%s'", c, dd_status_str(st), dd_last_error(), dd_status_str(cases[c].st),
              cases[c].msg);
        CHECK(pa == NULL && found == 0, "case %zu: refused, nothing returned (found %d)", c, found);
        if (st == DD_OK) dd_pa_destroy(&pa);
    }

    /* neither file: not found, not an error */
    REQUIRE(unlink(sim) == 0, "unlink %s", sim);
    pa = (dd_pa *)&pa;
    CHECK_OK(dd_sim_pa_load(dir, ds, &pa, &found));
    CHECK(pa == NULL && found == 0, "no file: found %d", found);

    /* a directory path too long for DIR/pa.json: the reason first (the path would fill
     * the message and cut it off) */
    static char longdir[4200];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = '\0';
    CHECK_ERR(dd_sim_pa_load(longdir, ds, &pa, &found), DD_ERR_ARG, "path too long: /ddd");
    dd_pa_destroy(&truth);
    dd_dataset_free(&ds);
}

int main(void) {
    test_simulation_json();
    const char *dir = dd_test_tmpdir();
    char good[600], bad[600];
    snprintf(good, sizeof good, "%s/pa_good.json", dir);
    snprintf(bad, sizeof bad, "%s/pa_bad.json", dir);
    dd_pa_params p;
    dd_pa *pa = NULL, *back = NULL;
    CHECK_OK(dd_pa_params_default("saleh", &p));
    p.fs = 100e6;
    CHECK_OK(dd_pa_create("saleh", &p, &pa));
    CHECK_OK(dd_sim_pa_save(pa, good));
    dd_pa_destroy(&pa);

    static const struct {
        const char *json, *msg;
    } cases[] = {
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {}", "pa_bad.json: invalid JSON"},
        {"{\"model\": \"saleh\", \"params\": {}, " CAL "}", "pa_bad.json: missing field 'format'"},
        {"{\"format\": 2, \"model\": \"saleh\", \"params\": {}, " CAL "}", "pa_bad.json: format 2, this build reads format 1"},
        {"{\"format\": 1, \"params\": {}, " CAL "}", "pa_bad.json: needs 'model' (string), 'params' and 'calib' (objects)"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"saleh\": [1, 2]}, " CAL "}",
         "pa_bad.json: field 'saleh' is not an array of 4 numbers"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"rapp\": [1, 2, \"x\", 4, 5]}, " CAL "}",
         "pa_bad.json: field 'rapp'[2] is not a finite number"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"fs\": 1e999}, " CAL "}",
         "pa_bad.json: field 'fs' is not a finite number"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"nl\": 1e999}, " CAL "}",
         "pa_bad.json: field 'nl' is not a finite number"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"nl\": 3e9}, " CAL "}",
         "pa_bad.json: field 'nl' is not an integer"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"cross_lag\": 2.5}, " CAL "}",
         "pa_bad.json: field 'cross_lag' is not an integer"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"cross_coef\": [1]}, " CAL "}",
         "pa_bad.json: field 'cross_coef'[0] is not a [re, im] pair"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"fir_in\": [[1, 0], [1e999, 0]]}, " CAL "}",
         "pa_bad.json: field 'fir_in'[1] is not a [re, im] pair"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {\"fir_out\": [[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],"
         "[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0]]}, " CAL "}",
         "pa_bad.json: field 'fir_out' is not an array of at most 16 [re, im] pairs"},
        {"{\"format\": 1, \"model\": \"gmp\", \"params\": {\"gmp\": {\"coef\": []}}, " CAL "}",
         "pa_bad.json: missing field 'gmp.shape'"},
        {"{\"format\": 1, \"model\": \"gmp\", \"params\": {\"gmp\": {\"shape\": [1, 1, 1, 1, 1, 1, 1, 1e999, 1]}}, " CAL "}",
         "pa_bad.json: field 'shape'[7] is not a finite number"},
        {"{\"format\": 1, \"model\": \"gmp\", \"params\": {\"gmp\": {\"shape\": [1, 1, 1, 1, 1, 1, 1, 3e9, 1]}}, " CAL "}",
         "pa_bad.json: field 'gmp.shape'[7] is not an integer in [-1e6, 1e6]"},
        {"{\"format\": 1, \"model\": \"saleh\", \"params\": {}, \"calib\": {\"calibrated\": 1, \"p0\": 1}}",
         "pa_bad.json: missing field 'in_gain'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        dd_test_write(bad, cases[k].json);
        int found = 0;
        dd_pa *none = (dd_pa *)&none;
        dd_status st = dd_sim_pa_load(bad, NULL, &none, &found);
        CHECK(st == DD_ERR_FORMAT, "case %zu: status %s: %s", k, dd_status_str(st), dd_last_error());
        CHECK(strstr(dd_last_error(), cases[k].msg) != NULL, "case %zu: message '%s' lacks '%s'", k, dd_last_error(),
              cases[k].msg);
        if (st == DD_OK) dd_pa_destroy(&none);
    }
    int found = 0;
    CHECK_OK(dd_sim_pa_load(good, NULL, &back, &found)); /* the valid file still loads */
    CHECK(found == 1 && back != NULL, "valid pa.json loads");
    dd_pa_destroy(&back);
    return dd_test_done("test_sim_json");
}
