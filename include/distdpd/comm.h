/* distdpd communication layer: a thin wrapper over MPI (world, sub-communicators,
 * errors mapped to dd_status, per-handle timing) with a single-process implementation
 * of the same interface, so that everything runs without mpirun and unit tests need no
 * MPI; plus allreduce algorithms written on MPI point-to-point (ring, binomial tree,
 * recursive halving/doubling, hierarchical) next to MPI_Allreduce, blocking and
 * non-blocking (a request progressed by polling). See docs/comm.md.
 *
 * Usage:
 *   dd_comm_init(&argc, &argv);          // MPI_Init_thread if launched by mpirun/srun
 *   dd_comm *world = NULL;
 *   dd_comm_world(&world);               // MPI world, or the single-process comm
 *   dd_comm_allreduce(world, DD_ALLREDUCE_RING, grad, n, DD_F32);
 *   dd_comm_free(&world);
 *   dd_comm_finalize();
 *
 * Rules shared by every collective here: all ranks of the communicator call it in the
 * same order with the same algorithm, count, datatype and root (MPI's rule). Buffers
 * are the caller's; nothing here keeps a pointer past the call, except a non-blocking
 * request, which uses its buffer until dd_comm_wait() returns. Every function returns
 * DD_OK, DD_ERR_ARG (bad argument, message names it), DD_ERR_NOMEM, or DD_ERR_COMM (an
 * MPI call failed; the message holds the MPI function and MPI_Error_string's text).
 * Handles are not thread-safe: use one from one thread at a time (MPI is initialised
 * with MPI_THREAD_FUNNELED).
 */
#ifndef DISTDPD_COMM_H
#define DISTDPD_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator: either an MPI communicator (a duplicate with MPI_ERRORS_RETURN) or
 * the single-process one (size 1, no MPI calls). Opaque. */
typedef struct dd_comm dd_comm;

/* A non-blocking collective in flight. Opaque. */
typedef struct dd_comm_req dd_comm_req;

/* Element types of reductions. Sums of DD_F32 accumulate in float32 (like NCCL), sums
 * of DD_F64 in double; the summation order is fixed per algorithm (docs/comm.md) and
 * every rank ends with bit-identical values. */
typedef enum { DD_F32 = 0, DD_F64 = 1 } dd_dtype;

/* Allreduce algorithms (sum): an index into the registry of algorithms
 * (src/comm/ar_registry.c, one file each), 0 .. dd_allreduce_count() - 1. The constants
 * are the built-in ones, which keep these indices (configurations, checkpoints and
 * parallel.json store them). All are correct for any rank count and any length,
 * including 0 and lengths not divisible by the rank count.
 *   RING  reduce-scatter + allgather around a ring: 2(p-1) messages of n/p elements.
 *   TREE  binomial reduce to rank 0 + binomial broadcast: 2 ceil(log2 p) messages of n.
 *   RHD   recursive halving (reduce-scatter) + recursive doubling (allgather)
 *         (Rabenseifner); non-powers of two fold the extra ranks in first.
 *   HIER  binomial reduce inside each node, ring allreduce across one leader per node,
 *         binomial broadcast inside the node. Nodes come from
 *         MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), or, when the environment variable
 *         DD_COMM_RANKS_PER_NODE=k (k >= 1) is set, from consecutive blocks of k ranks
 *         (to exercise the cross-node path on one machine). The split is made on the
 *         first HIER call on a communicator (a blocking collective) and cached.
 *   MPI   MPI_Allreduce / MPI_Iallreduce (the MPI library's own choice).
 * Further registered algorithms follow them (docs/comm.md, "Adding an algorithm"). */
typedef enum {
    DD_ALLREDUCE_RING = 0,
    DD_ALLREDUCE_TREE = 1,
    DD_ALLREDUCE_RHD = 2,
    DD_ALLREDUCE_HIER = 3,
    DD_ALLREDUCE_MPI = 4
} dd_allreduce_algo;

/* The most algorithms the registry may hold (sizes of per-algorithm arrays, plan.h). */
#define DD_ALLREDUCE_MAX 16

