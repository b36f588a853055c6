#!/usr/bin/env bash
# One `blockhaul run` of the synthetic CometBFT chain into a fresh staging directory and a fresh
# schema, both removed after: the unit that docs/benchmarks.md's chain-of-trust figures time side
# by side with farm-bench (--trust changes against --trust off, 4 and 100 validators):
#
#   farm-bench -n 5 --timeout 1200 -- scripts/trust-run.sh changes 4 3000 \
#     --vs 'scripts/trust-run.sh off 4 3000'
#
# Usage: scripts/trust-run.sh MODE VALIDATORS HEIGHTS
# Environment: TRUST_BENCH_BIN (default: blockhaul on PATH), DATABASE_URL (default the local
# server's postgres database), TMPDIR.
set -euo pipefail
mode="$1" vals="$2" heights="$3"
bin="${TRUST_BENCH_BIN:-blockhaul}"
dsn="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
dir="$(mktemp -d)"
schema="trustbench_$$"
cleanup() {
  rm -rf "$dir"
  psql -q "$dsn" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$bin" run --staging "$dir/s" --pg "$dsn" --schema "$schema" --to "$heights" --trust "$mode" \
  --synthetic-validators "$vals" --log-level warn >/dev/null
