package archive

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// ChecksumReport is what the checksum command prints: one digest, or two
// and where they differ.
type ChecksumReport struct {
	A           Digest       `json:"a"`
	B           *Digest      `json:"b,omitempty"`
	Differences []Difference `json:"differences"`
	// StreamsDiffer notes that the bookkeeping rows differ. It is not a
	// difference of data: two databases holding the same rows may have
	// been filled by different streams.
	StreamsDiffer bool `json:"streams_differ,omitempty"`
	// Decoders are the decoder options taken from what the schema
	// records (not given on the command line).
	Decoders []string `json:"decoders_recorded,omitempty"`
}

// Equal reports whether the report found no difference of data.
func (r ChecksumReport) Equal() bool { return len(r.Differences) == 0 }

// NotCompared are the tables of either schema that were not digested.
func (r ChecksumReport) NotCompared() []string {
	out := slices.Clone(r.A.NotCompared)
	if r.B != nil {
		for _, t := range r.B.NotCompared {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

// writeDecoders says which decoder options came from the schema's record.
func writeDecoders(w io.Writer, took []string) {
	if len(took) > 0 {
		fmt.Fprintf(w, "  decoding as the schema records it was exported: %s\n", strings.Join(took, ", "))
	}
}

// writeNotCompared lists tables not compared, and why.
func writeNotCompared(w io.Writer, width int, tables []string) {
	for _, t := range tables {
		fmt.Fprintf(w, "  %-*s NOT COMPARED: %s\n", width, t, UnknownTable)
	}
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteText writes the report for a terminal.
func (r ChecksumReport) WriteText(w io.Writer) {
	span := "all heights"
	if r.A.From != nil {
		span = fmt.Sprintf("heights %d-%d", *r.A.From, *r.A.To)
	}
	if r.B == nil {
		fmt.Fprintf(w, "checksum of schema %s, %s, chunks of %d heights (%.1fs)\n", r.A.Schema, span, r.A.Chunk, r.A.Duration.Seconds())
		writeDecoders(w, r.Decoders)
		width := tableWidth(r.A.Tables)
		for _, t := range r.A.Tables {
			fmt.Fprintf(w, "  %-*s %12d rows  digest %s  (%s)\n", width, t.Table, t.Rows, t.Digest, Quantity(len(t.Chunks), "chunk"))
		}
		writeNotCompared(w, width, r.A.NotCompared)
		writeStreams(w, "", r.A.Streams)
		if n := len(r.A.NotCompared); n > 0 {
			fmt.Fprintf(w, "result: not clean: %s of the schema not digested (above)\n", Quantity(n, "table"))
		}
		return
	}
	fmt.Fprintf(w, "checksum of schema %s (A) against %s (B), %s, chunks of %d heights (%.1fs, %.1fs)\n",
		r.A.Schema, r.B.Schema, span, r.A.Chunk, r.A.Duration.Seconds(), r.B.Duration.Seconds())
	writeDecoders(w, r.Decoders)
	byTable := map[string]int{}
	for _, d := range r.Differences {
		byTable[d.Table]++
	}
	width := tableWidth(r.A.Tables)
	for i, t := range r.A.Tables {
		tb := r.B.Tables[i]
		if n := byTable[t.Table]; n > 0 {
			fmt.Fprintf(w, "  %-*s DIFFERENT in %s: A %d rows %s, B %d rows %s\n", width, t.Table, Quantity(n, "chunk"), t.Rows, t.Digest, tb.Rows, tb.Digest)
		} else {
			fmt.Fprintf(w, "  %-*s equal: %d rows, digest %s\n", width, t.Table, t.Rows, t.Digest)
		}
	}
	for _, d := range r.Differences {
		fmt.Fprintf(w, "  differs: %s heights %d-%d: %s\n", d.Table, d.From, d.To, d.Problem)
		if d.Heights != nil {
			writeHeights(w, "    at %s:", d.HeightCount, d.Heights, 20, " … (see --json)", func(h HeightDifference) string {
				return fmt.Sprintf(" %d (%d/%d rows)", h.Height, h.ARows, h.BRows)
			})
			fmt.Fprintln(w)
		}
	}
	if r.StreamsDiffer {
		fmt.Fprintln(w, "  bookkeeping (not part of the comparison) differs:")
		writeStreams(w, "A ", r.A.Streams)
		writeStreams(w, "B ", r.B.Streams)
	}
	writeNotCompared(w, width, r.NotCompared())
	switch {
	case !r.Equal():
		fmt.Fprintf(w, "result: %s\n", Quantity(len(r.Differences), "difference"))
	case len(r.NotCompared()) > 0:
		fmt.Fprintf(w, "result: equal in what was compared, not clean: %s not compared (above)\n", Quantity(len(r.NotCompared()), "table"))
	default:
		fmt.Fprintln(w, "result: equal")
	}
}

// tableWidth is the width of the longest table name, so that the columns
// after it line up.
func tableWidth(ts []TableDigest) int {
	w := 0
	for _, t := range ts {
		w = max(w, len(t.Table))
	}
	return w
}

// Quantity is n and its noun: "1 chunk", "2 chunks" (nouns that take an s).
func Quantity(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func writeStreams(w io.Writer, prefix string, ss []StreamState) {
	for _, s := range ss {
		h := "nothing committed"
		if s.Height != nil {
			h = fmt.Sprintf("at %d", *s.Height)
		}
		st := ""
		if s.Status != "" {
			st = ", " + s.Status
		}
		fmt.Fprintf(w, "  %sstream %s %s%s\n", prefix, s.Stream, h, st)
	}
}

// NewChecksumReport builds the report of a, compared with b when b is not
// nil.
func NewChecksumReport(a Digest, b *Digest) (ChecksumReport, error) {
	r := ChecksumReport{A: a, B: b, Differences: []Difference{}}
	if b == nil {
		return r, nil
	}
	diffs, err := Compare(a, *b)
	if err != nil {
		return r, err
	}
	r.Differences = append(r.Differences, diffs...)
	r.StreamsDiffer = !sameStreams(a.Streams, b.Streams)
	return r, nil
}

func sameStreams(a, b []StreamState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Stream != y.Stream || x.Status != y.Status || string(x.Hash) != string(y.Hash) || (x.Height == nil) != (y.Height == nil) || (x.Height != nil && *x.Height != *y.Height) {
			return false
		}
	}
	return true
}

// VerifyReport is what the verify command prints.
type VerifyReport struct {
	Staging *StagingReport `json:"staging"`
	PG      *PGReport      `json:"postgresql,omitempty"`
	// HeldBy is the PID of the running job that held the store: what was
	// verified is a checkpoint it took for it (a consistent state of the
	// store at CheckpointAt, while the job went on writing).
	HeldBy       int       `json:"held_by,omitempty"`
	CheckpointAt time.Time `json:"checkpoint_at,omitzero"`
	// Decoders are the decoder options taken from what the schema
	// records (not given on the command line).
	Decoders []string `json:"decoders_recorded,omitempty"`
	// Trust is the chain of trust run over the staged history (CometBFT),
	// nil when none ran.
	Trust *TrustReport `json:"trust,omitempty"`
}

// TrustReport is what a chain of trust proved of a store: from which root,
// up to which height, and the height that failed if one did.
type TrustReport struct {
	Root string `json:"root"` // "genesis", or the trusted header
	Mode string `json:"mode"` // changes or every
	// From is the first height proven (the root's), Proven the last; nil
	// when none was.
	From   *uint64 `json:"from,omitempty"`
	Proven *uint64 `json:"proven,omitempty"`
	// Unproven says why heights above Proven were not proven (a gap, the
	// last height's commit not at hand); "" when none are left.
	Unproven string `json:"unproven,omitempty"`
	// Failed is the refusal of a height, "" when none was refused.
	Failed string `json:"failed,omitempty"`
	// Skipped says why no chain of trust ran (no root to start from).
	Skipped string `json:"skipped,omitempty"`
	// Recorded says the store's checkpoint was moved to Proven.
	Recorded bool `json:"recorded,omitempty"`
}

// Problems is 1 when a height was refused.
func (t *TrustReport) Problems() int {
	if t != nil && t.Failed != "" {
		return 1
	}
	return 0
}

func (t *TrustReport) writeText(w io.Writer) {
	switch {
	case t.Skipped != "":
		fmt.Fprintf(w, "trust: not proven: %s\n", t.Skipped)
		return
	case t.Proven != nil:
		fmt.Fprintf(w, "trust: proven from %s to height %d (%s, every header against the tracked validators and parameters, commits: %s)\n", t.Root, *t.Proven, heightsFrom(t.From), t.Mode)
	default:
		fmt.Fprintf(w, "trust: from %s, nothing proven\n", t.Root)
	}
	if t.Failed != "" {
		fmt.Fprintf(w, "  WRONG: %s\n", t.Failed)
	}
	if t.Unproven != "" {
		fmt.Fprintf(w, "  not proven: %s\n", t.Unproven)
	}
	if t.Recorded {
		fmt.Fprintln(w, "  recorded in the store's chain-of-trust checkpoint")
	}
}

func heightsFrom(from *uint64) string {
	if from == nil {
		return "no height"
	}
	return fmt.Sprintf("checked from height %d", *from)
}

// Problems is the number of things found wrong.
func (r VerifyReport) Problems() int {
	n := 0
	if r.Staging != nil {
		n += r.Staging.Problems()
	}
	if r.PG != nil {
		n += r.PG.Problems()
	}
	return n + r.Trust.Problems()
}

// WriteText writes the report for a terminal.
func (r VerifyReport) WriteText(w io.Writer) {
	if r.HeldBy != 0 {
		fmt.Fprintf(w, "a running blockhaul (pid %d) holds the store: verifying the checkpoint it took at %s\n", r.HeldBy, r.CheckpointAt.UTC().Format(time.RFC3339))
	}
	if s := r.Staging; s != nil {
		mode := "headers and checksums"
		if s.Deep {
			mode = "deep: decompressed, hashes recomputed, decoded"
		}
		if s.From == nil {
			fmt.Fprintf(w, "verify staging %s: empty\n", s.Dir)
		} else {
			fmt.Fprintf(w, "verify staging %s (%s %q), heights %d-%d, %s: %d records in %.2fs\n",
				s.Dir, s.Family, s.ChainID, *s.From, *s.To, mode, s.Records, s.Duration.Seconds())
		}
		if s.GapCount > 0 {
			fmt.Fprintf(w, "  gaps:      %d heights in %d ranges: %s\n", s.GapHeights, s.GapCount, gapList(s.Gaps, 10))
		}
		writeProblems(w, "corrupt", s.CorruptCount, s.Corrupt)
		writeProblems(w, "wrong hash", s.WrongHashCount, s.WrongHash)
		writeProblems(w, "undecodable", s.UndecodableCount, s.Undecodable)
		writeBreaks(w, s.BreakCount, s.Breaks)
		if s.Unreadable != "" {
			fmt.Fprintf(w, "  unreadable: %s\n", s.Unreadable)
		}
		if s.Problems() == 0 {
			fmt.Fprintln(w, "  staging: clean")
		}
	}
	if r.Trust != nil {
		r.Trust.writeText(w)
	}
	if p := r.PG; p != nil {
		fmt.Fprintf(w, "verify postgresql schema %s: %d blocks in %.2fs\n", p.Schema, p.Blocks, p.Duration.Seconds())
		writeDecoders(w, r.Decoders)
		for _, s := range p.Streams {
			fmt.Fprintf(w, "  stream %s from %d at %s", s.Stream, s.From, ptrString(s.Height))
			if s.Status != "" {
				fmt.Fprintf(w, ", %s", s.Status)
			}
			if len(s.Problem) == 0 {
				fmt.Fprintln(w, ": ok")
			}
			for i, pr := range s.Problem {
				if i == 0 {
					fmt.Fprintln(w, ":")
				}
				fmt.Fprintf(w, "    WRONG: %s\n", pr)
			}
		}
		if len(p.Gaps) > 0 {
			fmt.Fprintf(w, "  not exported (between exported heights): %s\n", gapList(p.Gaps, 10))
		}
		if p.DuplicateCount > 0 {
			fmt.Fprintf(w, "  heights twice: %d, e.g. %v\n", p.DuplicateCount, p.Duplicates[:min(10, len(p.Duplicates))])
		}
		writeBreaks(w, p.BreakCount, p.Breaks)
		writeProblems(w, "differs from staging", p.DiffersCount, p.Differs)
		writeProblems(w, "unreadable in staging", p.UnreadableCount, p.Unreadable)
		writeTableChecks(w, p)
		switch {
		case p.Problems() > 0:
		case p.Complete:
			fmt.Fprintln(w, "  postgresql: clean")
		default:
			fmt.Fprintln(w, "  postgresql: no problem in what was compared, but not every table's rows were (above)")
		}
	}
	switch n := r.Problems(); {
	case n > 0:
		fmt.Fprintf(w, "result: %s\n", Quantity(n, "problem"))
	case r.PG != nil && len(r.PG.TablesNotCompared) > 0:
		fmt.Fprintf(w, "result: no problem found, not clean: %s of the schema not compared: %s\n", Quantity(len(r.PG.TablesNotCompared), "table"), strings.Join(r.PG.TablesNotCompared, ", "))
	case r.PG != nil && !r.PG.Complete:
		fmt.Fprintln(w, "result: no problem found, not clean: rows left uncompared (above)")
	default:
		fmt.Fprintln(w, "result: clean")
	}
}

// RangeList is gs as a reader writes heights: "1-6000, 7001-8000"; "none"
// when empty.
func RangeList(gs []Gap) string {
	if len(gs) == 0 {
		return "none"
	}
	return gapList(gs, 20)
}

func gapList(gs []Gap, max int) string {
	s := ""
	for i, g := range gs {
		if i == max {
			return s + fmt.Sprintf(", … (%d more listed)", len(gs)-max)
		}
		if i > 0 {
			s += ", "
		}
		if g.From == g.To {
			s += fmt.Sprint(g.From)
		} else {
			s += fmt.Sprintf("%d-%d", g.From, g.To)
		}
	}
	return s
}

// writeTableChecks prints each table's rows against staging: compared and
// equal, the chunks and heights that differ, or why it was not compared.
func writeTableChecks(w io.Writer, p *PGReport) {
	if p.Tables == nil {
		fmt.Fprintln(w, "  rows against staging: not compared (no staging store)")
		return
	}
	fmt.Fprintf(w, "  rows against staging, in chunks of %d heights:\n", p.Chunk)
	width := 0
	for _, t := range p.Tables {
		width = max(width, len(t.Table))
	}
	for _, t := range p.Tables {
		switch {
		case !t.Compared:
			fmt.Fprintf(w, "    %-*s  NOT COMPARED: %s\n", width, t.Table, t.NotCompared)
		case t.DiffersCount == 0:
			fmt.Fprintf(w, "    %-*s  equal: %s in %s\n", width, t.Table, Quantity(int(t.Rows), "row"), Quantity(t.Chunks, "chunk"))
		default:
			fmt.Fprintf(w, "    %-*s  DIFFERS in %s of %d:\n", width, t.Table, Quantity(t.DiffersCount, "chunk"), t.Chunks)
			for i, d := range t.Differs {
				if i == 10 {
					fmt.Fprintf(w, "      … %d more (see --json)\n", t.DiffersCount-10)
					break
				}
				fmt.Fprintf(w, "      heights %d-%d: %s", d.From, d.To, d.Problem)
				if d.Heights != nil {
					writeHeights(w, "; at %s:", d.HeightCount, d.Heights, 10, " …", func(h RowHeight) string {
						return fmt.Sprintf(" %d (%d rows in PostgreSQL, %d from staging)", h.Height, h.PGRows, h.StagedRows)
					})
				}
				fmt.Fprintln(w)
			}
		}
	}
	for i, u := range p.Uncompared {
		if i == 10 {
			fmt.Fprintf(w, "    … %d more chunks not compared (see --json)\n", len(p.Uncompared)-10)
			break
		}
		fmt.Fprintf(w, "    heights %d-%d not compared in any table: %s\n", u.From, u.To, u.Reason)
	}
}

func writeProblems(w io.Writer, kind string, n int, ps []Problem) {
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "  %s: %s\n", kind, Quantity(n, "height"))
	for i, p := range ps {
		if i == 20 {
			fmt.Fprintf(w, "    … %d more (see --json)\n", n-20)
			break
		}
		fmt.Fprintf(w, "    %d: %s", p.Height, p.Reason)
		if len(p.Files) > 0 {
			fmt.Fprintf(w, " [files: %v]", p.Files)
		}
		fmt.Fprintln(w)
	}
}

func writeBreaks(w io.Writer, n int, bs []Break) {
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "  parent-hash breaks: %d\n", n)
	for i, b := range bs {
		if i == 20 {
			fmt.Fprintf(w, "    … %d more (see --json)\n", n-20)
			break
		}
		fmt.Fprintf(w, "    %s %d: parent hash %X, block %d is %X\n", b.Where, b.Height, b.ParentHash, b.Height-1, b.BelowHash)
	}
}

// writeHeights writes where a difference is: the count of its heights (at,
// a format of it), then each of the first limit heights as height says,
// then more if there are others.
func writeHeights[H any](w io.Writer, at string, count int, heights []H, limit int, more string, height func(H) string) {
	fmt.Fprintf(w, at, Quantity(count, "height"))
	for i, h := range heights {
		if i == limit {
			fmt.Fprint(w, more)
			break
		}
		fmt.Fprint(w, height(h))
	}
}
