/* Optimisers over flat float32 arenas: SGD (momentum, dampening, Nesterov, L2 weight
 * decay), Adam, AdamW and RMSprop with PyTorch 1.13 semantics, plus state save/load for
 * checkpoints.
 *
 * Bit-level notes (why fmaf appears): torch's CPU kernels for `a.add_(b, alpha=s)` and
 * `a.addcmul_(b, c, value=s)` compute with a fused multiply-add (vec::fmadd), while
 * `mul_` and `addcdiv_` round every operation. Scalars (lr, betas, eps, ...) are cast to
 * float after being computed in double by Python. The loops below reproduce that, so the
 * results match torch's vectorised path to the bit; fmaf is exact IEEE fused multiply-add
 * on every platform (hardware or libm), so the results stay deterministic. */
#include "distdpd/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/simd.h" /* dd_nn_simd_level */

struct dd_optim {
    dd_optim_kind kind; /* which update rule */
    dd_optim_cfg cfg;   /* validated hyper-parameters */
    size_t n;           /* arena length */
    uint64_t step;      /* completed steps */
    float *state;       /* nstate floats (dd_arena_calloc, owned), NULL when nstate == 0 */
    size_t nstate;      /* 0 (plain SGD), n (SGD + momentum, RMSprop) or 2n (Adam/AdamW) */
};

dd_optim_cfg dd_optim_cfg_default(dd_optim_kind kind) {
    dd_optim_cfg c;
    memset(&c, 0, sizeof c);
    c.lr = kind == DD_OPTIM_SGD || kind == DD_OPTIM_RMSPROP ? 0.01 : 1e-3;
    c.alpha = 0.99;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = kind == DD_OPTIM_ADAMW ? 1e-2 : 0.0;
    return c;
}

dd_status dd_optim_kind_parse(const char *name, dd_optim_kind *kind) {
    if (!name || !kind) return dd_error(DD_ERR_ARG, "dd_optim_kind_parse: NULL argument");
    if (strcmp(name, "sgd") == 0) *kind = DD_OPTIM_SGD;
    else if (strcmp(name, "adam") == 0) *kind = DD_OPTIM_ADAM;
    else if (strcmp(name, "adamw") == 0) *kind = DD_OPTIM_ADAMW;
    else if (strcmp(name, "rmsprop") == 0) *kind = DD_OPTIM_RMSPROP;
    else
        return dd_error(DD_ERR_ARG, "unknown optimiser '%s' (expected sgd, adam, adamw or rmsprop)", name);
    return DD_OK;
}

const char *dd_optim_kind_name(dd_optim_kind kind) {
    switch (kind) {
    case DD_OPTIM_SGD: return "sgd";
    case DD_OPTIM_ADAM: return "adam";
    case DD_OPTIM_ADAMW: return "adamw";
    case DD_OPTIM_RMSPROP: return "rmsprop";
    }
    return "?";
}

/* Checks lo <= v < hi (hi_incl: v <= hi) and finiteness; names the field on error. */
static dd_status check_range(const char *opt, const char *field, double v, double lo, double hi,
                             int hi_incl) {
    if (!isfinite(v) || v < lo || (hi_incl ? v > hi : v >= hi))
        return dd_error(DD_ERR_ARG, "%s: %s = %g is out of range [%g, %g%s", opt, field, v, lo, hi,
                        hi_incl ? "]" : ")");
    return DD_OK;
}

static dd_status validate(dd_optim_kind kind, const dd_optim_cfg *c) {
    const char *nm = dd_optim_kind_name(kind);
    DD_TRY(check_range(nm, "lr", c->lr, 0.0, HUGE_VAL, 0));
    DD_TRY(check_range(nm, "weight_decay", c->weight_decay, 0.0, HUGE_VAL, 0));
    if (kind == DD_OPTIM_SGD) {
        DD_TRY(check_range(nm, "momentum", c->momentum, 0.0, 1.0, 0));
        DD_TRY(check_range(nm, "dampening", c->dampening, 0.0, 1.0, 1));
        if (c->nesterov != 0 && c->nesterov != 1)
            return dd_error(DD_ERR_ARG, "sgd: nesterov = %d must be 0 or 1", c->nesterov);
        if (c->nesterov && (c->momentum <= 0.0 || c->dampening != 0.0))
            return dd_error(DD_ERR_ARG,
                            "sgd: nesterov needs momentum > 0 and dampening = 0 (momentum = %g, "
                            "dampening = %g)",
                            c->momentum, c->dampening);
    } else if (kind == DD_OPTIM_RMSPROP) {
        DD_TRY(check_range(nm, "alpha", c->alpha, 0.0, 1.0, 0));
        DD_TRY(check_range(nm, "eps", c->eps, 0.0, HUGE_VAL, 0));
    } else {
        DD_TRY(check_range(nm, "beta1", c->beta1, 0.0, 1.0, 0));
        DD_TRY(check_range(nm, "beta2", c->beta2, 0.0, 1.0, 0));
        DD_TRY(check_range(nm, "eps", c->eps, 0.0, HUGE_VAL, 0));
    }
    return DD_OK;
}

