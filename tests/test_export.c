/* Model export (export.h): npz and safetensors written from a parameter table read back
 * exactly (with and without a name prefix); every truncation of both files and corrupted
 * safetensors headers refused with a message naming the file (never a crash: run under
 * ASan in the sanitizer build); tensors that do not fit the model refused naming the
 * tensor; and the C runtime (the code --format c generates) against independent
 * double-precision GRU and LSTM stacks and a DGRU written here: float32 within 1e-5, int16 and int8 within the
 * resolution of their formats, with the calibrated formats checked against their
 * definition. The ONNX file read back with protobuf-c (onnx__model_proto__unpack, code
 * generated from third_party/onnx/onnx.proto): node op types, initializer names, dims and
 * the z, r, h gate blocks against the r, z, n blocks of the parameters. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/export.h"
#include "distdpd/model.h"
#include "onnx.pb-c.h"


/* The first occurrence of the k bytes of needle in b (n bytes), or NULL. */
static char *find(unsigned char *b, size_t n, const char *needle, size_t k) {
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(b + i, needle, k) == 0) return (char *)b + i;
    return NULL;
}

static void spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

static dd_model *make_rnn(const char *name, int H, int L, float **params) {
    dd_model_cfg c;
    memset(&c, 0, sizeof c);
    dd_model_cfg_set(&c, "hidden", H);
    if (L > 0) dd_model_cfg_set(&c, "layers", L); /* dgru has no such option */
    dd_model *m = NULL;
    if (dd_model_create(name, &c, &m) != DD_OK) return NULL;
    *params = dd_calloc(dd_model_params(m)->total, sizeof(float));
    dd_model_init(m, *params, 7);
    return m;
}

static void test_roundtrip(const char *dir) {
    float *p = NULL;
    dd_model *m = make_rnn("gru", 5, 2, &p);
    CHECK(m != NULL, "gru");
    if (!m) return;
    const dd_param_table *t = dd_model_params(m);
    const char *meta[] = {"model", "gru", "model_opts", "hidden=5,layers=2"};
    for (int fmt = 0; fmt < 2; fmt++)
        for (int pre = 0; pre < 2; pre++) {
            char path[600];
            snprintf(path, sizeof path, "%s/w%d%d.%s", dir, fmt, pre, fmt ? "safetensors" : "npz");
            CHECK_OK(dd_tensors_write((dd_tensor_format)fmt, path, t, p, pre ? "backbone." : "", meta, 2));
            dd_tensor_set s;
            CHECK_OK(dd_tensors_read(path, &s));
            CHECK(s.n == t->count, "%zu tensors read, %zu written", s.n, t->count);
            if (s.n)
                CHECK(strcmp(s.t[0].name, pre ? "backbone.rnn.weight_ih_l0" : "rnn.weight_ih_l0") == 0, "first name %s",
                      s.t[0].name);
            if (fmt) {
                CHECK(strcmp(s.meta_model, "gru") == 0, "metadata model '%s'", s.meta_model);
                CHECK(strcmp(s.meta_opts, "hidden=5,layers=2") == 0, "metadata opts '%s'", s.meta_opts);
            }
            float *q = dd_calloc(t->total, sizeof(float));
            CHECK_OK(dd_tensors_to_params(&s, t, path, q));
            CHECK(memcmp(p, q, t->total * sizeof(float)) == 0, "parameters changed by %s", path);
            /* a tensor missing, one of the wrong shape, one too many */
            if (fmt == 1 && pre == 0 && s.n == t->count) {
                s.t[1].shape[1]--;
                CHECK_ERR(dd_tensors_to_params(&s, t, "W", q), DD_ERR_MISMATCH, "tensor 'rnn.weight_hh_l0' has shape (15, 4)");
                s.t[1].shape[1]++;
                snprintf(s.t[3].name, sizeof s.t[3].name, "rnn.bias_hh_l9");
                CHECK_ERR(dd_tensors_to_params(&s, t, "W", q), DD_ERR_MISMATCH, "no tensor 'rnn.bias_hh_l0' (15)");
                snprintf(s.t[3].name, sizeof s.t[3].name, "rnn.bias_hh_l0");
                s.t[2].data[1] = NAN;
                CHECK_ERR(dd_tensors_to_params(&s, t, "W", q), DD_ERR_RANGE, "'rnn.bias_ih_l0' value 1 is not finite");
            }
            dd_free(q);
            dd_tensors_free(&s);
        }
    /* a file with an extra tensor: a 3-layer model's file into the 2-layer model */
    float *p3 = NULL;
    dd_model *m3 = make_rnn("gru", 5, 3, &p3);
    char path[600];
    snprintf(path, sizeof path, "%s/three.npz", dir);
    CHECK_OK(dd_tensors_write(DD_TENSORS_NPZ, path, dd_model_params(m3), p3, NULL, NULL, 0));
    dd_tensor_set s;
    CHECK_OK(dd_tensors_read(path, &s));
    float *q = dd_calloc(t->total, sizeof(float));
    CHECK_ERR(dd_tensors_to_params(&s, t, path, q), DD_ERR_MISMATCH, "tensor 'rnn.weight_ih_l2' matches no parameter");
    dd_free(q);
    dd_tensors_free(&s);
    dd_model_destroy(&m3);
    dd_free(p3);
    dd_model_destroy(&m);
    dd_free(p);
}

