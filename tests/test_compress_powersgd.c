/* Tests of the PowerSGD compressor (src/compress/powersgd.c) on one process, through the
 * public API (dd_compress_create "powersgd" + dd_compress_exchange on dd_comm_self):
 *  - shapes, payload bytes and shared-state sizes against an independent computation of
 *    rows = ceil(n / cols), cols = ceil(sqrt(n)), r = min(rank, rows, cols) for odd and
 *    prime sizes; nothing outside [lo, hi) is written; sizes with rows <= r are exact;
 *  - one step reproduces a matrix of exact rank <= r (also padded, rank < r, n = 1911);
 *  - the output equals P P^T M with P = orth(M Q), computed independently in double
 *    (Householder QR from LAPACKE) from the exported warm start Q, and the new Q = M^T P;
 *  - repeated warm-started steps on the same input approach the optimal rank-r error
 *    sqrt(sum_{k>r} s_k^2) from an SVD (LAPACKE_dgesvd), and improve on the first step;
 *  - error feedback: the residual is exactly in - out (one rank: mine == out), and the
 *    sum of the outputs plus the final residual is the sum of the inputs;
 *  - a zero or NaN bucket: zero out / NaN out, and the next step recovers (Q redrawn);
 *  - the same seed gives the same bits, another seed another Q.
 */
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"

static dd_comm *g_self;

/* Independent geometry: cols = smallest c with c^2 >= n. */
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

static void fill_normal(float *x, size_t n, uint64_t key) {
    dd_rng g;
    dd_rng_seed(&g, key);
    for (size_t i = 0; i < n; i++) x[i] = (float)dd_rng_normal(&g);
}

/* One exchange of g[0..n) through an arena [3, 3 + n) with guards around it; returns
 * the result in g (overwritten). Checks that the guards survive. */
static dd_status exchange(dd_compressor *c, float *g, size_t n) {
    size_t lo = 3, len = lo + n + 5;
    float *arena = malloc(len * sizeof *arena);
    if (!arena) return DD_ERR_NOMEM;
    for (size_t i = 0; i < len; i++) arena[i] = i >= lo && i < lo + n ? g[i - lo] : 12345.0f;
    dd_status s = dd_compress_exchange(c, g_self, DD_ALLREDUCE_RING, arena, lo, lo + n);
    int guards = 1;
    for (size_t i = 0; i < lo; i++) guards &= arena[i] == 12345.0f;
    for (size_t i = lo + n; i < len; i++) guards &= arena[i] == 12345.0f;
    CHECK(guards, "n=%zu: elements outside [lo, hi) were written", n);
    for (size_t i = 0; i < n; i++) g[i] = arena[lo + i];
    free(arena);
    return s;
}

/* The exported shared state (Q), malloc'ed; *nq its length. */
static float *export_q(dd_compressor *c, size_t *nq) {
    *nq = 0;
    CHECK_OK(dd_compress_shared_export(c, NULL, nq));
    float *q = malloc((*nq ? *nq : 1) * sizeof *q);
    if (q) CHECK_OK(dd_compress_shared_export(c, q, nq));
    return q;
}

/* ||a - b||_F / ||b||_F in double (b in double). */
static double rel_err(const float *a, const double *b, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        e += d * d;
        s += b[i] * b[i];
    }
    return s > 0 ? sqrt(e / s) : sqrt(e);
}

/* Reference of one step in double: P = orth(M Q) by Householder QR (LAPACKE), signs
 * chosen so that R has a positive diagonal (as Gram-Schmidt), Qn = M^T P,
 * out = P Qn^T (first n elements). M = m[0..n) zero padded to rows x cols. */
