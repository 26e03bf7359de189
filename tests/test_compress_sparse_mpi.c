/* MPI tests of the sparsifying codecs and the pair allgather (src/compress/sparse.c);
 * ctest runs this at 1..4 ranks. For topk (exact and sampled), randk and dgc, over
 * several steps and two buckets, through the public API:
 *   - the result is bit-identical on every rank (the outputs gathered and compared);
 *   - it is the sum over ranks of every rank's decompressed contribution mine (= in -
 *     new residual, in = g + old residual), summed in rank order 0..p-1 from zero:
 *     bitwise for the pair allgather (topk, dgc), to float rounding for randk (whose
 *     values go through the ring allreduce);
 *   - randk's indices are the same on every rank;
 *   - topk at density 1 equals dd_comm_allreduce(RING) (and TREE) bit for bit;
 *   - dd_cx_pairs_allgather directly: ranks sending different counts (rank 0 none),
 *     overlapping indices; bitwise against the rank-order sum; bytes accounting
 *     (payload pb k, sent (p - 1)(4 + pb k), pb = 6 bytes per pair up to 65536 elements). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_impl.h"
#include "dd_test.h"
#include "test_mpi_util.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"

static int g_rank, g_size;

static dd_compressor *make(const char *spec) {
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    dd_status s = dd_compress_parse(&cfg, spec);
    CHECK(s == DD_OK, "parse '%s': %s", spec, dd_last_error());
    dd_compressor *c = NULL;
    s = dd_compress_create(&cfg, &c);
    CHECK(s == DD_OK && c, "create '%s': %s", spec, dd_last_error());
    return c;
}

/* rank r's gradient for a step: N(0, 1), never exactly 0 */
static void fill(float *x, size_t n, int r, uint64_t key) {
    dd_rng g;
    dd_rng_seed(&g, dd_hash64(key, (uint64_t)r + 1));
    for (size_t i = 0; i < n; i++) {
        float v = (float)dd_rng_normal(&g);
        x[i] = v != 0.0f ? v : 1e-3f;
    }
}

/* Runs `steps` steps of a compressor over an arena of two buckets and checks the
 * invariants. exact_sum: compare with the rank-order sum bitwise (else to rounding). */
static void check_codec(dd_comm *w, const char *spec, int exact_sum, int same_idx) {
    const size_t n = 5000, split = 3000;
    const size_t np = (size_t)g_size;
    dd_compressor *c = make(spec);
    if (!c) return;
    CHECK_OK(dd_compress_bind(c, n));
    float *g = malloc(n * sizeof *g), *in = malloc(n * sizeof *in), *mine = malloc(n * sizeof *mine);
    float *all_mine = malloc(np * n * sizeof *all_mine), *all_out = malloc(np * n * sizeof *all_out);
    float *ref = malloc(n * sizeof *ref);
    int ok_same = 1, ok_sum = 1, ok_idx = 1, ok_call = 1;
    double worst = 0;
    size_t sent_total = 0;
    for (int s = 0; s < 4; s++) {
        fill(g, n, g_rank, 1000 + (uint64_t)s);
        size_t rn = 0;
        const float *e = dd_compress_residual(c, &rn);
        for (size_t i = 0; i < n; i++) in[i] = g[i] + ((e && rn == n) ? e[i] : 0.0f);
        dd_compress_begin_step(c, (uint64_t)s, 0, 0.0);
        ok_call &= dd_compress_exchange(c, w, DD_ALLREDUCE_RING, g, 0, split) == DD_OK;
        ok_call &= dd_compress_exchange(c, w, DD_ALLREDUCE_RING, g, split, n) == DD_OK;
        e = dd_compress_residual(c, &rn);
        if (!e || rn != n) {
            ok_call = 0;
            break;
        }
        for (size_t i = 0; i < n; i++) mine[i] = in[i] - e[i];
        CHECK_OK(dd_comm_allgather(w, mine, n * sizeof(float), all_mine));
        CHECK_OK(dd_comm_allgather(w, g, n * sizeof(float), all_out));
        for (size_t r = 0; r < np; r++)
            if (memcmp(all_out + r * n, g, n * sizeof(float)) != 0) ok_same = 0;
        for (size_t i = 0; i < n; i++) {
            float acc = 0.0f;
            double sabs = 0;
            for (size_t r = 0; r < np; r++) {
                acc += all_mine[r * n + i];
                sabs += fabs(all_mine[r * n + i]);
            }
            ref[i] = acc;
            if (exact_sum) {
                if (acc != g[i]) ok_sum = 0;
            } else {
                double d = fabs((double)acc - g[i]) / (sabs + 1e-30);
                if (d > worst) worst = d;
            }
            for (size_t r = 0; same_idx && r < np; r++)
                if ((all_mine[r * n + i] != 0.0f) != (mine[i] != 0.0f)) ok_idx = 0;
            sent_total += mine[i] != 0.0f;
        }
    }
    if (!exact_sum) ok_sum = worst < 4 * 6e-8 * (double)g_size;
    CHECK(tm_all_ok(w, ok_call), "%s: exchange failed: %s", spec, dd_last_error());
    CHECK(tm_all_ok(w, ok_same), "%s: out differs between ranks", spec);
    CHECK(tm_all_ok(w, ok_sum), "%s: out != sum over ranks of mine (worst rel %.3g)", spec, worst);
    CHECK(tm_all_ok(w, ok_idx), "%s: indices differ between ranks", spec);
    CHECK(sent_total > 0, "%s: nothing sent", spec);
    dd_compress_stats st;
    dd_compress_stats_get(c, &st);
    if (g_rank == 0)
        printf("%-40s p=%d ratio %.1f payload %llu B, sent %llu B, comm %.2f ms\n", spec, g_size,
               dd_compress_ratio(&st), (unsigned long long)st.payload_bytes, (unsigned long long)st.bytes_sent,
               1e3 * st.comm_s);
    free(g);
    free(in);
    free(mine);
    free(all_mine);
    free(all_out);
    free(ref);
    dd_compress_destroy(&c);
}

