#!/bin/bash
# Multi-host data-parallel training over TCP between emulated hosts (network namespaces
# joined by veth pairs and a bridge, started by the test itself), launched by mpirun with a
# hostfile: see tests/multihost/run.sh. Skips (77) with the reason when the machine does not
# allow network namespaces (not root, no iproute2, no CAP_SYS_ADMIN).
set -euo pipefail
: "${DD_CLI:?set DD_CLI to the distdpd command (ctest does)}"
cd "${DD_SOURCE_DIR:-$(dirname "$0")/../..}"
exec bash tests/multihost/run.sh
