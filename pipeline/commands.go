package pipeline

import (
	"context"
	"io"
	"log/slog"

	"github.com/blockhaul/blockhaul/staging"
)

// Commands.
const (
	CmdRun    = "run"
	CmdFetch  = "fetch"
	CmdExport = "export"
	CmdStatus = "status"
	CmdFollow = "follow"
	CmdMerge  = "merge"

	CmdChecksum = "checksum" // archive commands (pipeline/archive.go)
	CmdVerify   = "verify"
	CmdPrune    = "prune"
	CmdRepair   = "repair"
	CmdSnapshot = "snapshot"
	CmdRestore  = "restore"
	CmdPublish  = "publish"
	CmdEstimate = "estimate"
)

// command is one of blockhaul's commands as a value: what it checks of a
// Config beyond what every command checks, and how it runs a Job. The
// commands that stage and export (job set) share runJob's frame — the
// staging store opened and checked, the monitor, the endpoint, the summary
// — and run inside it; the others (run set) run alone.
type command struct {
	name string
	// writes: the command writes rows into --pg (run, export, follow):
	// it needs --pg, and --tables and --export-streams are its.
	writes   bool
	validate func(c *Config) []*FieldError
	run      func(ctx context.Context, j *Job, out io.Writer, log *slog.Logger) (Summary, error)
	job      func(ctx context.Context, j *Job, store *staging.Store, tip func() uint64, log *slog.Logger, sum *Summary, c *counters) error
}

// commandTable is every command, in the order the usage lists them.
var commandTable = []command{
	{name: CmdRun, writes: true, job: runBoth},
	{name: CmdFetch, job: runFetch},
	{name: CmdExport, writes: true, job: runExport},
	{name: CmdFollow, writes: true, job: runFollow},
	{name: CmdMerge, run: func(_ context.Context, j *Job, out io.Writer, _ *slog.Logger) (Summary, error) { return Merge(j, out) }},
	{name: CmdStatus, run: reporting(func(ctx context.Context, j *Job, out io.Writer, _ *slog.Logger) error { return Status(ctx, j, out) })},
	{name: CmdChecksum, validate: (*Config).validateArchive, run: reporting(func(ctx context.Context, j *Job, out io.Writer, _ *slog.Logger) error { return Checksum(ctx, j, out) })},
	{name: CmdVerify, validate: (*Config).validateArchive, run: reporting(func(ctx context.Context, j *Job, out io.Writer, _ *slog.Logger) error {
		if j.Parquet != "" {
			return VerifyParquet(ctx, j, out)
		}
		return Verify(ctx, j, out)
	})},
	{name: CmdRepair, validate: (*Config).validateArchive, run: reporting(Repair)},
	{name: CmdPrune, validate: (*Config).validateArchive, run: reporting(Prune)},
	{name: CmdSnapshot, validate: (*Config).validateArchive, run: reporting(func(ctx context.Context, j *Job, out io.Writer, _ *slog.Logger) error { return Snapshot(ctx, j, out) })},
	{name: CmdRestore, validate: (*Config).validateArchive, run: reporting(Restore)},
	{name: CmdPublish, validate: (*Config).validateArchive, run: reporting(Publish)},
	{name: CmdEstimate, validate: (*Config).validateArchive, run: reporting(Estimate)},
}

// Commands are the commands Run knows, in the order the usage lists them.
var Commands = func() []string {
	names := make([]string, len(commandTable))
	for i, c := range commandTable {
		names[i] = c.name
	}
	return names
}()

// commandNamed is the command called name, nil for none.
func commandNamed(name string) *command {
	for i := range commandTable {
		if commandTable[i].name == name {
			return &commandTable[i]
		}
	}
	return nil
}

// reporting makes a command that prints a report (and whose summary is
// only its name) a command's run.
func reporting(f func(ctx context.Context, j *Job, out io.Writer, log *slog.Logger) error) func(context.Context, *Job, io.Writer, *slog.Logger) (Summary, error) {
	return func(ctx context.Context, j *Job, out io.Writer, log *slog.Logger) (Summary, error) {
		return Summary{Command: j.Command}, f(ctx, j, out, log)
	}
}
