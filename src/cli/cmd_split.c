/* `distdpd split --data DIR --by drive|time --parts N --out OUT`: one measured data set
 * cut into federated benches OUT/bench-00 .. (dataset.h dd_dataset_partition), each a
 * data set with the source's spec and its own train/val/test, plus OUT/benches.json
 * saying where every part's samples come from. docs/data.md "Benches". */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "benches.h"
#include "cli.h"
#include "rf.h"

static const char *const NAME = "split";
static const char *const bys[] = {"time", "drive", NULL};
static const char *const formats[] = {"opendpd", "bin", "sigmf", NULL};

static void help(void) {
    printf("usage: distdpd split --data DIR --by drive|time --parts N --out OUT [options]\n"
           "\n"
           "Cuts one data set (e.g. a measured one) into N federated benches OUT/bench-00 ..\n"
           "OUT/bench-(N-1), each a data set with the source's spec, for `distdpd fed-sim`.\n"
           "Every split is cut on its own, so each bench keeps a train, val and test split\n"
           "taken from the source's train, val and test; together the benches hold every\n"
           "sample of the source exactly once.\n"
           "  --by time    N contiguous time segments of each split (bench 0 the earliest)\n"
           "  --by drive   each split cut into frames of --frame samples (the last frame\n"
           "               takes the remainder), grouped by their mean input power into N\n"
           "               quantile bands (bench 0 the lowest drive), frames in time order\n"
           "OUT/benches.json lists the benches: sample counts, the source ranges of every\n"
           "split and the input power range of their frames; with --format opendpd each\n"
           "bench's spec.json records the same under \"bench\".\n"
           "\n"
           "options:\n"
           "  --data DIR          source data set (OpenDPD directory, SigMF, .ddb)\n"
           "  --by MODE           drive or time\n"
           "  --parts N           benches, 2..64\n"
           "  --frame L           frame length of --by drive, samples (default 512)\n"
           "  --out OUT           output directory (created; must not hold benches)\n"
           "  --format F          opendpd (default), bin or sigmf, as distdpd simulate\n"
           "  --force             replace the benches OUT holds\n"
           "  -q, --quiet         no per-bench lines\n"
           "  -h, --help          this help\n"
           "\n"
           "output: one line per bench (samples per split, input power range).\n"
           "exit status: 0 ok, 1 runtime error (unreadable data, too few frames), 2 usage\n");
}

static cJSON *part_json(const dd_part *pt, int p, const char *source, int by, size_t frame) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    char name[16];
    snprintf(name, sizeof name, "bench-%02d", p);
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "source", source);
    cJSON_AddStringToObject(o, "by", bys[by]);
    cJSON_AddNumberToObject(o, "part", p);
    if (by == DD_PART_DRIVE) cJSON_AddNumberToObject(o, "frame", (double)frame);
    for (int s = 0; s < DD_SPLIT_COUNT; s++) {
        cJSON *sj = cJSON_AddObjectToObject(o, dd_split_name((dd_split)s));
        if (!sj) break;
        cJSON_AddNumberToObject(sj, "samples", (double)pt->ds->n[s]);
        cJSON_AddNumberToObject(sj, "frames", (double)pt->frames[s]);
        if (isfinite(pt->power_lo_db[s])) {
            cJSON_AddNumberToObject(sj, "power_lo_db", pt->power_lo_db[s]);
            cJSON_AddNumberToObject(sj, "power_hi_db", pt->power_hi_db[s]);
        }
        cJSON *r = cJSON_AddArrayToObject(sj, "ranges");
        for (size_t k = 0; r && k < pt->n_ranges[s]; k++) {
            double v[2] = {(double)pt->start[s][k], (double)pt->len[s][k]};
            cJSON_AddItemToArray(r, cJSON_CreateDoubleArray(v, 2));
        }
    }
    return o;
}

