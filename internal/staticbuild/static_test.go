// Package staticbuild checks what can be checked of the container image
// without a Docker daemon: that the Dockerfile's build command (the one
// `make static` runs too) gives a binary with no dynamic dependencies that
// runs and stages blocks, and that the paths the Dockerfile and its build
// need are in the build context. The image build itself (`make image`)
// needs Docker and is not run here.
package staticbuild

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, two levels up from this package.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerfileBuild is the build stage's `RUN ... go build ...` command.
func dockerfileBuild(t *testing.T, dockerfile string) string {
	t.Helper()
	for _, l := range strings.Split(dockerfile, "\n") {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(l), "RUN "); ok && strings.Contains(cmd, "go build") {
			return cmd
		}
	}
	t.Fatal("Dockerfile has no RUN ... go build")
	return ""
}

// makeStatic is the recipe of the Makefile's static target, $(GO) as go.
func makeStatic(t *testing.T, makefile string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(makefile))
	for sc.Scan() {
		if sc.Text() == "static:" && sc.Scan() {
			// $(GO) as go, and $$ as the shell that runs the recipe sees it.
			return strings.NewReplacer("$(GO)", "go", "$$", "$").Replace(strings.TrimSpace(sc.Text()))
		}
	}
	t.Fatal("Makefile has no static target")
	return ""
}

// buildFlags is a go build command's environment and flags, without its
// output path (-o X), which differs between the image and make static.
func buildFlags(cmd string) []string {
	f := strings.Fields(cmd)
	var out []string
	for i := 0; i < len(f); i++ {
		if f[i] == "-o" {
			i++
			continue
		}
		out = append(out, f[i])
	}
	return out
}

func TestMakeStaticBuildsWhatTheDockerfileBuilds(t *testing.T) {
	dir := root(t)
	image := dockerfileBuild(t, readFile(t, filepath.Join(dir, "Dockerfile")))
	static := makeStatic(t, readFile(t, filepath.Join(dir, "Makefile")))
	if !slices.Equal(buildFlags(image), buildFlags(static)) {
		t.Errorf("the image and make static build differently:\n  Dockerfile: %s\n  Makefile:   %s", image, static)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-tags pebblegozstd", "./cmd/blockhaul"} {
		if !strings.Contains(image, want) {
			t.Errorf("the Dockerfile's build lacks %q: %s", want, image)
		}
	}
}

// TestStaticBinaryRunsWithoutDynamicDependencies builds the binary with the
// Dockerfile's own command, checks its ELF file has no interpreter and no
// shared libraries, and runs it: --help, version (built without cgo, with
// Pebble's pure-Go zstd), then a fetch of synthetic blocks
// into a staging store (Pebble and zstd in pure Go) and a deep verify.
func TestStaticBinaryRunsWithoutDynamicDependencies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is a Linux ELF file")
	}
	dir := root(t)
	cmdline := dockerfileBuild(t, readFile(t, filepath.Join(dir, "Dockerfile")))
	bin := filepath.Join(t.TempDir(), "blockhaul")
	var env, args []string
	for _, f := range buildFlags(cmdline) {
		if len(args) == 0 && strings.Contains(f, "=") && !strings.HasPrefix(f, "-") {
			env = append(env, f)
			continue
		}
		args = append(args, f)
	}
	if len(args) < 2 || args[0] != "go" || args[1] != "build" {
		t.Fatalf("unexpected build command %q", cmdline)
	}
	// -ldflags="-s -w -X …=${COMMIT}" is one argument to the shell that
	// runs it, which expands the build argument COMMIT.
	const commit = "0123456789abcdef0123456789abcdef01234567"
	args = rejoinQuoted(args)
	for i := range args {
		args[i] = os.Expand(args[i], func(v string) string {
			if v == "COMMIT" {
				return commit
			}
			t.Fatalf("the Dockerfile's build uses ${%s}, which no build argument sets", v)
			return ""
		})
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goBin, append([]string{"build", "-o", bin}, args[2:]...)...)
	build.Dir = dir
	// As in the image's build: no git (its context has no .git), so Go
	// stamps no commit and the one given is what version shows.
	build.Env = append(os.Environ(), env...)
	build.Env = append(build.Env, "PATH="+filepath.Dir(goBin))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: it is dynamically linked", bin)
		}
		if p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a dynamic section", bin)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v (%v)", bin, libs, err)
	}
	if ldd, err := exec.LookPath("ldd"); err == nil {
		out, _ := exec.Command(ldd, bin).CombinedOutput() // ldd exits 1 for a static file
		if !bytes.Contains(out, []byte("not a dynamic executable")) && !bytes.Contains(out, []byte("statically linked")) {
			t.Errorf("ldd %s: %s", bin, out)
		}
	}

	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("Usage:")) || !bytes.Contains(out, []byte("blockhaul export")) {
		t.Errorf("%s --help: %v\n%s", bin, err, out)
	}
	out, err = exec.Command(bin, "version").CombinedOutput()
	// Before: "commit: unknown" in every image docker built.
	for _, want := range []string{"build tags: pebblegozstd", "cgo:        0 (Pebble's zstd: pure Go)", "commit:     " + commit + " (given to the build)"} {
		if err != nil || !bytes.Contains(out, []byte(want)) {
			t.Errorf("%s version: %v, lacks %q:\n%s", bin, err, want, out)
		}
	}
	staging := filepath.Join(t.TempDir(), "staging")
	for _, args := range [][]string{
		{"fetch", "--staging", staging, "--from", "1", "--to", "200", "--log-format", "json"},
		{"verify", "--staging", staging, "--deep"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + t.TempDir()} // as FROM scratch: no PATH, no BLOCKHAUL_*
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
		}
	}
}

