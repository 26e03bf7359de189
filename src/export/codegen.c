/* C code generation for trained models (export.h, docs/deploy.md): the model's weights,
 * float32 or quantised to int16 / int8 Q formats calibrated on the training data, and
 * the runtime xrt.inc (compiled here three times, and copied as text into every
 * generated source), so that the loss measured here is the generated code's own. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/export.h"
#include "train/train_internal.h" /* dd_train_write_text: atomic file writes */
#include "xrt_text.h" /* dd_xrt_text: src/export/xrt.inc as lines (cmake/embed_text.cmake) */

#define XRT_BITS 0
#define XRT(n) xf_##n
#include "export/xrt.inc"
#undef XRT
#undef XRT_BITS
#define XRT_BITS 16
#define XRT(n) x16_##n
#include "export/xrt.inc"
#undef XRT
#undef XRT_BITS
#define XRT_BITS 8
#define XRT(n) x8_##n
#include "export/xrt.inc"
#undef XRT
#undef XRT_BITS

#define MAXL 64

struct dd_export_c {
    int bits, L, H, lstm; /* lstm: 1 for an LSTM stack (4 gate blocks), 0 for GRU (3) */
    int dgru;             /* OpenDPD's DGRU: features, one GRU layer, ReLU(fc_hid), fc_out */
    char prefix[64], about[512], desc[256];
    const dd_param_table *t; /* the model's table (the model outlives e) */
    float *wf;               /* float parameters (arena copy) */
    int16_t *w16;            /* quantised weights at arena offsets (one of w16, w8) */
    int8_t *w8;
    int64_t *b64;            /* quantised biases at arena offsets (one of b64, b32) */
    int32_t *b32;
    int32_t sig[XRT_LUT_N], tnh[XRT_LUT_N];
    dd_export_q q;
    size_t off[MAXL][4], out_w, out_b, hid_w, hid_b; /* arena offsets: w_ih, w_hh, b_ih, b_hh; head; fc_hid */
    int sh_i[MAXL], sh_h[MAXL], sh_out, sh_hid, sh_cat;
    xf_rnn gf[MAXL];
    xf_model mf;
    x16_rnn g16[MAXL];
    x16_model m16;
    x8_rnn g8[MAXL];
    x8_model m8;
};

int dd_export_c_supported(const dd_model *m) {
    const char *n = m ? dd_model_name(m) : "";
    return strcmp(n, "gru") == 0 || strcmp(n, "lstm") == 0 || strcmp(n, "dgru") == 0;
}

void dd_export_c_destroy(dd_export_c **e) {
    if (!e || !*e) return;
    free((*e)->wf);
    free((*e)->w16);
    free((*e)->w8);
    free((*e)->b64);
    free((*e)->b32);
    free(*e);
    *e = NULL;
}

const dd_export_q *dd_export_c_formats(const dd_export_c *e) { return e ? &e->q : NULL; }

/* Fraction bits of a B-bit format for values up to maxabs: the largest f with
 * maxabs 2^f <= 2^(B-1) - 1, within [-16, B + 8]. */
static int frac_for(double maxabs, int bits) {
    const double amax = (double)((1 << (bits - 1)) - 1);
    if (!(maxabs > 0)) return bits - 1;
    int f = (int)floor(log2(amax / maxabs));
    while (f > -16 && ldexp(maxabs, f) > amax) f--;
    return f < -16 ? -16 : f > bits + 8 ? bits + 8 : f;
}

static double max_abs(const float *p, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)p[i]));
    return m;
}

static int tensor_index(const dd_param_table *t, size_t off) {
    for (size_t i = 0; i < t->count; i++)
        if (t->entries[i].offset == off) return (int)i;
    return -1;
}

/* Quantises weight tensor at arena offset off (n values) with f fraction bits. */
static void quant_w(dd_export_c *e, size_t off, size_t n, int f) {
    for (size_t i = 0; i < n; i++) {
        const double v = nearbyint(ldexp((double)e->wf[off + i], f));
        if (e->bits == 16)
            e->w16[off + i] = (int16_t)v;
        else
            e->w8[off + i] = (int8_t)v;
    }
    const int k = tensor_index(e->t, off);
    if (k >= 0 && (size_t)k < sizeof e->q.w_frac / sizeof e->q.w_frac[0]) e->q.w_frac[k] = f;
}

