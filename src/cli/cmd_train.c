/* The training commands of distdpd (a fixed interface that other tools call):
 *   train-pa   train a PA behavioural model into a run directory
 *   train-dpd  train a DPD through a PA run's model (direct learning, or --ila)
 *   run        run the best model of a run over an I/Q file as one continuous stream
 *   eval       re-evaluate a run on a data set
 * Option parsing, the progress display (a bar on a terminal, plain lines otherwise) and
 * the summaries live here; the work is done by the library (train.h).
 *
 * Under mpirun / srun (N > 1 processes) train-pa and train-dpd train data-parallel
 * (parallel.h): --batch is the global batch, every rank takes its slice, gradients are
 * averaged with --allreduce in buckets of --bucket-mb. Only rank 0 prints and writes
 * (the run directory, RUN/dp_steps.csv with the per-step communication times,
 * RUN/parallel.json); an error on any rank is printed with its rank and aborts all ranks
 * (MPI_Abort), so a failing run never hangs. Rank 0 holds the run directory's lock
 * (train.h dd_run_lock_acquire) from before training until its last file is written. See
 * docs/parallel.md. */
#include <complex.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <mpi.h>

#include "cli.h"
#include "cmd_train.h"
#include "distdpd/comm.h"
#include "distdpd/dataset.h"
#include "distdpd/model.h"
#include "distdpd/nn.h"
#include "distdpd/parallel.h"
#include "distdpd/train.h"
#include "rf.h"

/* ================================================================ interruption */

/* SIGINT / SIGTERM / SIGHUP / SIGUSR1 during training: finish the step, write last.ckpt, exit
 * 75 (DD_EXIT_PREEMPTED) with a message saying how to resume. A second signal kills the process as usual. SIGHUP
 * is left alone when it is ignored at start (nohup). */
static volatile int stop_flag;
static void on_signal(int sig) {
    stop_flag = 1;
    signal(sig, SIG_DFL);
}

/* ================================================================ progress */

typedef struct {
    int mode;          /* 0 none, 1 lines, 2 bar */
    double last;       /* time of the last bar update */
    int bar_shown;     /* a bar line is on the terminal */
    int is_dpd;
    /* parallel runs (NULL / unused on one process) */
    const dd_strategy_run *run; /* the strategy */
    int described;     /* its layout was printed */
    int root;          /* this process writes (rank 0) */
    const char *out;   /* run directory */
    FILE *steps;       /* RUN/dp_steps.csv, opened at the first step (rank 0) */
    int steps_failed;  /* could not open it (reported once) */
    double prev_elapsed; /* epoch_elapsed at the previous step */
    uint64_t ep_steps; /* steps of this epoch seen here */
    int seen;          /* a step of this epoch was seen (prev_elapsed is valid) */
    double ep_comm, ep_exposed, ep_step; /* their sums */
} progress_state;

/* Before dp_steps.csv is appended to: drops the rows of steps at or after (epoch, batch),
 * the first step of this process, and a partial last line. Such rows come from an
 * earlier process of the run that went on after its last checkpoint and was killed; the
 * resumed run re-runs those steps, so the file keeps one row per step. */
static void steps_truncate(const char *path, int epoch, uint64_t batch) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char line[512];
    long keep = 0;
    int first = 1;
    while (fgets(line, sizeof line, f)) {
        long next = ftell(f);
        size_t l = strlen(line);
        if (l == 0 || line[l - 1] != '\n') break; /* partial (or overlong) line */
        if (first) {
            if (strncmp(line, "epoch,", 6) != 0) break;
            first = 0;
        } else {
            int e = 0;
            unsigned long long b = 0;
            if (sscanf(line, "%d,%llu,", &e, &b) != 2) break;
            if (e > epoch || (e == epoch && b >= batch)) break;
        }
        keep = next;
    }
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    if (size > keep && truncate(path, (off_t)keep) != 0)
        fprintf(stderr, "distdpd: warning: cannot drop the rows of re-run steps from %s: %s\n", path, strerror(errno));
}

/* One line per step of a data-parallel run into RUN/dp_steps.csv (rank 0): the step's
 * wall time, the time in communication calls, the part not hidden by backward (the wait
 * after it), the part hidden, and the previous step's exposed time averaged over ranks. */
static void dp_step_line(progress_state *s, const dd_train_progress *p) {
    dd_strategy_step_times st = {NAN, NAN, NAN, NAN};
    if (s->run->def->last_step) s->run->def->last_step(s->run->self, &st);
    /* the first step after a resume in the middle of an epoch has no previous time here */
    double step_s = p->batch == 1 ? p->epoch_elapsed : s->seen ? p->epoch_elapsed - s->prev_elapsed : NAN;
    s->prev_elapsed = p->epoch_elapsed;
    s->seen = 1;
    if (!isnan(step_s)) {
        s->ep_steps++;
        s->ep_comm += st.comm_s;
        s->ep_exposed += st.exposed_s;
        s->ep_step += step_s;
    }
    if (!s->root || s->steps_failed) return;
    if (!s->steps) {
        char path[4200];
        snprintf(path, sizeof path, "%s/dp_steps.csv", s->out);
        steps_truncate(path, p->epoch, p->batch);
        struct stat sb;
        int fresh = stat(path, &sb) != 0 || sb.st_size == 0;
        s->steps = fopen(path, "a");
        if (!s->steps) {
            s->steps_failed = 1;
            fprintf(stderr, "distdpd: warning: cannot write %s; per-step times are not recorded\n", path);
            return;
        }
        if (fresh) fprintf(s->steps, "epoch,batch,step_s,comm_s,exposed_s,hidden_s,prev_exposed_mean_s\n");
    }
    fprintf(s->steps, "%d,%llu,%.6e,%.6e,%.6e,%.6e,%.6e\n", p->epoch, (unsigned long long)p->batch, step_s,
            st.comm_s, st.exposed_s, st.hidden_s, st.prev_exposed_mean_s);
}

/* The strategy's before_save hook, preceded by a flush of dp_steps.csv: whenever a
 * checkpoint is written, the rows of every step it holds are in the file (a kill -9
 * afterwards loses none; the rows after it are dropped on resume, steps_truncate). */
static progress_state *steps_state;
static dd_status (*strategy_before_save)(void *self, dd_trainer *tr);
static dd_strategy_ops flush_ops; /* the strategy with the flush before saving */
static dd_status flush_then_before_save(void *self, dd_trainer *tr) {
    if (steps_state && steps_state->steps) fflush(steps_state->steps);
    return strategy_before_save ? strategy_before_save(self, tr) : DD_OK;
}

static void print_epoch_line(FILE *f, const dd_epoch_record *r, int epochs, int is_dpd) {
    char a[32], b[32], c[32];
    fprintf(f, "epoch %3d/%d  loss %.4e  val NMSE %s dB  test NMSE %s dB  %s ACLR %s dBc", r->epoch, epochs,
            r->train_loss, dd_cli_fmt(a, sizeof a, r->val.nmse_db, 2), dd_cli_fmt(b, sizeof b, r->test.nmse_db, 2),
            is_dpd ? "val" : "test", dd_cli_fmt(c, sizeof c, is_dpd ? r->val.aclr.avg_db : r->test.aclr.avg_db, 2));
    if (r->has_no_dpd) fprintf(f, " (no DPD %s)", dd_cli_fmt(a, sizeof a, r->no_dpd_val.aclr.avg_db, 2));
    if (r->has_true) fprintf(f, "  true PA ACLR %s dBc", dd_cli_fmt(a, sizeof a, r->true_test.aclr.avg_db, 2));
    fprintf(f, "  %.2f s + %.2f s eval  lr %.3g%s\n", r->time_s, r->eval_time_s, r->lr, r->best ? "  *best*" : "");
}

/* The baseline of a DPD result: the same PA model without the DPD, and what the DPD
 * gains (dB, positive = better). */
static void print_no_dpd_line(FILE *f, const char *lead, const dd_eval_metrics *no, const dd_eval_metrics *with) {
    char a[32], b[32], c[32], d[32], e[32], g[32];
    fprintf(f,
            "%sthe PA model without the DPD: test NMSE %s dB, ACLR %s dBc, EVM %s dB; the DPD improves NMSE by %s dB, "
            "ACLR by %s dB, EVM by %s dB\n",
            lead, dd_cli_fmt(a, sizeof a, no->nmse_db, 2), dd_cli_fmt(b, sizeof b, no->aclr.avg_db, 2),
            dd_cli_fmt(c, sizeof c, no->evm_db, 2), dd_cli_fmt(d, sizeof d, no->nmse_db - with->nmse_db, 2),
            dd_cli_fmt(e, sizeof e, no->aclr.avg_db - with->aclr.avg_db, 2), dd_cli_fmt(g, sizeof g, no->evm_db - with->evm_db, 2));
}

static void on_progress(void *user, const dd_train_progress *p) {
    progress_state *s = user;
    if (s->run && !s->described) { /* the layout, once the trainer is set up (rank 0) */
        s->described = 1;
        if (s->root && s->mode && s->run->def->describe) {
            s->run->def->describe(s->run->self, stderr);
            fflush(stderr);
        }
    }
    if (s->run && p->phase == 0) dp_step_line(s, p);
    if (s->run && p->phase == 2) {
        if (s->steps) fflush(s->steps);
        if (s->mode && p->rec && s->ep_steps) {
            if (s->bar_shown) fprintf(stderr, "\r\033[K");
            s->bar_shown = 0;
            print_epoch_line(stderr, p->rec, p->epochs, s->is_dpd);
            double n = (double)s->ep_steps;
            fprintf(stderr, "           %d ranks: step %.3f ms, communication %.3f ms/step, not hidden %.3f ms/step "
                            "(%.1f %% of the step)\n",
                    s->run->st.nranks, 1e3 * s->ep_step / n, 1e3 * s->ep_comm / n, 1e3 * s->ep_exposed / n,
                    s->ep_step > 0 ? 100.0 * s->ep_exposed / s->ep_step : 0.0);
            if (s->run->def->print_epoch) s->run->def->print_epoch(s->run->self, p->rec, s->ep_steps, stderr);
            fflush(stderr);
        }
        s->ep_steps = 0;
        s->seen = 0;
        s->ep_comm = s->ep_exposed = s->ep_step = 0;
        return;
    }
    if (s->mode == 0) return;
    if (p->phase == 2 && p->rec) {
        if (s->bar_shown) fprintf(stderr, "\r\033[K");
        s->bar_shown = 0;
        print_epoch_line(stderr, p->rec, p->epochs, s->is_dpd);
        fflush(stderr);
        return;
    }
    if (s->mode != 2) return;
    double now = dd_now();
    if (p->phase == 0 && now - s->last < 0.1 && p->batch < p->nbatches) return;
    s->last = now;
    const int W = 30;
    int fill = p->nbatches ? (int)((double)W * (double)p->batch / (double)p->nbatches) : 0;
    char bar[64];
    for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
    bar[W] = '\0';
    double eta = p->batch ? p->epoch_elapsed * (double)(p->nbatches - p->batch) / (double)p->batch : 0.0;
    fprintf(stderr, "\r\033[Kepoch %d/%d [%s] %llu/%llu  loss %.4e  %.1f s%s", p->epoch, p->epochs, bar,
            (unsigned long long)p->batch, (unsigned long long)p->nbatches, p->loss, p->epoch_elapsed,
            p->phase == 1 ? "  evaluating..." : "");
    if (p->phase == 0 && eta > 0) fprintf(stderr, "  eta %.1f s", eta);
    fflush(stderr);
    s->bar_shown = 1;
}

