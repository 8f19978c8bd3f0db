#!/bin/sh
# Run COMMAND on simulated host N of tests/multihost/hosts.py: inside network namespace
# ${PPO1_MH_PREFIX}h<N>, with its own hostname (ppo1-host<N>) and, when PPO1_MH_DISK is set, its own
# disk at that path (the directory $PPO1_MH_DISK.host<N> bound there).
# usage: host.sh N COMMAND [ARG...]
set -e
n=$1
shift
exec ip netns exec "${PPO1_MH_PREFIX:?}h$n" unshare --uts --mount sh -c '
  set -e
  hostname "ppo1-host$0"
  if [ -n "$PPO1_MH_DISK" ]; then
    mkdir -p "$PPO1_MH_DISK" "$PPO1_MH_DISK.host$0"
    mount --bind "$PPO1_MH_DISK.host$0" "$PPO1_MH_DISK"
  fi
  exec "$@"' "$n" "$@"
