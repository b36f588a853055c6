package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
)

// serveReplays takes the replay requests export --replay sends to this
// follow's endpoint (POST replayRoute; replayreq.go), one at a time: each
// runs as export --replay would, on a PostgreSQL session of its own beside
// the head stream, whose checkpoint it never touches, while its progress
// streams back on the request's connection. A second request while one
// runs is refused (exit 2). The connection is the lease: a requester that
// withdraws (POST replayRoute/cancel) or whose connection ends has its
// replay cancelled. The returned stop, called with the follow's result as
// it ends, cancels a replay still running (its chunk in flight rolls back;
// its progress row stays for a rerun to resume), answers it saying why,
// and waits for it; requests after it are refused.
func serveReplays(ctx context.Context, cfg *Job, store *staging.Store, log *slog.Logger, c *counters) (stop func(*error)) {
	s := &replayServer{cfg: cfg, store: store, log: log, c: c, pid: os.Getpid(), ctx: context.WithoutCancel(ctx)}
	if c.endpoint != nil {
		c.endpoint.HandleFunc("POST "+replayRoute, s.serve)
		c.endpoint.HandleFunc("POST "+replayRoute+"/cancel", s.withdraw)
	}
	var once sync.Once
	return func(result *error) {
		once.Do(func() {
			reason := errors.New("the follow is stopping")
			if result != nil && *result != nil {
				reason = fmt.Errorf("the follow is stopping: %w", *result)
			}
			s.mu.Lock()
			s.stopping = reason
			h := s.cur
			s.mu.Unlock()
			if h != nil {
				h.cancel(reason)
				<-h.answered
			}
		})
	}
}

// replayServer is serveReplays' state.
type replayServer struct {
	cfg   *Job
	store *staging.Store
	log   *slog.Logger
	c     *counters
	pid   int
	ctx   context.Context

	mu       sync.Mutex
	cur      *heldReplay // the replay running, if any
	stopping error       // set once the follow stops: requests refused
}

// heldReplay is one request taken.
type heldReplay struct {
	req      replayRequest
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{} // the replay returned
	answered chan struct{} // its last status was sent
	changed  chan struct{} // the status changed since it was last sent
	err      error         // once done is closed

	mu sync.Mutex
	st replayStatus
}

// withdrawnBy is the cancel cause of a requester that withdrew its request.
func withdrawnBy(pid int) error {
	return fmt.Errorf("cancelled: the requester (pid %d) withdrew the request (interrupted, or it ended)", pid)
}

// serve takes one request and streams its status until it is answered.
func (s *replayServer) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	var req replayRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		s.refuse(w, req, fmt.Errorf("the replay request is unreadable: %w", err))
		return
	}
	rc, err := s.replayConfig(req)
	if err != nil {
		s.refuse(w, req, err)
		return
	}
	s.mu.Lock()
	switch {
	case s.stopping != nil:
		err = s.stopping
	case s.cur != nil:
		err = &ConfigError{Fields: []*FieldError{{Flag: "replay", Env: EnvName("replay"),
			Msg: fmt.Sprintf("the follow is running replay %q for pid %d and runs one at a time: ask again when it has ended", s.cur.st.Alias, s.cur.req.PID)}}}
	}
	var h *heldReplay
	if err == nil {
		h, err = s.start(req, rc)
	}
	s.mu.Unlock()
	if err != nil {
		s.refuse(w, req, err)
		return
	}
	defer close(h.answered)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	send := func() {
		h.mu.Lock()
		h.st.Updated = time.Now()
		st := h.st
		st.Rows = maps.Clone(h.st.Rows)
		h.mu.Unlock()
		if enc.Encode(st) == nil && flusher != nil {
			flusher.Flush()
		}
	}
	send()
	t := time.NewTicker(replayHeartbeat)
	defer t.Stop()
	gone := r.Context().Done()
	for {
		select {
		case <-h.done:
			s.finish(h)
			send()
			return
		case <-gone:
			gone = nil
			h.cancel(withdrawnBy(req.PID))
		case <-h.changed:
			send()
		case <-t.C:
			send()
		}
	}
}

