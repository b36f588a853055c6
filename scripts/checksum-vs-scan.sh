#!/usr/bin/env bash
# checksum-vs-scan.sh BLOCKHAUL DSN [SCHEMA] [CHAIN]
#
# Times `blockhaul checksum` of one database against sequential scans of the
# same tables in the same run, each as parallel as the checksum (PostgreSQL's
# leader and max_parallel_workers_per_gather workers):
#   count(*)        a parallel seq scan that reads no cell (it never deforms a
#                   tuple): the floor of any scan, not a digest's peer;
#   every cell      SELECT count(ROW(every column)): every cell of every row
#                   read and copied once, nothing computed on it: the
#                   cheapest scan that reads what a digest must;
#   COPY binary     every cell sent in its wire form to /dev/null on the
#                   server (needs a superuser), each table split by ctid into
#                   as many ranges, copied at once: what reading the rows out
#                   of the database costs, as a digest outside it would.
# Each is run twice, interleaved, the faster counts; the ratios are the
# figures to quote on a shared machine. CHECKSUM_B=another-binary times a
# second build of checksum in the same run (an A/B of two digests).
set -euo pipefail
bin=$1 dsn=$2 schema=${3:-cometbft} chain=${4:-$schema}
bin_b=${CHECKSUM_B:-}
q() { psql -X -q -At "$dsn" -c "SET jit = off" -c "$1"; }
# Every table of the schema but blockhaul's own bookkeeping.
tables=$(q "SELECT string_agg(table_name, ' ' ORDER BY table_name) FROM information_schema.tables WHERE table_schema = '$schema' AND table_name NOT LIKE 'blockhaul\_%'")
[ -n "$tables" ] || { echo "no tables in schema $schema" >&2; exit 2; }
procs=$(( $(q "SHOW max_parallel_workers_per_gather") + 1 ))
now() { date +%s.%N; }
timed() { local t0; t0=$(now); "$@" >/dev/null; echo "$(now) - $t0" | bc; }
count() { for t in $tables; do q "SELECT count(*) FROM \"$schema\".\"$t\""; done; }
cells() {
	local t cols
	for t in $tables; do
		cols=$(q "SELECT string_agg('t.' || quote_ident(column_name), ', ' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_schema = '$schema' AND table_name = '$t'")
		q "SELECT count(ROW($cols)) FROM \"$schema\".\"$t\" AS t"
	done
}
copyout() {
	local t pages step i
	for t in $tables; do
		pages=$(q "SELECT pg_relation_size('\"$schema\".\"$t\"') / current_setting('block_size')::bigint + 1")
		step=$(( pages / procs + 1 ))
		for ((i = 0; i < procs; i++)); do
			q "COPY (SELECT * FROM \"$schema\".\"$t\" WHERE ctid >= '($((i * step)),0)' AND ctid < '($(((i + 1) * step)),0)') TO '/dev/null' (FORMAT binary)" &
		done
		wait
	done
}
checksum() { "$1" checksum --chain "$chain" --pg "$dsn" --schema "$schema"; }
best() { printf '%s\n%s\n' "$1" "$2" | sort -g | head -1; }
declare -A r
for run in 1 2; do
	r[count$run]=$(timed count)
	r[sum$run]=$(timed checksum "$bin")
	r[cells$run]=$(timed cells)
	[ -z "$bin_b" ] || r[sumb$run]=$(timed checksum "$bin_b")
	r[copy$run]=$(timed copyout)
done
for k in count sum cells copy ${bin_b:+sumb}; do r[$k]=$(best "${r[${k}1]}" "${r[${k}2]}"); done
uptime
printf 'tables: %s (%d processes per scan)\n' "$tables" "$procs"
printf 'count(*):                  %7.2fs (%.2f, %.2f)\n' "${r[count]}" "${r[count1]}" "${r[count2]}"
printf 'every cell, count(ROW()):  %7.2fs (%.2f, %.2f)\n' "${r[cells]}" "${r[cells1]}" "${r[cells2]}"
printf 'COPY binary to /dev/null:  %7.2fs (%.2f, %.2f)\n' "${r[copy]}" "${r[copy1]}" "${r[copy2]}"
printf 'blockhaul checksum:        %7.2fs (%.2f, %.2f)  %s\n' "${r[sum]}" "${r[sum1]}" "${r[sum2]}" "$bin"
[ -z "$bin_b" ] || printf 'blockhaul checksum (B):    %7.2fs (%.2f, %.2f)  %s\n' "${r[sumb]}" "${r[sumb1]}" "${r[sumb2]}" "$bin_b"
ratio() { echo "${r[sum]} / ${r[$1]}" | bc -l; }
printf 'checksum / count(*): %.2f; / every cell: %.2f; / COPY binary: %.2f\n' "$(ratio count)" "$(ratio cells)" "$(ratio copy)"
[ -z "$bin_b" ] || printf 'checksum / checksum (B): %.2f\n' "$(echo "${r[sum]} / ${r[sumb]}" | bc -l)"
