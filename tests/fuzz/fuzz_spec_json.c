/* libFuzzer target: spec.json (dd_spec_read_json). Invariant: an accepted spec passes
 * dd_spec_check and survives a write/read round trip unchanged. */
#include "distdpd/dataset.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    const char *p = dd_fuzz_file("spec.json", data, size);
    dd_spec s, s2;
    char fmt[32], fmt2[32];
    if (dd_spec_read_json(p, &s, fmt, sizeof fmt) == DD_OK) {
        if (dd_spec_check(&s, p) != DD_OK) abort();
        const char *q = dd_fuzz_path("spec2.json");
        if (dd_spec_write_json(q, &s, fmt) != DD_OK) abort();
        if (dd_spec_read_json(q, &s2, fmt2, sizeof fmt2) != DD_OK) abort();
        if (s.fs != s2.fs || s.bw_main != s2.bw_main || s.bw_sub != s2.bw_sub || s.n_sub != s2.n_sub ||
            s.nperseg != s2.nperseg || s.bw_occupied != s2.bw_occupied || s.split[0] != s2.split[0] ||
            s.split[1] != s2.split[1] || s.split[2] != s2.split[2] || strcmp(fmt, fmt2) != 0)
            abort();
    }
    dd_error_clear();
    return 0;
}
