/* distdpd's binary dataset format (.ddb): a 4096-byte header (magic, version, byte-order
 * marker, spec, split counts, block offsets, block CRCs, header CRC32C) followed by six
 * page-aligned blocks of interleaved float32 I/Q (train in/out, val in/out, test in/out).
 * Readers memory-map the file read-only so datasets larger than RAM can be used and each
 * rank touches only its slice; the writer streams to PATH.tmp, fsyncs and renames.
 * The byte-by-byte layout is in docs/formats.md. */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"

#define BIN_MAGIC "DDPDBIN1"
#define BIN_VERSION 1u
#define BIN_ENDIAN 0x01020304u
#define BIN_HEADER 4096u
#define BIN_ALIGN 4096u
#define BIN_SAMPLE 8u /* bytes per complex float32 sample */

/* Field offsets inside the header. */
enum {
    H_MAGIC = 0,
    H_VERSION = 8,
    H_ENDIAN = 12,
    H_HSIZE = 16,
    H_FLAGS = 20,
    H_FS = 24,
    H_BW_MAIN = 32,
    H_BW_SUB = 40,
    H_BW_OCC = 48,
    H_NSUB = 56,
    H_NPERSEG = 64,
    H_SPLIT = 72,     /* 3 x f64 */
    H_COUNT = 96,     /* 3 x u64 */
    H_OFFSET = 120,   /* 6 x u64: train in, train out, val in, val out, test in, test out */
    H_FILESIZE = 168, /* u64 */
    H_BLOCKCRC = 176, /* 6 x u32 */
    H_CRC = 4092      /* u32: CRC32C of bytes [0, 4092) */
};

struct dd_bin_view {
    void *map;                       /* read-only shared mapping of the whole file */
    size_t map_len;                  /* its length (the file size) */
    dd_spec spec;                    /* from the header */
    size_t n[DD_SPLIT_COUNT];        /* samples per split */
    uint64_t off[2 * DD_SPLIT_COUNT]; /* block byte offsets (in, out per split) */
    uint32_t crc[2 * DD_SPLIT_COUNT]; /* block CRC32Cs */
    char path[DD_PATH_MAX];          /* file name, for messages */
};

struct dd_bin_writer {
    int fd;                            /* the temporary file */
    char path[DD_PATH_MAX];            /* final name */
    char tmp[DD_PATH_MAX];             /* path + ".tmp" */
    dd_spec spec;                      /* stored in the header */
    size_t n[DD_SPLIT_COUNT];          /* announced counts */
    size_t done[DD_SPLIT_COUNT];       /* samples written so far per split */
    uint64_t off[2 * DD_SPLIT_COUNT];  /* block offsets */
    uint32_t crc[2 * DD_SPLIT_COUNT];  /* running block CRCs */
    uint64_t file_size;                /* total size */
};

static void put32(unsigned char *h, size_t at, uint32_t v) { memcpy(h + at, &v, 4); }
static void put64(unsigned char *h, size_t at, uint64_t v) { memcpy(h + at, &v, 8); }
static void putf64(unsigned char *h, size_t at, double v) { memcpy(h + at, &v, 8); }
static uint32_t get32(const unsigned char *h, size_t at) {
    uint32_t v;
    memcpy(&v, h + at, 4);
    return v;
}
static uint64_t get64(const unsigned char *h, size_t at) {
    uint64_t v;
    memcpy(&v, h + at, 8);
    return v;
}
static double getf64(const unsigned char *h, size_t at) {
    double v;
    memcpy(&v, h + at, 8);
    return v;
}

static uint64_t align_up(uint64_t x) { return (x + BIN_ALIGN - 1) / BIN_ALIGN * BIN_ALIGN; }

static const char *block_name(int b) {
    static const char *const names[6] = {"train input", "train output", "val input",
                                         "val output",  "test input",   "test output"};
    return names[b];
}

