/* Micro-benchmark of the neural layers in float32: GRU (the OpenDPD PA model's layer),
 * LSTM, dense and the TCN's depthwise conv, forward and forward+backward, one thread.
 *
 * Build (from the source root, after the library is built in build/):
 *   cc -O2 -Iinclude bench/bench_nn.c -Lbuild -ldistdpd -Wl,-rpath,$PWD/build -lm -o bench_nn
 * Run:  OPENBLAS_NUM_THREADS=1 ./bench_nn [B T H reps]      (default 64 200 23 20)
 *
 * GFLOP/s counts the matrix products only: a GRU step costs 2*3H*(D+H) flops per sequence
 * forward and twice that backward (input + weight gradients); an LSTM 2*4H*(D+H). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "distdpd/nn.h"

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

int main(int argc, char **argv) {
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
    TIME_BEST(fwd, reps, dd_gru_forward(y, ws, x, NULL, wi, wh, bi, bh, B, T, D, H));
    TIME_BEST(all, reps, {
        dd_gru_forward(y, ws, x, NULL, wi, wh, bi, bh, B, T, D, H);
        dd_gru_backward(dx, NULL, dwi, dwh, dbi, dbh, dy, ws, x, wi, wh, B, T, D, H);
    });
    printf("GRU  B=%d T=%d D=%d H=%d: forward %.3f ms (%.2f GFLOP/s), forward+backward %.3f ms "
           "(%.2f GFLOP/s), %.1f us per step fwd+bwd\n",
           B, T, D, H, fwd, gflop / (fwd * 1e-3), all, 3 * gflop / (all * 1e-3), all * 1e3 / T);
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
