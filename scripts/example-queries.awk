# example-queries.awk: the example queries of docs/querying.md's "Example
# queries" section, one file per query, for query-bench.sh and the test that
# runs them (scripts/queries_test.go). Each is a ```sql block whose first
# line is "-- FAMILY: title". Usage:
#   awk -v family=cometbft -v out=DIR -f scripts/example-queries.awk docs/querying.md
# writes DIR/01.sql, DIR/02.sql, … for the family's queries, in the document's order.
/^## / { inside = ($0 == "## Example queries") }
inside && /^```sql$/ { block = 1; first = 1; next }
block && /^```$/ {
	block = 0
	if (keep) close(file)
	keep = 0
	next
}
block {
	if (first) {
		first = 0
		keep = ($0 ~ ("^-- " family ": "))
		if (keep) {
			n++
			file = sprintf("%s/%02d.sql", out, n)
		}
	}
	if (keep) print > file
}
