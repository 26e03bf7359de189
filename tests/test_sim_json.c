/* The refusals of a simulated data set's pa.json (dd_sim_pa_load, src/train/sim_json.c),
 * the error paths `make coverage` showed untested: each bad file is refused with the
 * exact message naming file and field, *pa stays NULL, and the valid file next to it
 * still loads (nothing is lost). Non-finite numbers (cJSON reads 1e999 as inf) and
 * integers out of range used to reach casts to int (undefined behaviour) and dd_pa_create. */
#include "distdpd/pa.h"
#include "distdpd/train.h"
#include "dd_test.h"

#define CAL "\"calib\": {\"calibrated\": 1, \"in_gain\": 1, \"p0\": 1, \"out_power\": 1, \"noise_var\": 0}"

int main(void) {
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
