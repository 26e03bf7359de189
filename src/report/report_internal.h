/* Private declarations shared by the report module's files. */
#ifndef DD_REPORT_INTERNAL_H
#define DD_REPORT_INTERNAL_H

#include "distdpd/report.h"
#include "sbuf.h"

/* Appends one plot's <svg> element to b (see dd_plot_svg). */
dd_status dd_plot_render(dd_sb *b, const dd_plot_opts *opts, const dd_series *series,
                         size_t nseries);

#endif
