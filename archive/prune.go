package archive

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// StreamMirror is one stream's checkpoint as mirrored into staging.
type StreamMirror struct {
	Stream string `json:"stream"`
	From   uint64 `json:"from"` // first height of its rows (assumed: the lowest staged height, in mirrors that predate recording it)
	Height uint64 `json:"height"`
}

// TargetCoverage is what one export target (a database and schema) has
// exported: its streams' checkpoints as the target itself gives them when
// it confirmed them, else as mirrored into staging.
type TargetCoverage struct {
	Target  string         `json:"target"`
	Streams []StreamMirror `json:"streams"`
	// Confirmed is whether the target itself confirmed its checkpoints
	// and the rows under them; Found is what it said instead when not.
	Confirmed bool   `json:"confirmed"`
	Found     string `json:"found,omitempty"`
	// Missing is the first run of staged heights below the prune height
	// that this target has not exported; nil when it has them all.
	Missing *Gap `json:"missing,omitempty"`
}

// HeldRange is a run of staged heights and the targets that have exported
// every one of them (none: they are nowhere but in the store).
type HeldRange struct {
	From    uint64   `json:"from"`
	To      uint64   `json:"to"`
	Targets []string `json:"targets"`
}

// PruneReport is what Prune found and did (or, for a dry run, would do).
type PruneReport struct {
	Dir     string `json:"dir"`
	Below   uint64 `json:"below"`
	Heights uint64 `json:"heights"` // staged heights below Below: what a prune deletes
	// RecordBytes is what the records of those heights take as stored.
	RecordBytes uint64           `json:"record_bytes"`
	Held        []HeldRange      `json:"held"` // those heights, by the targets that hold them
	Targets     []TargetCoverage `json:"targets"`
	// Refusal is why a prune without --force is refused; "" when it is
	// not.
	Refusal  string        `json:"refusal,omitempty"`
	DryRun   bool          `json:"dry_run"`
	Forced   bool          `json:"forced"`
	Pruned   bool          `json:"pruned"`
	Before   staging.Size  `json:"before"`
	After    staging.Size  `json:"after"`
	Duration time.Duration `json:"duration_ns"`
}

// PruneRefusedError is a prune refused because staged heights below the
// prune height are not exported: by any target (Target empty: they are
// nowhere but in the store), or by a target recorded in the store, which
// could not export them again once they were gone.
type PruneRefusedError struct {
	Below   uint64
	Target  string // "" when no target has exported Missing
	Streams []StreamMirror
	Missing Gap
	// Unexported counts the staged heights below Below no target has
	// exported, and Checkpoints lists every target's (Target empty).
	Unexported  uint64
	Checkpoints []TargetCoverage
}

func (e *PruneRefusedError) Error() string {
	var cps []string
	for _, s := range e.Streams {
		cps = append(cps, fmt.Sprintf("%s %d-%d", s.Stream, s.From, s.Height))
	}
	if e.Target == "" {
		held := "the store mirrors no target's checkpoint"
		if len(e.Checkpoints) > 0 {
			var ts []string
			for _, t := range e.Checkpoints {
				var ss []string
				for _, s := range t.Streams {
					ss = append(ss, fmt.Sprintf("%s %d-%d", s.Stream, s.From, s.Height))
				}
				ts = append(ts, fmt.Sprintf("target %s: %s", t.Target, strings.Join(ss, ", ")))
			}
			held = "the checkpoints the store mirrors: " + strings.Join(ts, "; ")
		}
		return fmt.Sprintf("archive: prune below %d refused: no target has exported heights %d-%d (%s below %d in all; %s), so they are nowhere else; export them first, or --force (--dry-run shows what a prune deletes)",
			e.Below, e.Missing.From, e.Missing.To, Quantity(int(e.Unexported), "height"), e.Below, held)
	}
	return fmt.Sprintf("archive: prune below %d refused: target %s has not exported heights %d-%d (its checkpoints: %s); export them first, or --force",
		e.Below, e.Target, e.Missing.From, e.Missing.To, strings.Join(cps, ", "))
}

// Fault marks the error as a configuration error (exit 2): nothing was deleted.
func (e *PruneRefusedError) Fault() fault.Class { return fault.Config }

// PruneOptions is what Prune deletes and how it confirms it with the
// targets.
type PruneOptions struct {
	Below         uint64
	Force, DryRun bool
	// Reach connects to a target's database; an error says why it cannot
	// (nil Reach: no target can be reached).
	Reach func(ctx context.Context, t TargetRef) (*pgx.Conn, error)
	// Blocks is the family's blocks table, whose rows are counted under
	// each checkpoint.
	Blocks chain.Table
	// Family and ChainID are the store's chain, checked against the
	// schema's record of its chain.
	Family, ChainID string
}

