/* dd_dataset_partition (dataset.h): a data set cut into parts by time segments or by
 * drive level (frames in input-power quantile bands), each split on its own. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

typedef struct {
    double p; /* mean |x|^2 of the frame */
    size_t i; /* frame index */
} frame_pw;

static int cmp_frame(const void *a, const void *b) {
    const frame_pw *x = a, *y = b;
    if (x->p < y->p) return -1;
    if (x->p > y->p) return 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_index(const void *a, const void *b) {
    const frame_pw *x = a, *y = b;
    return x->i < y->i ? -1 : x->i > y->i;
}

static double mean_power(const dd_cf32 *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)crealf(x[i]) * crealf(x[i]) + (double)cimagf(x[i]) * cimagf(x[i]);
    return n ? s / (double)n : 0.0;
}

void dd_part_free(dd_part *parts, int n_parts) {
    if (!parts) return;
    for (int p = 0; p < n_parts; p++) {
        dd_dataset_free(&parts[p].ds);
        for (int s = 0; s < DD_SPLIT_COUNT; s++) {
            free(parts[p].start[s]);
            free(parts[p].len[s]);
        }
        memset(&parts[p], 0, sizeof parts[p]);
    }
}

/* Appends the range [a, a + n) to part pt's split s, merging it with the previous range
 * when they touch. */
static dd_status add_range(dd_part *pt, int s, size_t a, size_t n) {
    size_t k = pt->n_ranges[s];
    if (k && pt->start[s][k - 1] + pt->len[s][k - 1] == a) {
        pt->len[s][k - 1] += n;
        return DD_OK;
    }
    size_t *ns = realloc(pt->start[s], (k + 1) * sizeof *ns);
    if (ns) pt->start[s] = ns;
    size_t *nl = realloc(pt->len[s], (k + 1) * sizeof *nl);
    if (nl) pt->len[s] = nl;
    if (!ns || !nl) return dd_error(DD_ERR_NOMEM, "out of memory partitioning a data set");
    pt->start[s][k] = a;
    pt->len[s][k] = n;
    pt->n_ranges[s] = k + 1;
    return DD_OK;
}

/* The ranges of every part for split s. */
static dd_status plan_split(const dd_dataset *ds, int s, dd_part_by by, int P, size_t frame, dd_part *parts) {
    const size_t n = ds->n[s];
    const dd_cf32 *x = ds->in[s];
    if (n == 0) {
        for (int p = 0; p < P; p++) parts[p].power_lo_db[s] = parts[p].power_hi_db[s] = NAN;
        return DD_OK;
    }
    if (by == DD_PART_TIME) {
        if (n < (size_t)P)
            return dd_error(DD_ERR_RANGE, "split '%s' has %zu samples, fewer than the %d parts", dd_split_name((dd_split)s),
                            n, P);
        for (int p = 0; p < P; p++) {
            size_t a = (size_t)((double)p * n / P), b = (size_t)((double)(p + 1) * n / P);
            if (p == P - 1) b = n;
            DD_TRY(add_range(&parts[p], s, a, b - a));
            parts[p].frames[s] = 1;
            parts[p].power_lo_db[s] = parts[p].power_hi_db[s] = 10.0 * log10(mean_power(x + a, b - a));
        }
        return DD_OK;
    }
    const size_t nf = n / frame;
    if (nf < (size_t)P)
        return dd_error(DD_ERR_RANGE, "split '%s' has %zu frames of %zu samples, fewer than the %d parts (use a shorter "
                        "frame)", dd_split_name((dd_split)s), nf, frame, P);
    frame_pw *f = malloc(nf * sizeof *f);
    if (!f) return dd_error(DD_ERR_NOMEM, "out of memory partitioning a data set");
    for (size_t i = 0; i < nf; i++) {
        size_t len = i + 1 == nf ? n - i * frame : frame;
        f[i].p = mean_power(x + i * frame, len);
        f[i].i = i;
    }
    qsort(f, nf, sizeof *f, cmp_frame);
    dd_status st = DD_OK;
    for (int p = 0; p < P && st == DD_OK; p++) {
        size_t a = (size_t)((double)p * nf / P), b = p == P - 1 ? nf : (size_t)((double)(p + 1) * nf / P);
        parts[p].frames[s] = b - a;
        parts[p].power_lo_db[s] = 10.0 * log10(f[a].p);
        parts[p].power_hi_db[s] = 10.0 * log10(f[b - 1].p);
        qsort(f + a, b - a, sizeof *f, cmp_index); /* the band's frames in time order */
        for (size_t k = a; k < b && st == DD_OK; k++) {
            size_t i = f[k].i;
            st = add_range(&parts[p], s, i * frame, i + 1 == nf ? n - i * frame : frame);
        }
    }
    free(f);
    return st;
}

dd_status dd_dataset_partition(const dd_dataset *ds, dd_part_by by, int n_parts, size_t frame, dd_part *parts) {
    if (!ds || !parts) return dd_error(DD_ERR_ARG, "dd_dataset_partition: NULL argument");
    if (n_parts < 2 || n_parts > 1024) return dd_error(DD_ERR_ARG, "dd_dataset_partition: %d parts, expected 2..1024", n_parts);
    if (by != DD_PART_TIME && by != DD_PART_DRIVE) return dd_error(DD_ERR_ARG, "dd_dataset_partition: unknown mode %d", by);
    if (by == DD_PART_DRIVE && frame < 1) return dd_error(DD_ERR_ARG, "dd_dataset_partition: frame length 0");
    memset(parts, 0, (size_t)n_parts * sizeof *parts);
    for (int s = 0; s < DD_SPLIT_COUNT; s++) DD_TRY(plan_split(ds, s, by, n_parts, frame, parts));
    for (int p = 0; p < n_parts; p++) {
        dd_dataset *d;
        DD_TRY(dd_data_alloc(&d));
        parts[p].ds = d;
        d->spec = ds->spec;
        strcpy(d->format, "memory");
        for (int s = 0; s < DD_SPLIT_COUNT; s++) {
            size_t m = 0;
            for (size_t k = 0; k < parts[p].n_ranges[s]; k++) m += parts[p].len[s][k];
            for (int io = 0; io < 2; io++) {
                dd_cf32 *b = dd_calloc(m ? m : 1, sizeof *b);
                if (!b) return dd_error(DD_ERR_NOMEM, "out of memory for part %d of a data set", p);
                const dd_cf32 *src = io ? ds->out[s] : ds->in[s];
                size_t off = 0;
                for (size_t k = 0; k < parts[p].n_ranges[s]; k++) {
                    memcpy(b + off, src + parts[p].start[s][k], parts[p].len[s][k] * sizeof *b);
                    off += parts[p].len[s][k];
                }
                d->priv->buf[2 * s + io] = b;
            }
            d->n[s] = m;
            d->in[s] = d->priv->buf[2 * s];
            d->out[s] = d->priv->buf[2 * s + 1];
        }
    }
    return DD_OK;
}
