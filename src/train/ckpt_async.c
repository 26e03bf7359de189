/* Background checkpoint writing for the run driver (train_internal.h dd_ckpt_async): the
 * step loop takes a snapshot (dd_trainer_snapshot copies every section into memory) and
 * hands it to a thread that commits it (temporary file, fsync, rename, directory fsync),
 * links last.ckpt to it and prunes old step files. One job at a time: the next save
 * joins the previous one first, so memory holds at most the trainer, one snapshot being
 * written and one being taken. A failed write is reported at the next join; since the
 * rename never happened, the previous checkpoint at the path stays valid. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

struct dd_ckpt_async {
    int sync;          /* run jobs inside submit */
    int running;       /* a thread was started and not joined */
    pthread_t th;
    dd_ckpt_job job;   /* the job in flight (or just run, sync) */
    int done;          /* a finished job's results below are not yet joined */
    dd_status st;      /* its result */
    char msg[1024];    /* its error message */
    double write_s;    /* its seconds */
};

void dd_ckpt_job_abort(dd_ckpt_job *job) {
    if (!job) return;
    for (int i = 0; i < job->nw; i++) dd_ckpt_abort(&job->w[i]);
    job->nw = 0;
}

/* fsync of a directory (EINVAL/EBADF/EACCES ignored as in dd_ckpt_write_commit). */
static dd_status sync_dir(const char *dir, const char *what) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == EACCES) return DD_OK;
        return dd_error(DD_ERR_IO, "%s: cannot open its directory %s to fsync it: %s", what, dir, strerror(errno));
    }
    int rc = fsync(dfd), e = errno;
    close(dfd);
    if (rc != 0 && e != EINVAL && e != EBADF)
        return dd_error(DD_ERR_IO, "%s: fsync of its directory %s failed: %s", what, dir, strerror(e));
    return DD_OK;
}

/* link_to becomes a hard link to target, atomically: a link under a temporary name in
 * link_to's directory, renamed over link_to. */
static dd_status link_over(const char *target, const char *link_to) {
    static unsigned counter = 1000000000u; /* digits only: the stale-file sweep knows the pattern */
    char tmp[DD_TRAIN_PATH_MAX + 96];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", link_to, (long)getpid(), counter++);
    unlink(tmp);
    if (link(target, tmp) != 0)
        return dd_error(DD_ERR_IO, "%s: cannot link it to %s (as %s): %s; the previous %s is untouched", link_to, target,
                        tmp, strerror(errno), link_to);
    if (rename(tmp, link_to) != 0) {
        int e = errno;
        unlink(tmp);
        return dd_error(DD_ERR_IO, "%s: cannot rename %s over it: %s; the previous file is untouched", link_to, tmp,
                        strerror(e));
    }
    char dir[DD_TRAIN_PATH_MAX + 32];
    dd_path_dir(link_to, dir, sizeof dir);
    return sync_dir(dir, link_to);
}

