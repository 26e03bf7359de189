/* MPI tests of the PowerSGD compressor (src/compress/powersgd.c); ctest runs them at 1,
 * 2, 3 and 4 ranks (by hand: mpiexec -np 3 build/test_compress_powersgd_mpi).
 *  - through the public API with error feedback, several steps, sizes {1, 2, 3, 7, 1911,
 *    10007}, ranks 1, 2, 4 and the ring, tree and MPI allreduces: the output is
 *    bit-identical on every rank and so is the warm-start Q (dd_compress_shared_export);
 *    payload and bytes sent;
 *  - the codec called directly (so that `mine` is visible): out equals the sum over ranks
 *    of every rank's mine to float tolerance (not bitwise: out is P (sum_p Q_p)^T, the
 *    sum of mine is sum_p P Q_p^T); tolerance ||out - sum_p mine_p||_F <=
 *    1e-5 ||sum_p |mine_p| ||_F; and both match a double reference computed from every
 *    rank's input (regenerated from the seeds): P = orth(sum_p M_p Q) by Householder QR,
 *    mine_p = P P^T M_p;
 *  - rank-1 inputs M_p = u v_p^T (u shared) and M_p = u_p v^T (v shared: needs the same
 *    initial Q on every rank) with u's last entry 0 where the last row is padded (so
 *    that the padded matrix is rank 1 too): the first step's sum is exact (1e-5
 *    relative), also at r = 1.
 */
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_impl.h"
#include "dd_test.h"
#include "test_mpi_util.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"

/* the codec under test, from the registry (compress_impl.h) */
static const dd_codec *psgd_codec(void) { return dd_codec_find("powersgd"); }

static int g_rank, g_size;

static void shape(size_t n, int rank, size_t *rows, size_t *cols, size_t *r) {
    size_t c = 1;
    while (c * c < n) c++;
    *cols = c;
    *rows = (n + c - 1) / c;
    size_t k = (size_t)rank;
    if (k > *rows) k = *rows;
    if (k > c) k = c;
    *r = k;
}

static void fill_normal(float *x, size_t n, uint64_t key) {
    dd_rng g;
    dd_rng_seed(&g, key);
    for (size_t i = 0; i < n; i++) x[i] = (float)dd_rng_normal(&g);
}

static dd_compressor *make(int rank, int ef, uint64_t seed) {
    dd_compress_cfg cc;
    dd_compress_cfg_default(&cc);
    CHECK_OK(dd_compress_parse(&cc, "powersgd"));
    cc.rank = rank;
    cc.error_feedback = ef;
    cc.seed = seed;
    dd_compressor *c = NULL;
    CHECK_OK(dd_compress_create(&cc, &c));
    return c;
}

/* Public API: identical out and Q on every rank over several error-feedback steps. */
static void test_identical(dd_comm *w) {
    const size_t ns[] = {1, 2, 3, 7, 1911, 10007};
    const int ranks[] = {1, 2, 4};
    const dd_allreduce_algo algos[] = {DD_ALLREDUCE_RING, DD_ALLREDUCE_TREE, DD_ALLREDUCE_MPI};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof ranks / sizeof ranks[0]; b++)
            for (size_t al = 0; al < sizeof algos / sizeof algos[0]; al++) {
                size_t n = ns[a], rows, cols, r;
                shape(n, ranks[b], &rows, &cols, &r);
                dd_compressor *c = make(ranks[b], -1, 17);
                float *g = malloc(n * sizeof *g);
                int ok_out = 1, ok_q = 1, finite = 1;
                for (int s = 0; c && g && s < 4; s++) {
                    dd_compress_begin_step(c, (uint64_t)s, 0, 0);
                    fill_normal(g, n, dd_hash64((uint64_t)s * 131 + n, (uint64_t)g_rank));
                    CHECK_OK(dd_compress_exchange(c, w, algos[al], g, 0, n));
                    for (size_t i = 0; i < n; i++) finite &= isfinite(g[i]) != 0;
                    ok_out &= tm_same_u32(w, dd_crc32c(0, g, n * sizeof *g));
                    size_t nq = 0;
                    CHECK_OK(dd_compress_shared_export(c, NULL, &nq));
                    float *q = malloc(nq * sizeof *q);
                    if (q && dd_compress_shared_export(c, q, &nq) == DD_OK) {
                        CHECK(nq == cols * r, "n=%zu: Q of %zu floats, want %zu", n, nq, cols * r);
                        ok_q &= tm_same_u32(w, dd_crc32c(0, q, nq * sizeof *q));
                    } else {
                        ok_q = 0;
                    }
                    free(q);
                }
                CHECK(finite, "n=%zu rank=%d: non-finite output", n, ranks[b]);
                CHECK(ok_out, "n=%zu rank=%d %s p=%d: outputs differ across ranks", n, ranks[b],
                      dd_allreduce_name(algos[al]), g_size);
                CHECK(ok_q, "n=%zu rank=%d %s p=%d: warm-start Q differs across ranks", n, ranks[b],
                      dd_allreduce_name(algos[al]), g_size);
                dd_compress_stats st;
                dd_compress_stats_get(c, &st);
                CHECK(st.payload_bytes == 4 * 4 * (rows + cols) * r, "payload %llu, want 4 steps x %zu",
                      (unsigned long long)st.payload_bytes, 4 * (rows + cols) * r);
                if (g_size == 1)
                    CHECK(st.bytes_sent == 0, "one rank sends nothing (%llu)", (unsigned long long)st.bytes_sent);
                else
                    CHECK(st.bytes_sent > 0, "n=%zu: bytes_sent must count the allreduces", n);
                free(g);
                dd_compress_destroy(&c);
            }
}

