package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// rateWindow is the span rates are averaged over: long enough to smooth the
// steps of batch commits, short enough to follow a change of pace.
const rateWindow = 10 * time.Second

// minRateSpan is the shortest span a rate is given for: one batch landing
// just after the first sample would otherwise show an absurd rate.
const minRateSpan = time.Second

// meter turns samples of a growing count into a rate averaged over the last
// rateWindow.
type meter struct {
	samples []point // oldest first; the first is at or before now-rateWindow
}

type point struct {
	t time.Time
	v float64
}

func (r *meter) sample(now time.Time, v float64) {
	r.samples = append(r.samples, point{now, v})
	cut := now.Add(-rateWindow)
	i := 0
	for i+1 < len(r.samples) && !r.samples[i+1].t.After(cut) {
		i++
	}
	if i > 0 {
		n := copy(r.samples, r.samples[i:])
		r.samples = r.samples[:n]
	}
}

// rate returns the count's growth per second, if the samples span enough
// time to tell.
func (r *meter) rate() (float64, bool) {
	if len(r.samples) < 2 {
		return 0, false
	}
	first, last := r.samples[0], r.samples[len(r.samples)-1]
	dt := last.t.Sub(first.t)
	if dt < minRateSpan {
		return 0, false
	}
	return (last.v - first.v) / dt.Seconds(), true
}

// phaseView is one progress line: a phase's position, pace and ETA.
type phaseView struct {
	name       string // "fetch" or "export"
	done       uint64 // heights
	total      uint64
	totalKnown bool
	rate       float64 // heights/s
	aux        float64 // fetch: raw bytes/s; export: rows/s
	rateKnown  bool
	eta        time.Duration
	etaKnown   bool
	finished   bool

	// The head stream's line (name "follow"): done is the last height
	// exported, tip the chain's, lag the heights between them.
	follow    bool
	tip, lag  uint64
	tipKnown  bool
	doneKnown bool
	waiting   uint64 // confirmations waited for, when caught up; else 0
}

// Start runs the progress display until ctx ends or Stop is called: redrawn
// about four times a second on a terminal, else logged every Interval. It
// returns at once. Calling it again, or after Stop, does nothing.
func (m *Monitor) Start(ctx context.Context) {
	m.loopMu.Lock()
	defer m.loopMu.Unlock()
	if m.done != nil || m.stopped {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	m.done = make(chan struct{})
	period := redrawPeriod
	if !m.terminal {
		period = min(m.interval, time.Second)
	}
	var resized chan os.Signal
	if m.terminal {
		// A resize redraws at once, at the new width.
		resized = make(chan os.Signal, 1)
		signal.Notify(resized, unix.SIGWINCH)
	}
	m.tick(m.now(), false)
	go m.loop(ctx, period, m.done, resized)
}

// Stop ends the display and waits for it, then shows the final progress (a
// last redraw left on screen, or a last log line) and fixes the job's
// duration. It is safe to call more than once, and without Start.
func (m *Monitor) Stop() {
	m.loopMu.Lock()
	defer m.loopMu.Unlock()
	if m.stopped {
		return
	}
	m.stopped = true
	now := m.now()
	if m.done != nil {
		m.cancel()
		<-m.done
		m.tick(now, true)
		m.con.release()
	}
	m.mu.Lock()
	m.st.ended = now
	m.mu.Unlock()
}

// loop redraws or logs every period, and at once on a value from resized
// (SIGWINCH; nil when not a terminal), which it stops at its end.
func (m *Monitor) loop(ctx context.Context, period time.Duration, done chan<- struct{}, resized chan os.Signal) {
	defer close(done)
	if resized != nil {
		defer signal.Stop(resized)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.tick(m.now(), false)
		case <-resized:
			m.tick(m.now(), false)
		}
	}
}

// tick samples the rates and shows the progress: a redraw on a terminal,
// a log line when Interval has passed (or final) otherwise.
func (m *Monitor) tick(now time.Time, final bool) {
	m.mu.Lock()
	m.sampleLocked(now)
	views := m.viewsLocked()
	logDue := false
	if !m.terminal {
		if m.st.lastLog.IsZero() {
			m.st.lastLog = now
		}
		if final || now.Sub(m.st.lastLog) >= m.interval {
			logDue, m.st.lastLog = true, now
		}
	}
	m.mu.Unlock()
	switch {
	case m.terminal:
		m.con.draw(renderLines(views, m.width()))
	case logDue && len(views) > 0:
		m.log.LogAttrs(context.Background(), slog.LevelInfo, "progress", logAttrs(views)...)
	}
}

func (m *Monitor) sampleLocked(now time.Time) {
	s := &m.st
	s.fetchRate.sample(now, float64(s.staged))
	s.bytesRate.sample(now, float64(s.rawBytes))
	s.exportRate.sample(now, float64(s.exported))
	s.rowsRate.sample(now, float64(s.totalRows))
}

