package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"

	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
)

// Checks made before a job creates or drops anything: what can be refused
// up front is refused before the staging store, a schema, a backfill row or
// an index is touched, so that a refused job leaves nothing behind.

// checkStagingDirs refuses a --staging (or --merge-from) path that holds
// something other than a staging store, before Open writes into it.
func checkStagingDirs(cfg *Job) error {
	var fs []*FieldError
	var damaged error
	check := func(flag, dir string) {
		var ns *staging.NotStoreError
		var cs *staging.CorruptStoreError
		if err := staging.CheckDir(dir); errors.As(err, &ns) {
			fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: strings.TrimPrefix(ns.Error(), "staging: ")})
		} else if errors.As(err, &cs) {
			// A store whose MANIFEST is gone: damaged (exit 4), not
			// someone else's directory.
			damaged = err
		} else if err != nil {
			fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: err.Error()})
		}
	}
	// Repair is for a store whose MANIFEST may be gone: it writes only
	// beside the directory (a fresh store swapped in), and salvages only a
	// directory whose files record a chain.
	if cfg.Command != CmdChecksum && cfg.Command != CmdRepair && !cfg.MergeParts {
		check("staging", cfg.Staging)
	}
	if cfg.Command == CmdMerge && cfg.MergeFrom != "" {
		check("merge-from", cfg.MergeFrom)
	}
	if len(fs) > 0 {
		return &ConfigError{Fields: fs}
	}
	return damaged
}

// listenHTTP binds --http before anything else starts, so that an address
// in use is refused as bad input (status 2) rather than found after the
// store is open. It returns nil without --http.
func listenHTTP(cfg *Job) (net.Listener, error) {
	if cfg.HTTPAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, &ConfigError{Fields: []*FieldError{{Flag: "http", Env: EnvName("http"),
			Msg: fmt.Sprintf("cannot listen on %s: %v", cfg.HTTPAddr, err)}}}
	}
	return ln, nil
}

// checkStagedChain refuses a store that holds another chain family than
// --chain, as *staging.WrongChainError (status 4) from every command, before
// any schema is created for the wrong family. Without --chain the store's
// family is taken instead (and its schema, and its default memory limit,
// where those were the default's): it returns the job the store decides.
func checkStagedChain(cfg *Job, store *staging.Store, log *slog.Logger) (*Job, error) {
	fam := cfg.Family
	if id, ok := store.Identity(); ok && id.Family != fam.ID && !cfg.ChainSet {
		log.Info("the staging store holds another chain family than the default: taking it", "dir", store.Dir(), "chain", id.Family.String())
		held, err := cfg.withFamily(id.Family)
		if err != nil {
			return nil, err
		}
		if held == cfg {
			return cfg, nil
		}
		// The range starts at the family's first block unless --from
		// says otherwise (EnsureDefaults gave the default family's).
		if !held.FromSet {
			held.From = held.Family.Genesis
		}
		if held.MemoryLimitPerStream == DefaultMemoryLimitMiB(fam)<<20 {
			held.MemoryLimitPerStream = DefaultMemoryLimitMiB(held.Family) << 20
			debug.SetMemoryLimit(held.MemoryLimitPerStream)
		}
		return held, nil
	}
	if id, ok := store.Identity(); ok && id.Family != fam.ID {
		return nil, &staging.WrongChainError{Dir: store.Dir(),
			Have:  fmt.Sprintf("%s chain %q", id.Family, id.ChainID),
			Given: fmt.Sprintf("--chain %s", fam)}
	}
	return cfg, nil
}

// checkSyntheticMatches compares the lowest staged block with the one the
// synthetic chain of this invocation generates at its height: a store
// filled with another --synthetic-seed (or density) holds another chain,
// and a fetch must not call its range staged nor add blocks beside it.
// Generating one block asks no node; RPC sources are not asked here, so
// that a covered range stays a no-op that contacts nothing.
func checkSyntheticMatches(ctx context.Context, cfg *Job, store *staging.Store, tip func() uint64, log *slog.Logger) error {
	if len(cfg.RPC) > 0 || cfg.NodeHome != "" || cfg.Archive != "" || cfg.Source != nil {
		return nil
	}
	src, err := newSource(cfg, tip, log)
	if err != nil {
		return err
	}
	defer closeSource(src)
	lo, _, ok, err := store.Bounds()
	if err != nil || !ok {
		return err
	}
	have, _, err := store.Header(lo)
	if err != nil {
		return err
	}
	blocks, err := src.Fetch(ctx, lo, lo)
	if err != nil || len(blocks) != 1 {
		return nil // beyond this synthetic chain's tip: the fetch itself says so
	}
	if !bytes.Equal(blocks[0].Hash, have) {
		return &staging.WrongChainError{Dir: store.Dir(),
			Have:  fmt.Sprintf("block %d with hash %X", lo, have),
			Given: fmt.Sprintf("the synthetic chain of --synthetic-seed %d and these --synthetic-* parameters, whose block %d has hash %X", cfg.SyntheticSeed, lo, blocks[0].Hash)}
	}
	return nil
}

