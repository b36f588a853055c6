package monitor

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Summary is what a job did, for the report printed at its end.
type Summary struct {
	// Command and Complete are the caller's to fill in before WriteText:
	// the monitor knows neither which command ran nor whether its range
	// ended complete.
	Command  string
	Complete bool
	// Replayed names the tables an export --replay wrote again: the
	// heights it reached are not a checkpoint (a replay never moves one).
	Replayed []string

	From, To uint64
	RangeSet bool
	Duration time.Duration // from New to Stop (or to the Summary call)

	Fetch  FetchSummary
	Export ExportSummary

	// Follow is set for the head stream: Tip is the chain tip last read
	// (if TipKnown), Confirmations how far below it the stream exports.
	Follow        bool
	Tip           uint64
	TipKnown      bool
	Confirmations uint64

	RPCRequests uint64 // requests sent
	RPCFailed   uint64 // requests whose outcome was not OutcomeOK
	Retries     uint64 // retries of every reason
	PGRetries   uint64 // PostgreSQL operations tried again after a transient fault
}

// FetchSummary is the fetch phase: source to staging.
type FetchSummary struct {
	Planned     uint64 // heights missing when the fetch started
	Fetched     uint64 // blocks the source returned
	Blocks      uint64 // blocks staged
	RawBytes    int64
	StoredBytes int64
	Ratio       float64       // RawBytes / StoredBytes; 0 if nothing stored
	Duration    time.Duration // from FetchPlanned to the last staging commit
	BlocksPerS  float64
}

// ExportSummary is the export phase: staging to PostgreSQL.
type ExportSummary struct {
	Blocks    uint64
	Rows      []TableRows // in SetTables order
	TotalRows uint64
	Batches   uint64
	Conflicts uint64 // batches merged after a unique violation
	Last      uint64 // last height exported (the highest of any stream), if LastValid
	LastValid bool
	// Streams are the export streams the range was split into, each with
	// its checkpoint, in height order: set when the job said how it split
	// its range (ExportStream), one stream included.
	Streams []StreamCheckpoint `json:",omitempty"`
	// Done is how many heights of the range PostgreSQL holds: committed
	// by this run or earlier ones, by any stream.
	Done       uint64
	Duration   time.Duration // from ExportPlanned to the last batch
	BlocksPerS float64
	RowsPerS   float64
}

// StreamCheckpoint is one export stream: its sub-range of the job's range
// and the last height it has committed, if any (earlier runs' included).
type StreamCheckpoint struct {
	From, To  uint64
	Last      uint64
	LastValid bool
}

// remaining is what of the stream's sub-range PostgreSQL does not hold.
func (c StreamCheckpoint) remaining() (from uint64, ok bool) {
	if !c.LastValid || c.Last < c.From {
		return c.From, true
	}
	return c.Last + 1, c.Last < c.To
}

// TableRows is the number of rows exported to one table.
type TableRows struct {
	Table string
	Rows  uint64
}

// Summary returns what the job has done so far; after Stop, what it did.
func (m *Monitor) Summary() Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.st
	end := s.ended
	if end.IsZero() {
		end = m.now()
	}
	sum := Summary{
		From: s.from, To: s.to, RangeSet: s.rangeSet,
		Duration: end.Sub(s.created),
		Follow:   s.follow, Tip: s.tip, TipKnown: s.tipKnown, Confirmations: s.confirmations,
		RPCRequests: s.requests, RPCFailed: s.failed, Retries: s.retries, PGRetries: s.pgRetries,
		Fetch: FetchSummary{
			Planned: s.fetchPlanned, Fetched: s.fetched, Blocks: s.staged,
			RawBytes: s.rawBytes, StoredBytes: s.storedBytes,
			Ratio:    compressionRatio(s.rawBytes, s.storedBytes),
			Duration: phaseDuration(s.fetchStart, s.fetchLast, s.created),
		},
		Export: ExportSummary{
			Blocks: s.exported, TotalRows: s.totalRows, Batches: s.batches, Conflicts: s.conflicts,
			Last: s.last, LastValid: s.lastValid,
			Done:     m.rangeExportedLocked(),
			Duration: phaseDuration(s.exportStart, s.exportLast, s.created),
		},
	}
	for _, e := range s.streams {
		c := StreamCheckpoint{From: e.from, To: e.to}
		if n := e.committed(); n > 0 {
			c.Last, c.LastValid = e.from+n-1, true
		}
		sum.Export.Streams = append(sum.Export.Streams, c)
	}
	sum.Export.Rows = make([]TableRows, len(s.tables))
	for i, t := range s.tables {
		sum.Export.Rows[i] = TableRows{Table: t, Rows: s.rows[i]}
	}
	sum.Fetch.BlocksPerS = perSecond(float64(s.staged), sum.Fetch.Duration)
	sum.Export.BlocksPerS = perSecond(float64(s.exported), sum.Export.Duration)
	sum.Export.RowsPerS = perSecond(float64(s.totalRows), sum.Export.Duration)
	return sum
}

