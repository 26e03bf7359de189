/* Decisions of `distdpd launch` (include/distdpd/launch.h): hosts, world size, the
 * checkpoint to resume from and the arguments of a restart. Nothing here starts or
 * signals a process; src/cli/cmd_launch.c does. */
#define _GNU_SOURCE
#include "distdpd/launch.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "distdpd/ckpt.h"
#include "distdpd/parallel.h"

void dd_launch_hosts_free(dd_launch_hosts *h) {
    if (!h) return;
    free(h->host);
    h->host = NULL;
    h->n = 0;
}

long dd_launch_hosts_slots(const dd_launch_hosts *h) {
    long s = 0;
    for (size_t i = 0; h && i < h->n; i++) s += h->host[i].slots;
    return s;
}

/* Adds slots to host `name` (a new entry when it is not there yet). */
static dd_status add_host(dd_launch_hosts *h, const char *name, size_t len, int slots, const char *where) {
    if (len == 0) return dd_error(DD_ERR_FORMAT, "%s: empty host name", where);
    if (len >= DD_LAUNCH_HOST_MAX)
        return dd_error(DD_ERR_FORMAT, "%s: host name longer than %d bytes", where, DD_LAUNCH_HOST_MAX - 1);
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("-._", name[i]))
            return dd_error(DD_ERR_FORMAT, "%s: host name '%.*s' has a character other than letters, digits, - . _",
                            where, (int)len, name);
    for (size_t i = 0; i < h->n; i++)
        if (strlen(h->host[i].name) == len && memcmp(h->host[i].name, name, len) == 0) {
            if (h->host[i].slots > 65536 - slots)
                return dd_error(DD_ERR_FORMAT, "%s: host '%s' has more than 65536 slots", where, h->host[i].name);
            h->host[i].slots += slots;
            return DD_OK;
        }
    if (h->n >= DD_LAUNCH_MAX_HOSTS) return dd_error(DD_ERR_FORMAT, "%s: more than %d hosts", where, DD_LAUNCH_MAX_HOSTS);
    dd_launch_host *nh = realloc(h->host, (h->n + 1) * sizeof *nh);
    if (!nh) return DD_ERR_NOMEM;
    h->host = nh;
    memcpy(nh[h->n].name, name, len);
    nh[h->n].name[len] = 0;
    nh[h->n].slots = slots;
    h->n++;
    return DD_OK;
}

/* A slot count: decimal digits in [1, 65536]. */
static int parse_slots(const char *s, size_t len, int *out) {
    if (len == 0 || len > 5) return 0;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 65536) return 0;
    *out = (int)v;
    return 1;
}

