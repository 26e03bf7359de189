/* LSTM kernels (PyTorch equations, gate order i, f, g, o), written once for dd_real (see
 * nn_real.h); included by lstm.c for float and double.
 *
 * Same feature-major / time-major-column layout as the GRU (gru_impl.h): column
 * c = t*B + b, TB = T*B. Workspace layout, in elements:
 *   xtm    TB x D    the input in time-major row order                     saved
 *   hprev  H x TB    h_{t-1} seen by step t                                saved
 *   cprev  H x TB    c_{t-1} seen by step t                                saved
 *   gates  5H x TB   rows [i, f, g, o, tanh(c_t)] (pre-activations first)  saved
 *   dG     4H x TB   rows [da_i, da_f, da_g, da_o]                         backward
 *   dxtm   TB x D    input gradient in time-major order                    backward
 *   dh, dc H x B     running dL/dh_{t-1}, dL/dc_{t-1}; the forward uses them as h_t, c_t
 * All four gates take W_ih x + b_ih + W_hh h + b_hh, so both projections accumulate
 * straight into the gate rows. */

typedef struct {
    dd_real *xtm, *hprev, *cprev, *gates, *dG, *dxtm, *dh, *dc;
} RFN(dd_lstm_ws);

static RFN(dd_lstm_ws) RFN(dd_lstm_ws_split)(dd_real *ws, size_t B, size_t T, size_t D, size_t H) {
    RFN(dd_lstm_ws) w;
    const size_t TB = T * B;
    w.xtm = ws;
    w.hprev = w.xtm + TB * D;
    w.cprev = w.hprev + H * TB;
    w.gates = w.cprev + H * TB;
    w.dG = w.gates + 5 * H * TB;
    w.dxtm = w.dG + 4 * H * TB;
    w.dh = w.dxtm + TB * D;
    w.dc = w.dh + H * B;
    return w;
}

void RFN(dd_lstm_forward)(dd_real *out, dd_real *cn, dd_real *ws, const dd_real *x,
                          const dd_real *h0, const dd_real *c0, const dd_real *w_ih,
                          const dd_real *w_hh, const dd_real *b_ih, const dd_real *b_hh, int B_,
                          int T_, int D_, int H_) {
    const size_t B = (size_t)B_, T = (size_t)T_, D = (size_t)D_, H = (size_t)H_, TB = T * B;
    const RFN(dd_lstm_ws) w = RFN(dd_lstm_ws_split)(ws, B, T, D, H);
    dd_real *const gates = w.gates, *const hprev = w.hprev, *const cprev = w.cprev;

    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            memcpy(w.xtm + (t * B + b) * D, x + (b * T + t) * D, D * sizeof(dd_real));
    for (size_t j = 0; j < 4 * H; j++) {
        const dd_real bias = (b_ih ? b_ih[j] : 0) + (b_hh ? b_hh[j] : 0);
        for (size_t c = 0; c < TB; c++) gates[j * TB + c] = bias;
    }
    RFN(dd_nn_gemm)(0, 1, 4 * H, TB, D, 1, w_ih, D, w.xtm, D, 1, gates, TB);
    for (size_t j = 0; j < H; j++)
        for (size_t b = 0; b < B; b++) {
            hprev[j * TB + b] = h0 ? h0[b * H + j] : 0;
            cprev[j * TB + b] = c0 ? c0[b * H + j] : 0;
        }

    for (size_t t = 0; t < T; t++) {
        const size_t col = t * B;
        /* gates[0:4H, step t] += W_hh h_{t-1} */
        RFN(dd_nn_gemm)(0, 0, 4 * H, B, H, 1, w_hh, H, hprev + col, TB, 1, gates + col, TB);
        for (size_t j = 0; j < 2 * H; j++) RFN(dd_nn_vsigmoid)(gates + j * TB + col, B); /* i, f */
        for (size_t j = 2 * H; j < 3 * H; j++) RFN(dd_nn_vtanh)(gates + j * TB + col, B); /* g */
        for (size_t j = 3 * H; j < 4 * H; j++) RFN(dd_nn_vsigmoid)(gates + j * TB + col, B); /* o */
        for (size_t j = 0; j < H; j++) {
            dd_real *c = w.dc + j * B, *h = w.dh + j * B, *tc = gates + (4 * H + j) * TB + col;
            RFN(dd_nn_lstm_c)(c, tc, gates + j * TB + col, gates + (H + j) * TB + col,
                              gates + (2 * H + j) * TB + col, cprev + j * TB + col, B);
            RFN(dd_nn_lstm_h)(h, gates + (3 * H + j) * TB + col, tc, B);
            if (t + 1 < T) {
                memcpy(hprev + j * TB + col + B, h, B * sizeof(dd_real));
                memcpy(cprev + j * TB + col + B, c, B * sizeof(dd_real));
            } else if (cn) {
                for (size_t b = 0; b < B; b++) cn[b * H + j] = c[b];
            }
            for (size_t b = 0; b < B; b++) out[(b * T + t) * H + j] = h[b];
        }
    }
}

