#!/bin/bash
# Coming from OpenDPD (docs/opendpd.md): its step names as commands (train_pa, train_dpd,
# run_dpd), "did you mean" for mistyped commands and options, OpenDPD's option spellings
# answered with the distdpd option, --recipe opendpd (OpenDPD's arguments.py defaults,
# explicit options winning, SGD with momentum 0.9), --opt rmsprop and --loss l1 recorded
# in config.json, history.csv's OpenDPD header; and repeatable recipes: --config FILE
# (a run's config.json trains the same run again; unknown keys refused naming key and
# file) and the auto-named run directory when --out is left out.
set -euo pipefail
source "$(dirname "$0")/common.bash"

# ---- commands: aliases and typos
run train_pa --help
expect_rc 0 "train_pa is train-pa"
has "$OUT" "usage: distdpd train-pa" "the alias shows train-pa's help"
run run_dpd --help
expect_rc 0 "run_dpd is run"
has "$OUT" "usage: distdpd run" "run_dpd shows run's help"
run help
has "$OUT" "train_pa = train-pa" "distdpd help lists the OpenDPD names"
run trian-pa
expect_rc 2 "mistyped command"
has "$ERR" "unknown command 'trian-pa' (did you mean 'train-pa'?" "closest command suggested"
run help evl
expect_rc 2 "help of a mistyped command"
has "$ERR" "did you mean 'eval'?" "help suggests too"
run zzzzzz
has "$ERR" "unknown command 'zzzzzz' (see 'distdpd help')" "nothing near: no suggestion"

