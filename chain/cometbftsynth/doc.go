// Package cometbftsynth is the synthetic CometBFT chain: a deterministic,
// seedable source of the raw records a CometBFT 0.38 node with a Cosmos SDK
// application would serve (Synthetic), with real hashes that
// cometbft.VerifyBlock recomputes, and a variant that reorganises
// (NewReorgingSynthetic). It is blockhaul's embedded default source when no
// --rpc is given and the benchmark's workload; it imitates chain/cometbft
// and lives beside it, not inside it.
//
// Files: synthetic.go (the chain and its config), synthetic_gen.go (its
// generator), synthetic_tx.go and synthetic_plan.go (transactions and
// block plans), synthetic_reorg.go (reorganisations), as in chain/evmsynth.
package cometbftsynth
