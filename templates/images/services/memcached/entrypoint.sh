#!/bin/bash
# The official memcached image's contract: `memcached [args]` (or only flags) serves on all
# interfaces as an unprivileged user (the network is private); any other command runs as given.
set -euo pipefail
if [ "${1#-}" != "${1:-}" ]; then set -- memcached "$@"; fi
if [ "${1:-}" = memcached ]; then
  shift
  exec runuser -u memcache -- memcached --port=11211 "$@"
fi
exec "$@"
