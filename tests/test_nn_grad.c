/* Gradient checks of every layer in include/distdpd/nn.h against central finite
 * differences, in double precision (the _f64 instantiation of the same kernels).
 *
 * For each layer and several random small shapes: L = sum(out .* G) with a random
 * upstream gradient G; the analytic gradient (backward) of every input and every
 * parameter is compared with (L(x + e) - L(x - e)) / 2e, e = 1e-5, element by element.
 * The error of a tensor is max_i |analytic_i - numeric_i| / max_i |numeric_i|; it must be
 * below 1e-6 (typically 1e-9..1e-11). Each check also verifies that backward ADDS into its
 * outputs (a second call doubles them) and that the float32 path agrees with float64. */
#include <stdint.h>

#include "distdpd/nn.h"
#include "dd_test.h"

#define MAXV 10
#define FD_EPS 1e-5
#define FD_TOL 1e-6

/* A variable of the loss: values x (perturbed by the check) and their gradient g. */
typedef struct {
    const char *name;
    double *x;
    double *g;
    size_t n;
} fdvar;

typedef struct fdcase fdcase;
struct fdcase {
    char name[96];
    fdvar v[MAXV];
    int nv;
    double (*loss)(fdcase *c); /* forward only: sum(out .* G) */
    void (*grad)(fdcase *c);   /* forward + backward, adding into each v[i].g */
    void *ctx;
};

static double worst_err = 0;
static dd_rng rng;

static double urand(double a, double b) { return a + (b - a) * dd_rng_uniform(&rng); }
static double *vec(size_t n, double scale) {
    double *p = dd_calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++) p[i] = urand(-scale, scale);
    return p;
}
static double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Runs the check over every variable of c; returns the worst tensor error. */
static double fd_check(fdcase *c) {
    double worst = 0;
    double *first[MAXV];
    /* the count read once: c->grad / c->loss are calls the analyzer cannot see into */
    const int nv = c->nv;
    REQUIRE(nv >= 1 && nv <= MAXV, "%s: %d variables", c->name, nv);
    for (int k = 0; k < nv; k++) memset(c->v[k].g, 0, c->v[k].n * sizeof(double));
    c->grad(c);
    for (int k = 0; k < nv; k++) {
        first[k] = dd_calloc(c->v[k].n, sizeof(double));
        memcpy(first[k], c->v[k].g, c->v[k].n * sizeof(double));
    }
    /* accumulation: a second backward adds the same again */
    c->grad(c);
    for (int k = 0; k < nv; k++) {
        double e = 0, m = 0;
        for (size_t i = 0; i < c->v[k].n; i++) {
            e = fmax(e, fabs(c->v[k].g[i] - 2 * first[k][i]));
            m = fmax(m, fabs(first[k][i]));
        }
        CHECK(e <= 1e-12 * fmax(m, 1e-300), "%s: d%s does not accumulate (err %g)", c->name,
              c->v[k].name, e);
    }
    for (int k = 0; k < nv; k++) {
        fdvar *v = &c->v[k];
        double emax = 0, nmax = 0;
        for (size_t i = 0; i < v->n; i++) {
            double x0 = v->x[i];
            v->x[i] = x0 + FD_EPS;
            double lp = c->loss(c);
            v->x[i] = x0 - FD_EPS;
            double lm = c->loss(c);
            v->x[i] = x0;
            double num = (lp - lm) / (2 * FD_EPS);
            emax = fmax(emax, fabs(num - first[k][i]));
            nmax = fmax(nmax, fabs(num));
        }
        double rel = emax / fmax(nmax, 1e-12);
        CHECK(rel < FD_TOL && nmax > 0, "%s: d%s rel err %.3g (max |grad| %.3g)", c->name, v->name,
              rel, nmax);
        worst = fmax(worst, rel);
        dd_free(first[k]);
    }
    if (worst > worst_err) worst_err = worst;
    return worst;
}

static void free_vars(fdcase *c) {
    for (int k = 0; k < c->nv; k++) {
        dd_free(c->v[k].x);
        dd_free(c->v[k].g);
    }
}

static void add_var(fdcase *c, const char *name, size_t n, double scale) {
    c->v[c->nv].name = name;
    c->v[c->nv].x = vec(n, scale);
    c->v[c->nv].g = dd_calloc(n ? n : 1, sizeof(double));
    c->v[c->nv].n = n;
    c->nv++;
}

