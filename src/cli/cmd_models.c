/* `distdpd models`: the model registry (model.h). Without --model, every model at its
 * defaults: configuration and parameter count, forward FLOPs per sample, memory
 * (receptive field), the options it declares (default [range]) and its summary. With
 * --model NAME and that model's options as flags (taken from the registry entry's opts
 * table, so a new model's options appear here without touching this file): the model's
 * size for training — parameters, arena floats, FLOPs per sample forward / backward,
 * bytes of parameters, gradients, optimiser state and activations per frame — and its
 * stage list. Text or JSON. The names are what train-pa / train-dpd --model take. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/model.h"

static const char *const NAME = "models";

#define MAX_FRAME ((size_t)1 << 26) /* the model layer's largest B*T */

static void help(void) {
    printf("usage: distdpd models [--json]\n"
           "       distdpd models --model NAME [--OPTION VALUE ...] [--frame F] [--opt O]\n"
           "                      [--momentum M] [--json]\n"
           "\n"
           "Without --model: lists the PA / DPD models of the registry (the names train-pa\n"
           "and train-dpd take with --model), each created with its default\n"
           "hyper-parameters: the configuration and parameter count (dd_model_describe),\n"
           "forward FLOPs per sample, the memory (receptive field - 1 in samples;\n"
           "'recurrent' = unbounded), the options it declares with their defaults and\n"
           "ranges, and a one-line summary.\n"
           "\n"
           "With --model NAME: that model at the given options (the model's own options, as\n"
           "'distdpd models' lists them: e.g. --hidden, --layers, --kernel, --memory,\n"
           "--order, --cross; decimal integers) and what training it costs: parameters,\n"
           "arena floats (padding included), FLOPs per sample forward and backward, bytes\n"
           "of parameters, gradients and optimiser state (arena floats x 4 bytes x 1, 1\n"
           "and the optimiser's state arrays) and of activations per frame of F samples:\n"
           "those kept from forward to backward and the whole workspace (with scratch);\n"
           "then every stage (name, widths, parameters, FLOPs per sample).\n"
           "\n"
           "options:\n"
           "  --model NAME        the model (distdpd models lists the names)\n"
           "  --frame F           frame length for the activation sizes (default 200)\n"
           "  --opt O             adamw (default; 2 state arrays), adam (2) or sgd (0; 1 with\n"
           "                      --momentum)\n"
           "  --momentum M        SGD momentum in [0, 1) (default 0)\n"
           "  --json              one JSON object: without --model {\"models\": [{name,\n"
           "                      describe, params, flops_per_sample, history, options:\n"
           "                      [{name, default, min, max, help}], summary}, ...]}; with\n"
           "                      --model {name, describe, summary, config, params,\n"
           "                      arena_floats, flops_forward, flops_backward, history,\n"
           "                      frame, optimizer, optimizer_state_arrays, bytes: {params,\n"
           "                      grads, optimizer, activations_saved, workspace, total},\n"
           "                      stages: [{name, in, out, params, flops_forward,\n"
           "                      flops_backward}]}\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage error (unknown model, an option the\n"
           "model does not have, a value out of the model's range)\n");
}

/* "12345678" -> "12,345,678" */
static const char *group(char *buf, size_t n, unsigned long long v) {
    char tmp[32];
    int len = snprintf(tmp, sizeof tmp, "%llu", v);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

/* 1.23 MB / 4.56 GB, decimal units as the rest of the command's output. */
static const char *bytes_str(char *buf, size_t n, double b) {
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (b >= 1000 && u < 5) b /= 1000, u++;
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
    return buf;
}

/* "1.23 G" style FLOP counts. */
static const char *flops_str(char *buf, size_t n, double f) {
    static const char *const unit[] = {"", " k", " M", " G", " T"};
    int u = 0;
    while (f >= 1000 && u < 4) f /= 1000, u++;
    snprintf(buf, n, u ? "%.3g%s" : "%.0f%s", f, unit[u]);
    return buf;
}

/* Options of a registry entry: "hidden 23 [1, 4096], layers 1 [1, 64]". */
static void opts_str(const dd_model_info *info, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (const dd_model_opt_info *o = info->opts; o && o->name && len < n; o++) {
        int w = snprintf(buf + len, n - len, "%s%s %d [%d, %d]", o == info->opts ? "" : ", ", o->name, o->def, o->lo,
                         o->hi);
        if (w < 0) break;
        len += (size_t)w;
    }
}

static cJSON *opts_json(const dd_model_info *info) {
    cJSON *arr = cJSON_CreateArray();
    for (const dd_model_opt_info *o = info->opts; arr && o && o->name; o++) {
        cJSON *j = cJSON_CreateObject();
        if (!j) break;
        cJSON_AddStringToObject(j, "name", o->name);
        cJSON_AddNumberToObject(j, "default", o->def);
        cJSON_AddNumberToObject(j, "min", o->lo);
        cJSON_AddNumberToObject(j, "max", o->hi);
        cJSON_AddStringToObject(j, "help", o->help);
        cJSON_AddItemToArray(arr, j);
    }
    return arr;
}

static int print_json(cJSON *root) {
    char *txt = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!txt) return dd_cli_fail(NAME, dd_error(DD_ERR_NOMEM, "out of memory"));
    printf("%s\n", txt);
    cJSON_free(txt);
    return DD_EXIT_OK;
}

