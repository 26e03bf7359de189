/* Layer forward and backward against reference vectors from an independent
 * implementation: PyTorch 1.13 (float64), made by tools/make_nn_refs.py and committed as
 * tests/data/nn_ref_{gru,lstm,dense,conv1d,misc}.json.
 *
 * Every case runs distdpd's float64 path (must match to 1e-9 relative) and its float32
 * path (inputs rounded to float; must match to 1e-5 relative). The error of a tensor is
 * max_i |ours_i - ref_i| / max_i |ref_i|. Loss L = sum(out .* g_out) (+ sum(cn .* g_cn)
 * for the LSTM), so the gradients compared are torch's autograd of that loss. */
#include <cjson/cJSON.h>

#include "distdpd/nn.h"
#include "dd_test.h"

#define TOL64 1e-9
#define TOL32 1e-5

static double worst64 = 0, worst32 = 0;

/* One tensor of a case, as doubles (owned). */
typedef struct {
    double *d;
    size_t n;
} ten;

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[len] = 0;
    fclose(f);
    return buf;
}

static ten get(const cJSON *cs, const char *name) {
    ten t = {NULL, 0};
    const cJSON *tens = cJSON_GetObjectItemCaseSensitive(cs, "tensors");
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(tens, name);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
    if (!cJSON_IsArray(data)) {
        CHECK(0, "tensor '%s' missing", name);
        t.d = dd_calloc(1, sizeof(double));
        return t;
    }
    t.n = (size_t)cJSON_GetArraySize(data);
    t.d = dd_calloc(t.n ? t.n : 1, sizeof(double));
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, data) t.d[i++] = v->valuedouble;
    return t;
}

static int cfg(const cJSON *cs, const char *key) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(cs, "config");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    CHECK(cJSON_IsNumber(v), "config '%s' missing", key);
    return cJSON_IsNumber(v) ? v->valueint : 0;
}

