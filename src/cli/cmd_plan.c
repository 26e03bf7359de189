/* `distdpd plan`: predicts from the alpha-beta-gamma model the time of one allreduce of
 * all gradients with each algorithm and the data-parallel efficiency at 8 .. 4096 ranks,
 * and recommends an algorithm, a bucket size and whether compression pays; with --model
 * (and the model's options, taken from the registry) predicts for each sharding mode
 * (--shard none|zero1|zero2|zero3) the memory per rank by kind and the communication of
 * a step (dd_plan_shard_run); with --model and --cluster FILE ranks the (tp, pp, dp, shard)
 * layouts of a cluster by predicted step time among those that fit its memory per rank
 * (dd_plan_mp_run), --measure-compute timing the model here; with --calibrate (under
 * mpirun -np >= 2) measures alpha, beta and gamma on this machine, writes them to a JSON
 * file that later runs read with --calibration, and compares the calibrated model with
 * measured allreduce times. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cmd_plan.h"
#include "distdpd/comm.h"
#include "distdpd/plan.h"

static const char *const NAME = "plan";


static void help(void) {
    printf("usage: distdpd plan --params P [options]\n"
           "       distdpd plan --model NAME [--hidden H --layers L ...] [sharding options]\n"
           "       distdpd plan --model NAME [...] --cluster FILE [model-parallel options]\n"
           "       distdpd plan --model NAME [...] --measure-compute\n"
           "       distdpd plan --params P --ps-servers K [--workers N] [--replicas R] [--link NAME]\n"
           "       mpirun -np N distdpd plan --calibrate [--calibration FILE]\n"
           "       distdpd plan --run RUN [--run RUN2 ...] [--link NAME] [--calibration FILE]\n"
           "\n"
           "Predicts, from an alpha-beta-gamma cost model, the time of one allreduce of all\n"
           "gradients (4 P bytes of float32) with each algorithm (ring, tree, rhd, hier, mpi)\n"
           "and the data-parallel efficiency compute / (compute + exposed communication) at\n"
           "8 .. 4096 ranks, with gradient buckets reduced while the backward pass runs; then\n"
           "recommends an algorithm, a bucket size and whether compression pays.\n"
           "\n"
           "options:\n"
           "  --params P             model parameters (float32 gradient elements): an integer\n"
           "                         >= 1, in digits or with an exponent (1911, 2e6)\n"
           "  --ranks N              rank count to recommend for (default 64)\n"
           "  --link NAME            link between nodes: ethernet-10g (default), ethernet-100g,\n"
           "                         infiniband-hdr, nvlink, shm, or measured (the calibration\n"
           "                         file's values; the default when --calibration is given)\n"
           "  --intra NAME           link inside a node for hier (default shm, or measured)\n"
           "  --ranks-per-node G     ranks per node for hier (default 8)\n"
           "  --step-compute-s S     forward + backward time per step and rank, seconds (instead\n"
           "                         of --samples and --flops)\n"
           "  --samples N            samples per rank and step, for the compute time when\n"
           "                         --step-compute-s is not given (default 12800 = 64 x 200)\n"
           "  --flops F              sustained FLOP/s per rank (default 1e9); compute time =\n"
           "                         6 P N / F (forward 2 P, backward 4 P per sample)\n"
           "  --bucket-mb B          gradient bucket size in MB (default: the best of 0.064 ..\n"
           "                         64 MB and one bucket)\n"
           "  --no-overlap           one allreduce after the backward pass (no buckets: not with\n"
           "                         --bucket-mb)\n"
           "  --calibration FILE     read the calibration written by --calibrate; its gamma\n"
           "                         (local reduction cost) then applies to every CPU link\n"
           "  --calibrate            measure alpha, beta, gamma here (run under mpirun -np 2 or\n"
           "                         more; all ranks run it, rank 0 reports), write them to\n"
           "                         --calibration FILE (default distdpd-calibration.json), and\n"
           "                         print predicted vs measured allreduce times (64 KB .. 4 MB)\n"
           "  --json                 print one JSON object instead of text\n"
           "\n");
    printf("measured runs (--run RUN, repeatable: runs of one configuration on different rank counts):\n"
           "  the compute per step is the run's (RUN/dp_steps.csv: median of step - exposed\n"
           "  communication; a one-process run: metrics.jsonl), --batch is the GLOBAL batch (strong\n"
           "  scaling: N ranks take B/N frames, compute x R/N), the allreduce is modelled on --link\n"
           "  (default: shm when the runs ran on one host, else ethernet-10g, or the calibration's);\n"
           "  each row shows the measured efficiency of the runs at that rank count, or says that it\n"
           "  is a prediction no run measured; rows stop at B ranks (one frame each)\n"
           "\n"
           "parameter server (--params P --ps-servers K): one synchronous step of --ps training,\n"
           "every worker pushes M = 4 P bytes and pulls M bytes over K servers:\n"
           "max(M/B, N M/(K B)) per direction plus the alpha terms (docs/ps.md, Throughput);\n"
           "prints the step time, pushes per second per server and bytes per step:\n"
           "  --ps-servers K         servers holding the blocks (1 .. 64)\n"
           "  --workers N            workers (default 1)\n"
           "  --replicas R           successors holding a copy (default 1 with K > 1, else 0)\n"
           "  --opt sgd|adam|adamw, --momentum M: the optimiser state a replication carries\n"
           "  --link, --calibration, --step-compute-s (default 0: communication only),\n"
           "  --samples, --flops, --json as above\n"
           "  -h, --help             this help\n"
           "\n"
           "sharding (--model): memory per rank (params, grads, optim, activations: the arenas\n"
           "train-pa/train-dpd --shard allocates, exactly) and communication per step of each mode:\n"
           "  --model NAME           a model of the registry (distdpd models lists them)\n");
    dd_cli_help_model_opts("  --", "");
    printf("  --task pa|dla|ila      what is trained (default pa); dla and ila train a DPD through\n"
           "                         a frozen --pa-model NAME with its own --pa-hidden, --pa-layers...\n"
           "  --batch B              global batch in frames (default 64)\n"
           "  --frame F              frame length (default 200)\n"
           "  --frames N             training frames of the data set (default: at least the batch;\n"
           "                         a global batch never holds more)\n"
           "  --eval-batch N         evaluation segments per forward pass (default 16)\n"
           "  --nperseg N            evaluation segment length (default 2560)\n"
           "  --eval-segments N      segments of the larger of the validation and test splits\n"
           "                         (default: at least --eval-batch)\n"
           "  --ranks P[,P2...]      rank counts (default 64)\n"
           "  --shard MODE           none, zero1, zero2, zero3 or all (default all)\n"
           "  --opt NAME             sgd, adam or adamw (default adamw); --momentum M for sgd\n"
           "  --allreduce ALGO       ring (default), tree, rhd, hier or mpi, as train-pa's\n"
           "  --bucket-mb B          as train-pa's: gradient buckets in MiB (default 4; 0: one\n"
           "                         allreduce after backward)\n"
           "  --link, --intra, --ranks-per-node, --calibration, --json as above\n"
           "\n"
           "model parallelism (--model ... --cluster FILE): every (tp, pp, dp, shard) layout of the\n"
           "cluster's ranks with its memory per rank (the arenas train-pa --tp/--pp allocates,\n"
           "exactly) and its predicted step time (compute from the stages' FLOPs, the pipeline\n"
           "schedule simulated, tensor-parallel collectives counted, the replicas' allreduce),\n"
           "ranked among those that fit the memory per rank, and why the best wins:\n"
           "  --cluster FILE         JSON: nodes, ranks_per_node, intra_link, inter_link (presets,\n"
           "                         {\"latency_us\", \"bandwidth_gbps\"} or {\"calibration\": FILE}),\n"
           "                         memory_mib, gflops (docs/comm.md, \"Cluster file\")\n"
           "  --micro M|auto         micro-batches per global batch (default: pp, as train-pa;\n"
           "                         auto: the fastest of pp x 1, 2, 4, 8 that fits)\n"
           "  --schedule S           gpipe, 1f1b (default) or interleaved (with --virtual V)\n"
           "  --virtual V            virtual stages per rank (interleaved; default 1)\n"
           "  --gflops G             compute speed per rank, GFLOP/s of forward + backward\n"
           "                         (instead of the file's \"gflops\")\n"
           "  --measure-compute      time one forward + backward of the model over --batch frames\n"
           "                         on this process (median of 3 after a warm-up) and use its\n"
           "                         GFLOP/s; without --cluster it only prints them (run it on a\n"
           "                         node of the cluster, nothing else running)\n"
           "  --batch, --frame, --frames, --task dla, --opt, --allreduce, --bucket-mb, --json as\n"
           "                         above; --ranks, --link, --intra, --ranks-per-node, --shard and\n"
           "                         --calibration come from the cluster file instead\n"
           "\n"
           "Link presets and the model's formulas: docs/comm.md; sharding: docs/sharding.md.\n"
           "exit status: 0 ok, 1 runtime error (calibration or cluster file, MPI; no layout fits the\n"
           "memory per rank), 2 usage\n");
}

static void fmt_bytes(char *buf, size_t n, double b) {
    if (b >= 1e9)
        snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(buf, n, "%.2f MB", b / 1e6);
    else if (b >= 1e3)
        snprintf(buf, n, "%.1f KB", b / 1e3);
    else
        snprintf(buf, n, "%.0f B", b);
}

static void print_link(const char *what, const char *name, const dd_link *l) {
    printf("%-10s %-15s alpha %.2f us, %.2f GB/s (one way: %.2f us, %.2f GB/s), gamma %.3f ns/B\n", what, name,
           l->alpha * 1e6, l->beta > 0 ? 1e-9 / l->beta : 0.0, l->alpha1 * 1e6, l->beta1 > 0 ? 1e-9 / l->beta1 : 0.0,
           l->gamma * 1e9);
}

/* --calibrate: collective over the world; rank 0 prints and writes. */
static int run_calibrate(const char *path, int json) {
    dd_status st = dd_comm_init(NULL, NULL);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    dd_comm *w = NULL;
    int ret = DD_EXIT_OK;
    if ((st = dd_comm_world(&w)) != DD_OK) {
        ret = dd_cli_fail(NAME, st);
        goto done;
    }
    int rank = dd_comm_rank(w), p = dd_comm_size(w);
    if (p < 2) {
        fprintf(stderr,
                "distdpd plan: --calibrate needs at least 2 MPI ranks (this run has %d%s): run\n"
                "  mpirun -np 2 distdpd plan --calibrate\n",
                p, dd_comm_is_mpi(w) ? "" : ", not started by mpirun");
        ret = DD_EXIT_RUNTIME;
        goto done;
    }
    dd_plan_calib cal;
    if ((st = dd_plan_calibrate(w, 1.0, &cal)) != DD_OK) {
        if (rank == 0) ret = dd_cli_fail(NAME, st);
        else ret = DD_EXIT_RUNTIME;
        goto done;
    }
    /* check: the calibrated model against measured allreduces */
    static const size_t sizes[] = {65536, 262144, 1048576, 4194304};
    /* every registered algorithm the model times on one link (not hier: it needs nodes) */
    enum { NS = 4 };
    dd_allreduce_algo algos[DD_ALLREDUCE_MAX];
    int na = 0;
    for (int a = 0; a < dd_allreduce_count() && na < DD_ALLREDUCE_MAX; a++)
        if (dd_plan_allreduce_time((dd_allreduce_algo)a, &cal.link, NULL, 1, p, (double)sizes[0]) >= 0)
            algos[na++] = (dd_allreduce_algo)a;
    double meas[DD_ALLREDUCE_MAX * NS];
    if ((st = dd_plan_measure(w, algos, na, sizes, NS, 11, meas)) != DD_OK) {
        ret = rank == 0 ? dd_cli_fail(NAME, st) : DD_EXIT_RUNTIME;
        goto done;
    }
    if (rank == 0) {
        if ((st = dd_plan_calib_save(&cal, path)) != DD_OK) {
            ret = dd_cli_fail(NAME, st);
            goto done;
        }
        if (json) {
            printf("{\"calibration\": \"%s\", \"ranks\": %d, \"alpha_s\": %.6g, \"beta_s_per_byte\": %.6g, "
                   "\"alpha_oneway_s\": %.6g, \"beta_oneway_s_per_byte\": %.6g, \"gamma_s_per_byte\": %.6g, "
                   "\"check\": [",
                   path, p, cal.link.alpha, cal.link.beta, cal.link.alpha1, cal.link.beta1, cal.link.gamma);
            for (int a = 0; a < na; a++)
                for (int i = 0; i < NS; i++) {
                    double pred = dd_plan_allreduce_time(algos[a], &cal.link, NULL, 1, p, (double)sizes[i]);
                    printf("%s{\"allreduce\": \"%s\", \"bytes\": %zu, \"measured_s\": %.6g, \"predicted_s\": %.6g}",
                           a || i ? ", " : "", dd_allreduce_name(algos[a]), sizes[i], meas[a * NS + i], pred);
                }
            printf("]}\n");
        } else {
            printf("calibration on %s, %d ranks (%s)\n", cal.host, p, cal.date);
            printf("  exchange step (all ranks send and receive): alpha %.2f us, beta %.4f ns/B (%.2f GB/s), "
                   "fit error %.1f %% rms\n",
                   cal.link.alpha * 1e6, cal.link.beta * 1e9, 1e-9 / cal.link.beta, 100 * cal.fit_rel_rms);
            printf("  one-way transfer:                           alpha %.2f us, beta %.4f ns/B (%.2f GB/s), "
                   "fit error %.1f %% rms\n",
                   cal.link.alpha1 * 1e6, cal.link.beta1 * 1e9, 1e-9 / cal.link.beta1, 100 * cal.fit1_rel_rms);
            printf("  reduction (float32 sum): gamma %.4f ns/B; 8-byte exchange latency %.2f us\n",
                   cal.link.gamma * 1e9, cal.latency_s * 1e6);
            printf("  fits over %.0f B .. %.0f B; written to %s\n\n", cal.fit_min_bytes,
                   cal.bytes[cal.npoints - 1], path);
            printf("check: measured vs predicted allreduce (lower quartile of 11 repeats, max over ranks)\n");
            printf("  %-5s %9s %12s %12s %8s\n", "algo", "bytes", "measured_us", "predicted_us", "error");
            for (int a = 0; a < na; a++)
                for (int i = 0; i < NS; i++) {
                    double m = meas[a * NS + i];
                    double pred = dd_plan_allreduce_time(algos[a], &cal.link, NULL, 1, p, (double)sizes[i]);
                    printf("  %-5s %9zu %12.1f %12.1f %+7.1f%%\n", dd_allreduce_name(algos[a]), sizes[i], m * 1e6,
                           pred * 1e6, 100 * (pred - m) / m);
                }
            printf("(mpi is modelled as the fastest of ring, tree and rhd.)\n");
        }
    }
done:
    dd_comm_free(&w);
    dd_comm_finalize();
    return ret;
}

