/* The gradient-compression framework (compress.h): configuration and its parser, the
 * error feedback (the per-rank residual), per-bucket codec state, the density warm-up,
 * accounting, the checkpointable state, and the services codecs use (compress_impl.h).
 * The codecs live in quant.c, sparse.c and powersgd.c, listed by registry.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_impl.h"

#define CX_SLOTS 8

struct dd_compressor {
    dd_compress_cfg cfg;
    const dd_codec *codec;
    int ef;              /* error feedback resolved */
    size_t n;            /* arena length (0: not bound) */
    float *resid;        /* n floats when ef */
    dd_cbucket *b;       /* buckets, sorted by lo */
    size_t nb, capb;
    uint64_t step;       /* the step given to begin_step */
    double epoch_pos;    /* epoch + fraction of the current step */
    float *work;         /* 3 * max bucket floats: in, mine, out */
    size_t work_cap;     /* floats per part */
    void *slot[CX_SLOTS];
    size_t slot_cap[CX_SLOTS];
    dd_compress_stats st;
    int warned_sparse;   /* the too-few-values warning was given */
};

/* ---------------------------------------------------------------- names */

/* the codecs come from the registry (registry.c) */
static const dd_codec *find_codec(const char *name) { return dd_codec_find(name); }

const char *dd_compress_describe(const char *name) {
    const dd_codec *c = find_codec(name);
    return c ? c->summary : NULL;
}

static void list_names(char *buf, size_t cap) {
    const char *const *nm = dd_compress_names();
    buf[0] = '\0';
    for (size_t i = 0; nm[i]; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%s", i ? ", " : "", nm[i]);
    }
}

/* ---------------------------------------------------------------- configuration */

void dd_compress_cfg_default(dd_compress_cfg *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "none");
    c->error_feedback = -1;
    c->density = 0.01;
    c->chunk = 256;
    c->stochastic = 0;
    c->sampled = 0;
    c->sample = 0.01;
    c->rank = 2;
    c->momentum = 0.9;
    c->clip = 0.0;
    c->masking = 1;
    c->warmup = 4.0;
    c->seed = 0;
}

dd_status dd_compress_cfg_check(const dd_compress_cfg *c) {
    if (!c) return dd_error(DD_ERR_ARG, "compression configuration: NULL");
    if (!find_codec(c->name)) {
        char buf[256];
        list_names(buf, sizeof buf);
        return dd_error(DD_ERR_ARG, "compression: unknown compressor '%.*s' (choices: %s)", DD_COMPRESS_NAME_MAX,
                        c->name, buf);
    }
    if (c->error_feedback < -1 || c->error_feedback > 1)
        return dd_error(DD_ERR_ARG, "compression: error_feedback = %d (expected -1, 0 or 1)", c->error_feedback);
    if (!(c->density > 0.0 && c->density <= 1.0))
        return dd_error(DD_ERR_ARG, "compression: density = %g is out of range (0, 1]", c->density);
    if (c->chunk < 1 || c->chunk > ((size_t)1 << 24))
        return dd_error(DD_ERR_ARG, "compression: chunk = %zu is out of range [1, 16777216]", c->chunk);
    if (c->stochastic != 0 && c->stochastic != 1)
        return dd_error(DD_ERR_ARG, "compression: stochastic = %d (expected 0 or 1)", c->stochastic);
    if (c->sampled != 0 && c->sampled != 1)
        return dd_error(DD_ERR_ARG, "compression: sampled = %d (expected 0 or 1)", c->sampled);
    if (!(c->sample > 0.0 && c->sample <= 1.0))
        return dd_error(DD_ERR_ARG, "compression: sample = %g is out of range (0, 1]", c->sample);
    if (c->rank < 1 || c->rank > 256)
        return dd_error(DD_ERR_ARG, "compression: rank = %d is out of range [1, 256]", c->rank);
    if (!(c->momentum >= 0.0 && c->momentum < 1.0))
        return dd_error(DD_ERR_ARG, "compression: momentum = %g is out of range [0, 1)", c->momentum);
    if (!(c->clip >= 0.0 && isfinite(c->clip)))
        return dd_error(DD_ERR_ARG, "compression: clip = %g must be finite and >= 0", c->clip);
    if (c->masking != 0 && c->masking != 1)
        return dd_error(DD_ERR_ARG, "compression: masking = %d (expected 0 or 1)", c->masking);
    if (!(c->warmup >= 0.0 && c->warmup <= 1e6))
        return dd_error(DD_ERR_ARG, "compression: warmup = %g epochs is out of range [0, 1e6]", c->warmup);
    return DD_OK;
}

