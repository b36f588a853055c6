#!/usr/bin/env bash
# Measures a rebuild from a chunk archive in local object storage against a re-export from
# staging of the same range (issue 22: at least 0.8x the speed), side by side on one machine:
#
#  1. builds blockhaul from this tree and stages the synthetic CometBFT chain's 1..HEIGHTS;
#  2. starts SeaweedFS (`weed mini` from scripts/seaweedfs.sh) on free 127.0.0.1 ports and
#     publishes that staging into a bucket of it (S3, path-style, plain HTTP);
#  3. times, as whole processes under /usr/bin/time, in turn after WARMUP pairs:
#     A: `run --archive` of the bucket into an empty staging directory and a new database
#        (download, digest, decompress, verify, stage, export);
#     B: `export` of the same range from the staging it was published from into a new database;
#     each database dropped and created before its run, outside the timing;
#  4. prints the medians of each side, A/B wall pair by pair and the speed A/B.
#
# Usage: scripts/archive-bench.sh
#
# Environment:
#   HEIGHTS        heights staged, published and rebuilt (default 5999: 6 chunks of 1,000)
#   PAIRS          counted pairs (default 5)
#   WARMUP         pairs run first and not counted (default 1)
#   PG_URL         the server, any database of it (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
#   BLOCKHAUL_BIN  a blockhaul binary to time instead of one built from this tree
#   KEEP_WORKDIR=1 keep the work directory
#
# Needs go, psql, python3 and GNU time (/usr/bin/time). Everything listens on 127.0.0.1 only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
heights="${HEIGHTS:-5999}"
pairs="${PAIRS:-5}"
warmup="${WARMUP:-1}"
pg_url="${PG_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
export PGOPTIONS="-c client_min_messages=warning" # no NOTICE for a database not there to drop

log() { printf 'archive-bench: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=pairs.sh
source "$here/pairs.sh"
pairs_check go psql python3

weed="$("$here/seaweedfs.sh")"
[[ "$weed" != unavailable:* ]] || die "SeaweedFS: $weed"

workdir="$(mktemp -d "${TMPDIR:-/tmp}/blockhaul-archive-bench.XXXXXX")"
db="blockhaul_archive_bench_$$"
weed_pid=""
cleanup() {
	local rc=$?
	[[ -z "$weed_pid" ]] || { kill "$weed_pid" 2>/dev/null; wait "$weed_pid" 2>/dev/null || true; }
	psql -q "$pg_url" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	if [[ "${KEEP_WORKDIR:-}" == 1 || $rc -ne 0 ]]; then
		log "work dir kept: $workdir"
	else
		rm -rf "$workdir"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -n "${BLOCKHAUL_BIN:-}" ]]; then
	blockhaul="$BLOCKHAUL_BIN"
else
	log "building blockhaul from $repo"
	blockhaul="$workdir/blockhaul"
	(cd "$repo" && go build -o "$blockhaul" ./cmd/blockhaul)
fi

src="$workdir/staging-published"
log "staging the synthetic chain's 1..$heights"
"$blockhaul" fetch --chain cometbft --from 1 --to "$heights" --staging "$src" --progress-interval 0 --log-level warn >/dev/null

# weed mini on free ports; its S3 user's keys in its environment and in blockhaul's.
read -r -a ports < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(8)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
)
export AWS_ACCESS_KEY_ID=blockhaul-bench AWS_SECRET_ACCESS_KEY=blockhaul-bench-secret AWS_REGION=us-east-1
bucket=blockhaul-bench
mkdir -p "$workdir/weed"
S3_BUCKET=$bucket "$weed" -logdir="$workdir/weed" mini -dir="$workdir/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
	-bucket=$bucket -master.port="${ports[0]}" -master.port.grpc="${ports[1]}" \
	-volume.port="${ports[2]}" -volume.port.grpc="${ports[3]}" -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" \
	-s3.port="${ports[6]}" -s3.port.grpc="${ports[7]}" -s3.port.iceberg=0 -s3.port.lance=0 \
	-webdav=false -admin.ui=false -master.telemetry=false >"$workdir/weed.log" 2>&1 &
