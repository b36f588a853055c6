#!/bin/sh
# export_streams.sh: export of one staged range with 1 and with 2 export
# streams (--export-streams), each into a fresh database, printing each
# run's export summary line (blocks/s, rows/s). Usage:
#   bench/export_streams.sh [TO] [STREAMS...]   (defaults: 20000, "1 2")
# Needs psql and PostgreSQL at $PGHOST (default 127.0.0.1), user postgres.
set -eu
TO=${1:-20000}
shift 2>/dev/null || true
STREAMS=${*:-"1 2"}
PGHOST=${PGHOST:-127.0.0.1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/blockhaul" ./cmd/blockhaul
"$dir/blockhaul" fetch --staging "$dir/stg" --from 1 --to "$TO" >/dev/null 2>&1
for n in $STREAMS; do
	db="bh_streams_${n}_$$"
	psql -qh "$PGHOST" -U postgres -c "CREATE DATABASE $db"
	"$dir/blockhaul" export --staging "$dir/stg" --from 1 --to "$TO" --export-streams "$n" \
		--pg "postgres://postgres@$PGHOST:5432/$db?sslmode=disable" 2>/dev/null |
		sed -n "s/^  export: */streams=$n: /p"
	psql -qh "$PGHOST" -U postgres -c "DROP DATABASE $db"
done
