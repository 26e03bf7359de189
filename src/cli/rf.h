/* The RF half of the distdpd command, shared by simulate, report and demo: running a
 * simulated measurement (OFDM frame -> PA), the simulation.json sidecar that lets a
 * report regenerate the transmitted symbols, measuring a data set (spectra, ACLR, PAPR,
 * AM/AM, AM/PM, gain-only and MP fits, demodulated EVM) and the HTML report of it. */
#ifndef DD_CLI_RF_H
#define DD_CLI_RF_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"
#include "distdpd/dataset.h"
#include "distdpd/metrics.h"
#include "distdpd/ofdm.h"
#include "distdpd/pa.h"
#include "distdpd/report.h"

/* ---------------------------------------------------------------- simulation */

/* What `distdpd simulate` runs. */
typedef struct {
    const char *signal; /* OFDM preset name (ofdm.h) */
    const char *pa;     /* PA model name (pa.h) */
    uint64_t seed;      /* QAM symbol seed; the PA noise uses seed + 1 */
    size_t samples;     /* data set length; 0 = one frame. Longer = frame repeated */
    double drive_db;    /* added to the model's default drive offset, dB */
    double snr_db;      /* NaN = the model's default; 0 = no noise; else (0, 200] */
    int qam;            /* 0 = the preset's constellation */
    double papr_db;     /* crest-factor reduction target; NaN = preset (off), 0 = off */
    int symbols;        /* OFDM symbols per frame; 0 = the preset's */
    const dd_ofdm_cfg *ofdm;      /* NULL = the preset `signal` (+ qam, papr_db, symbols);
                                     else this configuration (its seed replaced by `seed`;
                                     `signal` then only names it) */
    const dd_pa_params *pa_params; /* NULL = the defaults of model `pa`; else these (fs and
                                      seed set by the run; drive_db and snr_db applied on
                                      top as for the defaults) */
} dd_sim_cfg;

void dd_sim_cfg_default(dd_sim_cfg *c);

/* A finished simulation. */
typedef struct {
    dd_ofdm *frame;      /* the transmitted frame (owned) */
    size_t frame_len;    /* its length, samples */
    dd_spec spec;        /* metric specification of the signal */
    dd_pa *pa;           /* the PA, after the run (owned) */
    dd_pa_params params; /* its parameters */
    dd_cf32 *x, *y;      /* n samples of PA input and output (owned) */
    size_t n;
} dd_sim;

/* Generates the frame, creates and calibrates the PA on it, runs one frame to reach
 * the steady state (filters, thermal memory), then produces c->samples samples of
 * input (the frame repeated from its start) and output. */
dd_status dd_sim_run(const dd_sim_cfg *c, dd_sim *s);
void dd_sim_free(dd_sim *s);

/* Splits the simulation in time order by s->spec.split into a new data set. */
dd_status dd_sim_dataset(const dd_sim *s, dd_dataset **ds);

/* Writes the data set under dir in the given format (0 opendpd, 1 bin, 2 sigmf), the
 * simulation.json sidecar and dir/pa.json (train.h dd_sim_pa_save: the PA that produced
 * the data, with its calibration, so the true PA can be rebuilt); *data_path (static storage) receives the path that
 * `distdpd inspect` / `report --data` take. */
dd_status dd_sim_save(const dd_sim_cfg *c, const dd_sim *s, const dd_dataset *ds, const char *dir,
                      int format, const char **data_path);

/* Reads DIR/simulation.json (if it exists) and regenerates the transmitted frame.
 * *frame = NULL (and DD_OK) when there is no sidecar. */
dd_status dd_sim_load_frame(const char *dir, dd_ofdm **frame, char *desc, size_t desc_len);

/* ---------------------------------------------------------------- analysis */

typedef struct {
    int mp_K, mp_M;       /* MP fit: orders 1..K, M taps; K = 0 skips the fit */
    size_t scatter;       /* raw AM/AM and AM/PM points kept for plotting; 0 = none */
    int plots;            /* compute the PSD and AM/AM data */
} dd_rf_opts;

void dd_rf_opts_default(dd_rf_opts *o);

