/* Numeric CSV reading and writing for the OpenDPD layout: the generic parser behind
 * "I,Q" files and the single-file "I_in,Q_in,I_out,Q_out" variant, and the I/Q writer.
 * The file is read line by line through a bounded buffer (dd_lines) and each line parsed
 * with strtof (exact float32 rounding) into a geometrically grown array, so memory is
 * the parsed samples plus one buffer, and the first bad line stops the read; every
 * problem is reported with the file name and 1-based line number. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

/* Horizontal white space inside a line. */
static int is_hspace(char c) { return c == ' ' || c == '\t'; }
/* End of a line: CR, LF or the terminating NUL. */
static int is_eol(char c) { return c == '\n' || c == '\r' || c == '\0'; }

/* The text of the cell starting at p (up to ',' or end of line), trimmed, quoted and
 * shortened (dd_quote) for error messages; cap >= 4 * 40 + 4. */
static void cell_text(const char *p, char *out, size_t cap) {
    while (is_hspace(*p)) p++;
    const char *e = p;
    while (*e != ',' && !is_eol(*e)) e++;
    while (e > p && is_hspace(e[-1])) e--;
    dd_quote(out, cap, p, (size_t)(e - p), 40);
}

/* Case-insensitive comparison of [p, p+len) with the NUL-terminated name. */
static int name_eq(const char *p, size_t len, const char *name) {
    if (strlen(name) != len) return 0;
    for (size_t i = 0; i < len; i++)
        if (tolower((unsigned char)p[i]) != tolower((unsigned char)name[i])) return 0;
    return 1;
}

/* Checks the header line [p, e) against names; on failure records the error. */
static dd_status check_header(const char *path, const char *p, const char *e,
                              const char *const *names, int ncols) {
    const char *q = p;
    int k = 0, ok = 1;
    for (;;) {
        const char *c = q;
        while (c < e && *c != ',') c++;
        const char *s = q, *t = c;
        while (s < t && is_hspace(*s)) s++;
        while (t > s && is_hspace(t[-1])) t--;
        if (t - s >= 2 && *s == '"' && t[-1] == '"') {
            s++;
            t--;
        }
        if (k >= ncols || !name_eq(s, (size_t)(t - s), names[k])) ok = 0;
        k++;
        if (c >= e) break;
        q = c + 1;
    }
    if (ok && k == ncols) return DD_OK;
    char want[128] = "";
    for (int i = 0; i < ncols; i++) {
        strncat(want, names[i], sizeof want - strlen(want) - 1);
        if (i + 1 < ncols) strncat(want, ",", sizeof want - strlen(want) - 1);
    }
    char found[4 * 80 + 4];
    dd_quote(found, sizeof found, p, (size_t)(e - p), 80);
    return dd_error(DD_ERR_FORMAT, "%s:1: header must be '%s', found '%s'", path, want, found);
}

/* 1 if [p, p+len) is only white space (a line holds no CR or LF). */
static int all_space(const char *p, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (!isspace((unsigned char)p[i])) return 0;
    return 1;
}

/* Room for at least one more row of ncols floats in *v (capacity *cap rows): grows
 * geometrically, so the array is at most twice the data while parsing. */
static dd_status grow_rows(float **v, size_t *cap, size_t row, int ncols, const char *path) {
    if (row < *cap) return DD_OK;
    size_t ncap = *cap ? 2 * *cap : 4096;
    if (ncap > SIZE_MAX / ((size_t)ncols * sizeof(float)))
        return dd_error(DD_ERR_NOMEM, "%s: too many rows", path);
    float *nv = realloc(*v, ncap * (size_t)ncols * sizeof(float));
    if (!nv)
        return dd_error(DD_ERR_NOMEM, "out of memory reading %s (%zu rows so far)", path, row);
    *v = nv;
    *cap = ncap;
    return DD_OK;
}

