/* The file readers every loader goes through (src/data/fileio.c, data_internal.h):
 * dd_open_regular / dd_read_all / dd_read_text refuse what is not a regular file (a
 * directory, a FIFO: at once, no hang) and a file over its limit with the exact message;
 * dd_lines gives every line before a bad one unchanged (LF, CRLF, lone CR, a last line
 * without terminator) and then stops at a NUL byte or a line over DD_LINE_MAX naming
 * file and line; dd_read_text (core.c) refuses a FIFO, a device, a directory. These were
 * error paths `make coverage` showed untested (and the FIFO hung dd_read_text). */
#include <errno.h>
#include <sys/stat.h>

#include "data/data_internal.h"
#include "dd_test.h"
#include "distdpd/plan.h"
#include "distdpd/export.h"

static char dir[512];

static void path_of(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

static void write_raw(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "write %s", path);
}

static void test_not_regular(void) {
    char want[700], fifo[600], *buf = (char *)&buf;
    size_t len = 7;
    snprintf(want, sizeof want, "cannot read %s: Is a directory", dir);
    CHECK_ERR(dd_read_all(dir, 100, &buf, &len), DD_ERR_IO, want);
    CHECK(buf == NULL && len == 0, "nothing returned for a directory");
    path_of(fifo, sizeof fifo, "fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    snprintf(want, sizeof want, "cannot read %s: not a regular file (a FIFO)", fifo);
    CHECK_ERR(dd_read_all(fifo, 100, &buf, &len), DD_ERR_IO, want); /* a FIFO without writer: no wait */
    /* dd_read_text (cluster, allow, plan and configuration files) used to block in open()
     * on a FIFO without a writer: refused at once now */
    char *text = (char *)&text;
    snprintf(want, sizeof want, "cannot read %s: not a regular file (a FIFO)", fifo);
    CHECK_ERR(dd_read_text(fifo, &text, NULL), DD_ERR_IO, want);
    CHECK(text == NULL, "no text on refusal");
    CHECK_ERR(dd_read_text("/dev/zero", &text, NULL), DD_ERR_IO, "cannot read /dev/zero: not a regular file (a character device)");
    snprintf(want, sizeof want, "cannot read %s: Is a directory", dir);
    CHECK_ERR(dd_read_text(dir, &text, NULL), DD_ERR_IO, want);
    snprintf(want, sizeof want, "cannot read %s: not a regular file (a FIFO)", fifo);
    dd_lines r;
    CHECK_ERR(dd_lines_open(&r, fifo), DD_ERR_IO, want);
    CHECK(r.fd == -1, "no descriptor left open");
    CHECK_ERR(dd_read_all("/dev/null", 100, &buf, &len), DD_ERR_IO,
              "cannot read /dev/null: not a regular file (a character device)");
    /* the calibration file of `plan` and the tensors of `import` had their own fopen()
     * readers, which waited for a FIFO's writer: both read through dd_read_text now */
    dd_plan_calib calib;
    CHECK_ERR(dd_plan_calib_load(fifo, &calib), DD_ERR_IO, want);
    dd_tensor_set ts;
    CHECK_ERR(dd_tensors_read(fifo, &ts), DD_ERR_IO, want);
    CHECK(ts.n == 0, "no tensors on refusal");
    path_of(fifo, sizeof fifo, "absent");
    snprintf(want, sizeof want, "cannot open %s: No such file or directory", fifo);
    CHECK_ERR(dd_read_text(fifo, &text, NULL), DD_ERR_IO, want);
}

static void test_limit(void) {
    char p[600], want[700], *buf = NULL;
    size_t len = 0;
    unsigned char data[100];
    for (int i = 0; i < 100; i++) data[i] = (unsigned char)(i * 7 + 1);
    path_of(p, sizeof p, "hundred");
    write_raw(p, data, sizeof data);
    snprintf(want, sizeof want, "%s: file too large: 100 bytes (at most 99)", p);
    CHECK_ERR(dd_read_all(p, 99, &buf, &len), DD_ERR_FORMAT, want);
    CHECK(buf == NULL, "no buffer on refusal");
    CHECK_OK(dd_read_all(p, 100, &buf, &len)); /* exactly at the limit: every byte */
    CHECK(buf && len == 100 && memcmp(buf, data, 100) == 0 && buf[100] == '\0', "100 bytes read back, NUL after");
    dd_free(buf);
}

static void test_lines(void) {
    char p[600], want[700];
    path_of(p, sizeof p, "lines.txt");
    /* LF, CRLF, lone CR, empty line, then a last line without terminator */
    write_raw(p, "a,1\nbb,2\r\nccc\r\rlast", 19);
    static const char *const expect[] = {"a,1", "bb,2", "ccc", "", "last"};
    dd_lines r;
    CHECK_OK(dd_lines_open(&r, p));
    char *line;
    size_t len;
    int got, n = 0;
    while (dd_lines_next(&r, &line, &len, &got) == DD_OK && got) {
        CHECK(n < 5 && len == strlen(expect[n]) && strcmp(line, expect[n]) == 0, "line %d: '%s'", n + 1, line);
        CHECK(r.line == (size_t)n + 1, "line number %zu", r.line);
        n++;
    }
    CHECK(n == 5 && !got, "5 lines, then the end (%d)", n);
    dd_lines_close(&r);
    CHECK(r.fd == -1 && r.buf == NULL, "closed");

    /* a NUL byte on line 3: lines 1 and 2 come out intact, then the refusal */
    write_raw(p, "x\ny\nz\0z\nw\n", 10);
    CHECK_OK(dd_lines_open(&r, p));
    CHECK(dd_lines_next(&r, &line, &len, &got) == DD_OK && got && strcmp(line, "x") == 0, "line 1");
    CHECK(dd_lines_next(&r, &line, &len, &got) == DD_OK && got && strcmp(line, "y") == 0, "line 2");
    snprintf(want, sizeof want, "%s:3: NUL byte in a text file (binary data?)", p);
    CHECK_ERR(dd_lines_next(&r, &line, &len, &got), DD_ERR_FORMAT, want);
    CHECK(!got && line == NULL, "nothing returned with the refusal");
    dd_lines_close(&r);

    /* line 2 longer than DD_LINE_MAX: line 1 intact, then the refusal naming line 2 */
    size_t big = DD_LINE_MAX + 10;
    char *b = malloc(big + 8);
    if (!b) return;
    memcpy(b, "first\n", 6);
    memset(b + 6, 'q', big);
    b[6 + big] = '\n';
    write_raw(p, b, big + 7);
    free(b);
    CHECK_OK(dd_lines_open(&r, p));
    CHECK(dd_lines_next(&r, &line, &len, &got) == DD_OK && got && strcmp(line, "first") == 0, "line 1 before the long one");
    snprintf(want, sizeof want, "%s:2: line longer than %zu bytes (not a text file?)", p, (size_t)DD_LINE_MAX);
    CHECK_ERR(dd_lines_next(&r, &line, &len, &got), DD_ERR_FORMAT, want);
    dd_lines_close(&r);

    /* a line of exactly DD_LINE_MAX - 1 bytes and its LF fit */
    b = malloc(DD_LINE_MAX);
    if (!b) return;
    memset(b, 'r', DD_LINE_MAX - 1);
    b[DD_LINE_MAX - 1] = '\n';
    write_raw(p, b, DD_LINE_MAX);
    free(b);
    CHECK_OK(dd_lines_open(&r, p));
    CHECK(dd_lines_next(&r, &line, &len, &got) == DD_OK && got && len == DD_LINE_MAX - 1, "longest line read (%zu)", len);
    CHECK(dd_lines_next(&r, &line, &len, &got) == DD_OK && !got, "then the end");
    dd_lines_close(&r);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", dd_test_tmpdir());
    test_not_regular();
    test_limit();
    test_lines();
    return dd_test_done("test_fileio");
}
