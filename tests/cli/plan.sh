#!/bin/bash
# distdpd plan: the scaling table and recommendation; the model's numbers through --json
# against the alpha-beta formulas for a calibration file with known values; usage and
# runtime errors; --calibrate refusing one rank and working under mpirun -np 2 (its file
# read back by a later plan run); --model: the sharding modes' memory and communication
# through --json against closed forms (tests/test_plan.c has them), model options from
# the registry, and their errors; --cluster: the model-parallel layouts (JSON numbers
# against closed forms, the ranking under a memory limit and its explanation,
# --measure-compute, DLA, a calibrated link, every usage and cluster-file error). Skipped
# while the command is not registered.
set -euo pipefail
source "$(dirname "$0")/common.bash"

run plan --help
if [ "$RC" -ne 0 ] && grep -qi "unknown command" <<<"$ERR$OUT"; then
    echo "SKIP: distdpd has no 'plan' command yet (src/cli/main.c commands table)"
    exit 77
fi
expect_rc 0 "plan --help"
has "$OUT" "usage: distdpd plan" "usage line"
has "$OUT" "exit status" "help documents the exit status"

run plan --params 2000 --ranks 64
expect_rc 0 "plan --params 2000"
has "$OUT" "recommendation at 64 ranks: --allreduce" "recommendation line"
has "$OUT" "<- target" "target row marked"
has "$OUT" "latency-bound" "a 8 KB model is latency-bound"

# known link: exchange alpha 10 us, 1 GB/s; one-way 20 us, 0.5 GB/s; no reduction cost
cat >"$TMP/cal.json" <<'EOF'
{"format": "distdpd-calibration", "version": 1, "ranks": 2,
 "alpha_s": 1e-5, "beta_s_per_byte": 1e-9, "gamma_s_per_byte": 0,
 "alpha_oneway_s": 2e-5, "beta_oneway_s_per_byte": 2e-9}
EOF
run plan --params 1e6 --ranks 8 --calibration "$TMP/cal.json" --json
expect_rc 0 "plan --json with a calibration"
# first table row = 8 ranks, 4 MB: ring 2*7*1e-5 + 2*7/8*4e6*1e-9; tree 2*3*(2e-5 + 4e6*2e-9);
# rhd 2*3*1e-5 + 2*7/8*4e6*1e-9
near "$(json_num "$OUT" ring)" 0.00714 1e-9 "ring time at 8 ranks"
near "$(json_num "$OUT" tree)" 0.04812 1e-9 "tree time at 8 ranks"
near "$(json_num "$OUT" rhd)" 0.00706 1e-9 "rhd time at 8 ranks"
near "$(json_num "$OUT" grad_bytes)" 4000000 0 "gradient bytes"
has "$(tr -d ' \t\n' <<<"$OUT")" '"name":"measured"' "link named measured"

