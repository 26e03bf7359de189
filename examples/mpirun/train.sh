#!/bin/bash
# Data-parallel training on several machines with plain mpirun and a hostfile (ssh between
# the hosts, passwordless). 8 ranks = 2 hosts x 4 slots (examples/mpirun/hostfile); the
# consecutive ranks of a host form a node for --allreduce hier (--map-by slot).
#   examples/mpirun/train.sh DATA RUN [HOSTFILE]
# To stop cleanly (all ranks after the same step, RUN/last.ckpt written): kill -USR1 the
# mpirun process (it forwards SIGUSR1 to the ranks); continue with train-pa --resume RUN.
set -euo pipefail
DATA=${1:?data set}
RUN=${2:?run directory}
HOSTS=${3:-$(dirname "$0")/hostfile}
NP=$(awk '!/^#/ && NF { for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) { sub(/slots=/, "", $i); n += $i } } END { print n }' "$HOSTS")
PER_NODE=$(awk '!/^#/ && NF { for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) { sub(/slots=/, "", $i); print $i; exit } }' "$HOSTS")
# DD_COMM_RANKS_PER_NODE: Open MPI 4.1's MPI_Comm_split_type is broken across nodes over
# TCP (open-mpi/ompi#9010); hier uses blocks of PER_NODE consecutive ranks instead
DD_COMM_RANKS_PER_NODE=$PER_NODE OPENBLAS_NUM_THREADS=1 \
mpirun -np "$NP" --hostfile "$HOSTS" --map-by slot --bind-to core \
    -x OPENBLAS_NUM_THREADS -x DD_COMM_RANKS_PER_NODE \
    --mca btl self,vader,tcp \
    distdpd train-pa --data "$DATA" --model gru --hidden 23 --frame 200 --stride 1 --batch 64 \
    --lr 5e-3 --epochs 20 --allreduce hier --out "$RUN" --progress lines
