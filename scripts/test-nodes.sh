#!/usr/bin/env bash
# Integration check against real chain nodes: builds CometBFT and geth from the Go module proxy
# (cached), runs each on 127.0.0.1 with a throwaway home, drives a small varied chain into it and
# writes the node's own per-height expectations (hash, parent hash, tx and event/log counts) to a
# JSON file. load_and_check is where blockhaul is run against the node and compared.
#
# Usage: scripts/test-nodes.sh [cometbft|evm|all]     (default: all)
#
# Environment:
#   BLOCKHAUL_NODES_DIR   build cache for node binaries   (default ~/.cache/blockhaul-nodes)
#   COMETBFT_VERSION      cometbft module version          (default v0.38.26)
#   GETH_VERSION          go-ethereum module version       (default v1.17.10)
#   COMETBFT_RPC_PORT     26657    COMETBFT_P2P_PORT  26656
#   GETH_HTTP_PORT        8545
#   COMETBFT_BLOCKS       40       EVM_BLOCKS         30
#   KEEP_WORKDIR=1        also keep the node homes (the expectations and logs are always kept)
#   DATABASE_URL          PostgreSQL server for the check (default: scripts/pg-ensure.sh)
#   MEASURE_BLOCKS=N      after the check, time a fetch of N heights from the node
#   MEASURE_FLAGS         extra flags for that fetch (e.g. "--fetch-workers 16 --fetch-span 32")
#
# Needs go, python3 (standard library only), curl and psql. Everything listens on 127.0.0.1 only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
helpers="$here/nodes"

nodes_dir="${BLOCKHAUL_NODES_DIR:-$HOME/.cache/blockhaul-nodes}"
cometbft_version="${COMETBFT_VERSION:-v0.38.26}"
geth_version="${GETH_VERSION:-v1.17.10}"
comet_rpc_port="${COMETBFT_RPC_PORT:-26657}"
comet_p2p_port="${COMETBFT_P2P_PORT:-26656}"
geth_http_port="${GETH_HTTP_PORT:-8545}"
comet_blocks="${COMETBFT_BLOCKS:-40}"
evm_blocks="${EVM_BLOCKS:-30}"
which_nodes="${1:-all}"

case "$which_nodes" in
cometbft | evm | all) ;;
*)
	echo "usage: $0 [cometbft|evm|all]" >&2
	exit 2
	;;
esac

workdir="$(mktemp -d "${TMPDIR:-/tmp}/blockhaul-nodes.XXXXXX")"
node_pids=()

log() { printf 'test-nodes: %s\n' "$*" >&2; }

