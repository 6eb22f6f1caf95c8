//go:build !linux

package plugin

import "time"

// peakRSSSelf is not measured here.
func peakRSSSelf() int64 { return 0 }

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
