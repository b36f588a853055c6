package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandLine is one invocation's arguments and environment bound to a
// Config. Parsing never stops at the first problem: every flag value that
// does not parse, unknown flag, stray word and bad environment value is
// collected, so that the operator sees them all at once, beside what
// Validate finds.
type commandLine struct {
	cmd      string
	fs       *pflag.FlagSet
	cfg      *pipeline.Config
	memLimit *int64
	// handled: the command tree answered itself (help, version,
	// completion); nothing is left to run.
	handled  bool
	problems []*pipeline.FieldError
	warnings []string
}

// nonFlagEnv are BLOCKHAUL_* variables that are no flag's: the scripts'
// and tests' own, which the binary ignores without a warning, and the crash
// points of internal/crashpoint, which it reads.
var nonFlagEnv = []string{"BLOCKHAUL_PG_THROWAWAY", "BLOCKHAUL_PG_DIR", "BLOCKHAUL_PG_PORT", "BLOCKHAUL_PG_BIN", "BLOCKHAUL_NODES_DIR", "BLOCKHAUL_CRASHPOINT"}

func isCommand(w string) bool { return slices.Contains(pipeline.Commands, w) }

// treeWords are the command tree's own first words besides the commands.
var treeWords = []string{"help", "version", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd}

func lineProblem(format string, args ...any) *pipeline.FieldError {
	return &pipeline.FieldError{Msg: fmt.Sprintf(format, args...)}
}

func flagProblem(flag, format string, args ...any) *pipeline.FieldError {
	return &pipeline.FieldError{Flag: flag, Env: pipeline.EnvName(flag), Msg: fmt.Sprintf(format, args...)}
}

// parseCommandLine binds args (without the program name) and environ
// (KEY=value pairs) to a Config; what the command tree prints itself (help,
// version, completion) is discarded.
func parseCommandLine(args, environ []string) *commandLine {
	return parseCommandLineTo(args, environ, io.Discard, io.Discard)
}

// parseCommandLineTo is parseCommandLine printing help, version and
// completion scripts to out, and the completion's notes to errOut.
func parseCommandLineTo(args, environ []string, out, errOut io.Writer) *commandLine {
	cl := &commandLine{}
	if len(args) == 0 {
		return cl
	}
	args, ok := cl.route(args)
	if !ok {
		return cl
	}
	var flagErr error
	ran := false
	root, jobs := newRoot(environ, func(j *jobCommand, words []string) error {
		ran = true
		cl.bind(j, args[1:], words, environ)
		return nil
	})
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		flagErr = err
		return err
	})
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	c, err := root.ExecuteC()
	switch j := jobs[c]; {
	case ran:
	case flagErr != nil && j != nil:
		// A flag without its value at the end, or a malformed name: the
		// message names the flag, never a value. The rest is checked still.
		cl.problems = append(cl.problems, lineProblem("%v", flagErr))
		cl.bind(j, args[1:], c.Flags().Args(), environ)
	case err != nil:
		cl.cmd = c.Name()
		cl.problems = append(cl.problems, lineProblem("%v", err))
	default:
		cl.handled = true
	}
	return cl
}

// route checks the first word before the command tree sees it: flags
// placed before the command are moved after it (and reported), an unknown
// command is reported with the closest one.
func (cl *commandLine) route(args []string) ([]string, bool) {
	first := args[0]
	switch {
	case first == "-h" || first == "--help" || first == "--version":
		return args, true
	case strings.HasPrefix(first, "-"):
		// Flags before the command: say where they go rather than print
		// the usage alone.
		k := slices.IndexFunc(args, isCommand)
		if k < 0 {
			if near := closest(strings.TrimLeft(first, "-"), []string{"version", "help"}); near != "" && !strings.Contains(first, "=") {
				cl.problems = append(cl.problems, lineProblem("unknown flag %s: did you mean --%s?", first, near))
				return nil, false
			}
			cl.problems = append(cl.problems, lineProblem("no command: %q is a flag; flags go after the command (blockhaul COMMAND [flags], COMMAND one of %s)", first, strings.Join(pipeline.Commands, ", ")))
			return nil, false
		}
		cl.problems = append(cl.problems, lineProblem("%s comes before the command %s; flags go after it: blockhaul %s %s",
			strings.Join(args[:k], " "), args[k], args[k], strings.Join(args[:k], " ")))
		return append(append([]string{args[k]}, args[k+1:]...), args[:k]...), true
	case isCommand(first) || slices.Contains(treeWords, first):
		return args, true
	}
	cl.cmd = first
	cl.problems = append(cl.problems, lineProblem("%v", unknownCommand(first)))
	return nil, false
}