// rejoinQuoted joins shell words split inside quotes (-ldflags="-s -w")
// and drops the quotes.
func rejoinQuoted(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		for _, q := range []string{"'", `"`} {
			if strings.Count(a, q)%2 == 1 {
				for i+1 < len(args) {
					i++
					a += " " + args[i]
					if strings.Contains(args[i], q) {
						break
					}
				}
			}
			a = strings.ReplaceAll(a, q, "")
		}
		out = append(out, a)
	}
	return out
}

// TestImageScriptGivesTheCommit runs make image's script where a Docker
// daemon answers (a docker on PATH that records what it is asked): the
// build is given the checkout's commit as the build argument COMMIT, which
// the Dockerfile's build links into the binary (before: none, and the
// image's version said "commit: unknown").
func TestImageScriptGivesTheCommit(t *testing.T) {
	dir := root(t)
	bin := t.TempDir()
	record := filepath.Join(t.TempDir(), "docker-args")
	fake := "#!/bin/sh\ncase $1 in info) exit 0;; build) printf '%s\\n' \"$@\" > " + record + ";; *) exit 1;; esac\n"
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	script := exec.Command("bash", "scripts/image.sh")
	script.Dir = dir
	script.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "IMAGE=blockhaul:test")
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	dirty, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "COMMIT=" + strings.TrimSpace(string(head))
	if len(bytes.TrimSpace(dirty)) > 0 {
		want += "+modified"
	}
	args := strings.Split(strings.TrimSpace(readFile(t, record)), "\n")
	if i := slices.Index(args, "--build-arg"); i < 0 || i+1 == len(args) || args[i+1] != want {
		t.Errorf("make image ran docker %q, want --build-arg %s", args, want)
	}
	if !slices.Contains(args, "blockhaul:test") {
		t.Errorf("make image ran docker %q, want the image blockhaul:test", args)
	}
}

