/* Federated averaging across test benches (docs/federated.md): the pieces that do not
 * depend on the transport, so that the coordinator (fed-server), the benches (fed-client),
 * the benchmarks and the fuzz targets share them.
 *
 * - Robust aggregation of n client updates of d floats: mean (weighted by sample counts),
 *   coordinate median, trimmed mean, Krum / multi-Krum (Blanchard et al. 2017).
 * - The Renyi-DP accountant of the sampled Gaussian mechanism (Mironov et al. 2019), the
 *   figures of TF Privacy's rdp_accountant.
 * - Secure aggregation (Bonawitz et al., CCS'17): declared in distdpd/secagg.h.
 *
 * This header never includes mpi.h or zmq.h. */
#ifndef DISTDPD_FED_H
#define DISTDPD_FED_H

#include <stddef.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- robust aggregation ---- */
typedef enum {
    DD_AGG_MEAN = 0,     /* weighted mean (weights: sample counts; NULL = equal) */
    DD_AGG_MEDIAN = 1,   /* coordinate-wise median (mean of the two middle values when n is even) */
    DD_AGG_TRIMMED = 2,  /* coordinate-wise trimmed mean: drop the `trim` largest and smallest */
    DD_AGG_KRUM = 3,     /* the update with the least sum of squared distances to its n-f-2 nearest */
    DD_AGG_MULTIKRUM = 4 /* mean of the `multi` updates of best Krum score (multi = n - f when 0) */
} dd_agg_kind;

typedef struct {
    dd_agg_kind kind;
    int trim;      /* DD_AGG_TRIMMED: values cut at each end per coordinate (--trim b) */
    int byzantine; /* DD_AGG_KRUM / MULTIKRUM: f, the Byzantine clients tolerated (--byzantine f) */
    int multi;     /* DD_AGG_MULTIKRUM: updates averaged; 0 = n - f */
} dd_agg_cfg;

/* "mean", "median", "trimmed", "krum", "multikrum" -> kind (other fields zeroed).
 * DD_ERR_ARG naming the value and the valid names otherwise. */
dd_status dd_agg_parse(const char *name, dd_agg_cfg *cfg);
const char *dd_agg_name(dd_agg_kind kind);

/* Whether cfg can aggregate n updates with its guarantee: Krum needs n > 2f + 2 to
 * tolerate f Byzantine clients (DD_ERR_ARG "krum with --byzantine 2 needs more than 6
 * clients, have 5"; the coordinator refuses such a configuration and such a round),
 * trimmed mean n > 2 trim, n >= 1. */
dd_status dd_agg_check(const dd_agg_cfg *cfg, int n);

/* Aggregates upd[0..n) (each d floats) into out[0..d). weights: n non-negative sample
 * counts for DD_AGG_MEAN (NULL = equal weights), ignored by the others. selected (NULL or
 * n ints): set to 1 for the updates that entered the result, 0 for the others (Krum,
 * multi-Krum; the mean leaves out updates of weight 0; all 1 for median and trimmed mean).
 * Krum ties go to the lower index. Non-finite values are not refused: the mean of a NaN
 * is NaN (the robustness benchmark shows it); median and trimmed mean order NaN above
 * +inf; Krum's distance to an update with a non-finite value is +inf. Krum scores each
 * update on its max(1, n - f - 2) nearest others (Flower's rule) for any n: n > 2f + 2
 * is dd_agg_check's, not this function's. Errors: those of dd_agg_check except Krum's
 * n > 2f + 2, DD_ERR_ARG for n < 1 or a negative or all-zero weight, DD_ERR_NOMEM.
 * Deterministic: the result does not depend on anything but the inputs and their order. */
dd_status dd_agg_run(const dd_agg_cfg *cfg, int n, size_t d, const float *const *upd,
                     const double *weights, float *out, int *selected);

/* ---- Renyi differential privacy accountant (sampled Gaussian mechanism) ---- */
/* TF Privacy's DEFAULT_RDP_ORDERS: [1 + x / 10 for x in 1..99] + list(range(12, 64)) +
 * [128, 256, 512]; writes at most cap orders, returns their count. */
int dd_rdp_default_orders(double *orders, int cap);

/* RDP at each order of `steps` compositions of the sampled Gaussian mechanism with
 * sampling rate q (0 <= q <= 1) and noise multiplier sigma (> 0; noise std = sigma x the
 * clipping norm). Matches TF Privacy's compute_rdp (golden values in
 * docs/federated.md; orders may be fractional). Errors: DD_ERR_ARG (q outside
 * [0,1], sigma <= 0, order <= 1, steps < 0). q = 0 gives 0; sigma -> 0 gives +inf. */
dd_status dd_rdp_compute(double q, double sigma, long steps, const double *orders, int n_orders,
                         double *rdp);

/* (epsilon, delta) from RDP: the smallest epsilon over the orders, with TF Privacy's
 * conversion (get_privacy_spent: eps = rdp - (log delta + log order) / (order - 1) +
 * log((order - 1) / order)). opt_order (may be NULL) gets the order that gave it. */
dd_status dd_rdp_epsilon(const double *orders, const double *rdp, int n_orders, double delta,
                         double *eps, double *opt_order);

/* ---- differential privacy of an update ---- */
/* Scales v[0..d) so that its L2 norm is at most clip (clip > 0); returns the norm before
 * clipping (computed in double). A non-finite norm sets v to zero and returns it. */
double dd_fed_clip(float *v, size_t d, double clip);

#ifdef __cplusplus
}
#endif
#endif
