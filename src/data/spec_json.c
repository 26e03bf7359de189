/* spec.json (OpenDPD's signal description) reading and writing, the range checks every
 * loader applies to a dd_spec, and a JSON file reader that reports the line of a syntax
 * error. Fields: input_signal_fs, bw_main_ch, bw_sub_ch, n_sub_ch, nperseg (required),
 * split_ratios ({"train","val","test"} or [r0, r1, r2], default 0.6/0.2/0.2),
 * dataset_format ("split_csv" default, or "single_csv"), bw_occupied (distdpd extension,
 * Hz, default 0 = bw_main). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

dd_status dd_json_read(const char *path, cJSON **root) {
    *root = NULL;
    char *buf;
    size_t len;
    DD_TRY(dd_read_all(path, DD_JSON_MAX, &buf, &len));
    const char *end = NULL;
    dd_cloc loc;
    dd_cloc_push(&loc);
    cJSON *j = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1);
    dd_cloc_pop(&loc);
    if (!j) {
        if (len == 0 || strspn(buf, " \t\r\n") == len) {
            dd_free(buf);
            return dd_error(DD_ERR_FORMAT, "%s: empty file (expected a JSON object)", path);
        }
        size_t line = 1;
        const char *at = end && end >= buf && end <= buf + len ? end : buf;
        for (const char *q = buf; q < at; q++) line += *q == '\n';
        char near[4 * 31 + 4];
        size_t k = 0;
        while (k < 31 && at[k] && at[k] != '\n') k++;
        dd_quote(near, sizeof near, at, k, 31);
        dd_free(buf);
        return dd_error(DD_ERR_FORMAT, "%s:%zu: invalid JSON near '%s'", path, line, near);
    }
    dd_free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return dd_error(DD_ERR_FORMAT, "%s: top level must be a JSON object", path);
    }
    *root = j;
    return DD_OK;
}

char *dd_json_print(const cJSON *j) {
    dd_cloc loc;
    dd_cloc_push(&loc);
    char *t = cJSON_Print(j);
    dd_cloc_pop(&loc);
    return t;
}

const char *dd_json_type_name(const cJSON *j) {
    if (!j) return "nothing";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "an invalid value";
}

dd_status dd_json_number(const char *path, const cJSON *obj, const char *name, int required,
                         double *v) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!it) {
        if (required) return dd_error(DD_ERR_FORMAT, "%s: missing field '%s'", path, name);
        return DD_OK;
    }
    if (!cJSON_IsNumber(it))
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be a number, found %s", path, name,
                        dd_json_type_name(it));
    if (!isfinite(it->valuedouble))
        return dd_error(DD_ERR_RANGE, "%s: field '%s' is not finite", path, name);
    *v = it->valuedouble;
    return DD_OK;
}

/* An integer-valued number in [lo, hi]. */
dd_status dd_json_integer(const char *path, const cJSON *obj, const char *name, int required,
                          double lo, double hi, double *v) {
    double x = NAN;
    DD_TRY(dd_json_number(path, obj, name, required, &x));
    if (isnan(x)) return DD_OK; /* absent and optional */
    if (x != floor(x))
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be an integer, found %.17g", path, name, x);
    if (x < lo || x > hi)
        return dd_error(DD_ERR_RANGE, "%s: field '%s' must be in [%.0f, %.0f], found %.0f", path, name,
                        lo, hi, x);
    *v = x;
    return DD_OK;
}

