/* Checkpoint files: a versioned, sectioned binary container with a CRC32C per section,
 * written atomically.
 *
 * A checkpoint is a list of named sections (byte blobs). The trainer decides which to
 * store, e.g. "model" (name), "param_table", "params", "optim_state", "step", "epoch",
 * "rng", "cursor", "config" (JSON text), "lr_sched". The container checks everything it
 * reads: a truncated, bit-flipped, foreign or newer file is refused with a message that
 * names the file and the section, and never crashes the reader.
 *
 * File layout (format version 1; integers in the writer's byte order, which the
 * endianness marker records; see docs/checkpoints.md):
 *   header, 48 bytes (this layout is kept by every future format version):
 *     0  char[8] magic "DDPDCKPT"
 *     8  u32     format version (1)
 *     12 u32     endianness marker 0x01020304
 *     16 u32     section count (0..DD_CKPT_MAX_SECTIONS)
 *     20 u32     flags (0)
 *     24 u64     total file size in bytes
 *     32 u32     CRC32C of the section table
 *     36 8 bytes reserved (0)
 *     44 u32     header CRC32C over bytes 0..43
 *   section table, 64 bytes per section:
 *     0  char[32] name, NUL-padded (1..31 characters: letters, digits, _ . - : /)
 *     32 u64      offset of the data from the start of the file (a multiple of 64)
 *     40 u64      size in bytes
 *     48 u32      CRC32C of the data
 *     52 u32      reserved (0)
 *     56 u64      reserved (0)
 *   data: each section at the next multiple of 64 bytes after the previous one, in table
 *   order; padding bytes are zero; the file ends right after the last section's data.
 *
 * Durability: the writer writes "<path>.tmp.<pid>.<k>", fsyncs it, renames it over path
 * and fsyncs the directory, so a crash or an error leaves either the old or the new file
 * at path, never a mixture.
 */
#ifndef DISTDPD_CKPT_H
#define DISTDPD_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_CKPT_MAGIC "DDPDCKPT"     /* 8 bytes, no terminator in the file */
#define DD_CKPT_VERSION 1u           /* the format version written and the newest read */
#define DD_CKPT_ENDIAN 0x01020304u   /* endianness marker */
#define DD_CKPT_NAME_MAX 31          /* section names are 1..31 characters */
#define DD_CKPT_MAX_SECTIONS 4096    /* sections per file */
#define DD_CKPT_ALIGN 64             /* section data alignment in the file and in memory */

/* ---- writing ---------------------------------------------------------------------- */

/* Collects sections in memory until commit. */
typedef struct dd_ckpt_writer dd_ckpt_writer;

/* Starts a checkpoint that will be written to `path` by dd_ckpt_write_commit(). Nothing
 * is written yet. On success the caller owns *out and must end it with
 * dd_ckpt_write_commit() or dd_ckpt_abort(). Errors: DD_ERR_ARG (NULL or empty path),
 * DD_ERR_NOMEM. */
dd_status dd_ckpt_write_begin(const char *path, dd_ckpt_writer **out);

/* Adds a section: `bytes` bytes from `data` (may be NULL when bytes == 0) are COPIED, so
 * the caller may reuse its buffer at once. name: 1..DD_CKPT_NAME_MAX characters from
 * [A-Za-z0-9_.:/-], unique in the checkpoint. On error the writer stays usable (the
 * section is not added). Errors: DD_ERR_ARG (bad or duplicate name, too many sections,
 * NULL data), DD_ERR_NOMEM. */
dd_status dd_ckpt_add(dd_ckpt_writer *w, const char *name, const void *data, size_t bytes);
/* Typed conveniences: an 8-byte unsigned integer, an 8-byte IEEE double, and a string
 * stored with its terminating NUL (e.g. the configuration as JSON). */
dd_status dd_ckpt_add_u64(dd_ckpt_writer *w, const char *name, uint64_t v);
dd_status dd_ckpt_add_f64(dd_ckpt_writer *w, const char *name, double v);
dd_status dd_ckpt_add_str(dd_ckpt_writer *w, const char *name, const char *s);

