/* Paths too long for the writers' buffers (found with `make coverage`, docs/testing.md
 * "Coverage"): the refusal says "path too long" before the path. The messages used to be
 * "PATH: path too long", and a path long enough to be refused (4 KiB) fills the 1024-byte
 * error message, so the reason was cut off and the user saw only a path. Checked for
 * dd_train_write_text (every run file), dd_run_write_metrics (a run directory whose
 * metrics.jsonl path does not fit) and dd_net_keygen (a key base name); nothing is
 * written. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "dd_test.h"
#include "distdpd/net.h"
#include "distdpd/train.h"
#include "train/train_internal.h"

/* DIR/ddd...d, `len` characters in all (under a real directory: the prefix exists). */
static void long_path(char *buf, size_t len, const char *dir) {
    int k = snprintf(buf, len + 1, "%s/", dir);
    memset(buf + k, 'd', len - (size_t)k);
    buf[len] = '\0';
}

int main(void) {
    const char *dir = dd_test_tmpdir();
    char want[600];
    snprintf(want, sizeof want, "path too long: %s/ddd", dir);
    static char p[4400];

    long_path(p, 4200, dir); /* its temporary name passes DD_TRAIN_PATH_MAX + 64 whatever the pid */
    CHECK_ERR(dd_train_write_text(p, "x", 1), DD_ERR_ARG, want);

    dd_train_cfg cfg;
    dd_train_cfg_default(&cfg, DD_TRAIN_PA);
    long_path(p, 4120, dir); /* + "/metrics.jsonl" passes DD_TRAIN_PATH_MAX + 32 */
    CHECK_ERR(dd_run_write_metrics(p, &cfg, 10, NULL, 0), DD_ERR_ARG, want);

    if (zmq_has("curve")) {
        long_path(p, 4088, dir); /* + ".key" fits 4096, its temporary name does not */
        char pub[DD_NET_KEY_Z85 + 1];
        CHECK_ERR(dd_net_keygen(p, 0, pub), DD_ERR_IO, want);
    } else {
        printf("note: this libzmq has no CURVE: dd_net_keygen not checked\n");
    }
    /* nothing was written */
    char ls[700];
    snprintf(ls, sizeof ls, "%s", dir);
    int n = 0;
    DIR *d = opendir(ls);
    REQUIRE(d != NULL, "opendir %s", ls);
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    CHECK(n == 0, "%d files written", n);
    return dd_test_done("test_long_paths");
}
