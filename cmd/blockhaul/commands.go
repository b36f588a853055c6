package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandDoc is one command of the binary as a value: its line in the
// usage, the head of its help, and what its positional argument is (a
// directory or URL for snapshot, restore and publish, completed as a
// directory; nothing for the rest).
type commandDoc struct {
	args  string // what follows the command name in its synopsis
	short string
	long  string
	// dirArg: the command takes one positional DEST or SRC.
	dirArg bool
}

// commandDocs declares every command pipeline runs (pipeline.Commands); a
// flag says which commands use it (flags.go).
var commandDocs = map[string]commandDoc{
	cmdRun:      {"--pg DSN --from N --to M", "fetch and export at once", "Fetches the range into staging and exports it to PostgreSQL at the same time: export follows the contiguous prefix fetch has staged. Exit 0 once the whole range is exported.", false},
	cmdFetch:    {"--from N --to M", "stage blocks only", "Fetches the range into the staging store; never touches PostgreSQL.", false},
	cmdExport:   {"--pg DSN --from N --to M", "export staged blocks; no network but the database", "Exports staged blocks to PostgreSQL in height order, one transaction per batch with its checkpoint; needs no RPC node.", false},
	cmdFollow:   {"--pg DSN [--from N]", "the head stream: tail the chain tip", "Fetches and exports new blocks as the chain produces them, repairs reorgs within --reorg-window, and runs until stopped (or --to).", false},
	cmdMerge:    {"--merge-from DIR", "copy another staging directory's blocks into --staging", "Copies the blocks of another staging store (of the same chain) into --staging, checking continuity where they meet.", false},
	cmdStatus:   {"[--pg DSN]", "staged ranges, gaps and checkpoints", "Shows the staged ranges and gaps, and with --pg each stream's checkpoint; works beside a running job.", false},
	cmdChecksum: {"--pg DSN [--against DSN2]", "digest every exported row; compare two databases", "Digests every exported row chunk by chunk; with --against compares two databases (exit 4 when they differ).", false},
	cmdVerify:   {"[--deep] [--pg DSN]", "check every staged record, the chain, and PostgreSQL against it", "Checks every staged record's checksum and hashes and the chain's continuity; with --pg, PostgreSQL's blocks and their chain across streams and ranges, and every table's rows against the rows the staged blocks decode to, by per-chunk digests (--chunk). It says clean only when every table was compared over every exported height, and names what was not (exit 4 when something is wrong).", false},
	cmdRepair:   {"[--rpc URL] [--from N --to M]", "refetch what verify finds missing or wrong; salvage a damaged store", "Refetches the records verify finds missing or wrong, and salvages a store Pebble cannot open.", false},
	cmdPrune:    {"--below H --pg DSN [--force]", "delete staged blocks every target has exported", "Deletes staged heights below --below once every target database whose checkpoint the store mirrors has exported them, as each target itself confirms (its checkpoint rows, and the rows under them), reached through --pg's server; a target unreachable, gone, reset or behind the store's mirror of its checkpoint is refused (exit 4), and heights no target has exported are refused (exit 2), since they are nowhere else. --dry-run prints what a prune would delete (heights, size, the targets holding them) and deletes nothing; --force deletes regardless.", false},
	cmdSnapshot: {"DEST", "consistent copy of --staging to a directory or blob URL", "Writes a consistent copy of --staging to DEST: a directory, or a blob URL (file://, s3://, gs://, azblob://).", true},
	cmdRestore:  {"SRC", "restore a snapshot into --staging, verified first", "Restores a snapshot from SRC into --staging, verified before it replaces anything.", true},
	cmdPublish:  {"DEST", "write staged blocks as a chunk archive anyone can seed from", "Writes the full chunks of --staging's staged blocks to DEST (a directory, or a blob URL: file://, s3://, gs://, azblob://) under DEST/<chain-id>/: fixed-size chunks of the raw records, zstd-compressed, and a manifest of their heights, hashes and SHA-256 digests, written last (docs/format/archive.md). Chunks already there are not uploaded again; a killed publish resumes. --archive reads it back.", true},
	cmdEstimate: {"--from N --to M [--pg DSN]", "heights, bytes and time a job would take; disk room", "Estimates the heights, staged bytes, rows and time of a range, and whether the disk has room.", false},
}