/* ================================================================ shared helpers */

/* The directory of a data set path (the path itself when it is a directory). */
static void data_dir(const char *data, char *buf, size_t cap) {
    struct stat sb;
    snprintf(buf, cap, "%s", data);
    if (stat(data, &sb) == 0 && S_ISDIR(sb.st_mode)) return;
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(buf, cap, ".");
}

/* The command line as one string (for config.json). */
static void join_argv(char *buf, size_t cap, int argc, char **argv) {
    size_t n = (size_t)snprintf(buf, cap, "distdpd");
    for (int i = 0; i < argc && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, " %s", argv[i]);
}

/* The best epoch's record from RUN/metrics.jsonl (the line with "best": true). */
static int read_best(const char *run, dd_epoch_record *r) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "best"))) {
#define NUM(k) (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, k)) ? cJSON_GetObjectItemCaseSensitive(j, k)->valuedouble : NAN)
            memset(r, 0, sizeof *r);
            r->epoch = (int)NUM("epoch");
            r->train_loss = NUM("train_loss");
            r->val.nmse_db = NUM("val_nmse_db");
            r->test.nmse_db = NUM("test_nmse_db");
            r->val.aclr.avg_db = NUM("val_aclr_avg_db");
            r->test.aclr.avg_db = NUM("test_aclr_avg_db");
            r->test.aclr.left_db = NUM("test_aclr_l_db");
            r->test.aclr.right_db = NUM("test_aclr_r_db");
            r->val.evm_db = NUM("val_evm_db");
            r->test.evm_db = NUM("test_evm_db");
            r->true_test.aclr.avg_db = NUM("true_test_aclr_avg_db");
            r->true_test.evm_db = NUM("true_test_evm_db");
            r->has_true = !isnan(r->true_test.aclr.avg_db);
            r->no_dpd_test.nmse_db = NUM("test_nmse_no_dpd_db");
            r->no_dpd_test.aclr.avg_db = NUM("test_aclr_avg_no_dpd_db");
            r->no_dpd_test.evm_db = NUM("test_evm_no_dpd_db");
            r->has_no_dpd = !isnan(r->no_dpd_test.aclr.avg_db);
#undef NUM
            found = 1;
        }
        cJSON_Delete(j);
    }
    fclose(f);
    return found;
}

/* ================================================================ data parallel helpers */

/* This process's rank as the launcher tells it (before MPI is initialised): Open MPI,
 * PMIx, MPICH/PMI, Slurm; 0 when not launched by one. */
static int launcher_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

/* stdout and stderr sent to /dev/null for a while (ranks other than 0 while parsing the
 * options, which every rank parses alike). */
typedef struct {
    int saved_out, saved_err; /* -1: not redirected */
} quiet_streams;

static void quiet_begin(quiet_streams *q, int on) {
    q->saved_out = q->saved_err = -1;
    if (!on) return;
    int nul = open("/dev/null", O_WRONLY);
    if (nul < 0) return;
    fflush(stdout);
    fflush(stderr);
    q->saved_out = dup(STDOUT_FILENO);
    q->saved_err = dup(STDERR_FILENO);
    if (q->saved_out >= 0) dup2(nul, STDOUT_FILENO);
    if (q->saved_err >= 0) dup2(nul, STDERR_FILENO);
    close(nul);
}

static void quiet_end(quiet_streams *q) {
    fflush(stdout);
    fflush(stderr);
    if (q->saved_out >= 0) {
        dup2(q->saved_out, STDOUT_FILENO);
        close(q->saved_out);
    }
    if (q->saved_err >= 0) {
        dup2(q->saved_err, STDERR_FILENO);
        close(q->saved_err);
    }
    q->saved_out = q->saved_err = -1;
}

/* Where each rank runs: host name and network namespace (emulated hosts share a host
 * name), gathered from every rank. */
#define HOST_INFO 128
static dd_status gather_hosts(dd_comm *w, char **all) {
    char me[HOST_INFO];
    memset(me, 0, sizeof me);
    char host[64] = "?", ns[48] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    ssize_t k = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    ns[k > 0 ? k : 1] = '\0';
    snprintf(me, sizeof me, "%s|%s", host, ns);
    *all = calloc((size_t)dd_comm_size(w), HOST_INFO);
    if (!*all) return dd_error(DD_ERR_NOMEM, "out of memory");
    return dd_comm_allgather(w, me, HOST_INFO, *all);
}

/* The largest rank's arena peaks during training (params, grads, optim, activations:
 * ms_train, else dd_mem_stats now) and peak RSS, into mem[0..4] on every rank (a
 * collective). */
static dd_status gather_memory(dd_comm *w, const dd_mem_stats *ms_train, double mem[5]) {
    dd_mem_stats ms;
    if (ms_train)
        ms = *ms_train;
    else
        dd_mem_stats_get(&ms);
    double mine[5];
    for (int k = 0; k < DD_MEM_KINDS; k++) mine[k] = (double)ms.peak[k];
    mine[4] = (double)dd_mem_peak_rss();
    const int n = dd_comm_size(w);
    double *all = calloc(5 * (size_t)n, sizeof *all);
    if (!all) return dd_error(DD_ERR_NOMEM, "out of memory");
    dd_status st = dd_comm_allgather(w, mine, sizeof mine, all);
    for (int k = 0; k < 5; k++) {
        mem[k] = 0;
        for (int r = 0; st == DD_OK && r < n; r++) mem[k] = all[5 * r + k] > mem[k] ? all[5 * r + k] : mem[k];
    }
    free(all);
    return st;
}

/* RUN/parallel.json (rank 0), written for every run: ranks, where they ran, the strategy
 * and its own fields (its options, timing), and "memory": the largest rank's arena peaks
 * and peak RSS. */
static dd_status write_parallel_json(const char *out, int nranks, const dd_strategy_run *run, const char *hosts,
                                     const double mem[5]) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return DD_ERR_NOMEM;
    cJSON_AddStringToObject(o, "strategy", run->def ? run->def->title : "single process");
    cJSON_AddNumberToObject(o, "ranks", nranks);
    if (!run->def) cJSON_AddStringToObject(o, "shard", "none");
    cJSON *mo = cJSON_AddObjectToObject(o, "memory");
    if (mo) {
        cJSON_AddNumberToObject(mo, "params_bytes", mem[0]);
        cJSON_AddNumberToObject(mo, "grads_bytes", mem[1]);
        cJSON_AddNumberToObject(mo, "optim_bytes", mem[2]);
        cJSON_AddNumberToObject(mo, "activations_bytes", mem[3]);
        cJSON_AddNumberToObject(mo, "peak_rss_bytes", mem[4]);
    }
    dd_status rs = run->def && run->def->report ? run->def->report(run->self, o) : DD_OK;
    if (rs != DD_OK) {
        cJSON_Delete(o);
        return rs;
    }
    cJSON *h = cJSON_AddArrayToObject(o, "hosts");
    int nhosts = 0;
    for (int r = 0; h && r < nranks; r++) {
        const char *e = hosts + (size_t)r * HOST_INFO, *bar = strchr(e, '|');
        int fresh = 1;
        for (int q = 0; q < r; q++)
            if (strncmp(hosts + (size_t)q * HOST_INFO, e, HOST_INFO) == 0) fresh = 0;
        nhosts += fresh;
        cJSON *x = cJSON_CreateObject();
        char hn[HOST_INFO];
        snprintf(hn, sizeof hn, "%.*s", bar ? (int)(bar - e) : (int)strlen(e), e);
        cJSON_AddNumberToObject(x, "rank", r);
        cJSON_AddStringToObject(x, "host", hn);
        cJSON_AddStringToObject(x, "netns", bar ? bar + 1 : "?");
        cJSON_AddItemToArray(h, x);
    }
    cJSON_AddNumberToObject(o, "distinct_hosts", nhosts);
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    if (!txt) return DD_ERR_NOMEM;
    char path[4200];
    snprintf(path, sizeof path, "%s/parallel.json", out);
    size_t l = strlen(txt);
    char *t2 = malloc(l + 2);
    dd_status s2 = DD_ERR_NOMEM;
    if (t2) {
        memcpy(t2, txt, l);
        t2[l] = '\n';
        t2[l + 1] = '\0';
        s2 = dd_cli_write_text(path, t2);
        free(t2);
    }
    cJSON_free(txt);
    return s2;
}

/* ================================================================ train-pa / train-dpd */

