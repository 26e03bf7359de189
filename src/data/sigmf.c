/* SigMF recordings (https://sigmf.org): a JSON .sigmf-meta file and a raw .sigmf-data
 * file. Reads complex cf32, cf64, ci8, ci16, ci32 (little or big endian; integers scaled
 * by 1/2^(bits-1)); writes cf32_le, cf64_le or ci16_le. A distdpd dataset is a pair of
 * recordings NAME_input / NAME_output; the spec fields beyond the sample rate live in the
 * "distdpd:" extension namespace of the global object and the splits are annotations
 * labelled "train", "val", "test" (see docs/formats.md). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_internal.h"

#define SIGMF_VERSION "1.0.0"

/* A parsed core:datatype. */
typedef struct {
    char kind;     /* 'f' float, 'i' signed integer */
    int bits;      /* bits per component: 8, 16, 32, 64 */
    int be;        /* 1: big endian */
    size_t bytes;  /* bytes per complex sample */
} sigmf_dt;

static const char *type_name(dd_sigmf_type t) {
    switch (t) {
    case DD_SIGMF_CF32_LE: return "cf32_le";
    case DD_SIGMF_CF64_LE: return "cf64_le";
    case DD_SIGMF_CI16_LE: return "ci16_le";
    }
    return "?";
}

static dd_status parse_dtype(const char *meta, const char *s, sigmf_dt *dt) {
    const char *p = s;
    char cr = *p ? *p++ : 0;
    char kind = *p ? *p++ : 0;
    char *e = (char *)p;
    long bits = 0;
    if (*p >= '0' && *p <= '9') bits = strtol(p, &e, 10);
    int be = 0, has_suffix = 0, ok = (cr == 'c' || cr == 'r') && (kind == 'f' || kind == 'i' || kind == 'u') &&
                                     e != p && (bits == 8 || bits == 16 || bits == 32 || bits == 64);
    if (ok) {
        if (strcmp(e, "_le") == 0) {
            has_suffix = 1;
        } else if (strcmp(e, "_be") == 0) {
            has_suffix = 1;
            be = 1;
        } else if (*e != '\0') {
            ok = 0;
        }
        if (!has_suffix && bits != 8) ok = 0;         /* multi-byte types need _le / _be */
        if (kind == 'f' && bits == 8) ok = 0;
    }
    char q[4 * 40 + 4];
    if (!ok)
        return dd_error(DD_ERR_FORMAT, "%s: field 'core:datatype' has invalid value '%s'", meta,
                        dd_quote(q, sizeof q, s, strlen(s), 40));
    if (cr != 'c' || kind == 'u' || (kind == 'i' && bits == 64) || (kind == 'f' && bits == 16))
        return dd_error(DD_ERR_UNSUPPORTED,
                        "%s: core:datatype '%s' is not supported (distdpd reads complex cf32, cf64, "
                        "ci8, ci16, ci32, _le or _be)",
                        meta, dd_quote(q, sizeof q, s, strlen(s), 40));
    dt->kind = kind;
    dt->bits = (int)bits;
    dt->be = be;
    dt->bytes = 2 * (size_t)bits / 8;
    return DD_OK;
}

static uint64_t load_uint(const unsigned char *p, int bytes, int be) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[be ? bytes - 1 - i : i] << (8 * i);
    return v;
}

/* One component (I or Q) as a float. */
static float decode1(const unsigned char *p, const sigmf_dt *dt) {
    int nb = dt->bits / 8;
    uint64_t u = load_uint(p, nb, dt->be);
    if (dt->kind == 'f') {
        if (nb == 4) {
            uint32_t u32 = (uint32_t)u;
            float f;
            memcpy(&f, &u32, 4);
            return f;
        }
        double d;
        memcpy(&d, &u, 8);
        return (float)d;
    }
    switch (nb) {
    case 1: return (float)(int8_t)(uint8_t)u / 128.0f;
    case 2: return (float)(int16_t)(uint16_t)u / 32768.0f;
    default: return (float)((double)(int32_t)(uint32_t)u / 2147483648.0);
    }
}

/* Meta and data file names from a meta path, a data path or a prefix. */
static dd_status sigmf_paths(const char *arg, char *meta, char *data) {
    static const char *const ext_m = ".sigmf-meta", *const ext_d = ".sigmf-data";
    size_t len = strlen(arg), le = strlen(ext_m);
    char prefix[DD_PATH_MAX];
    if (len >= le && (strcmp(arg + len - le, ext_m) == 0 || strcmp(arg + len - le, ext_d) == 0)) {
        if (len - le >= sizeof prefix) return dd_error(DD_ERR_ARG, "path too long: %s", arg);
        memcpy(prefix, arg, len - le);
        prefix[len - le] = '\0';
    } else {
        DD_TRY(dd_path_cat(prefix, sizeof prefix, arg, ""));
    }
    DD_TRY(dd_path_cat(meta, DD_PATH_MAX, prefix, ext_m));
    DD_TRY(dd_path_cat(data, DD_PATH_MAX, prefix, ext_d));
    return DD_OK;
}

