/* The heartbeat file of a training run (train.h dd_heartbeat, src/train/heartbeat.c),
 * the paths `make coverage` showed untested by the unit label (docs/testing.md
 * "Coverage"), with real files only:
 * - dd_heartbeat_open's refusals, each DD_ERR_IO / DD_ERR_ARG naming the file: an empty
 *   or too long path, a missing directory, a "directory" that is a regular file, a path
 *   that is a directory, a directory that cannot be written (a read-only file system,
 *   where this machine has one at /proc/sys); nothing is created;
 * - the line written: one JSON object with this process's pid, the step, epoch, state,
 *   world size, the wall clock of the write (between two clock readings around it) and
 *   the mean step time; the first step of a handle writes at once;
 * - a state of any length or content gives a whole line of valid JSON (a 600-character
 *   state used to make the writer read past its 512-byte line buffer, and a quote made
 *   the line invalid JSON);
 * - writes that fail: the temporary file a symlink to /dev/full (ENOSPC at fclose), the
 *   temporary file's name taken by a directory (fopen fails), the heartbeat replaced by a
 *   non-empty directory (rename fails): the previous heartbeat stays whole, no temporary
 *   file is left, and the failure is logged once per handle as a warning naming the file
 *   and the cause; a later write that can succeed does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/train.h"

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The heartbeat at path when it is exactly one line holding one JSON object; NULL
 * otherwise (the caller deletes it). */
static cJSON *read_hb(const char *path) {
    char *t = dd_test_read(path);
    if (!t) return NULL;
    size_t n = strlen(t);
    cJSON *j = NULL;
    if (n > 0 && t[n - 1] == '\n' && strchr(t, '\n') == t + n - 1) {
        j = cJSON_Parse(t);
        if (j && !cJSON_IsObject(j)) {
            cJSON_Delete(j);
            j = NULL;
        }
    }
    free(t);
    return j;
}

static double jnum(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1e300;
}

static const char *jstr(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsString(v) ? v->valuestring : "(none)";
}

static void test_open_refused(const char *dir) {
    dd_heartbeat *hb = (dd_heartbeat *)&hb; /* set to NULL by every refusal */
    char p[700], q[5000];
    CHECK_ERR(dd_heartbeat_open("x", 1, NULL), DD_ERR_ARG, "dd_heartbeat_open: NULL output");
    CHECK_ERR(dd_heartbeat_open("", 1, &hb), DD_ERR_ARG, "heartbeat file: empty path");
    CHECK(hb == NULL, "refused: *out is NULL");
    CHECK_ERR(dd_heartbeat_open(NULL, 1, &hb), DD_ERR_ARG, "heartbeat file: empty path");
    memset(q, 'a', 4500);
    q[0] = '/';
    q[4500] = '\0';
    CHECK_ERR(dd_heartbeat_open(q, 1, &hb), DD_ERR_ARG, "heartbeat file: path too long (4500 bytes, at most 4095): /aaa");

    snprintf(p, sizeof p, "%s/no/such/hb.json", dir);
    CHECK_ERR(dd_heartbeat_open(p, 1, &hb), DD_ERR_IO, "no/such/hb.json: its directory ");
    CHECK(strstr(dd_last_error(), "no/such does not exist"), "message: %s", dd_last_error());

    /* the "directory" is a regular file */
    snprintf(p, sizeof p, "%s/plain", dir);
    dd_test_write(p, "plain");
    snprintf(p, sizeof p, "%s/plain/hb.json", dir);
    CHECK_ERR(dd_heartbeat_open(p, 1, &hb), DD_ERR_IO, "plain/hb.json: ");
    CHECK(strstr(dd_last_error(), "/plain is not a directory"), "message: %s", dd_last_error());

    /* the path is a directory */
    snprintf(p, sizeof p, "%s/adir", dir);
    REQUIRE(mkdir(p, 0777) == 0, "mkdir %s: %s", p, strerror(errno));
    CHECK_ERR(dd_heartbeat_open(p, 1, &hb), DD_ERR_IO, "adir: is a directory");
    CHECK(hb == NULL, "refused: *out is NULL");

    /* a directory this process cannot write (root writes anywhere but on a read-only file
     * system: /proc/sys is one in most containers) */
    if (access("/proc/sys", W_OK) != 0) {
        CHECK_ERR(dd_heartbeat_open("/proc/sys/hb.json", 1, &hb), DD_ERR_IO,
                  "heartbeat file /proc/sys/hb.json: cannot write into /proc/sys: ");
    } else {
        printf("note: /proc/sys is writable here: the unwritable-directory refusal is not exercised\n");
    }
    CHECK(dd_test_count_names(dir, "hb") == 0, "a refusal created %d files", dd_test_count_names(dir, "hb"));
}

