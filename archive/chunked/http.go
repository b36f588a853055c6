package chunked

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/internal/backoff"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// httpObjects reads an archive over plain http(s) (a public bucket's
// website or any static server): GET base/name, each request tried up to
// attempts times when what failed may pass another time (a network error,
// a 5xx, 429, a body shorter than its Content-Length), with backoff.
type httpObjects struct {
	base, shown string
	client      *http.Client
	attempts    int
}

// httpBackoff paces the tries of one GET: before try a+1, 100ms·2^a up to
// 6.4s, jittered.
var httpBackoff = backoff.Policy{Base: 100 * time.Millisecond, Max: 6400 * time.Millisecond}

func (o *httpObjects) ReadAll(ctx context.Context, name string) ([]byte, error) {
	var last error
	for a := range o.attempts {
		if a > 0 {
			if err := backoff.Sleep(ctx, httpBackoff.Delay(a)); err != nil {
				return nil, err
			}
		}
		b, err := o.get(ctx, name)
		if err == nil || !fault.Retryable(err) {
			return b, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = err
	}
	return nil, &fault.SpentError{Attempts: o.attempts, Err: last}
}

func (o *httpObjects) get(ctx context.Context, name string) ([]byte, error) {
	u := o.base + "/" + name
	shown := strings.TrimSuffix(o.shown, "/") + "/" + name
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fault.Errorf(fault.Transient, "GET %s: %w", shown, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: %s: %w", shown, resp.Status, errNotFound)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return nil, fault.Errorf(fault.Transient, "GET %s: %s", shown, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s", shown, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fault.Errorf(fault.Transient, "GET %s: body: %w", shown, err)
	}
	if resp.ContentLength >= 0 && int64(len(b)) != resp.ContentLength {
		return nil, fault.Errorf(fault.Transient, "GET %s: %d bytes of %d", shown, len(b), resp.ContentLength)
	}
	return b, nil
}

func (o *httpObjects) Close() error {
	o.client.CloseIdleConnections()
	return nil
}
