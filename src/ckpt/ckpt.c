/* Checkpoint container: sectioned binary files with CRC32C per section and header,
 * written atomically (temporary file, fsync, rename, directory fsync) and verified
 * completely on reading. Layout in include/distdpd/ckpt.h and docs/checkpoints.md. */
#include "distdpd/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"

#define HDR_BYTES 48
#define ENTRY_BYTES 64
#define NAME_FIELD 32

/* Header field offsets. The first 48 bytes keep this layout in every format version, so
 * that a reader can check the header CRC before it looks at the version. */
#define H_MAGIC 0
#define H_VERSION 8
#define H_ENDIAN 12
#define H_COUNT 16
#define H_FLAGS 20
#define H_FILESIZE 24
#define H_TABLECRC 32
#define H_RESERVED 36 /* 8 bytes */
#define H_HDRCRC 44

/* Section table entry field offsets. */
#define E_NAME 0
#define E_OFFSET 32
#define E_SIZE 40
#define E_CRC 48
#define E_RESERVED 52 /* 12 bytes */

/* One section, in the writer or the reader. */
typedef struct {
    char name[NAME_FIELD]; /* NUL-padded name */
    uint64_t offset;       /* data offset in the file */
    uint64_t size;         /* data bytes */
    uint32_t crc;          /* CRC32C of the data */
    unsigned char *data;   /* writer: owned copy (dd_calloc); reader: points into buf */
} section;

struct dd_ckpt_writer {
    char *path;     /* destination (owned) */
    section *sec;   /* sections in order (owned, each data owned) */
    size_t count;   /* sections added */
    size_t cap;     /* allocated entries */
};

struct dd_ckpt_reader {
    char *path;          /* file name for messages (owned) */
    unsigned char *buf;  /* the whole file (dd_calloc, 64-byte aligned, owned) */
    size_t fsize;        /* bytes in buf */
    uint32_t version;    /* format version of the file */
    section *sec;        /* count entries (owned; data points into buf) */
    size_t count;        /* sections */
};

