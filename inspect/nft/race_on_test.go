//go:build race

package nft

// raceEnabled: the race detector's instrumentation allocates too, and
// slows the tests of big inputs tenfold: those are run without it.
const raceEnabled = true
