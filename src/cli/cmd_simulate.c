/* `distdpd simulate`: generates the OFDM test signal (ofdm.h), passes it through a
 * simulated PA (pa.h) and writes the pair as a data set (OpenDPD layout, binary or
 * SigMF) plus simulation.json and pa.json, then prints a short measurement summary. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benches.h"
#include "cli.h"
#include "rf.h"

static const char *const NAME = "simulate";
static const char *const presets[] = {"default", "1x20", "1x100", "2x100", "5x40", "10x20", NULL};
static const char *const formats[] = {"opendpd", "bin", "sigmf", NULL};
static const char *const hets[] = {"low", "high", NULL};

/* The files of a data set that simulate writes (in any format), and its sidecars. */
static const char *const dataset_files[] = {
    "spec.json",        "train_input.csv",   "train_output.csv",  "val_input.csv",    "val_output.csv",
    "test_input.csv",   "test_output.csv",   "data.ddb",          "signal_input.sigmf-meta",
    "signal_input.sigmf-data", "signal_output.sigmf-meta", "signal_output.sigmf-data", "simulation.json",
    "pa.json",          NULL};

/* Lists (up to 3) files of dataset_files present in dir into buf; returns how many exist. */
int dd_sim_existing_dataset(const char *dir, char *buf, size_t cap) {
    int n = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; dataset_files[k]; k++) {
        char p[4200];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, dataset_files[k]);
        if (stat(p, &sb) != 0) continue;
        if (n < 3 && used < cap)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", n ? ", " : "", dataset_files[k]);
        else if (n == 3 && used < cap)
            used += (size_t)snprintf(buf + used, cap - used, ", ...");
        n++;
    }
    return n;
}

/* --force: removes the data set files of every format, so that DIR then holds exactly the
 * new data set (a bin data set next to old CSVs would be ambiguous). */
dd_status dd_sim_remove_dataset(const char *dir) {
    for (int k = 0; dataset_files[k]; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, dataset_files[k]);
        if (unlink(p) != 0 && errno != ENOENT)
            return dd_error(DD_ERR_IO, "%s: cannot remove the data set file being replaced: %s", p, strerror(errno));
    }
    return DD_OK;
}

