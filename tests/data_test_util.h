/* Helpers of the dataset tests (test_dataset.c, test_convert.c): paths under the test's
 * temporary directory, whole-file reads and writes. Test-only code. */
#ifndef DD_DATA_TEST_UTIL_H
#define DD_DATA_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "distdpd/dataset.h"

static char g_dir[512]; /* the test's directory: main sets it (dd_test_tmpdir) */

/* DIR/name in one of 8 rotating buffers. */
static const char *P(const char *name) {
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", g_dir, name);
    return b;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        perror(path);
        exit(2);
    }
    fclose(f);
}

/* A spec with every field away from its default (nperseg 1024, 491.52 MHz, 100 MHz main
 * channel of 5 x 20 MHz, 98.3 MHz occupied), split ratios left at the default. */
static void data_test_spec(dd_spec *sp) {
    dd_spec_default(sp);
    sp->fs = 491.52e6;
    sp->bw_main = 100e6;
    sp->bw_sub = 20e6;
    sp->n_sub = 5;
    sp->nperseg = 1024;
    sp->bw_occupied = 98.3e6;
}

#endif
