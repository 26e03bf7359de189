/* The simulated-PA sidecar (train.h, DIR/pa.json): saves a dd_pa's model name, every
 * parameter (GMP coefficients included) and its calibration through the public pa.h API,
 * and rebuilds the noiseless true PA from it, so that a DPD trained on simulated data
 * can be measured on the PA that made the data. Falls back to `distdpd simulate`'s
 * simulation.json (model defaults + recorded drive and calibration). */
#include <complex.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "distdpd/train.h"
#include "train_internal.h"

#define SIM_PA_FORMAT 1

static cJSON *cplx(dd_cf64 z) {
    double v[2] = {creal(z), cimag(z)};
    return cJSON_CreateDoubleArray(v, 2);
}

static cJSON *cplx_array(const dd_cf64 *z, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cplx(z[i]));
    return a;
}

dd_status dd_sim_pa_save(const dd_pa *pa, const char *path) {
    if (!pa || !path) return dd_error(DD_ERR_ARG, "dd_sim_pa_save: NULL argument");
    const dd_pa_params *p = dd_pa_get_params(pa);
    dd_pa_calib cal;
    dd_pa_get_calib(pa, &cal);
    cJSON *o = cJSON_CreateObject();
    if (!o) return DD_ERR_NOMEM;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)p->seed);
    cJSON_AddStringToObject(o, "generator", "distdpd " DD_VERSION_STRING);
    cJSON_AddNumberToObject(o, "format", SIM_PA_FORMAT);
    cJSON_AddStringToObject(o, "model", dd_pa_name(pa));
    cJSON *q = cJSON_AddObjectToObject(o, "params");
    if (q) {
        cJSON_AddNumberToObject(q, "fs", p->fs);
        cJSON_AddNumberToObject(q, "drive_rms", p->drive_rms);
        cJSON_AddNumberToObject(q, "drive_db", p->drive_db);
        cJSON_AddNumberToObject(q, "out_gain_db", p->out_gain_db);
        cJSON_AddNumberToObject(q, "nl", (double)p->nl);
        double sa[4] = {p->saleh.alpha_a, p->saleh.beta_a, p->saleh.alpha_p, p->saleh.beta_p};
        cJSON_AddItemToObject(q, "saleh", cJSON_CreateDoubleArray(sa, 4));
        double ra[5] = {p->rapp.gain, p->rapp.vsat, p->rapp.p, p->rapp.ampm_alpha, p->rapp.ampm_beta};
        cJSON_AddItemToObject(q, "rapp", cJSON_CreateDoubleArray(ra, 5));
        const dd_pa_ghorbani *g = &p->ghorbani;
        double gh[8] = {g->x1, g->x2, g->x3, g->x4, g->y1, g->y2, g->y3, g->y4};
        cJSON_AddItemToObject(q, "ghorbani", cJSON_CreateDoubleArray(gh, 8));
        cJSON_AddItemToObject(q, "cross_coef", cplx(p->cross_coef));
        cJSON_AddNumberToObject(q, "cross_lag", p->cross_lag);
        cJSON_AddItemToObject(q, "fir_in", cplx_array(p->fir_in, p->fir_in_len));
        cJSON_AddItemToObject(q, "fir_out", cplx_array(p->fir_out, p->fir_out_len));
        if (p->gmp && strcmp(dd_pa_name(pa), "gmp") == 0) {
            cJSON *gj = cJSON_AddObjectToObject(q, "gmp");
            if (gj) {
                const dd_gmp_shape *s = &p->gmp->shape;
                int sh[9] = {s->ka, s->la, s->kb, s->lb, s->mb, s->kc, s->lc, s->mc, s->odd_only};
                cJSON_AddItemToObject(gj, "shape", cJSON_CreateIntArray(sh, 9));
                cJSON_AddItemToObject(gj, "coef", cplx_array(p->gmp->coef, (int)p->gmp->ncoef));
            }
        }
        cJSON_AddNumberToObject(q, "thermal_kappa", p->thermal_kappa);
        cJSON_AddNumberToObject(q, "thermal_tau_s", p->thermal_tau_s);
        cJSON_AddNumberToObject(q, "trap_kappa", p->trap_kappa);
        cJSON_AddNumberToObject(q, "trap_capture_s", p->trap_capture_s);
        cJSON_AddNumberToObject(q, "trap_release_s", p->trap_release_s);
        if (isfinite(p->snr_db))
            cJSON_AddNumberToObject(q, "snr_db", p->snr_db);
        else
            cJSON_AddNullToObject(q, "snr_db");
        cJSON_AddStringToObject(q, "seed", seed);
        cJSON_AddNumberToObject(q, "iq_amp_db", p->iq_amp_db);
        cJSON_AddNumberToObject(q, "iq_phase_deg", p->iq_phase_deg);
        cJSON_AddNumberToObject(q, "iq_at_input", p->iq_at_input);
        cJSON_AddNumberToObject(q, "drift_db_per_ms", p->drift_db_per_ms);
        cJSON_AddNumberToObject(q, "drift_deg_per_ms", p->drift_deg_per_ms);
    }
    cJSON *c = cJSON_AddObjectToObject(o, "calib");
    if (c) {
        cJSON_AddNumberToObject(c, "calibrated", cal.calibrated);
        cJSON_AddNumberToObject(c, "in_gain", cal.in_gain);
        cJSON_AddNumberToObject(c, "p0", cal.p0);
        cJSON_AddNumberToObject(c, "out_power", cal.out_power);
        cJSON_AddNumberToObject(c, "noise_var", cal.noise_var);
    }
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    if (!txt) return dd_error(DD_ERR_NOMEM, "out of memory writing %s", path);
    dd_status st = dd_train_write_text(path, txt, strlen(txt));
    cJSON_free(txt);
    return st;
}

