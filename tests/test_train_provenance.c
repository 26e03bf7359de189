/* What config.json records about where a run came from (src/train/provenance.c,
 * train_internal.h dd_train_provenance), the paths `make coverage` showed untested by the
 * unit label (docs/testing.md "Coverage"), with real files only:
 * - a data set directory: the CRC32C of each regular, not hidden file (a subdirectory and
 *   a dot file skipped) equal to dd_crc32c over the bytes the test wrote, and the CRC of
 *   all of them chained in name order with their total size;
 * - a SigMF recording given by its .sigmf-meta: the .sigmf-data next to it checksummed
 *   too; a file given without a directory (relative to the working directory);
 * - data that cannot be checksummed (missing; a .sigmf-meta without its .sigmf-data; a
 *   .sigmf-data that is a directory, which fopen opens and fread refuses): "error" naming
 *   the file and the cause instead of a checksum, and dd_last_error cleared (the run goes
 *   on without it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dd_test.h"
#include "train/train_internal.h"

static const char *jstr(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void hex(uint32_t v, char out[16]) { snprintf(out, 16, "%08x", (unsigned)v); }

/* "data_checksum" of dd_train_provenance(data); NULL without (the caller deletes root). */
static const cJSON *checksum(cJSON **root, const char *data) {
    *root = cJSON_CreateObject();
    REQUIRE(*root != NULL, "out of memory");
    dd_train_provenance(*root, data);
    return cJSON_GetObjectItemCaseSensitive(*root, "data_checksum");
}

/* Checks one file's entry and the chained total. */
static void check_files(const cJSON *c, const char *const *names, const char *const *texts, int n) {
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(c, "files");
    CHECK(cJSON_GetArraySize(files) == n, "%d files listed, want %d", cJSON_GetArraySize(files), n);
    uint32_t all = 0;
    size_t total = 0;
    char want[16];
    for (int i = 0; i < n; i++) {
        hex(dd_crc32c(0, texts[i], strlen(texts[i])), want);
        const char *got = jstr(files, names[i]);
        CHECK(got && strcmp(got, want) == 0, "%s: crc %s, want %s", names[i], got ? got : "(none)", want);
        all = dd_crc32c(all, texts[i], strlen(texts[i]));
        total += strlen(texts[i]);
    }
    hex(all, want);
    const char *got = jstr(c, "crc32c");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(c, "bytes");
    CHECK(got && strcmp(got, want) == 0, "crc32c of all: %s, want %s", got ? got : "(none)", want);
    CHECK(cJSON_IsNumber(bytes) && bytes->valuedouble == (double)total, "bytes %g, want %zu",
          cJSON_IsNumber(bytes) ? bytes->valuedouble : -1, total);
    CHECK(jstr(c, "error") == NULL && strcmp(jstr(c, "algorithm") ? jstr(c, "algorithm") : "", "crc32c") == 0,
          "no error, algorithm crc32c");
}

/* "error" holds `want` (and the cause), no checksum, dd_last_error cleared. */
static void check_error(const cJSON *c, const char *want, const char *cause) {
    const char *e = jstr(c, "error");
    CHECK(e && strstr(e, want) && strstr(e, cause), "error '%s', want '%s' ... '%s'", e ? e : "(none)", want, cause);
    CHECK(jstr(c, "crc32c") == NULL && !cJSON_GetObjectItemCaseSensitive(c, "bytes"), "no checksum with an error");
    CHECK(dd_last_error()[0] == '\0', "dd_last_error cleared: %s", dd_last_error());
}

int main(void) {
    const char *dir = dd_test_tmpdir();
    char p[700], ds[600];

    /* the build */
    cJSON *root = NULL;
    const cJSON *c = checksum(&root, NULL);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "build");
    static const char *const keys[] = {"git_commit", "build_type", "simd", "blas", "blas_core", "blas_config"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK(jstr(b, keys[i]) && jstr(b, keys[i])[0], "build.%s: %s", keys[i], jstr(b, keys[i]) ? "empty" : "missing");
    CHECK(c == NULL, "no data, no data_checksum");
    cJSON_Delete(root);

    /* a data set directory: regular files only, dot files and subdirectories skipped */
    snprintf(ds, sizeof ds, "%s/ds", dir);
    REQUIRE(mkdir(ds, 0777) == 0, "mkdir %s: %s", ds, strerror(errno));
    static const char *const dnames[] = {"a.csv", "b.json", "c.bin"};
    static const char *const dtexts[] = {"i,q\n1,2\n", "{\"fs\": 1e8}", "\x01\x02\x03 binary"};
    for (int i = 2; i >= 0; i--) { /* created out of order: the listing is sorted */
        snprintf(p, sizeof p, "%s/%s", ds, dnames[i]);
        dd_test_write(p, dtexts[i]);
    }
    snprintf(p, sizeof p, "%s/.hidden", ds);
    dd_test_write(p, "not counted");
    snprintf(p, sizeof p, "%s/sub", ds);
    REQUIRE(mkdir(p, 0777) == 0, "mkdir %s: %s", p, strerror(errno));
    snprintf(p, sizeof p, "%s/sub/x", ds);
    dd_test_write(p, "not counted");
    c = checksum(&root, ds);
    check_files(c, dnames, dtexts, 3);
    cJSON_Delete(root);

    /* a SigMF recording by its .sigmf-meta: the data file too, in name order */
    static const char *const snames[] = {"rec.sigmf-data", "rec.sigmf-meta"};
    static const char *const stexts[] = {"\x10\x20\x30\x40samples", "{\"global\": {}}"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, snames[i]);
        dd_test_write(p, stexts[i]);
    }
    snprintf(p, sizeof p, "%s/rec.sigmf-meta", dir);
    c = checksum(&root, p);
    check_files(c, snames, stexts, 2);
    cJSON_Delete(root);

    /* a file without a directory part: relative to the working directory */
    char cwd[1024];
    REQUIRE(getcwd(cwd, sizeof cwd) != NULL, "getcwd: %s", strerror(errno));
    REQUIRE(chdir(ds) == 0, "chdir %s: %s", ds, strerror(errno));
    c = checksum(&root, "b.json");
    check_files(c, dnames + 1, dtexts + 1, 1);
    cJSON_Delete(root);
    REQUIRE(chdir(cwd) == 0, "chdir %s: %s", cwd, strerror(errno));

    /* data that cannot be checksummed */
    dd_error_clear();
    snprintf(p, sizeof p, "%s/missing", dir);
    c = checksum(&root, p);
    check_error(c, "missing: ", strerror(ENOENT));
    cJSON_Delete(root);

    snprintf(p, sizeof p, "%s/lone.sigmf-meta", dir);
    dd_test_write(p, "{}");
    c = checksum(&root, p);
    check_error(c, "lone.sigmf-data: cannot read: ", strerror(ENOENT));
    cJSON_Delete(root);

    snprintf(p, sizeof p, "%s/dirrec.sigmf-data", dir);
    REQUIRE(mkdir(p, 0777) == 0, "mkdir %s: %s", p, strerror(errno));
    snprintf(p, sizeof p, "%s/dirrec.sigmf-meta", dir);
    dd_test_write(p, "{}");
    c = checksum(&root, p);
    check_error(c, "dirrec.sigmf-data: read error: ", strerror(EISDIR));
    cJSON_Delete(root);

    return dd_test_done("test_train_provenance");
}
