package staging

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A store is open in one process only (Pebble locks its directory), so a
// consistent copy of a store another process is writing can only be made
// by that process. The request travels through the staging directory
// itself: the requester writes checkpointReqPrefix<id>.request naming an
// empty destination, the holder (ServeCheckpointRequests, polled by every
// long-running command) takes a Pebble checkpoint there and answers with
// <id>.done, holding the error if it failed.
const (
	checkpointReqPrefix = "blockhaul-checkpoint-"
	checkpointReqSuffix = ".request"
	checkpointAnsSuffix = ".done"
)

type checkpointRequest struct {
	Dest string `json:"dest"`
	PID  int    `json:"pid"` // the requester, for the holder's log
}

type checkpointAnswer struct {
	PID   int    `json:"pid"` // the holder, which took the checkpoint
	Error string `json:"error,omitempty"`
}

// NoAnswerError is a checkpoint request the process holding the store did
// not answer in time (an older blockhaul, or one that is not running a
// command that serves requests).
type NoAnswerError struct {
	Dir  string
	PID  int
	Wait time.Duration
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("staging: %s is held by pid %d, which did not answer a checkpoint request within %s", e.Dir, e.PID, e.Wait)
}

// RequestCheckpoint asks the process holding the store in dir (open in
// another process: Open returned an *InUseError) to take a Pebble
// checkpoint into dest, a directory that must not exist yet, beside dir (in
// dir's parent directory or below it), and waits for its answer, polling
// every poll, for at most wait. It returns the PID of the process that
// took the checkpoint. dest is removed when the request fails.
func RequestCheckpoint(ctx context.Context, dir, dest string, wait, poll time.Duration) (int, error) {
	dest, err := filepath.Abs(dest)
	if err != nil {
		return 0, err
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return 0, err
	}
	id := hex.EncodeToString(idb[:])
	req := filepath.Join(dir, checkpointReqPrefix+id+checkpointReqSuffix)
	ans := filepath.Join(dir, checkpointReqPrefix+id+checkpointAnsSuffix)
	b, _ := json.Marshal(checkpointRequest{Dest: dest, PID: os.Getpid()})
	if err := WriteFileAtomic(req, b); err != nil {
		return 0, fmt.Errorf("staging: request a checkpoint of %s: %w", dir, err)
	}
	defer os.Remove(req) // unanswered: withdrawn
	defer os.Remove(ans)
	t := time.NewTicker(poll)
	defer t.Stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		b, err := os.ReadFile(ans)
		switch {
		case err == nil:
			var a checkpointAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				return 0, fmt.Errorf("staging: checkpoint answer from the holder of %s: %w", dir, err)
			}
			if a.Error != "" {
				os.RemoveAll(dest)
				return a.PID, fmt.Errorf("staging: the process holding %s could not take a checkpoint: %s", dir, a.Error)
			}
			return a.PID, nil
		case !errors.Is(err, fs.ErrNotExist):
			return 0, fmt.Errorf("staging: checkpoint answer: %w", err)
		}
		select {
		case <-t.C:
		case <-deadline.C:
			e := &NoAnswerError{Dir: dir, Wait: wait}
			if ie, ok := inUse(vfs.Default, dir, nil).(*InUseError); ok {
				e.PID = ie.PID
			}
			// The holder may be taking it right now: remove the request
			// first, then whatever it wrote.
			os.Remove(req)
			os.RemoveAll(dest)
			return 0, e
		case <-ctx.Done():
			os.Remove(req)
			os.RemoveAll(dest)
			return 0, ctx.Err()
		}
	}
}

// ServeCheckpointRequests answers every checkpoint request waiting in the
// store's directory: a Pebble checkpoint into the destination each names
// (the store stays writable meanwhile), then the answer. A request whose
// destination is not an absent path beside the store is refused in its
// answer. It returns how many requests it answered.
func (s *Store) ServeCheckpointRequests() int {
	names, err := filepath.Glob(filepath.Join(s.dir, checkpointReqPrefix+"*"+checkpointReqSuffix))
	if err != nil {
		return 0
	}
	n := 0
	for _, req := range names {
		b, err := os.ReadFile(req)
		if err != nil {
			continue // withdrawn meanwhile
		}
		if err := os.Remove(req); err != nil {
			continue // taken or withdrawn: not ours to answer
		}
		var r checkpointRequest
		a := checkpointAnswer{PID: os.Getpid()}
		if err := json.Unmarshal(b, &r); err != nil {
			a.Error = "request unreadable: " + err.Error()
		} else if err := s.checkDest(r.Dest); err != nil {
			a.Error = err.Error()
		} else if err := s.Checkpoint(r.Dest); err != nil {
			a.Error = err.Error()
		}
		ans := strings.TrimSuffix(req, checkpointReqSuffix) + checkpointAnsSuffix
		ab, _ := json.Marshal(a)
		if err := WriteFileAtomic(ans, ab); err == nil {
			n++
		}
	}
	return n
}

// checkDest accepts an absolute path that does not exist yet, inside the
// directory that holds the store.
func (s *Store) checkDest(dest string) error {
	if !filepath.IsAbs(dest) {
		return fmt.Errorf("destination %q is not an absolute path", dest)
	}
	parent, err := filepath.Abs(filepath.Dir(filepath.Clean(s.dir)))
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(parent, filepath.Clean(dest))
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("destination %s is not beside the store (in %s)", dest, parent)
	}
	if own, err := filepath.Abs(s.dir); err == nil {
		if r, err := filepath.Rel(own, filepath.Clean(dest)); err == nil && !strings.HasPrefix(r, "..") {
			return fmt.Errorf("destination %s is inside the store", dest)
		}
	}
	if _, err := os.Lstat(dest); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("destination %s already exists", dest)
	}
	return nil
}

// WriteFileAtomic writes b to path through a temporary file renamed over
// it, so that a reader sees the old content or the new, never a part: how
// the files beside a store that another process reads are written.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
