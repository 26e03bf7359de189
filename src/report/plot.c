/* SVG plots for the HTML reports: nice-tick axes, grid, line and scatter series with
 * per-pixel-column thinning, legend. See report.h for the contract and docs/report.md
 * for the layout. Every data series is exactly one <path>; nothing else uses <path>. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "distdpd/report.h"
#include "report_internal.h"
#include "sbuf.h"

/* matplotlib's tab10 palette: distinct and readable on white. */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define N_PALETTE (sizeof palette / sizeof palette[0])

#define CHAR_W 6.8      /* approximate width of one 12 px sans-serif character */
#define LEGEND_ROW_H 20 /* legend row height, px */
#define MAX_CIRCLES 300 /* DD_SERIES_BOTH draws dots only up to this many points */
#define CLIP_MARGIN 3.0 /* lines leave the plot area by this many pixels, then are clipped */

/* Makes the clip-path ids unique among all plots rendered by this process, so that
 * any number of them can be inlined in one page. */
static atomic_ulong plot_counter;

void dd_plot_opts_default(dd_plot_opts *o) {
    memset(o, 0, sizeof *o);
    o->width = 760;
    o->height = 380;
    o->xmin = o->xmax = o->ymin = o->ymax = NAN;
    o->y_span_max = 0.0;
    o->reduce = DD_PLOT_REDUCE_MINMAX;
}

/* Heckbert's "nice number": a 1, 2, 5 or 10 x 10^k close to x (rounded or >= x). */
static double nicenum(double x, int round) {
    double e = floor(log10(x));
    double p = pow(10.0, e);
    double f = x / p, nf;
    if (round)
        nf = f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0;
    else
        nf = f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0;
    return nf * p;
}

dd_status dd_plot_nice_ticks(double lo, double hi, int target, double *lo_tick,
                             double *hi_tick, double *step) {
    if (!isfinite(lo) || !isfinite(hi) || lo > hi)
        return dd_error(DD_ERR_ARG, "dd_plot_nice_ticks: need finite lo <= hi, got %g, %g", lo, hi);
    if (!lo_tick || !hi_tick || !step) return dd_error(DD_ERR_ARG, "dd_plot_nice_ticks: NULL output");
    if (target < 2) target = 2;
    if (target > 20) target = 20;
    double mag = fmax(fabs(lo), fabs(hi));
    if (hi - lo <= 1e-9 * mag || hi - lo < 1e-300) {
        double d = mag > 0 ? 0.1 * mag : 1.0;
        lo -= d;
        hi += d;
    }
    double span = hi - lo;
    if (!isfinite(span)) return dd_error(DD_ERR_RANGE, "dd_plot_nice_ticks: range %g..%g too wide", lo, hi);
    double st = nicenum(nicenum(span, 0) / target, 1);
    double k0 = floor(lo / st), k1 = ceil(hi / st);
    while (k0 * st > lo) k0 -= 1.0;
    while (k1 * st < hi) k1 += 1.0;
    *lo_tick = k0 * st;
    *hi_tick = k1 * st;
    *step = st;
    return DD_OK;
}

/* Decimals needed to print multiples of step exactly. */
static int tick_decimals(double step) {
    int d = (int)-floor(log10(step) + 1e-9);
    return d < 0 ? 0 : d;
}

static void tick_label(char *buf, size_t n, double v, double step) {
    if (fabs(v) < 1e-9 * step) v = 0.0;
    int dec = tick_decimals(step);
    if (dec > 6 || fabs(v) >= 1e7)
        snprintf(buf, n, "%.3g", v);
    else
        snprintf(buf, n, "%.*f", dec, v);
    if (buf[0] == '-') { /* never "-0" */
        int zero = 1;
        for (const char *q = buf + 1; *q; q++)
            if (*q != '0' && *q != '.') zero = 0;
        if (zero) memmove(buf, buf + 1, strlen(buf));
    }
}

