//go:build unix

package collect

import (
	"syscall"
	"testing"
)

func mkfifo(t *testing.T, path string) bool {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Logf("mkfifo: %v", err)
		return false
	}
	return true
}
