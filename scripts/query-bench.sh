#!/bin/sh
# query-bench.sh: what the default secondary indexes cost, and how long
# each example query of docs/querying.md takes on them.
#
# For each family: stage BLOCKS synthetic blocks (EVM at --synthetic-txs 15,
# a tenth of its default density, so that 100,000 blocks fit a small
# machine), export them into a fresh database with the indexes deferred and
# built one at a time (--index-workers 1), and print each index's build
# time (from the export's log), their sum, and each size. Then drop and
# build them all again with --index-workers 4 (an export
# --defer-indexes=always of the completed range does only that) for the
# serial/parallel ratio in one run. Last, EXPLAIN ANALYZE each example query of the family twice and
# print the second (warm) run's execution time and its scans.
#
# Usage: scripts/query-bench.sh [BLOCKS] [FAMILIES]  (defaults: 100000, "cometbft evm")
# Needs psql and PostgreSQL at $PGHOST (default 127.0.0.1), user postgres.
# STAGING_DIR=DIR keeps the staged stores there (reused by a later run);
# KEEP=1 keeps the databases (bh_queries_FAMILY); REUSE_DB=1 exports into
# the kept one (a range already there: only the index builds and queries).
set -eu
BLOCKS=${1:-100000}
FAMILIES=${2:-"cometbft evm"}
PGHOST=${PGHOST:-127.0.0.1}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stg=${STAGING_DIR:-$work}
cd "$repo"
go build -o "$work/blockhaul" ./cmd/blockhaul
bh="$work/blockhaul"
psql="psql -X -q -h $PGHOST -U postgres"

now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{ printf "%.1f", $2 - $1 }'; }

for fam in $FAMILIES; do
	case $fam in
	evm) from=0 txs="--synthetic-txs 15" ;;
	*) from=1 txs="" ;;
	esac
	db="bh_queries_$fam"
	url="postgres://postgres@$PGHOST:5432/$db?sslmode=disable"
	echo "== $fam: blocks $from-$BLOCKS"
	# shellcheck disable=SC2086
	"$bh" fetch --chain "$fam" $txs --staging "$stg/$fam" --from "$from" --to "$BLOCKS" --progress-interval 0 >/dev/null 2>&1
	if [ -z "${REUSE_DB:-}" ]; then
		$psql -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
	fi
	t0=$(now)
	# With REUSE_DB=1 and the range already in the database (KEEP=1 of an
	# earlier run), this only drops and builds the indexes, one at a time.
	"$bh" export --chain "$fam" --staging "$stg/$fam" --from "$from" --to "$BLOCKS" --pg "$url" \
		--defer-indexes=always --index-workers 1 --progress-interval 0 >"$work/export.out" 2>"$work/export.log"
	echo "export with deferred indexes, built one at a time: $(secs "$t0" "$(now)") s"
	sed -n 's/^  export: */  export: /p' "$work/export.out"
	echo "index build (serial) and size:"
	$psql -d "$db" -At -F ' ' -c "SELECT indexrelname, pg_size_pretty(pg_relation_size(indexrelid)) FROM pg_stat_user_indexes WHERE schemaname = '$fam' AND indexrelname NOT LIKE '%pkey'" | sort >"$work/sizes"
	sed -n 's/.*msg="index built" .*index=\([^ ]*\) table=\([^ ]*\) duration=\([^ ]*\).*/\1 \2 \3/p' "$work/export.log" | sort >"$work/times"
	join "$work/times" "$work/sizes" | awk '{ printf "  %-32s %-18s %8s %10s %s\n", $1, $2, $3, $4, $5 }'
	$psql -d "$db" -At -c "SELECT 'tables ' || pg_size_pretty(sum(pg_table_size(relid))) || ', primary keys ' || pg_size_pretty(sum(pg_indexes_size(relid)) - (SELECT sum(pg_relation_size(indexrelid)) FROM pg_stat_user_indexes WHERE schemaname = '$fam' AND indexrelname NOT LIKE '%pkey')) || ', secondary indexes ' || pg_size_pretty((SELECT sum(pg_relation_size(indexrelid)) FROM pg_stat_user_indexes WHERE schemaname = '$fam' AND indexrelname NOT LIKE '%pkey')) FROM pg_stat_user_tables WHERE schemaname = '$fam'"
	awk '{ d = $3; s = d; sub(/[a-z]+$/, "", s); if (d ~ /ms$/) s /= 1000; else if (d ~ /m/) { split(d, p, "m"); s = p[1] * 60 + p[2] } t += s }
		END { printf "index builds, one at a time (sum of the above): %.1f s\n", t }' "$work/times"
	t0=$(now)
	"$bh" export --chain "$fam" --staging "$stg/$fam" --from "$from" --to "$BLOCKS" --pg "$url" \
		--defer-indexes=always --index-workers 4 --progress-interval 0 >/dev/null 2>&1
	echo "the same indexes dropped and built again, --index-workers 4: $(secs "$t0" "$(now)") s"
	mkdir -p "$work/q-$fam"
	awk -v family="$fam" -v out="$work/q-$fam" -f scripts/example-queries.awk docs/querying.md
	echo "Example queries (EXPLAIN ANALYZE, second run):"
	for q in "$work/q-$fam"/*.sql; do
		title=$(head -1 "$q" | sed 's/^-- [a-z]*: //')
		{ echo "EXPLAIN (ANALYZE, BUFFERS)"; sed 1d "$q"; } >"$work/explain.sql"
		$psql -d "$db" -At -f "$work/explain.sql" >/dev/null
		$psql -d "$db" -At -f "$work/explain.sql" >"$work/plan"
		ms=$(sed -n 's/^Execution Time: \([0-9.]*\) ms/\1/p' "$work/plan")
		rows=$(head -1 "$work/plan" | sed -n 's/.*actual time=[^ ]* rows=\([0-9]*\).*/\1/p')
		scans=$(grep -o 'Seq Scan on [a-z0-9_]*\|Bitmap Index Scan on [a-z0-9_]*\|Index \(Only \)\?Scan \(Backward \)\?using [a-z0-9_]*' "$work/plan" | sort -u | tr '\n' ';')
		printf '  %8s ms  rows %-6s %s  [%s]\n' "$ms" "$rows" "$title" "$scans"
	done
	if [ -z "${KEEP:-}" ]; then
		$psql -c "DROP DATABASE $db"
	fi
done