/* Checks the global object and captures of a parsed meta file: *dt and *rate receive
 * the sample type and rate, *dtname the core:datatype string (inside root). */
static dd_status check_meta(const char *meta, const cJSON *root, sigmf_dt *dt, double *rate, const char **dtname) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "global");
    if (!g) return dd_error(DD_ERR_FORMAT, "%s: missing field 'global'", meta);
    if (!cJSON_IsObject(g))
        return dd_error(DD_ERR_FORMAT, "%s: field 'global' must be an object, found %s", meta, dd_json_type_name(g));
    const cJSON *dt_j = cJSON_GetObjectItemCaseSensitive(g, "core:datatype");
    if (!dt_j) return dd_error(DD_ERR_FORMAT, "%s: missing field 'core:datatype'", meta);
    if (!cJSON_IsString(dt_j))
        return dd_error(DD_ERR_FORMAT, "%s: field 'core:datatype' must be a string, found %s", meta,
                        dd_json_type_name(dt_j));
    DD_TRY(parse_dtype(meta, dt_j->valuestring, dt));
    *dtname = dt_j->valuestring;
    DD_TRY(dd_json_number(meta, g, "core:sample_rate", 1, rate));
    if (!(*rate > 0)) return dd_error(DD_ERR_RANGE, "%s: field 'core:sample_rate' must be > 0, found %g", meta, *rate);
    double nch = 1, trailing = 0;
    DD_TRY(dd_json_number(meta, g, "core:num_channels", 0, &nch));
    if (nch != 1)
        return dd_error(DD_ERR_UNSUPPORTED, "%s: core:num_channels = %g; only 1 channel is supported", meta, nch);
    DD_TRY(dd_json_number(meta, g, "core:trailing_bytes", 0, &trailing));
    if (trailing != 0) return dd_error(DD_ERR_UNSUPPORTED, "%s: core:trailing_bytes is not supported", meta);
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(root, "captures");
    if (caps && !cJSON_IsArray(caps))
        return dd_error(DD_ERR_FORMAT, "%s: field 'captures' must be an array, found %s", meta, dd_json_type_name(caps));
    const cJSON *cap;
    cJSON_ArrayForEach(cap, caps) {
        double hb = 0;
        if (cJSON_IsObject(cap)) DD_TRY(dd_json_number(meta, cap, "core:header_bytes", 0, &hb));
        if (hb != 0) return dd_error(DD_ERR_UNSUPPORTED, "%s: captures with core:header_bytes are not supported", meta);
    }
    return DD_OK;
}

/* Reads a recording; *root_out (optional) receives the parsed meta (caller deletes). */
dd_status dd_sigmf_read_ex(const char *arg, dd_cf32 **x, size_t *n, double *fs,
                           cJSON **root_out) {
    char meta[DD_PATH_MAX], data[DD_PATH_MAX];
    *x = NULL;
    *n = 0;
    if (root_out) *root_out = NULL;
    DD_TRY(sigmf_paths(arg, meta, data));
    cJSON *root;
    DD_TRY(dd_json_read(meta, &root));
    dd_status st = DD_OK;
    char *raw = NULL;
    dd_cf32 *y = NULL;
    size_t len = 0;
    double rate = 0;
    sigmf_dt dt = {0, 0, 0, 0};
    const char *dtname = "";
    if ((st = check_meta(meta, root, &dt, &rate, &dtname)) != DD_OK) goto cleanup;

    if ((st = dd_read_all(data, SIZE_MAX, &raw, &len)) != DD_OK) goto cleanup;
    if (len % dt.bytes != 0) {
        st = dd_error(DD_ERR_CORRUPT,
                      "%s: size %zu bytes is not a multiple of the %zu-byte %s sample (truncated?)",
                      data, len, dt.bytes, dtname);
        goto cleanup;
    }
    size_t cnt = len / dt.bytes;
    if (dt.kind == 'f' && dt.bits == 32 && !dt.be && dd_host_le()) {
        y = (dd_cf32 *)(void *)raw; /* already the in-memory layout (dd_calloc: aligned) */
        raw = NULL;
    } else {
        y = dd_calloc(cnt ? cnt : 1, sizeof *y);
        if (!y) {
            st = DD_ERR_NOMEM;
            goto cleanup;
        }
        float *f = (float *)(void *)y;
        const unsigned char *p = (const unsigned char *)raw;
        size_t half = dt.bytes / 2;
        for (size_t i = 0; i < 2 * cnt; i++) f[i] = decode1(p + i * half, &dt);
    }
    {
        const float *f = (const float *)(const void *)y;
        for (size_t i = 0; i < 2 * cnt; i++)
            if (!isfinite(f[i])) {
                st = dd_error(DD_ERR_RANGE, "%s: sample %zu is NaN/Inf (or overflows float32)", data,
                              i / 2);
                goto cleanup;
            }
    }
    *x = y;
    *n = cnt;
    y = NULL;
    if (fs) *fs = rate;
    if (root_out) {
        *root_out = root;
        root = NULL;
    }
cleanup:
    dd_free(y);
    dd_free(raw);
    cJSON_Delete(root);
    return st;
}

