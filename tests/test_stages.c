/* Tests of the stage structure of every model (model.h, "Stages"): the stages tile the
 * parameter table and the arenas, their widths chain from the I/Q input to the I/Q
 * output, their FLOPs add up to the model's; running the stages one at a time (each with
 * its own workspace and only its own copy of its parameter slice, as a pipeline or a
 * sharded strategy does) gives the whole model's output and gradients bit for bit, and
 * so does a split into two ranges, and inference (forward only, buffers shared between
 * the stages) in a workspace no larger than training's; dd_model_backward_cb reports each stage's gradient
 * range once, last stage first, when that range is already final. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/core.h"
#include "distdpd/model.h"
#include "test_model_util.h"

static void rand_vec(float *v, size_t n, double k, dd_rng *rng) {
    for (size_t i = 0; i < n; i++) v[i] = (float)((dd_rng_uniform(rng) * 2 - 1) * k);
}

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* A stage source that hands each stage a private copy of its slice (as ZeRO-3 does) and
 * collects its gradients in a private buffer. */
typedef struct {
    const dd_model *m;
    const float *params; /* the full arena the copies come from */
    float *copy[DD_MODEL_MAX_STAGES];
    float *grad[DD_MODEL_MAX_STAGES];
    int calls_fwd, calls_bwd, done_fwd, done_bwd;
} private_src;

static dd_status ps_params(void *user, size_t s, int bwd, const float **p) {
    private_src *ps = user;
    dd_stage_info si;
    DD_TRY(dd_model_stage_info(ps->m, s, &si));
    if (!ps->copy[s]) {
        ps->copy[s] = malloc((si.hi - si.lo + 1) * sizeof(float));
        memcpy(ps->copy[s], ps->params + si.lo, (si.hi - si.lo) * sizeof(float));
    }
    if (bwd) ps->calls_bwd++;
    else ps->calls_fwd++;
    *p = ps->copy[s];
    return DD_OK;
}

static dd_status ps_grads(void *user, size_t s, float **g) {
    private_src *ps = user;
    dd_stage_info si;
    DD_TRY(dd_model_stage_info(ps->m, s, &si));
    if (!ps->grad[s]) ps->grad[s] = calloc(si.hi - si.lo + 1, sizeof(float));
    *g = ps->grad[s];
    return DD_OK;
}

static dd_status ps_done(void *user, size_t s, int bwd) {
    (void)s;
    private_src *ps = user;
    if (bwd) ps->done_bwd++;
    else ps->done_fwd++;
    return DD_OK;
}

/* Callback record of dd_model_backward_cb. */
typedef struct {
    size_t n, lo[DD_MODEL_MAX_STAGES], hi[DD_MODEL_MAX_STAGES];
    float *snap; /* gradients of each reported range as they were at the call */
    const float *grads;
} cb_rec;

static dd_status on_done(void *user, size_t lo, size_t hi) {
    cb_rec *r = user;
    r->lo[r->n] = lo;
    r->hi[r->n] = hi;
    r->n++;
    memcpy(r->snap + lo, r->grads + lo, (hi - lo) * sizeof(float));
    return DD_OK;
}

