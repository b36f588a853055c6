package archive

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/staging"
)

// StreamMirror is one stream's checkpoint as mirrored into staging.
type StreamMirror struct {
	Stream string `json:"stream"`
	From   uint64 `json:"from"` // first height of its rows (assumed: the lowest staged height, in mirrors that predate recording it)
	Height uint64 `json:"height"`
}

// TargetCoverage is what one export target (a database and schema) has
// exported, from the checkpoints its streams mirrored into staging.
type TargetCoverage struct {
	Target  string         `json:"target"`
	Streams []StreamMirror `json:"streams"`
	// Missing is the first run of staged heights below the prune height
	// that this target has not exported; nil when it has them all.
	Missing *Gap `json:"missing,omitempty"`
}

// PruneReport is what Prune found and did.
type PruneReport struct {
	Dir         string           `json:"dir"`
	Below       uint64           `json:"below"`
	Heights     uint64           `json:"heights"` // staged heights below Below
	Targets     []TargetCoverage `json:"targets"`
	Forced      bool             `json:"forced"`
	Pruned      bool             `json:"pruned"`
	BytesBefore int64            `json:"bytes_before"`
	BytesAfter  int64            `json:"bytes_after"`
	Duration    time.Duration    `json:"duration_ns"`
}

// PruneRefusedError is a prune refused because a target recorded in the
// store has not exported every staged height below the prune height.
type PruneRefusedError struct {
	Below   uint64
	Target  string
	Streams []StreamMirror
	Missing Gap
}

func (e *PruneRefusedError) Error() string {
	var cps []string
	for _, s := range e.Streams {
		cps = append(cps, fmt.Sprintf("%s %d-%d", s.Stream, s.From, s.Height))
	}
	return fmt.Sprintf("archive: prune below %d refused: target %s has not exported heights %d-%d (its checkpoints: %s); export them first, or --force",
		e.Below, e.Target, e.Missing.From, e.Missing.To, strings.Join(cps, ", "))
}

// Prune deletes the blocks staged below below, after checking that every
// target whose checkpoint the store mirrors has exported each of them
// (unless force), then compacts. It refuses with a *PruneRefusedError
// naming the first target that lags, and its checkpoints.
func Prune(ctx context.Context, store *staging.Store, below uint64, force bool) (*PruneReport, error) {
	start := time.Now()
	r := &PruneReport{Dir: store.Dir(), Below: below, Forced: force, Targets: []TargetCoverage{}}
	r.BytesBefore = int64(store.DiskUsage().Allocated)
	if below == 0 {
		r.BytesAfter = r.BytesBefore
		return r, nil
	}
	staged, err := store.Staged(0, below-1)
	if err != nil {
		return nil, err
	}
	for _, s := range staged {
		r.Heights += s.Len()
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
	var refused *PruneRefusedError
	for _, t := range names {
		streams := byTarget[t]
		sort.Slice(streams, func(i, j int) bool { return streams[i].From < streams[j].From })
		tc := TargetCoverage{Target: t, Streams: streams}
		if g, ok := firstUncovered(staged, streams); ok {
			tc.Missing = &g
			if refused == nil {
				refused = &PruneRefusedError{Below: below, Target: t, Streams: streams, Missing: g}
			}
		}
		r.Targets = append(r.Targets, tc)
	}
	if refused != nil && !force {
		r.BytesAfter = r.BytesBefore
		r.Duration = time.Since(start)
		return r, refused
	}
	if err := store.Prune(ctx, below); err != nil {
		return r, err
	}
	r.Pruned = true
	r.BytesAfter = int64(store.DiskUsage().Allocated)
	r.Duration = time.Since(start)
	return r, nil
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
func (r *PruneReport) WriteText(w interface{ Write([]byte) (int, error) }) {
	fmt.Fprintf(w, "prune staging %s below %d: %d staged heights below it\n", r.Dir, r.Below, r.Heights)
	for _, t := range r.Targets {
		state := "has exported them"
		if t.Missing != nil {
			state = fmt.Sprintf("has NOT exported %d-%d", t.Missing.From, t.Missing.To)
		}
		fmt.Fprintf(w, "  target %s %s\n", t.Target, state)
		for _, s := range t.Streams {
			fmt.Fprintf(w, "    stream %s %d-%d\n", s.Stream, s.From, s.Height)
		}
	}
	switch {
	case r.Pruned && r.Forced:
		fmt.Fprintf(w, "  pruned (forced): %.1f MB -> %.1f MB on disk\n", float64(r.BytesBefore)/1e6, float64(r.BytesAfter)/1e6)
	case r.Pruned:
		fmt.Fprintf(w, "  pruned: %.1f MB -> %.1f MB on disk\n", float64(r.BytesBefore)/1e6, float64(r.BytesAfter)/1e6)
	default:
		fmt.Fprintln(w, "  nothing deleted")
	}
}