run plan
expect_rc 2 "missing --params"
has "$ERR" "missing --params" "missing --params message"
run plan --params 10 --link token-ring
expect_rc 2 "unknown link"
has "$ERR" "--link: expected ethernet-10g" "unknown link message"
run plan --params 10 --link measured
expect_rc 2 "measured without a calibration"
has "$ERR" "needs --calibration FILE" "measured message"
run plan --params 0
expect_rc 2 "params 0"
# integers are integers, in decimal (issue 10, item 9: --params 1.5 planned for 2)
run plan --params 1.5
expect_rc 2 "--params 1.5"
has "$ERR" "distdpd plan: --params: expected an integer, got '1.5'" "--params 1.5 message"
run plan --params 0x10
expect_rc 2 "--params 0x10"
has "$ERR" "distdpd plan: --params: expected an integer, got '0x10'" "--params 0x10 message"
run plan --params 2000 --samples 2.5
expect_rc 2 "--samples 2.5"
has "$ERR" "distdpd plan: --samples: expected an integer, got '2.5'" "--samples 2.5 message"
run plan --params 010 --json
expect_rc 0 "--params 010"
near "$(json_num "$OUT" grad_bytes)" 40 0 "--params 010 is ten parameters"
run plan --params 2.5e3 --json
expect_rc 0 "--params 2.5e3"
near "$(json_num "$OUT" grad_bytes)" 10000 0 "--params 2.5e3 is 2500 parameters"
# options that another would silently override
run plan --params 2000 --step-compute-s 0.01 --flops 1e10
expect_rc 2 "--flops with --step-compute-s"
has "$ERR" "distdpd plan: --flops cannot be given with --step-compute-s" "--flops message"
run plan --params 2000 --no-overlap --bucket-mb 4
expect_rc 2 "--bucket-mb with --no-overlap"
has "$ERR" "distdpd plan: --bucket-mb cannot be given with --no-overlap" "--bucket-mb message"
run plan --par 2000 --r 8
expect_rc 2 "plan --r"
has "$ERR" "distdpd plan: ambiguous option '--r' (could be --run, --ranks, --ranks-per-node, --replicas)" "plan --r message"
run plan --params 10 --calibration "$TMP/none.json"
expect_rc 1 "missing calibration file"
has "$ERR" "cannot open $TMP/none.json: No such file or directory" "missing file message"
echo '{"format": "distdpd-calibration", "alpha_s": "fast"}' >"$TMP/bad.json"
run plan --params 10 --calibration "$TMP/bad.json"
expect_rc 1 "malformed calibration file"
has "$ERR" "'alpha_s' must be a number" "malformed file message"
run plan --calibrate
expect_rc 1 "calibrate on one rank"
has "$ERR" "needs at least 2 MPI ranks" "one-rank calibration message"

# --model: the sharding modes. gru(hidden=4): 144 floats, stages [0, 112) and [112, 144);
# 4 ranks: slices of 48 floats, batch slices of 2 frames (tests/test_plan.c, closed forms)
run plan --help
has "$OUT" "--model NAME" "help documents --model"
has "$OUT" "--kernel V" "help lists the registry's model options"
has "$OUT" "--shard MODE" "help documents --shard"
run plan --model gru --hidden 4 --batch 6 --frame 10 --eval-batch 2 --nperseg 512 --ranks 4 --shard zero3 --json
expect_rc 0 "plan --model gru --shard zero3 --json"
near "$(json_num "$OUT" grads)" 1088 0 "zero3 gradients: (48 + 2 x 112) floats"
near "$(json_num "$OUT" optim)" 384 0 "zero3 optimiser: 2 x 48 floats"
near "$(json_num "$OUT" collectives)" 5 0 "zero3: 2 reduce-scatters, the loss, 2 gathers"
near "$(json_num "$OUT" gather_bytes)" 432 1e-9 "zero3 gathers (P-1)/P x 576 bytes"
near "$(json_num "$OUT" floats)" 144 0 "arena floats"
run plan --model gru --hidden 4 --batch 6 --frame 10 --eval-batch 2 --nperseg 512 --ranks 4 --shard none --json \
    --bucket-mb 0
