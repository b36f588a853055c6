package family

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/evm/events"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/chain/synthreorg"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
)

// EVM is the Ethereum JSON-RPC family (chain/evm).
var EVM = register(&Family{
	ID:      chain.FamilyEVM,
	Name:    "evm",
	Aliases: []string{"ethereum"},
	Title:   "EVM",
	Genesis: evm.GenesisHeight,
	// An EVM batch's working set (≈540 wide rows a block) is larger than
	// CometBFT's, and a limit below it makes the collector run continuously
	// (measured: 20% slower export at 192 MiB).
	MemoryLimitMiB: 448,
	// Parquet segments of 10,000 heights (docs/parquet.md, "Segment
	// size"): at Ethereum mainnet's density the logs files come to a few
	// hundred MB.
	SegmentBlocks: 10_000,
	// bench/results/latest.md on a 2-core machine with a local PostgreSQL,
	// at ≈150 transactions and 400 logs a block: export 155 blocks/s, 92 kB
	// staged, about 135 kB in PostgreSQL.
	SyntheticDensity: fmt.Sprintf("≈%d tx, ≈%d logs/block", evmsynth.DefaultSyntheticTxPerBlock, evmsynth.DefaultSyntheticLogsPerBlock),
	Rates: archive.Rates{StagingBytesPerBlock: 92e3, DBBytesPerBlock: 135e3, FetchBlocksPerSec: 700, ExportBlocksPerSec: 155,
		// The index phase 13.7 s after a 12.8 s fill (docs/benchmarks.md, the limit section of 2026-12-04 01:25).
		AfterFillPerFill: 1.07},

	NewDecoder: func(o DecoderOptions) export.Decoder {
		if o.Events != nil {
			return events.NewDecoder(evm.NewDecoder(), o.Events)
		}
		return evm.NewDecoder()
	},
	CompileABIs: events.Compile,
	Verifier: func(v chain.Verification) func([]byte) ([]byte, error) {
		switch v {
		case chain.VerifyLinks:
			return nil
		case chain.VerifyHeader:
			return evm.VerifyRecordHeader
		}
		return evm.VerifyBlock
	},
	RecordIdentity: evm.BlockIdentity,
	Sources: map[SourceKind]func(SourceOptions) (loader.Source, error){
		SourceRPC: func(o SourceOptions) (loader.Source, error) {
			return evm.NewRPCSource(evm.RPCConfig{Client: o.Client, Logger: o.Logger, Verify: o.Verify})
		},
		SourceSynthetic: func(o SourceOptions) (loader.Source, error) {
			s := o.Synthetic
			// Logs scale with transactions at the defaults' ratio.
			cfg := evmsynth.SyntheticConfig{Seed: s.Seed, Tip: s.Tip, TxPerBlock: s.TxPerBlock,
				LogsPerBlock: s.TxPerBlock * evmsynth.DefaultSyntheticLogsPerBlock / evmsynth.DefaultSyntheticTxPerBlock}
			if s.ReorgEvery > 0 {
				return evmsynth.NewReorgingSynthetic(cfg, synthreorg.Reorgs{Every: s.ReorgEvery, Depth: s.ReorgDepth}), nil
			}
			return evmsynth.NewSynthetic(cfg), nil
		},
	},
	Node: Node{
		Calls: [2]NodeCall{
			{Method: "eth_getBlockByNumber", Field: "block", AppendParams: func(dst []byte, h uint64) []byte {
				return fmt.Appendf(dst, `["0x%x",true]`, h)
			}},
			{Method: "eth_getBlockReceipts", Field: "receipts", AppendParams: func(dst []byte, h uint64) []byte {
				return fmt.Appendf(dst, `["0x%x"]`, h)
			}},
		},
		Info: func(method, chainID string, from, to uint64) ([]byte, bool, error) {
			switch method {
			case "eth_chainId":
				id, err := strconv.ParseUint(chainID, 10, 64)
				if err != nil {
					return nil, true, errors.New("chain id is not a number")
				}
				return fmt.Appendf(nil, `"0x%x"`, id), true, nil
			case "eth_blockNumber":
				return fmt.Appendf(nil, `"0x%x"`, to), true, nil
			case "net_version":
				return []byte(strconv.Quote(chainID)), true, nil
			}
			return nil, false, nil
		},
		AbsentIsNull: true,
	},
})
