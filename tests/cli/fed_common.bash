# Shared set-up of the federated-averaging tests (fed.sh, fed_faults.sh). Sourced after
# common.bash; the .bash extension keeps it out of ctest's glob.
#   D                 three small simulated benches $D/bench-00..02 (bin format), made here
#   col RUN KEY       one value per round of RUN/metrics.jsonl (JSON text for objects)

D="$TMP/benches"
for i in 0 1 2; do
    run simulate --out "$D/bench-0$i" --samples 6000 --seed $((i + 1)) --drive $((i - 1)) --format bin -q
    expect_rc 0 "simulate bench $i"
done

col() {
    python3 -c "import json,sys
for l in open(sys.argv[1] + '/metrics.jsonl'):
    v = json.loads(l).get(sys.argv[2])
    print(json.dumps(v, sort_keys=True) if isinstance(v, (dict, bool)) else v)" "$1" "$2"
}
