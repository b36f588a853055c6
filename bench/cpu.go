package bench

// CPUUsage is where the machine's CPU went during a run (known on Linux
// only): to the benchmark and the processes it started, to PostgreSQL, and
// to anything else. Other work makes every figure of the run doubtful.
type CPUUsage struct {
	Known bool `json:"known"`
	// Capacity is the run's wall time times the CPUs, in CPU-seconds.
	Capacity float64 `json:"capacity_s"`
	Bench    float64 `json:"bench_s"`
	Postgres float64 `json:"postgres_s"`
	Other    float64 `json:"other_s"`
}

// OtherShare is the share of the machine other work took.
func (u CPUUsage) OtherShare() float64 {
	if !u.Known || u.Capacity <= 0 {
		return 0
	}
	return u.Other / u.Capacity
}

// Busy reports whether other work took more than a tenth of the machine.
func (u CPUUsage) Busy() bool { return u.OtherShare() > 0.10 }

// cpuUsage is the CPU spent between two snapshots. Kernel threads working
// for the benchmark (writeback of its files) count as other work: a little
// of it is always there.
func cpuUsage(a, b cpuSnapshot, cpus int) CPUUsage {
	if !a.ok || !b.ok {
		return CPUUsage{}
	}
	u := CPUUsage{Known: true, Capacity: b.at.Sub(a.at).Seconds() * float64(cpus),
		Bench: b.self - a.self, Postgres: b.postgres - a.postgres}
	u.Other = max(0, (b.machine-a.machine)-u.Bench-u.Postgres)
	return u
}
