/* The run driver's background checkpoint writer (src/train/ckpt_async.c, train_internal.h
 * dd_ckpt_async) through its error paths, the ones `make coverage` showed untested
 * (docs/testing.md "Coverage"), with real files and real threads only:
 * - --keep-last rotation: step files committed by the writer thread, last.ckpt a hard
 *   link to the newest (same inode), all but the newest `keep` step files removed, files
 *   that only look like step files left alone, no temporary file left;
 * - the link to last.ckpt refused (its directory missing; a non-empty directory in its
 *   place): DD_ERR_IO at the join naming last.ckpt and the cause, the step file written,
 *   the previous last.ckpt (or the directory) untouched, no temporary file left, the
 *   error reported once;
 * - the first writer of a job failing (its directory missing): the second writer is
 *   dropped unwritten, the previous checkpoint at its path still the old one;
 * - a submit while the previous job failed: that error returned, the new job discarded
 *   (nothing written, its writers freed: ASan / valgrind), the next submit works;
 * - pruning that cannot list its directory or remove an old step file (a non-empty
 *   directory of that name): a warning naming it, the checkpoint itself fine;
 * - synchronous mode (the job done inside submit), destroy with a failed job in flight,
 *   the NULL-argument refusals. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dd_test.h"
#include "distdpd/ckpt.h"
#include "train/train_internal.h"

/* ROOT/name created, its path in ck. */
static void sub_dir(char *ck, size_t cap, const char *root, const char *name) {
    snprintf(ck, cap, "%s/%s", root, name);
    REQUIRE(mkdir(ck, 0777) == 0, "mkdir %s: %s", ck, strerror(errno));
}

/* A writer for path holding one section "step" = step; NULL on failure (checked). */
static dd_ckpt_writer *writer(const char *path, uint64_t step) {
    dd_ckpt_writer *w = NULL;
    if (dd_ckpt_write_begin(path, &w) != DD_OK) return NULL;
    if (dd_ckpt_add_u64(w, "step", step) != DD_OK) dd_ckpt_abort(&w);
    return w;
}

/* The "step" of the checkpoint at path (verified by dd_ckpt_open); -1 if it fails. */
static long ckpt_step(const char *path) {
    dd_ckpt_reader *r = NULL;
    if (dd_ckpt_open(path, &r) != DD_OK) return -1;
    uint64_t v = 0;
    long s = dd_ckpt_get_u64(r, "step", &v) == DD_OK ? (long)v : -1;
    dd_ckpt_close(&r);
    return s;
}

static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* A job of the run driver's --keep-last form: DIR/step-NNNNNNNNNN.ckpt, linked to
 * link_to, DIR pruned to `keep`; best (may be NULL) written first, like best.ckpt. */
static void step_job(dd_ckpt_job *job, const char *dir, uint64_t step, const char *best, const char *link_to,
                     const char *prune_dir, size_t keep) {
    memset(job, 0, sizeof *job);
    char p[700];
    if (best) job->w[job->nw++] = writer(best, step);
    snprintf(p, sizeof p, "%s/step-%010llu.ckpt", dir, (unsigned long long)step);
    job->w[job->nw++] = writer(p, step);
    for (int i = 0; i < job->nw; i++) REQUIRE(job->w[i] != NULL, "writer %d: %s", i, dd_last_error());
    if (link_to) snprintf(job->link_to, sizeof job->link_to, "%s", link_to);
    if (prune_dir) snprintf(job->prune_dir, sizeof job->prune_dir, "%s", prune_dir);
    job->keep = keep;
    job->tag = (long)step;
}

