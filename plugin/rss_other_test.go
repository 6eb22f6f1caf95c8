//go:build !linux

package plugin

import (
	"os"
	"time"
)

// maxRSS is not measured here: the unit of Maxrss differs between systems.
func maxRSS(*os.ProcessState) int64 { return 0 }

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