cleanup() {
	local rc=$?
	local pid
	for pid in "${node_pids[@]}"; do
		stop_process "$pid"
	done
	if [[ "${KEEP_WORKDIR:-}" == 1 || $rc -ne 0 ]]; then
		log "work dir kept with node homes: $workdir"
	else
		rm -rf "$workdir/cometbft" "$workdir/geth"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=nodes/cometbft.sh
source "$helpers/cometbft.sh" # build_node

# wait_http URL BODY SECONDS: poll until the node answers (bounded).
wait_http() {
	local url=$1 body=$2 secs=$3
	local deadline=$((SECONDS + secs))
	until curl -sf -o /dev/null -H 'Content-Type: application/json' ${body:+-d "$body"} "$url"; do
		if ((SECONDS >= deadline)); then
			log "no answer from $url after ${secs}s"
			return 1
		fi
		sleep 0.2
	done
}

# port_free PORT: refuse to start when something already listens there, or the readiness poll
# below would talk to that other process.
port_free() {
	if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
		log "127.0.0.1:$1 is already in use"
		return 1
	fi
}

start_cometbft() {
	local bin=$1 home="$workdir/cometbft"
	port_free "$comet_rpc_port"
	port_free "$comet_p2p_port"
	"$bin" init --home "$home" >/dev/null 2>&1
	# Fast blocks, loopback only, no peer exchange.
	sed -i \
		-e 's|^timeout_commit = .*|timeout_commit = "200ms"|' \
		-e "s|^laddr = \"tcp://127.0.0.1:26657\"|laddr = \"tcp://127.0.0.1:$comet_rpc_port\"|" \
		-e "s|^laddr = \"tcp://0.0.0.0:26656\"|laddr = \"tcp://127.0.0.1:$comet_p2p_port\"|" \
		-e 's|^pex = true|pex = false|' \
		-e 's|^prometheus = true|prometheus = false|' \
		-e 's|^prometheus_listen_addr = .*|prometheus_listen_addr = "127.0.0.1:26660"|' \
		"$home/config/config.toml"
	grep -q "^laddr = \"tcp://127.0.0.1:$comet_rpc_port\"" "$home/config/config.toml"
	grep -q "^laddr = \"tcp://127.0.0.1:$comet_p2p_port\"" "$home/config/config.toml"
	"$bin" node --proxy_app=persistent_kvstore --home "$home" >"$workdir/cometbft.log" 2>&1 &
	node_pids+=($!)
	wait_http "http://127.0.0.1:$comet_rpc_port/status" "" 60
}

start_geth() {
	local bin=$1
	port_free "$geth_http_port"
	"$bin" --dev --dev.period 1 --datadir "$workdir/geth" \
		--http --http.addr 127.0.0.1 --http.port "$geth_http_port" --http.api eth,net,web3,debug \
		--authrpc.addr 127.0.0.1 --port 0 --nodiscover --maxpeers 0 --ipcdisable \
		>"$workdir/geth.log" 2>&1 &
	node_pids+=($!)
	wait_http "http://127.0.0.1:$geth_http_port" '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' 60
}

# ---------------------------------------------------------------------------------------------
# load_and_check FAMILY RPC_URL FROM TO EXPECTED_JSON
#
# Runs `bin/blockhaul run` against the live node into a fresh PostgreSQL database and compares,
# per height of FROM..TO, the loaded block hash, parent hash, transaction count and event
# (CometBFT) / log (EVM) count with EXPECTED_JSON, the node's own answers (layout: {"from","to",
# "heights":[{"height","hash","parent_hash","num_txs","tx_events","finalize_block_events",...} |
# {... "num_logs" ...}]}). Any difference, or a failed run, fails the script.
# ---------------------------------------------------------------------------------------------
load_and_check() {
	local family=$1 rpc=$2 from=$3 to=$4 expected=$5
	local base db url query
	base="${DATABASE_URL:-$("$here/pg-ensure.sh")}"
	db="blockhaul_nodes_${family}_$$"
	url="$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$base" "$db")"
	PGOPTIONS="-c client_min_messages=warning" psql -qX -v ON_ERROR_STOP=1 "$base" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"

	log "$family: blockhaul run --rpc $rpc --from $from --to $to into database $db"
	"$repo/bin/blockhaul" run --chain "$family" --rpc "$rpc" --from "$from" --to "$to" \
		--pg "$url" --staging "$workdir/staging-$family" --progress-interval 0 --log-level warn \
		| tee "$workdir/$family-run.txt" >&2

	case "$family" in
	cometbft)
		query="SELECT b.height, encode(b.hash, 'hex'), coalesce(encode(b.parent_hash, 'hex'), ''), b.num_txs,
			(SELECT count(*) FROM cometbft.transactions t WHERE t.height = b.height),
			(SELECT count(*) FROM cometbft.events e WHERE e.height = b.height)
			FROM cometbft.blocks b ORDER BY b.height" ;;
	evm)
		query="SELECT b.number, encode(b.hash, 'hex'), encode(b.parent_hash, 'hex'), b.transaction_count,
			(SELECT count(*) FROM evm.transactions t WHERE t.block_number = b.number),
			(SELECT count(*) FROM evm.logs l WHERE l.block_number = b.number)
			FROM evm.blocks b ORDER BY b.number" ;;
	esac
	psql -qAtX -F ' ' -v ON_ERROR_STOP=1 "$url" -c "$query" >"$workdir/$family-loaded.txt"

	python3 - "$family" "$from" "$to" "$expected" "$workdir/$family-loaded.txt" <<'PY'
import json, sys

family, frm, to, expected_path, loaded_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
expected = {h["height"]: h for h in json.load(open(expected_path))["heights"]}
loaded = {}
for line in open(loaded_path):
    height, hash_, parent, num_txs, txs, events = line.split(" ")
    loaded[int(height)] = (hash_, parent, int(num_txs), int(txs), int(events))

def norm(h):
    return h.lower().removeprefix("0x")

problems = []
for h in range(frm, to + 1):
    e, got = expected.get(h), loaded.get(h)
    if e is None or got is None:
        problems.append("height %d: %s" % (h, "not in the node's expectations" if e is None else "not loaded"))
        continue
    hash_, parent, num_txs, txs, events = got
    want_events = e["tx_events"] + e["finalize_block_events"] if family == "cometbft" else e["num_logs"]
    for what, g, w in (("hash", hash_, norm(e["hash"])), ("parent hash", parent, norm(e["parent_hash"])),
                       ("blocks tx count", num_txs, e["num_txs"]), ("transaction rows", txs, e["num_txs"]),
                       ("event rows" if family == "cometbft" else "log rows", events, want_events)):
        if g != w:
            problems.append("height %d: %s %s, node says %s" % (h, what, g, w))
extra = sorted(set(loaded) - set(range(frm, to + 1)))
if extra:
    problems.append("heights loaded outside %d..%d: %s" % (frm, to, extra[:10]))
for p in problems[:20]:
    print("test-nodes: %s: %s" % (family, p), file=sys.stderr)
