/* MPI tests of the communication layer (ctest runs this at 1, 2, 3 and 4 ranks; by hand:
 * mpirun -np 5 build/test_comm_mpi). Every allreduce algorithm, float32 and float64, at
 * lengths {0, 1, 2, 3, 7, p-1, p, p+1, 1000, 100003} with random data seeded by rank,
 * against a double-precision reference sum; bit-identical results on every rank (CRC of
 * the result gathered from all ranks); the non-blocking variant polled to completion
 * equals the blocking one bit for bit, also with several requests in flight; HIER with
 * simulated nodes (DD_COMM_RANKS_PER_NODE); bcast, allgather(v), reduce-scatter, split,
 * send/recv, counters; MPI errors mapped to DD_ERR_COMM with MPI's text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "dd_test.h"
#include "distdpd/comm.h"

static int g_rank, g_size;

/* Rank r's input for case `key`: uniform in [-1, 1). */
static void fill(double *x, size_t n, int r, uint64_t key) {
    dd_rng g;
    dd_rng_seed(&g, dd_hash64(key, (uint64_t)r + 1));
    for (size_t i = 0; i < n; i++) x[i] = 2 * dd_rng_uniform(&g) - 1;
}

/* 1 if every rank passed the same 32-bit value. */
static int same_everywhere(dd_comm *c, uint32_t v) {
    uint32_t *all = calloc((size_t)g_size, sizeof *all);
    int ok = all != NULL && dd_comm_allgather(c, &v, sizeof v, all) == DD_OK;
    for (int i = 0; ok && i < g_size; i++) ok = all[i] == v;
    free(all);
    return ok;
}

/* 1 if every rank's flag is 1 (so one failing rank fails the check everywhere). */
static int all_ok(dd_comm *c, int ok) {
    int *all = calloc((size_t)g_size, sizeof *all);
    int res = all != NULL && dd_comm_allgather(c, &ok, sizeof ok, all) == DD_OK;
    for (int i = 0; res && i < g_size; i++) res = all[i] == 1;
    free(all);
    return res;
}

/* One algorithm, datatype and length: blocking vs reference, identical across ranks,
 * non-blocking identical to blocking. */
