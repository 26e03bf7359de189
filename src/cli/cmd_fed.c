/* distdpd fed-server, fed-client, fed-sim: federated averaging across test benches
 * (docs/federated.md). The protocol, algorithms and loops are in src/fed (fednet.h);
 * this file parses options and, for fed-sim, starts the processes. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "distdpd/fednet.h"
#include "distdpd/model.h"

static volatile int stop_flag;
static void on_signal(int s) {
    (void)s;
    stop_flag = 1;
}

static void join_argv(char *buf, size_t cap, int argc, char **argv) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < argc && n + 1 < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? " " : "", argv[i]);
}

/* ------------------------------------------------------------------ fed-server */
static void help_server(void) {
    printf("usage: distdpd fed-server --bind tcp://HOST:PORT --key KEY --allow FILE --out RUN [options]\n"
           "\n"
           "Coordinates federated averaging of a PA model across test benches (docs/federated.md).\n"
           "Benches (distdpd fed-client) connect out to --bind with CURVE; only the keys of\n"
           "--allow are admitted. Each round samples a fraction of the connected benches, sends\n"
           "them the global weights, aggregates their updates and has every bench evaluate the\n"
           "new model on its own test split (only error sums come back: raw I/Q never leaves a\n"
           "bench). RUN gets config.json, metrics.jsonl (one line per round), last.ckpt and\n"
           "best.ckpt (readable by distdpd eval --run RUN --data D).\n"
           "\n"
           "federation:\n"
           "  --rounds R            rounds (default 10)\n"
           "  --fraction C          fraction of the connected benches sampled per round, (0, 1]\n"
           "                        (default 1)\n"
           "  --min-clients M       benches sampled at least, and waited for (default 1)\n"
           "  --start-clients N     benches waited for before round 1 (default: --min-clients)\n"
           "  --min-completion F    fraction of the sampled that must answer for the round to be\n"
           "                        aggregated, (0, 1] (default 1); below it the round is skipped\n"
           "  --local-epochs E      local epochs per round (default 1)\n"
           "  --local-steps K       or K local optimiser steps per round\n"
           "  --algo A              fedavg (default), fedprox, scaffold\n"
           "  --mu MU               fedprox: proximal weight (default 0.01)\n"
           "  --server-opt S        none (default), momentum (FedAvgM), adam (FedAdam)\n"
           "  --server-lr LR        server learning rate (default 1)\n"
           "  --server-momentum B   momentum / Adam beta1 (default 0.9)\n"
           "  --server-beta2 B2     Adam beta2 (default 0.99)\n"
           "  --server-eps TAU      Adam adaptivity tau (default 1e-3)\n"
           "  --agg A               mean (default, weighted by training frames), median, trimmed,\n"
           "                        krum, multikrum\n"
           "  --trim B              trimmed: values cut at each end per coordinate (default 1)\n"
           "  --byzantine F         krum/multikrum: Byzantine benches tolerated (default 1)\n"
           "  --dp-clip C           differential privacy: clip each update to L2 norm C (the bench\n"
           "                        clips, the coordinator enforces it again)\n"
           "  --dp-noise SIGMA      Gaussian noise SIGMA*C on the sum of the updates\n"
           "  --dp-delta D          delta of the reported (epsilon, delta) (default 1e-5)\n"
           "  --secure              secure aggregation (Bonawitz et al.): the coordinator learns only\n"
           "                        the sum of the updates (unweighted mean; --agg mean, not\n"
           "                        scaffold, --min-clients >= 2)\n"
           "  --secure-range R      benches clip their update to L2 norm R for the fixed-point ring\n"
           "                        (default: --dp-clip, else 10)\n"
           "  --secure-ring BITS    32 (default) or 64\n"
           "  --sample-seed S       seed of the bench sampling (default 0)\n"
           "  --eval-every N        evaluate every N rounds and the last (default 1)\n"
           "timeouts:\n"
           "  --wait-s S            wait for --min-clients benches (default 60)\n"
           "  --round-timeout S     wait for the sampled benches' updates (default 300)\n"
           "  --eval-timeout S      wait for the evaluations (default 60)\n"
           "  --dead-ms MS          a bench silent this long is gone (default 10000; benches ping\n"
           "                        every second)\n"
           "model and local training (sent to the benches):\n"
           "  --model NAME          model (default gru); its options:\n");
    dd_cli_help_model_opts("  ", "--");
    printf("  --frame F, --stride S, --batch B   framing and local batch (defaults 200, 1, 64)\n"
           "  --lr LR               local learning rate (default 5e-3)\n"
           "  --opt sgd|adam|adamw  the benches' optimiser (default adamw)\n"
           "  --weight-decay WD, --momentum M (sgd), --clip NORM (gradient clipping, default 200)\n"
           "  --seed S              initialisation and frame shuffling (default 0)\n"
           "  --no-shuffle          frames in order\n"
           "  --eval-batch N        evaluation segments per forward call (default 16)\n"
           "  -v, --verbose         info messages (benches joining, ...)\n"
           "  -q, --quiet           errors only\n"
           "  -h, --help            this help\n"
           "\n"
           "exit status: 0 done (or stopped by SIGTERM/SIGINT after a round), 1 runtime error\n"
           "(no benches in time, divergence: the message says), 2 usage error\n");
}

