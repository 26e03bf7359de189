/* Tests for the launcher's decisions (launch.h): Open MPI hostfiles and discovery output
 * with every refusal's message, the world size the slots allow, the newest checkpoint
 * that verifies (a corrupt last.ckpt or step file is passed over, never chosen), and the
 * arguments of a restart (configuration options left out, --out becomes --resume). */
#include <string.h>
#include <sys/stat.h>

#include "dd_test.h"
#include "distdpd/ckpt.h"
#include "distdpd/launch.h"

static char g_dir[512];

static void test_hostfile(void) {
    char p[600];
    snprintf(p, sizeof p, "%s/hosts", g_dir);
    dd_launch_hosts h;
    dd_test_write(p, "# two nodes\nnode-a slots=4 max_slots=8\n\n  node-b   slots=2 # comment\nnode-c\nnode-a slots=1\n");
    CHECK_OK(dd_launch_hostfile_parse(p, &h));
    CHECK(h.n == 3, "3 hosts, got %zu", h.n);
    if (h.n == 3) {
        CHECK(strcmp(h.host[0].name, "node-a") == 0 && h.host[0].slots == 5, "node-a 4 + 1 slots: %s %d", h.host[0].name,
              h.host[0].slots);
        CHECK(h.host[1].slots == 2 && h.host[2].slots == 1, "node-b 2, node-c 1 (default)");
    }
    CHECK(dd_launch_hosts_slots(&h) == 8, "8 slots");
    dd_launch_hosts t;
    CHECK_OK(dd_launch_hosts_take(&h, 6, &t));
    CHECK(t.n == 2 && t.host[0].slots == 5 && t.host[1].slots == 1, "take 6: node-a 5, node-b 1");
    dd_launch_hosts_free(&t);
    CHECK_ERR(dd_launch_hosts_take(&h, 9, &t), DD_ERR_ARG, "1 slots short");
    const char *ex[] = {"node-a"};
    CHECK_OK(dd_launch_hosts_without(&h, ex, 1, &t));
    CHECK(t.n == 2 && dd_launch_hosts_slots(&t) == 3, "without node-a: 3 slots");
    /* written and read back */
    char q[600];
    snprintf(q, sizeof q, "%s/hosts2", g_dir);
    CHECK_OK(dd_launch_hostfile_write(q, &t));
    dd_launch_hosts r;
    CHECK_OK(dd_launch_hostfile_parse(q, &r));
    CHECK(r.n == 2 && strcmp(r.host[1].name, "node-c") == 0 && r.host[1].slots == 1, "round trip");
    dd_launch_hosts_free(&r);
    dd_launch_hosts_free(&t);
    dd_launch_hosts_free(&h);

    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"a slots=0\n", "hosts:1: slots must be an integer in [1, 65536], got '0'"},
        {"a\nb slots=x\n", "hosts:2: slots must be an integer in [1, 65536], got 'x'"},
        {"a slot=2\n", "hosts:1: unknown key 'slot' (keys: slots, max_slots)"},
        {"a 2\n", "hosts:1: expected KEY=VALUE after the host name, got '2'"},
        {"# nothing\n\n", "hosts: no hosts"},
        {"a/b slots=1\n", "hosts:1: host name 'a/b' has a character other than"},
        {"a slots=70000\n", "hosts:1: slots must be an integer in [1, 65536], got '70000'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        dd_test_write(p, bad[k].text);
        CHECK_ERR(dd_launch_hostfile_parse(p, &h), DD_ERR_FORMAT, bad[k].msg);
    }
    snprintf(q, sizeof q, "%s/none", g_dir);
    CHECK_ERR(dd_launch_hostfile_parse(q, &h), DD_ERR_IO, "cannot open ");
    CHECK_ERR(dd_launch_hostfile_parse(q, &h), DD_ERR_IO, "/none: No such file or directory");
    /* a NUL byte: named as such (it was reported as a line longer than 4094 bytes) */
    FILE *nf = fopen(q, "wb");
    CHECK(nf && fwrite("a slots=1\nb\0c slots=2\n", 1, 22, nf) == 22 && fclose(nf) == 0, "write");
    CHECK_ERR(dd_launch_hostfile_parse(q, &h), DD_ERR_FORMAT, "none:2: NUL byte (not a text file?)");
    nf = fopen(q, "wb");
    CHECK(nf && fwrite("a slots=1\nb\0c", 1, 14, nf) == 14 && fclose(nf) == 0, "write");
    CHECK_ERR(dd_launch_hostfile_parse(q, &h), DD_ERR_FORMAT, "none:2: NUL byte (not a text file?)"); /* last line */
    remove(q);
    /* a FIFO (no writer) is refused at once; fopen used to wait for a writer forever */
    snprintf(q, sizeof q, "%s/fifo", g_dir);
    CHECK(mkfifo(q, 0600) == 0, "mkfifo");
    CHECK_ERR(dd_launch_hostfile_parse(q, &h), DD_ERR_IO, "/fifo: not a regular file (a FIFO)");
    CHECK(h.n == 0 && h.host == NULL, "no hosts on refusal");
    CHECK_ERR(dd_launch_hostfile_parse(g_dir, &h), DD_ERR_IO, ": Is a directory");
}

