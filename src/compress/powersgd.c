/* PowerSGD gradient compression (Vogels, Karimireddy and Jaggi, NeurIPS 2019): a bucket
 * is reshaped into a matrix M and replaced by the rank-r approximation P P^T M found by
 * one power iteration per step, warm-started from the previous step's Q. P and Q are
 * summed over the ranks with the configured float32 allreduce (dd_cx_allreduce), so the
 * payload is (rows + cols) r floats instead of n. See docs/compress.md "PowerSGD".
 *
 * Shape: a bucket of n elements is M = rows x cols, row-major, cols = ceil(sqrt(n)),
 * rows = ceil(n / cols), the last row zero padded (padding is never written out);
 * r = min(cfg->rank, rows, cols) (rows <= cols always).
 *
 * One exchange (M_p is rank p's input, Q the shared warm start, cols x r):
 *   P   = sum_p M_p Q                     (rows x r; allreduce)
 *   P   = orthonormal columns of P        (modified Gram-Schmidt in double, identical on
 *                                          every rank since P is)
 *   Qm  = M^T P                           (cols x r; this rank's share, kept)
 *   Qn  = sum_p M_p^T P                   (allreduce of Qm)
 *   out = P Qn^T  = sum_p P P^T M_p       (same bits everywhere: own loops, fixed order)
 *   mine= P Qm^T  = P P^T M               (this rank's decompressed contribution)
 *   Q   = Qn                              (warm start of the next step)
 * Q is drawn N(0, 1) from the shared random stream on the bucket's first use, and any
 * column of Q that is all zero or not finite (e.g. after a zero bucket or a NaN) is
 * drawn again before use, so the power iteration never gets stuck at 0.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "compress/compress_impl.h"

/* A column of P whose norm after orthogonalisation against the previous columns is at
 * most this fraction of its norm before is treated as linearly dependent: set to 0. */
#define PSGD_DEP_TOL 1e-6

/* Geometry of a bucket of n > 0 elements. */
static void psgd_shape(const dd_compress_cfg *cfg, size_t n, size_t *rows, size_t *cols, size_t *r) {
    size_t c = (size_t)sqrt((double)n);
    while (c * c < n) c++;
    while (c > 1 && (c - 1) * (c - 1) >= n) c--;
    if (c == 0) c = 1;
    /* NOLINTNEXTLINE(clang-analyzer-core.DivideZero): c >= 1 (the line above) */
    size_t m = (n + c - 1) / c;
    size_t k = cfg->rank > 0 ? (size_t)cfg->rank : 1;
    if (k > m) k = m;
    if (k > c) k = c;
    *rows = m;
    *cols = c;
    *r = k;
}

static size_t psgd_shared_floats(const dd_compress_cfg *cfg, size_t n) {
    if (n == 0) return 0;
    size_t rows, cols, r;
    psgd_shape(cfg, n, &rows, &cols, &r);
    return cols * r;
}

/* Draws column k of Q (cols x r) from N(0, 1) where it must be (re)initialised: every
 * column on the first use, else columns that are all zero or hold a non-finite value.
 * Q is identical on every rank and the stream is shared, so the result is too. */
static void psgd_init_q(dd_cx *x, float *Q, size_t cols, size_t r) {
    dd_rng rng;
    int seeded = 0;
    for (size_t k = 0; k < r; k++) {
        int redraw = x->b->uses == 0;
        if (!redraw) {
            int nonzero = 0, finite = 1;
            for (size_t j = 0; j < cols; j++) {
                float v = Q[j * r + k];
                if (v != 0.0f) nonzero = 1;
                if (!isfinite(v)) finite = 0;
            }
            redraw = !nonzero || !finite;
        }
        if (!redraw) continue;
        if (!seeded) {
            dd_cx_rng(x, &rng, 1, 1);
            seeded = 1;
        }
        for (size_t j = 0; j < cols; j++) Q[j * r + k] = (float)dd_rng_normal(&rng);
    }
}

