// Package monitor is blockhaul's observability while a job runs: a progress
// display (redrawn in place on a terminal, periodic structured log lines
// otherwise), Prometheus metrics, health and readiness endpoints, and the
// summary printed at the end.
//
// The engines know nothing of it: the job that wires them forwards their
// hooks (loader.Config.OnCommit, export.Config.OnBatch, the RPC client's
// Observer) to a Monitor's event methods, which are cheap enough to be called
// once per batch or per request. A Monitor owns no global state: its metrics
// live on the registry it was given or created.
//
// Typical use on a shared stderr, so that log lines appear above the
// progress display rather than being overwritten by it:
//
//	con := monitor.NewConsole(os.Stderr)
//	log := slog.New(slog.NewTextHandler(con, nil))
//	m := monitor.New(monitor.Options{Logger: log, Out: con})
//	m.Start(ctx)
//	defer m.Stop()
package monitor

import (
	"cmp"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultInterval is the period of progress log lines when the output is not
// a terminal.
const DefaultInterval = 10 * time.Second

// redrawPeriod is how often a terminal display is redrawn: often enough to
// look live, rarely enough to cost nothing.
const redrawPeriod = 250 * time.Millisecond

// RetrySpan is the reason to give Retry for a span the loader fetches again
// (as opposed to a request the RPC client retries, whose reason is its
// outcome).
const RetrySpan = "span"

// OutcomeOK is the outcome of a successful request; Summary counts every
// other outcome as failed. It matches the RPC client's own constant.
const OutcomeOK = "ok"

// Options configures a Monitor. The zero value is usable.
type Options struct {
	// Logger receives the progress lines when Out is not a terminal.
	// Default: a text logger on Out.
	Logger *slog.Logger
	// Out receives the terminal display. Pass the *Console your logger
	// writes to so that the two do not garble each other. Default: a
	// Console on os.Stderr.
	Out io.Writer
	// Terminal forces the display mode; nil detects it from Out (a
	// character device other than the null device, and TERM not "dumb").
	Terminal *bool
	// Interval is the period of progress log lines when Out is not a
	// terminal. Default DefaultInterval.
	Interval time.Duration
	// Registry receives the metrics, including the Go and process
	// collectors. It must not hold them already. Default: a new registry.
	Registry *prometheus.Registry
	// Now is the clock used for rates, ETAs and durations. Default
	// time.Now.
	Now func() time.Time
	// Width returns the terminal's width in columns, asked at every
	// redraw so that the display follows a resize; 0 means unknown.
	// Default: the window size of Out's terminal, else $COLUMNS, else
	// DefaultWidth.
	Width func() int
}

// Monitor observes one job. Its event methods are safe for concurrent use
// and may be called before Start and after Stop. Start runs the progress
// display; Stop ends it and waits for it, so nothing the Monitor started
// outlives Stop.
type Monitor struct {
	log      *slog.Logger
	con      *Console
	terminal bool
	widthFn  func() int
	interval time.Duration
	now      func() time.Time
	reg      *prometheus.Registry
	met      *metrics

	mu sync.Mutex
	st state // guarded by mu

	loopMu  sync.Mutex // serialises Start and Stop
	cancel  func()
	done    chan struct{}
	stopped bool
}

// state is what the progress display and the summary are computed from.
type state struct {
	created, ended time.Time

	from, to uint64
	rangeSet bool
	tables   []string
	rowsCtr  []prometheus.Counter // per table, in tables order

	fetchAnnounced bool
	fetchPlanned   uint64
	fetchStart     time.Time
	fetchLast      time.Time
	fetched        uint64
	staged         uint64
	rawBytes       int64
	storedBytes    int64

	exportAnnounced bool
	exportNext      uint64
	exportStart     time.Time
	exportLast      time.Time
	exported        uint64
	rows            []uint64 // per table, in tables order
	totalRows       uint64
	batches         uint64
	conflicts       uint64
	last            uint64 // the highest height committed by any stream
	lastValid       bool
	// streams are the export streams the range is split into, in height
	// order, as they started (ExportStream); empty when none said so.
	streams []exportStream

	requests, failed, retries uint64
	pgRetries                 uint64

	fetchRate, bytesRate, exportRate, rowsRate meter
	lastLog                                    time.Time

	ready  bool
	reason string

	endpoints func() []EndpointHealth // see WatchEndpoints
	tip       uint64
	tipKnown  bool

	follow        bool
	confirmations uint64
	reorgs        uint64
}

// New returns a Monitor and registers its metrics. It panics if the
// registry already holds blockhaul's metrics or the Go and process
// collectors: that is a wiring mistake, not a runtime condition.
func New(opts Options) *Monitor {
	m := &Monitor{interval: opts.Interval, now: opts.Now, reg: opts.Registry}
	if m.now == nil {
		m.now = time.Now
	}
	if m.interval <= 0 {
		m.interval = DefaultInterval
	}
	if m.reg == nil {
		m.reg = prometheus.NewRegistry()
	}
	out := opts.Out
	if out == nil {
		out = os.Stderr
	}
	if c, ok := out.(*Console); ok {
		m.con = c
	} else {
		m.con = NewConsole(out)
	}
	if opts.Terminal != nil {
		m.terminal = *opts.Terminal
	} else {
		m.terminal = isTerminal(m.con.w)
	}
	m.widthFn = opts.Width
	if m.widthFn == nil {
		w := m.con.w
		m.widthFn = func() int { return TerminalWidth(w) }
	}
	if m.terminal {
		m.con.setWidth(m.width)
	}
	m.log = opts.Logger
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(m.con, nil))
	}
	m.met = newMetrics(m.reg)
	m.PublishRetryReasons(RetrySpan)
	m.reg.MustRegister(newEndpointCollector(m), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "blockhaul", Name: "ready",
		Help: "1 while the job is in its main phase, not failing, and has a healthy RPC endpoint if it uses any (what /readyz answers).",
	}, func() float64 {
		if ok, _ := m.readiness(); ok {
			return 1
		}
		return 0
	}))
	m.st.created = m.now()
	m.st.reason = "starting"
	return m
}