expect_rc 0 "plan --model gru --shard none --bucket-mb 0"
near "$(json_num "$OUT" grads)" 576 0 "none: whole gradients"
near "$(json_num "$OUT" optim)" 1152 0 "none: whole optimiser state"
near "$(json_num "$OUT" grad_bytes)" 864 1e-9 "none: ring allreduce 2 (P-1)/P x 576"
near "$(json_num "$OUT" collectives)" 2 0 "none: one allreduce and the loss"
run plan --model gru --hidden 4 --batch 6 --frame 10 --ranks 4 --shard zero1 --opt sgd --json
expect_rc 0 "plan --opt sgd"
near "$(json_num "$OUT" optim)" 0 0 "plain sgd keeps no state"
run plan --model gru --hidden 4 --batch 6 --frame 10 --ranks 4 --shard zero1 --opt sgd --momentum 0.9 --json
near "$(json_num "$OUT" optim)" 192 0 "sgd with momentum: one array of the 48-float slice"
run plan --model hammerstein --hidden 64 --layers 8 --ranks 1,4,16
expect_rc 0 "plan --model hammerstein, three rank counts"
has "$OUT" "hammerstein(hidden=64, layers=8" "model line"
has "$OUT" "     16 zero3" "zero3 row at 16 ranks"
has "$OUT" "vs none" "ratio column"
has "$OUT" "collectives" "collectives column"
run plan --model resnet --kernel 3 --task dla --pa-model gru --pa-hidden 8 --ranks 2 --shard zero2
expect_rc 0 "plan --task dla --pa-model gru --pa-hidden 8"
has "$OUT" "PA model:   gru(hidden=8" "PA model line"
run plan --model gru --task dla
expect_rc 2 "dla without a PA model"
has "$ERR" "distdpd plan: --task dla needs --pa-model NAME" "dla message"
run plan --model gru --pa-model gru
expect_rc 2 "--pa-model with task pa"
has "$ERR" "--pa-model applies to --task dla or ila" "--pa-model message"
run plan --model gru --pa-hidden 8 --task dla --pa-model
expect_rc 2 "--pa-model without a value"
run plan --model gru --task ila --pa-hidden 8
expect_rc 2 "--pa-hidden without --pa-model"
has "$ERR" "distdpd plan: --pa-hidden needs --pa-model NAME" "--pa-hidden message"
run plan --model nosuch
expect_rc 2 "unknown model"
has "$ERR" "distdpd plan: --model: unknown model 'nosuch' (known: gmp," "unknown model message"
run plan --model gru --order 3
expect_rc 2 "an option the model does not have"
has "$ERR" "distdpd plan: --order: model gru has no option order (its options: --hidden, --layers)" "--order message"
run plan --model gru --hidden 0
expect_rc 2 "--hidden 0"
has "$ERR" "distdpd plan: --hidden: must be in [1, 4096], got '0'" "--hidden range message"
run plan --model gru --hidden 1.5
expect_rc 2 "--hidden 1.5"
has "$ERR" "distdpd plan: --hidden: expected a positive integer, got '1.5'" "--hidden decimal only"
run plan --model gru --hidden 0x10
expect_rc 2 "--hidden 0x10"
has "$ERR" "expected a positive integer, got '0x10'" "--hidden no hexadecimal"
run plan --model gru --batch 0
expect_rc 2 "--batch 0"
has "$ERR" "distdpd plan: --batch: must be in [1, 1048576], got '0'" "--batch message"
run plan --params 2000 --batch 8
expect_rc 2 "--batch without --model"
has "$ERR" "distdpd plan: --batch needs --model NAME" "--batch without --model message"
run plan --params 2000 --hidden 8
expect_rc 2 "--hidden without --model"
has "$ERR" "distdpd plan: --hidden needs --model NAME" "--hidden without --model message"
run plan --params 2000 --ranks 2,4
expect_rc 2 "a rank list with --params"
has "$ERR" "--ranks: a list of rank counts needs --model NAME" "rank list message"
run plan --model gru --params 2000
expect_rc 2 "--params with --model"
has "$ERR" "--params cannot be given with --model" "--params with --model message"
run plan --model gru --step-compute-s 0.1
expect_rc 2 "--step-compute-s with --model"
has "$ERR" "--step-compute-s cannot be given with --model" "--step-compute-s message"
run plan --model gru --shard zero4
expect_rc 2 "--shard zero4"
has "$ERR" "distdpd plan: --shard: expected one of none, zero1, zero2, zero3, all; got 'zero4'" "--shard message"
run plan --model gru --momentum 0.9
expect_rc 2 "--momentum with adamw"
has "$ERR" "--momentum applies to --opt sgd only" "--momentum message"
run plan --model gru --ranks 2,,4
expect_rc 2 "--ranks 2,,4"
has "$ERR" "--ranks: expected a positive integer or a list P,P2,..., got '2,,4'" "--ranks 2,,4 message"
run plan --model gru --ranks 2,
expect_rc 2 "--ranks 2,"
has "$ERR" "--ranks: expected a positive integer or a list" "--ranks trailing comma message"
run plan --model gru --bucket-mb 5000
expect_rc 2 "--bucket-mb above 4096 MiB with --model"
has "$ERR" "distdpd plan: --bucket-mb: must be in [0, 4096], got '5000'" "--bucket-mb message"
run plan --model gru --allreduce token
expect_rc 2 "--allreduce token"
# the choices are the registry's (docs/comm.md "Adding an algorithm"): the built-in five first
has "$ERR" "--allreduce: expected ring, tree, rhd, hier" "--allreduce message lists the algorithms"
has "$ERR" "mpi" "--allreduce message lists mpi"
has "$ERR" ", got 'token'" "--allreduce message names the value"

