package archive

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blockhaul/blockhaul/internal/pgtest"
)

// TestEstimateChecksTheDatabasesDisk: with a server on this machine and a
// role that may read where it keeps its data, estimate weighs the rows
// against that filesystem's free space (with the staging's growth when the
// two share it) and refuses a range that does not fit there, naming the
// directory; a role that may not read it gets the reason instead.
func TestEstimateChecksTheDatabasesDisk(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Connect(t)
	f := families()[0]
	stgDir := filepath.Join(t.TempDir(), "s")
	s := stage(t, stgDir, f, 1, 10)
	defer s.Close()
	tables := f.decoder.Tables()
	estimate := func(to uint64) (*EstimateReport, error) {
		return Estimate(ctx, f.name, cometbftRates, s, stgDir, conn, "cometbft", tables[0], tables, 1, to, nil)
	}

	var local, super bool
	if err := conn.QueryRow(ctx, "SELECT coalesce(host(inet_server_addr()) IN ('127.0.0.1', '::1'), true), (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)").Scan(&local, &super); err != nil {
		t.Fatal(err)
	}
	r, err := estimate(1000)
	if err != nil {
		t.Fatal(err)
	}
	if !local || !super {
		// Not this test's server (DATABASE_URL elsewhere): the reason is said.
		if r.DBDisk.Checked || r.DBDisk.Why == "" {
			t.Fatalf("a server this machine cannot see into: %+v", r.DBDisk)
		}
		t.Skipf("the server is not a local one this role can see into: %s", r.DBDisk.Why)
	}
	var dataDir string
	if err := conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	d := r.DBDisk
	if !d.Checked || d.Dir != dataDir || d.Free == 0 || !d.HasRoom {
		t.Fatalf("database disk of a local server: %+v, want %s checked with room", d, dataDir)
	}
	var a, b syscall.Stat_t
	if err := syscall.Stat(dataDir, &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Dir(stgDir), &b); err != nil {
		t.Fatal(err)
	}
	if d.Shared != (a.Dev == b.Dev) {
		t.Errorf("shared = %v, but the devices are %d and %d", d.Shared, a.Dev, b.Dev)
	}

	// Give the database's filesystem 1 MB: 100,000 heights (≈2.4 GB of
	// rows) do not fit; the staging's, were it alone, would.
	real := statFree
	t.Cleanup(func() { statFree = real })
	statFree = func(dir string) (uint64, uint64, error) {
		free, dev, err := real(dir)
		if dir == dataDir {
			return 1 << 20, dev + 1, err // and another filesystem than the staging's
		}
		return free, dev, err
	}
	r, err = estimate(100_000)
	var nr *NoRoomError
	if !errors.As(err, &nr) || nr.What != "database" || nr.Dir != dataDir || nr.Free != 1<<20 || r.DBDisk.HasRoom || !r.StagingHasRoom {
		t.Fatalf("a database filesystem without room: %v, %+v", err, r)
	}
	var text strings.Builder
	r.WriteText(&text)
	if want := fmt.Sprintf("database (%s) 1.0 MB free: NOT ENOUGH ROOM", dataDir); !strings.Contains(text.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, text.String())
	}
	statFree = real

	// A role that may not read data_directory: not checked, and why.
	role := fmt.Sprintf("blockhaul_estimate_%d", syscall.Getpid())
	if _, err := conn.Exec(ctx, "CREATE ROLE "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(ctx, "RESET ROLE")
		conn.Exec(ctx, "DROP ROLE "+role)
	})
	if _, err := conn.Exec(ctx, "SET ROLE "+role); err != nil {
		t.Fatal(err)
	}
	r, err = estimate(1000)
	if err != nil {
		t.Fatal(err)
	}
	if r.DBDisk.Checked || !strings.Contains(r.DBDisk.Why, "data_directory") {
		t.Errorf("a role that may not read data_directory: %+v", r.DBDisk)
	}
}
