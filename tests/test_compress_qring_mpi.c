/* MPI tests of the quantised ring (src/compress/qring.c) and the ring codecs of quant.c
 * (ctest runs this at 1, 2, 3 and 4 ranks; by hand:
 * mpiexec --oversubscribe -np 3 build/test_compress_qring_mpi).
 *
 * fp32 (identity codec) through dd_cx_qring and through dd_compress_exchange("fp32") is
 * bit-identical to dd_comm_allreduce(RING) of the same data at lengths 0, 1, p-1, p,
 * 1000, 100003, and sends the same bytes. For fp16, bf16, int8, int4 (nearest and
 * stochastic) and sign: out is identical on every rank (allgathered, memcmp), mine is
 * the rank's own round trip, the accounting matches the block layout, the final
 * encoding is visible in out (fp16/bf16 values representable; sign: one magnitude per
 * chunk of each block), and |out - sum over ranks of mine| stays within the bound of
 * docs/compress.md ("Error bound of the ring"): with M = max over ranks and elements of |mine|, a block passes
 * p encodings (the first sender's mine, p-2 partial sums, the owner's final sum); the
 * k-th encodes values of magnitude at most A_k = k M + E_{k-1} and adds at most
 * d A_k + a (d: relative step, a: absolute floor) plus one float32 addition 2^-24 A_k:
 *   E_0 = 0, E_k = E_{k-1} + (d + 2^-24) A_k + a,   bound = E_p
 * with d = (1/2)/127 (int8), (1/2)/7 (int4), 1/127 and 1/7 for stochastic rounding,
 * 2^-11 (fp16, a = 2^-25), 2^-8 (bf16, a = 2^-134); sign: |out|, |sum| <= p M, so 2 p M.
 * One rank: out == mine exactly. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "compress/compress_impl.h"
#include "dd_test.h"
#include "test_mpi_util.h"
#include "distdpd/comm.h"
#include "distdpd/compress.h"

static int g_rank, g_size;

static void fill(float *x, size_t n, int r, uint64_t key) {
    dd_rng g;
    dd_rng_seed(&g, dd_hash64(key, (uint64_t)r + 1));
    for (size_t i = 0; i < n; i++) x[i] = (float)(2 * dd_rng_uniform(&g) - 1);
}

static size_t block_len(size_t n, int p, int b) { return n / (size_t)p + ((size_t)b < n % (size_t)p ? 1 : 0); }
static size_t block_off(size_t n, int p, int b) {
    size_t o = 0;
    for (int i = 0; i < b; i++) o += block_len(n, p, i);
    return o;
}

/* Bytes a rank sends in the quantised ring: every block but its own in the
 * reduce-scatter, every block but its right neighbour's in the allgather. */
static uint64_t expect_sent(const dd_qcodec *q, const dd_compress_cfg *cfg, size_t n, int p, int r) {
    if (p < 2 || n == 0) return 0;
    uint64_t s = 0;
    for (int b = 0; b < p; b++) {
        const uint64_t by = q->bytes(cfg, block_len(n, p, b));
        if (b != r) s += by;
        if (b != (r + 1) % p) s += by;
    }
    return s;
}

/* A hand-made exchange context (the compressor only provides scratch). */
static void make_cx(dd_cx *x, const dd_compress_cfg *cfg, dd_comm *c, dd_cbucket *b, dd_compressor *owner,
                    uint64_t step, size_t n) {
    memset(x, 0, sizeof *x);
    memset(b, 0, sizeof *b);
    b->lo = 0;
    b->n = n;
    x->cfg = cfg;
    x->comm = c;
    x->algo = DD_ALLREDUCE_RING;
    x->rank = dd_comm_rank(c);
    x->size = dd_comm_size(c);
    x->step = step;
    x->density = 1.0;
    x->b = b;
    x->owner = owner;
}

/* ---------------------------------------------------------------- fp32 == ring */

