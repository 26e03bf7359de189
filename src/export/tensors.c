/* Named float32 tensors in NumPy .npz (libzip) and safetensors files, written from a
 * model's parameter table and read back into one (export.h, docs/deploy.md). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

#include "distdpd/export.h"
#include "train/train_internal.h" /* dd_train_write_text: atomic file writes */

/* ---------------------------------------------------------------- bytes */

static int little_endian(void) {
    const uint16_t v = 1;
    unsigned char b;
    memcpy(&b, &v, 1);
    return b == 1;
}

/* n floats as little-endian bytes into dst. */
static void put_f32le(unsigned char *dst, const float *src, size_t n) {
    memcpy(dst, src, n * sizeof(float));
    if (little_endian()) return;
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = dst + 4 * i, t0 = p[0], t1 = p[1];
        p[0] = p[3], p[1] = p[2], p[2] = t1, p[3] = t0;
    }
}

static void get_le(void *dst, const unsigned char *src, size_t width) {
    unsigned char *d = dst;
    for (size_t i = 0; i < width; i++) d[i] = little_endian() ? src[i] : src[width - 1 - i];
}

static uint64_t get_u64le(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---------------------------------------------------------------- NPY */

/* The .npy bytes of one tensor (NPY 1.0, '<f4', C order); caller frees. */
static unsigned char *npy_encode(const dd_param_entry *e, const float *data, size_t *len) {
    char hdr[256], shape[128] = "";
    size_t o = 0;
    for (int d = 0; d < e->ndim; d++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%zu,%s", e->shape[d], d + 1 < e->ndim ? " " : "");
    if (e->ndim > 1) shape[o - 1] = '\0'; /* "(3, 2)"; one dimension keeps "(3,)" */
    int h = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape);
    size_t hl = (size_t)h + 1; /* with the final newline */
    hl += (64 - (10 + hl) % 64) % 64;
    *len = 10 + hl + e->size * 4;
    unsigned char *b = malloc(*len);
    if (!b) return NULL;
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(hl & 0xff);
    b[9] = (unsigned char)(hl >> 8);
    memset(b + 10, ' ', hl);
    memcpy(b + 10, hdr, (size_t)h);
    b[10 + hl - 1] = '\n';
    put_f32le(b + 10 + hl, data, e->size);
    return b;
}

/* Parses the .npy bytes of member `member` of `path` into t. */
static dd_status npy_decode(const unsigned char *b, size_t len, const char *path, const char *member, dd_tensor *t) {
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return dd_error(DD_ERR_FORMAT, "%s: member '%s' is not a .npy file (no \\x93NUMPY magic)", path, member);
    size_t hl, ho;
    if (b[6] == 1) {
        hl = (size_t)b[8] | (size_t)b[9] << 8;
        ho = 10;
    } else if ((b[6] == 2 || b[6] == 3) && len >= 12) {
        hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        ho = 12;
    } else {
        return dd_error(DD_ERR_FORMAT, "%s: member '%s': NPY version %d.%d is not supported (1.0 to 3.0)", path, member,
                        b[6], b[7]);
    }
    if (ho + hl > len || hl > 65536)
        return dd_error(DD_ERR_FORMAT, "%s: member '%s': header of %zu bytes runs past the end", path, member, hl);
    char *h = malloc(hl + 1);
    if (!h) return DD_ERR_NOMEM;
    memcpy(h, b + ho, hl);
    h[hl] = '\0';
    dd_status st = DD_OK;
    int f8 = 0;
    const char *p;
    if (strstr(h, "'descr': '<f4'") || strstr(h, "'descr':'<f4'")) {
        f8 = 0;
    } else if (strstr(h, "'descr': '<f8'") || strstr(h, "'descr':'<f8'")) {
        f8 = 1;
    } else {
        st = dd_error(DD_ERR_FORMAT, "%s: member '%s': dtype is not '<f4' or '<f8' (header %s)", path, member, h);
        goto done;
    }
    if (!strstr(h, "'fortran_order': False") && !strstr(h, "'fortran_order':False")) {
        st = dd_error(DD_ERR_FORMAT, "%s: member '%s': only C order (fortran_order False) is read", path, member);
        goto done;
    }
    if (!(p = strstr(h, "'shape':")) || !(p = strchr(p, '('))) {
        st = dd_error(DD_ERR_FORMAT, "%s: member '%s': no 'shape' in the header", path, member);
        goto done;
    }
    p++;
    t->ndim = 0;
    t->size = 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        if (!isdigit((unsigned char)*p) || t->ndim == DD_PARAM_MAX_NDIM) {
            st = dd_error(DD_ERR_FORMAT, "%s: member '%s': bad or more than %d-dimensional shape", path, member,
                          DD_PARAM_MAX_NDIM);
            goto done;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || v > ((size_t)1 << 40)) {
            st = dd_error(DD_ERR_FORMAT, "%s: member '%s': dimension out of range", path, member);
            goto done;
        }
        t->shape[t->ndim++] = (size_t)v;
        t->size *= (size_t)v;
        p = end;
    }
    const size_t w = f8 ? 8 : 4;
    if (len - ho - hl != t->size * w) {
        st = dd_error(DD_ERR_FORMAT, "%s: member '%s': %zu data bytes for %zu values of %zu bytes", path, member,
                      len - ho - hl, t->size, w);
        goto done;
    }
    t->data = malloc((t->size ? t->size : 1) * sizeof(float));
    if (!t->data) {
        st = DD_ERR_NOMEM;
        goto done;
    }
    const unsigned char *d = b + ho + hl;
    for (size_t i = 0; i < t->size; i++) {
        if (f8) {
            double v;
            get_le(&v, d + 8 * i, 8);
            t->data[i] = (float)v;
        } else {
            get_le(&t->data[i], d + 4 * i, 4);
        }
    }
done:
    free(h);
    return st;
}

