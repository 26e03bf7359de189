/* `distdpd launch [options] -- train-pa|train-dpd ARGS`: supervises a training job. It
 * runs mpirun itself, watches the job (its exit status, rank 0's heartbeat file, the
 * host-discovery command), and on a failure, a hang or a change of the hosts kills the
 * whole group, picks the newest checkpoint that verifies and starts the job again with
 * --resume on the world size the hosts allow. SIGTERM to the launcher is a preemption:
 * the job checkpoints and stops (SIGUSR1 to mpirun, the stop-together path), the
 * launcher exits 75. Every event goes to RUN/launch.jsonl. docs/elastic.md. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "distdpd/ckpt.h"
#include "distdpd/launch.h"

#define NAME "launch"

static void help(void) {
    printf("usage: distdpd launch [options] -- train-pa|train-dpd ARGS (with --out RUN)\n"
           "\n"
           "Supervises a training job: runs 'mpirun -np N distdpd train-pa|train-dpd ARGS',\n"
           "and when a rank dies (mpirun exits non-zero), the job hangs (no heartbeat from\n"
           "rank 0 within --hang-timeout) or the hosts change (--discover), kills the whole\n"
           "group, picks the newest checkpoint of RUN that verifies (last.ckpt or\n"
           "RUN/ckpt/step-*.ckpt, every CRC) and starts the job again with --resume RUN on\n"
           "the world size the hosts that are up allow. --batch is the global batch, so a\n"
           "restart on another number of ranks continues the same training. Every start,\n"
           "exit, cause, chosen checkpoint, world size and the time lost per failure go to\n"
           "RUN/launch.jsonl. Also inside a Slurm allocation or a Kubernetes MPIJob's\n"
           "launcher pod (examples/).\n"
           "\n"
           "world size and hosts:\n"
           "  --np N | MIN:MAX     ranks: exactly N, or as many as the slots allow between MIN\n"
           "                       and MAX (default: all slots of --hostfile/--discover);\n"
           "                       rounded down to a multiple of --tp x --pp of the job\n"
           "  --hostfile FILE      Open MPI hostfile ('host slots=N' lines)\n"
           "  --discover CMD       host discovery: a shell command printing 'host:slots'\n"
           "                       lines (Horovod's format), rerun every --discover-every S\n"
           "                       seconds (default 5); a change of the world size it allows\n"
           "                       checkpoints and restarts the job on the new size\n"
           "  --discover-timeout S the discovery command's limit (default 30 s)\n"
           "  --min-wait S         below MIN slots, wait this long for hosts (default 600 s)\n"
           "\n"
           "failures:\n"
           "  --max-restarts K     restarts allowed, failures and resizes alike (default 3)\n"
           "  --backoff S          wait before a restart after a failure, doubled for each\n"
           "                       failure in a row, at most 60 s (default 1 s)\n"
           "  --cooldown S         a host a failure names is left out this long (default\n"
           "                       300 s; only while enough slots remain without it)\n"
           "  --hang-timeout S     no heartbeat from rank 0 this long: the job is hung\n"
           "                       (default: 20 x its mean step time, at least 60 s)\n"
           "  --start-timeout S    until the first heartbeat of a start (loading data,\n"
           "                       default 600 s)\n"
           "  --preempt-grace S    on SIGTERM/SIGINT: the job gets S seconds to checkpoint\n"
           "                       and stop before it is killed (default 30 s); exit 75\n"
           "\n"
           "rescaling on a new world size:\n"
           "  --rescale R          keep-global-batch (default: the global batch stays, so N\n"
           "                       ranks train as 1 rank would) or linear-lr: the global\n"
           "                       batch scales with the ranks (batch x N / N0, N0 the first\n"
           "                       start's) and the learning rate with it (Goyal et al.),\n"
           "                       from the next epoch boundary; not with --tp/--pp\n"
           "  --rescale-warmup W   linear-lr: reach the new learning rate over W steps\n"
           "                       (default 50)\n"
           "\n"
           "mpirun:\n"
           "  --mpirun CMD         the mpirun to run (default mpirun; also DISTDPD_MPIRUN)\n"
           "  --mpi-arg ARG        one more argument for mpirun (repeatable), e.g.\n"
           "                       --mpi-arg=--bind-to --mpi-arg=none\n"
           "  -q, --quiet          no launcher messages (the job's own output stays)\n"
           "\n"
           "exit status: 0 the job completed; 1 it failed more than --max-restarts times,\n"
           "or no checkpoint/hosts to go on with (the message says which); 2 usage error\n"
           "(also the job's own usage errors, which a restart cannot cure); 75 preempted\n"
           "(RUN/last.ckpt holds the state; the same command continues it).\n");
}

/* ------------------------------------------------------------------ state */