static void test_identity(dd_comm *c, size_t n) {
    const size_t nn = n ? n : 1;
    float *in = malloc(nn * 4), *mine = malloc(nn * 4), *out = malloc(nn * 4), *ref = malloc(nn * 4),
          *g = malloc(nn * 4);
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    CHECK_OK(dd_compress_parse(&cfg, "fp32"));
    dd_compressor *cp = NULL;
    CHECK_OK(dd_compress_create(&cfg, &cp));
    if (!in || !mine || !out || !ref || !g || !cp) {
        CHECK(0, "out of memory");
        goto done;
    }
    fill(in, n, g_rank, 1000 + n);
    memcpy(ref, in, n * 4);
    dd_comm_stats a, b;
    dd_comm_stats_get(c, &a);
    CHECK_OK(dd_comm_allreduce(c, DD_ALLREDUCE_RING, n ? ref : NULL, n, DD_F32));
    dd_comm_stats_get(c, &b);
    const uint64_t ring_sent = b.bytes_sent - a.bytes_sent;

    dd_cx x;
    dd_cbucket bk;
    make_cx(&x, &cfg, c, &bk, cp, 0, n);
    CHECK_OK(dd_cx_qring(&x, &dd_qcodec_fp32, in, n, mine, out));
    CHECK(memcmp(mine, in, n * 4) == 0, "fp32 n=%zu: mine != in", n);
    CHECK(tm_all_ok(c, memcmp(out, ref, n * 4) == 0), "fp32 qring n=%zu differs from the ring allreduce", n);
    CHECK(x.payload_bytes == 4 * n, "fp32 n=%zu: payload %llu", n, (unsigned long long)x.payload_bytes);
    CHECK(x.bytes_sent == ring_sent && x.bytes_sent == expect_sent(&dd_qcodec_fp32, &cfg, n, g_size, g_rank),
          "fp32 n=%zu: sent %llu, ring allreduce %llu", n, (unsigned long long)x.bytes_sent,
          (unsigned long long)ring_sent);

    /* the public API: grads overwritten with the ring sum, no residual */
    memcpy(g, in, n * 4);
    dd_compress_begin_step(cp, 0, 0, 0.0);
    CHECK_OK(dd_compress_exchange(cp, c, DD_ALLREDUCE_TREE, n ? g : NULL, 0, n));
    CHECK(tm_all_ok(c, memcmp(g, ref, n * 4) == 0), "dd_compress_exchange(fp32) n=%zu differs from the ring allreduce", n);
    CHECK(dd_compress_residual(cp, NULL) == NULL, "fp32 keeps no residual");

    /* "none": the configured allreduce (tree here), untouched by the ring */
    {
        dd_compress_cfg cn;
        dd_compress_cfg_default(&cn);
        dd_compressor *np = NULL;
        CHECK_OK(dd_compress_create(&cn, &np));
        memcpy(ref, in, n * 4);
        memcpy(g, in, n * 4);
        CHECK_OK(dd_comm_allreduce(c, DD_ALLREDUCE_TREE, n ? ref : NULL, n, DD_F32));
        if (np) {
            dd_compress_begin_step(np, 0, 0, 0.0);
            CHECK_OK(dd_compress_exchange(np, c, DD_ALLREDUCE_TREE, n ? g : NULL, 0, n));
            CHECK(tm_all_ok(c, memcmp(g, ref, n * 4) == 0), "none n=%zu differs from the tree allreduce", n);
            dd_compress_stats st;
            dd_compress_stats_get(np, &st);
            CHECK(st.payload_bytes == 4 * n, "none n=%zu: payload %llu", n, (unsigned long long)st.payload_bytes);
        }
        dd_compress_destroy(&np);
    }
done:
    dd_compress_destroy(&cp);
    free(in);
    free(mine);
    free(out);
    free(ref);
    free(g);
}

/* ---------------------------------------------------------------- lossy codecs */

typedef struct {
    const char *spec;
    const dd_qcodec *q;
    double d, a;  /* relative step and absolute floor of one encoding */
    int kind;     /* 0 int, 1 fp16, 2 bf16, 3 sign */
} lossy_case;

static double g_worst[16], g_bound[16]; /* largest |out - sum| / M and bound / M per case */

