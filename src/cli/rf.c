/* The RF half of the distdpd command (see rf.h): simulated measurements, the
 * simulation.json sidecar, the measurement of a data set and its HTML report. */
#include <complex.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/fit.h"
#include "distdpd/report.h"
#include "distdpd/train.h"
#include "rf.h"

#define PI 3.14159265358979323846

/* ================================================================ simulation */

void dd_sim_cfg_default(dd_sim_cfg *c) {
    c->signal = "default";
    c->pa = "realistic";
    c->seed = 1;
    c->samples = 0;
    c->drive_db = 0.0;
    c->snr_db = NAN;
    c->qam = 0;
    c->papr_db = NAN;
    c->symbols = 0;
    c->ofdm = NULL;
    c->pa_params = NULL;
}

void dd_sim_free(dd_sim *s) {
    dd_ofdm_destroy(&s->frame);
    dd_pa_destroy(&s->pa);
    dd_free(s->x);
    dd_free(s->y);
    memset(s, 0, sizeof *s);
}

dd_status dd_sim_run(const dd_sim_cfg *c, dd_sim *s) {
    memset(s, 0, sizeof *s);
    dd_ofdm_cfg oc;
    dd_status st;
    dd_cf32 *warm = NULL;
    if (c->ofdm)
        oc = *c->ofdm;
    else if ((st = dd_ofdm_cfg_default(&oc, c->signal)) != DD_OK)
        return dd_error_prefix(st, "--signal: ");
    oc.seed = c->seed;
    if (c->qam) oc.qam = c->qam;
    if (!isnan(c->papr_db)) oc.papr_target_db = c->papr_db;
    if (c->symbols) oc.n_symbols = c->symbols;
    if ((st = dd_ofdm_create(&oc, &s->frame)) != DD_OK) goto fail;
    if ((st = dd_ofdm_spec(&oc, &s->spec)) != DD_OK) goto fail;
    const dd_cf32 *fr = dd_ofdm_samples(s->frame, &s->frame_len);

    if (c->pa_params)
        s->params = *c->pa_params;
    else if ((st = dd_pa_params_default(c->pa, &s->params)) != DD_OK) {
        dd_error_prefix(st, "--pa: ");
        goto fail;
    }
    s->params.fs = s->spec.fs;
    s->params.drive_db += c->drive_db;
    if (!isnan(c->snr_db)) s->params.snr_db = c->snr_db;
    s->params.seed = c->seed + 1;
    if ((st = dd_pa_create(c->pa, &s->params, &s->pa)) != DD_OK) goto fail;
    if ((st = dd_pa_calibrate(s->pa, fr, s->frame_len)) != DD_OK) goto fail;
    /* one frame to reach the steady state of the filters and the long-term memory */
    warm = dd_calloc(s->frame_len, sizeof *warm);
    if (!warm) {
        st = DD_ERR_NOMEM;
        goto fail;
    }
    if ((st = dd_pa_apply(s->pa, fr, warm, s->frame_len)) != DD_OK) goto fail;

    s->n = c->samples ? c->samples : s->frame_len;
    s->x = dd_calloc(s->n, sizeof *s->x);
    s->y = dd_calloc(s->n, sizeof *s->y);
    if (!s->x || !s->y) {
        st = DD_ERR_NOMEM;
        goto fail;
    }
    for (size_t i = 0; i < s->n; i++) s->x[i] = fr[i % s->frame_len];
    if ((st = dd_pa_apply(s->pa, s->x, s->y, s->n)) != DD_OK) goto fail;
    dd_free(warm);
    return DD_OK;
fail:
    dd_free(warm);
    dd_sim_free(s);
    return st;
}

dd_status dd_sim_dataset(const dd_sim *s, dd_dataset **ds) {
    size_t cnt[DD_SPLIT_COUNT];
    cnt[0] = (size_t)floor(s->n * s->spec.split[0]);
    cnt[1] = (size_t)floor(s->n * s->spec.split[1]);
    if (cnt[0] + cnt[1] > s->n) cnt[1] = s->n - cnt[0];
    cnt[2] = s->n - cnt[0] - cnt[1];
    const dd_cf32 *in[DD_SPLIT_COUNT] = {s->x, s->x + cnt[0], s->x + cnt[0] + cnt[1]};
    const dd_cf32 *out[DD_SPLIT_COUNT] = {s->y, s->y + cnt[0], s->y + cnt[0] + cnt[1]};
    return dd_dataset_from_arrays(&s->spec, cnt, in, out, ds);
}

