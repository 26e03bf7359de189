/* Tensor-parallel shards of the GRU and LSTM layers (nn.h, "Tensor-parallel shards"):
 * every step computes the shard's units from the whole h_{t-1} and exchanges h_t through
 * the group's allgather; backward reduce-scatters the partial sums of dL/dh_{t-1}. Same
 * feature-major / time-major-column layout as gru_impl.h and lstm_impl.h (column
 * c = t*B + b), with U of the H units in the gate rows; the GEMMs are OpenBLAS's and the
 * elementwise cell code is the whole layers' (cells.c). Float32 only. */
#include <string.h>

#include "distdpd/nn.h"
#include "nn_private.h"
#include "simd.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"

dd_status dd_rnn_shard_layer_add(dd_param_table *t, const char *prefix, int layer, int gates, int input_size,
                                 int hidden_size, int shards, int bias, dd_rnn_shard_layer *l) {
    const char *kind = gates == 4 ? "LSTM" : "GRU";
    memset(l, 0, sizeof *l);
    if (gates != 3 && gates != 4) return dd_error(DD_ERR_ARG, "recurrent shard: %d gates (3 or 4)", gates);
    if (shards < 1 || hidden_size < 1 || hidden_size % shards)
        return dd_error(DD_ERR_ARG, "%s layer '%s': %d shards do not divide hidden_size %d", kind,
                        prefix ? prefix : "", shards, hidden_size);
    const int U = hidden_size / shards;
    size_t off[4] = {0, 0, 0, 0};
    DD_TRY(dd_nn_rnn_tensors_add(t, prefix, kind, layer, (size_t)gates * (size_t)U, input_size, hidden_size, bias,
                                 off));
    *l = (dd_rnn_shard_layer){input_size, hidden_size, U, gates, bias ? 1 : 0, off[0], off[1], off[2], off[3]};
    return DD_OK;
}

/* ---- shared pieces ---- */

/* Sizes of one call: B, T, D, H, U, TB and the first unit of this shard. */
typedef struct {
    size_t B, T, D, H, U, TB, own;
} shard_dims;

static shard_dims dims_of(const dd_tp_ops *tp, int B, int T, int D, int H) {
    shard_dims d;
    d.B = (size_t)B, d.T = (size_t)T, d.D = (size_t)D, d.H = (size_t)H;
    d.U = d.H / (size_t)tp->size;
    d.TB = d.T * d.B;
    d.own = (size_t)tp->rank * d.U;
    return d;
}

/* The whole h_t (H x B, feature-major, from the allgather) into hprev's column block
 * t + 1 (when there is a next step) and into out (B, T, H). */
static void store_h(const shard_dims *d, const float *hf, float *hprev, float *out, size_t t) {
    for (size_t j = 0; j < d->H; j++) {
        const float *h = hf + j * d->B;
        if (t + 1 < d->T) memcpy(hprev + j * d->TB + (t + 1) * d->B, h, d->B * sizeof(float));
        for (size_t b = 0; b < d->B; b++) out[(b * d->T + t) * d->H + j] = h[b];
    }
}

/* hprev's column block 0 = h0 (B, H) or zeros. */
static void load_h0(const shard_dims *d, const float *h0, float *hprev) {
    for (size_t j = 0; j < d->H; j++)
        for (size_t b = 0; b < d->B; b++) hprev[j * d->TB + b] = h0 ? h0[b * d->H + j] : 0.0f;
}

/* dl (U x B) += this shard's units of dout at step t. */
static void add_dout(const shard_dims *d, float *dl, const float *dout, size_t t) {
    for (size_t j = 0; j < d->U; j++)
        for (size_t b = 0; b < d->B; b++) dl[j * d->B + b] += dout[(b * d->T + t) * d->H + d->own + j];
}

/* The sum over the group of part (H x B) restricted to this shard's rows -> *mine (U x B):
 * a reduce-scatter into rs, or an allreduce of part in place when the group has none. */
static dd_status sum_own_rows(const dd_tp_ops *tp, const shard_dims *d, float *part, float *rs, const float **mine) {
    const size_t n = d->U * d->B;
    if (tp->reduce_scatter) {
        *mine = rs;
        return tp->reduce_scatter(tp->user, part, rs, n);
    }
    *mine = part + d->own * d->B;
    return tp->allreduce(tp->user, part, d->H * d->B);
}

