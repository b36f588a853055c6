module github.com/blockhaul/blockhaul/scripts/protoset

go 1.26.8

require (
	github.com/bufbuild/protocompile v0.14.1
	github.com/cosmos/gogoproto v1.7.0
	github.com/cosmos/ics23/go v0.11.0
	github.com/klauspost/compress v1.20.4
	google.golang.org/genproto/googleapis/api v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	golang.org/x/crypto v0.26.0 // indirect
	golang.org/x/sync v0.8.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