dd_status dd_spec_check(const dd_spec *s, const char *where) {
    if (!where) where = "spec";
    if (!s) return dd_error(DD_ERR_ARG, "%s: NULL spec", where);
    if (!(isfinite(s->fs) && s->fs > 0))
        return dd_error(DD_ERR_RANGE, "%s: field 'input_signal_fs' (fs) must be > 0, found %g", where,
                        s->fs);
    if (!(isfinite(s->bw_main) && s->bw_main > 0 && s->bw_main < s->fs))
        return dd_error(DD_ERR_RANGE,
                        "%s: field 'bw_main_ch' (bw_main) must be in (0, fs = %g), found %g", where,
                        s->fs, s->bw_main);
    if (!(isfinite(s->bw_sub) && s->bw_sub > 0 && s->bw_sub <= s->bw_main))
        return dd_error(DD_ERR_RANGE,
                        "%s: field 'bw_sub_ch' (bw_sub) must be in (0, bw_main = %g], found %g", where,
                        s->bw_main, s->bw_sub);
    if (s->n_sub < 1)
        return dd_error(DD_ERR_RANGE, "%s: field 'n_sub_ch' (n_sub) must be >= 1, found %d", where,
                        s->n_sub);
    if (s->nperseg < 16)
        return dd_error(DD_ERR_RANGE, "%s: field 'nperseg' must be >= 16, found %zu", where,
                        s->nperseg);
    if (s->nperseg > DD_NPERSEG_MAX)
        return dd_error(DD_ERR_RANGE,
                        "%s: field 'nperseg' must be <= %zu (2^20 samples per evaluation segment), "
                        "found %zu",
                        where, DD_NPERSEG_MAX, s->nperseg);
    if (!(isfinite(s->bw_occupied) && s->bw_occupied >= 0 && s->bw_occupied < s->fs))
        return dd_error(DD_ERR_RANGE,
                        "%s: field 'bw_occupied' must be in [0, fs = %g) (0 = bw_main), found %g",
                        where, s->fs, s->bw_occupied);
    double sum = 0;
    for (int i = 0; i < 3; i++) {
        if (!(isfinite(s->split[i]) && s->split[i] >= 0))
            return dd_error(DD_ERR_RANGE, "%s: field 'split_ratios.%s' must be >= 0, found %g", where,
                            dd_split_name((dd_split)i), s->split[i]);
        sum += s->split[i];
    }
    if (fabs(sum - 1.0) > 1e-6)
        return dd_error(DD_ERR_RANGE, "%s: field 'split_ratios' must sum to 1, found %.9g", where, sum);
    return DD_OK;
}

dd_status dd_spec_read_json(const char *path, dd_spec *spec, char *format, size_t format_len) {
    if (!path || !spec) return dd_error(DD_ERR_ARG, "dd_spec_read_json: NULL argument");
    cJSON *root;
    DD_TRY(dd_json_read(path, &root));
    dd_status st = DD_OK;
    dd_spec s;
    dd_spec_default(&s);
    s.bw_occupied = 0;
    double nsub = 0, nper = 0;
    if ((st = dd_json_number(path, root, "input_signal_fs", 1, &s.fs)) != DD_OK) goto cleanup;
    if ((st = dd_json_number(path, root, "bw_main_ch", 1, &s.bw_main)) != DD_OK) goto cleanup;
    if ((st = dd_json_number(path, root, "bw_sub_ch", 1, &s.bw_sub)) != DD_OK) goto cleanup;
    if ((st = dd_json_integer(path, root, "n_sub_ch", 1, -2147483647.0, 2147483647.0, &nsub)) != DD_OK)
        goto cleanup;
    if ((st = dd_json_integer(path, root, "nperseg", 1, -1e15, 1e15, &nper)) != DD_OK) goto cleanup;
    if ((st = dd_json_number(path, root, "bw_occupied", 0, &s.bw_occupied)) != DD_OK) goto cleanup;
    s.n_sub = (int)nsub;
    if (nper < 16) {
        st = dd_error(DD_ERR_RANGE, "%s: field 'nperseg' must be >= 16, found %.0f", path, nper);
        goto cleanup;
    }
    if (nper > (double)DD_NPERSEG_MAX) {
        st = dd_error(DD_ERR_RANGE,
                      "%s: field 'nperseg' must be <= %zu (2^20 samples per evaluation segment), "
                      "found %.0f",
                      path, DD_NPERSEG_MAX, nper);
        goto cleanup;
    }
    s.nperseg = (size_t)nper;

    const cJSON *sr = cJSON_GetObjectItemCaseSensitive(root, "split_ratios");
    if (sr && cJSON_IsObject(sr)) {
        for (int i = 0; i < 3; i++) {
            const char *nm = dd_split_name((dd_split)i);
            const cJSON *it = cJSON_GetObjectItemCaseSensitive(sr, nm);
            if (!it) {
                st = dd_error(DD_ERR_FORMAT, "%s: missing field 'split_ratios.%s'", path, nm);
                goto cleanup;
            }
            if (!cJSON_IsNumber(it)) {
                st = dd_error(DD_ERR_FORMAT, "%s: field 'split_ratios.%s' must be a number, found %s",
                              path, nm, dd_json_type_name(it));
                goto cleanup;
            }
            s.split[i] = it->valuedouble;
        }
    } else if (sr && cJSON_IsArray(sr)) {
        if (cJSON_GetArraySize(sr) != 3) {
            st = dd_error(DD_ERR_FORMAT, "%s: field 'split_ratios' must have 3 entries, found %d", path,
                          cJSON_GetArraySize(sr));
            goto cleanup;
        }
        for (int i = 0; i < 3; i++) {
            const cJSON *it = cJSON_GetArrayItem(sr, i);
            if (!cJSON_IsNumber(it)) {
                st = dd_error(DD_ERR_FORMAT, "%s: field 'split_ratios[%d]' must be a number, found %s",
                              path, i, dd_json_type_name(it));
                goto cleanup;
            }
            s.split[i] = it->valuedouble;
        }
    } else if (sr) {
        st = dd_error(DD_ERR_FORMAT,
                      "%s: field 'split_ratios' must be an object {train, val, test} or an array, "
                      "found %s",
                      path, dd_json_type_name(sr));
        goto cleanup;
    }

    const char *fmt = "split_csv";
    const cJSON *df = cJSON_GetObjectItemCaseSensitive(root, "dataset_format");
    if (df) {
        if (!cJSON_IsString(df)) {
            st = dd_error(DD_ERR_FORMAT, "%s: field 'dataset_format' must be a string, found %s", path,
                          dd_json_type_name(df));
            goto cleanup;
        }
        fmt = df->valuestring;
        if (strcmp(fmt, "split_csv") != 0 && strcmp(fmt, "single_csv") != 0) {
            char q[4 * 64 + 4];
            st = dd_error(DD_ERR_UNSUPPORTED,
                          "%s: field 'dataset_format' has unknown value '%s' (expected "
                          "'split_csv' or 'single_csv')",
                          path, dd_quote(q, sizeof q, fmt, strlen(fmt), 64));
            goto cleanup;
        }
    }
    if ((st = dd_spec_check(&s, path)) != DD_OK) goto cleanup;
    if (format) {
        if (format_len <= strlen(fmt)) {
            st = dd_error(DD_ERR_ARG, "dd_spec_read_json: format buffer of %zu bytes too small",
                          format_len);
            goto cleanup;
        }
        memcpy(format, fmt, strlen(fmt) + 1); /* fits: checked above */
    }
    *spec = s;
cleanup:
    cJSON_Delete(root);
    return st;
}

