/* Runs a command and reports its peak resident set size (the largest of the process and
 * its waited-for descendants, from wait4's rusage) and wall time, so the benchmarks need
 * no /usr/bin/time. The child's own output passes through.
 *
 * Usage: maxrss OUT.json COMMAND [ARGS...]
 * Writes {"maxrss_kb": N, "wall_s": S, "status": EXIT} to OUT.json and exits with the
 * command's status (128 + signal if it was killed). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: maxrss OUT.json COMMAND [ARGS...]\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("maxrss: fork");
        return 1;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror("maxrss: exec");
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) {
        perror("maxrss: wait4");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror("maxrss: output");
        return 1;
    }
    fprintf(f, "{\"maxrss_kb\": %ld, \"wall_s\": %.3f, \"status\": %d}\n", ru.ru_maxrss,
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), code);
    fclose(f);
    return code;
}
