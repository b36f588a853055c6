package export

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// cutConn is a connection to PostgreSQL whose next write, once armed,
// cancels the query's context first; its reads then wait until pgx, seeing
// the cancellation, has set a deadline: a query cut short in flight, as
// another stream's failure cuts this one's (pgx then closes the
// connection).
type cutConn struct {
	net.Conn
	cancel context.CancelFunc
	armed  atomic.Bool
	fired  atomic.Bool
	cut    chan struct{}
	once   sync.Once
}

func (c *cutConn) Write(b []byte) (int, error) {
	if c.armed.CompareAndSwap(true, false) {
		c.fired.Store(true)
		c.cancel()
	}
	return c.Conn.Write(b)
}

func (c *cutConn) Read(b []byte) (int, error) {
	if c.fired.Load() {
		<-c.cut
	}
	return c.Conn.Read(b)
}

func (c *cutConn) SetDeadline(t time.Time) error {
	err := c.Conn.SetDeadline(t)
	if c.fired.Load() && !t.IsZero() {
		c.once.Do(func() { close(c.cut) })
	}
	return err
}

// TargetName cut short by a cancelled context says so (the error wraps
// context.Canceled); it asked again on the connection pgx had closed and
// returned "export: identify database: conn closed", which hid the cause.
func TestTargetNameCutShortSaysCancelled(t *testing.T) {
	cfg, err := pgx.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cc *cutConn
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil || cc != nil {
			return c, err
		}
		cc = &cutConn{Conn: c, cancel: cancel, cut: make(chan struct{})}
		return cc, nil
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := TargetName(ctx, conn, "s", Stream{Head: true}); err != nil {
		t.Fatalf("TargetName on a working connection: %v", err)
	}
	cc.armed.Store(true)
	_, err = TargetName(ctx, conn, "s", Stream{Head: true})
	if !cc.fired.Load() {
		t.Fatal("the query was not cut")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "identify database") {
		t.Fatalf("TargetName cut short: %v, want identify database: … context canceled", err)
	}
}