# --cluster: the model-parallel layouts. A cluster of one node of 2 ranks with a known link
# (10 us, 1 GB/s, no reduction cost) and 2 GFLOP/s per rank; resnet hidden 16, 4 blocks,
# batch 16 x 100 samples (tests/test_plan_mp.c has the closed forms)
run plan --help
has "$OUT" "--cluster FILE" "help documents --cluster"
has "$OUT" "--measure-compute" "help documents --measure-compute"
has "$OUT" "--micro M|auto" "help documents --micro"
printf '%s\n' '{"format": "distdpd-cluster", "nodes": 1, "ranks_per_node": 2,' \
    ' "intra_link": {"latency_us": 10, "bandwidth_gbps": 1, "gamma_ns_per_byte": 0}, "memory_mib": 4096, "gflops": 2}' \
    >"$TMP/k.json"
MP=(--model resnet --hidden 16 --layers 4 --kernel 3 --batch 16 --frame 100 --eval-batch 2 --nperseg 256)
# the first layout object of a --json text that contains $2 (each ends with its memory_bytes)
layout() { tr -d '\n\t ' <<<"$1" | grep -o '{"rank":[^{}]*"memory_bytes":{[^{}]*}}' | grep -F -- "$2" | head -n 1; }
run plan "${MP[@]}" --cluster "$TMP/k.json" --json
expect_rc 0 "plan --cluster --json"
FLOPS=$(json_num "$OUT" flops_per_sample)
DP=$(layout "$OUT" '"tp":1,"pp":1,"dp":2,"shard":"none"')
TP=$(layout "$OUT" '"tp":2,"pp":1,"dp":1,"shard":"none"')
PP=$(layout "$OUT" '"tp":1,"pp":2,"dp":1,"shard":"none"')
near "$(json_num "$DP" compute_s)" "$(awk -v f="$FLOPS" 'BEGIN { printf "%.12g", f * 8 * 100 / 2e9 }')" 1e-12 \
    "dp 2: FLOPs per sample x 8 frames x 100 samples / 2 GFLOP/s"
# 2 L = 8 ring allreduces of B F C floats on 2 ranks: 2 alpha + n beta each
near "$(json_num "$TP" tp_s)" 0.0009792 1e-12 "tp 2: 8 x (2 x 10 us + 4 x 16 x 100 x 16 B / 1 GB/s)"
near "$(json_num "$TP" tp_calls)" 8 0 "tp 2: 8 collectives per step"
near "$(json_num "$PP" micro)" 2 0 "pp 2: micro-batches default to pp"
near "$(json_num "$PP" bubble_formula)" 0.333333333 1e-6 "pp 2, M 2: (P-1)/(M+P-1)"
has "$DP" '"fits":true' "dp 2 fits 4 GiB"
near "$(json_num "$OUT" best)" 0 0 "the best is the first row"
ROWS=$(tr -d '\n\t ' <<<"$OUT" | grep -o '"strategy":' | wc -l)
near "$ROWS" 6 0 "2 ranks: dp 2 x 4 shard modes, tp 2, pp 2"
has "$(tr -d '\n\t ' <<<"$OUT")" '"name":"given"' "a link given by numbers"
run plan "${MP[@]}" --cluster "$TMP/k.json"
expect_rc 0 "plan --cluster (text)"
has "$OUT" "layouts, fastest first" "table title"
has "$OUT" "memory/rank  fits" "table header"
has "$OUT" "best: tp 1 x pp 1 x dp 2 (data parallelism)" "best line"
has "$OUT" "next: " "runner-up line"
run plan "${MP[@]}" --cluster "$TMP/k.json" --micro auto --schedule gpipe --json
expect_rc 0 "--micro auto --schedule gpipe"
has "$(tr -d '\n\t ' <<<"$OUT")" '"micro":"auto"' "inputs say auto"
has "$(tr -d '\n\t ' <<<"$OUT")" '"schedule":"gpipe"' "inputs say gpipe"
run plan "${MP[@]}" --cluster "$TMP/k.json" --micro 4 --gflops 4 --json
near "$(json_num "$(layout "$OUT" '"tp":1,"pp":1,"dp":2,"shard":"none"')" compute_s)" \
    "$(awk -v f="$FLOPS" 'BEGIN { printf "%.12g", f * 8 * 100 / 4e9 }')" 1e-12 "--gflops replaces the file's"
