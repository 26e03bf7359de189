/* Tests of the model registry (src/models): for every registered model, default creation
 * and parameter counts, deterministic initialisation, forward shape, backward against
 * central finite differences (per parameter tensor and for the input), backward
 * accumulation semantics, run_stream == one-frame forward; plus the GRU parameter counts
 * of OpenDPD, GMP least squares against known coefficients and against fit.h, the
 * million-parameter Hammerstein stack, and rejected configurations. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/core.h"
#include "distdpd/fit.h"
#include "distdpd/model.h"
#include "distdpd/param.h"
#include "test_model_util.h"

/* Random frames: I and Q uniform in +-0.7, away from exact zero. */
static void rand_x(float *x, size_t n, dd_rng *rng) {
    for (size_t i = 0; i < n; i++) {
        double v = (dd_rng_uniform(rng) * 2 - 1) * 0.7;
        if (fabs(v) < 1e-3) v = 1e-3;
        x[i] = (float)v;
    }
}

static void rand_vec(float *v, size_t n, double k, dd_rng *rng) {
    for (size_t i = 0; i < n; i++) v[i] = (float)((dd_rng_uniform(rng) * 2 - 1) * k);
}

/* L = sum y * r (double accumulation) of one forward. */
static double loss(const dd_model *m, const float *p, const float *x, const float *r, float *y,
                   int B, int T, float *ws) {
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    double L = 0;
    for (size_t i = 0; i < (size_t)B * T * 2; i++) L += (double)y[i] * r[i];
    return L;
}

/* Directional derivative check: v (n floats, the thing perturbed), dir, analytic dot. */
static int fd_ok(const dd_model *m, float *p, float *x, const float *r, float *y, int B, int T,
                 float *ws, float *v, const float *dir, size_t n, double an, const char *what,
                 int verbose) {
    float *save = malloc(n * sizeof *save);
    memcpy(save, v, n * sizeof *save);
    int ok = 0;
    double fd = 0, h = 0;
    static const double steps[] = {1e-2, 3e-2, 3e-3, 1e-3, 3e-4};
    for (int attempt = 0; attempt < 5 && !ok; attempt++) {
        h = steps[attempt];
        for (size_t i = 0; i < n; i++) v[i] = save[i] + (float)(h * dir[i]);
        double lp = loss(m, p, x, r, y, B, T, ws);
        for (size_t i = 0; i < n; i++) v[i] = save[i] - (float)(h * dir[i]);
        double lm = loss(m, p, x, r, y, B, T, ws);
        memcpy(v, save, n * sizeof *save);
        fd = (lp - lm) / (2 * h);
        ok = fabs(fd - an) <= 1e-2 * fabs(an) + 1e-4;
    }
    if (verbose || !ok)
        printf("  %-28s analytic %+.6e  fd %+.6e  (h %.0e) %s\n", what, an, fd, h,
               ok ? "ok" : "MISMATCH");
    free(save);
    return ok;
}

