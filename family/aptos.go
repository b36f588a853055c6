package family

import (
	"fmt"
	"os"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/aptos"
	"github.com/blockhaul/blockhaul/chain/aptossynth"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
)

// Aptos is the Aptos family (chain/aptos): blocks of a fullnode's REST API.
// Its nodes do not speak JSON-RPC: its Node is the zero value.
var Aptos = register(&Family{
	ID:      chain.FamilyAptos,
	Name:    "aptos",
	Title:   "Aptos",
	Genesis: aptos.GenesisHeight,
	// A block of ≈7 transactions decodes into ≈50 rows, most of them jsonb.
	MemoryLimitMiB: 192,
	// docs/aptos.md, "How fast": the synthetic chain at its default
	// density on a 2-core machine with a local PostgreSQL.
	Rates: archive.Rates{StagingBytesPerBlock: 6.0e3, DBBytesPerBlock: 40e3, FetchBlocksPerSec: 1500, ExportBlocksPerSec: 450,
		// Not measured for Aptos: EVM's, the larger of the two measured.
		AfterFillPerFill: 1.07},
	SyntheticDensity: fmt.Sprintf("≈%g user tx, ≈%g events/block", aptossynth.DefaultTxPerBlock, aptossynth.DefaultTxPerBlock*aptossynth.EventsPerUserTx+1),

	NewDecoder: func(DecoderOptions) export.Decoder { return aptos.NewDecoder() },
	Verifier: func(v chain.Verification) func([]byte) ([]byte, error) {
		switch v {
		case chain.VerifyLinks:
			return nil
		case chain.VerifyHeader:
			return aptos.VerifyRecordHeader
		}
		return aptos.VerifyBlock
	},
	RecordIdentity: aptos.BlockIdentity,
	Sources: map[SourceKind]func(SourceOptions) (loader.Source, error){
		SourceRPC: func(o SourceOptions) (loader.Source, error) {
			s, err := aptos.NewSource(aptos.SourceConfig{Client: o.Client, APIKey: os.Getenv(aptos.APIKeyEnv), Verify: o.Verify, Logger: o.Logger})
			if err != nil {
				return nil, err // not a nil *Source in a non-nil interface
			}
			return s, nil
		},
		SourceSynthetic: func(o SourceOptions) (loader.Source, error) {
			s := o.Synthetic
			cfg := aptossynth.Config{Seed: s.Seed, Tip: s.Tip, TxPerBlock: s.TxPerBlock, Steady: s.Steady}
			if s.ReorgEvery > 0 {
				return aptossynth.NewReorging(cfg, synthreorg.Reorgs{Every: s.ReorgEvery, Depth: s.ReorgDepth}), nil
			}
			return aptossynth.New(cfg), nil
		},
	},
})
