/* `distdpd export`: a trained model's weights as .npz / safetensors with PyTorch
 * (OpenDPD) names, or as self-contained C99 code (float32, int16 or int8 fixed point)
 * with the fixed-point loss measured on the test split (docs/deploy.md). */
#include <complex.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/dataset.h"
#include "distdpd/export.h"
#include "distdpd/metrics.h"
#include "distdpd/train.h"
#include "rf.h"

static const char *const NAME = "export";

static void help(void) {
    printf("usage: distdpd export --run RUN --format npz|safetensors|c|onnx --out FILE [options]\n"
           "\n"
           "Exports the best (or last) model of a training run (a PA model, or a DPD):\n"
           "  npz, safetensors  every parameter as a float32 tensor named as in PyTorch/OpenDPD\n"
           "                    (rnn.weight_ih_l0, ..., fc_out.bias: load_state_dict of the\n"
           "                    equivalent torch module; docs/deploy.md has the modules)\n"
           "  c                 FILE.c + FILE.h: self-contained C99 that runs the model sample by\n"
           "                    sample with carried state (init/reset/step), float32 or, with\n"
           "                    --fixed, int16/int8 fixed point calibrated on the training split;\n"
           "                    prints the loss of fixed point against float on the test split.\n"
           "                    Models: " DD_EXPORT_C_MODELS "\n"
           "  onnx              ONNX model (IR 7, opset 13): input x (T, B, 2), output y (T, B, 2),\n"
           "                    time first; models: " DD_EXPORT_ONNX_MODELS "\n"
           "\n"
           "options:\n"
           "  --run RUN           run directory (or a checkpoint file)\n"
           "  --ckpt C            best (default) or last\n"
           "  --format F          npz, safetensors, c or onnx\n"
           "  --out FILE          output file (c: FILE.c and FILE.h; a trailing .c is dropped)\n"
           "  --fixed T           c only: int16 or int8 fixed point (default float32)\n"
           "  --prefix NAME       c only: prefix of the generated API (default: FILE's base name)\n"
           "  --data DIR          data set for calibration and the report (default: the run's)\n"
           "  --opendpd-names     npz/safetensors: names prefixed \"backbone.\" as in OpenDPD's\n"
           "                      full-model state_dict\n"
           "  --json              c: print the report as one JSON object\n"
           "  -q, --quiet         errors only;  -v, --verbose: more log output\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 runtime error, 2 usage error\n");
}

/* NMSE of b against a in dB, pooled over all samples. */
static double nmse_db(const dd_cf32 *a, const dd_cf32 *b, size_t n) {
    double e = 0, p = 0;
    for (size_t i = 0; i < n; i++) {
        const dd_cf32 d = b[i] - a[i];
        e += (double)(crealf(d) * crealf(d) + cimagf(d) * cimagf(d));
        p += (double)(crealf(a[i]) * crealf(a[i]) + cimagf(a[i]) * cimagf(a[i]));
    }
    return 10 * log10(e / p);
}

typedef struct {
    double nmse_db, aclr_db; /* against the reference; ACLR average (NaN if not measurable) */
} quality;

/* NMSE of y against ref (segmented, OpenDPD) and ACLR of y; pooled NMSE and NaN ACLR when
 * the split is too short for the spec's segments. */
static void measure(const dd_cf32 *ref, const dd_cf32 *y, size_t n, const dd_spec *spec, quality *q) {
    dd_metric_set ms;
    if (dd_metrics_compute(ref, y, n, spec, DD_ACLR_OPENDPD, 0, &ms) == DD_OK) {
        q->nmse_db = ms.nmse_db;
        q->aclr_db = ms.aclr.avg_db;
    } else {
        dd_error_clear();
        q->nmse_db = nmse_db(ref, y, n);
        q->aclr_db = NAN;
    }
}

typedef struct {
    size_t n;
    double max_diff_float;      /* float32 runtime vs the library's forward, max |diff| */
    double nmse_fixed_float_db; /* fixed-point output vs float output */
    quality flt, fix;           /* float and fixed against the task's reference */
    int dpd;
} report;

