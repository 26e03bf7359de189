/* Run directories under I/O failures and contention (train.h, docs/training.md "Run
 * directory", docs/testing.md "Coverage"), with real mechanisms only:
 * - the owner's lock held by another live process (a forked child): a new run, a resume
 *   and dd_run_lock_acquire are refused naming the child's pid and host, or, while the
 *   holder has not written its pid yet, naming the lock file; a stale lock file (a pid
 *   nobody holds the lock for) is taken over; a lock path that is a directory and a run
 *   directory under a regular file are clear I/O errors that write nothing;
 * - metrics.jsonl written to a full disk (its temporary file a symlink to /dev/full:
 *   ENOSPC from the kernel): DD_ERR_IO naming RUN/metrics.jsonl and the disk, the previous
 *   metrics.jsonl whole (one parseable line per epoch), no temporary file left, and a
 *   resume then gives the straight run's metrics and parameters bit for bit;
 * - config.json's temporary file blocked by a directory: "cannot write" naming it, every
 *   file of the run unchanged;
 * - a checkpoint that does not fit (RLIMIT_FSIZE below its size, SIGXFSZ ignored: EFBIG
 *   from the kernel, in the background writer): DD_ERR_IO naming the checkpoint, last.ckpt
 *   and best.ckpt still the previous epoch's and verifying, metrics.jsonl / history.csv
 *   listing only the epochs last.ckpt holds, and a resume then equals the straight run;
 *   a limit of half the owner's "pid host" line: that line does not fit the lock file (a
 *   warning, the file left empty rather than torn) and config.json's write is refused,
 *   config.json unchanged;
 * - interval checkpoints (cfg.ckpt_every_s): 1e-9 s takes one after every step (a step
 *   lasts far longer than a nanosecond; nothing here is timed), 1e9 s none inside the
 *   epoch; neither changes training, and resuming from a checkpoint taken inside the epoch
 *   ends bit for bit where the straight run does. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/ckpt.h"
#include "distdpd/train.h"
#include "test_train_util.h"

/* Entries of dir (not starting with '.') whose name holds `part`; -1 without dir. */
static int count_names(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.' && strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* The atomic writers' temporary files in dir. */
static int count_tmp(const char *dir) { return count_names(dir, ".tmp."); }

/* The lines of RUN/metrics.jsonl when every one is whole (ends with a newline) and a JSON
 * object whose "epoch" is its line number; else -1. */
static int metrics_lines(const char *run) {
    char p[900];
    snprintf(p, sizeof p, "%s/metrics.jsonl", run);
    char *t = dd_test_read(p);
    if (!t) return -1;
    int n = 0, ok = 1;
    for (char *line = t, *nl; ok && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) {
            ok = 0;
            break;
        }
        *nl = '\0';
        cJSON *j = cJSON_Parse(line);
        const cJSON *ep = j ? cJSON_GetObjectItemCaseSensitive(j, "epoch") : NULL;
        ok = cJSON_IsNumber(ep) && ep->valueint == ++n;
        cJSON_Delete(j);
    }
    free(t);
    return ok ? n : -1;
}

/* The epoch of RUN/<which>.ckpt (read and verified by dd_run_model_load), -1 if it fails. */
static int ckpt_epoch(const char *run, const char *which) {
    dd_run_model m;
    if (dd_run_model_load(run, which, &m) != DD_OK) return -1;
    int e = m.epoch;
    dd_run_model_free(&m);
    return e;
}

/* Whether RUN_A/last.ckpt and RUN_B/last.ckpt hold the same parameters, bit for bit. */
static int same_params(const char *a, const char *b) {
    dd_run_model ma, mb;
    if (dd_run_model_load(a, "last", &ma) != DD_OK) return 0;
    if (dd_run_model_load(b, "last", &mb) != DD_OK) {
        dd_run_model_free(&ma);
        return 0;
    }
    size_t n = dd_model_params(ma.model)->total;
    int same = ma.epoch == mb.epoch && n == dd_model_params(mb.model)->total &&
               memcmp(ma.params, mb.params, n * sizeof(float)) == 0;
    dd_run_model_free(&ma);
    dd_run_model_free(&mb);
    return same;
}

