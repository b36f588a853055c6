package staging

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// NotStoreError reports a --staging path that holds something other than a
// staging store: a file, or a directory of other files, among which Open
// would otherwise write Pebble's.
type NotStoreError struct {
	Dir   string
	Entry string // one of the foreign entries, or "" when Dir is a file
}

func (e *NotStoreError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("staging: %s is a file, not a staging directory", e.Dir)
	}
	return fmt.Sprintf("staging: %s is not empty and holds no staging store (it has %s): give a new or empty directory", e.Dir, e.Entry)
}

// CheckDir reports whether dir can be opened as a store without writing
// into something else: it does not exist yet, is empty, or already holds a
// Pebble store (a MANIFEST). A directory holding only what a Pebble open
// interrupted before its MANIFEST leaves behind is accepted too. Anything
// else is a *NotStoreError. CheckDir only reads.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	if !fi.IsDir() {
		return &NotStoreError{Dir: dir}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	foreign := ""
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "MANIFEST-") {
			return nil
		}
		if foreign == "" && !pebbleLeftover(n) {
			foreign = n
		}
	}
	if foreign != "" {
		return &NotStoreError{Dir: dir, Entry: foreign}
	}
	return nil
}

// pebbleLeftover reports whether name is one of the files Pebble, or Open
// (its PID file), writes before Pebble's first MANIFEST.
func pebbleLeftover(n string) bool {
	return n == "LOCK" || n == pidFile || strings.HasPrefix(n, "OPTIONS-") || strings.HasPrefix(n, "marker.") || strings.HasSuffix(n, ".log")
}
