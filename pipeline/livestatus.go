package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/staging"
)

// LiveStatusFile is the file a running job rewrites in its staging
// directory every progress interval, so that `status` can answer while the
// job holds the directory's lock (Pebble opens a store in one process
// only).
const LiveStatusFile = "blockhaul-status.json"

// LiveStatus is what LiveStatusFile holds.
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

// checkpointPoll is how often a running job looks for checkpoint requests.
const checkpointPoll = 200 * time.Millisecond

// startLiveStatus writes the live status file now and every interval until
// the returned stop is called, which removes it. Writes are atomic (a
// temporary file renamed over the old one) and best effort: a job never
// fails because its status could not be written.
func startLiveStatus(cfg *Config, store *staging.Store, m *monitor.Monitor, interval time.Duration) (stop func()) {
	if interval <= 0 {
		interval = monitor.DefaultInterval
	}
	started := time.Now()
	path := filepath.Join(store.Dir(), LiveStatusFile)
	write := func() {
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
		b, err := json.Marshal(ls)
		if err != nil {
			return
		}
		staging.WriteFileAtomic(path, b)
	}
	write()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		// snapshot, run beside this job, asks it for a checkpoint through
		// the directory.
		cp := time.NewTicker(checkpointPoll)
		defer cp.Stop()
		for {
			select {
			case <-t.C:
				write()
			case <-cp.C:
				store.ServeCheckpointRequests()
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			os.Remove(path)
			os.Remove(path + ".tmp")
		})
	}
}

// readLiveStatus reads the live status file of dir.
func readLiveStatus(dir string) (*LiveStatus, error) {
	b, err := os.ReadFile(filepath.Join(dir, LiveStatusFile))
	if err != nil {
		return nil, err
	}
	var ls LiveStatus
	if err := json.Unmarshal(b, &ls); err != nil {
		return nil, fmt.Errorf("%s: %w", LiveStatusFile, err)
	}
	return &ls, nil
}

// liveStatus prints what the job holding dir last wrote, when err says
// another process holds it; it returns err unchanged otherwise. Without
// --schema, the schema --pg is read from becomes the store's family's.
func liveStatus(cfg *Config, dir string, err error, out io.Writer) error {
	var iu *staging.InUseError
	if !errors.As(err, &iu) {
		return err
	}
	ls, rerr := readLiveStatus(dir)
	if rerr != nil {
		return err
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
			cfg.Schema = id.Family.String()
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
	return nil
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
