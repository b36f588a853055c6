#!/bin/sh
# partition-bench.sh: should blockhaul partition its tables by height
# range (issue 13, --partition-blocks K)? It was measured and decided
# against (docs/design/partitions.md holds the figures of the run the
# decision rests on); the harness (bench.RunPartition, bench/partition.go,
# and its command bench/cmd/partition) left the tree with that decision and
# is run from the last commit that held it: this script exports that
# commit into a temporary directory and runs it there.
#
# For each family: one staged range exported into plain tables and into
# tables partitioned by height, K heights each, with 1 and 2 streams,
# alternating, each load into a fresh database with its indexes deferred;
# then, per layout, the deferred index build, a height range count and a
# by-hash lookup (also with 200 partitions), and the re-export of one
# partition's heights (export.Replay against DETACH, DROP, CREATE and
# export of that partition).
#
# Usage: scripts/partition-bench.sh [OUTDIR]  (the Markdown and JSON of each
# family go there; default: print only). Needs a git checkout with history,
# and $DATABASE_URL or scripts/pg-ensure.sh's server. CBFT_BLOCKS, CBFT_K,
# EVM_BLOCKS, EVM_K, ROUNDS override the sizes (defaults 10000, 1000, 2000,
# 200, 2).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
DATABASE_URL=${DATABASE_URL:-$(scripts/pg-ensure.sh)}
export DATABASE_URL
out=${1:-}
case "$out" in
"" | /*) ;;
*) out=$repo/$out ;;
esac
# The commit that removed the harness; its parent still holds it.
removed=$(git rev-list -1 HEAD -- bench/partition.go)
if [ -z "$removed" ] || ! git cat-file -e "$removed^:bench/partition.go" 2>/dev/null; then
	echo "partition-bench: this checkout has no history holding bench/partition.go (a shallow clone?): fetch the full history" >&2
	exit 2
fi
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT INT TERM
git archive "$removed^" | tar -x -C "$src"
echo "partition-bench: the harness of $(git rev-parse --short "$removed^"), in $src" >&2
cd "$src"
run() { # family blocks k
	json=
	if [ -n "$out" ]; then
		mkdir -p "$out"
		json="-json $out/partition-$1.json"
	fi
	# shellcheck disable=SC2086 # $json is empty or two words
	go run ./bench/cmd/partition -chain "$1" -blocks "$2" -partition-blocks "$3" -rounds "${ROUNDS:-2}" $json >"${out:-/dev/stdout}${out:+/partition-$1.md}"
	[ -z "$out" ] || cat "$out/partition-$1.md"
}
run cometbft "${CBFT_BLOCKS:-10000}" "${CBFT_K:-1000}"
echo
run evm "${EVM_BLOCKS:-2000}" "${EVM_K:-200}"