/* Householder QR of A (rows x r, column-major) to orthonormal columns with a positive R
 * diagonal (the Gram-Schmidt convention). */
static int orth_ref(double *A, size_t rows, size_t r) {
    double *tau = calloc(r, sizeof *tau), *diag = calloc(r, sizeof *diag);
    int ok = tau && diag &&
             LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)rows, (lapack_int)r, A, (lapack_int)rows, tau) == 0;
    for (size_t k = 0; ok && k < r; k++) diag[k] = A[k * rows + k];
    ok = ok && LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)rows, (lapack_int)r, (lapack_int)r, A, (lapack_int)rows,
                              tau) == 0;
    for (size_t k = 0; ok && k < r; k++)
        if (diag[k] < 0)
            for (size_t i = 0; i < rows; i++) A[k * rows + i] = -A[k * rows + i];
    free(tau);
    free(diag);
    return ok;
}

/* Rank p's input for the direct test. */
static void direct_input(float *m, size_t n, int p, uint64_t key) { fill_normal(m, n, dd_hash64(key, (uint64_t)p + 1)); }

/* Direct codec call: out vs sum of mine, and both vs a double reference. */
static void test_sum_of_mine(dd_comm *w, size_t n, int rank, dd_allreduce_algo algo) {
    size_t rows, cols, r;
    shape(n, rank, &rows, &cols, &r);
    dd_compressor *owner = make(rank, 0, 23);
    dd_compress_cfg cfg = *dd_compress_config(owner);
    size_t P = (size_t)g_size;
    float *in = malloc(n * sizeof *in), *mine = malloc(n * sizeof *mine), *out = malloc(n * sizeof *out);
    float *all = malloc(P * n * sizeof *all), *q = calloc(cols * r, sizeof *q), *m = malloc(n * sizeof *m);
    double *A = calloc(rows * r, sizeof *A), *sum = calloc(n, sizeof *sum), *sabs = calloc(n, sizeof *sabs);
    double *ref_out = calloc(n, sizeof *ref_out), *ref_mine = calloc(n, sizeof *ref_mine);
    double *qp = calloc(cols * r, sizeof *qp);
    if (!owner || !in || !mine || !out || !all || !q || !m || !A || !sum || !sabs || !ref_out || !ref_mine || !qp) {
        CHECK(0, "setup");
        goto done;
    }
    CHECK(psgd_codec()->shared_floats(&cfg, n) == cols * r, "shared_floats(%zu) = %zu, want %zu", n,
          psgd_codec()->shared_floats(&cfg, n), cols * r);
    /* a warm start given by the test (uses = 1), the same on every rank */
    fill_normal(q, cols * r, 999 + n);
    double *Q0 = calloc(cols * r, sizeof *Q0);
    if (!Q0) goto done;
    for (size_t i = 0; i < cols * r; i++) Q0[i] = q[i];
    dd_cbucket bk;
    memset(&bk, 0, sizeof bk);
    bk.lo = 0;
    bk.n = n;
    bk.shared = q;
    bk.nshared = cols * r;
    bk.uses = 1;
    dd_cx x;
    memset(&x, 0, sizeof x);
    x.cfg = &cfg;
    x.comm = w;
    x.algo = algo;
    x.rank = g_rank;
    x.size = g_size;
    x.step = 5;
    x.density = 1;
    x.b = &bk;
    x.owner = owner;
    direct_input(in, n, g_rank, 4000 + n);
    CHECK_OK(psgd_codec()->exchange(&x, in, n, mine, out));
    CHECK(x.payload_bytes == 4 * (rows + cols) * r, "payload %llu", (unsigned long long)x.payload_bytes);
    CHECK_OK(dd_comm_allgather(w, mine, n * sizeof *mine, all));
    for (size_t p = 0; p < P; p++)
        for (size_t i = 0; i < n; i++) {
            sum[i] += all[p * n + i];
            sabs[i] += fabs(all[p * n + i]);
        }
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += (out[i] - sum[i]) * (out[i] - sum[i]);
        s += sabs[i] * sabs[i];
    }
    e = sqrt(e), s = sqrt(s);
    CHECK(e <= 1e-5 * s, "n=%zu r=%zu %s p=%d: ||out - sum mine|| = %.3g, tol 1e-5 x %.3g", n, r,
          dd_allreduce_name(algo), g_size, e, s);
    CHECK(tm_same_u32(w, dd_crc32c(0, out, n * sizeof *out)), "direct: out differs across ranks");

    /* double reference: P = orth(sum_p M_p Q0) (rows x r, column-major) */
    for (size_t p = 0; p < P; p++) {
        direct_input(m, n, (int)p, 4000 + n);
        for (size_t t = 0; t < n; t++) {
            size_t i = t / cols, j = t % cols;
            for (size_t k = 0; k < r; k++) A[k * rows + i] += (double)m[t] * Q0[j * r + k];
        }
    }
    if (!orth_ref(A, rows, r)) {
        CHECK(0, "QR failed");
        free(Q0);
        goto done;
    }
    for (size_t p = 0; p < P; p++) {
        direct_input(m, n, (int)p, 4000 + n);
        memset(qp, 0, cols * r * sizeof *qp); /* M_p^T P */
        for (size_t t = 0; t < n; t++) {
            size_t i = t / cols, j = t % cols;
            for (size_t k = 0; k < r; k++) qp[j * r + k] += (double)m[t] * A[k * rows + i];
        }
        for (size_t t = 0; t < n; t++) {
            size_t i = t / cols, j = t % cols;
            double v = 0;
            for (size_t k = 0; k < r; k++) v += A[k * rows + i] * qp[j * r + k];
            ref_out[t] += v;
            if ((int)p == g_rank) ref_mine[t] = v;
        }
    }
    double eo = 0, so = 0, em = 0, sm = 0;
    for (size_t t = 0; t < n; t++) {
        eo += (out[t] - ref_out[t]) * (out[t] - ref_out[t]);
        so += ref_out[t] * ref_out[t];
        em += (mine[t] - ref_mine[t]) * (mine[t] - ref_mine[t]);
        sm += ref_mine[t] * ref_mine[t];
    }
    eo = sqrt(eo / so), em = sqrt(em / sm);
    CHECK(eo < 2e-5, "n=%zu r=%zu p=%d: out vs double sum_p P P^T M_p: rel %.3g", n, r, g_size, eo);
    CHECK(em < 2e-5, "n=%zu r=%zu p=%d: mine vs double P P^T M: rel %.3g", n, r, g_size, em);
    if (getenv("DD_VERBOSE") && g_rank == 0)
        printf("direct n=%zu r=%zu p=%d: |out - sum mine| rel %.3g, out vs double %.3g, mine vs double %.3g\n", n,
               r, g_size, e / s, eo, em);
    free(Q0);