// width is the width the display fits now.
func (m *Monitor) width() int {
	if w := m.widthFn(); w > 0 {
		return w
	}
	return DefaultWidth
}

// Registry returns the registry the metrics live on.
func (m *Monitor) Registry() *prometheus.Registry { return m.reg }

// Terminal reports whether progress is drawn in place rather than logged.
func (m *Monitor) Terminal() bool { return m.terminal }

// SetRange records the job's inclusive height range: the export phase's
// progress is measured against it.
func (m *Monitor) SetRange(from, to uint64) {
	m.met.rangeFrom.Set(float64(from))
	m.met.rangeTo.Set(float64(to))
	m.mu.Lock()
	m.st.from, m.st.to, m.st.rangeSet = from, to, true
	m.met.rangeExported.Set(float64(m.rangeExportedLocked()))
	m.mu.Unlock()
}

// SetTables names the tables in the order of the rows slices given to
// Exported (the decoder's order). Their row counters start at zero so that
// dashboards see every table from the start.
func (m *Monitor) SetTables(names []string) {
	ctrs := make([]prometheus.Counter, len(names))
	for i, n := range names {
		ctrs[i] = m.met.rows.WithLabelValues(n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.tables = append([]string(nil), names...)
	m.st.rowsCtr = ctrs
	if len(m.st.rows) < len(names) {
		m.st.rows = append(m.st.rows, make([]uint64, len(names)-len(m.st.rows))...)
	}
}

// FetchPlanned starts the fetch phase: n heights are missing from staging
// and will be fetched.
//
// A job that fetches more than once (follow, at every poll) calls it each
// time: the heights planned add up and the phase keeps its first start.
func (m *Monitor) FetchPlanned(n uint64) {
	m.mu.Lock()
	if !m.st.fetchAnnounced {
		m.st.fetchAnnounced, m.st.fetchStart = true, m.now()
	}
	m.st.fetchPlanned += n
	planned := m.st.fetchPlanned
	m.mu.Unlock()
	m.met.planned.Set(float64(planned))
}

// SetFollow says the job is the head stream, exporting what lies
// confirmations below the tip: progress shows the tip, the lag behind it
// and the pace, and says when the stream waits for confirmations.
func (m *Monitor) SetFollow(confirmations uint64) {
	m.mu.Lock()
	m.st.follow, m.st.confirmations = true, confirmations
	m.mu.Unlock()
}

// Fetched counts blocks the source returned (before they are staged).
func (m *Monitor) Fetched(blocks int) {
	if blocks <= 0 {
		return
	}
	m.met.fetched.Add(float64(blocks))
	m.mu.Lock()
	m.st.fetched += uint64(blocks)
	m.mu.Unlock()
}

// Staged records one staging commit: blocks written, their raw and stored
// (compressed) sizes, and how long the commit took.
func (m *Monitor) Staged(blocks int, raw, stored int64, commit time.Duration) {
	m.met.staged.Add(float64(blocks))
	m.met.rawBytes.Add(float64(raw))
	m.met.storedBytes.Add(float64(stored))
	m.met.stageCommit.Observe(commit.Seconds())
	m.mu.Lock()
	m.st.staged += uint64(blocks)
	m.st.rawBytes += raw
	m.st.storedBytes += stored
	m.st.fetchLast = m.now()
	ratio := compressionRatio(m.st.rawBytes, m.st.storedBytes)
	m.mu.Unlock()
	m.met.ratio.Set(ratio)
}

// ExportPlanned starts the export phase of the whole range as one stream;
// next is the first height it will export (heights of the range below it
// were exported by earlier runs).
func (m *Monitor) ExportPlanned(next uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.exportAnnounced, m.st.exportNext, m.st.exportStart = true, next, m.now()
	if m.st.rangeSet {
		m.exportStreamLocked(m.st.from, m.st.to, next)
	}
}

// ExportStream says that the export stream of the sub-range [from, to] of
// the job's range has started (or started again) with next the first height
// it will export: the heights below it were committed by earlier runs.
// Progress, its ETA and the summary count what every stream has committed,
// each in its own sub-range. It starts the export phase.
func (m *Monitor) ExportStream(from, to, next uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.st.exportAnnounced {
		m.st.exportAnnounced, m.st.exportNext, m.st.exportStart = true, next, m.now()
	}
	m.exportStreamLocked(from, to, next)
}

func (m *Monitor) exportStreamLocked(from, to, next uint64) {
	s := &m.st
	i, found := slices.BinarySearchFunc(s.streams, from, func(e exportStream, h uint64) int { return cmp.Compare(e.from, h) })
	if found && s.streams[i].to == to {
		s.streams[i].next = max(s.streams[i].next, next)
	} else {
		s.streams = slices.Insert(s.streams, i, exportStream{from: from, to: to, next: next})
	}
	m.met.rangeExported.Set(float64(m.rangeExportedLocked()))
}

// exportStream is one export stream's sub-range and how much of it
// PostgreSQL holds.
type exportStream struct {
	from, to  uint64
	next      uint64 // the first height not committed when it (last) started
	last      uint64 // the last height it committed, if lastValid
	lastValid bool
}

// committed is how many heights of the stream's sub-range are committed:
// those below where it started and those it committed since.
func (e exportStream) committed() uint64 {
	top := e.next // one past the last committed height
	if e.lastValid && e.last >= top {
		top = e.last + 1
	}
	top = min(top, e.to+1)
	if top <= e.from {
		return 0
	}
	return top - e.from
}

// rangeExportedLocked is how many heights of the range PostgreSQL holds, by
// every stream: from the streams when they were told, else from the last
// height committed (one stream).
func (m *Monitor) rangeExportedLocked() uint64 {
	s := &m.st
	if len(s.streams) > 0 {
		var n uint64
		for _, e := range s.streams {
			n += e.committed()
		}
		return n
	}
	switch {
	case !s.rangeSet:
		return 0
	case s.lastValid && s.last >= s.from:
		return min(s.last, s.to) - s.from + 1
	case s.exportAnnounced && s.exportNext > s.from:
		return s.exportNext - s.from
	}
	return 0
}

// SetExported records the head's last exported height as its checkpoint
// holds it when the job starts, before the job commits anything itself, so
// that /metrics says where the target is (not 0) while the job waits.
func (m *Monitor) SetExported(h uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.st.lastValid || h > m.st.last {
		m.st.last, m.st.lastValid = h, true
		m.met.last.Set(float64(h))
	}
	if lag, ok := m.lagLocked(); ok {
		m.met.lag.Set(float64(lag))
	}
}

// Exported records one committed export batch of heights [from, to]: rows
// per table in SetTables order, the commit's duration, and whether the batch
// was merged after colliding with rows already present.
func (m *Monitor) Exported(from, to uint64, rows []int, commit time.Duration, conflicted bool) {
	m.exported(from, to, rows, commit, conflicted, true)
}

// BackfillExported records a batch committed by a backfill that runs beside
// the head stream in the same job: it counts in the job's blocks, rows,
// batches and conflicts, but the last exported height and the lag stay the
// head's.
func (m *Monitor) BackfillExported(from, to uint64, rows []int, commit time.Duration, conflicted bool) {
	m.exported(from, to, rows, commit, conflicted, false)
}

func (m *Monitor) exported(from, to uint64, rows []int, commit time.Duration, conflicted, head bool) {
	blocks := uint64(0)
	if to >= from {
		blocks = to - from + 1
	}
	m.met.exported.Add(float64(blocks))
	m.met.batches.Inc()
	m.met.exportCommit.Observe(commit.Seconds())
	if conflicted {
		m.met.conflicts.Inc()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.st.rowsCtr) < len(rows) {
		// A table SetTables did not name still gets counted, by position.
		i := len(m.st.rowsCtr)
		name := "table_" + strconv.Itoa(i)
		m.st.tables = append(m.st.tables, name)
		m.st.rowsCtr = append(m.st.rowsCtr, m.met.rows.WithLabelValues(name))
		m.st.rows = append(m.st.rows, 0)
	}
	for i, n := range rows {
		if n <= 0 {
			continue
		}
		m.st.rowsCtr[i].Add(float64(n))
		m.st.rows[i] += uint64(n)
		m.st.totalRows += uint64(n)
	}
	m.st.exported += blocks
	m.st.batches++
	if conflicted {
		m.st.conflicts++
	}
	if head && (!m.st.lastValid || to > m.st.last) {
		m.st.last, m.st.lastValid = to, true
		m.met.last.Set(float64(to))
	}
	for i := range m.st.streams {
		e := &m.st.streams[i]
		if from >= e.from && from <= e.to {
			if !e.lastValid || to > e.last {
				e.last, e.lastValid = to, true
			}
			break
		}
	}
	m.met.rangeExported.Set(float64(m.rangeExportedLocked()))
	m.st.exportLast = m.now()
	if lag, ok := m.lagLocked(); ok {
		m.met.lag.Set(float64(lag))
	}
}

// Request records one RPC request to endpoint, which must already be
// redacted. Together with Retry it makes a Monitor a jsonrpc.Observer.
func (m *Monitor) Request(endpoint, method, outcome string, d time.Duration) {
	m.met.requests.WithLabelValues(endpoint, method, outcome).Inc()
	m.met.requestDur.WithLabelValues(endpoint).Observe(d.Seconds())
	m.mu.Lock()
	m.st.requests++
	if outcome != OutcomeOK {
		m.st.failed++
	}
	m.mu.Unlock()
}

// Retry records a retry for reason. Retries are counted by reason only:
// endpoint (redacted, possibly empty) is accepted so that a Monitor is a
// jsonrpc.Observer, and per-endpoint failures show in the request counter.
func (m *Monitor) Retry(endpoint, reason string) {
	m.met.retries.WithLabelValues(reason).Inc()
	m.mu.Lock()
	m.st.retries++
	m.mu.Unlock()
}

// PGRetry records an operation on PostgreSQL tried again after a transient
// fault of cause (export.TransientCause's labels).
func (m *Monitor) PGRetry(cause string) {
	m.met.pgRetries.WithLabelValues(cause).Inc()
	m.mu.Lock()
	m.st.pgRetries++
	m.mu.Unlock()
}

// SetReady sets what /readyz answers: ready once the job has started its
// main phase and is not failing; reason says why not, when not.
func (m *Monitor) SetReady(ok bool, reason string) {
	m.mu.Lock()
	m.st.ready, m.st.reason = ok, reason
	m.mu.Unlock()
}

// readiness returns what SetReady last set, unless no RPC endpoint is
// healthy: a job that cannot reach a node is not ready, whatever its phase.
func (m *Monitor) readiness() (bool, string) {
	m.mu.Lock()
	ok, reason := m.st.ready, m.st.reason
	m.mu.Unlock()
	if ok {
		if why := noHealthyEndpoint(m.endpointHealth()); why != "" {
			return false, why
		}
	}
	return ok, reason
}

func compressionRatio(raw, stored int64) float64 {
	if stored <= 0 {
		return 0
	}
	return float64(raw) / float64(stored)
}
