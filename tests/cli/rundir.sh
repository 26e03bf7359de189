#!/bin/bash
# Run directories have one owner and one identity (docs/training.md "Run directory"), and
# the commands do not replace data they were not asked to:
# - a second train-pa into a run directory that is training, and a --resume of it, are
#   refused naming the owner's pid; of two simultaneous starts exactly one trains and the
#   directory stays consistent; after a kill -9 of the owner a --resume works (no stale
#   lock) and removes the temporary files the killed owner left;
# - --resume refuses a last.ckpt of another run (other model, a DPD checkpoint in a PA run,
#   another data set) with exit 1, naming the differences, config.json untouched;
#   train-pa --resume of a DPD run and train-dpd --resume of a PA run are usage errors;
# - simulate does not replace a data set without --force; run refuses --out = --in;
# - SIGHUP stops training like SIGTERM (checkpoint, exit 1), except under nohup;
# - a metrics.jsonl that cannot be written (a directory in its place) ends train-pa with
#   exit 1 naming the file and the cause, no temporary file left, last.ckpt verifying.
set -euo pipefail
source "$(dirname "$0")/common.bash"

small_sim # D=$TMP/sim: 12,000 samples, Wiener-Hammerstein PA
DB=$TMP/simbig
run simulate --out "$DB" --samples 60000 --pa wiener-hammerstein -q
expect_rc 0 "simulate (big)"
SMALL=(--model gru --hidden 6 --frame 32 --stride 4 --batch 30 --lr 2e-2)
DGRU=(--model dgru --hidden 5 --frame 32 --stride 4 --batch 30)
BIG=(--model gru --hidden 24 --frame 128 --stride 1 --batch 32 --lr 1e-2)

# waits (at most 30 s) until the file exists and is not empty
wait_for() {
    for _ in $(seq 1 300); do
        if [ -s "$1" ]; then return 0; fi
        sleep 0.1
    done
    fail "timed out waiting for $1"
    return 1
}
# kills process $1 after 120 s (a hang fails the test instead of blocking it)
watchdog() {
    (
        for _ in $(seq 1 1200); do
            kill -0 "$1" 2>/dev/null || exit 0
            sleep 0.1
        done
        kill -KILL "$1"
    ) >/dev/null 2>&1 &
}
config_model() { grep -o '"model":[^,]*' "$1/config.json" | head -n 1 | tr -d '\t "' | sed 's/model://'; }
ckpt_model() {
    "$DD_CLI" eval --run "$1" --ckpt "$2" --json 2>/dev/null | grep -o '"model":"[a-z]*"' | sed 's/.*:"//; s/"//'
}

# ---- a second writer while a run trains: refused, naming the owner
"$DD_CLI" train-pa --data "$DB" "${BIG[@]}" --epochs 1000 --ckpt-every 5 --out "$TMP/busy" -q 2>"$TMP/busy.err" &
PID=$!
watchdog "$PID"
wait_for "$TMP/busy/config.json" || true
t0=$(date +%s%N)
run train-pa --data "$D" "${DGRU[@]}" --epochs 1 --out "$TMP/busy" -q
t1=$(date +%s%N)
expect_rc 1 "a second train-pa into a training run"
has "$ERR" "$TMP/busy is in use by pid $PID on host" "the refusal names the owner"
has "$ERR" "($TMP/busy/.lock)" "the refusal names the lock file"
if [ $(((t1 - t0) / 1000000)) -lt 5000 ]; then pass; else fail "the refusal took $(((t1 - t0) / 1000000)) ms"; fi
wait_for "$TMP/busy/last.ckpt" || true
run train-pa --resume "$TMP/busy" --epochs 1 -q
expect_rc 1 "--resume of a run that is training"
has "$ERR" "is in use by pid $PID" "resume refusal names the owner"
if [ "$(config_model "$TMP/busy")" = gru ]; then pass; else fail "config.json model $(config_model "$TMP/busy") after the refusals"; fi
kill -0 "$PID" 2>/dev/null && pass || fail "the owner died"

# ---- kill -9 of the owner: no stale lock; the next start removes its temporary files
kill -KILL "$PID"
wait "$PID" 2>/dev/null || true
: >"$TMP/busy/last.ckpt.tmp.999999.0"
: >"$TMP/busy/metrics.jsonl.tmp.999998"
: >"$TMP/busy/notes.tmp.1"
"$DD_CLI" train-pa --resume "$TMP/busy" -v 2>"$TMP/res.err" >/dev/null &
PID2=$!
watchdog "$PID2"
for _ in $(seq 1 300); do
    if grep -q "^$PID2 " "$TMP/busy/.lock" 2>/dev/null; then break; fi
    sleep 0.1
