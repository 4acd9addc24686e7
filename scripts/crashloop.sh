#!/usr/bin/env bash
# The long crash-loop run (issue 16): SIGKILL a node and a witness at random moments, many
# times, and check after every restart that nothing acknowledged was lost (see
# tests/tests/crash_loop.rs for what is checked). CI runs the same test with 3 cycles.
#
#   scripts/crashloop.sh [--cycles N] [--seed S]      default: 50 cycles, a random seed
#
# Prints the test's `crash-loop:` figures lines (recorded in RELIABILITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cycles=50
seed=
while [ $# -gt 0 ]; do
  case "$1" in
    --cycles) cycles=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: scripts/crashloop.sh [--cycles N] [--seed S]" >&2; exit 2 ;;
  esac
done
cargo build --workspace --bins
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export ACCORD_CRASHLOOP_CYCLES=$cycles
[ -n "$seed" ] && export ACCORD_CRASHLOOP_SEED=$seed
start=$(date +%s)
status=0
cargo test -p accord-tests --test e2e crash_loop:: -- --nocapture --test-threads 1 >"$log" 2>&1 || status=$?
grep -E '^crash-loop' "$log" || true
echo "crash-loop: $cycles cycles per process in $(( $(date +%s) - start )) s, exit $status"
if [ "$status" -ne 0 ]; then
  grep -E "panicked|FAILED|seed" "$log" >&2 || tail -40 "$log" >&2
fi
exit "$status"
