/* libFuzzer target: the checkpoint reader (dd_ckpt_open: header, table, section bounds
 * and CRCs) and, on a file it accepts, the readers built on it: every section fetched,
 * and dd_run_model_load (trainer version, config, data, spec, model and PA model). */
#include "distdpd/ckpt.h"
#include "distdpd/train.h"
#include "fuzz_util.h"

static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    const char *p = dd_fuzz_file("x.ckpt", data, size);
    dd_ckpt_reader *r = NULL;
    if (dd_ckpt_open(p, &r) == DD_OK) {
        size_t n = dd_ckpt_count(r);
        for (size_t i = 0; i < n; i++) {
            const char *name = dd_ckpt_section_name(r, i);
            if (!name || !dd_ckpt_has(r, name)) abort();
            const void *d;
            size_t bytes;
            if (dd_ckpt_get(r, name, &d, &bytes) != DD_OK) abort();
            uint8_t s = 0;
            for (size_t k = 0; k < bytes; k++) s ^= ((const uint8_t *)d)[k];
            sink = s;
            uint64_t u;
            double f;
            const char *str;
            (void)dd_ckpt_get_u64(r, name, &u);
            (void)dd_ckpt_get_f64(r, name, &f);
            if (dd_ckpt_get_str(r, name, &str) == DD_OK && strlen(str) > bytes) abort();
        }
        dd_ckpt_close(&r);
        dd_run_model m;
        if (dd_run_model_load(p, NULL, &m) == DD_OK) dd_run_model_free(&m);
    } else if (r != NULL) {
        abort();
    }
    dd_error_clear();
    return 0;
}