static int color_ok(const char *c) {
    if (!*c || strlen(c) > 40) return 0;
    for (; *c; c++) {
        char ch = *c;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 strchr("#(),. %", ch) != NULL;
        if (!ok) return 0;
    }
    return 1;
}

/* One axis: data->pixel mapping and tick positions. */
typedef struct {
    double lo, hi;        /* axis limits (data units) */
    double t0, step;      /* first tick and step */
    int nt;               /* number of ticks */
    double p0, p1;        /* pixel positions of lo and hi */
} axis;

static double amap(const axis *a, double v) { return a->p0 + (v - a->lo) / (a->hi - a->lo) * (a->p1 - a->p0); }

static dd_status axis_setup(axis *a, double lo, double hi, int fixed_lo, int fixed_hi, int target) {
    double t0, t1, st;
    DD_TRY(dd_plot_nice_ticks(lo, hi, target, &t0, &t1, &st));
    a->lo = fixed_lo ? lo : t0;
    a->hi = fixed_hi ? hi : t1;
    if (!(a->hi > a->lo)) { /* fixed limits equal: widen */
        a->lo = t0;
        a->hi = t1;
    }
    a->step = st;
    a->t0 = ceil(a->lo / st - 1e-9) * st;
    a->nt = (int)floor((a->hi - a->t0) / st + 1e-9) + 1;
    if (a->nt < 0) a->nt = 0;
    if (a->nt > 200) a->nt = 200;
    return DD_OK;
}

/* Line path writer: subpaths broken at gaps, duplicate pixels dropped, a lone point
 * drawn as a zero-length segment (a dot with round caps). */
typedef struct {
    dd_sb *b;
    int open;      /* inside a subpath */
    size_t npts;   /* points in the current subpath */
    long lx, ly;   /* last point, tenths of a pixel */
    size_t total;  /* points written */
} pathw;

static void pw_point(pathw *w, double X, double Y) {
    long ix = lround(X * 10.0), iy = lround(Y * 10.0);
    if (w->open && ix == w->lx && iy == w->ly) return;
    if (!w->open) {
        dd_sb_puts(w->b, "M");
        w->open = 1;
        w->npts = 0;
    } else {
        dd_sb_puts(w->b, w->npts == 1 ? "L" : " ");
    }
    dd_sb_num(w->b, ix / 10.0, 1);
    dd_sb_puts(w->b, ",");
    dd_sb_num(w->b, iy / 10.0, 1);
    w->lx = ix;
    w->ly = iy;
    w->npts++;
    w->total++;
}

static void pw_break(pathw *w) {
    if (w->open && w->npts == 1) dd_sb_puts(w->b, "h0");
    w->open = 0;
}

/* Points of one pixel column, for the reduction. */
typedef struct {
    int active;
    long col;
    size_t i_first, i_min, i_max, i_last; /* indices into the series */
    double X[4], Y[4];                    /* pixel coordinates of first, min, max, last */
} colgroup;

static void cg_flush(colgroup *g, pathw *w, dd_plot_reduce mode) {
    if (!g->active) return;
    if (mode == DD_PLOT_REDUCE_MAX) {
        pw_point(w, g->X[1], g->Y[1]); /* slot 1 holds the top-most (largest y) point */
    } else {
        /* first, min, max, last in series order, without repeats */
        size_t idx[4] = {g->i_first, g->i_min, g->i_max, g->i_last};
        int ord[4] = {0, 1, 2, 3};
        for (int a = 0; a < 4; a++)
            for (int c = a + 1; c < 4; c++)
                if (idx[ord[c]] < idx[ord[a]]) {
                    int t = ord[a];
                    ord[a] = ord[c];
                    ord[c] = t;
                }
        size_t prev = SIZE_MAX;
        for (int a = 0; a < 4; a++) {
            if (idx[ord[a]] == prev) continue;
            prev = idx[ord[a]];
            pw_point(w, g->X[ord[a]], g->Y[ord[a]]);
        }
    }
    g->active = 0;
}

