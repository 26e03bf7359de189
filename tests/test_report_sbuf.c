/* The report's growable string buffer (src/report/sbuf.c), the paths `make coverage`
 * showed untested by the unit label (docs/testing.md "Coverage"): growth past the first
 * 256 bytes and a formatted piece longer than the 256-byte fast path, both compared with
 * the string the test builds itself; escaping; numbers without "-0" and with the decimals
 * clamped; and the sticky failure: a piece too large to hold fails the buffer
 * (DD_ERR_NOMEM "report: out of memory while rendering"), every later append is a no-op
 * and take gives NULL, with nothing leaked (ASan / valgrind). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dd_test.h"
#include "report/sbuf.h"

/* Takes the contents and compares them with want. */
static void check_take(dd_sb *b, const char *want, const char *what) {
    CHECK_OK(dd_sb_status(b));
    char *got = dd_sb_take(b);
    CHECK(got && strcmp(got, want) == 0, "%s: got '%.60s' (%zu bytes), want '%.60s' (%zu bytes)", what,
          got ? got : "(null)", got ? strlen(got) : 0, want, strlen(want));
    CHECK(b->p == NULL && b->len == 0 && b->cap == 0, "%s: take empties the buffer", what);
    dd_free(got);
}

static void num(double v, int decimals, const char *want) {
    dd_sb b;
    dd_sb_init(&b);
    dd_sb_num(&b, v, decimals);
    char what[64];
    snprintf(what, sizeof what, "num(%g, %d)", v, decimals);
    check_take(&b, want, what);
}

int main(void) {
    dd_sb b;
    dd_sb_init(&b);
    check_take(&b, "", "empty"); /* "" allocated, not NULL */

    /* growth: 4000 pieces of varying length, and formatted pieces over 256 bytes */
    static char want[40000];
    size_t n = 0;
    for (int i = 0; i < 4000; i++) {
        char piece[16];
        int k = snprintf(piece, sizeof piece, "%d,", i * 7919);
        dd_sb_putn(&b, piece, (size_t)k);
        memcpy(want + n, piece, (size_t)k);
        n += (size_t)k;
    }
    char longs[700];
    memset(longs, 'L', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    dd_sb_printf(&b, "<%s|%d>", longs, 42);
    n += (size_t)snprintf(want + n, sizeof want - n, "<%s|%d>", longs, 42);
    dd_sb_puts(&b, NULL); /* nothing */
    dd_sb_printf(&b, "%s", "");
    CHECK(b.len == n && b.cap >= n + 1, "length %zu, want %zu (cap %zu)", b.len, n, b.cap);
    check_take(&b, want, "grown");

    /* escaping */
    dd_sb_escape(&b, "a<b>&\"c'd");
    dd_sb_escape(&b, NULL);
    dd_sb_escape(&b, "plain");
    check_take(&b, "a&lt;b&gt;&amp;&quot;c&#39;dplain", "escape");

    /* numbers */
    num(1.25, 2, "1.25");
    num(-1.5, 1, "-1.5");
    num(-0.0001, 2, "0.00"); /* no "-0.00" */
    num(-0.0, 0, "0");
    num(-0.4, 0, "0");
    num(NAN, 2, "0.00");
    num(-INFINITY, 1, "0.0");
    num(2.5e-13, 20, "0.000000000000"); /* decimals clamped to 12 */
    num(3.7, -5, "4");                  /* ... and to 0 */

    /* the sticky failure: a piece larger than half the address space */
    dd_sb_puts(&b, "kept?");
    dd_sb_putn(&b, "x", SIZE_MAX / 2);
    CHECK_ERR(dd_sb_status(&b), DD_ERR_NOMEM, "report: out of memory while rendering");
    size_t len = b.len;
    dd_sb_puts(&b, "more");
    dd_sb_printf(&b, "%s and %d", longs, 1);
    dd_sb_num(&b, 1.0, 1);
    dd_sb_escape(&b, "<>");
    CHECK(b.len == len, "appends after the failure are no-ops (%zu -> %zu bytes)", len, b.len);
    CHECK(dd_sb_take(&b) == NULL, "take after a failure: NULL");
    dd_sb_free(&b); /* frees the old contents */
    CHECK(b.p == NULL && !b.failed, "free resets the buffer");
    dd_sb_puts(&b, "again");
    check_take(&b, "again", "usable after free");
    return dd_test_done("test_report_sbuf");
}
