/* Tests of the HTML/SVG report module: escaping, well-formed markup (a small tag
 * parser checks that every element is closed in order), one <path> per series, NaN
 * never printed and breaking lines, nice ticks that cover the data, thinning of long
 * series (max-hold keeps peaks), scatter de-duplication, atomic writes and argument
 * checks. */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dd_test.h"
#include "distdpd/report.h"

static size_t count_sub(const char *h, const char *needle) {
    size_t n = 0, l = strlen(needle);
    for (const char *p = strstr(h, needle); p; p = strstr(p + l, needle)) n++;
    return n;
}

static int contains_ci(const char *h, const char *needle) {
    size_t l = strlen(needle);
    for (; *h; h++)
        if (strncasecmp(h, needle, l) == 0) return 1;
    return 0;
}

/* Checks that tags nest properly and that text has no raw '<' and only valid entity
 * references. Void HTML elements and <!DOCTYPE> are allowed unclosed. Returns 1 if
 * well-formed, else prints why and returns 0. */
static int well_formed(const char *s) {
    static const char *const voids[] = {"meta", "br", "hr", "img", "link", "input", NULL};
    char stack[256][32];
    int depth = 0;
    const char *p = s;
    while (*p) {
        if (*p == '&') {
            const char *q = p + 1;
            if (*q == '#') q++;
            while (isalnum((unsigned char)*q)) q++;
            if (*q != ';' || q == p + 1) {
                fprintf(stderr, "bad entity at offset %ld\n", (long)(p - s));
                return 0;
            }
            p = q + 1;
            continue;
        }
        if (*p != '<') {
            if (*p == '>') {
                fprintf(stderr, "raw '>' in text at offset %ld\n", (long)(p - s));
                return 0;
            }
            p++;
            continue;
        }
        if (strncmp(p, "<!DOCTYPE", 9) == 0) {
            p = strchr(p, '>');
            if (!p) return 0;
            p++;
            continue;
        }
        int closing = p[1] == '/';
        const char *n0 = p + 1 + closing, *n1 = n0;
        while (isalnum((unsigned char)*n1)) n1++;
        if (n1 == n0 || n1 - n0 >= 32) {
            fprintf(stderr, "bad tag at offset %ld: %.20s\n", (long)(p - s), p);
            return 0;
        }
        char name[32];
        memcpy(name, n0, (size_t)(n1 - n0));
        name[n1 - n0] = '\0';
        /* find the end of the tag, skipping quoted attribute values */
        const char *q = n1;
        char quote = 0;
        for (; *q && (quote || *q != '>'); q++) {
            if (quote) {
                if (*q == quote) quote = 0;
                else if (*q == '<') {
                    fprintf(stderr, "raw '<' in attribute of <%s>\n", name);
                    return 0;
                }
            } else if (*q == '"' || *q == '\'') {
                quote = *q;
            }
        }
        if (!*q) {
            fprintf(stderr, "unterminated tag <%s>\n", name);
            return 0;
        }
        int selfclose = q[-1] == '/';
        p = q + 1;
        if (closing) {
            if (depth == 0 || strcmp(stack[depth - 1], name) != 0) {
                fprintf(stderr, "</%s> does not close <%s>\n", name, depth ? stack[depth - 1] : "(none)");
                return 0;
            }
            depth--;
            continue;
        }
        if (selfclose) continue;
        int isvoid = 0;
        for (int i = 0; voids[i]; i++)
            if (strcmp(voids[i], name) == 0) isvoid = 1;
        if (isvoid) continue;
        if (depth == 256) return 0;
        memcpy(stack[depth++], name, sizeof name); /* both 32 bytes, name NUL-terminated */
        /* <style> content is CSS: skip to its end tag */
        if (strcmp(name, "style") == 0) {
            const char *e = strstr(p, "</style>");
            if (!e) return 0;
            p = e;
        }
    }
    if (depth != 0) {
        fprintf(stderr, "%d unclosed elements, innermost <%s>\n", depth, stack[depth - 1]);
        return 0;
    }
    return 1;
}