// checkDamage reports the store's damage (records lost from what was
// durably staged: a damaged MANIFEST or WAL, *staging.CorruptStoreError,
// status 4) before the coverage checks, when heights of the export's range
// are missing: those gaps are the damage, not a range never fetched (which
// would be bad input, status 2). A range the damage left whole exports.
func checkDamage(cfg *Job, store *staging.Store) error {
	d := store.Damage()
	if d == nil {
		return nil
	}
	to := cfg.To
	if !cfg.ToSet {
		// Without --to the range ends where staging does.
		_, hi, ok, err := store.Bounds()
		if err != nil {
			return err
		}
		if !ok || hi < cfg.From {
			return d // nothing of the range is left
		}
		to = hi
	}
	missing, err := store.Missing(cfg.From, to)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return d
	}
	return nil
}

// checkStagedRange refuses an export whose range is not staged, before the
// schema is created or an index dropped: a gap inside or at the end of the
// range would otherwise be found after the rows below it were exported. A
// range whose start alone is missing passes: those heights may have been
// exported and pruned, and the cursor, read later, says whether they are
// needed.
func checkStagedRange(cfg *Job, store *staging.Store) error {
	missing, err := store.Missing(cfg.From, cfg.To)
	if err != nil || len(missing) == 0 {
		return err
	}
	if len(missing) == 1 && missing[0].From == cfg.From && missing[0].To < cfg.To {
		return nil
	}
	parts := make([]string, 0, 3)
	var n uint64
	for i, r := range missing {
		n += r.Len()
		if i < 3 {
			parts = append(parts, r.String())
		}
	}
	list := strings.Join(parts, ", ")
	if len(missing) > 3 {
		list += fmt.Sprintf(" and %d more ranges", len(missing)-3)
	}
	return &ConfigError{Fields: []*FieldError{{Flag: "to", Env: EnvName("to"),
		Msg: fmt.Sprintf("%d heights of %d-%d are not staged in %s (%s): fetch them first, or export a staged range", n, cfg.From, cfg.To, store.Dir(), list)}}}
}

// checkRunSource refuses, before the schema, the backfill row or any
// index is touched, a run whose source serves another chain than the store
// holds (*staging.WrongChainError, status 4), whose --to lies above the
// chain's tip, or that holds no record of a missing height (a node home
// pruned below it: loader.RangeChecker, status 2). A range already staged asks the source nothing, so that a
// covered range stays a no-op that contacts no node even when it lags; a
// chain id or tip that cannot be read is left for the run to report where
// it always has.
func checkRunSource(ctx context.Context, cfg *Job, store *staging.Store, src loader.Source) error {
	if !cfg.ToSet {
		return nil
	}
	missing, err := store.Missing(cfg.From, cfg.To)
	if err != nil || len(missing) == 0 {
		return err
	}
	if id, ok := store.Identity(); ok {
		if chainID, err := src.ChainID(ctx); err == nil && chainID != id.ChainID {
			return &staging.WrongChainError{Dir: store.Dir(),
				Have:  fmt.Sprintf("%s chain %q", id.Family, id.ChainID),
				Given: fmt.Sprintf("the source's chain %q", chainID)}
		}
	}
	h, err := src.Tip(ctx)
	if err == nil && cfg.To > h {
		_, err := resolveTo(ctx, cfg, src)
		return err
	}
	// A source that can say which height it cannot serve (a node home
	// pruned below it) is asked now, before the schema is touched.
	for _, r := range missing {
		if err := checkRange(ctx, src, r.From, r.To); err != nil {
			return err
		}
	}
	return nil
}
