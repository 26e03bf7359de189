#!/bin/bash
# Multi-host data-parallel training on emulated hosts: each "host" is a network namespace
# with its own address, all joined to a bridge in a "switch" namespace by veth pairs (a
# private 10.251.0.0/24 network that exists only inside these namespaces; nothing is
# configured in the machine's own namespace and no traffic leaves it). mpirun runs inside
# the first host, reads a hostfile of the hosts' addresses and starts the remote Open MPI
# daemons through tests/multihost/rsh-netns.sh (`ip netns exec HOST ...` instead of ssh);
# MPI traffic is forced onto TCP over the veths (btl self,tcp; oob and btl limited to
# 10.251.0.0/24). Checks:
#   - 3 hosts x 1 rank (ring) and 2 hosts x 2 ranks (hier: reduce inside each host, ring
#     across hosts) train-pa, each equal to the one-process run (eval within 0.01 dB);
#   - parallel.json shows the ranks in 3 (resp. 2) distinct network namespaces.
# Needs root, iproute2 (`ip`) and mpirun; exits 77 (skip) saying why when the machine does
# not allow network namespaces. Cleans up the namespaces (and the processes in them) on exit.
# Usage: DD_CLI=build/distdpd tests/multihost/run.sh   (ctest: tests/cli/dp_multihost.sh)
set -euo pipefail
: "${DD_CLI:?set DD_CLI to the distdpd command}"
cd "${DD_SOURCE_DIR:-$(dirname "${BASH_SOURCE[0]}")/../..}"
HERE=$PWD/tests/multihost
DD_CLI=$(realpath "$DD_CLI")

skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces (running as uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "the 'ip' command (iproute2) is not installed"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not found"

T_PASS=0
T_FAIL=0
pass() { T_PASS=$((T_PASS + 1)); }
fail() {
    T_FAIL=$((T_FAIL + 1))
    echo "FAIL: $*" >&2
}

TAG=ddmh$$
SW=${TAG}sw
HOSTS=()
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ddmh.XXXXXX")
cleanup() {
    set +e
    for ns in "${HOSTS[@]}" "$SW"; do
        if ip netns list 2>/dev/null | grep -qw "$ns"; then
            for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
            ip netns del "$ns" 2>/dev/null
        fi
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

if ! err=$(ip netns add "$SW" 2>&1); then
    skip "cannot create a network namespace: $err"
fi
ip -n "$SW" link set lo up
if ! err=$(ip -n "$SW" link add br0 type bridge 2>&1); then skip "cannot create a bridge: $err"; fi
ip -n "$SW" link set br0 up

# host i: namespace ${TAG}h$i, interface eth0 = 10.251.0.i/24, peer p$i on the bridge
MAP=""
make_host() {
    local i=$1 ns=${TAG}h$1 err
    ip netns add "$ns"
    HOSTS+=("$ns")
    if ! err=$(ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$SW" 2>&1); then
        skip "cannot create a veth pair between namespaces: $err"
    fi
    ip -n "$SW" link set "p$i" master br0
    ip -n "$SW" link set "p$i" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.251.0.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    MAP="$MAP 10.251.0.$i=$ns"
}
for i in 1 2 3; do make_host "$i"; done
export DD_MH_MAP=$MAP

# the hosts reach each other over the bridge: nothing listens on port 9, so "connection
# refused" (a TCP reset from the other host) proves the path works
for i in 2 3; do
    ok=0
    for _ in $(seq 1 50); do
        msg=$(ip netns exec "${TAG}h1" bash -c "exec 3<>/dev/tcp/10.251.0.$i/9" 2>&1 || true)
        if grep -q "refused" <<<"$msg"; then ok=1; break; fi
        sleep 0.1
    done
    if [ "$ok" -eq 1 ]; then pass; else fail "host 1 cannot reach 10.251.0.$i: $msg"; fi
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# - the emulated hosts share this machine's cores: each host has slots for its ranks, so
#   Open MPI does not see the oversubscription and would busy-poll (10x slower here);
#   mpi_yield_when_idle 1 makes waiting ranks yield (not needed on real hosts);
# - hier needs the node split: Open MPI 4.1's MPI_Comm_split_type across nodes over TCP
#   breaks the next collective (segfault in ob1, open-mpi/ompi#9010), so the nodes are
#   given as blocks of consecutive ranks (DD_COMM_RANKS_PER_NODE, with --map-by slot).
MCA=(--mca plm_rsh_agent "$HERE/rsh-netns.sh" --mca plm_rsh_no_tree_spawn 1
     --mca btl self,tcp --mca btl_tcp_if_include 10.251.0.0/24 --mca oob_tcp_if_include 10.251.0.0/24
     --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS -x DD_MH_MAP)

json_num() {
    tr -d '\n\t ' <<<"$1" | { grep -o "\"$2\":-\{0,1\}[0-9][0-9.eE+-]*" || true; } | head -n 1 | sed 's/^[^:]*://'
}
near() {
    if [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; then
        pass
    else
        fail "$4: '$1' vs '$2' (tolerance $3)"
    fi
}
ev() {
    "$DD_CLI" eval --run "$1" --ckpt last --json
}

D=$TMP/sim
"$DD_CLI" simulate --out "$D" --samples 12000 --pa wiener-hammerstein -q
SMALL=(--model gru --hidden 6 --frame 32 --stride 4 --batch 30 --lr 2e-2 --epochs 2 -q)
"$DD_CLI" train-pa --data "$D" "${SMALL[@]}" --out "$TMP/one"
REF=$(ev "$TMP/one")

ns_count() { # processes in the emulated hosts whose command line starts with $1
    local n=0 ns pid
    for ns in "${HOSTS[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "^$1"; then n=$((n + 1)); fi
        done
    done
    echo "$n"
}
# launch OUT NP EXE LIMIT MPIRUN...: runs the mpirun line with a wall-clock limit of LIMIT
# seconds, output to OUT.out / OUT.err. Under load, Open MPI 4.1's launch through rsh-
# netns.sh sometimes loses a daemon (orted) before any rank starts and mpirun then waits
# forever (seen about once in 20 launches with both cores busy; orte_startup_timeout does
# not fire). Not the program's fault: when fewer than NP processes of EXE (in the emulated
# hosts) ran within 45 s while mpirun is still waiting, it is killed and the launch tried
# again (at most 3 times, said on stderr). Returns mpirun's status (124 on the limit).
launch() {
    local out=$1 np=$2 exe=$3 limit=$4 attempt pid seen t ns p
    shift 4
    for attempt in 1 2 3; do
        timeout "$limit" "$@" >"$out.out" 2>"$out.err" &
        pid=$!
        seen=0
        for t in $(seq 1 450); do
            kill -0 "$pid" 2>/dev/null || break
            if [ "$(ns_count "$exe")" -ge "$np" ]; then seen=1; break; fi
            sleep 0.1
        done
        if [ "$seen" -eq 0 ] && kill -0 "$pid" 2>/dev/null; then
            echo "multihost: launch $attempt of $(basename "$out") stalled before its $np ranks started (an Open MPI daemon was lost); retrying" >&2
            kill -9 "$pid" 2>/dev/null
            for ns in "${HOSTS[@]}"; do for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; done
            wait "$pid" 2>/dev/null
            continue
        fi
        wait "$pid"
        return $?
    done
    return 124
}

# mpirun inside host 1 with a hostfile (SLOTS ranks per host, consecutive ranks on one
# host); NAME NHOSTS SLOTS ALGO
multihost() {
    local name=$1 nh=$2 slots=$3 algo=$4 np=$(($2 * $3)) rc
    : >"$TMP/hosts_$name"
    for i in $(seq 1 "$nh"); do echo "10.251.0.$i slots=$slots" >>"$TMP/hosts_$name"; done
    set +e
    DD_COMM_RANKS_PER_NODE=$slots launch "$TMP/$name" "$np" "$DD_CLI train-pa" 180 \
        ip netns exec "${TAG}h1" mpirun "${MCA[@]}" -x DD_COMM_RANKS_PER_NODE \
        --hostfile "$TMP/hosts_$name" -np "$np" --map-by slot \
        "$DD_CLI" train-pa --data "$D" "${SMALL[@]}" --allreduce "$algo" --out "$TMP/$name"
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        pass
    else
        fail "$name: mpirun on $nh hosts x $slots exited with $rc: $(tail -n 20 "$TMP/$name.err")"
        return
    fi
    local out p
    out=$(ev "$TMP/$name")
    for k in val_nmse_db test_nmse_db val_aclr_avg_db; do
        near "$(json_num "$out" "$k")" "$(json_num "$REF" "$k")" 0.01 "$name ($np ranks on $nh hosts, $algo) vs one process: $k"
    done
    p=$(cat "$TMP/$name/parallel.json")
    near "$(json_num "$p" ranks)" "$np" 0 "$name: ranks"
    near "$(json_num "$p" distinct_hosts)" "$nh" 0 "$name: ranks in $nh distinct network namespaces"
    echo "$name: $np ranks on $nh emulated hosts ($algo) over TCP: test NMSE $(json_num "$out" test_nmse_db) dB" \
        "(one process $(json_num "$REF" test_nmse_db) dB); rank 0 communication" \
        "$(json_num "$p" comm_s_per_step) s/step, not hidden $(json_num "$p" exposed_s_per_step) s/step"
}
multihost three 3 1 ring
multihost twobytwo 2 2 hier

# the library's MPI tests of data parallelism over the emulated network: equivalence for
# every allreduce algorithm, resume N -> M, per-rank pages of a binary data set
if [ -n "${DD_BINARY_DIR:-}" ] && [ -x "$DD_BINARY_DIR/test_dp_mpi" ]; then
    printf '10.251.0.1 slots=2\n10.251.0.2 slots=2\n' >"$TMP/hosts_lib"
    set +e
    DD_COMM_RANKS_PER_NODE=2 launch "$TMP/lib" 4 "$DD_BINARY_DIR/test_dp_mpi" 240 \
        ip netns exec "${TAG}h1" mpirun "${MCA[@]}" -x DD_COMM_RANKS_PER_NODE \
        --hostfile "$TMP/hosts_lib" -np 4 --map-by slot "$DD_BINARY_DIR/test_dp_mpi"
    rc=$?
    cat "$TMP/lib.err" >>"$TMP/lib.out"
    set -e
    if [ "$rc" -eq 0 ]; then pass; else fail "test_dp_mpi on 2 hosts x 2 ranks: exit $rc: $(grep -E 'FAIL|rror' "$TMP/lib.out" | head -n 10)"; fi
    grep -E "^(equivalence|resume|test_dp_mpi \(rank 0)" "$TMP/lib.out" | sed 's/^/test_dp_mpi on 2 hosts x 2: /' || true
fi

echo "multihost: $T_PASS passed, $T_FAIL failed"
[ "$T_FAIL" -eq 0 ]
