/* The distdpd command: dispatches `distdpd COMMAND [options]` to the sub-commands
 * (one file each, cmd_*.c) and handles --version / --help / help. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_plan.h"
#include "cmd_train.h"

static int cmd_help(int argc, char **argv);

static const dd_cli_cmd commands[] = {
    {"help", "list the commands, or show one command's help (distdpd help COMMAND)", cmd_help},
    {"metrics", "NMSE, ACLR and EVM of a test signal against a reference (OpenDPD metrics)", dd_cmd_metrics},
    {"convert", "convert a data set between OpenDPD CSV, data.csv, SigMF and binary (streaming, --split)", dd_cmd_convert},
    {"inspect", "what a data set holds: splits, rates, PAPR, ACLR, gain-only NMSE", dd_cmd_inspect},
    {"simulate", "generate an OFDM test signal, pass it through a simulated PA, save a data set", dd_cmd_simulate},
    {"split", "cut a data set into federated benches by drive level or time segments", dd_cmd_split},
    {"report", "HTML report of a data set: spectra, AM/AM, AM/PM, metric table", dd_cmd_report},
    {"demo", "the whole loop on the embedded default: simulate a PA, train a PA model and a DPD, report", dd_cmd_demo},
    {"train-pa", "train a PA behavioural model (run directory with metrics, checkpoints, report)", dd_cmd_train_pa},
    {"train-dpd", "train a DPD through a PA run's model (direct learning, or --ila)", dd_cmd_train_dpd},
    {"run", "run a trained model (PA model or DPD) over an I/Q file as one stream", dd_cmd_run},
    {"eval", "re-evaluate a training run on a data set (NMSE, ACLR, EVM)", dd_cmd_eval},
    {"export", "export a trained model: npz/safetensors (PyTorch names) or C code, float32 or fixed point", dd_cmd_export},
    {"import", "make a run directory from PyTorch/OpenDPD weights (npz or safetensors)", dd_cmd_import},
    {"models", "list the PA / DPD models with their default sizes (parameters, FLOPs)", dd_cmd_models},
    {"compressors", "list the gradient compressors train-pa / train-dpd --compress takes", dd_cmd_compressors},
    {"strategies", "list the parallel training strategies and the options that choose them", dd_cmd_strategies},
    {"launch", "supervise a training job: restart it from its newest checkpoint on failures, hangs and host changes", dd_cmd_launch},
    {"keygen", "write a CURVE key pair (NAME.key secret, NAME.pub public) for the parameter server", dd_cmd_keygen},
    {"ps-server", "run one parameter server: holds its blocks, applies pushes, replicates (docs/ps.md)", dd_cmd_ps_server},
    {"ps-local", "train on a parameter-server cluster started on this machine (servers, coordinator, workers)", dd_cmd_ps_local},
    {"fed-server", "coordinate federated averaging across test benches (docs/federated.md)", dd_cmd_fed_server},
    {"fed-client", "one test bench of a federation: local training on its own data, updates only", dd_cmd_fed_client},
    {"fed-sim", "run a federation on this machine: the coordinator and N bench processes on loopback", dd_cmd_fed_sim},
    {"plan", "predict allreduce time and data-parallel scaling (alpha-beta model); --calibrate measures this machine", dd_cmd_plan},
};
static const size_t n_commands = sizeof commands / sizeof commands[0];

/* OpenDPD's step names (main.py --step), accepted as commands (docs/opendpd.md). */
static const struct {
    const char *alias, *command;
} aliases[] = {{"train_pa", "train-pa"}, {"train_dpd", "train-dpd"}, {"run_dpd", "run"}};
static const size_t n_aliases = sizeof aliases / sizeof aliases[0];

static void usage(FILE *f) {
    fprintf(f, "distdpd %s: neural PA modelling and DPD training, one core to MPI clusters\n\n"
               "usage: distdpd COMMAND [options]    (distdpd COMMAND --help for details)\n\n"
               "commands:\n", DD_VERSION_STRING);
    for (size_t i = 0; i < n_commands; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nOpenDPD's step names work as commands:");
    for (size_t i = 0; i < n_aliases; i++) fprintf(f, "%s %s = %s", i ? "," : "", aliases[i].alias, aliases[i].command);
    fprintf(f, " (docs/opendpd.md)\n");
    fprintf(f, "\noptions: --version, --help\n"
               "exit status: 0 success, 1 runtime error, 2 usage error; train-pa/train-dpd: 75 stopped\n"
               "by a signal with last.ckpt written (preempted: continue with --resume)\n"
               "environment: DISTDPD_LOG=error|warn|info|debug sets the library log level\n");
}

static const dd_cli_cmd *find(const char *name) {
    for (size_t i = 0; i < n_aliases; i++)
        if (strcmp(aliases[i].alias, name) == 0) name = aliases[i].command;
    for (size_t i = 0; i < n_commands; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

/* "unknown command 'X'", with the closest command name when X looks like a typo. */
static int unknown_command(const char *who, const char *name) {
    const char *names[sizeof commands / sizeof commands[0]];
    for (size_t i = 0; i < n_commands; i++) names[i] = commands[i].name;
    const char *near = dd_cli_closest(name, strlen(name), names, n_commands);
    if (near)
        fprintf(stderr, "%s: unknown command '%s' (did you mean '%s'? see 'distdpd help')\n", who, name, near);
    else
        fprintf(stderr, "%s: unknown command '%s' (see 'distdpd help')\n", who, name);
    return DD_EXIT_USAGE;
}

static int cmd_help(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: distdpd help [COMMAND]\n\n"
               "Without COMMAND, lists the commands; with one, shows its help (as COMMAND --help).\n\n"
               "options:\n  -h, --help          this help\n\n"
               "exit status: 0 ok, 2 unknown command\n");
        return DD_EXIT_OK;
    }
    if (argc > 2) {
        fprintf(stderr, "distdpd help: expected at most one command name, got %d arguments\n", argc - 1);
        return DD_EXIT_USAGE;
    }
    if (argc == 2) {
        const dd_cli_cmd *c = find(argv[1]);
        if (!c) return unknown_command("distdpd help", argv[1]);
        char name[32], opt[8] = "--help";
        snprintf(name, sizeof name, "%s", c->name);
        char *sub[] = {name, opt, NULL};
        return c->run(2, sub);
    }
    usage(stdout);
    return DD_EXIT_OK;
}

int main(int argc, char **argv) {
    dd_cli_log_init(0);
    if (argc < 2) {
        usage(stderr);
        return DD_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "version") == 0) {
        printf("distdpd %s\n", DD_VERSION_STRING);
        return DD_EXIT_OK;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return DD_EXIT_OK;
    }
    const dd_cli_cmd *c = find(argv[1]);
    if (!c) {
        if (argv[1][0] == '-')
            fprintf(stderr, "distdpd: unknown option '%s' (see 'distdpd help')\n", argv[1]);
        else
            return unknown_command("distdpd", argv[1]);
        return DD_EXIT_USAGE;
    }
    char name[32]; /* an alias runs as its command (messages say "distdpd train-pa: ...") */
    snprintf(name, sizeof name, "%s", c->name);
    argv[1] = name;
    return c->run(argc - 1, argv + 1);
}