/* step-NNNNNNNNNN.ckpt exactly (10 digits). */
static int is_step_file(const char *nm) {
    if (strncmp(nm, "step-", 5) != 0) return 0;
    for (int i = 5; i < 15; i++)
        if (nm[i] < '0' || nm[i] > '9') return 0;
    return strcmp(nm + 15, ".ckpt") == 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Removes all but the newest `keep` step files of dir (the names sort by step). A file
 * that cannot be removed is logged, not an error: the checkpoints are complete. */
static void prune(const char *dir, size_t keep) {
    DIR *d = opendir(dir);
    if (!d) {
        dd_log(DD_LOG_WARN, "%s: cannot list it to remove old checkpoints: %s", dir, strerror(errno));
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_step_file(e->d_name)) continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) break;
            names = nn;
            cap = nc;
        }
        names[n] = strdup(e->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    if (n > keep) {
        qsort(names, n, sizeof *names, cmp_names);
        for (size_t i = 0; i + keep < n; i++) {
            char p[DD_TRAIN_PATH_MAX + 64];
            snprintf(p, sizeof p, "%s/%s", dir, names[i]);
            if (unlink(p) != 0 && errno != ENOENT)
                dd_log(DD_LOG_WARN, "%s: cannot remove this old checkpoint (--keep-last): %s", p, strerror(errno));
        }
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Runs a job: stops at the first failure (later writers are dropped). */
static void run_job(dd_ckpt_async *a) {
    dd_ckpt_job *job = &a->job;
    double t0 = dd_now();
    dd_status st = DD_OK;
    char last_path[DD_TRAIN_PATH_MAX + 32] = "";
    for (int i = 0; i < job->nw; i++) {
        if (st != DD_OK) {
            dd_ckpt_abort(&job->w[i]);
            continue;
        }
        /* the writer's path, for the link, before commit frees it */
        if (i == job->nw - 1) snprintf(last_path, sizeof last_path, "%s", dd_ckpt_writer_path(job->w[i]));
        st = dd_ckpt_write_commit(&job->w[i]);
    }
    job->nw = 0;
    if (st == DD_OK && job->link_to[0] && last_path[0]) st = link_over(last_path, job->link_to);
    if (st == DD_OK && job->prune_dir[0] && job->keep > 0) prune(job->prune_dir, job->keep);
    a->st = st;
    if (st != DD_OK)
        snprintf(a->msg, sizeof a->msg, "%s", dd_last_error());
    else
        a->msg[0] = '\0';
    a->write_s = dd_now() - t0;
    a->done = 1;
}

static void *thread_main(void *arg) {
    run_job(arg);
    return NULL;
}

dd_status dd_ckpt_async_create(int sync, dd_ckpt_async **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_ckpt_async_create: NULL output");
    *out = calloc(1, sizeof **out);
    if (!*out) return dd_error(DD_ERR_NOMEM, "out of memory");
    (*out)->sync = sync;
    return DD_OK;
}

dd_status dd_ckpt_async_join(dd_ckpt_async *a, double *wait_s, double *write_s, long *tag) {
    if (wait_s) *wait_s = 0.0;
    if (write_s) *write_s = NAN;
    if (tag) *tag = -1;
    if (!a) return DD_OK;
    double t0 = dd_now();
    if (a->running) {
        pthread_join(a->th, NULL);
        a->running = 0;
    }
    if (wait_s) *wait_s = dd_now() - t0;
    if (!a->done) return DD_OK;
    a->done = 0;
    if (write_s) *write_s = a->write_s;
    if (tag) *tag = a->job.tag;
    if (a->st != DD_OK) {
        dd_status st = a->st;
        a->st = DD_OK;
        return dd_error(st, "%s", a->msg);
    }
    return DD_OK;
}

dd_status dd_ckpt_async_submit(dd_ckpt_async *a, dd_ckpt_job *job) {
    if (!a || !job) return dd_error(DD_ERR_ARG, "dd_ckpt_async_submit: NULL argument");
    dd_status st = dd_ckpt_async_join(a, NULL, NULL, NULL);
    if (st != DD_OK) {
        dd_ckpt_job_abort(job);
        return st;
    }
    a->job = *job;
    memset(job, 0, sizeof *job);
    a->done = 0;
    if (a->sync) {
        run_job(a);
        return DD_OK;
    }
    int rc = pthread_create(&a->th, NULL, thread_main, a);
    if (rc != 0) { /* no thread: write here (slower, but the checkpoint is written) */
        dd_log(DD_LOG_WARN, "cannot start the checkpoint writer thread (%s): writing in the step loop", strerror(rc));
        run_job(a);
        return DD_OK;
    }
    a->running = 1;
    return DD_OK;
}

void dd_ckpt_async_destroy(dd_ckpt_async **a) {
    if (!a || !*a) return;
    (void)dd_ckpt_async_join(*a, NULL, NULL, NULL);
    dd_ckpt_job_abort(&(*a)->job);
    free(*a);
    *a = NULL;
}
