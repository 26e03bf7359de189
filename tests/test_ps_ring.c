/* Consistent-hash ring of the parameter server (ps.h): deterministic placement (golden
 * values, independent of the order servers are listed), distinct preference lists,
 * failover to the first replica, about 1/S of the blocks moving when one of S servers
 * is added or removed (measured, bounded), balance; blocks cut from a parameter table;
 * cluster file refusals naming the file and field. */
#include "dd_test.h"
#include "distdpd/ps.h"

#define NB 20000
#ifndef GOLDEN_HASH
#define GOLDEN_HASH 0xbfda92d5f87763edull
#define GOLDEN_P0 "beta"
#define GOLDEN_P1 "gamma"
#endif

static const char *names9[] = {"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"};

static void block_name(int i, char *buf, size_t n) { snprintf(buf, n, "layer%d.weight#%d", i % 97, i); }

static void place_all(const dd_ps_ring *r, const unsigned char *alive, int *prim) {
    char b[64];
    for (int i = 0; i < NB; i++) {
        block_name(i, b, sizeof b);
        dd_ps_ring_place(r, b, alive, &prim[i], 1);
    }
}

static void test_golden(void) {
    /* placement must not depend on the process, the build or the listing order */
    const char *fwd[] = {"alpha", "beta", "gamma", "delta"}, *rev[] = {"delta", "gamma", "beta", "alpha"};
    dd_ps_ring *a = NULL, *b = NULL;
    CHECK_OK(dd_ps_ring_create(fwd, 4, 64, &a));
    CHECK_OK(dd_ps_ring_create(rev, 4, 64, &b));
    int same = 1;
    char nm[64];
    for (int i = 0; i < 2000; i++) {
        block_name(i, nm, sizeof nm);
        int pa[3], pb[3];
        int ka = dd_ps_ring_place(a, nm, NULL, pa, 3), kb = dd_ps_ring_place(b, nm, NULL, pb, 3);
        same &= ka == 3 && kb == 3;
        for (int j = 0; j < 3; j++) same &= strcmp(fwd[pa[j]], rev[pb[j]]) == 0;
        same &= pa[0] != pa[1] && pa[1] != pa[2] && pa[0] != pa[2];
    }
    CHECK(same, "same preference lists whatever the listing order, distinct servers");
    /* golden: fixed hash function, identical in every process */
    printf("golden: hash(\"gru.weight_ih_l0\") = 0x%016llx\n", (unsigned long long)dd_ps_hash("gru.weight_ih_l0"));
    CHECK(dd_ps_hash("gru.weight_ih_l0") == GOLDEN_HASH, "hash golden value");
    int p[4];
    dd_ps_ring_place(a, "gru.weight_ih_l0", NULL, p, 4);
    printf("golden: place(gru.weight_ih_l0) = %s %s %s %s\n", fwd[p[0]], fwd[p[1]], fwd[p[2]], fwd[p[3]]);
    CHECK(strcmp(fwd[p[0]], GOLDEN_P0) == 0 && strcmp(fwd[p[1]], GOLDEN_P1) == 0, "placement golden value");
    /* failover: without the primary, the first replica is the new primary */
    unsigned char alive[4] = {1, 1, 1, 1};
    alive[p[0]] = 0;
    int q[3];
    CHECK(dd_ps_ring_place(a, "gru.weight_ih_l0", alive, q, 3) == 3 && q[0] == p[1] && q[1] == p[2] && q[2] == p[3],
          "without the primary the preference list shifts by one");
    unsigned char none[4] = {0};
    CHECK(dd_ps_ring_place(a, "x", none, q, 3) == 0, "no live server: none placed");
    dd_ps_ring_free(&a);
    dd_ps_ring_free(&b);
    const char *dup[] = {"x", "y", "x"};
    CHECK_ERR(dd_ps_ring_create(dup, 3, 8, &a), DD_ERR_ARG, "server name 'x' twice");
}

