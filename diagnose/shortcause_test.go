package diagnose

import "testing"

// A verdict names a finding's cause by its first clause, kept short.
func TestShortCause(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"0 of 3 endpoints ready: clients get connection refused (REJECT); check …", "0 of 3 endpoints ready"},
		{"no endpoints; more", "no endpoints"},
		{"endpoint chain KUBE-SEP-X of 10.0.0.1:80 is empty (flushed by hand?): the kernel skips it", "endpoint chain KUBE-SEP-X of 10.0.0.1:80 is empty"},
		{"a clause with no separator that goes on for far longer than sixty columns of text allow", "a clause with no separator that goes on for far longer …"},
	} {
		if got := shortCause(tc.msg); got != tc.want {
			t.Errorf("shortCause(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}
