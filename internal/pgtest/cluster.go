package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a throwaway PostgreSQL cluster of a test's own, for the tests
// that must stop, crash or restart the server (the shared server must never
// be). It is initialised in a temporary directory and listens on a free
// port of 127.0.0.1; the test's cleanup stops it and removes the directory.
// Its methods are not safe for concurrent use.
type Cluster struct {
	dir  string
	bin  string
	port int
	asPG bool // run the server binaries as the postgres OS user (we are root)
}

// StartCluster initialises and starts a cluster from the PostgreSQL
// binaries on this machine ($BLOCKHAUL_PG_BIN, else the newest
// /usr/lib/postgresql/*/bin, else initdb on $PATH). The test fails if there
// are none.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin, err := findBin()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "blockhaul-pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	c := &Cluster{dir: dir, bin: bin, asPG: os.Geteuid() == 0}
	t.Cleanup(func() {
		_ = c.pgctl("stop", "-m", "immediate", "-w")
		_ = os.RemoveAll(dir)
	})
	if c.asPG {
		// The server refuses to run as root: its directory belongs to
		// postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root needs a postgres OS user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	if out, err := c.command(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	if c.port, err = freePort(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return c
}

// URL is the cluster's postgres database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Port is the port the cluster listens on.
func (c *Cluster) Port() int { return c.port }

// NewDatabase creates an empty database in the cluster and returns its URL.
func (c *Cluster) NewDatabase(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return WithDatabase(c.URL(), name)
}

// Start starts the stopped cluster and waits until it accepts connections.
func (c *Cluster) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50 -c shared_buffers=32MB", c.port, c.dir)
	if err := c.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(c.dir, "server.log"), "-o", opts); err != nil {
		return fmt.Errorf("start cluster: %w\n%s", err, c.Log())
	}
	return nil
}

// Stop stops the cluster in mode: "smart", "fast" or "immediate" (a
// crash: no shutdown checkpoint; the next start recovers from the WAL).
func (c *Cluster) Stop(mode string) error {
	if err := c.pgctl("stop", "-m", mode, "-w", "-t", "60"); err != nil {
		return fmt.Errorf("stop cluster (%s): %w", mode, err)
	}
	return nil
}

// Restart stops the cluster in mode and starts it again.
func (c *Cluster) Restart(mode string) error {
	if err := c.Stop(mode); err != nil {
		return err
	}
	return c.Start()
}

// Log returns the server's log so far.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	return string(b)
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) pgctl(args ...string) error {
	args = append([]string{"-D", c.data()}, args...)
	var out bytes.Buffer
	cmd := c.command(filepath.Join(c.bin, "pg_ctl"), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_ctl %v: %w: %s", args, err, out.String())
	}
	return nil
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	if c.asPG {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func findBin() (string, error) {
	if b := os.Getenv("BLOCKHAUL_PG_BIN"); b != "" {
		return b, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no PostgreSQL binaries (initdb) found: install postgresql or set BLOCKHAUL_PG_BIN")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
