/* Helpers of the parameter-server tests: a cluster of `distdpd ps-server` processes on
 * loopback ports with fresh keys, allow and cluster files in a temporary directory. */
#ifndef PS_TEST_UTIL_H
#define PS_TEST_UTIL_H

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <time.h>

#include "dd_test.h"
#include "distdpd/net.h"
#include "distdpd/ps.h"

#define PS_MAXS 8

typedef struct {
    char dir[256];
    int ns;
    int port[PS_MAXS];
    char pub[PS_MAXS][41];
    pid_t pid[PS_MAXS];
    char cluster[512], allow[512];
} ps_cluster;

/* Keys for ns servers and nw workers, the allow file (workers' keys), the cluster file. */
static inline int ps_cluster_setup(ps_cluster *c, int ns, int nw, int replicas, const char *optim_json) {
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/ddps.XXXXXX");
    if (!mkdtemp(c->dir)) return -1;
    c->ns = ns;
    char base[512], pub[41];
    snprintf(c->allow, sizeof c->allow, "%s/allow", c->dir);
    FILE *fa = fopen(c->allow, "w");
    fprintf(fa, "# enrolled workers\n");
    for (int w = 0; w < nw; w++) {
        snprintf(base, sizeof base, "%s/worker%d", c->dir, w);
        if (dd_net_keygen(base, 0, pub) != DD_OK) return -1;
        fprintf(fa, "%s worker%d\n", pub, w);
    }
    fclose(fa);
    snprintf(c->cluster, sizeof c->cluster, "%s/cluster.json", c->dir);
    FILE *f = fopen(c->cluster, "w");
    fprintf(f, "{\"replicas\": %d, \"optimizer\": %s, \"servers\": [\n", replicas, optim_json);
    for (int s = 0; s < ns; s++) {
        snprintf(base, sizeof base, "%s/s%d", c->dir, s);
        if (dd_net_keygen(base, 0, c->pub[s]) != DD_OK) return -1;
        c->port[s] = dd_net_free_port();
        fprintf(f, "  {\"name\": \"s%d\", \"address\": \"tcp://127.0.0.1:%d\", \"public_key\": \"%s\"}%s\n", s, c->port[s],
                c->pub[s], s + 1 < ns ? "," : "");
    }
    fprintf(f, "]}\n");
    fclose(f);
    return 0;
}

/* Starts server s: DD_CLI ps-server ... extra, stderr to DIR/sS.log. */
static inline pid_t ps_server_start(ps_cluster *c, int s, const char *extra) {
    const char *cli = getenv("DD_CLI");
    if (!cli) return -1;
    pid_t p = fork();
    if (p == 0) {
        char log[600], bind[64], key[600], cmd[4096];
        snprintf(log, sizeof log, "%s/s%d.log", c->dir, s);
        snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", c->port[s]);
        snprintf(key, sizeof key, "%s/s%d.key", c->dir, s);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        snprintf(cmd, sizeof cmd, "exec '%s' ps-server -v --bind %s --key '%s' --allow '%s' --cluster '%s' %s", cli, bind,
                 key, c->allow, c->cluster, extra ? extra : "");
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    c->pid[s] = p;
    return p;
}

/* SIGTERM to every server still running, wait (at most 10 s, then SIGKILL). */
static inline void ps_cluster_stop(ps_cluster *c) {
    for (int s = 0; s < c->ns; s++)
        if (c->pid[s] > 0) kill(c->pid[s], SIGTERM);
    for (int s = 0; s < c->ns; s++) {
        if (c->pid[s] <= 0) continue;
        int st, waited = 0;
        while (waitpid(c->pid[s], &st, WNOHANG) == 0 && waited < 1000) {
            usleep(10000);
            waited++;
        }
        if (waited >= 1000) {
            kill(c->pid[s], SIGKILL);
            waitpid(c->pid[s], &st, 0);
        }
        c->pid[s] = 0;
    }
}

static inline char *ps_server_log(ps_cluster *c, int s) {
    char log[600];
    snprintf(log, sizeof log, "%s/s%d.log", c->dir, s);
    char *t = NULL;
    if (dd_read_text(log, &t, NULL) != DD_OK) return calloc(1, 1);
    return t;
}

static inline void ps_cluster_remove(ps_cluster *c) {
    dd_t_rm(c->dir);
}
#endif
