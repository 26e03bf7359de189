/* Run directory ownership and identity (train.h, docs/training.md "Run directory"):
 * - the owner's lock RUN/.lock: a second writer (a new run, or a resume of a run that is
 *   still training, also from inside the first run) is refused naming the holder's pid; a
 *   process killed with SIGKILL leaves no stale lock; the lock file is emptied on release;
 *   a holder slow to write its pid is waited for, and the killed owner's line still in the
 *   file is never named;
 * - a new run into a directory that holds a run, even one without a checkpoint yet, is
 *   refused;
 * - stale temporary files of the run's atomic writers are removed on the next start, and
 *   nothing else;
 * - the run id (config.json "run_id", checkpoint section run_id) and the data set
 *   identity (section data_id, data_stats.fingerprint): a resume is refused, before
 *   anything is written, when last.ckpt is another run's (other model, other task, same
 *   configuration but another run) or the data set differs (another one of the same size,
 *   one changed sample); the message names every difference; checkpoints and config.json
 *   of earlier versions (no run id) still resume, and then get one. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/ckpt.h"
#include "distdpd/train.h"
#include "test_train_util.h"

static void put(const char *dir, const char *name, const char *text) {
    char p[900];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int copy_file(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb"), *b = a ? fopen(dst, "wb") : NULL;
    int ok = a && b;
    char buf[65536];
    size_t k;
    while (ok && (k = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, k, b) == k;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = 0;
    return ok;
}

/* A copy of the run directory's files (not its lock). */
static void copy_run(const char *src, const char *dst) {
    static const char *const files[] = {"config.json", "metrics.jsonl", "history.csv", "best.ckpt", "last.ckpt", NULL};
    mkdir(dst, 0777);
    for (int k = 0; files[k]; k++) {
        char a[900], b[900];
        snprintf(a, sizeof a, "%s/%s", src, files[k]);
        snprintf(b, sizeof b, "%s/%s", dst, files[k]);
        if (tt_fsize(a) >= 0) CHECK(copy_file(a, b), "copy %s", a);
    }
}

static void cp(const char *src_dir, const char *name, const char *dst_dir) {
    char a[900], b[900];
    snprintf(a, sizeof a, "%s/%s", src_dir, name);
    snprintf(b, sizeof b, "%s/%s", dst_dir, name);
    CHECK(copy_file(a, b), "copy %s -> %s", a, b);
}

/* The run id of RUN/config.json ("" if none). */
static void config_run_id(const char *run, char *id, size_t cap) {
    char p[900];
    snprintf(p, sizeof p, "%s/config.json", run);
    char *t = dd_test_read(p);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    const cJSON *r = j ? cJSON_GetObjectItemCaseSensitive(j, "run_id") : NULL;
    snprintf(id, cap, "%s", cJSON_IsString(r) ? r->valuestring : "");
    cJSON_Delete(j);
    free(t);
}

/* The run id section of a checkpoint ("" if none). */
static void ckpt_run_id(const char *path, char *id, size_t cap) {
    dd_ckpt_reader *r = NULL;
    const char *s = "";
    id[0] = '\0';
    if (dd_ckpt_open(path, &r) != DD_OK) return;
    if (dd_ckpt_has(r, "run_id") && dd_ckpt_get_str(r, "run_id", &s) == DD_OK) snprintf(id, cap, "%s", s);
    dd_ckpt_close(&r);
}

/* Rewrites a checkpoint without some sections (as an earlier version wrote it). */
static void drop_sections(const char *path, const char *const *drop) {
    dd_ckpt_reader *r = NULL;
    dd_ckpt_writer *w = NULL;
    char tmp[920];
    snprintf(tmp, sizeof tmp, "%s.old", path);
    CHECK_OK(dd_ckpt_open(path, &r));
    CHECK_OK(dd_ckpt_write_begin(tmp, &w));
    for (size_t i = 0; r && w && i < dd_ckpt_count(r); i++) {
        const char *nm = dd_ckpt_section_name(r, i);
        int skip = 0;
        for (int k = 0; drop[k]; k++) skip |= strcmp(nm, drop[k]) == 0;
        if (skip) continue;
        const void *d;
        size_t bytes;
        CHECK_OK(dd_ckpt_get(r, nm, &d, &bytes));
        CHECK_OK(dd_ckpt_add(w, nm, d, bytes));
    }
    CHECK_OK(dd_ckpt_write_commit(&w));
    dd_ckpt_close(&r);
    CHECK(rename(tmp, path) == 0, "rename %s", tmp);
}

