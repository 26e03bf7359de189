#!/bin/bash
# Gradient compression over a slow link (issue 6): data-parallel training on emulated
# hosts joined by a bandwidth-limited network, dense (`none`) against each compressor;
# time to reach a target test NMSE and seconds per epoch. A benchmark, run by hand (root).
#
# Emulated hosts (the approach of tests/multihost/run.sh, copied so that this script stands
# alone): each host is a network namespace with eth0 = 10.252.0.i/24, joined by a veth pair
# to a bridge in a "switch" namespace; nothing is configured in the machine's own
# namespace. Every host's eth0 and every bridge-side port get a rate limit (both
# directions), `tc qdisc ... root netem rate R` (plus DELAY), or where the kernel has no
# sch_netem, a token bucket `tbf rate R` (the same rate limit; DELAY then needs netem and
# is refused). mpirun runs inside host 1 and starts the other hosts' daemons through a
# generated remote-shell script (`ip netns exec HOST` instead of ssh); MPI traffic is TCP
# over the veths (btl self,tcp). The measured throughput of each rate (a TCP transfer
# from host 1 to host 2) is printed first.
#
# usage: [KNOB=value ...] bench/slow_link.sh [DISTDPD]        (default build/distdpd)
# knobs (environment):
#   RATES        link rates, tc syntax (default "100mbit 1gbit"); "none" = no limit
#   LAYOUTS      HOSTSxRANKS_PER_HOST (default "2x1 2x2")
#   EPOCHS       epochs per run (default 5)
#   MODEL        "gru" (default: --model gru --hidden 23) or any other model name
#                (its defaults); MODEL_ARGS overrides the model arguments entirely
#   DATA         dpa (default: DPA_DIR or ../shared/data/opendpd/DPA_200MHz; skipped with
#                a message when absent), sim (a simulated campaign of SIM_SAMPLES = 38400
#                samples) or the path of a data set
#   COMPRESSORS  labels as in bench/compress_bench.sh (default: none fp16 int8 int4 sign
#                topk randk powersgd-r1 powersgd-r4 dgc-0.001 dgc-0.0037); none is
#                always run (the reference); sgd-none (uncompressed momentum SGD, lr
#                SGD_LR = 0.1) and sgd-dgc (dgc at SGD_DGC_DENSITY = 0.002 without warm-up,
#                clip 1, plain SGD at SGD_LR: bench/dgc_target.sh's pair) compare DGC with
#                its own baseline (give TARGET_DB: the default target is none's)
#   TARGET_DB    target test NMSE in dB (default: the dense run's final test NMSE at the
#                same layout + MARGIN_DB)
#   MARGIN_DB    default 0.5
#   DELAY        one-way delay per qdisc, e.g. 1ms (netem only; default none)
#   QDISC        auto (default: netem if the kernel has it, else tbf), netem or tbf
#   ALLREDUCE    --allreduce of the dense runs (default ring; 2 ranks per host: HIER_ALGO)
#   HIER_ALGO    --allreduce of the dense runs with more than one rank per host
#                (default hier: reduce inside the host, ring across hosts)
#   DGC_WARMUP   dgc warm-up epochs (default 1)
#   OUT          output directory (default DIR_OF_DISTDPD/slow-link); OUT/results.md
#   TIMEOUT      seconds per run (default 1800)
# Link bytes: what all hosts' eth0 sent during the run (start-up, data loading and
# evaluation included: MPI payload + headers + TCP acks + the daemons' traffic), per step.
# Time to target = sum of time_s (training steps of rank 0, evaluation excluded) over the
# epochs up to the first whose test_nmse_db <= target (bench/compress_table.py
# --slow-link OUT makes the tables). The hosts share this machine's cores: more ranks than
# free cores oversubscribe them and the times are then upper bounds.
# Needs root, iproute2 (ip, tc) and mpirun; exits 77 (skip) saying why otherwise. Removes
# the namespaces (and the processes in them) on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
DD=$(realpath "${1:-build/distdpd}")
[ -x "$DD" ] || { echo "bench/slow_link.sh: $DD is not an executable (build it first)" >&2; exit 1; }
RATES=${RATES:-"100mbit 1gbit"}
LAYOUTS=${LAYOUTS:-"2x1 2x2"}
EPOCHS=${EPOCHS:-5}
MODEL=${MODEL:-gru}
DATA=${DATA:-dpa}
COMPRESSORS=${COMPRESSORS:-"none fp16 int8 int4 sign topk randk powersgd-r1 powersgd-r4 dgc-0.001 dgc-0.0037"}
MARGIN_DB=${MARGIN_DB:-0.5}
TARGET_DB=${TARGET_DB:-}
DELAY=${DELAY:-}
QDISC=${QDISC:-auto}
ALLREDUCE=${ALLREDUCE:-ring}
HIER_ALGO=${HIER_ALGO:-hier}
DGC_WARMUP=${DGC_WARMUP:-1}
SIM_SAMPLES=${SIM_SAMPLES:-38400}
OUT=${OUT:-$(dirname "$DD")/slow-link}
TIMEOUT=${TIMEOUT:-1800}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces (running as uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "the 'ip' command (iproute2) is not installed"
command -v tc >/dev/null 2>&1 || skip "the 'tc' command (iproute2) is not installed"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not found"

case $DATA in
dpa)
    DATADIR=${DPA_DIR:-$SRC/../shared/data/opendpd/DPA_200MHz}
    [ -f "$DATADIR/spec.json" ] || skip "$DATADIR not found (DATA=sim uses a simulated campaign)"
    ;;
