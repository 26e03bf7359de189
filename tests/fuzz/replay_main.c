/* Replays files through a libFuzzer harness without libFuzzer: the `fuzz_replay_<target>`
 * tests of the ordinary build (label unit; under ASan + UBSan in `make asan-test`) run
 * each tests/fuzz/fuzz_<target>.c over its seed corpus tests/fuzz/corpus/<target>/ and
 * the inputs of the defects fuzzing found, tests/fuzz/regress/<target>/ (docs/testing.md).
 * Usage: replay_<target> DIR_OR_FILE...   Exit 0 when every input ran (a finding aborts). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return -1;
    }
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || n < 0 || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int count = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) continue; /* an absent regress/ directory */
        if (!S_ISDIR(sb.st_mode)) {
            bad |= run_file(argv[i]) != 0;
            count++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) continue;
        char **names = NULL;
        size_t nn = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char **q = realloc(names, (nn + 1) * sizeof *names);
            if (!q) abort();
            names = q;
            names[nn] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            if (!names[nn]) abort();
            sprintf(names[nn], "%s/%s", argv[i], e->d_name);
            nn++;
        }
        closedir(d);
        qsort(names, nn, sizeof *names, cmp);
        for (size_t k = 0; k < nn; k++) {
            bad |= run_file(names[k]) != 0;
            count++;
            free(names[k]);
        }
        free(names);
    }
    printf("%s: %d inputs replayed\n", argv[0], count);
    return bad || count == 0 ? 1 : 0;
}
