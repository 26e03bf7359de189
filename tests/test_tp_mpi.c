/* MPI tests of tensor parallelism (model.h, "Tensor parallelism"; parallel.h dd_tp_group).
 * ctest runs this at 1, 2, 3 and 4 ranks; the groups are the whole world (T = np) and, at
 * np 4, also two groups of 2 (dd_comm_split). Shapes the group does not divide are
 * skipped with a line saying so (np 3: tcn hidden 8).
 *
 * - Megatron's four mappings as forward/backward duals with rank-valued inputs, so every
 *   expected value is an exact sum (tensor_parallel/test_mappings.py's method).
 * - For resnet, tcn (4 plain layers and 14 residual ones), hammerstein, gru and lstm with
 *   2 layers: the shard's init equals the whole model's init mapped through
 *   dd_model_tp_runs bit for bit; the runs ascend, stay inside their entries and, over
 *   the group, cover every whole parameter exactly once (replicated ones counted on one
 *   rank); forward output, dd_model_infer and dd_model_run_stream equal the whole
 *   model's (rel. 1e-5 of the largest |value|), backward's parameter gradients equal the
 *   whole model's mapped through the runs (per entry, rel. 1e-5 of its largest |value|)
 *   and dL/dx equals the whole model's; outputs, dL/dx and replicated gradients are the
 *   same bits on every rank of the group; the group's message and float counts of one
 *   forward + backward equal the formulas of docs/models.md.
 * - Errors: models without a tensor-parallel form, widths the group does not divide and
 *   bad groups (exact messages); T = 1 is dd_model_create bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/model.h"
#include "distdpd/parallel.h"
#include "test_model_util.h"
#include "test_mpi_util.h"

#define TOL 1e-5
#define SEED 12345

static int g_rank;

static void rand_vec(float *v, size_t n, double k, uint64_t seed) {
    dd_rng rng;
    dd_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) v[i] = (float)((dd_rng_uniform(&rng) * 2 - 1) * k);
}

/* max |a - b| / max |b| over n floats (max |a - b| when b is 0) */
static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

/* ---------------------------------------------------------------- mappings */

static void fill_rank(float *v, size_t n, float val) {
    for (size_t i = 0; i < n; i++) v[i] = val;
}

static int all_equal(const float *v, size_t n, float val) {
    for (size_t i = 0; i < n; i++)
        if (v[i] != val) return 0;
    return 1;
}

static void test_reduce_copy(dd_comm *c, const dd_model_tp *tp) {
    const int T = tp->size, r = tp->rank;
    float v[37];
    fill_rank(v, 37, (float)r);
    CHECK_OK(dd_tp_copy_fwd(tp, v, 37));
    CHECK(tm_all_ok(c, all_equal(v, 37, (float)r)), "copy-to-group forward is not the identity (T = %d)", T);
    CHECK_OK(dd_tp_copy_bwd(tp, v, 37));
    const int sum_ranks = T * (T - 1) / 2; /* 0 + 1 + ... + (T - 1): an integer */
    CHECK(tm_all_ok(c, all_equal(v, 37, (float)sum_ranks)), "copy-to-group backward: not the sum of ranks");
    fill_rank(v, 37, (float)(r + 1));
    CHECK_OK(dd_tp_reduce_fwd(tp, v, 37));
    const int sum_1_to_t = T * (T + 1) / 2; /* 1 + 2 + ... + T: an integer */
    CHECK(tm_all_ok(c, all_equal(v, 37, (float)sum_1_to_t)), "reduce-from-group forward: not the sum");
    fill_rank(v, 37, (float)r);
    CHECK_OK(dd_tp_reduce_bwd(tp, v, 37));
    CHECK(tm_all_ok(c, all_equal(v, 37, (float)r)), "reduce-from-group backward is not the identity");
}

/* x[i][c] = 100 i + c: scatter keeps columns [r cl, (r+1) cl); gather of slices valued
 * 100 i + (r cl + j) rebuilds x; the backward of scatter gathers rank-valued slices (each
 * column then holds its owner's rank) and gather's backward keeps the own slice. */
