#!/usr/bin/env bash
# The long failover loop on PostgreSQL (issue 31): a standby instance takes the writer's lease
# each time the writer is SIGKILLed, many times, and every acknowledged record is still there
# with the ledger continuing at the next sequence (tests/tests/storage_postgres.rs; the suite
# runs one cycle). PostgreSQL's server programs must be installed (scripts/ensure-deps.sh).
#
#   scripts/pg-failover.sh [--cycles N]      default: 20 cycles
#
# Prints the tests' `pg-failover:` lines (cycles, slowest takeover): the single node, and the writer
# killed under load from two organisations with witnesses (each cycle kills whichever is the writer);
# and the `pg-promotion:` line (the database's primary stopped, its synchronous replica promoted).
set -euo pipefail
cd "$(dirname "$0")/.."
cycles=20
while [ $# -gt 0 ]; do
  case "$1" in
    --cycles) cycles=$2; shift 2 ;;
    *) echo "usage: scripts/pg-failover.sh [--cycles N]" >&2; exit 2 ;;
  esac
done
cargo build --workspace --bins
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export ACCORD_PG_FAILOVER_CYCLES=$cycles
status=0
cargo test -p accord-tests --test e2e storage_ -- --nocapture --test-threads 1 >"$log" 2>&1 || status=$?
grep -E '^pg-(failover|promotion)' "$log" || true
if [ "$status" -ne 0 ]; then
  grep -E "panicked|FAILED" "$log" >&2 || tail -40 "$log" >&2
fi
exit "$status"