/* Collects the numbers of <text ... text-anchor="end">N</text> (the y tick labels). */
static int y_tick_labels(const char *svg, double *v, int max) {
    int n = 0;
    const char *key = "text-anchor=\"end\">";
    for (const char *p = strstr(svg, key); p && n < max; p = strstr(p + 1, key)) v[n++] = strtod(p + strlen(key), NULL);
    return n;
}

/* Parses the coordinates of the first <path ... d="..."> into X/Y arrays. */
static size_t path_points(const char *svg, double *X, double *Y, size_t max) {
    const char *p = strstr(svg, "<path");
    if (!p) return 0;
    p = strstr(p, " d=\"");
    if (!p) return 0;
    p += 4;
    size_t n = 0;
    while (*p && *p != '"' && n < max) {
        if (*p == 'M' || *p == 'L' || *p == ' ') {
            p++;
            continue;
        }
        if (*p == 'h') { /* h0 */
            p += 2;
            continue;
        }
        char *e;
        double x = strtod(p, &e);
        if (e == p || *e != ',') return n;
        double y = strtod(e + 1, &e);
        X[n] = x;
        Y[n] = y;
        n++;
        p = e;
    }
    return n;
}

static void test_escape(void) {
    char *e = NULL;
    CHECK_OK(dd_html_escape("a<b & \"c\" 'd'>", &e));
    CHECK(e && strcmp(e, "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;") == 0, "escaped: %s", e ? e : "(null)");
    dd_free(e);
    CHECK_OK(dd_html_escape("", &e));
    CHECK(e && e[0] == '\0', "empty string stays empty");
    dd_free(e);
}

static void test_nice_ticks(void) {
    const double cases[][2] = {{0, 1},      {-3.7, 42.1}, {-123.4, -7.2}, {0.0013, 0.0094}, {-400, 0},
                               {5, 5},      {0, 0},       {-1e6, 3e6},    {-0.3, 0.3},      {99.99, 100.01},
                               {-40, -39.9}, {1e-7, 3e-7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double lo = cases[i][0], hi = cases[i][1];
        for (int target = 2; target <= 12; target += 5) {
            double t0, t1, st;
            CHECK_OK(dd_plot_nice_ticks(lo, hi, target, &t0, &t1, &st));
            CHECK(t0 <= lo && t1 >= hi, "[%g, %g] not covered by [%g, %g]", lo, hi, t0, t1);
            CHECK(t1 > t0, "empty tick range for [%g, %g]", lo, hi);
            double m = st / pow(10.0, floor(log10(st) + 1e-12));
            CHECK(fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 5) < 1e-9, "step %g is not 1/2/5 x 10^k", st);
            double k0 = t0 / st;
            CHECK(fabs(k0 - round(k0)) < 1e-6, "first tick %g is not a multiple of %g", t0, st);
            double nint = (t1 - t0) / st;
            CHECK(nint >= 1 && nint <= 2.5 * target + 2, "[%g,%g] target %d gave %g intervals", lo, hi, target, nint);
            /* not absurdly loose: the data fill at least 1/3 of the axis (if not degenerate) */
            if (hi - lo > 1e-9 * fmax(fabs(lo), fabs(hi)) && hi > lo)
                CHECK((hi - lo) / (t1 - t0) > 0.3, "[%g,%g] -> [%g,%g] too loose", lo, hi, t0, t1);
        }
    }
    double a, b, c;
    CHECK_ERR(dd_plot_nice_ticks(NAN, 1, 5, &a, &b, &c), DD_ERR_ARG, "finite");
    CHECK_ERR(dd_plot_nice_ticks(2, 1, 5, &a, &b, &c), DD_ERR_ARG, "lo <= hi");
}

