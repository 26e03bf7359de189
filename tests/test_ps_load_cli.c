/* Load test of the parameter server (issue 14): 3 `distdpd ps-server` processes x 8
 * worker processes x N pushes (default 10,000) of known integer vectors with plain SGD
 * at lr 1, so that every final value is an exact sum; 1 % of all messages dropped on
 * purpose (DD_NET_DROP=0.01, in servers and workers). Checks: every value equals the
 * exact sum and every block's version equals the number of pushes (0 lost, 0 applied
 * twice). Run twice: undisturbed, then with one server killed -9 half-way through and
 * R = 1 (the workers fail over to the replicas): still exact. Then with 10 % of all
 * messages dropped, 10 % duplicated, 10 % reordered (held back past the next message) and
 * 10 % truncated (net.h's test-only faults): still exact, no hang (300 s bound).
 * DD_PS_LOAD_PUSHES overrides N (e.g. for a quick run). */
#include <sys/mman.h>

#include "ps_test_util.h"

#define NS 3
#define NW 8

typedef struct {
    volatile long done[NW];
    volatile long resends[NW], failovers[NW];
    volatile int status[NW];
    volatile double secs[NW];
} shared;

static void make_table(dd_param_table *t) {
    dd_param_table_init(t);
    size_t a[] = {20, 15}, b[] = {7}, d[] = {1000}, e[] = {3};
    dd_param_table_add(t, "layer0.weight", 2, a, NULL);
    dd_param_table_add(t, "layer0.bias", 1, b, NULL);
    dd_param_table_add(t, "layer1.weight", 1, d, NULL); /* split into 4 blocks of 256 */
    dd_param_table_add(t, "layer1.bias", 1, e, NULL);
}

/* gradient element i of worker w's push j: minus a small integer, so w = sum exact */
static float grad(int w, long j, size_t i) { return -(float)((w + j + (long)i) % 4 + 1); }

static int worker(ps_cluster *c, int w, long pushes, shared *sh) {
    char key[600];
    snprintf(key, sizeof key, "%s/worker%d.key", c->dir, w);
    dd_ps_client_opts o = {.key_path = key, .resend_ms = 100, .dead_ms = 2000};
    dd_ps_client *cl = NULL;
    dd_param_table t;
    make_table(&t);
    dd_ps_block *b = NULL;
    size_t nb = 0;
    float *arena = calloc(t.total, sizeof *arena), *g = calloc(t.total, sizeof *g);
    dd_status s = dd_ps_client_open(c->cluster, &o, &cl);
    if (!s) s = dd_ps_blocks_from_table(&t, 256, &b, &nb);
    if (!s) s = dd_ps_client_set_blocks(cl, b, nb);
    if (!s) s = dd_ps_client_init(cl, arena, NULL);
    double t0 = dd_now();
    for (long j = 0; j < pushes && !s; j++) {
        for (size_t k = 0; k < t.count; k++)
            for (size_t i = 0; i < t.entries[k].size; i++) g[t.entries[k].offset + i] = grad(w, j, t.entries[k].offset + i);
        s = dd_ps_client_push(cl, g, 1.0, NULL);
        sh->done[w] = j + 1;
    }
    sh->secs[w] = dd_now() - t0;
    if (s) fprintf(stderr, "worker %d: %s: %s\n", w, dd_status_str(s), dd_last_error());
    if (cl) {
        dd_ps_client_stats st;
        dd_ps_client_get_stats(cl, &st);
        sh->resends[w] = (long)st.resends;
        sh->failovers[w] = (long)st.failovers;
    }
    dd_ps_client_close(&cl);
    free(b);
    free(arena);
    free(g);
    dd_param_table_free(&t);
    return s ? 1 : 0;
}

static const char *const net_faults[] = {"DD_NET_DROP", "DD_NET_DUP", "DD_NET_REORDER", "DD_NET_TRUNC"};

/* faults: NULL: 1 % dropped (DD_PS_LOAD_DROP); else every kind of net.h's test-only
 * faults (drop, duplicate, reorder/delay, truncate) at that probability each. */