/* Removes the keys run_id and data_stats.fingerprint from RUN/config.json. */
static void strip_config_ids(const char *run) {
    char p[900];
    snprintf(p, sizeof p, "%s/config.json", run);
    char *t = dd_test_read(p);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    CHECK(j != NULL, "config.json parses");
    if (!j) return;
    cJSON_DeleteItemFromObjectCaseSensitive(j, "run_id");
    cJSON *ds = cJSON_GetObjectItemCaseSensitive(j, "data_stats");
    if (ds) cJSON_DeleteItemFromObjectCaseSensitive(ds, "fingerprint");
    char *out = cJSON_Print(j);
    cJSON_Delete(j);
    FILE *f = fopen(p, "wb");
    if (f && out) fputs(out, f);
    if (f) fclose(f);
    cJSON_free(out);
}

/* A second writer, tried from inside a run (progress callback) while it trains. */
static dd_status nested_new = DD_OK, nested_resume = DD_OK;
static char nested_msg_new[1024], nested_msg_resume[1024];
static const dd_train_cfg *nested_cfg;
static const char *nested_data, *nested_out;
static int nested_done;
static void try_second_writer(void *user, const dd_train_progress *p) {
    (void)user;
    if (p->phase != 0 || p->batch != 5 || nested_done) return;
    nested_done = 1;
    dd_train_run_opts o;
    memset(&o, 0, sizeof o);
    o.data = nested_data;
    o.out = nested_out;
    nested_new = dd_train_run(nested_cfg, &o);
    snprintf(nested_msg_new, sizeof nested_msg_new, "%s", dd_last_error());
    o.resume = 1;
    o.data = NULL;
    nested_resume = dd_train_run(NULL, &o);
    snprintf(nested_msg_resume, sizeof nested_msg_resume, "%s", dd_last_error());
}

static dd_status train(const dd_train_cfg *c, const char *data, const char *out, const char *pa_run) {
    dd_train_run_opts o;
    memset(&o, 0, sizeof o);
    o.data = data;
    o.out = out;
    o.pa_run = pa_run;
    return dd_train_run(c, &o);
}

static dd_status resume(const char *out, const char *data, int epochs) {
    dd_train_run_opts o;
    memset(&o, 0, sizeof o);
    o.out = out;
    o.data = data;
    o.resume = 1;
    o.epochs_override = epochs;
    return dd_train_run(NULL, &o);
}

/* A resume refused with `status` and a message containing each needle, leaving
 * config.json, last.ckpt and metrics.jsonl byte for byte as they were. */
static void refused(const char *run, const char *data, dd_status status, const char *const *needles) {
    static const char *const files[] = {"config.json", "last.ckpt", "metrics.jsonl", NULL};
    char *before[3];
    for (int k = 0; files[k]; k++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s", run, files[k]);
        before[k] = dd_test_read(p);
    }
    dd_status st = resume(run, data, 3);
    CHECK(st == status, "resume %s -> %s (want %s): %s", run, dd_status_str(st), dd_status_str(status), dd_last_error());
    for (int k = 0; needles[k]; k++)
        CHECK(strstr(dd_last_error(), needles[k]) != NULL, "message '%s' lacks '%s'", dd_last_error(), needles[k]);
    for (int k = 0; files[k]; k++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s", run, files[k]);
        char *after = dd_test_read(p);
        CHECK(before[k] && after && strcmp(before[k], after) == 0, "%s unchanged by the refused resume", p);
        free(after);
        free(before[k]);
    }
}

/* A process that holds the lock LOCK_PATH the way another run would, but writes its
 * "pid host" line only write_after_s seconds after taking the lock (never when < 0). It
 * holds the lock until *release is closed (or 30 s pass: never a hang). Returns its pid
 * once it holds the lock, or -1. */
