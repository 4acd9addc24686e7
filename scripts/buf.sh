#!/usr/bin/env bash
# Holds proto/ to buf's rules (issue 28): `buf lint` with the STANDARD rules and `buf breaking`
# against the recorded baseline image (proto/buf.yaml says which rules and why).
#
#   scripts/buf.sh                     lint, then breaking against proto/buf-baseline.binpb
#   scripts/buf.sh --record-baseline   write proto/buf-baseline.binpb from the schema as it is
#
# buf comes from the npm registry (@bufbuild/buf, the version clients/buf/package.json pins),
# installed into target/buf on first use; needs node and npm (scripts/ensure-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/buf
if ! cmp -s clients/buf/package.json "$dir/package.json" || [ ! -x "$dir/node_modules/.bin/buf" ]; then
  echo "installing $dir (clients/buf/package.json)" >&2
  mkdir -p "$dir"
  cp clients/buf/package.json "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi
buf="$PWD/$dir/node_modules/.bin/buf"
cd proto
if [ "${1:-}" = --record-baseline ]; then
  "$buf" build -o buf-baseline.binpb
  echo "recorded proto/buf-baseline.binpb"
  exit 0
fi
"$buf" lint
"$buf" breaking --against buf-baseline.binpb
echo "buf: lint clean (STANDARD), no breaking change against proto/buf-baseline.binpb"
