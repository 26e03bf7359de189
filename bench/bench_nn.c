/* Micro-benchmark of the neural layers in float32: GRU (the OpenDPD PA model's layer),
 * LSTM, dense and the TCN's depthwise conv, forward and forward+backward, one thread.
 *
 * Build (from the source root, after the library is built in build/):
 *   cc -O2 -Iinclude -Isrc bench/bench_nn.c -Lbuild -ldistdpd -ldistdpd_rf -Wl,-rpath,$PWD/build -lm -o bench_nn
 * Run:  OPENBLAS_NUM_THREADS=1 ./bench_nn [B T H reps]      (default 64 200 23 20)
 *       OPENBLAS_NUM_THREADS=1 ./bench_nn --dispatch [reps]  (default 5)
 *       ./bench_nn --tcn-layer [reps]                         (default 20)
 *       ./bench_nn --tcn-stack [reps [B [recompute]]]         (default 20 32)
 *
 * The GRU line also gives the best process CPU time of each (steadier on a shared machine).
 * GFLOP/s counts the matrix products only: a GRU step costs 2*3H*(D+H) flops per sequence
 * forward and twice that backward (input + weight gradients); an LSTM 2*4H*(D+H).
 *
 * --dispatch: every layer shape where both a hand-written kernel and OpenBLAS sgemm can
 * run (simd.h, "routing"), timed side by side in the same run (forward + backward, the two
 * routes alternating, best of reps each) over widths 8 .. 1024: dense C -> C, dense
 * 6 -> C (stems), dense C -> 2 (output heads), causal conv C -> C with K = 3, the GRU layer (fused recurrence
 * against the sgemm path) and the GRU weight-gradient product dW_hh += dG hprev^T
 * (3H x H x B T). Prints one table per family, the winner per width and the threshold
 * the library uses (DD_NN_* in src/nn/simd.h), so a new machine can be checked. For the
 * GRU, "auto" may mix the two (fused recurrence, weight gradients through sgemm): its
 * time is shown too.
 *
 * --tcn-layer: one tcn depthwise layer at the default shape (B 64, T 200, C 96, K 5,
 * dilation 4; plain and residual), forward and backward, as the unfused sequence
 * (dd_conv1d_forward, dd_act_forward, dd_add_forward; dd_add_backward, memset,
 * dd_act_backward, dd_conv1d_backward), fused (dd_conv1d_dw_hswish_forward / _backward
 * with the convolution stored) and fused with the convolution recomputed (pre = NULL),
 * the three alternating in every rep; best CPU and wall time of each, at the SIMD level
 * in use (DD_SIMD).
 *
 * --tcn-stack: tcn's 4 fused depthwise layers on a chunk of B frames, layer by layer or
 * frame group by frame group (docs/performance.md, "One workspace per thread"); the
 * convolution stored by forward, or with "recompute" not stored and recomputed by
 * backward (pre = NULL, as tcn's trainer runs them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "distdpd/nn.h"
#include "nn/simd.h"

static float *frand(size_t n, dd_rng *r, double s) {
    float *p = dd_calloc(n, sizeof(float));
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = (float)((2 * dd_rng_uniform(r) - 1) * s);
    return p;
}

/* Best-of-reps wall time of fn in ms. */
#define TIME_BEST(best, reps, body)                 \
    do {                                            \
        best = 1e30;                                \
        for (int rep_ = 0; rep_ < (reps); rep_++) { \
            double t0_ = dd_now();                  \
            body;                                   \
            double dt_ = (dd_now() - t0_) * 1e3;    \
            if (dt_ < best) best = dt_;             \
        }                                           \
    } while (0)

/* Best-of-reps wall time (best) and process CPU time (cbest) of fn in ms (the CPU time
 * is steadier on a shared machine: a preempted call does not count the wait). */
static double cpu_ms(void) { return bench_cpu_s() * 1e3; }
#define TIME_BEST2(best, cbest, reps, body)         \
    do {                                            \
        best = cbest = 1e30;                        \
        for (int rep_ = 0; rep_ < (reps); rep_++) { \
            double t0_ = dd_now(), c0_ = cpu_ms();  \
            body;                                   \
            double cd_ = cpu_ms() - c0_;            \
            double dt_ = (dd_now() - t0_) * 1e3;    \
            if (dt_ < best) best = dt_;             \
            if (cd_ < cbest) cbest = cd_;           \
        }                                           \
    } while (0)

