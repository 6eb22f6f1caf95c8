package plugin

import (
	"os"
	"syscall"
)

// maxRSS is the peak resident set size of a finished process (Linux
// reports it in KiB).
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}