int dd_cmd_fed_server(int argc, char **argv) {
    const char *NAME = "fed-server";
    enum {
        O_BIND = 256, O_KEY, O_ALLOW, O_OUT, O_ROUNDS, O_FRACTION, O_MINC, O_MINCOMP, O_LEP, O_LST, O_ALGO, O_MU,
        O_SOPT, O_SLR, O_SMOM, O_SB2, O_SEPS, O_AGG, O_TRIM, O_BYZ, O_DPCLIP, O_DPNOISE, O_DPDELTA, O_SECURE,
        O_SSEED, O_EVERY, O_STARTC, O_SRANGE, O_SRING, O_WAIT, O_RTO, O_ETO, O_DEAD, O_MODEL, O_FRAME, O_STRIDE, O_BATCH, O_LR, O_OPT, O_WD,
        O_MOM, O_CLIP, O_SEED, O_NOSHUF, O_EVB,
        O_MOPT = 1024
    };
    static const struct option base[] = {
        {"bind", required_argument, NULL, O_BIND}, {"key", required_argument, NULL, O_KEY},
        {"allow", required_argument, NULL, O_ALLOW}, {"out", required_argument, NULL, O_OUT},
        {"rounds", required_argument, NULL, O_ROUNDS}, {"fraction", required_argument, NULL, O_FRACTION},
        {"min-clients", required_argument, NULL, O_MINC}, {"start-clients", required_argument, NULL, O_STARTC}, {"min-completion", required_argument, NULL, O_MINCOMP},
        {"local-epochs", required_argument, NULL, O_LEP}, {"local-steps", required_argument, NULL, O_LST},
        {"algo", required_argument, NULL, O_ALGO}, {"mu", required_argument, NULL, O_MU},
        {"server-opt", required_argument, NULL, O_SOPT}, {"server-lr", required_argument, NULL, O_SLR},
        {"server-momentum", required_argument, NULL, O_SMOM}, {"server-beta2", required_argument, NULL, O_SB2},
        {"server-eps", required_argument, NULL, O_SEPS}, {"agg", required_argument, NULL, O_AGG},
        {"trim", required_argument, NULL, O_TRIM}, {"byzantine", required_argument, NULL, O_BYZ},
        {"dp-clip", required_argument, NULL, O_DPCLIP}, {"dp-noise", required_argument, NULL, O_DPNOISE},
        {"dp-delta", required_argument, NULL, O_DPDELTA}, {"secure", no_argument, NULL, O_SECURE},
        {"secure-range", required_argument, NULL, O_SRANGE}, {"secure-ring", required_argument, NULL, O_SRING},
        {"sample-seed", required_argument, NULL, O_SSEED}, {"eval-every", required_argument, NULL, O_EVERY},
        {"wait-s", required_argument, NULL, O_WAIT}, {"round-timeout", required_argument, NULL, O_RTO},
        {"eval-timeout", required_argument, NULL, O_ETO}, {"dead-ms", required_argument, NULL, O_DEAD},
        {"model", required_argument, NULL, O_MODEL}, {"frame", required_argument, NULL, O_FRAME},
        {"stride", required_argument, NULL, O_STRIDE}, {"batch", required_argument, NULL, O_BATCH},
        {"lr", required_argument, NULL, O_LR}, {"opt", required_argument, NULL, O_OPT},
        {"weight-decay", required_argument, NULL, O_WD}, {"momentum", required_argument, NULL, O_MOM},
        {"clip", required_argument, NULL, O_CLIP}, {"seed", required_argument, NULL, O_SEED},
        {"no-shuffle", no_argument, NULL, O_NOSHUF}, {"eval-batch", required_argument, NULL, O_EVB},
        {"verbose", no_argument, NULL, 'v'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    enum { NBASE = sizeof base / sizeof base[0] - 1 };
    const char *mnames[DD_CLI_MAX_MODEL_OPTS];
    char mflags[DD_CLI_MAX_MODEL_OPTS][DD_MODEL_OPT_NAME_MAX + 2];
    size_t nm = dd_cli_model_opt_names(mnames, DD_CLI_MAX_MODEL_OPTS);
    struct option longopts[NBASE + DD_CLI_MAX_MODEL_OPTS + 1];
    memcpy(longopts, base, NBASE * sizeof base[0]);
    size_t nlo = NBASE;
    for (size_t k = 0; k < nm; k++) {
        int clash = 0;
        for (size_t j = 0; j < NBASE; j++) clash |= strcmp(base[j].name, mnames[k]) == 0;
        if (clash) continue;
        snprintf(mflags[k], sizeof mflags[k], "--%s", mnames[k]);
        longopts[nlo++] = (struct option){mnames[k], required_argument, NULL, O_MOPT + (int)k};
    }
    longopts[nlo] = (struct option){NULL, 0, NULL, 0};
    static const char *const opts_opt[] = {"sgd", "adam", "adamw", NULL};
    dd_fed_server_opts o;
    dd_fed_server_defaults(&o);
    int verbosity = 0, c, rc, opt_kind = DD_OPTIM_ADAMW, secure = 0, trim_given = 0, byz_given = 0, local_given = 0;
    double wd = NAN, mom = NAN, d;
    size_t v;
    char model_buf[DD_TRAIN_NAME_MAX] = "gru";
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_BIND: o.bind = optarg; break;
        case O_KEY: o.key_path = optarg; break;
        case O_ALLOW: o.allow_path = optarg; break;
        case O_OUT: o.out = optarg; break;
#define SZ(CASE, NM, LO, HI, DST)                                                  \
    case CASE:                                                                    \
        if ((rc = dd_cli_parse_size(NAME, NM, optarg, LO, HI, &v))) return rc;    \
        DST;                                                                      \
        break;
#define DBL(CASE, NM, LO, HI, DST)                                                 \
    case CASE:                                                                    \
        if ((rc = dd_cli_parse_double(NAME, NM, optarg, LO, HI, &d))) return rc;  \
        DST;                                                                      \
        break;
            SZ(O_ROUNDS, "--rounds", 1, 1000000, o.rounds = (int)v)
            SZ(O_MINC, "--min-clients", 1, DD_FED_MAX_CLIENTS, o.min_clients = (int)v)
            SZ(O_STARTC, "--start-clients", 1, DD_FED_MAX_CLIENTS, o.start_clients = (int)v)
            SZ(O_LEP, "--local-epochs", 1, 1000000, (o.local_kind = DD_FED_LOCAL_EPOCHS, o.local_n = (int)v, local_given++))
            SZ(O_LST, "--local-steps", 1, 1000000, (o.local_kind = DD_FED_LOCAL_STEPS, o.local_n = (int)v, local_given++))
            SZ(O_TRIM, "--trim", 0, 1000, (o.agg.trim = (int)v, trim_given = 1))
            SZ(O_BYZ, "--byzantine", 0, 1000, (o.agg.byzantine = (int)v, byz_given = 1))
            SZ(O_EVERY, "--eval-every", 1, 1000000, o.eval_every = (int)v)
            SZ(O_DEAD, "--dead-ms", 100, 3600000, o.dead_ms = (int)v)
            SZ(O_FRAME, "--frame", 1, (size_t)1 << 20, o.cfg.frame = v)
            SZ(O_STRIDE, "--stride", 1, (size_t)1 << 20, o.cfg.stride = v)
            SZ(O_BATCH, "--batch", 1, (size_t)1 << 20, o.cfg.batch = v)
            SZ(O_EVB, "--eval-batch", 1, 4096, o.cfg.eval_batch = v)
            DBL(O_FRACTION, "--fraction", 1e-9, 1.0, o.fraction = d)
            DBL(O_MINCOMP, "--min-completion", 1e-9, 1.0, o.min_completion = d)
            DBL(O_MU, "--mu", 0.0, 1e6, o.mu = d)
            DBL(O_SLR, "--server-lr", 1e-12, 1e6, o.sopt.lr = d)
            DBL(O_SMOM, "--server-momentum", 0.0, 0.999999, o.sopt.momentum = d)
            DBL(O_SB2, "--server-beta2", 0.0, 0.999999, o.sopt.beta2 = d)
            DBL(O_SEPS, "--server-eps", 1e-12, 10.0, o.sopt.eps = d)
            DBL(O_SRANGE, "--secure-range", 1e-9, 1e9, o.secure_range = d)
            SZ(O_SRING, "--secure-ring", 32, 64, o.secure_ring = (int)v)
            DBL(O_DPCLIP, "--dp-clip", 1e-12, 1e12, o.dp_clip = d)
            DBL(O_DPNOISE, "--dp-noise", 1e-6, 1e6, o.dp_noise = d)
            DBL(O_DPDELTA, "--dp-delta", 1e-300, 0.5, o.dp_delta = d)
            DBL(O_WAIT, "--wait-s", 0.1, 1e7, o.wait_s = d)
            DBL(O_RTO, "--round-timeout", 0.1, 1e7, o.round_timeout_s = d)
            DBL(O_ETO, "--eval-timeout", 0.1, 1e7, o.eval_timeout_s = d)
            DBL(O_LR, "--lr", 1e-12, 10.0, o.cfg.lr = d)
            DBL(O_WD, "--weight-decay", 0.0, 10.0, wd = d)
            DBL(O_MOM, "--momentum", 0.0, 0.999999, mom = d)
            DBL(O_CLIP, "--clip", 0.0, 1e12, o.cfg.clip = d)
#undef SZ
#undef DBL
        case O_ALGO:
            if ((o.algo = dd_fed_algo_find(optarg)) < 0) return dd_cli_usage(NAME, "--algo: %s", dd_last_error());
            break;
        case O_SOPT:
            if ((rc = dd_cli_parse_choice(NAME, "--server-opt", optarg, dd_fed_sopt_names, &o.sopt.kind))) return rc;
            break;
        case O_AGG: {
            dd_agg_cfg a;
            if (dd_agg_parse(optarg, &a) != DD_OK) return dd_cli_usage(NAME, "--agg: %s", dd_last_error());
            o.agg.kind = a.kind;
            break;
        }
        case O_SECURE: secure = 1; break;
        case O_SSEED:
            if ((rc = dd_cli_parse_u64(NAME, "--sample-seed", optarg, &o.sample_seed))) return rc;
            break;
        case O_SEED:
            if ((rc = dd_cli_parse_u64(NAME, "--seed", optarg, &o.cfg.seed))) return rc;
            break;
        case O_NOSHUF: o.cfg.shuffle = 0; break;
        case O_MODEL:
            if (strlen(optarg) >= sizeof model_buf) return dd_cli_usage(NAME, "--model: name too long: '%s'", optarg);
            snprintf(model_buf, sizeof model_buf, "%s", optarg);
            break;
        case O_OPT:
            if ((rc = dd_cli_parse_choice(NAME, "--opt", optarg, opts_opt, &opt_kind))) return rc;
            break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help_server(); return DD_EXIT_OK;
        default:
            if (c >= O_MOPT && c < O_MOPT + (int)nm) {
                const size_t k = (size_t)(c - O_MOPT);
                if ((rc = dd_cli_parse_size(NAME, mflags[k], optarg, 1, 1000000000, &v))) return rc;
                if (dd_model_cfg_set(&o.cfg.model_cfg, mnames[k], (int)v) != DD_OK)
                    return dd_cli_usage(NAME, "%s: %s", mflags[k], dd_last_error());
                break;
            }
            return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!o.bind) return dd_cli_usage(NAME, "missing --bind tcp://HOST:PORT");
    if (!o.key_path) return dd_cli_usage(NAME, "missing --key KEY (the coordinator's secret CURVE key: distdpd keygen)");
    if (!o.allow_path) return dd_cli_usage(NAME, "missing --allow FILE (the enrolled benches' public keys)");
    if (!o.out) return dd_cli_usage(NAME, "missing --out RUN");
    if (local_given > 1) return dd_cli_usage(NAME, "give --local-epochs or --local-steps, not both");
    if (o.secure_ring != 32 && o.secure_ring != 64) return dd_cli_usage(NAME, "--secure-ring: 32 or 64, got %d", o.secure_ring);
    if ((o.secure_range > 0 || o.secure_ring != 32) && !secure) return dd_cli_usage(NAME, "--secure-range/--secure-ring belong to --secure");
    o.secure = secure;
    if (secure && !(o.secure_range > 0)) o.secure_range = o.dp_clip > 0 ? o.dp_clip : 10.0;
    if (trim_given && o.agg.kind != DD_AGG_TRIMMED) return dd_cli_usage(NAME, "--trim belongs to --agg trimmed");
    if (byz_given && o.agg.kind != DD_AGG_KRUM && o.agg.kind != DD_AGG_MULTIKRUM)
        return dd_cli_usage(NAME, "--byzantine belongs to --agg krum|multikrum");
    if (o.agg.kind == DD_AGG_TRIMMED && !trim_given) o.agg.trim = 1;
    if ((o.agg.kind == DD_AGG_KRUM || o.agg.kind == DD_AGG_MULTIKRUM) && !byz_given) o.agg.byzantine = 1;
    if ((o.dp_clip > 0) != (o.dp_noise > 0)) return dd_cli_usage(NAME, "--dp-clip and --dp-noise go together");
    snprintf(o.cfg.model, sizeof o.cfg.model, "%s", model_buf);
    snprintf(o.cfg.opt, sizeof o.cfg.opt, "%s", opts_opt[opt_kind]);
    o.cfg.optim = dd_optim_cfg_default((dd_optim_kind)opt_kind);
    if (!isnan(wd)) o.cfg.optim.weight_decay = wd;
    if (!isnan(mom)) {
        if (opt_kind != DD_OPTIM_SGD) return dd_cli_usage(NAME, "--momentum applies to --opt sgd only");
        o.cfg.optim.momentum = mom;
    }
    o.cfg.sched.base_lr = o.cfg.lr;
    char cmdline[4096];
    join_argv(cmdline, sizeof cmdline, argc, argv);
    o.command = cmdline;
    dd_cli_log_init(verbosity);
    dd_cli_catch_stop(on_signal);
    o.stop = &stop_flag;
    dd_status st = dd_fed_server_run(&o);
    if (st) return dd_cli_fail(NAME, st);
    fprintf(stderr, "distdpd fed-server: done: %s\n", o.out);
    return DD_EXIT_OK;
}

/* ------------------------------------------------------------------ fed-client */
static void help_client(void) {
    printf("usage: distdpd fed-client --server tcp://HOST:PORT --server-key PUB --key KEY --data DIR [options]\n"
           "\n"
           "One test bench of a federation (docs/federated.md): connects out to the coordinator\n"
           "(CURVE; KEY's public key must be in the coordinator's allow file), takes the run's\n"
           "model and training configuration from it, and for each round it is sampled in trains\n"
           "locally on DIR's training split with its own optimiser and sends back the update of the\n"
           "weights; evaluations on DIR's test split send back error sums. Raw I/Q never leaves.\n"
           "\n"
           "  --server ADDR         the coordinator (tcp://HOST:PORT)\n"
           "  --server-key PUB      the coordinator's public key file\n"
           "  --key KEY             this bench's secret key (distdpd keygen)\n"
           "  --data DIR            this bench's data set (train and test splits)\n"
           "  --connect-timeout S   no welcome within S seconds: error (default 60)\n"
           "  --timeout S           nothing from the coordinator for S seconds: error (default 600)\n"
           "experiments and tests:\n"
           "  --attack KIND         send Byzantine updates: nan, huge (+-1e6), signflip (-10 x the\n"
           "                        update), malformed (five malformed messages before each update)\n"
           "  --fail-at-round R     leave without answering when round R arrives (a dropout)\n"
           "  --straggle-ms MS      wait MS before sending each update (a straggler)\n"
           "  --record FILE         append \"TYPE BYTES\" for every message sent (audit)\n"
           "  -v, --verbose / -q, --quiet / -h, --help\n"
           "\n"
           "exit status: 0 the federation ended (or --fail-at-round), 1 error (no welcome, the\n"
           "coordinator gone or ended on an error, a message of its refused, bad data: the\n"
           "message says), 2 usage error\n");
}

int dd_cmd_fed_client(int argc, char **argv) {
    const char *NAME = "fed-client";
    enum { O_SERVER = 256, O_SKEY, O_KEY, O_DATA, O_CTO, O_TO, O_ATTACK, O_FAIL, O_STRAG, O_REC };
    static const struct option longopts[] = {
        {"server", required_argument, NULL, O_SERVER}, {"server-key", required_argument, NULL, O_SKEY},
        {"key", required_argument, NULL, O_KEY}, {"data", required_argument, NULL, O_DATA},
        {"connect-timeout", required_argument, NULL, O_CTO}, {"timeout", required_argument, NULL, O_TO},
        {"attack", required_argument, NULL, O_ATTACK}, {"fail-at-round", required_argument, NULL, O_FAIL},
        {"straggle-ms", required_argument, NULL, O_STRAG}, {"record", required_argument, NULL, O_REC},
        {"verbose", no_argument, NULL, 'v'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    dd_fed_client_opts o;
    memset(&o, 0, sizeof o);
    o.connect_timeout_s = 60;
    o.timeout_s = 600;
    int verbosity = 0, c, rc;
    size_t v;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_SERVER: o.server = optarg; break;
        case O_SKEY: o.server_key = optarg; break;
        case O_KEY: o.key_path = optarg; break;
        case O_DATA: o.data = optarg; break;
        case O_CTO:
            if ((rc = dd_cli_parse_double(NAME, "--connect-timeout", optarg, 0.1, 1e7, &o.connect_timeout_s))) return rc;
            break;
        case O_TO:
            if ((rc = dd_cli_parse_double(NAME, "--timeout", optarg, 0.1, 1e7, &o.timeout_s))) return rc;
            break;
        case O_ATTACK:
            if ((rc = dd_cli_parse_choice(NAME, "--attack", optarg, dd_fed_attack_names, &o.attack))) return rc;
            break;
        case O_FAIL:
            if ((rc = dd_cli_parse_size(NAME, "--fail-at-round", optarg, 1, 1000000, &v))) return rc;
            o.fail_at_round = (int)v;
            break;
        case O_STRAG:
            if ((rc = dd_cli_parse_size(NAME, "--straggle-ms", optarg, 0, 3600000, &v))) return rc;
            o.straggle_ms = (int)v;
            break;
        case O_REC: o.record = optarg; break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help_client(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!o.server) return dd_cli_usage(NAME, "missing --server tcp://HOST:PORT");
    if (!o.server_key) return dd_cli_usage(NAME, "missing --server-key PUB (the coordinator's public key)");
    if (!o.key_path) return dd_cli_usage(NAME, "missing --key KEY (this bench's secret key)");
    if (!o.data) return dd_cli_usage(NAME, "missing --data DIR");
    dd_cli_log_init(verbosity);
    dd_cli_catch_stop(on_signal);
    o.stop = &stop_flag;
    dd_status st = dd_fed_client_run(&o);
    if (st) return dd_cli_fail(NAME, st);
    return DD_EXIT_OK;
}

/* ------------------------------------------------------------------ fed-sim */
#define SIM_MAX 64

static void help_sim(void) {
    printf("usage: distdpd fed-sim --clients N --data DIR --out RUN [fed-sim options] [fed-server options]\n"
           "\n"
           "Runs a federation on this machine (docs/federated.md): fresh CURVE keys and the allow\n"
           "file in RUN/fed/, the coordinator (fed-server, owns RUN, prints one line per round) on a\n"
           "free loopback port and N fed-client processes, bench i training on DIR/bench-<i>\n"
           "(i = 00, 01, ...; distdpd simulate writes them). Bench logs: RUN/fed/bench-NN.log.\n"
           "Every option that is not fed-sim's goes to fed-server (see distdpd fed-server --help),\n"
           "except --bind, --key, --allow, which fed-sim sets; --start-clients defaults to N.\n"
           "\n"
           "  --clients N           benches (1..64)\n"
           "  --data DIR            directory of the benches' data sets DIR/bench-00, ...\n"
           "  --out RUN             the run directory (new)\n"
           "  --attack I=KIND       bench I sends Byzantine updates: nan, huge, signflip, malformed\n"
           "                        (repeatable)\n"
           "  --fail-at-round I=R   bench I leaves when round R arrives (repeatable)\n"
           "  --straggle-ms I=MS    bench I waits MS before each update (repeatable)\n"
           "  --record              benches write every message they send to RUN/fed/bench-NN.msgs\n"
           "  --client-timeout S    a bench gives up after S s without the coordinator (default 600)\n"
           "  --timeout S           end everything after S seconds (default 86400)\n"
           "  -h, --help            this help\n"
           "\n"
           "exit status: the coordinator's (0 done, 1 error), 2 usage error\n");
}

/* "I=VALUE" for bench I < n: *i and *val. */
static int bench_arg(const char *NAME, const char *opt, const char *a, int n, int *i, const char **val) {
    const char *eq = strchr(a, '=');
    char *end;
    long k = strtol(a, &end, 10);
    if (!eq || end != eq || eq == a || k < 0 || k >= n || !eq[1])
        return dd_cli_usage(NAME, "%s: expected I=VALUE with a bench index I in [0, %d), got '%s'", opt, n, a);
    *i = (int)k;
    *val = eq + 1;
    return 0;
}

int dd_cmd_fed_sim(int argc, char **argv) {
    const char *NAME = "fed-sim";
    size_t nc = 0;
    const char *data = NULL, *out = NULL;
    double timeout = 86400, cto = 600;
    int record = 0, rc;
    const char *attack[SIM_MAX] = {0}, *fail[SIM_MAX] = {0}, *strag[SIM_MAX] = {0};
    const char *pend[3 * SIM_MAX][2];
    int npend = 0;
    char **fwd = calloc((size_t)argc + 16, sizeof *fwd);
    if (!fwd) return DD_EXIT_RUNTIME;
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help_sim();
            free(fwd);
            return DD_EXIT_OK;
        }
        if (strcmp(a, "--record") == 0) {
            record = 1;
            continue;
        }
        int mine = strcmp(a, "--clients") == 0 || strcmp(a, "--data") == 0 || strcmp(a, "--attack") == 0 ||
                   strcmp(a, "--fail-at-round") == 0 || strcmp(a, "--straggle-ms") == 0 || strcmp(a, "--timeout") == 0 ||
                   strcmp(a, "--client-timeout") == 0 || strcmp(a, "--out") == 0;
        if (strcmp(a, "--bind") == 0 || strcmp(a, "--key") == 0 || strcmp(a, "--allow") == 0) {
            free(fwd);
            return dd_cli_usage(NAME, "%s is set by fed-sim: leave it out", a);
        }
        if (!mine) {
            fwd[nf++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            free(fwd);
            return dd_cli_usage(NAME, "%s needs a value", a);
        }
        const char *val = argv[++i];
        rc = 0;
        if (strcmp(a, "--clients") == 0) rc = dd_cli_parse_size(NAME, "--clients", val, 1, SIM_MAX, &nc);
        else if (strcmp(a, "--data") == 0) data = val;
        else if (strcmp(a, "--out") == 0) out = val;
        else if (strcmp(a, "--timeout") == 0) rc = dd_cli_parse_double(NAME, "--timeout", val, 1, 1e7, &timeout);
        else if (strcmp(a, "--client-timeout") == 0) rc = dd_cli_parse_double(NAME, "--client-timeout", val, 0.1, 1e7, &cto);
        else if (npend < 3 * SIM_MAX) { /* bench options: checked once N is known */
            pend[npend][0] = a;
            pend[npend++][1] = val;
        }
        if (rc) {
            free(fwd);
            return rc;
        }
    }
    rc = 0;
    if (!nc) rc = dd_cli_usage(NAME, "missing --clients N");
    else if (!data) rc = dd_cli_usage(NAME, "missing --data DIR (with DIR/bench-00, ...)");
    else if (!out) rc = dd_cli_usage(NAME, "missing --out RUN");
    for (int k = 0; !rc && k < npend; k++) {
        int i = 0;
        const char *val = NULL;
        if ((rc = bench_arg(NAME, pend[k][0], pend[k][1], (int)nc, &i, &val))) break;
        if (strcmp(pend[k][0], "--attack") == 0) {
            int kind;
            if ((rc = dd_cli_parse_choice(NAME, "--attack", val, dd_fed_attack_names, &kind))) break;
            attack[i] = val;
        } else if (strcmp(pend[k][0], "--fail-at-round") == 0) {
            size_t v;
            if ((rc = dd_cli_parse_size(NAME, "--fail-at-round", val, 1, 1000000, &v))) break;
            fail[i] = val;
        } else {
            size_t v;
            if ((rc = dd_cli_parse_size(NAME, "--straggle-ms", val, 0, 3600000, &v))) break;
            strag[i] = val;
        }
    }
    char dir[4200], path[4400], bdata[SIM_MAX][4400];
    struct stat sb;
    for (size_t i = 0; !rc && i < nc; i++) {
        snprintf(bdata[i], sizeof bdata[i], "%s/bench-%02zu", data, i);
        if (stat(bdata[i], &sb) != 0)
            rc = dd_cli_usage(NAME, "--data %s: no %s for bench %zu (distdpd simulate --out %s ... writes one)", data, bdata[i], i,
                              bdata[i]);
    }
    if (rc) {
        free(fwd);
        return rc;
    }
    snprintf(dir, sizeof dir, "%s/fed", out);
    if (stat(dir, &sb) == 0) {
        free(fwd);
        return dd_cli_usage(NAME, "%s exists: RUN must be a new run directory", dir);
    }
    mkdir(out, 0755);
    if (mkdir(dir, 0700) != 0) {
        fprintf(stderr, "distdpd fed-sim: error: cannot create %s: %s\n", dir, strerror(errno));
        free(fwd);
        return DD_EXIT_RUNTIME;
    }
    dd_cli_log_init(0);
    /* keys and the allow file */
    char pub[DD_NET_KEY_Z85 + 1], allow[4400], skey[4400], spub[4400];
    snprintf(allow, sizeof allow, "%s/allow.txt", dir);
    FILE *fa = fopen(allow, "w");
    dd_status st = fa ? DD_OK : dd_error(DD_ERR_IO, "%s: %s", allow, strerror(errno));
    if (fa) fprintf(fa, "# the benches' keys (written by distdpd fed-sim)\n");
    for (size_t i = 0; st == DD_OK && i < nc; i++) {
        snprintf(path, sizeof path, "%s/bench-%02zu", dir, i);
        if ((st = dd_net_keygen(path, 0, pub)) == DD_OK) fprintf(fa, "%s bench-%02zu\n", pub, i);
    }
    if (fa) fclose(fa);
    snprintf(path, sizeof path, "%s/server", dir);
    snprintf(skey, sizeof skey, "%s/server.key", dir);
    snprintf(spub, sizeof spub, "%s/server.pub", dir);
    if (st == DD_OK) st = dd_net_keygen(path, 0, pub);
    int port = dd_net_free_port();
    if (st == DD_OK && port < 0) st = dd_error(DD_ERR_IO, "no free loopback port");
    if (st) {
        free(fwd);
        return dd_cli_fail(NAME, st);
    }
    char addr[64];
    snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", port);
    pid_t pid[SIM_MAX + 1];
    memset(pid, 0, sizeof pid);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    /* the coordinator: its output is ours */
    char **sa = calloc((size_t)nf + 16, sizeof *sa);
    if (!sa) {
        free(fwd);
        return DD_EXIT_RUNTIME;
    }
    int ns = 0;
    sa[ns++] = "distdpd";
    sa[ns++] = "fed-server";
    sa[ns++] = "--bind";
    sa[ns++] = addr;
    sa[ns++] = "--key";
    sa[ns++] = skey;
    sa[ns++] = "--allow";
    sa[ns++] = allow;
    sa[ns++] = "--out";
    sa[ns++] = (char *)out;
    int start_given = 0;
    for (int k = 0; k < nf; k++) {
        start_given |= strcmp(fwd[k], "--start-clients") == 0;
        sa[ns++] = fwd[k];
    }
    char nstart[16];
    if (!start_given) { /* round 1 waits for every bench unless told otherwise */
        snprintf(nstart, sizeof nstart, "%zu", nc);
        sa[ns++] = "--start-clients";
        sa[ns++] = nstart;
    }
    sa[ns] = NULL;
    const pid_t coord = dd_cli_spawn(NAME, sa, NULL);
    pid[0] = coord;
    free(sa);
    free(fwd);
    char cts[32];
    snprintf(cts, sizeof cts, "%g", cto);
    for (size_t i = 0; i < nc; i++) {
        char key[4400], log[4400], rec[4400];
        snprintf(key, sizeof key, "%s/bench-%02zu.key", dir, i);
        snprintf(log, sizeof log, "%s/bench-%02zu.log", dir, i);
        snprintf(rec, sizeof rec, "%s/bench-%02zu.msgs", dir, i);
        char *ca[32];
        int n = 0;
        ca[n++] = "distdpd";
        ca[n++] = "fed-client";
        ca[n++] = "--server";
        ca[n++] = addr;
        ca[n++] = "--server-key";
        ca[n++] = spub;
        ca[n++] = "--key";
        ca[n++] = key;
        ca[n++] = "--data";
        ca[n++] = bdata[i];
        ca[n++] = "--timeout";
        ca[n++] = cts;
        if (attack[i]) {
            ca[n++] = "--attack";
            ca[n++] = (char *)attack[i];
        }
        if (fail[i]) {
            ca[n++] = "--fail-at-round";
            ca[n++] = (char *)fail[i];
        }
        if (strag[i]) {
            ca[n++] = "--straggle-ms";
            ca[n++] = (char *)strag[i];
        }
        if (record) {
            ca[n++] = "--record";
            ca[n++] = rec;
        }
        ca[n] = NULL;
        pid[1 + i] = dd_cli_spawn(NAME, ca, log);
    }
    fprintf(stderr, "distdpd fed-sim: the coordinator (pid %d) and %zu benches on %s; files in %s\n", (int)coord, nc, addr, dir);
    int status = 0, ret = DD_EXIT_RUNTIME, forwarded = 0;
    double t0 = dd_now(), all_gone = 0;
    for (;;) {
        pid_t r = waitpid(coord, &status, WNOHANG);
        if (r == coord) break;
        if (stop_flag && !forwarded) {
            kill(coord, SIGTERM); /* the coordinator stops after its round */
            forwarded = 1;
        }
        if (dd_now() - t0 > timeout) {
            fprintf(stderr, "distdpd fed-sim: error: --timeout %g s reached: ending every process\n", timeout);
            kill(coord, SIGKILL);
            waitpid(coord, &status, 0);
            status = -1;
            break;
        }
        int running = 0;
        for (size_t i = 0; i < nc; i++) {
            int bs;
            if (pid[1 + i] > 0 && waitpid(pid[1 + i], &bs, WNOHANG) == pid[1 + i]) {
                pid[1 + i] = 0;
                if (!WIFEXITED(bs) || WEXITSTATUS(bs) != 0)
                    fprintf(stderr, "distdpd fed-sim: bench-%02zu ended with status %d: see %s/bench-%02zu.log\n", i,
                            WIFEXITED(bs) ? WEXITSTATUS(bs) : 128 + WTERMSIG(bs), dir, i);
            }
            running += pid[1 + i] > 0;
        }
        if (!running && !forwarded) { /* no bench left: the coordinator cannot go on */
            if (!all_gone) all_gone = dd_now();
            else if (dd_now() - all_gone > 5) {
                fprintf(stderr, "distdpd fed-sim: error: every bench has ended: stopping the coordinator\n");
                kill(coord, SIGTERM);
                forwarded = 1;
            }
        }
        usleep(20000);
    }
    pid[0] = 0;
    if (status >= 0 && WIFEXITED(status)) ret = WEXITSTATUS(status);
    /* the benches were told the end: give them a moment, then stop the rest */
    for (int t = 0; t < 300; t++) {
        int left = 0;
        for (size_t i = 0; i < nc; i++)
            if (pid[1 + i] > 0) {
                if (waitpid(pid[1 + i], NULL, WNOHANG) == pid[1 + i]) pid[1 + i] = 0;
                else left++;
            }
        if (!left) break;
        usleep(10000);
    }
    dd_cli_end_all(pid, (int)nc + 1, 3000);
    return ret;
}
