package nft

import (
	"runtime"
	"sync"
)

// Analysing a rule (tokens, jumps, DNAT targets, numgen maps) depends on
// its text alone, so the readers analyse the rules of a table on every
// core, each worker into its own rules.

// parallelMin is the number of rules below which one goroutine does it.
const parallelMin = 4096

// minChunk is the fewest items forChunks hands a worker at a time.
const minChunk = 256

// forChunks calls fn(from, to) for consecutive chunks of [0, n), on up to
// GOMAXPROCS goroutines at once, and returns when all are done. fn gets a
// worker number (0 ≤ w < workers) for its scratch state.
func forChunks(n int, fn func(w, from, to int)) {
	parts := 8 * runtime.GOMAXPROCS(0) // so that no worker ends much after the others
	runChunks(n, parallelMin, max(minChunk, (n+parts-1)/parts), fn)
}

// runChunks is forChunks with chunks of chunk items, on one goroutine
// when n < serialBelow.
func runChunks(n, serialBelow, chunk int, fn func(w, from, to int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < serialBelow || workers < 2 {
		fn(0, 0, n)
		return
	}
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				from := next
				next += chunk
				mu.Unlock()
				if from >= n {
					return
				}
				fn(w, from, min(from+chunk, n))
			}
		}()
	}
	wg.Wait()
}
