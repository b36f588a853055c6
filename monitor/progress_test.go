package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMeterRate(t *testing.T) {
	type s struct {
		at time.Duration
		v  float64
	}
	tests := []struct {
		name    string
		samples []s
		want    float64
		known   bool
	}{
		{"no sample", nil, 0, false},
		{"one sample", []s{{0, 5}}, 0, false},
		{"span under a second", []s{{0, 0}, {500 * time.Millisecond, 100}}, 0, false},
		{"steady", []s{{0, 0}, {time.Second, 50}, {2 * time.Second, 100}}, 50, true},
		{"batches smoothed", []s{{0, 0}, {time.Second, 0}, {2 * time.Second, 500}, {3 * time.Second, 500}, {4 * time.Second, 500}, {5 * time.Second, 1000}}, 200, true},
		{"window forgets the old pace", func() []s {
			var out []s
			v := 0.0
			for i := 0; i <= 30; i++ {
				out = append(out, s{time.Duration(i) * time.Second, v})
				if i < 20 {
					v += 10
				} else {
					v += 100
				}
			}
			return out
		}(), 100, true},
	}
	base := newClock().Now()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m meter
			for _, p := range tt.samples {
				m.sample(base.Add(p.at), p.v)
			}
			got, known := m.rate()
			if known != tt.known || got != tt.want {
				t.Errorf("rate = %v, %v; want %v, %v", got, known, tt.want, tt.known)
			}
		})
	}
}

func TestMeterStaysSmall(t *testing.T) {
	var m meter
	base := newClock().Now()
	for i := range 10000 {
		m.sample(base.Add(time.Duration(i)*250*time.Millisecond), float64(i))
	}
	if n := len(m.samples); n > int(rateWindow/(250*time.Millisecond))+2 {
		t.Errorf("meter holds %d samples after 10000, want about one window's worth", n)
	}
	if got, _ := m.rate(); got != 4 {
		t.Errorf("rate = %v, want 4", got)
	}
}

// wantFrame checks what the display drew since the last frame, and starts
// the next.
func wantFrame(t *testing.T, out *bytes.Buffer, name, want string) {
	t.Helper()
	if got := out.String(); got != want {
		t.Errorf("%s:\n got %q\nwant %q", name, got, want)
	}
	out.Reset()
}

func TestTerminalDisplay(t *testing.T) {
	clk := newClock()
	var out bytes.Buffer
	m := New(Options{Out: &out, Terminal: ptr(true), Now: clk.Now, Width: func() int { return 80 }})
	m.SetRange(1, 1000)
	m.SetTables([]string{"blocks", "txs"})
	m.FetchPlanned(1000)
	m.ExportPlanned(1)
	t0 := clk.Now()

	m.tick(t0, false)
	wantFrame(t, &out, "first frame", "\r\x1b[J"+
		"fetch  [----------]   0.0%  0/1000  - h/s  eta -\x1b[K\n"+
		"export [----------]   0.0%  0/1000  - h/s  eta -\x1b[K\n")

	clk.Add(2 * time.Second)
	m.Staged(200, 2_000_000, 500_000, time.Millisecond)
	m.Exported(1, 100, []int{100, 300}, time.Millisecond, false)
	m.tick(clk.Now(), false)
	// Redrawn in place: up over the two lines drawn, then the new frame.
	wantFrame(t, &out, "second frame", "\x1b[2A\r\x1b[J"+
		"fetch  [##--------]  20.0%  200/1000  100 h/s  1.0 MB/s  eta 8s\x1b[K\n"+
		"export [#---------]  10.0%  100/1000  50 h/s  200 rows/s  eta 18s\x1b[K\n")

	// Fetch finishes at t0+10s: the line shows done and the phase's
	// average, not the decaying recent rate.
	clk.Add(8 * time.Second)
	m.Staged(800, 8_000_000, 2_000_000, time.Millisecond)
	clk.Add(20 * time.Second)
	m.Exported(101, 600, []int{500, 1500}, time.Millisecond, false)
	m.tick(clk.Now(), false)
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(out.String(), "\x1b[2A\r\x1b[J"), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("third frame has %d lines: %q", len(lines), out.String())
	}
	if want := "fetch  [##########] 100.0%  1000/1000  100 h/s  1.0 MB/s  done\x1b[K"; lines[0] != want {
		t.Errorf("finished fetch line:\n got %q\nwant %q", lines[0], want)
	}
	// Export: the window's oldest sample is the one at 2 s (100 heights,
	// 400 rows), so the rate is 500 heights and 2000 rows over 28 s.
	if want := "export [######----]  60.0%  600/1000  18 h/s  71 rows/s  eta 22s\x1b[K"; lines[1] != want {
		t.Errorf("export line:\n got %q\nwant %q", lines[1], want)
	}
	for _, l := range lines {
		if n := len(strings.TrimSuffix(l, "\x1b[K")); n > 80 {
			t.Errorf("line of %d columns would wrap: %q", n, l)
		}
	}
}