typedef struct {
    const char *run;
    char **targv; /* train-pa|train-dpd ARGS */
    int targc;
    int np_min, np_max, np_given;
    const char *hostfile, *discover;
    double discover_every, discover_timeout, min_wait;
    int max_restarts;
    double backoff, cooldown, hang_timeout, start_timeout, preempt_grace;
    const char *mpirun;
    char *mpi_args[64];
    int nmpi;
    int quiet;
    int multiple; /* tp x pp of the job */
    int linear_lr; /* --rescale linear-lr */
    long rescale_warmup;
    int n0;        /* world size the run's batch was chosen for (linear-lr) */
    int openmpi;  /* mpirun is Open MPI's (env forwarding with -x) */
    char self[PATH_MAX];
    FILE *log; /* RUN/launch.jsonl */
    char excl[64][DD_LAUNCH_HOST_MAX];
    double excl_until[64];
    int nexcl;
} launcher;

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void say(const launcher *L, const char *fmt, ...) {
    if (L->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "distdpd launch: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* One line of launch.jsonl: {"time": ..., "event": EV, ...o}; consumes o. */
static void event(launcher *L, const char *ev, cJSON *o) {
    if (!o) o = cJSON_CreateObject();
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "time", now_s());
    cJSON_AddStringToObject(line, "event", ev);
    for (cJSON *c = o->child; c;) {
        cJSON *next = c->next;
        cJSON_AddItemToObject(line, c->string, cJSON_DetachItemViaPointer(o, c));
        c = next;
    }
    cJSON_Delete(o);
    char *txt = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    if (txt && L->log) {
        fprintf(L->log, "%s\n", txt);
        fflush(L->log);
        fsync(fileno(L->log));
    }
    free(txt);
}

/* ------------------------------------------------------------------ processes */

/* Runs `sh -c cmd` with a time limit; its stdout into *out (malloc'd). 0 on exit 0. */
static int run_capture(const char *cmd, double timeout, char **out, char *why, size_t whylen) {
    *out = NULL;
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd[1], 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    if (!buf) {
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(fd[0]);
        snprintf(why, whylen, "out of memory reading its output");
        return -1;
    }
    const double t0 = now_s();
    int status = 0, done = 0, eof = 0;
    while (!done || !eof) {
        if (!eof) {
            struct pollfd p = {fd[0], POLLIN, 0};
            if (poll(&p, 1, 100) > 0) {
                if (n + 1024 > cap && n < (1u << 20)) { /* on failure: read on into the room left */
                    char *nb = realloc(buf, cap * 2);
                    if (nb) {
                        buf = nb;
                        cap *= 2;
                    }
                }
                ssize_t k = read(fd[0], buf + n, cap - n - 1);
                if (k <= 0) eof = 1;
                else if (n + (size_t)k < (1u << 20)) n += (size_t)k;
            }
        }
        if (!done && waitpid(pid, &status, WNOHANG) == pid) done = 1;
        if (now_s() - t0 > timeout) {
            kill(-pid, SIGKILL);
            if (!done) waitpid(pid, &status, 0);
            close(fd[0]);
            free(buf);
            snprintf(why, whylen, "did not finish within %g s", timeout);
            return -1;
        }
        if (done && eof) break;
        if (done && !eof) { /* a child of the command keeps the pipe open: read what is there */
            struct pollfd p = {fd[0], POLLIN, 0};
            if (poll(&p, 1, 0) <= 0) break;
        }
    }
    close(fd[0]);
    buf[n] = 0;
    *out = buf;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    if (WIFEXITED(status)) snprintf(why, whylen, "exit status %d", WEXITSTATUS(status));
    else snprintf(why, whylen, "killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return -1;
}

/* The hosts now: the hostfile, the discovery command's output, or (neither) this host
 * with np_max slots. 0, or -1 with the reason in why. */
static int current_hosts(launcher *L, dd_launch_hosts *h, char *why, size_t whylen) {
    memset(h, 0, sizeof *h);
    if (L->hostfile) {
        if (dd_launch_hostfile_parse(L->hostfile, h) != DD_OK) {
            snprintf(why, whylen, "%s", dd_last_error());
            return -1;
        }
        return 0;
    }
    if (L->discover) {
        char *out = NULL, r[256];
        if (run_capture(L->discover, L->discover_timeout, &out, r, sizeof r) != 0) {
            snprintf(why, whylen, "discovery command '%s': %s", L->discover, r);
            free(out);
            return -1;
        }
        char what[600];
        snprintf(what, sizeof what, "discovery command '%s'", L->discover);
        const dd_status st = dd_launch_discover_parse(out, what, h);
        free(out);
        if (st != DD_OK) {
            snprintf(why, whylen, "%s", dd_last_error());
            return -1;
        }
        return 0;
    }
    h->host = calloc(1, sizeof *h->host);
    if (!h->host) return -1;
    snprintf(h->host[0].name, sizeof h->host[0].name, "localhost");
    h->host[0].slots = L->np_max;
    h->n = 1;
    return 0;
}

/* The hosts to run on (excluded hosts left out while enough slots remain) and the world
 * size they allow (0: below MIN). */
static int usable(launcher *L, const dd_launch_hosts *all, dd_launch_hosts *use) {
    const double t = now_s();
    const char *ex[64];
    size_t nex = 0;
    for (int k = 0; k < L->nexcl; k++)
        if (L->excl_until[k] > t) ex[nex++] = L->excl[k];
    if (dd_launch_hosts_without(all, ex, nex, use) == DD_OK) {
        const int n = dd_launch_world_size(dd_launch_hosts_slots(use), L->np_min, L->np_max, L->multiple);
        if (n > 0 || nex == 0) return n;
        dd_launch_hosts_free(use);
    }
    /* not enough without the excluded hosts: use them anyway */
    if (dd_launch_hosts_without(all, NULL, 0, use) != DD_OK) return 0;
    return dd_launch_world_size(dd_launch_hosts_slots(use), L->np_min, L->np_max, L->multiple);
}

static void exclude(launcher *L, const char *host) {
    int k = 0;
    while (k < L->nexcl && strcmp(L->excl[k], host) != 0) k++;
    if (k == L->nexcl) {
        if (L->nexcl == 64) return;
        snprintf(L->excl[L->nexcl++], DD_LAUNCH_HOST_MAX, "%s", host);
    }
    L->excl_until[k] = now_s() + L->cooldown;
}

/* The heartbeat file: {"pid":..,"step":..,"epoch":..,"time":..,"step_s":..,...}. 1 when
 * read. */
typedef struct {
    double time, step_s;
    long step;
    char state[32];
} heartbeat;

static int read_heartbeat(const char *path, heartbeat *hb) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    if (!o) return 0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "time"), *s = cJSON_GetObjectItemCaseSensitive(o, "step"),
                *ss = cJSON_GetObjectItemCaseSensitive(o, "step_s"), *st = cJSON_GetObjectItemCaseSensitive(o, "state");
    const int ok = cJSON_IsNumber(t) && cJSON_IsNumber(s);
    if (ok) {
        hb->time = t->valuedouble;
        hb->step = (long)s->valuedouble;
        hb->step_s = cJSON_IsNumber(ss) ? ss->valuedouble : 0.0;
        snprintf(hb->state, sizeof hb->state, "%s", cJSON_IsString(st) ? st->valuestring : "");
    }
    cJSON_Delete(o);
    return ok;
}