static void help_train(int dpd) {
    if (!dpd)
        printf("usage: distdpd train-pa --data DIR --model NAME [options] [--out RUN]\n"
               "       distdpd train-pa --resume RUN [--epochs E]\n"
               "       (OpenDPD's name train_pa works too; docs/opendpd.md maps its options)\n"
               "\n"
               "Trains a PA behavioural model x -> y on the training split of DIR: frames of\n"
               "length F cut with stride S (by index, never copied), shuffled each epoch by\n"
               "a sampler keyed by (seed, epoch), MSE loss, zero initial state per frame.\n"
               "After every epoch the validation and test splits are evaluated on nperseg\n"
               "segments with OpenDPD's metrics (NMSE, ACLR, spectral EVM); the best epoch\n"
               "is the one with the lowest validation NMSE.\n");
    else
        printf("usage: distdpd train-dpd --pa-run RUN_PA --model NAME [--data DIR] [options] [--out RUN]\n"
               "       distdpd train-dpd --resume RUN [--epochs E]\n"
               "       (OpenDPD's name train_dpd works too; docs/opendpd.md maps its options)\n"
               "\n"
               "Trains a DPD d so that PA(d(x)) = G x, with PA the best model of the PA run\n"
               "RUN_PA (frozen). Direct learning (default) back-propagates through the PA\n"
               "model; --ila trains a post-inverse on (y/G -> x) and copies it in front.\n"
               "G = max|y|/max|x| on the training split (OpenDPD), or --gain. The best epoch\n"
               "has the lowest validation ACLR of PA_model(d(x)). When DIR holds a simulated\n"
               "data set (pa.json or simulation.json from distdpd simulate), the DPD is also\n"
               "measured on the true noiseless PA (reported as true_* metrics).\n");
    printf("\n"
           "run directory RUN: config.json, metrics.jsonl (one JSON object per epoch),\n"
           "history.csv (OpenDPD columns), best.ckpt, last.ckpt, report.html\n"
           "\n"
           "data and model:\n"
           "  --data DIR          data set (OpenDPD directory with spec.json, SigMF, .ddb)%s\n"
           "  --model NAME        model (default gru); distdpd train-pa --model list shows them\n"
           "  --NAME V            the model's options (defaults and ranges: distdpd models):\n",
           dpd ? " (default: the PA run's)" : "");
    dd_cli_help_model_opts("  --", "");
    printf("  --out RUN           run directory (created; must not hold a run yet; default:\n"
           "                      runs/<task>-<model>-<YYYYmmdd-HHMMSS>, printed on stderr)\n"
           "  --config FILE       a recipe: JSON with the keys of a run's config.json (its\n"
           "                      \"config\" object, \"data\", \"pa_run\"); options given here win;\n"
           "                      an unknown key is refused naming it\n"
           "  --recipe R          distdpd (default: the published OpenDPD GRU recipe as measured\n"
           "                      here, below) or opendpd: OpenDPD's arguments.py defaults (batch\n"
           "                      256, 100 epochs, lr 5e-4, no schedule, eval batch 256, DPD hidden\n"
           "                      15; --opt sgd then has momentum 0.9); options given here win\n"
           "  --resume RUN        continue RUN from last.ckpt exactly (only --epochs, --data and\n"
           "                      display options may be given)\n"
           "  --rescale-batch B   with --resume: from the next epoch boundary the global batch\n"
           "                      is B and the learning rate scales by B / the old batch\n"
           "                      (linear scaling rule, for a new number of ranks)\n"
           "  --rescale-warmup W  reach that learning rate linearly over W steps (default 0)\n");
    if (dpd)
        printf("  --pa-run RUN_PA     the PA model run (its best.ckpt is frozen)\n"
               "  --ila               indirect learning instead of direct learning\n"
               "  --gain G            target gain, 0 < G <= 1e6 (default: derived from the training\n"
               "                      split as --gain-mode says)\n"
               "  --gain-mode M       how G is derived when --gain is not given: max (default:\n"
               "                      max|y|/max|x|) or ls (|least-squares gain|)\n"
               "  --select S          best epoch by the PA model's validation ACLR (model,\n"
               "                      default) or by the true PA's (true; simulated data only)\n");
    printf("\n"
           "training (defaults: the published OpenDPD GRU recipe as measured here, docs/training.md;\n"
           "it is not OpenDPD's arguments.py defaults: --recipe opendpd sets those):\n"
           "  --frame F           frame length (default 200)\n"
           "  --stride S          frame stride (default 1)\n"
           "  --batch B           frames per batch (default 64; the last partial batch is kept;\n"
           "                      a B above the training frames works as B = their number)\n"
           "  --epochs E          epochs (default 20)\n"
           "  --lr LR             learning rate (default 5e-3)\n"
           "  --opt O             adamw (default; betas 0.9/0.999, eps 1e-8, weight decay 0.01),\n"
           "                      adam, sgd or rmsprop (alpha 0.99, eps 1e-8; torch's defaults)\n"
           "  --loss L            l2 (default: mean squared error) or l1 (mean absolute error)\n"
           "  --weight-decay WD   weight decay (default: the optimiser's)\n"
           "  --momentum M        SGD momentum (default 0, 0.9 with --recipe opendpd; --opt sgd only)\n"
           "  --lr-schedule S     plateau (default: x0.5 after 5 epochs without improvement of\n"
           "                      the selection metric, down to 5e-5), constant, step, cosine\n"
           "  --patience P, --factor F, --min-lr LR   plateau only (--min-lr at most --lr)\n"
           "  --step-size N, --gamma G                 step only (N in steps)\n"
           "  --warmup N          linear warm-up over N steps (default 0)\n"
           "  --clip C            gradient-norm clipping (default 200; 0 = off)\n"
           "  --seed S            seed of the initialisation and the shuffling (default 0)\n"
           "  --no-shuffle        frames in order\n"
           "  --eval-batch N      evaluation segments per forward pass (default 16)\n"
           "  --ckpt-every-steps N  also write last.ckpt every N steps (default: each epoch;\n"
           "                      --ckpt-every N is the same)\n"
           "  --ckpt-every-s S    also write last.ckpt when S seconds have passed since the\n"
           "                      last checkpoint (rank 0's clock; default 0 = off)\n"
           "  --keep-last K       K > 1: write each checkpoint as RUN/ckpt/step-NNNNNNNNNN.ckpt\n"
           "                      (global step), last.ckpt a hard link to the newest, and keep\n"
           "                      the newest K (default 1: last.ckpt only). Checkpoints are\n"
           "                      written by a background thread from a snapshot: the steps\n"
           "                      wait for the copy only (durable: temp file, fsync, rename)\n"
           "  --no-test           do not evaluate the test split each epoch\n"
           "  --no-report         do not write report.html\n"
           "\n");
    printf("parallel (when started by mpirun -np N / srun with N > 1 processes):\n"
           "  --batch is the GLOBAL batch: rank r of N trains on its slice of every batch, so\n"
           "  N ranks give one process's result (up to float rounding); only rank 0 prints\n"
           "  and writes RUN (plus dp_steps.csv: per-step communication time not hidden, and\n"
           "  parallel.json); a checkpoint resumes on any number of ranks; kill -USR1\n"
           "  <mpirun>, or SIGTERM/SIGINT/SIGHUP/SIGUSR1 to any one rank, stops all ranks\n"
           "  after the same step with RUN/last.ckpt written (exit 75). The options below\n"
           "  choose the strategy (distdpd strategies lists them and what chooses each).\n");
    dd_cli_help_strategy_opts();
    printf(           "  --threads N         threads per rank: a step's batch chunks of 32 frames, the\n"
           "                      layer kernels, and the large sgemm products, cut by shape into\n"
           "                      up to DD_GEMM_PANELS (default 2) panels, OpenBLAS on one thread\n"
           "                      (default: DD_THREADS, else the cores the rank may run on\n"
           "                      divided among the ranks of its node). The thread count never\n"
           "                      changes a result. OPENBLAS_NUM_THREADS set: OpenBLAS keeps that\n"
           "                      count, and above 1 runs the products on its own threads, which\n"
           "                      can change the last bits (docs/performance.md); on a machine\n"
           "                      shared with other jobs set OMP_WAIT_POLICY=passive\n"
           "  --mem-limit-mb N    arena budget per rank in MiB: an allocation of parameters,\n"
           "                      gradients, optimiser state or activations beyond it fails,\n"
           "                      naming what, how much and the limit (default: none);\n"
           "                      RUN/parallel.json records each kind's peak (\"memory\")\n"
           "\n"
           "display:\n"
           "  --progress P        auto (default: a bar on a terminal, lines otherwise), bar,\n"
           "                      lines or none\n"
           "  -q, --quiet         no progress and no summary;  -v, --verbose: more log output\n"
           "  -h, --help          this help\n"
           "\n"
           "Numbers are decimal (010 is ten; no 0x). Options that the chosen schedule,\n"
           "optimiser or compressor would ignore are usage errors.\n"
           "\n"
           "environment (set by a supervisor such as distdpd launch):\n"
           "  DISTDPD_HEARTBEAT=PATH  rank 0 rewrites PATH (one line of JSON: pid, step, epoch,\n"
           "                      time, step_s, world_size, state) after steps (at most every\n"
           "                      0.2 s), after each checkpoint and at exit\n"
           "  DISTDPD_RESTART=K   restart count written into every metrics.jsonl line\n"
           "  DISTDPD_CKPT_SYNC=1 write checkpoints in the step loop (benchmarks)\n"
           "\n"
           "exit status: 0 completed, 75 stopped by SIGINT/SIGTERM/SIGHUP/SIGUSR1 with\n"
           "last.ckpt written (preempted: continue with --resume), 1 runtime error, 2 usage error\n");
}

static void list_models(void) {
    size_t n = 0;
    const dd_model_info *const *m = dd_model_registry(&n);
    printf("models (--model NAME):\n");
    for (size_t i = 0; i < n; i++) printf("  %-12s %s\n", m[i]->name, m[i]->summary);
}

/* --resume: the task of run RUN (config.json's, else last.ckpt's); 0 when neither says. */
static int resumed_task(const char *run, dd_train_task *task) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", run);
    int found = 0;
    char *txt = NULL;
    if (dd_read_text(path, &txt, NULL) == DD_OK) {
        cJSON *j = cJSON_Parse(txt);
        free(txt);
        const cJSON *c = j ? cJSON_GetObjectItemCaseSensitive(j, "config") : NULL;
        const cJSON *t = c ? cJSON_GetObjectItemCaseSensitive(c, "task") : NULL;
        found = cJSON_IsString(t) && dd_train_task_parse(t->valuestring, task) == DD_OK;
        cJSON_Delete(j);
    }
    if (!found) {
        dd_run_model rm;
        snprintf(path, sizeof path, "%s/last.ckpt", run);
        struct stat sb;
        if (stat(path, &sb) == 0 && dd_run_model_load(run, "last", &rm) == DD_OK) {
            *task = rm.cfg.task;
            found = 1;
            dd_run_model_free(&rm);
        }
    }
    dd_error_clear();
    return found;
}

/* --config FILE: a JSON object with the keys of a run's config.json (docs/cli.md). Its
 * "config" object is the training configuration (every key optional, the defaults for the
 * rest); "data" and "pa_run" are the defaults of --data and --pa-run; the other keys a
 * config.json holds (what the run measured and where it ran) are accepted and not used,
 * so a run's config.json repeats its recipe. A key config.json does not have is refused,
 * naming the key and the file. Returns 0 or the exit status. */
static int load_config_file(const char *NAME, const char *path, int dpd, dd_train_cfg *cfg, char *data, size_t dcap,
                            char *pa_run, size_t pcap) {
    static const char *const top_keys[] = {"generator", "run_id", "command", "data", "pa_run", "config", "spec",
                                           "model", "pa_model", "target_gain", "data_stats", "true_pa", "build",
                                           "data_checksum",
                                           NULL};
    char *txt = NULL;
    if (dd_read_text(path, &txt, NULL) != DD_OK) return dd_cli_usage(NAME, "--config: %s", dd_last_error());
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    int rc = 0;
    if (!cJSON_IsObject(j)) {
        rc = dd_cli_usage(NAME, "--config: %s: not a JSON object", path);
        goto done;
    }
    for (const cJSON *k = j->child; k && !rc; k = k->next) {
        int known = 0;
        for (int i = 0; top_keys[i] && !known; i++) known = strcmp(k->string, top_keys[i]) == 0;
        if (!known) rc = dd_cli_usage(NAME, "--config: %s: unknown key '%s' (the keys are those of a run's config.json)", path, k->string);
    }
    const cJSON *co = cJSON_GetObjectItemCaseSensitive(j, "config");
    if (!rc && co && !cJSON_IsObject(co)) rc = dd_cli_usage(NAME, "--config: %s: key 'config' is not an object", path);
    if (!rc && co) { /* the keys of the configuration: those dd_train_cfg_json_obj writes */
        dd_train_cfg d;
        dd_train_cfg_default(&d, DD_TRAIN_PA);
        char *dj = NULL;
        cJSON *ref = dd_train_cfg_to_json(&d, &dj) == DD_OK ? cJSON_Parse(dj) : NULL;
        dd_free(dj);
        if (!ref) rc = dd_cli_fail(NAME, DD_ERR_NOMEM);
        for (const cJSON *k = co->child; k && !rc && ref; k = k->next)
            if (!cJSON_GetObjectItemCaseSensitive(ref, k->string))
                rc = dd_cli_usage(NAME, "--config: %s: unknown key 'config.%s'", path, k->string);
        cJSON_Delete(ref);
    }
    if (!rc) {
        char *ct = co ? cJSON_PrintUnformatted(co) : NULL;
        char where[4300];
        snprintf(where, sizeof where, "--config %s", path);
        if (dd_train_cfg_from_json(ct ? ct : "{}", where, cfg) != DD_OK) rc = dd_cli_usage(NAME, "%s", dd_last_error());
        cJSON_free(ct);
        if (!rc && !(co && cJSON_GetObjectItemCaseSensitive(co, "task"))) cfg->task = dpd ? DD_TRAIN_DLA : DD_TRAIN_PA;
    }
    if (!rc && (cfg->task != DD_TRAIN_PA) != dpd)
        rc = dd_cli_usage(NAME, "--config: %s holds a %s recipe (task %s): use it with 'distdpd %s'", path,
                          cfg->task == DD_TRAIN_PA ? "PA model" : "DPD", dd_train_task_name(cfg->task),
                          cfg->task == DD_TRAIN_PA ? "train-pa" : "train-dpd");
    const char *keys[2] = {"data", "pa_run"};
    char *dst[2] = {data, pa_run};
    size_t cap[2] = {dcap, pcap};
    for (int i = 0; i < 2 && !rc; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
        if (v && !cJSON_IsString(v)) rc = dd_cli_usage(NAME, "--config: %s: key '%s' is not a string", path, keys[i]);
        else if (v && strlen(v->valuestring) >= cap[i]) rc = dd_cli_usage(NAME, "--config: %s: key '%s' is too long", path, keys[i]);
        else if (v) snprintf(dst[i], cap[i], "%s", v->valuestring);
    }
done:
    cJSON_Delete(j);
    return rc;
}

