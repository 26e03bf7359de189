/* Datasets of PA input/output I/Q: OpenDPD layout (spec.json + split CSVs, or a single
 * data.csv), SigMF recordings, and distdpd's binary format (mmap-able, sliceable per
 * rank). Every loader checks its input and reports the file and line or field of the
 * first problem (missing file or field, non-numeric cell, NaN/Inf, wrong column count,
 * length mismatch, wrong SigMF datatype, truncated binary file). */
#ifndef DISTDPD_DATASET_H
#define DISTDPD_DATASET_H

#include "distdpd/core.h"
#include "distdpd/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DD_SPLIT_TRAIN = 0, DD_SPLIT_VAL = 1, DD_SPLIT_TEST = 2, DD_SPLIT_COUNT = 3 } dd_split;

/* Name of a split: "train", "val", "test". */
const char *dd_split_name(dd_split s);

typedef struct dd_dataset_priv dd_dataset_priv;

/* A loaded dataset. in[s] and out[s] hold n[s] samples of split s: the PA input and
 * the PA output. The arrays belong to the dataset (heap or a read-only memory map). */
typedef struct {
    dd_spec spec;
    char format[32];   /* "split_csv", "single_csv", "sigmf", "bin" */
    size_t n[DD_SPLIT_COUNT];
    const dd_cf32 *in[DD_SPLIT_COUNT];
    const dd_cf32 *out[DD_SPLIT_COUNT];
    dd_dataset_priv *priv; /* storage; do not touch */
} dd_dataset;

/* Loads a dataset, detecting the format from the path:
 * - a directory with spec.json: dataset_format "split_csv" ({train,val,test}_{input,
 *   output}.csv) or "single_csv" (data.csv with I_in,Q_in,I_out,Q_out, split by
 *   split_ratios in time order);
 * - a directory or path prefix with NAME_input.sigmf-meta/-data and
 *   NAME_output.sigmf-meta/-data (split by split_ratios, default 0.6/0.2/0.2);
 * - a file with the binary magic (see docs/formats.md), memory-mapped.
 * On success *out is a new dataset the caller frees with dd_dataset_free(). */
dd_status dd_dataset_load(const char *path, dd_dataset **out);
void dd_dataset_free(dd_dataset **ds);

/* Builds an in-memory dataset by copying the given arrays (n[s] samples each). */
dd_status dd_dataset_from_arrays(const dd_spec *spec, const size_t n[DD_SPLIT_COUNT],
                                 const dd_cf32 *const in[DD_SPLIT_COUNT],
                                 const dd_cf32 *const out[DD_SPLIT_COUNT],
                                 dd_dataset **out_ds);

/* Writers. Each writes to temporary files and renames them into place, so a failed
 * write never leaves a half-written dataset under the final name. */
dd_status dd_dataset_save_opendpd(const dd_dataset *ds, const char *dir); /* split_csv */
dd_status dd_dataset_save_sigmf(const dd_dataset *ds, const char *prefix);
dd_status dd_dataset_save_bin(const dd_dataset *ds, const char *path);

/* Reads one I/Q CSV file with header "I,Q" into a new array (caller dd_free()s). */
dd_status dd_csv_read_iq(const char *path, dd_cf32 **x, size_t *n);
/* Writes x as "I,Q" CSV (atomically). */
dd_status dd_csv_write_iq(const char *path, const dd_cf32 *x, size_t n);
/* Reads spec.json (all fields required except split_ratios, dataset_format). */
dd_status dd_spec_read_json(const char *path, dd_spec *spec, char *format, size_t format_len);
dd_status dd_spec_write_json(const char *path, const dd_spec *spec, const char *format);

/* SigMF single-stream I/O. Reads cf32_le, cf64_le, ci16_le (and ci8, ci32 if desired);
 * sample rate from core:sample_rate. Writes cf32_le, cf64_le or ci16_le. */
typedef enum { DD_SIGMF_CF32_LE = 0, DD_SIGMF_CF64_LE = 1, DD_SIGMF_CI16_LE = 2 } dd_sigmf_type;
dd_status dd_sigmf_read(const char *meta_path, dd_cf32 **x, size_t *n, double *fs);
dd_status dd_sigmf_write(const char *prefix, const dd_cf32 *x, size_t n, double fs,
                         dd_sigmf_type type, const char *description);

/* Binary format slice: maps the file and returns pointers to samples
 * [offset, offset+count) of one split without reading the rest. */
typedef struct dd_bin_view dd_bin_view;
dd_status dd_bin_open(const char *path, dd_bin_view **v);
dd_status dd_bin_slice(const dd_bin_view *v, dd_split s, size_t offset, size_t count,
                       const dd_cf32 **in, const dd_cf32 **out);
const dd_spec *dd_bin_spec(const dd_bin_view *v);
size_t dd_bin_count(const dd_bin_view *v, dd_split s);
void dd_bin_close(dd_bin_view **v);

#ifdef __cplusplus
}
#endif
#endif
