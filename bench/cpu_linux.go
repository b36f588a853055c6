package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSnapshot is the CPU time spent so far: by the whole machine, by this
// process and the children it has waited for (go build, blockhaul runs), and
// by PostgreSQL's processes on this machine.
type cpuSnapshot struct {
	at       time.Time
	machine  float64 // seconds, every CPU, not idle
	self     float64
	postgres float64
	ok       bool
}

// Linux counts /proc times in USER_HZ ticks, 100 a second on every
// architecture Go supports.
const userHZ = 100

func takeCPUSnapshot() cpuSnapshot {
	s := cpuSnapshot{at: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return s
	}
	// user nice system idle iowait irq softirq steal: all but idle and
	// iowait are work.
	for i, v := range f[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		s.machine += n / userHZ
	}
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) == nil && syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) == nil {
		s.self = tvSeconds(self.Utime) + tvSeconds(self.Stime) + tvSeconds(children.Utime) + tvSeconds(children.Stime)
	}
	s.postgres = postgresCPU()
	s.ok = true
	return s
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// postgresCPU sums the CPU time of every process named postgres, with the
// time of the children each has reaped: backends that ended are counted in
// the postmaster's.
func postgresCPU() float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var sum float64
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		sum += postgresStatCPU(string(b))
	}
	return sum
}

// postgresStatCPU is utime+stime+cutime+cstime of a /proc/<pid>/stat line
// whose command is postgres, in seconds; 0 for any other process.
func postgresStatCPU(stat string) float64 {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open || stat[open+1:end] != "postgres" {
		return 0
	}
	// After the command: state, ppid, … ; utime is field 14 of the line,
	// the 12th after the command.
	f := strings.Fields(stat[end+1:])
	if len(f) < 15 {
		return 0
	}
	var ticks float64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseFloat(v, 64)
		ticks += n
	}
	return ticks / userHZ
}