/* Rotation of 6 step checkpoints, keep 2, in the writer thread. */
static void test_keep_last(const char *root) {
    char ck[560], last[700], best[700], p[800];
    sub_dir(ck, sizeof ck, root, "rot");
    snprintf(last, sizeof last, "%s/last.ckpt", ck);
    snprintf(best, sizeof best, "%s/best.ckpt", ck);
    /* names the pruner must not touch: too few digits, a letter, another suffix */
    static const char *const strangers[] = {"step-12.ckpt", "step-000000000a.ckpt", "step-0000000001.ckpt.bak",
                                            "notes.txt"};
    for (size_t i = 0; i < sizeof strangers / sizeof strangers[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", ck, strangers[i]);
        dd_test_write(p, "x");
    }
    dd_ckpt_async *a = NULL;
    REQUIRE_OK(dd_ckpt_async_create(0, &a));
    for (uint64_t s = 1; s <= 6; s++) {
        dd_ckpt_job job;
        step_job(&job, ck, s, s % 2 ? best : NULL, last, ck, 2);
        CHECK_OK(dd_ckpt_async_submit(a, &job));
        CHECK(job.nw == 0 && job.w[0] == NULL, "the submitted job was taken over (nw %d)", job.nw);
        double wait_s = -1, write_s = NAN;
        long tag = -2;
        CHECK_OK(dd_ckpt_async_join(a, &wait_s, &write_s, &tag));
        CHECK(tag == (long)s && wait_s >= 0 && write_s >= 0, "step %llu: tag %ld, wait %g s, write %g s",
              (unsigned long long)s, tag, wait_s, write_s);
        /* a second join has nothing to report */
        CHECK_OK(dd_ckpt_async_join(a, &wait_s, &write_s, &tag));
        CHECK(tag == -1 && isnan(write_s) && wait_s >= 0, "second join: tag %ld, write %g", tag, write_s);
        CHECK(ckpt_step(last) == (long)s, "last.ckpt holds step %ld, want %llu", ckpt_step(last), (unsigned long long)s);
    }
    dd_ckpt_async_destroy(&a);
    CHECK(a == NULL, "destroy clears the handle");
    CHECK(dd_test_count_names(ck, "step-") == 2 + 3, "%d step-like names, want the newest 2 + 3 strangers",
          dd_test_count_names(ck, "step-"));
    for (uint64_t s = 1; s <= 6; s++) {
        snprintf(p, sizeof p, "%s/step-%010llu.ckpt", ck, (unsigned long long)s);
        CHECK(exists(p) == (s >= 5), "step %llu: exists %d", (unsigned long long)s, exists(p));
    }
    for (size_t i = 0; i < sizeof strangers / sizeof strangers[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", ck, strangers[i]);
        CHECK(exists(p), "%s was removed", strangers[i]);
    }
    struct stat sl, s6;
    snprintf(p, sizeof p, "%s/step-%010d.ckpt", ck, 6);
    CHECK(stat(last, &sl) == 0 && stat(p, &s6) == 0 && sl.st_ino == s6.st_ino && sl.st_nlink == 2,
          "last.ckpt is a hard link to step 6 (inodes %lu / %lu, %lu links)", (unsigned long)sl.st_ino,
          (unsigned long)s6.st_ino, (unsigned long)sl.st_nlink);
    CHECK(ckpt_step(best) == 5, "best.ckpt holds step %ld, want 5", ckpt_step(best));
    CHECK(dd_test_count_names(ck, ".tmp.") == 0, "%d temporary files left", dd_test_count_names(ck, ".tmp."));
}

/* The link over last.ckpt refused: its directory missing, then a non-empty directory in
 * its place. */
static void test_link_refused(const char *root) {
    char ck[560], last[700], p[800];
    sub_dir(ck, sizeof ck, root, "link");
    dd_ckpt_async *a = NULL;
    REQUIRE_OK(dd_ckpt_async_create(0, &a));

    /* 1. link_to's directory does not exist: link(2) gives ENOENT */
    snprintf(last, sizeof last, "%s/gone/last.ckpt", ck);
    dd_ckpt_job job;
    step_job(&job, ck, 1, NULL, last, NULL, 0);
    CHECK_OK(dd_ckpt_async_submit(a, &job)); /* the error comes at the join */
    long tag = -2;
    CHECK_ERR(dd_ckpt_async_join(a, NULL, NULL, &tag), DD_ERR_IO, "gone/last.ckpt: cannot link it to ");
    CHECK(strstr(dd_last_error(), "step-0000000001.ckpt") && strstr(dd_last_error(), strerror(ENOENT)) &&
              strstr(dd_last_error(), "the previous ") && strstr(dd_last_error(), "is untouched"),
          "message: %s", dd_last_error());
    CHECK(tag == 1, "the failed job's tag: %ld", tag);
    CHECK_OK(dd_ckpt_async_join(a, NULL, NULL, &tag)); /* reported once */
    snprintf(p, sizeof p, "%s/step-0000000001.ckpt", ck);
    CHECK(ckpt_step(p) == 1, "the step file was committed before the link: %ld", ckpt_step(p));

    /* 2. a non-empty directory where last.ckpt goes: rename(2) refuses (EISDIR) */
    snprintf(last, sizeof last, "%s/last.ckpt", ck);
    REQUIRE(mkdir(last, 0777) == 0, "mkdir %s: %s", last, strerror(errno));
    snprintf(p, sizeof p, "%s/keep.txt", last);
    dd_test_write(p, "keep me");
    step_job(&job, ck, 2, NULL, last, NULL, 0);
    CHECK_OK(dd_ckpt_async_submit(a, &job));
    CHECK_ERR(dd_ckpt_async_join(a, NULL, NULL, NULL), DD_ERR_IO, "link/last.ckpt: cannot rename ");
    CHECK(strstr(dd_last_error(), strerror(EISDIR)) && strstr(dd_last_error(), "the previous file is untouched"),
          "message: %s", dd_last_error());
    char *keep = dd_test_read(p);
    CHECK(keep && strcmp(keep, "keep me") == 0, "the directory's file: %s", keep ? keep : "(gone)");
    free(keep);
    CHECK(dd_test_count_names(ck, ".tmp.") == 0, "%d temporary files left (the link's is removed)",
          dd_test_count_names(ck, ".tmp."));
    dd_ckpt_async_destroy(&a);
}

/* The first writer of a job fails: the second is dropped; then a submit while that
 * failure is unjoined: the error returned, the new job discarded. */
static void test_failed_job(const char *root) {
    char ck[560], last[700], best[700], p[800];
    sub_dir(ck, sizeof ck, root, "fail");
    snprintf(last, sizeof last, "%s/last.ckpt", ck);
    snprintf(best, sizeof best, "%s/gone/best.ckpt", ck);
    dd_ckpt_async *a = NULL;
    REQUIRE_OK(dd_ckpt_async_create(0, &a));
    /* the previous checkpoint at last.ckpt: step 1 */
    dd_ckpt_job job;
    memset(&job, 0, sizeof job);
    job.w[job.nw++] = writer(last, 1);
    REQUIRE(job.w[0] != NULL, "writer: %s", dd_last_error());
    CHECK_OK(dd_ckpt_async_submit(a, &job));
    CHECK_OK(dd_ckpt_async_join(a, NULL, NULL, NULL));

    /* best.ckpt (first) into a missing directory, last.ckpt second */
    memset(&job, 0, sizeof job);
    job.w[job.nw++] = writer(best, 2);
    job.w[job.nw++] = writer(last, 2);
    REQUIRE(job.w[0] && job.w[1], "writers: %s", dd_last_error());
    job.tag = 7;
    CHECK_OK(dd_ckpt_async_submit(a, &job));
    long tag = -2;
    CHECK_ERR(dd_ckpt_async_join(a, NULL, NULL, &tag), DD_ERR_IO, "gone/best.ckpt': cannot create temporary file");
    CHECK(tag == 7, "tag %ld", tag);
    CHECK(ckpt_step(last) == 1, "last.ckpt holds step %ld: the second writer must be dropped", ckpt_step(last));

    /* the same failure, not joined before the next submit */
    memset(&job, 0, sizeof job);
    job.w[job.nw++] = writer(best, 3);
    REQUIRE(job.w[0] != NULL, "writer: %s", dd_last_error());
    CHECK_OK(dd_ckpt_async_submit(a, &job));
    snprintf(p, sizeof p, "%s/next.ckpt", ck);
    dd_ckpt_job next;
    memset(&next, 0, sizeof next);
    next.w[next.nw++] = writer(p, 4);
    REQUIRE(next.w[0] != NULL, "writer: %s", dd_last_error());
    CHECK_ERR(dd_ckpt_async_submit(a, &next), DD_ERR_IO, "gone/best.ckpt': cannot create temporary file");
    CHECK(next.nw == 0 && next.w[0] == NULL, "the discarded job's writers are freed (nw %d)", next.nw);
    CHECK(!exists(p), "the discarded job wrote %s", p);
    /* the error was taken by that submit: the next one works */
    next.w[next.nw++] = writer(p, 5);
    REQUIRE(next.w[0] != NULL, "writer: %s", dd_last_error());
    CHECK_OK(dd_ckpt_async_submit(a, &next));
    CHECK_OK(dd_ckpt_async_join(a, NULL, NULL, NULL));
    CHECK(ckpt_step(p) == 5, "next.ckpt holds step %ld", ckpt_step(p));

    /* destroy with a failed job in flight: joined, the error dropped, nothing leaked */
    memset(&job, 0, sizeof job);
    job.w[job.nw++] = writer(best, 6);
    job.w[job.nw++] = writer(last, 6);
    REQUIRE(job.w[0] && job.w[1], "writers: %s", dd_last_error());
    CHECK_OK(dd_ckpt_async_submit(a, &job));
    dd_ckpt_async_destroy(&a);
    CHECK(ckpt_step(last) == 1, "last.ckpt holds step %ld after destroy", ckpt_step(last));
    CHECK(dd_test_count_names(ck, ".tmp.") == 0, "%d temporary files left", dd_test_count_names(ck, ".tmp."));
}

/* Pruning that cannot list its directory, or cannot remove an old step file. */
static void test_prune_refused(const char *root) {
    char ck[560], last[700], p[800];
    sub_dir(ck, sizeof ck, root, "prune");
    snprintf(last, sizeof last, "%s/last.ckpt", ck);
    dd_ckpt_async *a = NULL;
    REQUIRE_OK(dd_ckpt_async_create(1, &a)); /* synchronous: done inside submit */

    /* 1. the prune directory does not exist */
    char gone[800];
    snprintf(gone, sizeof gone, "%s/gone", ck);
    dd_ckpt_job job;
    step_job(&job, ck, 1, NULL, last, gone, 1);
    dd_test_warn_start();
    CHECK_OK(dd_ckpt_async_submit(a, &job));
    CHECK(ckpt_step(last) == 1, "synchronous: last.ckpt written inside submit (%ld)", ckpt_step(last));
    double write_s = NAN;
    long tag = -2;
    CHECK_OK(dd_ckpt_async_join(a, NULL, &write_s, &tag));
    dd_test_warn_stop();
    CHECK(tag == 1 && write_s >= 0, "tag %ld, write %g s", tag, write_s);
    CHECK(dd_t_nwarn == 1 && strstr(dd_t_warned, "prune/gone: cannot list it to remove old checkpoints: ") &&
              strstr(dd_t_warned, strerror(ENOENT)),
          "%d warnings: %s", dd_t_nwarn, dd_t_warned);

    /* 2. an old "step file" that is a non-empty directory: unlink(2) refuses */
    snprintf(p, sizeof p, "%s/step-0000000000.ckpt", ck);
    REQUIRE(mkdir(p, 0777) == 0, "mkdir %s: %s", p, strerror(errno));
    snprintf(p, sizeof p, "%s/step-0000000000.ckpt/x", ck);
    dd_test_write(p, "x");
    step_job(&job, ck, 2, NULL, last, ck, 1);
    dd_test_warn_start();
    CHECK_OK(dd_ckpt_async_submit(a, &job));
    CHECK_OK(dd_ckpt_async_join(a, NULL, NULL, NULL));
    dd_test_warn_stop();
    CHECK(dd_t_nwarn == 1 && strstr(dd_t_warned, "step-0000000000.ckpt: cannot remove this old checkpoint (--keep-last): "),
          "%d warnings: %s", dd_t_nwarn, dd_t_warned);
    CHECK(exists(p), "the directory's file is kept");
    snprintf(p, sizeof p, "%s/step-0000000001.ckpt", ck);
    CHECK(!exists(p), "step 1 is pruned (keep 1) past the one that cannot be");
    CHECK(ckpt_step(last) == 2, "last.ckpt holds step %ld", ckpt_step(last));
    dd_ckpt_async_destroy(&a);
}

static void test_args(void) {
    CHECK_ERR(dd_ckpt_async_create(0, NULL), DD_ERR_ARG, "dd_ckpt_async_create: NULL output");
    dd_ckpt_async *a = NULL;
    REQUIRE_OK(dd_ckpt_async_create(0, &a));
    CHECK_ERR(dd_ckpt_async_submit(a, NULL), DD_ERR_ARG, "dd_ckpt_async_submit: NULL argument");
    dd_ckpt_job job;
    memset(&job, 0, sizeof job);
    CHECK_ERR(dd_ckpt_async_submit(NULL, &job), DD_ERR_ARG, "dd_ckpt_async_submit: NULL argument");
    /* an empty job: nothing written, OK */
    CHECK_OK(dd_ckpt_async_submit(a, &job));
    CHECK_OK(dd_ckpt_async_join(a, NULL, NULL, NULL));
    double wait_s = -1, write_s = 0;
    long tag = 0;
    CHECK_OK(dd_ckpt_async_join(NULL, &wait_s, &write_s, &tag));
    CHECK(wait_s == 0 && isnan(write_s) && tag == -1, "join(NULL): wait %g, write %g, tag %ld", wait_s, write_s, tag);
    dd_ckpt_async_destroy(&a);
    dd_ckpt_async_destroy(&a); /* twice: a no-op */
    dd_ckpt_async_destroy(NULL);
    dd_ckpt_job_abort(NULL);
}

int main(void) {
    const char *root = dd_test_tmpdir();
    test_args();
    test_keep_last(root);
    test_link_refused(root);
    test_failed_job(root);
    test_prune_refused(root);
    return dd_test_done("test_ckpt_async");
}