static void test_plot_series_and_nan(void) {
    double x[50], y1[50], y2[50], y3[50];
    for (int i = 0; i < 50; i++) {
        x[i] = i * 0.1 - 1.0;
        y1[i] = sin(x[i]) * 40.0 - 3.0;
        y2[i] = (i % 7 == 3) ? NAN : cos(x[i]);
        y3[i] = (i == 20) ? INFINITY : x[i];
    }
    dd_series s[3] = {{"sine & <co>", x, y1, 50, DD_SERIES_LINE, NULL},
                      {"cos \"gappy\"", x, y2, 50, DD_SERIES_LINE, "#123456"},
                      {"points", x, y3, 50, DD_SERIES_POINTS, NULL}};
    dd_plot_opts o;
    dd_plot_opts_default(&o);
    o.title = "T <1>";
    o.xlabel = "x & y";
    o.ylabel = "dB";
    char *svg = NULL;
    CHECK_OK(dd_plot_svg(&o, s, 3, &svg));
    if (!svg) return;
    CHECK(count_sub(svg, "<path") == 3, "%zu paths for 3 series", count_sub(svg, "<path"));
    CHECK(!contains_ci(svg, "nan") && !contains_ci(svg, "inf"), "NaN/Inf printed in the SVG");
    CHECK(strstr(svg, "sine &amp; &lt;co&gt;") != NULL, "legend label not escaped");
    CHECK(strstr(svg, "cos &quot;gappy&quot;") != NULL, "quote not escaped");
    CHECK(strstr(svg, "x &amp; y") != NULL, "axis label not escaped");
    CHECK(strstr(svg, "<co>") == NULL, "raw label leaked");
    CHECK(well_formed(svg), "SVG not well-formed");
    /* series 2 has NaN at i = 3, 10, 17, ..., 45: 7 gaps -> 8 subpaths */
    const char *p2 = strstr(svg, "#123456");
    CHECK(p2 != NULL, "custom colour not used");
    if (p2) {
        const char *d = strstr(p2, " d=\"");
        const char *e = d ? strchr(d + 4, '"') : NULL;
        size_t nm = 0;
        for (const char *q = d; q && q < e; q++) nm += *q == 'M';
        CHECK(nm == 8, "NaN gaps: %zu subpaths, want 8", nm);
    }
    /* y tick labels cover the data range of all series [-3 - 40 sin(1), 40 sin(3.9)...] */
    double ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < 50; i++) {
        double v[3] = {y1[i], y2[i], y3[i]};
        for (int k = 0; k < 3; k++)
            if (isfinite(v[k])) {
                ymin = fmin(ymin, v[k]);
                ymax = fmax(ymax, v[k]);
            }
    }
    double t[64];
    int nt = y_tick_labels(svg, t, 64);
    CHECK(nt >= 3, "only %d y tick labels", nt);
    if (nt >= 3) {
        CHECK(t[0] <= ymin && t[nt - 1] >= ymax, "ticks %g..%g do not cover %g..%g", t[0], t[nt - 1], ymin, ymax);
        double st = t[1] - t[0];
        for (int k = 2; k < nt; k++) CHECK_NEAR(t[k] - t[k - 1], st, 1e-9);
    }
    dd_free(svg);

    /* no series: empty axes; an empty series: one empty path */
    CHECK_OK(dd_plot_svg(&o, NULL, 0, &svg));
    CHECK(svg && count_sub(svg, "<path") == 0 && strstr(svg, "no data"), "empty plot");
    dd_free(svg);
    double nanv[3] = {NAN, NAN, NAN};
    dd_series e = {"all NaN", nanv, nanv, 3, DD_SERIES_LINE, NULL};
    CHECK_OK(dd_plot_svg(&o, &e, 1, &svg));
    CHECK(svg && count_sub(svg, "<path") == 1 && !contains_ci(svg, "nan\"") && strstr(svg, "d=\"\""), "all-NaN series");
    dd_free(svg);
}