static void check_case(dd_comm *c, dd_allreduce_algo a, dd_dtype dt, size_t n, uint64_t key) {
    int p = dd_comm_size(c), r = dd_comm_rank(c);
    size_t esz = dt == DD_F64 ? 8 : 4, nn = n ? n : 1;
    double *ref = calloc(nn, sizeof *ref), *sabs = calloc(nn, sizeof *sabs);
    double *x = calloc(nn, sizeof *x);
    char *buf = calloc(nn, esz), *buf2 = calloc(nn, esz);
    if (!ref || !sabs || !x || !buf || !buf2) {
        CHECK(0, "out of memory");
        goto done;
    }
    /* reference: double sum of every rank's input, as that rank rounds it */
    for (int q = 0; q < p; q++) {
        fill(x, n, q, key);
        for (size_t i = 0; i < n; i++) {
            double v = dt == DD_F32 ? (double)(float)x[i] : x[i];
            ref[i] += v;
            sabs[i] += fabs(v);
        }
    }
    fill(x, n, r, key);
    for (size_t i = 0; i < n; i++) {
        if (dt == DD_F32)
            ((float *)(void *)buf)[i] = (float)x[i];
        else
            ((double *)(void *)buf)[i] = x[i];
    }
    memcpy(buf2, buf, n * esz);

    dd_status s = dd_comm_allreduce(c, a, n ? buf : NULL, n, dt);
    CHECK(s == DD_OK, "%s n=%zu: %s", dd_allreduce_name(a), n, dd_last_error());
    double worst = 0;
    size_t bad = 0, bad_i = 0;
    double eps = dt == DD_F32 ? 6e-8 : 1.2e-16;
    for (size_t i = 0; i < n; i++) {
        double got = dt == DD_F32 ? (double)((float *)(void *)buf)[i] : ((double *)(void *)buf)[i];
        double err = fabs(got - ref[i]), tol = 2.0 * p * eps * sabs[i] + 1e-300;
        if (err > tol) {
            if (!bad) bad_i = i;
            bad++;
        }
        if (sabs[i] > 0 && err / sabs[i] > worst) worst = err / sabs[i];
    }
    CHECK(bad == 0, "%s %s n=%zu p=%d: %zu elements off the reference (first %zu), worst rel %.3g",
          dd_allreduce_name(a), dt == DD_F32 ? "f32" : "f64", n, p, bad, bad_i, worst);
    uint32_t h = dd_crc32c(0, buf, n * esz);
    CHECK(same_everywhere(c, h), "%s n=%zu p=%d: results differ across ranks",
          dd_allreduce_name(a), n, p);

    /* non-blocking, polled to completion */
    dd_comm_req *req = NULL;
    s = dd_comm_iallreduce(c, a, n ? buf2 : NULL, n, dt, &req);
    CHECK(s == DD_OK, "iallreduce %s n=%zu: %s", dd_allreduce_name(a), n, dd_last_error());
    int done = 0;
    long polls = 0;
    while (s == DD_OK && !done) {
        s = dd_comm_test(req, &done);
        polls++;
    }
    CHECK(s == DD_OK, "test %s n=%zu: %s", dd_allreduce_name(a), n, dd_last_error());
    CHECK_OK(dd_comm_wait(&req));
    CHECK(req == NULL, "wait must NULL the request");
    if (a == DD_ALLREDUCE_MPI) { /* MPI_Iallreduce may pick another order than MPI_Allreduce */
        size_t nb = 0;
        for (size_t i = 0; i < n; i++) {
            double u = dt == DD_F32 ? (double)((float *)(void *)buf)[i] : ((double *)(void *)buf)[i];
            double w = dt == DD_F32 ? (double)((float *)(void *)buf2)[i] : ((double *)(void *)buf2)[i];
            if (fabs(u - w) > 4.0 * p * eps * sabs[i]) nb++;
        }
        CHECK(nb == 0, "MPI_Iallreduce n=%zu: %zu elements differ from MPI_Allreduce", n, nb);
        CHECK(same_everywhere(c, dd_crc32c(0, buf2, n * esz)), "MPI_Iallreduce results differ across ranks");
    } else {
        CHECK(memcmp(buf, buf2, n * esz) == 0, "%s n=%zu: non-blocking result != blocking (%ld polls)",
              dd_allreduce_name(a), n, polls);
    }
done:
    free(ref);
    free(sabs);
    free(x);
    free(buf);
    free(buf2);
}

static void test_allreduce_all(dd_comm *c) {
    int p = dd_comm_size(c);
    size_t lens[] = {0, 1, 2, 3, 7, (size_t)p - 1, (size_t)p, (size_t)p + 1, 1000, 100003};
    for (int a = 0; a < dd_allreduce_count(); a++)
        for (int dt = 0; dt < 2; dt++)
            for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
                check_case(c, (dd_allreduce_algo)a, (dd_dtype)dt, lens[k],
                           1000u * (uint64_t)a + 100u * (uint64_t)dt + k);
}

/* Several non-blocking allreduces in flight at once, polled round-robin (the bucketed
 * data-parallel pattern); each must equal its blocking counterpart. */
static void test_many_in_flight(dd_comm *c) {
    enum { K = 6 };
    const size_t n[K] = {5000, 1, 33333, 0, 777, 100003};
    const dd_allreduce_algo al[K] = {DD_ALLREDUCE_RING, DD_ALLREDUCE_TREE, DD_ALLREDUCE_RHD,
                                     DD_ALLREDUCE_RING, DD_ALLREDUCE_HIER, DD_ALLREDUCE_RING};
    float *a[K], *b[K];
    double *x = calloc(100003, sizeof *x);
    dd_comm_req *req[K];
    int ok = x != NULL;
    for (int k = 0; k < K; k++) {
        a[k] = calloc(n[k] + 1, sizeof(float));
        b[k] = calloc(n[k] + 1, sizeof(float));
        req[k] = NULL;
        ok = ok && a[k] && b[k];
    }
    CHECK(ok, "out of memory");
    for (int k = 0; ok && k < K; k++) {
        fill(x, n[k], dd_comm_rank(c), 77 + (uint64_t)k);
        for (size_t i = 0; i < n[k]; i++) a[k][i] = b[k][i] = (float)x[i];
    }
    for (int k = 0; ok && k < K; k++) CHECK_OK(dd_comm_iallreduce(c, al[k], a[k], n[k], DD_F32, &req[k]));
    int left = K, rounds = 0;
    int done_k[K] = {0};
    while (ok && left > 0 && rounds < 100000000) {
        for (int k = K - 1; k >= 0; k--) { /* poll in reverse to stress matching */
            if (done_k[k]) continue;
            int d = 0;
            dd_status s = dd_comm_test(req[k], &d);
            if (s != DD_OK) {
                CHECK(s == DD_OK, "test %d: %s", k, dd_last_error());
                done_k[k] = 1;
                left--;
                continue;
            }
            if (d) {
                done_k[k] = 1;
                left--;
            }
        }
        rounds++;
    }
    for (int k = 0; k < K; k++) CHECK_OK(dd_comm_wait(&req[k]));
    for (int k = 0; ok && k < K; k++) {
        CHECK_OK(dd_comm_allreduce(c, al[k], b[k], n[k], DD_F32));
        CHECK(memcmp(a[k], b[k], n[k] * sizeof(float)) == 0, "in-flight request %d (%s, n=%zu) != blocking",
              k, dd_allreduce_name(al[k]), n[k]);
    }
    for (int k = 0; k < K; k++) {
        free(a[k]);
        free(b[k]);
    }
    free(x);
}