static dd_status parse_num(const char *spec, const char *key, const char *val, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(val, &end);
    if (!dd_is_decimal(val) || *end || errno || !isfinite(v))
        return dd_error(DD_ERR_ARG, "--compress '%s': %s = '%s' is not a number", spec, key, val);
    if (v < lo || v > hi)
        return dd_error(DD_ERR_ARG, "--compress '%s': %s = %s is out of range [%g, %g]", spec, key, val, lo, hi);
    *out = v;
    return DD_OK;
}

static dd_status parse_int(const char *spec, const char *key, const char *val, double lo, double hi, double *out) {
    DD_TRY(parse_num(spec, key, val, lo, hi, out));
    if (*out != floor(*out)) return dd_error(DD_ERR_ARG, "--compress '%s': %s = %s is not an integer", spec, key, val);
    return DD_OK;
}

static dd_status parse_bool(const char *spec, const char *key, const char *val, int *out) {
    if (!strcmp(val, "1") || !strcmp(val, "on") || !strcmp(val, "true")) *out = 1;
    else if (!strcmp(val, "0") || !strcmp(val, "off") || !strcmp(val, "false")) *out = 0;
    else return dd_error(DD_ERR_ARG, "--compress '%s': %s = '%s' (expected 0/1, on/off)", spec, key, val);
    return DD_OK;
}

dd_status dd_compress_parse(dd_compress_cfg *c, const char *spec) {
    if (!c || !spec) return dd_error(DD_ERR_ARG, "dd_compress_parse: NULL argument");
    char buf[512];
    if (strlen(spec) >= sizeof buf) return dd_error(DD_ERR_ARG, "--compress: the value is too long");
    snprintf(buf, sizeof buf, "%s", spec);
    /* split at every ',' (strtok would skip empty fields: 'topk,' must not pass as 'topk') */
    char *tok = buf, *next = strchr(buf, ',');
    if (next) *next++ = '\0';
    if (!*tok) return dd_error(DD_ERR_ARG, "--compress '%s': no compressor name", spec);
    if (!find_codec(tok)) {
        char names[256];
        list_names(names, sizeof names);
        return dd_error(DD_ERR_ARG, "--compress '%s': unknown compressor '%s' (choices: %s)", spec, tok, names);
    }
    dd_compress_cfg t = *c;
    snprintf(t.name, sizeof t.name, "%.*s", (int)sizeof t.name - 1, tok); /* a registered name: it fits */
    int density_set = 0;
    while ((tok = next) != NULL) {
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        if (!*tok) return dd_error(DD_ERR_ARG, "--compress '%s': empty setting after ',' (expected key=value)", spec);
        char *eq = strchr(tok, '=');
        if (!eq) return dd_error(DD_ERR_ARG, "--compress '%s': '%s' is not key=value", spec, tok);
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        double d = 0;
        if (!strcmp(k, "ef")) {
            DD_TRY(parse_bool(spec, k, v, &t.error_feedback));
        } else if (!strcmp(k, "density")) {
            DD_TRY(parse_num(spec, k, v, 0.0, 1.0, &d));
            if (d <= 0) return dd_error(DD_ERR_ARG, "--compress '%s': density must be > 0", spec);
            t.density = d;
            density_set = 1;
        } else if (!strcmp(k, "chunk")) {
            DD_TRY(parse_int(spec, k, v, 1, (double)(1 << 24), &d));
            t.chunk = (size_t)d;
        } else if (!strcmp(k, "stochastic")) {
            DD_TRY(parse_bool(spec, k, v, &t.stochastic));
        } else if (!strcmp(k, "sampled")) {
            DD_TRY(parse_bool(spec, k, v, &t.sampled));
        } else if (!strcmp(k, "sample")) {
            DD_TRY(parse_num(spec, k, v, 1e-9, 1.0, &d));
            t.sample = d;
        } else if (!strcmp(k, "rank")) {
            DD_TRY(parse_int(spec, k, v, 1, 256, &d));
            t.rank = (int)d;
        } else if (!strcmp(k, "momentum")) {
            DD_TRY(parse_num(spec, k, v, 0.0, 0.999999, &d));
            t.momentum = d;
        } else if (!strcmp(k, "clip")) {
            DD_TRY(parse_num(spec, k, v, 0.0, 1e30, &d));
            t.clip = d;
        } else if (!strcmp(k, "masking")) {
            DD_TRY(parse_bool(spec, k, v, &t.masking));
        } else if (!strcmp(k, "warmup")) {
            DD_TRY(parse_num(spec, k, v, 0.0, 1e6, &d));
            t.warmup = d;
        } else if (!strcmp(k, "seed")) {
            DD_TRY(parse_int(spec, k, v, 0, 9007199254740992.0, &d));
            t.seed = (uint64_t)d;
        } else {
            return dd_error(DD_ERR_ARG,
                            "--compress '%s': unknown key '%s' (keys: ef, density, chunk, stochastic, sampled, sample, "
                            "rank, momentum, clip, masking, warmup, seed)",
                            spec, k);
        }
    }
    const dd_codec *codec = find_codec(t.name);
    if (!density_set && codec->default_density > 0) t.density = codec->default_density;
    DD_TRY(dd_compress_cfg_check(&t));
    *c = t;
    return DD_OK;
}