void RFN(dd_lstm_backward)(dd_real *dx, dd_real *dh0, dd_real *dc0, dd_real *dw_ih, dd_real *dw_hh,
                           dd_real *db_ih, dd_real *db_hh, const dd_real *dout, const dd_real *dcn,
                           dd_real *ws, const dd_real *x, const dd_real *w_ih, const dd_real *w_hh,
                           int B_, int T_, int D_, int H_) {
    const size_t B = (size_t)B_, T = (size_t)T_, D = (size_t)D_, H = (size_t)H_, TB = T * B;
    const RFN(dd_lstm_ws) w = RFN(dd_lstm_ws_split)(ws, B, T, D, H);
    const dd_real *const gates = w.gates, *const hprev = w.hprev, *const cprev = w.cprev;
    dd_real *const dG = w.dG, *const dh = w.dh, *const dc = w.dc;
    (void)x; /* the forward's time-major copy w.xtm is used instead */

    memset(dh, 0, H * B * sizeof(dd_real));
    for (size_t j = 0; j < H; j++)
        for (size_t b = 0; b < B; b++) dc[j * B + b] = dcn ? dcn[b * H + j] : 0;
    for (size_t t = T; t-- > 0;) {
        const size_t col = t * B;
        for (size_t j = 0; j < H; j++) {
            dd_real *d = dh + j * B;
            for (size_t b = 0; b < B; b++) d[b] += dout[(b * T + t) * H + j];
        }
        for (size_t j = 0; j < H; j++)
            RFN(dd_nn_lstm_bwd)(dG + j * TB + col, dG + (H + j) * TB + col, dG + (2 * H + j) * TB + col,
                                dG + (3 * H + j) * TB + col, dh + j * B, dc + j * B,
                                gates + j * TB + col, gates + (H + j) * TB + col,
                                gates + (2 * H + j) * TB + col, gates + (3 * H + j) * TB + col,
                                gates + (4 * H + j) * TB + col, cprev + j * TB + col, B);
        /* dh_{t-1} = W_hh^T dG_t (not needed after step 0 without dh0) */
        if (t > 0 || dh0) RFN(dd_nn_gemm)(1, 0, H, B, 4 * H, 1, w_hh, H, dG + col, TB, 0, dh, B);
    }
    if (dh0)
        for (size_t b = 0; b < B; b++)
            for (size_t j = 0; j < H; j++) dh0[b * H + j] += dh[j * B + b];
    if (dc0)
        for (size_t b = 0; b < B; b++)
            for (size_t j = 0; j < H; j++) dc0[b * H + j] += dc[j * B + b];
    if (dx) {
        RFN(dd_nn_gemm)(1, 0, TB, D, 4 * H, 1, dG, TB, w_ih, D, 0, w.dxtm, D);
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < T; t++) {
                const dd_real *src = w.dxtm + (t * B + b) * D;
                dd_real *dst = dx + (b * T + t) * D;
                for (size_t k = 0; k < D; k++) dst[k] += src[k];
            }
    }
    if (dw_ih) RFN(dd_nn_gemm)(0, 0, 4 * H, D, TB, 1, dG, TB, w.xtm, D, 1, dw_ih, D);
    if (dw_hh) RFN(dd_nn_gemm)(0, 1, 4 * H, H, TB, 1, dG, TB, hprev, TB, 1, dw_hh, H);
    if (db_ih) RFN(dd_nn_rowsum_add)(db_ih, dG, 4 * H, TB, TB);
    if (db_hh) RFN(dd_nn_rowsum_add)(db_hh, dG, 4 * H, TB, TB);
}