static void test_lossy(dd_comm *c, const lossy_case *lc, int ci, size_t n) {
    const int p = g_size, r = g_rank;
    const size_t nn = n ? n : 1;
    float *in = malloc(nn * 4), *mine = malloc(nn * 4), *out = malloc(nn * 4), *out2 = malloc(nn * 4);
    float *allmine = malloc(nn * 4 * (size_t)p);
    uint8_t *enc = NULL;
    dd_compress_cfg cfg;
    dd_compress_cfg_default(&cfg);
    CHECK_OK(dd_compress_parse(&cfg, lc->spec));
    dd_compressor *cp = NULL;
    CHECK_OK(dd_compress_create(&cfg, &cp));
    enc = malloc(lc->q->bytes(&cfg, nn) + 1);
    if (!in || !mine || !out || !out2 || !allmine || !enc || !cp) {
        CHECK(0, "out of memory");
        goto done;
    }
    fill(in, n, r, 2000 + n + 17 * (size_t)ci);
    /* ranks contribute different magnitudes; a zero stretch */
    for (size_t i = 0; i < n; i++) in[i] *= (float)(1 + r);
    for (size_t i = n / 3; i < n / 3 + n / 10; i++) in[i] = 0.0f;

    dd_cx x;
    dd_cbucket bk;
    make_cx(&x, &cfg, c, &bk, cp, 3, n);
    CHECK_OK(dd_cx_qring(&x, lc->q, in, n, mine, out));

    /* mine is this rank's round trip (nearest: no randomness involved) */
    if (!cfg.stochastic) {
        float *rt = malloc(nn * 4);
        if (rt) {
            lc->q->enc(&cfg, in, n, enc, NULL);
            lc->q->dec(&cfg, enc, n, rt);
            CHECK(memcmp(rt, mine, n * 4) == 0, "%s n=%zu: mine != dec(enc(in))", lc->spec, n);
            free(rt);
        }
    }
    CHECK(tm_same_bytes(c, out, n * 4), "%s n=%zu: out differs between ranks", lc->spec, n);
    CHECK(x.payload_bytes == lc->q->bytes(&cfg, n), "%s n=%zu: payload %llu bytes", lc->spec, n,
          (unsigned long long)x.payload_bytes);
    CHECK(x.bytes_sent == expect_sent(lc->q, &cfg, n, p, r), "%s n=%zu: sent %llu bytes, expected %llu", lc->spec, n,
          (unsigned long long)x.bytes_sent, (unsigned long long)expect_sent(lc->q, &cfg, n, p, r));

    /* the same call again (same step, same data): the same bits */
    make_cx(&x, &cfg, c, &bk, cp, 3, n);
    CHECK_OK(dd_cx_qring(&x, lc->q, in, n, mine, out2));
    CHECK(memcmp(out, out2, n * 4) == 0, "%s n=%zu: not deterministic", lc->spec, n);

    /* the bound against the exact sum of every rank's mine */
    CHECK_OK(dd_comm_allgather(c, mine, n * 4, allmine));
    double M = 0;
    for (size_t i = 0; i < n * (size_t)p; i++) M = fmax(M, fabs((double)allmine[i]));
    double bound = 0;
    if (p == 1) {
        bound = 0;
    } else if (lc->kind == 3) {
        bound = 2.0 * p * M;
    } else {
        double E = 0;
        for (int k = 1; k <= p; k++) {
            const double A = k * M + E;
            E += (lc->d + 0x1p-24) * A + lc->a;
        }
        bound = E * (1 + 1e-6);
    }
    size_t bad = 0, badstruct = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double t = 0;
        for (int q = 0; q < p; q++) t += allmine[(size_t)q * n + i];
        const double e = fabs((double)out[i] - t);
        if (p == 1 ? memcmp(&out[i], &mine[i], 4) != 0 : !(e <= bound)) bad++;
        if (e > worst) worst = e;
        if (lc->kind == 1 && dd_f16_to_f32(dd_f32_to_f16(out[i])) != out[i]) badstruct++;
        if (lc->kind == 2 && dd_bf16_to_f32(dd_f32_to_bf16(out[i])) != out[i]) badstruct++;
    }
    if (lc->kind == 3) { /* sign: one magnitude per chunk of every block's final encoding */
        for (int b = 0; b < p; b++) {
            const size_t o = block_off(n, p, b), len = block_len(n, p, b);
            for (size_t i0 = 0; i0 < len; i0 += cfg.chunk)
                for (size_t i = i0; i < len && i < i0 + cfg.chunk; i++)
                    if (fabsf(out[o + i]) != fabsf(out[o + i0])) badstruct++;
        }
    }
    if (M > 0 && worst / M > g_worst[ci]) g_worst[ci] = worst / M;
    if (M > 0 && bound / M > g_bound[ci]) g_bound[ci] = bound / M;
    CHECK(bad == 0, "%s n=%zu p=%d: %zu elements off the sum by more than %.4g (M = %.4g, worst %.4g)", lc->spec, n, p,
          bad, bound, M, worst);
    CHECK(badstruct == 0, "%s n=%zu: %zu outputs lack the final encoding's structure", lc->spec, n, badstruct);

    /* through the public API: the same on every rank, residual = in - mine */
    if (n == 1000) {
        memcpy(out2, in, n * 4);
        dd_compress_begin_step(cp, 0, 0, 0.0);
        CHECK_OK(dd_compress_exchange(cp, c, DD_ALLREDUCE_RING, out2, 0, n));
        CHECK(tm_same_bytes(c, out2, n * 4), "dd_compress_exchange(%s): out differs between ranks", lc->spec);
        const float *res = dd_compress_residual(cp, NULL);
        CHECK(res != NULL, "%s: residual kept", lc->spec);
    }
