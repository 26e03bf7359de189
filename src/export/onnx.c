/* ONNX export of the gru model (export.h, docs/deploy.md): a ModelProto (IR version 7,
 * opset 13) holding the graph
 *   x (T, B, 2) -> GRU (one per layer, linear_before_reset = 1: PyTorch's GRU) -> Squeeze
 *   -> ... -> MatMul fc_out.weight^T -> Add fc_out.bias -> y (T, B, 2)
 * with the weights as float32 initializers. ONNX orders the gate blocks z, r, h where
 * PyTorch (and distdpd) order r, z, n: the blocks are permuted here. The messages are the
 * protobuf-c structs generated at build time from the ONNX schema vendored in
 * third_party/onnx/onnx.proto (onnx.pb-c.h, build/gen) and serialised by libprotobuf-c;
 * the test validates the file with the onnx package's checker, evaluates it with the
 * operators' documented equations and reads it back with onnx__model_proto__unpack. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/export.h"
#include "onnx.pb-c.h"
#include "train/train_internal.h" /* dd_train_write_text: atomic file writes */

/* The messages of one GRU layer: initializers W, R, B, the GRU node and the Squeeze that
 * drops its num_directions axis; every string and array they point to lives here. */
typedef struct {
    Onnx__TensorProto t[3];
    int64_t dims[3][3];
    Onnx__NodeProto gru, sq;
    Onnx__AttributeProto at[2], *atp[2];
    char *gin[4], *sin[2], *gout, *sout;
    char nm[7][64]; /* W, R, B, gru output, GRU node, Squeeze output, Squeeze node */
} onnx_layer;

/* A float32 TensorProto named name with ndim dims, its n values as little-endian raw_data
 * (malloc'd: freed by the caller). Returns 0, or -1 when out of memory. */
static int tensor(Onnx__TensorProto *t, char *name, int ndim, int64_t *dims, const float *v, size_t n) {
    onnx__tensor_proto__init(t);
    t->name = name;
    t->n_dims = (size_t)ndim;
    t->dims = dims;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    unsigned char *raw = malloc(n * 4 + 1);
    if (!raw) return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) raw[4 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
    }
    t->has_raw_data = 1;
    t->raw_data.data = raw;
    t->raw_data.len = n * 4;
    return 0;
}

/* A NodeProto op named name from inputs in[0..nin-1] to *out, with nattr attributes. */
static void node(Onnx__NodeProto *nd, const char *op, char *name, char **in, int nin, char **out,
                 Onnx__AttributeProto **attr, int nattr) {
    onnx__node_proto__init(nd);
    nd->op_type = (char *)op;
    nd->name = name;
    nd->n_input = (size_t)nin;
    nd->input = in;
    nd->n_output = 1;
    nd->output = out;
    nd->n_attribute = (size_t)nattr;
    nd->attribute = attr;
}

static void attr_int(Onnx__AttributeProto *a, const char *name, int64_t v) {
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
}

