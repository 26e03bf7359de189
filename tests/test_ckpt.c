/* Tests for the checkpoint container (ckpt.h): byte-exact round trips, refusal of every
 * truncation and every single-bit flip of a small checkpoint, wrong magic / version /
 * byte order, interrupted writes (abort, missing directory, an injected failure at every
 * file-system call of a commit, a real EFBIG from RLIMIT_FSIZE) that leave the previous
 * file intact, and a resume of optimiser + schedule state through a checkpoint. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "ckpt/ckpt_internal.h"
#include "dd_test.h"
#include "distdpd/ckpt.h"
#include "distdpd/optim.h"

static char g_dir[512];

static void path_in(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", g_dir, name);
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    if (fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n) {
        perror(path);
        exit(2);
    }
    fclose(f);
}

/* Number of directory entries other than . and .. whose name contains `needle`. */
static int count_entries(const char *needle) {
    DIR *d = opendir(g_dir);
    int k = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strstr(e->d_name, needle)) k++;
    if (d) closedir(d);
    return k;
}

static void remove_all(void) {
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char p[1024];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(g_dir);
}

/* A small checkpoint with a few typical sections; `tag` changes the contents. */
static dd_status write_small(const char *path, int tag) {
    dd_ckpt_writer *w = NULL;
    DD_TRY(dd_ckpt_write_begin(path, &w));
    float params[40];
    for (int i = 0; i < 40; i++) params[i] = (float)(i * tag) * 0.25f - 3.0f;
    dd_status s = DD_OK;
    if (s == DD_OK) s = dd_ckpt_add_str(w, "model", tag == 1 ? "gru_pa" : "dgru_dpd");
    if (s == DD_OK) s = dd_ckpt_add(w, "params", params, sizeof params);
    if (s == DD_OK) s = dd_ckpt_add_u64(w, "step", 1000u * (unsigned)tag);
    if (s == DD_OK) s = dd_ckpt_add_str(w, "config", "{\"lr\": 0.005, \"batch\": 64}");
    if (s != DD_OK) {
        dd_ckpt_abort(&w);
        return s;
    }
    return dd_ckpt_write_commit(&w);
}

/* ---- round trip ------------------------------------------------------------------- */

