/* Tests of the dataset module: OpenDPD CSV directories (split and single file), spec.json,
 * SigMF and the binary format. Round trips must be bit-exact (float32 through "%.9g",
 * cf32/cf64 SigMF, binary), ci16 within 1/32768; every kind of bad input (missing or
 * unreadable file, missing spec field, wrong type, non-numeric cell, NaN/Inf, wrong column
 * count, length mismatch, SigMF datatype, truncated or corrupted binary) must fail with
 * the right status and a message naming the file and line or field. The real DPA_200MHz
 * dataset must load (skipped if absent). Also measures CSV parsing speed, and bounds the
 * memory and time a CSV read may take against the data's size (sparse 2 GB files, a
 * FIFO, /dev/zero, over-long lines). */
#include "distdpd/dataset.h"
#include "dd_test.h"
#include "probe_test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>

#include "data_test_util.h"

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Number of entries in dir whose name ends in ".tmp". */
static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        n += l > 4 && strcmp(e->d_name + l - 4, ".tmp") == 0;
    }
    closedir(d);
    return n;
}

static void fill(dd_rng *r, dd_cf32 *x, size_t n, double scale) {
    float *f = (float *)(void *)x;
    for (size_t i = 0; i < 2 * n; i++) f[i] = (float)(scale * dd_rng_normal(r));
}

static int same_bits(const dd_cf32 *a, const dd_cf32 *b, size_t n) {
    return n == 0 || memcmp(a, b, n * sizeof *a) == 0;
}

static int same_dataset(const dd_dataset *a, const dd_dataset *b) {
    for (int s = 0; s < DD_SPLIT_COUNT; s++) {
        if (a->n[s] != b->n[s]) return 0;
        if (!same_bits(a->in[s], b->in[s], a->n[s]) || !same_bits(a->out[s], b->out[s], a->n[s]))
            return 0;
    }
    return 1;
}

static int same_spec(const dd_spec *a, const dd_spec *b) {
    return a->fs == b->fs && a->bw_main == b->bw_main && a->bw_sub == b->bw_sub &&
           a->n_sub == b->n_sub && a->nperseg == b->nperseg && a->bw_occupied == b->bw_occupied &&
           a->split[0] == b->split[0] && a->split[1] == b->split[1] && a->split[2] == b->split[2];
}

/* A random dataset with the given counts and a non-default spec. */
static dd_dataset *make_ds(size_t n0, size_t n1, size_t n2, uint64_t seed) {
    dd_spec sp;
    data_test_spec(&sp);
    sp.split[0] = 0.5;
    sp.split[1] = 0.25;
    sp.split[2] = 0.25;
    size_t n[3] = {n0, n1, n2};
    dd_cf32 *buf[6];
    dd_rng r;
    dd_rng_seed(&r, seed);
    for (int i = 0; i < 6; i++) {
        buf[i] = dd_calloc(n[i / 2] + 1, sizeof(dd_cf32));
        fill(&r, buf[i], n[i / 2], i % 2 ? 0.7 : 0.3);
    }
    const dd_cf32 *in[3] = {buf[0], buf[2], buf[4]}, *out[3] = {buf[1], buf[3], buf[5]};
    dd_dataset *ds = NULL;
    CHECK_OK(dd_dataset_from_arrays(&sp, n, in, out, &ds));
    for (int i = 0; i < 6; i++) dd_free(buf[i]);
    if (!ds) exit(1);
    return ds;
}

/* 1 if dd_last_error() holds only printable ASCII. */
static int printable_msg(void) {
    for (const unsigned char *p = (const unsigned char *)dd_last_error(); *p; p++)
        if (*p < 0x20 || *p >= 0x7f) return 0;
    return 1;
}

static void test_csv(void) {
    dd_cf32 *x = NULL;
    size_t n = 0;
    /* BOM, spaced and quoted header, CRLF, spaces around cells, no final newline. */
    dd_test_write(P("ok.csv"), "\xEF\xBB\xBF i , \"q\"\r\n0.5,-1.25\r\n 1e-3 ,\t-0 \r\n"
                               "0.100000001,3.4028234e38\r\n-7");
    CHECK_ERR(dd_csv_read_iq(P("ok.csv"), &x, &n), DD_ERR_FORMAT, "ok.csv:5: expected 2 columns, found 1");
    dd_test_write(P("ok.csv"), "\xEF\xBB\xBF i , \"q\"\r\n0.5,-1.25\r\n 1e-3 ,\t-0 \r\n"
                               "0.100000001,3.4028234e38\r\n-7,8\r\n\r\n  \n");
    CHECK_OK(dd_csv_read_iq(P("ok.csv"), &x, &n));
    CHECK(n == 4, "n = %zu", n);
    if (n == 4) {
        const float *f = (const float *)(const void *)x;
        const float want[8] = {0.5f, -1.25f, 1e-3f, -0.0f, 0.100000001f, 3.4028234e38f, -7.0f, 8.0f};
        CHECK(memcmp(f, want, sizeof want) == 0, "values differ: %g %g %g %g", f[0], f[1], f[2], f[5]);
        CHECK(signbit(f[3]), "-0 lost its sign");
    }
    dd_free(x);
    /* Old Mac line ends (CR only). */
    dd_test_write(P("cr.csv"), "I,Q\r0.1,0.2\r0.3,0.4");
    CHECK_OK(dd_csv_read_iq(P("cr.csv"), &x, &n));
    CHECK(n == 2 && ((float *)(void *)x)[3] == 0.4f, "CR-only: n = %zu", n);
    dd_free(x);
    /* Header only: zero samples. */
    dd_test_write(P("hdr_only.csv"), "I,Q\n");
    CHECK_OK(dd_csv_read_iq(P("hdr_only.csv"), &x, &n));
    CHECK(n == 0, "n = %zu", n);
    dd_free(x);

    /* Bad inputs, one at a time. */
    CHECK_ERR(dd_csv_read_iq(P("nope.csv"), &x, &n), DD_ERR_IO, "nope.csv: No such file or directory");
    CHECK_ERR(dd_csv_read_iq(P("nope.csv"), &x, &n), DD_ERR_IO, "cannot open");
    CHECK_ERR(dd_csv_read_iq(g_dir, &x, &n), DD_ERR_IO, "Is a directory");
    dd_test_write(P("locked.csv"), "I,Q\n1,2\n");
    chmod(P("locked.csv"), 0);
    if (geteuid() != 0) /* root reads anything */
        CHECK_ERR(dd_csv_read_iq(P("locked.csv"), &x, &n), DD_ERR_IO, "locked.csv: Permission denied");
    dd_test_write(P("empty.csv"), "");
    CHECK_ERR(dd_csv_read_iq(P("empty.csv"), &x, &n), DD_ERR_FORMAT, "empty.csv: empty file");
    dd_test_write(P("blank.csv"), " \n\n");
    CHECK_ERR(dd_csv_read_iq(P("blank.csv"), &x, &n), DD_ERR_FORMAT, "blank.csv: empty file");
    dd_test_write(P("hdr.csv"), "X,Y\n1,2\n");
    CHECK_ERR(dd_csv_read_iq(P("hdr.csv"), &x, &n), DD_ERR_FORMAT, "hdr.csv:1: header must be 'I,Q', found 'X,Y'");
    dd_test_write(P("hdr3.csv"), "I,Q,Z\n1,2,3\n");
    CHECK_ERR(dd_csv_read_iq(P("hdr3.csv"), &x, &n), DD_ERR_FORMAT, "hdr3.csv:1: header must be 'I,Q'");
    dd_test_write(P("nohdr.csv"), "0.1,0.2\n0.3,0.4\n");
    CHECK_ERR(dd_csv_read_iq(P("nohdr.csv"), &x, &n), DD_ERR_FORMAT, "nohdr.csv:1: header must be 'I,Q'");
    dd_test_write(P("nn.csv"), "I,Q\n0.1,0.2\n0.3,abc\n");
    CHECK_ERR(dd_csv_read_iq(P("nn.csv"), &x, &n), DD_ERR_FORMAT, "nn.csv:3: column 2 ('Q') is not a number: 'abc'");
    dd_test_write(P("nn1.csv"), "I,Q\r\n0.1,0.2\r\n0.3,0.4\r\n0.5x,0.6\r\n");
    CHECK_ERR(dd_csv_read_iq(P("nn1.csv"), &x, &n), DD_ERR_FORMAT, "nn1.csv:4: column 1 ('I') is not a number: '0.5x'");
    dd_test_write(P("sep.csv"), "I,Q\n0.1;0.2\n");
    CHECK_ERR(dd_csv_read_iq(P("sep.csv"), &x, &n), DD_ERR_FORMAT, "sep.csv:2: column 1 ('I') is not a number: '0.1;0.2'");
    dd_test_write(P("emptycell.csv"), "I,Q\n0.1,\n");
    CHECK_ERR(dd_csv_read_iq(P("emptycell.csv"), &x, &n), DD_ERR_FORMAT, "emptycell.csv:2: column 2 ('Q') is not a number: ''");
    dd_test_write(P("one.csv"), "I,Q\n0.1,0.2\n0.3,0.4\n0.5\n0.6,0.7\n");
    CHECK_ERR(dd_csv_read_iq(P("one.csv"), &x, &n), DD_ERR_FORMAT, "one.csv:4: expected 2 columns, found 1");
    dd_test_write(P("three.csv"), "I,Q\n0.1,0.2,0.3\n");
    CHECK_ERR(dd_csv_read_iq(P("three.csv"), &x, &n), DD_ERR_FORMAT, "three.csv:2: expected 2 columns, found 3");
    dd_test_write(P("gap.csv"), "I,Q\n0.1,0.2\n\n0.3,0.4\n");
    CHECK_ERR(dd_csv_read_iq(P("gap.csv"), &x, &n), DD_ERR_FORMAT, "gap.csv:3: expected 2 columns, found 0");
    dd_test_write(P("nan.csv"), "I,Q\n0.1,0.2\nnan,0.4\n");
    CHECK_ERR(dd_csv_read_iq(P("nan.csv"), &x, &n), DD_ERR_RANGE, "nan.csv:3: column 1 ('I') value is NaN/Inf");
    dd_test_write(P("inf.csv"), "I,Q\n0.1,-Inf\n");
    CHECK_ERR(dd_csv_read_iq(P("inf.csv"), &x, &n), DD_ERR_RANGE, "inf.csv:2: column 2 ('Q') value is NaN/Inf");
    dd_test_write(P("big.csv"), "I,Q\n1e39,0\n");
    CHECK_ERR(dd_csv_read_iq(P("big.csv"), &x, &n), DD_ERR_RANGE, "big.csv:2: column 1 ('I') value is NaN/Inf (overflows float32)");
    write_bytes(P("nul.csv"), "I,Q\n0.1,0.2\n0.3\0,0.4\n", 21);
    CHECK_ERR(dd_csv_read_iq(P("nul.csv"), &x, &n), DD_ERR_FORMAT, "nul.csv:3: NUL byte");
    CHECK(x == NULL, "x set on error");

    /* Binary content quoted in a message is escaped (\xNN) and shortened: no raw control
     * or high bytes reach the terminal that prints the error. */
    write_bytes(P("esc.csv"), "\x1b[2J\x07I,Q\xff\xfe\n1,2\n", 14);
    CHECK_ERR(dd_csv_read_iq(P("esc.csv"), &x, &n), DD_ERR_FORMAT, "esc.csv:1: header must be 'I,Q', found '\\x1b[2J\\x07I,Q\\xff\\xfe'");
    CHECK(printable_msg(), "raw bytes in '%s'", dd_last_error());
    {
        unsigned char junk[300];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(0x80 + i % 0x70);
        write_bytes(P("junk.csv"), junk, sizeof junk);
        CHECK_ERR(dd_csv_read_iq(P("junk.csv"), &x, &n), DD_ERR_FORMAT, "junk.csv:1: header must be 'I,Q', found '\\x80\\x81");
        CHECK(printable_msg(), "raw bytes in '%s'", dd_last_error());
        CHECK(strstr(dd_last_error(), "...'") != NULL && strlen(dd_last_error()) < 500 + strlen(g_dir),
              "long binary header not shortened: %zu bytes", strlen(dd_last_error()));
    }
    write_bytes(P("esccell.csv"), "I,Q\n1,2\n\x01\\\x7f,3\n", 13);
    CHECK_ERR(dd_csv_read_iq(P("esccell.csv"), &x, &n), DD_ERR_FORMAT, "esccell.csv:3: column 1 ('I') is not a number: '\\x01\\\\\\x7f'");
    CHECK(printable_msg(), "raw bytes in '%s'", dd_last_error());

    /* Writer: atomic, refuses NaN and leaves nothing behind. */
    dd_cf32 bad[2] = {0};
    ((float *)(void *)bad)[3] = NAN;
    CHECK_ERR(dd_csv_write_iq(P("w_nan.csv"), bad, 2), DD_ERR_RANGE, "w_nan.csv: sample 1 is NaN/Inf");
    CHECK(!exists(P("w_nan.csv")) && !exists(P("w_nan.csv.tmp")), "failed write left a file");
    CHECK_OK(dd_csv_write_iq(P("new/sub/dir/x.csv"), bad, 1)); /* parents created */
    CHECK_ERR(dd_csv_write_iq(P("ok.csv/x.csv"), bad, 1), DD_ERR_IO, "cannot create directory");
    CHECK_ERR(dd_csv_write_iq(P("ok.csv/x.csv"), bad, 1), DD_ERR_IO, "ok.csv: a file is in the way");
}

