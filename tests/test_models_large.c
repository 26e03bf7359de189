/* Large configurations of the scalable models (resnet, tcn, stacked gru / lstm,
 * hammerstein), docs/models.md:
 * - at >= 50 M parameters (created, never allocated): parameter counts equal the
 *   closed-form formulas, FLOPs per sample resnet's formula, the workspace and the saved
 *   part of resnet equal their closed forms (so size_t sizing, no int overflow), also at
 *   the largest configuration (1.1e12 parameters) and the largest batch (B T = 2^26);
 * - one ~50 M model (resnet hidden 1024, 12 blocks) runs forward and backward at B 1;
 * - 1-5 M parameter models of each family: forward / backward at B 1, T 12 finite, and a
 *   central finite difference of L = sum y r along one direction (a middle layer's
 *   weights plus the gradient) within 2 %;
 * - initialisation of deep stacks (docs/models.md, "Initialisation of deep models"): up to
 *   the default depth PyTorch's bounds are reached unscaled; beyond it resnet's proj and
 *   hammerstein's FIR are scaled by sqrt(L0 / L); a residual tcn (> 12 layers) starts
 *   with zero depthwise weights; and the output scale at init stays O(1) at 256 blocks
 *   where PyTorch's init gives about 15x the input (resnet) or NaN (hammerstein), with a
 *   non-zero gradient in every stage of a 64-layer tcn. */
#include <math.h>
#include <stdint.h>

#include "distdpd/model.h"
#include "dd_test.h"

static dd_model *create(const char *name, int hidden, int layers, int kernel, int memory) {
    dd_model_cfg c = {0}; /* 0: the model's default (the option is not set) */
    dd_model_cfg_set(&c, "hidden", hidden);
    dd_model_cfg_set(&c, "layers", layers);
    dd_model_cfg_set(&c, "kernel", kernel);
    dd_model_cfg_set(&c, "memory", memory);
    dd_model *m = NULL;
    CHECK_OK(dd_model_create(name, &c, &m));
    return m;
}

static uint64_t r16(uint64_t n) { return (n + 15) / 16 * 16; }

/* ------------------------------------------------------------ counts and sizes */

static void check_count(const char *name, int hidden, int layers, int kernel, int memory, uint64_t want) {
    dd_model *m = create(name, hidden, layers, kernel, memory);
    if (!m) return;
    CHECK(dd_model_num_params(m) == want, "%s hidden %d layers %d: %zu parameters, formula %llu", name, hidden,
          layers, dd_model_num_params(m), (unsigned long long)want);
    CHECK(dd_model_params(m)->total >= want && dd_model_params(m)->total % 16 == 0, "%s: arena %zu", name,
          dd_model_params(m)->total);
    dd_model_destroy(&m);
}

/* resnet: workspace (2L + 5) r16(BT C) + r16(6 BT) + W and saved (2L + 1) r16(BT C) + r16(6 BT)
 * (model.c's layout: L + 1 boundaries, the stem's features, one saved tanh per block,
 * scratch 2 BT C + W, two gradient buffers of BT C), W = r16(2 R C K) the im2col blocks of
 * the blocks' convolutions when C > 96 and K > 1 (else 0), R = min(BT, max(64, 2^20 / (C K)))
 * rows per block (conv_gemm.c). */