/* ------------------------------------------------------------------ --dispatch */

typedef enum { FAM_DENSE, FAM_STEM, FAM_HEAD, FAM_CONV3, FAM_GRU, FAM_GEMM_NT } family;

typedef struct {
    family fam;
    int C;           /* width: channels, hidden units */
    size_t B, T;     /* frames, steps */
    double gflop;    /* of one forward + backward */
    float *buf[12];
    size_t ws;
} dcase;

static double dtime(dcase *c) {
    double t0 = dd_now();
    const size_t BT = c->B * c->T, C = (size_t)c->C;
    float **b = c->buf;
    switch (c->fam) {
    case FAM_DENSE: /* x, w, bias, y, dy, dx, dw, db */
        dd_dense_forward(b[3], b[0], b[1], b[2], BT, c->C, c->C);
        dd_dense_backward(b[5], b[6], b[7], b[4], b[0], b[1], BT, c->C, c->C);
        break;
    case FAM_STEM:
        dd_dense_forward(b[3], b[0], b[1], b[2], BT, 6, c->C);
        dd_dense_backward(b[5], b[6], b[7], b[4], b[0], b[1], BT, 6, c->C);
        break;
    case FAM_HEAD:
        dd_dense_forward(b[3], b[0], b[1], b[2], BT, c->C, 2);
        dd_dense_backward(b[5], b[6], b[7], b[4], b[0], b[1], BT, c->C, 2);
        break;
    case FAM_CONV3:
        dd_conv1d_forward(b[3], b[0], b[1], b[2], (int)c->B, (int)c->T, c->C, c->C, 3, 1, 1);
        dd_conv1d_backward(b[5], b[6], b[7], b[4], b[0], b[1], (int)c->B, (int)c->T, c->C, c->C, 3, 1, 1);
        break;
    case FAM_GRU: /* x, wi, wh, bi, bh, y, dy, dx, dwi, dwh, dbi, ws */
        dd_gru_forward(b[5], b[11], b[0], NULL, b[1], b[2], b[3], b[4], (int)c->B, (int)c->T, 2, c->C);
        dd_gru_backward(b[7], NULL, b[8], b[9], b[10], b[10], b[6], b[11], b[0], b[1], b[2], (int)c->B,
                        (int)c->T, 2, c->C);
        break;
    case FAM_GEMM_NT: /* dG (3H x BT), hprev (H x BT), dW (3H x H), db (3H) */
        dd_nn_gemm_nt_acc(dd_nn_simd_level(), 3 * C, C, BT, b[0], BT, b[1], BT, b[2], C, b[3]);
        break;
    }
    return dd_now() - t0;
}

static void dcase_alloc(dcase *c, dd_rng *r) {
    const size_t BT = c->B * c->T, C = (size_t)c->C, G = 3 * C;
    double k = 1 / sqrt((double)C);
    memset(c->buf, 0, sizeof c->buf);
    switch (c->fam) {
    case FAM_DENSE:
    case FAM_STEM:
    case FAM_HEAD:
    case FAM_CONV3: {
        size_t ci = c->fam == FAM_STEM ? 6 : C, co = c->fam == FAM_HEAD ? 2 : C, K = c->fam == FAM_CONV3 ? 3 : 1;
        c->buf[0] = frand(BT * ci, r, 1), c->buf[1] = frand(co * ci * K, r, k), c->buf[2] = frand(co, r, k);
        c->buf[3] = frand(BT * co, r, 0), c->buf[4] = frand(BT * co, r, 1), c->buf[5] = frand(BT * ci, r, 0);
        c->buf[6] = frand(co * ci * K, r, 0), c->buf[7] = frand(co, r, 0);
        c->gflop = 3 * 2.0 * BT * ci * co * K * 1e-9;
        break;
    }
    case FAM_GRU:
        c->buf[0] = frand(BT * 2, r, 1), c->buf[1] = frand(G * 2, r, k), c->buf[2] = frand(G * C, r, k);
        c->buf[3] = frand(G, r, k), c->buf[4] = frand(G, r, k), c->buf[5] = frand(BT * C, r, 0);
        c->buf[6] = frand(BT * C, r, 1), c->buf[7] = frand(BT * 2, r, 0), c->buf[8] = frand(G * 2, r, 0);
        c->buf[9] = frand(G * C, r, 0), c->buf[10] = frand(G, r, 0);
        c->buf[11] = frand(dd_gru_workspace_size((int)c->B, (int)c->T, 2, c->C), r, 0);
        c->gflop = 3 * 2.0 * BT * G * (C + 2) * 1e-9;
        break;
    case FAM_GEMM_NT:
        c->buf[0] = frand(G * BT, r, 1), c->buf[1] = frand(C * BT, r, 1), c->buf[2] = frand(G * C, r, 0);
        c->buf[3] = frand(G, r, 0);
        c->gflop = 2.0 * G * C * BT * 1e-9;
        break;
    }
}

