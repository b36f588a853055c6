//go:build unix

package evm

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU reports the process's CPU time per iteration (user and
// system, garbage collection included) beside the wall-clock ns/op: on a
// shared machine the wall clock measures the neighbours too. Call it with
// the loop's first iteration's start; it reports when the benchmark ends.
func reportCPU(b *testing.B) {
	start := cpuTime()
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	})
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