static void test_round_trip(void) {
    char path[1024];
    path_in(path, sizeof path, "rt.ckpt");
    enum { NS = 9 };
    static const char *names[NS] = {"empty", "one", "a63", "a64", "a65", "params", "step",
                                    "loss", "config"};
    size_t sizes[NS] = {0, 1, 63, 64, 65, 4096 * 4 + 12, 8, 8, 0};
    unsigned char *data[NS];
    dd_rng r;
    dd_rng_seed(&r, 99);
    const char *json = "{\"model\": \"gru\", \"hidden\": 10, \"note\": \"caf\xc3\xa9\"}";
    for (int i = 0; i < NS; i++) {
        if (i == 8) sizes[i] = strlen(json) + 1;
        data[i] = malloc(sizes[i] ? sizes[i] : 1);
        for (size_t k = 0; k < sizes[i]; k++) data[i][k] = (unsigned char)dd_rng_u64(&r);
    }
    uint64_t step = 123456789012345ull;
    double loss = -0.000123456789;
    memcpy(data[6], &step, 8);
    memcpy(data[7], &loss, 8);
    memcpy(data[8], json, sizes[8]);

    for (int pass = 0; pass < 2; pass++) {
        dd_ckpt_writer *w = NULL;
        CHECK_OK(dd_ckpt_write_begin(path, &w));
        for (int i = 0; i < 6; i++) CHECK_OK(dd_ckpt_add(w, names[i], data[i], sizes[i]));
        CHECK_OK(dd_ckpt_add_u64(w, "step", step));
        CHECK_OK(dd_ckpt_add_f64(w, "loss", loss));
        CHECK_OK(dd_ckpt_add_str(w, "config", json));
        CHECK_OK(dd_ckpt_write_commit(&w));
        CHECK(w == NULL, "commit must NULL the writer");
        if (pass == 0) {
            /* deterministic bytes: the same content written again gives the same file */
            size_t n1 = 0, n2 = 0;
            unsigned char *a = read_all(path, &n1);
            CHECK_OK(dd_ckpt_write_begin(path, &w));
            for (int i = 0; i < 6; i++) CHECK_OK(dd_ckpt_add(w, names[i], data[i], sizes[i]));
            CHECK_OK(dd_ckpt_add_u64(w, "step", step));
            CHECK_OK(dd_ckpt_add_f64(w, "loss", loss));
            CHECK_OK(dd_ckpt_add_str(w, "config", json));
            CHECK_OK(dd_ckpt_write_commit(&w));
            unsigned char *b = read_all(path, &n2);
            CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0, "rewriting changed the bytes");
            free(a);
            free(b);
        }
    }
    dd_ckpt_reader *rd = NULL;
    CHECK_OK(dd_ckpt_open(path, &rd));
    if (!rd) return;
    CHECK(dd_ckpt_version(rd) == DD_CKPT_VERSION, "version %u", dd_ckpt_version(rd));
    CHECK(dd_ckpt_count(rd) == NS, "count %zu", dd_ckpt_count(rd));
    for (int i = 0; i < NS; i++) {
        CHECK(dd_ckpt_section_name(rd, (size_t)i) &&
                  strcmp(dd_ckpt_section_name(rd, (size_t)i), names[i]) == 0,
              "section %d name", i);
        const void *p = NULL;
        size_t n = 99;
        CHECK_OK(dd_ckpt_get(rd, names[i], &p, &n));
        CHECK(p != NULL && n == sizes[i], "section %s: %zu bytes, want %zu", names[i], n, sizes[i]);
        CHECK(p && ((uintptr_t)p % DD_CKPT_ALIGN) == 0, "section %s not 64-byte aligned", names[i]);
        CHECK(p && memcmp(p, data[i], sizes[i]) == 0, "section %s: bytes differ", names[i]);
    }
    CHECK(dd_ckpt_section_name(rd, NS) == NULL, "name past the end");
    CHECK(dd_ckpt_has(rd, "params") && !dd_ckpt_has(rd, "nothere"), "has");
    uint64_t s2 = 0;
    double l2 = 0;
    const char *cfg = NULL;
    CHECK_OK(dd_ckpt_get_u64(rd, "step", &s2));
    CHECK_OK(dd_ckpt_get_f64(rd, "loss", &l2));
    CHECK_OK(dd_ckpt_get_str(rd, "config", &cfg));
    CHECK(s2 == step && l2 == loss && cfg && strcmp(cfg, json) == 0, "typed values differ");
    unsigned char *copy = malloc(sizes[5]);
    CHECK_OK(dd_ckpt_get_copy(rd, "params", copy, sizes[5]));
    CHECK(memcmp(copy, data[5], sizes[5]) == 0, "get_copy bytes");
    CHECK_ERR(dd_ckpt_get_copy(rd, "params", copy, sizes[5] - 4), DD_ERR_MISMATCH, "expected");
    CHECK_ERR(dd_ckpt_get_copy(rd, "optim_state", copy, 4), DD_ERR_FORMAT, "'optim_state'");
    CHECK(strstr(dd_last_error(), "rt.ckpt") != NULL, "missing-section message names the file: %s",
          dd_last_error());
    CHECK_ERR(dd_ckpt_get_u64(rd, "a63", &s2), DD_ERR_FORMAT, "u64 needs 8");
    CHECK_ERR(dd_ckpt_get_str(rd, "a64", &cfg), DD_ERR_FORMAT, "not a NUL-terminated");
    CHECK_ERR(dd_ckpt_get_str(rd, "empty", &cfg), DD_ERR_FORMAT, "not a NUL-terminated");
    free(copy);
    dd_ckpt_close(&rd);
    CHECK(rd == NULL, "close must NULL the reader");
    CHECK_OK(dd_ckpt_verify(path));
    for (int i = 0; i < NS; i++) free(data[i]);

    /* an empty checkpoint is valid too */
    char p0[1024];
    path_in(p0, sizeof p0, "empty.ckpt");
    dd_ckpt_writer *w = NULL;
    CHECK_OK(dd_ckpt_write_begin(p0, &w));
    CHECK_OK(dd_ckpt_write_commit(&w));
    CHECK_OK(dd_ckpt_open(p0, &rd));
    CHECK(rd && dd_ckpt_count(rd) == 0, "empty checkpoint");
    dd_ckpt_close(&rd);
    CHECK(count_entries(".tmp.") == 0, "temporary files left behind");
}