/* Whether a hand-written kernel exists for the shape (simd_kernels.c's limits), and
 * whether the AUTO route takes it. */
static int fast_applies(family fam, int C, int level) {
    if (level == DD_SIMD_GENERIC) return 0;
    const size_t vw = (size_t)dd_nn_simd_width(level), c = (size_t)C, L = (c + vw - 1) / vw * vw;
    switch (fam) {
    case FAM_DENSE:
    case FAM_STEM:
    case FAM_CONV3: return L <= 6 * vw;
    default: return 1;
    }
}

static int auto_takes_fast(family fam, int C, int level) {
    if (!fast_applies(fam, C, level)) return 0;
    const size_t c = (size_t)C, vw = (size_t)dd_nn_simd_width(level);
    const int route = dd_nn_route_set(DD_NN_ROUTE_AUTO);
    int r = 0;
    switch (fam) {
    case FAM_DENSE: r = dd_nn_conv_full_fast(level, (c + vw - 1) / vw, c); break;
    case FAM_STEM: r = dd_nn_conv_full_fast(level, (c + vw - 1) / vw, 6); break;
    case FAM_CONV3: r = dd_nn_conv_full_fast(level, (c + vw - 1) / vw, 3 * c); break;
    case FAM_HEAD: r = 1; break;
    case FAM_GRU: r = dd_nn_gru_fused(level, c); break;
    case FAM_GEMM_NT: r = dd_nn_gemm_nt_fast(level, 3 * c, c); break;
    }
    dd_nn_route_set(route);
    return r;
}

