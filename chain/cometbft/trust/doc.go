// Package trust proves a CometBFT chain's staged history from a trust root:
// a light client's chain of trust run over staged records, offline. From
// the root — the chain's genesis (its validators and consensus parameters)
// or a header the user trusts — it tracks the validator sets and consensus
// parameters through every height, as CometBFT's state/execution.go
// applies the updates a block's results carry (validator updates two
// heights later, parameter updates at the next height), and checks in
// every header validators_hash, next_validators_hash, consensus_hash and
// last_results_hash against the tracked state, and that more than 2/3 of
// the signing set's power signed the commits its mode selects. Signatures
// are CometBFT's own verification (ValidatorSet.VerifyCommitLight, with its
// batch ed25519 verifier); keys other than ed25519 and secp256k1 are
// refused by name.
//
// The state after the last proven height marshals into a checkpoint
// (State.Marshal), which staging keeps so that a resume, a shard above or
// a later verify continues the chain instead of restarting it.
// docs/trust.md says what is proven, how, and what is not.
package trust