/* ---- without --model: the registry table ---- */

static int list_models(int json) {
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
        printf("%-12s %-59s %10s  %-9s %-60s %s\n", "model", "defaults: parameters", "FLOPs/smp", "memory",
               "options: default [range]", "summary");
    }
    for (size_t i = 0; i < n; i++) {
        dd_model *m = NULL;
        dd_status st = dd_model_create(reg[i]->name, NULL, &m);
        if (st != DD_OK) {
            cJSON_Delete(root);
            return dd_cli_fail(NAME, st);
        }
        char desc[256], mem[32], opts[256];
        dd_model_describe(m, desc, sizeof desc);
        opts_str(reg[i], opts, sizeof opts);
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
                cJSON_AddItemToObject(o, "options", opts_json(reg[i]));
                cJSON_AddStringToObject(o, "summary", reg[i]->summary);
                cJSON_AddItemToArray(arr, o);
            }
        } else {
            printf("%-12s %-59s %10.0f  %-9s %-60s %s\n", reg[i]->name, desc, flops, mem, opts, reg[i]->summary);
        }
        dd_model_destroy(&m);
    }
    return json ? print_json(root) : DD_EXIT_OK;
}

/* ---- with --model: one model's size ---- */

typedef struct {
    size_t frame;
    int optim; /* 0 adamw, 1 adam, 2 sgd */
    double momentum;
    int json;
} show_opts;

static const char *const OPT_NAMES[] = {"adamw", "adam", "sgd", NULL};