# ---- options: OpenDPD spellings and typos
small_sim # D=$TMP/sim: 12,000 samples, Wiener-Hammerstein PA
for pair in "dataset_path:--data DIR" "n_epochs:--epochs E" "PA_backbone:--model NAME" "PA_hidden_size:--hidden H" \
    "batch_size:--batch B" "frame_length:--frame F" "frame_stride:--stride S" "opt_type:--opt adamw" \
    "loss_type:--loss l2|l1" "grad_clip_val:--clip C" "lr_end:--min-lr LR" "K:--order K"; do
    o=${pair%%:*}
    want=${pair#*:}
    run train-pa --"$o" 1 --data "$D"
    expect_rc 2 "--$o is a usage error"
    has "$ERR" "unknown option '--$o' (OpenDPD's spelling; here: $want" "--$o maps to $want"
done
run train-dpd --DPD_hidden_size 15
has "$ERR" "here: --hidden H of train-dpd" "--DPD_hidden_size maps to --hidden"
run train-pa --epohcs 3
expect_rc 2 "mistyped option"
has "$ERR" "unknown option '--epohcs' (did you mean --epochs?)" "closest option suggested"
run metrics --dataset_path x
has "$ERR" "unknown option '--dataset_path'" "a command without --data gives no --data hint"
hasnot "$ERR" "here: --data" "no hint for an option the command lacks"

SMALL=(--model gru --hidden 6 --frame 32 --stride 4 --lr 2e-2)

# ---- --recipe opendpd: OpenDPD's defaults, explicit options win
run train_pa --data "$D" "${SMALL[@]}" --recipe opendpd --epochs 1 --out "$TMP/od" -q
expect_rc 0 "train_pa --recipe opendpd"
C=$(cat "$TMP/od/config.json")
near "$(json_num "$C" batch)" 256 0 "recipe opendpd: batch 256"
near "$(json_num "$C" eval_batch)" 256 0 "recipe opendpd: eval batch 256"
near "$(json_num "$C" epochs)" 1 0 "--epochs wins over the recipe's 100"
near "$(json_num "$C" lr)" 0.02 0 "--lr wins over the recipe's 5e-4"
has "$C" '"lr_schedule":	"constant"' "recipe opendpd: no schedule"
run train-pa --data "$D" "${SMALL[@]}" --recipe opendpd --opt sgd --epochs 1 --out "$TMP/od_sgd" -q
expect_rc 0 "recipe opendpd with --opt sgd"
near "$(json_num "$(cat "$TMP/od_sgd/config.json")" momentum)" 0.9 0 "OpenDPD's SGD has momentum 0.9"
run train-pa --data "$D" "${SMALL[@]}" --opt sgd --epochs 1 --out "$TMP/dd_sgd" -q
near "$(json_num "$(cat "$TMP/dd_sgd/config.json")" momentum)" 0 0 "distdpd's SGD keeps momentum 0"
run train-pa --data "$D" "${SMALL[@]}" --recipe opendpd --opt sgd --momentum 0.5 --epochs 1 --out "$TMP/od_sgd5" -q
near "$(json_num "$(cat "$TMP/od_sgd5/config.json")" momentum)" 0.5 0 "--momentum wins over the recipe's 0.9"
run train-pa --data "$D" --recipe pytorch --out "$TMP/x"
expect_rc 2 "unknown recipe"
has "$ERR" "--recipe: expected one of distdpd, opendpd" "recipe choices named"
# a DPD under the recipe: hidden 15 (OpenDPD's DPD_hidden_size)
run train_dpd --pa-run "$TMP/od" --model gru --frame 32 --stride 4 --recipe opendpd --epochs 1 --out "$TMP/od_dpd" -q
expect_rc 0 "train_dpd --recipe opendpd"
has "$(cat "$TMP/od_dpd/config.json")" '"hidden":	15' "recipe opendpd: DPD hidden 15"

# ---- --opt rmsprop and --loss l1: trained, recorded
run train-pa --data "$D" "${SMALL[@]}" --batch 32 --opt rmsprop --loss l1 --lr 2e-3 --epochs 2 --out "$TMP/rms" -q
expect_rc 0 "rmsprop + l1"
C=$(cat "$TMP/rms/config.json")
has "$C" '"opt":	"rmsprop"' "config.json: rmsprop"
has "$C" '"loss":	"l1"' "config.json: l1"
nmse=$(json_num "$(grep '"best":true' "$TMP/rms/metrics.jsonl")" val_nmse_db)
if awk -v v="$nmse" 'BEGIN { exit !(v < -10) }'; then pass; else fail "rmsprop + l1 did not learn: val NMSE $nmse dB"; fi
has "$(head -n 1 "$TMP/rms/history.csv")" "EPOCH,N_EPOCH,TIME:,LR," "history.csv: OpenDPD's TIME: column"

# ---- --config: a run's config.json repeats the run
run train-pa --config "$TMP/rms/config.json" --out "$TMP/rms2" -q
expect_rc 0 "train-pa --config RUN/config.json"
A=$(untimed "$TMP/rms/metrics.jsonl")
B=$(untimed "$TMP/rms2/metrics.jsonl")
if [ -n "$A" ] && [ "$A" = "$B" ]; then pass; else fail "--config did not repeat the run: $A vs $B"; fi
run train-pa --config "$TMP/rms/config.json" --epochs 1 --loss l2 --out "$TMP/rms3" -q
expect_rc 0 "--config with options"
C=$(cat "$TMP/rms3/config.json")
has "$C" '"loss":	"l2"' "--loss wins over the file"
has "$C" '"opt":	"rmsprop"' "the file's optimiser kept"
near "$(json_num "$C" epochs)" 1 0 "--epochs wins over the file"
printf '{"config": {"batch": 16, "epochs": 1, "frame": 32, "stride": 4, "model_opts": {"hidden": 4}}, "data": "%s"}\n' "$D" >"$TMP/small.json"
run train-pa --config "$TMP/small.json" --out "$TMP/small" -q
expect_rc 0 "a hand-written recipe (data from the file)"
near "$(json_num "$(cat "$TMP/small/config.json")" batch)" 16 0 "the file's batch"
printf '{"config": {"batch": 16, "n_epochs": 3}}\n' >"$TMP/bad1.json"
run train-pa --config "$TMP/bad1.json" --data "$D" --out "$TMP/b1"
expect_rc 2 "unknown config key"
has "$ERR" "$TMP/bad1.json: unknown key 'config.n_epochs'" "the key and the file are named"
printf '{"dataset_path": "x"}\n' >"$TMP/bad2.json"
run train-pa --config "$TMP/bad2.json" --data "$D" --out "$TMP/b2"
expect_rc 2 "unknown top-level key"
has "$ERR" "$TMP/bad2.json: unknown key 'dataset_path'" "top-level key named"
printf '{"config": {"batch": "big"}}\n' >"$TMP/bad3.json"
run train-pa --config "$TMP/bad3.json" --data "$D" --out "$TMP/b3"
expect_rc 2 "wrong type"
has "$ERR" "key 'batch' is not a number" "wrong type named"
run train-dpd --config "$TMP/rms/config.json" --pa-run "$TMP/rms" --out "$TMP/b4"
expect_rc 2 "a PA recipe given to train-dpd"
has "$ERR" "holds a PA model recipe" "task mismatch explained"
run train-pa --config "$TMP/nonexistent.json" --data "$D"
expect_rc 2 "missing config file"
has "$ERR" "nonexistent.json" "missing file named"
run train-pa --config "$TMP/small.json" --recipe opendpd --data "$D"
expect_rc 2 "--config with --recipe"

# ---- auto-named run directory
mkdir -p "$TMP/cwd"
( cd "$TMP/cwd" && "$DD_CLI" train-pa --data "$D" "${SMALL[@]}" --epochs 1 -q ) >"$TMP/.o" 2>"$TMP/.e" && RC=0 || RC=$?
ERR=$(cat "$TMP/.e")
expect_rc 0 "train-pa without --out"
name=$(sed -n 's/.*run directory \(runs\/[^ ]*\) (no --out given).*/\1/p' <<<"$ERR")
if [[ "$name" =~ ^runs/pa-gru-[0-9]{8}-[0-9]{6}(-[0-9]+)?$ ]]; then pass; else fail "auto name '$name' (stderr: $ERR)"; fi
if [ -n "$name" ] && [ -s "$TMP/cwd/$name/best.ckpt" ]; then pass; else fail "no run in $TMP/cwd/$name"; fi
finish
