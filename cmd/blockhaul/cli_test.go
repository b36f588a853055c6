package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/internal/testbin"
	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/spf13/pflag"
)

// blockhaulSplit runs the binary and returns its exit code, stdout and
// stderr apart (help and completion belong on stdout).
func blockhaulSplit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = testbin.CleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	if err != nil {
		t.Fatalf("run blockhaul: %v", err)
	}
	return 0, stdout.String(), stderr.String()
}

// flagsOf are the flags command cmd uses and those it does not, by the
// flag table (flags.go).
func flagsOf(cmd string) (used, unused []string) {
	fs, _ := newFlags(cmd)
	fs.VisitAll(func(f *pflag.Flag) {
		if usedBy(f, cmd) {
			used = append(used, f.Name)
		} else {
			unused = append(unused, f.Name)
		}
	})
	return used, unused
}

var helpFlag = regexp.MustCompile(`(?m)^  (--[a-z0-9-]+)`)

// TestHelpListsTheFlagsTheCommandUses: blockhaul help CMD and CMD --help
// print the same text on stdout, exit 0, and list exactly the flags the
// command uses, under their groups, each with its environment variable.
func TestHelpListsTheFlagsTheCommandUses(t *testing.T) {
	for _, cmd := range pipeline.Commands {
		t.Run(cmd, func(t *testing.T) {
			code, out, errOut := blockhaulSplit(t, "help", cmd)
			if code != 0 || errOut != "" {
				t.Fatalf("help %s: exit %d, stderr %q", cmd, code, errOut)
			}
			code, out2, _ := blockhaulSplit(t, cmd, "--help")
			if code != 0 || out2 != out {
				t.Fatalf("%s --help: exit %d, and not the text of help %s:\n%s", cmd, code, cmd, out2)
			}
			var listed []string
			for _, m := range helpFlag.FindAllStringSubmatch(out, -1) {
				listed = append(listed, strings.TrimPrefix(m[1], "--"))
			}
			used, _ := flagsOf(cmd)
			if !slices.Equal(sortedCopy(listed), sortedCopy(used)) {
				t.Errorf("help %s lists %v, want the flags it uses %v:\n%s", cmd, listed, used, out)
			}
			for _, name := range used {
				if !strings.Contains(out, "["+pipeline.EnvName(name)+"]") {
					t.Errorf("help %s does not name %s's variable %s", cmd, name, pipeline.EnvName(name))
				}
			}
		})
	}
	// Groups, and what a command leaves out.
	_, out, _ := blockhaulSplit(t, "help", "fetch")
	for _, want := range []string{"Chain and source:\n  --chain", "Fetch:\n  --fetch-workers", "--shards", "Exit status:"} {
		if !strings.Contains(out, want) {
			t.Errorf("help fetch lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"PostgreSQL:", "--pg ", "--against", "--export-streams"} {
		if strings.Contains(out, not) {
			t.Errorf("help fetch shows %q, which fetch does not use:\n%s", not, out)
		}
	}
	// The root help on stdout lists every command.
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, out, _ := blockhaulSplit(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, cmd := range append(slices.Clone(pipeline.Commands), "version", "completion") {
			if !strings.Contains(out, "blockhaul "+cmd+" ") {
				t.Errorf("%v does not list %s:\n%s", args, cmd, out)
			}
		}
	}
	// No command at all: the usage on stderr, status 2.
	code, out, errOut := blockhaulSplit(t)
	if code != 2 || out != "" || !strings.Contains(errOut, "blockhaul fetch --from N --to M") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

var helpDefault = regexp.MustCompile(`(?m)^  --([a-z0-9-]+).*\(default ([^)]*)\)$`)

// TestHelpDefaultsAreValid: every default a command's help shows, given
// back as the flag's value, draws no problem about that flag.
func TestHelpDefaultsAreValid(t *testing.T) {
	n := 0
	for _, cmd := range pipeline.Commands {
		var help bytes.Buffer
		if cl := parseCommandLineTo([]string{"help", cmd}, nil, &help, io.Discard); !cl.handled {
			t.Fatalf("help %s was not answered: %v", cmd, cl.problems)
		}
		for _, m := range helpDefault.FindAllStringSubmatch(help.String(), -1) {
			name, value := m[1], m[2]
			n++
			args := []string{cmd, "--" + name + "=" + value}
			if cmd == pipeline.CmdSnapshot || cmd == pipeline.CmdRestore {
				args = append(args, t.TempDir())
			}
			cl := parseCommandLine(args, nil)
			problems := cl.problems
			if cl.cfg != nil {
				cl.cfg.Command = cmd
				cl.cfg.EnsureDefaults()
				var ce *pipeline.ConfigError
				if errors.As(cl.cfg.Validate(), &ce) {
					problems = append(problems, ce.Fields...)
				}
			}
			for _, p := range problems {
				if p.Flag == name || strings.Contains(p.Msg, "--"+name) {
					t.Errorf("%s: the help's default --%s=%s is refused: %v", cmd, name, value, p)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d defaults in the helps; the pattern no longer matches them", n)
	}
}

// TestVersion: version and --version print the module version, the commit
// the binary was built from, the Go and Pebble versions and the build.
func TestVersion(t *testing.T) {
	code, out, _ := blockhaulSplit(t, "version")
	if code != 0 {
		t.Fatalf("version: exit %d", code)
	}
	code, out2, _ := blockhaulSplit(t, "--version")
	if code != 0 || out2 != out {
		t.Fatalf("--version: exit %d, not version's text:\n%s\nvs\n%s", code, out2, out)
	}
	bi, ok := debug.ReadBuildInfo() // the test binary's: same module graph
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	pebble := ""
	for _, d := range bi.Deps {
		if d.Path == pebbleModule {
			pebble = d.Version
		}
	}
	for _, want := range []string{"blockhaul ", "go:         " + runtime.Version(), "pebble:     " + pebble, "build tags: none", "cgo:"} {
		if pebble == "" || !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	// The commit: Go stamps it in a checkout whose .git is a directory (not
	// in a git worktree, whose .git is a file).
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v (the test runs in a git checkout)", err)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err == nil && st.IsDir() {
		if !strings.Contains(out, "commit:     "+strings.TrimSpace(string(head))) {
			t.Errorf("version does not show the commit %s:\n%s", head, out)
		}
	} else if !strings.Contains(out, "commit:     unknown (built without VCS stamping") {
		t.Errorf("built in a worktree, version should say the commit is unknown:\n%s", out)
	}
}

func TestFormatVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Version: "v1.2.3"},
		Deps:      []*debug.Module{{Path: pebbleModule, Version: "v2.1.7"}},
		Settings: []debug.BuildSetting{
			{Key: "-tags", Value: "pebblegozstd"}, {Key: "CGO_ENABLED", Value: "0"},
			{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T11:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	got := formatVersion(bi, "linux/amd64", "fed456")
	for _, want := range []string{"blockhaul v1.2.3\n", "commit:     abc123 (2026-12-01T11:00:00Z), with uncommitted changes", "go:         go1.26.8 linux/amd64",
		"pebble:     v2.1.7", "build tags: pebblegozstd", "cgo:        0 (Pebble's zstd: pure Go)"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	bi.Settings = []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "1"}}
	if got := formatVersion(bi, "linux/amd64", ""); !strings.Contains(got, "zstd: cgo") || !strings.Contains(got, "commit:     unknown") {
		t.Errorf("a cgo build without VCS stamping:\n%s", got)
	}
	// The image's build: no .git in its context, the commit given.
	for given, want := range map[string]string{
		"fed456":          "commit:     fed456 (given to the build)\n",
		"fed456+modified": "commit:     fed456 (given to the build), with uncommitted changes\n",
	} {
		if got := formatVersion(bi, "linux/amd64", given); !strings.Contains(got, want) {
			t.Errorf("built without VCS stamping, given %s: lacks %q:\n%s", given, want, got)
		}
	}
}

// complete asks the binary what a shell would offer after words.
func complete(t *testing.T, words ...string) []string {
	t.Helper()
	code, out, errOut := blockhaulSplit(t, append([]string{"__complete"}, words...)...)
	if code != 0 {
		t.Fatalf("__complete %q: exit %d\n%s%s", words, code, out, errOut)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, ":") {
			continue // the directive
		}
		name, _, _ := strings.Cut(line, "\t")
		got = append(got, name)
	}
	return got
}

// TestCompletion: commands, a command's own flags, and the values of the
// flags whose values are few.
func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"fe"}, []string{"fetch"}},
		{[]string{"st"}, []string{"status"}},
		{[]string{"fetch", "--chain", ""}, family.Names()},
		{[]string{"export", "--event-encoding", ""}, []string{"auto", "base64", "text"}},
		{[]string{"run", "--defer-indexes="}, []string{"auto", "always", "never"}},
		{[]string{"status", "--log-level", ""}, []string{"debug", "info", "warn", "error"}},
		{[]string{"fetch", "--shard"}, []string{"--shards", "--shard-index", "--shard-chunk"}},
		{[]string{"help", "ver"}, []string{"verify", "version"}},
		{[]string{"export", "--chain", "evm", "--tables", "blocks,-"}, []string{"blocks,-transactions", "blocks,-logs", "blocks,-withdrawals"}},
	} {
		got := complete(t, tc.words...)
		slices.Sort(got)
		if !slices.Equal(got, sortedCopy(tc.want)) {
			t.Errorf("complete %q: %q, want %q", tc.words, got, tc.want)
		}
	}
	// --tables: the family's tables, after those already listed.
	if got := complete(t, "run", "--tables", "blocks,"); !slices.Contains(got, "blocks,events") || slices.Contains(got, "blocks,blocks") || slices.Contains(got, "blocks,logs") {
		t.Errorf("run --tables blocks,: %q", got)
	}
	// A command's flags only: status takes no --rps, fetch no --pg.
	if got := complete(t, "status", "--"); slices.Contains(got, "--rps") || !slices.Contains(got, "--pg") {
		t.Errorf("status --: %q", got)
	}
	if got := complete(t, "fetch", "--p"); slices.Contains(got, "--pg") || !slices.Contains(got, "--progress-interval") {
		t.Errorf("fetch --p: %q", got)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, _ := blockhaulSplit(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d, no call back into the binary:\n%.300s", shell, code, out)
		}
	}
}