static void test_scatter_gather(dd_comm *c, const dd_model_tp *tp) {
    enum { ROWS = 5, CL = 3 };
    const int T = tp->size, r = tp->rank, cols = CL * T;
    float x[ROWS * CL * 4], xl[ROWS * CL], tmp[ROWS * CL * 4], back[ROWS * CL * 4];
    int ok = 1;
    for (int i = 0; i < ROWS; i++)
        for (int k = 0; k < cols; k++) x[i * cols + k] = (float)(100 * i + k);
    CHECK_OK(dd_tp_scatter_fwd(tp, x, xl, ROWS, (size_t)cols));
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < CL; j++) ok &= xl[i * CL + j] == (float)(100 * i + r * CL + j);
    CHECK(tm_all_ok(c, ok), "scatter-to-group forward: not the own slice (T = %d)", T);
    CHECK_OK(dd_tp_gather_fwd(tp, xl, back, ROWS, (size_t)cols, tmp));
    CHECK(tm_all_ok(c, memcmp(back, x, sizeof(float) * ROWS * (size_t)cols) == 0), "gather-from-group forward");
    fill_rank(xl, ROWS * CL, (float)r);
    CHECK_OK(dd_tp_scatter_bwd(tp, xl, back, ROWS, (size_t)cols, tmp));
    ok = 1;
    for (int i = 0; i < ROWS; i++)
        for (int k = 0; k < cols; k++) {
            const int owner = k / CL; /* the rank whose block holds column k: a floor on purpose */
            ok &= back[i * cols + k] == (float)owner;
        }
    CHECK(tm_all_ok(c, ok), "scatter-to-group backward: not the owners' ranks");
    CHECK_OK(dd_tp_gather_bwd(tp, x, xl, ROWS, (size_t)cols));
    ok = 1;
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < CL; j++) ok &= xl[i * CL + j] == (float)(100 * i + r * CL + j);
    CHECK(tm_all_ok(c, ok), "gather-from-group backward: not the own slice");
    float one[4] = {(float)r, 0, 0, 0}, all[4];
    CHECK_OK(dd_tp_gather_fwd(tp, one, all, 1, (size_t)T, NULL)); /* one row: no tmp */
    ok = 1;
    for (int k = 0; k < T; k++) ok &= all[k] == (float)k;
    CHECK(tm_all_ok(c, ok), "gather-from-group of one row");
    if (T > 1) {
        CHECK_ERR(dd_tp_scatter_fwd(tp, x, xl, ROWS, (size_t)cols + 1), DD_ERR_ARG, "are not divisible");
        CHECK_ERR(dd_tp_gather_fwd(tp, xl, x, ROWS, (size_t)cols, NULL), DD_ERR_ARG, "need tmp");
    }
}

/* ---------------------------------------------------------------- one model */

typedef struct {
    const char *name, *cfg;
    int B, T;
} tp_case;

/* The whole model's arrays and the shard's, on one rank. */
typedef struct {
    dd_model *whole, *shard;
    size_t nw, ns, nx;
    float *pw, *gw, *ps, *gs, *x, *dy, *yw, *ys, *dxw, *dxs;
} tp_run_set;