static void check_dense(dd_comm *w) {
    const size_t n = 1237;
    const dd_allreduce_algo algos[] = {DD_ALLREDUCE_RING, DD_ALLREDUCE_TREE};
    const char *specs[] = {"topk,density=1", "randk,density=1", "dgc,density=1,warmup=0,momentum=0"};
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (int ai = 0; ai < 2; ai++) {
        for (int si = 0; si < 3; si++) {
            dd_compressor *c = make(specs[si]);
            fill(a, n, g_rank, 77 + (uint64_t)ai);
            memcpy(b, a, n * sizeof *a);
            CHECK_OK(dd_comm_allreduce(w, algos[ai], a, n, DD_F32));
            dd_compress_begin_step(c, 0, 0, 0.0);
            CHECK_OK(dd_compress_exchange(c, w, algos[ai], b, 0, n));
            int same = memcmp(a, b, n * sizeof *a) == 0;
            CHECK(tm_all_ok(w, same), "%s with %s must equal dd_comm_allreduce bit for bit", specs[si],
                  dd_allreduce_name(algos[ai]));
            dd_compress_destroy(&c);
        }
    }
    free(a);
    free(b);
}

/* A hand-made exchange context for calling dd_cx_pairs_allgather directly: a bucket of n
 * elements at density 0.1, scratch owned by *owner (a topk compressor; caller destroys). */
static void pairs_cx(dd_comm *w, size_t n, dd_compressor **owner, dd_compress_cfg *cfg, dd_cbucket *b, dd_cx *x) {
    *owner = make("topk");
    dd_compress_cfg_default(cfg);
    memset(b, 0, sizeof *b);
    b->n = n;
    memset(x, 0, sizeof *x);
    x->cfg = cfg;
    x->comm = w;
    x->algo = DD_ALLREDUCE_RING;
    x->rank = g_rank;
    x->size = g_size;
    x->density = 0.1;
    x->b = b;
    x->owner = *owner;
}

/* A bucket beyond 65536 elements: 32-bit indices (8 bytes per pair), indices above 65535
 * arrive intact. */
static void check_pairs_wide(dd_comm *w) {
    const size_t n = 70000;
    dd_compressor *owner = NULL;
    dd_compress_cfg cfg;
    dd_cbucket b;
    dd_cx x;
    pairs_cx(w, n, &owner, &cfg, &b, &x);
    float *out = calloc(n, sizeof *out), *ref = calloc(n, sizeof *ref);
    uint32_t idx[2] = {(uint32_t)(n - 1 - (size_t)g_rank), (uint32_t)(65536 + (size_t)g_rank)};
    float val[2] = {1.0f + (float)g_rank, -2.0f};
    for (int r = 0; r < g_size; r++) {
        ref[n - 1 - (size_t)r] += 1.0f + (float)r;
        ref[65536 + (size_t)r] += -2.0f;
    }
    CHECK(dd_pair_index_bytes(n) == 4 && dd_pair_index_bytes(65536) == 2, "index width 4 beyond 65536 elements");
    CHECK_OK(dd_cx_pairs_allgather(&x, idx, val, 2, n, out));
    CHECK(tm_all_ok(w, out && ref && memcmp(out, ref, n * sizeof *out) == 0), "wide indices arrive intact");
    CHECK(x.payload_bytes == 16, "payload 2 pairs x 8 bytes, got %llu", (unsigned long long)x.payload_bytes);
    free(out);
    free(ref);
    dd_compress_destroy(&owner);
}