static pid_t slow_holder(const char *lock_path, double write_after_s, int *release) {
    int locked[2], hold[2];
    if (pipe(locked) != 0) return -1;
    if (pipe(hold) != 0) {
        close(locked[0]);
        close(locked[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        close(locked[0]);
        close(hold[1]);
        int fd = open(lock_path, O_RDWR);
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) _exit(3);
        if (write(locked[1], "L", 1) != 1) _exit(4);
        if (write_after_s >= 0) {
            usleep((useconds_t)(write_after_s * 1e6));
            char line[64];
            int n = snprintf(line, sizeof line, "%ld slow-holder\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) _exit(5);
        }
        char c;
        while (read(hold[0], &c, 1) > 0) { /* until the parent closes its end */ }
        _exit(0);
    }
    close(locked[1]);
    close(hold[0]);
    char c = 0;
    if (pid < 0 || read(locked[0], &c, 1) != 1) {
        close(locked[0]);
        close(hold[1]);
        if (pid > 0) waitpid(pid, NULL, 0);
        return -1;
    }
    close(locked[0]);
    *release = hold[1];
    return pid;
}

static int end_holder(pid_t pid, int release) {
    close(release);
    int st = 0;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void) {
    const char *tmp = dd_test_tmpdir();
    char data[600], data2[600], data3[600], data4[600], data5[600], R[600], S[600], p[900], msg[1200];
    snprintf(data, sizeof data, "%s/data", tmp);
    snprintf(data2, sizeof data2, "%s/data2", tmp);
    snprintf(data3, sizeof data3, "%s/data3", tmp);
    snprintf(data4, sizeof data4, "%s/data4", tmp);
    snprintf(data5, sizeof data5, "%s/data5", tmp);
    snprintf(R, sizeof R, "%s/R", tmp);
    snprintf(S, sizeof S, "%s/S", tmp);
    size_t n[3] = {2000, 1024, 1024};
    dd_dataset *ds = tt_make_data(n, "wiener-hammerstein", NULL, 0, 1.0, 3.0, 5, NULL);
    dd_dataset *ds2 = tt_make_data(n, "wiener-hammerstein", NULL, 0, 1.0, 3.0, 6, NULL);
    CHECK(ds && ds2, "data sets");
    if (!ds || !ds2) return dd_test_done("test_train_rundir_owner");
    CHECK_OK(dd_dataset_save_opendpd(ds, data));
    CHECK_OK(dd_dataset_save_opendpd(ds2, data2));
    {   /* data3: data with one validation output sample changed */
        dd_cf32 *v = dd_calloc(n[1], sizeof *v);
        memcpy(v, ds->out[1], n[1] * sizeof *v);
        v[100] += 1e-3f;
        const dd_cf32 *in[3] = {ds->in[0], ds->in[1], ds->in[2]};
        const dd_cf32 *out[3] = {ds->out[0], v, ds->out[2]};
        dd_dataset *ds3 = NULL;
        CHECK_OK(dd_dataset_from_arrays(&ds->spec, n, in, out, &ds3));
        if (ds3) CHECK_OK(dd_dataset_save_opendpd(ds3, data3));
        dd_dataset_free(&ds3);
        dd_free(v);
    }
    {   /* data4: the same samples, the test split 24 shorter; data5: the same samples under
         * another spec (nperseg 256) */
        const size_t n4[3] = {n[0], n[1], n[2] - 24};
        const dd_cf32 *in[3] = {ds->in[0], ds->in[1], ds->in[2]};
        const dd_cf32 *out[3] = {ds->out[0], ds->out[1], ds->out[2]};
        dd_dataset *d4 = NULL, *d5 = NULL;
        CHECK_OK(dd_dataset_from_arrays(&ds->spec, n4, in, out, &d4));
        if (d4) CHECK_OK(dd_dataset_save_opendpd(d4, data4));
        dd_spec s5 = ds->spec;
        s5.nperseg = 256;
        CHECK_OK(dd_dataset_from_arrays(&s5, n, in, out, &d5));
        if (d5) CHECK_OK(dd_dataset_save_opendpd(d5, data5));
        dd_dataset_free(&d4);
        dd_dataset_free(&d5);
    }
    dd_train_cfg c, cg, cd;
    tt_cfg(&c, DD_TRAIN_PA, 6, 32, 2, 32, 2);
    c.lr = 2e-2;

    /* ---- a run: run id in config.json and in every checkpoint, data identity */
    CHECK_OK(train(&c, data, R, NULL));
    char id_cfg[64], id_last[64], id_best[64];
    config_run_id(R, id_cfg, sizeof id_cfg);
    snprintf(p, sizeof p, "%s/last.ckpt", R);
    ckpt_run_id(p, id_last, sizeof id_last);
    snprintf(p, sizeof p, "%s/best.ckpt", R);
    ckpt_run_id(p, id_best, sizeof id_best);
    CHECK(strlen(id_cfg) == 32 && strspn(id_cfg, "0123456789abcdef") == 32, "config.json run_id '%s'", id_cfg);
    CHECK(strcmp(id_cfg, id_last) == 0 && strcmp(id_cfg, id_best) == 0, "run ids: config %s, last %s, best %s", id_cfg,
          id_last, id_best);
    snprintf(p, sizeof p, "%s/config.json", R);
    char *cj = dd_test_read(p);
    CHECK(cj && strstr(cj, "\"fingerprint\""), "config.json data_stats.fingerprint");
    free(cj);
    CHECK(tt_has_file(R, ".lock"), "RUN/.lock exists");
    snprintf(p, sizeof p, "%s/.lock", R);
    CHECK(tt_fsize(p) == 0, "the lock file is emptied at the end of the run (%ld bytes)", tt_fsize(p));

    /* ---- the lock: a second writer is refused, naming this process */
    dd_run_lock *lk = NULL, *lk2 = NULL;
    CHECK_OK(dd_run_lock_acquire(R, 0, &lk));
    snprintf(msg, sizeof msg, "is in use by pid %ld on host", (long)getpid());
    CHECK_ERR(dd_run_lock_acquire(R, 0, &lk2), DD_ERR_ARG, msg);
    CHECK(lk2 == NULL, "no handle on refusal");
    CHECK_ERR(resume(R, NULL, 3), DD_ERR_ARG, msg);
    CHECK_ERR(train(&c, data, R, NULL), DD_ERR_ARG, msg);
    snprintf(p, sizeof p, "%s/.lock", R);
    char *who = dd_test_read(p);
    char want[64];
    snprintf(want, sizeof want, "%ld ", (long)getpid());
    CHECK(who && strncmp(who, want, strlen(want)) == 0, "lock file holds 'pid host': '%s'", who ? who : "");
    free(who);
    dd_run_lock_release(&lk);
    CHECK(lk == NULL && tt_fsize(p) == 0, "released: handle NULL, lock file empty");
    dd_run_lock_release(&lk); /* NULL-safe */
    char nodir[700];
    snprintf(nodir, sizeof nodir, "%s/nonexistent", tmp);
    CHECK_ERR(dd_run_lock_acquire(nodir, 0, &lk), DD_ERR_IO, "no such run directory");
    CHECK_ERR(resume(nodir, NULL, 3), DD_ERR_IO, "nothing to resume");

    /* ---- a second writer while the first trains (from inside its progress callback) */
    nested_cfg = &c;
    nested_data = data;
    nested_out = S;
    {
        dd_train_run_opts o;
        memset(&o, 0, sizeof o);
        o.data = data;
        o.out = S;
        o.progress = try_second_writer;
        CHECK_OK(dd_train_run(&c, &o));
    }
    CHECK(nested_done, "the callback ran");
    CHECK(nested_new == DD_ERR_ARG && strstr(nested_msg_new, "is in use by pid"), "new run into a training run: %s: %s",
          dd_status_str(nested_new), nested_msg_new);
    CHECK(nested_resume == DD_ERR_ARG && strstr(nested_msg_resume, "is in use by pid"),
          "resume of a training run: %s: %s", dd_status_str(nested_resume), nested_msg_resume);

    /* ---- kill -9 of the owner leaves the lock file but no lock */
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        dd_run_lock *cl = NULL;
        if (dd_run_lock_acquire(R, 0, &cl) != DD_OK) _exit(3);
        raise(SIGKILL);
        _exit(4);
    }
    int wst = 0;
    CHECK(child > 0 && waitpid(child, &wst, 0) == child && WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL,
          "the lock holder was killed by SIGKILL (status %d)", wst);
    snprintf(p, sizeof p, "%s/.lock", R);
    who = dd_test_read(p);
    snprintf(want, sizeof want, "%ld ", (long)child);
    CHECK(who && strncmp(who, want, strlen(want)) == 0, "the dead owner's pid is still in the file: '%s'", who ? who : "");
    char dead_line[320];
    snprintf(dead_line, sizeof dead_line, "%s", who ? who : "");
    free(who); /* before the forks below: the children exit holding no lost memory (valgrind) */

    /* ---- a holder slow to write its line (a loaded machine): the second writer waits for
     * it, and never names the killed owner whose line is still in the file */
    int rel = -1;
    pid_t slow = slow_holder(p, 0.5, &rel);
    CHECK(slow > 0, "a slow holder took the lock");
    if (slow > 0) {
        snprintf(msg, sizeof msg, "is in use by pid %ld on host slow-holder", (long)slow);
        CHECK_ERR(dd_run_lock_acquire(R, 0, &lk), DD_ERR_ARG, msg);
        CHECK(end_holder(slow, rel), "the slow holder ended cleanly");
    }
    put(R, ".lock", dead_line);
    slow = slow_holder(p, -1.0, &rel);
    CHECK(slow > 0, "a silent holder took the lock");
    if (slow > 0) {
        snprintf(msg, sizeof msg, "is in use by pid %ld", (long)child);
        dd_status st = dd_run_lock_acquire(R, 0, &lk);
        CHECK(st == DD_ERR_ARG && strstr(dd_last_error(), "is in use by another process") && !strstr(dd_last_error(), msg),
              "a holder that never writes its line: %s: %s", dd_status_str(st), dd_last_error());
        CHECK(end_holder(slow, rel), "the silent holder ended cleanly");
    }
    CHECK_OK(dd_run_lock_acquire(R, 0, &lk));
    dd_run_lock_release(&lk);

    /* ---- a directory holding a run without a checkpoint yet is not a fresh one */
    char T[600];
    snprintf(T, sizeof T, "%s/T", tmp);
    mkdir(T, 0777);
    cp(R, "config.json", T);
    CHECK_ERR(train(&c, data, T, NULL), DD_ERR_ARG, "already holds a run (config.json) without a last.ckpt");
    CHECK_ERR(train(&c, data, R, NULL), DD_ERR_ARG, "already holds a run (config.json, last.ckpt, best.ckpt, metrics.jsonl)");
    char E[600];
    snprintf(E, sizeof E, "%s/E", tmp);
    mkdir(E, 0777);
    put(E, "notes.txt", "an empty or non-run directory is fine\n");
    c.epochs = 1;
    CHECK_OK(train(&c, data, E, NULL));
    c.epochs = 2;

    /* ---- stale temporary files of a killed owner are removed on the next start */
    put(R, "last.ckpt.tmp.4242.0", "partial");
    put(R, "best.ckpt.tmp.4242.1", "partial");
    put(R, "metrics.jsonl.tmp.4243", "partial");
    put(R, "config.json.tmp.17", "partial");
    put(R, "last.ckpt.tmp.x", "not ours");
    put(R, "notes.tmp.5", "not ours");
    put(R, "last.ckpt.tmp.", "not ours");
    CHECK_OK(resume(R, NULL, 3));
    CHECK(!tt_has_file(R, "last.ckpt.tmp.4242.0") && !tt_has_file(R, "best.ckpt.tmp.4242.1") &&
              !tt_has_file(R, "metrics.jsonl.tmp.4243") && !tt_has_file(R, "config.json.tmp.17"),
          "stale temporary files removed");
    CHECK(tt_has_file(R, "last.ckpt.tmp.x") && tt_has_file(R, "notes.tmp.5") && tt_has_file(R, "last.ckpt.tmp."),
          "other files kept");
    config_run_id(R, id_last, sizeof id_last);
    CHECK(strcmp(id_cfg, id_last) == 0, "a resume keeps the run id (%s, %s)", id_cfg, id_last);

    /* ---- resume refuses a last.ckpt of another run, before writing anything */
    char G[600], X[600], D[600], Q[600];
    snprintf(G, sizeof G, "%s/G", tmp);   /* a dgru run */
    snprintf(D, sizeof D, "%s/D", tmp);   /* a DPD run through R */
    snprintf(Q, sizeof Q, "%s/Q", tmp);   /* R's configuration again: another run */
    snprintf(X, sizeof X, "%s/X", tmp);   /* scratch copies of R */
    cg = c;
    snprintf(cg.model, sizeof cg.model, "dgru");
    dd_model_cfg_set(&cg.model_cfg, "hidden", 5);
    CHECK_OK(train(&cg, data, G, NULL));
    tt_cfg(&cd, DD_TRAIN_DLA, 4, 32, 2, 32, 1);
    CHECK_OK(train(&cd, NULL, D, R));
    CHECK_OK(train(&c, data, Q, NULL));

    copy_run(R, X);
    cp(G, "last.ckpt", X);
    refused(X, NULL, DD_ERR_MISMATCH,
            (const char *const[]){"last.ckpt belongs to another run", "model dgru (config.json: gru)",
                                  "hidden 5 (config.json: 6)", "run id", "nothing was written", NULL});
    cp(D, "last.ckpt", X);
    refused(X, NULL, DD_ERR_MISMATCH,
            (const char *const[]){"task dla (config.json: pa)", "PA model gru (config.json: none)", NULL});
    cp(Q, "last.ckpt", X); /* same model, configuration and data: only the run id tells */
    snprintf(msg, sizeof msg, "(config.json: %s)", id_cfg);
    refused(X, NULL, DD_ERR_MISMATCH, (const char *const[]){"belongs to another run: run id ", msg, NULL});

    /* ---- and a data set other than the checkpoint's */
    cp(R, "last.ckpt", X);
    refused(X, data2, DD_ERR_MISMATCH,
            (const char *const[]){"was made on another data set than", "the train split holds other samples", NULL});
    refused(X, data3, DD_ERR_MISMATCH,
            (const char *const[]){"the val split holds other samples", NULL});
    refused(X, data4, DD_ERR_MISMATCH, (const char *const[]){"the test split has 1000 samples (last.ckpt: 1024)", NULL});
    refused(X, data5, DD_ERR_MISMATCH, (const char *const[]){"spec nperseg 256 (last.ckpt: 512)", NULL});
    CHECK_OK(resume(X, data, 4)); /* its own data set, given explicitly: fine */

    /* ---- files of an earlier version (no run id, no data identity) still resume */
    static const char *const ids[] = {"run_id", "data_id", NULL};
    char O[600];
    snprintf(O, sizeof O, "%s/O", tmp);
    copy_run(Q, O);
    snprintf(p, sizeof p, "%s/last.ckpt", O);
    drop_sections(p, ids);
    ckpt_run_id(p, id_last, sizeof id_last);
    CHECK(id_last[0] == '\0', "the old-style checkpoint has no run id");
    /* ... but not under a config.json that has one */
    refused(O, NULL, DD_ERR_MISMATCH, (const char *const[]){"run id none (an earlier distdpd's checkpoint)", NULL});
    strip_config_ids(O);
    CHECK_OK(resume(O, NULL, 3));
    config_run_id(O, id_cfg, sizeof id_cfg);
    ckpt_run_id(p, id_last, sizeof id_last);
    CHECK(strlen(id_cfg) == 32 && strcmp(id_cfg, id_last) == 0, "the resumed old run got run id %s (last.ckpt %s)", id_cfg,
          id_last);
    /* a run directory without config.json resumes from last.ckpt alone */
    snprintf(p, sizeof p, "%s/config.json", O);
    CHECK(unlink(p) == 0, "remove config.json");
    CHECK_OK(resume(O, NULL, 4));
    config_run_id(O, msg, sizeof msg);
    CHECK(strcmp(msg, id_cfg) == 0, "config.json written anew with the checkpoint's run id");
    /* an unreadable config.json is not ignored */
    put(O, "config.json", "{ not json");
    refused(O, NULL, DD_ERR_FORMAT, (const char *const[]){"config.json: not a JSON object", NULL});

    dd_dataset_free(&ds);
    dd_dataset_free(&ds2);
    return dd_test_done("test_train_rundir_owner");
}
