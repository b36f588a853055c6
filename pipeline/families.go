package pipeline

import (
	"context"
	"log/slog"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/monitor"
)

// newSource returns the configured source: an RPC client when endpoints are
// given, a node's home with --node-home, else the family's synthetic chain.
// Building a source contacts nothing (a node home's databases are opened).
func newSource(cfg *Job, tip func() uint64, log *slog.Logger) (loader.Source, error) {
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

// Unwrap is the source tipWatch wraps (loader.SourceAs).
func (s tipWatch) Unwrap() loader.Source { return s.Source }

// CheckRange asks the source, when it can say, which height of from..to it
// cannot serve (loader.RangeChecker).
func (s tipWatch) CheckRange(ctx context.Context, from, to uint64) error {
	return checkRange(ctx, s.Source, from, to)
}

// checkRange is src's CheckRange when it has one, else nil.
func checkRange(ctx context.Context, src loader.Source, from, to uint64) error {
	if rc, ok := src.(loader.RangeChecker); ok {
		return rc.CheckRange(ctx, from, to)
	}
	return nil
}

func newBareSource(cfg *Job, tip func() uint64, log *slog.Logger) (loader.Source, error) {
	if cfg.Source != nil {
		return cfg.Source, nil
	}
	fam := cfg.Family
	if len(cfg.RPC) > 0 {
		return newRPCSource(fam, cfg, log)
	}
	if cfg.NodeHome != "" || cfg.Archive != "" {
		kind, opts := cfg.sourceFirst()
		opts.Logger = log
		return fam.Source(kind, opts)
	}
	return fam.Source(family.SourceSynthetic, family.SourceOptions{Synthetic: family.SyntheticOptions{
		Seed: cfg.SyntheticSeed, Tip: tip, TxPerBlock: cfg.SyntheticTxs, Steady: cfg.SyntheticSteady, Validators: cfg.SyntheticValidators,
		ReorgEvery: cfg.SyntheticReorgEvery, ReorgDepth: cfg.SyntheticReorgDepth}})
}

// newVerifier returns fam's block verification (what --verify-blocks
// asks), which the loader applies to every block of every source before it
// is staged.
func newVerifier(fam *family.Family, v chain.Verification) func([]byte) ([]byte, error) {
	if fam == nil {
		return nil
	}
	return fam.Verifier(v)
}

// newRPCSource builds the JSON-RPC client of cfg.RPC and the family's
// source on it. Each endpoint may carry as many requests at once as there
// are fetch workers, so that one endpoint alone can keep every worker busy.
func newRPCSource(fam *family.Family, cfg *Job, log *slog.Logger) (loader.Source, error) {
	ccfg := jsonrpc.Config{
		Endpoints:   cfg.RPC,
		RPS:         cfg.RPS,
		Timeout:     cfg.RPCTimeout,
		SilentAfter: cfg.rpcSilentAfter,
		WaitReport:  cfg.rpcWaitReport,
		Concurrency: cfg.FetchWorkers,
		Logger:      log,
		// CometBFT nodes, say, refuse larger batches by default; the
		// client's default (50) would send every span as single calls.
		MaxBatch: fam.RPCMaxBatch,
	}
	if cfg.Monitor != nil {
		ccfg.Observer = cfg.Monitor
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
	src, err := fam.Source(family.SourceRPC, family.SourceOptions{Client: client, Verify: cfg.VerifyBlocks, Logger: log})
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

// Stats is the client's endpoints' (estimate's probe counts its requests).
func (s closingSource) Stats() []jsonrpc.EndpointStats { return s.client.Stats() }

// closeSource releases what a source holds, if anything.
func closeSource(src loader.Source) {
	if c, ok := src.(interface{ Close() }); ok {
		c.Close()
	}
}
