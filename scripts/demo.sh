#!/usr/bin/env bash
# Accord's main job, end to end on this machine: starts real nodes (and witnesses) on ephemeral
# ports in a temporary directory, submits records, and prints them with their durability.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
exec cargo run --quiet -p accordctl -- demo "$@"
