package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteFiles writes r into dir as <date>-<host>.json and .md, the plots as
// <date>-<host>-throughput-<density>.svg and <date>-<host>-scaling.svg, and
// the same again as latest.json, latest.md and latest-*.svg for docs/benchmarks.md
// to link. It returns the paths written.
func WriteFiles(dir string, r Result) ([]string, error) {
	return writeFiles(dir, r, []string{filesPrefix(r), "latest"})
}

// WriteDatedFiles writes r as WriteFiles does, but only under its own
// <date>-<host> names, leaving latest.* alone: for a run of some sections,
// which must not replace the latest whole run.
func WriteDatedFiles(dir string, r Result) ([]string, error) {
	return writeFiles(dir, r, []string{filesPrefix(r)})
}

func writeFiles(dir string, r Result, prefixes []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: results directory: %w", err)
	}
	// A previous run's plots must not pass for this run's.
	for _, prefix := range prefixes {
		old, _ := filepath.Glob(filepath.Join(dir, prefix+"-*.svg"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				return nil, fmt.Errorf("bench: %w", err)
			}
		}
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bench: encode result: %w", err)
	}
	plots := map[string][]byte{}
	for _, d := range r.Densities {
		plots["throughput-"+d.Name+".svg"] = throughputPlot(d).svg()
	}
	if len(r.Processes) > 0 {
		plots["scaling.svg"] = scalingPlot(r.Processes).svg()
	}
	var written []string
	write := func(name string, data []byte) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		written = append(written, p)
		return nil
	}
	for _, prefix := range prefixes {
		if err := write(prefix+".json", append(js, '\n')); err != nil {
			return written, err
		}
		if err := write(prefix+".md", []byte(Markdown(r, prefix+"-"))); err != nil {
			return written, err
		}
		for name, svg := range plots {
			if err := write(prefix+"-"+name, svg); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// filesPrefix is <date>-<host>, the host reduced to characters that are safe
// in a file name.
func filesPrefix(r Result) string {
	host := strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
			return c
		}
		return '_'
	}, r.Machine.Host)
	if host == "" {
		host = "unknown"
	}
	return r.Date.UTC().Format("2006-01-02") + "-" + host
}