static const char *SPEC_OK =
    "{\n \"dataset_format\": \"split_csv\",\n \"split_ratios\": {\"train\": 0.6, \"val\": 0.2, "
    "\"test\": 0.2},\n \"input_signal_fs\": 800e6,\n \"bw_main_ch\": 200e6,\n \"bw_sub_ch\": 20e6,\n"
    " \"n_sub_ch\": 10,\n \"nperseg\": 2560\n}\n";

/* Writes SPEC_OK with the text `from` replaced by `to` to DIR/name. */
static const char *spec_variant(const char *name, const char *from, const char *to) {
    char text[2048];
    const char *at = strstr(SPEC_OK, from);
    if (!at) {
        fprintf(stderr, "spec_variant: '%s' not in template\n", from);
        exit(2);
    }
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - SPEC_OK), SPEC_OK, to, at + strlen(from));
    const char *p = P(name);
    dd_test_write(p, text);
    return p;
}

static void test_spec(void) {
    dd_spec s;
    char fmt[32];
    mkdir(P("spec"), 0777);
    dd_test_write(P("spec/spec.json"), SPEC_OK);
    CHECK_OK(dd_spec_read_json(P("spec/spec.json"), &s, fmt, sizeof fmt));
    CHECK(s.fs == 800e6 && s.bw_main == 200e6 && s.bw_sub == 20e6 && s.n_sub == 10 &&
              s.nperseg == 2560 && s.split[0] == 0.6 && s.split[1] == 0.2 && s.split[2] == 0.2 &&
              s.bw_occupied == 0 && strcmp(fmt, "split_csv") == 0,
          "spec fields wrong: fs %g nperseg %zu fmt %s", s.fs, s.nperseg, fmt);
    /* Optional fields: no dataset_format = split_csv, no split_ratios = 0.6/0.2/0.2;
     * ratios as an array; bw_occupied extension. */
    const char *p = spec_variant("s_a.json", "\"dataset_format\": \"split_csv\",\n \"split_ratios\": {\"train\": 0.6, \"val\": 0.2, \"test\": 0.2},", "\"bw_occupied\": 190e6,");
    CHECK_OK(dd_spec_read_json(p, &s, fmt, sizeof fmt));
    CHECK(strcmp(fmt, "split_csv") == 0 && s.split[0] == 0.6 && s.bw_occupied == 190e6, "defaults: %s", fmt);
    p = spec_variant("s_b.json", "{\"train\": 0.6, \"val\": 0.2, \"test\": 0.2}", "[0.7, 0.1, 0.2]");
    CHECK_OK(dd_spec_read_json(p, &s, NULL, 0));
    CHECK(s.split[0] == 0.7 && s.split[1] == 0.1, "array ratios %g %g", s.split[0], s.split[1]);
    p = spec_variant("s_c.json", "\"split_csv\"", "\"single_csv\"");
    CHECK_OK(dd_spec_read_json(p, &s, fmt, sizeof fmt));
    CHECK(strcmp(fmt, "single_csv") == 0, "format %s", fmt);

    /* Missing required fields, each named. */
    static const char *const fields[5][2] = {
        {"\"input_signal_fs\": 800e6,", "input_signal_fs"}, {"\"bw_main_ch\": 200e6,", "bw_main_ch"},
        {"\"bw_sub_ch\": 20e6,", "bw_sub_ch"}, {"\"n_sub_ch\": 10,", "n_sub_ch"},
        {",\n \"nperseg\": 2560", "nperseg"}};
    for (int i = 0; i < 5; i++) {
        char want[128];
        p = spec_variant("spec/spec.json", fields[i][0], "");
        snprintf(want, sizeof want, "spec.json: missing field '%s'", fields[i][1]);
        CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_FORMAT, want);
    }
    p = spec_variant("spec/spec.json", "\"val\": 0.2, ", "");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_FORMAT, "spec.json: missing field 'split_ratios.val'");
    /* Wrong types. */
    p = spec_variant("spec/spec.json", "2560", "\"2560\"");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_FORMAT, "spec.json: field 'nperseg' must be a number, found a string");
    p = spec_variant("spec/spec.json", "\"n_sub_ch\": 10", "\"n_sub_ch\": 10.5");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_FORMAT, "field 'n_sub_ch' must be an integer");
    p = spec_variant("spec/spec.json", "\"split_csv\"", "7");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_FORMAT, "field 'dataset_format' must be a string");
    p = spec_variant("spec/spec.json", "{\"train\": 0.6, \"val\": 0.2, \"test\": 0.2}", "\"60/20/20\"");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_FORMAT, "field 'split_ratios' must be");
    p = spec_variant("spec/spec.json", "\"test\": 0.2", "\"test\": null");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_FORMAT, "field 'split_ratios.test' must be a number, found null");
    /* Ranges. */
    p = spec_variant("spec/spec.json", "800e6", "-800e6");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "'input_signal_fs' (fs) must be > 0");
    p = spec_variant("spec/spec.json", "200e6", "800e6");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "'bw_main_ch' (bw_main) must be in (0, fs");
    p = spec_variant("spec/spec.json", "20e6", "0");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "'bw_sub_ch'");
    p = spec_variant("spec/spec.json", "\"n_sub_ch\": 10", "\"n_sub_ch\": 0");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "'n_sub_ch' (n_sub) must be >= 1");
    p = spec_variant("spec/spec.json", "2560", "8");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "'nperseg' must be >= 16, found 8");
    /* absurd segment lengths are refused with the field named (nperseg 1e9 made the
     * evaluation allocate 24 GB on a 7,680-sample split); the cap itself is accepted */
    p = spec_variant("spec/spec.json", "2560", "1e9");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "spec.json: field 'nperseg' must be <= 1048576 (2^20 samples per evaluation segment), found 1000000000");
    p = spec_variant("spec/spec.json", "2560", "3e7");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "field 'nperseg' must be <= 1048576");
    p = spec_variant("spec/spec.json", "2560", "1048577");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "found 1048577");
    p = spec_variant("spec/spec.json", "2560", "1048576");
    CHECK_OK(dd_spec_read_json(p, &s, fmt, sizeof fmt));
    CHECK(s.nperseg == DD_NPERSEG_MAX, "nperseg %zu", s.nperseg);
    {
        dd_spec big;
        dd_spec_default(&big);
        big.nperseg = DD_NPERSEG_MAX + 1;
        CHECK_ERR(dd_spec_check(&big, "where"), DD_ERR_RANGE, "where: field 'nperseg' must be <= 1048576");
        CHECK_ERR(dd_spec_write_json(P("spec/w3.json"), &big, NULL), DD_ERR_RANGE, "w3.json: field 'nperseg' must be <= 1048576");
        size_t cnt[3] = {1, 1, 1};
        dd_bin_writer *bw = NULL;
        CHECK_ERR(dd_bin_writer_open(P("spec/w3.ddb"), &big, cnt, &bw), DD_ERR_RANGE, "w3.ddb: field 'nperseg' must be <= 1048576");
    }
    p = spec_variant("spec/spec.json", "\"test\": 0.2", "\"test\": 0.1");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "'split_ratios' must sum to 1, found 0.9");
    p = spec_variant("spec/spec.json", "\"train\": 0.6, \"val\": 0.2", "\"train\": 1.0, \"val\": -0.2");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_RANGE, "'split_ratios.val' must be >= 0");
    p = spec_variant("spec/spec.json", "\"test\": 0.2", "\"test\": 0.2000001");
    CHECK_OK(dd_spec_read_json(p, &s, fmt, sizeof fmt)); /* within 1e-6 */
    /* Unknown format, syntax error, not an object, empty, missing file. */
    p = spec_variant("spec/spec.json", "\"split_csv\"", "\"parquet\"");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_UNSUPPORTED, "dataset_format' has unknown value 'parquet'");
    p = spec_variant("fmtesc.json", "\"dataset_format\": \"split_csv\"", "\"dataset_format\": \"\\u001b]0;pwned\\u0007\"");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_UNSUPPORTED, "has unknown value '\\x1b]0;pwned\\x07'");
    CHECK(printable_msg(), "raw bytes in '%s'", dd_last_error());
    write_bytes(P("spec/bin.json"), "\x7f" "ELF\x02\x01\x01\x03\n", 9);
    CHECK_ERR(dd_spec_read_json(P("spec/bin.json"), &s, fmt, sizeof fmt), DD_ERR_FORMAT, "bin.json:1: invalid JSON near '\\x7fELF\\x02\\x01\\x01\\x03'");
    CHECK(printable_msg(), "raw bytes in '%s'", dd_last_error());
    p = spec_variant("spec/spec.json", "0.6,", "0.6");
    CHECK_ERR(dd_spec_read_json(p, &s, fmt, sizeof fmt), DD_ERR_FORMAT, "spec.json:3: invalid JSON");
    dd_test_write(P("spec/spec.json"), "[1, 2]");
    CHECK_ERR(dd_spec_read_json(P("spec/spec.json"), &s, fmt, sizeof fmt), DD_ERR_FORMAT, "spec.json: top level must be a JSON object");
    dd_test_write(P("spec/spec.json"), "");
    CHECK_ERR(dd_spec_read_json(P("spec/spec.json"), &s, fmt, sizeof fmt), DD_ERR_FORMAT, "spec.json: empty file");
    CHECK_ERR(dd_spec_read_json(P("spec/none.json"), &s, fmt, sizeof fmt), DD_ERR_IO, "none.json: No such file or directory");

    /* Write then read: identical. */
    dd_spec w;
    dd_spec_default(&w);
    w.fs = 122.88e6 * 4;
    w.bw_main = 1.0 / 3.0 * 1e8;
    w.bw_occupied = 3.1e7;
    w.split[0] = 0.7;
    w.split[1] = 0.15;
    w.split[2] = 0.15;
    w.bw_sub = w.bw_main / 10;
    CHECK_OK(dd_spec_write_json(P("spec/w.json"), &w, "single_csv"));
    CHECK_OK(dd_spec_read_json(P("spec/w.json"), &s, fmt, sizeof fmt));
    CHECK(same_spec(&s, &w) && strcmp(fmt, "single_csv") == 0, "spec round trip");
    w.nperseg = 4;
    CHECK_ERR(dd_spec_write_json(P("spec/w2.json"), &w, NULL), DD_ERR_RANGE, "w2.json: field 'nperseg'");
    CHECK(!exists(P("spec/w2.json")), "invalid spec written");
}