// viewsLocked returns the lines of the phases that have begun, or the
// head stream's one line.
func (m *Monitor) viewsLocked() []phaseView {
	s := &m.st
	if s.follow {
		return m.followViewLocked()
	}
	var views []phaseView
	if s.fetchAnnounced || s.staged > 0 {
		v := phaseView{name: "fetch", done: s.staged, total: s.fetchPlanned, totalKnown: s.fetchAnnounced}
		v.finished = v.totalKnown && v.done >= v.total
		start := s.fetchStart
		if start.IsZero() {
			start = s.created
		}
		pace(&v, &s.fetchRate, &s.bytesRate, float64(s.staged), float64(s.rawBytes), s.fetchLast.Sub(start))
		views = append(views, v)
	}
	if s.exportAnnounced || s.exported > 0 {
		v := phaseView{name: "export", done: s.exported}
		if s.rangeSet && s.to >= s.from {
			v.total, v.totalKnown = s.to-s.from+1, true
			// Heights of the range PostgreSQL holds rather than heights of
			// this run, so a resumed job shows what is left; with export
			// streams, each stream's in its own sub-range.
			v.done = m.rangeExportedLocked()
			v.finished = v.done >= v.total
		}
		start := s.exportStart
		if start.IsZero() {
			start = s.created
		}
		pace(&v, &s.exportRate, &s.rowsRate, float64(s.exported), float64(s.totalRows), s.exportLast.Sub(start))
		views = append(views, v)
	}
	return views
}

// followViewLocked is the head stream's line, once the tip is known.
func (m *Monitor) followViewLocked() []phaseView {
	s := &m.st
	if !s.tipKnown {
		return nil
	}
	v := phaseView{name: "follow", follow: true, tip: s.tip, tipKnown: true, done: s.last, doneKnown: s.lastValid}
	if lag, ok := m.lagLocked(); ok {
		v.lag = lag
	} else if s.tip >= s.from {
		v.lag = s.tip - s.from + 1
	}
	if s.confirmations > 0 && v.lag <= s.confirmations {
		// Caught up: the next height is exported once it is confirmed.
		v.waiting = s.confirmations
	}
	v.rate, v.rateKnown = s.exportRate.rate()
	v.aux, _ = s.rowsRate.rate()
	if v.rateKnown && v.rate > 0 && v.lag > s.confirmations {
		sec := float64(v.lag-s.confirmations) / v.rate
		if sec < float64(math.MaxInt64/int64(time.Second)) {
			v.eta, v.etaKnown = time.Duration(sec*float64(time.Second)), true
		}
	}
	return []phaseView{v}
}

// pace fills v's rates and ETA. A finished phase shows its average over the
// whole phase: the recent rate of a phase that stopped decays to nothing.
func pace(v *phaseView, heights, aux *meter, n, auxN float64, phase time.Duration) {
	if v.totalKnown && v.done > v.total {
		v.done = v.total
	}
	if v.finished {
		if phase > 0 {
			v.rate, v.aux, v.rateKnown = n/phase.Seconds(), auxN/phase.Seconds(), true
		}
		return
	}
	v.rate, v.rateKnown = heights.rate()
	v.aux, _ = aux.rate()
	if v.rateKnown && v.rate > 0 && v.totalKnown {
		sec := float64(v.total-v.done) / v.rate
		if sec < float64(math.MaxInt64/int64(time.Second)) {
			v.eta, v.etaKnown = time.Duration(sec*float64(time.Second)), true
		}
	}
}

// DefaultWidth is the width the display fits when the terminal's is
// unknown.
const DefaultWidth = 80

// segment is one field of a progress line. A line too wide for the
// terminal drops its segments of lowest keep first, so that what matters
// most (the position, the ETA) stays on screen.
type segment struct {
	text  string
	keep  int
	tight bool // one space before it rather than two (a percentage after its bar)
}

// renderLines draws each view as one line that fits width columns (less
// one: a line that reaches the last column wraps on some terminals), so
// that a redraw in place never wraps and scrolls.
func renderLines(views []phaseView, width int) []string {
	if width <= 0 {
		width = DefaultWidth
	}
	lines := make([]string, len(views))
	for i, v := range views {
		lines[i] = fit(fmt.Sprintf("%-6s", v.name), segments(v), width-1)
	}
	return lines
}

