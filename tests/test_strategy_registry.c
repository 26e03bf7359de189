/* The strategy registry (parallel.h): every entry complete; each option declared (with
 * help) once and before any strategy that only accepts it; the options choose the
 * expected strategy; wrong options and values are refused naming the option; --resume
 * takes the compressor the run recorded (last.ckpt before parallel.json); a strategy
 * started from the registry runs the trainer's step on one process like no strategy,
 * bit for bit. */
#include <stdio.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/ckpt.h"
#include "distdpd/parallel.h"
#include "test_train_util.h"

static dd_strategy_args args(int nranks, const char *list) {
    /* list: "name=value;name=value" (static storage: the values are borrowed) */
    static char buf[8][512];
    static int slot;
    char *s = buf[slot++ % 8];
    snprintf(s, sizeof buf[0], "%s", list);
    dd_strategy_args a;
    memset(&a, 0, sizeof a);
    a.nranks = nranks;
    for (char *tok = strtok(s, ";"); tok; tok = strtok(NULL, ";")) {
        char *eq = strchr(tok, '=');
        if (!eq) continue;
        *eq = '\0';
        dd_strategy_arg_set(&a, tok, eq + 1);
    }
    return a;
}

static const char *chosen(int nranks, const char *list) {
    dd_strategy_args a = args(nranks, list);
    const dd_strategy_def *d = NULL;
    if (dd_strategy_choose(&a, &d) != DD_OK) return "error";
    return d ? d->name : "single";
}

static void test_entries(void) {
    size_t n = 0;
    const dd_strategy_def *const *reg = dd_strategy_registry(&n);
    CHECK(n >= 2, "%zu strategies", n);
    for (size_t i = 0; i < n; i++) {
        const dd_strategy_def *d = reg[i];
        CHECK(d->name && d->title && d->when && d->claims && d->check && d->create && d->destroy && d->strategy &&
                  d->set_stop_source,
              "strategy %zu (%s) lacks a field", i, d->name ? d->name : "?");
        CHECK(dd_strategy_find(d->name) == d, "find %s", d->name);
        for (const dd_strategy_opt *o = d->opts; o && o->name; o++) {
            /* declared once (metavar and help), by this entry or an earlier one */
            int decl = 0, earlier = 0;
            for (size_t k = 0; k < n; k++)
                for (const dd_strategy_opt *q = reg[k]->opts; q && q->name; q++)
                    if (strcmp(q->name, o->name) == 0 && q->metavar) {
                        decl++;
                        earlier |= k <= i;
                        CHECK(q->help && *q->help, "--%s has no help", o->name);
                    }
            CHECK(decl == 1, "--%s is declared %d times", o->name, decl);
            CHECK(earlier, "--%s is used by %s before it is declared", o->name, d->name);
        }
    }
    CHECK(dd_strategy_find("nope") == NULL, "unknown strategy found");
    CHECK(dd_strategy_opt_known("shard") && !dd_strategy_opt_known("model"), "option names");
}

static void test_choose(void) {
    CHECK(!strcmp(chosen(1, ""), "single"), "nothing at np 1: %s", chosen(1, ""));
    CHECK(!strcmp(chosen(4, ""), "dp"), "np 4: %s", chosen(4, ""));
    CHECK(!strcmp(chosen(1, "compress=int8"), "dp"), "compress on one process");
    CHECK(!strcmp(chosen(2, "shard=zero1"), "dp"), "zero1");
    CHECK(!strcmp(chosen(2, "shard=zero2"), "zero"), "zero2");
    CHECK(!strcmp(chosen(3, "shard=zero3;allreduce=tree"), "zero"), "zero3 with tree");

    dd_strategy_args a = args(2, "shard=zero3;compress=int8");
    const dd_strategy_def *d = NULL;
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "reduce-scatter");
    a = args(2, "shard=zero2;bucket-mb=8");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "--bucket-mb does not apply to sharded");
    a = args(2, "shard=zero2;error-feedback=on");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "--error-feedback does not apply");
    a = args(2, "pipelines=2");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "--pipelines is no strategy's option");
    a = args(2, "allreduce=bogus");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "--allreduce");
    a = args(2, "bucket-mb=0x10");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "--bucket-mb: expected a number, got '0x10'");
    a = args(2, "bucket-mb=5000");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "must be in [0, 4096]");
    a = args(2, "shard=zero4");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "--shard");
    a = args(2, "error-feedback=on");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "needs --compress");
    a = args(2, "compress=fp32;error-feedback=off");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "lossy compressors only");
    a = args(2, "compress=int8;error-feedback=maybe");
    CHECK_ERR(dd_strategy_choose(&a, &d), DD_ERR_ARG, "expected on or off");
    /* the last value of an option given twice counts */
    a = args(2, "shard=zero2;shard=zero1");
    CHECK(dd_strategy_choose(&a, &d) == DD_OK && d && !strcmp(d->name, "dp"), "last --shard wins");
}

