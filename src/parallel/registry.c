/* The strategy registry (parallel.h). A strategy is one file in src/parallel that defines
 * `const dd_strategy_def dd_strategy_def_NAME` and one X(NAME) line below. The order is
 * the order of --help; the strategy that claims the options given with the highest
 * priority runs. */
#include <stdio.h>
#include <string.h>

#include "distdpd/parallel.h"

#define DD_STRATEGIES(X) \
    X(dp)                \
    X(zero)              \
    X(model_parallel)    \
    X(ps)

#define X(name) extern const dd_strategy_def dd_strategy_def_##name;
DD_STRATEGIES(X)
#undef X

static const dd_strategy_def *const registry[] = {
#define X(name) &dd_strategy_def_##name,
    DD_STRATEGIES(X)
#undef X
};

const dd_strategy_def *const *dd_strategy_registry(size_t *n) {
    if (n) *n = sizeof registry / sizeof registry[0];
    return registry;
}

const dd_strategy_def *dd_strategy_find(const char *name) {
    for (size_t i = 0; name && i < sizeof registry / sizeof registry[0]; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    dd_error(DD_ERR_ARG, "unknown strategy '%s'", name ? name : "(null)");
    return NULL;
}

static int takes(const dd_strategy_def *d, const char *name) {
    for (const dd_strategy_opt *o = d->opts; o && o->name; o++)
        if (strcmp(o->name, name) == 0) return 1;
    return 0;
}

int dd_strategy_opt_known(const char *name) {
    for (size_t i = 0; name && i < sizeof registry / sizeof registry[0]; i++)
        if (takes(registry[i], name)) return 1;
    return 0;
}

const char *dd_strategy_arg(const dd_strategy_args *a, const char *name) {
    if (!a || !name) return NULL;
    for (size_t i = a->n; i-- > 0;)
        if (strcmp(a->name[i], name) == 0) return a->value[i];
    return NULL;
}

dd_status dd_strategy_arg_set(dd_strategy_args *a, const char *name, const char *value) {
    if (!a || !name || !value) return dd_error(DD_ERR_ARG, "dd_strategy_arg_set: NULL argument");
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->name[i], name) == 0) {
            a->value[i] = value;
            return DD_OK;
        }
    if (a->n >= DD_STRATEGY_MAX_ARGS)
        return dd_error(DD_ERR_ARG, "more than %d parallel options", DD_STRATEGY_MAX_ARGS);
    a->name[a->n] = name;
    a->value[a->n] = value;
    a->n++;
    return DD_OK;
}

dd_status dd_strategy_args_resume(dd_strategy_args *a) {
    if (!a || !a->resume) return DD_OK;
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (registry[i]->resume_args) DD_TRY(registry[i]->resume_args(a));
    return DD_OK;
}

dd_status dd_strategy_choose(const dd_strategy_args *a, const dd_strategy_def **out) {
    if (!a || !out) return dd_error(DD_ERR_ARG, "dd_strategy_choose: NULL argument");
    *out = NULL;
    int best = 0;
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        const int p = registry[i]->claims(a);
        if (p > best) {
            best = p;
            *out = registry[i];
        }
    }
    /* the strategy's own check first: it may refuse an option it does not take with the reason */
    if (*out && (*out)->check) DD_TRY((*out)->check(a));
    for (size_t i = 0; i < a->n; i++) {
        if (!dd_strategy_opt_known(a->name[i])) return dd_error(DD_ERR_ARG, "--%s is no strategy's option", a->name[i]);
        if (!*out)
            return dd_error(DD_ERR_ARG, "--%s applies to a parallel run; this one runs as one process", a->name[i]);
        if (!takes(*out, a->name[i]))
            return dd_error(DD_ERR_ARG, "--%s does not apply to %s, the strategy these options choose", a->name[i],
                            (*out)->title);
    }
    return DD_OK;
}

dd_status dd_strategy_start(const dd_strategy_def *def, dd_comm *comm, const dd_strategy_args *a,
                            dd_strategy_run *out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_strategy_start: NULL output");
    memset(out, 0, sizeof *out);
    if (!def || !comm || !a) return dd_error(DD_ERR_ARG, "dd_strategy_start: NULL argument");
    DD_TRY(def->create(comm, a, &out->self));
    out->def = def;
    def->strategy(out->self, &out->st);
    return DD_OK;
}

void dd_strategy_stop(dd_strategy_run *r) {
    if (!r) return;
    if (r->def && r->self) r->def->destroy(r->self);
    memset(r, 0, sizeof *r);
}