func TestExportResumedShowsPosition(t *testing.T) {
	clk := newClock()
	var out bytes.Buffer
	m := New(Options{Out: &out, Terminal: ptr(true), Now: clk.Now, Width: func() int { return 80 }})
	m.SetRange(1001, 2000)
	m.ExportPlanned(1501) // half the range was exported by an earlier run
	m.tick(clk.Now(), false)
	if want := "export [#####-----]  50.0%  500/1000  - h/s  eta -"; !strings.Contains(out.String(), want) {
		t.Errorf("resumed export frame %q lacks %q", out.String(), want)
	}
	out.Reset()
	clk.Add(5 * time.Second)
	m.Exported(1501, 1750, []int{250}, time.Millisecond, false)
	m.tick(clk.Now(), false)
	// 250 heights in 5 s: 50 h/s, 250 left: 5 s.
	if want := "export [#######---]  75.0%  750/1000  50 h/s  50 rows/s  eta 5s"; !strings.Contains(out.String(), want) {
		t.Errorf("resumed export frame %q lacks %q", out.String(), want)
	}
}

func TestLogProgress(t *testing.T) {
	clk := newClock()
	var logs bytes.Buffer
	m := New(Options{
		Logger:   slog.New(slog.NewJSONHandler(&logs, nil)),
		Terminal: ptr(false),
		Interval: 10 * time.Second,
		Now:      clk.Now,
	})
	m.SetRange(1, 1000)
	m.SetTables([]string{"blocks", "txs"})
	m.FetchPlanned(1000)
	m.ExportPlanned(1)
	m.tick(clk.Now(), false)
	clk.Add(5 * time.Second)
	m.Staged(250, 5_000_000, 1_000_000, time.Millisecond)
	m.tick(clk.Now(), false)
	if logs.Len() != 0 {
		t.Fatalf("logged before the interval passed: %s", logs.String())
	}
	clk.Add(5 * time.Second)
	m.Staged(250, 5_000_000, 1_000_000, time.Millisecond)
	m.Exported(1, 200, []int{200, 600}, time.Millisecond, false)
	m.tick(clk.Now(), false)

	type phase struct {
		Done        uint64   `json:"done"`
		Total       uint64   `json:"total"`
		HeightsPerS *float64 `json:"heights_per_s"`
		MBPerS      *float64 `json:"mb_per_s"`
		RowsPerS    *float64 `json:"rows_per_s"`
		ETA         *int64   `json:"eta_s"`
		Finished    bool     `json:"finished"`
	}
	var rec struct {
		Level  string `json:"level"`
		Msg    string `json:"msg"`
		Fetch  phase  `json:"fetch"`
		Export phase  `json:"export"`
	}
	recs := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(recs) != 1 {
		t.Fatalf("want one progress record after one interval, got %d: %s", len(recs), logs.String())
	}
	if err := json.Unmarshal([]byte(recs[0]), &rec); err != nil {
		t.Fatalf("progress record %s: %v", recs[0], err)
	}
	if rec.Msg != "progress" || rec.Level != "INFO" {
		t.Errorf("record = %s", recs[0])
	}
	f, e := rec.Fetch, rec.Export
	if f.Done != 500 || f.Total != 1000 || f.HeightsPerS == nil || *f.HeightsPerS != 50 ||
		f.MBPerS == nil || *f.MBPerS != 1 || f.ETA == nil || *f.ETA != 10 {
		t.Errorf("fetch progress = %+v in %s", f, recs[0])
	}
	if e.Done != 200 || e.Total != 1000 || e.HeightsPerS == nil || *e.HeightsPerS != 20 ||
		e.RowsPerS == nil || *e.RowsPerS != 80 || e.ETA == nil || *e.ETA != 40 {
		t.Errorf("export progress = %+v in %s", e, recs[0])
	}

	// The last line comes at Stop, whether or not an interval passed.
	logs.Reset()
	clk.Add(time.Second)
	m.Staged(500, 10_000_000, 2_000_000, time.Millisecond)
	m.tick(clk.Now(), true)
	rec.Fetch = phase{} // absent fields must not keep the earlier record's values
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &rec); err != nil {
		t.Fatalf("final record %q: %v", logs.String(), err)
	}
	if !rec.Fetch.Finished || rec.Fetch.Done != 1000 || rec.Fetch.ETA != nil {
		t.Errorf("final fetch progress = %+v", rec.Fetch)
	}
}

