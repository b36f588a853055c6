# blockhaul — see README.md. The two set-up commands are `make demo` and `make test`.
GO      ?= go
BIN     := bin/blockhaul
PG_URL   = $$(scripts/pg-ensure.sh)
DEMO_TO ?= 20000

.PHONY: build test demo demo-follow bench test-nodes vet clean faults static image image-check faults-short protoset

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/blockhaul

# The binary the image holds: static (no cgo), Pebble's zstd in pure Go.
# COMMIT (from the environment) is the commit shown where Go cannot stamp
# it (the Dockerfile's build: no .git); in a checkout Go's stamp wins.
static:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -tags pebblegozstd -ldflags="-s -w -X main.buildCommit=$${COMMIT}" -o bin/blockhaul-static ./cmd/blockhaul

# The container image (Dockerfile: that binary FROM scratch): docker build
# where a daemon runs, else buildah with the build stage done by make static
# (scripts/image.sh). image-check runs it: version, a fetch, a deep verify.
IMAGE ?= blockhaul:dev
image:
	IMAGE=$(IMAGE) GO=$(GO) scripts/image.sh

image-check:
	IMAGE=$(IMAGE) scripts/image-check.sh

vet:
	$(GO) vet ./...

# Tests run against a real PostgreSQL: $DATABASE_URL, the local server, or a
# throwaway cluster that scripts/pg-ensure.sh starts; and snapshots go through
# a real S3 server, SeaweedFS, built once by scripts/seaweedfs.sh.
test:
	@url=$(PG_URL) && echo "tests use PostgreSQL at $${url%%\?*}" && \
	weed=$$(GO=$(GO) scripts/seaweedfs.sh || echo "unavailable: scripts/seaweedfs.sh failed") && echo "tests use SeaweedFS at $$weed" && \
	azurite=$$(scripts/azurite.sh || echo "unavailable: scripts/azurite.sh failed") && echo "tests use Azurite at $$azurite" && \
	DATABASE_URL="$$url" BLOCKHAUL_TEST_WEED="$$weed" BLOCKHAUL_TEST_AZURITE="$$azurite" $(GO) test -count=1 -timeout 40m ./...

# The fault campaign (faults/ with -tags faults: SIGKILLs, database faults,
# the fault proxy, damaged staging files, a full disk, concurrent starts),
# then every fuzz target for FUZZTIME each. Scenario lines start "faults:".
FUZZTIME ?= 1m
faults:
	@url=$(PG_URL) && FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/faults.sh "$$url"

# CI's short pass of the campaign (.ci/run, after make test): the scenarios
# only -tags faults builds — database faults on a throwaway cluster, a full
# disk, damaged node homes, a damaged archive chunk; the rest run in make test — without fuzzing:
# 432 s with its build on a 2-core machine at load 20.
faults-short:
	@url=$(PG_URL) && FUZZTIME=0 FAULTS_RUN='^(TestDatabaseFaults|TestFullDisk|TestDamagedNodeHome|TestDamagedArchiveChunk)$$' GO=$(GO) scripts/faults.sh "$$url"

# Loads $(DEMO_TO) synthetic CometBFT blocks into a fresh database
# blockhaul_demo, then prints a few rows.
demo: build
	@url=$(PG_URL) && scripts/demo.sh "$$url" $(DEMO_TO)

# Follows a synthetic CometBFT chain that grows in real time (one block each
# 200ms) and reorganises every 25 blocks, into the demo database, with the
# progress display; about a minute (scripts/demo-follow.sh for the knobs).
demo-follow: build
	@url=$(PG_URL) && scripts/demo-follow.sh "$$url"

bench: build
	@url=$(PG_URL) && DATABASE_URL="$$url" $(GO) run ./bench/cmd/bench -out bench/results

# The built-in Cosmos SDK + ibc-go descriptor set (docs/messages.md): compiled
# from the modules' published .proto files, fetched through the Go module proxy.
protoset:
	cd scripts/protoset && $(GO) run . -out ../../chain/cometbft/protodec/builtin.binpb.zst

test-nodes: build
	scripts/test-nodes.sh

clean:
	rm -rf bin demo-data