static void test_opendpd(void) {
    dd_dataset *ds = make_ds(1000, 300, 301, 1), *rd = NULL;
    /* Writers create missing directories. */
    const char *dir = P("odpd/a/b");
    CHECK_OK(dd_dataset_save_opendpd(ds, dir));
    CHECK(count_tmp(dir) == 0, "temporary files left: %d", count_tmp(dir));
    CHECK_OK(dd_dataset_load(dir, &rd));
    if (rd) {
        CHECK(strcmp(rd->format, "split_csv") == 0, "format %s", rd->format);
        CHECK(same_dataset(ds, rd), "split_csv round trip not bit-exact");
        CHECK(same_spec(&ds->spec, &rd->spec), "spec differs after round trip");
    }
    dd_dataset_free(&rd);
    CHECK(rd == NULL, "free does not clear the handle");
    /* Also loadable from the spec.json path. */
    char buf[1024];
    snprintf(buf, sizeof buf, "%s/spec.json", dir);
    CHECK_OK(dd_dataset_load(buf, &rd));
    CHECK(rd && rd->n[2] == 301, "via spec.json");
    dd_dataset_free(&rd);

    /* Output one sample short. */
    snprintf(buf, sizeof buf, "%s/train_output.csv", dir);
    CHECK_OK(dd_csv_write_iq(buf, ds->out[0], 999));
    CHECK_ERR(dd_dataset_load(dir, &rd), DD_ERR_MISMATCH, "train_input.csv has 1000 samples but train_output.csv has 999");
    CHECK(rd == NULL, "dataset returned on error");
    /* A bad cell in a later file names that file and line. */
    CHECK_OK(dd_csv_write_iq(buf, ds->out[0], 1000));
    snprintf(buf, sizeof buf, "%s/test_output.csv", dir);
    FILE *f = fopen(buf, "a");
    fputs("0.25,zz\n", f);
    fclose(f);
    CHECK_ERR(dd_dataset_load(dir, &rd), DD_ERR_FORMAT, "test_output.csv:303: column 2 ('Q') is not a number: 'zz'");
    /* A missing file. */
    snprintf(buf, sizeof buf, "%s/val_input.csv", dir);
    remove(buf);
    CHECK_ERR(dd_dataset_load(dir, &rd), DD_ERR_IO, "val_input.csv: No such file or directory");
    /* A spec field missing, seen through dd_dataset_load. */
    snprintf(buf, sizeof buf, "%s/spec.json", dir);
    dd_test_write(buf, "{\"input_signal_fs\": 1e6, \"bw_main_ch\": 2e5, \"bw_sub_ch\": 2e4, \"n_sub_ch\": 10}");
    CHECK_ERR(dd_dataset_load(dir, &rd), DD_ERR_FORMAT, "spec.json: missing field 'nperseg'");

    /* single_csv: 101 rows, 0.6/0.2/0.2 -> 60 / 20 / 21 in time order. */
    mkdir(P("single"), 0777);
    f = fopen(P("single/data.csv"), "w");
    fputs("I_in, Q_in ,I_OUT,q_out\r\n", f);
    for (int i = 0; i < 101; i++) fprintf(f, "%d,%d.5,%d,-%d\r\n", i, i, 1000 + i, i);
    fclose(f);
    dd_test_write(P("single/spec.json"), "{\"dataset_format\": \"single_csv\", \"split_ratios\": "
                  "{\"train\": 0.6, \"val\": 0.2, \"test\": 0.2}, \"input_signal_fs\": 800e6, "
                  "\"bw_main_ch\": 200e6, \"bw_sub_ch\": 20e6, \"n_sub_ch\": 10, \"nperseg\": 2560}");
    CHECK_OK(dd_dataset_load(P("single"), &rd));
    if (rd) {
        CHECK(rd->n[0] == 60 && rd->n[1] == 20 && rd->n[2] == 21, "counts %zu %zu %zu", rd->n[0], rd->n[1], rd->n[2]);
        CHECK(strcmp(rd->format, "single_csv") == 0, "format %s", rd->format);
        const float *vi = (const float *)(const void *)rd->in[1], *vo = (const float *)(const void *)rd->out[2];
        CHECK(vi[0] == 60.0f && vi[1] == 60.5f, "val[0] in = %g %g", vi[0], vi[1]);
        CHECK(vo[0] == 1080.0f && vo[1] == -80.0f, "test[0] out = %g %g", vo[0], vo[1]);
        vo = (const float *)(const void *)rd->out[2];
        CHECK(vo[2 * 20] == 1100.0f, "last test out = %g", vo[40]);
    }
    dd_dataset_free(&rd);
    /* Round trip through the single-file writer with counts that are not the spec's ratios. */
    CHECK_OK(dd_dataset_save_opendpd_single(ds, P("single2")));
    CHECK_OK(dd_dataset_load(P("single2"), &rd));
    if (rd) {
        CHECK(strcmp(rd->format, "single_csv") == 0, "format %s", rd->format);
        CHECK(same_dataset(ds, rd), "single_csv round trip");
    }
    dd_dataset_free(&rd);
    f = fopen(P("single/data.csv"), "a");
    fputs("1,2,3\r\n", f);
    fclose(f);
    CHECK_ERR(dd_dataset_load(P("single"), &rd), DD_ERR_FORMAT, "data.csv:103: expected 4 columns, found 3");
    dd_test_write(P("single/data.csv"), "I,Q\n1,2\n");
    CHECK_ERR(dd_dataset_load(P("single"), &rd), DD_ERR_FORMAT, "data.csv:1: header must be 'I_in,Q_in,I_out,Q_out'");
    dd_dataset_free(&ds);
}

