/* `distdpd metrics`: the OpenDPD-compatible metric set (NMSE, ACLR, spectral EVM) of a
 * test signal against a reference, as text or as one JSON object (a fixed interface
 * that other tools call). */
#include <complex.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/dataset.h"
#include "distdpd/metrics.h"

static const char *const NAME = "metrics";

static void help(void) {
    printf("usage: distdpd metrics --ref REF --test TEST --spec SPEC.json [options]\n"
           "\n"
           "Compares TEST with REF (same length) and measures TEST's spectrum: NMSE of TEST\n"
           "against REF, ACLR (left, right, average) of TEST, and OpenDPD's spectral EVM of\n"
           "TEST against REF. REF and TEST are I/Q CSV files (header \"I,Q\") or SigMF\n"
           "recordings (NAME.sigmf-meta). SPEC.json is an OpenDPD spec file (input_signal_fs,\n"
           "bw_main_ch, bw_sub_ch, n_sub_ch, nperseg; optional bw_occupied).\n"
           "\n"
           "options:\n"
           "  --ref FILE          reference signal (e.g. the measured PA output)\n"
           "  --test FILE         signal under test (e.g. a model's prediction)\n"
           "  --spec FILE         spec.json with the sample rate and channel layout\n"
           "  --aclr DEF          opendpd (default: adjacent sub-channel-wide bands vs the\n"
           "                      strongest sub-channel) or 3gpp (adjacent channels at\n"
           "                      +-bw_main over bw_occupied)\n"
           "  --nmse MODE         segmented (default: mean of per-nperseg-segment NMSE in dB,\n"
           "                      as OpenDPD) or pooled (one ratio over the whole signal)\n"
           "  --gain auto|G       divide TEST by a gain before NMSE and EVM (ACLR does not\n"
           "                      depend on it), so a PA output compares with its input:\n"
           "                      auto = the least-squares complex gain of TEST ~ g REF\n"
           "                      (no delay search: align the files first); G = a real gain,\n"
           "                      linear (\"12.5\") or in dB with the suffix dB (\"21.9dB\" =\n"
           "                      10^(21.9/20)). The gain used is printed (JSON: gain_re,\n"
           "                      gain_im, gain_db, gain_deg). Default: none (g = 1)\n"
           "  --json              print exactly one JSON object:\n"
           "                      {\"nmse_db\",\"aclr_l_db\",\"aclr_r_db\",\"aclr_avg_db\",\"evm_db\"}\n"
           "                      (plus the gain keys with --gain)\n"
           "  -v, --verbose       more log output;  -q, --quiet: errors only\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error (unreadable file, length mismatch), 2 usage\n");
}

/* Reads an I/Q signal from CSV or SigMF (by extension). */
static dd_status read_signal(const char *path, dd_cf32 **x, size_t *n) {
    size_t l = strlen(path);
    const char *ext = ".sigmf-meta";
    if (l > strlen(ext) && strcmp(path + l - strlen(ext), ext) == 0) {
        double fs;
        return dd_sigmf_read(path, x, n, &fs);
    }
    return dd_csv_read_iq(path, x, n);
}

/* --gain: "auto", a linear gain ("12.5") or one in dB ("21.9dB"). Returns 0 or the
 * usage exit code. */
static int parse_gain(const char *arg, int *is_auto, double *g) {
    if (strcmp(arg, "auto") == 0) {
        *is_auto = 1;
        return 0;
    }
    *is_auto = 0;
    char *end = NULL;
    double v = strtod(arg, &end);
    int db = strcmp(end, "dB") == 0 || strcmp(end, "db") == 0 || strcmp(end, "DB") == 0; /* strtod sets end */
    if (end == arg || (!db && *end) || !isfinite(v))
        return dd_cli_usage(NAME, "--gain '%s': expected auto, a linear gain (12.5) or one in dB (21.9dB)", arg);
    if (db) v = pow(10.0, v / 20.0);
    if (!(v > 0) || !isfinite(v))
        return dd_cli_usage(NAME, "--gain '%s': the gain must be > 0 (linear) or finite (dB)", arg);
    *g = v;
    return 0;
}

