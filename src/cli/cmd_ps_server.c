/* `distdpd ps-server`: one parameter server (docs/ps.md). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "distdpd/ps.h"

#define NAME "ps-server"

static volatile int stop_flag;
static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

static void help(void) {
    printf("usage: distdpd ps-server --bind tcp://HOST:PORT --key KEY --allow FILE --cluster FILE\n"
           "                         [--replicas R] [options]\n"
           "\n"
           "Runs one parameter server of the cluster described by the cluster file: it holds\n"
           "its blocks (as primary and as replica), applies pushed gradients with the\n"
           "cluster's optimiser (state kept with each block), keeps a version clock per block,\n"
           "serves pulls, and replicates every block it is primary for to the next R servers\n"
           "of the consistent-hash ring before acknowledging a push (primary-backup), so an\n"
           "acknowledged update survives the primary's death. Clients authenticate with CURVE;\n"
           "only keys in the allow file (and the cluster's servers) are admitted. Runs until\n"
           "SIGTERM or SIGINT. docs/ps.md.\n"
           "\n"
           "options:\n"
           "  --bind ENDPOINT   address to listen on (default: this server's cluster address);\n"
           "                    also picks this server's cluster entry unless --name is given\n"
           "  --name NAME       this server's servers[].name in the cluster file\n"
           "  --key KEY         this server's secret key file (distdpd keygen --out NAME:\n"
           "                    NAME.key); its public key must be the cluster file's\n"
           "  --allow FILE      allowed client public keys, one Z85 key per line\n"
           "  --cluster FILE    the cluster file (servers, replicas, vnodes, optimizer)\n"
           "  --replicas R      copies of each block on the next R servers (default: the\n"
           "                    cluster file's replicas, else 1)\n"
           "  --max-msg BYTES   largest payload accepted (default 67108864); larger ones are\n"
           "                    refused with a log line, the server goes on\n"
           "  --dead-ms MS      a server silent this long is dead (default 3000)\n"
           "  --resend-ms MS    replication resend interval (default 200)\n"
           "  --insecure        plain TCP without CURVE or allow file (debugging only: warns)\n"
           "  -v, --verbose     info messages (start, stop with counts)\n"
           "  -q, --quiet       errors only (refusals are warnings)\n"
           "  -h, --help        this help\n"
           "\n"
           "environment: DD_NET_DROP=P drops each sent message with probability P, DD_NET_DUP=P\n"
           "  duplicates, DD_NET_REORDER=P delays it past the next, DD_NET_TRUNC=P truncates it (tests only)\n"
           "exit status: 0 stopped by SIGTERM/SIGINT, 1 cannot start (file, key, bind: the\n"
           "message names it), 2 usage error\n");
}

int dd_cmd_ps_server(int argc, char **argv) {
    enum { O_BIND = 256, O_NAME, O_KEY, O_ALLOW, O_CLUSTER, O_REPL, O_MAXMSG, O_DEAD, O_RESEND, O_INSECURE };
    static const struct option longopts[] = {
        {"bind", required_argument, NULL, O_BIND},       {"name", required_argument, NULL, O_NAME},
        {"key", required_argument, NULL, O_KEY},         {"allow", required_argument, NULL, O_ALLOW},
        {"cluster", required_argument, NULL, O_CLUSTER}, {"replicas", required_argument, NULL, O_REPL},
        {"max-msg", required_argument, NULL, O_MAXMSG},  {"dead-ms", required_argument, NULL, O_DEAD},
        {"resend-ms", required_argument, NULL, O_RESEND}, {"insecure", no_argument, NULL, O_INSECURE},
        {"verbose", no_argument, NULL, 'v'},             {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    dd_ps_server_opts o = {0};
    o.replicas = -1;
    int verbosity = 0, c, rc;
    size_t v;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_BIND: o.bind = optarg; break;
        case O_NAME: o.name = optarg; break;
        case O_KEY: o.key_path = optarg; break;
        case O_ALLOW: o.allow_path = optarg; break;
        case O_CLUSTER: o.cluster_path = optarg; break;
        case O_REPL:
            if ((rc = dd_cli_parse_size(NAME, "--replicas", optarg, 0, DD_PS_MAX_SERVERS - 1, &v))) return rc;
            o.replicas = (int)v;
            break;
        case O_MAXMSG:
            if ((rc = dd_cli_parse_size(NAME, "--max-msg", optarg, 64, (size_t)1 << 30, &v))) return rc;
            o.max_msg = (uint32_t)v;
            break;
        case O_DEAD:
            if ((rc = dd_cli_parse_size(NAME, "--dead-ms", optarg, 100, 3600000, &v))) return rc;
            o.dead_ms = (int)v;
            break;
        case O_RESEND:
            if ((rc = dd_cli_parse_size(NAME, "--resend-ms", optarg, 1, 60000, &v))) return rc;
            o.resend_ms = (int)v;
            break;
        case O_INSECURE: o.insecure = 1; break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!o.cluster_path) return dd_cli_usage(NAME, "missing --cluster FILE");
    if (!o.bind && !o.name) return dd_cli_usage(NAME, "missing --bind tcp://HOST:PORT (or --name NAME)");
    if (o.insecure) {
        if (o.key_path || o.allow_path) return dd_cli_usage(NAME, "--insecure takes neither --key nor --allow");
    } else {
        if (!o.key_path) return dd_cli_usage(NAME, "missing --key KEY (or --insecure, for debugging only)");
        if (!o.allow_path) return dd_cli_usage(NAME, "missing --allow FILE (or --insecure, for debugging only)");
    }
    dd_cli_log_init(verbosity);
    dd_cli_catch_stop(on_signal); /* before the first line on stderr: a supervisor that saw it can stop the server */
    if (o.insecure)
        fprintf(stderr, "distdpd ps-server: warning: --insecure: plain TCP, no CURVE, no allow file: anyone who can "
                        "reach the port can read and change the parameters\n");
    o.stop = &stop_flag;
    dd_ps_server_stats st;
    dd_status s = dd_ps_server_run(&o, &st);
    if (s) return dd_cli_fail(NAME, s);
    fprintf(stderr,
            "distdpd ps-server: stopped after %.1f s: %llu pushes applied (%.0f/s), %llu duplicates, %llu pulls, "
            "%llu refused, %llu blocks, %llu replications sent, %llu applied\n",
            st.seconds, (unsigned long long)st.pushes, st.seconds > 0 ? st.pushes / st.seconds : 0.0,
            (unsigned long long)st.duplicates, (unsigned long long)st.pulls, (unsigned long long)st.refused,
            (unsigned long long)st.blocks, (unsigned long long)st.repl_sent, (unsigned long long)st.repl_applied);
    return DD_EXIT_OK;
}