static void check_resnet_sizes(int C, int L, int K, int B, int T) {
    dd_model *m = create("resnet", C, L, K, 0);
    if (!m) return;
    const uint64_t c = (uint64_t)C, l = (uint64_t)L, k = (uint64_t)K, BT = (uint64_t)B * (uint64_t)T;
    const uint64_t params = 7 * c + l * (k * c * c + c * c + 2 * c) + 2 * c + 2;
    CHECK(dd_model_num_params(m) == params, "resnet %d x %d x %d: %zu parameters, formula %llu", C, L, K,
          dd_model_num_params(m), (unsigned long long)params);
    const uint64_t nc = r16(BT * c), nf = r16(BT * 6);
    uint64_t R = ((uint64_t)1 << 20) / (c * k);
    R = R < 64 ? 64 : R;
    R = R < BT ? R : BT;
    const uint64_t W = c > 96 && k > 1 ? r16(2 * R * c * k) : 0;
    const uint64_t ws = (2 * l + 5) * nc + nf + W, saved = (2 * l + 1) * nc + nf;
    const size_t S = dd_model_num_stages(m);
    CHECK(S == (size_t)L + 2, "resnet: %zu stages", S);
    CHECK(dd_model_workspace_size(m, B, T) == ws, "resnet %d x %d at B T = %llu: workspace %zu, formula %llu", C, L,
          (unsigned long long)BT, dd_model_workspace_size(m, B, T), (unsigned long long)ws);
    CHECK(dd_model_range_saved(m, 0, S, B, T) == saved, "resnet %d x %d: saved %zu, formula %llu", C, L,
          dd_model_range_saved(m, 0, S, B, T), (unsigned long long)saved);
    const double fl = (2.0 * 6 * c + 16) + l * (2.0 * (k + 1) * c * c + 6.0 * c) + 2.0 * 2 * c;
    CHECK(fabs(dd_model_flops_per_sample(m, 0) - fl) <= 1e-9 * fl, "resnet flops %.6g, formula %.6g",
          dd_model_flops_per_sample(m, 0), fl);
    CHECK(dd_model_flops_per_sample(m, 1) == 2 * dd_model_flops_per_sample(m, 0), "resnet backward flops");
    dd_model_destroy(&m);
}

static void test_counts_50m(void) {
    /* >= 50 M parameters in every scalable family (formulas of docs/models.md) */
    const uint64_t C = 1024, H = 2048, Hh = 4096, Ct = 4096;
    check_count("resnet", 1024, 12, 3, 0, 7 * C + 12 * (3 * C * C + C * C + 2 * C) + 2 * C + 2);
    check_count("tcn", 4096, 192, 64, 0, 7 * Ct + 192 * 64 * Ct + 2 * Ct);
    check_count("gru", 2048, 3, 0, 0, 3 * H * H + 14 * H + 2 + 2 * (6 * H * H + 6 * H));
    check_count("lstm", 2048, 2, 0, 0, 4 * H * H + 18 * H + 2 + (8 * H * H + 8 * H));
    check_count("hammerstein", 4096, 3, 0, 4, 3 * (Hh * Hh + 5 * Hh + 2 + 8 * 4));
    CHECK(7 * C + 12 * (3 * C * C + C * C + 2 * C) + 2 * C + 2 >= 50000000 &&
              7 * Ct + 192 * 64 * Ct + 2 * Ct >= 50000000 && 4 * H * H + 18 * H + 2 + (8 * H * H + 8 * H) >= 50000000 &&
              3 * (Hh * Hh + 5 * Hh + 2 + 32) >= 50000000,
          "the configurations reach 50 M");
    /* sizes: the 50 M resnet at the recipe's batch, the largest resnet at the largest
     * batch the model layer accepts (no int overflow anywhere in the sizing) */
    check_resnet_sizes(1024, 12, 3, 64, 200);
    check_resnet_sizes(4096, 1024, 64, 1024, 65536);
    check_count("tcn", 4096, 1024, 64, 0, 9 * (uint64_t)4096 + (uint64_t)1024 * 64 * 4096);
    check_count("hammerstein", 4096, 1024, 0, 1024, (uint64_t)1024 * (Hh * Hh + 5 * Hh + 2 + 8 * 1024));
    dd_model *m = create("resnet", 16, 4, 3, 0);
    if (m) {
        float one = 0;
        CHECK_ERR(dd_model_forward(m, &one, &one, &one, 1025, 65536, &one), DD_ERR_ARG, "exceeds");
        dd_model_destroy(&m);
    }
}

/* ------------------------------------------------------------ forward / backward */

static void rand_vec(float *v, size_t n, double k, dd_rng *rng) {
    for (size_t i = 0; i < n; i++) v[i] = (float)((dd_rng_uniform(rng) * 2 - 1) * k);
}

static double loss(const dd_model *m, const float *p, const float *x, const float *r, float *y, int B, int T,
                   float *ws) {
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    double L = 0;
    for (size_t i = 0; i < (size_t)B * T * 2; i++) L += (double)y[i] * r[i];
    return L;
}

/* Forward, backward, and a finite difference along the gradient (plus noise) of entry
 * `ent` (NULL: none). */
