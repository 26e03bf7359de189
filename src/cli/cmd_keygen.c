/* `distdpd keygen --out NAME`: a CURVE key pair for the parameter server's transport
 * (NAME.key secret, mode 0600; NAME.pub public). docs/ps.md. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "distdpd/net.h"

#define NAME "keygen"

static void help(void) {
    printf("usage: distdpd keygen --out NAME [--force]\n"
           "\n"
           "Generates a CURVE (Curve25519) key pair for the parameter server's ZeroMQ\n"
           "transport and writes NAME.key (the secret key, mode 0600) and NAME.pub (the\n"
           "public key), both as Z85 text. Give a server's NAME.pub to its clients through\n"
           "the cluster file (servers[].public_key); put a client's NAME.pub into the\n"
           "servers' allow file (one key per line) to enrol it. docs/ps.md.\n"
           "\n"
           "options:\n"
           "  --out NAME      path prefix of the two files (required)\n"
           "  --force         overwrite existing NAME.key / NAME.pub\n"
           "  -h, --help      this help\n"
           "\n"
           "Prints the public key on stdout.\n"
           "exit status: 0 written, 1 cannot write (or an existing key without --force),\n"
           "2 usage error\n");
}

int dd_cmd_keygen(int argc, char **argv) {
    enum { O_OUT = 256, O_FORCE };
    static const struct option longopts[] = {{"out", required_argument, NULL, O_OUT},
                                             {"force", no_argument, NULL, O_FORCE},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *out = NULL;
    int force = 0, c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_OUT: out = optarg; break;
        case O_FORCE: force = 1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!out || !*out) return dd_cli_usage(NAME, "missing --out NAME");
    char pub[DD_NET_KEY_Z85 + 1];
    dd_status s = dd_net_keygen(out, force, pub);
    if (s) return dd_cli_fail(NAME, s);
    printf("%s\n", pub);
    fprintf(stderr, "distdpd keygen: wrote %s.key (secret, mode 0600) and %s.pub\n", out, out);
    return DD_EXIT_OK;
}
