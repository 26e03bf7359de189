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
 * the PA output, in time order. The arrays belong to the dataset (heap or a read-only
 * memory map) and stay valid until dd_dataset_free(); never write through them. An
 * empty split has n[s] == 0 (its pointers may still be non-NULL). */
typedef struct {
    dd_spec spec;      /* signal description; always passes dd_spec_check() */
    char format[32];   /* source: "split_csv", "single_csv", "sigmf", "bin", or "memory"
                          (dd_dataset_from_arrays) */
    size_t n[DD_SPLIT_COUNT];           /* samples per split */
    const dd_cf32 *in[DD_SPLIT_COUNT];  /* PA input of each split */
    const dd_cf32 *out[DD_SPLIT_COUNT]; /* PA output of each split */
    dd_dataset_priv *priv; /* storage; do not touch */
} dd_dataset;

/* Loads a dataset, detecting the format from the path (details in docs/formats.md):
 * - a directory with spec.json (or the spec.json path itself): dataset_format
 *   "split_csv" ({train,val,test}_{input,output}.csv) or "single_csv" (data.csv with
 *   I_in,Q_in,I_out,Q_out, split in time order: n_train = floor(n r0),
 *   n_val = floor(n r1), the rest test);
 * - a path prefix DIR/NAME with NAME_input.sigmf-meta/-data and NAME_output.sigmf-meta/
 *   -data, one of those four files, or a directory (without spec.json) holding exactly
 *   one such pair. Splits from annotations labelled train/val/test, else split_ratios
 *   (distdpd:split_ratios, default 0.6/0.2/0.2) as for single_csv; spec fields from the
 *   distdpd: namespace, else derived from fs (bw_main = fs/4, n_sub = 10,
 *   bw_sub = bw_main/10, nperseg = 2560);
 * - a file starting with the binary magic "DDPDBIN1" (or named *.ddb): memory-mapped;
 *   one pass checks every sample is finite (DD_ERR_RANGE "PATH: split 'train' input,
 *   sample 1234 (I) is NaN") that leaves the process's pages and the page cache as
 *   it found them.
 * On success *out is a new dataset the caller frees with dd_dataset_free(); on error
 * *out is NULL and the message names the file and line or field. */
dd_status dd_dataset_load(const char *path, dd_dataset **out);
/* Frees the dataset and its storage (unmaps a binary file); sets *ds = NULL. */
void dd_dataset_free(dd_dataset **ds);

/* Builds an in-memory dataset by copying the given arrays (n[s] samples each; in[s] and
 * out[s] may be NULL when n[s] == 0). The spec must pass dd_spec_check() and every value
 * must be finite (DD_ERR_RANGE otherwise). Caller frees *out_ds with dd_dataset_free(). */
dd_status dd_dataset_from_arrays(const dd_spec *spec, const size_t n[DD_SPLIT_COUNT],
                                 const dd_cf32 *const in[DD_SPLIT_COUNT],
                                 const dd_cf32 *const out[DD_SPLIT_COUNT],
                                 dd_dataset **out_ds);

/* Writers. Each writes to temporary files (NAME.tmp), fsyncs them and renames them into
 * place, so a failed write never leaves a half-written file under a final name; missing
 * directories are created. NaN/Inf samples are refused (DD_ERR_RANGE).
 * - opendpd: DIR/{train,val,test}_{input,output}.csv ("%.9g": float32 reads back
 *   bit-exact) and DIR/spec.json (dataset_format "split_csv"), spec.json last;
 * - sigmf: PREFIX_input.sigmf-{data,meta} and PREFIX_output.sigmf-{data,meta}, cf32_le,
 *   train|val|test concatenated, split annotations and distdpd: spec fields;
 * - bin: one file (docs/formats.md), written through dd_bin_writer. */
dd_status dd_dataset_save_opendpd(const dd_dataset *ds, const char *dir); /* split_csv */
dd_status dd_dataset_save_sigmf(const dd_dataset *ds, const char *prefix);
dd_status dd_dataset_save_bin(const dd_dataset *ds, const char *path);
/* OpenDPD single-file variant: DIR/data.csv (I_in,Q_in,I_out,Q_out; train, val, test
 * concatenated in time order) + spec.json with dataset_format "single_csv". The split
 * ratios written are the spec's when they reproduce the dataset's counts, else n[s]/N. */
