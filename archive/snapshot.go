package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/blockhaul/blockhaul/internal/fault"
	"github.com/blockhaul/blockhaul/staging"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"
)

// NotEmptyError is a restore into a directory that holds files already:
// nothing there is replaced.
type NotEmptyError struct{ Dir string }

func (e *NotEmptyError) Error() string {
	return fmt.Sprintf("archive: restore: %s is not empty: restore into a new directory", e.Dir)
}

// Fault marks the error as a configuration error (exit 2).
func (e *NotEmptyError) Fault() fault.Class { return fault.Config }

// ManifestName is the object a snapshot writes last: the list of its files
// with their sizes and SHA-256. A destination without it holds no complete
// snapshot.
const ManifestName = "blockhaul-snapshot.json"

// Manifest describes one snapshot.
type Manifest struct {
	Format  int            `json:"format"` // 1
	Created time.Time      `json:"created"`
	Family  string         `json:"family"`
	ChainID string         `json:"chain_id"`
	Staged  []Gap          `json:"staged"` // the staged ranges at the snapshot
	Files   []ManifestFile `json:"files"`
}

// ManifestFile is one file of a snapshot.
type ManifestFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// RedactURL returns a destination fit for logs and reports: a URL's
// password and credential-like query values replaced.
func RedactURL(dest string) string {
	u, err := url.Parse(dest)
	if err != nil || u.Scheme == "" {
		if strings.Contains(dest, "://") {
			return "<unparsable URL>"
		}
		return dest
	}
	if u.User != nil {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	for k := range q {
		lk := strings.ToLower(k)
		for _, w := range []string{"secret", "key", "token", "password", "credential", "signature", "sig"} {
			if strings.Contains(lk, w) {
				q.Set(k, "xxxxx")
			}
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// OpenBucket opens a snapshot destination (create: a directory, plain or
// file://, is made if it is missing) or source (a missing directory is an
// error, not an empty snapshot made on the spot): a gocloud.dev/blob URL
// (file:///dir; other schemes when their driver is linked in) or a plain
// directory path.
func OpenBucket(ctx context.Context, dest string, create bool) (*blob.Bucket, error) {
	if !strings.Contains(dest, "://") {
		abs, err := filepath.Abs(dest)
		if err != nil {
			return nil, err
		}
		return fileblob.OpenBucket(abs, &fileblob.Options{CreateDir: create})
	}
	if u, err := url.Parse(dest); err == nil && create && strings.EqualFold(u.Scheme, "file") {
		if q := u.Query(); q.Get("create_dir") == "" {
			q.Set("create_dir", "true")
			u.RawQuery = q.Encode()
			dest = u.String()
		}
	}
	return blob.OpenBucket(ctx, dest)
}

// ForeignDestError is a snapshot destination holding an object that
// neither a snapshot nor a staging store writes: nothing is written there.
type ForeignDestError struct{ Dest, Object string }

func (e *ForeignDestError) Error() string {
	return fmt.Sprintf("archive: snapshot: %s is not empty and holds no snapshot (it has %s): give a new or empty destination, or one holding an earlier snapshot to replace", e.Dest, e.Object)
}

// SnapshotReport is what Snapshot wrote.
type SnapshotReport struct {
	Dest   string `json:"dest"`
	Files  int    `json:"files"` // the snapshot's files
	Bytes  int64  `json:"bytes"`
	Staged []Gap  `json:"staged"`
	// Replaced tells whether DEST held an earlier snapshot; Unchanged
	// counts its files the new one has as they were (not uploaded again),
	// Removed the files it or an interrupted snapshot left that the new
	// one does not have (deleted once its manifest was written).
	Replaced  bool `json:"replaced"`
	Unchanged int  `json:"unchanged"`
	Removed   int  `json:"removed"`
	// TakenBy is the PID of the process that took the checkpoint when
	// another process held the store (SnapshotHeld); 0: this one.
	TakenBy  int           `json:"taken_by,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Snapshot copies a consistent state of store into bucket: a Pebble
// checkpoint taken beside the store (the store stays writable while it is
// taken), each file uploaded with its SHA-256 recorded, the manifest last.
// An earlier snapshot's manifest in the bucket is replaced only once every
// file of the new one is there.
func Snapshot(ctx context.Context, store *staging.Store, bucket *blob.Bucket, dest string) (*SnapshotReport, error) {
	return snapshot(ctx, store.Dir(), bucket, dest, store.Checkpoint)
}

// SnapshotHeld is Snapshot of the store in dir while another process holds
// it (staging.Open refused with a *staging.InUseError): that process is
// asked, through the directory, to take the checkpoint
// (staging.RequestCheckpoint), and has wait to answer.
func SnapshotHeld(ctx context.Context, dir string, bucket *blob.Bucket, dest string, wait time.Duration) (*SnapshotReport, error) {
	pid := 0
	r, err := snapshot(ctx, dir, bucket, dest, func(cp string) (err error) {
		pid, err = staging.RequestCheckpoint(ctx, dir, cp, wait, 50*time.Millisecond)
		return err
	})
	if r != nil {
		r.TakenBy = pid
	}
	return r, err
}

// destination is what bucket holds before a snapshot is written into it:
// every object, and the earlier snapshot's manifest (nil: none). An
// object that neither a snapshot nor a store writes (a snapshot copies a
// store's files, flat) is a *ForeignDestError.
func destination(ctx context.Context, bucket *blob.Bucket, dest string) (map[string]bool, *Manifest, error) {
	objs := map[string]bool{}
	it := bucket.List(nil)
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("archive: snapshot: list %s: %w", dest, err)
		}
		if o.IsDir || strings.Contains(o.Key, "/") || o.Key != ManifestName && !staging.IsStoreFile(o.Key) {
			return nil, nil, &ForeignDestError{Dest: dest, Object: o.Key}
		}
		objs[o.Key] = true
	}
	if !objs[ManifestName] {
		return objs, nil, nil
	}
	mb, err := bucket.ReadAll(ctx, ManifestName)
	if err != nil {
		return nil, nil, fmt.Errorf("archive: snapshot: read the earlier snapshot's manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil || m.Format != 1 {
		return nil, nil, &ForeignDestError{Dest: dest, Object: ManifestName + " in no format of blockhaul's"}
	}
	return objs, &m, nil
}

// snapshot has checkpoint write a checkpoint of the store in dir into a
// new directory beside it, then uploads it. An earlier snapshot at dest
// stays whole until the new one needs to overwrite one of its files with
// other bytes (its manifest is deleted first), and whatever the new one
// does not list is deleted once its manifest is written.
func snapshot(ctx context.Context, dir string, bucket *blob.Bucket, dest string, checkpoint func(string) error) (*SnapshotReport, error) {
	start := time.Now()
	objs, old, err := destination(ctx, bucket, dest)
	if err != nil {
		return nil, err
	}
	oldFiles := map[string]ManifestFile{}
	if old != nil {
		for _, f := range old.Files {
			oldFiles[f.Name] = f
		}
	}
	m := Manifest{Format: 1, Created: time.Now().UTC(), Staged: []Gap{}}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), ".blockhaul-snapshot-")
	if err != nil {
		return nil, fmt.Errorf("archive: snapshot: %w", err)
	}
	defer os.RemoveAll(tmp)
	cp := filepath.Join(tmp, "store")
	if err := checkpoint(cp); err != nil {
		return nil, err
	}
	if err := describeCheckpoint(cp, &m); err != nil {
		return nil, err
	}
	r := &SnapshotReport{Dest: dest, Staged: m.Staged, Replaced: old != nil}
	if err := putFiles(ctx, bucket, cp, oldFiles, old != nil, &m, r); err != nil {
		return nil, err
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := bucket.WriteAll(ctx, ManifestName, mb, nil); err != nil {
		return nil, fmt.Errorf("archive: snapshot: write manifest: %w", err)
	}
	if err := removeStale(ctx, bucket, objs, m, r); err != nil {
		return r, err
	}
	r.Duration = time.Since(start)
	return r, nil
}

// putFiles uploads the files of the checkpoint at cp to the bucket, listing
// them in m and counting them in r; a file the earlier snapshot (oldFiles)
// holds the same is kept as it is. oldWhole: the earlier snapshot's
// manifest is there, deleted before its first file is replaced.
func putFiles(ctx context.Context, bucket *blob.Bucket, cp string, oldFiles map[string]ManifestFile, oldWhole bool, m *Manifest, r *SnapshotReport) error {
	return filepath.WalkDir(cp, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(cp, path)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if was, ok := oldFiles[name]; ok {
			size, sum, err := fileSum(path)
			if err != nil {
				return fmt.Errorf("archive: snapshot: %w", err)
			}
			if size == was.Size && sum == was.SHA256 {
				m.Files = append(m.Files, was)
				r.Files++
				r.Bytes += size
				r.Unchanged++
				return nil
			}
			// The earlier snapshot stops being whole: it no longer
			// claims to be.
			if oldWhole {
				if err := bucket.Delete(ctx, ManifestName); err != nil {
					return fmt.Errorf("archive: snapshot: delete the earlier snapshot's manifest: %w", err)
				}
				oldWhole = false
			}
		}
		size, sum, err := upload(ctx, bucket, path, name)
		if err != nil {
			return fmt.Errorf("archive: snapshot: upload %s: %w", name, err)
		}
		m.Files = append(m.Files, ManifestFile{Name: name, Size: size, SHA256: sum})
		r.Files++
		r.Bytes += size
		return nil
	})
}

// describeCheckpoint records in m what the checkpoint at cp holds: the
// chain it is of and the ranges staged (writes go on in the store
// meanwhile).
func describeCheckpoint(cp string, m *Manifest) error {
	snap, err := staging.Open(cp, staging.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("archive: snapshot: the checkpoint does not open: %w", err)
	}
	if id, ok := snap.Identity(); ok {
		m.Family, m.ChainID = id.Family.String(), id.ChainID
	}
	staged, err := snap.Staged(0, ^uint64(0))
	snap.Close()
	if err != nil {
		return err
	}
	for _, r := range staged {
		m.Staged = append(m.Staged, Gap{From: r.From, To: r.To})
	}
	return nil
}

// removeStale deletes what the earlier snapshot, or an interrupted one,
// left at the destination (objs) and m does not list, counting them in
// r.Removed.
func removeStale(ctx context.Context, bucket *blob.Bucket, objs map[string]bool, m Manifest, r *SnapshotReport) error {
	listed := map[string]bool{ManifestName: true}
	for _, f := range m.Files {
		listed[f.Name] = true
	}
	var stale []string
	for k := range objs {
		if !listed[k] {
			stale = append(stale, k)
		}
	}
	slices.Sort(stale)
	for _, k := range stale {
		if err := bucket.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("archive: snapshot: written, but %d of the %s it replaces are left (%s first): %w", len(stale)-r.Removed, Quantity(len(stale), "file"), k, err)
		}
		r.Removed++
	}
	return nil
}

// fileSum is the size and SHA-256 of the file at path.
func fileSum(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	return copySum(io.Discard, f)
}

// copySum copies src to dst and returns the bytes copied and their
// SHA-256, in hex.
func copySum(dst io.Writer, src io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), src)
	return n, hex.EncodeToString(h.Sum(nil)), err
}

func upload(ctx context.Context, bucket *blob.Bucket, path, name string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	w, err := bucket.NewWriter(ctx, name, nil)
	if err != nil {
		return 0, "", err
	}
	n, sum, err := copySum(w, f)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return n, sum, err
}

// RestoreReport is what Restore did.
type RestoreReport struct {
	Source string         `json:"source"`
	Dir    string         `json:"dir"`
	Files  int            `json:"files"`
	Bytes  int64          `json:"bytes"`
	Verify *StagingReport `json:"verify"`
	// NotStaged are the heights between the snapshot's staged ranges: not
	// staged when it was taken (a fetch was filling the store), so not
	// counted as gaps by the verify.
	NotStaged []Gap         `json:"not_staged,omitempty"`
	Duration  time.Duration `json:"duration_ns"`
}

// gapsBetween lists the heights between consecutive ranges.
func gapsBetween(staged []Gap) []Gap {
	var out []Gap
	for i := 1; i < len(staged); i++ {
		if staged[i].From > staged[i-1].To+1 {
			out = append(out, Gap{From: staged[i-1].To + 1, To: staged[i].From - 1})
		}
	}
	return out
}

// RestoreError is a snapshot that cannot be restored as it is: a file
// missing, of the wrong size or checksum, or a store that does not verify.
// Nothing is put at the destination.
type RestoreError struct {
	Source string
	Reason string
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("archive: restore from %s: %s", e.Source, e.Reason)
}

// Restore downloads the snapshot in bucket into dir (which must not exist
// or be empty): every file checked against the manifest's size and
// SHA-256, then the store opened and verified (every record's header and
// checksum, the index, the chain), all beside dir; only a snapshot that
// verifies is moved into place. A bad snapshot is a *RestoreError, or a
// *DataError with the report when the store does not verify.
func Restore(ctx context.Context, bucket *blob.Bucket, source, dir string) (*RestoreReport, error) {
	start := time.Now()
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, &NotEmptyError{Dir: dir}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("archive: restore: %w", err)
	}
	mb, err := bucket.ReadAll(ctx, ManifestName)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, &RestoreError{Source: source, Reason: ManifestName + " not found: no complete snapshot there"}
	}
	if err != nil {
		return nil, fmt.Errorf("archive: restore: read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil || m.Format != 1 {
		return nil, &RestoreError{Source: source, Reason: fmt.Sprintf("manifest unreadable (format %d): %v", m.Format, err)}
	}
	tmp := filepath.Clean(dir) + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	r := &RestoreReport{Source: source, Dir: dir}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Name < m.Files[j].Name })
	for _, f := range m.Files {
		if strings.Contains(f.Name, "..") || filepath.IsAbs(f.Name) {
			return nil, &RestoreError{Source: source, Reason: fmt.Sprintf("file name %q leaves the directory", f.Name)}
		}
		size, sum, err := download(ctx, bucket, f.Name, filepath.Join(tmp, filepath.FromSlash(f.Name)))
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, &RestoreError{Source: source, Reason: fmt.Sprintf("file %s is missing", f.Name)}
		}
		if err != nil {
			return nil, fmt.Errorf("archive: restore: download %s: %w", f.Name, err)
		}
		if size != f.Size || sum != f.SHA256 {
			return nil, &RestoreError{Source: source, Reason: fmt.Sprintf("file %s: %d bytes sha256 %s, the manifest says %d bytes %s", f.Name, size, sum, f.Size, f.SHA256)}
		}
		r.Files++
		r.Bytes += size
	}
	store, err := staging.Open(tmp, staging.Options{ReadOnly: true})
	if err != nil {
		return nil, &RestoreError{Source: source, Reason: "the restored store does not open: " + err.Error()}
	}
	rep, err := Verify(store, VerifyConfig{})
	store.Close()
	if err != nil {
		return nil, err
	}
	// A snapshot of a store being filled (a fetch fills it in any order)
	// holds gaps; those its manifest says were not staged are not damage.
	if gs := gapsBetween(m.Staged); rep.GapCount > 0 && slices.Equal(rep.Gaps, gs) && rep.GapCount == len(gs) {
		r.NotStaged = rep.Gaps
		rep.Gaps, rep.GapCount, rep.GapHeights = []Gap{}, 0, 0
	}
	r.Verify = rep
	if n := rep.Problems(); n > 0 {
		return r, &DataError{Check: "restore verify", Problems: n}
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return nil, err
	}
	os.Remove(dir) // an empty directory given as the destination
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("archive: restore: move into place: %w", err)
	}
	ok = true
	r.Duration = time.Since(start)
	return r, nil
}

func download(ctx context.Context, bucket *blob.Bucket, name, path string) (int64, string, error) {
	rd, err := bucket.NewReader(ctx, name, nil)
	if err != nil {
		return 0, "", err
	}
	defer rd.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, "", err
	}
	n, sum, err := copySum(f, rd)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, sum, err
}
