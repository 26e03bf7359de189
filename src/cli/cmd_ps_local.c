/* distdpd ps-local: a whole parameter-server training cluster on this machine (docs/ps.md,
 * "Training"): fresh keys, the cluster and allow files in RUN/ps/, S `distdpd ps-server`
 * processes, the coordinator (`train-pa|train-dpd ... --ps-role coordinator`) and W
 * workers, all on loopback; everything is ended when the coordinator ends. */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/net.h"

#define MAXP 64

static volatile sig_atomic_t got_signal;
static void on_sig(int s) { got_signal = s; }

static void help(void) {
    printf("usage: distdpd ps-local --servers S --workers W [--replicas R] [--spare-keys K]\n"
           "                        [--timeout SEC] -- train-pa|train-dpd ARGS\n"
           "\n"
           "Starts a parameter-server training on this machine: fresh CURVE keys, the cluster\n"
           "and allow files in RUN/ps/ (RUN = the --out of ARGS), S ps-server processes, the\n"
           "coordinator (ARGS --ps-role coordinator: owns RUN, prints the progress) and W\n"
           "workers (ARGS), all on loopback ports; ends them all when the coordinator ends.\n"
           "RUN/ps.json: servers, workers, block placement, staleness histograms, pushes,\n"
           "resends. Logs: RUN/ps/*.log. ARGS take the training options and --staleness,\n"
           "--stale-lr, --lease-ms; a --straggle delay_ms=D in ARGS goes to the last worker only.\n"
           "The coordinator hands out the first batch when all W workers have joined (ARGS\n"
           "--ps-min-workers N: when N have).\n"
           "ARGS --resume RUN [--epochs E] continues RUN from RUN/last.ckpt on a fresh cluster (the\n"
           "previous RUN/ps/ moves to RUN/ps.N; the optimiser, data and PA run from\n"
           "RUN/config.json): the coordinator restores the servers' blocks, optimiser state and\n"
           "version clocks (docs/ps.md, \"Resuming\").\n"
           "\n"
           "  --servers S     parameter servers (1..16, default 2)\n"
           "  --workers W     workers (1..32, default 2)\n"
           "  --replicas R    copies of each block beyond the primary (default min(1, S-1))\n"
           "  --optimizer-json J  (rare) the cluster file's optimizer object; default: from\n"
           "                  ARGS' --opt/--weight-decay/--momentum (the servers must apply the\n"
           "                  run's optimiser)\n"
           "  --spare-keys K  also write K enrolled worker keys RUN/ps/spareN.key for workers\n"
           "                  started by hand (--ps RUN/ps/cluster.json --key RUN/ps/spareN.key)\n"
           "  --timeout SEC   end everything after SEC seconds (default 86400)\n"
           "  -h, --help      this help\n"
           "\n"
           "exit status: the coordinator's (0 done, 75 stopped by a signal, 1 error), 2 usage\n");
}