static void test_reduction(void) {
    size_t n = 200000;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        CHECK(0, "malloc");
        return;
    }
    dd_rng r;
    dd_rng_seed(&r, 7);
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)i / n * 800.0 - 400.0;
        y[i] = -60.0 + 3.0 * dd_rng_normal(&r);
    }
    y[123457] = 0.0; /* a narrow peak that max-hold must keep */
    dd_series s = {"psd", x, y, n, DD_SERIES_LINE, NULL};
    dd_plot_opts o;
    dd_plot_opts_default(&o);
    o.reduce = DD_PLOT_REDUCE_MAX;
    o.ymin = -80.0;
    o.ymax = 0.0;
    char *svg = NULL;
    CHECK_OK(dd_plot_svg(&o, &s, 1, &svg));
    if (svg) {
        size_t cap = 100000;
        double *X = malloc(cap * sizeof *X), *Y = malloc(cap * sizeof *Y);
        size_t np = path_points(svg, X, Y, cap);
        CHECK(np > 300 && np <= (size_t)o.width, "max-hold kept %zu points (width %d)", np, o.width);
        double ytop = 1e9;
        for (size_t i = 0; i < np; i++) ytop = fmin(ytop, Y[i]);
        CHECK_NEAR(ytop, 12.0, 0.05); /* the peak reaches the top edge (top margin 12 px) */
        CHECK(strlen(svg) < 40000, "max-hold SVG is %zu bytes", strlen(svg));
        free(X);
        free(Y);
        dd_free(svg);
    }
    o.reduce = DD_PLOT_REDUCE_MINMAX;
    CHECK_OK(dd_plot_svg(&o, &s, 1, &svg));
    if (svg) {
        size_t cap = 100000;
        double *X = malloc(cap * sizeof *X), *Y = malloc(cap * sizeof *Y);
        size_t np = path_points(svg, X, Y, cap);
        CHECK(np <= 4 * (size_t)o.width, "min/max kept %zu points", np);
        double ytop = 1e9, ybot = -1e9;
        for (size_t i = 0; i < np; i++) {
            ytop = fmin(ytop, Y[i]);
            ybot = fmax(ybot, Y[i]);
        }
        CHECK_NEAR(ytop, 12.0, 0.05);
        CHECK(ybot > 200, "min envelope lost (lowest point at y = %g px)", ybot);
        CHECK(strlen(svg) < 120000, "min/max SVG is %zu bytes", strlen(svg));
        free(X);
        free(Y);
        dd_free(svg);
    }
    /* y_span_max: a -400 dB floor does not stretch the axis */
    y[5] = -400.0;
    o.ymin = o.ymax = NAN;
    o.y_span_max = 90.0;
    CHECK_OK(dd_plot_svg(&o, &s, 1, &svg));
    if (svg) {
        double t[64];
        int nt = y_tick_labels(svg, t, 64);
        CHECK(nt >= 2 && t[0] >= -100.0 && t[nt - 1] >= 0.0, "span-limited ticks %g..%g", nt ? t[0] : 0, nt ? t[nt - 1] : 0);
        CHECK(!contains_ci(svg, "nan"), "nan printed");
        dd_free(svg);
    }
    /* scatter: 200k points in one spot -> one dot */
    for (size_t i = 0; i < n; i++) {
        x[i] = 1.0;
        y[i] = 2.0;
    }
    x[0] = 0.0;
    y[0] = 0.0;
    dd_series sc = {"pts", x, y, n, DD_SERIES_POINTS, NULL};
    o.y_span_max = 0;
    CHECK_OK(dd_plot_svg(&o, &sc, 1, &svg));
    if (svg) {
        CHECK(count_sub(svg, "h0") == 2, "scatter dedupe: %zu dots, want 2", count_sub(svg, "h0"));
        dd_free(svg);
    }
    free(x);
    free(y);
}

