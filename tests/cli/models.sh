#!/bin/bash
# distdpd models: the registry table (with each model's options) and, with --model, one
# model's size: parameter counts, FLOPs and byte counts against the closed forms of
# docs/models.md and model.c's workspace layout, the JSON keys, the stage list (names,
# count, parameters adding up), options taken from the model's registry entry, and the
# usage errors (an option the model lacks, values out of range, non-decimal values).
set -euo pipefail
source "$(dirname "$0")/common.bash"

# ---- the table
run models
expect_rc 0 "models"
has "$OUT" "options: default [range]" "options column"
has "$OUT" "hidden 23 [1, 4096], layers 1 [1, 64]" "gru's options with defaults and ranges"
has "$OUT" "hidden 12 [1, 4096], layers 4 [1, 1024], kernel 3 [1, 64]" "resnet's options"
has "$OUT" "gru(hidden=23, layers=1): 1,911 parameters" "gru default row"
run models --json
expect_rc 0 "models --json"
for k in name describe params flops_per_sample history options default min max help summary; do
    has "$OUT" "\"$k\":" "list JSON key $k"
done

# ---- resnet hidden 512, 8 blocks, kernel 3 (C, L, K) at frame 200 (F), adamw
C=512 L=8 K=3 F=200
run models --model resnet --hidden $C --layers $L --kernel $K --json
expect_rc 0 "models --model resnet --json"
for k in name describe summary config params arena_floats flops_forward flops_backward history frame \
    optimizer optimizer_state_arrays bytes grads activations_saved workspace total stages in out; do
    has "$OUT" "\"$k\":" "model JSON key $k"
done
params=$((7 * C + L * (K * C * C + C * C + 2 * C) + 2 * C + 2))
near "$(json_num "$OUT" params)" $params 0 "resnet parameters = 7C + L(KC^2 + C^2 + 2C) + 2C + 2"
# arena: every entry padded to 16 floats; only the head's bias (2) is not a multiple
arena=$((params + 14))
near "$(json_num "$OUT" arena_floats)" $arena 0 "resnet arena floats"
near "$(json_num "$OUT" flops_forward)" $((12 * C + 16 + L * (2 * (K + 1) * C * C + 6 * C) + 4 * C)) 0 \
    "resnet forward FLOPs per sample"
near "$(json_num "$OUT" flops_backward)" $((2 * (12 * C + 16 + L * (2 * (K + 1) * C * C + 6 * C) + 4 * C))) 0 \
    "resnet backward FLOPs = 2 x forward"
bytes=$(tr -d ' \n' <<<"$OUT" | grep -o '"bytes":{[^}]*}')
near "$(json_num "$bytes" params)" $((4 * arena)) 0 "parameter bytes = 4 x arena floats"
near "$(json_num "$bytes" grads)" $((4 * arena)) 0 "gradient bytes"
near "$(json_num "$bytes" optimizer)" $((8 * arena)) 0 "adamw state: 2 arrays"
# model.c's layout: (2L + 1) r16(F C) + r16(6 F) kept, (2L + 5) r16(F C) + r16(6 F) + W in
# all, W = 2 R C K the blocks' im2col workspace (C > 96), R = min(F, max(64, 2^20 / (C K)))
R=$((1048576 / (C * K)))
((R < 64)) && R=64
((R > F)) && R=$F
W=$(((2 * R * C * K + 15) / 16 * 16))
near "$(json_num "$bytes" activations_saved)" $((4 * ((2 * L + 1) * F * C + 6 * F))) 0 "activations kept per frame"
near "$(json_num "$bytes" workspace)" $((4 * ((2 * L + 5) * F * C + 6 * F + W))) 0 "workspace per frame"
near "$(json_num "$bytes" total)" $((4 * arena * 4 + 4 * ((2 * L + 5) * F * C + 6 * F + W))) 0 "total bytes"
near "$(json_num "$OUT" optimizer_state_arrays)" 2 0 "adamw arrays"
near "$(json_num "$OUT" frame)" $F 0 "frame"
stages=$(tr -d ' \n' <<<"$OUT" | grep -o '"stages":\[.*')
near "$(grep -o '"name":"blocks\.[0-9]*"' <<<"$stages" | wc -l)" $L 0 "one stage per block"
has "$stages" '"name":"stem","in":2,"out":512' "stem stage widths"
has "$stages" '"name":"head","in":512,"out":2' "head stage widths"
sum=$(grep -o '"params":[0-9]*' <<<"$stages" | cut -d: -f2 | awk '{ s += $1 } END { print s }')
near "$sum" $params 0 "stage parameters add up to the model's"

