package collect

import (
	"os"
	"sync"
)

// Temporary directories the plugin fills (an extracted bundle, a live
// collection) are tracked, so that a second Ctrl-C, which quits without
// waiting for the normal clean-up, still removes them (RemoveTemps).
var temps = struct {
	sync.Mutex
	dirs map[string]bool
}{dirs: map[string]bool{}}

// MkdirTemp is os.MkdirTemp, tracked until RemoveTemp.
func MkdirTemp(dir, pattern string) (string, error) {
	d, err := os.MkdirTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	temps.Lock()
	temps.dirs[d] = true
	temps.Unlock()
	return d, nil
}

// RemoveTemp removes a directory made by MkdirTemp and all it holds.
func RemoveTemp(dir string) error {
	err := os.RemoveAll(dir)
	temps.Lock()
	delete(temps.dirs, dir)
	temps.Unlock()
	return err
}

// RemoveTemps removes every directory MkdirTemp made that is still there:
// the last thing the process does when it is told to quit at once.
func RemoveTemps() {
	temps.Lock()
	defer temps.Unlock()
	for d := range temps.dirs {
		os.RemoveAll(d)
		delete(temps.dirs, d)
	}
}
