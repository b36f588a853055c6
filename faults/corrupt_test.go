package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/storetest"
)

// fileKinds are the kinds of file a staging directory holds, by how their
// names look.
var fileKinds = []struct {
	kind  string
	match func(name string) bool
}{
	{"sst", func(n string) bool { return strings.HasSuffix(n, ".sst") }},
	{"blob", func(n string) bool { return strings.HasSuffix(n, ".blob") }},
	{"MANIFEST", func(n string) bool { return strings.HasPrefix(n, "MANIFEST-") }},
	{"WAL", func(n string) bool { return strings.HasSuffix(n, ".log") }},
	{"OPTIONS", func(n string) bool { return strings.HasPrefix(n, "OPTIONS-") }},
}

// fastDamage is the damage the fast variant tries (the campaign: every kind
// of file, flipped and truncated).
var fastDamage = map[string]bool{"sst/flip": true, "sst/truncate": true, "blob/truncate": true, "MANIFEST/flip": true, "MANIFEST/truncate": true}

// TestDamagedStagingFiles flips bytes in, and truncates, every kind of file
// of a staging directory, then runs status, export and run on it: each must
// end, within a bound and without a panic, either with exit 4 and an error
// naming staging, or with exit 0 and (export, run) tables identical to an
// export of the undamaged directory. Afterwards a fetch and an export show
// whether refetching brought the store back.
func TestDamagedStagingFiles(t *testing.T) {
	const to = 2000
	pristine := newJob(t)
	mustRun(t, "fetch", pristine.args("fetch", 1, to)...)
	mustRun(t, "reference export", pristine.args("export", 1, to)...)
	want := digest(t, pristine.dsn, "cometbft")

	var lines, bad []string
	for _, fk := range fileKinds {
		for _, how := range []string{"flip", "truncate"} {
			name := fk.kind + "/" + how
			if !campaign && !fastDamage[name] {
				continue
			}
			j := newJob(t)
			storetest.CopyFiles(t, pristine.staging, j.staging)
			file := pickFile(t, j.staging, fk.match)
			if file == "" {
				bad = append(bad, fmt.Sprintf("%s: the staging directory has no such file", fk.kind))
				continue
			}
			damage(t, file, how)
			outcome := []string{}
			for _, cmd := range []string{"status", "export", "run"} {
				args := j.args(cmd, 1, to)
				if cmd == "status" {
					args = []string{"status", "--staging", j.staging}
				}
				code, out := blockhaul(t, 2*time.Minute, args...)
				res := cmd[:1] + fmt.Sprint(code)
				switch {
				case panicked(out):
					bad = append(bad, fmt.Sprintf("%s %s: a panic escaped: %s", name, cmd, errorLine(out)))
					res += "!panic"
				case code == 4:
					if !strings.Contains(out, "staging") {
						bad = append(bad, fmt.Sprintf("%s %s: exit 4 without naming staging: %s", name, cmd, errorLine(out)))
					}
				case code == 0 && cmd != "status":
					if d := diffDigests(digest(t, j.dsn, "cometbft"), want, nil); len(d) > 0 {
						bad = append(bad, fmt.Sprintf("%s %s: exit 0 but tables differ (silent loss): %s", name, cmd, strings.Join(d, "; ")))
						res += "≠"
					} else {
						res += "="
					}
				case code == 0:
				default:
					bad = append(bad, fmt.Sprintf("%s %s: exit %d, want 4 or a clean 0: %s", name, cmd, code, errorLine(out)))
				}
				outcome = append(outcome, res)
			}
			// Refetch what was lost, then export into a fresh database.
			k := newJob(t)
			k.staging = j.staging
			fc, _ := blockhaul(t, 2*time.Minute, k.args("fetch", 1, to)...)
			ec, _ := blockhaul(t, 2*time.Minute, k.args("export", 1, to)...)
			repaired := fc == 0 && ec == 0 && len(diffDigests(digest(t, k.dsn, "cometbft"), want, nil)) == 0
			refetch := "refetch repairs"
			if !repaired {
				refetch = fmt.Sprintf("refetch+export %d/%d", fc, ec)
			}
			lines = append(lines, fmt.Sprintf("%s: %s, %s", name, strings.Join(outcome, " "), refetch))
		}
	}
	report(t, "damaged staging (s/e/r: exit of status, export, run; = tables identical): %d cases, %d problems; %s", len(lines), len(bad), strings.Join(lines, "; "))
	for _, b := range bad {
		t.Error(b)
	}
}

// pickFile returns the largest file of dir that match accepts ("" if none).
// The current MANIFEST (the one the marker names) is preferred.
func pickFile(t *testing.T, dir string, match func(string) bool) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type f struct {
		name string
		size int64
	}
	var fs []f
	current := ""
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "marker.manifest.") {
			current = e.Name()[strings.LastIndex(e.Name(), ".")+1:]
		}
	}
	for _, e := range ents {
		if !match(e.Name()) {
			continue
		}
		if strings.HasPrefix(e.Name(), "MANIFEST-") && current != "" && e.Name() != current {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f{e.Name(), info.Size()})
	}
	if len(fs) == 0 {
		return ""
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].size > fs[j].size })
	return filepath.Join(dir, fs[0].name)
}

// damage flips a byte in the middle of file and one near its end (an
// sstable's footer, a log's last record), or truncates it to half.
func damage(t *testing.T, file, how string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatalf("%s is empty", file)
	}
	switch how {
	case "flip":
		b[len(b)/2] ^= 0x5a
		b[len(b)-1-len(b)/50] ^= 0x01
	case "truncate":
		b = b[:len(b)/2]
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
