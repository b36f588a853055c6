package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/archive"
	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/loader"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/staging"
	"github.com/jackc/pgx/v5"
	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"
)

// validateArchive checks the fields of the archive commands (checksum,
// verify, prune).
func (c *Config) validateArchive() []*FieldError {
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	switch c.Command {
	case CmdChecksum:
		if c.PG == "" {
			bad("pg", "a PostgreSQL DSN is required for checksum")
		}
		if c.AgainstSchema != "" && c.Against == "" {
			bad("against-schema", "needs --against")
		}
		if len(c.AgainstSchema) > 63 {
			bad("against-schema", "%q is longer than PostgreSQL's 63-byte identifier limit", c.AgainstSchema)
		}
		if c.Chunk == 0 {
			bad("chunk", "must be positive")
		}
	case CmdVerify:
		if c.Chunk == 0 {
			bad("chunk", "must be positive")
		}
	case CmdSnapshot, CmdRestore, CmdPublish:
		if len(c.Args) != 1 {
			what := "DEST (a directory or a file://, s3://… URL)"
			if c.Command == CmdRestore {
				what = "SRC (a snapshot's directory or URL)"
			}
			fs = append(fs, &FieldError{Msg: fmt.Sprintf("%s takes one argument, %s; got %d", c.Command, what, len(c.Args))})
		}
	case CmdEstimate:
		if !c.ToSet {
			bad("to", "estimate needs the range end")
		}
	case CmdPrune:
		if !c.BelowSet {
			bad("below", "prune needs the height below which staged blocks are deleted")
		}
	}
	if (c.FromSet || c.ToSet) && (c.From > math.MaxInt64 || (c.ToSet && c.To > math.MaxInt64)) {
		bad("to", "heights above %d do not fit PostgreSQL's bigint", int64(math.MaxInt64))
	}
	return fs
}

// archiveRange is the height range an archive command covers: --from and
// --to when given (either alone bounds one side), else everything.
func (c *Config) archiveRange() (from, to uint64, bounded bool) {
	from, to = 0, math.MaxInt64
	if c.FromSet {
		from = c.From
	}
	if c.ToSet {
		to = c.To
	}
	return from, to, c.FromSet || c.ToSet
}

