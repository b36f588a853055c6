package monitor

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestSummary(t *testing.T) {
	clk := newClock()
	m := New(Options{Out: &bytes.Buffer{}, Terminal: ptr(false), Now: clk.Now})
	m.Start(context.Background())
	m.SetRange(1, 1000)
	m.SetTables([]string{"blocks", "txs"})
	clk.Add(time.Second)
	m.FetchPlanned(1000)
	clk.Add(time.Second)
	m.ExportPlanned(1)
	clk.Add(9 * time.Second)
	m.Fetched(1000)
	m.Staged(1000, 40_000_000, 10_000_000, time.Millisecond)
	m.Request(endpoint, "batch", OutcomeOK, time.Millisecond)
	m.Request(endpoint, "batch", OutcomeOK, time.Millisecond)
	m.Request(endpoint, "batch", OutcomeOK, time.Millisecond)
	m.Request(endpoint, "batch", "timeout", time.Millisecond)
	m.Retry(endpoint, "timeout")
	m.Retry("", RetrySpan)
	clk.Add(5 * time.Second)
	m.Exported(1, 400, []int{400, 1000}, time.Millisecond, false)
	clk.Add(6 * time.Second)
	m.Exported(401, 1000, []int{600, 3000}, time.Millisecond, true)
	clk.Add(8 * time.Second)
	m.Stop()
	clk.Add(time.Hour) // a summary after Stop is fixed

	s := m.Summary()
	if s.Duration != 30*time.Second {
		t.Errorf("duration = %v, want 30s", s.Duration)
	}
	f := s.Fetch
	if f.Planned != 1000 || f.Fetched != 1000 || f.Blocks != 1000 || f.Duration != 10*time.Second || f.BlocksPerS != 100 || f.Ratio != 4 {
		t.Errorf("fetch summary = %+v", f)
	}
	e := s.Export
	if e.Blocks != 1000 || e.TotalRows != 5000 || e.Batches != 2 || e.Conflicts != 1 || e.Duration != 20*time.Second ||
		e.BlocksPerS != 50 || e.RowsPerS != 250 || !e.LastValid || e.Last != 1000 {
		t.Errorf("export summary = %+v", e)
	}
	if len(e.Rows) != 2 || e.Rows[0] != (TableRows{"blocks", 1000}) || e.Rows[1] != (TableRows{"txs", 4000}) {
		t.Errorf("rows per table = %+v", e.Rows)
	}
	if s.RPCRequests != 4 || s.RPCFailed != 1 || s.Retries != 2 {
		t.Errorf("rpc = %d requests, %d failed, %d retries", s.RPCRequests, s.RPCFailed, s.Retries)
	}

	s.Command, s.Complete = "run", true
	var out bytes.Buffer
	s.WriteText(&out)
	text := out.String()
	for _, want := range []string{
		"blockhaul run: heights 1-1000, complete\n",
		"fetch:   1000 blocks staged of 1000 planned in 10.0s (100 blocks/s)\n",
		"40.0 MB raw -> 10.0 MB staged (compression ratio 4.00)\n",
		"rpc:     4 requests, 1 failed, 2 retries\n",
		"export:  1000 blocks, 5000 rows in 20.0s (50 blocks/s, 250 rows/s), 2 batches, 1 merged after conflicts\n",
		"           blocks       1000 rows\n", // the counts line up after the longest name
		"           txs          4000 rows\n",
		"checkpoint: height 1000\n",
		"total:   30.0s\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
}

func TestSummaryOfNothing(t *testing.T) {
	clk := newClock()
	m := New(Options{Out: &bytes.Buffer{}, Terminal: ptr(false), Now: clk.Now})
	clk.Add(1500 * time.Millisecond)
	s := m.Summary()
	s.Command = "export"
	var out bytes.Buffer
	s.WriteText(&out)
	text := out.String()
	if !strings.Contains(text, "blockhaul export, NOT complete\n") || !strings.Contains(text, "total:   1.5s\n") {
		t.Errorf("empty summary:\n%s", text)
	}
	for _, absent := range []string{"fetch:", "export:", "rpc:", "checkpoint:"} {
		if strings.Contains(text, absent) {
			t.Errorf("empty summary shows %q:\n%s", absent, text)
		}
	}
}

// A head stream's summary gives the tip and the lag, not the heights its
// last poll planned.
func TestFollowSummary(t *testing.T) {
	clk := newClock()
	m := New(Options{Out: &bytes.Buffer{}, Terminal: ptr(false), Now: clk.Now})
	m.SetFollow(3)
	m.SetTip(500)
	m.FetchPlanned(490)
	clk.Add(time.Second)
	m.Staged(490, 1e6, 2e5, time.Millisecond)
	m.FetchPlanned(0)
	m.Exported(1, 497, []int{497}, time.Millisecond, false)
	m.Stop()
	s := m.Summary()
	s.Command = "follow"
	var out bytes.Buffer
	s.WriteText(&out)
	text := out.String()
	for _, want := range []string{"follow:  tip 500, exported to 497, lag 3 (3 confirmations)\n", "fetch:   490 blocks staged in 1.0s (490 blocks/s)\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("follow summary lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "planned") {
		t.Errorf("follow summary counts planned heights:\n%s", text)
	}
}

// A replay writes tables again below the checkpoints and never moves one:
// its summary names what it replayed, not a checkpoint it did not set.
func TestSummaryOfAReplay(t *testing.T) {
	clk := newClock()
	m := New(Options{Out: &bytes.Buffer{}, Terminal: ptr(false), Now: clk.Now})
	m.SetTables([]string{"events"})
	m.ExportPlanned(1)
	m.Exported(1, 500, []int{2000}, time.Second, false)
	s := m.Summary()
	s.Command, s.Complete, s.Replayed = "export", true, []string{"events", "messages"}
	var out bytes.Buffer
	s.WriteText(&out)
	text := out.String()
	if !strings.Contains(text, "replayed: events, messages through height 500 (no checkpoint moves in a replay)\n") {
		t.Errorf("replay summary lacks what was replayed:\n%s", text)
	}
	if strings.Contains(text, "checkpoint: height") {
		t.Errorf("replay summary claims a checkpoint:\n%s", text)
	}
}

func TestSummaryOfOneBatch(t *testing.T) {
	s := Summary{Command: "export", Complete: true}
	s.Export.Blocks, s.Export.TotalRows, s.Export.Batches = 50, 200, 1
	var out bytes.Buffer
	s.WriteText(&out)
	if text := out.String(); !strings.Contains(text, ", 1 batch, 0 merged after conflicts\n") {
		t.Errorf("summary of one batch:\n%s", text)
	}
}
