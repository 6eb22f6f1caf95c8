package inspect

import (
	"testing"
	"unsafe"
)

func TestBlocksTake(t *testing.T) {
	type pair struct {
		a, b string
		n    int
	}
	var b Blocks[pair]
	if got := b.Take(0); got == nil || len(got) != 0 {
		t.Fatalf("Take(0) = %#v, want empty and not nil", got)
	}
	size := int(unsafe.Sizeof(pair{}))
	tests := []struct {
		name string
		n    int
	}{
		{"one", 1},
		{"a few", 7},
		{"more than the first block", 2 * minBlockBytes / size},
		{"more than the largest block", maxBlockBytes/size + 1},
		{"after a big one", 3},
	}
	var taken [][]pair
	for _, tc := range tests {
		s := b.Take(tc.n)
		if len(s) != tc.n || cap(s) != tc.n {
			t.Fatalf("%s: Take(%d): len %d cap %d", tc.name, tc.n, len(s), cap(s))
		}
		for i := range s {
			if s[i] != (pair{}) {
				t.Fatalf("%s: value %d not zero: %+v", tc.name, i, s[i])
			}
			s[i] = pair{a: tc.name, n: i}
		}
		taken = append(taken, s)
	}
	// Nothing handed out later wrote over what was handed out before.
	for i, tc := range tests {
		for j, v := range taken[i] {
			if v != (pair{a: tc.name, n: j}) {
				t.Fatalf("%s: value %d overwritten: %+v", tc.name, j, v)
			}
		}
	}
}

func TestBlocksOne(t *testing.T) {
	var b Blocks[int64]
	seen := map[*int64]bool{}
	n := 2 * minBlockBytes / 8 // across blocks
	for i := range n {
		p := b.One()
		if seen[p] || *p != 0 {
			t.Fatalf("One() #%d: %p again or not zero (%d)", i, p, *p)
		}
		seen[p] = true
		*p = int64(i)
	}
}

func TestTextString(t *testing.T) {
	var tx Text
	tests := [][]byte{nil, []byte("a"), []byte("KUBE-SVC-ABCDEFGHIJKLMNOP"), make([]byte, minBlockBytes+1)}
	var want, got []string
	for _, in := range tests {
		want = append(want, string(in))
		got = append(got, tx.String(in))
	}
	for _, in := range tests {
		for i := range in {
			in[i] = 'X' // the strings are copies: this changes none
		}
	}
	for i := range tests {
		if got[i] != want[i] {
			t.Fatalf("String(%.20q) = %.20q", want[i], got[i])
		}
	}
}
