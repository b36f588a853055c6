#!/usr/bin/env bash
# Prints the path of Azurite's `azurite-blob`, Microsoft's Azure Blob Storage
# emulator, for the tests' Azure server (archive.TestSnapshotThroughAzurite),
# installing it from the npm registry the first time into the user's cache
# (about 20 s and 360 MB here; then instant). It needs node and npm.
#
# When it cannot be installed (no npm, no registry), it prints
# "unavailable: REASON" instead and exits 0: the test then skips (under CI=true: fails), naming the
# reason; every other snapshot test still runs.
set -euo pipefail
ver=3.37.0
cache=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/blockhaul
dir=$cache/azurite-$ver
bin=$dir/node_modules/.bin/azurite-blob
log() { echo "azurite: $*" >&2; }
unavailable() { log "$1; the Azurite test will skip (fail under CI=true)"; echo "unavailable: $1"; exit 0; }

if [[ -n "${BLOCKHAUL_TEST_AZURITE:-}" ]]; then echo "$BLOCKHAUL_TEST_AZURITE"; exit 0; fi
if [[ -x "$bin" && -f "$dir/.complete" ]]; then echo "$bin"; exit 0; fi
command -v npm >/dev/null || unavailable "no npm on PATH"
command -v node >/dev/null || unavailable "no node on PATH"
mkdir -p "$cache" || unavailable "cannot create $cache"
log "installing azurite $ver into $dir (once; about half a minute)"
start=$(date +%s)
# A directory of this process's own: two test runs installing at once must
# not remove each other's half-installed tree.
tmp=$dir.tmp.$$
trap 'rm -rf "$tmp"' EXIT
if ! out=$(npm install --no-audit --no-fund --no-save --prefix "$tmp" "azurite@$ver" 2>&1); then
	unavailable "npm install azurite@$ver failed: $(echo "$out" | tail -3 | tr '\n' ' ')"
fi
touch "$tmp/.complete"
if [[ -x "$bin" && -f "$dir/.complete" ]]; then echo "$bin"; exit 0; fi # another run finished first
rm -rf "$dir"
mv "$tmp" "$dir"
log "installed in $(($(date +%s) - start)) s"
echo "$bin"
