package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// A staging directory is open in one process only, so export --replay with
// the --staging of a running follow asks that follow to run the replay, as
// snapshot asks a running job for a checkpoint: through files in the
// directory, for a request id,
//
//	blockhaul-replay-<id>.request  the requester writes it (replayRequest)
//	blockhaul-replay-<id>.running  the holder renames the request so when it
//	                               takes it; the requester removes it to
//	                               cancel (Ctrl-C, or its end)
//	blockhaul-replay-<id>.status   the holder's progress, rewritten at least
//	                               every replayHeartbeat, then its answer
//
// The request is a lease: while it runs the holder checks that the file is
// there and its requester alive, and cancels the replay otherwise.
const (
	replayFilePrefix   = "blockhaul-replay-"
	replayReqSuffix    = ".request"
	replayRunSuffix    = ".running"
	replayStatusSuffix = ".status"
)

const (
	// replayAcceptWait bounds the wait for the holder to take a request:
	// a follow looks every checkpointPoll, but one just started takes it
	// once it has connected and prepared its schema.
	replayAcceptWait = 2 * time.Minute
	// replayHeartbeat is how often the holder rewrites a running replay's
	// status; replayStaleAfter without a new one, the requester gives up
	// on a holder that is alive but no longer answers.
	replayHeartbeat  = time.Second
	replayStaleAfter = time.Minute
	// replayCancelWait bounds the wait, after a cancel, for the holder to
	// say where the replay stopped.
	replayCancelWait = 30 * time.Second
)

// replayRequest is what export --replay asks of the holder.
type replayRequest struct {
	PID           int      `json:"pid"` // the requester
	Tables        []string `json:"tables"`
	Alias         string   `json:"alias,omitempty"`
	From          uint64   `json:"from"`
	To            uint64   `json:"to"`
	FromSet       bool     `json:"from_set"`
	ToSet         bool     `json:"to_set"`
	BatchBlocks   int      `json:"batch_blocks"`
	SyncCommit    bool     `json:"sync_commit"`
	Chain         string   `json:"chain"`
	Schema        string   `json:"schema"`
	EventEncoding string   `json:"event_encoding"`
	// Database is databaseIdentity of the requester's --pg: the holder
	// runs the replay on its own connection, to the same database only.
	Database string `json:"database"`
}

// replayStatus is the holder's account of a request.
type replayStatus struct {
	PID       int               `json:"pid"` // the holder
	Requester int               `json:"requester"`
	Alias     string            `json:"alias"`
	Done      bool              `json:"done"`
	RangeSet  bool              `json:"range_set"` // From, To and Start are known
	From      uint64            `json:"from"`
	To        uint64            `json:"to"`
	Start     uint64            `json:"start"` // the first height this run writes
	Last      uint64            `json:"last"`
	LastValid bool              `json:"last_valid"`
	Blocks    uint64            `json:"blocks"`
	Batches   uint64            `json:"batches"` // chunks committed
	Rows      map[string]uint64 `json:"rows"`
	Updated   time.Time         `json:"updated"`
	Error     string            `json:"error,omitempty"`
	Exit      int               `json:"exit"`
}

// replayFiles names the files of one request in dir.
type replayFiles struct{ request, running, status string }

func replayFilesOf(dir, id string) replayFiles {
	base := filepath.Join(dir, replayFilePrefix+id)
	return replayFiles{request: base + replayReqSuffix, running: base + replayRunSuffix, status: base + replayStatusSuffix}
}

// withdraw removes the request, taken or not: the holder cancels it.
func (f replayFiles) withdraw() {
	os.Remove(f.request)
	os.Remove(f.running)
}

func (f replayFiles) readStatus() (replayStatus, error) {
	var st replayStatus
	b, err := os.ReadFile(f.status)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// databaseIdentity names the database conn is connected to, the same
// whichever address or role reaches it: its name and oid, and when its
// server started.
func databaseIdentity(ctx context.Context, conn *pgx.Conn) (string, error) {
	var id string
	err := conn.QueryRow(ctx, `SELECT d.datname || ' (oid ' || d.oid || ', server started ' || pg_postmaster_start_time() || ')'
FROM pg_database d WHERE d.datname = current_database()`).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("identify the database: %w", err)
	}
	return id, nil
}

// HeldReplayError is the answer of the process holding --staging to a
// replay it was asked to run and did not complete: its error, and the exit
// status it gives it (0 is never one).
type HeldReplayError struct {
	Dir  string
	PID  int
	Msg  string
	Code int
}

func (e *HeldReplayError) Error() string {
	return fmt.Sprintf("replay run by the follow holding %s (pid %d): %s", e.Dir, e.PID, e.Msg)
}

// Fault is the class of the exit status the follow gave the replay.
func (e *HeldReplayError) Fault() fault.Class {
	switch e.Code {
	case ExitConfig:
		return fault.Config
	case ExitInterrupted:
		return fault.Interrupted
	case ExitData:
		return fault.Data
	}
	return fault.Failed
}

