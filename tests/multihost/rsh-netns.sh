#!/bin/sh
# Open MPI "remote shell" for emulated hosts (tests/multihost/run.sh): instead of ssh, run
# the command in the network namespace that holds the host's address. Open MPI calls it as
#   rsh-netns.sh [ssh-style options] HOST COMMAND...
# and the map "ADDRESS=NAMESPACE ..." comes from DD_MH_MAP (set by run.sh).
while [ $# -gt 0 ]; do
    case "$1" in
    -*) shift ;; # ssh options (-x, -T, ...): nothing to do
    *) break ;;
    esac
done
host=$1
shift
ns=
for pair in $DD_MH_MAP; do
    if [ "${pair%%=*}" = "$host" ]; then ns=${pair#*=}; fi
done
if [ -z "$ns" ]; then
    echo "rsh-netns.sh: unknown emulated host '$host' (map: $DD_MH_MAP)" >&2
    exit 255
fi
exec ip netns exec "$ns" /bin/sh -c "$*"
