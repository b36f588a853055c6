package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
)

// Trust modes (--trust): what the chain of trust checks the signatures of.
const (
	TrustChanges = "changes" // the default: commits at validator-set changes and at every batch's end
	TrustEvery   = "every"   // every commit
	TrustOff     = "off"     // no chain of trust
)

// newProver opens the job's chain of trust over store for the records src
// serves: from the store's checkpoint when it has one, else from the root
// --trust-root names (the source's genesis by default). Nil when the job
// proves nothing: --trust off, a family without a chain of trust (EVM).
//
// Asked for (--trust or --trust-root given), a chain of trust that cannot
// start — no root at hand, heights between its proven end and from not
// staged — refuses the job (exit 2, saying what to give). By default it
// is run where it can start, and where it cannot the job goes on
// unproven, saying so in a warning (a node that serves no /genesis, a
// range that starts above it): status then says the store is not proven.
func newProver(ctx context.Context, cfg *Job, store *staging.Store, src loader.Source, from uint64, log *slog.Logger) (loader.Prover, error) {
	fam := cfg.Family
	if fam == nil || fam.Trust == nil || cfg.Trust == TrustOff {
		return nil, nil
	}
	cp, _, err := store.Trust()
	if err != nil {
		return nil, err
	}
	chainID, err := src.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("chain of trust: chain id: %w", err)
	}
	mode := cmp.Or(cfg.Trust, TrustChanges)
	asked := cfg.Trust != "" || cfg.TrustRoot != ""
	p, err := fam.Trust(ctx, src, family.TrustOptions{Mode: mode, Root: cfg.TrustRoot, Checkpoint: cp, ChainID: chainID})
	if err == nil && p != nil && p.Next() < from {
		gaps, merr := store.Missing(p.Next(), from-1)
		if merr != nil {
			return nil, merr
		}
		if len(gaps) > 0 {
			err = fault.Mark(fmt.Errorf("the chain of trust is proven up to block %d and heights %s below the range are not staged: "+
				"fetch from %d, or give a trust root at the range's start (--trust-root HEIGHT:HASH), or --trust off", p.Next()-1, gaps[0], p.Next()), fault.Config)
		}
	}
	if err != nil && !asked && ctx.Err() == nil && fault.Of(err) != fault.Data {
		log.Warn("the history this job stages is not proven: the chain of trust cannot start (give --trust-root to prove it, --trust off to say it need not be)", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fault.Mark(err, cmp.Or(fault.Of(err), fault.Config))
	}
	return p, nil
}

// withProver sets lc's chain of trust (newProver) for a fetch from from.
func withProver(ctx context.Context, cfg *Job, store *staging.Store, src loader.Source, from uint64, log *slog.Logger, lc *loader.Config) error {
	p, err := newProver(ctx, cfg, store, src, from, log)
	if err != nil {
		return err
	}
	lc.Prover = p
	return nil
}

// trustStatus says how far store's history is proven: "proven from genesis
// to height H", or that it is not.
func trustStatus(store *staging.Store) (TrustReport, error) {
	cp, ok, err := store.Trust()
	if err != nil || !ok {
		return TrustReport{}, err
	}
	id, bound := store.Identity()
	if !bound {
		return TrustReport{}, nil
	}
	fam := family.Of(id.Family)
	if fam == nil || fam.TrustProven == nil {
		return TrustReport{}, nil
	}
	h, root, err := fam.TrustProven(cp)
	if err != nil {
		return TrustReport{}, fmt.Errorf("staging: trust checkpoint: %w", err)
	}
	return TrustReport{Proven: true, Height: h, Root: root}, nil
}

// TrustReport is how far a store's history is proven.
type TrustReport struct {
	Proven bool   `json:"proven"`
	Height uint64 `json:"height,omitempty"` // the last height proven
	Root   string `json:"root,omitempty"`   // the trust root: "genesis", or the trusted header
}

func (r TrustReport) String() string {
	if !r.Proven {
		return "not proven (no chain of trust has run over this store: verify proves it)"
	}
	return fmt.Sprintf("proven from %s to height %d", r.Root, r.Height)
}

