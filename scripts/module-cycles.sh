#!/usr/bin/env bash
# No cycle between accord-node's top-level modules (issue 10): runs the check that CI runs
# (tests/tests/module_cycles.rs), which names each cycle with the files that make its edges.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
exec cargo test -q -p accord-tests --test e2e module_cycles:: -- --nocapture
