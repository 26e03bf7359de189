/* Learning-rate schedules: constant, step (StepLR), cosine (CosineAnnealingLR closed
 * form), reduce-on-plateau (ReduceLROnPlateau) and a linear warm-up in front of any of
 * them (SequentialLR of LinearLR and the main schedule). The state is a plain struct. */
#include <math.h>
#include <string.h>

#include "distdpd/optim.h"

_Static_assert(sizeof(dd_lr_cfg) == 16 * 8, "dd_lr_cfg must have no padding");
_Static_assert(sizeof(dd_lr_sched) == 8 + sizeof(dd_lr_cfg) + 6 * 8, "dd_lr_sched must have no padding");

static const double k_pi = 3.14159265358979323846;

dd_lr_cfg dd_lr_cfg_default(dd_lr_kind kind, double base_lr) {
    dd_lr_cfg c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.base_lr = base_lr;
    c.warmup = 0;
    c.warmup_start = 1.0 / 3.0;
    c.step_size = 1;
    c.gamma = 0.1;
    c.t_max = 1;
    c.eta_min = 0.0;
    c.mode_max = 0;
    c.threshold_abs = 0;
    c.factor = 0.1;
    c.patience = 10;
    c.threshold = 1e-4;
    c.cooldown = 0;
    c.min_lr = 0.0;
    c.plateau_eps = 1e-8;
    return c;
}

static const char *const k_names[] = {"constant", "step", "cosine", "plateau"};

dd_status dd_lr_kind_parse(const char *name, dd_lr_kind *kind) {
    if (!name || !kind) return dd_error(DD_ERR_ARG, "dd_lr_kind_parse: NULL argument");
    for (int i = 0; i < 4; i++)
        if (strcmp(name, k_names[i]) == 0) {
            *kind = (dd_lr_kind)i;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG,
                    "unknown learning-rate schedule '%s' (expected constant, step, cosine or "
                    "plateau)",
                    name);
}

const char *dd_lr_kind_name(dd_lr_kind kind) {
    return (int)kind >= 0 && (int)kind < 4 ? k_names[kind] : "?";
}

static dd_status bad(const char *field, double v, const char *range) {
    return dd_error(DD_ERR_ARG, "lr schedule: %s = %g is out of range %s", field, v, range);
}

static dd_status validate_cfg(const dd_lr_cfg *c) {
    if (c->kind < 0 || c->kind > 3) return bad("kind", (double)c->kind, "0..3");
    if (!isfinite(c->base_lr) || c->base_lr < 0) return bad("base_lr", c->base_lr, "[0, inf)");
    if (c->warmup < 0) return bad("warmup", (double)c->warmup, "[0, inf)");
    if (!(c->warmup_start >= 0.0 && c->warmup_start <= 1.0))
        return bad("warmup_start", c->warmup_start, "[0, 1]");
    switch ((dd_lr_kind)c->kind) {
    case DD_LR_CONSTANT: break;
    case DD_LR_STEP:
        if (c->step_size < 1) return bad("step_size", (double)c->step_size, "[1, inf)");
        if (!isfinite(c->gamma) || c->gamma <= 0) return bad("gamma", c->gamma, "(0, inf)");
        break;
    case DD_LR_COSINE:
        if (c->t_max < 1) return bad("t_max", (double)c->t_max, "[1, inf)");
        if (!isfinite(c->eta_min) || c->eta_min < 0) return bad("eta_min", c->eta_min, "[0, inf)");
        break;
    case DD_LR_PLATEAU:
        if (c->mode_max != 0 && c->mode_max != 1) return bad("mode_max", (double)c->mode_max, "{0, 1}");
        if (c->threshold_abs != 0 && c->threshold_abs != 1)
            return bad("threshold_abs", (double)c->threshold_abs, "{0, 1}");
        if (!(c->factor > 0.0 && c->factor < 1.0)) return bad("factor", c->factor, "(0, 1)");
        if (c->patience < 0) return bad("patience", (double)c->patience, "[0, inf)");
        if (!isfinite(c->threshold) || c->threshold < 0)
            return bad("threshold", c->threshold, "[0, inf)");
        if (c->cooldown < 0) return bad("cooldown", (double)c->cooldown, "[0, inf)");
        if (!isfinite(c->min_lr) || c->min_lr < 0) return bad("min_lr", c->min_lr, "[0, inf)");
        if (!isfinite(c->plateau_eps) || c->plateau_eps < 0)
            return bad("plateau_eps", c->plateau_eps, "[0, inf)");
        break;
    }
    return DD_OK;
}

