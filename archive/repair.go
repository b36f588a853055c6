package archive

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/staging"
)

// RepairConfig says how Repair checks and refetches.
type RepairConfig struct {
	// Verify is the check run before and after the repair. Repair always
	// runs it deep (a record whose content does not hash to its staged hash
	// is wrong too) and lists every problem (MaxListed is ignored).
	Verify VerifyConfig
	// Refetch stages every missing height of [from, to] from the
	// configured source (loader.Fetch). Required.
	Refetch func(ctx context.Context, store *staging.Store, from, to uint64) error
	// Options opens the store (and the salvaged one).
	Options staging.Options
	// Now names the kept damaged directory; default time.Now.
	Now func() time.Time
}

// Salvage is what Repair did with a store whose Pebble files were damaged.
type Salvage struct {
	Reason  string `json:"reason"`  // why the store could not be read to its end
	Copied  uint64 `json:"copied"`  // readable records copied into the fresh store
	Lost    []Gap  `json:"lost"`    // heights that could not be read (refetched)
	Mirrors int    `json:"mirrors"` // target checkpoints copied
	// FromFiles is set when the records were read straight from Pebble's
	// files, without its MANIFEST (Pebble could not open the store, or
	// opened it without records the ledger says were staged); Files then
	// lists the files that could not be read in full.
	FromFiles bool                 `json:"from_files,omitempty"`
	Files     []staging.FileDamage `json:"damaged_files,omitempty"`
	// Damaged is where the old files were kept (DIR.damaged-<time>);
	// Removed is set when they were deleted because the new store
	// verified clean.
	Damaged string `json:"damaged"`
	Removed bool   `json:"removed"`
	// Duration is how long the salvage took: reading the old store and
	// writing the fresh one, not the verifies around it.
	Duration time.Duration `json:"duration_ns"`
}

// RepairReport is what the repair command prints.
type RepairReport struct {
	Dir     string         `json:"dir"`
	Before  *StagingReport `json:"before"`
	Salvage *Salvage       `json:"salvage,omitempty"`
	// Refetched are the ranges removed (when held) and fetched again.
	Refetched []Gap `json:"refetched"`
	// Failed names the ranges whose refetch failed, with the error.
	Failed []string       `json:"failed"`
	After  *StagingReport `json:"after"`
}

// Clean reports whether the store verified clean after the repair.
func (r *RepairReport) Clean() bool {
	return r.After != nil && r.After.Problems() == 0 && len(r.Failed) == 0
}