// TestBashCompletion sources the bash script and completes as bash would.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed to test its completion script")
	}
	script := filepath.Join(t.TempDir(), "blockhaul.bash")
	code, out, _ := blockhaulSplit(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit %d", code)
	}
	if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{binary + " export --chain ", family.Names()},
		{binary + " export --event-encoding b", []string{"base64"}},
		{binary + " exp", []string{"export"}},
	} {
		// The script needs the bash-completion package's
		// _get_comp_words_by_ref (as every cobra script does); without the
		// package, a stand-in that splits the line the same way for these
		// lines (no '=' or ':' in the word completed).
		prog := `if [[ -r /usr/share/bash-completion/bash_completion ]]; then source /usr/share/bash-completion/bash_completion
else _get_comp_words_by_ref() { words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; }; fi
source "$1"; COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<<"$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]}-1)); __start_blockhaul; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "-c", prog, "bash", script, tc.line)
		cmd.Env = testbin.CleanEnv()
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		words := strings.Fields(string(got))
		slices.Sort(words)
		want := slices.Sorted(slices.Values(tc.want)) // bash sorts what it offers
		if !slices.Equal(words, want) {
			t.Errorf("bash completes %q to %q, want %q", tc.line, words, tc.want)
		}
	}
}

// TestSuggestions: a mistyped command or flag is answered with the one
// meant; a flag the command does not use is named as such.
func TestSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, `unknown command "stauts": did you mean status?`},
		{[]string{"verfy"}, "did you mean verify?"},
		{[]string{"help", "fecth"}, `unknown command "fecth": did you mean fetch?`},
		{[]string{"export", "--bach-blocks", "3"}, "unknown flag --bach-blocks: did you mean --batch-blocks?"},
		{[]string{"verify", "--dep"}, "unknown flag --dep: did you mean --deep?"},
		{[]string{"run", "--confirmation=3", "--rps", "NaN"}, "unknown flag --confirmation: did you mean --confirmations?"},
		{[]string{"status", "--deep", "--rps", "NaN"}, "--deep has no effect on status (its flags: blockhaul help status)"},
		{[]string{"completion", "bsh"}, `unknown shell "bsh": did you mean bash?`},
		{[]string{"--versoin"}, "unknown flag --versoin: did you mean --version?"},
	} {
		args := tc.args
		if args[0] != "help" && args[0] != "completion" {
			args = append(args, "--staging", filepath.Join(t.TempDir(), "s"))
		}
		code, out := blockhaul(t, args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
}

func TestTableNames(t *testing.T) {
	for chainName, want := range map[string][]string{
		"cometbft": {"blocks", "transactions", "events"},
		"evm":      {"blocks", "transactions", "logs"},
		"":         {"blocks", "transactions", "events", "logs"},
	} {
		got := tableNames(&pipeline.Config{Chain: chainName})
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("tables of %q: %q, lacks %q", chainName, got, w)
			}
		}
		if chainName == "cometbft" && slices.Contains(got, "logs") {
			t.Errorf("cometbft tables hold evm's logs: %q", got)
		}
	}
}

// TestRuntimeConfigurationErrorsReadAsFlagErrors: a problem found once the
// command runs (a staging directory that is not there) exits 2 and is said
// on stderr as the flags' problems are, one per line, not as an escaped log
// record; with --log-format=json it stays a log record for machines.
func TestRuntimeConfigurationErrorsReadAsFlagErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-staging")
	code, _, stderr := blockhaulSplit(t, "verify", "--staging", missing)
	want := "blockhaul verify: invalid configuration:\n  --staging (BLOCKHAUL_STAGING): no staging directory: stat " + missing
	if code != 2 || !strings.Contains(stderr, want) || strings.Contains(stderr, "level=ERROR") {
		t.Errorf("verify of a missing staging directory: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = blockhaulSplit(t, "verify", "--staging", missing, "--log-format", "json")
	if code != 2 || !strings.Contains(stderr, `"level":"ERROR"`) || !strings.Contains(stderr, `"exit":2`) {
		t.Errorf("the same with --log-format=json: exit %d, stderr:\n%s", code, stderr)
	}
}
