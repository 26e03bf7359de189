/* Private layout of a generated OFDM frame (dd_ofdm), shared by the generator
 * (ofdm.c) and the EVM demodulator (ofdm_evm.c). Not installed. */
#ifndef DISTDPD_DSP_OFDM_INTERNAL_H
#define DISTDPD_DSP_OFDM_INTERNAL_H

#include "distdpd/ofdm.h"

struct dd_ofdm {
    dd_ofdm_cfg cfg;      /* configuration, n_rb and carrier_spacing resolved */
    size_t n;             /* frame length, samples */
    size_t N;             /* FFT size fs / scs */
    size_t K;             /* active sub-carriers per symbol */
    int cp_min;           /* shortest CP */
    int wola;             /* WOLA ramp length */
    double occ;           /* occupied bandwidth per carrier, Hz */
    double scale;         /* x = scale * sum X exp(...) inside a clean symbol */
    double papr_raw;      /* dB, before CFR */
    double papr;          /* dB, output */
    int cfr_done;         /* clip-and-filter passes run */
    int centre[DD_OFDM_MAX_CARRIERS]; /* centre sub-carrier per carrier */
    int *bin;             /* [K] signed sub-carrier index, ascending */
    int *car;             /* [K] carrier of each active bin */
    size_t *sym_start;    /* [S] first sample after the CP */
    int *sym_cp;          /* [S] CP length */
    dd_cf32 *X;           /* [S][K] transmitted symbols */
    dd_cf32 *x;           /* [n] samples */
};

#endif
