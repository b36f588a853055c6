#!/usr/bin/env bash
# make image-check: runs the image make image built (IMAGE, default
# blockhaul:dev) as the manifests in deploy/ run it — args only, the image's
# own user (65532), a volume for --staging — and checks: `version` (a static
# build: cgo 0, Pebble's zstd in pure Go), a fetch of 2,000 synthetic
# CometBFT blocks, and a deep verify of them (exit 0, clean). Uses docker
# when a daemon runs, else podman. Exits non-zero, saying what failed.
#
# Where podman's default runtime cannot start a container (a sandbox
# without CAP_SYS_RESOURCE, cgroups v1 and v2 mixed: crun refuses with
# "setrlimit RLIMIT_NOFILE: Operation not permitted" or "cgroups in hybrid
# mode not supported"), it says so and runs runc with process limits set
# below the host's: CONTAINER_RUN_FLAGS overrides the flags.
set -euo pipefail
IMAGE=${IMAGE:-blockhaul:dev}
TO=${TO:-2000}
fail() { echo "image-check: FAILED: $*" >&2; exit 1; }
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
	engine=docker
elif command -v podman >/dev/null; then
	engine=podman
	[[ $IMAGE == */* ]] || IMAGE=localhost/$IMAGE
else
	fail "no Docker daemon and no podman to run $IMAGE"
fi
read -r -a flags <<<"${CONTAINER_RUN_FLAGS:-}"
run() { "$engine" run --rm "${flags[@]}" "$@"; }

if ! out=$(run "$IMAGE" version 2>&1); then
	if [[ $engine == podman && -z ${CONTAINER_RUN_FLAGS+x} && $out == *crun:* ]] && command -v runc >/dev/null; then
		echo "image-check: podman's default runtime cannot start a container here ($(grep -m1 -o 'crun:.*' <<<"$out")); using runc with lower process limits" >&2
		flags=(--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
		out=$(run "$IMAGE" version 2>&1) || fail "$engine run $IMAGE version: $out"
	else
		fail "$engine run $IMAGE version: $out"
	fi
fi
echo "$out"
grep -q '^  cgo: *0 ' <<<"$out" || fail "version does not say cgo 0: the image's binary is not the static build"
user=$("$engine" image inspect --format '{{.Config.User}}' "$IMAGE") || fail "$engine image inspect $IMAGE"
[[ $user == 65532:65532 ]] || fail "$IMAGE runs as user '$user', not the Dockerfile's 65532:65532"

vol=$(mktemp -d)
trap 'rm -rf "$vol"' EXIT
chmod 0777 "$vol" # the image's user, 65532, writes the store
start=$(date +%s)
out=$(run -v "$vol:/data" "$IMAGE" fetch --staging=/data/staging --from=1 --to="$TO" --log-format=json 2>&1) ||
	fail "fetch of 1-$TO in $IMAGE: $out"
echo "$out" | tail -4
out=$(run -v "$vol:/data" "$IMAGE" verify --staging=/data/staging --deep 2>&1) ||
	fail "deep verify in $IMAGE: $out"
echo "$out"
grep -qi "clean" <<<"$out" || fail "deep verify in $IMAGE does not say clean"
echo "image-check: $IMAGE ($engine): version, a fetch of 1-$TO and a deep verify: ok in $(($(date +%s) - start))s"