static void help(void) {
    printf("usage: distdpd simulate --out DIR [options]\n"
           "       distdpd simulate --benches N [--heterogeneity low|high] --out DIR [options]\n"
           "\n"
           "Generates a 5G NR-like OFDM frame, passes it through a simulated power amplifier\n"
           "and writes PA input and output as a data set in DIR, split in time order\n"
           "0.6/0.2/0.2 into train/val/test, with DIR/simulation.json describing the run\n"
           "(the transmitted symbols can be regenerated from it, so `distdpd report` can\n"
           "demodulate the EVM) and DIR/pa.json holding the PA's parameters and calibration\n"
           "(train-dpd rebuilds the noiseless PA from it to measure a DPD on the true PA).\n"
           "The PA is calibrated on the frame and run over one frame first, so the data\n"
           "start in the steady state.\n"
           "\n"
           "options:\n"
           "  --out DIR           output directory (created if needed; must not hold a data set)\n"
           "  --force             replace the data set DIR already holds\n"
           "  --pa NAME           PA model (default realistic); --pa list shows the models\n"
           "  --signal PRESET     OFDM preset: default (= 1x20), 1x20, 1x100, 2x100, 5x40,\n"
           "                      10x20 (carriers x MHz, 30 kHz SCS); --signal list\n"
           "  --samples N         data set length (default: one frame; longer repeats it)\n"
           "  --seed S            seed of the QAM symbols (default 1); PA noise uses S + 1\n"
           "  --drive DB          drive offset added to the model's default, dB (default 0)\n"
           "  --snr DB            measurement SNR, dB, in (0, 200]; 0 = no noise\n"
           "                      (default: the model's, 45 dB for realistic)\n"
           "  --qam Q             constellation: 4, 16, 64, 256, 1024 (default: preset, 256)\n"
           "  --papr DB           crest-factor reduction target PAPR, 3..20 dB; 0 = off\n"
           "                      (default off)\n"
           "  --symbols N         OFDM symbols per frame (default: preset, 1 ms)\n"
           "  --format F          opendpd (default: spec.json + {train,val,test}_{input,output}.csv),\n"
           "                      bin (DIR/data.ddb) or sigmf (DIR/signal_{input,output}.sigmf-*)\n"
           "  --benches N         non-IID test benches for federated learning: DIR/bench-00 ..\n"
           "                      DIR/bench-(N-1) (N in 1..64), one data set each, from campaign\n"
           "                      presets that differ per bench (PA family and parameters,\n"
           "                      drive, temperature, carrier layout and bandwidth, CFR, SNR,\n"
           "                      size), drawn from --seed; each bench's spec.json and\n"
           "                      simulation.json record its preset under \"bench\", and\n"
           "                      DIR/benches.json lists them with measured properties.\n"
           "                      --samples is the base size (default 20000); --pa, --signal,\n"
           "                      --drive, --snr, --qam, --papr, --symbols are the presets' own\n"
           "  --heterogeneity H   low: the same PA family with a few %% parameter spread, drive\n"
           "                      +-1 dB, 20..30 C, SNR 42..48 dB, one layout, sizes within 1.4x;\n"
           "                      high (default): 8 PA families, drive -4..+3 dB, -20..85 C,\n"
           "                      SNR 35..55 dB, 8 layouts, CFR targets, sizes up to 4x apart\n"
           "  -v, --verbose       more output (PA description);  -q, --quiet: no summary\n"
           "  -h, --help          this help\n"
           "\n"
           "output: a summary (signal, PA, files, ACLR of input and output, gain-only NMSE,\n"
           "EVM of the output); with --benches one line per bench. exit status: 0 ok,\n"
           "1 runtime error, 2 usage\n");
}

static void list_models(void) {
    size_t n = 0;
    const dd_pa_model_info *m = dd_pa_list(&n);
    printf("PA models (distdpd simulate --pa NAME):\n");
    for (size_t i = 0; i < n; i++) printf("  %-20s %s\n", m[i].name, m[i].summary);
}

static void list_presets(void) {
    printf("OFDM presets (distdpd simulate --signal NAME):\n");
    for (int i = 0; presets[i]; i++) {
        dd_ofdm_cfg c;
        if (dd_ofdm_cfg_default(&c, presets[i]) != DD_OK) continue;
        printf("  %-8s %d x %g MHz carriers, %g kHz SCS, %d-QAM, %d symbols, fs %g MHz\n", presets[i],
               c.n_carriers, c.carrier_bw / 1e6, c.scs / 1e3, c.qam, c.n_symbols, c.fs / 1e6);
    }
}

