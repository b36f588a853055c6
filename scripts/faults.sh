#!/usr/bin/env bash
# The fault campaign: the faults/ suite with its long variants (-tags faults),
# then each fuzz target for $FUZZTIME. Prints every scenario's "faults:" line
# and a verdict per fuzz target; exits non-zero when anything failed. A crasher
# a fuzz target finds is kept by go test under that package's
# testdata/fuzz/FuzzXxx/. With FUZZ_KEEP=N, up to N of the inputs each target
# found interesting are copied from go's fuzz cache into that directory too,
# to be committed as seed corpus. Usage: scripts/faults.sh DATABASE_URL
#
# FUZZMINIMIZE bounds the minimisation of each new interesting input (go
# test's -fuzzminimizetime; default 200 runs). Go's default, 60 s, is spent
# on the first input of a target whose seeds are whole block records: with
# it, CometBFT's FuzzDecode ran 13 inputs in 30 s and nothing after them
# (the worker minimising); with 200 runs, 141,007 inputs and 192 new
# interesting ones.
set -uo pipefail
export DATABASE_URL="$1"
GO="${GO:-go}"
FUZZTIME="${FUZZTIME:-1m}"
FUZZMINIMIZE="${FUZZMINIMIZE:-200x}"
RUN="${FAULTS_RUN:-.}"
log="${FAULTS_LOG:-${TMPDIR:-/tmp}/blockhaul-faults.log}"
targets=(
	./chain/cometbft:FuzzDecode
	./chain/cometbft:FuzzBlockAnswer
	./chain/cometbft:FuzzSDKTx
	./chain/evm:FuzzDecode
	./chain/evm:FuzzBlockIdentity
	./chain/evm:FuzzBlockAnswer
	./chain/evm:FuzzTrieRoot
	./chain/evm:FuzzDecodeHex
	./chain/jsonrpc:FuzzSplit
	./chain/jsonrpc:FuzzParseBatch
	./staging:FuzzRecordCodec
)
failed=()
start=$(date +%s)
echo "faults: campaign (full log in $log)"
"$GO" test -count=1 -tags faults -timeout 40m -v -run "$RUN" ./faults/ >"$log" 2>&1
rc=$?
grep -E '^(faults:|--- FAIL|FAIL|ok )' "$log"
((rc == 0)) || failed+=("campaign")
if [[ "$FUZZTIME" != 0 ]]; then
	for t in "${targets[@]}"; do
		pkg=${t%%:*} fn=${t##*:}
		t0=$(date +%s)
		if out=$("$GO" test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZE" "$pkg" 2>&1); then
			execs=$(grep -oE 'execs: [0-9]+' <<<"$out" | tail -1)
			echo "faults: fuzz $pkg $fn $FUZZTIME: ok (${execs:-execs: ?}, $(($(date +%s) - t0))s with the build)"
			if [[ -n "${FUZZ_KEEP:-}" ]]; then
				cache="$("$GO" env GOCACHE)/fuzz/github.com/blockhaul/blockhaul/${pkg#./}/$fn"
				mkdir -p "$pkg/testdata/fuzz/$fn"
				ls -t "$cache" 2>/dev/null | head -n "$FUZZ_KEEP" | while read -r f; do cp "$cache/$f" "$pkg/testdata/fuzz/$fn/"; done
			fi
		else
			echo "faults: fuzz $pkg $fn: FAILED; the crasher is kept under $pkg/testdata/fuzz/$fn/"
			tail -30 <<<"$out"
			failed+=("$fn")
		fi
	done
fi
echo "faults: done in $(($(date +%s) - start))s; failed: ${failed[*]:-none}"
((${#failed[@]} == 0))