// phaseDuration runs from a phase's start (the Monitor's creation if the
// phase was never announced) to its last event.
func phaseDuration(start, last, created time.Time) time.Duration {
	if last.IsZero() {
		return 0
	}
	if start.IsZero() {
		start = created
	}
	return max(0, last.Sub(start))
}

func perSecond(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

// WriteText renders the summary for a person. Write errors are ignored: the
// summary is the last thing a job prints and has no one to report them to.
func (s Summary) WriteText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\nblockhaul")
	if s.Command != "" {
		p(" %s", s.Command)
	}
	if s.RangeSet {
		p(": heights %d-%d", s.From, s.To)
	}
	if s.Complete {
		p(", complete\n")
	} else {
		p(", NOT complete\n")
	}
	f := s.Fetch
	if s.Follow && s.TipKnown {
		p("  follow:  tip %d", s.Tip)
		if s.Export.LastValid {
			lag := uint64(0)
			if s.Tip > s.Export.Last {
				lag = s.Tip - s.Export.Last
			}
			p(", exported to %d, lag %d", s.Export.Last, lag)
		}
		p(" (%d confirmations)\n", s.Confirmations)
	}
	switch {
	case s.Follow && f.Blocks > 0:
		// Planned heights of a head stream are those of its last poll:
		// the count says nothing.
		p("  fetch:   %d blocks staged in %s (%.0f blocks/s)\n", f.Blocks, seconds(f.Duration), f.BlocksPerS)
		p("           %s raw -> %s staged (compression ratio %.2f)\n", megabytes(f.RawBytes), megabytes(f.StoredBytes), f.Ratio)
	case !s.Follow && (f.Planned > 0 || f.Blocks > 0):
		p("  fetch:   %d blocks staged of %d planned in %s (%.0f blocks/s)\n",
			f.Blocks, f.Planned, seconds(f.Duration), f.BlocksPerS)
		p("           %s raw -> %s staged (compression ratio %.2f)\n", megabytes(f.RawBytes), megabytes(f.StoredBytes), f.Ratio)
	}
	if s.RPCRequests > 0 || s.Retries > 0 {
		p("  rpc:     %d requests, %d failed, %d retries\n", s.RPCRequests, s.RPCFailed, s.Retries)
	}
	e := s.Export
	if e.Blocks > 0 || e.Batches > 0 {
		batches := "batches"
		if e.Batches == 1 {
			batches = "batch"
		}
		p("  export:  %d blocks, %d rows in %s (%.0f blocks/s, %.0f rows/s), %d %s, %d merged after conflicts\n",
			e.Blocks, e.TotalRows, seconds(e.Duration), e.BlocksPerS, e.RowsPerS, e.Batches, batches, e.Conflicts)
		width := 0
		for _, t := range e.Rows {
			width = max(width, len(t.Table))
		}
		for _, t := range e.Rows {
			p("           %-*s %10d rows\n", width, t.Table, t.Rows)
		}
	}
	if s.PGRetries > 0 {
		p("  postgres: %d retries after transient faults\n", s.PGRetries)
	}
	switch {
	case e.LastValid && len(s.Replayed) > 0:
		p("  replayed: %s through height %d (no checkpoint moves in a replay)\n", strings.Join(s.Replayed, ", "), e.Last)
	case len(e.Streams) > 1 && !s.Follow:
		for i, c := range e.Streams {
			at := "nothing committed"
			if c.LastValid {
				at = fmt.Sprintf("height %d", c.Last)
			}
			p("  checkpoint: stream %d of %d (heights %d-%d) at %s\n", i+1, len(e.Streams), c.From, c.To, at)
		}
	case e.LastValid:
		p("  checkpoint: height %d\n", e.Last)
	}
	if rest, n := s.remaining(); !s.Complete && n > 0 && len(s.Replayed) == 0 {
		p("  remaining: %d of %d heights not in PostgreSQL: %s (the same command resumes them)\n", n, s.To-s.From+1, strings.Join(rest, ", "))
	}
	p("  total:   %s\n", seconds(s.Duration))
}

// remaining is what of the range the export streams have not committed,
// as height ranges, and how many heights that is; nothing when the streams
// are not known to cover the range (a head stream, a job stopped before
// its streams started).
func (s Summary) remaining() ([]string, uint64) {
	if s.Follow || !s.RangeSet || s.To < s.From {
		return nil, 0
	}
	var covered uint64
	for _, c := range s.Export.Streams {
		covered += c.To - c.From + 1
	}
	if covered != s.To-s.From+1 {
		return nil, 0
	}
	var rest []string
	var n uint64
	for _, c := range s.Export.Streams {
		if from, ok := c.remaining(); ok {
			rest = append(rest, fmt.Sprintf("%d-%d", from, c.To))
			n += c.To - from + 1
		}
	}
	return rest, n
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
