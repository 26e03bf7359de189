/* The float32 fast paths of src/nn (simd.h: fused GRU recurrence, long-and-thin gradient
 * products, small dense layers, depthwise and small full causal convolutions, ReLU and
 * Hardswish) at every SIMD level this CPU supports, against the float64 instantiation of
 * the same layers (the path test_nn_grad verifies by finite differences):
 * - every output and gradient within 2e-5 of the float64 result, relative to the
 *   tensor's largest magnitude, over shapes that exercise whole vectors, masked tails,
 *   register-block remainders, frame edges of dilated taps and the OpenBLAS fallbacks;
 * - backward adds into its outputs (a second call doubles them);
 * - invariants the kernels promise: the GRU output of a frame is bit-identical whether it
 *   runs alone or inside a batch, and AVX2 and AVX-512 give bit-identical GRU outputs and
 *   convolution outputs (fused recurrence, conv kernels); every frame's GRU output and
 *   dL/dh0 at 1 .. 65 columns (the register blocks chosen by the column count) are its
 *   bits alone, at every fused level (memcmp); ReLU and Hardswish are
 *   bit-identical to the generic loops (including -3, 3, infinities and NaN);
 * - every case under each route (simd.h): AUTO (the measured thresholds), FAST (the
 *   kernels wherever they apply) and BLAS (OpenBLAS wherever it applies: sgemm paths of
 *   the GRU, im2col convolutions, dense layers);
 * - dd_nn_simd_set clamps to the supported level;
 * - threads (distdpd/nn.h): the GRU layer, the dense layers and the convolutions on 2 and 3
 *   threads give one thread's bits;
 * - the fused depthwise + Hardswish (+ residual) layer (tcn's) and the fused convolution
 *   + Hardswish (tcn's stem) give the unfused layers' bits, forward and backward, at every
 *   level, route and thread count;
 * - the gru model's last layer and head with their gradient feature-major (nn/nn_fm.h):
 *   dd_dense_backward_dfm (din written or added, dW, db) and dd_gru_backward_dfm (float
 *   and float64) give the (B, T, C) layers' bits (memcmp) at every level, route and thread
 *   count.
 * On a CPU without AVX2 only the generic level runs (the checks still apply). */
#include <stdint.h>

#include "distdpd/nn.h"
#include "dd_test.h"
#include "nn/nn_fm.h"
#include "nn/simd.h"

static dd_rng rng;

static double *dvec(size_t n, double s) {
    double *p = dd_calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++) p[i] = (2 * dd_rng_uniform(&rng) - 1) * s;
    return p;
}
static float *tof(const double *x, size_t n) {
    float *f = dd_calloc(n ? n : 1, sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}
static float *fzero(size_t n) { return dd_calloc(n ? n : 1, sizeof(float)); }
static double *dzero(size_t n) { return dd_calloc(n ? n : 1, sizeof(double)); }

static double worst;
/* max |a - b| / max |b| */
static double relerr(const float *a, const double *b, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return e / fmax(m, 1e-30);
}
/* ctx: the case and level, for the message */
#define CHECK_CLOSE(what, a, b, n, ctx)                                              \
    do {                                                                             \
        double r_ = relerr((a), (b), (n));                                           \
        if (r_ > worst) worst = r_;                                                  \
        CHECK(r_ < 2e-5, "%s: float32 vs float64 rel err %.3g (%s)", what, r_, ctx); \
    } while (0)
/* b == 2 a within float rounding */
static double doubled(const float *a, const float *b, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)b[i] - 2.0 * a[i]));
        m = fmax(m, fabs((double)a[i]));
    }
    return e / fmax(m, 1e-30);
}

static int levels[3], nlevels;
/* every case runs under each route: the measured thresholds, the kernels wherever they
 * apply, OpenBLAS wherever it applies */
static const int routes[3] = {DD_NN_ROUTE_AUTO, DD_NN_ROUTE_FAST, DD_NN_ROUTE_BLAS};

/* ------------------------------------------------------------------ GRU */

typedef struct {
    int B, T, D, H, bias, h0;
} gru_case;

/* Runs the float layer at the current level; results in the caller's arrays. */
static void gru_run_f(const gru_case *c, const float *x, const float *h0, const float *wi,
                      const float *wh, const float *bi, const float *bh, const float *G, float *y,
                      float *dx, float *dh0, float *dwi, float *dwh, float *dbi, float *dbh) {
    float *ws = fzero(dd_gru_workspace_size(c->B, c->T, c->D, c->H));
    dd_gru_forward(y, ws, x, c->h0 ? h0 : NULL, wi, wh, c->bias ? bi : NULL, c->bias ? bh : NULL,
                   c->B, c->T, c->D, c->H);
    dd_gru_backward(dx, c->h0 ? dh0 : NULL, dwi, dwh, c->bias ? dbi : NULL, c->bias ? dbh : NULL, G,
                    ws, x, wi, wh, c->B, c->T, c->D, c->H);
    dd_free(ws);
}

static void test_gru(gru_case c) {
    const size_t B = (size_t)c.B, T = (size_t)c.T, D = (size_t)c.D, H = (size_t)c.H;
    const size_t nx = B * T * D, ny = B * T * H, G3 = 3 * H;
    const double k = 1 / sqrt((double)H);
    double *x = dvec(nx, 1), *h0 = dvec(B * H, 0.5), *wi = dvec(G3 * D, k), *wh = dvec(G3 * H, k);
    double *bi = dvec(G3, k), *bh = dvec(G3, k), *G = dvec(ny, 1);
    /* float64 reference */
    double *y = dzero(ny), *dx = dzero(nx), *dh0 = dzero(B * H), *dwi = dzero(G3 * D);
    double *dwh = dzero(G3 * H), *dbi = dzero(G3), *dbh = dzero(G3);
    double *ws = dzero(dd_gru_workspace_size(c.B, c.T, c.D, c.H));
    dd_gru_forward_f64(y, ws, x, c.h0 ? h0 : NULL, wi, wh, c.bias ? bi : NULL, c.bias ? bh : NULL,
                       c.B, c.T, c.D, c.H);
    dd_gru_backward_f64(dx, c.h0 ? dh0 : NULL, dwi, dwh, c.bias ? dbi : NULL, c.bias ? dbh : NULL, G,
                        ws, x, wi, wh, c.B, c.T, c.D, c.H);
    float *fx = tof(x, nx), *fh0 = tof(h0, B * H), *fwi = tof(wi, G3 * D), *fwh = tof(wh, G3 * H);
    float *fbi = tof(bi, G3), *fbh = tof(bh, G3), *fG = tof(G, ny);
    float *yl[3] = {0}; /* the fast route's output per level, compared below */
    const int nl = nlevels; /* read once: the loops must agree (the calls are opaque) */
    char name[96];
    snprintf(name, sizeof name, "gru B=%d T=%d D=%d H=%d bias=%d h0=%d", c.B, c.T, c.D, c.H, c.bias, c.h0);
    for (int ri = 0; ri < 3; ri++)
    for (int li = 0; li < nl; li++) {
        const int route = routes[ri];
        dd_nn_route_set(route);
        dd_nn_simd_set(levels[li]);
        float *fy = fzero(ny), *fdx = fzero(nx), *fdh0 = fzero(B * H), *fdwi = fzero(G3 * D);
        float *fdwh = fzero(G3 * H), *fdbi = fzero(G3), *fdbh = fzero(G3);
        gru_run_f(&c, fx, fh0, fwi, fwh, fbi, fbh, fG, fy, fdx, fdh0, fdwi, fdwh, fdbi, fdbh);
        char lv[32];
        snprintf(lv, sizeof lv, "%s, route %s", dd_nn_simd_name(levels[li]), dd_nn_route_name(route));
        char ctx[160];
        snprintf(ctx, sizeof ctx, "%s, %s", name, lv);
        CHECK_CLOSE("gru out", fy, y, ny, ctx);
        CHECK_CLOSE("gru dx", fdx, dx, nx, ctx);
        CHECK_CLOSE("gru dW_ih", fdwi, dwi, G3 * D, ctx);
        CHECK_CLOSE("gru dW_hh", fdwh, dwh, G3 * H, ctx);
        if (c.h0) CHECK_CLOSE("gru dh0", fdh0, dh0, B * H, ctx);
        if (c.bias) {
            CHECK_CLOSE("gru db_ih", fdbi, dbi, G3, ctx);
            CHECK_CLOSE("gru db_hh", fdbh, dbh, G3, ctx);
        }
        /* backward adds: a second run doubles every gradient */
        float *y2 = fzero(ny), *dx2 = fzero(nx), *dh02 = fzero(B * H);
        float *dwi2 = fzero(G3 * D), *dwh2 = fzero(G3 * H), *dbi2 = fzero(G3), *dbh2 = fzero(G3);
        memcpy(dx2, fdx, nx * sizeof(float));
        memcpy(dh02, fdh0, B * H * sizeof(float));
        memcpy(dwi2, fdwi, G3 * D * sizeof(float));
        memcpy(dwh2, fdwh, G3 * H * sizeof(float));
        memcpy(dbi2, fdbi, G3 * sizeof(float));
        memcpy(dbh2, fdbh, G3 * sizeof(float));
        gru_run_f(&c, fx, fh0, fwi, fwh, fbi, fbh, fG, y2, dx2, dh02, dwi2, dwh2, dbi2, dbh2);
        double e = fmax(fmax(doubled(fdx, dx2, nx), doubled(fdwi, dwi2, G3 * D)), doubled(fdwh, dwh2, G3 * H));
        if (c.h0) e = fmax(e, doubled(fdh0, dh02, B * H));
        if (c.bias) e = fmax(e, fmax(doubled(fdbi, dbi2, G3), doubled(fdbh, dbh2, G3)));
        CHECK(e < 1e-5, "%s, %s: backward does not add (err %.3g)", name, lv, e);
        CHECK(memcmp(fy, y2, ny * sizeof(float)) == 0, "%s, %s: forward not deterministic", name, lv);
        /* 2 and 3 threads give one thread's bits (frames / gradient rows split) */
        for (int nt = 2; nt <= 3 && dd_nn_threads_set(nt) == nt; nt++) {
            float *ty = fzero(ny), *tdx = fzero(nx), *tdh0 = fzero(B * H), *tdwi = fzero(G3 * D);
            float *tdwh = fzero(G3 * H), *tdbi = fzero(G3), *tdbh = fzero(G3);
            gru_run_f(&c, fx, fh0, fwi, fwh, fbi, fbh, fG, ty, tdx, tdh0, tdwi, tdwh, tdbi, tdbh);
            CHECK(memcmp(fy, ty, ny * sizeof(float)) == 0 && memcmp(fdx, tdx, nx * sizeof(float)) == 0 &&
                      memcmp(fdh0, tdh0, B * H * sizeof(float)) == 0 &&
                      memcmp(fdwi, tdwi, G3 * D * sizeof(float)) == 0 &&
                      memcmp(fdwh, tdwh, G3 * H * sizeof(float)) == 0 &&
                      memcmp(fdbi, tdbi, G3 * sizeof(float)) == 0 && memcmp(fdbh, tdbh, G3 * sizeof(float)) == 0,
                  "%s, %s: %d threads differ from one", name, lv, nt);
            dd_free(ty), dd_free(tdx), dd_free(tdh0), dd_free(tdwi), dd_free(tdwh), dd_free(tdbi), dd_free(tdbh);
        }
        dd_nn_threads_set(1);
        dd_free(y2), dd_free(dx2), dd_free(dh02), dd_free(dwi2), dd_free(dwh2);
        dd_free(dbi2), dd_free(dbh2);
        dd_free(fdx), dd_free(fdh0), dd_free(fdwi), dd_free(fdwh), dd_free(fdbi), dd_free(fdbh);
        /* one frame alone gives the same bits as inside the batch (fused recurrence) */
        if (dd_nn_gru_fused(levels[li], H) && B > 1) {
            const size_t b = B / 2;
            float *y1 = fzero(T * H), *ws1 = fzero(dd_gru_workspace_size(1, c.T, c.D, c.H));
            dd_gru_forward(y1, ws1, fx + b * T * D, c.h0 ? fh0 + b * H : NULL, fwi, fwh,
                           c.bias ? fbi : NULL, c.bias ? fbh : NULL, 1, c.T, c.D, c.H);
            CHECK(memcmp(y1, fy + b * T * H, T * H * sizeof(float)) == 0,
                  "%s, %s: frame %zu alone differs from the batch", name, lv, b);
            dd_free(y1), dd_free(ws1);
        }
        if (route == DD_NN_ROUTE_FAST) yl[li] = fy;
        else dd_free(fy);
    }
    dd_nn_route_set(DD_NN_ROUTE_AUTO);
    /* AVX2 and AVX-512 agree bit for bit on the fused recurrence */
    for (int a = 0; a < nl; a++)
        for (int b = a + 1; b < nl; b++)
            if (levels[a] > DD_SIMD_GENERIC && levels[b] > DD_SIMD_GENERIC)
                CHECK(memcmp(yl[a], yl[b], ny * sizeof(float)) == 0, "%s: %s and %s outputs differ", name,
                      dd_nn_simd_name(levels[a]), dd_nn_simd_name(levels[b]));
    for (int li = 0; li < nl; li++) dd_free(yl[li]);
    dd_free(x), dd_free(h0), dd_free(wi), dd_free(wh), dd_free(bi), dd_free(bh), dd_free(G);
    dd_free(y), dd_free(dx), dd_free(dh0), dd_free(dwi), dd_free(dwh), dd_free(dbi), dd_free(dbh);
    dd_free(ws), dd_free(fx), dd_free(fh0), dd_free(fwi), dd_free(fwh), dd_free(fbi), dd_free(fbh);
    dd_free(fG);
}