int dd_cmd_metrics(int argc, char **argv) {
    enum { O_REF = 256, O_TEST, O_SPEC, O_ACLR, O_NMSE, O_JSON, O_GAIN };
    static const struct option longopts[] = {
        {"ref", required_argument, NULL, O_REF},   {"test", required_argument, NULL, O_TEST},
        {"spec", required_argument, NULL, O_SPEC}, {"aclr", required_argument, NULL, O_ACLR},
        {"nmse", required_argument, NULL, O_NMSE}, {"json", no_argument, NULL, O_JSON},
        {"gain", required_argument, NULL, O_GAIN},
        {"verbose", no_argument, NULL, 'v'},       {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    static const char *const aclr_names[] = {"opendpd", "3gpp", NULL};
    static const char *const nmse_names[] = {"segmented", "pooled", NULL};
    const char *ref_path = NULL, *test_path = NULL, *spec_path = NULL;
    int aclr = 0, pooled = 0, json = 0, verbosity = 0, c, rc, has_gain = 0, gain_auto = 0;
    double gain_lin = 1.0;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_REF: ref_path = optarg; break;
        case O_TEST: test_path = optarg; break;
        case O_SPEC: spec_path = optarg; break;
        case O_ACLR:
            if ((rc = dd_cli_parse_choice(NAME, "--aclr", optarg, aclr_names, &aclr))) return rc;
            break;
        case O_NMSE:
            if ((rc = dd_cli_parse_choice(NAME, "--nmse", optarg, nmse_names, &pooled))) return rc;
            break;
        case O_JSON: json = 1; break;
        case O_GAIN:
            if ((rc = parse_gain(optarg, &gain_auto, &gain_lin))) return rc;
            has_gain = 1;
            break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!ref_path) return dd_cli_usage(NAME, "missing --ref FILE");
    if (!test_path) return dd_cli_usage(NAME, "missing --test FILE");
    if (!spec_path) return dd_cli_usage(NAME, "missing --spec FILE");
    dd_cli_log_init(verbosity);

    dd_cf32 *ref = NULL, *test = NULL;
    size_t nref = 0, ntest = 0;
    dd_spec spec;
    char fmt[32];
    dd_metric_set m;
    dd_status st;
    int ret = DD_EXIT_RUNTIME;
    if ((st = dd_spec_read_json(spec_path, &spec, fmt, sizeof fmt)) != DD_OK) goto fail;
    if ((st = read_signal(ref_path, &ref, &nref)) != DD_OK) goto fail;
    if ((st = read_signal(test_path, &test, &ntest)) != DD_OK) goto fail;
    if (nref != ntest) {
        st = dd_error(DD_ERR_MISMATCH, "%s has %zu samples but %s has %zu; the lengths must match", ref_path,
                      nref, test_path, ntest);
        goto fail;
    }
    if (nref == 0) {
        st = dd_error(DD_ERR_RANGE, "%s holds no samples", ref_path);
        goto fail;
    }
    dd_cf64 g = 1.0;
    if ((st = dd_metrics_compute_gain(ref, test, nref, &spec, aclr ? DD_ACLR_3GPP : DD_ACLR_OPENDPD, pooled, gain_auto,
                                      gain_lin, &g, &m)) != DD_OK)
        goto fail;
    const double g_db = 20.0 * log10(cabs(g)), g_deg = carg(g) * 180.0 / M_PI;

    if (json) {
        cJSON *o = cJSON_CreateObject();
        char *txt = NULL;
        if (o && cJSON_AddNumberToObject(o, "nmse_db", m.nmse_db) &&
            cJSON_AddNumberToObject(o, "aclr_l_db", m.aclr.left_db) &&
            cJSON_AddNumberToObject(o, "aclr_r_db", m.aclr.right_db) &&
            cJSON_AddNumberToObject(o, "aclr_avg_db", m.aclr.avg_db) &&
            cJSON_AddNumberToObject(o, "evm_db", m.evm_db) &&
            (!has_gain || (cJSON_AddNumberToObject(o, "gain_re", creal(g)) && cJSON_AddNumberToObject(o, "gain_im", cimag(g)) &&
                           cJSON_AddNumberToObject(o, "gain_db", g_db) && cJSON_AddNumberToObject(o, "gain_deg", g_deg))))
            txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!txt) {
            st = dd_error(DD_ERR_NOMEM, "out of memory building the JSON output");
            goto fail;
        }
        printf("%s\n", txt);
        cJSON_free(txt);
    } else {
        printf("reference: %s (%zu samples)\n", ref_path, nref);
        printf("test:      %s (%zu samples)\n", test_path, ntest);
        printf("spec:      %s: fs %.6g MHz, main channel %.6g MHz = %d x %.6g MHz, nperseg %zu\n", spec_path,
               spec.fs / 1e6, spec.bw_main / 1e6, spec.n_sub, spec.bw_sub / 1e6, spec.nperseg);
        if (has_gain)
            printf("gain:      %s%.6g%+.6gi (%.3f dB, %.2f deg): test divided by it before NMSE and EVM\n",
                   gain_auto ? "least-squares " : "", creal(g), cimag(g), g_db, g_deg);
        char label[64];
        snprintf(label, sizeof label, "NMSE (%s, test vs ref):", pooled ? "pooled" : "segmented");
        printf("%-32s %9.3f dB\n", label, m.nmse_db);
        snprintf(label, sizeof label, "ACLR (%s) left:", aclr_names[aclr]);
        printf("%-32s %9.3f dBc\n", label, m.aclr.left_db);
        snprintf(label, sizeof label, "ACLR (%s) right:", aclr_names[aclr]);
        printf("%-32s %9.3f dBc\n", label, m.aclr.right_db);
        snprintf(label, sizeof label, "ACLR (%s) average:", aclr_names[aclr]);
        printf("%-32s %9.3f dBc\n", label, m.aclr.avg_db);
        printf("%-32s %9.3f dB\n", "EVM (spectral, OpenDPD):", m.evm_db);
    }
    ret = DD_EXIT_OK;
    goto cleanup;
fail:
    ret = dd_cli_fail(NAME, st);
cleanup:
    dd_free(ref);
    dd_free(test);
    return ret;
}
