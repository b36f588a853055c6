package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/staging"
)

// stallingSource serves heights up to stallAt and then blocks every fetch
// until its context ends: a job that stays running with part of its range
// staged.
type stallingSource struct {
	loader.Source
	stallAt uint64
}

func (s stallingSource) Fetch(ctx context.Context, from, to uint64) ([]chain.Block, error) {
	if to > s.stallAt {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Source.Fetch(ctx, from, to)
}

const liveChildEnv = "BLOCKHAUL_TEST_LIVE_STATUS_STAGING"

// TestLiveStatusChild is the second process of TestStatusBesideARunningJob:
// it runs a fetch that stages up to 500 of 1-2000 of the EVM chain and then
// stalls until killed.
func TestLiveStatusChild(t *testing.T) {
	dir := os.Getenv(liveChildEnv)
	if dir == "" {
		t.Skip("the child process of TestStatusBesideARunningJob")
	}
	cfg := synthConfig(CmdFetch, "evm", "", dir, 1, 2000)
	cfg.FetchWorkers, cfg.FetchSpan = 1, 100
	cfg.Progress = 20 * time.Millisecond
	src, err := newBareSource(bareJob(cfg), func() uint64 { return 2100 }, quiet)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source = stallingSource{src, 500}
	Run(context.Background(), cfg, &bytes.Buffer{}, quiet)
}

// startStalledJob runs TestLiveStatusChild's fetch into the store in dir
// (this test binary, re-executed), waits until it has staged 1-500 and
// stalled, and kills it when the test ends.
func startStalledJob(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^TestLiveStatusChild$", "-test.count=1")
	child.Env = append(os.Environ(), liveChildEnv+"="+dir)
	var childOut bytes.Buffer
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Kill()
		child.Wait()
	})
	// Wait (bounded) until the job has said it staged what it can.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ls, err := readLiveStatus(dir)
		if err == nil && ls.Fetch.Blocks >= 400 && ls.StagedOK && len(ls.Staged) == 1 && ls.Staged[0].To == 500 {
			return child
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running job never reported 1-500 staged (last: %+v, %v); its output:\n%s", ls, err, childOut.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the child's file, bounded above
	}
}

// exportedEVM is a staging directory and a database that a run filled with
// the synthetic EVM chain's heights 1-100.
func exportedEVM(t *testing.T) (dir, dsn string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "s")
	dsn = pgtest.NewDatabase(t)
	if _, err := Run(context.Background(), synthConfig(CmdRun, "evm", dsn, dir, 1, 100), &bytes.Buffer{}, quiet); err != nil {
		t.Fatal(err)
	}
	return dir, dsn
}

// TestVerifyBesideARunningJob: verify of a store a running job holds asks
// the job for a checkpoint and verifies that (1-500, clean, under the
// store's own name), leaving nothing beside the store; with --pg it is
// refused (PostgreSQL moves on while the job runs), naming the job.
func TestVerifyBesideARunningJob(t *testing.T) {
	dir, dsn := exportedEVM(t)
	child := startStalledJob(t, dir)
	cfg := verifyCmd(dir, "")
	cfg.Deep = true
	r, err := runVerify(t, cfg)
	if err != nil {
		t.Fatalf("verify beside a running job: %v", err)
	}
	if r.HeldBy != child.Process.Pid || r.CheckpointAt.IsZero() || r.Staging.Dir != dir || r.Staging.Records != 500 || r.Problems() != 0 {
		t.Fatalf("verify beside a running job (pid %d): held by %d at %v, %s: %d records, %d problems",
			child.Process.Pid, r.HeldBy, r.CheckpointAt, r.Staging.Dir, r.Staging.Records, r.Problems())
	}
	ents, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "s" {
			t.Errorf("verify left %s beside the store", e.Name())
		}
	}
	_, err = Run(context.Background(), verifyCmd(dir, dsn), &bytes.Buffer{}, quiet)
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", child.Process.Pid)) {
		t.Errorf("verify --pg beside a running job: exit %d, %v", ExitCode(err), err)
	}
}