/* Every truncation of a file is refused with a message naming it (and nothing crashes). */
static void test_truncations(const char *dir) {
    for (int fmt = 0; fmt < 2; fmt++) {
        char src[600], dst[600];
        snprintf(src, sizeof src, "%s/w%d0.%s", dir, fmt, fmt ? "safetensors" : "npz");
        snprintf(dst, sizeof dst, "%s/cut", dir);
        size_t n = 0;
        unsigned char *b = dd_test_slurp(src, &n);
        REQUIRE(b && n > 100, "%s read", src);
        int refused = 0, named = 0, tried = 0;
        for (size_t k = 0; k < n; k += k < 700 ? 1 : 13) { /* every byte of the headers */
            spit(dst, b, k);
            dd_tensor_set s;
            dd_status st = dd_tensors_read(dst, &s);
            tried++;
            refused += st != DD_OK;
            named += st != DD_OK && strstr(dd_last_error(), dst) != NULL;
            if (st == DD_OK) dd_tensors_free(&s);
        }
        CHECK(refused == tried, "format %d: %d of %d truncations refused", fmt, refused, tried);
        CHECK(named == tried, "format %d: %d of %d messages name the file", fmt, named, tried);
        if (fmt == 1) { /* corrupted headers */
            unsigned char *c = malloc(n);
            memcpy(c, b, n);
            char *d = find(c, n, "\"F32\"", 5);
            CHECK(d != NULL, "dtype in the header");
            if (d) {
                memcpy(d, "\"I32\"", 5);
                spit(dst, c, n);
                dd_tensor_set s;
                CHECK_ERR(dd_tensors_read(dst, &s), DD_ERR_FORMAT, "dtype I32 is not read");
                memcpy(d, "\"F32\"", 5);
            }
            c[6] = 0x7f; /* header length ~2^55 */
            spit(dst, c, n);
            dd_tensor_set s;
            CHECK_ERR(dd_tensors_read(dst, &s), DD_ERR_FORMAT, "header length");
            c[6] = 0;
            char *o = find(c, n, "\"data_offsets\":[0,", 18);
            CHECK(o != NULL, "data_offsets in the header");
            if (o) {
                o[17] = '8'; /* [8, end]: the wrong number of bytes */
                spit(dst, c, n);
                CHECK_ERR(dd_tensors_read(dst, &s), DD_ERR_FORMAT, "data_offsets");
            }
            free(c);
        }
        free(b);
    }
    char p[600];
    snprintf(p, sizeof p, "%s/none.npz", dir);
    dd_tensor_set s;
    CHECK_ERR(dd_tensors_read(p, &s), DD_ERR_IO, "none.npz");
}

/* ---- the runtime against independent double-precision GRU and LSTM stacks ---- */

static double sig(double a) { return 1 / (1 + exp(-a)); }

/* gru or lstm (L layers of H units, PyTorch equations) + linear head, or OpenDPD's dgru
 * (features [I, Q, r, r^3, Q/r, I/r], a GRU, ReLU(fc_hid), fc_out of [that, features]),
 * over x (n samples). */
