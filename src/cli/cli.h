/* Shared declarations of the distdpd command: the command table and small helpers for
 * option parsing and error reporting. Only src/cli may print to the terminal or exit.
 *
 * Exit statuses: 0 success, 1 runtime error (bad file, numerical failure, ...),
 * 2 usage error (unknown option, missing or malformed option value), 75 (train-pa,
 * train-dpd) stopped by a signal after last.ckpt was written: resumable ("preempted",
 * EX_TEMPFAIL of sysexits.h). Messages go to stderr and start with "distdpd COMMAND: ". */
#ifndef DD_CLI_H
#define DD_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "distdpd/core.h"

#define DD_EXIT_OK 0
#define DD_EXIT_RUNTIME 1
#define DD_EXIT_USAGE 2
#define DD_EXIT_PREEMPTED 75 /* stopped by a signal with last.ckpt written: resume it */

/* One sub-command: `distdpd NAME ...`. run() gets argv with argv[0] = NAME and returns
 * the process exit status (0 ok, 1 runtime error, 2 usage error). */
typedef struct {
    const char *name;
    const char *summary; /* one line for `distdpd help` */
    int (*run)(int argc, char **argv);
} dd_cli_cmd;

/* The sub-commands (one file each: cmd_<name>.c). */
int dd_cmd_metrics(int argc, char **argv);
int dd_cmd_inspect(int argc, char **argv);
int dd_cmd_convert(int argc, char **argv);
int dd_cmd_simulate(int argc, char **argv);
int dd_cmd_report(int argc, char **argv);
int dd_cmd_demo(int argc, char **argv);
int dd_cmd_models(int argc, char **argv);
int dd_cmd_compressors(int argc, char **argv);
int dd_cmd_strategies(int argc, char **argv);
int dd_cmd_launch(int argc, char **argv);
int dd_cmd_keygen(int argc, char **argv);
int dd_cmd_split(int argc, char **argv);
int dd_cmd_ps_server(int argc, char **argv);
int dd_cmd_ps_local(int argc, char **argv);
int dd_cmd_fed_server(int argc, char **argv);
int dd_cmd_fed_client(int argc, char **argv);
int dd_cmd_fed_sim(int argc, char **argv);
int dd_cmd_export(int argc, char **argv);
int dd_cmd_import(int argc, char **argv);

/* Prints "distdpd NAME: error: <dd_last_error()> (STATUS)" to stderr and returns 1. */
int dd_cli_fail(const char *cmd, dd_status s);

/* A failed check of the user's options: dd_cli_usage with dd_last_error() (exit 2), unless
 * s is a failure of the machine, not of the options (DD_ERR_NOMEM, DD_ERR_IO): then
 * dd_cli_fail (exit 1). */
int dd_cli_refuse(const char *cmd, dd_status s);

/* Prints "distdpd CMD: <message>" and "Try 'distdpd CMD --help'." to stderr and
 * returns 2. */
