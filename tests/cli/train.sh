#!/bin/bash
# distdpd train-pa / train-dpd / run / eval on a tiny simulated data set (distdpd simulate):
# the run directory's files and their contents, exact resume (1 epoch + --resume to 2
# epochs re-evaluates to the same numbers as 2 epochs straight), eval reproducing the best
# epoch of metrics.jsonl, run writing CSV / raw / SigMF of the right length, DLA and ILA
# DPD runs measured on the true simulated PA, and the documented errors and exit statuses
# for bad options and bad checkpoints.
set -euo pipefail
source "$(dirname "$0")/common.bash"

small_sim

# ---- train-pa
run train-pa --data "$D" "${SMALL[@]}" --epochs 2 --out "$TMP/pa" --progress lines
expect_rc 0 "train-pa"
has "$OUT" "best epoch" "summary on stdout"
has "$ERR" "epoch   1/2" "progress lines on stderr"
for f in config.json metrics.jsonl history.csv best.ckpt last.ckpt report.html; do
    if [ -s "$TMP/pa/$f" ]; then pass; else fail "train-pa: $f missing"; fi
done
M=$(cat "$TMP/pa/metrics.jsonl")
lines=$(wc -l <<<"$M")
if [ "$lines" -eq 2 ]; then pass; else fail "metrics.jsonl has $lines lines, want 2"; fi
nbest=$(grep -c '"best":true' <<<"$M" || true)
if [ "$nbest" -eq 1 ]; then pass; else fail "metrics.jsonl: $nbest best lines, want 1"; fi
for k in epoch time_s eval_time_s lr train_loss val_nmse_db test_nmse_db val_aclr_avg_db test_aclr_avg_db val_evm_db test_evm_db; do
    has "$(head -n 1 <<<"$M")" "\"$k\":" "metrics.jsonl key $k"
done
has "$(head -n 1 "$TMP/pa/history.csv")" "EPOCH,N_EPOCH,TIME:,LR,BATCH_SIZE,N_PARAM,FRAME_LENGTH,BACKBONE,HIDDEN_SIZE,TRAIN_LOSS" "history.csv header"
has "$(cat "$TMP/pa/config.json")" '"hidden":	6' "config.json holds the resolved configuration"
has "$(cat "$TMP/pa/report.html")" "<svg" "report.html has plots"

# ---- exact resume: 1 epoch, then --resume to 2 epochs == 2 epochs straight
run train-pa --data "$D" "${SMALL[@]}" --epochs 1 --out "$TMP/pa_b" -q
expect_rc 0 "train-pa 1 epoch"
run train-pa --resume "$TMP/pa_b" --epochs 2 -q
expect_rc 0 "train-pa --resume"
run eval --run "$TMP/pa" --ckpt last --json
A=$(sed 's/,"eval_time_s":[^,}]*//; s/"run":"[^"]*",//' <<<"$OUT")
run eval --run "$TMP/pa_b" --ckpt last --json
B=$(sed 's/,"eval_time_s":[^,}]*//; s/"run":"[^"]*",//' <<<"$OUT")
if [ -n "$A" ] && [ "$A" = "$B" ]; then pass; else fail "resumed run differs: $A vs $B"; fi
run train-pa --resume "$TMP/pa_b" --lr 1e-3
expect_rc 2 "--lr with --resume"
has "$ERR" "cannot be given with --resume" "resume keeps the configuration"
run train-pa --data "$D" "${SMALL[@]}" --epochs 1 --out "$TMP/pa"
expect_rc 1 "training into an existing run"
has "$ERR" "already holds a run" "existing run refused"

# ---- eval reproduces the best epoch
run eval --run "$TMP/pa" --json
expect_rc 0 "eval --json"
best_line=$(grep '"best":true' "$TMP/pa/metrics.jsonl")
near "$(json_num "$OUT" test_nmse_db)" "$(json_num "$best_line" test_nmse_db)" 1e-6 "eval test NMSE = best epoch's"
near "$(json_num "$OUT" val_aclr_avg_db)" "$(json_num "$best_line" val_aclr_avg_db)" 1e-6 "eval val ACLR = best epoch's"
run eval --run "$TMP/pa"
expect_rc 0 "eval (text)"
has "$OUT" "test: model" "eval table"

