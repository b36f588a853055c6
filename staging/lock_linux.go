package staging

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// flockHolder is a process holding an flock(2) lock on dir, as
// /proc/locks lists them (another process's before this one's), or 0, and
// whether its lock is shared (a reader's).
func flockHolder(dir string) (int, bool) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, false
	}
	want := strconv.FormatUint(uint64(unix.Major(uint64(st.Dev))), 16) + ":" +
		strconv.FormatUint(uint64(unix.Minor(uint64(st.Dev))), 16) + ":" +
		strconv.FormatUint(st.Ino, 10)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	self, selfShared := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  READ  1234 fe:00:786446 0 EOF"; a waiter's
		// line has "->" after the number.
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] != "FLOCK" || !sameDevIno(fs[5], want) {
			continue
		}
		pid, err := strconv.Atoi(fs[4])
		if err != nil || pid <= 0 {
			continue
		}
		if pid != os.Getpid() {
			return pid, fs[3] == "READ"
		}
		self, selfShared = pid, fs[3] == "READ"
	}
	return self, selfShared
}

// sameDevIno compares /proc/locks' "major:minor:inode" (major and minor in
// hex, at least two digits) with want, whose numbers have no leading zeros.
func sameDevIno(field, want string) bool {
	p := strings.Split(field, ":")
	if len(p) != 3 {
		return false
	}
	for i := range 2 {
		p[i] = strings.TrimLeft(p[i], "0")
		if p[i] == "" {
			p[i] = "0"
		}
	}
	return strings.Join(p, ":") == want
}