static void test_discover(void) {
    dd_launch_hosts h;
    CHECK_OK(dd_launch_discover_parse("w-0:2\n  w-1:1  \n\nw-2\nw-0:1", "cmd", &h));
    CHECK(h.n == 3 && h.host[0].slots == 3 && h.host[1].slots == 1 && h.host[2].slots == 1, "w-0 3, w-1 1, w-2 1");
    dd_launch_hosts_free(&h);
    CHECK_OK(dd_launch_discover_parse("", "cmd", &h));
    CHECK(h.n == 0, "no output: no hosts (valid: none is up)");
    CHECK_ERR(dd_launch_discover_parse("a:1\nb:two\n", "discovery command 'x'", &h), DD_ERR_FORMAT,
              "discovery command 'x', line 2: slots must be an integer in [1, 65536], got 'two'");
    CHECK_ERR(dd_launch_discover_parse(":3\n", "d", &h), DD_ERR_FORMAT, "d, line 1: empty host name");
    CHECK_ERR(dd_launch_discover_parse("a:\n", "d", &h), DD_ERR_FORMAT, "got ''");
}

static void test_world_size(void) {
    CHECK(dd_launch_world_size(8, 1, 1048576, 1) == 8, "all 8 slots");
    CHECK(dd_launch_world_size(8, 1, 4, 1) == 4, "capped at MAX 4");
    CHECK(dd_launch_world_size(7, 1, 16, 4) == 4, "7 slots, replicas of 4 ranks: 4");
    CHECK(dd_launch_world_size(3, 4, 8, 1) == 0, "3 slots below MIN 4: 0");
    CHECK(dd_launch_world_size(5, 2, 5, 2) == 4, "5 slots, multiple 2: 4");
    CHECK(dd_launch_world_size(1, 1, 8, 2) == 0, "1 slot, multiple 2: 0");
    CHECK(dd_launch_world_size(0, 1, 8, 1) == 0, "no slots: 0");
}

static void write_ckpt(const char *path, uint64_t step) {
    dd_ckpt_writer *w = NULL;
    CHECK_OK(dd_ckpt_write_begin(path, &w));
    CHECK_OK(dd_ckpt_add_u64(w, "step", step));
    float x[64] = {0};
    CHECK_OK(dd_ckpt_add(w, "params", x, sizeof x));
    CHECK_OK(dd_ckpt_write_commit(&w));
}

static void flip_byte(const char *path, long off) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static void test_pick(void) {
    char run[600], p[700], got[1024];
    snprintf(run, sizeof run, "%s/run", g_dir);
    mkdir(run, 0777);
    uint64_t step;
    int found, rej;
    CHECK_OK(dd_launch_pick_checkpoint(run, got, sizeof got, &step, &found, &rej));
    CHECK(!found && rej == 0, "empty run: none");
    snprintf(p, sizeof p, "%s/last.ckpt", run);
    write_ckpt(p, 40);
    CHECK_OK(dd_launch_pick_checkpoint(run, got, sizeof got, &step, &found, &rej));
    CHECK(found && step == 40 && strcmp(got, p) == 0, "last.ckpt at step 40: %s %llu", got, (unsigned long long)step);
    snprintf(p, sizeof p, "%s/ckpt", run);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/ckpt/step-0000000030.ckpt", run);
    write_ckpt(p, 30);
    snprintf(p, sizeof p, "%s/ckpt/step-0000000050.ckpt", run);
    write_ckpt(p, 50);
    CHECK_OK(dd_launch_pick_checkpoint(run, got, sizeof got, &step, &found, &rej));
    CHECK(found && step == 50 && strstr(got, "step-0000000050"), "newest: step 50 (%s)", got);
    /* a torn / corrupt newest file is passed over */
    flip_byte(p, 200);
    CHECK_OK(dd_launch_pick_checkpoint(run, got, sizeof got, &step, &found, &rej));
    CHECK(found && step == 40 && strstr(got, "last.ckpt") && rej == 1, "step 50 corrupt: last.ckpt (40), 1 rejected");
    snprintf(p, sizeof p, "%s/last.ckpt", run);
    truncate(p, 100);
    CHECK_OK(dd_launch_pick_checkpoint(run, got, sizeof got, &step, &found, &rej));
    CHECK(found && step == 30 && rej == 2, "last.ckpt truncated too: step 30, 2 rejected (%llu, %d)",
          (unsigned long long)step, rej);
    /* a temporary file of an interrupted write is not a candidate */
    snprintf(p, sizeof p, "%s/ckpt/step-0000000099.ckpt.tmp.1.0", run);
    dd_test_write(p, "torn");
    CHECK_OK(dd_launch_pick_checkpoint(run, got, sizeof got, &step, &found, &rej));
    CHECK(found && step == 30 && rej == 2, "a .tmp file is ignored");
}

static int argv_is(char **v, int n, const char *want) {
    char buf[2048] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof buf; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? " " : "", v[i]);
    const int ok = strcmp(buf, want) == 0;
    if (!ok) fprintf(stderr, "  got:  %s\n  want: %s\n", buf, want);
    return ok && v[n] == NULL;
}

static void test_resume_argv(void) {
    char *a[] = {"train-pa", "--data", "D", "--model", "gru", "--hidden=6", "--no-shuffle", "--epochs", "9", "--out",
                 "R",        "-q",     "--compress", "int8", "--lr", "1e-2", "--progress=lines", "--no-report"};
    const int n = sizeof a / sizeof a[0];
    char **v = NULL;
    int vn = 0;
    CHECK_OK(dd_launch_resume_argv(n, a, NULL, 0, &v, &vn));
    CHECK(argv_is(v, vn, "train-pa --resume R --data D --epochs 9 -q --compress int8 --progress=lines --no-report"),
          "resume arguments: configuration options left out");
    free(v);
    char *extra[] = {"--x", "1"};
    char *b[] = {"train-dpd", "--resume", "R2", "--pp", "2"};
    CHECK_OK(dd_launch_resume_argv(5, b, extra, 2, &v, &vn));
    CHECK(argv_is(v, vn, "train-dpd --resume R2 --pp 2 --x 1"), "a resume stays a resume, extra appended");
    free(v);
    char *c[] = {"train-pa", "--data", "D"};
    CHECK_ERR(dd_launch_resume_argv(3, c, NULL, 0, &v, &vn), DD_ERR_ARG, "names no run directory");
    CHECK(strcmp(dd_launch_arg_value(n, a, "out"), "R") == 0, "--out R");
    CHECK(strcmp(dd_launch_arg_value(n, a, "hidden"), "6") == 0, "--hidden=6");
    CHECK(dd_launch_arg_value(n, a, "tp") == NULL, "no --tp");
    /* a value that looks like an option name is a value */
    char *d[] = {"train-pa", "--data", "--out", "--out", "R"};
    CHECK(strcmp(dd_launch_arg_value(5, d, "out"), "R") == 0, "--data's value '--out' is skipped");
}

static void test_failed_host(void) {
    char h[64];
    dd_launch_failed_host("--------\nmpirun noticed that process rank 1 with PID 0 on node node-7.lab exited on signal 9 "
                          "(Killed).\n--------\n",
                          h, sizeof h);
    CHECK(strcmp(h, "node-7.lab") == 0, "Open MPI's message: '%s'", h);
    dd_launch_failed_host("x on node a.\ny on node b exited", h, sizeof h);
    CHECK(strcmp(h, "b") == 0, "the last mention, a sentence's dot dropped: '%s'", h);
    dd_launch_failed_host("Primary job terminated normally, but 1 process returned a non-zero exit code.", h, sizeof h);
    CHECK(h[0] == 0, "no host named: ''");
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", dd_test_tmpdir());
    test_hostfile();
    test_discover();
    test_world_size();
    test_pick();
    test_resume_argv();
    test_failed_host();
    return dd_test_done("test_launch");
}