/* ---------------------------------------------------------------- lifetime */

dd_status dd_compress_create(const dd_compress_cfg *cfg, dd_compressor **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_compress_create: NULL output");
    *out = NULL;
    if (!cfg) return dd_error(DD_ERR_ARG, "dd_compress_create: NULL configuration");
    DD_TRY(dd_compress_cfg_check(cfg));
    dd_compressor *c = dd_calloc(1, sizeof *c);
    if (!c) return dd_error(DD_ERR_NOMEM, "out of memory for the compressor");
    c->cfg = *cfg;
    c->codec = find_codec(cfg->name);
    c->ef = c->codec->lossy && cfg->error_feedback != 0;
    *out = c;
    return DD_OK;
}

void dd_compress_destroy(dd_compressor **cp) {
    if (!cp || !*cp) return;
    dd_compressor *c = *cp;
    for (size_t i = 0; i < c->nb; i++) {
        dd_free(c->b[i].priv);
        dd_free(c->b[i].shared);
    }
    free(c->b);
    dd_free(c->resid);
    dd_free(c->work);
    for (int i = 0; i < CX_SLOTS; i++) dd_free(c->slot[i]);
    dd_free(c);
    *cp = NULL;
}

const dd_compress_cfg *dd_compress_config(const dd_compressor *c) { return c ? &c->cfg : NULL; }
int dd_compress_lossy(const dd_compressor *c) { return c && c->codec->lossy; }
int dd_compress_has_ef(const dd_compressor *c) { return c && c->ef; }

void dd_compress_begin_step(dd_compressor *c, uint64_t step, int epoch, double frac) {
    if (!c) return;
    if (!(frac >= 0.0)) frac = 0.0;
    if (frac > 1.0) frac = 1.0;
    c->epoch_pos = (double)(epoch < 0 ? 0 : epoch) + frac;
    c->step = step;
    c->st.steps++;
}

double dd_compress_density_now(const dd_compressor *c) {
    if (!c) return 1.0;
    if (!c->codec->uses_density) return 1.0;
    const double d = c->cfg.density;
    if (!c->codec->density_warmup || c->cfg.warmup <= 0.0 || c->epoch_pos >= c->cfg.warmup || d >= 0.25) return d;
    /* DGC's warm-up: 25 % falling exponentially to d over `warmup` epochs, evaluated at
     * whole epochs (25 %, 6.25 %, 1.56 %, 0.39 %, then 0.1 % for d = 0.001, warmup = 4) */
    const double t = floor(c->epoch_pos) / c->cfg.warmup;
    return 0.25 * pow(d / 0.25, t);
}

