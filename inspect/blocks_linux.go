package inspect

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge asks the kernel for huge pages under the n bytes at p (the
// whole 4 KiB pages of them): MADV_HUGEPAGE, which matters where
// transparent huge pages are "madvise" (the default of many
// distributions), and is harmless where they are "always" or "never". The
// memory is a fresh block of the Go heap, not yet touched. An error is no
// matter: the block works as well with small pages.
func adviseHuge(p unsafe.Pointer, n uintptr) {
	const page = 4 << 10
	start := (uintptr(p) + page - 1) &^ (page - 1)
	end := (uintptr(p) + n) &^ (page - 1)
	if end > start {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_HUGEPAGE)
	}
}