// Checksum digests the exported rows of --pg (and of --against, at the same
// time, comparing the two) and prints the report. Differences are a
// *archive.DataError (exit 4).
func Checksum(ctx context.Context, cfg *Job, out io.Writer) error {
	// The rows were written with the decoder options the schema records:
	// the tables they make are digested too (a Job of their own).
	cfg, took, err := recordedDecodersOf(ctx, cfg)
	if err != nil {
		return err
	}
	dec, err := cfg.decoder()
	if err != nil {
		return err
	}
	from, to, bounded := cfg.archiveRange()
	ccfg := archive.ChecksumConfig{Schema: cfg.Schema, Tables: dec.Tables(), From: from, To: to, Bounded: bounded, Chunk: cfg.Chunk}
	var a, b archive.Digest
	var connA, connB *pgx.Conn
	defer func() {
		for _, c := range []*pgx.Conn{connA, connB} {
			if c != nil {
				c.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	bcfg := ccfg
	if cfg.AgainstSchema != "" {
		bcfg.Schema = cfg.AgainstSchema
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		connA, a, err = checksumOf(gctx, cfg.PGConn, "--pg", pgOptionsOf(cfg, nil, nil), ccfg, false)
		return err
	})
	if cfg.Against != "" {
		g.Go(func() error {
			var err error
			connB, b, err = checksumOf(gctx, cfg.AgainstConn, "--against", pgOptionsOf(cfg, nil, nil), bcfg, cfg.AgainstSchema == "")
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var bp *archive.Digest
	if cfg.Against != "" {
		bp = &b
	}
	r, err := archive.NewChecksumReport(a, bp)
	if err != nil {
		return err
	}
	r.Decoders = took
	if len(r.Differences) > 0 {
		// Name the heights of the differing chunks: one indexed range
		// query per chunk and database.
		if err := archive.Locate(ctx, connA, connB, ccfg.Schema, bcfg.Schema, ccfg.Tables, r.Differences, archive.DefaultLocateChunks); err != nil {
			return err
		}
	}
	if err := writeReport(out, cfg.JSON, r, nil); err != nil {
		return err
	}
	if !r.Equal() {
		return &archive.DataError{Check: "checksum", Problems: len(r.Differences)}
	}
	if nc := r.NotCompared(); len(nc) > 0 {
		return &archive.IncompleteError{Check: "checksum", Tables: nc}
	}
	return nil
}

// recordedDecodersOf takes the decoder options --pg's schema records (see
// useRecordedDecoders).
func recordedDecodersOf(ctx context.Context, cfg *Job) (*Job, []string, error) {
	conn, err := connect(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return useRecordedDecoders(ctx, cfg, conn)
}

// checksumOf digests ccfg.Schema in the database pc reaches (given as
// flag); defaulted says that the --against schema is --schema's, no
// --against-schema given.
func checksumOf(ctx context.Context, pc *pgx.ConnConfig, flag string, o pgOptions, ccfg archive.ChecksumConfig, defaulted bool) (*pgx.Conn, archive.Digest, error) {
	conn, err := connectPG(ctx, pc, o)
	if err != nil {
		return nil, archive.Digest{}, fmt.Errorf("%s: %w", flag, err)
	}
	d, err := archive.Checksum(ctx, conn, ccfg)
	var mt *archive.MissingTableError
	if flag == "--against" && errors.As(err, &mt) {
		// The schema read in --against is --against-schema's.
		mt.SchemaFlag, mt.SchemaDefaulted = "--against-schema", defaulted
	}
	if err != nil {
		return conn, d, fmt.Errorf("%s: %w", flag, err)
	}
	return conn, d, nil
}

// Verify checks the staging store (every record of the range; --deep:
// decompressed, hash recomputed, decoded) and, with --pg, what PostgreSQL
// holds, and prints the report. Problems found are a *archive.DataError
// (exit 4). The chain family is the store's own, not --chain.
func Verify(ctx context.Context, cfg *Job, out io.Writer) error {
	if err := needStore("staging", cfg.Staging); err != nil {
		return err
	}
	var r archive.VerifyReport
	store, err := staging.Open(cfg.Staging, staging.Options{ReadOnly: true})
	var iu *staging.InUseError
	if errors.As(err, &iu) {
		// A running job holds the store: it takes a checkpoint (hard
		// links), and that is verified.
		if cfg.PG != "" {
			return &ConfigError{Fields: []*FieldError{{Flag: "pg", Env: EnvName("pg"), Msg: fmt.Sprintf(
				"a running blockhaul (pid %d) holds %s, and PostgreSQL moves on while it runs: verify the staging alone now (without --pg), and PostgreSQL against it when the job ends", iu.PID, cfg.Staging)}}}
		}
		var release func()
		store, r.HeldBy, release, err = heldCheckpoint(ctx, cfg.Staging)
		if err != nil {
			return err
		}
		defer release()
		r.CheckpointAt = time.Now()
	}
	if err != nil {
		return err
	}
	defer store.Close()
	if id, ok := store.Identity(); ok {
		var err error
		if cfg, err = cfg.withFamily(id.Family); err != nil {
			return err
		}
	}
	var conn *pgx.Conn
	if cfg.PG != "" {
		if conn, err = connect(ctx, cfg); err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		// The rows were written with the decoder options the schema
		// records: staging is decoded with them.
		if cfg, r.Decoders, err = useRecordedDecoders(ctx, cfg, conn); err != nil {
			return err
		}
	}
	if len(cfg.ABI) > 0 && cfg.Decoding.Events == nil {
		if cfg, err = compileABIs(cfg, cfg.ABI); err != nil { // with the store's family
			return err
		}
	}
	dec, err := cfg.decoder()
	if err != nil {
		return err
	}
	vcfg := archive.VerifyConfig{From: cfg.From, To: cfg.To, FromSet: cfg.FromSet, ToSet: cfg.ToSet, Deep: cfg.Deep, Decoder: dec, Chunk: cfg.Chunk}
	if cfg.Family != nil {
		vcfg.Recompute = cfg.Family.Verifier(chain.VerifyFull)
	}
	if r.Staging, err = archive.Verify(store, vcfg); err != nil {
		return err
	}
	r.Staging.Dir = cfg.Staging // not the checkpoint's directory
	var proof []byte
	if r.Trust, proof, err = proveStore(ctx, cfg, store); err != nil {
		return err
	}
	if conn != nil {
		if r.PG, err = archive.VerifyPG(ctx, conn, store, cfg.Schema, dec, vcfg); err != nil {
			return err
		}
	}
	if proof != nil && r.HeldBy == 0 {
		// What verify proved beyond the store's checkpoint is recorded, so
		// that a store filled before its chain of trust ran is proven
		// once. Verify reads the store read-only: it is opened again to
		// write the checkpoint.
		store.Close()
		if r.Trust.Recorded, err = recordTrust(cfg.Staging, proof); err != nil {
			return err
		}
	}
	if err := writeReport(out, cfg.JSON, r, nil); err != nil {
		return err
	}
	if n := r.Problems(); n > 0 {
		return &archive.DataError{Check: "verify", Problems: n}
	}
	if r.PG != nil && len(r.PG.TablesNotCompared) > 0 {
		return &archive.IncompleteError{Check: "verify", Tables: r.PG.TablesNotCompared}
	}
	return nil
}

// heldCheckpoint asks the running job that holds the store in dir for a
// Pebble checkpoint beside it (hard links: the same filesystem, little
// space) and opens it read-only. release closes it and removes it.
func heldCheckpoint(ctx context.Context, dir string) (store *staging.Store, pid int, release func(), err error) {
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), ".blockhaul-verify-")
	if err != nil {
		return nil, 0, nil, fmt.Errorf("verify: a directory for the checkpoint beside %s: %w", dir, err)
	}
	cp := filepath.Join(tmp, "store")
	if pid, err = staging.RequestCheckpoint(ctx, dir, cp, snapshotWait, 50*time.Millisecond); err != nil {
		os.RemoveAll(tmp)
		return nil, 0, nil, err
	}
	store, err = staging.Open(cp, staging.Options{ReadOnly: true})
	if err != nil {
		os.RemoveAll(tmp)
		return nil, 0, nil, fmt.Errorf("verify: the checkpoint the running job (pid %d) took does not open: %w", pid, err)
	}
	return store, pid, func() {
		store.Close()
		os.RemoveAll(tmp)
	}, nil
}

// needDir refuses a staging directory a command reads (--staging,
// --merge-from) that is not there, naming its flag: a configuration error
// (exit 2) from every command alike.
func needDir(flag, dir string) error {
	_, err := os.Stat(dir)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return &ConfigError{Fields: []*FieldError{{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf("no staging directory: %v", err)}}}
	}
	return &ConfigError{Fields: []*FieldError{{Flag: flag, Env: EnvName(flag), Msg: err.Error()}}}
}

// needStore refuses a staging directory (flag's) that holds no store: a
// missing directory, or an empty one (a job refused before it staged
// anything), as bad input.
func needStore(flag, dir string) error {
	if err := needDir(flag, dir); err != nil {
		return err
	}
	if !staging.HasStore(dir) {
		return &ConfigError{Fields: []*FieldError{{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf("%s holds no staging store: nothing staged there", dir)}}}
	}
	return nil
}

// snapshotWait is how long snapshot waits for the job holding the store to
// take its checkpoint (it looks for requests every few hundred ms; the
// checkpoint flushes the WAL and links files).
const snapshotWait = 2 * time.Minute

// Snapshot copies a consistent state of --staging to DEST (a directory or a
// gocloud.dev/blob URL), with a manifest of every file's SHA-256.
func Snapshot(ctx context.Context, cfg *Job, out io.Writer) error {
	dest := cfg.Args[0]
	if err := needStore("staging", cfg.Staging); err != nil {
		return err
	}
	bucket, err := archive.OpenBucket(ctx, dest, true)
	if err != nil {
		return &ConfigError{Fields: []*FieldError{{Arg: "DEST", Msg: fmt.Sprintf("%s: %v", archive.RedactURL(dest), err)}}}
	}
	defer bucket.Close()
	shown := archive.RedactURL(dest)
	if cfg.Shards > 0 {
		// A shard of a sharded fetch: its place under DEST, where restore
		// --shards looks for it.
		bucket = archive.ShardBucket(bucket, cfg.ShardIndex) // closed with the bucket it is part of
		shown += ", " + archive.ShardPrefix(cfg.ShardIndex)
	}
	dest = shown
	var r *archive.SnapshotReport
	store, err := staging.Open(cfg.Staging, staging.Options{})
	var iu *staging.InUseError
	switch {
	case errors.As(err, &iu) && iu.Reader:
		// A reader (status, verify, ...) takes no checkpoint: wait for it.
		return err
	case errors.As(err, &iu):
		// A running job holds the store: it takes the checkpoint.
		r, err = archive.SnapshotHeld(ctx, cfg.Staging, bucket, dest, snapshotWait)
	case err != nil:
		return err
	default:
		defer store.Close()
		r, err = archive.Snapshot(ctx, store, bucket, dest)
	}
	var foreign *archive.ForeignDestError
	if errors.As(err, &foreign) {
		return &ConfigError{Fields: []*FieldError{{Arg: "DEST", Msg: strings.TrimPrefix(err.Error(), "archive: snapshot: ")}}}
	}
	if r == nil {
		return err
	}
	if cfg.JSON {
		if jerr := archive.WriteJSON(out, r); jerr != nil && err == nil {
			err = jerr
		}
		return err
	}
	by := ""
	if r.TakenBy != 0 {
		by = fmt.Sprintf(" (checkpoint taken by the running job, pid %d)", r.TakenBy)
	}
	fmt.Fprintf(out, "snapshot of %s to %s%s: %s, %.1f MB, heights staged %s, in %.1fs\n", cfg.Staging, r.Dest, by, archive.Quantity(r.Files, "file"), float64(r.Bytes)/1e6, archive.RangeList(r.Staged), r.Duration.Seconds())
	if r.Replaced || r.Removed > 0 {
		what := "files an interrupted snapshot left"
		if r.Replaced {
			what = "the earlier snapshot"
		}
		fmt.Fprintf(out, "  replaced %s: %s of it unchanged, not uploaded again; %s deleted\n", what, archive.Quantity(r.Unchanged, "file"), archive.Quantity(r.Removed, "file"))
	}
	return err
}

// Restore downloads the snapshot at SRC into --staging (new or empty),
// checking every file against the manifest and verifying the store before
// it is moved into place.
func Restore(ctx context.Context, cfg *Job, out io.Writer, log *slog.Logger) error {
	src := cfg.Args[0]
	bucket, err := archive.OpenBucket(ctx, src, false)
	if err != nil {
		return &ConfigError{Fields: []*FieldError{{Arg: "SRC", Msg: fmt.Sprintf("%s: %v", archive.RedactURL(src), err)}}}
	}
	defer bucket.Close()
	if cfg.Shards > 0 {
		return restoreShards(ctx, cfg, bucket, archive.RedactURL(src), out, log)
	}
	r, err := archive.Restore(ctx, bucket, archive.RedactURL(src), cfg.Staging)
	if r != nil {
		if cfg.JSON {
			if jerr := archive.WriteJSON(out, r); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			fmt.Fprintf(out, "restore from %s into %s: %d files, %.1f MB\n", r.Source, r.Dir, r.Files, float64(r.Bytes)/1e6)
			if len(r.NotStaged) > 0 {
				fmt.Fprintf(out, "  not staged when the snapshot was taken (a job was filling the store): %s, first %d-%d\n", archive.Quantity(len(r.NotStaged), "range"), r.NotStaged[0].From, r.NotStaged[0].To)
			}
			if r.Verify != nil {
				VerifyReportText(out, r.Verify)
			}
		}
	}
	return err
}

// restoreShards is restore --shards: every shard's snapshot under SRC,
// each waited for up to --wait, restored and merged into --staging.
func restoreShards(ctx context.Context, cfg *Job, bucket *blob.Bucket, src string, out io.Writer, log *slog.Logger) error {
	r, err := archive.RestoreShards(ctx, bucket, src, cfg.Staging, cfg.restoreShards(), cfg.Wait, log)
	if cfg.JSON {
		if jerr := archive.WriteJSON(out, r); jerr != nil && err == nil {
			err = jerr
		}
		return err
	}
	for _, s := range r.Shards {
		fmt.Fprintf(out, "restore from %s: %d files, %.1f MB, verified\n", s.Source, s.Files, float64(s.Bytes)/1e6)
	}
	if err == nil {
		fmt.Fprintf(out, "restore of %s into %s: %d blocks merged (waited %v for the snapshots), in %.1fs\n",
			archive.Quantity(len(r.Shards), "shard"), cfg.Staging, r.Merged, r.Waited.Round(time.Second), r.Duration.Seconds())
	}
	return err
}

// VerifyReportText prints a staging verify report.
func VerifyReportText(out io.Writer, s *archive.StagingReport) {
	archive.VerifyReport{Staging: s}.WriteText(out)
}

// benchResult is the bench result estimate reads its rates from: the
// newest whole run's rates when the binary was built (archive/rates.json,
// embedded), so that the estimate does not depend on the directory the
// binary runs in.
var benchResult, benchResultName = archive.MeasuredRates, archive.MeasuredRatesName

// Estimate prints what a job over --from..--to would fetch, export, store
// and take, before anything is fetched or written; no room on the staging
// filesystem is a *archive.NoRoomError (exit 2).
func Estimate(ctx context.Context, cfg *Job, out io.Writer, log *slog.Logger) error {
	var store *staging.Store
	if staging.HasStore(cfg.Staging) {
		s, err := staging.Open(cfg.Staging, staging.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer s.Close()
		store = s
		if id, ok := s.Identity(); ok {
			var err error
			if cfg, err = cfg.withFamily(id.Family); err != nil {
				return err
			}
		}
	}
	dec, err := cfg.decoder()
	if err != nil {
		return err
	}
	var conn *pgx.Conn
	if cfg.PG != "" {
		if conn, err = connect(ctx, cfg); err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
	}
	tables := dec.Tables()
	fam := cfg.Family
	times := archive.BenchTimeRates(benchResult, benchResultName, fam.Name, fam.Rates)
	times.Deferred = deferredWork(cfg, tables)
	if len(cfg.RPC) > 0 {
		if times.Fetch, err = probeFetch(ctx, cfg, log); err != nil {
			return err
		}
	}
	r, err := archive.Estimate(ctx, fam.Name, fam.Rates, store, cfg.Staging, conn, cfg.Schema, tables[0], tables, cfg.From, cfg.To, &times)
	if r != nil {
		err = writeReport(out, cfg.JSON, r, err)
	}
	return err
}

// stagedChain returns the chain a store holds and its highest staged
// height, for repair to build its source: from Pebble, or — when Pebble
// cannot open the store or opens it without records it had staged (a
// damaged MANIFEST) — from the store's files, which repair salvages.
func stagedChain(dir string) (id staging.Identity, ok bool, hi uint64, staged bool, err error) {
	ro, err := staging.Open(dir, staging.Options{ReadOnly: true})
	if err == nil {
		id, ok = ro.Identity()
		var berr error
		_, hi, staged, berr = ro.Bounds()
		damaged := ro.Damage() != nil
		ro.Close()
		if berr == nil && !damaged {
			return id, ok, hi, staged, nil
		}
		// Its bounds cannot be read (or it is damaged): its files say
		// what was staged.
		err = berr
	}
	files, ferr := staging.OpenFiles(dir, staging.Options{})
	if ferr != nil {
		return id, ok, hi, staged, errors.Join(err, ferr)
	}
	defer files.Close()
	if fid, fok := files.Identity(); fok {
		id, ok = fid, true
	} else if err != nil {
		return id, ok, hi, staged, fmt.Errorf("%w; read without the MANIFEST, the store's files record no chain (its identity is unreadable): nothing to salvage", err)
	}
	if _, fhi, fstaged := files.Bounds(); fstaged && (!staged || fhi > hi) {
		hi, staged = fhi, true
	}
	if _, lhigh, lok := files.Ledger(); lok && lhigh > hi {
		hi, staged = lhigh, true
	}
	return id, ok, hi, staged, nil
}

// Repair refetches what a deep verify of --staging finds missing, corrupt,
// wrong or broken, from the configured source (--rpc, else the synthetic
// chain), salvaging a store whose Pebble files are damaged into a fresh
// one first, and verifies again. Anything left wrong is a
// *archive.DataError (exit 4). The chain family is the store's own.
func Repair(ctx context.Context, cfg *Job, out io.Writer, log *slog.Logger) error {
	if err := needDir("staging", cfg.Staging); err != nil {
		return err
	}
	id, ok, hi, staged, err := stagedChain(cfg.Staging)
	if err != nil {
		return err
	}
	if ok {
		var err error
		if cfg, err = cfg.withFamily(id.Family); err != nil {
			return err
		}
	}
	dec, err := cfg.decoder()
	if err != nil {
		return err
	}
	vcfg := archive.VerifyConfig{From: cfg.From, To: cfg.To, FromSet: cfg.FromSet, ToSet: cfg.ToSet, Deep: true, Decoder: dec}
	if cfg.Family != nil {
		vcfg.Recompute = cfg.Family.Verifier(chain.VerifyFull)
	}
	t := syntheticTip(cfg)
	if staged && hi > t && cfg.SyntheticTip == 0 {
		t = hi
	}
	if cfg.ToSet && cfg.To > t && cfg.SyntheticTip == 0 {
		t = cfg.To
	}
	src, err := newSource(cfg, func() uint64 { return t }, log)
	if err != nil {
		return err
	}
	defer closeSource(src)
	lc := loaderConfig(cfg, log, &counters{m: monitor.New(monitor.Options{Logger: log, Out: io.Discard, Terminal: new(bool)})})
	r, rerr := archive.Repair(ctx, cfg.Staging, archive.RepairConfig{
		Verify:  vcfg,
		Options: staging.Options{Logger: log},
		Refetch: func(ctx context.Context, store *staging.Store, from, to uint64) error {
			_, err := loader.Fetch(ctx, src, store, from, to, lc, nil)
			return err
		},
	})
	if r != nil {
		rerr = writeReport(out, cfg.JSON, r, rerr)
	}
	return rerr
}

// writeReport writes an archive command's report, as JSON with --json,
// else as text. err is the command's own error: it is returned, or, when
// nil, the error of writing the JSON.
func writeReport(out io.Writer, asJSON bool, r interface{ WriteText(io.Writer) }, err error) error {
	if !asJSON {
		r.WriteText(out)
		return err
	}
	if jerr := archive.WriteJSON(out, r); jerr != nil && err == nil {
		return jerr
	}
	return err
}