dd_status dd_sigmf_read(const char *meta_path, dd_cf32 **x, size_t *n, double *fs) {
    if (!meta_path || !x || !n) return dd_error(DD_ERR_ARG, "dd_sigmf_read: NULL argument");
    return dd_sigmf_read_ex(meta_path, x, n, fs, NULL);
}

static void store_uint(unsigned char *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Encodes and writes the concatenation of nparts arrays. */
static dd_status write_data(dd_afile *a, const dd_cf32 *const *parts, const size_t *plen,
                            int nparts, dd_sigmf_type type) {
    unsigned char chunk[1 << 14];
    size_t comp = type == DD_SIGMF_CF64_LE ? 8 : type == DD_SIGMF_CI16_LE ? 2 : 4;
    size_t fill = 0, idx = 0;
    for (int k = 0; k < nparts; k++) {
        const float *f = (const float *)(const void *)parts[k];
        for (size_t i = 0; i < 2 * plen[k]; i++, idx++) {
            float v = f[i];
            if (!isfinite(v))
                return dd_error(DD_ERR_RANGE, "%s: sample %zu is NaN/Inf; refusing to write it",
                                a->path, idx / 2);
            unsigned char *p = chunk + fill;
            if (type == DD_SIGMF_CF32_LE) {
                uint32_t u;
                memcpy(&u, &v, 4);
                store_uint(p, u, 4);
            } else if (type == DD_SIGMF_CF64_LE) {
                double d = v;
                uint64_t u;
                memcpy(&u, &d, 8);
                store_uint(p, u, 8);
            } else {
                if (v < -1.0f || v > 1.0f)
                    return dd_error(DD_ERR_RANGE,
                                    "%s: sample %zu value %g is outside the ci16 full scale [-1, 1]",
                                    a->path, idx / 2, (double)v);
                long q = lrintf(v * 32768.0f);
                if (q > 32767) q = 32767;
                if (q < -32768) q = -32768;
                store_uint(p, (uint16_t)(int16_t)q, 2);
            }
            fill += comp;
            if (fill + 8 > sizeof chunk) {
                if (fwrite(chunk, 1, fill, a->f) != fill) return dd_afile_werr(a);
                fill = 0;
            }
        }
    }
    if (fill && fwrite(chunk, 1, fill, a->f) != fill) return dd_afile_werr(a);
    return DD_OK;
}

/* The meta file's text (caller cJSON_free()s *text): global with the type, rate and
 * description, extra_global's items copied into it, one capture at 0, annotations (may
 * be NULL) copied. */
static dd_status meta_text(const char *meta, double fs, dd_sigmf_type type, const char *description,
                           const cJSON *extra_global, const cJSON *annotations, char **text) {
    *text = NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *g = root ? cJSON_AddObjectToObject(root, "global") : NULL;
    cJSON *caps = root ? cJSON_AddArrayToObject(root, "captures") : NULL;
    cJSON *cap0 = cJSON_CreateObject();
    if (!g || !caps || !cap0) {
        cJSON_Delete(cap0);
        cJSON_Delete(root);
        return dd_error(DD_ERR_NOMEM, "%s: out of memory building JSON", meta);
    }
    cJSON_AddItemToArray(caps, cap0);
    int ok = cJSON_AddStringToObject(g, "core:datatype", type_name(type)) &&
             cJSON_AddNumberToObject(g, "core:sample_rate", fs) &&
             cJSON_AddStringToObject(g, "core:version", SIGMF_VERSION) &&
             cJSON_AddNumberToObject(g, "core:num_channels", 1) &&
             cJSON_AddStringToObject(g, "core:recorder", "distdpd " DD_VERSION_STRING) &&
             (!description || cJSON_AddStringToObject(g, "core:description", description)) &&
             cJSON_AddNumberToObject(cap0, "core:sample_start", 0);
    const cJSON *it;
    cJSON_ArrayForEach(it, extra_global) {
        cJSON *dup = cJSON_Duplicate(it, 1);
        if (!dup) ok = 0;
        else cJSON_AddItemToObject(g, it->string, dup);
    }
    cJSON *ann = annotations ? cJSON_Duplicate(annotations, 1) : cJSON_CreateArray();
    if (!ann) ok = 0;
    else cJSON_AddItemToObject(root, "annotations", ann);
    if (ok) *text = dd_json_print(root);
    cJSON_Delete(root);
    if (!*text) return dd_error(DD_ERR_NOMEM, "%s: out of memory building JSON", meta);
    return DD_OK;
}

/* Writes PREFIX.sigmf-data and PREFIX.sigmf-meta. extra_global's items are copied into
 * the global object; annotations (may be NULL) is copied as the annotations array. */
dd_status dd_sigmf_write_ex(const char *prefix, const dd_cf32 *const *parts, const size_t *plen,
                            int nparts, double fs, dd_sigmf_type type, const char *description,
                            const cJSON *extra_global, const cJSON *annotations) {
    char meta[DD_PATH_MAX], data[DD_PATH_MAX];
    DD_TRY(sigmf_paths(prefix, meta, data));
    if (!(isfinite(fs) && fs > 0))
        return dd_error(DD_ERR_ARG, "%s: sample rate must be > 0, found %g", meta, fs);
    if (type != DD_SIGMF_CF32_LE && type != DD_SIGMF_CF64_LE && type != DD_SIGMF_CI16_LE)
        return dd_error(DD_ERR_ARG, "%s: unknown SigMF type %d", meta, (int)type);
    DD_TRY(dd_mkdir_parent(meta));
    dd_status st = DD_OK;
    dd_afile ad, am;
    int d_open = 0, m_open = 0;
    char *text = NULL;
    if ((st = meta_text(meta, fs, type, description, extra_global, annotations, &text)) != DD_OK) goto cleanup;
    if ((st = dd_afile_open(&ad, data)) != DD_OK) goto cleanup;
    d_open = 1;
    if ((st = write_data(&ad, parts, plen, nparts, type)) != DD_OK) goto cleanup;
    if ((st = dd_afile_close(&ad)) != DD_OK) goto cleanup;
    if ((st = dd_afile_open(&am, meta)) != DD_OK) goto cleanup;
    m_open = 1;
    if (fprintf(am.f, "%s\n", text) < 0) {
        st = dd_afile_werr(&am);
        goto cleanup;
    }
    if ((st = dd_afile_close(&am)) != DD_OK) goto cleanup;
    if ((st = dd_afile_rename(&ad)) != DD_OK) goto cleanup;
    if ((st = dd_afile_rename(&am)) != DD_OK) goto cleanup;
    dd_fsync_parent(meta);
cleanup:
    if (d_open) dd_afile_abort(&ad);
    if (m_open) dd_afile_abort(&am);
    cJSON_free(text);
    return st;
}

dd_status dd_sigmf_write(const char *prefix, const dd_cf32 *x, size_t n, double fs,
                         dd_sigmf_type type, const char *description) {
    if (!prefix || (!x && n)) return dd_error(DD_ERR_ARG, "dd_sigmf_write: NULL argument");
    const dd_cf32 *parts[1] = {x};
    size_t plen[1] = {n};
    return dd_sigmf_write_ex(prefix, parts, plen, 1, fs, type, description, NULL, NULL);
}

/* ---- datasets: NAME_input + NAME_output ---- */

/* Reads the distdpd: spec fields of a global object over the defaults derived from fs. */
static dd_status spec_from_global(const char *meta, const cJSON *g, double fs, dd_spec *s) {
    dd_spec_default(s);
    s->fs = fs;
    s->bw_main = fs / 4;
    s->n_sub = 10;
    s->bw_sub = s->bw_main / 10;
    s->bw_occupied = 0;
    double nsub = s->n_sub, nper = (double)s->nperseg;
    DD_TRY(dd_json_number(meta, g, "distdpd:bw_main", 0, &s->bw_main));
    DD_TRY(dd_json_number(meta, g, "distdpd:bw_sub", 0, &s->bw_sub));
    DD_TRY(dd_json_number(meta, g, "distdpd:bw_occupied", 0, &s->bw_occupied));
    DD_TRY(dd_json_integer(meta, g, "distdpd:n_sub", 0, 1, 2147483647.0, &nsub));
    DD_TRY(dd_json_integer(meta, g, "distdpd:nperseg", 0, 16, (double)DD_NPERSEG_MAX, &nper));
    s->n_sub = (int)nsub;
    s->nperseg = (size_t)nper;
    const cJSON *sr = cJSON_GetObjectItemCaseSensitive(g, "distdpd:split_ratios");
    if (sr) {
        if (!cJSON_IsArray(sr) || cJSON_GetArraySize(sr) != 3)
            return dd_error(DD_ERR_FORMAT, "%s: field 'distdpd:split_ratios' must be an array of 3 "
                            "numbers", meta);
        for (int i = 0; i < 3; i++) {
            const cJSON *it = cJSON_GetArrayItem(sr, i);
            if (!cJSON_IsNumber(it))
                return dd_error(DD_ERR_FORMAT, "%s: field 'distdpd:split_ratios[%d]' must be a "
                                "number, found %s", meta, i, dd_json_type_name(it));
            s->split[i] = it->valuedouble;
        }
    }
    return dd_spec_check(s, meta);
}

/* Split counts from annotations labelled train/val/test, if any: returns 1 in *found. */
static dd_status split_from_annotations(const char *meta, const cJSON *root, size_t n,
                                        size_t cnt[3], int *found) {
    *found = 0;
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(root, "annotations");
    if (!ann) return DD_OK;
    if (!cJSON_IsArray(ann))
        return dd_error(DD_ERR_FORMAT, "%s: field 'annotations' must be an array, found %s", meta,
                        dd_json_type_name(ann));
    double start[3], count[3];
    int seen[3] = {0, 0, 0};
    const cJSON *a;
    cJSON_ArrayForEach(a, ann) {
        if (!cJSON_IsObject(a)) continue;
        const cJSON *lab = cJSON_GetObjectItemCaseSensitive(a, "core:label");
        if (!cJSON_IsString(lab)) continue;
        for (int s = 0; s < 3; s++) {
            if (strcmp(lab->valuestring, dd_split_name((dd_split)s)) != 0) continue;
            if (seen[s]++)
                return dd_error(DD_ERR_FORMAT, "%s: two annotations labelled '%s'", meta,
                                lab->valuestring);
            DD_TRY(dd_json_integer(meta, a, "core:sample_start", 1, 0, 9e15, &start[s]));
            count[s] = 0;
            DD_TRY(dd_json_integer(meta, a, "core:sample_count", 1, 0, 9e15, &count[s]));
        }
    }
    if (!seen[0] && !seen[1] && !seen[2]) return DD_OK;
    double pos = 0;
    for (int s = 0; s < 3; s++) {
        if (!seen[s])
            return dd_error(DD_ERR_FORMAT, "%s: annotations label some splits but not '%s'", meta,
                            dd_split_name((dd_split)s));
        if (start[s] != pos)
            return dd_error(DD_ERR_FORMAT, "%s: annotation '%s' starts at sample %.0f, expected %.0f "
                            "(train, val, test must follow each other)", meta,
                            dd_split_name((dd_split)s), start[s], pos);
        pos += count[s];
        cnt[s] = (size_t)count[s];
    }
    if (pos != (double)n)
        return dd_error(DD_ERR_MISMATCH, "%s: split annotations cover %.0f samples, the recording has "
                        "%zu", meta, pos, n);
    *found = 1;
    return DD_OK;
}

dd_status dd_sigmf_load_dataset(const char *prefix, dd_dataset *ds) {
    char pin[DD_PATH_MAX], pout[DD_PATH_MAX], min[DD_PATH_MAX], mout[DD_PATH_MAX];
    DD_TRY(dd_path_cat(pin, sizeof pin, prefix, "_input"));
    DD_TRY(dd_path_cat(pout, sizeof pout, prefix, "_output"));
    DD_TRY(dd_path_cat(min, sizeof min, pin, ".sigmf-meta"));
    DD_TRY(dd_path_cat(mout, sizeof mout, pout, ".sigmf-meta"));
    dd_cf32 *xi = NULL, *xo = NULL;
    size_t ni = 0, no = 0;
    double fi = 0, fo = 0;
    cJSON *root = NULL;
    dd_status st = dd_sigmf_read_ex(pin, &xi, &ni, &fi, &root);
    if (st == DD_OK) st = dd_sigmf_read_ex(pout, &xo, &no, &fo, NULL);
    if (st != DD_OK) goto cleanup;
    if (fabs(fi - fo) > 1e-9 * fi) {
        st = dd_error(DD_ERR_MISMATCH, "%s: core:sample_rate %.17g differs from %s: %.17g", min, fi,
                      mout, fo);
        goto cleanup;
    }
    if (ni != no) {
        st = dd_error(DD_ERR_MISMATCH, "%s: %s has %zu samples but %s has %zu", prefix,
                      dd_path_base(pin), ni, dd_path_base(pout), no);
        goto cleanup;
    }
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "global");
    if ((st = spec_from_global(min, g, fi, &ds->spec)) != DD_OK) goto cleanup;
    size_t cnt[3];
    int found;
    if ((st = split_from_annotations(min, root, ni, cnt, &found)) != DD_OK) goto cleanup;
    if (!found) dd_split_counts(ni, ds->spec.split, cnt);
    size_t at = 0;
    for (int s = 0; s < 3; s++) {
        ds->n[s] = cnt[s];
        ds->in[s] = xi + at;
        ds->out[s] = xo + at;
        at += cnt[s];
    }
    ds->priv->buf[0] = xi;
    ds->priv->buf[1] = xo;
    xi = xo = NULL;
    strcpy(ds->format, "sigmf");
cleanup:
    dd_free(xi);
    dd_free(xo);
    cJSON_Delete(root);
    return st;
}