/* ---- small helpers ---------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t bswap32(uint32_t v) {
    return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}
static uint64_t align_up(uint64_t x) {
    return (x + (DD_CKPT_ALIGN - 1)) & ~(uint64_t)(DD_CKPT_ALIGN - 1);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = dd_calloc(n, 1);
    if (d) memcpy(d, s, n);
    return d;
}

static int name_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == ':' || c == '/';
}

/* Validates a section name given by the caller. */
static dd_status check_name(const char *name) {
    if (!name) return dd_error(DD_ERR_ARG, "checkpoint section name is NULL");
    size_t n = strlen(name);
    if (n == 0 || n > DD_CKPT_NAME_MAX)
        return dd_error(DD_ERR_ARG, "checkpoint section name '%s' has %zu characters (1..%d allowed)",
                        name, n, DD_CKPT_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        if (!name_char_ok(name[i]))
            return dd_error(DD_ERR_ARG,
                            "checkpoint section name '%s': character %zu is not one of "
                            "[A-Za-z0-9_.:/-]",
                            name, i + 1);
    return DD_OK;
}

/* Validates a name field read from a file: 1..31 valid characters, NUL-padded. */
static int name_field_ok(const char *f) {
    size_t n = 0;
    while (n < NAME_FIELD && f[n]) n++;
    if (n == 0 || n > DD_CKPT_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char_ok(f[i])) return 0;
    for (size_t i = n; i < NAME_FIELD; i++)
        if (f[i]) return 0;
    return 1;
}

/* ---- fault injection (tests) ------------------------------------------------------ */

static _Thread_local int g_fault_nth;    /* 0: off; else the counted call that fails */
static _Thread_local int g_fault_err;    /* errno of the injected failure */
static _Thread_local int g_fault_ops;    /* calls counted in the current/last commit */
static _Thread_local const char *g_fault_op = "";

void dd_ckpt_fault_inject(int nth, int err) {
    g_fault_nth = nth > 0 ? nth : 0;
    g_fault_err = err;
}
int dd_ckpt_fault_ops(void) { return g_fault_ops; }
const char *dd_ckpt_fault_last_op(void) { return g_fault_op; }

/* Counts one file-system call; returns 1 (with errno set) when it must fail. */
static int fault(const char *op) {
    g_fault_ops++;
    if (g_fault_nth > 0 && g_fault_ops == g_fault_nth) {
        g_fault_op = op;
        errno = g_fault_err;
        return 1;
    }
    return 0;
}

/* ---- writer ----------------------------------------------------------------------- */

dd_status dd_ckpt_write_begin(const char *path, dd_ckpt_writer **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_ckpt_write_begin: out is NULL");
    *out = NULL;
    if (!path || !*path) return dd_error(DD_ERR_ARG, "dd_ckpt_write_begin: empty checkpoint path");
    dd_ckpt_writer *w = dd_calloc(1, sizeof *w);
    if (!w) return DD_ERR_NOMEM;
    w->path = dup_str(path);
    if (!w->path) {
        dd_free(w);
        return DD_ERR_NOMEM;
    }
    *out = w;
    return DD_OK;
}

dd_status dd_ckpt_add(dd_ckpt_writer *w, const char *name, const void *data, size_t bytes) {
    if (!w) return dd_error(DD_ERR_ARG, "dd_ckpt_add: NULL writer");
    DD_TRY(check_name(name));
    if (!data && bytes > 0)
        return dd_error(DD_ERR_ARG, "checkpoint section '%s': data is NULL but bytes = %zu", name,
                        bytes);
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->sec[i].name, name) == 0)
            return dd_error(DD_ERR_ARG, "checkpoint '%s': section '%s' added twice", w->path, name);
    if (w->count >= DD_CKPT_MAX_SECTIONS)
        return dd_error(DD_ERR_ARG, "checkpoint '%s': more than %d sections", w->path,
                        DD_CKPT_MAX_SECTIONS);
    if (w->count == w->cap) {
        size_t ncap = w->cap ? 2 * w->cap : 16;
        section *ns = dd_calloc(ncap, sizeof *ns);
        if (!ns) return DD_ERR_NOMEM;
        if (w->count) memcpy(ns, w->sec, w->count * sizeof *ns);
        dd_free(w->sec);
        w->sec = ns;
        w->cap = ncap;
    }
    section *s = &w->sec[w->count];
    memset(s, 0, sizeof *s);
    s->data = dd_calloc(bytes ? bytes : 1, 1);
    if (!s->data) return DD_ERR_NOMEM;
    if (bytes) memcpy(s->data, data, bytes);
    strncpy(s->name, name, NAME_FIELD - 1);
    s->size = bytes;
    /* the CRC is computed by dd_ckpt_write_commit: a snapshot taken in a training loop
     * and written in the background costs the loop the copy only */
    w->count++;
    return DD_OK;
}

dd_status dd_ckpt_add_u64(dd_ckpt_writer *w, const char *name, uint64_t v) {
    return dd_ckpt_add(w, name, &v, sizeof v);
}
dd_status dd_ckpt_add_f64(dd_ckpt_writer *w, const char *name, double v) {
    return dd_ckpt_add(w, name, &v, sizeof v);
}
dd_status dd_ckpt_add_str(dd_ckpt_writer *w, const char *name, const char *s) {
    if (!s) return dd_error(DD_ERR_ARG, "checkpoint section '%s': string is NULL", name ? name : "?");
    return dd_ckpt_add(w, name, s, strlen(s) + 1);
}

static void writer_free(dd_ckpt_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->count; i++) dd_free(w->sec[i].data);
    dd_free(w->sec);
    dd_free(w->path);
    dd_free(w);
}

const char *dd_ckpt_writer_path(const dd_ckpt_writer *w) { return w ? w->path : ""; }

void dd_ckpt_abort(dd_ckpt_writer **w) {
    if (!w) return;
    writer_free(*w);
    *w = NULL;
}

/* Test-only (DISTDPD_CKPT_KILL_AT=BYTES or BYTES@N): the commit in progress (every one,
 * or the N-th of the process) dies by SIGKILL once this many bytes of its temporary file
 * are written; -1 = off. */
static _Thread_local long long g_kill_at = -1;
static _Thread_local unsigned long long g_written;