func TestNothingLoggedBeforeAPhase(t *testing.T) {
	clk := newClock()
	var logs bytes.Buffer
	m := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Terminal: ptr(false), Interval: time.Second, Now: clk.Now})
	m.tick(clk.Now(), false)
	m.tick(clk.Add(time.Minute), false)
	if logs.Len() != 0 {
		t.Errorf("progress logged with no phase begun: %s", logs.String())
	}
}

// loopRunning reports whether any goroutine that Start created is alive.
// Stacks rather than runtime.NumGoroutine: the runtime and earlier tests
// start and end goroutines of their own at any time. A goroutine that has
// not run yet shows only its "created by" line, not its function.
func loopRunning() (bool, string) {
	buf := make([]byte, 1<<22)
	stacks := string(buf[:runtime.Stack(buf, true)])
	return strings.Contains(stacks, "created by github.com/blockhaul/blockhaul/monitor.(*Monitor).Start"), stacks
}

func TestStartStopLeavesNoGoroutine(t *testing.T) {
	for _, terminal := range []bool{true, false} {
		var out, logs bytes.Buffer
		m := New(Options{Out: &out, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Terminal: ptr(terminal)})
		m.SetRange(1, 10)
		m.FetchPlanned(10)
		m.Start(context.Background())
		defer m.Stop() // on a failed assertion, not to leak into later tests
		if running, _ := loopRunning(); !running {
			t.Fatalf("terminal=%v: no display loop after Start", terminal)
		}
		m.Start(context.Background()) // a second Start starts nothing
		m.Staged(10, 100, 50, 0)
		m.Stop()
		select {
		case <-m.done:
		default:
			t.Fatalf("terminal=%v: display loop still running after Stop", terminal)
		}
		if running, stacks := loopRunning(); running {
			t.Errorf("terminal=%v: a display loop outlived Stop:\n%s", terminal, stacks)
		}
		m.Stop()                      // idempotent
		m.Start(context.Background()) // after Stop: nothing
		if running, _ := loopRunning(); running {
			t.Errorf("terminal=%v: Start after Stop started a display loop", terminal)
		}
		// Stop showed the final state.
		final := out.String() + logs.String()
		if terminal && !strings.Contains(final, "10/10") {
			t.Errorf("final frame missing: %q", final)
		}
		if !terminal && !strings.Contains(final, "fetch.done=10") {
			t.Errorf("final progress line missing: %q", final)
		}
	}
}

func TestStopAfterContextEnded(t *testing.T) {
	m := New(Options{Out: &bytes.Buffer{}, Terminal: ptr(true)})
	ctx, cancel := context.WithCancel(context.Background())
	m.Start(ctx)
	cancel()
	<-m.done // the loop ends with its context
	m.Stop()
	if got := m.Summary().Duration; got <= 0 {
		t.Errorf("duration after Stop = %v", got)
	}
}

