package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/staging"
)

// LiveStatus is what a running job answers on its store's endpoint (GET
// statusRoute), so that `status` can answer while the job holds the
// directory's lock (Pebble opens a store in one process only): as of the
// request (Updated).
type LiveStatus struct {
	PID      int                   `json:"pid"`
	Command  string                `json:"command"`
	From     uint64                `json:"from"`
	To       uint64                `json:"to"`
	ToSet    bool                  `json:"to_set"`
	Started  time.Time             `json:"started"`
	Updated  time.Time             `json:"updated"`
	Fetch    monitor.FetchSummary  `json:"fetch"`
	Export   monitor.ExportSummary `json:"export"`
	Staged   []staging.Range       `json:"staged"`    // staged ranges of the job's range, as of Updated
	StagedOK bool                  `json:"staged_ok"` // Staged could be read
	// Chain is the store's identity, once it has one.
	Chain *staging.Identity `json:"chain,omitempty"`
	// Mirrors are the export targets' checkpoints the store mirrors.
	Mirrors map[string]staging.Checkpoint `json:"mirrors,omitempty"`
}

// The routes of a running job's endpoint (staging.ListenEndpoint: a Unix
// socket in its staging directory) besides staging.CheckpointRoute
// (snapshot and verify beside the job) and the monitor's /healthz, /readyz
// and /metrics.
const (
	statusRoute = "/status" // GET: LiveStatus
	replayRoute = "/replay" // POST: a replay, run by a follow (replayserve.go)
)

// checkpointPoll is how often a requester asks again a job that does not
// answer on its endpoint yet (one just started).
const checkpointPoll = 200 * time.Millisecond

// startEndpoint serves the store's endpoint while the job runs: its live
// status, checkpoints, the monitor's routes; a follow adds replays to
// c.endpoint. stop closes it and removes its socket. A job never fails
// because it could not serve it: it logs why and runs without.
func startEndpoint(cfg *Job, store *staging.Store, c *counters, log *slog.Logger) (stop func()) {
	m := c.m
	started := time.Now()
	mux := http.NewServeMux()
	c.endpoint = mux
	mux.HandleFunc("GET "+statusRoute, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(liveStatusOf(cfg, store, m, started))
	})
	mux.Handle("POST "+staging.CheckpointRoute, store.CheckpointHandler())
	mux.Handle("/", m.Handler())
	ln, err := staging.ListenEndpoint(store.Dir())
	if err != nil {
		log.Warn("no endpoint for status, snapshot, verify or replay beside this job", "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- staging.ServeEndpoint(ctx, ln, mux) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				log.Warn("endpoint", "err", err)
			}
		})
	}
}

// liveStatusOf is the job's status now.
func liveStatusOf(cfg *Job, store *staging.Store, m *monitor.Monitor, started time.Time) LiveStatus {
	sum := m.Summary()
	ls := LiveStatus{PID: os.Getpid(), Command: cfg.Command, From: cfg.From, To: cfg.To, ToSet: cfg.ToSet,
		Started: started, Updated: time.Now(), Fetch: sum.Fetch, Export: sum.Export}
	from, to := cfg.From, cfg.To
	if !cfg.ToSet {
		if _, hi, ok, err := store.Bounds(); err == nil && ok {
			to = hi
		}
	}
	if to >= from {
		if rs, err := store.Staged(from, to); err == nil {
			ls.Staged, ls.StagedOK = rs, true
		}
	}
	if id, ok := store.Identity(); ok {
		ls.Chain = &id
	}
	if ms, err := store.Mirrors(); err == nil && len(ms) > 0 {
		ls.Mirrors = ms
	}
	return ls
}

// readLiveStatus asks the job serving the endpoint in dir for its status.
func readLiveStatus(dir string) (*LiveStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, staging.EndpointURL+statusRoute, nil)
	if err != nil {
		return nil, err
	}
	resp, err := staging.EndpointClient(dir).Do(req)
	if err != nil {
		return nil, fmt.Errorf("the endpoint of the job holding %s: %w", dir, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the endpoint of the job holding %s: status: %s", dir, resp.Status)
	}
	var ls LiveStatus
	if err := json.NewDecoder(resp.Body).Decode(&ls); err != nil {
		return nil, fmt.Errorf("the endpoint of the job holding %s: status: %w", dir, err)
	}
	return &ls, nil
}

