/* Every model against an independent PyTorch implementation (float64), made by
 * tools/make_model_refs.py and committed as tests/data/model_refs.json.
 *
 * For each case the model is created by name with the case's configuration, every
 * parameter is loaded BY NAME from the reference (the names and shapes must match the
 * PyTorch state_dict: this is what makes a torch checkpoint loadable), and distdpd's
 * float32 forward and backward are compared: y, dL/dx and dL/d<every parameter> of
 * L = sum(y .* g_y). Error of a tensor = max |ours - ref| / max |ref|; tolerance 5e-6
 * (float32 arithmetic through a few layers). The "gru" case is OpenDPD's GRU model at
 * hidden 23 (1,911 parameters). */
#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/model.h"
#include "distdpd/param.h"

#define TOL 5e-6

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

/* Tensor `name` of a case: its data array and shape array (NULL if absent). */
static const cJSON *tensor(const cJSON *cs, const char *name, const cJSON **shape) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "tensors"), name);
    if (shape) *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    return cJSON_GetObjectItemCaseSensitive(t, "data");
}

static size_t load(const cJSON *data, float *dst, size_t cap) {
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, data) {
        if (i < cap) dst[i] = (float)v->valuedouble;
        i++;
    }
    return i;
}

static int cfgi(const cJSON *cs, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "config"), key);
    CHECK(cJSON_IsNumber(v), "config '%s' missing", key);
    return cJSON_IsNumber(v) ? v->valueint : 0;
}

static double worst = 0;

static void cmp(const char *cname, const char *what, const float *ours, const cJSON *data,
                size_t n) {
    size_t m = (size_t)cJSON_GetArraySize(data);
    CHECK(m == n, "%s: %s has %zu values, expected %zu", cname, what, m, n);
    if (m != n) return;
    double e = 0, mx = 0;
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, data) {
        e = fmax(e, fabs((double)ours[i] - v->valuedouble));
        mx = fmax(mx, fabs(v->valuedouble));
        i++;
    }
    double rel = e / fmax(mx, 1e-300);
    CHECK(rel < TOL, "%s: %s rel err %.3g", cname, what, rel);
    printf("  %-12s %-24s rel err %.2e\n", cname, what, rel);
    worst = fmax(worst, rel);
}

static void run_case(const cJSON *cs) {
    const char *cname = cJSON_GetObjectItemCaseSensitive(cs, "name")->valuestring;
    const char *mname = cJSON_GetObjectItemCaseSensitive(cs, "model")->valuestring;
    dd_model_cfg cfg = {0};
    static const char *const keys[] = {"hidden", "layers", "memory", "order", "kernel", "cross"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) dd_model_cfg_set(&cfg, keys[k], cfgi(cs, keys[k]));
    const int B = cfgi(cs, "B"), T = cfgi(cs, "T");
    dd_model *m = NULL;
    CHECK_OK(dd_model_create(mname, &cfg, &m));
    if (!m) return;
    char desc[256];
    dd_model_describe(m, desc, sizeof desc);
    printf("%s: %s\n", cname, desc);
    const dd_param_table *t = dd_model_params(m);
    float *p = dd_calloc(t->total, sizeof(float)), *g = dd_calloc(t->total, sizeof(float));
    const size_t nx = (size_t)B * T * 2;
    float *x = calloc(nx, sizeof *x), *y = calloc(nx, sizeof *y), *gy = calloc(nx, sizeof *gy);
    float *dx = calloc(nx, sizeof *dx);
    CHECK(load(tensor(cs, "x", NULL), x, nx) == nx, "%s: x", cname);
    CHECK(load(tensor(cs, "g_y", NULL), gy, nx) == nx, "%s: g_y", cname);

    /* every table entry exists in the reference with the same shape, and vice versa */
    size_t nref = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(cs, "tensors")) {
        const char *k = it->string;
        if (strncmp(k, "d_", 2) != 0 && strcmp(k, "x") != 0 && strcmp(k, "y") != 0 && strcmp(k, "g_y") != 0) {
            nref++;
            CHECK(dd_param_table_find(t, k) != NULL, "%s: reference tensor '%s' not in the model",
                  cname, k);
        }
    }
    CHECK(nref == t->count, "%s: %zu reference tensors, model has %zu", cname, nref, t->count);
    for (size_t e = 0; e < t->count; e++) {
        const dd_param_entry *en = &t->entries[e];
        const cJSON *shape = NULL, *data = tensor(cs, en->name, &shape);
        CHECK(data != NULL, "%s: '%s' missing from the reference", cname, en->name);
        if (!data) continue;
        CHECK(cJSON_GetArraySize(shape) == en->ndim, "%s: '%s' ndim", cname, en->name);
        int d = 0;
        const cJSON *s;
        cJSON_ArrayForEach(s, shape) {
            CHECK(d < en->ndim && (size_t)s->valueint == en->shape[d], "%s: '%s' shape[%d]", cname,
                  en->name, d);
            d++;
        }
        CHECK(load(data, p + en->offset, en->size) == en->size, "%s: '%s' size", cname, en->name);
    }

    float *ws = dd_calloc(dd_model_workspace_size(m, B, T), sizeof(float));
    CHECK_OK(dd_model_forward(m, p, x, y, B, T, ws));
    cmp(cname, "y", y, tensor(cs, "y", NULL), nx);
    CHECK_OK(dd_model_backward(m, p, g, x, gy, dx, B, T, ws));
    cmp(cname, "d_x", dx, tensor(cs, "d_x", NULL), nx);
    for (size_t e = 0; e < t->count; e++) {
        const dd_param_entry *en = &t->entries[e];
        char key[DD_PARAM_NAME_MAX + 2];
        snprintf(key, sizeof key, "d_%s", en->name);
        const cJSON *data = tensor(cs, key, NULL);
        CHECK(data != NULL, "%s: %s missing", cname, key);
        if (data) cmp(cname, key, g + en->offset, data, en->size);
    }
    dd_free(ws);
    dd_free(p);
    dd_free(g);
    free(x);
    free(y);
    free(gy);
    free(dx);
    dd_model_destroy(&m);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/model_refs.json", dd_test_srcdir());
    char *text = read_text(path);
    CHECK(text != NULL, "cannot read %s", path);
    if (!text) return dd_test_done("test_models_ref");
    cJSON *root = cJSON_Parse(text);
    CHECK(root != NULL, "%s: bad JSON", path);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    size_t n = 0, nreg = 0;
    const dd_model_info *const *reg = dd_model_registry(&nreg);
    int *covered = calloc(nreg, sizeof *covered);
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cases) {
        run_case(cs);
        const char *mname = cJSON_GetObjectItemCaseSensitive(cs, "model")->valuestring;
        for (size_t i = 0; i < nreg; i++) covered[i] |= strcmp(reg[i]->name, mname) == 0;
        n++;
    }
    /* every registered model has a reference case */
    for (size_t i = 0; i < nreg; i++)
        CHECK(covered[i], "model %s has no PyTorch reference case", reg[i]->name);
    printf("%zu cases, worst rel err %.2e (tolerance %.0e)\n", n, worst, TOL);
    free(covered);
    cJSON_Delete(root);
    free(text);
    return dd_test_done("test_models_ref");
}