static int show_model(const dd_model_info *info, const dd_model_cfg *cfg, const show_opts *so) {
    dd_model *m = NULL;
    dd_status st = dd_model_create(info->name, cfg, &m);
    if (st != DD_OK) {
        /* a value out of the model's range is a usage error */
        if (st == DD_ERR_ARG) return dd_cli_usage(NAME, "%s", dd_last_error());
        return dd_cli_fail(NAME, st);
    }
    const dd_param_table *t = dd_model_params(m);
    const size_t S = dd_model_num_stages(m), F = so->frame;
    const int arrays = so->optim == 2 ? (so->momentum > 0 ? 1 : 0) : 2;
    const double fb = (double)t->total * sizeof(float);
    const double b_params = fb, b_grads = fb, b_optim = arrays * fb;
    const double b_saved = (double)dd_model_range_saved(m, 0, S, 1, (int)F) * sizeof(float);
    const double b_ws = (double)dd_model_workspace_size(m, 1, (int)F) * sizeof(float);
    const double b_total = b_params + b_grads + b_optim + b_ws;
    const double ff = dd_model_flops_per_sample(m, 0), fbw = dd_model_flops_per_sample(m, 1);
    const long hist = dd_model_history(m);
    char desc[256];
    dd_model_describe(m, desc, sizeof desc);
    const dd_model_cfg *used = dd_model_config(m);

    if (so->json) {
        cJSON *root = cJSON_CreateObject(), *c = NULL, *b = NULL, *arr = NULL;
        if (root) {
            cJSON_AddStringToObject(root, "name", info->name);
            cJSON_AddStringToObject(root, "describe", desc);
            cJSON_AddStringToObject(root, "summary", info->summary);
            c = cJSON_AddObjectToObject(root, "config");
            for (const dd_model_opt_info *o = info->opts; c && o && o->name; o++)
                cJSON_AddNumberToObject(c, o->name, dd_model_cfg_get(used, o->name));
            cJSON_AddNumberToObject(root, "params", (double)dd_model_num_params(m));
            cJSON_AddNumberToObject(root, "arena_floats", (double)t->total);
            cJSON_AddNumberToObject(root, "flops_forward", ff);
            cJSON_AddNumberToObject(root, "flops_backward", fbw);
            cJSON_AddNumberToObject(root, "history", (double)hist);
            cJSON_AddNumberToObject(root, "frame", (double)F);
            cJSON_AddStringToObject(root, "optimizer", OPT_NAMES[so->optim]);
            cJSON_AddNumberToObject(root, "optimizer_state_arrays", arrays);
            b = cJSON_AddObjectToObject(root, "bytes");
            if (b) {
                cJSON_AddNumberToObject(b, "params", b_params);
                cJSON_AddNumberToObject(b, "grads", b_grads);
                cJSON_AddNumberToObject(b, "optimizer", b_optim);
                cJSON_AddNumberToObject(b, "activations_saved", b_saved);
                cJSON_AddNumberToObject(b, "workspace", b_ws);
                cJSON_AddNumberToObject(b, "total", b_total);
            }
            arr = cJSON_AddArrayToObject(root, "stages");
        }
        for (size_t s = 0; arr && s < S; s++) {
            dd_stage_info si;
            if ((st = dd_model_stage_info(m, s, &si)) != DD_OK) break;
            size_t np = 0;
            for (size_t e = si.e0; e < si.e1; e++) np += t->entries[e].size;
            cJSON *o = cJSON_CreateObject();
            if (!o) break;
            cJSON_AddStringToObject(o, "name", si.name);
            cJSON_AddNumberToObject(o, "in", si.in_width);
            cJSON_AddNumberToObject(o, "out", si.out_width);
            cJSON_AddNumberToObject(o, "params", (double)np);
            cJSON_AddNumberToObject(o, "flops_forward", si.flops_fwd);
            cJSON_AddNumberToObject(o, "flops_backward", si.flops_bwd);
            cJSON_AddItemToArray(arr, o);
        }
        dd_model_destroy(&m);
        if (!root || !c || !b || !arr) {
            cJSON_Delete(root);
            return dd_cli_fail(NAME, dd_error(DD_ERR_NOMEM, "out of memory"));
        }
        if (st != DD_OK) {
            cJSON_Delete(root);
            return dd_cli_fail(NAME, st);
        }
        return print_json(root);
    }

    char a[64], b1[64], b2[64], mem[48];
    if (hist < 0)
        snprintf(mem, sizeof mem, "recurrent");
    else
        snprintf(mem, sizeof mem, "%s samples of history", group(a, sizeof a, (unsigned long long)hist));
    printf("%s\n  %s\n\n", desc, info->summary);
    printf("parameters          %s (arena %s floats with padding)\n", group(a, sizeof a, dd_model_num_params(m)),
           group(b1, sizeof b1, t->total));
    printf("FLOPs per sample    forward %s, backward %s (one training step: %s)\n", flops_str(a, sizeof a, ff),
           flops_str(b1, sizeof b1, fbw), flops_str(b2, sizeof b2, ff + fbw));
    printf("memory              %s\n", mem);
    printf("\nbytes (optimiser %s: %d state array%s; activations per frame of %zu samples)\n", OPT_NAMES[so->optim],
           arrays, arrays == 1 ? "" : "s", F);
    printf("  parameters        %12s  (%s bytes)\n", bytes_str(a, sizeof a, b_params),
           group(b1, sizeof b1, (unsigned long long)b_params));
    printf("  gradients         %12s\n", bytes_str(a, sizeof a, b_grads));
    printf("  optimiser state   %12s\n", bytes_str(a, sizeof a, b_optim));
    printf("  activations       %12s  kept from forward to backward\n", bytes_str(a, sizeof a, b_saved));
    printf("  workspace         %12s  activations and scratch in all (dd_model_workspace_size)\n",
           bytes_str(a, sizeof a, b_ws));
    printf("  total             %12s  parameters + gradients + optimiser + workspace, one frame\n",
           bytes_str(a, sizeof a, b_total));
    printf("\n%zu stage%s:\n  %-5s %-20s %13s %14s %16s\n", S, S == 1 ? "" : "s", "#", "name", "in -> out",
           "parameters", "FLOPs/smp fwd");
    for (size_t s = 0; s < S; s++) {
        dd_stage_info si;
        if ((st = dd_model_stage_info(m, s, &si)) != DD_OK) {
            dd_model_destroy(&m);
            return dd_cli_fail(NAME, st);
        }
        size_t np = 0;
        for (size_t e = si.e0; e < si.e1; e++) np += t->entries[e].size;
        char w[32];
        snprintf(w, sizeof w, "%d -> %d", si.in_width, si.out_width);
        printf("  %-5zu %-20s %13s %14s %16s\n", s, si.name, w, group(a, sizeof a, np),
               group(b1, sizeof b1, (unsigned long long)(si.flops_fwd + 0.5)));
    }
    dd_model_destroy(&m);
    return DD_EXIT_OK;
}

/* The value of --model in argv (NULL if absent), before getopt runs: the model's options
 * decide which flags exist. */
static const char *find_model_arg(int argc, char **argv) {
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "--model") && i + 1 < argc) name = argv[++i];
        else if (!strncmp(argv[i], "--model=", 8)) name = argv[i] + 8;
    }
    return name;
}

