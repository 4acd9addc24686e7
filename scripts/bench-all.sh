#!/usr/bin/env bash
# Runs every `accordctl bench` with --json and prints each one's JSON line (issue 14).
#
#   scripts/bench-all.sh [--quick] [--perf DIR] [--bin DIR]
#
# --quick      each bench in its quick mode (< 40 s each; says nothing about speed on a busy box)
# --perf DIR   also records `perf record -e cpu-clock -g` profiles of the node child process(es)
#              during `bench append` and `bench federation` (hardware cycles are not available on
#              every VM; cpu-clock is), and writes `perf report --stdio --no-children | head -60`
#              summaries to DIR/append.txt and DIR/federation.txt, flat ones (by thread, by
#              symbol) to DIR/*.flat.txt, the raw data beside them.
# --bin DIR    where accordctl, accord-node and accord-witness are (default target/debug; build
#              them first with `cargo build --workspace --bins`).
#
# The JSON lines go to stdout, one per bench, prefixed by nothing; the benches' human output and
# progress go to stderr. Run it on an idle machine for figures worth writing down.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
perf_dir=""
bin=target/debug
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick); shift ;;
    --perf) perf_dir="${2:?--perf needs a directory}"; shift 2 ;;
    --bin) bin="${2:?--bin needs a directory}"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
ctl="$bin/accordctl"
for b in accordctl accord-node accord-witness; do
  [ -x "$bin/$b" ] || { echo "$bin/$b not found: cargo build --workspace --bins" >&2; exit 1; }
done
if [ -n "$perf_dir" ]; then
  command -v perf >/dev/null || { echo "perf not found (Debian: apt-get install linux-perf)" >&2; exit 1; }
  mkdir -p "$perf_dir"
fi

# Runs one bench; prints its last stdout line (the JSON object) and checks that it is JSON.
# With a profile name, attaches perf to the bench's accord-node children ($expect of them).
run() {
  local name="$1" expect="$2"; shift 2
  local out; out=$(mktemp)
  "$ctl" bench "$@" "${quick[@]}" --json >"$out" &
  local pid=$! perf_pid=""
  if [ -n "$perf_dir" ] && [ "$expect" -gt 0 ]; then
    # Poll (no fixed sleep) until the bench has started its node(s), or it ended.
    local pids="" deadline=$((SECONDS + 120))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
      pids=$(pgrep -P "$pid" -x accord-node | paste -sd, - || true)
      # perf -p follows only the threads that exist when it attaches: wait until each node has
      # started its verifier threads (its last, once the ledger writer and runtime are up).
      local ready=0 p
      for p in ${pids//,/ }; do
        grep -qx 'verify-0' /proc/"$p"/task/*/comm 2>/dev/null && ready=$((ready + 1))
      done
      [ "$ready" -ge "$expect" ] && break
      pids=""
      sleep 0.1
    done
    if [ -n "$pids" ]; then
      perf record -q -e cpu-clock -g -p "$pids" -o "$perf_dir/$name.data" 2>"$perf_dir/$name.perf.log" &
      perf_pid=$!
    else
      echo "bench $name: no accord-node child process found to profile" >&2
    fi
  fi
  local status=0
  wait "$pid" || status=$?
  if [ -n "$perf_pid" ]; then
    # perf ends by itself when the profiled processes exit; SIGINT in case one outlived the bench.
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    perf report -i "$perf_dir/$name.data" --stdio --no-children 2>/dev/null | head -60 >"$perf_dir/$name.txt" || true
    # Flat views (call chains take most of the lines above): by thread, and by symbol.
    { perf report -i "$perf_dir/$name.data" --stdio --no-children -g none --sort comm 2>/dev/null | grep -v '^#' | grep -v '^$'
      echo
      perf report -i "$perf_dir/$name.data" --stdio --no-children -g none --sort comm,dso,sym 2>/dev/null | grep -v '^#' | grep -v '^$' | cut -c1-200 | head -60
    } >"$perf_dir/$name.flat.txt" || true
    echo "bench $name: profile summaries in $perf_dir/$name.txt and $name.flat.txt" >&2
  fi
  if [ "$status" -ne 0 ]; then
    echo "bench $name failed (exit $status)" >&2
    rm -f "$out"
    return "$status"
  fi
  local line; line=$(tail -n 1 "$out")
  rm -f "$out"
  if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; json.loads(sys.argv[1])' "$line" \
      || { echo "bench $name: last line is not JSON" >&2; return 1; }
  fi
  echo "$line"
}

run append 1 append
run federation 2 federation
run witness 0 witness
run log 0 log
run envelope 0 envelope
