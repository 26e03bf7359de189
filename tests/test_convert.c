/* dd_dataset_convert: every layout to every other (csv-dir, csv, sigmf, bin; 16 pairs) gives
 * bit-identical samples (float32 everywhere, CSV through "%.9g": values chosen to need all
 * 9 digits, denormals, -0, large exponents), the spec carried over field by field, chunk
 * sizes that cut across split boundaries, --split ratios giving exactly floor(N r) samples
 * with the recording unchanged in time order, and the errors named (missing source, a bad
 * CSV line with file and line, a NaN in a binary source, the output being the source, an
 * unknown format name, bad ratios), and a ci16 SigMF pair read in chunks exactly as the
 * loader reads it. */
#include "distdpd/dataset.h"
#include "dd_test.h"

#include <complex.h>
#include <math.h>
#include <string.h>

#include "data_test_util.h"

/* The output path of a format under name. */
static const char *out_path(dd_data_format f, const char *name) {
    char nm[96];
    snprintf(nm, sizeof nm, "%s%s", name, f == DD_FMT_BIN ? ".ddb" : "");
    return P(nm);
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* A float with a random mantissa and exponent; every 97th a denormal, every 89th -0. */
static float rnd(uint64_t *s, size_t i) {
    if (i % 89 == 5) return -0.0f;
    uint32_t u = (uint32_t)lcg(s);
    if (i % 97 == 3) u &= 0x807fffffu; /* exponent 0: denormal */
    else u = (u & 0x807fffffu) | ((uint32_t)(100 + lcg(s) % 60) << 23);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void check_same(const dd_dataset *a, const dd_dataset *b, const char *what) {
    for (int s = 0; s < 3; s++) {
        CHECK(a->n[s] == b->n[s], "%s: split %d has %zu samples, want %zu", what, s, b->n[s], a->n[s]);
        if (a->n[s] != b->n[s]) return;
        CHECK(memcmp(a->in[s], b->in[s], a->n[s] * sizeof(dd_cf32)) == 0, "%s: split %d input differs", what, s);
        CHECK(memcmp(a->out[s], b->out[s], a->n[s] * sizeof(dd_cf32)) == 0, "%s: split %d output differs", what, s);
    }
    const dd_spec *x = &a->spec, *y = &b->spec;
    CHECK(x->fs == y->fs && x->bw_main == y->bw_main && x->bw_sub == y->bw_sub && x->n_sub == y->n_sub &&
              x->nperseg == y->nperseg && x->bw_occupied == y->bw_occupied,
          "%s: spec differs (fs %g/%g, bw_main %g/%g, n_sub %d/%d, nperseg %zu/%zu, bw_occupied %g/%g)", what, x->fs,
          y->fs, x->bw_main, y->bw_main, x->n_sub, y->n_sub, x->nperseg, y->nperseg, x->bw_occupied, y->bw_occupied);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", dd_test_tmpdir());
    const size_t n[3] = {6000, 2000, 2007}, N = n[0] + n[1] + n[2];
    dd_cf32 *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint64_t seed = 42;
    for (size_t i = 0; i < N; i++) {
        x[i] = CMPLXF(rnd(&seed, 2 * i), rnd(&seed, 2 * i + 1));
        y[i] = CMPLXF(rnd(&seed, i + 7), rnd(&seed, i + 11));
    }
    dd_spec sp;
    data_test_spec(&sp);
    sp.split[0] = (double)n[0] / (double)N; /* reproduces n[] (single CSV keeps the counts) */
    sp.split[1] = (double)n[1] / (double)N;
    sp.split[2] = 1.0 - sp.split[0] - sp.split[1];
    const dd_cf32 *in[3] = {x, x + n[0], x + n[0] + n[1]}, *out[3] = {y, y + n[0], y + n[0] + n[1]};
    dd_dataset *ref;
    CHECK_OK(dd_dataset_from_arrays(&sp, n, in, out, &ref));

    /* one source in each layout, written by the existing writers */
    char srcbuf[4][1024];
    const char *const srcname[4] = {"src_dir", "src_single", "src_sig/rec", "src.ddb"};
    const char *src[4];
    for (int i = 0; i < 4; i++) {
        snprintf(srcbuf[i], sizeof srcbuf[i], "%s", P(srcname[i]));
        src[i] = srcbuf[i];
    }
    CHECK_OK(dd_dataset_save_opendpd(ref, src[DD_FMT_CSV_DIR]));
    CHECK_OK(dd_dataset_save_opendpd_single(ref, src[DD_FMT_CSV]));
    CHECK_OK(dd_dataset_save_sigmf(ref, src[DD_FMT_SIGMF]));
    CHECK_OK(dd_dataset_save_bin(ref, src[DD_FMT_BIN]));

    /* every pair, with chunks that cut across the split boundaries */
    const size_t chunks[2] = {777, 0};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            char name[64], what[96];
            snprintf(name, sizeof name, "o_%d_%d", a, b);
            const char *o = out_path((dd_data_format)b, name);
            dd_convert_opts opt = {0, {0, 0, 0}, chunks[(a + b) & 1]};
            dd_convert_info info;
            snprintf(what, sizeof what, "%s -> %s", dd_data_format_name((dd_data_format)a),
                     dd_data_format_name((dd_data_format)b));
            CHECK_OK(dd_dataset_convert(src[a], o, (dd_data_format)b, &opt, &info));
            CHECK(info.from == (dd_data_format)a, "%s: source detected as %s", what, dd_data_format_name(info.from));
            dd_dataset *got = NULL;
            char lp[1100];
            snprintf(lp, sizeof lp, "%s", o);
            CHECK_OK(dd_dataset_load(lp, &got));
            if (got) check_same(ref, got, what);
            dd_dataset_free(&got);
        }
    /* a chain through all four and back */
    CHECK_OK(dd_dataset_convert(src[DD_FMT_BIN], P("c1"), DD_FMT_CSV, NULL, NULL));
    CHECK_OK(dd_dataset_convert(P("c1"), P("c2/r"), DD_FMT_SIGMF, NULL, NULL));
    CHECK_OK(dd_dataset_convert(P("c2/r"), P("c3"), DD_FMT_CSV_DIR, NULL, NULL));
    CHECK_OK(dd_dataset_convert(P("c3"), P("c4.ddb"), DD_FMT_BIN, NULL, NULL));
    {
        dd_dataset *got = NULL;
        CHECK_OK(dd_dataset_load(P("c4.ddb"), &got));
        if (got) check_same(ref, got, "bin -> csv -> sigmf -> csv-dir -> bin");
        dd_dataset_free(&got);
    }

    /* --split: exactly floor(N r) train and val samples, the recording unchanged */
    {
        dd_convert_opts opt = {1, {0.5, 0.3, 0.2}, 1000};
        dd_convert_info info;
        CHECK_OK(dd_dataset_convert(src[DD_FMT_CSV_DIR], P("re.ddb"), DD_FMT_BIN, &opt, &info));
        const size_t want[3] = {5003, 3002, N - 5003 - 3002}; /* floor(10007 x 0.5), floor(10007 x 0.3) */
        dd_dataset *got = NULL;
        CHECK_OK(dd_dataset_load(P("re.ddb"), &got));
        if (got) {
            for (int s = 0; s < 3; s++)
                CHECK(got->n[s] == want[s] && info.n[s] == want[s], "--split: split %d has %zu samples, want %zu", s,
                      got->n[s], want[s]);
            CHECK(got->spec.split[0] == 0.5 && got->spec.split[1] == 0.3 && got->spec.split[2] == 0.2,
                  "--split: the spec's ratios are %g/%g/%g", got->spec.split[0], got->spec.split[1], got->spec.split[2]);
            size_t at = 0;
            for (int s = 0; s < 3; s++) {
                CHECK(memcmp(got->in[s], x + at, got->n[s] * sizeof *x) == 0 &&
                          memcmp(got->out[s], y + at, got->n[s] * sizeof *y) == 0,
                      "--split: split %d is not samples [%zu, %zu) of the recording", s, at, at + got->n[s]);
                at += got->n[s];
            }
        }
        dd_dataset_free(&got);
        /* into a single data.csv: the ratios written reproduce the counts */
        CHECK_OK(dd_dataset_convert(P("re.ddb"), P("re_single"), DD_FMT_CSV, NULL, NULL));
        CHECK_OK(dd_dataset_load(P("re_single"), &got));
        if (got)
            for (int s = 0; s < 3; s++) CHECK(got->n[s] == want[s], "single csv: split %d has %zu", s, got->n[s]);
        dd_dataset_free(&got);
        dd_convert_opts bad = {1, {0.5, 0.3, 0.3}, 0};
        CHECK_ERR(dd_dataset_convert(src[DD_FMT_BIN], P("bad.ddb"), DD_FMT_BIN, &bad, NULL), DD_ERR_RANGE, "split");
    }

    /* a SigMF pair in ci16 without distdpd fields (spec from the sample rate, ratios
     * 0.6/0.2/0.2): the chunked reader decodes exactly as the loader */
    {
        const size_t m = 5003;
        dd_cf32 *a = malloc(m * sizeof *a), *b = malloc(m * sizeof *b);
        for (size_t i = 0; i < m; i++) {
            a[i] = CMPLXF((float)((double)(lcg(&seed) % 60001) / 30000.0 - 1.0), (float)((double)(lcg(&seed) % 60001) / 30000.0 - 1.0));
            b[i] = CMPLXF((float)((double)(lcg(&seed) % 60001) / 30000.0 - 1.0), (float)((double)(lcg(&seed) % 60001) / 30000.0 - 1.0));
        }
        CHECK_OK(dd_sigmf_write(P("ci16/r_input"), a, m, 61.44e6, DD_SIGMF_CI16_LE, NULL));
        CHECK_OK(dd_sigmf_write(P("ci16/r_output"), b, m, 61.44e6, DD_SIGMF_CI16_LE, NULL));
        dd_dataset *want = NULL, *got = NULL;
        CHECK_OK(dd_dataset_load(P("ci16/r"), &want));
        dd_convert_opts opt = {0, {0, 0, 0}, 1000};
        CHECK_OK(dd_dataset_convert(P("ci16/r"), P("ci16.ddb"), DD_FMT_BIN, &opt, NULL));
        CHECK_OK(dd_dataset_load(P("ci16.ddb"), &got));
        if (want && got) {
            check_same(want, got, "sigmf ci16 -> bin");
            CHECK(want->n[0] == 3001 && want->n[1] == 1000, "ci16 pair split %zu/%zu/%zu", want->n[0], want->n[1], want->n[2]);
        }
        dd_dataset_free(&want);
        dd_dataset_free(&got);
        free(a);
        free(b);
    }

    /* errors */
    CHECK_ERR(dd_dataset_convert(P("nothing"), P("x.ddb"), DD_FMT_BIN, NULL, NULL), DD_ERR_IO, "nothing");
    CHECK_ERR(dd_dataset_convert(src[DD_FMT_CSV_DIR], src[DD_FMT_CSV_DIR], DD_FMT_CSV, NULL, NULL), DD_ERR_ARG,
              "is the source");
    CHECK_ERR(dd_dataset_convert(src[DD_FMT_SIGMF], src[DD_FMT_SIGMF], DD_FMT_SIGMF, NULL, NULL), DD_ERR_ARG,
              "is the source");
    dd_data_format f;
    CHECK_ERR(dd_data_format_parse("hdf5", &f), DD_ERR_ARG, "csv-dir, csv, sigmf or bin");
    CHECK_OK(dd_data_format_parse("sigmf", &f));
    CHECK(f == DD_FMT_SIGMF, "parse sigmf");
    {
        /* a bad cell on line 1500 of val_output.csv: named, and nothing written */
        FILE *fp = fopen(P("src_dir/val_output.csv"), "r+");
        CHECK(fp != NULL, "open val_output.csv");
        if (fp) {
            char line[256];
            for (int i = 0; i < 1499 && fgets(line, sizeof line, fp); i++) {
            }
            long pos = ftell(fp);
            fseek(fp, pos, SEEK_SET);
            fputc('x', fp);
            fclose(fp);
        }
        CHECK_ERR(dd_dataset_convert(src[DD_FMT_CSV_DIR], P("fromcsv.ddb"), DD_FMT_BIN, NULL, NULL), DD_ERR_FORMAT,
                  "val_output.csv:1500: column 1");
        FILE *t = fopen(P("fromcsv.ddb"), "r");
        CHECK(t == NULL, "a failed conversion leaves no output");
        if (t) fclose(t);
    }
    {
        /* a NaN in a binary source: found in the chunk that holds it, named with split and sample */
        size_t len = 0;
        char *buf = (char *)dd_test_slurp(src[DD_FMT_BIN], &len);
        const dd_cf32 *target = y + n[0] + n[1] + 10; /* test output, sample 10 */
        char *hit = NULL;
        for (size_t i = 0; buf && i + 8 <= len && !hit; i++)
            if (memcmp(buf + i, target, 8) == 0) hit = buf + i;
        CHECK(hit != NULL, "the sample is in the binary file");
        if (hit) {
            const float nan = NAN;
            memcpy(hit + 4, &nan, 4);
            write_bytes(P("nan.ddb"), buf, len);
            CHECK_ERR(dd_dataset_convert(P("nan.ddb"), P("nan_out"), DD_FMT_CSV, NULL, NULL), DD_ERR_RANGE,
                      "split 'test' output, sample 10 is NaN");
        }
        free(buf);
    }
    dd_dataset_free(&ref);
    free(x);
    free(y);
    return dd_test_done("test_convert");
}