static cJSON *ofdm_cfg_json(const dd_ofdm_cfg *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    cJSON_AddNumberToObject(o, "fs", c->fs);
    cJSON_AddNumberToObject(o, "scs", c->scs);
    cJSON_AddNumberToObject(o, "n_carriers", c->n_carriers);
    cJSON_AddNumberToObject(o, "carrier_bw", c->carrier_bw);
    cJSON_AddNumberToObject(o, "n_rb", c->n_rb);
    cJSON_AddNumberToObject(o, "carrier_spacing", c->carrier_spacing);
    cJSON_AddNumberToObject(o, "qam", c->qam);
    cJSON_AddNumberToObject(o, "n_symbols", c->n_symbols);
    cJSON_AddNumberToObject(o, "cp_len", c->cp_len);
    cJSON_AddNumberToObject(o, "wola_frac", c->wola_frac);
    cJSON_AddNumberToObject(o, "band_limit", c->band_limit);
    cJSON_AddNumberToObject(o, "papr_target_db", c->papr_target_db);
    cJSON_AddNumberToObject(o, "cfr_iters", c->cfr_iters);
    cJSON_AddStringToObject(o, "seed", seed);
    return o;
}

static const char *const format_names[] = {"opendpd", "bin", "sigmf"};

dd_status dd_sim_save(const dd_sim_cfg *c, const dd_sim *s, const dd_dataset *ds, const char *dir,
                      int format, const char **data_path) {
    static char path[4096];
    char side[4096];
    DD_TRY(dd_cli_mkdirs(dir));
    if (format == 1) {
        snprintf(path, sizeof path, "%s/data.ddb", dir);
        DD_TRY(dd_dataset_save_bin(ds, path));
    } else if (format == 2) {
        snprintf(path, sizeof path, "%s/signal", dir);
        DD_TRY(dd_dataset_save_sigmf(ds, path));
        snprintf(path, sizeof path, "%s", dir);
    } else {
        DD_TRY(dd_dataset_save_opendpd(ds, dir));
        snprintf(path, sizeof path, "%s", dir);
    }
    if (data_path) *data_path = path;

    /* the PA that produced the data, with its calibration: train-dpd rebuilds it
     * (noiseless) from DIR/pa.json to measure a DPD on the true PA */
    char pj[4200];
    snprintf(pj, sizeof pj, "%s/%s", dir, DD_SIM_PA_FILE);
    DD_TRY(dd_sim_pa_save(s->pa, pj));

    dd_ofdm_info info;
    DD_TRY(dd_ofdm_get_info(s->frame, &info));
    dd_pa_calib cal;
    dd_pa_get_calib(s->pa, &cal);
    cJSON *root = cJSON_CreateObject();
    if (!root) return dd_error(DD_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(root, "generator", "distdpd simulate " DD_VERSION_STRING);
    cJSON_AddStringToObject(root, "format", format_names[format]);
    cJSON_AddNumberToObject(root, "samples", (double)s->n);
    cJSON *sp = cJSON_AddObjectToObject(root, "splits");
    if (sp)
        for (int k = 0; k < DD_SPLIT_COUNT; k++) cJSON_AddNumberToObject(sp, dd_split_name((dd_split)k), (double)ds->n[k]);
    cJSON *sig = cJSON_AddObjectToObject(root, "signal");
    if (sig) {
        cJSON_AddStringToObject(sig, "preset", c->signal);
        cJSON_AddNumberToObject(sig, "frame_samples", (double)s->frame_len);
        cJSON_AddNumberToObject(sig, "papr_db", info.papr_db);
        cJSON_AddItemToObject(sig, "ofdm", ofdm_cfg_json(&info.cfg));
    }
    cJSON *pa = cJSON_AddObjectToObject(root, "pa");
    if (pa) {
        char seed[32];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->params.seed);
        cJSON_AddStringToObject(pa, "model", c->pa);
        cJSON_AddNumberToObject(pa, "drive_db_offset", c->drive_db);
        cJSON_AddNumberToObject(pa, "drive_db", s->params.drive_db);
        if (isfinite(s->params.snr_db) && s->params.snr_db > 0)
            cJSON_AddNumberToObject(pa, "snr_db", s->params.snr_db);
        else
            cJSON_AddNullToObject(pa, "snr_db");
        cJSON_AddStringToObject(pa, "noise_seed", seed);
        cJSON_AddNumberToObject(pa, "in_gain", cal.in_gain);
        cJSON_AddNumberToObject(pa, "out_power", cal.out_power);
        cJSON_AddNumberToObject(pa, "noise_var", cal.noise_var);
    }
    snprintf(side, sizeof side, "%s/simulation.json", dir);
    return dd_cli_write_json(side, root);
}

static dd_status json_num(const char *path, const cJSON *o, const char *name, double *v) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(j)) return dd_error(DD_ERR_FORMAT, "%s: field 'signal.ofdm.%s' missing or not a number", path, name);
    *v = j->valuedouble;
    return DD_OK;
}