near "$(json_num "$(layout "$OUT" '"tp":1,"pp":2')" micro)" 4 0 "--micro 4"
# a memory limit below plain data parallelism's: only tp/pp layouts fit, and the explanation says why
sed 's/"memory_mib": 4096/"memory_mib": 8/' "$TMP/k.json" >"$TMP/k8.json"
MQ=(--model resnet --hidden 64 --layers 8 --batch 32 --frame 100 --eval-batch 1 --nperseg 256 --micro auto)
run plan "${MQ[@]}" --cluster "$TMP/k8.json"
expect_rc 0 "a tight memory limit"
has "$OUT" "why: tp 1 x pp 1 x dp 2 (data parallelism) does not fit:" "why plain data parallelism loses"
has "$OUT" "above the 8.0 MiB limit" "the limit named"
has "$OUT" "4 layouts do not fit 8.0 MiB per rank" "the four data-parallel modes do not fit"
hasnot "$OUT" "best: tp 1 x pp 1" "the best is not plain data parallelism"
run plan "${MQ[@]}" --cluster "$TMP/k8.json" --json
for shard in none zero1 zero2 zero3; do
    has "$(layout "$OUT" "\"tp\":1,\"pp\":1,\"dp\":2,\"shard\":\"$shard\"")" '"fits":false' "dp 2 $shard does not fit"
done
sed 's/"memory_mib": 4096/"memory_mib": 0.01/' "$TMP/k.json" >"$TMP/tiny.json"
run plan "${MP[@]}" --cluster "$TMP/tiny.json"
expect_rc 1 "nothing fits"
has "$ERR" "distdpd plan: no layout fits $TMP/tiny.json's memory per rank" "nothing fits message"
has "$OUT" "no layout fits 10.2 KiB per rank: the smallest" "nothing fits explanation"
# a DPD through a frozen PA model
run plan --model resnet --hidden 16 --layers 4 --task dla --pa-model gru --pa-hidden 8 --batch 8 --cluster "$TMP/k.json"
expect_rc 0 "--task dla with --cluster"
has "$OUT" "PA model:   gru(hidden=8" "PA model line"
# the compute speed measured here
run plan --model resnet --hidden 8 --layers 2 --batch 2 --frame 50 --measure-compute
expect_rc 0 "--measure-compute alone"
has "$OUT" "forward + backward of 2 frames x 50 samples on this process" "measurement line"
has "$OUT" "GFLOP/s" "GFLOP/s printed"
run plan --model resnet --hidden 8 --layers 2 --batch 2 --frame 50 --measure-compute --json
G=$(json_num "$OUT" gflops)
if awk -v g="$G" 'BEGIN { exit !(g > 0) }'; then pass; else fail "--measure-compute --json: gflops '$G'"; fi
run plan "${MP[@]}" --cluster "$TMP/k.json" --measure-compute
expect_rc 0 "--measure-compute with --cluster"
has "$OUT" "GFLOP/s per rank (measured here: forward + backward of 16 frames" "the measured speed is used"
# usage and file errors
run plan --cluster "$TMP/k.json" --params 2000
expect_rc 2 "--cluster without --model"
has "$ERR" "distdpd plan: --cluster needs --model NAME (planning a model's layouts)" "--cluster message"
run plan "${MP[@]}" --micro 4
expect_rc 2 "--micro without --cluster"
has "$ERR" "distdpd plan: --micro needs --cluster FILE (planning the model-parallel layouts)" "--micro message"
run plan "${MP[@]}" --gflops 3
expect_rc 2 "--gflops without --cluster"
has "$ERR" "distdpd plan: --gflops needs --cluster FILE" "--gflops message"
run plan --params 10 --measure-compute
expect_rc 2 "--measure-compute without --model"
has "$ERR" "distdpd plan: --measure-compute needs --model NAME (it times the model)" "--measure-compute message"
run plan "${MP[@]}" --cluster "$TMP/k.json" --measure-compute --gflops 3
expect_rc 2 "--gflops with --measure-compute"
has "$ERR" "distdpd plan: --gflops cannot be given with --measure-compute (it measures the speed)" "--gflops conflict"
for opt in "--ranks 4" "--link shm" "--intra shm" "--ranks-per-node 2" "--shard zero1" "--calibration $TMP/cal.json"; do
    # shellcheck disable=SC2086
    run plan "${MP[@]}" --cluster "$TMP/k.json" $opt
    expect_rc 2 "$opt with --cluster"
    has "$ERR" "distdpd plan: ${opt%% *} cannot be given with --cluster (the cluster file gives the nodes, ranks and links" \
        "$opt with --cluster message"