/* Writes the checkpoint atomically: temporary file in the same directory, write, fsync,
 * close, rename over the path, fsync of the directory. Frees the writer and sets *w to
 * NULL in every case. On failure the temporary file is removed and whatever was at the
 * path before is left intact (except when only the final directory fsync fails: then
 * the new file is in place but its durability is not guaranteed, which the message
 * says). Errors: DD_ERR_IO (message names the file, the operation and strerror),
 * DD_ERR_ARG (NULL writer). */
dd_status dd_ckpt_write_commit(dd_ckpt_writer **w);

/* Discards the writer without touching the file system; sets *w to NULL. Safe on NULL. */
void dd_ckpt_abort(dd_ckpt_writer **w);

/* The destination path given to dd_ckpt_write_begin (owned by the writer). */
const char *dd_ckpt_writer_path(const dd_ckpt_writer *w);

/* Test-only fault injection: when the environment variable DISTDPD_CKPT_KILL_AT=BYTES is
 * set, dd_ckpt_write_commit raises SIGKILL in its own process right after BYTES bytes of
 * the temporary file have been written (a commit of a smaller file is not affected), as
 * a machine that dies in the middle of a checkpoint write would. Not for production. */

/* ---- reading ---------------------------------------------------------------------- */

/* A verified checkpoint held in memory (64-byte aligned section data). */
typedef struct dd_ckpt_reader dd_ckpt_reader;

/* Reads `path` completely and verifies it: magic, endianness, version, header CRC,
 * table consistency, every section's bounds and CRC32C, zero padding and the exact file
 * size. On success the caller owns *out and frees it with dd_ckpt_close(); on error *out
 * is NULL. Errors, each message starting with the path:
 *   DD_ERR_IO      the file cannot be opened or read;
 *   DD_ERR_FORMAT  "not a distdpd checkpoint" (magic), "written by format version N, this
 *                  build reads <= M", "written on a machine with the other byte order";
 *   DD_ERR_CORRUPT "truncated: section 'params' needs bytes up to X, file has Y",
 *                  "header CRC mismatch", "section 'params' CRC mismatch (stored ...,
 *                  computed ...): the file is corrupt", bad table, nonzero padding,
 *                  trailing bytes. */
dd_status dd_ckpt_open(const char *path, dd_ckpt_reader **out);
/* Frees the reader and sets *r to NULL. Safe on NULL. Pointers from dd_ckpt_get die. */
void dd_ckpt_close(dd_ckpt_reader **r);
/* Same checks as dd_ckpt_open, nothing kept: DD_OK means the file is a valid checkpoint. */
dd_status dd_ckpt_verify(const char *path);

/* Format version of the file, number of sections, and the name of section i (in file
 * order; NULL when i is out of range). */
uint32_t dd_ckpt_version(const dd_ckpt_reader *r);
size_t dd_ckpt_count(const dd_ckpt_reader *r);
const char *dd_ckpt_section_name(const dd_ckpt_reader *r, size_t i);
/* 1 when the checkpoint has a section called name, else 0. */
int dd_ckpt_has(const dd_ckpt_reader *r, const char *name);

/* The data of section `name`: *data points into the reader (64-byte aligned, valid until
 * dd_ckpt_close; not NULL even for an empty section), *bytes its size. Errors:
 * DD_ERR_FORMAT "<path>: no section 'name'". */
dd_status dd_ckpt_get(const dd_ckpt_reader *r, const char *name, const void **data,
                      size_t *bytes);
/* Copies section `name` into dst, which must hold exactly `bytes` bytes. Errors:
 * DD_ERR_FORMAT (missing), DD_ERR_MISMATCH ("section 'params' has X bytes, expected Y"). */
dd_status dd_ckpt_get_copy(const dd_ckpt_reader *r, const char *name, void *dst, size_t bytes);
/* Typed readers for dd_ckpt_add_u64/_f64/_str sections. A wrong size, or a string
 * without its final NUL or with an embedded NUL, is DD_ERR_FORMAT. The string stays
 * owned by the reader. */
dd_status dd_ckpt_get_u64(const dd_ckpt_reader *r, const char *name, uint64_t *v);
dd_status dd_ckpt_get_f64(const dd_ckpt_reader *r, const char *name, double *v);
dd_status dd_ckpt_get_str(const dd_ckpt_reader *r, const char *name, const char **s);

#ifdef __cplusplus
}
#endif
#endif
