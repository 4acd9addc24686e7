#!/usr/bin/env bash
# Runs every Accord test: unit, property and end-to-end (real node and witness processes on
# ephemeral ports). One build profile (dev, with optimised dependencies) serves tests and demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
cargo build --workspace --bins --quiet
cargo test --workspace "$@"
