/* Renyi-DP accountant of the sampled Gaussian mechanism (fed.h, docs/federated.md
 * "Differential privacy"), the computation of TF Privacy's rdp_accountant (Mironov,
 * Talwar, Zhang 2019, "Renyi Differential Privacy of the Sampled Gaussian Mechanism"):
 *
 *   RDP(alpha) = log(A_alpha) / (alpha - 1),  A_alpha = E_{z~mu0}[(mu(z)/mu0(z))^alpha],
 *   mu0 = N(0, sigma^2), mu = (1 - q) mu0 + q N(1, sigma^2).
 *
 * Integer alpha: the binomial expansion A = sum_i C(alpha,i) q^i (1-q)^(alpha-i)
 * exp((i^2 - i) / (2 sigma^2)). Fractional alpha: the two series of Section 3.3 split at
 * z0 = sigma^2 log(1/q - 1) + 1/2, summed until both terms fall below exp(-30). All sums
 * are in log space. */
#include <math.h>

#include "distdpd/fed.h"

static double log_add(double x, double y) {
    double a = x < y ? x : y, b = x < y ? y : x;
    if (a == -INFINITY) return b;
    return log1p(exp(a - b)) + b;
}

/* log(exp(x) - exp(y)); x >= y or the series went wrong (status NUMERIC). */
static dd_status log_sub(double x, double y, double *out) {
    if (x < y)
        return dd_error(DD_ERR_NUMERIC, "RDP accountant: negative partial sum in the fractional-order series");
    if (y == -INFINITY) *out = x;
    else if (x == y) *out = -INFINITY;
    else {
        double e = expm1(x - y);
        *out = isfinite(e) ? log(e) + y : x;
    }
    return DD_OK;
}

/* log(erfc(x)), accurate where erfc underflows (Laurent series at infinity). */
static double log_erfc(double x) {
    double r = erfc(x);
    if (r > 0) return log(r);
    double x2 = x * x;
    return -0.5 * log(M_PI) - log(x) - x2 - 0.5 / x2 + 0.625 / (x2 * x2) - 37.0 / 24.0 / (x2 * x2 * x2) +
           353.0 / 64.0 / (x2 * x2 * x2 * x2);
}

static double log_binom_int(double a, double i) {
    return lgamma(a + 1) - lgamma(i + 1) - lgamma(a - i + 1);
}

static double log_a_int(double q, double sigma, long alpha) {
    double la = -INFINITY, lq = log(q), l1q = log1p(-q), s2 = 2 * sigma * sigma;
    for (long i = 0; i <= alpha; i++) {
        double di = (double)i;
        double s = log_binom_int((double)alpha, di) + di * lq + (double)(alpha - i) * l1q + (di * di - di) / s2;
        la = log_add(la, s);
    }
    return la;
}

static dd_status log_a_frac(double q, double sigma, double alpha, double *out) {
    double la0 = -INFINITY, la1 = -INFINITY;
    double lq = log(q), l1q = log1p(-q), s2 = 2 * sigma * sigma, sq2s = sqrt(2.0) * sigma;
    double z0 = sigma * sigma * log(1 / q - 1) + 0.5;
    double log_coef = 0; /* log |C(alpha, i)|, updated by C(a, i+1) = C(a, i) (a - i) / (i + 1) */
    int sign = 1;
    for (long i = 0;; i++) {
        double di = (double)i, j = alpha - di;
        double lt0 = log_coef + di * lq + j * l1q;
        double lt1 = log_coef + j * lq + di * l1q;
        double le0 = log(0.5) + log_erfc((di - z0) / sq2s);
        double le1 = log(0.5) + log_erfc((z0 - j) / sq2s);
        double ls0 = lt0 + (di * di - di) / s2 + le0;
        double ls1 = lt1 + (j * j - j) / s2 + le1;
        if (sign > 0) {
            la0 = log_add(la0, ls0);
            la1 = log_add(la1, ls1);
        } else {
            DD_TRY(log_sub(la0, ls0, &la0));
            DD_TRY(log_sub(la1, ls1, &la1));
        }
        if ((ls0 > ls1 ? ls0 : ls1) < -30) break;
        if (i > 1000000)
            return dd_error(DD_ERR_NUMERIC, "RDP accountant: the series for order %g (q %g, sigma %g) does not converge",
                            alpha, q, sigma);
        double f = alpha - di;
        if (f < 0) sign = -sign;
        log_coef += log(fabs(f)) - log(di + 1);
    }
    *out = log_add(la0, la1);
    return DD_OK;
}

