#!/usr/bin/env bash
# The demo: a lab scenario end to end against real nginx in network namespaces — a
# reverse proxy that opens a new upstream connection per request (TIME_WAIT piles up),
# then the same world with upstream keep-alive. Needs root (namespaces, sysctls inside
# them); everything it creates is removed on exit, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "make demo builds network namespaces: run it as root (sudo make demo)" >&2
  exit 2
fi
exec target/release/loadlens lab run time-wait --fix -d 5s