static void test_lines(const char *dir) {
    char p[700];
    snprintf(p, sizeof p, "%s/hb.json", dir);
    dd_heartbeat *hb = NULL;
    REQUIRE_OK(dd_heartbeat_open(p, 3, &hb));
    CHECK(access(p, F_OK) != 0, "open writes nothing");

    double t0 = wall_now();
    dd_heartbeat_write(hb, 5, 2, "checkpoint");
    double t1 = wall_now();
    cJSON *j = read_hb(p);
    REQUIRE(j != NULL, "the heartbeat is one line of JSON");
    CHECK(jnum(j, "pid") == (double)getpid() && jnum(j, "step") == 5 && jnum(j, "epoch") == 2 &&
              jnum(j, "world_size") == 3 && jnum(j, "step_s") == 0 && strcmp(jstr(j, "state"), "checkpoint") == 0,
          "pid %g step %g epoch %g world %g step_s %g state %s", jnum(j, "pid"), jnum(j, "step"), jnum(j, "epoch"),
          jnum(j, "world_size"), jnum(j, "step_s"), jstr(j, "state"));
    /* written with microseconds: within the two readings around the write */
    CHECK(jnum(j, "time") >= t0 - 1e-6 && jnum(j, "time") <= t1 + 1e-6, "time %.6f not in [%.6f, %.6f]",
          jnum(j, "time"), t0, t1);
    cJSON_Delete(j);
    dd_heartbeat_final(hb, "done");
    j = read_hb(p);
    CHECK(j && jnum(j, "step") == 5 && strcmp(jstr(j, "state"), "done") == 0, "final keeps the position");
    cJSON_Delete(j);
    dd_heartbeat_close(&hb);
    CHECK(hb == NULL, "close clears the handle");

    /* a fresh handle: its first step writes at once, "train" with that step's time */
    REQUIRE_OK(dd_heartbeat_open(p, 1, &hb));
    dd_heartbeat_step(hb, 11, 0, 0.25);
    j = read_hb(p);
    CHECK(j && jnum(j, "step") == 11 && jnum(j, "step_s") == 0.25 && strcmp(jstr(j, "state"), "train") == 0,
          "first step written at once");
    cJSON_Delete(j);
    dd_heartbeat_step(hb, 12, 0, 0.75); /* written or not (0.2 s): the mean is recorded */
    dd_heartbeat_final(hb, "preempted");
    j = read_hb(p);
    CHECK(j && jnum(j, "step") == 12 && jnum(j, "step_s") == 0.5 && strcmp(jstr(j, "state"), "preempted") == 0,
          "final: step %g, mean step %g s", j ? jnum(j, "step") : -1, j ? jnum(j, "step_s") : -1);
    cJSON_Delete(j);

    /* states that are not a plain word: the line stays whole, valid JSON */
    char longst[601];
    memset(longst, 's', 600);
    longst[600] = '\0';
    dd_heartbeat_write(hb, 13, 1, longst);
    j = read_hb(p);
    CHECK(j && jnum(j, "step") == 13 && strncmp(jstr(j, "state"), "sss", 3) == 0,
          "a 600-character state: the heartbeat is still one line of JSON");
    cJSON_Delete(j);
    dd_heartbeat_write(hb, 14, 1, "a\"b\\c\nd");
    j = read_hb(p);
    CHECK(j && jnum(j, "step") == 14 && strcmp(jstr(j, "state"), "a_b_c_d") == 0, "quote, backslash, newline: %s",
          j ? jstr(j, "state") : "(invalid JSON)");
    cJSON_Delete(j);
    dd_heartbeat_close(&hb);
    dd_heartbeat_close(&hb); /* twice, and NULL: no-ops */
    dd_heartbeat_close(NULL);
    dd_heartbeat_step(NULL, 1, 1, 1.0);
    dd_heartbeat_write(NULL, 1, 1, "x");
    dd_heartbeat_final(NULL, "x");
    CHECK(dd_test_count_names(dir, ".tmp.") == 0, "%d temporary files left", dd_test_count_names(dir, ".tmp."));
}