func TestStopWithoutStart(t *testing.T) {
	var out bytes.Buffer
	m := New(Options{Out: &out, Terminal: ptr(true)})
	m.Stop()
	if out.Len() != 0 {
		t.Errorf("Stop without Start drew %q", out.String())
	}
}

func TestConcurrentEvents(t *testing.T) {
	m := New(Options{Out: &bytes.Buffer{}, Terminal: ptr(true)})
	m.SetTables([]string{"blocks"})
	m.Start(context.Background())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				h := uint64(w*500 + i)
				m.Exported(h, h, []int{2}, 0, false)
				m.Staged(1, 10, 5, 0)
				m.Request(endpoint, "batch", OutcomeOK, 0)
				m.Retry(endpoint, "timeout")
				_ = m.Summary()
			}
		})
	}
	wg.Wait()
	m.Stop()
	s := m.Summary()
	if s.Export.Blocks != 4000 || s.Export.TotalRows != 8000 || s.Fetch.Blocks != 4000 || s.RPCRequests != 4000 || s.Retries != 4000 {
		t.Errorf("after 4000 concurrent events: %+v", s)
	}
	if !s.Export.LastValid || s.Export.Last != 3999 {
		t.Errorf("last exported = %d (valid %v), want 3999", s.Export.Last, s.Export.LastValid)
	}
}

// formatCase is one value of a formatting function and what it prints.
type formatCase[T any] struct {
	in   T
	want string
}

func checkFormat[T any](t *testing.T, name string, format func(T) string, cases []formatCase[T]) {
	t.Helper()
	for _, c := range cases {
		if got := format(c.in); got != c.want {
			t.Errorf("%s(%v) = %q, want %q", name, c.in, got, c.want)
		}
	}
}

func TestFormats(t *testing.T) {
	checkFormat(t, "count", count, []formatCase[float64]{{0, "0"}, {9999, "9999"}, {12345, "12.3k"}, {123_456, "123k"}, {999_499, "999k"}, {1_234_567, "1.23M"}, {25_000_000, "25.0M"}, {25e9, "25.0G"}})
	checkFormat(t, "duration", duration, []formatCase[time.Duration]{
		{0, "0s"}, {1400 * time.Millisecond, "1s"}, {59 * time.Second, "59s"}, {61 * time.Second, "1m01s"},
		{time.Hour + 4*time.Minute + 30*time.Second, "1h04m"}, {150 * time.Hour, "150h00m"},
	})
	checkFormat(t, "mbRate", mbRate, []formatCase[float64]{{0, "0.0"}, {450_000, "0.5"}, {123_456_789, "123.5"}, {12_345e6, "12.3k"}})
	bar4 := func(frac float64) string { return bar(frac, 4) }
	checkFormat(t, "bar", bar4, []formatCase[float64]{{0, "[----]"}, {0.5, "[##--]"}, {1, "[####]"}, {1.5, "[####]"}, {-1, "[----]"}})
}

