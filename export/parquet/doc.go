// Package parquet writes the tables a decoder fills as Parquet files, from
// staging, without PostgreSQL: one file per table per segment of heights
// (TABLE/FROM-TO.parquet, heights zero-padded so that names sort by
// height), rows in height order, zstd, row groups with statistics, and a
// manifest (manifest.json) that lists each segment's heights, the hashes
// that chain it to its neighbours and each file's rows and SHA-256. A
// segment's files are written before its manifest entry, so a segment the
// manifest lists is whole; the same staged blocks and options give the
// same bytes. The destination is a gocloud.dev blob bucket: a directory or
// object storage. Verify checks a destination against its manifest, and
// against staging. docs/parquet.md describes the layout and the types.
package parquet
