/* The model registry: the one list of models selectable by name. Adding a model is one
 * file in src/models/ (ending in DD_MODEL_DEFINE(name, ...)) plus one X(name) line here.
 * Order = display order in `distdpd models` / --help. */
#include "models/model_impl.h"

#define DD_MODELS(X) \
    X(gmp)           \
    X(mp)            \
    X(rvtdnn)        \
    X(arvtdnn)       \
    X(gru)           \
    X(dgru)          \
    X(lstm)          \
    X(tcn)           \
    X(resnet)        \
    X(hammerstein)

#define DD_DECLARE(n) extern const dd_model_info dd_model_##n;
DD_MODELS(DD_DECLARE)
#undef DD_DECLARE

#define DD_ENTRY(n) &dd_model_##n,
static const dd_model_info *const registry[] = {DD_MODELS(DD_ENTRY)};
#undef DD_ENTRY

const dd_model_info *const *dd_model_registry(size_t *count) {
    if (count) *count = sizeof registry / sizeof registry[0];
    return registry;
}
