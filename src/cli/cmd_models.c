/* `distdpd models`: the model registry (model.h) with each model's default
 * configuration, parameter count, forward FLOPs per sample, memory (receptive field) and
 * one-line summary, as text or JSON. The names are what train-pa / train-dpd --model take. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/model.h"

static const char *const NAME = "models";

static void help(void) {
    printf("usage: distdpd models [--json]\n"
           "\n"
           "Lists the PA / DPD models of the registry (the names train-pa and train-dpd\n"
           "take with --model), each created with its default hyper-parameters: the\n"
           "configuration and parameter count (dd_model_describe), forward FLOPs per\n"
           "sample, the memory (receptive field - 1 in samples; 'recurrent' = unbounded)\n"
           "and a one-line summary.\n"
           "\n"
           "options:\n"
           "  --json              one JSON object: {\"models\": [{name, describe, params,\n"
           "                      flops_per_sample, history, summary}, ...]}\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage error\n");
}

int dd_cmd_models(int argc, char **argv) {
    enum { O_JSON = 256 };
    static const struct option longopts[] = {{"json", no_argument, NULL, O_JSON},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"quiet", no_argument, NULL, 'q'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int json = 0, verbosity = 0, c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_JSON: json = 1; break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    dd_cli_log_init(verbosity);

    size_t n = 0;
    const dd_model_info *const *reg = dd_model_registry(&n);
    cJSON *root = NULL, *arr = NULL;
    if (json) {
        root = cJSON_CreateObject();
        arr = root ? cJSON_AddArrayToObject(root, "models") : NULL;
        if (!arr) {
            cJSON_Delete(root);
            return dd_cli_fail(NAME, dd_error(DD_ERR_NOMEM, "out of memory"));
        }
    } else {
        printf("%-12s %-59s %10s  %-9s %s\n", "model", "defaults: parameters", "FLOPs/smp", "memory", "summary");
    }
    for (size_t i = 0; i < n; i++) {
        dd_model *m = NULL;
        dd_status st = dd_model_create(reg[i]->name, NULL, &m);
        if (st != DD_OK) {
            cJSON_Delete(root);
            return dd_cli_fail(NAME, st);
        }
        char desc[256], mem[32];
        dd_model_describe(m, desc, sizeof desc);
        double flops = dd_model_flops_per_sample(m, 0);
        long hist = dd_model_history(m);
        if (hist < 0)
            snprintf(mem, sizeof mem, "recurrent");
        else
            snprintf(mem, sizeof mem, "%ld", hist);
        if (json) {
            cJSON *o = cJSON_CreateObject();
            if (o) {
                cJSON_AddStringToObject(o, "name", reg[i]->name);
                cJSON_AddStringToObject(o, "describe", desc);
                cJSON_AddNumberToObject(o, "params", (double)dd_model_num_params(m));
                cJSON_AddNumberToObject(o, "flops_per_sample", flops);
                cJSON_AddNumberToObject(o, "history", (double)hist);
                cJSON_AddStringToObject(o, "summary", reg[i]->summary);
                cJSON_AddItemToArray(arr, o);
            }
        } else {
            printf("%-12s %-59s %10.0f  %-9s %s\n", reg[i]->name, desc, flops, mem, reg[i]->summary);
        }
        dd_model_destroy(&m);
    }
    if (json) {
        char *txt = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        if (!txt) return dd_cli_fail(NAME, dd_error(DD_ERR_NOMEM, "out of memory"));
        printf("%s\n", txt);
        cJSON_free(txt);
    }
    return DD_EXIT_OK;
}
