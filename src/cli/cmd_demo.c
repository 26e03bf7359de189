/* `distdpd demo`: the main job on the embedded default, no data needed. Simulates the
 * default realistic PA campaign (default OFDM preset through the "realistic" PA),
 * writes the data set, reads it back, measures it (ACLR, PAPR, demodulated EVM,
 * gain-only and MP fits) and writes DIR/report.html and DIR/summary.json. */
#include <getopt.h>
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "rf.h"

static const char *const NAME = "demo";

static void help(void) {
    printf("usage: distdpd demo --out DIR [options]\n"
           "\n"
           "Runs the main job on the embedded default, with no input data: simulates the\n"
           "default PA campaign (OFDM preset 'default' = 1 x 20 MHz NR, 256-QAM, through the\n"
           "'realistic' PA model at 45 dB SNR), writes the data set to DIR/data (OpenDPD\n"
           "layout + simulation.json), reads it back, measures it and writes\n"
           "  DIR/report.html   spectra, AM/AM, AM/PM, ACLR (both definitions), PAPR,\n"
           "                    EVM demodulated with the known symbols, gain-only and\n"
           "                    MP(7,4) fit NMSE\n"
           "  DIR/summary.json  the same numbers, machine-readable\n"
           "Takes a few seconds; progress lines go to stderr.\n"
           "\n"
           "options:\n"
           "  --out DIR           output directory (created if needed)\n"
           "  --pa NAME           PA model (default realistic)\n"
           "  --signal PRESET     OFDM preset (default 'default')\n"
           "  --samples N         samples (default one frame)\n"
           "  --seed S            seed (default 1)\n"
           "  -q, --quiet         no progress lines; -v, --verbose: more log output\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage\n");
}

static cJSON *aclr_obj(const dd_aclr_result *in, const dd_aclr_result *out) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const dd_aclr_result *r[2] = {in, out};
    const char *nm[2] = {"in", "out"};
    for (int k = 0; k < 2; k++) {
        cJSON *a = cJSON_AddObjectToObject(o, nm[k]);
        if (!a) continue;
        cJSON_AddNumberToObject(a, "left_db", r[k]->left_db);
        cJSON_AddNumberToObject(a, "right_db", r[k]->right_db);
        cJSON_AddNumberToObject(a, "avg_db", r[k]->avg_db);
    }
    return o;
}

static dd_status write_summary(const char *path, const dd_sim_cfg *cfg, const dd_rf_analysis *a,
                               const char *data_path, const char *report_path, double seconds) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return dd_error(DD_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(o, "generator", "distdpd demo " DD_VERSION_STRING);
    cJSON_AddStringToObject(o, "report", report_path);
    cJSON_AddStringToObject(o, "dataset", data_path);
    cJSON_AddStringToObject(o, "signal", cfg->signal);
    cJSON_AddStringToObject(o, "pa", cfg->pa);
    cJSON_AddNumberToObject(o, "samples", (double)a->n);
    cJSON_AddNumberToObject(o, "fs_hz", a->spec.fs);
    cJSON_AddNumberToObject(o, "bw_main_hz", a->spec.bw_main);
    cJSON_AddNumberToObject(o, "papr_in_db", a->papr_in_db);
    cJSON_AddNumberToObject(o, "papr_out_db", a->papr_out_db);
    cJSON_AddItemToObject(o, "aclr_opendpd", aclr_obj(&a->aclr_in[0], &a->aclr_out[0]));
    cJSON_AddItemToObject(o, "aclr_3gpp", aclr_obj(&a->aclr_in[1], &a->aclr_out[1]));
    if (a->evm_ok) {
        cJSON_AddNumberToObject(o, "evm_in_pct", a->evm_in_pct);
        cJSON_AddNumberToObject(o, "evm_in_db", a->evm_in_db);
        cJSON_AddNumberToObject(o, "evm_out_pct", a->evm_out_pct);
        cJSON_AddNumberToObject(o, "evm_out_db", a->evm_out_db);
    }
    cJSON_AddNumberToObject(o, "gain_nmse_db", a->gain_nmse_db);
    if (a->mp_ok) {
        cJSON *m = cJSON_AddObjectToObject(o, "mp_fit");
        if (m) {
            cJSON_AddNumberToObject(m, "K", a->mp_K);
            cJSON_AddNumberToObject(m, "M", a->mp_M);
            cJSON_AddNumberToObject(m, "ncoef", (double)a->mp_ncoef);
            cJSON_AddNumberToObject(m, "nmse_train_db", a->mp_nmse_train_db);
            cJSON_AddNumberToObject(m, "nmse_test_db", a->mp_nmse_test_db);
        }
    }
    cJSON_AddNumberToObject(o, "seconds", seconds);
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    if (!txt) return dd_error(DD_ERR_NOMEM, "out of memory writing %s", path);
    size_t l = strlen(txt);
    char *t2 = cJSON_malloc(l + 2);
    dd_status st;
    if (!t2) {
        st = dd_error(DD_ERR_NOMEM, "out of memory");
    } else {
        memcpy(t2, txt, l);
        t2[l] = '\n';
        t2[l + 1] = '\0';
        st = dd_cli_write_text(path, t2);
        cJSON_free(t2);
    }
    cJSON_free(txt);
    return st;
}

