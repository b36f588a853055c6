// Package chunked is blockhaul's portable archive: staged history written
// as fixed-size chunks of raw records (the records as the node served
// them, zstd-compressed) under a prefix in object storage, with a JSON
// manifest that lists every chunk's height range, first and last block
// hashes, the parent hash of its first block and the SHA-256 of its bytes,
// so that anyone can check the archive and seed a rebuild from it without
// a node. docs/format/archive.md is the format's reference.
//
// Publish writes an archive from a staging store (idempotent, resumable,
// shardable: each shard writes its own chunks and a manifest part, and a
// plain publish merges the parts into the manifest, which it writes last).
// Source reads one (a bucket URL or plain http(s)://) as a block source
// whose records go through the loader's verification like any other's.
package chunked