static double *zeros(size_t n) { return dd_calloc(n ? n : 1, sizeof(double)); }
static float *tof(const double *x, size_t n) {
    float *f = dd_calloc(n ? n : 1, sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}
static float *fzeros(size_t n) { return dd_calloc(n ? n : 1, sizeof(float)); }

static double relerr64(const double *a, const double *ref, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    return e / fmax(m, 1e-300);
}
static double relerr32(const float *a, const double *ref, size_t n) {
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    return e / fmax(m, 1e-300);
}

/* Compares one float64 and one float32 result with the reference tensor `name`. */
static void cmp(const char *cname, const cJSON *cs, const char *name, const double *a64,
                const float *a32, size_t n) {
    ten r = get(cs, name);
    CHECK(r.n == n, "%s: %s has %zu values, expected %zu", cname, name, r.n, n);
    if (r.n == n) {
        double e64 = relerr64(a64, r.d, n), e32 = relerr32(a32, r.d, n);
        CHECK(e64 < TOL64, "%s: %s float64 rel err %.3g", cname, name, e64);
        CHECK(e32 < TOL32, "%s: %s float32 rel err %.3g", cname, name, e32);
        printf("  %-16s %-18s f64 %.2e  f32 %.2e\n", cname, name, e64, e32);
        worst64 = fmax(worst64, e64);
        worst32 = fmax(worst32, e32);
    }
    dd_free(r.d);
}

static void run_gru(const char *cname, const cJSON *cs) {
    int B = cfg(cs, "B"), T = cfg(cs, "T"), D = cfg(cs, "D"), H = cfg(cs, "H");
    ten x = get(cs, "x"), h0 = get(cs, "h0"), wi = get(cs, "weight_ih_l0"), wh = get(cs, "weight_hh_l0");
    ten bi = get(cs, "bias_ih_l0"), bh = get(cs, "bias_hh_l0"), g = get(cs, "g_out");
    size_t BTH = (size_t)B * T * H, G3 = 3 * (size_t)H, BH = (size_t)B * H;
    /* an all-zero h0 goes in as NULL, exercising the default */
    int h0_zero = 1;
    for (size_t i = 0; i < h0.n; i++) h0_zero &= h0.d[i] == 0;

    double *y = zeros(BTH), *ws = zeros(dd_gru_workspace_size(B, T, D, H));
    double *dx = zeros(x.n), *dh0 = zeros(BH), *dwi = zeros(wi.n), *dwh = zeros(wh.n);
    double *dbi = zeros(G3), *dbh = zeros(G3);
    dd_gru_forward_f64(y, ws, x.d, h0_zero ? NULL : h0.d, wi.d, wh.d, bi.d, bh.d, B, T, D, H);
    dd_gru_backward_f64(dx, dh0, dwi, dwh, dbi, dbh, g.d, ws, x.d, wi.d, wh.d, B, T, D, H);

    float *fx = tof(x.d, x.n), *fh0 = tof(h0.d, h0.n), *fwi = tof(wi.d, wi.n), *fwh = tof(wh.d, wh.n);
    float *fbi = tof(bi.d, G3), *fbh = tof(bh.d, G3), *fg = tof(g.d, g.n);
    float *fy = fzeros(BTH), *fws = fzeros(dd_gru_workspace_size(B, T, D, H));
    float *fdx = fzeros(x.n), *fdh0 = fzeros(BH), *fdwi = fzeros(wi.n), *fdwh = fzeros(wh.n);
    float *fdbi = fzeros(G3), *fdbh = fzeros(G3);
    dd_gru_forward(fy, fws, fx, h0_zero ? NULL : fh0, fwi, fwh, fbi, fbh, B, T, D, H);
    dd_gru_backward(fdx, fdh0, fdwi, fdwh, fdbi, fdbh, fg, fws, fx, fwi, fwh, B, T, D, H);

    cmp(cname, cs, "out", y, fy, BTH);
    cmp(cname, cs, "d_x", dx, fdx, x.n);
    cmp(cname, cs, "d_h0", dh0, fdh0, BH);
    cmp(cname, cs, "d_weight_ih_l0", dwi, fdwi, wi.n);
    cmp(cname, cs, "d_weight_hh_l0", dwh, fdwh, wh.n);
    cmp(cname, cs, "d_bias_ih_l0", dbi, fdbi, G3);
    cmp(cname, cs, "d_bias_hh_l0", dbh, fdbh, G3);
    dd_free(x.d), dd_free(h0.d), dd_free(wi.d), dd_free(wh.d), dd_free(bi.d), dd_free(bh.d), dd_free(g.d);
    dd_free(y), dd_free(ws), dd_free(dx), dd_free(dh0), dd_free(dwi), dd_free(dwh), dd_free(dbi),
        dd_free(dbh);
    dd_free(fx), dd_free(fh0), dd_free(fwi), dd_free(fwh), dd_free(fbi), dd_free(fbh), dd_free(fg);
    dd_free(fy), dd_free(fws), dd_free(fdx), dd_free(fdh0), dd_free(fdwi), dd_free(fdwh),
        dd_free(fdbi), dd_free(fdbh);
}

static void run_lstm(const char *cname, const cJSON *cs) {
    int B = cfg(cs, "B"), T = cfg(cs, "T"), D = cfg(cs, "D"), H = cfg(cs, "H");
    ten x = get(cs, "x"), h0 = get(cs, "h0"), c0 = get(cs, "c0"), wi = get(cs, "weight_ih_l0");
    ten wh = get(cs, "weight_hh_l0"), bi = get(cs, "bias_ih_l0"), bh = get(cs, "bias_hh_l0");
    ten g = get(cs, "g_out"), gc = get(cs, "g_cn");
    size_t BTH = (size_t)B * T * H, G4 = 4 * (size_t)H, BH = (size_t)B * H;

    double *y = zeros(BTH), *cn = zeros(BH), *ws = zeros(dd_lstm_workspace_size(B, T, D, H));
    double *dx = zeros(x.n), *dh0 = zeros(BH), *dc0 = zeros(BH), *dwi = zeros(wi.n), *dwh = zeros(wh.n);
    double *dbi = zeros(G4), *dbh = zeros(G4);
    dd_lstm_forward_f64(y, cn, ws, x.d, h0.d, c0.d, wi.d, wh.d, bi.d, bh.d, B, T, D, H);
    dd_lstm_backward_f64(dx, dh0, dc0, dwi, dwh, dbi, dbh, g.d, gc.d, ws, x.d, wi.d, wh.d, B, T, D, H);

    float *fx = tof(x.d, x.n), *fh0 = tof(h0.d, BH), *fc0 = tof(c0.d, BH), *fwi = tof(wi.d, wi.n);
    float *fwh = tof(wh.d, wh.n), *fbi = tof(bi.d, G4), *fbh = tof(bh.d, G4), *fg = tof(g.d, g.n);
    float *fgc = tof(gc.d, BH), *fy = fzeros(BTH), *fcn = fzeros(BH);
    float *fws = fzeros(dd_lstm_workspace_size(B, T, D, H));
    float *fdx = fzeros(x.n), *fdh0 = fzeros(BH), *fdc0 = fzeros(BH), *fdwi = fzeros(wi.n);
    float *fdwh = fzeros(wh.n), *fdbi = fzeros(G4), *fdbh = fzeros(G4);
    dd_lstm_forward(fy, fcn, fws, fx, fh0, fc0, fwi, fwh, fbi, fbh, B, T, D, H);
    dd_lstm_backward(fdx, fdh0, fdc0, fdwi, fdwh, fdbi, fdbh, fg, fgc, fws, fx, fwi, fwh, B, T, D, H);

    cmp(cname, cs, "out", y, fy, BTH);
    cmp(cname, cs, "cn", cn, fcn, BH);
    cmp(cname, cs, "d_x", dx, fdx, x.n);
    cmp(cname, cs, "d_h0", dh0, fdh0, BH);
    cmp(cname, cs, "d_c0", dc0, fdc0, BH);
    cmp(cname, cs, "d_weight_ih_l0", dwi, fdwi, wi.n);
    cmp(cname, cs, "d_weight_hh_l0", dwh, fdwh, wh.n);
    cmp(cname, cs, "d_bias_ih_l0", dbi, fdbi, G4);
    cmp(cname, cs, "d_bias_hh_l0", dbh, fdbh, G4);
    dd_free(x.d), dd_free(h0.d), dd_free(c0.d), dd_free(wi.d), dd_free(wh.d), dd_free(bi.d),
        dd_free(bh.d), dd_free(g.d), dd_free(gc.d);
    dd_free(y), dd_free(cn), dd_free(ws), dd_free(dx), dd_free(dh0), dd_free(dc0), dd_free(dwi),
        dd_free(dwh), dd_free(dbi), dd_free(dbh);
    dd_free(fx), dd_free(fh0), dd_free(fc0), dd_free(fwi), dd_free(fwh), dd_free(fbi), dd_free(fbh),
        dd_free(fg), dd_free(fgc), dd_free(fy), dd_free(fcn), dd_free(fws), dd_free(fdx),
        dd_free(fdh0), dd_free(fdc0), dd_free(fdwi), dd_free(fdwh), dd_free(fdbi), dd_free(fdbh);
}

static void run_dense(const char *cname, const cJSON *cs) {
    int N = cfg(cs, "N"), in = cfg(cs, "in_dim"), out = cfg(cs, "out_dim");
    ten x = get(cs, "x"), w = get(cs, "weight"), b = get(cs, "bias"), g = get(cs, "g_out");
    size_t no = (size_t)N * out;
    double *y = zeros(no), *dx = zeros(x.n), *dw = zeros(w.n), *db = zeros((size_t)out);
    dd_dense_forward_f64(y, x.d, w.d, b.d, (size_t)N, in, out);
    dd_dense_backward_f64(dx, dw, db, g.d, x.d, w.d, (size_t)N, in, out);
    float *fx = tof(x.d, x.n), *fw = tof(w.d, w.n), *fb = tof(b.d, b.n), *fg = tof(g.d, g.n);
    float *fy = fzeros(no), *fdx = fzeros(x.n), *fdw = fzeros(w.n), *fdb = fzeros((size_t)out);
    dd_dense_forward(fy, fx, fw, fb, (size_t)N, in, out);
    dd_dense_backward(fdx, fdw, fdb, fg, fx, fw, (size_t)N, in, out);
    cmp(cname, cs, "out", y, fy, no);
    cmp(cname, cs, "d_x", dx, fdx, x.n);
    cmp(cname, cs, "d_weight", dw, fdw, w.n);
    cmp(cname, cs, "d_bias", db, fdb, (size_t)out);
    dd_free(x.d), dd_free(w.d), dd_free(b.d), dd_free(g.d), dd_free(y), dd_free(dx), dd_free(dw),
        dd_free(db);
    dd_free(fx), dd_free(fw), dd_free(fb), dd_free(fg), dd_free(fy), dd_free(fdx), dd_free(fdw),
        dd_free(fdb);
}

static void run_conv(const char *cname, const cJSON *cs) {
    int B = cfg(cs, "B"), T = cfg(cs, "T"), ci = cfg(cs, "c_in"), co = cfg(cs, "c_out");
    int K = cfg(cs, "kernel"), dil = cfg(cs, "dilation"), gr = cfg(cs, "groups");
    CHECK_OK(dd_conv1d_check(ci, co, K, dil, gr));
    ten x = get(cs, "x"), w = get(cs, "weight"), b = get(cs, "bias"), g = get(cs, "g_out");
    size_t no = (size_t)B * T * co;
    double *y = zeros(no), *dx = zeros(x.n), *dw = zeros(w.n), *db = zeros((size_t)co);
    dd_conv1d_forward_f64(y, x.d, w.d, b.d, B, T, ci, co, K, dil, gr);
    dd_conv1d_backward_f64(dx, dw, db, g.d, x.d, w.d, B, T, ci, co, K, dil, gr);
    float *fx = tof(x.d, x.n), *fw = tof(w.d, w.n), *fb = tof(b.d, b.n), *fg = tof(g.d, g.n);
    float *fy = fzeros(no), *fdx = fzeros(x.n), *fdw = fzeros(w.n), *fdb = fzeros((size_t)co);
    dd_conv1d_forward(fy, fx, fw, fb, B, T, ci, co, K, dil, gr);
    dd_conv1d_backward(fdx, fdw, fdb, fg, fx, fw, B, T, ci, co, K, dil, gr);
    cmp(cname, cs, "out", y, fy, no);
    cmp(cname, cs, "d_x", dx, fdx, x.n);
    cmp(cname, cs, "d_weight", dw, fdw, w.n);
    cmp(cname, cs, "d_bias", db, fdb, (size_t)co);
    dd_free(x.d), dd_free(w.d), dd_free(b.d), dd_free(g.d), dd_free(y), dd_free(dx), dd_free(dw),
        dd_free(db);
    dd_free(fx), dd_free(fw), dd_free(fb), dd_free(fg), dd_free(fy), dd_free(fdx), dd_free(fdw),
        dd_free(fdb);
}

static void run_act(const char *cname, const cJSON *cs) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(cs, "config");
    const cJSON *an = cJSON_GetObjectItemCaseSensitive(c, "act");
    dd_act a = DD_ACT_IDENTITY;
    CHECK_OK(dd_act_parse(cJSON_IsString(an) ? an->valuestring : "", &a));
    ten x = get(cs, "x"), g = get(cs, "g_out");
    double *y = zeros(x.n), *dx = zeros(x.n);
    dd_act_forward_f64(a, y, x.d, x.n);
    dd_act_backward_f64(a, dx, g.d, x.d, y, x.n);
    float *fx = tof(x.d, x.n), *fg = tof(g.d, g.n), *fy = fzeros(x.n), *fdx = fzeros(x.n);
    dd_act_forward(a, fy, fx, x.n);
    dd_act_backward(a, fdx, fg, fx, fy, x.n);
    cmp(cname, cs, "out", y, fy, x.n);
    cmp(cname, cs, "d_x", dx, fdx, x.n);
    dd_free(x.d), dd_free(g.d), dd_free(y), dd_free(dx), dd_free(fx), dd_free(fg), dd_free(fy),
        dd_free(fdx);
}

