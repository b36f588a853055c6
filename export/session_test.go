package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestTransientCause(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("export: batch 1-2: %w", &pgconn.PgError{Code: code}) }
	for _, tc := range []struct {
		err   error
		cause string // "" means not transient
	}{
		{pg("57P01"), CauseAdminShutdown},
		{pg("57P02"), CauseCrashShutdown},
		{pg("57P03"), CauseCannotConnectNow},
		{pg("57014"), CauseStatementTimeout},
		{pg("40P01"), CauseDeadlock},
		{pg("40001"), CauseSerialization},
		{pg("08006"), CauseConnection},
		{pg("53300"), CauseTooManyConns},
		{pg("23505"), ""}, // unique violation: the conflict path's
		{pg("22P02"), ""}, // bad data
		{pg("23502"), ""},
		{pg("42P01"), ""}, // no such table
		{pg("42501"), ""}, // permission denied
		{pg("3D000"), ""}, // no such database
		{pg("28P01"), ""}, // bad password
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, CauseConnection},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), CauseConnection},
		{context.Canceled, ""},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), ""},
		{errors.New("export: continuity break at height 5"), ""},
		{nil, ""},
	} {
		cause, ok := TransientCause(tc.err)
		if cause != tc.cause || ok != (tc.cause != "") {
			t.Errorf("TransientCause(%v) = %q, %v; want %q", tc.err, cause, ok, tc.cause)
		}
	}
}
