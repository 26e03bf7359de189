/* Tests of the parameter table and arenas (include/distdpd/param.h) and of the layers'
 * parameter registration: aligned offsets, lookup, error messages, one-memset gradient
 * zeroing, optimiser state arenas, PyTorch-style initialisation bounds, and the exact
 * parameter counts of the OpenDPD GRU PA model (1,911 for H = 23, 2,746 for H = 28). */
#include <stdint.h>

#include "distdpd/nn.h"
#include "distdpd/param.h"
#include "dd_test.h"

/* OpenDPD's GRU PA model: GRU(I=2, H) then Linear(H -> 2). */
static size_t gru_model_count(int H, dd_param_table *t) {
    dd_gru_layer g;
    dd_dense_layer d;
    dd_param_table_init(t);
    CHECK_OK(dd_gru_layer_add(t, "gru", 2, H, 1, &g));
    CHECK_OK(dd_dense_layer_add(t, "fc_out", H, 2, 1, &d));
    return t->nparams;
}

static void test_table(void) {
    dd_param_table t;
    dd_param_table_init(&t);
    size_t s1[2] = {3, 5}, s2[1] = {7}, s3[3] = {2, 1, 16}, s4[4] = {1, 2, 3, 4};
    size_t o1 = 99, o2 = 99, o3 = 99, o4 = 99;
    CHECK_OK(dd_param_table_add(&t, "a.weight", 2, s1, &o1));
    CHECK_OK(dd_param_table_add(&t, "a.bias", 1, s2, &o2));
    CHECK_OK(dd_param_table_add(&t, "conv.weight", 3, s3, &o3));
    CHECK_OK(dd_param_table_add(&t, "x4", 4, s4, &o4));
    CHECK(t.count == 4, "count %zu", t.count);
    CHECK(o1 == 0 && o2 == 16 && o3 == 32 && o4 == 64, "offsets %zu %zu %zu %zu", o1, o2, o3, o4);
    CHECK(t.nparams == 15 + 7 + 32 + 24, "nparams %zu", t.nparams);
    CHECK(t.total == 96, "total %zu", t.total);
    size_t end = 0;
    for (size_t i = 0; i < t.count; i++) {
        const dd_param_entry *e = &t.entries[i];
        CHECK(e->offset % DD_PARAM_ALIGN == 0, "%s offset %zu", e->name, e->offset);
        CHECK(e->offset >= end, "%s overlaps", e->name);
        size_t prod = 1;
        for (int d = 0; d < DD_PARAM_MAX_NDIM; d++) prod *= e->shape[d];
        CHECK(prod == e->size, "%s size %zu vs shape product %zu", e->name, e->size, prod);
        end = e->offset + e->size;
        CHECK(dd_param_table_index(&t, e->name) == (long)i, "index of %s", e->name);
    }
    CHECK(t.total % DD_PARAM_ALIGN == 0 && t.total >= end, "total %zu end %zu", t.total, end);
    const dd_param_entry *e = dd_param_table_find(&t, "conv.weight");
    CHECK(e && e->ndim == 3 && e->shape[0] == 2 && e->shape[2] == 16 && e->shape[3] == 1,
          "conv.weight entry");
    CHECK(dd_param_table_find(&t, "nope") == NULL, "found a missing name");
    CHECK(dd_param_table_index(&t, "nope") == -1, "index of a missing name");
    CHECK_ERR(dd_param_table_lookup(&t, "nope", &e), DD_ERR_ARG, "'nope'");
    CHECK_OK(dd_param_table_lookup(&t, "a.bias", &e));
    CHECK(e && e->offset == 16, "lookup a.bias");

    /* errors name the parameter */
    CHECK_ERR(dd_param_table_add(&t, "a.bias", 1, s2, NULL), DD_ERR_ARG, "a.bias");
    CHECK_ERR(dd_param_table_add(&t, "bad", 0, s2, NULL), DD_ERR_ARG, "ndim 0");
    CHECK_ERR(dd_param_table_add(&t, "bad", 5, s4, NULL), DD_ERR_ARG, "ndim 5");
    size_t zero[2] = {3, 0};
    CHECK_ERR(dd_param_table_add(&t, "bad", 2, zero, NULL), DD_ERR_ARG, "shape[1]");
    CHECK_ERR(dd_param_table_add(&t, "", 1, s2, NULL), DD_ERR_ARG, "length 0");
    char longname[100];
    memset(longname, 'x', 80);
    longname[80] = 0;
    CHECK_ERR(dd_param_table_add(&t, longname, 1, s2, NULL), DD_ERR_ARG, "length 80");
    CHECK(t.count == 4 && t.total == 96, "failed adds changed the table");

    /* many entries: growth keeps earlier entries and offsets */
    for (int i = 0; i < 100; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "p%d", i);
        size_t sh[1] = {(size_t)(i % 7 + 1)};
        CHECK_OK(dd_param_table_add(&t, nm, 1, sh, NULL));
    }
    CHECK(t.count == 104 && dd_param_table_index(&t, "p99") == 103, "growth");
    CHECK(dd_param_table_find(&t, "a.weight")->offset == 0, "growth moved a.weight");
    dd_param_table_free(&t);
    CHECK(t.count == 0 && t.entries == NULL && t.total == 0, "free");
    dd_param_table_free(&t);
}