/* ---------------------------------------------------------------- loading */

static dd_status jnum(const cJSON *o, const char *path, const char *k, double *v, int required) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!j) return required ? dd_error(DD_ERR_FORMAT, "%s: missing field '%s'", path, k) : DD_OK;
    if (cJSON_IsNull(j)) {
        *v = 0.0;
        return DD_OK;
    }
    if (!cJSON_IsNumber(j)) return dd_error(DD_ERR_FORMAT, "%s: field '%s' is not a number", path, k);
    if (!isfinite(j->valuedouble)) /* cJSON reads 1e999 as inf */
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' is not a finite number", path, k);
    *v = j->valuedouble;
    return DD_OK;
}

static dd_status jint(const cJSON *o, const char *path, const char *k, int *v) {
    double d = *v;
    DD_TRY(jnum(o, path, k, &d, 0));
    if (d != floor(d) || fabs(d) > 1e9) return dd_error(DD_ERR_FORMAT, "%s: field '%s' is not an integer", path, k);
    *v = (int)d;
    return DD_OK;
}

static dd_status jdarr(const cJSON *o, const char *path, const char *k, double *v, int n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!a) return DD_OK;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' is not an array of %d numbers", path, k, n);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
            return dd_error(DD_ERR_FORMAT, "%s: field '%s'[%d] is not a finite number", path, k, i);
        v[i] = e->valuedouble;
    }
    return DD_OK;
}

static dd_status jcplx(const cJSON *e, const char *path, const char *k, int i, dd_cf64 *z) {
    if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(e, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(e, 1)) || !isfinite(cJSON_GetArrayItem(e, 0)->valuedouble) ||
        !isfinite(cJSON_GetArrayItem(e, 1)->valuedouble))
        return dd_error(DD_ERR_FORMAT, "%s: field '%s'[%d] is not a [re, im] pair", path, k, i);
    *z = cJSON_GetArrayItem(e, 0)->valuedouble + I * cJSON_GetArrayItem(e, 1)->valuedouble;
    return DD_OK;
}

static dd_status jcarr(const cJSON *o, const char *path, const char *k, dd_cf64 *z, int cap, int *n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!a) return DD_OK;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > cap)
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' is not an array of at most %d [re, im] pairs", path, k, cap);
    *n = cJSON_GetArraySize(a);
    for (int i = 0; i < *n; i++) DD_TRY(jcplx(cJSON_GetArrayItem(a, i), path, k, i, &z[i]));
    return DD_OK;
}