/* ---------------------------------------------------------------- writing */

static dd_status zip_fail(zip_t *z, const char *path, const char *what) {
    dd_status st = dd_error(DD_ERR_IO, "%s: %s: %s", path, what, zip_strerror(z));
    zip_discard(z);
    return st;
}

/* zip_open(path, flags); on failure *st = status with "PATH: what: libzip's reason". */
static zip_t *zip_open_or(const char *path, int flags, dd_status status, const char *what, dd_status *st) {
    int err = 0;
    zip_t *z = zip_open(path, flags, &err);
    if (!z) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        *st = dd_error(status, "%s: %s: %s", path, what, zip_error_strerror(&ze));
        zip_error_fini(&ze);
    }
    return z;
}

static dd_status write_npz(const char *path, const dd_param_table *t, const float *params, const char *prefix) {
    dd_status st = DD_OK;
    zip_t *z = zip_open_or(path, ZIP_CREATE | ZIP_TRUNCATE, DD_ERR_IO, "cannot create", &st);
    if (!z) return st;
    for (size_t i = 0; i < t->count; i++) {
        const dd_param_entry *e = &t->entries[i];
        size_t len;
        unsigned char *b = npy_encode(e, params + e->offset, &len);
        if (!b) {
            zip_discard(z);
            return DD_ERR_NOMEM;
        }
        zip_source_t *src = zip_source_buffer(z, b, len, 1); /* libzip frees b */
        if (!src) {
            free(b);
            return zip_fail(z, path, "zip_source_buffer");
        }
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): zip_source_buffer(..., 1) owns b */
        char name[DD_PARAM_NAME_MAX + 64];
        snprintf(name, sizeof name, "%s%s.npy", prefix ? prefix : "", e->name);
        zip_int64_t idx = zip_file_add(z, name, src, ZIP_FL_ENC_UTF_8);
        if (idx < 0) {
            zip_source_free(src);
            return zip_fail(z, path, name);
        }
        if (zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0) return zip_fail(z, path, name);
        /* a fixed time stamp (1980-01-02, the zip epoch): the same model gives the same bytes */
        if (zip_file_set_mtime(z, (zip_uint64_t)idx, (time_t)315662400, 0) != 0) return zip_fail(z, path, name);
    }
    if (zip_close(z) != 0) return zip_fail(z, path, "write");
    return DD_OK;
}