static int reference_step(const float *m, size_t n, size_t rows, size_t cols, size_t r, const float *Q, double *out,
                          double *Qn) {
    double *A = calloc(rows * r, sizeof *A), *tau = calloc(r, sizeof *tau), *Md = calloc(rows * cols, sizeof *Md);
    int ok = A && tau && Md;
    if (!ok) goto done;
    for (size_t i = 0; i < n; i++) Md[i] = m[i];
    for (size_t i = 0; i < rows; i++) /* A column-major rows x r */
        for (size_t k = 0; k < r; k++) {
            double s = 0;
            for (size_t j = 0; j < cols; j++) s += Md[i * cols + j] * (double)Q[j * r + k];
            A[k * rows + i] = s;
        }
    ok = LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)rows, (lapack_int)r, A, (lapack_int)rows, tau) == 0;
    double *diag = calloc(r, sizeof *diag);
    ok = ok && diag;
    for (size_t k = 0; ok && k < r; k++) diag[k] = A[k * rows + k];
    ok = ok && LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)rows, (lapack_int)r, (lapack_int)r, A, (lapack_int)rows,
                              tau) == 0;
    for (size_t k = 0; ok && k < r; k++)
        if (diag[k] < 0)
            for (size_t i = 0; i < rows; i++) A[k * rows + i] = -A[k * rows + i];
    free(diag);
    if (!ok) goto done;
    for (size_t j = 0; j < cols; j++)
        for (size_t k = 0; k < r; k++) {
            double s = 0;
            for (size_t i = 0; i < rows; i++) s += Md[i * cols + j] * A[k * rows + i];
            Qn[j * r + k] = s;
        }
    for (size_t t = 0; t < n; t++) {
        size_t i = t / cols, j = t % cols;
        double s = 0;
        for (size_t k = 0; k < r; k++) s += A[k * rows + i] * Qn[j * r + k];
        out[t] = s;
    }
done:
    free(A);
    free(tau);
    free(Md);
    return ok;
}

/* Sizes: payload, shared floats, guards, exactness when rows <= r, reference otherwise. */
static double g_worst_ref, g_worst_q, g_worst_exact;

static void test_sizes(void) {
    const size_t ns[] = {1, 2, 3, 4, 5, 7, 11, 13, 17, 31, 97, 101, 1009, 1911, 7919};
    const int ranks[] = {1, 2, 4};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof ranks / sizeof ranks[0]; b++) {
            size_t n = ns[a], rows, cols, r;
            shape(n, ranks[b], &rows, &cols, &r);
            dd_compressor *c = make(ranks[b], 0, 7);
            float *g = malloc(n * sizeof *g), *m = malloc(n * sizeof *m);
            double *ref = malloc(n * sizeof *ref), *qref = malloc(cols * r * sizeof *qref);
            if (!c || !g || !m || !ref || !qref) {
                CHECK(0, "setup n=%zu", n);
                goto next;
            }
            /* first step (draws Q), then a checked step from the exported Q */
            fill_normal(m, n, 100 + n);
            memcpy(g, m, n * sizeof *g);
            CHECK_OK(exchange(c, g, n));
            size_t nq = 0;
            float *q0 = export_q(c, &nq);
            CHECK(nq == cols * r, "n=%zu rank=%d: shared floats %zu, want cols*r = %zu", n, ranks[b], nq, cols * r);
            fill_normal(m, n, 200 + n);
            memcpy(g, m, n * sizeof *g);
            CHECK_OK(exchange(c, g, n));
            dd_compress_stats st;
            dd_compress_stats_get(c, &st);
            CHECK(st.payload_bytes == 2 * 4 * (rows + cols) * r, "n=%zu rank=%d: payload %llu, want 2 * %zu", n,
                  ranks[b], (unsigned long long)st.payload_bytes, 4 * (rows + cols) * r);
            CHECK(st.bytes_sent == 0, "one rank sends nothing (%llu)", (unsigned long long)st.bytes_sent);
            CHECK(st.elements == 2 * n, "elements %llu", (unsigned long long)st.elements);
            int finite = 1;
            for (size_t i = 0; i < n; i++) finite &= isfinite(g[i]) != 0;
            CHECK(finite, "n=%zu: non-finite output", n);
            if (q0 && nq == cols * r && reference_step(m, n, rows, cols, r, q0, ref, qref)) {
                double e = rel_err(g, ref, n);
                if (e > g_worst_ref) g_worst_ref = e;
                CHECK(e < 2e-5, "n=%zu rank=%d (%zux%zu, r=%zu): out vs double P P^T M: rel err %.3g", n, ranks[b],
                      rows, cols, r, e);
                size_t nq1 = 0;
                float *q1 = export_q(c, &nq1);
                if (q1 && nq1 == cols * r) {
                    double eq = rel_err(q1, qref, nq1);
                    if (eq > g_worst_q) g_worst_q = eq;
                    CHECK(eq < 2e-5, "n=%zu rank=%d: new Q vs double M^T P: rel err %.3g", n, ranks[b], eq);
                }
                free(q1);
            } else {
                CHECK(0, "n=%zu: reference failed", n);
            }
            if (rows <= r) { /* P is a square orthonormal matrix: P P^T = I */
                double *md = malloc(n * sizeof *md);
                if (md) {
                    for (size_t i = 0; i < n; i++) md[i] = m[i];
                    double e = rel_err(g, md, n);
                    if (e > g_worst_exact) g_worst_exact = e;
                    CHECK(e < 1e-6, "n=%zu rank=%d: rows %zu <= r %zu must be exact, rel err %.3g", n, ranks[b], rows,
                          r, e);
                }
                free(md);
            }
            free(q0);
        next:
            free(g);
            free(m);
            free(ref);
            free(qref);
            dd_compress_destroy(&c);
        }
}