/* The number of registered algorithms (5 built-in ones, then any added): the valid
 * values of dd_allreduce_algo are 0 .. dd_allreduce_count() - 1. */
int dd_allreduce_count(void);
/* The registered name ("ring", "tree", "rhd", "hier", "mpi", ...); "?" for an unknown
 * value. */
const char *dd_allreduce_name(dd_allreduce_algo a);
/* A one-line description; NULL for an unknown value. */
const char *dd_allreduce_describe(dd_allreduce_algo a);
/* Parses a registered name (exact, lower case). DD_ERR_ARG naming the value and the
 * choices otherwise ("expected ring, tree, rhd, hier or mpi"). */
dd_status dd_allreduce_parse(const char *name, dd_allreduce_algo *out);
/* The registered names as a list, "ring, tree, rhd, hier or mpi", written into buf
 * (always NUL-terminated when cap > 0; buf may be NULL with cap 0). Returns the length
 * it needed, like snprintf. */
size_t dd_allreduce_choices(char *buf, size_t cap);

/* --- Process-wide set-up ------------------------------------------------------------ */

/* Initialises MPI (MPI_Init_thread, MPI_THREAD_FUNNELED) when the process was started by
 * an MPI launcher (mpirun/mpiexec/srun: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or
 * PMI_SIZE is set) or when DD_COMM=mpi; does nothing when DD_COMM=self or there is no
 * launcher, so that a plain run needs no MPI at all. Idempotent; if the application
 * initialised MPI itself, uses it and leaves finalising to the application.
 * argc/argv may be NULL (MPI_Init_thread accepts that). DD_ERR_ARG if DD_COMM has
 * another value; DD_ERR_COMM if MPI_Init_thread fails. */
dd_status dd_comm_init(int *argc, char ***argv);

/* 1 if MPI is initialised (by dd_comm_init or by the application) and not finalised. */
int dd_comm_mpi_active(void);

/* Calls MPI_Finalize if dd_comm_init initialised MPI. Free every dd_comm first. */
dd_status dd_comm_finalize(void);

/* --- Handles ------------------------------------------------------------------------ */

/* A new handle on all processes: a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN
 * when MPI is active, else the single-process communicator. Caller frees with
 * dd_comm_free(). Collective over MPI_COMM_WORLD when MPI is active. */
dd_status dd_comm_world(dd_comm **out);

/* A new single-process communicator (rank 0 of 1) that makes no MPI call.
 * Caller frees with dd_comm_free(). */
dd_status dd_comm_self(dd_comm **out);

/* Frees the handle (MPI_Comm_free for MPI ones, with its cached node/leader
 * communicators) and sets *c = NULL. NULL or *c == NULL is a no-op. Must come before
 * dd_comm_finalize(). */
void dd_comm_free(dd_comm **c);

int dd_comm_rank(const dd_comm *c);  /* 0 .. size-1 */
int dd_comm_size(const dd_comm *c);  /* >= 1 */
int dd_comm_is_mpi(const dd_comm *c); /* 1 for an MPI communicator, 0 for self */

/* Splits c like MPI_Comm_split: ranks with the same color (>= 0) form one new
 * communicator, ordered by key then by rank in c; color < 0 (MPI_UNDEFINED) returns
 * *out = NULL. Collective. Caller frees *out with dd_comm_free(). */
dd_status dd_comm_split(dd_comm *c, int color, int key, dd_comm **out);

/* The ranks of c on the same node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), or
 * blocks of DD_COMM_RANKS_PER_NODE consecutive ranks when that variable is set (>= 1).
 * Collective. Caller frees *out. DD_ERR_ARG if DD_COMM_RANKS_PER_NODE is not a
 * positive integer. */
dd_status dd_comm_split_node(dd_comm *c, dd_comm **out);

