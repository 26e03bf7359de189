/* The split of a model's stages into contiguous pipeline groups (pipeline.h): the
 * balanced split (smallest largest group cost, exact, then the most even) and the
 * hand-made one of --pp-split. Pure code. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/pipeline.h"

static dd_status check_sizes(size_t S, int G) {
    if (G < 1) return dd_error(DD_ERR_ARG, "%d pipeline groups: expected at least 1", G);
    if (S < 1) return dd_error(DD_ERR_ARG, "a model of 0 stages cannot be split");
    if ((size_t)G > S)
        return dd_error(DD_ERR_ARG, "cannot split %zu stages into %d pipeline groups: each group needs at least one stage "
                        "(at most %zu groups: lower --pp or --virtual)", S, G, S);
    return DD_OK;
}

/* ---- balanced split ------------------------------------------------------------------- */

/* Tables of the two dynamic programs, (G+1) x (S+1), row g = g groups, column i = the
 * first i stages. */
typedef struct {
    size_t S;
    int G;
    double *pre;  /* [S+1] prefix sums of the costs */
    double *best; /* smallest largest group cost */
    double *sq;   /* smallest sum of squared group costs under the largest cost found */
    size_t *from; /* where the last group of sq's optimum starts */
} split_dp;

static size_t at(const split_dp *d, int g, size_t i) { return (size_t)g * (d->S + 1) + i; }

static double group_cost(const split_dp *d, size_t j, size_t i) { return d->pre[i] - d->pre[j]; }

/* best[g][i] = min over j of max(best[g-1][j], cost(j, i)). */
static void fill_best(split_dp *d) {
    for (size_t i = 1; i <= d->S; i++) d->best[at(d, 1, i)] = d->pre[i];
    for (int g = 2; g <= d->G; g++)
        for (size_t i = (size_t)g; i <= d->S; i++) {
            double b = INFINITY;
            for (size_t j = (size_t)g - 1; j < i; j++) {
                double c = group_cost(d, j, i), prev = d->best[at(d, g - 1, j)];
                double m = c > prev ? c : prev;
                if (m < b) b = m;
            }
            d->best[at(d, g, i)] = b;
        }
}

/* sq[g][i] = min over j of sq[g-1][j] + cost(j, i)^2 with every group cost <= cap. */
static void fill_even(split_dp *d, double cap) {
    for (size_t i = 1; i <= d->S; i++) {
        double c = d->pre[i];
        d->sq[at(d, 1, i)] = c <= cap ? c * c : INFINITY;
        d->from[at(d, 1, i)] = 0;
    }
    for (int g = 2; g <= d->G; g++)
        for (size_t i = (size_t)g; i <= d->S; i++) {
            double b = INFINITY;
            size_t arg = (size_t)g - 1;
            for (size_t j = (size_t)g - 1; j < i; j++) {
                double c = group_cost(d, j, i), v = d->sq[at(d, g - 1, j)] + c * c;
                if (c <= cap && v < b) {
                    b = v;
                    arg = j;
                }
            }
            d->sq[at(d, g, i)] = b;
            d->from[at(d, g, i)] = arg;
        }
}

static dd_status check_costs(const double *cost, size_t S) {
    for (size_t i = 0; cost && i < S; i++)
        if (!isfinite(cost[i]) || cost[i] < 0)
            return dd_error(DD_ERR_ARG, "stage %zu's cost %g is not a finite number >= 0", i, cost[i]);
    return DD_OK;
}

