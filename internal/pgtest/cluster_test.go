package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestClusterSurvivesImmediateRestart(t *testing.T) {
	c := StartCluster(t)
	dsn := c.NewDatabase(t, "kept")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("a connection survived an immediate restart")
	}
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var x int
	if err := conn.QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after the restart: %d, %v", x, err)
	}
}
