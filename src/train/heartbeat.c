/* The heartbeat file of a training run (train.h dd_heartbeat): one line of JSON that rank
 * 0 rewrites after steps (at most every 0.2 s), after checkpoints and at exit, so that a
 * supervisor (distdpd launch) can tell a live job from a hung one by its "time". Written
 * to a temporary file and renamed over the path (atomic, no fsync: a heartbeat lost in a
 * crash does not matter, a torn one would). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "distdpd/train.h"
#include "train_internal.h"

#define HB_PERIOD_S 0.2 /* at most one "train" write per this many seconds */

struct dd_heartbeat {
    char path[DD_TRAIN_PATH_MAX];
    char tmp[DD_TRAIN_PATH_MAX + 32];
    int world_size;
    uint64_t step;     /* last position recorded */
    int epoch;
    uint64_t nsteps;   /* steps of this process */
    double step_sum;   /* their wall time */
    double last_write; /* dd_now() of the last write; < 0: none yet */
    int warned;        /* a failed write was reported */
};

dd_status dd_heartbeat_open(const char *path, int world_size, dd_heartbeat **out) {
    if (!out) return dd_error(DD_ERR_ARG, "dd_heartbeat_open: NULL output");
    *out = NULL;
    if (!path || !*path) return dd_error(DD_ERR_ARG, "heartbeat file: empty path");
    if (strlen(path) >= DD_TRAIN_PATH_MAX) /* the reason first: the path fills the message */
        return dd_error(DD_ERR_ARG, "heartbeat file: path too long (%zu bytes, at most %d): %s", strlen(path),
                        DD_TRAIN_PATH_MAX - 1, path);
    char dir[DD_TRAIN_PATH_MAX];
    dd_path_dir(path, dir, sizeof dir);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return dd_error(DD_ERR_IO, "heartbeat file %s: its directory %s does not exist", path, dir);
    if (!S_ISDIR(sb.st_mode)) return dd_error(DD_ERR_IO, "heartbeat file %s: %s is not a directory", path, dir);
    if (access(dir, W_OK) != 0)
        return dd_error(DD_ERR_IO, "heartbeat file %s: cannot write into %s: %s", path, dir, strerror(errno));
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return dd_error(DD_ERR_IO, "heartbeat file %s: is a directory", path);
    dd_heartbeat *hb = calloc(1, sizeof *hb);
    if (!hb) return dd_error(DD_ERR_NOMEM, "out of memory");
    snprintf(hb->path, sizeof hb->path, "%s", path);
    snprintf(hb->tmp, sizeof hb->tmp, "%s.tmp.%ld", path, (long)getpid());
    hb->world_size = world_size;
    hb->last_write = -1.0;
    *out = hb;
    return DD_OK;
}

/* The state as written: letters, digits, '_' and '-' (others become '_': the line stays
 * valid JSON), at most HB_STATE_MAX characters (the line fits its buffer). */
#define HB_STATE_MAX 31
static void hb_state(const char *state, char out[HB_STATE_MAX + 1]) {
    size_t i = 0;
    for (; state && state[i] && i < HB_STATE_MAX; i++) {
        const char c = state[i];
        const int word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
        out[i] = word ? c : '_';
    }
    out[i] = '\0';
}

static void hb_write(dd_heartbeat *hb, const char *state_in) {
    char state[HB_STATE_MAX + 1];
    hb_state(state_in, state);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    double step_s = hb->nsteps ? hb->step_sum / (double)hb->nsteps : 0.0;
    char line[512];
    int n = snprintf(line, sizeof line,
                     "{\"pid\":%ld,\"step\":%llu,\"epoch\":%d,\"time\":%.6f,\"step_s\":%.9g,\"world_size\":%d,"
                     "\"state\":\"%s\"}\n",
                     (long)getpid(), (unsigned long long)hb->step, hb->epoch, now, step_s, hb->world_size, state);
    hb->last_write = dd_now();
    FILE *f = fopen(hb->tmp, "wb");
    int ok = f != NULL;
    int e = errno;
    if (f) {
        ok = fwrite(line, 1, (size_t)n, f) == (size_t)n;
        e = errno;
        if (fclose(f) != 0 && ok) {
            ok = 0;
            e = errno;
        }
    }
    if (ok && rename(hb->tmp, hb->path) != 0) {
        ok = 0;
        e = errno;
    }
    if (ok) return;
    if (f) unlink(hb->tmp);
    if (!hb->warned)
        dd_log(DD_LOG_WARN, "heartbeat file %s: cannot write it: %s (further failures are not reported)", hb->path,
               strerror(e));
    hb->warned = 1;
}

void dd_heartbeat_step(dd_heartbeat *hb, uint64_t step, int epoch, double step_s) {
    if (!hb) return;
    hb->step = step;
    hb->epoch = epoch;
    hb->nsteps++;
    hb->step_sum += step_s;
    if (hb->last_write < 0 || dd_now() - hb->last_write >= HB_PERIOD_S) hb_write(hb, "train");
}

void dd_heartbeat_write(dd_heartbeat *hb, uint64_t step, int epoch, const char *state) {
    if (!hb) return;
    hb->step = step;
    hb->epoch = epoch;
    hb_write(hb, state);
}

void dd_heartbeat_final(dd_heartbeat *hb, const char *state) {
    if (hb) hb_write(hb, state);
}

void dd_heartbeat_close(dd_heartbeat **hb) {
    if (!hb || !*hb) return;
    free(*hb);
    *hb = NULL;
}
