//go:build unix

package collect

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByUser: a folder of another user is not this process's to clean.
func ownedByUser(st fs.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(s.Uid) == os.Getuid()
}