static int parse_link(const char *opt, const char *val, int have_cal, const dd_plan_calib *cal, dd_link *out) {
    if (strcmp(val, "measured") == 0) {
        if (!have_cal) return dd_cli_usage(NAME, "%s measured: needs --calibration FILE", opt);
        *out = cal->link;
        return 0;
    }
    if (dd_plan_link_preset(val, out) != DD_OK)
        return dd_cli_usage(NAME,
                            "%s: expected ethernet-10g, ethernet-100g, infiniband-hdr, nvlink, shm or "
                            "measured, got '%s'",
                            opt, val);
    /* the measured reduction cost applies to every CPU link */
    if (have_cal && strcmp(val, "nvlink") != 0) out->gamma = cal->link.gamma;
    return 0;
}

/* ---- --model: the sharding modes ------------------------------------------------- */

#define MAX_MOPTS DD_CLI_MAX_MODEL_OPTS /* distinct model option names over the registry */
#define MAX_RANKS 16   /* rank counts of --ranks P,P2,... */


static void known_models(char *buf, size_t cap) {
    size_t nreg = 0, len = 0;
    const dd_model_info *const *reg = dd_model_registry(&nreg);
    buf[0] = '\0';
    for (size_t i = 0; i < nreg && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", reg[i]->name);
        if (w < 0) break;
        len += (size_t)w;
    }
}

/* Builds model `name` from the option values given (vals[k] for names[k], NULL = not
 * given); prefix is "" or "pa-" for the messages. Returns 0 or an exit status. */