/* The per-model contract checks (cfg NULL: the defaults). */
static void check_model(const char *name, const char *opts) {
    dd_model *m = NULL;
    dd_model_cfg cfg = tm_mcfg(opts);
    REQUIRE_OK(dd_model_create(name, &cfg, &m));
    char desc[256];
    dd_model_describe(m, desc, sizeof desc);
    const dd_param_table *t = dd_model_params(m);
    printf("%s  [history %ld, %.0f flops/sample fwd, %.0f bwd]\n", desc, dd_model_history(m),
           dd_model_flops_per_sample(m, 0), dd_model_flops_per_sample(m, 1));
    CHECK(strstr(desc, name) == desc, "describe '%s'", desc);
    const size_t np = t->total;
    REQUIRE(np > 0 && np >= t->nparams && t->nparams > 0 && dd_model_num_params(m) == t->nparams, "%s nparams", name);
    CHECK(strcmp(dd_model_name(m), name) == 0, "name %s", dd_model_name(m));
    CHECK(dd_model_flops_per_sample(m, 1) > dd_model_flops_per_sample(m, 0) &&
              dd_model_flops_per_sample(m, 0) > 0,
          "%s flops", name);

    /* deterministic init; padding zero; a different seed differs */
    float *p = dd_calloc(np, sizeof(float)), *p2 = dd_calloc(np, sizeof(float));
    dd_model_init(m, p, 7);
    dd_model_init(m, p2, 7);
    CHECK(memcmp(p, p2, np * sizeof(float)) == 0, "%s: init not deterministic", name);
    dd_model_init(m, p2, 8);
    CHECK(memcmp(p, p2, np * sizeof(float)) != 0, "%s: seed ignored", name);
    int pad_ok = 1;
    for (size_t e = 0; e < t->count; e++) {
        size_t end = t->entries[e].offset + t->entries[e].size;
        size_t next = e + 1 < t->count ? t->entries[e + 1].offset : t->total;
        for (size_t i = end; i < next; i++) pad_ok &= p[i] == 0.0f;
    }
    CHECK(pad_ok, "%s: padding not zero after init", name);

    /* perturb the parameters a little so nothing sits at a special value (zero biases) */
    dd_rng rng;
    dd_rng_seed(&rng, 1234);
    for (size_t e = 0; e < t->count; e++)
        for (size_t i = 0; i < t->entries[e].size; i++)
            p[t->entries[e].offset + i] += (float)((dd_rng_uniform(&rng) * 2 - 1) * 0.05);

    const int B = 2, T = 13;
    const size_t nx = (size_t)B * T * 2;
    float *x = malloc(nx * sizeof *x), *y = malloc(nx * sizeof *y), *r = malloc(nx * sizeof *r);
    float *dx = calloc(nx, sizeof *dx), *dx2 = calloc(nx, sizeof *dx2), *dir = calloc(np, sizeof *dir);
    float *g = dd_calloc(np, sizeof(float)), *g2 = dd_calloc(np, sizeof(float));
    float *ws = dd_calloc(dd_model_workspace_size(m, B, T), sizeof(float));
    rand_x(x, nx, &rng);
    rand_vec(r, nx, 1.0, &rng);
    for (size_t i = 0; i < nx; i++) y[i] = NAN;
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    int fin = 1;
    for (size_t i = 0; i < nx; i++) fin &= isfinite(y[i]);
    CHECK(fin, "%s: forward wrote non-finite or missed outputs", name);
    /* frames are independent: frame 1 alone gives the same output */
    {
        float *y1 = malloc(nx / 2 * sizeof *y1);
        float *ws1 = dd_calloc(dd_model_workspace_size(m, 1, T), sizeof(float));
        CHECK_OK(dd_model_forward(m, p, x + nx / 2, y1, 1, T, ws1));
        double md = 0;
        for (size_t i = 0; i < nx / 2; i++) md = fmax(md, fabs(y1[i] - y[nx / 2 + i]));
        CHECK(md < 1e-5, "%s: frame 1 alone differs by %g", name, md);
        free(y1);
        dd_free(ws1);
    }

    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    CHECK_OK(dd_model_backward(m, p, g, x, r, dx, B, T, ws));
    /* backward adds: a second call doubles; grads-only and dx-only agree with both */
    CHECK_OK(dd_model_backward(m, p, g2, x, r, NULL, B, T, ws));
    CHECK_OK(dd_model_backward(m, p, NULL, x, r, dx2, B, T, ws));
    double dg = 0, dd = 0;
    for (size_t i = 0; i < np; i++) dg = fmax(dg, fabs(g[i] - g2[i]));
    for (size_t i = 0; i < nx; i++) dd = fmax(dd, fabs(dx[i] - dx2[i]));
    CHECK(dg < 1e-5 && dd < 1e-5, "%s: grads-only/dx-only differ (%g, %g)", name, dg, dd);
    CHECK_OK(dd_model_backward(m, p, g2, x, r, dx2, B, T, ws));
    dg = 0;
    for (size_t i = 0; i < np; i++) dg = fmax(dg, fabs(2 * g[i] - g2[i]) / (1 + fabs(g[i])));
    CHECK(dg < 1e-5, "%s: backward does not add into grads (%g)", name, dg);
    pad_ok = 1;
    for (size_t e = 0; e < t->count; e++) {
        size_t end = t->entries[e].offset + t->entries[e].size;
        size_t next = e + 1 < t->count ? t->entries[e + 1].offset : t->total;
        for (size_t i = end; i < next; i++) pad_ok &= g[i] == 0.0f;
    }
    CHECK(pad_ok, "%s: backward touched gradient padding", name);

    /* finite differences: one random direction per parameter tensor, and one for x */
    int bad = 0;
    for (size_t e = 0; e < t->count; e++) {
        const dd_param_entry *en = &t->entries[e];
        /* direction: the gradient itself (scaled to max 1) plus 30 % noise, so the
         * derivative is large (float32 FD resolves it) and a zero gradient still fails */
        memset(dir, 0, np * sizeof *dir);
        rand_vec(dir + en->offset, en->size, 0.3, &rng);
        double gmax = 0;
        for (size_t i = 0; i < en->size; i++) gmax = fmax(gmax, fabs(g[en->offset + i]));
        for (size_t i = 0; gmax > 0 && i < en->size; i++)
            dir[en->offset + i] += (float)(g[en->offset + i] / gmax);
        double an = 0;
        for (size_t i = 0; i < en->size; i++) an += (double)dir[en->offset + i] * g[en->offset + i];
        bad += !fd_ok(m, p, x, r, y, B, T, ws, p + en->offset, dir + en->offset, en->size, an,
                      en->name, getenv("DD_TEST_VERBOSE") != NULL);
    }
    {
        float *dxd = malloc(nx * sizeof *dxd);
        double gmax = 0;
        for (size_t i = 0; i < nx; i++) gmax = fmax(gmax, fabs(dx[i]));
        rand_vec(dxd, nx, 0.3, &rng);
        for (size_t i = 0; gmax > 0 && i < nx; i++) dxd[i] += (float)(dx[i] / gmax);
        double an = 0;
        for (size_t i = 0; i < nx; i++) an += (double)dxd[i] * dx[i];
        bad += !fd_ok(m, p, x, r, y, B, T, ws, x, dxd, nx, an, "input x", getenv("DD_TEST_VERBOSE") != NULL);
        free(dxd);
    }
    CHECK(bad == 0, "%s: %d finite-difference mismatches", name, bad);

    /* streaming == one long frame (several chunks, the last one partial) */
    {
        const size_t n = 9000;
        dd_cf32 *xs = malloc(n * sizeof *xs), *ys = malloc(n * sizeof *ys);
        float *yf = malloc(2 * n * sizeof *yf);
        rand_x((float *)xs, 2 * n, &rng);
        float *wsl = dd_calloc(dd_model_workspace_size(m, 1, (int)n), sizeof(float));
        CHECK_OK(dd_model_forward(m, p, (const float *)xs, yf, 1, (int)n, wsl));
        CHECK_OK(dd_model_run_stream(m, p, xs, ys, n));
        double md = 0, my = 0;
        for (size_t i = 0; i < n; i++) {
            md = fmax(md, fabs(crealf(ys[i]) - yf[2 * i]));
            md = fmax(md, fabs(cimagf(ys[i]) - yf[2 * i + 1]));
            my = fmax(my, fmax(fabs(yf[2 * i]), fabs(yf[2 * i + 1])));
        }
        printf("  stream vs frame: max |diff| %.3g (max |y| %.3g)\n", md, my);
        CHECK(md <= 1e-5 * my, "%s: stream differs from one frame by %g (max |y| %g)", name, md,
              my);
        CHECK_ERR(dd_model_run_stream(m, p, xs, (dd_cf32 *)xs + 1, n), DD_ERR_ARG, "overlap");
        dd_free(wsl);
        free(xs);
        free(ys);
        free(yf);
    }

    /* argument checks */
    CHECK_ERR(dd_model_forward(m, p, x, y, 0, T, ws), DD_ERR_ARG, "B = 0");
    CHECK_ERR(dd_model_forward(m, p, x, y, B, T, NULL), DD_ERR_ARG, "ws");
    CHECK_ERR(dd_model_backward(m, p, g, x, NULL, dx, B, T, ws), DD_ERR_ARG, "dy");

    free(x);
    free(y);
    free(r);
    free(dx);
    free(dx2);
    free(dir);
    dd_free(g);
    dd_free(g2);
    dd_free(ws);
    dd_free(p);
    dd_free(p2);
    dd_model_destroy(&m);
    CHECK(m == NULL, "destroy did not clear the handle");
}

