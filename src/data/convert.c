/* dd_dataset_convert: any of the four dataset layouts to any other, streaming. A source
 * yields the recording in time order (train, val, test) in chunks; a sink takes the chunks
 * split by its own counts (the source's, or a re-split of the whole recording). The
 * readers and writers are the data module's own: the CSV stream parser (csv.c), the
 * SigMF chunk source and sink (sigmf.c), the binary map and streaming writer (binfmt.c),
 * the atomic files (fileio.c). Format details: docs/formats.md; the command: docs/data.md. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data_internal.h"

static const char *const fmt_names[4] = {"csv-dir", "csv", "sigmf", "bin"};

const char *dd_data_format_name(dd_data_format f) {
    return (unsigned)f < 4 ? fmt_names[f] : "?";
}

dd_status dd_data_format_parse(const char *name, dd_data_format *f) {
    for (int i = 0; name && i < 4; i++)
        if (strcmp(name, fmt_names[i]) == 0) {
            *f = (dd_data_format)i;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG, "unknown dataset format '%s' (expected csv-dir, csv, sigmf or bin)", name ? name : "");
}

/* ---------------------------------------------------------------- sources */

static const char *const IQ[2] = {"I", "Q"};
static const char *const IQ4[4] = {"I_in", "Q_in", "I_out", "Q_out"};

typedef struct {
    dd_data_format fmt;
    dd_spec spec;
    size_t n[3];
    char where[DD_PATH_MAX]; /* the directory, prefix or file */
    int s;                   /* current split */
    size_t off;              /* samples of it read */
    dd_bin_view *view;
    dd_sigmf_src *sg;
    dd_csv_stream cs[2];
    char cpath[2][DD_PATH_MAX]; /* the files cs[] read */
    int cs_open;
    float *rows; /* single CSV: chunk x 4 floats */
} source;

/* The file of split s, input (k = 0) or output, of an OpenDPD directory. */
static dd_status split_file(const char *dir, int s, int k, char *path) {
    char name[64];
    snprintf(name, sizeof name, "%s_%s.csv", dd_split_name((dd_split)s), k ? "output" : "input");
    return dd_path_join(path, DD_PATH_MAX, dir, name);
}

/* Rows of a CSV file (parsed and checked through, in bounded memory). */
static dd_status count_rows(const char *path, const char *const *names, int ncols, float *scratch, size_t cap,
                            size_t *n) {
    dd_csv_stream cs;
    *n = 0;
    DD_TRY(dd_csv_stream_open(&cs, path, names, ncols));
    dd_status st = DD_OK;
    while (!cs.done && st == DD_OK) {
        size_t got = 0;
        st = dd_csv_stream_read(&cs, scratch, cap, &got);
        *n += got;
    }
    dd_csv_stream_close(&cs);
    return st;
}