/* The fused GRU kernels' register blocks depend on how many columns (frames) a call has
 * (gru_fast_impl.h: wider unit / row blocks for 1-2 vectors of columns, e.g. the
 * trainer's 32-frame chunks at AVX-512) and on the vector width; no sum's order may.
 * Every frame's output and dL/dh0 (the recurrence backward: cell backward and W_hh^T
 * blocks at every step) at B = 1 .. 65 columns and at each fused level must be the bits
 * of that frame run alone at the first fused level (memcmp). */
static void test_gru_blocks(int T, int D, int H) {
    const size_t NB = 65, Tz = (size_t)T, Dz = (size_t)D, Hz = (size_t)H, G3 = 3 * Hz;
    const double k = 1 / sqrt((double)H);
    double *x = dvec(NB * Tz * Dz, 1), *h0 = dvec(NB * Hz, 0.5), *wi = dvec(G3 * Dz, k);
    double *wh = dvec(G3 * Hz, k), *bi = dvec(G3, k), *bh = dvec(G3, k), *G = dvec(NB * Tz * Hz, 1);
    float *fx = tof(x, NB * Tz * Dz), *fh0 = tof(h0, NB * Hz), *fwi = tof(wi, G3 * Dz);
    float *fwh = tof(wh, G3 * Hz), *fbi = tof(bi, G3), *fbh = tof(bh, G3), *fG = tof(G, NB * Tz * Hz);
    float *ry = fzero(NB * Tz * Hz), *rdh0 = fzero(NB * Hz); /* each frame alone */
    const int nb[] = {1, 15, 16, 17, 32, 33, 64, 65};
    int ref = 0, checked = 0;
    dd_nn_route_set(DD_NN_ROUTE_FAST);
    for (int li = 0; li < nlevels; li++) {
        if (!dd_nn_gru_fused(levels[li], Hz)) continue;
        dd_nn_simd_set(levels[li]);
        for (size_t bi_ = 0; bi_ < (ref ? sizeof nb / sizeof nb[0] : NB); bi_++) {
            /* the reference pass: frame b alone (B = 1) at the first fused level */
            const size_t B = ref ? (size_t)nb[bi_] : 1, f0 = ref ? 0 : bi_;
            const gru_case c = {(int)B, T, D, H, 1, 1};
            float *y = fzero(B * Tz * Hz), *dx = fzero(B * Tz * Dz), *dh0 = fzero(B * Hz);
            float *dwi = fzero(G3 * Dz), *dwh = fzero(G3 * Hz), *dbi = fzero(G3), *dbh = fzero(G3);
            gru_run_f(&c, fx + f0 * Tz * Dz, fh0 + f0 * Hz, fwi, fwh, fbi, fbh, fG + f0 * Tz * Hz, y, dx,
                      dh0, dwi, dwh, dbi, dbh);
            if (!ref) {
                memcpy(ry + f0 * Tz * Hz, y, Tz * Hz * sizeof(float));
                memcpy(rdh0 + f0 * Hz, dh0, Hz * sizeof(float));
            } else {
                CHECK(memcmp(y, ry, B * Tz * Hz * sizeof(float)) == 0,
                      "gru T=%d D=%d H=%d, %s: output of B=%zu differs from the frames alone", T, D, H,
                      dd_nn_simd_name(levels[li]), B);
                CHECK(memcmp(dh0, rdh0, B * Hz * sizeof(float)) == 0,
                      "gru T=%d D=%d H=%d, %s: dh0 of B=%zu differs from the frames alone", T, D, H,
                      dd_nn_simd_name(levels[li]), B);
                checked++;
            }
            dd_free(y), dd_free(dx), dd_free(dh0), dd_free(dwi), dd_free(dwh), dd_free(dbi), dd_free(dbh);
        }
        if (!ref) li--; /* the first fused level again, now batched */
        ref = 1;
    }
    printf("gru blocks T=%d D=%d H=%d: %d batched runs compared with the frames alone\n", T, D, H, checked);
    dd_nn_route_set(DD_NN_ROUTE_AUTO);
    dd_free(x), dd_free(h0), dd_free(wi), dd_free(wh), dd_free(bi), dd_free(bh), dd_free(G);
    dd_free(fx), dd_free(fh0), dd_free(fwi), dd_free(fwh), dd_free(fbi), dd_free(fbh), dd_free(fG);
    dd_free(ry), dd_free(rdh0);
}

/* The fused backward's weight gradients run chunk by chunk inside the time loop
 * (dd_nn_gru_wgrad_steps, default) give the bits of one product after it (steps off), on
 * 1-3 threads, also when a chunk boundary falls inside a step or a step spans chunks, and
 * when the gradients start non-zero (the backward adds). */
