/* The binary data set writer (src/data/binfmt.c, dataset.h dd_bin_writer) under I/O
 * failures and bad calls, the paths `make coverage` showed untested by the unit label
 * (docs/testing.md "Coverage"), with real mechanisms only:
 * - its temporary file's name taken by a non-empty directory: "cannot create";
 * - RLIMIT_FSIZE (SIGXFSZ ignored) below the file's size: ftruncate's EFBIG ("cannot
 *   size"), and below a block's offset after the file was sized: pwrite's EFBIG ("write");
 * - the destination a non-empty directory: "cannot rename", the directory untouched;
 * - a split count too large, a bad split, NULL samples, more samples than announced, a NaN
 *   sample, a commit with samples missing;
 * each with its status and message naming the file and cause, no temporary file left
 * behind, and nothing leaked (ASan / valgrind). A good file is written and read back last
 * with the same directory, so the refusals left nothing in the way. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dd_test.h"
#include "distdpd/dataset.h"
#include "test_train_util.h"

static const size_t N[DD_SPLIT_COUNT] = {3000, 1000, 1000};

/* Sets RLIMIT_FSIZE's soft limit (the hard one stays: it can be raised back). */
static void fsize_limit(rlim_t v) {
    struct rlimit rl;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &rl) == 0, "getrlimit");
    rl.rlim_cur = v == RLIM_INFINITY ? rl.rlim_max : v;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &rl) == 0, "setrlimit %llu: %s", (unsigned long long)v, strerror(errno));
}

