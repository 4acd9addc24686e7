#!/usr/bin/env bash
# Writes the seed corpora under fuzz/corpus/<target>/ (not committed): inputs generated with the
# fuzz crate's fixed keys and from the public vectors in proto/tests/vectors (in the repository),
# plus node and witness config files made by `init`.
# Needs the fuzz binaries built (scripts/fuzz.sh builds them first).
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)
vectors=${ACCORD_VECTORS:-$root/proto/tests/vectors}
bin=target/x86_64-unknown-linux-gnu/release
[ -d "$vectors" ] || { echo "seeds.sh: $vectors not found (set ACCORD_VECTORS)" >&2; exit 1; }
mkdir -p corpus
ACCORD_VECTORS=$vectors ACCORD_CORPUS=corpus "$bin/gen_seeds" -runs=0 >/dev/null 2>&1 \
  || { echo "seeds.sh: gen_seeds failed" >&2; exit 1; }

# Config files as `init` writes them (the config targets resolve their paths against a
# directory made by the same init, so these seeds validate).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node=$root/target/debug/accord-node
witness=$root/target/debug/accord-witness
if [ -x "$node" ] && [ -x "$witness" ]; then
  "$node" init --dir "$tmp/n" --name acme --listen 127.0.0.1:0 --party alice >/dev/null
  "$witness" init --dir "$tmp/w" --name w1.example --grpc-listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 >/dev/null
  mkdir -p corpus/node_config corpus/witness_config
  cp "$tmp/n/accord.toml" corpus/node_config/init
  cp "$tmp/w/witness.toml" corpus/witness_config/init
  # Variants that reach more of validation: peers, witnesses, limits, federation.
  { cat "$tmp/n/accord.toml"
    printf '\n[federation]\nbatch_size = 4\nquarantine_timeout_ms = 1000\n'
    printf '\n[limits]\nmax_connections = 10\n'
    printf '\n[[witnesses.list]]\nvkey = "%s"\nendpoint = "https://127.0.0.1:1"\nca = "tls/ca.pem"\n' \
      "$(cat "$tmp/w/witness.vkey")"
  } > corpus/node_config/extended
  { cat "$tmp/w/witness.toml"
    printf '\n[[logs]]\norigin = "acme.accord/log"\nvkeys = ["%s"]\n' "$(cat "$tmp/n/keys/node.vkey")"
  } > corpus/witness_config/with-log
else
  echo "seeds.sh: target/debug/accord-node or accord-witness missing; config seeds skipped" >&2
fi
for d in corpus/*/; do printf '%-16s %s seeds\n' "$(basename "$d")" "$(ls "$d" | wc -l)"; done