dd_status dd_compress_bind(dd_compressor *c, size_t n) {
    if (!c) return dd_error(DD_ERR_ARG, "dd_compress_bind: NULL compressor");
    if (c->n == n && (c->resid || !c->ef || n == 0)) return DD_OK;
    if (c->n != 0 && c->n != n)
        return dd_error(DD_ERR_ARG, "compression: the state is for an arena of %zu floats, not %zu", c->n, n);
    if (c->ef && n > 0) {
        c->resid = dd_calloc(n, sizeof(float));
        if (!c->resid) return dd_error(DD_ERR_NOMEM, "out of memory for the compression residual (%zu floats)", n);
    }
    c->n = n;
    return DD_OK;
}

const float *dd_compress_residual(const dd_compressor *c, size_t *n) {
    if (n) *n = c && c->resid ? c->n : 0;
    return c ? c->resid : NULL;
}

/* ---------------------------------------------------------------- services */

void *dd_cx_scratch(dd_cx *x, int slot, size_t bytes) {
    dd_compressor *c = x->owner;
    if (slot < 0 || slot >= CX_SLOTS) {
        dd_error(DD_ERR_ARG, "compression: scratch slot %d out of range", slot);
        return NULL;
    }
    if (bytes == 0) bytes = 1;
    if (c->slot_cap[slot] < bytes) {
        dd_free(c->slot[slot]);
        c->slot[slot] = dd_calloc(1, bytes);
        c->slot_cap[slot] = c->slot[slot] ? bytes : 0;
        if (!c->slot[slot]) {
            dd_error(DD_ERR_NOMEM, "compression: out of memory (%zu bytes of scratch)", bytes);
            return NULL;
        }
    }
    return c->slot[slot];
}

void dd_cx_rng(const dd_cx *x, dd_rng *r, uint64_t stream, int shared) {
    uint64_t h = dd_hash64(x->cfg->seed ^ 0x636f6d7072657373ULL, x->step);
    h = dd_hash64(h, (uint64_t)x->b->lo);
    h = dd_hash64(h, stream);
    if (!shared) h = dd_hash64(h, 0x72616e6bULL + (uint64_t)x->rank);
    dd_rng_seed(r, h);
}

double dd_cx_now(void) { return dd_comm_wtime(); }

dd_status dd_cx_allreduce(dd_cx *x, float *buf, size_t n) {
    if (x->size <= 1 || n == 0) return DD_OK;
    dd_comm_stats a, b;
    dd_comm_stats_get(x->comm, &a);
    double t0 = dd_cx_now();
    dd_status s = dd_comm_allreduce(x->comm, x->algo, buf, n, DD_F32);
    x->comm_s += dd_cx_now() - t0;
    dd_comm_stats_get(x->comm, &b);
    x->bytes_sent += b.bytes_sent - a.bytes_sent;
    return s;
}

dd_status dd_cx_send_dense(dd_cx *x, const float *in, size_t n, float *mine, float *out) {
    double t0 = dd_cx_now();
    if (n) {
        memcpy(mine, in, n * sizeof(float));
        memcpy(out, in, n * sizeof(float));
    }
    x->compress_s += dd_cx_now() - t0;
    x->payload_bytes += 4 * (uint64_t)n;
    return dd_cx_allreduce(x, out, n);
}

/* ---------------------------------------------------------------- buckets */