int dd_cmd_demo(int argc, char **argv) {
    enum { O_OUT = 256, O_PA, O_SIGNAL, O_SAMPLES, O_SEED };
    static const struct option longopts[] = {
        {"out", required_argument, NULL, O_OUT},       {"pa", required_argument, NULL, O_PA},
        {"signal", required_argument, NULL, O_SIGNAL}, {"samples", required_argument, NULL, O_SAMPLES},
        {"seed", required_argument, NULL, O_SEED},     {"verbose", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},             {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    dd_sim_cfg cfg;
    dd_sim_cfg_default(&cfg);
    const char *out = NULL;
    int verbosity = 0, c, rc;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_OUT: out = optarg; break;
        case O_PA: cfg.pa = optarg; break;
        case O_SIGNAL: cfg.signal = optarg; break;
        case O_SAMPLES:
            if ((rc = dd_cli_parse_size(NAME, "--samples", optarg, 1, (size_t)1 << 34, &cfg.samples))) return rc;
            break;
        case O_SEED:
            if ((rc = dd_cli_parse_u64(NAME, "--seed", optarg, &cfg.seed))) return rc;
            break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!out) return dd_cli_usage(NAME, "missing --out DIR");
    dd_cli_log_init(verbosity);
    dd_cli_progress_quiet(verbosity < 0);

    double t0 = dd_now();
    dd_sim sim;
    memset(&sim, 0, sizeof sim);
    dd_dataset *ds = NULL, *back = NULL;
    dd_rf_analysis an;
    memset(&an, 0, sizeof an);
    dd_status st;
    int ret = DD_EXIT_OK;
    char data_dir[4200], report_path[4200], summary_path[4200];
    const char *data_path = NULL;
    snprintf(data_dir, sizeof data_dir, "%s/data", out);
    snprintf(report_path, sizeof report_path, "%s/report.html", out);
    snprintf(summary_path, sizeof summary_path, "%s/summary.json", out);

    dd_cli_progress("simulating: OFDM preset '%s' through PA model '%s' (seed %llu)", cfg.signal, cfg.pa,
                    (unsigned long long)cfg.seed);
    if ((st = dd_sim_run(&cfg, &sim)) != DD_OK) goto fail;
    dd_cli_progress("simulated %zu samples at %g MHz", sim.n, sim.spec.fs / 1e6);
    if ((st = dd_sim_dataset(&sim, &ds)) != DD_OK) goto fail;
    if ((st = dd_cli_mkdirs(out)) != DD_OK) goto fail;
    if ((st = dd_sim_save(&cfg, &sim, ds, data_dir, 0, &data_path)) != DD_OK) goto fail;
    dd_cli_progress("wrote the data set to %s (OpenDPD layout + simulation.json)", data_path);
    if ((st = dd_dataset_load(data_path, &back)) != DD_OK) goto fail;
    dd_cli_progress("read it back: train %zu, val %zu, test %zu samples; measuring", back->n[0], back->n[1],
                    back->n[2]);
    dd_rf_opts ro;
    dd_rf_opts_default(&ro);
    if ((st = dd_rf_analyze(back, sim.frame, &ro, &an)) != DD_OK) goto fail;
    dd_cli_progress("measured: ACLR, PAPR, EVM, gain-only and MP(%d,%d) fits in %.2f s", ro.mp_K, ro.mp_M, an.seconds);

    char desc[512];
    dd_ofdm_info info;
    dd_ofdm_get_info(sim.frame, &info);
    snprintf(desc, sizeof desc, "OFDM preset %s (%d x %.0f MHz, %d-QAM, %d symbols, seed %llu) through PA model %s",
             cfg.signal, info.cfg.n_carriers, info.cfg.carrier_bw / 1e6, info.cfg.qam, info.n_symbols,
             (unsigned long long)cfg.seed, cfg.pa);
    const char *details[] = {"Simulation", desc, NULL, NULL};
    if ((st = dd_rf_write_report(&an, "distdpd demo: simulated PA campaign", data_path, back->format, details,
                                 report_path)) != DD_OK)
        goto fail;
    dd_cli_progress("wrote %s", report_path);
    if ((st = write_summary(summary_path, &cfg, &an, data_path, report_path, dd_now() - t0)) != DD_OK) goto fail;
    dd_cli_progress("wrote %s", summary_path);

    if (verbosity >= 0) {
        printf("distdpd demo: %s, %zu samples at %g MHz\n", desc, an.n, an.spec.fs / 1e6);
        printf("  ACLR (OpenDPD) input %.2f dBc, output %.2f dBc (left %.2f, right %.2f)\n", an.aclr_in[0].avg_db,
               an.aclr_out[0].avg_db, an.aclr_out[0].left_db, an.aclr_out[0].right_db);
        printf("  ACLR (3GPP)    input %.2f dBc, output %.2f dBc\n", an.aclr_in[1].avg_db, an.aclr_out[1].avg_db);
        printf("  PAPR           input %.2f dB, output %.2f dB\n", an.papr_in_db, an.papr_out_db);
        if (an.evm_ok)
            printf("  EVM            input %.2f %%, output %.2f %% (%.2f dB)\n", an.evm_in_pct, an.evm_out_pct,
                   an.evm_out_db);
        printf("  NMSE           gain-only fit %.2f dB", an.gain_nmse_db);
        if (an.mp_ok) printf(", MP(%d,%d) fit %.2f dB (test split)", an.mp_K, an.mp_M, an.mp_nmse_test_db);
        printf("\nreport:  %s\nsummary: %s\ndata:    %s\n", report_path, summary_path, data_path);
    }
    goto cleanup;
fail:
    ret = dd_cli_fail(NAME, st);
cleanup:
    dd_rf_free(&an);
    dd_dataset_free(&back);
    dd_dataset_free(&ds);
    dd_sim_free(&sim);
    return ret;
}
