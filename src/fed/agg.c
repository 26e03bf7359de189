/* Robust aggregation of federated updates (fed.h, docs/federated.md "Aggregation"):
 * weighted mean, coordinate median, trimmed mean, Krum and multi-Krum (Blanchard et al.,
 * NeurIPS 2017). Every sum is taken in double, in the order of the inputs, so the result
 * depends on nothing but the inputs and their order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/fed.h"

/* ---------------------------------------------------------------- names */

static const struct {
    const char *name;
    dd_agg_kind kind;
} agg_names[] = {
    {"mean", DD_AGG_MEAN},
    {"median", DD_AGG_MEDIAN},
    {"trimmed", DD_AGG_TRIMMED},
    {"krum", DD_AGG_KRUM},
    {"multikrum", DD_AGG_MULTIKRUM},
};
#define N_AGG (sizeof agg_names / sizeof agg_names[0])

dd_status dd_agg_parse(const char *name, dd_agg_cfg *cfg) {
    if (!cfg) return dd_error(DD_ERR_ARG, "dd_agg_parse: cfg is NULL");
    for (size_t i = 0; name && i < N_AGG; i++)
        if (strcmp(name, agg_names[i].name) == 0) {
            memset(cfg, 0, sizeof *cfg);
            cfg->kind = agg_names[i].kind;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG, "--agg: unknown aggregation '%s' (valid: mean, median, trimmed, krum, multikrum)",
                    name ? name : "(null)");
}

const char *dd_agg_name(dd_agg_kind kind) {
    for (size_t i = 0; i < N_AGG; i++)
        if (agg_names[i].kind == kind) return agg_names[i].name;
    return "unknown";
}

dd_status dd_agg_check(const dd_agg_cfg *cfg, int n) {
    if (!cfg) return dd_error(DD_ERR_ARG, "dd_agg_check: cfg is NULL");
    if (n < 1) return dd_error(DD_ERR_ARG, "%s needs at least 1 update, have %d", dd_agg_name(cfg->kind), n);
    switch (cfg->kind) {
    case DD_AGG_MEAN:
    case DD_AGG_MEDIAN:
        return DD_OK;
    case DD_AGG_TRIMMED:
        if (cfg->trim < 0) return dd_error(DD_ERR_ARG, "trimmed mean: --trim must be >= 0, got %d", cfg->trim);
        if (n <= 2 * cfg->trim)
            return dd_error(DD_ERR_ARG, "trimmed mean with --trim %d needs more than %d clients, have %d", cfg->trim,
                            2 * cfg->trim, n);
        return DD_OK;
    case DD_AGG_KRUM:
    case DD_AGG_MULTIKRUM:
        if (cfg->byzantine < 0)
            return dd_error(DD_ERR_ARG, "%s: --byzantine must be >= 0, got %d", dd_agg_name(cfg->kind), cfg->byzantine);
        if (n <= 2 * cfg->byzantine + 2)
            return dd_error(DD_ERR_ARG, "%s with --byzantine %d needs more than %d clients, have %d",
                            dd_agg_name(cfg->kind), cfg->byzantine, 2 * cfg->byzantine + 2, n);
        if (cfg->kind == DD_AGG_MULTIKRUM && (cfg->multi < 0 || cfg->multi > n))
            return dd_error(DD_ERR_ARG, "multikrum: the number of updates averaged must be in [1, %d] (0 = n - f), got %d",
                            n, cfg->multi);
        return DD_OK;
    }
    return dd_error(DD_ERR_ARG, "unknown aggregation kind %d", (int)cfg->kind);
}

/* ---------------------------------------------------------------- helpers */

/* A total order on floats with NaN above +inf (all NaNs equal). */
static int f_less(float a, float b) {
    if (isnan(a)) return 0;
    if (isnan(b)) return 1;
    return a < b;
}

static int f_cmp(const void *pa, const void *pb) {
    float a = *(const float *)pa, b = *(const float *)pb;
    return f_less(a, b) ? -1 : f_less(b, a) ? 1 : 0;
}

static void sort_col(float *v, int n) {
    if (n > 32) {
        qsort(v, (size_t)n, sizeof *v, f_cmp);
        return;
    }
    for (int i = 1; i < n; i++) { /* insertion sort: n is small (the clients of a round) */
        float x = v[i];
        int j = i - 1;
        while (j >= 0 && f_less(x, v[j])) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = x;
    }
}

/* Coordinate-wise: sort the n values of each coordinate and average v[lo..hi). */
static dd_status agg_sorted(int n, size_t d, const float *const *upd, int lo, int hi, float *out) {
    float *col = malloc((size_t)n * sizeof *col);
    if (!col) return dd_error(DD_ERR_NOMEM, "aggregation: %d floats", n);
    for (size_t j = 0; j < d; j++) {
        for (int i = 0; i < n; i++) col[i] = upd[i][j];
        sort_col(col, n);
        double s = 0;
        for (int k = lo; k < hi; k++) s += (double)col[k];
        out[j] = (float)(s / (hi - lo));
    }
    free(col);
    return DD_OK;
}

static dd_status agg_mean(int n, size_t d, const float *const *upd, const double *w, float *out, int *selected) {
    double wsum = 0;
    for (int i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        if (!(wi >= 0) || !isfinite(wi))
            return dd_error(DD_ERR_ARG, "mean: the weight (sample count) of update %d is %g; must be finite and >= 0", i, wi);
        wsum += wi;
    }
    if (!(wsum > 0)) return dd_error(DD_ERR_ARG, "mean: all %d weights (sample counts) are zero", n);
    for (int i = 0; i < n; i++)
        if (selected) selected[i] = (w ? w[i] : 1.0) > 0;
    for (size_t j = 0; j < d; j++) {
        double s = 0;
        for (int i = 0; i < n; i++) {
            double wi = w ? w[i] : 1.0;
            if (wi > 0) s += wi * (double)upd[i][j]; /* a zero weight never turns 0 x inf into NaN */
        }
        out[j] = (float)(s / wsum);
    }
    return DD_OK;
}