/* Slot 1 = smallest pixel Y (largest value), slot 2 = largest pixel Y. */
static void cg_add(colgroup *g, size_t i, double X, double Y) {
    if (!g->active) {
        g->active = 1;
        g->col = (long)floor(X);
        g->i_first = g->i_min = g->i_max = g->i_last = i;
        for (int k = 0; k < 4; k++) {
            g->X[k] = X;
            g->Y[k] = Y;
        }
        return;
    }
    if (Y < g->Y[1]) {
        g->i_min = i;
        g->X[1] = X;
        g->Y[1] = Y;
    }
    if (Y > g->Y[2]) {
        g->i_max = i;
        g->X[2] = X;
        g->Y[2] = Y;
    }
    g->i_last = i;
    g->X[3] = X;
    g->Y[3] = Y;
}

static void render_line(dd_sb *b, const dd_series *s, const axis *ax, const axis *ay,
                        dd_plot_reduce mode) {
    pathw w = {b, 0, 0, 0, 0, 0};
    colgroup g;
    memset(&g, 0, sizeof g);
    double ytop = fmin(ay->p0, ay->p1) - CLIP_MARGIN, ybot = fmax(ay->p0, ay->p1) + CLIP_MARGIN;
    double xeps = 1e-9 * (ax->hi - ax->lo);
    for (size_t i = 0; i < s->n; i++) {
        double x = s->x[i], y = s->y[i];
        if (!isfinite(x) || !isfinite(y) || x < ax->lo - xeps || x > ax->hi + xeps) {
            cg_flush(&g, &w, mode);
            pw_break(&w);
            continue;
        }
        double X = amap(ax, x), Y = amap(ay, y);
        if (Y < ytop) Y = ytop; /* clamp just outside the plot area (clipped there) */
        if (Y > ybot) Y = ybot;
        if (mode == DD_PLOT_REDUCE_NONE) {
            pw_point(&w, X, Y);
            continue;
        }
        if (g.active && (long)floor(X) != g.col) cg_flush(&g, &w, mode);
        cg_add(&g, i, X, Y);
    }
    cg_flush(&g, &w, mode);
    pw_break(&w);
}

/* Scatter: one dot per occupied 2x2 pixel cell. */
static dd_status render_points(dd_sb *b, const dd_series *s, const axis *ax, const axis *ay) {
    double pw = fabs(ax->p1 - ax->p0), ph = fabs(ay->p1 - ay->p0);
    size_t cw = (size_t)(pw / 2) + 2, ch = (size_t)(ph / 2) + 2;
    unsigned char *seen = dd_calloc(cw * ch, 1);
    if (!seen) return DD_ERR_NOMEM;
    double xl = fmin(ax->p0, ax->p1), yl = fmin(ay->p0, ay->p1);
    double eps = 1e-6;
    for (size_t i = 0; i < s->n; i++) {
        double x = s->x[i], y = s->y[i];
        if (!isfinite(x) || !isfinite(y)) continue;
        double X = amap(ax, x), Y = amap(ay, y);
        if (X < xl - eps || X > xl + pw + eps || Y < yl - eps || Y > yl + ph + eps) continue;
        size_t cx = (size_t)((X - xl) / 2), cy = (size_t)((Y - yl) / 2);
        if (cx >= cw || cy >= ch || seen[cy * cw + cx]) continue;
        seen[cy * cw + cx] = 1;
        dd_sb_printf(b, "M%ld,%ldh0", lround(X), lround(Y)); /* dots: whole pixels suffice */
    }
    dd_free(seen);
    return DD_OK;
}