/* Quantises bias tensor at off (n values) to the accumulator format with f fraction bits. */
static dd_status quant_b(dd_export_c *e, size_t off, size_t n, int f) {
    const double lim = e->bits == 16 ? 0x1p60 : 0x1p29;
    for (size_t i = 0; i < n; i++) {
        const double v = nearbyint(ldexp((double)e->wf[off + i], f));
        if (fabs(v) > lim)
            return dd_error(DD_ERR_RANGE, "export: bias '%s' value %zu (%g) does not fit the int%d accumulator at Q.%d",
                            e->t->entries[tensor_index(e->t, off)].name, i, (double)e->wf[off + i], e->bits == 16 ? 64 : 32, f);
        if (e->bits == 16)
            e->b64[off + i] = (int64_t)v;
        else
            e->b32[off + i] = (int32_t)v;
    }
    const int k = tensor_index(e->t, off);
    if (k >= 0 && (size_t)k < sizeof e->q.w_frac / sizeof e->q.w_frac[0]) e->q.w_frac[k] = f;
    return DD_OK;
}

static void wire_float(dd_export_c *e) {
    for (int k = 0; k < e->L; k++) {
        xf_rnn *g = &e->gf[k];
        g->D = k ? e->H : e->dgru ? 6 : 2;
        g->H = e->H;
        g->w_ih = e->wf + e->off[k][0];
        g->w_hh = e->wf + e->off[k][1];
        g->b_ih = e->wf + e->off[k][2];
        g->b_hh = e->wf + e->off[k][3];
        g->lstm = e->lstm;
    }
    e->mf = (xf_model){e->L, e->H, e->gf, e->wf + e->out_w, e->wf + e->out_b, e->dgru, e->dgru ? e->wf + e->hid_w : NULL,
                       e->dgru ? e->wf + e->hid_b : NULL};
}

/* Pointers and shifts of the fixed-point runtime structs (after quantisation). */
static void wire_fixed(dd_export_c *e) {
    for (int k = 0; k < e->L; k++) {
        if (e->bits == 16)
            e->g16[k] = (x16_rnn){k ? e->H : e->dgru ? 6 : 2, e->H, e->w16 + e->off[k][0], e->w16 + e->off[k][1], e->b64 + e->off[k][2],
                                  e->b64 + e->off[k][3], e->sh_i[k], e->sh_h[k], e->lstm};
        else
            e->g8[k] = (x8_rnn){k ? e->H : e->dgru ? 6 : 2, e->H, e->w8 + e->off[k][0], e->w8 + e->off[k][1], e->b32 + e->off[k][2],
                                e->b32 + e->off[k][3], e->sh_i[k], e->sh_h[k], e->lstm};
    }
    const size_t hw = e->dgru ? e->hid_w : 0, hb = e->dgru ? e->hid_b : 0;
    if (e->bits == 16)
        e->m16 = (x16_model){e->L, e->H, e->g16, e->w16 + e->out_w, e->b64 + e->out_b, e->q.x_frac, e->q.y_frac,
                             e->sh_out, e->sig, e->tnh, e->dgru, e->w16 + hw, e->b64 + hb, {0}, {0},
                             e->q.hid_frac, e->sh_hid, e->sh_cat};
    else
        e->m8 = (x8_model){e->L, e->H, e->g8, e->w8 + e->out_w, e->b32 + e->out_b, e->q.x_frac, e->q.y_frac,
                           e->sh_out, e->sig, e->tnh, e->dgru, e->w8 + hw, e->b32 + hb, {0}, {0},
                           e->q.hid_frac, e->sh_hid, e->sh_cat};
    for (int d = 0; d < 6; d++) {
        e->m16.feat_frac[d] = e->m8.feat_frac[d] = e->q.feat_frac[d];
        e->m16.feat_up[d] = e->m8.feat_up[d] = e->q.feat_up[d];
    }
}