/* HIER with simulated nodes of k ranks: a fresh world handle reads the variable. */
static void test_hier_nodes(int k) {
    char v[16];
    snprintf(v, sizeof v, "%d", k);
    setenv("DD_COMM_RANKS_PER_NODE", v, 1);
    dd_comm *w = NULL, *node = NULL;
    CHECK_OK(dd_comm_world(&w));
    if (!w) return;
    CHECK_OK(dd_comm_split_node(w, &node));
    int p = g_size, expect = p - (g_rank / k) * k < k ? p - (g_rank / k) * k : k;
    CHECK(node && dd_comm_size(node) == expect, "node size %d, want %d (k=%d)",
          node ? dd_comm_size(node) : -1, expect, k);
    CHECK(node && dd_comm_rank(node) == g_rank % k, "node rank %d, want %d",
          node ? dd_comm_rank(node) : -1, g_rank % k);
    dd_comm_free(&node);
    size_t lens[] = {0, 1, 3, (size_t)p + 1, 1000, 100003};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        check_case(w, DD_ALLREDUCE_HIER, DD_F32, lens[i], 5000 + 10u * (uint64_t)k + i);
        check_case(w, DD_ALLREDUCE_HIER, DD_F64, lens[i], 6000 + 10u * (uint64_t)k + i);
    }
    dd_comm_free(&w);
    unsetenv("DD_COMM_RANKS_PER_NODE");
}