/* Writes all n bytes (retrying short writes and EINTR); 0 on success, -1 with errno. */
static int write_all(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        if (g_kill_at >= 0 && g_written + chunk >= (unsigned long long)g_kill_at) {
            /* write exactly up to the byte asked for, then die as a crashed machine would */
            size_t part = (size_t)((unsigned long long)g_kill_at - g_written);
            while (part > 0) {
                ssize_t k = write(fd, b, part);
                if (k <= 0) break;
                b += k;
                part -= (size_t)k;
            }
            raise(SIGKILL);
        }
        if (fault("write")) return -1;
        ssize_t k = write(fd, b, chunk);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        b += k;
        n -= (size_t)k;
        g_written += (unsigned long long)k;
    }
    return 0;
}

/* The directory part of path ("." when there is none). Caller frees. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return dup_str(".");
    if (slash == path) return dup_str("/");
    size_t n = (size_t)(slash - path);
    char *d = dd_calloc(n + 1, 1);
    if (d) memcpy(d, path, n);
    return d;
}

dd_status dd_ckpt_write_commit(dd_ckpt_writer **wp) {
    if (!wp || !*wp) return dd_error(DD_ERR_ARG, "dd_ckpt_write_commit: NULL writer");
    static atomic_uint counter;
    dd_ckpt_writer *w = *wp;
    *wp = NULL;
    dd_status st = DD_OK;
    int fd = -1, dfd = -1, tmp_exists = 0;
    unsigned char *head = NULL;
    char *tmp = NULL, *dir = NULL;
    const char *path = w->path;
    g_fault_ops = 0;
    g_fault_op = "";
    g_written = 0;
    g_kill_at = -1;
    {
        /* test-only fault injection: BYTES (every commit) or BYTES@N (the N-th commit of
         * this process, from 1) */
        static atomic_uint commits;
        const unsigned nth = atomic_fetch_add(&commits, 1u) + 1u;
        const char *ka = getenv("DISTDPD_CKPT_KILL_AT");
        char *end = NULL;
        if (ka && *ka) {
            long long v = strtoll(ka, &end, 10);
            unsigned long want = 0;
            if (end && *end == '@') want = strtoul(end + 1, &end, 10);
            if (end && *end == '\0' && v >= 0 && (want == 0 || want == nth)) g_kill_at = v;
        }
    }

    /* Layout: header, table, then each section at the next multiple of 64. */
    size_t head_bytes = HDR_BYTES + w->count * ENTRY_BYTES;
    uint64_t pos = head_bytes;
    for (size_t i = 0; i < w->count; i++) {
        w->sec[i].offset = align_up(pos);
        pos = w->sec[i].offset + w->sec[i].size;
    }
    uint64_t file_size = pos;
    for (size_t i = 0; i < w->count; i++) w->sec[i].crc = dd_crc32c(0, w->sec[i].data, w->sec[i].size);

    head = dd_calloc(head_bytes, 1);
    size_t tmp_len = strlen(path) + 64;
    tmp = dd_calloc(tmp_len, 1);
    dir = dir_of(path);
    if (!head || !tmp || !dir) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }
    unsigned char *tab = head + HDR_BYTES;
    for (size_t i = 0; i < w->count; i++) {
        unsigned char *e = tab + i * ENTRY_BYTES;
        memcpy(e + E_NAME, w->sec[i].name, NAME_FIELD);
        put_u64(e + E_OFFSET, w->sec[i].offset);
        put_u64(e + E_SIZE, w->sec[i].size);
        put_u32(e + E_CRC, w->sec[i].crc);
    }
    memcpy(head + H_MAGIC, DD_CKPT_MAGIC, 8);
    put_u32(head + H_VERSION, DD_CKPT_VERSION);
    put_u32(head + H_ENDIAN, DD_CKPT_ENDIAN);
    put_u32(head + H_COUNT, (uint32_t)w->count);
    put_u32(head + H_FLAGS, 0);
    put_u64(head + H_FILESIZE, file_size);
    put_u32(head + H_TABLECRC, dd_crc32c(0, tab, w->count * ENTRY_BYTES));
    put_u32(head + H_HDRCRC, dd_crc32c(0, head, H_HDRCRC));

    /* Temporary file next to the destination (same file system, so rename is atomic). */
    for (int attempt = 0;; attempt++) {
        unsigned k = atomic_fetch_add(&counter, 1u);
        snprintf(tmp, tmp_len, "%s.tmp.%ld.%u", path, (long)getpid(), k);
        if (fault("create")) {
            fd = -1;
        } else {
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        }
        if (fd >= 0) break;
        if (errno == EEXIST && attempt < 100) continue;
        st = dd_error(DD_ERR_IO, "checkpoint '%s': cannot create temporary file '%s': %s", path, tmp,
                      strerror(errno));
        goto cleanup;
    }
    tmp_exists = 1;

    static const unsigned char zeros[DD_CKPT_ALIGN];
    if (write_all(fd, head, head_bytes) != 0) goto write_error;
    pos = head_bytes;
    for (size_t i = 0; i < w->count; i++) {
        size_t pad = (size_t)(w->sec[i].offset - pos);
        if (pad && write_all(fd, zeros, pad) != 0) goto write_error;
        if (w->sec[i].size && write_all(fd, w->sec[i].data, w->sec[i].size) != 0) goto write_error;
        pos = w->sec[i].offset + w->sec[i].size;
    }
    if (fault("fsync") || fsync(fd) != 0) {
        st = dd_error(DD_ERR_IO, "checkpoint '%s': fsync of '%s' failed: %s; the previous file is "
                      "untouched", path, tmp, strerror(errno));
        goto cleanup;
    }
    {
        int fail = fault("close");
        int rc = close(fd);
        fd = -1;
        if (fail || rc != 0) {
            if (fail) errno = g_fault_err;
            st = dd_error(DD_ERR_IO, "checkpoint '%s': close of '%s' failed: %s; the previous file "
                          "is untouched", path, tmp, strerror(errno));
            goto cleanup;
        }
    }
    if (fault("rename") || rename(tmp, path) != 0) {
        st = dd_error(DD_ERR_IO, "checkpoint '%s': cannot rename '%s' over it: %s; the previous "
                      "file is untouched", path, tmp, strerror(errno));
        goto cleanup;
    }
    tmp_exists = 0;
    /* Make the rename durable. Like PostgreSQL, ignore file systems that cannot fsync or
     * open directories (EINVAL, EBADF, EACCES on open). */
    if (fault("diropen")) {
        dfd = -1;
    } else {
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (dfd < 0) {
        if (errno != EACCES) {
            st = dd_error(DD_ERR_IO, "checkpoint '%s' was renamed into place but its directory '%s' "
                          "cannot be opened to fsync it: %s; durability is not guaranteed",
                          path, dir, strerror(errno));
        }
        goto cleanup;
    }
    if (fault("dirfsync") || fsync(dfd) != 0) {
        if (errno != EINVAL && errno != EBADF)
            st = dd_error(DD_ERR_IO, "checkpoint '%s' was renamed into place but fsync of its "
                          "directory '%s' failed: %s; durability is not guaranteed",
                          path, dir, strerror(errno));
    }
    goto cleanup;

write_error:
    st = dd_error(DD_ERR_IO, "checkpoint '%s': write to '%s' failed: %s; the previous file is "
                  "untouched", path, tmp, strerror(errno));
cleanup:
    if (fd >= 0) close(fd);
    if (dfd >= 0) close(dfd);
    if (tmp_exists) unlink(tmp);
    dd_free(head);
    dd_free(tmp);
    dd_free(dir);
    writer_free(w);
    return st;
}