/* Krum scores: for each update the sum of its squared distances to its n - f - 2 nearest
 * other updates (+inf for a distance involving a non-finite value). */
static dd_status krum_scores(int n, size_t d, const float *const *upd, int f, double *score) {
    double *dist = malloc((size_t)n * (size_t)n * sizeof *dist);
    double *row = malloc((size_t)n * sizeof *row);
    unsigned char *fin = malloc((size_t)n);
    if (!dist || !row || !fin) {
        free(dist), free(row), free(fin);
        return dd_error(DD_ERR_NOMEM, "krum: %d x %d distances", n, n);
    }
    for (int i = 0; i < n; i++) {
        fin[i] = 1;
        for (size_t j = 0; j < d && fin[i]; j++) fin[i] = isfinite(upd[i][j]) != 0;
    }
    for (int a = 0; a < n; a++) {
        dist[(size_t)a * n + a] = 0;
        for (int b = a + 1; b < n; b++) {
            double s = 0;
            if (!fin[a] || !fin[b]) s = INFINITY;
            else
                for (size_t j = 0; j < d; j++) {
                    double t = (double)upd[a][j] - (double)upd[b][j];
                    s += t * t;
                }
            dist[(size_t)a * n + b] = dist[(size_t)b * n + a] = s;
        }
    }
    int k = n - f - 2;
    for (int a = 0; a < n; a++) {
        int m = 0;
        for (int b = 0; b < n; b++)
            if (b != a) row[m++] = dist[(size_t)a * n + b];
        /* partial selection of the k smallest (n is the clients of a round) */
        double s = 0;
        for (int t = 0; t < k; t++) {
            int best = t;
            for (int u = t + 1; u < m; u++)
                if (row[u] < row[best]) best = u;
            double x = row[best];
            row[best] = row[t];
            row[t] = x;
            s += x;
        }
        score[a] = s;
    }
    free(dist), free(row), free(fin);
    return DD_OK;
}

static dd_status agg_krum(const dd_agg_cfg *cfg, int n, size_t d, const float *const *upd, float *out, int *selected) {
    double *score = malloc((size_t)n * sizeof *score);
    int *order = malloc((size_t)n * sizeof *order);
    if (!score || !order) {
        free(score), free(order);
        return dd_error(DD_ERR_NOMEM, "krum: %d scores", n);
    }
    dd_status s = krum_scores(n, d, upd, cfg->byzantine, score);
    if (s != DD_OK) {
        free(score), free(order);
        return s;
    }
    /* stable order by score (ties: the lower index first) */
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && score[order[j - 1]] > score[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    int m = 1;
    if (cfg->kind == DD_AGG_MULTIKRUM) m = cfg->multi > 0 ? cfg->multi : n - cfg->byzantine;
    if (selected)
        for (int i = 0; i < n; i++) selected[i] = 0;
    for (int t = 0; t < m; t++)
        if (selected) selected[order[t]] = 1;
    for (size_t j = 0; j < d; j++) {
        double acc = 0;
        for (int t = 0; t < m; t++) acc += (double)upd[order[t]][j];
        out[j] = (float)(acc / m);
    }
    free(score), free(order);
    return DD_OK;
}

/* ---------------------------------------------------------------- entry point */

dd_status dd_agg_run(const dd_agg_cfg *cfg, int n, size_t d, const float *const *upd, const double *weights,
                     float *out, int *selected) {
    DD_TRY(dd_agg_check(cfg, n));
    if (!upd || (d > 0 && !out)) return dd_error(DD_ERR_ARG, "dd_agg_run: NULL updates or output");
    for (int i = 0; i < n; i++)
        if (!upd[i] && d > 0) return dd_error(DD_ERR_ARG, "dd_agg_run: update %d is NULL", i);
    switch (cfg->kind) {
    case DD_AGG_MEAN:
        return agg_mean(n, d, upd, weights, out, selected);
    case DD_AGG_MEDIAN:
    case DD_AGG_TRIMMED: {
        int lo = cfg->kind == DD_AGG_TRIMMED ? cfg->trim : (n - 1) / 2;
        int hi = cfg->kind == DD_AGG_TRIMMED ? n - cfg->trim : n / 2 + 1;
        if (selected)
            for (int i = 0; i < n; i++) selected[i] = 1;
        return agg_sorted(n, d, upd, lo, hi, out);
    }
    case DD_AGG_KRUM:
    case DD_AGG_MULTIKRUM:
        return agg_krum(cfg, n, d, upd, out, selected);
    }
    return dd_error(DD_ERR_ARG, "unknown aggregation kind %d", (int)cfg->kind);
}

/* ---------------------------------------------------------------- clipping */

double dd_fed_clip(float *v, size_t d, double clip) {
    double s = 0;
    for (size_t j = 0; j < d; j++) s += (double)v[j] * (double)v[j];
    double norm = sqrt(s);
    if (!isfinite(norm)) {
        memset(v, 0, d * sizeof *v);
        return norm;
    }
    if (clip > 0 && norm > clip) {
        double k = clip / norm;
        for (size_t j = 0; j < d; j++) v[j] = (float)((double)v[j] * k);
    }
    return norm;
}
