/* The dd_dataset object: format detection and loading (OpenDPD directory, SigMF pair,
 * binary file), release, construction from arrays, and the binary writer front end. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"

const char *dd_split_name(dd_split s) {
    switch (s) {
    case DD_SPLIT_TRAIN: return "train";
    case DD_SPLIT_VAL: return "val";
    case DD_SPLIT_TEST: return "test";
    default: return "?";
    }
}

dd_status dd_data_alloc(dd_dataset **out) {
    *out = NULL;
    dd_dataset *ds = calloc(1, sizeof *ds);
    dd_dataset_priv *p = calloc(1, sizeof *p);
    if (!ds || !p) {
        free(ds);
        free(p);
        return dd_error(DD_ERR_NOMEM, "out of memory allocating a dataset");
    }
    ds->priv = p;
    *out = ds;
    return DD_OK;
}

void dd_dataset_free(dd_dataset **ds) {
    if (!ds || !*ds) return;
    dd_dataset_priv *p = (*ds)->priv;
    if (p) {
        for (int i = 0; i < 2 * DD_SPLIT_COUNT; i++) dd_free(p->buf[i]);
        dd_bin_close(&p->view);
        free(p);
    }
    free(*ds);
    *ds = NULL;
}

/* Finds the one NAME_input.sigmf-meta in dir with a matching NAME_output.sigmf-meta.
 * *found = 0 if there is none; an error if there are several. */
dd_status dd_find_sigmf_pair(const char *dir, char *prefix, int *found) {
    static const char *const suffix = "_input.sigmf-meta";
    *found = 0;
    DIR *d = opendir(dir);
    if (!d) return dd_error(DD_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    size_t ls = strlen(suffix);
    char first[256] = "";
    int count = 0;
    dd_status st = DD_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= ls || strcmp(e->d_name + len - ls, suffix) != 0) continue;
        char name[256], other[DD_PATH_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(len - ls), e->d_name);
        if (dd_path_join(other, sizeof other, dir, name) != DD_OK ||
            strlen(other) + 20 >= sizeof other)
            continue;
        size_t ol = strlen(other); /* room for the suffix checked above */
        snprintf(other + ol, sizeof other - ol, "%s", "_output.sigmf-meta");
        if (!dd_path_is_file(other)) continue;
        if (count++ == 0) {
            snprintf(first, sizeof first, "%s", name);
        } else {
            st = dd_error(DD_ERR_ARG,
                          "%s: several SigMF input/output pairs ('%s', '%s', ...); give the path "
                          "prefix DIR/NAME of one",
                          dir, first, name);
            break;
        }
    }
    closedir(d);
    if (st != DD_OK) return st;
    if (count == 1) {
        DD_TRY(dd_path_join(prefix, DD_PATH_MAX, dir, first));
        *found = 1;
    }
    return DD_OK;
}

static dd_status load_bin(const char *path, dd_dataset *ds) {
    DD_TRY(dd_bin_open(path, &ds->priv->view));
    const dd_bin_view *v = ds->priv->view;
    ds->spec = *dd_bin_spec(v);
    for (int s = 0; s < DD_SPLIT_COUNT; s++) {
        ds->n[s] = dd_bin_count(v, (dd_split)s);
        DD_TRY(dd_bin_slice(v, (dd_split)s, 0, ds->n[s], &ds->in[s], &ds->out[s]));
    }
    /* NaN/Inf are errors in every format: one pass over the mapped samples */
    DD_TRY(dd_bin_check_finite(v));
    strcpy(ds->format, "bin");
    return DD_OK;
}

/* Strips a known suffix from a SigMF file path to get the dataset prefix; 1 if done. */
int dd_sigmf_prefix_of(const char *path, char *prefix) {
    static const char *const sfx[4] = {"_input.sigmf-meta", "_input.sigmf-data", "_output.sigmf-meta",
                                       "_output.sigmf-data"};
    size_t len = strlen(path);
    for (int i = 0; i < 4; i++) {
        size_t l = strlen(sfx[i]);
        if (len > l && strcmp(path + len - l, sfx[i]) == 0 && len - l < DD_PATH_MAX) {
            memcpy(prefix, path, len - l);
            prefix[len - l] = '\0';
            return 1;
        }
    }
    return 0;
}

/* Every stat()/access() failure is reported with its own errno: a symbolic link loop
 * (ELOOP) or an unreadable directory (EACCES) is not "No such file or directory". */