/* A rows x cols matrix of exact rank k stored in the first n elements: U V^T with the
 * padded part of the last row zero (the last row of U only uses factor 0, and V's
 * factor 0 vanishes on the padded columns). */
static void low_rank(float *m, size_t n, size_t rows, size_t cols, size_t k, uint64_t key) {
    REQUIRE(rows > 0 && cols > 0 && k > 0 && n <= rows * cols && n > (rows - 1) * cols,
            "low_rank: %zu values in %zu x %zu, rank %zu", n, rows, cols, k);
    double *U = malloc(rows * k * sizeof *U), *V = malloc(cols * k * sizeof *V);
    REQUIRE(U && V, "out of memory"); /* m is the test's input: no test without it */
    dd_rng g;
    dd_rng_seed(&g, key);
    for (size_t i = 0; i < rows * k; i++) U[i] = dd_rng_normal(&g);
    for (size_t i = 0; i < cols * k; i++) V[i] = dd_rng_normal(&g);
    size_t tail = n - (rows - 1) * cols;
    if (tail < cols) {
        for (size_t q = 1; q < k; q++) U[(rows - 1) * k + q] = 0;
        for (size_t j = tail; j < cols; j++) V[j * k] = 0;
    }
    for (size_t t = 0; t < n; t++) {
        size_t i = t / cols, j = t % cols;
        double s = 0;
        for (size_t q = 0; q < k; q++) s += U[i * k + q] * V[j * k + q];
        m[t] = (float)s;
    }
    free(U);
    free(V);
}

/* One step (fresh compressor, so from a random Q) reproduces a matrix of exact rank
 * k <= r: P = M Q spans the column space of M for a generic Q, so P P^T M = M. */
static void test_exact_rank(void) {
    const struct {
        size_t n, k;
        int rank;
    } cs[] = {{1892, 1, 1}, {1892, 2, 2}, {1892, 1, 2}, {1911, 2, 2}, {1911, 3, 4}, {2500, 4, 4}, {10007, 2, 3}};
    for (size_t a = 0; a < sizeof cs / sizeof cs[0]; a++) {
        size_t n = cs[a].n, rows, cols, r;
        shape(n, cs[a].rank, &rows, &cols, &r);
        float *m = malloc(n * sizeof *m), *g = malloc(n * sizeof *g);
        double *md = malloc(n * sizeof *md);
        dd_compressor *c = make(cs[a].rank, 1, 11 + a);
        if (!m || !g || !md || !c) {
            CHECK(0, "setup");
            goto next;
        }
        low_rank(m, n, rows, cols, cs[a].k, 1000 + a);
        for (size_t i = 0; i < n; i++) md[i] = m[i];
        memcpy(g, m, n * sizeof *g);
        CHECK_OK(exchange(c, g, n));
        double e = rel_err(g, md, n);
        if (getenv("DD_VERBOSE")) printf("exact rank %zu, n=%zu, r=%zu: first step rel err %.3g\n", cs[a].k, n, r, e);
        CHECK(e < 1e-5, "n=%zu rank-%zu matrix, r=%zu: first step rel err %.3g", n, cs[a].k, r, e);
        /* a second, warm-started step on the same input (plus the ~0 residual) stays exact */
        memcpy(g, m, n * sizeof *g);
        CHECK_OK(exchange(c, g, n));
        e = rel_err(g, md, n);
        CHECK(e < 1e-5, "n=%zu rank-%zu matrix, r=%zu: second step rel err %.3g", n, cs[a].k, r, e);
    next:
        free(m);
        free(g);
        free(md);
        dd_compress_destroy(&c);
    }
}