static void test_arena(void) {
    dd_param_table t;
    dd_param_arena a;
    CHECK_ERR(dd_param_arena_create(&a, NULL), DD_ERR_ARG, "empty");
    dd_param_table_init(&t);
    CHECK_ERR(dd_param_arena_create(&a, &t), DD_ERR_ARG, "empty");
    size_t s1[2] = {3, 5}, s2[1] = {7};
    CHECK_OK(dd_param_table_add(&t, "w", 2, s1, NULL));
    CHECK_OK(dd_param_table_add(&t, "b", 1, s2, NULL));
    CHECK_OK(dd_param_arena_create(&a, &t));
    CHECK(a.n == t.total && a.table == &t, "arena size");
    CHECK(((uintptr_t)a.params % 64) == 0 && ((uintptr_t)a.grads % 64) == 0, "alignment");
    int zero = 1;
    for (size_t i = 0; i < a.n; i++) zero &= a.params[i] == 0 && a.grads[i] == 0;
    CHECK(zero, "arenas not zeroed");
    float *gb = dd_param_view(&t, a.grads, "b");
    CHECK(gb == a.grads + 16, "view");
    CHECK(dd_param_view(&t, a.grads, "zz") == NULL, "view of a missing name");
    for (size_t i = 0; i < a.n; i++) a.grads[i] = (float)i + 1;
    dd_param_arena_zero_grads(&a);
    zero = 1;
    for (size_t i = 0; i < a.n; i++) zero &= a.grads[i] == 0;
    CHECK(zero, "zero_grads left non-zero values");

    CHECK_ERR(dd_param_arena_alloc_state(&a, 0), DD_ERR_ARG, "nstate 0");
    CHECK_ERR(dd_param_arena_alloc_state(&a, DD_PARAM_MAX_STATE + 1), DD_ERR_ARG, "nstate");
    CHECK_OK(dd_param_arena_alloc_state(&a, 2));
    CHECK(a.nstate == 2 && a.state[0] && a.state[1] && !a.state[2], "state arenas");
    CHECK(((uintptr_t)a.state[1] % 64) == 0, "state alignment");
    a.state[0][a.n - 1] = 1.0f; /* the whole length is usable */
    CHECK_OK(dd_param_arena_alloc_state(&a, 3)); /* replaces the old ones */
    CHECK(a.nstate == 3 && a.state[0][a.n - 1] == 0.0f, "re-allocated state not zeroed");
    dd_param_arena_destroy(&a);
    CHECK(a.params == NULL && a.grads == NULL && a.state[0] == NULL && a.nstate == 0, "destroy");
    dd_param_arena_destroy(&a);
    dd_param_table_free(&t);
}