func TestWidestLinesFit(t *testing.T) {
	// The widest numbers a long backfill shows must not wrap an 80-column
	// terminal: a wrapped line breaks the redraw in place.
	views := []phaseView{
		{name: "fetch", done: 25_000_000, total: 25_000_000, totalKnown: true, rate: 99_999, aux: 9_999e6, rateKnown: true, eta: 999 * time.Hour, etaKnown: true},
		{name: "export", done: 12_345_678, total: 25_000_000, totalKnown: true, rate: 99_999, aux: 999e6, rateKnown: true, eta: 999 * time.Hour, etaKnown: true},
	}
	for _, l := range renderLines(views, 80) {
		if len(l) > 79 {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
	}
}

// Every line fits the terminal it is drawn on, keeping the position and
// the ETA the longest, so that a redraw in place never wraps and scrolls.
func TestLinesFitTerminalWidth(t *testing.T) {
	fetch := phaseView{name: "fetch", done: 12_345_678, total: 25_000_000, totalKnown: true, rate: 99_999, aux: 9_999e6, rateKnown: true, eta: 999 * time.Hour, etaKnown: true}
	export := phaseView{name: "export", done: 25_000_000, total: 25_000_000, totalKnown: true, rate: 1234, aux: 999e6, rateKnown: true, finished: true}
	cases := []struct {
		width int
		want  []string
	}{
		{40, []string{
			"fetch   49.4%  100.0k h/s  eta 999h00m",
			"export 100.0%  1234 h/s  done",
		}},
		{60, []string{
			"fetch   49.4%  12.3M/25.0M  100.0k h/s  eta 999h00m",
			"export [##########] 100.0%  25.0M/25.0M  1234 h/s  done",
		}},
		{80, []string{
			"fetch  [####------]  49.4%  12.3M/25.0M  100.0k h/s  9999.0 MB/s  eta 999h00m",
			"export [##########] 100.0%  25.0M/25.0M  1234 h/s  999M rows/s  done",
		}},
		{120, []string{
			"fetch  [####------]  49.4%  12.3M/25.0M  100.0k h/s  9999.0 MB/s  eta 999h00m",
			"export [##########] 100.0%  25.0M/25.0M  1234 h/s  999M rows/s  done",
		}},
		{12, []string{"fetch   49.", "export 100."}},
	}
	for _, c := range cases {
		got := renderLines([]phaseView{fetch, export}, c.width)
		for i, l := range got {
			if len(l) >= c.width {
				t.Errorf("width %d: line of %d columns: %q", c.width, len(l), l)
			}
			if l != c.want[i] {
				t.Errorf("width %d line %d:\n got %q\nwant %q", c.width, i, l, c.want[i])
			}
		}
	}
}

// The width is asked at every redraw: a terminal narrowed while a job
// runs gets lines that fit it from the next frame on.
func TestRedrawFollowsResize(t *testing.T) {
	var out bytes.Buffer
	width := 120
	m := New(Options{Out: &out, Terminal: ptr(true), Width: func() int { return width }})
	m.SetRange(1, 25_000_000)
	m.FetchPlanned(25_000_000)
	m.tick(time.Now(), false)
	if !strings.Contains(out.String(), "[----------]") {
		t.Fatalf("wide frame has no bar: %q", out.String())
	}
	out.Reset()
	width = 30
	m.tick(time.Now(), false)
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		l = strings.TrimSuffix(l, "\x1b[K")
		if i := strings.LastIndex(l, "\x1b[J"); i >= 0 {
			l = l[i+3:]
		}
		if len(l) >= 30 {
			t.Errorf("line of %d columns on a 30-column terminal: %q", len(l), l)
		}
	}
}