static void test_gru_wgrad_steps(int B, int T, int D, int H, int bias) {
    const size_t Bz = (size_t)B, Tz = (size_t)T, Dz = (size_t)D, Hz = (size_t)H, G3 = 3 * Hz;
    const size_t nx = Bz * Tz * Dz, ny = Bz * Tz * Hz;
    const double k = 1 / sqrt((double)H);
    double *x = dvec(nx, 1), *h0 = dvec(Bz * Hz, 0.5), *wi = dvec(G3 * Dz, k), *wh = dvec(G3 * Hz, k);
    double *bi = dvec(G3, k), *bh = dvec(G3, k), *G = dvec(ny, 1);
    double *g0 = dvec(2 * G3 * (Dz + Hz + 1), 0.1); /* starting gradients */
    float *fx = tof(x, nx), *fh0 = tof(h0, Bz * Hz), *fwi = tof(wi, G3 * Dz), *fwh = tof(wh, G3 * Hz);
    float *fbi = tof(bi, G3), *fbh = tof(bh, G3), *fG = tof(G, ny), *fg0 = tof(g0, G3 * (Dz + Hz + 2));
    const size_t ng = G3 * (Dz + Hz + 2); /* dW_ih, dW_hh, db_ih, db_hh in one array */
    const gru_case c = {B, T, D, H, bias, 1};
    int checked = 0;
    dd_nn_route_set(DD_NN_ROUTE_FAST);
    for (int li = 0; li < nlevels; li++) {
        if (!dd_nn_gru_fused(levels[li], Hz)) continue;
        dd_nn_simd_set(levels[li]);
        float *ref = NULL;
        for (int run = 0; run < 4; run++) { /* steps off on 1 thread; on, 1-3 threads */
            const int nt = run == 0 ? 1 : run;
            if (dd_nn_threads_set(nt) != nt) continue;
            const int was = dd_nn_gru_wgrad_steps_set(run > 0);
            float *g = fzero(ng), *y = fzero(ny), *dx = fzero(nx), *dh0 = fzero(Bz * Hz);
            memcpy(g, fg0, ng * sizeof(float));
            float *dwi = g, *dwh = dwi + G3 * Dz, *dbi = dwh + G3 * Hz, *dbh = dbi + G3;
            gru_run_f(&c, fx, fh0, fwi, fwh, fbi, fbh, fG, y, dx, dh0, dwi, dwh, dbi, dbh);
            dd_nn_gru_wgrad_steps_set(was);
            if (!ref) ref = g, g = NULL;
            else {
                const size_t nc = bias ? ng : G3 * (Dz + Hz);
                CHECK(memcmp(g, ref, nc * sizeof(float)) == 0,
                      "gru wgrad steps B=%d T=%d D=%d H=%d bias=%d, %s, %d threads: dW/db differ from "
                      "one product after the loop", B, T, D, H, bias, dd_nn_simd_name(levels[li]), nt);
                checked++;
            }
            dd_free(g), dd_free(y), dd_free(dx), dd_free(dh0);
        }
        dd_nn_threads_set(1);
        dd_free(ref);
    }
    printf("gru wgrad steps B=%d T=%d D=%d H=%d bias=%d: %d runs compared\n", B, T, D, H, bias, checked);
    dd_nn_route_set(DD_NN_ROUTE_AUTO);
    dd_free(x), dd_free(h0), dd_free(wi), dd_free(wh), dd_free(bi), dd_free(bh), dd_free(G), dd_free(g0);
    dd_free(fx), dd_free(fh0), dd_free(fwi), dd_free(fwh), dd_free(fbi), dd_free(fbh), dd_free(fG);
    dd_free(fg0);
}

/* (B, T, C) -> feature-major (row c, column t B + b) and back, plain loops. */
static void to_fm(float *dst, const float *src, size_t B, size_t T, size_t C) {
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < C; c++) dst[c * T * B + t * B + b] = src[(b * T + t) * C + c];
}

/* The head -> last GRU layer hand-over feature-major: the dense head's din (written into
 * NaN, or added to a non-zero one), dW and db, then the GRU backward reading it, against
 * the (B, T, C) layers, bit for bit, at every level, route and 1-3 threads. */
static void test_dfm(int B, int T, int D, int H, int O) {
    const size_t Bz = (size_t)B, Tz = (size_t)T, Dz = (size_t)D, Hz = (size_t)H, Oz = (size_t)O, G3 = 3 * Hz;
    const size_t N = Bz * Tz, nx = N * Dz, ny = N * Hz;
    const double k = 1 / sqrt((double)H);
    double *x = dvec(nx, 1), *wi = dvec(G3 * Dz, k), *wh = dvec(G3 * Hz, k), *bi = dvec(G3, k);
    double *bh = dvec(G3, k), *wo = dvec(Oz * Hz, k), *dy = dvec(N * Oz, 1), *d0 = dvec(ny, 1);
    float *fx = tof(x, nx), *fwi = tof(wi, G3 * Dz), *fwh = tof(wh, G3 * Hz), *fbi = tof(bi, G3);
    float *fbh = tof(bh, G3), *fwo = tof(wo, Oz * Hz), *fdy = tof(dy, N * Oz), *fd0 = tof(d0, ny);
    float *fd0fm = fzero(ny);
    to_fm(fd0fm, fd0, Bz, Tz, Hz);
    int checked = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int li = 0; li < nlevels; li++)
            for (int nt = 1; nt <= 3; nt++) {
                if (dd_nn_threads_set(nt) != nt) continue;
                dd_nn_route_set(routes[ri]);
                dd_nn_simd_set(levels[li]);
                char ctx[160];
                snprintf(ctx, sizeof ctx, "dfm B=%d T=%d D=%d H=%d O=%d, %s, route %s, %d threads", B, T, D, H, O,
                         dd_nn_simd_name(levels[li]), dd_nn_route_name(routes[ri]), nt);
                /* the head: (B, T, H) din into zeros and into d0, against the fm versions */
                float *h = fzero(ny), *din = fzero(ny), *din2 = fzero(ny), *dw = fzero(Oz * Hz), *db = fzero(Oz);
                float *fm = fzero(ny), *fm2 = fzero(ny), *dwf = fzero(Oz * Hz), *dbf = fzero(Oz), *t = fzero(ny);
                for (size_t i = 0; i < ny; i++) h[i] = fx[i % nx] * 0.5f + fd0[i] * 0.25f;
                memcpy(din2, fd0, ny * sizeof(float));
                memcpy(fm2, fd0fm, ny * sizeof(float));
                for (size_t i = 0; i < ny; i++) fm[i] = NAN;
                dd_dense_backward(din, dw, db, fdy, h, fwo, N, H, O);
                dd_dense_backward(din2, NULL, NULL, fdy, h, fwo, N, H, O);
                /* written through caller scratch full of NaN (the stage's), added with its own */
                float *tmp = fzero(ny);
                for (size_t i = 0; i < ny; i++) tmp[i] = NAN;
                dd_dense_backward_dfm(fm, 1, dwf, dbf, fdy, h, fwo, B, T, H, O, tmp);
                dd_dense_backward_dfm(fm2, 0, NULL, NULL, fdy, h, fwo, B, T, H, O, NULL);
                dd_free(tmp);
                to_fm(t, din, Bz, Tz, Hz);
                CHECK(memcmp(t, fm, ny * sizeof(float)) == 0, "%s: din written feature-major differs", ctx);
                to_fm(t, din2, Bz, Tz, Hz);
                CHECK(memcmp(t, fm2, ny * sizeof(float)) == 0, "%s: din added feature-major differs", ctx);
                CHECK(memcmp(dw, dwf, Oz * Hz * sizeof(float)) == 0 && memcmp(db, dbf, Oz * sizeof(float)) == 0,
                      "%s: head dW / db differ", ctx);
                /* the GRU layer reading dout feature-major */
                float *ws = fzero(dd_gru_workspace_size(B, T, D, H)), *y = fzero(ny);
                float *g[2][5];
                for (int v = 0; v < 2; v++) {
                    for (int q = 0; q < 5; q++) g[v][q] = fzero(q == 0 ? nx : q == 1 ? G3 * Dz : q == 2 ? G3 * Hz : G3);
                    dd_gru_forward(y, ws, fx, NULL, fwi, fwh, fbi, fbh, B, T, D, H);
                    if (v == 0) dd_gru_backward(g[v][0], NULL, g[v][1], g[v][2], g[v][3], g[v][4], din, ws, fx, fwi, fwh,
                                                B, T, D, H);
                    else dd_gru_backward_dfm(g[v][0], NULL, g[v][1], g[v][2], g[v][3], g[v][4], fm, ws, fwi, fwh,
                                             B, T, D, H);
                }
                CHECK(memcmp(g[0][0], g[1][0], nx * sizeof(float)) == 0 &&
                          memcmp(g[0][1], g[1][1], G3 * Dz * sizeof(float)) == 0 &&
                          memcmp(g[0][2], g[1][2], G3 * Hz * sizeof(float)) == 0 &&
                          memcmp(g[0][3], g[1][3], G3 * sizeof(float)) == 0 &&
                          memcmp(g[0][4], g[1][4], G3 * sizeof(float)) == 0,
                      "%s: gru backward with dout feature-major differs", ctx);
                checked++;
                for (int v = 0; v < 2; v++)
                    for (int q = 0; q < 5; q++) dd_free(g[v][q]);
                dd_free(ws), dd_free(y), dd_free(h), dd_free(din), dd_free(din2), dd_free(dw), dd_free(db);
                dd_free(fm), dd_free(fm2), dd_free(dwf), dd_free(dbf), dd_free(t);
            }
    dd_nn_threads_set(1);
    dd_nn_route_set(DD_NN_ROUTE_AUTO);
    /* float64 */
    {
        double *ws = dzero(dd_gru_workspace_size(B, T, D, H)), *y = dzero(ny), *dfm = dzero(ny);
        double *g[2][4];
        for (size_t b = 0; b < Bz; b++)
            for (size_t t = 0; t < Tz; t++)
                for (size_t c = 0; c < Hz; c++) dfm[c * N + t * Bz + b] = d0[(b * Tz + t) * Hz + c];
        for (int v = 0; v < 2; v++) {
            for (int q = 0; q < 4; q++) g[v][q] = dzero(q == 0 ? nx : q == 1 ? G3 * Dz : q == 2 ? G3 * Hz : G3);
            dd_gru_forward_f64(y, ws, x, NULL, wi, wh, bi, bh, B, T, D, H);
            if (v == 0) dd_gru_backward_f64(g[v][0], NULL, g[v][1], g[v][2], g[v][3], NULL, d0, ws, x, wi, wh, B, T, D, H);
            else dd_gru_backward_dfm_f64(g[v][0], NULL, g[v][1], g[v][2], g[v][3], NULL, dfm, ws, wi, wh, B, T, D, H);
        }
        CHECK(memcmp(g[0][0], g[1][0], nx * sizeof(double)) == 0 &&
                  memcmp(g[0][1], g[1][1], G3 * Dz * sizeof(double)) == 0 &&
                  memcmp(g[0][2], g[1][2], G3 * Hz * sizeof(double)) == 0 &&
                  memcmp(g[0][3], g[1][3], G3 * sizeof(double)) == 0,
              "dfm B=%d T=%d D=%d H=%d: float64 gru backward with dout feature-major differs", B, T, D, H);
        for (int v = 0; v < 2; v++)
            for (int q = 0; q < 4; q++) dd_free(g[v][q]);
        dd_free(ws), dd_free(y), dd_free(dfm);
    }
    printf("dfm B=%d T=%d D=%d H=%d O=%d: %d runs compared\n", B, T, D, H, O, checked);
    dd_free(x), dd_free(wi), dd_free(wh), dd_free(bi), dd_free(bh), dd_free(wo), dd_free(dy), dd_free(d0);
    dd_free(fx), dd_free(fwi), dd_free(fwh), dd_free(fbi), dd_free(fbh), dd_free(fwo), dd_free(fdy), dd_free(fd0);
    dd_free(fd0fm);
}