int dd_cmd_ps_local(int argc, char **argv) {
    const char *NAME = "ps-local";
    size_t ns = 2, nw = 2, spare = 0, v;
    double timeout = 86400;
    long replicas = -1;
    const char *optim_json = NULL;
    int rc, i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help();
            return DD_EXIT_OK;
        }
        if (i + 1 >= argc) return dd_cli_usage(NAME, "%s needs a value (or unknown option; see --help)", a);
        const char *val = argv[++i];
        if (strcmp(a, "--servers") == 0) {
            if ((rc = dd_cli_parse_size(NAME, "--servers", val, 1, 16, &ns))) return rc;
        } else if (strcmp(a, "--workers") == 0) {
            if ((rc = dd_cli_parse_size(NAME, "--workers", val, 1, 32, &nw))) return rc;
        } else if (strcmp(a, "--replicas") == 0) {
            if ((rc = dd_cli_parse_size(NAME, "--replicas", val, 0, 15, &v))) return rc;
            replicas = (long)v;
        } else if (strcmp(a, "--spare-keys") == 0) {
            if ((rc = dd_cli_parse_size(NAME, "--spare-keys", val, 0, 32, &spare))) return rc;
        } else if (strcmp(a, "--timeout") == 0) {
            if ((rc = dd_cli_parse_double(NAME, "--timeout", val, 1, 1e7, &timeout))) return rc;
        } else if (strcmp(a, "--optimizer-json") == 0) {
            optim_json = val;
        } else {
            return dd_cli_usage(NAME, "unknown option '%s' (the training's options go after --)", a);
        }
    }
    if (i >= argc || (strcmp(argv[i], "train-pa") != 0 && strcmp(argv[i], "train-dpd") != 0))
        return dd_cli_usage(NAME, "expected -- train-pa|train-dpd ARGS after the options");
    if (replicas < 0) replicas = ns > 1 ? 1 : 0;
    if ((size_t)replicas >= ns) return dd_cli_usage(NAME, "--replicas %ld needs at least %ld servers", replicas, replicas + 1);
    char **targs = argv + i;
    int ntargs = argc - i;
    int has_minw = 0;
    const char *out = NULL, *opt = "adamw", *wd = NULL, *mom = NULL, *straggle = NULL, *resume = NULL, *tdata = NULL;
    for (int k = 1; k < ntargs; k++) {
        const char *a = targs[k], *nx = k + 1 < ntargs ? targs[k + 1] : NULL;
        if (!nx) break;
        if (strcmp(a, "--out") == 0) out = nx;
        else if (strcmp(a, "--opt") == 0) opt = nx;
        else if (strcmp(a, "--weight-decay") == 0) wd = nx;
        else if (strcmp(a, "--momentum") == 0) mom = nx;
        else if (strcmp(a, "--straggle") == 0) straggle = nx;
        else if (strcmp(a, "--ps") == 0 || strcmp(a, "--key") == 0 || strcmp(a, "--ps-role") == 0 || strcmp(a, "--allow") == 0)
            return dd_cli_usage(NAME, "%s is set by ps-local: leave it out of ARGS", a);
        else if (strcmp(a, "--resume") == 0) resume = nx;
        else if (strcmp(a, "--ps-min-workers") == 0) has_minw = 1;
        else if (strcmp(a, "--data") == 0) tdata = nx;
    }
    if (resume && out && strcmp(out, resume) != 0) return dd_cli_usage(NAME, "--out and --resume name different runs");
    if (resume) out = resume;
    if (!out) return dd_cli_usage(NAME, "ARGS need --out RUN (the run directory; the cluster files go to RUN/ps/)");
    struct stat sb;
    char dir[4200], path[4400], pub[DD_NET_KEY_Z85 + 1];
    /* --resume: the run's optimiser (for the cluster file), data and PA run (for the
     * workers, which get --out RUN instead of --resume RUN) from RUN/config.json */
    char ropt[512] = "", rdata[4200] = "", rpa[4200] = "";
    if (resume) {
        snprintf(path, sizeof path, "%s/config.json", resume);
        char *txt = NULL;
        FILE *f = fopen(path, "rb");
        if (f) {
            fseek(f, 0, SEEK_END);
            long len = ftell(f);
            fseek(f, 0, SEEK_SET);
            txt = len > 0 && len < (1L << 26) ? malloc((size_t)len + 1) : NULL;
            if (txt) txt[fread(txt, 1, (size_t)len, f)] = '\0';
            fclose(f);
        }
        cJSON *root = txt ? cJSON_Parse(txt) : NULL;
        free(txt);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "config");
        const cJSON *ko = cJSON_GetObjectItemCaseSensitive(c, "opt");
        if (!cJSON_IsString(ko)) {
            cJSON_Delete(root);
            return dd_cli_usage(NAME, "--resume %s: %s is missing or has no config.opt (not a run directory)", resume, path);
        }
        static const char *const fld[] = {"momentum", "dampening", "beta1", "beta2", "eps", "weight_decay"};
        int n = snprintf(ropt, sizeof ropt, "{\"kind\": \"%s\"", ko->valuestring);
        for (size_t k = 0; k < sizeof fld / sizeof fld[0]; k++) {
            const cJSON *jv = cJSON_GetObjectItemCaseSensitive(c, fld[k]);
            if (cJSON_IsNumber(jv) && n < (int)sizeof ropt) n += snprintf(ropt + n, sizeof ropt - (size_t)n, ", \"%s\": %.17g", fld[k], jv->valuedouble);
        }
        const cJSON *ne = cJSON_GetObjectItemCaseSensitive(c, "nesterov");
        if (n < (int)sizeof ropt)
            snprintf(ropt + n, sizeof ropt - (size_t)n, ", \"nesterov\": %s}", cJSON_IsNumber(ne) && ne->valuedouble != 0 ? "true" : "false");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "data"), *pr = cJSON_GetObjectItemCaseSensitive(root, "pa_run");
        if (cJSON_IsString(d)) snprintf(rdata, sizeof rdata, "%s", d->valuestring);
        if (cJSON_IsString(pr)) snprintf(rpa, sizeof rpa, "%s", pr->valuestring);
        cJSON_Delete(root);
        if (!optim_json) optim_json = ropt;
        if (tdata) snprintf(rdata, sizeof rdata, "%s", tdata);
        if (!rdata[0]) return dd_cli_usage(NAME, "--resume %s: %s names no data set: give --data", resume, path);
    }
    snprintf(dir, sizeof dir, "%s/ps", out);
    if (resume && stat(dir, &sb) == 0) { /* the previous cluster's files, kept */
        char old[4400];
        for (int k = 1;; k++) {
            snprintf(old, sizeof old, "%s/ps.%d", out, k);
            if (stat(old, &sb) != 0) break;
        }
        if (rename(dir, old) != 0) {
            fprintf(stderr, "distdpd ps-local: error: cannot move %s to %s: %s\n", dir, old, strerror(errno));
            return DD_EXIT_RUNTIME;
        }
    }
    if (stat(dir, &sb) == 0) return dd_cli_usage(NAME, "%s exists: RUN must be a new run directory", dir);
    mkdir(out, 0755);
    if (mkdir(dir, 0700) != 0) {
        fprintf(stderr, "distdpd ps-local: error: cannot create %s: %s\n", dir, strerror(errno));
        return DD_EXIT_RUNTIME;
    }
    dd_cli_log_init(0);
    /* keys, allow file, cluster file */
    char cluster[4400], allow[4400], ckey[4400];
    snprintf(cluster, sizeof cluster, "%s/cluster.json", dir);
    snprintf(allow, sizeof allow, "%s/allow.txt", dir);
    FILE *fa = fopen(allow, "w"), *fc = fopen(cluster, "w");
    if (!fa || !fc) {
        fprintf(stderr, "distdpd ps-local: error: cannot write %s\n", !fa ? allow : cluster);
        return DD_EXIT_RUNTIME;
    }
    fprintf(fa, "# the workers' and the coordinator's keys (written by distdpd ps-local)\n");
    dd_status st = DD_OK;
    for (size_t w = 0; st == DD_OK && w < nw + spare; w++) {
        snprintf(path, sizeof path, "%s/%s%zu", dir, w < nw ? "w" : "spare", w < nw ? w : w - nw);
        if ((st = dd_net_keygen(path, 0, pub)) == DD_OK) fprintf(fa, "%s %s%zu\n", pub, w < nw ? "w" : "spare", w < nw ? w : w - nw);
    }
    snprintf(path, sizeof path, "%s/coordinator", dir);
    snprintf(ckey, sizeof ckey, "%s/coordinator.key", dir);
    if (st == DD_OK && (st = dd_net_keygen(path, 0, pub)) == DD_OK) fprintf(fa, "%s coordinator\n", pub);
    fclose(fa);
    char ocfg[640]; /* a user-given or resumed optimiser object (up to 512 bytes) */
    if (optim_json)
        snprintf(ocfg, sizeof ocfg, "%s", optim_json);
    else
        snprintf(ocfg, sizeof ocfg, "{\"kind\": \"%s\"%s%s%s%s}", opt, wd ? ", \"weight_decay\": " : "", wd ? wd : "",
                 mom ? ", \"momentum\": " : "", mom ? mom : "");
    int cport = dd_net_free_port();
    fprintf(fc, "{\"replicas\": %ld, \"optimizer\": %s,\n \"coordinator\": {\"address\": \"tcp://127.0.0.1:%d\", \"public_key\": \"%s\"},\n \"servers\": [\n",
            replicas, ocfg, cport, pub);
    int sport[16];
    for (size_t s = 0; st == DD_OK && s < ns; s++) {
        snprintf(path, sizeof path, "%s/s%zu", dir, s);
        if ((st = dd_net_keygen(path, 0, pub)) != DD_OK) break;
        sport[s] = dd_net_free_port();
        fprintf(fc, "  {\"name\": \"s%zu\", \"address\": \"tcp://127.0.0.1:%d\", \"public_key\": \"%s\"}%s\n", s, sport[s], pub,
                s + 1 < ns ? "," : "");
    }
    fprintf(fc, "]}\n");
    fclose(fc);
    if (st != DD_OK || cport < 0) return dd_cli_fail(NAME, st ? st : dd_error(DD_ERR_IO, "no free loopback port"));

    pid_t pid[MAXP];
    int np = 0;
    memset(pid, 0, sizeof pid);
    signal(SIGINT, on_sig);
    signal(SIGTERM, on_sig);
    /* servers */
    for (size_t s = 0; s < ns; s++) {
        char bind[64], key[4400], rep[24], log[4400];
        snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", sport[s]);
        snprintf(key, sizeof key, "%s/s%zu.key", dir, s);
        snprintf(rep, sizeof rep, "%ld", replicas);
        snprintf(log, sizeof log, "%s/s%zu.log", dir, s);
        char *sa[] = {"distdpd", "ps-server", "--bind", bind, "--key", key, "--allow", allow, "--cluster", cluster,
                      "--replicas", rep, NULL};
        pid[np++] = dd_cli_spawn(NAME, sa, log);
    }
    /* the coordinator (without --straggle), then the workers */
    char **ca = calloc((size_t)ntargs + 16, sizeof *ca);
    if (!ca) return DD_EXIT_RUNTIME;
    int nc = 0;
    ca[nc++] = "distdpd";
    for (int k = 0; k < ntargs; k++) {
        /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): targs[k], k < ntargs, is an argv string */
        if (strcmp(targs[k], "--straggle") == 0 && k + 1 < ntargs) {
            k++;
            continue;
        }
        ca[nc++] = targs[k];
    }
    int base = nc;
    /* the workers' arguments: --resume RUN becomes --out RUN with the run's data (and PA run) */
    char **wa = calloc((size_t)ntargs + 24, sizeof *wa);
    if (!wa) {
        free(ca);
        return DD_EXIT_RUNTIME;
    }
    int nwa = 0;
    for (int k = 0; k < base; k++) {
        if (strcmp(ca[k], "--ps-min-workers") == 0 && k + 1 < base) { /* the coordinator's only */
            k++;
            continue;
        }
        if (resume && strcmp(ca[k], "--resume") == 0 && k + 1 < base) {
            wa[nwa++] = "--out";
            wa[nwa++] = ca[++k];
            continue;
        }
        wa[nwa++] = ca[k];
    }
    if (resume && !tdata) {
        wa[nwa++] = "--data";
        wa[nwa++] = rdata;
    }
    if (resume && rpa[0]) {
        wa[nwa++] = "--pa-run";
        wa[nwa++] = rpa;
    }
    ca[nc++] = "--ps";
    ca[nc++] = cluster;
    ca[nc++] = "--key";
    ca[nc++] = ckey;
    ca[nc++] = "--ps-role";
    ca[nc++] = "coordinator";
    ca[nc++] = "--allow";
    ca[nc++] = allow;
    char minw[16];
    if (!has_minw) { /* start when every worker has joined: the batches are shared from the first */
        snprintf(minw, sizeof minw, "%zu", nw);
        ca[nc++] = "--ps-min-workers";
        ca[nc++] = minw;
    }
    ca[nc] = NULL;
    const pid_t coord = dd_cli_spawn(NAME, ca, NULL);
    pid[np++] = coord;
    char wkey[32][4400], wlog[4400];
    free(ca);
    ca = wa;
    base = nwa;
    for (size_t w = 0; w < nw; w++) {
        nc = base;
        snprintf(wkey[w], sizeof wkey[w], "%s/w%zu.key", dir, w);
        ca[nc++] = "--ps";
        ca[nc++] = cluster;
        ca[nc++] = "--key";
        ca[nc++] = wkey[w];
        if (straggle && w + 1 == nw) {
            ca[nc++] = "--straggle";
            ca[nc++] = (char *)straggle;
        }
        ca[nc++] = "-q";
        ca[nc] = NULL;
        snprintf(wlog, sizeof wlog, "%s/w%zu.log", dir, w);
        pid_t wp = dd_cli_spawn(NAME, ca, wlog);
        pid[np++] = wp;
        snprintf(path, sizeof path, "%s/w%zu.pid", dir, w);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d\n", (int)wp);
            fclose(f);
        }
    }
    free(ca);
    fprintf(stderr, "distdpd ps-local: %zu servers, %zu workers and the coordinator (pid %d) on loopback; files in %s\n", ns, nw,
            (int)coord, dir);
    /* wait for the coordinator (at most --timeout) */
    int status = 0, ret = DD_EXIT_RUNTIME, forwarded = 0;
    double t0 = dd_now();
    for (;;) {
        pid_t r = waitpid(coord, &status, WNOHANG);
        if (r == coord) break;
        if (got_signal && !forwarded) {
            kill(coord, SIGTERM); /* the coordinator stops after its step and writes last.ckpt */
            forwarded = 1;
        }
        if (dd_now() - t0 > timeout) {
            fprintf(stderr, "distdpd ps-local: error: --timeout %g s reached: ending every process\n", timeout);
            kill(coord, SIGKILL);
            waitpid(coord, &status, 0);
            status = -1;
            break;
        }
        /* reap workers that ended */
        for (int k = 0; k < np; k++)
            if (pid[k] > 0 && pid[k] != coord && waitpid(pid[k], NULL, WNOHANG) == pid[k]) pid[k] = 0;
        usleep(20000);
    }
    for (int k = 0; k < np; k++)
        if (pid[k] == coord) pid[k] = 0;
    if (status >= 0 && WIFEXITED(status)) ret = WEXITSTATUS(status);
    /* workers were told the end; servers and stragglers are stopped */
    for (int t = 0; t < 300; t++) {
        int left = 0;
        for (int k = (int)ns; k < np; k++)
            if (pid[k] > 0) {
                if (waitpid(pid[k], NULL, WNOHANG) == pid[k]) pid[k] = 0;
                else left++;
            }
        if (!left) break;
        usleep(10000);
    }
    dd_cli_end_all(pid, np, 3000);
    return ret;
}