/* runs/<task>-<model>-<YYYYmmdd-HHMMSS> (local time), with -2, -3, ... when that exists. */
static int auto_run_name(const char *NAME, const dd_train_cfg *cfg, char *buf, size_t cap) {
    char stamp[32];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime_r(&now, &tmv));
    struct stat sb;
    for (int k = 1; k < 1000; k++) {
        if (k == 1)
            snprintf(buf, cap, "runs/%s-%s-%s", dd_train_task_name(cfg->task), cfg->model, stamp);
        else
            snprintf(buf, cap, "runs/%s-%s-%s-%d", dd_train_task_name(cfg->task), cfg->model, stamp, k);
        if (stat(buf, &sb) != 0) return 0;
    }
    return dd_cli_usage(NAME, "runs/: no free run directory name for %s (give --out RUN)", stamp);
}

static int cmd_train(int argc, char **argv, int dpd) {
    const char *NAME = dpd ? "train-dpd" : "train-pa";
    enum {
        O_DATA = 256, O_MODEL, O_FRAME, O_STRIDE, O_BATCH,
        O_EPOCHS, O_LR, O_OPT, O_WD, O_MOMENTUM, O_SCHED, O_PATIENCE, O_FACTOR, O_MINLR, O_STEPSIZE, O_GAMMA, O_WARMUP,
        O_CLIP, O_SEED, O_NOSHUFFLE, O_EVALBATCH, O_CKPTEVERY, O_NOTEST, O_NOREPORT, O_OUT, O_RESUME, O_PARUN, O_ILA,
        O_GAIN, O_GAINMODE, O_SELECT, O_PROGRESS, O_MEMLIMIT, O_CKPTSTEPS, O_CKPTSECS, O_KEEPLAST, O_RSBATCH, O_RSWARMUP,
        O_LOSS, O_RECIPE, O_CONFIG,
        O_THREADS,
        O_MOPT = 1024, /* + k: --NAME of model option k (the model registry's) */
        O_SOPT = 2048  /* + k: --NAME of strategy option k (the strategy registry's) */
    };
    static const struct option opts_base[] = {
        {"data", required_argument, NULL, O_DATA},          {"model", required_argument, NULL, O_MODEL},
        {"frame", required_argument, NULL, O_FRAME},        {"stride", required_argument, NULL, O_STRIDE},
        {"batch", required_argument, NULL, O_BATCH},        {"epochs", required_argument, NULL, O_EPOCHS},
        {"lr", required_argument, NULL, O_LR},              {"opt", required_argument, NULL, O_OPT},
        {"weight-decay", required_argument, NULL, O_WD},    {"momentum", required_argument, NULL, O_MOMENTUM},
        {"lr-schedule", required_argument, NULL, O_SCHED},  {"patience", required_argument, NULL, O_PATIENCE},
        {"factor", required_argument, NULL, O_FACTOR},      {"min-lr", required_argument, NULL, O_MINLR},
        {"step-size", required_argument, NULL, O_STEPSIZE}, {"gamma", required_argument, NULL, O_GAMMA},
        {"warmup", required_argument, NULL, O_WARMUP},      {"clip", required_argument, NULL, O_CLIP},
        {"seed", required_argument, NULL, O_SEED},          {"no-shuffle", no_argument, NULL, O_NOSHUFFLE},
        {"eval-batch", required_argument, NULL, O_EVALBATCH}, {"ckpt-every", required_argument, NULL, O_CKPTEVERY},
        {"no-test", no_argument, NULL, O_NOTEST},           {"no-report", no_argument, NULL, O_NOREPORT},
        {"out", required_argument, NULL, O_OUT},            {"resume", required_argument, NULL, O_RESUME},
        {"pa-run", required_argument, NULL, O_PARUN},       {"ila", no_argument, NULL, O_ILA},
        {"gain", required_argument, NULL, O_GAIN},          {"gain-mode", required_argument, NULL, O_GAINMODE},
        {"select", required_argument, NULL, O_SELECT},      {"progress", required_argument, NULL, O_PROGRESS},
        {"mem-limit-mb", required_argument, NULL, O_MEMLIMIT}, {"threads", required_argument, NULL, O_THREADS},
        {"ckpt-every-steps", required_argument, NULL, O_CKPTSTEPS}, {"ckpt-every-s", required_argument, NULL, O_CKPTSECS},
        {"keep-last", required_argument, NULL, O_KEEPLAST},
        {"rescale-batch", required_argument, NULL, O_RSBATCH}, {"rescale-warmup", required_argument, NULL, O_RSWARMUP},
        {"loss", required_argument, NULL, O_LOSS},          {"recipe", required_argument, NULL, O_RECIPE},
        {"config", required_argument, NULL, O_CONFIG},
        {"verbose", no_argument, NULL, 'v'},                {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},                   {NULL, 0, NULL, 0}};
    /* the models' options (--hidden, --layers, ...) come from the registry, so a new
     * model's options are flags here without touching this file; a name that clashes
     * with an option above is left out (the model keeps its default) */
    enum { NBASE = sizeof opts_base / sizeof opts_base[0] - 1 };
    const char *mnames[DD_CLI_MAX_MODEL_OPTS];
    char mflags[DD_CLI_MAX_MODEL_OPTS][DD_MODEL_OPT_NAME_MAX + 2];
    size_t nm = dd_cli_model_opt_names(mnames, DD_CLI_MAX_MODEL_OPTS);
    /* the strategies' options (--allreduce, --shard, ...) likewise */
    const char *snames[DD_STRATEGY_MAX_ARGS];
    size_t ns = dd_cli_strategy_opt_names(snames, DD_STRATEGY_MAX_ARGS);
    struct option longopts[NBASE + DD_CLI_MAX_MODEL_OPTS + DD_STRATEGY_MAX_ARGS + 1];
    memcpy(longopts, opts_base, NBASE * sizeof opts_base[0]);
    size_t nlo = NBASE;
    for (size_t k = 0; k < nm; k++) {
        int clash = 0;
        for (size_t j = 0; j < NBASE; j++) clash |= strcmp(opts_base[j].name, mnames[k]) == 0;
        if (clash) continue;
        snprintf(mflags[k], sizeof mflags[k], "--%s", mnames[k]);
        longopts[nlo++] = (struct option){mnames[k], required_argument, NULL, O_MOPT + (int)k};
    }
    for (size_t k = 0; k < ns; k++) longopts[nlo++] = (struct option){snames[k], required_argument, NULL, O_SOPT + (int)k};
    longopts[nlo] = (struct option){NULL, 0, NULL, 0};
    static const char *const opts_opt[] = {"sgd", "adam", "adamw", "rmsprop", NULL}; /* dd_optim_kind order */
    static const char *const opts_loss[] = {"l2", "l1", NULL};
    static const char *const opts_recipe[] = {"distdpd", "opendpd", NULL};
    static const char *const opts_sched[] = {"constant", "step", "cosine", "plateau", NULL};
    static const char *const opts_gain[] = {"max", "ls", NULL};
    static const char *const opts_select[] = {"model", "true", NULL};
    static const char *const opts_progress[] = {"auto", "bar", "lines", "none", NULL};

    dd_train_cfg cfg;
    dd_train_cfg_default(&cfg, dpd ? DD_TRAIN_DLA : DD_TRAIN_PA);
    const char *data = NULL, *out = NULL, *resume = NULL, *pa_run = NULL, *cfg_opt = NULL;
    int opt_kind = DD_OPTIM_ADAMW, sched_kind = DD_LR_PLATEAU, verbosity = 0, progress = 0, report = 1, c, rc, ila = 0;
    int epochs_given = 0, gain_given = 0, gain_mode_given = 0, sched_given = 0;
    double wd = NAN, momentum = NAN, patience = NAN, factor = NAN, min_lr = NAN, gamma = NAN;
    size_t v, step_size = 0, warmup = 0;
    uint64_t u;
    char model_buf[DD_TRAIN_NAME_MAX] = "gru";
    char auto_name[256];
    int want_list = 0;
    dd_strategy_args sargs; /* the strategy options given */
    memset(&sargs, 0, sizeof sargs);
    size_t mem_limit_mb = 0, rescale_batch = 0, rescale_warmup = 0, threads = 0;
    int rescale_warmup_given = 0;
    /* every rank parses the same options: only rank 0 prints usage errors and help */
    quiet_streams q;
    quiet_begin(&q, launcher_rank() > 0);
    /* --recipe and --config first: they set the defaults that the other options change,
     * wherever they stand on the command line (docs/cli.md) */
    int recipe = 0, auto_out = 0;
    const char *config_path = NULL;
    char config_data[4200] = "", config_pa_run[4200] = "";
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        if (c == O_RECIPE && (rc = dd_cli_parse_choice(NAME, "--recipe", optarg, opts_recipe, &recipe))) return rc;
        if (c == O_CONFIG) config_path = optarg;
    }
    if (recipe && config_path)
        return dd_cli_usage(NAME, "--recipe and --config both set every training default: give one of them");
    if (recipe == 1) { /* OpenDPD's arguments.py defaults (lab-emi/OpenDPD, docs/opendpd.md) */
        cfg.batch = 256;
        cfg.eval_batch = 256;
        cfg.epochs = 100;
        cfg.lr = 5e-4;
        sched_kind = DD_LR_CONSTANT; /* --lr_schedule 0 */
        if (dpd) dd_model_cfg_set(&cfg.model_cfg, "hidden", 15); /* --DPD_hidden_size 15 (PA: 23, ours) */
    }
    if (config_path) {
        if ((rc = load_config_file(NAME, config_path, dpd, &cfg, config_data, sizeof config_data, config_pa_run,
                                   sizeof config_pa_run)))
            return rc;
        opt_kind = (int)DD_OPTIM_ADAMW;
        dd_optim_kind ok;
        if (dd_optim_kind_parse(cfg.opt, &ok) == DD_OK) opt_kind = (int)ok;
        sched_kind = (int)cfg.sched.kind;
        warmup = (size_t)cfg.sched.warmup;
        snprintf(model_buf, sizeof model_buf, "%s", cfg.model);
        ila = cfg.task == DD_TRAIN_ILA;
        if (config_data[0]) data = config_data;
        if (config_pa_run[0]) pa_run = config_pa_run;
    }
    optind = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        const char *oname = NULL; /* a configuration option (refused with --resume) */
        switch (c) {
        case O_DATA: data = optarg; break;
        case O_MODEL:
            oname = "--model";
            /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): getopt_long sets optarg for a required_argument option */
            if (strcmp(optarg, "list") == 0) want_list = 1;
            if (strlen(optarg) >= sizeof cfg.model) return dd_cli_usage(NAME, "--model: name too long: '%s'", optarg);
            snprintf(model_buf, sizeof model_buf, "%s", optarg);
            break;
