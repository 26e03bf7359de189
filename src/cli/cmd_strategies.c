/* `distdpd strategies`: the parallel training strategies of the registry (parallel.h),
 * the options that choose each and the options each takes, as text or JSON. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/parallel.h"

static const char *const NAME = "strategies";

static void help(void) {
    printf("usage: distdpd strategies [--json]\n"
           "\n"
           "Lists the strategies that run train-pa / train-dpd under mpirun: their name, what\n"
           "they do, which options choose them, and the options they take (train-pa --help\n"
           "explains each). Without any of them, one process trains alone.\n"
           "\n"
           "options:\n"
           "  --json              one JSON object: {\"strategies\": [{name, title, chosen_by,\n"
           "                      options}]}\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage error\n");
}

int dd_cmd_strategies(int argc, char **argv) {
    int json = 0;
    const int rc = dd_cli_list_args(NAME, argc, argv, help, &json);
    if (rc >= 0) return rc;
    size_t n = 0;
    const dd_strategy_def *const *reg = dd_strategy_registry(&n);
    cJSON *root = json ? cJSON_CreateObject() : NULL, *arr = root ? cJSON_AddArrayToObject(root, "strategies") : NULL;
    if (json && !arr) {
        cJSON_Delete(root);
        return dd_cli_fail(NAME, DD_ERR_NOMEM);
    }
    if (!json) printf("strategies (chosen by the options of train-pa / train-dpd):\n");
    for (size_t i = 0; i < n; i++) {
        const dd_strategy_def *d = reg[i];
        char opts[512];
        size_t len = 0;
        opts[0] = '\0';
        cJSON *o = json ? cJSON_CreateObject() : NULL, *oa = o ? cJSON_AddArrayToObject(o, "options") : NULL;
        for (const dd_strategy_opt *q = d->opts; q && q->name; q++) {
            if (oa) cJSON_AddItemToArray(oa, cJSON_CreateString(q->name));
            int w = len < sizeof opts ? snprintf(opts + len, sizeof opts - len, "%s--%s", len ? " " : "", q->name) : 0;
            if (w > 0) len += (size_t)w;
        }
        if (o) {
            cJSON_AddStringToObject(o, "name", d->name);
            cJSON_AddStringToObject(o, "title", d->title);
            cJSON_AddStringToObject(o, "chosen_by", d->when ? d->when : "");
            cJSON_AddItemToArray(arr, o);
        } else if (!json) {
            printf("  %s: %s\n      chosen by: %s\n      options:   %s\n", d->name, d->title, d->when ? d->when : "",
                   opts);
        }
    }
    return json ? dd_cli_print_json(NAME, root) : DD_EXIT_OK;
}