static void render_circles(dd_sb *b, const dd_series *s, const axis *ax, const axis *ay,
                           const char *color) {
    double xl = fmin(ax->p0, ax->p1), xh = fmax(ax->p0, ax->p1);
    double yl = fmin(ay->p0, ay->p1), yh = fmax(ay->p0, ay->p1);
    size_t nfin = 0;
    for (size_t i = 0; i < s->n; i++)
        if (isfinite(s->x[i]) && isfinite(s->y[i])) nfin++;
    if (nfin > MAX_CIRCLES) return;
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->x[i]) || !isfinite(s->y[i])) continue;
        double X = amap(ax, s->x[i]), Y = amap(ay, s->y[i]);
        if (X < xl - 1e-6 || X > xh + 1e-6 || Y < yl - 1e-6 || Y > yh + 1e-6) continue;
        dd_sb_puts(b, "<circle cx=\"");
        dd_sb_num(b, X, 1);
        dd_sb_puts(b, "\" cy=\"");
        dd_sb_num(b, Y, 1);
        dd_sb_printf(b, "\" r=\"2.6\" fill=\"%s\"/>", color);
    }
}

/* Data extent over the finite points; x restricted to [xlo_f, xhi_f] when those are
 * finite (fixed limits), y likewise. Returns the number of points counted. */
static size_t extent(const dd_series *s, size_t ns, double xlo_f, double xhi_f, double ylo_f,
                     double yhi_f, double *xlo, double *xhi, double *ylo, double *yhi) {
    size_t cnt = 0;
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            if ((isfinite(xlo_f) && x < xlo_f) || (isfinite(xhi_f) && x > xhi_f)) continue;
            if ((isfinite(ylo_f) && y < ylo_f) || (isfinite(yhi_f) && y > yhi_f)) continue;
            cnt++;
            if (x < *xlo) *xlo = x;
            if (x > *xhi) *xhi = x;
            if (y < *ylo) *ylo = y;
            if (y > *yhi) *yhi = y;
        }
    return cnt;
}

static dd_status check_args(const dd_plot_opts *o, const dd_series *s, size_t ns) {
    if (!o) return dd_error(DD_ERR_ARG, "plot: options are NULL");
    if (o->width < 240 || o->width > 4000)
        return dd_error(DD_ERR_ARG, "plot: width must be in 240..4000, got %d", o->width);
    if (o->height < 160 || o->height > 4000)
        return dd_error(DD_ERR_ARG, "plot: height must be in 160..4000, got %d", o->height);
    if (ns > 0 && !s) return dd_error(DD_ERR_ARG, "plot: series array is NULL");
    if (ns > 64) return dd_error(DD_ERR_ARG, "plot: at most 64 series, got %zu", ns);
    if (!(o->y_span_max >= 0)) return dd_error(DD_ERR_ARG, "plot: y_span_max must be >= 0");
    if ((unsigned)o->reduce > DD_PLOT_REDUCE_NONE) return dd_error(DD_ERR_ARG, "plot: bad reduce mode %d", (int)o->reduce);
    if (isfinite(o->xmin) && isfinite(o->xmax) && !(o->xmin < o->xmax))
        return dd_error(DD_ERR_ARG, "plot: xmin %g must be below xmax %g", o->xmin, o->xmax);
    if (isfinite(o->ymin) && isfinite(o->ymax) && !(o->ymin < o->ymax))
        return dd_error(DD_ERR_ARG, "plot: ymin %g must be below ymax %g", o->ymin, o->ymax);
    for (size_t k = 0; k < ns; k++) {
        if (s[k].n > 0 && (!s[k].x || !s[k].y))
            return dd_error(DD_ERR_ARG, "plot: series %zu ('%s') has NULL data", k, s[k].label ? s[k].label : "");
        if ((unsigned)s[k].style > DD_SERIES_BOTH)
            return dd_error(DD_ERR_ARG, "plot: series %zu has bad style %d", k, (int)s[k].style);
        if (s[k].color && !color_ok(s[k].color))
            return dd_error(DD_ERR_ARG, "plot: series %zu: colour '%s' is not a plain CSS colour", k, s[k].color);
    }
    return DD_OK;
}

