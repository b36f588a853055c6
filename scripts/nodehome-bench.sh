#!/usr/bin/env bash
# Measures `blockhaul fetch --node-home` against `blockhaul fetch --rpc` to the same node, side by
# side on one machine (issue 22: at least 5x the blocks per second), and prints what
# docs/sources.md records: blocks/s, the CPU of each side (the node's too), peak memory, the ratio
# of wall times pair by pair, and the projection for a 28.8M-block chain.
#
#  1. builds cometbft from the Go module proxy (cached, as scripts/test-nodes.sh does);
#  2. makes a node home of HEIGHTS heights once: the node with its persistent_kvstore app on
#     127.0.0.1 ports of its own, short timeout_commit, kept busy with key=value transactions
#     (scripts/nodes/cometbft_load.py), then stopped; the home is cached, so a second run starts
#     at the timing;
#  3. copies the cached home twice: one copy is read by --node-home, the other is started again,
#     idle (create_empty_blocks = false), to serve the RPC;
#  4. builds blockhaul from this tree and times `fetch --from 1 --to HEIGHTS` of each source into
#     an empty staging directory (removed before each run), as whole processes under
#     /usr/bin/time, in turn (--node-home, --rpc, --node-home, ...), WARMUP pairs first, then PAIRS
#     counted pairs.
#
# Usage: scripts/nodehome-bench.sh
#
# Environment:
#   HEIGHTS            heights fetched (and made in the home)      (default 12000)
#   PAIRS              counted pairs                               (default 7)
#   WARMUP             pairs run first and not counted             (default 1)
#   FETCH_FLAGS        extra flags for both fetches (e.g. "--fetch-workers 16 --fetch-span 32")
#   COMETBFT_VERSION   cometbft module version                     (default v0.38.26)
#   BLOCKHAUL_NODES_DIR node binaries and generated homes          (default ~/.cache/blockhaul-nodes)
#   BENCH_RPC_PORT     26757    BENCH_P2P_PORT 26756 (ports of its own, not the tests' 26657)
#   TIMEOUT_COMMIT     consensus timeout_commit while the home is made (default 20ms)
#   BLOCKHAUL_BIN      a blockhaul binary to time instead of one built from this tree
#   KEEP_WORKDIR=1     keep the work directory (copies, stagings, each run's output)
#
# Needs go, python3 (standard library), curl and GNU time (/usr/bin/time). Everything listens on
# 127.0.0.1 only. Disk: the cached home and two copies of it (about 0.2 GB at 12,000 heights),
# and one staging store at a time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
version="${COMETBFT_VERSION:-v0.38.26}"
heights="${HEIGHTS:-12000}"
pairs="${PAIRS:-7}"
warmup="${WARMUP:-1}"
nodes_dir="${BLOCKHAUL_NODES_DIR:-$HOME/.cache/blockhaul-nodes}"
rpc_port="${BENCH_RPC_PORT:-26757}"
p2p_port="${BENCH_P2P_PORT:-26756}"
timeout_commit="${TIMEOUT_COMMIT:-20ms}"
rpc="http://127.0.0.1:$rpc_port"

log() { printf 'nodehome-bench: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=pairs.sh
source "$here/pairs.sh"
pairs_check go python3 curl

mkdir -p "$nodes_dir"
workdir="$(mktemp -d "${TMPDIR:-/tmp}/blockhaul-nodehome-bench.XXXXXX")"
node_log="$workdir/node.log"
# shellcheck source=nodes/cometbft.sh
source "$here/nodes/cometbft.sh"

cleanup() {
	local rc=$?
	cometbft_stop
	if [[ "${KEEP_WORKDIR:-}" == 1 || $rc -ne 0 ]]; then
		log "work dir kept: $workdir"
	else
		rm -rf "$workdir"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

node_height() {
	curl -sf "$rpc/status" | python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["sync_info"]["latest_block_height"])'
}

bin="$(cometbft_build "$version")"

# The generated home, made once for this version and length. A node keeps making blocks while
# the load stops, so it is run a few heights past HEIGHTS: every height fetched has its results.
cached="$nodes_dir/bench-home-$version-$heights"
if [[ ! -f "$cached/READY" ]]; then
	rm -rf "$cached" "$cached.tmp"
	home="$cached.tmp"
	cometbft_init "$bin" "$home"
	log "making a home of $heights heights with $("$bin" version) (timeout_commit $timeout_commit): $home"
	t0=$SECONDS
	cometbft_start "$bin" "$home"
	python3 "$here/nodes/cometbft_load.py" --rpc "$rpc" --height $((heights + 2)) >/dev/null
	cometbft_stop
	echo "$heights" >"$home/READY"
	mv "$home" "$cached"
	log "home made in $((SECONDS - t0)) s"
fi

# One copy for --node-home, one for the node that serves the RPC, idle: no empty blocks.
copy="$workdir/home-copy"
served="$workdir/home-served"
cp -a "$cached" "$copy"
cp -a "$cached" "$served"
sed -i -e 's|^create_empty_blocks = .*|create_empty_blocks = false|' "$served/config/config.toml"
grep -q '^create_empty_blocks = false' "$served/config/config.toml"
log "starting the node idle on $rpc"
cometbft_start "$bin" "$served"
tip="$(node_height)"
((tip >= heights)) || die "the node's tip is $tip, below HEIGHTS $heights"

if [[ -n "${BLOCKHAUL_BIN:-}" ]]; then
	blockhaul="$BLOCKHAUL_BIN"
else
	log "building blockhaul from $repo"
	blockhaul="$workdir/blockhaul"
	(cd "$repo" && go build -o "$blockhaul" ./cmd/blockhaul)
fi

# node_cpu: the node's user+system CPU so far, in clock ticks (fields 14 and 15 of
# /proc/PID/stat; the name in field 2 holds no spaces here).
node_cpu() { awk '{print $14 + $15}' "/proc/$node_pid/stat"; }
ticks="$(getconf CLK_TCK)"

results="$workdir/results.txt"
: >"$results"
# one SIDE N: one fetch of SIDE (home|rpc), the Nth; appends "SIDE N wall user sys maxrss_kb
# node_ticks" to the results.
one() {
	local side=$1 n=$2 source staging="$workdir/staging" out="$workdir/$1-$2.txt"
	case "$side" in
	home) source=(--node-home "$copy") ;;
	rpc) source=(--rpc "$rpc") ;;
	esac
	rm -rf "$staging"
	local before after wall user sys rss
	before="$(node_cpu)"
	# shellcheck disable=SC2086 # FETCH_FLAGS is a list of flags
	timed nodehome-bench "$side" "$n" "$out" "$blockhaul" fetch --chain cometbft "${source[@]}" --from 1 --to "$heights" \
		--staging "$staging" --progress-interval 0 --log-level warn ${FETCH_FLAGS:-}
	after="$(node_cpu)"
	echo "$side $n $wall $user $sys $rss $((after - before))" >>"$results"
}

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 1 - warmup; i <= pairs; i++)); do
	one home "$i"
	one rpc "$i"