static void test_plain_collectives(dd_comm *c) {
    int p = dd_comm_size(c), r = dd_comm_rank(c);
    REQUIRE(p >= 1 && r >= 0 && r < p, "rank %d of %d", r, p);
    /* bcast from every root */
    for (int root = 0; root < p; root++) {
        int v[3] = {r == root ? 11 * root + 1 : -1, r == root ? 7 : -1, r == root ? root : -1};
        CHECK_OK(dd_comm_bcast(c, v, sizeof v, root));
        CHECK(v[0] == 11 * root + 1 && v[1] == 7 && v[2] == root, "bcast root %d: %d %d %d", root, v[0],
              v[1], v[2]);
    }
    CHECK_OK(dd_comm_bcast(c, NULL, 0, 0));
    /* allgather */
    int64_t mine = 1000 + r, *all = calloc((size_t)p, sizeof *all);
    CHECK_OK(dd_comm_allgather(c, &mine, sizeof mine, all));
    for (int q = 0; all && q < p; q++) CHECK(all[q] == 1000 + q, "allgather[%d] = %lld", q, (long long)all[q]);
    free(all);
    /* allgatherv: rank q contributes q bytes of value q (rank 0 none) */
    size_t *cnt = calloc((size_t)p, sizeof *cnt), *dsp = calloc((size_t)p, sizeof *dsp), tot = 0;
    for (int q = 0; q < p; q++) {
        cnt[q] = (size_t)q;
        dsp[q] = tot;
        tot += (size_t)q;
    }
    unsigned char sb[8], *rb = calloc(tot + 1, 1);
    memset(sb, r, sizeof sb);
    CHECK_OK(dd_comm_allgatherv(c, sb, rb, cnt, dsp));
    size_t badv = 0;
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < cnt[q]; i++) badv += rb[dsp[q] + i] != q;
    CHECK(badv == 0, "allgatherv: %zu wrong bytes", badv);
    free(rb);
    /* reduce-scatter: block q has q+1 elements except block 1 (0 elements) */
    size_t total = 0;
    for (int q = 0; q < p; q++) {
        cnt[q] = q == 1 ? 0 : (size_t)q + 1 + (q == p - 1 ? 1000 : 0);
        total += cnt[q];
    }
    double *send = calloc(total, sizeof *send), *ref = calloc(total, sizeof *ref), *x = calloc(total, sizeof *x);
    double *recv = calloc(cnt[r] + 1, sizeof *recv);
    float *sendf = calloc(total, sizeof *sendf), *recvf = calloc(cnt[r] + 1, sizeof *recvf);
    for (int q = 0; q < p; q++) {
        fill(x, total, q, 4242);
        for (size_t i = 0; i < total; i++) ref[i] += x[i];
        if (q == r)
            for (size_t i = 0; i < total; i++) {
                send[i] = x[i];
                sendf[i] = (float)x[i];
            }
    }
    CHECK_OK(dd_comm_reduce_scatter(c, send, recv, cnt, DD_F64));
    CHECK_OK(dd_comm_reduce_scatter(c, sendf, recvf, cnt, DD_F32));
    size_t off = 0, badr = 0;
    for (int q = 0; q < r; q++) off += cnt[q];
    for (size_t i = 0; i < cnt[r]; i++) {
        badr += fabs(recv[i] - ref[off + i]) > 1e-13 * p;
        badr += fabs(recvf[i] - ref[off + i]) > 1e-6 * p;
    }
    CHECK(badr == 0, "reduce_scatter: %zu wrong values (rank %d, %zu elements)", badr, r, cnt[r]);
    free(send);
    free(ref);
    free(x);
    free(recv);
    free(sendf);
    free(recvf);
    free(cnt);
    free(dsp);
    CHECK_OK(dd_comm_barrier(c));
}

/* Non-blocking allgatherv (uneven counts with zeros, in place and not), gatherv and reduce-scatter
 * (rank-valued inputs: every sum is exact), two of each in flight at once. */
static void test_nonblocking_gather_scatter(dd_comm *c) {
    int p = dd_comm_size(c), r = dd_comm_rank(c);
    size_t *cnt = calloc((size_t)p, sizeof *cnt), *dsp = calloc((size_t)p, sizeof *dsp), tot = 0;
    for (int q = 0; q < p; q++) {
        cnt[q] = q % 3 == 1 ? 0 : (size_t)(37 * q + 5); /* some ranks own nothing */
        dsp[q] = tot;
        tot += cnt[q];
    }
    size_t *bc = calloc((size_t)p, sizeof *bc), *bd = calloc((size_t)p, sizeof *bd);
    for (int q = 0; q < p; q++) {
        bc[q] = cnt[q] * sizeof(float);
        bd[q] = dsp[q] * sizeof(float);
    }
    float *a = calloc(tot + 1, sizeof *a), *b = calloc(tot + 1, sizeof *b), *mine = calloc(cnt[r] + 1, sizeof *mine);
    for (size_t i = 0; i < cnt[r]; i++) a[dsp[r] + i] = mine[i] = (float)(1000 * r + (int)i);
    dd_comm_req *q1 = NULL, *q2 = NULL;
    CHECK_OK(dd_comm_iallgatherv(c, a + dsp[r], a, bc, bd, &q1)); /* in place */
    CHECK_OK(dd_comm_iallgatherv(c, mine, b, bc, bd, &q2));
    CHECK_OK(dd_comm_wait(&q2));
    CHECK_OK(dd_comm_wait(&q1));
    size_t bad = 0;
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < cnt[q]; i++)
            bad += a[dsp[q] + i] != (float)(1000 * q + (int)i) || b[dsp[q] + i] != a[dsp[q] + i];
    CHECK(bad == 0, "iallgatherv: %zu wrong values on rank %d", bad, r);
    /* blocking gatherv to the last rank */
    float *gv = calloc(tot + 1, sizeof *gv);
    CHECK_OK(dd_comm_gatherv(c, mine, r == p - 1 ? gv : NULL, bc, bd, p - 1));
    bad = 0;
    for (int q = 0; r == p - 1 && q < p; q++)
        for (size_t i = 0; i < cnt[q]; i++) bad += gv[dsp[q] + i] != (float)(1000 * q + (int)i);
    CHECK(bad == 0, "gatherv: %zu wrong values on the root", bad);
    CHECK_ERR(dd_comm_gatherv(c, mine, gv, bc, bd, p), DD_ERR_ARG, "root");
    free(gv);
    /* reduce-scatter: element i of block q from rank k is k + 1 + i: block sums exact */
    float *send = calloc(tot + 1, sizeof *send), *recv = calloc(cnt[r] + 1, sizeof *recv);
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < cnt[q]; i++) send[dsp[q] + i] = (float)(r + 1 + (int)i);
    int done = 0;
    CHECK_OK(dd_comm_ireduce_scatter(c, send, recv, cnt, &q1));
    while (!done) CHECK_OK(dd_comm_test(q1, &done));
    dd_comm_req_free(&q1);
    bad = 0;
    const int tri = p * (p + 1) / 2; /* 1 + 2 + ... + p: an integer */
    for (size_t i = 0; i < cnt[r]; i++) bad += recv[i] != (float)(tri + p * (int)i);
    CHECK(bad == 0, "ireduce_scatter: %zu wrong values on rank %d", bad, r);
    CHECK_ERR(dd_comm_ireduce_scatter(c, send, recv, NULL, &q1), DD_ERR_ARG, "counts");
    free(cnt), free(dsp), free(bc), free(bd), free(a), free(b), free(mine), free(send), free(recv);
}