/* ------------------------------------------------------------------ conv1d and dense */

/* The depthwise forward's floats as the SIMD kernels form them (conv_fast_impl.h):
 * out[r, c] = b[c] (or 0), then one fused multiply-add per tap inside the frame in
 * ascending k. An independent reference for the register-blocked kernels (the unfused
 * layer that test_dw_hswish compares with runs the same kernel). */
static void dw_forward_fma(float *out, const float *in, const float *w, const float *b, int B, int T, int C, int K,
                           int d) {
    for (int bb = 0; bb < B; bb++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                float acc = b ? b[c] : 0.0f;
                for (int k = 0; k < K; k++) {
                    const int s = (K - 1 - k) * d;
                    if (s <= t) acc = fmaf(w[(size_t)c * K + k], in[((size_t)bb * T + (size_t)(t - s)) * C + c], acc);
                }
                out[((size_t)bb * T + (size_t)t) * C + c] = acc;
            }
}

static void test_conv(int B, int T, int ci, int co, int K, int dil, int groups, int bias) {
    const size_t BT = (size_t)B * (size_t)T, nw = (size_t)co * (size_t)(ci / groups) * (size_t)K;
    const size_t nin = BT * (size_t)ci, nout = BT * (size_t)co;
    double *x = dvec(nin, 1), *w = dvec(nw, 0.5), *b = dvec((size_t)co, 0.5), *G = dvec(nout, 1);
    double *y = dzero(nout), *dx = dzero(nin), *dw = dzero(nw), *db = dzero((size_t)co);
    dd_conv1d_forward_f64(y, x, w, bias ? b : NULL, B, T, ci, co, K, dil, groups);
    dd_conv1d_backward_f64(dx, dw, bias ? db : NULL, G, x, w, B, T, ci, co, K, dil, groups);
    float *fx = tof(x, nin), *fw = tof(w, nw), *fb = tof(b, (size_t)co), *fG = tof(G, nout);
    float *yl[3] = {0}; /* the fast route's output per level, compared below */
    const int nl = nlevels; /* read once: the loops must agree (the calls are opaque) */
    char name[96];
    snprintf(name, sizeof name, "conv B=%d T=%d ci=%d co=%d K=%d d=%d g=%d bias=%d", B, T, ci, co, K,
             dil, groups, bias);
    for (int ri = 0; ri < 3; ri++)
    for (int li = 0; li < nl; li++) {
        const int route = routes[ri];
        dd_nn_route_set(route);
        dd_nn_simd_set(levels[li]);
        char lv[32];
        snprintf(lv, sizeof lv, "%s, route %s", dd_nn_simd_name(levels[li]), dd_nn_route_name(route));
        char ctx[160];
        snprintf(ctx, sizeof ctx, "%s, %s", name, lv);
        float *fy = fzero(nout), *fdx = fzero(nin), *fdw = fzero(nw), *fdb = fzero((size_t)co);
        dd_conv1d_forward(fy, fx, fw, bias ? fb : NULL, B, T, ci, co, K, dil, groups);
        dd_conv1d_backward(fdx, fdw, bias ? fdb : NULL, fG, fx, fw, B, T, ci, co, K, dil, groups);
        CHECK_CLOSE("conv out", fy, y, nout, ctx);
        if (groups == ci && groups == co && levels[li] > DD_SIMD_GENERIC) {
            /* the depthwise kernel's floats: bias, then the taps by fused multiply-adds */
            float *ry = fzero(nout);
            dw_forward_fma(ry, fx, fw, bias ? fb : NULL, B, T, ci, K, dil);
            CHECK(memcmp(ry, fy, nout * sizeof(float)) == 0, "%s: depthwise out differs from the fma reference", ctx);
            dd_free(ry);
        }
        CHECK_CLOSE("conv din", fdx, dx, nin, ctx);
        CHECK_CLOSE("conv dW", fdw, dw, nw, ctx);
        if (bias) CHECK_CLOSE("conv db", fdb, db, (size_t)co, ctx);
        /* with caller scratch (resnet's blocks): the same floats, from a scratch full of NaN
         * (every float of it written before it is read), twice (reused as left) */
        const size_t nws = dd_conv1d_scratch_floats(B, T, ci, co, K, groups, 1),
                     nfw = dd_conv1d_scratch_floats(B, T, ci, co, K, groups, 0);
        CHECK(nfw <= nws && (nfw > 0) == (nws > 0), "%s: forward scratch %zu, whole %zu", ctx, nfw, nws);
        float *ws = nws ? dd_calloc(nws, sizeof(float)) : NULL;
        if (ws)
            for (size_t i = 0; i < nws; i++) ws[i] = NAN;
        for (int rep = 0; rep < 2; rep++) {
            float *wy = fzero(nout), *wdx = fzero(nin), *wdw = fzero(nw), *wdb = fzero((size_t)co);
            dd_conv1d_forward_ws(wy, fx, fw, bias ? fb : NULL, B, T, ci, co, K, dil, groups, ws);
            dd_conv1d_backward_ws(wdx, wdw, bias ? wdb : NULL, fG, fx, fw, B, T, ci, co, K, dil, groups, ws);
            CHECK(memcmp(fy, wy, nout * sizeof(float)) == 0 && memcmp(fdx, wdx, nin * sizeof(float)) == 0 &&
                      memcmp(fdw, wdw, nw * sizeof(float)) == 0 &&
                      memcmp(fdb, wdb, (size_t)co * sizeof(float)) == 0,
                  "%s: with scratch (%zu floats, use %d) differs from without", ctx, nws, rep + 1);
            dd_free(wy), dd_free(wdx), dd_free(wdw), dd_free(wdb);
        }
        /* the forward alone (inference) reads and writes only the first nfw floats */
        if (ws) {
            for (size_t i = 0; i < nws; i++) ws[i] = i < nfw ? NAN : -7.25f;
            float *wy = fzero(nout);
            dd_conv1d_forward_ws(wy, fx, fw, bias ? fb : NULL, B, T, ci, co, K, dil, groups, ws);
            int tail = 1;
            for (size_t i = nfw; i < nws; i++) tail &= ws[i] == -7.25f;
            CHECK(tail && nfw < nws && memcmp(fy, wy, nout * sizeof(float)) == 0,
                  "%s: forward in its %zu scratch floats (of %zu) differs or writes past them", ctx, nfw, nws);
            dd_free(wy);
        }
        dd_free(ws);
        /* adds; each gradient may be skipped alone */
        float *dx2 = fzero(nin), *dw2 = fzero(nw), *db2 = fzero((size_t)co);
        memcpy(dx2, fdx, nin * sizeof(float));
        memcpy(dw2, fdw, nw * sizeof(float));
        memcpy(db2, fdb, (size_t)co * sizeof(float));
        dd_conv1d_backward(dx2, NULL, NULL, fG, fx, fw, B, T, ci, co, K, dil, groups);
        dd_conv1d_backward(NULL, dw2, bias ? db2 : NULL, fG, fx, fw, B, T, ci, co, K, dil, groups);
        double e = fmax(doubled(fdx, dx2, nin), doubled(fdw, dw2, nw));
        if (bias) e = fmax(e, doubled(fdb, db2, (size_t)co));
        CHECK(e < 1e-5, "%s, %s: backward does not add (err %.3g)", name, lv, e);
        /* 2 and 3 threads give one thread's bits (depthwise: frames split, dW by channels) */
        for (int nt = 2; nt <= 3 && dd_nn_threads_set(nt) == nt; nt++) {
            float *ty = fzero(nout), *tdx = fzero(nin), *tdw = fzero(nw), *tdb = fzero((size_t)co);
            dd_conv1d_forward(ty, fx, fw, bias ? fb : NULL, B, T, ci, co, K, dil, groups);
            dd_conv1d_backward(tdx, tdw, bias ? tdb : NULL, fG, fx, fw, B, T, ci, co, K, dil, groups);
            CHECK(memcmp(fy, ty, nout * sizeof(float)) == 0 && memcmp(fdx, tdx, nin * sizeof(float)) == 0 &&
                      memcmp(fdw, tdw, nw * sizeof(float)) == 0 &&
                      memcmp(fdb, tdb, (size_t)co * sizeof(float)) == 0,
                  "%s: %d threads differ from one", ctx, nt);
            dd_free(ty), dd_free(tdx), dd_free(tdw), dd_free(tdb);
        }
        dd_nn_threads_set(1);
        if (route == DD_NN_ROUTE_FAST) yl[li] = fy;
        else dd_free(fy);
        dd_free(fdx), dd_free(fdw), dd_free(fdb), dd_free(dx2), dd_free(dw2), dd_free(db2);
    }
    dd_nn_route_set(DD_NN_ROUTE_AUTO);
    /* the conv kernels (fast route) agree bit for bit across levels where every level has
     * one: depthwise, or outputs within 6 vectors of the narrowest level */
    const int kernels = groups == ci || (groups == 1 && co <= 6 * 8);
    for (int a = 0; a < nl; a++)
        for (int c = a + 1; c < nl; c++)
            if (levels[a] > DD_SIMD_GENERIC && levels[c] > DD_SIMD_GENERIC && K > 1 && kernels)
                CHECK(memcmp(yl[a], yl[c], nout * sizeof(float)) == 0, "%s: %s and %s outputs differ",
                      name, dd_nn_simd_name(levels[a]), dd_nn_simd_name(levels[c]));
    for (int li = 0; li < nl; li++) dd_free(yl[li]);
    dd_free(x), dd_free(w), dd_free(b), dd_free(G), dd_free(y), dd_free(dx), dd_free(dw);
    dd_free(db), dd_free(fx), dd_free(fw), dd_free(fb), dd_free(fG);
}

