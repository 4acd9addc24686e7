#!/usr/bin/env bash
# Deterministic simulation of three organisations and two witnesses (issue 16, item 2):
#   scripts/simulate.sh [--seeds N] [--from S] [--steps K] [--commitments C]
#   [--jobs J]
# runs seeds S..S+N (default 1000 from 0) on J threads and prints every failing seed with the command that
# replays it (SIM_SEED=<seed> cargo test -p accord-sim --test seeds), then a summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo build -q -p accord-sim --bin accord-sim
seeds=1000
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --from|--steps|--commitments|--jobs) args+=("$1" "$2"); shift 2 ;;
    *) echo "usage: $0 [--seeds N] [--from S] [--steps K] [--commitments C]" >&2; exit 2 ;;
  esac
done
exec target/debug/accord-sim --seeds "$seeds" "${args[@]}"