done
run plan "${MP[@]}" --cluster "$TMP/k.json" --micro 1.5
expect_rc 2 "--micro 1.5"
has "$ERR" "distdpd plan: --micro: expected a positive integer or auto, got '1.5'" "--micro 1.5 message"
run plan "${MP[@]}" --cluster "$TMP/k.json" --micro 0
expect_rc 2 "--micro 0"
has "$ERR" "distdpd plan: --micro: must be in [1, 4096], got '0'" "--micro 0 message"
run plan "${MP[@]}" --cluster "$TMP/k.json" --schedule zigzag
expect_rc 2 "--schedule zigzag"
has "$ERR" "distdpd plan: --schedule: expected one of gpipe, 1f1b, interleaved; got 'zigzag'" "--schedule message"
run plan "${MP[@]}" --cluster "$TMP/k.json" --virtual 2
expect_rc 2 "--virtual 2 with 1f1b"
has "$ERR" "distdpd plan: --virtual 2 needs --schedule interleaved" "--virtual message"
run plan "${MP[@]}" --cluster "$TMP/k.json" --task ila --pa-model gru
expect_rc 2 "--task ila with --cluster"
has "$ERR" "distdpd plan: --task ila cannot be planned with --cluster (the model-parallel plan covers pa and dla)" \
    "--task ila message"
printf '%s\n' '{"nodes": 1, "ranks_per_node": 2, "intra_link": "shm", "memory_mib": 100}' >"$TMP/nog.json"
run plan "${MP[@]}" --cluster "$TMP/nog.json"
expect_rc 2 "no gflops anywhere"
has "$ERR" "distdpd plan: $TMP/nog.json has no \"gflops\": give --gflops G" "no gflops message"
run plan "${MP[@]}" --cluster "$TMP/nonexistent.json"
expect_rc 1 "missing cluster file"
has "$ERR" "cannot open $TMP/nonexistent.json: No such file or directory" "missing cluster file message"
printf '%s\n' '{"nodes": 0, "ranks_per_node": 2}' >"$TMP/bad.json"
run plan "${MP[@]}" --cluster "$TMP/bad.json"
expect_rc 1 "bad cluster file"
has "$ERR" "$TMP/bad.json: field 'nodes' must be an integer in [1, 1048576], got 0" "bad cluster file message"
printf '%s\n' '{"nodes": 1, "ranks_per_node": 2, "intra_link": {"latency_us": 1}, "memory_mib": 1}' >"$TMP/bad.json"
run plan "${MP[@]}" --cluster "$TMP/bad.json"
expect_rc 1 "a link without its bandwidth"
has "$ERR" "$TMP/bad.json: missing field 'intra_link.bandwidth_gbps'" "link field message"

