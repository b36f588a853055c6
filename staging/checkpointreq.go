package staging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A consistent copy of a store another process is writing can only be made
// by that process: the requester asks it over its endpoint (POST
// CheckpointRoute, a checkpointRequest naming an absent destination beside
// the store); the holder (Store.CheckpointHandler) takes a Pebble
// checkpoint there and answers with a checkpointAnswer, holding the error
// if it failed.

// CheckpointRoute is the endpoint's route that takes checkpoints.
const CheckpointRoute = "/checkpoint"

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
// command that serves requests); Last is the last attempt's error.
type NoAnswerError struct {
	Dir  string
	PID  int
	Wait time.Duration
	Last error
}

func (e *NoAnswerError) Error() string {
	msg := fmt.Sprintf("staging: %s is held by pid %d, which did not answer a checkpoint request within %s", e.Dir, e.PID, e.Wait)
	if e.Last != nil {
		msg += " (last: " + e.Last.Error() + ")"
	}
	return msg
}

// RequestCheckpoint asks the process holding the store in dir (open in
// another process: Open returned an *InUseError) to take a Pebble
// checkpoint into dest, a directory that must not exist yet, beside dir (in
// dir's parent directory or below it), and returns the PID of the process
// that took it. A holder not answering on its endpoint yet (a job just
// started) is asked again every poll, for at most wait. dest is removed
// when the request fails.
func RequestCheckpoint(ctx context.Context, dir, dest string, wait, poll time.Duration) (int, error) {
	dest, err := filepath.Abs(dest)
	if err != nil {
		return 0, err
	}
	b, _ := json.Marshal(checkpointRequest{Dest: dest, PID: os.Getpid()})
	client := EndpointClient(dir)
	deadline := time.Now().Add(wait)
	for {
		a, err := askCheckpoint(ctx, client, b)
		var unanswered *unansweredError
		switch {
		case err == nil && a.Error != "":
			os.RemoveAll(dest)
			return a.PID, fmt.Errorf("staging: the process holding %s could not take a checkpoint: %s", dir, a.Error)
		case err == nil:
			return a.PID, nil
		case ctx.Err() != nil:
			os.RemoveAll(dest)
			return 0, ctx.Err()
		case !errors.As(err, &unanswered):
			os.RemoveAll(dest)
			return 0, fmt.Errorf("staging: checkpoint of %s: %w", dir, err)
		case !time.Now().Add(poll).Before(deadline):
			e := &NoAnswerError{Dir: dir, Wait: wait, Last: unanswered.err}
			if ie, ok := inUse(vfs.Default, dir, nil).(*InUseError); ok {
				e.PID = ie.PID
			}
			os.RemoveAll(dest)
			return 0, e
		}
		select {
		case <-time.After(poll):
		case <-ctx.Done():
			os.RemoveAll(dest)
			return 0, ctx.Err()
		}
	}
}

// unansweredError is a request no process answered: no endpoint, or one
// that is not a checkpoint taker.
type unansweredError struct{ err error }

func (e *unansweredError) Error() string { return e.err.Error() }

func askCheckpoint(ctx context.Context, client *http.Client, body []byte) (checkpointAnswer, error) {
	var a checkpointAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, EndpointURL+CheckpointRoute, bytes.NewReader(body))
	if err != nil {
		return a, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return a, &unansweredError{err}
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return a, fmt.Errorf("read the holder's answer: %w", err)
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		return a, &unansweredError{fmt.Errorf("the endpoint does not take checkpoints (%s)", resp.Status)}
	}
	if err := json.Unmarshal(rb, &a); err != nil {
		return a, fmt.Errorf("the holder's answer (%s): %w", resp.Status, err)
	}
	return a, nil
}

// CheckpointHandler takes the checkpoint a request names, into an absent
// destination beside the store (the store stays writable meanwhile), and
// answers; a destination that is not is refused in the answer.
func (s *Store) CheckpointHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req checkpointRequest
		a := checkpointAnswer{PID: os.Getpid()}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			a.Error = "request unreadable: " + err.Error()
		} else if err := s.checkDest(req.Dest); err != nil {
			a.Error = err.Error()
		} else if err := s.Checkpoint(req.Dest); err != nil {
			a.Error = err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		if a.Error != "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		json.NewEncoder(w).Encode(a)
	})
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