static dd_status get_bucket(dd_compressor *c, size_t lo, size_t n, dd_cbucket **out) {
    size_t i = 0;
    while (i < c->nb && c->b[i].lo < lo) i++;
    if (i < c->nb && c->b[i].lo == lo) {
        if (c->b[i].n != n)
            return dd_error(DD_ERR_ARG, "compression: the bucket at %zu had %zu elements, now %zu: buckets must not change",
                            lo, c->b[i].n, n);
        *out = &c->b[i];
        return DD_OK;
    }
    if (c->nb == c->capb) {
        size_t cap = c->capb ? 2 * c->capb : 8;
        dd_cbucket *nb = realloc(c->b, cap * sizeof *nb);
        if (!nb) return dd_error(DD_ERR_NOMEM, "out of memory for the compression buckets");
        c->b = nb;
        c->capb = cap;
    }
    dd_cbucket nbk;
    memset(&nbk, 0, sizeof nbk);
    nbk.lo = lo;
    nbk.n = n;
    nbk.npriv = c->codec->priv_floats ? c->codec->priv_floats(&c->cfg, n) : 0;
    nbk.nshared = c->codec->shared_floats ? c->codec->shared_floats(&c->cfg, n) : 0;
    if (nbk.npriv && !(nbk.priv = dd_calloc(nbk.npriv, sizeof(float))))
        return dd_error(DD_ERR_NOMEM, "out of memory for the compressor state");
    if (nbk.nshared && !(nbk.shared = dd_calloc(nbk.nshared, sizeof(float)))) {
        dd_free(nbk.priv);
        return dd_error(DD_ERR_NOMEM, "out of memory for the compressor state");
    }
    memmove(&c->b[i + 1], &c->b[i], (c->nb - i) * sizeof *c->b);
    c->b[i] = nbk;
    c->nb++;
    *out = &c->b[i];
    return DD_OK;
}

dd_status dd_compress_exchange(dd_compressor *c, dd_comm *comm, dd_allreduce_algo algo, float *grads, size_t lo,
                               size_t hi) {
    if (!c || !comm) return dd_error(DD_ERR_ARG, "dd_compress_exchange: NULL argument");
    if (hi < lo) return dd_error(DD_ERR_ARG, "dd_compress_exchange: range [%zu, %zu) is reversed", lo, hi);
    if (hi > lo && !grads) return dd_error(DD_ERR_ARG, "dd_compress_exchange: NULL gradients");
    if (c->n == 0 || (c->ef && !c->resid)) DD_TRY(dd_compress_bind(c, c->n > hi ? c->n : hi));
    if (hi > c->n) { /* the arena grows on demand: the new part's residual starts at zero */
        if (c->ef) {
            float *r = dd_calloc(hi, sizeof(float));
            if (!r) return dd_error(DD_ERR_NOMEM, "out of memory for the compression residual (%zu floats)", hi);
            memcpy(r, c->resid, c->n * sizeof(float));
            dd_free(c->resid);
            c->resid = r;
        }
        c->n = hi;
    }
    const size_t n = hi - lo;
    dd_cbucket *b = NULL;
    DD_TRY(get_bucket(c, lo, n, &b));
    if (n > c->work_cap) {
        dd_free(c->work);
        c->work = dd_calloc(3 * n, sizeof(float));
        c->work_cap = c->work ? n : 0;
        if (!c->work) return dd_error(DD_ERR_NOMEM, "out of memory for the compression buffers (%zu floats)", 3 * n);
    }
    float *in = c->work, *mine = c->work + c->work_cap, *out = c->work + 2 * c->work_cap;
    dd_cx x;
    memset(&x, 0, sizeof x);
    x.cfg = &c->cfg;
    x.comm = comm;
    x.algo = algo;
    x.rank = dd_comm_rank(comm);
    x.size = dd_comm_size(comm);
    x.step = c->step;
    x.density = dd_compress_density_now(c);
    x.b = b;
    x.owner = c;
    if (c->codec->uses_density && !c->warned_sparse && n > 0) {
        /* a density that leaves a few values of the bucket a step updates each parameter
         * once in hundreds of steps: say so (once, on rank 0) instead of training slowly */
        const size_t k = dd_cx_sparse_k(c->cfg.density, n);
        if (k < DD_CX_MIN_KEPT && k < n) {
            c->warned_sparse = 1;
            if (x.rank == 0)
                dd_log(DD_LOG_WARN,
                       "%s at density %g sends %zu of the %zu gradient values of bucket [%zu, %zu) per step: each "
                       "parameter is updated about once every %.0f steps, too rarely to train (fewer than %d values a "
                       "step). Raise the density to at least %.2g, or use int8/fp16 or no compression for a model "
                       "this small (docs/compress.md \"Too sparse\")",
                       c->cfg.name, c->cfg.density, k, n, lo, hi, (double)n / (double)k, DD_CX_MIN_KEPT,
                       ceil(1000.0 * DD_CX_MIN_KEPT / (double)n) / 1000.0);
        }
    }

    float *g = grads + lo;
    double t0 = dd_cx_now();
    if (c->codec->prepare) DD_TRY(c->codec->prepare(&x, g, n));
    if (c->ef) {
        const float *e = c->resid + lo;
        for (size_t i = 0; i < n; i++) in[i] = g[i] + e[i];
    } else if (n) {
        memcpy(in, g, n * sizeof(float));
    }
    x.compress_s += dd_cx_now() - t0;
    DD_TRY(c->codec->qring ? dd_cx_qring(&x, c->codec->qring, in, n, mine, out)
                           : c->codec->exchange(&x, in, n, mine, out));
    t0 = dd_cx_now();
    if (c->codec->finish) c->codec->finish(&x, in, mine, n);
    if (c->ef) {
        float *e = c->resid + lo;
        for (size_t i = 0; i < n; i++) e[i] = in[i] - mine[i];
    }
    if (n) memcpy(g, out, n * sizeof(float));
    x.compress_s += dd_cx_now() - t0;
    b->uses++;
    c->st.exchanges++;
    c->st.elements += n;
    c->st.payload_bytes += x.payload_bytes;
    c->st.bytes_sent += x.bytes_sent;
    c->st.compress_s += x.compress_s;
    c->st.decompress_s += x.decompress_s;
    c->st.comm_s += x.comm_s;
    return DD_OK;
}