static void test_dense(size_t N, int in, int out, int bias) {
    const size_t nw = (size_t)in * (size_t)out;
    double *x = dvec(N * (size_t)in, 1), *w = dvec(nw, 0.5), *b = dvec((size_t)out, 0.5);
    double *G = dvec(N * (size_t)out, 1), *y = dzero(N * (size_t)out), *dx = dzero(N * (size_t)in);
    double *dw = dzero(nw), *db = dzero((size_t)out);
    dd_dense_forward_f64(y, x, w, bias ? b : NULL, N, in, out);
    dd_dense_backward_f64(dx, dw, bias ? db : NULL, G, x, w, N, in, out);
    float *fx = tof(x, N * (size_t)in), *fw = tof(w, nw), *fb = tof(b, (size_t)out);
    float *fG = tof(G, N * (size_t)out);
    char name[64];
    snprintf(name, sizeof name, "dense N=%zu in=%d out=%d bias=%d", N, in, out, bias);
    for (int ri = 0; ri < 3; ri++)
    for (int li = 0; li < nlevels; li++) {
        dd_nn_route_set(routes[ri]);
        dd_nn_simd_set(levels[li]);
        char ctx[160];
        snprintf(ctx, sizeof ctx, "%s, %s, route %s", name, dd_nn_simd_name(levels[li]), dd_nn_route_name(routes[ri]));
        float *fy = fzero(N * (size_t)out), *fdx = fzero(N * (size_t)in), *fdw = fzero(nw);
        float *fdb = fzero((size_t)out);
        dd_dense_forward(fy, fx, fw, bias ? fb : NULL, N, in, out);
        dd_dense_backward(fdx, fdw, bias ? fdb : NULL, fG, fx, fw, N, in, out);
        CHECK_CLOSE("dense out", fy, y, N * (size_t)out, ctx);
        CHECK_CLOSE("dense din", fdx, dx, N * (size_t)in, ctx);
        CHECK_CLOSE("dense dW", fdw, dw, nw, ctx);
        if (bias) CHECK_CLOSE("dense db", fdb, db, (size_t)out, ctx);
        /* din only, then dW only: each adds */
        dd_dense_backward(fdx, NULL, NULL, fG, fx, fw, N, in, out);
        dd_dense_backward(NULL, fdw, NULL, fG, fx, fw, N, in, out);
        double *dx2 = dzero(N * (size_t)in), *dw2 = dzero(nw);
        for (size_t i = 0; i < N * (size_t)in; i++) dx2[i] = 2 * dx[i];
        for (size_t i = 0; i < nw; i++) dw2[i] = 2 * dw[i];
        CHECK_CLOSE("dense din x2", fdx, dx2, N * (size_t)in, ctx);
        CHECK_CLOSE("dense dW x2", fdw, dw2, nw, ctx);
        /* 2 and 3 threads give one thread's bits (rows split; dW by outputs) */
        float *y1 = fzero(N * (size_t)out), *dx1 = fzero(N * (size_t)in), *dw1 = fzero(nw);
        float *db1 = fzero((size_t)out);
        dd_dense_forward(y1, fx, fw, bias ? fb : NULL, N, in, out);
        dd_dense_backward(dx1, dw1, bias ? db1 : NULL, fG, fx, fw, N, in, out);
        for (int nt = 2; nt <= 3 && dd_nn_threads_set(nt) == nt; nt++) {
            float *ty = fzero(N * (size_t)out), *tdx = fzero(N * (size_t)in), *tdw = fzero(nw);
            float *tdb = fzero((size_t)out);
            dd_dense_forward(ty, fx, fw, bias ? fb : NULL, N, in, out);
            dd_dense_backward(tdx, tdw, bias ? tdb : NULL, fG, fx, fw, N, in, out);
            CHECK(memcmp(y1, ty, N * (size_t)out * sizeof(float)) == 0 &&
                      memcmp(dx1, tdx, N * (size_t)in * sizeof(float)) == 0 &&
                      memcmp(dw1, tdw, nw * sizeof(float)) == 0 &&
                      memcmp(db1, tdb, (size_t)out * sizeof(float)) == 0,
                  "%s: %d threads differ from one", ctx, nt);
            dd_free(ty), dd_free(tdx), dd_free(tdw), dd_free(tdb);
        }
        dd_nn_threads_set(1);
        dd_free(y1), dd_free(dx1), dd_free(dw1), dd_free(db1);
        dd_free(dx2), dd_free(dw2), dd_free(fy), dd_free(fdx), dd_free(fdw), dd_free(fdb);
    }
    dd_nn_route_set(DD_NN_ROUTE_AUTO);
    dd_free(x), dd_free(w), dd_free(b), dd_free(G), dd_free(y), dd_free(dx), dd_free(dw), dd_free(db);
    dd_free(fx), dd_free(fw), dd_free(fb), dd_free(fG);
}

/* ------------------------------------------------------------------ activations */

static void test_act(void) {
    const size_t n = 1000 + 13; /* whole vectors plus a tail */
    float *x = fzero(n), *g = fzero(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)((2 * dd_rng_uniform(&rng) - 1) * 5);
        g[i] = (float)(2 * dd_rng_uniform(&rng) - 1);
    }
    const float sp[] = {-3.0f, 3.0f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 2.9999998f, -3.0000002f};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) x[5 + i] = x[n - 1 - i] = sp[i];
    const dd_act acts[2] = {DD_ACT_RELU, DD_ACT_HARDSWISH};
    for (int a = 0; a < 2; a++) {
        float *ref = fzero(n), *dref = fzero(n);
        dd_nn_simd_set(DD_SIMD_GENERIC);
        dd_act_forward(acts[a], ref, x, n);
        for (size_t i = 0; i < n; i++) dref[i] = 0.25f;
        dd_act_backward(acts[a], dref, g, x, ref, n);
        for (int li = 0; li < nlevels; li++) {
            dd_nn_simd_set(levels[li]);
            float *y = fzero(n), *d = fzero(n);
            memcpy(y, x, n * sizeof(float));
            dd_act_forward(acts[a], y, y, n); /* in place */
            for (size_t i = 0; i < n; i++) d[i] = 0.25f;
            dd_act_backward(acts[a], d, g, x, y, n);
            CHECK(memcmp(y, ref, n * sizeof(float)) == 0, "%s forward at %s differs from generic",
                  dd_act_name(acts[a]), dd_nn_simd_name(levels[li]));
            CHECK(memcmp(d, dref, n * sizeof(float)) == 0, "%s backward at %s differs from generic",
                  dd_act_name(acts[a]), dd_nn_simd_name(levels[li]));
            dd_free(y), dd_free(d);
        }
        /* and the generic loops themselves against the definition */
        CHECK(ref[5] == 0 && ref[6] == 3 && isnan(ref[11]) == (acts[a] == DD_ACT_HARDSWISH),
              "%s specials: %g %g %g", dd_act_name(acts[a]), ref[5], ref[6], ref[11]);
        dd_free(ref), dd_free(dref);
    }
    dd_free(x), dd_free(g);
}

/* ------------------------------------------------------------------ fused depthwise layer */

/* The fused depthwise + Hardswish (+ residual) layer (dd_conv1d_dw_hswish_forward /
 * _backward, tcn's layers) against the unfused sequence (dd_conv1d_forward,
 * dd_act_forward, dd_add_forward; dd_add_backward, dd_act_backward into zeros,
 * dd_conv1d_backward) at the same level: memcmp of pre, out, din and dW, on 1, 2 and 3
 * threads, with din and dW non-zero on entry (backward adds), din or dW alone, pre not
 * stored (backward recomputes it; also with din written, as tcn's layers run it), and the
 * fused outputs and scratch filled with garbage
 * first. Inputs span Hardswish's three
 * pieces; dout has +0 and -0 entries. */