/* Whether the two runs' metrics.jsonl agree in every line's training results (the
 * timing keys aside). */
static int same_metrics(const char *a, const char *b) {
    static const char *const keys[] = {"epoch", "step", "lr", "train_loss", "val_loss", "val_nmse_db", "test_nmse_db",
                                       "best", NULL};
    char pa[900], pb[900];
    snprintf(pa, sizeof pa, "%s/metrics.jsonl", a);
    snprintf(pb, sizeof pb, "%s/metrics.jsonl", b);
    char *ta = dd_test_read(pa), *tb = dd_test_read(pb);
    int same = ta && tb;
    char *sa = NULL, *sb = NULL;
    for (char *la = same ? strtok_r(ta, "\n", &sa) : NULL, *lb = same ? strtok_r(tb, "\n", &sb) : NULL; same && (la || lb);
         la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb)) {
        cJSON *ja = la ? cJSON_Parse(la) : NULL, *jb = lb ? cJSON_Parse(lb) : NULL;
        same = ja && jb;
        for (int k = 0; same && keys[k]; k++)
            same = cJSON_Compare(cJSON_GetObjectItemCaseSensitive(ja, keys[k]), cJSON_GetObjectItemCaseSensitive(jb, keys[k]),
                                 1);
        cJSON_Delete(ja);
        cJSON_Delete(jb);
    }
    free(ta);
    free(tb);
    return same;
}

/* A new run; progress may be NULL; stop_after: epochs before stopping (0: all). */
static dd_status train_with(const dd_train_cfg *c, const char *data, const char *out,
                            void (*progress)(void *, const dd_train_progress *), int stop_after) {
    dd_train_run_opts o;
    memset(&o, 0, sizeof o);
    o.data = data;
    o.out = out;
    o.progress = progress;
    o.stop_after_epochs = stop_after;
    return dd_train_run(c, &o);
}

static dd_status train(const dd_train_cfg *c, const char *data, const char *out) {
    return train_with(c, data, out, NULL, 0);
}

static dd_status resume(const char *out, int epochs) {
    dd_train_run_opts o;
    memset(&o, 0, sizeof o);
    o.out = out;
    o.resume = 1;
    o.epochs_override = epochs;
    return dd_train_run(NULL, &o);
}

/* The soft limit on the size of files this process writes (RLIM_INFINITY: none). */
static void file_size_limit(rlim_t bytes) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0) return;
    rl.rlim_cur = bytes == RLIM_INFINITY || bytes > rl.rlim_max ? rl.rlim_max : bytes;
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) fprintf(stderr, "setrlimit: %s\n", strerror(errno));
}

/* A child that holds RUN/.lock until the parent writes a byte (or exits): with
 * dd_run_lock_acquire (pid written), or with a bare flock (the moment before the holder
 * writes its pid). */
typedef struct {
    pid_t pid;
    int go; /* the parent's end: write a byte to let the child release and exit */
} holder;

static int hold_lock(const char *run, int bare, holder *h) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return -1;
    fflush(NULL);
    h->pid = fork();
    if (h->pid < 0) return -1;
    if (h->pid == 0) {
        close(up[0]);
        close(down[1]);
        alarm(120); /* never outlives a parent that hangs */
        char ok = 'n', c;
        dd_run_lock *lk = NULL;
        int fd = -1;
        if (bare) {
            char p[900];
            snprintf(p, sizeof p, "%s/.lock", run);
            fd = open(p, O_RDWR | O_CREAT, 0666);
            if (fd >= 0 && ftruncate(fd, 0) == 0 && flock(fd, LOCK_EX) == 0) ok = 'y';
        } else if (dd_run_lock_acquire(run, 1, &lk) == DD_OK) {
            ok = 'y';
        }
        if (write(up[1], &ok, 1) != 1) _exit(3);
        if (read(down[0], &c, 1) < 0) _exit(4);
        dd_run_lock_release(&lk);
        if (fd >= 0) close(fd);
        _exit(ok == 'y' ? 0 : 5);
    }
    close(up[1]);
    close(down[0]);
    h->go = down[1];
    char ok = 'n';
    int got = (int)read(up[0], &ok, 1);
    close(up[0]);
    return got == 1 && ok == 'y' ? 0 : -1;
}