/* ---------------------------------------------------------------- accounting */

void dd_compress_stats_get(const dd_compressor *c, dd_compress_stats *st) {
    if (!st) return;
    if (!c) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = c->st;
}

void dd_compress_stats_reset(dd_compressor *c) {
    if (c) memset(&c->st, 0, sizeof c->st);
}

double dd_compress_ratio(const dd_compress_stats *st) {
    if (!st || st->payload_bytes == 0) return 1.0;
    return 4.0 * (double)st->elements / (double)st->payload_bytes;
}

/* ---------------------------------------------------------------- state */

dd_status dd_compress_state_export(const dd_compressor *c, float *buf, size_t *n) {
    if (!c || !n) return dd_error(DD_ERR_ARG, "dd_compress_state_export: NULL argument");
    size_t k = c->resid ? c->n : 0;
    if (buf && k) memcpy(buf, c->resid, k * sizeof(float));
    for (size_t i = 0; i < c->nb; i++) {
        if (buf && c->b[i].npriv) memcpy(buf + k, c->b[i].priv, c->b[i].npriv * sizeof(float));
        k += c->b[i].npriv;
    }
    *n = k;
    return DD_OK;
}

dd_status dd_compress_state_import(dd_compressor *c, const float *buf, size_t n) {
    if (!c) return dd_error(DD_ERR_ARG, "dd_compress_state_import: NULL compressor");
    size_t want = 0;
    DD_TRY(dd_compress_state_export(c, NULL, &want));
    if (n != want)
        return dd_error(DD_ERR_MISMATCH, "compression state: %zu floats given, this compressor keeps %zu (another "
                        "compressor, model or bucket size?)", n, want);
    if (n && !buf) return dd_error(DD_ERR_ARG, "dd_compress_state_import: NULL buffer");
    size_t k = c->resid ? c->n : 0;
    if (k) memcpy(c->resid, buf, k * sizeof(float));
    for (size_t i = 0; i < c->nb; i++) {
        if (c->b[i].npriv) memcpy(c->b[i].priv, buf + k, c->b[i].npriv * sizeof(float));
        k += c->b[i].npriv;
    }
    return DD_OK;
}

dd_status dd_compress_shared_export(const dd_compressor *c, float *buf, size_t *n) {
    if (!c || !n) return dd_error(DD_ERR_ARG, "dd_compress_shared_export: NULL argument");
    size_t k = 0;
    for (size_t i = 0; i < c->nb; i++) {
        if (buf && c->b[i].nshared) memcpy(buf + k, c->b[i].shared, c->b[i].nshared * sizeof(float));
        k += c->b[i].nshared;
    }
    *n = k;
    return DD_OK;
}