sim) DATADIR="" ;;
*) DATADIR=$DATA ;;
esac

SGD_LR=${SGD_LR:-0.1}
spec_of() { # as in bench/compress_bench.sh, plus the momentum-SGD pair of bench/dgc_target.sh
    case $1 in
    sgd-none) echo "none --opt sgd --momentum 0.9 --lr $SGD_LR" ;;
    sgd-dgc) echo "dgc,density=${SGD_DGC_DENSITY:-0.002},warmup=0,clip=1 --opt sgd --momentum 0 --lr $SGD_LR" ;;
    int8-sr) echo "int8,stochastic=1" ;;
    topk) echo "topk,density=0.01" ;;
    topk-sampled) echo "topk,density=0.01,sampled=1" ;;
    randk) echo "randk,density=0.01" ;;
    powersgd-r[0-9]*) echo "powersgd,rank=${1#powersgd-r}" ;;
    dgc-*-m0) local d=${1#dgc-}; echo "dgc,density=${d%-m0},warmup=$DGC_WARMUP,momentum=0" ;;
    dgc-*) echo "dgc,density=${1#dgc-},warmup=$DGC_WARMUP" ;;
    int4-noef) echo "int4 --error-feedback off" ;;
    topk-noef) echo "topk,density=0.01 --error-feedback off" ;;
    sign-noef) echo "sign --error-feedback off" ;;
    *) echo "$1" ;;
    esac
}
if [ -n "${MODEL_ARGS:-}" ]; then
    MARGS=$MODEL_ARGS
elif [ "$MODEL" = gru ]; then
    MARGS="--model gru --hidden 23"
else
    MARGS="--model $MODEL"
fi
fname() { tr -c 'A-Za-z0-9._=-' '_' <<<"$1" | sed 's/_$//'; }

TAG=ddsl$$
SW=${TAG}sw
HOSTS=()
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ddsl.XXXXXX")
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
trap 'exit 130' INT TERM

if ! err=$(ip netns add "$SW" 2>&1); then skip "cannot create a network namespace: $err"; fi
ip -n "$SW" link set lo up
if ! err=$(ip -n "$SW" link add br0 type bridge 2>&1); then skip "cannot create a bridge: $err"; fi
ip -n "$SW" link set br0 up

NHOSTS=0
for l in $LAYOUTS; do [ "${l%x*}" -gt "$NHOSTS" ] && NHOSTS=${l%x*}; done
MAP=""
for i in $(seq 1 "$NHOSTS"); do
    ns=${TAG}h$i
    ip netns add "$ns"
    HOSTS+=("$ns")
    if ! err=$(ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$SW" 2>&1); then
        skip "cannot create a veth pair between namespaces: $err"
    fi
    ip -n "$SW" link set "p$i" master br0
    ip -n "$SW" link set "p$i" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.252.0.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    MAP="$MAP 10.252.0.$i=$ns"
done
export DD_SL_MAP=$MAP

# the remote shell of mpirun: `ip netns exec` into the namespace holding the address
cat >"$TMP/rsh.sh" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ]; do
    case "$1" in
    -*) shift ;;
    *) break ;;
    esac
