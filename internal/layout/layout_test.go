package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/blockhaul/blockhaul/"

// TestNoImportRunsUpward: every import between the module's packages
// stays in its room or goes down a floor. Test files are not held to it: a
// test may drive its package from above (nodehome's tests stage and export
// what it reads), as the top of the building does.
func TestNoImportRunsUpward(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	fset := token.NewFileSet()
	files, edges := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		from := Room(pkg)
		if from == "" {
			t.Errorf("%s: folder %s has no floor in layout.Floors", path, pkg)
			return nil
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil || !strings.HasPrefix(p, module) {
				continue
			}
			edges++
			target := strings.TrimPrefix(p, module)
			to := Room(target)
			switch {
			case to == "":
				t.Errorf("%s imports %s, which has no floor in layout.Floors", path, target)
			case to != from && Floors[to] >= Floors[from]:
				t.Errorf("%s (%s, floor %d) imports %s (%s, floor %d): upward or sideways", path, from, Floors[from], target, to, Floors[to])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || edges < 50 {
		t.Fatalf("read %d files with %d imports inside the module: not the whole tree", files, edges)
	}
	t.Logf("%d files, %d imports inside the module", files, edges)
}

func TestRoom(t *testing.T) {
	for pkg, want := range map[string]string{
		"chain":               "chain",
		"chain/cometbft":      "chain",
		"bench":               "bench",
		"bench/results":       "bench",
		"bench/cmd/bench":     "bench",
		"internal/pgtest":     "internal",
		"chainx":              "",
		"cmd/blockhaul":       "cmd",
		"staging/stagingtest": "staging",
	} {
		if got := Room(pkg); got != want {
			t.Errorf("Room(%q) = %q, want %q", pkg, got, want)
		}
	}
}

// TestDocsAreTheFloors: docs/layout.md's floor table is Floors, and every
// package under internal/ is named on that page, so the page stays true to
// the tree the import test enforces.
func TestDocsAreTheFloors(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(doc)
	_, table, ok := strings.Cut(page, "| floor | rooms |")
	if !ok {
		t.Fatal("docs/layout.md has no floor table")
	}
	documented := map[string]int{}
	for _, line := range strings.Split(table, "\n")[2:] {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| ") || len(cells) < 3 {
			break
		}
		floor, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			t.Fatalf("floor table row %q: %v", line, err)
		}
		rooms := strings.Split(cells[2], "`")
		for i := 1; i < len(rooms); i += 2 {
			documented[strings.TrimSuffix(rooms[i], "/")] = floor
		}
	}
	for room, floor := range Floors {
		if got, ok := documented[room]; !ok || got != floor {
			t.Errorf("room %s: floor %d in Floors, %d (documented %v) in docs/layout.md", room, floor, got, ok)
		}
	}
	for room := range documented {
		if _, ok := Floors[room]; !ok {
			t.Errorf("docs/layout.md places room %s, which Floors does not", room)
		}
	}
	dirs, err := os.ReadDir(filepath.Join(root, "internal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !strings.Contains(page, "`"+d.Name()+"`") {
			t.Errorf("internal/%s is not named in docs/layout.md", d.Name())
		}
	}
}