dd_status dd_sim_load_frame(const char *dpath, dd_ofdm **frame, char *desc, size_t desc_len) {
    *frame = NULL;
    if (desc && desc_len) desc[0] = '\0';
    char dir[4096], path[4200];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s", dpath);
    if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* a file: look next to it */
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof dir, ".");
    }
    snprintf(path, sizeof path, "%s/simulation.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return DD_OK;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    dd_status st = DD_OK;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 16384;
            char *nb = realloc(buf, cap);
            if (!nb) {
                st = dd_error(DD_ERR_NOMEM, "out of memory reading %s", path);
                break;
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, 4096, f);
        len += r;
        if (r < 4096) break;
    }
    fclose(f);
    if (st != DD_OK) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    cJSON *root = cJSON_Parse(buf);
    free(buf);
    if (!root) return dd_error(DD_ERR_FORMAT, "%s: invalid JSON", path);
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(root, "signal");
    const cJSON *oj = sig ? cJSON_GetObjectItemCaseSensitive(sig, "ofdm") : NULL;
    const cJSON *pre = sig ? cJSON_GetObjectItemCaseSensitive(sig, "preset") : NULL;
    const cJSON *pam = cJSON_GetObjectItemCaseSensitive(root, "pa");
    const cJSON *model = pam ? cJSON_GetObjectItemCaseSensitive(pam, "model") : NULL;
    dd_ofdm_cfg c;
    double v = 0.0;
    dd_ofdm_cfg_default(&c, NULL);
    if (!cJSON_IsObject(oj)) {
        st = dd_error(DD_ERR_FORMAT, "%s: missing object 'signal.ofdm'", path);
        goto done;
    }
#define NUM(field, name, cast)                                          \
    do {                                                                \
        if ((st = json_num(path, oj, name, &v)) != DD_OK) goto done;    \
        c.field = (cast)v;                                              \
    } while (0)
    NUM(fs, "fs", double);
    NUM(scs, "scs", double);
    NUM(n_carriers, "n_carriers", int);
    NUM(carrier_bw, "carrier_bw", double);
    NUM(n_rb, "n_rb", int);
    NUM(carrier_spacing, "carrier_spacing", double);
    NUM(qam, "qam", int);
    NUM(n_symbols, "n_symbols", int);
    NUM(cp_len, "cp_len", int);
    NUM(wola_frac, "wola_frac", double);
    NUM(band_limit, "band_limit", int);
    NUM(papr_target_db, "papr_target_db", double);
    NUM(cfr_iters, "cfr_iters", int);
#undef NUM
    const cJSON *sj = cJSON_GetObjectItemCaseSensitive(oj, "seed");
    if (!cJSON_IsString(sj)) {
        st = dd_error(DD_ERR_FORMAT, "%s: field 'signal.ofdm.seed' missing or not a string", path);
        goto done;
    }
    c.seed = strtoull(sj->valuestring, NULL, 10);
    if ((st = dd_ofdm_create(&c, frame)) != DD_OK) {
        dd_error_prefix(st, "%s: regenerating the frame: ", path);
        goto done;
    }
    if (desc && desc_len)
        snprintf(desc, desc_len, "OFDM preset %s (%d x %.0f MHz, %d-QAM, %d symbols, seed %llu) through PA model %s",
                 cJSON_IsString(pre) ? pre->valuestring : "?", c.n_carriers, c.carrier_bw / 1e6, c.qam,
                 c.n_symbols, (unsigned long long)c.seed, cJSON_IsString(model) ? model->valuestring : "?");
done:
    cJSON_Delete(root);
    return st;
}

const char *dd_rf_resolve_dataset(const char *path, char *buf, size_t cap) {
    struct stat sb;
    char probe[4200];
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return path;
    snprintf(probe, sizeof probe, "%s/spec.json", path);
    if (stat(probe, &sb) == 0) return path;
    snprintf(probe, sizeof probe, "%s/data.ddb", path);
    if (stat(probe, &sb) == 0 && S_ISREG(sb.st_mode)) {
        snprintf(buf, cap, "%s", probe);
        return buf;
    }
    return path;
}

/* ================================================================ analysis */

void dd_rf_opts_default(dd_rf_opts *o) {
    o->mp_K = 7;
    o->mp_M = 4;
    o->scatter = 5000;
    o->plots = 1;
}

void dd_rf_free(dd_rf_analysis *a) {
    dd_free(a->x);
    dd_free(a->y);
    dd_free(a->freq_mhz);
    dd_free(a->psd_in_db);
    dd_free(a->psd_out_db);
    dd_amam_free(&a->curve);
    dd_free(a->sc_in_db);
    dd_free(a->sc_gain_db);
    dd_free(a->sc_phase_deg);
    memset(a, 0, sizeof *a);
}

/* Start offset and length of split k inside the concatenated arrays. */
static size_t split_off(const dd_rf_analysis *a, int k) {
    size_t off = 0;
    for (int j = 0; j < k; j++) off += a->n_split[j];
    return off;
}

/* Welch PSD of x averaged over the splits (each split on its own, weighted by its
 * length, so that the joints between splits, which need not be contiguous in time,
 * add no splatter), in dB relative to the mean in-band level (|f| < 0.45 occupied).
 * Splits shorter than nper are skipped; if all are, the whole signal is used. */
