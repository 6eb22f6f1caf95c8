package collect

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Temporary directories the plugin fills (an extracted bundle, a live
// collection) are tracked, so that a second Ctrl-C, which quits without
// waiting for the normal clean-up, still removes them (RemoveTemps).
var temps = struct {
	sync.Mutex
	dirs map[string]bool
}{dirs: map[string]bool{}}

// MkdirTemp is os.MkdirTemp, tracked until RemoveTemp. A folder of the
// plugin's in the temporary directory (dir "", a pattern of tempPrefix:
// a live read's, an archive's extraction) first has those of its pattern
// that a killed process left removed (removeStaleTemps).
func MkdirTemp(dir, pattern string) (string, error) {
	if dir == "" && strings.HasPrefix(pattern, tempPrefix) && !strings.Contains(pattern, "*") {
		removeStaleTemps(pattern)
	}
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

// bundleTempPrefix names the folders OpenBundle extracts an archive into
// (os.MkdirTemp adds digits).
const bundleTempPrefix = "proxyrules-bundle-"

// tempPrefix starts the name of every folder of the plugin's in the
// temporary directory: a live read collects into `proxyrules-<digits>`
// (plugin.Loader), an archive is extracted into bundleTempPrefix's.
const tempPrefix = "proxyrules-"

// staleTempAge is when a folder of the plugin's (an extraction, a live
// read) is left over: one lives as long as the command reading it (its
// files are all written within the first minutes), and no command runs
// longer than the longest --pod-deadline, an hour. Older ones were left by a process that was
// killed (out of memory, SIGKILL), which no clean-up of its own outlives.
const staleTempAge = time.Hour

// cleanedTemps are the temporary directories and patterns already
// cleaned by this process.
var cleanedTemps sync.Map

// removeStaleTemps removes, once per process, temporary directory and
// pattern, the folders of that pattern older than staleTempAge that this
// user owns: only folders named as MkdirTemp names them (the pattern and
// digits: `proxyrules-` never matches an extraction folder), never a link.
func removeStaleTemps(pattern string) {
	dir := os.TempDir()
	if _, done := cleanedTemps.LoadOrStore(dir+"\x00"+pattern, true); done {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-staleTempAge)
	for _, e := range ents {
		digits, ok := strings.CutPrefix(e.Name(), pattern)
		if !ok || !e.IsDir() || digits == "" || strings.Trim(digits, "0123456789") != "" {
			continue
		}
		p := filepath.Join(dir, e.Name())
		st, err := os.Lstat(p)
		if err != nil || !st.IsDir() || st.ModTime().After(cutoff) || !ownedByUser(st) {
			continue
		}
		os.RemoveAll(p)
	}
}