// requestReplay is export --replay when another process holds --staging
// (held): it asks that process, a follow, to run the replay, shows its
// progress and returns its result. The replay is the requester's: an
// interrupt (SIGINT, SIGTERM) withdraws the request and the follow cancels
// the replay (the chunk in flight rolls back, the progress row stays, a
// rerun resumes), and a requester that dies is seen gone by the follow,
// which cancels it too. A holder that ends or is killed meanwhile is seen
// gone by its lock (staging.Holder) within a poll.
func requestReplay(ctx context.Context, cfg *Config, held *staging.InUseError, out io.Writer, log *slog.Logger) (Summary, error) {
	sum := Summary{Command: cfg.Command}
	dir := cfg.Staging
	// A job that does not take replay requests is refused at once.
	if ls, err := readLiveStatus(dir); err == nil && ls.PID == held.PID && ls.Command != CmdFollow {
		return sum, &ConfigError{Fields: []*FieldError{{Flag: "staging", Env: EnvName("staging"),
			Msg: fmt.Sprintf("%s is in use by a running blockhaul %s (pid %d), which does not take replay requests (a follow does): wait for it to end, or replay from a copy of the store", dir, ls.Command, ls.PID)}}}
	}
	cctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := connect(cctx, cfg)
	if err != nil {
		return sum, err
	}
	dbID, err := databaseIdentity(cctx, conn)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return sum, err
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return sum, err
	}
	files := replayFilesOf(dir, hex.EncodeToString(idb[:]))
	req := replayRequest{PID: os.Getpid(), Tables: cfg.SelectedTables, Alias: cfg.Alias,
		From: cfg.From, To: cfg.To, FromSet: cfg.FromSet, ToSet: cfg.ToSet,
		BatchBlocks: cfg.BatchBlocks, SyncCommit: cfg.SyncCommit,
		Chain: cfg.Chain, Schema: cfg.Schema, EventEncoding: cfg.EventEncoding.String(), Database: dbID}
	b, err := json.Marshal(req)
	if err != nil {
		return sum, err
	}
	if err := staging.WriteFileAtomic(files.request, b); err != nil {
		return sum, fmt.Errorf("request the replay of %s from the process holding %s: %w", strings.Join(req.Tables, ","), dir, err)
	}
	defer os.Remove(files.status)
	defer files.withdraw()
	log.Info("staging is held by another process: asking it to run the replay", "staging", dir, "pid", held.PID, "tables", strings.Join(req.Tables, ","))

	m := cfg.Monitor
	if m == nil {
		m = monitor.New(monitor.Options{Logger: log, Out: io.Discard, Terminal: new(bool), Interval: cfg.Progress})
	}
	m.SetTables(req.Tables)
	if cfg.Progress > 0 {
		m.Start(ctx)
	}
	defer m.Stop()
	w := replayWatch{dir: dir, files: files, holder: held.PID, m: m, tables: req.Tables, seen: time.Now()}
	st, err := w.wait(ctx, log)
	m.Stop()
	if err != nil {
		if w.accepted && !st.Done {
			err = w.stoppedAt(ctx, cfg, st, err)
		}
		return sum, err
	}
	res := export.Result{Rows: st.Rows, Blocks: st.Blocks, Start: st.Start, Last: export.Cursor{Height: st.To, Valid: true}, Complete: true}
	sum.Export, sum.Complete, sum.From, sum.To = res, true, st.Start, st.To
	ms := m.Summary()
	ms.Command, ms.Complete = cfg.Command, true
	ms.WriteText(out)
	fmt.Fprintf(out, "  replay: %s, heights %d-%d (this run from %d), run by the follow holding %s (pid %d)\n", st.Alias, st.From, st.To, st.Start, dir, st.PID)
	return sum, nil
}

// replayWatch follows one request's status.
type replayWatch struct {
	dir      string
	files    replayFiles
	holder   int // the PID that holds dir; the one that took it, once taken
	m        *monitor.Monitor
	tables   []string
	accepted bool
	seen     time.Time // when the status last changed
	last     replayStatus
}

// errHolderGone is a holder that no longer holds the staging directory.
var errHolderGone = errors.New("it no longer holds the staging directory (it ended or was killed)")

// wait polls until the holder answers (the status it returns is Done),
// it is gone, it stops answering, or ctx ends (the request is then
// withdrawn and the holder's last word awaited for replayCancelWait).
func (w *replayWatch) wait(ctx context.Context, log *slog.Logger) (replayStatus, error) {
	t := time.NewTicker(checkpointPoll)
	defer t.Stop()
	deadline := time.Now().Add(replayAcceptWait)
	for {
		select {
		case <-ctx.Done():
			return w.cancel(log)
		case <-t.C:
		}
		if st, ok := w.poll(); ok && st.Done {
			return st, w.answer(st)
		}
		if w.gone() {
			// It may have answered just before it ended.
			if st, ok := w.poll(); ok && st.Done {
				return st, w.answer(st)
			}
			who := "the process (pid %d) asked to run the replay"
			if w.accepted {
				who = "the follow (pid %d) running the replay"
			}
			return w.last, fmt.Errorf(who+": %w", w.holder, errHolderGone)
		}
		switch {
		case !w.accepted && time.Now().After(deadline):
			return w.last, fmt.Errorf("%s is held by pid %d, which did not take the replay request within %s (a blockhaul that serves replay requests is a follow of this version)", w.dir, w.holder, replayAcceptWait)
		case w.accepted && time.Since(w.seen) > replayStaleAfter:
			return w.last, fmt.Errorf("the follow (pid %d) running the replay has not reported on it for %s", w.holder, replayStaleAfter)
		}
	}
}