static dd_status psd_rel(const dd_rf_analysis *a, const dd_cf32 *x, size_t nper, double *freq,
                         double *out) {
    const dd_spec *sp = &a->spec;
    double *tmp = dd_calloc(nper, sizeof *tmp);
    if (!tmp) return DD_ERR_NOMEM;
    dd_status st = DD_OK;
    double wsum = 0;
    memset(out, 0, nper * sizeof *out);
    for (int k = 0; k < DD_SPLIT_COUNT && st == DD_OK; k++) {
        size_t nk = a->n_split[k];
        if (nk < nper) continue;
        if ((st = dd_welch(x + split_off(a, k), nk, sp->fs, nper, DD_PSD_DENSITY, 0, tmp, freq)) != DD_OK) break;
        for (size_t i = 0; i < nper; i++) out[i] += (double)nk * tmp[i];
        wsum += (double)nk;
    }
    if (st == DD_OK && wsum == 0) {
        st = dd_welch(x, a->n, sp->fs, nper, DD_PSD_DENSITY, 0, out, freq);
        wsum = 1.0;
    }
    dd_free(tmp);
    if (st != DD_OK) return st;
    double bw = sp->bw_occupied > 0 ? sp->bw_occupied : sp->bw_main;
    double sum = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < nper; i++) {
        out[i] /= wsum;
        if (fabs(freq[i]) < 0.45 * bw) {
            sum += out[i];
            cnt++;
        }
    }
    double ref = cnt && sum > 0 ? sum / cnt : 1.0;
    for (size_t i = 0; i < nper; i++) out[i] = dd_db10(out[i] / ref);
    return DD_OK;
}

dd_status dd_rf_psd_rel(const dd_spec *sp, const dd_cf32 *x, size_t n, size_t nper, double *freq_mhz,
                        double *out_db) {
    DD_TRY(dd_welch(x, n, sp->fs, nper, DD_PSD_DENSITY, 0, out_db, freq_mhz));
    const double ref = dd_psd_inband_mean(sp, out_db, freq_mhz, nper);
    for (size_t i = 0; i < nper; i++) {
        out_db[i] = dd_db10(out_db[i] / ref);
        freq_mhz[i] /= 1e6;
    }
    return DD_OK;
}

/* ACLR of the data set: per split (splits need not be contiguous in time), combined
 * as the sample-weighted mean of the dB values. Splits the definition cannot measure
 * (too short) are skipped; NaN if none can be measured. */
static void aclr_splits(const dd_rf_analysis *a, const dd_cf32 *x, dd_aclr_def d, dd_aclr_result *r) {
    double wl = 0, wr = 0, w = 0;
    for (int k = 0; k < DD_SPLIT_COUNT; k++) {
        dd_aclr_result rk;
        size_t nk = a->n_split[k];
        if (nk == 0) continue;
        if (dd_aclr(x + split_off(a, k), nk, &a->spec, d, &rk) != DD_OK || !isfinite(rk.left_db) ||
            !isfinite(rk.right_db)) {
            dd_log(DD_LOG_INFO, "ACLR (%s) of the %s split not measured: %s", d == DD_ACLR_3GPP ? "3gpp" : "opendpd",
                   dd_split_name((dd_split)k), dd_last_error());
            continue;
        }
        wl += (double)nk * rk.left_db;
        wr += (double)nk * rk.right_db;
        w += (double)nk;
    }
    if (w == 0) {
        r->left_db = r->right_db = r->avg_db = NAN;
        dd_log(DD_LOG_WARN, "ACLR (%s) could not be measured on any split", d == DD_ACLR_3GPP ? "3gpp" : "opendpd");
        return;
    }
    r->left_db = wl / w;
    r->right_db = wr / w;
    r->avg_db = 0.5 * (r->left_db + r->right_db);
}

static double rms_diff_rel(const dd_cf32 *a, const dd_cf32 *b, size_t n) {
    double e = 0, p = 0;
    for (size_t i = 0; i < n; i++) {
        e += pow(cabsf(a[i] - b[i]), 2);
        p += pow(cabsf(b[i]), 2);
    }
    return p > 0 ? sqrt(e / p) : INFINITY;
}

