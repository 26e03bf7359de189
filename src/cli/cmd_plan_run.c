/* `distdpd plan --run RUN [--run RUN2 ...]`: the data-parallel plan of a measured run.
 * The compute time per step comes from the run itself (RUN/dp_steps.csv: the median of
 * step - exposed communication over its steps; a one-process run: metrics.jsonl's epoch
 * time / batches per epoch), --batch is the GLOBAL batch (strong scaling: N ranks take
 * B/N frames each, so the compute per rank is the run's x R/N), and the predicted
 * efficiency is printed beside the measured one at every rank count a run used: the
 * rows no run measured are marked as such. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cmd_plan.h"
#include "distdpd/comm.h"
#include "distdpd/plan.h"

typedef struct {
    const char *path;
    int ranks;           /* parallel.json "ranks" (1 without it) */
    double batch;        /* config.json config.batch: the global batch */
    double params;       /* config.json model.n_params */
    double step_s;       /* median measured step time */
    double compute_s;    /* median step - exposed communication */
    double exposed_s;    /* median exposed communication */
    size_t nsteps;       /* steps measured */
    int hosts;           /* parallel.json distinct_hosts (1 without it) */
    int per_step;        /* measured step by step (dp_steps.csv), not from epoch times */
} run_meas;

static cJSON *read_json(const char *NAME, const char *run, const char *file, int need) {
    char path[4200], *txt = NULL;
    snprintf(path, sizeof path, "%s/%s", run, file);
    if (dd_read_text(path, &txt, NULL) != DD_OK) {
        if (need) fprintf(stderr, "distdpd %s: error: --run %s: %s\n", NAME, run, dd_last_error());
        dd_error_clear();
        return NULL;
    }
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    if (!j && need) fprintf(stderr, "distdpd %s: error: %s: not valid JSON\n", NAME, path);
    return j;
}