/* The global extension fields (distdpd: spec) and split annotations of a dataset pair
 * of n[] samples per split (caller cJSON_Delete()s both). */
static dd_status dataset_meta(const dd_spec *s, const size_t n[3], const char *where, cJSON **gout, cJSON **annout) {
    *gout = *annout = NULL;
    cJSON *g = cJSON_CreateObject(), *ann = cJSON_CreateArray(), *ext = cJSON_CreateArray();
    cJSON *e0 = cJSON_CreateObject();
    int ok = g && ann && ext && e0;
    if (ok) {
        double r[3] = {s->split[0], s->split[1], s->split[2]};
        cJSON *sr = cJSON_CreateDoubleArray(r, 3);
        ok = sr != NULL;
        cJSON_AddItemToArray(ext, e0);
        e0 = NULL;
        ok = ok && cJSON_AddStringToObject(cJSON_GetArrayItem(ext, 0), "name", "distdpd") &&
             cJSON_AddStringToObject(cJSON_GetArrayItem(ext, 0), "version", "1.0.0") &&
             cJSON_AddTrueToObject(cJSON_GetArrayItem(ext, 0), "optional");
        cJSON_AddItemToObject(g, "core:extensions", ext);
        ext = NULL;
        ok = ok && cJSON_AddNumberToObject(g, "distdpd:bw_main", s->bw_main) &&
             cJSON_AddNumberToObject(g, "distdpd:bw_sub", s->bw_sub) &&
             cJSON_AddNumberToObject(g, "distdpd:n_sub", s->n_sub) &&
             cJSON_AddNumberToObject(g, "distdpd:nperseg", (double)s->nperseg) &&
             cJSON_AddNumberToObject(g, "distdpd:bw_occupied", s->bw_occupied);
        if (sr) cJSON_AddItemToObject(g, "distdpd:split_ratios", sr);
        size_t at = 0;
        for (int k = 0; k < 3 && ok; k++) {
            cJSON *a = cJSON_CreateObject();
            ok = a && cJSON_AddNumberToObject(a, "core:sample_start", (double)at) &&
                 cJSON_AddNumberToObject(a, "core:sample_count", (double)n[k]) &&
                 cJSON_AddStringToObject(a, "core:label", dd_split_name((dd_split)k));
            if (a) cJSON_AddItemToArray(ann, a);
            at += n[k];
        }
    }
    cJSON_Delete(e0);
    cJSON_Delete(ext);
    if (!ok) {
        cJSON_Delete(g);
        cJSON_Delete(ann);
        return dd_error(DD_ERR_NOMEM, "%s: out of memory building JSON", where);
    }
    *gout = g;
    *annout = ann;
    return DD_OK;
}

