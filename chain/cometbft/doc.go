// Package cometbft is blockhaul's CometBFT (Tendermint) chain family: the
// raw record a source stages for each height, its RPC source and block
// verification, and the decoder that turns them into rows of the
// blocks, transactions, events, messages, commit_signatures,
// validator_updates and consensus_param_updates tables (tables.go).
//
// A raw record is one JSON object holding the result of /block and the
// result of /block_results for the same height, exactly as the node sent
// them (see MarshalRecord), so that a later schema can be re-exported from
// staging without asking a node again. A record is read once into a View
// (view.go): the spans of its members, which the decoder, the block
// verification and a reader outside the package (the chain of trust: the
// header and last commit) all take from it.
//
// The package implements the loader's Source (RPCSource) and the exporter's
// Decoder (Decoder) structurally; it imports neither. Its synthetic chain
// is package chain/cometbftsynth.
package cometbft