dd_status dd_pp_split_balanced(const double *cost, size_t S, int G, size_t *bounds) {
    DD_TRY(check_sizes(S, G));
    DD_TRY(check_costs(cost, S));
    size_t cells = ((size_t)G + 1) * (S + 1);
    split_dp d = {S, G, calloc(S + 1, sizeof(double)), calloc(cells, sizeof(double)), calloc(cells, sizeof(double)),
                  calloc(cells, sizeof(size_t))};
    dd_status st = DD_OK;
    if (!d.pre || !d.best || !d.sq || !d.from) {
        st = dd_error(DD_ERR_NOMEM, "pipeline split: out of memory for %zu stages in %d groups", S, G);
        goto cleanup;
    }
    for (size_t i = 0; i < S; i++) d.pre[i + 1] = d.pre[i] + (cost ? cost[i] : 1.0);
    fill_best(&d);
    fill_even(&d, d.best[at(&d, G, S)]);
    bounds[G] = S;
    for (int g = G; g >= 1; g--) bounds[g - 1] = d.from[at(&d, g, bounds[g])];
cleanup:
    free(d.pre);
    free(d.best);
    free(d.sq);
    free(d.from);
    return st;
}

/* ---- --pp-split ------------------------------------------------------------------------- */

/* "3,3,2,2": an even split of S stages into G groups, for the empty-list message. */
static void example(size_t S, int G, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int g = 0; g < G && len + 24 < cap; g++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%zu", g ? "," : "", S / (size_t)G + ((size_t)g < S % (size_t)G));
}

/* One item, blanks trimmed, into *count (1..S). `item` is 1-based for messages. */
static dd_status parse_item(const char *s, size_t len, int item, size_t S, size_t *count) {
    while (len && (*s == ' ' || *s == '\t')) s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    int shown = len > 40 ? 40 : (int)len;
    if (!len) return dd_error(DD_ERR_ARG, "--pp-split: item %d is empty", item);
    size_t v = 0;
    int over = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return dd_error(DD_ERR_ARG, "--pp-split: item %d ('%.*s') is not a decimal count", item, shown, s);
        if (!over) v = v * 10 + (size_t)(s[i] - '0');
        if (v > S) over = 1;
    }
    if (over)
        return dd_error(DD_ERR_ARG, "--pp-split: item %d ('%.*s') is more than the model's %zu stages", item, shown, s, S);
    if (v < 1) return dd_error(DD_ERR_ARG, "--pp-split: item %d ('%.*s') must be at least 1", item, shown, s);
    *count = v;
    return DD_OK;
}

dd_status dd_pp_split_parse(const char *list, size_t S, int G, size_t *bounds) {
    DD_TRY(check_sizes(S, G));
    size_t blank = list ? strspn(list, " \t") : 0;
    if (!list || list[blank] == '\0') {
        char ex[128];
        example(S, G, ex, sizeof ex);
        return dd_error(DD_ERR_ARG, "--pp-split: empty list (expected %d stage counts such as %s)", G, ex);
    }
    int items = 0;
    size_t sum = 0;
    bounds[0] = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ","), count = 0;
        DD_TRY(parse_item(p, len, items + 1, S, &count));
        sum += count;
        if (items < G) bounds[items + 1] = bounds[items] + count;
        items++;
        p += len;
        if (*p == '\0') break;
    }
    if (items != G) return dd_error(DD_ERR_ARG, "--pp-split: %d counts for %d pipeline groups", items, G);
    if (sum != S) return dd_error(DD_ERR_ARG, "--pp-split: sum %zu is not the model's %zu stages", sum, S);
    return DD_OK;
}

void dd_pp_span_of(const size_t *bounds, int P, int V, int q, int c, size_t Sm, dd_pp_span *k) {
    const size_t G = (size_t)P * (size_t)V, v = (size_t)c * (size_t)P + (size_t)q;
    k->vstage = (int)v;
    k->first = v == 0;
    k->last = v + 1 == G;
    k->s0 = bounds[v];
    k->s1 = bounds[v + 1];
    k->m0 = k->s0 < Sm ? k->s0 : Sm;
    k->m1 = k->s1 < Sm ? k->s1 : Sm;
    k->a0 = k->s0 > Sm ? k->s0 - Sm : 0;
    k->a1 = k->s1 > Sm ? k->s1 - Sm : 0;
    k->u_in = k->s0 > Sm;
    k->u_out = !k->last && k->s1 > Sm;
}