/* pread until n bytes or end of file; returns bytes read or -1. */
static ssize_t pread_full(int fd, void *buf, size_t n, off_t at) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, at + (off_t)got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static dd_status pwrite_full(int fd, const void *buf, size_t n, uint64_t at, const char *path) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = pwrite(fd, (const char *)buf + done, n - done, (off_t)(at + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            return dd_error(DD_ERR_IO, "write %s: %s", path, strerror(errno));
        }
        done += (size_t)r;
    }
    return DD_OK;
}

int dd_bin_is_bin(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY); /* a FIFO must not block */
    if (fd < 0) return 0;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return 0;
    }
    char m[8];
    ssize_t r = pread_full(fd, m, 8, 0);
    close(fd);
    return r == 8 && memcmp(m, BIN_MAGIC, 8) == 0;
}

/* Parses and validates a header (h: BIN_HEADER bytes) of a file of fsize bytes. */
static dd_status parse_header(dd_bin_view *v, const unsigned char *h, uint64_t fsize) {
    const char *p = v->path;
    uint32_t ver = get32(h, H_VERSION);
    if (ver != BIN_VERSION)
        return dd_error(DD_ERR_UNSUPPORTED, "%s: unsupported format version %u (this build reads %u)",
                        p, ver, BIN_VERSION);
    uint32_t endian = get32(h, H_ENDIAN);
    if (endian != BIN_ENDIAN)
        return dd_error(endian == 0x04030201u ? DD_ERR_UNSUPPORTED : DD_ERR_CORRUPT,
                        "%s: byte-order marker 0x%08x does not match this host (0x%08x)", p, endian,
                        BIN_ENDIAN);
    uint32_t stored = get32(h, H_CRC), crc = dd_crc32c(0, h, H_CRC);
    if (stored != crc)
        return dd_error(DD_ERR_CORRUPT,
                        "%s: header checksum mismatch (stored 0x%08x, computed 0x%08x): corrupt file",
                        p, stored, crc);
    uint32_t hs = get32(h, H_HSIZE);
    if (hs != BIN_HEADER)
        return dd_error(DD_ERR_FORMAT, "%s: header size %u, expected %u", p, hs, BIN_HEADER);
    if (get32(h, H_FLAGS) != 0)
        return dd_error(DD_ERR_UNSUPPORTED, "%s: unknown header flags 0x%08x", p, get32(h, H_FLAGS));
    dd_spec *s = &v->spec;
    s->fs = getf64(h, H_FS);
    s->bw_main = getf64(h, H_BW_MAIN);
    s->bw_sub = getf64(h, H_BW_SUB);
    s->bw_occupied = getf64(h, H_BW_OCC);
    int64_t nsub;
    uint64_t nper = get64(h, H_NPERSEG);
    memcpy(&nsub, h + H_NSUB, 8);
    if (nsub < 1 || nsub > 2147483647)
        return dd_error(DD_ERR_RANGE, "%s: field 'n_sub_ch' must be in [1, 2^31), found %lld", p,
                        (long long)nsub);
    if (nper > (uint64_t)1e15)
        return dd_error(DD_ERR_RANGE, "%s: field 'nperseg' out of range: %llu", p,
                        (unsigned long long)nper);
    s->n_sub = (int)nsub;
    s->nperseg = (size_t)nper;
    for (int i = 0; i < 3; i++) s->split[i] = getf64(h, H_SPLIT + 8 * (size_t)i);
    DD_TRY(dd_spec_check(s, p));

    uint64_t want = get64(h, H_FILESIZE);
    for (int b = 0; b < 6; b++) {
        uint64_t cnt = get64(h, H_COUNT + 8 * (size_t)(b / 2));
        uint64_t off = get64(h, H_OFFSET + 8 * (size_t)b);
        v->off[b] = off;
        v->crc[b] = get32(h, H_BLOCKCRC + 4 * (size_t)b);
        if (cnt > (UINT64_MAX / BIN_SAMPLE) / 2 || cnt > SIZE_MAX / BIN_SAMPLE)
            return dd_error(DD_ERR_FORMAT, "%s: %s block: count %llu too large", p, block_name(b),
                            (unsigned long long)cnt);
        if (off < BIN_HEADER || off % BIN_SAMPLE != 0 || off > UINT64_MAX / 2)
            return dd_error(DD_ERR_FORMAT, "%s: %s block: bad offset %llu", p, block_name(b),
                            (unsigned long long)off);
        uint64_t end = off + cnt * BIN_SAMPLE;
        if (end > want)
            return dd_error(DD_ERR_FORMAT, "%s: %s block ends at byte %llu, past the file size %llu "
                            "in the header", p, block_name(b), (unsigned long long)end,
                            (unsigned long long)want);
        v->n[b / 2] = (size_t)cnt;
    }
    /* Blocks must not overlap. */
    for (int a = 0; a < 6; a++)
        for (int b = a + 1; b < 6; b++) {
            uint64_t a0 = v->off[a], a1 = a0 + v->n[a / 2] * (uint64_t)BIN_SAMPLE;
            uint64_t b0 = v->off[b], b1 = b0 + v->n[b / 2] * (uint64_t)BIN_SAMPLE;
            if (a1 > a0 && b1 > b0 && a0 < b1 && b0 < a1)
                return dd_error(DD_ERR_FORMAT, "%s: %s and %s blocks overlap", p, block_name(a),
                                block_name(b));
        }
    if (fsize < want)
        return dd_error(DD_ERR_CORRUPT, "%s: truncated: expected %llu bytes, found %llu", p,
                        (unsigned long long)want, (unsigned long long)fsize);
    if (fsize > want)
        return dd_error(DD_ERR_CORRUPT, "%s: %llu unexpected trailing bytes (expected %llu bytes, "
                        "found %llu)", p, (unsigned long long)(fsize - want),
                        (unsigned long long)want, (unsigned long long)fsize);
    return DD_OK;
}