dd_status dd_dataset_save_opendpd_single(const dd_dataset *ds, const char *dir);

/* Range checks on a spec (fs > 0, 0 < bw_main < fs, 0 < bw_sub <= bw_main, n_sub >= 1,
 * nperseg >= 16, 0 <= bw_occupied < fs, split ratios >= 0 summing to 1 within 1e-6).
 * Errors (DD_ERR_RANGE) start with `where` (e.g. a file name) and name the field. */
dd_status dd_spec_check(const dd_spec *s, const char *where);

/* Reads one I/Q CSV file with header "I,Q" (case-insensitive; spaces, quotes, CRLF and a
 * UTF-8 BOM tolerated; trailing blank lines ignored) into a new array *x of *n samples
 * (caller dd_free()s; a header-only file gives *n = 0). On error *x = NULL and the
 * message is "PATH:LINE: ..." (DD_ERR_FORMAT: header, column count, non-numeric cell;
 * DD_ERR_RANGE: NaN/Inf or float32 overflow; DD_ERR_IO: cannot open/read). The whole
 * file is read into memory; use the binary format for data larger than RAM. */
dd_status dd_csv_read_iq(const char *path, dd_cf32 **x, size_t *n);
/* Writes x as "I,Q" CSV with "%.9g" values (atomically; refuses NaN/Inf). */
dd_status dd_csv_write_iq(const char *path, const dd_cf32 *x, size_t n);
/* Writes ncplx complex columns of n samples each as CSV under the header line `header`
 * (e.g. "I,Q,I_dpd,Q_dpd": 2 ncplx names), "%.9g" values, atomically; refuses NaN/Inf. */
dd_status dd_csv_write_columns(const char *path, const char *header, const dd_cf32 *const *cols, int ncplx,
                               size_t n);
/* Reads spec.json: input_signal_fs, bw_main_ch, bw_sub_ch, n_sub_ch, nperseg required;
 * split_ratios ({"train","val","test"} or [r0,r1,r2], default 0.6/0.2/0.2),
 * dataset_format ("split_csv" (default) or "single_csv"; else DD_ERR_UNSUPPORTED) and
 * bw_occupied (distdpd extension, Hz, default 0) optional. format (may be NULL)
 * receives the dataset format; format_len must exceed its length. Missing field or
 * wrong type: DD_ERR_FORMAT "PATH: missing field 'nperseg'"; out of range (see
 * dd_spec_check): DD_ERR_RANGE naming the field. */
dd_status dd_spec_read_json(const char *path, dd_spec *spec, char *format, size_t format_len);
/* Writes spec.json atomically; format NULL means "split_csv". The spec must pass
 * dd_spec_check(); bw_occupied is written only when non-zero. */
dd_status dd_spec_write_json(const char *path, const dd_spec *spec, const char *format);

/* SigMF single-stream I/O. dd_sigmf_read takes PATH.sigmf-meta (or the .sigmf-data
 * path, or the prefix) and reads complex cf32, cf64, ci8, ci16, ci32, _le or _be
 * (integers scaled by 1/2^(bits-1): ci16 by 1/32768) into a new array (caller
 * dd_free()s); *fs (may be NULL) gets core:sample_rate (required). Real or unsigned
 * types: DD_ERR_UNSUPPORTED naming the datatype and file; data size not a multiple of
 * the sample size: DD_ERR_CORRUPT; NaN/Inf: DD_ERR_RANGE.
 * dd_sigmf_write writes PREFIX.sigmf-data and PREFIX.sigmf-meta (atomically) as
 * cf32_le, cf64_le or ci16_le (ci16 rounds to nearest; |value| > 1 is refused with
 * DD_ERR_RANGE); description may be NULL. */
