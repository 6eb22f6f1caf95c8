//go:build race

package metrics

// raceEnabled: the race detector's instrumentation allocates too, so
// allocation bounds are measured without it (make unit).
const raceEnabled = true
