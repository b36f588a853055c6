package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/blockhaul/blockhaul/pipeline"
)

// helpOf is what `blockhaul ARGS` prints to out (help, COMMAND --help).
func helpOf(t *testing.T, out io.Writer, args ...string) {
	t.Helper()
	if cl := parseCommandLineTo(args, nil, out, io.Discard); !cl.handled {
		t.Fatalf("%v was not answered by the command tree: %v", args, cl.problems)
	}
}

// flagText is the text a command's help gives flag name: its line and the
// indented lines below it, joined.
func flagText(help, name string) string {
	lines := strings.Split(help, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "  --"+name+" ") && l != "  --"+name {
			continue
		}
		text := []string{strings.TrimSpace(l)}
		for _, more := range lines[i+1:] {
			if !strings.HasPrefix(more, strings.Repeat(" ", flagIndent)) {
				break
			}
			text = append(text, strings.TrimSpace(more))
		}
		return strings.Join(text, " ")
	}
	return ""
}

// TestHelpFitsTheTerminal: every help (the root's, each command's, version,
// help and completion) fits 80 columns through a pipe and the 50 of a
// narrow terminal ($COLUMNS), each flag still on a line of its own (before:
// lines of up to 479 characters, never wrapped).
func TestHelpFitsTheTerminal(t *testing.T) {
	narrow, err := os.Create(filepath.Join(t.TempDir(), "help"))
	if err != nil {
		t.Fatal(err)
	}
	defer narrow.Close()
	t.Setenv("COLUMNS", "50")
	for _, cmd := range slices.Concat([]string{""}, pipeline.Commands, []string{"version", "help", "completion"}) {
		args := []string{"help"}
		if cmd != "" {
			args = append(args, cmd)
		}
		var piped bytes.Buffer
		helpOf(t, &piped, args...)
		if err := narrow.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := narrow.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		helpOf(t, narrow, args...)
		inNarrow, err := os.ReadFile(narrow.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			text  string
			width int
		}{{piped.String(), 80}, {string(inNarrow), 50}} {
			for _, l := range strings.Split(c.text, "\n") {
				// A flag's line (name, variable, default) is one line
				// whatever the width: it is what a reader looks for.
				if n := utf8.RuneCountInString(l); n > c.width && !strings.HasPrefix(l, "  --") {
					t.Errorf("help %s at %d columns: a line of %d: %q", cmd, c.width, n, l)
				}
			}
		}
		if cmd != "" && slices.Contains(pipeline.Commands, cmd) {
			if a, b := helpFlag.FindAllString(piped.String(), -1), helpFlag.FindAllString(string(inNarrow), -1); !slices.Equal(a, b) || len(a) == 0 {
				t.Errorf("help %s lists flags %v at 80 columns and %v at 50", cmd, a, b)
			}
		}
	}
}

