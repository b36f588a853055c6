package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/loader"
)

// validateNodeHome checks --node-home against the other flags: one source
// at a time, a family that has the kind, a command that ends.
func (c *Config) validateNodeHome(fam *family.Family) []*FieldError {
	if c.NodeHome == "" {
		return nil
	}
	var fs []*FieldError
	bad := func(format string, args ...any) {
		fs = append(fs, &FieldError{Flag: "node-home", Env: EnvName("node-home"), Msg: fmt.Sprintf(format, args...)})
	}
	if len(c.RPC) > 0 {
		bad("--node-home and --rpc name two sources; give one")
	}
	if fam != nil && !fam.Has(family.SourceNodeHome) {
		_, err := fam.Source(family.SourceNodeHome, family.SourceOptions{}) // names the kinds it has
		bad("%v", err)
	}
	if c.Command == CmdFollow {
		bad("follow waits for new blocks, and a stopped node's home gets none: fetch or run its range")
	}
	return fs
}

// openNodeHome opens --node-home (or --archive: sourceFirst) before the
// staging store is opened and
// makes it the job's source (cfg.Source; the caller closes it). What the
// home cannot give is refused before the store exists or anything is
// staged: not a node home, a backend the source does not read, databases a
// running node holds (exit 2), a database that will not open (exit 4); and,
// for a new staging store, a range the home cannot serve: pruned, results
// discarded, above its latest height (exit 2). A store that holds heights
// already is asked which it lacks first, and only those are checked
// (checkRunSource, loader.Fetch).
func openNodeHome(ctx context.Context, cfg *Job) (loader.Source, error) {
	fam := cfg.Family
	kind, opts := cfg.sourceFirst()
	src, err := fam.Source(kind, opts)
	if err != nil {
		return nil, err
	}
	if newStore(cfg.Staging) {
		to := cfg.To
		if !cfg.ToSet {
			if to, err = src.Tip(ctx); err != nil {
				closeSource(src)
				return nil, err
			}
		}
		if err := checkRange(ctx, src, cfg.From, max(to, cfg.From)); err != nil {
			closeSource(src)
			return nil, err
		}
	}
	return src, nil
}

// newStore reports whether dir holds no staging store yet: it does not
// exist or is empty.
func newStore(dir string) bool {
	ents, err := os.ReadDir(dir)
	return errors.Is(err, os.ErrNotExist) || err == nil && len(ents) == 0
}
