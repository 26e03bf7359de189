/* The training commands of distdpd (cmd_train.c): train-pa, train-dpd, run, eval. Each
 * takes argv with argv[0] = the command name and returns the exit status (0 ok,
 * 1 runtime error, 2 usage error). */
#ifndef DD_CLI_CMD_TRAIN_H
#define DD_CLI_CMD_TRAIN_H

#include <stdio.h>

#include "distdpd/train.h"

int dd_cmd_train_pa(int argc, char **argv);
int dd_cmd_train_dpd(int argc, char **argv);
int dd_cmd_run(int argc, char **argv);
int dd_cmd_eval(int argc, char **argv);

/* run_dpd.c. `run --dpd-out PATH`: the DPD of rm (a DPD run, else usage error) over the
 * test split of data (NULL or "": the run's) as one stream, written as OpenDPD's run_dpd
 * CSV (I,Q,I_dpd,Q_dpd), then the baseline line; returns the exit status. */
int dd_cli_run_dpd_out(const char *name, const dd_run_model *rm, const char *run, const char *data, const char *path,
                       int verbosity);
/* Prints a DPD result with its baseline to f: PA_model(u) and PA_model(x) (one stream
 * each) against G x on n samples, OpenDPD metrics, and the improvement in dB. */
dd_status dd_cli_dpd_baseline(FILE *f, const dd_run_model *rm, const dd_spec *spec, const dd_cf32 *x,
                              const dd_cf32 *u, size_t n);

#endif