static void run_model(const char *name, int hidden, int layers, int kernel, int memory, const char *ent) {
    dd_model *m = create(name, hidden, layers, kernel, memory);
    if (!m) return;
    char desc[256];
    dd_model_describe(m, desc, sizeof desc);
    const dd_param_table *t = dd_model_params(m);
    enum { B = 1, T = 12, N = 2 * B * T };
    float *p = dd_calloc(t->total, sizeof(float)), *g = dd_calloc(t->total, sizeof(float));
    float *ws = dd_calloc(dd_model_workspace_size(m, B, T), sizeof(float));
    float x[N], y[N], r[N], dx[N] = {0};
    int fd_ok = 0;
    dd_rng rng;
    dd_rng_seed(&rng, 11);
    rand_vec(x, N, 0.5, &rng);
    rand_vec(r, N, 1.0, &rng);
    if (!p || !g || !ws) {
        CHECK(0, "%s: out of memory", desc);
        goto out;
    }
    dd_model_init(m, p, 3);
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    CHECK_OK(dd_model_backward(m, p, g, x, r, dx, B, T, ws));
    int fin = 1;
    for (int i = 0; i < N; i++) fin &= isfinite(y[i]) && isfinite(dx[i]);
    double gn = 0;
    for (size_t i = 0; i < t->total; i++) gn += (double)g[i] * g[i];
    CHECK(fin && gn > 0 && isfinite(gn), "%s: non-finite output or zero / non-finite gradient (%g)", desc, gn);
    const dd_param_entry *e = ent ? dd_param_table_find(t, ent) : NULL;
    CHECK(!ent || e, "%s: no entry %s", desc, ent);
    if (e) {
        float *v = p + e->offset, *save = dd_calloc(e->size, sizeof(float)), *dir = dd_calloc(e->size, sizeof(float));
        double gmax = 0, an = 0;
        for (size_t i = 0; i < e->size; i++) gmax = fmax(gmax, fabs(g[e->offset + i]));
        rand_vec(dir, e->size, 0.3, &rng);
        for (size_t i = 0; gmax > 0 && i < e->size; i++) dir[i] += (float)(g[e->offset + i] / gmax);
        for (size_t i = 0; i < e->size; i++) an += (double)dir[i] * g[e->offset + i];
        memcpy(save, v, e->size * sizeof(float));
        static const double steps[] = {1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5};
        double fd = 0, err = INFINITY;
        for (int a = 0; a < 6 && err > 2e-2; a++) {
            const double h = steps[a];
            for (size_t i = 0; i < e->size; i++) v[i] = save[i] + (float)(h * dir[i]);
            double lp = loss(m, p, x, r, y, B, T, ws);
            for (size_t i = 0; i < e->size; i++) v[i] = save[i] - (float)(h * dir[i]);
            double lm = loss(m, p, x, r, y, B, T, ws);
            memcpy(v, save, e->size * sizeof(float));
            fd = (lp - lm) / (2 * h);
            err = fabs(fd - an) / fmax(fabs(an), 1e-6);
        }
        CHECK(err <= 2e-2, "%s: d/d %s analytic %.6e, finite difference %.6e (rel err %.2g)", desc, ent, an, fd,
              err);
        fd_ok = err <= 2e-2;
        dd_free(save);
        dd_free(dir);
    }
    printf("%-56s forward/backward%s\n", desc, !e ? "" : fd_ok ? ", finite difference ok" : ", FINITE DIFFERENCE FAILS");
out:
    dd_free(p);
    dd_free(g);
    dd_free(ws);
    dd_model_destroy(&m);
}

/* ------------------------------------------------------------ initialisation */

/* max |p| over entries whose name ends with suffix */
static double max_abs(const dd_model *m, const float *p, const char *suffix) {
    const dd_param_table *t = dd_model_params(m);
    double mx = 0;
    for (size_t i = 0; i < t->count; i++) {
        const dd_param_entry *e = &t->entries[i];
        size_t ls = strlen(suffix), ln = strlen(e->name);
        if (ln < ls || strcmp(e->name + ln - ls, suffix) != 0) continue;
        for (size_t k = 0; k < e->size; k++) mx = fmax(mx, fabs(p[e->offset + k]));
    }
    return mx;
}