// Repair makes the store in dir whole again: it verifies it (deep), removes
// every corrupt, wrong or undecodable record and both blocks of every
// parent-hash break, refetches those heights and every gap from the
// configured source, and verifies again. A store whose Pebble files are
// damaged (the verify cannot read to the end) is first salvaged: every
// readable record is copied into a fresh store beside it, which is swapped
// in; the old files are kept as DIR.damaged-<time> until the new store
// verifies clean. A store whose MANIFEST is damaged or gone — Pebble cannot
// open it, or opens it without records its ledger says were staged — is
// salvaged the same way from its files read without the MANIFEST (see
// staging.OpenFiles): its tables, blob files and WAL. Every record copied
// passes the checks of any read (header, CRC-32C, decompression) and, with
// Verify.Recompute, its block hash; the rest is refetched.
//
// The error is nil when the store verified clean afterwards, a *DataError
// when something could not be repaired (the report says what), or another
// error when the repair could not run.
func Repair(ctx context.Context, dir string, cfg RepairConfig) (*RepairReport, error) {
	if cfg.Refetch == nil {
		return nil, errors.New("archive: repair: no source to refetch from")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	vcfg := cfg.Verify
	vcfg.Deep, vcfg.MaxListed = true, int(^uint(0)>>1)
	r := &RepairReport{Dir: dir, Refetched: []Gap{}, Failed: []string{}}

	ro := cfg.Options
	ro.ReadOnly = true
	old, err := staging.Open(dir, ro)
	var damaged string
	openErr := err
	switch {
	case err != nil:
		if !fromFiles(dir, err) {
			return nil, fmt.Errorf("archive: repair: %w", err)
		}
		r.Salvage = &Salvage{Reason: "Pebble cannot open the store: " + firstLine(err), Lost: []Gap{}, FromFiles: true}
	case old.Damage() != nil:
		r.Salvage = &Salvage{Reason: firstLine(old.Damage()), Lost: []Gap{}, FromFiles: true}
		old.Close()
	}
	if r.Salvage != nil {
		start := time.Now()
		damaged, err = salvageFiles(dir, &vcfg, cfg, r.Salvage)
		r.Salvage.Duration = time.Since(start)
		if err != nil {
			// The damage Pebble named stays the cause (exit 4).
			return r, fmt.Errorf("archive: repair: salvage %s: %w", dir, errors.Join(err, openErr))
		}
	} else {
		r.Before, err = Verify(old, vcfg)
		if err != nil {
			old.Close()
			return nil, fmt.Errorf("archive: repair: %w", err)
		}
		// Verify again over the range first checked, so that heights lost at
		// either end of the store count as gaps.
		if r.Before.From != nil {
			vcfg.From, vcfg.To, vcfg.FromSet, vcfg.ToSet = *r.Before.From, *r.Before.To, true, true
		}
		if r.Before.Unreadable != "" {
			r.Salvage = &Salvage{Reason: r.Before.Unreadable, Lost: []Gap{}}
			start := time.Now()
			damaged, err = salvage(dir, old, vcfg, cfg, r.Salvage)
			r.Salvage.Duration = time.Since(start)
			old.Close()
			if err != nil {
				return r, fmt.Errorf("archive: repair: salvage %s: %w", dir, err)
			}
		} else if err := old.Close(); err != nil {
			return nil, fmt.Errorf("archive: repair: %w", err)
		}
	}

	store, err := staging.Open(dir, cfg.Options)
	if err != nil {
		return r, fmt.Errorf("archive: repair: %w", err)
	}
	defer store.Close()
	found := r.Before
	if r.Salvage != nil || found == nil {
		if found, err = Verify(store, vcfg); err != nil {
			return r, fmt.Errorf("archive: repair: %w", err)
		}
	}
	drop, fetch := toRepair(found)
	for _, g := range drop {
		if err := store.Delete(g.From, g.To); err != nil {
			return r, fmt.Errorf("archive: repair: remove %d-%d: %w", g.From, g.To, err)
		}
	}
	for _, g := range fetch {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		r.Refetched = append(r.Refetched, g)
		if err := cfg.Refetch(ctx, store, g.From, g.To); err != nil {
			if ctx.Err() != nil {
				return r, err
			}
			r.Failed = append(r.Failed, fmt.Sprintf("%d-%d: %v", g.From, g.To, err))
		}
	}
	if err := store.Flush(); err != nil {
		return r, fmt.Errorf("archive: repair: %w", err)
	}
	if len(drop) == 0 && len(fetch) == 0 && found != r.Before {
		// Verified since the salvage, and nothing changed since.
		r.After = found
	} else if r.After, err = Verify(store, vcfg); err != nil {
		return r, fmt.Errorf("archive: repair: %w", err)
	}
	if !r.Clean() {
		n := r.After.Problems() + len(r.Failed)
		return r, &DataError{Check: "repair", Problems: max(n, 1)}
	}
	if damaged != "" {
		if err := os.RemoveAll(damaged); err != nil {
			return r, fmt.Errorf("archive: repair: remove the damaged copy %s: %w", damaged, err)
		}
		r.Salvage.Removed = true
	}
	return r, nil
}

// toRepair turns a verify report into the ranges to remove (records held
// but wrong) and the ranges to fetch (those and the gaps), each sorted and
// coalesced.
func toRepair(v *StagingReport) (drop, fetch []Gap) {
	var bad []uint64
	for _, list := range [][]Problem{v.Corrupt, v.WrongHash, v.Undecodable} {
		for _, p := range list {
			bad = append(bad, p.Height)
		}
	}
	// A break says one of two blocks is not the chain's; the source says
	// which.
	for _, b := range v.Breaks {
		bad = append(bad, b.Height-1, b.Height)
	}
	drop = coalesce(bad, nil)
	return drop, coalesce(bad, v.Gaps)
}

func coalesce(hs []uint64, gaps []Gap) []Gap {
	all := slices.Clone(gaps)
	for _, h := range hs {
		all = append(all, Gap{From: h, To: h})
	}
	slices.SortFunc(all, func(a, b Gap) int { return cmp.Compare(a.From, b.From) })
	var out []Gap
	for _, g := range all {
		if n := len(out); n > 0 && g.From <= out[n-1].To+1 {
			out[n-1].To = max(out[n-1].To, g.To)
			continue
		}
		out = append(out, g)
	}
	return out
}

// salvage copies every record of old (open read-only) that can be read into
// a fresh store beside dir, then swaps it in: dir becomes
// DIR.damaged-<time> and the fresh store dir. It returns the damaged
// directory's name.
func salvage(dir string, old *staging.Store, vcfg VerifyConfig, cfg RepairConfig, sv *Salvage) (string, error) {
	id, ok := old.Identity()
	if !ok {
		return "", fmt.Errorf("the store records no chain: nothing to salvage into")
	}
	ms, err := old.Mirrors()
	if err != nil {
		ms = nil // the records are worth more than the mirrors; export re-mirrors
	}
	nw, err := openFresh(dir, id, ms, cfg, sv)
	if err != nil {
		return "", err
	}
	defer nw.abandon()
	if cp, ok, err := old.Trust(); err == nil && ok {
		// The chain of trust's checkpoint goes with the records; heights
		// lost below it are staged again on their links.
		if err := nw.s.SetTrust(cp); err != nil {
			return "", err
		}
	}
	put := func(blk chain.Block) error {
		if err := rehash(vcfg, blk); err != nil {
			sv.lose(blk.Height)
			return nil
		}
		e, err := nw.s.Encode(blk)
		if err != nil {
			return err
		}
		return nw.put(e)
	}
	from, to := vcfg.From, vcfg.To
	// Scan while the iterator can go on; where it stops, read height by
	// height (a point read fails only for the heights of the damaged
	// block) until a run of heights reads again, then scan from there.
	const resumeAfter = 32
	next := from
	for next <= to {
		it, err := old.Scan(next, to)
		if err == nil {
			for it.Next() {
				blk := it.Block()
				if err := put(blk); err != nil {
					it.Close()
					return "", err
				}
				next = blk.Height + 1
			}
			err = it.Err()
			it.Close()
			if err == nil {
				break
			}
		}
		good := 0
		for ; next <= to && good < resumeAfter; next++ {
			blk, err := old.Get(next)
			switch {
			case errors.Is(err, staging.ErrNotFound):
				good++
			case err != nil:
				sv.lose(next)
				good = 0
			default:
				if err := put(blk); err != nil {
					return "", err
				}
				good++
			}
		}
	}
	return nw.swapIn(func() { old.Close() }) // read-only, nothing to lose
}

// salvageFiles copies every record that can be read from the files of the
// store in dir, read without its MANIFEST, into a fresh store beside it,
// which is swapped in as salvage does. The range verified and repaired
// afterwards (vcfg's, unless given) becomes the one the files and the
// store's identity and ledger say was staged.
func salvageFiles(dir string, vcfg *VerifyConfig, cfg RepairConfig, sv *Salvage) (string, error) {
	files, err := staging.OpenFiles(dir, cfg.Options)
	if err != nil {
		return "", err
	}
	defer files.Close()
	id, ok := files.Identity()
	if !ok {
		sv.Files = files.Damaged()
		return "", fmt.Errorf("the store's files record no chain (its identity is unreadable): nothing to salvage into")
	}
	lo, hi, any := files.Bounds()
	if id.FirstHash != nil && (!any || id.FirstHeight < lo) {
		lo, any = id.FirstHeight, true
	}
	if _, high, ok := files.Ledger(); ok && high > 0 && (!any || high > hi) {
		hi = high
		if !any {
			lo = high
		}
		any = true
	}
	if !vcfg.FromSet {
		vcfg.From, vcfg.FromSet = lo, any
	}
	if !vcfg.ToSet {
		vcfg.To, vcfg.ToSet = hi, any
	}
	nw, err := openFresh(dir, id, files.Mirrors(), cfg, sv)
	if err == nil {
		if cp, ok := files.Trust(); ok {
			err = nw.s.SetTrust(cp)
		}
	}
	if err != nil {
		return "", err
	}
	defer nw.abandon()
	next := vcfg.From
	if any {
		err = files.Records(vcfg.From, vcfg.To, func(h uint64, rec *staging.SalvageRecord, rerr error) error {
			if next < h {
				sv.loseRange(next, h-1)
			}
			next = h + 1
			if rerr == nil {
				rerr = rehash(*vcfg, rec.Block)
			}
			if rerr != nil {
				sv.lose(h)
				return nil
			}
			return nw.put(rec.Encoded)
		})
		if err != nil {
			return "", err
		}
		if next <= vcfg.To && next >= vcfg.From {
			sv.loseRange(next, vcfg.To)
		}
	}
	sv.Files = files.Damaged()
	return nw.swapIn(func() { files.Close() })
}

// rehash checks a salvaged block's hash against its content's, as a deep
// verify does (with Recompute; otherwise nil): a record that fails is
// refetched rather than copied.
func rehash(vcfg VerifyConfig, blk chain.Block) error {
	if vcfg.Recompute == nil {
		return nil
	}
	got, err := vcfg.Recompute(blk.Raw)
	if err == nil && !bytes.Equal(got, blk.Hash) {
		err = fmt.Errorf("staged hash %X, the record's header hashes to %X", blk.Hash, got)
	}
	return err
}

// lose records height h as not salvaged.
func (sv *Salvage) lose(h uint64) { sv.loseRange(h, h) }

// loseRange records heights [from, to] as not salvaged; called in height
// order.
func (sv *Salvage) loseRange(from, to uint64) {
	if n := len(sv.Lost); n > 0 && sv.Lost[n-1].To+1 == from {
		sv.Lost[n-1].To = to
	} else {
		sv.Lost = append(sv.Lost, Gap{From: from, To: to})
	}
}

// fresh is the store a salvage fills beside the damaged one.
type fresh struct {
	dir, path, stamp string
	s                *staging.Store
	b                *staging.Batch
	sv               *Salvage
}

// openFresh creates DIR.repair-<time> with the damaged store's identity
// (its first block too) and target checkpoints.
func openFresh(dir string, id staging.Identity, mirrors map[string]staging.Checkpoint, cfg RepairConfig, sv *Salvage) (*fresh, error) {
	stamp := cfg.Now().UTC().Format("20060102T150405Z")
	f := &fresh{dir: dir, path: dir + ".repair-" + stamp, stamp: stamp, sv: sv}
	if err := os.RemoveAll(f.path); err != nil {
		return nil, err
	}
	s, err := staging.Open(f.path, cfg.Options)
	if err != nil {
		return nil, err
	}
	f.s = s
	if err := s.Restore(id); err != nil {
		f.abandon()
		return nil, err
	}
	targets := slices.Sorted(maps.Keys(mirrors))
	for _, t := range targets {
		if err := s.SetMirror(t, mirrors[t]); err != nil {
			f.abandon()
			return nil, err
		}
		sv.Mirrors++
	}
	f.b = s.NewBatch()
	return f, nil
}

// put adds one record, committing every 8 MiB.
func (f *fresh) put(e staging.Encoded) error {
	if err := f.b.PutEncoded(e); err != nil {
		return err
	}
	f.sv.Copied++
	if f.b.Size() >= 8<<20 {
		return f.b.Commit()
	}
	return nil
}

// abandon removes the fresh store unless it was swapped in.
func (f *fresh) abandon() {
	if f.s == nil {
		return
	}
	if f.b != nil {
		f.b.Close()
	}
	f.s.Close()
	f.s = nil
	os.RemoveAll(f.path)
}

// swapIn commits and closes the fresh store, then makes it dir: dir becomes
// DIR.damaged-<time> once release has let go of its files. It returns the
// damaged directory's name.
func (f *fresh) swapIn(release func()) (string, error) {
	err := f.b.Commit()
	f.b.Close()
	f.b = nil
	if err != nil {
		return "", err
	}
	s := f.s
	f.s = nil
	if err := s.Close(); err != nil {
		os.RemoveAll(f.path)
		return "", err
	}
	release()
	damaged := f.dir + ".damaged-" + f.stamp
	if err := os.Rename(f.dir, damaged); err != nil {
		os.RemoveAll(f.path)
		return "", err
	}
	if err := os.Rename(f.path, f.dir); err != nil {
		// Put the old store back: nothing is lost.
		if rerr := os.Rename(damaged, f.dir); rerr != nil {
			return "", errors.Join(err, rerr)
		}
		return "", err
	}
	f.sv.Damaged = damaged
	return damaged, nil
}

// fromFiles reports whether a store that Pebble refused to open (err) is
// one to salvage from its files: the refusal is not the directory being in
// use or absent, and the directory holds Pebble's tables, blob files or
// WAL.
func fromFiles(dir string, err error) bool {
	var inUse *staging.InUseError
	if errors.As(err, &inUse) || errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "MANIFEST") {
		return false
	}
	ents, rerr := os.ReadDir(dir)
	if rerr != nil {
		return false
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".blob") || strings.HasSuffix(n, ".log") {
			return true
		}
	}
	return false
}