dd_status dd_compress_shared_import(dd_compressor *c, const float *buf, size_t n) {
    if (!c) return dd_error(DD_ERR_ARG, "dd_compress_shared_import: NULL compressor");
    size_t want = 0;
    DD_TRY(dd_compress_shared_export(c, NULL, &want));
    if (n != want)
        return dd_error(DD_ERR_MISMATCH, "compression shared state: %zu floats given, this compressor keeps %zu", n, want);
    if (n && !buf) return dd_error(DD_ERR_ARG, "dd_compress_shared_import: NULL buffer");
    size_t k = 0;
    for (size_t i = 0; i < c->nb; i++) {
        if (c->b[i].nshared) memcpy(c->b[i].shared, buf + k, c->b[i].nshared * sizeof(float));
        if (c->b[i].nshared) c->b[i].uses = c->b[i].uses ? c->b[i].uses : 1; /* warm start is set */
        k += c->b[i].nshared;
    }
    return DD_OK;
}

dd_status dd_compress_layout_export(const dd_compressor *c, uint64_t *lo_n, size_t *nb) {
    if (!c || !nb) return dd_error(DD_ERR_ARG, "dd_compress_layout_export: NULL argument");
    if (lo_n)
        for (size_t i = 0; i < c->nb; i++) {
            lo_n[2 * i] = c->b[i].lo;
            lo_n[2 * i + 1] = c->b[i].n;
        }
    *nb = c->nb;
    return DD_OK;
}

dd_status dd_compress_layout_import(dd_compressor *c, size_t arena_n, const uint64_t *lo_n, size_t nb) {
    if (!c || (nb && !lo_n)) return dd_error(DD_ERR_ARG, "dd_compress_layout_import: NULL argument");
    if (c->nb != 0) {
        int same = c->nb == nb;
        for (size_t i = 0; same && i < nb; i++) same = c->b[i].lo == lo_n[2 * i] && c->b[i].n == lo_n[2 * i + 1];
        if (same) return DD_OK;
        return dd_error(DD_ERR_ARG, "compression state: the compressor already has another bucket layout");
    }
    uint64_t prev_end = 0;
    for (size_t i = 0; i < nb; i++) {
        uint64_t lo = lo_n[2 * i], n = lo_n[2 * i + 1];
        if (lo < prev_end || n > arena_n || lo > arena_n - n)
            return dd_error(DD_ERR_ARG, "compression state: bucket %zu [%llu, %llu) is not ascending inside the arena of "
                            "%zu floats", i, (unsigned long long)lo, (unsigned long long)lo + n, arena_n);
        prev_end = lo + n;
    }
    DD_TRY(dd_compress_bind(c, arena_n));
    for (size_t i = 0; i < nb; i++) {
        dd_cbucket *b = NULL;
        DD_TRY(get_bucket(c, (size_t)lo_n[2 * i], (size_t)lo_n[2 * i + 1], &b));
    }
    return DD_OK;
}

size_t dd_compress_spec(const dd_compress_cfg *c, char *buf, size_t cap) {
    const dd_codec *codec = c ? find_codec(c->name) : NULL;
    int w;
    if (!c || !strcmp(c->name, "none"))
        w = snprintf(buf, cap, "none");
    else
        w = snprintf(buf, cap,
                     "%s,ef=%d,density=%.17g,chunk=%zu,stochastic=%d,sampled=%d,sample=%.17g,rank=%d,momentum=%.17g,"
                     "clip=%.17g,masking=%d,warmup=%.17g,seed=%llu",
                     c->name, c->error_feedback < 0 ? (codec && !codec->lossy ? 0 : 1) : c->error_feedback, c->density,
                     c->chunk, c->stochastic, c->sampled, c->sample, c->rank, c->momentum, c->clip, c->masking,
                     c->warmup, (unsigned long long)c->seed);
    return w < 0 ? 0 : (size_t)w;
}
