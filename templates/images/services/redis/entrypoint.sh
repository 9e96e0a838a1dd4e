#!/bin/bash
# The official redis image's contract: `redis-server [args]` serves on all interfaces with
# protected mode off (the network is private); any other command runs as given.
set -euo pipefail
if [ "${1#-}" != "${1:-}" ]; then set -- redis-server "$@"; fi
if [ "${1:-}" = redis-server ]; then
  shift
  exec runuser -u redis -- redis-server --bind '* -::*' --protected-mode no --dir /data \
    --daemonize no --save '' --appendonly no "$@"
fi
exec "$@"
