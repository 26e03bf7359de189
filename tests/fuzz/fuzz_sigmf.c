/* libFuzzer target: SigMF meta and data (dd_sigmf_read). The input is the .sigmf-meta
 * text, "\n###", then the .sigmf-data bytes (fuzz_util.h dd_fuzz_split). Invariant:
 * success gives n finite samples and a sample rate; failure leaves *x NULL. */
#include "distdpd/dataset.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    const uint8_t *a, *b;
    size_t na, nb;
    dd_fuzz_split(data, size, &a, &na, &b, &nb);
    const char *meta = dd_fuzz_file("s.sigmf-meta", a, na);
    dd_fuzz_file("s.sigmf-data", b, nb);
    dd_cf32 *x = (dd_cf32 *)1;
    size_t n = 0;
    double fs = 0;
    dd_status st = dd_sigmf_read(meta, &x, &n, &fs); /* before reading x and n */
    dd_fuzz_check_samples(st, x, n);
    dd_error_clear();
    return 0;
}