const exitStatusText = `Exit status: 0 range complete (or check clean); 1 runtime failure; 2 invalid configuration; 3 interrupted part way (resumable); 4 fatal data error (continuity break, corrupt record, wrong chain, a check that found the data wrong).`

const rootLong = `blockhaul rebuilds blockchain history into PostgreSQL.

With neither --rpc, --node-home nor --archive, blocks come from a deterministic synthetic chain (--synthetic-seed).
Every flag can also be set through an environment variable (BLOCKHAUL_<FLAG>);
flags win over the environment.
`

// jobCommand is a pipeline command's cobra command with the Config its
// flags are bound to.
type jobCommand struct {
	cmd    *cobra.Command
	cfg    *pipeline.Config
	proc   *processFlags
	values map[string]func(*pipeline.Config, string) []string

	// While the command tree parses the command line, a flag value that
	// does not parse is collected here rather than stopping the parse, so
	// that every problem is reported at once (see lenientValue).
	collecting    bool
	valueProblems []*pipeline.FieldError

	// environ is the invocation's environment (KEY=value), for what a help
	// shows that depends on it.
	environ []string
}

// chosenChain is the family the job would run with: --chain on the command
// line, else its variable, else the default (also for a command that does
// not use --chain, which ignores both).
func (j *jobCommand) chosenChain() string {
	fs := j.cmd.Flags()
	if fs.Lookup("chain").Hidden {
		return "" // the command reads the family of the store it is given
	}
	if fs.Changed("chain") {
		return j.cfg.Chain
	}
	names := append([]string{pipeline.EnvName("chain")}, pipeline.EnvAliases["chain"]...)
	for _, kv := range j.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && slices.Contains(names, k) {
			return v
		}
	}
	return "" // the default: cometbft, or the family of the chain --staging holds
}

// lenientValue is a flag's value that, while its command collects, records
// a value that does not parse and lets the parse go on. The value of a
// flag its command does not use is never set: such a flag is warned about
// and ignored (its value neither parsed nor checked), as its environment
// variable is.
type lenientValue struct {
	pflag.Value
	name   string
	job    *jobCommand
	unused bool
}

func (v *lenientValue) Set(s string) error {
	if v.unused {
		return nil
	}
	err := v.Value.Set(s)
	if err != nil && v.job.collecting {
		v.job.valueProblems = append(v.job.valueProblems, flagProblem(v.name, "%q: %v", redactValue(v.name, s), cause(err)))
		return nil
	}
	return err
}

