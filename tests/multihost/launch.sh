#!/bin/sh
# A stand-in for ssh, for `mpiexec -launcher ssh -launcher-exec tests/multihost/launch.sh`:
# `launch.sh [-options] 10.77.0.N COMMAND` runs COMMAND (a shell command line, as ssh sends it) on
# simulated host N (tests/multihost/host.sh).
while [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
exec "$(dirname "$0")/host.sh" "${host##*.}" sh -c "$*"
