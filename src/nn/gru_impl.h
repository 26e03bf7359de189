/* GRU kernels (PyTorch equations), written once for dd_real (see nn_real.h); included by
 * gru.c for float and double.
 *
 * Internally everything is feature-major over time-major columns: column c = t*B + b
 * (TB = T*B columns), so that the elementwise work of one step is B contiguous values per
 * hidden unit (vectorisable) and the weight gradients are single GEMMs over all TB
 * columns. Workspace layout, in elements:
 *   xfm    D x TB    the input, feature-major (row d, column c)            saved
 *   hprev  H x TB    h_{t-1} seen by step t (h0 or zeros at t = 0)         saved
 *   gates  4H x TB   rows [r, z, n, hn], hn = W_hn h_{t-1} + b_hn           saved
 *   dG     4H x TB   rows [da_r, da_z, da_n * r, da_n] (pre-activation)    backward
 *   dxtm   TB x D    input gradient in time-major order                    backward
 *   S      3H x B    W_hh h_{t-1} + b_hh of the current step, then h_t     forward scratch
 *   dh     H x B     running dL/dh_{t-1}                                   backward scratch
 *   part   ceil(TB / DD_NN_NT_KC) x 3H (H + D + 2)   the fused path's weight-gradient
 *                    partials, chunk by chunk (simd.h)                    backward scratch
 * With this dG layout the recurrent gradient is rows [0, 3H) (one GEMM against W_hh) and
 * the input gradient rows [0, 2H) + [3H, 4H) (two GEMMs against W_ih).
 *
 * Float32 on x86-64 with AVX2 or AVX-512 (simd.h): the recurrence (forward steps, and
 * the backward steps up to dG and dL/dh0) runs in the fused kernels of gru_fast_impl.h,
 * same layout except the gates, step-major there (simd.h); the input projection, the
 * weight gradients and dx stay as below. */

typedef struct {
    dd_real *xfm, *hprev, *gates, *dG, *dxtm, *S, *dh, *part;
} RFN(dd_gru_ws);

/* Rows TB apart, or LD (dd_nn_gru_ld) on the fused path (xfm, hprev, dG; its gates are
 * step-major): dd_gru_workspace_size counts the larger. */
static RFN(dd_gru_ws) RFN(dd_gru_ws_split)(dd_real *ws, size_t B, size_t D, size_t H, size_t LD) {
    RFN(dd_gru_ws) w;
    const size_t TB = LD;
    w.xfm = ws;
    w.hprev = w.xfm + TB * D;
    w.gates = w.hprev + H * TB;
    w.dG = w.gates + 4 * H * TB;
    w.dxtm = w.dG + 4 * H * TB;
    w.S = w.dxtm + TB * D;
    w.dh = w.S + 3 * H * B;
    w.part = w.dh + H * B;
    return w;
}

/* The rows' stride: dd_nn_gru_ld on the fused path (forward and backward decide alike). */
static size_t RFN(dd_gru_ld)(size_t TB, size_t H) {
#if !DD_NN_DOUBLE
    if (dd_nn_gru_fused(dd_nn_simd_level(), H)) return dd_nn_gru_ld(TB);
#else
    (void)H;
#endif
    return TB;
}

