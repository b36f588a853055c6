package pipeline

import (
	"errors"
	"strings"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/jackc/pgx/v5/pgconn"
)

// markConnectRefusal marks a connection the server refused for what the
// DSN names — a database that does not exist (3D000), a role that does not
// or may not log in, a wrong password (class 28) — as a configuration error
// (exit 2): no retry of the job makes the name right, so a Kubernetes Job
// fails at once (deploy/'s podFailurePolicy) instead of being retried.
func markConnectRefusal(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "3D000" || strings.HasPrefix(pe.Code, "28")) {
		return fault.Mark(err, fault.Config)
	}
	return err
}
