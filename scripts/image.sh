#!/usr/bin/env bash
# make image: builds the container image IMAGE (default blockhaul:dev) from
# the Dockerfile.
#   - Docker with a daemon: docker build, both stages as written.
#   - Else buildah (Debian's `buildah` package): the build stage's base,
#     golang:<version>, comes from a registry this machine may not reach, so
#     the stage is given as a directory holding what it makes (buildah's
#     --build-context build=DIR): the binary of `make static`, which is the
#     Dockerfile's own build command (internal/staticbuild checks that they
#     are one), and this machine's CA bundle. The final stage — FROM scratch,
#     the files, the user, the entrypoint — is the Dockerfile's as written.
# scripts/image-check.sh runs the image it built.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-blockhaul:dev}
GO=${GO:-go}
# The commit `blockhaul version` shows: the build context holds no .git, so
# Go cannot stamp it there; it is given as the build argument COMMIT,
# "+modified" when tracked files have uncommitted changes.
if COMMIT=$(git rev-parse HEAD 2>/dev/null); then
	[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || COMMIT+=+modified
else
	COMMIT=
	echo "make image: not a git checkout: the image's version will say its commit is unknown" >&2
fi
export COMMIT
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
	exec docker build --build-arg COMMIT="$COMMIT" -t "$IMAGE" .
fi
if ! command -v buildah >/dev/null; then
	echo "make image: neither a Docker daemon (docker info failed or no docker) nor buildah here; apt-get install buildah podman, or make static for the binary alone" >&2
	exit 1
fi
ca=/etc/ssl/certs/ca-certificates.crt
[[ -r $ca ]] || { echo "make image: no CA bundle at $ca (Debian: apt-get install ca-certificates)" >&2; exit 1; }
make --no-print-directory static GO="$GO"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/out" "$stage/etc/ssl/certs"
cp bin/blockhaul-static "$stage/out/blockhaul"
cp "$ca" "$stage/etc/ssl/certs/ca-certificates.crt"
buildah build --pull=never --layers=false --build-context build="$stage" -t "$IMAGE" .