dd_status dd_dataset_save_sigmf(const dd_dataset *ds, const char *prefix) {
    if (!ds || !prefix) return dd_error(DD_ERR_ARG, "dd_dataset_save_sigmf: NULL argument");
    DD_TRY(dd_spec_check(&ds->spec, prefix));
    const dd_spec *s = &ds->spec;
    char pin[DD_PATH_MAX], pout[DD_PATH_MAX];
    DD_TRY(dd_path_cat(pin, sizeof pin, prefix, "_input"));
    DD_TRY(dd_path_cat(pout, sizeof pout, prefix, "_output"));
    cJSON *g, *ann;
    DD_TRY(dataset_meta(s, ds->n, prefix, &g, &ann));
    const dd_cf32 *pi[3] = {ds->in[0], ds->in[1], ds->in[2]};
    const dd_cf32 *po[3] = {ds->out[0], ds->out[1], ds->out[2]};
    dd_status st = dd_sigmf_write_ex(pin, pi, ds->n, 3, s->fs, DD_SIGMF_CF32_LE, "distdpd dataset: PA input", g, ann);
    if (st == DD_OK)
        st = dd_sigmf_write_ex(pout, po, ds->n, 3, s->fs, DD_SIGMF_CF32_LE, "distdpd dataset: PA output", g, ann);
    cJSON_Delete(g);
    cJSON_Delete(ann);
    return st;
}

