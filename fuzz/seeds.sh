#!/usr/bin/env bash
# Writes the seed corpora under fuzz/seeds/<target>/ (committed; `cargo test -p
# accord-fuzz-targets` replays them, scripts/fuzz.sh starts from them): inputs generated with the
# fixed keys of fuzz/targets and from the public vectors in proto/tests/vectors (in the
# repository), plus node and witness config files made by `init` (fresh keys at each run, so
# those seeds change when regenerated; the others do not). Stable toolchain; no cargo-fuzz.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)
vectors=${ACCORD_VECTORS:-$root/proto/tests/vectors}
[ -d "$vectors" ] || { echo "seeds.sh: $vectors not found (set ACCORD_VECTORS)" >&2; exit 1; }
rm -rf seeds
(cd "$root" && cargo run -q -p accord-fuzz-targets --bin accord-fuzz-seeds -- "$vectors" fuzz/seeds)
for d in seeds/*/; do printf '%-16s %s seeds\n' "$(basename "$d")" "$(ls "$d" | wc -l)"; done
