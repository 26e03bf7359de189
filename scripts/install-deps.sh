#!/usr/bin/env bash
# Installs the Debian packages distdpd needs to build and test, only when one is
# missing (idempotent). Runs as root, or through sudo when available.
set -euo pipefail
PKGS=(build-essential cmake pkg-config
      libopenmpi-dev openmpi-bin
      mpich libmpich-dev   # make test-mpich: the mpi label on a second MPI (Open MPI stays default)
      libopenblas-dev liblapacke-dev
      libfftw3-dev libcjson-dev
      libzmq3-dev   # ZeroMQ with CURVE: the parameter server's transport (docs/ps.md)
      libsodium-dev   # X25519, ChaCha20, crypto_box: secure aggregation (docs/federated.md)
      libzip-dev    # .npz model export / import (docs/deploy.md)
      libprotobuf-c-dev protobuf-c-compiler   # ONNX export, from third_party/onnx/onnx.proto
      python3-numpy python3-onnx   # tests/cli/export_onnx.sh checks the ONNX export
      iproute2   # ip netns: the emulated multi-host MPI test
      time       # /usr/bin/time -v: peak memory of the command-line tests
      clang libclang-rt-14-dev   # make fuzz: libFuzzer + ASan/UBSan (tests/fuzz, docs/testing.md)
      clang-tidy cppcheck lcov valgrind)  # make lint, make coverage, make valgrind (docs/testing.md)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Open MPI stays the default mpicc / mpirun / mpiexec next to MPICH (which is only
# reached as mpicc.mpich, mpiexec.mpich): pin the alternatives when both are present.
keep_openmpi() {
  [ -x /usr/bin/mpicc.openmpi ] && [ -x /usr/bin/mpicc.mpich ] || return 0
  local cur; cur=$(readlink /etc/alternatives/mpi 2>/dev/null || true)
  local run; run=$(readlink /etc/alternatives/mpirun 2>/dev/null || true)
  [ "$cur" = /usr/bin/mpicc.openmpi ] && [ "$run" = /usr/bin/mpirun.openmpi ] && return 0
  echo "install-deps: setting Open MPI as the default MPI (update-alternatives)"
  $SUDO update-alternatives --set mpi /usr/bin/mpicc.openmpi
  $SUDO update-alternatives --set mpirun /usr/bin/mpirun.openmpi
}
SUDO=""
if [ ${#missing[@]} -eq 0 ]; then
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi
  keep_openmpi
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them or rerun as root" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
keep_openmpi