static void test_counts(void) {
    dd_param_table t;
    CHECK(gru_model_count(23, &t) == 1911, "H=23: %zu parameters", t.nparams);
    const dd_param_entry *e = dd_param_table_find(&t, "gru.weight_ih_l0");
    CHECK(e && e->shape[0] == 69 && e->shape[1] == 2, "gru.weight_ih_l0 shape");
    e = dd_param_table_find(&t, "gru.weight_hh_l0");
    CHECK(e && e->shape[0] == 69 && e->shape[1] == 23, "gru.weight_hh_l0 shape");
    e = dd_param_table_find(&t, "gru.bias_hh_l0");
    CHECK(e && e->ndim == 1 && e->size == 69, "gru.bias_hh_l0 shape");
    e = dd_param_table_find(&t, "fc_out.weight");
    CHECK(e && e->shape[0] == 2 && e->shape[1] == 23, "fc_out.weight shape");
    CHECK(dd_param_table_find(&t, "fc_out.bias") != NULL, "fc_out.bias");
    CHECK(t.count == 6, "6 tensors, got %zu", t.count);
    dd_param_table_free(&t);
    CHECK(gru_model_count(28, &t) == 2746, "H=28: %zu parameters", t.nparams);
    dd_param_table_free(&t);

    /* LSTM: 4H(D+H) + 8H; conv: C_out*C_in/groups*K + C_out; no-bias variants */
    dd_lstm_layer l;
    dd_conv1d_layer c;
    dd_dense_layer d;
    dd_param_table_init(&t);
    CHECK_OK(dd_lstm_layer_add(&t, "lstm", 3, 10, 1, &l));
    CHECK(t.nparams == 4 * 10 * 13 + 80, "LSTM count %zu", t.nparams);
    size_t n0 = t.nparams;
    CHECK_OK(dd_conv1d_layer_add(&t, "tcn.dw1", 8, 8, 5, 2, 8, 1, &c));
    CHECK(t.nparams - n0 == 8 * 5 + 8, "depthwise count %zu", t.nparams - n0);
    CHECK(dd_param_table_find(&t, "tcn.dw1.weight")->shape[1] == 1, "depthwise weight shape");
    n0 = t.nparams;
    CHECK_OK(dd_conv1d_layer_add(&t, "pw", 2, 8, 1, 1, 1, 0, &c));
    CHECK(t.nparams - n0 == 16 && dd_param_table_find(&t, "pw.bias") == NULL, "pointwise no bias");
    n0 = t.nparams;
    CHECK_OK(dd_dense_layer_add(&t, "", 4, 3, 0, &d));
    CHECK(t.nparams - n0 == 12 && dd_param_table_find(&t, "weight"), "empty prefix");

    /* configuration errors */
    CHECK_ERR(dd_conv1d_layer_add(&t, "bad", 6, 4, 3, 1, 4, 1, &c), DD_ERR_ARG, "groups = 4");
    CHECK_ERR(dd_conv1d_layer_add(&t, "bad", 4, 4, 3, 0, 1, 1, &c), DD_ERR_ARG, "dilation = 0");
    CHECK_ERR(dd_conv1d_check(4, 4, 0, 1, 1), DD_ERR_ARG, "kernel = 0");
    CHECK_ERR(dd_gru_layer_add(&t, "g", 0, 4, 1, &l), DD_ERR_ARG, "input_size 0");
    CHECK_ERR(dd_lstm_layer_add(&t, "lstm", 3, 10, 1, &l), DD_ERR_ARG, "lstm.weight_ih_l0");
    CHECK_ERR(dd_dense_layer_add(&t, "d", 4, 0, 1, &d), DD_ERR_ARG, "out_dim 0");
    CHECK_ERR(dd_dense_layer_add(&t, "a_prefix_that_is_much_longer_than_forty_characters", 1, 1,
                                 1, &d),
              DD_ERR_ARG, "longer than 40");
    dd_param_table_free(&t);
}