// TestStatusBesideARunningJob runs a fetch in another process (this test
// binary, re-executed) into an EVM store with 1-100 exported already, and
// asks for status with --pg while it holds the staging directory: status
// answers with the job's PID, progress, the store's chain, the ranges it
// had staged and the gaps left, the size, the checkpoints the store
// mirrors, and PostgreSQL's of the evm schema (the store's family, though
// no --chain or --schema was given), instead of refusing the directory as
// in use.
func TestStatusBesideARunningJob(t *testing.T) {
	dir, dsn := exportedEVM(t)
	child := startStalledJob(t, dir)
	cfg := DefaultConfig()
	cfg.Command, cfg.Staging, cfg.PG = CmdStatus, dir, dsn
	var out bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil {
		t.Fatalf("status beside a running job: %v\n%s", err, out.String())
	}
	t.Logf("status:\n%s", out.String())
	for _, want := range []string{
		fmt.Sprintf("in use by a running blockhaul fetch (pid %d)", child.Process.Pid),
		"range 1-2000",
		"400 of 1900 planned heights staged",
		"chain:    evm ",
		"500 heights in 1 range (last known) 1-500",
		"gaps:     1500 heights of the job's range not staged yet, 501-2000",
		"  size:     ",
		"mirror:   pg:",
		"/evm/backfill/range-1-100 at 100",
		"postgresql schema evm\n",
		"1-100 at 100, complete",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status does not say %q", want)
		}
	}
	// The size is of the directory the job is writing: at least the 500
	// records it has staged (each over a kilobyte compressed).
	var mb float64
	if i := strings.Index(out.String(), "  size:     "); i >= 0 {
		fmt.Sscanf(out.String()[i+len("  size:     "):], "%f MB on disk", &mb)
	}
	if mb < 0.5 {
		t.Errorf("status gives the running job's store %.1f MB", mb)
	}
}

// TestReadersBesideAReader: status, verify and publish of a store that
// another read-only command has open read it themselves, as they do alone
// (status prints the store's ranges, not a running job's; verify checks
// the store, not a checkpoint of it; publish does not ask to stop a job),
// and the directory holds no PID file after them.
func TestReadersBesideAReader(t *testing.T) {
	dir := archiveFixture(t, "evm", 100)
	other, err := staging.Open(dir, staging.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	cfg := DefaultConfig()
	cfg.Command, cfg.Staging = CmdStatus, dir
	var out bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out, quiet); err != nil || strings.Contains(out.String(), "in use") || !strings.Contains(out.String(), "1-100") {
		t.Fatalf("status beside a reader: %v\n%s", err, out.String())
	}
	r, err := runVerify(t, verifyCmd(dir, ""))
	if err != nil || r.HeldBy != 0 || !r.CheckpointAt.IsZero() || r.Staging.Records != 100 || r.Problems() != 0 {
		t.Fatalf("verify beside a reader: %v; held by %d at %v, %d records, %d problems", err, r.HeldBy, r.CheckpointAt, r.Staging.Records, r.Problems())
	}
	pub := DefaultConfig()
	pub.Command, pub.Staging, pub.Args, pub.ChunkBlocks = CmdPublish, dir, []string{filepath.Join(t.TempDir(), "archive")}, 50
	out.Reset()
	if _, err := Run(context.Background(), pub, &out, quiet); err != nil {
		t.Fatalf("publish beside a reader: %v\n%s", err, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "blockhaul.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the readers, the PID file: %v, want none", err)
	}
}

// A command that would ask a running job for a checkpoint or a replay is
// refused at once beside a reader, naming it as one: a reader (status,
// verify, publish) has no endpoint to answer, and waiting for one spent
// snapshot's two minutes for nothing.
func TestJobRequestsBesideAReaderAreRefused(t *testing.T) {
	dir := archiveFixture(t, "cometbft", 50)
	other, err := staging.Open(dir, staging.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	snap := DefaultConfig()
	snap.Command, snap.Staging, snap.Args = CmdSnapshot, dir, []string{filepath.Join(t.TempDir(), "snap")}
	replay := DefaultConfig()
	replay.Command, replay.Staging, replay.Replay, replay.PG = CmdExport, dir, []string{"events"}, "postgres://postgres@127.0.0.1:1/none?sslmode=disable"
	for _, cfg := range []Config{snap, replay} {
		var iu *staging.InUseError
		_, err := Run(context.Background(), cfg, io.Discard, quiet)
		if !errors.As(err, &iu) || !iu.Reader || iu.PID != os.Getpid() || !strings.Contains(err.Error(), "reading it") {
			t.Errorf("%s beside a reader: %v; want the store's refusal naming a reader (pid %d)", cfg.Command, err, os.Getpid())
		}
	}
}
