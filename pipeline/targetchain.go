package pipeline

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// checkTargetChain refuses a job whose chain is not the one the target
// schema holds (*export.WrongChainError, status 4) before it writes
// anything: no schema change, backfill row, dropped index or staged block.
// The job's chain is the one staging holds; a store that holds none yet (a
// run's new store) is claimed by src, which is asked its chain id. The
// blocks compared with the schema's (its recorded block, or for a schema an
// older blockhaul wrote, the lowest rows of its blocks table the job's
// chain can tell) are read from staging, and from src when staging does
// not hold them and the job is to fetch anyway (src not nil): a range
// already staged asks no node. Export checks again, against staging, in
// the transaction of its first batch.
func checkTargetChain(ctx context.Context, cfg *Job, db *export.Session, store *staging.Store, dec export.Decoder, src loader.Source, log *slog.Logger) error {
	claim, staged, err := export.StagedClaim(store)
	if err != nil {
		return err
	}
	if src != nil && cfg.ToSet {
		if m, err := store.Missing(cfg.From, cfg.To); err != nil {
			return err
		} else if len(m) == 0 {
			src = nil // staged: the source is not asked
		}
	}
	if !staged {
		if src == nil {
			return nil // nothing staged, nothing to fetch: nothing to write
		}
		chainID, err := src.ChainID(ctx)
		if err != nil {
			return fmt.Errorf("read chain id: %w", err)
		}
		claim = export.Claim{Family: src.Family(), ChainID: chainID, Where: sourceName(cfg)}
	}
	if src != nil {
		lo, hi := cfg.From, cfg.To
		if !cfg.ToSet {
			hi = 1<<63 - 1
		}
		if !staged || claim.Hi == 0 {
			claim.Lo, claim.Hi = lo, hi
		} else {
			claim.Lo, claim.Hi = min(claim.Lo, lo), max(claim.Hi, hi)
		}
		stagedHash := export.StagedHash(store)
		claim.Hash = func(ctx context.Context, h uint64) ([]byte, bool, error) {
			if hash, ok, err := stagedHash(ctx, h); err != nil || ok {
				return hash, ok, err
			}
			blocks, err := src.Fetch(ctx, h, h)
			if err != nil || len(blocks) != 1 {
				// Pruned by the node, above its tip, or not answered: the
				// chain id was compared, and export compares staged blocks.
				log.Info("block not read from the source to compare with the target schema's", "height", h, "err", err)
				return nil, false, nil
			}
			return blocks[0].Hash, true, nil
		}
	}
	return db.Do(ctx, "check the chain of "+cfg.Schema, func(ctx context.Context, conn *pgx.Conn) error {
		return export.CheckChain(ctx, conn, cfg.Schema, export.AllTables(dec), claim)
	})
}

// checkTargetFamily refuses, before the target tables' shape is compared
// with the job's, a schema that records a chain of another family than the
// job's: another family's tables differ in every column, and a list of
// them would hide that the schema holds another chain (*export.WrongChainError,
// as for another chain of the same family).
func checkTargetFamily(ctx context.Context, cfg *Job, db *export.Session, store *staging.Store, src loader.Source) error {
	claim, staged, err := export.StagedClaim(store)
	if err != nil {
		return err
	}
	if !staged {
		if src == nil {
			return nil
		}
		claim = export.Claim{Family: src.Family(), Where: sourceName(cfg)}
	}
	var rec export.ChainRecord
	var ok bool
	if err := db.Do(ctx, "read the chain of "+cfg.Schema, func(ctx context.Context, conn *pgx.Conn) (err error) {
		rec, ok, err = export.ReadChainRecord(ctx, conn, cfg.Schema)
		return err
	}); err != nil || !ok || rec.Family == claim.Family.String() {
		return err
	}
	if !staged {
		// Named in the refusal; a source that cannot say still has a
		// family that is not the schema's.
		if id, err := src.ChainID(ctx); err == nil {
			claim.ChainID = id
		}
	}
	return &export.WrongChainError{Schema: cfg.Schema, Have: rec.String(), Given: claim.String()}
}

// sourceName names the job's source in errors, without an endpoint (whose
// URL may hold a credential).
func sourceName(cfg *Job) string {
	switch {
	case cfg.Source != nil:
		return "the source"
	case len(cfg.RPC) > 0:
		return "the --rpc endpoints"
	}
	return fmt.Sprintf("--synthetic-seed %d", cfg.SyntheticSeed)
}
