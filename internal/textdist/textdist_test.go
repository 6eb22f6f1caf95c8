package textdist

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"frontend", "frontend", 3, 0},
		{"frontnd", "frontend", 3, 1},
		{"kitten", "sitting", 3, 3},
		{"abc", "xyzxyzxyz", 2, 3}, // over the limit: limit+1
		{"", "ab", 3, 2},
	} {
		if got := Levenshtein(tc.a, tc.b, tc.limit); got != tc.want {
			t.Errorf("Levenshtein(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.limit, got, tc.want)
		}
	}
}