static void test_dw_hswish(int B, int T, int C, int K, int dil, int resid) {
    const size_t n = (size_t)B * (size_t)T * (size_t)C, nw = (size_t)C * (size_t)K;
    double *dx = dvec(n, 4), *dw = dvec(nw, 1), *dg = dvec(n, 1), *dd0 = dvec(n, 1), *dw0 = dvec(nw, 1);
    float *x = tof(dx, n), *w = tof(dw, nw), *G = tof(dg, n), *din0 = tof(dd0, n), *dwi0 = tof(dw0, nw);
    for (size_t i = 0; i < n; i += 7) G[i] = i % 2 ? -0.0f : 0.0f;
    char name[96];
    snprintf(name, sizeof name, "dw+hardswish B=%d T=%d C=%d K=%d d=%d resid=%d", B, T, C, K, dil, resid);
    float *pre = fzero(n), *out = fzero(n), *din = fzero(n), *dW = fzero(nw), *da = fzero(n), *dinz = fzero(n);
    float *fpre = fzero(n), *fout = fzero(n), *fdin = fzero(n), *fdW = fzero(nw), *scr = fzero(2 * n);
    for (int li = 0; li < nlevels; li++) {
        dd_nn_simd_set(levels[li]);
        dd_nn_threads_set(1);
        dd_conv1d_forward(pre, x, w, NULL, B, T, C, C, K, dil, C);
        if (levels[li] > DD_SIMD_GENERIC) {
            dw_forward_fma(da, x, w, NULL, B, T, C, K, dil); /* (da: scratch here) */
            CHECK(memcmp(da, pre, n * sizeof(float)) == 0, "%s, %s: convolution differs from the fma reference",
                  name, dd_nn_simd_name(levels[li]));
        }
        dd_act_forward(DD_ACT_HARDSWISH, out, pre, n);
        if (resid) dd_add_forward(out, out, x, n);
        memcpy(din, din0, n * sizeof(float));
        memcpy(dW, dwi0, nw * sizeof(float));
        memset(da, 0, n * sizeof(float));
        if (resid) dd_add_backward(din, NULL, G, n);
        dd_act_backward(DD_ACT_HARDSWISH, da, G, pre, NULL, n);
        dd_conv1d_backward(din, dW, NULL, da, x, w, B, T, C, C, K, dil, C);
        /* din from zeros: what DD_DW_HS_SET_DIN writes */
        memset(dinz, 0, n * sizeof(float));
        if (resid) dd_add_backward(dinz, NULL, G, n);
        dd_conv1d_backward(dinz, NULL, NULL, da, x, w, B, T, C, C, K, dil, C);
        for (int nt = 1; nt <= 3 && dd_nn_threads_set(nt) == nt; nt++) {
            char ctx[160];
            snprintf(ctx, sizeof ctx, "%s, %s, %d thread(s)", name, dd_nn_simd_name(levels[li]), nt);
            memset(fpre, 0x7f, n * sizeof(float));
            memset(fout, 0xff, n * sizeof(float));
            dd_conv1d_dw_hswish_forward(fpre, fout, x, w, B, T, C, K, dil, resid);
            CHECK(memcmp(fpre, pre, n * sizeof(float)) == 0, "%s: pre differs from the convolution", ctx);
            CHECK(memcmp(fout, out, n * sizeof(float)) == 0, "%s: out differs from the unfused layers", ctx);
            memcpy(fdin, din0, n * sizeof(float));
            memcpy(fdW, dwi0, nw * sizeof(float));
            memset(scr, 0xff, n * sizeof(float));
            dd_conv1d_dw_hswish_backward(fdin, fdW, G, pre, x, w, B, T, C, K, dil, resid, scr);
            CHECK(memcmp(fdin, din, n * sizeof(float)) == 0, "%s: din differs from the unfused layers", ctx);
            CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW differs from the unfused layers", ctx);
            /* pre not stored: forward gives the same out, backward recomputes pre */
            memset(fout, 0xff, n * sizeof(float));
            dd_conv1d_dw_hswish_forward(NULL, fout, x, w, B, T, C, K, dil, resid);
            CHECK(memcmp(fout, out, n * sizeof(float)) == 0, "%s: out without pre differs", ctx);
            memcpy(fdin, din0, n * sizeof(float));
            memcpy(fdW, dwi0, nw * sizeof(float));
            memset(scr, 0xff, 2 * n * sizeof(float));
            dd_conv1d_dw_hswish_backward(fdin, fdW, G, NULL, x, w, B, T, C, K, dil, resid, scr);
            CHECK(memcmp(fdin, din, n * sizeof(float)) == 0, "%s: din with pre recomputed differs", ctx);
            CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW with pre recomputed differs", ctx);
            /* each gradient alone */
            memcpy(fdin, din0, n * sizeof(float));
            memset(scr, 0xff, n * sizeof(float));
            dd_conv1d_dw_hswish_backward(fdin, NULL, G, pre, x, w, B, T, C, K, dil, resid, scr);
            CHECK(memcmp(fdin, din, n * sizeof(float)) == 0, "%s: din alone differs", ctx);
            memcpy(fdW, dwi0, nw * sizeof(float));
            memset(scr, 0xff, n * sizeof(float));
            dd_conv1d_dw_hswish_backward(NULL, fdW, G, pre, x, w, B, T, C, K, dil, resid, scr);
            CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW alone differs", ctx);
            /* DD_DW_HS_SET_DIN: din's garbage (NaN) ignored, written as added into zeros;
             * dW still added into */
            memset(fdin, 0xff, n * sizeof(float));
            memcpy(fdW, dwi0, nw * sizeof(float));
            memset(scr, 0xff, n * sizeof(float));
            dd_conv1d_dw_hswish_backward(fdin, fdW, G, pre, x, w, B, T, C, K, dil,
                                         (resid ? DD_DW_HS_RESID : 0) | DD_DW_HS_SET_DIN, scr);
            CHECK(memcmp(fdin, dinz, n * sizeof(float)) == 0, "%s: din written (SET_DIN) differs", ctx);
            CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW with SET_DIN differs", ctx);
            /* what tcn's layers run: pre recomputed and din written (SET_DIN), din alone too */
            memset(fdin, 0xff, n * sizeof(float));
            memcpy(fdW, dwi0, nw * sizeof(float));
            memset(scr, 0xff, 2 * n * sizeof(float));
            dd_conv1d_dw_hswish_backward(fdin, fdW, G, NULL, x, w, B, T, C, K, dil,
                                         (resid ? DD_DW_HS_RESID : 0) | DD_DW_HS_SET_DIN, scr);
            CHECK(memcmp(fdin, dinz, n * sizeof(float)) == 0, "%s: din written, pre recomputed, differs", ctx);
            CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW with SET_DIN, pre recomputed, differs", ctx);
            memset(fdin, 0xff, n * sizeof(float));
            memset(scr, 0xff, 2 * n * sizeof(float));
            dd_conv1d_dw_hswish_backward(fdin, NULL, G, NULL, x, w, B, T, C, K, dil,
                                         (resid ? DD_DW_HS_RESID : 0) | DD_DW_HS_SET_DIN, scr);
            CHECK(memcmp(fdin, dinz, n * sizeof(float)) == 0, "%s: din alone, pre recomputed, differs", ctx);
        }
        dd_nn_threads_set(1);
    }
    /* the unfused sequence itself is the float64 layers' within float rounding */
    double *rpre = dzero(n), *rout = dzero(n);
    dd_conv1d_forward_f64(rpre, dx, dw, NULL, B, T, C, C, K, dil, C);
    for (size_t i = 0; i < n; i++) rpre[i] = (double)(float)rpre[i]; /* Hardswish of the float pre */
    dd_act_forward_f64(DD_ACT_HARDSWISH, rout, rpre, n);
    for (size_t i = 0; resid && i < n; i++) rout[i] += (double)x[i];
    CHECK_CLOSE("dw+hardswish out", out, rout, n, name);
    dd_free(rpre), dd_free(rout);
    dd_free(dx), dd_free(dw), dd_free(dg), dd_free(dd0), dd_free(dw0), dd_free(x), dd_free(w), dd_free(G);
    dd_free(din0), dd_free(dwi0), dd_free(pre), dd_free(out), dd_free(din), dd_free(dW), dd_free(da), dd_free(dinz);
    dd_free(fpre), dd_free(fout), dd_free(fdin), dd_free(fdW), dd_free(scr);
}

/* The depthwise layer whose input is Hardswish(ain) (dd_conv1d_dw_hsin_forward / _backward,
 * tcn's plain stacks at AVX2 and the generic level) against the unfused sequence at the
 * same level (dd_act_forward, dd_conv1d_forward; dd_conv1d_backward into zeros,
 * dd_act_backward into din): memcmp of z, out, din and dW on 1, 2 and 3 threads, z and out
 * NaN on entry (written), din and dW non-zero on entry (added into), din or dW alone,
 * DD_DW_HS_SET_DIN over a NaN din, the scratch NaN. ain spans Hardswish's three pieces;
 * dout has +0 and -0 entries. */
static void test_dw_hsin(int B, int T, int C, int K, int dil) {
    const size_t n = (size_t)B * (size_t)T * (size_t)C, nw = (size_t)C * (size_t)K;
    double *da = dvec(n, 4), *dw = dvec(nw, 1), *dg = dvec(n, 1), *dd0 = dvec(n, 1), *dw0 = dvec(nw, 1);
    float *a = tof(da, n), *w = tof(dw, nw), *G = tof(dg, n), *din0 = tof(dd0, n), *dwi0 = tof(dw0, nw);
    for (size_t i = 0; i < n; i += 7) G[i] = i % 2 ? -0.0f : 0.0f;
    char name[96];
    snprintf(name, sizeof name, "hardswish+dw B=%d T=%d C=%d K=%d d=%d", B, T, C, K, dil);
    float *z = fzero(n), *out = fzero(n), *dz = fzero(n), *din = fzero(n), *dinz = fzero(n), *dW = fzero(nw);
    float *fz = fzero(n), *fout = fzero(n), *fdin = fzero(n), *fdW = fzero(nw), *scr = fzero(n);
    for (int li = 0; li < nlevels; li++) {
        dd_nn_simd_set(levels[li]);
        dd_nn_threads_set(1);
        dd_act_forward(DD_ACT_HARDSWISH, z, a, n);
        dd_conv1d_forward(out, z, w, NULL, B, T, C, C, K, dil, C);
        memset(dz, 0, n * sizeof(float));
        memcpy(dW, dwi0, nw * sizeof(float));
        dd_conv1d_backward(dz, dW, NULL, G, z, w, B, T, C, C, K, dil, C);
        memcpy(din, din0, n * sizeof(float));
        dd_act_backward(DD_ACT_HARDSWISH, din, dz, a, NULL, n);
        memset(dinz, 0, n * sizeof(float)); /* what DD_DW_HS_SET_DIN writes */
        dd_act_backward(DD_ACT_HARDSWISH, dinz, dz, a, NULL, n);
        for (int nt = 1; nt <= 3 && dd_nn_threads_set(nt) == nt; nt++) {
            char ctx[160];
            snprintf(ctx, sizeof ctx, "%s, %s, %d thread(s)", name, dd_nn_simd_name(levels[li]), nt);
            memset(fz, 0xff, n * sizeof(float));
            memset(fout, 0xff, n * sizeof(float));
            dd_conv1d_dw_hsin_forward(fz, fout, a, w, B, T, C, K, dil);
            CHECK(memcmp(fz, z, n * sizeof(float)) == 0, "%s: z differs from Hardswish(ain)", ctx);
            CHECK(memcmp(fout, out, n * sizeof(float)) == 0, "%s: out differs from the unfused layers", ctx);
            memcpy(fdin, din0, n * sizeof(float));
            memcpy(fdW, dwi0, nw * sizeof(float));
            memset(scr, 0xff, n * sizeof(float));
            dd_conv1d_dw_hsin_backward(fdin, fdW, G, a, z, w, B, T, C, K, dil, 0, scr);
            CHECK(memcmp(fdin, din, n * sizeof(float)) == 0, "%s: din differs from the unfused layers", ctx);
            CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW differs from the unfused layers", ctx);
            memcpy(fdin, din0, n * sizeof(float));
            memset(scr, 0xff, n * sizeof(float));
            dd_conv1d_dw_hsin_backward(fdin, NULL, G, a, z, w, B, T, C, K, dil, 0, scr);
            CHECK(memcmp(fdin, din, n * sizeof(float)) == 0, "%s: din alone differs", ctx);
            memcpy(fdW, dwi0, nw * sizeof(float));
            memset(scr, 0xff, n * sizeof(float));
            dd_conv1d_dw_hsin_backward(NULL, fdW, G, a, z, w, B, T, C, K, dil, 0, scr);
            CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW alone differs", ctx);
            memset(fdin, 0xff, n * sizeof(float));
            memcpy(fdW, dwi0, nw * sizeof(float));
            memset(scr, 0xff, n * sizeof(float));
            dd_conv1d_dw_hsin_backward(fdin, fdW, G, a, z, w, B, T, C, K, dil, DD_DW_HS_SET_DIN, scr);
            CHECK(memcmp(fdin, dinz, n * sizeof(float)) == 0, "%s: din written (SET_DIN) differs", ctx);
            CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW with SET_DIN differs", ctx);
        }
        dd_nn_threads_set(1);
    }
    /* the unfused sequence's output is the float64 layers' within float rounding */
    double *rz = dzero(n), *rout = dzero(n);
    for (size_t i = 0; i < n; i++) rz[i] = (double)a[i];
    dd_act_forward_f64(DD_ACT_HARDSWISH, rz, rz, n);
    for (size_t i = 0; i < n; i++) rz[i] = (double)(float)rz[i]; /* the convolution of the float z */
    dd_conv1d_forward_f64(rout, rz, dw, NULL, B, T, C, C, K, dil, C);
    CHECK_CLOSE("hardswish+dw out", out, rout, n, name);
    dd_free(rz), dd_free(rout);
    dd_free(da), dd_free(dw), dd_free(dg), dd_free(dd0), dd_free(dw0), dd_free(a), dd_free(w), dd_free(G);
    dd_free(din0), dd_free(dwi0), dd_free(z), dd_free(out), dd_free(dz), dd_free(din), dd_free(dinz), dd_free(dW);
    dd_free(fz), dd_free(fout), dd_free(fdin), dd_free(fdW), dd_free(scr);
}

