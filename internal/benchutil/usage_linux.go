// Package benchutil measures what a benchmark costs beyond its wall clock:
// CPU time and peak resident memory.
package benchutil

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PeakRSS is this process's peak resident set size in bytes (VmHWM):
// the peak of its own address space since exec. (The rusage of a child
// would not do: Linux counts the parent's pages the child had before its
// exec.)
func PeakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// CPUTime is the CPU time (user and system) this process has used: on a
// shared machine it says what a command costs when the wall clock also
// counts others' work.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