/* Optimal rank-r error ||M - M_r||_F / ||M||_F from the singular values (dgesvd). */
static double optimal_err(const float *m, size_t n, size_t rows, size_t cols, size_t r) {
    double *A = calloc(rows * cols, sizeof *A), *s = calloc(rows, sizeof *s), *sup = calloc(rows + 1, sizeof *sup);
    double res = -1;
    if (A && s && sup) {
        for (size_t t = 0; t < n; t++) A[t] = m[t]; /* row-major rows x cols */
        if (LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', (lapack_int)rows, (lapack_int)cols, A, (lapack_int)cols, s,
                           NULL, 1, NULL, 1, sup) == 0) {
            double tail = 0, all = 0;
            for (size_t k = 0; k < rows; k++) {
                all += s[k] * s[k];
                if (k >= r) tail += s[k] * s[k];
            }
            res = sqrt(tail / all);
        }
    }
    free(A);
    free(s);
    free(sup);
    return res;
}

/* Warm-started power iterations on a fixed input (no error feedback) approach the best
 * rank-r approximation: a Gaussian matrix and one with a decaying spectrum plus noise. */
static void test_converges(void) {
    const struct {
        size_t n;
        int rank;
        int decay;
        int steps;
        double tol; /* allowed relative excess over the optimal error */
    } cs[] = {{1892, 2, 1, 12, 0.01}, {1911, 4, 1, 12, 0.01}, {4900, 2, 0, 30, 0.01}, {10100, 4, 1, 12, 0.01}};
    for (size_t a = 0; a < sizeof cs / sizeof cs[0]; a++) {
        size_t n = cs[a].n, rows, cols, r;
        shape(n, cs[a].rank, &rows, &cols, &r);
        float *m = malloc(n * sizeof *m), *g = malloc(n * sizeof *g);
        double *md = malloc(n * sizeof *md);
        dd_compressor *c = make(cs[a].rank, 0, 5);
        if (!m || !g || !md || !c) {
            CHECK(0, "setup");
            goto next;
        }
        fill_normal(m, n, 77 + a);
        if (cs[a].decay) { /* sum_k 0.6^k u_k v_k^T (k < 8) + 0.002 noise */
            float *lr = malloc(n * sizeof *lr);
            if (!lr) goto next;
            for (size_t i = 0; i < n; i++) m[i] *= 0.002f;
            for (size_t k = 0; k < 8; k++) {
                low_rank(lr, n, rows, cols, 1, 500 + 10 * a + k);
                float w = (float)(pow(0.6, (double)k) / sqrt((double)n));
                for (size_t i = 0; i < n; i++) m[i] += w * lr[i];
            }
            free(lr);
        }
        for (size_t i = 0; i < n; i++) md[i] = m[i];
        double best = optimal_err(m, n, rows, cols, r);
        double first = 0, last = 0;
        for (int s = 0; s < cs[a].steps; s++) {
            memcpy(g, m, n * sizeof *g);
            CHECK_OK(exchange(c, g, n));
            double e = rel_err(g, md, n);
            if (s == 0) first = e;
            last = e;
        }
        CHECK(best > 0, "svd failed");
        /* padded sizes: the error on the first n elements may be below the optimum of the
         * padded matrix (the approximation's padding is dropped) */
        if (n == rows * cols)
            CHECK(last >= best * (1 - 1e-4), "n=%zu r=%zu: error %.6f below the optimum %.6f?", n, r, last, best);
        CHECK(last <= best * (1 + cs[a].tol), "n=%zu r=%zu %s: after %d steps rel err %.5f, optimal %.5f (+%.1f%%)",
              n, r, cs[a].decay ? "decaying" : "gaussian", cs[a].steps, last, best, 100 * (last / best - 1));
        CHECK(first > last, "n=%zu: warm start must improve on the first step (%.5f -> %.5f)", n, first, last);
        if (getenv("DD_VERBOSE"))
            printf("converge n=%zu r=%zu %s: optimal %.5f, step 1 %.5f, step %d %.5f\n", n, r,
                   cs[a].decay ? "decaying" : "gaussian", best, first, cs[a].steps, last);
    next:
        free(m);
        free(g);
        free(md);
        dd_compress_destroy(&c);
    }
}