static void text_el(dd_sb *b, double x, double y, const char *anchor, const char *cls, const char *txt) {
    dd_sb_puts(b, "<text x=\"");
    dd_sb_num(b, x, 1);
    dd_sb_puts(b, "\" y=\"");
    dd_sb_num(b, y, 1);
    dd_sb_printf(b, "\" text-anchor=\"%s\"%s%s%s>", anchor, cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
    dd_sb_escape(b, txt);
    dd_sb_puts(b, "</text>");
}

static void hline(dd_sb *b, double x1, double y1, double x2, double y2, const char *attrs) {
    dd_sb_puts(b, "<line x1=\"");
    dd_sb_num(b, x1, 1);
    dd_sb_puts(b, "\" y1=\"");
    dd_sb_num(b, y1, 1);
    dd_sb_puts(b, "\" x2=\"");
    dd_sb_num(b, x2, 1);
    dd_sb_puts(b, "\" y2=\"");
    dd_sb_num(b, y2, 1);
    dd_sb_printf(b, "\" %s/>", attrs);
}

dd_status dd_plot_render(dd_sb *b, const dd_plot_opts *o, const dd_series *s, size_t ns) {
    DD_TRY(check_args(o, s, ns));
    const double W = o->width, H = o->height;
    int fx0 = isfinite(o->xmin), fx1 = isfinite(o->xmax), fy0 = isfinite(o->ymin), fy1 = isfinite(o->ymax);

    /* data extent and axes */
    double xlo, xhi, ylo, yhi;
    size_t cnt = extent(s, ns, o->xmin, o->xmax, o->ymin, o->ymax, &xlo, &xhi, &ylo, &yhi);
    if (cnt == 0) { /* no data: empty axes */
        xlo = 0.0;
        xhi = 1.0;
        ylo = 0.0;
        yhi = 1.0;
    } else if (!fy0 && o->y_span_max > 0 && yhi - ylo > o->y_span_max) {
        ylo = yhi - o->y_span_max;
    }
    if (fx0) xlo = o->xmin;
    if (fx1) xhi = o->xmax;
    if (fy0) ylo = o->ymin;
    if (fy1) yhi = o->ymax;
    if (xlo > xhi) xlo = xhi; /* one fixed limit beyond all data */
    if (ylo > yhi) ylo = yhi;

    const double top = o->title ? 32.0 : 12.0, right = 18.0;
    const double bottom = 26.0 + (o->xlabel ? 20.0 : 0.0);
    axis ax, ay;
    int ty = (int)((H - top - bottom) / 42.0);
    DD_TRY(axis_setup(&ay, ylo, yhi, fy0, fy1, ty < 2 ? 2 : ty));
    /* left margin: widest y tick label */
    size_t maxlab = 1;
    char lab[64];
    for (int k = 0; k < ay.nt; k++) {
        tick_label(lab, sizeof lab, ay.t0 + k * ay.step, ay.step);
        if (strlen(lab) > maxlab) maxlab = strlen(lab);
    }
    const double left = 12.0 + (o->ylabel ? 20.0 : 0.0) + maxlab * CHAR_W + 8.0;
    int tx = (int)((W - left - right) / 90.0);
    DD_TRY(axis_setup(&ax, xlo, xhi, fx0, fx1, tx < 2 ? 2 : tx));
    /* x tick labels must not collide: thin them if the widest would overlap */
    size_t maxxlab = 1;
    for (int k = 0; k < ax.nt; k++) {
        tick_label(lab, sizeof lab, ax.t0 + k * ax.step, ax.step);
        if (strlen(lab) > maxxlab) maxxlab = strlen(lab);
    }
    ax.p0 = left;
    ax.p1 = W - right;
    ay.p0 = H - bottom;
    ay.p1 = top;
    int xlab_every = 1;
    double tick_px = ax.nt > 1 ? (ax.p1 - ax.p0) * ax.step / (ax.hi - ax.lo) : 1e9;
    while (xlab_every < 10 && tick_px * xlab_every < maxxlab * CHAR_W + 10.0) xlab_every++;

    /* legend layout */
    int rows = 0;
    double cur = W; /* forces a new row on the first item */
    for (size_t k = 0; k < ns; k++) {
        if (!s[k].label || !*s[k].label) continue;
        double wd = 30.0 + strlen(s[k].label) * CHAR_W + 18.0;
        if (rows == 0 || cur + wd > W - right) {
            rows++;
            cur = left;
        }
        cur += wd;
    }
    const double Htot = H + rows * LEGEND_ROW_H + (rows ? 6.0 : 0.0);

    dd_sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" class=\"plot\" font-family=\"sans-serif\" font-size=\"12\">",
                 (int)W, (int)Htot, (int)W, (int)Htot);
    if (o->title) {
        dd_sb_puts(b, "<title>");
        dd_sb_escape(b, o->title);
        dd_sb_puts(b, "</title>");
    }
    dd_sb_printf(b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>", (int)W, (int)Htot);

    /* grid and ticks */
    dd_sb_puts(b, "<g class=\"grid\">");
    for (int k = 0; k < ax.nt; k++) {
        double X = amap(&ax, ax.t0 + k * ax.step);
        hline(b, X, ay.p1, X, ay.p0, "stroke=\"#e3e3e3\"");
    }
    for (int k = 0; k < ay.nt; k++) {
        double Y = amap(&ay, ay.t0 + k * ay.step);
        hline(b, ax.p0, Y, ax.p1, Y, "stroke=\"#e3e3e3\"");
    }
    dd_sb_puts(b, "</g><g class=\"ticks\" fill=\"#333\">");
    for (int k = 0; k < ax.nt; k++) {
        double v = ax.t0 + k * ax.step, X = amap(&ax, v);
        hline(b, X, ay.p0, X, ay.p0 + 5, "stroke=\"#444\"");
        /* label every xlab_every-th tick, keeping the ones at multiples of that stride */
        long kk = lround(v / ax.step);
        if (kk % xlab_every != 0) continue;
        tick_label(lab, sizeof lab, v, ax.step);
        text_el(b, X, ay.p0 + 18, "middle", NULL, lab);
    }
    for (int k = 0; k < ay.nt; k++) {
        double v = ay.t0 + k * ay.step, Y = amap(&ay, v);
        hline(b, ax.p0 - 5, Y, ax.p0, Y, "stroke=\"#444\"");
        tick_label(lab, sizeof lab, v, ay.step);
        text_el(b, ax.p0 - 8, Y + 4, "end", NULL, lab);
    }
    dd_sb_puts(b, "</g>");

    /* series, clipped to the plot area */
    unsigned long uid = atomic_fetch_add(&plot_counter, 1ul);
    dd_sb_printf(b, "<defs><clipPath id=\"ddclip%lu\"><rect x=\"", uid);
    dd_sb_num(b, ax.p0, 1);
    dd_sb_puts(b, "\" y=\"");
    dd_sb_num(b, ay.p1, 1);
    dd_sb_puts(b, "\" width=\"");
    dd_sb_num(b, ax.p1 - ax.p0, 1);
    dd_sb_puts(b, "\" height=\"");
    dd_sb_num(b, ay.p0 - ay.p1, 1);
    dd_sb_printf(b, "\"/></clipPath></defs><g clip-path=\"url(#ddclip%lu)\">", uid);
    for (size_t k = 0; k < ns; k++) {
        const char *color = s[k].color ? s[k].color : palette[k % N_PALETTE];
        int pts = s[k].style == DD_SERIES_POINTS;
        dd_sb_printf(b, "<path class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" stroke-linecap=\"round\" stroke-linejoin=\"round\" d=\"",
                     color, pts ? "3.5" : "1.6");
        if (pts) {
            DD_TRY(render_points(b, &s[k], &ax, &ay));
        } else {
            render_line(b, &s[k], &ax, &ay, o->reduce);
        }
        dd_sb_puts(b, "\">");
        if (s[k].label && *s[k].label) {
            dd_sb_puts(b, "<title>");
            dd_sb_escape(b, s[k].label);
            dd_sb_puts(b, "</title>");
        }
        dd_sb_puts(b, "</path>");
        if (s[k].style == DD_SERIES_BOTH) render_circles(b, &s[k], &ax, &ay, color);
    }
    dd_sb_puts(b, "</g>");
    if (cnt == 0) text_el(b, (ax.p0 + ax.p1) / 2, (ay.p0 + ay.p1) / 2, "middle", NULL, "no data");

    /* frame, labels, title */
    dd_sb_puts(b, "<rect x=\"");
    dd_sb_num(b, ax.p0, 1);
    dd_sb_puts(b, "\" y=\"");
    dd_sb_num(b, ay.p1, 1);
    dd_sb_puts(b, "\" width=\"");
    dd_sb_num(b, ax.p1 - ax.p0, 1);
    dd_sb_puts(b, "\" height=\"");
    dd_sb_num(b, ay.p0 - ay.p1, 1);
    dd_sb_puts(b, "\" fill=\"none\" stroke=\"#444\"/>");
    if (o->xlabel) text_el(b, (ax.p0 + ax.p1) / 2, ay.p0 + 38, "middle", NULL, o->xlabel);
    if (o->ylabel) {
        double X = 16.0, Y = (ay.p0 + ay.p1) / 2;
        dd_sb_puts(b, "<text transform=\"rotate(-90 ");
        dd_sb_num(b, X, 1);
        dd_sb_puts(b, " ");
        dd_sb_num(b, Y, 1);
        dd_sb_puts(b, ")\" x=\"");
        dd_sb_num(b, X, 1);
        dd_sb_puts(b, "\" y=\"");
        dd_sb_num(b, Y, 1);
        dd_sb_puts(b, "\" text-anchor=\"middle\">");
        dd_sb_escape(b, o->ylabel);
        dd_sb_puts(b, "</text>");
    }
    if (o->title) {
        dd_sb_puts(b, "<text x=\"");
        dd_sb_num(b, (ax.p0 + ax.p1) / 2, 1);
        dd_sb_puts(b, "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">");
        dd_sb_escape(b, o->title);
        dd_sb_puts(b, "</text>");
    }

    /* legend, below the x label */
    if (rows > 0) {
        dd_sb_puts(b, "<g class=\"legend\">");
        int row = 0;
        cur = W;
        for (size_t k = 0; k < ns; k++) {
            if (!s[k].label || !*s[k].label) continue;
            const char *color = s[k].color ? s[k].color : palette[k % N_PALETTE];
            double wd = 30.0 + strlen(s[k].label) * CHAR_W + 18.0;
            if (row == 0 || cur + wd > W - right) {
                row++;
                cur = left;
            }
            double yc = H + (row - 1) * LEGEND_ROW_H + 8.0;
            if (s[k].style == DD_SERIES_POINTS) {
                dd_sb_puts(b, "<circle cx=\"");
                dd_sb_num(b, cur + 12, 1);
                dd_sb_puts(b, "\" cy=\"");
                dd_sb_num(b, yc, 1);
                dd_sb_printf(b, "\" r=\"3.5\" fill=\"%s\"/>", color);
            } else {
                char attrs[96];
                snprintf(attrs, sizeof attrs, "stroke=\"%s\" stroke-width=\"2.5\"", color);
                hline(b, cur, yc, cur + 24, yc, attrs);
            }
            text_el(b, cur + 30, yc + 4, "start", NULL, s[k].label);
            cur += wd;
        }
        dd_sb_puts(b, "</g>");
    }
    dd_sb_puts(b, "</svg>");
    return dd_sb_status(b);
}

dd_status dd_plot_svg(const dd_plot_opts *opts, const dd_series *series, size_t nseries,
                      char **svg) {
    if (!svg) return dd_error(DD_ERR_ARG, "dd_plot_svg: svg is NULL");
    *svg = NULL;
    dd_sb b;
    dd_sb_init(&b);
    dd_status st = dd_plot_render(&b, opts, series, nseries);
    if (st == DD_OK) {
        *svg = dd_sb_take(&b);
        if (!*svg) st = dd_sb_status(&b);
    }
    dd_sb_free(&b);
    return st;
}
