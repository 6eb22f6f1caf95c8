package correlate

import "testing"

// onlyEntry keeps the entry whose data is the endpoint or chain itself,
// not one that merely contains it.
func TestOnlyEntry(t *testing.T) {
	for _, tc := range []struct{ rule, want, got string }{
		{"numgen random mod 2 map { 0 : 10.0.0.1 . 8080, 1 : 10.0.0.1 . 80 }", "10.0.0.1 . 80",
			"numgen random mod 2 map { 1 : 10.0.0.1 . 80 }"},
		{"numgen random mod 2 map { 0 : 10.0.0.1 . 80, 1 : 10.0.0.1 . 8080 }", "10.0.0.1 . 8080",
			"numgen random mod 2 map { 1 : 10.0.0.1 . 8080 }"},
		{"numgen random mod 3 vmap { 0 : goto endpoint-A__x, 1 : goto endpoint-A_, 2 : jump endpoint-B }", "endpoint-A_",
			"numgen random mod 3 vmap { 1 : goto endpoint-A_ }"},
		{"numgen random mod 3 vmap { 0 : goto endpoint-A__x, 1 : goto endpoint-A_, 2 : jump endpoint-B }", "endpoint-B",
			"numgen random mod 3 vmap { 2 : jump endpoint-B }"},
		// Not there: the rule whole.
		{"numgen random mod 1 vmap { 0 : goto endpoint-A }", "endpoint-C", "numgen random mod 1 vmap { 0 : goto endpoint-A }"},
		{"ip daddr 10.0.0.1 dnat to 10.0.0.2:80", "10.0.0.2 . 80", "ip daddr 10.0.0.1 dnat to 10.0.0.2:80"},
	} {
		if got := onlyEntry(map[string]mapEntries{}, tc.rule, tc.want); got != tc.got {
			t.Errorf("onlyEntry(%q, %q) = %q, want %q", tc.rule, tc.want, got, tc.got)
		}
	}
}