done:
    free(in);
    free(mine);
    free(out);
    free(all);
    free(q);
    free(m);
    free(A);
    free(sum);
    free(sabs);
    free(ref_out);
    free(ref_mine);
    free(qp);
    dd_compress_destroy(&owner);
}

/* Rank-1 inputs whose sum is rank 1: M_p = u v_p^T (shared u: P spans u whatever Q is)
 * or M_p = u_p v^T (shared v: P = sum_p u_p (v^T Q) spans sum_p u_p only if Q is the same
 * on every rank). Reproduced on the first step. */
static void test_rank1(dd_comm *w, size_t n, int rank, int shared_u) {
    size_t rows, cols, r;
    shape(n, rank, &rows, &cols, &r);
    REQUIRE(rows > 0 && cols > 0 && n <= rows * cols, "shape of %zu: %zu x %zu", n, rows, cols);
    dd_compressor *c = make(rank, -1, 31);
    /* u, v zeroed: every entry is filled below, but the analyzer cannot tell that t / cols
     * < rows from n <= rows * cols */
    float *g = malloc(n * sizeof *g), *u = calloc(rows, sizeof *u), *v = calloc(cols, sizeof *v);
    double *ref = calloc(n, sizeof *ref);
    if (!c || !g || !u || !v || !ref) {
        CHECK(0, "setup");
        goto done;
    }
    for (int p = 0; p < g_size; p++) {
        fill_normal(u, rows, shared_u ? 71 : 171 + (uint64_t)p);
        if (n < rows * cols) u[rows - 1] = 0; /* so that the zero-padded matrix is rank 1 too */
        fill_normal(v, cols, shared_u ? 72 + (uint64_t)p : 72);
        for (size_t t = 0; t < n; t++) {
            float val = u[t / cols] * v[t % cols];
            ref[t] += val;
            if (p == g_rank) g[t] = val;
        }
    }
    dd_compress_begin_step(c, 0, 0, 0);
    CHECK_OK(dd_compress_exchange(c, w, DD_ALLREDUCE_RING, g, 0, n));
    double e = 0, s = 0;
    for (size_t t = 0; t < n; t++) {
        e += (g[t] - ref[t]) * (g[t] - ref[t]);
        s += ref[t] * ref[t];
    }
    e = sqrt(e / s);
    CHECK(e < 1e-5, "rank-1 inputs (shared %s) n=%zu r=%zu p=%d: summed approximation rel err %.3g",
          shared_u ? "u" : "v", n, r, g_size, e);
    CHECK(tm_same_u32(w, dd_crc32c(0, g, n * sizeof *g)), "rank-1: out differs across ranks");
done:
    free(g);
    free(u);
    free(v);
    free(ref);
    dd_compress_destroy(&c);
}