/* float copies for the f32-vs-f64 comparison */
static float *tof(const double *x, size_t n) {
    float *f = dd_calloc(n ? n : 1, sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}
static double f32_vs_f64(const float *a, const double *b, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return e / fmax(m, 1e-30);
}
static double worst_f32 = 0;
static void check_f32(const char *what, const float *a, const double *b, size_t n) {
    double r = f32_vs_f64(a, b, n);
    CHECK(r < 2e-5, "%s: float32 vs float64 rel err %.3g", what, r);
    if (r > worst_f32) worst_f32 = r;
}

/* ------------------------------------------------------------------ dense */
typedef struct {
    size_t N;
    int in, out, bias;
    double *G, *y;
} dense_ctx;

static double dense_loss(fdcase *c) {
    dense_ctx *d = c->ctx;
    dd_dense_forward_f64(d->y, c->v[0].x, c->v[1].x, d->bias ? c->v[2].x : NULL, d->N, d->in, d->out);
    return dot(d->y, d->G, d->N * (size_t)d->out);
}
static void dense_grad(fdcase *c) {
    dense_ctx *d = c->ctx;
    dense_loss(c);
    dd_dense_backward_f64(c->v[0].g, c->v[1].g, d->bias ? c->v[2].g : NULL, d->G, c->v[0].x,
                          c->v[1].x, d->N, d->in, d->out);
}

static void test_dense(size_t N, int in, int out, int bias) {
    fdcase c = {0};
    dense_ctx d = {N, in, out, bias, vec(N * (size_t)out, 1), vec(N * (size_t)out, 0)};
    snprintf(c.name, sizeof c.name, "dense N=%zu %d->%d bias=%d", N, in, out, bias);
    add_var(&c, "in", N * (size_t)in, 1);
    add_var(&c, "W", (size_t)out * (size_t)in, 0.7);
    if (bias) add_var(&c, "b", (size_t)out, 0.5);
    c.loss = dense_loss;
    c.grad = dense_grad;
    c.ctx = &d;
    double e = fd_check(&c);
    printf("  %-40s max rel err %.2e\n", c.name, e);

    /* float32 path: forward and input gradient */
    float *fi = tof(c.v[0].x, c.v[0].n), *fw = tof(c.v[1].x, c.v[1].n);
    float *fb = bias ? tof(c.v[2].x, c.v[2].n) : NULL;
    float *fy = dd_calloc(N * (size_t)out, sizeof(float)), *fG = tof(d.G, N * (size_t)out);
    float *fdi = dd_calloc(c.v[0].n, sizeof(float)), *fdw = dd_calloc(c.v[1].n, sizeof(float));
    dd_dense_forward(fy, fi, fw, fb, N, in, out);
    dense_loss(&c);
    check_f32("dense out", fy, d.y, N * (size_t)out);
    dd_dense_backward(fdi, fdw, NULL, fG, fi, fw, N, in, out);
    memset(c.v[0].g, 0, c.v[0].n * sizeof(double));
    memset(c.v[1].g, 0, c.v[1].n * sizeof(double));
    dd_dense_backward_f64(c.v[0].g, c.v[1].g, NULL, d.G, c.v[0].x, c.v[1].x, N, in, out);
    check_f32("dense din", fdi, c.v[0].g, c.v[0].n);
    check_f32("dense dW", fdw, c.v[1].g, c.v[1].n);
    dd_free(fi), dd_free(fw), dd_free(fb), dd_free(fy), dd_free(fG), dd_free(fdi), dd_free(fdw);
    dd_free(d.G), dd_free(d.y);
    free_vars(&c);
}

/* ------------------------------------------------------------------ GRU */
typedef struct {
    int B, T, D, H, bias, use_h0;
    double *G, *y, *ws;
} gru_ctx;

/* vars: 0 x, 1 w_ih, 2 w_hh, 3 h0, 4 b_ih, 5 b_hh */
static double gru_loss(fdcase *c) {
    gru_ctx *g = c->ctx;
    dd_gru_forward_f64(g->y, g->ws, c->v[0].x, g->use_h0 ? c->v[3].x : NULL, c->v[1].x, c->v[2].x,
                       g->bias ? c->v[4].x : NULL, g->bias ? c->v[5].x : NULL, g->B, g->T, g->D, g->H);
    return dot(g->y, g->G, (size_t)g->B * (size_t)g->T * (size_t)g->H);
}
static void gru_grad(fdcase *c) {
    gru_ctx *g = c->ctx;
    gru_loss(c);
    dd_gru_backward_f64(c->v[0].g, c->v[3].g, c->v[1].g, c->v[2].g, g->bias ? c->v[4].g : NULL,
                        g->bias ? c->v[5].g : NULL, g->G, g->ws, c->v[0].x, c->v[1].x, c->v[2].x,
                        g->B, g->T, g->D, g->H);
}

static void test_gru(int B, int T, int D, int H, int bias, int use_h0) {
    fdcase c = {0};
    size_t BTH = (size_t)B * T * H, G3 = 3 * (size_t)H;
    gru_ctx g = {B, T, D, H, bias, use_h0, vec(BTH, 1), vec(BTH, 0),
                 dd_calloc(dd_gru_workspace_size(B, T, D, H), sizeof(double))};
    snprintf(c.name, sizeof c.name, "gru B=%d T=%d D=%d H=%d bias=%d h0=%d", B, T, D, H, bias, use_h0);
    add_var(&c, "x", (size_t)B * T * D, 1);
    add_var(&c, "w_ih", G3 * D, 0.8);
    add_var(&c, "w_hh", G3 * H, 0.8);
    add_var(&c, "h0", (size_t)B * H, 0.9);
    if (bias) {
        add_var(&c, "b_ih", G3, 0.5);
        add_var(&c, "b_hh", G3, 0.5);
    }
    if (!use_h0) memset(c.v[3].x, 0, c.v[3].n * sizeof(double)); /* h0 = NULL means zeros */
    c.loss = gru_loss;
    c.grad = gru_grad;
    c.ctx = &g;
    if (!use_h0) {
        /* h0 is not an input then: check only the others, but dh0 must still be the
         * gradient at h0 = 0 (compare against a run that passes explicit zeros). */
        g.use_h0 = 1;
    }
    double e = fd_check(&c);
    printf("  %-40s max rel err %.2e\n", c.name, e);
    if (!use_h0) {
        double *y1 = vec(BTH, 0), *dh0a = vec((size_t)B * H, 0), *dh0b = vec((size_t)B * H, 0);
        gru_loss(&c); /* explicit zeros */
        memcpy(y1, g.y, BTH * sizeof(double));
        dd_gru_backward_f64(NULL, dh0a, NULL, NULL, NULL, NULL, g.G, g.ws, c.v[0].x, c.v[1].x,
                            c.v[2].x, B, T, D, H);
        g.use_h0 = 0;
        gru_loss(&c); /* h0 = NULL */
        dd_gru_backward_f64(NULL, dh0b, NULL, NULL, NULL, NULL, g.G, g.ws, c.v[0].x, c.v[1].x,
                            c.v[2].x, B, T, D, H);
        int same = memcmp(y1, g.y, BTH * sizeof(double)) == 0;
        same &= memcmp(dh0a, dh0b, (size_t)B * H * sizeof(double)) == 0;
        CHECK(same, "%s: h0 = NULL differs from explicit zeros", c.name);
        dd_free(y1), dd_free(dh0a), dd_free(dh0b);
    }

    /* float32 path: out, dx, dW_hh, db_hh, dh0 */
    float *fx = tof(c.v[0].x, c.v[0].n), *fwi = tof(c.v[1].x, c.v[1].n), *fwh = tof(c.v[2].x, c.v[2].n);
    float *fh0 = tof(c.v[3].x, c.v[3].n), *fbi = bias ? tof(c.v[4].x, G3) : NULL;
    float *fbh = bias ? tof(c.v[5].x, G3) : NULL, *fG = tof(g.G, BTH);
    float *fy = dd_calloc(BTH, sizeof(float));
    float *fws = dd_calloc(dd_gru_workspace_size(B, T, D, H), sizeof(float));
    float *fdx = dd_calloc(c.v[0].n, sizeof(float)), *fdwh = dd_calloc(c.v[2].n, sizeof(float));
    float *fdh0 = dd_calloc(c.v[3].n, sizeof(float)), *fdbh = dd_calloc(G3, sizeof(float));
    g.use_h0 = use_h0;
    dd_gru_forward(fy, fws, fx, use_h0 ? fh0 : NULL, fwi, fwh, fbi, fbh, B, T, D, H);
    dd_gru_backward(fdx, fdh0, NULL, fdwh, NULL, bias ? fdbh : NULL, fG, fws, fx, fwi, fwh, B, T, D, H);
    for (int k = 0; k < c.nv; k++) memset(c.v[k].g, 0, c.v[k].n * sizeof(double));
    gru_grad(&c);
    check_f32("gru out", fy, g.y, BTH);
    check_f32("gru dx", fdx, c.v[0].g, c.v[0].n);
    check_f32("gru dw_hh", fdwh, c.v[2].g, c.v[2].n);
    check_f32("gru dh0", fdh0, c.v[3].g, c.v[3].n);
    if (bias) check_f32("gru db_hh", fdbh, c.v[5].g, G3);
    dd_free(fx), dd_free(fwi), dd_free(fwh), dd_free(fh0), dd_free(fbi), dd_free(fbh), dd_free(fG);
    dd_free(fy), dd_free(fws), dd_free(fdx), dd_free(fdwh), dd_free(fdh0), dd_free(fdbh);
    dd_free(g.G), dd_free(g.y), dd_free(g.ws);
    free_vars(&c);
}

/* ------------------------------------------------------------------ LSTM */
typedef struct {
    int B, T, D, H, bias;
    double *G, *Gc, *y, *cn, *ws;
} lstm_ctx;

/* vars: 0 x, 1 w_ih, 2 w_hh, 3 h0, 4 c0, 5 b_ih, 6 b_hh */
static double lstm_loss(fdcase *c) {
    lstm_ctx *l = c->ctx;
    dd_lstm_forward_f64(l->y, l->cn, l->ws, c->v[0].x, c->v[3].x, c->v[4].x, c->v[1].x, c->v[2].x,
                        l->bias ? c->v[5].x : NULL, l->bias ? c->v[6].x : NULL, l->B, l->T, l->D, l->H);
    return dot(l->y, l->G, (size_t)l->B * l->T * l->H) + dot(l->cn, l->Gc, (size_t)l->B * l->H);
}
static void lstm_grad(fdcase *c) {
    lstm_ctx *l = c->ctx;
    lstm_loss(c);
    dd_lstm_backward_f64(c->v[0].g, c->v[3].g, c->v[4].g, c->v[1].g, c->v[2].g,
                         l->bias ? c->v[5].g : NULL, l->bias ? c->v[6].g : NULL, l->G, l->Gc, l->ws,
                         c->v[0].x, c->v[1].x, c->v[2].x, l->B, l->T, l->D, l->H);
}

static void test_lstm(int B, int T, int D, int H, int bias) {
    fdcase c = {0};
    size_t BTH = (size_t)B * T * H, G4 = 4 * (size_t)H;
    lstm_ctx l = {B, T, D, H, bias, vec(BTH, 1), vec((size_t)B * H, 1), vec(BTH, 0),
                  vec((size_t)B * H, 0), dd_calloc(dd_lstm_workspace_size(B, T, D, H), sizeof(double))};
    snprintf(c.name, sizeof c.name, "lstm B=%d T=%d D=%d H=%d bias=%d", B, T, D, H, bias);
    add_var(&c, "x", (size_t)B * T * D, 1);
    add_var(&c, "w_ih", G4 * D, 0.8);
    add_var(&c, "w_hh", G4 * H, 0.8);
    add_var(&c, "h0", (size_t)B * H, 0.9);
    add_var(&c, "c0", (size_t)B * H, 1.5);
    if (bias) {
        add_var(&c, "b_ih", G4, 0.5);
        add_var(&c, "b_hh", G4, 0.5);
    }
    c.loss = lstm_loss;
    c.grad = lstm_grad;
    c.ctx = &l;
    double e = fd_check(&c);
    printf("  %-40s max rel err %.2e\n", c.name, e);

    /* float32 path */
    float *fx = tof(c.v[0].x, c.v[0].n), *fwi = tof(c.v[1].x, c.v[1].n), *fwh = tof(c.v[2].x, c.v[2].n);
    float *fh0 = tof(c.v[3].x, c.v[3].n), *fc0 = tof(c.v[4].x, c.v[4].n);
    float *fbi = bias ? tof(c.v[5].x, G4) : NULL, *fbh = bias ? tof(c.v[6].x, G4) : NULL;
    float *fG = tof(l.G, BTH), *fGc = tof(l.Gc, (size_t)B * H);
    float *fy = dd_calloc(BTH, sizeof(float)), *fcn = dd_calloc((size_t)B * H, sizeof(float));
    float *fws = dd_calloc(dd_lstm_workspace_size(B, T, D, H), sizeof(float));
    float *fdx = dd_calloc(c.v[0].n, sizeof(float)), *fdwi = dd_calloc(c.v[1].n, sizeof(float));
    float *fdc0 = dd_calloc(c.v[4].n, sizeof(float));
    dd_lstm_forward(fy, fcn, fws, fx, fh0, fc0, fwi, fwh, fbi, fbh, B, T, D, H);
    dd_lstm_backward(fdx, NULL, fdc0, fdwi, NULL, NULL, NULL, fG, fGc, fws, fx, fwi, fwh, B, T, D, H);
    for (int k = 0; k < c.nv; k++) memset(c.v[k].g, 0, c.v[k].n * sizeof(double));
    lstm_grad(&c);
    check_f32("lstm out", fy, l.y, BTH);
    check_f32("lstm cn", fcn, l.cn, (size_t)B * H);
    check_f32("lstm dx", fdx, c.v[0].g, c.v[0].n);
    check_f32("lstm dw_ih", fdwi, c.v[1].g, c.v[1].n);
    check_f32("lstm dc0", fdc0, c.v[4].g, c.v[4].n);
    dd_free(fx), dd_free(fwi), dd_free(fwh), dd_free(fh0), dd_free(fc0), dd_free(fbi), dd_free(fbh);
    dd_free(fG), dd_free(fGc), dd_free(fy), dd_free(fcn), dd_free(fws), dd_free(fdx), dd_free(fdwi),
        dd_free(fdc0);
    dd_free(l.G), dd_free(l.Gc), dd_free(l.y), dd_free(l.cn), dd_free(l.ws);
    free_vars(&c);
}

/* ------------------------------------------------------------------ conv1d */
typedef struct {
    int B, T, ci, co, K, dil, groups, bias;
    double *G, *y;
} conv_ctx;

static double conv_loss(fdcase *c) {
    conv_ctx *v = c->ctx;
    dd_conv1d_forward_f64(v->y, c->v[0].x, c->v[1].x, v->bias ? c->v[2].x : NULL, v->B, v->T, v->ci,
                          v->co, v->K, v->dil, v->groups);
    return dot(v->y, v->G, (size_t)v->B * v->T * v->co);
}
static void conv_grad(fdcase *c) {
    conv_ctx *v = c->ctx;
    conv_loss(c);
    dd_conv1d_backward_f64(c->v[0].g, c->v[1].g, v->bias ? c->v[2].g : NULL, v->G, c->v[0].x,
                           c->v[1].x, v->B, v->T, v->ci, v->co, v->K, v->dil, v->groups);
}

static void test_conv(int B, int T, int ci, int co, int K, int dil, int groups, int bias) {
    fdcase c = {0};
    size_t n_out = (size_t)B * T * co;
    conv_ctx v = {B, T, ci, co, K, dil, groups, bias, vec(n_out, 1), vec(n_out, 0)};
    CHECK_OK(dd_conv1d_check(ci, co, K, dil, groups));
    snprintf(c.name, sizeof c.name, "conv1d B=%d T=%d %d->%d K=%d d=%d g=%d", B, T, ci, co, K, dil,
             groups);
    add_var(&c, "in", (size_t)B * T * ci, 1);
    add_var(&c, "W", (size_t)co * (ci / groups) * K, 0.7);
    if (bias) add_var(&c, "b", (size_t)co, 0.5);
    c.loss = conv_loss;
    c.grad = conv_grad;
    c.ctx = &v;
    double e = fd_check(&c);
    printf("  %-40s max rel err %.2e\n", c.name, e);

    /* causality: perturbing input step t0 changes no output before t0 */
    if (T >= 3) {
        conv_loss(&c);
        double *y0 = vec(n_out, 0);
        memcpy(y0, v.y, n_out * sizeof(double));
        int t0 = T / 2;
        for (int ch = 0; ch < ci; ch++) c.v[0].x[(size_t)t0 * ci + ch] += 1.0; /* batch 0 */
        conv_loss(&c);
        int causal = 1, changed = 0;
        for (int t = 0; t < T; t++)
            for (int o = 0; o < co; o++) {
                double dlt = fabs(v.y[(size_t)t * co + o] - y0[(size_t)t * co + o]);
                if (t < t0) causal &= dlt == 0;
                if (t == t0) changed |= dlt != 0;
            }
        CHECK(causal && changed, "%s: causality (causal %d, changed %d)", c.name, causal, changed);
        for (int ch = 0; ch < ci; ch++) c.v[0].x[(size_t)t0 * ci + ch] -= 1.0;
        dd_free(y0);
    }

    /* float32 path */
    float *fi = tof(c.v[0].x, c.v[0].n), *fw = tof(c.v[1].x, c.v[1].n);
    float *fb = bias ? tof(c.v[2].x, c.v[2].n) : NULL, *fG = tof(v.G, n_out);
    float *fy = dd_calloc(n_out, sizeof(float)), *fdi = dd_calloc(c.v[0].n, sizeof(float));
    float *fdw = dd_calloc(c.v[1].n, sizeof(float)), *fdb = dd_calloc((size_t)co, sizeof(float));
    dd_conv1d_forward(fy, fi, fw, fb, B, T, ci, co, K, dil, groups);
    dd_conv1d_backward(fdi, fdw, bias ? fdb : NULL, fG, fi, fw, B, T, ci, co, K, dil, groups);
    for (int k = 0; k < c.nv; k++) memset(c.v[k].g, 0, c.v[k].n * sizeof(double));
    conv_grad(&c);
    check_f32("conv out", fy, v.y, n_out);
    check_f32("conv din", fdi, c.v[0].g, c.v[0].n);
    check_f32("conv dW", fdw, c.v[1].g, c.v[1].n);
    if (bias) check_f32("conv db", fdb, c.v[2].g, (size_t)co);
    dd_free(fi), dd_free(fw), dd_free(fb), dd_free(fG), dd_free(fy), dd_free(fdi), dd_free(fdw),
        dd_free(fdb);
    dd_free(v.G), dd_free(v.y);
    free_vars(&c);
}

/* ------------------------------------------------------------------ elementwise */
typedef struct {
    dd_act act;
    size_t n;
    double *G, *y;
} act_ctx;

static double act_loss(fdcase *c) {
    act_ctx *a = c->ctx;
    dd_act_forward_f64(a->act, a->y, c->v[0].x, a->n);
    return dot(a->y, a->G, a->n);
}
static void act_grad(fdcase *c) {
    act_ctx *a = c->ctx;
    act_loss(c);
    dd_act_backward_f64(a->act, c->v[0].g, a->G, c->v[0].x, a->y, a->n);
}

static void test_act(dd_act act) {
    fdcase c = {0};
    const size_t n = 43; /* 5 blocks of 8 plus a tail */
    act_ctx a = {act, n, vec(n, 1), vec(n, 0)};
    snprintf(c.name, sizeof c.name, "act %s", dd_act_name(act));
    add_var(&c, "x", n, 5);
    /* keep away from the kinks of ReLU (0) and Hardswish (+-3) */
    for (size_t i = 0; i < n; i++) {
        double *x = &c.v[0].x[i];
        if (fabs(*x) < 0.01) *x += 0.05;
        if (fabs(fabs(*x) - 3) < 0.01) *x += 0.05;
    }
    c.loss = act_loss;
    c.grad = act_grad;
    c.ctx = &a;
    double e = fd_check(&c);
    printf("  %-40s max rel err %.2e\n", c.name, e);
    /* forward in place equals out of place; float32 agrees */
    double *ip = vec(n, 0);
    memcpy(ip, c.v[0].x, n * sizeof(double));
    dd_act_forward_f64(act, ip, ip, n);
    act_loss(&c);
    CHECK(memcmp(ip, a.y, n * sizeof(double)) == 0, "%s: in-place forward differs", c.name);
    float *fx = tof(c.v[0].x, n), *fy = dd_calloc(n, sizeof(float)), *fG = tof(a.G, n);
    float *fdx = dd_calloc(n, sizeof(float));
    dd_act_forward(act, fy, fx, n);
    dd_act_backward(act, fdx, fG, fx, fy, n);
    memset(c.v[0].g, 0, n * sizeof(double));
    act_grad(&c);
    check_f32("act out", fy, a.y, n);
    check_f32("act din", fdx, c.v[0].g, n);
    dd_free(ip), dd_free(fx), dd_free(fy), dd_free(fG), dd_free(fdx);
    dd_free(a.G), dd_free(a.y);
    free_vars(&c);
}

/* add and concat in one small graph: y = concat(a + b, b) */
typedef struct {
    size_t N;
    int ca, cb;
    double *G, *s, *y;
} ac_ctx;

static double ac_loss(fdcase *c) {
    ac_ctx *a = c->ctx;
    dd_add_forward_f64(a->s, c->v[0].x, c->v[1].x, a->N * (size_t)a->ca);
    /* second concat input: the first cb columns of b, viewed as (N, cb) with cb == ca */
    dd_concat_forward_f64(a->y, a->s, c->v[1].x, a->N, a->ca, a->cb);
    return dot(a->y, a->G, a->N * (size_t)(a->ca + a->cb));
}
static void ac_grad(fdcase *c) {
    ac_ctx *a = c->ctx;
    ac_loss(c);
    double *ds = dd_calloc(a->N * (size_t)a->ca, sizeof(double));
    dd_concat_backward_f64(ds, c->v[1].g, a->G, a->N, a->ca, a->cb);
    dd_add_backward_f64(c->v[0].g, c->v[1].g, ds, a->N * (size_t)a->ca);
    dd_free(ds);
}

static void test_add_concat(void) {
    fdcase c = {0};
    const size_t N = 7;
    const int C = 3;
    ac_ctx a = {N, C, C, vec(N * 2 * C, 1), vec(N * C, 0), vec(N * 2 * C, 0)};
    snprintf(c.name, sizeof c.name, "add + concat N=%zu C=%d", N, C);
    add_var(&c, "a", N * C, 1);
    add_var(&c, "b", N * C, 1);
    c.loss = ac_loss;
    c.grad = ac_grad;
    c.ctx = &a;
    double e = fd_check(&c);
    printf("  %-40s max rel err %.2e\n", c.name, e);
    dd_free(a.G), dd_free(a.s), dd_free(a.y);
    free_vars(&c);
}

/* I/Q features */
typedef struct {
    size_t N;
    double *G, *y;
} iq_ctx;

static double iq_loss(fdcase *c) {
    iq_ctx *q = c->ctx;
    dd_iqfeat_forward_f64(q->y, c->v[0].x, q->N);
    return dot(q->y, q->G, q->N * DD_IQFEAT_DIM);
}
static void iq_grad(fdcase *c) {
    iq_ctx *q = c->ctx;
    iq_loss(c);
    dd_iqfeat_backward_f64(c->v[0].g, q->G, c->v[0].x, q->N);
}

static void test_iqfeat(void) {
    fdcase c = {0};
    const size_t N = 20;
    iq_ctx q = {N, vec(N * DD_IQFEAT_DIM, 1), vec(N * DD_IQFEAT_DIM, 0)};
    snprintf(c.name, sizeof c.name, "iqfeat N=%zu", N);
    add_var(&c, "iq", 2 * N, 1);
    for (size_t i = 0; i < N; i++) /* keep |x| >= 0.05 */
        if (hypot(c.v[0].x[2 * i], c.v[0].x[2 * i + 1]) < 0.05) c.v[0].x[2 * i] = 0.3;
    c.loss = iq_loss;
    c.grad = iq_grad;
    c.ctx = &q;
    double e = fd_check(&c);
    printf("  %-40s max rel err %.2e\n", c.name, e);

    /* analytic values: 3-4-5 triangle */
    double x[2] = {-3, 4}, y[6], gx[2] = {0, 0};
    dd_iqfeat_forward_f64(y, x, 1);
    CHECK(y[0] == -3 && y[1] == 4 && y[2] == 5 && y[3] == 125, "iqfeat r, r^3");
    CHECK_NEAR(y[4], 0.8, 1e-15);
    CHECK_NEAR(y[5], -0.6, 1e-15);
    /* |x| = 0: features [0, 0, 0, 0, 0, 1], gradient only through I and Q, all finite */
    double z[2] = {0, 0}, gz[2] = {0, 0}, g1[6] = {1, 2, 3, 4, 5, 6};
    dd_iqfeat_forward_f64(y, z, 1);
    CHECK(y[2] == 0 && y[3] == 0 && y[4] == 0 && y[5] == 1, "iqfeat at 0: %g %g %g %g", y[2], y[3],
          y[4], y[5]);
    dd_iqfeat_backward_f64(gz, g1, z, 1);
    CHECK(gz[0] == 1 && gz[1] == 2, "iqfeat grad at 0: %g %g", gz[0], gz[1]);
    float fz[2] = {0, 0}, fg[2] = {0, 0}, fy[6], fg1[6] = {1, 2, 3, 4, 5, 6};
    dd_iqfeat_forward(fy, fz, 1);
    dd_iqfeat_backward(fg, fg1, fz, 1);
    CHECK(fy[5] == 1 && fg[0] == 1 && fg[1] == 2 && isfinite(fg[0]), "float iqfeat at 0");
    (void)gx;

    float *fx = tof(c.v[0].x, 2 * N), *fo = dd_calloc(N * DD_IQFEAT_DIM, sizeof(float));
    float *fG = tof(q.G, N * DD_IQFEAT_DIM), *fd = dd_calloc(2 * N, sizeof(float));
    dd_iqfeat_forward(fo, fx, N);
    dd_iqfeat_backward(fd, fG, fx, N);
    memset(c.v[0].g, 0, 2 * N * sizeof(double));
    iq_grad(&c);
    check_f32("iqfeat out", fo, q.y, N * DD_IQFEAT_DIM);
    check_f32("iqfeat din", fd, c.v[0].g, 2 * N);
    dd_free(fx), dd_free(fo), dd_free(fG), dd_free(fd);
    dd_free(q.G), dd_free(q.y);
    free_vars(&c);
}

static void test_act_names(void) {
    dd_act a;
    for (int i = 0; i <= DD_ACT_HARDSWISH; i++) {
        CHECK_OK(dd_act_parse(dd_act_name((dd_act)i), &a));
        CHECK((int)a == i, "round trip %d", i);
    }
    CHECK_ERR(dd_act_parse("gelu", &a), DD_ERR_ARG, "'gelu'");
    CHECK(strcmp(dd_act_name((dd_act)42), "?") == 0, "unknown name");
    /* Hardswish and ReLU conventions at the kinks (as torch) */
    double x[5] = {-3, 0, 3, -3.5, 3.5}, y[5], d[5] = {0}, one[5] = {1, 1, 1, 1, 1};
    dd_act_forward_f64(DD_ACT_HARDSWISH, y, x, 5);
    dd_act_backward_f64(DD_ACT_HARDSWISH, d, one, x, y, 5);
    CHECK(y[0] == 0 && y[1] == 0 && y[2] == 3 && y[3] == 0 && y[4] == 3.5, "hardswish values");
    CHECK(d[0] == -0.5 && d[1] == 0.5 && d[2] == 1.5 && d[3] == 0 && d[4] == 1, "hardswish grads");
    memset(d, 0, sizeof d);
    dd_act_backward_f64(DD_ACT_RELU, d, one, x, NULL, 5);
    CHECK(d[1] == 0 && d[2] == 1 && d[0] == 0, "relu grad at 0 must be 0");
}

/* The float32 tanh / sigmoid (vectorised polynomial kernels, scalar tails) against double
 * libm on a fine grid, and their behaviour at infinities and NaN. */
static void test_fast_math(void) {
    const size_t n = 400001; /* step 1e-4 over [-20, 20]; not a multiple of 8 */
    float *x = dd_calloc(n, sizeof(float)), *t = dd_calloc(n, sizeof(float));
    float *s = dd_calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(-20.0 + 1e-4 * (double)i);
    dd_act_forward(DD_ACT_TANH, t, x, n);
    dd_act_forward(DD_ACT_SIGMOID, s, x, n);
    double et = 0, es = 0;
    for (size_t i = 0; i < n; i++) {
        double xd = x[i], td = tanh(xd), sd = 1 / (1 + exp(-xd));
        et = fmax(et, fabs(t[i] - td));
        es = fmax(es, fabs(s[i] - sd) / sd);
    }
    printf("  float32 tanh max abs err %.2e, sigmoid max rel err %.2e\n", et, es);
    CHECK(et < 5e-7, "float tanh abs err %.3g", et);
    CHECK(es < 3e-7, "float sigmoid rel err %.3g", es);
    /* specials, in a vector block (first 8) and in the tail (last 3) */
    float sp[11] = {INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 88.5f, -88.5f, 0.0f, NAN, INFINITY, -1e30f};
    float ot[11], os[11];
    dd_act_forward(DD_ACT_TANH, ot, sp, 11);
    dd_act_forward(DD_ACT_SIGMOID, os, sp, 11);
    CHECK(ot[0] == 1 && ot[1] == -1 && isnan(ot[2]) && ot[3] == 1 && ot[4] == -1 && ot[7] == 0,
          "tanh specials %g %g %g %g %g %g", ot[0], ot[1], ot[2], ot[3], ot[4], ot[7]);
    CHECK(isnan(ot[8]) && ot[9] == 1 && ot[10] == -1, "tanh specials (tail)");
    CHECK(os[0] == 1 && os[1] < 1e-37 && os[1] >= 0 && isnan(os[2]) && os[3] == 1 && os[4] < 1e-37 &&
              os[5] == 1 && os[6] < 1e-37 && os[7] == 0.5f,
          "sigmoid specials %g %g %g %g %g %g %g %g", os[0], os[1], os[2], os[3], os[4], os[5], os[6],
          os[7]);
    CHECK(isnan(os[8]) && os[9] == 1 && os[10] < 1e-37, "sigmoid specials (tail)");
    dd_free(x), dd_free(t), dd_free(s);
}

int main(void) {
    dd_rng_seed(&rng, 20240601);
    printf("finite-difference checks (double, eps %.0e, tol %.0e):\n", FD_EPS, FD_TOL);
    test_dense(6, 4, 3, 1);
    test_dense(5, 23, 2, 0);
    test_dense(1, 1, 1, 1);
    for (int rep = 0; rep < 3; rep++) { /* random small shapes, drawn into locals first */
        size_t n = 1 + dd_rng_below(&rng, 8);
        int in = 1 + (int)dd_rng_below(&rng, 6), out = 1 + (int)dd_rng_below(&rng, 6);
        test_dense(n, in, out, (int)dd_rng_below(&rng, 2));
    }

    test_gru(2, 5, 3, 4, 1, 1);
    test_gru(3, 7, 2, 5, 1, 0);
    test_gru(1, 1, 1, 1, 1, 1);
    test_gru(2, 4, 2, 3, 0, 1);
    test_gru(19, 4, 2, 7, 1, 1); /* B >= 8: vectorised float path plus tail */
    for (int rep = 0; rep < 2; rep++) {
        int B = 1 + (int)dd_rng_below(&rng, 3), T = 1 + (int)dd_rng_below(&rng, 8);
        int D = 1 + (int)dd_rng_below(&rng, 4), H = 1 + (int)dd_rng_below(&rng, 6);
        test_gru(B, T, D, H, 1, 1);
    }

    test_lstm(2, 5, 3, 4, 1);
    test_lstm(1, 1, 1, 1, 1);
    test_lstm(2, 4, 2, 3, 0);
    test_lstm(19, 4, 2, 5, 1);
    for (int rep = 0; rep < 2; rep++) {
        int B = 1 + (int)dd_rng_below(&rng, 3), T = 1 + (int)dd_rng_below(&rng, 8);
        int D = 1 + (int)dd_rng_below(&rng, 4), H = 1 + (int)dd_rng_below(&rng, 6);
        test_lstm(B, T, D, H, 1);
    }

    test_conv(2, 9, 3, 4, 3, 2, 1, 1);  /* dilated */
    test_conv(2, 12, 4, 4, 5, 2, 4, 1); /* depthwise */
    test_conv(2, 10, 4, 6, 2, 3, 2, 1); /* grouped */
    test_conv(2, 6, 3, 5, 1, 1, 1, 1);  /* pointwise (dense path) */
    test_conv(1, 6, 4, 8, 1, 1, 4, 0);  /* grouped 1x1, channel multiplier 2, no bias */
    test_conv(2, 3, 2, 2, 4, 2, 1, 1);  /* receptive field longer than the sequence */
    test_conv(2, 7, 11, 11, 3, 2, 11, 1); /* depthwise, C >= 8: vectorised channel loops */
    test_conv(1, 3, 220, 220, 5, 1, 220, 1); /* depthwise with C*K > 1024: generic path */
    for (int rep = 0; rep < 3; rep++) {
        int g = 1 + (int)dd_rng_below(&rng, 3);
        int B = 1 + (int)dd_rng_below(&rng, 3), T = 1 + (int)dd_rng_below(&rng, 10);
        int ci = g * (1 + (int)dd_rng_below(&rng, 3)), co = g * (1 + (int)dd_rng_below(&rng, 3));
        int K = 1 + (int)dd_rng_below(&rng, 4), dil = 1 + (int)dd_rng_below(&rng, 3);
        test_conv(B, T, ci, co, K, dil, g, (int)dd_rng_below(&rng, 2));
    }

    for (int a = 0; a <= DD_ACT_HARDSWISH; a++) test_act((dd_act)a);
    test_add_concat();
    test_iqfeat();
    test_act_names();
    test_fast_math();
    printf("worst finite-difference rel err %.2e; worst float32-vs-float64 rel err %.2e\n",
           worst_err, worst_f32);
    return dd_test_done("test_nn_grad");
}