static void run_iqfeat(const char *cname, const cJSON *cs) {
    int N = cfg(cs, "N");
    ten x = get(cs, "x"), g = get(cs, "g_out");
    size_t no = (size_t)N * DD_IQFEAT_DIM;
    double *y = zeros(no), *dx = zeros(x.n);
    dd_iqfeat_forward_f64(y, x.d, (size_t)N);
    dd_iqfeat_backward_f64(dx, g.d, x.d, (size_t)N);
    float *fx = tof(x.d, x.n), *fg = tof(g.d, g.n), *fy = fzeros(no), *fdx = fzeros(x.n);
    dd_iqfeat_forward(fy, fx, (size_t)N);
    dd_iqfeat_backward(fdx, fg, fx, (size_t)N);
    cmp(cname, cs, "out", y, fy, no);
    cmp(cname, cs, "d_x", dx, fdx, x.n);
    dd_free(x.d), dd_free(g.d), dd_free(y), dd_free(dx), dd_free(fx), dd_free(fg), dd_free(fy),
        dd_free(fdx);
}

static int run_file(const char *leaf) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s", dd_test_srcdir(), leaf);
    char *txt = read_text(path);
    CHECK(txt != NULL, "cannot read %s (run tools/make_nn_refs.py)", path);
    if (!txt) return 0;
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    CHECK(root != NULL, "%s: invalid JSON", path);
    int ncase = 0;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *cs;
    cJSON_ArrayForEach(cs, cases) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cs, "name");
        const cJSON *ly = cJSON_GetObjectItemCaseSensitive(cs, "layer");
        const char *cname = cJSON_IsString(nm) ? nm->valuestring : "?";
        const char *layer = cJSON_IsString(ly) ? ly->valuestring : "?";
        if (strcmp(layer, "gru") == 0)
            run_gru(cname, cs);
        else if (strcmp(layer, "lstm") == 0)
            run_lstm(cname, cs);
        else if (strcmp(layer, "dense") == 0)
            run_dense(cname, cs);
        else if (strcmp(layer, "conv1d") == 0)
            run_conv(cname, cs);
        else if (strcmp(layer, "act") == 0)
            run_act(cname, cs);
        else if (strcmp(layer, "iqfeat") == 0)
            run_iqfeat(cname, cs);
        else
            CHECK(0, "%s: unknown layer '%s'", path, layer);
        ncase++;
    }
    cJSON_Delete(root);
    return ncase;
}

int main(void) {
    printf("PyTorch reference vectors (max rel err per tensor):\n");
    CHECK(run_file("nn_ref_gru.json") == 3, "gru cases");
    CHECK(run_file("nn_ref_lstm.json") == 2, "lstm cases");
    CHECK(run_file("nn_ref_dense.json") == 2, "dense cases");
    CHECK(run_file("nn_ref_conv1d.json") == 4, "conv1d cases");
    CHECK(run_file("nn_ref_misc.json") == 5, "misc cases");
    printf("worst: float64 %.2e (tol %.0e), float32 %.2e (tol %.0e)\n", worst64, TOL64, worst32, TOL32);
    return dd_test_done("test_nn_ref");
}