static int dispatch(int reps) {
    static const int widths[] = {8, 16, 24, 32, 48, 64, 80, 96, 128, 192, 256, 384, 512, 768, 1024};
    static const struct {
        family fam;
        const char *title;
        size_t B, T;
    } fams[] = {
        {FAM_DENSE, "dense C -> C (conv kernel with K = 1 vs sgemm), 16 x 200 rows", 16, 200},
        {FAM_STEM, "dense 6 -> C (the tcn / resnet stems: conv kernel vs sgemm), 64 x 200 rows", 64, 200},
        {FAM_HEAD, "dense C -> 2 (output head: small-output kernel vs sgemm), 64 x 200 rows", 64, 200},
        {FAM_CONV3, "causal conv C -> C, K = 3 (conv kernel vs im2col + sgemm), 16 x 200 rows", 16, 200},
        {FAM_GRU, "GRU layer 2 -> H (fused recurrence vs per-step sgemm), B 64, T 50", 64, 50},
        {FAM_GEMM_NT, "GRU weight gradient dW_hh += dG hprev^T, 3H x H x 3200 (gemm_nt vs sgemm)", 64, 50},
    };
    const int level = dd_nn_simd_level();
    printf("SIMD level %s; forward + backward, best of %d (2 for cases over 0.2 s), the two routes "
           "alternating\n",
           dd_nn_simd_name(level), reps);
    dd_rng r;
    dd_rng_seed(&r, 1);
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        printf("\n%s\n\n| width | fast (ms) | sgemm (ms) | fast GFLOP/s | sgemm GFLOP/s | faster | auto takes |\n"
               "|---|---|---|---|---|---|---|\n",
               fams[f].title);
        int first_blas = 0;
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            dcase c = {fams[f].fam, widths[wi], fams[f].B, fams[f].T, 0, {0}, 0};
            dcase_alloc(&c, &r);
            double best[3] = {1e30, 1e30, 1e30};
            const int routes[3] = {DD_NN_ROUTE_FAST, DD_NN_ROUTE_BLAS, DD_NN_ROUTE_AUTO};
            const int fast = fast_applies(c.fam, c.C, level);
            int nrep = reps;
            for (int q = 0; q < 1 + fast; q++) { /* warm-up; long cases get fewer repetitions */
                dd_nn_route_set(routes[q]);
                double t = dtime(&c);
                if (t > 0.2 && nrep > 2) nrep = 2;
            }
            /* auto is timed too where it may mix the two (the GRU) */
            const int nq = c.fam == FAM_GRU ? 3 : 2;
            for (int rep = 0; rep < nrep; rep++)
                for (int q = fast ? 0 : 1; q < nq; q++) {
                    dd_nn_route_set(routes[q]);
                    double t = dtime(&c);
                    if (t < best[q]) best[q] = t;
                }
            dd_nn_route_set(DD_NN_ROUTE_AUTO);
            const int auto_fast = auto_takes_fast(c.fam, c.C, level);
            const double tf = best[0] * 1e3, tb = best[1] * 1e3, ta = best[2] * 1e3;
            if (fast && tb < tf && !first_blas) first_blas = widths[wi];
            if (fast && nq == 3)
                printf("| %d | %.3f | %.3f | %.1f | %.1f | %s | %s (%.3f ms) |\n", widths[wi], tf, tb,
                       c.gflop / (tf * 1e-3), c.gflop / (tb * 1e-3), tf < tb ? "fast" : "sgemm",
                       auto_fast ? "fused" : "sgemm", ta);
            else if (fast)
                printf("| %d | %.3f | %.3f | %.1f | %.1f | %s | %s |\n", widths[wi], tf, tb, c.gflop / (tf * 1e-3),
                       c.gflop / (tb * 1e-3), tf < tb ? "fast" : "sgemm", auto_fast ? "fast" : "sgemm");
            else
                printf("| %d | - | %.3f | - | %.1f | (sgemm only) | sgemm |\n", widths[wi], tb,
                       c.gflop / (tb * 1e-3));
            fflush(stdout);
            for (int i = 0; i < 12; i++) dd_free(c.buf[i]);
        }
        if (first_blas) printf("\nfirst width where sgemm wins: %d\n", first_blas);
        else printf("\nthe fast route wins (or is the only kernel) at every width\n");
    }
    printf("\nthresholds in use (src/nn/simd.h): conv/dense kernel up to %d vectors of channels (%d at %s), "
           "or sums of up to %d terms; GRU fused up to H = %d; gemm_nt kernel up to M N = %zu at AVX-512, %zu at "
           "AVX2\n",
           DD_NN_CONV_FAST_MAX_VEC, DD_NN_CONV_FAST_MAX_VEC * dd_nn_simd_width(level), dd_nn_simd_name(level),
           DD_NN_CONV_FAST_SHORT,
           DD_NN_GRU_FUSED_MAX_H, DD_NN_GEMM_NT_FAST_MAX_AVX512, DD_NN_GEMM_NT_FAST_MAX_AVX2);
    return 0;
}

/* ------------------------------------------------------------------ --tcn-layer */

