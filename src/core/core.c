/* Core services: status names, per-thread error messages, aligned allocation, RNG,
 * logging, CRC32C and the monotonic clock. */
#include "distdpd/core.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

const char *dd_status_str(dd_status s) {
    switch (s) {
    case DD_OK: return "DD_OK";
    case DD_ERR_NOMEM: return "DD_ERR_NOMEM";
    case DD_ERR_ARG: return "DD_ERR_ARG";
    case DD_ERR_IO: return "DD_ERR_IO";
    case DD_ERR_FORMAT: return "DD_ERR_FORMAT";
    case DD_ERR_RANGE: return "DD_ERR_RANGE";
    case DD_ERR_MISMATCH: return "DD_ERR_MISMATCH";
    case DD_ERR_UNSUPPORTED: return "DD_ERR_UNSUPPORTED";
    case DD_ERR_NUMERIC: return "DD_ERR_NUMERIC";
    case DD_ERR_COMM: return "DD_ERR_COMM";
    case DD_ERR_CORRUPT: return "DD_ERR_CORRUPT";
    case DD_ERR_INTERNAL: return "DD_ERR_INTERNAL";
    case DD_ERR_TIMEOUT: return "DD_ERR_TIMEOUT";
    }
    return "DD_ERR_UNKNOWN";
}

/* The per-thread message buffer behind dd_error()/dd_last_error(). */
static _Thread_local char err_msg[1024];

dd_status(dd_error)(dd_status s, const char *fmt, ...) { /* (name): see core.h, __clang_analyzer__ */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return s;
}