// The head stream's line shows the tip, the lag and the pace, and says when
// it waits for confirmations; it logs one record per interval however many
// polls and batches happen in between.
func TestFollowProgress(t *testing.T) {
	clk := newClock()
	var out, logs bytes.Buffer
	term := New(Options{Out: &out, Terminal: ptr(true), Now: clk.Now, Width: func() int { return 80 }})
	lg := New(Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Terminal: ptr(false), Interval: 10 * time.Second, Now: clk.Now})
	for _, m := range []*Monitor{term, lg} {
		m.SetFollow(6)
		m.SetRange(1, 0) // follow without --to: no range end
	}
	frame := func() string {
		s := out.String()
		out.Reset()
		if i := strings.LastIndex(s, "\x1b[J"); i >= 0 {
			s = s[i+3:]
		}
		return strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\x1b[K")
	}
	step := func(tip, to uint64) {
		for _, m := range []*Monitor{term, lg} {
			m.SetTip(tip)
			m.FetchPlanned(tip - to) // a poll
			if to > 0 {
				m.Exported(to-9, to, []int{10, 30}, time.Millisecond, false)
			}
			m.tick(clk.Now(), false)
		}
	}
	step(1000, 0)
	if got, want := frame(), "follow at -  tip 1000  lag 1000  - h/s"; got != want {
		t.Errorf("before any export:\n got %q\nwant %q", got, want)
	}
	for i := 0; i < 10; i++ {
		clk.Add(time.Second)
		step(1000, 10*uint64(i+1))
	}
	if got, want := frame(), "follow at 100  tip 1000  lag 900  10 h/s  40 rows/s  eta 1m29s"; got != want {
		t.Errorf("catching up:\n got %q\nwant %q", got, want)
	}
	clk.Add(time.Second)
	step(1000, 994)
	if got := frame(); !strings.HasPrefix(got, "follow at 994  tip 1000  lag 6  ") || !strings.HasSuffix(got, "  waiting for 6 confirmations") {
		t.Errorf("caught up: %q", got)
	}
	if strings.Contains(out.String()+logs.String(), "planned") {
		t.Errorf("follow shows planned heights: %s", logs.String())
	}
	recs := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(recs) != 1 {
		t.Fatalf("want one record for 11 s of polls at a 10 s interval, got %d:\n%s", len(recs), logs.String())
	}
	var rec struct {
		Follow struct {
			Tip, Lag, Exported uint64
			HeightsPerS        *float64 `json:"heights_per_s"`
			Waiting            uint64   `json:"waiting_confirmations"`
		}
	}
	if err := json.Unmarshal([]byte(recs[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if f := rec.Follow; f.Tip != 1000 || f.Exported != 100 || f.Lag != 900 || f.HeightsPerS == nil || *f.HeightsPerS != 10 || f.Waiting != 0 {
		t.Errorf("follow record %s", recs[0])
	}
}

// Issue 20 §3: with export streams, progress counts what every stream has
// committed in its own sub-range, earlier runs' included, and the ETA is
// what remains at the streams' joint pace (before: the highest height any
// stream committed, so the second of two streams' first batch read as half
// the range done).
func TestProgressCountsEveryStreamsCommittedHeights(t *testing.T) {
	clk := newClock()
	m := New(Options{Out: io.Discard, Terminal: ptr(false), Now: clk.Now})
	m.SetTables([]string{"blocks"})
	m.SetRange(1, 12000)
	m.ExportStream(1, 6000, 1)
	m.ExportStream(6001, 12000, 7001) // 6001-7000 committed by an earlier run
	m.Exported(6001+1000, 7500, []int{500}, time.Millisecond, false)
	clk.Add(2 * time.Second)
	m.Exported(1, 500, []int{500}, time.Millisecond, false)
	m.tick(clk.Now(), false)
	clk.Add(2 * time.Second)
	m.Exported(501, 1000, []int{500}, time.Millisecond, false)
	m.tick(clk.Now(), false)

	m.mu.Lock()
	views := m.viewsLocked()
	m.mu.Unlock()
	v := views[len(views)-1]
	// 1-1000 and 6001-7500 are in PostgreSQL.
	if v.name != "export" || v.done != 2500 || v.total != 12000 || v.finished {
		t.Fatalf("export view %+v: want 2500 of 12000 done", v)
	}
	if !v.etaKnown || v.rate <= 0 || v.eta != time.Duration(float64(12000-2500)/v.rate*float64(time.Second)) {
		t.Fatalf("eta %v at %v h/s: want the 9500 heights left at that pace", v.eta, v.rate)
	}
	if line := renderLines(views, 200)[len(views)-1]; !strings.Contains(line, "2500/12.0k") {
		t.Fatalf("display %q: want 2500/12.0k", line)
	}

	// A stream that starts again (a retry) does not count its heights twice.
	m.ExportStream(6001, 12000, 7501)
	sum := m.Summary()
	if sum.Export.Done != 2500 || len(sum.Export.Streams) != 2 || sum.Export.Streams[0].Last != 1000 || sum.Export.Streams[1].Last != 7500 {
		t.Fatalf("summary export %+v", sum.Export)
	}
	sum.Command, sum.Complete = "run", false
	var b bytes.Buffer
	sum.WriteText(&b)
	for _, want := range []string{
		"checkpoint: stream 1 of 2 (heights 1-6000) at height 1000\n",
		"checkpoint: stream 2 of 2 (heights 6001-12000) at height 7500\n",
		"remaining: 9500 of 12000 heights not in PostgreSQL: 1001-6000, 7501-12000 (",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "checkpoint: height") {
		t.Errorf("summary gives one checkpoint for two streams:\n%s", b.String())
	}
}