/* Bad names and duplicates are refused; the writer stays usable. */
static void test_writer_validation(void) {
    char path[1024];
    path_in(path, sizeof path, "names.ckpt");
    dd_ckpt_writer *w = NULL;
    CHECK_ERR(dd_ckpt_write_begin("", &w), DD_ERR_ARG, "empty");
    CHECK(w == NULL, "no writer on error");
    CHECK_OK(dd_ckpt_write_begin(path, &w));
    int x = 5;
    CHECK_ERR(dd_ckpt_add(w, "", &x, 4), DD_ERR_ARG, "characters");
    CHECK_ERR(dd_ckpt_add(w, "0123456789012345678901234567890123", &x, 4), DD_ERR_ARG,
              "34 characters");
    CHECK_ERR(dd_ckpt_add(w, "has space", &x, 4), DD_ERR_ARG, "character 4");
    CHECK_ERR(dd_ckpt_add(w, "x", NULL, 4), DD_ERR_ARG, "NULL");
    CHECK_OK(dd_ckpt_add(w, "layer.0/weight:ih-1_ok", &x, 4));
    CHECK_OK(dd_ckpt_add(w, "0123456789012345678901234567890", &x, 4)); /* 31 characters */
    CHECK_ERR(dd_ckpt_add(w, "layer.0/weight:ih-1_ok", &x, 4), DD_ERR_ARG, "twice");
    CHECK_OK(dd_ckpt_write_commit(&w));
    dd_ckpt_reader *r = NULL;
    CHECK_OK(dd_ckpt_open(path, &r));
    CHECK(r && dd_ckpt_count(r) == 2, "two sections");
    dd_ckpt_close(&r);
    CHECK_ERR(dd_ckpt_write_commit(&w), DD_ERR_ARG, "NULL");
    dd_ckpt_abort(&w); /* NULL-safe */
}

/* ---- damaged files ---------------------------------------------------------------- */

static void test_truncation(void) {
    char path[1024], bad[1024];
    path_in(path, sizeof path, "small.ckpt");
    path_in(bad, sizeof bad, "trunc.ckpt");
    CHECK_OK(write_small(path, 1));
    size_t n = 0;
    unsigned char *b = read_all(path, &n);
    CHECK(b && n > 300, "small checkpoint has %zu bytes", n);
    int refused = 0, wrong_msg = 0, sections_named = 0;
    for (size_t len = 0; len < n; len++) { /* every truncation length */
        write_bytes(bad, b, len);
        dd_ckpt_reader *r = NULL;
        dd_status s = dd_ckpt_open(bad, &r);
        if (s == DD_ERR_CORRUPT && r == NULL) refused++;
        if (!strstr(dd_last_error(), "truncated")) {
            if (wrong_msg++ < 3) fprintf(stderr, "len %zu: %s\n", len, dd_last_error());
        }
        if (strstr(dd_last_error(), "truncated: section '")) sections_named++;
        dd_ckpt_close(&r);
    }
    CHECK(refused == (int)n, "%d of %zu truncations refused with DD_ERR_CORRUPT", refused, n);
    CHECK(wrong_msg == 0, "%d truncation messages lack 'truncated'", wrong_msg);
    CHECK(sections_named > 0, "no message named the section a truncation cut");
    /* one message verbatim */
    write_bytes(bad, b, n - 10);
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_CORRUPT, "truncated: section 'config' needs bytes up to");
    char want[64];
    snprintf(want, sizeof want, "file has %zu", n - 10);
    CHECK(strstr(dd_last_error(), want) != NULL, "message '%s' lacks '%s'", dd_last_error(), want);
    /* trailing garbage */
    unsigned char *longer = malloc(n + 3);
    memcpy(longer, b, n);
    memcpy(longer + n, "xyz", 3);
    write_bytes(bad, longer, n + 3);
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_CORRUPT, "3 unexpected bytes");
    free(longer);
    free(b);
    printf("truncation: %zu lengths, all refused\n", n);
}

