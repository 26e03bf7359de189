/* distdpd core: status codes, error messages, aligned allocation, RNG, logging,
 * CRC32C and timing. Every other module of libdistdpd builds on this header.
 *
 * Conventions (every module follows them; README.md "Layout" lists the modules):
 * - Functions that can fail return dd_status (DD_OK == 0, negative on error) and,
 *   on error, record a human-readable message naming the file, line or field
 *   involved; read it with dd_last_error(). The library never exits and never prints
 *   unless a log handler is installed with dd_log_set().
 * - Complex baseband samples are dd_cf32 (float _Complex, memory layout I,Q).
 */
#ifndef DISTDPD_CORE_H
#define DISTDPD_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DD_VERSION_MAJOR 0
#define DD_VERSION_MINOR 1
#define DD_VERSION_PATCH 0
#define DD_VERSION_STRING "0.1.0"

/* Complex samples: identical in memory to interleaved float32 / float64 I,Q pairs. */
typedef float _Complex dd_cf32;
typedef double _Complex dd_cf64;

/* Status codes. Each is documented; dd_status_str() gives a short name. */
typedef enum {
    DD_OK = 0,
    DD_ERR_NOMEM = -1,       /* allocation failed */
    DD_ERR_ARG = -2,         /* invalid argument or configuration value */
    DD_ERR_IO = -3,          /* a file could not be opened, read, written or synced */
    DD_ERR_FORMAT = -4,      /* malformed content: parse error, bad header, wrong type */
    DD_ERR_RANGE = -5,       /* a value is out of range or not finite (NaN/Inf) */
    DD_ERR_MISMATCH = -6,    /* sizes or shapes that must agree do not */
    DD_ERR_UNSUPPORTED = -7, /* a valid but unsupported option (e.g. SigMF datatype) */
    DD_ERR_NUMERIC = -8,     /* numerical failure: singular system, divergence */
    DD_ERR_COMM = -9,        /* communication (MPI) failure */
    DD_ERR_CORRUPT = -10,    /* checksum mismatch or truncated file */
    DD_ERR_INTERNAL = -11,   /* a bug: an invariant did not hold */
    DD_ERR_TIMEOUT = -12     /* a wait ran out of time (a peer that does not answer) */
} dd_status;

/* Short constant name of a status, e.g. "DD_ERR_FORMAT". Never NULL. */
const char *dd_status_str(dd_status s);

/* Records a formatted error message for this thread and returns s, so that error paths
 * read `return dd_error(DD_ERR_FORMAT, "%s:%zu: ...", path, line);`. */
