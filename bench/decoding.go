package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/evmsynth"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/staging"
)

// runDecoding measures what the decoders a user configures cost on the
// export path (issue 23 §3), for every family: one staged range exported
// plain (Cosmos messages kept raw, no ABI) and decoded (messages decoded by
// the built-in proto set; for a family that reads ABIs, evmsynth's ABI of
// three events over ≈29% of the logs), each against the raw-COPY baseline
// of its own rows. The four loads rotate their order round by round; the
// best round of each counts.
func runDecoding(ctx context.Context, cfg *Config) ([]DecodingResult, error) {
	var out []DecodingResult
	for _, f := range family.All() {
		blocks, ok := cfg.decodingBlocks()[f.Name]
		if !ok {
			continue
		}
		plain, decoded, what, err := decodingLoads(cfg, f, blocks)
		if err != nil {
			return out, err
		}
		r, err := runDecodingLoads(ctx, cfg, plain, decoded)
		if err != nil {
			return out, err
		}
		r.Decoding = what
		out = append(out, r)
	}
	return out, nil
}

// decodingLoads returns the plain and decoded workloads of family f over
// [1, blocks], and what the decoded one decodes.
func decodingLoads(cfg *Config, f *family.Family, blocks uint64) (plain, decoded density, what string, err error) {
	src := newSynthetic(f.ID, cfg.Seed)
	plain = density{f.Name, f, blocks, src, f.NewDecoder(family.DecoderOptions{Messages: family.NoMessageTypes()})}
	opts := family.DecoderOptions{}
	what = "Cosmos messages decoded (the built-in proto set)"
	if f.CompileABIs != nil {
		if opts.Events, err = compileSyntheticABI(cfg, f); err != nil {
			return plain, decoded, "", err
		}
		what = "--abi of 3 events over every address (Approval, Sync, Swap: evmsynth.DecodingABI)"
	}
	decoded = density{f.Name, f, blocks, src, f.NewDecoder(opts)}
	return plain, decoded, what, nil
}

// compileSyntheticABI compiles evmsynth.DecodingABI as `--abi b=FILE` does.
func compileSyntheticABI(cfg *Config, f *family.Family) (*family.EventTables, error) {
	file, err := os.CreateTemp(cfg.WorkDir, "blockhaul-bench-abi-*.json")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.Remove(file.Name())
	_, err = file.WriteString(evmsynth.DecodingABI)
	if err = errors.Join(err, file.Close()); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	set, err := f.CompileABIs([]string{"b=" + file.Name()})
	if err != nil {
		return nil, fmt.Errorf("bench: the synthetic chain's ABI: %w", err)
	}
	return set, nil
}

// runDecodingLoads stages the range once and measures the four loads.
func runDecodingLoads(ctx context.Context, cfg *Config, plain, decoded density) (res DecodingResult, err error) {
	res = DecodingResult{Chain: plain.name, Blocks: plain.blocks, Plain: DecodingLoad{Name: "plain"}, Decoded: DecodingLoad{Name: "decoded"}}
	store, closeStore, err := openScratchStore(cfg, "decoding-"+plain.name)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, closeStore()) }()
	cfg.Logger.Info("decoding: ingest", "chain", plain.name, "blocks", plain.blocks)
	if _, err := ingest(ctx, cfg, plain, store); err != nil {
		return res, err
	}
	if res.Filled, err = decodingFills(store, plain.dec, decoded.dec, min(plain.blocks, uint64(cfg.BatchBlocks))); err != nil {
		return res, err
	}
	type load struct {
		l      *DecodingLoad
		d      density
		export bool
	}
	loads := []load{{&res.Plain, plain, true}, {&res.Plain, plain, false}, {&res.Decoded, decoded, true}, {&res.Decoded, decoded, false}}
	for round := range cfg.Rounds {
		for k := range loads {
			ld := loads[(k+round)%len(loads)]
			cfg.Logger.Info("decoding", "chain", plain.name, "load", ld.l.Name, "export", ld.export, "round", round+1)
			if ld.export {
				run, rows, cpu, err := exportLoad(ctx, cfg, ld.d, store, 1, false)
				if err != nil {
					return res, err
				}
				if ld.l.Export.Seconds == 0 || run.Seconds < ld.l.Export.Seconds {
					ld.l.ExportCPU = cpu
				}
				ld.l.Export, ld.l.Rows = best(ld.l.Export, run), rows
				continue
			}
			run, cpu, err := watchedBaseline(ctx, cfg, ld.d, store, false)
			if err != nil {
				return res, err
			}
			if ld.l.Baseline.Seconds == 0 || run.Seconds < ld.l.Baseline.Seconds {
				ld.l.BaselineCPU = cpu
			}
			ld.l.Baseline = best(ld.l.Baseline, run)
		}
	}
	for _, l := range []*DecodingLoad{&res.Plain, &res.Decoded} {
		if l.Baseline.Rows != l.Export.Rows {
			return res, fmt.Errorf("bench: decoding %s, %s: baseline copied %d rows, export %d: the two loads are not comparable", plain.name, l.Name, l.Baseline.Rows, l.Export.Rows)
		}
		if l.Export.Seconds > 0 {
			l.Ratio = l.Baseline.Seconds / l.Export.Seconds
		}
	}
	cfg.Logger.Info("decoding: export vs raw COPY", "chain", plain.name,
		"plain", round2(res.Plain.Ratio), "decoded", round2(res.Decoded.Ratio))
	return res, nil
}

// decodingFills decodes [1, blocks] with both decoders and counts what the
// decoded one fills that the plain one leaves empty: the values of a column
// NULL in the plain rows and not in the decoded ones, and the rows of the
// tables only the decoded one has.
func decodingFills(store *staging.Store, plain, decoded export.Decoder, blocks uint64) ([]Filled, error) {
	p, d := chain.NewRows(plain.Tables()), chain.NewRows(decoded.Tables())
	if err := decodeRange(store, plain, 1, blocks, p); err != nil {
		return nil, err
	}
	if err := decodeRange(store, decoded, 1, blocks, d); err != nil {
		return nil, err
	}
	var out []Filled
	plainTables := plain.Tables()
	for ti, t := range decoded.Tables() {
		pi := slices.IndexFunc(plainTables, func(pt chain.Table) bool { return pt.Name == t.Name })
		rows := d.Table(ti)
		if pi < 0 {
			if len(rows) > 0 {
				out = append(out, Filled{Blocks: blocks, Table: t.Name, Rows: uint64(len(rows)), Values: uint64(len(rows))})
			}
			continue
		}
		prows := p.Table(pi)
		if len(prows) != len(rows) {
			return nil, fmt.Errorf("bench: decoding: table %s has %d rows decoded plain, %d decoded", t.Name, len(prows), len(rows))
		}
		for ci, col := range t.ColumnNames() {
			var n uint64
			for ri := range rows {
				if prows[ri][ci] == nil && rows[ri][ci] != nil {
					n++
				}
			}
			if n > 0 {
				out = append(out, Filled{Blocks: blocks, Table: t.Name, Column: col, Rows: uint64(len(rows)), Values: n})
			}
		}
	}
	return out, nil
}

// decodingBlocks are the ranges of the decoding section, by family name.
func (c *Config) decodingBlocks() map[string]uint64 {
	return map[string]uint64{SectionCometBFT: c.DecodingCometBFTBlocks, SectionEVM: c.DecodingEVMBlocks}
}
