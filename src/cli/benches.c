/* Non-IID test benches (benches.h): the campaign presets and `distdpd simulate
 * --benches N`, which writes one simulate data set per preset and DIR/benches.json. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "benches.h"
#include "cli.h"
#include "rf.h"

/* Carrier layouts: carriers x channel bandwidth at a sample rate (30 kHz SCS, maximum
 * RBs). The occupied fraction of the band (occupied span / fs) goes from 0.2 to 0.63,
 * so the benches' signals differ in oversampling, not just in absolute bandwidth. Each
 * sample rate leaves room for the OpenDPD ACLR bands (fs >= main + 2 sub-channels). */
typedef struct {
    const char *name;
    int carriers;
    double carrier_bw, fs;
} layout_t;
static const layout_t layouts[] = {
    {"1x20@92.16", 1, 20e6, 92.16e6},   {"1x100@491.52", 1, 100e6, 491.52e6},
    {"1x20@61.44", 1, 20e6, 61.44e6},   {"2x100@491.52", 2, 100e6, 491.52e6},
    {"1x40@122.88", 1, 40e6, 122.88e6}, {"2x20@92.16", 2, 20e6, 92.16e6},
    {"1x100@307.2", 1, 100e6, 307.2e6}, {"4x20@122.88", 4, 20e6, 122.88e6},
};
#define N_LAYOUTS (int)(sizeof layouts / sizeof layouts[0])

/* PA families of the high-heterogeneity benches; low uses the first only. */
static const char *const families[] = {"realistic", "wiener-hammerstein", "rapp",  "saleh",
                                       "mp-ding",   "mp-warp",            "ghorbani", "hammerstein"};
#define N_FAMILIES (int)(sizeof families / sizeof families[0])
static const double papr_targets[] = {0.0, 10.0, 9.0, 8.0}; /* CFR off, then targets, dB */
#define N_PAPR (int)(sizeof papr_targets / sizeof papr_targets[0])

/* Temperature model (calibrate): small-signal gain -0.015 dB/C, saturation level
 * -0.2 %/C around 25 C (solid-state PAs lose gain and output power when hot), and a
 * warm-up gain drift over the capture of -0.005 dB/ms per C away from 25 C. */
#define T_REF 25.0
#define T_GAIN_DB_PER_C (-0.015)
#define T_VSAT_PER_C (-0.002)
#define T_DRIFT_DB_PER_MS_PER_C (-0.005)
#define NPERSEG_MAX 2048 /* the benches' evaluation segment (spec nperseg), at most */

typedef struct {
    double lo, hi;
} range_t;

typedef struct {
    range_t drive, temp, snr, vsat, pshift, ampm, size_log2;
    int multi; /* several families, layouts and CFR targets */
} het_t;

static const het_t het_low = {{-1, 1}, {20, 30}, {42, 48}, {0.97, 1.03}, {-0.1, 0.1}, {0.95, 1.05}, {-0.25, 0.25}, 0};
static const het_t het_high = {{-4, 3}, {-20, 85}, {35, 55}, {0.8, 1.2}, {-0.6, 1.0}, {0.5, 1.5}, {-1, 1}, 1};

