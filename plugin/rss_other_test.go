//go:build !linux

package plugin

import "os"

// maxRSS is not measured here: the unit of Maxrss differs between systems.
func maxRSS(*os.ProcessState) int64 { return 0 }
