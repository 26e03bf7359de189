/* `distdpd convert IN OUT`: a dataset from any of the four layouts (OpenDPD CSV directory,
 * single data.csv, SigMF pair, binary) to any other, streaming, with the spec carried over
 * and optional new split ratios (dataset.h dd_dataset_convert). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "distdpd/dataset.h"

static const char *const NAME = "convert";

static void help(void) {
    printf("usage: distdpd convert IN OUT [--to csv-dir|csv|sigmf|bin] [--split A,B,C]\n"
           "\n"
           "Converts the dataset IN (any layout distdpd reads: an OpenDPD directory with\n"
           "spec.json, a SigMF NAME_input/NAME_output pair, a binary .ddb file) to OUT in\n"
           "another layout, in chunks: a dataset larger than memory converts in bounded\n"
           "memory. The spec (sample rate, channel layout, nperseg, bw_occupied, split\n"
           "ratios) is carried over; samples are float32 in every layout and CSV is written\n"
           "with 9 significant digits, so they come out bit-exact.\n"
           "\n"
           "  --to csv-dir        OUT is a directory: spec.json + {train,val,test}_{input,output}.csv\n"
           "  --to csv            OUT is a directory: data.csv (I_in,Q_in,I_out,Q_out) + spec.json\n"
           "  --to sigmf          OUT is a prefix DIR/NAME: NAME_input/NAME_output .sigmf-data/-meta\n"
           "  --to bin            OUT is a file (distdpd binary format)\n"
           "                      default: bin when OUT ends in .ddb, sigmf when it ends in\n"
           "                      .sigmf-meta (the prefix is taken from it), else csv-dir\n"
           "  --split A,B,C       re-split the recording (all splits in time order) with these\n"
           "                      train,val,test ratios (>= 0, sum 1): train = floor(N A),\n"
           "                      val = floor(N B), test = the rest\n"
           "  --chunk N           samples per chunk (default 65536)\n"
           "  -q, --quiet         no summary;  -v, --verbose: more log output\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error (unreadable or bad input, named with file and\n"
           "line or field), 2 usage error\n");
}

static int parse_split(const char *arg, double r[3]) {
    char *end = NULL;
    const char *p = arg;
    for (int i = 0; i < 3; i++) {
        r[i] = strtod(p, &end);
        if (end == p || !(r[i] >= 0) || r[i] > 1 || (i < 2 && *end != ',') || (i == 2 && *end))
            return dd_cli_usage(NAME, "--split '%s': expected three ratios A,B,C in [0, 1] summing to 1", arg);
        p = end + 1;
    }
    double s = r[0] + r[1] + r[2];
    if (s < 1 - 1e-6 || s > 1 + 1e-6) return dd_cli_usage(NAME, "--split '%s': the ratios sum to %g, not 1", arg, s);
    return 0;
}

static int ends_with(const char *s, const char *sfx) {
    size_t a = strlen(s), b = strlen(sfx);
    return a >= b && strcmp(s + a - b, sfx) == 0;
}

int dd_cmd_convert(int argc, char **argv) {
    enum { O_TO = 256, O_SPLIT, O_CHUNK };
    static const struct option longopts[] = {{"to", required_argument, NULL, O_TO},
                                             {"split", required_argument, NULL, O_SPLIT},
                                             {"chunk", required_argument, NULL, O_CHUNK},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"quiet", no_argument, NULL, 'q'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    static const char *const fmts[] = {"csv-dir", "csv", "sigmf", "bin", NULL};
    int to = -1, verbosity = 0, c, rc;
    dd_convert_opts o;
    memset(&o, 0, sizeof o);
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_TO:
            if ((rc = dd_cli_parse_choice(NAME, "--to", optarg, fmts, &to))) return rc;
            break;
        case O_SPLIT:
            if ((rc = parse_split(optarg, o.split))) return rc;
            o.has_split = 1;
            break;
        case O_CHUNK:
            if ((rc = dd_cli_parse_size(NAME, "--chunk", optarg, 1, (size_t)1 << 26, &o.chunk))) return rc;
            break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (argc - optind < 2) return dd_cli_usage(NAME, "expected IN and OUT");
    if (argc - optind > 2) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind + 2]);
    const char *in = argv[optind];
    char out[4200];
    snprintf(out, sizeof out, "%s", argv[optind + 1]);
    if (to < 0) to = ends_with(out, ".ddb") ? DD_FMT_BIN : ends_with(out, ".sigmf-meta") ? DD_FMT_SIGMF : DD_FMT_CSV_DIR;
    if (to == DD_FMT_SIGMF) {
        /* a file name of the pair given: its prefix */
        static const char *const sfx[4] = {"_input.sigmf-meta", "_input.sigmf-data", "_output.sigmf-meta",
                                           "_output.sigmf-data"};
        for (int i = 0; i < 4; i++)
            if (ends_with(out, sfx[i])) {
                out[strlen(out) - strlen(sfx[i])] = '\0';
                break;
            }
    }
    dd_cli_log_init(verbosity);
    double t0 = dd_now();
    dd_convert_info info;
    dd_status st = dd_dataset_convert(in, out, (dd_data_format)to, &o, &info);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    if (verbosity >= 0)
        printf("%s (%s) -> %s (%s): %zu samples (train %zu, val %zu, test %zu; ratios %.6g/%.6g/%.6g), fs %.6g MHz, "
               "%.2f s\n",
               in, dd_data_format_name(info.from), out, dd_data_format_name((dd_data_format)to),
               info.n[0] + info.n[1] + info.n[2], info.n[0], info.n[1], info.n[2], info.spec.split[0], info.spec.split[1],
               info.spec.split[2], info.spec.fs / 1e6, dd_now() - t0);
    return DD_EXIT_OK;
}