static dd_status quantise(dd_export_c *e, const dd_cf32 *calib, size_t n) {
    const int B = e->bits, S = B - 1, H = e->H;
    const size_t tot = e->t->total;
    if (B == 16) {
        e->w16 = calloc(tot, sizeof *e->w16);
        e->b64 = calloc(tot, sizeof *e->b64);
        if (!e->w16 || !e->b64) return DD_ERR_NOMEM;
    } else {
        e->w8 = calloc(tot, sizeof *e->w8);
        e->b32 = calloc(tot, sizeof *e->b32);
        if (!e->w8 || !e->b32) return DD_ERR_NOMEM;
    }
    for (int i = 0; i < XRT_LUT_N; i++) {
        e->sig[i] = (int32_t)lrint(32768.0 / (1.0 + exp(-i / 32.0)));
        const long tv = lrint(32768.0 * tanh(i / 64.0));
        e->tnh[i] = (int32_t)(tv > 32767 ? 32767 : tv);
    }
    /* calibration: the input's and the float model's output's largest |I|, |Q| */
    double xm = 0, ym = 0, fm[6] = {0, 0, 0, 0, 1, 1}, hm = 0; /* fm: each feature's max (|Q/r|, |I/r| <= 1), hm: ReLU(fc_hid) */
    const size_t LH = (size_t)e->L * (size_t)H;
    float *h = calloc(2 * LH + 8 * (size_t)H, sizeof(float)); /* h, c, scratch */
    if (!h) return DD_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const float x[2] = {crealf(calib[i]), cimagf(calib[i])};
        float y[2];
        xf_model_step(&e->mf, h, h + LH, x, y, h + 2 * LH);
        xm = fmax(xm, fmax(fabs((double)x[0]), fabs((double)x[1])));
        if (e->dgru) {
            fm[0] = fm[1] = fmax(fm[0], fmax(fabs((double)x[0]), fabs((double)x[1])));
            for (int j = 0; j < H; j++) hm = fmax(hm, (double)h[2 * LH + (size_t)j]);
        }
        ym = fmax(ym, fmax(fabs((double)y[0]), fabs((double)y[1])));
    }
    free(h);
    e->q.x_max = xm;
    e->q.y_max = ym;
    e->q.x_frac = frac_for(xm, B);
    e->q.y_frac = frac_for(ym, B);
    e->q.nw = e->t->count;
    int ffin = 0; /* dgru: the finest feature format, where the feature products are summed */
    if (e->dgru) {
        /* |x| and |x|^3 from the whole range the input format holds (|I|, |Q| < xr): they
         * never saturate, also when the test data exceeds the training data's range */
        const double xr = ldexp(1.0, B - 1 - e->q.x_frac), rr = sqrt(2.0) * xr;
        fm[2] = rr;
        fm[3] = rr * rr * rr;
        for (int d = 0; d < 6; d++) {
            e->q.feat_frac[d] = frac_for(fm[d], B);
            ffin = d && ffin > e->q.feat_frac[d] ? ffin : e->q.feat_frac[d];
        }
        for (int d = 0; d < 6; d++) e->q.feat_up[d] = ffin - e->q.feat_frac[d];
        e->q.hid_frac = frac_for(hm, B);
    }
    for (int k = 0; k < e->L; k++) {
        const int fin = k ? S : e->dgru ? ffin : e->q.x_frac, D = k ? H : e->dgru ? 6 : 2;
        const size_t rows = (size_t)(e->lstm ? 4 : 3) * (size_t)H;
        const int fi = frac_for(max_abs(e->wf + e->off[k][0], rows * (size_t)D), B);
        const int fh = frac_for(max_abs(e->wf + e->off[k][1], rows * (size_t)H), B);
        quant_w(e, e->off[k][0], rows * (size_t)D, fi);
        quant_w(e, e->off[k][1], rows * (size_t)H, fh);
        DD_TRY(quant_b(e, e->off[k][2], rows, fi + fin));
        DD_TRY(quant_b(e, e->off[k][3], rows, fh + S));
        e->sh_i[k] = fi + fin - XRT_PFRAC;
        e->sh_h[k] = fh + S - XRT_PFRAC;
    }
    const size_t nin = (size_t)H + (e->dgru ? 6 : 0); /* fc_out's inputs */
    const int fo = frac_for(max_abs(e->wf + e->out_w, 2 * nin), B), fa = e->dgru ? e->q.hid_frac : S;
    quant_w(e, e->out_w, 2 * nin, fo);
    DD_TRY(quant_b(e, e->out_b, 2, fo + fa));
    e->sh_out = fo + fa - e->q.y_frac;
    if (e->dgru) {
        const int fh = frac_for(max_abs(e->wf + e->hid_w, (size_t)H * (size_t)H), B);
        quant_w(e, e->hid_w, (size_t)H * (size_t)H, fh);
        DD_TRY(quant_b(e, e->hid_b, (size_t)H, fh + S));
        e->sh_hid = fh + S - e->q.hid_frac;
        e->sh_cat = ffin - e->q.hid_frac;
    }
    wire_fixed(e);
    return DD_OK;
}

