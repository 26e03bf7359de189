/* Unit test of the single-process communicator (no MPI, no mpirun): dd_comm_init leaves
 * MPI alone without a launcher, dd_comm_world is then the self comm, every collective is
 * an identity or a copy, non-blocking requests complete at once, and argument errors are
 * reported by name. Also the algorithm names. */
#include <stdlib.h>
#include <string.h>

#include "dd_test.h"
#include "distdpd/comm.h"

static void test_init_self(void) {
    setenv("DD_COMM", "bogus", 1);
    CHECK_ERR(dd_comm_init(NULL, NULL), DD_ERR_ARG, "DD_COMM='bogus'");
    setenv("DD_COMM", "self", 1);
    CHECK_OK(dd_comm_init(NULL, NULL));
    CHECK(!dd_comm_mpi_active(), "DD_COMM=self must not initialise MPI");
    unsetenv("DD_COMM");
    CHECK_OK(dd_comm_init(NULL, NULL)); /* no launcher variables under ctest */
    CHECK(!dd_comm_mpi_active(), "no launcher: MPI must stay uninitialised");
    dd_comm *w = NULL;
    CHECK_OK(dd_comm_world(&w));
    CHECK(w && !dd_comm_is_mpi(w) && dd_comm_size(w) == 1 && dd_comm_rank(w) == 0, "world must be self");
    dd_comm_free(&w);
    CHECK(w == NULL, "free must NULL the handle");
    dd_comm_free(&w);  /* no-op */
    dd_comm_free(NULL);
    CHECK_OK(dd_comm_finalize()); /* nothing to finalise */
    double t0 = dd_comm_wtime(), t1 = dd_comm_wtime();
    CHECK(t1 >= t0 && t0 > 0, "wtime %g %g", t0, t1);
}

static void test_collectives(void) {
    dd_comm *c = NULL;
    CHECK_OK(dd_comm_self(&c));
    if (!c) return;
    float f[7];
    double d[5];
    for (int i = 0; i < 7; i++) f[i] = 0.1f * (float)i - 0.3f;
    for (int i = 0; i < 5; i++) d[i] = 1.0 / (i + 1);
    float f0[7];
    double d0[5];
    memcpy(f0, f, sizeof f);
    memcpy(d0, d, sizeof d);
    for (int a = 0; a < dd_allreduce_count(); a++) {
        CHECK_OK(dd_comm_allreduce(c, (dd_allreduce_algo)a, f, 7, DD_F32));
        CHECK_OK(dd_comm_allreduce(c, (dd_allreduce_algo)a, d, 5, DD_F64));
        CHECK_OK(dd_comm_allreduce(c, (dd_allreduce_algo)a, NULL, 0, DD_F32));
        dd_comm_req *rq = NULL;
        int done = 0;
        CHECK_OK(dd_comm_iallreduce(c, (dd_allreduce_algo)a, f, 7, DD_F32, &rq));
        CHECK_OK(dd_comm_test(rq, &done));
        CHECK(done == 1, "self request must be complete at once");
        CHECK_OK(dd_comm_wait(&rq));
        CHECK(rq == NULL, "wait must NULL the request");
        CHECK_OK(dd_comm_iallreduce(c, (dd_allreduce_algo)a, d, 5, DD_F64, &rq));
        dd_comm_req_free(&rq);
        CHECK(rq == NULL, "req_free must NULL the request");
    }
    CHECK(memcmp(f, f0, sizeof f) == 0 && memcmp(d, d0, sizeof d) == 0, "sum over one rank is the identity");

    int v = 5;
    CHECK_OK(dd_comm_bcast(c, &v, sizeof v, 0));
    CHECK(v == 5, "bcast changed the value");
    CHECK_ERR(dd_comm_bcast(c, &v, sizeof v, 1), DD_ERR_ARG, "root 1 out of range [0, 1)");
    int g = -1;
    CHECK_OK(dd_comm_allgather(c, &v, sizeof v, &g));
    CHECK(g == 5, "allgather copies: %d", g);
    char out[8] = {0};
    size_t cnt = 3, dsp = 2;
    CHECK_OK(dd_comm_allgatherv(c, "abc", out, &cnt, &dsp));
    CHECK(memcmp(out + 2, "abc", 3) == 0 && out[0] == 0, "allgatherv places at displs");
    double rs[3] = {0};
    size_t rc = 3;
    CHECK_OK(dd_comm_reduce_scatter(c, d0, rs, &rc, DD_F64));
    CHECK(memcmp(rs, d0, sizeof rs) == 0, "reduce_scatter over one rank copies");
    CHECK_OK(dd_comm_barrier(c));

    dd_comm *s = NULL;
    CHECK_OK(dd_comm_split(c, 3, 0, &s));
    CHECK(s && dd_comm_size(s) == 1, "split of self is self");
    dd_comm_free(&s);
    CHECK_OK(dd_comm_split(c, -1, 0, &s));
    CHECK(s == NULL, "colour < 0 gives NULL");
    CHECK_OK(dd_comm_split_node(c, &s));
    CHECK(s && dd_comm_size(s) == 1, "node split of self");
    dd_comm_free(&s);
    setenv("DD_COMM_RANKS_PER_NODE", "x2", 1);
    CHECK_ERR(dd_comm_split_node(c, &s), DD_ERR_ARG, "DD_COMM_RANKS_PER_NODE='x2'");
    unsetenv("DD_COMM_RANKS_PER_NODE");

    CHECK_ERR(dd_comm_send(c, &v, sizeof v, 0, 0), DD_ERR_ARG, "peer 0");
    CHECK_ERR(dd_comm_recv(c, &v, sizeof v, 1, 0), DD_ERR_ARG, "peer 1");
    CHECK_ERR(dd_comm_allreduce(c, DD_ALLREDUCE_RING, NULL, 4, DD_F32), DD_ERR_ARG, "buf is NULL");
    CHECK_ERR(dd_comm_allreduce(c, DD_ALLREDUCE_RING, f, 4, (dd_dtype)7), DD_ERR_ARG, "datatype");
    CHECK_ERR(dd_comm_allreduce(NULL, DD_ALLREDUCE_RING, f, 4, DD_F32), DD_ERR_ARG, "NULL");
    dd_comm_req *rq = NULL;
    CHECK_ERR(dd_comm_iallreduce(c, (dd_allreduce_algo)-1, f, 4, DD_F32, &rq), DD_ERR_ARG, "algorithm -1");
    CHECK(rq == NULL, "failed iallreduce leaves req NULL");

    dd_comm_stats st;
    dd_comm_stats_get(c, &st);
    CHECK(st.calls > 20 && st.bytes_sent == 0, "self stats: %llu calls, %llu bytes",
          (unsigned long long)st.calls, (unsigned long long)st.bytes_sent);
    dd_comm_stats_reset(c);
    dd_comm_stats_get(c, &st);
    CHECK(st.calls == 0 && st.seconds == 0, "reset");
    dd_comm_free(&c);
}