static size_t state_len(dd_optim_kind kind, const dd_optim_cfg *c, size_t n) {
    if (kind == DD_OPTIM_SGD) return c->momentum != 0.0 ? n : 0;
    if (kind == DD_OPTIM_RMSPROP) return n;
    return 2 * n;
}

dd_status dd_optim_create(const char *kind, const dd_optim_cfg *cfg, size_t n, dd_optim **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_optim_create: out is NULL");
    *out = NULL;
    dd_optim_kind k;
    DD_TRY(dd_optim_kind_parse(kind, &k));
    dd_optim_cfg c = cfg ? *cfg : dd_optim_cfg_default(k);
    DD_TRY(validate(k, &c));
    if (n == 0) return dd_error(DD_ERR_ARG, "%s: arena length n = 0 (must be >= 1)", kind);
    if (n > SIZE_MAX / 2 / sizeof(float))
        return dd_error(DD_ERR_ARG, "%s: arena length n = %zu is too large", kind, n);
    dd_optim *o = dd_calloc(1, sizeof *o);
    if (!o) return DD_ERR_NOMEM;
    o->kind = k;
    o->cfg = c;
    o->n = n;
    o->nstate = state_len(k, &c, n);
    if (o->nstate) {
        o->state = dd_arena_calloc(DD_MEM_OPTIM, o->nstate, sizeof(float), "the optimiser state");
        if (!o->state) {
            dd_free(o);
            return DD_ERR_NOMEM;
        }
    }
    *out = o;
    return DD_OK;
}

void dd_optim_destroy(dd_optim **opt) {
    if (!opt || !*opt) return;
    dd_arena_free((*opt)->state);
    dd_free(*opt);
    *opt = NULL;
}

/* torch.optim.SGD._single_tensor_sgd on elements [lo, hi), step number t (1-based). */
static void sgd_range(const dd_optim *o, float *w, const float *g, double lr, size_t lo,
                      size_t hi, uint64_t t) {
    const dd_optim_cfg *c = &o->cfg;
    const float wd = (float)c->weight_decay;
    const float mom = (float)c->momentum;
    const float one_minus_damp = (float)(1.0 - c->dampening);
    const float neg_lr = (float)(-lr);
    const int use_wd = c->weight_decay != 0.0, use_mom = c->momentum != 0.0;
    float *buf = o->state;
    for (size_t i = lo; i < hi; i++) {
        float d = g[i];
        if (use_wd) d = fmaf(w[i], wd, d); /* d_p = d_p.add(param, alpha=wd) */
        if (use_mom) {
            if (t == 1)
                buf[i] = d; /* buf = clone(d_p) */
            else
                buf[i] = fmaf(d, one_minus_damp, buf[i] * mom); /* buf.mul_(m).add_(d_p, 1-damp) */
            if (c->nesterov)
                d = fmaf(buf[i], mom, d); /* d_p = d_p.add(buf, alpha=m) */
            else
                d = buf[i];
        }
        w[i] = fmaf(d, neg_lr, w[i]); /* param.add_(d_p, alpha=-lr) */
    }
}

