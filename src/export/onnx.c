/* ONNX export of the gru model (export.h, docs/deploy.md): a ModelProto (IR version 7,
 * opset 13) holding the graph
 *   x (T, B, 2) -> GRU (one per layer, linear_before_reset = 1: PyTorch's GRU) -> Squeeze
 *   -> ... -> MatMul fc_out.weight^T -> Add fc_out.bias -> y (T, B, 2)
 * with the weights as float32 initializers. ONNX orders the gate blocks z, r, h where
 * PyTorch (and distdpd) order r, z, n: the blocks are permuted here. Debian packages no C
 * binding of the ONNX schema, so the protobuf wire format of the few messages used is
 * written directly (field numbers of onnx/onnx.proto); the test validates the file with
 * the onnx package's checker and evaluates it with the operators' documented equations. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/export.h"
#include "train/train_internal.h" /* dd_train_write_text: atomic file writes */

/* A growable byte buffer; oom records an allocation failure. */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    int oom;
} pb_buf;

static void pb_put(pb_buf *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        unsigned char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void pb_varint(pb_buf *b, uint64_t v) {
    unsigned char t[10];
    size_t k = 0;
    do {
        t[k] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) t[k] |= 0x80;
        k++;
    } while (v);
    pb_put(b, t, k);
}

static void pb_int(pb_buf *b, int field, int64_t v) { /* wire type 0 */
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, (uint64_t)v);
}

static void pb_bytes(pb_buf *b, int field, const void *d, size_t n) { /* wire type 2 */
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_put(b, d, n);
}

