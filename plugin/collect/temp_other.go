//go:build !unix

package collect

import "io/fs"

// ownedByUser: the temporary directory is the user's own on Windows.
func ownedByUser(fs.FileInfo) bool { return true }