// TestHelpSaysWhatThatCommandDoes: --from and --to read as what each
// command does with them (before: every command's --to described fetch and
// export, and verify's --from showed a default of 1 where verify checks
// from the lowest staged height); run --chain evm --help gives --from's
// default 0, an EVM chain's genesis (before: 1); --verify-blocks header
// says CometBFT still checks data_hash.
func TestHelpSaysWhatThatCommandDoes(t *testing.T) {
	help := func(args ...string) string {
		var b bytes.Buffer
		helpOf(t, &b, args...)
		return b.String()
	}
	want := map[string]string{ // a word --to's text has on that command alone
		pipeline.CmdVerify: "checked", pipeline.CmdChecksum: "digested", pipeline.CmdStatus: "shown",
		pipeline.CmdMerge: "copied", pipeline.CmdFollow: "stop", pipeline.CmdEstimate: "estimated",
	}
	seen := map[string]string{}
	for _, cmd := range pipeline.Commands {
		h := help("help", cmd)
		to := flagText(h, "to")
		used, _ := flagsOf(cmd)
		if !slices.Contains(used, "to") {
			if to != "" {
				t.Errorf("help %s gives --to, which it does not use: %s", cmd, to)
			}
			continue
		}
		if w, ok := want[cmd]; ok && !strings.Contains(to, w) {
			t.Errorf("help %s: --to reads %q, want what %s does with it (%q)", cmd, to, cmd, w)
		}
		if cmd != pipeline.CmdRun && cmd != pipeline.CmdFetch && strings.Contains(to, "chain tip") {
			t.Errorf("help %s: --to reads %q, which is fetch's", cmd, to)
		}
		if other, ok := seen[to]; ok && !(cmd == pipeline.CmdFetch && other == pipeline.CmdRun) {
			t.Errorf("help %s gives --to the text of %s: %q", cmd, other, to)
		}
		seen[to] = cmd
		from := flagText(h, "from")
		switch cmd {
		case pipeline.CmdStatus, pipeline.CmdChecksum, pipeline.CmdVerify, pipeline.CmdMerge, pipeline.CmdRepair:
			if strings.Contains(from, "(default") || !strings.Contains(from, "default: the lowest") {
				t.Errorf("help %s: --from reads %q, want its default in words (the lowest …), no (default 1)", cmd, from)
			}
		case pipeline.CmdRestore:
			if !strings.Contains(from, "(default 1)") {
				t.Errorf("help %s: --from reads %q, want (default 1): the shards' slices start there whatever the chain", cmd, from)
			}
		default:
			// No chain named: the job's is the store's, else cometbft; the
			// help names both first blocks and claims no number.
			if strings.Contains(from, "(default") || !strings.Contains(from, "cometbft 1") || !strings.Contains(from, "evm 0") {
				t.Errorf("help %s: --from reads %q, want cometbft's 1 and evm's 0 and no (default N)", cmd, from)
			}
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--chain", "evm", "--help"}, "(default 0)"},
		{[]string{"fetch", "--chain=evm", "--help"}, "(default 0)"},
		{[]string{"run", "--chain", "cometbft", "--help"}, "(default 1)"},
		{[]string{"run", "--help"}, "cometbft 1, evm 0"},
	} {
		if from := flagText(help(c.args...), "from"); !strings.Contains(from, c.want) {
			t.Errorf("%v: --from reads %q, want %s", c.args, from, c.want)
		}
	}
	// The environment chooses the chain as the command line does (before:
	// BLOCKHAUL_CHAIN=evm run --help said default 1, and the job started at
	// 0); the command line wins over it.
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"run", "--help"}, "BLOCKHAUL_CHAIN=evm", "(default 0)"},
		{[]string{"help", "fetch"}, "BLOCKHAUL_CHAIN=evm", "(default 0)"},
		{[]string{"run", "--chain", "cometbft", "--help"}, "BLOCKHAUL_CHAIN=evm", "(default 1)"},
		{[]string{"run", "--help"}, "BLOCKHAUL_CHAIN=cometbft", "(default 1)"},
	} {
		var out bytes.Buffer
		if cl := parseCommandLineTo(c.args, []string{c.env}, &out, io.Discard); !cl.handled {
			t.Fatalf("%v was not answered by the command tree: %v", c.args, cl.problems)
		}
		if from := flagText(out.String(), "from"); !strings.Contains(from, c.want) {
			t.Errorf("%s %v: --from reads %q, want %s", c.env, c.args, from, c.want)
		}
	}

	vb := flagText(help("help", "fetch"), "verify-blocks")
	if !strings.Contains(vb, "evm: the block hash alone") || !strings.Contains(vb, "cometbft: the same as full, data_hash included") {
		t.Errorf("--verify-blocks reads %q, want header's meaning for each family", vb)
	}
}

// TestHelpOneShape: every command's help, jobs and version, help and
// completion alike, starts with "blockhaul NAME: what it does", has a
// Usage, -h and the exit statuses (before: help help printed cobra's own
// "Usage: … Flags: -h, --help[=true|false] help for help" and no more);
// no flag shows "(default default)" (--indexes did).
func TestHelpOneShape(t *testing.T) {
	for _, cmd := range slices.Concat(pipeline.Commands, []string{"version", "help", "completion", "completion bash"}) {
		var b bytes.Buffer
		helpOf(t, &b, append([]string{"help"}, strings.Fields(cmd)...)...)
		h := b.String()
		if !strings.HasPrefix(h, "blockhaul "+cmd+": ") {
			t.Errorf("help %s starts %q, want %q", cmd, strings.SplitN(h, "\n", 2)[0], "blockhaul "+cmd+": …")
		}
		for _, want := range []string{"\nUsage:\n  blockhaul " + cmd, "\n  -h, --help  this help\n", "\nExit status: 0 "} {
			if !strings.Contains(h, want) {
				t.Errorf("help %s lacks %q:\n%s", cmd, want, h)
			}
		}
		if strings.Contains(h, "[=true|false]") || strings.Contains(h, "(default default)") {
			t.Errorf("help %s:\n%s", cmd, h)
		}
	}
}
