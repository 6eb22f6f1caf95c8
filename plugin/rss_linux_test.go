package plugin

import (
	"os"
	"syscall"
	"time"
)

// maxRSS is the peak resident set size of a finished process (Linux
// reports it in KiB).
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}

// cpuTime is the CPU time (user and system) this process has used: on a
// shared machine it says what a command costs when the wall clock also
// counts others' work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