/* ---- streaming (dd_dataset_convert): a pair read and written in chunks ---- */

struct dd_sigmf_src {
    int fd[2];
    sigmf_dt dt[2];
    size_t n, pos;
    char data[2][DD_PATH_MAX];
    unsigned char *buf;
    size_t bufcap; /* bytes */
};

void dd_sigmf_src_close(dd_sigmf_src **sp) {
    if (!sp || !*sp) return;
    dd_sigmf_src *s = *sp;
    for (int k = 0; k < 2; k++)
        if (s->fd[k] >= 0) close(s->fd[k]);
    free(s->buf);
    free(s);
    *sp = NULL;
}

dd_status dd_sigmf_src_open(const char *prefix, dd_sigmf_src **out, dd_spec *spec, size_t cnt[3]) {
    *out = NULL;
    dd_sigmf_src *s = calloc(1, sizeof *s);
    if (!s) return dd_error(DD_ERR_NOMEM, "out of memory");
    s->fd[0] = s->fd[1] = -1;
    cJSON *root[2] = {NULL, NULL};
    char meta[2][DD_PATH_MAX];
    double rate[2] = {0, 0};
    size_t n[2] = {0, 0};
    dd_status st = DD_OK;
    for (int k = 0; k < 2 && st == DD_OK; k++) {
        char pre[DD_PATH_MAX];
        const char *dtname;
        uint64_t size = 0;
        if ((st = dd_path_cat(pre, sizeof pre, prefix, k ? "_output" : "_input")) != DD_OK) break;
        if ((st = sigmf_paths(pre, meta[k], s->data[k])) != DD_OK) break;
        if ((st = dd_json_read(meta[k], &root[k])) != DD_OK) break;
        if ((st = check_meta(meta[k], root[k], &s->dt[k], &rate[k], &dtname)) != DD_OK) break;
        if ((st = dd_open_regular(s->data[k], &s->fd[k], &size)) != DD_OK) break;
        if (size % s->dt[k].bytes != 0)
            st = dd_error(DD_ERR_CORRUPT, "%s: size %llu bytes is not a multiple of the %zu-byte %s sample (truncated?)",
                          s->data[k], (unsigned long long)size, s->dt[k].bytes, dtname);
        n[k] = (size_t)(size / s->dt[k].bytes);
    }
    if (st == DD_OK && fabs(rate[0] - rate[1]) > 1e-9 * rate[0])
        st = dd_error(DD_ERR_MISMATCH, "%s: core:sample_rate %.17g differs from %s: %.17g", meta[0], rate[0], meta[1],
                      rate[1]);
    if (st == DD_OK && n[0] != n[1])
        st = dd_error(DD_ERR_MISMATCH, "%s: %s has %zu samples but %s has %zu", prefix, dd_path_base(s->data[0]), n[0],
                      dd_path_base(s->data[1]), n[1]);
    if (st == DD_OK)
        st = spec_from_global(meta[0], cJSON_GetObjectItemCaseSensitive(root[0], "global"), rate[0], spec);
    int found = 0;
    if (st == DD_OK) st = split_from_annotations(meta[0], root[0], n[0], cnt, &found);
    if (st == DD_OK && !found) dd_split_counts(n[0], spec->split, cnt);
    cJSON_Delete(root[0]);
    cJSON_Delete(root[1]);
    s->n = n[0];
    if (st != DD_OK) {
        dd_sigmf_src_close(&s);
        return st;
    }
    *out = s;
    return DD_OK;
}