void RFN(dd_gru_forward)(dd_real *out, dd_real *ws, const dd_real *x, const dd_real *h0,
                         const dd_real *w_ih, const dd_real *w_hh, const dd_real *b_ih,
                         const dd_real *b_hh, int B_, int T_, int D_, int H_) {
    const size_t B = (size_t)B_, T = (size_t)T_, D = (size_t)D_, H = (size_t)H_, TB = T * B;
    const RFN(dd_gru_ws) w = RFN(dd_gru_ws_split)(ws, B, D, H, RFN(dd_gru_ld)(TB, H));
    dd_real *const gates = w.gates, *const hprev = w.hprev, *const S = w.S;

#if !DD_NN_DOUBLE
    {
        const int level = dd_nn_simd_level();
        if (dd_nn_gru_fused(level, H)) { /* it lays out x and h0 itself, on its threads */
            dd_nn_gru_fwd_fast(level, out, hprev, gates, S, w.xfm, x, h0, w_ih, w_hh, b_ih, b_hh,
                               B, T, D, H);
            return;
        }
    }
#endif
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t d = 0; d < D; d++) w.xfm[d * TB + t * B + b] = x[(b * T + t) * D + d];
    for (size_t j = 0; j < H; j++)
        for (size_t b = 0; b < B; b++) hprev[j * TB + b] = h0 ? h0[b * H + j] : 0;
    /* Input projection of every step at once: gates[0:3H, :] = b_ih + W_ih xfm. */
    if (b_ih)
        for (size_t j = 0; j < 3 * H; j++)
            for (size_t c = 0; c < TB; c++) gates[j * TB + c] = b_ih[j];
    RFN(dd_nn_gemm)(0, 0, 3 * H, TB, D, 1, w_ih, D, w.xfm, TB, b_ih ? 1 : 0, gates, TB);

    for (size_t t = 0; t < T; t++) {
        const size_t c0 = t * B;
        /* S (3H, B) = b_hh + W_hh h_{t-1} */
        if (b_hh)
            for (size_t j = 0; j < 3 * H; j++)
                for (size_t b = 0; b < B; b++) S[j * B + b] = b_hh[j];
        RFN(dd_nn_gemm)(0, 0, 3 * H, B, H, 1, w_hh, H, hprev + c0, TB, b_hh ? 1 : 0, S, B);
        /* r, z = sigmoid(gx + S) */
        for (size_t j = 0; j < 2 * H; j++) RFN(dd_nn_add_sigmoid)(gates + j * TB + c0, S + j * B, B);
        /* hn = S_n; n = tanh(gx_n + r * hn) */
        for (size_t j = 0; j < H; j++)
            RFN(dd_nn_gru_n)(gates + (2 * H + j) * TB + c0, gates + (3 * H + j) * TB + c0,
                             gates + j * TB + c0, S + (2 * H + j) * B, B);
        /* h = (1 - z) n + z h_{t-1}, into S[0:H] (dead now), then to hprev and out */
        for (size_t j = 0; j < H; j++) {
            dd_real *h = S + j * B;
            RFN(dd_nn_gru_h)(h, gates + (H + j) * TB + c0, gates + (2 * H + j) * TB + c0,
                             hprev + j * TB + c0, B);
            if (t + 1 < T) memcpy(hprev + j * TB + c0 + B, h, B * sizeof(dd_real));
            for (size_t b = 0; b < B; b++) out[(b * T + t) * H + j] = h[b];
        }
    }
}

/* dout_fm: dout is feature-major (row j, column t B + b, rows T B apart) instead of
 * (B, T, H) (dd_gru_backward_dfm) */
static void RFN(dd_gru_backward_impl)(dd_real *dx, dd_real *dh0, dd_real *dw_ih, dd_real *dw_hh,
                                      dd_real *db_ih, dd_real *db_hh, const dd_real *dout,
                                      int dout_fm, dd_real *ws, const dd_real *w_ih,
                                      const dd_real *w_hh, int B_, int T_, int D_, int H_) {
    const size_t B = (size_t)B_, T = (size_t)T_, D = (size_t)D_, H = (size_t)H_, TB = T * B;
    const size_t LD = RFN(dd_gru_ld)(TB, H); /* == TB off the fused path */
    const RFN(dd_gru_ws) w = RFN(dd_gru_ws_split)(ws, B, D, H, LD);
    const dd_real *const gates = w.gates, *const hprev = w.hprev;
    dd_real *const dG = w.dG, *const dh = w.dh;

    memset(dh, 0, H * B * sizeof(dd_real));
    int fast = 0;
#if !DD_NN_DOUBLE
    /* the fused path's weight and bias gradients: one pass each over dG, in one parallel
     * region; inside the time loop chunk by chunk when all three are on the kernel (dG's
     * chunk still in cache; the same floats, simd.h), else after it */
    dd_nn_nt_prod p[3];
    int np = 0, wdone = 0;
    const int level = dd_nn_simd_level();
    if (dd_nn_gru_fused(level, H)) {
        if (dw_hh || db_hh)
            p[np++] = (dd_nn_nt_prod){3 * H, dw_hh ? H : 0, TB, dG, LD, hprev, LD, dw_hh, H, db_hh};
        if (dw_ih || db_ih) {
            p[np++] = (dd_nn_nt_prod){2 * H, dw_ih ? D : 0, TB, dG, LD, w.xfm, LD, dw_ih, D, db_ih};
            p[np++] = (dd_nn_nt_prod){H, dw_ih ? D : 0, TB, dG + 3 * H * LD, LD, w.xfm, LD,
                                      dw_ih ? dw_ih + 2 * H * D : NULL, D, db_ih ? db_ih + 2 * H : NULL};
        }
        int steps = np > 0 && dd_nn_gru_wgrad_steps();
        for (int i = 0; i < np; i++) steps &= dd_nn_gemm_nt_fast(level, p[i].M, p[i].N);
        const size_t nf = steps ? (TB + DD_NN_NT_KC - 1) / DD_NN_NT_KC * dd_nn_nt_part_size(p, np) : 0;
        float *part = nf ? w.part : NULL; /* nf <= dd_gru_workspace_size's part rows */
        for (size_t i = 0; i < nf; i++) part[i] = -0.0f; /* -0 + s == s for every s */
        dd_nn_gru_bwd_fast(level, dG, dh, dout, dout_fm ? TB : 0, gates, hprev, w_hh, B, T, H,
                           dh0 != NULL, p, part ? np : 0, part);
        if (part) dd_nn_nt_parts_add(p, np, part), wdone = 1;
        fast = 1;
    }
#endif
    for (size_t t = T; !fast && t-- > 0;) {
        const size_t c0 = t * B;
        for (size_t j = 0; j < H; j++) {
            dd_real *d = dh + j * B;
            if (dout_fm)
                for (size_t b = 0; b < B; b++) d[b] += dout[j * TB + c0 + b];
            else
                for (size_t b = 0; b < B; b++) d[b] += dout[(b * T + t) * H + j];
        }
        for (size_t j = 0; j < H; j++)
            RFN(dd_nn_gru_bwd)(dG + j * TB + c0, dG + (H + j) * TB + c0, dG + (2 * H + j) * TB + c0,
                               dG + (3 * H + j) * TB + c0, dh + j * B, gates + j * TB + c0,
                               gates + (H + j) * TB + c0, gates + (2 * H + j) * TB + c0,
                               gates + (3 * H + j) * TB + c0, hprev + j * TB + c0, B);
        /* dh_{t-1} += W_hh^T [da_r, da_z, da_n r] (not needed after step 0 without dh0) */
        if (t > 0 || dh0) RFN(dd_nn_gemm)(1, 0, H, B, 3 * H, 1, w_hh, H, dG + c0, TB, 1, dh, B);
    }
    if (dh0)
        for (size_t b = 0; b < B; b++)
            for (size_t j = 0; j < H; j++) dh0[b * H + j] += dh[j * B + b];
    if (dx) {
        RFN(dd_nn_gemm)(1, 0, TB, D, 2 * H, 1, dG, LD, w_ih, D, 0, w.dxtm, D);
        RFN(dd_nn_gemm)(1, 0, TB, D, H, 1, dG + 3 * H * LD, LD, w_ih + 2 * H * D, D, 1, w.dxtm, D);
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < T; t++) {
                const dd_real *src = w.dxtm + (t * B + b) * D;
                dd_real *dst = dx + (b * T + t) * D;
                for (size_t k = 0; k < D; k++) dst[k] += src[k];
            }
    }
