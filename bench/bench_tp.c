/* Tensor parallelism of one GRU layer, measured (MPI; by hand, not a test): the time of
 * one forward + backward of layer rnn.l1 (H -> H) of a 2-layer gru.
 *
 * Usage: mpirun -np P bench_tp MODE H [B [T [REPS [RS]]]]    (defaults B 16, T 200, REPS 3, RS 1)
 *   run      P = 1: the whole layer (dd_model_create; the fused recurrence where the route
 *            gives it, DD_NN_ROUTE=blas forces OpenBLAS); P > 1: a tensor-parallel shard on
 *            every rank of the world (dd_model_create_tp over a dd_tp_group: one allgather
 *            of h_t per step forward, one reduce-scatter of dL/dh per step backward, or an
 *            allreduce in its place with RS = 0, and one allreduce of dL/dx).
 *   compute  P = 1: rank 0's shard of a group of 2 whose callbacks only copy locally: the
 *            shard's arithmetic without messages and without a peer competing for the core.
 *   comm     P ranks: the layer's collectives alone (T allgathers of B H/P floats, T - 1
 *            reduce-scatters (RS 1) or allreduces of B H floats (RS 0), one allreduce of
 *            B T H floats), no arithmetic.
 * The parameters are uniform(+-1/sqrt(H)) (the orthogonal init of wide GRUs takes seconds
 * and does not change the time). Rank 0 prints one line:
 *   tp MODE H P RS median_ms min_ms comm_ms messages
 * (comm_ms and messages per forward + backward, from dd_tp_group_stats_get). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/model.h"
#include "distdpd/parallel.h"
#include "bench_util.h"

static void fill(float *v, size_t n, double k, uint64_t seed) {
    dd_rng rng;
    dd_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) v[i] = (float)((dd_rng_uniform(&rng) * 2 - 1) * k);
}

/* Median and minimum of REPS timed forward + backward runs of stage 1 (after one warm-up). */
static int time_layer(dd_comm *w, const dd_model *m, int B, int T, int reps, double *med, double *mn) {
    const int H = dd_model_cfg_get(dd_model_config(m), "hidden");
    const size_t n = dd_model_params(m)->total, na = (size_t)B * (size_t)T * (size_t)H;
    float *p = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float)), *in = calloc(na, sizeof(float));
    float *out = calloc(na, sizeof(float)), *dout = calloc(na, sizeof(float)), *din = calloc(na, sizeof(float));
    float *ws = calloc(dd_model_range_workspace(m, 1, 2, B, T), sizeof(float));
    double *t = calloc((size_t)reps + 1, sizeof(double));
    int ok = p && g && in && out && dout && din && ws && t;
    if (ok) {
        fill(p, n, 1.0 / sqrt((double)H), 1);
        fill(in, na, 0.5, 2);
        fill(dout, na, 1.0, 3);
    }
    dd_stage_src src = {p, g, NULL, NULL, NULL, NULL};
    for (int r = 0; ok && r <= reps; r++) {
        dd_comm_barrier(w);
        double t0 = dd_comm_wtime();
        ok = dd_model_range_forward(m, 1, 2, &src, in, in, out, B, T, ws) == DD_OK &&
             dd_model_range_backward(m, 1, 2, &src, in, in, dout, din, NULL, B, T, ws) == DD_OK;
        t[r] = dd_comm_wtime() - t0;
    }
    if (ok) {
        qsort(t + 1, (size_t)reps, sizeof *t, bench_cmp_d);
        *med = t[1 + reps / 2];
        *mn = t[1];
    }
    free(p), free(g), free(in), free(out), free(dout), free(din), free(ws), free(t);
    return ok;
}

/* A group of 2 seen from rank 0 whose collectives stay local (compute mode). */
static dd_status local_ar(void *u, float *b, size_t n) {
    (void)u, (void)b, (void)n;
    return DD_OK;
}

static dd_status local_ag(void *u, const float *send, float *recv, size_t n) {
    (void)u;
    memcpy(recv, send, n * sizeof(float));
    return DD_OK;
}