static void test_split_p2p(dd_comm *c) {
    int p = dd_comm_size(c), r = dd_comm_rank(c);
    dd_comm *half = NULL, *none = NULL;
    /* colour by parity, key reverses the order */
    CHECK_OK(dd_comm_split(c, r % 2, -r, &half));
    int want = (p + 1 - r % 2) / 2;
    CHECK(half && dd_comm_size(half) == want, "split size %d want %d", half ? dd_comm_size(half) : -1, want);
    if (half) {
        CHECK(dd_comm_rank(half) == want - 1 - r / 2, "split rank %d", dd_comm_rank(half));
        double v = r;
        CHECK_OK(dd_comm_allreduce(half, DD_ALLREDUCE_RING, &v, 1, DD_F64));
        double e = 0;
        for (int q = r % 2; q < p; q += 2) e += q;
        CHECK(v == e, "allreduce on split: %g want %g", v, e);
    }
    dd_comm_free(&half);
    CHECK(half == NULL, "free must NULL");
    CHECK_OK(dd_comm_split(c, r == 0 ? -1 : 1, 0, &none));
    CHECK((r == 0) == (none == NULL), "colour < 0 must give NULL");
    dd_comm_free(&none);
    if (p < 2) return;
    /* ring exchange with send/recv: even ranks send first */
    int right = (r + 1) % p, left = (r + p - 1) % p;
    int out = 100 + r, in = -1;
    if (r % 2 == 0) {
        CHECK_OK(dd_comm_send(c, &out, sizeof out, right, 5));
        CHECK_OK(dd_comm_recv(c, &in, sizeof in, left, 5));
    } else {
        CHECK_OK(dd_comm_recv(c, &in, sizeof in, left, 5));
        CHECK_OK(dd_comm_send(c, &out, sizeof out, right, 5));
    }
    CHECK(in == 100 + left, "recv got %d from %d", in, left);
}

/* Non-blocking point-to-point: a ring exchange of rank-valued buffers posted receive
 * first and send first in turn (both must complete), several messages in flight with
 * distinct tags, a size mismatch named on completion, and a receive nobody answers: the
 * timed wait says so naming what it waited for, and the receive is cancelled cleanly. */