done
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
staged="$(grep -E 'blocks staged|raw ->' "$workdir/home-$pairs.txt" | sed 's/^ *//' | paste -sd ';' || true)"

python3 - "$results" "$heights" "$ticks" "$load_start" "$load_end" <<'PY'
import statistics as st
import sys

path, heights, ticks, load_start, load_end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
runs = {"home": {}, "rpc": {}}
for line in open(path):
    side, n, wall, user, sys_, rss, node = line.split()
    runs[side][int(n)] = dict(wall=float(wall), cpu=float(user) + float(sys_), rss=int(rss) / 1024,
                              node=int(node) / ticks)
counted = sorted(n for n in runs["home"] if n >= 1 and n in runs["rpc"])
home = [runs["home"][n] for n in counted]
rpc = [runs["rpc"][n] for n in counted]

def med(xs, k):
    return st.median(x[k] for x in xs)

# The node idles while --node-home runs: what it spends then is its idle rate, taken off what it
# spends during each --rpc run.
idle_rate = sum(x["node"] for x in home) / sum(x["wall"] for x in home)
node_rpc = [x["node"] - idle_rate * x["wall"] for x in rpc]
ratios = [h["wall"] / r["wall"] for h, r in zip(home, rpc)]
cpu_ratios = [h["cpu"] / (r["cpu"] + n) for h, r, n in zip(home, rpc, node_rpc)]
hw, rw = med(home, "wall"), med(rpc, "wall")
print()
print("heights 1..%d, %d counted pairs (after the warm-up), load %s at the start, %s at the end"
      % (heights, len(counted), load_start, load_end))
print("%-12s %10s %12s %16s %16s %10s" % ("", "wall", "blocks/s", "blockhaul CPU", "node CPU", "peak"))
print("%-12s %8.2f s %12.0f %14.2f s %16s %6.0f MiB" % ("--node-home", hw, heights / hw, med(home, "cpu"), "-", med(home, "rss")))
print("%-12s %8.2f s %12.0f %14.2f s %14.2f s %6.0f MiB" % ("--rpc", rw, heights / rw, med(rpc, "cpu"), st.median(node_rpc), med(rpc, "rss")))
print("the node idle: %.3f s of CPU a second" % idle_rate)
print("wall ratio --node-home/--rpc pair by pair: median %.3f (min %.3f, max %.3f): %.1fx the blocks per second"
      % (st.median(ratios), min(ratios), max(ratios), 1 / st.median(ratios)))
print("  pairs: " + " ".join("%.3f" % r for r in ratios))
print("CPU ratio --node-home/(--rpc + the node's) pair by pair: median %.3f (min %.3f, max %.3f)"
      % (st.median(cpu_ratios), min(cpu_ratios), max(cpu_ratios)))
print("projection for 28,800,000 blocks at the median rates: --node-home %.1f h, --rpc %.1f h"
      % (28_800_000 / (heights / hw) / 3600, 28_800_000 / (heights / rw) / 3600))
PY
echo "machine: $(nproc) CPUs, $(uname -srm), $(date -u '+%Y-%m-%d %H:%M UTC'); blockhaul ${BLOCKHAUL_BIN:-built from $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')}; cometbft $("$bin" version 2>/dev/null | head -1); FETCH_FLAGS='${FETCH_FLAGS:-}'"
echo "the last --node-home run said: ${staged:-(nothing on staged bytes)}"