static dd_status load_any(const char *path, dd_dataset *ds) {
    char buf[DD_PATH_MAX], prefix[DD_PATH_MAX];
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            /* maybe a SigMF prefix DIR/NAME: its meta file exists (even as a broken
             * link, which the SigMF reader then reports) */
            struct stat sm;
            DD_TRY(dd_path_cat(buf, sizeof buf, path, "_input.sigmf-meta"));
            if (lstat(buf, &sm) == 0) return dd_sigmf_load_dataset(path, ds);
        }
        return dd_error(DD_ERR_IO, "cannot open %s: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        DD_TRY(dd_path_join(buf, sizeof buf, path, "spec.json"));
        struct stat ss;
        if (stat(buf, &ss) != 0) {
            int e = errno;
            if (e != ENOENT)
                return dd_error(DD_ERR_IO, "cannot open %s: %s", buf, strerror(e));
            int found = 0;
            DD_TRY(dd_find_sigmf_pair(path, prefix, &found));
            if (found) return dd_sigmf_load_dataset(prefix, ds);
            return dd_error(DD_ERR_IO,
                            "%s: not a dataset: no spec.json (OpenDPD) and no NAME_input/"
                            "NAME_output.sigmf-meta pair (cannot open %s: %s)",
                            path, buf, strerror(e));
        }
        dd_spec spec;
        char format[32];
        DD_TRY(dd_spec_read_json(buf, &spec, format, sizeof format));
        return dd_opendpd_load(path, &spec, format, ds);
    }
    if (S_ISREG(sb.st_mode)) {
        if (dd_bin_is_bin(path)) return load_bin(path, ds);
        if (dd_sigmf_prefix_of(path, prefix)) return dd_sigmf_load_dataset(prefix, ds);
        const char *base = dd_path_base(path);
        if (strcmp(base, "spec.json") == 0) {
            size_t dl = (size_t)(base - path);
            if (dl == 0) return load_any(".", ds);
            memcpy(buf, path, dl);
            buf[dl] = '\0';
            return load_any(buf, ds);
        }
        size_t len = strlen(path);
        if (len >= 4 && strcmp(path + len - 4, ".ddb") == 0) return load_bin(path, ds); /* bad magic */
        return dd_error(DD_ERR_FORMAT,
                        "%s: unknown dataset format (expected an OpenDPD directory, a SigMF "
                        "NAME_input/NAME_output pair, or a binary file starting with 'DDPDBIN1')",
                        path);
    }
    return dd_error(DD_ERR_IO, "cannot open %s: not a regular file or directory (%s)", path,
                    dd_file_kind(sb.st_mode));
}

dd_status dd_dataset_load(const char *path, dd_dataset **out) {
    if (!path || !out) return dd_error(DD_ERR_ARG, "dd_dataset_load: NULL argument");
    *out = NULL;
    dd_dataset *ds;
    DD_TRY(dd_data_alloc(&ds));
    dd_status st = load_any(path, ds);
    if (st != DD_OK) {
        dd_dataset_free(&ds);
        return st;
    }
    *out = ds;
    return DD_OK;
}

dd_status dd_dataset_from_arrays(const dd_spec *spec, const size_t n[DD_SPLIT_COUNT],
                                 const dd_cf32 *const in[DD_SPLIT_COUNT],
                                 const dd_cf32 *const out[DD_SPLIT_COUNT],
                                 dd_dataset **out_ds) {
    if (!spec || !n || !in || !out || !out_ds)
        return dd_error(DD_ERR_ARG, "dd_dataset_from_arrays: NULL argument");
    *out_ds = NULL;
    DD_TRY(dd_spec_check(spec, "dd_dataset_from_arrays"));
    for (int s = 0; s < DD_SPLIT_COUNT; s++) {
        if (n[s] && (!in[s] || !out[s]))
            return dd_error(DD_ERR_ARG, "dd_dataset_from_arrays: split '%s' has %zu samples but a "
                            "NULL array", dd_split_name((dd_split)s), n[s]);
        for (int k = 0; k < 2; k++) {
            const float *f = (const float *)(const void *)(k ? out[s] : in[s]);
            for (size_t i = 0; i < 2 * n[s]; i++)
                if (!isfinite(f[i]))
                    return dd_error(DD_ERR_RANGE, "dd_dataset_from_arrays: %s[%s] sample %zu is "
                                    "NaN/Inf", k ? "out" : "in", dd_split_name((dd_split)s), i / 2);
        }
    }
    dd_dataset *ds;
    DD_TRY(dd_data_alloc(&ds));
    ds->spec = *spec;
    strcpy(ds->format, "memory");
    for (int s = 0; s < DD_SPLIT_COUNT; s++) {
        for (int k = 0; k < 2; k++) {
            dd_cf32 *b = dd_calloc(n[s] ? n[s] : 1, sizeof *b);
            if (!b) {
                dd_dataset_free(&ds);
                return DD_ERR_NOMEM;
            }
            if (n[s]) memcpy(b, k ? out[s] : in[s], n[s] * sizeof *b);
            ds->priv->buf[2 * s + k] = b;
        }
        ds->n[s] = n[s];
        ds->in[s] = ds->priv->buf[2 * s];
        ds->out[s] = ds->priv->buf[2 * s + 1];
    }
    *out_ds = ds;
    return DD_OK;
}

dd_status dd_dataset_save_bin(const dd_dataset *ds, const char *path) {
    if (!ds || !path) return dd_error(DD_ERR_ARG, "dd_dataset_save_bin: NULL argument");
    dd_bin_writer *w;
    DD_TRY(dd_bin_writer_open(path, &ds->spec, ds->n, &w));
    for (int s = 0; s < DD_SPLIT_COUNT; s++) {
        dd_status st = dd_bin_writer_append(w, (dd_split)s, ds->in[s], ds->out[s], ds->n[s]);
        if (st != DD_OK) {
            dd_bin_writer_abort(&w);
            return st;
        }
    }
    return dd_bin_writer_commit(&w);
}
