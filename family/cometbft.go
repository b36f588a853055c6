package family

import (
	"context"
	"fmt"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/cometbft/nodehome"
	"github.com/blockhaul/blockhaul/chain/cometbft/trust"
	"github.com/blockhaul/blockhaul/chain/cometbftsynth"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
)

// CometBFT is the CometBFT/Tendermint family (chain/cometbft).
var CometBFT = register(&Family{
	ID:      chain.FamilyCometBFT,
	Name:    "cometbft",
	Aliases: []string{"tendermint"},
	Title:   "CometBFT",
	Genesis: 1,
	// 128 MiB costs CometBFT export nothing measurable and keeps RSS flat
	// from 10k to 100k blocks.
	MemoryLimitMiB: 128,
	// bench/results/latest.md on a 2-core machine with a local PostgreSQL,
	// at ≈4.5 transactions a block: 5.6 kB staged, 23.9 kB in PostgreSQL,
	// export 1,480 blocks/s.
	Rates: archive.Rates{StagingBytesPerBlock: 5.6e3, DBBytesPerBlock: 23.9e3, FetchBlocksPerSec: 1500, ExportBlocksPerSec: 1480,
		// The index phase 16.4 s after a 21.3 s fill (docs/benchmarks.md, the limit section of 2026-12-04 01:25).
		AfterFillPerFill: 0.77},
	SyntheticDensity: fmt.Sprintf("≈%g tx/block", cometbftsynth.DefaultTxPerBlock),
	RPCMaxBatch:      cometbft.RPCMaxBatch,
	// Parquet segments of 100,000 heights (docs/parquet.md, "Segment
	// size"): at mainnet density the events files come to a few hundred MB.
	SegmentBlocks: 100_000,
	FlagValues: map[string][]string{"event-encoding": {
		cometbft.EventEncodingAuto.String(), cometbft.EventEncodingBase64.String(), cometbft.EventEncodingText.String()}},

	NewDecoder: func(o DecoderOptions) export.Decoder {
		return cometbft.NewDecoderOptions(cometbft.DecoderOptions{EventEncoding: o.EventEncoding, Messages: o.Messages, Bech32Prefix: o.Bech32Prefix})
	},
	// The header's data_hash is checked with the header: header and full
	// verification are the same.
	Verifier: func(v chain.Verification) func([]byte) ([]byte, error) {
		if v == chain.VerifyLinks {
			return nil
		}
		return cometbft.VerifyBlock
	},
	RecordIdentity: cometbft.BlockIdentity,
	Trust:          cometbftTrust,
	TrustProven: func(cp []byte) (uint64, string, error) {
		st, err := trust.ProvenState(cp)
		if err != nil {
			return 0, "", err
		}
		return uint64(st.Height), st.Root.String(), nil
	},
	Sources: map[SourceKind]func(SourceOptions) (loader.Source, error){
		SourceRPC: func(o SourceOptions) (loader.Source, error) {
			return cometbft.NewRPCSource(cometbft.RPCConfig{Client: o.Client, Verify: o.Verify})
		},
		SourceSynthetic: func(o SourceOptions) (loader.Source, error) {
			s := o.Synthetic
			cfg := cometbftsynth.SyntheticConfig{Seed: s.Seed, Tip: s.Tip, TxPerBlock: s.TxPerBlock, Steady: s.Steady, Validators: s.Validators}
			if s.ReorgEvery > 0 {
				return cometbftsynth.NewReorgingSynthetic(cfg, cometbftsynth.SyntheticReorgs{Every: s.ReorgEvery, Depth: s.ReorgDepth}), nil
			}
			return cometbftsynth.NewSynthetic(cfg), nil
		},
		// A stopped node's home gives the records its RPC would serve,
		// byte for byte (chain/cometbft/nodehome).
		SourceNodeHome: func(o SourceOptions) (loader.Source, error) {
			// With links the loader recomputes nothing: the source keeps
			// the data_hash check CometBFT makes of a block it reads.
			s, err := nodehome.Open(nodehome.Config{Home: o.NodeHome, CheckDataHash: o.Verify == chain.VerifyLinks})
			if err != nil {
				return nil, err // not a nil *Source in a non-nil interface
			}
			return s, nil
		},
	},
	Node: Node{
		Calls: [2]NodeCall{
			{Method: "block", Field: "block", AppendParams: cometbftHeightParams},
			{Method: "block_results", Field: "block_results", AppendParams: cometbftHeightParams},
		},
		Info: func(method, chainID string, from, to uint64) ([]byte, bool, error) {
			if method != "status" {
				return nil, false, nil
			}
			return fmt.Appendf(nil, `{"node_info":{"network":%q,"version":"0.38.0"},"sync_info":{"latest_block_height":"%d","earliest_block_height":"%d","catching_up":false}}`,
				chainID, to, from), true, nil
		},
	},
})

func cometbftHeightParams(dst []byte, h uint64) []byte {
	return fmt.Appendf(dst, `{"height":"%d"}`, h)
}

// Default is the family of a job that names none.
var Default = CometBFT

// cometbftTrust opens a job's chain of trust (chain/cometbft/trust). A
// reorganising synthetic chain (a test device: CometBFT never reorganises)
// has none.
func cometbftTrust(ctx context.Context, src loader.Source, o TrustOptions) (loader.Prover, error) {
	mode, err := trust.ParseMode(o.Mode)
	if err != nil {
		return nil, err
	}
	if _, reorgs := loader.SourceAs[*synthreorg.Chain](src); mode == trust.Off || reorgs {
		return nil, nil
	}
	var root any = src
	if s, ok := loader.SourceAs[trust.GenesisSource](src); ok {
		root = s
	}
	if s, ok := loader.SourceAs[trust.HeaderRootSource](src); ok {
		root = s
	}
	c, err := trust.Open(ctx, root, trust.Options{Mode: mode, Root: o.Root, Checkpoint: o.Checkpoint, FromRoot: o.FromRoot, ChainID: o.ChainID})
	if err != nil {
		return nil, err
	}
	return c, nil
}
