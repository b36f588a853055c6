//go:build unix

package staging

import (
	"os"
	"syscall"
)

// allocated is the space the filesystem holds for a file, in bytes.
func allocated(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Blocks) * 512, true // st_blocks counts 512-byte units on every unix
}
