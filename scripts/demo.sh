#!/usr/bin/env bash
# Accord's main job, end to end on this machine: starts real nodes (and witnesses) on ephemeral
# ports in a temporary directory, submits records, and prints them with their durability.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
if [ ! -x target/debug/accordctl ]; then
  echo "first build: compiling RocksDB's C++ and Accord (25 to 40 minutes on two cores; cargo shows progress)" >&2
fi
# Built with progress shown (cargo's own bar on a terminal, a line per crate otherwise), then run.
cargo build -p accordctl --bin accordctl
exec target/debug/accordctl demo "$@"
