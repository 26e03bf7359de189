/* `distdpd import`: a run directory from PyTorch / OpenDPD weights in an .npz or
 * safetensors file (docs/deploy.md; tools/opendpd_import.py converts an OpenDPD .pt). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "distdpd/export.h"
#include "distdpd/train.h"
#include "rf.h"

static const char *const NAME = "import";

static void help(void) {
    printf("usage: distdpd import (--npz FILE | --safetensors FILE) --data DIR --out RUN [options]\n"
           "\n"
           "Makes the run directory RUN from weights saved by PyTorch or OpenDPD (tensor names\n"
           "as in the model's state_dict, e.g. rnn.weight_ih_l0, fc_out.bias; a prefix such as\n"
           "OpenDPD's \"backbone.\" is ignored) or by distdpd export: RUN/best.ckpt and\n"
           "last.ckpt hold them as the trained model, so that distdpd eval, run, export and\n"
           "train-dpd --pa-run use them. Every parameter of the model must be present with its\n"
           "exact shape, and every tensor must belong to the model. An OpenDPD checkpoint (.pt)\n"
           "is converted first by tools/opendpd_import.py (needs PyTorch).\n"
           "\n"
           "options:\n"
           "  --npz FILE          NumPy .npz archive of .npy tensors (float32 or float64)\n"
           "  --safetensors FILE  safetensors file (F32 or F64)\n"
           "  --data DIR          the data set the model belongs to (recorded in the run)\n"
           "  --out RUN           new run directory\n"
           "  --task T            pa (default), dla or ila\n"
           "  --pa-run RUN        dla/ila: the PA run whose model the DPD runs through\n"
           "  --model NAME        model (default: the file's metadata, else gru)\n"
           "  --opts LIST         model options \"hidden=23,layers=1\" (default: the file's\n"
           "                      metadata, else hidden and layers from the tensor shapes)\n"
           "  -q, --quiet         errors only;  -v, --verbose: more log output\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage error\n");
}

int dd_cmd_import(int argc, char **argv) {
    enum { O_NPZ = 256, O_ST, O_DATA, O_OUT, O_TASK, O_PARUN, O_MODEL, O_OPTS };
    static const struct option longopts[] = {
        {"npz", required_argument, NULL, O_NPZ},       {"safetensors", required_argument, NULL, O_ST},
        {"data", required_argument, NULL, O_DATA},     {"out", required_argument, NULL, O_OUT},
        {"task", required_argument, NULL, O_TASK},     {"pa-run", required_argument, NULL, O_PARUN},
        {"model", required_argument, NULL, O_MODEL},   {"opts", required_argument, NULL, O_OPTS},
        {"verbose", no_argument, NULL, 'v'},           {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0}};
    static const char *const tasks[] = {"pa", "dla", "ila", NULL};
    const char *file = NULL, *data = NULL, *out = NULL, *pa_run = NULL, *model = NULL, *opts = NULL;
    int task = 0, verbosity = 0, c, rc;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_NPZ:
        case O_ST:
            if (file) return dd_cli_usage(NAME, "give one of --npz and --safetensors");
            file = optarg;
            break;
        case O_DATA: data = optarg; break;
        case O_OUT: out = optarg; break;
        case O_TASK:
            if ((rc = dd_cli_parse_choice(NAME, "--task", optarg, tasks, &task))) return rc;
            break;
        case O_PARUN: pa_run = optarg; break;
        case O_MODEL: model = optarg; break;
        case O_OPTS: opts = optarg; break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!file) return dd_cli_usage(NAME, "missing --npz FILE or --safetensors FILE");
    if (!data) return dd_cli_usage(NAME, "missing --data DIR");
    if (!out) return dd_cli_usage(NAME, "missing --out RUN");
    if (task != 0 && !pa_run) return dd_cli_usage(NAME, "--task %s needs --pa-run RUN", tasks[task]);
    if (task == 0 && pa_run) return dd_cli_usage(NAME, "--pa-run applies to --task dla or ila");
    dd_cli_log_init(verbosity);
    dd_train_cfg cfg;
    dd_train_cfg_default(&cfg, task == 0 ? DD_TRAIN_PA : task == 1 ? DD_TRAIN_DLA : DD_TRAIN_ILA);
    cfg.model[0] = '\0';
    if (model) {
        if (!dd_model_find(model)) return dd_cli_usage(NAME, "--model: unknown model '%s' (see distdpd models)", model);
        snprintf(cfg.model, sizeof cfg.model, "%s", model);
    }
    if (opts && dd_model_cfg_parse(&cfg.model_cfg, opts) != DD_OK) return dd_cli_usage(NAME, "--opts: %s", dd_last_error());
    char databuf[4200], desc[256];
    data = dd_rf_resolve_dataset(data, databuf, sizeof databuf);
    dd_status st = dd_run_import(file, &cfg, data, pa_run, out, desc, sizeof desc);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    if (verbosity >= 0) printf("%s: %s from %s (%s)\n", out, desc, file, tasks[task]);
    return DD_EXIT_OK;
}
