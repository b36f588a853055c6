# Shell functions for the scripts that build and run local nodes (scripts/test-nodes.sh,
# scripts/nodehome-fixture.sh, scripts/nodehome-bench.sh). Source it; it runs nothing.
#
# The sourcing script sets nodes_dir (the build cache) and a log function; to run a CometBFT
# node on a home of its own also rpc_port, p2p_port, timeout_commit, rpc
# (http://127.0.0.1:$rpc_port) and node_log (the node's output).

# build_node NAME MODULE_PATH VERSION -> prints the binary path; go-installs it once per version
# into nodes_dir (also used by scripts/test-nodes.sh for cometbft and geth).
build_node() {
	local name=$1 pkg=$2 version=$3
	local bin="$nodes_dir/$name-$version"
	if [[ ! -x "$bin" ]]; then
		log "building $name $version into $nodes_dir (a few minutes the first time)"
		local gobin
		gobin="$(mktemp -d "$nodes_dir/.build.XXXXXX")"
		GOBIN="$gobin" go install "$pkg@$version" >&2
		mv "$gobin/$name" "$bin"
		rmdir "$gobin"
	fi
	printf '%s\n' "$bin"
}

# cometbft_build VERSION -> prints the path of cometbft VERSION, built from the Go module proxy.
cometbft_build() { build_node cometbft github.com/cometbft/cometbft/cmd/cometbft "$1"; }

# cometbft_init BINARY HOME: a new home listening on 127.0.0.1 only, fast blocks, no peer
# exchange, no metrics, no tx indexer.
cometbft_init() {
	local bin=$1 home=$2
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
}

# cometbft_start BINARY HOME: runs the node (persistent_kvstore) on HOME, sets node_pid, and
# waits (bounded) for its RPC.
node_pid=
cometbft_start() {
	local port
	for port in "$rpc_port" "$p2p_port"; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			log "127.0.0.1:$port is already in use"
			return 1
		fi
	done
	"$1" node --proxy_app=persistent_kvstore --home "$2" >>"$node_log" 2>&1 &
	node_pid=$!
	local deadline=$((SECONDS + 120))
	until curl -sf -o /dev/null "$rpc/status"; do
		if ! kill -0 "$node_pid" 2>/dev/null; then
			log "the node exited; see $node_log"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			log "no answer from $rpc/status; see $node_log"
			return 1
		fi
		sleep 0.2
	done
}

# stop_process PID: stops a node, giving it up to 10 s to flush its databases, then forcing it.
stop_process() {
	if kill -0 "$1" 2>/dev/null; then
		kill "$1" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "$1" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$1" 2>/dev/null || true
	fi
}

# cometbft_stop: stops the node cometbft_start started and reaps it.
cometbft_stop() {
	[[ -n "$node_pid" ]] || return 0
	stop_process "$node_pid"
	wait "$node_pid" 2>/dev/null || true
	node_pid=
}
