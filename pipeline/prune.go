package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Prune deletes the staged blocks below --below once every target mirrored
// in the store has exported them, as each target itself confirms through
// --pg's server (--force: regardless), then compacts; --dry-run says what
// it would delete and deletes nothing.
func Prune(ctx context.Context, cfg *Job, out io.Writer, log *slog.Logger) error {
	if err := needStore("staging", cfg.Staging); err != nil {
		return err
	}
	store, err := staging.Open(cfg.Staging, staging.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	o := archive.PruneOptions{Below: cfg.Below, Force: cfg.Force, DryRun: cfg.DryRun, Reach: reachTarget(cfg.PG)}
	id, ok := store.Identity()
	f := family.Of(id.Family)
	if ok && f != nil {
		o.Family, o.ChainID = f.Name, id.ChainID
	} else {
		f = family.CometBFT // a store that staged nothing: nothing to delete
	}
	o.Blocks = f.Tables()[0]
	r, perr := archive.Prune(ctx, store, o)
	if r != nil {
		if err := writeReport(out, cfg.JSON, r, nil); err != nil {
			return err
		}
	}
	return perr
}

// pruneDialTimeout bounds prune's connection to one target unless the DSN
// sets connect_timeout: a target that does not answer is not confirmed.
const pruneDialTimeout = 10 * time.Second

// reachTarget connects to a target's database on the server dsn names,
// with its credentials: the target's own database, and only when the
// server is the target's cluster.
func reachTarget(dsn string) func(context.Context, archive.TargetRef) (*pgx.Conn, error) {
	return func(ctx context.Context, t archive.TargetRef) (*pgx.Conn, error) {
		if dsn == "" {
			return nil, errors.New("no --pg given to reach its server (prune asks each target itself)")
		}
		pc, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("--pg: %s", redactPGError(err, dsn))
		}
		pc.Database = t.Database
		if _, ok := pc.RuntimeParams["application_name"]; !ok {
			pc.RuntimeParams["application_name"] = applicationName
		}
		if pc.ConnectTimeout == 0 {
			pc.ConnectTimeout = pruneDialTimeout
		}
		conn, err := pgx.ConnectConfig(ctx, pc)
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "3D000":
			return nil, fmt.Errorf("database %s does not exist on the server --pg reaches (dropped?)", t.Database)
		case err != nil:
			return nil, errors.New(redactPGError(err, dsn))
		}
		cluster, _, err := export.ClusterOf(ctx, conn)
		if err == nil && cluster != t.Cluster {
			err = fmt.Errorf("--pg reaches cluster %s, not the target's %s (another server, or the cluster was recreated)", cluster, t.Cluster)
		}
		if err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		return conn, nil
	}
}
