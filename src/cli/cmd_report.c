/* `distdpd report`: an HTML report of a data set (spectra of PA input and output,
 * AM/AM, AM/PM, metric table with both ACLR definitions, PAPR, gain-only and MP fit
 * NMSE, and the demodulated EVM when simulation.json says which symbols were sent). */
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "rf.h"

static const char *const NAME = "report";

static void help(void) {
    printf("usage: distdpd report --data DATASET --out REPORT.html [options]\n"
           "\n"
           "Measures a data set and writes a self-contained HTML page (inline SVG plots, no\n"
           "scripts, no network): PSD of PA input and output, AM/AM and AM/PM (per-sample\n"
           "dots and binned medians), a metric table (PAPR; ACLR in the OpenDPD and the 3GPP\n"
           "definitions; EVM of input and output demodulated with the transmitted symbols\n"
           "when DATASET comes from `distdpd simulate`, i.e. has a simulation.json) and\n"
           "least-squares fits (gain only; memory polynomial fitted on train, NMSE on train\n"
           "and test). DATASET: as for `distdpd inspect`.\n"
           "\n"
           "options:\n"
           "  --data DATASET      the data set\n"
           "  --out FILE          the HTML file to write (atomically)\n"
           "  --title TEXT        page title (default \"distdpd report: DATASET\")\n"
           "  --mp K,M            memory polynomial orders 1..K, M taps (default 7,4);\n"
           "                      0 skips the fit\n"
           "  -v, --verbose       more log output;  -q, --quiet: errors only\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage\n");
}

/* "K,M" or "0". */
static int parse_mp(const char *val, int *K, int *M) {
    if (strcmp(val, "0") == 0) {
        *K = 0;
        *M = 0;
        return 0;
    }
    int k, m;
    char tail;
    if (sscanf(val, "%d,%d%c", &k, &m, &tail) != 2 || k < 1 || k > 16 || m < 1 || m > 64) {
        fprintf(stderr, "distdpd %s: --mp: expected K,M with K in 1..16 and M in 1..64 (or 0), got '%s'\n", NAME, val);
        return DD_EXIT_USAGE;
    }
    *K = k;
    *M = m;
    return 0;
}

int dd_cmd_report(int argc, char **argv) {
    enum { O_DATA = 256, O_OUT, O_TITLE, O_MP };
    static const struct option longopts[] = {
        {"data", required_argument, NULL, O_DATA},   {"out", required_argument, NULL, O_OUT},
        {"title", required_argument, NULL, O_TITLE}, {"mp", required_argument, NULL, O_MP},
        {"verbose", no_argument, NULL, 'v'},         {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};
    const char *data = NULL, *out = NULL, *title = NULL;
    int verbosity = 0, c, rc;
    dd_rf_opts ro;
    dd_rf_opts_default(&ro);
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_DATA: data = optarg; break;
        case O_OUT: out = optarg; break;
        case O_TITLE: title = optarg; break;
        case O_MP:
            if ((rc = parse_mp(optarg, &ro.mp_K, &ro.mp_M))) return rc;
            break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!data) return dd_cli_usage(NAME, "missing --data DATASET");
    if (!out) return dd_cli_usage(NAME, "missing --out FILE");
    dd_cli_log_init(verbosity);
    dd_cli_progress_quiet(verbosity < 0);

    char buf[4200], desc[512], ttl[4300];
    const char *path = dd_rf_resolve_dataset(data, buf, sizeof buf);
    dd_dataset *ds = NULL;
    dd_ofdm *frame = NULL;
    dd_rf_analysis an;
    memset(&an, 0, sizeof an);
    dd_status st;
    int ret = DD_EXIT_OK;
    dd_cli_progress("loading %s", path);
    if ((st = dd_dataset_load(path, &ds)) != DD_OK) goto fail;
    if ((st = dd_sim_load_frame(path, &frame, desc, sizeof desc)) != DD_OK) goto fail;
    if (frame) dd_cli_progress("simulation.json found: regenerated the transmitted OFDM frame");
    dd_cli_progress("measuring (PSD, ACLR, AM/AM, fits%s)", frame ? ", EVM" : "");
    if ((st = dd_rf_analyze(ds, frame, &ro, &an)) != DD_OK) goto fail;
    if (!title) {
        snprintf(ttl, sizeof ttl, "distdpd report: %s", data);
        title = ttl;
    }
    const char *details[] = {"Simulation", desc, NULL, NULL};
    dd_cli_progress("writing %s", out);
    if ((st = dd_rf_write_report(&an, title, path, ds->format, frame ? details : NULL, out)) != DD_OK) goto fail;
    if (verbosity >= 0) printf("report: %s\n", out);
    goto cleanup;
fail:
    ret = dd_cli_fail(NAME, st);
cleanup:
    dd_rf_free(&an);
    dd_ofdm_destroy(&frame);
    dd_dataset_free(&ds);
    return ret;
}