static int make_model(const char *opt, const char *name, const char *prefix, const char **names, size_t nnames,
                      const char *const *vals, dd_model **out) {
    const dd_model_info *info = dd_model_find(name);
    if (!info) {
        char known[512];
        known_models(known, sizeof known);
        return dd_cli_usage(NAME, "%s: unknown model '%s' (known: %s)", opt, name, known);
    }
    dd_model_cfg mc;
    memset(&mc, 0, sizeof mc);
    for (size_t k = 0; k < nnames; k++) {
        if (!vals[k]) continue;
        const dd_model_opt_info *o = info->opts;
        while (o && o->name && strcmp(o->name, names[k]) != 0) o++;
        if (!o || !o->name) {
            char list[256];
            size_t len = 0;
            list[0] = '\0';
            for (const dd_model_opt_info *q = info->opts; q && q->name && len < sizeof list; q++) {
                int w = snprintf(list + len, sizeof list - len, "%s--%s%s", len ? ", " : "", prefix, q->name);
                if (w < 0) break;
                len += (size_t)w;
            }
            return dd_cli_usage(NAME, "--%s%s: model %s has no option %s (its options: %s)", prefix, names[k], name,
                                names[k], len ? list : "none");
        }
        char flag[64];
        snprintf(flag, sizeof flag, "--%s%s", prefix, names[k]);
        size_t v;
        int rc = dd_cli_parse_size(NAME, flag, vals[k], (size_t)o->lo, (size_t)o->hi, &v);
        if (rc) return rc;
        if (dd_model_cfg_set(&mc, names[k], (int)v) != DD_OK) return dd_cli_usage(NAME, "%s: %s", flag, dd_last_error());
    }
    dd_status st = dd_model_create(name, &mc, out);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    return 0;
}

static void fmt_ms(char *buf, size_t n, double s) {
    if (s == 0) snprintf(buf, n, "0");
    else if (s < 1e-3) snprintf(buf, n, "%.1f us", s * 1e6);
    else if (s < 1) snprintf(buf, n, "%.3f ms", s * 1e3);
    else snprintf(buf, n, "%.3f s", s);
}

static int run_shard_plan(dd_plan_shard_cfg *cfg, const int *ranks, int nranks, int mode, const char *link_name,
                          int json) {
    const int m0 = mode < 0 ? DD_SHARD_NONE : mode, m1 = mode < 0 ? DD_SHARD_ZERO3 : mode;
    const size_t per = (size_t)m1 - m0 + 1; /* m1 >= m0 */
    dd_plan_shard_result *rows = calloc((size_t)nranks * per, sizeof *rows);
    if (!rows) return dd_cli_fail(NAME, dd_error(DD_ERR_NOMEM, "out of memory"));
    /* none at each rank count too, for the ratios */
    dd_plan_shard_result *none = calloc((size_t)nranks, sizeof *none);
    dd_status st = none ? DD_OK : dd_error(DD_ERR_NOMEM, "out of memory");
    size_t nr = 0;
    for (int i = 0; st == DD_OK && i < nranks; i++) {
        cfg->ranks = ranks[i];
        cfg->shard = DD_SHARD_NONE;
        st = dd_plan_shard_run(cfg, &none[i]);
        for (int m = m0; st == DD_OK && m <= m1; m++) {
            cfg->shard = (dd_shard_mode)m;
            st = dd_plan_shard_run(cfg, &rows[nr++]);
        }
    }
    if (st != DD_OK) {
        free(rows);
        free(none);
        return dd_cli_fail(NAME, st);
    }
    if (json) {
        char *txt = NULL;
        st = dd_plan_shard_json(cfg, rows, nr, link_name, &txt);
        free(rows);
        free(none);
        if (st != DD_OK) return dd_cli_fail(NAME, st);
        printf("%s\n", txt);
        free(txt);
        return DD_EXIT_OK;
    }
    const dd_plan_shard_result *r0 = &none[0];
    char desc[256], b1[32], b2[32];
    dd_model_describe(cfg->model, desc, sizeof desc);
    fmt_bytes(b1, sizeof b1, 4.0 * (double)r0->floats);
    printf("model:      %s; arena %zu floats (%s) in %zu stages, the largest %zu floats\n", desc, r0->floats, b1,
           r0->stages, r0->stage_max);
    if (cfg->pa) {
        dd_model_describe(cfg->pa, desc, sizeof desc);
        printf("PA model:   %s (frozen, not sharded)\n", desc);
    }
    const int arrays = cfg->opt == DD_OPTIM_SGD ? (cfg->momentum != 0 ? 1 : 0) : 2;
    printf("training:   task %s, global batch %zu frames of %zu samples", dd_train_task_name(cfg->task), cfg->batch,
           cfg->frame);
    if (cfg->frames) printf(" (data: %zu frames)", cfg->frames);
    printf(", %s (%d state array%s); evaluation %zu x %zu samples on rank 0%s\n", dd_optim_kind_name(cfg->opt), arrays,
           arrays == 1 ? "" : "s", r0->eval_batch, cfg->nperseg, m1 == DD_SHARD_ZERO3 ? " (every rank with zero3)" : "");
    print_link("link:", link_name, &cfg->link);
    if (cfg->bucket_mb > 0) snprintf(b2, sizeof b2, "buckets of %g MiB", cfg->bucket_mb);
    else snprintf(b2, sizeof b2, "one allreduce after backward");
    printf("allreduce:  %s (none, zero1: %s; the small reductions of every mode)\n", dd_allreduce_name(cfg->algo), b2);
    printf("\nper rank (rank 0, the largest), bytes; communication per optimiser step and rank\n");
    printf("%7s %-6s %10s %10s %10s %11s %10s %8s  %10s %11s %8s %10s\n", "ranks", "mode", "params", "grads", "optim",
           "activations", "total", "vs none", "comm sent", "collectives", "messages", "comm time");
    for (size_t i = 0; i < nr; i++) {
        const dd_plan_shard_result *r = &rows[i];
        const dd_plan_shard_result *nn = &none[i / per];
        char m[DD_MEM_KINDS + 1][32], cs[32], ct[32];
        for (int k = 0; k < DD_MEM_KINDS; k++) fmt_bytes(m[k], sizeof m[k], (double)r->mem[k]);
        fmt_bytes(m[DD_MEM_KINDS], sizeof m[DD_MEM_KINDS], (double)r->mem_total);
        fmt_bytes(cs, sizeof cs, r->bytes_sent);
        fmt_ms(ct, sizeof ct, r->time_s);
        printf("%7d %-6s %10s %10s %10s %11s %10s %7.3fx  %10s %11d %8.0f %10s\n", r->ranks, dd_shard_name(r->shard),
               m[0], m[1], m[2], m[3], m[4], nn->mem_total ? (double)r->mem_total / (double)nn->mem_total : 0.0, cs,
               r->collectives, r->messages, ct);
    }
    if (m1 == DD_SHARD_ZERO3) {
        fmt_bytes(b1, sizeof b1, 4.0 * (double)r0->floats);
        printf("\nzero3: after training rank 0 also allocates the whole parameters (%s) for report.html.\n", b1);
    }
    printf("\ncomm sent: bytes a rank sends (average over the ranks): gradient allreduce 2(P-1)/P x 4n\n"
           "(none, zero1) or reduce-scatter (P-1)/P x 4n per stage (zero2, zero3), parameter allgathers\n"
           "(P-1)/P of what is gathered (zero1, zero2: 4n; zero3: every stage before its forward and all\n"
           "but the last two before their backward). comm time: the collectives one after another\n"
           "(buckets, reduce-scatters and zero3's gathers overlap compute, so this bounds what shows).\n"
           "Formulas: docs/sharding.md (Planning).\n");
    free(rows);
    free(none);
    return DD_EXIT_OK;
}

/* ---- --cluster: the model-parallel layouts; --measure-compute ------------------------ */

typedef struct {
    const char *model, *cluster;
    int micro;
    dd_pp_kind sched;
    int virt;
    double gflops;
    int measure, json;
} mp_opts;