/* Runs the exported model over the test split, with the library's model for reference. */
static dd_status evaluate(const dd_run_model *rm, const dd_export_c *fx, const dd_export_c *fl, const dd_dataset *ds,
                          report *r) {
    const size_t n = ds->n[DD_SPLIT_TEST];
    const dd_cf32 *x = ds->in[DD_SPLIT_TEST];
    memset(r, 0, sizeof *r);
    r->n = n;
    r->dpd = rm->cfg.task != DD_TRAIN_PA;
    if (n == 0) return dd_error(DD_ERR_ARG, "export: the data set's test split is empty (nothing to measure on)");
    dd_cf32 *ylib = dd_calloc(n, sizeof *ylib), *yrt = dd_calloc(n, sizeof *yrt), *yfx = dd_calloc(n, sizeof *yfx);
    dd_cf32 *ref = dd_calloc(n, sizeof *ref), *za = dd_calloc(n, sizeof *za), *zb = dd_calloc(n, sizeof *zb);
    dd_status st = DD_ERR_NOMEM;
    if (!ylib || !yrt || !yfx || !ref || !za || !zb) goto done;
    if ((st = dd_model_run_stream(rm->model, rm->params, x, ylib, n)) != DD_OK) goto done;
    if ((st = dd_export_c_run(fl, x, yrt, n)) != DD_OK) goto done;
    for (size_t i = 0; i < n; i++) r->max_diff_float = fmax(r->max_diff_float, (double)cabsf(yrt[i] - ylib[i]));
    if (fx) {
        if ((st = dd_export_c_run(fx, x, yfx, n)) != DD_OK) goto done;
        r->nmse_fixed_float_db = nmse_db(ylib, yfx, n);
        if (!r->dpd) {
            measure(ds->out[DD_SPLIT_TEST], ylib, n, &ds->spec, &r->flt);
            measure(ds->out[DD_SPLIT_TEST], yfx, n, &ds->spec, &r->fix);
        } else { /* DPD: PA_model(DPD(x)) against G x */
            const double g = rm->cfg.gain; /* resolved when the run was created */
            if (!(g > 0)) {
                st = dd_error(DD_ERR_FORMAT, "export: the DPD run records no target gain");
                goto done;
            }
            for (size_t i = 0; i < n; i++) ref[i] = (float)g * x[i];
            if ((st = dd_model_run_stream(rm->pa_model, rm->pa_params, ylib, za, n)) != DD_OK) goto done;
            if ((st = dd_model_run_stream(rm->pa_model, rm->pa_params, yfx, zb, n)) != DD_OK) goto done;
            measure(ref, za, n, &ds->spec, &r->flt);
            measure(ref, zb, n, &ds->spec, &r->fix);
        }
    }
    st = DD_OK;
done:
    dd_free(ylib);
    dd_free(yrt);
    dd_free(yfx);
    dd_free(ref);
    dd_free(za);
    dd_free(zb);
    return st;
}

static void print_report(const report *r, int bits, const dd_export_q *q, int json) {
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "test_samples", (double)r->n);
        cJSON_AddNumberToObject(o, "float32_max_abs_diff", r->max_diff_float);
        if (bits) {
            cJSON_AddNumberToObject(o, "bits", bits);
            cJSON_AddNumberToObject(o, "x_frac", q->x_frac);
            cJSON_AddNumberToObject(o, "y_frac", q->y_frac);
            cJSON_AddNumberToObject(o, "nmse_fixed_vs_float_db", r->nmse_fixed_float_db);
            cJSON_AddNumberToObject(o, "float_nmse_db", r->flt.nmse_db);
            cJSON_AddNumberToObject(o, "fixed_nmse_db", r->fix.nmse_db);
            cJSON_AddNumberToObject(o, "nmse_loss_db", r->fix.nmse_db - r->flt.nmse_db);
            if (isfinite(r->flt.aclr_db) && isfinite(r->fix.aclr_db)) {
                cJSON_AddNumberToObject(o, "float_aclr_db", r->flt.aclr_db);
                cJSON_AddNumberToObject(o, "fixed_aclr_db", r->fix.aclr_db);
                cJSON_AddNumberToObject(o, "aclr_loss_db", r->fix.aclr_db - r->flt.aclr_db);
            }
        }
        char *t = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (t) printf("%s\n", t);
        cJSON_free(t);
        return;
    }
    printf("test split, %zu samples: float32 code vs distdpd's forward: max |difference| %.3g\n", r->n,
           r->max_diff_float);
    if (!bits) return;
    const char *what = r->dpd ? "PA model(DPD(x)) vs G x" : "model vs measured output";
    printf("int%d (input Q.%d, output Q.%d): output vs float32 output: NMSE %.2f dB\n", bits, q->x_frac, q->y_frac,
           r->nmse_fixed_float_db);
    printf("%s: NMSE float32 %.2f dB, int%d %.2f dB (loss %+.2f dB)", what, r->flt.nmse_db, bits, r->fix.nmse_db,
           r->fix.nmse_db - r->flt.nmse_db);
    if (isfinite(r->flt.aclr_db) && isfinite(r->fix.aclr_db))
        printf("; ACLR float32 %.2f dBc, int%d %.2f dBc (loss %+.2f dB)\n", r->flt.aclr_db, bits, r->fix.aclr_db,
               r->fix.aclr_db - r->flt.aclr_db);
    else
        printf("; ACLR not measurable (test split shorter than the spec's segments)\n");
}