dd_status dd_error(dd_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prepends context ("while loading X: ") to the current message; returns s. */
dd_status dd_error_prefix(dd_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* For the static analyzer only (`make lint`; __clang_analyzer__ is never defined when
 * compiling): both return their s, which it cannot see from another translation unit, so
 * it would follow `if ((rc = dd_error(DD_ERR_IO, ...)) != DD_OK)` both ways. src/core/core.c
 * defines them as (dd_error) and (dd_error_prefix), which these macros leave alone. */
#if defined(__clang_analyzer__)
#define dd_error(s, ...) ((void)dd_error(s, __VA_ARGS__), (s))
#define dd_error_prefix(s, ...) ((void)dd_error_prefix(s, __VA_ARGS__), (s))
#endif
/* The last message recorded on this thread ("" if none). Valid until the next call. */
const char *dd_last_error(void);
void dd_error_clear(void);

/* A number typed by a person (a command-line value): dd_is_decimal between optional
 * blanks ("010" is ten), within [lo, hi], and whole when `whole`. Errors: DD_ERR_ARG "WHAT: expected a
 * number (an integer), got 'VAL'" or "WHAT: must be in [lo, hi], got 'VAL'". */
dd_status dd_parse_number(const char *what, const char *val, double lo, double hi, int whole, double *out);

/* 1 when s is a decimal number written as people do: [+-], digits with at most one '.',
 * at least one digit, an optional exponent e[+-]digits, nothing else (no blanks, no
 * hexadecimal: strtod reads 0x10 as 16; no inf or nan). */
int dd_is_decimal(const char *s);

/* Opens path read-only and checks that it is a regular file, without blocking on a FIFO
 * (O_NONBLOCK open, then fstat; the descriptor is blocking again on return). Every
 * reader of a user's file opens it so. Errors: DD_ERR_IO "cannot open PATH: reason",
 * "cannot read PATH: Is a directory", "cannot read PATH: not a regular file (a FIFO)"
 * (or a character device, ...). *size (optional) receives the file size. */
dd_status dd_open_regular(const char *path, int *fd, uint64_t *size);

/* What a file of this st_mode is, for messages: "a directory", "a FIFO", "a character
 * device", "a block device", "a socket", else "not a regular file". */
const char *dd_file_kind(unsigned int mode);

/* Reads a whole file into a new NUL-terminated buffer (caller free()s *text); *len (may
 * be NULL) receives its length. Errors: those of dd_open_regular, DD_ERR_IO "PATH: read
 * error", DD_ERR_NOMEM. */
dd_status dd_read_text(const char *path, char **text, size_t *len);

/* The directory part of path into dir (cap bytes, truncated to fit): "." when path has
 * no slash, "/" for a file in the root. */
void dd_path_dir(const char *path, char *dir, size_t cap);

/* Propagates a failing status to the caller. */
#define DD_TRY(expr)                          \
    do {                                      \
        dd_status dd_try_s_ = (expr);         \
        if (dd_try_s_ != DD_OK) return dd_try_s_; \
    } while (0)

/* Aligned allocation (64 bytes), zero-filled. Returns NULL on overflow or failure
 * (and records DD_ERR_NOMEM). Free with dd_free(). */
void *dd_calloc(size_t count, size_t size);
void dd_free(void *p);

/* Arena memory: the parameter, gradient, optimiser-state and activation buffers of
 * training, allocated through dd_arena_calloc so that each kind is counted (current and
 * peak bytes of this process) and an optional budget is enforced (e.g. --mem-limit-mb).
 * Not thread-safe: arenas are created and freed by the training thread. */
typedef enum {
    DD_MEM_PARAMS = 0,      /* parameters (and gathered parameter slices) */
    DD_MEM_GRADS = 1,       /* gradients */
    DD_MEM_OPTIM = 2,       /* optimiser state */
    DD_MEM_ACTIVATIONS = 3, /* model workspaces, batch and evaluation buffers */
    DD_MEM_KINDS = 4
} dd_mem_kind;
/* "params", "grads", "optim", "activations". */
const char *dd_mem_kind_name(dd_mem_kind k);
/* Like dd_calloc (64-byte aligned, zeroed), counted under `kind`. Fails (NULL, with
 * DD_ERR_NOMEM recorded) when the allocation would bring all arenas together above the
 * budget; the message names `what`, the size, the arenas already allocated and the
 * budget. Free with dd_arena_free (not dd_free). */
void *dd_arena_calloc(dd_mem_kind kind, size_t count, size_t size, const char *what);
void dd_arena_free(void *p);
/* Budget in bytes for all arenas of this process together; 0 = none (the default). */
void dd_mem_set_limit(size_t bytes);
typedef struct {
    size_t cur[DD_MEM_KINDS];  /* bytes allocated now, per kind */
    size_t peak[DD_MEM_KINDS]; /* largest bytes allocated at once, per kind */
    size_t peak_total;         /* largest sum over the kinds at once */
    size_t limit;              /* the budget (0: none) */
} dd_mem_stats;
void dd_mem_stats_get(dd_mem_stats *s);
/* Peaks start again from the current values. */
void dd_mem_stats_reset_peaks(void);
/* This process's peak resident set size in bytes (getrusage), 0 if unknown. */
size_t dd_mem_peak_rss(void);

/* Random numbers: xoshiro256** seeded through splitmix64. Same seed, same stream on
 * every platform. The state is plain data, so it can be checkpointed by copying. */
typedef struct {
    uint64_t s[4];
    int has_spare;  /* Box-Muller keeps its second normal deviate */
    double spare;
} dd_rng;
void dd_rng_seed(dd_rng *r, uint64_t seed);
uint64_t dd_rng_u64(dd_rng *r);
double dd_rng_uniform(dd_rng *r);            /* [0, 1), 53 random bits */
double dd_rng_normal(dd_rng *r);             /* N(0, 1) */
uint64_t dd_rng_below(dd_rng *r, uint64_t n); /* uniform in [0, n), unbiased; n > 0 */
/* Stateless 64-bit mix of two keys (e.g. (epoch, index)): a counter-based generator. */
uint64_t dd_hash64(uint64_t a, uint64_t b);

/* Logging. The library is silent unless a handler is installed. */
typedef enum { DD_LOG_ERROR = 0, DD_LOG_WARN = 1, DD_LOG_INFO = 2, DD_LOG_DEBUG = 3 } dd_log_level;
typedef void (*dd_log_fn)(dd_log_level level, const char *msg, void *user);
void dd_log_set(dd_log_fn fn, void *user, dd_log_level max_level);
void dd_log(dd_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78). Start with crc = 0;
 * dd_crc32c(0, "123456789", 9) == 0xE3069283. Chainable. */
uint32_t dd_crc32c(uint32_t crc, const void *buf, size_t n);

/* Monotonic wall-clock seconds. */
double dd_now(void);

/* 10*log10(x) with a floor at -400 dB for x <= 0. */
double dd_db10(double x);

#ifdef __cplusplus
}
#endif
#endif