// bind finishes a job command's invocation: rest are the arguments after
// the command name, words those its flags did not take.
func (cl *commandLine) bind(j *jobCommand, rest, words []string, environ []string) {
	cl.cmd, cl.cfg, cl.memLimit = j.cmd.Name(), j.cfg, &j.proc.memLimit
	j.collecting = false // the environment's values report their variable (applyEnv)
	fs := j.cmd.Flags()
	cl.fs = fs
	var positional []string
	if cl.cmd == pipeline.CmdSnapshot || cl.cmd == pipeline.CmdRestore || cl.cmd == pipeline.CmdPublish {
		// snapshot DEST, restore SRC, publish DEST: the plain words are the argument
		// (Validate says when there is not exactly one).
		for _, w := range words {
			if !strings.HasPrefix(w, "-") {
				positional = append(positional, w)
			}
		}
		cl.cfg.Args = positional
	}
	cl.problems = append(cl.problems, j.valueProblems...)
	cl.problems = append(cl.problems, strayWords(fs, words, rest, positional...)...)
	fs.Visit(func(f *pflag.Flag) {
		if f.Hidden && f.Name != "help" {
			cl.warnings = append(cl.warnings, fmt.Sprintf("--%s has no effect on %s (its flags: blockhaul help %s)", f.Name, cl.cmd, cl.cmd))
		}
	})
	pgOnCommandLine := given(fs, "pg")
	p, w := applyEnv(fs, environ)
	cl.problems = append(cl.problems, p...)
	cl.warnings = append(cl.warnings, w...)
	jp := shardIndexFromJob(fs, environ)
	cl.problems = append(cl.problems, jp...)
	cl.cfg.ShardIndexSet = given(fs, "shard-index") || len(jp) > 0 // a bad index is reported once
	cl.cfg.SegmentBlocksSet = given(fs, "segment-blocks")
	cl.cfg.Version = moduleVersion()
	if pgOnCommandLine && dsnHasPassword(cl.cfg.PG) {
		cl.warnings = append(cl.warnings, "--pg holds a password, which every local user can read in the process list: "+
			"set the DSN in BLOCKHAUL_PG, or the password in PGPASSWORD or a PGPASSFILE")
	}
	if cl.cfg.Staging == "" {
		cl.problems = append(cl.problems, flagProblem("staging", "is empty; give a directory (default %s)", pipeline.DefaultConfig().Staging))
	}
}

// given reports whether the command's flag name was set, on the command line
// or from its variable. A flag the command does not use never is: its value
// is ignored (see lenientValue).
func given(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Changed && !f.Hidden
}

// cause is the reason a flag value was refused, without pflag's wrapping
// (which quotes the value) or strconv's (which quotes it again).
func cause(err error) error {
	if u := errors.Unwrap(err); u != nil {
		err = u
	}
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

// strayWords explains every argument the flags did not take: pflag passes
// positional words and unknown flags through to fs.Args in order.
func strayWords(fs *pflag.FlagSet, words, args []string, positional ...string) []*pipeline.FieldError {
	var out []*pipeline.FieldError
	var numbers []string
	pos := 0 // where in args to look for the next stray word
	afterUnknown := false
	for _, w := range words {
		if len(positional) > 0 && w == positional[0] {
			positional = positional[1:]
			continue
		}
		i := slices.Index(args[pos:], w)
		prev := ""
		if i >= 0 {
			i += pos
			pos = i + 1
			if i > 0 {
				prev = args[i-1]
			}
		}
		switch {
		case strings.HasPrefix(w, "-"):
			name, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			var names []string
			fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
			msg := fmt.Sprintf("unknown flag %s", strings.SplitN(w, "=", 2)[0])
			if c := closest(name, names); c != "" {
				msg += fmt.Sprintf(": did you mean --%s?", c)
			}
			out = append(out, lineProblem("%s", msg))
			afterUnknown = !hasValue
			continue
		case afterUnknown:
			// Most likely the unknown flag's value: already reported.
		case optionalValueFlag(fs, prev) != nil:
			f := optionalValueFlag(fs, prev)
			out = append(out, lineProblem("%q after %s is not its value: --%s takes its value after '=' (did you mean --%s=%s?)", w, prev, f.Name, f.Name, w))
		case isCommand(w):
			out = append(out, lineProblem("a second command %q: one command per invocation", w))
		default:
			if _, err := strconv.ParseUint(w, 10, 64); err == nil {
				numbers = append(numbers, w)
				afterUnknown = false
				continue
			}
			out = append(out, lineProblem("stray argument %q: blockhaul takes flags only (--name value or --name=value)", w))
		}
		afterUnknown = false
	}
	switch len(numbers) {
	case 0:
	case 2:
		out = append(out, lineProblem("stray arguments %s %s: heights are flags (did you mean --from %s --to %s?)", numbers[0], numbers[1], numbers[0], numbers[1]))
	default:
		out = append(out, lineProblem("stray argument(s) %s: heights are flags (--from N, --to M)", strings.Join(numbers, " ")))
	}
	return out
}

// optionalValueFlag returns the flag arg names when its value is optional
// (NoOptDefVal), so that the next word is not read as its value.
func optionalValueFlag(fs *pflag.FlagSet, arg string) *pflag.Flag {
	if !strings.HasPrefix(arg, "--") || strings.Contains(arg, "=") {
		return nil
	}
	f := fs.Lookup(arg[2:])
	if f == nil || f.NoOptDefVal == "" {
		return nil
	}
	return f
}

// applyEnv sets every flag of the command not given on the command line
// from its environment variable (or an alias, see pipeline.EnvAliases).
// Every value that does not parse is a problem naming both; the variable of
// a flag the command does not use is ignored, unread; every other
// BLOCKHAUL_* variable is a warning naming the closest real one.
func applyEnv(fs *pflag.FlagSet, environ []string) (problems []*pipeline.FieldError, warnings []string) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "BLOCKHAUL_") {
			env[k] = v
		}
	}
	known := slices.Clone(nonFlagEnv)
	fs.VisitAll(func(f *pflag.Flag) {
		name := pipeline.EnvName(f.Name)
		names := append([]string{name}, pipeline.EnvAliases[f.Name]...)
		known = append(known, names...)
		if f.Changed || f.Hidden {
			// Given on the command line; or not this command's flag, whose
			// variable is ignored (a Job's pods share their environment).
			return
		}
		var from, v string
		for _, n := range names {
			nv, ok := env[n]
			if !ok {
				continue
			}
			if from != "" && nv != v {
				problems = append(problems, flagProblem(f.Name, "%s and %s are both set, to different values", from, n))
				return
			}
			if from == "" {
				from, v = n, nv
			}
		}
		if from == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			problems = append(problems, &pipeline.FieldError{Flag: f.Name, Env: from,
				Msg: fmt.Sprintf("%q: %v", redactValue(f.Name, v), cause(err))})
		}
	})
	var unknown []string
	for k := range env {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		msg := k + " is not a blockhaul variable and is ignored"
		if c := closest(k, known); c != "" {
			msg += " (did you mean " + c + "?)"
		}
		warnings = append(warnings, msg)
	}
	return problems, warnings
}