dd_status dd_bin_open(const char *path, dd_bin_view **out) {
    if (!path || !out) return dd_error(DD_ERR_ARG, "dd_bin_open: NULL argument");
    *out = NULL;
    dd_status st = DD_OK;
    dd_bin_view *v = calloc(1, sizeof *v);
    if (!v) return dd_error(DD_ERR_NOMEM, "out of memory opening %s", path);
    int fd = -1;
    if ((st = dd_path_cat(v->path, sizeof v->path, path, "")) != DD_OK) goto cleanup;
    uint64_t fsize;
    if ((st = dd_open_regular(path, &fd, &fsize)) != DD_OK) goto cleanup;
    unsigned char h[BIN_HEADER];
    memset(h, 0, sizeof h);
    ssize_t r = pread_full(fd, h, BIN_HEADER, 0);
    if (r < 0) {
        st = dd_error(DD_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        goto cleanup;
    }
    size_t got = (size_t)r, cmp = got < 8 ? got : 8;
    if (memcmp(h, BIN_MAGIC, cmp) != 0 || got == 0) {
        st = dd_error(DD_ERR_FORMAT, "%s: bad magic: not a distdpd binary dataset (expected '%s')",
                      path, BIN_MAGIC);
        goto cleanup;
    }
    if (got < BIN_HEADER) {
        st = dd_error(DD_ERR_CORRUPT, "%s: truncated: expected at least %u bytes (header), found %zu",
                      path, BIN_HEADER, got);
        goto cleanup;
    }
    if ((st = parse_header(v, h, fsize)) != DD_OK) goto cleanup;
    if (fsize > SIZE_MAX) {
        st = dd_error(DD_ERR_UNSUPPORTED, "%s: too large to map on this host", path);
        goto cleanup;
    }
    v->map_len = (size_t)fsize;
    v->map = mmap(NULL, v->map_len, PROT_READ, MAP_SHARED, fd, 0);
    if (v->map == MAP_FAILED) {
        v->map = NULL;
        st = dd_error(DD_ERR_IO, "cannot map %s: %s", path, strerror(errno));
        goto cleanup;
    }
    *out = v;
    v = NULL;
cleanup:
    if (fd >= 0) close(fd);
    if (v) dd_bin_close(&v);
    return st;
}

void dd_bin_close(dd_bin_view **v) {
    if (!v || !*v) return;
    if ((*v)->map) munmap((*v)->map, (*v)->map_len);
    free(*v);
    *v = NULL;
}

const dd_spec *dd_bin_spec(const dd_bin_view *v) { return v ? &v->spec : NULL; }

size_t dd_bin_count(const dd_bin_view *v, dd_split s) {
    if (!v || (unsigned)s >= DD_SPLIT_COUNT) return 0;
    return v->n[s];
}

dd_status dd_bin_slice(const dd_bin_view *v, dd_split s, size_t offset, size_t count,
                       const dd_cf32 **in, const dd_cf32 **out) {
    if (!v) return dd_error(DD_ERR_ARG, "dd_bin_slice: NULL view");
    if ((unsigned)s >= DD_SPLIT_COUNT) return dd_error(DD_ERR_ARG, "dd_bin_slice: bad split %d", (int)s);
    if (offset > v->n[s] || count > v->n[s] - offset)
        return dd_error(DD_ERR_RANGE,
                        "%s: slice [%zu, %zu + %zu) is outside split '%s' of %zu samples", v->path,
                        offset, offset, count, dd_split_name(s), v->n[s]);
    const unsigned char *base = v->map;
    if (in) *in = (const dd_cf32 *)(const void *)(base + v->off[2 * s]) + offset;
    if (out) *out = (const dd_cf32 *)(const void *)(base + v->off[2 * s + 1]) + offset;
    return DD_OK;
}

dd_status dd_bin_advise(const dd_bin_view *v, dd_split s, size_t offset, size_t count,
                        dd_bin_advice advice) {
    const dd_cf32 *a, *b;
    DD_TRY(dd_bin_slice(v, s, offset, count, &a, &b));
    int adv;
    switch (advice) {
    case DD_BIN_NORMAL: adv = MADV_NORMAL; break;
    case DD_BIN_SEQUENTIAL: adv = MADV_SEQUENTIAL; break;
    case DD_BIN_RANDOM: adv = MADV_RANDOM; break;
    case DD_BIN_WILLNEED: adv = MADV_WILLNEED; break;
    case DD_BIN_DONTNEED: adv = MADV_DONTNEED; break;
    default: return dd_error(DD_ERR_ARG, "dd_bin_advise: unknown advice %d", (int)advice);
    }
    if (count == 0) return DD_OK;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096;
    const dd_cf32 *ptrs[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        uintptr_t lo = (uintptr_t)ptrs[k], hi = lo + count * BIN_SAMPLE;
        lo = lo / page * page;
        if (madvise((void *)lo, hi - lo, adv) != 0)
            return dd_error(DD_ERR_IO, "%s: madvise: %s", v->path, strerror(errno));
    }
    return DD_OK;
}

/* Index of the first NaN/Inf among f[0..n), or n. The exponent test on the bits
 * (all ones = Inf or NaN) over blocks of 64 without an early exit lets the compiler
 * vectorise the common all-finite case. */
static size_t first_nonfinite(const float *f, size_t n) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint32_t u[64], bad = 0;
        memcpy(u, f + i, sizeof u);
        for (int k = 0; k < 64; k++) bad |= (uint32_t)((u[k] & 0x7f800000u) == 0x7f800000u);
        if (bad) break;
    }
    for (; i < n; i++)
        if (!isfinite(f[i])) return i;
    return n;
}

