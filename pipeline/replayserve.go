package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// serveReplays takes the replay requests that export --replay leaves in
// this follow's staging directory (replayreq.go), one at a time: each runs
// as export --replay would, on a PostgreSQL session of its own beside the
// head stream, whose checkpoint it never touches. A second request while
// one runs is refused (exit 2). The returned stop, called with the
// follow's result as it ends, cancels a replay still running (its chunk in
// flight rolls back; its progress row stays for a rerun to resume),
// answers it saying why, and waits for it.
func serveReplays(ctx context.Context, cfg *Config, store *staging.Store, log *slog.Logger, c *counters) (stop func(*error)) {
	s := &replayServer{cfg: cfg, store: store, log: log, c: c, pid: os.Getpid()}
	quit := make(chan error)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(context.WithoutCancel(ctx), quit)
	}()
	var once sync.Once
	return func(result *error) {
		once.Do(func() {
			reason := errors.New("the follow is stopping")
			if result != nil && *result != nil {
				reason = fmt.Errorf("the follow is stopping: %w", *result)
			}
			quit <- reason
			<-done
		})
	}
}

// replayServer is serveReplays' state, owned by its goroutine.
type replayServer struct {
	cfg   *Config
	store *staging.Store
	log   *slog.Logger
	c     *counters
	pid   int
	cur   *heldReplay // the replay running, if any
}

// heldReplay is one request taken.
type heldReplay struct {
	files     replayFiles
	req       replayRequest
	ctx       context.Context
	cancel    context.CancelCauseFunc
	cancelled bool
	done      chan struct{}
	err       error // once done is closed

	mu    sync.Mutex
	st    replayStatus
	wrote time.Time
	dirty bool
}

func (s *replayServer) run(ctx context.Context, quit <-chan error) {
	s.sweep(true)
	t := time.NewTicker(checkpointPoll)
	defer t.Stop()
	for {
		var finished <-chan struct{}
		if s.cur != nil {
			finished = s.cur.done
		}
		select {
		case reason := <-quit:
			if h := s.cur; h != nil {
				h.cancel(reason)
				<-h.done
				s.finish()
			}
			return
		case <-finished:
			s.finish()
		case <-t.C:
			s.tick(ctx)
		}
	}
}

// tick watches the running replay's lease, rewrites its status, and takes
// the requests waiting.
func (s *replayServer) tick(ctx context.Context) {
	if h := s.cur; h != nil {
		if _, err := os.Stat(h.files.running); !h.cancelled && (errors.Is(err, os.ErrNotExist) || !staging.ProcessAlive(h.req.PID)) {
			h.cancelled = true
			h.cancel(fmt.Errorf("cancelled: the requester (pid %d) withdrew the request (interrupted, or it ended)", h.req.PID))
		}
		h.writeStatus(false)
	}
	names, _ := filepath.Glob(filepath.Join(s.store.Dir(), replayFilePrefix+"*"+replayReqSuffix))
	for _, name := range names {
		files := replayFilesOf(s.store.Dir(), strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), replayFilePrefix), replayReqSuffix))
		b, err := os.ReadFile(files.request)
		if err != nil {
			continue // withdrawn meanwhile
		}
		if err := os.Rename(files.request, files.running); err != nil {
			continue // withdrawn meanwhile
		}
		var req replayRequest
		if err := json.Unmarshal(b, &req); err != nil {
			s.refuse(files, req, fmt.Errorf("the replay request %s is unreadable: %w", files.request, err))
			continue
		}
		if !staging.ProcessAlive(req.PID) {
			os.Remove(files.running) // nobody waits for it
			continue
		}
		rc, err := s.replayConfig(req)
		if err != nil {
			s.refuse(files, req, err)
			continue
		}
		if h := s.cur; h != nil {
			s.refuse(files, req, &ConfigError{Fields: []*FieldError{{Flag: "replay", Env: EnvName("replay"),
				Msg: fmt.Sprintf("the follow is running replay %q for pid %d and runs one at a time: ask again when it has ended", h.st.Alias, h.req.PID)}}})
			continue
		}
		s.start(ctx, files, req, rc)
	}
	s.sweep(false)
}

