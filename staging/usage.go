package staging

import (
	"errors"
	iofs "io/fs"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Usage is what the files under a directory take.
type Usage struct {
	// Bytes is the sum of the files' sizes: the records, indexes and logs
	// themselves.
	Bytes uint64 `json:"bytes"`
	// Allocated is the space the filesystem holds for them, what du
	// reports: Pebble preallocates each write-ahead log (a log of a few
	// bytes can hold 18 MB), and a filesystem rounds every file up to its
	// blocks. Where the platform does not say, it is Bytes.
	// (staging.Open turns the logs' preallocation off.)
	Allocated uint64 `json:"allocated"`
	// WAL is the part of Allocated in write-ahead logs (*.log).
	WAL uint64 `json:"wal"`
}

// DirUsage is what the files under dir take, subdirectories included.
func DirUsage(dir string) (Usage, error) {
	return dirUsage(vfs.Default, dir)
}

// DiskUsage is what the store's files take: every file of its directory.
// Pebble's own metrics leave most of the blob files out (and all of them in
// a read-only store), where the records are.
func (s *Store) DiskUsage() Usage {
	u, err := dirUsage(s.fs, s.dir)
	if err != nil {
		n := s.db.Metrics().DiskSpaceUsage()
		return Usage{Bytes: n, Allocated: n}
	}
	return u
}

func dirUsage(fs vfs.FS, dir string) (Usage, error) {
	var u Usage
	names, err := fs.List(dir)
	if err != nil {
		return u, err
	}
	for _, name := range names {
		p := fs.PathJoin(dir, name)
		fi, err := fs.Stat(p)
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				// Removed since the listing: Pebble deletes obsolete files
				// in the background (its stat error is wrapped, which
				// os.IsNotExist does not look through).
				continue
			}
			return u, err
		}
		switch {
		case fi.IsDir():
			sub, err := dirUsage(fs, p)
			if errors.Is(err, iofs.ErrNotExist) {
				continue
			}
			if err != nil {
				return u, err
			}
			u.Bytes += sub.Bytes
			u.Allocated += sub.Allocated
			u.WAL += sub.WAL
		case fi.Mode().IsRegular():
			n := uint64(fi.Size())
			u.Bytes += n
			if a, ok := allocated(fi); ok {
				n = a
			}
			u.Allocated += n
			if strings.HasSuffix(name, ".log") {
				u.WAL += n
			}
		}
	}
	return u, nil
}