static float *init_params(const dd_model *m) {
    float *p = dd_calloc(dd_model_params(m)->total, sizeof(float));
    if (p) dd_model_init(m, p, 7);
    return p;
}

static void test_init_rules(void) {
    /* resnet hidden 16, kernel 3: PyTorch bound for proj 1/sqrt(16) = 0.25, conv 1/sqrt(48) */
    const int Ls[] = {2, 4, 16, 64};
    for (size_t i = 0; i < sizeof Ls / sizeof Ls[0]; i++) {
        dd_model *m = create("resnet", 16, Ls[i], 3, 0);
        float *p = m ? init_params(m) : NULL;
        if (!p) {
            dd_model_destroy(&m);
            continue;
        }
        const double s = Ls[i] > 4 ? sqrt(4.0 / Ls[i]) : 1.0, k = 0.25, kc = 1 / sqrt(48.0);
        double w = max_abs(m, p, "proj.weight"), b = max_abs(m, p, "proj.bias"), c = max_abs(m, p, "conv.weight");
        CHECK(w <= k * s * (1 + 1e-6) && w > 0.95 * k * s, "resnet L %d: max |proj.weight| %.4f, want ~%.4f", Ls[i],
              w, k * s);
        CHECK(b <= k * s * (1 + 1e-6) && b > 0.5 * k * s, "resnet L %d: max |proj.bias| %.4f, bound %.4f", Ls[i], b,
              k * s);
        CHECK(c <= kc * (1 + 1e-6) && c > 0.95 * kc, "resnet L %d: conv weights unscaled (max %.4f)", Ls[i], c);
        dd_free(p);
        dd_model_destroy(&m);
    }
    /* hammerstein memory 4: FIR fan-in 16, bound 0.25, scaled beyond 2 blocks */
    const int Lh[] = {1, 2, 8, 32};
    for (size_t i = 0; i < sizeof Lh / sizeof Lh[0]; i++) {
        dd_model *m = create("hammerstein", 8, Lh[i], 0, 4);
        float *p = m ? init_params(m) : NULL;
        if (!p) {
            dd_model_destroy(&m);
            continue;
        }
        const double s = Lh[i] > 2 ? sqrt(2.0 / Lh[i]) : 1.0, f = max_abs(m, p, "fir.weight");
        CHECK(f <= 0.25 * s * (1 + 1e-6) && f > 0.8 * 0.25 * s, "hammerstein L %d: max |fir| %.4f, want ~%.4f",
              Lh[i], f, 0.25 * s);
        dd_free(p);
        dd_model_destroy(&m);
    }
    /* tcn: plain up to 12 layers (PyTorch's init), residual with zero depthwise weights beyond */
    for (int L = 12; L <= 13; L++) {
        dd_model *m = create("tcn", 8, L, 3, 0);
        float *p = m ? init_params(m) : NULL;
        if (!p) {
            dd_model_destroy(&m);
            continue;
        }
        double mx = 0;
        char nm[32];
        for (int i = 1; i <= L; i++) {
            snprintf(nm, sizeof nm, "network.%d.weight", 2 * i);
            const dd_param_entry *e = dd_param_table_find(dd_model_params(m), nm);
            CHECK(e != NULL, "tcn: no %s", nm);
            for (size_t k = 0; e && k < e->size; k++) mx = fmax(mx, fabs(p[e->offset + k]));
        }
        if (L == 12) CHECK(mx > 0.5, "tcn 12 layers: depthwise weights max %.3f (PyTorch's bound 0.577)", mx);
        else CHECK(mx == 0, "tcn 13 layers: depthwise weights start at %.3g, want 0", mx);
        /* the residual layer adds C FLOPs per sample */
        const double per = dd_model_flops_per_sample(m, 0);
        const double want = (2.0 * 6 * 8 + 4 * 8 + 14) + L * (2.0 * 3 * 8 + 4 * 8 + (L > 12 ? 8 : 0)) + 2.0 * 2 * 8;
        CHECK(fabs(per - want) < 1e-9, "tcn %d layers: %.1f FLOPs per sample, formula %.1f", L, per, want);
        dd_free(p);
        dd_model_destroy(&m);
    }
}

