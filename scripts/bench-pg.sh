#!/usr/bin/env bash
# The storage benches on PostgreSQL beside RocksDB, in one run (issue 31, item 6): starts a
# throwaway PostgreSQL from Debian's packages (initdb and pg_ctl in a temporary directory, as the
# `postgres` user when run as root, on a free port on 127.0.0.1, password authentication), gives
# each bench a fresh database, and prints each bench's JSON line, RocksDB first, then PostgreSQL:
#
#   bench append       the node's appends (SubmitBatch, unary Submit, latency at full and half load)
#   bench federation   A → B, B's store on each backend
#   bench scale        a ledger of N records: start-up, memory, bytes per record, cold reads
#
#   scripts/bench-pg.sh [--quick] [--records N] [--bin DIR] [--only append|federation|scale]
#
# --quick       append and federation in their quick modes; scale at 10^5 records
# --records N   bench scale's ledger (default 10^6; 10^5 with --quick)
# --bin DIR     where accordctl, accord-node and accord-witness are (default target/debug)
# --only B      one bench
#
# PostgreSQL runs with its defaults (synchronous_commit on), on the same machine: the figures
# compare the two stores under the same node, not a tuned database server. Needs PostgreSQL's
# server programs (scripts/ensure-deps.sh installs them). Run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
records=""
bin=target/debug
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick); shift ;;
    --records) records="${2:?--records needs a number}"; shift 2 ;;
    --bin) bin="${2:?--bin needs a directory}"; shift 2 ;;
    --only) only="${2:?--only needs a bench}"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
case "$only" in ""|append|federation|scale) ;; *) echo "--only: append, federation or scale" >&2; exit 2 ;; esac
ctl="$bin/accordctl"
for b in accordctl accord-node accord-witness; do
  [ -x "$bin/$b" ] || { echo "$bin/$b not found: cargo build --workspace --bins" >&2; exit 1; }
done
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$pgbin" ] && [ -x "$pgbin/initdb" ] || {
  echo "PostgreSQL's server programs are not installed: run scripts/ensure-deps.sh" >&2; exit 1; }
if [ -z "$records" ]; then
  if [ ${#quick[@]} -gt 0 ]; then records=100000; else records=1000000; fi
fi

tmp=$(mktemp -d)
as_pg=()
if [ "$(id -u)" = 0 ]; then
  chown postgres:postgres "$tmp"
  as_pg=(runuser -u postgres --)
fi
password=bench-$RANDOM$RANDOM
echo "$password" >"$tmp/password"
chmod 644 "$tmp/password"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${as_pg[@]}" "$pgbin/initdb" -D "$tmp/data" -U accord --auth=scram-sha-256 \
  --pwfile="$tmp/password" >/dev/null
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $tmp" start >/dev/null
trap '"${as_pg[@]}" "$pgbin/pg_ctl" -D "$tmp/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
export PGPASSWORD=$password
# Each PostgreSQL run gets a database of its own (never a subshell: the count must persist).
n=0
pg=()
fresh_db() {
  n=$((n + 1))
  "$pgbin/psql" -h 127.0.0.1 -p "$port" -U accord -d postgres -qc "CREATE DATABASE bench$n" >/dev/null
  pg=(--backend postgres --pg-url "postgres://accord@127.0.0.1:$port/bench$n" --pg-password-file "$tmp/password")
}
echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port" >&2

run() { echo "== $*" >&2; "$ctl" --output json "$@" | tail -1; }
if [ -z "$only" ] || [ "$only" = append ]; then
  run bench append "${quick[@]}"
  fresh_db
  run bench append "${quick[@]}" "${pg[@]}"
fi
if [ -z "$only" ] || [ "$only" = federation ]; then
  run bench federation "${quick[@]}"
  fresh_db
  run bench federation "${quick[@]}" "${pg[@]}"
fi
if [ -z "$only" ] || [ "$only" = scale ]; then
  run bench scale --records "$records"
  fresh_db
  run bench scale --records "$records" "${pg[@]}"
fi