static size_t entry_off(const dd_param_table *t, const char *name, dd_status *st) {
    const dd_param_entry *en = dd_param_table_find(t, name);
    if (!en) {
        *st = dd_error(DD_ERR_INTERNAL, "export: the model has no parameter '%s'", name);
        return 0;
    }
    return en->offset;
}

dd_status dd_export_c_create(const dd_model *m, const float *params, const dd_export_c_opts *opts, dd_export_c **out) {
    if (!m || !params || !opts || !out) return dd_error(DD_ERR_ARG, "dd_export_c_create: NULL argument");
    *out = NULL;
    if (!dd_export_c_supported(m))
        return dd_error(DD_ERR_UNSUPPORTED, "export --format c: model '%s' is not supported (supported: %s)",
                        dd_model_name(m), DD_EXPORT_C_MODELS);
    if (opts->bits != 0 && opts->bits != 8 && opts->bits != 16)
        return dd_error(DD_ERR_ARG, "export --format c: %d bits (expected float32, int16 or int8)", opts->bits);
    if (opts->bits && (!opts->calib || opts->ncalib == 0))
        return dd_error(DD_ERR_ARG, "export --fixed: the calibration signal (training inputs) is empty");
    const dd_model_cfg *c = dd_model_config(m);
    const int dgru = strcmp(dd_model_name(m), "dgru") == 0;
    const int H = dd_model_cfg_get(c, "hidden"), L = dgru ? 1 : dd_model_cfg_get(c, "layers");
    if (H < 1 || L < 1 || L > MAXL)
        return dd_error(DD_ERR_ARG, "export: %s with hidden %d, layers %d", dd_model_name(m), H, L);
    dd_export_c *e = calloc(1, sizeof *e);
    if (!e) return DD_ERR_NOMEM;
    e->bits = opts->bits;
    e->L = L;
    e->H = H;
    e->lstm = strcmp(dd_model_name(m), "lstm") == 0;
    e->dgru = dgru;
    e->t = dd_model_params(m);
    snprintf(e->prefix, sizeof e->prefix, "%s", opts->prefix && *opts->prefix ? opts->prefix : "dd_model");
    snprintf(e->about, sizeof e->about, "%s", opts->about ? opts->about : "");
    dd_model_describe(m, e->desc, sizeof e->desc);
    dd_status st = DD_OK;
    e->wf = malloc(e->t->total * sizeof(float));
    if (!e->wf) {
        st = DD_ERR_NOMEM;
        goto fail;
    }
    memcpy(e->wf, params, e->t->total * sizeof(float));
    for (int k = 0; k < L && st == DD_OK; k++) {
        static const char *const fmt[4] = {"rnn.weight_ih_l%d", "rnn.weight_hh_l%d", "rnn.bias_ih_l%d", "rnn.bias_hh_l%d"};
        for (int j = 0; j < 4; j++) {
            char name[64];
            snprintf(name, sizeof name, fmt[j], k);
            e->off[k][j] = entry_off(e->t, name, &st);
        }
    }
    e->out_w = entry_off(e->t, "fc_out.weight", &st);
    e->out_b = entry_off(e->t, "fc_out.bias", &st);
    if (dgru) {
        e->hid_w = entry_off(e->t, "fc_hid.weight", &st);
        e->hid_b = entry_off(e->t, "fc_hid.bias", &st);
    }
    if (st != DD_OK) goto fail;
    wire_float(e);
    if (e->bits && (st = quantise(e, opts->calib, opts->ncalib)) != DD_OK) goto fail;
    *out = e;
    return DD_OK;
fail:
    dd_export_c_destroy(&e);
    return st;
}

