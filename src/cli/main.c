/* The distdpd command: dispatches `distdpd COMMAND [options]` to the sub-commands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int cmd_help(int argc, char **argv);

static const dd_cli_cmd commands[] = {
    {"help", "list the commands, or show one command's help", cmd_help},
};
static const size_t n_commands = sizeof commands / sizeof commands[0];

int dd_cli_fail(const char *cmd, dd_status s) {
    fprintf(stderr, "distdpd %s: error: %s (%s)\n", cmd, dd_last_error(), dd_status_str(s));
    return 1;
}

static void usage(FILE *f) {
    fprintf(f, "distdpd %s: neural PA modelling and DPD training, one core to MPI clusters\n\n"
               "usage: distdpd COMMAND [options]    (distdpd COMMAND --help for details)\n\n"
               "commands:\n", DD_VERSION_STRING);
    for (size_t i = 0; i < n_commands; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\noptions: --version, --help\n");
}

static const dd_cli_cmd *find(const char *name) {
    for (size_t i = 0; i < n_commands; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static int cmd_help(int argc, char **argv) {
    if (argc >= 2) {
        const dd_cli_cmd *c = find(argv[1]);
        if (!c) {
            fprintf(stderr, "distdpd help: unknown command '%s'\n", argv[1]);
            return 2;
        }
        char *sub[] = {(char *)c->name, "--help", NULL};
        return c->run(2, sub);
    }
    usage(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("distdpd %s\n", DD_VERSION_STRING);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    const dd_cli_cmd *c = find(argv[1]);
    if (!c) {
        fprintf(stderr, "distdpd: unknown command '%s' (see 'distdpd help')\n", argv[1]);
        return 2;
    }
    return c->run(argc - 1, argv + 1);
}
