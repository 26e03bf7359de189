/* Child processes of the commands that start a whole cluster on this machine (ps-local,
 * fed-sim): start this executable with other arguments, end them all. cli.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

pid_t dd_cli_spawn(const char *cmd, char *const *argv, const char *log) {
    pid_t p = fork();
    if (p == 0) {
        if (log) {
            int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
            }
        }
        /* several processes share this machine's cores (ps-local, fed-sim): one kernel
         * thread each unless the user says otherwise (--threads defaults to every owned core) */
        if (!getenv("DD_THREADS")) setenv("DD_THREADS", "1", 1);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "distdpd %s: cannot start %s: %s\n", cmd, argv[1], strerror(errno));
        _exit(127);
    }
    return p;
}

void dd_cli_end_all(pid_t *pid, int n, int grace_ms) {
    for (int i = 0; i < n; i++)
        if (pid[i] > 0) kill(pid[i], SIGTERM);
    for (int t = 0; t < grace_ms / 10; t++) {
        int left = 0;
        for (int i = 0; i < n; i++) {
            if (pid[i] <= 0) continue;
            int s;
            if (waitpid(pid[i], &s, WNOHANG) == pid[i]) pid[i] = 0;
            else left++;
        }
        if (!left) return;
        usleep(10000);
    }
    for (int i = 0; i < n; i++)
        if (pid[i] > 0) {
            kill(pid[i], SIGKILL);
            waitpid(pid[i], NULL, 0);
            pid[i] = 0;
        }
}

void dd_cli_catch_stop(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}