/* ---- reader ----------------------------------------------------------------------- */

void dd_ckpt_close(dd_ckpt_reader **r) {
    if (!r || !*r) return;
    dd_free((*r)->buf);
    dd_free((*r)->sec);
    dd_free((*r)->path);
    dd_free(*r);
    *r = NULL;
}

/* Reads the whole file into a 64-byte aligned buffer. */
static dd_status read_file(const char *path, unsigned char **buf, size_t *size) {
    *buf = NULL;
    *size = 0;
    int fd = -1;
    uint64_t fsize = 0; /* a FIFO is refused at once: a plain open() waited for a writer */
    DD_TRY(dd_open_regular(path, &fd, &fsize));
    size_t n = (size_t)fsize;
    unsigned char *b = dd_calloc(n ? n : 1, 1);
    if (!b) {
        close(fd);
        return dd_error_prefix(DD_ERR_NOMEM, "%s: ", path);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, b + got, n - got);
        if (k < 0) {
            if (errno == EINTR) continue;
            dd_status s = dd_error(DD_ERR_IO, "%s: read failed: %s", path, strerror(errno));
            close(fd);
            dd_free(b);
            return s;
        }
        if (k == 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (got != n) {
        dd_free(b);
        return dd_error(DD_ERR_IO, "%s: file shrank while being read (%zu of %zu bytes)", path, got, n);
    }
    *buf = b;
    *size = n;
    return DD_OK;
}

/* Verifies buf[0..fsz) and fills r->version, r->sec, r->count. Messages start with path. */
static dd_status verify(dd_ckpt_reader *r) {
    const char *path = r->path;
    const unsigned char *b = r->buf;
    size_t fsz = r->fsize;

    /* Magic: a file too short to hold it counts as a truncated checkpoint only when what
     * it has matches the magic so far. */
    size_t mlen = fsz < 8 ? fsz : 8;
    if (mlen && memcmp(b, DD_CKPT_MAGIC, mlen) != 0) { /* an empty file may have no buffer */
        char shown[40];
        size_t o = 0;
        for (size_t i = 0; i < mlen; i++) {
            unsigned char c = b[i];
            if (c >= 32 && c < 127 && c != '\\')
                shown[o++] = (char)c;
            else
                o += (size_t)snprintf(shown + o, sizeof shown - o, "\\x%02x", c);
        }
        shown[o] = '\0';
        return dd_error(DD_ERR_FORMAT,
                        "%s: not a distdpd checkpoint (starts with \"%s\", expected \"%s\")", path,
                        shown, DD_CKPT_MAGIC);
    }
    if (fsz < HDR_BYTES)
        return dd_error(DD_ERR_CORRUPT, "%s: truncated: the header needs %d bytes, file has %zu", path,
                        HDR_BYTES, fsz);

    /* Header CRC (valid in either byte order; the byte order is checked next). */
    uint32_t stored = get_u32(b + H_HDRCRC), computed = dd_crc32c(0, b, H_HDRCRC);
    if (stored != computed && bswap32(stored) != computed)
        return dd_error(DD_ERR_CORRUPT,
                        "%s: header CRC mismatch (stored 0x%08x, computed 0x%08x): the file is "
                        "corrupt",
                        path, (unsigned)stored, (unsigned)computed);
    uint32_t endian = get_u32(b + H_ENDIAN);
    if (endian == bswap32(DD_CKPT_ENDIAN))
        return dd_error(DD_ERR_FORMAT,
                        "%s: written on a machine with the other byte order (endianness marker "
                        "0x%08x); this build cannot read it",
                        path, (unsigned)endian);
    if (endian != DD_CKPT_ENDIAN)
        return dd_error(DD_ERR_CORRUPT, "%s: bad endianness marker 0x%08x: the file is corrupt", path,
                        (unsigned)endian);
    if (stored != computed)
        return dd_error(DD_ERR_CORRUPT,
                        "%s: header CRC mismatch (stored 0x%08x, computed 0x%08x): the file is "
                        "corrupt",
                        path, (unsigned)stored, (unsigned)computed);
    uint32_t version = get_u32(b + H_VERSION);
    if (version == 0)
        return dd_error(DD_ERR_CORRUPT, "%s: invalid format version 0: the file is corrupt", path);
    if (version > DD_CKPT_VERSION)
        return dd_error(DD_ERR_FORMAT,
                        "%s: written by format version %u, this build reads <= %u: use a newer "
                        "distdpd",
                        path, (unsigned)version, DD_CKPT_VERSION);
    r->version = version;
    uint32_t flags = get_u32(b + H_FLAGS);
    if (flags != 0)
        return dd_error(DD_ERR_FORMAT, "%s: unsupported header flags 0x%08x", path, (unsigned)flags);
    for (size_t i = H_RESERVED; i < H_HDRCRC; i++)
        if (b[i] != 0)
            return dd_error(DD_ERR_CORRUPT, "%s: nonzero reserved header byte %zu: the file is corrupt",
                            path, i);
    uint32_t count = get_u32(b + H_COUNT);
    if (count > DD_CKPT_MAX_SECTIONS)
        return dd_error(DD_ERR_CORRUPT, "%s: %u sections (at most %d): the file is corrupt", path,
                        (unsigned)count, DD_CKPT_MAX_SECTIONS);
    uint64_t table_end = HDR_BYTES + (uint64_t)count * ENTRY_BYTES;
    if (fsz < table_end)
        return dd_error(DD_ERR_CORRUPT,
                        "%s: truncated: the section table needs bytes up to %llu, file has %zu",
                        path, (unsigned long long)table_end, fsz);
    const unsigned char *tab = b + HDR_BYTES;
    stored = get_u32(b + H_TABLECRC);
    computed = dd_crc32c(0, tab, (size_t)count * ENTRY_BYTES);
    if (stored != computed)
        return dd_error(DD_ERR_CORRUPT,
                        "%s: section table CRC mismatch (stored 0x%08x, computed 0x%08x): the file "
                        "is corrupt",
                        path, (unsigned)stored, (unsigned)computed);

    r->sec = dd_calloc(count ? count : 1, sizeof *r->sec);
    if (!r->sec) return dd_error_prefix(DD_ERR_NOMEM, "%s: ", path);
    r->count = count;

    /* Table entries: names, canonical offsets, sizes within the file. */
    uint64_t pos = table_end;
    for (uint32_t i = 0; i < count; i++) {
        const unsigned char *e = tab + (size_t)i * ENTRY_BYTES;
        section *s = &r->sec[i];
        memcpy(s->name, e + E_NAME, NAME_FIELD);
        if (!name_field_ok(s->name))
            return dd_error(DD_ERR_CORRUPT, "%s: section %u has an invalid name: the file is corrupt",
                            path, (unsigned)i);
        s->name[NAME_FIELD - 1] = '\0';
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(r->sec[j].name, s->name) == 0)
                return dd_error(DD_ERR_CORRUPT, "%s: section '%s' appears twice: the file is corrupt",
                                path, s->name);
        for (size_t k = E_RESERVED; k < ENTRY_BYTES; k++)
            if (e[k] != 0)
                return dd_error(DD_ERR_CORRUPT,
                                "%s: section '%s': nonzero reserved bytes: the file is corrupt", path,
                                s->name);
        s->offset = get_u64(e + E_OFFSET);
        s->size = get_u64(e + E_SIZE);
        s->crc = get_u32(e + E_CRC);
        if (s->offset != align_up(pos))
            return dd_error(DD_ERR_CORRUPT,
                            "%s: section '%s' at offset %llu, expected %llu: the file is corrupt",
                            path, s->name, (unsigned long long)s->offset,
                            (unsigned long long)align_up(pos));
        if (s->size > UINT64_MAX - s->offset)
            return dd_error(DD_ERR_CORRUPT, "%s: section '%s' size %llu overflows: the file is corrupt",
                            path, s->name, (unsigned long long)s->size);
        uint64_t end = s->offset + s->size;
        if (end > fsz)
            return dd_error(DD_ERR_CORRUPT,
                            "%s: truncated: section '%s' needs bytes up to %llu, file has %zu", path,
                            s->name, (unsigned long long)end, fsz);
        pos = end;
    }
    uint64_t want = get_u64(b + H_FILESIZE);
    if (want != pos)
        return dd_error(DD_ERR_CORRUPT,
                        "%s: header says %llu bytes but the sections end at %llu: the file is "
                        "corrupt",
                        path, (unsigned long long)want, (unsigned long long)pos);
    if (fsz > pos)
        return dd_error(DD_ERR_CORRUPT, "%s: %llu unexpected bytes after the last section (file has %zu, "
                        "checkpoint ends at %llu)",
                        path, (unsigned long long)(fsz - pos), fsz, (unsigned long long)pos);

    /* Padding must be zero, data must match its CRC. */
    pos = table_end;
    for (uint32_t i = 0; i < count; i++) {
        section *s = &r->sec[i];
        for (uint64_t k = pos; k < s->offset; k++)
            if (b[k] != 0)
                return dd_error(DD_ERR_CORRUPT,
                                "%s: nonzero padding byte at offset %llu before section '%s': the "
                                "file is corrupt",
                                path, (unsigned long long)k, s->name);
        s->data = r->buf + s->offset;
        uint32_t c = dd_crc32c(0, s->data, (size_t)s->size);
        if (c != s->crc)
            return dd_error(DD_ERR_CORRUPT,
                            "%s: section '%s' CRC mismatch (stored 0x%08x, computed 0x%08x): the "
                            "file is corrupt",
                            path, s->name, (unsigned)s->crc, (unsigned)c);
        pos = s->offset + s->size;
    }
    return DD_OK;
}