static int run_mp_plan(const dd_plan_shard_cfg *sc, const dd_model_cfg *mc, const mp_opts *o) {
    dd_plan_mp_cfg c;
    dd_plan_mp_cfg_default(&c);
    c.model = o->model;
    c.model_cfg = *mc;
    c.pa = sc->pa;
    c.task = sc->task;
    c.opt = sc->opt;
    c.momentum = sc->momentum;
    c.batch = sc->batch;
    c.frame = sc->frame;
    c.frames = sc->frames;
    c.eval_batch = sc->eval_batch;
    c.nperseg = sc->nperseg;
    c.eval_segments = sc->eval_segments;
    c.micro = o->micro;
    c.schedule = o->sched;
    c.virt = o->virt;
    c.algo = sc->algo;
    c.bucket_mb = sc->bucket_mb;
    dd_status st;
    if (o->cluster && (st = dd_plan_cluster_load(o->cluster, &c.cluster)) != DD_OK) return dd_cli_fail(NAME, st);
    /* the compute speed: measured here, --gflops, or the file's */
    double mt = 0, mg = 0;
    const size_t mb = sc->frames && sc->frames < sc->batch ? sc->frames : sc->batch;
    if (o->measure) {
        if ((st = dd_plan_measure_compute(sc->model, (int)mb, (int)sc->frame, 3, &mt, &mg)) != DD_OK)
            return dd_cli_fail(NAME, st);
        c.cluster.gflops = mg;
    } else if (o->gflops > 0) {
        c.cluster.gflops = o->gflops;
    }
    char desc[256];
    dd_model_describe(sc->model, desc, sizeof desc);
    if (!o->cluster) { /* --measure-compute alone */
        if (o->json)
            printf("{\"model\": \"%s\", \"batch\": %zu, \"frame\": %zu, \"seconds\": %.6g, \"gflops\": %.6g, "
                   "\"flops_per_sample\": %.6g}\n",
                   o->model, mb, sc->frame, mt, mg,
                   dd_model_flops_per_sample(sc->model, 0) + dd_model_flops_per_sample(sc->model, 1));
        else
            printf("compute:    %s\n            forward + backward of %zu frames x %zu samples on this process: %.4g s "
                   "(median of 3 after a warm-up) = %.2f GFLOP/s\n            (give \"gflops\": %.2f in a cluster "
                   "file, or --gflops %.2f)\n",
                   desc, mb, sc->frame, mt, mg, mg, mg);
        return DD_EXIT_OK;
    }
    if (!(c.cluster.gflops > 0))
        return dd_cli_usage(NAME, "%s has no \"gflops\": give --gflops G (GFLOP/s per rank, forward + backward) or "
                                  "--measure-compute (times the model here)",
                            o->cluster);
    dd_plan_mp_result r;
    if ((st = dd_plan_mp_run(&c, &r)) != DD_OK) return dd_cli_fail(NAME, st);
    if (o->json) {
        char *txt = NULL;
        st = dd_plan_mp_json(&r, &txt);
        dd_plan_mp_result_free(&r);
        if (st != DD_OK) return dd_cli_fail(NAME, st);
        printf("%s\n", txt);
        free(txt);
        return DD_EXIT_OK;
    }
    char b1[32], b2[32];
    printf("model:      %s; %zu stages; %.4g FLOP per sample (forward + backward)\n", desc, r.stages, r.flops_sample);
    if (c.pa) {
        dd_model_describe(c.pa, desc, sizeof desc);
        printf("PA model:   %s (frozen; its stages join the pipeline)\n", desc);
    }
    printf("training:   task %s, global batch %zu frames of %zu samples", dd_train_task_name(c.task), c.batch, c.frame);
    if (c.frames) printf(" (data: %zu frames)", c.frames);
    printf(", %s; schedule %s", dd_optim_kind_name(c.opt), dd_pp_kind_name(c.schedule));
    if (c.virt > 1) printf(" x %d virtual stages", c.virt);
    if (c.micro < 0) printf(", micro-batches auto (the fastest of pp x 1, 2, 4, 8)");
    else if (c.micro > 0) printf(", %d micro-batches", c.micro);
    else printf(", micro-batches = pp");
    printf("; allreduce %s\n", dd_allreduce_name(c.algo));
    printf("cluster:    %s: %d node%s x %d ranks = %d ranks; %.1f MiB of arenas per rank; ", o->cluster, c.cluster.nodes,
           c.cluster.nodes == 1 ? "" : "s", c.cluster.ranks_per_node, r.ranks, c.cluster.memory_bytes / 1048576.0);
    if (o->measure)
        printf("%.2f GFLOP/s per rank (measured here: forward + backward of %zu frames in %.4g s)\n", c.cluster.gflops, mb,
               mt);
    else
        printf("%.2f GFLOP/s per rank (%s)\n", c.cluster.gflops, o->gflops > 0 ? "--gflops" : "the file's");
    print_link("intra:", c.cluster.intra_name, &c.cluster.intra);
    if (c.cluster.nodes > 1) print_link("inter:", c.cluster.inter_name, &c.cluster.inter);
    printf("\nlayouts, fastest first (times per optimiser step; compute and tensor-parallel collectives of the busiest\n"
           "rank; memory: its arenas at their peak)\n");
    printf("%5s %4s %4s %5s %-5s %5s %10s %10s %10s %10s %10s %10s %12s  %s\n", "rank", "tp", "pp", "dp", "shard",
           "micro", "step", "compute", "tp comm", "bubble", "pp msgs", "dp comm", "memory/rank", "fits");
    for (size_t i = 0; i < r.nrows; i++) {
        const dd_plan_mp_layout *w = &r.rows[i];
        char t[6][32], mm[16], rk[16];
        fmt_ms(t[0], sizeof t[0], w->step_s);
        fmt_ms(t[1], sizeof t[1], w->compute_s);
        fmt_ms(t[2], sizeof t[2], w->tp_s);
        fmt_ms(t[3], sizeof t[3], w->bubble_s);
        fmt_ms(t[4], sizeof t[4], w->msg_s);
        fmt_ms(t[5], sizeof t[5], w->dp_s + w->small_s);
        if (w->micro > 0) snprintf(mm, sizeof mm, "%d", w->micro);
        else snprintf(mm, sizeof mm, "-");
        if (w->rank > 0) snprintf(rk, sizeof rk, "%d", w->rank);
        else snprintf(rk, sizeof rk, "-");
        snprintf(b1, sizeof b1, "%.1f MiB", (double)w->mem_peak / 1048576.0);
        printf("%5s %4d %4d %5d %-5s %5s %10s %10s %10s %10s %10s %10s %12s  %s\n", rk, w->tp, w->pp, w->dp,
               dd_shard_name(w->shard), mm, t[0], t[1], t[2], t[3], t[4], t[5], b1, w->fits ? "yes" : "NO");
    }
    for (int i = 0; i < r.nskipped && i < 8; i++) printf("not planned: %s\n", r.skipped[i]);
    if (r.nskipped > 8) printf("not planned: %d more\n", r.nskipped - 8);
    const size_t n = dd_plan_mp_explain(&r, NULL, 0) + 1;
    char *text = malloc(n);
    if (text) {
        dd_plan_mp_explain(&r, text, n);
        printf("\n%s", text);
        free(text);
    }
    (void)b2;
    printf("\nstep = compute + tp comm + bubble + pp msgs + dp comm (the replicas' gradients, and the loss\n"
           "reduction); formulas and the cluster file: docs/comm.md (Model-parallel plan).\n");
    const int rc = r.best < 0 ? DD_EXIT_RUNTIME : DD_EXIT_OK;
    if (r.best < 0) fprintf(stderr, "distdpd plan: no layout fits %s's memory per rank\n", o->cluster);
    dd_plan_mp_result_free(&r);
    return rc;
}

/* --ps-servers: the parameter-server step model (dd_plan_ps), for the given workers and
 * doubling worker counts up to them. */
static int run_ps_plan(const dd_plan_ps_cfg *pc, const char *link_name, dd_optim_kind opt, double momentum, int json) {
    dd_plan_ps_result r;
    dd_status st = dd_plan_ps(pc, &r);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    const char *optname = opt == DD_OPTIM_SGD ? (momentum != 0 ? "sgd with momentum" : "sgd")
                        : opt == DD_OPTIM_ADAM ? "adam" : "adamw";
    if (json) {
        cJSON *o = cJSON_CreateObject();
        if (!o) return dd_cli_fail(NAME, dd_error(DD_ERR_NOMEM, "plan: json"));
        cJSON_AddStringToObject(o, "plan", "parameter-server");
        cJSON_AddNumberToObject(o, "params", pc->params);
        cJSON_AddNumberToObject(o, "workers", pc->workers);
        cJSON_AddNumberToObject(o, "servers", pc->servers);
        cJSON_AddNumberToObject(o, "replicas", pc->replicas);
        cJSON_AddNumberToObject(o, "repl_floats", pc->repl_floats);
        cJSON_AddStringToObject(o, "link", link_name);
        cJSON_AddNumberToObject(o, "alpha_oneway_s", pc->link.alpha1);
        cJSON_AddNumberToObject(o, "beta_oneway_s_per_byte", pc->link.beta1);
        cJSON_AddNumberToObject(o, "compute_s", pc->compute_s);
        cJSON_AddNumberToObject(o, "model_bytes", r.model_bytes);
        cJSON_AddNumberToObject(o, "worker_s", r.worker_s);
        cJSON_AddNumberToObject(o, "server_push_s", r.server_push_s);
        cJSON_AddNumberToObject(o, "server_pull_s", r.server_pull_s);
        cJSON_AddNumberToObject(o, "latency_s", r.latency_s);
        cJSON_AddNumberToObject(o, "push_s", r.push_s);
        cJSON_AddNumberToObject(o, "pull_s", r.pull_s);
        cJSON_AddNumberToObject(o, "comm_s", r.comm_s);
        cJSON_AddNumberToObject(o, "step_s", r.step_s);
        cJSON_AddBoolToObject(o, "server_bound", r.server_bound);
        cJSON_AddNumberToObject(o, "pushes_per_s_server", r.pushes_per_s_server);
        cJSON_AddNumberToObject(o, "worker_bytes_step", r.worker_bytes_step);
        cJSON_AddNumberToObject(o, "server_bytes_step", r.server_bytes_step);
        char *txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!txt) return dd_cli_fail(NAME, dd_error(DD_ERR_NOMEM, "plan: json"));
        printf("%s\n", txt);
        free(txt);
        return DD_EXIT_OK;
    }
    char b1[32], b2[32], b3[32];
    fmt_bytes(b1, sizeof b1, r.model_bytes);
    printf("parameter server: %.0f parameters = M = %s pushed and pulled per worker and step\n", pc->params, b1);
    printf("cluster:    %d workers, %d servers, %d replicas (each replication carries %.0f float%s per parameter: "
           "values%s, %s)\n",
           pc->workers, pc->servers, pc->replicas, pc->repl_floats, pc->repl_floats > 1 ? "s" : "",
           pc->repl_floats > 2 ? " + 2 moments" : pc->repl_floats > 1 ? " + momentum" : "", optname);
    print_link("link:", link_name, &pc->link);
    printf("\nper step (synchronous: every worker pushes M, then pulls M; docs/ps.md, Throughput):\n");
    printf("  worker link  M/B           %10.4f ms per direction\n", r.worker_s * 1e3);
    printf("  server link  nM/(kB)       %10.4f ms of pulls, %.4f ms of pushes%s\n", r.server_pull_s * 1e3,
           r.server_push_s * 1e3, pc->replicas > 0 ? " (x (1 + R f): replication in and out)" : "");
    printf("  latency      %d alpha      %10.4f ms (request + reply of push and pull%s)\n",
           pc->replicas > 0 ? 6 : 4, r.latency_s * 1e3, pc->replicas > 0 ? ", replication round trip" : "");
    printf("  push %.4f ms + pull %.4f ms = communication %.4f ms", r.push_s * 1e3, r.pull_s * 1e3, r.comm_s * 1e3);
    if (pc->compute_s > 0) printf("; + compute %.4g s = step %.4f ms", pc->compute_s, r.step_s * 1e3);
    printf("\n  bound by: %s\n", r.server_bound ? "the servers' links (n (1 + R f) > k: more servers help)"
                                             : "the workers' links (more servers do not help)");
    fmt_bytes(b2, sizeof b2, r.worker_bytes_step);
    fmt_bytes(b3, sizeof b3, r.server_bytes_step);
    printf("pushes per second per server: %.1f (n / step)\n", r.pushes_per_s_server);
    printf("bytes per step: %s per worker (2 M), %s per server (2 n M / k%s)\n", b2, b3,
           pc->replicas > 0 ? " + 2 R f n M / k" : "");
    /* doubling worker counts */
    printf("\n%8s %12s %12s %14s\n", "workers", "comm (ms)", "step (ms)", "pushes/s/srv");
    for (int n = 1;; n = n * 2 > pc->workers && n < pc->workers ? pc->workers : n * 2) {
        dd_plan_ps_cfg c2 = *pc;
        c2.workers = n;
        dd_plan_ps_result r2;
        if (dd_plan_ps(&c2, &r2) != DD_OK) break;
        printf("%8d %12.4f %12.4f %14.1f%s\n", n, r2.comm_s * 1e3, r2.step_s * 1e3, r2.pushes_per_s_server,
               n == pc->workers ? "  <- --workers" : "");
        if (n >= pc->workers) break;
    }
    return DD_EXIT_OK;
}

