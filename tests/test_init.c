/* Initialisers: orthogonal (square, tall, wide) and Xavier-uniform, and the gru model's
 * OpenDPD initialisation (orthogonal recurrent gate blocks, Xavier input and output
 * weights, zero biases). */
#include "distdpd/model.h"
#include "distdpd/param.h"
#include "dd_test.h"

/* max |G - I| where G is the Gram matrix of the rows (by_rows) or columns of p. */
static double gram_err(const float *p, size_t rows, size_t cols, int by_rows) {
    size_t k = by_rows ? rows : cols, len = by_rows ? cols : rows;
    double worst = 0.0;
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            double d = 0.0;
            for (size_t i = 0; i < len; i++) {
                double x = by_rows ? p[a * cols + i] : p[i * cols + a];
                double y = by_rows ? p[b * cols + i] : p[i * cols + b];
                d += x * y;
            }
            double e = fabs(d - (a == b ? 1.0 : 0.0));
            if (e > worst) worst = e;
        }
    return worst;
}

/* The textbook (left-looking) modified Gram-Schmidt on the same draws, as
 * dd_param_orthogonal computed it before its right-looking rewrite: the gru's
 * initialisation must not change by a bit. */
static void ortho_reference(float *p, size_t rows, size_t cols, dd_rng *rng) {
    int tall = rows >= cols;
    size_t n = tall ? rows : cols, m = tall ? cols : rows;
    double *a = calloc(n * m, sizeof(double));
    for (size_t i = 0; i < n * m; i++) a[i] = dd_rng_normal(rng);
    for (size_t j = 0; j < m; j++) {
        double *q = a + j * n;
        for (size_t k = 0; k < j; k++) {
            const double *qk = a + k * n;
            double d = 0.0;
            for (size_t i = 0; i < n; i++) d += qk[i] * q[i];
            for (size_t i = 0; i < n; i++) q[i] -= d * qk[i];
        }
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += q[i] * q[i];
        s = sqrt(s);
        for (size_t i = 0; i < n; i++) q[i] /= s;
    }
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < n; i++) {
            if (tall) p[i * cols + j] = (float)a[j * n + i];
            else p[j * cols + i] = (float)a[j * n + i];
        }
    free(a);
}

static void check_ortho_reference(size_t rows, size_t cols, uint64_t seed) {
    dd_rng r1, r2;
    dd_rng_seed(&r1, seed);
    dd_rng_seed(&r2, seed);
    float *p = calloc(rows * cols, sizeof(float)), *q = calloc(rows * cols, sizeof(float));
    CHECK_OK(dd_param_orthogonal(p, rows, cols, &r1));
    ortho_reference(q, rows, cols, &r2);
    CHECK(memcmp(p, q, rows * cols * sizeof(float)) == 0, "orthogonal %zux%zu differs from the left-looking loop",
          rows, cols);
    free(p);
    free(q);
}

int main(void) {
    dd_rng rng;
    dd_rng_seed(&rng, 11);
    /* bit for bit the textbook loop: square (the gru's blocks, 23 and a multiple of the
     * column block), tall, wide */
    check_ortho_reference(23, 23, 1);
    check_ortho_reference(64, 64, 2);
    check_ortho_reference(40, 7, 3);
    check_ortho_reference(9, 33, 4);
    check_ortho_reference(150, 150, 5);
    float m[40 * 40];
    CHECK_OK(dd_param_orthogonal(m, 23, 23, &rng));
    CHECK(gram_err(m, 23, 23, 0) < 1e-5, "square columns %g", gram_err(m, 23, 23, 0));
    CHECK(gram_err(m, 23, 23, 1) < 1e-5, "square rows %g", gram_err(m, 23, 23, 1));
    CHECK_OK(dd_param_orthogonal(m, 40, 7, &rng));
    CHECK(gram_err(m, 40, 7, 0) < 1e-5, "tall columns %g", gram_err(m, 40, 7, 0));
    CHECK_OK(dd_param_orthogonal(m, 5, 31, &rng));
    CHECK(gram_err(m, 5, 31, 1) < 1e-5, "wide rows %g", gram_err(m, 5, 31, 1));
    CHECK_ERR(dd_param_orthogonal(m, 0, 3, &rng), DD_ERR_ARG, "empty");
    /* Two draws differ (it is random, not a fixed basis). */
    float m2[23 * 23];
    CHECK_OK(dd_param_orthogonal(m, 23, 23, &rng));
    CHECK_OK(dd_param_orthogonal(m2, 23, 23, &rng));
    CHECK(memcmp(m, m2, sizeof m2) != 0, "two orthogonal draws are equal");

    /* Xavier: inside the bound, and filling it (max close to the bound, mean near 0). */
    float x[25 * 400];
    dd_param_xavier_uniform(x, 25, 400, &rng);
    double k = sqrt(6.0 / 425.0), mx = 0.0, mean = 0.0;
    for (size_t i = 0; i < 10000; i++) {
        CHECK(fabs(x[i]) <= k, "xavier value %g beyond %g", x[i], k);
        if (fabs(x[i]) > mx) mx = fabs(x[i]);
        mean += x[i];
    }
    CHECK(mx > 0.99 * k, "xavier max %g of bound %g", mx, k);
    CHECK_NEAR(mean / 10000.0, 0.0, 0.01 * k);

    /* The gru model's initialisation follows OpenDPD's reset_parameters(). */
    dd_model *g = NULL;
    dd_model_cfg cfg = {0};
    dd_model_cfg_set(&cfg, "hidden", 23);
    CHECK_OK(dd_model_create("gru", &cfg, &g));
    if (g) {
        const dd_param_table *t = dd_model_params(g);
        float *p = dd_calloc(t->total, sizeof(float));
        for (size_t i = 0; i < t->total; i++) p[i] = 123.0f; /* init must overwrite */
        dd_model_init(g, p, 0);
        const float *whh = dd_param_view(t, p, "rnn.weight_hh_l0");
        const float *wih = dd_param_view(t, p, "rnn.weight_ih_l0");
        const float *bih = dd_param_view(t, p, "rnn.bias_ih_l0");
        const float *bhh = dd_param_view(t, p, "rnn.bias_hh_l0");
        const float *wo = dd_param_view(t, p, "fc_out.weight");
        const float *bo = dd_param_view(t, p, "fc_out.bias");
        CHECK(whh && wih && bih && bhh && wo && bo, "gru parameter names");
        if (whh && wih && bih && bhh && wo && bo) {
            for (int gate = 0; gate < 3; gate++)
                CHECK(gram_err(whh + gate * 23 * 23, 23, 23, 0) < 1e-5, "gate %d of weight_hh not orthogonal", gate);
            double kx = sqrt(6.0 / 25.0);
            int in_bound = 1, zero = 1;
            for (int i = 0; i < 3 * 23 * 2; i++) in_bound &= fabs(wih[i]) <= kx && wih[i] != 123.0f;
            for (int i = 0; i < 2 * 23; i++) in_bound &= fabs(wo[i]) <= kx;
            for (int i = 0; i < 3 * 23; i++) zero &= bih[i] == 0.0f && bhh[i] == 0.0f;
            zero &= bo[0] == 0.0f && bo[1] == 0.0f;
            CHECK(in_bound, "xavier bounds of weight_ih / fc_out.weight");
            CHECK(zero, "biases not zero");
        }
        dd_free(p);
        dd_model_destroy(&g);
    }
    return dd_test_done("test_init");
}
