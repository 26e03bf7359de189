/* The registry of federated local-training algorithms (fednet.h): one line each. */
#include <string.h>

#include "distdpd/fednet.h"

static const dd_fed_algo *const algos[] = {
    &dd_fed_algo_fedavg,
    &dd_fed_algo_fedprox,
    &dd_fed_algo_scaffold,
    NULL,
};

const dd_fed_algo *const *dd_fed_algos(int *count) {
    if (count) *count = (int)(sizeof algos / sizeof algos[0]) - 1;
    return algos;
}

int dd_fed_algo_find(const char *name) {
    char names[256] = "";
    for (int i = 0; algos[i]; i++) {
        if (name && strcmp(name, algos[i]->name) == 0) return i;
        if (i) strncat(names, ", ", sizeof names - strlen(names) - 1);
        strncat(names, algos[i]->name, sizeof names - strlen(names) - 1);
    }
    dd_error(DD_ERR_ARG, "unknown federated algorithm '%s' (valid: %s)", name ? name : "(null)", names);
    return -1;
}