static void ref_rnn(const dd_model *m, const float *p, int H, int L, const dd_cf32 *x, double *y, size_t n) {
    const dd_param_table *t = dd_model_params(m);
    const int lstm = strcmp(dd_model_name(m), "lstm") == 0, dgru = strcmp(dd_model_name(m), "dgru") == 0;
    const int G = lstm ? 4 : 3;
    /* the arrays below hold up to 4 layers of 16 units (G * H <= 64 gates) */
    REQUIRE(H >= 1 && H <= 16 && L >= 1 && L <= 4, "ref_rnn: H %d, L %d outside its arrays", H, L);
    double h[4][16] = {{0}}, c[4][16] = {{0}}, in[32] = {0}, g[64] = {0}, gh[64] = {0}, f[6];
    for (size_t i = 0; i < n; i++) {
        const double xi = crealf(x[i]), xq = cimagf(x[i]), r = sqrt(xi * xi + xq * xq);
        in[0] = f[0] = xi;
        in[1] = f[1] = xq;
        f[2] = r;
        f[3] = r * r * r;
        f[4] = r > 0 ? xq / r : 0;
        f[5] = r > 0 ? xi / r : 1;
        int D = 2;
        if (dgru) {
            memcpy(in, f, sizeof f);
            D = 6;
            L = 1;
        }
        for (int k = 0; k < L; k++) {
            char nm[4][40];
            snprintf(nm[0], 40, "rnn.weight_ih_l%d", k);
            snprintf(nm[1], 40, "rnn.weight_hh_l%d", k);
            snprintf(nm[2], 40, "rnn.bias_ih_l%d", k);
            snprintf(nm[3], 40, "rnn.bias_hh_l%d", k);
            const float *wi = p + dd_param_table_find(t, nm[0])->offset, *wh = p + dd_param_table_find(t, nm[1])->offset;
            const float *bi = p + dd_param_table_find(t, nm[2])->offset, *bh = p + dd_param_table_find(t, nm[3])->offset;
            for (int j = 0; j < G * H; j++) {
                g[j] = bi[j];
                gh[j] = bh[j];
                for (int d = 0; d < D; d++) g[j] += (double)wi[j * D + d] * in[d];
                for (int q = 0; q < H; q++) gh[j] += (double)wh[j * H + q] * h[k][q];
            }
            for (int j = 0; j < H && lstm; j++) { /* i, f, g, o */
                const double ii = sig(g[j] + gh[j]), fg = sig(g[H + j] + gh[H + j]);
                const double gg = tanh(g[2 * H + j] + gh[2 * H + j]), o = sig(g[3 * H + j] + gh[3 * H + j]);
                c[k][j] = fg * c[k][j] + ii * gg;
                h[k][j] = o * tanh(c[k][j]);
            }
            for (int j = 0; j < H && !lstm; j++) {
                const double rg = sig(g[j] + gh[j]), z = sig(g[H + j] + gh[H + j]);
                const double nn = tanh(g[2 * H + j] + rg * gh[2 * H + j]);
                h[k][j] = (1 - z) * nn + z * h[k][j];
            }
            for (int j = 0; j < H; j++) in[j] = h[k][j];
            D = H;
        }
        const float *wo = p + dd_param_table_find(t, "fc_out.weight")->offset;
        const float *bo = p + dd_param_table_find(t, "fc_out.bias")->offset;
        const int W = dgru ? H + 6 : H;
        if (dgru) { /* in = ReLU(fc_hid h), then the features */
            const float *wh = p + dd_param_table_find(t, "fc_hid.weight")->offset;
            const float *bh = p + dd_param_table_find(t, "fc_hid.bias")->offset;
            for (int j = 0; j < H; j++) {
                double a = bh[j];
                for (int q = 0; q < H; q++) a += (double)wh[j * H + q] * h[0][q];
                in[j] = a > 0 ? a : 0;
            }
            memcpy(in + H, f, sizeof f);
        }
        for (int o = 0; o < 2; o++) {
            double a = bo[o];
            for (int q = 0; q < W; q++) a += (double)wo[o * W + q] * in[q];
            y[2 * i + o] = a;
        }
    }
}

