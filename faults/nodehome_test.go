//go:build faults

package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/nodefixture"
)

// TestDamagedNodeHome flips bytes in, and truncates, the largest table file
// of a node home's block store and of its state store, then runs
// `blockhaul run --node-home` on it: each run must end without a panic,
// either with exit 4 naming the damaged database, or 0 with the tables of the
// undamaged home; whatever it exported must be rows of the undamaged home
// (nothing staged wrong).
func TestDamagedNodeHome(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	to := fx.Tip()
	pristine := newJob(t)
	mustRun(t, "reference run", nodeHomeArgs(pristine, fx.Unpack(t), to)...)
	want := digest(t, pristine.dsn, "cometbft")
	var tables []string
	for name := range want {
		if dataTables(name) && !strings.HasPrefix(name, "index ") {
			tables = append(tables, name)
		}
	}

	var lines, bad []string
	for _, db := range []string{"blockstore", "state"} {
		for _, how := range []string{"flip", "truncate"} {
			name := db + "/" + how
			j := newJob(t)
			home := fx.Unpack(t)
			dir := filepath.Join(home, "data", db+".db")
			file := pickFile(t, dir, func(n string) bool { return strings.HasSuffix(n, ".ldb") })
			if file == "" {
				bad = append(bad, fmt.Sprintf("%s: %s has no table file", name, dir))
				continue
			}
			damage(t, file, how)
			code, out := blockhaul(t, 3*time.Minute, nodeHomeArgs(j, home, to)...)
			res := fmt.Sprintf("%s: exit %d", name, code)
			switch {
			case panicked(out):
				bad = append(bad, fmt.Sprintf("%s: a panic escaped: %s", name, errorLine(out)))
			case code == 0:
				if d := diffDigests(digest(t, j.dsn, "cometbft"), want, dataTables); len(d) > 0 {
					bad = append(bad, fmt.Sprintf("%s: exit 0 but tables differ: %s", name, strings.Join(d, "; ")))
				}
				res += ", tables identical"
			case code != 4 || !strings.Contains(out, "damaged node database") || !strings.Contains(out, dir):
				bad = append(bad, fmt.Sprintf("%s: exit %d (want 4, a fatal data error) or without naming %s as damaged: %s", name, code, dir, errorLine(out)))
			default:
				res += ", names the database"
			}
			if n := wrongRows(t, j.dsn, pristine.dsn, "cometbft", tables); n > 0 {
				bad = append(bad, fmt.Sprintf("%s: %d exported rows the undamaged home does not hold", name, n))
				res += fmt.Sprintf(", %d wrong rows", n)
			} else {
				res += ", no wrong row"
			}
			lines = append(lines, res)
		}
	}
	report(t, "damaged node home (--node-home, a table file of blockstore.db or state.db flipped or truncated): %d cases, %d problems; %s",
		len(lines), len(bad), strings.Join(lines, "; "))
	for _, b := range bad {
		t.Error(b)
	}
}

func nodeHomeArgs(j job, home string, to uint64) []string {
	if _, err := os.Stat(filepath.Join(home, "config", "config.toml")); err != nil {
		panic(err)
	}
	return []string{"run", "--node-home", home, "--staging", j.staging, "--pg", j.dsn, "--from", "1", "--to", fmt.Sprint(to),
		"--batch-blocks", "100", "--progress-interval", "0", "--log-level", "info"}
}