/* dx (B, T, D) += the group's sum of dxtm (TB x D, time-major; summed in place). */
static dd_status add_dx(const dd_tp_ops *tp, const shard_dims *d, float *dxtm, float *dx) {
    DD_TRY(tp->allreduce(tp->user, dxtm, d->TB * d->D));
    for (size_t b = 0; b < d->B; b++)
        for (size_t t = 0; t < d->T; t++) {
            const float *src = dxtm + (t * d->B + b) * d->D;
            float *dst = dx + (b * d->T + t) * d->D;
            for (size_t k = 0; k < d->D; k++) dst[k] += src[k];
        }
    return DD_OK;
}

/* ---- GRU shard. Workspace, in floats (gru_impl.h's with U gate units):
 *   xfm    D x TB    the input, feature-major                          saved
 *   hprev  H x TB    the whole h_{t-1} seen by step t                   saved
 *   gates  4U x TB   rows [r, z, n, hn] of this shard's units          saved
 *   dG     4U x TB   rows [da_r, da_z, da_n r, da_n]                   backward
 *   dxtm   TB x D    partial dL/dx, time-major                         backward
 *   S      3U x B    W_hh h_{t-1} + b_hh of the step                   forward
 *   hl     U x B     this shard's units of h_t (dL/dh_t backward)      both
 *   hf     H x B     the whole h_t (partial dL/dh_{t-1} backward)      both
 *   rs     U x B     the reduce-scatter's result                       backward ---- */

typedef struct {
    float *xfm, *hprev, *gates, *dG, *dxtm, *S, *hl, *hf, *rs;
} gru_sws;

static size_t gru_layout(const shard_dims *d, float *ws, gru_sws *w) {
    const size_t TB = d->TB, B = d->B, U = d->U;
    size_t o = 0;
    float *p[9];
    const size_t len[9] = {d->D * TB, d->H * TB, 4 * U * TB, 4 * U * TB, TB * d->D, 3 * U * B, U * B, d->H * B, U * B};
    for (int i = 0; i < 9; i++) {
        p[i] = ws ? ws + o : NULL;
        o += len[i];
    }
    *w = (gru_sws){p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]};
    return o;
}

size_t dd_gru_shard_workspace_size(int B, int T, int D, int H, int U) {
    shard_dims d = {(size_t)B, (size_t)T, (size_t)D, (size_t)H, (size_t)U, (size_t)B * (size_t)T, 0};
    gru_sws w;
    return gru_layout(&d, NULL, &w);
}

/* Step t of the forward: this shard's gates and units of h_t (into w->hl). */
static void gru_step(const shard_dims *d, const gru_sws *w, const float *w_hh, const float *b_hh, size_t t) {
    const size_t B = d->B, U = d->U, TB = d->TB, c0 = t * B;
    float *gates = w->gates, *S = w->S;
    if (b_hh)
        for (size_t j = 0; j < 3 * U; j++)
            for (size_t b = 0; b < B; b++) S[j * B + b] = b_hh[j];
    dd_nn_gemm(0, 0, 3 * U, B, d->H, 1, w_hh, d->H, w->hprev + c0, TB, b_hh ? 1 : 0, S, B);
    for (size_t j = 0; j < 2 * U; j++) dd_nn_add_sigmoid(gates + j * TB + c0, S + j * B, B);
    for (size_t j = 0; j < U; j++)
        dd_nn_gru_n(gates + (2 * U + j) * TB + c0, gates + (3 * U + j) * TB + c0, gates + j * TB + c0,
                    S + (2 * U + j) * B, B);
    for (size_t j = 0; j < U; j++)
        dd_nn_gru_h(w->hl + j * B, gates + (U + j) * TB + c0, gates + (2 * U + j) * TB + c0,
                    w->hprev + (d->own + j) * TB + c0, B);
}

