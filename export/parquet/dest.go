package parquet

import (
	"path/filepath"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
)

// OpenDir opens a local directory as a destination, made if missing when
// create is set. Each file is written beside its final name
// (NAME.<hex>.tmp) and renamed when whole, so that a directory on another
// mount than the temp directory works; no .attrs sidecar is written, so
// the directory holds the segments and the manifest only. A file:// URL
// gets the same with ?metadata=skip&no_tmp_dir=true.
func OpenDir(dir string, create bool) (*blob.Bucket, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return fileblob.OpenBucket(abs, &fileblob.Options{CreateDir: create, Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
}
