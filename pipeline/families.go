package pipeline

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/monitor"
)

// newSource returns the configured source: an RPC client when endpoints are
// given, else the family's synthetic chain. Building a source contacts
// nothing.
func newSource(cfg *Config, tip func() uint64, log *slog.Logger) (loader.Source, error) {
	src, err := newBareSource(cfg, tip, log)
	if err != nil || cfg.Monitor == nil {
		return src, err
	}
	return tipWatch{src, cfg.Monitor}, nil
}

// tipWatch reports every tip its source reads to the job's monitor (the
// chain tip and lag metrics).
type tipWatch struct {
	loader.Source
	m *monitor.Monitor
}

func (s tipWatch) Tip(ctx context.Context) (uint64, error) {
	h, err := s.Source.Tip(ctx)
	if err == nil {
		s.m.SetTip(h)
	}
	return h, err
}

func (s tipWatch) Close() { closeSource(s.Source) }

func newBareSource(cfg *Config, tip func() uint64, log *slog.Logger) (loader.Source, error) {
	if cfg.Source != nil {
		return cfg.Source, nil
	}
	fam, err := chain.ParseFamily(cfg.Chain)
	if err != nil {
		return nil, err
	}
	if len(cfg.RPC) > 0 {
		return newRPCSource(fam, cfg, log)
	}
	switch fam {
	case chain.FamilyCometBFT:
		scfg := cometbft.SyntheticConfig{Seed: cfg.SyntheticSeed, Tip: tip, TxPerBlock: cfg.SyntheticTxs, Steady: cfg.SyntheticSteady}
		if cfg.SyntheticReorgEvery > 0 {
			return cometbft.NewReorgingSynthetic(scfg, cfg.syntheticReorgs()), nil
		}
		return cometbft.NewSynthetic(scfg), nil
	case chain.FamilyEVM:
		ecfg := evm.SyntheticConfig{Seed: cfg.SyntheticSeed, Tip: tip, TxPerBlock: cfg.SyntheticTxs, LogsPerBlock: cfg.SyntheticTxs * 400 / 150}
		if cfg.SyntheticReorgEvery > 0 {
			return evm.NewReorgingSynthetic(ecfg, cfg.syntheticReorgs()), nil
		}
		return evm.NewSynthetic(ecfg), nil
	}
	return nil, fmt.Errorf("no source for chain %s", fam)
}

// newVerifier returns the family's block verification, which the loader
// applies to every block of every source before it is staged.
func newVerifier(cfg *Config) func([]byte) ([]byte, error) {
	fam, err := chain.ParseFamily(cfg.Chain)
	if err != nil || cfg.VerifyBlocks == chain.VerifyLinks {
		return nil
	}
	switch fam {
	case chain.FamilyCometBFT:
		return cometbft.VerifyBlock
	case chain.FamilyEVM:
		if cfg.VerifyBlocks == chain.VerifyHeader {
			return evm.VerifyRecordHeader
		}
		return evm.VerifyBlock
	}
	return nil
}

// newDecoder is the decoder of cfg's chain family, restricted to the tables
// the job writes (--tables, --replay: cfg.SelectedTables).
func newDecoder(cfg *Config) (export.Decoder, error) {
	dec, err := familyDecoder(cfg)
	if err != nil || cfg.SelectedTables == nil {
		return dec, err
	}
	return export.Select(dec, cfg.SelectedTables)
}

// familyDecoder is the decoder of every table of cfg's chain family.
func familyDecoder(cfg *Config) (export.Decoder, error) {
	fam, err := chain.ParseFamily(cfg.Chain)
	if err != nil {
		return nil, err
	}
	switch fam {
	case chain.FamilyCometBFT:
		return cometbft.NewDecoderOptions(cometbft.DecoderOptions{EventEncoding: cfg.EventEncoding}), nil
	case chain.FamilyEVM:
		return evm.NewDecoder(), nil
	}
	return nil, fmt.Errorf("no decoder for chain %s", fam)
}

// newRPCSource builds the JSON-RPC client of cfg.RPC and the family's
// source on it. Each endpoint may carry as many requests at once as there
// are fetch workers, so that one endpoint alone can keep every worker busy.
func newRPCSource(fam chain.Family, cfg *Config, log *slog.Logger) (loader.Source, error) {
	ccfg := jsonrpc.Config{
		Endpoints:   cfg.RPC,
		RPS:         cfg.RPS,
		Timeout:     cfg.RPCTimeout,
		Concurrency: cfg.FetchWorkers,
		Logger:      log,
	}
	if cfg.Monitor != nil {
		ccfg.Observer = cfg.Monitor
	}
	if fam == chain.FamilyCometBFT {
		// CometBFT nodes refuse larger batches by default; the client's
		// default (50) would send every span as single calls.
		ccfg.MaxBatch = cometbft.RPCMaxBatch
	}
	client, err := jsonrpc.New(ccfg)
	if err != nil {
		return nil, err
	}
	if cfg.Monitor != nil {
		// /readyz is not ready while every endpoint is out of rotation.
		cfg.Monitor.WatchEndpoints(func() []monitor.EndpointHealth {
			st := client.Stats()
			out := make([]monitor.EndpointHealth, len(st))
			for i, e := range st {
				out[i] = monitor.EndpointHealth{Endpoint: e.Endpoint, Healthy: e.Healthy}
			}
			return out
		})
	}
	var src loader.Source
	switch fam {
	case chain.FamilyCometBFT:
		src, err = cometbft.NewRPCSource(cometbft.RPCConfig{Client: client, Verify: cfg.VerifyBlocks})
	case chain.FamilyEVM:
		src, err = evm.NewRPCSource(evm.RPCConfig{Client: client, Logger: log, Verify: cfg.VerifyBlocks})
	default:
		err = fmt.Errorf("no RPC source for chain %s", fam)
	}
	if err != nil {
		client.Close()
		return nil, err
	}
	return closingSource{src, client}, nil
}

// closingSource ties an RPC source to its client so that the job that
// built it can release the client's connections when it ends.
type closingSource struct {
	loader.Source
	client *jsonrpc.Client
}

func (s closingSource) Close() { s.client.Close() }

// closeSource releases what a source holds, if anything.
func closeSource(src loader.Source) {
	if c, ok := src.(interface{ Close() }); ok {
		c.Close()
	}
}