if command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    set +e
    mpirun -np 2 "$DD_CLI" plan --calibrate --calibration "$TMP/here.json" >"$TMP/cal.out" 2>"$TMP/cal.err"
    RC=$?
    set -e
    ERR=$(cat "$TMP/cal.err")
    expect_rc 0 "mpirun -np 2 plan --calibrate"
    has "$(cat "$TMP/cal.out")" "check: measured vs predicted allreduce" "calibration check table"
    run plan --params 1e5 --ranks 16 --calibration "$TMP/here.json"
    expect_rc 0 "plan with the measured calibration"
    has "$OUT" "link:      measured" "measured link used"
    # the calibration in a cluster file, relative to it
    printf '%s\n' '{"nodes": 1, "ranks_per_node": 2, "intra_link": {"calibration": "here.json"}, "memory_mib": 64,' \
        ' "gflops": 1}' >"$TMP/here-cluster.json"
    run plan "${MP[@]}" --cluster "$TMP/here-cluster.json"
    expect_rc 0 "a cluster file with the measured link"
    has "$OUT" "intra:     measured (here.json)" "the calibration file's link"
fi
# --ps-servers: the parameter-server step model against its closed form (docs/ps.md,
# Throughput). The calibration's one-way link: alpha1 20 us, beta1 2 ns/B; P = 1e6
# (M = 4 MB), 6 workers, 3 servers, R = 1, adamw (f = 3), compute 10 ms:
# push = 4 alpha1 + max(M, 2 M (1 + 3)) beta1 = 80 us + 64 ms; pull = 2 alpha1 + 2 M beta1
run plan --params 1e6 --ps-servers 3 --workers 6 --opt adamw --step-compute-s 0.01 --calibration "$TMP/cal.json" --json
expect_rc 0 "plan --ps-servers --json"
near "$(json_num "$OUT" push_s)" 0.06408 1e-12 "ps push time"
near "$(json_num "$OUT" pull_s)" 0.01604 1e-12 "ps pull time"
near "$(json_num "$OUT" step_s)" 0.09012 1e-12 "ps step time"
near "$(json_num "$OUT" pushes_per_s_server)" "$(python3 -c 'print(6 / 0.09012)')" 1e-9 "ps pushes per second per server"
near "$(json_num "$OUT" server_bytes_step)" 64000000 0 "ps bytes per server and step (2 n M/k + 2 R f n M/k)"
has "$OUT" '"server_bound":true' "6 workers on 3 servers are server-bound"
# the issue's formula: alpha 0, R 0: comm = 2 max(M/B, n M/(k B)); k >= n: worker-bound
printf '%s\n' '{"format": "distdpd-calibration", "version": 1, "ranks": 2, "alpha_s": 0, "beta_s_per_byte": 1e-9,' \
    ' "gamma_s_per_byte": 0, "alpha_oneway_s": 0, "beta_oneway_s_per_byte": 1e-9}' >"$TMP/cal0.json"
run plan --params 1e6 --ps-servers 8 --workers 4 --replicas 0 --calibration "$TMP/cal0.json" --json
expect_rc 0 "plan --ps-servers 8 --workers 4"
near "$(json_num "$OUT" comm_s)" 0.008 1e-15 "2 M/B when k >= n"
has "$OUT" '"server_bound":false' "worker-bound when k >= n"
run plan --params 1e6 --ps-servers 2 --workers 4
expect_rc 0 "plan --ps-servers text"
has "$OUT" "pushes per second per server:" "pushes/s line"
has "$OUT" "<- --workers" "the --workers row of the worker table"
has "$OUT" "2 servers, 1 replicas" "default replicas of the cluster file (1 with 2 servers)"
run plan --params 1e6 --ps-servers 2 --replicas 2
expect_rc 2 "--replicas over servers - 1"
has "$ERR" "--replicas 2: at most --ps-servers - 1 = 1" "replicas refusal"
run plan --ps-servers 2
expect_rc 2 "--ps-servers without --params"
has "$ERR" "--ps-servers needs --params P" "ps needs params"
run plan --params 1e6 --workers 4
expect_rc 2 "--workers without --ps-servers"
has "$ERR" "--workers needs --ps-servers K" "workers needs ps-servers"
run plan --params 1e6 --ps-servers 2 --ranks 8
expect_rc 2 "--ranks with --ps-servers"
has "$ERR" "cannot be given with --ps-servers" "ranks refused with ps"
run plan --params 1e6 --ps-servers 0
expect_rc 2 "--ps-servers 0"