# ---- run: any length, as one stream, CSV / raw / SigMF
run run --run "$TMP/pa" --in "$D/test_input.csv" --out "$TMP/y.csv"
expect_rc 0 "run"
n_in=$(wc -l <"$D/test_input.csv")
n_out=$(wc -l <"$TMP/y.csv")
if [ "$n_in" -eq "$n_out" ]; then pass; else fail "run wrote $n_out lines for $n_in"; fi
run metrics --ref "$D/test_output.csv" --test "$TMP/y.csv" --spec "$D/spec.json" --json --nmse pooled
expect_rc 0 "metrics of the run output"
nmse=$(json_num "$OUT" nmse_db)
if awk -v v="$nmse" 'BEGIN { exit !(v < -15) }'; then pass; else fail "run output NMSE $nmse dB"; fi
run run --run "$TMP/pa" --in "$D/test_input.csv" --out "$TMP/y.cf32"
expect_rc 0 "run to raw float32"
sz=$(stat -c %s "$TMP/y.cf32")
if [ "$sz" -eq $(((n_in - 1) * 8)) ]; then pass; else fail "raw output has $sz bytes"; fi
run run --run "$TMP/pa" --in "$TMP/y.cf32" --out "$TMP/z.sigmf-meta"
expect_rc 0 "run raw -> SigMF"
if [ -s "$TMP/z.sigmf-data" ]; then pass; else fail "SigMF data missing"; fi
mkfifo "$TMP/fifo.cf32" # nobody writes to it: refused at once (fopen waited for a writer)
run run --run "$TMP/pa" --in "$TMP/fifo.cf32" --out "$TMP/f.csv"
expect_rc 1 "run --in FIFO"
has "$ERR" "cannot read $TMP/fifo.cf32: not a regular file (a FIFO)" "run --in FIFO message"
run run --run "$TMP/pa" --in "$D/test_input.csv" --out "$TMP/y2.csv" --through-pa
expect_rc 2 "--through-pa on a PA run"

# ---- DPD: direct and indirect learning, measured on the true PA (simulation.json)
run train-dpd --pa-run "$TMP/pa" "${SMALL[@]}" --epochs 2 --out "$TMP/dpd" -q
expect_rc 0 "train-dpd"
has "$(cat "$TMP/dpd/metrics.jsonl")" '"true_test_aclr_avg_db":-' "true PA metrics"
has "$(cat "$TMP/dpd/config.json")" '"target_gain"' "target gain recorded"
run eval --run "$TMP/dpd"
expect_rc 0 "eval of a DPD run"
has "$OUT" "test: true PA, no DPD" "true PA baseline"
run run --run "$TMP/dpd" --in "$D/test_input.csv" --out "$TMP/u.csv" --through-pa
expect_rc 0 "run --through-pa"
run train-dpd --pa-run "$TMP/pa" "${SMALL[@]}" --epochs 1 --ila --out "$TMP/ila" -q
expect_rc 0 "train-dpd --ila"
has "$(cat "$TMP/ila/config.json")" '"task":	"ila"' "ILA run"
run train-dpd --pa-run "$TMP/dpd" "${SMALL[@]}" --epochs 1 --out "$TMP/dpd2" -q
expect_rc 1 "a DPD run as --pa-run"
has "$ERR" "not a PA model run" "DPD run refused as PA run"

# ---- usage errors (exit 2) with exact messages
run train-pa --data "$D" --out "$TMP/x" --frame abc
expect_rc 2 "--frame abc"
has "$ERR" "--frame: expected a positive integer, got 'abc'" "--frame message"
run train-pa --data "$D" --out "$TMP/x" --batch 0
expect_rc 2 "--batch 0"
run train-pa --data "$D" --out "$TMP/x" --opt lion
expect_rc 2 "--opt lion"
has "$ERR" "--opt: expected one of sgd, adam, adamw, rmsprop; got 'lion'" "--opt message"
run train-pa --data "$D" --out "$TMP/x" --lr 0
expect_rc 2 "--lr 0"
run train-pa --out "$TMP/x"
expect_rc 2 "missing --data"
has "$ERR" "missing --data" "missing --data message"
# without --out the run gets a directory of its own (tests/cli/opendpd.sh)
run train-dpd --out "$TMP/x"
expect_rc 2 "missing --pa-run"
run train-pa --data "$D" --out "$TMP/x" --ila
expect_rc 2 "--ila on train-pa"
run train-pa --data "$D" --out "$TMP/x" --bogus
expect_rc 2 "unknown option"
run train-pa --data "$D" --out "$TMP/x" --model nosuchmodel
expect_rc 2 "unknown model"
has "$ERR" "--model: unknown model 'nosuchmodel'" "unknown model message"
run eval --run "$TMP/pa" --ckpt worst
expect_rc 2 "--ckpt worst"
run run --run "$TMP/pa" --in "$D/test_input.csv"
expect_rc 2 "run without --out"
for c in train-pa train-dpd run eval; do
    run "$c" --help
    expect_rc 0 "$c --help"
    has "$OUT" "usage: distdpd $c" "$c --help text"
