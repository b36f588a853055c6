# blockhaul in an image FROM scratch: one static binary (no cgo; Pebble's
# own zstd switched to pure Go by the pebblegozstd tag), the CA bundle for
# https RPC endpoints and TLS to PostgreSQL, and a non-root user.
#   make image            (IMAGE=blockhaul:dev)
# The manifests in deploy/ run it with args only: the entrypoint is blockhaul.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The context holds no .git (.dockerignore), so Go cannot stamp the commit:
# make image passes it (docker build --build-arg COMMIT=$(git rev-parse HEAD)).
ARG COMMIT
RUN CGO_ENABLED=0 go build -buildvcs=auto -trimpath -tags pebblegozstd -ldflags="-s -w -X main.buildCommit=${COMMIT}" -o /out/blockhaul ./cmd/blockhaul

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/blockhaul /blockhaul
USER 65532:65532
ENTRYPOINT ["/blockhaul"]
