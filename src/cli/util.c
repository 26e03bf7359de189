/* Helpers of the distdpd command: option value parsing with exact messages, usage and
 * runtime error reporting, the stderr log handler, progress lines, mkdir -p. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "distdpd/model.h"
#include "distdpd/parallel.h"

int(dd_cli_fail)(const char *cmd, dd_status s) { /* (name): cli.h, __clang_analyzer__ */
    const char *msg = dd_last_error();
    if (!msg || !*msg) msg = "failed";
    fprintf(stderr, "distdpd %s: error: %s (%s)\n", cmd, msg, dd_status_str(s));
    return DD_EXIT_RUNTIME;
}

int(dd_cli_refuse)(const char *cmd, dd_status s) {
    if (s == DD_ERR_NOMEM || s == DD_ERR_IO) return dd_cli_fail(cmd, s);
    return dd_cli_usage(cmd, "%s", dd_last_error());
}

int(dd_cli_usage)(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "distdpd %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'distdpd %s --help'.\n", cmd);
    va_end(ap);
    return DD_EXIT_USAGE;
}

/* The long options of longopts whose names start with the n characters of name (an
 * abbreviation getopt_long found ambiguous): "--epochs, --eval-batch, ..." into buf;
 * returns how many there are. */
static int prefix_matches(const struct option *longopts, const char *name, size_t n, char *buf, size_t cap) {
    int k = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (const struct option *o = longopts; o && o->name; o++) {
        if (strncmp(o->name, name, n) != 0) continue;
        if (used < cap) used += (size_t)snprintf(buf + used, cap - used, "%s--%s", k ? ", " : "", o->name);
        k++;
    }
    return k;
}

/* ---- "did you mean": edit distance and OpenDPD's spellings ---- */

/* Optimal-string-alignment distance (insertions, deletions, substitutions, swaps of two
 * neighbours) of a[0..na) and b[0..nb), case-insensitive, '_' and '-' the same letter;
 * names longer than 63 characters count as far from everything. */
static int fold(int ch) {
    ch = ch == '_' ? '-' : ch;
    return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}
int dd_cli_edit_distance(const char *a, size_t na, const char *b, size_t nb) {
    enum { MAXL = 64 };
    if (na >= MAXL || nb >= MAXL) return 1000;
    int d[MAXL][MAXL];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int cost = fold(a[i - 1]) != fold(b[j - 1]);
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) && fold(a[i - 2]) == fold(b[j - 1]) &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[na][nb];
}

const char *dd_cli_closest(const char *word, size_t n, const char *const *names, size_t count) {
    const char *best = NULL;
    int bd = 1000;
    for (size_t i = 0; i < count; i++) {
        int dist = dd_cli_edit_distance(word, n, names[i], strlen(names[i]));
        if (dist < bd) {
            bd = dist;
            best = names[i];
        }
    }
    /* close enough to be a typo: 1 edit for short names, up to a third of the length */
    int limit = (int)(n / 3) > 1 ? (int)(n / 3) : 1;
    return bd <= limit ? best : NULL;
}

/* OpenDPD's options (arguments.py of lab-emi/OpenDPD) and what distdpd takes instead:
 * flag is the distdpd option (the hint is given where the command has it; NULL: the hint
 * holds in every command), hint the text after "here:". docs/opendpd.md has the table. */