/* A convolution fused with Hardswish (dd_conv1d_hswish_forward / _backward, tcn's stem)
 * against the unfused sequence at the same level and route (dd_conv1d_forward,
 * dd_act_forward; dd_act_backward into zeros, dd_conv1d_backward): memcmp of pre, out, din,
 * dW and db on 1, 2 and 3 threads, pre and out NaN on entry (written), dW and db non-zero
 * on entry (added into), the scratch NaN, with and without din (without: the 1x1 kernel
 * that never stores da). Inputs span Hardswish's three pieces; dout has +0 and -0. */
static void test_conv_hswish(int B, int T, int ci, int co, int K, int dil, int bias) {
    const size_t n = (size_t)B * (size_t)T * (size_t)co, nx = (size_t)B * (size_t)T * (size_t)ci;
    const size_t nw = (size_t)co * (size_t)ci * (size_t)K;
    double *dx = dvec(nx, 2), *dw = dvec(nw, 1), *db = dvec((size_t)co, 1), *dg = dvec(n, 1);
    double *dw0 = dvec(nw, 1), *db0 = dvec((size_t)co, 1);
    float *x = tof(dx, nx), *w = tof(dw, nw), *b = tof(db, (size_t)co), *G = tof(dg, n), *wi0 = tof(dw0, nw);
    float *bi0 = tof(db0, (size_t)co);
    for (size_t i = 0; i < n; i += 7) G[i] = i % 2 ? -0.0f : 0.0f;
    char name[112];
    snprintf(name, sizeof name, "conv+hardswish B=%d T=%d ci=%d co=%d K=%d d=%d bias=%d", B, T, ci, co, K, dil, bias);
    float *pre = fzero(n), *out = fzero(n), *da = fzero(n), *din = fzero(nx), *dW = fzero(nw), *dB = fzero((size_t)co);
    float *dW1 = fzero(nw), *dB1 = fzero((size_t)co);
    float *fpre = fzero(n), *fout = fzero(n), *fdin = fzero(nx), *fdW = fzero(nw), *fdB = fzero((size_t)co);
    float *scr = fzero(n);
    for (int ri = 0; ri < 3; ri++)
        for (int li = 0; li < nlevels; li++) {
            dd_nn_route_set(routes[ri]);
            dd_nn_simd_set(levels[li]);
            dd_nn_threads_set(1);
            /* the unfused sequence; with din, then without */
            dd_conv1d_forward(pre, x, w, bias ? b : NULL, B, T, ci, co, K, dil, 1);
            dd_act_forward(DD_ACT_HARDSWISH, out, pre, n);
            memset(da, 0, n * sizeof(float));
            dd_act_backward(DD_ACT_HARDSWISH, da, G, pre, NULL, n);
            memset(din, 0, nx * sizeof(float));
            memcpy(dW, wi0, nw * sizeof(float));
            memcpy(dB, bi0, (size_t)co * sizeof(float));
            dd_conv1d_backward(din, dW, bias ? dB : NULL, da, x, w, B, T, ci, co, K, dil, 1);
            memcpy(dW1, wi0, nw * sizeof(float));
            memcpy(dB1, bi0, (size_t)co * sizeof(float));
            dd_conv1d_backward(NULL, dW1, bias ? dB1 : NULL, da, x, w, B, T, ci, co, K, dil, 1);
            /* without din a 1x1 convolution's backward takes the 1x1 kernel (with no Hardswish):
             * the floats of the route with din */
            CHECK(memcmp(dW1, dW, nw * sizeof(float)) == 0 &&
                      (!bias || memcmp(dB1, dB, (size_t)co * sizeof(float)) == 0),
                  "%s, %s, route %s: dd_conv1d_backward's dW / db without din differ from with din", name,
                  dd_nn_simd_name(levels[li]), dd_nn_route_name(routes[ri]));
            for (int nt = 1; nt <= 3 && dd_nn_threads_set(nt) == nt; nt++) {
                char ctx[200];
                snprintf(ctx, sizeof ctx, "%s, %s, route %s, %d thread(s)", name, dd_nn_simd_name(levels[li]),
                         dd_nn_route_name(routes[ri]), nt);
                memset(fpre, 0xff, n * sizeof(float));
                memset(fout, 0xff, n * sizeof(float));
                dd_conv1d_hswish_forward(fpre, fout, x, w, bias ? b : NULL, B, T, ci, co, K, dil, 1);
                CHECK(memcmp(fpre, pre, n * sizeof(float)) == 0, "%s: pre differs from the convolution", ctx);
                CHECK(memcmp(fout, out, n * sizeof(float)) == 0, "%s: out differs from the unfused layers", ctx);
                memset(fdin, 0, nx * sizeof(float));
                memcpy(fdW, wi0, nw * sizeof(float));
                memcpy(fdB, bi0, (size_t)co * sizeof(float));
                memset(scr, 0xff, n * sizeof(float));
                dd_conv1d_hswish_backward(fdin, fdW, bias ? fdB : NULL, G, pre, x, w, B, T, ci, co, K, dil, 1, scr);
                CHECK(memcmp(fdin, din, nx * sizeof(float)) == 0, "%s: din differs from the unfused layers", ctx);
                CHECK(memcmp(fdW, dW, nw * sizeof(float)) == 0, "%s: dW (with din) differs", ctx);
                CHECK(memcmp(fdB, dB, (size_t)co * sizeof(float)) == 0, "%s: db (with din) differs", ctx);
                memcpy(fdW, wi0, nw * sizeof(float));
                memcpy(fdB, bi0, (size_t)co * sizeof(float));
                memset(scr, 0xff, n * sizeof(float));
                dd_conv1d_hswish_backward(NULL, fdW, bias ? fdB : NULL, G, pre, x, w, B, T, ci, co, K, dil, 1, scr);
                CHECK(memcmp(fdW, dW1, nw * sizeof(float)) == 0, "%s: dW (no din) differs from the unfused layers",
                      ctx);
                CHECK(memcmp(fdB, dB1, (size_t)co * sizeof(float)) == 0,
                      "%s: db (no din) differs from the unfused layers", ctx);
            }
            dd_nn_threads_set(1);
        }
    dd_nn_route_set(DD_NN_ROUTE_AUTO);
    /* the unfused sequence itself is the float64 layers' within float rounding */
    double *rpre = dzero(n), *rout = dzero(n);
    dd_conv1d_forward_f64(rpre, dx, dw, bias ? db : NULL, B, T, ci, co, K, dil, 1);
    for (size_t i = 0; i < n; i++) rpre[i] = (double)(float)rpre[i];
    dd_act_forward_f64(DD_ACT_HARDSWISH, rout, rpre, n);
    CHECK_CLOSE("conv+hardswish out", out, rout, n, name);
    dd_free(rpre), dd_free(rout);
    dd_free(dx), dd_free(dw), dd_free(db), dd_free(dg), dd_free(dw0), dd_free(db0), dd_free(x), dd_free(w);
    dd_free(b), dd_free(G), dd_free(wi0), dd_free(bi0), dd_free(pre), dd_free(out), dd_free(da), dd_free(din);
    dd_free(dW), dd_free(dB), dd_free(dW1), dd_free(dB1), dd_free(fpre), dd_free(fout), dd_free(fdin);
    dd_free(fdW), dd_free(fdB), dd_free(scr);
}