/* The node of every rank of c into ids[0..size): 0, 1, ... numbered in the order of each
 * node's first rank. Nodes are told apart by MPI_Get_processor_name (not by
 * MPI_COMM_TYPE_SHARED, which breaks the next collective across TCP nodes in Open MPI
 * 4.1); DD_COMM_RANKS_PER_NODE=K makes blocks of K consecutive ranks nodes (emulated
 * hosts), and DD_COMM_NODE_OF="n0,n1,..." gives each rank's node (tests). Collective.
 * Errors: DD_ERR_ARG (a malformed variable), DD_ERR_COMM, DD_ERR_NOMEM. */
dd_status dd_comm_node_ids(dd_comm *c, int *ids);

/* --- Collectives (blocking) --------------------------------------------------------- */

dd_status dd_comm_barrier(dd_comm *c);

/* Broadcasts `bytes` bytes of buf from root (0 <= root < size) to every rank. */
dd_status dd_comm_bcast(dd_comm *c, void *buf, size_t bytes, int root);

/* In-place sum of n elements of type dt over all ranks with the given algorithm.
 * n may be 0 (returns at once on every rank); n <= INT_MAX. buf may be NULL if n == 0. */
dd_status dd_comm_allreduce(dd_comm *c, dd_allreduce_algo algo, void *buf, size_t n,
                            dd_dtype dt);

/* Gathers `bytes` bytes from every rank into recv (size * bytes bytes, rank order).
 * bytes <= INT_MAX. send and recv must not overlap. */
dd_status dd_comm_allgather(dd_comm *c, const void *send, size_t bytes, void *recv);

/* Variable-size allgather: rank r contributes counts[r] bytes (its own `send` holds
 * counts[rank]) that land at recv + displs[r]. counts and displs have size entries
 * (the same on every rank), each <= INT_MAX. */
dd_status dd_comm_allgatherv(dd_comm *c, const void *send, void *recv, const size_t *counts,
                             const size_t *displs);

/* Variable-size gather to root: rank r's counts[r] bytes land at recv + displs[r] on
 * root (recv is ignored elsewhere). Arguments as dd_comm_allgatherv. */
dd_status dd_comm_gatherv(dd_comm *c, const void *send, void *recv, const size_t *counts,
                          const size_t *displs, int root);

/* Sum reduce-scatter: send holds sum(counts) elements on every rank; rank r receives
 * the sum of block r (counts[r] elements, blocks consecutive) in recv. Uses the ring
 * algorithm (float32 accumulation for DD_F32). counts has size entries. */
dd_status dd_comm_reduce_scatter(dd_comm *c, const void *send, void *recv,
                                 const size_t *counts, dd_dtype dt);

/* Point-to-point, blocking: `bytes` bytes to/from rank peer (0 <= peer < size, peer !=
 * own rank) with tag 0 <= tag < 2^20. For pipeline stages and parameter servers. */
dd_status dd_comm_send(dd_comm *c, const void *buf, size_t bytes, int peer, int tag);
dd_status dd_comm_recv(dd_comm *c, void *buf, size_t bytes, int peer, int tag);

/* --- Non-blocking allreduce --------------------------------------------------------- */

/* Starts an in-place sum like dd_comm_allreduce and returns at once with *req. The
 * point-to-point algorithms run as a state machine over their steps, advanced by
 * dd_comm_test() (Open MPI 4.1 has no progress thread: poll between compute chunks);
 * MPI uses MPI_Iallreduce. The result is bit-identical to the blocking call's. buf must
 * stay untouched until the request completes. Several requests may be in flight on one
 * communicator if every rank starts them in the same order. HIER's first use on a
 * communicator creates its node split (blocking) inside this call.
 * The caller ends every request with dd_comm_wait() (or dd_comm_req_free()). */
dd_status dd_comm_iallreduce(dd_comm *c, dd_allreduce_algo algo, void *buf, size_t n,
                             dd_dtype dt, dd_comm_req **req);

/* Non-blocking variable-size allgather (MPI_Iallgatherv; arguments as
 * dd_comm_allgatherv): rank r's counts[r] bytes land at recv + displs[r]; send may be
 * recv + displs[rank] (in place). For sharded data parallelism: a stage's parameters
 * gathered from their owners while the previous stage computes. */
dd_status dd_comm_iallgatherv(dd_comm *c, const void *send, void *recv, const size_t *counts,
                              const size_t *displs, dd_comm_req **req);