static const struct {
    const char *opendpd, *flag, *hint;
} opendpd_opts[] = {
    {"dataset_path", "data", "--data DIR (a directory with spec.json and the split CSVs, a data.csv, SigMF or .ddb)"},
    {"dataset_name", "data", "--data DIR (the data set's directory, e.g. datasets/DPA_200MHz)"},
    {"filename", "out", "--out RUN (the run directory; omitted: runs/<task>-<model>-<time>)"},
    {"step", NULL, "the command: distdpd train-pa | train-dpd | run (aliases train_pa, train_dpd, run_dpd)"},
    {"n_epochs", "epochs", "--epochs E"},
    {"batch_size", "batch", "--batch B (the global batch)"},
    {"batch_size_eval", "eval-batch", "--eval-batch N"},
    {"frame_length", "frame", "--frame F"},
    {"frame_stride", "stride", "--stride S"},
    {"opt_type", "opt", "--opt adamw|adam|sgd|rmsprop"},
    {"loss_type", "loss", "--loss l2|l1"},
    {"lr_schedule", "lr-schedule", "--lr-schedule plateau|constant (OpenDPD 1|0)"},
    {"lr_end", "min-lr", "--min-lr LR"},
    {"decay_factor", "factor", "--factor F"},
    {"grad_clip_val", "clip", "--clip C"},
    {"eval_test", "no-test", "--no-test (OpenDPD --eval_test 0)"},
    {"eval_val", NULL, "no option: the validation split is always evaluated (it selects the best epoch)"},
    {"PA_backbone", "model", "--model NAME of train-pa (distdpd models lists them)"},
    {"DPD_backbone", "model", "--model NAME of train-dpd (distdpd models lists them)"},
    {"PA_hidden_size", "hidden", "--hidden H of train-pa"},
    {"DPD_hidden_size", "hidden", "--hidden H of train-dpd"},
    {"PA_num_layers", "layers", "--layers L of train-pa"},
    {"DPD_num_layers", "layers", "--layers L of train-dpd"},
    {"K", "order", "--order K (--model gmp or mp)"},
    {"accelerator", NULL, "no option: distdpd trains on CPU cores; mpirun -np N trains on N processes"},
    {"devices", NULL, "no option: distdpd trains on CPU cores; mpirun -np N trains on N processes"},
    {"re_level", NULL, "no option: every run is reproducible bit for bit (--seed S)"},
    {"log_precision", NULL, "no option: metrics.jsonl and history.csv keep 10 to 17 significant digits"},
    {"pretrained_model", "resume", "--resume RUN (continue a run), or train-dpd --pa-run RUN_PA"},
};

int dd_cli_getopt_error(const char *cmd, int c, char **argv, const struct option *longopts) {
    const char *word = (optind > 0) ? argv[optind - 1] : "?";
    if (c == ':') return dd_cli_usage(cmd, "option '%s' needs a value", word);
    if (strncmp(word, "--", 2) == 0) {
        const char *eq = strchr(word, '=');
        if (eq && optopt != 0) /* a known long option that takes no value */
            return dd_cli_usage(cmd, "option '%.*s' takes no value", (int)(eq - word), word);
        /* getopt_long answers '?' both for an unknown name and for an abbreviation that
         * several options share (--e: --epochs, --eval-batch, ...) */
        size_t n = eq ? (size_t)(eq - word - 2) : strlen(word + 2);
        char cand[1024];
        if (n > 0 && prefix_matches(longopts, word + 2, n, cand, sizeof cand) > 1)
            return dd_cli_usage(cmd, "ambiguous option '--%.*s' (could be %s)", (int)n, word + 2, cand);
        /* an OpenDPD spelling: what distdpd takes instead (when this command has it) */
        for (size_t i = 0; i < sizeof opendpd_opts / sizeof opendpd_opts[0]; i++) {
            if (strlen(opendpd_opts[i].opendpd) != n || strncmp(opendpd_opts[i].opendpd, word + 2, n) != 0) continue;
            int here = opendpd_opts[i].flag == NULL;
            for (const struct option *o = longopts; !here && o && o->name; o++)
                here = strcmp(o->name, opendpd_opts[i].flag) == 0;
            if (here)
                return dd_cli_usage(cmd, "unknown option '%s' (OpenDPD's spelling; here: %s; docs/opendpd.md)", word,
                                    opendpd_opts[i].hint);
        }
        /* a typo of one of this command's options */
        const char *names[512];
        size_t k = 0;
        for (const struct option *o = longopts; o && o->name && k < 512; o++) names[k++] = o->name;
        const char *near = n > 0 ? dd_cli_closest(word + 2, n, names, k) : NULL;
        if (near) return dd_cli_usage(cmd, "unknown option '%s' (did you mean --%s?)", word, near);
        return dd_cli_usage(cmd, "unknown option '%s'", word);
    }
    if (optopt > 0 && optopt < 128) return dd_cli_usage(cmd, "unknown option '-%c'", optopt);
    return dd_cli_usage(cmd, "unknown option '%s'", word);
}