static void test_nonblocking_p2p(dd_comm *c) {
    int p = dd_comm_size(c), r = dd_comm_rank(c);
    if (p < 2) return;
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    enum { K = 3, N = 1000 };
    float out[K][N], in[K][N];
    dd_comm_req *rr[K], *sr[K];
    for (int k = 0; k < K; k++)
        for (int i = 0; i < N; i++) out[k][i] = (float)(1000 * r + 10 * k + i % 7);
    for (int k = 0; k < K; k++) {
        if (k % 2 == 0) {
            CHECK_OK(dd_comm_irecv(c, in[k], sizeof in[k], left, 100 + k, &rr[k]));
            CHECK_OK(dd_comm_isend(c, out[k], sizeof out[k], right, 100 + k, &sr[k]));
        } else {
            CHECK_OK(dd_comm_isend(c, out[k], sizeof out[k], right, 100 + k, &sr[k]));
            CHECK_OK(dd_comm_irecv(c, in[k], sizeof in[k], left, 100 + k, &rr[k]));
        }
    }
    for (int k = K - 1; k >= 0; k--) { /* completed in another order than posted */
        CHECK_OK(dd_comm_wait_timeout(&rr[k], 30.0, "a ring message"));
        CHECK_OK(dd_comm_wait_timeout(&sr[k], 30.0, "a ring send"));
        CHECK(rr[k] == NULL && sr[k] == NULL, "requests freed");
        int bad = 0;
        for (int i = 0; i < N; i++) bad += in[k][i] != (float)(1000 * left + 10 * k + i % 7);
        CHECK(bad == 0, "message %d from rank %d: %d wrong floats", k, left, bad);
    }
    /* a message of another size: the receive says so on completion */
    double big[4] = {1, 2, 3, 4}, small[2];
    dd_comm_req *q = NULL;
    if (r == 0) CHECK_OK(dd_comm_send(c, big, sizeof big, 1, 120));
    if (r == 1) {
        CHECK_OK(dd_comm_irecv(c, small, sizeof small, 0, 120, &q));
        dd_status st = dd_comm_wait_timeout(&q, 30.0, "the big message");
        CHECK(st == DD_ERR_COMM, "size mismatch: %s", dd_status_str(st));
        dd_comm_req_cancel(&q);
    }
    /* nobody sends tag 121: the wait times out naming it, the receive is cancelled */
    if (r == 0) {
        double t0 = dd_comm_wtime();
        CHECK_OK(dd_comm_irecv(c, small, sizeof small, 1, 121, &q));
        dd_status st = dd_comm_wait_timeout(&q, 0.2, "the gradient of micro-batch 7 from rank 1 (step 3)");
        CHECK(st == DD_ERR_TIMEOUT && strstr(dd_last_error(), "the gradient of micro-batch 7 from rank 1 (step 3)") &&
                  strstr(dd_last_error(), "no answer"),
              "timeout: %s: %s", dd_status_str(st), dd_last_error());
        CHECK(q != NULL && dd_comm_wtime() - t0 < 10.0, "the request stays pending; waited %.2f s", dd_comm_wtime() - t0);
        dd_comm_req_cancel(&q);
        CHECK(q == NULL, "cancelled");
    }
    CHECK_ERR(dd_comm_isend(c, out[0], sizeof out[0], r, 5, &q), DD_ERR_ARG, "peer");
    CHECK_ERR(dd_comm_irecv(c, in[0], sizeof in[0], left, -1, &q), DD_ERR_ARG, "tag");
    CHECK_OK(dd_comm_barrier(c));
}

static void test_stats(dd_comm *c) {
    int p = dd_comm_size(c), r = dd_comm_rank(c);
    size_t n = 1001;
    float *v = calloc(n, sizeof *v);
    dd_comm_stats st;
    dd_comm_stats_reset(c);
    CHECK_OK(dd_comm_allreduce(c, DD_ALLREDUCE_RING, v, n, DD_F32));
    dd_comm_stats_get(c, &st);
    /* ring sends every block but its own (reduce-scatter) and but its right neighbour's
     * (allgather): 2n - len(r) - len(r+1) elements */
    size_t q = n / (size_t)p, rem = n % (size_t)p;
    size_t lr = q + ((size_t)r < rem), lr1 = q + ((size_t)((r + 1) % p) < rem);
    size_t want = p > 1 ? (2 * n - lr - lr1) * sizeof(float) : 0;
    CHECK(st.calls == 1 && st.bytes_sent == want, "stats: calls %llu bytes %llu want %zu",
          (unsigned long long)st.calls, (unsigned long long)st.bytes_sent, want);
    CHECK(st.seconds >= 0 && st.seconds < 60, "stats seconds %g", st.seconds);
    free(v);
}

