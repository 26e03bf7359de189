/* Tests of the core services: arena memory accounting (counts, peaks, budget), CRC32C
 * check value, RNG reproducibility and moments, aligned allocation, error messages and
 * status names, and (test_core_errors) the refusals the coverage report showed untested. */
#include "distdpd/core.h"
#include <stddef.h>

#include "dd_test.h"

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Arena accounting: counts per kind, peaks, the budget and its message, free. */
static void test_arena_mem(void) {
    dd_mem_stats s0, s;
    dd_mem_stats_get(&s0);
    float *a = dd_arena_calloc(DD_MEM_PARAMS, 1000, sizeof(float), "test params");
    float *b = dd_arena_calloc(DD_MEM_OPTIM, 3000, sizeof(float), "test optim");
    REQUIRE(a && b && ((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0, "arena blocks not 64-byte aligned");
    CHECK(a[999] == 0.0f && b[0] == 0.0f, "arena blocks not zeroed");
    dd_mem_stats_get(&s);
    CHECK(s.cur[DD_MEM_PARAMS] - s0.cur[DD_MEM_PARAMS] == 4000 && s.cur[DD_MEM_OPTIM] - s0.cur[DD_MEM_OPTIM] == 12000,
          "counted %zu / %zu bytes", s.cur[DD_MEM_PARAMS] - s0.cur[DD_MEM_PARAMS],
          s.cur[DD_MEM_OPTIM] - s0.cur[DD_MEM_OPTIM]);
    dd_arena_free(b);
    dd_mem_stats_get(&s);
    CHECK(s.cur[DD_MEM_OPTIM] == s0.cur[DD_MEM_OPTIM] && s.peak[DD_MEM_OPTIM] >= s0.cur[DD_MEM_OPTIM] + 12000,
          "free or peak wrong");
    /* a budget of 16000 bytes over everything allocated now: 8000 more fit, 20000 do not */
    dd_mem_set_limit(s.cur[DD_MEM_PARAMS] + s.cur[DD_MEM_GRADS] + s.cur[DD_MEM_OPTIM] + s.cur[DD_MEM_ACTIVATIONS] +
                     12000);
    float *c = dd_arena_calloc(DD_MEM_ACTIVATIONS, 2000, sizeof(float), "test workspace");
    CHECK(c != NULL, "8000 bytes within the budget refused: %s", dd_last_error());
    float *d = dd_arena_calloc(DD_MEM_GRADS, 5000, sizeof(float), "the test gradients");
    CHECK(d == NULL, "an allocation above the budget was granted");
    CHECK(strstr(dd_last_error(), "the test gradients") && strstr(dd_last_error(), "--mem-limit-mb") &&
              strstr(dd_last_error(), "grads"),
          "budget message '%s'", dd_last_error());
    dd_mem_set_limit(0);
    dd_arena_free(c);
    dd_arena_free(a);
    dd_arena_free(NULL);
    dd_mem_stats_get(&s);
    for (int k = 0; k < DD_MEM_KINDS; k++) CHECK(s.cur[k] == s0.cur[k], "kind %d not back to its start", k);
    CHECK(dd_mem_peak_rss() > 0, "no peak RSS");
}

/* Arena blocks come from calloc (src/core/mem.c): 64-byte aligned and zero whatever the
 * size, also when the memory is a block just freed after being written all over (glibc
 * reuses it, from the heap or, past its mmap threshold, a fresh mapping), small blocks
 * and those of 4 MB and more (given huge pages) alike. */
static void test_arena_reuse(void) {
    static const size_t sizes[] = {1, 60, 64, 4096, 100000, 1 << 20, (4 << 20) + 100, 24 << 20};
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            unsigned char *a = dd_arena_calloc(DD_MEM_ACTIVATIONS, n, 1, "reuse");
            REQUIRE(a != NULL, "arena %zu bytes: %s", n, dd_last_error());
            CHECK(((uintptr_t)a & 63) == 0, "%zu bytes: block %p not 64-byte aligned", n, (void *)a);
            size_t nonzero = 0;
            for (size_t j = 0; j < n; j += 61) nonzero += a[j] != 0;
            nonzero += a[n - 1] != 0;
            CHECK(nonzero == 0, "round %d, %zu bytes: %zu sampled bytes not zero", round, n, nonzero);
            memset(a, 0xA5, n); /* dirty it for the next round's block of this size */
            dd_arena_free(a);
        }
}

/* The error paths `make coverage` showed untested (docs/testing.md "Coverage"): an arena
 * allocation whose size overflows, the peaks reset, every status name, dd_path_dir's
 * cases, and dd_read_text / dd_open_regular refusing a socket (a real AF_UNIX socket
 * bound in a temporary directory) and a directory. */
static void test_core_errors(void) {
    CHECK(dd_arena_calloc(DD_MEM_GRADS, SIZE_MAX / 8, 16, "the huge block") == NULL, "overflowing arena granted");
    CHECK(strstr(dd_last_error(), "the huge block: allocation of ") && strstr(dd_last_error(), " x 16 bytes overflows"),
          "message: %s", dd_last_error());
    CHECK(dd_arena_calloc((dd_mem_kind)99, SIZE_MAX / 8, 16, NULL) == NULL && strstr(dd_last_error(), "arena: "),
          "unnamed: %s", dd_last_error());
    dd_mem_stats s;
    float *a = dd_arena_calloc(DD_MEM_ACTIVATIONS, 4096, sizeof(float), "peak");
    REQUIRE(a != NULL, "arena: %s", dd_last_error());
    dd_arena_free(a);
    dd_mem_stats_get(&s);
    CHECK(s.peak[DD_MEM_ACTIVATIONS] >= s.cur[DD_MEM_ACTIVATIONS] + 16384, "the peak holds the freed block");
    dd_mem_stats_reset_peaks();
    dd_mem_stats_get(&s);
    size_t total = 0;
    for (int k = 0; k < DD_MEM_KINDS; k++) {
        CHECK(s.peak[k] == s.cur[k], "kind %d: peak %zu after reset, current %zu", k, s.peak[k], s.cur[k]);
        total += s.cur[k];
    }
    CHECK(s.peak_total == total, "peak_total %zu, current %zu", s.peak_total, total);
    CHECK(strcmp(dd_mem_kind_name((dd_mem_kind)-1), "?") == 0 && strcmp(dd_mem_kind_name(DD_MEM_OPTIM), "optim") == 0,
          "kind names");

    static const char *const names[] = {"DD_OK", "DD_ERR_NOMEM", "DD_ERR_ARG", "DD_ERR_IO", "DD_ERR_FORMAT",
                                        "DD_ERR_RANGE", "DD_ERR_MISMATCH", "DD_ERR_UNSUPPORTED", "DD_ERR_NUMERIC",
                                        "DD_ERR_COMM", "DD_ERR_CORRUPT", "DD_ERR_INTERNAL", "DD_ERR_TIMEOUT"};
    static const dd_status sts[] = {DD_OK, DD_ERR_NOMEM, DD_ERR_ARG, DD_ERR_IO, DD_ERR_FORMAT, DD_ERR_RANGE,
                                    DD_ERR_MISMATCH, DD_ERR_UNSUPPORTED, DD_ERR_NUMERIC, DD_ERR_COMM, DD_ERR_CORRUPT,
                                    DD_ERR_INTERNAL, DD_ERR_TIMEOUT};
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++)
        CHECK(strcmp(dd_status_str(sts[i]), names[i]) == 0, "status %d: %s", (int)sts[i], dd_status_str(sts[i]));
    CHECK(strcmp(dd_status_str((dd_status)999), "DD_ERR_UNKNOWN") == 0, "unknown status");

    static const struct {
        const char *path, *dir;
    } dirs[] = {{"a/b/c.json", "a/b"}, {"/x", "/"}, {"name", "."}, {"", "."}, {NULL, "."}, {"/a/b/", "/a/b"}};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char d[64];
        dd_path_dir(dirs[i].path, d, sizeof d);
        CHECK(strcmp(d, dirs[i].dir) == 0, "dd_path_dir(%s) = '%s', want '%s'", dirs[i].path ? dirs[i].path : "NULL",
              d, dirs[i].dir);
    }
    char small[4];
    dd_path_dir("abcdef/g", small, sizeof small);
    CHECK(strcmp(small, "abc") == 0, "cut to the buffer: '%s'", small);
    dd_path_dir("a/b", NULL, 8);
    dd_path_dir("a/b", small, 0); /* no-ops */

    const char *tmp = dd_test_tmpdir();
    char sock_path[600];
    snprintf(sock_path, sizeof sock_path, "%s/sock", tmp);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (fd >= 0 && strlen(sock_path) < sizeof sa.sun_path) {
        memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
        REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind %s", sock_path);
        char *t = NULL;
        size_t len = 0;
        CHECK_ERR(dd_read_text(sock_path, &t, &len), DD_ERR_IO, "sock: ");
        /* open(2) of a socket fails (ENXIO) before the kind is looked at */
        CHECK(t == NULL && strstr(dd_last_error(), "cannot open ") && strstr(dd_last_error(), strerror(ENXIO)),
              "message: %s", dd_last_error());
    } else {
        printf("note: no AF_UNIX socket here (%s): the socket refusal is not exercised\n", tmp);
    }
    if (fd >= 0) close(fd);
    char *t = NULL;
    CHECK_ERR(dd_read_text(tmp, &t, NULL), DD_ERR_IO, "Is a directory");
    CHECK(strcmp(dd_file_kind(S_IFBLK), "a block device") == 0 && strcmp(dd_file_kind(S_IFSOCK), "a socket") == 0 &&
              strcmp(dd_file_kind(S_IFCHR), "a character device") == 0 &&
              strcmp(dd_file_kind(S_IFIFO), "a FIFO") == 0,
          "file kinds");
}

