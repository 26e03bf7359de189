/* libFuzzer target: the training configuration JSON (config.json of a run directory,
 * the "config" section of checkpoints, the coordinator's WELCOME): dd_train_cfg_from_json.
 * Invariant: an accepted configuration passes dd_train_cfg_check and round-trips
 * exactly (to_json, from_json, to_json gives the same text). */
#include "distdpd/train.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    char *s = dd_fuzz_str(data, size);
    dd_train_cfg c, c2;
    dd_train_cfg_default(&c, DD_TRAIN_PA);
    if (dd_train_cfg_from_json(s, "config.json", &c) == DD_OK) {
        char *j1 = NULL, *j2 = NULL;
        if (dd_train_cfg_to_json(&c, &j1) != DD_OK) abort();
        dd_train_cfg_default(&c2, DD_TRAIN_PA);
        if (dd_train_cfg_from_json(j1, "round trip", &c2) != DD_OK) abort();
        if (dd_train_cfg_to_json(&c2, &j2) != DD_OK) abort();
        if (strcmp(j1, j2) != 0) abort();
        dd_free(j1);
        dd_free(j2);
    }
    free(s);
    dd_error_clear();
    return 0;
}