#define SIZE_OPT(CASE, NM, LO, HI, DST)                                                   \
    case CASE:                                                                           \
        oname = NM;                                                                      \
        if ((rc = dd_cli_parse_size(NAME, NM, optarg, LO, HI, &v))) return rc;           \
        DST;                                                                             \
        break;
            SIZE_OPT(O_FRAME, "--frame", 1, (size_t)1 << 20, cfg.frame = v)
            SIZE_OPT(O_STRIDE, "--stride", 1, (size_t)1 << 20, cfg.stride = v)
            SIZE_OPT(O_BATCH, "--batch", 1, (size_t)1 << 20, cfg.batch = v)
            SIZE_OPT(O_EVALBATCH, "--eval-batch", 1, 4096, cfg.eval_batch = v)
            SIZE_OPT(O_STEPSIZE, "--step-size", 1, (size_t)1 << 40, step_size = v)
            SIZE_OPT(O_WARMUP, "--warmup", 0, (size_t)1 << 40, warmup = v)
#undef SIZE_OPT
        case O_EPOCHS:
            if ((rc = dd_cli_parse_size(NAME, "--epochs", optarg, 1, 100000, &v))) return rc;
            cfg.epochs = (int)v;
            epochs_given = 1;
            break;
        case O_PATIENCE:
            oname = "--patience";
            if ((rc = dd_cli_parse_size(NAME, "--patience", optarg, 0, 1000000, &v))) return rc;
            patience = (double)v;
            break;
#define DBL_OPT(CASE, NM, LO, HI, DST)                                                      \
    case CASE:                                                                             \
        oname = NM;                                                                        \
        if ((rc = dd_cli_parse_double(NAME, NM, optarg, LO, HI, &(DST)))) return rc;       \
        break;
            DBL_OPT(O_LR, "--lr", 0.0, 10.0, cfg.lr)
            DBL_OPT(O_WD, "--weight-decay", 0.0, 10.0, wd)
            DBL_OPT(O_MOMENTUM, "--momentum", 0.0, 0.999999, momentum)
            DBL_OPT(O_FACTOR, "--factor", 0.0, 1.0, factor)
            DBL_OPT(O_MINLR, "--min-lr", 0.0, 10.0, min_lr)
            DBL_OPT(O_GAMMA, "--gamma", 0.0, 1e6, gamma)
            DBL_OPT(O_CLIP, "--clip", 0.0, 1e12, cfg.clip)