dd_status dd_export_c_run(const dd_export_c *e, const dd_cf32 *x, dd_cf32 *y, size_t n) {
    if (!e || (n && (!x || !y))) return dd_error(DD_ERR_ARG, "dd_export_c_run: NULL argument");
    const size_t nh = (size_t)e->L * (size_t)e->H, ns = 8 * (size_t)e->H;
    void *h = calloc(nh, e->bits == 0 ? sizeof(float) : e->bits == 16 ? sizeof(int16_t) : sizeof(int8_t));
    void *s = calloc(ns, e->bits == 0 ? sizeof(float) : sizeof(int32_t));
    void *c = calloc(nh, sizeof(float) > sizeof(int32_t) ? sizeof(float) : sizeof(int32_t)); /* LSTM cells */
    if (!h || !s || !c) {
        free(h);
        free(s);
        free(c);
        return DD_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const float xi[2] = {crealf(x[i]), cimagf(x[i])};
        float yo[2];
        if (e->bits == 0)
            xf_model_step(&e->mf, h, c, xi, yo, s);
        else if (e->bits == 16)
            x16_model_step(&e->m16, h, c, xi, yo, s);
        else
            x8_model_step(&e->m8, h, c, xi, yo, s);
        y[i] = yo[0] + I * yo[1];
    }
    free(h);
    free(s);
    free(c);
    return DD_OK;
}

/* ---------------------------------------------------------------- writing */

/* name -> a C identifier suffix ("rnn.weight_ih_l0" -> "rnn_weight_ih_l0"). */
static void ident(char *dst, size_t cap, const char *name) {
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++) dst[i] = (name[i] == '.' || name[i] == '-') ? '_' : name[i];
    dst[i] = '\0';
}

static int is_bias(const dd_export_c *e, size_t off) {
    if (off == e->out_b || (e->dgru && off == e->hid_b)) return 1;
    for (int k = 0; k < e->L; k++)
        if (off == e->off[k][2] || off == e->off[k][3]) return 1;
    return 0;
}

static void emit_array(FILE *f, const dd_export_c *e, const dd_param_entry *en) {
    char id[96];
    ident(id, sizeof id, en->name);
    const int b = is_bias(e, en->offset);
    const char *type = e->bits == 0 ? "float" : e->bits == 16 ? (b ? "int64_t" : "int16_t") : (b ? "int32_t" : "int8_t");
    const int k = tensor_index(e->t, en->offset);
    fprintf(f, "/* %s (", en->name);
    for (int d = 0; d < en->ndim; d++) fprintf(f, "%s%zu", d ? ", " : "", en->shape[d]);
    if (e->bits)
        fprintf(f, "), Q.%d%s */\n", e->q.w_frac[k], b ? " (accumulator format)" : "");
    else
        fprintf(f, ") */\n");
    fprintf(f, "static const %s %s_%s[%zu] = {", type, e->prefix, id, en->size);
    for (size_t i = 0; i < en->size; i++) {
        const size_t o = en->offset + i;
        fprintf(f, "%s", i % 8 ? " " : "\n    ");
        if (e->bits == 0)
            fprintf(f, "%.8ef,", (double)e->wf[o]);
        else if (e->bits == 16)
            b ? fprintf(f, "%lld,", (long long)e->b64[o]) : fprintf(f, "%d,", e->w16[o]);
        else
            b ? fprintf(f, "%ld,", (long)e->b32[o]) : fprintf(f, "%d,", e->w8[o]);
    }
    fprintf(f, "\n};\n");
}