dd_status dd_ckpt_open(const char *path, dd_ckpt_reader **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_ckpt_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return dd_error(DD_ERR_ARG, "dd_ckpt_open: empty path");
    dd_ckpt_reader *r = dd_calloc(1, sizeof *r);
    if (!r) return DD_ERR_NOMEM;
    dd_status st;
    r->path = dup_str(path);
    if (!r->path) {
        st = DD_ERR_NOMEM;
        goto fail;
    }
    st = read_file(path, &r->buf, &r->fsize);
    if (st != DD_OK) goto fail;
    st = verify(r);
    if (st != DD_OK) goto fail;
    *out = r;
    return DD_OK;
fail:
    dd_ckpt_close(&r);
    return st;
}

dd_status dd_ckpt_verify(const char *path) {
    dd_ckpt_reader *r = NULL;
    DD_TRY(dd_ckpt_open(path, &r));
    dd_ckpt_close(&r);
    return DD_OK;
}

uint32_t dd_ckpt_version(const dd_ckpt_reader *r) { return r ? r->version : 0; }
size_t dd_ckpt_count(const dd_ckpt_reader *r) { return r ? r->count : 0; }
const char *dd_ckpt_section_name(const dd_ckpt_reader *r, size_t i) {
    return r && i < r->count ? r->sec[i].name : NULL;
}

