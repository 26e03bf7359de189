/* What a run's config.json records about where it came from (train_internal.h
 * dd_train_provenance): the build (git commit and build type at configure time, the SIMD
 * path of the kernels, the BLAS library and the core type it chose) and a CRC32C of the
 * data set's files, so that two runs can be told apart or matched after the fact. */
#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "nn/simd.h"
#include "train_internal.h"

#ifndef DD_GIT_COMMIT
#define DD_GIT_COMMIT "unknown"
#endif
#ifndef DD_BUILD_TYPE
#define DD_BUILD_TYPE "unknown"
#endif

/* CRC32C of one file, chained from crc; *bytes += its size. */
static dd_status file_crc(const char *path, uint32_t *crc, uint64_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return dd_error(DD_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    static const size_t CHUNK = (size_t)1 << 20;
    char *buf = malloc(CHUNK);
    if (!buf) {
        fclose(f);
        return dd_error(DD_ERR_NOMEM, "out of memory checksumming %s", path);
    }
    size_t got;
    errno = 0;
    while ((got = fread(buf, 1, CHUNK, f)) > 0) {
        *crc = dd_crc32c(*crc, buf, got);
        *bytes += got;
    }
    const int bad = ferror(f), e = errno; /* e.g. EISDIR: fopen opens a directory, fread refuses */
    free(buf);
    fclose(f);
    return bad ? dd_error(DD_ERR_IO, "%s: read error: %s", path, strerror(e ? e : EIO)) : DD_OK;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The files of a data set: a directory's regular files (not hidden), sorted by name; a
 * file itself (a SigMF recording's .sigmf-meta with its .sigmf-data). */
static dd_status data_files(const char *data, char ***names, size_t *count, char *dir, size_t dcap) {
    *names = NULL;
    *count = 0;
    struct stat sb;
    if (stat(data, &sb) != 0) return dd_error(DD_ERR_IO, "%s: %s", data, strerror(errno));
    size_t cap = 8, n = 0;
    char **v = calloc(cap, sizeof *v);
    if (!v) return DD_ERR_NOMEM;
    if (S_ISDIR(sb.st_mode)) {
        snprintf(dir, dcap, "%s", data);
        DIR *d = opendir(data);
        if (!d) {
            free(v);
            return dd_error(DD_ERR_IO, "%s: %s", data, strerror(errno));
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", data, e->d_name);
            if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
            if (n == cap) {
                char **w = realloc(v, 2 * cap * sizeof *v);
                if (!w) break;
                v = w;
                cap *= 2;
            }
            v[n] = strdup(e->d_name);
            if (v[n]) n++;
        }
        closedir(d);
    } else {
        const char *slash = strrchr(data, '/');
        snprintf(dir, dcap, "%.*s", slash ? (int)(slash - data) : 1, slash ? data : ".");
        const char *base = slash ? slash + 1 : data;
        v[n++] = strdup(base);
        size_t l = strlen(base);
        if (l > 11 && strcmp(base + l - 11, ".sigmf-meta") == 0) {
            char *pair = strdup(base);
            if (pair) memcpy(pair + l - 4, "data", 4);
            v[n++] = pair;
        }
    }
    qsort(v, n, sizeof *v, cmp_names);
    *names = v;
    *count = n;
    return DD_OK;
}

void dd_train_provenance(cJSON *root, const char *data) {
    cJSON *b = cJSON_AddObjectToObject(root, "build");
    if (b) {
        cJSON_AddStringToObject(b, "git_commit", DD_GIT_COMMIT);
        cJSON_AddStringToObject(b, "build_type", DD_BUILD_TYPE);
        cJSON_AddStringToObject(b, "simd", dd_nn_simd_name(dd_nn_simd_level()));
        cJSON_AddStringToObject(b, "blas", "OpenBLAS");
        const char *core = openblas_get_corename();
        const char *conf = openblas_get_config();
        cJSON_AddStringToObject(b, "blas_core", core ? core : "unknown");
        cJSON_AddStringToObject(b, "blas_config", conf ? conf : "unknown");
    }
    if (!data || !*data) return;
    char **names = NULL, dir[4200];
    size_t n = 0;
    cJSON *c = cJSON_AddObjectToObject(root, "data_checksum");
    if (!c) return;
    cJSON_AddStringToObject(c, "algorithm", "crc32c");
    dd_status st = data_files(data, &names, &n, dir, sizeof dir);
    uint32_t all = 0;
    uint64_t total = 0;
    cJSON *files = st == DD_OK ? cJSON_AddObjectToObject(c, "files") : NULL;
    for (size_t i = 0; st == DD_OK && i < n; i++) {
        char p[8400], hex[16];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        uint32_t one = 0;
        uint64_t bytes = 0;
        st = file_crc(p, &one, &bytes);
        if (st != DD_OK) break;
        snprintf(hex, sizeof hex, "%08x", (unsigned)one);
        if (files) cJSON_AddStringToObject(files, names[i], hex);
        st = file_crc(p, &all, &total); /* the files one after the other, in name order */
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (st != DD_OK) { /* the run goes on: the checksum says why it is missing */
        cJSON_AddStringToObject(c, "error", dd_last_error());
        dd_error_clear();
        return;
    }
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", (unsigned)all);
    cJSON_AddStringToObject(c, "crc32c", hex);
    cJSON_AddNumberToObject(c, "bytes", (double)total);
}
