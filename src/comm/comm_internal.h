/* Private parts of the communication layer shared by the files in src/comm (and by other
 * modules under src/ that need the raw MPI communicator, e.g. a parameter server's
 * MPI_Irecv(MPI_ANY_SOURCE) loop): the dd_comm structure, MPI error mapping and the
 * tag ranges. Not installed. */
#ifndef DD_COMM_INTERNAL_H
#define DD_COMM_INTERNAL_H

#include <mpi.h>

#include "distdpd/comm.h"

/* User point-to-point tags are [0, DD_COMM_USER_TAGS); collectives written on
 * point-to-point use [tag_base, tag_base + tag_span) with one tag per call (a sequence
 * number modulo tag_span), so that several non-blocking allreduces in flight on one
 * communicator never match each other's messages. */
#define DD_COMM_USER_TAGS (1 << 20)

struct dd_comm {
    int is_mpi;          /* 1: MPI communicator, 0: single process */
    int rank, size;      /* this process's rank and the group size */
    MPI_Comm mc;         /* the duplicate (MPI_ERRORS_RETURN); MPI_COMM_NULL for self */
    int user_tags;       /* user tags allowed: [0, user_tags) */
    int tag_base;        /* first collective tag */
    int tag_span;        /* number of collective tags */
    uint64_t seq;        /* collectives started on this handle (same on all ranks) */
    int hier_ready;      /* node/leader split made (HIER) */
    MPI_Comm node_mc;    /* ranks on this node (HIER); MPI_COMM_NULL until made */
    MPI_Comm leader_mc;  /* local rank 0 of each node; MPI_COMM_NULL elsewhere */
    void *scratch;       /* receive buffer reused by requests, scratch_cap bytes */
    size_t scratch_cap;  /* its capacity in bytes */
    int scratch_busy;    /* 1 while a request holds it */
    dd_comm_stats stats; /* counters (comm.h) */
};

/* Maps an MPI return code to DD_ERR_COMM with "WHAT: MPI error CLASS: text"; returns
 * DD_OK for MPI_SUCCESS. */
dd_status dd_comm_mpi_error(int rc, const char *what);

/* Every blocking wait of the comm layer: MPI_Testall until the n requests complete, or
 * DD_ERR_TIMEOUT "WHAT: no answer for S s (DISTDPD_COMM_TIMEOUT) ..." after
 * dd_comm_timeout() seconds (the requests then stay pending: the caller fails the run,
 * which aborts every rank). Yields the core now and then (oversubscribed ranks). */
dd_status dd_comm_waitall(int n, MPI_Request *rq, MPI_Status *st, const char *what);
/* MPI_Sendrecv of bytes on mc with that timeout: send sby bytes to `to`, receive rby from
 * `from`. */
dd_status dd_comm_sendrecv_bytes(MPI_Comm mc, const void *sbuf, size_t sby, int to, void *rbuf, size_t rby, int from,
                                 int tag, const char *what);
/* (dd_comm_timeout in comm.h: the seconds a wait may last) */
/* The checks of a point-to-point call (buffer, size, peer, tag) naming fn. */
dd_status dd_comm_p2p_check(dd_comm *c, const void *buf, size_t bytes, int peer, int tag, const char *fn);

/* The MPI communicator of c (MPI_COMM_NULL for the single-process comm). The handle
 * keeps ownership. */
MPI_Comm dd_comm_mpi_comm(const dd_comm *c);

/* Makes c's HIER node and leader communicators if not made yet (collective). */
dd_status dd_comm_hier_setup(dd_comm *c);

/* The next collective tag of c (advances c->seq; call on every rank in the same order). */
int dd_comm_next_tag(dd_comm *c);

/* dst[i] += src[i] for i < n (the reduction kernel of every algorithm; dst and src must
 * not overlap). */
void dd_comm_sum(void *dst, const void *src, size_t n, dd_dtype dt);

/* The element size of dt in bytes and its MPI datatype. */
size_t dd_comm_dtype_size(dd_dtype dt);
MPI_Datatype dd_comm_dtype_mpi(dd_dtype dt);

/* The node colour of a rank for DD_COMM_RANKS_PER_NODE: *k = 0 when the variable is not
 * set; DD_ERR_ARG when it is not a positive integer. */
dd_status dd_comm_ranks_per_node(int *k);

#endif
