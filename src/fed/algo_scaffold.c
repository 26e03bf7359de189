/* SCAFFOLD (Karimireddy et al. 2020): the local gradient is corrected by c - c_i (the
 * server's and the bench's control variates); after K local steps with learning rate
 * lr the bench's new control variate is (option II of the paper)
 *     c_i+ = c_i - c + (w0 - w) / (K lr)
 * and it sends dc = c_i+ - c_i; the coordinator adds (|S| / N) mean(dc) to c. The
 * formula assumes plain SGD steps; with Adam the correction is an estimate. */
#include "distdpd/fednet.h"

static void scaffold_grad(const dd_fed_local *L, const float *w, float *g) {
    (void)w;
    for (size_t i = 0; i < L->n; i++) g[i] += L->c[i] - L->ci[i];
}

static void scaffold_end(const dd_fed_local *L, const float *w, float *ci_new) {
    const double k = 1.0 / ((double)(L->steps ? L->steps : 1) * L->lr);
    for (size_t i = 0; i < L->n; i++) ci_new[i] = (float)((double)L->ci[i] - L->c[i] + ((double)L->w0[i] - w[i]) * k);
}

const dd_fed_algo dd_fed_algo_scaffold = {
    .name = "scaffold",
    .help = "control variates correct the local gradient for client drift (server c, bench c_i)",
    .control = 1,
    .grad = scaffold_grad,
    .control_end = scaffold_end,
};