static void emit_lut(FILE *f, const char *prefix, const char *name, const int32_t *t) {
    fprintf(f, "static const int32_t %s_%s[%d] = {", prefix, name, XRT_LUT_N);
    for (int i = 0; i < XRT_LUT_N; i++) fprintf(f, "%s%ld,", i % 12 ? " " : "\n    ", (long)t[i]);
    fprintf(f, "\n};\n");
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static const char *numeric(const dd_export_c *e) { return e->bits == 0 ? "float32" : e->bits == 16 ? "int16" : "int8"; }

static void emit_header(FILE *f, const dd_export_c *e) {
    const char *P = e->prefix, *A = e->bits == 16 ? "int16_t" : "int8_t";
    fprintf(f, "/* %s: %s, %s, generated by distdpd " DD_VERSION_STRING " (distdpd export --format c).\n", P, e->desc,
            numeric(e));
    if (*e->about) fprintf(f, " * %s\n", e->about);
    fprintf(f, " * Streaming: %s_init (or %s_reset) zeroes the state at the start of a stream, then\n"
               " * %s_step maps one input sample (I, Q) to one output sample, carrying the recurrent state\n"
               " * in %s_state between calls; %s_run does n samples (interleaved I, Q floats).\n"
               " * Self-contained C99 (libm only); see docs/deploy.md of distdpd. */\n",
            P, P, P, P, P);
    if (e->bits) {
        fprintf(f, "/* Fixed point %s: value = integer * 2^-frac (Q.frac). Input samples Q.%d (|I|, |Q| up to %.4g on\n"
                   " * the training data), output samples Q.%d (%.4g), hidden state Q.%d%s, gates Q.15,\n"
                   " * pre-activations Q.12 in int32, products accumulated in %s; each tensor's format is\n"
                   " * noted at its array in the source. %s_step quantises the float input and dequantises\n"
                   " * the output; %s_step_q takes and gives the integers. */\n",
                numeric(e), e->q.x_frac, e->q.x_max, e->q.y_frac, e->q.y_max, e->bits - 1,
                e->lstm ? " (cell state Q.15 in int32)" : "", e->bits == 16 ? "int64" : "int32", P, P);
        if (e->dgru) {
            const int *ff = e->q.feat_frac;
            fprintf(f, "/* DGRU features I, Q, |x|, |x|^3, Q/|x|, I/|x| in Q.%d, Q.%d, Q.%d, Q.%d, Q.%d, Q.%d; ReLU(fc_hid) in Q.%d. */\n",
                    ff[0], ff[1], ff[2], ff[3], ff[4], ff[5], e->q.hid_frac);
        }
    }
    fprintf(f, "#ifndef %s_H\n#define %s_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n", P, P);
    fprintf(f, "#define %s_HIDDEN %d\n#define %s_LAYERS %d\n", P, e->H, P, e->L);
    if (e->bits) fprintf(f, "#define %s_X_FRAC %d\n#define %s_Y_FRAC %d\n", P, e->q.x_frac, P, e->q.y_frac);
    fprintf(f, "\ntypedef struct {\n    %s h[%s_LAYERS * %s_HIDDEN]; /* hidden state of every layer */\n", e->bits ? A : "float",
            P, P);
    if (e->lstm)
        fprintf(f, "    %s c[%s_LAYERS * %s_HIDDEN]; /* cell state of every layer%s */\n", e->bits ? "int32_t" : "float", P, P,
                e->bits ? " (Q.15)" : "");
    fprintf(f, "} %s_state;\n\n", P);
    fprintf(f, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
    fprintf(f, "void %s_init(%s_state *s);  /* zero state: call before the first sample */\n", P, P);
    fprintf(f, "void %s_reset(%s_state *s); /* zero state: start of a new stream */\n", P, P);
    fprintf(f, "void %s_step(%s_state *s, const float x[2], float y[2]); /* one sample (I, Q) */\n", P, P);
    fprintf(f, "void %s_run(%s_state *s, const float *x, float *y, size_t n); /* n samples, I, Q interleaved */\n", P, P);
    if (e->bits)
        fprintf(f, "void %s_step_q(%s_state *s, const %s x[2], %s y[2]); /* Q.%s_X_FRAC -> Q.%s_Y_FRAC */\n", P, P,
                A, A, P, P);
    fprintf(f, "\n#ifdef __cplusplus\n}\n#endif\n#endif\n");
}

static void emit_source(FILE *f, const dd_export_c *e, const char *h_base) {
    const char *P = e->prefix;
    fprintf(f, "/* %s: %s, %s, generated by distdpd " DD_VERSION_STRING ". API in %s. */\n", P, e->desc, numeric(e),
            h_base);
    fprintf(f, "#include \"%s\"\n\n#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n", h_base);
    fprintf(f, "#define XRT_BITS %d\n#define XRT(n) %s_xrt_##n\n", e->bits, P);
    for (size_t i = 0; dd_xrt_text[i]; i++) fputs(dd_xrt_text[i], f);
    fprintf(f, "\n/* ---- the trained model ---- */\n\n");
    for (size_t i = 0; i < e->t->count; i++) emit_array(f, e, &e->t->entries[i]);
    if (e->bits) {
        emit_lut(f, P, "sigmoid_lut", e->sig);
        emit_lut(f, P, "tanh_lut", e->tnh);
    }
    fprintf(f, "\nstatic const XRT(rnn) %s_layers[%d] = {\n", P, e->L);
    for (int k = 0; k < e->L; k++) {
        fprintf(f, "    {%d, %d, %s_rnn_weight_ih_l%d, %s_rnn_weight_hh_l%d, %s_rnn_bias_ih_l%d, %s_rnn_bias_hh_l%d", k ? e->H : e->dgru ? 6 : 2,
                e->H, P, k, P, k, P, k, P, k);
        if (e->bits) fprintf(f, ", %d, %d", e->sh_i[k], e->sh_h[k]);
        fprintf(f, ", %d},\n", e->lstm);
    }
    fprintf(f, "};\n\nstatic const XRT(model) %s_model = {%d, %d, %s_layers, %s_fc_out_weight, %s_fc_out_bias", P, e->L, e->H,
            P, P, P);
    if (e->bits)
        fprintf(f, ", %d, %d, %d, %s_sigmoid_lut, %s_tanh_lut", e->q.x_frac, e->q.y_frac, e->sh_out, P, P);
    if (e->dgru)
        fprintf(f, ", 1, %s_fc_hid_weight, %s_fc_hid_bias", P, P);
    else
        fprintf(f, ", 0, 0, 0");
    if (e->bits) {
        const int *ff = e->q.feat_frac, *fu = e->q.feat_up;
        fprintf(f, ",\n    {%d, %d, %d, %d, %d, %d}, {%d, %d, %d, %d, %d, %d}, %d, %d, %d", ff[0], ff[1], ff[2], ff[3], ff[4],
                ff[5], fu[0], fu[1], fu[2], fu[3], fu[4], fu[5], e->q.hid_frac, e->sh_hid, e->sh_cat);
    }
    fprintf(f, "};\n\n");
    const char *S = e->bits ? "int32_t" : "float";
    fprintf(f, "void %s_init(%s_state *s) { memset(s, 0, sizeof *s); }\n\n", P, P);
    fprintf(f, "void %s_reset(%s_state *s) { memset(s, 0, sizeof *s); }\n\n", P, P);
    const char *C = e->lstm ? "s->c" : "0";
    fprintf(f, "void %s_step(%s_state *s, const float x[2], float y[2]) {\n    %s scratch[8 * %s_HIDDEN];\n"
               "    XRT(model_step)(&%s_model, s->h, %s, x, y, scratch);\n}\n\n",
            P, P, S, P, P, C);
    fprintf(f, "void %s_run(%s_state *s, const float *x, float *y, size_t n) {\n"
               "    for (size_t i = 0; i < n; i++) %s_step(s, x + 2 * i, y + 2 * i);\n}\n",
            P, P, P);
    if (e->bits) {
        const char *A = e->bits == 16 ? "int16_t" : "int8_t";
        fprintf(f, "\nvoid %s_step_q(%s_state *s, const %s x[2], %s y[2]) {\n    int32_t scratch[8 * %s_HIDDEN];\n"
                   "    XRT(model_step_q)(&%s_model, s->h, %s, x, y, scratch);\n}\n",
                P, P, A, A, P, P, C);
    }
}

dd_status dd_export_c_write(const dd_export_c *e, const char *c_path, const char *h_path) {
    if (!e || !c_path || !h_path) return dd_error(DD_ERR_ARG, "dd_export_c_write: NULL argument");
    const char *paths[2] = {h_path, c_path};
    for (int w = 0; w < 2; w++) { /* rendered in memory, then written atomically */
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) return dd_error(DD_ERR_NOMEM, "%s: out of memory", paths[w]);
        if (w == 0)
            emit_header(f, e);
        else
            emit_source(f, e, base_name(h_path));
        const int ok = !ferror(f) && fclose(f) == 0;
        dd_status st = ok ? dd_train_write_text(paths[w], text, len) : dd_error(DD_ERR_NOMEM, "%s: out of memory", paths[w]);
        free(text);
        DD_TRY(st);
    }
    return DD_OK;
}