static dd_status write_safetensors(const char *path, const dd_param_table *t, const float *params, const char *prefix,
                                   const char *const *meta, size_t nmeta) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return DD_ERR_NOMEM;
    if (nmeta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (size_t i = 0; m && i < nmeta; i++) cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]);
    }
    size_t off = 0;
    for (size_t i = 0; i < t->count; i++) {
        const dd_param_entry *e = &t->entries[i];
        char name[DD_PARAM_NAME_MAX + 64];
        snprintf(name, sizeof name, "%s%s", prefix ? prefix : "", e->name);
        cJSON *o = cJSON_AddObjectToObject(root, name), *sh = o ? cJSON_AddArrayToObject(o, "shape") : NULL;
        cJSON *offs = o ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        if (!offs) break;
        cJSON_AddStringToObject(o, "dtype", "F32");
        for (int d = 0; d < e->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e->shape[d]));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += e->size * 4;
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
    }
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!js) return dd_error(DD_ERR_NOMEM, "out of memory writing %s", path);
    size_t jl = strlen(js), hl = (jl + 7) / 8 * 8;
    unsigned char *b = malloc(8 + hl + off);
    dd_status st = DD_ERR_NOMEM;
    if (b) {
        for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
        memset(b + 8, ' ', hl);
        memcpy(b + 8, js, jl);
        size_t o = 8 + hl;
        for (size_t i = 0; i < t->count; i++) {
            put_f32le(b + o, params + t->entries[i].offset, t->entries[i].size);
            o += t->entries[i].size * 4;
        }
        st = dd_train_write_text(path, (const char *)b, o);
    }
    cJSON_free(js);
    free(b);
    return st;
}

dd_status dd_tensors_write(dd_tensor_format fmt, const char *path, const dd_param_table *t, const float *params,
                           const char *prefix, const char *const *meta, size_t nmeta) {
    if (!path || !t || !params) return dd_error(DD_ERR_ARG, "dd_tensors_write: NULL argument");
    if (fmt == DD_TENSORS_NPZ) return write_npz(path, t, params, prefix);
    if (fmt == DD_TENSORS_SAFETENSORS) return write_safetensors(path, t, params, prefix, meta, nmeta);
    return dd_error(DD_ERR_ARG, "dd_tensors_write: unknown format %d", (int)fmt);
}

/* ---------------------------------------------------------------- reading */

void dd_tensors_free(dd_tensor_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->t[i].data);
    free(s->t);
    memset(s, 0, sizeof *s);
}

static dd_tensor *tensor_add(dd_tensor_set *s) {
    dd_tensor *t = realloc(s->t, (s->n + 1) * sizeof *t);
    if (!t) return NULL;
    s->t = t;
    memset(&t[s->n], 0, sizeof *t);
    return &t[s->n++];
}

static dd_status read_npz(const char *path, dd_tensor_set *s) {
    dd_status st = DD_OK;
    zip_t *z = zip_open_or(path, ZIP_RDONLY | ZIP_CHECKCONS, DD_ERR_FORMAT, "not a readable .npz (zip) archive", &st);
    if (!z) return st;
    zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; st == DD_OK && i < n; i++) {
        zip_stat_t zs;
        if (zip_stat_index(z, (zip_uint64_t)i, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE) || !(zs.valid & ZIP_STAT_NAME)) {
            st = dd_error(DD_ERR_FORMAT, "%s: member %lld: %s", path, (long long)i, zip_strerror(z));
            break;
        }
        size_t nl = strlen(zs.name);
        if (nl < 5 || strcmp(zs.name + nl - 4, ".npy") != 0 || nl - 4 >= sizeof s->t[0].name) {
            st = dd_error(DD_ERR_FORMAT, "%s: member '%s' is not NAME.npy", path, zs.name);
            break;
        }
        if (zs.size > ((zip_uint64_t)1 << 32)) {
            st = dd_error(DD_ERR_FORMAT, "%s: member '%s' is larger than 4 GiB", path, zs.name);
            break;
        }
        unsigned char *b = malloc(zs.size ? (size_t)zs.size : 1);
        zip_file_t *f = b ? zip_fopen_index(z, (zip_uint64_t)i, 0) : NULL;
        if (!b || !f) {
            free(b);
            st = b ? dd_error(DD_ERR_FORMAT, "%s: member '%s': %s", path, zs.name, zip_strerror(z)) : DD_ERR_NOMEM;
            break;
        }
        zip_int64_t got = zip_fread(f, b, zs.size);
        zip_fclose(f);
        dd_tensor *t = got == (zip_int64_t)zs.size ? tensor_add(s) : NULL;
        if (got != (zip_int64_t)zs.size) {
            st = dd_error(DD_ERR_FORMAT, "%s: member '%s': read %lld of %llu bytes (corrupt archive)", path, zs.name,
                          (long long)got, (unsigned long long)zs.size);
        } else if (!t) {
            st = DD_ERR_NOMEM;
        } else {
            memcpy(t->name, zs.name, nl - 4);
            t->name[nl - 4] = '\0';
            st = npy_decode(b, (size_t)zs.size, path, zs.name, t);
        }
        free(b);
    }
    zip_discard(z);
    return st;
}