// Prune deletes the blocks staged below o.Below, then compacts, after
// checking what each target whose checkpoint the store mirrors holds,
// asking the target itself: a target that cannot be reached or does not
// confirm its mirrored checkpoints (gone, reset, behind the mirror, rows
// missing under them) is refused first (*PruneUnconfirmedError), then
// heights no confirmed target has exported, then a target that has not
// exported each of them (either a *PruneRefusedError), unless o.Force. A
// dry run reports the same and deletes nothing, and returns the refusal a
// prune would.
func Prune(ctx context.Context, store *staging.Store, o PruneOptions) (*PruneReport, error) {
	below, force, dryRun := o.Below, o.Force, o.DryRun
	start := time.Now()
	r := &PruneReport{Dir: store.Dir(), Below: below, Forced: force, DryRun: dryRun, Targets: []TargetCoverage{}, Held: []HeldRange{}}
	var err error
	if r.Before, err = store.Size(); err != nil {
		return nil, err
	}
	r.After = r.Before
	if below == 0 {
		return r, nil
	}
	staged, err := store.Staged(0, below-1)
	if err != nil {
		return nil, err
	}
	for _, s := range staged {
		r.Heights += s.Len()
	}
	if _, r.RecordBytes, err = store.RecordBytes(0, below-1); err != nil {
		return nil, err
	}
	mirrors, err := store.Mirrors()
	if err != nil {
		return nil, err
	}
	var lowest uint64
	if len(staged) > 0 {
		lowest = staged[0].From
	}
	byTarget := map[string][]StreamMirror{}
	for name, cp := range mirrors {
		target, stream := splitTarget(name)
		from := cp.From
		if from == 0 {
			from = lowest
		}
		byTarget[target] = append(byTarget[target], StreamMirror{Stream: stream, From: from, Height: cp.Height})
	}
	names := make([]string, 0, len(byTarget))
	for t := range byTarget {
		names = append(names, t)
	}
	sort.Strings(names)
	var unconfirmed *PruneUnconfirmedError
	var refused *PruneRefusedError
	confirmed := names[:0:0]
	for _, t := range names {
		streams := byTarget[t]
		sort.Slice(streams, func(i, j int) bool { return streams[i].From < streams[j].From })
		tc := TargetCoverage{Target: t, Streams: streams}
		if r.Heights > 0 {
			own, found, err := confirm(ctx, t, streams, o)
			if err != nil {
				return nil, err
			}
			if found != "" {
				tc.Found = found
				if unconfirmed == nil {
					unconfirmed = &PruneUnconfirmedError{Below: below, Target: t, Found: found}
				}
				r.Targets = append(r.Targets, tc)
				continue
			}
			sort.Slice(own, func(i, j int) bool { return own[i].From < own[j].From })
			tc.Streams, byTarget[t] = own, own
		}
		tc.Confirmed = true
		confirmed = append(confirmed, t)
		if g, ok := firstUncovered(staged, tc.Streams); ok {
			tc.Missing = &g
			if refused == nil {
				refused = &PruneRefusedError{Below: below, Target: t, Streams: tc.Streams, Missing: g}
			}
		}
		r.Targets = append(r.Targets, tc)
	}
	r.Held = heldBy(staged, confirmed, byTarget)
	var none *PruneRefusedError
	for _, h := range r.Held {
		if len(h.Targets) > 0 {
			continue
		}
		if none == nil {
			none = &PruneRefusedError{Below: below, Checkpoints: r.Targets, Missing: Gap{From: h.From, To: h.To}}
		}
		none.Unexported += h.To - h.From + 1
	}
	var refusal error
	switch {
	case unconfirmed != nil:
		refusal = unconfirmed
	case none != nil:
		refusal = none
	case refused != nil:
		refusal = refused
	}
	if refusal != nil {
		r.Refusal = refusal.Error()
	}
	if dryRun || refusal != nil && !force {
		r.Duration = time.Since(start)
		if refusal != nil && !force {
			return r, refusal
		}
		return r, nil
	}
	if err := store.Prune(ctx, below); err != nil {
		return r, err
	}
	r.Pruned = true
	if r.After, err = store.Size(); err != nil {
		return r, err
	}
	r.Duration = time.Since(start)
	return r, nil
}

// confirm asks target itself for the checkpoints of the streams the store
// mirrors (see confirmTarget); found says what it found instead, or why it
// could not be asked.
func confirm(ctx context.Context, target string, mirrored []StreamMirror, o PruneOptions) (own []StreamMirror, found string, err error) {
	ref, ok := ParseTarget(target)
	if !ok {
		return nil, "the store names it in a form prune cannot reach", nil
	}
	if o.Reach == nil {
		return nil, "not reached: no database to ask", nil
	}
	conn, err := o.Reach(ctx, ref)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "not reached: " + err.Error(), nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	own, found, err = confirmTarget(ctx, conn, ref, mirrored, o.Below, o)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, err.Error(), nil
	}
	return own, found, nil
}

