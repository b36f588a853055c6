//go:build faults

package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smallFS mounts a filesystem of sizeMiB at dir: tmpfs (resizable in
// place), else a loop-mounted ext4 image. It returns what it mounted and a
// function that grows it to growMiB. Mounting needs root; without it the
// test fails, saying so.
func smallFS(t *testing.T, dir string, sizeMiB, growMiB int) (string, func()) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMiB), "tmpfs", dir).CombinedOutput()
	if err == nil {
		t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
		return "tmpfs", func() {
			if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%dm", growMiB), dir).CombinedOutput(); err != nil {
				t.Fatalf("grow tmpfs: %v: %s", err, out)
			}
		}
	}
	tmpfsErr := fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out)))
	img := filepath.Join(t.TempDir(), "fs.img")
	steps := [][]string{
		{"truncate", "-s", fmt.Sprintf("%dM", sizeMiB), img},
		{"mkfs.ext4", "-q", "-F", img},
		{"mount", "-o", "loop", img, dir},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("no small filesystem: tmpfs: %s; ext4 image: %s: %v: %s", tmpfsErr, s[0], err, out)
		}
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return "loop ext4", func() {
		for _, s := range [][]string{{"truncate", "-s", fmt.Sprintf("%dM", growMiB), img}, {"resize2fs", "-f", img}} {
			exec.Command(s[0], s[1:]...).Run()
		}
		// A mounted loop device sees the new size after a set-capacity.
		out, _ := exec.Command("findmnt", "-n", "-o", "SOURCE", dir).Output()
		dev := strings.TrimSpace(string(out))
		for _, s := range [][]string{{"losetup", "-c", dev}, {"resize2fs", dev}} {
			if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("grow ext4: %s: %v: %s", s[0], err, out)
			}
		}
	}
}

// TestFullDisk runs a job whose staging directory is on a filesystem that
// fills part way: it must exit 1 naming the directory and "no space", status
// must still answer, and once space is freed the same job resumes to tables
// identical to an uninterrupted run.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a small filesystem and must run as root")
	}
	const to = 6000
	ref := newJob(t)
	mustRun(t, "reference run", ref.args("run", 1, to)...)
	want := digest(t, ref.dsn, "cometbft")

	j := newJob(t)
	// The staging reserve is 64 MiB plus four 16 MiB memtables: leave
	// room for ≈20 MB of blocks above it (the range stages ≈30 MB).
	kind, grow := smallFS(t, j.staging, 160, 600)
	start := time.Now()
	code, out := blockhaul(t, 3*time.Minute, j.args("run", 1, to)...)
	took := time.Since(start)
	line := errorLine(beforeDump(out))
	var bad []string
	switch {
	case panicked(out):
		bad = append(bad, "a panic escaped: "+line)
	case code != 1:
		bad = append(bad, fmt.Sprintf("full disk: exit %d, want 1: %s", code, line))
	case !strings.Contains(out, "no space") || !strings.Contains(out, j.staging):
		bad = append(bad, "full disk: the error does not name the directory and \"no space\": "+line)
	}
	var staged string
	scode, sout := blockhaul(t, time.Minute, "status", "--staging", j.staging)
	if scode != 0 && scode != 4 || panicked(sout) {
		bad = append(bad, fmt.Sprintf("status on the full store: exit %d: %s", scode, errorLine(sout)))
	}
	for _, l := range strings.Split(sout, "\n") {
		if strings.Contains(l, "staged:") {
			staged = strings.TrimSpace(l)
		}
	}
	grow()
	rcode, rout := blockhaul(t, 3*time.Minute, j.args("run", 1, to)...)
	d := diffDigests(digest(t, j.dsn, "cometbft"), want, nil)
	if rcode != 0 || len(d) > 0 {
		bad = append(bad, fmt.Sprintf("resume after freeing space: exit %d, %d tables differ: %s", rcode, len(d), errorLine(rout)))
	}
	verdict := "identical"
	if len(bad) > 0 {
		verdict = fmt.Sprintf("%d problems", len(bad))
	}
	report(t, "full disk (%s, 160 MiB, %d blocks): exit %d after %.1fs (%q), status exit %d (%s), resume after growing exit %d, %s",
		kind, to, code, took.Seconds(), shorten(line, 140), scode, staged, rcode, verdict)
	for _, b := range bad {
		t.Error(b)
	}
}

func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
