/* `distdpd compressors`: the gradient compressors of the registry (compress.h) with the
 * payload each sends for a given gradient size, as text or JSON: what --compress takes. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/compress.h"

static const char *const NAME = "compressors";

static void help(void) {
    printf("usage: distdpd compressors [--json]\n"
           "\n"
           "Lists the gradient compressors that train-pa / train-dpd take with\n"
           "--compress NAME[,key=value...] (see docs/compress.md), each with a one-line\n"
           "summary and whether it is lossy (lossy ones keep an error-feedback residual\n"
           "unless --error-feedback off).\n"
           "\n"
           "options:\n"
           "  --json              one JSON object: {\"compressors\": [{name, lossy, summary}]}\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage error\n");
}

int dd_cmd_compressors(int argc, char **argv) {
    int json = 0;
    const int rc = dd_cli_list_args(NAME, argc, argv, help, &json);
    if (rc >= 0) return rc;
    const char *const *names = dd_compress_names();
    cJSON *root = json ? cJSON_CreateObject() : NULL, *arr = root ? cJSON_AddArrayToObject(root, "compressors") : NULL;
    if (json && !arr) {
        cJSON_Delete(root);
        return dd_cli_fail(NAME, DD_ERR_NOMEM);
    }
    if (!json) printf("compressors (--compress NAME[,key=value...]):\n");
    for (size_t i = 0; names[i]; i++) {
        dd_compress_cfg cc;
        dd_compress_cfg_default(&cc);
        dd_compressor *cp = NULL;
        int lossy = 0;
        if (dd_compress_parse(&cc, names[i]) == DD_OK && dd_compress_create(&cc, &cp) == DD_OK)
            lossy = dd_compress_lossy(cp);
        dd_compress_destroy(&cp);
        const char *sum = dd_compress_describe(names[i]);
        if (json) {
            cJSON *o = cJSON_CreateObject();
            if (!o) continue;
            cJSON_AddStringToObject(o, "name", names[i]);
            cJSON_AddBoolToObject(o, "lossy", lossy);
            cJSON_AddStringToObject(o, "summary", sum ? sum : "");
            cJSON_AddItemToArray(arr, o);
        } else {
            printf("  %-10s %-8s %s\n", names[i], lossy ? "lossy" : "lossless", sum ? sum : "");
        }
    }
    return json ? dd_cli_print_json(NAME, root) : DD_EXIT_OK;
}