dd_status dd_export_onnx(const dd_model *m, const float *params, const char *path) {
    if (!m || !params || !path) return dd_error(DD_ERR_ARG, "dd_export_onnx: NULL argument");
    if (strcmp(dd_model_name(m), "gru") != 0)
        return dd_error(DD_ERR_UNSUPPORTED, "export --format onnx: model '%s' is not supported (supported: %s)",
                        dd_model_name(m), DD_EXPORT_ONNX_MODELS);
    const dd_param_table *t = dd_model_params(m);
    const int H = dd_model_cfg_get(dd_model_config(m), "hidden"), L = dd_model_cfg_get(dd_model_config(m), "layers");
    const size_t ninit = 3 * (size_t)L + 3, nnode = 2 * (size_t)L + 2;
    float *w = malloc((size_t)(3 * H) * (size_t)(H > 2 ? H : 2) * sizeof(float) + (size_t)(6 * H) * sizeof(float));
    onnx_layer *ly = calloc((size_t)L, sizeof *ly);
    Onnx__TensorProto **inits = calloc(ninit, sizeof *inits);
    Onnx__NodeProto **nodes = calloc(nnode, sizeof *nodes);
    /* the graph's other messages: squeeze_axes, the head's tensors and nodes, x and y */
    Onnx__TensorProto axes, head[2];
    int64_t axes_dims[1] = {1}, axes_val[1] = {1}, wd[2] = {H, 2}, bd1[1] = {2};
    Onnx__NodeProto mm, ad;
    char *mm_in[2] = {NULL, "fc_out.weight_T"}, *ad_in[2] = {"fc_out_mm", "fc_out.bias"};
    char *mm_out[1] = {"fc_out_mm"}, *ad_out[1] = {"y"};
    Onnx__TensorShapeProto__Dimension dim[3], *dimp[3] = {&dim[0], &dim[1], &dim[2]};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    Onnx__TypeProto ty = ONNX__TYPE_PROTO__INIT;
    Onnx__ValueInfoProto vx = ONNX__VALUE_INFO_PROTO__INIT, vy = ONNX__VALUE_INFO_PROTO__INIT, *vxp = &vx, *vyp = &vy;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opp = &op;
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    unsigned char *buf = NULL;
    size_t ni = 0, nn = 0;
    int oom = !w || !ly || !inits || !nodes;
    dd_status st = DD_OK;
    if (oom) goto done;

    onnx__tensor_proto__init(&axes); /* Squeeze's axes input: int64 [1] */
    axes.name = "squeeze_axes";
    axes.n_dims = 1;
    axes.dims = axes_dims;
    axes.has_data_type = 1;
    axes.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    axes.n_int64_data = 1;
    axes.int64_data = axes_val;
    inits[ni++] = &axes;
    static const int perm[3] = {1, 0, 2}; /* ONNX block b <- PyTorch block perm[b]: z, r, h <- r, z, n */
    char *in = "x";
    for (int k = 0; k < L && !oom; k++) {
        onnx_layer *y = &ly[k];
        const int D = k ? H : 2;
        char nm[4][64];
        snprintf(nm[0], 64, "rnn.weight_ih_l%d", k);
        snprintf(nm[1], 64, "rnn.weight_hh_l%d", k);
        snprintf(nm[2], 64, "rnn.bias_ih_l%d", k);
        snprintf(nm[3], 64, "rnn.bias_hh_l%d", k);
        const float *src[4];
        for (int j = 0; j < 4; j++) src[j] = params + dd_param_table_find(t, nm[j])->offset;
        snprintf(y->nm[0], 64, "W_l%d", k);
        snprintf(y->nm[1], 64, "R_l%d", k);
        snprintf(y->nm[2], 64, "B_l%d", k);
        snprintf(y->nm[3], 64, "gru_l%d", k);
        snprintf(y->nm[4], 64, "GRU_l%d", k);
        snprintf(y->nm[5], 64, "h_l%d", k);
        snprintf(y->nm[6], 64, "Squeeze_l%d", k);
        for (int j = 0; j < 2; j++) { /* W (1, 3H, D), R (1, 3H, H) */
            const size_t cols = (size_t)(j ? H : D), blk = (size_t)H * cols;
            for (int b = 0; b < 3; b++) memcpy(w + (size_t)b * blk, src[j] + (size_t)perm[b] * blk, blk * sizeof(float));
            y->dims[j][0] = 1;
            y->dims[j][1] = 3 * H;
            y->dims[j][2] = (int64_t)cols;
            oom |= tensor(&y->t[j], y->nm[j], 3, y->dims[j], w, 3 * blk) != 0;
            inits[ni++] = &y->t[j];
        }
        for (int j = 0; j < 2; j++) /* B (1, 6H) = [Wb_z, Wb_r, Wb_h, Rb_z, Rb_r, Rb_h] */
            for (int b = 0; b < 3; b++)
                memcpy(w + (size_t)(3 * j + b) * (size_t)H, src[2 + j] + (size_t)perm[b] * (size_t)H, (size_t)H * sizeof(float));
        y->dims[2][0] = 1;
        y->dims[2][1] = 6 * H;
        oom |= tensor(&y->t[2], y->nm[2], 2, y->dims[2], w, 6 * (size_t)H) != 0;
        inits[ni++] = &y->t[2];
        attr_int(&y->at[0], "hidden_size", H);
        attr_int(&y->at[1], "linear_before_reset", 1);
        y->atp[0] = &y->at[0];
        y->atp[1] = &y->at[1];
        y->gin[0] = in;
        for (int j = 0; j < 3; j++) y->gin[1 + j] = y->nm[j];
        y->gout = y->nm[3];
        node(&y->gru, "GRU", y->nm[4], y->gin, 4, &y->gout, y->atp, 2);
        nodes[nn++] = &y->gru;
        y->sin[0] = y->nm[3]; /* (T, 1, B, H) -> (T, B, H) */
        y->sin[1] = "squeeze_axes";
        y->sout = y->nm[5];
        node(&y->sq, "Squeeze", y->nm[6], y->sin, 2, &y->sout, NULL, 0);
        nodes[nn++] = &y->sq;
        in = y->nm[5];
    }
    if (oom) goto done;
    const float *fw = params + dd_param_table_find(t, "fc_out.weight")->offset;
    for (int o = 0; o < 2; o++)
        for (int j = 0; j < H; j++) w[j * 2 + o] = fw[o * H + j]; /* (H, 2) = W^T */
    oom |= tensor(&head[0], "fc_out.weight_T", 2, wd, w, 2 * (size_t)H) != 0;
    inits[ni++] = &head[0];
    oom |= tensor(&head[1], "fc_out.bias", 1, bd1, params + dd_param_table_find(t, "fc_out.bias")->offset, 2) != 0;
    inits[ni++] = &head[1];
    mm_in[0] = in;
    node(&mm, "MatMul", "fc_out_MatMul", mm_in, 2, mm_out, NULL, 0);
    node(&ad, "Add", "fc_out_Add", ad_in, 2, ad_out, NULL, 0);
    nodes[nn++] = &mm;
    nodes[nn++] = &ad;
    if (oom) goto done;

    for (int d = 0; d < 3; d++) { /* x and y: float (T, B, 2), T and B symbolic */
        onnx__tensor_shape_proto__dimension__init(&dim[d]);
        if (d < 2) { /* NOLINT(bugprone-branch-clone): not clones (clang-tidy 14 compares the protobuf-c union) */
            dim[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim[d].dim_param = d ? "B" : "T";
        } else {
            dim[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim[d].dim_value = 2;
        }
    }
    shape.n_dim = 3;
    shape.dim = dimp;
    tt.has_elem_type = 1;
    tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt.shape = &shape;
    ty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty.tensor_type = &tt;
    vx.name = "x";
    vx.type = &ty;
    vy.name = "y";
    vy.type = &ty;

    g.name = "distdpd_gru";
    g.n_node = nn;
    g.node = nodes;
    g.n_initializer = ni;
    g.initializer = inits;
    g.n_input = 1;
    g.input = &vxp;
    g.n_output = 1;
    g.output = &vyp;
    op.has_version = 1; /* opset_import: default domain, version 13 */
    op.version = 13;
    mp.has_ir_version = 1;
    mp.ir_version = 7;
    mp.producer_name = "distdpd";
    mp.producer_version = DD_VERSION_STRING;
    mp.graph = &g;
    mp.n_opset_import = 1;
    mp.opset_import = &opp;
    const size_t n = onnx__model_proto__get_packed_size(&mp);
    buf = malloc(n + 1);
    if (!buf) {
        oom = 1;
        goto done;
    }
    const size_t packed = onnx__model_proto__pack(&mp, buf);
    if (packed != n)
        st = dd_error(DD_ERR_IO, "%s: protobuf-c packed %zu bytes of %zu", path, packed, n);
    else
        st = dd_train_write_text(path, (const char *)buf, n);
done:
    if (oom) st = dd_error(DD_ERR_NOMEM, "out of memory writing %s", path);
    for (size_t i = 1; i < ni; i++) free(inits[i]->raw_data.data); /* inits[0]: squeeze_axes, no raw_data */
    free(buf);
    free(nodes);
    free(inits);
    free(ly);
    free(w);
    return st;
}