/* Error feedback: residual == in - mine with in = g + old residual (one rank: mine ==
 * out), and sum of outputs + final residual == sum of inputs. */
static void test_error_feedback(void) {
    const size_t n = 1911;
    dd_compressor *c = make(2, -1, 3);
    float *g = malloc(n * sizeof *g), *in = malloc(n * sizeof *in);
    double *sum_g = calloc(n, sizeof *sum_g), *sum_out = calloc(n, sizeof *sum_out);
    if (!c || !g || !in || !sum_g || !sum_out) {
        CHECK(0, "setup");
        goto done;
    }
    CHECK(dd_compress_has_ef(c) && dd_compress_lossy(c), "powersgd is lossy with error feedback by default");
    for (int s = 0; s < 5; s++) {
        dd_compress_begin_step(c, (uint64_t)s, 0, 0.1 * s);
        fill_normal(g, n, 900 + (uint64_t)s);
        size_t ne = 0;
        const float *e = dd_compress_residual(c, &ne);
        for (size_t i = 0; i < n; i++) {
            in[i] = e && ne ? g[i] + e[i + 3] : g[i];
            sum_g[i] += g[i];
        }
        CHECK_OK(exchange(c, g, n));
        e = dd_compress_residual(c, &ne);
        CHECK(e != NULL && ne == n + 3, "residual of %zu floats", ne);
        if (!e || ne != n + 3) break;
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            if (e[i + 3] != in[i] - g[i]) bad++;
            sum_out[i] += g[i];
        }
        CHECK(bad == 0, "step %d: %zu residual elements != in - mine", s, bad);
        double en = 0, inn = 0;
        for (size_t i = 0; i < n; i++) {
            en += (double)e[i + 3] * e[i + 3];
            inn += (double)in[i] * in[i];
        }
        CHECK(en > 0 && en < inn, "step %d: residual norm %.4g must be in (0, |in| = %.4g)", s, sqrt(en), sqrt(inn));
    }
    size_t ne = 0;
    const float *e = dd_compress_residual(c, &ne);
    double worst = 0;
    for (size_t i = 0; e && i < n; i++) {
        double d = fabs(sum_out[i] + e[i + 3] - sum_g[i]);
        if (d > worst) worst = d;
    }
    CHECK(e && worst < 1e-4, "sum out + residual - sum g: max %.3g", worst);
done:
    free(g);
    free(in);
    free(sum_g);
    free(sum_out);
    dd_compress_destroy(&c);
}

/* A zero bucket gives zeros (no NaN from 0/0) and zeroes Q; a NaN bucket gives NaN out;
 * the next finite step is exact again for a rank-1 input (Q columns redrawn). */
static void test_degenerate(void) {
    const size_t n = 1911;
    size_t rows, cols, r;
    shape(n, 2, &rows, &cols, &r);
    dd_compressor *c = make(2, 0, 9);
    float *g = malloc(n * sizeof *g), *m = malloc(n * sizeof *m);
    double *md = malloc(n * sizeof *md);
    if (!c || !g || !m || !md) {
        CHECK(0, "setup");
        goto done;
    }
    low_rank(m, n, rows, cols, 1, 4242);
    for (size_t i = 0; i < n; i++) md[i] = m[i];
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < n; i++) g[i] = 0;
        if (round == 1) g[100] = NAN;
        CHECK_OK(exchange(c, g, n));
        size_t zeros = 0, nans = 0;
        for (size_t i = 0; i < n; i++) {
            zeros += g[i] == 0.0f;
            nans += isnan(g[i]) != 0;
        }
        if (round == 0)
            CHECK(zeros == n, "zero bucket: %zu of %zu outputs are 0", zeros, n);
        else
            CHECK(nans > 0, "a NaN input must show in the output");
        size_t nq = 0;
        float *q = export_q(c, &nq);
        size_t qz = 0;
        for (size_t i = 0; q && i < nq; i++) qz += q[i] == 0.0f || !isfinite(q[i]);
        CHECK(qz == nq, "round %d: Q after a zero/NaN bucket: %zu of %zu zero or non-finite", round, qz, nq);
        free(q);
        memcpy(g, m, n * sizeof *g);
        CHECK_OK(exchange(c, g, n));
        double e = rel_err(g, md, n);
        CHECK(e < 1e-5, "round %d: rank-1 step after a degenerate one: rel err %.3g", round, e);
    }
