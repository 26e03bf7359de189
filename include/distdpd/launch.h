/* The parts of `distdpd launch` (the elastic supervisor of a training job, src/cli/
 * cmd_launch.c) that decide rather than act: the hosts a job may run on (an Open MPI
 * hostfile or a discovery command's `host:slots` lines), the world size they allow, the
 * checkpoint a restart resumes from, and the training arguments of a restart.
 * docs/elastic.md describes the launcher. */
#ifndef DISTDPD_LAUNCH_H
#define DISTDPD_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"

#define DD_LAUNCH_HOST_MAX 256 /* bytes of a host name, with the NUL */
#define DD_LAUNCH_MAX_HOSTS 4096

typedef struct {
    char name[DD_LAUNCH_HOST_MAX];
    int slots; /* >= 1 */
} dd_launch_host;

typedef struct {
    dd_launch_host *host;
    size_t n;
} dd_launch_hosts;

void dd_launch_hosts_free(dd_launch_hosts *h);
/* Total slots. */
long dd_launch_hosts_slots(const dd_launch_hosts *h);

/* An Open MPI hostfile: one host a line, `NAME [slots=N] [max_slots=M] [max-slots=M]`
 * (slots default 1), '#' starts a comment, blank lines skipped, a host named twice adds
 * its slots. Errors (DD_ERR_FORMAT) name the file and line: "hosts:3: slots must be an
 * integer in [1, 65536], got 'x'", "hosts:4: unknown key 'slot' (keys: slots,
 * max_slots)", "hosts: no hosts". */
dd_status dd_launch_hostfile_parse(const char *path, dd_launch_hosts *out);

/* The output of a discovery command (Horovod's format): one `HOST:SLOTS` (or `HOST`, one
 * slot) a line, blank lines skipped. `what` names the source in errors ("discovery
 * command 'sh x.sh', line 2: slots must be ..."). Zero hosts is valid (none up). */
dd_status dd_launch_discover_parse(const char *text, const char *what, dd_launch_hosts *out);

/* The hosts of h not in the excluded list (names), as a new list. */
dd_status dd_launch_hosts_without(const dd_launch_hosts *h, const char *const *excluded, size_t nex,
                                  dd_launch_hosts *out);

/* The world size to run on: the slots available capped at np_max, rounded down to a
 * multiple of `multiple` (the tensor x pipeline ranks of one replica; 1 otherwise);
 * 0 when that is below np_min. */
int dd_launch_world_size(long slots, int np_min, int np_max, int multiple);

/* Takes the first `n` slots of h in order (mpirun fills hosts in order), as a new list. */
dd_status dd_launch_hosts_take(const dd_launch_hosts *h, int n, dd_launch_hosts *out);

/* Writes h as an Open MPI hostfile (`NAME slots=N` lines), durably enough for mpirun. */
dd_status dd_launch_hostfile_write(const char *path, const dd_launch_hosts *h);

/* The newest checkpoint of run directory `run` that verifies (every CRC): among
 * RUN/last.ckpt and RUN/ckpt/step-*.ckpt, the highest "step" section (last.ckpt on a
 * tie). *found = 0 when none verifies; `path` gets the chosen file, `step` its step,
 * `rejected` (may be NULL) the number of candidates that did not verify, and each one's
 * reason is logged as a warning. */
dd_status dd_launch_pick_checkpoint(const char *run, char *path, size_t cap, uint64_t *step, int *found,
                                    int *rejected);

/* The training command of a restart: argv (train-pa|train-dpd and its options) with
 * `--out RUN` replaced by `--resume RUN` and the options a resume refuses (the run keeps
 * its configuration: model, data layout, optimiser, ...) left out; kept are --data,
 * --epochs, the display options, --mem-limit-mb and the strategy options. `extra`
 * (may be NULL, nextra 0) is appended. The result is a NULL-terminated array the caller
 * frees with free() (the strings point into argv / extra). */
dd_status dd_launch_resume_argv(int argc, char *const *argv, char *const *extra, int nextra, char ***out,
                                int *outc);

/* The host a failed job's mpirun output names, into host ("" when none): Open MPI's
 * "... process rank 1 with PID 0 on node HOST exited on signal 9 (Killed)." (the last
 * such mention wins; dots inside a name are kept, a sentence's final dot is not). */
void dd_launch_failed_host(const char *text, char *host, size_t cap);

/* The run directory the training arguments name (--out or --resume; "--out=RUN" too),
 * and the value of a numeric option (e.g. "tp") or `dflt` when absent. */
const char *dd_launch_arg_value(int argc, char *const *argv, const char *name);

#endif