static void set_free(tp_run_set *s) {
    dd_model_destroy(&s->whole);
    dd_model_destroy(&s->shard);
    float *p[] = {s->pw, s->gw, s->ps, s->gs, s->x, s->dy, s->yw, s->ys, s->dxw, s->dxs};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

static int set_alloc(tp_run_set *s, const tp_case *tc) {
    s->nw = dd_model_params(s->whole)->total;
    s->ns = dd_model_params(s->shard)->total;
    s->nx = 2 * (size_t)tc->B * (size_t)tc->T;
    s->pw = calloc(s->nw, sizeof(float)), s->gw = calloc(s->nw, sizeof(float));
    s->ps = calloc(s->ns, sizeof(float)), s->gs = calloc(s->ns, sizeof(float));
    s->x = calloc(s->nx, sizeof(float)), s->dy = calloc(s->nx, sizeof(float));
    s->yw = calloc(s->nx, sizeof(float)), s->ys = calloc(s->nx, sizeof(float));
    s->dxw = calloc(s->nx, sizeof(float)), s->dxs = calloc(s->nx, sizeof(float));
    return s->pw && s->gw && s->ps && s->gs && s->x && s->dy && s->yw && s->ys && s->dxw && s->dxs;
}

/* Shard init == whole init mapped through the runs (bit for bit), padding zero; runs
 * ascend and stay inside their entries; over the group every whole parameter is covered
 * once. */
static void check_init_runs(dd_comm *c, tp_run_set *s, const char *what) {
    const dd_tp_run *runs = NULL;
    size_t nr = 0, covered = 0;
    CHECK_OK(dd_model_tp_runs(s->shard, &runs, &nr));
    const dd_param_table *ts = dd_model_params(s->shard);
    float *mapped = calloc(s->ns, sizeof(float)), *cover = calloc(s->nw, sizeof(float));
    int ok = 1;
    for (size_t i = 0; i < nr; i++) {
        ok &= i == 0 || runs[i].shard >= runs[i - 1].shard + runs[i - 1].len;
        memcpy(mapped + runs[i].shard, s->pw + runs[i].full, runs[i].len * sizeof(float));
        for (size_t k = 0; k < runs[i].len && (!runs[i].replicated || dd_comm_rank(c) == 0); k++)
            cover[runs[i].full + k] += 1;
        covered += runs[i].len;
    }
    CHECK(tm_all_ok(c, ok && covered == ts->nparams), "%s: runs not ascending or not covering the shard", what);
    CHECK(tm_all_ok(c, memcmp(mapped, s->ps, s->ns * sizeof(float)) == 0), "%s: shard init != mapped whole init",
          what);
    CHECK_OK(dd_comm_allreduce(c, DD_ALLREDUCE_RING, cover, s->nw, DD_F32));
    const dd_param_table *tw = dd_model_params(s->whole);
    ok = 1;
    for (size_t e = 0; e < tw->count; e++)
        for (size_t k = 0; k < tw->entries[e].size; k++) ok &= cover[tw->entries[e].offset + k] == 1.0f;
    double sum = 0;
    for (size_t k = 0; k < s->nw; k++) sum += cover[k];
    CHECK(ok && sum == (double)tw->nparams, "%s: the group's runs do not cover every parameter once", what);
    free(mapped);
    free(cover);
}

/* Per table entry: the shard's gradient against the whole one through the runs. */
static void check_grads(dd_comm *c, tp_run_set *s, const char *what) {
    const dd_tp_run *runs = NULL;
    size_t nr = 0;
    dd_model_tp_runs(s->shard, &runs, &nr);
    const dd_param_table *ts = dd_model_params(s->shard);
    double worst = 0;
    const char *worst_name = "";
    for (size_t e = 0; e < ts->count; e++) {
        const dd_param_entry *en = &ts->entries[e];
        double d = 0, mx = 0;
        for (size_t i = 0; i < nr; i++) {
            if (runs[i].shard < en->offset || runs[i].shard >= en->offset + en->size) continue;
            for (size_t k = 0; k < runs[i].len; k++) {
                d = fmax(d, fabs((double)s->gs[runs[i].shard + k] - s->gw[runs[i].full + k]));
                mx = fmax(mx, fabs((double)s->gw[runs[i].full + k]));
            }
        }
        double rel = mx > 0 ? d / mx : d;
        if (rel > worst) worst = rel, worst_name = en->name;
    }
    CHECK(tm_all_ok(c, worst <= TOL), "%s: gradient of %s differs by %.3g (rel)", what, worst_name, worst);
    int same = 1;
    for (size_t i = 0; i < nr; i++)
        if (runs[i].replicated) same &= tm_same_bytes(c, s->gs + runs[i].shard, runs[i].len * sizeof(float));
    CHECK(same, "%s: replicated gradients differ between ranks", what);
}

/* infer and run_stream of the shard against the whole model's. */
static void check_infer_stream(dd_comm *c, tp_run_set *s, const tp_case *tc, const char *what) {
    dd_stage_src srcw = {s->pw, NULL, NULL, NULL, NULL, NULL}, srcs = {s->ps, NULL, NULL, NULL, NULL, NULL};
    float *ws = calloc(dd_model_infer_workspace(s->shard, tc->B, tc->T), sizeof(float));
    float *yi = calloc(s->nx, sizeof(float));
    CHECK_OK(dd_model_infer(s->shard, &srcs, s->x, yi, tc->B, tc->T, ws));
    CHECK(tm_all_ok(c, rel_diff(yi, s->yw, s->nx) <= TOL), "%s: infer differs from the whole forward", what);
    free(ws);
    free(yi);
    const size_t n = 300;
    dd_cf32 *xs = calloc(n, sizeof *xs), *yw = calloc(n, sizeof *yw), *ys = calloc(n, sizeof *ys);
    rand_vec((float *)xs, 2 * n, 0.5, SEED + 3);
    CHECK_OK(dd_model_run_stream_src(s->whole, &srcw, xs, yw, n));
    CHECK_OK(dd_model_run_stream_src(s->shard, &srcs, xs, ys, n));
    CHECK(tm_all_ok(c, rel_diff((float *)ys, (float *)yw, 2 * n) <= TOL), "%s: stream differs", what);
    CHECK(tm_same_bytes(c, ys, n * sizeof *ys), "%s: streamed output differs between ranks", what);
    free(xs);
    free(yw);
    free(ys);
}

/* One forward + backward of the whole model and of the shard (dx wanted). */
static void run_both(tp_run_set *s, const tp_case *tc) {
    float *ww = calloc(dd_model_workspace_size(s->whole, tc->B, tc->T), sizeof(float));
    float *wss = calloc(dd_model_workspace_size(s->shard, tc->B, tc->T), sizeof(float));
    CHECK_OK(dd_model_forward(s->whole, s->pw, s->x, s->yw, tc->B, tc->T, ww));
    CHECK_OK(dd_model_backward(s->whole, s->pw, s->gw, s->x, s->dy, s->dxw, tc->B, tc->T, ww));
    CHECK_OK(dd_model_forward(s->shard, s->ps, s->x, s->ys, tc->B, tc->T, wss));
    CHECK_OK(dd_model_backward(s->shard, s->ps, s->gs, s->x, s->dy, s->dxs, tc->B, tc->T, wss));
    free(ww);
    free(wss);
}

/* The group's counts of one forward + backward against docs/models.md's formulas. */
typedef struct {
    uint64_t ar_calls, ar_floats, ag_calls, ag_floats, rs_calls, rs_floats;
} tp_counts;

static tp_counts expected_counts(const tp_case *tc, const dd_model_cfg *mc, int T) {
    const uint64_t B = (uint64_t)tc->B, Tt = (uint64_t)tc->T, H = (uint64_t)dd_model_cfg_get(mc, "hidden");
    const uint64_t L = (uint64_t)dd_model_cfg_get(mc, "layers");
    tp_counts e = {0, 0, 0, 0, 0, 0};
    if (T == 1) return e; /* the whole model: no collectives */
    if (!strcmp(tc->name, "resnet")) e.ar_calls = 2 * L, e.ar_floats = 2 * L * B * Tt * H;
    if (!strcmp(tc->name, "tcn")) e.ag_calls = 2 * L, e.ag_floats = 2 * L * B * Tt * H / (uint64_t)T;
    if (!strcmp(tc->name, "hammerstein")) e.ar_calls = 2 * L, e.ar_floats = L * B * Tt * (H + 1);
    if (!strcmp(tc->name, "rvtdnn") || !strcmp(tc->name, "arvtdnn")) {
        /* forward: each row layer's (BT, H) sum, and fc_out's (BT, 2) when L is odd;
         * backward: each column layer's input gradient ((BT, H) above layer 0; layer 0's
         * (BT, F M) only when dx is wanted: it is in this test) */
        const uint64_t F = !strcmp(tc->name, "rvtdnn") ? 2 : 5, M = (uint64_t)dd_model_cfg_get(mc, "memory");
        const uint64_t rows = L / 2, cols = (L + 1) / 2;
        e.ar_calls = rows + (L % 2) + cols;
        e.ar_floats = B * Tt * (rows * H + (L % 2) * 2 + (cols - 1) * H + F * M);
    }
    if (!strcmp(tc->name, "gru") || !strcmp(tc->name, "lstm")) {
        e.ag_calls = L * Tt, e.ag_floats = L * Tt * B * H / (uint64_t)T;
        e.rs_calls = L * (Tt - 1), e.rs_floats = L * (Tt - 1) * B * H / (uint64_t)T;
        e.ar_calls = L, e.ar_floats = B * Tt * (2 + (L - 1) * H);
    }
    return e;
}

static void check_counts(dd_comm *c, const dd_tp_group_stats *st, const tp_counts *e, const char *what) {
    int ok = st->allreduce_calls == e->ar_calls && st->allreduce_floats == e->ar_floats &&
             st->allgather_calls == e->ag_calls && st->allgather_floats == e->ag_floats &&
             st->reduce_scatter_calls == e->rs_calls && st->reduce_scatter_floats == e->rs_floats;
    CHECK(tm_all_ok(c, ok),
          "%s: counts allreduce %llu/%llu floats, allgather %llu/%llu, reduce-scatter %llu/%llu; want %llu/%llu, "
          "%llu/%llu, %llu/%llu",
          what, (unsigned long long)st->allreduce_calls, (unsigned long long)st->allreduce_floats,
          (unsigned long long)st->allgather_calls, (unsigned long long)st->allgather_floats,
          (unsigned long long)st->reduce_scatter_calls, (unsigned long long)st->reduce_scatter_floats,
          (unsigned long long)e->ar_calls, (unsigned long long)e->ar_floats, (unsigned long long)e->ag_calls,
          (unsigned long long)e->ag_floats, (unsigned long long)e->rs_calls, (unsigned long long)e->rs_floats);
}

static void check_case(dd_comm *c, dd_tp_group *grp, const tp_case *tc) {
    dd_model_tp tp;
    dd_tp_group_model_tp(grp, &tp);
    dd_model_cfg mc = tm_mcfg(tc->cfg);
    char what[160];
    snprintf(what, sizeof what, "%s(%s) T = %d", tc->name, tc->cfg, tp.size);
    if (dd_model_cfg_get(&mc, "hidden") % tp.size) {
        if (g_rank == 0) printf("skip %s: hidden is not divisible by %d\n", what, tp.size);
        return;
    }
    tp_run_set s;
    memset(&s, 0, sizeof s);
    CHECK_OK(dd_model_create(tc->name, &mc, &s.whole));
    CHECK_OK(dd_model_create_tp(tc->name, &mc, &tp, &s.shard));
    if (!tm_all_ok(c, s.whole && s.shard && set_alloc(&s, tc))) {
        set_free(&s);
        return;
    }
    CHECK(dd_model_tp_size(s.shard) == tp.size && dd_model_tp_rank(s.shard) == tp.rank, "%s: size/rank", what);
    CHECK(dd_model_num_stages(s.shard) == dd_model_num_stages(s.whole), "%s: stage count", what);
    CHECK_OK(dd_model_init(s.whole, s.pw, SEED));
    CHECK_OK(dd_model_init(s.shard, s.ps, SEED));
    check_init_runs(c, &s, what);
    rand_vec(s.x, s.nx, 0.6, SEED + 1);
    rand_vec(s.dy, s.nx, 1.0, SEED + 2);
    dd_tp_group_stats_reset(grp);
    run_both(&s, tc);
    dd_tp_group_stats st;
    dd_tp_group_stats_get(grp, &st);
    tp_counts e = expected_counts(tc, &mc, tp.size);
    check_counts(c, &st, &e, what);
    CHECK(tm_all_ok(c, rel_diff(s.ys, s.yw, s.nx) <= TOL), "%s: output differs by %.3g", what,
          rel_diff(s.ys, s.yw, s.nx));
    CHECK(tm_all_ok(c, rel_diff(s.dxs, s.dxw, s.nx) <= TOL), "%s: dx differs by %.3g", what,
          rel_diff(s.dxs, s.dxw, s.nx));
    CHECK(tm_same_bytes(c, s.ys, s.nx * sizeof(float)) && tm_same_bytes(c, s.dxs, s.nx * sizeof(float)),
          "%s: output or dx differ between ranks", what);
    check_grads(c, &s, what);
    check_infer_stream(c, &s, tc, what);
    set_free(&s);
}

static const tp_case k_cases[] = {
    {"resnet", "hidden=12,layers=2,kernel=3", 2, 16},
    {"tcn", "hidden=12,layers=4,kernel=3", 2, 16},
    {"tcn", "hidden=8,layers=14,kernel=2", 2, 24},
    {"hammerstein", "hidden=12,layers=2,memory=3", 2, 16},
    {"gru", "hidden=12,layers=2", 2, 12},
    {"lstm", "hidden=12,layers=2", 2, 12},
    {"rvtdnn", "hidden=12,layers=2,memory=4", 2, 16},
    {"arvtdnn", "hidden=12,layers=3,memory=3", 2, 16},
};

static void test_group(dd_comm *c) {
    dd_tp_group *grp = NULL;
    CHECK_OK(dd_tp_group_create(c, &grp));
    if (!grp) return;
    dd_model_tp tp;
    dd_tp_group_model_tp(grp, &tp);
    test_reduce_copy(c, &tp);
    test_scatter_gather(c, &tp);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) check_case(c, grp, &k_cases[i]);
    dd_tp_group_destroy(&grp);
}

