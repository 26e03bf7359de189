/* Private growable string buffer of the report module. Errors are sticky: after a
 * failed allocation every append is a no-op and dd_sb_status() returns DD_ERR_NOMEM,
 * so rendering code can append freely and check once at the end. */
#ifndef DD_REPORT_SBUF_H
#define DD_REPORT_SBUF_H

#include <stddef.h>

#include "distdpd/core.h"

typedef struct {
    char *p;    /* NUL-terminated contents (dd_calloc'd), NULL while empty */
    size_t len; /* bytes used, excluding the NUL */
    size_t cap; /* bytes allocated */
    int failed; /* an allocation failed */
} dd_sb;

void dd_sb_init(dd_sb *b);
void dd_sb_free(dd_sb *b);
dd_status dd_sb_status(const dd_sb *b);
void dd_sb_putn(dd_sb *b, const char *s, size_t n);
void dd_sb_puts(dd_sb *b, const char *s);
void dd_sb_printf(dd_sb *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Appends text HTML/XML-escaped (& < > " '). NULL appends nothing. */
void dd_sb_escape(dd_sb *b, const char *s);
/* Appends a finite number with `decimals` decimals, without "-0"; a non-finite value
 * appends "0" (callers filter those out before; this is a last guard). */
void dd_sb_num(dd_sb *b, double v, int decimals);
/* Hands the contents to the caller (dd_free) and empties the buffer; "" if empty. */
char *dd_sb_take(dd_sb *b);

#endif
