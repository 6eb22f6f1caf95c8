//go:build race

package main

// raceEnabled: the race detector's instrumentation allocates too, and
// slows the parse of big inputs tenfold: the bounds are measured without it.
const raceEnabled = true
