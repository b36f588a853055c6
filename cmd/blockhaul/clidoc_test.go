package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/spf13/cobra"
)

// cliReference is docs/cli.md, the command-line reference generated from
// the command tree: every command's help exactly as `blockhaul help
// COMMAND` prints it.
const cliReference = "../../docs/cli.md"

var updateCLIReference = flag.Bool("update-cli-reference", false, "write "+cliReference+" from the command tree")

// renderCLIReference renders the help of the root and of every command, in
// the order `blockhaul help` lists them.
func renderCLIReference(t *testing.T) []byte {
	t.Helper()
	root, _ := newRoot(nil, func(*jobCommand, []string) error { return nil })
	var b bytes.Buffer
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("Every command's help as `blockhaul help COMMAND` prints it, generated from the command tree\n")
	b.WriteString("(`go generate ./cmd/blockhaul`; `TestCLIReferenceIsCurrent` fails when this page is stale).\n")
	b.WriteString("Each flag's environment variable is in brackets. What the commands do, in more words:\n")
	b.WriteString("[commands.md](commands.md); every flag with its meaning: [flags.md](flags.md).\n")
	section := func(title string, c *cobra.Command) {
		var out bytes.Buffer
		c.SetOut(&out)
		c.HelpFunc()(c, nil)
		fmt.Fprintf(&b, "\n## %s\n\n```text\n%s\n```\n", title, strings.TrimRight(out.String(), "\n"))
	}
	section("blockhaul", root)
	root.InitDefaultHelpCmd()
	for _, name := range slices.Concat(pipeline.Commands, []string{"version", "help", "completion"}) {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Fatalf("command %s is not in the command tree (%v)", name, err)
		}
		section("blockhaul "+name, c)
	}
	for _, c := range root.Commands() {
		if !c.Hidden && !slices.Contains(pipeline.Commands, c.Name()) && !slices.Contains([]string{"version", "help", "completion"}, c.Name()) {
			t.Fatalf("command %s is missing from the reference", c.Name())
		}
	}
	return b.Bytes()
}

// TestCLIReferenceIsCurrent fails when docs/cli.md is not what the command
// tree renders: a command, flag or help text changed without `go generate
// ./cmd/blockhaul`.
func TestCLIReferenceIsCurrent(t *testing.T) {
	want := renderCLIReference(t)
	if *updateCLIReference {
		if err := os.WriteFile(cliReference, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(cliReference)
	if err != nil {
		t.Fatalf("read %s: %v (go generate ./cmd/blockhaul writes it)", cliReference, err)
	}
	if !bytes.Equal(have, want) {
		hl, wl := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(hl), len(wl)) {
			var h, w string
			if i < len(hl) {
				h = hl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if h != w {
				t.Fatalf("%s is stale from line %d: it has\n\t%q\nthe command tree gives\n\t%q\nrun: go generate ./cmd/blockhaul", cliReference, i+1, h, w)
			}
		}
	}
}