done
host=$1
shift
ns=
for pair in $DD_SL_MAP; do
    if [ "${pair%%=*}" = "$host" ]; then ns=${pair#*=}; fi
done
if [ -z "$ns" ]; then
    echo "rsh: unknown emulated host '$host' (map: $DD_SL_MAP)" >&2
    exit 255
fi
exec ip netns exec "$ns" /bin/sh -c "$*"
EOF
chmod +x "$TMP/rsh.sh"

# the qdisc: netem if the kernel has it
probe() { ip netns exec "${TAG}h1" tc qdisc replace dev eth0 root "$@" 2>&1 && ip netns exec "${TAG}h1" tc qdisc del dev eth0 root 2>/dev/null; }
if [ "$QDISC" = auto ] || [ "$QDISC" = netem ]; then
    if msg=$(probe netem rate 100mbit); then
        QDISC=netem
    elif [ "$QDISC" = netem ]; then
        skip "tc netem is not available (kernel without sch_netem: '$msg')"
    else
        echo "note: tc netem is not available here ('$msg'; no sch_netem module in this kernel): using tbf (token bucket) for the rate limit"
        QDISC=tbf
    fi
fi
if [ "$QDISC" = tbf ]; then
    msg=$(probe tbf rate 100mbit burst 16kb latency 50ms) || skip "neither netem nor tbf qdiscs are available: $msg"
    [ -z "$DELAY" ] || skip "DELAY=$DELAY needs tc netem, which this kernel does not have"
fi

# bytes per second of a tc rate ("100mbit", "1gbit", "500kbit")
rate_bps() {
    awk -v r="$1" 'BEGIN { v = r + 0; u = tolower(substr(r, length(v "") + 1));
        m = 1; if (u ~ /^k/) m = 1e3; else if (u ~ /^m/) m = 1e6; else if (u ~ /^g/) m = 1e9;
        if (u ~ /bps$/) m *= 8; printf "%.0f\n", v * m / 8 }'
}
# set_rate RATE: every host's eth0 and every bridge port, or no limit for "none"
set_rate() {
    local r=$1 i args
    for i in $(seq 1 "$NHOSTS"); do
        for dev in "${TAG}h$i eth0" "$SW p$i"; do
            set -- $dev
            ip netns exec "$1" tc qdisc del dev "$2" root 2>/dev/null || true
            [ "$r" = none ] && continue
            if [ "$QDISC" = netem ]; then
                args=(netem rate "$r" limit 100000)
                [ -z "$DELAY" ] || args+=(delay "$DELAY")
            else
                local b
                b=$(awk -v B="$(rate_bps "$r")" 'BEGIN { b = B / 1000; if (b < 16384) b = 16384; printf "%d\n", b }')
                args=(tbf rate "$r" burst "$b" latency 100ms)
            fi
            ip netns exec "$1" tc qdisc add dev "$2" root "${args[@]}"
        done
    done
}

# throughput host 1 -> host 2 with the current limit: 4 MB over TCP
measure() {
    ip netns exec "${TAG}h2" "$PY" - <<'EOF' >"$TMP/srv.out" 2>&1 &
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.252.0.2", 5201)); s.listen(1); s.settimeout(60)
c, _ = s.accept(); n = 0
while n < 4 << 20:
    b = c.recv(1 << 16)
    if not b: break
    n += len(b)
c.sendall(b"k"); c.close()
EOF
    local srv=$!
    ip netns exec "${TAG}h1" "$PY" - <<'EOF' || true
import socket, time
for _ in range(100):
    try:
        c = socket.create_connection(("10.252.0.2", 5201), timeout=60); break
    except OSError:
        time.sleep(0.05)
buf = b"x" * (1 << 16); t = time.time()
for _ in range(64): c.sendall(buf)
c.recv(1); dt = time.time() - t
print("%.1f Mbit/s" % (8 * 4 * 2**20 / dt / 1e6))
EOF
    wait "$srv" 2>/dev/null || true
}