#undef DBL_OPT
        case O_GAIN:
            if (!dpd) return dd_cli_usage(NAME, "option '--gain' belongs to train-dpd");
            oname = "--gain";
            /* 0 is the library's "derive G from the data"; on the command line that is
             * leaving --gain out, as the help says (G > 0) */
            if ((rc = dd_cli_parse_double(NAME, "--gain", optarg, -1e300, 1e300, &cfg.gain))) return rc;
            if (!(cfg.gain > 0 && cfg.gain <= 1e6))
                return dd_cli_usage(NAME, "--gain: must be in (0, 1e+06], got '%s'%s", optarg,
                                    cfg.gain <= 0 ? " (leave --gain out to derive G from the training split)" : "");
            gain_given = 1;
            break;
        case O_OPT:
            oname = "--opt";
            if ((rc = dd_cli_parse_choice(NAME, "--opt", optarg, opts_opt, &opt_kind))) return rc;
            break;
        case O_LOSS:
            oname = "--loss";
            if ((rc = dd_cli_parse_choice(NAME, "--loss", optarg, opts_loss, &cfg.loss))) return rc;
            break;
        case O_RECIPE: oname = "--recipe"; break; /* read above */
        case O_CONFIG: oname = "--config"; break;
        case O_SCHED:
            oname = "--lr-schedule";
            sched_given = 1;
            if ((rc = dd_cli_parse_choice(NAME, "--lr-schedule", optarg, opts_sched, &sched_kind))) return rc;
            break;
        case O_SEED:
            oname = "--seed";
            if ((rc = dd_cli_parse_u64(NAME, "--seed", optarg, &cfg.seed))) return rc;
            break;
        case O_NOSHUFFLE: oname = "--no-shuffle"; cfg.shuffle = 0; break;
        case O_CKPTEVERY:
        case O_CKPTSTEPS: /* --ckpt-every is the older name */
            oname = c == O_CKPTEVERY ? "--ckpt-every" : "--ckpt-every-steps";
            if ((rc = dd_cli_parse_u64(NAME, oname, optarg, &u))) return rc;
            cfg.ckpt_every = u;
            break;
        case O_CKPTSECS:
            oname = "--ckpt-every-s";
            if ((rc = dd_cli_parse_double(NAME, "--ckpt-every-s", optarg, 0.0, 1e9, &cfg.ckpt_every_s))) return rc;
            break;
        case O_KEEPLAST:
            oname = "--keep-last";
            if ((rc = dd_cli_parse_size(NAME, "--keep-last", optarg, 1, 1000000, &cfg.keep_last))) return rc;
            break;
        case O_NOTEST: oname = "--no-test"; cfg.eval_test = 0; break;
        case O_NOREPORT: report = 0; break;
        case O_OUT: out = optarg; break;
        case O_RESUME: resume = optarg; break;
        case O_PROGRESS:
            if ((rc = dd_cli_parse_choice(NAME, "--progress", optarg, opts_progress, &progress))) return rc;
            break;
        case O_RSBATCH:
            if ((rc = dd_cli_parse_size(NAME, "--rescale-batch", optarg, 1, (size_t)1 << 20, &rescale_batch))) return rc;
            break;
        case O_RSWARMUP:
            if ((rc = dd_cli_parse_size(NAME, "--rescale-warmup", optarg, 0, 100000000, &rescale_warmup))) return rc;
            rescale_warmup_given = 1;
            break;
        case O_MEMLIMIT:
            if ((rc = dd_cli_parse_size(NAME, "--mem-limit-mb", optarg, 1, (size_t)1 << 30, &mem_limit_mb))) return rc;
            break;
        case O_THREADS:
            if ((rc = dd_cli_parse_size(NAME, "--threads", optarg, 1, 256, &threads))) return rc;
            break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help_train(dpd); return DD_EXIT_OK;
        default:
            if (c >= O_SOPT && c < O_SOPT + (int)ns) { /* a strategy option; the strategy checks it */
                if (dd_strategy_arg_set(&sargs, snames[c - O_SOPT], optarg) != DD_OK)
                    return dd_cli_usage(NAME, "%s", dd_last_error());
                break;
            }
            if (c >= O_MOPT && c < O_MOPT + (int)nm) { /* a model option; the model checks its range */
                const size_t k = (size_t)(c - O_MOPT);
                oname = mflags[k];
                if ((rc = dd_cli_parse_size(NAME, mflags[k], optarg, 1, 1000000000, &v))) return rc;
                if (dd_model_cfg_set(&cfg.model_cfg, mnames[k], (int)v) != DD_OK)
                    return dd_cli_usage(NAME, "%s: %s", mflags[k], dd_last_error());
                break;
            }
            if (dpd && c == O_PARUN) {
                pa_run = optarg;
                break;
            }
            if (dpd && c == O_ILA) {
                oname = "--ila";
                ila = 1;
                break;
            }
            if (dpd && c == O_GAINMODE) {
                oname = "--gain-mode";
                if ((rc = dd_cli_parse_choice(NAME, "--gain-mode", optarg, opts_gain, &cfg.gain_mode))) return rc;
                gain_mode_given = 1;
                break;
            }
            if (dpd && c == O_SELECT) {
                oname = "--select";
                if ((rc = dd_cli_parse_choice(NAME, "--select", optarg, opts_select, &cfg.select_true))) return rc;
                break;
            }
            /* the option's name, not argv[optind - 1] (the value of '--gain-mode max') */
            if (c == O_PARUN || c == O_ILA || c == O_GAINMODE || c == O_SELECT)
                return dd_cli_usage(NAME, "option '%s' belongs to train-dpd",
                                    c == O_PARUN ? "--pa-run" : c == O_ILA ? "--ila" : c == O_GAINMODE ? "--gain-mode"
                                                                                                 : "--select");
            return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
        if (oname && !cfg_opt) cfg_opt = oname;
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (want_list) {
        list_models();
        return DD_EXIT_OK;
    }
    if (!resume && (rescale_batch || rescale_warmup_given))
        return dd_cli_usage(NAME, "--%s rescales a run on --resume (a new run takes --batch and --lr)",
                            rescale_batch ? "rescale-batch" : "rescale-warmup");
    if (rescale_warmup_given && !rescale_batch) return dd_cli_usage(NAME, "--rescale-warmup needs --rescale-batch");
    /* set by a supervisor (distdpd launch): the restart count recorded in metrics.jsonl,
     * the heartbeat file, and (benchmarks) synchronous checkpoint writes */
    int restart = 0, ckpt_sync = 0;
    {
        const char *e = getenv("DISTDPD_RESTART");
        if (e && (rc = dd_cli_parse_size(NAME, "DISTDPD_RESTART", e, 0, 1000000000, &v))) return rc;
        if (e) restart = (int)v;
        e = getenv("DISTDPD_CKPT_SYNC");
        if (e && *e && strcmp(e, "0") != 0) {
            if (strcmp(e, "1") != 0) return dd_cli_usage(NAME, "DISTDPD_CKPT_SYNC: expected 0 or 1, got '%s'", e);
            ckpt_sync = 1;
        }
    }
    const char *heartbeat_path = getenv("DISTDPD_HEARTBEAT");
    if (heartbeat_path && !*heartbeat_path)
        return dd_cli_usage(NAME, "DISTDPD_HEARTBEAT: empty (unset it, or give the heartbeat file's path)");
    if (resume) {
        if (cfg_opt)
            return dd_cli_usage(NAME, "%s cannot be given with --resume: the run keeps its configuration (only --epochs "
                                      "and --data may change)",
                                cfg_opt);
        if (out && strcmp(out, resume) != 0) return dd_cli_usage(NAME, "--out and --resume name different runs");
        if (pa_run) return dd_cli_usage(NAME, "--pa-run cannot be given with --resume (the run holds its PA model)");
        out = resume;
        dd_train_task rt;
        if (resumed_task(resume, &rt) && (rt != DD_TRAIN_PA) != dpd)
            return dd_cli_usage(NAME, "%s is a %s run (task %s): continue it with 'distdpd %s --resume %s'", resume,
                                rt == DD_TRAIN_PA ? "PA model" : "DPD", dd_train_task_name(rt),
                                rt == DD_TRAIN_PA ? "train-pa" : "train-dpd", resume);
    } else {
        if (!dpd && !data) return dd_cli_usage(NAME, "missing --data DIR");
        if (dpd && !pa_run) return dd_cli_usage(NAME, "missing --pa-run RUN_PA");
        if (cfg.lr <= 0) return dd_cli_usage(NAME, "--lr: must be > 0, got %g", cfg.lr);
        if (!isnan(factor) && (factor <= 0 || factor >= 1))
            return dd_cli_usage(NAME, "--factor: must be in (0, 1), got %g", factor);
        if (!isnan(gamma) && gamma <= 0) return dd_cli_usage(NAME, "--gamma: must be > 0, got %g", gamma);
        snprintf(cfg.model, sizeof cfg.model, "%s", model_buf);
        if (ila) cfg.task = DD_TRAIN_ILA;
        if (strcmp(cfg.opt, opts_opt[opt_kind]) != 0) { /* another optimiser than the default's or --config's */
            snprintf(cfg.opt, sizeof cfg.opt, "%s", opts_opt[opt_kind]);
            cfg.optim = dd_optim_cfg_default((dd_optim_kind)opt_kind);
            /* OpenDPD builds SGD with momentum 0.9 (project.py build_optimizer) */
            if (recipe == 1 && opt_kind == DD_OPTIM_SGD) cfg.optim.momentum = 0.9;
        }
        if (!isnan(wd)) cfg.optim.weight_decay = wd;
        if (!isnan(momentum)) {
            if (opt_kind != DD_OPTIM_SGD) return dd_cli_usage(NAME, "--momentum applies to --opt sgd only");
            cfg.optim.momentum = momentum;
        }
        /* settings of one schedule given to another would be ignored: say so */
        {
            const char *sn = opts_sched[sched_kind], *dflt = sched_given ? "" : " (the default)";
            const char *pl = !isnan(patience) ? "--patience"
                             : !isnan(factor) ? "--factor"
                             : !isnan(min_lr) ? "--min-lr"
                                              : NULL;
            const char *sp = step_size ? "--step-size" : !isnan(gamma) ? "--gamma" : NULL;
            if (pl && sched_kind != DD_LR_PLATEAU)
                return dd_cli_usage(NAME, "%s applies to --lr-schedule plateau only, not %s%s", pl, sn, dflt);
            if (sp && sched_kind != DD_LR_STEP)
                return dd_cli_usage(NAME, "%s applies to --lr-schedule step only, not %s%s", sp, sn, dflt);
        }
        if (!isnan(min_lr) && min_lr > cfg.lr)
            return dd_cli_usage(NAME, "--min-lr %g is above --lr %g: the plateau schedule lowers the lr to --min-lr, "
                                      "never raises it",
                                min_lr, cfg.lr);
        if (gain_given && gain_mode_given)
            return dd_cli_usage(NAME, "--gain-mode chooses how G is derived from the training split: it cannot be given "
                                      "with --gain");
        dd_lr_cfg base = cfg.sched; /* keeps the plateau settings (the default's or --config's) */
        if (sched_kind != (int)cfg.sched.kind) {
            cfg.sched = dd_lr_cfg_default((dd_lr_kind)sched_kind, cfg.lr);
            cfg.sched.t_max = 0;
            cfg.sched.factor = base.factor;
            cfg.sched.patience = base.patience;
            cfg.sched.min_lr = base.min_lr;
        }
        if (!isnan(patience)) cfg.sched.patience = (int64_t)patience;
        if (!isnan(factor)) cfg.sched.factor = factor;
        if (!isnan(min_lr)) cfg.sched.min_lr = min_lr;
        if (!isnan(gamma)) cfg.sched.gamma = gamma;
        if (step_size) cfg.sched.step_size = (int64_t)step_size;
        cfg.sched.warmup = (int64_t)warmup;
        cfg.sched.base_lr = cfg.lr;
        dd_status cst;
        if ((cst = dd_train_cfg_check(&cfg)) != DD_OK) return dd_cli_refuse(NAME, cst);
        if (!out) { /* runs/<task>-<model>-<time>; ranks agree on rank 0's name once MPI runs */
            if ((rc = auto_run_name(NAME, &cfg, auto_name, sizeof auto_name))) return rc;
            out = auto_name;
            auto_out = 1;
        }
        {
            if (!dd_model_find(cfg.model)) return dd_cli_usage(NAME, "--model: unknown model '%s' (--model list shows them)", cfg.model);
            dd_model *m = NULL;
            if ((cst = dd_model_create(cfg.model, &cfg.model_cfg, &m)) != DD_OK) return dd_cli_refuse(NAME, cst);
            dd_model_destroy(&m);
        }
    }
    /* the strategy the options choose, checked before MPI starts (as for one process:
     * with more ranks the same strategy runs whenever an option is given); on --resume the
     * options the run recorded (its compressor) count as given */
    sargs.nranks = 1;
    sargs.resume = resume ? out : NULL;
    sargs.out = out;
    const dd_strategy_def *sdef = NULL;
    dd_status sst;
    if ((sst = dd_strategy_args_resume(&sargs)) != DD_OK || (sst = dd_strategy_choose(&sargs, &sdef)) != DD_OK)
        return dd_cli_refuse(NAME, sst);
    if (rescale_batch && (dd_strategy_arg(&sargs, "tp") || dd_strategy_arg(&sargs, "pp")))
        return dd_cli_usage(NAME, "--rescale-batch does not apply to a --tp/--pp run (its pipeline buffers are sized "
                                  "for the batch at its start)");
    quiet_end(&q);
    dd_cli_log_init(verbosity);

    /* MPI when started by mpirun / srun (nothing otherwise) */
    dd_comm *world = NULL;
    dd_strategy_run srun; /* the strategy (srun.def NULL: one process) */
    memset(&srun, 0, sizeof srun);
    char *hosts = NULL;
    dd_run_lock *lock = NULL;
    dd_heartbeat *hb = NULL;
    int rank = 0, nranks = 1, ret = DD_EXIT_OK, interrupted = 0;
    dd_status st = dd_comm_init(NULL, NULL);
    if (st == DD_OK) st = dd_comm_world(&world);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    rank = dd_comm_rank(world);
    nranks = dd_comm_size(world);
    if (auto_out) { /* rank 0's name (the ranks may have read the clock a second apart) */
        if (nranks > 1 && (st = dd_comm_bcast(world, auto_name, sizeof auto_name, 0)) != DD_OK) goto fail;
        sargs.out = out;
        if (rank == 0) fprintf(stderr, "distdpd %s: run directory %s (no --out given)\n", NAME, out);
    }
    if (mem_limit_mb) dd_mem_set_limit(mem_limit_mb * (size_t)1048576);
    {
        const char *env = getenv("DD_THREADS");
        const int nt = dd_nn_threads_set(threads ? (int)threads : env && *env ? dd_nn_threads() : dd_nn_threads_owned());
        if (verbosity > 0 && rank == 0) {
            const int blas = dd_nn_blas_threads();
            if (blas == 1) /* the layers' large sgemm calls: panels of C on the rank's threads */
                fprintf(stderr, "%s: %d thread(s) per rank, OpenBLAS 1 thread(s), large products in up to %d panels\n",
                        NAME, nt, dd_nn_sgemm_panels_max());
            else
                fprintf(stderr, "%s: %d thread(s) per rank, OpenBLAS %d thread(s) of its own\n", NAME, nt, blas);
        }
    }
    sargs.nranks = nranks;
    if ((st = dd_strategy_choose(&sargs, &sdef)) != DD_OK) goto fail;
    if (sdef) {
        if ((st = dd_strategy_start(sdef, world, &sargs, &srun)) != DD_OK) goto fail;
        /* dp_steps.csv is flushed with every checkpoint, so a resume finds the rows of
         * every step up to the checkpoint */
        flush_ops = *srun.st.ops;
        strategy_before_save = srun.st.ops->before_save;
        flush_ops.before_save = flush_then_before_save;
        srun.st.ops = &flush_ops;
        sdef->set_stop_source(srun.self, &stop_flag);
    }
    if ((st = gather_hosts(world, &hosts)) != DD_OK) goto fail;
    if (rank == 0 && heartbeat_path && (st = dd_heartbeat_open(heartbeat_path, nranks, &hb)) != DD_OK) {
        dd_error_prefix(st, "DISTDPD_HEARTBEAT: ");
        goto fail;
    }

    char databuf[4200];
    if (data) data = dd_rf_resolve_dataset(data, databuf, sizeof databuf);
    if (srun.def && srun.def->drive) {
        /* a strategy whose process trains with a loop of its own (a parameter-server
         * worker): it neither locks nor writes the run directory */
        int drove = 0;
        stop_flag = 0;
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        st = srun.def->drive(srun.self, resume ? NULL : &cfg, data, pa_run, &stop_flag, &drove);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (drove) {
            if (st != DD_OK) goto fail;
            ret = stop_flag ? DD_EXIT_PREEMPTED : DD_EXIT_OK;
            goto done;
        }
        if (st != DD_OK) goto fail;
    }
    char command[8192];
    join_argv(command, sizeof command, argc, argv);
    progress_state ps;
    memset(&ps, 0, sizeof ps);
    ps.is_dpd = dpd;
    ps.mode = progress == 0 ? (isatty(STDERR_FILENO) ? 2 : 1) : progress == 1 ? 2 : progress == 2 ? 1 : 0;
    if (verbosity < 0 || rank != 0) ps.mode = 0;
    ps.run = srun.def ? &srun : NULL;
    ps.root = rank == 0;
    ps.out = out;
    steps_state = &ps;
    /* rank 0 owns the run directory from here until its last file (parallel.json) is
     * written; a resume of a directory that does not exist is left to dd_train_run's message */
    struct stat osb;
    if (rank == 0 && (!resume || (stat(out, &osb) == 0 && S_ISDIR(osb.st_mode))) &&
        (st = dd_run_lock_acquire(out, !resume, &lock)) != DD_OK)
        goto fail;

    dd_train_run_opts o;
    memset(&o, 0, sizeof o);
    o.data = data;
    o.out = out;
    o.pa_run = pa_run;
    o.resume = resume != NULL;
    o.epochs_override = resume && epochs_given ? cfg.epochs : 0;
    o.command = command;
    o.write_report = report;
    o.progress = on_progress;
    o.progress_user = &ps;
    o.strategy = srun.def ? &srun.st : NULL;
    o.stop = &stop_flag; /* with ranks the strategy's agreed stop decides */
    o.interrupted = &interrupted;
    dd_mem_stats mem_train;
    dd_mem_stats_get(&mem_train);
    o.mem = &mem_train;
    o.lock = lock;
    o.restart = restart;
    o.heartbeat = hb;
    o.ckpt_sync = ckpt_sync;
    o.rescale_batch = rescale_batch;
    o.rescale_warmup = (int64_t)rescale_warmup;
    stop_flag = 0;
    struct sigaction hup_old;
    const int hup = sigaction(SIGHUP, NULL, &hup_old) == 0 && hup_old.sa_handler != SIG_IGN; /* not under nohup */
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (hup) signal(SIGHUP, on_signal); /* the terminal went away: stop as on SIGTERM */
    signal(SIGUSR1, on_signal); /* mpirun forwards SIGUSR1 to the ranks (SIGTERM kills the job) */
    double t0 = dd_now();
    st = dd_train_run(resume ? NULL : &cfg, &o);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (hup) signal(SIGHUP, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    if (ps.steps) fclose(ps.steps);
    ps.steps = NULL;
    steps_state = NULL;
    if (ps.bar_shown) fprintf(stderr, "\n");
    if (st != DD_OK) goto fail;
    {
        /* every rank's arena peaks and peak RSS; the largest goes to parallel.json */
        double mem[5];
        if ((st = gather_memory(world, &mem_train, mem)) != DD_OK) goto fail;
        if (rank == 0 && (st = write_parallel_json(out, nranks, &srun, hosts, mem)) != DD_OK) goto fail;
    }
    if (interrupted) {
        if (rank == 0)
            fprintf(stderr, "distdpd %s: interrupted; %s/last.ckpt holds the state: continue with 'distdpd %s --resume %s'\n",
                    NAME, out, NAME, out);
        dd_heartbeat_final(hb, "preempted");
        ret = DD_EXIT_PREEMPTED;
        goto done;
    }
    dd_heartbeat_final(hb, "done");
    if (verbosity >= 0 && rank == 0) {
        dd_run_model rm;
        if (dd_run_model_load(out, "best", &rm) == DD_OK) {
            char desc[256];
            dd_model_describe(rm.model, desc, sizeof desc);
            printf("run:        %s (%s %s)\n", out, dd_train_task_name(rm.cfg.task), desc);
            dd_epoch_record b;
            if (read_best(out, &b)) {
                char a1[32], a2[32], a3[32], a4[32];
                printf("best epoch: %d: val NMSE %s dB, test NMSE %s dB, test ACLR %s dBc, test EVM %s dB\n", b.epoch,
                       dd_cli_fmt(a1, sizeof a1, b.val.nmse_db, 2), dd_cli_fmt(a2, sizeof a2, b.test.nmse_db, 2),
                       dd_cli_fmt(a3, sizeof a3, b.test.aclr.avg_db, 2), dd_cli_fmt(a4, sizeof a4, b.test.evm_db, 2));
                if (b.has_no_dpd) print_no_dpd_line(stdout, "baseline:   ", &b.no_dpd_test, &b.test);
                if (b.has_true)
                    printf("true PA:    with the DPD, test ACLR %s dBc, EVM %s dB (see config.json for the PA without it)\n",
                           dd_cli_fmt(a1, sizeof a1, b.true_test.aclr.avg_db, 2),
                           dd_cli_fmt(a2, sizeof a2, b.true_test.evm_db, 2));
            }
            dd_run_model_free(&rm);
        }
        if (srun.def && srun.def->print_summary) srun.def->print_summary(srun.self, stdout);
        printf("done in %.2f s\n", dd_now() - t0);
    }
    goto done;
fail:
    dd_heartbeat_final(hb, "failed");
    if (nranks > 1) {
        /* an error on one rank: say which, then take every rank down (the others may be
         * waiting in a collective: never leave them hanging) */
        dd_error_prefix(st, "rank %d of %d: ", rank, nranks);
        dd_cli_fail(NAME, st);
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, DD_EXIT_RUNTIME);
    }
    ret = dd_cli_fail(NAME, st);