static void test_names(void) {
    /* the built-in algorithms keep their indices (comm.h constants) */
    const char *names[] = {"ring", "tree", "rhd", "hier", "mpi"};
    const int nb = (int)(sizeof names / sizeof names[0]), count = dd_allreduce_count();
    CHECK(count >= nb && count <= DD_ALLREDUCE_MAX, "%d algorithms registered", count);
    for (int i = 0; i < nb; i++) {
        dd_allreduce_algo a = DD_ALLREDUCE_MPI;
        CHECK_OK(dd_allreduce_parse(names[i], &a));
        CHECK((int)a == i && strcmp(dd_allreduce_name(a), names[i]) == 0, "name %s", names[i]);
    }
    /* every registered one: its name parses back to it and it has a summary */
    for (int i = 0; i < count; i++) {
        dd_allreduce_algo a = DD_ALLREDUCE_MPI;
        CHECK_OK(dd_allreduce_parse(dd_allreduce_name((dd_allreduce_algo)i), &a));
        CHECK((int)a == i, "algorithm %d (%s) parses back", i, dd_allreduce_name((dd_allreduce_algo)i));
        CHECK(dd_allreduce_describe((dd_allreduce_algo)i) != NULL, "algorithm %d has a summary", i);
    }
    dd_allreduce_algo a;
    if (count == nb) {
        CHECK_ERR(dd_allreduce_parse("Ring", &a), DD_ERR_ARG, "expected ring, tree, rhd, hier or mpi");
        char ch[64];
        CHECK(dd_allreduce_choices(ch, sizeof ch) == strlen("ring, tree, rhd, hier or mpi") &&
                  strcmp(ch, "ring, tree, rhd, hier or mpi") == 0,
              "choices '%s'", ch);
        CHECK(dd_allreduce_choices(ch, 5) == strlen("ring, tree, rhd, hier or mpi") && strcmp(ch, "ring") == 0,
              "choices truncated: '%s'", ch);
    } else {
        CHECK_ERR(dd_allreduce_parse("Ring", &a), DD_ERR_ARG, "expected ring, tree, rhd, hier, mpi");
    }
    CHECK(strcmp(dd_allreduce_name((dd_allreduce_algo)17), "?") == 0, "unknown name");
    CHECK(strcmp(dd_allreduce_name((dd_allreduce_algo)count), "?") == 0, "name past the registry");
    CHECK(dd_allreduce_describe((dd_allreduce_algo)-1) == NULL, "no summary for -1");
}

int main(void) {
    test_init_self();
    test_collectives();
    test_names();
    return dd_test_done("test_comm");
}
