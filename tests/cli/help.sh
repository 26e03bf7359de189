#!/bin/bash
# distdpd --version, distdpd help, and --help of every command: exit status 0, a usage
# line naming the command, `help CMD` identical to `CMD --help`; usage errors exit 2.
set -euo pipefail
source "$(dirname "$0")/common.bash"

run --version
expect_rc 0 "--version"
want=$(sed -n 's/^project(distdpd VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
if [ "$OUT" = "distdpd $want" ]; then pass; else fail "--version printed '$OUT', want 'distdpd $want'"; fi

run help
expect_rc 0 "help"
commands="help metrics inspect simulate report demo train-pa train-dpd run eval models compressors strategies plan keygen ps-server"
for c in $commands; do
    has "$OUT" "  $c " "help lists $c"
done
run --help
expect_rc 0 "--help"
has "$OUT" "usage: distdpd COMMAND" "--help usage line"

for c in $commands; do
    run "$c" --help
    expect_rc 0 "$c --help"
    has "$OUT" "usage: distdpd $c" "$c --help usage line"
    has "$OUT" "-h, --help" "$c --help documents --help"
    if [ "$c" != help ]; then has "$OUT" "exit status" "$c --help documents the exit status"; fi
    a=$OUT
    run help "$c"
    expect_rc 0 "help $c"
    if [ "$OUT" = "$a" ]; then pass; else fail "help $c differs from $c --help"; fi
    run "$c" -h
    expect_rc 0 "$c -h"
done

run
expect_rc 2 "no arguments"
has "$ERR" "usage: distdpd COMMAND" "no arguments prints the usage to stderr"
run frobnicate
expect_rc 2 "unknown command"
has "$ERR" "distdpd: unknown command 'frobnicate'" "unknown command message"
run --frobnicate
expect_rc 2 "unknown global option"
has "$ERR" "unknown option '--frobnicate'" "unknown global option message"
run help frobnicate
expect_rc 2 "help of an unknown command"
has "$ERR" "unknown command 'frobnicate'" "help unknown command message"

finish
