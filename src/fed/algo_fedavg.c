/* FedAvg (McMahan et al. 2017): plain local training; the coordinator averages the
 * updates weighted by the benches' training frames. */
#include "distdpd/fednet.h"

const dd_fed_algo dd_fed_algo_fedavg = {
    .name = "fedavg",
    .help = "local training with the bench's optimiser, updates averaged by training frames",
};