# ---- the weak-scaling summary says each threshold once (no "at least 90 % up to 4096
# ranks, at least 50 % up to 4096")
run plan --params 1911 --step-compute-s 1
expect_rc 0 "plan of a compute-bound step"
has "$OUT" "efficiency >= 90 % at every rank count of the table (8 .. 4096)" "one statement when 90 % holds everywhere"
hasnot "$OUT" ">= 50 % up to 4096" "no redundant 50 % clause"
run plan --params 2e6 --step-compute-s 0.01
has "$OUT" "efficiency < 90 % from 8 ranks on, >= 50 % up to" "the 50 % bound where 90 % never holds"

# ---- plan --run: a measured run's step time, strong scaling of its global batch
D=$TMP/sim
run simulate --out "$D" --samples 6000 -q
run train-pa --data "$D" --model gru --hidden 8 --frame 32 --stride 2 --batch 32 --epochs 1 --allreduce ring --out "$TMP/r1" -q
expect_rc 0 "a one-process data-parallel run (dp_steps.csv)"
run plan --run "$TMP/r1"
expect_rc 0 "plan --run"
has "$OUT" "--batch 32 is the global batch, so N ranks take 32/N frames each" "strong scaling of the global batch"
has "$OUT" "from $TMP/r1" "the compute comes from the run"
row1=$(awk '$1 == "1" && $2 == "32"' <<<"$OUT")
has "$row1" "100.0 % ($TMP/r1)" "the run's rank count shows its measured efficiency"
row2=$(awk '$1 == "2" && $2 == "16"' <<<"$OUT")
has "$row2" "not measured: a prediction" "rows no run measured are marked"
if awk '$1 == "64"' <<<"$OUT" | grep -q .; then fail "a row above the global batch (64 ranks for batch 32)"; else pass; fi
has "$OUT" "above 32 ranks a rank would hold less than one frame" "the strong-scaling limit is stated"
# the compute halves with the ranks: the 2-rank step is at least half the 1-rank step
s1=$(awk '{print $3}' <<<"$row1")
s2=$(awk '{print $3}' <<<"$row2")
if awk -v a="$s1" -v b="$s2" 'BEGIN { exit !(b >= a / 2 && b < a) }'; then pass; else fail "2-rank step $s2 vs 1-rank $s1 ms"; fi
run plan --run "$TMP/r1" --params 100
expect_rc 2 "--run with --params"
has "$ERR" "--params cannot be given with --run" "the conflict named"
run plan --run "$TMP/nonexistent"
expect_rc 1 "--run of a missing run"
has "$ERR" "nonexistent" "the run named"
if command -v mpirun >/dev/null 2>&1; then
    mpi_setup
    set +e
    timeout 300 mpirun -np 2 "$DD_CLI" train-pa --data "$D" --model gru --hidden 8 --frame 32 --stride 2 --batch 32 \
        --epochs 1 --out "$TMP/r2" -q >"$TMP/.o" 2>&1
    set -e
    if [ -s "$TMP/r2/dp_steps.csv" ]; then
        run plan --run "$TMP/r1" --run "$TMP/r2"
        expect_rc 0 "plan of a 1- and a 2-rank run"
        row2=$(awk '$1 == "2" && $2 == "16"' <<<"$OUT")
        has "$row2" "($TMP/r2)" "the 2-rank row shows the 2-rank run's measured efficiency: $row2"
        echo "$OUT" | sed -n '1,12p'
    else
        fail "mpirun -np 2 train-pa: $(cat "$TMP/.o")"
    fi
fi

finish