/* Lets the holder go; its exit status (0: released cleanly). */
static int release_holder(holder *h) {
    if (write(h->go, "x", 1) != 1) kill(h->pid, SIGKILL);
    close(h->go);
    int wst = 0;
    if (waitpid(h->pid, &wst, 0) != h->pid) return -1;
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
}

/* Progress hook: once, at the first step of epoch 2, plant_fn(plant_arg). */
static void (*plant_fn)(const char *);
static const char *plant_arg;
static void plant_in_epoch2(void *user, const dd_train_progress *p) {
    (void)user;
    if (p->phase == 0 && p->epoch == 2 && plant_fn) {
        plant_fn(plant_arg);
        plant_fn = NULL;
    }
}
/* RUN/metrics.jsonl.tmp.PID (the name this process's writer uses) -> /dev/full */
static void plant_dev_full(const char *run) {
    char p[900];
    snprintf(p, sizeof p, "%s/metrics.jsonl.tmp.%ld", run, (long)getpid());
    if (symlink("/dev/full", p) != 0) fprintf(stderr, "symlink %s: %s\n", p, strerror(errno));
}

/* Steps of the interval-checkpoint run, counted by the progress hook. */
static uint64_t steps_seen, batches_per_epoch;
static void count_steps(void *user, const dd_train_progress *p) {
    (void)user;
    if (p->phase == 0) steps_seen++;
    batches_per_epoch = p->nbatches;
}