typedef enum { DD_SIGMF_CF32_LE = 0, DD_SIGMF_CF64_LE = 1, DD_SIGMF_CI16_LE = 2 } dd_sigmf_type;
dd_status dd_sigmf_read(const char *meta_path, dd_cf32 **x, size_t *n, double *fs);
dd_status dd_sigmf_write(const char *prefix, const dd_cf32 *x, size_t n, double fs,
                         dd_sigmf_type type, const char *description);

/* Binary format slice: dd_bin_open maps the file read-only after checking its header
 * (magic, version, byte order, CRC32C, spec, block bounds; a short file is
 * DD_ERR_CORRUPT "PATH: truncated: expected N bytes, found M"); caller dd_bin_close()s.
 * dd_bin_slice returns pointers to samples [offset, offset+count) of one split (in or
 * out may be NULL) without reading anything: pages load on first touch. Pointers are
 * valid until dd_bin_close(). Truncating the file while it is mapped makes access
 * fault (SIGBUS): replace datasets by rename, as the writer does. */
typedef struct dd_bin_view dd_bin_view;
dd_status dd_bin_open(const char *path, dd_bin_view **v);
dd_status dd_bin_slice(const dd_bin_view *v, dd_split s, size_t offset, size_t count,
                       const dd_cf32 **in, const dd_cf32 **out);
const dd_spec *dd_bin_spec(const dd_bin_view *v);
size_t dd_bin_count(const dd_bin_view *v, dd_split s);
void dd_bin_close(dd_bin_view **v);
/* Reads every block and checks its CRC32C against the header (and that every value is
 * finite, DD_ERR_RANGE as dd_dataset_load): DD_ERR_CORRUPT naming the file and block on
 * mismatch. Touches the whole file, so loaders do not call it; `distdpd` may on request.
 * Releases the view's mapped pages afterwards (they fault in again when used). */
dd_status dd_bin_verify(const dd_bin_view *v);
/* Access-pattern hint (madvise) for samples [offset, offset+count) of split s, both the
 * input and the output block. Advice other than DD_BIN_NORMAL is a hint only. */
typedef enum {
    DD_BIN_NORMAL = 0,     /* default read-ahead */
    DD_BIN_SEQUENTIAL = 1, /* read in order: aggressive read-ahead, early reclaim */
    DD_BIN_RANDOM = 2,     /* random frames: no read-ahead */
    DD_BIN_WILLNEED = 3,   /* start reading this range now */
    DD_BIN_DONTNEED = 4    /* this range may be dropped from the page cache */
} dd_bin_advice;
dd_status dd_bin_advise(const dd_bin_view *v, dd_split s, size_t offset, size_t count,
                        dd_bin_advice advice);

/* Streaming binary writer, for data that does not fit in memory: the counts of every
 * split are fixed at open; dd_bin_writer_append() adds `count` samples to the end of
 * split s (any order of splits, any chunk sizes); dd_bin_writer_commit() checks every
 * split is complete, writes the header, fsyncs and renames PATH.tmp to PATH, and frees
 * the writer (also on error). dd_bin_writer_abort() removes the temporary file. */
typedef struct dd_bin_writer dd_bin_writer;
dd_status dd_bin_writer_open(const char *path, const dd_spec *spec,
                             const size_t n[DD_SPLIT_COUNT], dd_bin_writer **w);
dd_status dd_bin_writer_append(dd_bin_writer *w, dd_split s, const dd_cf32 *in,
                               const dd_cf32 *out, size_t count);
dd_status dd_bin_writer_commit(dd_bin_writer **w);
void dd_bin_writer_abort(dd_bin_writer **w);

/* Partition of a data set into parts (federated benches from one measurement, `distdpd
 * split`), each split separately so every part keeps its train/val/test:
 * - DD_PART_TIME: part p of split s is the contiguous segment
 *   [floor(p n / P), floor((p+1) n / P)) of its n samples;
 * - DD_PART_DRIVE: the split is cut into floor(n / frame) frames of `frame` samples (the
 *   last one takes the remainder), ordered by their mean input power |x|^2 (ties by
 *   position), and part p gets the frames of ranks [floor(p F / P), floor((p+1) F / P)),
 *   in time order: N power-quantile bands, part 0 the lowest drive.
 * The parts' samples of every split are a partition of the split's (none lost, none
 * doubled); range k of part p, split s: samples [start[s][k], start[s][k] + len[s][k]) of
 * the source split, concatenated in this order. */
