package bench

import (
	"math"
	"testing"
)

func TestPostgresStatCPU(t *testing.T) {
	tests := []struct {
		stat string
		want float64
	}{
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime …
		{"2201 (postgres) S 1 2201 2201 0 -1 4194304 44851 8977180 0 293 32 141 54297 17914 20 0 1 0", (32 + 141 + 54297 + 17914) / 100.0},
		{"77 (postgres) R 2201 2201 2201 0 -1 4194304 1 2 3 4 250 50 0 0 20 0 1 0", 3},
		{"78 (go) R 1 1 1 0 -1 0 1 2 3 4 250 50 0 0 20 0 1 0", 0},
		{"79 (my (postgres)) R 1 1 1 0 -1 0 1 2 3 4 250 50 0 0 20 0 1 0", 0},
		{"80 (postgres) R 1", 0},
	}
	for _, tc := range tests {
		if got := postgresStatCPU(tc.stat); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("postgresStatCPU(%q) = %v, want %v", tc.stat, got, tc.want)
		}
	}
	s := takeCPUSnapshot()
	if !s.ok || s.machine <= 0 || s.self <= 0 {
		t.Errorf("snapshot of this machine: %+v", s)
	}
}
