package pipeline

import (
	"bytes"
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestBadDatabaseOrRoleIsConfiguration: a DSN naming a database that does
// not exist, or a role that does not, is a configuration error (exit 2),
// for run, export and status alike (before: exit 1, which a Kubernetes Job
// retries); a server that is not there stays exit 1.
func TestBadDatabaseOrRoleIsConfiguration(t *testing.T) {
	good := pgtest.NewDatabase(t)
	u, err := url.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	with := func(change func(u *url.URL)) string {
		c := *u
		change(&c)
		return c.String()
	}
	noDB := with(func(u *url.URL) { u.Path = "/blockhaul_no_such_database" })
	noRole := with(func(u *url.URL) { u.User = url.User("blockhaul_no_such_role") })
	noServer := with(func(u *url.URL) { u.Host = "127.0.0.1:1" })
	stg := filepath.Join(t.TempDir(), "s")
	for _, c := range []struct {
		name, cmd, dsn string
		want           int
	}{
		{"no database, run", CmdRun, noDB, ExitConfig},
		{"no database, status", CmdStatus, noDB, ExitConfig},
		{"no role, run", CmdRun, noRole, ExitConfig},
		{"no role, export", CmdExport, noRole, ExitConfig},
		{"no server, run", CmdRun, noServer, 1},
	} {
		cfg := testConfig(c.cmd, c.dsn, stg, nil, 1, 20)
		var out bytes.Buffer
		_, err := Run(context.Background(), cfg, &out, quiet)
		if got := ExitCode(err); got != c.want {
			t.Errorf("%s: exit %d (%v), want %d", c.name, got, err, c.want)
		}
		// A refusal changed nothing: no job summary before its error
		// (before: "total: 0.1s", the staging size, then the error).
		if c.want == ExitConfig && strings.Contains(out.String(), "total:") {
			t.Errorf("%s: refused, but printed a summary:\n%s", c.name, out.String())
		}
	}
}