/* P = M Q (rows x r) for M = in[0..n) as rows x cols with the last row zero padded. */
static void psgd_mq(const float *in, size_t n, size_t cols, size_t r, const float *Q, float *P) {
    /* NOLINTNEXTLINE(clang-analyzer-core.DivideZero): cols >= 1 (psgd_shape) */
    size_t full = n / cols, tail = n - full * cols;
    if (full)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)full, (blasint)r, (blasint)cols, 1.0f, in,
                    (blasint)cols, Q, (blasint)r, 0.0f, P, (blasint)r);
    if (tail) {
        const float *m = in + full * cols;
        for (size_t k = 0; k < r; k++) {
            double s = 0;
            for (size_t j = 0; j < tail; j++) s += (double)m[j] * Q[j * r + k];
            P[full * r + k] = (float)s;
        }
    }
}

/* Qm = M^T P (cols x r). */
static void psgd_mtp(const float *in, size_t n, size_t cols, size_t r, const float *P, float *Qm) {
    /* NOLINTNEXTLINE(clang-analyzer-core.DivideZero): cols >= 1 (psgd_shape) */
    size_t full = n / cols, tail = n - full * cols;
    if (full)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)cols, (blasint)r, (blasint)full, 1.0f, in,
                    (blasint)cols, P, (blasint)r, 0.0f, Qm, (blasint)r);
    else
        memset(Qm, 0, cols * r * sizeof(float));
    if (tail) {
        const float *m = in + full * cols, *p = P + full * r;
        for (size_t j = 0; j < tail; j++)
            for (size_t k = 0; k < r; k++) Qm[j * r + k] += m[j] * p[k];
    }
}

/* Orthonormalises the columns of P (rows x r, row-major) in place by modified
 * Gram-Schmidt in double (W: rows * r doubles of scratch). A column that is zero, or
 * whose norm falls to <= PSGD_DEP_TOL of its norm when the previous columns are removed,
 * becomes 0. Non-finite values propagate (so that a NaN gradient is seen by the caller).
 * Deterministic: identical input gives identical output. */
static void psgd_orthonormalise(float *P, size_t rows, size_t r, double *W) {
    for (size_t i = 0; i < rows * r; i++) W[i] = P[i];
    for (size_t k = 0; k < r; k++) {
        double n0 = 0;
        for (size_t i = 0; i < rows; i++) n0 += W[i * r + k] * W[i * r + k];
        n0 = sqrt(n0);
        for (size_t j = 0; j < k; j++) {
            double d = 0;
            for (size_t i = 0; i < rows; i++) d += W[i * r + j] * W[i * r + k];
            for (size_t i = 0; i < rows; i++) W[i * r + k] -= d * W[i * r + j];
        }
        double n1 = 0;
        for (size_t i = 0; i < rows; i++) n1 += W[i * r + k] * W[i * r + k];
        n1 = sqrt(n1);
        if (n0 == 0 || n1 <= PSGD_DEP_TOL * n0) {
            for (size_t i = 0; i < rows; i++) W[i * r + k] = 0;
        } else {
            double s = 1.0 / n1;
            for (size_t i = 0; i < rows; i++) W[i * r + k] *= s;
        }
    }
    for (size_t i = 0; i < rows * r; i++) P[i] = (float)W[i];
}

/* Transposes Qx (cols x r) into T (r x cols). */
static void psgd_transpose(const float *restrict Qx, size_t cols, size_t r, float *restrict T) {
    for (size_t j = 0; j < cols; j++)
        for (size_t k = 0; k < r; k++) T[k * cols + j] = Qx[j * r + k];
}

/* One row of P Qx^T: o[j] = sum_k p[k] T[k, j] for j < len, summed in the order
 * k = 0, 1, ... in float32 (elementwise, so blocking and vectorising do not change the
 * bits: the same p and T give the same o on every rank). Blocks of 8 columns are kept in
 * registers over k, so each element is stored once. */