/* Writes a SigMF meta with the given datatype/rate text and raw data bytes. */
static void sigmf_fixture(const char *name, const char *global, const void *data, size_t n) {
    char text[1024], path[600];
    snprintf(text, sizeof text, "{\"global\": {%s}, \"captures\": [{\"core:sample_start\": 0}], \"annotations\": []}", global);
    snprintf(path, sizeof path, "%s.sigmf-meta", name);
    dd_test_write(P(path), text);
    snprintf(path, sizeof path, "%s.sigmf-data", name);
    write_bytes(P(path), data, n);
}

static void test_sigmf(void) {
    dd_rng r;
    dd_rng_seed(&r, 5);
    enum { N = 777 };
    dd_cf32 *x = dd_calloc(N, sizeof *x), *y = NULL;
    fill(&r, x, N, 0.3);
    size_t n = 0;
    double fs = 0;
    mkdir(P("sig"), 0777);
    /* cf32 and cf64: exact. ci16: within 1/32768 (rounding: 1/65536). */
    CHECK_OK(dd_sigmf_write(P("sig/a32"), x, N, 245.76e6, DD_SIGMF_CF32_LE, "test"));
    CHECK_OK(dd_sigmf_read(P("sig/a32.sigmf-meta"), &y, &n, &fs));
    CHECK(n == N && fs == 245.76e6 && y && same_bits(x, y, N), "cf32 round trip n=%zu fs=%g", n, fs);
    dd_free(y);
    y = NULL;
    CHECK_OK(dd_sigmf_write(P("sig/a64"), x, N, 1e9 / 3, DD_SIGMF_CF64_LE, NULL));
    CHECK_OK(dd_sigmf_read(P("sig/a64.sigmf-meta"), &y, &n, &fs));
    CHECK(n == N && fs == 1e9 / 3 && y && same_bits(x, y, N), "cf64 round trip");
    size_t bytes;
    unsigned char *raw = dd_test_slurp(P("sig/a64.sigmf-data"), &bytes);
    CHECK(bytes == N * 16, "cf64 file size %zu", bytes);
    free(raw);
    dd_free(y);
    y = NULL;
    float *xf = (float *)(void *)x;
    for (int i = 0; i < 2 * N; i++) xf[i] = fmaxf(-1.0f, fminf(1.0f, xf[i]));
    xf[0] = 1.0f;
    xf[1] = -1.0f;
    CHECK_OK(dd_sigmf_write(P("sig/a16"), x, N, 1e6, DD_SIGMF_CI16_LE, NULL));
    CHECK_OK(dd_sigmf_read(P("sig/a16"), &y, &n, &fs)); /* prefix accepted */
    if (y && n == N) {
        double worst = 0;
        const float *yf = (const float *)(const void *)y;
        for (int i = 0; i < 2 * N; i++) worst = fmax(worst, fabs((double)yf[i] - xf[i]));
        CHECK(worst <= 1.0 / 32768, "ci16 error %g", worst);
        CHECK(yf[1] == -1.0f && yf[0] == 32767.0f / 32768.0f, "ci16 full scale %g %g", yf[0], yf[1]);
    }
    dd_free(y);
    y = NULL;
    xf[2] = 1.5f;
    CHECK_ERR(dd_sigmf_write(P("sig/bad16"), x, N, 1e6, DD_SIGMF_CI16_LE, NULL), DD_ERR_RANGE, "bad16.sigmf-data: sample 1 value 1.5 is outside the ci16 full scale");
    CHECK(!exists(P("sig/bad16.sigmf-data")) && !exists(P("sig/bad16.sigmf-meta")) && count_tmp(P("sig")) == 0, "failed SigMF write left files");

    /* Hand-made recordings of the other datatypes, read against known values. */
    const signed char i8[4] = {64, -128, 127, 0};
    sigmf_fixture("sig/i8", "\"core:datatype\": \"ci8\", \"core:sample_rate\": 10", i8, 4);
    CHECK_OK(dd_sigmf_read(P("sig/i8.sigmf-meta"), &y, &n, &fs));
    if (y && n == 2) {
        const float *yf = (const float *)(const void *)y;
        CHECK(yf[0] == 0.5f && yf[1] == -1.0f && yf[2] == 127.0f / 128 && yf[3] == 0, "ci8 %g %g", yf[0], yf[1]);
    }
    dd_free(y);
    y = NULL;
    const unsigned char i32[8] = {0, 0, 0, 0x40, 0, 0, 0, 0xC0}; /* 2^30, -2^30 little endian */
    sigmf_fixture("sig/i32", "\"core:datatype\": \"ci32_le\", \"core:sample_rate\": 10", i32, 8);
    CHECK_OK(dd_sigmf_read(P("sig/i32.sigmf-meta"), &y, &n, &fs));
    CHECK(y && n == 1 && ((float *)(void *)y)[0] == 0.5f && ((float *)(void *)y)[1] == -0.5f, "ci32");
    dd_free(y);
    y = NULL;
    const unsigned char be[8] = {0x3F, 0xC0, 0, 0, 0xC1, 0x20, 0, 0}; /* 1.5, -10 big endian */
    sigmf_fixture("sig/be", "\"core:datatype\": \"cf32_be\", \"core:sample_rate\": 10", be, 8);
    CHECK_OK(dd_sigmf_read(P("sig/be.sigmf-meta"), &y, &n, &fs));
    CHECK(y && n == 1 && ((float *)(void *)y)[0] == 1.5f && ((float *)(void *)y)[1] == -10.0f, "cf32_be");
    dd_free(y);
    y = NULL;
    const unsigned char be16[4] = {0x80, 0x00, 0x40, 0x00}; /* -1, 0.5 */
    sigmf_fixture("sig/be16", "\"core:datatype\": \"ci16_be\", \"core:sample_rate\": 10", be16, 4);
    CHECK_OK(dd_sigmf_read(P("sig/be16.sigmf-meta"), &y, &n, &fs));
    CHECK(y && n == 1 && ((float *)(void *)y)[0] == -1.0f && ((float *)(void *)y)[1] == 0.5f, "ci16_be");
    dd_free(y);
    y = NULL;

    /* Bad recordings. */
    const float f4[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    sigmf_fixture("sig/r32", "\"core:datatype\": \"rf32_le\", \"core:sample_rate\": 10", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/r32.sigmf-meta"), &y, &n, &fs), DD_ERR_UNSUPPORTED, "r32.sigmf-meta: core:datatype 'rf32_le' is not supported");
    sigmf_fixture("sig/u8", "\"core:datatype\": \"cu8\", \"core:sample_rate\": 10", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/u8.sigmf-meta"), &y, &n, &fs), DD_ERR_UNSUPPORTED, "'cu8' is not supported");
    sigmf_fixture("sig/f16", "\"core:datatype\": \"cf16_le\", \"core:sample_rate\": 10", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/f16.sigmf-meta"), &y, &n, &fs), DD_ERR_UNSUPPORTED, "'cf16_le' is not supported");
    sigmf_fixture("sig/junk", "\"core:datatype\": \"complex\", \"core:sample_rate\": 10", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/junk.sigmf-meta"), &y, &n, &fs), DD_ERR_FORMAT, "junk.sigmf-meta: field 'core:datatype' has invalid value 'complex'");
    sigmf_fixture("sig/nosfx", "\"core:datatype\": \"cf32\", \"core:sample_rate\": 10", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/nosfx.sigmf-meta"), &y, &n, &fs), DD_ERR_FORMAT, "invalid value 'cf32'");
    /* content quoted in messages is escaped: no raw control bytes reach a terminal */
    sigmf_fixture("sig/dtesc", "\"core:datatype\": \"\\u001b[2J\\u0007cf32\", \"core:sample_rate\": 10", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/dtesc.sigmf-meta"), &y, &n, &fs), DD_ERR_FORMAT, "invalid value '\\x1b[2J\\x07cf32'");
    sigmf_fixture("sig/dtnum", "\"core:datatype\": 5, \"core:sample_rate\": 10", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/dtnum.sigmf-meta"), &y, &n, &fs), DD_ERR_FORMAT, "field 'core:datatype' must be a string");
    sigmf_fixture("sig/nodt", "\"core:sample_rate\": 10", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/nodt.sigmf-meta"), &y, &n, &fs), DD_ERR_FORMAT, "nodt.sigmf-meta: missing field 'core:datatype'");
    sigmf_fixture("sig/nors", "\"core:datatype\": \"cf32_le\"", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/nors.sigmf-meta"), &y, &n, &fs), DD_ERR_FORMAT, "nors.sigmf-meta: missing field 'core:sample_rate'");
    sigmf_fixture("sig/negrs", "\"core:datatype\": \"cf32_le\", \"core:sample_rate\": -5", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/negrs.sigmf-meta"), &y, &n, &fs), DD_ERR_RANGE, "'core:sample_rate' must be > 0");
    sigmf_fixture("sig/twoch", "\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 1, \"core:num_channels\": 2", f4, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/twoch.sigmf-meta"), &y, &n, &fs), DD_ERR_UNSUPPORTED, "core:num_channels");
    sigmf_fixture("sig/odd", "\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 10", f4, 12);
    CHECK_ERR(dd_sigmf_read(P("sig/odd.sigmf-meta"), &y, &n, &fs), DD_ERR_CORRUPT, "odd.sigmf-data: size 12 bytes is not a multiple of the 8-byte cf32_le sample");
    const float fnan[4] = {0.1f, 0.2f, 0.3f, NAN};
    sigmf_fixture("sig/nan", "\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 10", fnan, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/nan.sigmf-meta"), &y, &n, &fs), DD_ERR_RANGE, "nan.sigmf-data: sample 1 is NaN/Inf");
    const double dbig[2] = {1e300, 0};
    sigmf_fixture("sig/big", "\"core:datatype\": \"cf64_le\", \"core:sample_rate\": 10", dbig, 16);
    CHECK_ERR(dd_sigmf_read(P("sig/big.sigmf-meta"), &y, &n, &fs), DD_ERR_RANGE, "big.sigmf-data: sample 0 is NaN/Inf");
    dd_test_write(P("sig/noglob.sigmf-meta"), "{\"captures\": []}");
    CHECK_ERR(dd_sigmf_read(P("sig/noglob.sigmf-meta"), &y, &n, &fs), DD_ERR_FORMAT, "noglob.sigmf-meta: missing field 'global'");
    dd_test_write(P("sig/nodata.sigmf-meta"), "{\"global\": {\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 1}}");
    CHECK_ERR(dd_sigmf_read(P("sig/nodata.sigmf-meta"), &y, &n, &fs), DD_ERR_IO, "nodata.sigmf-data: No such file or directory");
    CHECK_ERR(dd_sigmf_read(P("sig/absent.sigmf-meta"), &y, &n, &fs), DD_ERR_IO, "absent.sigmf-meta: No such file or directory");
    dd_test_write(P("sig/syntax.sigmf-meta"), "{\"global\": {\n\"core:datatype\": cf32_le}}");
    CHECK_ERR(dd_sigmf_read(P("sig/syntax.sigmf-meta"), &y, &n, &fs), DD_ERR_FORMAT, "syntax.sigmf-meta:2: invalid JSON");
    CHECK(y == NULL, "array returned on error");
    dd_free(x);

    /* Datasets. */
    dd_dataset *ds = make_ds(600, 200, 201, 9), *rd = NULL;
    CHECK_OK(dd_dataset_save_sigmf(ds, P("sds/run1")));
    const char *ways[3] = {P("sds/run1"), P("sds"), P("sds/run1_output.sigmf-meta")};
    for (int w = 0; w < 3; w++) {
        CHECK_OK(dd_dataset_load(ways[w], &rd));
        if (rd) {
            CHECK(strcmp(rd->format, "sigmf") == 0, "format %s", rd->format);
            CHECK(same_dataset(ds, rd), "SigMF dataset round trip (%s)", ways[w]);
            CHECK(same_spec(&ds->spec, &rd->spec), "SigMF spec round trip (%s)", ways[w]);
        }
        dd_dataset_free(&rd);
    }
    /* Plain recordings without distdpd fields: spec defaults from fs, split by ratios. */
    dd_cf32 *a = dd_calloc(1001, sizeof *a);
    fill(&r, a, 1001, 0.5);
    CHECK_OK(dd_sigmf_write(P("plain/x_input"), a, 1001, 100e6, DD_SIGMF_CF32_LE, NULL));
    CHECK_OK(dd_sigmf_write(P("plain/x_output"), a, 1001, 100e6, DD_SIGMF_CF32_LE, NULL));
    CHECK_OK(dd_dataset_load(P("plain"), &rd));
    if (rd) {
        CHECK(rd->spec.fs == 100e6 && rd->spec.bw_main == 25e6 && rd->spec.n_sub == 10 &&
                  rd->spec.bw_sub == 2.5e6 && rd->spec.nperseg == 2560,
              "defaults: bw_main %g n_sub %d", rd->spec.bw_main, rd->spec.n_sub);
        CHECK(rd->n[0] == 600 && rd->n[1] == 200 && rd->n[2] == 201, "counts %zu %zu %zu", rd->n[0], rd->n[1], rd->n[2]);
        CHECK(rd->n[1] == 200 && same_bits(rd->in[1], a + 600, 200), "val slice");
    }
    dd_dataset_free(&rd);
    /* Length and rate mismatches. */
    CHECK_OK(dd_sigmf_write(P("plain/x_output"), a, 1000, 100e6, DD_SIGMF_CF32_LE, NULL));
    CHECK_ERR(dd_dataset_load(P("plain/x"), &rd), DD_ERR_MISMATCH, "x_input has 1001 samples but x_output has 1000");
    CHECK_OK(dd_sigmf_write(P("plain/x_output"), a, 1001, 50e6, DD_SIGMF_CF32_LE, NULL));
    CHECK_ERR(dd_dataset_load(P("plain/x"), &rd), DD_ERR_MISMATCH, "x_input.sigmf-meta: core:sample_rate 100000000 differs");
    /* Two pairs in one directory: ambiguous. */
    CHECK_OK(dd_sigmf_write(P("plain/y_input"), a, 10, 1e6, DD_SIGMF_CF32_LE, NULL));
    CHECK_OK(dd_sigmf_write(P("plain/y_output"), a, 10, 1e6, DD_SIGMF_CF32_LE, NULL));
    CHECK_ERR(dd_dataset_load(P("plain"), &rd), DD_ERR_ARG, "several SigMF input/output pairs");
    CHECK_OK(dd_dataset_load(P("plain/y"), &rd));
    CHECK(rd && rd->n[0] + rd->n[1] + rd->n[2] == 10, "y pair");
    dd_dataset_free(&rd);
    /* Bad split annotations / distdpd fields. */
    mkdir(P("ann"), 0777);
    sigmf_fixture("ann/z_output", "\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 10", f4, 16);
    write_bytes(P("ann/z_input.sigmf-data"), f4, 16);
    dd_test_write(P("ann/z_input.sigmf-meta"), "{\"global\": {\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 10}, "
                  "\"annotations\": [{\"core:sample_start\": 0, \"core:sample_count\": 1, \"core:label\": \"train\"}]}");
    CHECK_ERR(dd_dataset_load(P("ann/z"), &rd), DD_ERR_FORMAT, "z_input.sigmf-meta: annotations label some splits but not 'val'");
    dd_test_write(P("ann/z_input.sigmf-meta"), "{\"global\": {\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 10, \"distdpd:nperseg\": \"x\"}}");
    CHECK_ERR(dd_dataset_load(P("ann/z"), &rd), DD_ERR_FORMAT, "z_input.sigmf-meta: field 'distdpd:nperseg' must be a number");
    dd_test_write(P("ann/z_input.sigmf-meta"), "{\"global\": {\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 10, \"distdpd:nperseg\": 1e9}}");
    CHECK_ERR(dd_dataset_load(P("ann/z"), &rd), DD_ERR_RANGE, "z_input.sigmf-meta: field 'distdpd:nperseg' must be in [16, 1048576], found 1000000000");
    dd_free(a);
    dd_dataset_free(&ds);
}

static void test_bin(void) {
    dd_dataset *ds = make_ds(5000, 1234, 777, 3), *rd = NULL;
    const char *path = P("d.ddb");
    CHECK_OK(dd_dataset_save_bin(ds, path));
    CHECK(!exists(P("d.ddb.tmp")), "temporary left");
    CHECK_OK(dd_dataset_load(path, &rd));
    if (rd) {
        CHECK(strcmp(rd->format, "bin") == 0, "format %s", rd->format);
        CHECK(same_dataset(ds, rd), "binary round trip not bit-exact");
        CHECK(same_spec(&ds->spec, &rd->spec), "binary spec");
        for (int s = 0; s < 3; s++)
            CHECK((uintptr_t)rd->in[s] % 4096 == 0 && (uintptr_t)rd->out[s] % 4096 == 0, "block %d not page aligned", s);
    }
    /* Slices point into the mapping at the right place. */
    dd_bin_view *v = NULL;
    CHECK_OK(dd_bin_open(path, &v));
    if (v && rd) {
        CHECK(dd_bin_count(v, DD_SPLIT_VAL) == 1234 && dd_bin_spec(v)->fs == ds->spec.fs, "view counts");
        const dd_cf32 *in0, *out0, *in, *out;
        CHECK_OK(dd_bin_slice(v, DD_SPLIT_VAL, 0, 1234, &in0, &out0));
        CHECK_OK(dd_bin_slice(v, DD_SPLIT_VAL, 500, 300, &in, &out));
        CHECK(in == in0 + 500 && out == out0 + 500, "slice pointers");
        CHECK(same_bits(in, rd->in[1] + 500, 300) && same_bits(out, ds->out[1] + 500, 300), "slice data");
        CHECK_OK(dd_bin_slice(v, DD_SPLIT_TEST, 777, 0, &in, &out));
        CHECK_ERR(dd_bin_slice(v, DD_SPLIT_TEST, 700, 78, &in, &out), DD_ERR_RANGE, "d.ddb: slice [700, 700 + 78) is outside split 'test' of 777 samples");
        CHECK_ERR(dd_bin_slice(v, DD_SPLIT_TEST, SIZE_MAX, 2, &in, &out), DD_ERR_RANGE, "outside split");
        CHECK_OK(dd_bin_advise(v, DD_SPLIT_TRAIN, 100, 4000, DD_BIN_SEQUENTIAL));
        CHECK_OK(dd_bin_advise(v, DD_SPLIT_VAL, 0, 1234, DD_BIN_RANDOM));
        CHECK_OK(dd_bin_advise(v, DD_SPLIT_TEST, 1, 5, DD_BIN_WILLNEED));
        CHECK_OK(dd_bin_verify(v));
    }
    dd_bin_close(&v);
    CHECK(v == NULL, "close does not clear the handle");
    dd_dataset_free(&rd);

    size_t size;
    unsigned char *img = dd_test_slurp(path, &size);
    /* Truncated by 100 bytes: refused, with both sizes. */
    char want[256];
    write_bytes(P("t.ddb"), img, size - 100);
    snprintf(want, sizeof want, "t.ddb: truncated: expected %zu bytes, found %zu", size, size - 100);
    CHECK_ERR(dd_dataset_load(P("t.ddb"), &rd), DD_ERR_CORRUPT, want);
    CHECK_ERR(dd_bin_open(P("t.ddb"), &v), DD_ERR_CORRUPT, want);
    write_bytes(P("t2.ddb"), img, 1000);
    CHECK_ERR(dd_dataset_load(P("t2.ddb"), &rd), DD_ERR_CORRUPT, "t2.ddb: truncated: expected at least 4096 bytes");
    write_bytes(P("t3.ddb"), img, 5);
    CHECK_ERR(dd_bin_open(P("t3.ddb"), &v), DD_ERR_CORRUPT, "t3.ddb: truncated: expected at least 4096 bytes (header), found 5");
    dd_test_write(P("t4.ddb"), "abc");
    CHECK_ERR(dd_dataset_load(P("t4.ddb"), &rd), DD_ERR_FORMAT, "t4.ddb: bad magic");
    /* Extra bytes at the end. */
    unsigned char *longer = calloc(size + 8, 1);
    memcpy(longer, img, size);
    write_bytes(P("long.ddb"), longer, size + 8);
    CHECK_ERR(dd_dataset_load(P("long.ddb"), &rd), DD_ERR_CORRUPT, "long.ddb: 8 unexpected trailing bytes");
    free(longer);
    /* One flipped bit anywhere in the header (spec, counts, offsets, padding): refused. */
    const size_t flips[6] = {30, 60, 100, 130, 2000, 4094};
    for (int i = 0; i < 6; i++) {
        img[flips[i]] ^= 0x10;
        write_bytes(P("flip.ddb"), img, size);
        img[flips[i]] ^= 0x10;
        CHECK_ERR(dd_dataset_load(P("flip.ddb"), &rd), DD_ERR_CORRUPT, "flip.ddb: header checksum mismatch");
    }
    /* Magic and version. */
    img[0] = 'X';
    write_bytes(P("magic.ddb"), img, size);
    img[0] = 'D';
    CHECK_ERR(dd_dataset_load(P("magic.ddb"), &rd), DD_ERR_FORMAT, "magic.ddb: bad magic");
    img[8] = 2;
    write_bytes(P("ver.ddb"), img, size);
    img[8] = 1;
    CHECK_ERR(dd_dataset_load(P("ver.ddb"), &rd), DD_ERR_UNSUPPORTED, "ver.ddb: unsupported format version 2");
    /* A flipped data bit passes the (lazy) load but not dd_bin_verify. */
    img[size - 3] ^= 1;
    write_bytes(P("data.ddb"), img, size);
    CHECK_OK(dd_bin_open(P("data.ddb"), &v));
    if (v) CHECK_ERR(dd_bin_verify(v), DD_ERR_CORRUPT, "data.ddb: test output block checksum mismatch");
    dd_bin_close(&v);
    img[size - 3] ^= 1;
    /* NaN or Inf in the samples (written by another tool; the data CRCs are not checked
     * on load): dd_dataset_load reports the file, split, block, sample and component,
     * as the CSV reader does, instead of training diverging or "ref has zero energy". */
    {
        uint64_t off[6];
        memcpy(off, img + 120, sizeof off);
        const uint32_t qnan = 0x7fc00000u, pinf = 0x7f800000u, ninf = 0xff800000u;
        struct {
            int block;
            uint32_t bits;
            size_t sample, comp;
            const char *name, *want;
        } cases[4] = {
            {0, qnan, 1234, 0, "nan_train.ddb", "nan_train.ddb: split 'train' input, sample 1234 (I) is NaN"},
            {5, pinf, 776, 1, "inf_test.ddb", "inf_test.ddb: split 'test' output, sample 776 (Q) is +Inf"},
            {3, ninf, 0, 0, "inf_val.ddb", "inf_val.ddb: split 'val' output, sample 0 (I) is -Inf"},
            {1, qnan | 0x80000000u, 4999, 1, "nan_last.ddb", "nan_last.ddb: split 'train' output, sample 4999 (Q) is NaN"},
        };
        for (int c = 0; c < 4; c++) {
            size_t at = (size_t)off[cases[c].block] + 8 * cases[c].sample + 4 * cases[c].comp;
            unsigned char keep[4];
            memcpy(keep, img + at, 4);
            memcpy(img + at, &cases[c].bits, 4);
            write_bytes(P(cases[c].name), img, size);
            memcpy(img + at, keep, 4);
            rd = (dd_dataset *)1;
            CHECK_ERR(dd_dataset_load(P(cases[c].name), &rd), DD_ERR_RANGE, cases[c].want);
            CHECK(rd == NULL, "dataset returned on error");
            CHECK_OK(dd_bin_open(P(cases[c].name), &v)); /* the header-only open still works */
            if (v) CHECK_ERR(dd_bin_verify(v), DD_ERR_CORRUPT, "block checksum mismatch");
            dd_bin_close(&v);
        }
    }
    free(img);

    /* Streaming writer: chunks in any order; incomplete or overfull refused. */
    dd_bin_writer *w = NULL;
    CHECK_OK(dd_bin_writer_open(P("s.ddb"), &ds->spec, ds->n, &w));
    for (int s = 2; s >= 0; s--)
        for (size_t at = 0; at < ds->n[s]; at += 1000) {
            size_t c = ds->n[s] - at < 1000 ? ds->n[s] - at : 1000;
            CHECK_OK(dd_bin_writer_append(w, (dd_split)s, ds->in[s] + at, ds->out[s] + at, c));
        }
    CHECK_ERR(dd_bin_writer_append(w, DD_SPLIT_VAL, ds->in[1], ds->out[1], 1), DD_ERR_ARG, "exceeds the 1234 announced");
    CHECK_OK(dd_bin_writer_commit(&w));
    CHECK(w == NULL, "commit does not clear the handle");
    CHECK_OK(dd_dataset_load(P("s.ddb"), &rd));
    CHECK(rd && same_dataset(ds, rd), "streamed file differs");
    dd_dataset_free(&rd);
    CHECK_OK(dd_bin_writer_open(P("inc.ddb"), &ds->spec, ds->n, &w));
    CHECK_OK(dd_bin_writer_append(w, DD_SPLIT_TRAIN, ds->in[0], ds->out[0], 10));
    CHECK_ERR(dd_bin_writer_commit(&w), DD_ERR_ARG, "inc.ddb: split 'train' has 10 of 5000 samples written");
    CHECK(!exists(P("inc.ddb")) && !exists(P("inc.ddb.tmp")), "incomplete file left behind");
    dd_cf32 nanv[1];
    ((float *)(void *)nanv)[0] = 0;
    ((float *)(void *)nanv)[1] = INFINITY;
    CHECK_OK(dd_bin_writer_open(P("nan.ddb"), &ds->spec, ds->n, &w));
    CHECK_ERR(dd_bin_writer_append(w, DD_SPLIT_TEST, ds->in[2], nanv, 1), DD_ERR_RANGE, "nan.ddb: split 'test' output sample 0 is NaN/Inf");
    dd_bin_writer_abort(&w);
    CHECK(!exists(P("nan.ddb.tmp")) && w == NULL, "abort");
    dd_spec bad = ds->spec;
    bad.n_sub = 0;
    CHECK_ERR(dd_bin_writer_open(P("bad.ddb"), &bad, ds->n, &w), DD_ERR_RANGE, "bad.ddb: field 'n_sub_ch'");
    dd_dataset_free(&ds);
}

/* Writes text then extends the file with a hole to `size` bytes (sparse: no disk). */
static void write_sparse(const char *path, const char *text, off_t size) {
    dd_test_write(path, text);
    if (truncate(path, size) != 0) {
        perror(path);
        exit(2);
    }
}

static dd_status probe_csv_fn(void *arg) {
    dd_cf32 *x = NULL;
    size_t n = 0;
    dd_status st = dd_csv_read_iq((const char *)arg, &x, &n);
    dd_free(x);
    return st;
}

static dd_status probe_spec_fn(void *arg) {
    dd_spec s;
    return dd_spec_read_json((const char *)arg, &s, NULL, 0);
}

static dd_status probe_bin_fn(void *arg) {
    dd_bin_view *v = NULL;
    dd_status st = dd_bin_open((const char *)arg, &v);
    dd_bin_close(&v);
    return st;
}

/* Runs fn(path) in a child (10 s limit, 1 GiB more address space) and checks the
 * outcome: status, a message containing `needle`, at most max_s seconds and max_kb KiB
 * of peak RSS growth (not checked under ASan or valgrind: probe_rss_meaningful); the limits
 * in time scaled by DD_TEST_TIMEOUT_SCALE. */
static void check_probe(dd_status (*fn)(void *), const char *path, dd_status want, const char *needle,
                        double max_s, long max_kb) {
    probe_res r;
    CHECK(probe_run(fn, (void *)path, 10, 1024, &r) == 0, "probe of %s did not run", path);
    CHECK(r.exited, "%s: the read did not finish: %s", path, r.msg);
    if (!r.exited) return;
    CHECK(r.status == want, "%s: status %s, want %s: %s", path, dd_status_str(r.status), dd_status_str(want), r.msg);
    CHECK(strstr(r.msg, needle) != NULL, "%s: message '%s' lacks '%s'", path, r.msg, needle);
    CHECK(r.secs <= max_s * dd_test_timeout_scale(), "%s: took %.3f s (limit %.3g s)", path, r.secs,
          max_s * dd_test_timeout_scale());
    if (probe_rss_meaningful()) CHECK(r.rss_kb <= max_kb, "%s: peak RSS grew by %ld KiB (limit %ld KiB)", path, r.rss_kb, max_kb);
    printf("bounded read: %-24s %.4f s, peak RSS +%ld KiB: %s\n", strrchr(path, '/') ? strrchr(path, '/') + 1 : path, r.secs, r.rss_kb, r.msg);
}

/* The CSV and JSON readers work in memory bounded by the parsed data (one 1 MiB line
 * buffer), stop at the first bad line, and refuse non-regular files before reading. */
static void test_csv_bounded(void) {
    const off_t G2 = (off_t)2 << 30;
    /* a valid header, then 2 GB of NULs (a sparse file): line 2 at once */
    write_sparse(P("sparse.csv"), "I,Q\n", G2);
    check_probe(probe_csv_fn, P("sparse.csv"), DD_ERR_FORMAT, "sparse.csv:2: NUL byte", 1.0, 8 << 10);
    /* a bad number on line 3, then 2 GB of NULs: the first bad line wins */
    write_sparse(P("sparse3.csv"), "I,Q\n1,2\nx,3\n", G2);
    check_probe(probe_csv_fn, P("sparse3.csv"), DD_ERR_FORMAT, "sparse3.csv:3: column 1 ('I') is not a number: 'x'",
                1.0, 8 << 10);
    /* NUL in the header line */
    write_sparse(P("sparse1.csv"), "I,", G2);
    check_probe(probe_csv_fn, P("sparse1.csv"), DD_ERR_FORMAT, "sparse1.csv:1: NUL byte", 1.0, 8 << 10);
    remove(P("sparse.csv"));
    remove(P("sparse3.csv"));
    remove(P("sparse1.csv"));
    /* one 3 MiB line of digits: refused after one buffer */
    {
        size_t n = (size_t)3 << 20;
        char *b = malloc(n + 5);
        memcpy(b, "I,Q\n", 4);
        memset(b + 4, '1', n);
        write_bytes(P("longline.csv"), b, n + 4);
        free(b);
        check_probe(probe_csv_fn, P("longline.csv"), DD_ERR_FORMAT, "longline.csv:2: line longer than 1048576 bytes",
                    1.0, 8 << 10);
        remove(P("longline.csv"));
    }
    /* a FIFO without a writer (a plain open would block forever), /dev/zero (endless),
     * a directory: refused before anything is read */
    if (mkfifo(P("fifo.csv"), 0600) == 0) {
                check_probe(probe_csv_fn, P("fifo.csv"), DD_ERR_IO, "fifo.csv: not a regular file (a FIFO)", 1.0, 8 << 10);
        check_probe(probe_spec_fn, P("fifo.csv"), DD_ERR_IO, "fifo.csv: not a regular file (a FIFO)", 1.0, 8 << 10);
        check_probe(probe_bin_fn, P("fifo.csv"), DD_ERR_IO, "fifo.csv: not a regular file (a FIFO)", 1.0, 8 << 10);
    } else {
        CHECK(0, "mkfifo: %s", strerror(errno));
    }
    if (access("/dev/zero", R_OK) == 0) {
        check_probe(probe_csv_fn, "/dev/zero", DD_ERR_IO, "/dev/zero: not a regular file (a character device)", 1.0,
                    8 << 10);
        check_probe(probe_spec_fn, "/dev/zero", DD_ERR_IO, "/dev/zero: not a regular file (a character device)", 1.0,
                    8 << 10);
    }
    check_probe(probe_csv_fn, g_dir, DD_ERR_IO, "Is a directory", 1.0, 8 << 10);
    /* a spec.json larger than the JSON limit is refused by its size, not read */
    write_sparse(P("huge.json"), "{", (off_t)1 << 30);
    check_probe(probe_spec_fn, P("huge.json"), DD_ERR_FORMAT, "huge.json: file too large: 1073741824 bytes (at most 67108864)", 1.0,
                8 << 10);
    remove(P("huge.json"));

    /* A valid file: peak memory is the sample array (grown geometrically, at most twice
     * the data) plus the line buffer, not a copy of the file. 500,000 rows: 4 MB of
     * samples in a 9.5 MB file (the whole-file reader held up to 3x the file). */
    {
        const size_t n = 500000;
        dd_cf32 *x = dd_calloc(n, sizeof *x);
        dd_rng r;
        dd_rng_seed(&r, 5);
        fill(&r, x, n, 0.25);
        CHECK_OK(dd_csv_write_iq(P("half.csv"), x, n));
        long data_kb = (long)(n * sizeof *x / 1024);
        check_probe(probe_csv_fn, P("half.csv"), DD_OK, "", 5.0, 2 * data_kb + 3 * 1024);
        remove(P("half.csv"));
        dd_free(x);
    }

    /* Lines that straddle the 1 MiB buffer boundary, with CRLF and lone CR endings whose
     * CR and LF fall in different reads: every value read back exactly. */
    for (int mode = 0; mode < 2; mode++) {
        const size_t n = 200000;
        const char *eol = mode ? "\r" : "\r\n";
        FILE *f = fopen(P("straddle.csv"), "wb");
        fprintf(f, "I,Q%s", eol);
        for (size_t i = 0; i < n; i++) fprintf(f, "%zu,%s-%zu.5%s", i, i % 7 ? "" : "  ", i % 1000, eol);
        fclose(f);
        dd_cf32 *y = NULL;
        size_t m = 0;
        CHECK_OK(dd_csv_read_iq(P("straddle.csv"), &y, &m));
        CHECK(m == n, "straddle (%s): %zu rows, want %zu", mode ? "CR" : "CRLF", m, n);
        int bad = 0;
        const float *v = (const float *)(const void *)y;
        for (size_t i = 0; y && i < m && !bad; i++)
            bad = v[2 * i] != (float)i || v[2 * i + 1] != -(float)(i % 1000) - 0.5f;
        CHECK(!bad, "straddle (%s): a value differs", mode ? "CR" : "CRLF");
        dd_free(y);
    }
    remove(P("straddle.csv"));
}

static void test_misc(void) {
    dd_dataset *rd = NULL;
    CHECK(strcmp(dd_split_name(DD_SPLIT_TRAIN), "train") == 0 && strcmp(dd_split_name(DD_SPLIT_VAL), "val") == 0 &&
              strcmp(dd_split_name(DD_SPLIT_TEST), "test") == 0, "split names");
    CHECK_ERR(dd_dataset_load(P("no_such_thing"), &rd), DD_ERR_IO, "cannot open");
    CHECK_ERR(dd_dataset_load(P("no_such_thing"), &rd), DD_ERR_IO, "no_such_thing: No such file or directory");
    mkdir(P("emptydir"), 0777);
    CHECK_ERR(dd_dataset_load(P("emptydir"), &rd), DD_ERR_IO, "emptydir: not a dataset");
    /* the real reason, not "No such file or directory": a symbolic link loop as the
     * data set, as its spec.json, as a CSV; an unreadable directory (root reads
     * everything, so that case only runs as another user) */
    CHECK(symlink("loop", P("loop")) == 0, "symlink: %s", strerror(errno));
    CHECK_ERR(dd_dataset_load(P("loop"), &rd), DD_ERR_IO, "cannot open");
    CHECK_ERR(dd_dataset_load(P("loop"), &rd), DD_ERR_IO, "loop: Too many levels of symbolic links");
    mkdir(P("loopdir"), 0777);
    CHECK(symlink("spec.json", P("loopdir/spec.json")) == 0, "symlink: %s", strerror(errno));
    CHECK_ERR(dd_dataset_load(P("loopdir"), &rd), DD_ERR_IO, "loopdir/spec.json: Too many levels of symbolic links");
    {
        dd_cf32 *x = NULL;
        size_t n = 0;
        CHECK_ERR(dd_csv_read_iq(P("loop"), &x, &n), DD_ERR_IO, "loop: Too many levels of symbolic links");
    }
    mkdir(P("shut"), 0777);
    mkdir(P("shut/inner"), 0777);
    dd_test_write(P("shut/inner/spec.json"), "{}");
    mkdir(P("noread"), 0777);
    chmod(P("shut"), 0);
    chmod(P("noread"), 0300); /* searchable, not listable: no spec.json, cannot look for SigMF */
    if (geteuid() != 0) {
        CHECK_ERR(dd_dataset_load(P("shut/inner"), &rd), DD_ERR_IO, "shut/inner: Permission denied");
        CHECK_ERR(dd_dataset_load(P("shut"), &rd), DD_ERR_IO, "shut/spec.json: Permission denied");
        CHECK_ERR(dd_dataset_load(P("noread"), &rd), DD_ERR_IO, "cannot list");
        CHECK_ERR(dd_dataset_load(P("noread"), &rd), DD_ERR_IO, "noread: Permission denied");
    } else {
        printf("skipped: the EACCES cases (unreadable directories) run only as a non-root user\n");
    }
    chmod(P("shut"), 0755);
    chmod(P("noread"), 0755);
    if (mkfifo(P("fifo.ds"), 0600) == 0)
        CHECK_ERR(dd_dataset_load(P("fifo.ds"), &rd), DD_ERR_IO, "fifo.ds: not a regular file or directory (a FIFO)");
    dd_test_write(P("notes.txt"), "hello\n");
    CHECK_ERR(dd_dataset_load(P("notes.txt"), &rd), DD_ERR_FORMAT, "notes.txt: unknown dataset format");
    CHECK(rd == NULL, "dataset on error");

    /* from_arrays copies; refuses NaN, NULL arrays and a bad spec. */
    dd_spec sp;
    dd_spec_default(&sp);
    dd_cf32 a[4] = {0}, b[4] = {0};
    ((float *)(void *)a)[0] = 1.0f;
    size_t n[3] = {2, 1, 1};
    const dd_cf32 *in[3] = {a, a + 2, a + 3}, *out[3] = {b, b + 2, b + 3};
    CHECK_OK(dd_dataset_from_arrays(&sp, n, in, out, &rd));
    ((float *)(void *)a)[0] = 2.0f;
    CHECK(rd && ((const float *)(const void *)rd->in[0])[0] == 1.0f && rd->in[0] != a, "not a copy");
    CHECK(rd && strcmp(rd->format, "memory") == 0, "format");
    dd_dataset_free(&rd);
    ((float *)(void *)b)[5] = NAN;
    CHECK_ERR(dd_dataset_from_arrays(&sp, n, in, out, &rd), DD_ERR_RANGE, "out[val] sample 0 is NaN/Inf");
    ((float *)(void *)b)[5] = 0;
    const dd_cf32 *none[3] = {a, NULL, a};
    CHECK_ERR(dd_dataset_from_arrays(&sp, n, none, out, &rd), DD_ERR_ARG, "split 'val' has 1 samples but a NULL array");
    sp.split[0] = 0.9;
    CHECK_ERR(dd_dataset_from_arrays(&sp, n, in, out, &rd), DD_ERR_RANGE, "must sum to 1");
}

/* Random byte mutations of valid files: every outcome is either success with finite data
 * or an error whose message names the file. Run under ASan this also checks that no
 * malformed input reads out of bounds. */
static size_t mutate(dd_rng *r, unsigned char *b, size_t n, size_t cap) {
    static const char alphabet[] = ",\n\r\0e-+.0123456789nNaIifx \"{}[]:";
    int k = 1 + (int)dd_rng_below(r, 3);
    for (int i = 0; i < k && n > 0; i++) {
        size_t at = dd_rng_below(r, n);
        unsigned char c = dd_rng_below(r, 4) == 0 ? (unsigned char)dd_rng_below(r, 256)
                                                  : (unsigned char)alphabet[dd_rng_below(r, sizeof alphabet - 1)];
        switch (dd_rng_below(r, 3)) {
        case 0: b[at] = c; break;
        case 1: memmove(b + at, b + at + 1, n - at - 1); n--; break;
        default:
            if (n < cap) {
                memmove(b + at + 1, b + at, n - at);
                b[at] = c;
                n++;
            }
        }
    }
    return n;
}

static int all_finite(const dd_cf32 *x, size_t n) {
    const float *f = (const float *)(const void *)x;
    for (size_t i = 0; i < 2 * n; i++)
        if (!isfinite(f[i])) return 0;
    return 1;
}

static void test_fuzz(void) {
    dd_rng r;
    dd_rng_seed(&r, 2024);
    unsigned char b[4096];
    int ok = 0, bad = 0;
    const char *csv = "I,Q\n0.1,0.2\n-3e-2,4\n5,6\n";
    for (int it = 0; it < 400; it++) {
        size_t n = strlen(csv);
        memcpy(b, csv, n);
        n = mutate(&r, b, n, sizeof b);
        write_bytes(P("fz.csv"), b, n);
        dd_cf32 *x = NULL;
        size_t m = 0;
        dd_status st = dd_csv_read_iq(P("fz.csv"), &x, &m);
        if (st == DD_OK) {
            ok++;
            CHECK(all_finite(x, m) && m <= 4, "fuzzed CSV gave %zu samples", m);
        } else {
            bad++;
            CHECK(strstr(dd_last_error(), "fz.csv") != NULL, "message lacks the file: %s", dd_last_error());
        }
        dd_free(x);
    }
    for (int it = 0; it < 400; it++) {
        size_t n = strlen(SPEC_OK);
        memcpy(b, SPEC_OK, n);
        n = mutate(&r, b, n, sizeof b);
        write_bytes(P("fz.json"), b, n);
        dd_spec sp;
        char fmt[32];
        dd_status st = dd_spec_read_json(P("fz.json"), &sp, fmt, sizeof fmt);
        if (st == DD_OK) {
            ok++;
            CHECK_OK(dd_spec_check(&sp, "fuzzed spec"));
        } else {
            bad++;
            CHECK(strstr(dd_last_error(), "fz.json") != NULL, "message lacks the file: %s", dd_last_error());
        }
    }
    const float f4[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    write_bytes(P("fzs.sigmf-data"), f4, sizeof f4);
    const char *meta = "{\"global\": {\"core:datatype\": \"cf32_le\", \"core:sample_rate\": 10, "
                       "\"core:version\": \"1.0.0\"}, \"captures\": [{\"core:sample_start\": 0}], "
                       "\"annotations\": []}";
    for (int it = 0; it < 400; it++) {
        size_t n = strlen(meta);
        memcpy(b, meta, n);
        n = mutate(&r, b, n, sizeof b);
        write_bytes(P("fzs.sigmf-meta"), b, n);
        dd_cf32 *x = NULL;
        size_t m = 0;
        double fs = 0;
        dd_status st = dd_sigmf_read(P("fzs.sigmf-meta"), &x, &m, &fs);
        if (st == DD_OK) {
            ok++;
            CHECK(all_finite(x, m) && fs > 0, "fuzzed SigMF");
        } else {
            bad++;
            CHECK(strstr(dd_last_error(), "fzs.sigmf-") != NULL, "message lacks the file: %s", dd_last_error());
        }
        dd_free(x);
    }
    /* Binary headers: mutated and, half of the time, re-checksummed so that the field
     * checks (counts, offsets, sizes, spec) are what must catch the damage. */
    dd_dataset *ds = make_ds(100, 30, 20, 4);
    CHECK_OK(dd_dataset_save_bin(ds, P("fz0.ddb")));
    dd_dataset_free(&ds);
    size_t size;
    unsigned char *img = dd_test_slurp(P("fz0.ddb"), &size), *work = malloc(size);
    for (int it = 0; it < 400; it++) {
        memcpy(work, img, size);
        int k = 1 + (int)dd_rng_below(&r, 4);
        for (int i = 0; i < k; i++) {
            size_t at = dd_rng_below(&r, 200); /* the used part of the header */
            work[at] ^= (unsigned char)(1u << dd_rng_below(&r, 8));
        }
        if (it & 1) {
            uint32_t crc = dd_crc32c(0, work, 4092);
            memcpy(work + 4092, &crc, 4);
        }
        size_t len = dd_rng_below(&r, 8) == 0 ? dd_rng_below(&r, size) : size;
        write_bytes(P("fz.ddb"), work, len);
        dd_bin_view *v = NULL;
        dd_status st = dd_bin_open(P("fz.ddb"), &v);
        if (st == DD_OK) {
            ok++;
            double sum = 0;
            for (int s = 0; s < 3; s++) {
                const dd_cf32 *in, *out;
                size_t c = dd_bin_count(v, (dd_split)s);
                CHECK_OK(dd_bin_slice(v, (dd_split)s, 0, c, &in, &out));
                const float *fi = (const float *)(const void *)in, *fo = (const float *)(const void *)out;
                for (size_t i = 0; i < 2 * c; i++) sum += fabs((double)fi[i]) + fabs((double)fo[i]);
            }
            (void)dd_bin_verify(v);
            CHECK(isfinite(sum), "mapped data of an accepted header not finite");
        } else {
            bad++;
            CHECK(strstr(dd_last_error(), "fz.ddb") != NULL, "message lacks the file: %s", dd_last_error());
        }
        dd_bin_close(&v);
    }
    free(img);
    free(work);
    printf("fuzz: %d inputs accepted, %d refused\n", ok, bad);
}

/* The real OpenDPD DPA_200MHz dataset. */
static void test_dpa(void) {
    char dir[1024], file[1200];
    snprintf(dir, sizeof dir, "%s/../shared/data/opendpd/DPA_200MHz", dd_test_srcdir());
    snprintf(file, sizeof file, "%s/train_input.csv", dir);
    FILE *f = fopen(file, "r");
    if (!f) {
        printf("DPA_200MHz not found at %s: real-data checks skipped\n", dir);
        return;
    }
    char line[256];
    float i0 = 0, q0 = 0;
    if (fgets(line, sizeof line, f) && fgets(line, sizeof line, f)) {
        char *e;
        i0 = strtof(line, &e);
        q0 = strtof(e + 1, NULL);
    }
    fclose(f);
    dd_dataset *ds = NULL;
    double t0 = dd_now();
    CHECK_OK(dd_dataset_load(dir, &ds));
    double t = dd_now() - t0;
    if (!ds) return;
    printf("DPA_200MHz: loaded 6 CSVs (%zu samples) in %.1f ms\n", ds->n[0] + ds->n[1] + ds->n[2], 1e3 * t);
    CHECK(ds->n[0] == 23040 && ds->n[1] == 7680 && ds->n[2] == 7680, "counts %zu %zu %zu", ds->n[0], ds->n[1], ds->n[2]);
    CHECK(ds->spec.fs == 800e6 && ds->spec.bw_main == 200e6 && ds->spec.bw_sub == 20e6 &&
              ds->spec.n_sub == 10 && ds->spec.nperseg == 2560 && ds->spec.split[0] == 0.6,
          "spec fs %g", ds->spec.fs);
    CHECK(strcmp(ds->format, "split_csv") == 0, "format %s", ds->format);
    const float *x = (const float *)(const void *)ds->in[0];
    CHECK(x[0] == i0 && x[1] == q0 && i0 != 0, "first sample %.9g %.9g vs CSV %.9g %.9g", x[0], x[1], i0, q0);
    /* Converted to the binary format, identical and mapped. */
    dd_dataset *b = NULL;
    CHECK_OK(dd_dataset_save_bin(ds, P("dpa.ddb")));
    t0 = dd_now();
    CHECK_OK(dd_dataset_load(P("dpa.ddb"), &b));
    t = dd_now() - t0;
    printf("DPA_200MHz as .ddb: mapped in %.3f ms\n", 1e3 * t);
    CHECK(b && same_dataset(ds, b) && same_spec(&ds->spec, &b->spec), "DPA via .ddb differs");
    dd_dataset_free(&b);
    dd_dataset_free(&ds);
}

/* Parsing speed on a large file (reported, not asserted), plus its bit-exact round trip. */
static void test_speed(void) {
    const size_t n = 1000000;
    dd_cf32 *x = dd_calloc(n, sizeof *x), *y = NULL;
    dd_rng r;
    dd_rng_seed(&r, 11);
    fill(&r, x, n, 0.25);
    double t0 = dd_now();
    CHECK_OK(dd_csv_write_iq(P("big.csv"), x, n));
    double tw = dd_now() - t0;
    size_t m = 0;
    t0 = dd_now();
    CHECK_OK(dd_csv_read_iq(P("big.csv"), &y, &m));
    double tr = dd_now() - t0;
    CHECK(m == n && y && same_bits(x, y, n), "large CSV round trip");
    printf("CSV %zu rows: write %.3f s (%.2f Mrows/s), read %.3f s (%.2f Mrows/s)\n", n, tw,
           n / tw / 1e6, tr, n / tr / 1e6);
    remove(P("big.csv"));
    dd_free(x);
    dd_free(y);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", dd_test_tmpdir());
    test_csv();
    test_csv_bounded();
    test_spec();
    test_opendpd();
    test_sigmf();
    test_bin();
    test_misc();
    test_fuzz();
    test_dpa();
    test_speed();
    dd_t_rm(g_dir); /* tests/dd_test.h: no shell */
    return dd_test_done("test_dataset");
}