static int tcn_layer(int reps) {
    const int B = 64, T = 200, C = 96, K = 5, d = 4;
    const size_t n = (size_t)B * T * C, nw = (size_t)C * K;
    dd_rng r;
    dd_rng_seed(&r, 3);
    float *x = frand(n, &r, 3), *w = frand(nw, &r, 0.4), *g = frand(n, &r, 1), *pre = frand(n, &r, 0);
    float *out = frand(n, &r, 0), *din = frand(n, &r, 0), *scr = frand(2 * n, &r, 0), *dw = frand(nw, &r, 0);
    printf("tcn layer B=%d T=%d C=%d K=%d d=%d, SIMD %s, best of %d (ms, CPU time; wall)\n", B, T, C, K, d,
           dd_nn_simd_name(dd_nn_simd_level()), reps);
    for (int resid = 0; resid <= 1; resid++) {
        double best[3][2][2]; /* variant, fwd/bwd, cpu/wall */
        for (int v = 0; v < 3; v++)
            for (int j = 0; j < 2; j++) best[v][j][0] = best[v][j][1] = 1e30;
        for (int rep = 0; rep < reps; rep++)
            for (int v = 0; v < 3; v++) {
                double c0 = cpu_ms(), t0 = dd_now();
                if (v == 0) {
                    dd_conv1d_forward(pre, x, w, NULL, B, T, C, C, K, d, C);
                    dd_act_forward(DD_ACT_HARDSWISH, out, pre, n);
                    if (resid) dd_add_forward(out, out, x, n);
                } else {
                    dd_conv1d_dw_hswish_forward(v == 1 ? pre : NULL, out, x, w, B, T, C, K, d, resid);
                }
                double c1 = cpu_ms(), t1 = dd_now();
                memset(din, 0, n * sizeof(float)); /* the stage framework's zeroing, in both */
                if (v == 0) {
                    if (resid) dd_add_backward(din, NULL, g, n);
                    memset(scr, 0, n * sizeof(float));
                    dd_act_backward(DD_ACT_HARDSWISH, scr, g, pre, NULL, n);
                    dd_conv1d_backward(din, dw, NULL, scr, x, w, B, T, C, C, K, d, C);
                } else {
                    dd_conv1d_dw_hswish_backward(din, dw, g, v == 1 ? pre : NULL, x, w, B, T, C, K, d, resid, scr);
                }
                double c2 = cpu_ms(), t2 = dd_now();
                const double m[2][2] = {{c1 - c0, (t1 - t0) * 1e3}, {c2 - c1, (t2 - t1) * 1e3}};
                for (int j = 0; j < 2; j++)
                    for (int q = 0; q < 2; q++)
                        if (m[j][q] < best[v][j][q]) best[v][j][q] = m[j][q];
            }
        const char *names[3] = {"unfused", "fused", "fused, recomputed"};
        for (int v = 0; v < 3; v++)
            printf("  %s %-17s forward %.3f; %.3f  backward %.3f; %.3f  total %.3f (%.2fx unfused)\n",
                   resid ? "residual" : "plain   ", names[v], best[v][0][0], best[v][0][1], best[v][1][0],
                   best[v][1][1], best[v][0][0] + best[v][1][0],
                   (best[0][0][0] + best[0][1][0]) / (best[v][0][0] + best[v][1][0]));
    }
    dd_free(x), dd_free(w), dd_free(g), dd_free(pre), dd_free(out), dd_free(din), dd_free(scr), dd_free(dw);
    return 0;
}

/* ------------------------------------------------------------------ --tcn-stack */

/* tcn's 4 fused depthwise layers (C 96, K 5, dilations 1 2 4 8, T 200) on one trainer
 * chunk of B frames with every activation in its own array (as the stage framework keeps
 * them), forward then backward: layer by layer over all B frames (G = B), or frame group by
 * frame group of G frames (all 4 layers per group; dW summed per call, so not the same
 * floats: a timing driver only). Best CPU time of reps per G, the Gs alternating. */