#if !DD_NN_DOUBLE
    if (fast) {
        if (!wdone) dd_nn_gemm_nt_acc_n(level, p, np);
        return;
    }
#endif
    if (dw_ih) {
        RFN(dd_nn_gemm)(0, 1, 2 * H, D, TB, 1, dG, TB, w.xfm, TB, 1, dw_ih, D);
        RFN(dd_nn_gemm)(0, 1, H, D, TB, 1, dG + 3 * H * TB, TB, w.xfm, TB, 1, dw_ih + 2 * H * D, D);
    }
    if (dw_hh) RFN(dd_nn_gemm)(0, 1, 3 * H, H, TB, 1, dG, TB, hprev, TB, 1, dw_hh, H);
    if (db_ih) {
        RFN(dd_nn_rowsum_add)(db_ih, dG, 2 * H, TB, TB);
        RFN(dd_nn_rowsum_add)(db_ih + 2 * H, dG + 3 * H * TB, H, TB, TB);
    }
    if (db_hh) RFN(dd_nn_rowsum_add)(db_hh, dG, 3 * H, TB, TB);
}

void RFN(dd_gru_backward)(dd_real *dx, dd_real *dh0, dd_real *dw_ih, dd_real *dw_hh, dd_real *db_ih,
                          dd_real *db_hh, const dd_real *dout, dd_real *ws, const dd_real *x,
                          const dd_real *w_ih, const dd_real *w_hh, int B, int T, int D, int H) {
    (void)x; /* the forward's feature-major copy (workspace) is used instead */
    RFN(dd_gru_backward_impl)(dx, dh0, dw_ih, dw_hh, db_ih, db_hh, dout, 0, ws, w_ih, w_hh, B, T, D, H);
}

void RFN(dd_gru_backward_dfm)(dd_real *dx, dd_real *dh0, dd_real *dw_ih, dd_real *dw_hh,
                              dd_real *db_ih, dd_real *db_hh, const dd_real *dout_fm, dd_real *ws,
                              const dd_real *w_ih, const dd_real *w_hh, int B, int T, int D, int H) {
    RFN(dd_gru_backward_impl)(dx, dh0, dw_ih, dw_hh, db_ih, db_hh, dout_fm, 1, ws, w_ih, w_hh, B, T, D, H);
}