int main(void) {
    test_arena_mem();
    test_arena_reuse();
    test_core_errors();
    /* CRC32C check value from the Castagnoli/iSCSI specification. */
    CHECK(dd_crc32c(0, "123456789", 9) == 0xE3069283u, "crc %08x", dd_crc32c(0, "123456789", 9));
    /* Chaining equals one pass. */
    uint32_t c = dd_crc32c(0, "1234", 4);
    c = dd_crc32c(c, "56789", 5);
    CHECK(c == 0xE3069283u, "chained crc %08x", c);

    /* Seeding zeroes the whole state, padding included: checkpoints copy it byte for byte
     * (valgrind saw 4 uninitialised bytes of a stack dd_rng written by test_ckpt). */
    dd_rng zr;
    memset(&zr, 0xAA, sizeof zr);
    dd_rng_seed(&zr, 7);
    const unsigned char *zb = (const unsigned char *)&zr;
    int pad_zero = 1;
    for (size_t k = offsetof(dd_rng, has_spare) + sizeof zr.has_spare; k < offsetof(dd_rng, spare); k++) pad_zero &= zb[k] == 0;
    CHECK(pad_zero, "dd_rng_seed left the padding after has_spare as it was");

    /* Same seed, same stream; different seed, different stream. */
    dd_rng a, b;
    dd_rng_seed(&a, 42);
    dd_rng_seed(&b, 42);
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= dd_rng_u64(&a) == dd_rng_u64(&b);
    CHECK(same, "streams differ");
    dd_rng_seed(&b, 43);
    CHECK(dd_rng_u64(&a) != dd_rng_u64(&b), "seeds 42 and 43 agree");

    /* Moments of uniform and normal deviates (n = 200000: standard errors ~0.002). */
    dd_rng_seed(&a, 7);
    double su = 0, sn = 0, sn2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = dd_rng_uniform(&a);
        CHECK(u >= 0.0 && u < 1.0, "uniform %g", u);
        su += u;
        double z = dd_rng_normal(&a);
        sn += z;
        sn2 += z * z;
    }
    CHECK_NEAR(su / n, 0.5, 0.005);
    CHECK_NEAR(sn / n, 0.0, 0.01);
    CHECK_NEAR(sn2 / n, 1.0, 0.02);
    /* dd_rng_below stays in range and hits every value. */
    int hist[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t v = dd_rng_below(&a, 7);
        CHECK(v < 7, "below %llu", (unsigned long long)v);
        if (v < 7) hist[v]++;
    }
    for (int i = 0; i < 7; i++) CHECK(hist[i] > 800 && hist[i] < 1200, "bucket %d = %d", i, hist[i]);
    CHECK(dd_hash64(1, 2) == dd_hash64(1, 2) && dd_hash64(1, 2) != dd_hash64(2, 1), "hash64 keys");

    /* Aligned, zeroed allocation; overflow refused. */
    double *p = dd_calloc(1001, sizeof(double));
    CHECK(p != NULL && ((uintptr_t)p % 64) == 0, "alignment");
    int zero = 1;
    for (int i = 0; i < 1001; i++) zero &= p[i] == 0.0;
    CHECK(zero, "not zeroed");
    dd_free(p);
    CHECK(dd_calloc(SIZE_MAX / 2, 4) == NULL, "overflowing allocation succeeded");
    CHECK(strstr(dd_last_error(), "overflows") != NULL, "message: %s", dd_last_error());

    /* Error messages and prefixes. */
    CHECK(dd_error(DD_ERR_FORMAT, "%s:%d: bad", "f.csv", 3) == DD_ERR_FORMAT, "status passthrough");
    dd_error_prefix(DD_ERR_FORMAT, "loading %s: ", "dir");
    CHECK(strcmp(dd_last_error(), "loading dir: f.csv:3: bad") == 0, "got '%s'", dd_last_error());
    CHECK(strcmp(dd_status_str(DD_ERR_CORRUPT), "DD_ERR_CORRUPT") == 0, "status name");
    CHECK_NEAR(dd_db10(100.0), 20.0, 1e-12);
    CHECK(dd_db10(0.0) == -400.0, "db10(0)");
    return dd_test_done("test_core");
}