static void test_runtime(const char *model) {
    const int H = 6, L = 2;
    const size_t n = 3000;
    float *p = NULL;
    dd_model *m = make_rnn(model, H, strcmp(model, "dgru") ? L : 0, &p);
    CHECK(m != NULL, "gru");
    if (!m) return;
    /* weights 1.5 x the initialisation, so that the gates leave their linear range (much
     * larger ones make this GRU bistable, where any rounding can switch the trajectory) */
    for (size_t i = 0; i < dd_model_params(m)->total; i++) p[i] *= 1.5f;
    dd_cf32 *x = dd_calloc(n, sizeof *x), *y = dd_calloc(n, sizeof *y);
    double *r = calloc(2 * n, sizeof *r);
    dd_rng rng;
    dd_rng_seed(&rng, 11);
    for (size_t i = 0; i < n; i++) /* |I|, |Q| <= 0.8 */
        x[i] = (float)(0.8 * sin(0.013 * (double)i) * (2 * dd_rng_uniform(&rng) - 1) * 0.9 + 0.05) +
               I * (float)(0.8 * cos(0.007 * (double)i) * 0.95);
    ref_rnn(m, p, H, L, x, r, n);
    double xm = 0, ym = 0, yrms = 0;
    for (size_t i = 0; i < n; i++) {
        xm = fmax(xm, fmax(fabs(crealf(x[i])), fabs(cimagf(x[i]))));
        ym = fmax(ym, fmax(fabs(r[2 * i]), fabs(r[2 * i + 1])));
        yrms += r[2 * i] * r[2 * i] + r[2 * i + 1] * r[2 * i + 1];
    }
    yrms = sqrt(yrms / (2.0 * (double)n));
    const int bits[3] = {0, 16, 8};
    /* float32: rounding only. The output reaches |y| ~2 here, so its format is Q.13 (int16,
     * step 1.2e-4) and Q.5 (int8, step 0.031), the state Q.15 / Q.7: int16 is allowed
     * about 16 output steps (2e-3: the state's and the tables' roundings, a few 2^-15
     * each, pass through weights of size ~1 and the recurrence), int8 four (0.12).
     * Measured: 3.2e-7, 6.2e-4, 0.044 (the lstm's output stays below 1, so its formats
     * are finer: 1.6e-7, 2.2e-4, 0.012; dgru: see the printed values). */
    const double tol[3] = {1e-5, 2e-3, 0.12};
    for (int b = 0; b < 3; b++) {
        dd_export_c *e = NULL;
        dd_export_c_opts o = {bits[b], "t", NULL, x, n};
        CHECK_OK(dd_export_c_create(m, p, &o, &e));
        if (!e) continue;
        CHECK_OK(dd_export_c_run(e, x, y, n));
        double md = 0, err = 0;
        for (size_t i = 0; i < n; i++) {
            const double dr = crealf(y[i]) - r[2 * i], di = cimagf(y[i]) - r[2 * i + 1];
            md = fmax(md, fmax(fabs(dr), fabs(di)));
            err += dr * dr + di * di;
        }
        printf("%s %2d bits: max |runtime - double-precision model| %.3g (output RMS %.3g, max %.3g), NMSE %.1f dB\n",
               model, bits[b], md, yrms, ym, 10 * log10(err / (yrms * yrms * 2.0 * (double)n)));
        CHECK(md <= tol[b], "%s %d bits: max |runtime - double model| = %.3g > %.3g", model, bits[b], md, tol[b]);
        if (bits[b]) {
            const dd_export_q *q = dd_export_c_formats(e);
            const double amax = (double)((1 << (bits[b] - 1)) - 1);
            /* the largest f with max * 2^f <= 2^(B-1) - 1 */
            CHECK(ldexp(xm, q->x_frac) <= amax && ldexp(xm, q->x_frac + 1) > amax, "x_frac %d for max %g", q->x_frac, xm);
            CHECK_NEAR(q->x_max, xm, 0);
            CHECK(ldexp(q->y_max, q->y_frac) <= amax && ldexp(q->y_max, q->y_frac + 1) > amax, "y_frac %d for max %g",
                  q->y_frac, q->y_max);
            CHECK_NEAR(q->y_max, ym, 1e-5 * ym);
        }
        dd_export_c_destroy(&e);
    }
    /* the header and source: written, and the source includes the header by base name */
    dd_export_c *e = NULL;
    dd_export_c_opts o = {16, "dpd", "test", x, n};
    CHECK_OK(dd_export_c_create(m, p, &o, &e));
    const char *dir = dd_test_tmpdir();
    char cp[600], hp[600];
    snprintf(cp, sizeof cp, "%s/dpd.c", dir);
    snprintf(hp, sizeof hp, "%s/dpd.h", dir);
    CHECK_OK(dd_export_c_write(e, cp, hp));
    size_t nc = 0;
    unsigned char *c = dd_test_slurp(cp, &nc);
    CHECK(c && find(c, nc, "#include \"dpd.h\"", 16) != NULL, "source includes dpd.h");
    CHECK(c && find(c, nc, "#define XRT_BITS 16", 19) != NULL, "source selects int16");
    free(c);
    dd_export_c_destroy(&e);
    /* other models are refused naming the supported ones */
    dd_model *td = NULL;
    CHECK_OK(dd_model_create("rvtdnn", NULL, &td));
    CHECK_ERR(dd_export_c_create(td, p, &o, &e), DD_ERR_UNSUPPORTED, "supported: gru, lstm");
    dd_model_destroy(&td);
    o.ncalib = 0;
    CHECK_ERR(dd_export_c_create(m, p, &o, &e), DD_ERR_ARG, "calibration");
    dd_free(x);
    dd_free(y);
    free(r);
    dd_model_destroy(&m);
    dd_free(p);
}