done:
    dd_compress_destroy(&cp);
    free(in);
    free(mine);
    free(out);
    free(out2);
    free(allmine);
    free(enc);
}

int main(int argc, char **argv) {
    CHECK_OK(dd_comm_init(&argc, &argv));
    dd_comm *w = NULL;
    CHECK_OK(dd_comm_world(&w));
    if (!w) return dd_test_done("test_compress_qring_mpi");
    g_rank = dd_comm_rank(w);
    g_size = dd_comm_size(w);
    const char *np = getenv("DD_TEST_NP");
    if (np) CHECK(g_size == atoi(np), "size %d, DD_TEST_NP %s", g_size, np);
    double t0 = dd_comm_wtime();
    const size_t p = (size_t)g_size;

    const size_t lens[] = {0, 1, p - 1, p, p + 1, 1000, 100003};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) test_identity(w, lens[i]);

    const lossy_case cases[] = {
        {"fp16", &dd_qcodec_fp16, 0x1p-11, 0x1p-25, 1},
        {"bf16", &dd_qcodec_bf16, 0x1p-8, 0x1p-134, 2},
        {"int8,chunk=64", &dd_qcodec_int8, 0.5 * (1 + 1e-4) / 127, 0, 0},
        {"int8", &dd_qcodec_int8, 0.5 * (1 + 1e-4) / 127, 0, 0},
        {"int4,chunk=50", &dd_qcodec_int4, 0.5 * (1 + 1e-4) / 7, 0, 0},
        {"int8,chunk=64,stochastic=1", &dd_qcodec_int8, (1 + 1e-4) / 127, 0, 0},
        {"int4,chunk=7,stochastic=1", &dd_qcodec_int4, (1 + 1e-4) / 7, 0, 0},
        {"sign,chunk=32", &dd_qcodec_sign, 0, 0, 3},
    };
    const size_t llens[] = {1, p - 1, p + 1, 1000, 100003};
    const int ncases = (int)(sizeof cases / sizeof *cases);
    for (int ci = 0; ci < ncases; ci++)
        for (size_t i = 0; i < sizeof llens / sizeof *llens; i++) test_lossy(w, &cases[ci], ci, llens[i]);

    int ok = tm_all_ok(w, dd_t_fail == 0);
    if (g_rank == 0) {
        for (int ci = 0; ci < ncases; ci++)
            printf("%-28s worst |out - sum of mine| / max|mine| = %.3g (bound %.3g) at %d ranks\n", cases[ci].spec,
                   g_worst[ci], g_bound[ci], g_size);
        printf("test_compress_qring_mpi: %d ranks, %.2f s, all ranks %s\n", g_size, dd_comm_wtime() - t0,
               ok ? "passed" : "NOT all passed");
    }
    dd_comm_free(&w);
    CHECK_OK(dd_comm_finalize());
    if (!ok && dd_t_fail == 0) dd_t_fail = 1;
    return dd_test_done("test_compress_qring_mpi");
}
