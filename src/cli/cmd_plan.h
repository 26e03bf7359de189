/* `distdpd plan`: the allreduce cost model, data-parallel scaling table and
 * recommendation, and the calibration of the model on this machine (cmd_plan.c). */
#ifndef DD_CMD_PLAN_H
#define DD_CMD_PLAN_H

/* argv[0] = "plan". Returns the exit status (0 ok, 1 runtime error, 2 usage). */
int dd_cmd_plan(int argc, char **argv);

/* plan --run RUN...: strong scaling of a measured run (cmd_plan_run.c). link: --link's
 * (NULL: shm when the runs ran on one host, else ethernet-10g) named link_name; intra
 * and ranks_per_node as for hier. Prints the table; returns the exit status. */
#include "distdpd/plan.h"
#define DD_PLAN_MAX_RUNS 8
int dd_plan_runs(const char *NAME, const char *const *runs, int nruns, const dd_link *link, const dd_link *intra,
                 int ranks_per_node, const char *link_name);

#endif
