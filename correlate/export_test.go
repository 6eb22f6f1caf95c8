package correlate

import (
	"bytes"
	"io"
)

// ReadObjectsGeneric reads objects with the generic decoder only, for the
// benchmarks' comparison.
func ReadObjectsGeneric(r io.Reader, source string) (*Objects, error) {
	data, err := readAll(r)
	if err != nil {
		return nil, err
	}
	return decodeGeneric(bytes.NewReader(data), source)
}