done:
    dd_heartbeat_close(&hb);
    dd_run_lock_release(&lock);
    free(hosts);
    dd_strategy_stop(&srun);
    dd_comm_free(&world);
    dd_comm_finalize();
    return ret;
}

int dd_cmd_train_pa(int argc, char **argv) { return cmd_train(argc, argv, 0); }
int dd_cmd_train_dpd(int argc, char **argv) { return cmd_train(argc, argv, 1); }

/* ================================================================ I/Q files */

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

typedef enum { IQ_CSV, IQ_SIGMF, IQ_RAW } iq_kind;

static iq_kind iq_kind_of(const char *path) {
    if (ends_with(path, ".sigmf-meta") || ends_with(path, ".sigmf-data") || ends_with(path, ".sigmf")) return IQ_SIGMF;
    if (ends_with(path, ".cf32") || ends_with(path, ".bin") || ends_with(path, ".raw") || ends_with(path, ".iq"))
        return IQ_RAW;
    return IQ_CSV;
}

static dd_status read_iq(const char *path, dd_cf32 **x, size_t *n, double *fs) {
    *fs = 0;
    switch (iq_kind_of(path)) {
    case IQ_SIGMF: {
        char prefix[4200];
        snprintf(prefix, sizeof prefix, "%s", path);
        if (ends_with(prefix, ".sigmf")) prefix[strlen(prefix) - 6] = '\0';
        return dd_sigmf_read(prefix, x, n, fs);
    }
    case IQ_RAW: {
        int fd = -1;
        uint64_t sz = 0; /* a FIFO or a device is refused at once, not waited on or read forever */
        DD_TRY(dd_open_regular(path, &fd, &sz));
        FILE *f = fdopen(fd, "rb");
        if (!f) {
            const int e = errno;
            close(fd);
            return dd_error(DD_ERR_IO, "cannot open %s: %s", path, strerror(e));
        }
        if (sz % 8 != 0) {
            fclose(f);
            return dd_error(DD_ERR_FORMAT, "%s: %llu bytes is not a whole number of float32 I/Q pairs (8 bytes each)", path,
                            (unsigned long long)sz);
        }
        *n = (size_t)sz / 8;
        *x = dd_calloc(*n ? *n : 1, sizeof(dd_cf32));
        if (!*x) {
            fclose(f);
            return DD_ERR_NOMEM;
        }
        size_t got = fread(*x, sizeof(dd_cf32), *n, f);
        fclose(f);
        if (got != *n) {
            dd_free(*x);
            *x = NULL;
            return dd_error(DD_ERR_IO, "%s: read error", path);
        }
        for (size_t i = 0; i < *n; i++)
            if (!isfinite(crealf((*x)[i])) || !isfinite(cimagf((*x)[i]))) {
                dd_free(*x);
                *x = NULL;
                return dd_error(DD_ERR_RANGE, "%s: sample %zu is not finite", path, i);
            }
        return DD_OK;
    }
    default: return dd_csv_read_iq(path, x, n);
    }
}

/* A SigMF recording's name without .sigmf-meta, .sigmf-data or .sigmf. */
static void sigmf_prefix(const char *path, char *prefix, size_t cap) {
    snprintf(prefix, cap, "%s", path);
    size_t l = strlen(prefix);
    if (ends_with(prefix, ".sigmf-meta") || ends_with(prefix, ".sigmf-data"))
        prefix[l - 11] = '\0';
    else if (ends_with(prefix, ".sigmf"))
        prefix[l - 6] = '\0';
}

static dd_status write_iq(const char *path, const dd_cf32 *y, size_t n, double fs, const char *desc) {
    switch (iq_kind_of(path)) {
    case IQ_SIGMF: {
        char prefix[4200];
        sigmf_prefix(path, prefix, sizeof prefix);
        if (!(fs > 0)) return dd_error(DD_ERR_ARG, "%s: SigMF output needs the sample rate (give --fs)", path);
        return dd_sigmf_write(prefix, y, n, fs, DD_SIGMF_CF32_LE, desc);
    }
    case IQ_RAW: {
        char tmp[4300];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        FILE *f = fopen(tmp, "wb");
        if (!f) return dd_error(DD_ERR_IO, "%s: cannot write", tmp);
        int ok = fwrite(y, sizeof(dd_cf32), n, f) == n;
        ok = (fflush(f) == 0) && ok;
        ok = (fsync(fileno(f)) == 0) && ok;
        ok = (fclose(f) == 0) && ok;
        if (!ok || rename(tmp, path) != 0) {
            unlink(tmp);
            return dd_error(DD_ERR_IO, "%s: write failed", path);
        }
        return DD_OK;
    }
    default: return dd_csv_write_iq(path, y, n);
    }
}

/* The files an I/Q path names: itself, or a SigMF recording's -meta and -data files. */
static int iq_files(const char *path, char files[2][4200]) {
    if (iq_kind_of(path) != IQ_SIGMF) {
        snprintf(files[0], sizeof files[0], "%s", path);
        return 1;
    }
    char prefix[4200];
    sigmf_prefix(path, prefix, sizeof prefix);
    snprintf(files[0], sizeof files[0], "%.4180s.sigmf-meta", prefix);
    snprintf(files[1], sizeof files[1], "%.4180s.sigmf-data", prefix);
    return 2;
}

/* 1 when writing `out` would replace a file of `in` (the same file by device and inode:
 * also through links or another spelling of the path); *which receives that file. */