#define PSGD_BLK 8
static void psgd_row(const float *restrict p, const float *restrict T, size_t cols, size_t r, size_t len,
                     float *restrict o) {
    size_t j = 0;
    for (; j + PSGD_BLK <= len; j += PSGD_BLK) {
        float a[PSGD_BLK];
        for (size_t u = 0; u < PSGD_BLK; u++) a[u] = p[0] * T[j + u];
        for (size_t k = 1; k < r; k++) {
            const float pk = p[k], *tk = T + k * cols + j;
            for (size_t u = 0; u < PSGD_BLK; u++) a[u] += pk * tk[u];
        }
        for (size_t u = 0; u < PSGD_BLK; u++) o[j + u] = a[u];
    }
    for (; j < len; j++) {
        float a = p[0] * T[j];
        for (size_t k = 1; k < r; k++) a += p[k] * T[k * cols + j];
        o[j] = a;
    }
}

/* out[0..n) = P Qn^T and mine[0..n) = P Qm^T, reshaped, row by row. Tn, Tm: Qn and Qm
 * transposed (r x cols). */
static void psgd_expand(const float *P, const float *Tn, const float *Tm, size_t rows, size_t cols, size_t r,
                        size_t n, float *out, float *mine) {
    for (size_t i = 0; i < rows; i++) {
        size_t len = i + 1 < rows ? cols : n - i * cols;
        psgd_row(P + i * r, Tn, cols, r, len, out + i * cols);
        psgd_row(P + i * r, Tm, cols, r, len, mine + i * cols);
    }
}

static dd_status psgd_exchange(dd_cx *x, const float *in, size_t n, float *mine, float *out) {
    if (n == 0) return DD_OK;
    size_t rows, cols, r;
    psgd_shape(x->cfg, n, &rows, &cols, &r);
    dd_cbucket *b = x->b;
    if (!b || !b->shared || b->nshared != cols * r)
        return dd_error(DD_ERR_INTERNAL, "powersgd: bucket of %zu elements has %zu shared floats, expected %zu", n,
                        b ? b->nshared : 0, cols * r);
    float *Q = b->shared;
    float *P = dd_cx_scratch(x, 0, rows * r * sizeof(float));
    float *Qn = dd_cx_scratch(x, 1, cols * r * sizeof(float));
    float *Qm = dd_cx_scratch(x, 2, cols * r * sizeof(float));
    double *W = dd_cx_scratch(x, 3, rows * r * sizeof(double));
    float *Tn = dd_cx_scratch(x, 4, cols * r * sizeof(float));
    float *Tm = dd_cx_scratch(x, 5, cols * r * sizeof(float));
    if (!P || !Qn || !Qm || !W || !Tn || !Tm) return DD_ERR_NOMEM;

    double t0 = dd_cx_now();
    psgd_init_q(x, Q, cols, r);
    psgd_mq(in, n, cols, r, Q, P);
    x->compress_s += dd_cx_now() - t0;
    DD_TRY(dd_cx_allreduce(x, P, rows * r));

    t0 = dd_cx_now();
    psgd_orthonormalise(P, rows, r, W);
    psgd_mtp(in, n, cols, r, P, Qm);
    memcpy(Qn, Qm, cols * r * sizeof(float));
    x->compress_s += dd_cx_now() - t0;
    DD_TRY(dd_cx_allreduce(x, Qn, cols * r));

    t0 = dd_cx_now();
    psgd_transpose(Qn, cols, r, Tn);
    psgd_transpose(Qm, cols, r, Tm);
    psgd_expand(P, Tn, Tm, rows, cols, r, n, out, mine);
    memcpy(Q, Qn, cols * r * sizeof(float));
    x->decompress_s += dd_cx_now() - t0;
    x->payload_bytes += 4 * (uint64_t)(rows + cols) * r;
    return DD_OK;
}

DD_CODEC_DEFINE(powersgd,
                .summary = "rank-r approximation P Q^T of the bucket as a matrix, one warm-started power iteration "
                           "per step; P, Q by allreduce",
                .lossy = 1,
                .shared_floats = psgd_shared_floats,
                .exchange = psgd_exchange);
