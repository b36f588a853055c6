package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Machine is what a result was measured on.
type Machine struct {
	Host        string `json:"host"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel,omitempty"`
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpu_model,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	GoVersion   string `json:"go_version"`
	PostgreSQL  string `json:"postgresql"`
}

func machineInfo(ctx context.Context, databaseURL string) (Machine, error) {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryBytes = memTotal(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return m, fmt.Errorf("bench: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&m.PostgreSQL); err != nil {
		return m, fmt.Errorf("bench: PostgreSQL version: %w", err)
	}
	return m, nil
}

// cpuModel returns the first "model name" of a /proc/cpuinfo text (the
// "Hardware" or "cpu model" line on machines that have no model name).
func cpuModel(cpuinfo string) string {
	var fallback string
	sc := bufio.NewScanner(strings.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "model name":
			return strings.Join(strings.Fields(v), " ")
		case "Hardware", "cpu model":
			if fallback == "" {
				fallback = strings.Join(strings.Fields(v), " ")
			}
		}
	}
	return fallback
}

// memTotal returns MemTotal of a /proc/meminfo text in bytes (0 if absent).
func memTotal(meminfo string) uint64 {
	sc := bufio.NewScanner(strings.NewReader(meminfo))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			n *= 1024
		}
		return n
	}
	return 0
}
