/* I/Q feature extraction for neural PA models (DGRU-style inputs): [I, Q, |x|, |x|^3,
 * sin(phase), cos(phase)] with its backward pass. Kernels in iqfeat_impl.h. */
#include "distdpd/nn.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"
#include "iqfeat_impl.h"
#undef DD_NN_DOUBLE
#define DD_NN_DOUBLE 1
#include "nn_real.h"
#include "iqfeat_impl.h"
