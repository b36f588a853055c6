package bench

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
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

func TestStatFieldsAndWriterTitles(t *testing.T) {
	ppid, cpu, ok := statFields("77 (postgres: 15/main: walwriter ) S 2212 2212 2212 0 -1 4194304 1 2 3 4 250 50 7 8 20 0 1 0")
	if !ok || ppid != 2212 || math.Abs(cpu-3) > 1e-9 {
		t.Errorf("statFields = %d, %v, %v; want 2212, 3, true", ppid, cpu, ok)
	}
	if _, _, ok := statFields("77 (postgres) S 2212"); ok {
		t.Error("a short stat line was read")
	}
	for title, want := range map[string]bool{
		"postgres: 15/main: walwriter \x00":                        true,
		"postgres: 15/main: checkpointer \x00":                     true,
		"postgres: background writer   \x00":                       true,
		"postgres: 15/main: postgres db 127.0.0.1(60174) COPY\x00": false,
		"postgres: 15/main: autovacuum launcher \x00":              false,
		"/usr/lib/postgresql/15/bin/postgres -D /var/lib/x\x00":    false,
	} {
		if got := isWriterTitle(title); got != want {
			t.Errorf("isWriterTitle(%q) = %v, want %v", title, got, want)
		}
	}
}

// TestPostgresWritersOfALocalServer finds the background writers of the
// test server from one of its backends; the server must be on this
// machine, as the benchmark's is.
func TestPostgresWritersOfALocalServer(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, ok := processCPU(pid); !ok {
		t.Fatalf("backend %d is not a process of this machine", pid)
	}
	ws := postgresWriters(pid)
	if len(ws) < 2 || slices.Contains(ws, pid) { // the WAL writer and the checkpointer at least
		t.Errorf("writers of the server of backend %d: %v", pid, ws)
	}
}