int dd_cmd_split(int argc, char **argv) {
    enum { O_DATA = 256, O_BY, O_PARTS, O_FRAME, O_OUT, O_FORMAT, O_FORCE };
    static const struct option longopts[] = {
        {"data", required_argument, NULL, O_DATA},     {"by", required_argument, NULL, O_BY},
        {"parts", required_argument, NULL, O_PARTS},   {"frame", required_argument, NULL, O_FRAME},
        {"out", required_argument, NULL, O_OUT},       {"format", required_argument, NULL, O_FORMAT},
        {"force", no_argument, NULL, O_FORCE},         {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0}};
    const char *data = NULL, *out = NULL;
    int by = -1, format = 0, force = 0, quiet = 0, c, rc;
    size_t parts = 0, frame = 512;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
        switch (c) {
        case O_DATA: data = optarg; break;
        case O_BY:
            if ((rc = dd_cli_parse_choice(NAME, "--by", optarg, bys, &by))) return rc;
            break;
        case O_PARTS:
            if ((rc = dd_cli_parse_size(NAME, "--parts", optarg, 2, DD_BENCHES_MAX, &parts))) return rc;
            break;
        case O_FRAME:
            if ((rc = dd_cli_parse_size(NAME, "--frame", optarg, 1, (size_t)1 << 30, &frame))) return rc;
            break;
        case O_OUT: out = optarg; break;
        case O_FORMAT:
            if ((rc = dd_cli_parse_choice(NAME, "--format", optarg, formats, &format))) return rc;
            break;
        case O_FORCE: force = 1; break;
        case 'q': quiet = 1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!data) return dd_cli_usage(NAME, "missing --data DIR");
    if (by < 0) return dd_cli_usage(NAME, "missing --by drive|time");
    if (!parts) return dd_cli_usage(NAME, "missing --parts N");
    if (!out) return dd_cli_usage(NAME, "missing --out OUT");
    dd_cli_log_init(quiet ? -1 : 0);

    char rbuf[4200], path[4400], found[256];
    struct stat sb;
    snprintf(path, sizeof path, "%s/benches.json", out);
    if (!force && stat(path, &sb) == 0)
        return dd_cli_fail(NAME, dd_error(DD_ERR_ARG, "%s already exists: choose another --out, or give --force to "
                                                      "replace the benches", path));
    for (size_t p = 0; p < parts && !force; p++) {
        snprintf(path, sizeof path, "%s/bench-%02zu", out, p);
        if (dd_sim_existing_dataset(path, found, sizeof found) > 0)
            return dd_cli_fail(NAME, dd_error(DD_ERR_ARG, "%s already holds a data set (%s): choose another --out, or "
                                                          "give --force to replace it", path, found));
    }
    dd_dataset *ds = NULL;
    dd_part *pt = dd_calloc(parts, sizeof *pt);
    cJSON *root = NULL, *list = NULL;
    dd_status st = pt ? DD_OK : DD_ERR_NOMEM;
    if (st == DD_OK) st = dd_dataset_load(dd_rf_resolve_dataset(data, rbuf, sizeof rbuf), &ds);
    if (st == DD_OK) {
        st = dd_dataset_partition(ds, (dd_part_by)by, (int)parts, frame, pt);
        if (st != DD_OK) dd_error_prefix(st, "%s: ", data);
    }
    if (st == DD_OK) st = dd_cli_mkdirs(out);
    if (st == DD_OK) {
        root = cJSON_CreateObject();
        if (root) {
            cJSON_AddStringToObject(root, "generator", "distdpd split " DD_VERSION_STRING);
            cJSON_AddStringToObject(root, "source", data);
            cJSON_AddStringToObject(root, "by", bys[by]);
            cJSON_AddNumberToObject(root, "benches", (double)parts);
            if (by == DD_PART_DRIVE) cJSON_AddNumberToObject(root, "frame", (double)frame);
            cJSON_AddStringToObject(root, "format", formats[format]);
            list = cJSON_AddArrayToObject(root, "list");
        }
        if (!list) st = DD_ERR_NOMEM;
    }
    for (size_t p = 0; p < parts && st == DD_OK; p++) {
        char sub[4300];
        snprintf(sub, sizeof sub, "%s/bench-%02zu", out, p);
        const dd_dataset *d = pt[p].ds;
        if (force && (st = dd_sim_remove_dataset(sub)) != DD_OK) break;
        if ((st = dd_cli_mkdirs(sub)) != DD_OK) break;
        if (format == 1) {
            snprintf(path, sizeof path, "%s/data.ddb", sub);
            st = dd_dataset_save_bin(d, path);
        } else if (format == 2) {
            snprintf(path, sizeof path, "%s/signal", sub);
            st = dd_dataset_save_sigmf(d, path);
        } else {
            st = dd_dataset_save_opendpd(d, sub);
            snprintf(path, sizeof path, "%s/spec.json", sub);
            if (st == DD_OK) st = dd_bench_annotate(path, part_json(&pt[p], (int)p, data, by, frame));
        }
        if (st != DD_OK) break;
        cJSON *e = part_json(&pt[p], (int)p, data, by, frame);
        if (!e) {
            st = DD_ERR_NOMEM;
            break;
        }
        cJSON_AddStringToObject(e, "path", strrchr(sub, '/') + 1);
        cJSON_AddItemToArray(list, e);
        if (!quiet) {
            printf("bench-%02zu: train %zu, val %zu, test %zu samples", p, d->n[0], d->n[1], d->n[2]);
            if (by == DD_PART_DRIVE)
                printf("; %zu/%zu/%zu frames, train input power %.2f .. %.2f dB\n", pt[p].frames[0], pt[p].frames[1],
                       pt[p].frames[2], pt[p].power_lo_db[0], pt[p].power_hi_db[0]);
            else if (pt[p].n_ranges[0])
                printf("; train samples %zu .. %zu, input power %.2f dB\n", pt[p].start[0][0],
                       pt[p].start[0][0] + pt[p].len[0][0] - 1, pt[p].power_lo_db[0]);
            else
                printf("\n");
        }
    }
    if (st == DD_OK) {
        snprintf(path, sizeof path, "%s/benches.json", out);
        st = dd_cli_write_json(path, root);
        root = NULL;
    }
    cJSON_Delete(root);
    dd_part_free(pt, (int)parts);
    dd_free(pt);
    dd_dataset_free(&ds);
    return st == DD_OK ? DD_EXIT_OK : dd_cli_fail(NAME, st);
}