// heldBy splits the staged ranges into runs of heights held by the same
// targets (a target holds a height one of its streams covers).
func heldBy(staged []staging.Range, names []string, byTarget map[string][]StreamMirror) []HeldRange {
	var out []HeldRange
	holders := func(h uint64) []string {
		var ts []string
		for _, t := range names {
			for _, s := range byTarget[t] {
				if s.From <= h && h <= s.Height {
					ts = append(ts, t)
					break
				}
			}
		}
		return ts
	}
	for _, rg := range staged {
		// The heights where what holds them can change.
		cuts := []uint64{rg.From}
		for _, t := range names {
			for _, s := range byTarget[t] {
				for _, c := range []uint64{s.From, s.Height + 1} {
					if c > rg.From && c <= rg.To {
						cuts = append(cuts, c)
					}
				}
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		for i, c := range cuts {
			end := rg.To
			if i+1 < len(cuts) {
				end = cuts[i+1] - 1
			}
			ts := holders(c)
			if ts == nil {
				ts = []string{}
			}
			if n := len(out); n > 0 && out[n-1].To+1 == c && slices.Equal(out[n-1].Targets, ts) {
				out[n-1].To = end
				continue
			}
			out = append(out, HeldRange{From: c, To: end, Targets: ts})
		}
	}
	return out
}

// splitTarget splits a mirror name (export.TargetName:
// pg:<cluster>/<database>/<schema>/<stream>) into the database-and-schema
// part and the stream.
func splitTarget(name string) (target, stream string) {
	parts := strings.SplitN(name, "/", 4)
	if len(parts) < 4 {
		return name, ""
	}
	return strings.Join(parts[:3], "/"), parts[3]
}

// firstUncovered returns the first run of staged heights that no stream's
// [From, Height] covers.
func firstUncovered(staged []staging.Range, streams []StreamMirror) (Gap, bool) {
	covered := func(h uint64) (uint64, bool) { // the last height covered from h on
		best, ok := uint64(0), false
		for _, s := range streams {
			if s.From <= h && h <= s.Height && (!ok || s.Height > best) {
				best, ok = s.Height, true
			}
		}
		return best, ok
	}
	for _, rg := range staged {
		h := rg.From
		for h <= rg.To {
			end, ok := covered(h)
			if !ok {
				// Uncovered from h to the next stream start or the range end.
				to := rg.To
				for _, s := range streams {
					if s.From > h && s.From-1 < to {
						to = s.From - 1
					}
				}
				return Gap{From: h, To: to}, true
			}
			if end >= rg.To {
				break
			}
			h = end + 1
		}
	}
	return Gap{}, false
}

// WriteText writes the report for a terminal.
func (r *PruneReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "prune staging %s below %d: %s below it, %s of records\n", r.Dir, r.Below, Quantity(int(r.Heights), "staged height"), staging.MB(r.RecordBytes))
	for i, h := range r.Held {
		if i == 20 {
			fmt.Fprintf(w, "  … %s more\n", Quantity(len(r.Held)-i, "range"))
			break
		}
		who := "no target has exported them"
		for _, t := range r.Targets {
			if t.Found != "" {
				who = "no target confirms it has exported them"
			}
		}
		if len(h.Targets) > 0 {
			who = "exported by " + strings.Join(h.Targets, ", ")
		}
		fmt.Fprintf(w, "  heights %d-%d: %s\n", h.From, h.To, who)
	}
	for _, t := range r.Targets {
		state := "has exported them"
		switch {
		case t.Found != "":
			state = "could NOT confirm its mirrored checkpoints: " + t.Found
		case t.Missing != nil:
			state = fmt.Sprintf("has NOT exported %d-%d", t.Missing.From, t.Missing.To)
		case t.Confirmed && r.Heights > 0:
			state += " (its own checkpoints and rows confirm it)"
		}
		fmt.Fprintf(w, "  target %s %s\n", t.Target, state)
		for _, s := range t.Streams {
			fmt.Fprintf(w, "    stream %s %d-%d\n", s.Stream, s.From, s.Height)
		}
	}
	switch {
	case r.DryRun:
		what := "a prune"
		switch {
		case r.Refusal != "" && !r.Forced:
			fmt.Fprintln(w, "  a prune is refused (see below)")
			what = "a prune --force"
		case r.Forced:
			what = "a prune --force"
		}
		fmt.Fprintf(w, "  dry run: nothing deleted; %s would delete %s, %s of records (the store: %s)\n",
			what, Quantity(int(r.Heights), "height"), staging.MB(r.RecordBytes), r.Before)
	case r.Pruned:
		forced := ""
		if r.Forced {
			forced = " (forced)"
		}
		fmt.Fprintf(w, "  pruned%s: %s deleted, %s of records\n  before: %s\n  after:  %s\n", forced, Quantity(int(r.Heights), "height"), staging.MB(r.RecordBytes), r.Before, r.After)
		if r.Forced && r.Refusal != "" {
			fmt.Fprintf(w, "  forced past a refusal; the heights deleted may have been the only copy: %s\n", r.Refusal)
		}
	default:
		fmt.Fprintln(w, "  nothing deleted")
	}
}