/* --resume: the compressor recorded by the run, last.ckpt before parallel.json; given
 * options win; "none" records nothing. */
static void test_resume(void) {
    const char *dir = dd_test_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/parallel.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fprintf(f, "{\"strategy\": \"data-parallel (synchronous)\", \"compress\": \"int4\"}\n");
    fclose(f);
    dd_strategy_args a = args(1, "");
    a.resume = dir;
    CHECK_OK(dd_strategy_args_resume(&a));
    const char *c = dd_strategy_arg(&a, "compress");
    CHECK(c && !strcmp(c, "int4"), "from parallel.json: %s", c ? c : "(none)");

    snprintf(path, sizeof path, "%s/last.ckpt", dir);
    dd_ckpt_writer *w = NULL;
    CHECK_OK(dd_ckpt_write_begin(path, &w));
    CHECK_OK(dd_ckpt_add_str(w, "compress.spec", "topk,density=0.1"));
    CHECK_OK(dd_ckpt_write_commit(&w));
    a = args(1, "");
    a.resume = dir;
    CHECK_OK(dd_strategy_args_resume(&a));
    c = dd_strategy_arg(&a, "compress");
    CHECK(c && !strcmp(c, "topk,density=0.1"), "from last.ckpt: %s", c ? c : "(none)");
    const dd_strategy_def *d = NULL;
    CHECK(dd_strategy_choose(&a, &d) == DD_OK && d && !strcmp(d->name, "dp"), "a resumed compressor runs dp");

    a = args(1, "compress=int8");
    a.resume = dir;
    CHECK_OK(dd_strategy_args_resume(&a));
    c = dd_strategy_arg(&a, "compress");
    CHECK(c && !strcmp(c, "int8"), "given wins: %s", c ? c : "(none)");

    CHECK_OK(dd_ckpt_write_begin(path, &w));
    CHECK_OK(dd_ckpt_add_str(w, "compress.spec", "none"));
    CHECK_OK(dd_ckpt_write_commit(&w));
    a = args(1, "");
    a.resume = dir;
    CHECK_OK(dd_strategy_args_resume(&a));
    CHECK(dd_strategy_arg(&a, "compress") == NULL && a.n == 0, "none recorded: nothing added");
}

/* dp started from the registry on one process: the same parameters after steps as the
 * trainer without a strategy. */
static void test_start(void) {
    dd_comm *world = NULL;
    CHECK_OK(dd_comm_init(NULL, NULL));
    CHECK_OK(dd_comm_world(&world));
    if (!world) return;
    dd_strategy_args a = args(1, "allreduce=tree;bucket-mb=0.001");
    const dd_strategy_def *d = NULL;
    CHECK_OK(dd_strategy_choose(&a, &d));
    dd_strategy_run run;
    CHECK_OK(dd_strategy_start(d, world, &a, &run));
    CHECK(run.def == d && run.st.ops && run.st.nranks == 1 && run.st.rank == 0, "started");

    const size_t n3[3] = {3 * 61 + 16, 512, 512};
    dd_dataset *ds = tt_make_data(n3, "wiener-hammerstein", NULL, 0, 0.7, 0, 5, NULL);
    dd_train_cfg cfg;
    tt_cfg(&cfg, DD_TRAIN_PA, 6, 16, 3, 12, 1);
    dd_trainer *t1 = NULL, *t2 = NULL;
    CHECK_OK(dd_trainer_create(&cfg, ds, NULL, NULL, &t1));
    CHECK_OK(dd_trainer_create(&cfg, ds, NULL, &run.st, &t2));
    double l1 = 0, l2 = 0;
    for (int k = 0; k < 3 && t1 && t2; k++) {
        CHECK_OK(dd_trainer_step(t1, &l1));
        CHECK_OK(dd_trainer_step(t2, &l2));
    }
    if (t1 && t2) {
        size_t n = 0;
        const float *p1 = dd_trainer_params(t1), *p2 = dd_trainer_params(t2);
        dd_trainer_storage(t1, NULL, NULL, NULL, &n, NULL, NULL); /* hi: the whole arena */
        CHECK(n > 0 && memcmp(p1, p2, n * sizeof *p1) == 0 && l1 == l2, "dp on one process equals none");
    }
    dd_strategy_step_times tm = {-1, -1, -1, -1};
    d->last_step(run.self, &tm);
    CHECK(tm.comm_s >= 0 && tm.exposed_s >= 0, "last step times");
    dd_trainer_destroy(&t1);
    dd_trainer_destroy(&t2);
    dd_dataset_free(&ds);
    dd_strategy_stop(&run);
    CHECK(run.def == NULL && run.self == NULL, "stopped");
    dd_comm_free(&world);
    dd_comm_finalize();
}

int main(void) {
    test_entries();
    test_choose();
    test_resume();
    test_start();
    return dd_test_done("test_strategy_registry");
}