static void test_report_page(void) {
    dd_report *r = NULL;
    CHECK_OK(dd_report_create("Report <&\"> test", &r));
    if (!r) return;
    CHECK_OK(dd_report_heading(r, "Section & <1>"));
    CHECK_OK(dd_report_paragraph(r, "a < b && c > \"d\""));
    CHECK_OK(dd_report_pre(r, "distdpd demo --out 'x'"));
    const char *hdr[3] = {"metric", "value", "note <x>"};
    CHECK_OK(dd_report_table_begin(r, "Metrics & co", 3, hdr));
    const char *row1[3] = {"ACLR <L>", "-34.21", "dBc"};
    const char *row2[3] = {"NMSE", "-19.9", NULL};
    const char *row3[3] = {"EVM", "n/a", "x&y"};
    CHECK_OK(dd_report_table_row(r, row1));
    CHECK_OK(dd_report_table_row(r, row2));
    CHECK_OK(dd_report_table_row(r, row3));
    CHECK_ERR(dd_report_paragraph(r, "inside a table"), DD_ERR_ARG, "table is still open");
    const char *html;
    CHECK_ERR(dd_report_html(r, &html, NULL), DD_ERR_ARG, "table is still open");
    CHECK_OK(dd_report_table_end(r));
    CHECK_ERR(dd_report_table_end(r), DD_ERR_ARG, "no table");
    double x[4] = {0, 1, 2, 3}, y[4] = {1, NAN, 3, 2};
    dd_series s[2] = {{"a", x, y, 4, DD_SERIES_BOTH, NULL}, {"b", y, x, 4, DD_SERIES_LINE, NULL}};
    dd_plot_opts o;
    dd_plot_opts_default(&o);
    o.caption = "caption <c>";
    CHECK_OK(dd_report_plot(r, &o, s, 2));
    o.width = 10;
    CHECK_ERR(dd_report_plot(r, &o, s, 2), DD_ERR_ARG, "width");
    dd_plot_opts_default(&o);
    s[0].color = "red\"/><script>";
    CHECK_ERR(dd_report_plot(r, &o, s, 2), DD_ERR_ARG, "colour");
    s[0].color = NULL;
    o.xmin = 3;
    o.xmax = 1;
    CHECK_ERR(dd_report_plot(r, &o, s, 2), DD_ERR_ARG, "xmin");

    size_t len = 0;
    CHECK_OK(dd_report_html(r, &html, &len));
    CHECK(html && strlen(html) == len, "length");
    if (html) {
        CHECK(well_formed(html), "page is not well-formed");
        CHECK(strstr(html, "<title>Report &lt;&amp;&quot;&gt; test</title>") != NULL, "title escaped");
        CHECK(strstr(html, "a &lt; b &amp;&amp; c &gt; &quot;d&quot;") != NULL, "paragraph escaped");
        CHECK(strstr(html, "<caption>Metrics &amp; co</caption>") != NULL, "caption escaped");
        CHECK(strstr(html, "<td class=\"num\">-34.21</td>") != NULL, "numeric column right-aligned");
        CHECK(strstr(html, "<td>dBc</td>") != NULL, "text column left-aligned");
        CHECK(strstr(html, "<figcaption>caption &lt;c&gt;</figcaption>") != NULL, "figcaption");
        CHECK(count_sub(html, "<svg") == 1, "failed plots left no SVG behind (%zu)", count_sub(html, "<svg"));
        CHECK(count_sub(html, "<path") == 2, "%zu paths", count_sub(html, "<path"));
        CHECK(count_sub(html, "<circle") == 3, "BOTH: %zu dots for 3 finite points", count_sub(html, "<circle"));
        CHECK(strstr(html, "<script") == NULL, "page has a script");
        CHECK(count_sub(html, "http") == count_sub(html, "http://www.w3.org/2000/svg"), "page refers to the network");
        CHECK(!contains_ci(html, "nan"), "nan in page");
    }

    /* atomic write: the file equals the page, no temporary left behind */
    const char *dir = dd_test_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/r.html", dir);
    CHECK_OK(dd_report_write(r, path));
    CHECK_OK(dd_report_html(r, &html, &len));
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "report not written");
    if (f) {
        char *buf = malloc(len + 2);
        size_t got = buf ? fread(buf, 1, len + 1, f) : 0;
        CHECK(got == len && buf && memcmp(buf, html, len) == 0, "file differs from page (%zu vs %zu bytes)", got, len);
        free(buf);
        fclose(f);
    }
    DIR *d = opendir(dir);
    int entries = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') entries++;
    if (d) closedir(d);
    CHECK(entries == 1, "%d files in the output directory, want 1", entries);
    remove(path);
    rmdir(dir);
    CHECK_ERR(dd_report_write(r, "/nonexistent-dir-xyz/r.html"), DD_ERR_IO, "/nonexistent-dir-xyz/r.html");
    dd_report_free(&r);
    CHECK(r == NULL, "free NULLs the handle");
    dd_report_free(&r);
    CHECK_ERR(dd_report_create(NULL, &r), DD_ERR_ARG, "title");
}

int main(void) {
    test_escape();
    test_nice_ticks();
    test_plot_series_and_nan();
    test_reduction();
    test_report_page();
    return dd_test_done("test_report");
}
