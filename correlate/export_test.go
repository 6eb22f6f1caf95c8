package correlate

import (
	"bytes"
	"io"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// ReadObjectsGeneric reads objects with the generic decoder only, for the
// benchmarks' comparison.
func ReadObjectsGeneric(r io.Reader, source string) (*Objects, error) {
	data, err := inspect.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return decodeGeneric(bytes.NewReader(data), source)
}

// DecodeFast is the fast objects decoder alone, for its benchmark.
func DecodeFast(data []byte) (*Objects, bool) {
	o, _, ok := decodeFast(data, nil)
	return o, ok
}

// SetExplainPerWorker sets how many Services make a worker of ExplainAll,
// so small fixtures are explained by several goroutines; it returns the
// value to restore.
func SetExplainPerWorker(n int) int {
	old := explainPerWorker
	explainPerWorker = n
	return old
}