/* Writes that fail: the previous heartbeat stays, one warning per handle. */
static void test_write_failures(const char *dir) {
    char p[700], tmp[800];
    snprintf(p, sizeof p, "%s/fail.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid()); /* the writer's temporary file */
    dd_heartbeat *hb = NULL;
    REQUIRE_OK(dd_heartbeat_open(p, 1, &hb));
    dd_heartbeat_write(hb, 1, 0, "train");

    /* 1. a full disk: the temporary file is /dev/full, fclose reports ENOSPC */
    REQUIRE(symlink("/dev/full", tmp) == 0, "symlink %s: %s", tmp, strerror(errno));
    dd_test_warn_start();
    dd_heartbeat_write(hb, 2, 0, "train");
    dd_test_warn_stop();
    cJSON *j = read_hb(p);
    CHECK(j && jnum(j, "step") == 1, "the previous heartbeat stays whole (step %g)", j ? jnum(j, "step") : -1);
    cJSON_Delete(j);
    CHECK(dd_t_nwarn == 1 && strstr(dd_t_warned, "fail.json: cannot write it: ") && strstr(dd_t_warned, strerror(ENOSPC)) &&
              strstr(dd_t_warned, "further failures are not reported"),
          "%d warnings: %s", dd_t_nwarn, dd_t_warned);
    CHECK(access(tmp, F_OK) != 0, "the failed temporary file is removed");

    /* the next write succeeds */
    dd_heartbeat_write(hb, 3, 0, "train");
    j = read_hb(p);
    CHECK(j && jnum(j, "step") == 3, "written again after the failure");
    cJSON_Delete(j);

    /* 2. the temporary file's name taken by a directory: fopen fails; not reported again */
    REQUIRE(mkdir(tmp, 0777) == 0, "mkdir %s: %s", tmp, strerror(errno));
    dd_test_warn_start();
    dd_heartbeat_write(hb, 4, 0, "train");
    dd_test_warn_stop();
    CHECK(dd_t_nwarn == 0, "a second failure of the handle is not reported: %s", dd_t_warned);
    j = read_hb(p);
    CHECK(j && jnum(j, "step") == 3, "the previous heartbeat stays");
    cJSON_Delete(j);
    dd_heartbeat_close(&hb);

    /* a new handle reports it (the directory is not removed: it is not the writer's) */
    REQUIRE_OK(dd_heartbeat_open(p, 1, &hb));
    dd_test_warn_start();
    dd_heartbeat_final(hb, "done");
    dd_test_warn_stop();
    CHECK(dd_t_nwarn == 1 && strstr(dd_t_warned, "fail.json: cannot write it: ") && strstr(dd_t_warned, strerror(EISDIR)),
          "%d warnings: %s", dd_t_nwarn, dd_t_warned);
    struct stat sb;
    CHECK(stat(tmp, &sb) == 0 && S_ISDIR(sb.st_mode), "the directory in the way is left alone");
    REQUIRE(rmdir(tmp) == 0, "rmdir %s: %s", tmp, strerror(errno));
    dd_heartbeat_close(&hb);

    /* 3. the heartbeat replaced by a non-empty directory after open: rename fails */
    REQUIRE_OK(dd_heartbeat_open(p, 1, &hb));
    REQUIRE(unlink(p) == 0 && mkdir(p, 0777) == 0, "replace %s: %s", p, strerror(errno));
    char inner[800];
    snprintf(inner, sizeof inner, "%s/x", p);
    dd_test_write(inner, "x");
    dd_test_warn_start();
    dd_heartbeat_write(hb, 5, 0, "checkpoint");
    dd_test_warn_stop();
    CHECK(dd_t_nwarn == 1 && strstr(dd_t_warned, "fail.json: cannot write it: ") && strstr(dd_t_warned, strerror(EISDIR)),
          "%d warnings: %s", dd_t_nwarn, dd_t_warned);
    CHECK(access(tmp, F_OK) != 0, "the written temporary file is removed after the failed rename");
    char *x = dd_test_read(inner);
    CHECK(x && strcmp(x, "x") == 0, "the directory's content is untouched");
    free(x);
    dd_heartbeat_close(&hb);
    CHECK(dd_test_count_names(dir, ".tmp.") == 0, "%d temporary files left", dd_test_count_names(dir, ".tmp."));
}

int main(void) {
    const char *dir = dd_test_tmpdir();
    test_open_refused(dir);
    test_lines(dir);
    test_write_failures(dir);
    return dd_test_done("test_train_heartbeat");
}
