# readme-queries.awk: the example queries of README.md's "Querying your
# data" section, one file per query, for query-bench.sh and the test that
# runs them (scripts/queries_test.go). Each is a ```sql block whose first
# line is "-- FAMILY: title". Usage:
#   awk -v family=cometbft -v out=DIR -f scripts/readme-queries.awk README.md
# writes DIR/01.sql, DIR/02.sql, … for the family's queries, in README order.
/^## / { inside = ($0 == "## Querying your data") }
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