/* Kills the job: SIGTERM to mpirun (it takes its ranks down), then SIGKILL to the whole
 * process group after `grace` seconds. Returns the wait status. */
static int kill_job(pid_t pid, double grace) {
    int status = 0;
    kill(pid, SIGTERM);
    const double t0 = now_s();
    while (now_s() - t0 < grace) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            kill(-pid, SIGKILL); /* ranks left behind (a stopped one) */
            return status;
        }
        usleep(50000);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    return status;
}

/* The first step of a start: the heartbeat that shows it may be a later one (it is
 * renewed at most every 0.2 s, and read every 0.1 s), so the step's time is the
 * heartbeat's less the steps since at its mean step time. */
static void first_step_event(launcher *L, int restart, const heartbeat *hb, long resume_step, double t_start,
                             double t_fail) {
    const long after = hb->step - (resume_step < 0 ? 0 : resume_step) - 1;
    double t = hb->time - (after > 0 ? (double)after * hb->step_s : 0.0);
    if (t < t_start) t = t_start;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "restart", restart);
    cJSON_AddNumberToObject(o, "step", (double)hb->step);
    cJSON_AddNumberToObject(o, "since_start_s", t - t_start);
    if (t_fail > 0) cJSON_AddNumberToObject(o, "time_lost_s", t - t_fail);
    event(L, "first_step", o);
}

typedef enum { END_DONE, END_FAILED, END_HANG, END_RESIZE, END_PREEMPTED, END_SIGNALLED, END_USAGE } end_kind;
static const char *const end_names[] = {"completed", "failed", "hang", "resize", "preempted", "signalled", "usage"};

typedef struct {
    end_kind kind;
    int rc;             /* the job's exit status (-signal when killed) */
    double t_end;       /* when the end was noticed */
    double t_failure;   /* when it failed, at the latest: rank 0's last heartbeat (renewed every
                           0.2 s while it trains), else when the end was noticed */
    long last_step;     /* rank 0's last heartbeat step (-1 none) */
    char host[DD_LAUNCH_HOST_MAX]; /* the host a failure names */
    char detail[512];
    int new_world;      /* END_RESIZE: the world size the hosts allow now */
} job_end;