/* Adam's elementwise update with AVX-512 / AVX2 vectors (the SIMD level of dd_nn_simd_level,
 * DD_SIMD): the operations of adam_range's loop, each IEEE-rounded the same way (fused
 * multiply-adds where it calls fmaf, sqrt, division), so the same floats; compiled
 * without -mfma the scalar loop calls libm's fmaf per element and does not vectorise
 * (12 % of resnet 512 x 8's training time at AVX-512, docs/performance.md). Returns the
 * first index it left to the scalar loop. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define ADAM_VEC(SUF, TGT, VF, W, LOAD, STORE, SET1, MUL, ADD, DIV, SQRT, FMA)                              \
    __attribute__((target(TGT))) static size_t adam_vec_##SUF(float *w, const float *g, float *m, float *v, \
                                                               size_t lo, size_t hi, int use_l2, int adamw,   \
                                                               float wd, float decay, float b1, float omb1,   \
                                                               float b2, float omb2, float nss, float bcs,    \
                                                               float eps) {                                   \
        const VF vwd = SET1(wd), vdecay = SET1(decay), vb1 = SET1(b1), vomb1 = SET1(omb1), vb2 = SET1(b2);    \
        const VF vomb2 = SET1(omb2), vnss = SET1(nss), vbcs = SET1(bcs), veps = SET1(eps);                    \
        size_t i = lo;                                                                                        \
        for (; i + (W) <= hi; i += (W)) {                                                                       \
            VF gi = LOAD(g + i), wi = LOAD(w + i);                                                            \
            if (use_l2) gi = FMA(wi, vwd, gi);                                                                \
            if (adamw) wi = MUL(wi, vdecay);                                                                  \
            const VF mi = FMA(gi, vomb1, MUL(LOAD(m + i), vb1));                                              \
            const VF vi = FMA(MUL(vomb2, gi), gi, MUL(LOAD(v + i), vb2));                                     \
            STORE(m + i, mi);                                                                                 \
            STORE(v + i, vi);                                                                                 \
            const VF denom = ADD(DIV(SQRT(vi), vbcs), veps);                                                  \
            STORE(w + i, ADD(wi, DIV(MUL(vnss, mi), denom)));                                                 \
        }                                                                                                     \
        return i;                                                                                             \
    }
ADAM_VEC(avx512, "avx512f", __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_mul_ps,
         _mm512_add_ps, _mm512_div_ps, _mm512_sqrt_ps, _mm512_fmadd_ps)
ADAM_VEC(avx2, "avx2,fma", __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_mul_ps,
         _mm256_add_ps, _mm256_div_ps, _mm256_sqrt_ps, _mm256_fmadd_ps)
#undef ADAM_VEC
#define ADAM_HAVE_VEC 1
#else
#define ADAM_HAVE_VEC 0
#endif

/* torch.optim.Adam / AdamW (_single_tensor_adam[w], amsgrad off) on [lo, hi). */
static void adam_range(const dd_optim *o, float *w, const float *g, double lr, size_t lo,
                       size_t hi, uint64_t t) {
    const dd_optim_cfg *c = &o->cfg;
    const int adamw = o->kind == DD_OPTIM_ADAMW;
    const int use_l2 = !adamw && c->weight_decay != 0.0;
    const float wd = (float)c->weight_decay;
    const float decay = (float)(1.0 - lr * c->weight_decay); /* AdamW: param.mul_(1 - lr*wd) */
    const float b1 = (float)c->beta1, omb1 = (float)(1.0 - c->beta1);
    const float b2 = (float)c->beta2, omb2 = (float)(1.0 - c->beta2);
    /* Python: step is float(t); bias corrections in double, as torch computes them. */
    const double bc1 = 1.0 - pow(c->beta1, (double)t);
    const double bc2 = 1.0 - pow(c->beta2, (double)t);
    const float neg_step_size = (float)(-(lr / bc1));
    const float bc2_sqrt = (float)sqrt(bc2);
    const float eps = (float)c->eps;
    float *m = o->state, *v = o->state + o->n;
#if ADAM_HAVE_VEC
    const int level = dd_nn_simd_level();
    if (level == DD_SIMD_AVX512)
        lo = adam_vec_avx512(w, g, m, v, lo, hi, use_l2, adamw, wd, decay, b1, omb1, b2, omb2, neg_step_size,
                             bc2_sqrt, eps);
    else if (level == DD_SIMD_AVX2)
        lo = adam_vec_avx2(w, g, m, v, lo, hi, use_l2, adamw, wd, decay, b1, omb1, b2, omb2, neg_step_size,
                           bc2_sqrt, eps);
#endif
    for (size_t i = lo; i < hi; i++) {
        float gi = g[i];
        float wi = w[i];
        if (use_l2) gi = fmaf(wi, wd, gi); /* grad = grad.add(param, alpha=wd) */
        if (adamw) wi = wi * decay;
        m[i] = fmaf(gi, omb1, m[i] * b1);         /* exp_avg.mul_(b1).add_(g, 1-b1) */
        v[i] = fmaf(omb2 * gi, gi, v[i] * b2);    /* exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2) */
        float denom = sqrtf(v[i]) / bc2_sqrt + eps; /* (sqrt(v) / bc2_sqrt).add_(eps) */
        w[i] = wi + (neg_step_size * m[i]) / denom; /* param.addcdiv_(m, denom, -step_size) */
    }
}

