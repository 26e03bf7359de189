/* The model registry: the one list of models selectable by name. Adding a model is one
 * file in src/models/ (defining dd_model_create_<name>, declared in model_impl.h) plus one
 * line here. Order = display order in `distdpd models` / --help. */
#include "models/model_impl.h"

static const dd_model_info registry[] = {
    {"gmp", "generalized memory polynomial (aligned + lagging cross terms), LS-fittable",
     dd_model_create_gmp},
    {"mp", "memory polynomial (gmp without cross terms), LS-fittable", dd_model_create_mp},
    {"rvtdnn", "real-valued time-delay MLP on I/Q taps (Liu 2004)", dd_model_create_rvtdnn},
    {"arvtdnn", "augmented RVTDNN: I/Q taps plus |x|, |x|^2, |x|^3 (Wang 2019)",
     dd_model_create_arvtdnn},
    {"gru", "OpenDPD GRU: I/Q -> GRU -> linear (1,911 parameters at hidden 23)",
     dd_model_create_gru},
    {"dgru", "OpenDPD DGRU: I/Q features -> GRU -> ReLU dense, skip features -> linear",
     dd_model_create_dgru},
    {"lstm", "I/Q -> LSTM -> linear", dd_model_create_lstm},
    {"tcn", "temporal conv net: 1x1, dilated depthwise convs (Hardswish), 1x1, + input",
     dd_model_create_tcn},
    {"resnet", "deep residual time-delay conv network, + input", dd_model_create_resnet},
    {"hammerstein", "stacked neural augmented-Hammerstein blocks (scales to millions)",
     dd_model_create_hammerstein},
};

const dd_model_info *dd_model_registry(size_t *count) {
    if (count) *count = sizeof registry / sizeof registry[0];
    return registry;
}
