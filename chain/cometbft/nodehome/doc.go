// Package nodehome reads a stopped CometBFT node's own data directory (its
// "home": config/config.toml, data/blockstore.db, data/state.db) as a source
// of CometBFT records, without its RPC.
//
// Each height's record is built the way the node's RPC builds its /block and
// /block_results answers (rpc/core/blocks.go of CometBFT 0.38: the block
// store's block and block meta, the state store's finalize-block response),
// read with CometBFT's own stores and types, then written as the node's
// JSON-RPC server writes a result: its JSON encoding (libs/json, with
// jsonpb for the abci types) framed as encoding/json frames a RawMessage
// (compacted, HTML-escaped). The writing is done by encode.go's hand-written
// encoders, which are most of the source's speed and are held to libs/json
// by the tests (every recorded height, generated values, a fuzz target); a
// value they do not write (evidence, validator or consensus parameter
// updates) is written by libs/json itself. The record is therefore the one
// the RPC source would stage from the same node, byte for byte, and
// everything downstream (verification, decoding, export) is unchanged.
//
// Versions: a home written by CometBFT 0.38 gives the answers of a 0.38
// node, including for heights whose results were stored as the legacy
// ABCIResponses of 0.34/0.37 before an upgrade (converted as 0.38 does). A
// home whose latest results are legacy ABCIResponses is a 0.37 (or 0.34)
// node's: its results are written in the 0.37 shape (begin_block_events,
// end_block_events, no app_hash), and for a 0.34 node's (the software
// version in its state) with event attributes in base64, as 0.34's bytes
// attributes were. See docs/sources.md for what holds byte for byte for
// each version.
//
// The databases are opened read-only. goleveldb takes a shared lock on its
// LOCK file for that; a running node holds it exclusively, so a running
// node's home is refused (ErrLocked) and the node is never disturbed.
package nodehome