static void test_bit_flips(void) {
    char path[1024], bad[1024];
    path_in(path, sizeof path, "small.ckpt");
    path_in(bad, sizeof bad, "flip.ckpt");
    CHECK_OK(write_small(path, 1));
    size_t n = 0;
    unsigned char *b = read_all(path, &n);
    if (!b) return;
    long accepted = 0, corrupt = 0, format = 0, other = 0;
    for (size_t bit = 0; bit < 8 * n; bit++) { /* every single bit */
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        write_bytes(bad, b, n);
        dd_status s = dd_ckpt_verify(bad);
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        if (s == DD_OK) {
            if (accepted++ < 5) fprintf(stderr, "bit %zu flipped: accepted\n", bit);
        } else if (s == DD_ERR_CORRUPT) {
            corrupt++;
        } else if (s == DD_ERR_FORMAT) {
            format++;
        } else {
            if (other++ < 5) fprintf(stderr, "bit %zu: %s: %s\n", bit, dd_status_str(s), dd_last_error());
        }
    }
    CHECK(accepted == 0, "%ld single-bit flips accepted", accepted);
    CHECK(other == 0, "%ld flips refused with an unexpected status", other);
    CHECK(format == 64, "%ld flips reported as FORMAT (want the 64 magic bits)", format);
    printf("bit flips: %zu bits, %ld refused as corrupt, %ld as format (the magic)\n",
           8 * n, corrupt, format);
    /* one data bit: the message names the section and both CRCs */
    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    c[n - 5] ^= 0x10;
    write_bytes(bad, c, n);
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_CORRUPT, "section 'config' CRC mismatch (stored 0x");
    CHECK(strstr(dd_last_error(), "the file is corrupt") && strstr(dd_last_error(), "flip.ckpt"),
          "message: %s", dd_last_error());
    free(c);
    free(b);
}

/* Rewrites header fields of a valid file and fixes the header CRC, so that the checks
 * behind the CRC are reached. */
static void set_u32_fix_crc(unsigned char *b, size_t off, uint32_t v, int swapped_crc) {
    memcpy(b + off, &v, 4);
    uint32_t crc = dd_crc32c(0, b, 44);
    if (swapped_crc)
        crc = (crc >> 24) | ((crc >> 8) & 0xff00u) | ((crc << 8) & 0xff0000u) | (crc << 24);
    memcpy(b + 44, &crc, 4);
}

static void test_incompatible(void) {
    char path[1024], bad[1024];
    path_in(path, sizeof path, "small.ckpt");
    path_in(bad, sizeof bad, "incompat.ckpt");
    CHECK_OK(write_small(path, 1));
    size_t n = 0;
    unsigned char *b = read_all(path, &n);
    REQUIRE(b && n > 0, "cannot read %s", path);
    unsigned char *c = malloc(n);
    REQUIRE(c, "out of memory");

    memcpy(c, b, n);
    set_u32_fix_crc(c, 8, 2, 0);
    write_bytes(bad, c, n);
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_FORMAT, "written by format version 2, this build reads <= 1");

    memcpy(c, b, n);
    set_u32_fix_crc(c, 8, 0, 0);
    write_bytes(bad, c, n);
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_CORRUPT, "version 0");

    memcpy(c, b, n);
    set_u32_fix_crc(c, 12, 0x04030201u, 1); /* as a big-endian writer would store it */
    write_bytes(bad, c, n);
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_FORMAT, "other byte order");

    memcpy(c, b, n);
    set_u32_fix_crc(c, 20, 1, 0); /* unknown flag */
    write_bytes(bad, c, n);
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_FORMAT, "flags");

    memcpy(c, b, n);
    memcpy(c, "DDPDCKPX", 8);
    write_bytes(bad, c, n);
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_FORMAT, "not a distdpd checkpoint");

    dd_test_write(bad, "I,Q\n0.1,0.2\n");
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_FORMAT, "not a distdpd checkpoint (starts with \"I,Q\\x0a");

    dd_test_write(bad, "");
    CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_CORRUPT, "truncated");

    char missing[1024];
    path_in(missing, sizeof missing, "does-not-exist.ckpt");
    CHECK_ERR(dd_ckpt_verify(missing), DD_ERR_IO, "No such file");
    CHECK_ERR(dd_ckpt_verify(g_dir), DD_ERR_IO, ": Is a directory");
    /* a FIFO without a writer: refused at once (a plain open() waited for a writer) */
    char fifo[1024];
    path_in(fifo, sizeof fifo, "fifo.ckpt");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    CHECK_ERR(dd_ckpt_verify(fifo), DD_ERR_IO, "fifo.ckpt: not a regular file (a FIFO)");
    remove(fifo);
    dd_ckpt_reader *r = (dd_ckpt_reader *)&r;
    CHECK_ERR(dd_ckpt_open(missing, &r), DD_ERR_IO, "does-not-exist.ckpt");
    CHECK(r == NULL, "open must set *out = NULL on failure");
    free(b);
    free(c);
}

