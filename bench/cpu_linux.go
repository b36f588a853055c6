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

// processCPU is the utime+stime of process pid, in seconds; false when it
// cannot be read (no such process on this machine).
func processCPU(pid int) (float64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	_, ticks, ok := statFields(string(b))
	return ticks, ok
}

// statFields reads the ppid and utime+stime (seconds) of a /proc/<pid>/stat
// line.
func statFields(stat string) (ppid int, cpu float64, ok bool) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, 0, false
	}
	// After the command: state (0), ppid (1), … utime (11), stime (12).
	f := strings.Fields(stat[end+1:])
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, false
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ppid, (u + s) / userHZ, true
}

// postgresWriters finds the WAL writer, checkpointer and background writer
// of the server whose backend is pid: its postmaster's children whose
// process title names them.
func postgresWriters(backend int) []int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(backend) + "/stat")
	if err != nil {
		return nil
	}
	postmaster, _, ok := statFields(string(b))
	if !ok {
		return nil
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		st, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		if ppid, _, ok := statFields(string(st)); !ok || ppid != postmaster {
			continue
		}
		title, _ := os.ReadFile(d + "/cmdline")
		if isWriterTitle(string(title)) {
			out = append(out, pid)
		}
	}
	return out
}

// isWriterTitle tells a PostgreSQL process title ("postgres: 15/main:
// walwriter") of a background writer of WAL or data pages.
func isWriterTitle(title string) bool {
	for _, w := range []string{"walwriter", "checkpointer", "background writer"} {
		if strings.Contains(title, ": "+w) || strings.HasPrefix(title, "postgres: "+w) {
			return true
		}
	}
	return false
}