/* Non-blocking float32 sum reduce-scatter (MPI_Ireduce_scatter, the MPI library's
 * summation order): send holds sum(counts) floats on every rank; rank r receives the sum
 * of block r (counts[r] floats, blocks consecutive) in recv. send must not overlap recv. */
dd_status dd_comm_ireduce_scatter(dd_comm *c, const float *send, float *recv, const size_t *counts,
                                  dd_comm_req **req);

/* Non-blocking point-to-point (MPI_Isend / MPI_Irecv; arguments as dd_comm_send/recv):
 * posts the message and returns at once with *req; buf must stay untouched until the
 * request completes (dd_comm_test, dd_comm_wait, dd_comm_wait_timeout). A receive whose
 * message has another size fails on completion (DD_ERR_COMM naming the peer and both
 * sizes). For pipeline stages: activations and their gradients overlap compute. */
dd_status dd_comm_isend(dd_comm *c, const void *buf, size_t bytes, int peer, int tag, dd_comm_req **req);
dd_status dd_comm_irecv(dd_comm *c, void *buf, size_t bytes, int peer, int tag, dd_comm_req **req);

/* Advances req as far as it can without blocking; *done = 1 once the result is in buf.
 * After an error the request is dead: free it with dd_comm_req_free(). */
dd_status dd_comm_test(dd_comm_req *req, int *done);

/* Blocks until *req completes, frees it and sets *req = NULL (also on error). */
dd_status dd_comm_wait(dd_comm_req **req);

/* dd_comm_wait with a limit: tests *req (giving the core away between tests) until it
 * completes (then frees it and sets *req = NULL, like dd_comm_wait) or timeout_s seconds
 * have passed (timeout_s <= 0: no limit): DD_ERR_TIMEOUT "waited S s for WHAT: no
 * answer", where what (e.g. "the activation of micro-batch 3 from rank 1 (step 12)")
 * names the peer and the step; the request then stays pending (wait again or free it). */
dd_status dd_comm_wait_timeout(dd_comm_req **req, double timeout_s, const char *what);

/* The limit of every wait for a peer in training (collectives, bucket and step
 * reductions): DISTDPD_COMM_TIMEOUT seconds (a number >= 0, 0 = none; default 1800, as
 * PyTorch's collectives), read once. A rank that waits longer fails with DD_ERR_TIMEOUT
 * "...: no answer for S s (DISTDPD_COMM_TIMEOUT): a peer is stopped, hung or
 * unreachable", which aborts the job instead of hanging it. */
double dd_comm_timeout(void);

/* Gives up a request after an error or a timeout, without waiting for a peer: an
 * unfinished point-to-point receive is cancelled, an unfinished send released to MPI
 * (its buffer must then stay valid until the process ends or MPI is finalized); other
 * requests as dd_comm_req_free. Sets *req = NULL. */
void dd_comm_req_cancel(dd_comm_req **req);

/* Frees a request; an unfinished one is first waited for (errors ignored), since MPI
 * may still write into its buffer. Sets *req = NULL; NULL is a no-op. */
void dd_comm_req_free(dd_comm_req **req);

/* --- Timing ------------------------------------------------------------------------- */

/* Counters kept per handle since its creation (or the last dd_comm_stats_reset). */
typedef struct {
    uint64_t calls;      /* collectives and point-to-point calls started */
    uint64_t bytes_sent; /* payload bytes this rank sent (point-to-point algorithms and
                            send; for MPI_* collectives the bytes an algorithm-agnostic
                            count would send: the buffer size) */
    double seconds;      /* wall time spent inside this handle's calls (blocking calls,
                            dd_comm_test and dd_comm_wait) */
} dd_comm_stats;

void dd_comm_stats_get(const dd_comm *c, dd_comm_stats *out);
void dd_comm_stats_reset(dd_comm *c);

/* Wall-clock seconds: MPI_Wtime when MPI is active, else dd_now(). */
double dd_comm_wtime(void);

#ifdef __cplusplus
}
#endif
#endif
