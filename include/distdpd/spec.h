/* The description of a measured or simulated signal that the metrics need: sample rate,
 * channel layout and evaluation segment length. It mirrors OpenDPD's spec.json. */
#ifndef DISTDPD_SPEC_H
#define DISTDPD_SPEC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest accepted nperseg: 2^20 = 1,048,576 samples (OpenDPD uses 2560; the OFDM
 * presets at most 32768). nperseg sets the FFT length of every spectral metric and the
 * evaluation segment length, so memory and time of an evaluation grow with it: the cap
 * bounds them whatever a spec.json says (1e9 would ask for tens of GB). */
#define DD_NPERSEG_MAX ((size_t)1 << 20)

typedef struct {
    double fs;          /* sample rate, Hz (spec.json: input_signal_fs); > 0 */
    double bw_main;     /* main channel bandwidth, Hz (bw_main_ch); 0 < bw_main < fs */
    double bw_sub;      /* sub-channel bandwidth, Hz (bw_sub_ch); bw_main / n_sub */
    int n_sub;          /* number of sub-channels in the main channel (n_sub_ch); >= 1 */
    size_t nperseg;     /* evaluation segment length, samples (nperseg); 16..DD_NPERSEG_MAX */
    double bw_occupied; /* occupied bandwidth for 3GPP ACLR, Hz; 0 means bw_main */
    double split[3];    /* train / val / test fractions (split_ratios); sum to 1 */
} dd_spec;

/* The DPA_200MHz-like default: 800 MHz, 200 MHz = 10 x 20 MHz, nperseg 2560,
 * split 0.6/0.2/0.2. */
void dd_spec_default(dd_spec *s);

#ifdef __cplusplus
}
#endif
#endif
