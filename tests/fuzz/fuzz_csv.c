/* libFuzzer target: the I/Q CSV reader (dd_csv_read_iq). Invariant: success gives a
 * buffer of n finite samples; failure leaves *x NULL. */
#include "distdpd/dataset.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    const char *p = dd_fuzz_file("x.csv", data, size);
    dd_cf32 *x = (dd_cf32 *)1;
    size_t n = 0;
    dd_status st = dd_csv_read_iq(p, &x, &n); /* before reading x and n */
    dd_fuzz_check_samples(st, x, n);
    dd_error_clear();
    return 0;
}
