package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/pipeline"
	"github.com/spf13/pflag"
)

// flagsReference is docs/flags.md: its table of meanings is written by
// hand; its index of every flag (name, variable, default as defined,
// commands) is generated from the flag definitions between two markers.
const flagsReference = "../../docs/flags.md"

const (
	flagIndexBegin = "<!-- flag index: generated from cmd/blockhaul/flags.go by go generate ./cmd/blockhaul; do not edit -->\n"
	flagIndexEnd   = "<!-- end of flag index -->\n"
)

// renderFlagIndex is the generated index: a row per flag, in the order the
// flags are defined.
func renderFlagIndex() string {
	fs, _ := newFlags("")
	var b strings.Builder
	b.WriteString(flagIndexBegin)
	b.WriteString("\n| flag | variable | default as defined | commands |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		def := f.DefValue
		switch def {
		case "", "[]":
			def = ""
		default:
			def = "`" + def + "`"
		}
		env := "`" + pipeline.EnvName(f.Name) + "`"
		if f.Name == "memory-limit" {
			env += " (`GOMEMLIMIT` wins)"
		}
		cmds := f.Annotations[annCmds]
		if slices.Equal(cmds, pipeline.Commands) {
			cmds = []string{"every command"}
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, env, def, strings.Join(cmds, ", "))
	})
	b.WriteString("\n" + flagIndexEnd)
	return b.String()
}

// TestFlagsReferenceIsCurrent fails when docs/flags.md's flag index is not
// what the flag definitions give (a flag added, renamed, its default or
// commands changed without go generate ./cmd/blockhaul), or when a flag has
// no row in its table of meanings (before: --against, --against-schema,
// --below, --chunk, --deep, --dry-run, --force and --json had none).
func TestFlagsReferenceIsCurrent(t *testing.T) {
	have, err := os.ReadFile(flagsReference)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(have)
	i, j := strings.Index(doc, flagIndexBegin), strings.Index(doc, flagIndexEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated flag index between %q and %q", flagsReference, flagIndexBegin, flagIndexEnd)
	}
	want := renderFlagIndex()
	if *updateCLIReference {
		doc = doc[:i] + want + doc[j+len(flagIndexEnd):]
		if err := os.WriteFile(flagsReference, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if got := doc[i : j+len(flagIndexEnd)]; got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for k := range max(len(gl), len(wl)) {
			var g, w string
			if k < len(gl) {
				g = gl[k]
			}
			if k < len(wl) {
				w = wl[k]
			}
			if g != w {
				t.Fatalf("%s's flag index is stale: it has\n\t%q\nthe flag definitions give\n\t%q\nrun: go generate ./cmd/blockhaul", flagsReference, g, w)
			}
		}
	}

	// Every flag has a row of meaning above the index: a table row whose
	// first cell names it.
	meanings := doc[:i]
	documented := map[string]bool{}
	for _, line := range strings.Split(meanings, "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}
	fs, _ := newFlags("")
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		n++
		if !documented[f.Name] {
			t.Errorf("--%s has no row in %s's table of meanings", f.Name, flagsReference)
		}
	})
	if n < 60 {
		t.Fatalf("%d flags defined: the flag set was not read", n)
	}
}

// TestREADMECommandCount: the README's count of commands is the help's.
func TestREADMECommandCount(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`blockhaul help` lists the ([0-9]+) commands").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md does not say how many commands blockhaul help lists")
	}
	var help bytes.Buffer
	helpOf(t, &help, "help")
	listed := strings.Count(help.String()[:strings.Index(help.String(), "\nOther commands:")], "\n  blockhaul ")
	if n, _ := strconv.Atoi(string(m[1])); n != listed || n != len(pipeline.Commands) {
		t.Errorf("README.md says %s commands; blockhaul help lists %d (and %d are defined)", m[1], listed, len(pipeline.Commands))
	}
}