/* An option some other model declares (for a precise message), or NULL. */
static const char *other_option(const char *word) {
    if (strncmp(word, "--", 2) != 0) return NULL;
    const char *nm = word + 2;
    size_t len = strcspn(nm, "=");
    size_t n = 0;
    const dd_model_info *const *reg = dd_model_registry(&n);
    for (size_t i = 0; i < n; i++)
        for (const dd_model_opt_info *o = reg[i]->opts; o && o->name; o++)
            if (strlen(o->name) == len && !strncmp(o->name, nm, len)) return o->name;
    return NULL;
}

enum { O_JSON = 256, O_MODEL, O_FRAME, O_OPT, O_MOMENTUM, O_MODEL_OPT = 512 };
#define MAX_MODEL_OPTS 32

int dd_cmd_models(int argc, char **argv) {
    static const struct option fixed[] = {{"json", no_argument, NULL, O_JSON},
                                          {"model", required_argument, NULL, O_MODEL},
                                          {"frame", required_argument, NULL, O_FRAME},
                                          {"opt", required_argument, NULL, O_OPT},
                                          {"momentum", required_argument, NULL, O_MOMENTUM},
                                          {"verbose", no_argument, NULL, 'v'},
                                          {"quiet", no_argument, NULL, 'q'},
                                          {"help", no_argument, NULL, 'h'}};
    const size_t nfixed = sizeof fixed / sizeof fixed[0];
    struct option longopts[sizeof fixed / sizeof fixed[0] + MAX_MODEL_OPTS + 1];
    memcpy(longopts, fixed, sizeof fixed);
    size_t nl = nfixed;

    /* the model's own options become flags */
    const char *mname = find_model_arg(argc, argv);
    const dd_model_info *info = mname ? dd_model_find(mname) : NULL;
    int nopts = 0;
    for (const dd_model_opt_info *o = info ? info->opts : NULL; o && o->name && nopts < MAX_MODEL_OPTS; o++) {
        longopts[nl++] = (struct option){o->name, required_argument, NULL, O_MODEL_OPT + nopts};
        nopts++;
    }
    longopts[nl] = (struct option){NULL, 0, NULL, 0};

    show_opts so = {200, 0, 0.0, 0};
    dd_model_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    int verbosity = 0, c, have_show = 0;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        if (c >= O_MODEL_OPT && c < O_MODEL_OPT + nopts) {
            const dd_model_opt_info *o = &info->opts[c - O_MODEL_OPT];
            char flag[48];
            snprintf(flag, sizeof flag, "--%s", o->name);
            size_t v = 0;
            int rc = dd_cli_parse_size(NAME, flag, optarg, (size_t)o->lo, (size_t)o->hi, &v);
            if (rc) return rc;
            dd_status st = dd_model_cfg_set(&cfg, o->name, (int)v);
            if (st != DD_OK) return dd_cli_fail(NAME, st);
            continue;
        }
        switch (c) {
        case O_JSON: so.json = 1; break;
        case O_MODEL: break; /* read before parsing (find_model_arg) */
        case O_FRAME: {
            int rc = dd_cli_parse_size(NAME, "--frame", optarg, 1, MAX_FRAME, &so.frame);
            if (rc) return rc;
            have_show = 1;
            break;
        }
        case O_OPT: {
            int rc = dd_cli_parse_choice(NAME, "--opt", optarg, OPT_NAMES, &so.optim);
            if (rc) return rc;
            have_show = 1;
            break;
        }
        case O_MOMENTUM: {
            int rc = dd_cli_parse_double(NAME, "--momentum", optarg, 0.0, 0.999999, &so.momentum);
            if (rc) return rc;
            have_show = 1;
            break;
        }
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: {
            if (mname && !info) break; /* reported below as an unknown model */
            const char *word = optind > 0 ? argv[optind - 1] : "";
            const char *other = c == '?' ? other_option(word) : NULL;
            if (other && info) {
                char opts[256];
                opts_str(info, opts, sizeof opts);
                return dd_cli_usage(NAME, "model %s has no option '--%s' (its options: %s)", info->name, other,
                                    opts[0] ? opts : "none");
            }
            if (other && !mname) return dd_cli_usage(NAME, "option '--%s' needs --model NAME", other);
            return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
        }
    }
    if (mname && !info) {
        dd_model *none = NULL; /* the library's message lists the known models */
        dd_model_create(mname, NULL, &none);
        return dd_cli_usage(NAME, "--model: %s", dd_last_error());
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    dd_cli_log_init(verbosity);
    if (!info) {
        if (have_show) return dd_cli_usage(NAME, "--frame, --opt and --momentum need --model NAME");
        return list_models(so.json);
    }
    if (so.momentum > 0 && so.optim != 2) return dd_cli_usage(NAME, "--momentum applies to --opt sgd only");
    return show_model(info, &cfg, &so);
}
