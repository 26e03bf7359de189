/* Self-contained HTML reports: one page with inline CSS and inline SVG plots (no
 * network, no JavaScript). A report is built front to back (headings, paragraphs,
 * tables, plots) into memory and written atomically with dd_report_write().
 *
 * Plots: line and scatter series on linear axes with automatic "nice" ticks (steps of
 * 1, 2 or 5 x 10^k that cover the data), grid, axis and tick labels, and a legend
 * below the plot area. Non-finite points are never drawn: a NaN or Inf breaks a line
 * into separate pieces and is dropped from a scatter. Long series are reduced to at
 * most a few points per pixel column (see dd_plot_reduce) so that files stay small.
 * Every series becomes exactly one SVG <path> element; grid, axes and legend swatches
 * use other elements (<line>, <rect>, <circle>, <text>).
 *
 * All text given to the report is HTML-escaped. Formulas and layout: docs/report.md.
 */
#ifndef DISTDPD_REPORT_H
#define DISTDPD_REPORT_H

#include <stddef.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a series is drawn. */
typedef enum {
    DD_SERIES_LINE = 0,   /* polyline through the points in the given order */
    DD_SERIES_POINTS = 1, /* one dot per point */
    DD_SERIES_BOTH = 2    /* line and dots (dots only where the series is short) */
} dd_series_style;

/* How a line series longer than the plot is thinned, per pixel column. */
typedef enum {
    DD_PLOT_REDUCE_MINMAX = 0, /* keep the first, min, max and last point of each column
                                * (the envelope; default) */
    DD_PLOT_REDUCE_MAX = 1,    /* max-hold: keep the largest y of each column (spectra) */
    DD_PLOT_REDUCE_NONE = 2    /* draw every point */
} dd_plot_reduce;

/* One data series. x and y hold n values each (the caller keeps ownership; the
 * report copies nothing after dd_report_plot() returns). For line series x should be
 * sorted for the reduction to make sense; points with non-finite x or y are skipped. */
typedef struct {
    const char *label;     /* legend text (escaped); NULL or "" = no legend entry */
    const double *x;       /* n abscissae */
    const double *y;       /* n ordinates */
    size_t n;              /* number of points, may be 0 */
    dd_series_style style; /* line, points or both */
    const char *color;     /* CSS colour such as "#1f77b4"; NULL = next palette colour.
                            * Only [#A-Za-z0-9(),. %] characters are accepted. */
} dd_series;

/* Plot options. Start from dd_plot_opts_default() and set what you need. */
typedef struct {
    const char *title;  /* shown above the plot; NULL = none */
    const char *xlabel; /* axis labels; NULL = none */
    const char *ylabel;
    int width, height;  /* SVG size in pixels; 240..4000 and 160..4000 (default 760x380) */
    double xmin, xmax;  /* fixed axis limits; NaN = automatic (nice ticks around the data) */
    double ymin, ymax;
    double y_span_max;  /* > 0: automatic y range at most this wide, anchored at the top
                         * of the data (e.g. 90 dB for a spectrum whose floor is -400 dB);
                         * lower points are drawn at the bottom edge. 0 = no limit. */
    dd_plot_reduce reduce; /* thinning of long line series */
    const char *caption;   /* text under the figure; NULL = none */
} dd_plot_opts;

void dd_plot_opts_default(dd_plot_opts *o);

/* Nice axis: the tick step (1, 2 or 5 x 10^k) and the first and last tick such that
 * lo_tick <= lo, hi_tick >= hi and there are about `target` intervals (2..20).
 * lo must be <= hi, both finite; if lo == hi the range is widened around the value.
 * Returns DD_ERR_ARG for non-finite input. */
dd_status dd_plot_nice_ticks(double lo, double hi, int target, double *lo_tick,
                             double *hi_tick, double *step);

/* Renders one plot as a standalone <svg> element (UTF-8, NUL-terminated) into a new
 * string the caller frees with dd_free(). */
dd_status dd_plot_svg(const dd_plot_opts *opts, const dd_series *series, size_t nseries,
                      char **svg);

typedef struct dd_report dd_report;

/* A new empty report titled `title` (escaped; also the <title>). The caller frees it
 * with dd_report_free(), which sets *r to NULL. */
dd_status dd_report_create(const char *title, dd_report **r);
void dd_report_free(dd_report **r);

/* Content, appended in order. All text is escaped. */
dd_status dd_report_heading(dd_report *r, const char *text);   /* a section (<h2>) */
dd_status dd_report_paragraph(dd_report *r, const char *text); /* a <p> */
/* A preformatted block (<pre>), e.g. a command line. */
dd_status dd_report_pre(dd_report *r, const char *text);

/* Tables: begin with ncols (1..32) column headers (a header may be NULL = empty), add
 * rows of ncols cells (NULL = empty cell), end. Columns after the first are
 * right-aligned when every body cell in them looks numeric. Only one table may be open
 * at a time, and no other content may be added while it is open. */
dd_status dd_report_table_begin(dd_report *r, const char *caption, size_t ncols,
                                const char *const *headers);
dd_status dd_report_table_row(dd_report *r, const char *const *cells);
dd_status dd_report_table_end(dd_report *r);

/* A plot (as dd_plot_svg) wrapped in a <figure>. */
dd_status dd_report_plot(dd_report *r, const dd_plot_opts *opts, const dd_series *series,
                         size_t nseries);

/* The whole page as a NUL-terminated string owned by the report (valid until the next
 * call on r). Fails if a table is still open. */
dd_status dd_report_html(dd_report *r, const char **html, size_t *len);

/* Writes the page to path atomically (a temporary file in the same directory, synced,
 * then renamed over path). */
dd_status dd_report_write(dd_report *r, const char *path);

/* HTML-escapes text (& < > " ') into a new string the caller frees with dd_free(). */
dd_status dd_html_escape(const char *text, char **out);

#ifdef __cplusplus
}
#endif
#endif
