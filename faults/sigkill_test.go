package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/testseed"
)

// killPlan is how many SIGKILLs each kind of job gets.
type killPlan struct {
	run, fetch, export, follow, index int
}

// TestSIGKILLResumesToIdenticalTables kills run, fetch, export, follow and
// the final index build at random moments, resumes each, and checks that
// the tables end identical to uninterrupted jobs, while a sampler watches
// that no checkpoint is ever ahead of its rows.
func TestSIGKILLResumesToIdenticalTables(t *testing.T) {
	plan, to := killPlan{run: 2, fetch: 1, export: 1, follow: 1, index: 1}, uint64(1000)
	if campaign {
		plan, to = killPlan{run: 8, fetch: 5, export: 4, follow: 3, index: 2}, 4000
	}
	rng := testseed.New(t) // the kill moments; BLOCKHAUL_TEST_SEED replays them
	const from = 1

	// References: fetch then export; run; follow.
	refA := newJob(t)
	start := time.Now()
	mustRun(t, "reference fetch", refA.args("fetch", from, to)...)
	tFetch := time.Since(start)
	start = time.Now()
	mustRun(t, "reference export", refA.args("export", from, to)...)
	tExport := time.Since(start)
	wantBackfill := digest(t, refA.dsn, "cometbft")

	refB := newJob(t)
	start = time.Now()
	mustRun(t, "reference run", refB.args("run", from, to)...)
	tRun := time.Since(start)
	if d := diffDigests(digest(t, refB.dsn, "cometbft"), wantBackfill, nil); len(d) > 0 {
		t.Fatalf("run and fetch+export disagree:\n%s", strings.Join(d, "\n"))
	}
	followArgs := func(j job) []string {
		return append(j.args("follow", from, to), "--synthetic-tip", fmt.Sprint(to), "--poll-interval", "200ms")
	}
	refC := newJob(t)
	start = time.Now()
	mustRun(t, "reference follow", followArgs(refC)...)
	tFollow := time.Since(start)
	wantHead := digest(t, refC.dsn, "cometbft")

	var kills, resumes, firstResumeFailures, samples, ahead int64
	var parts []string
	var failures []string
	// chain kills one job k times at random moments within budget, then
	// resumes it to the end.
	chain := func(kind string, k int, j job, args []string, budget time.Duration, then func(job), want map[string]string) {
		s := startSampler(t, j.dsn, "cometbft")
		killed := 0
		for i := 0; i < k; i++ {
			p := startProc(t, nil, args...)
			// The kill moment is the test's random input, not synchronisation.
			d := time.Duration(30+rng.Int64N(int64(budget/time.Millisecond))) * time.Millisecond
			select {
			case <-p.done:
			case <-time.After(d):
			}
			if p.kill() {
				killed++
				continue
			}
			if code := exitStatus(p.err); code != 0 {
				failures = append(failures, fmt.Sprintf("%s: a job between kills exited %d: %s", kind, code, errorLine(p.out.String())))
			}
			break // finished before the kill: the rest would be no-ops
		}
		code, out := blockhaul(t, 5*time.Minute, args...)
		resumes++
		if code != 0 {
			firstResumeFailures++
			failures = append(failures, fmt.Sprintf("%s: first resume after %d kills exited %d: %s", kind, killed, code, errorLine(out)))
			mustRun(t, kind+": second resume", args...)
		}
		if then != nil {
			then(j)
		}
		s.close()
		samples += s.samples.Load()
		ahead += s.ahead.Load()
		if s.ahead.Load() > 0 {
			failures = append(failures, fmt.Sprintf("%s: checkpoint ahead of its rows in %s samples: %v", kind, s, s.first.Load()))
		}
		if d := diffDigests(digest(t, j.dsn, "cometbft"), want, nil); len(d) > 0 {
			failures = append(failures, fmt.Sprintf("%s: after %d kills tables differ:\n%s", kind, killed, strings.Join(d, "\n")))
		}
		kills += int64(killed)
		parts = append(parts, fmt.Sprintf("%s×%d", kind, killed))
	}
	perKill := func(total time.Duration, k int) time.Duration {
		return max(100*time.Millisecond, 3*total/time.Duration(2*k+2))
	}
	if plan.run > 0 {
		j := newJob(t)
		chain("run", plan.run, j, j.args("run", from, to), perKill(tRun, plan.run), nil, wantBackfill)
	}
	if plan.fetch > 0 {
		j := newJob(t)
		// Two workers: slower than the reference, so each kill lands.
		chain("fetch", plan.fetch, j, append(j.args("fetch", from, to), "--fetch-workers", "2"), perKill(tFetch, plan.fetch), func(j job) {
			mustRun(t, "export after killed fetches", j.args("export", from, to)...)
		}, wantBackfill)
	}
	if plan.export > 0 {
		j := newJob(t)
		mustRun(t, "fetch before killed exports", j.args("fetch", from, to)...)
		chain("export", plan.export, j, j.args("export", from, to), perKill(tExport, plan.export), nil, wantBackfill)
	}
	if plan.follow > 0 {
		j := newJob(t)
		chain("follow", plan.follow, j, followArgs(j), perKill(tFollow, plan.follow), nil, wantHead)
	}
	// Index builds: kill on the first "index built" line, while the others
	// are being built.
	for i := 0; i < plan.index; i++ {
		j := newJob(t)
		s := startSampler(t, j.dsn, "cometbft")
		p := startProc(t, nil, j.args("run", from, to)...)
		for line := range p.lines {
			if strings.Contains(line, "index built") {
				break
			}
		}
		killed := 0
		if p.kill() {
			killed = 1
		} else {
			failures = append(failures, fmt.Sprintf("index: the run ended (exit %d) before the kill", exitStatus(p.err)))
		}
		code, out := blockhaul(t, 5*time.Minute, j.args("run", from, to)...)
		resumes++
		if code != 0 {
			firstResumeFailures++
			failures = append(failures, fmt.Sprintf("index: first resume exited %d: %s", code, errorLine(out)))
			mustRun(t, "index: second resume", j.args("run", from, to)...)
		}
		s.close()
		samples += s.samples.Load()
		ahead += s.ahead.Load()
		if d := diffDigests(digest(t, j.dsn, "cometbft"), wantBackfill, nil); len(d) > 0 {
			failures = append(failures, fmt.Sprintf("index: tables differ after a kill mid index build:\n%s", strings.Join(d, "\n")))
		}
		kills += int64(killed)
		if i == plan.index-1 {
			parts = append(parts, fmt.Sprintf("index×%d", plan.index))
		}
	}
	verdict := "digests identical"
	if len(failures) > 0 {
		verdict = fmt.Sprintf("%d failures", len(failures))
	}
	report(t, "sigkill %s (%d blocks): %d kills, %d resumes (%d failed first time), %s, checkpoint-ahead samples %d/%d",
		strings.Join(parts, " "), to, kills, resumes, firstResumeFailures, verdict, ahead, samples)
	for _, f := range failures {
		t.Error(f)
	}
	want := int64(plan.run + plan.fetch + plan.export + plan.follow + plan.index)
	if kills < want*3/4 {
		t.Errorf("only %d of %d planned kills landed while a job ran", kills, want)
	}
	if samples == 0 {
		t.Error("the checkpoint sampler took no sample")
	}
}