dd_status dd_csv_stream_open(dd_csv_stream *cs, const char *path, const char *const *names, int ncols) {
    memset(cs, 0, sizeof *cs);
    cs->path = path;
    cs->names = names;
    cs->ncols = ncols;
    DD_TRY(dd_lines_open(&cs->rd, path));
    char *p;
    size_t len;
    int got;
    dd_status st;
    dd_cloc loc;
    dd_cloc_push(&loc);
    /* Header: line 1, after an optional UTF-8 byte order mark. */
    if ((st = dd_lines_next(&cs->rd, &p, &len, &got)) != DD_OK) goto cleanup;
    if (got && len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
        p += 3;
        len -= 3;
    }
    if (!got || all_space(p, len)) {
        /* A blank first line: an empty file if nothing but white space follows. */
        char first[81];
        size_t keep = got ? (len < 80 ? len : 80) : 0;
        memcpy(first, got ? p : "", keep);
        first[keep] = '\0';
        for (;;) {
            char *q;
            size_t ql;
            if (got && (st = dd_lines_next(&cs->rd, &q, &ql, &got)) != DD_OK) goto cleanup;
            if (!got) {
                st = dd_error(DD_ERR_FORMAT, "%s: empty file (expected a header line '%s,...')", path,
                              names[0]);
                goto cleanup;
            }
            if (!all_space(q, ql)) break;
        }
        st = check_header(path, first, first + keep, names, ncols);
        if (st == DD_OK) st = dd_error(DD_ERR_INTERNAL, "%s:1: blank header accepted", path);
        goto cleanup;
    }
    st = check_header(path, p, p + len, names, ncols);
cleanup:
    dd_cloc_pop(&loc);
    if (st != DD_OK) dd_lines_close(&cs->rd);
    return st;
}

static dd_status stream_read(dd_csv_stream *cs, float *v, size_t max_rows, size_t *nrows) {
    const char *path = cs->path;
    const char *const *names = cs->names;
    const int ncols = cs->ncols;
    size_t row = 0, len;
    char *p;
    int got;
    dd_status st;
    while (!cs->done && row < max_rows) {
        if ((st = dd_lines_next(&cs->rd, &p, &len, &got)) != DD_OK) return st;
        if (!got) {
            cs->done = 1;
            break;
        }
        size_t line = cs->rd.line;
        /* Blank line: fine only if nothing but white space follows. */
        const char *q = p;
        while (is_hspace(*q)) q++;
        if (is_eol(*q)) {
            for (;;) {
                if ((st = dd_lines_next(&cs->rd, &p, &len, &got)) != DD_OK) return st;
                if (!got) {
                    cs->done = 1;
                    break;
                }
                if (!all_space(p, len)) break;
            }
            if (cs->done) break;
            return dd_error(DD_ERR_FORMAT, "%s:%zu: expected %d columns, found 0 (empty line)", path, line, ncols);
        }
        float *dst = v + row * (size_t)ncols;
        for (int c = 0; c < ncols; c++) {
            const char *cell = p;
            q = p;
            while (is_hspace(*q)) q++;
            char *e = (char *)q;
            float x = 0.0f;
            if (!isspace((unsigned char)*q) && *q != ',' && *q != '\0') {
                errno = 0;
                x = strtof(q, &e);
            }
            const char *after = e;
            while (is_hspace(*after)) after++;
            if (e == q || (*after != ',' && !is_eol(*after))) {
                char txt[4 * 40 + 4];
                cell_text(cell, txt, sizeof txt);
                return dd_error(DD_ERR_FORMAT, "%s:%zu: column %d ('%s') is not a number: '%s'", path, line, c + 1,
                                names[c], txt);
            }
            if (!isfinite(x)) {
                char txt[4 * 40 + 4];
                cell_text(cell, txt, sizeof txt);
                return dd_error(DD_ERR_RANGE, "%s:%zu: column %d ('%s') value is NaN/Inf%s: '%s'", path, line, c + 1,
                                names[c], errno == ERANGE ? " (overflows float32)" : "", txt);
            }
            dst[c] = x;
            if (c + 1 < ncols) {
                if (*after != ',')
                    return dd_error(DD_ERR_FORMAT, "%s:%zu: expected %d columns, found %d", path, line, ncols, c + 1);
                p = (char *)after + 1;
            } else if (*after == ',') {
                int found = ncols;
                for (const char *r = after; !is_eol(*r); r++) found += *r == ',';
                return dd_error(DD_ERR_FORMAT, "%s:%zu: expected %d columns, found %d", path, line, ncols, found);
            }
        }
        row++;
    }
    *nrows = row;
    return DD_OK;
}

dd_status dd_csv_stream_read(dd_csv_stream *cs, float *v, size_t max_rows, size_t *nrows) {
    *nrows = 0;
    dd_cloc loc;
    dd_cloc_push(&loc);
    dd_status st = stream_read(cs, v, max_rows, nrows);
    dd_cloc_pop(&loc);
    return st;
}

void dd_csv_stream_close(dd_csv_stream *cs) { dd_lines_close(&cs->rd); }

