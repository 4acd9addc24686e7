#!/usr/bin/env bash
# Runs the offline commands of an accordctl built with --no-default-features (scripts/test.sh):
# key generation, a signed-note check that must fail for a stranger's key, a one-leaf inclusion
# proof, and `receipt verify`'s usage error; and checks the node commands are absent.
set -euo pipefail
ctl=${1:?usage: offline-smoke.sh PATH/TO/accordctl}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vkey=$("$ctl" key generate --name example.com/log --out "$tmp/log.skey" | tail -n1)
case "$vkey" in example.com/log+*) ;; *) echo "offline accordctl: key generate printed '$vkey'" >&2; exit 1 ;; esac
[ -s "$tmp/log.skey" ] || { echo "offline accordctl: no skey written" >&2; exit 1; }
# A one-leaf tree: the root is the leaf hash, the proof is empty.
leaf=$(printf '%064d' 7)
"$ctl" tlog verify-inclusion --leaf-hash "$leaf" --index 0 --size 1 --root "$leaf" >/dev/null
if "$ctl" tlog verify-inclusion --leaf-hash "$leaf" --index 0 --size 1 --root "$(printf '%064d' 8)" >/dev/null 2>&1; then
  echo "offline accordctl: a wrong root verified" >&2; exit 1
fi
set +e
"$ctl" receipt verify --receipt "$tmp/absent" --peer-vkey "$vkey" 2>/dev/null
code=$?
set -e
[ "$code" = 2 ] || { echo "offline accordctl: receipt verify of a missing file exited $code, not 2" >&2; exit 1; }
if "$ctl" --help | grep -qE '^  (demo|bench|admin) '; then
  echo "offline accordctl lists node commands" >&2; exit 1
fi
echo "offline accordctl: ok"