/* torch.optim.RMSprop (_single_tensor_rmsprop; centered off, momentum 0) on [lo, hi):
 * square_avg = alpha sq + (1 - alpha) g^2; w -= lr g / (sqrt(square_avg) + eps). */
static void rmsprop_range(const dd_optim *o, float *w, const float *g, double lr, size_t lo, size_t hi) {
    const dd_optim_cfg *c = &o->cfg;
    const int use_l2 = c->weight_decay != 0.0;
    const float wd = (float)c->weight_decay, a = (float)c->alpha, oma = (float)(1.0 - c->alpha);
    const float eps = (float)c->eps, neg_lr = (float)(-lr);
    float *sq = o->state;
    for (size_t i = lo; i < hi; i++) {
        float gi = g[i];
        if (use_l2) gi = fmaf(w[i], wd, gi);       /* grad = grad.add(param, alpha=wd) */
        sq[i] = fmaf(oma * gi, gi, sq[i] * a);     /* square_avg.mul_(a).addcmul_(g, g, 1-a) */
        float avg = sqrtf(sq[i]) + eps;            /* square_avg.sqrt().add_(eps) */
        w[i] = w[i] + (neg_lr * gi) / avg;         /* param.addcdiv_(g, avg, value=-lr) */
    }
}

dd_status dd_optim_step_range(dd_optim *opt, float *w, const float *g, double lr, size_t lo,
                              size_t hi) {
    if (!opt || !w || !g) return dd_error(DD_ERR_ARG, "dd_optim_step: NULL optimiser, w or g");
    if (!isfinite(lr) || lr < 0.0)
        return dd_error(DD_ERR_ARG, "%s step %llu: lr = %g must be finite and >= 0",
                        dd_optim_kind_name(opt->kind), (unsigned long long)opt->step + 1, lr);
    if (lo > hi || hi > opt->n)
        return dd_error(DD_ERR_ARG, "%s: range [%zu, %zu) is not inside [0, %zu)",
                        dd_optim_kind_name(opt->kind), lo, hi, opt->n);
    uint64_t t = opt->step + 1;
    if (opt->kind == DD_OPTIM_SGD)
        sgd_range(opt, w, g, lr, lo, hi, t);
    else if (opt->kind == DD_OPTIM_RMSPROP)
        rmsprop_range(opt, w, g, lr, lo, hi);
    else
        adam_range(opt, w, g, lr, lo, hi, t);
    return DD_OK;
}

void dd_optim_step_end(dd_optim *opt) {
    if (opt) opt->step++;
}

dd_status dd_optim_step(dd_optim *opt, float *w, const float *g, double lr) {
    if (!opt) return dd_error(DD_ERR_ARG, "dd_optim_step: NULL optimiser");
    DD_TRY(dd_optim_step_range(opt, w, g, lr, 0, opt->n));
    dd_optim_step_end(opt);
    return DD_OK;
}

uint64_t dd_optim_steps(const dd_optim *opt) { return opt ? opt->step : 0; }
size_t dd_optim_size(const dd_optim *opt) { return opt ? opt->n : 0; }
dd_optim_kind dd_optim_get_kind(const dd_optim *opt) { return opt->kind; }
const dd_optim_cfg *dd_optim_get_cfg(const dd_optim *opt) { return &opt->cfg; }

float *dd_optim_state(dd_optim *opt, size_t *count) {
    if (count) *count = opt ? opt->nstate : 0;
    return opt ? opt->state : NULL;
}

void dd_optim_reset(dd_optim *opt) {
    if (!opt) return;
    opt->step = 0;
    if (opt->nstate) memset(opt->state, 0, opt->nstate * sizeof(float));
}

/* ---- state blob ------------------------------------------------------------------- */

#define OPTST_MAGIC "DDOPTST1"
#define OPTST_VERSION 1u
#define OPTST_HEADER 64

/* Header layout (host byte order), 64 bytes:
 *   0 magic[8] | 8 u32 version | 12 u32 kind | 16 u64 n | 24 u64 step | 32 u64 nstate |
 *   40..63 zero */
typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t kind;
    uint64_t n;
    uint64_t step;
    uint64_t nstate;
    uint8_t zero[24];
} optst_header;

