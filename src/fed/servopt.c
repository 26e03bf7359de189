/* Server optimisers of federated averaging (Reddi et al. 2021, "Adaptive federated
 * optimization"): the aggregated mean update delta is a pseudo-gradient (a descent
 * direction already, so the steps add it).
 *   none:     w += lr delta                               (FedAvg with server lr)
 *   momentum: v = beta v + delta;  w += lr v              (FedAvgM, Hsu et al. 2019)
 *   adam:     m = b1 m + (1-b1) delta; v = b2 v + (1-b2) delta^2;
 *             w += lr m / (sqrt(v) + tau)                 (FedAdam, no bias correction)
 * One function and one table line per optimiser. */
#include <math.h>
#include <stdlib.h>

#include "distdpd/fednet.h"

struct dd_fed_sopt {
    dd_fed_sopt_cfg cfg;
    size_t n;
    float *m, *v;
};

static void step_none(dd_fed_sopt *s, float *w, const float *d) {
    for (size_t i = 0; i < s->n; i++) w[i] += (float)(s->cfg.lr * d[i]);
}
static void step_momentum(dd_fed_sopt *s, float *w, const float *d) {
    const float b = (float)s->cfg.momentum;
    for (size_t i = 0; i < s->n; i++) {
        s->m[i] = b * s->m[i] + d[i];
        w[i] += (float)(s->cfg.lr * s->m[i]);
    }
}
static void step_adam(dd_fed_sopt *s, float *w, const float *d) {
    const double b1 = s->cfg.momentum, b2 = s->cfg.beta2;
    for (size_t i = 0; i < s->n; i++) {
        s->m[i] = (float)(b1 * s->m[i] + (1 - b1) * d[i]);
        s->v[i] = (float)(b2 * s->v[i] + (1 - b2) * (double)d[i] * d[i]);
        w[i] += (float)(s->cfg.lr * s->m[i] / (sqrt((double)s->v[i]) + s->cfg.eps));
    }
}

static const struct {
    void (*step)(dd_fed_sopt *, float *, const float *);
    int arrays;
} table[] = {{step_none, 0}, {step_momentum, 1}, {step_adam, 2}};
const char *const dd_fed_sopt_names[] = {"none", "momentum", "adam", NULL};

dd_status dd_fed_sopt_create(const dd_fed_sopt_cfg *cfg, size_t n, dd_fed_sopt **out) {
    *out = NULL;
    if (cfg->kind < 0 || cfg->kind >= (int)(sizeof table / sizeof table[0]))
        return dd_error(DD_ERR_ARG, "server optimiser %d out of range", cfg->kind);
    if (!(cfg->lr > 0) || !(cfg->momentum >= 0 && cfg->momentum < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1) || !(cfg->eps > 0))
        return dd_error(DD_ERR_ARG, "server optimiser: lr %g must be > 0, momentum/beta1 %g and beta2 %g in [0, 1), eps %g > 0",
                        cfg->lr, cfg->momentum, cfg->beta2, cfg->eps);
    dd_fed_sopt *s = calloc(1, sizeof *s);
    if (!s) return dd_error(DD_ERR_NOMEM, "server optimiser");
    s->cfg = *cfg;
    s->n = n;
    int a = table[cfg->kind].arrays;
    if (a >= 1) s->m = calloc(n ? n : 1, sizeof(float));
    if (a >= 2) s->v = calloc(n ? n : 1, sizeof(float));
    if ((a >= 1 && !s->m) || (a >= 2 && !s->v)) {
        dd_fed_sopt_destroy(&s);
        return dd_error(DD_ERR_NOMEM, "server optimiser state of %zu floats", n);
    }
    *out = s;
    return DD_OK;
}

void dd_fed_sopt_step(dd_fed_sopt *s, float *w, const float *delta) { table[s->cfg.kind].step(s, w, delta); }

void dd_fed_sopt_destroy(dd_fed_sopt **s) {
    if (!s || !*s) return;
    free((*s)->m);
    free((*s)->v);
    free(*s);
    *s = NULL;
}