/* The structural checks behind both CRCs: a table entry or header field is rewritten and
 * the table CRC (header bytes 32..35) and the header CRC (44..47) recomputed, as a buggy
 * writer (not a bit flip) would leave the file. Each is refused with the exact reason;
 * the original file is untouched and still verifies. */
static void fix_crcs(unsigned char *b, size_t n) {
    uint32_t count, crc;
    memcpy(&count, b + 16, 4);
    if (48 + (size_t)count * 64 <= n) { /* (a count too large for the file is refused before) */
        crc = dd_crc32c(0, b + 48, (size_t)count * 64);
        memcpy(b + 32, &crc, 4);
    }
    crc = dd_crc32c(0, b, 44);
    memcpy(b + 44, &crc, 4);
}

static void test_corrupt_structure(void) {
    char path[1024], bad[1024];
    path_in(path, sizeof path, "struct.ckpt");
    path_in(bad, sizeof bad, "struct-bad.ckpt");
    CHECK_OK(write_small(path, 1)); /* sections model, params, step, config */
    size_t n = 0;
    unsigned char *b = read_all(path, &n);
    REQUIRE(b && n > 0, "cannot read %s", path);
    unsigned char *c = malloc(n);
    REQUIRE(c, "out of memory");
    static const struct {
        size_t off;      /* where to write */
        const char *val; /* bytes written there (len bytes) */
        size_t len;
        const char *msg;
    } cases[] = {
        {12, "\x44\x33\x22\x11", 4, "bad endianness marker 0x11223344: the file is corrupt"},
        {37, "\x01", 1, "nonzero reserved header byte 37: the file is corrupt"},
        {16, "\x01\x10\x00\x00", 4, "4097 sections (at most 4096): the file is corrupt"},
        {48 + 64 + 2, " ", 1, "section 1 has an invalid name: the file is corrupt"},           /* "pa ams" */
        {48 + 64, "model\0", 6, "section 'model' appears twice: the file is corrupt"},          /* entry 1 named model */
        {48 + 60, "\x07", 1, "section 'model': nonzero reserved bytes: the file is corrupt"},   /* entry 0, byte 60 */
        {48 + 32, "\x08\x01\x00\x00\x00\x00\x00\x00", 8, "section 'model' at offset 264, expected"},
        {48 + 64 + 40, "\xff\xff\xff\xff\xff\xff\xff\xff", 8, "section 'params' size 18446744073709551615 overflows"},
        {24, "\x01\x00\x00\x00\x00\x00\x01\x00", 8, "header says 281474976710657 bytes but the sections end at"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(c, b, n);
        memcpy(c + cases[k].off, cases[k].val, cases[k].len);
        fix_crcs(c, n);
        write_bytes(bad, c, n);
        CHECK_ERR(dd_ckpt_verify(bad), DD_ERR_CORRUPT, cases[k].msg);
        dd_ckpt_reader *r = (dd_ckpt_reader *)&r;
        CHECK_ERR(dd_ckpt_open(bad, &r), DD_ERR_CORRUPT, cases[k].msg);
        CHECK(r == NULL, "case %zu: open leaves *out NULL", k);
    }
    CHECK_OK(dd_ckpt_verify(path)); /* the original is untouched */
    free(b);
    free(c);
}

/* ---- interrupted writes ----------------------------------------------------------- */

static int same_file(const char *path, const unsigned char *want, size_t n) {
    size_t m = 0;
    unsigned char *b = read_all(path, &m);
    int same = b && m == n && memcmp(b, want, n) == 0;
    free(b);
    return same;
}

static void test_interrupted_writes(void) {
    char path[1024];
    path_in(path, sizeof path, "model.ckpt");
    CHECK_OK(write_small(path, 1));
    size_t n1 = 0;
    unsigned char *v1 = read_all(path, &n1);
    if (!v1) return;

    /* abort after a partial add */
    dd_ckpt_writer *w = NULL;
    CHECK_OK(dd_ckpt_write_begin(path, &w));
    CHECK_OK(dd_ckpt_add_str(w, "model", "v2"));
    dd_ckpt_abort(&w);
    CHECK(w == NULL, "abort must NULL the writer");
    CHECK(same_file(path, v1, n1), "abort changed the previous checkpoint");

    /* a path in a directory that does not exist */
    char nodir[1024];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.ckpt", g_dir);
    CHECK_ERR(write_small(nodir, 2), DD_ERR_IO, "cannot create temporary file");
    CHECK(strstr(dd_last_error(), "No such file or directory") != NULL, "message: %s", dd_last_error());

    /* the size of a full commit, in counted file-system calls */
    CHECK_OK(write_small(path, 1));
    int ops = dd_ckpt_fault_ops();
    CHECK(ops >= 7, "a commit makes %d counted calls", ops);
    /* fail each call in turn (ENOSPC, then EIO) */
    int failures = 0, intact = 0, after_rename = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int nth = 1; nth <= ops; nth++) {
            CHECK(same_file(path, v1, n1), "setup: v1 not in place");
            dd_ckpt_fault_inject(nth, pass ? EIO : ENOSPC);
            dd_status s = write_small(path, 2);
            dd_ckpt_fault_inject(0, 0);
            const char *op = dd_ckpt_fault_last_op();
            CHECK(s == DD_ERR_IO, "fault at call %d (%s): %s", nth, op, dd_status_str(s));
            CHECK(strstr(dd_last_error(), pass ? "Input/output error" : "No space left"),
                  "fault at %s: message '%s'", op, dd_last_error());
            if (s == DD_ERR_IO) failures++;
            if (strcmp(op, "diropen") == 0 || strcmp(op, "dirfsync") == 0) {
                /* the rename happened: the new file is complete and valid */
                CHECK_OK(dd_ckpt_verify(path));
                CHECK(strstr(dd_last_error(), "durability") != NULL, "message: %s", dd_last_error());
                after_rename++;
                CHECK_OK(write_small(path, 1)); /* put v1 back */
            } else {
                int same = same_file(path, v1, n1);
                CHECK(same, "fault at %s: previous checkpoint changed", op);
                intact += same;
            }
            CHECK(count_entries(".tmp.") == 0, "fault at %s: temporary file left behind", op);
        }
    }
    CHECK(after_rename == 4, "%d faults after the rename", after_rename);
    printf("fault injection: %d calls per commit, %d injected failures, previous file intact in "
           "%d, new file complete in %d (directory sync failed)\n",
           ops, failures, intact, after_rename);
    CHECK_OK(write_small(path, 2)); /* no fault armed: works again */
    dd_ckpt_reader *r = NULL;
    uint64_t step = 0;
    CHECK_OK(dd_ckpt_open(path, &r));
    CHECK_OK(dd_ckpt_get_u64(r, "step", &step));
    CHECK(step == 2000, "v2 step %llu", (unsigned long long)step);
    dd_ckpt_close(&r);

    /* a real write error: the file-size limit makes write() fail with EFBIG */
    CHECK_OK(write_small(path, 1));
    struct rlimit old;
    if (getrlimit(RLIMIT_FSIZE, &old) == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = old;
        lim.rlim_cur = 100;
        if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            dd_status s = write_small(path, 2);
            setrlimit(RLIMIT_FSIZE, &old);
            CHECK(s == DD_ERR_IO, "write beyond RLIMIT_FSIZE: %s", dd_status_str(s));
            CHECK(strstr(dd_last_error(), "write to") && strstr(dd_last_error(), "too large"),
                  "message: %s", dd_last_error());
            CHECK(same_file(path, v1, n1), "EFBIG: previous checkpoint changed");
            CHECK(count_entries(".tmp.") == 0, "EFBIG: temporary file left behind");
            printf("RLIMIT_FSIZE: %s\n", dd_last_error());
        }
        signal(SIGXFSZ, SIG_DFL);
    }
    free(v1);
}