static int tcn_stack(int reps, int B, int recompute) {
    const int T = 200, C = 96, K = 5, L = 4;
    const size_t n = (size_t)B * T * C, nw = (size_t)C * K, fr = (size_t)T * C;
    dd_rng r;
    dd_rng_seed(&r, 3);
    float *act[5], *pre[4], *w[4], *dw[4], *g[2];
    for (int i = 0; i <= L; i++) act[i] = frand(n, &r, 1);
    for (int i = 0; i < L; i++) pre[i] = frand(n, &r, 0), w[i] = frand(nw, &r, 0.4), dw[i] = frand(nw, &r, 0);
    g[0] = frand(n, &r, 1), g[1] = frand(n, &r, 1);
    float *dtop = frand(n, &r, 1), *scr = frand(n, &r, 0);
    const int gs[] = {B, 1, 2, 4, 8, 16};
    const int ng = (int)(sizeof gs / sizeof gs[0]);
    double best[6][2];
    for (int v = 0; v < ng; v++) best[v][0] = best[v][1] = 1e30;
    printf("tcn stack B=%d T=%d C=%d K=%d L=%d, convolution %s, SIMD %s, best of %d (ms CPU time)\n", B, T, C, K,
           L, recompute ? "recomputed" : "stored", dd_nn_simd_name(dd_nn_simd_level()), reps);
    for (int rep = 0; rep < reps; rep++)
        for (int v = 0; v < ng; v++) {
            const int G = gs[v];
            if (G > B) continue;
            double c0 = cpu_ms();
            for (int f0 = 0; f0 < B; f0 += G) {
                const int nb = f0 + G <= B ? G : B - f0;
                const size_t o = (size_t)f0 * fr;
                for (int i = 0; i < L; i++)
                    dd_conv1d_dw_hswish_forward(recompute ? NULL : pre[i] + o, act[i + 1] + o, act[i] + o, w[i], nb,
                                                T, C, K, 1 << i, 0);
            }
            double c1 = cpu_ms();
            for (int f0 = 0; f0 < B; f0 += G) {
                const int nb = f0 + G <= B ? G : B - f0;
                const size_t o = (size_t)f0 * fr;
                const float *dcur = dtop + o;
                for (int i = L; i-- > 0;) {
                    float *dprev = g[i & 1] + o;
                    dd_conv1d_dw_hswish_backward(dprev, dw[i], dcur, recompute ? NULL : pre[i] + o, act[i] + o, w[i],
                                                 nb, T, C, K, 1 << i, DD_DW_HS_SET_DIN, scr);
                    dcur = dprev;
                }
            }
            double c2 = cpu_ms();
            if (c1 - c0 < best[v][0]) best[v][0] = c1 - c0;
            if (c2 - c1 < best[v][1]) best[v][1] = c2 - c1;
        }
    for (int v = 0; v < ng; v++)
        if (gs[v] <= B)
            printf("  G=%-3d forward %.3f  backward %.3f  total %.3f (%.2fx layer-major)\n", gs[v], best[v][0],
                   best[v][1], best[v][0] + best[v][1], (best[0][0] + best[0][1]) / (best[v][0] + best[v][1]));
    for (int i = 0; i <= L; i++) dd_free(act[i]);
    for (int i = 0; i < L; i++) dd_free(pre[i]), dd_free(w[i]), dd_free(dw[i]);
    dd_free(g[0]), dd_free(g[1]), dd_free(dtop), dd_free(scr);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--tcn-stack") == 0)
        return tcn_stack(argc > 2 ? atoi(argv[2]) : 20, argc > 3 ? atoi(argv[3]) : 32,
                         argc > 4 && strcmp(argv[4], "recompute") == 0);
    if (argc > 1 && strcmp(argv[1], "--tcn-layer") == 0) return tcn_layer(argc > 2 ? atoi(argv[2]) : 20);
    if (argc > 1 && strcmp(argv[1], "--dispatch") == 0) return dispatch(argc > 2 ? atoi(argv[2]) : 5);
    int B = argc > 1 ? atoi(argv[1]) : 64, T = argc > 2 ? atoi(argv[2]) : 200;
    int H = argc > 3 ? atoi(argv[3]) : 23, reps = argc > 4 ? atoi(argv[4]) : 20, D = 2;
    if (B < 1 || T < 1 || H < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_nn [B T H reps]\n");
        return 2;
    }
    dd_rng r;
    dd_rng_seed(&r, 1);
    size_t BT = (size_t)B * T, G = 3 * (size_t)H;
    double k = 1 / sqrt((double)H), fwd, all;

    float *x = frand(BT * D, &r, 1), *wi = frand(G * D, &r, k), *wh = frand(G * H, &r, k);
    float *bi = frand(G, &r, k), *bh = frand(G, &r, k), *y = frand(BT * H, &r, 0);
    float *dy = frand(BT * H, &r, 1), *dx = frand(BT * D, &r, 0), *dwi = frand(G * D, &r, 0);
    float *dwh = frand(G * H, &r, 0), *dbi = frand(G, &r, 0), *dbh = frand(G, &r, 0);
    float *ws = dd_calloc(dd_gru_workspace_size(B, T, D, H), sizeof(float));
    double gflop = 2.0 * BT * G * (D + H) * 1e-9;
    double cfwd, call;
    TIME_BEST2(fwd, cfwd, reps, dd_gru_forward(y, ws, x, NULL, wi, wh, bi, bh, B, T, D, H));
    TIME_BEST2(all, call, reps, {
        dd_gru_forward(y, ws, x, NULL, wi, wh, bi, bh, B, T, D, H);
        dd_gru_backward(dx, NULL, dwi, dwh, dbi, dbh, dy, ws, x, wi, wh, B, T, D, H);
    });
    printf("GRU  B=%d T=%d D=%d H=%d: forward %.3f ms (%.2f GFLOP/s), forward+backward %.3f ms "
           "(%.2f GFLOP/s), %.1f us per step fwd+bwd; CPU time: forward %.3f ms, "
           "forward+backward %.3f ms\n",
           B, T, D, H, fwd, gflop / (fwd * 1e-3), all, 3 * gflop / (all * 1e-3), all * 1e3 / T,
           cfwd, call);
    dd_free(ws);

    /* LSTM, same sizes */
    size_t G4 = 4 * (size_t)H;
    float *lwi = frand(G4 * D, &r, k), *lwh = frand(G4 * H, &r, k), *lb = frand(G4, &r, k);
    float *ldwi = frand(G4 * D, &r, 0), *ldwh = frand(G4 * H, &r, 0), *ldb = frand(G4, &r, 0);
    float *lws = dd_calloc(dd_lstm_workspace_size(B, T, D, H), sizeof(float));
    double lgflop = 2.0 * BT * G4 * (D + H) * 1e-9;
    TIME_BEST(fwd, reps, dd_lstm_forward(y, NULL, lws, x, NULL, NULL, lwi, lwh, lb, lb, B, T, D, H));
    TIME_BEST(all, reps, {
        dd_lstm_forward(y, NULL, lws, x, NULL, NULL, lwi, lwh, lb, lb, B, T, D, H);
        dd_lstm_backward(dx, NULL, NULL, ldwi, ldwh, ldb, ldb, dy, NULL, lws, x, lwi, lwh, B, T, D, H);
    });
    printf("LSTM B=%d T=%d D=%d H=%d: forward %.3f ms (%.2f GFLOP/s), forward+backward %.3f ms "
           "(%.2f GFLOP/s)\n",
           B, T, D, H, fwd, lgflop / (fwd * 1e-3), all, 3 * lgflop / (all * 1e-3));

    /* Dense H -> 2 over all rows (the GRU model's output layer) */
    float *fw = frand(2 * (size_t)H, &r, k), *fb = frand(2, &r, k), *o2 = frand(BT * 2, &r, 0);
    float *dfw = frand(2 * (size_t)H, &r, 0), *dfb = frand(2, &r, 0), *dh = frand(BT * H, &r, 0);
    TIME_BEST(all, reps, {
        dd_dense_forward(o2, y, fw, fb, BT, H, 2);
        dd_dense_backward(dh, dfw, dfb, dy, y, fw, BT, H, 2);
    });
    printf("Dense %d->2 over %zu rows: forward+backward %.3f ms\n", H, BT, all);

    /* TCN depthwise conv: C = 16 channels, K = 5, dilation 4 */
    int C = 16;
    float *cin = frand(BT * C, &r, 1), *cw = frand((size_t)C * 5, &r, 0.4), *cb = frand(C, &r, 0.1);
    float *cout = frand(BT * C, &r, 0), *cdi = frand(BT * C, &r, 0), *cdw = frand((size_t)C * 5, &r, 0);
    float *cdb = frand(C, &r, 0);
    TIME_BEST(all, reps, {
        dd_conv1d_forward(cout, cin, cw, cb, B, T, C, C, 5, 4, C);
        dd_conv1d_backward(cdi, cdw, cdb, cin, cin, cw, B, T, C, C, 5, 4, C);
    });
    printf("Depthwise conv C=%d K=5 d=4 over B=%d T=%d: forward+backward %.3f ms\n", C, B, T, all);

    dd_free(x), dd_free(wi), dd_free(wh), dd_free(bi), dd_free(bh), dd_free(y), dd_free(dy);
    dd_free(dx), dd_free(dwi), dd_free(dwh), dd_free(dbi), dd_free(dbh);
    dd_free(lwi), dd_free(lwh), dd_free(lb), dd_free(ldwi), dd_free(ldwh), dd_free(ldb), dd_free(lws);
    dd_free(fw), dd_free(fb), dd_free(o2), dd_free(dfw), dd_free(dfb), dd_free(dh);
    dd_free(cin), dd_free(cw), dd_free(cb), dd_free(cout), dd_free(cdi), dd_free(cdw), dd_free(cdb);
    return 0;
}
