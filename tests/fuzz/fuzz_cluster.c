/* libFuzzer target: the small configuration files of a deployment, and --agg. Byte 0
 * picks the parser, the rest is the file:
 *   0  dd_ps_cluster_read, secure (every public key required)   parameter-server cluster.json
 *   1  dd_ps_cluster_read, insecure (public keys optional)
 *   2  dd_launch_hostfile_parse                                    Open MPI hostfile (launch)
 *   3  dd_launch_discover_parse                                    a discovery command's HOST:SLOTS lines
 *   4  dd_net_allow_load                                           CURVE allow file
 *   5  dd_plan_cluster_parse                                       `distdpd plan --cluster`
 *   6  dd_agg_parse                                                `--agg` of fed-server
 * (dd_agg_parse is a name table: it rides here rather than costing a target of its own in
 * `make fuzz-ci`.) Invariants on success (a wrong acceptance aborts, like a crash):
 *   cluster: 1..DD_PS_MAX_SERVERS servers with distinct names and addresses tcp://HOST:PORT,
 *     keys valid (or absent when insecure), replicas < servers, and the consistent-hash ring
 *     accepts the names and places a block on min(servers, replicas + 1) distinct servers;
 *   hosts (2, 3): names of [A-Za-z0-9-._], slots in [1, 65536], no name twice, and the list
 *     written by dd_launch_hostfile_write reads back identical;
 *   allow: no more keys than lines;
 *   plan cluster: nodes, ranks_per_node >= 1 and their product <= 2^20, link latencies >= 0
 *     and per-byte terms >= 0, finite; memory > 0; gflops >= 0;
 *   agg: dd_agg_name of the kind is the input.
 * On failure an error message is set. */
#include <ctype.h>

#include "distdpd/fed.h"
#include "distdpd/launch.h"
#include "distdpd/net.h"
#include "distdpd/plan.h"
#include "distdpd/ps.h"
#include "fuzz_util.h"

static void check_ps_cluster(const dd_ps_cluster *c, int insecure) {
    if (c->n < 1 || c->n > DD_PS_MAX_SERVERS || c->vnodes < 1 || c->replicas < 0 || c->replicas > (int)c->n - 1) abort();
    const char *names[DD_PS_MAX_SERVERS];
    for (size_t i = 0; i < c->n; i++) {
        const dd_ps_server_info *s = &c->servers[i];
        if (!s->name[0] || strncmp(s->address, "tcp://", 6) != 0 || !strchr(s->address + 6, ':')) abort();
        if ((s->public_key[0] || !insecure) && !dd_net_key_valid(s->public_key)) abort();
        for (size_t j = 0; j < i; j++)
            if (!strcmp(c->servers[j].name, s->name) || !strcmp(c->servers[j].address, s->address)) abort();
        names[i] = s->name;
    }
    if (c->coord_address[0] && (strncmp(c->coord_address, "tcp://", 6) != 0 || (!insecure && !dd_net_key_valid(c->coord_key))))
        abort();
    dd_ps_ring *r = NULL;
    if (dd_ps_ring_create(names, c->n, c->vnodes, &r) != DD_OK) abort();
    int out[DD_PS_MAX_SERVERS];
    const int want = (int)c->n < c->replicas + 1 ? (int)c->n : c->replicas + 1;
    if (dd_ps_ring_place(r, "block#0", NULL, out, c->replicas + 1) != want) abort();
    for (int i = 0; i < want; i++)
        for (int j = 0; j < i; j++)
            if (out[i] == out[j]) abort();
    dd_ps_ring_free(&r);
}

static void check_hosts(const dd_launch_hosts *h) {
    for (size_t i = 0; i < h->n; i++) {
        const char *nm = h->host[i].name;
        if (!nm[0] || h->host[i].slots < 1 || h->host[i].slots > 65536) abort();
        for (const char *q = nm; *q; q++)
            if (!isalnum((unsigned char)*q) && !strchr("-._", *q)) abort();
        for (size_t j = 0; j < i; j++)
            if (!strcmp(h->host[j].name, nm)) abort();
    }
    if (h->n == 0) return; /* a discovery may find none; a hostfile of none is refused */
    const char *p = dd_fuzz_path("hosts.out");
    dd_launch_hosts r;
    if (dd_launch_hostfile_write(p, h) != DD_OK || dd_launch_hostfile_parse(p, &r) != DD_OK || r.n != h->n) abort();
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(r.host[i].name, h->host[i].name) || r.host[i].slots != h->host[i].slots) abort();
    dd_launch_hosts_free(&r);
}

static int finite_pos(double v) { return isfinite(v) && v > 0; }

static void check_link(const dd_link *l) {
    const double v[5] = {l->alpha, l->beta, l->gamma, l->alpha1, l->beta1};
    for (int i = 0; i < 5; i++)
        if (!isfinite(v[i]) || v[i] < 0) abort();
}

static void must_have_error(dd_status st) {
    if (st == DD_OK || !dd_last_error()[0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    if (size < 1) return 0;
    const int sel = data[0] % 7;
    const uint8_t *d = data + 1;
    const size_t n = size - 1;
    dd_status st;
    if (sel <= 1) {
        dd_ps_cluster c;
        st = dd_ps_cluster_read(dd_fuzz_file("cluster.json", d, n), sel == 1, &c);
        if (st == DD_OK) check_ps_cluster(&c, sel == 1);
        dd_ps_cluster_free(&c);
    } else if (sel == 2) {
        dd_launch_hosts h;
        st = dd_launch_hostfile_parse(dd_fuzz_file("hosts", d, n), &h);
        if (st == DD_OK) {
            if (h.n == 0) abort();
            check_hosts(&h);
        }
        dd_launch_hosts_free(&h);
    } else if (sel == 3) {
        char *s = dd_fuzz_str(d, n);
        dd_launch_hosts h;
        st = dd_launch_discover_parse(s, "discovery", &h);
        if (st == DD_OK) check_hosts(&h);
        dd_launch_hosts_free(&h);
        free(s);
    } else if (sel == 4) {
        dd_net_allow *a = NULL;
        st = dd_net_allow_load(dd_fuzz_file("allow", d, n), &a);
        if (st == DD_OK) {
            size_t lines = 1;
            for (size_t i = 0; i < n; i++) lines += d[i] == '\n';
            if (!a || dd_net_allow_count(a) > lines) abort();
        } else if (a) {
            abort();
        }
        dd_net_allow_free(&a);
    } else if (sel == 5) {
        char *s = dd_fuzz_str(d, n);
        dd_plan_cluster c;
        st = dd_plan_cluster_parse(s, dd_fuzz_path("plan-cluster.json"), &c);
        if (st == DD_OK) {
            if (c.nodes < 1 || c.ranks_per_node < 1 || (double)c.nodes * c.ranks_per_node > 1048576.0 ||
                !finite_pos(c.memory_bytes) || !isfinite(c.gflops) || c.gflops < 0 || !memchr(c.intra_name, 0, sizeof c.intra_name) ||
                !memchr(c.inter_name, 0, sizeof c.inter_name))
                abort();
            check_link(&c.intra);
            check_link(&c.inter);
        }
        free(s);
    } else {
        char *s = dd_fuzz_str(d, n);
        dd_agg_cfg g;
        st = dd_agg_parse(s, &g);
        if (st == DD_OK && (!dd_agg_name(g.kind) || strcmp(dd_agg_name(g.kind), s) != 0)) abort();
        free(s);
    }
    if (st != DD_OK) must_have_error(st);
    dd_error_clear();
    return 0;
}
