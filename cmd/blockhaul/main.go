// Command blockhaul rebuilds blockchain history into PostgreSQL.
//
//	blockhaul COMMAND [flags]    (blockhaul help, blockhaul help COMMAND)
//
// The command tree is cobra's (commands.go); every flag is defined in
// flags.go and can also be set through an environment variable
// (BLOCKHAUL_<FLAG>); flags win over the environment.
package main

//go:generate go test -run ^(TestCLIReferenceIsCurrent|TestFlagsReferenceIsCurrent)$ -update-cli-reference .

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"

	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/crashpoint"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/pipeline"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cl := parseCommandLineTo(args, os.Environ(), os.Stdout, os.Stderr)
	if cl.handled {
		return 0
	}
	if cl.cmd == "" || cl.cfg == nil {
		if len(args) == 0 {
			writeRootHelp(os.Stderr)
		}
		if len(cl.problems) > 0 {
			fmt.Fprintln(os.Stderr, "blockhaul:", &pipeline.ConfigError{Fields: cl.problems})
		}
		return pipeline.ExitConfig
	}
	cfg := cl.cfg
	cfg.Command = cl.cmd
	cfg.ToSet = given(cl.fs, "to")
	cfg.FromSet = given(cl.fs, "from")
	cfg.BackfillFromSet = given(cl.fs, "backfill-from")
	cfg.BelowSet = given(cl.fs, "below")
	cfg.ChainSet = given(cl.fs, "chain")
	problems := cl.problems
	var ce *pipeline.ConfigError
	job, err := pipeline.Resolve(*cfg)
	if errors.As(err, &ce) {
		// A flag whose value did not parse is said once, for that: its
		// unset value (--to 0 for a --to of 2^64) is no second problem.
		for _, f := range ce.Fields {
			if f.Flag == "" || !slices.ContainsFunc(cl.problems, func(p *pipeline.FieldError) bool { return p.Flag == f.Flag }) {
				problems = append(problems, f)
			}
		}
	} else if err != nil {
		problems = append(problems, &pipeline.FieldError{Msg: err.Error()})
	}
	if len(problems) > 0 {
		warn(cl.warnings, nil)
		fmt.Fprintln(os.Stderr, "blockhaul:", &pipeline.ConfigError{Fields: problems})
		return pipeline.ExitConfig
	}
	// A test seam for the fault suite: kill this process at a named point
	// of an export (see internal/crashpoint).
	if err := crashpoint.ArmFromEnv(os.Getenv("BLOCKHAUL_CRASHPOINT")); err != nil {
		fmt.Fprintln(os.Stderr, "blockhaul:", err)
		return pipeline.ExitConfig
	}
	cfg = &job.Config
	perStream := setMemoryLimit(*cl.memLimit, job.Family)
	con := monitor.NewConsole(os.Stderr)
	log := newLogger(cfg, con)
	if cfg.LogFormat == "json" {
		warn(cl.warnings, log)
	} else {
		warn(cl.warnings, nil)
	}
	job = job.Wired(monitor.New(monitor.Options{Logger: log, Out: con, Interval: cfg.Progress}), perStream)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, err = job.Run(ctx, os.Stdout, log)
	code := pipeline.ExitCode(err)
	var held *pipeline.HeldReplayError
	switch {
	case code == pipeline.ExitInterrupted && errors.As(err, &held):
		// Stopped by the follow that ran it (or cancelled there at our
		// interrupt): what it said is the news.
		log.Warn(cmd(cfg)+" interrupted; the replay is resumable", "err", err, "exit", code)
	case code == pipeline.ExitInterrupted:
		// A signal is the operator's or the scheduler's doing, not a
		// failure: one steady line, the cause only at debug.
		log.Warn(cmd(cfg)+" interrupted by a signal; the range is resumable", "exit", code)
		log.Debug("interrupted", "err", err)
	case code == pipeline.ExitConfig && cfg.LogFormat != "json":
		// Found wrong once the command ran (a missing directory, a wrong
		// schema): said as the flags' own problems are, one per line.
		fmt.Fprintln(os.Stderr, "blockhaul "+cmd(cfg)+":", err)
	case err != nil:
		log.Error(cmd(cfg)+" failed", "err", err, "exit", code)
	}
	return code
}

func cmd(cfg *pipeline.Config) string { return cfg.Command }

// warn says what was given that the command ignores (a flag it does not
// use, an unknown variable) as its problems are said, one per line, whether
// or not it runs; to log instead when set (--log-format=json).
func warn(warnings []string, log *slog.Logger) {
	for _, w := range warnings {
		if log != nil {
			log.Warn(w)
		} else {
			fmt.Fprintln(os.Stderr, "blockhaul: warning:", w)
		}
	}
}

func newLogger(cfg *pipeline.Config, w io.Writer) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("cmd", cfg.Command, "chain", cfg.Chain)
}

// setMemoryLimit caps the Go heap softly (see pipeline.DefaultMemoryLimitMiB).
// GOMEMLIMIT, when set, takes precedence; a negative limit means none. It
// returns the default limit in bytes when that is the one it set (the job
// raises it to one such limit per export stream), else 0.
func setMemoryLimit(mib int64, fam *family.Family) int64 {
	if mib < 0 || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	perStream := int64(0)
	if mib == 0 {
		mib = pipeline.DefaultMemoryLimitMiB(fam)
		perStream = mib << 20
	}
	debug.SetMemoryLimit(mib << 20)
	return perStream
}