// proveStore runs the chain of trust over store's staged history again
// from its root (the root the store's checkpoint keeps, or --trust-root),
// offline: every staged record from the root's height up, the last proven
// height by the proof the checkpoint keeps. It returns the report and,
// when it proved beyond the store's checkpoint, the checkpoint to record.
func proveStore(ctx context.Context, cfg *Job, store *staging.Store) (*archive.TrustReport, []byte, error) {
	id, ok := store.Identity()
	if !ok {
		return nil, nil, nil
	}
	fam := family.Of(id.Family)
	if fam == nil || fam.Trust == nil || cfg.Trust == TrustOff {
		return nil, nil, nil
	}
	cp, has, err := store.Trust()
	if err != nil {
		return nil, nil, err
	}
	if !has && cfg.TrustRoot == "" {
		return &archive.TrustReport{Skipped: "no chain of trust has run over this store; give --trust-root (the chain's genesis.json) to prove it"}, nil, nil
	}
	p, err := fam.Trust(ctx, nil, family.TrustOptions{Mode: cfg.Trust, Root: cfg.TrustRoot, Checkpoint: cp, FromRoot: true, ChainID: id.ChainID})
	if err != nil || p == nil {
		return nil, nil, err
	}
	var storedProof []byte
	var storedHeight uint64
	if has && cfg.TrustRoot == "" {
		if pp, ok := p.(interface{ Proof() []byte }); ok {
			storedProof = pp.Proof()
		}
		if storedHeight, _, err = fam.TrustProven(cp); err != nil {
			return nil, nil, err
		}
	}
	mode := cfg.Trust
	if mode == "" {
		mode = TrustChanges
	}
	r := &archive.TrustReport{Mode: mode}
	start := p.Next()
	if r.Root, err = rootOf(fam, p); err != nil {
		return nil, nil, err
	}
	// Records are proven in chunks, each by the first record of the next.
	const chunk = 1024
	var recs [][]byte
	h := start
	fail := func(err error) (*archive.TrustReport, []byte, error) {
		if fault.Of(err) != fault.Data {
			return nil, nil, err
		}
		r.Failed = err.Error()
		return r, nil, nil
	}
	proven := func(to uint64) {
		r.From, r.Proven = &start, &to
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		b, err := store.Get(h)
		if errors.Is(err, staging.ErrNotFound) {
			break
		}
		if err != nil {
			// A damaged record: the staging check reports it; the chain
			// of trust stops below it.
			r.Unproven = fmt.Sprintf("block %d cannot be read: %v", h, err)
			recs = recs[:0]
			break
		}
		recs = append(recs, b.Raw)
		h++
		if len(recs) == chunk+1 {
			if err := p.Prove(recs[:chunk], recs[chunk]); err != nil {
				return fail(err)
			}
			proven(h - 2)
			recs = recs[chunk:]
		}
	}
	last := h - 1
	switch {
	case r.Unproven != "": // stopped at a damaged record, which the staging check reports
	case len(recs) == 0:
		r.Unproven = fmt.Sprintf("block %d is not staged", start)
	case storedProof != nil && last == storedHeight:
		if err := p.Prove(recs, storedProof); err != nil {
			return fail(err)
		}
		proven(last)
	default:
		if len(recs) > 1 {
			if err := p.Prove(recs[:len(recs)-1], recs[len(recs)-1]); err != nil {
				return fail(err)
			}
			proven(last - 1)
		}
		r.Unproven = fmt.Sprintf("block %d: its commit is in block %d, which is not staged (a fetch that reaches it proves it)", last, last+1)
	}
	if r.Proven == nil || (has && *r.Proven <= storedHeight && cfg.TrustRoot == "") {
		return r, nil, nil
	}
	ncp, err := p.Checkpoint()
	return r, ncp, err
}

// rootOf describes the root a fresh chain of trust starts from.
func rootOf(fam *family.Family, p loader.Prover) (string, error) {
	cp, err := p.Checkpoint()
	if err != nil {
		return "", err
	}
	_, root, err := fam.TrustProven(cp)
	return root, err
}

// recordTrust writes a chain-of-trust checkpoint into the store at dir;
// false when another process holds it now.
func recordTrust(dir string, cp []byte) (bool, error) {
	store, err := staging.Open(dir, staging.Options{})
	var iu *staging.InUseError
	if errors.As(err, &iu) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer store.Close()
	if err := store.SetTrust(cp); err != nil {
		return false, err
	}
	return true, nil
}