int dd_cmd_plan(int argc, char **argv) {
    enum {
        O_PARAMS = 256, O_RANKS, O_LINK, O_INTRA, O_RPN, O_COMPUTE, O_SAMPLES, O_FLOPS, O_BUCKET,
        O_NOOVERLAP, O_CALFILE, O_CALIBRATE, O_JSON, O_MODEL, O_TASK, O_PAMODEL, O_BATCH, O_FRAME, O_FRAMES,
        O_EVALBATCH, O_NPERSEG, O_EVALSEG, O_SHARD, O_OPT, O_MOMENTUM, O_ALLREDUCE, O_CLUSTER, O_MICRO,
        O_SCHEDULE, O_VIRTUAL, O_GFLOPS, O_MEASURE, O_PSSERVERS, O_WORKERS, O_REPLICAS, O_RUN,
        O_MOPT = 512,                /* + k: --NAME of model option k */
        O_PAOPT = O_MOPT + MAX_MOPTS /* + k: --pa-NAME */
    };
    static const struct option base[] = {{"params", required_argument, NULL, O_PARAMS},
                                         {"run", required_argument, NULL, O_RUN},
                                         {"ranks", required_argument, NULL, O_RANKS},
                                         {"link", required_argument, NULL, O_LINK},
                                         {"intra", required_argument, NULL, O_INTRA},
                                         {"ranks-per-node", required_argument, NULL, O_RPN},
                                         {"step-compute-s", required_argument, NULL, O_COMPUTE},
                                         {"samples", required_argument, NULL, O_SAMPLES},
                                         {"flops", required_argument, NULL, O_FLOPS},
                                         {"bucket-mb", required_argument, NULL, O_BUCKET},
                                         {"no-overlap", no_argument, NULL, O_NOOVERLAP},
                                         {"calibration", required_argument, NULL, O_CALFILE},
                                         {"calibrate", no_argument, NULL, O_CALIBRATE},
                                         {"json", no_argument, NULL, O_JSON},
                                         {"model", required_argument, NULL, O_MODEL},
                                         {"task", required_argument, NULL, O_TASK},
                                         {"pa-model", required_argument, NULL, O_PAMODEL},
                                         {"batch", required_argument, NULL, O_BATCH},
                                         {"frame", required_argument, NULL, O_FRAME},
                                         {"frames", required_argument, NULL, O_FRAMES},
                                         {"eval-batch", required_argument, NULL, O_EVALBATCH},
                                         {"nperseg", required_argument, NULL, O_NPERSEG},
                                         {"eval-segments", required_argument, NULL, O_EVALSEG},
                                         {"shard", required_argument, NULL, O_SHARD},
                                         {"opt", required_argument, NULL, O_OPT},
                                         {"momentum", required_argument, NULL, O_MOMENTUM},
                                         {"allreduce", required_argument, NULL, O_ALLREDUCE},
                                         {"cluster", required_argument, NULL, O_CLUSTER},
                                         {"micro", required_argument, NULL, O_MICRO},
                                         {"schedule", required_argument, NULL, O_SCHEDULE},
                                         {"virtual", required_argument, NULL, O_VIRTUAL},
                                         {"gflops", required_argument, NULL, O_GFLOPS},
                                         {"measure-compute", no_argument, NULL, O_MEASURE},
                                         {"ps-servers", required_argument, NULL, O_PSSERVERS},
                                         {"workers", required_argument, NULL, O_WORKERS},
                                         {"replicas", required_argument, NULL, O_REPLICAS},
                                         {"help", no_argument, NULL, 'h'}};
    enum { NBASE = sizeof base / sizeof base[0] };
    /* the model options come from the registry: --NAME and --pa-NAME for each */
    const char *mnames[MAX_MOPTS];
    const size_t nm = dd_cli_model_opt_names(mnames, MAX_MOPTS);
    char panames[MAX_MOPTS][48];
    struct option longopts[NBASE + 2 * MAX_MOPTS + 1];
    memcpy(longopts, base, sizeof base);
    size_t no = NBASE;
    for (size_t k = 0; k < nm; k++) {
        snprintf(panames[k], sizeof panames[k], "pa-%s", mnames[k]);
        longopts[no++] = (struct option){mnames[k], required_argument, NULL, O_MOPT + (int)k};
        longopts[no++] = (struct option){panames[k], required_argument, NULL, O_PAOPT + (int)k};
    }
    longopts[no] = (struct option){NULL, 0, NULL, 0};

    const char *link_name = NULL, *intra_name = NULL, *cal_path = NULL;
    double params = 0, compute = 0, samples = 12800, flops = 1e9, bucket_mb = 0;
    const char *estimate = NULL; /* --samples or --flops given */
    size_t rpn = 8;
    int rpn_given = 0;
    int json = 0, calibrate = 0, overlap = 1, have_params = 0, c, rc;
    const char *bucket_arg = NULL;
    /* --model */
    const char *model = NULL, *pa_model = NULL, *mvals[MAX_MOPTS] = {0}, *pavals[MAX_MOPTS] = {0};
    const char *model_only = NULL, *pa_only = NULL; /* an option given that needs --model / --pa-model */
    const char *ranks_arg = NULL;
    dd_plan_shard_cfg sc;
    dd_plan_shard_cfg_default(&sc);
    int mode = -1; /* --shard all */
    /* --cluster: the model-parallel layouts */
    const char *cluster = NULL, *cluster_only = NULL, *shard_arg = NULL;
    const char *run_args[DD_PLAN_MAX_RUNS];
    int nruns_arg = 0;
    int micro = 0, virt = 1, measure = 0, sched = DD_PP_1F1B;
    double gflops = 0;
    /* --ps-servers: the parameter-server step model */
    size_t ps_servers = 0, ps_workers = 1, ps_replicas = 0;
    int workers_given = 0, replicas_given = 0;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c >= O_MOPT && c < O_MOPT + (int)nm) {
            mvals[c - O_MOPT] = optarg;
            if (!model_only) model_only = longopts[NBASE + 2 * (size_t)(c - O_MOPT)].name;
            continue;
        }
        if (c >= O_PAOPT && c < O_PAOPT + (int)nm) {
            pavals[c - O_PAOPT] = optarg;
            if (!pa_only) pa_only = panames[c - O_PAOPT];
            continue;
        }
        switch (c) {
        case O_PARAMS:
            if ((rc = dd_cli_parse_whole(NAME, "--params", optarg, 1, 1e13, &params))) return rc;
            have_params = 1;
            break;
        case O_RANKS: ranks_arg = optarg; break;
        case O_LINK: link_name = optarg; break;
        case O_INTRA: intra_name = optarg; break;
        case O_RPN:
            if ((rc = dd_cli_parse_size(NAME, "--ranks-per-node", optarg, 1, 1u << 20, &rpn))) return rc;
            rpn_given = 1;
            break;
        case O_COMPUTE:
            if ((rc = dd_cli_parse_double(NAME, "--step-compute-s", optarg, 1e-9, 1e6, &compute))) return rc;
            break;
        case O_SAMPLES:
            if ((rc = dd_cli_parse_whole(NAME, "--samples", optarg, 1, 1e12, &samples))) return rc;
            estimate = "--samples";
            break;
        case O_FLOPS:
            if ((rc = dd_cli_parse_double(NAME, "--flops", optarg, 1, 1e18, &flops))) return rc;
            estimate = "--flops";
            break;
        case O_BUCKET: bucket_arg = optarg; break; /* MB, or MiB with --model: parsed below */
        case O_NOOVERLAP: overlap = 0; break;
        case O_CALFILE: cal_path = optarg; break;
        case O_CALIBRATE: calibrate = 1; break;
        case O_JSON: json = 1; break;
        case O_MODEL: model = optarg; break;
        case O_PAMODEL:
            pa_model = optarg;
            if (!model_only) model_only = "pa-model";
            break;
        case O_TASK: {
            static const char *const tasks[] = {"pa", "dla", "ila", NULL};
            int t;
            if ((rc = dd_cli_parse_choice(NAME, "--task", optarg, tasks, &t))) return rc;
            sc.task = (dd_train_task)t;
            if (!model_only) model_only = "task";
            break;
        }
        case O_BATCH:
            if ((rc = dd_cli_parse_size(NAME, "--batch", optarg, 1, (size_t)1 << 20, &sc.batch))) return rc;
            if (!model_only) model_only = "batch";
            break;
        case O_FRAME:
            if ((rc = dd_cli_parse_size(NAME, "--frame", optarg, 1, (size_t)1 << 20, &sc.frame))) return rc;
            if (!model_only) model_only = "frame";
            break;
        case O_FRAMES:
            if ((rc = dd_cli_parse_size(NAME, "--frames", optarg, 1, (size_t)1 << 40, &sc.frames))) return rc;
            if (!model_only) model_only = "frames";
            break;
        case O_EVALBATCH:
            if ((rc = dd_cli_parse_size(NAME, "--eval-batch", optarg, 1, 4096, &sc.eval_batch))) return rc;
            if (!model_only) model_only = "eval-batch";
            break;
        case O_NPERSEG:
            if ((rc = dd_cli_parse_size(NAME, "--nperseg", optarg, 1, (size_t)1 << 20, &sc.nperseg))) return rc;
            if (!model_only) model_only = "nperseg";
            break;
        case O_EVALSEG:
            if ((rc = dd_cli_parse_size(NAME, "--eval-segments", optarg, 1, (size_t)1 << 40, &sc.eval_segments)))
                return rc;
            if (!model_only) model_only = "eval-segments";
            break;
        case O_CLUSTER: cluster = optarg; break;
        case O_MICRO:
            if (strcmp(optarg, "auto") == 0) {
                micro = -1;
            } else {
                size_t v;
                if (!dd_is_decimal(optarg) || strchr(optarg, '.') || strchr(optarg, 'e') || strchr(optarg, 'E'))
                    return dd_cli_usage(NAME, "--micro: expected a positive integer or auto, got '%s'", optarg);
                if ((rc = dd_cli_parse_size(NAME, "--micro", optarg, 1, DD_PP_MAX_MICRO, &v))) return rc;
                micro = (int)v;
            }
            if (!cluster_only) cluster_only = "micro";
            break;
        case O_SCHEDULE: {
            static const char *const kinds[] = {"gpipe", "1f1b", "interleaved", NULL};
            if ((rc = dd_cli_parse_choice(NAME, "--schedule", optarg, kinds, &sched))) return rc;
            if (!cluster_only) cluster_only = "schedule";
            break;
        }
        case O_VIRTUAL: {
            size_t v;
            if ((rc = dd_cli_parse_size(NAME, "--virtual", optarg, 1, DD_PP_MAX_VSTAGES, &v))) return rc;
            virt = (int)v;
            if (!cluster_only) cluster_only = "virtual";
            break;
        }
        case O_GFLOPS:
            if ((rc = dd_cli_parse_double(NAME, "--gflops", optarg, 1e-6, 1e9, &gflops))) return rc;
            if (!cluster_only) cluster_only = "gflops";
            break;
        case O_MEASURE: measure = 1; break;
        case O_PSSERVERS:
            if ((rc = dd_cli_parse_size(NAME, "--ps-servers", optarg, 1, 64, &ps_servers))) return rc;
            break;
        case O_WORKERS:
            if ((rc = dd_cli_parse_size(NAME, "--workers", optarg, 1, 1u << 20, &ps_workers))) return rc;
            workers_given = 1;
            break;
        case O_REPLICAS:
            if ((rc = dd_cli_parse_size(NAME, "--replicas", optarg, 0, 63, &ps_replicas))) return rc;
            replicas_given = 1;
            break;
        case O_SHARD: {
            static const char *const modes[] = {"none", "zero1", "zero2", "zero3", "all", NULL};
            shard_arg = optarg;
            if ((rc = dd_cli_parse_choice(NAME, "--shard", optarg, modes, &mode))) return rc;
            if (mode == 4) mode = -1;
            if (!model_only) model_only = "shard";
            break;
        }
        case O_OPT: {
            static const char *const opts[] = {"sgd", "adam", "adamw", NULL};
            int k;
            if ((rc = dd_cli_parse_choice(NAME, "--opt", optarg, opts, &k))) return rc;
            sc.opt = k == 0 ? DD_OPTIM_SGD : k == 1 ? DD_OPTIM_ADAM : DD_OPTIM_ADAMW;
            if (!model_only) model_only = "opt";
            break;
        }
        case O_MOMENTUM:
            if ((rc = dd_cli_parse_double(NAME, "--momentum", optarg, 0.0, 0.999999, &sc.momentum))) return rc;
            if (!model_only) model_only = "momentum";
            break;
        case O_ALLREDUCE: {
            dd_allreduce_algo a;
            if (dd_allreduce_parse(optarg, &a) != DD_OK) {
                char choices[256];
                dd_allreduce_choices(choices, sizeof choices);
                return dd_cli_usage(NAME, "--allreduce: expected %s, got '%s'", choices, optarg);
            }
            sc.algo = a;
            if (!model_only) model_only = "allreduce";
            break;
        }
        case O_RUN:
            if (nruns_arg == DD_PLAN_MAX_RUNS) return dd_cli_usage(NAME, "--run: at most %d runs", DD_PLAN_MAX_RUNS);
            run_args[nruns_arg++] = optarg;
            break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (calibrate) {
        if (model || have_params || nruns_arg)
            return dd_cli_usage(NAME, "--calibrate measures this machine: it takes no --%s",
                                model ? "model" : have_params ? "params" : "run");
        return run_calibrate(cal_path ? cal_path : "distdpd-calibration.json", json);
    }
    /* the calibration file (every plan but --calibrate, which writes it) */
    dd_plan_calib cal;
    int have_cal = 0;
    if (cal_path) {
        dd_status st = dd_plan_calib_load(cal_path, &cal);
        if (st != DD_OK) return dd_cli_fail(NAME, st);
        have_cal = 1;
    }
    if (nruns_arg) { /* the measured runs' plan: their step time, strong scaling of their global batch */
        const char *bad = have_params ? "--params" : model ? "--model" : cluster ? "--cluster"
                        : ps_servers ? "--ps-servers" : json ? "--json" : ranks_arg ? "--ranks" : compute > 0 ? "--step-compute-s"
                        : estimate ? estimate : NULL;
        if (bad) return dd_cli_usage(NAME, "%s cannot be given with --run (the runs give the model, batch and times)", bad);
        dd_link rl, ri;
        if (!link_name && have_cal) link_name = "measured";
        if (link_name && (rc = parse_link("--link", link_name, have_cal, &cal, &rl))) return rc;
        if ((rc = parse_link("--intra", intra_name ? intra_name : have_cal ? "measured" : "shm", have_cal, &cal, &ri)))
            return rc;
        return dd_plan_runs(NAME, run_args, nruns_arg, link_name ? &rl : NULL, &ri, (int)rpn, link_name);
    }
    if (ps_servers) {
        if (!have_params) return dd_cli_usage(NAME, "--ps-servers needs --params P (the model's parameter count)");
        const char *bad = model ? "--model" : cluster ? "--cluster" : measure ? "--measure-compute"
                        : ranks_arg ? "--ranks (give --workers)" : intra_name ? "--intra" : rpn_given ? "--ranks-per-node"
                        : bucket_arg ? "--bucket-mb" : !overlap ? "--no-overlap" : NULL;
        if (bad) return dd_cli_usage(NAME, "%s cannot be given with --ps-servers (the parameter-server plan)", bad);
        if (replicas_given && ps_replicas > ps_servers - 1)
            return dd_cli_usage(NAME, "--replicas %zu: at most --ps-servers - 1 = %zu (each replica on another server)",
                                ps_replicas, ps_servers - 1);
        if (sc.momentum != 0 && sc.opt != DD_OPTIM_SGD) return dd_cli_usage(NAME, "--momentum applies to --opt sgd only");
        if (compute > 0 && estimate)
            return dd_cli_usage(NAME, "%s cannot be given with --step-compute-s (--samples and --flops estimate the "
                                      "compute time that --step-compute-s gives)", estimate);
        if (!link_name) link_name = have_cal ? "measured" : "ethernet-10g";
        dd_plan_ps_cfg pc = {.params = params, .workers = (int)ps_workers, .servers = (int)ps_servers};
        /* the cluster file's default: one replica when there is another server */
        pc.replicas = replicas_given ? (int)ps_replicas : ps_servers > 1 ? 1 : 0;
        pc.repl_floats = sc.opt != DD_OPTIM_SGD ? 3 : sc.momentum != 0 ? 2 : 1;
        pc.compute_s = compute > 0 ? compute : estimate ? 6.0 * params * samples / flops : 0;
        if ((rc = parse_link("--link", link_name, have_cal, &cal, &pc.link))) return rc;
        return run_ps_plan(&pc, link_name, sc.opt, sc.momentum, json);
    }
    if (workers_given || replicas_given)
        return dd_cli_usage(NAME, "--%s needs --ps-servers K (the parameter-server plan)",
                            workers_given ? "workers" : "replicas");
    if (model && have_params)
        return dd_cli_usage(NAME, "--params cannot be given with --model (the model's own parameter count is used)");
    if (cluster && !model) return dd_cli_usage(NAME, "--cluster needs --model NAME (planning a model's layouts)");
    if (measure && !model) return dd_cli_usage(NAME, "--measure-compute needs --model NAME (it times the model)");
    if (cluster_only && !cluster)
        return dd_cli_usage(NAME, "--%s needs --cluster FILE (planning the model-parallel layouts)", cluster_only);
    if (measure && gflops > 0)
        return dd_cli_usage(NAME, "--gflops cannot be given with --measure-compute (it measures the speed)");
    if (cluster) {
        const char *bad = ranks_arg ? "--ranks" : link_name ? "--link" : intra_name ? "--intra" : rpn_given ? "--ranks-per-node"
                        : cal_path ? "--calibration" : shard_arg ? "--shard" : NULL;
        if (bad)
            return dd_cli_usage(NAME, "%s cannot be given with --cluster (the cluster file gives the nodes, ranks and "
                                      "links; every sharding mode is planned)",
                                bad);
        if (virt > 1 && sched != DD_PP_INTERLEAVED)
            return dd_cli_usage(NAME, "--virtual %d needs --schedule interleaved (gpipe and 1f1b hold one stage group per "
                                      "rank)",
                                virt);
        if (sc.task == DD_TRAIN_ILA)
            return dd_cli_usage(NAME, "--task ila cannot be planned with --cluster (the model-parallel plan covers pa and "
                                      "dla)");
    }
    if (!model && !have_params) return dd_cli_usage(NAME, "missing --params P or --model NAME (or --calibrate)");
    if (!model && model_only)
        return dd_cli_usage(NAME, "--%s needs --model NAME (planning a model's sharding modes)", model_only);
    if (pa_only && !pa_model) return dd_cli_usage(NAME, "--%s needs --pa-model NAME", pa_only);

    /* --ranks: one count, or a list with --model */
    int ranks[MAX_RANKS], nranks = 0;
    if (!ranks_arg) {
        ranks[nranks++] = 64;
    } else {
        const char *p = ranks_arg;
        for (;;) {
            const char *e = strchr(p, ',');
            const size_t len = e ? (size_t)(e - p) : strlen(p);
            char tok[32];
            if (len == 0 || len >= sizeof tok)
                return dd_cli_usage(NAME, "--ranks: expected a positive integer or a list P,P2,..., got '%s'",
                                    ranks_arg);
            if (nranks == MAX_RANKS) return dd_cli_usage(NAME, "--ranks: at most %d rank counts", MAX_RANKS);
            memcpy(tok, p, len);
            tok[len] = '\0';
            size_t v;
            if ((rc = dd_cli_parse_size(NAME, "--ranks", tok, 1, 1u << 24, &v))) return rc;
            ranks[nranks++] = (int)v;
            if (!e) break;
            p = e + 1;
        }
        if (nranks > 1 && !model)
            return dd_cli_usage(NAME, "--ranks: a list of rank counts needs --model NAME (--params takes one)");
    }

    if (model) {
        /* options of the --params step model that do not apply */
        if (compute > 0) return dd_cli_usage(NAME, "--step-compute-s cannot be given with --model");
        if (estimate) return dd_cli_usage(NAME, "%s cannot be given with --model", estimate);
        if (!overlap) return dd_cli_usage(NAME, "--no-overlap cannot be given with --model (--bucket-mb 0 is one allreduce)");
        if (bucket_arg && (rc = dd_cli_parse_double(NAME, "--bucket-mb", bucket_arg, 0, 4096, &sc.bucket_mb)))
            return rc;
        if (sc.task != DD_TRAIN_PA && !pa_model)
            return dd_cli_usage(NAME, "--task %s needs --pa-model NAME (the frozen PA model)", dd_train_task_name(sc.task));
        if (sc.task == DD_TRAIN_PA && pa_model)
            return dd_cli_usage(NAME, "--pa-model applies to --task dla or ila (a DPD trained through a PA model)");
        if (sc.momentum != 0 && sc.opt != DD_OPTIM_SGD) return dd_cli_usage(NAME, "--momentum applies to --opt sgd only");
        if (sc.frame * sc.batch > ((size_t)1 << 28))
            return dd_cli_usage(NAME, "--frame x --batch = %zu exceeds 2^28 samples per step", sc.frame * sc.batch);
        if (!link_name) link_name = have_cal ? "measured" : "ethernet-10g";
        if (!intra_name) intra_name = have_cal ? "measured" : "shm";
        if ((rc = parse_link("--link", link_name, have_cal, &cal, &sc.link))) return rc;
        if ((rc = parse_link("--intra", intra_name, have_cal, &cal, &sc.intra))) return rc;
        sc.ranks_per_node = (int)rpn;
        dd_model *m = NULL, *pa = NULL;
        if ((rc = make_model("--model", model, "", mnames, nm, mvals, &m))) return rc;
        if (pa_model && (rc = make_model("--pa-model", pa_model, "pa-", mnames, nm, pavals, &pa))) {
            dd_model_destroy(&m);
            return rc;
        }
        sc.model = m;
        sc.pa = pa;
        if (cluster || measure) {
            mp_opts mo = {model, cluster, micro, (dd_pp_kind)sched, virt, gflops, measure, json};
            dd_model_cfg mc = *dd_model_config(m);
            rc = run_mp_plan(&sc, &mc, &mo);
        } else {
            rc = run_shard_plan(&sc, ranks, nranks, mode, link_name, json);
        }
        dd_model_destroy(&m);
        dd_model_destroy(&pa);
        return rc;
    }

    /* options that the others would silently override */
    if (compute > 0 && estimate)
        return dd_cli_usage(NAME, "%s cannot be given with --step-compute-s (--samples and --flops estimate the "
                                  "compute time that --step-compute-s gives)", estimate);
    if (bucket_arg && (rc = dd_cli_parse_double(NAME, "--bucket-mb", bucket_arg, 1e-6, 1e6, &bucket_mb))) return rc;
    if (!overlap && bucket_arg)
        return dd_cli_usage(NAME, "--bucket-mb cannot be given with --no-overlap (one allreduce, no buckets)");

    dd_plan_cfg cfg;
    dd_plan_cfg_default(&cfg);
    if (!link_name) link_name = have_cal ? "measured" : "ethernet-10g";
    if (!intra_name) intra_name = have_cal ? "measured" : "shm";
    if ((rc = parse_link("--link", link_name, have_cal, &cal, &cfg.link))) return rc;
    if ((rc = parse_link("--intra", intra_name, have_cal, &cal, &cfg.intra))) return rc;
    cfg.params = params;
    cfg.ranks = ranks[0];
    cfg.ranks_per_node = (int)rpn;
    cfg.compute_s = compute > 0 ? compute : 6.0 * params * samples / flops;
    cfg.bucket_bytes = bucket_mb * 1e6;
    cfg.overlap = overlap;
    dd_plan_result r;
    dd_status st = dd_plan_run(&cfg, &r);
    if (st != DD_OK) return dd_cli_fail(NAME, st);

    if (json) {
        char *txt = NULL;
        if ((st = dd_plan_json(&r, link_name, intra_name, &txt)) != DD_OK) return dd_cli_fail(NAME, st);
        printf("%s\n", txt);
        free(txt);
        return DD_EXIT_OK;
    }
    char b1[32], b2[32];
    fmt_bytes(b1, sizeof b1, r.grad_bytes);
    printf("model:      %.0f parameters = %s of float32 gradients; compute %.4g s per step and rank%s\n",
           params, b1, cfg.compute_s, compute > 0 ? "" : " (6 P samples / flops)");
    print_link("link:", link_name, &cfg.link);
    print_link("intra:", intra_name, &cfg.intra);
    if (cfg.bucket_bytes > 0) fmt_bytes(b2, sizeof b2, cfg.bucket_bytes);
    printf("hier:       %d ranks per node; overlap %s; buckets %s\n", cfg.ranks_per_node,
           overlap ? "on (buckets reduced during backward, 2/3 of compute)" : "off",
           !overlap ? "none" : cfg.bucket_bytes > 0 ? b2 : "best per row");
    /* one column per registered algorithm in each half */
    const int na = dd_allreduce_count();
    printf("\n%7s  %-*s  %-*s %s\n", "", 9 * na - 1, "one allreduce of all gradients (ms)", 7 * na - 1,
           "efficiency (best bucket)", "");
    printf("%7s", "ranks");
    for (int a = 0; a < na; a++) printf(" %8s", dd_allreduce_name((dd_allreduce_algo)a));
    printf("  ");
    for (int a = 0; a < na; a++) printf(" %6s", dd_allreduce_name((dd_allreduce_algo)a));
    printf("  %s\n", "best (bucket)");
    for (int i = 0; i < r.nrows; i++) {
        const dd_plan_row *w = &r.rows[i];
        printf("%7d", w->ranks);
        for (int a = 0; a < na; a++) printf(" %8.3f", w->allreduce_s[a] * 1e3);
        printf("  ");
        for (int a = 0; a < na; a++) printf(" %5.1f%%", 100 * w->efficiency[a]);
        fmt_bytes(b1, sizeof b1, w->bucket_bytes[w->best]);
        printf("  %s (%s)%s\n", dd_allreduce_name((dd_allreduce_algo)w->best), b1,
               i == r.target_row ? "  <- target" : "");
    }
    fmt_bytes(b1, sizeof b1, r.bucket_bytes);
    printf("\nrecommendation at %d ranks: --allreduce %s, buckets of %s: efficiency %.1f %%, step %.4g s "
           "(compute %.4g s)\n",
           cfg.ranks, dd_allreduce_name((dd_allreduce_algo)r.algo), b1, 100 * r.efficiency, r.step_s, cfg.compute_s);
    if (r.latency_bound)
        printf("  latency-bound: the per-message terms dominate; prefer log-latency algorithms (tree, rhd)\n"
               "  and fewer, larger buckets; compression shrinks bytes, not messages.\n");
    else
        printf("  bandwidth-bound: the per-byte terms dominate; a bandwidth-optimal algorithm (ring, rhd)\n"
               "  and overlap matter most.\n");
    if (r.compression_ratio == 1)
        printf("  compression: not needed (efficiency >= 90 %% without it).\n");
    else if (r.compression_ratio > 1)
        printf("  compression: a ratio of %.0fx reaches 90 %% (fp16 2x, int8 4x, top-k with error feedback for\n"
               "  more; sparse results travel by allgather, whose volume grows with the rank count).\n",
               r.compression_ratio);
    else
        printf("  compression: no ratio up to 1024x reaches 90 %% (latency-bound): synchronise less often\n"
               "  instead (larger local batches, local SGD / federated averaging every H steps).\n");
    /* one statement per threshold, and none that the other implies ("at least 90 % up to
     * 4096, at least 50 % up to 4096" said the same twice) */
    const int top = r.rows[r.nrows - 1].ranks > 4096 ? r.rows[r.nrows - 1].ranks : 4096;
    printf("  scaling (weak: every rank keeps its local batch; the strong scaling of a measured run's\n"
           "  global batch: distdpd plan --run RUN): ");
    if (r.max_ranks_90 >= top)
        printf("efficiency >= 90 %% at every rank count of the table (8 .. %d).\n", top);
    else if (r.max_ranks_90 > 0 && r.max_ranks_50 >= top)
        printf("efficiency >= 90 %% up to %d ranks, >= 50 %% up to %d.\n", r.max_ranks_90, top);
    else if (r.max_ranks_90 > 0)
        printf("efficiency >= 90 %% up to %d ranks, >= 50 %% up to %d, below 50 %% beyond.\n", r.max_ranks_90,
               r.max_ranks_50);
    else if (r.max_ranks_50 > 0)
        printf("efficiency < 90 %% from 8 ranks on, >= 50 %% up to %d ranks.\n", r.max_ranks_50);
    else
        printf("efficiency < 50 %% from 8 ranks on.\n");
    return DD_EXIT_OK;
}