static int ends_with(const char *s, const char *suf) {
    const size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The C identifier from FILE's base name: letters, digits and '_' ('_' for others). */
static void prefix_from(const char *stem, char *buf, size_t cap) {
    const char *b = strrchr(stem, '/');
    b = b ? b + 1 : stem;
    size_t o = 0;
    if (!((*b >= 'a' && *b <= 'z') || (*b >= 'A' && *b <= 'Z') || *b == '_') && o + 1 < cap) buf[o++] = 'm';
    for (; *b && o + 1 < cap; b++)
        buf[o++] = ((*b >= 'a' && *b <= 'z') || (*b >= 'A' && *b <= 'Z') || (*b >= '0' && *b <= '9')) ? *b : '_';
    buf[o] = '\0';
}

static int export_c(const dd_run_model *rm, const char *run, const char *ckpt, const char *out, int bits,
                    const char *prefix, const char *data, int json, int verbosity) {
    if (!dd_export_c_supported(rm->model))
        return dd_cli_usage(NAME, "--format c supports the models %s; this run's model is '%s' (export npz or "
                            "safetensors instead)", DD_EXPORT_C_MODELS, dd_model_name(rm->model));
    char stem[4096], cpath[4200], hpath[4200], pfx[64], about[600], databuf[4200];
    snprintf(stem, sizeof stem, "%s", out);
    if (ends_with(stem, ".c")) stem[strlen(stem) - 2] = '\0';
    snprintf(cpath, sizeof cpath, "%s.c", stem);
    snprintf(hpath, sizeof hpath, "%s.h", stem);
    if (prefix) {
        prefix_from(prefix, pfx, sizeof pfx);
        if (strcmp(pfx, prefix) != 0) return dd_cli_usage(NAME, "--prefix '%s' is not a C identifier", prefix);
    } else {
        prefix_from(stem, pfx, sizeof pfx);
    }
    snprintf(about, sizeof about, "%s of run %.300s (%s checkpoint, epoch %d)",
             rm->cfg.task == DD_TRAIN_PA ? "PA model" : "DPD", run, ckpt, rm->epoch);
    if (!data) data = rm->data;
    data = dd_rf_resolve_dataset(data, databuf, sizeof databuf);
    dd_dataset *ds = NULL;
    dd_export_c *fl = NULL, *fx = NULL;
    int ret = DD_EXIT_OK;
    dd_status st = dd_dataset_load(data, &ds);
    if (st != DD_OK) {
        dd_error_prefix(st, "the run's data set (give --data DIR): ");
        goto fail;
    }
    dd_export_c_opts o = {0, pfx, about, NULL, 0};
    if ((st = dd_export_c_create(rm->model, rm->params, &o, &fl)) != DD_OK) goto fail;
    if (bits) {
        o.bits = bits;
        o.calib = ds->in[DD_SPLIT_TRAIN];
        o.ncalib = ds->n[DD_SPLIT_TRAIN];
        if ((st = dd_export_c_create(rm->model, rm->params, &o, &fx)) != DD_OK) goto fail;
    }
    if ((st = dd_export_c_write(bits ? fx : fl, cpath, hpath)) != DD_OK) goto fail;
    report r;
    if ((st = evaluate(rm, fx, fl, ds, &r)) != DD_OK) goto fail;
    if (!json && verbosity >= 0)
        printf("%s, %s: %s %s, API %s_init/_reset/_step/_run\n", cpath, hpath, dd_model_name(rm->model),
               bits == 16 ? "int16" : bits == 8 ? "int8" : "float32", pfx);
    if (json || verbosity >= 0) print_report(&r, bits, fx ? dd_export_c_formats(fx) : NULL, json);
    goto done;
fail:
    ret = dd_cli_fail(NAME, st);
done:
    dd_export_c_destroy(&fl);
    dd_export_c_destroy(&fx);
    dd_dataset_free(&ds);
    return ret;
}

int dd_cmd_export(int argc, char **argv) {
    enum { O_RUN = 256, O_CKPT, O_FORMAT, O_OUT, O_FIXED, O_PREFIX, O_DATA, O_OPENDPD, O_JSON };
    static const struct option longopts[] = {
        {"run", required_argument, NULL, O_RUN},       {"ckpt", required_argument, NULL, O_CKPT},
        {"format", required_argument, NULL, O_FORMAT}, {"out", required_argument, NULL, O_OUT},
        {"fixed", required_argument, NULL, O_FIXED},   {"prefix", required_argument, NULL, O_PREFIX},
        {"data", required_argument, NULL, O_DATA},     {"opendpd-names", no_argument, NULL, O_OPENDPD},
        {"json", no_argument, NULL, O_JSON},           {"verbose", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},             {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static const char *const ckpts[] = {"best", "last", NULL};
    static const char *const formats[] = {"npz", "safetensors", "c", "onnx", NULL};
    static const char *const fixeds[] = {"float32", "int16", "int8", NULL};
    const char *run = NULL, *out = NULL, *prefix = NULL, *data = NULL;
    int ck = 0, fmt = -1, fixed = 0, opendpd = 0, json = 0, verbosity = 0, c, rc;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_RUN: run = optarg; break;
        case O_CKPT:
            if ((rc = dd_cli_parse_choice(NAME, "--ckpt", optarg, ckpts, &ck))) return rc;
            break;
        case O_FORMAT:
            if ((rc = dd_cli_parse_choice(NAME, "--format", optarg, formats, &fmt))) return rc;
            break;
        case O_OUT: out = optarg; break;
        case O_FIXED:
            if ((rc = dd_cli_parse_choice(NAME, "--fixed", optarg, fixeds, &fixed))) return rc;
            break;
        case O_PREFIX: prefix = optarg; break;
        case O_DATA: data = optarg; break;
        case O_OPENDPD: opendpd = 1; break;
        case O_JSON: json = 1; break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(NAME, "unexpected argument '%s'", argv[optind]);
    if (!run) return dd_cli_usage(NAME, "missing --run RUN");
    if (fmt < 0) return dd_cli_usage(NAME, "missing --format npz|safetensors|c|onnx");
    if (!out) return dd_cli_usage(NAME, "missing --out FILE");
    if (fmt != 2 && (fixed || prefix || json))
        return dd_cli_usage(NAME, "--fixed, --prefix and --json apply to --format c only");
    if (fmt == 2 && opendpd) return dd_cli_usage(NAME, "--opendpd-names applies to --format npz and safetensors");
    dd_cli_log_init(verbosity);
    dd_run_model rm;
    dd_status st = dd_run_model_load(run, ckpts[ck], &rm);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    int ret;
    if (fmt == 3 && strcmp(dd_model_name(rm.model), "gru") != 0) {
        ret = dd_cli_usage(NAME, "--format onnx supports the models %s; this run's model is '%s' (export "
                           "safetensors and use torch.onnx.export: docs/deploy.md)", DD_EXPORT_ONNX_MODELS,
                           dd_model_name(rm.model));
    } else if (fmt == 3) {
        st = dd_export_onnx(rm.model, rm.params, out);
        ret = st != DD_OK ? dd_cli_fail(NAME, st) : DD_EXIT_OK;
        if (st == DD_OK && verbosity >= 0)
            printf("%s: ONNX (IR 7, opset 13) of %s: x (T, B, 2) -> y (T, B, 2)\n", out, dd_model_name(rm.model));
    } else if (fmt == 2) {
        ret = export_c(&rm, run, ckpts[ck], out, fixed == 1 ? 16 : fixed == 2 ? 8 : 0, prefix, data, json, verbosity);
    } else {
        char opts[256];
        dd_model_cfg_format(dd_model_config(rm.model), opts, sizeof opts);
        const char *meta[] = {"format", "pt", "model", dd_model_name(rm.model), "model_opts", opts,
                              "task", dd_train_task_name(rm.cfg.task), "generator", "distdpd " DD_VERSION_STRING}; /* NOLINT(bugprone-suspicious-missing-comma): one string */
        const dd_param_table *t = dd_model_params(rm.model);
        st = dd_tensors_write(fmt == 0 ? DD_TENSORS_NPZ : DD_TENSORS_SAFETENSORS, out, t, rm.params,
                              opendpd ? "backbone." : "", meta, sizeof meta / sizeof meta[0] / 2);
        if (st != DD_OK) {
            ret = dd_cli_fail(NAME, st);
        } else {
            ret = DD_EXIT_OK;
            if (verbosity >= 0)
                printf("%s: %zu tensors, %zu parameters of %s (%s) as float32 %s\n", out, t->count, t->nparams,
                       dd_model_name(rm.model), opts, formats[fmt]);
        }
    }
    dd_run_model_free(&rm);
    return ret;
}