int main(void) {
    const char *dir = dd_test_tmpdir();
    char path[600], tmp[700], inner[800];
    snprintf(path, sizeof path, "%s/d.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    dd_spec spec;
    tt_spec(&spec);
    dd_cf32 *in = dd_calloc(N[0], sizeof *in), *out = dd_calloc(N[0], sizeof *out);
    REQUIRE(in && out, "out of memory");
    for (size_t i = 0; i < N[0]; i++) {
        in[i] = (float)i * 1e-3f + 0.5f * I;
        out[i] = -(float)i * 1e-3f;
    }
    dd_bin_writer *w = NULL;

    /* a split count too large for the format */
    const size_t huge[DD_SPLIT_COUNT] = {10, (size_t)1 << 56, 10};
    CHECK_ERR(dd_bin_writer_open(path, &spec, huge, &w), DD_ERR_ARG, "d.bin: split 'val' count ");
    CHECK(w == NULL && strstr(dd_last_error(), " too large"), "refused: %s", dd_last_error());

    /* the temporary file's name taken by a non-empty directory */
    REQUIRE(mkdir(tmp, 0777) == 0, "mkdir %s: %s", tmp, strerror(errno));
    snprintf(inner, sizeof inner, "%s/x", tmp);
    dd_test_write(inner, "x");
    CHECK_ERR(dd_bin_writer_open(path, &spec, N, &w), DD_ERR_IO, "cannot create ");
    CHECK(strstr(dd_last_error(), "d.bin.tmp: ") && strstr(dd_last_error(), strerror(EISDIR)), "message: %s",
          dd_last_error());
    CHECK(w == NULL && access(inner, F_OK) == 0, "the directory in the way is untouched");
    REQUIRE(unlink(inner) == 0 && rmdir(tmp) == 0, "cleanup %s", tmp);

    /* a file size limit below the file: ftruncate fails */
    signal(SIGXFSZ, SIG_IGN);
    fsize_limit(4096);
    CHECK_ERR(dd_bin_writer_open(path, &spec, N, &w), DD_ERR_IO, "d.bin.tmp to ");
    CHECK(strstr(dd_last_error(), "cannot size ") && strstr(dd_last_error(), strerror(EFBIG)), "message: %s",
          dd_last_error());
    fsize_limit(RLIM_INFINITY);
    CHECK(w == NULL && access(tmp, F_OK) != 0, "no temporary file left after a failed open");

    /* ... and below a block after the file was sized: the append's pwrite fails */
    REQUIRE_OK(dd_bin_writer_open(path, &spec, N, &w));
    fsize_limit(4096);
    CHECK_ERR(dd_bin_writer_append(w, DD_SPLIT_TEST, in, out, N[2]), DD_ERR_IO, "write ");
    CHECK(strstr(dd_last_error(), "d.bin.tmp: ") && strstr(dd_last_error(), strerror(EFBIG)), "message: %s",
          dd_last_error());
    fsize_limit(RLIM_INFINITY);
    dd_bin_writer_abort(&w);
    CHECK(w == NULL && access(tmp, F_OK) != 0, "abort removes the temporary file");
    signal(SIGXFSZ, SIG_DFL);

    /* bad calls */
    REQUIRE_OK(dd_bin_writer_open(path, &spec, N, &w));
    CHECK_ERR(dd_bin_writer_append(w, (dd_split)7, in, out, 1), DD_ERR_ARG, "dd_bin_writer_append: bad split 7");
    CHECK_ERR(dd_bin_writer_append(w, DD_SPLIT_TRAIN, NULL, out, 1), DD_ERR_ARG, "NULL samples");
    CHECK_ERR(dd_bin_writer_append(NULL, DD_SPLIT_TRAIN, in, out, 1), DD_ERR_ARG, "NULL writer");
    CHECK_OK(dd_bin_writer_append(w, DD_SPLIT_TRAIN, NULL, NULL, 0)); /* nothing */
    CHECK_ERR(dd_bin_writer_append(w, DD_SPLIT_VAL, in, out, N[1] + 1), DD_ERR_ARG,
              "d.bin: split 'val': appending 1001 samples exceeds the 1000 announced (0 written)");
    dd_cf32 keep = in[5];
    in[5] = NAN;
    CHECK_ERR(dd_bin_writer_append(w, DD_SPLIT_TRAIN, in, out, 10), DD_ERR_RANGE,
              "d.bin: split 'train' input sample 5 is NaN/Inf");
    in[5] = keep;
    CHECK_OK(dd_bin_writer_append(w, DD_SPLIT_TRAIN, in, out, N[0]));
    CHECK_ERR(dd_bin_writer_commit(&w), DD_ERR_ARG, "d.bin: split 'val' has 0 of 1000 samples written");
    CHECK(w == NULL && access(tmp, F_OK) != 0 && access(path, F_OK) != 0, "a refused commit frees and removes");

    /* the destination a non-empty directory: rename fails */
    REQUIRE(mkdir(path, 0777) == 0, "mkdir %s: %s", path, strerror(errno));
    snprintf(inner, sizeof inner, "%s/x", path);
    dd_test_write(inner, "keep");
    REQUIRE_OK(dd_bin_writer_open(path, &spec, N, &w));
    for (int s = 0; s < DD_SPLIT_COUNT; s++) CHECK_OK(dd_bin_writer_append(w, (dd_split)s, in, out, N[s]));
    CHECK_ERR(dd_bin_writer_commit(&w), DD_ERR_IO, "cannot rename ");
    CHECK(strstr(dd_last_error(), "d.bin.tmp to ") && strstr(dd_last_error(), strerror(EISDIR)), "message: %s",
          dd_last_error());
    char *k = dd_test_read(inner);
    CHECK(w == NULL && k && strcmp(k, "keep") == 0 && access(tmp, F_OK) != 0,
          "the directory untouched, no temporary file");
    dd_free(k);
    REQUIRE(unlink(inner) == 0 && rmdir(path) == 0, "cleanup %s", path);

    /* the same path then takes a good file, read back */
    REQUIRE_OK(dd_bin_writer_open(path, &spec, N, &w));
    for (int s = DD_SPLIT_COUNT - 1; s >= 0; s--) CHECK_OK(dd_bin_writer_append(w, (dd_split)s, in, out, N[s]));
    CHECK_OK(dd_bin_writer_commit(&w));
    dd_dataset *ds = NULL;
    CHECK_OK(dd_dataset_load(path, &ds));
    if (ds) {
        CHECK(ds->n[0] == N[0] && ds->n[1] == N[1] && ds->n[2] == N[2], "counts %zu %zu %zu", ds->n[0], ds->n[1],
              ds->n[2]);
        CHECK(memcmp(ds->in[1], in, N[1] * sizeof *in) == 0 && memcmp(ds->out[2], out, N[2] * sizeof *out) == 0,
              "samples read back");
    }
    dd_dataset_free(&ds);
    dd_free(in);
    dd_free(out);
    return dd_test_done("test_binfmt_io");
}