/* ---------------------------------------------------------------- errors, T = 1 */

static dd_status fake_ar(void *u, float *b, size_t n) {
    (void)u, (void)b, (void)n;
    return DD_OK;
}

static dd_status fake_ag(void *u, const float *s, float *r, size_t n) {
    (void)u, (void)s, (void)r, (void)n;
    return DD_OK;
}

static void test_errors(void) {
    dd_model *m = NULL;
    dd_model_tp tp = {2, 0, NULL, fake_ar, fake_ag, NULL};
    dd_model_cfg none = tm_mcfg("");
    CHECK_ERR(dd_model_create_tp("gmp", &none, &tp, &m), DD_ERR_UNSUPPORTED, "model gmp has no tensor-parallel form");
    CHECK(strcmp(dd_last_error(),
                 "model gmp has no tensor-parallel form (models with one: rvtdnn, arvtdnn, gru, lstm, tcn, resnet, "
                 "hammerstein)") == 0,
          "message: %s", dd_last_error());
    const char *unsupported[] = {"mp", "dgru"};
    for (size_t i = 0; i < 2; i++)
        CHECK_ERR(dd_model_create_tp(unsupported[i], &none, &tp, &m), DD_ERR_UNSUPPORTED, "no tensor-parallel form");
    tp.size = 4;
    dd_model_cfg c10 = tm_mcfg("hidden=10");
    CHECK_ERR(dd_model_create_tp("resnet", &c10, &tp, &m), DD_ERR_ARG, "resnet --hidden 10 is not divisible by --tp 4");
    CHECK(strcmp(dd_last_error(), "resnet --hidden 10 is not divisible by --tp 4") == 0, "message: %s",
          dd_last_error());
    const char *sized[] = {"tcn", "hammerstein", "gru", "lstm", "rvtdnn", "arvtdnn"};
    for (size_t i = 0; i < 6; i++) {
        char want[80];
        snprintf(want, sizeof want, "%s --hidden 10 is not divisible by --tp 4", sized[i]);
        CHECK_ERR(dd_model_create_tp(sized[i], &c10, &tp, &m), DD_ERR_ARG, want);
    }
    tp.rank = 4;
    CHECK_ERR(dd_model_create_tp("resnet", &none, &tp, &m), DD_ERR_ARG, "tensor-parallel rank 4 of size 4");
    tp.rank = 0, tp.size = 0;
    CHECK_ERR(dd_model_create_tp("resnet", &none, &tp, &m), DD_ERR_ARG, "tensor-parallel rank 0 of size 0");
    tp.size = 2, tp.allgather = NULL;
    CHECK_ERR(dd_model_create_tp("resnet", &none, &tp, &m), DD_ERR_ARG, "needs allreduce and allgather");
    CHECK_ERR(dd_model_create_tp("resnet", &none, NULL, &m), DD_ERR_ARG, "group is NULL");
    CHECK_ERR(dd_model_create_tp("nosuch", &none, &(dd_model_tp){2, 0, NULL, fake_ar, fake_ag, NULL}, &m), DD_ERR_ARG,
              "unknown model 'nosuch'");
    CHECK(m == NULL, "no model on error");
}

