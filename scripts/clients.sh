#!/usr/bin/env bash
# Real gRPC clients outside Rust against a node and a witness made by a plain `init` (issue 28):
# Python grpcio (BoringSSL inside gRPC's C core, as the C++, Ruby, PHP and C# clients) and
# Node.js @grpc/grpc-js (Node's OpenSSL), each trusting only the tls/ca.pem `init` wrote.
# Against the witness: health. Against the node, as party alice with her token from `init`
# (clients/python/party.py, clients/node/party.js): health, reflection, Declare, GetCommitment,
# WatchCommitments, and a refused call whose `accord-reason` the client checks.
#
#   scripts/clients.sh [BIN_DIR]    BIN_DIR holds accord-node and accord-witness (target/debug)
#
# The Python packages go into a virtual environment at target/pyenv and the npm packages into
# target/node-clients (created on first use; clients/python/requirements.txt and
# clients/node/package.json say which); the Python stubs are generated from proto/ into
# target/python-stubs with grpcio-tools at each run. Needs python3 with venv, node and npm
# (scripts/ensure-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/debug}"

py=target/pyenv
if ! cmp -s clients/python/requirements.txt "$py/requirements.txt"; then
  echo "creating $py (clients/python/requirements.txt)" >&2
  python3 -m venv "$py"
  "$py/bin/pip" install -q --disable-pip-version-check -r clients/python/requirements.txt
  cp clients/python/requirements.txt "$py/requirements.txt"
fi
stubs=target/python-stubs
rm -rf "$stubs"
mkdir -p "$stubs"
find proto/accord -name '*.proto' -print0 |
  xargs -0 "$py/bin/python" -m grpc_tools.protoc -I proto --python_out="$stubs" --grpc_python_out="$stubs"
js=target/node-clients
if ! cmp -s clients/node/package.json "$js/package.json" || [ ! -d "$js/node_modules/@grpc/grpc-js" ]; then
  echo "installing $js (clients/node/package.json)" >&2
  mkdir -p "$js"
  cp clients/node/package.json "$js/package.json"
  (cd "$js" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # Each daemon drains and exits on SIGTERM; its directory goes only after it has.
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# Starts a daemon (its stdout through a FIFO kept open) and sets `started` to its first stdout
# line, the `listening ...` line it prints once bound: readiness is observed, never slept for.
# Called in this shell, not in a `$(...)` subshell, so that its pid reaches `pids` and the daemon
# is stopped on exit (it once ran in a subshell and every run left a node and a witness behind).
start() {
  local name=$1
  shift
  mkfifo "$tmp/$name.out"
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=("$!")
  local fd
  exec {fd}<"$tmp/$name.out"
  if ! read -r -t 60 -u "$fd" started; then
    echo "$name did not start:" >&2
    cat "$tmp/$name.err" >&2
    exit 1
  fi
}

"$bin/accord-node" init --dir "$tmp/node" --name acme --party alice --listen 127.0.0.1:0 >/dev/null
"$bin/accord-witness" init --dir "$tmp/witness" --name witness.example/w1 \
  --grpc-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 >/dev/null 2>&1
start node "$bin/accord-node" serve --config "$tmp/node/accord.toml"
node_addr=${started#listening }
start witness "$bin/accord-witness" serve --config "$tmp/witness/witness.toml"
witness_addr=${started#listening grpc=}
witness_addr=${witness_addr%% *}

failed=0
check() {
  local what=$1
  shift
  if out=$("$@" 2>&1); then
    echo "ok: $what"
    sed 's/^/    /' <<<"$out"
  else
    echo "FAILED: $what" >&2
    sed 's/^/    /' <<<"$out" >&2
    failed=1
  fi
}
# Python dials the IP address (the certificate's IP name is checked), Node.js the DNS name
# (Node warns when TLS is asked to verify an IP address as a server name).
for target in "node $node_addr $tmp/node/tls/ca.pem" "witness $witness_addr $tmp/witness/tls/ca.pem"; do
  read -r what addr ca <<<"$target"
  check "python grpcio health, $what at $addr" \
    "$py/bin/python" clients/python/health.py --target "$addr" --ca "$ca"
  check "node grpc-js health, $what at localhost:${addr##*:}" \
    env NODE_PATH="$js/node_modules" node clients/node/health.js --target "localhost:${addr##*:}" --ca "$ca"
done
token="$tmp/node/parties/alice.token"
check "python grpcio party alice, node at $node_addr" \
  env PYTHONPATH="$stubs" "$py/bin/python" clients/python/party.py --target "$node_addr" \
  --ca "$tmp/node/tls/ca.pem" --token-file "$token" --candidate acme/bob
check "node grpc-js party alice, node at localhost:${node_addr##*:}" \
  env NODE_PATH="$js/node_modules" node clients/node/party.js --target "localhost:${node_addr##*:}" \
  --ca "$tmp/node/tls/ca.pem" --token-file "$token" --candidate acme/bob
exit "$failed"