dd_status dd_rdp_compute(double q, double sigma, long steps, const double *orders, int n_orders, double *rdp) {
    if (!(q >= 0 && q <= 1)) return dd_error(DD_ERR_ARG, "RDP accountant: sampling rate q must be in [0, 1], got %g", q);
    if (!(sigma > 0)) return dd_error(DD_ERR_ARG, "RDP accountant: noise multiplier sigma must be > 0, got %g", sigma);
    if (steps < 0) return dd_error(DD_ERR_ARG, "RDP accountant: steps must be >= 0, got %ld", steps);
    if (n_orders < 0 || (n_orders > 0 && (!orders || !rdp)))
        return dd_error(DD_ERR_ARG, "RDP accountant: %d orders with a NULL array", n_orders);
    for (int k = 0; k < n_orders; k++)
        if (!(orders[k] > 1))
            return dd_error(DD_ERR_ARG, "RDP accountant: order %d is %g; orders must be > 1", k, orders[k]);
    for (int k = 0; k < n_orders; k++) {
        double a = orders[k], r;
        if (q == 0) r = 0;
        else if (q == 1) r = a / (2 * sigma * sigma);
        else if (isinf(a) || 2 * sigma * sigma == 0) r = INFINITY; /* sigma^2 underflows: no noise */
        else if (a == floor(a) && a < 9e15) r = log_a_int(q, sigma, (long)a) / (a - 1);
        else {
            double la = 0;
            DD_TRY(log_a_frac(q, sigma, a, &la));
            r = la / (a - 1);
        }
        /* steps == 0 composes nothing, whatever r is (0 x inf would be NaN) */
        rdp[k] = steps == 0 ? 0 : r * (double)steps;
    }
    return DD_OK;
}

int dd_rdp_default_orders(double *orders, int cap) {
    int n = 0;
    for (int x = 1; x <= 99; x++)
        if (n < cap) orders[n++] = 1 + x / 10.0;
    for (int o = 12; o < 64; o++)
        if (n < cap) orders[n++] = o;
    static const double big[] = {128, 256, 512};
    for (int k = 0; k < 3; k++)
        if (n < cap) orders[n++] = big[k];
    return n;
}

dd_status dd_rdp_epsilon(const double *orders, const double *rdp, int n_orders, double delta, double *eps,
                         double *opt_order) {
    if (n_orders < 1 || !orders || !rdp || !eps)
        return dd_error(DD_ERR_ARG, "RDP epsilon: needs at least one order with its RDP, got %d", n_orders);
    if (!(delta > 0 && delta < 1)) return dd_error(DD_ERR_ARG, "RDP epsilon: delta must be in (0, 1), got %g", delta);
    double best = INFINITY, best_order = orders[0];
    for (int k = 0; k < n_orders; k++) {
        double a = orders[k], r = rdp[k], e;
        if (!(a >= 1)) return dd_error(DD_ERR_ARG, "RDP epsilon: order %d is %g; orders must be >= 1", k, a);
        if (!(r >= 0)) return dd_error(DD_ERR_ARG, "RDP epsilon: RDP at order %g is %g; must be >= 0", a, r);
        if (delta * delta + expm1(-r) >= 0) e = 0; /* the KL bound delta <= sqrt(1 - exp(-rdp)) */
        else if (a > 1.01 && isfinite(a)) e = r + log1p(-1 / a) - log(delta * a) / (a - 1);
        else e = INFINITY; /* not numerically stable as a -> 1 */
        if (e < best) {
            best = e;
            best_order = a;
        }
    }
    *eps = best > 0 ? best : 0;
    if (opt_order) *opt_order = best_order;
    return DD_OK;
}
