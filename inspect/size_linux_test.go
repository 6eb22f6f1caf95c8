package inspect

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// A large input read whole lies in memory advised huge pages (its VMA
// carries "hg" in smaps): the huge pages that spare map thousands of page
// faults are asked for. (That a small one is not advised cannot be seen
// this way: it may land in heap an earlier large read or block advised,
// as it did under the race detector.)
func TestReadAllAdvisesHuge(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		want bool
	}{
		{"large", 8 << 20, true},
	} {
		got, err := ReadAll(strings.NewReader(strings.Repeat("x", tc.size)))
		if err != nil || len(got) != tc.size {
			t.Fatalf("%s: %d bytes, %v", tc.name, len(got), err)
		}
		// The middle of the buffer: its first and last pages may share a
		// VMA with memory that is not advised.
		mid := uintptr(unsafe.Pointer(unsafe.SliceData(got))) + uintptr(tc.size/2)
		hg, err := vmaHuge(mid)
		if err != nil {
			t.Fatal(err)
		}
		if hg != tc.want {
			t.Errorf("%s: VMA advised huge pages = %v, want %v", tc.name, hg, tc.want)
		}
	}
}

// vmaHuge reports whether the mapping holding addr has the VmFlag hg
// (MADV_HUGEPAGE).
func vmaHuge(addr uintptr) (bool, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := vmaRange(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(line+" ", " hg "), nil
		}
	}
	return false, fmt.Errorf("no mapping holds %#x (%v)", addr, sc.Err())
}

// vmaRange parses the "lo-hi perms ..." line that starts a mapping.
func vmaRange(line string) (lo, hi uintptr, ok bool) {
	r, _, found := strings.Cut(line, " ")
	a, b, dash := strings.Cut(r, "-")
	if !found || !dash {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(a, 16, 64)
	h, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}
