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
# shellcheck source=nodes/cometbft.sh
source "$here/nodes/cometbft.sh"
bin="$(cometbft_build "$version")"
upgrade_to="${UPGRADE_TO:-}"
upgrade_blocks="${UPGRADE_BLOCKS:-300}"
[[ -z "$upgrade_to" ]] || upgraded_bin="$(cometbft_build "$upgrade_to")"

workdir="$(mktemp -d "${TMPDIR:-/tmp}/blockhaul-nodehome.XXXXXX")"
home="$workdir/home"
node_log="$workdir/node.log"
cleanup() {
	local rc=$?
	cometbft_stop
	if [[ $rc -ne 0 ]]; then
		log "work dir kept: $workdir"
	else
		rm -rf "$workdir"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cometbft_init "$bin" "$home"

# run_until BINARY HEIGHT: runs the node on the home and keeps it busy until HEIGHT.
run_until() {
	log "$("$1" version): running until height $2"
	cometbft_start "$1" "$home"
	python3 "$here/nodes/cometbft_load.py" --rpc "$rpc" --height "$2" >/dev/null
}
run_until "$bin" "$blocks"
if [[ -n "$upgrade_to" ]]; then
	cometbft_stop
	blocks=$((blocks + upgrade_blocks))
	bin="$upgraded_bin"
	run_until "$bin" "$blocks"
fi

log "recording heights 1..$blocks through the RPC source"
(cd "$repo" && NODEHOME_RECORD_RPC="$rpc" NODEHOME_RECORD_TO="$blocks" NODEHOME_RECORD_OUT="$out/records.ndjson.zst" \
	go test -count=1 -run '^TestRecordRPC$' ./chain/cometbft/nodehome/ >&2)

cometbft_stop
log "packing the home"
tar -C "$home" --zstd -cf "$out/home.tar.zst" config/config.toml config/genesis.json data/blockstore.db data/state.db
"$bin" version >"$out/VERSION"
ls -l "$out" >&2
