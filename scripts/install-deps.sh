#!/usr/bin/env bash
# Installs the Debian packages distdpd needs to build and test, only when one is
# missing (idempotent). Runs as root, or through sudo when available.
set -euo pipefail
PKGS=(build-essential cmake pkg-config
      libopenmpi-dev openmpi-bin
      libopenblas-dev liblapacke-dev
      libfftw3-dev libcjson-dev
      libzmq3-dev   # ZeroMQ with CURVE: the parameter server's transport (docs/ps.md)
      libsodium-dev   # X25519, ChaCha20, crypto_box: secure aggregation (docs/federated.md)
      libzip-dev    # .npz model export / import (docs/deploy.md)
      python3-numpy python3-onnx   # tests/cli/export_onnx.sh checks the ONNX export
      iproute2   # ip netns: the emulated multi-host MPI test
      time)      # /usr/bin/time -v: peak memory of the command-line tests
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them or rerun as root" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