// liveStatus prints what the job holding dir last wrote, when err says
// another process holds it; it returns err unchanged otherwise. Without
// --schema, the schema --pg is read from becomes the store's family's.
func liveStatus(cfg *Job, dir string, err error, out io.Writer) (string, error) {
	schema := cfg.Schema
	var iu *staging.InUseError
	if !errors.As(err, &iu) {
		return schema, err
	}
	ls, rerr := readLiveStatus(dir)
	if rerr != nil {
		return schema, err
	}
	fmt.Fprintf(out, "staging %s: in use by a running blockhaul %s (pid %d), started %s\n", dir, ls.Command, ls.PID, ls.Started.UTC().Format(time.RFC3339))
	rng := fmt.Sprintf("%d-", ls.From)
	if ls.ToSet {
		rng += fmt.Sprint(ls.To)
	}
	if u, err := staging.DirUsage(dir); err == nil {
		fmt.Fprintf(out, "  size:     %s\n", u.HeldString())
	}
	if id := ls.Chain; id != nil {
		if cfg.SchemaDefaulted {
			schema = id.Family.String()
		}
		fmt.Fprintf(out, "  chain:    %s %q, identified by block %d %X (the first staged)\n", id.Family, id.ChainID, id.FirstHeight, id.FirstHash)
	}
	fmt.Fprintf(out, "  job:      range %s; as of %s (%.0fs ago)\n", rng, ls.Updated.UTC().Format(time.RFC3339), time.Since(ls.Updated).Seconds())
	fmt.Fprintf(out, "  fetch:    %d of %d planned heights staged (%.0f blocks/s)\n", ls.Fetch.Blocks, ls.Fetch.Planned, ls.Fetch.BlocksPerS)
	if ls.Export.Blocks > 0 || ls.Export.LastValid {
		last := "none"
		if ls.Export.LastValid {
			last = fmt.Sprint(ls.Export.Last)
		}
		fmt.Fprintf(out, "  export:   %d blocks, %d rows, last height %s\n", ls.Export.Blocks, ls.Export.TotalRows, last)
		if len(ls.Export.Streams) > 1 {
			for i, c := range ls.Export.Streams {
				at := "nothing committed"
				if c.LastValid {
					at = fmt.Sprintf("height %d", c.Last)
				}
				fmt.Fprintf(out, "            stream %d of %d (heights %d-%d) at %s\n", i+1, len(ls.Export.Streams), c.From, c.To, at)
			}
		}
	}
	if ls.StagedOK {
		var n uint64
		for _, r := range ls.Staged {
			n += r.Len()
		}
		fmt.Fprintf(out, "  staged:   %d heights in %s (last known)", n, archive.Quantity(len(ls.Staged), "range"))
		for i, r := range ls.Staged {
			if i == 10 {
				fmt.Fprint(out, " …")
				break
			}
			fmt.Fprintf(out, " %s", r)
		}
		fmt.Fprintln(out)
		to := ls.To
		if !ls.ToSet && len(ls.Staged) > 0 {
			to = ls.Staged[len(ls.Staged)-1].To
		}
		if gaps := gapsOf(ls.Staged, ls.From, to); len(gaps) > 0 {
			var m uint64
			for _, g := range gaps {
				m += g.Len()
			}
			fmt.Fprintf(out, "  gaps:     %d heights of the job's range not staged yet, %s\n", m, ranges(gaps, 8))
		} else if ls.ToSet || len(ls.Staged) > 0 {
			fmt.Fprintln(out, "  gaps:     none in the job's range")
		}
	}
	writeMirrors(out, ls.Mirrors)
	return schema, nil
}

// gapsOf is what of [from, to] the sorted, disjoint ranges rs leave out.
func gapsOf(rs []staging.Range, from, to uint64) []staging.Range {
	var gaps []staging.Range
	next := from
	for _, r := range rs {
		if r.To < next {
			continue
		}
		if r.From > to {
			break
		}
		if r.From > next {
			gaps = append(gaps, staging.Range{From: next, To: r.From - 1})
		}
		if r.To >= to {
			return gaps
		}
		next = r.To + 1
	}
	if next <= to {
		gaps = append(gaps, staging.Range{From: next, To: to})
	}
	return gaps
}
