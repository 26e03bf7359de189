/* libFuzzer target: the binary dataset format (dd_bin_open: header, block table; then
 * dd_bin_slice of every split at its ends, dd_bin_verify, and dd_dataset_load of the
 * file, which checks every sample). Invariant: an opened view's slices stay inside the
 * mapping (ASan would not see an overrun of an mmap, so each slice is read fully). */
#include <complex.h>
#include <math.h>

#include "distdpd/dataset.h"
#include "fuzz_util.h"

static volatile float sink;

static void touch(const dd_cf32 *p, size_t n) {
    float s = 0;
    for (size_t i = 0; i < n; i++) s += crealf(p[i]) + cimagf(p[i]);
    sink = s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    const char *p = dd_fuzz_file("x.ddb", data, size);
    dd_bin_view *v = NULL;
    if (dd_bin_open(p, &v) == DD_OK) {
        /* every split read whole: the offsets and counts the header claims must fit in
         * the file (an mmap overrun is SIGBUS/SEGV, which libFuzzer reports) */
        for (int s = 0; s < DD_SPLIT_COUNT; s++) {
            size_t n = dd_bin_count(v, (dd_split)s);
            const dd_cf32 *in = NULL, *out = NULL;
            if (dd_bin_slice(v, (dd_split)s, 0, n, &in, &out) == DD_OK && n) {
                touch(in, n);
                touch(out, n);
            }
            if (dd_bin_slice(v, (dd_split)s, n, 1, &in, &out) == DD_OK) abort(); /* past the end */
        }
        (void)dd_bin_verify(v);
        dd_bin_close(&v);
    }
    dd_dataset *ds = NULL;
    if (dd_dataset_load(p, &ds) == DD_OK) dd_dataset_free(&ds);
    dd_error_clear();
    return 0;
}
