package pipeline

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// pgConn connects to dsn for the rest of the test.
func pgConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn := pgtest.ConnectTo(t, dsn)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// errKilled is what killAfterCommits makes a commit return.
var errKilled = errors.New("killed after commit")

// killAfterCommits fails every nth batch commit of any stream right after
// it committed (before its staging mirror, as a SIGKILL there leaves it),
// up to max times, with errKilled. It returns the count of kills so far
// and a function that removes the hook.
func killAfterCommits(n, max int64) (kills *atomic.Int64, restore func()) {
	var hits atomic.Int64
	kills = new(atomic.Int64)
	restore = crashpoint.Set(func(_ context.Context, p crashpoint.Point) error {
		if p == crashpoint.AfterCommit && hits.Add(1)%n == 0 && kills.Load() < max {
			kills.Add(1)
			return errKilled
		}
		return nil
	})
	return kills, restore
}