/* rms of y - x (and of y) over B frames at init. */
static void output_scale(const char *name, int hidden, int layers, int kernel, int memory, double *rms_d,
                         double *rms_y, double *gmin_stage) {
    *rms_d = *rms_y = NAN;
    *gmin_stage = NAN;
    dd_model *m = create(name, hidden, layers, kernel, memory);
    float *p = m ? init_params(m) : NULL;
    enum { B = 2, T = 64, N = 2 * B * T };
    float x[N], y[N], dy[N];
    float *ws = m ? dd_calloc(dd_model_workspace_size(m, B, T), sizeof(float)) : NULL;
    float *g = m ? dd_calloc(dd_model_params(m)->total, sizeof(float)) : NULL;
    if (!p || !ws || !g) goto out;
    dd_rng rng;
    dd_rng_seed(&rng, 21);
    rand_vec(x, N, 0.43, &rng); /* rms 0.25, as DPA_200MHz's input */
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    double sd = 0, sy = 0;
    for (int i = 0; i < N; i++) {
        sd += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        sy += (double)y[i] * y[i];
        dy[i] = (float)(2 * ((double)y[i] - 3 * x[i]) / N); /* MSE against a gain-3 target */
    }
    *rms_d = sqrt(sd / N);
    *rms_y = sqrt(sy / N);
    CHECK_OK(dd_model_backward(m, p, g, x, dy, NULL, B, T, ws));
    double gmin = INFINITY;
    for (size_t s = 0; s < dd_model_num_stages(m); s++) {
        dd_stage_info si;
        CHECK_OK(dd_model_stage_info(m, s, &si));
        double gs = 0;
        for (size_t i = si.lo; i < si.hi; i++) gs += (double)g[i] * g[i];
        gmin = fmin(gmin, sqrt(gs));
    }
    *gmin_stage = gmin;
out:
    dd_free(p);
    dd_free(ws);
    dd_free(g);
    dd_model_destroy(&m);
}

static void test_init_scale(void) {
    double d, y, gmin;
    output_scale("resnet", 16, 256, 3, 0, &d, &y, &gmin);
    CHECK(isfinite(d) && d < 1.0 && gmin > 0, "resnet 16 x 256 blocks at init: rms(y - x) %.3g (PyTorch's init: ~4), "
                                              "smallest stage gradient %.3g", d, gmin);
    output_scale("hammerstein", 16, 256, 0, 4, &d, &y, &gmin);
    CHECK(isfinite(y) && y < 1.0 && gmin > 0, "hammerstein 16 x 256 blocks at init: rms(y) %.3g (PyTorch's init: NaN), "
                                              "smallest stage gradient %.3g", y, gmin);
    output_scale("tcn", 16, 64, 3, 0, &d, &y, &gmin);
    CHECK(isfinite(d) && d < 1.0 && gmin > 1e-8, "tcn 16 x 64 layers at init: rms(y - x) %.3g, smallest stage "
                                                 "gradient %.3g (PyTorch's init on a plain stack: 0)", d, gmin);
    output_scale("gru", 64, 8, 0, 0, &d, &y, &gmin);
    CHECK(isfinite(y) && y < 1.0 && gmin > 1e-8, "gru 64 x 8 layers at init: rms(y) %.3g, smallest stage gradient %.3g",
          y, gmin);
    output_scale("lstm", 64, 8, 0, 0, &d, &y, &gmin);
    CHECK(isfinite(y) && y < 1.0 && gmin > 1e-8, "lstm 64 x 8 layers at init: rms(y) %.3g, smallest stage gradient "
                                                 "%.3g", y, gmin);
}

int main(void) {
    test_counts_50m();
    test_init_rules();
    test_init_scale();
    /* one ~50 M model end to end at B 1 */
    run_model("resnet", 1024, 12, 3, 0, NULL);
    /* 1-5 M parameters per family, with a finite difference through a middle layer */
    run_model("resnet", 256, 8, 3, 0, "blocks.4.conv.weight");
    run_model("tcn", 1024, 300, 16, 0, "network.300.weight");
    run_model("gru", 256, 3, 0, 0, "rnn.weight_hh_l1");
    run_model("lstm", 640, 2, 0, 0, "rnn.weight_ih_l1");
    run_model("hammerstein", 2048, 1, 0, 8, "blocks.0.nl.1.weight");
    return dd_test_done("test_models_large");
}
