//go:build !linux

package benchutil

import "time"

// PeakRSS is not measured here.
func PeakRSS() int64 { return 0 }

// CPUTime is not measured here.
func CPUTime() time.Duration { return 0 }