dd_status dd_gru_shard_forward(const dd_tp_ops *tp, float *out, float *ws, const float *x, const float *h0,
                               const float *w_ih, const float *w_hh, const float *b_ih, const float *b_hh, int B,
                               int T, int D, int H) {
    const shard_dims d = dims_of(tp, B, T, D, H);
    gru_sws w;
    gru_layout(&d, ws, &w);
    dd_nn_bth_to_fm(w.xfm, d.TB, x, d.B, d.T, d.D);
    load_h0(&d, h0, w.hprev);
    /* input projection of every step at once: gates[0:3U] = b_ih + W_ih xfm */
    if (b_ih)
        for (size_t j = 0; j < 3 * d.U; j++)
            for (size_t c = 0; c < d.TB; c++) w.gates[j * d.TB + c] = b_ih[j];
    dd_nn_gemm(0, 0, 3 * d.U, d.TB, d.D, 1, w_ih, d.D, w.xfm, d.TB, b_ih ? 1 : 0, w.gates, d.TB);
    for (size_t t = 0; t < d.T; t++) {
        gru_step(&d, &w, w_hh, b_hh, t);
        DD_TRY(tp->allgather(tp->user, w.hl, w.hf, d.U * d.B));
        store_h(&d, w.hf, w.hprev, out, t);
    }
    return DD_OK;
}

/* Backward through time: dG of every step; w->hl carries dL/dh_t of this shard's units. */
static dd_status gru_bptt(const dd_tp_ops *tp, const shard_dims *d, const gru_sws *w, const float *dout,
                          const float *w_hh) {
    const size_t B = d->B, U = d->U, TB = d->TB;
    float *dl = w->hl, *dG = w->dG;
    const float *gates = w->gates;
    memset(dl, 0, U * B * sizeof(float));
    for (size_t t = d->T; t-- > 0;) {
        const size_t c0 = t * B;
        add_dout(d, dl, dout, t);
        for (size_t j = 0; j < U; j++)
            dd_nn_gru_bwd(dG + j * TB + c0, dG + (U + j) * TB + c0, dG + (2 * U + j) * TB + c0,
                          dG + (3 * U + j) * TB + c0, dl + j * B, gates + j * TB + c0, gates + (U + j) * TB + c0,
                          gates + (2 * U + j) * TB + c0, gates + (3 * U + j) * TB + c0,
                          w->hprev + (d->own + j) * TB + c0, B);
        if (t == 0) break;
        /* dL/dh_{t-1} = dl z (own units) + sum over the group of W_hh^T [da_r, da_z, da_n r] */
        const float *mine = NULL;
        dd_nn_gemm(1, 0, d->H, B, 3 * U, 1, w_hh, d->H, dG + c0, TB, 0, w->hf, B);
        DD_TRY(sum_own_rows(tp, d, w->hf, w->rs, &mine));
        dd_add_forward(dl, dl, mine, U * B);
    }
    return DD_OK;
}

dd_status dd_gru_shard_backward(const dd_tp_ops *tp, float *dx, float *dw_ih, float *dw_hh, float *db_ih,
                                float *db_hh, const float *dout, float *ws, const float *w_ih, const float *w_hh,
                                int B, int T, int D, int H) {
    const shard_dims d = dims_of(tp, B, T, D, H);
    const size_t U = d.U, TB = d.TB;
    gru_sws w;
    gru_layout(&d, ws, &w);
    DD_TRY(gru_bptt(tp, &d, &w, dout, w_hh));
    if (dx) {
        /* the input gradient reads rows [da_r, da_z] and da_n (not da_n r) */
        dd_nn_gemm(1, 0, TB, d.D, 2 * U, 1, w.dG, TB, w_ih, d.D, 0, w.dxtm, d.D);
        dd_nn_gemm(1, 0, TB, d.D, U, 1, w.dG + 3 * U * TB, TB, w_ih + 2 * U * d.D, d.D, 1, w.dxtm, d.D);
        DD_TRY(add_dx(tp, &d, w.dxtm, dx));
    }
    if (dw_ih) {
        dd_nn_gemm(0, 1, 2 * U, d.D, TB, 1, w.dG, TB, w.xfm, TB, 1, dw_ih, d.D);
        dd_nn_gemm(0, 1, U, d.D, TB, 1, w.dG + 3 * U * TB, TB, w.xfm, TB, 1, dw_ih + 2 * U * d.D, d.D);
    }
    if (dw_hh) dd_nn_gemm(0, 1, 3 * U, d.H, TB, 1, w.dG, TB, w.hprev, TB, 1, dw_hh, d.H);
    if (db_ih) {
        dd_nn_rowsum_add(db_ih, w.dG, 2 * U, TB, TB);
        dd_nn_rowsum_add(db_ih + 2 * U, w.dG + 3 * U * TB, U, TB, TB);
    }
    if (db_hh) dd_nn_rowsum_add(db_hh, w.dG, 3 * U, TB, TB);
    return DD_OK;
}

