package bench

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// LoadCPU is where the CPU went during one load into PostgreSQL (known on
// Linux with PostgreSQL on this machine): to this process (blockhaul's
// export, or the baseline's COPY), to the load's own backends, to
// PostgreSQL's background writers (WAL writer, checkpointer, background
// writer), and to everything else. States is what pg_stat_activity showed
// the backends doing, sampled every Config.StateInterval: the share of
// samples in each state, "CPU" for running with no wait event, "Client:
// ClientRead" for waiting on blockhaul to send the next rows or statement.
type LoadCPU struct {
	Known   bool    `json:"known"`
	Seconds float64 `json:"seconds"` // wall time of the load
	// Machine is the CPU-seconds of the whole machine, Capacity its CPUs
	// times Seconds.
	Machine    float64   `json:"machine_s"`
	Capacity   float64   `json:"capacity_s"`
	Blockhaul  float64   `json:"blockhaul_s"`
	Backends   float64   `json:"backends_s"`
	PerBackend []float64 `json:"per_backend_s"`
	Writers    float64   `json:"writers_s"`
	Other      float64   `json:"other_s"`

	States       map[string]float64 `json:"states,omitempty"`
	StateSamples int                `json:"state_samples"`
}

// BackendBusy is the mean share of one core each backend used.
func (c LoadCPU) BackendBusy() float64 {
	if !c.Known || c.Seconds <= 0 || len(c.PerBackend) == 0 {
		return 0
	}
	return c.Backends / c.Seconds / float64(len(c.PerBackend))
}

// BlockhaulCores is the cores this process used on average.
func (c LoadCPU) BlockhaulCores() float64 {
	if !c.Known || c.Seconds <= 0 {
		return 0
	}
	return c.Blockhaul / c.Seconds
}

// Idle is the share of the machine nobody used during the load.
func (c LoadCPU) Idle() float64 {
	if !c.Known || c.Capacity <= 0 {
		return 0
	}
	return max(0, 1-c.Machine/c.Capacity)
}

// TopStates returns the states in decreasing share.
func (c LoadCPU) TopStates() []string {
	keys := make([]string, 0, len(c.States))
	for k := range c.States {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c.States[keys[i]] != c.States[keys[j]] {
			return c.States[keys[i]] > c.States[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// loadMonitor measures one load: CPU snapshots at its start and finish and
// a goroutine sampling the backends' states, which finish stops and waits
// for.
type loadMonitor struct {
	at0      cpuSnapshot
	pids     []int
	writers  []int
	backend0 []float64
	writer0  float64

	conn *pgx.Conn
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	states  map[string]int
	samples int
	err     error
}

// startLoadMonitor starts measuring a load whose backends are pids, on a
// connection of its own to url; a sample costs the server one small query.
func startLoadMonitor(ctx context.Context, url string, pids []int, every time.Duration) (*loadMonitor, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("bench: connect the load monitor: %w", err)
	}
	m := &loadMonitor{pids: pids, conn: conn, stop: make(chan struct{}), done: make(chan struct{}), states: map[string]int{}}
	if len(pids) > 0 {
		m.writers = postgresWriters(pids[0])
	}
	m.at0 = takeCPUSnapshot()
	m.backend0 = make([]float64, len(pids))
	for i, p := range pids {
		m.backend0[i], _ = processCPU(p)
	}
	m.writer0 = sumProcessCPU(m.writers)
	pids32 := make([]int32, len(pids))
	for i, p := range pids {
		pids32[i] = int32(p)
	}
	go func() {
		defer close(m.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample(ctx, pids32)
			}
		}
	}()
	return m, nil
}

func (m *loadMonitor) sample(ctx context.Context, pids []int32) {
	rows, err := m.conn.Query(ctx, `SELECT coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, '')
FROM pg_stat_activity WHERE pid = ANY($1)`, pids)
	if err != nil {
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
		return
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var state, typ, event string
		if err := rows.Scan(&state, &typ, &event); err != nil {
			break
		}
		got = append(got, stateName(state, typ, event))
	}
	if rows.Err() != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range got {
		m.states[s]++
		m.samples++
	}
}

// stateName names what a backend was doing: "CPU" when it ran with no wait
// event, else the wait event with its type ("IO:WALWrite").
func stateName(state, typ, event string) string {
	switch {
	case typ == "" && state == "active":
		return "CPU"
	case typ == "":
		return state // idle, idle in transaction: between statements
	default:
		return typ + ":" + event
	}
}

// finish stops the sampling and returns the load's figures.
func (m *loadMonitor) finish(ctx context.Context) LoadCPU {
	at1 := takeCPUSnapshot()
	var per []float64
	backendsOK := true
	for i, p := range m.pids {
		c, ok := processCPU(p)
		backendsOK = backendsOK && ok
		per = append(per, c-m.backend0[i])
	}
	writers := sumProcessCPU(m.writers) - m.writer0
	close(m.stop)
	<-m.done
	m.conn.Close(context.WithoutCancel(ctx))

	c := LoadCPU{Seconds: at1.at.Sub(m.at0.at).Seconds(), StateSamples: m.samples}
	if m.samples > 0 {
		c.States = map[string]float64{}
		for k, n := range m.states {
			c.States[k] = float64(n) / float64(m.samples)
		}
	}
	if !m.at0.ok || !at1.ok || !backendsOK || len(m.pids) == 0 {
		return c
	}
	c.Known = true
	c.Machine = at1.machine - m.at0.machine
	c.Capacity = c.Seconds * float64(runtime.NumCPU())
	c.Blockhaul = at1.self - m.at0.self
	c.PerBackend = per
	for _, v := range per {
		c.Backends += v
	}
	c.Writers = writers
	c.Other = max(0, c.Machine-c.Blockhaul-c.Backends-c.Writers)
	return c
}

func sumProcessCPU(pids []int) float64 {
	var s float64
	for _, p := range pids {
		c, _ := processCPU(p)
		s += c
	}
	return s
}