static dd_status read_safetensors(const char *path, const unsigned char *b, size_t len, dd_tensor_set *s) {
    const uint64_t hl = get_u64le(b);
    if (hl > len - 8 || hl > ((uint64_t)100 << 20))
        return dd_error(DD_ERR_FORMAT, "%s: safetensors header length %llu runs past the end of the file (%zu bytes)",
                        path, (unsigned long long)hl, len);
    cJSON *root = cJSON_ParseWithLength((const char *)b + 8, (size_t)hl);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dd_error(DD_ERR_FORMAT, "%s: the safetensors header is not a JSON object", path);
    }
    const unsigned char *data = b + 8 + hl;
    const size_t dlen = len - 8 - (size_t)hl;
    dd_status st = DD_OK;
    cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (strcmp(it->string, "__metadata__") == 0) {
            cJSON *mm = cJSON_GetObjectItemCaseSensitive(it, "model"), *mo = cJSON_GetObjectItemCaseSensitive(it, "model_opts");
            if (cJSON_IsString(mm)) snprintf(s->meta_model, sizeof s->meta_model, "%s", mm->valuestring);
            if (cJSON_IsString(mo)) snprintf(s->meta_opts, sizeof s->meta_opts, "%s", mo->valuestring);
            continue;
        }
        cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        cJSON *of = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2) {
            st = dd_error(DD_ERR_FORMAT, "%s: tensor '%s': needs \"dtype\", \"shape\" and two \"data_offsets\"", path,
                          it->string);
            break;
        }
        const int f8 = strcmp(dt->valuestring, "F64") == 0;
        if (!f8 && strcmp(dt->valuestring, "F32") != 0) {
            st = dd_error(DD_ERR_FORMAT, "%s: tensor '%s': dtype %s is not read (F32 or F64)", path, it->string,
                          dt->valuestring);
            break;
        }
        if (strlen(it->string) >= sizeof s->t[0].name || cJSON_GetArraySize(sh) > DD_PARAM_MAX_NDIM) {
            st = dd_error(DD_ERR_FORMAT, "%s: tensor '%s': name too long or more than %d dimensions", path, it->string,
                          DD_PARAM_MAX_NDIM);
            break;
        }
        dd_tensor *t = tensor_add(s);
        if (!t) {
            st = DD_ERR_NOMEM;
            break;
        }
        snprintf(t->name, sizeof t->name, "%s", it->string);
        t->size = 1;
        cJSON *d;
        cJSON_ArrayForEach(d, sh) {
            if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e12 || d->valuedouble != floor(d->valuedouble)) {
                st = dd_error(DD_ERR_FORMAT, "%s: tensor '%s': bad shape", path, it->string);
                break;
            }
            t->shape[t->ndim++] = (size_t)d->valuedouble;
            t->size *= (size_t)d->valuedouble;
        }
        if (st != DD_OK) break;
        const double o0 = cJSON_GetArrayItem(of, 0)->valuedouble, o1 = cJSON_GetArrayItem(of, 1)->valuedouble;
        const size_t w = f8 ? 8 : 4;
        if (!(o0 >= 0 && o1 >= o0 && o1 <= (double)dlen) || (size_t)(o1 - o0) != t->size * w) {
            st = dd_error(DD_ERR_FORMAT, "%s: tensor '%s': data_offsets [%.0f, %.0f] do not hold %zu values within the %zu data bytes",
                          path, it->string, o0, o1, t->size, dlen);
            break;
        }
        t->data = malloc((t->size ? t->size : 1) * sizeof(float));
        if (!t->data) {
            st = DD_ERR_NOMEM;
            break;
        }
        const unsigned char *p = data + (size_t)o0;
        for (size_t i = 0; i < t->size; i++) {
            if (f8) {
                double v;
                get_le(&v, p + 8 * i, 8);
                t->data[i] = (float)v;
            } else {
                get_le(&t->data[i], p + 4 * i, 4);
            }
        }
    }
    cJSON_Delete(root);
    return st;
}