/* Which layout path is and where its parts are, as dd_dataset_load detects it. */
static dd_status resolve(const char *path, source *src) {
    struct stat sb;
    char buf[DD_PATH_MAX];
    if (stat(path, &sb) != 0) {
        int e = errno;
        struct stat sm;
        if ((e == ENOENT || e == ENOTDIR) && dd_path_cat(buf, sizeof buf, path, "_input.sigmf-meta") == DD_OK &&
            lstat(buf, &sm) == 0) {
            src->fmt = DD_FMT_SIGMF;
            return dd_path_cat(src->where, sizeof src->where, path, "");
        }
        return dd_error(DD_ERR_IO, "cannot open %s: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        DD_TRY(dd_path_join(buf, sizeof buf, path, "spec.json"));
        if (!dd_path_is_file(buf)) {
            int found = 0;
            DD_TRY(dd_find_sigmf_pair(path, src->where, &found));
            if (found) {
                src->fmt = DD_FMT_SIGMF;
                return DD_OK;
            }
            return dd_error(DD_ERR_IO, "%s: not a dataset: no spec.json (OpenDPD) and no NAME_input/NAME_output.sigmf-meta pair",
                            path);
        }
        char format[32];
        DD_TRY(dd_spec_read_json(buf, &src->spec, format, sizeof format));
        src->fmt = strcmp(format, "single_csv") == 0 ? DD_FMT_CSV : DD_FMT_CSV_DIR;
        return dd_path_cat(src->where, sizeof src->where, path, "");
    }
    if (!S_ISREG(sb.st_mode)) return dd_error(DD_ERR_IO, "cannot open %s: not a regular file or directory", path);
    size_t len = strlen(path);
    if (dd_bin_is_bin(path) || (len >= 4 && strcmp(path + len - 4, ".ddb") == 0)) {
        src->fmt = DD_FMT_BIN;
        return dd_path_cat(src->where, sizeof src->where, path, "");
    }
    if (dd_sigmf_prefix_of(path, src->where)) {
        src->fmt = DD_FMT_SIGMF;
        return DD_OK;
    }
    const char *base = dd_path_base(path);
    if (strcmp(base, "spec.json") == 0 || strcmp(base, "data.csv") == 0) {
        size_t dl = (size_t)(base - path);
        if (dl == 0) return resolve(".", src);
        if (dl >= sizeof buf) return dd_error(DD_ERR_ARG, "path too long: %s", path);
        memcpy(buf, path, dl);
        buf[dl] = '\0';
        return resolve(buf, src);
    }
    return dd_error(DD_ERR_FORMAT,
                    "%s: unknown dataset format (expected an OpenDPD directory, a SigMF NAME_input/NAME_output pair, "
                    "or a binary file starting with 'DDPDBIN1')",
                    path);
}

static void source_close(source *src) {
    dd_bin_close(&src->view);
    dd_sigmf_src_close(&src->sg);
    if (src->cs_open) {
        dd_csv_stream_close(&src->cs[0]);
        if (src->fmt == DD_FMT_CSV_DIR) dd_csv_stream_close(&src->cs[1]);
    }
    src->cs_open = 0;
    free(src->rows);
    src->rows = NULL;
}

static dd_status source_open(const char *path, source *src, size_t chunk) {
    memset(src, 0, sizeof *src);
    DD_TRY(resolve(path, src));
    src->rows = malloc(chunk * 4 * sizeof(float));
    if (!src->rows) return dd_error(DD_ERR_NOMEM, "out of memory for a chunk of %zu samples", chunk);
    dd_status st = DD_OK;
    char p0[DD_PATH_MAX], p1[DD_PATH_MAX];
    switch (src->fmt) {
    case DD_FMT_BIN:
        if ((st = dd_bin_open(src->where, &src->view)) != DD_OK) break;
        src->spec = *dd_bin_spec(src->view);
        for (int s = 0; s < 3; s++) src->n[s] = dd_bin_count(src->view, (dd_split)s);
        break;
    case DD_FMT_SIGMF: st = dd_sigmf_src_open(src->where, &src->sg, &src->spec, src->n); break;
    case DD_FMT_CSV_DIR:
        for (int s = 0; s < 3 && st == DD_OK; s++) {
            size_t ni = 0, no = 0;
            if ((st = split_file(src->where, s, 0, p0)) != DD_OK || (st = split_file(src->where, s, 1, p1)) != DD_OK) break;
            if ((st = count_rows(p0, IQ, 2, src->rows, chunk * 2, &ni)) != DD_OK) break;
            if ((st = count_rows(p1, IQ, 2, src->rows, chunk * 2, &no)) != DD_OK) break;
            if (ni != no)
                st = dd_error(DD_ERR_MISMATCH, "%s: %s has %zu samples but %s has %zu", src->where, dd_path_base(p0), ni,
                              dd_path_base(p1), no);
            src->n[s] = ni;
        }
        break;
    case DD_FMT_CSV: {
        size_t n = 0;
        if ((st = dd_path_join(src->cpath[0], DD_PATH_MAX, src->where, "data.csv")) != DD_OK) break;
        if ((st = count_rows(src->cpath[0], IQ4, 4, src->rows, chunk, &n)) != DD_OK) break;
        dd_split_counts(n, src->spec.split, src->n);
        if ((st = dd_csv_stream_open(&src->cs[0], src->cpath[0], IQ4, 4)) == DD_OK) src->cs_open = 1;
        break;
    }
    }
    if (st == DD_OK) st = dd_spec_check(&src->spec, path);
    if (st != DD_OK) source_close(src);
    return st;
}

/* Up to max samples of the recording in time order; *got = 0 only at its end. */
static dd_status source_read(source *src, dd_cf32 *in, dd_cf32 *out, size_t max, size_t *got) {
    *got = 0;
    while (src->s < 3 && src->off == src->n[src->s]) {
        if (src->cs_open && src->fmt == DD_FMT_CSV_DIR) {
            dd_csv_stream_close(&src->cs[0]);
            dd_csv_stream_close(&src->cs[1]);
            src->cs_open = 0;
        }
        src->s++;
        src->off = 0;
    }
    if (src->s >= 3) return DD_OK;
    const int s = src->s;
    size_t k = src->n[s] - src->off < max ? src->n[s] - src->off : max;
    switch (src->fmt) {
    case DD_FMT_BIN: {
        const dd_cf32 *pi, *po;
        DD_TRY(dd_bin_slice(src->view, (dd_split)s, src->off, k, &pi, &po));
        const float *fi = (const float *)(const void *)pi, *fo = (const float *)(const void *)po;
        for (size_t i = 0; i < 2 * k; i++)
            if (!isfinite(fi[i]) || !isfinite(fo[i]))
                return dd_error(DD_ERR_RANGE, "%s: split '%s' %s, sample %zu is NaN/Inf", src->where,
                                dd_split_name((dd_split)s), isfinite(fi[i]) ? "output" : "input", src->off + i / 2);
        memcpy(in, pi, k * sizeof(dd_cf32));
        memcpy(out, po, k * sizeof(dd_cf32));
        /* the mapped pages are not needed again: the resident set stays one chunk */
        dd_bin_advise(src->view, (dd_split)s, src->off, k, DD_BIN_DONTNEED);
        break;
    }
    case DD_FMT_SIGMF: {
        size_t g = 0;
        DD_TRY(dd_sigmf_src_read(src->sg, in, out, k, &g));
        if (g != k) return dd_error(DD_ERR_CORRUPT, "%s: the recording ended early", src->where);
        break;
    }
    case DD_FMT_CSV_DIR: {
        if (!src->cs_open) {
            DD_TRY(split_file(src->where, s, 0, src->cpath[0]));
            DD_TRY(split_file(src->where, s, 1, src->cpath[1]));
            DD_TRY(dd_csv_stream_open(&src->cs[0], src->cpath[0], IQ, 2));
            dd_status st = dd_csv_stream_open(&src->cs[1], src->cpath[1], IQ, 2);
            if (st != DD_OK) {
                dd_csv_stream_close(&src->cs[0]);
                return st;
            }
            src->cs_open = 1;
        }
        size_t gi = 0, go = 0;
        DD_TRY(dd_csv_stream_read(&src->cs[0], (float *)(void *)in, k, &gi));
        DD_TRY(dd_csv_stream_read(&src->cs[1], (float *)(void *)out, k, &go));
        if (gi != k || go != k) return dd_error(DD_ERR_CORRUPT, "%s: split '%s' changed while it was read", src->where,
                                               dd_split_name((dd_split)s));
        break;
    }
    case DD_FMT_CSV: {
        size_t g = 0;
        DD_TRY(dd_csv_stream_read(&src->cs[0], src->rows, k, &g));
        if (g != k) return dd_error(DD_ERR_CORRUPT, "%s/data.csv changed while it was read", src->where);
        float *fi = (float *)(void *)in, *fo = (float *)(void *)out;
        for (size_t i = 0; i < k; i++) {
            fi[2 * i] = src->rows[4 * i];
            fi[2 * i + 1] = src->rows[4 * i + 1];
            fo[2 * i] = src->rows[4 * i + 2];
            fo[2 * i + 1] = src->rows[4 * i + 3];
        }
        break;
    }
    }
    src->off += k;
    *got = k;
    return DD_OK;
}

/* ---------------------------------------------------------------- sinks */

typedef struct {
    dd_data_format fmt;
    char out[DD_PATH_MAX];
    dd_bin_writer *bw;
    dd_sigmf_sink *sk;
    dd_afile f[6]; /* CSV files: split s input 2s, output 2s + 1; single CSV: f[0] */
    int nf;
} sink;

static void sink_abort(sink *k) {
    dd_bin_writer_abort(&k->bw);
    dd_sigmf_sink_abort(&k->sk);
    for (int i = 0; i < k->nf; i++) dd_afile_abort(&k->f[i]);
    k->nf = 0;
}

static dd_status sink_open(sink *k, dd_data_format fmt, const char *out, const dd_spec *spec, const size_t m[3]) {
    memset(k, 0, sizeof *k);
    k->fmt = fmt;
    DD_TRY(dd_path_cat(k->out, sizeof k->out, out, ""));
    char path[DD_PATH_MAX];
    dd_status st = DD_OK;
    switch (fmt) {
    case DD_FMT_BIN: return dd_bin_writer_open(out, spec, m, &k->bw);
    case DD_FMT_SIGMF: return dd_sigmf_sink_open(out, &k->sk);
    case DD_FMT_CSV_DIR:
        DD_TRY(dd_mkdir_p(out));
        for (int i = 0; i < 6 && st == DD_OK; i++) {
            if ((st = split_file(out, i / 2, i % 2, path)) != DD_OK) break;
            if ((st = dd_afile_open(&k->f[i], path)) != DD_OK) break;
            k->nf++;
            if (fprintf(k->f[i].f, "I,Q\n") < 0) st = dd_afile_werr(&k->f[i]);
        }
        break;
    case DD_FMT_CSV:
        DD_TRY(dd_mkdir_p(out));
        if ((st = dd_path_join(path, sizeof path, out, "data.csv")) != DD_OK) break;
        if ((st = dd_afile_open(&k->f[0], path)) != DD_OK) break;
        k->nf = 1;
        if (fprintf(k->f[0].f, "I_in,Q_in,I_out,Q_out\n") < 0) st = dd_afile_werr(&k->f[0]);
        break;
    }
    if (st != DD_OK) sink_abort(k);
    return st;
}

static dd_status sink_put(sink *k, int s, const dd_cf32 *in, const dd_cf32 *out, size_t n) {
    switch (k->fmt) {
    case DD_FMT_BIN: return dd_bin_writer_append(k->bw, (dd_split)s, in, out, n);
    case DD_FMT_SIGMF: return dd_sigmf_sink_put(k->sk, in, out, n);
    case DD_FMT_CSV_DIR: {
        const dd_cf32 *ci[1] = {in}, *co[1] = {out};
        DD_TRY(dd_csv_write_rows(&k->f[2 * s], ci, 1, n));
        return dd_csv_write_rows(&k->f[2 * s + 1], co, 1, n);
    }
    case DD_FMT_CSV: {
        const dd_cf32 *c2[2] = {in, out};
        return dd_csv_write_rows(&k->f[0], c2, 2, n);
    }
    }
    return dd_error(DD_ERR_INTERNAL, "unknown sink");
}

static dd_status sink_commit(sink *k, const dd_spec *spec, const size_t m[3]) {
    dd_status st = DD_OK;
    char path[DD_PATH_MAX];
    switch (k->fmt) {
    case DD_FMT_BIN: return dd_bin_writer_commit(&k->bw);
    case DD_FMT_SIGMF: return dd_sigmf_sink_commit(&k->sk, spec, m);
    case DD_FMT_CSV_DIR:
    case DD_FMT_CSV: {
        dd_spec sp = *spec;
        if (k->fmt == DD_FMT_CSV) st = dd_spec_ratios_for_counts(&sp, m, k->out);
        for (int i = 0; i < k->nf && st == DD_OK; i++) st = dd_afile_close(&k->f[i]);
        /* spec.json last, after all CSVs exist under their names */
        for (int i = 0; i < k->nf && st == DD_OK; i++) st = dd_afile_rename(&k->f[i]);
        if (st == DD_OK && (st = dd_path_join(path, sizeof path, k->out, "spec.json")) == DD_OK)
            st = dd_spec_write_json(path, &sp, k->fmt == DD_FMT_CSV ? "single_csv" : "split_csv");
        if (st == DD_OK) dd_fsync_parent(path);
        break;
    }
    }
    sink_abort(k);
    return st;
}

/* ---------------------------------------------------------------- the conversion */

/* 1 when out names the source itself (same file or directory, or the same SigMF prefix). */
static int same_place(const source *src, const char *out, dd_data_format to) {
    char a[PATH_MAX], b[PATH_MAX], o[DD_PATH_MAX];
    if (src->fmt == DD_FMT_SIGMF || to == DD_FMT_SIGMF) {
        if (src->fmt != to) return 0;
        snprintf(o, sizeof o, "%s_input.sigmf-meta", out);
        char w[DD_PATH_MAX];
        snprintf(w, sizeof w, "%.4000s_input.sigmf-meta", src->where);
        return realpath(o, a) && realpath(w, b) && strcmp(a, b) == 0;
    }
    return realpath(out, a) && realpath(src->where, b) && strcmp(a, b) == 0;
}

dd_status dd_dataset_convert(const char *in, const char *out, dd_data_format to, const dd_convert_opts *o,
                             dd_convert_info *info) {
    if (!in || !out) return dd_error(DD_ERR_ARG, "dd_dataset_convert: NULL argument");
    if ((unsigned)to > 3) return dd_error(DD_ERR_ARG, "dd_dataset_convert: unknown format %d", (int)to);
    const size_t chunk = o && o->chunk ? o->chunk : 65536;
    if (chunk > ((size_t)1 << 26)) return dd_error(DD_ERR_ARG, "dd_dataset_convert: chunk %zu is too large", chunk);
    source src;
    DD_TRY(source_open(in, &src, chunk));
    dd_status st = DD_OK;
    dd_spec spec = src.spec;
    size_t m[3] = {src.n[0], src.n[1], src.n[2]};
    const size_t N = m[0] + m[1] + m[2];
    dd_cf32 *bi = NULL, *bo = NULL;
    sink k;
    int sink_ok = 0;
    if (same_place(&src, out, to)) {
        st = dd_error(DD_ERR_ARG, "%s is the source %s: write the conversion elsewhere", out, in);
        goto done;
    }
    if (o && o->has_split) {
        for (int s = 0; s < 3; s++) spec.split[s] = o->split[s];
        if ((st = dd_spec_check(&spec, "--split")) != DD_OK) goto done;
        dd_split_counts(N, spec.split, m);
    }
    bi = dd_calloc(chunk, sizeof *bi);
    bo = dd_calloc(chunk, sizeof *bo);
    if (!bi || !bo) {
        st = dd_error(DD_ERR_NOMEM, "out of memory for a chunk of %zu samples", chunk);
        goto done;
    }
    if ((st = sink_open(&k, to, out, &spec, m)) != DD_OK) goto done;
    sink_ok = 1;
    size_t pos = 0, doff = 0;
    int ds = 0;
    while (pos < N) {
        size_t got = 0;
        if ((st = source_read(&src, bi, bo, chunk, &got)) != DD_OK) goto done;
        if (got == 0) {
            st = dd_error(DD_ERR_CORRUPT, "%s: ended after %zu of %zu samples", in, pos, N);
            goto done;
        }
        for (size_t i = 0; i < got;) {
            while (ds < 2 && doff == m[ds]) {
                ds++;
                doff = 0;
            }
            size_t take = got - i < m[ds] - doff ? got - i : m[ds] - doff;
            if ((st = sink_put(&k, ds, bi + i, bo + i, take)) != DD_OK) goto done;
            i += take;
            doff += take;
        }
        pos += got;
    }
    st = sink_commit(&k, &spec, m);
    sink_ok = 0;
    if (st == DD_OK && info) {
        info->from = src.fmt;
        info->spec = spec;
        if (to == DD_FMT_CSV) dd_spec_ratios_for_counts(&info->spec, m, out);
        for (int s = 0; s < 3; s++) info->n[s] = m[s];
    }
done:
    if (sink_ok) sink_abort(&k);
    source_close(&src);
    dd_free(bi);
    dd_free(bo);
    return st;
}