func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// WriteText writes the report for a terminal.
func (r *RepairReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "repair staging %s\n", r.Dir)
	if r.Before != nil {
		fmt.Fprintln(w, "before:")
		VerifyReport{Staging: r.Before}.WriteText(indent{w})
	}
	if s := r.Salvage; s != nil {
		lost := "none"
		if len(s.Lost) > 0 {
			lost = gapList(s.Lost, 10)
		}
		how := ""
		if s.FromFiles {
			how = ", read from its tables, blob files and WAL without the MANIFEST"
		}
		fmt.Fprintf(w, "salvaged a damaged store (%s)%s: %d readable records and %d target checkpoints copied into a fresh store in %s; unreadable: %s\n",
			s.Reason, how, s.Copied, s.Mirrors, s.Duration.Round(time.Millisecond), lost)
		for _, f := range s.Files {
			fmt.Fprintf(w, "  file %s: %s\n", f.File, f.Err)
		}
		if s.Removed {
			fmt.Fprintf(w, "  the damaged files (%s) were removed: the new store verified clean\n", s.Damaged)
		} else if s.Damaged != "" {
			fmt.Fprintf(w, "  the damaged files are kept in %s\n", s.Damaged)
		}
	}
	if len(r.Refetched) > 0 {
		fmt.Fprintf(w, "refetched: %s\n", gapList(r.Refetched, 20))
	} else {
		fmt.Fprintln(w, "refetched: nothing")
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "  refetch FAILED: %s\n", f)
	}
	if r.After != nil {
		fmt.Fprintln(w, "after:")
		VerifyReport{Staging: r.After}.WriteText(indent{w})
	}
	if r.Clean() {
		fmt.Fprintln(w, "result: repaired, clean")
	} else {
		fmt.Fprintln(w, "result: NOT repaired")
	}
}

// indent prefixes every line written with two spaces.
type indent struct{ w io.Writer }

func (i indent) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p)+16)
	start := true
	for _, c := range p {
		if start {
			out = append(out, ' ', ' ')
		}
		out = append(out, c)
		start = c == '\n'
	}
	if _, err := i.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
