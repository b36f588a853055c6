package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCrashPoints kills the binary at chosen moments of an export (through
// BLOCKHAUL_CRASHPOINT, see internal/crashpoint): after the COPYs, before
// COMMIT, after COMMIT before the staging mirror, and in the middle of an
// index build. Each must resume, the first time, to identical tables, the
// checkpoint never ahead of its rows.
func TestCrashPoints(t *testing.T) {
	const to = 1000
	ref := newJob(t)
	mustRun(t, "reference run", ref.args("run", 1, to)...)
	want := digest(t, ref.dsn, "cometbft")
	specs := []string{"after-copy:3", "before-commit:5", "after-commit:4", "mid-index-build:1:200ms", "mid-index-build:2"}
	var got, bad []string
	var samples, ahead int64
	for _, spec := range specs {
		j := newJob(t)
		s := startSampler(t, j.dsn, "cometbft")
		p := startProc(t, []string{"BLOCKHAUL_CRASHPOINT=" + spec}, j.args("run", 1, to)...)
		code := p.wait(t, 3*time.Minute)
		if code != -1 {
			bad = append(bad, fmt.Sprintf("%s: not killed there (exit %d): %s", spec, code, errorLine(p.out.String())))
			got = append(got, spec+" not reached")
			s.close()
			continue
		}
		rcode, out := blockhaul(t, 3*time.Minute, j.args("run", 1, to)...)
		s.close()
		samples += s.samples.Load()
		ahead += s.ahead.Load()
		d := diffDigests(digest(t, j.dsn, "cometbft"), want, nil)
		switch {
		case rcode != 0:
			bad = append(bad, fmt.Sprintf("%s: first resume exited %d: %s", spec, rcode, errorLine(out)))
		case len(d) > 0:
			bad = append(bad, fmt.Sprintf("%s: tables differ after the resume: %s", spec, strings.Join(d, "; ")))
		case s.ahead.Load() > 0:
			bad = append(bad, fmt.Sprintf("%s: checkpoint ahead of its rows: %v", spec, s.first.Load()))
		}
		got = append(got, fmt.Sprintf("%s→resume %d", spec, rcode))
	}
	verdict := "digests identical"
	if len(bad) > 0 {
		verdict = fmt.Sprintf("%d failures", len(bad))
	}
	report(t, "crash points (%d blocks): %s; %s, checkpoint-ahead samples %d/%d", to, strings.Join(got, ", "), verdict, ahead, samples)
	for _, b := range bad {
		t.Error(b)
	}
}