static dd_status local_rs(void *u, const float *send, float *recv, size_t n) {
    (void)u;
    memcpy(recv, send, n * sizeof(float));
    return DD_OK;
}

/* The collectives of one layer's forward + backward alone; median and minimum of REPS. */
static int time_comm(dd_comm *w, const dd_model_tp *tp, int H, int B, int T, int reps, double *med, double *mn) {
    const size_t U = (size_t)H / (size_t)tp->size, hb = (size_t)H * (size_t)B, bth = hb * (size_t)T;
    float *hl = calloc(U * (size_t)B, sizeof(float)), *hf = calloc(hb, sizeof(float));
    float *dx = calloc(bth, sizeof(float)), *rs = calloc(U * (size_t)B, sizeof(float));
    double *t = calloc((size_t)reps + 1, sizeof(double));
    int ok = hl && hf && dx && rs && t;
    for (int r = 0; ok && r <= reps; r++) {
        dd_comm_barrier(w);
        double t0 = dd_comm_wtime();
        for (int k = 0; ok && k < T; k++) ok = tp->allgather(tp->user, hl, hf, U * (size_t)B) == DD_OK;
        for (int k = 0; ok && k + 1 < T; k++)
            ok = (tp->reduce_scatter ? tp->reduce_scatter(tp->user, hf, rs, U * (size_t)B)
                                     : tp->allreduce(tp->user, hf, hb)) == DD_OK;
        ok = ok && tp->allreduce(tp->user, dx, bth) == DD_OK;
        t[r] = dd_comm_wtime() - t0;
    }
    if (ok) {
        qsort(t + 1, (size_t)reps, sizeof *t, bench_cmp_d);
        *med = t[1 + reps / 2];
        *mn = t[1];
    }
    free(hl), free(hf), free(dx), free(rs), free(t);
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tp run|compute|comm H [B [T [REPS [RS]]]]\n");
        return 2;
    }
    if (dd_comm_init(&argc, &argv) != DD_OK) return 1;
    dd_comm *w = NULL;
    dd_comm_world(&w);
    const char *mode = argv[1];
    const int H = atoi(argv[2]), B = argc > 3 ? atoi(argv[3]) : 16, T = argc > 4 ? atoi(argv[4]) : 200;
    const int reps = argc > 5 ? atoi(argv[5]) : 3, rs = argc > 6 ? atoi(argv[6]) : 1;
    dd_tp_group *grp = NULL;
    dd_model_tp tp;
    dd_model *m = NULL;
    dd_model_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    dd_model_cfg_set(&cfg, "hidden", H);
    dd_model_cfg_set(&cfg, "layers", 2);
    int ok = dd_tp_group_create(w, &grp) == DD_OK;
    double med = 0, mn = 0;
    if (ok) {
        dd_tp_group_model_tp(grp, &tp);
        if (!rs) tp.reduce_scatter = NULL;
        if (!strcmp(mode, "compute")) tp = (dd_model_tp){2, 0, NULL, local_ar, local_ag, rs ? local_rs : NULL};
        if (!strcmp(mode, "comm")) ok = time_comm(w, &tp, H, B, T, reps, &med, &mn);
        else ok = dd_model_create_tp("gru", &cfg, &tp, &m) == DD_OK && time_layer(w, m, B, T, reps, &med, &mn);
    }
    dd_tp_group_stats st;
    dd_tp_group_stats_get(grp, &st);
    const double per = (double)reps + 1;
    if (!ok) fprintf(stderr, "bench_tp: %s\n", dd_last_error());
    else if (dd_comm_rank(w) == 0)
        printf("tp %s %d %d %d %.2f %.2f %.2f %.0f\n", mode, H, dd_comm_size(w), rs, 1e3 * med, 1e3 * mn,
               1e3 * st.seconds / per,
               (double)(st.allreduce_calls + st.allgather_calls + st.reduce_scatter_calls) / per);
    dd_model_destroy(&m);
    dd_tp_group_destroy(&grp);
    dd_comm_free(&w);
    dd_comm_finalize();
    return ok ? 0 : 1;
}
