package nodehome

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/blockhaul/blockhaul/internal/nodefixture"
)

// TestPebbleHome moves the fixture's databases into the pebbledb backend,
// written as cometbft-db's pebble backend writes them (pebble v1, default
// options), and reads every height from it.
func TestPebbleHome(t *testing.T) {
	fx := nodefixture.Load(t, "home-0.38")
	home := fx.Unpack(t)
	data := filepath.Join(home, "data")
	for _, name := range []string{"blockstore", "state"} {
		toPebble(t, data, name)
	}
	nodefixture.SetConfig(t, home, "db_backend", `db_backend = "pebbledb"`)
	src := openHome(t, home)
	for i, want := range fx.Records {
		got, err := src.Record(uint64(i + 1))
		if err != nil {
			t.Fatalf("height %d: %v", i+1, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("height %d: the pebble home's record differs from the RPC's", i+1)
		}
	}
	src.Close()

	// Pebble locks its directory even to read: a home another process holds
	// (a running node) is refused by name.
	holder := exec.Command(os.Args[0], "-test.run=^TestHoldPebble$")
	holder.Env = append(os.Environ(), "NODEHOME_HOLD="+filepath.Join(data, "blockstore.db"))
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("lock holder said %q (%v)", line, err)
	}
	_, err = Open(Config{Home: home})
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("Open of a pebble home another process holds: %v, want a *LockedError", err)
	}
}

// TestHoldPebble is the lock holder of TestPebbleHome, run as a child
// process: it opens the pebble database NODEHOME_HOLD as a node does, says
// "held" and keeps it until its stdin closes.
func TestHoldPebble(t *testing.T) {
	path := os.Getenv("NODEHOME_HOLD")
	if path == "" {
		t.Skip("a child process of TestPebbleHome")
	}
	db, err := pebble.Open(path, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	os.Stdout.WriteString("held\n")
	io.Copy(io.Discard, os.Stdin)
}

// toPebble copies data/name.db from goleveldb into pebble, replacing it.
func toPebble(t *testing.T, data, name string) {
	t.Helper()
	src, err := dbmOpenWritable(data, name)
	if err != nil {
		t.Fatal(err)
	}
	it, err := src.Iterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(data, name+".pebble")
	opts := &pebble.Options{}
	opts.EnsureDefaults()
	dst, err := pebble.Open(tmp, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := dst.NewBatch()
	n := 0
	for ; it.Valid(); it.Next() {
		if err := b.Set(it.Key(), it.Value(), nil); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	it.Close()
	src.Close()
	if n == 0 {
		t.Fatalf("%s: no keys", name)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(data, name+".db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(data, name+".db")); err != nil {
		t.Fatal(err)
	}
}