int dd_cli_usage(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* For the static analyzer only (`make lint`), as dd_error in distdpd/core.h: what the three
 * return, which it cannot see from another file; util.c defines them as (name). */
#if defined(__clang_analyzer__)
#define dd_cli_fail(cmd, s) ((void)dd_cli_fail(cmd, s), DD_EXIT_RUNTIME)
#define dd_cli_refuse(cmd, s) ((void)dd_cli_refuse(cmd, s), (s) == DD_ERR_NOMEM || (s) == DD_ERR_IO ? DD_EXIT_RUNTIME : DD_EXIT_USAGE)
#define dd_cli_usage(cmd, ...) ((void)dd_cli_usage(cmd, __VA_ARGS__), DD_EXIT_USAGE)
#endif

/* Reports a getopt_long() failure (return value c = '?' or ':'; optstrings start with
 * ':') as "unknown option '--x'", "ambiguous option '--e' (could be --epochs,
 * --eval-batch, ...)" (an abbreviation of several entries of longopts, the table given to
 * getopt_long), "option '--x' takes no value" or "option '--x' needs a value"; returns 2.
 * An unknown long option gets a hint: OpenDPD's spelling (--n_epochs, --PA_backbone, ...)
 * names the distdpd option that replaces it, a typo the closest option of longopts. */
int dd_cli_getopt_error(const char *cmd, int c, char **argv, const struct option *longopts);

/* "Did you mean": the optimal-string-alignment edit distance of a[0..na) and b[0..nb)
 * (case-insensitive, '_' equal to '-'), and the name of names[0..count) closest to
 * word[0..n) when it is within a typo's reach (1 edit, or a third of the length), else
 * NULL. dd_cli_getopt_error uses them for unknown options, main.c for unknown commands. */
int dd_cli_edit_distance(const char *a, size_t na, const char *b, size_t nb);
const char *dd_cli_closest(const char *word, size_t n, const char *const *names, size_t count);

/* Value parsers. Each returns 0 and stores the value, or prints
 *   distdpd CMD: OPT: expected a positive integer, got 'abc'
 * (or "... must be in [lo, hi], got X") and returns 2. Numbers are decimal everywhere:
 * integers are decimal digits (leading zeros allowed, "010" is ten; no 0x, no octal),
 * real numbers decimal with an optional exponent ("5e-3"; no hexadecimal, inf or nan). */
int dd_cli_parse_size(const char *cmd, const char *opt, const char *val, size_t lo, size_t hi,
                      size_t *out); /* integer in [lo, hi]; lo >= 1 -> "positive integer" */
int dd_cli_parse_u64(const char *cmd, const char *opt, const char *val, uint64_t *out);
int dd_cli_parse_double(const char *cmd, const char *opt, const char *val, double lo, double hi,
                        double *out); /* finite number in [lo, hi] */
/* A whole number in [lo, hi] written as a decimal number, also with an exponent ("2e6";
 * "1.5" is "expected an integer"), for counts too large for dd_cli_parse_size's digits. */
int dd_cli_parse_whole(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out);
/* One of the NULL-terminated choices; *out = its index. */
int dd_cli_parse_choice(const char *cmd, const char *opt, const char *val,
                        const char *const *choices, int *out);

/* Logging: installs a handler that prints the library's dd_log messages to stderr
 * ("distdpd: warning: ..."). verbosity: -1 errors only, 0 warnings (default), 1 info,
 * 2 debug. The environment variable DISTDPD_LOG (error|warn|info|debug) overrides. */
void dd_cli_log_init(int verbosity);

/* Progress lines for long commands ("[ 1.23 s] message") on stderr, unless quiet. */
void dd_cli_progress_quiet(int quiet);
void dd_cli_progress(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* mkdir -p for an output directory; returns DD_OK or DD_ERR_IO naming the path. */
dd_status dd_cli_mkdirs(const char *path);

/* Writes text to path atomically (temporary file, fsync, rename). */
dd_status dd_cli_write_text(const char *path, const char *text);
/* Writes the JSON object o (indented, final newline) the same way and deletes o, also on
 * error. */
struct cJSON;
dd_status dd_cli_write_json(const char *path, struct cJSON *o);

/* The models' options as flags (--hidden, --layers, ...): the option names the registered
 * models declare (model.h dd_model_info.opts), each once, in registry order, into
 * names[0..max); returns how many. A new model's options become flags of every command
 * that takes a model without touching the command. */
#define DD_CLI_MAX_MODEL_OPTS 32
size_t dd_cli_model_opt_names(const char **names, size_t max);
/* One help line per model option: "<indent><prefix>NAME V   model option (models...)". */
void dd_cli_help_model_opts(const char *indent, const char *prefix);
/* The strategy registry's option names (each once, registry order) into names[0..max);
 * returns how many. */
size_t dd_cli_strategy_opt_names(const char **names, size_t max);
/* Their help lines (train-pa/train-dpd --help): "  --NAME METAVAR  help", the strategies
 * that take each. */
void dd_cli_help_strategy_opts(void);
/* The options of a listing command (`compressors`, `strategies`): --json (sets *json),
 * -h/--help (prints help()). Returns -1 to go on, else the exit status to return. */
int dd_cli_list_args(const char *cmd, int argc, char **argv, void (*help)(void), int *json);
/* Prints root (cJSON *, consumed) as indented JSON; the exit status. */
struct cJSON;
int dd_cli_print_json(const char *cmd, struct cJSON *root);

/* Child processes (procs.c; ps-local, fed-sim): runs this executable with argv (argv[0]
 * "distdpd", argv[1] the command), stdout and stderr appended to log (NULL: inherited);
 * the child's pid. */
#include <sys/types.h>
pid_t dd_cli_spawn(const char *cmd, char *const *argv, const char *log);
/* SIGTERM to every pid[i] > 0, SIGKILL after grace_ms to those still running; reaps them
 * and sets their entries to 0. */
void dd_cli_end_all(pid_t *pid, int n, int grace_ms);
/* SIGTERM and SIGINT call handler (sigaction, no SA_RESTART); SIGPIPE is ignored. For
 * servers that stop cleanly on a signal (ps-server, fed-server, fed-client). */
void dd_cli_catch_stop(void (*handler)(int));

/* Formats a number for tables ("%.2f"; "n/a" if not finite) into buf. */
const char *dd_cli_fmt(char *buf, size_t n, double v, int decimals);

#endif
