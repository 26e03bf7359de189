/* `distdpd plan`: the allreduce cost model, data-parallel scaling table and
 * recommendation, and the calibration of the model on this machine (cmd_plan.c). */
#ifndef DD_CMD_PLAN_H
#define DD_CMD_PLAN_H

/* argv[0] = "plan". Returns the exit status (0 ok, 1 runtime error, 2 usage). */
int dd_cmd_plan(int argc, char **argv);

#endif