static size_t count_params(const char *name, dd_model_cfg cfg) {
    dd_model *m = NULL;
    CHECK_OK(dd_model_create(name, &cfg, &m));
    size_t n = dd_model_num_params(m);
    dd_model_destroy(&m);
    return n;
}

static void test_counts(void) {
    dd_model_cfg c = {0};
    dd_model_cfg_set(&c, "hidden", 23);
    CHECK(count_params("gru", c) == 1911, "gru H=23: %zu", count_params("gru", c));
    dd_model_cfg_set(&c, "hidden", 28);
    CHECK(count_params("gru", c) == 2746, "gru H=28: %zu", count_params("gru", c));
    /* the documented formulas */
    for (int H = 1; H <= 40; H += 13) {
        c = (dd_model_cfg){0};
        dd_model_cfg_set(&c, "hidden", H);
        CHECK(count_params("gru", c) == (size_t)(3 * H * H + 14 * H + 2), "gru %d", H);
        CHECK(count_params("lstm", c) == (size_t)(4 * H * H + 18 * H + 2), "lstm %d", H);
        CHECK(count_params("dgru", c) == (size_t)(4 * H * H + 27 * H + 14), "dgru %d", H);
    }
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "hidden", 10);
    dd_model_cfg_set(&c, "layers", 3);
    dd_model_cfg_set(&c, "kernel", 4);
    CHECK(count_params("tcn", c) == (size_t)(7 * 10 + 3 * 4 * 10 + 2 * 10), "tcn");
    CHECK(count_params("resnet", c) == (size_t)(7 * 10 + 3 * (4 * 100 + 100 + 20) + 2 * 10 + 2),
          "resnet");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "hidden", 10);
    dd_model_cfg_set(&c, "layers", 3);
    dd_model_cfg_set(&c, "memory", 5);
    CHECK(count_params("rvtdnn", c) == (size_t)(11 * 10 + 2 * 110 + 22), "rvtdnn");
    CHECK(count_params("arvtdnn", c) == (size_t)(26 * 10 + 2 * 110 + 22), "arvtdnn");
    CHECK(count_params("hammerstein", c) == (size_t)(3 * (100 + 50 + 2 + 40)), "hammerstein");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "order", 7);
    dd_model_cfg_set(&c, "memory", 3);
    dd_model_cfg_set(&c, "cross", 2);
    CHECK(count_params("gmp", c) == (size_t)(2 * (7 * 3 + 6 * 2 * 2)), "gmp");
    dd_model_cfg_set(&c, "cross", 0);
    CHECK(count_params("mp", c) == (size_t)(2 * 7 * 3), "mp");
    /* defaults are filled in and unused fields read back as 0 */
    dd_model *m = NULL;
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "kernel", 9); /* gru ignores kernel */
    CHECK_OK(dd_model_create("gru", &c, &m));
    CHECK(dd_model_cfg_get(dd_model_config(m), "hidden") == 23 && dd_model_cfg_get(dd_model_config(m), "kernel") == 0, "gru cfg");
    char desc[128];
    dd_model_describe(m, desc, sizeof desc);
    CHECK(strcmp(desc, "gru(hidden=23, layers=1): 1,911 parameters") == 0, "describe: '%s'", desc);
    CHECK(dd_model_history(m) == -1, "gru history");
    dd_model_destroy(&m);
}

