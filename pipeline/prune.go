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
	o := archive.PruneOptions{Below: cfg.Below, Force: cfg.Force, DryRun: cfg.DryRun, Reach: reachTarget(cfg.PGConn, pgOptionsOf(cfg, log, nil))}
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

// reachTarget connects to a target's database on the server --pg (pg,
// parsed by Resolve; nil without it) reaches, with its credentials, as
// every connection is made (connectPG): the target's own database, and
// only when the server is the target's cluster.
func reachTarget(pg *pgx.ConnConfig, o pgOptions) func(context.Context, archive.TargetRef) (*pgx.Conn, error) {
	return func(ctx context.Context, t archive.TargetRef) (*pgx.Conn, error) {
		if pg == nil {
			return nil, errors.New("no --pg given to reach its server (prune asks each target itself)")
		}
		pc := pg.Copy()
		pc.Database = t.Database
		if pc.ConnectTimeout == 0 {
			pc.ConnectTimeout = pruneDialTimeout
		}
		conn, err := connectPG(ctx, pc, o)
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "3D000":
			return nil, fmt.Errorf("database %s does not exist on the server --pg reaches (dropped?)", t.Database)
		case err != nil:
			return nil, err
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