static void pb_str(pb_buf *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* Appends the message m as field `field` of b and empties m. */
static void pb_msg(pb_buf *b, int field, pb_buf *m) {
    b->oom |= m->oom;
    pb_bytes(b, field, m->p, m->n);
    m->n = 0;
}

static void pb_free(pb_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* TensorProto: dims (1), data_type FLOAT = 1 (2), name (8), raw_data little-endian (9). */
static void tensor(pb_buf *g, const char *name, int ndim, const int64_t *dims, const float *v, size_t n) {
    pb_buf t = {0};
    for (int d = 0; d < ndim; d++) pb_int(&t, 1, dims[d]);
    pb_int(&t, 2, 1);
    pb_str(&t, 8, name);
    unsigned char *raw = malloc(n * 4 + 1);
    if (!raw) {
        g->oom = 1;
    } else {
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++) raw[4 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
        }
        pb_bytes(&t, 9, raw, n * 4);
        free(raw);
    }
    pb_msg(g, 5, &t); /* GraphProto.initializer */
    pb_free(&t);
}

static void tensor_i64(pb_buf *g, const char *name, int64_t v) {
    pb_buf t = {0};
    pb_int(&t, 1, 1);    /* dims [1] */
    pb_int(&t, 2, 7);    /* INT64 */
    pb_str(&t, 8, name);
    pb_buf d = {0};
    pb_varint(&d, (uint64_t)v);
    pb_msg(&t, 7, &d);   /* int64_data, packed */
    pb_msg(g, 5, &t);
    pb_free(&t);
    pb_free(&d);
}

/* NodeProto: inputs (1), outputs (2), name (3), op_type (4), INT attributes (5). */
static void node(pb_buf *g, const char *op, const char *name, const char *const *in, int nin, const char *out,
                 const char *attr, int64_t aval) {
    pb_buf n = {0}, a = {0};
    for (int i = 0; i < nin; i++) pb_str(&n, 1, in[i]);
    pb_str(&n, 2, out);
    pb_str(&n, 3, name);
    pb_str(&n, 4, op);
    for (const char *at = attr; at && *at;) { /* "name,name": each an INT attribute */
        const char *e = strchr(at, ',');
        size_t l = e ? (size_t)(e - at) : strlen(at);
        pb_bytes(&a, 1, at, l); /* AttributeProto.name */
        pb_int(&a, 20, 2);      /* type INT */
        pb_int(&a, 3, strncmp(at, "linear_before_reset", l) == 0 ? 1 : aval);
        pb_msg(&n, 5, &a);
        at = e ? e + 1 : at + l;
    }
    pb_msg(g, 1, &n);
    pb_free(&n);
    pb_free(&a);
}

/* ValueInfoProto of a float tensor (T, B, 2) with symbolic T and B. */
static void value_info(pb_buf *g, int field, const char *name) {
    pb_buf v = {0}, ty = {0}, tt = {0}, sh = {0}, dim = {0};
    static const char *const dn[2] = {"T", "B"};
    for (int d = 0; d < 3; d++) {
        if (d < 2)
            pb_str(&dim, 2, dn[d]); /* dim_param */
        else
            pb_int(&dim, 1, 2);     /* dim_value */
        pb_msg(&sh, 1, &dim);
    }
    pb_int(&tt, 1, 1);   /* elem_type FLOAT */
    pb_msg(&tt, 2, &sh); /* shape */
    pb_msg(&ty, 1, &tt); /* tensor_type */
    pb_str(&v, 1, name);
    pb_msg(&v, 2, &ty);
    pb_msg(g, field, &v);
    pb_free(&v);
    pb_free(&ty);
    pb_free(&tt);
    pb_free(&sh);
    pb_free(&dim);
}

dd_status dd_export_onnx(const dd_model *m, const float *params, const char *path) {
    if (!m || !params || !path) return dd_error(DD_ERR_ARG, "dd_export_onnx: NULL argument");
    if (strcmp(dd_model_name(m), "gru") != 0)
        return dd_error(DD_ERR_UNSUPPORTED, "export --format onnx: model '%s' is not supported (supported: %s)",
                        dd_model_name(m), DD_EXPORT_ONNX_MODELS);
    const dd_param_table *t = dd_model_params(m);
    const int H = dd_model_cfg_get(dd_model_config(m), "hidden"), L = dd_model_cfg_get(dd_model_config(m), "layers");
    pb_buf g = {0}, mp = {0}, op = {0};
    float *w = malloc((size_t)(3 * H) * (size_t)(H > 2 ? H : 2) * sizeof(float) + (size_t)(6 * H) * sizeof(float));
    if (!w) return DD_ERR_NOMEM;
    static const int perm[3] = {1, 0, 2}; /* ONNX block b <- PyTorch block perm[b]: z, r, h <- r, z, n */
    char in[64] = "x", out[64];
    tensor_i64(&g, "squeeze_axes", 1);
    for (int k = 0; k < L; k++) {
        const int D = k ? H : 2;
        char nm[4][64], on[4][64];
        snprintf(nm[0], 64, "rnn.weight_ih_l%d", k);
        snprintf(nm[1], 64, "rnn.weight_hh_l%d", k);
        snprintf(nm[2], 64, "rnn.bias_ih_l%d", k);
        snprintf(nm[3], 64, "rnn.bias_hh_l%d", k);
        const float *src[4];
        for (int j = 0; j < 4; j++) src[j] = params + dd_param_table_find(t, nm[j])->offset;
        snprintf(on[0], 64, "W_l%d", k);
        snprintf(on[1], 64, "R_l%d", k);
        snprintf(on[2], 64, "B_l%d", k);
        for (int j = 0; j < 2; j++) { /* W (1, 3H, D), R (1, 3H, H) */
            const size_t cols = (size_t)(j ? H : D), blk = (size_t)H * cols;
            for (int b = 0; b < 3; b++) memcpy(w + (size_t)b * blk, src[j] + (size_t)perm[b] * blk, blk * sizeof(float));
            const int64_t dims[3] = {1, 3 * H, (int64_t)cols};
            tensor(&g, on[j], 3, dims, w, 3 * blk);
        }
        for (int j = 0; j < 2; j++) /* B (1, 6H) = [Wb_z, Wb_r, Wb_h, Rb_z, Rb_r, Rb_h] */
            for (int b = 0; b < 3; b++)
                memcpy(w + (size_t)(3 * j + b) * (size_t)H, src[2 + j] + (size_t)perm[b] * (size_t)H, (size_t)H * sizeof(float));
        const int64_t bd[2] = {1, 6 * H};
        tensor(&g, on[2], 2, bd, w, 6 * (size_t)H);
        snprintf(out, sizeof out, "gru_l%d", k);
        const char *gin[4] = {in, on[0], on[1], on[2]};
        snprintf(on[3], 64, "GRU_l%d", k);
        node(&g, "GRU", on[3], gin, 4, out, "hidden_size,linear_before_reset", H);
        snprintf(in, sizeof in, "h_l%d", k); /* (T, 1, B, H) -> (T, B, H) */
        const char *sin[2] = {out, "squeeze_axes"};
        snprintf(on[3], 64, "Squeeze_l%d", k);
        node(&g, "Squeeze", on[3], sin, 2, in, NULL, 0);
    }
    const float *fw = params + dd_param_table_find(t, "fc_out.weight")->offset;
    for (int o = 0; o < 2; o++)
        for (int j = 0; j < H; j++) w[j * 2 + o] = fw[o * H + j]; /* (H, 2) = W^T */
    const int64_t wd[2] = {H, 2}, bd1[1] = {2};
    tensor(&g, "fc_out.weight_T", 2, wd, w, 2 * (size_t)H);
    tensor(&g, "fc_out.bias", 1, bd1, params + dd_param_table_find(t, "fc_out.bias")->offset, 2);
    const char *mm[2] = {in, "fc_out.weight_T"}, *ad[2] = {"fc_out_mm", "fc_out.bias"};
    node(&g, "MatMul", "fc_out_MatMul", mm, 2, "fc_out_mm", NULL, 0);
    node(&g, "Add", "fc_out_Add", ad, 2, "y", NULL, 0);
    free(w);
    pb_str(&g, 2, "distdpd_gru");
    value_info(&g, 11, "x");
    value_info(&g, 12, "y");
    pb_int(&mp, 1, 7);                 /* ir_version */
    pb_str(&mp, 2, "distdpd");         /* producer_name */
    pb_str(&mp, 3, DD_VERSION_STRING); /* producer_version */
    pb_msg(&mp, 7, &g);                /* graph */
    pb_int(&op, 2, 13);                /* opset_import: default domain, version 13 */
    pb_msg(&mp, 8, &op);
    dd_status st = DD_OK;
    if (mp.oom || g.oom) {
        st = dd_error(DD_ERR_NOMEM, "out of memory writing %s", path);
    } else {
        st = dd_train_write_text(path, (const char *)mp.p, mp.n);
    }
    pb_free(&g);
    pb_free(&mp);
    pb_free(&op);
    return st;
}
