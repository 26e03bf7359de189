/* The RDP accountant (fed.h) against TF Privacy's golden values
 * (tensorflow_privacy/privacy/analysis/rdp_accountant_test.py) and closed forms. */
#include <math.h>

#include "dd_test.h"
#include "distdpd/fed.h"

static void test_golden(void) {
    double o20 = 20, r;
    CHECK_OK(dd_rdp_compute(1, 10, 1, &o20, 1, &r)); /* q = 1: alpha / (2 sigma^2) */
    CHECK(r == 0.1, "compute_rdp(1, 10, 1, 20) = %.17g", r);
    CHECK_OK(dd_rdp_compute(0, 10, 1, &o20, 1, &r));
    CHECK(r == 0, "q = 0 gives %g", r);
    double o5 = 5;
    CHECK_OK(dd_rdp_compute(0.1, 2, 10, &o5, 1, &r));
    CHECK_NEAR(r, 0.07737, 1e-5); /* places=5 */
    double ord[] = {1.5, 2.5, 5, 50, 100, INFINITY}, rdp[6];
    const double want[] = {0.00065, 0.001085, 0.00218075, 0.023846, 167.416307};
    CHECK_OK(dd_rdp_compute(0.01, 2.5, 50, ord, 6, rdp));
    for (int k = 0; k < 5; k++) CHECK_NEAR(rdp[k], want[k], 1e-5);
    CHECK(isinf(rdp[5]) && rdp[5] > 0, "order inf gives %g", rdp[5]);
}

/* Order 2 has a closed form: A_2 = 1 + q^2 (exp(1/sigma^2) - 1). The fractional series
 * and the integer expansion agree where they meet (order 5 vs 5 +- 1e-9). */
static void test_closed_forms(void) {
    const double qs[] = {0.001, 0.01, 0.3, 0.9}, sig[] = {0.7, 1, 2.5, 8};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double o = 2, r;
            CHECK_OK(dd_rdp_compute(qs[i], sig[j], 3, &o, 1, &r));
            double want = 3 * log1p(qs[i] * qs[i] * expm1(1 / (sig[j] * sig[j])));
            CHECK(fabs(r - want) <= 1e-12 * fmax(1, want), "order 2 q %g sigma %g: %.15g vs %.15g", qs[i], sig[j],
                  r, want);
            double oo[] = {5 - 1e-9, 5, 5 + 1e-9, 12.5 - 1e-9, 12.5, 13}, rr[6];
            CHECK_OK(dd_rdp_compute(qs[i], sig[j], 1, oo, 6, rr));
            CHECK(fabs(rr[0] - rr[1]) <= 1e-6 * rr[1] + 1e-12 && fabs(rr[2] - rr[1]) <= 1e-6 * rr[1] + 1e-12,
                  "q %g sigma %g: order 5-: %.12g, 5: %.12g, 5+: %.12g", qs[i], sig[j], rr[0], rr[1], rr[2]);
            /* RDP is non-decreasing in the order */
            CHECK(rr[3] <= rr[4] * (1 + 1e-9) && rr[4] <= rr[5] * (1 + 1e-9), "monotone q %g sigma %g", qs[i],
                  sig[j]);
        }
}