/* ---- integration: optimiser + schedule state through a checkpoint ----------------- */

static void test_resume_through_checkpoint(void) {
    enum { N = 96, STEPS = 12, CUT = 5 };
    char path[1024];
    path_in(path, sizeof path, "resume.ckpt");
    float w[N], wr[N], g[STEPS][N];
    dd_rng rng;
    dd_rng_seed(&rng, 2024);
    for (int i = 0; i < N; i++) w[i] = (float)dd_rng_normal(&rng) * 0.1f;
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < N; i++) g[s][i] = (float)dd_rng_normal(&rng);
    dd_lr_cfg lc = dd_lr_cfg_default(DD_LR_COSINE, 5e-3);
    lc.t_max = STEPS;
    lc.warmup = 3;
    dd_lr_sched sched;
    CHECK_OK(dd_lr_sched_init(&sched, &lc));
    dd_optim *opt = NULL;
    CHECK_OK(dd_optim_create("adamw", NULL, N, &opt));
    for (int s = 0; s < STEPS; s++) {
        if (s == CUT) { /* checkpoint */
            dd_ckpt_writer *wr_ = NULL;
            CHECK_OK(dd_ckpt_write_begin(path, &wr_));
            CHECK_OK(dd_ckpt_add(wr_, "params", w, sizeof w));
            size_t nb = dd_optim_state_bytes(opt);
            void *blob = malloc(nb);
            CHECK_OK(dd_optim_state_save(opt, blob, nb));
            CHECK_OK(dd_ckpt_add(wr_, "optim_state", blob, nb));
            free(blob);
            CHECK_OK(dd_ckpt_add(wr_, "lr_sched", &sched, sizeof sched));
            CHECK_OK(dd_ckpt_add(wr_, "rng", &rng, sizeof rng));
            CHECK_OK(dd_ckpt_add_u64(wr_, "step", (uint64_t)s));
            CHECK_OK(dd_ckpt_write_commit(&wr_));
        }
        float gs[N];
        memcpy(gs, g[s], sizeof gs);
        CHECK_OK(dd_clip_grad_norm(gs, N, 5.0, NULL));
        CHECK_OK(dd_optim_step(opt, w, gs, dd_lr_sched_lr(&sched, s)));
    }
    /* resume in fresh objects */
    dd_ckpt_reader *r = NULL;
    CHECK_OK(dd_ckpt_open(path, &r));
    if (!r) return;
    dd_optim *o2 = NULL;
    dd_lr_sched s2;
    uint64_t step = 0;
    const void *blob = NULL;
    size_t nb = 0;
    CHECK_OK(dd_optim_create("adamw", NULL, N, &o2));
    CHECK_OK(dd_ckpt_get_copy(r, "params", wr, sizeof wr));
    CHECK_OK(dd_ckpt_get(r, "optim_state", &blob, &nb));
    CHECK_OK(dd_optim_state_load(o2, blob, nb));
    CHECK_OK(dd_ckpt_get_copy(r, "lr_sched", &s2, sizeof s2));
    CHECK_OK(dd_lr_sched_check(&s2));
    CHECK_OK(dd_ckpt_get_u64(r, "step", &step));
    dd_ckpt_close(&r);
    CHECK(step == CUT && dd_optim_steps(o2) == CUT, "resumed at %llu", (unsigned long long)step);
    for (int s = (int)step; s < STEPS; s++) {
        float gs[N];
        memcpy(gs, g[s], sizeof gs);
        CHECK_OK(dd_clip_grad_norm(gs, N, 5.0, NULL));
        CHECK_OK(dd_optim_step(o2, wr, gs, dd_lr_sched_lr(&s2, s)));
    }
    CHECK(memcmp(w, wr, sizeof w) == 0, "resumed training differs from the uninterrupted run");
    dd_optim_destroy(&opt);
    dd_optim_destroy(&o2);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", dd_test_tmpdir());
    test_round_trip();
    test_writer_validation();
    test_truncation();
    test_bit_flips();
    test_incompatible();
    test_corrupt_structure();
    test_interrupted_writes();
    test_resume_through_checkpoint();
    remove_all();
    return dd_test_done("test_ckpt");
}