// newRoot builds the command tree for an invocation in environ. run is called with the job command that
// was invoked and the words its flags did not take.
func newRoot(environ []string, run func(j *jobCommand, args []string) error) (*cobra.Command, map[*cobra.Command]*jobCommand) {
	root := &cobra.Command{
		Use:           "blockhaul",
		Short:         "rebuilds blockchain history into PostgreSQL",
		Long:          rootLong,
		Version:       moduleVersion(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate(strings.ReplaceAll(versionText(), "{{", "{{`{{`}}"))
	jobs := map[*cobra.Command]*jobCommand{}
	for _, name := range pipeline.Commands {
		j := newJobCommand(name, environ, run)
		root.AddCommand(j.cmd)
		jobs[j.cmd] = j
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "the module version, commit, Go and Pebble versions, build tags",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := io.WriteString(c.OutOrStdout(), versionText())
			return err
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	})
	root.SetHelpCommand(helpCommand(root))
	strictCompletion(root)
	root.SetHelpFunc(func(c *cobra.Command, _ []string) {
		out := c.OutOrStdout()
		switch j := jobs[c]; {
		case c == root:
			writeRootHelp(out)
		case j != nil:
			writeCommandHelp(out, j)
		default: // version, completion and its shells, help
			writeOtherHelp(out, c)
		}
	})
	return root, jobs
}

// newJobCommand is the cobra command of pipeline command name, its flags
// bound to a Config of its own; run is called with it and the words its
// flags did not take.
func newJobCommand(name string, environ []string, run func(j *jobCommand, args []string) error) *jobCommand {
	doc := commandDocs[name]
	j := &jobCommand{cfg: &pipeline.Config{}, proc: &processFlags{}, collecting: true, environ: environ}
	j.cmd = &cobra.Command{
		Use:   name + " " + doc.args,
		Short: doc.short,
		Long:  doc.long,
		Args:  cobra.ArbitraryArgs,
		RunE:  func(c *cobra.Command, args []string) error { return run(j, args) },
		// Unknown flags reach run with the stray words, which says
		// what was meant of each (did you mean …?).
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlagsHandling: pflag.PassUnknownFlagToArgs},
	}
	fs := j.cmd.Flags()
	j.values = defineFlags(fs, j.cfg, j.proc)
	fs.VisitAll(func(f *pflag.Flag) {
		f.Hidden = !usedBy(f, name)
		f.Value = &lenientValue{Value: f.Value, name: f.Name, job: j, unused: f.Hidden}
		if say, ok := f.Annotations[annSays+name]; ok {
			f.Usage = say[0]
			if len(say) > 1 {
				f.DefValue = ""
			}
		}
	})
	for flag, values := range j.values {
		_ = j.cmd.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
			return values(j.cfg, prefix), cobra.ShellCompDirectiveNoFileComp
		})
	}
	_ = j.cmd.MarkFlagDirname("staging")
	_ = j.cmd.MarkFlagDirname("merge-from")
	j.cmd.ValidArgsFunction = cobra.NoFileCompletions
	if doc.dirArg {
		j.cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
	}
	return j
}

// helpCommand is help [COMMAND] of root.
func helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "this help, or a command's flags",
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return unknownCommand(strings.Join(args, " "))
			}
			return target.Help()
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []string
			for _, c := range slices.Concat(pipeline.Commands, []string{"version", "completion"}) {
				if strings.HasPrefix(c, prefix) {
					out = append(out, c)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}
}

// strictCompletion makes cobra's completion SHELL refuse a shell it does not
// know (cobra prints the help and exits 0).
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sc := range c.Commands() {
			shells = append(shells, sc.Name())
		}
		c.Use = "completion SHELL"
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			msg := fmt.Sprintf("completion: unknown shell %q (want one of %s)", args[0], strings.Join(shells, ", "))
			if near := closest(args[0], shells); near != "" {
				msg = fmt.Sprintf("completion: unknown shell %q: did you mean %s?", args[0], near)
			}
			return errors.New(msg)
		}
	}
}