static void test_epsilon(void) {
    /* get_privacy_spent on constant RDP 1.1 at orders 2..32, delta 1e-5: the largest order,
     * eps = 1.1 + log(31/32) - log(1e-5 * 32) / 31 = 1.32783806176 */
    double o[31], r[31], eps, opt;
    for (int k = 0; k < 31; k++) o[k] = 2 + k, r[k] = 1.1;
    CHECK_OK(dd_rdp_epsilon(o, r, 31, 1e-5, &eps, &opt));
    CHECK(opt == 32, "opt order %g", opt);
    CHECK_NEAR(eps, 1.32783806176, 1e-10);

    /* q = 1, sigma = 4.530877117 is exactly (1, 1e-6)-DP (rdp = order / (2 sigma^2)); over
     * the fine grid of orders 1.001 .. 99.999 the conversion gives eps = 1 (places=7). */
    int n = 99000;
    double *oo = malloc((size_t)n * sizeof *oo), *rr = malloc((size_t)n * sizeof *rr);
    for (int k = 0; k < n; k++) oo[k] = 0.001 * (1001 + k);
    CHECK_OK(dd_rdp_compute(1, 4.530877117, 1, oo, n, rr));
    for (int k = 0; k < n; k += 997) CHECK(rr[k] == oo[k] / (2 * 4.530877117 * 4.530877117), "closed form q=1");
    CHECK_OK(dd_rdp_epsilon(oo, rr, n, 1e-6, &eps, &opt));
    CHECK_NEAR(eps, 1, 1e-7);
    /* zCDP conversion: rho + 2 sqrt(rho log(1/delta)), rho = 1/(2 sigma^2), is looser */
    double rho = 1 / (2 * 4.530877117 * 4.530877117);
    CHECK(eps < rho + 2 * sqrt(rho * log(1e6)), "eps %g vs zCDP bound %g", eps, rho + 2 * sqrt(rho * log(1e6)));
    free(oo), free(rr);

    /* test_check_composition: two mechanisms composed; with the old conversion
     * eps = min rdp - log(delta) / (order - 1) = 8.509656 at order 2.5, and the
     * get_privacy_spent conversion is no larger. */
    double co[] = {1.25, 1.5, 1.75, 2., 2.5, 3., 4., 5., 6., 7., 8., 10., 12., 14., 16., 20., 24., 28., 32., 64., 256.};
    double c1[21], c2[21];
    CHECK_OK(dd_rdp_compute(1e-4, 0.4, 40000, co, 21, c1));
    CHECK_OK(dd_rdp_compute(0.1, 2, 100, co, 21, c2));
    double old = INFINITY, old_o = 0;
    for (int k = 0; k < 21; k++) {
        c1[k] += c2[k];
        double e = c1[k] - log(1e-5) / (co[k] - 1);
        if (e < old) old = e, old_o = co[k];
    }
    CHECK_NEAR(old, 8.509656, 1e-5);
    CHECK(old_o == 2.5, "old opt order %g", old_o);
    CHECK_OK(dd_rdp_epsilon(co, c1, 21, 1e-5, &eps, NULL));
    CHECK(eps <= 8.509656 && eps > 0, "composition eps %g", eps);

    /* tiny RDP: the KL bound gives eps = 0 */
    double one = 10, tiny = 1e-12;
    CHECK_OK(dd_rdp_epsilon(&one, &tiny, 1, 1e-5, &eps, &opt));
    CHECK(eps == 0, "eps %g", eps);
}

static void test_defaults_and_errors(void) {
    double o[200];
    int n = dd_rdp_default_orders(o, 200);
    CHECK(n == 99 + 52 + 3, "%d default orders", n);
    CHECK(o[0] == 1.1 && fabs(o[98] - 10.9) < 1e-12 && o[99] == 12 && o[150] == 63 && o[153] == 512, "orders");
    CHECK(dd_rdp_default_orders(o, 5) == 5, "cap");
    double r[200];
    CHECK_OK(dd_rdp_compute(0.01, 1.1, 1000, o, n, r)); /* every default order computes */
    int finite = 1;
    for (int k = 0; k < n; k++) finite &= r[k] >= 0 && !isnan(r[k]);
    CHECK(finite, "default orders give non-negative RDP");
    double x = 2, y;
    CHECK_ERR(dd_rdp_compute(1.5, 1, 1, &x, 1, &y), DD_ERR_ARG, "q must be in [0, 1], got 1.5");
    CHECK_ERR(dd_rdp_compute(0.5, 0, 1, &x, 1, &y), DD_ERR_ARG, "sigma must be > 0");
    CHECK_ERR(dd_rdp_compute(0.5, 1, -1, &x, 1, &y), DD_ERR_ARG, "steps must be >= 0");
    x = 1;
    CHECK_ERR(dd_rdp_compute(0.5, 1, 1, &x, 1, &y), DD_ERR_ARG, "orders must be > 1");
    x = NAN;
    CHECK_ERR(dd_rdp_compute(0.5, 1, 1, &x, 1, &y), DD_ERR_ARG, "orders must be > 1");
    x = 3;
    CHECK_OK(dd_rdp_compute(0.5, 1e-3, 1, &x, 1, &y));
    CHECK(y > 1e6, "sigma 1e-3 gives %g", y); /* log(q^3 exp(3 / sigma^2)) / 2 */
    CHECK_OK(dd_rdp_compute(0.5, 1e-200, 1, &x, 1, &y));
    CHECK(isinf(y) && y > 0, "sigma -> 0 gives %g", y);
    CHECK_OK(dd_rdp_compute(0.5, 1, 0, &x, 1, &y));
    CHECK(y == 0, "no steps: %g", y);
    double e, rr = 1;
    CHECK_ERR(dd_rdp_epsilon(&x, &rr, 1, 0, &e, NULL), DD_ERR_ARG, "delta must be in (0, 1)");
    rr = -1;
    CHECK_ERR(dd_rdp_epsilon(&x, &rr, 1, 1e-5, &e, NULL), DD_ERR_ARG, "must be >= 0");
}

int main(void) {
    test_golden();
    test_closed_forms();
    test_epsilon();
    test_defaults_and_errors();
    return dd_test_done("test_fed_rdp");
}
