package archive

import (
	"encoding/json"
	"fmt"
	"io"
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
}

// Equal reports whether the report found no difference of data.
func (r ChecksumReport) Equal() bool { return len(r.Differences) == 0 }

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
		for _, t := range r.A.Tables {
			fmt.Fprintf(w, "  %-14s %12d rows  digest %s  (%d chunks)\n", t.Table, t.Rows, t.Digest, len(t.Chunks))
		}
		writeStreams(w, "", r.A.Streams)
		return
	}
	fmt.Fprintf(w, "checksum of schema %s (A) against %s (B), %s, chunks of %d heights (%.1fs, %.1fs)\n",
		r.A.Schema, r.B.Schema, span, r.A.Chunk, r.A.Duration.Seconds(), r.B.Duration.Seconds())
	byTable := map[string]int{}
	for _, d := range r.Differences {
		byTable[d.Table]++
	}
	for i, t := range r.A.Tables {
		tb := r.B.Tables[i]
		if n := byTable[t.Table]; n > 0 {
			fmt.Fprintf(w, "  %-14s DIFFERENT in %d chunk(s): A %d rows %s, B %d rows %s\n", t.Table, n, t.Rows, t.Digest, tb.Rows, tb.Digest)
		} else {
			fmt.Fprintf(w, "  %-14s equal: %d rows, digest %s\n", t.Table, t.Rows, t.Digest)
		}
	}
	for _, d := range r.Differences {
		fmt.Fprintf(w, "  differs: %s heights %d-%d: %s\n", d.Table, d.From, d.To, d.Problem)
	}
	if r.StreamsDiffer {
		fmt.Fprintln(w, "  bookkeeping (not part of the comparison) differs:")
		writeStreams(w, "A ", r.A.Streams)
		writeStreams(w, "B ", r.B.Streams)
	}
	if r.Equal() {
		fmt.Fprintln(w, "result: equal")
	} else {
		fmt.Fprintf(w, "result: %d difference(s)\n", len(r.Differences))
	}
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
