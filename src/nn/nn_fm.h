/* Layers that hand a recurrent layer's output gradient over feature-major (row j, column
 * t B + b of a B-frame, T-step batch, rows T B apart: the fused GRU's own layout), so that
 * neither side transposes it (library-internal; the gru model's last layer and output
 * layer, src/models/stages.c). The same floats as the (B, T, C) versions. */
#ifndef DD_NN_FM_H
#define DD_NN_FM_H

#include <stddef.h>

/* dd_gru_backward with dout_fm = dL/dh_t feature-major (H rows of T B) instead of
 * (B, T, H). */
void dd_gru_backward_dfm(float *dx, float *dh0, float *dw_ih, float *dw_hh, float *db_ih, float *db_hh,
                         const float *dout_fm, float *ws, const float *w_ih, const float *w_hh, int B, int T,
                         int D, int H);
void dd_gru_backward_dfm_f64(double *dx, double *dh0, double *dw_ih, double *dw_hh, double *db_ih,
                             double *db_hh, const double *dout_fm, double *ws, const double *w_ih,
                             const double *w_hh, int B, int T, int D, int H);

/* dd_dense_backward of rows n = b T + t (in (B, T, in_dim), dout (B, T, out_dim)) with the
 * input gradient din_fm feature-major (in_dim rows of T B): set != 0 writes it (its
 * contents on entry ignored), 0 adds into it, each element the same floats as
 * dd_dense_backward's din[n, i] (set: into zeros); dw and db exactly dd_dense_backward's.
 * din_fm, dw, db may be NULL. tmp: B T in_dim floats (any contents) for the levels and
 * routes the small kernels do not take (sgemm: din in (B, T, in_dim), then moved over), or
 * NULL: allocated per call there. */
void dd_dense_backward_dfm(float *din_fm, int set, float *dw, float *db, const float *dout, const float *in,
                           const float *w, int B, int T, int in_dim, int out_dim, float *tmp);

#endif