done
sleep 1
kill -TERM "$PID2" 2>/dev/null || true
set +e
wait "$PID2"
RC=$?
set -e
ERR=$(cat "$TMP/res.err")
expect_rc 75 "resume after kill -9, stopped by SIGTERM (preempted)"
has "$ERR" "interrupted; $TMP/busy/last.ckpt holds the state" "the resume trained (no stale lock)"
hasnot "$ERR" "in use" "no stale lock"
has "$ERR" "stale temporary files of a process that was killed while writing" "stale temporary files reported (info)"
if [ ! -e "$TMP/busy/last.ckpt.tmp.999999.0" ] && [ ! -e "$TMP/busy/metrics.jsonl.tmp.999998" ]; then pass; else
    fail "stale temporary files left: $(ls "$TMP/busy")"
fi
if [ -e "$TMP/busy/notes.tmp.1" ]; then pass; else fail "a file that is not the run's was removed"; fi

# ---- two simultaneous starts into one directory: one trains, the directory is consistent
for i in 1 2 3; do
    ( set +e; "$DD_CLI" train-pa --data "$D" "${SMALL[@]}" --epochs 3 --out "$TMP/twin$i" -q 2>"$TMP/a.err"; echo $? >"$TMP/a.rc" ) &
    A=$!
    ( set +e; "$DD_CLI" train-pa --data "$D" "${DGRU[@]}" --epochs 3 --out "$TMP/twin$i" -q 2>"$TMP/b.err"; echo $? >"$TMP/b.rc" ) &
    B=$!
    wait "$A" "$B"
    ra=$(cat "$TMP/a.rc")
    rb=$(cat "$TMP/b.rc")
    if [ $((ra + rb)) -eq 1 ]; then pass; else fail "simultaneous starts $i: exit statuses $ra and $rb, want one 0 and one 1"; fi
    loser=$(cat "$TMP/a.err" "$TMP/b.err")
    if grep -q "is in use by pid\|already holds a run" <<<"$loser"; then pass; else fail "simultaneous starts $i: $loser"; fi
    m=$(config_model "$TMP/twin$i")
    l=$(ckpt_model "$TMP/twin$i" last)
    b=$(ckpt_model "$TMP/twin$i" best)
    if [ -n "$m" ] && [ "$m" = "$l" ] && [ "$m" = "$b" ]; then pass; else
        fail "simultaneous starts $i: mixed directory: config.json $m, last.ckpt $l, best.ckpt $b"
    fi
done

# ---- --resume refuses a checkpoint of another run, before writing anything
run train-pa --data "$D" "${SMALL[@]}" --epochs 1 --out "$TMP/pa" -q
expect_rc 0 "train-pa"
run train-pa --data "$D" "${DGRU[@]}" --epochs 1 --out "$TMP/pa_dgru" -q
expect_rc 0 "train-pa dgru"
run train-dpd --pa-run "$TMP/pa" "${SMALL[@]}" --epochs 1 --out "$TMP/dpd" -q
expect_rc 0 "train-dpd"
cp -r "$TMP/pa" "$TMP/x1"
cp "$TMP/pa_dgru/last.ckpt" "$TMP/x1/last.ckpt"
sum=$(cat "$TMP/x1/config.json" "$TMP/x1/metrics.jsonl" | md5sum)
run train-pa --resume "$TMP/x1" --epochs 2 -q
expect_rc 1 "a dgru checkpoint in a gru run"
has "$ERR" "$TMP/x1/last.ckpt belongs to another run: model dgru (config.json: gru), hidden 5 (config.json: 6)" "differences named"
has "$ERR" "run id " "run ids differ"
if [ "$(cat "$TMP/x1/config.json" "$TMP/x1/metrics.jsonl" | md5sum)" = "$sum" ]; then pass; else fail "config.json or metrics.jsonl changed"; fi
cp "$TMP/dpd/last.ckpt" "$TMP/x1/last.ckpt"
run train-pa --resume "$TMP/x1" --epochs 2 -q
expect_rc 1 "a DPD checkpoint in a PA run"
has "$ERR" "task dla (config.json: pa)" "task difference named"
if [ "$(cat "$TMP/x1/config.json" "$TMP/x1/metrics.jsonl" | md5sum)" = "$sum" ]; then pass; else fail "config.json or metrics.jsonl changed"; fi
run train-pa --resume "$TMP/dpd" --epochs 2
expect_rc 2 "train-pa --resume of a DPD run"
has "$ERR" "$TMP/dpd is a DPD run (task dla): continue it with 'distdpd train-dpd --resume $TMP/dpd'" "task named"
run train-dpd --resume "$TMP/pa" --epochs 2
expect_rc 2 "train-dpd --resume of a PA run"
has "$ERR" "$TMP/pa is a PA model run (task pa): continue it with 'distdpd train-pa --resume $TMP/pa'" "task named"
run simulate --out "$TMP/sim2" --samples 12000 --pa wiener-hammerstein --seed 5 -q
cp -r "$TMP/pa" "$TMP/x2"
run train-pa --resume "$TMP/x2" --data "$TMP/sim2" --epochs 2 -q
expect_rc 1 "--resume on another data set of the same size"
has "$ERR" "was made on another data set than $TMP/sim2: the train split holds other samples" "data difference named"
run train-pa --resume "$TMP/x2" --data "$D" --epochs 2 -q
expect_rc 0 "--resume on its own data set"

