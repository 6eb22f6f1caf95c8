//go:build !linux

package inspect

import "unsafe"

// adviseHuge does nothing where there is no madvise(MADV_HUGEPAGE).
func adviseHuge(unsafe.Pointer, uintptr) {}
