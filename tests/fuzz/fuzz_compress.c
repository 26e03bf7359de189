/* libFuzzer target: the --compress spec parser (dd_compress_parse). Invariant: an
 * accepted spec prints (dd_compress_spec) to a spec that parses to the same print. */
#include "distdpd/compress.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    char *s = dd_fuzz_str(data, size);
    dd_compress_cfg c, c2;
    dd_compress_cfg_default(&c);
    if (dd_compress_parse(&c, s) == DD_OK) {
        char a[512], b[512];
        if (dd_compress_spec(&c, a, sizeof a) >= sizeof a) abort();
        dd_compress_cfg_default(&c2);
        if (dd_compress_parse(&c2, a) != DD_OK) abort();
        if (dd_compress_spec(&c2, b, sizeof b) >= sizeof b || strcmp(a, b) != 0) abort();
    }
    free(s);
    dd_error_clear();
    return 0;
}