if problems:
    sys.exit("test-nodes: %s: %d differences between the database and the node" % (family, len(problems)))
print("test-nodes: %s: heights %d..%d match the node (hash, parent hash, txs, %s)"
      % (family, frm, to, "events" if family == "cometbft" else "logs"), file=sys.stderr)
PY
	psql -qX "$base" -c "DROP DATABASE $db"
	rm -rf "$workdir/staging-$family"
	if [[ -n "${MEASURE_BLOCKS:-}" ]]; then
		measure_fetch "$family" "$rpc" "$from" "$MEASURE_BLOCKS"
	fi
}

# node_tip FAMILY RPC_URL: the node's latest height.
node_tip() {
	case "$1" in
	cometbft) curl -sf "$2/status" | python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["sync_info"]["latest_block_height"])' ;;
	evm) curl -sf -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' "$2" |
		python3 -c 'import json, sys; print(int(json.load(sys.stdin)["result"], 16))' ;;
	esac
}

# measure_fetch FAMILY RPC_URL FROM N: once the node has FROM+N-1, time `blockhaul fetch` of those
# N heights into an empty staging directory (set MEASURE_BLOCKS=N to run it).
measure_fetch() {
	local family=$1 rpc=$2 from=$3 n=$4
	local to=$((from + n - 1)) deadline=$((SECONDS + 2 * n + 120))
	log "$family: waiting for height $to to measure fetch throughput"
	until (($(node_tip "$family" "$rpc") >= to)); do
		if ((SECONDS >= deadline)); then
			log "$family: node did not reach height $to in time"
			return 1
		fi
		sleep 1
	done
	"$repo/bin/blockhaul" fetch --chain "$family" --rpc "$rpc" --from "$from" --to "$to" \
		--staging "$workdir/measure-$family" --progress-interval 0 --log-level warn \
		${MEASURE_FLAGS:-} | tee "$workdir/$family-measure.txt" >&2
	rm -rf "$workdir/measure-$family"
}

run_cometbft() {
	local bin
	bin="$(build_node cometbft github.com/cometbft/cometbft/cmd/cometbft "$cometbft_version")"
	log "starting cometbft $cometbft_version (persistent_kvstore) on 127.0.0.1:$comet_rpc_port"
	start_cometbft "$bin"
	local rpc="http://127.0.0.1:$comet_rpc_port"
	python3 "$helpers/cometbft_gen.py" --rpc "$rpc" --blocks "$comet_blocks" >/dev/null
	local expected="$workdir/cometbft-expected.json"
	python3 "$helpers/cometbft_fixtures.py" expected --rpc "$rpc" --to "$comet_blocks" --out "$expected"
	log "cometbft: chain 1..$comet_blocks generated; expectations: $expected"
	load_and_check cometbft "$rpc" 1 "$comet_blocks" "$expected"
}

run_evm() {
	local bin
	bin="$(build_node geth github.com/ethereum/go-ethereum/cmd/geth "$geth_version")"
	log "starting geth $geth_version --dev on 127.0.0.1:$geth_http_port"
	start_geth "$bin"
	local rpc="http://127.0.0.1:$geth_http_port"
	python3 "$helpers/evm_gen.py" --rpc "$rpc" --blocks "$evm_blocks" >/dev/null
	local expected="$workdir/evm-expected.json"
	python3 "$helpers/evm_fixtures.py" expected --rpc "$rpc" --to "$evm_blocks" --out "$expected"
	log "evm: chain 0..$evm_blocks generated; expectations: $expected"
	load_and_check evm "$rpc" 0 "$evm_blocks" "$expected"
}

mkdir -p "$nodes_dir"
cd "$repo"
command -v go >/dev/null || { log "go not found"; exit 1; }
command -v python3 >/dev/null || { log "python3 not found"; exit 1; }
command -v curl >/dev/null || { log "curl not found"; exit 1; }
command -v psql >/dev/null || { log "psql not found"; exit 1; }
if [[ ! -x "$repo/bin/blockhaul" ]]; then
	log "building bin/blockhaul"
	go build -o "$repo/bin/blockhaul" ./cmd/blockhaul
fi

# Build both first (in parallel) so a node isn't left idling while the other compiles.
if [[ "$which_nodes" == all ]]; then
	build_node cometbft github.com/cometbft/cometbft/cmd/cometbft "$cometbft_version" >/dev/null &
	comet_build=$!
	build_node geth github.com/ethereum/go-ethereum/cmd/geth "$geth_version" >/dev/null
	wait "$comet_build"
fi

if [[ "$which_nodes" == cometbft || "$which_nodes" == all ]]; then
	run_cometbft
fi
if [[ "$which_nodes" == evm || "$which_nodes" == all ]]; then
	run_evm
fi

log "done; expectations and node logs in $workdir"
echo "$workdir"
