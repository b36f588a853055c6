#!/usr/bin/env bash
# Records a node-home fixture for chain/cometbft/nodehome: runs a real CometBFT node (built from
# the Go module proxy) with the kvstore app on 127.0.0.1, keeps it busy with key=value
# transactions until it has BLOCKS blocks, records through blockhaul's own RPC source the raw
# record of every height 1..BLOCKS as the node's RPC serves it (records.ndjson.zst, one record a
# line), stops the node, and packs the parts of its home the source reads (config/config.toml,
# config/genesis.json, data/blockstore.db, data/state.db) into home.tar.zst.
#
# Usage: scripts/nodehome-fixture.sh OUT_DIR
#
# Environment:
#   COMETBFT_VERSION   cometbft module version            (default v0.38.26)
#   BLOCKS             heights to record                  (default 2500)
#   BLOCKHAUL_NODES_DIR build cache for node binaries      (default ~/.cache/blockhaul-nodes)
#   COMETBFT_RPC_PORT  26657    COMETBFT_P2P_PORT 26656
#   TIMEOUT_COMMIT     consensus timeout_commit           (default 20ms)
#   UPGRADE_TO         a later cometbft version: after BLOCKS, stop the node, run this version on
#                      the same home for UPGRADE_BLOCKS more (default 300), and record 1..the end
#                      from the upgraded node's RPC (a 0.38 node holding 0.37 results)
#
# Needs go, python3 (standard library), curl, tar with zstd.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
out="${1:?usage: $0 OUT_DIR}"
version="${COMETBFT_VERSION:-v0.38.26}"
blocks="${BLOCKS:-2500}"
nodes_dir="${BLOCKHAUL_NODES_DIR:-$HOME/.cache/blockhaul-nodes}"
rpc_port="${COMETBFT_RPC_PORT:-26657}"
p2p_port="${COMETBFT_P2P_PORT:-26656}"
timeout_commit="${TIMEOUT_COMMIT:-20ms}"
rpc="http://127.0.0.1:$rpc_port"

log() { printf 'nodehome-fixture: %s\n' "$*" >&2; }

mkdir -p "$nodes_dir" "$out"
out="$(cd "$out" && pwd)"
# build VERSION -> prints the binary path; builds once per version.
build() {
	local bin="$nodes_dir/cometbft-$1"
	if [[ ! -x "$bin" ]]; then
		log "building cometbft $1 into $nodes_dir (a few minutes the first time)"
		local gobin
		gobin="$(mktemp -d "$nodes_dir/.build.XXXXXX")"
		GOBIN="$gobin" go install "github.com/cometbft/cometbft/cmd/cometbft@$1" >&2
		mv "$gobin/cometbft" "$bin"
		rmdir "$gobin"
	fi
	printf '%s\n' "$bin"
}
bin="$(build "$version")"
upgrade_to="${UPGRADE_TO:-}"
upgrade_blocks="${UPGRADE_BLOCKS:-300}"
[[ -z "$upgrade_to" ]] || upgraded_bin="$(build "$upgrade_to")"

workdir="$(mktemp -d "${TMPDIR:-/tmp}/blockhaul-nodehome.XXXXXX")"
home="$workdir/home"
node_pid=
stop_node() {
	[[ -n "$node_pid" ]] || return 0
	if kill -0 "$node_pid" 2>/dev/null; then
		kill "$node_pid" 2>/dev/null || true
		for _ in $(seq 1 100); do # up to 10 s to flush its databases
			kill -0 "$node_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$node_pid" 2>/dev/null || true
	fi
	wait "$node_pid" 2>/dev/null || true
	node_pid=
}
cleanup() {
	local rc=$?
	stop_node
	if [[ $rc -ne 0 ]]; then
		log "work dir kept: $workdir"
	else
		rm -rf "$workdir"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if (exec 3<>"/dev/tcp/127.0.0.1/$rpc_port") 2>/dev/null; then
	log "127.0.0.1:$rpc_port is already in use"
	exit 1
fi
"$bin" init --home "$home" >/dev/null 2>&1
sed -i \
	-e "s|^timeout_commit = .*|timeout_commit = \"$timeout_commit\"|" \
	-e "s|^laddr = \"tcp://127.0.0.1:26657\"|laddr = \"tcp://127.0.0.1:$rpc_port\"|" \
	-e "s|^laddr = \"tcp://0.0.0.0:26656\"|laddr = \"tcp://127.0.0.1:$p2p_port\"|" \
	-e 's|^pex = true|pex = false|' \
	-e 's|^prometheus = true|prometheus = false|' \
	-e 's|^indexer = "kv"|indexer = "null"|' \
	"$home/config/config.toml"
grep -q "^laddr = \"tcp://127.0.0.1:$rpc_port\"" "$home/config/config.toml"
grep -q "^laddr = \"tcp://127.0.0.1:$p2p_port\"" "$home/config/config.toml"
grep -q "^timeout_commit = \"$timeout_commit\"" "$home/config/config.toml"

# run_until BINARY HEIGHT: runs the node on the home and keeps it busy until HEIGHT.
run_until() {
	log "$("$1" version): running until height $2"
	"$1" node --proxy_app=persistent_kvstore --home "$home" >>"$workdir/node.log" 2>&1 &
	node_pid=$!
	local deadline=$((SECONDS + 60))
	until curl -sf -o /dev/null "$rpc/status"; do
		((SECONDS < deadline)) || { log "no answer from $rpc/status"; exit 1; }
		sleep 0.2
	done
	python3 "$here/nodes/cometbft_load.py" --rpc "$rpc" --height "$2" >/dev/null
}
run_until "$bin" "$blocks"
if [[ -n "$upgrade_to" ]]; then
	stop_node
	blocks=$((blocks + upgrade_blocks))
	bin="$upgraded_bin"
	run_until "$bin" "$blocks"
fi

log "recording heights 1..$blocks through the RPC source"
(cd "$repo" && NODEHOME_RECORD_RPC="$rpc" NODEHOME_RECORD_TO="$blocks" NODEHOME_RECORD_OUT="$out/records.ndjson.zst" \
	go test -count=1 -run '^TestRecordRPC$' ./chain/cometbft/nodehome/ >&2)

stop_node
log "packing the home"
tar -C "$home" --zstd -cf "$out/home.tar.zst" config/config.toml config/genesis.json data/blockstore.db data/state.db
"$bin" version >"$out/VERSION"
ls -l "$out" >&2