/* perm[0..n): a random permutation (Fisher-Yates). */
static void permute(dd_rng *r, int n, int *perm) {
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)dd_rng_below(r, (uint64_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* v[0..n): one stratified draw per bench over [lo, hi]. */
static void stratified(dd_rng *r, int n, range_t g, double *v) {
    int perm[DD_BENCHES_MAX];
    permute(r, n, perm);
    for (int k = 0; k < n; k++) v[k] = g.lo + (g.hi - g.lo) * (perm[k] + dd_rng_uniform(r)) / n;
}

static int uses_rapp(const char *family) {
    return !strcmp(family, "rapp") || !strcmp(family, "realistic") || !strcmp(family, "wiener") ||
           !strcmp(family, "hammerstein") || !strcmp(family, "wiener-hammerstein");
}

/* The memory polynomials diverge above an input peak (docs/domain.md): 0.75 for
 * mp-ding, 0.9 for mp-warp. Returns the largest drive offset that keeps the peak below
 * that with a PAPR of papr_db (+0.2 dB margin), or +inf for the other families. */
static double drive_cap_db(const dd_pa_params *p, const char *family, double papr_db) {
    double peak = !strcmp(family, "mp-ding") ? 0.75 : !strcmp(family, "mp-warp") ? 0.9 : 0.0;
    if (peak == 0.0 || p->drive_rms <= 0.0) return INFINITY;
    return 20.0 * log10(peak / p->drive_rms) - (papr_db + 0.2);
}

dd_status dd_bench_presets(int n, dd_het het, uint64_t seed, size_t base_samples, dd_bench_preset *out) {
    if (n < 1 || n > DD_BENCHES_MAX) return dd_error(DD_ERR_ARG, "benches: %d benches, expected 1..%d", n, DD_BENCHES_MAX);
    if (base_samples < 1000) return dd_error(DD_ERR_ARG, "benches: %zu samples per bench, expected >= 1000", base_samples);
    const het_t *h = het == DD_HET_HIGH ? &het_high : &het_low;
    dd_rng r;
    dd_rng_seed(&r, seed ^ 0x62656e6368657321ULL); /* "benches!" */
    double drive[DD_BENCHES_MAX], temp[DD_BENCHES_MAX], snr[DD_BENCHES_MAX], vsat[DD_BENCHES_MAX],
        psh[DD_BENCHES_MAX], ampm[DD_BENCHES_MAX], sz[DD_BENCHES_MAX];
    int fam[DD_BENCHES_MAX], lay[DD_BENCHES_MAX], cfr[DD_BENCHES_MAX];
    /* a fixed order of draws: the presets depend on (n, het, seed) only */
    stratified(&r, n, h->drive, drive);
    stratified(&r, n, h->temp, temp);
    stratified(&r, n, h->snr, snr);
    stratified(&r, n, h->vsat, vsat);
    stratified(&r, n, h->pshift, psh);
    stratified(&r, n, h->ampm, ampm);
    stratified(&r, n, h->size_log2, sz);
    permute(&r, n, fam);
    permute(&r, n, lay);
    permute(&r, n, cfr);
    for (int k = 0; k < n; k++) {
        dd_bench_preset *b = &out[k];
        memset(b, 0, sizeof *b);
        snprintf(b->name, sizeof b->name, "bench-%02d", k);
        b->seed = dd_rng_u64(&r) >> 11; /* < 2^53: exact in JSON numbers */
        b->family = h->multi ? families[fam[k] % N_FAMILIES] : families[0];
        const layout_t *L = &layouts[h->multi ? lay[k] % N_LAYOUTS : 0];
        b->layout = L->name;
        b->papr_target_db = h->multi ? papr_targets[cfr[k] % N_PAPR] : 0.0;
        b->temperature_c = temp[k];
        b->snr_db = snr[k];
        b->samples = (size_t)llround((double)base_samples * exp2(sz[k]));

        dd_pa_params *p = &b->pa;
        DD_TRY(dd_pa_params_default(b->family, p));
        /* the memory polynomials run with crest-factor reduction, and capped drive */
        int mp = !strcmp(b->family, "mp-ding") || !strcmp(b->family, "mp-warp");
        if (mp && (b->papr_target_db == 0.0 || b->papr_target_db > 8.5)) b->papr_target_db = 8.5;
        double cap = drive_cap_db(p, b->family, b->papr_target_db);
        b->drive_db = drive[k] < cap ? drive[k] : cap;
        double dt = b->temperature_c - T_REF, tv = 1.0 + T_VSAT_PER_C * dt;
        b->vsat_scale = 1.0;
        b->p_shift = 0.0;
        b->ampm_scale = 1.0;
        if (uses_rapp(b->family)) {
            b->vsat_scale = vsat[k];
            b->p_shift = psh[k];
            b->ampm_scale = ampm[k];
            p->rapp.vsat *= b->vsat_scale * tv;
            p->rapp.p = fmax(1.2, p->rapp.p + b->p_shift);
            if (p->rapp.ampm_alpha == 0.0 && h->multi) p->rapp.ampm_alpha = 0.2; /* bare Rapp: some AM/PM */
            p->rapp.ampm_alpha *= b->ampm_scale;
        } else if (!strcmp(b->family, "saleh")) { /* compression point ~ 1/sqrt(beta_a) */
            b->vsat_scale = vsat[k];
            b->ampm_scale = ampm[k];
            p->saleh.beta_a /= (b->vsat_scale * tv) * (b->vsat_scale * tv);
            p->saleh.alpha_p *= b->ampm_scale;
        } else if (!strcmp(b->family, "ghorbani")) { /* saturation level x1 / x3 */
            b->vsat_scale = vsat[k];
            b->ampm_scale = ampm[k];
            p->ghorbani.x3 /= b->vsat_scale * tv;
            p->ghorbani.y1 *= b->ampm_scale;
        }
        p->out_gain_db = T_GAIN_DB_PER_C * dt;
        p->drift_db_per_ms = T_DRIFT_DB_PER_MS_PER_C * dt;
        p->fs = L->fs;

        dd_ofdm_cfg *o = &b->ofdm;
        DD_TRY(dd_ofdm_cfg_default(o, NULL));
        o->fs = L->fs;
        o->n_carriers = L->carriers;
        o->carrier_bw = L->carrier_bw;
        o->papr_target_db = b->papr_target_db;
        o->seed = b->seed;
        /* a frame at least as long as the data set (no repeated samples in it), >= 2
         * symbols (EVM); a symbol with its CP is under 1.08 N samples */
        double N = L->fs / o->scs;
        o->n_symbols = (int)ceil((double)b->samples / N) + 1;
        if (o->n_symbols < 2) o->n_symbols = 2;
        DD_TRY(dd_ofdm_cfg_validate(o));
        DD_TRY(dd_pa_params_check(b->family, p));
    }
    return DD_OK;
}

static cJSON *preset_json(const dd_bench_preset *b, dd_het het) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const dd_pa_params *p = &b->pa;
    cJSON_AddStringToObject(o, "name", b->name);
    cJSON_AddStringToObject(o, "heterogeneity", het == DD_HET_HIGH ? "high" : "low");
    cJSON_AddStringToObject(o, "pa_family", b->family);
    cJSON_AddStringToObject(o, "layout", b->layout);
    cJSON_AddNumberToObject(o, "carriers", b->ofdm.n_carriers);
    cJSON_AddNumberToObject(o, "carrier_bw_hz", b->ofdm.carrier_bw);
    cJSON_AddNumberToObject(o, "fs_hz", b->ofdm.fs);
    cJSON_AddNumberToObject(o, "papr_target_db", b->papr_target_db);
    cJSON_AddNumberToObject(o, "drive_db", b->drive_db);
    cJSON_AddNumberToObject(o, "temperature_c", b->temperature_c);
    cJSON_AddNumberToObject(o, "gain_offset_db", p->out_gain_db);
    cJSON_AddNumberToObject(o, "gain_drift_db_per_ms", p->drift_db_per_ms);
    cJSON_AddNumberToObject(o, "snr_db", b->snr_db);
    cJSON_AddNumberToObject(o, "vsat_scale", b->vsat_scale);
    cJSON_AddNumberToObject(o, "rapp_p_shift", b->p_shift);
    cJSON_AddNumberToObject(o, "ampm_scale", b->ampm_scale);
    cJSON_AddNumberToObject(o, "samples", (double)b->samples);
    cJSON_AddNumberToObject(o, "seed", (double)b->seed);
    return o;
}

dd_status dd_bench_annotate(const char *path, cJSON *obj) {
    if (!obj) return dd_error(DD_ERR_NOMEM, "out of memory annotating %s", path);
    char *text = NULL;
    size_t len = 0;
    dd_status st = dd_read_text(path, &text, &len);
    cJSON *root = st == DD_OK ? cJSON_Parse(text) : NULL;
    free(text);
    if (st == DD_OK && !cJSON_IsObject(root)) st = dd_error(DD_ERR_FORMAT, "%s: not a JSON object", path);
    if (st != DD_OK) {
        cJSON_Delete(root);
        cJSON_Delete(obj);
        return st;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, "bench");
    cJSON_AddItemToObject(root, "bench", obj);
    return dd_cli_write_json(path, root);
}

/* dd_rf_analyze without its warnings (the 3GPP ACLR does not fit every layout's band and
 * is not reported here); the log level returns to the command's afterwards. */
static dd_status dd_rf_analyze_quiet(const dd_dataset *ds, const dd_rf_opts *ro, dd_rf_analysis *an, int verbosity) {
    dd_cli_log_init(-1);
    dd_status st = dd_rf_analyze(ds, NULL, ro, an);
    dd_cli_log_init(verbosity);
    return st;
}

dd_status dd_benches_simulate(const char *dir, int n, dd_het het, uint64_t seed, size_t base_samples,
                              int format, int force, int verbosity) {
    const int quiet = verbosity < 0;
    static const char *const fmt_names[] = {"opendpd", "bin", "sigmf"};
    dd_bench_preset *pre = dd_calloc((size_t)n, sizeof *pre);
    if (!pre) return DD_ERR_NOMEM;
    dd_status st = dd_bench_presets(n, het, seed, base_samples, pre);
    char path[4400], found[256];
    if (st != DD_OK) goto done;
    /* refuse before writing anything */
    snprintf(path, sizeof path, "%s/benches.json", dir);
    struct stat sb;
    if (!force && stat(path, &sb) == 0) {
        st = dd_error(DD_ERR_ARG, "%s already exists: choose another --out, or give --force to replace the benches", path);
        goto done;
    }
    for (int k = 0; k < n && !force; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, pre[k].name);
        if (dd_sim_existing_dataset(path, found, sizeof found) > 0) {
            st = dd_error(DD_ERR_ARG, "%s already holds a data set (%s): choose another --out, or give --force to "
                                      "replace it", path, found);
            goto done;
        }
    }
    if ((st = dd_cli_mkdirs(dir)) != DD_OK) goto done;
    cJSON *root = cJSON_CreateObject(), *list = NULL;
    if (root) {
        cJSON_AddStringToObject(root, "generator", "distdpd simulate --benches " DD_VERSION_STRING);
        cJSON_AddStringToObject(root, "heterogeneity", het == DD_HET_HIGH ? "high" : "low");
        cJSON_AddNumberToObject(root, "benches", n);
        cJSON_AddNumberToObject(root, "seed", (double)seed);
        cJSON_AddNumberToObject(root, "base_samples", (double)base_samples);
        cJSON_AddStringToObject(root, "format", fmt_names[format]);
        list = cJSON_AddArrayToObject(root, "list");
    }
    if (!root || !list) {
        cJSON_Delete(root);
        st = DD_ERR_NOMEM;
        goto done;
    }
    for (int k = 0; k < n && st == DD_OK; k++) {
        const dd_bench_preset *b = &pre[k];
        dd_sim_cfg cfg;
        dd_sim_cfg_default(&cfg);
        cfg.signal = b->layout;
        cfg.pa = b->family;
        cfg.ofdm = &b->ofdm;
        cfg.pa_params = &b->pa;
        cfg.seed = b->seed;
        cfg.samples = b->samples;
        cfg.drive_db = b->drive_db;
        cfg.snr_db = b->snr_db;
        dd_sim sim;
        dd_dataset *ds = NULL;
        dd_rf_analysis an;
        memset(&an, 0, sizeof an);
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", dir, b->name);
        if ((st = dd_sim_run(&cfg, &sim)) != DD_OK) {
            dd_error_prefix(st, "%s: ", b->name);
            break;
        }
        if (sim.spec.nperseg > NPERSEG_MAX) sim.spec.nperseg = NPERSEG_MAX;
        dd_rf_opts ro;
        dd_rf_opts_default(&ro);
        ro.mp_K = 0;
        ro.plots = 0;
        if ((st = dd_sim_dataset(&sim, &ds)) == DD_OK && (!force || (st = dd_sim_remove_dataset(sub)) == DD_OK) &&
            (st = dd_sim_save(&cfg, &sim, ds, sub, format, NULL)) == DD_OK &&
            (st = dd_rf_analyze_quiet(ds, &ro, &an, verbosity)) == DD_OK) {
            snprintf(path, sizeof path, "%s/simulation.json", sub);
            st = dd_bench_annotate(path, preset_json(b, het));
            snprintf(path, sizeof path, "%s/spec.json", sub);
            if (st == DD_OK && format == 0) st = dd_bench_annotate(path, preset_json(b, het));
        }
        if (st == DD_OK) {
            cJSON *e = preset_json(b, het);
            cJSON *m = e ? cJSON_AddObjectToObject(e, "measured") : NULL;
            if (!m) {
                cJSON_Delete(e);
                st = DD_ERR_NOMEM;
            } else {
                cJSON_AddStringToObject(e, "path", b->name);
                cJSON_AddNumberToObject(m, "train", (double)ds->n[0]);
                cJSON_AddNumberToObject(m, "val", (double)ds->n[1]);
                cJSON_AddNumberToObject(m, "test", (double)ds->n[2]);
                cJSON_AddNumberToObject(m, "papr_in_db", an.papr_in_db);
                cJSON_AddNumberToObject(m, "papr_out_db", an.papr_out_db);
                cJSON_AddNumberToObject(m, "gain_db", 20.0 * log10(cabs(an.gain)));
                cJSON_AddNumberToObject(m, "gain_only_nmse_db", an.gain_nmse_db);
                if (isfinite(an.aclr_out[0].avg_db)) cJSON_AddNumberToObject(m, "aclr_out_db", an.aclr_out[0].avg_db);
                cJSON_AddItemToArray(list, e);
            }
        }
        if (st == DD_OK && !quiet) {
            char aclr[32] = "n/a";
            if (isfinite(an.aclr_out[0].avg_db)) snprintf(aclr, sizeof aclr, "%.1f dBc", an.aclr_out[0].avg_db);
            printf("%s: %-18s %-12s drive %+5.2f dB, %5.1f C, SNR %4.1f dB, PAPR %4.1f dB, %6zu samples "
                   "(%zu/%zu/%zu), gain %+5.2f dB, gain-only NMSE %6.2f dB, ACLR %s\n",
                   b->name, b->family, b->layout, b->drive_db, b->temperature_c, b->snr_db, an.papr_in_db, b->samples,
                   ds->n[0], ds->n[1], ds->n[2], 20.0 * log10(cabs(an.gain)), an.gain_nmse_db, aclr);
            fflush(stdout);
        }
        if (st != DD_OK) dd_error_prefix(st, "%s: ", sub);
        dd_rf_free(&an);
        dd_dataset_free(&ds);
        dd_sim_free(&sim);
    }
    snprintf(path, sizeof path, "%s/benches.json", dir);
    if (st == DD_OK)
        st = dd_cli_write_json(path, root);
    else
        cJSON_Delete(root);
done:
    dd_free(pre);
    return st;
}