static void test_bad_configs(void) {
    dd_model *m = (dd_model *)&m; /* must come back NULL */
    dd_model_cfg c = {0};
    CHECK_ERR(dd_model_create("nosuch", NULL, &m), DD_ERR_ARG, "unknown model 'nosuch'");
    CHECK(m == NULL, "out not cleared");
    CHECK_ERR(dd_model_create(NULL, NULL, &m), DD_ERR_ARG, "name");
    dd_model_cfg_set(&c, "hidden", -1);
    CHECK_ERR(dd_model_create("gru", &c, &m), DD_ERR_ARG, "model gru: hidden = -1");
    CHECK(m == NULL, "out not NULL after error");
    dd_model_cfg_set(&c, "hidden", 5000);
    CHECK_ERR(dd_model_create("dgru", &c, &m), DD_ERR_ARG, "hidden = 5000");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "layers", 1025);
    CHECK_ERR(dd_model_create("tcn", &c, &m), DD_ERR_ARG, "layers = 1025");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "layers", 65);
    CHECK_ERR(dd_model_create("gru", &c, &m), DD_ERR_ARG, "model gru: layers = 65 is out of range [1, 64]");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "order", 17);
    CHECK_ERR(dd_model_create("gmp", &c, &m), DD_ERR_ARG, "order = 17");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "cross", -2);
    CHECK_ERR(dd_model_create("gmp", &c, &m), DD_ERR_ARG, "cross = -2");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "memory", 65);
    CHECK_ERR(dd_model_create("mp", &c, &m), DD_ERR_ARG, "memory = 65");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "kernel", -3);
    CHECK_ERR(dd_model_create("resnet", &c, &m), DD_ERR_ARG, "kernel = -3");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "layers", -1);
    CHECK_ERR(dd_model_create("hammerstein", &c, &m), DD_ERR_ARG, "layers = -1");
    c = (dd_model_cfg){0};
    dd_model_cfg_set(&c, "memory", 2000);
    CHECK_ERR(dd_model_create("rvtdnn", &c, &m), DD_ERR_ARG, "memory = 2000");
    /* least squares only for linear-in-parameter models */
    CHECK_OK(dd_model_create("lstm", NULL, &m));
    float p[4];
    dd_cf32 xx[4] = {0};
    CHECK_ERR(dd_model_fit_ls(m, p, xx, xx, 4, NULL), DD_ERR_UNSUPPORTED, "lstm");
    dd_model_destroy(&m);
    dd_model_destroy(&m); /* twice is fine */
    dd_model_destroy(NULL);
}