/* Runs one start of the job on `hosts` (N ranks) and waits for its end. */
static int run_job(launcher *L, char **tcmd, int N, const dd_launch_hosts *hosts, int restart, double t_fail,
                   long resume_step, job_end *je) {
    memset(je, 0, sizeof *je);
    je->last_step = -1;
    char hbpath[PATH_MAX], hfpath[PATH_MAX], restart_s[32];
    snprintf(hbpath, sizeof hbpath, "%s/launch/heartbeat.json", L->run);
    snprintf(hfpath, sizeof hfpath, "%s/launch/hosts", L->run);
    snprintf(restart_s, sizeof restart_s, "%d", restart);
    unlink(hbpath);
    const int use_hostfile = L->hostfile || L->discover;
    if (use_hostfile && dd_launch_hostfile_write(hfpath, hosts) != DD_OK) {
        snprintf(je->detail, sizeof je->detail, "%s", dd_last_error());
        return -1;
    }
    /* mpirun [--hostfile F] -np N [-x VARS] [mpi args] distdpd train... */
    int nt = 0;
    while (tcmd[nt]) nt++;
    char **argv = calloc((size_t)16 + L->nmpi + nt, sizeof *argv);
    if (!argv) {
        snprintf(je->detail, sizeof je->detail, "out of memory");
        return -1;
    }
    int a = 0;
    char nps[32];
    snprintf(nps, sizeof nps, "%d", N);
    argv[a++] = (char *)L->mpirun;
    if (use_hostfile) {
        argv[a++] = "--hostfile";
        argv[a++] = hfpath;
    }
    argv[a++] = "-np";
    argv[a++] = nps;
    if (L->openmpi) {
        argv[a++] = "-x";
        argv[a++] = "DISTDPD_HEARTBEAT";
        argv[a++] = "-x";
        argv[a++] = "DISTDPD_RESTART";
    } else {
        argv[a++] = "-genvlist";
        argv[a++] = "DISTDPD_HEARTBEAT,DISTDPD_RESTART";
    }
    for (int k = 0; k < L->nmpi; k++) argv[a++] = L->mpi_args[k];
    argv[a++] = L->self;
    for (int k = 0; k < nt; k++) argv[a++] = tcmd[k];
    argv[a] = NULL;

    int efd[2];
    if (pipe2(efd, O_CLOEXEC) != 0) {
        snprintf(je->detail, sizeof je->detail, "pipe: %s", strerror(errno));
        free(argv);
        return -1;
    }
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddNumberToObject(ev, "restart", restart);
    cJSON_AddNumberToObject(ev, "world_size", N);
    cJSON *hj = cJSON_AddArrayToObject(ev, "hosts");
    for (size_t i = 0; i < hosts->n; i++) {
        char s[DD_LAUNCH_HOST_MAX + 16];
        snprintf(s, sizeof s, "%s:%d", hosts->host[i].name, hosts->host[i].slots);
        cJSON_AddItemToArray(hj, cJSON_CreateString(s));
    }
    cJSON *cj = cJSON_AddArrayToObject(ev, "command");
    for (int k = 0; argv[k]; k++) cJSON_AddItemToArray(cj, cJSON_CreateString(argv[k]));
    const double t_start = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        cJSON_Delete(ev);
        close(efd[0]);
        close(efd[1]);
        free(argv);
        snprintf(je->detail, sizeof je->detail, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(efd[1], 2);
        setenv("DISTDPD_HEARTBEAT", hbpath, 1);
        setenv("DISTDPD_RESTART", restart_s, 1);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): argv[0] is L->mpirun, never NULL */
        execvp(argv[0], argv);
        fprintf(stderr, "distdpd launch: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(efd[1]);
    free(argv);
    cJSON_AddNumberToObject(ev, "pid", pid);
    event(L, "start", ev);
    say(L, "start %d: %d ranks%s, pid %ld", restart, N, tcmd[1] && strcmp(tcmd[1], "--resume") == 0 ? ", resumed" : "",
        (long)pid);

    char err[16384];
    size_t nerr = 0;
    err[0] = 0;
    heartbeat hb = {0};
    double last_hb = t_start, last_disc = t_start, sig_at = 0, ask_at = 0;
    int first_hb = 0, status = 0, asked = 0, eof = 0;
    double step_s = 0;
    for (;;) { /* until the job exits or is killed */
        struct pollfd p = {efd[0], POLLIN, 0};
        if (!eof && poll(&p, 1, 100) > 0) {
            char buf[4096];
            ssize_t k = read(efd[0], buf, sizeof buf);
            if (k <= 0) {
                eof = 1;
            } else {
                fwrite(buf, 1, (size_t)k, stderr); /* the job's messages pass through */
                if (nerr + (size_t)k >= sizeof err) { /* keep the tail */
                    const size_t drop = nerr + (size_t)k - sizeof err + 1;
                    memmove(err, err + drop, nerr - (drop < nerr ? drop : nerr));
                    nerr -= drop < nerr ? drop : nerr;
                }
                memcpy(err + nerr, buf, (size_t)k < sizeof err - 1 - nerr ? (size_t)k : sizeof err - 1 - nerr);
                nerr += (size_t)k < sizeof err - 1 - nerr ? (size_t)k : sizeof err - 1 - nerr;
                err[nerr] = 0;
            }
        } else if (eof) {
            usleep(100000);
        }
        if (waitpid(pid, &status, WNOHANG) == pid) {
            break;
        }
        const double t = now_s();
        heartbeat h2;
        if (read_heartbeat(hbpath, &h2) && h2.time > hb.time) {
            hb = h2;
            last_hb = t;
            je->last_step = hb.step;
            if (hb.step_s > 0) step_s = hb.step_s;
            if (!first_hb && hb.step > resume_step) {
                first_hb = 1;
                first_step_event(L, restart, &hb, resume_step, t_start, t_fail);
            }
        }
        /* a preemption of the launcher: the job checkpoints and stops */
        if (g_signal && !sig_at) {
            sig_at = t;
            say(L, "signal %d: asking the job to checkpoint and stop (grace %g s)", (int)g_signal, L->preempt_grace);
            kill(pid, SIGUSR1);
            event(L, "preempt", NULL);
        }
        if (sig_at && t - sig_at > L->preempt_grace) {
            say(L, "the job did not stop within --preempt-grace %g s: killing it", L->preempt_grace);
            status = kill_job(pid, 2.0);
            break;
        }
        if (asked && t - ask_at > L->preempt_grace) {
            say(L, "the job did not stop within %g s of the resize request: killing it", L->preempt_grace);
            status = kill_job(pid, 2.0);
            break;
        }
        /* a hang: no heartbeat for too long */
        const double limit = !first_hb && hb.time == 0 ? L->start_timeout
                             : L->hang_timeout > 0     ? L->hang_timeout
                                                       : fmax(60.0, 20.0 * step_s);
        if (!sig_at && !asked && t - last_hb > limit) {
            je->kind = END_HANG;
            snprintf(je->detail, sizeof je->detail, "no heartbeat from rank 0 for %.1f s (limit %g s; last step %ld)",
                     t - last_hb, limit, je->last_step);
            say(L, "hung: %s: killing the group", je->detail);
            status = kill_job(pid, 5.0);
            je->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            je->t_end = t;
            je->t_failure = last_hb;
            close(efd[0]);
            return 0;
        }
        /* the hosts changed: checkpoint, stop, restart on the new size */
        if (L->discover && !sig_at && !asked && t - last_disc >= L->discover_every) {
            last_disc = t;
            dd_launch_hosts all, use;
            char why[512];
            if (current_hosts(L, &all, why, sizeof why) == 0) {
                const int n2 = usable(L, &all, &use);
                if (n2 != N && (n2 > 0 || L->np_min > 0)) {
                    asked = 1;
                    ask_at = t;
                    je->new_world = n2;
                    say(L, "hosts changed: %ld slots now allow %d ranks (running on %d): checkpoint and restart",
                        dd_launch_hosts_slots(&all), n2, N);
                    cJSON *o = cJSON_CreateObject();
                    cJSON_AddNumberToObject(o, "slots", (double)dd_launch_hosts_slots(&all));
                    cJSON_AddNumberToObject(o, "world_size", n2);
                    event(L, "hosts_changed", o);
                    kill(pid, SIGUSR1);
                }
                dd_launch_hosts_free(&use);
                dd_launch_hosts_free(&all);
            } else {
                say(L, "%s (keeping the current hosts)", why);
            }
        }
    }
    /* the rest of the job's messages */
    for (;;) {
        char buf[4096];
        struct pollfd p = {efd[0], POLLIN, 0};
        if (eof || poll(&p, 1, 200) <= 0) break;
        ssize_t k = read(efd[0], buf, sizeof buf);
        if (k <= 0) break;
        fwrite(buf, 1, (size_t)k, stderr);
        if (nerr + (size_t)k < sizeof err) {
            memcpy(err + nerr, buf, (size_t)k);
            nerr += (size_t)k;
            err[nerr] = 0;
        }
    }
    close(efd[0]);
    kill(-pid, SIGKILL); /* nothing of the group outlives it */
    je->t_end = now_s();
    /* mpirun notices a dead rank seconds later (Open MPI: about 2 s here): the failure
     * happened after the last heartbeat, within its 0.2 s period and a step */
    je->t_failure = first_hb || hb.time > 0 ? last_hb : je->t_end;
    je->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    heartbeat h2;
    if (read_heartbeat(hbpath, &h2) && h2.time >= hb.time) {
        je->last_step = h2.step;
        /* a start that ended between two polls of its heartbeat */
        if (!first_hb && h2.step > resume_step) first_step_event(L, restart, &h2, resume_step, t_start, t_fail);
    }
    if (je->rc == 0) je->kind = END_DONE;
    else if (sig_at) je->kind = END_SIGNALLED;
    else if (asked && je->rc == 75) je->kind = END_RESIZE;
    else if (je->rc == 75) je->kind = END_PREEMPTED;
    else if (je->rc == 2 && !first_hb) je->kind = END_USAGE;
    else if (je->rc == 127 && !first_hb) { /* mpirun (or distdpd on a host) not found */
        je->kind = END_USAGE;
        snprintf(je->detail, sizeof je->detail, "'%s' could not be run (exit status 127)", L->mpirun);
    }
    else je->kind = END_FAILED;
    if (je->kind == END_FAILED) {
        dd_launch_failed_host(err, je->host, sizeof je->host);
        snprintf(je->detail, sizeof je->detail, "mpirun exit status %d%s%s", je->rc, je->host[0] ? ", on host " : "",
                 je->host);
    }
    return 0;
}

/* Makes RUN/last.ckpt the chosen checkpoint (a step file when last.ckpt is corrupt or
 * older): the corrupt one is kept aside as last.ckpt.bad-TIME, never deleted. */
static int adopt_checkpoint(launcher *L, const char *chosen, char *why, size_t whylen) {
    char last[PATH_MAX], tmp[PATH_MAX + 16], bad[PATH_MAX + 32];
    snprintf(last, sizeof last, "%s/last.ckpt", L->run);
    if (strcmp(chosen, last) == 0) return 0;
    struct stat sb;
    if (stat(last, &sb) == 0 && dd_ckpt_verify(last) != DD_OK) {
        snprintf(bad, sizeof bad, "%s.bad-%ld", last, (long)time(NULL));
        if (rename(last, bad) != 0) {
            snprintf(why, whylen, "cannot move the invalid %s aside: %s", last, strerror(errno));
            return -1;
        }
        say(L, "%s does not verify: kept as %s", last, bad);
    }
    snprintf(tmp, sizeof tmp, "%s.launch-tmp", last);
    unlink(tmp);
    if (link(chosen, tmp) != 0 || rename(tmp, last) != 0) {
        snprintf(why, whylen, "cannot make %s the run's last.ckpt: %s", chosen, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* A run directory with a run's files but no checkpoint that verifies (a start killed
 * before its first checkpoint): the launcher made it, so its files move to
 * RUN/launch/attempt-K/ and the job starts afresh. 1 moved, 0 nothing to move, -1 error. */
static int set_aside(launcher *L, int restart, char *why, size_t whylen) {
    static const char *const files[] = {"config.json", "metrics.jsonl", "history.csv", "best.ckpt",
                                        "last.ckpt",   "dp_steps.csv",  "parallel.json", "report.html", NULL};
    char dir[PATH_MAX], src[PATH_MAX], dst[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/launch/attempt-%ld-%d", L->run, (long)time(NULL), restart);
    int moved = 0;
    for (int k = 0; files[k]; k++) {
        snprintf(src, sizeof src, "%s/%s", L->run, files[k]);
        struct stat sb;
        if (stat(src, &sb) != 0) continue;
        if (!moved && dd_cli_mkdirs(dir) != DD_OK) {
            snprintf(why, whylen, "%s", dd_last_error());
            return -1;
        }
        snprintf(dst, sizeof dst, "%s/%s", dir, files[k]);
        if (rename(src, dst) != 0) {
            snprintf(why, whylen, "cannot move %s to %s: %s", src, dst, strerror(errno));
            return -1;
        }
        moved = 1;
    }
    if (moved) say(L, "%s has no checkpoint yet: its files are kept in %s, starting afresh", L->run, dir);
    return moved;
}

/* linear-lr: the world size N0 and global batch B0 the run's learning rate was chosen
 * for, kept in RUN/launch/rescale.json from the first time they are needed: N0 the world
 * size of the start that began the run (this launcher's first start when it found the
 * run begun), B0 the batch of config.json then. 0, or -1 with the reason. */
static int rescale_base(launcher *L, int N, long *b0, char *why, size_t whylen) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/launch/rescale.json", L->run);
    char *txt = NULL;
    if (dd_read_text(path, &txt, NULL) == DD_OK) {
        cJSON *o = cJSON_Parse(txt);
        free(txt);
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "world_size"), *b = cJSON_GetObjectItemCaseSensitive(o, "batch");
        const int ok = cJSON_IsNumber(n) && cJSON_IsNumber(b) && n->valuedouble >= 1 && b->valuedouble >= 1;
        if (ok) {
            L->n0 = (int)n->valuedouble;
            *b0 = (long)b->valuedouble;
        }
        cJSON_Delete(o);
        if (ok) return 0;
        snprintf(why, whylen, "%s: expected {\"world_size\": N, \"batch\": B} with N, B >= 1", path);
        return -1;
    }
    dd_error_clear();
    char cpath[PATH_MAX];
    snprintf(cpath, sizeof cpath, "%s/config.json", L->run);
    if (dd_read_text(cpath, &txt, NULL) != DD_OK) {
        snprintf(why, whylen, "--rescale linear-lr: %s", dd_last_error());
        return -1;
    }
    cJSON *o = cJSON_Parse(txt);
    free(txt);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "config");
    const cJSON *b = c ? cJSON_GetObjectItemCaseSensitive(c, "batch") : NULL;
    if (!cJSON_IsNumber(b) || b->valuedouble < 1) {
        cJSON_Delete(o);
        snprintf(why, whylen, "--rescale linear-lr: %s has no config.batch", cpath);
        return -1;
    }
    *b0 = (long)b->valuedouble;
    cJSON_Delete(o);
    if (L->n0 < 1) L->n0 = N;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "world_size", L->n0);
    cJSON_AddNumberToObject(r, "batch", (double)*b0);
    if (dd_cli_write_json(path, r) != DD_OK) {
        snprintf(why, whylen, "%s", dd_last_error());
        return -1;
    }
    return 0;
}