# text output: the same numbers
run models --model resnet --hidden $C --layers $L
expect_rc 0 "models --model resnet"
has "$OUT" "resnet(hidden=512, layers=8, kernel=3): 8,401,410 parameters" "describe line"
has "$OUT" "arena 8,401,424 floats" "arena in text"
has "$OUT" "(33,605,696 bytes)" "parameter bytes in text"
has "$OUT" "10 stages:" "stage count in text"
has "$OUT" "blocks.7" "last block listed"

# ---- the 50 M resnet, stacked gru / lstm, the hammerstein cascade, a residual tcn
run models --model resnet --hidden 1024 --layers 12 --json
near "$(json_num "$OUT" params)" 50365442 0 "resnet 1024 x 12: 50.4 M parameters"
H=64
run models --model gru --hidden $H --layers 2 --opt sgd --json
expect_rc 0 "gru --opt sgd"
near "$(json_num "$OUT" params)" $((3 * H * H + 14 * H + 2 + 6 * H * H + 6 * H)) 0 "stacked gru parameters"
near "$(json_num "$OUT" optimizer_state_arrays)" 0 0 "plain sgd: no state"
near "$(json_num "$(tr -d ' \n' <<<"$OUT" | grep -o '"bytes":{[^}]*}')" optimizer)" 0 0 "plain sgd: 0 bytes"
run models --model gru --hidden $H --layers 2 --opt sgd --momentum 0.9 --json
near "$(json_num "$OUT" optimizer_state_arrays)" 1 0 "sgd with momentum: 1 array"
run models --model gru --hidden $H --layers 2 --opt adam --json
near "$(json_num "$OUT" optimizer_state_arrays)" 2 0 "adam: 2 arrays"
run models --model lstm --hidden $H --layers 2 --json
near "$(json_num "$OUT" params)" $((4 * H * H + 18 * H + 2 + 8 * H * H + 8 * H)) 0 "stacked lstm parameters"
run models --model hammerstein --hidden 2048 --layers 2 --memory 4 --json
near "$(json_num "$OUT" params)" $((2 * (2048 * 2048 + 5 * 2048 + 2 + 8 * 4))) 0 "hammerstein parameters"
run models --model tcn --hidden 96 --layers 16 --kernel 5 --frame 64 --json
near "$(json_num "$OUT" params)" $((7 * 96 + 16 * 5 * 96 + 2 * 96)) 0 "tcn parameters"
# residual layers (> 12) add C FLOPs each: (12C + 4C + 14) + L (2KC + 4C + C) + 4C
near "$(json_num "$OUT" flops_forward)" $((16 * 96 + 14 + 16 * (10 * 96 + 5 * 96) + 4 * 96)) 0 "tcn forward FLOPs"
near "$(json_num "$OUT" frame)" 64 0 "--frame"
has "$OUT" '"config":{"hidden":96,"layers":16,"kernel":5}' "config echoes the model's options"

# ---- usage errors
run models --model gru --kernel 3
expect_rc 2 "an option the model lacks"
has "$ERR" "model gru has no option '--kernel' (its options: hidden 23 [1, 4096], layers 1 [1, 64])" "message"
run models --model gru --hidden 5000
expect_rc 2 "out of range"
has "$ERR" "--hidden: must be in [1, 4096], got '5000'" "range message"
run models --model gru --hidden 0x10
expect_rc 2 "hexadecimal value"
has "$ERR" "--hidden: expected a positive integer, got '0x10'" "decimal only"
run models --model gru --layers 65
expect_rc 2 "layers beyond gru's 64"
run models --hidden 3
expect_rc 2 "a model option without --model"
has "$ERR" "option '--hidden' needs --model NAME" "message"
run models --model nosuch
expect_rc 2 "unknown model"
has "$ERR" "unknown model 'nosuch' (known: gmp" "unknown model lists the registry"
run models --frame 100
expect_rc 2 "--frame without --model"
run models --model resnet --frame 0
expect_rc 2 "--frame 0"
run models --model resnet --opt lbfgs
expect_rc 2 "unknown optimiser"
run models --model resnet --momentum 0.9
expect_rc 2 "--momentum without sgd"
has "$ERR" "--momentum applies to --opt sgd only" "message"
run models --model resnet extra
expect_rc 2 "extra argument"

finish
