/* Gradient-norm clipping with torch.nn.utils.clip_grad_norm_ semantics (L2 norm),
 * computed in double in index order so that the result is deterministic. */
#include <math.h>

#include "distdpd/optim.h"

double dd_grad_sumsq(const float *g, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
    return s;
}

double dd_clip_coef(double norm, double max_norm) {
    double c = max_norm / (norm + 1e-6);
    return c < 1.0 ? c : 1.0;
}

void dd_grad_scale(float *g, size_t n, double coef) {
    if (coef == 1.0) return;
    const float c = (float)coef;
    for (size_t i = 0; i < n; i++) g[i] *= c;
}

dd_status dd_clip_grad_norm(float *g, size_t n, double max_norm, double *norm_before) {
    if (norm_before) *norm_before = 0.0;
    if (!g && n > 0) return dd_error(DD_ERR_ARG, "dd_clip_grad_norm: g is NULL");
    if (!isfinite(max_norm) || max_norm <= 0.0)
        return dd_error(DD_ERR_ARG, "dd_clip_grad_norm: max_norm = %g must be finite and > 0",
                        max_norm);
    double norm = sqrt(dd_grad_sumsq(g, n));
    if (norm_before) *norm_before = norm;
    if (!isfinite(norm))
        return dd_error(DD_ERR_RANGE,
                        "gradient norm is %g over %zu values: not clipping (skip this step)", norm,
                        n);
    dd_grad_scale(g, n, dd_clip_coef(norm, max_norm));
    return DD_OK;
}