/* DD_ERR_RANGE "PATH: split 'train' input, sample 1234 (I) is NaN" for float i of block b. */
static dd_status nonfinite_error(const dd_bin_view *v, int b, size_t i, float x) {
    return dd_error(DD_ERR_RANGE, "%s: split '%s' %s, sample %zu (%s) is %s", v->path,
                    dd_split_name((dd_split)(b / 2)), b % 2 ? "output" : "input", i / 2,
                    i % 2 ? "Q" : "I", isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf");
}

dd_status dd_bin_check_finite(const dd_bin_view *v) {
    const unsigned char *base = v->map;
    const size_t chunk = (size_t)8 << 20; /* bytes per step */
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096;
    unsigned char *vec = malloc(chunk / page + 2); /* page-cache residency of a step */
    /* Pages not in the page cache are read with O_DIRECT into a private buffer, so the
     * pass neither maps them into this process nor adds them to the cache (where another
     * rank's faults would map them around its own frames); cached pages are read through
     * the mapping and unmapped again. Without O_DIRECT (tmpfs, other systems) the
     * mapping is used and the pages it had to read are dropped from the cache after. */
    int fd = open(v->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    int dfd = -1;
    void *dbuf = NULL;
#ifdef O_DIRECT
    dfd = open(v->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_DIRECT);
    if (dfd >= 0 && !(dbuf = aligned_alloc(4096, chunk))) {
        close(dfd);
        dfd = -1;
    }
#endif
    dd_status st = DD_OK;
    for (int b = 0; b < 6 && st == DD_OK; b++) {
        const unsigned char *blk = base + v->off[b];
        size_t bytes = v->n[b / 2] * BIN_SAMPLE;
        for (size_t pos = 0; pos < bytes; pos += chunk) {
            size_t len = bytes - pos < chunk ? bytes - pos : chunk;
            uintptr_t lo = (uintptr_t)(blk + pos) / page * page;
            uintptr_t hi = ((uintptr_t)(blk + pos + len) + page - 1) / page * page;
            size_t npg = (size_t)((hi - lo) / page), cached = 0;
            int have_vec = vec && mincore((void *)lo, hi - lo, vec) == 0;
            for (size_t k = 0; have_vec && k < npg; k++) cached += vec[k] & 1;
            const float *src = NULL;
            if (dfd >= 0 && cached < npg && (v->off[b] + pos) % 4096 == 0) {
                size_t want = (len + 4095) / 4096 * 4096;
                ssize_t r = pread_full(dfd, dbuf, want, (off_t)(v->off[b] + pos));
                if (r >= 0 && (size_t)r >= len) {
                    src = dbuf;
                } else { /* O_DIRECT refused here: the mapping from now on */
                    close(dfd);
                    dfd = -1;
                }
            }
            if (!src) src = (const float *)(const void *)(blk + pos);
            size_t nf = len / sizeof(float), i = first_nonfinite(src, nf);
            if (i < nf) {
                st = nonfinite_error(v, b, pos / sizeof(float) + i, src[i]);
                break;
            }
            if (src == dbuf) continue;
            (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* out of this process */
            for (size_t p0 = 0; have_vec && fd >= 0 && p0 < npg;) { /* and out of the cache */
                if (vec[p0] & 1) {
                    p0++;
                    continue;
                }
                size_t p1 = p0;
                while (p1 < npg && !(vec[p1] & 1)) p1++;
                off_t at = (off_t)(lo - (uintptr_t)base + p0 * page);
                (void)posix_fadvise(fd, at, (off_t)((p1 - p0) * page), POSIX_FADV_DONTNEED);
                p0 = p1;
            }
        }
    }
    /* Reading a page through the mapping also maps the cached pages around it (the
     * kernel's fault-around, 64 KiB by default), beyond the step just released: nothing
     * of the mapping was in use before the pass, so release all of it once more. */
    (void)madvise(v->map, v->map_len, MADV_DONTNEED);
    if (dfd >= 0) close(dfd);
    if (fd >= 0) close(fd);
    free(dbuf);
    free(vec);
    return st;
}

dd_status dd_bin_verify(const dd_bin_view *v) {
    if (!v) return dd_error(DD_ERR_ARG, "dd_bin_verify: NULL view");
    const unsigned char *base = v->map;
    for (int b = 0; b < 6; b++) {
        size_t bytes = v->n[b / 2] * BIN_SAMPLE;
        uint32_t crc = dd_crc32c(0, base + v->off[b], bytes);
        if (crc != v->crc[b])
            return dd_error(DD_ERR_CORRUPT,
                            "%s: %s block checksum mismatch (stored 0x%08x, computed 0x%08x)",
                            v->path, block_name(b), v->crc[b], crc);
    }
    return dd_bin_check_finite(v);
}

/* ---- writer ---- */

dd_status dd_bin_writer_open(const char *path, const dd_spec *spec,
                             const size_t n[DD_SPLIT_COUNT], dd_bin_writer **out) {
    if (!path || !spec || !n || !out) return dd_error(DD_ERR_ARG, "dd_bin_writer_open: NULL argument");
    *out = NULL;
    if (!dd_host_le())
        return dd_error(DD_ERR_UNSUPPORTED, "%s: the binary format needs a little-endian host", path);
    DD_TRY(dd_spec_check(spec, path));
    dd_bin_writer *w = calloc(1, sizeof *w);
    if (!w) return dd_error(DD_ERR_NOMEM, "out of memory writing %s", path);
    w->fd = -1;
    dd_status st = DD_OK;
    if ((st = dd_path_cat(w->path, sizeof w->path, path, "")) != DD_OK ||
        (st = dd_path_cat(w->tmp, sizeof w->tmp, path, ".tmp")) != DD_OK)
        goto fail;
    w->spec = *spec;
    uint64_t pos = BIN_HEADER;
    for (int b = 0; b < 6; b++) {
        size_t cnt = n[b / 2];
        if (cnt > ((uint64_t)1 << 56) / BIN_SAMPLE) {
            st = dd_error(DD_ERR_ARG, "%s: split '%s' count %zu too large", path,
                          dd_split_name((dd_split)(b / 2)), cnt);
            goto fail;
        }
        w->off[b] = pos;
        pos = align_up(pos + (uint64_t)cnt * BIN_SAMPLE);
    }
    /* The last block ends the file exactly (no padding after it). */
    w->file_size = w->off[5] + (uint64_t)n[2] * BIN_SAMPLE;
    for (int s = 0; s < 3; s++) w->n[s] = n[s];
    if ((st = dd_mkdir_parent(path)) != DD_OK) goto fail;
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        st = dd_error(DD_ERR_IO, "cannot create %s: %s", w->tmp, strerror(errno));
        goto fail;
    }
    if (ftruncate(w->fd, (off_t)w->file_size) != 0) {
        st = dd_error(DD_ERR_IO, "cannot size %s to %llu bytes: %s", w->tmp,
                      (unsigned long long)w->file_size, strerror(errno));
        goto fail;
    }
    *out = w;
    return DD_OK;
fail:
    dd_bin_writer_abort(&w);
    return st;
}

dd_status dd_bin_writer_append(dd_bin_writer *w, dd_split s, const dd_cf32 *in,
                               const dd_cf32 *out, size_t count) {
    if (!w) return dd_error(DD_ERR_ARG, "dd_bin_writer_append: NULL writer");
    if ((unsigned)s >= DD_SPLIT_COUNT)
        return dd_error(DD_ERR_ARG, "dd_bin_writer_append: bad split %d", (int)s);
    if (count == 0) return DD_OK;
    if (!in || !out) return dd_error(DD_ERR_ARG, "dd_bin_writer_append: NULL samples");
    if (count > w->n[s] - w->done[s])
        return dd_error(DD_ERR_ARG, "%s: split '%s': appending %zu samples exceeds the %zu announced "
                        "(%zu written)", w->path, dd_split_name(s), count, w->n[s], w->done[s]);
    const dd_cf32 *src[2] = {in, out};
    for (int k = 0; k < 2; k++) {
        const float *f = (const float *)(const void *)src[k];
        for (size_t i = 0; i < 2 * count; i++)
            if (!isfinite(f[i]))
                return dd_error(DD_ERR_RANGE, "%s: split '%s' %s sample %zu is NaN/Inf", w->path,
                                dd_split_name(s), k ? "output" : "input", w->done[s] + i / 2);
    }
    for (int k = 0; k < 2; k++) {
        int b = 2 * (int)s + k;
        uint64_t at = w->off[b] + (uint64_t)w->done[s] * BIN_SAMPLE;
        DD_TRY(pwrite_full(w->fd, src[k], count * BIN_SAMPLE, at, w->tmp));
        w->crc[b] = dd_crc32c(w->crc[b], src[k], count * BIN_SAMPLE);
    }
    w->done[s] += count;
    return DD_OK;
}

dd_status dd_bin_writer_commit(dd_bin_writer **wp) {
    if (!wp || !*wp) return dd_error(DD_ERR_ARG, "dd_bin_writer_commit: NULL writer");
    dd_bin_writer *w = *wp;
    dd_status st = DD_OK;
    for (int s = 0; s < 3; s++)
        if (w->done[s] != w->n[s]) {
            st = dd_error(DD_ERR_ARG, "%s: split '%s' has %zu of %zu samples written", w->path,
                          dd_split_name((dd_split)s), w->done[s], w->n[s]);
            goto fail;
        }
    unsigned char h[BIN_HEADER];
    memset(h, 0, sizeof h);
    memcpy(h + H_MAGIC, BIN_MAGIC, 8);
    put32(h, H_VERSION, BIN_VERSION);
    put32(h, H_ENDIAN, BIN_ENDIAN);
    put32(h, H_HSIZE, BIN_HEADER);
    put32(h, H_FLAGS, 0);
    putf64(h, H_FS, w->spec.fs);
    putf64(h, H_BW_MAIN, w->spec.bw_main);
    putf64(h, H_BW_SUB, w->spec.bw_sub);
    putf64(h, H_BW_OCC, w->spec.bw_occupied);
    int64_t nsub = w->spec.n_sub;
    memcpy(h + H_NSUB, &nsub, 8);
    put64(h, H_NPERSEG, (uint64_t)w->spec.nperseg);
    for (int i = 0; i < 3; i++) {
        putf64(h, H_SPLIT + 8 * (size_t)i, w->spec.split[i]);
        put64(h, H_COUNT + 8 * (size_t)i, (uint64_t)w->n[i]);
    }
    for (int b = 0; b < 6; b++) {
        put64(h, H_OFFSET + 8 * (size_t)b, w->off[b]);
        put32(h, H_BLOCKCRC + 4 * (size_t)b, w->crc[b]);
    }
    put64(h, H_FILESIZE, w->file_size);
    put32(h, H_CRC, dd_crc32c(0, h, H_CRC));
    if ((st = pwrite_full(w->fd, h, sizeof h, 0, w->tmp)) != DD_OK) goto fail;
    if (fsync(w->fd) != 0) {
        st = dd_error(DD_ERR_IO, "fsync %s: %s", w->tmp, strerror(errno));
        goto fail;
    }
    if (close(w->fd) != 0) {
        w->fd = -1;
        st = dd_error(DD_ERR_IO, "close %s: %s", w->tmp, strerror(errno));
        goto fail;
    }
    w->fd = -1;
    if (rename(w->tmp, w->path) != 0) {
        st = dd_error(DD_ERR_IO, "cannot rename %s to %s: %s", w->tmp, w->path, strerror(errno));
        goto fail;
    }
    dd_fsync_parent(w->path);
    free(w);
    *wp = NULL;
    return DD_OK;
fail:
    dd_bin_writer_abort(wp);
    return st;
}

void dd_bin_writer_abort(dd_bin_writer **wp) {
    if (!wp || !*wp) return;
    dd_bin_writer *w = *wp;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp[0]) unlink(w->tmp);
    free(w);
    *wp = NULL;
}
