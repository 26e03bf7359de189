/* `distdpd inspect DATASET`: what a data set holds (format, samples per split, sample
 * rate, bandwidths) and how its PA behaves (PAPR, ACLR of input and output in the
 * OpenDPD definition, gain-only fit NMSE), per split, as text or JSON.
 * `distdpd inspect FILE.ckpt` (any file starting with the checkpoint magic): verifies the
 * checkpoint completely (every CRC) and prints its task, step, epoch and cursor; exit 1
 * when it does not verify (a supervisor picks the newest valid checkpoint with it). */
#include <complex.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/ckpt.h"
#include "distdpd/dataset.h"
#include "distdpd/fit.h"
#include "distdpd/metrics.h"
#include "rf.h"

static const char *const NAME = "inspect";

static void help(void) {
    printf("usage: distdpd inspect [options] DATASET\n"
           "       distdpd inspect [options] CHECKPOINT\n"
           "\n"
           "A CHECKPOINT (a file starting with the checkpoint magic DDPDCKPT, e.g.\n"
           "RUN/last.ckpt or RUN/ckpt/step-0000000100.ckpt) is verified completely (every\n"
           "CRC, the exact size) and its task, epoch, step and cursor are printed; exit 1\n"
           "with the reason when it does not verify.\n"
           "\n"
           "Prints what a data set holds and how nonlinear its PA is. DATASET is an OpenDPD\n"
           "directory (spec.json + {train,val,test}_{input,output}.csv, or data.csv), a\n"
           "directory or prefix of a SigMF pair (NAME_input/NAME_output.sigmf-meta), a binary\n"
           "data set file (.ddb), or a directory holding data.ddb.\n"
           "\n"
           "Per split: sample count, PAPR of input and output, ACLR (OpenDPD definition: left,\n"
           "right, average) of input and output, and the NMSE of a gain-only least-squares\n"
           "fit (output ~ g * input) on that split.\n"
           "\n"
           "options:\n"
           "  --json              print one JSON object instead of text\n"
           "  -v, --verbose       more log output;  -q, --quiet: errors only\n"
           "  -h, --help          this help\n"
           "\n"
           "exit status: 0 ok, 1 the data set cannot be read, 2 usage\n");
}

typedef struct {
    double papr_in, papr_out, gain_nmse;
    dd_aclr_result aclr_in, aclr_out;
    dd_cf64 gain;
} split_stats;

static dd_status measure(const dd_dataset *ds, int k, split_stats *s) {
    size_t n = ds->n[k];
    DD_TRY(dd_papr_db(ds->in[k], n, &s->papr_in));
    DD_TRY(dd_papr_db(ds->out[k], n, &s->papr_out));
    DD_TRY(dd_aclr(ds->in[k], n, &ds->spec, DD_ACLR_OPENDPD, &s->aclr_in));
    DD_TRY(dd_aclr(ds->out[k], n, &ds->spec, DD_ACLR_OPENDPD, &s->aclr_out));
    DD_TRY(dd_fit_gain(ds->in[k], ds->out[k], n, &s->gain, &s->gain_nmse));
    return DD_OK;
}

static cJSON *aclr_json(const dd_aclr_result *a) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "left", a->left_db);
    cJSON_AddNumberToObject(o, "right", a->right_db);
    cJSON_AddNumberToObject(o, "avg", a->avg_db);
    return o;
}

/* 1 when path is a regular file starting with the checkpoint magic. */
static int is_checkpoint(const char *path) {
    struct stat sb; /* never open a FIFO or a device here: opening one may block */
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char m[8];
    int yes = fread(m, 1, 8, f) == 8 && memcmp(m, DD_CKPT_MAGIC, 8) == 0;
    fclose(f);
    return yes;
}

