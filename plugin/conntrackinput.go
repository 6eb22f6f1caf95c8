package plugin

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// The kernel's connection tracking state, read beside the rules: the table
// (--from-conntrack, a bundle's conntrack.txt), the per-CPU counters
// (--from-conntrack-stats, two reads for rates) and the sysctls
// (--from-sysctls). Each is read under the conntrack cap, on the load's
// bounded workers, and only kept in Loaded: the verdicts are diagnose's.

// ConntrackStatsRead is one read of /proc/net/stat/nf_conntrack and when it
// was taken: the bundle's record, a file's modification time, or zero
// (stdin).
type ConntrackStatsRead struct {
	Stats  *conntrack.Stats
	At     time.Time
	Source string
}

// conntrackTasks read the conntrack inputs, a task each.
func (s *inputSet) conntrackTasks() []func() loadResult {
	var tasks []func() loadResult
	for _, name := range s.Conntrack {
		tasks = append(tasks, func() loadResult {
			t, err := readKernelInput(s, name, func(r io.Reader, _ string) (*conntrack.Table, error) {
				return conntrack.ReadTable(r, conntrack.DefaultLimits(), nil)
			})
			return loadResult{ct: t, err: err}
		})
	}
	for _, name := range s.ConntrackStats {
		tasks = append(tasks, func() loadResult {
			st, err := readKernelInput(s, name, func(r io.Reader, _ string) (*conntrack.Stats, error) { return conntrack.ReadStats(r) })
			if err != nil {
				return loadResult{err: err}
			}
			return loadResult{stats: &ConntrackStatsRead{Stats: st, At: s.statsTime(name), Source: s.source(name)}}
		})
	}
	for _, name := range s.Sysctls {
		tasks = append(tasks, func() loadResult {
			sc, err := readKernelInput(s, name, func(r io.Reader, _ string) (*conntrack.Sysctls, error) { return conntrack.ReadSysctls(r) })
			return loadResult{sysctls: sc, err: err}
		})
	}
	return tasks
}

// readKernelInput opens name under its cap and reads it. These formats are
// not among those input.Expect tells apart: a wrong file shows as lines
// not understood, in the result's warnings.
func readKernelInput[T any](s *inputSet, name string, read func(io.Reader, string) (T, error)) (T, error) {
	var zero T
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return zero, fmt.Errorf("%s is a directory: pass a bundle's folder with --from-bundle", name)
	}
	rc, src, err := s.open(name)
	if err != nil {
		return zero, err
	}
	defer rc.Close()
	return read(rc, src) // a reader's error names src (cappedReader's)
}

func (s *inputSet) source(name string) string {
	if name == "-" {
		return "<stdin>"
	}
	return name
}

// statsTime is when a read of the counters was taken: as the bundle's
// manifest records it, else the file's modification time; zero for stdin.
func (s *inputSet) statsTime(name string) time.Time {
	if bf, ok := s.bundleFiles[name]; ok {
		if ct := bf.bundle.Manifest.Conntrack; ct != nil {
			for _, r := range ct.Stats {
				if r.Path == bf.file.Path {
					return r.At
				}
			}
		}
		return time.Time{}
	}
	if name == "-" {
		return time.Time{}
	}
	if st, err := os.Stat(name); err == nil {
		return st.ModTime().UTC()
	}
	return time.Time{}
}

// addConntrack joins one result's conntrack state into l: tables are
// joined entry by entry (conntrack -L and -L -f ipv6 saved apart), stats
// kept in the order read.
func (l *Loaded) addConntrack(r loadResult) {
	switch {
	case r.ct != nil:
		if l.Conntrack == nil {
			l.Conntrack = r.ct
			return
		}
		joinTables(l.Conntrack, r.ct)
	case r.stats != nil:
		l.ConntrackStats = append(l.ConntrackStats, r.stats)
	case r.sysctls != nil:
		if l.Sysctls == nil {
			l.Sysctls = r.sysctls
			return
		}
		for k, v := range r.sysctls.Values {
			l.Sysctls.Values[k] = v // the later file wins
		}
		l.Sysctls.Absent = append(l.Sysctls.Absent, r.sysctls.Absent...)
		l.Sysctls.Warnings = append(l.Sysctls.Warnings, r.sysctls.Warnings...)
	}
}

// joinTables appends b's entries to a's, within the entries' cap.
func joinTables(a, b *conntrack.Table) {
	if a.Format != b.Format && b.Format != "" {
		if a.Format == "" {
			a.Format = b.Format
		} else {
			a.Format = conntrack.FormatMixed
		}
	}
	room := max(conntrack.DefaultLimits().MaxEntries-len(a.Entries), 0)
	kept := b.Entries[:min(room, len(b.Entries))]
	a.Entries = append(a.Entries, kept...)
	if left := int64(len(b.Entries) - len(kept)); left > 0 {
		a.Truncated.Incomplete = true
		a.Truncated.EntriesLeftOut += left
		a.Warnings = append(a.Warnings, fmt.Sprintf("INCOMPLETE: the tables given hold more than %d entries together; %d left out", conntrack.DefaultLimits().MaxEntries, left))
	}
	if a.Shown >= 0 && b.Shown >= 0 {
		a.Shown += b.Shown
	} else {
		a.Shown = -1
	}
	t := &a.Truncated
	t.Incomplete = t.Incomplete || b.Truncated.Incomplete
	t.EntriesLeftOut += b.Truncated.EntriesLeftOut
	t.LongLines += b.Truncated.LongLines
	t.LongLineBytes += b.Truncated.LongLineBytes
	t.Unread = t.Unread || b.Truncated.Unread
	t.BytesRead += b.Truncated.BytesRead
	a.Warnings = append(a.Warnings, b.Warnings...)
}

// finishConntrack completes what was read: the table's sizes from the
// sysctls, the counters in time order, and what the node-side cap left
// out of a collected table.
func (s *inputSet) finishConntrack(l *Loaded) {
	if l.Conntrack != nil && l.Sysctls != nil {
		l.Conntrack.SetSizes(*l.Sysctls)
	}
	if !slices.ContainsFunc(l.ConntrackStats, func(r *ConntrackStatsRead) bool { return r.At.IsZero() }) {
		slices.SortStableFunc(l.ConntrackStats, func(a, b *ConntrackStatsRead) int { return a.At.Compare(b.At) })
	}
	if l.Conntrack == nil || s.collected == nil || s.collected.Conntrack == nil || len(s.Conntrack) != s.bundleConntrack {
		return // no table, or not (only) the bundle's
	}
	if ct := s.collected.Conntrack; ct.Capped {
		l.Conntrack.Truncated.Incomplete = true
		l.Conntrack.Warnings = append(l.Conntrack.Warnings, collect.ConntrackCapNote(ct))
	}
}

// bundleConntrackList is where addBundle puts a bundle's file of kind, or
// nil when the user's own files of that kind win over it.
func (s *inputSet) bundleConntrackList(kind string) *[]string {
	var list *[]string
	var given []string
	switch kind {
	case collect.KindConntrack:
		list, given = &s.Conntrack, s.given.Conntrack
		if len(given) == 0 {
			s.bundleConntrack++
		}
	case collect.KindConntrackStats:
		list, given = &s.ConntrackStats, s.given.ConntrackStats
	case collect.KindSysctls:
		list, given = &s.Sysctls, s.given.Sysctls
	default:
		return nil
	}
	if len(given) > 0 {
		return nil
	}
	return list
}