/* GMP: least squares recovers known coefficients; model output == dd_gmp_apply. */
static void test_gmp_ls(const char *name) {
    dd_model_cfg c = {0};
    dd_model_cfg_set(&c, "order", 5);
    dd_model_cfg_set(&c, "memory", 3);
    if (strcmp(name, "gmp") == 0) dd_model_cfg_set(&c, "cross", 2);
    dd_model *m = NULL;
    CHECK_OK(dd_model_create(name, &c, &m));
    if (!m) return;
    const dd_param_table *t = dd_model_params(m);
    float *ptrue = dd_calloc(t->total, sizeof(float)), *pfit = dd_calloc(t->total, sizeof(float));
    dd_rng rng;
    dd_rng_seed(&rng, 99);
    dd_model_init(m, ptrue, 3);
    /* known coefficients, decaying with order so the model stays well behaved */
    for (size_t e = 0; e < t->count; e++) {
        const dd_param_entry *en = &t->entries[e];
        for (size_t i = 0; i < en->size; i++)
            ptrue[en->offset + i] = (float)((dd_rng_uniform(&rng) * 2 - 1) * 0.5);
    }
    const size_t n = 3000;
    dd_cf32 *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *y2 = malloc(n * sizeof *y2);
    for (size_t i = 0; i < n; i++) {
        double a = 0.6 * sqrt(-log(1 - dd_rng_uniform(&rng)) / 2);
        double ph = 2 * M_PI * dd_rng_uniform(&rng);
        x[i] = (float)(a * cos(ph)) + (float)(a * sin(ph)) * I;
    }
    CHECK_OK(dd_model_run_stream(m, ptrue, x, y, n));

    /* the same coefficients through fit.h's evaluator */
    const int K = dd_model_cfg_get(&c, "order"), M = dd_model_cfg_get(&c, "memory"), C = dd_model_cfg_get(&c, "cross");
    dd_gmp_shape s = dd_gmp_shape_mp(K, M, 0);
    if (C) s.kb = K - 1, s.lb = s.mb = C;
    size_t nc = dd_gmp_ncoef(&s);
    CHECK(2 * nc == dd_model_num_params(m), "%s: %zu coefficients vs %zu params", name, nc,
          dd_model_num_params(m));
    dd_cf64 *coef = calloc(nc, sizeof *coef);
    size_t j = 0;
    for (size_t e = 0; e < t->count; e++)
        for (size_t i = 0; i < t->entries[e].size; i += 2, j++)
            coef[j] = ptrue[t->entries[e].offset + i] + ptrue[t->entries[e].offset + i + 1] * I;
    dd_gmp *gm = NULL;
    CHECK_OK(dd_gmp_create(&s, coef, &gm));
    CHECK_OK(dd_gmp_apply(gm, x, y2, n));
    double md = 0;
    for (size_t i = 0; i < n; i++) md = fmax(md, cabsf(y[i] - y2[i]));
    CHECK(md < 1e-5, "%s: model vs dd_gmp_apply differ by %g", name, md);
    dd_gmp_free(&gm);

    double nmse = 0;
    CHECK_OK(dd_model_fit_ls(m, pfit, x, y, n, &nmse));
    double me = 0;
    for (size_t e = 0; e < t->count; e++)
        for (size_t i = 0; i < t->entries[e].size; i++) {
            size_t o = t->entries[e].offset + i;
            me = fmax(me, fabs(pfit[o] - ptrue[o]));
        }
    printf("%s LS fit: NMSE %.1f dB, max coefficient error %.2g\n", name, nmse, me);
    CHECK(me < 2e-3, "%s: LS coefficients off by %g", name, me);
    CHECK(nmse < -80, "%s: LS NMSE %.1f dB", name, nmse);
    CHECK_ERR(dd_model_fit_ls(m, pfit, x, y, 5, NULL), DD_ERR_RANGE, "model");
    free(coef);
    free(x);
    free(y);
    free(y2);
    dd_free(ptrue);
    dd_free(pfit);
    dd_model_destroy(&m);
}