dd_status dd_launch_hostfile_parse(const char *path, dd_launch_hosts *out) {
    if (!path || !out) return dd_error(DD_ERR_ARG, "dd_launch_hostfile_parse: NULL argument");
    memset(out, 0, sizeof *out);
    int fd = -1; /* a FIFO would block fopen until a writer comes */
    DD_TRY(dd_open_regular(path, &fd, NULL));
    FILE *f = fdopen(fd, "r");
    if (!f) {
        const int e = errno;
        close(fd);
        return dd_error(DD_ERR_IO, "cannot open %s: %s", path, strerror(e));
    }
    char line[4096], where[4200];
    dd_status st = DD_OK;
    for (size_t ln = 1; st == DD_OK && (memset(line, 0, sizeof line), fgets(line, sizeof line, f)); ln++) {
        snprintf(where, sizeof where, "%s:%zu", path, ln);
        int nul = 0; /* a byte after the first NUL (line was zeroed): the data held a NUL */
        for (size_t k = strlen(line) + 1; k < sizeof line && !nul; k++) nul = line[k] != 0;
        if (nul) {
            st = dd_error(DD_ERR_FORMAT, "%s: NUL byte (not a text file?)", where);
            break;
        }
        if (!strchr(line, '\n') && !feof(f)) {
            st = dd_error(DD_ERR_FORMAT, "%s: line longer than %zu bytes", where, sizeof line - 2);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *tok[16];
        int nt = 0;
        for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (nt == 16) {
                st = dd_error(DD_ERR_FORMAT, "%s: more than 15 keys", where);
                break;
            }
            tok[nt++] = t;
        }
        if (st != DD_OK || nt == 0) continue;
        int slots = 1;
        for (int k = 1; st == DD_OK && k < nt; k++) {
            char *eq = strchr(tok[k], '=');
            const size_t klen = eq ? (size_t)(eq - tok[k]) : strlen(tok[k]);
            int v = 0;
            if (!eq) {
                st = dd_error(DD_ERR_FORMAT, "%s: expected KEY=VALUE after the host name, got '%s'", where, tok[k]);
            } else if (!parse_slots(eq + 1, strlen(eq + 1), &v)) {
                st = dd_error(DD_ERR_FORMAT, "%s: %.*s must be an integer in [1, 65536], got '%s'", where, (int)klen,
                              tok[k], eq + 1);
            } else if (klen == 5 && strncmp(tok[k], "slots", 5) == 0) {
                slots = v;
            } else if ((klen == 9 && strncmp(tok[k], "max_slots", 9) == 0) ||
                       (klen == 9 && strncmp(tok[k], "max-slots", 9) == 0)) {
                /* mpirun's limit on oversubscription: not a slot count */
            } else {
                st = dd_error(DD_ERR_FORMAT, "%s: unknown key '%.*s' (keys: slots, max_slots)", where, (int)klen, tok[k]);
            }
        }
        if (st == DD_OK) st = add_host(out, tok[0], strlen(tok[0]), slots, where);
    }
    if (st == DD_OK && ferror(f)) st = dd_error(DD_ERR_IO, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    if (st == DD_OK && out->n == 0) st = dd_error(DD_ERR_FORMAT, "%s: no hosts", path);
    if (st != DD_OK) dd_launch_hosts_free(out);
    return st;
}

dd_status dd_launch_discover_parse(const char *text, const char *what, dd_launch_hosts *out) {
    if (!text || !what || !out) return dd_error(DD_ERR_ARG, "dd_launch_discover_parse: NULL argument");
    memset(out, 0, sizeof *out);
    dd_status st = DD_OK;
    char where[512];
    size_t ln = 0;
    for (const char *p = text; st == DD_OK && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        ln++;
        snprintf(where, sizeof where, "%s, line %zu", what, ln);
        const char *a = p, *b = p + len;
        while (a < b && isspace((unsigned char)*a)) a++;
        while (b > a && isspace((unsigned char)b[-1])) b--;
        if (a < b) {
            const char *colon = NULL;
            for (const char *q = a; q < b; q++)
                if (*q == ':') colon = q;
            int slots = 1;
            if (colon && !parse_slots(colon + 1, (size_t)(b - colon - 1), &slots))
                st = dd_error(DD_ERR_FORMAT, "%s: slots must be an integer in [1, 65536], got '%.*s'", where,
                              (int)(b - colon - 1), colon + 1);
            if (st == DD_OK) st = add_host(out, a, (size_t)((colon ? colon : b) - a), slots, where);
        }
        p += len + (e ? 1 : 0);
    }
    if (st != DD_OK) dd_launch_hosts_free(out);
    return st;
}

dd_status dd_launch_hosts_without(const dd_launch_hosts *h, const char *const *excluded, size_t nex,
                                  dd_launch_hosts *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < h->n; i++) {
        int skip = 0;
        for (size_t k = 0; k < nex; k++) skip |= strcmp(h->host[i].name, excluded[k]) == 0;
        if (skip) continue;
        dd_status st = add_host(out, h->host[i].name, strlen(h->host[i].name), h->host[i].slots, "hosts");
        if (st != DD_OK) {
            dd_launch_hosts_free(out);
            return st;
        }
    }
    return DD_OK;
}

int dd_launch_world_size(long slots, int np_min, int np_max, int multiple) {
    if (multiple < 1) multiple = 1;
    long n = slots < np_max ? slots : np_max;
    n -= n % multiple;
    return n >= np_min && n >= 1 ? (int)n : 0;
}

dd_status dd_launch_hosts_take(const dd_launch_hosts *h, int n, dd_launch_hosts *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < h->n && n > 0; i++) {
        const int s = h->host[i].slots < n ? h->host[i].slots : n;
        dd_status st = add_host(out, h->host[i].name, strlen(h->host[i].name), s, "hosts");
        if (st != DD_OK) {
            dd_launch_hosts_free(out);
            return st;
        }
        n -= s;
    }
    if (n > 0) {
        dd_launch_hosts_free(out);
        return dd_error(DD_ERR_ARG, "hosts: %d slots short", n);
    }
    return DD_OK;
}