static const section *find(const dd_ckpt_reader *r, const char *name) {
    if (!r || !name) return NULL;
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->sec[i].name, name) == 0) return &r->sec[i];
    return NULL;
}

int dd_ckpt_has(const dd_ckpt_reader *r, const char *name) { return find(r, name) != NULL; }

dd_status dd_ckpt_get(const dd_ckpt_reader *r, const char *name, const void **data,
                      size_t *bytes) {
    if (!r || !name || !data || !bytes) return dd_error(DD_ERR_ARG, "dd_ckpt_get: NULL argument");
    const section *s = find(r, name);
    if (!s) return dd_error(DD_ERR_FORMAT, "%s: checkpoint has no section '%s'", r->path, name);
    *data = s->data;
    *bytes = (size_t)s->size;
    return DD_OK;
}

dd_status dd_ckpt_get_copy(const dd_ckpt_reader *r, const char *name, void *dst, size_t bytes) {
    const void *p = NULL;
    size_t n = 0;
    DD_TRY(dd_ckpt_get(r, name, &p, &n));
    if (n != bytes)
        return dd_error(DD_ERR_MISMATCH, "%s: section '%s' has %zu bytes, expected %zu", r->path,
                        name, n, bytes);
    if (n) {
        if (!dst) return dd_error(DD_ERR_ARG, "dd_ckpt_get_copy: dst is NULL");
        memcpy(dst, p, n);
    }
    return DD_OK;
}