static int is_blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t') return 0;
    return 1;
}

int dd_cli_parse_size(const char *cmd, const char *opt, const char *val, size_t lo, size_t hi,
                      size_t *out) {
    const char *what = lo >= 1 ? "a positive integer" : "a non-negative integer";
    const char *p = val;
    while (*p == ' ') p++;
    if (*p == '\0' || *p == '-' || *p == '+') goto bad;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || !is_blank(end)) goto bad;
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "distdpd %s: %s: must be in [%zu, %zu], got '%s'\n", cmd, opt, lo, hi, val);
        return DD_EXIT_USAGE;
    }
    *out = (size_t)v;
    return 0;
bad:
    fprintf(stderr, "distdpd %s: %s: expected %s, got '%s'\n", cmd, opt, what, val);
    return DD_EXIT_USAGE;
}

int dd_cli_parse_u64(const char *cmd, const char *opt, const char *val, uint64_t *out) {
    const char *p = val;
    while (*p == ' ') p++;
    errno = 0;
    char *end = (char *)p;
    /* base 10: "010" is ten, as for every other integer option (base 0 read it as octal) */
    unsigned long long v = (*p >= '0' && *p <= '9') ? strtoull(p, &end, 10) : 0;
    if (end == p || !is_blank(end)) {
        fprintf(stderr, "distdpd %s: %s: expected a non-negative integer, got '%s'\n", cmd, opt, val);
        return DD_EXIT_USAGE;
    }
    if (errno == ERANGE) {
        fprintf(stderr, "distdpd %s: %s: must be in [0, %llu], got '%s'\n", cmd, opt, (unsigned long long)UINT64_MAX,
                val);
        return DD_EXIT_USAGE;
    }
    *out = (uint64_t)v;
    return 0;
}

int dd_cli_parse_double(const char *cmd, const char *opt, const char *val, double lo, double hi,
                        double *out) {
    if (dd_parse_number(opt, val, lo, hi, 0, out) == DD_OK) return 0;
    fprintf(stderr, "distdpd %s: %s\n", cmd, dd_last_error());
    return DD_EXIT_USAGE;
}

int dd_cli_parse_whole(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out) {
    if (dd_parse_number(opt, val, lo, hi, 1, out) == DD_OK) return 0;
    fprintf(stderr, "distdpd %s: %s\n", cmd, dd_last_error());
    return DD_EXIT_USAGE;
}

int dd_cli_parse_choice(const char *cmd, const char *opt, const char *val,
                        const char *const *choices, int *out) {
    for (int i = 0; choices[i]; i++)
        if (strcmp(choices[i], val) == 0) {
            *out = i;
            return 0;
        }
    fprintf(stderr, "distdpd %s: %s: expected one of ", cmd, opt);
    for (int i = 0; choices[i]; i++) fprintf(stderr, "%s%s", i ? ", " : "", choices[i]);
    fprintf(stderr, "; got '%s'\n", val);
    return DD_EXIT_USAGE;
}

static void log_handler(dd_log_level level, const char *msg, void *user) {
    (void)user;
    static const char *const prefix[] = {"error: ", "warning: ", "", "debug: "};
    int l = (int)level;
    if (l < 0 || l > 3) l = 3;
    fprintf(stderr, "distdpd: %s%s\n", prefix[l], msg);
}

