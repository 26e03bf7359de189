/* Growable string buffer used to render HTML and SVG (see sbuf.h). */
#include "sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void dd_sb_init(dd_sb *b) {
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = 0;
}

void dd_sb_free(dd_sb *b) {
    dd_free(b->p);
    dd_sb_init(b);
}

dd_status dd_sb_status(const dd_sb *b) {
    return b->failed ? dd_error(DD_ERR_NOMEM, "report: out of memory while rendering") : DD_OK;
}

/* Makes room for `extra` more bytes plus the NUL. */
static int reserve(dd_sb *b, size_t extra) {
    if (b->failed) return 0;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return 0;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *np = dd_calloc(cap, 1);
    if (!np) {
        b->failed = 1;
        return 0;
    }
    if (b->p) memcpy(np, b->p, b->len + 1);
    dd_free(b->p);
    b->p = np;
    b->cap = cap;
    return 1;
}

void dd_sb_putn(dd_sb *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void dd_sb_puts(dd_sb *b, const char *s) {
    if (s) dd_sb_putn(b, s, strlen(s));
}

void dd_sb_printf(dd_sb *b, const char *fmt, ...) {
    if (b->failed) return;
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        dd_sb_putn(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void dd_sb_escape(dd_sb *b, const char *s) {
    if (!s) return;
    const char *run = s;
    for (; *s; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default: break;
        }
        if (rep) {
            dd_sb_putn(b, run, (size_t)(s - run));
            dd_sb_puts(b, rep);
            run = s + 1;
        }
    }
    dd_sb_putn(b, run, (size_t)(s - run));
}

void dd_sb_num(dd_sb *b, double v, int decimals) {
    if (!isfinite(v)) v = 0.0;
    if (decimals < 0) decimals = 0;
    if (decimals > 12) decimals = 12;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*f", decimals, v);
    /* "-0", "-0.0", ... -> drop the sign */
    if (tmp[0] == '-') {
        int allzero = 1;
        for (const char *q = tmp + 1; *q; q++)
            if (*q != '0' && *q != '.') allzero = 0;
        if (allzero) {
            dd_sb_puts(b, tmp + 1);
            return;
        }
    }
    dd_sb_puts(b, tmp);
}

char *dd_sb_take(dd_sb *b) {
    if (b->failed) return NULL;
    if (!b->p && !reserve(b, 0)) return NULL;
    char *p = b->p;
    dd_sb_init(b);
    return p;
}
