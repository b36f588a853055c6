// Package evmsynth is the synthetic EVM chain: a deterministic, seedable
// source of the raw records a geth node would serve (Synthetic), with real
// hashes and roots that evm.VerifyBlock recomputes, and a variant that
// reorganises (NewReorgingSynthetic). It is the embedded default source of
// an EVM job without --rpc and the benchmark's EVM workload; it imitates
// chain/evm and lives beside it, not inside it.
//
// Files: synthetic.go (the chain and its config), synthetic_gen.go (its
// generator), synthetic_reorg.go (reorganisations), as in
// chain/cometbftsynth.
package evmsynth