typedef struct {
    dd_spec spec;
    size_t n;                 /* samples (all splits, in time order) */
    size_t n_split[DD_SPLIT_COUNT];
    dd_cf32 *x, *y;           /* PA input and output (owned copies) */
    double papr_in_db, papr_out_db;
    dd_aclr_result aclr_in[2], aclr_out[2]; /* [DD_ACLR_OPENDPD], [DD_ACLR_3GPP] */
    dd_aclr_result aclr_in_welch, aclr_out_welch; /* OpenDPD bands on the Welch PSD
                                                     (DD_ACLR_OPENDPD_WELCH) */
    dd_cf64 gain;             /* least-squares gain y ~ g x over all samples */
    double gain_nmse_db;      /* NMSE of that gain-only fit */
    int mp_ok;                /* the MP fit ran */
    int mp_K, mp_M;
    size_t mp_ncoef;
    double mp_nmse_train_db;  /* fit on train, evaluated on train */
    double mp_nmse_test_db;   /* ... and on test (train if there is no test split) */
    char mp_note[200];        /* why the fit did not run */
    int evm_ok;               /* EVM demodulated with the known symbols */
    double evm_in_pct, evm_in_db, evm_out_pct, evm_out_db;
    char evm_note[200];       /* why there is no EVM */
    /* plot data */
    size_t npsd;
    double *freq_mhz, *psd_in_db, *psd_out_db; /* PSD, dB relative to the in-band mean */
    dd_amam_curve curve;      /* binned medians */
    size_t nscatter;
    double *sc_in_db, *sc_gain_db, *sc_phase_deg;
    double seconds;           /* analysis time */
} dd_rf_analysis;

/* Measures (x, y) split as in ds. frame (may be NULL) is the transmitted OFDM frame:
 * when the input starts with it, the output's EVM is demodulated. */
dd_status dd_rf_analyze(const dd_dataset *ds, const dd_ofdm *frame, const dd_rf_opts *o,
                        dd_rf_analysis *a);
void dd_rf_free(dd_rf_analysis *a);

/* Writes the HTML report of an analysis. `source` names the data (path), `details`
 * (may be NULL) is a list of extra key/value rows (NULL-terminated pairs). */
dd_status dd_rf_write_report(const dd_rf_analysis *a, const char *title, const char *source,
                             const char *format, const char *const *details,
                             const char *path);

/* The same in two parts, for reports that add their own sections (the demo): the
 * sections of the analysis (summary paragraph, data set table, metrics, fits, spectrum,
 * AM/AM and AM/PM; plot_tag (may be NULL) is appended to the plot headings), and the
 * closing "Definitions" section. */
dd_status dd_rf_report_sections(dd_report *r, const dd_rf_analysis *a, const char *source,
                                const char *format, const char *const *details, const char *plot_tag);
dd_status dd_rf_report_definitions(dd_report *r, const dd_rf_analysis *a);

/* Welch PSD of x (n >= nper samples, Hann, nper-sample segments, 50 % overlap) in dB
 * relative to its mean level inside 0.9 x the occupied band; freq_mhz and out_db hold
 * nper values (fftshifted, MHz). */
dd_status dd_rf_psd_rel(const dd_spec *sp, const dd_cf32 *x, size_t n, size_t nper, double *freq_mhz,
                        double *out_db);

/* AM/AM and AM/PM plots start this far below the input peak, dB. */
#define DD_RF_AM_XMIN (-30.0)

/* y limits for an AM/AM or AM/PM plot: the central 99 % of the dots (sx, sy; ns) with
 * x >= DD_RF_AM_XMIN and every finite point of the median curve (cx, cy; nc) there,
 * padded by 10 %; NaN (automatic limits) when there is nothing to go by. */
void dd_rf_am_limits(const double *sx, const double *sy, size_t ns, const double *cx, const double *cy,
                     size_t nc, double *lo, double *hi);

/* Resolves a data set argument: a directory holding data.ddb (and no spec.json) means
 * that file. Returns path itself otherwise. buf holds the result. */
const char *dd_rf_resolve_dataset(const char *path, char *buf, size_t cap);

#endif