// unknownCommand names the closest command to w, if one is close.
func unknownCommand(w string) error {
	if c := closest(w, slices.Concat(pipeline.Commands, []string{"version", "help", "completion"})); c != "" {
		return fmt.Errorf("unknown command %q: did you mean %s?", w, c)
	}
	return fmt.Errorf("unknown command %q (want one of %s)", w, strings.Join(pipeline.Commands, ", "))
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// helpWidth is the width a help is wrapped to: the terminal's that out is
// (its window, else $COLUMNS), else 80 columns, so that a help read
// through a pipe or in docs/cli.md is the same on every machine.
func helpWidth(out io.Writer) int {
	if f, ok := out.(*os.File); ok {
		if n := monitor.TerminalWidth(f); n > 0 {
			return max(n, minHelpWidth)
		}
	}
	return 80
}

// minHelpWidth is the narrowest a help is wrapped to: below it, its text
// would be a word a line.
const minHelpWidth = 40

// writeRootHelp lists the commands, the exit statuses and where to look next.
func writeRootHelp(w io.Writer) {
	width := helpWidth(w)
	var rows [][2]string
	for _, name := range pipeline.Commands {
		doc := commandDocs[name]
		rows = append(rows, [2]string{"blockhaul " + name + " " + doc.args, doc.short})
	}
	other := [][2]string{
		{"blockhaul version", "the module version, commit, Go and Pebble versions, build tags (also --version)"},
		{"blockhaul help [COMMAND]", "this help, or a command's flags (also COMMAND --help)"},
		{"blockhaul completion SHELL", "shell completion script: bash, zsh, fish or powershell (blockhaul help completion)"},
	}
	head := 0
	for _, r := range append(slices.Clone(rows), other...) {
		head = max(head, len(r[0]))
	}
	fmt.Fprint(w, wrapParagraphs(rootLong, width))
	fmt.Fprint(w, "\nUsage:\n")
	for _, r := range rows {
		fmt.Fprint(w, twoColumns(r[0], head, r[1], width))
	}
	fmt.Fprint(w, "\nOther commands:\n")
	for _, r := range other {
		fmt.Fprint(w, twoColumns(r[0], head, r[1], width))
	}
	fmt.Fprintf(w, "\n%s\n%s\n", wrap(exitStatusText, width), wrap("The flags of a command: blockhaul help COMMAND (or blockhaul COMMAND --help).", width))
}

// writeOtherHelp is the help of a command that is not a job (version,
// help, completion and its shells) in the shape of a job's: its line, what
// it does, its usage, its subcommands, -h and the exit statuses.
func writeOtherHelp(w io.Writer, c *cobra.Command) {
	width := helpWidth(w)
	path := c.CommandPath()
	fmt.Fprintf(w, "%s\n", wrap(path+": "+c.Short, width))
	if long := strings.TrimSpace(c.Long); long != "" && long != c.Short {
		fmt.Fprintf(w, "\n%s", wrapParagraphs(long, width))
	}
	use := path
	if _, args, ok := strings.Cut(c.Use, " "); ok {
		use += " " + args
	}
	fmt.Fprintf(w, "\nUsage:\n%s\n", synopsis(strings.TrimPrefix(use, "blockhaul "), width))
	var subs [][2]string
	head := 0
	for _, sc := range c.Commands() {
		if sc.IsAvailableCommand() {
			subs = append(subs, [2]string{path + " " + sc.Name(), sc.Short})
			head = max(head, len(path+" "+sc.Name()))
		}
	}
	if len(subs) > 0 {
		fmt.Fprint(w, "\nCommands:\n")
		for _, r := range subs {
			fmt.Fprint(w, twoColumns(r[0], head, r[1], width))
		}
	}
	if c.HasAvailableLocalFlags() {
		var lines []string
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				lines = append(lines, "  --"+f.Name+"\n"+indent(wrap(f.Usage, width-flagIndent), flagIndent)+"\n")
			}
		})
		if len(lines) > 0 {
			fmt.Fprintf(w, "\nFlags:\n%s", strings.Join(lines, ""))
		}
	}
	fmt.Fprintf(w, "\n  -h, --help  this help\n\n%s\n", wrap(exitStatusText, width))
}

// writeCommandHelp shows a command's synopsis and only the flags it uses,
// by group: each flag's name, environment variable and default on a line,
// and below it what this command does with the flag, wrapped to the
// terminal.
func writeCommandHelp(w io.Writer, j *jobCommand) {
	width := helpWidth(w)
	name := j.cmd.Name()
	doc := commandDocs[name]
	fmt.Fprintf(w, "%s\n\n%s\n\nUsage:\n%s\n", wrap("blockhaul "+name+": "+doc.short, width), wrap(doc.long, width), synopsis(name+" "+doc.args+" [flags]", width))
	fs := j.cmd.Flags()
	for _, g := range flagGroups {
		var lines []string
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Hidden || !slices.Contains(f.Annotations[annGroup], g) {
				return
			}
			lines = append(lines, flagHelp(f, shownDefault(j, f), width))
		})
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s:\n%s", g, strings.Join(lines, ""))
		}
	}
	fmt.Fprintf(w, "\n  -h, --help  this help\n\n%s\n%s\n", wrap("Each flag's environment variable is in brackets; flags win over the environment.", width), wrap(exitStatusText, width))
}