/* The float32 initializer at index i: its name, dims and little-endian raw_data as read back. */
static void check_init(const Onnx__TensorProto *t, const char *name, int ndim, const int64_t *dims) {
    CHECK(t->name && strcmp(t->name, name) == 0, "initializer %s: got %s", name, t->name ? t->name : "(none)");
    CHECK(t->n_dims == (size_t)ndim, "%s: %zu dims, expected %d", name, t->n_dims, ndim);
    size_t n = 1;
    for (int d = 0; d < ndim && (size_t)d < t->n_dims; d++) {
        CHECK(t->dims[d] == dims[d], "%s dim %d: %lld, expected %lld", name, d, (long long)t->dims[d], (long long)dims[d]);
        n *= (size_t)dims[d];
    }
    CHECK(t->has_data_type && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "%s: float32", name);
    CHECK(t->has_raw_data && t->raw_data.len == 4 * n, "%s: %zu raw bytes, expected %zu", name, t->raw_data.len, 4 * n);
}

/* Value i of a float32 initializer's little-endian raw_data. */
static float raw_f32(const Onnx__TensorProto *t, size_t i) {
    uint32_t u = 0;
    for (int k = 0; k < 4; k++) u |= (uint32_t)t->raw_data.data[4 * i + (size_t)k] << (8 * k);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* dd_export_onnx of a 2-layer gru (H = 5) read back with onnx__model_proto__unpack. */
static void test_onnx_unpack(const char *dir) {
    float *p = NULL;
    const int H = 5;
    dd_model *m = make_rnn("gru", H, 2, &p);
    CHECK(m != NULL, "gru");
    if (!m) return;
    for (size_t i = 0; i < dd_model_params(m)->total; i++) p[i] = (float)(i + 1) * 1e-3f; /* all distinct */
    char path[600];
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    CHECK_OK(dd_export_onnx(m, p, path));
    size_t n = 0;
    unsigned char *b = dd_test_slurp(path, &n);
    Onnx__ModelProto *mp = b ? onnx__model_proto__unpack(NULL, n, b) : NULL;
    CHECK(mp != NULL, "onnx__model_proto__unpack of %s (%zu bytes)", path, n);
    if (mp) {
        CHECK(mp->has_ir_version && mp->ir_version == 7, "ir_version 7");
        CHECK(mp->n_opset_import == 1 && mp->opset_import[0]->version == 13 &&
                  (!mp->opset_import[0]->domain || !*mp->opset_import[0]->domain),
              "opset 13 of the default domain");
        const Onnx__GraphProto *g = mp->graph;
        CHECK(g != NULL, "graph");
        if (!g) goto out;
        static const char *const ops[6] = {"GRU", "Squeeze", "GRU", "Squeeze", "MatMul", "Add"};
        CHECK(g->n_node == 6, "%zu nodes, expected 6", g->n_node);
        for (size_t i = 0; i < g->n_node && i < 6; i++)
            CHECK(strcmp(g->node[i]->op_type, ops[i]) == 0, "node %zu: %s, expected %s", i, g->node[i]->op_type, ops[i]);
        if (g->n_node == 6) {
            const Onnx__NodeProto *gru = g->node[2];
            CHECK(gru->n_input == 4 && strcmp(gru->input[0], "h_l0") == 0 && strcmp(gru->input[1], "W_l1") == 0,
                  "GRU_l1 reads h_l0 and W_l1");
            int hs = 0, lbr = 0;
            for (size_t a = 0; a < gru->n_attribute; a++) {
                const Onnx__AttributeProto *at = gru->attribute[a];
                CHECK(at->has_type && at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "%s: INT", at->name);
                if (strcmp(at->name, "hidden_size") == 0) hs = (int)at->i;
                if (strcmp(at->name, "linear_before_reset") == 0) lbr = (int)at->i;
            }
            CHECK(hs == H && lbr == 1, "GRU hidden_size %d (expected %d), linear_before_reset %d (expected 1)", hs, H, lbr);
            CHECK(g->node[5]->n_output == 1 && strcmp(g->node[5]->output[0], "y") == 0, "Add writes y");
        }
        CHECK(g->n_initializer == 9, "%zu initializers, expected 9", g->n_initializer);
        CHECK(g->n_input == 1 && strcmp(g->input[0]->name, "x") == 0 && g->n_output == 1 &&
                  strcmp(g->output[0]->name, "y") == 0, "graph x -> y");
        if (g->n_initializer == 9) {
            const Onnx__TensorProto *ax = g->initializer[0];
            CHECK(strcmp(ax->name, "squeeze_axes") == 0 && ax->n_dims == 1 && ax->dims[0] == 1 &&
                      ax->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && ax->n_int64_data == 1 &&
                      ax->int64_data[0] == 1,
                  "squeeze_axes = int64 [1]");
            const int64_t w0[3] = {1, 3 * H, 2}, r[3] = {1, 3 * H, H}, bb[2] = {1, 6 * H}, fw[2] = {H, 2}, fb[1] = {2};
            check_init(g->initializer[1], "W_l0", 3, w0);
            check_init(g->initializer[2], "R_l0", 3, r);
            check_init(g->initializer[3], "B_l0", 2, bb);
            check_init(g->initializer[4], "W_l1", 3, r);
            check_init(g->initializer[5], "R_l1", 3, r);
            check_init(g->initializer[6], "B_l1", 2, bb);
            check_init(g->initializer[7], "fc_out.weight_T", 2, fw);
            check_init(g->initializer[8], "fc_out.bias", 1, fb);
            /* gate blocks: ONNX z, r, h = PyTorch blocks 1, 0, 2 (r, z, n); fc_out transposed */
            const dd_param_table *t = dd_model_params(m);
            const float *wih = p + dd_param_table_find(t, "rnn.weight_ih_l0")->offset;
            const float *bhh = p + dd_param_table_find(t, "rnn.bias_hh_l1")->offset;
            const float *fcw = p + dd_param_table_find(t, "fc_out.weight")->offset;
            static const int perm[3] = {1, 0, 2};
            int bad = 0;
            for (size_t i = 0; i < (size_t)3 * H * 2 && g->initializer[1]->raw_data.len == (size_t)4 * 3 * H * 2; i++)
                bad += raw_f32(g->initializer[1], i) != wih[(size_t)perm[i / (size_t)(2 * H)] * (size_t)(2 * H) + i % (size_t)(2 * H)];
            for (size_t i = 0; i < (size_t)3 * H && g->initializer[6]->raw_data.len == (size_t)4 * 6 * H; i++)
                bad += raw_f32(g->initializer[6], (size_t)(3 * H) + i) != bhh[(size_t)perm[i / (size_t)H] * (size_t)H + i % (size_t)H];
            for (size_t i = 0; i < (size_t)2 * H && g->initializer[7]->raw_data.len == (size_t)4 * 2 * H; i++)
                bad += raw_f32(g->initializer[7], i) != fcw[(i % 2) * (size_t)H + i / 2];
            CHECK(bad == 0, "%d values of W_l0, B_l1 (recurrent half) or fc_out.weight_T differ from the parameters", bad);
        }
    out:
        onnx__model_proto__free_unpacked(mp, NULL);
    }
    free(b);
    dd_model_destroy(&m);
    dd_free(p);
}

int main(void) {
    const char *dir = dd_test_tmpdir();
    test_roundtrip(dir);
    test_onnx_unpack(dir);
    test_truncations(dir);
    test_runtime("gru");
    test_runtime("lstm");
    test_runtime("dgru");
    return dd_test_done("test_export");
}