/* The Hammerstein stack at a million parameters runs forward and backward. */
static void test_big_hammerstein(void) {
    dd_model_cfg c = {0};
    dd_model_cfg_set(&c, "hidden", 512);
    dd_model_cfg_set(&c, "layers", 4);
    dd_model *m = NULL;
    CHECK_OK(dd_model_create("hammerstein", &c, &m));
    if (!m) return;
    char desc[256];
    dd_model_describe(m, desc, sizeof desc);
    printf("%s\n", desc);
    CHECK(dd_model_num_params(m) >= 1000000, "only %zu parameters", dd_model_num_params(m));
    const dd_param_table *t = dd_model_params(m);
    float *p = dd_calloc(t->total, sizeof(float)), *g = dd_calloc(t->total, sizeof(float));
    dd_model_init(m, p, 1);
    const int B = 1, T = 8;
    float x[16], y[16], r[16], dx[16] = {0};
    dd_rng rng;
    dd_rng_seed(&rng, 5);
    rand_x(x, 16, &rng);
    rand_vec(r, 16, 1.0, &rng);
    float *ws = dd_calloc(dd_model_workspace_size(m, B, T), sizeof(float));
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    CHECK_OK(dd_model_backward(m, p, g, x, r, dx, B, T, ws));
    int fin = 1;
    for (int i = 0; i < 16; i++) fin &= isfinite(y[i]) && isfinite(dx[i]);
    double gn = 0;
    for (size_t i = 0; i < t->total; i++) gn += (double)g[i] * g[i];
    CHECK(fin && gn > 0 && isfinite(gn), "big hammerstein: non-finite or zero gradient");
    /* one directional derivative over the H x H weights of the last block */
    const dd_param_entry *e = dd_param_table_find(t, "blocks.3.nl.1.weight");
    CHECK(e != NULL, "blocks.3.nl.1.weight missing");
    if (e) {
        float *dir = calloc(e->size, sizeof *dir);
        double gmax = 0;
        for (size_t i = 0; i < e->size; i++) gmax = fmax(gmax, fabs(g[e->offset + i]));
        rand_vec(dir, e->size, 0.3, &rng);
        for (size_t i = 0; gmax > 0 && i < e->size; i++) dir[i] += (float)(g[e->offset + i] / gmax);
        double an = 0;
        for (size_t i = 0; i < e->size; i++) an += (double)dir[i] * g[e->offset + i];
        CHECK(fd_ok(m, p, x, r, y, B, T, ws, p + e->offset, dir, e->size, an,
                    "big blocks.3.nl.1.weight", 1),
              "big hammerstein FD");
        free(dir);
    }
    dd_free(ws);
    dd_free(p);
    dd_free(g);
    dd_model_destroy(&m);
}