dd_status dd_rf_analyze(const dd_dataset *ds, const dd_ofdm *frame, const dd_rf_opts *o,
                        dd_rf_analysis *a) {
    memset(a, 0, sizeof *a);
    double t0 = dd_now();
    dd_status st = DD_OK;
    dd_gmp *mp = NULL;
    a->spec = ds->spec;
    for (int k = 0; k < DD_SPLIT_COUNT; k++) {
        a->n_split[k] = ds->n[k];
        a->n += ds->n[k];
    }
    if (a->n == 0) return dd_error(DD_ERR_RANGE, "the data set holds no samples");
    a->x = dd_calloc(a->n, sizeof *a->x);
    a->y = dd_calloc(a->n, sizeof *a->y);
    if (!a->x || !a->y) {
        st = DD_ERR_NOMEM;
        goto fail;
    }
    size_t off = 0;
    for (int k = 0; k < DD_SPLIT_COUNT; k++) {
        if (ds->n[k]) {
            memcpy(a->x + off, ds->in[k], ds->n[k] * sizeof *a->x);
            memcpy(a->y + off, ds->out[k], ds->n[k] * sizeof *a->y);
        }
        off += ds->n[k];
    }
    const size_t n = a->n;
    if ((st = dd_papr_db(a->x, n, &a->papr_in_db)) != DD_OK) goto fail;
    if ((st = dd_papr_db(a->y, n, &a->papr_out_db)) != DD_OK) goto fail;
    for (int d = 0; d < 2; d++) {
        aclr_splits(a, a->x, (dd_aclr_def)d, &a->aclr_in[d]);
        aclr_splits(a, a->y, (dd_aclr_def)d, &a->aclr_out[d]);
    }
    aclr_splits(a, a->x, DD_ACLR_OPENDPD_WELCH, &a->aclr_in_welch);
    aclr_splits(a, a->y, DD_ACLR_OPENDPD_WELCH, &a->aclr_out_welch);
    if ((st = dd_fit_gain(a->x, a->y, n, &a->gain, &a->gain_nmse_db)) != DD_OK) goto fail;

    /* MP fit on train, evaluated on train and test */
    a->mp_K = o->mp_K;
    a->mp_M = o->mp_M;
    if (o->mp_K > 0) {
        size_t ntr = a->n_split[DD_SPLIT_TRAIN] ? a->n_split[DD_SPLIT_TRAIN] : n;
        size_t ts = a->n_split[DD_SPLIT_TRAIN] + a->n_split[DD_SPLIT_VAL];
        size_t nte = a->n_split[DD_SPLIT_TEST];
        if (nte == 0) {
            ts = 0;
            nte = ntr;
        }
        if (dd_mp_fit(o->mp_K, o->mp_M, 0, a->x, a->y, ntr, &mp, &a->mp_nmse_train_db) == DD_OK &&
            dd_gmp_nmse_db(mp, a->x + ts, a->y + ts, nte, &a->mp_nmse_test_db) == DD_OK) {
            a->mp_ok = 1;
            a->mp_ncoef = mp->ncoef;
        } else {
            snprintf(a->mp_note, sizeof a->mp_note, "%s", dd_last_error());
            dd_log(DD_LOG_WARN, "MP(%d,%d) fit failed: %s", o->mp_K, o->mp_M, dd_last_error());
        }
        dd_gmp_free(&mp);
    }

    /* EVM with the known symbols */
    if (!frame) {
        snprintf(a->evm_note, sizeof a->evm_note, "transmitted symbols unknown (no simulation.json)");
    } else {
        size_t L;
        const dd_cf32 *fr = dd_ofdm_samples(frame, &L);
        double dev = n >= L ? rms_diff_rel(a->x, fr, L) : INFINITY;
        if (n < L) {
            snprintf(a->evm_note, sizeof a->evm_note, "data set (%zu samples) shorter than one OFDM frame (%zu)", n, L);
        } else if (!(dev < 1e-4)) {
            snprintf(a->evm_note, sizeof a->evm_note, "PA input does not start with the simulated frame (relative RMS difference %.3g)", dev);
        } else {
            dd_ofdm_evm_opts eo;
            dd_ofdm_evm_opts_default(&eo);
            eo.max_lag = 8;
            dd_ofdm_evm_result ri, ro;
            if (dd_ofdm_evm(frame, a->x, L, &eo, &ri) == DD_OK && dd_ofdm_evm(frame, a->y, L, &eo, &ro) == DD_OK) {
                a->evm_ok = 1;
                a->evm_in_pct = ri.evm_pct;
                a->evm_in_db = ri.evm_db;
                a->evm_out_pct = ro.evm_pct;
                a->evm_out_db = ro.evm_db;
            } else {
                snprintf(a->evm_note, sizeof a->evm_note, "demodulation failed: %s", dd_last_error());
            }
        }
    }

    if (o->plots) {
        size_t nper = a->spec.nperseg, longest = 0;
        for (int k = 0; k < DD_SPLIT_COUNT; k++)
            if (a->n_split[k] > longest) longest = a->n_split[k];
        if (nper > longest) {
            nper = 16;
            while (nper * 2 <= longest) nper *= 2;
        }
        if (n >= 16) {
            a->npsd = nper;
            a->freq_mhz = dd_calloc(nper, sizeof(double));
            a->psd_in_db = dd_calloc(nper, sizeof(double));
            a->psd_out_db = dd_calloc(nper, sizeof(double));
            if (!a->freq_mhz || !a->psd_in_db || !a->psd_out_db) {
                st = DD_ERR_NOMEM;
                goto fail;
            }
            if ((st = psd_rel(a, a->x, nper, a->freq_mhz, a->psd_in_db)) != DD_OK) goto fail;
            if ((st = psd_rel(a, a->y, nper, a->freq_mhz, a->psd_out_db)) != DD_OK) goto fail;
            for (size_t k = 0; k < nper; k++) a->freq_mhz[k] /= 1e6;
        }
        if ((st = dd_amam_ampm(a->x, a->y, n, 60, 40.0, &a->curve)) != DD_OK) goto fail;
        if (o->scatter > 0) {
            size_t stride = n / o->scatter;
            if (stride < 1) stride = 1;
            size_t cap = n / stride + 1;
            a->sc_in_db = dd_calloc(cap, sizeof(double));
            a->sc_gain_db = dd_calloc(cap, sizeof(double));
            a->sc_phase_deg = dd_calloc(cap, sizeof(double));
            if (!a->sc_in_db || !a->sc_gain_db || !a->sc_phase_deg) {
                st = DD_ERR_NOMEM;
                goto fail;
            }
            double peak = 0;
            for (size_t i = 0; i < n; i++) peak = fmax(peak, cabsf(a->x[i]));
            double gabs = cabs(a->gain);
            for (size_t i = 0; i < n && a->nscatter < cap; i += stride) {
                double ax = cabsf(a->x[i]);
                if (!(ax > 0) || !(gabs > 0) || !(peak > 0)) continue;
                double in_db = 20.0 * log10(ax / peak);
                if (in_db < -40.0) continue;
                double complex r = (double complex)a->y[i] * conj((double complex)a->x[i]) / a->gain;
                a->sc_in_db[a->nscatter] = in_db;
                a->sc_gain_db[a->nscatter] = 20.0 * log10(cabsf(a->y[i]) / (gabs * ax));
                a->sc_phase_deg[a->nscatter] = carg(r) * 180.0 / PI;
                a->nscatter++;
            }
        }
    }
    a->seconds = dd_now() - t0;
    return DD_OK;
fail:
    dd_gmp_free(&mp);
    dd_rf_free(a);
    return st;
}