static int inspect_checkpoint(const char *path, int json, int verbosity) {
    dd_ckpt_reader *r = NULL;
    dd_status st = dd_ckpt_open(path, &r);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    uint64_t step = 0, epoch = 0, cur[2] = {0, 0};
    const char *task = "?";
    int has_step = dd_ckpt_get_u64(r, "step", &step) == DD_OK;
    int has_epoch = dd_ckpt_get_u64(r, "epoch", &epoch) == DD_OK;
    int has_cur = dd_ckpt_get_copy(r, "cursor", cur, sizeof cur) == DD_OK;
    if (dd_ckpt_get_str(r, "task", &task) != DD_OK) task = "?";
    dd_error_clear();
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "checkpoint", path);
        cJSON_AddBoolToObject(o, "valid", 1);
        cJSON_AddNumberToObject(o, "format_version", dd_ckpt_version(r));
        cJSON_AddNumberToObject(o, "sections", (double)dd_ckpt_count(r));
        cJSON_AddStringToObject(o, "task", task);
        if (has_step) cJSON_AddNumberToObject(o, "step", (double)step);
        if (has_epoch) cJSON_AddNumberToObject(o, "epoch", (double)epoch);
        if (has_cur) cJSON_AddNumberToObject(o, "batch", (double)cur[1]);
        dd_ckpt_close(&r);
        return dd_cli_print_json(NAME, o);
    }
    if (verbosity >= 0) {
        printf("%s: valid distdpd checkpoint (format %u, %zu sections), task %s", path, dd_ckpt_version(r),
               dd_ckpt_count(r), task);
        if (has_step) printf(", step %llu", (unsigned long long)step);
        if (has_epoch) printf(", %llu epochs done", (unsigned long long)epoch);
        if (has_cur) printf(", batch %llu of the next", (unsigned long long)cur[1]);
        printf("\n");
    }
    dd_ckpt_close(&r);
    return DD_EXIT_OK;
}

int dd_cmd_inspect(int argc, char **argv) {
    enum { O_JSON = 256 };
    static const struct option longopts[] = {{"json", no_argument, NULL, O_JSON},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"quiet", no_argument, NULL, 'q'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int json = 0, verbosity = 0, c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
        switch (c) {
        case O_JSON: json = 1; break;
        case 'v': verbosity++; break;
        case 'q': verbosity = -1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(NAME, c, argv, longopts);
        }
    }
    if (optind >= argc) return dd_cli_usage(NAME, "missing DATASET");
    if (optind + 1 < argc) return dd_cli_usage(NAME, "expected one DATASET, got also '%s'", argv[optind + 1]);
    dd_cli_log_init(verbosity);
    if (is_checkpoint(argv[optind])) return inspect_checkpoint(argv[optind], json, verbosity);
    char buf[4200];
    const char *path = dd_rf_resolve_dataset(argv[optind], buf, sizeof buf);

    dd_dataset *ds = NULL;
    dd_status st = dd_dataset_load(path, &ds);
    if (st != DD_OK) return dd_cli_fail(NAME, st);
    split_stats ss[DD_SPLIT_COUNT];
    int have[DD_SPLIT_COUNT] = {0, 0, 0};
    size_t total = 0;
    for (int k = 0; k < DD_SPLIT_COUNT; k++) {
        total += ds->n[k];
        if (ds->n[k] == 0) continue;
        if ((st = measure(ds, k, &ss[k])) != DD_OK) {
            dd_error_prefix(st, "%s split: ", dd_split_name((dd_split)k));
            dd_dataset_free(&ds);
            return dd_cli_fail(NAME, st);
        }
        have[k] = 1;
    }
    const dd_spec *sp = &ds->spec;
    double occ = sp->bw_occupied > 0 ? sp->bw_occupied : sp->bw_main;
    int ret = DD_EXIT_OK;
    if (json) {
        cJSON *o = cJSON_CreateObject(), *samples = NULL, *splits = NULL;
        char *txt = NULL;
        if (o) {
            cJSON_AddStringToObject(o, "path", path);
            cJSON_AddStringToObject(o, "format", ds->format);
            cJSON_AddNumberToObject(o, "fs_hz", sp->fs);
            cJSON_AddNumberToObject(o, "bw_main_hz", sp->bw_main);
            cJSON_AddNumberToObject(o, "bw_sub_hz", sp->bw_sub);
            cJSON_AddNumberToObject(o, "n_sub", sp->n_sub);
            cJSON_AddNumberToObject(o, "bw_occupied_hz", occ);
            cJSON_AddNumberToObject(o, "nperseg", (double)sp->nperseg);
            cJSON_AddNumberToObject(o, "total_samples", (double)total);
            samples = cJSON_AddObjectToObject(o, "samples");
            splits = cJSON_AddObjectToObject(o, "splits");
        }
        if (samples && splits) {
            for (int k = 0; k < DD_SPLIT_COUNT; k++) {
                const char *nm = dd_split_name((dd_split)k);
                cJSON_AddNumberToObject(samples, nm, (double)ds->n[k]);
                if (!have[k]) continue;
                cJSON *s = cJSON_AddObjectToObject(splits, nm);
                if (!s) continue;
                cJSON_AddNumberToObject(s, "samples", (double)ds->n[k]);
                cJSON_AddNumberToObject(s, "papr_in_db", ss[k].papr_in);
                cJSON_AddNumberToObject(s, "papr_out_db", ss[k].papr_out);
                cJSON_AddItemToObject(s, "aclr_in_db", aclr_json(&ss[k].aclr_in));
                cJSON_AddItemToObject(s, "aclr_out_db", aclr_json(&ss[k].aclr_out));
                cJSON_AddNumberToObject(s, "gain_nmse_db", ss[k].gain_nmse);
                cJSON *g = cJSON_AddArrayToObject(s, "gain");
                if (g) {
                    cJSON_AddItemToArray(g, cJSON_CreateNumber(creal(ss[k].gain)));
                    cJSON_AddItemToArray(g, cJSON_CreateNumber(cimag(ss[k].gain)));
                }
            }
            txt = cJSON_Print(o);
        }
        cJSON_Delete(o);
        if (txt) {
            printf("%s\n", txt);
            cJSON_free(txt);
        } else {
            dd_error(DD_ERR_NOMEM, "out of memory building the JSON output");
            ret = dd_cli_fail(NAME, DD_ERR_NOMEM);
        }
    } else {
        printf("data set:     %s\n", path);
        printf("format:       %s\n", ds->format);
        printf("samples:      train %zu, val %zu, test %zu (total %zu)\n", ds->n[0], ds->n[1], ds->n[2], total);
        printf("sample rate:  %.6g MHz\n", sp->fs / 1e6);
        printf("main channel: %.6g MHz = %d x %.6g MHz sub-channels; occupied %.6g MHz\n", sp->bw_main / 1e6,
               sp->n_sub, sp->bw_sub / 1e6, occ / 1e6);
        printf("nperseg:      %zu (%.6g kHz resolution)\n", sp->nperseg, sp->fs / (double)sp->nperseg / 1e3);
        printf("\n%-6s %8s %8s %9s %9s %9s %9s %9s %9s %10s\n", "split", "PAPR in", "PAPR out", "ACLRin L",
               "ACLRin R", "ACLRin", "ACLRout L", "ACLRout R", "ACLRout", "gain NMSE");
        printf("%-6s %8s %8s %9s %9s %9s %9s %9s %9s %10s\n", "", "(dB)", "(dB)", "(dBc)", "(dBc)", "(dBc)", "(dBc)",
               "(dBc)", "(dBc)", "(dB)");
        for (int k = 0; k < DD_SPLIT_COUNT; k++) {
            if (!have[k]) {
                printf("%-6s (empty)\n", dd_split_name((dd_split)k));
                continue;
            }
            const split_stats *s = &ss[k];
            printf("%-6s %8.2f %8.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f\n", dd_split_name((dd_split)k),
                   s->papr_in, s->papr_out, s->aclr_in.left_db, s->aclr_in.right_db, s->aclr_in.avg_db,
                   s->aclr_out.left_db, s->aclr_out.right_db, s->aclr_out.avg_db, s->gain_nmse);
        }
        printf("\nACLR: OpenDPD definition (adjacent sub-channel-wide bands / strongest sub-channel).\n"
               "gain NMSE: NMSE of the least-squares fit output ~ g * input on that split.\n");
    }
    dd_dataset_free(&ds);
    return ret;
}