int main(void) {
    dd_rng_seed(&rng, 20250101);
    /* under valgrind (tests/valgrind.sh): the largest shapes are left out (they ran past
     * ctest's 900 s there); make check and the ASan run keep them */
    const int vg = getenv("DD_TEST_VALGRIND") != NULL;
    const int sup = dd_nn_simd_supported();
    for (int l = DD_SIMD_GENERIC; l <= sup; l++) levels[nlevels++] = l;
    printf("SIMD levels: supported %s, in use by default %s; testing", dd_nn_simd_name(sup),
           dd_nn_simd_name(dd_nn_simd_level()));
    for (int i = 0; i < nlevels; i++) printf(" %s", dd_nn_simd_name(levels[i]));
    printf("\n");
    CHECK(dd_nn_simd_set(99) == sup && dd_nn_simd_set(-1) == DD_SIMD_GENERIC, "dd_nn_simd_set clamps");
    CHECK(dd_nn_simd_level() == DD_SIMD_GENERIC, "the set level is in use");
    CHECK(dd_nn_threads_set(0) == 1 && dd_nn_threads() == 1, "dd_nn_threads_set clamps to >= 1");
    printf("threads: %s\n", dd_nn_threads_set(2) == 2 ? "1, 2 and 3 compared (OpenMP)" : "1 only (built without OpenMP)");
    dd_nn_threads_set(1);

    const gru_case gc[] = {
        {64, 12, 2, 23, 1, 0}, /* the recipe's shape (shorter): whole 64-column blocks */
        {64, 40, 2, 23, 1, 1}, /* TB = 2560: the weight gradients split between threads too */
        {37, 9, 2, 23, 1, 1},  /* masked tail vector, odd H, h0 */
        {1, 20, 2, 5, 1, 1},   /* one frame (the streaming case) */
        {17, 6, 6, 28, 1, 0},  /* dgru's input width, H = 28 */
        {80, 5, 1, 7, 0, 1},   /* two column blocks, no bias */
        {9, 4, 3, 64, 1, 1},   /* H = 64: several register blocks of rows */
        {3, 3, 2, 1, 1, 1},    /* H = 1 */
        {3, 4, 2, 400, 1, 1},  /* H = 400: AUTO takes the sgemm path */
    };
    for (size_t i = 0; i < sizeof gc / sizeof gc[0]; i++) test_gru(gc[i]);
    test_gru_blocks(7, 2, 23); /* the recipe's H: 4-unit blocks + 3, 12-row blocks + 11 */
    test_gru_blocks(1, 2, 23); /* T = 1 */
    test_gru_blocks(4, 1, 13); /* one unit / row left over */
    test_gru_blocks(3, 3, 30); /* 12 + 12 + 6 rows, 2 + 2 units at 3-4 vectors */
    test_gru_blocks(5, 2, 1);  /* H = 1 */
    test_gru_wgrad_steps(32, 70, 2, 23, 1);  /* the recipe's chunks: 3 chunks of 32 steps (2240) */
    test_gru_wgrad_steps(33, 40, 3, 13, 1);  /* chunk boundaries inside steps */
    test_gru_wgrad_steps(65, 50, 2, 23, 0);  /* no biases (no row sums), 2-3 threads */
    test_gru_wgrad_steps(1100, 3, 2, 5, 1);  /* one step spans chunks */
    test_gru_wgrad_steps(5, 7, 2, 23, 1);    /* one chunk, shorter than DD_NN_NT_KC */
    if (!vg) test_dfm(32, 60, 2, 23, 2); /* the recipe's chunk (shorter); head threaded (>= 32768 floats) */
    test_dfm(37, 9, 3, 23, 3);   /* masked tail of frames (AVX-512 and AVX2), 3 outputs */
    test_dfm(5, 4, 2, 1, 1);     /* H = 1, one output */
    test_dfm(3, 5, 2, 400, 4);   /* H = 400: the sgemm GRU path under AUTO; 4 outputs */

    test_conv(3, 40, 96, 96, 5, 8, 96, 0); /* tcn layer: depthwise, dilation 8 */
    test_conv(3, 120, 96, 96, 5, 4, 96, 1); /* depthwise, threaded (frames; dW by channels) */
    test_conv(2, 9, 21, 21, 3, 4, 21, 1);  /* depthwise, taps reaching before the frame */
    test_conv(2, 7, 1, 1, 2, 1, 1, 1);     /* one channel */
    test_conv(3, 30, 12, 12, 3, 1, 1, 1);  /* resnet block conv */
    test_conv(2, 11, 5, 40, 4, 2, 1, 1);   /* full, 3 output vectors (AVX-512) */
    test_conv(2, 13, 33, 7, 2, 3, 1, 0);   /* full, 3 input vectors in backward */
    test_conv(1, 3, 4, 6, 4, 2, 1, 1);     /* receptive field longer than the frame */
    test_conv(2, 8, 200, 8, 3, 1, 1, 1);   /* too wide: generic path */
    test_conv(2, 10, 4, 6, 2, 3, 2, 1);    /* grouped: generic path */
    test_conv(2, 6, 6, 96, 1, 1, 1, 1);    /* 1x1 (tcn stem): dense through the conv kernels */
    test_conv(2, 9, 48, 48, 3, 1, 1, 1);   /* weights re-laid on the heap (fast route) */
    test_conv(2, 7, 100, 70, 3, 2, 1, 1);  /* im2col + sgemm (any route) */
    test_conv(3, 5, 9, 11, 7, 1, 1, 0);    /* im2col, receptive field longer than the frame */
    test_conv(2, 300, 512, 8, 8, 3, 1, 1); /* im2col in 3 blocks of rows (Ci K = 4096) */
    test_conv(2, 9, 97, 100, 3, 2, 1, 1);  /* im2col from caller scratch (both sides > 96) */
    if (!vg) test_conv(2, 300, 520, 98, 8, 1, 1, 0); /* caller scratch in 3 blocks of rows (X, then dX) */
    test_conv(2, 12, 300, 300, 5, 3, 300, 0); /* depthwise, C K > 1024: heap */

    test_dense(203, 23, 2, 1);  /* output head: small-output kernel */
    test_dense(50, 29, 3, 0);
    test_dense(77, 23, 23, 1);  /* dgru fc_hid: conv kernel with K = 1 */
    test_dense(31, 70, 90, 1);  /* AUTO: OpenBLAS; fast route: the conv kernel */
    test_dense(9, 130, 2, 1);   /* head, wide input */
    test_dense(1, 1, 1, 1);
    test_dense(12800, 23, 2, 1); /* the recipe's head (64 x 200 rows): threaded */
    test_dense(1500, 70, 3, 0);  /* threaded, 3 outputs (dW split by outputs), input chunks */

    test_act();

    test_dw_hswish(3, 40, 96, 5, 8, 0);    /* tcn's default layer, plain stack */
    test_dw_hswish(2, 30, 96, 5, 2, 1);    /* residual (deep stacks) */
    test_dw_hswish(3, 9, 21, 3, 4, 0);     /* masked tail vector, taps before the frame */
    test_dw_hswish(2, 7, 37, 2, 1, 1);     /* 37 channels: 2 whole vectors + 5 (AVX-512) */
    test_dw_hswish(1, 3, 5, 5, 2, 1);      /* receptive field longer than the frame */
    test_dw_hswish(4, 1, 19, 4, 3, 0);     /* T = 1 */
    test_dw_hswish(3, 120, 96, 5, 4, 1);   /* threaded (>= 32768 floats): channel vectors split */
    test_dw_hswish(2, 50, 8, 5, 2048, 1);  /* dilation 2^11 (a deep stack's): one tap inside */
    test_dw_hswish(2, 12, 300, 5, 3, 0);   /* C K > 1024: weights on the heap */
    test_dw_hswish(2, 23, 88, 3, 2, 0);    /* register blocks: 5 whole vectors + 8 (AVX-512), 6 + 5 (AVX2) */
    test_dw_hswish(3, 18, 56, 4, 1, 1);    /* 3 whole vectors + 8 (AVX-512), 6 + 1 (AVX2); rows in blocks + 1 */
    test_dw_hswish(2, 25, 48, 5, 1, 0);    /* K = 5: a pair and a single vector (AVX-512), 3 pairs (AVX2) */

    test_dw_hsin(4, 100, 96, 5, 8);  /* tcn's default layer at AVX2 (a chunk of 4 frames) */
    test_dw_hsin(3, 9, 21, 3, 4);    /* masked tail vector, taps before the frame */
    test_dw_hsin(2, 7, 37, 2, 1);    /* 37 channels: 2 whole vectors + 5 (AVX-512) */
    test_dw_hsin(1, 3, 5, 5, 2);     /* receptive field longer than the frame */
    test_dw_hsin(4, 1, 19, 4, 3);    /* T = 1 */
    test_dw_hsin(3, 120, 96, 5, 4);  /* threaded (>= 32768 floats) */
    test_dw_hsin(2, 12, 300, 5, 3);  /* C K > 1024: weights on the heap */
    test_dw_hsin(2, 25, 40, 5, 1);   /* K = 5: 2 pairs + a single vector (AVX2) */
    test_dw_hsin(2, 11, 16, 70, 1);  /* K > DD_NN_CONV_DW_KMAX: the generic sequence at every level */

    test_conv_hswish(4, 100, 6, 96, 1, 1, 1);  /* tcn's stem: 6 features -> 96, bias (38,400 floats) */
    test_conv_hswish(3, 17, 6, 37, 1, 1, 1);   /* masked tail vector of outputs */
    test_conv_hswish(2, 9, 8, 40, 1, 1, 0);    /* 8 inputs (the 1x1 kernel's most), no bias */
    test_conv_hswish(2, 13, 1, 20, 1, 1, 1);   /* one input */
    test_conv_hswish(1, 7, 3, 16, 1, 1, 1);    /* one whole AVX-512 vector, two AVX2 ones */
    test_conv_hswish(2, 11, 9, 24, 1, 1, 1);   /* 9 inputs: backward through scratch */
    test_conv_hswish(2, 11, 5, 40, 4, 2, 1);   /* K 4: forward fused, backward through scratch */
    test_conv_hswish(2, 6, 6, 3, 1, 1, 1);     /* 3 outputs: the small dense kernel's, not fused */
    test_conv_hswish(2, 5, 6, 200, 1, 1, 1);   /* 200 outputs: forward through OpenBLAS */
    dd_nn_simd_set(sup);
    printf("worst float32-vs-float64 rel err %.2e\n", worst);
    return dd_test_done("test_nn_simd");
}
