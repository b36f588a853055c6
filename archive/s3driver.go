package archive

// The s3:// scheme for snapshot and restore URLs.
import _ "gocloud.dev/blob/s3blob"