dd_status dd_sigmf_src_read(dd_sigmf_src *s, dd_cf32 *in, dd_cf32 *out, size_t max, size_t *got) {
    size_t k = s->n - s->pos < max ? s->n - s->pos : max;
    *got = 0;
    for (int c = 0; c < 2; c++) {
        size_t bytes = k * s->dt[c].bytes;
        if (bytes > s->bufcap) {
            unsigned char *nb = realloc(s->buf, bytes);
            if (!nb) return dd_error(DD_ERR_NOMEM, "out of memory reading %s", s->data[c]);
            s->buf = nb;
            s->bufcap = bytes;
        }
        size_t done = 0;
        while (done < bytes) {
            ssize_t r = read(s->fd[c], s->buf + done, bytes - done);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return dd_error(DD_ERR_IO, "cannot read %s: %s", s->data[c], strerror(errno));
            if (r == 0)
                return dd_error(DD_ERR_CORRUPT, "%s: truncated while reading (the file shrank)", s->data[c]);
            done += (size_t)r;
        }
        float *f = (float *)(void *)(c ? out : in);
        const size_t half = s->dt[c].bytes / 2;
        for (size_t i = 0; i < 2 * k; i++) {
            f[i] = decode1(s->buf + i * half, &s->dt[c]);
            if (!isfinite(f[i]))
                return dd_error(DD_ERR_RANGE, "%s: sample %zu is NaN/Inf (or overflows float32)", s->data[c],
                                s->pos + i / 2);
        }
    }
    s->pos += k;
    *got = k;
    return DD_OK;
}

