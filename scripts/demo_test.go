// Package scripts holds no Go code: its tests run the shell scripts that
// make demo uses against the real PostgreSQL.
package scripts

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func demoDB(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("bash", append([]string{"demo-db.sh"}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// The demo's database URL keeps the server's form and parameters; the
// keyword/value form used to become "postgres/blockhaul_demo?sslmode=disable".
func TestDemoURL(t *testing.T) {
	cases := []struct{ server, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/blockhaul_demo?sslmode=disable"},
		{"postgresql://u:p%40w@h:1/db", "postgresql://u:p%40w@h:1/blockhaul_demo"},
		{"postgres://h", "postgres://h/blockhaul_demo"},
		{"postgres://u@h:5/?sslmode=require&x=y", "postgres://u@h:5/blockhaul_demo?sslmode=require&x=y"},
		{"host=127.0.0.1 port=5432 user=postgres dbname=postgres", "host=127.0.0.1 port=5432 user=postgres dbname=blockhaul_demo"},
		{"dbname = 'my db' host=h password=secret", "host=h password=secret dbname=blockhaul_demo"},
		{"host=h", "host=h dbname=blockhaul_demo"},
	}
	for _, c := range cases {
		got, err := demoDB(t, "url", c.server, "blockhaul_demo")
		if err != nil || got != c.want {
			t.Errorf("url %q = %q (%v), want %q", c.server, got, err, c.want)
		}
	}
}

// make demo says which database it drops and recreates, drops only one it
// created, and works with a keyword/value DATABASE_URL.
func TestDemoPrepare(t *testing.T) {
	base := pgtest.BaseURL()
	pc, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", pc.Host, pc.Port, pc.User)
	if pc.Password != "" {
		kv += " password=" + pc.Password
	}
	ctx := context.Background()
	conn := pgtest.ConnectTo(t, base)
	suffix := time.Now().UnixNano()
	demo, foreign := fmt.Sprintf("bh_demo_test_%d", suffix), fmt.Sprintf("bh_demo_foreign_%d", suffix)
	// The databases are dropped once the test has ended, on the connection
	// closed only after (a deferred Close ran before the cleanup, which then
	// failed unseen and left both databases behind).
	t.Cleanup(func() {
		defer conn.Close(context.Background())
		for _, db := range []string{demo, foreign} {
			if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
				t.Errorf("drop %s: %v", db, err)
			}
		}
	})

	out, err := demoDB(t, "prepare", kv, demo)
	if err != nil || !strings.Contains(out, "creating database "+demo+" on "+pc.User+"@") {
		t.Fatalf("first prepare: %v\n%s", err, out)
	}
	if strings.Contains(out, "password") {
		t.Errorf("prepare shows the connection string: %s", out)
	}
	dburl, _ := demoDB(t, "url", kv, demo)
	dconn, err := pgx.Connect(ctx, dburl)
	if err != nil {
		t.Fatalf("connect to the demo database by %q: %v", dburl, err)
	}
	_, err = dconn.Exec(ctx, "CREATE TABLE left_over (x int)")
	dconn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err = demoDB(t, "prepare", kv, demo)
	if err != nil || !strings.Contains(out, "dropping and recreating database "+demo) {
		t.Fatalf("second prepare: %v\n%s", err, out)
	}
	dconn, err = pgx.Connect(ctx, dburl)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = dconn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'left_over'").Scan(&n)
	dconn.Close(ctx)
	if err != nil || n != 0 {
		t.Fatalf("the recreated database still holds the old table (%d, %v)", n, err)
	}

	// A database the demo did not make is refused, never dropped.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+foreign); err != nil {
		t.Fatal(err)
	}
	out, err = demoDB(t, "prepare", base, foreign)
	if err == nil || !strings.Contains(out, "database "+foreign) || !strings.Contains(out, "not created by make demo") {
		t.Fatalf("prepare over a foreign database: %v\n%s", err, out)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", foreign).Scan(&exists); err != nil || !exists {
		t.Fatalf("the foreign database is gone (%v)", err)
	}
	// One an earlier demo made before the marker existed (nothing but its
	// cometbft schema) is still recreated.
	fconn, err := pgx.Connect(ctx, pgtest.WithDatabase(base, foreign))
	if err != nil {
		t.Fatal(err)
	}
	_, err = fconn.Exec(ctx, "CREATE SCHEMA cometbft; CREATE TABLE cometbft.blockhaul_checkpoints (stream text)")
	fconn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := demoDB(t, "prepare", base, foreign); err != nil || !strings.Contains(out, "dropping and recreating database "+foreign) {
		t.Fatalf("prepare over an earlier demo's database: %v\n%s", err, out)
	}
	if out, err := demoDB(t, "prepare", base, "Robert'); DROP"); err == nil || !strings.Contains(out, "must be lowercase") {
		t.Fatalf("a bad name was accepted: %v\n%s", err, out)
	}
}