static dd_status csv_parse(const char *path, const char *const *names, int ncols, float **data,
                          size_t *nrows) {
    *data = NULL;
    *nrows = 0;
    dd_csv_stream cs;
    DD_TRY(dd_csv_stream_open(&cs, path, names, ncols));
    float *v = NULL;
    size_t cap = 0, row = 0;
    dd_status st = DD_OK;
    while (!cs.done) {
        if ((st = grow_rows(&v, &cap, row, ncols, path)) != DD_OK) goto cleanup;
        size_t got = 0;
        if ((st = stream_read(&cs, v + row * (size_t)ncols, cap - row, &got)) != DD_OK) goto cleanup;
        row += got;
    }
    /* Shrink to the rows read (at least one row's worth, so the array is never NULL). */
    {
        size_t keep = (row ? row : 1) * (size_t)ncols * sizeof(float);
        float *nv = realloc(v, keep);
        if (nv) {
            v = nv;
        } else if (!v) {
            st = dd_error(DD_ERR_NOMEM, "out of memory reading %s", path);
            goto cleanup;
        }
        if (row == 0) memset(v, 0, keep);
    }
    *data = v;
    *nrows = row;
    v = NULL;
cleanup:
    free(v);
    dd_csv_stream_close(&cs);
    return st;
}

dd_status dd_csv_parse(const char *path, const char *const *names, int ncols, float **data,
                       size_t *nrows) {
    dd_cloc loc;
    dd_cloc_push(&loc);
    dd_status st = csv_parse(path, names, ncols, data, nrows);
    dd_cloc_pop(&loc);
    return st;
}

dd_status dd_csv_read_iq(const char *path, dd_cf32 **x, size_t *n) {
    static const char *const names[2] = {"I", "Q"};
    if (!path || !x || !n) return dd_error(DD_ERR_ARG, "dd_csv_read_iq: NULL argument");
    *x = NULL;
    *n = 0;
    float *v;
    DD_TRY(dd_csv_parse(path, names, 2, &v, n));
    *x = (dd_cf32 *)(void *)v; /* n x 2 floats == n interleaved complex samples */
    return DD_OK;
}

/* Writes the rows of a CSV body: `cols` interleaved complex arrays per row. */
static dd_status write_rows(dd_afile *a, const dd_cf32 *const *cols, int ncols, size_t n) {
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < ncols; c++) {
            const float *f = (const float *)(const void *)(cols[c] + i);
            if (!isfinite(f[0]) || !isfinite(f[1]))
                return dd_error(DD_ERR_RANGE, "%s: sample %zu is NaN/Inf; refusing to write it",
                                a->path, i);
            if (fprintf(a->f, c + 1 < ncols ? "%.9g,%.9g," : "%.9g,%.9g\n", (double)f[0],
                        (double)f[1]) < 0)
                return dd_afile_werr(a);
        }
    }
    return DD_OK;
}

dd_status dd_csv_write_cols(dd_afile *a, const char *header, const dd_cf32 *const *cols,
                            int ncplx, size_t n) {
    if (fprintf(a->f, "%s\n", header) < 0) return dd_afile_werr(a);
    return dd_csv_write_rows(a, cols, ncplx, n);
}

dd_status dd_csv_write_rows(dd_afile *a, const dd_cf32 *const *cols, int ncplx, size_t n) {
    dd_cloc loc;
    dd_cloc_push(&loc);
    dd_status st = write_rows(a, cols, ncplx, n);
    dd_cloc_pop(&loc);
    return st;
}

dd_status dd_csv_write_iq(const char *path, const dd_cf32 *x, size_t n) {
    if (!path || (!x && n)) return dd_error(DD_ERR_ARG, "dd_csv_write_iq: NULL argument");
    const dd_cf32 *cols[1] = {x};
    return dd_csv_write_columns(path, "I,Q", cols, 1, n);
}

dd_status dd_csv_write_columns(const char *path, const char *header, const dd_cf32 *const *cols, int ncplx,
                               size_t n) {
    if (!path || !header || !cols || ncplx < 1) return dd_error(DD_ERR_ARG, "dd_csv_write_columns: bad argument");
    for (int c = 0; c < ncplx; c++)
        if (!cols[c] && n) return dd_error(DD_ERR_ARG, "dd_csv_write_columns: column %d is NULL", c);
    dd_afile a;
    DD_TRY(dd_afile_open(&a, path));
    dd_status st = dd_csv_write_cols(&a, header, cols, ncplx, n);
    if (st == DD_OK) st = dd_afile_commit(&a);
    if (st != DD_OK) dd_afile_abort(&a);
    return st;
}