static void test_movement(void) {
    static int before[NB], after[NB];
    dd_ps_ring *r8 = NULL, *r9 = NULL;
    CHECK_OK(dd_ps_ring_create(names9, 8, DD_PS_DEFAULT_VNODES, &r8));
    CHECK_OK(dd_ps_ring_create(names9, 9, DD_PS_DEFAULT_VNODES, &r9));
    place_all(r8, NULL, before);
    place_all(r9, NULL, after);
    int moved = 0, wrong = 0, count[9] = {0};
    for (int i = 0; i < NB; i++) {
        count[before[i]]++;
        if (before[i] != after[i]) {
            moved++;
            wrong += after[i] != 8;
        }
    }
    double f = (double)moved / NB;
    printf("adding a 9th server to 8: %.4f of the blocks moved (ideal 1/9 = %.4f)\n", f, 1.0 / 9);
    CHECK(f > 0.5 / 9 && f < 1.5 / 9, "moved fraction %.4f within [0.5, 1.5] x 1/9", f);
    CHECK(wrong == 0, "%d blocks moved between old servers", wrong);
    int mx = 0, mn = NB;
    for (int s = 0; s < 8; s++) {
        mx = count[s] > mx ? count[s] : mx;
        mn = count[s] < mn ? count[s] : mn;
    }
    printf("8 servers, %d vnodes: blocks per server %d..%d (mean %d)\n", DD_PS_DEFAULT_VNODES, mn, mx, NB / 8);
    CHECK(mx < 1.35 * NB / 8 && mn > 0.65 * NB / 8, "balance %d..%d", mn, mx);
    /* removing server s3 of 8: only its blocks move, spread over the others */
    unsigned char alive[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    alive[3] = 0;
    place_all(r8, alive, after);
    moved = 0;
    wrong = 0;
    for (int i = 0; i < NB; i++) {
        if (before[i] != after[i]) {
            moved++;
            wrong += before[i] != 3;
        }
    }
    f = (double)moved / NB;
    printf("removing 1 of 8 servers: %.4f of the blocks moved (ideal 1/8 = %.4f)\n", f, 1.0 / 8);
    CHECK(f > 0.5 / 8 && f < 1.5 / 8, "moved fraction %.4f within [0.5, 1.5] x 1/8", f);
    CHECK(wrong == 0, "%d blocks of live servers moved", wrong);
    dd_ps_ring_free(&r8);
    dd_ps_ring_free(&r9);
}

static void test_blocks(void) {
    dd_param_table t;
    dd_param_table_init(&t);
    size_t s1[] = {10}, s2[] = {5, 7}, s3[] = {1};
    CHECK_OK(dd_param_table_add(&t, "a", 1, s1, NULL));
    CHECK_OK(dd_param_table_add(&t, "b", 2, s2, NULL));
    CHECK_OK(dd_param_table_add(&t, "c", 1, s3, NULL));
    dd_ps_block *b = NULL;
    size_t n = 0;
    CHECK_OK(dd_ps_blocks_from_table(&t, 16, &b, &n));
    CHECK(n == 5 && strcmp(b[0].name, "a") == 0 && b[0].len == 10 && strcmp(b[1].name, "b#0") == 0 && b[1].len == 16 &&
              strcmp(b[3].name, "b#2") == 0 && b[3].len == 3 && b[3].offset == t.entries[1].offset + 32 &&
              strcmp(b[4].name, "c") == 0 && b[4].offset == t.entries[2].offset,
          "blocks: n %zu", n);
    free(b);
    CHECK_ERR(dd_ps_blocks_from_table(&t, 0, &b, &n), DD_ERR_ARG, "block size must be >= 1");
    dd_param_table_free(&t);
}

static void cluster_err(const char *dir, const char *json, int insecure, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    dd_ps_cluster c;
    CHECK_ERR(dd_ps_cluster_read(path, insecure, &c), DD_ERR_FORMAT, needle);
}

#define K1 "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
#define K2 "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"

static void test_cluster(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"servers\": [{\"name\": \"s0\", \"address\": \"tcp://127.0.0.1:7000\", \"public_key\": \"%s\"},\n"
               " {\"address\": \"tcp://127.0.0.1:7001\", \"public_key\": \"%s\"}], \"replicas\": 1, \"vnodes\": 16,\n"
               " \"optimizer\": {\"kind\": \"adamw\", \"beta1\": 0.8, \"weight_decay\": 0.1}}",
            K1, K2);
    fclose(f);
    dd_ps_cluster c;
    CHECK_OK(dd_ps_cluster_read(path, 0, &c));
    CHECK(c.n == 2 && strcmp(c.servers[1].name, "127.0.0.1:7001") == 0 && c.vnodes == 16 && c.replicas == 1 &&
              c.optim == DD_OPTIM_ADAMW && c.optim_cfg.beta1 == 0.8 && c.optim_cfg.weight_decay == 0.1,
          "cluster fields");
    dd_ps_cluster_free(&c);
    cluster_err(dir, "[1]", 0, "cluster.json: expected a JSON object");
    cluster_err(dir, "{\"servers\": []}", 0, "cluster.json: servers: expected a non-empty array");
    cluster_err(dir, "{\"servers\": [{\"address\": \"127.0.0.1:7000\"}]}", 0, "servers[0].address: expected \"tcp://HOST:PORT\"");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\", \"public_key\": \"abc\"}]}", 0,
                "servers[0].public_key: expected a 40-character Z85 key");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\"}]}", 0, "servers[0].public_key: expected");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\"}, {\"address\": \"tcp://h:1\"}]}", 1,
                "servers[1].address: 'tcp://h:1' is also servers[0]'s");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\"}], \"replicas\": 1}", 1,
                "replicas: 1 replicas need at least 2 servers, the file has 1");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\"}], \"vnodes\": 0}", 1, "vnodes: expected an integer in [1, 4096]");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\"}], \"optimizer\": {\"kind\": \"lamb\"}}", 1,
                "optimizer.kind: expected \"sgd\", \"adam\", \"adamw\" or \"rmsprop\"");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\"}], \"optimizer\": {\"kind\": \"sgd\", \"lr\": 1}}", 1,
                "optimizer: unknown field 'lr'");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\"}], \"optimizer\": {\"kind\": \"sgd\", \"nesterov\": true}}", 1,
                "cluster.json: optimizer: ");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\", \"port\": 3}]}", 1, "servers[0]: unknown field 'port'");
    cluster_err(dir, "{\"servers\": [{\"address\": \"tcp://h:1\"}], \"extra\": 1}", 1, "unknown field 'extra'");
    cluster_err(dir, "{\"servers\": [", 1, "cluster.json: not valid JSON");
}

int main(void) {
    const char *dir = dd_test_tmpdir();
    test_golden();
    test_movement();
    test_blocks();
    test_cluster(dir);
    return dd_test_done("test_ps_ring");
}