int main(void) {
    const char *tmp = dd_test_tmpdir();
    char data[600], p[900], q[900], want[1600];
    snprintf(data, sizeof data, "%s/data", tmp);
    size_t n[3] = {2000, 1024, 1024};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 1.0, 3.0, 5, NULL);
    CHECK(ds != NULL, "data set");
    if (!ds) return dd_test_done("test_train_rundir_io");
    CHECK_OK(dd_dataset_save_opendpd(ds, data));
    dd_dataset_free(&ds);
    dd_train_cfg c;
    tt_cfg(&c, DD_TRAIN_PA, 6, 32, 2, 32, 2);
    c.lr = 2e-2;
    char host[256] = "?";
    gethostname(host, sizeof host - 1);

    /* ---- the lock held by another live process */
    char L[600];
    snprintf(L, sizeof L, "%s/L", tmp);
    holder h;
    REQUIRE(hold_lock(L, 0, &h) == 0, "the child took the lock");
    snprintf(want, sizeof want, "%s is in use by pid %ld on host %s (%s/.lock)", L, (long)h.pid, host, L);
    dd_run_lock *lk = NULL;
    CHECK_ERR(dd_run_lock_acquire(L, 0, &lk), DD_ERR_ARG, want);
    CHECK(lk == NULL, "no handle on refusal");
    CHECK_ERR(train(&c, data, L), DD_ERR_ARG, want);
    CHECK_ERR(resume(L, 3), DD_ERR_ARG, want);
    CHECK(!tt_has_file(L, "config.json") && !tt_has_file(L, "last.ckpt") && !tt_has_file(L, "metrics.jsonl"),
          "the refused runs wrote nothing");
    CHECK(release_holder(&h) == 0, "the holder released its lock and exited 0");
    snprintf(p, sizeof p, "%s/.lock", L);
    CHECK(tt_fsize(p) == 0, "the holder emptied the lock file (%ld bytes)", tt_fsize(p));
    /* a holder that has not written its pid yet: the lock file names it */
    REQUIRE(hold_lock(L, 1, &h) == 0, "the child took a bare flock");
    snprintf(want, sizeof want, "%s is in use by another process (%s/.lock)", L, L);
    CHECK_ERR(dd_run_lock_acquire(L, 0, &lk), DD_ERR_ARG, want);
    CHECK_ERR(train(&c, data, L), DD_ERR_ARG, want);
    CHECK(release_holder(&h) == 0, "the bare holder exited 0");
    /* a stale lock file (a pid that holds no lock) is taken over */
    dd_test_write(p, "4194304 elsewhere\n");
    CHECK_OK(dd_run_lock_acquire(L, 0, &lk));
    char *who = dd_test_read(p);
    snprintf(want, sizeof want, "%ld %s\n", (long)getpid(), host);
    CHECK(who && strcmp(who, want) == 0, "the lock file names this process: '%s'", who ? who : "");
    free(who);
    dd_run_lock_release(&lk);
    /* RUN/.lock a directory; RUN under a regular file */
    char LD[600], F[600];
    snprintf(LD, sizeof LD, "%s/LD", tmp);
    snprintf(p, sizeof p, "%s/.lock", LD);
    CHECK(mkdir(LD, 0777) == 0 && mkdir(p, 0777) == 0, "mkdir %s", p);
    snprintf(want, sizeof want, "%s: cannot open the run directory's lock: %s", p, strerror(EISDIR));
    CHECK_ERR(dd_run_lock_acquire(LD, 0, &lk), DD_ERR_IO, want);
    CHECK_ERR(train(&c, data, LD), DD_ERR_IO, want);
    CHECK(!tt_has_file(LD, "config.json"), "nothing written into %s", LD);
    snprintf(F, sizeof F, "%s/file", tmp);
    dd_test_write(F, "a regular file\n");
    snprintf(p, sizeof p, "%s/run", F);
    snprintf(want, sizeof want, "%s: cannot create directory: %s", p, strerror(ENOTDIR));
    CHECK_ERR(train(&c, data, p), DD_ERR_IO, want);

    /* ---- the reference runs: 2 epochs straight */
    char REF[600], M[600];
    snprintf(REF, sizeof REF, "%s/ref", tmp);
    snprintf(M, sizeof M, "%s/M", tmp);
    CHECK_OK(train(&c, data, REF));
    CHECK(metrics_lines(REF) == 2, "the reference has 2 metrics lines");

    /* ---- metrics.jsonl onto a full disk (/dev/full) */
    struct stat sb;
    if (stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode)) {
        plant_fn = plant_dev_full;
        plant_arg = M;
        snprintf(want, sizeof want, "%s/metrics.jsonl: write failed: %s; the previous file is untouched", M,
                 strerror(ENOSPC));
        CHECK_ERR(train_with(&c, data, M, plant_in_epoch2, 0), DD_ERR_IO, want);
        CHECK(plant_fn == NULL, "the symlink was planted");
        CHECK(metrics_lines(M) == 1, "metrics.jsonl keeps epoch 1, whole (%d lines)", metrics_lines(M));
        CHECK(count_tmp(M) == 0, "no temporary file left in %s (%d)", M, count_tmp(M));
        CHECK(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode), "/dev/full is still the device");
        CHECK(ckpt_epoch(M, "last") == 2, "last.ckpt verifies (epoch %d)", ckpt_epoch(M, "last"));
        CHECK_OK(resume(M, 0));
        CHECK(metrics_lines(M) == 2 && same_metrics(M, REF), "the resume writes the straight run's metrics.jsonl");
        CHECK(same_params(M, REF), "and its parameters, bit for bit");
    } else {
        printf("note: no /dev/full here: the full-disk part is skipped\n");
        CHECK_OK(train(&c, data, M));
    }

    /* ---- config.json's temporary file blocked by a directory: nothing changes */
    {
        static const char *const files[] = {"config.json", "metrics.jsonl", "history.csv", "last.ckpt", NULL};
        char *before[4];
        for (int k = 0; files[k]; k++) {
            snprintf(p, sizeof p, "%s/%s", M, files[k]);
            before[k] = (char *)dd_test_slurp(p, NULL);
        }
        snprintf(q, sizeof q, "%s/config.json.tmp.%ld", M, (long)getpid());
        CHECK(mkdir(q, 0777) == 0, "mkdir %s", q);
        snprintf(want, sizeof want, "%s: cannot write: %s", q, strerror(EISDIR));
        CHECK_ERR(resume(M, 3), DD_ERR_IO, want);
        for (int k = 0; files[k]; k++) {
            snprintf(p, sizeof p, "%s/%s", M, files[k]);
            size_t na = 0;
            char *after = (char *)dd_test_slurp(p, &na);
            CHECK(strcmp(before[k], after) == 0 || (k == 3 && memcmp(before[k], after, na) == 0), "%s unchanged", p);
            free(after);
            free(before[k]);
        }
        CHECK(rmdir(q) == 0, "rmdir %s", q);
    }

    /* ---- a checkpoint that does not fit (RLIMIT_FSIZE: EFBIG in the background writer) */
    dd_train_cfg cb = c;
    dd_model_cfg_set(&cb.model_cfg, "hidden", 24); /* a checkpoint several times config.json */
    char REF2[600], B[600];
    snprintf(REF2, sizeof REF2, "%s/ref2", tmp);
    snprintf(B, sizeof B, "%s/B", tmp);
    CHECK_OK(train(&cb, data, REF2));
    CHECK_OK(train_with(&cb, data, B, NULL, 1));
    snprintf(p, sizeof p, "%s/last.ckpt", B);
    const long C = tt_fsize(p);
    snprintf(p, sizeof p, "%s/config.json", B);
    const long J = tt_fsize(p);
    CHECK(C > 0 && J > 0 && J + 1024 < C / 2, "last.ckpt %ld bytes, config.json %ld", C, J);
    signal(SIGXFSZ, SIG_IGN);
    file_size_limit((rlim_t)(C / 2));
    dd_status st = resume(B, 0);
    file_size_limit(RLIM_INFINITY);
    CHECK(st == DD_ERR_IO, "the resume under the limit -> %s: %s", dd_status_str(st), dd_last_error());
    snprintf(want, sizeof want, "checkpoint '%s/", B);
    CHECK(strstr(dd_last_error(), want) && strstr(dd_last_error(), strerror(EFBIG)) &&
              strstr(dd_last_error(), "the previous file is untouched"),
          "the error names the checkpoint and the cause: %s", dd_last_error());
    CHECK(ckpt_epoch(B, "last") == 1 && ckpt_epoch(B, "best") == 1, "last.ckpt and best.ckpt: epoch 1 (%d, %d), verified",
          ckpt_epoch(B, "last"), ckpt_epoch(B, "best"));
    CHECK(count_tmp(B) == 0, "no temporary file left in %s (%d)", B, count_tmp(B));
    CHECK(metrics_lines(B) == 1, "metrics.jsonl lists the epochs last.ckpt holds: %d lines", metrics_lines(B));
    snprintf(p, sizeof p, "%s/history.csv", B);
    char *hist = dd_test_read(p);
    int hl = 0;
    for (const char *s = hist; s && *s; s++) hl += *s == '\n';
    CHECK(hl == 2, "history.csv: a header and epoch 1 (%d lines)", hl);
    free(hist);
    /* half the owner's "pid host" line: it does not fit the lock file, config.json cannot
     * be written */
    snprintf(want, sizeof want, "%ld %s\n", (long)getpid(), host);
    const rlim_t half_line = strlen(want) / 2;
    snprintf(p, sizeof p, "%s/config.json", B);
    char *cfg_before = dd_test_read(p);
    file_size_limit(half_line);
    st = resume(B, 0);
    file_size_limit(RLIM_INFINITY);
    snprintf(want, sizeof want, "%s/config.json: write failed: %s; the previous file is untouched", B, strerror(EFBIG));
    CHECK(st == DD_ERR_IO && strstr(dd_last_error(), want), "config.json over the limit -> %s: %s", dd_status_str(st),
          dd_last_error());
    char *cfg_after = dd_test_read(p);
    CHECK(cfg_before && cfg_after && strcmp(cfg_before, cfg_after) == 0, "config.json unchanged");
    free(cfg_before);
    free(cfg_after);
    /* the lock taken under that limit: held, its file empty rather than a torn "pid host" */
    file_size_limit(half_line);
    st = dd_run_lock_acquire(B, 0, &lk);
    file_size_limit(RLIM_INFINITY);
    CHECK(st == DD_OK, "the lock is taken without its pid line: %s", dd_last_error());
    snprintf(p, sizeof p, "%s/.lock", B);
    CHECK(tt_fsize(p) == 0, "the held lock's file is empty, not a torn pid line (%ld bytes)", tt_fsize(p));
    snprintf(want, sizeof want, "%s is in use by another process (%s)", B, p);
    dd_run_lock *lk2 = NULL;
    CHECK_ERR(dd_run_lock_acquire(B, 0, &lk2), DD_ERR_ARG, want); /* no wrong host named */
    dd_run_lock_release(&lk);
    CHECK(ckpt_epoch(B, "last") == 1 && count_tmp(B) == 0, "last.ckpt still epoch 1, no temporary file");
    /* without the limit the run completes as the straight one did */
    CHECK_OK(resume(B, 0));
    CHECK(same_params(B, REF2) && same_metrics(B, REF2), "the resumed run equals the straight run, bit for bit");

    /* ---- interval checkpoints (ckpt_every_s) */
    dd_train_cfg ce = c;
    ce.epochs = 1;
    ce.keep_last = 1000;
    char E0[600], E1[600], E2[600];
    snprintf(E0, sizeof E0, "%s/e0", tmp);
    snprintf(E1, sizeof E1, "%s/e1", tmp);
    snprintf(E2, sizeof E2, "%s/e2", tmp);
    CHECK_OK(train(&ce, data, E0)); /* no interval */
    ce.ckpt_every_s = 1e-9;
    CHECK_OK(train_with(&ce, data, E1, count_steps, 0));
    CHECK(steps_seen > 10 && steps_seen == batches_per_epoch, "%llu steps of %llu", (unsigned long long)steps_seen,
          (unsigned long long)batches_per_epoch);
    int missing = 0;
    char step[64];
    for (uint64_t s = 1; s <= steps_seen; s++) {
        snprintf(step, sizeof step, "ckpt/step-%010llu.ckpt", (unsigned long long)s);
        missing += !tt_has_file(E1, step);
    }
    snprintf(p, sizeof p, "%s/ckpt", E1);
    int files = count_names(p, "");
    CHECK(missing == 0 && files == (int)steps_seen, "1e-9 s: a checkpoint after every step (%d files, %d missing)", files,
          missing);
    CHECK(same_params(E1, E0) && same_metrics(E1, E0), "interval checkpoints do not change training");
    ce.ckpt_every_s = 1e9;
    CHECK_OK(train(&ce, data, E2));
    snprintf(p, sizeof p, "%s/ckpt", E2);
    files = count_names(p, "");
    snprintf(step, sizeof step, "ckpt/step-%010llu.ckpt", (unsigned long long)steps_seen);
    CHECK(files == 1 && tt_has_file(E2, step), "1e9 s: only the end of the epoch (%d files)", files);
    /* resume from the checkpoint taken after step 10 (inside the epoch) */
    snprintf(p, sizeof p, "%s/last.ckpt", E1);
    snprintf(q, sizeof q, "%s/ckpt/step-%010d.ckpt", E1, 10);
    CHECK(unlink(p) == 0 && link(q, p) == 0, "last.ckpt -> step 10");
    CHECK_OK(resume(E1, 0));
    CHECK(same_params(E1, E0), "resumed from step 10: the straight run's parameters, bit for bit");
    return dd_test_done("test_train_rundir_io");
}