// segments are the fields of v's line, in order.
func segments(v phaseView) []segment {
	var segs []segment
	add := func(keep int, tight bool, format string, args ...any) {
		segs = append(segs, segment{text: fmt.Sprintf(format, args...), keep: keep, tight: tight})
	}
	if v.follow {
		if v.doneKnown {
			add(5, false, "at %d", v.done)
		} else {
			add(5, false, "at -")
		}
		add(6, false, "tip %d", v.tip)
		add(8, false, "lag %d", v.lag)
		if v.rateKnown {
			add(4, false, "%s h/s", count(v.rate))
			add(1, false, "%s rows/s", count(v.aux))
		} else {
			add(4, false, "- h/s")
		}
		switch {
		case v.waiting > 0:
			add(7, false, "waiting for %d confirmations", v.waiting)
		case v.lag == 0:
			add(7, false, "at the tip")
		case v.etaKnown:
			add(3, false, "eta %s", duration(v.eta))
		}
		return segs
	}
	if v.totalKnown {
		frac := 1.0
		if v.total > 0 {
			frac = float64(v.done) / float64(v.total)
		}
		add(2, false, "%s", bar(frac, 10))
		add(8, true, "%5.1f%%", frac*100)
		add(3, false, "%s/%s", count(float64(v.done)), count(float64(v.total)))
	} else {
		add(6, false, "%s", count(float64(v.done)))
	}
	if v.rateKnown {
		add(5, false, "%s h/s", count(v.rate))
		if v.name == "fetch" {
			add(1, false, "%s MB/s", mbRate(v.aux))
		} else {
			add(1, false, "%s rows/s", count(v.aux))
		}
	} else {
		add(5, false, "- h/s")
	}
	switch {
	case v.finished:
		add(7, false, "done")
	case v.etaKnown:
		add(4, false, "eta %s", duration(v.eta))
	default:
		add(4, false, "eta -")
	}
	return segs
}

// fit joins name and the segments that fit in width columns, dropping the
// segments of lowest keep first; a line that still does not fit is cut.
func fit(name string, segs []segment, width int) string {
	kept := make([]bool, len(segs))
	for i := range kept {
		kept[i] = true
	}
	join := func() string {
		var b strings.Builder
		b.WriteString(name)
		first := true
		prevBar := false
		for i, s := range segs {
			if !kept[i] {
				continue
			}
			switch {
			case first || (s.tight && prevBar):
				b.WriteString(" ")
			default:
				b.WriteString("  ")
			}
			b.WriteString(s.text)
			first, prevBar = false, strings.HasPrefix(s.text, "[")
		}
		return b.String()
	}
	line := join()
	for n := len(segs); len(line) > width && n > 1; n-- {
		// The last segment standing is cut rather than dropped.
		drop := -1
		for i, s := range segs {
			if kept[i] && (drop < 0 || s.keep < segs[drop].keep) {
				drop = i
			}
		}
		kept[drop] = false
		line = join()
	}
	if len(line) > width {
		line = line[:max(width, 0)]
	}
	return line
}

// logAttrs gives each view as a group of attributes, numbers as numbers so
// that a log pipeline can graph them.
func logAttrs(views []phaseView) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(views))
	for _, v := range views {
		if v.follow {
			a := []any{slog.Uint64("tip", v.tip), slog.Uint64("lag", v.lag)}
			if v.doneKnown {
				a = append(a, slog.Uint64("exported", v.done))
			}
			if v.rateKnown {
				a = append(a, slog.Float64("heights_per_s", round1(v.rate)), slog.Float64("rows_per_s", round1(v.aux)))
			}
			if v.waiting > 0 {
				a = append(a, slog.Uint64("waiting_confirmations", v.waiting))
			}
			attrs = append(attrs, slog.Group(v.name, a...))
			continue
		}
		a := []any{slog.Uint64("done", v.done)}
		if v.totalKnown {
			a = append(a, slog.Uint64("total", v.total))
		}
		if v.rateKnown {
			a = append(a, slog.Float64("heights_per_s", round1(v.rate)))
			if v.name == "fetch" {
				a = append(a, slog.Float64("mb_per_s", round1(v.aux/1e6)))
			} else {
				a = append(a, slog.Float64("rows_per_s", round1(v.aux)))
			}
		}
		if v.finished {
			a = append(a, slog.Bool("finished", true))
		} else if v.etaKnown {
			a = append(a, slog.Int64("eta_s", int64(v.eta.Round(time.Second)/time.Second)))
		}
		attrs = append(attrs, slog.Group(v.name, a...))
	}
	return attrs
}

func bar(frac float64, width int) string {
	frac = max(0, min(1, frac))
	n := int(frac * float64(width))
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}

// count shows a number in at most six characters: exact below ten
// thousand, else in three significant digits with a k, M or G suffix.
func count(x float64) string {
	var v float64
	var suffix string
	switch {
	case x < 1e4:
		return fmt.Sprintf("%.0f", x)
	case x < 1e6:
		v, suffix = x/1e3, "k"
	case x < 1e9:
		v, suffix = x/1e6, "M"
	default:
		v, suffix = x/1e9, "G"
	}
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f%s", v, suffix)
	case v < 100:
		return fmt.Sprintf("%.1f%s", v, suffix)
	default:
		return fmt.Sprintf("%.0f%s", v, suffix)
	}
}

// mbRate shows a byte rate in MB, to a tenth below ten thousand.
func mbRate(bytes float64) string {
	mb := bytes / 1e6
	if mb < 1e4 {
		return fmt.Sprintf("%.1f", mb)
	}
	return count(mb)
}

// duration shows an ETA to the second below an hour, to the minute above.
func duration(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int64(d/time.Hour), int64(d%time.Hour/time.Minute), int64(d%time.Minute/time.Second)
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	default:
		return fmt.Sprintf("%ds", s)
	}
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }
