/* Internal (not installed) GMP basis evaluation shared by the least-squares fitter
 * (src/dsp/fit.c) and the PA simulator's GMP stage (src/sim/pa.c). One function owns
 * the basis order documented in include/distdpd/fit.h, so the fitter, dd_gmp_apply and
 * the simulator can never disagree about which coefficient multiplies which term. */
#ifndef DD_GMP_INTERNAL_H
#define DD_GMP_INTERNAL_H

#include <stddef.h>

#include "distdpd/fit.h"

/* Writes the basis row of sample n into row[0 .. ncoef-1]. u holds len samples and
 * au[i] = |u[i]|; samples with index outside [0, len) count as zero. */
void dd_gmp_basis_row(const dd_gmp_shape *s, const dd_cf64 *u, const double *au,
                      ptrdiff_t n, ptrdiff_t len, dd_cf64 *row);

/* The model output at sample n (same conventions), evaluated with the scratch row
 * (ncoef values) and summed in coefficient order. */
dd_cf64 dd_gmp_eval_at(const dd_gmp *g, const dd_cf64 *u, const double *au, ptrdiff_t n,
                       ptrdiff_t len, dd_cf64 *row);

#endif