void dd_cli_log_init(int verbosity) {
    dd_log_level lvl = verbosity < 0 ? DD_LOG_ERROR : verbosity == 0 ? DD_LOG_WARN
                                                  : verbosity == 1 ? DD_LOG_INFO
                                                                   : DD_LOG_DEBUG;
    const char *env = getenv("DISTDPD_LOG");
    if (env) {
        if (strcasecmp(env, "error") == 0) lvl = DD_LOG_ERROR;
        else if (strcasecmp(env, "warn") == 0 || strcasecmp(env, "warning") == 0) lvl = DD_LOG_WARN;
        else if (strcasecmp(env, "info") == 0) lvl = DD_LOG_INFO;
        else if (strcasecmp(env, "debug") == 0) lvl = DD_LOG_DEBUG;
    }
    dd_log_set(log_handler, NULL, lvl);
}

static int progress_quiet;
static double progress_t0 = -1.0;

void dd_cli_progress_quiet(int quiet) { progress_quiet = quiet; }

void dd_cli_progress(const char *fmt, ...) {
    if (progress_t0 < 0) progress_t0 = dd_now();
    if (progress_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%6.2f s] ", dd_now() - progress_t0);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

dd_status dd_cli_mkdirs(const char *path) {
    size_t n = strlen(path);
    if (n == 0) return dd_error(DD_ERR_ARG, "empty output directory name");
    char *tmp = malloc(n + 1);
    if (!tmp) return dd_error(DD_ERR_NOMEM, "out of memory");
    memcpy(tmp, path, n + 1);
    dd_status st = DD_OK;
    for (size_t i = 1; i <= n && st == DD_OK; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0') continue;
        char save = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            st = dd_error(DD_ERR_IO, "%s: cannot create directory: %s", tmp, strerror(errno));
        tmp[i] = save;
    }
    struct stat sb;
    if (st == DD_OK && (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = dd_error(DD_ERR_IO, "%s: not a directory", path);
    free(tmp);
    return st;
}

const char *dd_cli_fmt(char *buf, size_t n, double v, int decimals) {
    if (!isfinite(v))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, "%.*f", decimals, v);
    return buf;
}

/* Prints o as indented JSON with a final newline and writes it like dd_cli_write_text;
 * deletes o in every case. */
dd_status dd_cli_write_json(const char *path, cJSON *o) {
    char *txt = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!txt) return dd_error(DD_ERR_NOMEM, "out of memory writing %s", path);
    size_t l = strlen(txt);
    char *t2 = malloc(l + 2);
    dd_status st;
    if (!t2) {
        st = dd_error(DD_ERR_NOMEM, "out of memory writing %s", path);
    } else {
        memcpy(t2, txt, l);
        t2[l] = '\n';
        t2[l + 1] = '\0';
        st = dd_cli_write_text(path, t2);
    }
    free(t2);
    cJSON_free(txt);
    return st;
}

/* Writes text to path through a temporary file and a rename. */
dd_status dd_cli_write_text(const char *path, const char *text) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return dd_error(DD_ERR_ARG, "%s: path too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return dd_error(DD_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    size_t len = strlen(text);
    int ok = fwrite(text, 1, len, f) == len;
    ok = (fflush(f) == 0) && ok;
    ok = (fsync(fileno(f)) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return dd_error(DD_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return DD_OK;
}


/* ---- the models' options as command-line flags ---- */

size_t dd_cli_model_opt_names(const char **names, size_t max) {
    size_t nreg = 0, k = 0;
    const dd_model_info *const *reg = dd_model_registry(&nreg);
    for (size_t i = 0; i < nreg; i++)
        for (const dd_model_opt_info *o = reg[i]->opts; o && o->name; o++) {
            size_t j = 0;
            while (j < k && strcmp(names[j], o->name) != 0) j++;
            if (j == k && k < max) names[k++] = o->name;
        }
    return k;
}

void dd_cli_help_model_opts(const char *indent, const char *prefix) {
    size_t nreg = 0;
    const dd_model_info *const *reg = dd_model_registry(&nreg);
    const char *seen[DD_CLI_MAX_MODEL_OPTS];
    const size_t ns = dd_cli_model_opt_names(seen, DD_CLI_MAX_MODEL_OPTS);
    for (size_t j = 0; j < ns; j++) {
        char flag[64], users[256];
        size_t len = 0;
        snprintf(flag, sizeof flag, "%s%s%s V", indent, prefix, seen[j]);
        users[0] = '\0';
        for (size_t k = 0; k < nreg; k++)
            for (const dd_model_opt_info *q = reg[k]->opts; q && q->name; q++)
                if (strcmp(q->name, seen[j]) == 0 && len < sizeof users) {
                    int w = snprintf(users + len, sizeof users - len, "%s%s", len ? ", " : "", reg[k]->name);
                    if (w > 0) len += (size_t)w;
                }
        printf("%-24s model option (%s)\n", flag, users);
    }
}

size_t dd_cli_strategy_opt_names(const char **names, size_t max) {
    size_t nreg = 0, k = 0;
    const dd_strategy_def *const *reg = dd_strategy_registry(&nreg);
    for (size_t i = 0; i < nreg; i++)
        for (const dd_strategy_opt *o = reg[i]->opts; o && o->name; o++) {
            size_t j = 0;
            while (j < k && strcmp(names[j], o->name) != 0) j++;
            if (j == k && k < max) names[k++] = o->name;
        }
    return k;
}

void dd_cli_help_strategy_opts(void) {
    size_t nreg = 0;
    const dd_strategy_def *const *reg = dd_strategy_registry(&nreg);
    for (size_t i = 0; i < nreg; i++)
        for (const dd_strategy_opt *o = reg[i]->opts; o && o->name; o++) {
            if (!o->metavar) continue; /* declared by another strategy */
            char flag[64], users[256];
            size_t len = 0;
            users[0] = '\0';
            for (size_t k = 0; k < nreg; k++)
                for (const dd_strategy_opt *q = reg[k]->opts; q && q->name; q++)
                    if (strcmp(q->name, o->name) == 0 && len < sizeof users) {
                        int w = snprintf(users + len, sizeof users - len, "%s%s", len ? ", " : "", reg[k]->name);
                        if (w > 0) len += (size_t)w;
                    }
            snprintf(flag, sizeof flag, "  --%s %s", o->name, o->metavar);
            const char *h = o->help ? o->help : "";
            /* the first line beside the flag when it fits, then every line indented */
            if (strlen(flag) < 22) {
                const char *nl = strchr(h, '\n');
                int l = nl ? (int)(nl - h) : (int)strlen(h);
                printf("%-22s%.*s\n", flag, l, h);
                h = nl ? nl + 1 : h + l;
            } else {
                printf("%s\n", flag);
            }
            while (*h) {
                const char *nl = strchr(h, '\n');
                int l = nl ? (int)(nl - h) : (int)strlen(h);
                printf("%22s%.*s\n", "", l, h);
                h = nl ? nl + 1 : h + l;
            }
            if (o->choices) { /* "one of: a, b, ..." wrapped at 80 columns */
                char ch[512];
                o->choices(ch, sizeof ch);
                const char *p = ch;
                int col = printf("%22sone of:", "");
                while (*p) {
                    size_t w = strcspn(p, " ");
                    if (col + 1 + (int)w > 80) col = printf("\n%21s", "") - 1;
                    col += printf(" %.*s", (int)w, p);
                    p += w;
                    while (*p == ' ') p++;
                }
                printf("\n");
            }
            printf("%22s(strategies: %s)\n", "", users);
        }
}

int dd_cli_list_args(const char *cmd, int argc, char **argv, void (*help)(void), int *json) {
    enum { O_JSON = 256 };
    static const struct option longopts[] = {{"json", no_argument, NULL, O_JSON},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;
    *json = 0;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_JSON: *json = 1; break;
        case 'h': help(); return DD_EXIT_OK;
        default: return dd_cli_getopt_error(cmd, c, argv, longopts);
        }
    }
    if (optind < argc) return dd_cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    return -1;
}

int dd_cli_print_json(const char *cmd, cJSON *root) {
    char *t = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!t) return dd_cli_fail(cmd, DD_ERR_NOMEM);
    printf("%s\n", t);
    cJSON_free(t);
    return DD_EXIT_OK;
}