/* ================================================================ report */


static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* y limits for an AM/AM or AM/PM plot: the central 99 % of the dots with x >= DD_RF_AM_XMIN
 * and every finite point of the median curve there, padded by 10 %. Falls back to
 * automatic limits (NaN) when there is nothing to go by. */
void dd_rf_am_limits(const double *sx, const double *sy, size_t ns, const double *cx, const double *cy,
                     size_t nc, double *lo, double *hi) {
    *lo = *hi = NAN;
    double *tmp = dd_calloc(ns ? ns : 1, sizeof *tmp);
    if (!tmp) return;
    size_t m = 0;
    for (size_t i = 0; i < ns; i++)
        if (sx[i] >= DD_RF_AM_XMIN && isfinite(sy[i])) tmp[m++] = sy[i];
    double a = INFINITY, b = -INFINITY;
    if (m > 0) {
        qsort(tmp, m, sizeof *tmp, cmp_double);
        a = tmp[(size_t)(0.005 * (m - 1))];
        b = tmp[(size_t)(0.995 * (m - 1))];
    }
    dd_free(tmp);
    for (size_t i = 0; i < nc; i++)
        if (cx[i] >= DD_RF_AM_XMIN && isfinite(cy[i])) {
            a = fmin(a, cy[i]);
            b = fmax(b, cy[i]);
        }
    if (!(a <= b)) return;
    double pad = fmax(0.1 * (b - a), 0.5);
    *lo = a - pad;
    *hi = b + pad;
}

static const char *f2(char *b, double v) { return dd_cli_fmt(b, 32, v, 2); }

#define TRY_R(expr)                           \
    do {                                      \
        if ((st = (expr)) != DD_OK) goto done; \
    } while (0)

static dd_status row4(dd_report *r, const char *a, const char *b, const char *c, const char *d) {
    const char *cells[4] = {a, b, c, d};
    return dd_report_table_row(r, cells);
}