_Static_assert(sizeof(optst_header) == OPTST_HEADER, "optimiser state header must be 64 bytes");

size_t dd_optim_state_bytes(const dd_optim *opt) {
    return opt ? OPTST_HEADER + opt->nstate * sizeof(float) : 0;
}

dd_status dd_optim_state_save(const dd_optim *opt, void *buf, size_t bytes) {
    if (!opt || !buf) return dd_error(DD_ERR_ARG, "dd_optim_state_save: NULL argument");
    size_t need = dd_optim_state_bytes(opt);
    if (bytes != need)
        return dd_error(DD_ERR_ARG, "dd_optim_state_save: buffer has %zu bytes, the state needs %zu",
                        bytes, need);
    optst_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, OPTST_MAGIC, 8);
    h.version = OPTST_VERSION;
    h.kind = (uint32_t)opt->kind;
    h.n = opt->n;
    h.step = opt->step;
    h.nstate = opt->nstate;
    memcpy(buf, &h, sizeof h);
    if (opt->nstate) memcpy((char *)buf + OPTST_HEADER, opt->state, opt->nstate * sizeof(float));
    return DD_OK;
}

dd_status dd_optim_state_load(dd_optim *opt, const void *buf, size_t bytes) {
    if (!opt || !buf) return dd_error(DD_ERR_ARG, "dd_optim_state_load: NULL argument");
    const char *nm = dd_optim_kind_name(opt->kind);
    optst_header h;
    if (bytes < OPTST_HEADER)
        return dd_error(DD_ERR_FORMAT, "optimiser state: %zu bytes, shorter than its %d-byte header",
                        bytes, OPTST_HEADER);
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, OPTST_MAGIC, 8) != 0)
        return dd_error(DD_ERR_FORMAT, "optimiser state: bad magic (not written by dd_optim_state_save)");
    if (h.version != OPTST_VERSION)
        return dd_error(DD_ERR_FORMAT, "optimiser state: version %u, this build reads version %u",
                        (unsigned)h.version, OPTST_VERSION);
    if (h.kind != (uint32_t)opt->kind)
        return dd_error(DD_ERR_MISMATCH, "optimiser state was saved by '%s', this optimiser is '%s'",
                        dd_optim_kind_name((dd_optim_kind)h.kind), nm);
    if (h.n != opt->n)
        return dd_error(DD_ERR_MISMATCH,
                        "optimiser state is for %llu parameters, this optimiser has %zu",
                        (unsigned long long)h.n, opt->n);
    if (h.nstate != opt->nstate)
        return dd_error(DD_ERR_MISMATCH,
                        "%s optimiser state has %llu floats, this optimiser keeps %zu (momentum "
                        "switched on or off?)",
                        nm, (unsigned long long)h.nstate, opt->nstate);
    size_t need = OPTST_HEADER + opt->nstate * sizeof(float);
    if (bytes != need)
        return dd_error(DD_ERR_FORMAT, "optimiser state: %zu bytes, expected %zu", bytes, need);
    opt->step = h.step;
    if (opt->nstate) memcpy(opt->state, (const char *)buf + OPTST_HEADER, opt->nstate * sizeof(float));
    return DD_OK;
}

/* ---- slices of a state blob (sharded optimisers) ---- */

int dd_optim_state_arrays(const dd_optim *opt) { return opt && opt->n ? (int)(opt->nstate / opt->n) : 0; }

size_t dd_optim_state_bytes_for(const dd_optim *opt, size_t n_total) {
    return opt ? OPTST_HEADER + (size_t)dd_optim_state_arrays(opt) * n_total * sizeof(float) : 0;
}

dd_status dd_optim_state_header(const dd_optim *opt, size_t n_total, void *buf) {
    if (!opt || !buf) return dd_error(DD_ERR_ARG, "dd_optim_state_header: NULL argument");
    optst_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, OPTST_MAGIC, 8);
    h.version = OPTST_VERSION;
    h.kind = (uint32_t)opt->kind;
    h.n = n_total;
    h.step = opt->step;
    h.nstate = (uint64_t)dd_optim_state_arrays(opt) * n_total;
    memcpy(buf, &h, sizeof h);
    return DD_OK;
}

