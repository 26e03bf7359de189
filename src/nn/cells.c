/* Elementwise array kernels shared by the recurrent layers and the activations (sigmoid,
 * tanh, GRU and LSTM cell updates and their backward), instantiated for float and double
 * from cells_impl.h. Kept in their own file so that they are compiled out of line (see
 * cells_impl.h for why). Declared in nn_private.h. */
#include <math.h>
#include <stddef.h>

#include "nn_private.h"

#define DD_NN_DOUBLE 0
#include "nn_real.h"
#include "cells_impl.h"
#undef DD_NN_DOUBLE
#define DD_NN_DOUBLE 1
#include "nn_real.h"
#include "cells_impl.h"