static void test_init(void) {
    dd_param_table t;
    dd_param_arena a, a2;
    dd_gru_layer g;
    dd_dense_layer d;
    dd_conv1d_layer c;
    dd_param_table_init(&t);
    CHECK_OK(dd_gru_layer_add(&t, "gru", 2, 23, 1, &g));
    CHECK_OK(dd_dense_layer_add(&t, "fc", 23, 2, 1, &d));
    CHECK_OK(dd_conv1d_layer_add(&t, "conv", 4, 6, 3, 2, 2, 1, &c));
    CHECK_OK(dd_param_arena_create(&a, &t));
    CHECK_OK(dd_param_arena_create(&a2, &t));
    dd_rng r, r2;
    dd_rng_seed(&r, 5);
    dd_rng_seed(&r2, 5);
    dd_gru_layer_init(&g, a.params, &r);
    dd_dense_layer_init(&d, a.params, &r);
    dd_conv1d_layer_init(&c, a.params, &r);
    dd_gru_layer_init(&g, a2.params, &r2);
    dd_dense_layer_init(&d, a2.params, &r2);
    dd_conv1d_layer_init(&c, a2.params, &r2);
    CHECK(memcmp(a.params, a2.params, a.n * sizeof(float)) == 0, "same seed, different values");

    /* every value inside its bound; the spread fills it (uniform: var = k^2/3) */
    struct {
        const char *name;
        double k;
    } want[] = {{"gru.weight_ih_l0", 1 / sqrt(23.0)}, {"gru.weight_hh_l0", 1 / sqrt(23.0)},
                {"gru.bias_ih_l0", 1 / sqrt(23.0)},   {"gru.bias_hh_l0", 1 / sqrt(23.0)},
                {"fc.weight", 1 / sqrt(23.0)},        {"fc.bias", 1 / sqrt(23.0)},
                {"conv.weight", 1 / sqrt(6.0)},       {"conv.bias", 1 / sqrt(6.0)}};
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        const dd_param_entry *e = dd_param_table_find(&t, want[w].name);
        double mx = 0, s2 = 0;
        for (size_t i = 0; i < e->size; i++) {
            double v = a.params[e->offset + i];
            mx = fmax(mx, fabs(v));
            s2 += v * v;
        }
        CHECK(mx <= want[w].k * (1 + 1e-6) && (e->size < 20 || mx > 0.8 * want[w].k), "%s: max |p| %g, bound %g",
              want[w].name, mx, want[w].k);
        if (e->size >= 500)
            CHECK_NEAR(s2 / (double)e->size / (want[w].k * want[w].k / 3), 1.0, 0.15);
    }
    /* padding untouched */
    int pad_zero = 1;
    for (size_t i = 0; i < t.count; i++) {
        const dd_param_entry *e = &t.entries[i];
        size_t next = i + 1 < t.count ? t.entries[i + 1].offset : t.total;
        for (size_t j = e->offset + e->size; j < next; j++) pad_zero &= a.params[j] == 0;
    }
    CHECK(pad_zero, "initialisation wrote into padding");
    CHECK_OK(dd_param_init_uniform(&t, a.params, "fc.bias", 0.0, &r));
    CHECK(a.params[d.b] == 0 && a.params[d.b + 1] == 0, "uniform(0)");
    CHECK_ERR(dd_param_init_uniform(&t, a.params, "fc.nothing", 1.0, &r), DD_ERR_ARG, "fc.nothing");
    CHECK_NEAR(dd_param_bound(4), 0.5, 1e-15);
    dd_param_arena_destroy(&a);
    dd_param_arena_destroy(&a2);
    dd_param_table_free(&t);
}

int main(void) {
    test_table();
    test_arena();
    test_counts();
    test_init();
    return dd_test_done("test_nn_param");
}
