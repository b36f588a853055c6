package staging

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// A store is open in one process only (Pebble locks its directory), so the
// commands run beside a job that holds it (status, snapshot, verify,
// export --replay) ask that job: over HTTP on a Unix socket the job serves
// in the staging directory, its one local endpoint. The routes are the
// job's (pipeline mounts them); this file is the socket: where it is, how
// a job claims it and how another process reaches it.

// SocketName is the endpoint's Unix socket in a staging directory.
const SocketName = "blockhaul.sock"

// maxSocketPath is the longest path a Unix socket address takes (sun_path
// is 108 bytes on Linux, 104 on the BSDs, with its terminating NUL).
const maxSocketPath = 103

// socketAddr is the address of dir's socket to bind or dial. A path too
// long for a socket address is reached through the directory opened
// (/proc/self/fd/N/blockhaul.sock, Linux); done closes it, after the bind
// or the dial.
func socketAddr(dir string) (addr string, done func(), err error) {
	path := filepath.Join(dir, SocketName)
	if len(path) <= maxSocketPath {
		return path, func() {}, nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	addr = "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + SocketName
	if len(addr) > maxSocketPath {
		d.Close()
		return "", nil, fmt.Errorf("staging: socket path %s is too long", path)
	}
	return addr, func() { d.Close() }, nil
}

// EndpointInUseError is a staging directory whose socket another live
// process answers on.
type EndpointInUseError struct{ Path string }

func (e *EndpointInUseError) Error() string {
	return fmt.Sprintf("staging: %s is answered by another running process", e.Path)
}

// ListenEndpoint claims dir's socket for this process. A socket file that
// nobody answers on (left by a job that was killed) is removed first; one
// that answers is another process's (an *EndpointInUseError). Closing the
// listener removes the socket file.
func ListenEndpoint(dir string) (net.Listener, error) {
	path := filepath.Join(dir, SocketName)
	if _, err := os.Lstat(path); err == nil {
		if c, err := dialSocket(context.Background(), dir); err == nil {
			c.Close()
			return nil, &EndpointInUseError{Path: path}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("staging: remove the stale socket %s: %w", path, err)
		}
	}
	addr, done, err := socketAddr(dir)
	if err != nil {
		return nil, err
	}
	defer done()
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return nil, fmt.Errorf("staging: listen on %s: %w", path, err)
	}
	if addr == path {
		return ln, nil
	}
	// Bound through /proc/self/fd: Close would unlink a path that no
	// longer names the directory.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return unlinkOnClose{ln, path}, nil
}

type unlinkOnClose struct {
	net.Listener
	path string
}

func (l unlinkOnClose) Close() error {
	err := l.Listener.Close()
	os.Remove(l.path)
	return err
}

func dialSocket(ctx context.Context, dir string) (net.Conn, error) {
	addr, done, err := socketAddr(dir)
	if err != nil {
		return nil, err
	}
	defer done()
	var d net.Dialer
	return d.DialContext(ctx, "unix", addr)
}

// EndpointURL is the base of the endpoint's URLs for EndpointClient.
const EndpointURL = "http://blockhaul"

// EndpointClient is an HTTP client of the endpoint served in dir: every
// request it makes (to EndpointURL + a route) goes to dir's socket. It has
// no overall timeout (a replay's answer streams for as long as the replay
// runs); give requests a context.
func EndpointClient(dir string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSocket(ctx, dir)
		},
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 0,
		IdleConnTimeout:       time.Second,
	}}
}

// ServeEndpoint serves h on ln until ctx ends, then closes the server, its
// connections and the socket (a handler still running sees its request's
// context end).
func ServeEndpoint(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("staging: serve the endpoint: %w", err)
	case <-ctx.Done():
	}
	srv.Close()
	<-errc
	return nil
}