static dd_status parse_json_file(const char *path, cJSON **root) {
    char *txt = NULL;
    DD_TRY(dd_read_text(path, &txt, NULL));
    *root = cJSON_Parse(txt);
    free(txt);
    if (!*root) return dd_error(DD_ERR_FORMAT, "%s: invalid JSON", path);
    return DD_OK;
}

static dd_status load_pa_json(const char *path, dd_pa **out) {
    cJSON *root = NULL;
    DD_TRY(parse_json_file(path, &root));
    dd_status st = DD_OK;
    dd_gmp *gmp = NULL;
    dd_pa *pa = NULL;
    dd_pa_params p;
    const cJSON *mj = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "params");
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(root, "calib");
    double fmt = 0;
    if ((st = jnum(root, path, "format", &fmt, 1)) != DD_OK) goto done;
    if (fmt != SIM_PA_FORMAT) {
        st = dd_error(DD_ERR_FORMAT, "%s: format %g, this build reads format %d", path, fmt, SIM_PA_FORMAT);
        goto done;
    }
    if (!cJSON_IsString(mj) || !cJSON_IsObject(q) || !cJSON_IsObject(cj)) {
        st = dd_error(DD_ERR_FORMAT, "%s: needs 'model' (string), 'params' and 'calib' (objects)", path);
        goto done;
    }
    const char *name = mj->valuestring;
    if ((st = dd_pa_params_default(name, &p)) != DD_OK) {
        dd_error_prefix(st, "%s: ", path);
        goto done;
    }
    int nl = (int)p.nl;
    double sa[4] = {p.saleh.alpha_a, p.saleh.beta_a, p.saleh.alpha_p, p.saleh.beta_p};
    double ra[5] = {p.rapp.gain, p.rapp.vsat, p.rapp.p, p.rapp.ampm_alpha, p.rapp.ampm_beta};
    dd_pa_ghorbani *g = &p.ghorbani;
    double gh[8] = {g->x1, g->x2, g->x3, g->x4, g->y1, g->y2, g->y3, g->y4};
    if ((st = jnum(q, path, "fs", &p.fs, 0)) != DD_OK || (st = jnum(q, path, "drive_rms", &p.drive_rms, 0)) != DD_OK ||
        (st = jnum(q, path, "drive_db", &p.drive_db, 0)) != DD_OK ||
        (st = jnum(q, path, "out_gain_db", &p.out_gain_db, 0)) != DD_OK || (st = jint(q, path, "nl", &nl)) != DD_OK ||
        (st = jdarr(q, path, "saleh", sa, 4)) != DD_OK || (st = jdarr(q, path, "rapp", ra, 5)) != DD_OK ||
        (st = jdarr(q, path, "ghorbani", gh, 8)) != DD_OK || (st = jint(q, path, "cross_lag", &p.cross_lag)) != DD_OK ||
        (st = jnum(q, path, "thermal_kappa", &p.thermal_kappa, 0)) != DD_OK ||
        (st = jnum(q, path, "thermal_tau_s", &p.thermal_tau_s, 0)) != DD_OK ||
        (st = jnum(q, path, "trap_kappa", &p.trap_kappa, 0)) != DD_OK ||
        (st = jnum(q, path, "trap_capture_s", &p.trap_capture_s, 0)) != DD_OK ||
        (st = jnum(q, path, "trap_release_s", &p.trap_release_s, 0)) != DD_OK ||
        (st = jnum(q, path, "snr_db", &p.snr_db, 0)) != DD_OK ||
        (st = jnum(q, path, "iq_amp_db", &p.iq_amp_db, 0)) != DD_OK ||
        (st = jnum(q, path, "iq_phase_deg", &p.iq_phase_deg, 0)) != DD_OK ||
        (st = jint(q, path, "iq_at_input", &p.iq_at_input)) != DD_OK ||
        (st = jnum(q, path, "drift_db_per_ms", &p.drift_db_per_ms, 0)) != DD_OK ||
        (st = jnum(q, path, "drift_deg_per_ms", &p.drift_deg_per_ms, 0)) != DD_OK)
        goto done;
    p.nl = (dd_pa_nl)nl;
    p.saleh = (dd_pa_saleh){sa[0], sa[1], sa[2], sa[3]};
    p.rapp = (dd_pa_rapp){ra[0], ra[1], ra[2], ra[3], ra[4]};
    *g = (dd_pa_ghorbani){gh[0], gh[1], gh[2], gh[3], gh[4], gh[5], gh[6], gh[7]};
    {
        const cJSON *cc = cJSON_GetObjectItemCaseSensitive(q, "cross_coef");
        if (cc && (st = jcplx(cc, path, "cross_coef", 0, &p.cross_coef)) != DD_OK) goto done;
    }
    if ((st = jcarr(q, path, "fir_in", p.fir_in, DD_PA_FIR_MAX, &p.fir_in_len)) != DD_OK) goto done;
    if ((st = jcarr(q, path, "fir_out", p.fir_out, DD_PA_FIR_MAX, &p.fir_out_len)) != DD_OK) goto done;
    {
        const cJSON *sj = cJSON_GetObjectItemCaseSensitive(q, "seed");
        if (cJSON_IsString(sj)) p.seed = strtoull(sj->valuestring, NULL, 10);
    }
    const cJSON *gj = cJSON_GetObjectItemCaseSensitive(q, "gmp");
    if (gj) {
        double sh[9] = {0};
        if (!cJSON_GetObjectItemCaseSensitive(gj, "shape")) { /* (jdarr leaves sh as it is) */
            st = dd_error(DD_ERR_FORMAT, "%s: missing field 'gmp.shape'", path);
            goto done;
        }
        if ((st = jdarr(gj, path, "shape", sh, 9)) != DD_OK) goto done;
        for (int i = 0; i < 9; i++)
            if (sh[i] != floor(sh[i]) || fabs(sh[i]) > 1e6) { /* before the cast to int */
                st = dd_error(DD_ERR_FORMAT, "%s: field 'gmp.shape'[%d] is not an integer in [-1e6, 1e6]", path, i);
                goto done;
            }
        dd_gmp_shape s = {(int)sh[0], (int)sh[1], (int)sh[2], (int)sh[3], (int)sh[4], (int)sh[5], (int)sh[6], (int)sh[7], (int)sh[8]};
        if ((st = dd_gmp_shape_check(&s)) != DD_OK) {
            dd_error_prefix(st, "%s: ", path);
            goto done;
        }
        size_t nc = dd_gmp_ncoef(&s);
        const cJSON *ca = cJSON_GetObjectItemCaseSensitive(gj, "coef");
        if (!cJSON_IsArray(ca) || (size_t)cJSON_GetArraySize(ca) != nc) {
            st = dd_error(DD_ERR_FORMAT, "%s: gmp.coef must hold %zu [re, im] pairs", path, nc);
            goto done;
        }
        if ((st = dd_gmp_create(&s, NULL, &gmp)) != DD_OK) goto done;
        for (size_t i = 0; i < nc; i++)
            if ((st = jcplx(cJSON_GetArrayItem(ca, (int)i), path, "gmp.coef", (int)i, &gmp->coef[i])) != DD_OK) goto done;
        p.gmp = gmp;
    }
    if ((st = dd_pa_create(name, &p, &pa)) != DD_OK) {
        dd_error_prefix(st, "%s: ", path);
        goto done;
    }
    dd_pa_calib cal;
    memset(&cal, 0, sizeof cal);
    double calibrated = 0;
    if ((st = jnum(cj, path, "calibrated", &calibrated, 0)) != DD_OK || (st = jnum(cj, path, "in_gain", &cal.in_gain, 1)) != DD_OK ||
        (st = jnum(cj, path, "p0", &cal.p0, 1)) != DD_OK || (st = jnum(cj, path, "out_power", &cal.out_power, 1)) != DD_OK ||
        (st = jnum(cj, path, "noise_var", &cal.noise_var, 1)) != DD_OK)
        goto done;
    if (calibrated != 0 && (st = dd_pa_set_calib(pa, &cal)) != DD_OK) {
        dd_error_prefix(st, "%s: ", path);
        goto done;
    }
    dd_pa_set_noise(pa, 0);
    *out = pa;
    pa = NULL;
