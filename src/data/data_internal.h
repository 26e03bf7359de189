/* Internal helpers shared by the dataset readers and writers in src/data: path building,
 * whole-file reads, atomic (temporary file + rename) writes, dataset allocation, the
 * split-count rule and the generic numeric CSV parser. Not installed, not public API. */
#ifndef DD_DATA_INTERNAL_H
#define DD_DATA_INTERNAL_H

#include <locale.h>
#include <stdint.h>
#include <stdio.h>

#include "distdpd/dataset.h"

/* Longest path the data module builds (including the terminating NUL). */
#define DD_PATH_MAX 4096

/* Storage behind a dd_dataset: either heap arrays or a memory-mapped binary file. */
struct dd_dataset_priv {
    dd_cf32 *buf[2 * DD_SPLIT_COUNT]; /* heap arrays (dd_free on release), NULL if unused */
    dd_bin_view *view;                /* memory map the arrays point into, or NULL */
};

/* A new zeroed dataset with its private part; caller frees with dd_dataset_free(). */
dd_status dd_data_alloc(dd_dataset **out);

/* dst = dir + "/" + name (or just name if dir is empty). DD_ERR_ARG if it does not fit. */
dd_status dd_path_join(char *dst, size_t cap, const char *dir, const char *name);
/* dst = a + b. DD_ERR_ARG if it does not fit. */
dd_status dd_path_cat(char *dst, size_t cap, const char *a, const char *b);
/* 1 if path exists and is a directory / a regular file, else 0 (errno untouched). */
int dd_path_is_dir(const char *path);
int dd_path_is_file(const char *path);
/* Final component of a path (pointer into path). */
const char *dd_path_base(const char *path);
/* Creates dir and its missing parents (mode 0777 & umask); OK if it already exists. */
dd_status dd_mkdir_p(const char *dir);
/* Creates the directory part of a file path (nothing if there is none). */
dd_status dd_mkdir_parent(const char *path);

/* Reads a whole regular file of at most max_len bytes into a new NUL-terminated buffer
 * (caller dd_free()s *buf; exactly the file size + 1 bytes); *len excludes the NUL.
 * Errors: those of dd_open_regular, DD_ERR_IO "cannot read PATH: reason",
 * DD_ERR_FORMAT "PATH: file too large: N bytes (at most M)". */
dd_status dd_read_all(const char *path, size_t max_len, char **buf, size_t *len);

/* Largest JSON file (spec.json, SigMF meta) the readers accept. */
#define DD_JSON_MAX ((size_t)64 << 20)

/* Line-by-line reading of a text file in bounded memory: one buffer of DD_LINE_MAX
 * bytes, refilled by read(); lines end at LF, CRLF or a lone CR. dd_lines_next gives
 * the next line without its terminator, NUL-terminated in place (valid until the next
 * call), *got = 0 at the end of the file; it fails at the first line that holds a NUL
 * byte ("PATH:LINE: NUL byte in a text file (binary data?)") or is longer than
 * DD_LINE_MAX ("PATH:LINE: line longer than ..."), having read at most one buffer past
 * the previous line. r->line is the 1-based number of the line last returned. */
#define DD_LINE_MAX ((size_t)1 << 20)
typedef struct {
    int fd;           /* the open file, -1 once closed */
    const char *path; /* for messages (not copied) */
    char *buf;        /* DD_LINE_MAX + 1 bytes; buf[end] is always NUL */
    size_t beg, end;  /* unconsumed bytes [beg, end) */
    int eof;          /* read() returned 0 */
    size_t line;      /* lines returned so far */
} dd_lines;
dd_status dd_lines_open(dd_lines *r, const char *path);
dd_status dd_lines_next(dd_lines *r, char **line, size_t *len, int *got);
void dd_lines_close(dd_lines *r);

/* Quotes file content for an error message: at most max_in bytes of [p, p+len) into out
 * (cap bytes, NUL-terminated), printable ASCII as is, a backslash as "\\", every other
 * byte (control characters, bytes >= 0x7f) as "\xNN", and "..." when shortened, so a
 * message never carries raw binary to a terminal. 4 * max_in + 4 bytes always suffice.
 * Returns out. */
const char *dd_quote(char *out, size_t cap, const char *p, size_t len, size_t max_in);

