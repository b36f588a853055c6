package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
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
// snapshot asks a running job for a checkpoint: on the job's endpoint
// (staging.ListenEndpoint). The request (POST replayRoute, a replayRequest)
// is answered by a stream of replayStatus lines, at least every
// replayHeartbeat, the last one Done. The connection is a lease: the
// follow cancels the replay when it ends; the requester withdraws it on an
// interrupt with POST replayRoute/cancel and waits for the last line.

const (
	// replayAcceptWait bounds the wait for the holder to take a request:
	// one just started takes it once it has connected and prepared its
	// schema.
	replayAcceptWait = 2 * time.Minute
	// replayHeartbeat is how often the holder sends a running replay's
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
	// The message decoding (--proto, --proto-descriptors, --bech32-prefix).
	Proto            []string `json:"proto,omitempty"`
	ProtoDescriptors []string `json:"proto_descriptors,omitempty"`
	Bech32Prefix     string   `json:"bech32_prefix,omitempty"`
	// The EVM event decoding: the --abi values as given, and what the
	// requester compiled them from (Decoding.ABIDigests): the holder
	// compares the digests, so that the same ABI files reached by other
	// paths agree and a changed file does not.
	ABI        []string `json:"abi,omitempty"`
	ABIDigests []string `json:"abi_digests,omitempty"`
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

// newReplayRequest is the request of replay job j to the holder of its
// staging directory, on the database dbID names: every decoding option j
// resolved, for the holder to run it with or refuse naming the difference.
func newReplayRequest(j *Job, dbID string) replayRequest {
	d := &j.Decoding
	return replayRequest{PID: os.Getpid(), Tables: d.Tables, Alias: j.Alias,
		From: j.From, To: j.To, FromSet: j.FromSet, ToSet: j.ToSet,
		BatchBlocks: j.BatchBlocks, SyncCommit: j.SyncCommit,
		Chain: j.Family.Name, Schema: j.Schema, EventEncoding: d.EventEncoding.String(), Database: dbID,
		Proto: d.Proto, ProtoDescriptors: d.ProtoDescriptors, Bech32Prefix: d.Bech32Prefix,
		ABI: d.ABI, ABIDigests: d.ABIDigests}
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
func requestReplay(ctx context.Context, cfg *Job, held *staging.InUseError, out io.Writer, log *slog.Logger) (Summary, error) {
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
	req := newReplayRequest(cfg, dbID)
	body, err := json.Marshal(req)
	if err != nil {
		return sum, err
	}
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
	w := replayWatch{dir: dir, client: staging.EndpointClient(dir), holder: held.PID, m: m, tables: req.Tables, seen: time.Now()}
	st, err := w.wait(ctx, body, log)
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
	client   *http.Client
	holder   int // the PID that holds dir; the one that took it, once taken
	m        *monitor.Monitor
	tables   []string
	accepted bool
	seen     time.Time // when the status last changed
	last     replayStatus
}

// errHolderGone is a holder that no longer holds the staging directory.
var errHolderGone = errors.New("it no longer holds the staging directory (it ended or was killed)")

// wait sends the request, once the holder takes requests, and follows its
// answer until it is Done, the holder is gone, it stops answering, or ctx
// ends (the request is then withdrawn and the holder's last word awaited
// for replayCancelWait).
func (w *replayWatch) wait(ctx context.Context, body []byte, log *slog.Logger) (replayStatus, error) {
	// The stream outlives ctx: after an interrupt it carries the answer.
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	resp, err := w.send(ctx, sctx, body)
	if err != nil {
		return w.last, err
	}
	defer resp.Body.Close()
	lines := make(chan replayStatus)
	go func() {
		defer close(lines)
		dec := json.NewDecoder(resp.Body)
		for {
			var st replayStatus
			if dec.Decode(&st) != nil {
				return
			}
			select {
			case lines <- st:
			case <-sctx.Done():
				return
			}
		}
	}()
	t := time.NewTicker(checkpointPoll)
	defer t.Stop()
	interrupted := ctx.Done()
	var cancelled <-chan time.Time
	for {
		select {
		case st, ok := <-lines:
			if !ok {
				if cancelled != nil {
					return w.last, fmt.Errorf("%w: the replay was withdrawn and the follow (pid %d) running it is gone", ErrInterrupted, w.holder)
				}
				return w.last, fmt.Errorf("the follow (pid %d) running the replay: %w", w.holder, errHolderGone)
			}
			w.poll(st)
			if !st.Done {
				continue
			}
			err := w.answer(st)
			if cancelled == nil || err == nil {
				return st, err // with an interrupt: it completed meanwhile
			}
			log.Warn("replay cancelled: the follow running it stopped it", "pid", st.PID, "alias", st.Alias, "last", st.Last, "last_valid", st.LastValid, "answer", st.Error)
			return st, fmt.Errorf("%w: %w", ErrInterrupted, err)
		case <-interrupted:
			interrupted = nil
			cancelled = time.After(replayCancelWait)
			w.withdraw(sctx)
		case <-cancelled:
			return w.last, fmt.Errorf("%w: the replay was withdrawn; the follow (pid %d) running it did not confirm it stopped within %s", ErrInterrupted, w.holder, replayCancelWait)
		case <-t.C:
			if cancelled == nil && time.Since(w.seen) > replayStaleAfter {
				return w.last, fmt.Errorf("the follow (pid %d) running the replay has not reported on it for %s", w.holder, replayStaleAfter)
			}
		}
	}
}

// send posts the request (its stream bound to sctx) until the holder
// takes it: a job just started serves no replays yet, and is asked again
// every checkpointPoll for replayAcceptWait at most.
func (w *replayWatch) send(ctx, sctx context.Context, body []byte) (*http.Response, error) {
	t := time.NewTicker(checkpointPoll)
	defer t.Stop()
	deadline := time.Now().Add(replayAcceptWait)
	for {
		req, err := http.NewRequestWithContext(sctx, http.MethodPost, staging.EndpointURL+replayRoute, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		resp, err := w.client.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			w.accepted = true
			return resp, nil
		}
		if err == nil {
			err = fmt.Errorf("its endpoint answers %s", resp.Status)
			resp.Body.Close()
		}
		if w.gone() {
			return nil, fmt.Errorf("the process (pid %d) asked to run the replay: %w", w.holder, errHolderGone)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is held by pid %d, which did not take the replay request within %s (a blockhaul that serves replay requests is a follow of this version; last: %v)", w.dir, w.holder, replayAcceptWait, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the replay request was withdrawn before the process holding %s took it", ErrInterrupted, w.dir)
		case <-t.C:
		}
	}
}

// withdraw asks the holder to cancel this process's replay.
func (w *replayWatch) withdraw(ctx context.Context) {
	b, _ := json.Marshal(map[string]int{"pid": os.Getpid()})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, staging.EndpointURL+replayRoute+"/cancel", bytes.NewReader(b))
	if err != nil {
		return
	}
	if resp, err := w.client.Do(req); err == nil {
		resp.Body.Close()
	}
}

// poll takes a status the holder sent and shows its progress.
func (w *replayWatch) poll(st replayStatus) {
	w.holder = st.PID
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

// stoppedAt adds to err, a replay that ended without an answer, where its
// progress row says it stopped.
func (w *replayWatch) stoppedAt(ctx context.Context, cfg *Job, st replayStatus, err error) error {
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