/* Sleeps s seconds unless a signal comes. */
static void nap(double s) {
    const double t0 = now_s();
    while (!g_signal && now_s() - t0 < s) usleep(50000);
}

static int parse_np(const char *v, int *lo, int *hi) {
    char *e;
    errno = 0;
    long a = strtol(v, &e, 10), b = a;
    if (e == v || errno) return -1;
    if (*e == ':') {
        const char *f = e + 1;
        b = strtol(f, &e, 10);
        if (e == f || errno) return -1;
    }
    if (*e || a < 1 || b < a || b > 1048576) return -1;
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

int dd_cmd_launch(int argc, char **argv) {
    enum {
        O_NP = 256, O_HOSTFILE, O_DISCOVER, O_DEVERY, O_DTIMEOUT, O_MINWAIT, O_MAXR, O_BACKOFF, O_COOLDOWN, O_HANG,
        O_START, O_GRACE, O_MPIRUN, O_MPIARG, O_RESCALE, O_RSWARMUP
    };
    static const struct option longopts[] = {
        {"np", required_argument, NULL, O_NP},
        {"hostfile", required_argument, NULL, O_HOSTFILE},
        {"discover", required_argument, NULL, O_DISCOVER},
        {"discover-every", required_argument, NULL, O_DEVERY},
        {"discover-timeout", required_argument, NULL, O_DTIMEOUT},
        {"min-wait", required_argument, NULL, O_MINWAIT},
        {"max-restarts", required_argument, NULL, O_MAXR},
        {"backoff", required_argument, NULL, O_BACKOFF},
        {"cooldown", required_argument, NULL, O_COOLDOWN},
        {"hang-timeout", required_argument, NULL, O_HANG},
        {"start-timeout", required_argument, NULL, O_START},
        {"preempt-grace", required_argument, NULL, O_GRACE},
        {"mpirun", required_argument, NULL, O_MPIRUN},
        {"mpi-arg", required_argument, NULL, O_MPIARG},
        {"rescale", required_argument, NULL, O_RESCALE},
        {"rescale-warmup", required_argument, NULL, O_RSWARMUP},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    launcher L;
    memset(&L, 0, sizeof L);
    L.discover_every = 5;
    L.discover_timeout = 30;
    L.min_wait = 600;
    L.max_restarts = 3;
    L.backoff = 1;
    L.cooldown = 300;
    L.start_timeout = 600;
    L.preempt_grace = 30;
    L.rescale_warmup = 50;
    const char *mpirun_env = getenv("DISTDPD_MPIRUN"); /* once: each getenv may give another pointer */
    L.mpirun = mpirun_env && *mpirun_env ? mpirun_env : "mpirun";
    /* the launcher's options end at "--"; the training command follows */
    int split = argc;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            split = i;
            break;
        }
    int c, rc;
    double x;
    size_t v;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(split, argv, ":qh", longopts, NULL)) != -1) {
        switch (c) {
        case O_NP:
            if (parse_np(optarg, &L.np_min, &L.np_max) != 0)
                return dd_cli_usage(NAME, "--np: expected N or MIN:MAX with 1 <= MIN <= MAX, got '%s'", optarg);
            L.np_given = 1;
            break;
        case O_HOSTFILE: L.hostfile = optarg; break;
        case O_DISCOVER: L.discover = optarg; break;
#define SECONDS(CASE, NM, LO, DST)                                                          \
    case CASE:                                                                             \
        if ((rc = dd_cli_parse_double(NAME, NM, optarg, LO, 1e7, &x))) return rc;          \
        (DST) = x;                                                                         \
        break;
            SECONDS(O_DEVERY, "--discover-every", 0.1, L.discover_every)
            SECONDS(O_DTIMEOUT, "--discover-timeout", 0.1, L.discover_timeout)
            SECONDS(O_MINWAIT, "--min-wait", 0, L.min_wait)
            SECONDS(O_BACKOFF, "--backoff", 0, L.backoff)
            SECONDS(O_COOLDOWN, "--cooldown", 0, L.cooldown)
            SECONDS(O_HANG, "--hang-timeout", 0.1, L.hang_timeout)
            SECONDS(O_START, "--start-timeout", 0.1, L.start_timeout)
            SECONDS(O_GRACE, "--preempt-grace", 0.1, L.preempt_grace)
#undef SECONDS
        case O_MAXR:
            if ((rc = dd_cli_parse_size(NAME, "--max-restarts", optarg, 0, 1000000, &v))) return rc;
            L.max_restarts = (int)v;
            break;
        case O_RESCALE: {
            static const char *const choices[] = {"keep-global-batch", "linear-lr", NULL};
            if ((rc = dd_cli_parse_choice(NAME, "--rescale", optarg, choices, &L.linear_lr))) return rc;
            break;
        }
        case O_RSWARMUP:
            if ((rc = dd_cli_parse_size(NAME, "--rescale-warmup", optarg, 0, 100000000, &v))) return rc;
            L.rescale_warmup = (long)v;
            break;
        case O_MPIRUN: L.mpirun = optarg; break;
        case O_MPIARG:
            if (L.nmpi == 64) return dd_cli_usage(NAME, "--mpi-arg: more than 64");
            L.mpi_args[L.nmpi++] = optarg;
            break;
        case 'q': L.quiet = 1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < split) return dd_cli_usage(NAME, "unexpected argument '%s' (the training command follows '--')", argv[optind]);
    if (split >= argc - 1)
        return dd_cli_usage(NAME, "no training command: distdpd launch [options] -- train-pa|train-dpd ARGS");
    L.targv = argv + split + 1;
    L.targc = argc - split - 1;
    if (strcmp(L.targv[0], "train-pa") != 0 && strcmp(L.targv[0], "train-dpd") != 0)
        return dd_cli_usage(NAME, "the training command must be train-pa or train-dpd, got '%s'", L.targv[0]);
    if (L.hostfile && L.discover) return dd_cli_usage(NAME, "--hostfile and --discover exclude each other");
    if (!L.np_given && !L.hostfile && !L.discover)
        return dd_cli_usage(NAME, "--np N (or --hostfile / --discover to take the slots from)");
    if (!L.np_given) {
        L.np_min = 1;
        L.np_max = 1048576;
    }
    const char *out = dd_launch_arg_value(L.targc, L.targv, "out");
    const char *res = dd_launch_arg_value(L.targc, L.targv, "resume");
    L.run = res ? res : out;
    if (!L.run) return dd_cli_usage(NAME, "the training command needs --out RUN (or --resume RUN)");
    L.multiple = 1;
    for (int k = 0; k < 2; k++) {
        const char *s = dd_launch_arg_value(L.targc, L.targv, k ? "pp" : "tp");
        if (s && atoi(s) > 0) L.multiple *= atoi(s);
    }
    if (L.linear_lr && L.multiple > 1)
        return dd_cli_usage(NAME, "--rescale linear-lr does not apply to a --tp/--pp job (its pipeline buffers are "
                                  "sized for the batch at its start); keep-global-batch does");
    if (L.np_given && L.np_max < L.multiple)
        return dd_cli_usage(NAME, "--np %d is fewer ranks than one replica of --tp x --pp (%d)", L.np_max, L.multiple);
    ssize_t sl = readlink("/proc/self/exe", L.self, sizeof L.self - 1);
    if (sl <= 0) snprintf(L.self, sizeof L.self, "%s", "distdpd");
    else L.self[sl] = 0;

    /* the launcher's own files: RUN/launch/ (lock, heartbeat, hosts), RUN/launch.jsonl */
    char path[PATH_MAX + 64];
    struct stat psb;
    snprintf(path, sizeof path, "%s/launch.jsonl", L.run);
    const int prior = stat(path, &psb) == 0; /* a launcher has supervised this run before */
    {
        /* a run made without a launcher that has files but no checkpoint to go on from:
         * neither resumable nor the launcher's to set aside */
        char ck[PATH_MAX], mark[PATH_MAX + 32];
        uint64_t s0 = 0;
        int found = 0;
        snprintf(mark, sizeof mark, "%s/config.json", L.run);
        dd_launch_pick_checkpoint(L.run, ck, sizeof ck, &s0, &found, NULL);
        if (!prior && !found && stat(mark, &psb) == 0) {
            fprintf(stderr,
                    "distdpd launch: error: %s holds a run (config.json) without a checkpoint that verifies, and no "
                    "launcher started it: remove the directory or choose another --out\n",
                    L.run);
            return DD_EXIT_RUNTIME;
        }
    }
    snprintf(path, sizeof path, "%s/launch", L.run);
    dd_status st = dd_cli_mkdirs(path);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    /* the heartbeat and hostfile paths the job gets are absolute (ranks on other hosts) */
    static char run_abs[PATH_MAX];
    if (realpath(L.run, run_abs)) L.run = run_abs;
    snprintf(path, sizeof path, "%s/launch/lock", L.run);
    int lfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "distdpd launch: error: %s: %s\n", path,
                lfd < 0 ? strerror(errno) : "another launcher supervises this run");
        if (lfd >= 0) close(lfd);
        return DD_EXIT_RUNTIME;
    }
    snprintf(path, sizeof path, "%s/launch.jsonl", L.run);
    L.log = fopen(path, "a");
    if (!L.log) {
        fprintf(stderr, "distdpd launch: error: %s: cannot open: %s\n", path, strerror(errno));
        close(lfd);
        return DD_EXIT_RUNTIME;
    }
    {
        char *vout = NULL, why[256];
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof cmd, "'%s' --version 2>&1", L.mpirun);
        if (run_capture(cmd, 30, &vout, why, sizeof why) == 0 && vout)
            L.openmpi = strstr(vout, "Open MPI") || strstr(vout, "OpenRTE") || strstr(vout, "open-mpi");
        else L.openmpi = 1; /* the error shows at the first start */
        free(vout);
    }
    struct sigaction hup_old;
    const int hup = sigaction(SIGHUP, NULL, &hup_old) == 0 && hup_old.sa_handler != SIG_IGN;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (hup) sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    {
        cJSON *o = cJSON_CreateObject();
        cJSON *a = cJSON_AddArrayToObject(o, "argv");
        for (int i = 0; i < argc; i++) cJSON_AddItemToArray(a, cJSON_CreateString(argv[i]));
        cJSON_AddNumberToObject(o, "np_min", L.np_min);
        cJSON_AddNumberToObject(o, "np_max", L.np_max);
        cJSON_AddNumberToObject(o, "max_restarts", L.max_restarts);
        cJSON_AddNumberToObject(o, "pid", getpid());
        event(&L, "launch", o);
    }

    int ret = DD_EXIT_RUNTIME, restarts = 0, fails_in_row = 0;
    long prev_step = -1; /* the step the previous start had reached */
    double t_fail = 0;
    char why[3 * PATH_MAX + 256];
    for (;;) {
        /* the hosts, waiting below MIN */
        dd_launch_hosts all, use;
        int N = 0;
        const double wait0 = now_s();
        int waited = 0;
        for (;;) {
            if (current_hosts(&L, &all, why, sizeof why) == 0) {
                N = usable(&L, &all, &use);
                if (N > 0) break;
                snprintf(why, sizeof why, "%ld slots allow no world size in [%d, %d] (multiple of %d)",
                         dd_launch_hosts_slots(&all), L.np_min, L.np_max, L.multiple);
                dd_launch_hosts_free(&use);
                dd_launch_hosts_free(&all);
                if (!L.discover) break; /* a hostfile does not change */
            } else if (!L.discover) {
                break;
            }
            if (g_signal || now_s() - wait0 >= L.min_wait) break;
            if (!waited) {
                say(&L, "waiting up to %g s for hosts: %s", L.min_wait, why);
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "reason", why);
                event(&L, "wait", o);
                waited = 1;
            }
            nap(fmin(L.discover_every, L.min_wait - (now_s() - wait0)));
        }
        if (N <= 0) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "reason", why);
            event(&L, g_signal ? "preempted" : "gave_up", o);
            if (g_signal) {
                say(&L, "signal while waiting for hosts: stopping (%s holds the state)", L.run);
                ret = DD_EXIT_PREEMPTED;
            } else {
                fprintf(stderr, "distdpd launch: error: no hosts to run on%s: %s\n",
                        waited ? " after waiting --min-wait" : "", why);
                ret = DD_EXIT_RUNTIME;
            }
            break;
        }
        dd_launch_hosts_free(&all);
        /* the checkpoint to go on from */
        char ck[PATH_MAX];
        uint64_t step = 0;
        int found = 0, rejected = 0;
        dd_launch_pick_checkpoint(L.run, ck, sizeof ck, &step, &found, &rejected);
        char **tcmd = NULL;
        int tn = 0;
        if (found) {
            if (adopt_checkpoint(&L, ck, why, sizeof why) != 0) {
                fprintf(stderr, "distdpd launch: error: %s\n", why);
                dd_launch_hosts_free(&use);
                break;
            }
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "checkpoint", ck);
            cJSON_AddNumberToObject(o, "step", (double)step);
            cJSON_AddNumberToObject(o, "rejected", rejected);
            if (prev_step >= (long)step) cJSON_AddNumberToObject(o, "steps_redone", (double)(prev_step - (long)step));
            event(&L, "checkpoint", o);
            if (rejected) say(&L, "%d checkpoint(s) did not verify; resuming from %s (step %llu)", rejected, ck,
                              (unsigned long long)step);
            char bs[32], ws[32];
            char *extra[4] = {"--rescale-batch", bs, "--rescale-warmup", ws};
            int nextra = 0;
            if (L.linear_lr) {
                long b0 = 0;
                if (rescale_base(&L, N, &b0, why, sizeof why) != 0) {
                    fprintf(stderr, "distdpd launch: error: %s\n", why);
                    dd_launch_hosts_free(&use);
                    break;
                }
                long nb = lround((double)b0 * (double)N / (double)L.n0);
                if (nb < 1) nb = 1;
                snprintf(bs, sizeof bs, "%ld", nb);
                snprintf(ws, sizeof ws, "%ld", L.rescale_warmup);
                nextra = 4;
                cJSON *ro = cJSON_CreateObject();
                cJSON_AddNumberToObject(ro, "world_size", N);
                cJSON_AddNumberToObject(ro, "base_world_size", L.n0);
                cJSON_AddNumberToObject(ro, "base_batch", (double)b0);
                cJSON_AddNumberToObject(ro, "batch", (double)nb);
                event(&L, "rescale", ro);
            }
            st = dd_launch_resume_argv(L.targc, L.targv, extra, nextra, &tcmd, &tn);
        } else {
            /* a start of this launcher's (or an earlier one's) killed before its first
             * checkpoint: the files it left are set aside; a run made otherwise is left
             * to the trainer's refusal */
            if ((restarts > 0 || prior) && set_aside(&L, restarts, why, sizeof why) < 0) {
                fprintf(stderr, "distdpd launch: error: %s\n", why);
                dd_launch_hosts_free(&use);
                break;
            }
            L.n0 = N; /* a fresh start: its batch is the base of linear-lr */
            tcmd = calloc((size_t)L.targc + 1, sizeof *tcmd);
            if (tcmd) memcpy(tcmd, L.targv, (size_t)L.targc * sizeof *tcmd);
            st = tcmd ? DD_OK : DD_ERR_NOMEM;
        }
        if (st != DD_OK) {
            dd_launch_hosts_free(&use);
            ret = dd_cli_fail(NAME, st);
            break;
        }
        job_end je;
        const int r = run_job(&L, tcmd, N, &use, restarts, t_fail, found ? (long)step : -1, &je);
        free(tcmd);
        dd_launch_hosts_free(&use);
        if (r != 0) {
            fprintf(stderr, "distdpd launch: error: %s\n", je.detail);
            break;
        }
        {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "cause", end_names[je.kind]);
            cJSON_AddNumberToObject(o, "rc", je.rc);
            cJSON_AddNumberToObject(o, "world_size", N);
            cJSON_AddNumberToObject(o, "last_step", (double)je.last_step);
            if (je.host[0]) cJSON_AddStringToObject(o, "host", je.host);
            if (je.detail[0]) cJSON_AddStringToObject(o, "detail", je.detail);
            event(&L, "exit", o);
        }
        prev_step = je.last_step;
        if (je.kind == END_DONE) {
            say(&L, "the job completed after %d restart(s)", restarts);
            event(&L, "done", NULL);
            ret = DD_EXIT_OK;
            break;
        }
        if (je.kind == END_SIGNALLED) {
            say(&L, "preempted: %s (the same command continues the run)",
                je.rc == 75 ? "the job wrote its checkpoint and stopped" : "the job was killed; the newest checkpoint holds the state");
            ret = DD_EXIT_PREEMPTED;
            break;
        }
        if (je.kind == END_USAGE) {
            fprintf(stderr, "distdpd launch: error: %s: not restarting\n",
                    je.detail[0] ? je.detail : "the training command was refused (usage error, exit status 2)");
            ret = DD_EXIT_USAGE;
            break;
        }
        if (restarts >= L.max_restarts) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "restarts", restarts);
            event(&L, "gave_up", o);
            fprintf(stderr, "distdpd launch: error: giving up after %d restart(s) (--max-restarts %d): the last start "
                            "ended: %s%s%s\n",
                    restarts, L.max_restarts, end_names[je.kind], je.detail[0] ? ": " : "", je.detail);
            ret = DD_EXIT_RUNTIME;
            break;
        }
        restarts++;
        if (je.kind == END_FAILED || je.kind == END_HANG) {
            fails_in_row++;
            t_fail = je.t_failure;
            if (je.host[0] && strcmp(je.host, "localhost") != 0) exclude(&L, je.host);
            double b = L.backoff * pow(2.0, fails_in_row - 1);
            if (b > 60) b = 60;
            say(&L, "%s: restart %d of %d in %g s", je.detail, restarts, L.max_restarts, b);
            nap(b);
        } else { /* a resize or a preemption of the job from outside: not a failure */
            fails_in_row = 0;
            t_fail = je.t_end;
            say(&L, "%s: restart %d of %d", je.kind == END_RESIZE ? "resize" : "the job was preempted (exit 75)", restarts,
                L.max_restarts);
        }
        if (g_signal) {
            event(&L, "preempted", NULL);
            ret = DD_EXIT_PREEMPTED;
            break;
        }
    }
    fclose(L.log);
    close(lfd);
    return ret;
}
