#!/usr/bin/env bash
# Runs every Accord test: unit, property and end-to-end (real node and witness processes on
# ephemeral ports). One build profile (dev, with optimised dependencies) serves tests and demo.
# The last line sums every test binary's result: "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
# A one-shot build gains nothing from incremental state, and its caches are the largest part of a
# dev build's target directory (tens of GB over every test binary): a clean CI clone ran out of
# disk with it on. A developer's own cargo invocations keep the default.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
bash scripts/ensure-deps.sh
# The wire schema held to buf's STANDARD lint rules and checked for breaking changes against the
# recorded baseline (issue 28; proto/buf.yaml).
bash scripts/buf.sh
if [ ! -x target/debug/accord-node ]; then
  echo "first build: compiling RocksDB's C++ and Accord (25 to 40 minutes on two cores; cargo shows progress)" >&2
fi
cargo build --workspace --bins
# Real clients outside Rust (Python grpcio, Node.js @grpc/grpc-js) against a node and a witness
# made by a plain `init` (issue 28).
bash scripts/clients.sh "${CARGO_TARGET_DIR:-target}/debug"
# accordctl's offline commands build and run without the node (no RocksDB; issue 10). Its own
# target directory, so the full accordctl the end-to-end tests run is not replaced.
cargo build -p accordctl --no-default-features --target-dir target/offline
bash scripts/offline-smoke.sh target/offline/debug/accordctl
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i == "passed;") p += $(i-1); if ($i == "failed;") f += $(i-1) } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