/* Atomic file writing: dd_afile_open() creates PATH.tmp (and missing parent
 * directories); write through a->f;
 * dd_afile_close() flushes, fsyncs and closes (the temporary remains);
 * dd_afile_rename() moves it to PATH; dd_afile_commit() does both;
 * dd_afile_abort() closes if needed and removes the temporary. */
typedef struct {
    FILE *f;                 /* stream on the temporary file while open, else NULL */
    char path[DD_PATH_MAX];  /* final name */
    char tmp[DD_PATH_MAX];   /* temporary name: path + ".tmp" */
    char *iobuf;             /* stdio buffer (1 MiB) */
    int pending;             /* 1 while a temporary file exists on disk */
} dd_afile;
dd_status dd_afile_open(dd_afile *a, const char *path);
dd_status dd_afile_close(dd_afile *a);
dd_status dd_afile_rename(dd_afile *a);
dd_status dd_afile_commit(dd_afile *a);
void dd_afile_abort(dd_afile *a);
/* Records DD_ERR_IO "write PATH: reason" for a failed write on a. */
dd_status dd_afile_werr(const dd_afile *a);
/* fsyncs the directory holding path (best effort; errors ignored). */
void dd_fsync_parent(const char *path);

/* Split counts for n samples in time order: n_train = floor(n r0 (1 + 1e-12)),
 * n_val = floor(n r1 (1 + 1e-12)) (clamped so they fit), n_test = the rest. The 1e-12
 * keeps counts written as ratios n_s / n exact despite rounding. */
void dd_split_counts(size_t n, const double r[3], size_t cnt[3]);

/* Numeric CSV: header with the given column names (case-insensitive, whitespace and
 * double quotes around names tolerated, CRLF tolerated, UTF-8 BOM skipped), then rows
 * of ncols float32 values. *data (caller dd_free()s) holds nrows x ncols floats, row
 * major. Errors name the file and line ("PATH:17: column 2 ('Q') is not a number"). */
dd_status dd_csv_parse(const char *path, const char *const *names, int ncols, float **data,
                       size_t *nrows);

/* The same parser as a stream, for data larger than memory: open checks the header
 * (same errors); read parses up to max_rows rows into v (max_rows x ncols floats) and
 * sets *nrows (0 and done = 1 at the end of the file); close releases the reader (also
 * after an error). path and names are borrowed. */
typedef struct {
    dd_lines rd;
    const char *path;
    const char *const *names;
    int ncols;
    int done; /* the end of the file was reached */
} dd_csv_stream;
dd_status dd_csv_stream_open(dd_csv_stream *cs, const char *path, const char *const *names, int ncols);
dd_status dd_csv_stream_read(dd_csv_stream *cs, float *v, size_t max_rows, size_t *nrows);
void dd_csv_stream_close(dd_csv_stream *cs);

/* Writes "header\n" then n rows of ncplx complex columns ("%.9g" each, so float32 values
 * read back bit-exact) to the open atomic file a. Refuses NaN/Inf (DD_ERR_RANGE). */
dd_status dd_csv_write_cols(dd_afile *a, const char *header, const dd_cf32 *const *cols,
                            int ncplx, size_t n);
/* The rows only (no header), e.g. one chunk of a stream. */
dd_status dd_csv_write_rows(dd_afile *a, const dd_cf32 *const *cols, int ncplx, size_t n);

/* JSON helpers (cJSON). dd_json_read parses a file whose top level must be an object
 * (caller cJSON_Delete()s); syntax errors name the file and line. dd_json_number reads a
 * finite number field (error "PATH: missing field 'NAME'" when required and absent;
 * *v untouched when optional and absent); dd_json_integer also requires an integer in
 * [lo, hi]. */
struct cJSON;
dd_status dd_json_read(const char *path, struct cJSON **root);
const char *dd_json_type_name(const struct cJSON *j);
/* cJSON_Print in the "C" locale; caller cJSON_free()s. */
char *dd_json_print(const struct cJSON *j);
dd_status dd_json_number(const char *path, const struct cJSON *obj, const char *name,
                         int required, double *v);
dd_status dd_json_integer(const char *path, const struct cJSON *obj, const char *name,
                          int required, double lo, double hi, double *v);

