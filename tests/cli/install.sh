#!/usr/bin/env bash
# `make install` payload: installs the build into a temporary prefix (cmake --install
# --prefix), then checks that the installed command runs and that a separate C program
# compiles and links against libdistdpd through the installed distdpd.pc.
set -euo pipefail
source "$(dirname "$0")/common.bash"
: "${DD_BINARY_DIR:?set by ctest}"

P=$TMP/prefix
if cmake --install "$DD_BINARY_DIR" --prefix "$P" >"$TMP/install.log" 2>&1; then pass; else fail "cmake --install: $(cat "$TMP/install.log")"; fi
LIBDIR=$(ls -d "$P"/lib*/ | head -1)
[ -x "$P/bin/distdpd" ] && pass || fail "no $P/bin/distdpd"
[ -f "$P/include/distdpd/core.h" ] && [ -f "$P/include/distdpd/train.h" ] && pass || fail "headers not installed"
PC=$(find "$P" -name distdpd.pc | head -1)
[ -n "$PC" ] && pass || fail "distdpd.pc not installed"
export PKG_CONFIG_PATH=$(dirname "$PC")
FLAGS=$(pkg-config --define-variable=prefix="$P" --cflags --libs distdpd)
has "$FLAGS" "-ldistdpd" "pkg-config --libs names the library"
cat >"$TMP/use.c" <<'C'
#include <distdpd/core.h>
#include <distdpd/metrics.h>
#include <stdio.h>
int main(void) {
    dd_cf32 x[4] = {1, 1, 1, 1};
    double papr = -1;
    if (dd_papr_db(x, 4, &papr) != DD_OK) return 1;
    printf("%s %.3f %08x\n", DD_VERSION_STRING, papr, (unsigned)dd_crc32c(0, "123456789", 9));
    return 0;
}
C
if cc -std=c11 "$TMP/use.c" $FLAGS -Wl,-rpath,"$LIBDIR" -o "$TMP/use" 2>"$TMP/cc.log"; then pass; else fail "compile against the installed library: $(cat "$TMP/cc.log")"; fi
if [ -x "$TMP/use" ]; then
    got=$("$TMP/use")
    has "$got" "0.000 e3069283" "installed library computes (PAPR of a constant = 0, CRC32C check value)"
fi
# the MPI-free library: a program that reads a data set and measures its test split's
# ACLR through distdpd_rf.pc links and loads no libmpi (nor libzmq)
PCRF=$(find "$P" -name distdpd_rf.pc | head -1)
[ -n "$PCRF" ] && pass || fail "distdpd_rf.pc not installed"
RFFLAGS=$(pkg-config --define-variable=prefix="$P" --cflags --libs distdpd_rf)
has "$RFFLAGS" "-ldistdpd_rf" "pkg-config --libs distdpd_rf"
hasnot "$RFFLAGS" "mpi" "no MPI in distdpd_rf's flags"
cat >"$TMP/rf.c" <<'C'
#include <distdpd/core.h>
#include <distdpd/dataset.h>
#include <distdpd/metrics.h>
#include <distdpd/spec.h>
#include <stdio.h>
int main(int argc, char **argv) {
    dd_dataset *ds = NULL;
    if (argc < 2 || dd_dataset_load(argv[1], &ds) != DD_OK) { fprintf(stderr, "%s\n", dd_last_error()); return 1; }
    const dd_cf32 *x = ds->in[DD_SPLIT_TEST], *y = ds->out[DD_SPLIT_TEST];
    size_t n = ds->n[DD_SPLIT_TEST];
    dd_metric_set m;
    if (dd_metrics_compute(x, y, n, &ds->spec, DD_ACLR_OPENDPD, 0, &m) != DD_OK) { fprintf(stderr, "%s\n", dd_last_error()); return 1; }
    printf("samples %zu ACLR %.2f dBc\n", n, m.aclr.avg_db);
    dd_dataset_free(&ds);
    return 0;
}
C
if cc -std=c11 "$TMP/rf.c" $RFFLAGS -Wl,-rpath,"$LIBDIR" -o "$TMP/rf" 2>"$TMP/ccrf.log"; then pass; else fail "compile against distdpd_rf: $(cat "$TMP/ccrf.log")"; fi
if [ -x "$TMP/rf" ]; then
    run simulate --out "$TMP/rfdata" --samples 6000 -q
    set +e
    got=$("$TMP/rf" "$TMP/rfdata" 2>&1)
    set -e
    has "$got" "samples 1200 ACLR -" "the MPI-free program measures a data set: $got"
    if command -v ldd >/dev/null; then
        deps=$(ldd "$TMP/rf")
        has "$deps" "libdistdpd_rf.so" "it loads libdistdpd_rf"
        hasnot "$deps" "libmpi" "it loads no libmpi"
        hasnot "$deps" "libzmq" "it loads no libzmq"
        hasnot "$deps" "libdistdpd.so" "it loads no libdistdpd"
    fi
    if command -v readelf >/dev/null; then
        hasnot "$(readelf -d "$LIBDIR/libdistdpd_rf.so" | grep NEEDED)" "libmpi" "libdistdpd_rf.so needs no libmpi"
        has "$(readelf -d "$LIBDIR/libdistdpd.so" | grep NEEDED)" "libdistdpd_rf" "libdistdpd.so needs libdistdpd_rf"
    fi
fi
# the installed command finds its library without LD_LIBRARY_PATH (RUNPATH $ORIGIN/../lib),
# also after the prefix is moved (what `make install PREFIX=/x` and `cmake --install
# --prefix /x` give alike; README "Installing")
set +e
ver=$(env -u LD_LIBRARY_PATH "$P/bin/distdpd" --version 2>&1)
set -e
has "$ver" "distdpd " "installed command runs without LD_LIBRARY_PATH"
if command -v readelf >/dev/null; then
    rp=$(readelf -d "$P/bin/distdpd" | grep -E 'RUNPATH|RPATH' || true)
    has "$rp" '$ORIGIN/../lib' "the command's RUNPATH is relative to it: $rp"
fi
mv "$P" "$TMP/moved"
set +e
ver=$(env -u LD_LIBRARY_PATH "$TMP/moved/bin/distdpd" --version 2>&1)
set -e
has "$ver" "distdpd " "a moved installation still runs"
if command -v ldd >/dev/null; then
    hasnot "$(env -u LD_LIBRARY_PATH ldd "$TMP/moved/bin/distdpd")" "libdistdpd.so.0 => not found" "ldd finds libdistdpd"
fi
finish
