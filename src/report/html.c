/* HTML report pages: a document built front to back (headings, paragraphs, tables,
 * SVG figures) with inline CSS, escaped text, and an atomic write. See report.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "distdpd/report.h"
#include "report_internal.h"
#include "sbuf.h"

#define MAX_COLS 32

struct dd_report {
    char *title;      /* raw title (escaped when rendered) */
    dd_sb body;       /* rendered content so far */
    dd_sb page;       /* the whole page, rebuilt by dd_report_html() */
    /* the open table, rendered at dd_report_table_end() */
    int table_open;   /* a table is open */
    size_t ncols;     /* its column count */
    char *caption;    /* its caption or NULL */
    char **cells;     /* header row then body rows, ncols per row; NULL = empty cell */
    size_t nrows;     /* rows held, header included */
    size_t cap_rows;  /* rows allocated */
};

static const char *const css =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;"
    "margin:0;background:#f4f5f7;color:#1d1f23;line-height:1.45}"
    "main{max-width:1000px;margin:0 auto;padding:20px 36px 32px;background:#fff;"
    "box-shadow:0 0 12px rgba(0,0,0,.06)}"
    "h1{font-size:1.6em;margin:.3em 0 .5em}"
    "h2{font-size:1.2em;margin:1.6em 0 .5em;border-bottom:1px solid #dcdfe4;padding-bottom:.2em}"
    "p{margin:.5em 0}"
    "table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em}"
    "caption{text-align:left;font-weight:600;padding:.3em 0}"
    "th,td{border:1px solid #d5d9df;padding:.28em .75em;text-align:left;vertical-align:top}"
    "th{background:#eef1f5;font-weight:600}"
    "td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "figure{margin:1em 0 1.4em}"
    "figcaption{font-size:.9em;color:#555;margin-top:.2em}"
    "svg.plot{max-width:100%;height:auto;display:block}"
    "pre{background:#f3f4f6;padding:.6em .8em;overflow-x:auto;font-size:.88em}"
    "footer{margin-top:2.2em;font-size:.8em;color:#777;border-top:1px solid #e5e7eb;padding-top:.6em}";