weed_pid=$!
dest="s3://$bucket/a?endpoint=http://127.0.0.1:${ports[6]}&use_path_style=true&disable_https=true&region=us-east-1"

# The gateway takes a few seconds; publish until it answers, a bounded number of tries.
log "publishing into SeaweedFS (S3 on 127.0.0.1:${ports[6]})"
for try in $(seq 1 60); do
	if out=$("$blockhaul" publish "$dest" --staging "$src" --log-level warn 2>&1); then
		break
	fi
	((try < 60)) || die "publish failed 60 times; last: $out"
	kill -0 "$weed_pid" 2>/dev/null || die "weed mini exited: $(tail -5 "$workdir/weed.log")"
	sleep 1
done
chain_id="$("$blockhaul" status --staging "$src" 2>/dev/null | sed -n 's/.*chain: *cometbft "\([^"]*\)".*/\1/p' | head -1)"
[[ -n "$chain_id" ]] || die "status did not name the staged chain's id"
archive="s3://$bucket/a/$chain_id?endpoint=http://127.0.0.1:${ports[6]}&use_path_style=true&disable_https=true&region=us-east-1"
base="${pg_url%%\?*}"
query="${pg_url#"$base"}"
target="${base%/*}/$db$query"

results="$workdir/results.txt"
: >"$results"
# one SIDE N: one timed run of SIDE (archive|export), the Nth; appends "SIDE N wall user sys
# maxrss_kb" to the results.
one() {
	local side=$1 n=$2 out="$workdir/$1-$2.txt" cmd
	psql -q "$pg_url" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
	case "$side" in
	archive)
		rm -rf "$workdir/staging-rebuilt"
		cmd=("$blockhaul" run --chain cometbft --archive "$archive" --staging "$workdir/staging-rebuilt") ;;
	export) cmd=("$blockhaul" export --chain cometbft --staging "$src") ;;
	esac
	local wall user sys rss
	timed archive-bench "$side" "$n" "$out" "${cmd[@]}" --from 1 --to "$heights" --pg "$target" \
		--progress-interval 0 --log-level warn
	echo "$side $n $wall $user $sys $rss" >>"$results"
}

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 1 - warmup; i <= pairs; i++)); do
	one archive "$i"
	one export "$i"
done
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$results" "$heights" "$load_start" "$load_end" <<'PY'
import statistics as st
import sys

path, heights, load_start, load_end = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
runs = {"archive": {}, "export": {}}
for line in open(path):
    side, n, wall, user, sys_, rss = line.split()
    runs[side][int(n)] = dict(wall=float(wall), cpu=float(user) + float(sys_), rss=int(rss) / 1024)
counted = sorted(n for n in runs["archive"] if n >= 1 and n in runs["export"])
a = [runs["archive"][n] for n in counted]
b = [runs["export"][n] for n in counted]
med = lambda xs, k: st.median(x[k] for x in xs)
ratios = [x["wall"] / y["wall"] for x, y in zip(a, b)]
print()
print("heights 1..%d, %d counted pairs (after the warm-up), load %s at the start, %s at the end"
      % (heights, len(counted), load_start, load_end))
print("%-28s %10s %10s %10s" % ("", "wall", "CPU", "peak"))
print("%-28s %8.2f s %8.2f s %6.0f MiB" % ("A: run --archive (SeaweedFS)", med(a, "wall"), med(a, "cpu"), med(a, "rss")))
print("%-28s %8.2f s %8.2f s %6.0f MiB" % ("B: export from staging", med(b, "wall"), med(b, "cpu"), med(b, "rss")))
print("A/B wall pair by pair: median %.3f (min %.3f, max %.3f): the rebuild at %.2fx the speed of the re-export"
      % (st.median(ratios), min(ratios), max(ratios), 1 / st.median(ratios)))
print("  pairs: " + " ".join("%.3f" % r for r in ratios))
PY
echo "machine: $(nproc) CPUs, $(uname -srm), $(date -u '+%Y-%m-%d %H:%M UTC'); blockhaul ${BLOCKHAUL_BIN:-built from $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')}"