// replayConfig is the follow's configuration made the export --replay req
// asks for, or the refusal of a request this follow cannot run as asked.
func (s *replayServer) replayConfig(req replayRequest) (*Config, error) {
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	const who = "the follow"
	fam, ferr := family.Lookup(req.Chain)
	own, _ := s.cfg.family()
	if ferr != nil || fam != own {
		bad("chain", "is %q; %s follows a %s chain", req.Chain, who, own)
	}
	if req.Schema != s.cfg.Schema {
		bad("schema", "is %q; %s writes schema %q", req.Schema, who, s.cfg.Schema)
	}
	if req.EventEncoding != s.cfg.EventEncoding.String() {
		bad("event-encoding", "is %s; %s decodes events as %s, and a replay through it decodes them as the head stream does", req.EventEncoding, who, s.cfg.EventEncoding)
	}
	if req.BatchBlocks <= 0 || req.BatchBlocks > MaxBatchBlocks {
		bad("batch-blocks", "want 1 to %d blocks, got %d", MaxBatchBlocks, req.BatchBlocks)
	}
	rc := *s.cfg
	rc.Command, rc.Tables, rc.Replay = CmdExport, "", req.Tables
	if len(fs) == 0 {
		if dec, err := familyDecoder(&rc); err != nil {
			return nil, err
		} else if names, err := export.ParseTables(strings.Join(req.Tables, ","), dec.Tables()); err != nil {
			bad("replay", "%v", err)
		} else {
			rc.SelectedTables = names
		}
	}
	if len(fs) > 0 {
		return nil, &ConfigError{Fields: fs}
	}
	rc.Alias = req.Alias
	rc.From, rc.To, rc.FromSet, rc.ToSet = req.From, req.To, req.FromSet, req.ToSet
	rc.BatchBlocks, rc.SyncCommit = req.BatchBlocks, req.SyncCommit
	return &rc, nil
}