static char *dup_str(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *p = dd_calloc(n + 1, 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

dd_status dd_html_escape(const char *text, char **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_html_escape: out is NULL");
    dd_sb b;
    dd_sb_init(&b);
    dd_sb_escape(&b, text ? text : "");
    *out = dd_sb_take(&b);
    dd_status st = *out ? DD_OK : dd_sb_status(&b);
    dd_sb_free(&b);
    return st;
}

dd_status dd_report_create(const char *title, dd_report **r) {
    if (!r) return dd_error(DD_ERR_ARG, "dd_report_create: r is NULL");
    *r = NULL;
    if (!title) return dd_error(DD_ERR_ARG, "dd_report_create: title is NULL");
    dd_report *p = dd_calloc(1, sizeof *p);
    if (!p) return DD_ERR_NOMEM;
    dd_sb_init(&p->body);
    dd_sb_init(&p->page);
    p->title = dup_str(title);
    if (!p->title) {
        dd_free(p);
        return DD_ERR_NOMEM;
    }
    *r = p;
    return DD_OK;
}

static void table_clear(dd_report *r) {
    if (r->cells)
        for (size_t i = 0; i < r->nrows * r->ncols; i++) dd_free(r->cells[i]);
    dd_free(r->cells);
    dd_free(r->caption);
    r->cells = NULL;
    r->caption = NULL;
    r->nrows = r->cap_rows = r->ncols = 0;
    r->table_open = 0;
}

void dd_report_free(dd_report **r) {
    if (!r || !*r) return;
    table_clear(*r);
    dd_sb_free(&(*r)->body);
    dd_sb_free(&(*r)->page);
    dd_free((*r)->title);
    dd_free(*r);
    *r = NULL;
}

static dd_status check_open(dd_report *r, const char *what) {
    if (!r) return dd_error(DD_ERR_ARG, "%s: report is NULL", what);
    if (r->table_open) return dd_error(DD_ERR_ARG, "%s: a table is still open (call dd_report_table_end)", what);
    return DD_OK;
}

static dd_status element(dd_report *r, const char *fn, const char *tag, const char *text) {
    DD_TRY(check_open(r, fn));
    if (!text) return dd_error(DD_ERR_ARG, "%s: text is NULL", fn);
    dd_sb_printf(&r->body, "<%s>", tag);
    dd_sb_escape(&r->body, text);
    dd_sb_printf(&r->body, "</%s>\n", tag);
    return dd_sb_status(&r->body);
}

dd_status dd_report_heading(dd_report *r, const char *text) { return element(r, "dd_report_heading", "h2", text); }
dd_status dd_report_paragraph(dd_report *r, const char *text) { return element(r, "dd_report_paragraph", "p", text); }
dd_status dd_report_pre(dd_report *r, const char *text) { return element(r, "dd_report_pre", "pre", text); }

static dd_status add_row(dd_report *r, const char *const *cells) {
    if (r->nrows == r->cap_rows) {
        size_t cap = r->cap_rows ? 2 * r->cap_rows : 8;
        char **nc = dd_calloc(cap * r->ncols, sizeof *nc);
        if (!nc) return DD_ERR_NOMEM;
        if (r->cells) memcpy(nc, r->cells, r->nrows * r->ncols * sizeof *nc);
        dd_free(r->cells);
        r->cells = nc;
        r->cap_rows = cap;
    }
    char **row = r->cells + r->nrows * r->ncols;
    r->nrows++; /* counted first so that table_clear frees a partly copied row */
    for (size_t c = 0; c < r->ncols; c++) {
        if (!cells || !cells[c]) continue;
        row[c] = dup_str(cells[c]);
        if (!row[c]) return DD_ERR_NOMEM;
    }
    return DD_OK;
}

dd_status dd_report_table_begin(dd_report *r, const char *caption, size_t ncols,
                                const char *const *headers) {
    DD_TRY(check_open(r, "dd_report_table_begin"));
    if (ncols < 1 || ncols > MAX_COLS)
        return dd_error(DD_ERR_ARG, "dd_report_table_begin: ncols must be in 1..%d, got %zu", MAX_COLS, ncols);
    r->table_open = 1;
    r->ncols = ncols;
    dd_status st = DD_OK;
    if (caption && !(r->caption = dup_str(caption))) st = DD_ERR_NOMEM;
    if (st == DD_OK) st = add_row(r, headers);
    if (st != DD_OK) table_clear(r);
    return st;
}

dd_status dd_report_table_row(dd_report *r, const char *const *cells) {
    if (!r || !r->table_open) return dd_error(DD_ERR_ARG, "dd_report_table_row: no table is open");
    if (!cells) return dd_error(DD_ERR_ARG, "dd_report_table_row: cells is NULL");
    return add_row(r, cells);
}

/* A cell counts as numeric if strtod() consumes it whole (surrounding blanks
 * allowed); empty cells, "-" and "n/a" are neutral. */
static int is_neutral(const char *s) { return !s || !*s || strcmp(s, "-") == 0 || strcmp(s, "n/a") == 0; }
static int is_numeric(const char *s) {
    char *end;
    strtod(s, &end);
    if (end == s) return 0;
    while (*end == ' ') end++;
    return *end == '\0';
}

dd_status dd_report_table_end(dd_report *r) {
    if (!r || !r->table_open) return dd_error(DD_ERR_ARG, "dd_report_table_end: no table is open");
    int numeric[MAX_COLS] = {0}; /* r->ncols <= MAX_COLS (dd_report_table_begin) */
    for (size_t c = 0; c < r->ncols; c++) {
        int any = 0, all = 1;
        for (size_t i = 1; i < r->nrows; i++) {
            const char *s = r->cells[i * r->ncols + c];
            if (is_neutral(s)) continue;
            any = 1;
            if (!is_numeric(s)) all = 0;
        }
        numeric[c] = c > 0 && any && all;
    }
    dd_sb *b = &r->body;
    dd_sb_puts(b, "<table>");
    if (r->caption) {
        dd_sb_puts(b, "<caption>");
        dd_sb_escape(b, r->caption);
        dd_sb_puts(b, "</caption>");
    }
    dd_sb_puts(b, "\n<thead><tr>");
    for (size_t c = 0; c < r->ncols; c++) {
        dd_sb_puts(b, "<th>");
        dd_sb_escape(b, r->cells[c]);
        dd_sb_puts(b, "</th>");
    }
    dd_sb_puts(b, "</tr></thead>\n<tbody>\n");
    for (size_t i = 1; i < r->nrows; i++) {
        dd_sb_puts(b, "<tr>");
        for (size_t c = 0; c < r->ncols; c++) {
            dd_sb_puts(b, numeric[c] ? "<td class=\"num\">" : "<td>");
            dd_sb_escape(b, r->cells[i * r->ncols + c]);
            dd_sb_puts(b, "</td>");
        }
        dd_sb_puts(b, "</tr>\n");
    }
    dd_sb_puts(b, "</tbody></table>\n");
    table_clear(r);
    return dd_sb_status(b);
}

dd_status dd_report_plot(dd_report *r, const dd_plot_opts *opts, const dd_series *series,
                         size_t nseries) {
    DD_TRY(check_open(r, "dd_report_plot"));
    /* render into a scratch buffer first so that a bad plot leaves the page intact */
    dd_sb svg;
    dd_sb_init(&svg);
    dd_status st = dd_plot_render(&svg, opts, series, nseries);
    if (st == DD_OK) {
        dd_sb_puts(&r->body, "<figure>");
        dd_sb_putn(&r->body, svg.p, svg.len);
        if (opts->caption) {
            dd_sb_puts(&r->body, "<figcaption>");
            dd_sb_escape(&r->body, opts->caption);
            dd_sb_puts(&r->body, "</figcaption>");
        }
        dd_sb_puts(&r->body, "</figure>\n");
        st = dd_sb_status(&r->body);
    }
    dd_sb_free(&svg);
    return st;
}

dd_status dd_report_html(dd_report *r, const char **html, size_t *len) {
    DD_TRY(check_open(r, "dd_report_html"));
    if (!html) return dd_error(DD_ERR_ARG, "dd_report_html: html is NULL");
    DD_TRY(dd_sb_status(&r->body));
    dd_sb_free(&r->page);
    dd_sb *p = &r->page;
    dd_sb_puts(p, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    dd_sb_escape(p, r->title);
    dd_sb_puts(p, "</title>\n<style>");
    dd_sb_puts(p, css);
    dd_sb_puts(p, "</style>\n</head>\n<body>\n<main>\n<h1>");
    dd_sb_escape(p, r->title);
    dd_sb_puts(p, "</h1>\n");
    if (r->body.p) dd_sb_putn(p, r->body.p, r->body.len);
    dd_sb_puts(p, "<footer>Generated by distdpd " DD_VERSION_STRING
                  ". Self-contained page: inline CSS and SVG, no scripts.</footer>\n"
                  "</main>\n</body>\n</html>\n");
    DD_TRY(dd_sb_status(p));
    *html = p->p;
    if (len) *len = p->len;
    return DD_OK;
}

dd_status dd_report_write(dd_report *r, const char *path) {
    if (!path || !*path) return dd_error(DD_ERR_ARG, "dd_report_write: empty path");
    const char *html;
    size_t len;
    DD_TRY(dd_report_html(r, &html, &len));
    size_t pl = strlen(path);
    char *tmp = dd_calloc(pl + 16, 1);
    if (!tmp) return DD_ERR_NOMEM;
    snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
    dd_status st = DD_OK;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = dd_error(DD_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        goto cleanup;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, html + off, len - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            st = dd_error(DD_ERR_IO, "%s: write failed: %s", path, strerror(errno));
            break;
        }
        off += (size_t)w;
    }
    if (st == DD_OK && fchmod(fd, 0644) != 0)
        st = dd_error(DD_ERR_IO, "%s: chmod failed: %s", path, strerror(errno));
    if (st == DD_OK && fsync(fd) != 0)
        st = dd_error(DD_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0 && st == DD_OK)
        st = dd_error(DD_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    if (st == DD_OK && rename(tmp, path) != 0)
        st = dd_error(DD_ERR_IO, "%s: rename from %s failed: %s", path, tmp, strerror(errno));
    if (st != DD_OK) unlink(tmp);
cleanup:
    dd_free(tmp);
    return st;
}