// poll reads the status, if there is one yet, and shows its progress.
func (w *replayWatch) poll() (replayStatus, bool) {
	st, err := w.files.readStatus()
	if err != nil {
		return st, false
	}
	if !w.accepted {
		w.accepted, w.holder = true, st.PID
	}
	if !st.Updated.Equal(w.last.Updated) {
		w.seen = time.Now()
	}
	if st.LastValid && (!w.last.LastValid || st.Last > w.last.Last) {
		from := st.Start
		if w.last.LastValid {
			from = w.last.Last + 1
		}
		rows := make([]int, len(w.tables))
		for i, t := range w.tables {
			rows[i] = int(st.Rows[t] - w.last.Rows[t])
		}
		// The chunks committed since the last look, as the monitor counts
		// a replay of its own: their heights split evenly (the status
		// holds their sum), their rows on the last.
		n := max(st.Batches-w.last.Batches, 1)
		n = min(n, st.Last-from+1)
		step := (st.Last - from + 1) / n
		for i := uint64(1); i < n; i++ {
			w.m.Exported(from, from+step-1, make([]int, len(w.tables)), 0, false)
			from += step
		}
		w.m.Exported(from, st.Last, rows, 0, false)
	}
	if st.RangeSet && !w.last.RangeSet {
		w.m.SetRange(st.From, st.To)
		w.m.ExportPlanned(st.Start)
	}
	w.last = st
	return st, true
}

// gone reports whether the holder asked no longer holds the directory.
func (w *replayWatch) gone() bool {
	pid, held := staging.Holder(w.dir)
	return !held || pid != 0 && w.holder != 0 && pid != w.holder
}

// answer is the error of a done status.
func (w *replayWatch) answer(st replayStatus) error {
	if st.Error == "" {
		return nil
	}
	code := st.Exit
	if code == ExitComplete {
		code = ExitFailed
	}
	return &HeldReplayError{Dir: w.dir, PID: st.PID, Msg: st.Error, Code: code}
}

// cancel withdraws the request and waits, for replayCancelWait at most,
// for the holder to say where the replay stopped.
func (w *replayWatch) cancel(log *slog.Logger) (replayStatus, error) {
	w.files.withdraw()
	if !w.accepted {
		return w.last, fmt.Errorf("%w: the replay request was withdrawn before the process holding %s took it", ErrInterrupted, w.dir)
	}
	t := time.NewTicker(checkpointPoll)
	defer t.Stop()
	deadline := time.After(replayCancelWait)
	for {
		if st, ok := w.poll(); ok && st.Done {
			err := w.answer(st)
			if err == nil {
				return st, nil // it completed meanwhile
			}
			log.Warn("replay cancelled: the follow running it stopped it", "pid", st.PID, "alias", st.Alias, "last", st.Last, "last_valid", st.LastValid, "answer", st.Error)
			return st, fmt.Errorf("%w: %w", ErrInterrupted, err)
		}
		if w.gone() {
			return w.last, fmt.Errorf("%w: the replay was withdrawn and the follow (pid %d) running it is gone", ErrInterrupted, w.holder)
		}
		select {
		case <-t.C:
		case <-deadline:
			return w.last, fmt.Errorf("%w: the replay was withdrawn; the follow (pid %d) running it did not confirm it stopped within %s", ErrInterrupted, w.holder, replayCancelWait)
		}
	}
}

// stoppedAt adds to err, a replay that ended without an answer, where its
// progress row says it stopped.
func (w *replayWatch) stoppedAt(ctx context.Context, cfg *Config, st replayStatus, err error) error {
	if st.Alias == "" {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	conn, cerr := connect(rctx, cfg)
	if cerr != nil {
		return err
	}
	defer conn.Close(rctx)
	p, ok, rerr := export.ReadReplayProgress(rctx, conn, cfg.Schema, st.Alias)
	switch {
	case rerr != nil || !ok:
		return err
	case p.Complete:
		return fmt.Errorf("%w; its progress row %q says it completed (heights %d-%d)", err, st.Alias, p.From, p.To)
	case !p.LastValid:
		return fmt.Errorf("%w; its progress row %q (heights %d-%d) has no chunk committed: run the replay again", err, st.Alias, p.From, p.To)
	}
	return fmt.Errorf("%w; its progress row %q is at height %d of %d-%d: run the replay again to resume from %d", err, st.Alias, p.Last, p.From, p.To, p.Last+1)
}
