#!/usr/bin/env bash
# Prints the path of a SeaweedFS `weed` binary for the tests' real S3 server
# (archive.TestSnapshotThroughSeaweedFS), building it from the Go module
# proxy the first time into the user's cache (a few minutes on a small
# machine; then instant). SeaweedFS's go.mod has replace directives, so
# `go install` refuses it: the module's source is copied out of the module
# cache and built as a main module.
#
# When it cannot be built (no module proxy, a build error), it prints
# "unavailable: REASON" instead and exits 0: the test then skips (under CI=true: fails), naming the
# reason; every other snapshot test (fileblob, the gofakes3 S3 server) still
# runs. GO selects the go command.
set -euo pipefail
ver=v0.0.0-20261109003541-7506e5f91cd6
go=${GO:-go}
cache=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/blockhaul
bin=$cache/weed-$ver
log() { echo "seaweedfs: $*" >&2; }
unavailable() { log "$1; the SeaweedFS test will skip (fail under CI=true)"; echo "unavailable: $1"; exit 0; }

if [[ -n "${BLOCKHAUL_TEST_WEED:-}" ]]; then echo "$BLOCKHAUL_TEST_WEED"; exit 0; fi
if [[ -x "$bin" ]]; then echo "$bin"; exit 0; fi
mkdir -p "$cache" || unavailable "cannot create $cache"
log "building weed $ver into $cache (once; a few minutes)"
start=$(date +%s)
json=$("$go" mod download -json "github.com/seaweedfs/seaweedfs@$ver" 2>&1) ||
	unavailable "go mod download of seaweedfs@$ver failed: $(echo "$json" | grep -m1 -E '"Error"|^go:' || echo "$json" | head -1)"
src=$(echo "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[[ -d "$src" ]] || unavailable "go mod download gave no source directory"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
if ! out=$(cd "$work" && "$go" build -o "$bin.tmp.$$" ./weed 2>&1); then
	rm -f "$bin.tmp.$$"
	unavailable "go build of weed failed: $(echo "$out" | tail -3 | tr '\n' ' ')"
fi
mv "$bin.tmp.$$" "$bin"
log "built in $(($(date +%s) - start)) s"
echo "$bin"
