/* The allreduce registry: the one list of allreduce algorithms (dd_allreduce_algo is an
 * index into it). Adding an algorithm is one file src/comm/ar_NAME.c (ending in
 * DD_ALLREDUCE_DEFINE(NAME, ...), allreduce_impl.h) plus one X(NAME) line here, after the
 * built-in ones: their indices are the constants of comm.h (DD_ALLREDUCE_RING ..
 * DD_ALLREDUCE_MPI), stored in configurations, checkpoints and parallel.json. Order =
 * index = display order (--allreduce choices, the plan table). */
#include <stdio.h>
#include <string.h>

#include "comm/allreduce_impl.h"

#define DD_ALLREDUCES(X) \
    X(ring)              \
    X(tree)              \
    X(rhd)               \
    X(hier)              \
    X(mpi)

#define DD_DECLARE(n) extern const dd_allreduce_def dd_ar_algo_##n;
DD_ALLREDUCES(DD_DECLARE)
#undef DD_DECLARE

#define DD_ENTRY(n) &dd_ar_algo_##n,
static const dd_allreduce_def *const registry[] = {DD_ALLREDUCES(DD_ENTRY)};
#undef DD_ENTRY

/* the built-in algorithms keep the indices comm.h gives them */
#define DD_INDEX(n) DD_AR_INDEX_##n,
enum { DD_ALLREDUCES(DD_INDEX) DD_AR_REGISTERED };
#undef DD_INDEX
_Static_assert((int)DD_AR_INDEX_ring == (int)DD_ALLREDUCE_RING && (int)DD_AR_INDEX_tree == (int)DD_ALLREDUCE_TREE &&
                   (int)DD_AR_INDEX_rhd == (int)DD_ALLREDUCE_RHD && (int)DD_AR_INDEX_hier == (int)DD_ALLREDUCE_HIER &&
                   (int)DD_AR_INDEX_mpi == (int)DD_ALLREDUCE_MPI,
               "ring, tree, rhd, hier, mpi must stay first, in this order (comm.h indices)");
_Static_assert(DD_AR_REGISTERED <= DD_ALLREDUCE_MAX, "more algorithms than DD_ALLREDUCE_MAX (comm.h)");

int dd_allreduce_count(void) { return DD_AR_REGISTERED; }

const dd_allreduce_def *dd_allreduce_def_of(dd_allreduce_algo a) {
    return (int)a >= 0 && (int)a < DD_AR_REGISTERED ? registry[a] : NULL;
}

const char *dd_allreduce_name(dd_allreduce_algo a) {
    const dd_allreduce_def *d = dd_allreduce_def_of(a);
    return d ? d->name : "?";
}

const char *dd_allreduce_describe(dd_allreduce_algo a) {
    const dd_allreduce_def *d = dd_allreduce_def_of(a);
    return d ? d->summary : NULL;
}

size_t dd_allreduce_choices(char *buf, size_t cap) {
    size_t len = 0;
    for (int i = 0; i < DD_AR_REGISTERED; i++) {
        const char *sep = i == 0 ? "" : i == DD_AR_REGISTERED - 1 ? " or " : ", ";
        int w = snprintf(buf && len < cap ? buf + len : NULL, buf && len < cap ? cap - len : 0, "%s%s", sep,
                         registry[i]->name);
        if (w > 0) len += (size_t)w;
    }
    return len;
}

dd_status dd_allreduce_parse(const char *name, dd_allreduce_algo *out) {
    for (int i = 0; name && i < DD_AR_REGISTERED; i++)
        if (strcmp(name, registry[i]->name) == 0) {
            *out = (dd_allreduce_algo)i;
            return DD_OK;
        }
    char choices[512];
    dd_allreduce_choices(choices, sizeof choices);
    return dd_error(DD_ERR_ARG, "allreduce algorithm '%s': expected %s", name ? name : "(null)", choices);
}