// withdraw cancels the replay of the requester a request names.
func (s *replayServer) withdraw(w http.ResponseWriter, r *http.Request) {
	var req struct {
		PID int `json:"pid"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	h := s.cur
	s.mu.Unlock()
	if h == nil || h.req.PID != req.PID {
		http.Error(w, "no replay of that requester runs", http.StatusNotFound)
		return
	}
	h.cancel(withdrawnBy(req.PID))
	w.WriteHeader(http.StatusNoContent)
}

// replayConfig is the follow's job made the export --replay req asks for,
// or the refusal of a request this follow cannot run as asked: one whose
// decoding differs from the follow's in any option (every one is compared,
// the ABIs by the digests of their files) is refused naming each
// difference, since a replay through the follow decodes as its head
// stream does.
func (s *replayServer) replayConfig(req replayRequest) (*Job, error) {
	own := s.cfg
	fs := decodingDifferences(req, own)
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	if req.BatchBlocks <= 0 || req.BatchBlocks > MaxBatchBlocks {
		bad("batch-blocks", "want 1 to %d blocks, got %d", MaxBatchBlocks, req.BatchBlocks)
	}
	rc := *own
	rc.Command, rc.Tables, rc.Replay = CmdExport, "", req.Tables
	if len(fs) == 0 {
		all := own.Family.NewDecoder(own.Decoding.options()).Tables()
		if names, err := export.ParseTables(strings.Join(req.Tables, ","), all); err != nil {
			bad("replay", "%v", err)
		} else {
			rc.Decoding.Tables = names
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

// decodingDifferences names, flag by flag, where the request's chain,
// schema and decoding differ from the follow's own job.
func decodingDifferences(req replayRequest, own *Job) []*FieldError {
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	const who = "the follow"
	d := &own.Decoding
	if req.Chain != own.Family.Name { // the requester sends its family's name, not an alias
		bad("chain", "is %q; %s follows a %s chain", req.Chain, who, own.Family)
	}
	if req.Schema != own.Schema {
		bad("schema", "is %q; %s writes schema %q", req.Schema, who, own.Schema)
	}
	if req.EventEncoding != d.EventEncoding.String() {
		bad("event-encoding", "is %s; %s decodes events as %s, and a replay through it decodes them as the head stream does", req.EventEncoding, who, d.EventEncoding)
	}
	if !slices.Equal(req.Proto, d.Proto) || !slices.Equal(req.ProtoDescriptors, d.ProtoDescriptors) || req.Bech32Prefix != d.Bech32Prefix {
		bad("proto", "is --proto %q --proto-descriptors %q --bech32-prefix %q; %s decodes messages with --proto %q --proto-descriptors %q --bech32-prefix %q, and a replay through it decodes them as the head stream does (restart the follow with the new files)",
			req.Proto, req.ProtoDescriptors, req.Bech32Prefix, who, d.Proto, d.ProtoDescriptors, d.Bech32Prefix)
	}
	if !slices.Equal(req.ABIDigests, d.ABIDigests) {
		bad("abi", "is %s; %s decodes logs with %s, and a replay through it decodes them as the head stream does (restart the follow with the same --abi files, or replay from a copy of the store)",
			abiList(req.ABI, req.ABIDigests), who, abiList(d.ABI, d.ABIDigests))
	}
	return fs
}

// abiList says which ABIs values and their digests are, for a refusal.
func abiList(values, digests []string) string {
	if len(values) == 0 {
		return "no --abi"
	}
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = "--abi " + v
		if i < len(digests) {
			if _, sum, ok := strings.Cut(digests[i], "="); ok {
				sum, _, _ = strings.Cut(sum, "@")
				parts[i] += " (" + sum[:min(len(sum), len("sha256:")+12)] + ")"
			}
		}
	}
	return strings.Join(parts, " ")
}

// start runs the replay rc of req beside the head stream; s.mu is held.
func (s *replayServer) start(req replayRequest, rc *Job) (*heldReplay, error) {
	dec, err := rc.decoder()
	if err != nil {
		return nil, err
	}
	alias := rc.Alias
	if alias == "" {
		alias = export.ReplayAlias(dec.Tables())
	}
	rctx, cancel := context.WithCancelCause(s.ctx)
	h := &heldReplay{req: req, ctx: rctx, cancel: cancel, done: make(chan struct{}), answered: make(chan struct{}), changed: make(chan struct{}, 1),
		st: replayStatus{PID: s.pid, Requester: req.PID, Alias: alias, Rows: map[string]uint64{}}}
	for _, t := range rc.Decoding.Tables {
		h.st.Rows[t] = 0
	}
	s.cur = h
	log := s.log.With("replay", alias, "requester", req.PID)
	log.Info("replay requested on the endpoint: running it beside the head stream", "tables", strings.Join(rc.Decoding.Tables, ","))
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
	return h, nil
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
func (s *replayServer) finish(h *heldReplay) {
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
	log := s.log.With("replay", h.st.Alias, "requester", h.req.PID)
	h.mu.Lock()
	rangeSet := h.st.RangeSet
	h.mu.Unlock()
	// Stopped before it read its progress row: where a rerun resumes is
	// the row's, if it has one.
	rowLast, rowOK := uint64(0), false
	if h.err != nil && h.ctx.Err() != nil && !rangeSet {
		rowLast, rowOK = s.progressLast(h.st.Alias)
	}
	h.update(func(st *replayStatus) {
		st.Done = true
		switch {
		case h.err == nil:
		case h.ctx.Err() != nil:
			last, ok := st.Last, st.LastValid
			if !ok && st.RangeSet && st.Start > st.From {
				last, ok = st.Start-1, true // where this run resumed
			}
			if !ok && !st.RangeSet {
				last, ok = rowLast, rowOK
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
}

// progressLast is the last height the progress row of the replay alias
// holds, if it has one and is not complete.
func (s *replayServer) progressLast(alias string) (uint64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := connect(ctx, s.cfg)
	if err != nil {
		return 0, false
	}
	defer conn.Close(ctx)
	p, ok, err := export.ReadReplayProgress(ctx, conn, s.cfg.Schema, alias)
	if err != nil || !ok || p.Complete || !p.LastValid {
		return 0, false
	}
	return p.Last, true
}

// refuse answers a request it does not run.
func (s *replayServer) refuse(w http.ResponseWriter, req replayRequest, err error) {
	s.log.Warn("replay request refused", "requester", req.PID, "err", err)
	json.NewEncoder(w).Encode(replayStatus{PID: s.pid, Requester: req.PID, Done: true, Updated: time.Now(), Error: err.Error(), Exit: ExitCode(err)})
}

// update changes the replay's status under its lock.
func (h *heldReplay) update(f func(*replayStatus)) {
	h.mu.Lock()
	f(&h.st)
	h.mu.Unlock()
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func tableNamesOf(dec export.Decoder) []string {
	var names []string
	for _, t := range dec.Tables() {
		names = append(names, t.Name)
	}
	return names
}