# ---- simulate does not replace a data set; run does not overwrite its input
cp "$D/train_input.csv" "$TMP/keep.csv"
run simulate --out "$D" --samples 6000 --seed 9 -q
expect_rc 1 "simulate into an existing data set"
has "$ERR" "$D already holds a data set (spec.json, train_input.csv, train_output.csv, ...): choose another --out, or give --force to replace it" "simulate refusal"
if cmp -s "$TMP/keep.csv" "$D/train_input.csv"; then pass; else fail "the data set was replaced"; fi
cp -r "$D" "$TMP/simf"
run simulate --out "$TMP/simf" --samples 6000 --seed 9 --format bin --force -q
expect_rc 0 "simulate --force"
if [ -s "$TMP/simf/data.ddb" ] && [ ! -e "$TMP/simf/spec.json" ] && [ ! -e "$TMP/simf/train_input.csv" ]; then pass; else
    fail "--force left another format's files: $(ls "$TMP/simf")"
fi
run inspect "$TMP/simf"
expect_rc 0 "the replaced data set loads"
has "$OUT" "3600" "the new data set's train split"
cp "$D/test_input.csv" "$TMP/x.csv"
sum=$(md5sum <"$TMP/x.csv")
run run --run "$TMP/pa" --in "$TMP/x.csv" --out "$TMP/x.csv"
expect_rc 2 "run --out = --in"
has "$ERR" "--out $TMP/x.csv would overwrite the input $TMP/x.csv" "run refusal"
ln -s x.csv "$TMP/y.csv"
run run --run "$TMP/pa" --in "$TMP/x.csv" --out "$TMP/y.csv"
expect_rc 2 "run --out = a link to --in"
run run --run "$TMP/pa" --in "$TMP/x.csv" --out "$TMP/./x.csv"
expect_rc 2 "run --out = --in spelt differently"
if [ "$(md5sum <"$TMP/x.csv")" = "$sum" ]; then pass; else fail "the input was changed"; fi
run run --run "$TMP/pa" --in "$TMP/x.csv" --out "$TMP/z.sigmf-meta"
expect_rc 0 "run to SigMF"
run run --run "$TMP/pa" --in "$TMP/z.sigmf-meta" --out "$TMP/z.sigmf-data"
expect_rc 2 "run --out = the same SigMF recording"

# ---- SIGHUP stops like SIGTERM: last.ckpt written, exit 1
"$DD_CLI" train-pa --data "$DB" "${BIG[@]}" --epochs 1000 --out "$TMP/hup" -q 2>"$TMP/hup.err" &
PID=$!
watchdog "$PID"
wait_for "$TMP/hup/config.json" || true
sleep 0.5
kill -HUP "$PID"
set +e
wait "$PID"
RC=$?
set -e
ERR=$(cat "$TMP/hup.err")
expect_rc 75 "SIGHUP (preempted)"
has "$ERR" "interrupted; $TMP/hup/last.ckpt holds the state" "SIGHUP writes the checkpoint"
run eval --run "$TMP/hup" --ckpt last --json
expect_rc 0 "the SIGHUP checkpoint loads"
# ... but not under nohup (SIGHUP ignored at start stays ignored)
( trap '' HUP; exec "$DD_CLI" train-pa --data "$DB" "${BIG[@]}" --epochs 1000 --out "$TMP/nohup" -q 2>"$TMP/nohup.err" ) &
PID=$!
watchdog "$PID"
wait_for "$TMP/nohup/config.json" || true
sleep 0.5
kill -HUP "$PID"
sleep 1
if kill -0 "$PID" 2>/dev/null; then pass; else fail "SIGHUP stopped a run started with SIGHUP ignored"; fi
kill -TERM "$PID" 2>/dev/null || true
set +e
wait "$PID"
RC=$?
set -e
expect_rc 75 "SIGTERM after the ignored SIGHUP (preempted)"

# ---- metrics.jsonl cannot be written: its rename onto a directory fails (EISDIR)
W=$TMP/wfail
mkdir -p "$W/metrics.jsonl/x"
run train-pa --data "$D" "${SMALL[@]}" --epochs 1 --no-report --out "$W" -q
expect_rc 1 "metrics.jsonl in place of a directory"
has "$ERR" "$W/metrics.jsonl: write failed: Is a directory; the previous file is untouched" \
    "the error names metrics.jsonl and the cause"
if [ -z "$(find "$W" -name '*.tmp.*')" ]; then pass; else fail "temporary files left: $(find "$W" -name '*.tmp.*')"; fi
run inspect "$W/last.ckpt"
expect_rc 0 "last.ckpt verifies after the failed metrics write ($ERR)"

finish