// shownDefault is what the help of j says of f's default: the flag's
// default when it says something (not an empty string, false, a 0 the text
// explains, or a value named "default" that the text describes); for
// --from, that of the family --chain names, on the command line or in its
// variable (run --chain evm --help, or BLOCKHAUL_CHAIN=evm: 0, an EVM
// chain's genesis), as the job would start, and no number when no chain is
// named: the job's family is then that of the store --staging holds, else
// cometbft, which the help cannot know (the text says both first blocks).
func shownDefault(j *jobCommand, f *pflag.Flag) string {
	if f.Name == "from" && f.DefValue != "" && j.cmd.Name() != cmdRestore { // restore's slices start at 1 whatever the chain
		if fam, err := family.Lookup(j.chosenChain()); err == nil {
			return fmt.Sprintf(" (default %d)", fam.Genesis)
		}
		return ""
	}
	switch f.DefValue {
	case "", "false", "0", "[]", "default":
		return ""
	}
	return " (default " + f.DefValue + ")"
}

// flagHead is a flag's name and the kind of value it takes.
func flagHead(f *pflag.Flag) string {
	varname, _ := pflag.UnquoteUsage(f)
	switch {
	case f.NoOptDefVal != "" && varname != "":
		return "--" + f.Name + "[=" + varname + "]"
	case varname != "":
		return "--" + f.Name + " " + varname
	}
	return "--" + f.Name
}

// flagHelp is one flag in a command's help: its name, environment variable
// and default (shownDefault) on one line, what it does below, indented.
func flagHelp(f *pflag.Flag, def string, width int) string {
	_, usage := pflag.UnquoteUsage(f)
	return fmt.Sprintf("  %s  [%s]%s\n%s\n", flagHead(f), pipeline.EnvName(f.Name), def, indent(wrap(usage, width-flagIndent), flagIndent))
}

// flagIndent is how far a flag's text is indented below its name.
const flagIndent = 6

// twoColumns is head, padded to headWidth, and text beside it, wrapped so
// that its lines start under its first and end within width.
// A terminal too narrow for both columns gets the text below the head, as
// a flag's.
func twoColumns(head string, headWidth int, text string, width int) string {
	col := 2 + headWidth + 2
	if width-col < minHelpWidth/2 {
		return "  " + head + "\n" + indent(wrap(text, width-flagIndent), flagIndent) + "\n"
	}
	lines := strings.Split(wrap(text, width-col), "\n")
	out := fmt.Sprintf("  %-*s  %s\n", headWidth, head, lines[0])
	for _, l := range lines[1:] {
		out += strings.Repeat(" ", col) + l + "\n"
	}
	return out
}

// synopsis is a command's usage line, its continuation lines indented
// under its arguments.
func synopsis(s string, width int) string {
	lines := strings.Split(wrap(s, width-len("  blockhaul ")), "\n")
	return "  blockhaul " + strings.Join(lines, "\n"+strings.Repeat(" ", len("  blockhaul ")))
}

// indent puts n spaces before every line of s.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// wrapParagraphs wraps each paragraph of s (separated by blank lines) to
// width, keeping the blank lines.
func wrapParagraphs(s string, width int) string {
	paras := strings.Split(strings.TrimRight(s, "\n"), "\n\n")
	for i, p := range paras {
		paras[i] = wrap(p, width)
	}
	return strings.Join(paras, "\n\n") + "\n"
}

// wrapLines wraps each line of s longer than width to it, its
// continuation lines indented as the line was.
func wrapLines(s string, width int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if utf8.RuneCountInString(l) > width {
			n := len(l) - len(strings.TrimLeft(l, " "))
			lines[i] = indent(wrap(l, max(width-n, minHelpWidth/2)), n)
		}
	}
	return strings.Join(lines, "\n")
}

// wrap breaks s into lines of at most width columns (a word longer than
// width stands on a line of its own).
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(s) {
		wl := utf8.RuneCountInString(word)
		if n > 0 && n+1+wl > width {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += wl
	}
	return b.String()
}
