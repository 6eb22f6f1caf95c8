package conntrack

import (
	"fmt"
	"io"
	"strconv"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// Stats are the counters of /proc/net/stat/nf_conntrack: a header line
// naming the columns, then a line of 8-digit hex numbers per CPU. The set of
// columns depends on the kernel (6.18: entries clashres found new invalid
// ignore delete chainlength insert insert_failed drop early_drop icmp_error
// expect_new expect_create expect_delete search_restart; older kernels had
// searched, delete_list, ...): columns are read by the header's names.
type Stats struct {
	Columns  []string   // as the header names them, in order
	CPUs     [][]uint64 // per CPU, one value per column
	Warnings []string
}

// gauges are columns that are not per-CPU counters: the kernel prints the
// table's whole entry count on every CPU's line (ct_cpu_seq_show), so it
// is read once, not summed.
var gauges = map[string]bool{"entries": true}

// The counters a table-pressure diagnosis reads.
const (
	StatEntries      = "entries"
	StatInsertFailed = "insert_failed"
	StatDrop         = "drop"
	StatEarlyDrop    = "early_drop"
)

// maxStatColumns and maxCPUs bound a stats file (a real one: 17 columns, a
// line per possible CPU).
const (
	maxStatColumns = 64
	maxCPUs        = 8192
)

// ReadStats reads /proc/net/stat/nf_conntrack. A line that is not the
// header's width of hex numbers is a warning, not an error.
func ReadStats(r io.Reader) (*Stats, error) {
	lim := Limits{MaxLineBytes: 4096, MaxBytes: 4 << 20}.normalized()
	s := &Stats{}
	var trunc Truncation
	lr := newLineReader(r, lim, &trunc)
	w := scan.Warnings{Max: lim.MaxWarnings}
	var f [][]byte
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		f = fields(f, trimPasted(line))
		if len(f) == 0 {
			continue
		}
		if s.Columns == nil {
			if why := s.header(f); why != "" {
				w.Line(lr.no, line, why)
			}
			continue
		}
		if len(s.CPUs) >= maxCPUs {
			w.Line(lr.no, line, "more CPUs than "+strconv.Itoa(maxCPUs))
			continue
		}
		if why := s.row(f); why != "" {
			w.Line(lr.no, line, why)
		}
	}
	if s.Columns == nil {
		w.Add("no header line naming the columns")
	}
	s.Warnings = append(w.Done(), trunc.warnings(lim)...)
	return s, lr.err
}

func (s *Stats) header(f [][]byte) string {
	if len(f) > maxStatColumns {
		return "too many columns"
	}
	if string(f[0]) != StatEntries {
		return "the header starts with entries"
	}
	cols := make([]string, len(f))
	for i, c := range f {
		for _, b := range c {
			if !(b >= 'a' && b <= 'z' || b == '_' || b >= '0' && b <= '9') {
				return "a column name that is no word"
			}
		}
		cols[i] = string(c)
	}
	s.Columns = cols
	return ""
}

func (s *Stats) row(f [][]byte) string {
	if len(f) != len(s.Columns) {
		return fmt.Sprintf("%d values for %d columns", len(f), len(s.Columns))
	}
	vals := make([]uint64, len(f))
	for i, v := range f {
		n, err := strconv.ParseUint(string(v), 16, 64)
		if err != nil {
			return "a value that is no hex number"
		}
		vals[i] = n
	}
	s.CPUs = append(s.CPUs, vals)
	return ""
}

// Total is a column summed over the CPUs (a gauge: its value); ok is false
// when the kernel has no such column or no CPU line was read.
func (s *Stats) Total(col string) (uint64, bool) {
	i := s.index(col)
	if i < 0 || len(s.CPUs) == 0 {
		return 0, false
	}
	if gauges[col] {
		return s.CPUs[0][i], true
	}
	var sum uint64
	for _, cpu := range s.CPUs {
		sum += cpu[i]
	}
	return sum, true
}

// Totals are every column's Total.
func (s *Stats) Totals() map[string]uint64 {
	out := make(map[string]uint64, len(s.Columns))
	for _, c := range s.Columns {
		out[c], _ = s.Total(c)
	}
	return out
}

func (s *Stats) index(col string) int {
	for i, c := range s.Columns {
		if c == col {
			return i
		}
	}
	return -1
}

// Diff is what changed from before to after, per column present in both:
// counters grow (a per-CPU counter is an unsigned int, so each CPU's change
// is taken modulo 2^32: a wrap reads as growth), a gauge may fall.
func Diff(before, after *Stats) map[string]int64 {
	out := map[string]int64{}
	sameCPUs := len(before.CPUs) == len(after.CPUs)
	for _, col := range after.Columns {
		bi, ai := before.index(col), after.index(col)
		if bi < 0 || len(before.CPUs) == 0 || len(after.CPUs) == 0 {
			continue
		}
		switch {
		case gauges[col]:
			out[col] = int64(after.CPUs[0][ai]) - int64(before.CPUs[0][bi])
		case sameCPUs:
			var d uint64
			for c := range after.CPUs {
				d += (after.CPUs[c][ai] - before.CPUs[c][bi]) & (1<<32 - 1)
			}
			out[col] = int64(d)
		default: // CPUs came or went between the reads: the sums
			b, _ := before.Total(col)
			a, _ := after.Total(col)
			out[col] = int64(a) - int64(b)
		}
	}
	return out
}