// start runs the replay rc of req beside the head stream.
func (s *replayServer) start(ctx context.Context, files replayFiles, req replayRequest, rc *Config) {
	dec, err := newDecoder(rc)
	if err != nil {
		s.refuse(files, req, err)
		return
	}
	alias := rc.Alias
	if alias == "" {
		alias = export.ReplayAlias(dec.Tables())
	}
	rctx, cancel := context.WithCancelCause(ctx)
	h := &heldReplay{files: files, req: req, ctx: rctx, cancel: cancel, done: make(chan struct{}),
		st: replayStatus{PID: s.pid, Requester: req.PID, Alias: alias, Rows: map[string]uint64{}}}
	for _, t := range rc.SelectedTables {
		h.st.Rows[t] = 0
	}
	h.writeStatus(true)
	s.cur = h
	log := s.log.With("replay", alias, "requester", req.PID)
	log.Info("replay requested through the staging directory: running it beside the head stream", "tables", strings.Join(rc.SelectedTables, ","))
	names := tableNamesOf(dec)
	hooks := replayHooks{
		connected: func(ctx context.Context, db *export.Session) error { return s.sameDatabase(ctx, db, req) },
		onStart: func(from, to, next uint64) {
			h.update(func(st *replayStatus) { st.RangeSet, st.From, st.To, st.Start = true, from, to, next })
		},
		onBatch: func(b export.BatchStats) {
			h.update(func(st *replayStatus) {
				st.Last, st.LastValid = b.To, true
				st.Blocks += b.To - b.From + 1
				st.Batches++
				for i, n := range b.Rows {
					st.Rows[names[i]] += uint64(n)
				}
			})
		},
	}
	go func() {
		defer close(h.done)
		// What a replay meets must not end the follow it runs in.
		defer func() {
			if r := recover(); r != nil {
				h.err = fmt.Errorf("replay %s panicked: %v", alias, r)
				log.Error("replay panicked; the head stream goes on", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			}
		}()
		_, h.err = replayTables(rctx, rc, s.store, log, s.c, hooks)
	}()
}

// sameDatabase refuses a request whose --pg names another database than
// the follow's.
func (s *replayServer) sameDatabase(ctx context.Context, db *export.Session, req replayRequest) error {
	var id string
	err := db.Do(ctx, "identify the database", func(ctx context.Context, conn *pgx.Conn) (err error) {
		id, err = databaseIdentity(ctx, conn)
		return err
	})
	if err != nil {
		return err
	}
	if id != req.Database {
		return &ConfigError{Fields: []*FieldError{{Flag: "pg", Env: EnvName("pg"),
			Msg: fmt.Sprintf("names database %s; the follow writes %s, and runs a replay on its own database only", req.Database, id)}}}
	}
	return nil
}

// finish answers the replay that ended.
func (s *replayServer) finish() {
	h := s.cur
	s.cur = nil
	log := s.log.With("replay", h.st.Alias, "requester", h.req.PID)
	h.update(func(st *replayStatus) {
		st.Done = true
		switch {
		case h.err == nil:
		case h.ctx.Err() != nil:
			last, ok := st.Last, st.LastValid
			if !ok && st.RangeSet && st.Start > st.From {
				last, ok = st.Start-1, true // where this run resumed
			}
			if ok {
				st.Error = fmt.Sprintf("%v: the replay stopped after height %d; a rerun resumes from %d", context.Cause(h.ctx), last, last+1)
			} else {
				st.Error = fmt.Sprintf("%v: the replay stopped before its first chunk committed; a rerun starts it", context.Cause(h.ctx))
			}
			st.Exit = ExitInterrupted
			log.Warn("replay stopped", "why", st.Error)
		default:
			st.Error, st.Exit = h.err.Error(), ExitCode(h.err)
			log.Warn("replay failed; the head stream goes on", "err", h.err, "exit", st.Exit)
		}
	})
	h.writeStatus(true)
	os.Remove(h.files.running)
}

// refuse answers a request it does not run.
func (s *replayServer) refuse(files replayFiles, req replayRequest, err error) {
	s.log.Warn("replay request refused", "requester", req.PID, "err", err)
	b, _ := json.Marshal(replayStatus{PID: s.pid, Requester: req.PID, Done: true, Updated: time.Now(), Error: err.Error(), Exit: ExitCode(err)})
	staging.WriteFileAtomic(files.status, b)
	os.Remove(files.running)
}

// sweep removes the answers nobody waits for any more (their requester is
// gone) and, when the server starts, the taken requests and answers of an
// earlier holder of the directory, which ended without removing them.
func (s *replayServer) sweep(first bool) {
	dir := s.store.Dir()
	if first {
		for _, suffix := range []string{replayRunSuffix, replayStatusSuffix} {
			old, _ := filepath.Glob(filepath.Join(dir, replayFilePrefix+"*"+suffix))
			for _, f := range old {
				os.Remove(f)
			}
		}
		return
	}
	answers, _ := filepath.Glob(filepath.Join(dir, replayFilePrefix+"*"+replayStatusSuffix))
	for _, f := range answers {
		if s.cur != nil && f == s.cur.files.status {
			continue
		}
		var st replayStatus
		if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &st) == nil && st.Done && !staging.ProcessAlive(st.Requester) {
			os.Remove(f)
		}
	}
}

// update changes the replay's status under its lock.
func (h *heldReplay) update(f func(*replayStatus)) {
	h.mu.Lock()
	f(&h.st)
	h.dirty = true
	h.mu.Unlock()
}

// writeStatus rewrites the status file when it changed, or when
// replayHeartbeat has passed (force: now).
func (h *heldReplay) writeStatus(force bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if !force && !h.dirty && now.Sub(h.wrote) < replayHeartbeat {
		return
	}
	h.st.Updated = now
	b, err := json.Marshal(h.st)
	if err != nil {
		return
	}
	if staging.WriteFileAtomic(h.files.status, b) == nil {
		h.wrote, h.dirty = now, false
	}
}

func tableNamesOf(dec export.Decoder) []string {
	var names []string
	for _, t := range dec.Tables() {
		names = append(names, t.Name)
	}
	return names
}