func redactValue(flag, v string) string {
	switch flag {
	case "pg":
		return "<redacted>"
	case "rpc":
		parts := strings.Split(v, ",")
		for i, p := range parts {
			parts[i] = jsonrpc.Redact(strings.TrimSpace(p))
		}
		return strings.Join(parts, ",")
	}
	return v
}

// dsnHasPassword reports whether a PostgreSQL DSN, URL or key=value form,
// carries a password itself (not through PGPASSWORD or a passfile).
func dsnHasPassword(dsn string) bool {
	_, ok := pipeline.DSNPassword(dsn)
	return ok
}

// closest returns the candidate nearest to s by edit distance (case
// ignored), if it is near enough to be what was meant.
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := editDistance(ls, lc)
		if strings.HasPrefix(lc, ls) || strings.HasPrefix(ls, lc) {
			d = min(d, 2) // BLOCKHAUL_FROM → BLOCKHAUL_FROM_HEIGHT
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(s)/3) {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// rpcList is --rpc: endpoint URLs separated by commas. Unlike pflag's
// string slice it never quotes the value back (its CSV errors repeat the
// whole URL, token and all): a malformed URL is refused by Validate in
// redacted form. The first Set replaces the default, later ones append.
type rpcList struct {
	urls *[]string
	set  bool
}

func (l *rpcList) String() string {
	if l.urls == nil {
		return ""
	}
	out := make([]string, len(*l.urls))
	for i, u := range *l.urls {
		out[i] = jsonrpc.Redact(u)
	}
	return strings.Join(out, ",")
}

func (l *rpcList) Type() string { return "urls" }

func (l *rpcList) Set(v string) error {
	var urls []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			urls = append(urls, p)
		}
	}
	if !l.set {
		*l.urls = nil
	}
	*l.urls = append(*l.urls, urls...)
	l.set = true
	return nil
}

// shardIndexFromJob sets --shard-index from JOB_COMPLETION_INDEX, which
// Kubernetes gives every pod of an Indexed Job, when --shards is given and
// neither the flag nor BLOCKHAUL_SHARD_INDEX set the index. Without
// --shards the variable is ignored: it is in every Indexed Job's pods.
func shardIndexFromJob(fs *pflag.FlagSet, environ []string) []*pipeline.FieldError {
	if !given(fs, "shards") || given(fs, "shard-index") {
		return nil
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != "JOB_COMPLETION_INDEX" {
			continue
		}
		if err := fs.Set("shard-index", v); err != nil {
			return []*pipeline.FieldError{{Flag: "shard-index", Env: "JOB_COMPLETION_INDEX", Msg: fmt.Sprintf("%q: %v", v, cause(err))}}
		}
	}
	return nil
}
