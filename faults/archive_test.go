//go:build faults

package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDamagedArchiveChunk publishes a synthetic chain's 1..1199 as a chunk
// archive (chunks of 200), rebuilds from it with `run --archive` into an
// empty store and database (tables identical to an export of the store it
// was published from), then flips bytes in, and truncates, one chunk of a
// copy of the archive and runs again: each run must end without a panic,
// with exit 4 naming the chunk, and export no row the undamaged archive
// does not hold.
func TestDamagedArchiveChunk(t *testing.T) {
	const to = 1199
	src := newJob(t)
	mustRun(t, "fetch the chain to publish", "fetch", "--staging", src.staging, "--from", "1", "--to", fmt.Sprint(to), "--progress-interval", "0")
	pub := filepath.Join(t.TempDir(), "archive")
	mustRun(t, "publish", "publish", pub, "--staging", src.staging, "--chunk-blocks", "200")
	mustRun(t, "export the published store", "export", "--staging", src.staging, "--pg", src.dsn, "--from", "1", "--to", fmt.Sprint(to), "--progress-interval", "0")
	want := digest(t, src.dsn, "cometbft")

	pristine := newJob(t)
	mustRun(t, "rebuild from the archive", archiveArgs(pristine, pub, to)...)
	if d := diffDigests(digest(t, pristine.dsn, "cometbft"), want, dataTables); len(d) > 0 {
		t.Fatalf("rebuilt from the archive, the tables differ from the published store's export: %s", strings.Join(d, "; "))
	}
	var tables []string
	for name := range want {
		if dataTables(name) && !strings.HasPrefix(name, "index ") {
			tables = append(tables, name)
		}
	}
	chains, err := os.ReadDir(pub)
	if err != nil || len(chains) != 1 {
		t.Fatalf("the archive holds %d chains' folders: %v", len(chains), err)
	}
	const chunk = "chunks/600-799.rec.zst"
	lines := []string{"rebuild: exit 0, tables identical to the published store's export"}
	var bad []string
	file := filepath.Join(pub, chains[0].Name(), chunk)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"flip", "truncate"} {
		j := newJob(t)
		damage(t, file, how)
		code, out := blockhaul(t, 3*time.Minute, archiveArgs(j, pub, to)...)
		if err := os.WriteFile(file, good, 0o644); err != nil {
			t.Fatal(err)
		}
		res := fmt.Sprintf("%s: exit %d", how, code)
		switch {
		case panicked(out):
			bad = append(bad, fmt.Sprintf("%s: a panic escaped: %s", how, errorLine(out)))
		case code != 4 || !strings.Contains(out, "chunk "+chunk):
			bad = append(bad, fmt.Sprintf("%s: exit %d (want 4, a fatal data error) or without naming chunk %s: %s", how, code, chunk, errorLine(out)))
		default:
			res += ", names the chunk"
		}
		if n := wrongRows(t, j.dsn, pristine.dsn, "cometbft", tables); n > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d exported rows the undamaged archive does not hold", how, n))
			res += fmt.Sprintf(", %d wrong rows", n)
		} else {
			res += ", no wrong row"
		}
		lines = append(lines, res)
	}
	report(t, "damaged archive chunk (run --archive, chunk %s flipped or truncated): %d cases, %d problems; %s",
		chunk, len(lines), len(bad), strings.Join(lines, "; "))
	for _, b := range bad {
		t.Error(b)
	}
}

func archiveArgs(j job, archive string, to uint64) []string {
	return []string{"run", "--archive", archive, "--staging", j.staging, "--pg", j.dsn, "--from", "1", "--to", fmt.Sprint(to),
		"--batch-blocks", "100", "--progress-interval", "0", "--log-level", "info"}
}