// TestDockerfilePathsAreInTheBuildContext checks every local path the
// Dockerfile copies, and every file the build compiles, exists and is not
// left out of the build context by .dockerignore; that the base image's Go
// is the one go.mod asks for; and that the entrypoint is the binary copied.
func TestDockerfilePathsAreInTheBuildContext(t *testing.T) {
	dir := root(t)
	dockerfile := readFile(t, filepath.Join(dir, "Dockerfile"))
	ignore := dockerignore(t, filepath.Join(dir, ".dockerignore"))

	var sources []string
	for _, l := range strings.Split(dockerfile, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "COPY" || strings.HasPrefix(f[1], "--from=") {
			continue
		}
		sources = append(sources, f[1:len(f)-1]...)
	}
	if !slices.Contains(sources, "go.mod") || !slices.Contains(sources, "go.sum") || !slices.Contains(sources, ".") {
		t.Errorf("the Dockerfile copies %v; want go.mod, go.sum and the context", sources)
	}
	for _, s := range sources {
		if _, err := os.Stat(filepath.Join(dir, s)); err != nil {
			t.Errorf("the Dockerfile copies %s: %v", s, err)
		}
		if s != "." && ignored(ignore, s) {
			t.Errorf("the Dockerfile copies %s, which .dockerignore leaves out", s)
		}
	}

	// Every file of every package of this module the binary is built from.
	list := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`, "./cmd/blockhaul")
	list.Dir = dir
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		rel, err := filepath.Rel(dir, f[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range f[1:] {
			p := filepath.ToSlash(filepath.Join(rel, name))
			files++
			if ignored(ignore, p) {
				t.Errorf(".dockerignore leaves out %s, which the build compiles", p)
			}
		}
	}
	if files < 10 {
		t.Errorf("go list found %d source files of the binary", files)
	}

	from := regexp.MustCompile(`(?m)^FROM golang:(\S+)`).FindStringSubmatch(dockerfile)
	goVersion := regexp.MustCompile(`(?m)^go (\S+)`).FindStringSubmatch(readFile(t, filepath.Join(dir, "go.mod")))
	if from == nil || goVersion == nil || !strings.HasPrefix(from[1], goVersion[1]) {
		t.Errorf("build image golang:%v, go.mod asks for go %v", from, goVersion)
	}
	copied := regexp.MustCompile(`(?m)^COPY --from=build /out/blockhaul (\S+)`).FindStringSubmatch(dockerfile)
	entry := regexp.MustCompile(`(?m)^ENTRYPOINT \["([^"]+)"\]`).FindStringSubmatch(dockerfile)
	if copied == nil || entry == nil || copied[1] != entry[1] {
		t.Errorf("the entrypoint %v is not the binary copied to %v", entry, copied)
	}
	if !strings.Contains(dockerfile, "-o /out/blockhaul") {
		t.Error("the build stage does not write /out/blockhaul, which the final stage copies")
	}
}

// dockerignore reads the patterns of a .dockerignore file.
func dockerignore(t *testing.T, path string) []string {
	t.Helper()
	var pats []string
	for _, l := range strings.Split(readFile(t, path), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") {
			t.Fatalf(".dockerignore exception %q: this check does not read exceptions", l)
		}
		pats = append(pats, strings.TrimPrefix(filepath.Clean(l), "/"))
	}
	return pats
}

// ignored reports whether a pattern excludes path (slash-separated,
// relative to the context) or a directory above it, as Docker matches:
// filepath.Match per path, "**/" matching any number of directories.
func ignored(pats []string, path string) bool {
	for _, pat := range pats {
		for p := path; p != "." && p != "/" && p != ""; p = filepath.Dir(p) {
			if match(pat, p) {
				return true
			}
		}
	}
	return false
}

func match(pat, p string) bool {
	if rest, ok := strings.CutPrefix(pat, "**/"); ok {
		for s := p; ; {
			if match(rest, s) {
				return true
			}
			i := strings.IndexByte(s, '/')
			if i < 0 {
				return false
			}
			s = s[i+1:]
		}
	}
	ok, _ := filepath.Match(pat, p)
	return ok
}

func TestDockerignoreMatching(t *testing.T) {
	pats := []string{".git", "bin", "blockhaul", "bench/results", "**/*.test"}
	for p, want := range map[string]bool{
		"blockhaul":               true,
		"cmd/blockhaul/main.go":   false,
		"bin/blockhaul":           true,
		"bench/results/latest.md": true,
		"bench/bench.go":          false,
		"export/export.test":      true,
		"a/b/c.test":              true,
		"go.mod":                  false,
		".git/HEAD":               true,
	} {
		if got := ignored(pats, p); got != want {
			t.Errorf("ignored(%q) = %v, want %v", p, got, want)
		}
	}
}
