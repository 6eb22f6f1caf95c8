package inspect

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// ReadAll returns all of r with or without a size, across chunks, and
// what came before a read error together with the error.
func TestReadAll(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 100_000) // 1.6 MB: several chunks
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		r    io.Reader
		size int64
		want string
		err  error
	}{
		{"sized", strings.NewReader(big), int64(len(big)), big, nil},
		{"unsized", iotest.HalfReader(bytes.NewBufferString(big)), 0, big, nil},
		{"empty", iotest.OneByteReader(strings.NewReader("")), 0, "", nil},
		{"error", io.MultiReader(iotest.HalfReader(strings.NewReader(big)), iotest.ErrReader(boom)), 0, big, boom},
	} {
		if got := InputSize(tc.r); got != tc.size {
			t.Errorf("%s: InputSize %d, want %d", tc.name, got, tc.size)
		}
		got, err := ReadAll(tc.r)
		if string(got) != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%s: %d bytes, %v; want %d bytes, %v", tc.name, len(got), err, len(tc.want), tc.err)
		}
	}
}