int dd_cmd_simulate(int argc, char **argv) {
    enum { O_OUT = 256, O_PA, O_SIGNAL, O_SAMPLES, O_SEED, O_DRIVE, O_SNR, O_QAM, O_PAPR, O_SYMBOLS, O_FORMAT, O_FORCE, O_BENCHES, O_HET };
    static const struct option longopts[] = {
        {"out", required_argument, NULL, O_OUT},         {"pa", required_argument, NULL, O_PA},
        {"signal", required_argument, NULL, O_SIGNAL},   {"samples", required_argument, NULL, O_SAMPLES},
        {"seed", required_argument, NULL, O_SEED},       {"drive", required_argument, NULL, O_DRIVE},
        {"snr", required_argument, NULL, O_SNR},         {"qam", required_argument, NULL, O_QAM},
        {"papr", required_argument, NULL, O_PAPR},       {"symbols", required_argument, NULL, O_SYMBOLS},
        {"format", required_argument, NULL, O_FORMAT},   {"force", no_argument, NULL, O_FORCE},
        {"benches", required_argument, NULL, O_BENCHES}, {"heterogeneity", required_argument, NULL, O_HET},
        {"verbose", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},               {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    dd_sim_cfg cfg;
    dd_sim_cfg_default(&cfg);
    const char *out = NULL;
    int format = 0, verbosity = 0, c, rc, want_pa_list = 0, want_sig_list = 0, force = 0, het = 1;
    size_t v, benches = 0;
    const char *own = NULL; /* an option the bench presets choose */
    int het_given = 0;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_OUT: out = optarg; break;
        case O_PA:
            own = "--pa";
            if (strcmp(optarg, "list") == 0) want_pa_list = 1;
            cfg.pa = optarg;
            break;
        case O_SIGNAL:
            own = "--signal";
            if (strcmp(optarg, "list") == 0) want_sig_list = 1;
            cfg.signal = optarg;
            break;
        case O_SAMPLES:
            if ((rc = dd_cli_parse_size(NAME, "--samples", optarg, 1, (size_t)1 << 34, &cfg.samples))) return rc;
            break;
        case O_SEED:
            if ((rc = dd_cli_parse_u64(NAME, "--seed", optarg, &cfg.seed))) return rc;
            break;
        case O_DRIVE:
            own = "--drive";
            if ((rc = dd_cli_parse_double(NAME, "--drive", optarg, -60.0, 40.0, &cfg.drive_db))) return rc;
            break;
        case O_SNR:
            own = "--snr";
            if ((rc = dd_cli_parse_double(NAME, "--snr", optarg, 0.0, 200.0, &cfg.snr_db))) return rc;
            break;
        case O_QAM:
            own = "--qam";
            if ((rc = dd_cli_parse_size(NAME, "--qam", optarg, 4, 1024, &v))) return rc;
            if (v != 4 && v != 16 && v != 64 && v != 256 && v != 1024) {
                fprintf(stderr, "distdpd %s: --qam: expected one of 4, 16, 64, 256, 1024; got '%s'\n", NAME, optarg);
                return DD_EXIT_USAGE;
            }
            cfg.qam = (int)v;
            break;
        case O_PAPR:
            own = "--papr";
            if ((rc = dd_cli_parse_double(NAME, "--papr", optarg, 0.0, 20.0, &cfg.papr_db))) return rc;
            if (cfg.papr_db > 0 && cfg.papr_db < 3.0) {
                fprintf(stderr, "distdpd %s: --papr: must be 0 (off) or in [3, 20], got '%s'\n", NAME, optarg);
                return DD_EXIT_USAGE;
            }
            break;
        case O_SYMBOLS:
            own = "--symbols";
            if ((rc = dd_cli_parse_size(NAME, "--symbols", optarg, 1, 100000, &v))) return rc;
            cfg.symbols = (int)v;
            break;
        case O_FORMAT:
            if ((rc = dd_cli_parse_choice(NAME, "--format", optarg, formats, &format))) return rc;
            break;
        case O_FORCE: force = 1; break;
        case O_BENCHES:
            if ((rc = dd_cli_parse_size(NAME, "--benches", optarg, 1, DD_BENCHES_MAX, &benches))) return rc;
            break;
        case O_HET:
            if ((rc = dd_cli_parse_choice(NAME, "--heterogeneity", optarg, hets, &het))) return rc;
            het_given = 1;
            break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (want_pa_list || want_sig_list) {
        if (want_pa_list) list_models();
        if (want_sig_list) list_presets();
        return DD_EXIT_OK;
    }
    if (!out) return dd_cli_usage(NAME, "missing --out DIR");
    dd_cli_log_init(verbosity);
    if (het_given && !benches) return dd_cli_usage(NAME, "--heterogeneity needs --benches N");
    if (benches) {
        if (own) return dd_cli_usage(NAME, "%s: the bench presets choose it; not with --benches", own);
        dd_status bs = dd_benches_simulate(out, (int)benches, (dd_het)het, cfg.seed, cfg.samples ? cfg.samples : 20000,
                                           format, force, verbosity);
        return bs == DD_OK ? DD_EXIT_OK : dd_cli_fail(NAME, bs);
    }
    {
        char found[256];
        if (dd_sim_existing_dataset(out, found, sizeof found) > 0 && !force)
            return dd_cli_fail(NAME, dd_error(DD_ERR_ARG, "%s already holds a data set (%s): choose another --out, or "
                                                          "give --force to replace it",
                                              out, found));
    }

    dd_sim sim;
    dd_dataset *ds = NULL;
    dd_rf_analysis an;
    memset(&an, 0, sizeof an);
    const char *data_path = NULL;
    dd_status st;
    int ret = DD_EXIT_OK;
    double t0 = dd_now();
    if ((st = dd_sim_run(&cfg, &sim)) != DD_OK) return dd_cli_fail(NAME, st);
    if ((st = dd_sim_dataset(&sim, &ds)) != DD_OK) goto fail;
    if (force && (st = dd_sim_remove_dataset(out)) != DD_OK) goto fail;
    if ((st = dd_sim_save(&cfg, &sim, ds, out, format, &data_path)) != DD_OK) goto fail;
    if (verbosity >= 0) {
        dd_rf_opts ro;
        dd_rf_opts_default(&ro);
        ro.mp_K = 0;
        ro.plots = 0;
        if ((st = dd_rf_analyze(ds, sim.frame, &ro, &an)) != DD_OK) goto fail;
        dd_ofdm_info info;
        dd_ofdm_get_info(sim.frame, &info);
        printf("signal:   OFDM %s: %d x %g MHz, %d-QAM, %d symbols, %zu-sample frame at %g MHz, PAPR %.2f dB\n",
               cfg.signal, info.cfg.n_carriers, info.cfg.carrier_bw / 1e6, info.cfg.qam, info.n_symbols,
               sim.frame_len, sim.spec.fs / 1e6, info.papr_db);
        printf("PA:       %s, drive offset %+g dB, ", cfg.pa, cfg.drive_db);
        if (sim.params.snr_db > 0 && isfinite(sim.params.snr_db))
            printf("SNR %g dB (noise seed %llu)\n", sim.params.snr_db, (unsigned long long)sim.params.seed);
        else
            printf("no noise\n");
        printf("data set: %s (%s): train %zu, val %zu, test %zu samples\n", data_path, formats[format], ds->n[0],
               ds->n[1], ds->n[2]);
        printf("ACLR (OpenDPD) input:  left %7.2f, right %7.2f, average %7.2f dBc\n", an.aclr_in[0].left_db,
               an.aclr_in[0].right_db, an.aclr_in[0].avg_db);
        printf("ACLR (OpenDPD) output: left %7.2f, right %7.2f, average %7.2f dBc\n", an.aclr_out[0].left_db,
               an.aclr_out[0].right_db, an.aclr_out[0].avg_db);
        printf("gain-only fit NMSE:    %7.2f dB\n", an.gain_nmse_db);
        if (an.evm_ok)
            printf("EVM (demodulated):     input %.2f %% (%.2f dB), output %.2f %% (%.2f dB)\n", an.evm_in_pct,
                   an.evm_in_db, an.evm_out_pct, an.evm_out_db);
        else
            printf("EVM (demodulated):     n/a (%s)\n", an.evm_note);
        if (verbosity > 0) {
            char desc[4096];
            dd_pa_describe(sim.pa, desc, sizeof desc);
            printf("\n%s", desc);
        }
        printf("done in %.2f s\n", dd_now() - t0);
    }
    goto cleanup;
fail:
    ret = dd_cli_fail(NAME, st);
cleanup:
    dd_rf_free(&an);
    dd_dataset_free(&ds);
    dd_sim_free(&sim);
    return ret;
}