done
run train-pa --model list
expect_rc 0 "--model list"
has "$OUT" "gru" "model list"

# ---- --batch above the training frames (issue 10, item 5): memory and time bounded by the
# data, the same training as --batch = the frame count, a warning. Before, --batch 1048576
# allocated the batch buffers for 1048576 frames (> 9.3 GB, over a minute): under a 1 GB
# address-space limit it failed with "out of memory for the batch buffers".
FR=$(json_num "$(cat "$TMP/pa/config.json")" train_frames)
[ -n "$FR" ] && [ "$FR" -gt 100 ] && pass || fail "train_frames in config.json: '$FR'"
# runs distdpd under `ulimit -v` (KiB) and a timeout: RC, ERR, SECS (wall), CPU (seconds)
# and RSS (peak KiB) from /usr/bin/time when there is one, else empty
bounded() {
    local limit=$1
    shift
    local t0 t1
    t0=$(date +%s.%N)
    set +e
    if [ -x /usr/bin/time ]; then
        (ulimit -v "$limit"; exec /usr/bin/time -f '%U %S %M' -o "$TMP/.rss" timeout 120 "$DD_CLI" "$@") >"$TMP/.out" 2>"$TMP/.err"
    else
        (ulimit -v "$limit"; exec timeout 120 "$DD_CLI" "$@") >"$TMP/.out" 2>"$TMP/.err"
    fi
    RC=$?
    set -e
    t1=$(date +%s.%N)
    ERR=$(cat "$TMP/.err")
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    # CPU seconds (user + system) and peak RSS: what the run itself used, whatever else the
    # machine's cores were doing
    CPU="" RSS=""
    if [ -x /usr/bin/time ]; then read -r CPU RSS < <(tail -n 1 "$TMP/.rss" | awk '{ printf "%.2f %s\n", $1 + $2, $3 }'); fi
}
NOTIME=(--progress none --no-report --epochs 2)
LIMIT=1000000
if ! (ulimit -v "$LIMIT"; "$DD_CLI" --version >/dev/null 2>&1); then
    LIMIT=unlimited # a sanitizer build reserves terabytes of address space
    echo "note: $DD_CLI does not start under ulimit -v 1000000: memory is checked by peak RSS only"
fi
bounded "$LIMIT" train-pa --data "$D" "${SMALL[@]}" "${NOTIME[@]}" --batch "$FR" --out "$TMP/b_ref"
expect_rc 0 "--batch = the $FR frames"
T_REF=$SECS
C_REF=$CPU
R_REF=$RSS
for B in 100000 1048576; do
    bounded "$LIMIT" train-pa --data "$D" "${SMALL[@]}" "${NOTIME[@]}" --batch $B --out "$TMP/b_$B"
    expect_rc 0 "--batch $B on $FR frames under a 1 GB address-space limit"
    has "$ERR" "distdpd: warning: batch $B is larger than the $FR training frames: each step takes all $FR frames (as batch $FR)" "--batch $B warning"
    echo "--batch $B on $FR frames: ${SECS} s (CPU ${CPU:-?} s), peak RSS ${RSS:-?} KiB (--batch $FR: ${T_REF} s, CPU ${C_REF:-?} s, ${R_REF:-?} KiB)"
    # work proportional to the batch asked for would take about 1000x the CPU time; the
    # wall time is not compared (ctest -j2 on 2 cores can slow one run several times)
    if [ -n "$CPU" ] && [ -n "$C_REF" ]; then
        awk -v t="$CPU" -v r="$C_REF" 'BEGIN { exit !(t <= 3 * r + 2) }' && pass ||
            fail "--batch $B took $CPU CPU seconds, --batch $FR $C_REF"
    fi
    if [ -n "$RSS" ] && [ -n "$R_REF" ]; then
        awk -v m="$RSS" -v r="$R_REF" 'BEGIN { exit !(m <= r + 16384) }' && pass || fail "--batch $B peak RSS $RSS KiB, --batch $FR $R_REF KiB"
    fi
    strip() { sed 's/"time_s":[^,]*,"eval_time_s":[^,]*,//; s/,"ckpt_[a-z_]*":[^,}]*//g' "$1/metrics.jsonl"; }
    if [ -s "$TMP/b_$B/metrics.jsonl" ] && [ "$(strip "$TMP/b_ref")" = "$(strip "$TMP/b_$B")" ]; then
        pass
    else
        fail "--batch $B trains differently from --batch $FR"
    fi