int main(int argc, char **argv) {
    CHECK_OK(dd_comm_init(&argc, &argv));
    dd_comm *w = NULL;
    CHECK_OK(dd_comm_world(&w));
    if (!w) return dd_test_done("test_compress_powersgd_mpi");
    g_rank = dd_comm_rank(w);
    g_size = dd_comm_size(w);
    const char *np = getenv("DD_TEST_NP");
    if (np) CHECK(g_size == atoi(np), "size %d, DD_TEST_NP %s", g_size, np);
    double t0 = dd_comm_wtime();

    test_identical(w);
    const size_t ns[] = {1, 7, 1911, 10007};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        test_sum_of_mine(w, ns[i], 2, DD_ALLREDUCE_RING);
        test_sum_of_mine(w, ns[i], 4, DD_ALLREDUCE_MPI);
    }
    for (int su = 0; su < 2; su++) {
        test_rank1(w, 1911, 1, su);
        test_rank1(w, 1892, 1, su);
        test_rank1(w, 10007, 4, su);
        test_rank1(w, 3, 1, su);
        test_rank1(w, 4, 1, su);
    }

    int ok = tm_all_ok(w, dd_t_fail == 0);
    if (g_rank == 0)
        printf("test_compress_powersgd_mpi: %d ranks, %.2f s, all ranks %s\n", g_size, dd_comm_wtime() - t0,
               ok ? "passed" : "NOT all passed");
    dd_comm_free(&w);
    CHECK_OK(dd_comm_finalize());
    if (!ok && dd_t_fail == 0) dd_t_fail = 1;
    return dd_test_done("test_compress_powersgd_mpi");
}
