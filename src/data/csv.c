/* Numeric CSV reading and writing for the OpenDPD layout: the generic parser behind
 * "I,Q" files and the single-file "I_in,Q_in,I_out,Q_out" variant, and the I/Q writer.
 * The whole file is read into memory once and parsed in place with strtof (exact float32
 * rounding); every problem is reported with the file name and 1-based line number. */
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

/* Copies the text of the cell starting at p (up to ',' or end of line) into out,
 * trimmed and shortened to fit, for error messages. */
static void cell_text(const char *p, char *out, size_t cap) {
    while (is_hspace(*p)) p++;
    const char *e = p;
    while (*e != ',' && !is_eol(*e)) e++;
    while (e > p && is_hspace(e[-1])) e--;
    size_t len = (size_t)(e - p);
    if (len + 1 > cap) {
        snprintf(out, cap, "%.*s...", (int)(cap - 4), p);
    } else {
        memcpy(out, p, len);
        out[len] = '\0';
    }
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
    int shown = (int)(e - p) > 80 ? 80 : (int)(e - p);
    return dd_error(DD_ERR_FORMAT, "%s:1: header must be '%s', found '%.*s'", path, want, shown, p);
}

static dd_status csv_parse(const char *path, const char *const *names, int ncols, float **data,
                          size_t *nrows) {
    *data = NULL;
    *nrows = 0;
    char *buf = NULL;
    float *v = NULL;
    size_t len;
    dd_status st = dd_read_all(path, &buf, &len);
    if (st != DD_OK) return st;

    const char *end = buf + len;
    const char *p = buf;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3; /* UTF-8 byte order mark */
    {
        const char *q = p;
        while (q < end && isspace((unsigned char)*q)) q++;
        if (q == end) {
            st = dd_error(DD_ERR_FORMAT, "%s: empty file (expected a header line '%s,...')", path,
                          names[0]);
            goto cleanup;
        }
    }
    {
        const char *nul = memchr(buf, '\0', len);
        if (nul) {
            size_t line = 1;
            for (const char *q = buf; q < nul; q++) line += *q == '\n';
            st = dd_error(DD_ERR_FORMAT, "%s:%zu: NUL byte in a text file (binary data?)", path, line);
            goto cleanup;
        }
    }

    /* Header: line 1. */
    const char *he = p;
    while (!is_eol(*he)) he++;
    st = check_header(path, p, he, names, ncols);
    if (st != DD_OK) goto cleanup;
    p = he;
    if (*p == '\r') p++;
    if (*p == '\n') p++;

    /* Upper bound on rows: one per line terminator, plus an unterminated last line. */
    size_t max_rows = 1;
    for (const char *q = p; q < end; q++) max_rows += *q == '\n' || (*q == '\r' && q[1] != '\n');
    v = dd_calloc(max_rows, (size_t)ncols * sizeof(float));
    if (!v) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }

    size_t line = 2, row = 0;
    while (p < end) {
        /* Blank line: fine only if nothing but white space follows. */
        const char *q = p;
        while (is_hspace(*q)) q++;
        if (is_eol(*q)) {
            const char *r = q;
            while (r < end && isspace((unsigned char)*r)) r++;
            if (r == end) break;
            st = dd_error(DD_ERR_FORMAT, "%s:%zu: expected %d columns, found 0 (empty line)", path,
                          line, ncols);
            goto cleanup;
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
                char txt[48];
                cell_text(cell, txt, sizeof txt);
                st = dd_error(DD_ERR_FORMAT, "%s:%zu: column %d ('%s') is not a number: '%s'", path,
                              line, c + 1, names[c], txt);
                goto cleanup;
            }
            if (!isfinite(x)) {
                char txt[48];
                cell_text(cell, txt, sizeof txt);
                st = dd_error(DD_ERR_RANGE, "%s:%zu: column %d ('%s') value is NaN/Inf%s: '%s'", path,
                              line, c + 1, names[c], errno == ERANGE ? " (overflows float32)" : "",
                              txt);
                goto cleanup;
            }
            dst[c] = x;
            if (c + 1 < ncols) {
                if (*after != ',') {
                    st = dd_error(DD_ERR_FORMAT, "%s:%zu: expected %d columns, found %d", path, line,
                                  ncols, c + 1);
                    goto cleanup;
                }
                p = after + 1;
            } else {
                if (*after == ',') {
                    int found = ncols;
                    for (const char *r = after; !is_eol(*r); r++) found += *r == ',';
                    st = dd_error(DD_ERR_FORMAT, "%s:%zu: expected %d columns, found %d", path, line,
                                  ncols, found);
                    goto cleanup;
                }
                p = after;
            }
        }
        if (*p == '\r') p++;
        if (*p == '\n') p++;
        row++;
        line++;
    }
    *data = v;
    *nrows = row;
    v = NULL;
cleanup:
    dd_free(v);
    dd_free(buf);
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
    dd_cloc loc;
    dd_cloc_push(&loc);
    dd_status st = write_rows(a, cols, ncplx, n);
    dd_cloc_pop(&loc);
    return st;
}

dd_status dd_csv_write_iq(const char *path, const dd_cf32 *x, size_t n) {
    if (!path || (!x && n)) return dd_error(DD_ERR_ARG, "dd_csv_write_iq: NULL argument");
    dd_afile a;
    DD_TRY(dd_afile_open(&a, path));
    const dd_cf32 *cols[1] = {x};
    dd_status st = dd_csv_write_cols(&a, "I,Q", cols, 1, n);
    if (st == DD_OK) st = dd_afile_commit(&a);
    if (st != DD_OK) dd_afile_abort(&a);
    return st;
}
