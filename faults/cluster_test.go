//go:build faults

package faults

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

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// pgCluster is a throwaway PostgreSQL cluster the suite starts itself, for
// the scenarios that terminate backends or crash-restart the server (the
// shared server must never be). It listens on a free port of 127.0.0.1;
// the test's cleanup stops it and removes its directory.
type pgCluster struct {
	dir, bin string
	port     int
	asPG     bool // run the server as the postgres OS user (we are root)
}

func startCluster(t *testing.T) *pgCluster {
	t.Helper()
	bin, err := pgBin()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "blockhaul-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &pgCluster{dir: dir, bin: bin, asPG: os.Geteuid() == 0}
	t.Cleanup(func() {
		c.pgctl("stop", "-m", "immediate", "-w")
		os.RemoveAll(dir)
	})
	if c.asPG {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres OS user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.command(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *pgCluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *pgCluster) newDatabase(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return pgtest.WithDatabase(c.url(), name)
}

func (c *pgCluster) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50 -c shared_buffers=32MB", c.port, c.dir)
	if err := c.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(c.dir, "server.log"), "-o", opts); err != nil {
		b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		return fmt.Errorf("start cluster: %w\n%s", err, b)
	}
	return nil
}

// restart stops the cluster in mode ("immediate": a crash) and starts it.
func (c *pgCluster) restart(mode string) error {
	if err := c.pgctl("stop", "-m", mode, "-w", "-t", "60"); err != nil {
		return err
	}
	return c.start()
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *pgCluster) pgctl(args ...string) error {
	args = append([]string{"-D", c.data()}, args...)
	var out bytes.Buffer
	cmd := c.command(filepath.Join(c.bin, "pg_ctl"), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_ctl %v: %w: %s", args, err, out.String())
	}
	return nil
}

func (c *pgCluster) command(name string, args ...string) *exec.Cmd {
	if c.asPG {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func pgBin() (string, error) {
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
