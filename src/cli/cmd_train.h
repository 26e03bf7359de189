/* The training commands of distdpd (cmd_train.c): train-pa, train-dpd, run, eval. Each
 * takes argv with argv[0] = the command name and returns the exit status (0 ok,
 * 1 runtime error, 2 usage error). */
#ifndef DD_CLI_CMD_TRAIN_H
#define DD_CLI_CMD_TRAIN_H

int dd_cmd_train_pa(int argc, char **argv);
int dd_cmd_train_dpd(int argc, char **argv);
int dd_cmd_run(int argc, char **argv);
int dd_cmd_eval(int argc, char **argv);

#endif