dd_status(dd_error_prefix)(dd_status s, const char *fmt, ...) {
    char buf[sizeof err_msg];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t used = k < 0 ? 0 : ((size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
    size_t rest = strlen(err_msg);
    if (rest > sizeof buf - 1 - used) rest = sizeof buf - 1 - used;
    memcpy(buf + used, err_msg, rest);
    buf[used + rest] = '\0';
    memcpy(err_msg, buf, used + rest + 1);
    return s;
}

const char *dd_last_error(void) { return err_msg; }
void dd_error_clear(void) { err_msg[0] = '\0'; }

void *dd_calloc(size_t count, size_t size) {
    if (size != 0 && count > (SIZE_MAX - 64) / size) {
        dd_error(DD_ERR_NOMEM, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    size_t bytes = count * size;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (!p) {
        dd_error(DD_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, rounded);
    return p;
}

void dd_free(void *p) { free(p); }

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void dd_rng_seed(dd_rng *r, uint64_t seed) {
    memset(r, 0, sizeof *r); /* the padding too: checkpoints copy the state byte for byte */
    uint64_t x = seed;
    memset(r, 0, sizeof *r); /* padding too: a raw copy of the state is then fully defined */
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    r->has_spare = 0;
    r->spare = 0.0;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dd_rng_u64(dd_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double dd_rng_uniform(dd_rng *r) { return (double)(dd_rng_u64(r) >> 11) * 0x1.0p-53; }

double dd_rng_normal(dd_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1, u2;
    do u1 = dd_rng_uniform(r); while (u1 <= 0.0);
    u2 = dd_rng_uniform(r);
    double mag = sqrt(-2.0 * log(u1));
    r->spare = mag * sin(2.0 * M_PI * u2);
    r->has_spare = 1;
    return mag * cos(2.0 * M_PI * u2);
}

uint64_t dd_rng_below(dd_rng *r, uint64_t n) {
    if (n == 0) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do v = dd_rng_u64(r); while (v >= limit);
    return v % n;
}

uint64_t dd_hash64(uint64_t a, uint64_t b) {
    uint64_t x = a * 0xD1B54A32D192ED03ull ^ (b + 0x9E3779B97F4A7C15ull);
    splitmix64(&x);
    return splitmix64(&x);
}

/* Logging state: one process-wide handler. */
static dd_log_fn log_fn;
static void *log_user;
static dd_log_level log_max = DD_LOG_INFO;

void dd_log_set(dd_log_fn fn, void *user, dd_log_level max_level) {
    log_fn = fn;
    log_user = user;
    log_max = max_level;
}

void dd_log(dd_log_level level, const char *fmt, ...) {
    if (!log_fn || level > log_max) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(level, msg, log_user);
}

/* Table-driven CRC32C, table built once on first use. */
static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
    crc_ready = 1;
}

uint32_t dd_crc32c(uint32_t crc, const void *buf, size_t n) {
    if (!crc_ready) crc_init();
    const unsigned char *p = buf;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

double dd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double dd_db10(double x) { return x > 0.0 ? fmax(10.0 * log10(x), -400.0) : -400.0; }

int dd_is_decimal(const char *s) {
    if (!s) return 0;
    if (*s == '+' || *s == '-') s++;
    int digits = 0;
    while (*s >= '0' && *s <= '9') s++, digits++;
    if (*s == '.') {
        s++;
        while (*s >= '0' && *s <= '9') s++, digits++;
    }
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == '\0';
}

dd_status dd_parse_number(const char *what, const char *val, double lo, double hi, int whole, double *out) {
    if (!what || !val || !out) return dd_error(DD_ERR_ARG, "dd_parse_number: NULL argument");
    /* the number between optional blanks */
    char buf[128];
    const char *p = val;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    int ok = n < sizeof buf;
    if (ok) {
        memcpy(buf, p, n);
        buf[n] = '\0';
        ok = dd_is_decimal(buf);
    }
    char *end;
    double v = ok ? strtod(buf, &end) : NAN;
    if (!ok || (whole && isfinite(v) && v != floor(v)))
        return dd_error(DD_ERR_ARG, "%s: expected %s, got '%s'", what, whole ? "an integer" : "a number", val);
    if (!isfinite(v) || v < lo || v > hi) return dd_error(DD_ERR_ARG, "%s: must be in [%g, %g], got '%s'", what, lo, hi, val);
    *out = v;
    return DD_OK;
}

void dd_path_dir(const char *path, char *dir, size_t cap) {
    if (!dir || cap == 0) return;
    /* the slash looked for in path, not in the copy: a copy cut to cap may have lost it */
    const char *p = path ? path : "";
    const char *slash = strrchr(p, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == p)
        snprintf(dir, cap, "/");
    else
        snprintf(dir, cap, "%.*s", (int)(slash - p), p);
}

const char *dd_file_kind(unsigned int mode) {
    const mode_t m = (mode_t)mode;
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

dd_status dd_open_regular(const char *path, int *fd_out, uint64_t *size) {
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever; it has
     * no effect on the regular files that are read below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return dd_error(DD_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return dd_error(DD_ERR_IO, "cannot read %s: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return dd_error(DD_ERR_IO, "cannot read %s: %s", path, strerror(EISDIR));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return dd_error(DD_ERR_IO, "cannot read %s: not a regular file (%s)", path,
                        dd_file_kind(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    if (size) *size = (uint64_t)sb.st_size;
    return DD_OK;
}

dd_status dd_read_text(const char *path, char **text, size_t *len) {
    *text = NULL;
    int fd = -1; /* what is not a regular file (a FIFO, /dev/zero, a directory) is refused */
    DD_TRY(dd_open_regular(path, &fd, NULL));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        const int e = errno;
        close(fd);
        return dd_error(DD_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 4097 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        /* cppcheck-suppress nullPointerArithmeticRedundantCheck ; buf != NULL: a failed realloc left the loop */
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r < 4096) break;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return dd_error(DD_ERR_NOMEM, "%s: out of memory reading the file", path);
    if (err) {
        free(buf);
        return dd_error(DD_ERR_IO, "%s: read error", path);
    }
    buf[n] = '\0';
    *text = buf;
    if (len) *len = n;
    return DD_OK;
}