done:
    dd_pa_destroy(&pa);
    dd_gmp_free(&gmp);
    cJSON_Delete(root);
    return st;
}

/* Fallback: `distdpd simulate`'s simulation.json (pa.model, drive_db, in_gain, out_power). */
static dd_status load_simulation_json(const char *path, const dd_dataset *ds, dd_pa **out) {
    if (!ds) return dd_error(DD_ERR_ARG, "%s: the data set is needed to rebuild the PA", path);
    cJSON *root = NULL;
    DD_TRY(parse_json_file(path, &root));
    dd_status st = DD_OK;
    dd_pa *pa = NULL;
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(root, "pa");
    const cJSON *mj = pj ? cJSON_GetObjectItemCaseSensitive(pj, "model") : NULL;
    if (!cJSON_IsString(mj)) {
        st = dd_error(DD_ERR_FORMAT, "%s: missing 'pa.model'", path);
        goto done;
    }
    dd_pa_params p;
    if ((st = dd_pa_params_default(mj->valuestring, &p)) != DD_OK) {
        dd_error_prefix(st, "%s: ", path);
        goto done;
    }
    dd_pa_calib cal;
    memset(&cal, 0, sizeof cal);
    if ((st = jnum(pj, path, "drive_db", &p.drive_db, 1)) != DD_OK || (st = jnum(pj, path, "in_gain", &cal.in_gain, 1)) != DD_OK ||
        (st = jnum(pj, path, "out_power", &cal.out_power, 1)) != DD_OK)
        goto done;
    p.fs = ds->spec.fs;
    p.snr_db = 0.0; /* the true PA is noiseless */
    if ((st = dd_pa_create(mj->valuestring, &p, &pa)) != DD_OK) {
        dd_error_prefix(st, "%s: ", path);
        goto done;
    }
    /* P0 = mean input power after the drive gain over the recorded input */
    double pw = 0.0;
    size_t n = 0;
    for (int s = 0; s < DD_SPLIT_COUNT; s++)
        for (size_t i = 0; i < ds->n[s]; i++) {
            dd_cf32 v = ds->in[s][i];
            pw += (double)crealf(v) * crealf(v) + (double)cimagf(v) * cimagf(v);
            n++;
        }
    cal.p0 = n ? cal.in_gain * cal.in_gain * pw / (double)n : 0.0;
    cal.noise_var = 0.0;
    if ((st = dd_pa_set_calib(pa, &cal)) != DD_OK) {
        dd_error_prefix(st, "%s: ", path);
        goto done;
    }
    dd_pa_set_noise(pa, 0);
    *out = pa;
    pa = NULL;
done:
    dd_pa_destroy(&pa);
    cJSON_Delete(root);
    return st;
}

dd_status dd_sim_pa_load(const char *dir_or_path, const dd_dataset *ds, dd_pa **pa, int *found) {
    if (!dir_or_path || !pa) return dd_error(DD_ERR_ARG, "dd_sim_pa_load: NULL argument");
    *pa = NULL;
    if (found) *found = 0;
    struct stat sb;
    char path[DD_TRAIN_PATH_MAX + 32];
    if (stat(dir_or_path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        DD_TRY(load_pa_json(dir_or_path, pa));
        if (found) *found = 1;
        return DD_OK;
    }
    if (snprintf(path, sizeof path, "%s/%s", dir_or_path, DD_SIM_PA_FILE) >= (int)sizeof path)
        return dd_error(DD_ERR_ARG, "path too long: %s", dir_or_path); /* the reason first: the path may fill the message */
    if (stat(path, &sb) == 0) {
        DD_TRY(load_pa_json(path, pa));
        if (found) *found = 1;
        return DD_OK;
    }
    snprintf(path, sizeof path, "%s/simulation.json", dir_or_path);
    if (stat(path, &sb) == 0) {
        DD_TRY(load_simulation_json(path, ds, pa));
        if (found) *found = 1;
        return DD_OK;
    }
    return DD_OK;
}
