/* `distdpd plan`: predicts from the alpha-beta-gamma model the time of one allreduce of
 * all gradients with each algorithm and the data-parallel efficiency at 8 .. 4096 ranks,
 * and recommends an algorithm, a bucket size and whether compression pays; with
 * --calibrate (under mpirun -np >= 2) measures alpha, beta and gamma on this machine,
 * writes them to a JSON file that later runs read with --calibration, and compares the
 * calibrated model with measured allreduce times. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_plan.h"
#include "distdpd/comm.h"
#include "distdpd/plan.h"

static const char *const NAME = "plan";

static void help(void) {
    printf("usage: distdpd plan --params P [options]\n"
           "       mpirun -np N distdpd plan --calibrate [--calibration FILE]\n"
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
           "  -h, --help             this help\n"
           "\n"
           "Link presets and the model's formulas: docs/comm.md.\n"
           "exit status: 0 ok, 1 runtime error (calibration file, MPI), 2 usage\n");
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
    static const dd_allreduce_algo algos[] = {DD_ALLREDUCE_RING, DD_ALLREDUCE_TREE, DD_ALLREDUCE_RHD,
                                              DD_ALLREDUCE_MPI};
    enum { NS = 4, NA = 4 };
    double meas[NA * NS];
    if ((st = dd_plan_measure(w, algos, NA, sizes, NS, 11, meas)) != DD_OK) {
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
            for (int a = 0; a < NA; a++)
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
            for (int a = 0; a < NA; a++)
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

int dd_cmd_plan(int argc, char **argv) {
    enum {
        O_PARAMS = 256, O_RANKS, O_LINK, O_INTRA, O_RPN, O_COMPUTE, O_SAMPLES, O_FLOPS, O_BUCKET,
        O_NOOVERLAP, O_CALFILE, O_CALIBRATE, O_JSON
    };
    static const struct option longopts[] = {{"params", required_argument, NULL, O_PARAMS},
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
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *link_name = NULL, *intra_name = NULL, *cal_path = NULL;
    double params = 0, compute = 0, samples = 12800, flops = 1e9, bucket_mb = 0;
    const char *estimate = NULL; /* --samples or --flops given */
    size_t ranks = 64, rpn = 8;
    int json = 0, calibrate = 0, overlap = 1, have_params = 0, c, rc;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_PARAMS:
            if ((rc = dd_cli_parse_whole(NAME, "--params", optarg, 1, 1e13, &params))) return rc;
            have_params = 1;
            break;
        case O_RANKS:
            if ((rc = dd_cli_parse_size(NAME, "--ranks", optarg, 1, 1u << 24, &ranks))) return rc;
            break;
        case O_LINK: link_name = optarg; break;
        case O_INTRA: intra_name = optarg; break;
        case O_RPN:
            if ((rc = dd_cli_parse_size(NAME, "--ranks-per-node", optarg, 1, 1u << 20, &rpn))) return rc;
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
        case O_BUCKET:
            if ((rc = dd_cli_parse_double(NAME, "--bucket-mb", optarg, 1e-6, 1e6, &bucket_mb))) return rc;
            break;
        case O_NOOVERLAP: overlap = 0; break;
        case O_CALFILE: cal_path = optarg; break;
        case O_CALIBRATE: calibrate = 1; break;
        case O_JSON: json = 1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (calibrate) return run_calibrate(cal_path ? cal_path : "distdpd-calibration.json", json);
    if (!have_params) return dd_cli_usage(NAME, "missing --params P (or --calibrate)");
    /* options that the others would silently override */
    if (compute > 0 && estimate)
        return dd_cli_usage(NAME, "%s cannot be given with --step-compute-s (--samples and --flops estimate the "
                                  "compute time that --step-compute-s gives)", estimate);
    if (!overlap && bucket_mb > 0)
        return dd_cli_usage(NAME, "--bucket-mb cannot be given with --no-overlap (one allreduce, no buckets)");

    dd_plan_calib cal;
    int have_cal = 0;
    if (cal_path) {
        dd_status st = dd_plan_calib_load(cal_path, &cal);
        if (st != DD_OK) return dd_cli_fail(NAME, st);
        have_cal = 1;
    }
    dd_plan_cfg cfg;
    dd_plan_cfg_default(&cfg);
    if (!link_name) link_name = have_cal ? "measured" : "ethernet-10g";
    if (!intra_name) intra_name = have_cal ? "measured" : "shm";
    if ((rc = parse_link("--link", link_name, have_cal, &cal, &cfg.link))) return rc;
    if ((rc = parse_link("--intra", intra_name, have_cal, &cal, &cfg.intra))) return rc;
    cfg.params = params;
    cfg.ranks = (int)ranks;
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
    printf("\n%7s  %-44s  %-34s %s\n", "", "one allreduce of all gradients (ms)", "efficiency (best bucket)", "");
    printf("%7s %8s %8s %8s %8s %8s   %6s %6s %6s %6s %6s  %s\n", "ranks", "ring", "tree", "rhd", "hier", "mpi",
           "ring", "tree", "rhd", "hier", "mpi", "best (bucket)");
    for (int i = 0; i < r.nrows; i++) {
        const dd_plan_row *w = &r.rows[i];
        printf("%7d", w->ranks);
        for (int a = 0; a < DD_ALLREDUCE_COUNT; a++) printf(" %8.3f", w->allreduce_s[a] * 1e3);
        printf("  ");
        for (int a = 0; a < DD_ALLREDUCE_COUNT; a++) printf(" %5.1f%%", 100 * w->efficiency[a]);
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
    if (r.max_ranks_90 > 0)
        printf("  scaling (weak, fixed local batch): efficiency >= 90 %% up to %d ranks", r.max_ranks_90);
    else
        printf("  scaling (weak, fixed local batch): efficiency < 90 %% from 8 ranks on");
    if (r.max_ranks_50 > 0) printf(", >= 50 %% up to %d ranks", r.max_ranks_50);
    printf(" (of 8 .. 4096).\n");
    return DD_EXIT_OK;
}