dd_status dd_optim_state_load_map(dd_optim *opt, const void *buf, size_t bytes, const dd_optim_run *runs, size_t count) {
    if (!opt || !buf || (count && !runs)) return dd_error(DD_ERR_ARG, "dd_optim_state_load_map: NULL argument");
    optst_header h;
    if (bytes < OPTST_HEADER)
        return dd_error(DD_ERR_FORMAT, "optimiser state: %zu bytes, shorter than its %d-byte header", bytes,
                        OPTST_HEADER);
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, OPTST_MAGIC, 8) != 0)
        return dd_error(DD_ERR_FORMAT, "optimiser state: bad magic (not written by dd_optim_state_save)");
    if (h.version != OPTST_VERSION)
        return dd_error(DD_ERR_FORMAT, "optimiser state: version %u, this build reads version %u",
                        (unsigned)h.version, OPTST_VERSION);
    if (h.kind != (uint32_t)opt->kind)
        return dd_error(DD_ERR_MISMATCH, "optimiser state was saved by '%s', this optimiser is '%s'",
                        dd_optim_kind_name((dd_optim_kind)h.kind), dd_optim_kind_name(opt->kind));
    for (size_t r = 0; r < count; r++) {
        if (runs[r].src > h.n || h.n - runs[r].src < runs[r].len)
            return dd_error(DD_ERR_MISMATCH, "optimiser state is for %llu parameters, too few for the slice [%zu, %zu)",
                            (unsigned long long)h.n, runs[r].src, runs[r].src + runs[r].len);
        if (runs[r].dst > opt->n || opt->n - runs[r].dst < runs[r].len)
            return dd_error(DD_ERR_ARG, "dd_optim_state_load_map: run %zu [%zu, %zu) is outside this optimiser's %zu "
                                        "floats",
                            r, runs[r].dst, runs[r].dst + runs[r].len, opt->n);
    }
    const size_t k = (size_t)dd_optim_state_arrays(opt);
    if (h.nstate != k * h.n)
        return dd_error(DD_ERR_MISMATCH,
                        "%s optimiser state has %llu floats for %llu parameters, this optimiser keeps %zu per "
                        "parameter (momentum switched on or off?)",
                        dd_optim_kind_name(opt->kind), (unsigned long long)h.nstate, (unsigned long long)h.n, k);
    if (bytes != OPTST_HEADER + h.nstate * sizeof(float))
        return dd_error(DD_ERR_FORMAT, "optimiser state: %zu bytes, expected %llu", bytes,
                        (unsigned long long)(OPTST_HEADER + h.nstate * sizeof(float)));
    const float *src = (const float *)(const void *)((const char *)buf + OPTST_HEADER);
    memset(opt->state, 0, k * opt->n * sizeof(float)); /* floats no run covers (padding) */
    for (size_t j = 0; j < k; j++)
        for (size_t r = 0; r < count; r++)
            memcpy(opt->state + j * opt->n + runs[r].dst, src + j * h.n + runs[r].src, runs[r].len * sizeof(float));
    opt->step = h.step;
    return DD_OK;
}

dd_status dd_optim_state_load_ranges(dd_optim *opt, const void *buf, size_t bytes, const size_t *lo, const size_t *hi,
                                     size_t count) {
    if (!opt || !buf || (count && (!lo || !hi))) return dd_error(DD_ERR_ARG, "dd_optim_state_load_ranges: NULL argument");
    dd_optim_run *runs = calloc(count ? count : 1, sizeof *runs);
    if (!runs) return dd_error(DD_ERR_NOMEM, "out of memory");
    size_t total = 0;
    dd_status st = DD_OK;
    for (size_t r = 0; r < count && st == DD_OK; r++) {
        if (lo[r] > hi[r]) st = dd_error(DD_ERR_ARG, "dd_optim_state_load_ranges: range %zu [%zu, %zu)", r, lo[r], hi[r]);
        runs[r] = (dd_optim_run){lo[r], total, hi[r] - lo[r]};
        total += hi[r] - lo[r];
    }
    if (st == DD_OK && total != opt->n)
        st = dd_error(DD_ERR_ARG, "dd_optim_state_load_ranges: ranges of %zu floats for an optimiser of %zu", total,
                      opt->n);
    if (st == DD_OK) st = dd_optim_state_load_map(opt, buf, bytes, runs, count);
    free(runs);
    return st;
}

dd_status dd_optim_state_load_slice(dd_optim *opt, const void *buf, size_t bytes, size_t lo) {
    if (!opt || !buf) return dd_error(DD_ERR_ARG, "dd_optim_state_load_slice: NULL argument");
    const size_t hi = lo + opt->n;
    return dd_optim_state_load_ranges(opt, buf, bytes, &lo, &hi, 1);
}
