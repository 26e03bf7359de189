/* Parameter-server throughput on loopback (docs/ps.md, "Throughput"; driven by
 * bench/ps_throughput.sh): K `distdpd ps-server` processes (DD_CLI), N worker processes,
 * each doing STEPS synchronous-style steps of one push of P floats (all blocks) and one
 * full pull (every block sent back, as a pull after other workers' pushes). Plain SGD at
 * lr 0 (values unchanged), R replicas, 64-block model (P / 64 floats per block).
 *
 *   bench_ps K N P STEPS R
 *
 * Prints one line "json: {...}" with: step_s (mean over workers of their time per step),
 * wall_s, pushes_per_s_server (push messages the busiest server received per second:
 * every push sends one message to each server holding a primary), bytes_step_worker
 * (bytes a worker sent + received per step, headers included, from the client's
 * counters), max_share (largest fraction of the model's floats one server is primary
 * for: the ring's imbalance; the model assumes 1/K), resends. */
#include <sys/mman.h>

#include "../tests/ps_test_util.h"

#define NB 64
#define MAXW 32

typedef struct {
    volatile double secs[MAXW];
    volatile double bytes[MAXW];
    volatile long resends[MAXW];
    volatile int status[MAXW];
    volatile int ready;
    volatile int go;
} shared;

static void make_blocks(size_t P, dd_ps_block *b) {
    for (int i = 0; i < NB; i++) {
        snprintf(b[i].name, sizeof b[i].name, "w#%d", i);
        b[i].offset = P * (size_t)i / NB;
        b[i].len = P * (size_t)(i + 1) / NB - b[i].offset;
    }
}

static int worker(ps_cluster *c, int w, size_t P, long steps, shared *sh) {
    char key[600];
    snprintf(key, sizeof key, "%s/worker%d.key", c->dir, w);
    dd_ps_client_opts o = {.key_path = key, .resend_ms = 1000, .dead_ms = 10000};
    dd_ps_client *cl = NULL;
    dd_ps_block b[NB];
    make_blocks(P, b);
    float *arena = calloc(P, sizeof *arena), *g = calloc(P, sizeof *g);
    uint64_t ver[NB];
    dd_status s = dd_ps_client_open(c->cluster, &o, &cl);
    if (!s) s = dd_ps_client_set_blocks(cl, b, NB);
    if (!s) s = dd_ps_client_init(cl, arena, NULL);
    for (size_t i = 0; i < P; i++) g[i] = (float)(i % 7);
    for (int j = 0; j < 3 && !s; j++) { /* warm-up: connections, round-trip estimate */
        s = dd_ps_client_push(cl, g, 0.0, NULL);
        for (int i = 0; i < NB; i++) ver[i] = UINT64_MAX;
        if (!s) s = dd_ps_client_pull(cl, arena, ver);
    }
    __sync_fetch_and_add(&sh->ready, 1);
    for (int t = 0; !sh->go && t < 30000; t++) usleep(1000);
    dd_ps_client_stats a, z;
    dd_ps_client_get_stats(cl, &a);
    double t0 = dd_now();
    for (long j = 0; j < steps && !s; j++) {
        s = dd_ps_client_push(cl, g, 0.0, NULL);
        for (int i = 0; i < NB; i++) ver[i] = UINT64_MAX; /* the whole model comes back */
        if (!s) s = dd_ps_client_pull(cl, arena, ver);
    }
    sh->secs[w] = dd_now() - t0;
    dd_ps_client_get_stats(cl, &z);
    sh->bytes[w] = (double)(z.bytes_sent - a.bytes_sent + z.bytes_received - a.bytes_received) / (double)steps;
    sh->resends[w] = (long)(z.resends - a.resends);
    if (s) fprintf(stderr, "worker %d: %s: %s\n", w, dd_status_str(s), dd_last_error());
    dd_ps_client_close(&cl);
    free(arena);
    free(g);
    return s ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: DD_CLI=distdpd bench_ps K N P STEPS R\n");
        return 2;
    }
    const int K = atoi(argv[1]), N = atoi(argv[2]), R = atoi(argv[5]);
    const size_t P = (size_t)atof(argv[3]);
    const long steps = atol(argv[4]);
    if (K < 1 || K > PS_MAXS || N < 1 || N > MAXW || P < NB || steps < 1 || R < 0 || R >= K) {
        fprintf(stderr, "bench_ps: K in 1..%d, N in 1..%d, P >= %d, STEPS >= 1, R in 0..K-1\n", PS_MAXS, MAXW, NB);
        return 2;
    }
    ps_cluster c;
    if (ps_cluster_setup(&c, K, N, R, "{\"kind\": \"sgd\"}") != 0) return 1;
    for (int s = 0; s < K; s++) ps_server_start(&c, s, "--dead-ms 10000");
    /* the ring's share of the busiest server */
    dd_ps_cluster cf;
    double max_share = 0;
    if (dd_ps_cluster_read(c.cluster, 0, &cf) == DD_OK) {
        const char *names[PS_MAXS];
        for (int s = 0; s < K; s++) names[s] = cf.servers[s].name;
        dd_ps_ring *ring = NULL;
        if (dd_ps_ring_create(names, (size_t)K, cf.vnodes, &ring) == DD_OK) {
            dd_ps_block b[NB];
            make_blocks(P, b);
            double share[PS_MAXS] = {0};
            for (int i = 0; i < NB; i++) {
                int p = -1;
                dd_ps_ring_place(ring, b[i].name, NULL, &p, 1);
                if (p >= 0) share[p] += (double)b[i].len / (double)P;
            }
            for (int s = 0; s < K; s++)
                if (share[s] > max_share) max_share = share[s];
            dd_ps_ring_free(&ring);
        }
        dd_ps_cluster_free(&cf);
    }
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset((void *)sh, 0, sizeof *sh);
    pid_t wp[MAXW];
    for (int w = 0; w < N; w++) {
        wp[w] = fork();
        if (wp[w] == 0) _exit(worker(&c, w, P, steps, sh));
    }
    for (int t = 0; sh->ready < N && t < 60000; t++) usleep(1000);
    double t0 = dd_now();
    sh->go = 1;
    int bad = 0;
    for (int w = 0; w < N; w++) {
        int st;
        waitpid(wp[w], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    const double wall = dd_now() - t0;
    ps_cluster_stop(&c);
    ps_cluster_remove(&c);
    double step = 0, bytes = 0;
    long resends = 0;
    for (int w = 0; w < N; w++) {
        step += sh->secs[w] / (double)steps / N;
        bytes += sh->bytes[w] / N;
        resends += sh->resends[w];
    }
    printf("json: {\"servers\": %d, \"workers\": %d, \"params\": %zu, \"replicas\": %d, \"steps\": %ld, "
           "\"step_s\": %.6g, \"wall_s\": %.4g, \"pushes_per_s_server\": %.6g, \"bytes_step_worker\": %.8g, "
           "\"max_share\": %.4f, \"resends\": %ld, \"failed_workers\": %d}\n",
           K, N, P, R, steps, step, wall, (double)N * (double)steps / wall, bytes, max_share, resends, bad);
    return bad ? 1 : 0;
}
