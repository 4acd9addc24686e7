#!/usr/bin/env bash
# Fuzzes every parser that takes outside bytes (issue 16), each target for a bounded time.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 60 seconds per target, every target
#   FUZZ_PROTO_ONLY=1 scripts/fuzz.sh 30      only the targets that do not link accord-node
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). The fuzz crate is
# not a workspace member (fuzz/, own lock file and target dir); it only wraps the targets'
# bodies, which live in fuzz/targets (a workspace member: `cargo test -p accord-fuzz-targets`
# replays every target over fuzz/seeds, fuzz/corpus and fuzz/artifacts on the stable
# toolchain). Targets that depend on accord-node / accord-witness link RocksDB: when the
# workspace build already compiled librocksdb.a, librocksdb-sys links that archive instead of
# compiling RocksDB's C++ again.
#
# Seeds: fuzz/seeds/<target>/ (committed; fuzz/seeds.sh regenerates them, partly from
# proto/tests/vectors). New inputs found are kept in fuzz/corpus/<target>/, crashes in
# fuzz/artifacts/<target>/ (both local; the replay test runs them too). One line per target
# is printed and appended to fuzz/results.tsv: target, seconds, executions, crashes. The exit
# status is non-zero when any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz)" >&2
  exit 1
fi
secs=${1:-60}
shift || true
cd fuzz

proto_targets=(note keys checkpoint merkle signed_record)
node_targets=(record_edge envelope receipt node_config witness_config witness_body)
features=()
if [ "${FUZZ_PROTO_ONLY:-0}" = 1 ]; then
  all=("${proto_targets[@]}")
else
  all=("${proto_targets[@]}" "${node_targets[@]}")
  features=(--features node)
  lib=$(ls ../target/*/build/librocksdb-sys-*/out/librocksdb.a 2>/dev/null | head -1 || true)
  if [ -n "$lib" ]; then
    export ROCKSDB_LIB_DIR=$(cd "$(dirname "$lib")" && pwd) ROCKSDB_STATIC=1
  else
    echo "fuzz.sh: no prebuilt librocksdb.a in target/: RocksDB's C++ is compiled (15-25 min)" >&2
  fi
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

# Release build with debug assertions (integer overflow panics are findings too). No sanitizer:
# every crate of ours forbids unsafe code, and the coverage-guided search runs several times
# faster without ASan.
cargo +nightly fuzz build -s none -a "${features[@]}" >&2
bin=target/x86_64-unknown-linux-gnu/release

failed=0
printf '%-16s %8s %14s %8s\n' target seconds executions crashes
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log=$(mktemp)
  status=0
  "$bin/$t" "corpus/$t" "seeds/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"$log" 2>&1 || status=$?
  execs=$(awk '/stat::number_of_executed_units/ { print $2 }' "$log")
  crashes=$(ls "artifacts/$t" | wc -l)
  if [ "$status" -ne 0 ]; then
    failed=1
    echo "== $t exited $status; last lines:" >&2
    tail -30 "$log" >&2
  fi
  printf '%-16s %8s %14s %8s\n' "$t" "$secs" "${execs:-0}" "$crashes"
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$secs" "${execs:-0}" "$crashes" >>results.tsv
  rm -f "$log"
done
exit "$failed"