dd_status dd_rf_report_sections(dd_report *r, const dd_rf_analysis *a, const char *source, const char *format,
                                const char *const *details, const char *plot_tag) {
    dd_status st = DD_OK;
    char b1[64], b2[64], b3[64], txt[1024], head[256];
    if (!plot_tag) plot_tag = "";
    const dd_spec *sp = &a->spec;
    double occ = sp->bw_occupied > 0 ? sp->bw_occupied : sp->bw_main;

    if (a->evm_ok)
        snprintf(b3, sizeof b3, "%.2f %%", a->evm_out_pct);
    else
        snprintf(b3, sizeof b3, "not available");
    snprintf(txt, sizeof txt,
             "PA input and output of %s: %zu samples at %.6g MHz, main channel %.6g MHz "
             "(%d x %.6g MHz). Gain-only fit NMSE %.2f dB; output ACLR (OpenDPD) %.2f dBc; "
             "output EVM %s.",
             source, a->n, sp->fs / 1e6, sp->bw_main / 1e6, sp->n_sub, sp->bw_sub / 1e6, a->gain_nmse_db,
             a->aclr_out[0].avg_db, b3);
    TRY_R(dd_report_paragraph(r, txt));

    /* the data */
    TRY_R(dd_report_heading(r, "Data set"));
    const char *kvh[2] = {"Property", "Value"};
    TRY_R(dd_report_table_begin(r, NULL, 2, kvh));
    const char *kv[2];
#define KV(k, v)                                 \
    do {                                         \
        kv[0] = (k);                             \
        kv[1] = (v);                             \
        TRY_R(dd_report_table_row(r, kv));       \
    } while (0)
    KV("Source", source);
    KV("Format", format);
    snprintf(txt, sizeof txt, "%zu (train %zu, val %zu, test %zu)", a->n, a->n_split[0], a->n_split[1], a->n_split[2]);
    KV("Samples", txt);
    snprintf(txt, sizeof txt, "%.6g MHz", sp->fs / 1e6);
    KV("Sample rate", txt);
    snprintf(txt, sizeof txt, "%.6g MHz = %d sub-channels x %.6g MHz; occupied %.6g MHz", sp->bw_main / 1e6, sp->n_sub,
             sp->bw_sub / 1e6, occ / 1e6);
    KV("Main channel", txt);
    snprintf(txt, sizeof txt, "%zu samples (%.6g kHz resolution)", sp->nperseg, sp->fs / (double)sp->nperseg / 1e3);
    KV("Segment (nperseg)", txt);
    for (size_t i = 0; details && details[i] && details[i + 1]; i += 2) KV(details[i], details[i + 1]);
    TRY_R(dd_report_table_end(r));
#undef KV

    /* metrics */
    TRY_R(dd_report_heading(r, "Metrics"));
    const char *mh[4] = {"Metric", "PA input", "PA output", "Unit"};
    TRY_R(dd_report_table_begin(r, "Signal quality of the PA input and output", 4, mh));
    TRY_R(row4(r, "PAPR", f2(b1, a->papr_in_db), f2(b2, a->papr_out_db), "dB"));
    static const char *const an[2][3] = {{"ACLR (OpenDPD) left", "ACLR (OpenDPD) right", "ACLR (OpenDPD) average"},
                                         {"ACLR (3GPP) left", "ACLR (3GPP) right", "ACLR (3GPP) average"}};
    for (int d = 0; d < 2; d++) {
        TRY_R(row4(r, an[d][0], f2(b1, a->aclr_in[d].left_db), f2(b2, a->aclr_out[d].left_db), "dBc"));
        TRY_R(row4(r, an[d][1], f2(b1, a->aclr_in[d].right_db), f2(b2, a->aclr_out[d].right_db), "dBc"));
        TRY_R(row4(r, an[d][2], f2(b1, a->aclr_in[d].avg_db), f2(b2, a->aclr_out[d].avg_db), "dBc"));
    }
    TRY_R(row4(r, "ACLR (OpenDPD bands, Welch PSD) average", f2(b1, a->aclr_in_welch.avg_db),
               f2(b2, a->aclr_out_welch.avg_db), "dBc"));
    if (a->evm_ok) {
        TRY_R(row4(r, "EVM (demodulated, known symbols)", f2(b1, a->evm_in_pct), f2(b2, a->evm_out_pct), "%"));
        TRY_R(row4(r, "EVM (demodulated, known symbols)", f2(b1, a->evm_in_db), f2(b2, a->evm_out_db), "dB"));
    } else {
        TRY_R(row4(r, "EVM (demodulated)", "n/a", "n/a", "%"));
    }
    TRY_R(dd_report_table_end(r));
    if (!a->evm_ok) {
        snprintf(txt, sizeof txt, "EVM not available: %s.", a->evm_note);
        TRY_R(dd_report_paragraph(r, txt));
    }
    /* the aligned-segment ACLR against the Welch one: one sentence when they disagree */
    size_t nshort = 0; /* the shortest split: its padding matters most */
    for (int k = 0; k < DD_SPLIT_COUNT; k++)
        if (a->n_split[k] && (!nshort || a->n_split[k] < nshort)) nshort = a->n_split[k];
    if (dd_aclr_disagreement("the PA input", &a->aclr_in[0], &a->aclr_in_welch, nshort, sp->nperseg, DD_ACLR_AGREE_DB, txt,
                             sizeof txt))
        TRY_R(dd_report_paragraph(r, txt));
    if (dd_aclr_disagreement("the PA output", &a->aclr_out[0], &a->aclr_out_welch, nshort, sp->nperseg, DD_ACLR_AGREE_DB, txt,
                             sizeof txt))
        TRY_R(dd_report_paragraph(r, txt));

    const char *fh[4] = {"Model (PA output from PA input)", "Coefficients", "NMSE train (dB)", "NMSE test (dB)"};
    TRY_R(dd_report_table_begin(r, "Least-squares behavioural fits", 4, fh));
    TRY_R(row4(r, "Gain only (y = g x), all samples", "1", f2(b1, a->gain_nmse_db), "-"));
    if (a->mp_K > 0) {
        snprintf(txt, sizeof txt, "Memory polynomial MP(%d,%d): orders 1..%d, %d taps; fit on train", a->mp_K, a->mp_M,
                 a->mp_K, a->mp_M);
        if (a->mp_ok) {
            snprintf(b3, sizeof b3, "%zu", a->mp_ncoef);
            TRY_R(row4(r, txt, b3, f2(b1, a->mp_nmse_train_db), f2(b2, a->mp_nmse_test_db)));
        } else {
            TRY_R(row4(r, txt, "-", "n/a", "n/a"));
        }
    }
    TRY_R(dd_report_table_end(r));
    if (a->mp_K > 0 && !a->mp_ok) {
        snprintf(txt, sizeof txt, "The MP fit failed: %s", a->mp_note);
        TRY_R(dd_report_paragraph(r, txt));
    }

    /* plots */
    dd_plot_opts po;
    if (a->npsd) {
        snprintf(head, sizeof head, "Spectrum%s", plot_tag);
        TRY_R(dd_report_heading(r, head));
        dd_series s[2] = {{"PA input", a->freq_mhz, a->psd_in_db, a->npsd, DD_SERIES_LINE, "#1f77b4"},
                          {"PA output", a->freq_mhz, a->psd_out_db, a->npsd, DD_SERIES_LINE, "#d62728"}};
        dd_plot_opts_default(&po);
        po.width = 900;
        po.title = "Power spectral density";
        po.xlabel = "Frequency (MHz)";
        po.ylabel = "PSD (dB rel. in-band mean)";
        po.reduce = DD_PLOT_REDUCE_MAX;
        po.y_span_max = 90.0;
        po.xmin = -sp->fs / 2e6;
        po.xmax = sp->fs / 2e6;
        snprintf(txt, sizeof txt,
                 "Welch PSD (Hann, %zu-sample segments, 50 %% overlap, %.3g kHz resolution), each curve "
                 "normalised to its mean level inside the occupied band, max-hold per pixel column.",
                 a->npsd, sp->fs / (double)a->npsd / 1e3);
        po.caption = txt;
        TRY_R(dd_report_plot(r, &po, s, 2));
    }
    if (a->curve.nbins) {
        snprintf(head, sizeof head, "AM/AM and AM/PM%s", plot_tag);
        TRY_R(dd_report_heading(r, head));
        dd_series s[2] = {{"samples", a->sc_in_db, a->sc_gain_db, a->nscatter, DD_SERIES_POINTS, "rgba(31,119,180,0.35)"},
                          {"binned median", a->curve.in_db, a->curve.gain_db, a->curve.nbins, DD_SERIES_LINE, "#d62728"}};
        dd_plot_opts_default(&po);
        po.title = "AM/AM";
        po.xlabel = "Input power (dB rel. peak)";
        po.ylabel = "Gain (dB rel. linear fit)";
        po.width = 900;
        po.xmin = DD_RF_AM_XMIN;
        po.xmax = 0.0;
        dd_rf_am_limits(a->sc_in_db, a->sc_gain_db, a->nscatter, a->curve.in_db, a->curve.gain_db, a->curve.nbins, &po.ymin,
                  &po.ymax);
        snprintf(txt, sizeof txt,
                 "Instantaneous gain |y| / (|g| |x|) against input level, g the least-squares complex gain "
                 "(%zu of %zu samples shown as dots; the central 99 %% set the scale) and the median per 0.67 dB bin.",
                 a->nscatter, a->n);
        po.caption = txt;
        TRY_R(dd_report_plot(r, &po, s, a->nscatter ? 2 : 1) );
        s[0].y = a->sc_phase_deg;
        s[1].y = a->curve.phase_deg;
        po.title = "AM/PM";
        dd_rf_am_limits(a->sc_in_db, a->sc_phase_deg, a->nscatter, a->curve.in_db, a->curve.phase_deg, a->curve.nbins,
                  &po.ymin, &po.ymax);
        po.ylabel = "Phase (degrees)";
        po.caption = "Phase of y x* / g against input level: dots per sample, line the binned median.";
        TRY_R(dd_report_plot(r, &po, s, 2));
    }

done:
    return st;
}

