package pipeline

import (
	"fmt"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
)

// newSource returns the configured source: an RPC client when endpoints are
// given, else the family's synthetic chain. Building a source contacts
// nothing.
func newSource(cfg *Config, tip func() uint64) (loader.Source, error) {
	if cfg.Source != nil {
		return cfg.Source, nil
	}
	fam, err := chain.ParseFamily(cfg.Chain)
	if err != nil {
		return nil, err
	}
	if len(cfg.RPC) > 0 {
		return newRPCSource(fam, cfg)
	}
	switch fam {
	case chain.FamilyCometBFT:
		return cometbft.NewSynthetic(cometbft.SyntheticConfig{Seed: cfg.SyntheticSeed, Tip: tip}), nil
	case chain.FamilyEVM:
		return evm.NewSynthetic(evm.SyntheticConfig{Seed: cfg.SyntheticSeed, Tip: tip}), nil
	}
	return nil, fmt.Errorf("no source for chain %s", fam)
}

func newDecoder(cfg *Config) (export.Decoder, error) {
	fam, err := chain.ParseFamily(cfg.Chain)
	if err != nil {
		return nil, err
	}
	switch fam {
	case chain.FamilyCometBFT:
		return cometbft.NewDecoder(), nil
	case chain.FamilyEVM:
		return evm.NewDecoder(), nil
	}
	return nil, fmt.Errorf("no decoder for chain %s", fam)
}

func newRPCSource(fam chain.Family, cfg *Config) (loader.Source, error) {
	return nil, fmt.Errorf("%s RPC source is not built yet", fam)
}