done
has "$(cat "$TMP/b_1048576/config.json")" '"batch":	1048576' "config.json keeps the batch asked for"

# ---- numbers are decimal (issue 10, item 9): --seed 010 was read as octal 8, --seed 08 refused.
# The usage errors below give a short training too, so that a build that misses one fails
# fast instead of training the default recipe.
CHEAP=("${SMALL[@]}" "${NOTIME[@]}" --epochs 1 -q)
run train-pa --data "$D" "${SMALL[@]}" "${NOTIME[@]}" --epochs 1 --seed 010 --out "$TMP/seed010" -q
expect_rc 0 "--seed 010"
has "$(cat "$TMP/seed010/config.json")" '"seed":	"10"' "--seed 010 is ten"
run train-pa --data "$D" "${SMALL[@]}" "${NOTIME[@]}" --epochs 1 --seed 08 --out "$TMP/seed08" -q
expect_rc 0 "--seed 08"
has "$(cat "$TMP/seed08/config.json")" '"seed":	"8"' "--seed 08 is eight"
run train-pa --data "$D" "${SMALL[@]}" "${NOTIME[@]}" --epochs 1 --hidden 010 --out "$TMP/hidden010" -q
expect_rc 0 "--hidden 010"
has "$(cat "$TMP/hidden010/config.json")" '"hidden":	10' "--hidden 010 is ten, as --seed 010"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --seed 0x10
expect_rc 2 "--seed 0x10"
has "$ERR" "distdpd train-pa: --seed: expected a non-negative integer, got '0x10'" "--seed 0x10 message"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --seed 18446744073709551616
expect_rc 2 "--seed 2^64"
has "$ERR" "--seed: must be in [0, 18446744073709551615], got '18446744073709551616'" "--seed range message"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --lr 0x1p-8
expect_rc 2 "--lr 0x1p-8"
has "$ERR" "distdpd train-pa: --lr: expected a number, got '0x1p-8'" "hexadecimal --lr refused"

# ---- option names, not values, in "belongs to train-dpd"
for o in "--pa-run $TMP/pa" "--ila" "--gain-mode max" "--gain-mode=ls" "--select true" "--gain 2"; do
    name=${o%% *}
    name=${name%%=*}
    # shellcheck disable=SC2086
    run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" $o
    expect_rc 2 "train-pa $o"
    has "$ERR" "distdpd train-pa: option '$name' belongs to train-dpd" "train-pa $o names $name"
done

# ---- an abbreviation of several options is ambiguous, not unknown
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --e 3
expect_rc 2 "--e"
has "$ERR" "distdpd train-pa: ambiguous option '--e' (could be --epochs, --eval-batch, --error-feedback)" "--e message"
run train-dpd --pa-run "$TMP/pa" "${CHEAP[@]}" --out "$TMP/x" --gain-m=ls --g 2
expect_rc 2 "--g"
has "$ERR" "ambiguous option '--g' (could be --gamma, --gain, --gain-mode, --grid-order)" "--g message"