static dd_status get_scalar(const dd_ckpt_reader *r, const char *name, void *v, const char *what) {
    const void *p = NULL;
    size_t n = 0;
    DD_TRY(dd_ckpt_get(r, name, &p, &n));
    if (n != 8)
        return dd_error(DD_ERR_FORMAT, "%s: section '%s' has %zu bytes, a %s needs 8", r->path, name,
                        n, what);
    memcpy(v, p, 8);
    return DD_OK;
}

dd_status dd_ckpt_get_u64(const dd_ckpt_reader *r, const char *name, uint64_t *v) {
    if (!v) return dd_error(DD_ERR_ARG, "dd_ckpt_get_u64: NULL argument");
    return get_scalar(r, name, v, "u64");
}

dd_status dd_ckpt_get_f64(const dd_ckpt_reader *r, const char *name, double *v) {
    if (!v) return dd_error(DD_ERR_ARG, "dd_ckpt_get_f64: NULL argument");
    return get_scalar(r, name, v, "f64");
}

dd_status dd_ckpt_get_str(const dd_ckpt_reader *r, const char *name, const char **s) {
    if (!s) return dd_error(DD_ERR_ARG, "dd_ckpt_get_str: NULL argument");
    const void *p = NULL;
    size_t n = 0;
    DD_TRY(dd_ckpt_get(r, name, &p, &n));
    const char *c = p;
    if (n == 0 || c[n - 1] != '\0' || memchr(c, '\0', n - 1) != NULL)
        return dd_error(DD_ERR_FORMAT, "%s: section '%s' (%zu bytes) is not a NUL-terminated string",
                        r->path, name, n);
    *s = c;
    return DD_OK;
}