static double num_at(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (x && b) x = cJSON_GetObjectItemCaseSensitive(x, b);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n) {
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The run's configuration and measured step; 0 or the exit status (errors printed). */
static int measure_run(const char *NAME, const char *run, run_meas *m) {
    memset(m, 0, sizeof *m);
    m->path = run;
    m->ranks = 1;
    m->hosts = 1;
    cJSON *cfg = read_json(NAME, run, "config.json", 1);
    if (!cfg) return DD_EXIT_RUNTIME;
    m->batch = num_at(cfg, "config", "batch");
    m->params = num_at(cfg, "model", "n_params");
    double batches = num_at(cfg, "data_stats", "batches_per_epoch");
    cJSON_Delete(cfg);
    if (!(m->batch >= 1) || !(m->params >= 1)) {
        fprintf(stderr, "distdpd %s: error: %s/config.json: no config.batch or model.n_params (not a training run?)\n",
                NAME, run);
        return DD_EXIT_RUNTIME;
    }
    cJSON *par = read_json(NAME, run, "parallel.json", 0);
    if (par) {
        double r = num_at(par, "ranks", NULL), h = num_at(par, "distinct_hosts", NULL);
        if (r >= 1) m->ranks = (int)r;
        if (h >= 1) m->hosts = (int)h;
        cJSON_Delete(par);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/dp_steps.csv", run);
    FILE *f = fopen(path, "r");
    if (f) { /* rows: epoch,batch,step_s,comm_s,exposed_s,... (rank 0's) */
        size_t cap = 1024, n = 0;
        double *st = malloc(cap * sizeof *st), *cp = malloc(cap * sizeof *cp), *ex = malloc(cap * sizeof *ex);
        char line[512];
        int first = 1;
        while (fgets(line, sizeof line, f)) {
            if (!st || !cp || !ex) break; /* out of memory: the medians are skipped */
            if (first) {
                first = 0;
                continue; /* header */
            }
            int e;
            unsigned long long b;
            double s, c, x;
            if (sscanf(line, "%d,%llu,%lf,%lf,%lf", &e, &b, &s, &c, &x) != 5 || !isfinite(s) || !isfinite(x) || s <= 0)
                continue;
            if (b == 1) continue; /* the first step of an epoch holds the set-up */
            if (n == cap) {
                cap *= 2;
                double *a1 = realloc(st, cap * sizeof *st), *a2 = a1 ? realloc(cp, cap * sizeof *cp) : NULL,
                       *a3 = a2 ? realloc(ex, cap * sizeof *ex) : NULL;
                if (a1) st = a1;
                if (a2) cp = a2;
                if (!a3) break;
                ex = a3;
            }
            st[n] = s;
            cp[n] = s - x > 0 ? s - x : 0;
            ex[n] = x;
            n++;
        }
        fclose(f);
        m->nsteps = n;
        m->per_step = 1;
        if (st && cp && ex) {
            m->step_s = median(st, n);
            m->compute_s = median(cp, n);
            m->exposed_s = median(ex, n);
        }
        free(st);
        free(cp);
        free(ex);
    } else if (m->ranks == 1 && batches >= 1) { /* one process: the epochs' training time */
        snprintf(path, sizeof path, "%s/metrics.jsonl", run);
        FILE *g = fopen(path, "r");
        char line[8192];
        double v[4096];
        size_t n = 0;
        while (g && n < 4096 && fgets(line, sizeof line, g)) {
            cJSON *j = cJSON_Parse(line);
            double t = num_at(j, "time_s", NULL);
            if (t > 0) v[n++] = t / batches;
            cJSON_Delete(j);
        }
        if (g) fclose(g);
        m->nsteps = (size_t)(n * batches);
        m->step_s = m->compute_s = median(v, n);
        m->exposed_s = 0;
    }
    if (!(m->compute_s > 0)) {
        fprintf(stderr, "distdpd %s: error: --run %s: no measured steps (dp_steps.csv of a run on several ranks, or "
                        "metrics.jsonl of a one-process run)\n", NAME, run);
        return DD_EXIT_RUNTIME;
    }
    return 0;
}

int dd_plan_runs(const char *NAME, const char *const *runs, int nruns, const dd_link *link_opt, const dd_link *intra,
                 int ranks_per_node, const char *link_name) {
    run_meas m[DD_PLAN_MAX_RUNS];
    memset(m, 0, sizeof m);
    int rc;
    if (nruns < 1 || nruns > DD_PLAN_MAX_RUNS) return dd_cli_usage(NAME, "--run: 1 to %d runs", DD_PLAN_MAX_RUNS);
    for (int i = 0; i < nruns; i++)
        if ((rc = measure_run(NAME, runs[i], &m[i]))) return rc;
    /* the link: --link, else where the runs ran (shared memory on one host) */
    int hosts = 1;
    for (int i = 0; i < nruns; i++) hosts = m[i].hosts > hosts ? m[i].hosts : hosts;
    dd_link lk;
    const int link_given = link_opt != NULL;
    if (link_opt) {
        lk = *link_opt;
    } else {
        link_name = hosts > 1 ? "ethernet-10g" : "shm";
        if (dd_plan_link_preset(link_name, &lk) != DD_OK) return dd_cli_fail(NAME, DD_ERR_ARG);
    }
    const dd_link *link = &lk;
    for (int i = 1; i < nruns; i++)
        if (m[i].batch != m[0].batch || m[i].params != m[0].params) {
            fprintf(stderr, "distdpd %s: error: --run %s has batch %.0f and %.0f parameters, --run %s batch %.0f and "
                            "%.0f: strong scaling compares runs of one configuration\n",
                    NAME, runs[i], m[i].batch, m[i].params, runs[0], m[0].batch, m[0].params);
            return DD_EXIT_RUNTIME;
        }
    /* the base: a run timed step by step (an epoch's time / its batches also holds the
     * epoch's set-up), on the fewest ranks */
    int base = 0;
    for (int i = 1; i < nruns; i++)
        if (m[i].per_step > m[base].per_step || (m[i].per_step == m[base].per_step && m[i].ranks < m[base].ranks))
            base = i;
    const double work = m[base].compute_s * m[base].ranks; /* compute of one global batch on one rank */
    const double B = m[0].batch;
    printf("runs (global batch %.0f frames, %.0f parameters; link %s%s):\n", B, m[0].params, link_name,
           link_given ? "" : hosts > 1 ? ", the runs spanned hosts" : ", the runs ran on one host");
    for (int i = 0; i < nruns; i++)
        printf("  %s: %d rank%s, %zu steps%s: step %.4g ms = compute %.4g ms + exposed communication %.4g ms, "
               "efficiency %.1f %%\n",
               m[i].path, m[i].ranks, m[i].ranks == 1 ? "" : "s", m[i].nsteps,
               m[i].per_step ? "" : " (epoch time / batches)", 1e3 * m[i].step_s, 1e3 * m[i].compute_s,
               1e3 * m[i].exposed_s, 100 * m[i].compute_s / (m[i].compute_s + m[i].exposed_s));
    printf("\nstrong scaling: --batch %.0f is the global batch, so N ranks take %.0f/N frames each and the compute per\n"
           "rank is %.4g ms x %d / N (from %s); the allreduce is modelled (docs/comm.md)\n\n",
           B, B, 1e3 * m[base].compute_s, m[base].ranks, m[base].path);
    printf("%7s %12s %11s %11s %9s  %s\n", "ranks", "frames/rank", "step (ms)", "efficiency", "speedup", "measured");
    const double t1 = work; /* one rank: no communication */
    int max_measured = 0;
    for (int i = 0; i < nruns; i++) max_measured = m[i].ranks > max_measured ? m[i].ranks : max_measured;
    int counts[32], nc = 0; /* 1, 2, 4, ... up to the batch, and every measured rank count */
    for (int p = 1; p <= 4096 && p <= (int)B; p *= 2) counts[nc++] = p;
    for (int i = 0; i < nruns; i++) {
        int seen = 0;
        for (int k = 0; k < nc; k++) seen |= counts[k] == m[i].ranks;
        if (!seen && nc < 32) counts[nc++] = m[i].ranks;
    }
    for (int a = 1; a < nc; a++)
        for (int b = a; b > 0 && counts[b - 1] > counts[b]; b--) {
            int t = counts[b];
            counts[b] = counts[b - 1];
            counts[b - 1] = t;
        }
    for (int k = 0; k < nc; k++) {
        const int p = counts[k];
        double step = t1, eff = 1.0;
        if (p > 1) {
            dd_plan_cfg cfg;
            dd_plan_cfg_default(&cfg);
            cfg.params = m[0].params;
            cfg.ranks = p;
            cfg.link = *link;
            cfg.intra = *intra;
            cfg.ranks_per_node = ranks_per_node;
            cfg.compute_s = work / p;
            dd_plan_result r;
            if (dd_plan_run(&cfg, &r) != DD_OK) return dd_cli_fail(NAME, DD_ERR_ARG);
            step = r.step_s;
            eff = r.efficiency;
        }
        char meas[160] = "";
        for (int i = 0; i < nruns; i++)
            if (m[i].ranks == p) {
                size_t l = strlen(meas);
                snprintf(meas + l, sizeof meas - l, "%s%.1f %% (%s)", l ? ", " : "",
                         100 * m[i].compute_s / (m[i].compute_s + m[i].exposed_s), m[i].path);
            }
        if (!meas[0]) snprintf(meas, sizeof meas, "%s", p > max_measured ? "not measured: a prediction" : "-");
        printf("%7d %12.4g %11.4g %10.1f%% %8.2fx  %s\n", p, B / p, 1e3 * step, 100 * eff, t1 / step, meas);
    }
    if (B < 4096)
        printf("\nabove %.0f ranks a rank would hold less than one frame of the global batch: raise --batch to use more "
               "ranks\n(and --lr with it: distdpd train-pa --resume RUN --rescale-batch B)\n", B);
    return DD_EXIT_OK;
}