# bytes every host sent on its eth0 so far (IP packets: payload + TCP/IP headers + acks)
link_tx() {
    local i t=0 b
    for i in $(seq 1 "$NHOSTS"); do
        b=$(ip -n "${TAG}h$i" -s -j link show dev eth0 |
            "$PY" -c 'import json, sys; d = json.load(sys.stdin)[0]; print(d.get("stats64", d.get("stats", {}))["tx"]["bytes"])')
        t=$((t + b))
    done
    echo "$t"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
MCA=(--mca plm_rsh_agent "$TMP/rsh.sh" --mca plm_rsh_no_tree_spawn 1
     --mca btl self,tcp --mca btl_tcp_if_include 10.252.0.0/24 --mca oob_tcp_if_include 10.252.0.0/24
     --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS -x DD_SL_MAP)

mkdir -p "$OUT/runs"
OUT=$(realpath "$OUT")
if [ -z "$DATADIR" ]; then
    DATADIR=$OUT/data/sim
    [ -f "$DATADIR/spec.json" ] || "$DD" simulate --out "$DATADIR" --samples "$SIM_SAMPLES" -q
fi
DATADIR=$(realpath "$DATADIR")
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); $(uname -r)"
    echo "distdpd: $DD"
    echo "data: $DATADIR; model: $MARGS; epochs: $EPOCHS; layouts (hosts x ranks): $LAYOUTS; dgc warm-up: $DGC_WARMUP"
    echo "link: $QDISC rate on every host's eth0 and every bridge port${DELAY:+, delay $DELAY}"
    if [ -n "$TARGET_DB" ]; then echo "target: $TARGET_DB dB"; else echo "target: final test NMSE of the dense run at the same rate and layout + $MARGIN_DB dB"; fi
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/env.txt"
cat "$OUT/env.txt"
: >"$OUT/runs.tsv"

for rate in $RATES; do
    set_rate "$rate"
    echo "rate $rate: measured host 1 -> host 2: $(measure)" | tee -a "$OUT/env.txt"
    for layout in $LAYOUTS; do
        nh=${layout%x*}
        slots=${layout#*x}
        np=$((nh * slots))
        algo=$ALLREDUCE
        [ "$slots" -gt 1 ] && algo=$HIER_ALGO
        : >"$TMP/hosts"
        for i in $(seq 1 "$nh"); do echo "10.252.0.$i slots=$slots" >>"$TMP/hosts"; done
        labels="none"
        for c in $COMPRESSORS; do [ "$c" = none ] || labels="$labels $c"; done
        for label in $labels; do
            full=$(spec_of "$label")
            spec=${full%% *}
            flags=""
            [ "$full" = "$spec" ] || flags=${full#* }
            name=$(fname "${rate}_${layout}_${label}")
            run=$OUT/runs/$name
            rm -rf "$run" "$run.log"
            printf '%s, %s hosts x %s: %s ... ' "$rate" "$nh" "$slots" "$full"
            # every run starts from the same TCP state: no cached ssthresh/RTT of the
            # previous run (or of the throughput test) for the other hosts' addresses
            for i in $(seq 1 "$NHOSTS"); do ip -n "${TAG}h$i" tcp_metrics flush all 2>/dev/null || true; done
            tx0=$(link_tx)
            t0=$(date +%s.%N)
            set +e
            # shellcheck disable=SC2086
            DD_COMM_RANKS_PER_NODE=$slots timeout "$TIMEOUT" ip netns exec "${TAG}h1" mpirun "${MCA[@]}" \
                -x DD_COMM_RANKS_PER_NODE --hostfile "$TMP/hosts" -np "$np" --map-by slot \
                "$DD" train-pa --data "$DATADIR" $MARGS --frame 200 --stride 1 --batch 64 --lr 5e-3 --opt adamw \
                --seed 0 --epochs "$EPOCHS" --no-report -q --allreduce "$algo" --compress "$spec" $flags \
                --out "$run" >"$run.log" 2>&1
            rc=$?
            set -e
            t1=$(date +%s.%N)
            tx1=$(link_tx)
            wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rate" "$layout" "$np" "$label" "$full" "$EPOCHS" "$wall" "$rc" \
                "runs/$name" $((tx1 - tx0)) >>"$OUT/runs.tsv"
            if [ "$rc" -eq 0 ]; then
                echo "$(awk -v w="$wall" 'BEGIN { printf "%.1f s", w }'), test NMSE" \
                    "$(grep -o '"test_nmse_db":[-0-9.eE+]*' "$run/metrics.jsonl" | tail -n 1 | sed 's/.*://') dB"
            else
                echo "FAILED (exit $rc): $(grep -v 'Data unpack' "$run.log" | tail -n 3 | tr '\n' ' ')"
            fi
        done
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
TARGET_DB=$TARGET_DB MARGIN_DB=$MARGIN_DB "$PY" "$SRC/bench/compress_table.py" --slow-link "$OUT"
echo "results: $OUT/results.csv, $OUT/results.md"