/* Fail while *(int *)u > 0 (counting down), then succeed. */
static dd_status fail_ar(void *u, float *b, size_t n) {
    (void)b, (void)n;
    return (*(int *)u)-- > 0 ? dd_error(DD_ERR_COMM, "injected allreduce failure") : DD_OK;
}

static dd_status fail_ag(void *u, const float *s, float *r, size_t n) {
    (void)s, (void)r, (void)n;
    return (*(int *)u)-- > 0 ? dd_error(DD_ERR_COMM, "injected allgather failure") : DD_OK;
}

/* A collective's error comes back from the model call (after the stage), and the next
 * call, whose collectives succeed, starts clean. One process: the fake group never talks
 * to anyone (its allgather leaves the other ranks' part of h_t as it was). */
static void test_collective_error(const char *name, dd_model_tp bad, const char *needle) {
    int fails = 1;
    bad.user = &fails;
    dd_model_cfg mc = tm_mcfg("hidden=8,layers=2");
    dd_model *m = NULL;
    CHECK_OK(dd_model_create_tp(name, &mc, &bad, &m));
    if (!m) return;
    const int B = 1, T = 4;
    float *p = calloc(dd_model_params(m)->total, sizeof(float)), x[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f};
    float y[8], *ws = calloc(dd_model_workspace_size(m, B, T), sizeof(float));
    CHECK_OK(dd_model_init(m, p, 1));
    CHECK_ERR(dd_model_forward(m, p, x, y, B, T, ws), DD_ERR_COMM, needle);
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    free(p);
    free(ws);
    dd_model_destroy(&m);
}