/* SigMF internals (sigmf.c). dd_sigmf_read_ex: arg is a meta path, a data path or a
 * prefix; *root (optional) receives the parsed meta (caller cJSON_Delete()s).
 * dd_sigmf_write_ex writes the concatenation of nparts arrays; extra_global's items are
 * copied into "global", annotations (may be NULL) becomes "annotations".
 * dd_sigmf_load_dataset fills ds from PREFIX_input / PREFIX_output. */
dd_status dd_sigmf_read_ex(const char *arg, dd_cf32 **x, size_t *n, double *fs,
                           struct cJSON **root);
dd_status dd_sigmf_write_ex(const char *prefix, const dd_cf32 *const *parts, const size_t *plen,
                            int nparts, double fs, dd_sigmf_type type, const char *description,
                            const struct cJSON *extra_global, const struct cJSON *annotations);
dd_status dd_sigmf_load_dataset(const char *prefix, dd_dataset *ds);

/* Streaming SigMF pair (dd_dataset_convert): a source reads PREFIX_input/_output in
 * chunks (the same checks and messages as dd_sigmf_load_dataset; *spec and cnt[] from
 * the meta, annotations or split ratios); a sink writes PREFIX_input/_output.sigmf-data
 * as cf32_le in chunks (temporary files) and commit writes both meta files (spec, split
 * annotations of n[]) and renames everything into place. */
typedef struct dd_sigmf_src dd_sigmf_src;
dd_status dd_sigmf_src_open(const char *prefix, dd_sigmf_src **out, dd_spec *spec, size_t cnt[3]);
dd_status dd_sigmf_src_read(dd_sigmf_src *s, dd_cf32 *in, dd_cf32 *out, size_t max, size_t *got);
void dd_sigmf_src_close(dd_sigmf_src **s);
typedef struct dd_sigmf_sink dd_sigmf_sink;
dd_status dd_sigmf_sink_open(const char *prefix, dd_sigmf_sink **out);
dd_status dd_sigmf_sink_put(dd_sigmf_sink *k, const dd_cf32 *in, const dd_cf32 *out, size_t n);
dd_status dd_sigmf_sink_commit(dd_sigmf_sink **k, const dd_spec *spec, const size_t n[3]);
void dd_sigmf_sink_abort(dd_sigmf_sink **k);

/* Split ratios for a single-recording file holding n[] samples per split: the spec's
 * when dd_split_counts reproduces n[] from them, else n[s] / N (checked to reproduce). */
dd_status dd_spec_ratios_for_counts(dd_spec *spec, const size_t n[3], const char *where);

/* Dataset path resolution shared by the loader and the converter (dataset.c). */
dd_status dd_find_sigmf_pair(const char *dir, char *prefix, int *found);
int dd_sigmf_prefix_of(const char *path, char *prefix);

/* OpenDPD directory loaders (opendpd.c): fill ds from DIR given its spec and format. */
dd_status dd_opendpd_load(const char *dir, const dd_spec *spec, const char *format,
                          dd_dataset *ds);

/* Every sample of every split of a mapped binary file is finite, else DD_ERR_RANGE
 * "PATH: split 'train' input, sample 1234 (I) is NaN" (or +Inf / -Inf). One sequential
 * pass in 8 MiB steps that leaves residency as it found it: pages already in the page
 * cache (mincore) are read through the mapping and unmapped again (MADV_DONTNEED), the
 * others with O_DIRECT into a private buffer (or, where O_DIRECT is refused, through the
 * mapping and then dropped from the cache, POSIX_FADV_DONTNEED). Adds about 8 MiB to
 * the peak RSS. */
dd_status dd_bin_check_finite(const dd_bin_view *v);

/* 1 if the file at path starts with the binary magic (binfmt.c). */
int dd_bin_is_bin(const char *path);

/* Switches this thread to the "C" locale while numbers are parsed or printed (strtof,
 * "%.9g", cJSON), so a program that called setlocale() with a decimal comma still reads
 * and writes "0.5"; dd_cloc_pop() restores the previous locale. */
typedef struct {
    locale_t c;   /* the "C" locale object, or 0 if it could not be created */
    locale_t old; /* the thread's locale before the push */
} dd_cloc;
void dd_cloc_push(dd_cloc *l);
void dd_cloc_pop(dd_cloc *l);

/* 1 on a little-endian host. */
int dd_host_le(void);

#endif