done:
    free(g);
    free(m);
    free(md);
    dd_compress_destroy(&c);
}

/* Same seed, same bits; another seed, another Q (and the same Q after import). */
static void test_determinism(void) {
    const size_t n = 1000;
    dd_compressor *a = make(2, 1, 21), *b = make(2, 1, 21), *c = make(2, 1, 22);
    float *ga = malloc(n * sizeof *ga), *gb = malloc(n * sizeof *gb), *gc = malloc(n * sizeof *gc);
    if (!a || !b || !c || !ga || !gb || !gc) {
        CHECK(0, "setup");
        goto done;
    }
    for (int s = 0; s < 3; s++) {
        dd_compress_begin_step(a, (uint64_t)s, 0, 0);
        dd_compress_begin_step(b, (uint64_t)s, 0, 0);
        dd_compress_begin_step(c, (uint64_t)s, 0, 0);
        fill_normal(ga, n, 31 + (uint64_t)s);
        memcpy(gb, ga, n * sizeof *ga);
        memcpy(gc, ga, n * sizeof *ga);
        CHECK_OK(exchange(a, ga, n));
        CHECK_OK(exchange(b, gb, n));
        CHECK_OK(exchange(c, gc, n));
        CHECK(memcmp(ga, gb, n * sizeof *ga) == 0, "step %d: same seed, different output", s);
        if (s == 0) CHECK(memcmp(ga, gc, n * sizeof *ga) != 0, "another seed must give another first step");
    }
    size_t na = 0, nc = 0;
    float *qa = export_q(a, &na), *qc = export_q(c, &nc);
    CHECK(na == nc && na > 0, "Q sizes %zu %zu", na, nc);
    if (qa && qc && na == nc) {
        CHECK_OK(dd_compress_shared_import(c, qa, na));
        float *q2 = export_q(c, &nc);
        CHECK(q2 && memcmp(q2, qa, na * sizeof *qa) == 0, "import/export of Q");
        free(q2);
    }
    free(qa);
    free(qc);
done:
    free(ga);
    free(gb);
    free(gc);
    dd_compress_destroy(&a);
    dd_compress_destroy(&b);
    dd_compress_destroy(&c);
}

/* Configuration: rank parses and is range checked; the name is registered. */
static void test_config(void) {
    dd_compress_cfg cc;
    dd_compress_cfg_default(&cc);
    CHECK_OK(dd_compress_parse(&cc, "powersgd,rank=4"));
    CHECK(strcmp(cc.name, "powersgd") == 0 && cc.rank == 4, "parsed %s rank %d", cc.name, cc.rank);
    cc.rank = 0;
    CHECK(dd_compress_cfg_check(&cc) == DD_ERR_ARG, "rank 0 must be refused");
    CHECK(dd_compress_describe("powersgd") != NULL, "powersgd is registered");
}

int main(void) {
    CHECK_OK(dd_comm_self(&g_self));
    double t0 = dd_comm_wtime();
    test_config();
    test_sizes();
    if (getenv("DD_VERBOSE"))
        printf("sizes: worst rel err out vs double %.3g, Q vs double %.3g, exact sizes %.3g\n", g_worst_ref, g_worst_q,
               g_worst_exact);
    test_exact_rank();
    test_converges();
    test_error_feedback();
    test_degenerate();
    test_determinism();
    if (getenv("DD_VERBOSE")) printf("%.2f s\n", dd_comm_wtime() - t0);
    dd_comm_free(&g_self);
    return dd_test_done("test_compress_powersgd");
}
