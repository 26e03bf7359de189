#!/bin/bash
# keygen and ps-server on the command line (docs/ps.md): key files and their modes, no
# overwrite without --force, usage errors, cluster file and key refusals naming the file
# and field, --insecure warns, SIGTERM stops a server with its counts. The load and
# security tests of the parameter server are tests/test_ps_*_cli.c.
set -euo pipefail
source "$(dirname "$0")/common.bash"

run keygen --out "$TMP/s0"
expect_rc 0 "keygen"
pub=$(grep -v '^#' "$TMP/s0.pub")
if [ "$OUT" = "$pub" ] && [ ${#pub} -eq 40 ]; then pass; else fail "keygen printed '$OUT', NAME.pub holds '$pub'"; fi
mode=$(stat -c %a "$TMP/s0.key")
if [ "$mode" = 600 ]; then pass; else fail "NAME.key mode $mode, want 600"; fi
run keygen --out "$TMP/s0"
expect_rc 1 "keygen over an existing key"
has "$ERR" "s0.key exists: not overwriting a key" "keygen refuses to overwrite"
run keygen --out "$TMP/s0" --force
expect_rc 0 "keygen --force"
run keygen
expect_rc 2 "keygen without --out"
has "$ERR" "missing --out NAME" "keygen usage"

run keygen --out "$TMP/w0"
wpub=$OUT
echo "$wpub worker0" >"$TMP/allow"
pub=$(grep -v '^#' "$TMP/s0.pub")
port=$(free_port)
cat >"$TMP/cluster.json" <<JSON
{"replicas": 0, "servers": [{"name": "s0", "address": "tcp://127.0.0.1:$port", "public_key": "$pub"}]}
JSON

run ps-server --cluster "$TMP/cluster.json" --key "$TMP/s0.key" --allow "$TMP/allow"
expect_rc 2 "ps-server without --bind"
has "$ERR" "missing --bind tcp://HOST:PORT" "ps-server --bind usage"
run ps-server --bind "tcp://127.0.0.1:$port" --cluster "$TMP/cluster.json" --allow "$TMP/allow"
expect_rc 2 "ps-server without --key"
has "$ERR" "missing --key KEY (or --insecure, for debugging only)" "ps-server --key usage"
run ps-server --bind "tcp://127.0.0.1:$port" --cluster "$TMP/cluster.json" --key "$TMP/s0.key"
expect_rc 2 "ps-server without --allow"
run ps-server --bind "tcp://127.0.0.1:$port" --cluster "$TMP/cluster.json" --key "$TMP/s0.key" --allow "$TMP/allow" --replicas 1
expect_rc 1 "--replicas above the servers"
has "$ERR" "--replicas 1 needs at least 2 servers" "--replicas refusal"
run ps-server --bind "tcp://127.0.0.1:1" --cluster "$TMP/cluster.json" --key "$TMP/s0.key" --allow "$TMP/allow"
expect_rc 1 "--bind not in the cluster"
has "$ERR" "no servers[].address is 'tcp://127.0.0.1:1'" "bind address refusal"
run ps-server --bind "tcp://127.0.0.1:$port" --cluster "$TMP/cluster.json" --key "$TMP/w0.key" --allow "$TMP/allow"
expect_rc 1 "a key that is not the server's"
has "$ERR" "is not servers[0].public_key of" "key mismatch refusal"
chmod 644 "$TMP/s0.key"
run ps-server --bind "tcp://127.0.0.1:$port" --cluster "$TMP/cluster.json" --key "$TMP/s0.key" --allow "$TMP/allow"
expect_rc 1 "a secret key readable by others"
has "$ERR" "must not be readable by others" "key mode refusal"
chmod 600 "$TMP/s0.key"
echo '{"servers": [{"address": "tcp://127.0.0.1:1", "public_key": "short"}]}' >"$TMP/bad.json"
run ps-server --bind "tcp://127.0.0.1:1" --cluster "$TMP/bad.json" --key "$TMP/s0.key" --allow "$TMP/allow"
expect_rc 1 "bad cluster file"
has "$ERR" "bad.json: servers[0].public_key: expected a 40-character Z85 key" "cluster refusal names file and field"
echo "not-a-key" >"$TMP/badallow"
run ps-server --bind "tcp://127.0.0.1:$port" --cluster "$TMP/cluster.json" --key "$TMP/s0.key" --allow "$TMP/badallow"
expect_rc 1 "bad allow file"
has "$ERR" "badallow:1: expected a 40-character Z85 public key, got 'not-a-key'" "allow refusal names file and line"
run ps-server --bind "tcp://127.0.0.1:$port" --cluster "$TMP/cluster.json" --insecure --key "$TMP/s0.key"
expect_rc 2 "--insecure with --key"

# a server that runs, then SIGTERM (once its first line is out: its handler is in place by
# then, however slowly it started)
"$DD_CLI" ps-server --bind "tcp://127.0.0.1:$port" --cluster "$TMP/cluster.json" --insecure 2>"$TMP/ins.err" &
pid=$!
for _ in $(seq 1 600); do
    grep -q "warning: --insecure" "$TMP/ins.err" 2>/dev/null && break
    sleep 0.05
done
sleep 0.2
kill -TERM $pid
rc=0
timeout 10 tail --pid=$pid -f /dev/null || rc=$?
wait $pid || rc=$?
if [ $rc -eq 0 ]; then pass; else fail "insecure server: exit status $rc after SIGTERM"; fi
has "$(cat "$TMP/ins.err")" "warning: --insecure: plain TCP, no CURVE" "--insecure warns"
has "$(cat "$TMP/ins.err")" "stopped after" "counts at the stop"

finish
