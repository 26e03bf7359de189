/* FedProx (Li et al. 2020): the local objective gets the proximal term
 * mu/2 ||w - w0||^2, i.e. the gradient mu (w - w0), which keeps a bench's local model
 * near the round's global model on heterogeneous data. */
#include "distdpd/fednet.h"

static void prox_grad(const dd_fed_local *L, const float *w, float *g) {
    const float mu = (float)L->mu;
    for (size_t i = 0; i < L->n; i++) g[i] += mu * (w[i] - L->w0[i]);
}

const dd_fed_algo dd_fed_algo_fedprox = {
    .name = "fedprox",
    .help = "FedAvg with the proximal term mu/2 |w - w_global|^2 in the local loss (--mu)",
    .grad = prox_grad,
};