# ---- --gain: (0, 1e6] as the help says (0 was taken as "derive G from the data")
run train-dpd --pa-run "$TMP/pa" "${CHEAP[@]}" --out "$TMP/x" --gain 0
expect_rc 2 "--gain 0"
has "$ERR" "distdpd train-dpd: --gain: must be in (0, 1e+06], got '0' (leave --gain out to derive G from the training split)" "--gain 0 message"
run train-dpd --pa-run "$TMP/pa" "${CHEAP[@]}" --out "$TMP/x" --gain 2e6
expect_rc 2 "--gain 2e6"
has "$ERR" "--gain: must be in (0, 1e+06], got '2e6'" "--gain 2e6 message"
run train-dpd --help
has "$OUT" "--gain G            target gain, 0 < G <= 1e6" "help gives --gain's range"

# ---- contradictory options are usage errors (they were silently ignored)
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --lr-schedule cosine --patience 3
expect_rc 2 "--patience with cosine"
has "$ERR" "distdpd train-pa: --patience applies to --lr-schedule plateau only, not cosine" "--patience message"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --lr-schedule step --factor 0.3
expect_rc 2 "--factor with step"
has "$ERR" "--factor applies to --lr-schedule plateau only, not step" "--factor message"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --lr-schedule constant --min-lr 1e-6
expect_rc 2 "--min-lr with constant"
has "$ERR" "--min-lr applies to --lr-schedule plateau only, not constant" "--min-lr message"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --step-size 100
expect_rc 2 "--step-size with the default plateau"
has "$ERR" "--step-size applies to --lr-schedule step only, not plateau (the default)" "--step-size message"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --lr-schedule cosine --gamma 0.5
expect_rc 2 "--gamma with cosine"
has "$ERR" "--gamma applies to --lr-schedule step only, not cosine" "--gamma message"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --lr 1e-3 --min-lr 1e-2
expect_rc 2 "--min-lr above --lr"
has "$ERR" "distdpd train-pa: --min-lr 0.01 is above --lr 0.001" "--min-lr above --lr message"
run train-dpd --pa-run "$TMP/pa" "${CHEAP[@]}" --out "$TMP/x" --gain 0.5 --gain-mode ls
expect_rc 2 "--gain with --gain-mode"
has "$ERR" "--gain-mode chooses how G is derived from the training split: it cannot be given with --gain" "--gain-mode message"
run train-pa --data "$D" "${CHEAP[@]}" --out "$TMP/x" --opt adam --momentum 0.9
expect_rc 2 "--momentum with adam"
has "$ERR" "--momentum applies to --opt sgd only" "--momentum message"
run train-pa --data "$D" "${SMALL[@]}" "${NOTIME[@]}" --epochs 1 --lr-schedule step --step-size 10 --gamma 0.5 --out "$TMP/step" -q
expect_rc 0 "--step-size and --gamma with step"
run train-pa --data "$D" "${SMALL[@]}" "${NOTIME[@]}" --epochs 1 --patience 2 --factor 0.3 --min-lr 1e-4 --out "$TMP/plateau" -q
expect_rc 0 "plateau settings with the default plateau"
[ ! -e "$TMP/x" ] && pass || fail "a usage error wrote $TMP/x"

# ---- runtime errors (exit 1): missing data, missing run, bad checkpoints
run train-pa --data "$TMP/nonexistent" --out "$TMP/x2" --epochs 1
expect_rc 1 "missing data set"
run eval --run "$TMP/nonexistent"
expect_rc 1 "missing run"
has "$ERR" "no such run" "missing run message"
mkdir -p "$TMP/bad"
cp "$TMP/pa/config.json" "$TMP/bad/"
head -c 1000 "$TMP/pa/best.ckpt" >"$TMP/bad/best.ckpt"
run eval --run "$TMP/bad" --data "$D"
expect_rc 1 "truncated checkpoint"
has "$ERR" "truncated" "truncated checkpoint message"
cp "$TMP/pa/best.ckpt" "$TMP/bad/best.ckpt"
size=$(stat -c %s "$TMP/bad/best.ckpt")
printf '\x5a' | dd of="$TMP/bad/best.ckpt" bs=1 seek=$((size - 40)) conv=notrunc status=none
run eval --run "$TMP/bad" --data "$D"
expect_rc 1 "bit-flipped checkpoint"
has "$ERR" "CRC mismatch" "bit-flip message"
echo "not a checkpoint" >"$TMP/bad/best.ckpt"
run run --run "$TMP/bad" --in "$D/test_input.csv" --out "$TMP/q.csv"
expect_rc 1 "not a checkpoint"
has "$ERR" "not a distdpd checkpoint" "foreign file message"

finish
