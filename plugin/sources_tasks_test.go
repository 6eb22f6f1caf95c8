package plugin

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
)

// A load parses at most workers files at once (every file of a bundle at
// once took 7.9 GB for two metrics files of 64 MiB), and its result is
// still that of reading them one after another: results in the order
// given, the first error in that order returned.
func TestLoadRunTasksBounded(t *testing.T) {
	for _, tt := range []struct{ tasks, workers int }{{8, 2}, {31, 3}, {3, 8}, {5, 1}} {
		t.Run(fmt.Sprintf("%d tasks, %d workers", tt.tasks, tt.workers), func(t *testing.T) {
			var running, most atomic.Int32
			var mu sync.Mutex
			var finished []int
			tasks := make([]func() loadResult, tt.tasks)
			for i := range tasks {
				tasks[i] = func() loadResult {
					n := running.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(time.Millisecond) // let the others start, if they may
					running.Add(-1)
					mu.Lock()
					finished = append(finished, i)
					mu.Unlock()
					if i%2 == 1 {
						return loadResult{err: fmt.Errorf("file %d", i)}
					}
					return loadResult{m: &metrics.Metrics{Source: fmt.Sprint(i)}}
				}
			}
			results := runTasks(tasks, tt.workers)
			if got := int(most.Load()); got > tt.workers {
				t.Errorf("%d tasks ran at once, want at most %d", got, tt.workers)
			}
			for i, r := range results {
				if i%2 == 1 && (r.err == nil || r.err.Error() != fmt.Sprintf("file %d", i)) || i%2 == 0 && (r.m == nil || r.m.Source != fmt.Sprint(i)) {
					t.Errorf("result %d = %+v, want task %d's", i, r, i)
				}
			}
			if len(finished) != tt.tasks {
				t.Errorf("%d tasks ran, want %d", len(finished), tt.tasks)
			}
			if tt.tasks > 1 {
				_, err := joinResults(results, 0)
				if want := "file 1"; err == nil || !errors.Is(err, results[1].err) {
					t.Errorf("joinResults: %v, want %q, the first in the order given", err, want)
				}
			}
		})
	}
}
