//go:build !linux

package bench

import "time"

// cpuSnapshot is unknown outside Linux: the report then says nothing of
// other work on the machine.
type cpuSnapshot struct {
	at                      time.Time
	machine, self, postgres float64
	ok                      bool
}

func takeCPUSnapshot() cpuSnapshot { return cpuSnapshot{at: time.Now()} }

func processCPU(int) (float64, bool) { return 0, false }

func postgresWriters(int) []int { return nil }