static int overwrites_input(const char *in, const char *out, char which[4200]) {
    char fi[2][4200], fo[2][4200];
    int ni = iq_files(in, fi), no = iq_files(out, fo);
    for (int a = 0; a < no; a++) {
        struct stat so;
        if (stat(fo[a], &so) != 0) continue;
        for (int b = 0; b < ni; b++) {
            struct stat si;
            if (stat(fi[b], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
                snprintf(which, 4200, "%.4199s", fi[b]);
                return 1;
            }
        }
    }
    return 0;
}

/* ================================================================ run */

static void help_run(void) {
    printf("usage: distdpd run --run RUN --in X --out Y [options]\n"
           "       distdpd run --run RUN --dpd-out FILE [--data DIR]\n"
           "\n"
           "Runs the best model of a training run (a PA model, or a DPD) over the I/Q file X\n"
           "of any length as one continuous stream (zero initial state, bounded memory) and\n"
           "writes the result to Y. Formats by extension: .csv (header I,Q), .sigmf-meta /\n"
           ".sigmf-data / .sigmf (SigMF cf32_le), .cf32 / .bin / .raw / .iq (interleaved\n"
           "float32 I,Q, little-endian). Samples are used as they are (no normalisation):\n"
           "feed the model the same scale as its training data.\n"
           "\n"
           "options:\n"
           "  --run RUN           run directory (or a checkpoint file)\n"
           "  --in X              input I/Q file\n"
           "  --out Y             output I/Q file\n"
           "  --ckpt C            best (default) or last\n"
           "  --through-pa        DPD runs: also pass the DPD output through the run's PA model\n"
           "                      (writes PA_model(DPD(x)); with the run's spec, prints it\n"
           "                      against G x next to the PA model without the DPD)\n"
           "  --dpd-out FILE      DPD runs: OpenDPD's run_dpd output instead of (or as well as)\n"
           "                      --in/--out: the test split of the data set as one stream,\n"
           "                      CSV with columns I,Q,I_dpd,Q_dpd (input, DPD output), and\n"
           "                      the PA model's result with and without the DPD\n"
           "  --data DIR          the data set of --dpd-out (default: the run's)\n"
           "  --fs HZ             sample rate for SigMF output (default: the input's, else the\n"
           "                      run's data set)\n"
           "  -q, --quiet         no summary;  -v, --verbose: more log output\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage error\n");
}

int dd_cmd_run(int argc, char **argv) {
    static const char *const NAME = "run";
    enum { O_RUN = 256, O_IN, O_OUT, O_CKPT, O_THROUGH, O_FS, O_DPD_OUT, O_DATA };
    static const struct option longopts[] = {
        {"run", required_argument, NULL, O_RUN},       {"in", required_argument, NULL, O_IN},
        {"out", required_argument, NULL, O_OUT},       {"ckpt", required_argument, NULL, O_CKPT},
        {"through-pa", no_argument, NULL, O_THROUGH},  {"fs", required_argument, NULL, O_FS},
        {"dpd-out", required_argument, NULL, O_DPD_OUT}, {"data", required_argument, NULL, O_DATA},
        {"verbose", no_argument, NULL, 'v'},           {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0}};
    static const char *const ckpts[] = {"best", "last", NULL};
    const char *run = NULL, *in = NULL, *out = NULL, *dpd_out = NULL, *data = NULL;
    int ck = 0, through = 0, verbosity = 0, c, rc;
    double fs = 0;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_RUN: run = optarg; break;
        case O_IN: in = optarg; break;
        case O_OUT: out = optarg; break;
        case O_CKPT:
            if ((rc = dd_cli_parse_choice(NAME, "--ckpt", optarg, ckpts, &ck))) return rc;
            break;
        case O_THROUGH: through = 1; break;
        case O_DPD_OUT: dpd_out = optarg; break;
        case O_DATA: data = optarg; break;
        case O_FS:
            if ((rc = dd_cli_parse_double(NAME, "--fs", optarg, 1.0, 1e13, &fs))) return rc;
            break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help_run(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!run) return dd_cli_usage(NAME, "missing --run RUN");
    if (data && !dpd_out) return dd_cli_usage(NAME, "--data is the data set of --dpd-out");
    if (dpd_out && !in && !out) { /* OpenDPD's run_dpd alone */
        dd_cli_log_init(verbosity);
        dd_run_model rd;
        dd_status sd = dd_run_model_load(run, ckpts[ck], &rd);
        if (sd != DD_OK) return dd_cli_fail(NAME, sd);
        int r = dd_cli_run_dpd_out(NAME, &rd, run, data, dpd_out, verbosity);
        dd_run_model_free(&rd);
        return r;
    }
    if (!in) return dd_cli_usage(NAME, "missing --in X");
    if (!out) return dd_cli_usage(NAME, "missing --out Y");
    char same[4200];
    if (overwrites_input(in, out, same))
        return dd_cli_usage(NAME, "--out %s would overwrite the input %s: write the output to another file", out, same);
    dd_cli_log_init(verbosity);
    dd_run_model rm;
    dd_cf32 *x = NULL, *y = NULL, *z = NULL;
    size_t n = 0;
    double fs_in = 0;
    int ret = DD_EXIT_OK;
    dd_status st = dd_run_model_load(run, ckpts[ck], &rm);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    if (through && !rm.pa_model) {
        dd_run_model_free(&rm);
        return dd_cli_usage(NAME, "--through-pa needs a DPD run; %s is a PA model run", run);
    }
    double t0 = dd_now();
    if ((st = read_iq(in, &x, &n, &fs_in)) != DD_OK) goto fail;
    if (n == 0) {
        st = dd_error(DD_ERR_FORMAT, "%s: no samples", in);
        goto fail;
    }
    y = dd_calloc(n, sizeof *y);
    if (!y) {
        st = DD_ERR_NOMEM;
        goto fail;
    }
    if ((st = dd_model_run_stream(rm.model, rm.params, x, y, n)) != DD_OK) goto fail;
    const dd_cf32 *res = y;
    if (through) {
        z = dd_calloc(n, sizeof *z);
        if (!z) {
            st = DD_ERR_NOMEM;
            goto fail;
        }
        if ((st = dd_model_run_stream(rm.pa_model, rm.pa_params, y, z, n)) != DD_OK) goto fail;
        res = z;
    }
    if (!(fs > 0)) fs = fs_in > 0 ? fs_in : rm.has_spec ? rm.spec.fs : 0;
    char desc[512];
    snprintf(desc, sizeof desc, "distdpd run: %s %s of %s, epoch %d%s", dd_train_task_name(rm.cfg.task),
             dd_model_name(rm.model), run, rm.epoch, through ? ", through its PA model" : "");
    if ((st = write_iq(out, res, n, fs, desc)) != DD_OK) goto fail;
    if (verbosity >= 0)
        printf("%s: %zu samples through %s (%s, epoch %d%s) in %.3f s\n", out, n, dd_model_name(rm.model),
               rm.cfg.task == DD_TRAIN_PA ? "PA model" : "DPD", rm.epoch, through ? ", then its PA model" : "",
               dd_now() - t0);
    /* a DPD result through the PA model: with its baseline (the PA model alone) */
    if (through && rm.has_spec && verbosity >= 0 && dd_cli_dpd_baseline(stdout, &rm, &rm.spec, x, y, n) != DD_OK)
        printf("baseline not measured: %s\n", dd_last_error());
    if (dpd_out && (rc = dd_cli_run_dpd_out(NAME, &rm, run, data, dpd_out, verbosity)) != DD_EXIT_OK) {
        ret = rc;
        goto cleanup;
    }
    goto cleanup;
fail:
    ret = dd_cli_fail(NAME, st);
cleanup:
    dd_free(x);
    dd_free(y);
    dd_free(z);
    dd_run_model_free(&rm);
    return ret;
}

/* ================================================================ eval */

static void help_eval(void) {
    printf("usage: distdpd eval --run RUN [--data DIR] [options]\n"
           "\n"
           "Re-evaluates a run's best (or last) model on the validation and test splits of\n"
           "DIR (default: the data set the run was trained on) with the OpenDPD metrics:\n"
           "NMSE (segmented), ACLR (left, right, average) and spectral EVM. A PA run compares\n"
           "the model with the measured output; a DPD run compares PA_model(DPD(x)) with G x\n"
           "next to its baseline, the same PA model without the DPD (PA_model(x) vs G x, and\n"
           "the improvement in dB; JSON keys *_no_dpd_db, *_improvement_db) and, on simulated\n"
           "data (pa.json / simulation.json), also measures the true PA without and with the\n"
           "DPD (JSON keys true_*, no_dpd_val_*, no_dpd_test_*).\n"
           "\n"
           "options:\n"
           "  --run RUN           run directory (or a checkpoint file)\n"
           "  --data DIR          data set (default: the run's)\n"
           "  --ckpt C            best (default) or last\n"
           "  --json              print one JSON object with every number\n"
           "  --no-true-pa        skip the true-PA measurement\n"
           "  -q, --quiet         errors only;  -v, --verbose: more log output\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage error\n");
}

static void json_metrics(cJSON *o, const char *p, const dd_eval_metrics *m) {
    char k[64];
    const char *names[6] = {"loss", "nmse_db", "aclr_l_db", "aclr_r_db", "aclr_avg_db", "evm_db"};
    double v[6] = {m->loss, m->nmse_db, m->aclr.left_db, m->aclr.right_db, m->aclr.avg_db, m->evm_db};
    for (int i = 0; i < 6; i++) {
        snprintf(k, sizeof k, "%s_%s", p, names[i]);
        if (isfinite(v[i]))
            cJSON_AddNumberToObject(o, k, v[i]);
        else
            cJSON_AddNullToObject(o, k);
    }
}

static void print_row(const char *what, const dd_eval_metrics *m) {
    char a[32], b[32], c[32], d[32], e[32];
    printf("%-26s %9s %9s %9s %9s %9s\n", what, dd_cli_fmt(a, sizeof a, m->nmse_db, 2),
           dd_cli_fmt(b, sizeof b, m->aclr.left_db, 2), dd_cli_fmt(c, sizeof c, m->aclr.right_db, 2),
           dd_cli_fmt(d, sizeof d, m->aclr.avg_db, 2), dd_cli_fmt(e, sizeof e, m->evm_db, 2));
}

int dd_cmd_eval(int argc, char **argv) {
    static const char *const NAME = "eval";
    enum { O_RUN = 256, O_DATA, O_CKPT, O_JSON, O_NOTRUE };
    static const struct option longopts[] = {
        {"run", required_argument, NULL, O_RUN},   {"data", required_argument, NULL, O_DATA},
        {"ckpt", required_argument, NULL, O_CKPT}, {"json", no_argument, NULL, O_JSON},
        {"no-true-pa", no_argument, NULL, O_NOTRUE}, {"verbose", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},         {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static const char *const ckpts[] = {"best", "last", NULL};
    const char *run = NULL, *data = NULL;
    int ck = 0, json = 0, notrue = 0, verbosity = 0, c, rc;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_RUN: run = optarg; break;
        case O_DATA: data = optarg; break;
        case O_CKPT:
            if ((rc = dd_cli_parse_choice(NAME, "--ckpt", optarg, ckpts, &ck))) return rc;
            break;
        case O_JSON: json = 1; break;
        case O_NOTRUE: notrue = 1; break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help_eval(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!run) return dd_cli_usage(NAME, "missing --run RUN");
    dd_cli_log_init(verbosity);
    dd_run_model rm;
    dd_dataset *ds = NULL;
    dd_pa *pa = NULL;
    int ret = DD_EXIT_OK;
    dd_status st = dd_run_model_load(run, ckpts[ck], &rm);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    char databuf[4200], dir[4200];
    if (!data) data = rm.data;
    data = dd_rf_resolve_dataset(data, databuf, sizeof databuf);
    dd_epoch_record rec;
    dd_eval_metrics base[2];
    int found = 0;
    if ((st = dd_dataset_load(data, &ds)) != DD_OK) goto fail;
    if (rm.cfg.task != DD_TRAIN_PA && !notrue) {
        data_dir(data, dir, sizeof dir);
        if ((st = dd_sim_pa_load(dir, ds, &pa, &found)) != DD_OK) goto fail;
    }
    if ((st = dd_run_evaluate(run, ckpts[ck], ds, pa, &rec, base)) != DD_OK) goto fail;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "run", run);
        cJSON_AddStringToObject(o, "data", data);
        cJSON_AddStringToObject(o, "task", dd_train_task_name(rm.cfg.task));
        cJSON_AddStringToObject(o, "model", dd_model_name(rm.model));
        cJSON_AddNumberToObject(o, "epoch", rec.epoch);
        json_metrics(o, "val", &rec.val);
        json_metrics(o, "test", &rec.test);
        if (rec.has_no_dpd) {
            const dd_eval_metrics *nd[2] = {&rec.no_dpd_val, &rec.no_dpd_test}, *wd[2] = {&rec.val, &rec.test};
            for (int k = 0; k < 2; k++) {
                char keys[DD_NO_DPD_KEYS][48];
                double vals[DD_NO_DPD_KEYS];
                dd_eval_no_dpd_keys(k == 0 ? "val" : "test", nd[k], wd[k], keys, vals);
                for (int i = 0; i < DD_NO_DPD_KEYS; i++) {
                    if (isfinite(vals[i]))
                        cJSON_AddNumberToObject(o, keys[i], vals[i]);
                    else
                        cJSON_AddNullToObject(o, keys[i]);
                }
            }
        }
        if (rec.has_true) {
            json_metrics(o, "true_val", &rec.true_val);
            json_metrics(o, "true_test", &rec.true_test);
            json_metrics(o, "no_dpd_val", &base[0]);
            json_metrics(o, "no_dpd_test", &base[1]);
        }
        cJSON_AddNumberToObject(o, "eval_time_s", rec.eval_time_s);
        char *txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (txt) printf("%s\n", txt);
        cJSON_free(txt);
    } else if (verbosity >= 0) {
        char desc[256];
        dd_model_describe(rm.model, desc, sizeof desc);
        printf("run %s (%s %s), %s checkpoint of epoch %d, data %s\n", run, dd_train_task_name(rm.cfg.task), desc,
               ckpts[ck], rec.epoch, data);
        printf("%-26s %9s %9s %9s %9s %9s\n", "", "NMSE dB", "ACLR L", "ACLR R", "ACLR avg", "EVM dB");
        const char *what = rm.cfg.task == DD_TRAIN_PA ? "model" : "PA model + DPD";
        char lab[64];
        if (rec.has_no_dpd) print_row("val: PA model, no DPD", &rec.no_dpd_val);
        snprintf(lab, sizeof lab, "val: %s", what);
        print_row(lab, &rec.val);
        if (rec.has_no_dpd) print_row("test: PA model, no DPD", &rec.no_dpd_test);
        snprintf(lab, sizeof lab, "test: %s", what);
        print_row(lab, &rec.test);
        if (rec.has_no_dpd) print_no_dpd_line(stdout, "", &rec.no_dpd_test, &rec.test);
        if (rec.has_true) {
            print_row("val: true PA, no DPD", &base[0]);
            print_row("val: true PA + DPD", &rec.true_val);
            print_row("test: true PA, no DPD", &base[1]);
            print_row("test: true PA + DPD", &rec.true_test);
        }
    }
    goto cleanup;
fail:
    ret = dd_cli_fail(NAME, st);
cleanup:
    dd_pa_destroy(&pa);
    dd_dataset_free(&ds);
    dd_run_model_free(&rm);
    return ret;
}