/* tcn at the default width over a batch of 9 frames of 200 samples (about 1 MB of
 * activations per 4 frames: the size a grouping of frames for L2 would use, see
 * docs/performance.md, "tcn in groups of frames"): every frame's output and input
 * gradient equal the frame alone, bit for bit (a row's operations do not depend on the
 * batch), and parameter gradients the sum of the frames' ones. */
static void check_tcn_groups(const char *opts) {
    dd_model *m = NULL;
    dd_model_cfg cfg = tm_mcfg(opts);
    CHECK_OK(dd_model_create("tcn", &cfg, &m));
    if (!m) return;
    const int B = 9, T = 200;
    const size_t np = dd_model_params(m)->total, nf = (size_t)T * 2, nx = (size_t)B * nf;
    float *p = dd_calloc(np, sizeof(float));
    dd_model_init(m, p, 3);
    dd_rng rng;
    dd_rng_seed(&rng, 99);
    for (size_t i = 0; i < np; i++) p[i] += (float)((dd_rng_uniform(&rng) * 2 - 1) * 0.05);
    float *x = malloc(nx * sizeof *x), *r = malloc(nx * sizeof *r), *y = malloc(nx * sizeof *y);
    float *y1 = malloc(nf * sizeof *y1), *dx = calloc(nx, sizeof *dx), *dx1 = calloc(nf, sizeof *dx1);
    float *g = dd_calloc(np, sizeof(float)), *gs = dd_calloc(np, sizeof(float));
    float *ws = dd_calloc(dd_model_workspace_size(m, B, T), sizeof(float));
    float *ws1 = dd_calloc(dd_model_workspace_size(m, 1, T), sizeof(float));
    rand_x(x, nx, &rng);
    rand_vec(r, nx, 1.0, &rng);
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    CHECK_OK(dd_model_backward(m, p, g, x, r, dx, B, T, ws));
    int same_y = 1, same_dx = 1;
    for (int b = 0; b < B; b++) {
        memset(dx1, 0, nf * sizeof *dx1);
        CHECK_OK(dd_model_forward(m, p, x + b * nf, y1, 1, T, ws1));
        CHECK_OK(dd_model_backward(m, p, gs, x + b * nf, r + b * nf, dx1, 1, T, ws1));
        same_y &= memcmp(y1, y + b * nf, nf * sizeof *y1) == 0;
        same_dx &= memcmp(dx1, dx + b * nf, nf * sizeof *dx1) == 0;
    }
    double dg = 0, gm = 0;
    for (size_t i = 0; i < np; i++) dg = fmax(dg, fabs(g[i] - gs[i])), gm = fmax(gm, fabs(g[i]));
    CHECK(same_y && same_dx, "tcn %s: a frame in a batch of 9 differs from the frame alone (y %d, dx %d)",
          opts, same_y, same_dx);
    CHECK(gm > 0 && dg <= 1e-5 * gm, "tcn %s: batch gradient vs sum over frames: %g (max %g)", opts, dg, gm);
    free(x), free(r), free(y), free(y1), free(dx), free(dx1);
    dd_free(p), dd_free(g), dd_free(gs), dd_free(ws), dd_free(ws1);
    dd_model_destroy(&m);
}

int main(void) {
    size_t n = 0;
    const dd_model_info *const *reg = dd_model_registry(&n);
    CHECK(n >= 10, "only %zu models registered", n);
    for (size_t i = 0; i < n; i++) {
        REQUIRE(reg[i]->name && reg[i]->summary && reg[i]->def && reg[i]->opts && dd_model_find(reg[i]->name) == reg[i], "registry entry %zu", i);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(reg[i]->name, reg[j]->name) != 0, "duplicate model %s", reg[i]->name);
    }
    for (size_t i = 0; i < n; i++) check_model(reg[i]->name, NULL);
    /* stacked recurrent layers and deeper conv stacks than the defaults */
    check_model("gru", "hidden=9,layers=3");
    check_model("lstm", "hidden=7,layers=2");
    check_model("tcn", "hidden=8,layers=14,kernel=2");
    check_tcn_groups("hidden=96");
    check_tcn_groups("hidden=96,layers=14,kernel=2");
    check_model("resnet", "hidden=10,layers=6,kernel=2");
    test_counts();
    test_bad_configs();
    test_gmp_ls("gmp");
    test_gmp_ls("mp");
    test_big_hammerstein();
    return dd_test_done("test_models");
}
