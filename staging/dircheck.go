package staging

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
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
// interrupted before its MANIFEST leaves behind is accepted too. A store
// whose MANIFEST is gone is a *CorruptStoreError (repair rebuilds it);
// anything else is a *NotStoreError. CheckDir only reads.
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
	if err := manifestGone(dir, entries); err != nil {
		return err
	}
	if foreign != "" {
		return &NotStoreError{Dir: dir, Entry: foreign}
	}
	return nil
}

// HasStore reports whether dir holds a store (its MANIFEST): not an empty
// directory, nor one an open that never finished left.
func HasStore(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "MANIFEST-") {
			return true
		}
	}
	return false
}

// ErrManifestGone is the cause of the *CorruptStoreError of a store whose
// MANIFEST is gone.
var ErrManifestGone = errors.New("its MANIFEST is gone")

// checkManifest refuses a directory that holds a store's files without its
// MANIFEST (see manifestGone); a missing directory, or any other, passes.
func checkManifest(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // Open reports what is wrong with dir itself
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "MANIFEST-") {
			return nil
		}
	}
	return manifestGone(dir, entries)
}

// manifestGone returns a *CorruptStoreError when entries (of a directory
// without a MANIFEST) are a store's: a file only a store that had its
// MANIFEST holds (its tables, blob files, manifest marker, or the ledger
// of its records). Pebble's files before its first MANIFEST are not.
func manifestGone(dir string, entries []fs.DirEntry) error {
	// The file named is the most telling one: records before markers.
	rank := func(n string) int {
		switch {
		case strings.HasSuffix(n, ".blob"):
			return 4
		case strings.HasSuffix(n, ".sst"):
			return 3
		case strings.HasPrefix(n, "marker.manifest."):
			return 2
		case n == ledgerFile:
			return 1
		}
		return 0
	}
	best := ""
	for _, e := range entries {
		if n := e.Name(); rank(n) > rank(best) {
			best = n
		}
	}
	if best == "" {
		return nil
	}
	return &CorruptStoreError{Dir: dir, Err: fmt.Errorf("%w (it has %s): blockhaul repair --staging %s rebuilds it from its files", ErrManifestGone, best, dir)}
}

// NoStoreError is a store opened to be read where there is none: a
// directory that is empty, or holds only what an open that never finished
// left (a job refused before it staged anything).
type NoStoreError struct{ Dir string }

func (e *NoStoreError) Error() string {
	return fmt.Sprintf("staging: %s holds no staging store: nothing staged there", e.Dir)
}

// mkdirAll makes dir and its missing parents, and returns the topmost
// directory it made ("" when dir existed), for an open that fails to
// remove.
func mkdirAll(fs vfs.FS, dir string) (string, error) {
	made := toMake(fs, dir)
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return made, nil
}

// ToMake is the topmost directory an Open of dir would make: dir or one of
// its parents, "" when dir exists.
func ToMake(dir string) string { return toMake(vfs.Default, dir) }

func toMake(fs vfs.FS, dir string) string {
	made := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			break // MkdirAll says what is wrong
		}
		made = d
		if filepath.Dir(d) == d {
			break
		}
	}
	return made
}

// RemoveUnused removes made (ToMake's answer before a job opened dir) when
// the store in dir holds nothing: no record staged and no checkpoint
// mirrored, what a job refused before it staged anything leaves. It
// reports whether it removed it; a store in use, or one it cannot read,
// is kept.
func RemoveUnused(dir, made string) (bool, error) {
	if made == "" {
		return false, nil
	}
	if _, err := os.Stat(made); errors.Is(err, os.ErrNotExist) {
		return false, nil // refused before it made the directory: nothing to remove
	}
	s, err := Open(dir, Options{ReadOnly: true})
	var ns *NoStoreError
	if errors.As(err, &ns) {
		return true, os.RemoveAll(made)
	}
	if err != nil {
		return false, err
	}
	_, _, staged, err := s.Bounds()
	var mirrors map[string]Checkpoint
	if err == nil {
		mirrors, err = s.Mirrors()
	}
	s.Close()
	if err != nil || staged || len(mirrors) > 0 {
		return false, err
	}
	return true, os.RemoveAll(made)
}

// IsStoreFile reports whether name is one a store's directory may hold
// (Pebble's files, and blockhaul's own beside them).
func IsStoreFile(n string) bool {
	return pebbleLeftover(n) || strings.HasPrefix(n, "MANIFEST-") || strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".blob") || n == ledgerFile
}

// pebbleLeftover reports whether name is one of the files Pebble, or Open
// (its PID file), writes before Pebble's first MANIFEST.
func pebbleLeftover(n string) bool {
	return n == "LOCK" || n == pidFile || strings.HasPrefix(n, "OPTIONS-") || strings.HasPrefix(n, "marker.") || strings.HasSuffix(n, ".log")
}