static void run(const char *what, long pushes, int kill_one, const char *faults) {
    ps_cluster c;
    if (ps_cluster_setup(&c, NS, NW, 1, "{\"kind\": \"sgd\"}") != 0) {
        CHECK(0, "cluster setup");
        return;
    }
    const char *drop = getenv("DD_PS_LOAD_DROP");
    setenv("DD_NET_DROP", drop ? drop : "0.01", 1);
    for (int k = 0; faults && k < 4; k++) setenv(net_faults[k], faults, 1);
    for (int s = 0; s < NS; s++) ps_server_start(&c, s, "--dead-ms 2000 --resend-ms 20");
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset((void *)sh, 0, sizeof *sh);
    pid_t wp[NW];
    double t0 = dd_now();
    for (int w = 0; w < NW; w++) {
        wp[w] = fork();
        if (wp[w] == 0) _exit(worker(&c, w, pushes, sh));
    }
    int killed = 0;
    long total = (long)NW * pushes;
    for (;;) { /* kill server 1 half-way; bounded wait for the workers */
        long done = 0;
        for (int w = 0; w < NW; w++) done += sh->done[w];
        if (kill_one && !killed && done >= total / 2) {
            kill(c.pid[1], SIGKILL);
            waitpid(c.pid[1], NULL, 0);
            c.pid[1] = 0;
            killed = 1;
            printf("%s: killed server s1 (-9) after %ld of %ld pushes\n", what, done, total);
        }
        int running = 0;
        for (int w = 0; w < NW; w++)
            if (wp[w] > 0) {
                int st;
                if (waitpid(wp[w], &st, WNOHANG) == wp[w]) {
                    sh->status[w] = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
                    wp[w] = 0;
                } else {
                    running++;
                }
            }
        if (!running) break;
        if (dd_now() - t0 > 300) {
            for (int w = 0; w < NW; w++)
                if (wp[w] > 0) kill(wp[w], SIGKILL);
            CHECK(0, "%s: workers still running after 300 s", what);
            break;
        }
        usleep(2000);
    }
    double secs = dd_now() - t0;
    long resends = 0, failovers = 0;
    for (int w = 0; w < NW; w++) {
        CHECK(sh->status[w] == 0, "%s: worker %d exit status %d", what, w, sh->status[w]);
        resends += sh->resends[w];
        failovers += sh->failovers[w];
    }
    /* the exact sums, from a fresh client (no drops for the check) */
    for (int k = 0; k < 4; k++) unsetenv(net_faults[k]);
    dd_param_table t;
    make_table(&t);
    dd_ps_block *b = NULL;
    size_t nb = 0;
    dd_ps_blocks_from_table(&t, 256, &b, &nb);
    char key[600];
    snprintf(key, sizeof key, "%s/worker0.key", c.dir);
    dd_ps_client_opts o = {.key_path = key, .resend_ms = 100, .dead_ms = 2000};
    dd_ps_client *cl = NULL;
    float *w = calloc(t.total, sizeof *w);
    uint64_t *ver = malloc(nb * sizeof *ver);
    for (size_t i = 0; i < nb; i++) ver[i] = UINT64_MAX;
    CHECK_OK(dd_ps_client_open(c.cluster, &o, &cl));
    if (kill_one && cl) { /* this fresh client learns that s1 is gone */
        CHECK_OK(dd_ps_client_ping(cl));
    }
    CHECK_OK(dd_ps_client_set_blocks(cl, b, nb));
    CHECK_OK(dd_ps_client_pull(cl, w, ver));
    long wrong = 0, badver = 0;
    for (size_t k = 0; k < t.count; k++)
        for (size_t i = 0; i < t.entries[k].size; i++) {
            size_t at = t.entries[k].offset + i;
            long want = 0; /* w = -sum(g) = sum((w + j + at) % 4 + 1) */
            for (int ww = 0; ww < NW; ww++)
                for (long j = 0; j < pushes; j++) want += (ww + j + (long)at) % 4 + 1;
            if (w[at] != (float)want) {
                if (wrong < 5) fprintf(stderr, "%s: %s[%zu] = %.1f, exact sum %ld\n", what, t.entries[k].name, i, w[at], want);
                wrong++;
            }
        }
    for (size_t i = 0; i < nb; i++)
        if (ver[i] != (uint64_t)total) {
            fprintf(stderr, "%s: block %s version %llu, pushes %ld\n", what, b[i].name, (unsigned long long)ver[i], total);
            badver++;
        }
    CHECK(wrong == 0, "%s: %ld values differ from the exact sum", what, wrong);
    CHECK(badver == 0, "%s: %ld blocks whose version is not the push count (lost or doubled updates)", what, badver);
    printf("%s: %d servers x %d workers x %ld pushes (%zu blocks, %zu floats) in %.1f s: %.0f pushes/s in all, "
           "%.0f block updates/s per server; %ld resends, %ld failovers, values exact: %s\n",
           what, NS, NW, pushes, nb, t.nparams, secs, total / secs, (double)total * nb / NS / secs, resends, failovers,
           wrong == 0 && badver == 0 ? "yes" : "NO");
    if (kill_one) CHECK(failovers >= 1, "%s: workers failed over (%ld)", what, failovers);
    dd_ps_client_close(&cl);
    free(w);
    free(ver);
    free(b);
    dd_param_table_free(&t);
    ps_cluster_stop(&c);
    for (int s = 0; s < NS; s++) {
        char *log = ps_server_log(&c, s);
        char *line = strstr(log, "stopped after");
        if (line) printf("  s%d: %.*s\n", s, (int)strcspn(line, "\n"), line);
        if (kill_one && s != 1) CHECK(strstr(log, "server s1 (") && strstr(log, "dead"), "%s: s%d noticed s1's death", what, s);
        free(log);
    }
    munmap((void *)sh, sizeof *sh);
    ps_cluster_remove(&c);
}

int main(void) {
    if (!getenv("DD_CLI")) {
        dd_test_skip("DD_CLI not set (run through ctest)");
        return 77;
    }
    const char *np = getenv("DD_PS_LOAD_PUSHES");
    long pushes = np ? atol(np) : 10000;
    run("load", pushes, 0, NULL);
    run("load, s1 killed -9", pushes, 1, NULL);
    /* 10 % of the messages of servers and workers dropped, 10 % duplicated, 10 % held back
     * and sent after the next (delayed, reordered), 10 % truncated: still exact */
    run("network faults 10 % each", pushes / 10 > 0 ? pushes / 10 : 1, 0, "0.1");
    return dd_test_done("test_ps_load_cli");
}