/* Adds a finite number printed with the fewest digits (15, 16 or 17) that read back to
 * exactly the same double: cJSON prints 15 digits whenever they come back within its
 * epsilon, which loses the last bits of values such as 4.6111111111111111e47 (found by
 * fuzz_spec_json: a spec written and read back differed). Returns the item or NULL. */
static cJSON *add_num_exact(cJSON *obj, const char *key, double v) {
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    cJSON *it = cJSON_CreateRaw(buf);
    if (it && !cJSON_AddItemToObject(obj, key, it)) {
        cJSON_Delete(it);
        return NULL;
    }
    return it;
}

dd_status dd_spec_write_json(const char *path, const dd_spec *spec, const char *format) {
    if (!path || !spec) return dd_error(DD_ERR_ARG, "dd_spec_write_json: NULL argument");
    if (!format) format = "split_csv";
    if (strcmp(format, "split_csv") != 0 && strcmp(format, "single_csv") != 0)
        return dd_error(DD_ERR_ARG,
                        "dd_spec_write_json: format '%s' must be 'split_csv' or 'single_csv'", format);
    DD_TRY(dd_spec_check(spec, path));
    dd_status st = DD_OK;
    char *text = NULL;
    dd_afile a;
    int opened = 0;
    cJSON *root = cJSON_CreateObject();
    cJSON *sr = root && cJSON_AddStringToObject(root, "dataset_format", format)
                    ? cJSON_AddObjectToObject(root, "split_ratios")
                    : NULL;
    if (!sr ||
        !add_num_exact(sr, "train", spec->split[0]) ||
        !add_num_exact(sr, "val", spec->split[1]) ||
        !add_num_exact(sr, "test", spec->split[2]) ||
        !add_num_exact(root, "input_signal_fs", spec->fs) ||
        !add_num_exact(root, "bw_main_ch", spec->bw_main) ||
        !add_num_exact(root, "bw_sub_ch", spec->bw_sub) ||
        !cJSON_AddNumberToObject(root, "n_sub_ch", spec->n_sub) ||
        !cJSON_AddNumberToObject(root, "nperseg", (double)spec->nperseg) ||
        (spec->bw_occupied != 0 && !add_num_exact(root, "bw_occupied", spec->bw_occupied)) ||
        !(text = dd_json_print(root))) {
        st = dd_error(DD_ERR_NOMEM, "%s: out of memory building JSON", path);
        goto cleanup;
    }
    if ((st = dd_afile_open(&a, path)) != DD_OK) goto cleanup;
    opened = 1;
    if (fprintf(a.f, "%s\n", text) < 0) {
        st = dd_afile_werr(&a);
        goto cleanup;
    }
    st = dd_afile_commit(&a);
cleanup:
    if (st != DD_OK && opened) dd_afile_abort(&a);
    cJSON_free(text);
    cJSON_Delete(root);
    return st;
}
