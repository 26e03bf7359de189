/* Shared declarations of the distdpd command: the command table and small helpers for
 * option parsing and error reporting. Only src/cli may print to the terminal or exit. */
#ifndef DD_CLI_H
#define DD_CLI_H

#include "distdpd/core.h"

/* One sub-command: `distdpd NAME ...`. run() gets argv with argv[0] = NAME and returns
 * the process exit status (0 ok, 1 runtime error, 2 usage error). */
typedef struct {
    const char *name;
    const char *summary; /* one line for `distdpd help` */
    int (*run)(int argc, char **argv);
} dd_cli_cmd;

/* Prints "distdpd NAME: <dd_last_error()>" to stderr and returns 1. */
int dd_cli_fail(const char *cmd, dd_status s);

#endif
