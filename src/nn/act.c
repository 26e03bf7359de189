/* Elementwise layers: activations (tanh, sigmoid, ReLU, Hardswish), residual add and
 * channel concatenation, forward and backward. Kernels in act_impl.h. */
#include "distdpd/nn.h"

#include <string.h>

#include "nn_private.h"
#include "simd.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"
#include "act_impl.h"
#undef DD_NN_DOUBLE
#define DD_NN_DOUBLE 1
#include "nn_real.h"
#include "act_impl.h"

static const char *const act_names[] = {"identity", "tanh", "sigmoid", "relu", "hardswish"};

const char *dd_act_name(dd_act a) {
    if ((int)a < 0 || (size_t)a >= sizeof act_names / sizeof act_names[0]) return "?";
    return act_names[a];
}

dd_status dd_act_parse(const char *name, dd_act *a) {
    for (size_t i = 0; name && i < sizeof act_names / sizeof act_names[0]; i++)
        if (strcmp(name, act_names[i]) == 0) {
            *a = (dd_act)i;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG,
                    "unknown activation '%s' (expected identity, tanh, sigmoid, relu or hardswish)",
                    name ? name : "(null)");
}