static void test_errors(dd_comm *c) {
    int p = dd_comm_size(c), r = dd_comm_rank(c);
    int v = 0;
    CHECK_ERR(dd_comm_bcast(c, &v, sizeof v, p), DD_ERR_ARG, "root");
    CHECK_ERR(dd_comm_bcast(c, &v, sizeof v, -1), DD_ERR_ARG, "root -1");
    CHECK_ERR(dd_comm_send(c, &v, sizeof v, r, 0), DD_ERR_ARG, "peer");
    CHECK_ERR(dd_comm_send(c, &v, sizeof v, p, 0), DD_ERR_ARG, "peer");
    CHECK_ERR(dd_comm_allreduce(c, (dd_allreduce_algo)9, &v, 1, DD_F32), DD_ERR_ARG, "algorithm");
    CHECK_ERR(dd_comm_allreduce(c, DD_ALLREDUCE_RING, NULL, 3, DD_F32), DD_ERR_ARG, "buf is NULL");
    dd_allreduce_algo a;
    CHECK_ERR(dd_allreduce_parse("butterfly", &a), DD_ERR_ARG, "butterfly");
    /* a raw MPI error on our communicator returns (MPI_ERRORS_RETURN) and maps to
     * DD_ERR_COMM with MPI's own text */
    int rc = MPI_Bcast(&v, 1, MPI_INT, p + 5, dd_comm_mpi_comm(c));
    CHECK(rc != MPI_SUCCESS, "MPI_Bcast with root %d must fail, not abort", p + 5);
    CHECK_ERR(dd_comm_mpi_error(rc, "MPI_Bcast"), DD_ERR_COMM, "MPI_Bcast: MPI error");
    CHECK(strstr(dd_last_error(), "root") != NULL, "MPI text lacks 'root': %s", dd_last_error());
    /* a truncated receive through the wrapper (rank 1 expects 4 bytes, gets 8) */
    if (p >= 2 && r < 2) {
        int64_t big = 42;
        int32_t small = 0;
        if (r == 0) {
            CHECK_OK(dd_comm_send(c, &big, sizeof big, 1, 9));
        } else {
            CHECK_ERR(dd_comm_recv(c, &small, sizeof small, 0, 9), DD_ERR_COMM, "MPI_Recv: MPI error");
            CHECK(strstr(dd_last_error(), "TRUNCATE") != NULL || strstr(dd_last_error(), "truncat") != NULL,
                  "message lacks truncation: %s", dd_last_error());
        }
    }
    setenv("DD_COMM_RANKS_PER_NODE", "0", 1);
    dd_comm *node = NULL;
    CHECK_ERR(dd_comm_split_node(c, &node), DD_ERR_ARG, "DD_COMM_RANKS_PER_NODE='0'");
    unsetenv("DD_COMM_RANKS_PER_NODE");
    CHECK_OK(dd_comm_barrier(c));
}

int main(int argc, char **argv) {
    CHECK_OK(dd_comm_init(&argc, &argv));
    CHECK(dd_comm_mpi_active(), "MPI must be active under mpiexec");
    dd_comm *w = NULL;
    CHECK_OK(dd_comm_world(&w));
    if (!w) return dd_test_done("test_comm_mpi");
    g_rank = dd_comm_rank(w);
    g_size = dd_comm_size(w);
    CHECK(dd_comm_is_mpi(w), "world must be an MPI comm");
    const char *np = getenv("DD_TEST_NP");
    if (np) CHECK(g_size == atoi(np), "size %d, DD_TEST_NP %s", g_size, np);
    double t0 = dd_comm_wtime();

    test_allreduce_all(w);
    test_many_in_flight(w);
    test_hier_nodes(2);
    test_hier_nodes(1);
    test_hier_nodes(3);
    test_plain_collectives(w);
    test_nonblocking_gather_scatter(w);
    test_split_p2p(w);
    test_nonblocking_p2p(w);
    test_stats(w);
    test_errors(w);

    int ok = all_ok(w, dd_t_fail == 0);
    if (g_rank == 0)
        printf("test_comm_mpi: %d ranks, %.2f s, all ranks %s\n", g_size, dd_comm_wtime() - t0,
               ok ? "passed" : "NOT all passed");
    dd_comm_free(&w);
    CHECK_OK(dd_comm_finalize());
    if (!ok && dd_t_fail == 0) dd_t_fail = 1;
    return dd_test_done("test_comm_mpi");
}
