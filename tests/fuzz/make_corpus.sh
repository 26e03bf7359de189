#!/usr/bin/env bash
# Regenerates the seed corpora tests/fuzz/corpus/<target>/ (committed; docs/testing.md):
# valid files written by the built `distdpd` (simulate, train-pa) and the bad-input cases
# of the tests (tests/cli/data_inputs.sh, errors.sh, test_net.c, test_ckpt.c), and the
# parameter-server messages of tests/fuzz/make_net_seeds.py (also the client's replies),
# the cluster files of tests/fuzz/make_cluster_seeds.py.
# Usage: tests/fuzz/make_corpus.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
CLI=${1:-build}/distdpd
C=tests/fuzz/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1
"$CLI" simulate --out "$T/od" --samples 600 >/dev/null
"$CLI" simulate --out "$T/bin" --samples 120 --format bin >/dev/null
"$CLI" simulate --out "$T/sg" --samples 120 --format sigmf >/dev/null
"$CLI" train-pa --data "$T/od" --model gmp --memory 2 --order 2 --epochs 1 --frame 20 --batch 4 --out "$T/gmp" >/dev/null 2>&1
"$CLI" train-pa --data "$T/od" --model gru --hidden 3 --epochs 1 --frame 20 --batch 4 --opt sgd --out "$T/gru" >/dev/null 2>&1
rm -rf "$C"
mkdir -p "$C"/{csv,spec_json,sigmf,binfmt,ckpt,config,compress,net,ps_server}
# CSV: a valid file (head), and the oddities the reader documents or the tests refuse
head -c 400 "$T/od/train_input.csv" | sed '$d' >"$C/csv/valid.csv"
printf 'I,Q\n0.5,0.25\n-0.25,0.5\n' >"$C/csv/tiny.csv"
printf '\xef\xbb\xbf"I" , "Q"\r\n1e-3,-2\r\n\r\n' >"$C/csv/bom_crlf_quotes.csv"
printf 'I,Q\n' >"$C/csv/header_only.csv"
printf 'I,Q\n1,2,3\n' >"$C/csv/three_columns.csv"
printf 'I,Q\n1,nan\n' >"$C/csv/nan.csv"
printf 'I,Q\n1e39,0\n' >"$C/csv/overflow.csv"
printf 'I,Q\n0x10,abc\n' >"$C/csv/not_number.csv"
printf '\033[2J\033]0;owned\007I,Q\n1,2\n' >"$C/csv/control_chars.csv"
printf 'X,Y\n1,2\n' >"$C/csv/bad_header.csv"
# spec.json
cp "$T/od/spec.json" "$C/spec_json/simulated.json"
cp tests/data/cli_lte20_spec.json tests/data/cli_nl200_spec.json tests/data/cli_bad_spec.json "$C/spec_json/"
printf '{"input_signal_fs": 800e6, "bw_main_ch": 200e6, "bw_sub_ch": 20e6, "n_sub_ch": 10, "nperseg": 2560}\n' >"$C/spec_json/minimal.json"
printf '{"input_signal_fs": 800e6, "bw_main_ch": 200e6, "bw_sub_ch": 20e6, "n_sub_ch": 10, "nperseg": 2560, "split_ratios": [0.5, 0.3, 0.2], "dataset_format": "single_csv", "bw_occupied": 1e8}\n' >"$C/spec_json/full.json"
printf '{"input_signal_fs": "x"}\n' >"$C/spec_json/wrong_type.json"
printf '{"input_signal_fs": 800e6,' >"$C/spec_json/truncated.json"
# SigMF: meta, "\n###", data (fuzz_util.h dd_fuzz_split)
{ cat "$T/sg/signal_input.sigmf-meta"; printf '\n###'; head -c 256 "$T/sg/signal_input.sigmf-data"; } >"$C/sigmf/cf32.sigmf"
for dt in ci16_le ci8 cf64_be ci32_be rf32_le cu8; do
  { printf '{"global": {"core:datatype": "%s", "core:sample_rate": 1e6, "core:version": "1.0.0"}, "captures": [{"core:sample_start": 0}], "annotations": [{"core:sample_start": 0, "core:sample_count": 4, "core:label": "train"}]}' "$dt"
    printf '\n###'; head -c 64 "$T/sg/signal_input.sigmf-data"; } >"$C/sigmf/$dt.sigmf"
done
printf '{"global": {"core:datatype": "cf32_le"}}\n###\x00\x00\x00' >"$C/sigmf/no_rate_odd_size.sigmf"
# binary format
cp "$T/bin/data.ddb" "$C/binfmt/simulated.ddb"
head -c 200 "$T/bin/data.ddb" >"$C/binfmt/truncated.ddb"
printf 'DDPDBIN1' >"$C/binfmt/magic_only.ddb"
# checkpoints (gmp: adamw state; gru: sgd) and the configuration they and config.json hold
cp "$T/gmp/best.ckpt" "$C/ckpt/gmp.ckpt"
cp "$T/gru/last.ckpt" "$C/ckpt/gru.ckpt"
head -c 100 "$T/gmp/best.ckpt" >"$C/ckpt/truncated.ckpt"
python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["config"]))' "$T/gmp/config.json" >"$C/config/gmp.json"
python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["config"]))' "$T/gru/config.json" >"$C/config/gru.json"
printf '{"task": "pa"}' >"$C/config/partial.json"
printf '[1, 2' >"$C/config/bad.json"
# --compress specs (the examples of compress.h and the refusals of the tests)
for s in none fp32 topk "topk,density=0.001,sampled=1" "int8,chunk=128,stochastic=1" "powersgd,rank=4" \
         "dgc,density=0.001,momentum=0.9,warmup=1,clip=0,masking=1" "int4,ef=0" sign "topk," "topk,,rank=2" \
         "int8,chunk=0x10" "topk,density=nan" "qring" "randk,density=0.5,seed=7" "bogus"; do
  printf '%s' "$s" >"$C/compress/$(printf '%s' "$s" | tr -c 'a-z0-9=.' '_' | head -c 60)"
done
python3 tests/fuzz/make_net_seeds.py "$C"
# cluster / hostfile / allow / plan-cluster files and --agg (fuzz_cluster)
python3 tests/fuzz/make_cluster_seeds.py "$C"
# the training coordinator played by several workers (fuzz_ps_coord)
python3 tests/fuzz/make_ps_coord_seeds.py "$C"
# the coordinator's scripts played against a real bench (fuzz_fed_client)
python3 tests/fuzz/make_fed_client_seeds.py "$C"
echo "corpora written to $C: $(find "$C" -type f | wc -l) files, $(du -sh "$C" | cut -f1)"
