package staging

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Size is a store's size, one definition for every command that prints
// one (status, the summaries, prune, estimate).
type Size struct {
	// Records is what the staged records take as stored (each compressed
	// record with its header): what the store holds, and what grows with
	// every block staged.
	Records uint64 `json:"records"`
	// Blocks is the number of records counted in Records.
	Blocks uint64 `json:"blocks"`
	// Disk is what the filesystem holds for the store's directory, as du
	// counts it: the records, Pebble's tables and indexes, and the parts
	// below.
	Disk uint64 `json:"disk"`
	// WAL is the part of Disk in write-ahead logs: the live one and those
	// Pebble keeps to reuse.
	WAL uint64 `json:"wal"`
	// AwaitingDeletion is the part of Disk in files Pebble has replaced
	// (after a compaction or a prune) and not deleted yet: obsolete
	// tables and blob files, and those still read by an open iterator. A
	// read-only open deletes nothing, so it reports none; the next job
	// deletes what a stopped one left.
	AwaitingDeletion uint64 `json:"awaiting_deletion"`
}

// MB is bytes in megabytes (10^6), as every size is printed.
func MB(n uint64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// String is the size as every command prints it: the disk, the parts of
// it that do not grow with the store, then the records (which the disk
// holds, in the log until Pebble flushes them).
func (z Size) String() string {
	s := fmt.Sprintf("%s on disk, of it %s write-ahead log", MB(z.Disk), MB(z.WAL))
	if z.AwaitingDeletion > 0 {
		s += " and " + MB(z.AwaitingDeletion) + " awaiting deletion"
	}
	return s + "; " + MB(z.Records) + " of records"
}

// HeldString is a directory's usage as the commands print it when another
// process holds the store (the records are counted only with it open).
func (u Usage) HeldString() string {
	return fmt.Sprintf("%s on disk, of it %s write-ahead log", MB(u.Allocated), MB(u.WAL))
}

// Size measures the store: its records (every key of the records'
// keyspace, their values' lengths read from the index of the blob files,
// not the records themselves) and its directory.
func (s *Store) Size() (Size, error) {
	var z Size
	n, b, err := s.RecordBytes(0, ^uint64(0))
	if err != nil {
		return z, err
	}
	z.Blocks, z.Records = n, b
	u, err := dirUsage(s.fs, s.dir)
	if err != nil {
		return z, fmt.Errorf("staging: size of %s: %w", s.dir, err)
	}
	z.Disk, z.WAL = u.Allocated, u.WAL
	if !s.opts.ReadOnly {
		m := s.db.Metrics()
		z.AwaitingDeletion = m.Table.ObsoleteSize + m.Table.ZombieSize + m.BlobFiles.ObsoleteSize + m.BlobFiles.ZombieSize
		z.AwaitingDeletion = min(z.AwaitingDeletion, z.Disk-z.WAL)
	}
	return z, nil
}

// RecordBytes counts the records staged at heights [from, to] and what
// they take as stored.
func (s *Store) RecordBytes(from, to uint64) (n, bytes uint64, err error) {
	if err := s.faults.broken(); err != nil {
		return 0, 0, err
	}
	defer s.contain("measure records", false, &err)
	lo, hi := boundsFor(prefixBlock, from, to)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, 0, fmt.Errorf("staging: measure records: %w", s.corruptErr(err, nil))
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		lv := it.LazyValue()
		n, bytes = n+1, bytes+uint64(lv.Len())
	}
	if err := it.Error(); err != nil {
		return 0, 0, fmt.Errorf("staging: measure records: %w", s.corruptErr(err, nil))
	}
	return n, bytes, nil
}

// noPreallocFS is the store's filesystem without preallocation: Pebble
// preallocates every write-ahead log to 110% of the memtable (18 MB by
// default), so a store holding one block took 18 MB, and a store's size on
// disk jumped by that much with each new log. Logs are appended in
// batches of a few megabytes; the filesystem allocates as they grow.
type noPreallocFS struct{ vfs.FS }

func (fs noPreallocFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	return noPreallocFile{f}, nil
}

func (fs noPreallocFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return noPreallocFile{f}, nil
}

type noPreallocFile struct{ vfs.File }

func (noPreallocFile) Preallocate(offset, length int64) error { return nil }
