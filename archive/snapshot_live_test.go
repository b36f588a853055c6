package archive

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/testbin"
)

var (
	buildOnce sync.Once
	binDir    string // removed by TestMain when the package's tests end
	binPath   string
	buildErr  error
)

// TestMain removes the blockhaul binary the tests built (91 MB, left in
// the temporary directory before).
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// blockhaulBinary builds cmd/blockhaul once for the package's tests.
func blockhaulBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "blockhaul-archive-test")
		if buildErr != nil {
			return
		}
		binPath, buildErr = testbin.Build(binDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// TestSnapshotOfARunningFetch: a `blockhaul fetch` runs in a process of
// its own; `blockhaul snapshot` of its staging directory, from another
// process, is answered by the fetch with a Pebble checkpoint while it goes
// on fetching; the snapshot restores, and the restored store verifies
// clean, deep, holding what the snapshot says it holds.
func TestSnapshotOfARunningFetch(t *testing.T) {
	bin := blockhaulBinary(t)
	root := t.TempDir()
	stg := filepath.Join(root, "staging")
	// A range far longer than the test (below the synthetic chain's highest
	// height, which is refused up front): the fetch is stopped once the
	// snapshot is restored.
	fetch := exec.Command(bin, "fetch", "--staging", stg, "--from", "1", "--to", "9000000",
		"--synthetic-txs", "1", "--progress-interval", "50ms", "--log-format", "json")
	fetch.Env = testbin.CleanEnv()
	stderr, err := fetch.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fetch.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
		exited <- fetch.Wait()
	}()
	defer func() {
		fetch.Process.Kill()
		for range lines {
		}
		<-exited
	}()
	// Wait for the fetch to have staged something: a progress line with
	// fetch.done above zero.
	deadline := time.After(2 * time.Minute)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				err := <-exited
				exited <- err // for the deferred wait: taking it here hung the test
				t.Fatalf("the fetch ended before staging 1,000 heights: %v", err)
			}
			var p struct {
				Msg   string `json:"msg"`
				Fetch struct {
					Done uint64 `json:"done"`
				} `json:"fetch"`
			}
			if json.Unmarshal([]byte(line), &p) == nil && p.Msg == "progress" && p.Fetch.Done > 1000 {
				break wait
			}
		case <-deadline:
			t.Fatal("the fetch staged no 1,000 heights in 2 minutes")
		}
	}

	dest := filepath.Join(root, "snap")
	out, err := exec.Command(bin, "snapshot", "--staging", stg, "--json", dest).Output()
	if err != nil {
		t.Fatalf("snapshot beside the running fetch: %v\n%s", err, exitStderr(err))
	}
	var sr SnapshotReport
	if err := json.Unmarshal(out, &sr); err != nil {
		t.Fatalf("snapshot output: %v\n%s", err, out)
	}
	if sr.TakenBy != fetch.Process.Pid {
		t.Fatalf("checkpoint taken by pid %d, want the fetch's %d", sr.TakenBy, fetch.Process.Pid)
	}
	if len(sr.Staged) == 0 || sr.Staged[0].From != 1 || sr.Files == 0 {
		t.Fatalf("snapshot report %+v", sr)
	}
	var staged uint64
	for _, g := range sr.Staged {
		staged += g.Len()
	}
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("the fetch exited before the snapshot was restored (%v): the test did not snapshot a running job", err)
	default:
	}

	restored := filepath.Join(root, "restored")
	out, err = exec.Command(bin, "restore", "--staging", restored, "--json", dest).Output()
	if err != nil {
		t.Fatalf("restore: %v\n%s%s", err, out, exitStderr(err))
	}
	var rr RestoreReport
	if err := json.Unmarshal(out, &rr); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rr.NotStaged, gapsBetween(sr.Staged)) {
		t.Fatalf("restore says %v were not staged, the snapshot's ranges %v", rr.NotStaged, sr.Staged)
	}
	// Every staged range of the snapshot, deep, and nothing else.
	var records uint64
	for _, g := range sr.Staged[:min(len(sr.Staged), 20)] {
		out, err = exec.Command(bin, "verify", "--staging", restored, "--deep", "--json", "--from", fmt.Sprint(g.From), "--to", fmt.Sprint(g.To)).Output()
		if err != nil {
			t.Fatalf("deep verify of %d-%d of the restored store: %v\n%s", g.From, g.To, err, out)
		}
		var vr VerifyReport
		if err := json.Unmarshal(out, &vr); err != nil {
			t.Fatal(err)
		}
		if vr.Staging.Problems() != 0 || vr.Staging.Records != g.Len() {
			t.Fatalf("restored %d-%d: %s", g.From, g.To, summary(vr.Staging))
		}
		records += vr.Staging.Records
	}
	if len(sr.Staged) <= 20 && (records != staged || records < 1000) {
		t.Fatalf("restored store: %d records, the snapshot says %d staged", records, staged)
	}
	// The fetch went on and stops as a stopped job does (exit 3).
	fetch.Process.Signal(syscall.SIGTERM)
	for range lines {
	}
	err = <-exited
	exited <- err
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("fetch after SIGTERM: %v, want exit 3", err)
	}
	t.Logf("snapshot of a running fetch: %d heights in %d ranges, %d files, %d bytes, in %s", staged, len(sr.Staged), sr.Files, sr.Bytes, sr.Duration)
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