dd_status dd_tensors_read(const char *path, dd_tensor_set *out) {
    if (!path || !out) return dd_error(DD_ERR_ARG, "dd_tensors_read: NULL argument");
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    DD_TRY(dd_read_text(path, &text, &len)); /* refuses a FIFO or a device at once */
    unsigned char *b = (unsigned char *)text;
    dd_status st;
    if (len >= 4 && memcmp(b, "PK\x03\x04", 4) == 0)
        st = read_npz(path, out);
    else if (len >= 10 && b[8] == '{')
        st = read_safetensors(path, b, len, out);
    else
        st = dd_error(DD_ERR_FORMAT, "%s: neither an .npz (zip) archive nor a safetensors file", path);
    free(b);
    if (st != DD_OK) dd_tensors_free(out);
    return st;
}

/* The tensor of s for parameter `name`: NAME itself or PREFIX.NAME; NULL if none. */
static const dd_tensor *find_tensor(const dd_tensor_set *s, const char *name) {
    const size_t nl = strlen(name);
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->t[i].name, name) == 0) return &s->t[i];
    for (size_t i = 0; i < s->n; i++) {
        const size_t tl = strlen(s->t[i].name);
        if (tl > nl + 1 && strcmp(s->t[i].name + tl - nl, name) == 0 && s->t[i].name[tl - nl - 1] == '.')
            return &s->t[i];
    }
    return NULL;
}

static void shape_str(char *buf, size_t cap, int ndim, const size_t *shape) {
    size_t o = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && o < cap; d++) o += (size_t)snprintf(buf + o, cap - o, "%s%zu", d ? ", " : "", shape[d]);
    if (o < cap) snprintf(buf + o, cap - o, ")");
}

dd_status dd_tensors_to_params(const dd_tensor_set *s, const dd_param_table *t, const char *where, float *params) {
    if (!s || !t || !params) return dd_error(DD_ERR_ARG, "dd_tensors_to_params: NULL argument");
    if (!where) where = "tensors";
    char *used = calloc(s->n ? s->n : 1, 1);
    if (!used) return DD_ERR_NOMEM;
    dd_status st = DD_OK;
    for (size_t i = 0; st == DD_OK && i < t->count; i++) {
        const dd_param_entry *e = &t->entries[i];
        const dd_tensor *x = find_tensor(s, e->name);
        char a[96], b[96];
        shape_str(b, sizeof b, e->ndim, e->shape);
        if (!x) {
            st = dd_error(DD_ERR_MISMATCH, "%s: no tensor '%s' %s (the model's parameter %zu of %zu)", where, e->name, b,
                          i + 1, t->count);
            break;
        }
        int same = x->ndim == e->ndim;
        for (int d = 0; same && d < e->ndim; d++) same = x->shape[d] == e->shape[d];
        if (!same) {
            shape_str(a, sizeof a, x->ndim, x->shape);
            st = dd_error(DD_ERR_MISMATCH, "%s: tensor '%s' has shape %s, the model's '%s' has %s (other model options?)",
                          where, x->name, a, e->name, b);
            break;
        }
        for (size_t k = 0; k < e->size; k++)
            if (!isfinite(x->data[k])) {
                st = dd_error(DD_ERR_RANGE, "%s: tensor '%s' value %zu is not finite", where, x->name, k);
                break;
            }
        memcpy(params + e->offset, x->data, e->size * sizeof(float));
        used[x - s->t] = 1;
    }
    for (size_t i = 0; st == DD_OK && i < s->n; i++)
        if (!used[i])
            st = dd_error(DD_ERR_MISMATCH, "%s: tensor '%s' matches no parameter of the model (%zu parameters, first '%s')",
                          where, s->t[i].name, t->count, t->count ? t->entries[0].name : "");
    free(used);
    return st;
}