typedef enum { DD_PART_TIME = 0, DD_PART_DRIVE = 1 } dd_part_by;
typedef struct {
    dd_dataset *ds;                         /* the part (in memory; spec of the source) */
    size_t n_ranges[DD_SPLIT_COUNT];        /* contiguous source ranges per split */
    size_t *start[DD_SPLIT_COUNT], *len[DD_SPLIT_COUNT];
    size_t frames[DD_SPLIT_COUNT];          /* frames (drive) or 1 segment (time) */
    double power_lo_db[DD_SPLIT_COUNT];     /* lowest and highest mean input power of its */
    double power_hi_db[DD_SPLIT_COUNT];     /* frames (drive) or of the segment (time), dB */
} dd_part;
/* Fills parts[0..n_parts) (2 <= n_parts <= 1024; frame >= 1, used by DD_PART_DRIVE).
 * Every non-empty split needs at least n_parts frames (drive) or samples (time):
 * DD_ERR_RANGE naming the split, its frames and n_parts otherwise. Free with
 * dd_part_free (also after an error). */
dd_status dd_dataset_partition(const dd_dataset *ds, dd_part_by by, int n_parts, size_t frame, dd_part *parts);
void dd_part_free(dd_part *parts, int n_parts);
/* Conversion between the four dataset layouts, streaming: samples go from the source
 * to the destination in chunks of o->chunk samples (default 65536), so a dataset larger
 * than memory converts in bounded memory (one chunk, the writers' I/O buffers; the
 * binary source is read through its map and each chunk's pages are dropped after use).
 *   DD_FMT_CSV_DIR  OpenDPD directory: spec.json + {train,val,test}_{input,output}.csv
 *   DD_FMT_CSV      OpenDPD single file: DIR/data.csv (I_in,Q_in,I_out,Q_out) + spec.json
 *   DD_FMT_SIGMF    PREFIX_input / PREFIX_output .sigmf-data/.sigmf-meta (cf32_le)
 *   DD_FMT_BIN      distdpd binary file
 * The source is any path dd_dataset_load takes (format detected the same way, the same
 * errors naming file, line and field); it is read twice when it is CSV (rows are counted
 * and checked first, so a bad line fails before anything is written). The spec is carried
 * over; with o->has_split the recording (all splits in time order) is re-split by
 * dd_split_counts(N, o->split) and the spec's split ratios become o->split. Every value
 * is float32 in every format and the CSV writers print "%.9g", so samples are bit-exact
 * through any chain of conversions. Outputs are written atomically (temporary names,
 * renamed at the end). `out` may not be the source. info (may be NULL) receives the
 * source's format, the spec written and the split counts written. */
typedef enum { DD_FMT_CSV_DIR = 0, DD_FMT_CSV = 1, DD_FMT_SIGMF = 2, DD_FMT_BIN = 3 } dd_data_format;
typedef struct {
    int has_split;   /* re-split by split[] */
    double split[3]; /* train, val, test ratios (>= 0, sum 1 within 1e-6) */
    size_t chunk;    /* samples per chunk; 0 = 65536 */
} dd_convert_opts;
typedef struct {
    dd_data_format from;
    dd_spec spec;
    size_t n[DD_SPLIT_COUNT];
} dd_convert_info;
/* "csv-dir", "csv", "sigmf", "bin". */
const char *dd_data_format_name(dd_data_format f);
/* The inverse; DD_ERR_ARG naming the choices for an unknown name. */
dd_status dd_data_format_parse(const char *name, dd_data_format *f);
dd_status dd_dataset_convert(const char *in, const char *out, dd_data_format to,
                             const dd_convert_opts *o, dd_convert_info *info);

#ifdef __cplusplus
}
#endif
#endif