/* ---- LSTM shard. Workspace, in floats (lstm_impl.h's with U gate units):
 *   xtm    TB x D    the input, time-major                             saved
 *   hprev  H x TB    the whole h_{t-1} seen by step t                   saved
 *   cprev  U x TB    this shard's units of c_{t-1}                     saved
 *   gates  5U x TB   rows [i, f, g, o, tanh(c_t)]                      saved
 *   dG     4U x TB   rows [da_i, da_f, da_g, da_o]                     backward
 *   dxtm   TB x D    partial dL/dx, time-major                         backward
 *   hl, c  U x B     this shard's h_t, c_t (backward: dL/dh_t, dL/dc_t) both
 *   hf     H x B     the whole h_t (partial dL/dh_{t-1} backward)      both
 *   rs     U x B     the reduce-scatter's result                       backward ---- */

typedef struct {
    float *xtm, *hprev, *cprev, *gates, *dG, *dxtm, *hl, *c, *hf, *rs;
} lstm_sws;

static size_t lstm_layout(const shard_dims *d, float *ws, lstm_sws *w) {
    const size_t TB = d->TB, B = d->B, U = d->U;
    size_t o = 0;
    float *p[10];
    const size_t len[10] = {TB * d->D, d->H * TB, U * TB, 5 * U * TB, 4 * U * TB,
                            TB * d->D, U * B,     U * B,  d->H * B,   U * B};
    for (int i = 0; i < 10; i++) {
        p[i] = ws ? ws + o : NULL;
        o += len[i];
    }
    *w = (lstm_sws){p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
    return o;
}

size_t dd_lstm_shard_workspace_size(int B, int T, int D, int H, int U) {
    shard_dims d = {(size_t)B, (size_t)T, (size_t)D, (size_t)H, (size_t)U, (size_t)B * (size_t)T, 0};
    lstm_sws w;
    return lstm_layout(&d, NULL, &w);
}

/* Step t of the forward: this shard's gates, c_t (into w->c, and cprev's next block) and
 * units of h_t (into w->hl). */
static void lstm_step(const shard_dims *d, const lstm_sws *w, const float *w_hh, size_t t) {
    const size_t B = d->B, U = d->U, TB = d->TB, col = t * B;
    float *gates = w->gates;
    dd_nn_gemm(0, 0, 4 * U, B, d->H, 1, w_hh, d->H, w->hprev + col, TB, 1, gates + col, TB);
    for (size_t j = 0; j < 2 * U; j++) dd_nn_vsigmoid(gates + j * TB + col, B);     /* i, f */
    for (size_t j = 2 * U; j < 3 * U; j++) dd_nn_vtanh(gates + j * TB + col, B);    /* g */
    for (size_t j = 3 * U; j < 4 * U; j++) dd_nn_vsigmoid(gates + j * TB + col, B); /* o */
    for (size_t j = 0; j < U; j++) {
        float *c = w->c + j * B, *tc = gates + (4 * U + j) * TB + col;
        dd_nn_lstm_c(c, tc, gates + j * TB + col, gates + (U + j) * TB + col, gates + (2 * U + j) * TB + col,
                     w->cprev + j * TB + col, B);
        dd_nn_lstm_h(w->hl + j * B, gates + (3 * U + j) * TB + col, tc, B);
        if (t + 1 < d->T) memcpy(w->cprev + j * TB + col + B, c, B * sizeof(float));
    }
}

dd_status dd_lstm_shard_forward(const dd_tp_ops *tp, float *out, float *cn, float *ws, const float *x,
                                const float *h0, const float *c0, const float *w_ih, const float *w_hh,
                                const float *b_ih, const float *b_hh, int B, int T, int D, int H) {
    const shard_dims d = dims_of(tp, B, T, D, H);
    const size_t U = d.U, TB = d.TB;
    lstm_sws w;
    lstm_layout(&d, ws, &w);
    for (size_t b = 0; b < d.B; b++)
        for (size_t t = 0; t < d.T; t++)
            memcpy(w.xtm + (t * d.B + b) * d.D, x + (b * d.T + t) * d.D, d.D * sizeof(float));
    for (size_t j = 0; j < 4 * U; j++) {
        const float bias = (b_ih ? b_ih[j] : 0.0f) + (b_hh ? b_hh[j] : 0.0f);
        for (size_t c = 0; c < TB; c++) w.gates[j * TB + c] = bias;
    }
    dd_nn_gemm(0, 1, 4 * U, TB, d.D, 1, w_ih, d.D, w.xtm, d.D, 1, w.gates, TB);
    load_h0(&d, h0, w.hprev);
    for (size_t j = 0; j < U; j++)
        for (size_t b = 0; b < d.B; b++) w.cprev[j * TB + b] = c0 ? c0[b * U + j] : 0.0f;
    for (size_t t = 0; t < d.T; t++) {
        lstm_step(&d, &w, w_hh, t);
        DD_TRY(tp->allgather(tp->user, w.hl, w.hf, U * d.B));
        store_h(&d, w.hf, w.hprev, out, t);
    }
    for (size_t j = 0; cn && j < U; j++)
        for (size_t b = 0; b < d.B; b++) cn[b * U + j] = w.c[j * d.B + b];
    return DD_OK;
}

/* Backward through time: dG of every step; w->hl carries dL/dh_t and w->c dL/dc_t of this
 * shard's units. */
static dd_status lstm_bptt(const dd_tp_ops *tp, const shard_dims *d, const lstm_sws *w, const float *dout,
                           const float *w_hh) {
    const size_t B = d->B, U = d->U, TB = d->TB;
    float *dl = w->hl, *dc = w->c, *dG = w->dG;
    const float *gates = w->gates;
    memset(dl, 0, U * B * sizeof(float));
    memset(dc, 0, U * B * sizeof(float));
    for (size_t t = d->T; t-- > 0;) {
        const size_t col = t * B;
        add_dout(d, dl, dout, t);
        for (size_t j = 0; j < U; j++)
            dd_nn_lstm_bwd(dG + j * TB + col, dG + (U + j) * TB + col, dG + (2 * U + j) * TB + col,
                           dG + (3 * U + j) * TB + col, dl + j * B, dc + j * B, gates + j * TB + col,
                           gates + (U + j) * TB + col, gates + (2 * U + j) * TB + col, gates + (3 * U + j) * TB + col,
                           gates + (4 * U + j) * TB + col, w->cprev + j * TB + col, B);
        if (t == 0) break;
        /* dL/dh_{t-1} = sum over the group of W_hh^T dG_t */
        const float *mine = NULL;
        dd_nn_gemm(1, 0, d->H, B, 4 * U, 1, w_hh, d->H, dG + col, TB, 0, w->hf, B);
        DD_TRY(sum_own_rows(tp, d, w->hf, w->rs, &mine));
        memcpy(dl, mine, U * B * sizeof(float));
    }
    return DD_OK;
}

dd_status dd_lstm_shard_backward(const dd_tp_ops *tp, float *dx, float *dw_ih, float *dw_hh, float *db_ih,
                                 float *db_hh, const float *dout, float *ws, const float *w_ih, const float *w_hh,
                                 int B, int T, int D, int H) {
    const shard_dims d = dims_of(tp, B, T, D, H);
    const size_t U = d.U, TB = d.TB;
    lstm_sws w;
    lstm_layout(&d, ws, &w);
    DD_TRY(lstm_bptt(tp, &d, &w, dout, w_hh));
    if (dx) {
        dd_nn_gemm(1, 0, TB, d.D, 4 * U, 1, w.dG, TB, w_ih, d.D, 0, w.dxtm, d.D);
        DD_TRY(add_dx(tp, &d, w.dxtm, dx));
    }
    if (dw_ih) dd_nn_gemm(0, 0, 4 * U, d.D, TB, 1, w.dG, TB, w.xtm, d.D, 1, dw_ih, d.D);
    if (dw_hh) dd_nn_gemm(0, 1, 4 * U, d.H, TB, 1, w.dG, TB, w.hprev, TB, 1, dw_hh, d.H);
    if (db_ih) dd_nn_rowsum_add(db_ih, w.dG, 4 * U, TB, TB);
    if (db_hh) dd_nn_rowsum_add(db_hh, w.dG, 4 * U, TB, TB);
    return DD_OK;
}