dd_status dd_launch_hostfile_write(const char *path, const dd_launch_hosts *h) {
    FILE *f = fopen(path, "w");
    if (!f) return dd_error(DD_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    for (size_t i = 0; i < h->n; i++) fprintf(f, "%s slots=%d\n", h->host[i].name, h->host[i].slots);
    if (fflush(f) != 0 || ferror(f)) {
        const int e = errno;
        fclose(f);
        return dd_error(DD_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    if (fclose(f) != 0) return dd_error(DD_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    return DD_OK;
}

/* The "step" section of a checkpoint that verifies; 0 with the reason logged otherwise. */
static int ckpt_step(const char *path, uint64_t *step) {
    dd_ckpt_reader *r = NULL;
    if (dd_ckpt_open(path, &r) != DD_OK) {
        dd_log(DD_LOG_WARN, "launch: %s is not a valid checkpoint: %s", path, dd_last_error());
        return 0;
    }
    const int ok = dd_ckpt_get_u64(r, "step", step) == DD_OK;
    if (!ok) dd_log(DD_LOG_WARN, "launch: %s is not a training checkpoint: %s", path, dd_last_error());
    dd_ckpt_close(&r);
    return ok;
}

dd_status dd_launch_pick_checkpoint(const char *run, char *path, size_t cap, uint64_t *step, int *found,
                                    int *rejected) {
    if (!run || !path || !step || !found) return dd_error(DD_ERR_ARG, "dd_launch_pick_checkpoint: NULL argument");
    *found = 0;
    *step = 0;
    if (rejected) *rejected = 0;
    if (cap) path[0] = 0;
    char p[8448];
    uint64_t s;
    snprintf(p, sizeof p, "%s/last.ckpt", run);
    FILE *f = fopen(p, "rb");
    if (f) {
        fclose(f);
        if (ckpt_step(p, &s)) {
            *found = 1;
            *step = s;
            snprintf(path, cap, "%s", p);
        } else if (rejected) {
            ++*rejected;
        }
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ckpt", run);
    DIR *d = opendir(dir);
    if (!d) return DD_OK;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "step-", 5) != 0 || len < 10 || strcmp(e->d_name + len - 5, ".ckpt") != 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (!ckpt_step(p, &s)) {
            if (rejected) ++*rejected;
            continue;
        }
        if (!*found || s > *step) {
            *found = 1;
            *step = s;
            snprintf(path, cap, "%s", p);
        }
    }
    closedir(d);
    return DD_OK;
}

/* train-pa / train-dpd options without a value (getopt no_argument) */
static int no_value(const char *name) {
    static const char *const flags[] = {"no-shuffle", "no-test", "no-report", "ila", "verbose", "quiet", "help", NULL};
    for (int k = 0; flags[k]; k++)
        if (strcmp(name, flags[k]) == 0) return 1;
    return 0;
}

/* options a resume takes (everything else is the run's configuration, kept by the run) */
static int resume_takes(const char *name) {
    static const char *const keep[] = {"data", "epochs", "progress", "mem-limit-mb", "no-report", "verbose", "quiet",
                                       NULL};
    for (int k = 0; keep[k]; k++)
        if (strcmp(name, keep[k]) == 0) return 1;
    return dd_strategy_opt_known(name);
}

const char *dd_launch_arg_value(int argc, char *const *argv, const char *name) {
    const size_t nl = strlen(name);
    const char *v = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): argv[i], i < argc, is not NULL */
        if (strcmp(a, "--") == 0) break;
        if (a[0] != '-' || a[1] != '-') continue;
        if (strncmp(a + 2, name, nl) == 0 && a[2 + nl] == '=') {
            v = a + 3 + nl;
        } else if (strcmp(a + 2, name) == 0 && i + 1 < argc) {
            v = argv[++i];
        } else if (!strchr(a, '=') && !no_value(a + 2) && i + 1 < argc) {
            i++; /* another option's value */
        }
    }
    return v;
}

dd_status dd_launch_resume_argv(int argc, char *const *argv, char *const *extra, int nextra, char ***out,
                                int *outc) {
    if (!argv || argc < 1 || !out || !outc) return dd_error(DD_ERR_ARG, "dd_launch_resume_argv: NULL argument");
    const char *run = dd_launch_arg_value(argc, argv, "resume");
    if (!run) run = dd_launch_arg_value(argc, argv, "out");
    if (!run) return dd_error(DD_ERR_ARG, "the training command names no run directory (--out RUN)");
    char **v = calloc((size_t)argc + (size_t)nextra + 3, sizeof *v);
    if (!v) return DD_ERR_NOMEM;
    int n = 0;
    v[n++] = argv[0];
    v[n++] = "--resume";
    v[n++] = (char *)run;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (a[0] == '-' && a[1] != '-') { /* -q, -v, -qv */
            v[n++] = a;
            continue;
        }
        if (a[0] != '-') continue; /* a stray value: the trainer refuses it at the first start */
        char name[128];
        const char *eq = strchr(a + 2, '=');
        const size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), a + 2);
        const int has_value = !eq && !no_value(name) && i + 1 < argc;
        if (strcmp(name, "out") != 0 && strcmp(name, "resume") != 0 && resume_takes(name)) {
            v[n++] = a;
            if (has_value) v[n++] = argv[i + 1];
        }
        if (has_value) i++;
    }
    for (int k = 0; k < nextra; k++) v[n++] = extra[k];
    v[n] = NULL;
    *out = v;
    *outc = n;
    return DD_OK;
}

void dd_launch_failed_host(const char *text, char *host, size_t cap) {
    if (!host || cap == 0) return;
    host[0] = 0;
    for (const char *p = text, *q; p && (q = strstr(p, " on node "));) {
        q += 9;
        size_t n = 0;
        while (q[n] && !strchr(" \t\r\n,", q[n])) n++;
        while (n && q[n - 1] == '.') n--;
        if (n && n < cap) {
            memcpy(host, q, n);
            host[n] = 0;
        }
        p = q;
    }
}