/* T = 1 is dd_model_create bit for bit: table, init, forward, backward. */
static void test_size_one(const char *name, const char *cfg) {
    dd_model_tp one = {1, 0, NULL, NULL, NULL, NULL};
    dd_model_cfg mc = tm_mcfg(cfg);
    dd_model *a = NULL, *b = NULL;
    CHECK_OK(dd_model_create(name, &mc, &a));
    CHECK_OK(dd_model_create_tp(name, &mc, &one, &b));
    if (!a || !b) return;
    const dd_param_table *ta = dd_model_params(a), *tb = dd_model_params(b);
    int same = ta->count == tb->count && ta->total == tb->total;
    for (size_t i = 0; same && i < ta->count; i++)
        same = memcmp(&ta->entries[i], &tb->entries[i], sizeof ta->entries[i]) == 0;
    CHECK(same && dd_model_tp_size(b) == 1 && dd_model_tp_rank(b) == 0, "%s: T = 1 table differs", name);
    const dd_tp_run *runs = NULL;
    size_t nr = 0;
    CHECK_OK(dd_model_tp_runs(b, &runs, &nr));
    CHECK(nr == tb->count && runs[0].replicated && runs[nr - 1].full == tb->entries[nr - 1].offset, "%s: runs", name);
    const int B = 2, T = 20;
    size_t n = ta->total, nx = 2 * (size_t)B * T, nws = dd_model_workspace_size(a, B, T);
    float *p[2], *g[2], *y[2], *dx[2], *ws = calloc(nws, sizeof(float)), *x = calloc(nx, sizeof(float));
    rand_vec(x, nx, 0.5, 7);
    dd_model *mm[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        p[k] = calloc(n, sizeof(float)), g[k] = calloc(n, sizeof(float));
        y[k] = calloc(nx, sizeof(float)), dx[k] = calloc(nx, sizeof(float));
        CHECK_OK(dd_model_init(mm[k], p[k], 99));
        CHECK_OK(dd_model_forward(mm[k], p[k], x, y[k], B, T, ws));
        CHECK_OK(dd_model_backward(mm[k], p[k], g[k], x, y[k], dx[k], B, T, ws));
    }
    CHECK(!memcmp(p[0], p[1], n * 4) && !memcmp(g[0], g[1], n * 4) && !memcmp(y[0], y[1], nx * 4) &&
              !memcmp(dx[0], dx[1], nx * 4),
          "%s: T = 1 differs from dd_model_create", name);
    for (int k = 0; k < 2; k++) free(p[k]), free(g[k]), free(y[k]), free(dx[k]);
    free(ws);
    free(x);
    dd_model_destroy(&a);
    dd_model_destroy(&b);
}

int main(int argc, char **argv) {
    if (dd_comm_init(&argc, &argv) != DD_OK) return 1;
    dd_comm *world = NULL;
    if (dd_comm_world(&world) != DD_OK) return 1;
    g_rank = dd_comm_rank(world);
    const int np = dd_comm_size(world);
    test_errors();
    test_collective_error("resnet", (dd_model_tp){2, 1, NULL, fail_ar, fake_ag, NULL}, "injected allreduce failure");
    test_collective_error("gru", (dd_model_tp){2, 0, NULL, fake_ar, fail_ag, NULL}, "injected allgather failure");
    const char *one[][2] = {{"resnet", "hidden=12"}, {"gru", "hidden=8,layers=2"}, {"gmp", ""}, {"tcn", "hidden=8"}};
    for (size_t i = 0; i < 4; i++) test_size_one(one[i][0], one[i][1]);
    test_group(world);
    if (np == 4) {
        dd_comm *half = NULL;
        CHECK_OK(dd_comm_split(world, g_rank / 2, g_rank, &half));
        if (half) test_group(half);
        dd_comm_free(&half);
    }
    int rc = dd_test_done("test_tp_mpi");
    dd_comm_free(&world);
    dd_comm_finalize();
    return rc;
}
