//go:build !unix

package collect

import "testing"

func mkfifo(t *testing.T, path string) bool { return false }