dd_status dd_rf_report_definitions(dd_report *r, const dd_rf_analysis *a) {
    dd_status st = DD_OK;
    char txt[256];
    TRY_R(dd_report_heading(r, "Definitions"));
    TRY_R(dd_report_paragraph(r,
                              "ACLR (OpenDPD): the main channel [-BW/2, BW/2] is split into n_sub sub-channels; each "
                              "adjacent band is one sub-channel wide next to the channel edge; ACLR = adjacent power / "
                              "strongest sub-channel power, from per-segment periodograms. ACLR (3GPP): adjacent channels "
                              "centred at +-BW, measured over the occupied bandwidth, relative to the main channel. The two "
                              "definitions give different numbers and are never mixed."));
    TRY_R(dd_report_paragraph(r,
                              "NMSE = 10 log10(sum |y - yhat|^2 / sum |y|^2). Gain only: yhat = g x with the least-squares "
                              "complex gain. MP(K,M): memory polynomial, fitted by least squares on the training split "
                              "and evaluated on the test split. EVM: OFDM demodulation with the transmitted symbols, "
                              "zero-forcing equaliser per sub-carrier, EVM = sqrt(sum|Y/H - X|^2 / sum|X|^2)."));
    snprintf(txt, sizeof txt, "Measured in %.2f s by distdpd %s.", a->seconds, DD_VERSION_STRING);
    TRY_R(dd_report_paragraph(r, txt));
done:
    return st;
}

dd_status dd_rf_write_report(const dd_rf_analysis *a, const char *title, const char *source,
                             const char *format, const char *const *details,
                             const char *path) {
    dd_report *r = NULL;
    dd_status st;
    DD_TRY(dd_report_create(title, &r));
    TRY_R(dd_rf_report_sections(r, a, source, format, details, NULL));
    TRY_R(dd_rf_report_definitions(r, a));
    TRY_R(dd_report_write(r, path));
done:
    dd_report_free(&r);
    return st;
}