static void check_stages(const char *name, const char *opts) {
    dd_model *m = NULL;
    dd_model_cfg cfg = tm_mcfg(opts);
    CHECK_OK(dd_model_create(name, &cfg, &m));
    if (!m) return;
    char desc[256];
    dd_model_describe(m, desc, sizeof desc);
    const dd_param_table *t = dd_model_params(m);
    const size_t S = dd_model_num_stages(m), np = t->total;
    printf("%s: %zu stage%s\n", desc, S, S == 1 ? "" : "s");
    CHECK(S >= 1, "%s: no stages", name);

    /* structure */
    double ff = 0, fb = 0;
    int ok = 1;
    for (size_t s = 0; s < S; s++) {
        dd_stage_info si;
        CHECK_OK(dd_model_stage_info(m, s, &si));
        if (getenv("DD_TEST_VERBOSE"))
            printf("  %-14s %4d -> %-4d entries [%zu, %zu) floats [%zu, %zu)\n", si.name, si.in_width, si.out_width,
                   si.e0, si.e1, si.lo, si.hi);
        ok &= s == 0 ? (si.e0 == 0 && si.lo == 0 && si.in_width == 2) : 1;
        if (s + 1 < S) {
            dd_stage_info sn;
            CHECK_OK(dd_model_stage_info(m, s + 1, &sn));
            ok &= si.e1 == sn.e0 && si.hi == sn.lo && si.out_width == sn.in_width;
        } else {
            ok &= si.e1 == t->count && si.hi == np && si.out_width == 2;
        }
        ok &= si.lo <= si.hi && si.flops_fwd > 0 && si.flops_bwd > 0;
        ff += si.flops_fwd;
        fb += si.flops_bwd;
    }
    CHECK(ok, "%s: stages do not tile the table and chain their widths", name);
    CHECK(fabs(ff - dd_model_flops_per_sample(m, 0)) <= 1e-9 * ff &&
              fabs(fb - dd_model_flops_per_sample(m, 1)) <= 1e-9 * fb,
          "%s: stage FLOPs %g/%g, model %g/%g", name, ff, fb, dd_model_flops_per_sample(m, 0),
          dd_model_flops_per_sample(m, 1));
    dd_stage_info bad;
    CHECK_ERR(dd_model_stage_info(m, S, &bad), DD_ERR_ARG, "out of range");

    /* the whole model */
    const int B = 3, T = 29;
    const size_t BT = (size_t)B * T, nx = BT * 2;
    dd_rng rng;
    dd_rng_seed(&rng, 77);
    float *p = dd_calloc(np, sizeof(float)), *g = dd_calloc(np, sizeof(float));
    dd_model_init(m, p, 3);
    for (size_t e = 0; e < t->count; e++)
        for (size_t i = 0; i < t->entries[e].size; i++)
            p[t->entries[e].offset + i] += (float)((dd_rng_uniform(&rng) * 2 - 1) * 0.05);
    float *x = malloc(nx * sizeof *x), *dy = malloc(nx * sizeof *dy), *y = malloc(nx * sizeof *y);
    float *dx = calloc(nx, sizeof *dx);
    rand_vec(x, nx, 0.7, &rng);
    rand_vec(dy, nx, 1.0, &rng);
    float *ws = dd_calloc(dd_model_workspace_size(m, B, T), sizeof(float));
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    CHECK_OK(dd_model_backward(m, p, g, x, dy, dx, B, T, ws));

    /* forward only (inference): the same output in a workspace that keeps nothing, sized
     * by the stages' forward scratch alone: nothing written past it (as many guard floats
     * after it again, so an overrun fails here instead of corrupting the heap) */
    {
        size_t wi = dd_model_infer_workspace(m, B, T);
        CHECK(wi > 0 && wi <= dd_model_workspace_size(m, B, T), "%s: inference workspace %zu > training %zu", name, wi,
              dd_model_workspace_size(m, B, T));
        const size_t GUARD = wi + 256;
        float *wsi = dd_calloc(wi + GUARD, sizeof(float)), *yi = malloc(nx * sizeof *yi);
        for (size_t i = wi; i < wi + GUARD; i++) wsi[i] = -1234.5f;
        dd_stage_src full = {p, NULL, NULL, NULL, NULL, NULL};
        CHECK_OK(dd_model_infer(m, &full, x, yi, B, T, wsi));
        CHECK(same(yi, y, nx), "%s: inference differs from the forward", name);
        int guard_ok = 1;
        for (size_t i = wi; i < wi + GUARD; i++) guard_ok &= wsi[i] == -1234.5f;
        CHECK(guard_ok, "%s: inference wrote past its workspace of %zu floats", name, wi);
        free(yi);
        dd_free(wsi);
    }

    /* one stage at a time, private parameter copies, boundary activations passed by hand */
    private_src ps;
    memset(&ps, 0, sizeof ps);
    ps.m = m;
    ps.params = p;
    dd_stage_src src = {NULL, NULL, &ps, ps_params, ps_grads, ps_done};
    float **act = calloc(S + 1, sizeof *act), **sws = calloc(S, sizeof *sws);
    act[0] = x;
    for (size_t s = 0; s < S; s++) {
        dd_stage_info si;
        CHECK_OK(dd_model_stage_info(m, s, &si));
        act[s + 1] = malloc(BT * (size_t)si.out_width * sizeof(float));
        sws[s] = dd_calloc(dd_model_range_workspace(m, s, s + 1, B, T) + 1, sizeof(float));
        CHECK(dd_model_range_saved(m, s, s + 1, B, T) <= dd_model_range_workspace(m, s, s + 1, B, T),
              "%s: saved > workspace", name);
        CHECK_OK(dd_model_range_forward(m, s, s + 1, &src, act[s], x, act[s + 1], B, T, sws[s]));
    }
    CHECK(same(act[S], y, nx), "%s: stage-by-stage forward differs from the whole model", name);
    float *dxs = calloc(nx, sizeof *dxs);
    float *dcur = dy;
    for (size_t s = S; s-- > 0;) {
        dd_stage_info si;
        CHECK_OK(dd_model_stage_info(m, s, &si));
        float *dprev = s == 0 ? dxs : calloc(BT * (size_t)si.in_width, sizeof(float));
        CHECK_OK(dd_model_range_backward(m, s, s + 1, &src, act[s], x, dcur, dprev, dxs, B, T, sws[s]));
        if (dcur != dy) free(dcur);
        dcur = dprev;
    }
    int gsame = 1;
    for (size_t s = 0; s < S; s++) {
        dd_stage_info si;
        CHECK_OK(dd_model_stage_info(m, s, &si));
        gsame &= si.hi == si.lo || same(ps.grad[s], g + si.lo, si.hi - si.lo);
    }
    CHECK(gsame, "%s: stage-by-stage parameter gradients differ from the whole model", name);
    CHECK(same(dxs, dx, nx), "%s: stage-by-stage input gradient differs from the whole model", name);
    CHECK(ps.calls_fwd == (int)S && ps.calls_bwd == (int)S && ps.done_fwd == (int)S && ps.done_bwd == (int)S,
          "%s: callbacks %d %d %d %d for %zu stages", name, ps.calls_fwd, ps.calls_bwd, ps.done_fwd, ps.done_bwd, S);

    /* two ranges [0, k) and [k, S) with the arenas */
    if (S >= 2) {
        size_t k = S / 2;
        dd_stage_info sk;
        CHECK_OK(dd_model_stage_info(m, k, &sk));
        float *mid = malloc(BT * (size_t)sk.in_width * sizeof(float)), *dmid = calloc(BT * (size_t)sk.in_width, sizeof(float));
        float *y2 = malloc(nx * sizeof *y2), *g2 = dd_calloc(np, sizeof(float)), *dx2 = calloc(nx, sizeof *dx2);
        float *w1 = dd_calloc(dd_model_range_workspace(m, 0, k, B, T), sizeof(float));
        float *w2 = dd_calloc(dd_model_range_workspace(m, k, S, B, T), sizeof(float));
        dd_stage_src full = {p, g2, NULL, NULL, NULL, NULL};
        CHECK_OK(dd_model_range_forward(m, 0, k, &full, x, x, mid, B, T, w1));
        CHECK_OK(dd_model_range_forward(m, k, S, &full, mid, x, y2, B, T, w2));
        CHECK_OK(dd_model_range_backward(m, k, S, &full, mid, x, dy, dmid, dx2, B, T, w2));
        CHECK_OK(dd_model_range_backward(m, 0, k, &full, x, x, dmid, dx2, dx2, B, T, w1));
        CHECK(same(y2, y, nx) && same(g2, g, np) && same(dx2, dx, nx), "%s: two ranges differ from the whole model",
              name);
        free(mid);
        free(dmid);
        free(y2);
        dd_free(g2);
        free(dx2);
        dd_free(w1);
        dd_free(w2);
    }

    /* backward with a callback per stage: descending ranges tiling the arena, each final
     * when reported */
    {
        float *g3 = dd_calloc(np, sizeof(float));
        cb_rec rec;
        memset(&rec, 0, sizeof rec);
        rec.snap = dd_calloc(np, sizeof(float));
        rec.grads = g3;
        CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
        CHECK_OK(dd_model_backward_cb(m, p, g3, x, dy, NULL, B, T, ws, on_done, &rec));
        int tiles = rec.n == S && rec.hi[0] == np && rec.lo[rec.n - 1] == 0;
        for (size_t i = 1; i < rec.n; i++) tiles &= rec.hi[i] == rec.lo[i - 1];
        CHECK(tiles, "%s: %zu callback ranges do not descend and tile [0, %zu)", name, rec.n, np);
        CHECK(same(rec.snap, g3, np) && same(g3, g, np), "%s: a range was not final when reported", name);
        dd_free(g3);
        dd_free(rec.snap);
    }

    for (size_t s = 0; s < S; s++) {
        free(ps.copy[s]);
        free(ps.grad[s]);
        free(act[s + 1]);
        dd_free(sws[s]);
    }
    free(act);
    free(sws);
    free(dxs);
    free(x);
    free(dy);
    free(y);
    free(dx);
    dd_free(p);
    dd_free(g);
    dd_free(ws);
    dd_model_destroy(&m);
}

int main(void) {
    size_t n = 0;
    const dd_model_info *const *reg = dd_model_registry(&n);
    for (size_t i = 0; i < n; i++) check_stages(reg[i]->name, NULL);
    check_stages("gru", "hidden=9,layers=3");
    check_stages("lstm", "hidden=7,layers=2");
    check_stages("tcn", "hidden=8,layers=6,kernel=2");
    check_stages("resnet", "hidden=10,layers=6,kernel=2");
    /* wide enough for the im2col products from stage scratch (forward half for inference) */
    check_stages("resnet", "hidden=100,layers=2,kernel=3");
    check_stages("hammerstein", "hidden=12,layers=5,memory=3");
    return dd_test_done("test_stages");
}
