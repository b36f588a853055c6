//go:build !blockhaul_nocloud

package archive

// The gs:// (Google Cloud Storage) and azblob:// (Azure Blob Storage)
// schemes for snapshot and restore URLs. Their SDKs add about 34 MB to the
// binary; -tags blockhaul_nocloud leaves them out (file:// and s3:// stay).
import (
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
)