struct dd_sigmf_sink {
    dd_afile d[2];
    int open[2];
    char prefix[2][DD_PATH_MAX];
};

void dd_sigmf_sink_abort(dd_sigmf_sink **kp) {
    if (!kp || !*kp) return;
    for (int c = 0; c < 2; c++)
        if ((*kp)->open[c]) dd_afile_abort(&(*kp)->d[c]);
    free(*kp);
    *kp = NULL;
}

dd_status dd_sigmf_sink_open(const char *prefix, dd_sigmf_sink **out) {
    *out = NULL;
    dd_sigmf_sink *k = calloc(1, sizeof *k);
    if (!k) return dd_error(DD_ERR_NOMEM, "out of memory");
    dd_status st = DD_OK;
    for (int c = 0; c < 2 && st == DD_OK; c++) {
        char meta[DD_PATH_MAX], data[DD_PATH_MAX];
        if ((st = dd_path_cat(k->prefix[c], DD_PATH_MAX, prefix, c ? "_output" : "_input")) != DD_OK) break;
        if ((st = sigmf_paths(k->prefix[c], meta, data)) != DD_OK) break;
        if ((st = dd_afile_open(&k->d[c], data)) != DD_OK) break;
        k->open[c] = 1;
    }
    if (st != DD_OK) {
        dd_sigmf_sink_abort(&k);
        return st;
    }
    *out = k;
    return DD_OK;
}

dd_status dd_sigmf_sink_put(dd_sigmf_sink *k, const dd_cf32 *in, const dd_cf32 *out, size_t n) {
    for (int c = 0; c < 2; c++) {
        const dd_cf32 *parts[1] = {c ? out : in};
        DD_TRY(write_data(&k->d[c], parts, &n, 1, DD_SIGMF_CF32_LE));
    }
    return DD_OK;
}

dd_status dd_sigmf_sink_commit(dd_sigmf_sink **kp, const dd_spec *spec, const size_t n[3]) {
    dd_sigmf_sink *k = *kp;
    cJSON *g = NULL, *ann = NULL;
    dd_afile am[2];
    int mopen[2] = {0, 0};
    char *text = NULL;
    dd_status st = dataset_meta(spec, n, k->prefix[0], &g, &ann);
    for (int c = 0; c < 2 && st == DD_OK; c++) {
        char meta[DD_PATH_MAX], data[DD_PATH_MAX];
        if ((st = sigmf_paths(k->prefix[c], meta, data)) != DD_OK) break;
        if ((st = meta_text(meta, spec->fs, DD_SIGMF_CF32_LE, c ? "distdpd dataset: PA output" : "distdpd dataset: PA input",
                            g, ann, &text)) != DD_OK)
            break;
        if ((st = dd_afile_open(&am[c], meta)) != DD_OK) break;
        mopen[c] = 1;
        if (fprintf(am[c].f, "%s\n", text) < 0) st = dd_afile_werr(&am[c]);
        cJSON_free(text);
        text = NULL;
        if (st == DD_OK) st = dd_afile_close(&am[c]);
        if (st == DD_OK) st = dd_afile_close(&k->d[c]);
    }
    /* data files first, then the meta files: a reader never finds a meta without data */
    for (int c = 0; c < 2 && st == DD_OK; c++) st = dd_afile_rename(&k->d[c]);
    for (int c = 0; c < 2 && st == DD_OK; c++) st = dd_afile_rename(&am[c]);
    if (st == DD_OK) dd_fsync_parent(k->prefix[0]);
    for (int c = 0; c < 2; c++)
        if (mopen[c]) dd_afile_abort(&am[c]);
    cJSON_Delete(g);
    cJSON_Delete(ann);
    dd_sigmf_sink_abort(kp);
    return st;
}
