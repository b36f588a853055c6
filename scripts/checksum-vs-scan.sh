#!/usr/bin/env bash
# checksum-vs-scan.sh BLOCKHAUL DSN [SCHEMA] [CHAIN]
#
# Times `blockhaul checksum` of one database against a plain sequential
# scan of the same tables in the same run: SELECT count(*) of each table
# (a parallel seq scan that reads no cell) and COPY (FORMAT binary) of each
# table to /dev/null on the server (every cell read, no hashing; needs a
# superuser). Each is run twice, interleaved, the faster counts; the ratios
# are the figures to quote on a shared machine.
set -euo pipefail
bin=$1 dsn=$2 schema=${3:-cometbft} chain=${4:-$schema}
# Every table of the schema but blockhaul's own bookkeeping.
tables=$(psql -X -At "$dsn" -c "SELECT string_agg(table_name, ' ' ORDER BY table_name) FROM information_schema.tables WHERE table_schema = '$schema' AND table_name NOT LIKE 'blockhaul\_%'")
[ -n "$tables" ] || { echo "no tables in schema $schema" >&2; exit 2; }
now() { date +%s.%N; }
timed() { local t0; t0=$(now); "$@" >/dev/null; echo "$(now) - $t0" | bc; }
count() { for t in $tables; do psql -X -q "$dsn" -c "SET jit = off" -c "SELECT count(*) FROM \"$schema\".\"$t\""; done; }
copyout() { for t in $tables; do psql -X -q "$dsn" -c "COPY \"$schema\".\"$t\" TO '/dev/null' (FORMAT binary)"; done; }
checksum() { "$bin" checksum --chain "$chain" --pg "$dsn" --schema "$schema"; }
best() { printf '%s\n%s\n' "$1" "$2" | sort -g | head -1; }
c1=$(timed count); k1=$(timed checksum); p1=$(timed copyout)
c2=$(timed count); k2=$(timed checksum); p2=$(timed copyout)
c=$(best "$c1" "$c2") k=$(best "$k1" "$k2") p=$(best "$p1" "$p2")
printf 'count(*) of %s: %.2fs (%.2f, %.2f)\n' "$tables" "$c" "$c1" "$c2"
printf 'COPY binary to /dev/null: %.2fs (%.2f, %.2f)\n' "$p" "$p1" "$p2"
printf 'blockhaul checksum: %.2fs (%.2f, %.2f)\n' "$k" "$k1" "$k2"
printf 'checksum / count(*): %.2f; checksum / COPY binary: %.2f\n' "$(echo "$k / $c" | bc -l)" "$(echo "$k / $p" | bc -l)"