static void check_pairs(dd_comm *w) {
    const size_t n = 64, np = (size_t)g_size;
    dd_compressor *owner = NULL;
    dd_compress_cfg cfg;
    dd_cbucket b;
    dd_cx x;
    pairs_cx(w, n, &owner, &cfg, &b, &x);
    /* rank r sends 3r pairs at indices (5 j + r) % n, values r + j / 7 */
    float *ref = calloc(n, sizeof *ref), out[64];
    uint32_t idx[64];
    float val[64];
    for (size_t r = 0; r < np; r++) {
        size_t k = 3 * r < n ? 3 * r : n;
        for (size_t j = 0; j < k; j++) {
            uint32_t ix = (uint32_t)((5 * j + r) % n);
            float v = (float)r + (float)j / 7.0f;
            ref[ix] += v;
            if ((int)r == g_rank) {
                idx[j] = ix;
                val[j] = v;
            }
        }
    }
    size_t k = 3 * (size_t)g_rank < n ? 3 * (size_t)g_rank : n;
    CHECK_OK(dd_cx_pairs_allgather(&x, idx, val, k, n, out));
    int ok = memcmp(out, ref, n * sizeof *out) == 0;
    CHECK(tm_all_ok(w, ok), "pairs allgather != rank-order sum");
    const size_t pb = 4 + dd_pair_index_bytes(n);
    CHECK(x.payload_bytes == pb * k, "payload %llu, want %zu", (unsigned long long)x.payload_bytes, pb * k);
    uint64_t want_sent = (uint64_t)(g_size - 1) * (4 + pb * k);
    CHECK(x.bytes_sent == want_sent, "bytes_sent %llu, want %llu", (unsigned long long)x.bytes_sent,
          (unsigned long long)want_sent);
    /* a second call reuses the scratch (different counts) */
    x.payload_bytes = x.bytes_sent = 0;
    size_t k2 = (size_t)(g_size - 1 - g_rank);
    memset(ref, 0, n * sizeof *ref);
    for (size_t r = 0; r < np; r++)
        for (size_t j = 0; j < np - 1 - r; j++) ref[j] += (float)(r + 1);
    for (size_t j = 0; j < k2; j++) {
        idx[j] = (uint32_t)j;
        val[j] = (float)(g_rank + 1);
    }
    CHECK_OK(dd_cx_pairs_allgather(&x, idx, val, k2, n, out));
    ok = memcmp(out, ref, n * sizeof *out) == 0;
    CHECK(tm_all_ok(w, ok), "pairs allgather (second call) != rank-order sum");
    /* bad pairs on the last rank: every rank returns an error (none is left waiting) */
    idx[0] = 1;
    val[0] = 1.0f;
    if (g_rank == g_size - 1) idx[0] = (uint32_t)n;
    dd_status s = dd_cx_pairs_allgather(&x, idx, val, 1, n, out);
    CHECK(s == DD_ERR_ARG, "bad pairs: %s (%s)", dd_status_str(s), dd_last_error());
    CHECK(strstr(dd_last_error(), g_rank == g_size - 1 ? "idx[0] = 64" : "passed invalid pairs") != NULL,
          "bad pairs message: %s", dd_last_error());
    /* and the collective still works afterwards */
    idx[0] = (uint32_t)g_rank;
    CHECK_OK(dd_cx_pairs_allgather(&x, idx, val, 1, n, out));
    ok = 1;
    for (size_t i = 0; i < n; i++) ok &= out[i] == (i < np ? 1.0f : 0.0f);
    CHECK(tm_all_ok(w, ok), "pairs allgather after an error");
    free(ref);
    dd_compress_destroy(&owner);
}

int main(int argc, char **argv) {
    CHECK_OK(dd_comm_init(&argc, &argv));
    dd_comm *w = NULL;
    CHECK_OK(dd_comm_world(&w));
    if (!w) return dd_test_done("test_compress_sparse_mpi");
    g_rank = dd_comm_rank(w);
    g_size = dd_comm_size(w);
    const char *np = getenv("DD_TEST_NP");
    if (np) CHECK(g_size == atoi(np), "size %d, DD_TEST_NP %s", g_size, np);
    double t0 = dd_comm_wtime();

    check_pairs(w);
    check_pairs_wide(w);
    check_codec(w, "topk,density=0.01", 1, 0);
    check_codec(w, "topk,density=0.01,sampled=1", 1, 0); /* small buckets: s = n, exact */
    check_codec(w, "topk,density=0.1,sampled=1", 1, 0);
    check_codec(w, "dgc,density=0.01,warmup=0,momentum=0", 1, 0);
    check_codec(w, "dgc,density=0.001,momentum=0", 1, 0); /* warm-up: 25 % at epoch 0 */
    check_codec(w, "randk,density=0.01", 0, 1);
    check_dense(w);

    int ok = tm_all_ok(w, dd_t_fail == 0);
    if (g_rank == 0)
        printf("test_compress_sparse_mpi: %d ranks, %.2f s, all ranks %s\n", g_size, dd_comm_wtime() - t0,
               ok ? "passed" : "NOT all passed");
    dd_comm_free(&w);
    CHECK_OK(dd_comm_finalize());
    if (!ok && dd_t_fail == 0) dd_t_fail = 1;
    return dd_test_done("test_compress_sparse_mpi");
}