dd_status dd_lr_sched_init(dd_lr_sched *s, const dd_lr_cfg *cfg) {
    if (!s || !cfg) return dd_error(DD_ERR_ARG, "dd_lr_sched_init: NULL argument");
    DD_TRY(validate_cfg(cfg));
    memset(s, 0, sizeof *s);
    s->magic = DD_LR_SCHED_MAGIC;
    s->cfg = *cfg;
    s->plateau_lr = cfg->base_lr;
    s->best = cfg->mode_max ? -HUGE_VAL : HUGE_VAL;
    return DD_OK;
}

dd_status dd_lr_sched_check(const dd_lr_sched *s) {
    if (!s) return dd_error(DD_ERR_ARG, "dd_lr_sched_check: NULL schedule");
    if (s->magic != DD_LR_SCHED_MAGIC)
        return dd_error(DD_ERR_FORMAT,
                        "lr schedule state: bad magic 0x%016llx (not a dd_lr_sched of this layout)",
                        (unsigned long long)s->magic);
    if (validate_cfg(&s->cfg) != DD_OK)
        return dd_error_prefix(DD_ERR_FORMAT, "lr schedule state: invalid configuration: ");
    if (!isfinite(s->plateau_lr) || s->plateau_lr < 0 || isnan(s->best) || s->num_bad_epochs < 0 ||
        s->cooldown_counter < 0 || s->epochs < 0 || s->reductions < 0)
        return dd_error(DD_ERR_FORMAT, "lr schedule state: counters or lr out of range");
    return DD_OK;
}

/* The main schedule at index t >= 0. */
static double main_lr(const dd_lr_sched *s, int64_t t) {
    const dd_lr_cfg *c = &s->cfg;
    switch ((dd_lr_kind)c->kind) {
    case DD_LR_CONSTANT: return c->base_lr;
    /* NOLINTNEXTLINE(bugprone-integer-division): whole steps of step_size (a staircase) */
    case DD_LR_STEP: return c->base_lr * pow(c->gamma, (double)(t / c->step_size));
    case DD_LR_COSINE:
        return c->eta_min +
               (c->base_lr - c->eta_min) * (1.0 + cos(k_pi * (double)t / (double)c->t_max)) / 2.0;
    case DD_LR_PLATEAU: return s->plateau_lr;
    }
    return c->base_lr;
}

double dd_lr_sched_lr(const dd_lr_sched *s, int64_t t) {
    if (t < 0) t = 0;
    const dd_lr_cfg *c = &s->cfg;
    if (c->warmup > 0 && t < c->warmup) {
        /* LinearLR closed form: base * (start + (end - start) * t / total), end = 1. */
        double f = c->warmup_start + (1.0 - c->warmup_start) * (double)t / (double)c->warmup;
        return main_lr(s, 0) * f;
    }
    return main_lr(s, t - c->warmup);
}

static int is_better(const dd_lr_cfg *c, double a, double best) {
    if (!c->mode_max && !c->threshold_abs) return a < best * (1.0 - c->threshold);
    if (!c->mode_max) return a < best - c->threshold;
    if (!c->threshold_abs) return a > best * (c->threshold + 1.0);
    return a > best + c->threshold;
}

void dd_lr_sched_plateau(dd_lr_sched *s, double metric, int *reduced) {
    if (reduced) *reduced = 0;
    if (!s || s->cfg.kind != DD_LR_PLATEAU) return;
    const dd_lr_cfg *c = &s->cfg;
    s->epochs++;
    if (is_better(c, metric, s->best)) {
        s->best = metric;
        s->num_bad_epochs = 0;
    } else {
        s->num_bad_epochs++;
    }
    if (s->cooldown_counter > 0) {
        s->cooldown_counter--;
        s->num_bad_epochs = 0; /* bad epochs in cooldown are ignored */
    }
    if (s->num_bad_epochs > c->patience) {
        double old_lr = s->plateau_lr;
        double new_lr = fmax(old_lr * c->factor, c->min_lr);
        if (old_lr - new_lr > c->plateau_eps) {
            s->plateau_lr = new_lr;
            s->reductions++;
            if (reduced) *reduced = 1;
        }
        s->cooldown_counter = c->cooldown;
        s->num_bad_epochs = 0;
    }
}
