/* Allreduce "mpi": MPI_Allreduce / MPI_Iallreduce, the MPI library's own choice (native:
 * no schedule). The planner models it as the fastest of ring, tree and rhd (assuming the
 * library's tuned choice is near-optimal) and does not recommend it. docs/comm.md. */
#include "comm/allreduce_impl.h"

static dd_status mpi_native(dd_comm *c, void *buf, size_t n, dd_dtype dt, MPI_Request *rq) {
    if (!rq) { /* blocking: the non-blocking form and a wait with the timeout */
        MPI_Request r = MPI_REQUEST_NULL;
        DD_TRY(dd_comm_mpi_error(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dd_comm_dtype_mpi(dt), MPI_SUM, c->mc, &r),
                                 "MPI_Iallreduce"));
        return dd_comm_waitall(1, &r, NULL, "MPI_Iallreduce");
    }
    return dd_comm_mpi_error(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dd_comm_dtype_mpi(dt), MPI_SUM, c->mc, rq),
                             "MPI_Iallreduce");
}

/* the fastest of ring, tree and rhd (the first of them on a tie) */
static dd_allreduce_algo mpi_model_as(const dd_link *inter, const dd_link *intra, int ranks_per_node, int p,
                                      double bytes) {
    dd_allreduce_algo a = DD_ALLREDUCE_RING;
    for (int k = DD_ALLREDUCE_TREE; k <= DD_ALLREDUCE_RHD; k++)
        if (dd_plan_allreduce_time((dd_allreduce_algo)k, inter, intra, ranks_per_node, p, bytes) <
            dd_plan_allreduce_time(a, inter, intra, ranks_per_node, p, bytes))
            a = (dd_allreduce_algo)k;
    return a;
}

DD_ALLREDUCE_DEFINE(mpi,
                    .summary = "MPI_Allreduce / MPI_Iallreduce (the MPI library's choice); planned as the fastest of "
                               "ring, tree and rhd",
                    .native = mpi_native,
                    .model_as = mpi_model_as);
